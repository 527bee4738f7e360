/* SPDX-License-Identifier: Apache-2.0 */
/*
 * agent/scope.[ch] — the part of a machine a query traces: `--scope netns:PATH` (the
 * processes of one network namespace) or `--scope cgroup:PATH` (those of one cgroup v2
 * directory and its descendants), for `weft run` and `weft agent`.
 *
 * Agents never compile, so the check is in every compiled program (kernel/weft.bpf.h,
 * weft_scope_ok(), right after the -p filter) and the agent configures it when it loads an
 * object: agent_query_start() sets the rodata variables and fills the cgroup slot from the
 * scope opened here (docs/runtime.md, "Scope").
 *
 * agent_scope_open() checks everything it can before any query runs, so that a bad --scope
 * fails the command line and not a query later: the path exists, is a network namespace
 * (an nsfs file of type CLONE_NEWNET: /proc/PID/ns/net, /run/netns/NAME) or a directory of a
 * cgroup v2 file system, and the kernel can apply it (BTF for where the namespace is in a
 * task, the bpf_current_task_under_cgroup helper).  The scope keeps the path open: the namespace or
 * cgroup cannot go away, nor its inode number be reused by another, while an agent is
 * scoped to it.
 */
#ifndef WEFT_AGENT_SCOPE_H
#define WEFT_AGENT_SCOPE_H
#include <stddef.h>
#include <stdint.h>
#include "kernel/weft_abi.h"

#define AGENT_SCOPE_TEXT_MAX 4096 /* "netns:" or "cgroup:" and the path, NUL included */

struct agent_scope {
	enum weft_scope kind; /* WEFT_SCOPE_ALL: not scoped (fd -1) */
	char text[AGENT_SCOPE_TEXT_MAX]; /* as given, e.g. "netns:/run/netns/a"; "" if ALL */
	int fd; /* the namespace file or cgroup directory, open while scoped; owned */
	uint64_t ino; /* its inode number: the namespace's inum, the cgroup's id */
	/* netns: byte offsets of task_struct.nsproxy, nsproxy.net_ns and net.ns.inum in this
	 * kernel (its BTF), for weft_netns() (kernel/weft.bpf.h) */
	uint32_t netns_off[3];
};

/* An unscoped scope (kind ALL, fd -1): what a zeroed one must be set to before use. */
void agent_scope_init(struct agent_scope *s);

/*
 * Opens and checks SPEC ("netns:PATH" or "cgroup:PATH").  0, or -errno with a one-line
 * reason in why[0..why_sz) ending in " [E_SCOPE]": -EINVAL for a SPEC or path that is no
 * such scope (a bad command line), -ENOENT for a missing path, -EOPNOTSUPP when this kernel
 * cannot apply it (no BTF, no helper), another -errno when the path cannot be opened.
 */
int agent_scope_open(const char *spec, struct agent_scope *s, char *why, size_t why_sz);

/*
 * The byte offsets weft_netns() reads at (task_struct.nsproxy, nsproxy.net_ns, net.ns.inum),
 * from the running kernel's BTF.  0, or -EOPNOTSUPP with a one-line reason (no BTF, a field
 * missing) in why[0..why_sz) ending in " [E_SCOPE]".
 */
int agent_netns_offsets(uint32_t off[3], char *why, size_t why_sz);

/* Closes the scope's file; s becomes unscoped.  Safe on an unscoped or closed scope. */
void agent_scope_close(struct agent_scope *s);

#endif
