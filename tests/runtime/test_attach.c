// SPDX-License-Identifier: Apache-2.0
/*
 * Attaching through the providers (probe_attach_target) against the real kernel, as root.
 *
 * A small BPF object, compiled here with clang, has one program per section type weft
 * generates (tracepoint, uprobe, uretprobe, usdt, perf_event); each counts its events into an
 * array indexed by the attach cookie (bpf_get_attach_cookie, or bpf_usdt_cookie for USDT) and
 * sums an argument, so a count in the wrong slot or a wrong argument shows.  Targets come
 * from the real catalog (the providers' resolve), copied with fields = NULL as the plan
 * keeps them.  Exact counts come from processes that make a known number of calls:
 *  - syscall:getppid and its span exit tracepoint: N getppid() calls by this process (the
 *    program filters by a pid it reads from a map);
 *  - uprobe/uretprobe on wl_work and usdt weft_test:tick in two wl_usdt processes run at once
 *    (N and N + 13 iterations), attached to the first one's pid: exactly N each, and the
 *    second's calls do not count; attached with pid 0 (every process): N + N + 13;
 *  - usdt python:function__entry and python:line in a running python3: their semaphores are
 *    raised in its memory while attached and lowered after; of the firings, those whose
 *    function name (arg1, a user string) is "f" are exactly the N calls the script makes;
 *  - profile:99hz for about a second on every online CPU: some samples (timing: > 0 only),
 *    one link per online CPU; interval:100ms for about a second: 1 to 20 firings, one link.
 * After the links are destroyed, neither the kernel's link list nor `bpftool link list`,
 * `bpftool perf list` and tracefs's uprobe_events show any attachment of ours; before, they
 * do (so the check can fail).  A child that attaches and is SIGKILLed leaves nothing behind.
 *
 * The wl_usdt processes wait, before exec, for a byte on a pipe: attaching then, by pid, and
 * releasing them makes the counts exact (the uprobes are installed when exec maps the file).
 * A delay-based start would race with the attach on a loaded machine.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <jansson.h>
#include "probes/elf.h"
#include "probes/insn.h"
#include "probes/probes.h"
#include "tests/skip.h"

#ifndef WEFT_CLANG_PATH
#define WEFT_CLANG_PATH "clang"
#endif

#define NSLOTS 64
#define N_CALLS 1000
#define N_OTHER (N_CALLS + 13)
#define N_PY 500

/* cookies: each attachment its own slot */
enum {
	CK_SYSCALL = 3,
	CK_SYS_EXIT = 4,
	CK_UPROBE = 5,
	CK_URETPROBE = 6,
	CK_USDT = 7,
	CK_USDT_ALL = 8,
	CK_UPROBE_ALL = 9,
	CK_PY = 10, /* python:line, and CK_PY + 1: the lines of f */
	CK_PY_ENTRY = 12, /* python:function__entry, and CK_PY_ENTRY + 1: the entries of f */
	CK_PROFILE = 20,
	CK_INTERVAL = 21,
	CK_KILLED = 30,
};

static const char bpf_src[] =
	"#include <linux/types.h>\n"
	"#include <linux/bpf.h>\n"
	"#include <linux/ptrace.h>\n"
	"#include <stdbool.h>\n"
	"#include <bpf/bpf_helpers.h>\n"
	"#include <bpf/bpf_tracing.h>\n"
	"#include <bpf/usdt.bpf.h>\n"
	"\n"
	"char LICENSE[] SEC(\"license\") = \"GPL\";\n"
	"\n"
	"struct slots {\n"
	"	__uint(type, BPF_MAP_TYPE_ARRAY);\n"
	"	__uint(max_entries, 64);\n"
	"	__type(key, __u32);\n"
	"	__type(value, __u64);\n"
	"};\n"
	"struct slots counts SEC(\".maps\");\n"
	"struct slots sums SEC(\".maps\");\n"
	"struct {\n"
	"	__uint(type, BPF_MAP_TYPE_ARRAY);\n"
	"	__uint(max_entries, 1);\n"
	"	__type(key, __u32);\n"
	"	__type(value, __u32);\n"
	"} filter SEC(\".maps\");\n"
	"\n"
	"static __always_inline void bump(__u64 cookie, __u64 v)\n"
	"{\n"
	"	__u32 k = (__u32)cookie;\n"
	"	__u64 *c = bpf_map_lookup_elem(&counts, &k), *s = bpf_map_lookup_elem(&sums, &k);\n"
	"	if (!c || !s)\n"
	"		return;\n"
	"	__sync_fetch_and_add(c, 1);\n"
	"	__sync_fetch_and_add(s, v);\n"
	"}\n"
	"\n"
	"static __always_inline bool ours(void)\n"
	"{\n"
	"	__u32 k = 0, *pid = bpf_map_lookup_elem(&filter, &k);\n"
	"	return pid && *pid == (__u32)(bpf_get_current_pid_tgid() >> 32);\n"
	"}\n"
	"\n"
	"SEC(\"tracepoint\")\n"
	"int tp_count(void *ctx)\n"
	"{\n"
	"	if (ours())\n"
	"		bump(bpf_get_attach_cookie(ctx), 1);\n"
	"	return 0;\n"
	"}\n"
	"\n"
	"SEC(\"uprobe\")\n"
	"int up_count(struct pt_regs *ctx)\n"
	"{\n"
	"	bump(bpf_get_attach_cookie(ctx), (__u64)(int)PT_REGS_PARM1(ctx));\n"
	"	return 0;\n"
	"}\n"
	"\n"
	"SEC(\"uretprobe\")\n"
	"int uret_count(struct pt_regs *ctx)\n"
	"{\n"
	"	bump(bpf_get_attach_cookie(ctx), (__u64)(int)PT_REGS_RC(ctx));\n"
	"	return 0;\n"
	"}\n"
	"\n"
	"SEC(\"usdt\")\n"
	"int usdt_count(struct pt_regs *ctx)\n"
	"{\n"
	"	long i = -1;\n"
	"	bpf_usdt_arg(ctx, 0, &i);\n"
	"	bump(bpf_usdt_cookie(ctx), (__u64)i);\n"
	"	return 0;\n"
	"}\n"
	"\n"
	"SEC(\"usdt\")\n"
	"int usdt_py(struct pt_regs *ctx)\n"
	"{\n"
	"	long name = 0;\n"
	"	char buf[4] = {};\n"
	"	__u64 cookie = bpf_usdt_cookie(ctx);\n"
	"	bump(cookie, 1);\n"
	"	if (bpf_usdt_arg(ctx, 1, &name) == 0 &&\n"
	"	    bpf_probe_read_user_str(buf, sizeof(buf), (void *)name) == 2 && buf[0] == 'f')\n"
	"		bump(cookie + 1, 1);\n"
	"	return 0;\n"
	"}\n"
	"\n"
	"SEC(\"perf_event\")\n"
	"int pe_count(void *ctx)\n"
	"{\n"
	"	bump(bpf_get_attach_cookie(ctx), bpf_get_smp_processor_id());\n"
	"	return 0;\n"
	"}\n";

static struct {
	char dir[64];
	struct bpf_object *obj;
	int counts_fd, sums_fd, filter_fd;
	uint32_t prog_ids[8];
	int nprog_ids;
	struct probe_links links; /* a test's links: destroyed after it, even when it fails */
} g;

/* ------------------------------------------------------------------------------ helpers */

static const char *env_or(const char *name, const char *fallback)
{
	const char *v = getenv(name);

	return v && *v ? v : fallback;
}

static int run_wait(char *const argv[])
{
	int status;
	pid_t pid = fork();

	if (pid < 0)
		return -errno;
	if (pid == 0) {
		execvp(argv[0], argv);
		_exit(127);
	}
	if (waitpid(pid, &status, 0) < 0)
		return -errno;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -EINVAL;
}

static int compile_bpf(char *obj, size_t objsz)
{
	char src[PATH_MAX];
	FILE *f;

	snprintf(g.dir, sizeof(g.dir), "/tmp/weft-attach-XXXXXX");
	if (!mkdtemp(g.dir))
		return -errno;
	snprintf(src, sizeof(src), "%s/attach.bpf.c", g.dir);
	snprintf(obj, objsz, "%s/attach.bpf.o", g.dir);
	f = fopen(src, "w");
	if (!f)
		return -errno;
	fputs(bpf_src, f);
	fclose(f);
	{
		char *argv[] = { (char *)WEFT_CLANG_PATH,
				 (char *)"-target",
				 (char *)"bpf",
				 (char *)"-O2",
				 (char *)"-g",
				 (char *)"-D__TARGET_ARCH_x86",
				 (char *)"-I/usr/include/x86_64-linux-gnu",
				 (char *)"-c",
				 src,
				 (char *)"-o",
				 obj,
				 NULL };

		return run_wait(argv);
	}
}

static struct bpf_program *prog(const char *name)
{
	struct bpf_program *p = bpf_object__find_program_by_name(g.obj, name);

	assert_non_null(p);
	return p;
}

static uint64_t slot(int fd, uint32_t k)
{
	uint64_t v = 0;

	assert_int_equal(bpf_map_lookup_elem(fd, &k, &v), 0);
	return v;
}

static void slots_clear(void)
{
	uint64_t zero = 0;

	for (uint32_t k = 0; k < NSLOTS; k++) {
		assert_int_equal(bpf_map_update_elem(g.counts_fd, &k, &zero, BPF_ANY), 0);
		assert_int_equal(bpf_map_update_elem(g.sums_fd, &k, &zero, BPF_ANY), 0);
	}
}

/* Every count outside the slots in want[] (terminated by -1) is zero. */
static void slots_others_zero(const int *want)
{
	for (uint32_t k = 0; k < NSLOTS; k++) {
		bool wanted = false;

		for (const int *w = want; *w >= 0; w++)
			wanted |= (uint32_t)*w == k;
		if (!wanted && slot(g.counts_fd, k) != 0) {
			fprintf(stderr, "slot %u counted %llu events\n", k,
				(unsigned long long)slot(g.counts_fd, k));
			fail();
		}
	}
}

static void filter_set(pid_t pid)
{
	uint32_t k = 0, v = (uint32_t)pid;

	assert_int_equal(bpf_map_update_elem(g.filter_fd, &k, &v, BPF_ANY), 0);
}

/* Resolves a probe as written in a query (PROVIDER:PART:...) through the real catalog, and
 * copies the one target it must give the way the plan does (fields = NULL). */
static struct probe_target target_of(const char *probe, pid_t pid)
{
	const struct probe_provider *pv;
	struct probe_ctx ctx = { .pid = pid };
	struct probe_set set = { 0 };
	struct probe_err err = { 0 };
	struct probe_target t;
	char buf[PATH_MAX + 256], *parts[4], *s = buf, *c;
	int n = 0;

	snprintf(buf, sizeof(buf), "%s", probe);
	c = strchr(s, ':');
	assert_non_null(c);
	*c = '\0';
	pv = probe_provider_find(s);
	assert_non_null(pv);
	for (s = c + 1; s && n < 4; s = c) {
		c = strchr(s, ':');
		if (c)
			*c++ = '\0';
		parts[n++] = s;
	}
	if (pv->resolve((const char *const *)parts, n, 0, false, &ctx, &set, &err) != 0) {
		fprintf(stderr, "%s: %s (%s)\n", probe, err.msg, err.fix);
		fail();
	}
	assert_int_equal(set.n, 1);
	t = set.v[0];
	t.fields = NULL;
	probe_set_free(&set);
	return t;
}

static void attach_ok(struct bpf_program *p, const struct probe_target *t, uint64_t cookie,
		      pid_t pid, struct probe_links *links)
{
	struct probe_err err = { 0 };

	if (probe_attach_target(p, t, cookie, pid, links, &err) != 0) {
		fprintf(stderr, "attach %s: %s (%s)\n", t->name, err.msg, err.fix);
		fail();
	}
}

/* ---------------------------------------------------- are any of our attachments left? */

static bool is_ours(uint32_t prog_id)
{
	for (int i = 0; i < g.nprog_ids; i++)
		if (g.prog_ids[i] == prog_id)
			return true;
	return false;
}

/* Links the kernel holds whose program is one of ours (what `bpftool link list` reads). */
static int kernel_links_ours(void)
{
	uint32_t id = 0;
	int n = 0;

	while (bpf_link_get_next_id(id, &id) == 0) {
		struct bpf_link_info info;
		uint32_t len = sizeof(info);
		int fd = bpf_link_get_fd_by_id(id);

		if (fd < 0)
			continue; /* gone since listed */
		memset(&info, 0, sizeof(info));
		if (bpf_obj_get_info_by_fd(fd, &info, &len) == 0 && is_ours(info.prog_id))
			n++;
		close(fd);
	}
	return n;
}

/* Entries of `bpftool -j ARGS` (a JSON array, parsed by jansson) whose prog_id is one of
 * ours.  bpftool walks every process's descriptors for `perf list`, and a process of another
 * test exiting meanwhile can make it fail: it is asked again, up to five times. */
static int bpftool_ours(const char *args)
{
	char cmd[128], *out = NULL;
	size_t len = 0, cap = 0, r;
	json_error_t err;
	json_t *a = NULL, *e;
	size_t k;
	int n = 0, rc = -1;

	snprintf(cmd, sizeof(cmd), "bpftool -j %s 2>/dev/null", args);
	for (int attempt = 0; attempt < 5 && rc != 0; attempt++) {
		FILE *f = popen(cmd, "r");

		assert_non_null(f);
		len = 0;
		do {
			if (len + 4096 + 1 > cap) {
				cap = cap ? cap * 2 : 65536;
				out = realloc(out, cap);
				assert_non_null(out);
			}
			r = fread(out + len, 1, 4096, f);
			len += r;
		} while (r > 0);
		out[len] = '\0';
		rc = pclose(f);
		if (rc != 0) {
			struct timespec ts = { 0, 100000000 };

			nanosleep(&ts, NULL);
		}
	}
	if (rc != 0)
		fail_msg("bpftool -j %s failed five times (status %d): %s", args, rc, out);
	a = json_loads(out, 0, &err);
	if (!json_is_array(a))
		fail_msg("bpftool -j %s: not a JSON array (%s): %s", args, err.text, out);
	json_array_foreach(a, k, e)
	{
		json_t *id = json_object_get(e, "prog_id");

		for (int i = 0; json_is_integer(id) && i < g.nprog_ids; i++)
			n += json_integer_value(id) == (json_int_t)g.prog_ids[i];
	}
	json_decref(a);
	free(out);
	return n;
}

/* Lines of tracefs's uprobe_events naming path (libbpf's legacy mode would add them). */
static int uprobe_events_naming(const char *path)
{
	char line[PATH_MAX + 256];
	int n = 0;
	FILE *f = fopen("/sys/kernel/tracing/uprobe_events", "re");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		n += strstr(line, path) != NULL;
	fclose(f);
	return n;
}

/* Attached: the kernel and bpftool see our links (`bpftool perf list` shows tracepoints and
 * uprobes, not software perf events).  Detached: nothing of ours anywhere. */
static void assert_attached(bool perf_list)
{
	assert_true(kernel_links_ours() > 0);
	assert_true(bpftool_ours("link list") > 0);
	if (perf_list)
		assert_true(bpftool_ours("perf list") > 0);
}

static void assert_nothing_left(const char *binary)
{
	assert_int_equal(kernel_links_ours(), 0);
	assert_int_equal(bpftool_ours("link list"), 0);
	assert_int_equal(bpftool_ours("perf list"), 0);
	if (binary)
		assert_int_equal(uprobe_events_naming(binary), 0);
}

/* ------------------------------------------------------------------------- workloads */

struct held {
	pid_t pid;
	int go; /* write end: one byte releases the child into exec */
};

/* Forks a child that waits for a byte, then execs argv. */
static struct held held_start(char *const argv[])
{
	struct held h;
	int p[2];
	char c;

	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	h.pid = fork();
	assert_true(h.pid >= 0);
	if (h.pid == 0) {
		if (read(p[0], &c, 1) != 1)
			_exit(126);
		execv(argv[0], argv);
		_exit(127);
	}
	close(p[0]);
	h.go = p[1];
	return h;
}

static void held_release(struct held *h)
{
	assert_int_equal(write(h->go, "g", 1), 1);
	close(h->go);
}

static void held_wait(const struct held *h)
{
	int status;

	assert_int_equal(waitpid(h->pid, &status, 0), h->pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

static void wl_usdt_path(char *out, size_t outsz)
{
	snprintf(out, outsz, "%s/tests/workloads/wl_usdt", env_or("WEFT_BINARY_DIR", "."));
	if (access(out, X_OK) != 0) {
		fprintf(stderr, "no workload at %s (set WEFT_BINARY_DIR)\n", out);
		fail();
	}
}

/* ---------------------------------------------------------------------------- tests */

static int group_setup(void **state)
{
	char obj[PATH_MAX];
	struct bpf_program *p;

	if (compile_bpf(obj, sizeof(obj)) != 0) {
		fprintf(stderr, "clang failed to compile the test's BPF program\n");
		return -1;
	}
	g.obj = bpf_object__open_file(obj, NULL);
	if (!g.obj || bpf_object__load(g.obj) != 0) {
		fprintf(stderr, "cannot load %s: %s\n", obj, strerror(errno));
		return -1;
	}
	g.counts_fd = bpf_object__find_map_fd_by_name(g.obj, "counts");
	g.sums_fd = bpf_object__find_map_fd_by_name(g.obj, "sums");
	g.filter_fd = bpf_object__find_map_fd_by_name(g.obj, "filter");
	if (g.counts_fd < 0 || g.sums_fd < 0 || g.filter_fd < 0)
		return -1;
	bpf_object__for_each_program(p, g.obj)
	{
		struct bpf_prog_info info;
		uint32_t len = sizeof(info);

		memset(&info, 0, sizeof(info));
		if (bpf_obj_get_info_by_fd(bpf_program__fd(p), &info, &len) != 0 ||
		    g.nprog_ids == (int)(sizeof(g.prog_ids) / sizeof(g.prog_ids[0])))
			return -1;
		g.prog_ids[g.nprog_ids++] = info.id;
	}
	return 0;
}

static int group_teardown(void **state)
{
	char cmd[PATH_MAX + 16];

	bpf_object__close(g.obj);
	if (g.dir[0]) {
		snprintf(cmd, sizeof(cmd), "rm -rf %s", g.dir);
		if (system(cmd) != 0)
			fprintf(stderr, "could not remove %s\n", g.dir);
	}
	return 0;
}

static int test_setup(void **state)
{
	if (!g.obj)
		return 0;
	slots_clear();
	filter_set(0);
	return 0;
}

static int test_teardown(void **state)
{
	probe_links_destroy(&g.links);
	return 0;
}

static void test_tracepoint(void **state)
{
	struct probe_links *links = &g.links;
	struct probe_target enter, exit_t;
	struct probe_set set = { 0 };
	struct probe_err err = { 0 };
	const int want[] = { CK_SYSCALL, CK_SYS_EXIT, -1 };

	enter = target_of("syscall:getppid", 0);
	assert_int_equal(enter.kind, PROBE_SYSCALL);
	/* span(syscall:getppid)'s end: a tracepoint target */
	assert_int_equal(probe_syscall_exit_resolve("getppid", NULL, &set, &err), 0);
	assert_int_equal(set.n, 1);
	exit_t = set.v[0];
	exit_t.fields = NULL;
	probe_set_free(&set);
	assert_int_equal(exit_t.kind, PROBE_TRACEPOINT);

	filter_set(getpid());
	attach_ok(prog("tp_count"), &enter, CK_SYSCALL, getpid(), links);
	attach_ok(prog("tp_count"), &exit_t, CK_SYS_EXIT, getpid(), links);
	assert_int_equal(links->n, 2);
	for (int i = 0; i < N_CALLS; i++)
		syscall(SYS_getppid);
	assert_attached(true);
	probe_links_destroy(links);
	assert_int_equal(links->n, 0);
	assert_null(links->v);
	/* detached: these are not counted */
	for (int i = 0; i < 10; i++)
		syscall(SYS_getppid);

	assert_int_equal(slot(g.counts_fd, CK_SYSCALL), N_CALLS);
	assert_int_equal(slot(g.counts_fd, CK_SYS_EXIT), N_CALLS);
	slots_others_zero(want);
	assert_nothing_left(NULL);
}

static void test_uprobe_usdt(void **state)
{
	struct probe_links *links = &g.links;
	struct probe_target up, uret, tick;
	char path[PATH_MAX], probe[PATH_MAX + 64], n1[16], n2[16];
	const int want[] = { CK_UPROBE, CK_URETPROBE, CK_USDT, -1 };
	const int want_all[] = { CK_UPROBE_ALL, CK_USDT_ALL, -1 };
	const uint64_t n = N_CALLS, m = N_OTHER;
	char *argv_a[] = { path, n1, (char *)"0", NULL };
	char *argv_b[] = { path, n2, (char *)"0", NULL };
	struct held a, b;

	wl_usdt_path(path, sizeof(path));
	snprintf(n1, sizeof(n1), "%d", N_CALLS);
	snprintf(n2, sizeof(n2), "%d", N_OTHER);
	snprintf(probe, sizeof(probe), "uprobe:%s:wl_work", path);
	up = target_of(probe, 0);
	snprintf(probe, sizeof(probe), "uretprobe:%s:wl_work", path);
	uret = target_of(probe, 0);
	snprintf(probe, sizeof(probe), "usdt:%s:weft_test:tick", path);
	tick = target_of(probe, 0);
	assert_int_equal(up.kind, PROBE_UPROBE);
	assert_int_equal(uret.kind, PROBE_URETPROBE);
	assert_int_equal(tick.kind, PROBE_USDT);

	/* -p a: a's calls count, b's (running at the same time) do not */
	a = held_start(argv_a);
	b = held_start(argv_b);
	attach_ok(prog("up_count"), &up, CK_UPROBE, a.pid, links);
	attach_ok(prog("uret_count"), &uret, CK_URETPROBE, a.pid, links);
	attach_ok(prog("usdt_count"), &tick, CK_USDT, a.pid, links);
	assert_int_equal(links->n, 3);
	assert_attached(true);
	held_release(&a);
	held_release(&b);
	held_wait(&a);
	held_wait(&b);
	probe_links_destroy(links);
	assert_nothing_left(path);

	assert_int_equal(slot(g.counts_fd, CK_UPROBE), n);
	assert_int_equal(slot(g.sums_fd, CK_UPROBE), n * (n - 1) / 2); /* arg0 = i */
	assert_int_equal(slot(g.counts_fd, CK_URETPROBE), n);
	assert_int_equal(slot(g.sums_fd, CK_URETPROBE), 3 * n * (n - 1) / 2 + n); /* 3i + 1 */
	assert_int_equal(slot(g.counts_fd, CK_USDT), n);
	assert_int_equal(slot(g.sums_fd, CK_USDT), n * (n - 1) / 2); /* tick's arg0 = i */
	slots_others_zero(want);

	/* pid 0: every process that runs this file (only ours do: it is our build's) */
	slots_clear();
	a = held_start(argv_a);
	b = held_start(argv_b);
	attach_ok(prog("up_count"), &up, CK_UPROBE_ALL, 0, links);
	attach_ok(prog("usdt_count"), &tick, CK_USDT_ALL, 0, links);
	held_release(&a);
	held_release(&b);
	held_wait(&a);
	held_wait(&b);
	probe_links_destroy(links);
	assert_int_equal(slot(g.counts_fd, CK_UPROBE_ALL), n + m);
	assert_int_equal(slot(g.counts_fd, CK_USDT_ALL), n + m);
	assert_int_equal(slot(g.sums_fd, CK_USDT_ALL), n * (n - 1) / 2 + m * (m - 1) / 2);
	slots_others_zero(want_all);
	assert_nothing_left(path);
}

/* Waits for a line, calls f() N times, says so, waits for a line, exits: so the test can look
 * at the process's semaphores while it is attached, and again after detaching. */
static const char py_script[] = "import sys\n"
				"def f():\n"
				"    pass\n"
				"n = int(sys.argv[1])\n"
				"print('ready %d %d' % sys.version_info[:2], flush=True)\n"
				"sys.stdin.readline()\n"
				"for i in range(n):\n"
				"    f()\n"
				"print('done', flush=True)\n"
				"sys.stdin.readline()\n";

/* The value of the USDT semaphore of t in process pid: the note gives its file offset, the
 * process's maps where that part of the file is.  -1 if it cannot be read. */
static int usdt_semaphore_read(pid_t pid, const struct probe_target *t)
{
	char path[64], line[PATH_MAX + 256];
	unsigned long long start, end, pgoff;
	struct probe_elf_usdt *notes;
	uint64_t sem_off = 0;
	int n, fd, ret = -1;
	uint16_t v;
	FILE *f;

	assert_int_equal(probe_elf_usdt_read(t->binary, &notes, &n), 0);
	for (int i = 0; i < n; i++)
		if (strcmp(notes[i].provider, t->provider) == 0 &&
		    strcmp(notes[i].name, t->usdt_name) == 0)
			sem_off = notes[i].sem_offset;
	free(notes);
	assert_true(sem_off != 0);
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	f = fopen(path, "re");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		if (!strstr(line, t->binary) ||
		    sscanf(line, "%llx-%llx %*s %llx", &start, &end, &pgoff) != 3)
			continue;
		if (sem_off >= pgoff && sem_off - pgoff < end - start) {
			snprintf(path, sizeof(path), "/proc/%d/mem", (int)pid);
			fd = open(path, O_RDONLY | O_CLOEXEC);
			if (fd >= 0 && pread(fd, &v, sizeof(v), (off_t)(start + sem_off - pgoff)) ==
					       (ssize_t)sizeof(v))
				ret = v;
			if (fd >= 0)
				close(fd);
			break;
		}
	}
	fclose(f);
	return ret;
}

/*
 * USDT probes with semaphores, attached by pid to a python3 that is already running: libbpf
 * has the kernel raise each probe's semaphore in that process (checked in its memory), and
 * lower it on detach; the program reads arg1, the function's name, a user string.  f is
 * called N times and has one line, so exactly N function__entry and N line firings are f's.
 *
 * Both probes are attached because CPython 3.11 reaches function__entry only on its tracing
 * path, which python:line's semaphore turns on (python/cpython#98894): attached alone, it
 * never fires on Debian 12's python3.11, whatever the tracer does.
 */
static void test_usdt_python_running(void **state)
{
	struct probe_links *links = &g.links;
	struct probe_target line_t, entry_t;
	char python[PATH_MAX], narg[16], line[64];
	const int want[] = { CK_PY, CK_PY + 1, CK_PY_ENTRY, CK_PY_ENTRY + 1, -1 };
	int in[2], out[2], status, major = 0, minor = 0;
	FILE *from;
	pid_t pid;

	if (probe_resolve_binary("python3", 0, python, sizeof(python)) != 0)
		wt_skip("test_usdt_python_running: no python3 on this host");
	snprintf(narg, sizeof(narg), "%d", N_PY);
	assert_int_equal(pipe2(in, O_CLOEXEC), 0);
	assert_int_equal(pipe2(out, O_CLOEXEC), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		char *argv[] = { python, (char *)"-c", (char *)py_script, narg, NULL };

		dup2(in[0], 0);
		dup2(out[1], 1);
		execv(python, argv);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	from = fdopen(out[0], "r");
	assert_non_null(from);
	/* running: it has started up and waits on stdin */
	assert_non_null(fgets(line, sizeof(line), from));
	assert_int_equal(sscanf(line, "ready %d %d", &major, &minor), 2);

	/* resolved as a user writes them: `python3` through the process's maps */
	line_t = target_of("usdt:python3:python:line", pid);
	entry_t = target_of("usdt:python3:python:function__entry", pid);
	assert_true(line_t.usdt_semaphore);
	assert_true(entry_t.usdt_semaphore);
	assert_int_equal(usdt_semaphore_read(pid, &line_t), 0);
	assert_int_equal(usdt_semaphore_read(pid, &entry_t), 0);
	attach_ok(prog("usdt_py"), &line_t, CK_PY, pid, links);
	attach_ok(prog("usdt_py"), &entry_t, CK_PY_ENTRY, pid, links);
	assert_int_equal(usdt_semaphore_read(pid, &line_t), 1);
	assert_int_equal(usdt_semaphore_read(pid, &entry_t), 1);

	assert_int_equal(write(in[1], "go\n", 3), 3);
	assert_non_null(fgets(line, sizeof(line), from));
	assert_string_equal(line, "done\n");
	probe_links_destroy(links);
	assert_int_equal(usdt_semaphore_read(pid, &line_t), 0); /* lowered on detach */
	assert_int_equal(usdt_semaphore_read(pid, &entry_t), 0);
	assert_int_equal(write(in[1], "go\n", 3), 3);
	close(in[1]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	fclose(from);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);

	assert_true(slot(g.counts_fd, CK_PY) >= N_PY); /* every line run, f's and others */
	assert_int_equal(slot(g.counts_fd, CK_PY + 1), N_PY);
	assert_true(slot(g.counts_fd, CK_PY_ENTRY) >= N_PY);
	assert_int_equal(slot(g.counts_fd, CK_PY_ENTRY + 1), N_PY);
	slots_others_zero(want);
	assert_nothing_left(line_t.binary);
}

/*
 * Waits until slot k of fd counts at least n, burning CPU meanwhile (busy: a profile samples
 * running CPUs) or sleeping; fails after a bound that only a hang reaches.  Counts, not
 * seconds: how fast a timer fires is the kernel's business.
 */
static void wait_count(int fd, uint32_t k, uint64_t n, bool busy)
{
	const struct timespec nap = { 0, 10000000 };
	struct timespec ts;
	uint64_t t0, t;
	volatile uint64_t x = 0;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	t0 = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	while (slot(fd, k) < n) {
		if (busy) {
			for (int i = 0; i < 100000; i++)
				x += (uint64_t)i;
			(void)x;
		} else {
			nanosleep(&nap, NULL);
		}
		clock_gettime(CLOCK_MONOTONIC, &ts);
		t = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
		if (t - t0 > 60000000000ull)
			fail_msg("slot %u counts %llu, not %llu, after 60 s", k,
				 (unsigned long long)slot(fd, k), (unsigned long long)n);
	}
}

static int online_cpus(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	return n > 0 ? (int)n : 1;
}

static void test_profile(void **state)
{
	struct probe_links *links = &g.links;
	struct probe_target t;
	const int want[] = { CK_PROFILE, -1 };

	t = target_of("profile:99hz", 0);
	assert_int_equal(t.kind, PROBE_PROFILE);
	attach_ok(prog("pe_count"), &t, CK_PROFILE, 0, links);
	assert_int_equal(links->n, online_cpus()); /* one perf event per online CPU */
	assert_attached(false);
	wait_count(g.counts_fd, CK_PROFILE, 3, true); /* it fires, again and again */
	probe_links_destroy(links);
	slots_others_zero(want);
	assert_nothing_left(NULL);
}

static void test_interval(void **state)
{
	struct probe_links *links = &g.links;
	struct probe_target t;
	const int want[] = { CK_INTERVAL, -1 };
	uint64_t n;

	t = target_of("interval:100ms", 0);
	assert_int_equal(t.kind, PROBE_INTERVAL);
	attach_ok(prog("pe_count"), &t, CK_INTERVAL, 0, links);
	assert_int_equal(links->n, 1); /* one CPU */
	wait_count(g.counts_fd, CK_INTERVAL, 3, false); /* it fires, again and again */
	probe_links_destroy(links);
	n = slot(g.counts_fd, CK_INTERVAL);
	/* all on one CPU: the sum of CPU numbers is n times that CPU */
	assert_int_equal(slot(g.sums_fd, CK_INTERVAL) % n, 0);
	slots_others_zero(want);
	assert_nothing_left(NULL);
}

/* A refused attachment: the error names the target and a fix, and adds no link. */
static void test_attach_errors(void **state)
{
	struct probe_links *links = &g.links;
	struct probe_err err = { 0 };
	struct probe_target t, moved;
	char path[PATH_MAX], probe[PATH_MAX + 64];
	pid_t dead;
	int status;

	wl_usdt_path(path, sizeof(path));
	snprintf(probe, sizeof(probe), "uprobe:%s:wl_work", path);
	t = target_of(probe, 0);
	/* the binary is gone since the query was compiled */
	moved = t;
	snprintf(moved.binary, sizeof(moved.binary), "%s/no-such-binary", g.dir);
	assert_int_equal(probe_attach_target(prog("up_count"), &moved, 1, 0, links, &err), -1);
	assert_int_equal(err.kind, PERR_ATTACH);
	assert_non_null(strstr(err.msg, t.name));
	assert_non_null(strstr(err.fix, "compile it again"));
	assert_int_equal(links->n, 0);
	/* -p of a process that has exited */
	dead = fork();
	assert_true(dead >= 0);
	if (dead == 0)
		_exit(0);
	assert_int_equal(waitpid(dead, &status, 0), dead);
	memset(&err, 0, sizeof(err));
	assert_int_equal(probe_attach_target(prog("up_count"), &t, 1, dead, links, &err), -1);
	assert_int_equal(err.kind, PERR_PID);
	assert_int_equal(links->n, 0);
	/* a program of the wrong type for the target: the kernel refuses, we say which */
	t = target_of("syscall:getppid", 0);
	memset(&err, 0, sizeof(err));
	assert_int_equal(probe_attach_target(prog("up_count"), &t, 1, 0, links, &err), -1);
	assert_int_equal(err.kind, PERR_ATTACH);
	assert_non_null(strstr(err.msg, "syscall:getppid"));
	assert_int_equal(links->n, 0);
	probe_links_destroy(links);
	assert_nothing_left(path);
}

/*
 * Targets checked against one file and attached to another, as an agent of `weft submit`
 * does when its host's file differs from the compiling host's: an +offset inside an
 * instruction, a function that is not where the target says, and a USDT site that is not a
 * nop are refused at attach, with no link made.  The instruction is found with the decoder
 * test_insn checks against known lengths; the boundary after it attaches.
 */
static void test_attach_recheck(void **state)
{
	struct probe_links *links = &g.links;
	struct probe_err err = { 0 };
	struct probe_target t, bad, u;
	struct probe_elf_usdt *notes;
	struct probe_insn insn = { 0 };
	char path[PATH_MAX], copy[128], probe[PATH_MAX + 64], buf[65536];
	uint8_t code[PROBE_INSN_MAX];
	uint64_t site = 0;
	uint16_t machine = 0;
	size_t got = 0;
	int n, in, out;
	ssize_t r;

	if (geteuid() != 0)
		skip();
	wl_usdt_path(path, sizeof(path));
	snprintf(probe, sizeof(probe), "uprobe:%s:wl_work", path);
	t = target_of(probe, 0);
	assert_int_equal(
		probe_elf_code_read(path, t.sym_offset, code, sizeof(code), &got, &machine), 0);
	for (uint64_t off = 0; off < got && insn.len < 2; off = insn.start + insn.len)
		assert_int_equal(probe_insn_find(machine, code, got, off, &insn), 0);
	assert_true(insn.len > 1);

	bad = t;
	bad.offset = insn.start + 1;
	assert_int_equal(probe_attach_target(prog("up_count"), &bad, 1, 0, links, &err), -1);
	assert_int_equal(err.kind, PERR_OFFSET_INSN);
	assert_int_equal(links->n, 0);
	bad.offset = insn.start + insn.len;
	attach_ok(prog("up_count"), &bad, 1, 0, links);
	assert_int_equal(links->n, 1);
	probe_links_destroy(links);

	bad.sym_offset = t.sym_offset + 1; /* where the compiling host's file had wl_work */
	memset(&err, 0, sizeof(err));
	assert_int_equal(probe_attach_target(prog("up_count"), &bad, 1, 0, links, &err), -1);
	assert_int_equal(err.kind, PERR_OFFSET_INSN);
	assert_non_null(strstr(err.msg, "the file differs"));
	assert_int_equal(links->n, 0);

	/* a copy of wl_usdt whose tick site holds int3 */
	assert_int_equal(probe_elf_usdt_read(path, &notes, &n), 0);
	for (int i = 0; i < n; i++)
		if (strcmp(notes[i].name, "tick") == 0)
			site = notes[i].offset;
	free(notes);
	assert_true(site > 0);
	snprintf(copy, sizeof(copy), "%s/wl_usdt_int3", g.dir);
	in = open(path, O_RDONLY | O_CLOEXEC);
	out = open(copy, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
	assert_true(in >= 0 && out >= 0);
	while ((r = read(in, buf, sizeof(buf))) > 0)
		assert_int_equal(write(out, buf, (size_t)r), r);
	assert_int_equal(pwrite(out, "\xcc", 1, (off_t)site), 1);
	close(in);
	close(out);
	snprintf(probe, sizeof(probe), "usdt:%s:weft_test:tick", path);
	u = target_of(probe, 0);
	snprintf(u.binary, sizeof(u.binary), "%s", copy);
	memset(&err, 0, sizeof(err));
	assert_int_equal(probe_attach_target(prog("usdt_count"), &u, 1, 0, links, &err), -1);
	assert_int_equal(err.kind, PERR_USDT_SITE);
	assert_non_null(strstr(err.msg, "int3"));
	assert_int_equal(links->n, 0);
	unlink(copy);
	assert_nothing_left(path);
}

/* The kernel detaches what a killed process attached: nothing is pinned or left in tracefs. */
static void test_sigkill_detaches(void **state)
{
	struct probe_target up, tp, prof;
	char path[PATH_MAX], probe[PATH_MAX + 64], c;
	int ready[2], status, left = -1;
	pid_t child;

	wl_usdt_path(path, sizeof(path));
	snprintf(probe, sizeof(probe), "uprobe:%s:wl_work", path);
	up = target_of(probe, 0);
	tp = target_of("syscall:getppid", 0);
	prof = target_of("profile:99hz", 0);
	assert_int_equal(pipe2(ready, O_CLOEXEC), 0);
	child = fork();
	assert_true(child >= 0);
	if (child == 0) {
		/* the programs' fds are inherited: attach them from here, then wait to die */
		struct probe_links *links = &g.links;
		struct probe_err err = { 0 };

		close(ready[0]);
		if (probe_attach_target(prog("up_count"), &up, CK_KILLED, 0, links, &err) ||
		    probe_attach_target(prog("tp_count"), &tp, CK_KILLED, 0, links, &err) ||
		    probe_attach_target(prog("pe_count"), &prof, CK_KILLED, 0, links, &err))
			_exit(1);
		if (write(ready[1], "r", 1) != 1)
			_exit(1);
		for (;;)
			pause();
	}
	close(ready[1]);
	assert_int_equal(read(ready[0], &c, 1), 1);
	close(ready[0]);
	assert_attached(true);
	assert_true(kernel_links_ours() >= 2 + online_cpus());
	assert_int_equal(kill(child, SIGKILL), 0);
	assert_int_equal(waitpid(child, &status, 0), child);
	assert_true(WIFSIGNALED(status));
	/* the last fput may finish just after the parent is told: allow a moment */
	for (int i = 0; i < 200 && left != 0; i++) {
		struct timespec ts = { 0, 10000000 };

		left = kernel_links_ours();
		if (left)
			nanosleep(&ts, NULL);
	}
	assert_int_equal(left, 0);
	assert_nothing_left(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_tracepoint, test_setup, test_teardown),
		cmocka_unit_test_setup_teardown(test_uprobe_usdt, test_setup, test_teardown),
		cmocka_unit_test_setup_teardown(test_usdt_python_running, test_setup,
						test_teardown),
		cmocka_unit_test_setup_teardown(test_profile, test_setup, test_teardown),
		cmocka_unit_test_setup_teardown(test_interval, test_setup, test_teardown),
		cmocka_unit_test_setup_teardown(test_attach_recheck, test_setup, test_teardown),
		cmocka_unit_test_setup_teardown(test_attach_errors, test_setup, test_teardown),
		cmocka_unit_test_setup_teardown(test_sigkill_detaches, test_setup, test_teardown),
	};

	if (!wt_root("it attaches BPF programs"))
		return WT_SKIP;
	return wt_status(cmocka_run_group_tests(tests, group_setup, group_teardown));
}
