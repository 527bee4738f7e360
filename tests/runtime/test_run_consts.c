// SPDX-License-Identifier: Apache-2.0
/*
 * End to end, constants: the real `weft run --format json -c 'wl_syscalls 3 1'` (exactly 3
 * getppid() calls) with a stream whose columns are constants.
 *  - A string literal is a column of its own (`select 'x'` used to pass `weft explain` and
 *    then fail in code generation): every row carries it, escapes intact.
 *  - Integer expressions over constants are folded by the compiler; the folded value must be
 *    what the kernel computes for the same expression over run-time values (`tid - tid`
 *    is 0 but not a constant): division truncating toward zero, modulo with the sign of the
 *    dividend, signed differences, comparisons.
 *  - Run-time divisors that are 0 give x / 0 = 0 and x % 0 = x, signed and unsigned (the BPF
 *    rule).  `pid % (pid < 0)` divides by a zero clang can see: the generated C must not
 *    leave that undefined (clang folded it to 0, not pid); INT64_MIN / -1 wraps.
 *  - A string literal longer than the 63 bytes the kernel's unrolled comparison takes is
 *    still compared (it used to be "not equal" always): `cat LONG_PATH` opens LONG_PATH
 *    exactly once, so `where str(args.filename, 256) = 'LONG_PATH'` counts 1, with the literal
 *    on either side.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "run_util.h"
#include "tests/skip.h"

#define N_CALLS 3

static const char const_query[] =
	"from syscall:getppid select 'x' as s, 'a\"b\\\\c\\t' as e,"
	" 7 / -2 as fd, (tid - tid + 7) / -2 as rd,"
	" -7 / 2 as fd2, (tid - tid - 7) / 2 as rd2,"
	" -7 % 3 as fm, (tid - tid - 7) % 3 as rm,"
	" 7 % -3 as fm2, (tid - tid + 7) % -3 as rm2,"
	" 3 - 5 as fs, (tid - tid + 3) - 5 as rs,"
	" 4 * 1024 * 1024 * 1024 * 1024 as fp, (tid - tid + 4) * 1099511627776 as rp,"
	" 2 > 1 as fb, (1 - 1) = 0 as fz,"
	" (tid - tid + 7) / (tid - tid) as sd, (tid - tid - 7) % (tid - tid) as sm,"
	" pid / (pid < 0) as ud, pid % (pid < 0) as um, pid,"
	" (tid - tid - 9223372036854775807 - 1) / -1 as mn";

static void assert_pair(const struct wj *row, const char *folded, const char *run, long long want)
{
	if (wj_int_of(row, folded) != want || wj_int_of(row, run) != want)
		fail_msg("%s = %lld (folded), %s = %lld (kernel), want %lld", folded,
			 wj_int_of(row, folded), run, wj_int_of(row, run), want);
}

static bool bool_of(const struct wj *row, const char *name)
{
	const struct wj *v = wj_get(row, name);

	if (!v || v->kind != WJ_BOOL)
		fail_msg("JSON member '%s' is not a boolean", name);
	return v->b;
}

static void test_constant_columns(void **state)
{
	char cmd[PATH_MAX + 32];
	struct wr_proc p;
	struct wr_json j;
	size_t rows = 0;
	int rc;

	(void)state;
	if (!wr_ready())
		wt_skip("tracing needs root, tracefs and the weft binary");
	snprintf(cmd, sizeof(cmd), "'%s' %d 1", wr_workload("wl_syscalls"), N_CALLS);
	rc = wr_weft_run(&p, "--format", "json", "-c", cmd, const_query);
	if (rc != 0)
		wr_dump(&p, "weft run");
	assert_int_equal(rc, 0);
	wr_json_lines(&p.out, &j);
	for (size_t i = 0; i < j.n; i++) {
		const struct wj *row = j.v[i];

		if (!wr_is_type(row, "row"))
			continue;
		rows++;
		assert_non_null(wj_str(wj_get(row, "s")));
		assert_string_equal(wj_str(wj_get(row, "s")), "x");
		assert_non_null(wj_str(wj_get(row, "e")));
		assert_string_equal(wj_str(wj_get(row, "e")), "a\"b\\c\t");
		assert_pair(row, "fd", "rd", -3);
		assert_pair(row, "fd2", "rd2", -3);
		assert_pair(row, "fm", "rm", -1);
		assert_pair(row, "fm2", "rm2", 1);
		assert_pair(row, "fs", "rs", -2);
		assert_pair(row, "fp", "rp", 4398046511104LL);
		assert_true(bool_of(row, "fb"));
		assert_true(bool_of(row, "fz"));
		assert_int_equal(wj_int_of(row, "sd"), 0);
		assert_int_equal(wj_int_of(row, "sm"), -7);
		assert_int_equal(wj_int_of(row, "ud"), 0);
		assert_true(wj_int_of(row, "pid") > 0);
		assert_int_equal(wj_int_of(row, "um"), wj_int_of(row, "pid"));
		assert_true(wj_int_of(row, "mn") == INT64_MIN);
	}
	assert_int_equal(rows, N_CALLS);
	wr_json_free(&j);
	wr_free(&p);
}

static void test_long_literal_equality(void **state)
{
	static const char path[] = "/tmp/weft-test-consts-a-file-name-longer-than-the-sixty-three-"
				   "bytes-of-an-unrolled-comparison.txt";
	char cmd[256], query[1024];
	struct wr_proc p;
	struct wr_json j;
	FILE *f;
	int rc;

	(void)state;
	if (!wr_ready())
		wt_skip("tracing needs root, tracefs and the weft binary");
	assert_true(strlen(path) > 63);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs("x\n", f);
	fclose(f);
	snprintf(cmd, sizeof(cmd), "cat %s", path);
	snprintf(query, sizeof(query),
		 "from syscall:openat where str(args.filename, 256) = '%s' or "
		 "'%s' = str(args.filename, 256) select count() as n, "
		 "sum(str(args.filename, 256) = '%s') as left, "
		 "sum('%s' = str(args.filename, 256)) as right",
		 path, path, path, path);
	rc = wr_weft_run(&p, "--format", "json", "-c", cmd, query);
	unlink(path);
	if (rc != 0)
		wr_dump(&p, "weft run");
	assert_int_equal(rc, 0);
	wr_json_lines(&p.out, &j);
	assert_int_equal(wr_sum_col(&j, "n", NULL, 0), 1);
	assert_int_equal(wr_sum_col(&j, "left", NULL, 0), 1);
	assert_int_equal(wr_sum_col(&j, "right", NULL, 0), 1);
	wr_json_free(&j);
	wr_free(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_constant_columns),
		cmocka_unit_test(test_long_literal_equality),
	};

	if (!wr_ready())
		return WT_SKIP;
	return wt_status(cmocka_run_group_tests(tests, NULL, NULL));
}
