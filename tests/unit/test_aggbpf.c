// SPDX-License-Identifier: Apache-2.0
/*
 * Proof that the kernel side and the user side of every aggregate agree bit for bit, on the
 * real kernel: a BPF program that calls every update function of kernel/weft_agg.bpf.h is
 * written out, compiled with clang -target bpf -O2 -g, loaded (so the verifier accepts it) and
 * attached to the tracepoint syscalls:sys_enter_getppid.  The test then makes a known number of
 * getppid() calls from one thread pinned to one CPU, each adding a known value (passed through
 * a .bss global that the test writes before the call); the BPF program ignores every other
 * process.  The per-CPU map values are folded with agg_state_from_kernel() and must equal,
 * byte for byte, the states agg_state_add() builds from the same values.
 *
 * Needs root (bpf(), tracefs); skipped otherwise.
 */
#include <errno.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <cmocka.h>

#include "kernel/aggstate.h"
#include "kernel/weft_agg.bpf.h"
#include "tests/skip.h"

#define LH1_LO (-100)
#define LH1_HI 1000
#define LH1_STEP 7
#define LH2_LO 0
#define LH2_HI (1LL << 40)
#define LH2_STEP (1LL << 31)

/* One map value holding an aggregate of every kind; the same text is compiled on both sides. */
#define ALL_FIELDS                                                   \
	struct weft_aggval_count count;                              \
	struct weft_aggval_sum sum;                                  \
	struct weft_aggval_minmax min;                               \
	struct weft_aggval_minmax max;                               \
	struct weft_aggval_avg avg;                                  \
	struct weft_aggval_stddev stddev;                            \
	struct weft_aggval_hist hist;                                \
	__u64 lhist1[WEFT_LHIST_NBUCKETS(LH1_LO, LH1_HI, LH1_STEP)]; \
	__u64 lhist2[WEFT_LHIST_NBUCKETS(LH2_LO, LH2_HI, LH2_STEP)]; \
	struct weft_aggval_quantile quantile;                        \
	struct weft_aggval_distinct distinct;                        \
	struct weft_aggval_distinct distinct_str;

#define INPUT_FIELDS   \
	__s64 counter; \
	__u32 tgid;    \
	__u32 pad;     \
	char str[48];

#define STR_(...) #__VA_ARGS__
#define XSTR(...) STR_(__VA_ARGS__)

struct all {
	ALL_FIELDS
};
struct input {
	INPUT_FIELDS
};

static const char prog_src[] =
	"#include <linux/bpf.h>\n"
	"#include <bpf/bpf_helpers.h>\n"
	"#include \"kernel/weft_agg.bpf.h\"\n"
	"struct all { " XSTR(
		ALL_FIELDS) " };\n"
			    "struct input { " XSTR(
				    INPUT_FIELDS) " };\n"
						  "struct {\n"
						  "	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);\n"
						  "	__uint(max_entries, 1);\n"
						  "	__type(key, __u32);\n"
						  "	__type(value, struct all);\n"
						  "} vals SEC(\".maps\");\n"
						  "struct input in; /* .bss: the test writes it before each call */\n"
						  "SEC(\"tracepoint/syscalls/sys_enter_getppid\")\n"
						  "int on_getppid(void *ctx)\n"
						  "{\n"
						  "	__u32 zero = 0;\n"
						  "	struct all *v;\n"
						  "	__s64 x;\n"
						  "\n"
						  "	if ((bpf_get_current_pid_tgid() >> 32) != in.tgid)\n"
						  "		return 0;\n"
						  "	v = bpf_map_lookup_elem(&vals, &zero);\n"
						  "	if (!v)\n"
						  "		return 0;\n"
						  "	x = in.counter;\n"
						  "	weft_aggval_count_add(&v->count, x);\n"
						  "	weft_aggval_sum_add(&v->sum, x);\n"
						  "	weft_aggval_min_add(&v->min, x);\n"
						  "	weft_aggval_max_add(&v->max, x);\n"
						  "	weft_aggval_avg_add(&v->avg, x);\n"
						  "	weft_aggval_stddev_add(&v->stddev, x);\n"
						  "	weft_aggval_hist_add(&v->hist, x);\n"
						  "	weft_aggval_lhist_add(v->lhist1, x, " XSTR(
							  LH1_LO, LH1_HI,
							  LH1_STEP) ");\n"
								    "	weft_aggval_lhist_add(v->lhist2, x, " XSTR(
									    LH2_LO, LH2_HI,
									    LH2_STEP) ");\n"
										      "	weft_aggval_quantile_add(&v->quantile, x);\n"
										      "	weft_aggval_distinct_add(&v->distinct, x);\n"
										      "	weft_aggval_distinct_add_hash(&v->distinct_str, weft_hash_str(in.str, sizeof(in.str)));\n"
										      "	return 0;\n"
										      "}\n"
										      "char LICENSE[] SEC(\"license\") = \"GPL\";\n";

static const struct {
	struct agg_spec spec;
	size_t off;
	bool hashed_str;
} aggs[] = {
	{ { .kind = AGG_COUNT }, offsetof(struct all, count), false },
	{ { .kind = AGG_SUM }, offsetof(struct all, sum), false },
	{ { .kind = AGG_MIN }, offsetof(struct all, min), false },
	{ { .kind = AGG_MAX }, offsetof(struct all, max), false },
	{ { .kind = AGG_AVG }, offsetof(struct all, avg), false },
	{ { .kind = AGG_STDDEV }, offsetof(struct all, stddev), false },
	{ { .kind = AGG_HIST }, offsetof(struct all, hist), false },
	{ { .kind = AGG_LHIST, .lo = LH1_LO, .hi = LH1_HI, .step = LH1_STEP },
	  offsetof(struct all, lhist1),
	  false },
	{ { .kind = AGG_LHIST, .lo = LH2_LO, .hi = LH2_HI, .step = LH2_STEP },
	  offsetof(struct all, lhist2),
	  false },
	{ { .kind = AGG_QUANTILE, .q = 0.99 }, offsetof(struct all, quantile), false },
	{ { .kind = AGG_DISTINCT }, offsetof(struct all, distinct), false },
	{ { .kind = AGG_DISTINCT }, offsetof(struct all, distinct_str), true },
};
#define NAGGS (sizeof(aggs) / sizeof(aggs[0]))

/* The values the calls add: the edges first, then every magnitude and sign. */
static int64_t test_value(unsigned i, uint64_t *s)
{
	static const int64_t edge[] = { 0,
					1,
					-1,
					2,
					3,
					31,
					32,
					33,
					INT64_MAX,
					INT64_MIN,
					INT64_MAX,
					INT64_MIN,
					1LL << 62,
					-100,
					-101,
					999,
					1000,
					1LL << 40,
					(1LL << 40) - 1 };
	uint64_t z;

	if (i < sizeof(edge) / sizeof(edge[0]))
		return edge[i];
	z = (*s += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	z ^= z >> 31;
	switch (z & 3) {
	case 0:
		return (int64_t)(z >> 54) - 200; /* lhist1's range and around it */
	case 1:
		return (int64_t)(z >> (1 + (z >> 58) % 63)); /* every magnitude */
	case 2:
		return -(int64_t)(z >> (8 + (z >> 59)));
	default:
		return (int64_t)((z >> 16) & 0xffffff); /* latencies */
	}
}

static int run(const char *path, char *const argv[])
{
	pid_t pid = fork();
	int status;

	if (pid < 0)
		return -errno;
	if (pid == 0) {
		execv(path, argv);
		_exit(127);
	}
	if (waitpid(pid, &status, 0) < 0)
		return -errno;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -ECHILD;
}

static void tracefs_ensure(void)
{
	struct stat st;

	if (stat("/sys/kernel/tracing/events", &st) == 0)
		return;
	if (mount("nodev", "/sys/kernel/tracing", "tracefs", 0, NULL) != 0)
		fprintf(stderr, "mount tracefs: %s\n", strerror(errno));
}

static void test_kernel_and_user_agree(void **unused)
{
	char dir[] = "/tmp/weft-aggbpf-XXXXXX", src[96], obj[96], inc[96], arch_inc[96];
	struct bpf_object *bo = NULL;
	struct bpf_program *prog;
	struct bpf_link *link = NULL;
	struct bpf_map *vals, *bss = NULL, *m;
	struct utsname uts;
	struct input in = { 0 };
	void *user[NAGGS], *fromk[NAGGS];
	size_t stride = (sizeof(struct all) + 7) & ~(size_t)7;
	int ncpu = libbpf_num_possible_cpus(), key = 0;
	uint8_t *percpu;
	uint64_t seed = 2024;
	cpu_set_t set;
	FILE *f;
	enum { N = 3000 };

	tracefs_ensure();
	assert_true(ncpu > 0);
	assert_non_null(mkdtemp(dir));
	snprintf(src, sizeof(src), "%s/agg.bpf.c", dir);
	snprintf(obj, sizeof(obj), "%s/agg.bpf.o", dir);
	f = fopen(src, "w");
	assert_non_null(f);
	fputs(prog_src, f);
	fclose(f);

	/* clang -target bpf: the same header the code generator's programs include */
	assert_int_equal(uname(&uts), 0);
	snprintf(inc, sizeof(inc), "-I%s", WEFT_SOURCE_DIR);
	snprintf(arch_inc, sizeof(arch_inc), "-I/usr/include/%s-linux-gnu", uts.machine);
	char *argv[] = { WEFT_CLANG_PATH, "-target", "bpf", "-O2", "-g", "-Wall", "-Werror", inc,
			 arch_inc,	  "-c",	     src,   "-o",  obj,	 NULL };
	assert_int_equal(run(WEFT_CLANG_PATH, argv), 0);

	/* load (the verifier runs here) and attach */
	bo = bpf_object__open_file(obj, NULL);
	assert_non_null(bo);
	assert_int_equal(bpf_object__load(bo), 0);
	vals = bpf_object__find_map_by_name(bo, "vals");
	assert_non_null(vals);
	bpf_object__for_each_map(m, bo)
	{
		if (strstr(bpf_map__name(m), ".bss"))
			bss = m;
	}
	assert_non_null(bss);
	assert_int_equal(bpf_map__value_size(bss), sizeof(struct input));
	assert_int_equal(bpf_map__value_size(vals), sizeof(struct all));
	prog = bpf_object__find_program_by_name(bo, "on_getppid");
	assert_non_null(prog);

	/* one thread on one CPU, so the per-CPU values see a known order (and one CPU) */
	CPU_ZERO(&set);
	CPU_SET(0, &set);
	assert_int_equal(sched_setaffinity(0, sizeof(set), &set), 0);
	in.tgid = (__u32)getpid();
	assert_int_equal(bpf_map_update_elem(bpf_map__fd(bss), &key, &in, BPF_ANY), 0);
	link = bpf_program__attach(prog);
	assert_non_null(link);

	for (size_t a = 0; a < NAGGS; a++) {
		user[a] = calloc(1, agg_state_size(&aggs[a].spec));
		fromk[a] = calloc(1, agg_state_size(&aggs[a].spec));
		assert_true(user[a] && fromk[a]);
	}
	for (unsigned i = 0; i < N; i++) {
		int64_t x = test_value(i, &seed);

		in.counter = x;
		memset(in.str, 0, sizeof(in.str));
		snprintf(in.str, sizeof(in.str), "comm-%u", (i * 7919u) % 401u);
		assert_int_equal(bpf_map_update_elem(bpf_map__fd(bss), &key, &in, BPF_ANY), 0);
		syscall(SYS_getppid);
		for (size_t a = 0; a < NAGGS; a++) {
			if (aggs[a].hashed_str)
				agg_state_add_hash(&aggs[a].spec, user[a],
						   weft_hash_str(in.str, sizeof(in.str)));
			else
				agg_state_add(&aggs[a].spec, user[a], x);
		}
	}
	bpf_link__destroy(link);
	link = NULL;

	/* fold every CPU's value, as the agent does */
	percpu = calloc((size_t)ncpu, stride);
	assert_non_null(percpu);
	assert_int_equal(bpf_map_lookup_elem(bpf_map__fd(vals), &key, percpu), 0);
	for (int c = 0; c < ncpu; c++)
		for (size_t a = 0; a < NAGGS; a++)
			assert_int_equal(
				agg_state_from_kernel(&aggs[a].spec, fromk[a],
						      percpu + (size_t)c * stride + aggs[a].off),
				0);
	/* the probe fired exactly N times for this process */
	assert_int_equal(((struct weft_aggval_count *)fromk[0])->n, N);
	for (size_t a = 0; a < NAGGS; a++) {
		struct agg_result r;

		if (memcmp(user[a], fromk[a], agg_state_size(&aggs[a].spec)))
			fail_msg("%s (#%zu): kernel and user states differ",
				 agg_kind_name(aggs[a].spec.kind), a);
		assert_int_equal(agg_state_final(&aggs[a].spec, fromk[a], &r), 0);
		agg_result_release(&r);
		free(user[a]);
		free(fromk[a]);
	}
	free(percpu);
	bpf_object__close(bo);
	unlink(src);
	unlink(obj);
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_kernel_and_user_agree),
	};

	if (!wt_root("it loads BPF programs"))
		return WT_SKIP;
	return wt_status(cmocka_run_group_tests(tests, NULL, NULL));
}
