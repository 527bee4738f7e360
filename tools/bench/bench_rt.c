// SPDX-License-Identifier: Apache-2.0
/*
 * bench_rt — measures the BPF runtime's hot paths on the real kernel (root):
 *
 *  1. per-event cost of the ways to double-buffer an aggregation map by epoch, with the kernel's
 *     own accounting (BPF_ENABLE_STATS: run_time_ns / run_cnt of each program) while the
 *     wl_syscalls workload makes N getppid() calls:
 *       filter   the pid filter alone (the floor every probe pays)
 *       plain    one PERCPU_HASH, no epoch (what a lossy runtime would do)
 *       outer    the epoch selects a half through an ARRAY_OF_MAPS (WEFT_AGG_HASH, chosen)
 *       branch   the epoch selects one of two PERCPU_HASH maps with a branch
 *       inkey    one PERCPU_HASH keyed by {epoch, group}
 *       array    no group by: PERCPU_ARRAY[2] indexed by epoch (WEFT_AGG_ARRAY)
 *  2. the window flip (epoch write + RCU grace period) and the drain of a 10,000-group half.
 *
 * Usage: bench_rt [N]   (run from the build tree, or set WEFT_BINARY_DIR / WEFT_SOURCE_DIR)
 * Results are printed; docs/runtime.md quotes a run.
 */
#include <stdint.h>
#include <sys/syscall.h>
#include "tests/runtime/test_rt_util.h"

static const char common[] = "#include \"weft.bpf.h\"\n"
			     "struct k0 { __u32 tid; __u32 _pad; };\n"
			     "struct v0 { __u64 n; __s64 sum; };\n";

struct variant {
	const char *name;
	const char *src;
};

#define PROLOGUE                                   \
	"SEC(\"tp/syscalls/sys_enter_getppid\")\n" \
	"int p(void *ctx)\n"                       \
	"{\n"                                      \
	"	__u32 e = weft_epoch();\n"               \
	"	if (!weft_pid_ok())\n"                   \
	"		return 0;\n"
#define UPDATE            \
	"	if (!v)\n"      \
	"		return 0;\n"   \
	"	v->n++;\n"      \
	"	v->sum += e;\n" \
	"	return 0;\n"    \
	"}\n"
#define GET_OR_INIT(MAP, KEY)                                                         \
	"	struct v0 *v = bpf_map_lookup_elem(" MAP ", " KEY ");\n"              \
	"	if (!v) {\n"                                                                \
	"		bpf_map_update_elem(" MAP ", " KEY ", &zero, BPF_NOEXIST);\n" \
	"		v = bpf_map_lookup_elem(" MAP ", " KEY ");\n"                 \
	"	}\n"
#define HALF_T                                                                                 \
	"struct half_t { __uint(type, BPF_MAP_TYPE_PERCPU_HASH); __uint(max_entries, 1024);\n" \
	"	__type(key, struct k0); __type(value, struct v0); };\n"                              \
	"struct v0 zero;\n"

static const struct variant variants[] = {
	{ "filter", PROLOGUE "	(void)e;\n	return 0;\n}\n" },
	{ "plain",
	  HALF_T "struct half_t m SEC(\".maps\");\n" PROLOGUE
		 "	struct k0 k = { .tid = weft_tid() };\n" GET_OR_INIT("&m", "&k") UPDATE },
	{ "outer", "WEFT_AGG_HASH(agg, struct k0, struct v0, 1024);\n" PROLOGUE
		   "	struct k0 k = { .tid = weft_tid() };\n"
		   "	struct v0 *v = WEFT_AGG_GET(agg, e, &k);\n" UPDATE },
	{ "branch", HALF_T
	  "struct half_t m_0 SEC(\".maps\"), m_1 SEC(\".maps\");\n" PROLOGUE
	  "	struct k0 k = { .tid = weft_tid() };\n"
	  "	void *m = e ? (void *)&m_1 : (void *)&m_0;\n" GET_OR_INIT("m", "&k") UPDATE },
	{ "inkey", "struct k1 { __u32 epoch; __u32 tid; };\n"
		   "struct { __uint(type, BPF_MAP_TYPE_PERCPU_HASH); __uint(max_entries, 2048);\n"
		   "	__type(key, struct k1); __type(value, struct v0); } m SEC(\".maps\");\n"
		   "struct v0 zero;\n" PROLOGUE
		   "	struct k1 k = { .epoch = e, .tid = weft_tid() };\n" GET_OR_INIT("&m", "&k")
			   UPDATE },
	{ "array", "WEFT_AGG_ARRAY(agg, struct v0);\n" PROLOGUE
		   "	struct v0 *v = WEFT_AGG_GET1(agg, struct v0, e);\n" UPDATE },
};

static int setup_target(struct bpf_object *obj, void *arg)
{
	return rt_set_target(obj, *(pid_t *)arg);
}

static int run_variant(const struct variant *v, unsigned long n, double *ns_per_event)
{
	char src[8192], obj[PATH_MAX];
	struct rt_prog p = { 0 };
	struct bpf_prog_info info;
	uint32_t len = sizeof(info);
	struct rt_wl wl;
	int err;

	snprintf(src, sizeof(src), "%s%s", common, v->src);
	err = rt_compile(&p, v->name, src, obj, sizeof(obj));
	if (!err)
		err = rt_wl_start(&wl, n, 1);
	if (!err)
		err = rt_load(&p, obj, setup_target, &wl.pid, NULL);
	if (!err)
		err = rt_wl_go(&wl);
	if (!err)
		err = rt_wl_poll(&wl, 1) == 0 ? 0 : -ECHILD;
	memset(&info, 0, sizeof(info));
	if (!err)
		err = bpf_obj_get_info_by_fd(
			bpf_program__fd(bpf_object__find_program_by_name(p.obj, "p")), &info, &len);
	if (!err && info.run_cnt < n) { /* other processes may call getppid too */
		fprintf(stderr, "%s: %llu runs for %lu calls\n", v->name,
			(unsigned long long)info.run_cnt, n);
		err = -EPROTO;
	}
	if (!err)
		*ns_per_event = (double)info.run_time_ns / (double)info.run_cnt;
	rt_unload(&p);
	return err;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static int count_entry(void *ctx, const void *key, const void *const *vals, unsigned int ncpu)
{
	(*(unsigned long *)ctx)++;
	return 0;
}

/* Flip latency, idle and under load, and the drain of a half holding `groups` groups. */
static int bench_flip(unsigned long n)
{
	static const char src[] = "#include \"weft.bpf.h\"\n"
				  "struct k0 { __u32 tid; __u32 _pad; };\n"
				  "struct v0 { __u64 n; };\n"
				  "WEFT_AGG_HASH(agg, struct k0, struct v0, 16384);\n"
				  "SEC(\"tp/syscalls/sys_enter_getppid\")\n"
				  "int p(void *ctx)\n"
				  "{\n"
				  "	__u32 e = weft_epoch();\n"
				  "	if (!weft_pid_ok())\n"
				  "		return 0;\n"
				  "	struct k0 k = { .tid = weft_tid() };\n"
				  "	struct v0 *v = WEFT_AGG_GET(agg, e, &k);\n"
				  "	if (v)\n"
				  "		v->n++;\n"
				  "	return 0;\n"
				  "}\n";
	enum { FLIPS = 200, GROUPS = 10000 };
	static uint64_t lat[FLIPS];
	char obj[PATH_MAX];
	struct rt_prog p = { 0 };
	struct rt_wl wl;
	unsigned long seen = 0;
	uint64_t t0;
	int err, fd;

	err = rt_compile(&p, "flip", src, obj, sizeof(obj));
	if (!err)
		err = rt_wl_start(&wl, n, 2);
	if (!err)
		err = rt_load(&p, obj, setup_target, &wl.pid, NULL);
	if (err)
		return err;
	for (int phase = 0; phase < 2; phase++) {
		if (phase == 1 && rt_wl_go(&wl))
			return -EIO;
		for (int i = 0; i < FLIPS; i++) {
			t0 = rt_now_ns();
			if (bpfrt_window_flip(p.rt))
				return -EIO;
			lat[i] = rt_now_ns() - t0;
			bpfrt_agg_drain(p.rt, "agg", count_entry, &seen);
		}
		qsort(lat, FLIPS, sizeof(lat[0]), cmp_u64);
		printf("flip %-10s p50 %6.0f us  p99 %6.0f us  max %6.0f us\n",
		       phase ? "(loaded)" : "(idle)", lat[FLIPS / 2] / 1e3,
		       lat[FLIPS * 99 / 100] / 1e3, lat[FLIPS - 1] / 1e3);
	}
	rt_wl_poll(&wl, 1);
	/* fill the idle half of epoch 0 from user space, then time its drain */
	bpfrt_window_flip(p.rt);
	bpfrt_agg_drain(p.rt, "agg", count_entry, &seen);
	fd = bpf_map__fd(
		bpf_object__find_map_by_name(p.obj, bpfrt_epoch(p.rt) ? "agg_0" : "agg_1"));
	{
		unsigned int ncpu = bpfrt_ncpu(p.rt);
		uint64_t *vals = calloc(ncpu, sizeof(uint64_t));

		for (uint32_t k = 0; k < GROUPS && vals; k++) {
			uint32_t key[2] = { k, 0 };

			bpf_map_update_elem(fd, key, vals, BPF_ANY);
		}
		free(vals);
	}
	seen = 0;
	t0 = rt_now_ns();
	err = bpfrt_agg_drain(p.rt, "agg", count_entry, &seen);
	printf("drain of %d groups: %.2f ms (%lu entries)\n", GROUPS, (rt_now_ns() - t0) / 1e6,
	       seen);
	rt_unload(&p);
	return err < 0 ? err : 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

#define NV (sizeof(variants) / sizeof(variants[0]))
#define ROUNDS 5

int main(int argc, char **argv)
{
	static double ns[NV][ROUNDS];
	unsigned long n = argc > 1 ? strtoul(argv[1], NULL, 10) : 2000000;
	int stats_fd;

	if (!rt_is_root()) {
		fprintf(stderr, "bench_rt: needs root\n");
		return 1;
	}
	stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
	if (stats_fd < 0) {
		fprintf(stderr, "bench_rt: BPF_ENABLE_STATS: %s\n", strerror(-stats_fd));
		return 1;
	}
	printf("per-event BPF run time, %lu getppid() calls on 1 thread, best and median of %d "
	       "interleaved rounds:\n",
	       n, ROUNDS);
	for (int r = 0; r < ROUNDS; r++)
		for (size_t i = 0; i < NV; i++)
			if (run_variant(&variants[i], n, &ns[i][r]))
				ns[i][r] = -1;
	for (size_t i = 0; i < NV; i++) {
		qsort(ns[i], ROUNDS, sizeof(ns[i][0]), cmp_double);
		if (ns[i][0] < 0)
			printf("  %-8s error\n", variants[i].name);
		else
			printf("  %-8s %6.1f ns/event  (median %6.1f)\n", variants[i].name,
			       ns[i][0], ns[i][ROUNDS / 2]);
	}
	close(stats_fd);
	return bench_flip(n) ? 1 : 0;
}
