// SPDX-License-Identifier: Apache-2.0
/*
 * bench_uprobe_attach — how long attaching and detaching many uprobe sites takes, with one
 * perf-event link per site (what libbpf 1.1 and kernels before 6.6 give) and with multi-uprobe
 * links (probes/uprobe_multi.c: one link per program and binary).  A trivial program (return
 * 0) is loaded once per mode and attached through weft's own probes layer to every function of
 * BINARY matching PATTERN, with one cookie per site as a query would; then every link is
 * destroyed.  Both steps are timed with CLOCK_MONOTONIC.  Nothing calls the functions: this
 * measures attachment alone, not events.
 *
 * Usage: bench_uprobe_attach BINARY GLOB[,GLOB...] [single|multi|both] [ROUNDS]   (root)
 * tools/bench/uprobe-attach.sh makes a binary of 1,000 functions and runs it; the numbers are
 * quoted in docs/performance.md.
 */
#include <stdint.h>
#include <stdlib.h>
#include "probes/probes.h"
#include "tools/bench/rt_harness.h"

static const char prog_src[] = "#include <linux/bpf.h>\n"
			       "#include <bpf/bpf_helpers.h>\n"
			       "SEC(\"uprobe\") int up(void *ctx) { return 0; }\n"
			       "char LICENSE[] SEC(\"license\") = \"GPL\";\n";

static double ms_since(uint64_t t0)
{
	return (double)(rt_now_ns() - t0) / 1e6;
}

/* One round of one mode: load, attach every target, destroy; times in ms. */
static int round_run(const char *obj_path, const struct probe_set *set, bool multi,
		     double *attach_ms, double *detach_ms)
{
	struct bpf_object *obj = bpf_object__open_file(obj_path, NULL);
	struct probe_links links = { 0 };
	struct probe_err err = { 0 };
	const struct probe_target **t = calloc((size_t)set->n, sizeof(*t));
	uint64_t *cookies = calloc((size_t)set->n, sizeof(*cookies)), t0;
	struct bpf_program *prog;
	int rc = 0;

	if (!obj || !t || !cookies)
		return -ENOMEM;
	prog = bpf_object__find_program_by_name(obj, "up");
	if (multi && probe_uprobe_multi_prepare(prog)) {
		fprintf(stderr, "bench: this kernel has no multi-uprobe links\n");
		rc = -EOPNOTSUPP;
		goto out;
	}
	if (bpf_object__load(obj)) {
		rc = -errno;
		goto out;
	}
	for (int i = 0; i < set->n; i++) {
		t[i] = &set->v[i];
		cookies[i] = (uint64_t)i;
	}
	t0 = rt_now_ns();
	if (multi)
		rc = probe_uprobe_multi_attach(prog, t, cookies, set->n, 0, &links, &err);
	else
		for (int i = 0; i < set->n && !rc; i++)
			rc = probe_attach_target(prog, t[i], cookies[i], 0, &links, &err);
	*attach_ms = ms_since(t0);
	if (rc)
		fprintf(stderr, "bench: %s\n", err.msg);
	t0 = rt_now_ns();
	probe_links_destroy(&links);
	*detach_ms = ms_since(t0);
out:
	bpf_object__close(obj);
	free(t);
	free(cookies);
	return rc;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	const char *parts[2], *mode = argc > 3 ? argv[3] : "both";
	struct probe_ctx ctx = { 0 };
	struct probe_set set = { 0 };
	struct probe_err err = { 0 };
	struct rt_prog rp = { 0 };
	int rounds = argc > 4 ? atoi(argv[4]) : 3;
	char obj_path[PATH_MAX];

	if (argc < 3 || rounds < 1 || rounds > 100) {
		fprintf(stderr, "usage: %s BINARY PATTERN [single|multi|both] [ROUNDS]\n", argv[0]);
		return 2;
	}
	if (!rt_is_root()) {
		fprintf(stderr, "bench: needs root\n");
		return 1;
	}
	/* PATTERN is comma-separated: one resolve may give at most PROBE_MAX_TARGETS sites */
	parts[0] = argv[1];
	for (char *save = NULL, *pat = strtok_r(argv[2], ",", &save); pat;
	     pat = strtok_r(NULL, ",", &save)) {
		parts[1] = pat;
		if (probe_provider_get(PROBE_UPROBE)
			    ->resolve(parts, 2, 0, false, &ctx, &set, &err)) {
			fprintf(stderr, "bench: %s\n", err.msg);
			return 1;
		}
	}
	if (rt_compile(&rp, "up", prog_src, obj_path, sizeof(obj_path))) {
		fprintf(stderr, "bench: cannot compile the program with clang\n");
		return 1;
	}
	bpfrt_libbpf_setup();
	printf("%d sites of %s, %d rounds, median [min .. max] ms\n", set.n, argv[1], rounds);
	for (int m = 0; m < 2; m++) {
		bool multi = m == 1;
		double at[100], de[100], tot[100];

		if (strcmp(mode, "both") != 0 && strcmp(mode, multi ? "multi" : "single") != 0)
			continue;
		for (int r = 0; r < rounds; r++) {
			if (round_run(obj_path, &set, multi, &at[r], &de[r]))
				return 1;
			tot[r] = at[r] + de[r];
		}
		qsort(at, (size_t)rounds, sizeof(double), cmp_double);
		qsort(de, (size_t)rounds, sizeof(double), cmp_double);
		qsort(tot, (size_t)rounds, sizeof(double), cmp_double);
		printf("%-7s attach %9.1f [%.1f .. %.1f]  detach %9.1f [%.1f .. %.1f]  "
		       "together %9.1f\n",
		       multi ? "multi" : "single", at[rounds / 2], at[0], at[rounds - 1],
		       de[rounds / 2], de[0], de[rounds - 1], tot[rounds / 2]);
	}
	probe_set_free(&set);
	rt_unload(&rp);
	return 0;
}
