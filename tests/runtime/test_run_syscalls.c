// SPDX-License-Identifier: Apache-2.0
/*
 * End to end, system calls: the real `weft run --format json -c 'wl_syscalls N T'` against
 * the real kernel, with counts asserted exactly.  wl_syscalls makes exactly N getppid() calls
 * on T threads running flat out (both CPUs busy), so these show that nothing is lost or
 * counted twice when windows flip under load (`every 100ms`: the sum over all windows is N),
 * that groups are right across flips (`group by tid`: each thread's n_k), that a tracepoint
 * with a predicate on its fields counts the same calls (raw_syscalls:sys_enter where
 * args.id = SYS_getppid), and that syscall spans pair every enter with its exit and carry the
 * return value (getppid() in a -c child returns weft's pid).  And classic tracepoints across
 * kernels: a query compiled against a made-up kernel's format ($WEFT_TRACEFS) runs where the
 * fields it reads lie where they lie here, and is refused before loading where one lies
 * elsewhere or is missing (the agent's check of the manifest's `tpfield` lines).
 *
 * Not covered: raw_syscalls:sys_enter's args.args[6] (the workload's sequence numbers) —
 * weft reports array fields as "not usable" and the language has no indexing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <sys/stat.h>
#include <sys/syscall.h>
#include "run_util.h"
#include "tests/slurp.h"
#include "tests/skip.h"

#define N_CALLS 2000000
#define N_THREADS 2

/* -c 'wl_syscalls n t', the path quoted as weft splits words like a shell */
static const char *wl_cmd(long n, int t)
{
	static char cmd[PATH_MAX + 64];

	snprintf(cmd, sizeof(cmd), "'%s' %ld %d", wr_workload("wl_syscalls"), n, t);
	return cmd;
}

/* The workload's pid: the first line of the shared stdout that is not weft's JSON. */
static long wl_pid_of(const struct wr_proc *p)
{
	for (const char *s = p->out.p; s && *s;) {
		const char *nl = strchr(s, '\n');

		if (*s != '{')
			return atol(s);
		if (!nl)
			break;
		s = nl + 1;
	}
	fail_msg("the workload did not print its pid");
	return -1;
}

/* Windows must flip while the workload runs flat out, else nothing here is tested. */
static void assert_busy_windows(const struct wr_json *j, const char *col, size_t min_busy)
{
	size_t busy = 0;

	for (size_t i = 0; i < j->n; i++) {
		long long n = 0;

		if (!wr_is_type(j->v[i], "window"))
			continue;
		for (size_t r = 0; r < wr_nrows(j->v[i]); r++)
			n += wj_int_of(wr_row(j->v[i], r), col);
		busy += n > 0;
	}
	if (busy < min_busy)
		fail_msg("only %zu windows saw events: the flips were not under load", busy);
}

/* Sum of n over every window == N: no event lost or counted twice at a flip. */
static void test_count_every_100ms(void **state)
{
	struct wr_proc p;
	struct wr_json j;
	int rc;

	(void)state;
	rc = wr_weft_run(&p, "--format", "json", "-c", wl_cmd(N_CALLS, N_THREADS),
			 "from syscall:getppid select count() as n every 100ms");
	if (rc != 0)
		wr_dump(&p, "weft run");
	assert_int_equal(rc, 0);
	wr_json_lines(&p.out, &j);
	wr_check_windows(&j);
	assert_busy_windows(&j, "n", 2);
	assert_int_equal(wr_sum_col(&j, "n", NULL, 0), N_CALLS);
	wr_json_free(&j);
	wr_free(&p);
}

/*
 * Every window has at most one row per thread; summed over the windows, each of the two
 * worker threads made exactly N / 2 calls, and no other thread (the main one) made any.
 */
static void assert_per_thread(const struct wr_json *j, long wl_pid, long long per_thread)
{
	long long tids[2] = { 0, 0 };

	for (size_t i = 0; i < j->n; i++) {
		if (!wr_is_type(j->v[i], "window"))
			continue;
		for (size_t r = 0; r < wr_nrows(j->v[i]); r++) {
			long long tid = wj_int_of(wr_row(j->v[i], r), "tid");

			if (tid == tids[0] || tid == tids[1])
				continue;
			if (tids[1])
				fail_msg("a third thread %lld made calls", tid);
			tids[tids[0] ? 1 : 0] = tid;
		}
	}
	assert_true(tids[0] > 0 && tids[1] > 0);
	assert_true(tids[0] != wl_pid && tids[1] != wl_pid);
	assert_int_equal(wr_sum_col(j, "n", "tid", tids[0]), per_thread);
	assert_int_equal(wr_sum_col(j, "n", "tid", tids[1]), per_thread);
}

static void test_group_by_tid_every_100ms(void **state)
{
	struct wr_proc p;
	struct wr_json j;
	int rc;

	(void)state;
	rc = wr_weft_run(&p, "--format", "json", "-c", wl_cmd(N_CALLS, N_THREADS),
			 "from syscall:getppid group by tid select count() as n every 100ms");
	if (rc != 0)
		wr_dump(&p, "weft run");
	assert_int_equal(rc, 0);
	wr_json_lines(&p.out, &j);
	wr_check_windows(&j);
	assert_busy_windows(&j, "n", 2);
	assert_per_thread(&j, wl_pid_of(&p), N_CALLS / N_THREADS);
	wr_json_free(&j);
	wr_free(&p);
}

/* The same calls through raw_syscalls:sys_enter and a predicate on its id field. */
static void test_raw_sys_enter_where_id(void **state)
{
	char query[256];
	struct wr_proc p;
	struct wr_json j;
	int rc;

	(void)state;
	snprintf(query, sizeof(query),
		 "from tracepoint:raw_syscalls:sys_enter where args.id = %d "
		 "group by tid select count() as n every 100ms",
		 (int)SYS_getppid);
	rc = wr_weft_run(&p, "--format", "json", "-c", wl_cmd(N_CALLS / 2, N_THREADS), query);
	if (rc != 0)
		wr_dump(&p, "weft run");
	assert_int_equal(rc, 0);
	wr_json_lines(&p.out, &j);
	wr_check_windows(&j);
	assert_int_equal(wr_sum_col(&j, "n", NULL, 0), N_CALLS / 2);
	assert_per_thread(&j, wl_pid_of(&p), N_CALLS / 2 / N_THREADS);
	wr_json_free(&j);
	wr_free(&p);
}

/*
 * span(syscall:getppid): every enter paired with its exit, none unmatched; the duration is
 * positive; the return value is the caller's parent, which for a -c child is weft itself.
 */
static void test_span_getppid(void **state)
{
	const long n = 200000;
	const struct wj *w, *row, *notes;
	struct wr_proc p;
	struct wr_json j;
	int rc;

	(void)state;
	rc = wr_weft_run(&p, "--format", "json", "-c", wl_cmd(n, N_THREADS),
			 "from span(syscall:getppid) select count() as n, min(duration) as dmin, "
			 "min(retval) as rmin, max(retval) as rmax");
	if (rc != 0)
		wr_dump(&p, "weft run");
	assert_int_equal(rc, 0);
	wr_json_lines(&p.out, &j);
	w = wr_one_window(&j);
	row = wr_row(w, 0);
	assert_int_equal(wj_int_of(row, "n"), n);
	assert_true(wj_int_of(row, "dmin") > 0);
	assert_int_equal(wj_int_of(row, "rmin"), p.pid);
	assert_int_equal(wj_int_of(row, "rmax"), p.pid);
	notes = wj_get(w, "notes");
	assert_int_equal(wj_int_of(notes, "span_end_without_start"), 0);
	wr_json_free(&j);
	wr_free(&p);
}

/*
 * Classic tracepoints across kernels: the compiler reads a record's field offsets from the
 * tracepoint's format (here $WEFT_TRACEFS, a made-up kernel's copy of raw_syscalls:sys_enter
 * with one line replaced by `to`), the manifest carries the fields a program reads, and the
 * agent checks them against its own kernel's format before loading.  Runs `weft run` with
 * the made-up format; returns its exit status, p kept for the caller.
 */
static int run_fake_format(struct wr_proc *p, const char *from, const char *to, const char *query)
{
	char dir[] = "/tmp/weft-test-tpf-XXXXXX", path[PATH_MAX];
	char *fmt, *at, *text;
	FILE *f;
	int rc;

	assert_non_null(mkdtemp(dir));
	fmt = test_slurp("/sys/kernel/tracing/events/raw_syscalls/sys_enter/format");
	at = from ? strstr(fmt, from) : NULL;
	if (from && !at)
		fail_msg("this kernel's raw_syscalls:sys_enter has no line '%s':\n%s", from, fmt);
	assert_non_null(text = malloc(strlen(fmt) + (to ? strlen(to) : 0) + 1));
	if (at)
		sprintf(text, "%.*s%s%s", (int)(at - fmt), fmt, to, at + strlen(from));
	else
		strcpy(text, fmt);
	snprintf(path, sizeof(path), "%s/events", dir);
	assert_int_equal(mkdir(path, 0700), 0);
	strcat(path, "/raw_syscalls");
	assert_int_equal(mkdir(path, 0700), 0);
	strcat(path, "/sys_enter");
	assert_int_equal(mkdir(path, 0700), 0);
	strcat(path, "/format");
	assert_non_null(f = fopen(path, "w"));
	fputs(text, f);
	assert_int_equal(fclose(f), 0);
	free(text);
	free(fmt);
	assert_int_equal(setenv("WEFT_TRACEFS", dir, 1), 0);
	rc = wr_weft_run(p, "--format", "json", "-c", wl_cmd(100000, N_THREADS), query);
	assert_int_equal(unsetenv("WEFT_TRACEFS"), 0);
	assert_int_equal(wr_rm_rf(dir), 0);
	return rc;
}

#define Q_ID "from tracepoint:raw_syscalls:sys_enter where args.id = %d select count() as n"
#define LINE_ID "\tfield:long id;\toffset:8;\tsize:8;\tsigned:1;\n"
#define LINE_ARGS "\tfield:unsigned long args[6];\toffset:16;\tsize:48;\tsigned:0;\n"

/* The count of a run that must succeed: exactly the workload's calls. */
static void assert_counted(struct wr_proc *p, int rc, long n)
{
	struct wr_json j;

	if (rc != 0)
		wr_dump(p, "weft run");
	assert_int_equal(rc, 0);
	wr_json_lines(&p->out, &j);
	assert_int_equal(wr_sum_col(&j, "n", NULL, 0), n);
	wr_json_free(&j);
	wr_free(p);
}

/* The same format as this kernel's, and one where only a field the query does not read
 * moved: both run and count every call (the check refuses only what the programs read). */
static void test_tp_layout_same(void **state)
{
	char query[256];
	struct wr_proc p;

	(void)state;
	snprintf(query, sizeof(query), Q_ID, (int)SYS_getppid);
	assert_counted(&p, run_fake_format(&p, NULL, NULL, query), 100000);
	assert_counted(&p,
		       run_fake_format(&p, LINE_ARGS,
				       "\tfield:unsigned long args[6];\toffset:24;\tsize:48;"
				       "\tsigned:0;\n",
				       query),
		       100000);
}

/* A field the query reads lies elsewhere on the kernel compiled for: refused before load,
 * both offsets said (never read at the wrong bytes: the verifier would take it). */
static void test_tp_layout_moved(void **state)
{
	char query[256];
	struct wr_proc p;
	int rc;

	(void)state;
	snprintf(query, sizeof(query), Q_ID, (int)SYS_getppid);
	rc = run_fake_format(&p, LINE_ID, "\tfield:long id;\toffset:16;\tsize:8;\tsigned:1;\n",
			     query);
	if (rc == 0 || !strstr(p.err.p, "compiled where tracepoint raw_syscalls:sys_enter has "
					"field id at offset 16 (8 bytes, signed); this kernel's "
					"has it at offset 8 (8 bytes, signed)"))
		wr_dump(&p, "weft run");
	assert_int_not_equal(rc, 0);
	assert_non_null(strstr(p.err.p, "field id at offset 16 (8 bytes, signed); this kernel's "
					"has it at offset 8 (8 bytes, signed)"));
	assert_non_null(strstr(p.err.p, "agents do not compile"));
	assert_null(strstr(p.err.p, "verifier"));
	assert_null(strstr(p.out.p, "\"n\""));
	wr_free(&p);
}

/* A field the query reads that this kernel's tracepoint lacks: refused, named. */
static void test_tp_layout_missing(void **state)
{
	struct wr_proc p;
	int rc;

	(void)state;
	rc = run_fake_format(&p, LINE_ARGS,
			     LINE_ARGS "\tfield:long extra;\toffset:64;\tsize:8;\tsigned:1;\n",
			     "from tracepoint:raw_syscalls:sys_enter where args.extra = 1 "
			     "select count() as n");
	if (rc == 0 || !strstr(p.err.p, "reads field extra of tracepoint raw_syscalls:sys_enter, "
					"which this kernel's tracepoint does not have"))
		wr_dump(&p, "weft run");
	assert_int_not_equal(rc, 0);
	assert_non_null(strstr(p.err.p, "reads field extra of tracepoint raw_syscalls:sys_enter, "
					"which this kernel's tracepoint does not have"));
	wr_free(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_count_every_100ms),
		cmocka_unit_test(test_group_by_tid_every_100ms),
		cmocka_unit_test(test_raw_sys_enter_where_id),
		cmocka_unit_test(test_span_getppid),
		cmocka_unit_test(test_tp_layout_same),
		cmocka_unit_test(test_tp_layout_moved),
		cmocka_unit_test(test_tp_layout_missing),
	};

	if (!wr_ready())
		return WT_SKIP;
	return wt_status(cmocka_run_group_tests(tests, NULL, NULL));
}
