/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The aggregator's guard over its server socket's connections (aggd_guard.c): a connection
 * holds a file descriptor from the moment it is accepted, long before the CURVE handshake
 * tells who it is, so a flood of connections that never finish their handshake (idle TCP,
 * half a ZMTP greeting, garbage) could take every descriptor and lock out the agents and
 * clients that matter.  The guard bounds them:
 *
 *   - libzmq closes a connection whose handshake takes longer than ZMQ_HANDSHAKE_IVL
 *     (wire_sock.c sets 10 s on the server socket);
 *   - the guard follows every connection through a socket monitor (accepted, gone) and the
 *     first message each one delivers (ZMQ_SRCFD): one that delivered a message is
 *     established, the others are pending;
 *   - when the connections held would come within a reserve of the descriptor limit
 *     (RLIMIT_NOFILE), or more than AGGD_GUARD_MAX_PENDING are pending, it cuts the oldest
 *     pending ones (shutdown(2): libzmq then closes them as it would any dead peer), so
 *     that there is always a descriptor for the next connection, e.g. `weft status`;
 *   - a connection that goes away without having delivered a message (a refused key, a
 *     failed or timed-out handshake, garbage, cut by the guard) is counted: the
 *     aggregator's `rejected` figure includes them.
 *
 * Established connections are never cut.  The guard runs in the daemon's thread (its
 * monitor socket is polled by the main loop); libzmq's own thread does the I/O.
 */
#ifndef WEFT_AGGD_GUARD_H
#define WEFT_AGGD_GUARD_H
#include <stdbool.h>
#include <stdint.h>
#include "base/zmq_dl.h"

#define AGGD_GUARD_MAX_PENDING 16384 /* connections in their handshake, whatever the fds */
#define AGGD_GUARD_RESERVE_MIN 64 /* descriptors kept free: at least this, */
#define AGGD_GUARD_RESERVE_DIV 8 /* or an eighth of the limit, whichever is more */

struct aggd_guard;

/* Watches sock (a bound ROUTER of zctx).  NULL with errno. */
struct aggd_guard *aggd_guard_new(void *zctx, void *sock);
/* Stops watching; before sock is closed. */
void aggd_guard_free(struct aggd_guard *g);
/* The monitor socket, for the main loop's poll (ZMQ_POLLIN: call aggd_guard_poll()). */
void *aggd_guard_socket(const struct aggd_guard *g);
/* Reads what the monitor reported and cuts what is over the bounds. */
void aggd_guard_poll(struct aggd_guard *g);
/* msg (read from the socket) is the first of its routing id: its connection is established. */
void aggd_guard_seen(struct aggd_guard *g, zmq_msg_t *msg);
/* Connections gone without delivering a message, so far. */
uint64_t aggd_guard_failed(const struct aggd_guard *g);
/* Connections the guard cut, so far (counted in aggd_guard_failed() once gone). */
uint64_t aggd_guard_cut(const struct aggd_guard *g);

#endif
