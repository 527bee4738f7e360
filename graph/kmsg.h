/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Kernel message edges: socket sends matched with the receives that read their bytes, for
 * programs that carry no trace context (docs/graphs.md, "Kernel message edges").
 *
 * A send or receive on a TCP socket is known by the socket's 4-tuple and by where
 * it ends in the byte stream of its direction: tcp_sock.write_seq after a send, copied_seq
 * after a receive (what `cast(args.sk as struct tcp_sock)` reads at tp:sock:sock_send_length
 * and tp:sock:sock_recv_length; docs/language.md, "Kernel structs").  Both ends of a
 * connection number a direction's bytes alike, so the bytes a send wrote,
 * [seq_end - len, seq_end), and those a receive read are comparable across hosts: a receive
 * matches a send when its 4-tuple is the send's mirrored (its local address and port are
 * the send's remote ones) and their ranges overlap.  Every overlapping pair is one match,
 * with the bytes they share: a message read whole is one match, a message read in two
 * pieces two, two messages read at once two.
 *
 * Addresses are IPv4 or IPv6, normalised in one place, kmsg_io_set6(): an IPv6 socket's
 * addresses that are v4-mapped (::ffff:a.b.c.d, an IPv6 socket talking IPv4) are taken as
 * the IPv4 addresses they map, so such a socket matches its IPv4 peer, prints as IPv4 and
 * ships IPv4 attributes; any other IPv6 address stays 16 bytes.  Two ends match only within
 * one family after that (an IPv4 address never equals an IPv6 one).
 *
 * Limits: addresses are compared as the kernel sees them on each host, so NAT between the
 * hosts (or a proxy) hides the match; the ranges of one direction of a connection in one call
 * must lie within 1 GiB before and 3 GiB after its first send (sequence numbers wrap at
 * 4 GiB).  Nothing here allocates beyond the result array and an index of the receives
 * (sorted, and hashed by direction); nothing exits or prints.
 */
#ifndef WEFT_GRAPH_KMSG_H
#define WEFT_GRAPH_KMSG_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One send or receive; IPv4 addresses and ports in host byte order. */
struct kmsg_io {
	uint32_t laddr, raddr; /* local, remote IPv4 address (0 when v6) */
	uint16_t lport, rport;
	uint32_t seq_end; /* the stream's sequence number after this send (receive) */
	uint32_t len; /* bytes sent (received); 0: nothing to match */
	bool v6; /* IPv6: the addresses are laddr6, raddr6 (set by kmsg_io_set6()) */
	uint8_t laddr6[16], raddr6[16]; /* network order; zeros when not v6 */
};

/* The longest address text of kmsg_addr_text() (INET6_ADDRSTRLEN), NUL included. */
#define KMSG_ADDR_TEXT 46

/*
 * Sets io's addresses from an IPv6 socket's (16 bytes each, network order), normalised:
 * both v4-mapped (::ffff:a.b.c.d) -> IPv4 (v6 false, laddr and raddr in host order), else
 * IPv6 (v6 true, laddr and raddr 0).  The one place where addresses are normalised.
 */
void kmsg_io_set6(struct kmsg_io *io, const uint8_t laddr[16], const uint8_t raddr[16]);

/* Whether recv's 4-tuple is send's mirrored (recv's local end is send's remote one). */
bool kmsg_mirrored(const struct kmsg_io *send, const struct kmsg_io *recv);

/* The local (remote) address as text into buf (KMSG_ADDR_TEXT bytes at least):
 * "10.0.0.1", or RFC 5952 text ("2001:db8::1", inet_ntop()) for IPv6.  buf. */
const char *kmsg_addr_text(const struct kmsg_io *io, bool remote, char *buf, size_t sz);

/* Parses kmsg_addr_text()'s IPv6 text (inet_pton(): any valid IPv6 form) into 16 bytes;
 * false if it is not one. */
bool kmsg_addr6_parse(const char *text, uint8_t out[16]);

struct kmsg_match {
	size_t send, recv; /* indexes into the arrays given */
	uint32_t bytes; /* how many bytes of the send the receive read */
};

/*
 * Every (send, receive) pair that matches (above), ordered by send index, then receive index.  *out is malloc()ed (NULL when there is none) and *nout set.
 * 0, -EINVAL (a NULL array with a non-zero count) or -ENOMEM.
 */
int kmsg_match(const struct kmsg_io *sends, size_t nsends, const struct kmsg_io *recvs,
	       size_t nrecvs, struct kmsg_match **out, size_t *nout);

#endif
