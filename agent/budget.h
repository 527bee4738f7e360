/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internal to agent/: the CPU budget of one query (budget.c).  query.c makes one after load
 * when agent_query_opts.cpu_budget > 0 and asks it for a verdict in agent_query_budget()
 * (agent/agent.h has the report and the rules).
 */
#ifndef WEFT_AGENT_BUDGET_H
#define WEFT_AGENT_BUDGET_H
#include <bpf/libbpf.h>
#include "agent/agent.h"
#include "compiler/plan.h"

struct agent_budget;

/* Starts measuring obj's programs (loaded, of plan p) against pct % of one CPU: with the
 * object's cost meter, or, in an object without one, the kernel's BPF run-time statistics,
 * turned on for as long as the budget lives.  NULL with errno
 * (EPERM, EINVAL: the kernel cannot keep them) and a reason in why[whysz]. */
struct agent_budget *agent_budget_new(struct bpf_object *obj, const struct plan *p, double pct,
				      char *why, size_t whysz);

/* 1 and r filled when a window of at least AGENT_CPU_BUDGET_WINDOW_NS (less 10 %) has passed
 * since the last one; 0 when none has (r untouched); -errno if the statistics cannot be
 * read. */
int agent_budget_check(struct agent_budget *b, uint64_t now_ns, struct agent_budget_report *r);

void agent_budget_free(struct agent_budget *b);

/* The cost meter's totals of program prog of obj (agent_query_cost() says what they are). */
int agent_cost_read(struct bpf_object *obj, int prog, struct agent_prog_cost *c);

#endif
