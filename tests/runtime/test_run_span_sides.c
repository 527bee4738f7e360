// SPDX-License-Identifier: Apache-2.0
/*
 * End to end, spans whose sides have their own keys and filters (issue 15, lang-a): the real
 * `weft run --format json` against the real scheduler tracepoints, over wl_wake, whose T
 * sleeper threads ("wlw_sleep") are each put to sleep and woken exactly R times, each wakeup
 * only once the sleeper is off its CPU (tests/workloads/wl_wake.c says why that makes the
 * counts exact).
 *
 *  - runqlat's shape: span(sched_wakeup on args.pid, sched_switch on args.next_pid), the
 *    start filtered to the sleepers by the query's `where`: exactly R spans per sleeper thread
 *    (grouped by the woken pid), each with a positive duration.
 *  - offcputime's shape, the same probe on both sides: span(sched_switch where
 *    args.prev_state = 1 on args.prev_pid, sched_switch on args.next_pid): every sleep of a
 *    sleeper in state S is one span ended by its next switch-in: exactly R per thread.
 *  - A per-side `where` on the end: the same with the end filtered by args.next_comm (the same
 *    counts), and with an end filter no switch-in passes (args.next_pid = 0: the idle task
 *    never sleeps in state S): no span at all.
 *  - end.args.F, the end probe's own fields: offcputime grouped by the switch-in's next_pid
 *    and filtered by its next_comm: the same counts.
 *  - Each query is run once, no retry.  Where the query's start is replaced only by a lost
 *    end, every span a sleeper is short is one replaced start: sum(R - spans) = replaced,
 *    exactly (run_wake() says why and gives the evidence).
 *  - runqlat written the other way round: a start-side filter in the span itself
 *    (sched_wakeup where args.comm = 'wlw_sleep'), the same counts.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "run_util.h"
#include "tests/skip.h"

#define ROUNDS 300
#define THREADS 3

/*
 * Runs QUERY (grouped by a `tid` key, counting `n`) over `wl_wake ROUNDS THREADS`, released
 * once weft is attached, once (no retry), and checks:
 *  - no row for any other thread, and no sleeper with more than `want` spans;
 *  - with replaced >= 0: exactly `want` spans a sleeper and exactly `replaced` span starts
 *    replaced by a later start under the same key (spans that never end);
 *  - with replaced < 0 (want = R, every start ends): the spans the sleepers are short, summed,
 *    equal the replaced starts exactly, and nothing else is lost.
 *
 * Why not exactly R each: now and then one sched_switch into a sleeper reaches no consumer of
 * the tracepoint at all, and no miss is counted.  Evidence (branch spanfix, 2026-11-26, the
 * shared 2-core host under load 5-6): weft's runqlat query over wl_wake 300 3, side by side
 * with bpftrace recording the sleepers' sched_waking/sched_wakeup/sched_switch, and in other
 * runs with a tracefs instance (plain ftrace: no perf, no BPF; entries-written = entries in
 * buffer, no LOST marker) recording sched_wakeup/sched_switch of the sleepers.  In about 1 run
 * in 10, one thread had 299 spans and 1 replaced start in weft, with 0 misses, and the other
 * tracer's log of that thread had the same hole: `prev=wlw_sleep prev_state=S` (switched out
 * asleep), `sched_wakeup` by the main thread, then `prev=wlw_sleep prev_state=S` again with no
 * `next=wlw_sleep` between, which cannot happen: the thread ran, so a switch-in took place,
 * but the tracepoint delivered it to none of weft, bpftrace or ftrace.  So it is below weft
 * (the tracepoint's dispatch on this kernel, possibly its probe array being swapped as the
 * other tracers on the host attach and detach sched_switch probes: not proven), and weft's
 * semantics are right: the missed end leaves the start open and the next wakeup replaces it,
 * as bpftrace's runqlat.bt would (it overwrites its start).  Every hole seen was a switch-in
 * (2 of 2); each is one span short and one replaced start, exactly, which is what this checks.
 * Not covered, and would fail it: a lost switch-in on a sleeper's very last round (no later
 * start replaces it), or a lost wakeup or switch-out (a start never made).
 */
static long long run_wake(const char *query, long long want, long long replaced)
{
	char r[16], t[16], line[128];
	char *argv[] = { (char *)wr_workload("wl_wake"), r, t, NULL };
	struct wr_proc wl, p;
	struct wr_json j;
	int tids[THREADS], ntids = 0, rc;
	long long total, short_by = 0, nreplaced = 0, nopen = 0, no_start = 0;

	snprintf(r, sizeof(r), "%d", ROUNDS);
	snprintf(t, sizeof(t), "%d", THREADS);
	assert_int_equal(wr_workload_start(&wl, argv), 0);
	assert_int_equal(wr_weft_start(&p, "--format", "json", query, NULL), 0);
	rc = wr_wait_err(&p, "attached", WR_TIMEOUT_MS);
	if (rc)
		wr_dump(&p, query);
	assert_int_equal(rc, 0);
	assert_int_equal(write(wl.in_fd, "g", 1), 1);
	assert_int_equal(wr_finish(&wl, WR_TIMEOUT_MS), 0);
	assert_non_null(strstr(wl.out.p, "wl_wake: 3 threads, 300 wakeups each"));
	while (ntids < THREADS && wr_cut_line(&wl.out, "tid ", line, sizeof(line)))
		tids[ntids++] = atoi(line + 4);
	assert_int_equal(ntids, THREADS);
	assert_int_equal(kill(p.pid, SIGINT), 0);
	rc = wr_finish(&p, WR_TIMEOUT_MS);
	if (rc)
		wr_dump(&p, query);
	assert_int_equal(rc, 0);
	wr_json_lines(&p.out, &j);
	/*
	 * One window and no loss but replaced starts, except `misses`: the scheduler's tracepoints
	 * fire inside other BPF programs too (a ring buffer's wakeup), where the kernel skips ours,
	 * and on a shared machine other tracers run.  A miss that touched the workload's threads
	 * would show in the counts below; any other is reported, not failed.
	 */
	{
		const struct wj *w = NULL, *lost;

		for (size_t i = 0; i < j.n; i++)
			if (wr_is_type(j.v[i], "window")) {
				assert_null(w);
				w = j.v[i];
			}
		assert_non_null(w);
		lost = wj_get(w, "lost");
		assert_non_null(lost);
		for (size_t k = 0; k < lost->nkids; k++) {
			if (!lost->kids[k].is_int)
				fail_msg("lost %s: not an integer", lost->kids[k].name);
			if (strcmp(lost->kids[k].name, "span_start_replaced") == 0)
				nreplaced = lost->kids[k].ival;
			else if (lost->kids[k].ival != 0)
				fail_msg("lost %s %s, not 0", lost->kids[k].str,
					 lost->kids[k].name);
		}
		assert_int_equal(wj_int_of(w, "overflow"), 0);
		nopen = wj_int_of(w, "spans_open"); /* starts never ended, at the detach */
		no_start = wj_int_of(wj_get(w, "notes"), "span_end_without_start");
		if (wj_int_of(w, "misses"))
			printf("# %lld events skipped by the kernel (bpf recursion), none of ours\n",
			       wj_int_of(w, "misses"));
	}
	for (int i = 0; i < THREADS; i++) {
		long long n = wr_sum_col(&j, "n", "tid", tids[i]);

		printf("# %s: thread %d: %lld spans\n", query, tids[i], n);
		assert_true(n <= want);
		if (replaced >= 0)
			assert_int_equal(n, want);
		short_by += want - n;
	}
	printf("# %lld spans short, %lld starts replaced, %lld open at the end\n", short_by,
	       nreplaced, nopen);
	if (replaced >= 0)
		assert_int_equal(nreplaced, replaced);
	/*
	 * Every start (R a sleeper, none lost) is a span, a start replaced by the next one of its
	 * key, or a start still open when weft detached: with every start ended, each lost
	 * switch-in is one span short and one start replaced (by the next round's) or, on a
	 * sleeper's last round, left open.
	 */
	assert_int_equal(want * THREADS - short_by + nreplaced + nopen,
			 (long long)ROUNDS * THREADS);
	total = wr_sum_col(&j, "n", NULL, 0);
	assert_int_equal(total, want * THREADS - short_by); /* no row for any other thread */
	wr_json_free(&j);
	wr_free(&p);
	wr_free(&wl);
	return no_start;
}

static void test_runqlat_wakeup_to_switch_in(void **state)
{
	(void)state;
	/* the start filtered by what the end cannot check: its ends without a start (every
	 * other task's switch-in) are not noted */
	assert_int_equal(run_wake("from span(tp:sched:sched_wakeup on args.pid, "
				  "tp:sched:sched_switch on args.next_pid) "
				  "where args.comm = 'wlw_sleep' group by args.pid as tid "
				  "select count() as n",
				  ROUNDS, -1),
			 0);
}

static void test_runqlat_start_filter_in_span(void **state)
{
	(void)state;
	/* and so with the filter in the span: not noted either (they were, every other task's
	 * switch-in, hundreds a run) */
	assert_int_equal(run_wake("from span(tp:sched:sched_wakeup where args.comm = 'wlw_sleep' "
				  "on args.pid, tp:sched:sched_switch on args.next_pid) "
				  "where duration > 0ns group by args.pid as tid "
				  "select count() as n",
				  ROUNDS, -1),
			 0);
}

static void test_offcputime_same_probe_both_sides(void **state)
{
	(void)state;
	run_wake("from span(tp:sched:sched_switch where args.prev_state = 1 on args.prev_pid, "
		 "tp:sched:sched_switch on args.next_pid) where args.prev_comm = 'wlw_sleep' "
		 "group by args.prev_pid as tid select count() as n",
		 ROUNDS, -1);
}

static void test_end_side_filter(void **state)
{
	(void)state;
	run_wake("from span(tp:sched:sched_switch where args.prev_state = 1 on args.prev_pid, "
		 "tp:sched:sched_switch where args.next_comm = 'wlw_sleep' on args.next_pid) "
		 "where args.prev_comm = 'wlw_sleep' group by args.prev_pid as tid "
		 "select count() as n",
		 ROUNDS, -1);
	/* an end filter that no end passes: no span ends, so no row, and each sleeper's next
	 * start replaces its unended one: R - 1 replaced starts a thread, counted as lost */
	run_wake("from span(tp:sched:sched_switch where args.prev_state = 1 on args.prev_pid, "
		 "tp:sched:sched_switch where args.next_pid = 0 on args.next_pid) "
		 "where args.prev_comm = 'wlw_sleep' group by args.prev_pid as tid "
		 "select count() as n",
		 0, (long long)THREADS * (ROUNDS - 1));
}

/* end.args.F: the end probe's fields, as a group key and in the query's `where` */
static void test_end_fields(void **state)
{
	(void)state;
	run_wake("from span(tp:sched:sched_switch where args.prev_state = 1 and "
		 "args.prev_comm = 'wlw_sleep' on args.prev_pid, "
		 "tp:sched:sched_switch on args.next_pid) where end.args.next_comm = 'wlw_sleep' "
		 "group by end.args.next_pid as tid select count() as n",
		 ROUNDS, -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_runqlat_wakeup_to_switch_in),
		cmocka_unit_test(test_runqlat_start_filter_in_span),
		cmocka_unit_test(test_offcputime_same_probe_both_sides),
		cmocka_unit_test(test_end_side_filter),
		cmocka_unit_test(test_end_fields),
	};

	if (!wr_ready())
		return WT_SKIP;
	return wt_status(cmocka_run_group_tests(tests, NULL, NULL));
}
