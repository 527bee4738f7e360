/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internal to agent/: attaching a query's wildcard uprobes with multi-uprobe links
 * (probes/uprobe_multi.c).  Before load, agent_multi_prepare() picks the programs that will use
 * them: every uprobe or uretprobe program with at least AGENT_MULTI_MIN_SITES attach points,
 * when the kernel has multi-uprobe links.  A program with one site keeps its perf-event link
 * (the same cost either way).  After load, agent_multi_attach() attaches all the sites of one
 * such program at once, each with the cookie of its attach point (the `probe` builtin).
 */
#ifndef WEFT_AGENT_ATTACH_MULTI_H
#define WEFT_AGENT_ATTACH_MULTI_H
#include <stdint.h>
#include <sys/types.h>
#include <bpf/libbpf.h>
#include "compiler/plan.h"
#include "probes/probes.h"

#define AGENT_MULTI_MIN_SITES 2

/* A bit per plan program (PLAN_MAX_PROGS is 64) that was made a multi-uprobe program. */
uint64_t agent_multi_prepare(struct bpf_object *obj, const struct plan *p);

/* Attaches every attach point of program `prog_idx` of p (whose object program is prog) with
 * multi-uprobe links, appended to links.  0, or -1 with err filled and links as they were. */
int agent_multi_attach(const struct plan *p, int prog_idx, struct bpf_program *prog, pid_t pid,
		       struct probe_links *links, struct probe_err *err);

#endif
