// SPDX-License-Identifier: Apache-2.0
/*
 * Attaching loaded BPF programs to probe targets: the dispatch to each provider's attach op,
 * the vector of links a query holds, and the errors a refused attachment gives.
 *
 * What must hold: every attachment is a bpf_link that owns a file descriptor of this process
 * (a BPF link fd, or a perf event fd with the program set on it), and nothing is ever pinned
 * in bpffs or left as a named tracefs event.  The kernel then detaches every probe when the
 * process exits, however it exits (SIGKILL included), and detaching by hand is closing.  The
 * uprobe and kprobe providers refuse to attach on kernels without the uprobe/kprobe PMU,
 * where libbpf would fall back to tracefs events that outlive us.
 *
 * An attach op either adds all of a target's links or none: on failure it destroys the ones it
 * made (probe_links_truncate back to where it started).
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/libbpf.h>
#include "probes/probes.h"
#include "probes/provider.h"

int probe_links_push(struct probe_links *links, struct bpf_link *link)
{
	if (links->n == links->cap) {
		int cap = links->cap ? links->cap * 2 : 16;
		struct bpf_link **v = realloc(links->v, (size_t)cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		links->v = v;
		links->cap = cap;
	}
	links->v[links->n++] = link;
	return 0;
}

int probe_links_push_fd(struct probe_links *links, int fd)
{
	if (links->nfds == links->fdcap) {
		int cap = links->fdcap ? links->fdcap * 2 : 8;
		int *v = realloc(links->fds, (size_t)cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		links->fds = v;
		links->fdcap = cap;
	}
	links->fds[links->nfds++] = fd;
	return 0;
}

void probe_links_truncate(struct probe_links *links, int n)
{
	/* newest first: the reverse of the order they were made in */
	while (links->n > n && links->n > 0)
		bpf_link__destroy(links->v[--links->n]);
}

void probe_links_destroy(struct probe_links *links)
{
	if (!links)
		return;
	probe_links_truncate(links, 0);
	while (links->nfds > 0)
		close(links->fds[--links->nfds]);
	free(links->v);
	free(links->fds);
	links->v = NULL;
	links->n = links->cap = 0;
	links->fds = NULL;
	links->fdcap = 0;
}

bool probe_pmu_exists(const char *name)
{
	char path[128];

	snprintf(path, sizeof(path), "/sys/bus/event_source/devices/%s/type", name);
	return access(path, F_OK) == 0;
}

int perr_attach(struct probe_err *err, const struct probe_target *t, pid_t pid, int errnum)
{
	bool binary = probe_kind_is_binary(t->kind);
	char fix[sizeof(err->fix)] = "";

	if (errnum < 0)
		errnum = -errnum;
	if (errnum == 0)
		errnum = EIO; /* libbpf failed without saying why */
	switch (errnum) {
	case EPERM:
	case EACCES:
		snprintf(fix, sizeof(fix),
			 "run weft as root (or with CAP_BPF, CAP_PERFMON and CAP_SYS_ADMIN)");
		break;
	case ENOENT:
		if (binary)
			snprintf(fix, sizeof(fix),
				 "%.900s changed or was removed since the query was compiled: "
				 "compile it again",
				 t->binary);
		else if (t->kind == PROBE_TRACEPOINT || t->kind == PROBE_SYSCALL)
			snprintf(fix, sizeof(fix),
				 "the tracepoint is gone (its module unloaded?): see `weft list`");
		else if (t->kind == PROBE_KPROBE || t->kind == PROBE_KRETPROBE)
			snprintf(fix, sizeof(fix), "the kernel function is gone: see `weft list`");
		else if (t->kind == PROBE_HARDWARE)
			snprintf(fix, sizeof(fix),
				 "this host has no hardware counters (a virtual machine without "
				 "a virtual PMU?): use software:cpu-clock");
		break;
	case ESRCH:
		if (pid > 0)
			snprintf(fix, sizeof(fix), "process %d has exited", (int)pid);
		break;
	case EINVAL:
		if (binary)
			snprintf(fix, sizeof(fix),
				 "the address is not an instruction of %.900s: the file changed "
				 "since the query was compiled, compile it again",
				 t->binary);
		break;
	case EMFILE:
	case ENFILE:
		snprintf(fix, sizeof(fix),
			 "raise the open-file limit (ulimit -n): each attachment holds a file "
			 "descriptor");
		break;
	case EOPNOTSUPP:
		snprintf(fix, sizeof(fix),
			 "this kernel lacks what the attachment needs (BPF cookies need Linux "
			 "5.15, USDT semaphores 4.20)");
		break;
	case ENODEV:
		if (t->kind == PROBE_PROFILE || t->kind == PROBE_INTERVAL)
			snprintf(fix, sizeof(fix), "this kernel has no software perf events");
		break;
	default:
		break;
	}
	return perr_set(err, PERR_ATTACH, fix, "cannot attach to %s: %s", t->name,
			probe_bpf_strerror(errnum));
}

int probe_attach_target(struct bpf_program *prog, const struct probe_target *t, uint64_t cookie,
			pid_t pid, struct probe_links *links, struct probe_err *err)
{
	const struct probe_provider *p = probe_provider_get(t->kind);

	if (!p)
		return perr_set(err, PERR_PROVIDER, NULL, "no provider for probe kind %d", t->kind);
	if (!prog)
		return perr_set(err, PERR_SYSTEM, NULL, "no BPF program for %s", t->name);
	if (!p->attach)
		return perr_set(err, PERR_FEATURE, NULL, "%s probes cannot be attached", p->name);
	if (p->available && !p->available(err))
		return -1;
	/* uprobes and USDT attach to that process only: say so plainly if it is gone */
	if (pid > 0 && probe_kind_is_binary(t->kind) && kill(pid, 0) != 0 && errno == ESRCH)
		return perr_set(err, PERR_PID, NULL, "no process %d (it has exited?)", (int)pid);
	return p->attach(prog, t, cookie, pid, links, err);
}
