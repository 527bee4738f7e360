// SPDX-License-Identifier: Apache-2.0
/*
 * End to end, network addresses, argument vectors and formatted rows (issue 15, part B): the
 * real `weft run` against the real kernel, then the workload wl_net (tests/workloads/wl_net.c)
 * run once weft has attached, then weft interrupted (SIGINT drains every event).  The tests
 * assert, exactly:
 *   - ntop() of tp:sock:inet_sock_set_state's u8[4] and u8[16] fields as group keys: per
 *     destination address and port, the connections that reached ESTABLISHED on the client
 *     side, for 127.0.0.1, 127.0.0.2 (a second loopback address) and ::1;
 *   - ntop() and sockport() of syscall:connect's sockaddr (user memory, v4 and v6): one group
 *     per address and port the workload connected to, with its count, and nothing else; the
 *     same from a span of connect(), which saves the address at the start for the end;
 *   - join() of execve's argv: the exact strings of known vectors (empty, one element, an
 *     empty element, a 300-byte element cut with its marker, 21 elements cut at 16);
 *   - `format`: a stream's text rows, exact lines (widths, '-', '0', precision, %%).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "run_util.h"
#include "tests/skip.h"

#define N4 5
#define N42 3
#define N6 4

struct wl_net {
	long pid, port4, port42, port6;
};

/*
 * Runs `weft run ARGS... QUERY` and, once it has attached, `wl_net WLARGS...`; then SIGINT to
 * weft.  The workload's stdout is copied into wl_out (its report line).
 */
static void run_traced(const char *fmt, const char *query, char *const wlargv[], struct wr_proc *p,
		       char *wl_out, size_t wl_sz)
{
	struct wr_proc wl;
	uint64_t end = wr_now_ms() + WR_TIMEOUT_MS;

	assert_int_equal(wr_weft_start(p, "--format", fmt, query, (char *)NULL), 0);
	if (wr_wait_err(p, "attached", WR_TIMEOUT_MS) != 0) {
		wr_finish(p, 1000);
		wr_dump(p, "weft run");
		fail_msg("weft did not attach");
	}
	assert_int_equal(wr_start(&wl, wlargv), 0);
	wr_close_stdin(&wl);
	while (wr_pump(&wl, 20) && wr_now_ms() < end)
		wr_pump(p, 0);
	if (wr_reap(&wl, end) != 0)
		wr_dump(&wl, "wl_net");
	assert_int_equal(wl.status, 0);
	if (!wr_cut_line(&wl.out, "wl_net ", wl_out, wl_sz))
		fail_msg("the workload did not report: %s", wl.out.p ? wl.out.p : "");
	wr_free(&wl);
	kill(p->pid, SIGINT);
	if (wr_finish(p, WR_TIMEOUT_MS) != 0) {
		wr_dump(p, "weft run");
		fail_msg("weft run failed");
	}
}

static void run_tcp(const char *fmt, const char *query, struct wr_proc *p, struct wl_net *w)
{
	char a4[16], a42[16], a6[16], line[256];
	char *argv[] = { (char *)wr_workload("wl_net"), "tcp", a4, a42, a6, NULL };

	snprintf(a4, sizeof(a4), "%d", N4);
	snprintf(a42, sizeof(a42), "%d", N42);
	snprintf(a6, sizeof(a6), "%d", N6);
	run_traced(fmt, query, argv, p, line, sizeof(line));
	if (sscanf(line, "wl_net pid %ld port4 %ld port42 %ld port6 %ld", &w->pid, &w->port4,
		   &w->port42, &w->port6) != 4)
		fail_msg("bad report: %s", line);
}

/* u8[4] and u8[16] tracepoint fields as group keys, next to the port they went to. */
static void test_tracepoint_address_keys(void **state)
{
	struct wr_proc p;
	struct wr_json j;
	struct wl_net w;
	long got4 = 0, got42 = 0, got6 = 0;

	(void)state;
	run_tcp("json",
		"from tp:sock:inet_sock_set_state where args.newstate = 1 and args.oldstate = 2 "
		"group by ntop(args.daddr) as d4, ntop(args.daddr_v6) as d6, args.dport as dport, "
		"args.family as family select count() as n",
		&p, &w);
	wr_json_lines(&p.out, &j);
	wr_check_windows(&j);
	for (size_t i = 0; i < j.n; i++) {
		if (!wr_is_type(j.v[i], "window"))
			continue;
		for (size_t r = 0; r < wr_nrows(j.v[i]); r++) {
			const struct wj *row = wr_row(j.v[i], r);
			const char *d4 = wj_str(wj_get(row, "d4")), *d6 = wj_str(wj_get(row, "d6"));
			long dport = (long)wj_int_of(row, "dport"), n = (long)wj_int_of(row, "n");

			assert_non_null(d4);
			assert_non_null(d6);
			if (dport == w.port4) {
				/* an IPv4 socket: the kernel maps its address into the v6 field */
				assert_string_equal(d4, "127.0.0.1");
				assert_string_equal(d6, "::ffff:127.0.0.1");
				assert_int_equal(wj_int_of(row, "family"), 2);
				got4 += n;
			} else if (dport == w.port42) {
				assert_string_equal(d4, "127.0.0.2");
				assert_string_equal(d6, "::ffff:127.0.0.2");
				got42 += n;
			} else if (dport == w.port6) {
				assert_string_equal(d6, "::1");
				assert_int_equal(wj_int_of(row, "family"), 10);
				got6 += n;
			}
		}
	}
	assert_int_equal(got4, N4);
	assert_int_equal(got42, N42);
	assert_int_equal(got6, N6);
	wr_json_free(&j);
	wr_free(&p);
}

/* connect()'s sockaddr in user memory: exactly the workload's three addresses and ports
 * (as a span, the address and port are read at the start and saved for the end). */
static void check_connects(const char *query)
{
	struct wr_proc p;
	struct wr_json j;
	struct wl_net w;
	const struct wj *win = NULL;
	int seen = 0;

	run_tcp("json", query, &p, &w);
	wr_json_lines(&p.out, &j);
	wr_check_windows(&j);
	for (size_t i = 0; i < j.n; i++)
		if (wr_is_type(j.v[i], "window") && wr_nrows(j.v[i]) > 0) {
			assert_null(win); /* every connect in one window (no `every`) */
			win = j.v[i];
		}
	assert_non_null(win);
	assert_int_equal(wr_nrows(win), 3);
	for (size_t r = 0; r < 3; r++) {
		const struct wj *row = wr_row(win, r);
		const char *addr = wj_str(wj_get(row, "addr"));
		long port = (long)wj_int_of(row, "port"), n = (long)wj_int_of(row, "n");

		assert_non_null(addr);
		if (strcmp(addr, "127.0.0.1") == 0) {
			assert_int_equal(port, w.port4);
			assert_int_equal(n, N4);
			seen |= 1;
		} else if (strcmp(addr, "127.0.0.2") == 0) {
			assert_int_equal(port, w.port42);
			assert_int_equal(n, N42);
			seen |= 2;
		} else if (strcmp(addr, "::1") == 0) {
			assert_int_equal(port, w.port6);
			assert_int_equal(n, N6);
			seen |= 4;
		} else {
			fail_msg("an unexpected address %s", addr);
		}
	}
	assert_int_equal(seen, 7);
	wr_json_free(&j);
	wr_free(&p);
}

static void test_connect_sockaddr(void **state)
{
	(void)state;
	check_connects("from syscall:connect where comm = 'wl_net' group by ntop(args.uservaddr) "
		       "as addr, sockport(args.uservaddr) as port select count() as n");
}

static void test_connect_span_saves_address(void **state)
{
	(void)state;
	check_connects("from span(syscall:connect) where comm = 'wl_net' and retval = 0 "
		       "group by ntop(args.uservaddr) as addr, sockport(args.uservaddr) as port "
		       "select count() as n");
}

/* A stream's `format`: the exact text lines, one per connect(), in the order made. */
static void test_format_rows(void **state)
{
	struct wr_proc p;
	struct wl_net w;
	char want[4096];
	size_t off = 0;

	(void)state;
	run_tcp("text",
		"from syscall:connect where comm = 'wl_net' "
		"select pid, ntop(args.uservaddr) as addr, sockport(args.uservaddr) as port, "
		"comm, args.addrlen as len "
		"format 'pid=%-8d|%16s|%06u|%.3s|%x|100%%'",
		&p, &w);
	for (int k = 0; k < 3; k++) {
		int n = k == 0 ? N4 : k == 1 ? N42 : N6;
		const char *addr = k == 0 ? "127.0.0.1" : k == 1 ? "127.0.0.2" : "::1";
		long port = k == 0 ? w.port4 : k == 1 ? w.port42 : w.port6;
		int len = k == 2 ? 28 : 16; /* sizeof(struct sockaddr_in6), (struct sockaddr_in) */

		for (int i = 0; i < n; i++)
			off += (size_t)snprintf(want + off, sizeof(want) - off,
						"pid=%-8ld|%16s|%06ld|wl_|%x|100%%\n", w.pid, addr,
						port, len);
	}
	if (!p.out.p || strcmp(p.out.p, want) != 0) {
		wr_dump(&p, "weft run");
		fail_msg("formatted rows differ; wanted:\n%s", want);
	}
	wr_free(&p);
}

/* execve's argv joined: the exact strings of the workload's vectors, in order. */
static void test_join_argv(void **state)
{
	char *argv[] = { (char *)wr_workload("wl_net"), "exec", NULL };
	char line[256], want_long[256], want_long_c[256], want_many[256], want_many_c[256];
	struct wr_proc p;
	struct wr_json j;
	size_t n = 0;

	(void)state;
	/* "/bin/true " + 300 x: cut at 255 bytes, whose last three are the marker */
	snprintf(want_long, sizeof(want_long), "/bin/true %.*s...", 242,
		 "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
		 "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
		 "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
		 "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx");
	snprintf(want_long_c, sizeof(want_long_c), "/bin/true,%s", want_long + 10);
	/* 21 elements: the first 16, then the separator and the marker */
	snprintf(want_many, sizeof(want_many), "/bin/true 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 ...");
	snprintf(want_many_c, sizeof(want_many_c),
		 "/bin/true,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,...");
	{
		const char *want[][2] = {
			{ "", "" },
			{ "/bin/true", "/bin/true" },
			{ "/bin/true a b c  d", "/bin/true,a,b c,,d" },
			{ want_long, want_long_c },
			{ want_many, want_many_c },
		};

		run_traced("json",
			   "from syscall:execve where comm = 'wl_net' "
			   "select join(args.argv) as a, join(args.argv, ',') as b",
			   argv, &p, line, sizeof(line));
		wr_json_lines(&p.out, &j);
		for (size_t i = 0; i < j.n; i++) {
			if (!wr_is_type(j.v[i], "row"))
				continue;
			if (n >= 5)
				fail_msg("more execve rows than the workload's 5");
			assert_string_equal(wj_str(wj_get(j.v[i], "a")), want[n][0]);
			assert_string_equal(wj_str(wj_get(j.v[i], "b")), want[n][1]);
			n++;
		}
	}
	assert_int_equal(n, 5);
	wr_json_free(&j);
	wr_free(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_tracepoint_address_keys),
		cmocka_unit_test(test_connect_sockaddr),
		cmocka_unit_test(test_connect_span_saves_address),
		cmocka_unit_test(test_format_rows),
		cmocka_unit_test(test_join_argv),
	};

	if (!wr_ready())
		return WT_SKIP;
	return wt_status(cmocka_run_group_tests(tests, NULL, NULL));
}
