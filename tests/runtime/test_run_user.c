// SPDX-License-Identifier: Apache-2.0
/*
 * End to end, user probes: the real `weft run --format json -c 'wl_usdt N'` against the real
 * kernel.  wl_usdt calls wl_work(i) for i = 0..N-1 (it returns 3i + 1), fires the USDT probe
 * weft_test:tick(i, sum) after each call (sum: the running total of wl_work's returns) and
 * weft_test:done once, then prints the final sum.  So every number below is known exactly:
 * counts N (and 1), sum(i) = N(N-1)/2, sum of returns = 3N(N-1)/2 + N = the printed sum,
 * max(tick's arg1) = the printed sum; quantiles of i are checked against the exact
 * nearest-rank value within the documented bound (docs/aggregates.md: |r - y| <= y/64, and
 * r = y when y < 32 or the rank is the first or the last), histograms bucket by bucket.
 * -c attaches before the workload's first instruction, so nothing is missed.
 *
 * Probe safety: uprobe:wl_work+N at an instruction boundary that objdump (not weft's decoder)
 * finds counts exactly, every offset inside an instruction is refused (E_PROBE_OFFSET_INSN,
 * placed on the offset) before anything runs, and so is a USDT note whose site is not a nop
 * (E_PROBE_USDT_SITE).  wl_usdt_sema, already running when weft attaches with -p, fires its
 * probe only while its semaphore is raised: weft must raise it and count every call.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <math.h>
#include <sys/stat.h>
#include "probes/elf.h"
#include "run_util.h"
#include "tests/skip.h"

#define N_CALLS 5000
#define N_QUANT 10000

static char wl_path[PATH_MAX];

static int setup(void **state)
{
	(void)state;
	if (getenv("WEFT_BINARY_DIR"))
		snprintf(wl_path, sizeof(wl_path), "%s", wr_workload("wl_usdt"));
	return 0;
}

static const char *wl_cmd(long n)
{
	static char cmd[PATH_MAX + 32];

	snprintf(cmd, sizeof(cmd), "'%s' %ld", wl_path, n);
	return cmd;
}

/* The query `tmpl` with its one "%W" replaced by the workload's path. */
static const char *query_of(const char *tmpl)
{
	static char q[PATH_MAX + 1024];
	const char *at = strstr(tmpl, "%W");

	assert_non_null(at);
	snprintf(q, sizeof(q), "%.*s%s%s", (int)(at - tmpl), tmpl, wl_path, at + 2);
	return q;
}

/* Runs a query over `wl_usdt n`; returns its only window; *printed_sum from the workload. */
static const struct wj *run_one(struct wr_proc *p, struct wr_json *j, long n, const char *query,
				long long *printed_sum)
{
	char line[256];
	const char *s;
	int rc;

	rc = wr_weft_run(p, "--format", "json", "-c", wl_cmd(n), query);
	if (rc != 0)
		wr_dump(p, query);
	assert_int_equal(rc, 0);
	assert_true(wr_cut_line(&p->out, "wl_usdt: ", line, sizeof(line)));
	s = strstr(line, " sum ");
	assert_non_null(s);
	if (printed_sum)
		*printed_sum = atoll(s + 5);
	wr_json_lines(&p->out, j);
	return wr_one_window(j);
}

static long long sum_i(long n)
{
	return (long long)n * (n - 1) / 2;
}

static long long sum_ret(long n)
{
	return 3 * sum_i(n) + n;
}

static void test_uprobe_count_sum(void **state)
{
	const struct wj *w;
	struct wr_proc p;
	struct wr_json j;
	long long printed;

	(void)state;
	w = run_one(&p, &j, N_CALLS,
		    query_of("from uprobe:%W:wl_work select count() as n, sum(arg0) as s"),
		    &printed);
	assert_int_equal(printed, sum_ret(N_CALLS)); /* the workload did what we think */
	assert_int_equal(wr_nrows(w), 1);
	assert_int_equal(wj_int_of(wr_row(w, 0), "n"), N_CALLS);
	assert_int_equal(wj_int_of(wr_row(w, 0), "s"), sum_i(N_CALLS));
	wr_json_free(&j);
	wr_free(&p);
}

static void test_uretprobe_retval(void **state)
{
	const struct wj *w;
	struct wr_proc p;
	struct wr_json j;
	long long printed;

	(void)state;
	w = run_one(&p, &j, N_CALLS,
		    query_of("from uretprobe:%W:wl_work select count() as n, sum(retval) as s, "
			     "min(retval) as lo, max(retval) as hi"),
		    &printed);
	assert_int_equal(wj_int_of(wr_row(w, 0), "n"), N_CALLS);
	assert_int_equal(wj_int_of(wr_row(w, 0), "s"), printed);
	assert_int_equal(wj_int_of(wr_row(w, 0), "lo"), 1);
	assert_int_equal(wj_int_of(wr_row(w, 0), "hi"), 3 * (N_CALLS - 1) + 1);
	wr_json_free(&j);
	wr_free(&p);
}

static void test_usdt_tick(void **state)
{
	const struct wj *w;
	struct wr_proc p;
	struct wr_json j;
	long long printed;

	(void)state;
	w = run_one(&p, &j, N_CALLS,
		    query_of("from usdt:%W:weft_test:tick select count() as n, sum(arg0) as s, "
			     "max(arg1) as last, min(arg1) as first"),
		    &printed);
	assert_int_equal(wj_int_of(wr_row(w, 0), "n"), N_CALLS);
	assert_int_equal(wj_int_of(wr_row(w, 0), "s"), sum_i(N_CALLS));
	assert_int_equal(wj_int_of(wr_row(w, 0), "last"), printed);
	assert_int_equal(wj_int_of(wr_row(w, 0), "first"), 1); /* tick(0, wl_work(0) = 1) */
	wr_json_free(&j);
	wr_free(&p);
}

/* A wildcard over the provider: one group per probe, named canonically. */
static void test_usdt_group_by_probe(void **state)
{
	char tick[PATH_MAX + 32], done[PATH_MAX + 32];
	const struct wj *w;
	struct wr_proc p;
	struct wr_json j;
	bool seen_tick = false, seen_done = false;

	(void)state;
	w = run_one(&p, &j, N_CALLS,
		    query_of("from usdt:%W:weft_test:* group by probe select count() as n"), NULL);
	snprintf(tick, sizeof(tick), "usdt:%s:weft_test:tick", wl_path);
	snprintf(done, sizeof(done), "usdt:%s:weft_test:done", wl_path);
	assert_int_equal(wr_nrows(w), 2);
	for (size_t r = 0; r < 2; r++) {
		const char *probe = wj_str(wj_get(wr_row(w, r), "probe"));

		assert_non_null(probe);
		if (strcmp(probe, tick) == 0) {
			seen_tick = true;
			assert_int_equal(wj_int_of(wr_row(w, r), "n"), N_CALLS);
		} else if (strcmp(probe, done) == 0) {
			seen_done = true;
			assert_int_equal(wj_int_of(wr_row(w, r), "n"), 1);
		} else {
			fail_msg("unexpected probe %s", probe);
		}
	}
	assert_true(seen_tick && seen_done);
	wr_json_free(&j);
	wr_free(&p);
}

/* span(uprobe): entry and return paired; start-side arg0 and end-side retval both right. */
static void test_span_uprobe(void **state)
{
	const struct wj *w, *row;
	struct wr_proc p;
	struct wr_json j;
	long long printed;

	(void)state;
	w = run_one(&p, &j, N_CALLS,
		    query_of("from span(uprobe:%W:wl_work) select count() as n, min(duration) as "
			     "dmin, sum(arg0) as s, sum(retval) as r"),
		    &printed);
	row = wr_row(w, 0);
	assert_int_equal(wj_int_of(row, "n"), N_CALLS);
	assert_true(wj_int_of(row, "dmin") > 0);
	assert_int_equal(wj_int_of(row, "s"), sum_i(N_CALLS));
	assert_int_equal(wj_int_of(row, "r"), printed);
	assert_int_equal(wj_int_of(wj_get(w, "notes"), "span_end_without_start"), 0);
	wr_json_free(&j);
	wr_free(&p);
}

/*
 * Quantiles of arg0 = 0..N-1: the exact nearest-rank value is y = k - 1 with
 * k = max(1, ceil(q N)); q is a fraction num/den here so k is computed without rounding.
 */
struct quant_case {
	const char *col;
	long long num, den;
};

static void check_quantile(const struct wj *row, const struct quant_case *c, long long n)
{
	long long k = (c->num * n + c->den - 1) / c->den;
	double r, y;

	if (k < 1)
		k = 1;
	y = (double)(k - 1);
	r = wj_num_of(row, c->col);
	if (y < 32 || k == 1 || k == n) {
		if (r != y)
			fail_msg("%s = %.2f, exact value %.0f (rank %lld of %lld) expected", c->col,
				 r, y, k, n);
	} else if (fabs(r - y) > y / 64) {
		fail_msg("%s = %.2f, exact %.0f: error %.2f above the bound %.2f", c->col, r, y,
			 fabs(r - y), y / 64);
	}
}

struct bucket {
	long long min, max; /* LLONG_MIN / LLONG_MAX: an open end (null) */
	long long count;
};

static void check_buckets(const struct wj *h, const struct bucket *want, size_t nwant,
			  long long count)
{
	const struct wj *b = wj_get(h, "buckets");

	assert_non_null(b);
	assert_int_equal(b->kind, WJ_ARR);
	assert_int_equal(wj_int_of(h, "count"), count);
	if (b->nkids != nwant)
		fail_msg("%zu buckets, %zu expected", b->nkids, nwant);
	for (size_t i = 0; i < nwant; i++) {
		const struct wj *k = &b->kids[i], *lo = wj_get(k, "min"), *hi = wj_get(k, "max");

		if (want[i].min == LLONG_MIN)
			assert_true(lo && lo->kind == WJ_NULL);
		else
			assert_int_equal(wj_int_of(k, "min"), want[i].min);
		if (want[i].max == LLONG_MAX)
			assert_true(hi && hi->kind == WJ_NULL);
		else
			assert_int_equal(wj_int_of(k, "max"), want[i].max);
		if (wj_int_of(k, "count") != want[i].count)
			fail_msg("bucket %zu [%lld, %lld]: %lld, %lld expected", i, want[i].min,
				 want[i].max, wj_int_of(k, "count"), want[i].count);
	}
}

static void test_quantiles_and_hists(void **state)
{
	static const struct quant_case cases[] = {
		{ "p50", 50, 100 },	   { "p90", 90, 100 }, { "p99", 99, 100 },
		{ "p999", 999, 1000 },	   { "q25", 25, 100 }, { "qmin", 1, 10000 },
		{ "qmax", 99999, 100000 }, { "q19", 2, 1000 },
	};
	struct bucket want[80];
	const struct wj *w, *row;
	struct wr_proc p;
	struct wr_json j;
	size_t nwant = 0;

	(void)state;
	w = run_one(&p, &j, N_QUANT,
		    query_of("from uprobe:%W:wl_work select p50(arg0) as p50, p90(arg0) as p90, "
			     "p99(arg0) as p99, p999(arg0) as p999, quantile(arg0, 0.25) as q25, "
			     "quantile(arg0, 0.0001) as qmin, quantile(arg0, 0.99999) as qmax, "
			     "quantile(arg0, 0.002) as q19, hist(arg0) as h, "
			     "lhist(arg0, 1000, 9000, 1500) as lh"),
		    NULL);
	row = wr_row(w, 0);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		check_quantile(row, &cases[i], N_QUANT);

	/* hist: log2 buckets [0], [1], [2, 3], [4, 7], ... of the values 0..N-1 */
	for (long long v = 0; v < N_QUANT; v++) {
		long long lo = v < 2 ? v : 1LL << (63 - __builtin_clzll((unsigned long long)v));
		long long hi = v < 2 ? v : 2 * lo - 1;

		if (!nwant || want[nwant - 1].min != lo)
			want[nwant++] = (struct bucket){ lo, hi, 0 };
		want[nwant - 1].count++;
	}
	check_buckets(wj_get(row, "h"), want, nwant, N_QUANT);

	/* lhist(lo 1000, hi 9000, step 1500): under, six steps (the last cut at hi), over */
	nwant = 0;
	want[nwant++] = (struct bucket){ LLONG_MIN, 999, 1000 };
	for (long long lo = 1000; lo < 9000; lo += 1500) {
		long long hi = lo + 1500 < 9000 ? lo + 1500 : 9000;

		want[nwant++] = (struct bucket){ lo, hi - 1, hi - lo };
	}
	want[nwant++] = (struct bucket){ 9000, LLONG_MAX, N_QUANT - 9000 };
	check_buckets(wj_get(row, "lh"), want, nwant, N_QUANT);
	wr_json_free(&j);
	wr_free(&p);
}

/* The offsets from func's start at which objdump starts an instruction, in order; the end of
 * the function (nm -S) in *end.  Returns how many starts. */
static int objdump_starts(const char *path, const char *func, long long *starts, int max,
			  long long *end)
{
	char cmd[PATH_MAX + 256], line[512], head[300];
	unsigned long long base = 0, a, v, sz;
	char type, name[256];
	bool in = false;
	int n = 0;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "objdump -d --no-show-raw-insn --disassemble='%s' '%s'", func,
		 path);
	snprintf(head, sizeof(head), " <%s>:", func);
	p = popen(cmd, "r");
	assert_non_null(p);
	while (fgets(line, sizeof(line), p)) {
		if (!in && strstr(line, head) && sscanf(line, "%llx", &base) == 1)
			in = true;
		else if (in && sscanf(line, " %llx:", &a) == 1 && n < max)
			starts[n++] = (long long)(a - base);
		else if (in && line[0] == '\n')
			break;
	}
	pclose(p);
	*end = 0;
	snprintf(cmd, sizeof(cmd), "nm -S --defined-only '%s'", path);
	p = popen(cmd, "r");
	assert_non_null(p);
	while (fgets(line, sizeof(line), p))
		if (sscanf(line, "%llx %llx %c %255s", &v, &sz, &type, name) == 4 &&
		    strcmp(name, func) == 0)
			*end = (long long)sz;
	pclose(p);
	return n;
}

/* `weft run -c WORKLOAD QUERY` must fail to compile with tag, the caret on the query's column
 * col (1-based), and the workload never run. */
static void assert_refused(const char *workload, const char *query, const char *tag, size_t col)
{
	char want[64], cmd[PATH_MAX + 32];
	struct wr_proc p;
	int rc;

	snprintf(cmd, sizeof(cmd), "'%s' 10", workload);
	rc = wr_weft_run(&p, "--format", "json", "-c", cmd, query);
	if (rc != 3 || !strstr(p.err.p, tag))
		wr_dump(&p, query);
	assert_int_equal(rc, 3); /* the query has errors */
	assert_non_null(strstr(p.err.p, tag));
	snprintf(want, sizeof(want), "query:1:%zu: error:", col);
	if (!strstr(p.err.p, want))
		fail_msg("the error is not placed at column %zu: %s", col, p.err.p);
	assert_null(strstr(p.out.p, "wl_usdt")); /* nothing ran */
	wr_free(&p);
}

/*
 * uprobe:wl_work+N, N the length of its first instruction as objdump decodes it: every call
 * still counts, exactly.  An offset one byte into a multi-byte instruction is refused, with
 * the caret on "+N" and the boundaries on either side named.
 */
static void test_uprobe_offset_boundary(void **state)
{
	long long starts[64], end, in = -1, in_next = 0;
	char q[PATH_MAX + 128], tail[64];
	const struct wj *w;
	struct wr_proc p;
	struct wr_json j;
	int n;

	(void)state;
	if (!wr_ready())
		skip();
	n = objdump_starts(wl_path, "wl_work", starts, 64, &end);
	if (n < 2) {
		fprintf(stderr, "skipped: objdump cannot disassemble wl_work\n");
		skip();
	}
	assert_int_equal(starts[0], 0);
	assert_true(starts[1] > 0 && starts[1] < end);
	snprintf(tail, sizeof(tail), ":wl_work+%lld select count() as n", starts[1]);
	snprintf(q, sizeof(q), "from uprobe:%%W%s", tail);
	w = run_one(&p, &j, N_CALLS, query_of(q), NULL);
	assert_int_equal(wr_nrows(w), 1);
	assert_int_equal(wj_int_of(wr_row(w, 0), "n"), N_CALLS);
	wr_json_free(&j);
	wr_free(&p);

	for (int k = 0; k < n && in < 0; k++) {
		long long next = k + 1 < n ? starts[k + 1] : end;

		if (next - starts[k] > 1) {
			in = starts[k] + 1;
			in_next = next;
		}
	}
	assert_true(in > 0); /* some instruction of wl_work is longer than a byte */
	snprintf(q, sizeof(q), "from uprobe:%s:wl_work+%lld select count()", wl_path, in);
	assert_refused(wl_path, q, "[E_PROBE_OFFSET_INSN]", strchr(q, '+') - q + 1);
	/* the message names the instruction's start, and its end unless that ends wl_work */
	{
		struct wr_proc e;
		char want[128];

		assert_int_equal(wr_weft_run(&e, q), 3);
		if (in_next < end)
			snprintf(want, sizeof(want),
				 "nearest boundaries: wl_work+%lld, wl_work+%lld", in - 1, in_next);
		else
			snprintf(want, sizeof(want), "nearest boundary: wl_work+%lld", in - 1);
		if (!strstr(e.err.p, want))
			fail_msg("'%s' lacks '%s'", e.err.p, want);
		wr_free(&e);
	}
}

/* A copy of wl_usdt whose tick site holds int3 instead of sys/sdt.h's nop: refused, placed on
 * the probe, and nothing runs (with the check gone the copy would die of SIGTRAP). */
static void test_usdt_site_not_nop(void **state)
{
	char tmp[] = "/tmp/weft_test_usdt_site_XXXXXX", path[PATH_MAX], q[PATH_MAX + 64];
	struct probe_elf_usdt *notes;
	unsigned char byte = 0;
	long long site = -1;
	int n, in, out;
	ssize_t r;
	char buf[65536];

	(void)state;
	if (!wr_ready())
		skip();
#ifndef __x86_64__
	skip(); /* the patch is x86 code */
#endif
	assert_int_equal(probe_elf_usdt_read(wl_path, &notes, &n), 0);
	for (int i = 0; i < n; i++)
		if (strcmp(notes[i].name, "tick") == 0)
			site = (long long)notes[i].offset;
	free(notes);
	assert_true(site > 0);
	assert_non_null(mkdtemp(tmp));
	snprintf(path, sizeof(path), "%s/wl_usdt", tmp);
	in = open(wl_path, O_RDONLY | O_CLOEXEC);
	out = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
	assert_true(in >= 0 && out >= 0);
	while ((r = read(in, buf, sizeof(buf))) > 0)
		assert_int_equal(write(out, buf, (size_t)r), r);
	assert_int_equal(pread(in, &byte, 1, (off_t)site), 1);
	assert_int_equal(byte, 0x90); /* sys/sdt.h's nop */
	byte = 0xcc;
	assert_int_equal(pwrite(out, &byte, 1, (off_t)site), 1);
	close(in);
	close(out);

	snprintf(q, sizeof(q), "from usdt:%s:weft_test:tick select count()", path);
	assert_refused(path, q, "[E_PROBE_USDT_SITE]", strlen("from ") + 1);
	unlink(path);
	rmdir(tmp);
}

/*
 * A USDT probe with a semaphore in a process that is already running (weft run -p): the
 * workload fires weft_sema:fire only while its semaphore is raised, so it counts nothing
 * unless weft has the kernel raise it.  Alone it fires 0 times; with weft attached before
 * it starts its N iterations, N times, and weft counts exactly N with the right arguments.
 */
static void test_usdt_semaphore_running(void **state)
{
	char pid[32], narg[32], q[PATH_MAX + 128], line[128];
	const char *sema_wl;
	struct wr_proc wl, p;
	const struct wj *w;
	struct wr_json j;
	long long iters = -1, fired = -1;
	int rc;

	(void)state;
	if (!wr_ready())
		skip();
	sema_wl = wr_workload("wl_usdt_sema");
	snprintf(narg, sizeof(narg), "%d", N_CALLS);
	{
		char *argv[] = { (char *)sema_wl, narg, NULL };

		/* untraced: the semaphore is down, nothing fires */
		assert_int_equal(wr_workload_start(&wl, argv), 0);
		assert_int_equal(wr_finish(&wl, WR_TIMEOUT_MS), 0);
		assert_true(wr_cut_line(&wl.out, "wl_usdt_sema: ", line, sizeof(line)));
		assert_int_equal(
			sscanf(line, "wl_usdt_sema: %lld iterations, %lld fired", &iters, &fired),
			2);
		assert_int_equal(iters, N_CALLS);
		assert_int_equal(fired, 0);
		wr_free(&wl);

		assert_int_equal(wr_workload_start(&wl, argv), 0); /* running, waiting on stdin */
	}
	snprintf(pid, sizeof(pid), "%d", (int)wl.pid);
	snprintf(q, sizeof(q),
		 "from usdt:%s:weft_sema:fire select count() as n, sum(arg0) as s, "
		 "max(arg0) as hi",
		 sema_wl);
	assert_int_equal(wr_weft_start(&p, "--format", "json", "-p", pid, q, NULL), 0);
	rc = wr_wait_err(&p, "attached", WR_TIMEOUT_MS);
	if (rc)
		wr_dump(&p, "weft run -p");
	assert_int_equal(rc, 0);
	assert_int_equal(write(wl.in_fd, "g", 1), 1);
	assert_int_equal(wr_finish(&wl, WR_TIMEOUT_MS), 0);
	assert_true(wr_cut_line(&wl.out, "wl_usdt_sema: ", line, sizeof(line)));
	assert_int_equal(sscanf(line, "wl_usdt_sema: %lld iterations, %lld fired", &iters, &fired),
			 2);
	assert_int_equal(fired, N_CALLS); /* the kernel raised the semaphore in that process */

	rc = wr_finish(&p, WR_TIMEOUT_MS); /* -p: weft ends when the process does */
	if (rc)
		wr_dump(&p, q);
	assert_int_equal(rc, 0);
	wr_json_lines(&p.out, &j);
	w = wr_one_window(&j);
	assert_int_equal(wr_nrows(w), 1);
	assert_int_equal(wj_int_of(wr_row(w, 0), "n"), N_CALLS);
	assert_int_equal(wj_int_of(wr_row(w, 0), "s"), sum_i(N_CALLS));
	assert_int_equal(wj_int_of(wr_row(w, 0), "hi"), N_CALLS - 1);
	wr_json_free(&j);
	wr_free(&p);
	wr_free(&wl);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_uprobe_count_sum),
		cmocka_unit_test(test_uretprobe_retval),
		cmocka_unit_test(test_usdt_tick),
		cmocka_unit_test(test_usdt_group_by_probe),
		cmocka_unit_test(test_span_uprobe),
		cmocka_unit_test(test_quantiles_and_hists),
		cmocka_unit_test(test_uprobe_offset_boundary),
		cmocka_unit_test(test_usdt_site_not_nop),
		cmocka_unit_test(test_usdt_semaphore_running),
	};

	if (!wr_ready())
		return WT_SKIP;
	return wt_status(cmocka_run_group_tests(tests, setup, NULL));
}
