// SPDX-License-Identifier: Apache-2.0
/*
 * Kernel message edges (graph/kmsg.c): sends matched with receives by mirrored 4-tuple and
 * overlapping sequence ranges.  Hand-made conversations check the cases (whole messages
 * across the 2^32 wrap, a message read in pieces, messages read together, the other direction,
 * another connection with the same numbers, a 4-tuple not mirrored); random conversations are
 * checked against the quadratic definition.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>
#include <errno.h>
#include "graph/kmsg.h"

#define A 0x0a000001u /* 10.0.0.1 */
#define B 0x0a000002u

static struct kmsg_io io(uint32_t la, uint16_t lp, uint32_t ra, uint16_t rp, uint32_t end,
			 uint32_t len)
{
	return (struct kmsg_io){
		.laddr = la, .raddr = ra, .lport = lp, .rport = rp, .seq_end = end, .len = len
	};
}

static void test_whole_messages_across_wrap(void **state)
{
	/* A:1000 sends 3 messages to B:80, starting 16 bytes before the wrap; B reads each */
	struct kmsg_io s[3], r[3];
	uint32_t seq = 0xfffffff0u, len[3] = { 10, 20, 30 };
	struct kmsg_match *m;
	size_t n;

	(void)state;
	for (int i = 0; i < 3; i++) {
		seq += len[i];
		s[i] = io(A, 1000, B, 80, seq, len[i]);
		r[2 - i] = io(B, 80, A, 1000, seq, len[i]); /* given in another order */
	}
	assert_int_equal(kmsg_match(s, 3, r, 3, &m, &n), 0);
	assert_int_equal(n, 3);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(m[i].send, i);
		assert_int_equal(m[i].recv, 2 - i);
		assert_int_equal(m[i].bytes, len[i]);
	}
	free(m);
}

static void test_pieces_and_batches(void **state)
{
	/* one send of 100 read as 40 + 60; then two sends of 10 read as one 20 */
	struct kmsg_io s[3] = { io(A, 1, B, 2, 100, 100), io(A, 1, B, 2, 110, 10),
				io(A, 1, B, 2, 120, 10) };
	struct kmsg_io r[3] = { io(B, 2, A, 1, 40, 40), io(B, 2, A, 1, 100, 60),
				io(B, 2, A, 1, 120, 20) };
	struct kmsg_match *m;
	size_t n;

	(void)state;
	assert_int_equal(kmsg_match(s, 3, r, 3, &m, &n), 0);
	assert_int_equal(n, 4);
	assert_true(m[0].send == 0 && m[0].recv == 0 && m[0].bytes == 40);
	assert_true(m[1].send == 0 && m[1].recv == 1 && m[1].bytes == 60);
	assert_true(m[2].send == 1 && m[2].recv == 2 && m[2].bytes == 10);
	assert_true(m[3].send == 2 && m[3].recv == 2 && m[3].bytes == 10);
	free(m);
}

static void test_directions_and_connections(void **state)
{
	/* the same sequence numbers on: the reverse direction, another connection, a receive
	 * whose 4-tuple is the send's own (not mirrored), and an empty read: one match only */
	struct kmsg_io s[2] = { io(A, 1, B, 2, 50, 50), io(B, 2, A, 1, 50, 50) };
	struct kmsg_io r[4] = { io(A, 1, B, 2, 50, 50), io(B, 3, A, 1, 50, 50),
				io(A, 1, B, 2, 50, 0), io(A, 1, B, 2, 50, 50) };
	struct kmsg_match *m;
	size_t n;

	(void)state;
	/* r[0] and r[3]: A:1 receiving from B:2 match s[1] (B:2 -> A:1) */
	assert_int_equal(kmsg_match(s, 2, r, 4, &m, &n), 0);
	assert_int_equal(n, 2);
	assert_true(m[0].send == 1 && m[0].recv == 0 && m[0].bytes == 50);
	assert_true(m[1].send == 1 && m[1].recv == 3 && m[1].bytes == 50);
	free(m);
	assert_int_equal(kmsg_match(NULL, 1, r, 4, &m, &n), -EINVAL);
	assert_int_equal(kmsg_match(NULL, 0, NULL, 0, &m, &n), 0);
	assert_int_equal(n, 0);
	assert_null(m);
}

/* Random conversations on 3 connections, cut into random sends and random reads, against
 * the definition: every pair with the mirrored 4-tuple whose byte ranges overlap. */
static void test_random_against_definition(void **state)
{
	enum { NC = 3, NMAX = 400 };
	static struct kmsg_io s[NMAX], r[NMAX];

	(void)state;
	srand(12345);
	for (int round = 0; round < 50; round++) {
		size_t ns = 0, nr = 0, n, want = 0, got = 0;
		struct kmsg_match *m;

		for (int c = 0; c < NC; c++) {
			uint32_t seq = (uint32_t)rand() * 2654435761u, rseq = seq, end;
			uint32_t total = 1 + (uint32_t)(rand() % 5000);

			end = seq + total;
			while (seq != end && ns < NMAX) {
				uint32_t left = end - seq, l = 1 + (uint32_t)rand() % 700;

				seq += l < left ? l : left;
				s[ns++] =
					io(A, (uint16_t)(100 + c), B, 80, seq, l < left ? l : left);
			}
			while (rseq != end && nr < NMAX) {
				uint32_t left = end - rseq, l = 1 + (uint32_t)rand() % 900;

				rseq += l < left ? l : left;
				r[nr++] = io(B, 80, A, (uint16_t)(100 + c), rseq,
					     l < left ? l : left);
			}
		}
		assert_int_equal(kmsg_match(s, ns, r, nr, &m, &n), 0);
		for (size_t i = 0; i < ns; i++)
			for (size_t k = 0; k < nr; k++) {
				int64_t rel, lo, hi;

				if (s[i].lport != r[k].rport)
					continue;
				/* where the receive starts, relative to the send's first byte */
				rel = (int32_t)((r[k].seq_end - r[k].len) -
						(s[i].seq_end - s[i].len));
				lo = rel > 0 ? rel : 0;
				hi = rel + (int64_t)r[k].len < (int64_t)s[i].len ?
					     rel + (int64_t)r[k].len :
					     (int64_t)s[i].len;
				if (hi <= lo)
					continue;
				assert_true(got < n);
				assert_int_equal(m[got].send, i);
				assert_int_equal(m[got].recv, k);
				assert_int_equal(m[got].bytes, hi - lo);
				got++;
				want++;
			}
		assert_int_equal(n, want);
		free(m);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_whole_messages_across_wrap),
		cmocka_unit_test(test_pieces_and_batches),
		cmocka_unit_test(test_directions_and_connections),
		cmocka_unit_test(test_random_against_definition),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
