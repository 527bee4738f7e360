// SPDX-License-Identifier: Apache-2.0
/*
 * End to end, streams (a select without aggregates: one JSON row per event through the ring
 * buffer).  N known events give exactly N rows, or rows + the reported loss = N:
 *  - usdt weft_test:tick of `wl_usdt 2000` gives 2000 rows whose arg0 are 0..1999, each once,
 *    and no loss is reported;
 *  - forced loss: weft has no option to shrink its ring buffer, so the test makes the reader
 *    slow instead.  It does not read weft's stdout while wl_syscalls makes 1,000,000 getppid()
 *    calls: weft blocks writing rows into the full pipe, the ring buffer fills, and the kernel
 *    counts every row it cannot reserve (ringbuf_full).  Afterwards the rows printed plus the
 *    loss weft reports on stderr ("lost: K rows (ringbuf_full)") must be exactly 1,000,000,
 *    with both parts non-zero.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "run_util.h"
#include "tests/skip.h"

#define N_TICKS 2000
#define N_FLOOD 1000000

/* K of "lost: K rows (REASON)" on weft's stderr; 0 if there is no such line. */
static long long reported_loss(const struct wr_proc *p, const char *reason)
{
	char tail[64];
	const char *s = p->err.p;

	snprintf(tail, sizeof(tail), " rows (%s)", reason);
	while ((s = strstr(s, "lost: ")) != NULL) {
		char *end;
		long long k = strtoll(s + 6, &end, 10);

		/* the total, not a live "... in the last second" line */
		if (strncmp(end, tail, strlen(tail)) == 0 && end[strlen(tail)] == '\n')
			return k;
		s += 6;
	}
	return 0;
}

static void test_usdt_rows_exact(void **state)
{
	char cmd[PATH_MAX + 32], query[PATH_MAX + 128], line[256];
	unsigned char seen[N_TICKS] = { 0 };
	struct wr_proc p;
	struct wr_json j;
	size_t rows = 0;
	int rc;

	(void)state;
	snprintf(cmd, sizeof(cmd), "'%s' %d", wr_workload("wl_usdt"), N_TICKS);
	snprintf(query, sizeof(query), "from usdt:%s:weft_test:tick select arg0",
		 wr_workload("wl_usdt"));
	rc = wr_weft_run(&p, "--format", "json", "-c", cmd, query);
	if (rc != 0)
		wr_dump(&p, "weft run");
	assert_int_equal(rc, 0);
	assert_true(wr_cut_line(&p.out, "wl_usdt: ", line, sizeof(line)));
	wr_json_lines(&p.out, &j);
	/* the last line sums the stream up: every row, nothing lost */
	assert_true(j.n > 0 && wr_is_type(j.v[j.n - 1], "end"));
	assert_int_equal(wj_int_of(j.v[j.n - 1], "rows"), N_TICKS);
	assert_int_equal(wj_int_of(wj_get(j.v[j.n - 1], "lost"), "ringbuf_full"), 0);
	for (size_t i = 0; i + 1 < j.n; i++) {
		const struct wj *row = j.v[i];
		long long v;

		assert_true(wr_is_type(row, "row"));
		assert_int_equal(row->nkids, 2); /* "type" and arg0: nothing else */
		v = wj_int_of(row, "arg0");
		if (v < 0 || v >= N_TICKS || seen[v])
			fail_msg("row %zu: arg0 %lld is out of range or seen twice", i, v);
		seen[v] = 1;
		rows++;
	}
	assert_int_equal(rows, N_TICKS);
	assert_null(strstr(p.err.p, "lost:"));
	wr_json_free(&j);
	wr_free(&p);
}

static void test_forced_loss_counted(void **state)
{
	char n[32], pid[32];
	char *wl_argv[] = { (char *)wr_workload("wl_syscalls"), n, (char *)"2", (char *)"wait",
			    NULL };
	struct wr_proc wl, p;
	struct wr_json j;
	long long rows = 0, lost;
	int rc;

	(void)state;
	snprintf(n, sizeof(n), "%d", N_FLOOD);
	assert_int_equal(wr_workload_start(&wl, wl_argv), 0);
	snprintf(pid, sizeof(pid), "%d", (int)wl.pid);
	assert_int_equal(wr_weft_start(&p, "--format", "json", "-p", pid,
				       "from syscall:getppid select tid", NULL),
			 0);
	rc = wr_wait_err(&p, "attached", WR_TIMEOUT_MS);
	if (rc)
		wr_dump(&p, "weft run");
	assert_int_equal(rc, 0);

	/* release the workload and let it finish without reading a byte of weft's stdout */
	assert_int_equal(write(wl.in_fd, "g", 1), 1);
	assert_int_equal(wr_finish(&wl, WR_TIMEOUT_MS), 0);

	rc = wr_finish(&p, WR_TIMEOUT_MS); /* weft stops by itself: -p exited */
	if (rc != 0)
		wr_dump(&p, "weft run");
	assert_int_equal(rc, 0);
	wr_json_lines(&p.out, &j);
	assert_true(j.n > 0 && wr_is_type(j.v[j.n - 1], "end"));
	for (size_t i = 0; i + 1 < j.n; i++) {
		assert_true(wr_is_type(j.v[i], "row"));
		assert_true(wj_int_of(j.v[i], "tid") != wl.pid); /* a worker thread */
		rows++;
	}
	/* the JSON summary and the last line on stderr agree on the loss */
	lost = wj_int_of(wj_get(j.v[j.n - 1], "lost"), "ringbuf_full");
	assert_int_equal(wj_int_of(j.v[j.n - 1], "rows"), rows);
	assert_int_equal(reported_loss(&p, "ringbuf_full"), lost);
	fprintf(stderr, "rows %lld + lost %lld\n", rows, lost);
	assert_true(rows > 0);
	assert_true(lost > 0); /* else the ring buffer never filled: nothing was tested */
	assert_int_equal(rows + lost, N_FLOOD);
	wr_json_free(&j);
	wr_free(&p);
	wr_free(&wl);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_usdt_rows_exact),
		cmocka_unit_test(test_forced_loss_counted),
	};

	if (!wr_ready())
		return WT_SKIP;
	return wt_status(cmocka_run_group_tests(tests, NULL, NULL));
}
