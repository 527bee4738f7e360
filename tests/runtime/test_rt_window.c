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
 * While the calls run flat out on 2 threads, the test flips the window N_FLIPS times, about
 * every millisecond, draining the idle half after each flip.  It counts flips, not seconds:
 * the workload is paced (wl_syscalls ... paced, tests/workloads/wl_pace.h) so that it is
 * still running at the last of those flips however long a flip takes (a flip waits for an
 * RCU grace period: ~1 ms on some kernels, ~13 ms on others), and each flip waits until a
 * thread has entered a call since the previous one, so every window holds events.  It then
 * asserts that the N_FLIPS + 1 windows are exactly the ones that saw calls, that the totals
 * are exactly N and N * __NR_getppid and, much stronger, that for every thread the windows'
 * [min, max] sequence ranges tile 0..n-1 with no gap and no overlap and that each window's
 * count equals its range's length: an event lost, counted twice, or read from a half still
 * being written breaks the tiling.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <cmocka.h>
#include "kernel/weft_aggval.h"
#include "tools/bench/rt_harness.h"
#include "tests/skip.h"
#include "tests/workloads/wl_pace.h"

#define N_FLIPS 200u /* while the workload runs; one more after it has exited */
#define BATCH 2500ul /* each flip lets each thread make this many calls more */
#define N_THREADS 2ul
/* 2 batches a thread are left for after the last flip: the window after it holds calls */
#define N_PER_THREAD ((N_FLIPS + 2) * BATCH)
#define N_CALLS (N_PER_THREAD * N_THREADS)
#define HANG_MS 60000 /* a bound on any one wait, only to catch a hang */

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

/* rt_wl_start() for `wl_syscalls N_CALLS N_THREADS wait paced`, sharing *pace (fd 3). */
static int wl_start_paced(struct rt_wl *wl, struct wl_pace **pace)
{
	char path[PATH_MAX], narg[32], targ[32], line[32];
	int in[2], out[2], mfd;
	ssize_t len;

	mfd = memfd_create("wl_pace", MFD_CLOEXEC);
	if (mfd < 0 || ftruncate(mfd, sizeof(**pace)) != 0)
		return -errno;
	*pace = mmap(NULL, sizeof(**pace), PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
	if (*pace == MAP_FAILED)
		return -errno;
	atomic_store(&(*pace)->allow, BATCH);
	snprintf(path, sizeof(path), "%s/tests/workloads/wl_syscalls",
		 rt_env("WEFT_BINARY_DIR", "."));
	snprintf(narg, sizeof(narg), "%lu", N_CALLS);
	snprintf(targ, sizeof(targ), "%lu", N_THREADS);
	if (pipe(in) || pipe(out))
		return -errno;
	wl->pid = fork();
	if (wl->pid < 0)
		return -errno;
	if (wl->pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		if (mfd == WL_PACE_FD)
			fcntl(mfd, F_SETFD, 0); /* keep it across exec */
		else
			dup2(mfd, WL_PACE_FD); /* the copy has no FD_CLOEXEC */
		close(in[1]);
		close(out[0]);
		execl(path, path, narg, targ, "wait", "paced", (char *)NULL);
		_exit(127);
	}
	close(mfd);
	close(in[0]);
	close(out[1]);
	wl->go_fd = in[1];
	len = read(out[0], line, sizeof(line) - 1);
	close(out[0]);
	if (len <= 0)
		return -EIO;
	line[len] = 0;
	return atoi(line) == wl->pid ? 0 : -EPROTO;
}

/* Waits (bounded) until some thread has made 2 calls more than since[] says. */
static void wait_progress(struct wl_pace *pace, const unsigned long since[N_THREADS])
{
	uint64_t until = rt_now_ns() + HANG_MS * 1000000ull;

	for (;;) {
		for (unsigned long k = 0; k < N_THREADS; k++)
			if (atomic_load(&pace->done[k]) >= since[k] + 2)
				return;
		if (rt_now_ns() > until)
			fail_msg("the workload made no call in %d ms", HANG_MS);
		rt_sleep_us(20);
	}
}

static void test_window_exactly_once(void **state)
{
	struct rt_prog p = { 0 };
	struct totals t = { 0 };
	uint64_t drops[WEFT_DROP_NR] = { 0 }, misses = 0, flip_ns = 0, flip_max = 0, until;
	struct rt_wl wl = { .pid = -1, .go_fd = -1 };
	char obj[PATH_MAX], src[sizeof(prog_src) + 64];
	unsigned long since[N_THREADS] = { 0 };
	struct wl_pace *pace = NULL;
	unsigned int flips;
	int running;

	(void)state;
	snprintf(src, sizeof(src), "#define WL_NR %d\n%s", (int)SYS_getppid, prog_src);
	assert_int_equal(rt_compile(&p, "window", src, obj, sizeof(obj)), 0);
	assert_int_equal(wl_start_paced(&wl, &pace), 0);
	assert_int_equal(rt_load(&p, obj, setup_target, &wl.pid, NULL), 0);
	assert_int_equal(rt_wl_go(&wl), 0);

	for (flips = 0; flips < N_FLIPS; flips++) {
		__u64 f0;

		rt_sleep_us(1000);
		wait_progress(pace, since); /* the window about to close holds calls */
		assert_int_equal(rt_wl_poll(&wl, 0), 1); /* still running: it cannot finish yet */
		f0 = rt_now_ns();
		assert_int_equal(bpfrt_window_flip(p.rt), 0);
		f0 = rt_now_ns() - f0;
		flip_ns += f0;
		flip_max = f0 > flip_max ? f0 : flip_max;
		assert_int_equal(drain_window(p.rt, &t, drops), 0);
		/* read after the flip: calls past these are in the next window */
		for (unsigned long k = 0; k < N_THREADS; k++)
			since[k] = atomic_load(&pace->done[k]);
		atomic_fetch_add(&pace->allow, BATCH);
	}
	/* the rest of the calls (at least 2 batches a thread), then the workload exits */
	atomic_store(&pace->allow, ULONG_MAX);
	until = rt_now_ns() + HANG_MS * 1000000ull;
	while ((running = rt_wl_poll(&wl, 0)) == 1 && rt_now_ns() < until)
		rt_sleep_us(1000);
	assert_int_equal(running, 0);
	for (unsigned long k = 0; k < N_THREADS; k++)
		assert_int_equal(atomic_load(&pace->done[k]), N_PER_THREAD);
	/* the workload has exited: one more flip makes the other half idle too */
	assert_int_equal(bpfrt_window_flip(p.rt), 0);
	assert_int_equal(drain_window(p.rt, &t, drops), 0);
	assert_int_equal(bpfrt_prog_misses(p.rt, &misses), 0);
	printf("# %u flips (flip: mean %.0f us, max %.0f us), %llu non-empty windows, "
	       "%zu (window, thread) cells\n",
	       N_FLIPS + 1, (double)flip_ns / N_FLIPS / 1e3, (double)flip_max / 1e3,
	       (unsigned long long)t.nonempty_windows, t.ncells);
	munmap(pace, sizeof(*pace));

	assert_int_equal(misses, 0);
	for (int r = 0; r < WEFT_DROP_NR; r++)
		assert_int_equal(drops[r], 0);
	assert_int_equal(t.bad, 0);
	assert_int_equal(t.count, N_CALLS);
	assert_int_equal(t.sum, N_CALLS * SYS_getppid);
	assert_int_equal(t.ntids, N_THREADS);
	assert_int_equal(t.total_count, N_CALLS);
	assert_int_equal(t.total_sum, N_CALLS * SYS_getppid);
	/* the windows really split the run: each of them saw calls, and only those */
	assert_int_equal(t.nonempty_windows, N_FLIPS + 1);

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
