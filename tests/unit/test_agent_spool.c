// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests of the agent's spool (agent/daemon.c): the FIFO of partials that waits for the
 * aggregator's Acks.  What must hold: entries leave only when acknowledged (Ack.upto or
 * Welcome.last_seq at or above the seq of their latest transmission); a rewind (a new
 * connection) makes every entry unsent again, in order; the bounds drop the oldest entries,
 * counted, and never the newest.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "agent/daemon.h"

/* A spool entry that says which partial it is: its first byte. */
static void add(struct agent_spool *s, uint8_t id, size_t len, unsigned expect_dropped)
{
	uint8_t *b = calloc(1, len);

	assert_non_null(b);
	b[0] = id;
	assert_int_equal(agent_spool_add(s, b, len), expect_dropped);
}

/* Sends the next unsent entry with seq, checking which one it is. */
static void send_next(struct agent_spool *s, uint8_t expect_id, uint64_t seq)
{
	size_t len = 0;
	const uint8_t *b = agent_spool_next(s, &len);

	assert_non_null(b);
	assert_int_equal(b[0], expect_id);
	agent_spool_mark_sent(s, seq);
}

static void test_ack_in_order(void **state)
{
	struct agent_spool *s = agent_spool_new(0, 0);
	size_t len;

	assert_non_null(s);
	assert_null(agent_spool_next(s, &len));
	for (uint8_t i = 1; i <= 5; i++)
		add(s, i, 10, 0);
	assert_int_equal(agent_spool_count(s), 5);
	assert_int_equal(agent_spool_bytes(s), 50);
	/* seqs are per transmission: heartbeats in between leave gaps */
	send_next(s, 1, 3);
	send_next(s, 2, 4);
	send_next(s, 3, 7);
	/* an Ack below everything removes nothing; unsent entries are never acked */
	assert_int_equal(agent_spool_ack(s, 2), 0);
	assert_int_equal(agent_spool_ack(s, 5), 2);
	assert_int_equal(agent_spool_count(s), 3);
	assert_int_equal(agent_spool_ack(s, 1000), 1); /* only entry 3 was sent */
	assert_int_equal(agent_spool_count(s), 2);
	send_next(s, 4, 8);
	send_next(s, 5, 9);
	assert_null(agent_spool_next(s, &len));
	assert_int_equal(agent_spool_ack(s, 9), 2);
	assert_int_equal(agent_spool_count(s), 0);
	assert_int_equal(agent_spool_bytes(s), 0);
	assert_int_equal(agent_spool_dropped(s), 0);
	agent_spool_free(s);
}

/* A reconnect: the Welcome acknowledges what arrived, the rest goes again, in order, with
 * new seqs above the Hello's. */
static void test_reconnect(void **state)
{
	struct agent_spool *s = agent_spool_new(0, 0);

	for (uint8_t i = 1; i <= 4; i++)
		add(s, i, 10, 0);
	send_next(s, 1, 10);
	send_next(s, 2, 11);
	send_next(s, 3, 12); /* the link dies; 11 and 12 never arrived */
	/* Hello is seq 13; Welcome.last_seq = 10 */
	assert_int_equal(agent_spool_ack(s, 10), 1);
	assert_int_equal(agent_spool_rewind(s), 3);
	send_next(s, 2, 14);
	send_next(s, 3, 15);
	send_next(s, 4, 16);
	/* a stale Ack of the old seq 12 cannot drop entry 3, now sent as 15 */
	assert_int_equal(agent_spool_ack(s, 12), 0);
	assert_int_equal(agent_spool_ack(s, 15), 2);
	assert_int_equal(agent_spool_count(s), 1);
	agent_spool_free(s);
}

/* Partials and GraphBatches share the FIFO: each entry keeps its body kind through sends,
 * rewinds and acks, so that a resent batch goes out as what it was. */
static void test_kinds(void **state)
{
	struct agent_spool *s = agent_spool_new(0, 0);
	static const Weft__Envelope__BodyCase kinds[4] = { WEFT__ENVELOPE__BODY_PARTIAL,
							   WEFT__ENVELOPE__BODY_GRAPH_BATCH,
							   WEFT__ENVELOPE__BODY_GRAPH_BATCH,
							   WEFT__ENVELOPE__BODY_PARTIAL };

	(void)state;
	for (uint8_t i = 0; i < 4; i++) {
		uint8_t *b = calloc(1, 8);

		assert_non_null(b);
		b[0] = i + 1;
		assert_int_equal(agent_spool_add_kind(s, kinds[i], b, 8), 0);
	}
	for (int round = 0; round < 2; round++) {
		for (uint8_t i = 0; i < 4; i++) {
			assert_int_equal(agent_spool_kind(s), kinds[i]);
			send_next(s, i + 1, 10 * (uint64_t)round + i + 1);
		}
		/* nothing unsent: a Partial, the default */
		assert_int_equal(agent_spool_kind(s), WEFT__ENVELOPE__BODY_PARTIAL);
		agent_spool_rewind(s);
	}
	assert_int_equal(agent_spool_ack(s, 0), 0);
	send_next(s, 1, 21);
	assert_int_equal(agent_spool_ack(s, 21), 1);
	assert_int_equal(agent_spool_kind(s), WEFT__ENVELOPE__BODY_GRAPH_BATCH);
	agent_spool_free(s);
}

static void test_bounds(void **state)
{
	struct agent_spool *s = agent_spool_new(3, 100);
	size_t len;
	const uint8_t *b;

	add(s, 1, 10, 0);
	add(s, 2, 10, 0);
	add(s, 3, 10, 0);
	send_next(s, 1, 1);
	add(s, 4, 10, 1); /* count bound: 1 (sent) dropped */
	assert_int_equal(agent_spool_count(s), 3);
	assert_int_equal(agent_spool_dropped(s), 1);
	/* the next unsent is still 2: dropping a sent entry keeps the prefix right */
	b = agent_spool_next(s, &len);
	assert_int_equal(b[0], 2);
	add(s, 5, 85, 2); /* byte bound: 10 + 10 + 85 > 100, so 2 and 3 go */
	assert_int_equal(agent_spool_count(s), 2);
	assert_int_equal(agent_spool_bytes(s), 95);
	assert_int_equal(agent_spool_dropped(s), 3);
	add(s, 6, 500, 2); /* bigger than the bound: it stays, alone */
	assert_int_equal(agent_spool_count(s), 1);
	b = agent_spool_next(s, &len);
	assert_int_equal(b[0], 6);
	assert_int_equal(len, 500);
	agent_spool_free(s);

	/* a large spool grows its ring and keeps the order across the wrap */
	s = agent_spool_new(1000, 1u << 30);
	for (int k = 0; k < 100; k++) {
		for (int j = 0; j < 3; j++)
			add(s, (uint8_t)(3 * k + j), 1, 0);
		send_next(s, (uint8_t)(2 * k), 2 * (uint64_t)k + 1);
		send_next(s, (uint8_t)(2 * k + 1), 2 * (uint64_t)k + 2);
		assert_int_equal(agent_spool_ack(s, 2 * (uint64_t)k + 2), 2);
	}
	assert_int_equal(agent_spool_count(s), 100);
	b = agent_spool_next(s, &len);
	assert_int_equal(b[0], 200);
	agent_spool_free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ack_in_order),
		cmocka_unit_test(test_reconnect),
		cmocka_unit_test(test_bounds),
		cmocka_unit_test(test_kinds),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
