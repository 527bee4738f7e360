// SPDX-License-Identifier: Apache-2.0
/*
 * Multi-uprobe links: one BPF link that attaches one program to many uprobe (or uretprobe)
 * sites of one binary, each site with its own BPF cookie (Linux 6.6, BPF_TRACE_UPROBE_MULTI).
 *
 * Why: a single uprobe is a perf event, and closing one waits for an RCU tasks-trace grace
 * period (~50-60 ms here); a wildcard of 256 functions took 15 s to detach one by one.  A
 * multi link unregisters all its sites and waits once.
 *
 * How: libbpf learnt bpf_program__attach_uprobe_multi() in 1.3; Debian 12 has 1.1, so the link
 * is made with the raw bpf(BPF_LINK_CREATE) syscall, and the UAPI constants and the layout of
 * bpf_attr's link_create.uprobe_multi (include/uapi/linux/bpf.h of 6.6+) are defined here.
 * The program must have been loaded with expected_attach_type BPF_TRACE_UPROBE_MULTI (the
 * kernel picks the cookie helper by it, and refuses to attach such a program as a perf
 * event), so the choice is made before load: probe_uprobe_multi_prepare().
 *
 * Support is detected once, for real, as libbpf 1.3 does: a trivial program of that attach
 * type, linked to the path "/" (not a regular file) must fail with EBADF, and then with
 * pid -1 with EINVAL (kernels whose pid filter is by thread, fixed in 6.6.x, give ESRCH and are
 * treated as lacking support).  WEFT_UPROBE_MULTI=0 in the environment turns it off (single
 * links, as on older kernels); the tests use it to cover both paths.
 *
 * What must hold, as for every attachment (attach.c): the link is a file descriptor of this
 * process, never pinned, so the kernel detaches it when the process exits; it is owned by
 * the probe_links it was pushed to.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/bpf.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "probes/probes.h"
#include "probes/provider.h"

/* include/uapi/linux/bpf.h, Linux 6.6: enum bpf_attach_type and the link_create flag */
#define UMULTI_ATTACH_TYPE 48 /* BPF_TRACE_UPROBE_MULTI */
#define UMULTI_F_RETURN 1u /* BPF_F_UPROBE_MULTI_RETURN */

/* bpf_attr for BPF_LINK_CREATE with link_create.uprobe_multi (the same offsets as the UAPI
 * union; the tail the kernel does not know must be zero, and is) */
struct umulti_attr {
	__u32 prog_fd;
	__u32 target_fd;
	__u32 attach_type;
	__u32 flags;
	__aligned_u64 path;
	__aligned_u64 offsets;
	__aligned_u64 ref_ctr_offsets;
	__aligned_u64 cookies;
	__u32 cnt;
	__u32 umulti_flags;
	__u32 pid;
	__u32 pad;
};

_Static_assert(sizeof(struct umulti_attr) == 64, "link_create.uprobe_multi layout");

static int umulti_link_create(int prog_fd, const char *path, const uint64_t *offsets,
			      const uint64_t *cookies, uint32_t cnt, uint32_t flags, int pid)
{
	struct umulti_attr a;
	int fd;

	memset(&a, 0, sizeof(a));
	a.prog_fd = (__u32)prog_fd;
	a.attach_type = UMULTI_ATTACH_TYPE;
	a.path = (__u64)(uintptr_t)path;
	a.offsets = (__u64)(uintptr_t)offsets;
	a.cookies = (__u64)(uintptr_t)cookies;
	a.cnt = cnt;
	a.umulti_flags = flags;
	a.pid = (__u32)pid;
	fd = (int)syscall(__NR_bpf, BPF_LINK_CREATE, &a, sizeof(a));
	return fd < 0 ? -errno : fd;
}

static int silent_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	return 0;
}

static bool umulti_detect(void)
{
	const struct bpf_insn insns[] = {
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0 },
		{ .code = BPF_JMP | BPF_EXIT },
	};
	LIBBPF_OPTS(bpf_prog_load_opts, opts,
		    .expected_attach_type = (enum bpf_attach_type)UMULTI_ATTACH_TYPE);
	const char *env = getenv("WEFT_UPROBE_MULTI");
	uint64_t offset = 0;
	libbpf_print_fn_t old;
	int prog, rc1, rc2;

	if (env && strcmp(env, "0") == 0)
		return false;
	old = libbpf_set_print(silent_print);
	prog = bpf_prog_load(BPF_PROG_TYPE_KPROBE, NULL, "GPL", insns, 2, &opts);
	libbpf_set_print(old);
	if (prog < 0)
		return false;
	rc1 = umulti_link_create(prog, "/", &offset, NULL, 1, 0, 0);
	rc2 = rc1 == -EBADF ? umulti_link_create(prog, "/", &offset, NULL, 1, 0, -1) : 0;
	if (rc1 >= 0)
		close(rc1);
	if (rc2 >= 0)
		close(rc2);
	close(prog);
	return rc1 == -EBADF && rc2 == -EINVAL;
}

bool probe_uprobe_multi_supported(void)
{
	static int cached = -1;

	if (cached < 0)
		cached = umulti_detect();
	return cached;
}

int probe_uprobe_multi_prepare(struct bpf_program *prog)
{
	if (!probe_uprobe_multi_supported())
		return -EOPNOTSUPP;
	return bpf_program__set_expected_attach_type(prog,
						     (enum bpf_attach_type)UMULTI_ATTACH_TYPE);
}

bool probe_uprobe_multi_prepared(const struct bpf_program *prog)
{
	return (int)bpf_program__expected_attach_type(prog) == UMULTI_ATTACH_TYPE;
}

/* The sites of t[] in binary `path` (targets [from, n) not yet taken): one link. */
static int umulti_attach_binary(int prog_fd, const struct probe_target *const *t,
				const uint64_t *cookies, int n, bool *taken, int from, pid_t pid,
				struct probe_links *links, struct probe_err *err)
{
	const struct probe_target *first = t[from];
	uint64_t *offs = malloc((size_t)n * sizeof(*offs)), *cks = malloc((size_t)n * sizeof(*cks));
	uint32_t cnt = 0;
	int fd, ret = 0;

	if (!offs || !cks) {
		ret = perr_set(err, PERR_SYSTEM, NULL, "out of memory");
		goto out_free;
	}
	for (int i = from; i < n; i++) {
		if (taken[i] || strcmp(t[i]->binary, first->binary) != 0)
			continue;
		taken[i] = true;
		offs[cnt] = t[i]->sym_offset + t[i]->offset;
		cks[cnt++] = cookies[i];
	}
	fd = umulti_link_create(prog_fd, first->binary, offs, cks, cnt,
				first->kind == PROBE_URETPROBE ? UMULTI_F_RETURN : 0,
				pid > 0 ? pid : 0);
	if (fd < 0) {
		size_t len;

		perr_attach(err, first, pid, -fd);
		len = strlen(err->msg);
		if (len < sizeof(err->msg))
			snprintf(err->msg + len, sizeof(err->msg) - len,
				 " (a multi-uprobe link of %u sites)", cnt);
		ret = -1;
		goto out_free;
	}
	if (probe_links_push_fd(links, fd)) {
		close(fd);
		ret = perr_set(err, PERR_SYSTEM, NULL, "out of memory");
	}
out_free:
	free(offs);
	free(cks);
	return ret;
}

int probe_uprobe_multi_attach(struct bpf_program *prog, const struct probe_target *const *t,
			      const uint64_t *cookies, int n, pid_t pid, struct probe_links *links,
			      struct probe_err *err)
{
	int prog_fd = bpf_program__fd(prog), start = links->nfds, ret = 0;
	bool *taken;

	if (n <= 0)
		return 0;
	if (prog_fd < 0 || !probe_uprobe_multi_prepared(prog))
		return perr_set(err, PERR_SYSTEM, NULL,
				"%s: the program was not loaded for multi-uprobe links",
				t[0]->name);
	for (int i = 0; i < n; i++)
		if (t[i]->kind != t[0]->kind ||
		    (t[i]->kind != PROBE_UPROBE && t[i]->kind != PROBE_URETPROBE))
			return perr_set(err, PERR_SYSTEM, NULL,
					"%s: not a uprobe of the program's kind", t[i]->name);
	if (pid > 0 && kill(pid, 0) != 0 && errno == ESRCH)
		return perr_set(err, PERR_PID, NULL, "no process %d (it has exited?)", (int)pid);
	taken = calloc((size_t)n, sizeof(*taken));
	if (!taken)
		return perr_set(err, PERR_SYSTEM, NULL, "out of memory");
	/* one link per binary: a link names one file */
	for (int i = 0; i < n && ret == 0; i++)
		if (!taken[i])
			ret = umulti_attach_binary(prog_fd, t, cookies, n, taken, i, pid, links,
						   err);
	free(taken);
	if (ret)
		while (links->nfds > start)
			close(links->fds[--links->nfds]);
	return ret;
}
