// SPDX-License-Identifier: Apache-2.0
/*
 * Kernel message edges (graph/kmsg.c): sends matched with receives by mirrored 4-tuple and
 * overlapping sequence ranges.  Hand-made conversations check the cases (whole messages
 * across the 2^32 wrap, a message read in pieces, messages read together, the other direction,
 * another connection with the same numbers, a 4-tuple not mirrored); random conversations are
 * checked against the quadratic definition.  IPv6: 4-tuples of 16-byte addresses match as
 * IPv4 ones do, an IPv6 address never equals an IPv4 one, v4-mapped addresses
 * (::ffff:a.b.c.d) are normalised to IPv4 by kmsg_io_set6() and match IPv4 peers; the text
 * forms (RFC 5952) round-trip.
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

static const uint8_t V6A[16] = { 0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1 };
static const uint8_t V6B[16] = { 0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2 };
/* ::ffff:10.0.0.1 and ::ffff:10.0.0.2: A and B v4-mapped */
static const uint8_t MA[16] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1 };
static const uint8_t MB[16] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 2 };

static struct kmsg_io io6(const uint8_t *la, uint16_t lp, const uint8_t *ra, uint16_t rp,
			  uint32_t end, uint32_t len)
{
	struct kmsg_io x = io(0, lp, 0, rp, end, len);

	kmsg_io_set6(&x, la, ra);
	return x;
}

static void test_ipv6(void **state)
{
	/* V6A:1000 -> V6B:80, two messages read whole; the same ports and numbers on IPv4
	 * (A, B) and between other IPv6 hosts (V6B -> V6B) must not match them */
	struct kmsg_io s[3] = { io6(V6A, 1000, V6B, 80, 110, 10), io6(V6A, 1000, V6B, 80, 130, 20),
				io(A, 1000, B, 80, 110, 10) };
	struct kmsg_io r[4] = { io6(V6B, 80, V6A, 1000, 130, 20), io6(V6B, 80, V6A, 1000, 110, 10),
				io(B, 80, A, 1000, 130, 20), io6(V6B, 80, V6B, 1000, 110, 10) };
	char t[KMSG_ADDR_TEXT];
	uint8_t back[16];
	struct kmsg_match *m;
	size_t n;

	(void)state;
	assert_true(s[0].v6 && !s[2].v6 && s[0].laddr == 0 && s[0].raddr == 0);
	assert_int_equal(kmsg_match(s, 3, r, 4, &m, &n), 0);
	assert_int_equal(n, 2);
	assert_true(m[0].send == 0 && m[0].recv == 1 && m[0].bytes == 10);
	assert_true(m[1].send == 1 && m[1].recv == 0 && m[1].bytes == 20);
	free(m);
	assert_true(kmsg_mirrored(&s[0], &r[0]));
	assert_false(kmsg_mirrored(&s[0], &r[2])); /* IPv4 with the same ports */
	assert_false(kmsg_mirrored(&s[0], &r[3])); /* another IPv6 peer */
	assert_false(kmsg_mirrored(&s[2], &r[0]));
	assert_true(kmsg_mirrored(&s[2], &r[2]));
	/* RFC 5952 text, and back */
	assert_string_equal(kmsg_addr_text(&s[0], false, t, sizeof(t)), "2001:db8::1");
	assert_string_equal(kmsg_addr_text(&s[0], true, t, sizeof(t)), "2001:db8::2");
	assert_string_equal(kmsg_addr_text(&s[2], true, t, sizeof(t)), "10.0.0.2");
	assert_true(kmsg_addr6_parse("2001:DB8:0:0::2", back));
	assert_memory_equal(back, V6B, 16);
	assert_false(kmsg_addr6_parse("10.0.0.2", back));
	assert_false(kmsg_addr6_parse("2001:db8::1::2", back));
	assert_false(kmsg_addr6_parse("", back));
}

static void test_v4_mapped(void **state)
{
	/* an IPv6 socket talking IPv4 (server, ::ffff:10.0.0.2:80) with an IPv4 client
	 * (10.0.0.1:1000): the request and the reply both match across the families */
	struct kmsg_io s[2] = { io(A, 1000, B, 80, 100, 100), io6(MB, 80, MA, 1000, 50, 50) };
	struct kmsg_io r[2] = { io6(MB, 80, MA, 1000, 100, 100), io(A, 1000, B, 80, 50, 50) };
	uint8_t half[16];
	char t[KMSG_ADDR_TEXT];
	struct kmsg_match *m;
	size_t n;

	(void)state;
	/* normalised: IPv4 in host order, no 16-byte addresses left */
	assert_false(r[0].v6);
	assert_int_equal(r[0].laddr, B);
	assert_int_equal(r[0].raddr, A);
	for (int i = 0; i < 16; i++)
		assert_true(r[0].laddr6[i] == 0 && r[0].raddr6[i] == 0);
	assert_string_equal(kmsg_addr_text(&r[0], true, t, sizeof(t)), "10.0.0.1");
	assert_int_equal(kmsg_match(s, 2, r, 2, &m, &n), 0);
	assert_int_equal(n, 2);
	assert_true(m[0].send == 0 && m[0].recv == 0 && m[0].bytes == 100);
	assert_true(m[1].send == 1 && m[1].recv == 1 && m[1].bytes == 50);
	free(m);
	assert_true(kmsg_mirrored(&s[0], &r[0]));
	/* the text form of a v4-mapped address normalises the same */
	assert_true(kmsg_addr6_parse("::ffff:10.0.0.2", half));
	assert_memory_equal(half, MB, 16);
	/* one end v4-mapped, the other not (no kernel socket has that): stays IPv6, and so
	 * matches no IPv4 peer */
	s[0] = io6(MA, 1000, V6B, 80, 100, 100);
	assert_true(s[0].v6);
	assert_int_equal(kmsg_match(s, 1, r, 2, &m, &n), 0);
	assert_int_equal(n, 0);
	assert_null(m);
}

/*
 * Random sends and receives in any order, checked against the quadratic definition: the
 * receives overlap one another, some are long, some read a direction nobody sent on, some
 * sends go where nobody reads, some calls are empty, one connection is IPv6 and one has the
 * IPv4 numbers of another's direction; the sends come as a drain gives them (its own, then
 * those remembered from earlier drains: a direction's sends out of stream order), so the
 * search of a direction's receives starts far from where the last one ended.
 */
static void test_random_any_order(void **state)
{
	enum { NMAX = 300 };
	static struct kmsg_io s[NMAX], r[NMAX];

	(void)state;
	srand(777);
	for (int round = 0; round < 200; round++) {
		size_t ns = 0, nr = 0, n, got = 0;
		struct kmsg_match *m;
		uint32_t base = (uint32_t)rand() * 2654435761u;

		while (ns < NMAX || nr < NMAX) {
			int c = rand() % 5; /* 4: a direction the others never use */
			uint16_t port = (uint16_t)(100 + c);
			uint32_t start = base + (uint32_t)(rand() % 20000), len;
			bool send = rand() % 2, v6 = c == 1;

			if (send && ns < NMAX) {
				len = rand() % 20 ? 1 + (uint32_t)(rand() % 700) : 0;
				if (c == 3) /* the IPv4 numbers the other way: B -> A */
					s[ns++] = io(B, 80, A, 100, start + len, len);
				else if (v6)
					s[ns++] = io6(V6A, port, V6B, 80, start + len, len);
				else
					s[ns++] = io(A, port, B, 80, start + len, len);
			} else if (!send && nr < NMAX) {
				len = rand() % 20 ?
					      1 + (uint32_t)(rand() % (rand() % 10 ? 900 : 9000)) :
					      0;
				if (c == 4) /* from a port nobody sends from */
					r[nr++] = io(B, 80, A, 999, start + len, len);
				else if (v6)
					r[nr++] = io6(V6B, 80, V6A, port, start + len, len);
				else
					r[nr++] = io(B, 80, A, port, start + len, len);
			}
		}
		assert_int_equal(kmsg_match(s, ns, r, nr, &m, &n), 0);
		for (size_t i = 0; i < ns; i++)
			for (size_t k = 0; k < nr; k++) {
				int64_t rel, lo, hi;

				if (!s[i].len || !r[k].len || !kmsg_mirrored(&s[i], &r[k]))
					continue;
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
			}
		assert_int_equal(n, got);
		free(m);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_whole_messages_across_wrap),
		cmocka_unit_test(test_ipv6),
		cmocka_unit_test(test_v4_mapped),
		cmocka_unit_test(test_pieces_and_batches),
		cmocka_unit_test(test_directions_and_connections),
		cmocka_unit_test(test_random_against_definition),
		cmocka_unit_test(test_random_any_order),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
