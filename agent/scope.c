// SPDX-License-Identifier: Apache-2.0
/*
 * Opening and checking a query's scope (agent/scope.h).  Nothing here loads a program: the
 * kernel side is kernel/weft.bpf.h (weft_scope_ok()), the loader's part agent/query.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <linux/nsfs.h>
#include <mntent.h>
#include <sched.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include "agent/scope.h"
#include "base/text.h"

#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif
#ifndef NSFS_MAGIC
#define NSFS_MAGIC 0x6e736673
#endif

void agent_scope_init(struct agent_scope *s)
{
	memset(s, 0, sizeof(*s));
	s->kind = WEFT_SCOPE_ALL;
	s->fd = -1;
}

void agent_scope_close(struct agent_scope *s)
{
	if (s->fd >= 0)
		close(s->fd);
	agent_scope_init(s);
}

static int why_set(char *why, size_t sz, int rc, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int why_set(char *why, size_t sz, int rc, const char *fmt, ...)
{
	va_list ap;
	size_t n;

	if (!why || !sz)
		return rc;
	va_start(ap, fmt);
	vsnprintf(why, sz, fmt, ap);
	va_end(ap);
	n = strlen(why);
	snprintf(why + n, sz - n, " [E_SCOPE]");
	return rc;
}

/*
 * The byte offset of member `mname` in struct or union `t` of the kernel's BTF, found directly
 * or inside an anonymous struct or union member (where CO-RE would find it too); -1 if none.
 * *mtype gets the member's type id.
 */
static long btf_member_off(const struct btf *btf, const struct btf_type *t, const char *mname,
			   int depth, uint32_t *mtype)
{
	const struct btf_member *m = btf_members(t);

	for (int i = 0; i < btf_vlen(t); i++, m++) {
		const char *name = btf__name_by_offset(btf, m->name_off);
		const struct btf_type *mt;
		long in;

		if (btf_member_bitfield_size(t, i) == 0 && name && strcmp(name, mname) == 0) {
			*mtype = m->type;
			return (long)(btf_member_bit_offset(t, i) / 8);
		}
		if (name && *name)
			continue;
		mt = btf__type_by_id(btf, m->type);
		while (mt && (btf_is_mod(mt) || btf_is_typedef(mt)))
			mt = btf__type_by_id(btf, mt->type);
		if (mt && btf_is_composite(mt) && depth < 4 &&
		    (in = btf_member_off(btf, mt, mname, depth + 1, mtype)) >= 0)
			return (long)(btf_member_bit_offset(t, i) / 8) + in;
	}
	return -1;
}

/* The offset of sname.mname, a struct of the kernel's BTF; -1 if either is missing. */
static long btf_struct_off(const struct btf *btf, const char *sname, const char *mname,
			   uint32_t *mtype)
{
	int id = btf__find_by_name_kind(btf, sname, BTF_KIND_STRUCT);

	return id > 0 ? btf_member_off(btf, btf__type_by_id(btf, id), mname, 0, mtype) : -1;
}

/*
 * Where weft_netns() reads (task->nsproxy->net_ns->ns.inum): three byte offsets, the last the
 * sum of net.ns and ns_common.inum, found in the running kernel's BTF once, when the scope is
 * opened, so that no compiled object needs CO-RE relocations (and libbpf the whole vmlinux
 * BTF at every load) for it.
 */
int agent_netns_offsets(uint32_t off[3], char *why, size_t sz)
{
	/* each member and what it must be: the first two pointers, the third the struct the
	 * fourth is in (embedded), the fourth a 4-byte integer */
	static const struct {
		const char *s, *m;
		int kind;
	} path[] = {
		{ "task_struct", "nsproxy", BTF_KIND_PTR },
		{ "nsproxy", "net_ns", BTF_KIND_PTR },
		{ "net", "ns", BTF_KIND_STRUCT },
		{ "ns_common", "inum", BTF_KIND_INT },
	};
	struct btf *btf = btf__load_vmlinux_btf();
	const struct btf_type *t;
	long o[4];
	uint32_t type;
	int rc = 0;

	if (!btf)
		return why_set(why, sz, -EOPNOTSUPP,
			       "--scope netns: this kernel has no BTF (/sys/kernel/btf/vmlinux), "
			       "which reading a task's network namespace needs");
	for (size_t i = 0; i < 4 && !rc; i++) {
		o[i] = btf_struct_off(btf, path[i].s, path[i].m, &type);
		t = o[i] >= 0 ? btf__type_by_id(btf, type) : NULL;
		while (t && (btf_is_mod(t) || btf_is_typedef(t)))
			t = btf__type_by_id(btf, t->type);
		if (!t || o[i] > UINT16_MAX)
			rc = why_set(why, sz, -EOPNOTSUPP,
				     "--scope netns: this kernel's BTF has no %s.%s, which "
				     "reading a task's network namespace needs",
				     path[i].s, path[i].m);
		else if (btf_kind(t) != path[i].kind ||
			 (path[i].kind == BTF_KIND_INT && t->size != 4) ||
			 (path[i].kind == BTF_KIND_STRUCT &&
			  strcmp(btf__name_by_offset(btf, t->name_off), path[i + 1].s) != 0))
			rc = why_set(why, sz, -EOPNOTSUPP,
				     "--scope netns: this kernel's %s.%s is not the %s weft reads "
				     "a task's network namespace through",
				     path[i].s, path[i].m,
				     path[i].kind == BTF_KIND_PTR    ? "pointer" :
				     path[i].kind == BTF_KIND_STRUCT ? "struct ns_common" :
								       "4-byte integer");
	}
	btf__free(btf);
	if (rc)
		return rc;
	off[0] = (uint32_t)o[0];
	off[1] = (uint32_t)o[1];
	off[2] = (uint32_t)(o[2] + o[3]);
	return 0;
}

static int open_netns(const char *path, struct agent_scope *s, char *why, size_t sz)
{
	struct statfs fs;
	struct stat st;
	int fd, type, rc;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		return why_set(why, sz, rc == -ENOENT ? -ENOENT : rc,
			       "--scope netns:%s: cannot open it: %s", path, strerror(-rc));
	}
	/* nsfs, and a network namespace: NS_GET_NSTYPE answers only on nsfs files */
	if (fstatfs(fd, &fs) != 0 || fs.f_type != NSFS_MAGIC || fstat(fd, &st) != 0) {
		close(fd);
		return why_set(why, sz, -EINVAL,
			       "--scope netns:%s: not a namespace file (give /proc/PID/ns/net or "
			       "a bind mount of one, such as /run/netns/NAME)",
			       path);
	}
	type = ioctl(fd, NS_GET_NSTYPE);
	if (type != CLONE_NEWNET) {
		close(fd);
		return why_set(why, sz, -EINVAL,
			       "--scope netns:%s: a namespace, but not a network namespace (give "
			       "/proc/PID/ns/net, not another of /proc/PID/ns/)",
			       path);
	}
	rc = agent_netns_offsets(s->netns_off, why, sz);
	if (rc) {
		close(fd);
		return rc;
	}
	s->kind = WEFT_SCOPE_NETNS;
	s->fd = fd;
	s->ino = (uint64_t)st.st_ino;
	return 0;
}

static bool helper_ok(enum bpf_prog_type type)
{
	return libbpf_probe_bpf_helper(type, BPF_FUNC_current_task_under_cgroup, NULL) == 1;
}

/* Where cgroup2 is mounted, for the error message: "/sys/fs/cgroup" on a unified host,
 * "/sys/fs/cgroup/unified" on a hybrid one, "no directory" without it. */
static const char *cgroup2_mount(char *buf, size_t sz)
{
	FILE *f = setmntent("/proc/self/mounts", "re");
	struct mntent *m;

	snprintf(buf, sz, "no directory");
	while (f && (m = getmntent(f)))
		if (strcmp(m->mnt_type, "cgroup2") == 0) {
			snprintf(buf, sz, "%s", m->mnt_dir);
			break;
		}
	if (f)
		endmntent(f);
	return buf;
}

static int open_cgroup(const char *path, struct agent_scope *s, char *why, size_t sz)
{
	struct statfs fs;
	struct stat st;
	int fd, rc;

	fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		if (rc == -ENOTDIR)
			return why_set(why, sz, -EINVAL,
				       "--scope cgroup:%s: not a directory (give a cgroup v2 "
				       "directory, such as /sys/fs/cgroup/system.slice)",
				       path);
		return why_set(why, sz, rc, "--scope cgroup:%s: cannot open it: %s", path,
			       strerror(-rc));
	}
	if (fstatfs(fd, &fs) != 0 || fs.f_type != CGROUP2_SUPER_MAGIC || fstat(fd, &st) != 0) {
		bool v1 = fs.f_type == CGROUP_SUPER_MAGIC;
		char mnt[256];

		close(fd);
		return why_set(why, sz, -EINVAL,
			       "--scope cgroup:%s: %s%s (cgroup2 is mounted on %s)", path,
			       v1 ? "a cgroup v1 hierarchy" : "not a cgroup v2 directory",
			       v1 ? "; weft scopes by cgroup v2 only" : "",
			       cgroup2_mount(mnt, sizeof(mnt)));
	}
	/* tracepoints and perf events run as TRACEPOINT/PERF_EVENT programs, user probes as
	 * KPROBE ones: the helper has been in all of them since Linux 4.9 */
	if (!helper_ok(BPF_PROG_TYPE_TRACEPOINT) || !helper_ok(BPF_PROG_TYPE_KPROBE)) {
		close(fd);
		return why_set(why, sz, -EOPNOTSUPP,
			       "--scope cgroup:%s: this kernel's tracing programs cannot call "
			       "bpf_current_task_under_cgroup()",
			       path);
	}
	s->kind = WEFT_SCOPE_CGROUP;
	s->fd = fd;
	s->ino = (uint64_t)st.st_ino;
	return 0;
}

int agent_scope_open(const char *spec, struct agent_scope *s, char *why, size_t why_sz)
{
	const char *path;
	int rc;

	agent_scope_init(s);
	if (why && why_sz)
		why[0] = 0;
	if (strlen(spec) >= sizeof(s->text))
		return why_set(why, why_sz, -EINVAL, "--scope: longer than %d bytes",
			       AGENT_SCOPE_TEXT_MAX - 1);
	/* it travels in Hello.scope, a name on the wire (agent/wire.c) */
	if (text_check(spec, strlen(spec), TEXT_NAME) != strlen(spec))
		return why_set(why, why_sz, -EINVAL,
			       "--scope: the path is not UTF-8 without control characters");
	if (strncmp(spec, "netns:", 6) == 0 && spec[6]) {
		path = spec + 6;
		rc = open_netns(path, s, why, why_sz);
	} else if (strncmp(spec, "cgroup:", 7) == 0 && spec[7]) {
		path = spec + 7;
		rc = open_cgroup(path, s, why, why_sz);
	} else {
		return why_set(why, why_sz, -EINVAL,
			       "--scope takes netns:PATH or cgroup:PATH, not '%.64s'", spec);
	}
	if (rc)
		return rc;
	snprintf(s->text, sizeof(s->text), "%s", spec);
	return 0;
}
