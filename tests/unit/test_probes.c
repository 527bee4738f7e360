// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests of the probe catalog against the real kernel and real files: tracefs formats,
 * syscall and tracepoint resolution with globs and near matches, kernel feature detection,
 * library resolution (linker cache and a live process's maps), ELF function offsets checked
 * against an independent computation (nm + program headers read here), USDT notes of the
 * wl_usdt workload, hostile ELF files, timer rates and `weft list`.  Needs root (tracefs).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "probes/elf.h"
#include "probes/probes.h"
#include "tests/skip.h"

static int resolve(const char *probe, const struct probe_ctx *ctx, struct probe_set *set,
		   struct probe_err *err)
{
	char buf[1024], *parts[4], *s, *colon, *plus;
	const struct probe_provider *p;
	uint64_t off = 0;
	bool has_off = false;
	int n = 0;

	snprintf(buf, sizeof(buf), "%s", probe);
	colon = strchr(buf, ':');
	assert_non_null(colon);
	*colon = '\0';
	p = probe_provider_find(buf);
	assert_non_null(p);
	for (s = colon + 1; s && n < 4;) {
		char *c = strchr(s, ':');

		if (c)
			*c = '\0';
		parts[n++] = s;
		s = c ? c + 1 : NULL;
	}
	plus = strchr(parts[n - 1], '+');
	if (plus && (p->kind == PROBE_UPROBE || p->kind == PROBE_URETPROBE)) {
		*plus = '\0';
		off = strtoull(plus + 1, NULL, 0);
		has_off = true;
	}
	memset(err, 0, sizeof(*err));
	return p->resolve((const char *const *)parts, n, off, has_off, ctx, set, err);
}

static const struct probe_field *field(const struct probe_target *t, const char *name)
{
	for (int i = 0; i < t->nfields; i++)
		if (strcmp(t->fields[i].name, name) == 0)
			return &t->fields[i];
	return NULL;
}

static const char *workload_path(void)
{
	static char path[PATH_MAX];
	const char *dir = getenv("WEFT_BINARY_DIR");

	snprintf(path, sizeof(path), "%s/tests/workloads/wl_usdt", dir ? dir : ".");
	return path;
}

static int read_int_file(const char *path)
{
	FILE *f = fopen(path, "r");
	int v = -1;

	if (f) {
		if (fscanf(f, "ID: %d", &v) != 1 && fscanf(f, "%d", &v) != 1)
			v = -1;
		fclose(f);
	}
	return v;
}

/* ---- features ---- */

static void test_features(void **state)
{
	const struct probe_features *f = probe_features_get();
	bool kprobe_sysfs = access("/sys/bus/event_source/devices/kprobe/type", F_OK) == 0 ||
			    access("/sys/kernel/tracing/kprobe_events", F_OK) == 0;

	assert_ptr_equal(f, probe_features_get()); /* cached */
	assert_true(f->tracefs);
	assert_string_equal(f->tracefs_path, "/sys/kernel/tracing");
	assert_true(f->tracepoint);
	assert_true(f->raw_tp);
	assert_true(f->perf_event);
	assert_true(f->ringbuf);
	assert_true(f->percpu_hash);
	assert_int_equal(f->uprobe,
			 access("/sys/bus/event_source/devices/uprobe/type", F_OK) == 0 ||
				 access("/sys/kernel/tracing/uprobe_events", F_OK) == 0);
	assert_true(f->uprobe);
	assert_int_equal(f->kprobe, kprobe_sysfs);
	assert_int_equal(f->btf, access("/sys/kernel/btf/vmlinux", F_OK) == 0);
	if (f->fentry)
		assert_true(f->btf);
	print_message("kprobe=%d fentry=%d\n", f->kprobe, f->fentry);
}

/* ---- tracepoints and syscalls ---- */

static void test_syscall_read(void **state)
{
	struct probe_set set = { 0 };
	struct probe_err err;
	const struct probe_field *fd, *buf, *count;
	const struct probe_target *t;

	assert_int_equal(resolve("syscall:read", NULL, &set, &err), 0);
	assert_int_equal(set.n, 1);
	t = &set.v[0];
	assert_int_equal(t->kind, PROBE_SYSCALL);
	assert_string_equal(t->name, "syscall:read");
	assert_string_equal(t->category, "syscalls");
	assert_string_equal(t->event, "sys_enter_read");
	assert_int_equal(t->tp_id,
			 read_int_file("/sys/kernel/tracing/events/syscalls/sys_enter_read/id"));
	assert_null(field(t, "__syscall_nr"));
	assert_null(field(t, "common_pid"));
	fd = field(t, "fd");
	buf = field(t, "buf");
	count = field(t, "count");
	assert_non_null(fd);
	assert_non_null(buf);
	assert_non_null(count);
	assert_int_equal(fd->kind, FIELD_INT);
	assert_int_equal(fd->size, 8);
	assert_int_equal(fd->offset, 16);
	assert_int_equal(buf->kind, FIELD_PTR);
	assert_true(buf->user);
	assert_int_equal(buf->size, 8);
	assert_int_equal(buf->offset, 24);
	assert_string_equal(buf->ctype, "char *");
	assert_int_equal(count->kind, FIELD_INT);
	assert_int_equal(count->size, 8);
	assert_false(count->is_signed);
	assert_string_equal(count->ctype, "size_t");
	probe_set_free(&set);
	assert_null(set.v);
	assert_int_equal(set.n, 0);
}

static void test_syscall_exit(void **state)
{
	struct probe_set set = { 0 };
	struct probe_err err = { 0 };

	assert_int_equal(probe_syscall_exit_resolve("read", NULL, &set, &err), 0);
	assert_int_equal(set.n, 1);
	assert_string_equal(set.v[0].name, "tracepoint:syscalls:sys_exit_read");
	assert_true(set.v[0].has_retval);
	assert_int_equal(set.v[0].nfields, 1);
	assert_string_equal(set.v[0].fields[0].name, "ret");
	assert_true(set.v[0].fields[0].is_signed);
	probe_set_free(&set);
	assert_int_equal(probe_syscall_exit_resolve("nosuchcall", NULL, &set, &err), -1);
	assert_int_equal(err.kind, PERR_UNKNOWN);
	assert_int_equal(set.n, 0);
}

static void test_sched_switch(void **state)
{
	struct probe_set set = { 0 };
	struct probe_err err;
	const struct probe_field *f;
	const struct probe_target *t;

	assert_int_equal(resolve("tp:sched:sched_switch", NULL, &set, &err), 0);
	assert_int_equal(set.n, 1);
	t = &set.v[0];
	assert_int_equal(t->kind, PROBE_TRACEPOINT);
	assert_string_equal(t->name, "tracepoint:sched:sched_switch");
	assert_int_equal(t->tp_id,
			 read_int_file("/sys/kernel/tracing/events/sched/sched_switch/id"));
	f = field(t, "prev_comm");
	assert_non_null(f);
	assert_int_equal(f->kind, FIELD_CHARS);
	assert_int_equal(f->size, 16);
	assert_string_equal(f->ctype, "char[16]");
	f = field(t, "next_pid");
	assert_non_null(f);
	assert_int_equal(f->kind, FIELD_INT);
	assert_int_equal(f->size, 4);
	assert_true(f->is_signed);
	assert_non_null(field(t, "prev_state"));
	assert_non_null(field(t, "next_comm"));
	assert_non_null(field(t, "prev_pid"));
	probe_set_free(&set);
	/* a kernel pointer of another category stays a kernel pointer */
	assert_int_equal(resolve("tp:skb:kfree_skb", NULL, &set, &err), 0);
	f = field(&set.v[0], "skbaddr");
	assert_non_null(f);
	assert_int_equal(f->kind, FIELD_PTR);
	assert_false(f->user);
	probe_set_free(&set);
	/* a system call's pointers are user memory under either name of its tracepoint */
	assert_int_equal(resolve("tracepoint:syscalls:sys_enter_execve", NULL, &set, &err), 0);
	f = field(&set.v[0], "argv");
	assert_non_null(f);
	assert_int_equal(f->kind, FIELD_PTR);
	assert_true(f->user);
	f = field(&set.v[0], "filename");
	assert_non_null(f);
	assert_true(f->user);
	assert_int_equal(resolve("syscall:execve", NULL, &set, &err), 0);
	assert_true(field(&set.v[1], "argv")->user);
	probe_set_free(&set);
}

static void test_data_loc_field(void **state)
{
	struct probe_field *fields;
	int n, id;
	bool found = false;

	/* sched_process_exec: `__data_loc char[] filename` */
	assert_int_equal(tracefs_format_read("sched", "sched_process_exec", &fields, &n, &id), 0);
	for (int i = 0; i < n; i++) {
		if (strcmp(fields[i].name, "filename") == 0) {
			assert_int_equal(fields[i].kind, FIELD_DATA_LOC);
			assert_int_equal(fields[i].size, 4);
			found = true;
		}
	}
	assert_true(found);
	free(fields);
	assert_int_equal(tracefs_format_read("sched", "../../x", &fields, &n, &id), -EINVAL);
	assert_int_equal(tracefs_format_read("sched", "nope", &fields, &n, &id), -ENOENT);
}

static void test_tracepoint_wildcard(void **state)
{
	struct probe_set set = { 0 };
	struct probe_err err;

	assert_int_equal(resolve("tracepoint:syscalls:sys_enter_open*", NULL, &set, &err), 0);
	assert_true(set.n >= 2);
	for (int i = 0; i < set.n; i++) {
		assert_true(probe_glob_match("tracepoint:syscalls:sys_enter_open*", set.v[i].name));
		assert_non_null(field(&set.v[i], "__syscall_nr")); /* a tracepoint keeps it */
		if (i > 0)
			assert_true(strcmp(set.v[i - 1].name, set.v[i].name) < 0);
	}
	probe_set_free(&set);

	assert_int_equal(resolve("syscall:open*", NULL, &set, &err), 0);
	assert_true(set.n >= 2);
	assert_string_equal(set.v[0].name, "syscall:open");
	probe_set_free(&set);
}

static void test_tracepoint_errors(void **state)
{
	struct probe_set set = { 0 };
	struct probe_ctx ctx = { .max_targets = 2 };
	struct probe_err err;

	assert_int_equal(resolve("tp:sched:sched_swtich", NULL, &set, &err), -1);
	assert_int_equal(err.kind, PERR_UNKNOWN);
	assert_non_null(strstr(err.fix, "tracepoint:sched:sched_switch"));
	assert_int_equal(strncmp(err.fix, "did you mean: tracepoint:sched:sched_switch", 43), 0);

	assert_int_equal(resolve("syscall:opnat", NULL, &set, &err), -1);
	assert_int_equal(err.kind, PERR_UNKNOWN);
	assert_non_null(strstr(err.fix, "syscall:openat"));

	assert_int_equal(resolve("tp:nosuchcat*:*", NULL, &set, &err), -1);
	assert_int_equal(err.kind, PERR_NO_MATCH);
	assert_int_equal(resolve("syscall:zzz*", NULL, &set, &err), -1);
	assert_int_equal(err.kind, PERR_NO_MATCH);

	assert_int_equal(resolve("tp:syscalls:sys_enter_open*", &ctx, &set, &err), -1);
	assert_int_equal(err.kind, PERR_TOO_MANY);
	assert_int_equal(resolve("tp:*:*", NULL, &set, &err), -1);
	assert_int_equal(err.kind, PERR_TOO_MANY);
	assert_int_equal(set.n, 0);

	assert_int_equal(resolve("tp:sched:sched_switch+4", NULL, &set, &err), -1);
	assert_int_equal(err.kind, PERR_UNKNOWN); /* "+4" is part of the name for tracepoints */
}

static void test_resolve_appends(void **state)
{
	struct probe_set set = { 0 };
	struct probe_err err;

	assert_int_equal(resolve("syscall:read", NULL, &set, &err), 0);
	assert_int_equal(resolve("syscall:write", NULL, &set, &err), 0);
	assert_int_equal(resolve("syscall:nosuch", NULL, &set, &err), -1);
	assert_int_equal(set.n, 2); /* a failed resolve leaves the set as it was */
	assert_string_equal(set.v[0].name, "syscall:read");
	assert_string_equal(set.v[1].name, "syscall:write");
	probe_set_free(&set);
}

static void test_kprobe_feature(void **state)
{
	struct probe_set set = { 0 };
	struct probe_err err;

	if (probe_features_get()->kprobe)
		wt_skip("test_kprobe_feature: this kernel has kprobes");
	assert_int_equal(resolve("kprobe:do_sys_openat2", NULL, &set, &err), -1);
	assert_int_equal(err.kind, PERR_FEATURE);
	assert_non_null(strstr(err.msg, "no kprobes"));
	assert_non_null(strstr(err.fix, "syscall:openat"));
	assert_non_null(strstr(err.fix, "tracepoint:syscalls:sys_enter_openat"));
	assert_int_equal(resolve("kretprobe:vfs_read", NULL, &set, &err), -1);
	assert_int_equal(err.kind, PERR_FEATURE);
	assert_non_null(strstr(err.fix, "sys_exit_read"));
	assert_int_equal(resolve("kprobe:xyzzy_plugh", NULL, &set, &err), -1);
	assert_int_equal(err.kind, PERR_FEATURE);
	assert_non_null(strstr(err.fix, "weft list"));
	assert_false(probe_provider_find("kprobe")->available(&err));
	assert_int_equal(err.kind, PERR_FEATURE);
	assert_int_equal(set.n, 0);
}

static void test_providers_table(void **state)
{
	struct probe_err err;

	for (int i = 0; probe_providers[i]; i++) {
		const struct probe_provider *p = probe_providers[i];

		assert_non_null(p->resolve);
		assert_non_null(p->available);
		assert_ptr_equal(probe_provider_get(p->kind), p);
		assert_ptr_equal(probe_provider_find(p->name), p);
	}
	assert_ptr_equal(probe_provider_find("tp"), probe_provider_find("tracepoint"));
	assert_true(probe_provider_find("tracepoint")->available(&err));
	assert_true(probe_provider_find("syscall")->available(&err));
	assert_true(probe_provider_find("uprobe")->available(&err));
	assert_true(probe_provider_find("usdt")->available(&err));
	assert_true(probe_provider_find("profile")->available(&err));
}

/* ---- binaries ---- */

static void maps_lib(pid_t pid, const char *prefix, char *out, size_t outsz)
{
	char path[64], line[PATH_MAX + 128];
	FILE *f;

	out[0] = '\0';
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		char *file = strchr(line, '/'), *base;

		if (!file)
			continue;
		file[strcspn(file, "\n")] = '\0';
		base = strrchr(file, '/') + 1;
		if (strncmp(base, prefix, strlen(prefix)) == 0) {
			snprintf(out, outsz, "%s", file);
			break;
		}
	}
	fclose(f);
}

static bool same_file(const char *a, const char *b)
{
	struct stat sa, sb;

	return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
	       sa.st_ino == sb.st_ino;
}

static void test_resolve_libc(void **state)
{
	char path[PATH_MAX], mine[PATH_MAX];

	maps_lib(getpid(), "libc.so", mine, sizeof(mine));
	assert_true(mine[0]);
	assert_int_equal(probe_resolve_binary("libc", 0, path, sizeof(path)), 0);
	assert_int_equal(probe_elf_check(path), 0);
	assert_true(same_file(path, mine)); /* the linker cache gives the libc we run */
	assert_int_equal(probe_resolve_binary("libc.so.6", 0, path, sizeof(path)), 0);
	assert_true(same_file(path, mine));
	assert_int_equal(probe_resolve_binary("libc", getpid(), path, sizeof(path)), 0);
	assert_string_equal(path, mine);
	assert_int_equal(probe_resolve_binary("libpthread", 0, path, sizeof(path)), 0);
	assert_int_equal(probe_elf_check(path), 0);
	assert_non_null(strstr(path, "libpthread.so"));
	assert_int_equal(probe_resolve_binary("libnosuchlib_weft", 0, path, sizeof(path)), -ENOENT);
	assert_int_equal(probe_resolve_binary("/no/such/file", 0, path, sizeof(path)), 0);
	assert_string_equal(path, "/no/such/file"); /* as written: the caller says PERR_BINARY */
	/* a program through PATH */
	setenv("PATH", "/usr/local/bin:/usr/bin:/bin", 1);
	assert_int_equal(probe_resolve_binary("sleep", 0, path, sizeof(path)), 0);
	assert_true(same_file(path, "/bin/sleep"));
}

static void test_resolve_pid(void **state)
{
	char path[PATH_MAX], child_libc[PATH_MAX] = "";
	struct probe_set set = { 0 };
	struct probe_ctx ctx = { 0 };
	struct probe_err err;
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0) {
		execl("/bin/sleep", "sleep", "5", (char *)NULL);
		_exit(127);
	}
	/* wait until the child runs sleep with its libc mapped */
	for (int i = 0; i < 500 && !child_libc[0]; i++) {
		char exe[PATH_MAX] = "", link[64];
		ssize_t n;

		snprintf(link, sizeof(link), "/proc/%d/exe", (int)pid);
		n = readlink(link, exe, sizeof(exe) - 1);
		if (n > 0 && strstr(exe, "sleep"))
			maps_lib(pid, "libc.so", child_libc, sizeof(child_libc));
		if (!child_libc[0])
			usleep(10000);
	}
	assert_true(child_libc[0]);
	assert_int_equal(probe_resolve_binary("libc", pid, path, sizeof(path)), 0);
	assert_string_equal(path, child_libc);
	/* the program itself, through its maps */
	assert_int_equal(probe_resolve_binary("sleep", pid, path, sizeof(path)), 0);
	assert_true(same_file(path, "/bin/sleep"));

	ctx.pid = pid;
	assert_int_equal(resolve("uprobe:libc:malloc", &ctx, &set, &err), 0);
	assert_int_equal(set.n, 1);
	assert_int_equal(set.v[0].pid, pid);
	assert_string_equal(set.v[0].binary, child_libc);
	probe_set_free(&set);

	kill(pid, SIGKILL);
	assert_int_equal(waitpid(pid, NULL, 0), pid);
	assert_int_equal(resolve("uprobe:libc:malloc", &ctx, &set, &err), -1);
	assert_int_equal(err.kind, PERR_PID);
	assert_int_equal(resolve("usdt:libc:x", &ctx, &set, &err), -1);
	assert_int_equal(err.kind, PERR_PID);
}

/* ---- ELF: functions and offsets ---- */

/* st_value of sym as nm prints it (an independent reader). */
static uint64_t nm_value(const char *path, const char *sym, bool dynamic)
{
	char cmd[PATH_MAX + 128], line[512];
	uint64_t v = 0;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "nm %s --defined-only '%s' 2>/dev/null", dynamic ? "-D" : "",
		 path);
	p = popen(cmd, "r");
	assert_non_null(p);
	while (fgets(line, sizeof(line), p)) {
		unsigned long long a;
		char type, name[256];

		if (sscanf(line, "%llx %c %255s", &a, &type, name) != 3)
			continue;
		name[strcspn(name, "@")] = '\0'; /* nm -D: "malloc@@GLIBC_2.2.5" */
		if (strcmp(name, sym) == 0)
			v = a;
	}
	pclose(p);
	return v;
}

/* File offset of vaddr from the program headers, read here with <elf.h> and pread. */
static uint64_t phdr_offset(const char *path, uint64_t vaddr)
{
	Elf64_Ehdr eh;
	uint64_t off = UINT64_MAX;
	int fd = open(path, O_RDONLY);

	assert_true(fd >= 0);
	assert_int_equal(pread(fd, &eh, sizeof(eh), 0), sizeof(eh));
	for (int i = 0; i < eh.e_phnum; i++) {
		Elf64_Phdr ph;

		assert_int_equal(pread(fd, &ph, sizeof(ph), (off_t)(eh.e_phoff + i * sizeof(ph))),
				 sizeof(ph));
		if (ph.p_type == PT_LOAD && vaddr >= ph.p_vaddr && vaddr < ph.p_vaddr + ph.p_filesz)
			off = vaddr - ph.p_vaddr + ph.p_offset;
	}
	close(fd);
	return off;
}

static void test_uprobe_workload(void **state)
{
	const char *bin = workload_path();
	struct probe_set set = { 0 };
	struct probe_err err;
	char probe[PATH_MAX + 64];
	uint64_t addr;

	addr = nm_value(bin, "wl_work", false);
	assert_true(addr != 0);
	snprintf(probe, sizeof(probe), "uprobe:%s:wl_work", bin);
	assert_int_equal(resolve(probe, NULL, &set, &err), 0);
	assert_int_equal(set.n, 1);
	assert_int_equal(set.v[0].kind, PROBE_UPROBE);
	assert_string_equal(set.v[0].symbol, "wl_work");
	assert_string_equal(set.v[0].binary, bin);
	assert_string_equal(set.v[0].name, probe);
	assert_int_equal(set.v[0].sym_offset, phdr_offset(bin, addr));
	assert_int_equal(set.v[0].nargs, 6);
	assert_false(set.v[0].has_retval);
	probe_set_free(&set);

	snprintf(probe, sizeof(probe), "uretprobe:%s:wl_work", bin);
	assert_int_equal(resolve(probe, NULL, &set, &err), 0);
	assert_true(set.v[0].has_retval);
	assert_int_equal(set.v[0].sym_offset, phdr_offset(bin, addr));
	probe_set_free(&set);

	snprintf(probe, sizeof(probe), "uretprobe:%s:wl_work+4", bin);
	assert_int_equal(resolve(probe, NULL, &set, &err), -1);
	assert_int_equal(err.kind, PERR_OFFSET);
	snprintf(probe, sizeof(probe), "uprobe:%s:wl_work+4", bin);
	assert_int_equal(resolve(probe, NULL, &set, &err), 0);
	assert_int_equal(set.v[0].offset, 4);
	probe_set_free(&set);
	snprintf(probe, sizeof(probe), "uprobe:%s:wl_work+100000", bin);
	assert_int_equal(resolve(probe, NULL, &set, &err), -1);
	assert_int_equal(err.kind, PERR_OFFSET);

	snprintf(probe, sizeof(probe), "uprobe:%s:wl_wrok", bin);
	assert_int_equal(resolve(probe, NULL, &set, &err), -1);
	assert_int_equal(err.kind, PERR_SYMBOL);
	assert_non_null(strstr(err.fix, "wl_work"));
	snprintf(probe, sizeof(probe), "uprobe:%s:wl_*", bin);
	assert_int_equal(resolve(probe, NULL, &set, &err), 0);
	assert_int_equal(set.n, 1);
	probe_set_free(&set);
	snprintf(probe, sizeof(probe), "uprobe:%s:zz_*", bin);
	assert_int_equal(resolve(probe, NULL, &set, &err), -1);
	assert_int_equal(err.kind, PERR_NO_MATCH);

	assert_int_equal(resolve("uprobe:/no/such/bin:f", NULL, &set, &err), -1);
	assert_int_equal(err.kind, PERR_BINARY);
	assert_int_equal(resolve("uprobe:/etc/passwd:f", NULL, &set, &err), -1);
	assert_int_equal(err.kind, PERR_BINARY);
	assert_int_equal(resolve("uprobe:libnosuchlib_weft:f", NULL, &set, &err), -1);
	assert_int_equal(err.kind, PERR_LIBRARY);
}

/* A non-PIE binary, whose addresses differ from its file offsets. */
static void test_uprobe_offsets_libc_python(void **state)
{
	struct probe_set set = { 0 };
	struct probe_ctx ctx = { .max_targets = 3 };
	struct probe_err err;
	char path[PATH_MAX];
	uint64_t addr;

	assert_int_equal(probe_resolve_binary("libc", 0, path, sizeof(path)), 0);
	addr = nm_value(path, "malloc", true);
	assert_true(addr != 0);
	assert_int_equal(resolve("uprobe:libc:malloc", NULL, &set, &err), 0);
	assert_int_equal(set.v[0].sym_offset, phdr_offset(path, addr));
	probe_set_free(&set);
	assert_int_equal(resolve("uprobe:libc:mallco", NULL, &set, &err), -1);
	assert_int_equal(err.kind, PERR_SYMBOL);
	assert_non_null(strstr(err.fix, "malloc"));
	assert_int_equal(resolve("uprobe:libc:*", &ctx, &set, &err), -1);
	assert_int_equal(err.kind, PERR_TOO_MANY);

	if (access("/usr/bin/python3.11", R_OK) != 0)
		return;
	addr = nm_value("/usr/bin/python3.11", "Py_Main", true);
	assert_true(addr != 0);
	assert_int_equal(resolve("uprobe:/usr/bin/python3.11:Py_Main", NULL, &set, &err), 0);
	assert_true(set.v[0].sym_offset != addr);
	assert_int_equal(set.v[0].sym_offset, phdr_offset("/usr/bin/python3.11", addr));
	probe_set_free(&set);
}

static char *file_slurp(const char *path, size_t *len);
static void file_write(const char *path, const char *buf, size_t len);

/*
 * The offsets from func's start at which objdump (an independent decoder) starts an
 * instruction, in order, and func's size as the end; returns how many starts.
 */
static int objdump_starts(const char *path, const char *func, uint64_t *starts, int max,
			  uint64_t *end)
{
	char cmd[PATH_MAX + 256], line[512], head[300];
	unsigned long long base = 0, a;
	bool in = false;
	int n = 0;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "objdump -d --no-show-raw-insn --disassemble='%s' '%s'", func,
		 path);
	snprintf(head, sizeof(head), " <%s>:", func);
	p = popen(cmd, "r");
	assert_non_null(p);
	while (fgets(line, sizeof(line), p)) {
		if (!in && strstr(line, head) && sscanf(line, "%llx", &base) == 1) {
			in = true;
			continue;
		}
		if (in && sscanf(line, " %llx:", &a) == 1 && n < max)
			starts[n++] = a - base;
		else if (in && line[0] == '\n')
			break;
	}
	pclose(p);
	*end = 0;
	snprintf(cmd, sizeof(cmd), "nm -S --defined-only '%s'", path);
	p = popen(cmd, "r");
	assert_non_null(p);
	while (fgets(line, sizeof(line), p)) {
		unsigned long long v, sz;
		char type, name[256];

		if (sscanf(line, "%llx %llx %c %255s", &v, &sz, &type, name) == 4 &&
		    strcmp(name, func) == 0)
			*end = sz;
	}
	pclose(p);
	return n;
}

/*
 * uprobe +offsets: every offset into wl_work is accepted exactly when objdump starts an
 * instruction there; one inside an instruction is PERR_OFFSET_INSN naming the boundaries on
 * either side.
 */
static void test_uprobe_offset_boundaries(void **state)
{
	const char *bin = workload_path();
	struct probe_set set = { 0 };
	struct probe_err err;
	char probe[PATH_MAX + 64], want[128];
	uint64_t starts[64], size;
	int n, k = 0, checked = 0;

	n = objdump_starts(bin, "wl_work", starts, 64, &size);
	if (n < 2)
		skip(); /* no objdump */
	assert_int_equal(starts[0], 0);
	assert_true(size > starts[n - 1]);
	for (uint64_t off = 1; off < size; off++) {
		bool boundary = false;

		while (k + 1 < n && starts[k + 1] <= off)
			k++;
		boundary = starts[k] == off;
		snprintf(probe, sizeof(probe), "uprobe:%s:wl_work+%llu", bin,
			 (unsigned long long)off);
		if (boundary) {
			if (resolve(probe, NULL, &set, &err) != 0)
				fail_msg("wl_work+%llu refused: %s", (unsigned long long)off,
					 err.msg);
			assert_int_equal(set.v[0].offset, off);
			probe_set_free(&set);
			continue;
		}
		assert_int_equal(resolve(probe, NULL, &set, &err), -1);
		assert_int_equal(err.kind, PERR_OFFSET_INSN);
		assert_int_equal(set.n, 0);
		if (k + 1 < n)
			snprintf(want, sizeof(want),
				 "nearest boundaries: wl_work+%llu, wl_work+%llu",
				 (unsigned long long)starts[k], (unsigned long long)starts[k + 1]);
		else
			snprintf(want, sizeof(want), "nearest boundary: wl_work+%llu",
				 (unsigned long long)starts[k]);
		if (!strstr(err.msg, want))
			fail_msg("wl_work+%llu: '%s' lacks '%s'", (unsigned long long)off, err.msg,
				 want);
		checked++;
	}
	assert_true(checked > 0); /* wl_work has a multi-byte instruction */
}

/* The code a uprobe patches, read from the file: the bytes at the function's file offset. */
static void test_elf_code_read(void **state)
{
	const char *bin = workload_path();
	struct probe_set set = { 0 };
	struct probe_err err;
	char probe[PATH_MAX + 64], *file;
	uint8_t code[8];
	uint16_t machine = 0;
	size_t len, got;

	snprintf(probe, sizeof(probe), "uprobe:%s:wl_work", bin);
	assert_int_equal(resolve(probe, NULL, &set, &err), 0);
	file = file_slurp(bin, &len);
	assert_int_equal(
		probe_elf_code_read(bin, set.v[0].sym_offset, code, sizeof(code), &got, &machine),
		0);
	assert_int_equal(got, sizeof(code));
	assert_memory_equal(code, file + set.v[0].sym_offset, sizeof(code));
#ifdef __x86_64__
	assert_int_equal(machine, EM_X86_64);
#endif
	/* offset 0 is the ELF header, in the first PT_LOAD of a PIE; past the file: no segment */
	assert_int_equal(probe_elf_code_read(bin, len + 4096, code, sizeof(code), &got, &machine),
			 -ERANGE);
	assert_int_equal(got, 0);
	free(file);
	probe_set_free(&set);
}

/* ---- USDT ---- */

static void test_usdt_workload(void **state)
{
	const char *bin = workload_path();
	struct probe_elf_usdt *notes;
	struct probe_set set = { 0 };
	struct probe_err err;
	char probe[PATH_MAX + 64];
	int n;

	assert_int_equal(probe_elf_usdt_read(bin, &notes, &n), 0);
	assert_int_equal(n, 2);
	free(notes);

	snprintf(probe, sizeof(probe), "usdt:%s:weft_test:tick", bin);
	assert_int_equal(resolve(probe, NULL, &set, &err), 0);
	assert_int_equal(set.n, 1);
	assert_string_equal(set.v[0].name, probe);
	assert_string_equal(set.v[0].provider, "weft_test");
	assert_string_equal(set.v[0].usdt_name, "tick");
	assert_int_equal(set.v[0].nargs, 2);
	assert_int_equal(set.v[0].arg_size[0], 4);
	assert_int_equal(set.v[0].arg_size[1], 8);
	assert_true(set.v[0].arg_signed[0]);
	assert_true(set.v[0].arg_signed[1]);
	assert_int_equal(set.v[0].nsites, 1);
	assert_false(set.v[0].usdt_semaphore);
	assert_true(set.v[0].sym_offset > 0);
	probe_set_free(&set);

	snprintf(probe, sizeof(probe), "usdt:%s:done", bin); /* any provider */
	assert_int_equal(resolve(probe, NULL, &set, &err), 0);
	assert_int_equal(set.n, 1);
	assert_int_equal(set.v[0].nargs, 0);
	probe_set_free(&set);

	snprintf(probe, sizeof(probe), "usdt:%s:weft_test:*", bin);
	assert_int_equal(resolve(probe, NULL, &set, &err), 0);
	assert_int_equal(set.n, 2);
	assert_string_equal(set.v[0].usdt_name, "done");
	assert_string_equal(set.v[1].usdt_name, "tick");
	probe_set_free(&set);

	snprintf(probe, sizeof(probe), "usdt:%s:weft_test:tikc", bin);
	assert_int_equal(resolve(probe, NULL, &set, &err), -1);
	assert_int_equal(err.kind, PERR_USDT);
	assert_non_null(strstr(err.fix, "weft_test:tick"));
	snprintf(probe, sizeof(probe), "usdt:%s:nope*", bin);
	assert_int_equal(resolve(probe, NULL, &set, &err), -1);
	assert_int_equal(err.kind, PERR_NO_MATCH);
	assert_int_equal(resolve("usdt:libc:x", NULL, &set, &err), -1);
	assert_int_equal(err.kind, PERR_USDT); /* Debian's libc has no notes */
}

/* A copy of wl_usdt with `patch` written over the tick probe's site: tick must resolve or be
 * refused as `ok` says; done (untouched) always resolves. */
static void usdt_site_try(const char *path, const char *orig, size_t len, uint64_t site,
			  const char *patch, size_t plen, bool ok, const char *want)
{
	struct probe_set set = { 0 };
	struct probe_err err;
	char probe[PATH_MAX + 64], *buf = malloc(len);

	assert_non_null(buf);
	memcpy(buf, orig, len);
	memcpy(buf + site, patch, plen);
	file_write(path, buf, len);
	snprintf(probe, sizeof(probe), "usdt:%s:weft_test:tick", path);
	if (ok) {
		assert_int_equal(resolve(probe, NULL, &set, &err), 0);
		probe_set_free(&set);
	} else {
		assert_int_equal(resolve(probe, NULL, &set, &err), -1);
		assert_int_equal(err.kind, PERR_USDT_SITE);
		if (!strstr(err.msg, want))
			fail_msg("'%s' lacks '%s'", err.msg, want);
		snprintf(probe, sizeof(probe), "usdt:%s:weft_test:*", path); /* tick among them */
		assert_int_equal(resolve(probe, NULL, &set, &err), -1);
		assert_int_equal(err.kind, PERR_USDT_SITE);
		assert_int_equal(set.n, 0);
	}
	snprintf(probe, sizeof(probe), "usdt:%s:weft_test:done", path);
	assert_int_equal(resolve(probe, NULL, &set, &err), 0);
	probe_set_free(&set);
	free(buf);
}

/* A USDT site must be a nop: sys/sdt.h's 0x90 and the longer nops pass, anything else (an
 * instruction, bytes that are none) is refused. */
static void test_usdt_site_nop(void **state)
{
	char tmp[] = "/tmp/weft_test_usdt_site_XXXXXX";
	char path[PATH_MAX], *orig;
	struct probe_elf_usdt *notes;
	uint64_t site = 0;
	size_t len;
	int n;

#ifndef __x86_64__
	skip(); /* the patches below are x86 code */
#endif
	assert_int_equal(probe_elf_usdt_read(workload_path(), &notes, &n), 0);
	for (int i = 0; i < n; i++) {
		if (strcmp(notes[i].name, "tick") == 0) {
			site = notes[i].offset;
			assert_int_equal(notes[i].machine, EM_X86_64);
			assert_true(notes[i].code_len > 0);
			assert_int_equal(notes[i].code[0], 0x90);
		}
	}
	free(notes);
	assert_true(site != 0);
	orig = file_slurp(workload_path(), &len);
	assert_int_equal((unsigned char)orig[site], 0x90); /* sys/sdt.h's nop, in the file */
	assert_non_null(mkdtemp(tmp));
	snprintf(path, sizeof(path), "%s/wl", tmp);

	usdt_site_try(path, orig, len, site, "\x90", 1, true, NULL);
	usdt_site_try(path, orig, len, site, "\x66\x90", 2, true, NULL);
	usdt_site_try(path, orig, len, site, "\x0f\x1f\x44\x00\x00", 5, true, NULL);
	usdt_site_try(path, orig, len, site, "\xcc", 1, false, "is `int3`, not a nop");
	usdt_site_try(path, orig, len, site, "\x55", 1, false, "is `pushq %rbp`, not a nop");
	usdt_site_try(path, orig, len, site, "\x06", 1, false, "are not an instruction");

	unlink(path);
	rmdir(tmp);
	free(orig);
}

/* A probe with a semaphore: the note's semaphore address and its file offset (the uprobe's
 * ref_ctr_offset), checked against nm and the program headers. */
static void test_usdt_semaphore_note(void **state)
{
	char bin[PATH_MAX], probe[PATH_MAX + 64];
	struct probe_elf_usdt *notes;
	struct probe_set set = { 0 };
	struct probe_err err;
	uint64_t sema;
	int n;

	snprintf(bin, sizeof(bin), "%s/tests/workloads/wl_usdt_sema",
		 getenv("WEFT_BINARY_DIR") ? getenv("WEFT_BINARY_DIR") : ".");
	sema = nm_value(bin, "weft_sema_fire_semaphore", false);
	assert_true(sema != 0);
	assert_int_equal(probe_elf_usdt_read(bin, &notes, &n), 0);
	assert_int_equal(n, 1);
	assert_int_equal(notes[0].semaphore, sema);
	assert_int_equal(notes[0].sem_offset, phdr_offset(bin, sema));
	free(notes);
	snprintf(probe, sizeof(probe), "usdt:%s:weft_sema:fire", bin);
	assert_int_equal(resolve(probe, NULL, &set, &err), 0);
	assert_true(set.v[0].usdt_semaphore);
	assert_int_equal(set.v[0].nargs, 1);
	probe_set_free(&set);
}

static void test_usdt_args_parse(void **state)
{
	int size[12];
	bool sgn[12];

	assert_int_equal(probe_usdt_args_parse("-4@%eax 8@-8(%rbp) 8@%rdx", size, sgn, 12), 3);
	assert_int_equal(size[0], 4);
	assert_true(sgn[0]);
	assert_int_equal(size[1], 8);
	assert_false(sgn[1]);
	assert_int_equal(size[2], 8);
	assert_int_equal(probe_usdt_args_parse("", size, sgn, 12), 0);
	assert_int_equal(probe_usdt_args_parse("  -2@[sp, 8] 1@$5 ", size, sgn, 12), 2);
	assert_int_equal(size[0], 2);
	assert_true(sgn[0]);
	assert_int_equal(size[1], 1);
	assert_int_equal(probe_usdt_args_parse("1@a 2@b 4@c", size, sgn, 2), 2);
	assert_int_equal(probe_usdt_args_parse("3@%eax", size, sgn, 12), 1);
	assert_int_equal(size[0], 8); /* an impossible size reads as a full register */
}

/* ---- hostile ELF files ---- */

static char *file_slurp(const char *path, size_t *len)
{
	struct stat st;
	char *buf;
	int fd = open(path, O_RDONLY);

	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	buf = malloc((size_t)st.st_size);
	assert_non_null(buf);
	assert_int_equal(read(fd, buf, (size_t)st.st_size), st.st_size);
	close(fd);
	*len = (size_t)st.st_size;
	return buf;
}

static void file_write(const char *path, const char *buf, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, buf, len), (ssize_t)len);
	close(fd);
}

/* Runs every reader on path; they may fail or succeed, never crash. */
static int readers_run(const char *path)
{
	struct probe_elf_func *funcs;
	struct probe_elf_usdt *notes;
	struct probe_set set = { 0 };
	struct probe_err err;
	char probe[PATH_MAX + 32];
	int n, m, r1, r2, r3;

	r1 = probe_elf_funcs_read(path, &funcs, &n);
	if (r1 == 0)
		probe_elf_funcs_free(funcs, n);
	r2 = probe_elf_usdt_read(path, &notes, &m);
	if (r2 == 0)
		free(notes);
	snprintf(probe, sizeof(probe), "uprobe:%s:wl_work", path);
	r3 = resolve(probe, NULL, &set, &err);
	probe_set_free(&set);
	snprintf(probe, sizeof(probe), "uprobe:%s:wl_work+1", path);
	if (resolve(probe, NULL, &set, &err) == 0)
		probe_set_free(&set);
	snprintf(probe, sizeof(probe), "usdt:%s:weft_test:tick", path);
	if (resolve(probe, NULL, &set, &err) == 0)
		probe_set_free(&set);
	return r3;
}

static void test_corrupt_elf(void **state)
{
	char tmp[] = "/tmp/weft_test_probes_XXXXXX";
	char path[PATH_MAX];
	size_t len;
	char *orig = file_slurp(workload_path(), &len), *buf = malloc(len);
	const size_t cuts[] = { 0, 4, 16, 63, 64, 200, 1024, 4096 };
	struct probe_err err;
	struct probe_set set = { 0 };

	assert_non_null(mkdtemp(tmp));
	assert_non_null(buf);
	snprintf(path, sizeof(path), "%s/bad", tmp);

	/* truncated copies: refused (the section headers are at the end of the file) */
	for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
		file_write(path, orig, cuts[i] < len ? cuts[i] : len);
		assert_int_equal(readers_run(path), -1);
		assert_int_equal(resolve("uprobe:/tmp/x:f", NULL, &set, &err), -1);
	}
	file_write(path, orig, len - 1);
	assert_int_equal(readers_run(path), -1);
	file_write(path, orig, len / 2);
	assert_int_equal(readers_run(path), -1);

	/* random bytes, with and without an ELF header in front */
	srand(42);
	for (int round = 0; round < 50; round++) {
		for (size_t i = 0; i < len; i++)
			buf[i] = (char)rand();
		if (round & 1)
			memcpy(buf, orig, 64);
		file_write(path, buf, len);
		assert_int_equal(readers_run(path), -1);
	}
	/* bit flips in a valid file: any result but a crash */
	for (int round = 0; round < 300; round++) {
		memcpy(buf, orig, len);
		for (int k = 0; k < 1 + round % 16; k++)
			buf[(size_t)rand() % len] ^= (char)(1u << (rand() % 8));
		file_write(path, buf, len);
		readers_run(path);
	}
	/* the untouched copy still resolves, so the loop above exercised real parsing */
	file_write(path, orig, len);
	assert_int_equal(readers_run(path), 0);

	unlink(path);
	rmdir(tmp);
	free(buf);
	free(orig);
}

/* ---- timers ---- */

static void test_timers(void **state)
{
	static const struct {
		const char *probe;
		int ret;
		enum probe_err_kind kind;
		uint64_t hz, period_ns;
		const char *name;
	} cases[] = {
		{ "profile:99hz", 0, PERR_NONE, 99, 0, "profile:99hz" },
		{ "profile:99", 0, PERR_NONE, 99, 0, "profile:99hz" },
		{ "profile:10ms", 0, PERR_NONE, 100, 0, "profile:100hz" },
		{ "profile:10000hz", 0, PERR_NONE, 10000, 0, "profile:10000hz" },
		{ "profile:1s", 0, PERR_NONE, 1, 0, "profile:1hz" },
		{ "profile:0hz", -1, PERR_RATE, 0, 0, NULL },
		{ "profile:10001hz", -1, PERR_RATE, 0, 0, NULL },
		{ "profile:50us", -1, PERR_RATE, 0, 0, NULL },
		{ "profile:fast", -1, PERR_SYNTAX, 0, 0, NULL },
		{ "profile:99hzz", -1, PERR_SYNTAX, 0, 0, NULL },
		{ "interval:1s", 0, PERR_NONE, 0, 1000000000ULL, "interval:1s" },
		{ "interval:100ms", 0, PERR_NONE, 0, 100000000ULL, "interval:100ms" },
		{ "interval:1000ms", 0, PERR_NONE, 0, 1000000000ULL, "interval:1s" },
		{ "interval:1ms", 0, PERR_NONE, 0, 1000000ULL, "interval:1ms" },
		{ "interval:1h", 0, PERR_NONE, 0, 3600000000000ULL, "interval:1h" },
		{ "interval:2m", 0, PERR_NONE, 0, 120000000000ULL, "interval:2m" },
		{ "interval:500us", -1, PERR_RATE, 0, 0, NULL },
		{ "interval:61m", -1, PERR_RATE, 0, 0, NULL },
		{ "interval:0s", -1, PERR_RATE, 0, 0, NULL },
		{ "interval:soon", -1, PERR_SYNTAX, 0, 0, NULL },
		{ "interval:99999999999999999999s", -1, PERR_SYNTAX, 0, 0, NULL },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct probe_set set = { 0 };
		struct probe_err err;

		print_message("%s\n", cases[i].probe);
		assert_int_equal(resolve(cases[i].probe, NULL, &set, &err), cases[i].ret);
		if (cases[i].ret) {
			assert_int_equal(err.kind, cases[i].kind);
			assert_int_equal(set.n, 0);
			continue;
		}
		assert_int_equal(set.n, 1);
		assert_int_equal(set.v[0].hz, cases[i].hz);
		assert_int_equal(set.v[0].period_ns, cases[i].period_ns);
		assert_string_equal(set.v[0].name, cases[i].name);
		probe_set_free(&set);
	}
}

/* ---- helpers and listing ---- */

static void test_glob_near(void **state)
{
	const char *cands[] = { "open", "openat", "openat2", "read", "close" };
	const char *out[5];

	assert_true(probe_glob_match("sys_enter_open*", "sys_enter_openat"));
	assert_true(probe_glob_match("*", ""));
	assert_true(probe_glob_match("a?c", "abc"));
	assert_false(probe_glob_match("a?c", "ac"));
	assert_false(probe_glob_match("open", "openat"));
	assert_true(probe_glob_match("*a*a*a*a*a*b", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaab"));
	assert_false(probe_glob_match("*a*a*a*a*a*b", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"));
	assert_true(probe_has_wildcard("x*"));
	assert_false(probe_has_wildcard("x"));
	assert_int_equal(probe_near_matches("opne", cands, 5, out, 5) >= 1, 1);
	assert_string_equal(out[0], "open");
	assert_int_equal(probe_near_matches("zzzzzzzz", cands, 5, out, 5), 0);
	assert_int_equal(probe_near_matches("OPENAT", cands, 5, out, 1), 1);
	assert_string_equal(out[0], "openat");
}

static char *list_capture(const char *pattern, bool verbose, int *n, struct probe_err *err)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	assert_non_null(f);
	*n = probe_list_print(pattern, NULL, verbose, f, err);
	fclose(f);
	return buf;
}

static void test_list(void **state)
{
	struct probe_err err;
	char pattern[PATH_MAX + 16];
	char *out;
	int n;

	out = list_capture("syscall:read", true, &n, &err);
	assert_int_equal(n, 1);
	assert_string_equal(out, "syscall:read\n"
				 "    unsigned int fd  (u64)\n"
				 "    char * buf  (user pointer)\n"
				 "    size_t count  (u64)\n");
	free(out);

	out = list_capture("tp:sched:sched_switch", true, &n, &err);
	assert_int_equal(n, 1);
	assert_non_null(strstr(out, "    char prev_comm[16]  (string)\n"));
	free(out);

	out = list_capture(NULL, false, &n, &err);
	assert_true(n > 100);
	assert_non_null(strstr(out, "\nsyscall:openat\n"));
	assert_non_null(strstr(out, "\ntracepoint:sched:sched_switch\n"));
	free(out);

	out = list_capture("syscall:open*", false, &n, &err);
	assert_true(n >= 2);
	assert_int_equal(strncmp(out, "syscall:open\n", 13), 0);
	free(out);

	snprintf(pattern, sizeof(pattern), "usdt:%s:*", workload_path());
	out = list_capture(pattern, true, &n, &err);
	assert_int_equal(n, 2);
	assert_non_null(strstr(out, ":weft_test:tick\n    arg0  (s32)\n    arg1  (s64)\n"));
	assert_true(strstr(out, ":weft_test:done") < strstr(out, ":weft_test:tick"));
	free(out);

	out = list_capture(workload_path(), false, &n, &err); /* functions and USDT probes */
	assert_true(n >= 4);
	assert_non_null(strstr(out, ":wl_work\n"));
	assert_non_null(strstr(out, ":weft_test:tick\n"));
	free(out);

	out = list_capture("nosuchprovider:a:b", false, &n, &err);
	assert_int_equal(n, -1);
	assert_int_equal(err.kind, PERR_PROVIDER);
	free(out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_features),
		cmocka_unit_test(test_syscall_read),
		cmocka_unit_test(test_syscall_exit),
		cmocka_unit_test(test_sched_switch),
		cmocka_unit_test(test_data_loc_field),
		cmocka_unit_test(test_tracepoint_wildcard),
		cmocka_unit_test(test_tracepoint_errors),
		cmocka_unit_test(test_resolve_appends),
		cmocka_unit_test(test_kprobe_feature),
		cmocka_unit_test(test_providers_table),
		cmocka_unit_test(test_resolve_libc),
		cmocka_unit_test(test_resolve_pid),
		cmocka_unit_test(test_uprobe_workload),
		cmocka_unit_test(test_uprobe_offsets_libc_python),
		cmocka_unit_test(test_uprobe_offset_boundaries),
		cmocka_unit_test(test_elf_code_read),
		cmocka_unit_test(test_usdt_workload),
		cmocka_unit_test(test_usdt_site_nop),
		cmocka_unit_test(test_usdt_semaphore_note),
		cmocka_unit_test(test_usdt_args_parse),
		cmocka_unit_test(test_corrupt_elf),
		cmocka_unit_test(test_timers),
		cmocka_unit_test(test_glob_near),
		cmocka_unit_test(test_list),
	};

	if (!wt_root("it reads tracefs and opens perf events"))
		return WT_SKIP;
	return wt_status(cmocka_run_group_tests(tests, NULL, NULL));
}
