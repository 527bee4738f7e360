/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The sender's session: the one implementation of what a peer that connects out to an
 * aggregator does on the wire.  Three users: the agent (agent/daemon.c), a child aggregator's
 * link to its parent (aggregator/aggd_parent.c) and the client of submit, status and cancel
 * (aggregator/aggd_client.c).
 *
 * States (session.c explains each transition):
 *     down    no socket; a new one is made when the back-off expires (100 ms, doubling to 5 s
 *             while connections fail, back to 100 ms at each Welcome)
 *     hello   a socket, Hello queued as its first message; nothing else is sent until the
 *             Welcome; no Welcome within 10 s of a completed handshake: down
 *     up      welcomed: heartbeats every Welcome.heartbeat_ms, the spool flows
 *
 * The spool of partials waiting for an Ack belongs to the user (the agent keeps it in memory,
 * a child aggregator in its SQLite store); the session reaches it through
 * struct session_spool_ops.  Sending never waits unless the user asks (a client); a full
 * queue leaves partials in the spool for the next session_tick().
 *
 * Must never: send anything but Hello first on a connection, or anything but Hello before
 * the Welcome; reuse a seq of its instance; act on a message that failed a check (those are
 * counted in session_stats.rejected).
 */
#ifndef WEFT_AGENT_SESSION_H
#define WEFT_AGENT_SESSION_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "base/zmq_dl.h"
#include "agent/wire.h"

/* The Error an aggregator answers to a message from a connection that has not said Hello. */
#define SESSION_NOT_WELCOMED "not welcomed: send Hello first"
#define SESSION_WELCOME_TIMEOUT_MS 10000
#define SESSION_BACKOFF_MIN_MS 100
#define SESSION_BACKOFF_MAX_MS 5000
#define SESSION_RETRY_MS 10 /* a full queue held partials back: the next try */
#define SESSION_POLL_ITEMS 2

enum session_state { SESSION_DOWN, SESSION_HELLO, SESSION_UP };

/*
 * The user's spool: a FIFO of packed Weft__Partial (or, with kind(), Weft__GraphBatch) bodies, each with the seq of its latest
 * transmission (0: not sent on this connection); the entries sent on this connection are a
 * prefix, in order.
 */
struct session_spool_ops {
	/* The oldest entry not sent on this connection, or NULL. */
	const void *(*next)(void *spool, size_t *len);
	/*
	 * Optional, for a spool that outlives the process with its instance: before anything is
	 * sent, give seqs first, first + 1, ... to the entries not sent yet, in order, and make
	 * them durable with the highest (a restarted sender must never send a seq again).
	 * Returns how many got one, or -errno (nothing is sent now).  Seqs given are used even if
	 * a full queue keeps their entries back.
	 */
	ssize_t (*reserve)(void *spool, uint64_t first);
	/* The oldest unsent entry went out with seq. */
	void (*mark_sent)(void *spool, uint64_t seq);
	/* Drops the oldest entries whose latest transmission had a seq <= upto (merged): Ack, and
	 * Welcome.last_seq.  Returns how many. */
	size_t (*ack)(void *spool, uint64_t upto);
	/* A new connection: every entry is unsent again.  Returns how many there are. */
	size_t (*rewind)(void *spool);
	size_t (*count)(void *spool); /* entries now, for heartbeats */
	uint64_t (*dropped)(void *spool); /* dropped because it was full, for heartbeats */
	/* Optional: the body of the entry next() returned last (a spool of Partials and
	 * GraphBatches); NULL: every entry is a packed Weft__Partial. */
	Weft__Envelope__BodyCase (*kind)(void *spool);
};

/* What a Welcome did, for the user's log. */
struct session_welcome {
	const Weft__Welcome *w;
	size_t acked; /* spooled partials it said were merged, dropped */
	size_t resend; /* spooled partials to send again */
	bool first; /* the first Welcome of this session */
	bool restarted; /* from another aggregator instance than the Welcome before */
};

/* The user's side; every member but welcomed may be NULL. */
struct session_ops {
	/* Hello.running and Heartbeat.running: a malloc'd array of the query ids it runs. */
	uint64_t *(*running)(void *ctx, size_t *n);
	/* A handshake completed: the Hello is on its way. */
	void (*connected)(void *ctx);
	/* Welcomed (again): the spool was acknowledged and rewound; it is flushed next. */
	void (*welcomed)(void *ctx, const struct session_welcome *sw);
	/* The connection ended (was_up: it had been welcomed); a new one follows after the
	 * back-off. */
	void (*lost)(void *ctx, const char *why, bool was_up);
	/* A handshake failed: auth (the aggregator's allow-list refused our key; status is the
	 * ZAP status), else CURVE itself (not the aggregator's key, or no CURVE there). */
	void (*refused)(void *ctx, bool auth, uint32_t status);
};

struct session_opts {
	size_t sz; /* sizeof(struct session_opts) */
	void *zctx; /* the user's ZeroMQ context */
	const char *endpoint; /* the aggregator: tcp://HOST:PORT */
	const char *server_key; /* its public key (Z85): the only peer trusted */
	const char *public_key, *secret_key; /* this sender's key pair */
	/* Hello: role (agent, client, aggregator), host, version, kernel and features are
	 * copied */
	enum wire_role role;
	const char *host, *version, *kernel;
	const char *const *features;
	size_t nfeatures;
	uint64_t instance; /* 0: a random one */
	uint64_t seq; /* the last seq the instance used (a persistent instance), else 0 */
	bool blocking; /* sends wait for room in the queue (a client); else never */
	const char *log_name; /* the prefix of its own log lines: "agent", "client", ... */
	const struct session_ops *ops;
	void *ctx;
	const struct session_spool_ops *spool_ops; /* NULL: no partials (a client) */
	void *spool;
	const char *scope; /* Hello.scope (copied): an agent's --scope; NULL: none */
};

struct session_stats {
	uint64_t sent; /* envelopes handed to ZeroMQ */
	uint64_t received; /* envelopes accepted */
	uint64_t rejected; /* malformed, out of sequence, before the Welcome, not an aggregator's */
	uint64_t resent; /* spooled partials sent again after a Welcome */
	uint64_t connects; /* Welcomes accepted */
};

struct session;

/* Copies what it needs of o; connects at the first session_tick() or session_connect().
 * NULL with errno (EINVAL: a missing endpoint, context, ops or key). */
struct session *session_new(const struct session_opts *o);
/* Closes the socket (what it still queued gets the socket's linger); not the context. */
void session_free(struct session *s);

/* Makes the socket now (when down) and queues Hello.  0 or -errno (the socket could not be
 * made: a bad endpoint); the session stays down and retries after the back-off. */
int session_connect(struct session *s);
/* What is due: a new connection after the back-off, the Welcome's time-out, a heartbeat, the
 * spool.  Call it at least every session_timeout_ms(). */
void session_tick(struct session *s);
/* Sends what the spool holds unsent (when up), in order, each with a fresh seq. */
void session_flush(struct session *s);
/* Milliseconds until session_tick() has something to do, at most max_ms. */
int session_timeout_ms(const struct session *s, int max_ms);

/* The sockets to poll (the connection and its monitor), into it[SESSION_POLL_ITEMS]; returns
 * how many (0 when down).  After zmq_poll(): session_poll_events() when the monitor's item is
 * readable (a disconnect closes the socket), then session_recv() while it returns 1. */
int session_poll_items(struct session *s, zmq_pollitem_t *it);
void session_poll_events(struct session *s);
/*
 * Reads one message, if one waits: 1, with *out the message for the caller (a body of the
 * aggregator's other than Welcome and Ack, checked and in sequence, or an Error refusing our
 * Hello before any Welcome; wire_free() it), or NULL
 * when the session handled it (Welcome, Ack, the Error "not welcomed") or rejected it
 * (counted); 0 when none waits; -errno.
 */
int session_recv(struct session *s, Weft__Envelope **out);
/* Sends a message (not a partial: those go through the spool) with the next seq.  0, -ENOTCONN
 * before the Welcome, -EAGAIN (the queue is full; never with blocking), or -errno. */
int session_send(struct session *s, Weft__Envelope *e);

enum session_state session_state(const struct session *s);
bool session_up(const struct session *s);
uint64_t session_instance(const struct session *s);
uint64_t session_seq(const struct session *s); /* the last seq used */
const char *session_server_name(const struct session *s); /* from the last Welcome, or "" */
void session_stats(const struct session *s, struct session_stats *st);

#endif
