// SPDX-License-Identifier: Apache-2.0
/*
 * bench_rt — measures the BPF runtime's hot paths on the real kernel (root):
 *
 *  1. per-event cost of the ways to double-buffer an aggregation map by epoch, with the kernel's
 *     own accounting (BPF_ENABLE_STATS: run_time_ns / run_cnt of each program) while the
 *     wl_syscalls workload makes N getppid() calls:
 *       filter   the pid filter alone (the floor every probe pays)
 *       plain    one PERCPU_HASH, no epoch (what a lossy runtime would do)
 *       update   two PERCPU_HASH halves, one call site per half (WEFT_AGG_UPDATE, chosen)
 *       get      two halves, one call site with the half chosen at run time (WEFT_AGG_GET)
 *       outer    the epoch selects a half through an ARRAY_OF_MAPS
 *       inkey    one PERCPU_HASH keyed by {epoch, group}
 *       array    no group by: PERCPU_ARRAY[2] indexed by epoch (WEFT_AGG_ARRAY)
 *       netns    the filter plus a --scope netns check that passes (weft_netns(): three
 *                kernel reads, task->nsproxy->net_ns->ns.inum, compared with the bench's own)
 *       cgroup   the filter plus a --scope cgroup check that passes
 *                (bpf_current_task_under_cgroup() against the cgroup2 root)
 *  2. the window flip (epoch write + RCU grace period) and the drain of a 10,000-group half.
 *
 * Usage: bench_rt [N]   (run from the build tree, or set WEFT_BINARY_DIR / WEFT_SOURCE_DIR)
 * Results are printed; docs/runtime.md quotes a run.
 */
#include <fcntl.h>
#include <mntent.h>
#include <stdint.h>
#include <sys/stat.h>
#include "agent/scope.h"
#include "tools/bench/rt_harness.h"

/*
 * All variants in one object, all attached to the same tracepoint: each event runs every
 * program once, so they are compared under the same load and the same cache state, and the
 * kernel accounts each one's run time separately.
 */
static const char variants_src[] =
	"#include \"weft.bpf.h\"\n"
	"struct k0 { __u32 tid; __u32 _pad; };\n"
	"struct k1 { __u32 epoch; __u32 tid; };\n"
	"struct v0 { __u64 n; __s64 sum; };\n"
	"struct v0 zero;\n"
	"struct half_t { __uint(type, BPF_MAP_TYPE_PERCPU_HASH); __uint(max_entries, 1024);\n"
	"	__type(key, struct k0); __type(value, struct v0); };\n"
	"struct half_t plain_m SEC(\".maps\"), outer_0 SEC(\".maps\"), outer_1 SEC(\".maps\");\n"
	"struct { __uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS); __uint(max_entries, 2);\n"
	"	__type(key, __u32); __array(values, struct half_t); } outer SEC(\".maps\") =\n"
	"	{ .values = { &outer_0, &outer_1 } };\n"
	"struct { __uint(type, BPF_MAP_TYPE_PERCPU_HASH); __uint(max_entries, 2048);\n"
	"	__type(key, struct k1); __type(value, struct v0); } inkey_m SEC(\".maps\");\n"
	"WEFT_AGG_HASH(upd, struct k0, struct v0, 1024);\n"
	"WEFT_AGG_HASH(get, struct k0, struct v0, 1024);\n"
	"WEFT_AGG_ARRAY(array, struct v0);\n"
	"\n"
	"#define PROBE(NAME) SEC(\"tp/syscalls/sys_enter_getppid\") int NAME(void *ctx)\n"
	"#define UPDATE(v) if (!v) return 0; v->n++; v->sum += e; return 0\n"
	"\n"
	"PROBE(p_filter) { __u32 e = weft_epoch(); if (!weft_pid_ok()) return 0; return e & 2; }\n"
	"PROBE(p_plain) { __u32 e = weft_epoch(); if (!weft_pid_ok()) return 0;\n"
	"	struct k0 k = { .tid = weft_tid() };\n"
	"	struct v0 *v = weft_agg_half_get(&plain_m, e, &k, &zero); UPDATE(v); }\n"
	"PROBE(p_update) { __u32 e = weft_epoch(); if (!weft_pid_ok()) return 0;\n"
	"	struct k0 k = { .tid = weft_tid() };\n"
	"	WEFT_AGG_UPDATE(upd, e, &k, v, v->n++; v->sum += e;); return 0; }\n"
	"PROBE(p_get) { __u32 e = weft_epoch(); if (!weft_pid_ok()) return 0;\n"
	"	struct k0 k = { .tid = weft_tid() };\n"
	"	struct v0 *v = WEFT_AGG_GET(get, e, &k); UPDATE(v); }\n"
	"PROBE(p_outer) { __u32 e = weft_epoch(); if (!weft_pid_ok()) return 0;\n"
	"	struct k0 k = { .tid = weft_tid() };\n"
	"	void *h = bpf_map_lookup_elem(&outer, &e); if (!h) return 0;\n"
	"	struct v0 *v = weft_agg_half_get(h, e, &k, &zero); UPDATE(v); }\n"
	"PROBE(p_inkey) { __u32 e = weft_epoch(); if (!weft_pid_ok()) return 0;\n"
	"	struct k1 k = { .epoch = e, .tid = weft_tid() };\n"
	"	struct v0 *v = weft_agg_half_get(&inkey_m, e, &k, &zero); UPDATE(v); }\n"
	"PROBE(p_array) { __u32 e = weft_epoch(); if (!weft_pid_ok()) return 0;\n"
	"	struct v0 *v = WEFT_AGG_GET1(array, struct v0, e); UPDATE(v); }\n"
	"PROBE(p_netns) { __u32 e = weft_epoch();\n"
	"	if (!weft_pid_ok() || weft_netns() != weft_scope_netns)\n"
	"		return 0;\n"
	"	return e & 2; }\n"
	"PROBE(p_cgroup) { __u32 e = weft_epoch();\n"
	"	if (!weft_pid_ok() || bpf_current_task_under_cgroup(&weft_scope_cgroup, 0) != 1)\n"
	"		return 0;\n"
	"	return e & 2; }\n";

static const char *const variants[] = { "p_filter", "p_plain", "p_update", "p_get",   "p_outer",
					"p_inkey",  "p_array", "p_netns",  "p_cgroup" };
#define NV (sizeof(variants) / sizeof(variants[0]))

static int setup_target(struct bpf_object *obj, void *arg)
{
	struct stat st;
	__u32 ino;
	int err = rt_set_target(obj, *(pid_t *)arg);

	/* the workload runs in this network namespace: p_netns's check passes */
	if (!err && stat("/proc/self/ns/net", &st) == 0) {
		static const char *const name[3] = { "weft_netns_off_nsproxy", "weft_netns_off_net",
						     "weft_netns_off_inum" };
		uint32_t off[3];
		char why[256];

		ino = (__u32)st.st_ino;
		err = bpfrt_rodata_set(obj, "weft_scope_netns", &ino, sizeof(ino));
		if (!err && (err = agent_netns_offsets(off, why, sizeof(why))))
			fprintf(stderr, "bench_rt: %s\n", why);
		for (int i = 0; i < 3 && !err; i++)
			err = bpfrt_rodata_set(obj, name[i], &off[i], sizeof(off[i]));
	}
	return err;
}

/* The cgroup2 root into p_cgroup's slot: every process is under it, so its check passes. */
static int fill_cgroup(struct bpf_object *obj)
{
	FILE *f = setmntent("/proc/self/mounts", "re");
	struct bpf_map *m = bpf_object__find_map_by_name(obj, WEFT_SCOPE_CGROUP_MAP);
	struct mntent *e;
	__u32 zero = 0;
	int fd = -1, err = -ENOENT;

	while (f && (e = getmntent(f)) && fd < 0)
		if (strcmp(e->mnt_type, "cgroup2") == 0)
			fd = open(e->mnt_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (f)
		endmntent(f);
	if (fd >= 0 && m)
		err = bpf_map_update_elem(bpf_map__fd(m), &zero, &fd, BPF_ANY) ? -errno : 0;
	if (fd >= 0)
		close(fd);
	return err;
}

/*
 * One workload run with variants[v] alone attached (v == NV: nothing attached).  prog_ns gets
 * the program's mean run time (kernel accounting), call_ns the workload's wall time per call.
 */
static int run_variant(unsigned long n, size_t v, double *prog_ns, double *call_ns)
{
	const char *skip[NV + 1] = { NULL };
	struct rt_prog p = { 0 };
	char obj[PATH_MAX];
	struct rt_wl wl = { 0 };
	uint64_t t0 = 0;
	size_t nskip = 0;
	int err;

	for (size_t i = 0; i < NV; i++)
		if (i != v)
			skip[nskip++] = variants[i];
	err = rt_compile(&p, "variants", variants_src, obj, sizeof(obj));
	if (!err)
		err = rt_wl_start(&wl, n, 1);
	if (!err)
		err = rt_load(&p, obj, setup_target, &wl.pid, skip);
	if (!err && v < NV && strcmp(variants[v], "p_cgroup") == 0)
		err = fill_cgroup(p.obj);
	if (!err) {
		t0 = rt_now_ns();
		err = rt_wl_go(&wl);
	}
	if (!err)
		err = rt_wl_poll(&wl, 1) == 0 ? 0 : -ECHILD;
	*call_ns = (double)(rt_now_ns() - t0) / (double)n;
	*prog_ns = 0;
	if (!err && v < NV) {
		struct bpf_program *prog = bpf_object__find_program_by_name(p.obj, variants[v]);
		struct bpf_prog_info info;
		uint32_t len = sizeof(info);

		memset(&info, 0, sizeof(info));
		err = bpf_obj_get_info_by_fd(bpf_program__fd(prog), &info, &len);
		if (!err && info.run_cnt < n) /* other processes may call getppid too */
			err = -EPROTO;
		if (!err)
			*prog_ns = (double)info.run_time_ns / (double)info.run_cnt;
	}
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
				  "	WEFT_AGG_UPDATE(agg, e, &k, v, v->n++;);\n"
				  "	return 0;\n"
				  "}\n";
	enum { FLIPS = 200, GROUPS = 10000 };
	static uint64_t lat[FLIPS];
	char obj[PATH_MAX];
	struct rt_prog p = { 0 };
	struct rt_wl wl = { 0 };
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

#define ROUNDS 5

int main(int argc, char **argv)
{
	static double prog_ns[NV + 1][ROUNDS], call_ns[NV + 1][ROUNDS];
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
	printf("%lu getppid() calls on 1 thread, one variant attached at a time, best and median "
	       "of %d interleaved rounds:\n",
	       n, ROUNDS);
	printf("  %-8s %22s %26s\n", "variant", "BPF run time ns/event", "wall time ns/call");
	for (int r = 0; r < ROUNDS; r++) {
		for (size_t v = 0; v <= NV; v++) {
			if (run_variant(n, v, &prog_ns[v][r], &call_ns[v][r])) {
				fprintf(stderr, "bench_rt: variant run failed\n");
				return 1;
			}
		}
	}
	for (size_t v = 0; v <= NV; v++) {
		qsort(prog_ns[v], ROUNDS, sizeof(prog_ns[v][0]), cmp_double);
		qsort(call_ns[v], ROUNDS, sizeof(call_ns[v][0]), cmp_double);
		printf("  %-8s %8.1f (median %6.1f) %10.1f (median %6.1f)\n",
		       v < NV ? variants[v] + 2 : "none", prog_ns[v][0], prog_ns[v][ROUNDS / 2],
		       call_ns[v][0], call_ns[v][ROUNDS / 2]);
	}
	close(stats_fd);
	return bench_flip(n) ? 1 : 0;
}
