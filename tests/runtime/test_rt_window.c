// SPDX-License-Identifier: Apache-2.0
/*
 * The window protocol against the real kernel: every event lands in exactly one window.
 *
 * A program written the way the code generator writes them (it includes weft.bpf.h and
 * nothing else) counts the getppid() calls of the wl_syscalls workload three ways at once:
 *  - p_tid:   group by tid, count() and sum(args.__syscall_nr)   (WEFT_AGG_HASH)
 *  - p_total: no group by, count() and sum(args.__syscall_nr)    (WEFT_AGG_ARRAY)
 *  - p_seq:   raw_syscalls:sys_enter, group by tid, count(), min(args[0]), max(args[0]), where
 *             args[0] is the workload's per-thread call sequence number.
 * While 2,000,000 calls run flat out on 2 threads, the test flips windows every ~1 ms and
 * drains the idle halves.  It then asserts that the totals are exactly N and N * __NR_getppid
 * and, much stronger, that for every thread the windows' [min, max] sequence ranges tile
 * 0..n-1 with no gap and no overlap and that each window's count equals its range's length:
 * an event lost, counted twice, or read from a half still being written breaks the tiling.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <cmocka.h>
#include "kernel/weft_aggval.h"
#include "tools/bench/rt_harness.h"
#include "tests/skip.h"

#define N_CALLS 2000000ul
#define N_THREADS 2ul

static const char prog_src[] =
	"#include \"weft.bpf.h\"\n"
	"\n"
	"struct k0 { __u32 tid; __u32 _pad; };\n"
	"struct v0 { struct weft_aggval_count c; struct weft_aggval_sum s; };\n"
	"WEFT_AGG_HASH(agg_tid, struct k0, struct v0, 1024);\n"
	"\n"
	"struct v1 { struct weft_aggval_count c; struct weft_aggval_sum s; };\n"
	"WEFT_AGG_ARRAY(agg_total, struct v1);\n"
	"\n"
	"struct k2 { __u32 tid; __u32 _pad; };\n"
	"struct v2 { struct weft_aggval_count c; struct weft_aggval_minmax lo;\n"
	"            struct weft_aggval_minmax hi; };\n"
	"WEFT_AGG_HASH(agg_seq, struct k2, struct v2, 1024);\n"
	"\n"
	"SEC(\"tp/syscalls/sys_enter_getppid\")\n"
	"int p_tid(void *ctx)\n"
	"{\n"
	"	__u32 e = weft_epoch();\n"
	"	if (!weft_pid_ok())\n"
	"		return 0;\n"
	"	struct k0 k = { .tid = weft_tid() };\n"
	"	WEFT_AGG_UPDATE(agg_tid, e, &k, v,\n"
	"		weft_aggval_count_add(&v->c, 0);\n"
	"		weft_aggval_sum_add(&v->s, WEFT_TP(ctx, 8, __s32)););\n"
	"	return 0;\n"
	"}\n"
	"\n"
	"SEC(\"tp/syscalls/sys_enter_getppid\")\n"
	"int p_total(void *ctx)\n"
	"{\n"
	"	__u32 e = weft_epoch();\n"
	"	if (!weft_pid_ok())\n"
	"		return 0;\n"
	"	struct v1 *v = WEFT_AGG_GET1(agg_total, struct v1, e);\n"
	"	if (!v)\n"
	"		return 0;\n"
	"	weft_aggval_count_add(&v->c, 0);\n"
	"	weft_aggval_sum_add(&v->s, WEFT_TP(ctx, 8, __s32));\n"
	"	return 0;\n"
	"}\n"
	"\n"
	"SEC(\"tp/raw_syscalls/sys_enter\")\n"
	"int p_seq(void *ctx)\n"
	"{\n"
	"	__u32 e = weft_epoch();\n"
	"	if (!weft_pid_ok())\n"
	"		return 0;\n"
	"	if (WEFT_TP(ctx, 8, __s64) != WL_NR)\n"
	"		return 0;\n"
	"	struct k2 k = { .tid = weft_tid() };\n"
	"	__s64 seq = WEFT_TP(ctx, 16, __s64);\n"
	"	WEFT_AGG_UPDATE(agg_seq, e, &k, v,\n"
	"		weft_aggval_count_add(&v->c, seq);\n"
	"		weft_aggval_min_add(&v->lo, seq);\n"
	"		weft_aggval_max_add(&v->hi, seq););\n"
	"	return 0;\n"
	"}\n";

/* one (window, thread) cell of agg_seq, merged over CPUs */
struct seq_cell {
	__u32 tid;
	__u64 window;
	__u64 count;
	__s64 min, max;
};

struct totals {
	__u64 window;
	__u64 count, sum; /* agg_tid */
	__u64 total_count, total_sum; /* agg_total */
	__u32 tids[8];
	unsigned int ntids;
	struct seq_cell *cells;
	size_t ncells, ccells;
	__u64 nonempty_windows;
	int bad;
};

static int on_tid(void *ctx, const void *key, const void *const *vals, unsigned int ncpu)
{
	struct totals *t = ctx;
	__u32 tid = *(const __u32 *)key;
	__u64 c = 0;
	unsigned int i;

	for (unsigned int cpu = 0; cpu < ncpu; cpu++) {
		const struct weft_aggval_count *vc = vals[cpu];
		const struct weft_aggval_sum *vs = (const void *)(vc + 1);

		c += vc->n;
		t->sum += (__u64)vs->sum;
	}
	t->count += c;
	for (i = 0; i < t->ntids && t->tids[i] != tid; i++)
		;
	if (i == t->ntids && t->ntids < 8)
		t->tids[t->ntids++] = tid;
	return 0;
}

static int on_total(void *ctx, const void *key, const void *const *vals, unsigned int ncpu)
{
	struct totals *t = ctx;
	__u64 c = 0;

	if (key)
		t->bad++; /* an array map's entries have no key */
	for (unsigned int cpu = 0; cpu < ncpu; cpu++) {
		const struct weft_aggval_count *vc = vals[cpu];
		const struct weft_aggval_sum *vs = (const void *)(vc + 1);

		c += vc->n;
		t->total_sum += (__u64)vs->sum;
	}
	t->total_count += c;
	if (c)
		t->nonempty_windows++;
	return 0;
}

struct v2 {
	struct weft_aggval_count c;
	struct weft_aggval_minmax lo, hi;
};

static int on_seq(void *ctx, const void *key, const void *const *vals, unsigned int ncpu)
{
	struct totals *t = ctx;
	struct seq_cell cell = { .tid = *(const __u32 *)key, .window = t->window };
	__u64 nlo = 0;

	cell.min = INT64_MAX;
	cell.max = INT64_MIN;
	for (unsigned int cpu = 0; cpu < ncpu; cpu++) {
		const struct v2 *v = vals[cpu];

		cell.count += v->c.n;
		if (v->lo.n) {
			nlo += v->lo.n;
			if (v->lo.v < cell.min)
				cell.min = v->lo.v;
		}
		if (v->hi.n && v->hi.v > cell.max)
			cell.max = v->hi.v;
	}
	if (!cell.count || nlo != cell.count) {
		t->bad++; /* an entry exists only once an event updated it */
		return 0;
	}
	if (t->ncells == t->ccells) {
		size_t c = t->ccells ? 2 * t->ccells : 256;
		void *p = realloc(t->cells, c * sizeof(*t->cells));

		if (!p)
			return -ENOMEM;
		t->cells = p;
		t->ccells = c;
	}
	t->cells[t->ncells++] = cell;
	return 0;
}

static int drain_window(struct bpfrt *rt, struct totals *t, uint64_t drops[WEFT_DROP_NR])
{
	int r;

	t->window = bpfrt_windows(rt);
	r = bpfrt_agg_drain(rt, "agg_tid", on_tid, t);
	if (r >= 0)
		r = bpfrt_agg_drain(rt, "agg_total", on_total, t);
	if (r >= 0)
		r = bpfrt_agg_drain(rt, "agg_seq", on_seq, t);
	if (r >= 0)
		r = bpfrt_drops_read(rt, drops);
	return r < 0 ? r : 0;
}

static int cell_cmp(const void *a, const void *b)
{
	const struct seq_cell *x = a, *y = b;

	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	return x->min < y->min ? -1 : x->min > y->min;
}

static int setup_target(struct bpf_object *obj, void *arg)
{
	return rt_set_target(obj, *(pid_t *)arg);
}

static void test_window_exactly_once(void **state)
{
	struct rt_prog p = { 0 };
	struct totals t = { 0 };
	uint64_t drops[WEFT_DROP_NR] = { 0 }, misses = 0, t0, flip_ns = 0, flip_max = 0;
	struct rt_wl wl = { .pid = -1, .go_fd = -1 };
	char obj[PATH_MAX], src[sizeof(prog_src) + 64];
	unsigned int flips = 0;
	int running;

	(void)state;
	snprintf(src, sizeof(src), "#define WL_NR %d\n%s", (int)SYS_getppid, prog_src);
	assert_int_equal(rt_compile(&p, "window", src, obj, sizeof(obj)), 0);
	assert_int_equal(rt_wl_start(&wl, N_CALLS, N_THREADS), 0);
	assert_int_equal(rt_load(&p, obj, setup_target, &wl.pid, NULL), 0);
	assert_int_equal(rt_wl_go(&wl), 0);

	t0 = rt_now_ns();
	do {
		__u64 f0;

		rt_sleep_us(1000);
		running = rt_wl_poll(&wl, 0);
		f0 = rt_now_ns();
		assert_int_equal(bpfrt_window_flip(p.rt), 0);
		f0 = rt_now_ns() - f0;
		flip_ns += f0;
		flip_max = f0 > flip_max ? f0 : flip_max;
		flips++;
		assert_int_equal(drain_window(p.rt, &t, drops), 0);
	} while (running == 1);
	assert_int_equal(running, 0);
	/* the workload has exited: one more flip makes the other half idle too */
	assert_int_equal(bpfrt_window_flip(p.rt), 0);
	assert_int_equal(drain_window(p.rt, &t, drops), 0);
	assert_int_equal(bpfrt_prog_misses(p.rt, &misses), 0);
	printf("# %u flips in %.2f s (flip: mean %.0f us, max %.0f us), %llu non-empty windows, "
	       "%zu (window, thread) cells\n",
	       flips + 1, (double)(rt_now_ns() - t0) / 1e9, (double)flip_ns / flips / 1e3,
	       (double)flip_max / 1e3, (unsigned long long)t.nonempty_windows, t.ncells);

	assert_int_equal(misses, 0);
	for (int r = 0; r < WEFT_DROP_NR; r++)
		assert_int_equal(drops[r], 0);
	assert_int_equal(t.bad, 0);
	assert_int_equal(t.count, N_CALLS);
	assert_int_equal(t.sum, N_CALLS * SYS_getppid);
	assert_int_equal(t.ntids, N_THREADS);
	assert_int_equal(t.total_count, N_CALLS);
	assert_int_equal(t.total_sum, N_CALLS * SYS_getppid);
	/* the windows really split the run: many of them saw events */
	assert_true(flips >= 100);
	assert_true(t.nonempty_windows >= 20);

	/* tiling: per thread, sorted by min, ranges are [0, a], [a+1, b], ..., [.., n_k - 1] */
	qsort(t.cells, t.ncells, sizeof(*t.cells), cell_cmp);
	{
		unsigned int threads = 0;
		__u64 seen = 0;

		for (size_t i = 0; i < t.ncells; i++) {
			const struct seq_cell *c = &t.cells[i];
			int first = i == 0 || t.cells[i - 1].tid != c->tid;
			int last = i + 1 == t.ncells || t.cells[i + 1].tid != c->tid;

			if (first) {
				threads++;
				assert_int_equal(c->min, 0);
			} else {
				assert_int_equal(c->min, t.cells[i - 1].max + 1);
			}
			assert_int_equal(c->count, (__u64)(c->max - c->min + 1));
			if (last)
				assert_int_equal(c->max + 1, N_CALLS / N_THREADS);
			seen += c->count;
		}
		assert_int_equal(threads, N_THREADS);
		assert_int_equal(seen, N_CALLS);
	}
	free(t.cells);
	rt_unload(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_window_exactly_once),
	};

	if (!wt_root("it loads and attaches BPF programs"))
		return WT_SKIP;
	return wt_status(cmocka_run_group_tests(tests, NULL, NULL));
}
