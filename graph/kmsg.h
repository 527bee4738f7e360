/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Kernel message edges: socket sends matched with the receives that read their bytes, for
 * programs that carry no trace context (docs/graphs.md, "Kernel message edges").
 *
 * A send or receive on a TCP socket over IPv4 is known by the socket's 4-tuple and by where
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
 * Limits: addresses are compared as the kernel sees them on each host, so NAT between the
 * hosts (or a proxy) hides the match; the ranges of one direction of a connection in one call
 * must lie within 1 GiB before and 3 GiB after its first one (sequence numbers wrap at 4 GiB).  Nothing here allocates beyond the result
 * array and a sort index; nothing exits or prints.
 */
#ifndef WEFT_GRAPH_KMSG_H
#define WEFT_GRAPH_KMSG_H
#include <stddef.h>
#include <stdint.h>

/* One send or receive; addresses and ports in host byte order. */
struct kmsg_io {
	uint32_t laddr, raddr; /* local, remote IPv4 address */
	uint16_t lport, rport;
	uint32_t seq_end; /* the stream's sequence number after this send (receive) */
	uint32_t len; /* bytes sent (received); 0: nothing to match */
};

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
