/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The agent daemon (`weft agent`): one host's member of the cluster.
 *
 * It connects out to one aggregator (a ZeroMQ DEALER, CURVE client trusting only that
 * aggregator's public key), introduces itself (Hello), and then runs what the aggregator
 * sends: QueryStart brings a manifest and a compiled BPF object (agents never compile), the
 * agent loads and attaches it (agent/agent.h) and ships one Partial per window, aligned to
 * the query's epoch in CLOCK_REALTIME so that every host's window w covers the same time.
 * QueryStop, or the query's end time, detaches it and ships the last window (last=true).
 *
 * Delivery: every Partial stays in a bounded in-memory spool until the aggregator
 * acknowledges it (Ack{upto}); after a reconnect the agent says Hello again and resends what
 * the Welcome does not cover.  The rules that make this exactly-once are in
 * docs/protocol.md ("Acks, the spool and reconnecting").
 *
 * Security: the agent has exactly one socket, and CURVE with the pinned server key means
 * only the holder of the aggregator's secret key can talk on it; so every QueryStart comes
 * from the authenticated aggregator, and nothing else can make this host load a program.
 *
 * Must never: let a malformed message crash it or start anything (they are counted and
 * logged at debug), block on a slow aggregator (sends do not wait; the spool absorbs), or
 * grow without bound (the spool drops its oldest partial when full, counted and reported).
 */
#ifndef WEFT_AGENT_DAEMON_H
#define WEFT_AGENT_DAEMON_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "agent/wire.h"

#define AGENT_SPOOL_MAX_DEFAULT 4096u
#define AGENT_SPOOL_BYTES_DEFAULT (64ull << 20)
/* Graph elements (tasks, events and edges) one GraphBatch carries at most: a window with more
 * is sent as several batches, whole traces together where they fit. */
#define AGENT_GRAPH_BATCH_DEFAULT 20000u

struct agent_daemon_opts {
	size_t sz; /* sizeof(struct agent_daemon_opts) */
	const char *endpoint; /* the aggregator: tcp://HOST:PORT */
	const char *server_key; /* its public key (Z85): the only peer this agent trusts */
	const char *public_key; /* this agent's key pair (Z85) */
	const char *secret_key;
	const char *host; /* the name results are keyed by; NULL: gethostname() */
	uint32_t spool_max; /* partials kept until acknowledged; 0: 4096 */
	uint64_t spool_max_bytes; /* and their bytes; 0: 64 MiB */
	uint32_t graph_batch_max; /* graph elements a batch carries; 0: AGENT_GRAPH_BATCH_DEFAULT */
	int stop_fd; /* becomes readable: shut down (a signalfd); -1: none */
	bool verbose; /* full verifier logs in QueryError.detail */
	double cpu_budget; /* % of one CPU each query's probes may cost (agent/agent.h);
			    * 0: AGENT_CPU_BUDGET_DEFAULT; < 0: no budget */
	const struct agent_scope *scope; /* trace only these processes (agent/scope.h), and
					  * say so in Hello; NULL: all.  Borrowed: open until
					  * agent_daemon_free() */
};

struct agent_scope;

struct agent_daemon_stats {
	uint64_t sent; /* envelopes handed to ZeroMQ */
	uint64_t received; /* envelopes accepted */
	uint64_t rejected; /* malformed, out of sequence, or not for an agent */
	uint64_t partials; /* partials made (each window of each query) */
	uint64_t resent; /* partials sent again after a reconnect */
	uint64_t spooled; /* partials waiting for an Ack now */
	uint64_t spool_bytes;
	uint64_t spool_dropped; /* partials dropped because the spool was full */
	uint64_t connects; /* Welcomes received */
	uint64_t queries; /* running now */
	uint64_t graph_batches; /* GraphBatches spooled */
	uint64_t graph_lost; /* graph elements that could not be packed into a batch */
	uint64_t row_batches; /* RowBatches spooled (stream queries) */
	uint64_t rows; /* stream rows spooled */
	uint64_t rows_lost; /* stream rows that could not be shipped (also in RowBatch.lost) */
	bool connected; /* welcomed on the current connection */
};

struct agent_daemon;

/* Checks the options and keys and sets up ZeroMQ; connects in agent_daemon_run().  NULL with
 * errno (EINVAL: a missing endpoint or a bad key). */
struct agent_daemon *agent_daemon_new(const struct agent_daemon_opts *opts);
/* Runs until stop_fd becomes readable; then detaches every query, ships what it holds and
 * waits briefly for the Acks.  0, or -errno if the loop itself failed. */
int agent_daemon_run(struct agent_daemon *d);
void agent_daemon_stats(const struct agent_daemon *d, struct agent_daemon_stats *st);
void agent_daemon_free(struct agent_daemon *d);

struct graph;
struct wire_graph_meta;
/*
 * Ships graph elements of a graph query (agent/graphcap.c calls it per window): packed into
 * GraphBatches (agent/wire_graph.h; m->host is set to the agent's --host) and spooled like a
 * Partial, so that they are resent after a reconnect until acknowledged, and stored once.
 * More than graph_batch_max elements, or more bytes than one message may carry, are sent as
 * several batches in order: split by trace (a trace's elements stay together unless one trace
 * alone is too big), the aggregates and `lost` on the first, `last` on the last.  0, or -errno
 * (-EINVAL: a batch cannot be packed; its elements are counted in the daemon's graph_lost).
 */
int agent_daemon_graph_batch(struct agent_daemon *d, const struct wire_graph_meta *m,
			     const struct graph *g);

/*
 * The spool, exposed for its unit test: a FIFO of packed Partials, each stamped with the seq
 * of its latest transmission (0: not sent on this connection).  Sent entries are always a
 * prefix (sends go in order).
 */
struct agent_spool;
struct agent_spool *agent_spool_new(uint32_t max, uint64_t max_bytes);
void agent_spool_free(struct agent_spool *s);
/* Takes ownership of buf (malloc'd).  Drops the oldest entries while full; returns how many
 * were dropped. */
unsigned agent_spool_add(struct agent_spool *s, void *buf, size_t len);
/* The same for a body of another kind (a packed Weft__GraphBatch). */
unsigned agent_spool_add_kind(struct agent_spool *s, Weft__Envelope__BodyCase kind, void *buf,
			      size_t len);
/* A RowBatch of `rows` rows of query qid: when the spool drops it (full), the rows are
 * counted for that query (agent_spool_rows_dropped()). */
unsigned agent_spool_add_rows(struct agent_spool *s, void *buf, size_t len, uint64_t qid,
			      uint64_t rows);
/* The rows of query qid's RowBatches the spool dropped since the last call (taken). */
uint64_t agent_spool_rows_dropped(struct agent_spool *s, uint64_t qid);
/* The kind of the entry agent_spool_next() returns (a Partial when none). */
Weft__Envelope__BodyCase agent_spool_kind(const struct agent_spool *s);
/* The oldest entry not yet sent on this connection, or NULL. */
const void *agent_spool_next(const struct agent_spool *s, size_t *len);
void agent_spool_mark_sent(struct agent_spool *s, uint64_t seq); /* of agent_spool_next() */
/* Drops the sent entries with seq <= upto (they were merged); returns how many. */
size_t agent_spool_ack(struct agent_spool *s, uint64_t upto);
/* A new connection: every entry becomes unsent again.  Returns how many there are. */
size_t agent_spool_rewind(struct agent_spool *s);
size_t agent_spool_count(const struct agent_spool *s);
uint64_t agent_spool_bytes(const struct agent_spool *s);
uint64_t agent_spool_dropped(const struct agent_spool *s);

#endif
