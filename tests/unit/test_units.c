// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests of base/units.[ch]: the sizes and durations of every command-line option and of
 * the query language's units.  Exact values for every unit, the short size forms options
 * take, and refusals: malformed text, units of the other kind, unknown units ("16E", "2w"),
 * and values beyond 2^64 - 1, in the digits or once scaled, at the exact boundary.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "base/units.h"

#define S 1000000000ULL

static uint64_t size_ok(const char *s)
{
	uint64_t v = 12345;

	assert_int_equal(units_size_parse(s, &v), 0);
	return v;
}

static void size_bad(const char *s, int rc)
{
	uint64_t v = 12345;

	assert_int_equal(units_size_parse(s, &v), rc);
	assert_true(v == 12345); /* untouched */
}

static void test_sizes(void **state)
{
	(void)state;
	assert_true(size_ok("0") == 0);
	assert_true(size_ok("4096") == 4096);
	assert_true(size_ok("1B") == 1);
	assert_true(size_ok("4KiB") == 4096);
	assert_true(size_ok("64MiB") == 64ULL << 20);
	assert_true(size_ok("3GiB") == 3ULL << 30);
	assert_true(size_ok("2TiB") == 2ULL << 40);
	/* the short forms options have always taken */
	assert_true(size_ok("64K") == 64ULL << 10);
	assert_true(size_ok("64k") == 64ULL << 10);
	assert_true(size_ok("16M") == 16ULL << 20);
	assert_true(size_ok("16m") == 16ULL << 20);
	assert_true(size_ok("1G") == 1ULL << 30);
	assert_true(size_ok("1T") == 1ULL << 40);
	assert_true(size_ok("18446744073709551615") == UINT64_MAX);
	assert_true(size_ok("17179869183GiB") == 17179869183ULL << 30);
	assert_true(size_ok("16777215TiB") == 16777215ULL << 40);
}

static void test_sizes_refused(void **state)
{
	(void)state;
	size_bad(NULL, -EINVAL);
	size_bad("", -EINVAL);
	size_bad("K", -EINVAL);
	size_bad("-1", -EINVAL);
	size_bad("+1", -EINVAL);
	size_bad(" 1", -EINVAL);
	size_bad("1 K", -EINVAL);
	size_bad("1.5M", -EINVAL);
	size_bad("1KB", -EINVAL); /* decimal or binary? refused */
	size_bad("1kib", -EINVAL);
	size_bad("16E", -EINVAL); /* no exa: 16 EiB would not fit anyway */
	size_bad("1s", -EINVAL); /* a duration */
	size_bad("0x10", -EINVAL);
	/* beyond 2^64 - 1: in the digits, or once scaled (the old weft run shifted blindly) */
	size_bad("18446744073709551616", -ERANGE);
	size_bad("99999999999999999999K", -ERANGE);
	size_bad("17179869184GiB", -ERANGE); /* 2^34 * 2^30 = 2^64 */
	size_bad("17179869184G", -ERANGE);
	size_bad("16777216TiB", -ERANGE); /* 2^24 * 2^40 = 2^64 */
	size_bad("18014398509481984K", -ERANGE); /* 2^54 * 2^10 */
}

static void test_durations(void **state)
{
	uint64_t ns;

	(void)state;
	assert_int_equal(units_duration_parse("2s", 0, &ns), 0);
	assert_true(ns == 2 * S);
	assert_int_equal(units_duration_parse("500ms", 0, &ns), 0);
	assert_true(ns == 500000000ULL);
	assert_int_equal(units_duration_parse("250us", 0, &ns), 0);
	assert_true(ns == 250000ULL);
	assert_int_equal(units_duration_parse("10ns", 0, &ns), 0);
	assert_true(ns == 10);
	assert_int_equal(units_duration_parse("1m", 0, &ns), 0);
	assert_true(ns == 60 * S);
	assert_int_equal(units_duration_parse("7d", 0, &ns), 0); /* command lines: retention */
	assert_int_equal(ns, 7ull * 86400 * S);
	assert_null(units_find("d", 1)); /* not a unit of the query language */
	assert_int_equal(units_duration_parse("2h", 0, &ns), 0);
	assert_true(ns == 7200 * S);
	/* a bare number: in the caller's unit, or refused */
	assert_int_equal(units_duration_parse("3", S, &ns), 0);
	assert_true(ns == 3 * S);
	assert_int_equal(units_duration_parse("3", 0, &ns), -EINVAL);
	assert_int_equal(units_duration_parse("18446744073709551615ns", 0, &ns), 0);
	assert_true(ns == UINT64_MAX);
	assert_int_equal(units_duration_parse("18446744073s", 0, &ns), 0);
	assert_true(ns == 18446744073ULL * S);
}

static void test_durations_refused(void **state)
{
	uint64_t ns = 7;

	(void)state;
	assert_int_equal(units_duration_parse("", S, &ns), -EINVAL);
	assert_int_equal(units_duration_parse("-1s", S, &ns), -EINVAL);
	assert_int_equal(units_duration_parse("2 s", S, &ns), -EINVAL);
	assert_int_equal(units_duration_parse("2w", S, &ns), -EINVAL);
	assert_int_equal(units_duration_parse("2D", S, &ns), -EINVAL);
	assert_int_equal(units_duration_parse("1.5s", S, &ns), -EINVAL);
	assert_int_equal(units_duration_parse("1H", S, &ns), -EINVAL); /* case matters */
	assert_int_equal(units_duration_parse("5KiB", S, &ns), -EINVAL); /* a size */
	assert_int_equal(units_duration_parse("99999999999999999999s", S, &ns), -ERANGE);
	assert_int_equal(units_duration_parse("18446744074s", S, &ns), -ERANGE);
	assert_int_equal(units_duration_parse("18446744074", S, &ns), -ERANGE);
	assert_int_equal(units_duration_parse("5124095576030432m", S, &ns), -ERANGE);
	assert_true(ns == 7); /* untouched */
}

/* The table the lexer reads: both kinds, exact names. */
static void test_find(void **state)
{
	const struct units_unit *u;

	(void)state;
	u = units_find("KiB", 3);
	assert_non_null(u);
	assert_int_equal(u->kind, UNITS_SIZE);
	assert_true(u->scale == 1024);
	u = units_find("m", 1);
	assert_non_null(u);
	assert_int_equal(u->kind, UNITS_DURATION);
	assert_true(u->scale == 60 * S);
	u = units_find("msX", 2); /* only the first len bytes */
	assert_non_null(u);
	assert_true(u->scale == 1000000ULL);
	assert_null(units_find("K", 1)); /* options only, not the language */
	assert_null(units_find("kib", 3));
	assert_null(units_find("", 0));
}

/* Formatting is the parsers' inverse: the largest whole unit, read back to the same value. */
static void test_format(void **state)
{
	static const struct {
		uint64_t v;
		const char *dur, *size;
	} c[] = {
		{ 0, "0ns", "0B" },
		{ 1, "1ns", "1B" },
		{ 1000, "1us", "1000B" },
		{ 1024, "1024ns", "1KiB" },
		{ 1500000, "1500us", "1500000B" },
		{ 90ULL * UNITS_NS_PER_SEC, "90s", "87890625KiB" },
		{ 3600ULL * UNITS_NS_PER_SEC, "1h", "3515625000KiB" },
		{ 7ULL * 86400 * UNITS_NS_PER_SEC, "7d", "590625000000KiB" },
		{ 36ULL * 3600 * UNITS_NS_PER_SEC, "36h", "126562500000KiB" },
		{ 20ULL << 30, "21474836480ns", "20GiB" },
		{ 3ULL << 40, "3298534883328ns", "3TiB" },
		{ UINT64_MAX, "18446744073709551615ns", "18446744073709551615B" },
	};
	char buf[32];

	(void)state;
	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		uint64_t back;

		assert_string_equal(units_duration_format(c[i].v, buf, sizeof(buf)), c[i].dur);
		assert_int_equal(units_duration_parse(buf, 0, &back), 0);
		assert_int_equal(back, c[i].v);
		assert_string_equal(units_size_format(c[i].v, buf, sizeof(buf)), c[i].size);
		assert_int_equal(units_size_parse(buf, &back), 0);
		assert_int_equal(back, c[i].v);
	}
	/* a short buffer is cut, never overrun */
	assert_string_equal(units_size_format(20ULL << 30, buf, 4), "20G");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sizes),	  cmocka_unit_test(test_sizes_refused),
		cmocka_unit_test(test_durations), cmocka_unit_test(test_durations_refused),
		cmocka_unit_test(test_find),	  cmocka_unit_test(test_format),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
