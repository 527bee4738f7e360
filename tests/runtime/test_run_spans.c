// SPDX-License-Identifier: Apache-2.0
/*
 * End to end, spans at the edges of a run: the real `weft run --format json` against the real
 * kernel, with workloads whose threads call a function (wl_calls) or a system call
 * (wl_syscalls) flat out.
 *
 *  - Attach and detach under load: weft attaches while every thread of the workload is
 *    calling, runs a moment, and is stopped with SIGINT while they still call.  At most the
 *    calls in flight when the query went live can end without a start: one per thread, so
 *    span_end_without_start <= T, and nothing is lost (no start replaced, evicted or left
 *    over).  Both a uprobe span (uprobe + uretprobe) and a syscall span (two tracepoints).
 *  - A known number of calls (T threads, N calls, started after weft attached): exactly N
 *    spans and no note.
 *  - `where pid = P` without -p, while another process calls the same function flat out:
 *    exactly the N spans of P, and the other process's span ends are neither counted nor
 *    noted (the predicate is evaluated before the span lookup).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "run_util.h"
#include "tests/skip.h"

#define N_THREADS 4
#define N_CALLS 200000
#define LOAD_MS 300

static long long notes_no_start(const struct wj *w)
{
	return wj_int_of(wj_get(w, "notes"), "span_end_without_start");
}

/* wl_calls N T [wait], its pid as text in pid[]. */
static void calls_start(struct wr_proc *wl, long n, int t, bool wait_go, char pid[32])
{
	char ns[32], ts[32];
	char *argv[] = { (char *)wr_workload("wl_calls"), ns, ts, wait_go ? (char *)"wait" : NULL,
			 NULL };

	snprintf(ns, sizeof(ns), "%ld", n);
	snprintf(ts, sizeof(ts), "%d", t);
	assert_int_equal(wr_workload_start(wl, argv), 0);
	snprintf(pid, 32, "%d", (int)wl->pid);
}

/* Stops a wl_calls that runs until told (N = 0) and checks it ended well. */
static void calls_stop(struct wr_proc *wl)
{
	assert_int_equal(write(wl->in_fd, "s", 1), 1);
	assert_int_equal(wr_finish(wl, WR_TIMEOUT_MS), 0);
	assert_non_null(strstr(wl->out.p, "wl_calls: "));
}

/*
 * Runs `weft run --format json -p PID QUERY` while the workload is already calling, lets it
 * trace for a moment, stops it with SIGINT and checks its only window: n > 0, no loss, and at
 * most one span end without a start per thread.
 */
static void run_under_load(const char *pid, const char *query)
{
	struct wr_proc p;
	struct wr_json j;
	const struct wj *w;
	int rc;

	assert_int_equal(wr_weft_start(&p, "--format", "json", "-p", pid, query, NULL), 0);
	rc = wr_wait_err(&p, "attached", WR_TIMEOUT_MS);
	if (rc)
		wr_dump(&p, query);
	assert_int_equal(rc, 0);
	wr_sleep_ms(LOAD_MS);
	assert_int_equal(kill(p.pid, SIGINT), 0);
	rc = wr_finish(&p, WR_TIMEOUT_MS);
	if (rc != 0)
		wr_dump(&p, query);
	assert_int_equal(rc, 0);
	wr_json_lines(&p.out, &j);
	w = wr_one_window(&j); /* and no loss of any kind */
	printf("# %s: %lld spans, %lld ends without a start\n", query, wj_int_of(wr_row(w, 0), "n"),
	       notes_no_start(w));
	assert_true(wj_int_of(wr_row(w, 0), "n") > 0);
	if (notes_no_start(w) > N_THREADS)
		fail_msg("%lld span ends without a start; at most %d calls were in flight",
			 notes_no_start(w), N_THREADS);
	wr_json_free(&j);
	wr_free(&p);
}

static void test_uprobe_span_attach_detach_under_load(void **state)
{
	char pid[32], query[PATH_MAX + 128];
	struct wr_proc wl;

	(void)state;
	if (!wr_ready())
		wt_skip("tracing needs root, tracefs and the weft binary");
	calls_start(&wl, 0, N_THREADS, false, pid);
	snprintf(query, sizeof(query), "from span(uprobe:%s:wl_call) select count() as n",
		 wr_workload("wl_calls"));
	run_under_load(pid, query);
	calls_stop(&wl);
	wr_free(&wl);
}

static void test_syscall_span_attach_detach_under_load(void **state)
{
	char n[32], t[32], pid[32];
	char *argv[] = { (char *)wr_workload("wl_syscalls"), n, t, NULL };
	struct wr_proc wl;

	(void)state;
	if (!wr_ready())
		wt_skip("tracing needs root, tracefs and the weft binary");
	/* far more calls than the run can see: it is killed when the test is done */
	snprintf(n, sizeof(n), "%ld", 4000000000L);
	snprintf(t, sizeof(t), "%d", N_THREADS);
	assert_int_equal(wr_workload_start(&wl, argv), 0);
	snprintf(pid, sizeof(pid), "%d", (int)wl.pid);
	run_under_load(pid, "from span(syscall:getppid) select count() as n");
	wr_free(&wl); /* SIGKILL */
}

/* Runs QUERY (with EXTRA args before it, or NULL) over `wl_calls N_CALLS T wait`, released
 * once weft is attached; returns weft's only window in *j. */
static const struct wj *run_known(struct wr_proc *p, struct wr_json *j, const char *pid,
				  struct wr_proc *wl, const char *extra, const char *query)
{
	int rc;

	if (extra)
		rc = wr_weft_start(p, "--format", "json", extra, pid, query, NULL);
	else
		rc = wr_weft_start(p, "--format", "json", query, NULL);
	assert_int_equal(rc, 0);
	rc = wr_wait_err(p, "attached", WR_TIMEOUT_MS);
	if (rc)
		wr_dump(p, query);
	assert_int_equal(rc, 0);
	assert_int_equal(write(wl->in_fd, "g", 1), 1);
	assert_int_equal(wr_finish(wl, WR_TIMEOUT_MS), 0);
	assert_non_null(strstr(wl->out.p, "wl_calls: 200000 calls"));
	if (!extra) /* no -p: only SIGINT ends it */
		assert_int_equal(kill(p->pid, SIGINT), 0);
	rc = wr_finish(p, WR_TIMEOUT_MS);
	if (rc != 0)
		wr_dump(p, query);
	assert_int_equal(rc, 0);
	wr_json_lines(&p->out, j);
	return wr_one_window(j);
}

static void test_uprobe_span_known_calls_exact(void **state)
{
	char pid[32], query[PATH_MAX + 128];
	struct wr_proc wl, p;
	struct wr_json j;
	const struct wj *w;

	(void)state;
	if (!wr_ready())
		wt_skip("tracing needs root, tracefs and the weft binary");
	calls_start(&wl, N_CALLS, N_THREADS, true, pid);
	snprintf(query, sizeof(query), "from span(uprobe:%s:wl_call) select count() as n",
		 wr_workload("wl_calls"));
	w = run_known(&p, &j, pid, &wl, "-p", query);
	assert_int_equal(wj_int_of(wr_row(w, 0), "n"), N_CALLS);
	assert_int_equal(notes_no_start(w), 0);
	wr_json_free(&j);
	wr_free(&p);
	wr_free(&wl);
}

static void test_uprobe_span_where_pid_other_process(void **state)
{
	char pid[32], other_pid[32], query[PATH_MAX + 128];
	struct wr_proc wl, other, p;
	struct wr_json j;
	const struct wj *w;

	(void)state;
	if (!wr_ready())
		wt_skip("tracing needs root, tracefs and the weft binary");
	calls_start(&other, 0, 2, false, other_pid); /* calls all along */
	calls_start(&wl, N_CALLS, N_THREADS, true, pid);
	snprintf(query, sizeof(query),
		 "from span(uprobe:%s:wl_call) where pid = %s select count() as n",
		 wr_workload("wl_calls"), pid);
	w = run_known(&p, &j, pid, &wl, NULL, query);
	calls_stop(&other);
	assert_int_equal(wj_int_of(wr_row(w, 0), "n"), N_CALLS);
	assert_int_equal(notes_no_start(w), 0);
	wr_json_free(&j);
	wr_free(&p);
	wr_free(&wl);
	wr_free(&other);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_uprobe_span_attach_detach_under_load),
		cmocka_unit_test(test_syscall_span_attach_detach_under_load),
		cmocka_unit_test(test_uprobe_span_known_calls_exact),
		cmocka_unit_test(test_uprobe_span_where_pid_other_process),
	};

	if (!wr_ready())
		return WT_SKIP;
	return wt_status(cmocka_run_group_tests(tests, NULL, NULL));
}
