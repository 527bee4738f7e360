// SPDX-License-Identifier: Apache-2.0
/*
 * The runtime's value helpers, run in the real kernel through BPF_PROG_TEST_RUN of a raw
 * tracepoint program (test_run executes it in this process, so user pointers are ours):
 *  - WEFT_LIKE against fnmatch(3) (no flags) on a table of patterns and subjects, so the
 *    bit-parallel glob must agree with libc on every pair;
 *  - WEFT_STREQ against strcmp;
 *  - weft_str_user: a short string, a string that fills its buffer (counted string_truncated)
 *    and a faulting pointer (counted string_fault, value "");
 *  - a tracepoint's __data_loc string (sched_process_exec's filename, offsets read from
 *    tracefs like the code generator reads them), weft_comm and WEFT_STREQ on it, for
 *    exec()s of a copy of true(1) this test makes.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <fnmatch.h>
#include <sys/mount.h>
#include <cmocka.h>
#include "tools/bench/rt_harness.h"
#include "tests/skip.h"

static const char *const patterns[] = {
	"abc",	 "a*",	     "*c", "*b*",    "a?c",   "*",	"",
	"a*b*c", "*a*a*a*b", "??", "x*y?z*", "**a**", "*.so.?", "/usr/*/lib*.so*",
	"?*?",	 "abc*abc",
};
#define N_PATTERNS (sizeof(patterns) / sizeof(patterns[0]))

static const char prog_src[] =
	"#include \"weft.bpf.h\"\n"
	"\n"
	"struct io { char subject[64]; __u64 like; __u64 eq; __u64 eqw; char str[16]; __s64 n;\n"
	"	char file[64]; __u64 execs; __s64 exec_pid; } io;\n"
	"\n"
	"#define L(i, pat) r |= (__u64)WEFT_LIKE(io.subject, sizeof(io.subject), pat) << (i)\n"
	"SEC(\"raw_tp/sys_enter\")\n"
	"int p_like(void *ctx)\n"
	"{\n"
	"	__u64 r = 0;\n"
	"	L(0, \"abc\"); L(1, \"a*\"); L(2, \"*c\"); L(3, \"*b*\");\n"
	"	L(4, \"a?c\"); L(5, \"*\"); L(6, \"\"); L(7, \"a*b*c\");\n"
	"	L(8, \"*a*a*a*b\"); L(9, \"?\?\"); L(10, \"x*y?z*\"); L(11, \"**a**\");\n"
	"	L(12, \"*.so.?\"); L(13, \"/usr/*/lib*.so*\"); L(14, \"?*?\"); L(15, \"abc*abc\");\n"
	"	io.like = r;\n"
	"	r = (__u64)WEFT_STREQ(io.subject, sizeof(io.subject), \"abc\");\n"
	"	r |= (__u64)WEFT_STREQ(io.subject, sizeof(io.subject), \"\") << 1;\n"
	"	r |= (__u64)WEFT_STREQ(io.subject, sizeof(io.subject), \"/usr/lib/libc.so.6\") << 2;\n"
	"	io.eq = r;\n"
	"#define W(i, lit) r |= (__u64)WEFT_STREQ_W(io.subject, sizeof(io.subject), lit) << (i)\n"
	"	r = 0;\n"
	"	W(0, \"abc\"); W(1, \"\"); W(2, \"/usr/lib/libc.so.6\"); W(3, \"abcdefg\");\n"
	"	W(4, \"abcdefgh\"); W(5, \"aaaaaaaaaaaaaaa\"); W(6, \"aaaaaaaaaaaaaaaa\");\n"
	"	W(7, \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab\");\n"
	"	io.eqw = r;\n"
	"	return 0;\n"
	"}\n"
	"\n"
	"SEC(\"raw_tp/sys_enter\")\n"
	"int p_str(struct bpf_raw_tracepoint_args *ctx)\n"
	"{\n"
	"	__u32 e = weft_epoch();\n"
	"	io.n = weft_str_user(e, io.str, sizeof(io.str), (const void *)ctx->args[0]);\n"
	"	return 0;\n"
	"}\n"
	"\n"
	"SEC(\"tp/sched/sched_process_exec\")\n"
	"int p_exec(void *ctx)\n"
	"{\n"
	"	__u32 e = weft_epoch();\n"
	"	char comm[16];\n"
	"	weft_comm(comm);\n"
	"	if (!WEFT_STREQ(comm, sizeof(comm), \"weft_rt_exec\"))\n"
	"		return 0;\n"
	"	weft_tp_str_loc(e, ctx, FILENAME_OFF, io.file, sizeof(io.file));\n"
	"	io.exec_pid = WEFT_TP(ctx, PID_OFF, __s32);\n"
	"	io.execs++;\n"
	"	return 0;\n"
	"}\n";

static const char *const eq_lits[] = { "abc", "", "/usr/lib/libc.so.6" };
/* WEFT_STREQ_W's: the NUL at each place of a word, and the longest literal */
static const char *const eqw_lits[] = {
	"abc",
	"",
	"/usr/lib/libc.so.6",
	"abcdefg",
	"abcdefgh",
	"aaaaaaaaaaaaaaa",
	"aaaaaaaaaaaaaaaa",
	"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab",
};

static const char *const subjects[] = {
	"abc",
	"",
	"a",
	"ab",
	"abcabc",
	"abcxabc",
	"aaab",
	"xaaab",
	"aaaa",
	"xyzyqz",
	"x1y2z",
	"xyz",
	"/usr/x86_64-linux-gnu/lib/libc.so.6",
	"/usr/lib/libc.so.6",
	"/usr/lib/libc.so",
	"libfoo.so.1",
	"libfoo.so.12",
	"a.c",
	"abcdefg",
	"abcdefgh",
	"abcdefghi",
	"aaaaaaaaaaaaaaa",
	"aaaaaaaaaaaaaaaa",
	"aaaaaaaaaaaaaaaaa",
	"abbbc",
	"acb",
	"ba",
	"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab", /* 63 bytes */
	"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
};

struct io {
	char subject[64];
	__u64 like;
	__u64 eq;
	__u64 eqw;
	char str[16];
	__s64 n;
	char file[64];
	__u64 execs;
	__s64 exec_pid;
};

static int bss_fd(struct rt_prog *p)
{
	struct bpf_map *m = bpf_object__find_map_by_name(p->obj, ".bss");

	return m && bpf_map__value_size(m) == sizeof(struct io) ? bpf_map__fd(m) : -1;
}

static int run_prog(struct rt_prog *p, const char *name, __u64 arg0)
{
	__u64 args[1] = { arg0 };
	LIBBPF_OPTS(bpf_test_run_opts, opts, .ctx_in = args, .ctx_size_in = sizeof(args));
	struct bpf_program *prog = bpf_object__find_program_by_name(p->obj, name);

	if (!prog)
		return -ENOENT;
	return bpf_prog_test_run_opts(bpf_program__fd(prog), &opts);
}

/* The offset of `field` in a tracepoint's tracefs format, or -1. */
static int tp_field_offset(const char *event, const char *field)
{
	char path[256], line[512], pat[96];
	int off = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/sys/kernel/tracing/events/%s/format", event);
	snprintf(pat, sizeof(pat), " %s;", field);
	f = fopen(path, "r");
	if (!f && mount("nodev", "/sys/kernel/tracing", "tracefs", 0, NULL) == 0)
		f = fopen(path, "r"); /* tracefs was not mounted */
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		char *p = strstr(line, pat), *o = strstr(line, "offset:");

		if (p && o && sscanf(o, "offset:%d;", &off) == 1)
			break;
	}
	fclose(f);
	return off;
}

/* The helpers program with the tracefs offsets it needs. */
static int compile_helpers(struct rt_prog *p, char *obj, size_t len)
{
	int foff = tp_field_offset("sched/sched_process_exec", "filename");
	int poff = tp_field_offset("sched/sched_process_exec", "pid");
	char src[sizeof(prog_src) + 128];

	if (foff < 0 || poff < 0)
		return -ENOENT;
	snprintf(src, sizeof(src), "#define FILENAME_OFF %d\n#define PID_OFF %d\n%s", foff, poff,
		 prog_src);
	return rt_compile(p, "helpers", src, obj, len);
}

static void test_like_and_streq_match_libc(void **state)
{
	const char *const no_attach[] = { "p_like", "p_str", "p_exec", NULL };
	struct rt_prog p = { 0 };
	char obj[PATH_MAX];
	__u32 zero = 0;
	int fd, checked = 0, checked_eq = 0;

	(void)state;
	assert_int_equal(compile_helpers(&p, obj, sizeof(obj)), 0);
	assert_int_equal(rt_load(&p, obj, NULL, NULL, no_attach), 0);
	fd = bss_fd(&p);
	assert_true(fd >= 0);
	/* each subject twice: the bytes after its NUL zero, then not (a comm of a kernel before
	 * 6.x keeps an older, longer name's bytes there): no comparison may look at them */
	for (size_t k = 0; k < 2 * sizeof(subjects) / sizeof(subjects[0]); k++) {
		size_t s = k / 2;
		struct io io = { 0 };

		assert_true(strlen(subjects[s]) < sizeof(io.subject));
		if (k % 2)
			memset(io.subject, 'a', sizeof(io.subject));
		strcpy(io.subject, subjects[s]);
		assert_int_equal(bpf_map_update_elem(fd, &zero, &io, BPF_ANY), 0);
		assert_int_equal(run_prog(&p, "p_like", 0), 0);
		assert_int_equal(bpf_map_lookup_elem(fd, &zero, &io), 0);
		for (size_t i = 0; i < N_PATTERNS; i++) {
			int want = fnmatch(patterns[i], subjects[s], 0) == 0;
			int got = (int)((io.like >> i) & 1);

			if (want != got)
				fail_msg("'%s' like '%s': got %d, fnmatch says %d", subjects[s],
					 patterns[i], got, want);
			checked++;
		}
		for (size_t i = 0; i < sizeof(eq_lits) / sizeof(eq_lits[0]); i++) {
			int want = strcmp(subjects[s], eq_lits[i]) == 0;

			if (want != (int)((io.eq >> i) & 1))
				fail_msg("'%s' = '%s': got %d", subjects[s], eq_lits[i], !want);
		}
		for (size_t i = 0; i < sizeof(eqw_lits) / sizeof(eqw_lits[0]); i++) {
			int want = strcmp(subjects[s], eqw_lits[i]) == 0;

			if (want != (int)((io.eqw >> i) & 1))
				fail_msg("'%s' = '%s' (a word at a time, %s after the NUL): got %d",
					 subjects[s], eqw_lits[i], k % 2 ? "'a's" : "zeros", !want);
			checked_eq += want;
		}
	}
	printf("# %d (subject, pattern) pairs agree with fnmatch\n", checked);
	/* every literal of WEFT_STREQ_W is one subject, each subject compared twice: a
	 * comparison that never says "equal" cannot pass */
	assert_int_equal(checked_eq, 2 * 8);
	rt_unload(&p);
}

static void test_str_user_counts_faults_and_truncation(void **state)
{
	const char *const no_attach[] = { "p_like", "p_str", "p_exec", NULL };
	static const char shortstr[] = "hello";
	static const char longstr[] = "0123456789abcdefghij";
	uint64_t drops[WEFT_DROP_NR] = { 0 };
	struct rt_prog p = { 0 };
	struct io io;
	char obj[PATH_MAX];
	__u32 zero = 0;
	int fd;

	(void)state;
	assert_int_equal(compile_helpers(&p, obj, sizeof(obj)), 0);
	assert_int_equal(rt_load(&p, obj, NULL, NULL, no_attach), 0);
	fd = bss_fd(&p);
	assert_true(fd >= 0);

	assert_int_equal(run_prog(&p, "p_str", (__u64)(uintptr_t)shortstr), 0);
	assert_int_equal(bpf_map_lookup_elem(fd, &zero, &io), 0);
	assert_string_equal(io.str, "hello");
	assert_int_equal(io.n, 6);

	assert_int_equal(run_prog(&p, "p_str", (__u64)(uintptr_t)longstr), 0);
	assert_int_equal(bpf_map_lookup_elem(fd, &zero, &io), 0);
	assert_string_equal(io.str, "0123456789abcde");
	assert_int_equal(io.n, 16);

	assert_int_equal(run_prog(&p, "p_str", 8), 0); /* an address nothing maps */
	assert_int_equal(bpf_map_lookup_elem(fd, &zero, &io), 0);
	assert_string_equal(io.str, "");
	assert_int_equal(io.n, 0);

	/* the counts of epoch 0 become readable after a flip */
	assert_int_equal(bpfrt_window_flip(p.rt), 0);
	assert_int_equal(bpfrt_drops_read(p.rt, drops), 0);
	assert_int_equal(drops[WEFT_DROP_STR_TRUNC], 1);
	assert_int_equal(drops[WEFT_DROP_STR_FAULT], 1);
	rt_unload(&p);
}

static void test_tp_data_loc_string(void **state)
{
	const char *const only_exec[] = { "p_like", "p_str", NULL };
	struct rt_prog p = { 0 };
	char obj[PATH_MAX], exe[128];
	struct io io;
	__u32 zero = 0;
	int fd;

	(void)state;
	assert_int_equal(compile_helpers(&p, obj, sizeof(obj)), 0);
	assert_int_equal(rt_load(&p, obj, NULL, NULL, only_exec), 0);
	fd = bss_fd(&p);
	assert_true(fd >= 0);
	snprintf(exe, sizeof(exe), "%s/weft_rt_exec", p.dir);
	{
		char *cp[] = { (char *)"/bin/cp", (char *)"/bin/true", exe, NULL };
		char *run[] = { exe, NULL };

		assert_int_equal(rt_run(cp), 0);
		for (int i = 0; i < 3; i++)
			assert_int_equal(rt_run(run), 0);
	}
	assert_int_equal(bpf_map_lookup_elem(fd, &zero, &io), 0);
	assert_int_equal(io.execs, 3);
	assert_string_equal(io.file, exe);
	assert_true(io.exec_pid > 0);
	rt_unload(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_like_and_streq_match_libc),
		cmocka_unit_test(test_str_user_counts_faults_and_truncation),
		cmocka_unit_test(test_tp_data_loc_string),
	};

	if (!wt_root("it loads and attaches BPF programs"))
		return WT_SKIP;
	return wt_status(cmocka_run_group_tests(tests, NULL, NULL));
}
