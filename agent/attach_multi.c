// SPDX-License-Identifier: Apache-2.0
/*
 * A query's wildcard uprobes as multi-uprobe links (see agent/attach_multi.h): which programs
 * use them, decided before load because the program's expected attach type must say so, and
 * the attachment of all the sites of one program at once.
 *
 * Must hold: the cookie of each site is its attach point's plan cookie (the `probe` builtin
 * reads it with bpf_get_attach_cookie()), as for single links.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include "agent/attach_multi.h"
#include "base/log.h"

/* The sites of one program; -1 if one of them has a +OFF (a single link checks that the offset
 * is still an instruction boundary in this host's file before it attaches, so such a program
 * keeps single links). */
static int prog_sites(const struct plan *p, int prog_idx)
{
	int n = 0;

	for (int i = 0; i < p->nattach; i++) {
		if (p->attach[i].prog != prog_idx)
			continue;
		if (p->attach[i].target.offset)
			return -1;
		n++;
	}
	return n;
}

uint64_t agent_multi_prepare(struct bpf_object *obj, const struct plan *p)
{
	uint64_t mask = 0;

	for (int i = 0; i < p->nprogs && i < 64; i++) {
		const struct plan_prog *pr = &p->progs[i];
		struct bpf_program *prog;

		if (pr->kind != PROBE_UPROBE && pr->kind != PROBE_URETPROBE)
			continue;
		if (prog_sites(p, i) < AGENT_MULTI_MIN_SITES || !probe_uprobe_multi_supported())
			continue;
		prog = bpf_object__find_program_by_name(obj, pr->name);
		if (prog && probe_uprobe_multi_prepare(prog) == 0)
			mask |= 1ull << i;
	}
	if (mask)
		log_debug("agent: programs %#llx attach with multi-uprobe links",
			  (unsigned long long)mask);
	return mask;
}

int agent_multi_attach(const struct plan *p, int prog_idx, struct bpf_program *prog, pid_t pid,
		       struct probe_links *links, struct probe_err *err)
{
	const struct probe_target **t = calloc((size_t)p->nattach, sizeof(*t));
	uint64_t *cookies = calloc((size_t)p->nattach, sizeof(*cookies));
	int n = 0, rc;

	if (!t || !cookies) {
		free(t);
		free(cookies);
		err->kind = PERR_SYSTEM;
		snprintf(err->msg, sizeof(err->msg), "out of memory");
		return -1;
	}
	for (int i = 0; i < p->nattach; i++)
		if (p->attach[i].prog == prog_idx) {
			t[n] = &p->attach[i].target;
			cookies[n++] = p->attach[i].cookie;
		}
	rc = probe_uprobe_multi_attach(prog, t, cookies, n, pid, links, err);
	free(t);
	free(cookies);
	return rc;
}
