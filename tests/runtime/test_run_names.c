// SPDX-License-Identifier: Apache-2.0
/*
 * End to end, names where numbers are printed and wall-clock time (issue 15, lang-a): the
 * real `weft run` against the real kernel over wl_names, which makes a known number of
 * system calls, signals, failing opens and TCP connections once weft is attached.
 *
 *  - syscount by name: raw_syscalls:sys_enter of the workload grouped by sysname(args.id):
 *    exactly 37 getppid, 23 getuid and 10 kill rows, keyed by name in JSON and in text;
 *  - killsnoop's names: signal:signal_generate grouped by signame(args.sig): exactly 5
 *    SIGUSR1, 3 SIGUSR2, 2 SIGWINCH, and the SIGCHLD its exit sends its parent;
 *  - errname(retval) of failed openat spans: exactly 7 ENOENT, 4 ENOTDIR, 3 EISDIR;
 *  - enumname(args.newstate, 'TCP_ESTABLISHED') of sock:inet_sock_set_state on the workload's
 *    port: exactly 1 TCP_LISTEN, 4 TCP_SYN_SENT, 4 TCP_SYN_RECV, 8 TCP_ESTABLISHED;
 *  - strings that fill their buffer exactly: task:task_rename grouped by args.newcomm (an
 *    inline char[16] of the tracepoint) and curtask.comm (a char[16] of the kernel's struct,
 *    the old name then): exactly 6 renames to the 15-character "wl-fifteen-char" and 4 to
 *    "wl-short", each pair of names as often as it happened, and no string noted as cut
 *    (string_truncated 0: a 15-character comm is whole);
 *  - walltime: each of the 37 getppid calls has a walltime (JSON: ns since the epoch) between
 *    the wall clock read before the workload was released and after it ended; in text, the
 *    same calls print RFC 3339 times (…T…Z, nanoseconds) within the same bounds, and
 *    unit(duration, 1us) prints a number of microseconds with "us" after it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "run_util.h"
#include "tests/skip.h"

struct names_run {
	struct wr_proc p;
	struct wr_json j;
	int64_t t0, t1; /* CLOCK_REALTIME ns before the release and after the workload's end */
	int port;
};

static int64_t realtime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Runs `weft run --format FMT QUERY` (the one %d in QUERY: the workload's pid, or with
 * by_port its TCP port, twice). */
static void run_names(struct names_run *r, const char *fmt, const char *query_fmt, bool by_port)
{
	char *argv[] = { (char *)wr_workload("wl_names"), NULL };
	char query[1024], line[64];
	struct wr_proc wl;
	int rc;

	memset(r, 0, sizeof(*r));
	assert_int_equal(wr_workload_start(&wl, argv), 0);
	assert_int_equal(wr_wait_out(&wl, "port ", 10000), 0);
	for (uint64_t end = wr_now_ms() + 10000; !strchr(strstr(wl.out.p, "port "), '\n');)
		if (wr_now_ms() > end || !wr_pump(&wl, 100))
			fail_msg("wl_names printed no port");
	assert_true(wr_cut_line(&wl.out, "port ", line, sizeof(line)));
	r->port = atoi(line + 5);
	if (by_port)
		snprintf(query, sizeof(query), query_fmt, r->port, r->port);
	else
		snprintf(query, sizeof(query), query_fmt, (int)wl.pid);
	assert_int_equal(wr_weft_start(&r->p, "--format", fmt, query, NULL), 0);
	rc = wr_wait_err(&r->p, "attached", WR_TIMEOUT_MS);
	if (rc)
		wr_dump(&r->p, query);
	assert_int_equal(rc, 0);
	r->t0 = realtime_ns();
	assert_int_equal(write(wl.in_fd, "g", 1), 1);
	rc = wr_finish(&wl, WR_TIMEOUT_MS);
	if (rc)
		wr_dump(&wl, "wl_names");
	assert_int_equal(rc, 0);
	r->t1 = realtime_ns();
	assert_non_null(strstr(wl.out.p, "wl_names: done"));
	assert_int_equal(kill(r->p.pid, SIGINT), 0);
	rc = wr_finish(&r->p, WR_TIMEOUT_MS);
	if (rc)
		wr_dump(&r->p, query);
	assert_int_equal(rc, 0);
	if (strcmp(fmt, "json") == 0)
		wr_json_lines(&r->p.out, &r->j);
	wr_free(&wl);
}

static void names_free(struct names_run *r)
{
	if (r->j.n)
		wr_json_free(&r->j);
	wr_free(&r->p);
}

/* The integer column `col` of the row whose text column `key` is `name` (0: no such row). */
static long long count_of(const struct wj *w, const char *key, const char *name, const char *col)
{
	for (size_t i = 0; i < wr_nrows(w); i++) {
		const struct wj *row = wr_row(w, i);
		const char *k = wj_str(wj_get(row, key));

		if (k && strcmp(k, name) == 0)
			return wj_int_of(row, col);
	}
	return 0;
}

static void expect(const struct wj *w, const char *key, const char *name, long long want)
{
	long long n = count_of(w, key, name, "n");

	printf("# %s = %s: %lld\n", key, name, n);
	assert_int_equal(n, want);
}

static void test_syscount_by_name(void **state)
{
	struct names_run r;
	const struct wj *w;

	(void)state;
	run_names(&r, "json",
		  "from tp:raw_syscalls:sys_enter where pid = %d group by sysname(args.id) as sc "
		  "select count() as n",
		  false);
	w = wr_one_window(&r.j);
	expect(w, "sc", "getppid", 37);
	expect(w, "sc", "getuid", 23);
	expect(w, "sc", "kill", 10);
	names_free(&r);

	/* text: the same names in the first column */
	run_names(&r, "text",
		  "from tp:raw_syscalls:sys_enter where pid = %d group by sysname(args.id) as sc "
		  "select count() as n",
		  false);
	assert_non_null(strstr(r.p.out.p, "\ngetppid "));
	assert_non_null(strstr(r.p.out.p, "\ngetuid "));
	names_free(&r);
}

static void test_signals_by_name(void **state)
{
	struct names_run r;
	const struct wj *w;

	(void)state;
	run_names(&r, "json",
		  "from tp:signal:signal_generate where pid = %d group by signame(args.sig) as sig "
		  "select count() as n",
		  false);
	w = wr_one_window(&r.j);
	expect(w, "sig", "SIGUSR1", 5);
	expect(w, "sig", "SIGUSR2", 3);
	expect(w, "sig", "SIGWINCH", 2);
	/* and its exit signals its parent (this test), in its own context */
	expect(w, "sig", "SIGCHLD", 1);
	assert_int_equal(wr_nrows(w), 4);
	names_free(&r);
}

static void test_errnos_by_name(void **state)
{
	struct names_run r;
	const struct wj *w;

	(void)state;
	run_names(&r, "json",
		  "from span(syscall:openat) where pid = %d and retval < 0 "
		  "group by errname(retval) as err select count() as n",
		  false);
	w = wr_one_window(&r.j);
	expect(w, "err", "ENOENT", 7);
	expect(w, "err", "ENOTDIR", 4);
	expect(w, "err", "EISDIR", 3);
	assert_int_equal(wr_nrows(w), 3);
	names_free(&r);
}

static void test_tcp_states_by_name(void **state)
{
	struct names_run r;
	const struct wj *w;

	(void)state;
	run_names(&r, "json",
		  "from tp:sock:inet_sock_set_state where args.protocol = 6 and "
		  "(args.sport = %d or args.dport = %d) "
		  "group by enumname(args.newstate, 'TCP_ESTABLISHED') as state "
		  "select count() as n",
		  true);
	w = wr_one_window(&r.j);
	expect(w, "state", "TCP_LISTEN", 1);
	expect(w, "state", "TCP_SYN_SENT", 4);
	expect(w, "state", "TCP_SYN_RECV", 4);
	expect(w, "state", "TCP_ESTABLISHED", 8);
	names_free(&r);
}

/* The note string_truncated of a window (-1: none). */
static long long truncated(const struct wj *w)
{
	const struct wj *notes = wj_get(w, "notes");

	return notes ? wj_int_of(notes, "string_truncated") : -1;
}

/* The count of the row whose columns name and old are these (0: no such row). */
static long long renames(const struct wj *w, const char *name, const char *old)
{
	for (size_t i = 0; i < wr_nrows(w); i++) {
		const struct wj *row = wr_row(w, i);
		const char *n = wj_str(wj_get(row, "name")), *o = wj_str(wj_get(row, "old"));

		if (n && o && strcmp(n, name) == 0 && strcmp(o, old) == 0)
			return wj_int_of(row, "n");
	}
	return 0;
}

static void test_full_strings_not_cut(void **state)
{
	struct names_run r;
	const struct wj *w;

	(void)state;
	run_names(&r, "json",
		  "from tp:task:task_rename where pid = %d group by args.newcomm as name, "
		  "curtask.comm as old select count() as n",
		  false);
	w = wr_one_window(&r.j);
	/* the tracepoint fires before the task takes its new name: curtask.comm is the old */
	assert_int_equal(renames(w, "wl-fifteen-char", "wl_names"), 1);
	assert_int_equal(renames(w, "wl-fifteen-char", "wl-fifteen-char"), 5);
	assert_int_equal(renames(w, "wl-short", "wl-fifteen-char"), 1);
	assert_int_equal(renames(w, "wl-short", "wl-short"), 3);
	assert_int_equal(wr_nrows(w), 4);
	assert_int_equal(truncated(w), 0);
	names_free(&r);
}

static void test_walltime_and_units(void **state)
{
	struct names_run r;
	size_t rows = 0;
	const char *s;

	(void)state;
	run_names(&r, "json",
		  "from span(syscall:getppid) where pid = %d select walltime as wt, "
		  "unit(duration, 1us) as d",
		  false);
	for (size_t i = 0; i < r.j.n; i++) {
		const struct wj *v = r.j.v[i], *wt = wj_get(v, "wt"), *d = wj_get(v, "d");

		if (!wr_is_type(v, "row"))
			continue;
		rows++;
		assert_non_null(wt);
		assert_true(wt->is_int);
		if (wt->ival < r.t0 || wt->ival > r.t1)
			fail_msg("walltime %lld outside [%lld, %lld]", wt->ival, (long long)r.t0,
				 (long long)r.t1);
		assert_non_null(d);
		assert_true(d->kind == WJ_NUM && d->num > 0 && d->num < 1e6);
	}
	assert_int_equal(rows, 37);
	names_free(&r);

	/* text: RFC 3339 with nanoseconds in UTC, within the same bounds; durations in us */
	run_names(&r, "text",
		  "from span(syscall:getppid) where pid = %d select walltime as wt, "
		  "unit(duration, 1us) as d",
		  false);
	rows = 0;
	for (s = r.p.out.p; (s = strstr(s, "Z ")) != NULL; s++) {
		const char *start = s - 29; /* 2026-11-26T09:52:30.123456789Z */
		struct tm tm = { 0 };
		char *end;
		int64_t ns;

		assert_true(start >= r.p.out.p);
		end = strptime(start, "%Y-%m-%dT%H:%M:%S", &tm);
		assert_non_null(end);
		assert_int_equal(*end, '.');
		ns = (int64_t)timegm(&tm) * 1000000000LL + strtoll(end + 1, NULL, 10);
		if (ns < r.t0 || ns > r.t1)
			fail_msg("text walltime %.30s outside the run", start);
		assert_non_null(strstr(s, "us\n"));
		rows++;
	}
	assert_int_equal(rows, 37);
	names_free(&r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_syscount_by_name),
		cmocka_unit_test(test_signals_by_name),
		cmocka_unit_test(test_errnos_by_name),
		cmocka_unit_test(test_tcp_states_by_name),
		cmocka_unit_test(test_full_strings_not_cut),
		cmocka_unit_test(test_walltime_and_units),
	};

	if (!wr_ready())
		return WT_SKIP;
	return wt_status(cmocka_run_group_tests(tests, NULL, NULL));
}
