// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests of agent/schedule.[ch], the window schedule of weft run and the agent daemon,
 * with made-up clocks: what is due and in which order (the end before a close that reaches
 * past it, a close before a flip), the once-a-second flip, the two late-wake policies (skip
 * for the daemon, catch up for weft run), the wait until the next thing is due, and window
 * arithmetic that saturates near 2^64 instead of wrapping (epochs come from the wire).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "agent/schedule.h"

#define S 1000000000ULL
#define NONE UINT64_MAX

static void test_windows_and_flips(void **state)
{
	struct agent_sched s;

	(void)state;
	/* windows of 10 s from 100 s; the flip clock starts at 0 */
	agent_sched_init(&s, 100 * S, 10 * S, NONE, false, 100 * S, 0);
	assert_true(s.window == 0 && s.close_at == 110 * S);
	assert_int_equal(agent_sched_due(&s, 105 * S, S / 2), AGENT_SCHED_NONE);
	assert_int_equal(agent_sched_due(&s, 105 * S, S), AGENT_SCHED_FLIP);
	agent_sched_flipped(&s, S);
	assert_int_equal(agent_sched_due(&s, 106 * S, S + S / 2), AGENT_SCHED_NONE);
	/* the close comes first, even when a flip is due too */
	assert_int_equal(agent_sched_due(&s, 110 * S, 5 * S), AGENT_SCHED_CLOSE);
	assert_true(agent_sched_close(&s, 110 * S, 5 * S) == 0);
	assert_true(s.window == 1 && s.close_at == 120 * S);
	/* a close is a flip: the next one is due a second later */
	assert_int_equal(agent_sched_due(&s, 111 * S, 5 * S + S - 1), AGENT_SCHED_NONE);
	assert_int_equal(agent_sched_due(&s, 111 * S, 6 * S), AGENT_SCHED_FLIP);
	/* starting late (a late join): the window that holds now; before the epoch: 0 */
	agent_sched_init(&s, 100 * S, 10 * S, NONE, false, 135 * S, 0);
	assert_true(s.window == 3 && s.close_at == 140 * S);
	agent_sched_init(&s, 100 * S, 10 * S, NONE, false, 50 * S, 0);
	assert_true(s.window == 0 && s.close_at == 110 * S);
}

static void test_late_wake(void **state)
{
	struct agent_sched s;

	(void)state;
	/* skip (the daemon): woken in window 4 while window 1 was open */
	agent_sched_init(&s, 100 * S, 10 * S, NONE, false, 110 * S, 0);
	assert_int_equal(agent_sched_due(&s, 145 * S, 0), AGENT_SCHED_CLOSE);
	assert_true(agent_sched_close(&s, 145 * S, 0) == 2); /* windows 2 and 3 */
	assert_true(s.window == 4 && s.close_at == 150 * S);
	assert_int_equal(agent_sched_due(&s, 145 * S, 0), AGENT_SCHED_NONE);
	/* catch up (weft run): every window closes in turn */
	agent_sched_init(&s, 100 * S, 10 * S, NONE, true, 110 * S, 0);
	for (uint64_t w = 1; w <= 3; w++) {
		assert_int_equal(agent_sched_due(&s, 145 * S, 0), AGENT_SCHED_CLOSE);
		assert_true(agent_sched_close(&s, 145 * S, 0) == 0);
		assert_true(s.window == w + 1);
	}
	assert_int_equal(agent_sched_due(&s, 145 * S, 0), AGENT_SCHED_NONE);
	/* a wall clock stepped back: the next window all the same, never the same one again */
	agent_sched_init(&s, 100 * S, 10 * S, NONE, false, 110 * S, 0);
	assert_true(agent_sched_close(&s, 90 * S, 0) == 0);
	assert_true(s.window == 2);
}

static void test_end(void **state)
{
	struct agent_sched s;

	(void)state;
	/* the end inside window 2: window 1 closes first, then the query ends in window 2 */
	agent_sched_init(&s, 100 * S, 10 * S, 125 * S, false, 110 * S, 0);
	assert_int_equal(agent_sched_due(&s, 124 * S, 0), AGENT_SCHED_CLOSE);
	agent_sched_close(&s, 124 * S, 0);
	assert_int_equal(agent_sched_due(&s, 124 * S, 0), AGENT_SCHED_NONE);
	assert_int_equal(agent_sched_due(&s, 125 * S, 0), AGENT_SCHED_END);
	assert_true(s.window == 2);
	/* woken long after both: the close of window 1, then the end (not a close of 2) */
	agent_sched_init(&s, 100 * S, 10 * S, 125 * S, true, 110 * S, 0);
	assert_int_equal(agent_sched_due(&s, 999 * S, 0), AGENT_SCHED_CLOSE);
	agent_sched_close(&s, 999 * S, 0);
	assert_int_equal(agent_sched_due(&s, 999 * S, 0), AGENT_SCHED_END);
	/* an end on a window boundary ends the query there: no empty window after it */
	agent_sched_init(&s, 100 * S, 10 * S, 120 * S, false, 110 * S, 0);
	assert_int_equal(agent_sched_due(&s, 120 * S, 0), AGENT_SCHED_END);
	/* one window (every 0): flips, then the end; without an end, flips forever */
	agent_sched_init(&s, 100 * S, 0, 150 * S, true, 100 * S, 0);
	assert_true(s.close_at == NONE);
	assert_int_equal(agent_sched_due(&s, 149 * S, 2 * S), AGENT_SCHED_FLIP);
	assert_int_equal(agent_sched_due(&s, 150 * S, 0), AGENT_SCHED_END);
	agent_sched_init(&s, 100 * S, 0, NONE, true, 100 * S, 0);
	assert_int_equal(agent_sched_due(&s, NONE - 1, S / 2), AGENT_SCHED_NONE);
	assert_int_equal(agent_sched_due(&s, NONE - 1, S), AGENT_SCHED_FLIP);
}

static void test_wait(void **state)
{
	struct agent_sched s;

	(void)state;
	agent_sched_init(&s, 0, 10 * S, NONE, false, 3 * S, 100 * S);
	/* the flip in 1 s comes before the close in 7 s */
	assert_true(agent_sched_wait_ns(&s, 3 * S, 100 * S) == S);
	assert_true(agent_sched_wait_ns(&s, 3 * S, 100 * S + S / 4) == 3 * S / 4);
	/* the close in 0.5 s comes first */
	assert_true(agent_sched_wait_ns(&s, 9 * S + S / 2, 100 * S) == S / 2);
	/* due now */
	assert_true(agent_sched_wait_ns(&s, 10 * S, 100 * S) == 0);
	assert_true(agent_sched_wait_ns(&s, 5 * S, 101 * S) == 0);
	/* the end before the close */
	agent_sched_init(&s, 0, 10 * S, 3 * S + S / 10, false, 3 * S, 100 * S);
	assert_true(agent_sched_wait_ns(&s, 3 * S, 100 * S) == S / 10);
	/* every 0, no end: the flip alone */
	agent_sched_init(&s, 0, 0, NONE, true, 0, 7);
	assert_true(agent_sched_wait_ns(&s, 12345, 7 + S / 2) == S / 2);
}

/* Epochs and lengths come from the wire: nothing wraps around 2^64. */
static void test_saturation(void **state)
{
	struct agent_sched s;

	(void)state;
	agent_sched_init(&s, NONE - 5 * S, 10 * S, NONE, false, NONE - S, 0);
	assert_true(s.window == 0 && s.close_at == NONE);
	agent_sched_set_window(&s, NONE - 1);
	assert_true(s.close_at == NONE);
	agent_sched_init(&s, 0, NONE / 2, NONE, false, 0, 0);
	agent_sched_set_window(&s, 5);
	assert_true(s.close_at == NONE);
	assert_true(agent_sched_window_of(&s, NONE) == 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_windows_and_flips),
		cmocka_unit_test(test_late_wake),
		cmocka_unit_test(test_end),
		cmocka_unit_test(test_wait),
		cmocka_unit_test(test_saturation),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
