// SPDX-License-Identifier: Apache-2.0
/*
 * End to end, window numbering: the real `weft run --format json` of an aggregating query
 * with `every D for 3D`.  The `index` of a window is its ordinal (docs/output.md: "the
 * window's number, from 0"), whatever D is.  `weft run` flips the kernel's epoch at least
 * once a second, so with `every 2s` it flips twice per window; the index used to be the
 * flip count, numbering the windows 0, 2, 4.  Both runs must print exactly three windows,
 * indexed 0, 1, 2 (the last one is the one printed when `for` ends).
 *
 * The runs trace system-wide getppid() calls and assert nothing about counts: only the
 * windows' numbers and how many there are.  They take 3 s and 6 s.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "run_util.h"
#include "tests/skip.h"

static void check_three_windows(const char *every_for)
{
	char query[128];
	struct wr_proc p;
	struct wr_json j;
	size_t n = 0;
	int rc;

	snprintf(query, sizeof(query), "from syscall:getppid select count() as n %s", every_for);
	rc = wr_weft_run(&p, "--format", "json", query);
	if (rc != 0)
		wr_dump(&p, "weft run");
	assert_int_equal(rc, 0);
	wr_json_lines(&p.out, &j);
	for (size_t i = 0; i < j.n; i++) {
		if (!wr_is_type(j.v[i], "window"))
			continue;
		if (wj_int_of(j.v[i], "index") != (long long)n)
			fail_msg("%s: window %zu has index %lld", every_for, n,
				 wj_int_of(j.v[i], "index"));
		n++;
	}
	if (n != 3)
		fail_msg("%s: %zu windows, want 3", every_for, n);
	wr_json_free(&j);
	wr_free(&p);
}

static void test_every_1s_for_3s(void **state)
{
	(void)state;
	if (!wr_ready())
		wt_skip("tracing needs root, tracefs and the weft binary");
	check_three_windows("every 1s for 3s");
}

/* Longer than weft run's 1 s tick: two flips per window, still one index per window. */
static void test_every_2s_for_6s(void **state)
{
	(void)state;
	if (!wr_ready())
		wt_skip("tracing needs root, tracefs and the weft binary");
	check_three_windows("every 2s for 6s");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_1s_for_3s),
		cmocka_unit_test(test_every_2s_for_6s),
	};

	if (!wr_ready())
		return WT_SKIP;
	return wt_status(cmocka_run_group_tests(tests, NULL, NULL));
}
