// SPDX-License-Identifier: Apache-2.0
/*
 * End to end, errors: the real `weft run` exits with the documented status and names the
 * error by its stable tag.  A query with an error exits 3 with `[TAG]` and its place
 * (`query:LINE:COL`) on stderr and prints nothing on stdout; a bad command line exits 2.
 * Every query carries `for 1s`, so that if weft wrongly accepted one it would end on its own
 * (and fail the status check) rather than run until the harness kills it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <sys/stat.h>
#include "run_util.h"
#include "tests/skip.h"

#define ERR_TIMEOUT_MS 20000

/* Runs `weft run ARGS...` and checks its status, that stderr holds `want` and stdout is
 * empty. */
static void expect(int status, const char *want, char *const args[])
{
	char *argv[WR_MAX_ARGS] = { getenv("WEFT_BIN"), (char *)"run" };
	struct wr_proc p;
	int n = 2, rc;

	for (int i = 0; args[i] && n < WR_MAX_ARGS - 1; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	assert_int_equal(wr_start(&p, argv), 0);
	rc = wr_finish(&p, ERR_TIMEOUT_MS);
	if (rc != status || !strstr(p.err.p, want) || p.out.len != 0) {
		wr_dump(&p, "weft run");
		fail_msg("status %d (%d expected), stderr %s '%s'", rc, status,
			 strstr(p.err.p, want) ? "has" : "lacks", want);
	}
	if (status == 3 && !strstr(p.err.p, "query:1:"))
		fail_msg("the error does not name its place: %s", p.err.p);
	wr_free(&p);
}

#define EXPECT(status, want, ...) expect((status), (want), (char *const[]){ __VA_ARGS__, NULL })

static void test_query_errors(void **state)
{
	(void)state;
	EXPECT(3, "[E_PROBE_UNKNOWN]", (char *)"from syscall:getppidx select count() for 1s");
	EXPECT(3, "[E_FIELD_UNKNOWN]", (char *)"from syscall:read select sum(args.nope) for 1s");
	EXPECT(3, "[E_AGG_IN_WHERE]",
	       (char *)"from syscall:getppid where count() > 1 select count() for 1s");
	EXPECT(3, "[E_QUANTILE_RANGE]",
	       (char *)"from syscall:read select quantile(args.count, 1.5) for 1s");
	EXPECT(3, "[E_PROBE_BINARY]",
	       (char *)"from uprobe:/nonexistent/weft-test-bin:main select count() for 1s");
	/* the same with --format json: errors are never JSON on stdout */
	EXPECT(3, "[E_PROBE_UNKNOWN]", (char *)"--format", (char *)"json",
	       (char *)"from syscall:getppidx select count() for 1s");
}

/* This kernel has no kprobes (the brief's machine): the query is refused, naming the fix. */
static void test_kprobe_refused(void **state)
{
	struct stat st;

	(void)state;
	if (stat("/sys/bus/event_source/devices/kprobe", &st) == 0)
		wt_skip("test_kprobe_refused: this kernel has kprobes");
	EXPECT(3, "[E_PROBE_FEATURE]", (char *)"from kprobe:do_sys_open select count() for 1s");
}

static void test_usage_errors(void **state)
{
	char pid[32];
	int p;

	(void)state;
	for (p = 999999; kill(p, 0) == 0 || errno != ESRCH; p++)
		; /* a pid no process has */
	snprintf(pid, sizeof(pid), "%d", p);
	EXPECT(2, pid, (char *)"-p", pid, (char *)"from syscall:getppid select count() for 1s");
	EXPECT(2, "xml", (char *)"--format", (char *)"xml",
	       (char *)"from syscall:getppid select count() for 1s");
	EXPECT(2, "-p", (char *)"-p", (char *)"1", (char *)"-c", (char *)"true",
	       (char *)"from syscall:getppid select count() for 1s");
	EXPECT(2, "", (char *)"--no-such-option", (char *)"from syscall:getppid select count()");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_query_errors),
		cmocka_unit_test(test_kprobe_refused),
		cmocka_unit_test(test_usage_errors),
	};

	if (!wr_ready())
		return WT_SKIP;
	return wt_status(cmocka_run_group_tests(tests, NULL, NULL));
}
