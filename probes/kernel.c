// SPDX-License-Identifier: Apache-2.0
/*
 * The kernel provider: `kernel:sockets`, a source of kernel edges for graph queries
 * (docs/language.md, "Graph queries"; docs/graphs.md, "Kernel edges").  It is not an attach
 * point of its own but a name for the tracepoints that give the elements, so that a query
 * says what it wants (socket messages) and weft picks how to get them on this kernel:
 *
 *   kernel:sockets   tracepoint:sock:sock_send_length and tracepoint:sock:sock_recv_length
 *                    (Linux 6.3 and later): every send and receive on a socket, after it
 *                    happened, with the socket (`sk`), its family and protocol and the bytes
 *                    moved.  The code generator reads the 4-tuple and the stream's sequence
 *                    numbers from the socket through BTF (CO-RE).
 *
 *   kernel:sched     tracepoint:sched:sched_waking and tracepoint:sched:sched_wakeup_new: a
 *                    thread wakes another (sched_waking fires in the waker's context, where
 *                    sched_wakeup may fire on the woken thread's CPU, in whatever runs
 *                    there), or a new thread's first wakeup (in its parent's context).
 *   kernel:process   tracepoint:sched:sched_process_fork, sched_process_exec and
 *                    sched_process_exit: fork (and clone), exec with the file, exit.
 *
 * The targets are ordinary tracepoint targets (kind PROBE_TRACEPOINT): they attach as
 * tracepoints do and their fields (args.family, args.ret, ...) may be used in `where`.  The
 * compiler knows them for kernel edges by their source's probe kind, PROBE_KERNEL.
 *
 * Limits: only kprobe-free sources; a kernel without the sock tracepoints gets PERR_FEATURE
 * with the reason (the syscalls alone do not give the socket); the sched tracepoints exist on
 * every kernel weft supports.
 */
#include <string.h>
#include "probes/probes.h"
#include "probes/provider.h"

static const char *const kernel_groups[] = { "sockets", "sched", "process" };

/* The tracepoints (category sched) of kernel:sched and kernel:process. */
static int kernel_sched_add(const char *group, const struct probe_ctx *ctx, struct probe_set *set,
			    struct probe_err *err)
{
	static const char *const sched[] = { "sched_waking", "sched_wakeup_new" };
	static const char *const process[] = { "sched_process_fork", "sched_process_exec",
					       "sched_process_exit" };
	bool is_sched = strcmp(group, "sched") == 0;
	const char *const *ev = is_sched ? sched : process;
	int n = is_sched ? 2 : 3, start = set->n;

	for (int i = 0; i < n; i++)
		if (tracepoint_target_add(set, "sched", ev[i], ctx, NULL, err) != 0) {
			probe_set_truncate(set, start);
			if (err->kind == PERR_UNKNOWN) {
				err->kind = PERR_FEATURE;
				snprintf(err->fix, sizeof(err->fix),
					 "kernel:%s needs the tracepoint sched:%s", group, ev[i]);
			}
			return -1;
		}
	return 0;
}

static int kernel_resolve(const char *const *parts, int nparts, uint64_t offset, bool has_offset,
			  const struct probe_ctx *ctx, struct probe_set *set, struct probe_err *err)
{
	int start = set->n;

	(void)offset;
	if (nparts != 1)
		return perr_set(err, PERR_SYNTAX, "write kernel:sockets",
				"a kernel source has one part, e.g. kernel:sockets");
	if (has_offset)
		return perr_set(err, PERR_OFFSET, NULL, "a kernel source takes no +offset");
	if (strcmp(parts[0], "sched") == 0 || strcmp(parts[0], "process") == 0)
		return kernel_sched_add(parts[0], ctx, set, err);
	if (strcmp(parts[0], "sockets") != 0) {
		perr_set(err, PERR_UNKNOWN, NULL, "no kernel source '%s'", parts[0]);
		perr_fix_near(err, parts[0], kernel_groups, 3, "kernel:");
		if (!err->fix[0])
			snprintf(err->fix, sizeof(err->fix),
				 "kernel sources: kernel:sockets (socket sends and receives), "
				 "kernel:sched (wakeups), kernel:process (fork, exec, exit)");
		return -1;
	}
	if (tracepoint_target_add(set, "sock", "sock_send_length", ctx, NULL, err) != 0 ||
	    tracepoint_target_add(set, "sock", "sock_recv_length", ctx, NULL, err) != 0) {
		probe_set_truncate(set, start);
		if (err->kind == PERR_UNKNOWN) {
			err->kind = PERR_FEATURE;
			snprintf(err->fix, sizeof(err->fix),
				 "kernel:sockets needs the tracepoints sock:sock_send_length and "
				 "sock:sock_recv_length (Linux 6.3 or later)");
		}
		return -1;
	}
	return 0;
}

static int kernel_list(const char *const *parts, int nparts, const struct probe_ctx *ctx,
		       probe_list_cb cb, void *arg, struct probe_err *err)
{
	static const char *const names[] = { "kernel:sockets", "kernel:sched", "kernel:process" };
	struct probe_target t;

	(void)parts;
	(void)nparts;
	(void)ctx;
	(void)err;
	memset(&t, 0, sizeof(t));
	t.kind = PROBE_KERNEL;
	for (int i = 0; i < 3; i++) {
		int rc;

		snprintf(t.name, sizeof(t.name), "%s", names[i]);
		rc = cb(&t, arg);
		if (rc)
			return rc;
	}
	return 0;
}

/* Where the tracepoints can be read (tracefs), so can the kernel sources: whether the sock
 * tracepoints themselves exist is for resolve to say, with the reason. */
static bool kernel_available(struct probe_err *err)
{
	return provider_tracepoint.available(err);
}

const struct probe_provider provider_kernel = {
	.kind = PROBE_KERNEL,
	.name = "kernel",
	.alias = NULL,
	.min_parts = 1,
	.max_parts = 1,
	.usage = "kernel:GROUP (kernel:sockets, kernel:sched, kernel:process)",
	.resolve = kernel_resolve,
	.list = kernel_list,
	.available = kernel_available,
	.attach = NULL,
};
