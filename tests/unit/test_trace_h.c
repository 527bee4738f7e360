// SPDX-License-Identifier: Apache-2.0
/*
 * include/weft/trace.h without a tracer: W3C traceparent formatting and parsing against the
 * specification's rules and its own example, ids (never 0, distinct), contexts (root, child,
 * a child of an invalid parent), and that a site evaluates each argument exactly once.  Built
 * SDT-only (no liblttng-ust); the LTTng build's sites are exercised by the workloads that the
 * runtime tests trace (tests/runtime/test_trace_h.c).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <string.h>

#define WEFT_TRACE_SDT_ONLY
#include <weft/trace.h>

/* The specification's example (W3C Trace Context, "traceparent Header"). */
#define SPEC_TP "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

static int parse(const char *s, struct weft_ctx *c, unsigned *flags)
{
	return weft_traceparent_parse(s, strlen(s), c, flags);
}

static void test_parse_spec_example(void **state)
{
	struct weft_ctx c = { 0 };
	unsigned flags = 99;

	(void)state;
	assert_int_equal(parse(SPEC_TP, &c, &flags), 0);
	assert_true(c.trace_hi == UINT64_C(0x4bf92f3577b34da6));
	assert_true(c.trace_lo == UINT64_C(0xa3ce929d0e0e4736));
	assert_true(c.task == UINT64_C(0x00f067aa0ba902b7));
	assert_true(c.parent == 0);
	assert_int_equal(flags, 1);
	/* flags are optional, and any value of them is accepted in version 00 */
	assert_int_equal(parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-fe", &c, NULL),
			 0);
	assert_int_equal(
		parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", &c, &flags), 0);
	assert_int_equal(flags, 0);
}

static void test_format_roundtrip(void **state)
{
	struct weft_ctx c = { UINT64_C(0x4bf92f3577b34da6), UINT64_C(0xa3ce929d0e0e4736),
			      UINT64_C(0x00f067aa0ba902b7), 42 },
			back = { 0 };
	char buf[WEFT_TRACEPARENT_SIZE];
	unsigned flags = 0;

	(void)state;
	assert_int_equal(weft_traceparent_format(&c, WEFT_TRACEPARENT_SAMPLED, buf, sizeof(buf)),
			 WEFT_TRACEPARENT_LEN);
	assert_string_equal(buf, SPEC_TP);
	assert_int_equal(parse(buf, &back, &flags), 0);
	assert_true(back.trace_hi == c.trace_hi && back.trace_lo == c.trace_lo);
	assert_true(back.task == c.task && back.parent == 0);
	assert_int_equal(flags, 1);
	/* leading zeros kept: 32 and 16 digits whatever the value */
	c = (struct weft_ctx){ 0, 1, 2, 0 };
	assert_int_equal(weft_traceparent_format(&c, 0, buf, sizeof(buf)), WEFT_TRACEPARENT_LEN);
	assert_string_equal(buf, "00-00000000000000000000000000000001-0000000000000002-00");
	c = (struct weft_ctx){ UINT64_MAX, UINT64_MAX, UINT64_MAX, 0 };
	assert_int_equal(weft_traceparent_format(&c, 255, buf, sizeof(buf)), WEFT_TRACEPARENT_LEN);
	assert_string_equal(buf, "00-ffffffffffffffffffffffffffffffff-ffffffffffffffff-ff");
}

static void test_format_refused(void **state)
{
	struct weft_ctx ok = { 1, 2, 3, 0 }, c;
	char buf[WEFT_TRACEPARENT_SIZE] = "untouched";

	(void)state;
	c = ok;
	c.trace_hi = c.trace_lo = 0;
	assert_int_equal(weft_traceparent_format(&c, 1, buf, sizeof(buf)), -EINVAL);
	c = ok;
	c.task = 0;
	assert_int_equal(weft_traceparent_format(&c, 1, buf, sizeof(buf)), -EINVAL);
	assert_int_equal(weft_traceparent_format(NULL, 1, buf, sizeof(buf)), -EINVAL);
	assert_int_equal(weft_traceparent_format(&ok, 256, buf, sizeof(buf)), -EINVAL);
	assert_int_equal(weft_traceparent_format(&ok, 1, buf, WEFT_TRACEPARENT_SIZE - 1), -ENOSPC);
	assert_string_equal(buf, "untouched");
}

static void test_parse_refused(void **state)
{
	static const char *const bad[] = {
		"", /* empty */
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0", /* short */
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-", /* 00 is 55 long */
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x",
		"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", /* version ff */
		"0g-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", /* not hex */
		"0A-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", /* upper case */
		"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00F067AA0BA902B7-01",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0A",
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01", /* zero trace id */
		"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", /* zero parent id */
		"00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", /* separators */
		"00-4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7-01",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7_01",
		"00-4bf92f3577b34da6a3ce929d0e0e473-600f067aa0ba902b7-01", /* misplaced dash */
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-+1",
		" 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", /* white space */
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01 ",
		/* a later version: at least 55 characters, and a dash after the flags */
		"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x",
		"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0",
	};
	struct weft_ctx c = { 7, 8, 9, 10 };
	unsigned flags = 77;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (parse(bad[i], &c, &flags) != -EINVAL)
			fail_msg("accepted: \"%s\"", bad[i]);
		/* nothing written on a refusal */
		assert_true(c.trace_hi == 7 && c.trace_lo == 8 && c.task == 9 && c.parent == 10);
		assert_int_equal(flags, 77);
	}
	assert_int_equal(weft_traceparent_parse(NULL, 55, &c, NULL), -EINVAL);
	assert_int_equal(weft_traceparent_parse(SPEC_TP, 55, NULL, NULL), -EINVAL);
	/* a prefix of a longer buffer: len is what counts, not a NUL */
	assert_int_equal(weft_traceparent_parse(SPEC_TP "trailing", 55, &c, NULL), 0);
	assert_int_equal(weft_traceparent_parse(SPEC_TP "trailing", 56, &c, NULL), -EINVAL);
}

static void test_parse_later_version(void **state)
{
	struct weft_ctx c = { 0 };
	unsigned flags = 0;

	(void)state;
	/* a later version with fields we do not know: the known ones are read */
	assert_int_equal(parse("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-ever",
			       &c, &flags),
			 0);
	assert_true(c.trace_lo == UINT64_C(0xa3ce929d0e0e4736) && flags == 1);
	assert_int_equal(
		parse("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", &c, &flags), 0);
	assert_int_equal(flags, 0);
}

static void test_ids(void **state)
{
	enum { N = 4096 };
	static uint64_t ids[N];

	(void)state;
	for (size_t i = 0; i < N; i++) {
		ids[i] = weft_id();
		assert_true(ids[i] != 0);
		for (size_t j = 0; j < i; j++)
			assert_true(ids[j] != ids[i]);
	}
	/* the fallback's mixer is a bijection: distinct inputs, distinct outputs */
	assert_true(weft_id_mix(1) != weft_id_mix(2));
}

static void test_contexts(void **state)
{
	struct weft_ctx root, child, grand, orphan, empty = { 0 };

	struct timespec t0, t1;

	(void)state;
	timespec_get(&t0, TIME_UTC);
	weft_ctx_root(&root);
	timespec_get(&t1, TIME_UTC);
	assert_true(weft_ctx_valid(&root));
	assert_true(root.parent == 0);
	/* time first: the trace id's first 32 bits are the second it was made in */
	assert_true(root.trace_hi >> 32 >= (uint64_t)t0.tv_sec &&
		    root.trace_hi >> 32 <= (uint64_t)t1.tv_sec);
	weft_ctx_child(&child, &root);
	assert_true(weft_ctx_valid(&child));
	assert_true(child.trace_hi == root.trace_hi && child.trace_lo == root.trace_lo);
	assert_true(child.parent == root.task && child.task != root.task);
	weft_ctx_child(&grand, &child);
	assert_true(grand.parent == child.task && grand.trace_lo == root.trace_lo);
	/* no valid parent (no traceparent came): a new root */
	assert_false(weft_ctx_valid(&empty));
	assert_false(weft_ctx_valid(NULL));
	weft_ctx_child(&orphan, &empty);
	assert_true(weft_ctx_valid(&orphan));
	assert_true(orphan.parent == 0);
	assert_false(orphan.trace_hi == root.trace_hi && orphan.trace_lo == root.trace_lo);
	weft_ctx_child(&orphan, NULL);
	assert_true(weft_ctx_valid(&orphan) && orphan.parent == 0);
}

static int evaluated;

static uint64_t once(uint64_t v)
{
	evaluated++;
	return v;
}

static const char *once_s(const char *s)
{
	evaluated++;
	return s;
}

/* Each site evaluates each argument exactly once (a tracer's note and the program agree). */
static void test_sites_evaluate_once(void **state)
{
	struct weft_ctx c = { 1, 2, 3, 0 };

	(void)state;
	WEFT_TASK_BEGIN(once(1), once(2), once(3), once(0), once_s("svc"), once_s("name"));
	assert_int_equal(evaluated, 6);
	WEFT_EVENT(once(1), once(2), once(3), once_s("ev"));
	assert_int_equal(evaluated, 10);
	WEFT_EDGE(once(1), once(2), once_s(WEFT_EDGE_MESSAGE), once(3), once(0), once(4), once(0));
	assert_int_equal(evaluated, 17);
	WEFT_TASK_END(once(1), once(2), once(3), (int)once(WEFT_STATUS_OK));
	assert_int_equal(evaluated, 21);
	WEFT_BEGIN(&c, "svc", NULL); /* NULL strings are allowed */
	WEFT_MARK(&c, "ev");
	WEFT_MESSAGE(&c, &c);
	WEFT_END(&c, WEFT_STATUS_ERROR);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_spec_example),
		cmocka_unit_test(test_format_roundtrip),
		cmocka_unit_test(test_format_refused),
		cmocka_unit_test(test_parse_refused),
		cmocka_unit_test(test_parse_later_version),
		cmocka_unit_test(test_ids),
		cmocka_unit_test(test_contexts),
		cmocka_unit_test(test_sites_evaluate_once),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
