// SPDX-License-Identifier: Apache-2.0
/*
 * Spans against the real kernel: `span(syscall:getppid)` pairs sys_enter_getppid with
 * sys_exit_getppid by thread, and every start is matched, dropped or evicted — counted once.
 *
 *  - a roomy span table: N spans matched, durations > 0 and < 1 s, nothing dropped;
 *  - a span table of one entry, which the test occupies for 20 ms in the middle of the run (two
 *    threads may also collide by themselves, but a scheduler may as well run them one after
 *    the other): a start that finds the table full is counted (span_table_full), its end
 *    finds no start (span_end_without_start), and matched + span_table_full == N exactly;
 *  - no end probe attached: each new start of a thread replaces its previous unmatched one
 *    (span_start_replaced), and the agent's sweep evicts the last start of each thread
 *    (span_evicted): replaced + evicted == N.
 * The saved start-side value (the tid) must come back unchanged at the end.
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

#define N_CALLS 400000ul
#define N_THREADS 2ul

static const char prog_src[] =
	"#include \"weft.bpf.h\"\n"
	"\n"
	"struct sv { struct weft_span_hdr h; __u32 tid; __u32 _pad; };\n"
	"WEFT_SPAN_MAP(spans, struct sv, 1024);\n"
	"\n"
	"struct v0 { struct weft_aggval_count c; struct weft_aggval_minmax lo;\n"
	"            struct weft_aggval_minmax hi; struct weft_aggval_sum s;\n"
	"            struct weft_aggval_count bad; };\n"
	"WEFT_AGG_ARRAY(agg, struct v0);\n"
	"\n"
	"SEC(\"tp/syscalls/sys_enter_getppid\")\n"
	"int p_start(void *ctx)\n"
	"{\n"
	"	__u32 e = weft_epoch();\n"
	"	if (!weft_pid_ok())\n"
	"		return 0;\n"
	"	struct sv s = { .tid = weft_tid() };\n"
	"	weft_span_begin(&spans, e, weft_tid(), &s);\n"
	"	return 0;\n"
	"}\n"
	"\n"
	"SEC(\"tp/syscalls/sys_exit_getppid\")\n"
	"int p_end(void *ctx)\n"
	"{\n"
	"	__u32 e = weft_epoch();\n"
	"	if (!weft_pid_ok())\n"
	"		return 0;\n"
	"	struct sv s;\n"
	"	__s64 d = WEFT_SPAN_END(&spans, e, weft_tid(), &s);\n"
	"	if (d < 0)\n"
	"		return 0;\n"
	"	struct v0 *v = WEFT_AGG_GET1(agg, struct v0, e);\n"
	"	if (!v)\n"
	"		return 0;\n"
	"	weft_aggval_count_add(&v->c, d);\n"
	"	weft_aggval_min_add(&v->lo, d);\n"
	"	weft_aggval_max_add(&v->hi, d);\n"
	"	weft_aggval_sum_add(&v->s, d);\n"
	"	if (s.tid != weft_tid())\n"
	"		weft_aggval_count_add(&v->bad, 0);\n"
	"	return 0;\n"
	"}\n";

struct v0 {
	struct weft_aggval_count c;
	struct weft_aggval_minmax lo, hi;
	struct weft_aggval_sum s;
	struct weft_aggval_count bad;
};

struct result {
	__u64 count, sum, bad;
	__s64 min, max;
	uint64_t drops[WEFT_DROP_NR];
};

static int on_agg(void *ctx, const void *key, const void *const *vals, unsigned int ncpu)
{
	struct result *r = ctx;

	for (unsigned int cpu = 0; cpu < ncpu; cpu++) {
		const struct v0 *v = vals[cpu];

		r->count += v->c.n;
		r->sum += (__u64)v->s.sum;
		r->bad += v->bad.n;
		if (v->lo.n && v->lo.v < r->min)
			r->min = v->lo.v;
		if (v->hi.n && v->hi.v > r->max)
			r->max = v->hi.v;
	}
	return 0;
}

struct setup_arg {
	pid_t pid;
	__u32 table;
};

static int setup(struct bpf_object *obj, void *arg)
{
	struct setup_arg *a = arg;
	int err = rt_set_target(obj, a->pid);

	return err ? err : bpfrt_map_resize(obj, "spans", a->table);
}

static void collect(struct rt_prog *p, struct result *r)
{
	assert_int_equal(bpfrt_window_flip(p->rt), 0);
	assert_true(bpfrt_agg_drain(p->rt, "agg", on_agg, r) == 1);
	assert_int_equal(bpfrt_drops_read(p->rt, r->drops), 0);
}

/* Occupy the span table from user space for 20 ms while the workload runs. */
static void squat_table(struct rt_prog *p, struct rt_wl *wl)
{
	int fd = bpf_map__fd(bpf_object__find_map_by_name(p->obj, "spans"));
	__u64 key = 1ull << 40, val[2] = { 0 }; /* no tid is that large */
	int tries = 0;

	rt_sleep_us(5000);
	val[0] = rt_now_ns(); /* young: the sweeps must leave it alone */
	while (bpf_map_update_elem(fd, &key, val, BPF_NOEXIST) && tries++ < 100000)
		; /* the one slot is busy with a span about half of the time */
	assert_int_equal(rt_wl_poll(wl, 0), 1);
	rt_sleep_us(20000);
	assert_int_equal(rt_wl_poll(wl, 0), 1);
	assert_int_equal(bpf_map_delete_elem(fd, &key), 0);
}

static void run_span(__u32 table, int attach_end, int squat, struct result *r)
{
	const char *const no_end[] = { "p_end", NULL };
	struct setup_arg arg = { .table = table };
	struct rt_prog p = { 0 };
	struct rt_wl wl = { .pid = -1, .go_fd = -1 };
	char obj[PATH_MAX];
	int running;

	memset(r, 0, sizeof(*r));
	r->min = INT64_MAX;
	r->max = INT64_MIN;
	assert_int_equal(rt_compile(&p, "span", prog_src, obj, sizeof(obj)), 0);
	assert_int_equal(rt_wl_start(&wl, N_CALLS, N_THREADS), 0);
	arg.pid = wl.pid;
	assert_int_equal(rt_load(&p, obj, setup, &arg, attach_end ? NULL : no_end), 0);
	assert_int_equal(rt_wl_go(&wl), 0);
	if (squat)
		squat_table(&p, &wl);
	do {
		rt_sleep_us(2000);
		running = rt_wl_poll(&wl, 0);
		collect(&p, r);
		/* a sweep with a generous bound must not take starts of running spans */
		assert_true(bpfrt_span_sweep(p.rt, "spans", 10ull * 1000000000ull, NULL) == 0);
	} while (running == 1);
	assert_int_equal(running, 0);
	collect(&p, r);
	/* the workload is gone: whatever start is left can never be matched */
	assert_true(bpfrt_span_sweep(p.rt, "spans", 0, NULL) >= 0);
	collect(&p, r);
	printf("# table %u%s: %llu matched, mean %.0f ns, min %lld ns, max %lld ns; full %llu, "
	       "no start %llu, replaced %llu, evicted %llu\n",
	       table, attach_end ? "" : " (no end probe)", (unsigned long long)r->count,
	       r->count ? (double)r->sum / (double)r->count : 0.0, (long long)r->min,
	       (long long)r->max, (unsigned long long)r->drops[WEFT_DROP_SPAN_FULL],
	       (unsigned long long)r->drops[WEFT_DROP_SPAN_NO_START],
	       (unsigned long long)r->drops[WEFT_DROP_SPAN_REPLACED],
	       (unsigned long long)r->drops[WEFT_DROP_SPAN_EVICTED]);
	assert_int_equal(r->bad, 0);
	rt_unload(&p);
}

static void test_span_all_matched(void **state)
{
	struct result r;

	(void)state;
	run_span(1024, 1, 0, &r);
	assert_int_equal(r.count, N_CALLS);
	assert_true(r.min > 0);
	assert_true(r.max < 1000000000);
	for (int i = 0; i < WEFT_DROP_NR; i++)
		assert_int_equal(r.drops[i], 0);
}

static void test_span_full_table_counted(void **state)
{
	struct result r;

	(void)state;
	run_span(1, 1, 1, &r);
	assert_true(r.drops[WEFT_DROP_SPAN_FULL] > 0);
	assert_int_equal(r.count + r.drops[WEFT_DROP_SPAN_FULL], N_CALLS);
	assert_int_equal(r.drops[WEFT_DROP_SPAN_NO_START], r.drops[WEFT_DROP_SPAN_FULL]);
	assert_int_equal(r.drops[WEFT_DROP_SPAN_REPLACED], 0);
	assert_int_equal(r.drops[WEFT_DROP_SPAN_EVICTED], 0);
	assert_true(r.min > 0);
}

static void test_span_unmatched_evicted(void **state)
{
	struct result r;

	(void)state;
	run_span(1024, 0, 0, &r);
	assert_int_equal(r.count, 0);
	assert_int_equal(r.drops[WEFT_DROP_SPAN_EVICTED], N_THREADS);
	assert_int_equal(r.drops[WEFT_DROP_SPAN_REPLACED] + r.drops[WEFT_DROP_SPAN_EVICTED],
			 N_CALLS);
	assert_int_equal(r.drops[WEFT_DROP_SPAN_FULL], 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_span_all_matched),
		cmocka_unit_test(test_span_full_table_counted),
		cmocka_unit_test(test_span_unmatched_evicted),
	};

	if (!wt_root("it loads and attaches BPF programs"))
		return WT_SKIP;
	return wt_status(cmocka_run_group_tests(tests, NULL, NULL));
}
