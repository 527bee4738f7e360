/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The cluster aggregator (`weft aggregator`) and the client side of its protocol (`weft
 * submit`, `weft status`, `weft cancel`).  Library weft_aggregator: it sits above agent/
 * (tables of mergeable states, the wire) and compiler/ (manifests), and below tools/.
 *
 * The parts, each a file:
 *   aggd.c         the daemon: one ROUTER socket for agents, clients and child aggregators;
 *                  the registry of peers; queries (start, stop); acknowledgements; the loop
 *   aggd_msg.c     what each checked message does (Hello, Partial, Submit, Subscribe, ...)
 *   aggd_status.c  status replies
 *   aggd_emit.c    closed windows out: results to subscribers, checkpoints, the parent
 *   aggd_parent.c  the link to a parent aggregator (a tree), a sender session (agent/session.h)
 *   aggd_restore.c queries rebuilt from the store at start-up
 *   aggd_window.c  the windows of one query: merging partials, the close rules (every live
 *                  agent reported, or the lateness bound passed), revisions for late partials,
 *                  bounded retention.  Pure: no sockets, no clock of its own (tests drive it)
 *   aggd_store.c   the embedded SQLite store: queries, merged partials, per-sender merged
 *                  sequence numbers, emitted windows, the spool towards the parent
 *   aggd_client.c  a client connection: a sender session (CURVE, Hello/Welcome, heartbeats,
 *                  reconnects) that renews its subscriptions after a reconnect
 *   zap.c          who may connect: the allow-list and the ZAP handler (zap.h)
 * aggd_int.h holds what aggd*.c share; it is not an API.
 *
 * The rules the daemon keeps (docs/protocol.md, "The aggregator: windows, lateness,
 * revisions"): a partial is merged at most once (per sender instance, by sequence number,
 * persisted with the merge in one transaction) and acknowledged only once persisted; a
 * window's result is emitted once it is complete or late, and again, with a higher revision,
 * for each batch of late partials while it is retained; nothing a peer sends can crash the
 * daemon or make it block: hostile messages are counted, slow clients lose results (counted),
 * never stall the merge.
 */
#ifndef WEFT_AGGD_H
#define WEFT_AGGD_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "aggregator/zap.h"
#include "compiler/plan.h"
#include "kernel/weft_abi.h"

#define AGGD_DEFAULT_PORT 7470
#define AGGD_DEFAULT_LATENESS_NS 2000000000ULL /* 2 s */
#define AGGD_DEFAULT_HEARTBEAT_MS 1000
#define AGGD_EXPIRE_BEATS 3 /* a peer silent for 3 heartbeat intervals is expired */
#define AGGD_KEEP_WINDOWS 64 /* closed windows retained per query, for late partials */
#define AGGD_KEEP_NS (600ULL * 1000000000ULL) /* ... and for at most 10 minutes */
/* Under load, checkpoints to the store (and so Acks) come at most this often: a checkpoint
 * writes each changed window once, however many partials it merged */
#define AGGD_CHECKPOINT_NS 50000000ULL /* 50 ms */
#define AGGD_MAX_OPEN 256 /* open windows per query; partials further ahead are refused */
#define AGGD_MAX_QUERIES 1024 /* running queries */
#define AGGD_MAX_HOST (WIRE_MAX_HOST + 1) /* bytes of a host name, NUL included */

/* The default store: /var/lib/weft/aggregator.sqlite for root, else
 * $XDG_STATE_HOME/weft/aggregator.sqlite (~/.local/state/...).  Written into buf. */
int aggd_store_default_path(char *buf, size_t sz);
/* The default graph store (where GraphBatches are stored, and what `weft graph` reads):
 * $WEFT_GRAPH_STORE, else AGGD_GRAPH_FILE in the directory of the aggregator's store `store`
 * (NULL: the default store's; ":memory:" for ":memory:").  Written into buf. */
#define AGGD_GRAPH_FILE "graph.sqlite"
int aggd_graph_default_path(const char *store, char *buf, size_t sz);

/* ---- the windows of one query (aggd_window.c) ---- */

struct aggd_qwin_opts {
	size_t sz; /* sizeof(struct aggd_qwin_opts) */
	uint64_t epoch_ns; /* CLOCK_REALTIME start of window 0 */
	uint64_t every_ns; /* window length; 0: one window, closed when the query ends */
	uint64_t end_ns; /* the query ends here (`for`); 0: when stopped */
	uint64_t lateness_ns; /* how long after its end a window waits for missing agents */
	uint32_t keep_windows; /* closed windows retained (0: AGGD_KEEP_WINDOWS) */
	uint64_t keep_ns; /* ... and for how long after closing (0: AGGD_KEEP_NS) */
	uint32_t max_groups; /* groups per window table (0: the table's default) */
};

/* One window as the emit callback sees it (valid during the call only). */
struct aggd_window_view {
	uint64_t index;
	uint64_t start_ns, end_ns; /* CLOCK_REALTIME bounds */
	const struct agent_table *table;
	uint64_t drops[WEFT_DROP_NR];
	uint64_t misses;
	uint64_t overflow; /* groups senders could not hold, plus those this table could not */
	const char *const *hosts; /* hosts merged into it, sorted */
	size_t nhosts;
	const char *const *missing; /* members expected for it that did not report, sorted */
	size_t nmissing;
	uint32_t revision; /* 0 when first closed, +1 for each re-emission with late partials */
	bool last; /* the final window of the query */
};

typedef int (*aggd_emit_fn)(void *ctx, const struct aggd_window_view *w);

/* What became of a partial handed to aggd_qwin_add(). */
enum aggd_merge {
	AGGD_MERGED, /* into an open window */
	AGGD_REVISED, /* into a closed, retained window: it will be emitted again */
	AGGD_LATE, /* for a window no longer retained (or after the end): counted, dropped */
};

struct aggd_qwin;

/* A query's windows; reads p, which must outlive it.  NULL with errno (EINVAL: not an
 * aggregating plan; ENOMEM). */
struct aggd_qwin *aggd_qwin_new(const struct plan *p, const struct aggd_qwin_opts *o);
void aggd_qwin_free(struct aggd_qwin *q);

/* The window a CLOCK_REALTIME instant falls in (0 before the epoch or without `every`). */
uint64_t aggd_qwin_window_of(const struct aggd_qwin *q, uint64_t t_ns);

/*
 * Members: the senders (agents, child aggregators) running the query.  A member expected for
 * window w is alive, joined at a window <= w, has not failed, and has not ended before w.
 * aggd_qwin_member() adds one or updates its liveness (an existing member keeps the window it
 * joined at).  0 or -ENOMEM.
 */
int aggd_qwin_member(struct aggd_qwin *q, const char *host, uint64_t from_window, bool alive);
void aggd_qwin_member_fail(struct aggd_qwin *q, const char *host); /* QueryError */
/* Forgets a member (an agent expired long ago): it is no longer reported missing. */
void aggd_qwin_member_forget(struct aggd_qwin *q, const char *host);
bool aggd_qwin_has_member(const struct aggd_qwin *q, const char *host);

/*
 * Merges one partial (its sender is pt->host; the hosts merged into it pt->hosts, or pt->host
 * when empty).  now_ns is CLOCK_REALTIME.  Returns an enum aggd_merge, or -EINVAL (states
 * that do not decode for this plan: nothing merged; or a window too far ahead), -ENOMEM.
 */
int aggd_qwin_add(struct aggd_qwin *q, const Weft__Partial *pt, uint64_t now_ns);
/* The lowest window still held (open or retained); partials below it are too late. */
uint64_t aggd_qwin_retained_from(const struct aggd_qwin *q);

/*
 * Closes every window that is due, in order, and re-emits every retained window that late
 * partials changed; fn is called for each (an error from fn is returned after all were
 * called).  Then evicts closed windows beyond retention.  Returns the number of windows
 * emitted, or -errno.
 */
int aggd_qwin_tick(struct aggd_qwin *q, uint64_t now_ns, aggd_emit_fn fn, void *ctx);
/* Calls fn for every retained closed window with index >= from, as last emitted (a client
 * that subscribes late or again).  Counts nothing.  Returns how many, or -errno. */
int aggd_qwin_replay(struct aggd_qwin *q, uint64_t from, aggd_emit_fn fn, void *ctx);
/* The query was cancelled at now_ns: the window holding now_ns (or a later one a member
 * already reported) is the last; windows close when the members have sent their last
 * partials or the lateness bound passes. */
void aggd_qwin_stop(struct aggd_qwin *q, uint64_t now_ns);
/* The final window was emitted. */
bool aggd_qwin_done(const struct aggd_qwin *q);
/*
 * Checkpoints: what changed since the last aggd_qwin_checkpoint(), for the store.  win_fn is
 * called for every window merged into since then and not emitted since (the view's missing
 * are the hosts child aggregators named missing, not the computed ones; revision and last
 * are not set), mem_fn for every member added or changed (its window progress included).
 * Windows emitted by aggd_qwin_tick() need no checkpoint: the emitted record holds them.
 * A callback's error stops the walk and is returned; what was not written stays changed.
 */
struct aggd_member_view {
	const char *host;
	uint64_t from, last, hi;
	bool failed;
	bool gone; /* forgotten (aggd_qwin_member_forget()): to delete; only host is set */
};
int aggd_qwin_checkpoint(struct aggd_qwin *q, aggd_emit_fn win_fn,
			 int (*mem_fn)(void *ctx, const struct aggd_member_view *m), void *ctx);
/* A checkpoint was not committed: every window holding data and every member is changed. */
void aggd_qwin_changed_all(struct aggd_qwin *q);
/*
 * Restoring after a restart, in this order: the members, then the closed windows in window
 * order, then the snapshots.  A restored member is not alive, but until the hold
 * (aggd_qwin_hold()) ends it counts as alive for completeness, so that windows wait for it
 * to reconnect; aggd_qwin_member() with alive makes it alive.  A closed window was emitted
 * before the restart with this revision, holding merged (its groups, drops and hosts; may be
 * NULL).  A snapshot is a window's merged state at the last checkpoint: an open window's,
 * or a closed one's merged into after its emission, which is then emitted again (a
 * revision).  0, -EINVAL (merged does not fit the plan) or -ENOMEM.
 */
int aggd_qwin_restore_member(struct aggd_qwin *q, const struct aggd_member_view *m);
int aggd_qwin_restore_closed(struct aggd_qwin *q, uint64_t index, uint32_t revision,
			     uint64_t closed_ns, const Weft__Partial *merged);
int aggd_qwin_restore_snapshot(struct aggd_qwin *q, const Weft__Partial *merged);
/* The first window not yet closed; windows before it that were never opened stay closed. */
uint64_t aggd_qwin_next_close(const struct aggd_qwin *q);
/* After a restart: no window closes by its deadline before until_ns, so that agents have
 * time to reconnect and resend what they spooled (complete windows still close). */
void aggd_qwin_hold(struct aggd_qwin *q, uint64_t until_ns);
void aggd_qwin_skip_to(struct aggd_qwin *q, uint64_t index);

struct aggd_qwin_stats {
	uint64_t emitted; /* results emitted, revisions included */
	uint64_t revisions; /* of which revisions */
	uint64_t late_dropped; /* partials too late to merge */
	uint64_t open; /* windows open now */
	uint64_t retained; /* closed windows retained */
};
void aggd_qwin_stats(const struct aggd_qwin *q, struct aggd_qwin_stats *st);

/* ---- the store (aggd_store.c) ---- */

struct aggd_store;

struct aggd_stored_query {
	uint64_t id;
	const char *query;
	const void *manifest;
	size_t manifest_len;
	const void *object;
	size_t object_len;
	uint64_t epoch_ns, end_ns;
	uint64_t parent_id; /* the query's id at the parent aggregator; 0: submitted here */
	bool ended;
	/* Submit.only_hosts: the agents it runs on, '\n'-separated; NULL or "": every agent */
	const char *only_hosts;
	uint64_t vm_host; /* Submit.vm_sync_host: the host side of its VM synchronisation */
};

/* Opens (creating it and its directory, 0700, when absent) the store at path, or an
 * in-memory store for ":memory:".  Only one process may hold a store: a second open fails
 * with EBUSY.  NULL with errno and a reason in err. */
struct aggd_store *aggd_store_open(const char *path, char *err, size_t errsz);
void aggd_store_close(struct aggd_store *s);

/* Transactions group the writes of one batch of messages; nested begins are counted. */
int aggd_store_begin(struct aggd_store *s);
int aggd_store_commit(struct aggd_store *s);
void aggd_store_rollback(struct aggd_store *s);

/* Assigns q->id (never reused).  0 or -errno. */
int aggd_store_query_add(struct aggd_store *s, struct aggd_stored_query *q);
int aggd_store_query_end(struct aggd_store *s, uint64_t id);
/* Calls fn for every query not ended, in id order; fn's pointers are valid during the call. */
int aggd_store_queries_load(struct aggd_store *s,
			    int (*fn)(void *ctx, const struct aggd_stored_query *q), void *ctx);

/* A window's merged state at a checkpoint (a packed Weft__Partial), until it is emitted. */
int aggd_store_snapshot_set(struct aggd_store *s, uint64_t query_id, uint64_t window,
			    const void *body, size_t len);
int aggd_store_snapshots_load(struct aggd_store *s, uint64_t query_id,
			      int (*fn)(void *ctx, uint64_t window, const void *body, size_t len),
			      void *ctx);

/* A sender expected for a query's windows (see aggd_qwin_member()). */
struct aggd_stored_member {
	const char *host;
	uint64_t from, last, hi;
	bool failed;
};
int aggd_store_member_set(struct aggd_store *s, uint64_t query_id,
			  const struct aggd_stored_member *m);
int aggd_store_member_del(struct aggd_store *s, uint64_t query_id, const char *host);
int aggd_store_members_load(struct aggd_store *s, uint64_t query_id,
			    int (*fn)(void *ctx, const struct aggd_stored_member *m), void *ctx);
/* Forgets the snapshots and emitted-window records of windows < window. */
int aggd_store_windows_forget(struct aggd_store *s, uint64_t query_id, uint64_t window);

/* The highest sequence number merged from a sender instance (0: none). */
int aggd_store_sender_get(struct aggd_store *s, const char *host, uint64_t instance,
			  uint64_t *upto);
int aggd_store_sender_set(struct aggd_store *s, const char *host, uint64_t instance, uint64_t upto);

/* A window emitted (again): its revision and its merged groups as a packed Weft__Partial,
 * which replace the partials merged into it so far. */
int aggd_store_window_emitted(struct aggd_store *s, uint64_t query_id, uint64_t window,
			      uint32_t revision, uint64_t closed_ns, const void *body, size_t len);
int aggd_store_windows_load(struct aggd_store *s, uint64_t query_id,
			    int (*fn)(void *ctx, uint64_t window, uint32_t revision,
				      uint64_t closed_ns, const void *body, size_t len),
			    void *ctx);

/* Small named integers: the parent link's instance and next sequence number. */
int aggd_store_meta_get(struct aggd_store *s, const char *key, uint64_t *v); /* -ENOENT */
int aggd_store_meta_set(struct aggd_store *s, const char *key, uint64_t v);

/*
 * The spool towards the parent: packed Weft__Partials and Weft__GraphBatches (kind: the
 * Envelope body number) by a local id (oldest first), each with
 * the seq of its latest transmission (tx; 0: not sent since the last Hello).  tx is written
 * before the bytes leave, so that after a restart the parent's Welcome.last_seq tells which
 * entries it merged.
 */
int aggd_store_spool_add(struct aggd_store *s, uint64_t id, int kind, const void *body, size_t len);
int aggd_store_spool_tx(struct aggd_store *s, uint64_t id, uint64_t tx);
int aggd_store_spool_del(struct aggd_store *s, uint64_t id);
int aggd_store_spool_load(struct aggd_store *s,
			  int (*fn)(void *ctx, uint64_t id, uint64_t tx, int kind, const void *body,
				    size_t len),
			  void *ctx);

/* ---- the daemon (aggd.c) ---- */

struct aggd_opts {
	size_t sz; /* sizeof(struct aggd_opts) */
	const char *listen; /* ZeroMQ endpoint to bind, e.g. tcp://0.0.0.0:7470 */
	const char *key_file; /* this aggregator's key pair */
	const char *allow_file; /* allow-list of peers */
	const char *store; /* path, ":memory:", or NULL for aggd_store_default_path() */
	const char *parent; /* endpoint of a parent aggregator, or NULL */
	const char *parent_key; /* the parent's public key file */
	const char *name; /* this aggregator's name (default: the host name) */
	uint64_t lateness_ns; /* 0: AGGD_DEFAULT_LATENESS_NS */
	uint64_t heartbeat_ms; /* 0: AGGD_DEFAULT_HEARTBEAT_MS */
	uint32_t keep_windows; /* 0: AGGD_KEEP_WINDOWS */
	uint64_t spool_max; /* partials spooled towards the parent (0: 4096) */
	/* the graph store: GraphBatches are stored there, the web face shows its traces; NULL:
	 * aggd_graph_default_path() */
	const char *graph_store;
	/* the graph store kept bounded (graph_retention_step()): 0, 0 for none */
	uint64_t graph_max_age_ns, graph_max_bytes;
	/* the web face (aggregator/web.h): ADDR:PORT to serve, or NULL */
	const char *http;
	const char *http_token; /* the bearer token's file; required off loopback */
	/* forwarding stitched graphs to an OTLP/HTTP collector (aggd_gfwd.c): its URL, or
	 * NULL; the rest 0 for the defaults (AGGD_GFWD_*, graph/forward.h); UINT64_MAX for
	 * aggs_ns: never, for wait_ns: do not wait */
	const char *graph_forward;
	const char *graph_forward_spool; /* NULL: AGGD_GFWD_SPOOL_DIR next to the graph store */
	uint64_t graph_forward_spool_max; /* bytes */
	size_t graph_forward_batch; /* spans per request, about */
	uint64_t graph_forward_linger_ns;
	uint64_t graph_forward_queue; /* elements waiting for the forwarding thread */
	uint64_t graph_forward_aggs_ns; /* how often the aggregates go */
	uint64_t graph_forward_wait_ns; /* at a clean stop, how long the collector gets */
	/* a stream query's relayed row batches kept for a client that comes back (forgotten
	 * while slow, or reconnected), in bytes per query: 0 AGGD_STREAM_KEEP_DEFAULT, < 0
	 * none */
	int64_t stream_keep;
};

#define AGGD_STREAM_KEEP_DEFAULT (32LL << 20) /* 32 MiB a stream query */
#define AGGD_STREAM_KEEP_STREAMS 8 /* and all streams' together at most 8 times that */
#define AGGD_STREAM_KEEP_BATCHES (1u << 20) /* and at most this many batches */

/* Forwarding graphs (aggd_gfwd.c) */
#define AGGD_GFWD_SPOOL_DIR "graph-forward.spool"
#define AGGD_GFWD_LINGER_NS 2000000000ULL /* 2 s */
#define AGGD_GFWD_KEEP_NS 30000000000ULL /* a trace is remembered 30 s after its last piece */
#define AGGD_GFWD_AGGS_NS 60000000000ULL /* 60 s */
#define AGGD_GFWD_WAIT_NS 5000000000ULL /* 5 s */
#define AGGD_GFWD_QUEUE_DEFAULT 1000000ULL /* elements */
#define AGGD_GFWD_KEYS_MAX (1u << 21) /* traces and tasks remembered as forwarded */

struct aggd;

/* Loads keys and the allow-list, opens the store, binds, resumes stored queries.  NULL with
 * errno and a one-line reason in err. */
struct aggd *aggd_new(const struct aggd_opts *o, char *err, size_t errsz);
/* Serves until sig_fd (a signalfd) becomes readable with anything but SIGHUP, which reloads
 * the allow-list instead; any other readable fd also stops it.  0, or -errno on a fatal
 * error. */
int aggd_run(struct aggd *a, int sig_fd);
void aggd_free(struct aggd *a);

/* A StatusReply as the one JSON object `weft status --format json` prints (docs/output.md). */
void aggd_status_json(const Weft__StatusReply *r, FILE *f);

/* A VM synchronisation's state (Result.vm_sync, QueryStatus.vm_sync; aggd_vm.c) as one JSON
 * object (docs/vm.md "Live"), or as one line of text without its newline. */
void aggd_vm_sync_json(const Weft__VmSync *v, FILE *f);
void aggd_vm_sync_text(const Weft__VmSync *v, FILE *f);

/* ---- clients (aggd_client.c) ---- */

struct aggd_client;

/* A client's wait to connect and be welcomed, and the cluster tools' wait for an answer,
 * unless --timeout says otherwise */
#define AGGD_CLIENT_TIMEOUT_MS 5000

struct aggd_client_opts {
	size_t sz;
	const char *endpoint;
	const char *server_key_file; /* the aggregator's public key */
	const char *key_file; /* this client's key pair */
	int timeout_ms; /* to connect and be welcomed (0: AGGD_CLIENT_TIMEOUT_MS) */
};

/*
 * Connects, says Hello as a client and waits for Welcome.  NULL with errno and a reason in
 * err: ETIMEDOUT (no answer), EACCES (the aggregator refused this client's key), or the
 * errors of reading the key files.
 */
struct aggd_client *aggd_client_connect(const struct aggd_client_opts *o, char *err, size_t errsz);
void aggd_client_free(struct aggd_client *c);
/* Sends one envelope (version and seq are set here, e->seq to the seq it went with).  0 or
 * -errno. */
int aggd_client_send(struct aggd_client *c, Weft__Envelope *e);
/* The seq of the caller's last message sent (aggd_client_send(), aggd_client_subscribe()):
 * the in_reply_to of its answer (StatusReply, Error); not changed by what the client sends
 * of its own (heartbeats, renewals, stops sent again).  0 before any. */
uint64_t aggd_client_request_seq(const struct aggd_client *c);
/*
 * Waits up to timeout_ms for a message from the aggregator, sending heartbeats and, after a
 * reconnect, Hello and the subscriptions again.  1 with *out (wire_free() it), 0 on timeout
 * (or a signal), -errno.
 */
int aggd_client_recv(struct aggd_client *c, int timeout_ms, Weft__Envelope **out);
/* Remembers a subscription, to renew after reconnects, and sends it: the aggregator sends
 * every window it still retains, then each new one.  0 or -errno. */
int aggd_client_subscribe(struct aggd_client *c, uint64_t query_id);
/* Remembers a subscription made another way (Submit with follow), to renew it likewise. */
int aggd_client_remember(struct aggd_client *c, uint64_t query_id);
/* Asks the aggregator to stop a query (QueryStop), and asks again after each Welcome until
 * the query's last Result or an Error answering about it came: a stop sent while the
 * aggregator had forgotten this client, or just before a reconnect, is dropped unread.  The
 * answer to a stop sent again is not returned (it may be "no query runs here": it ended
 * meanwhile).  0, -EAGAIN (not sent now: after the next Welcome), or -errno. */
int aggd_client_stop(struct aggd_client *c, uint64_t query_id);
/* The caller has seen the windows before next_window: a renewed subscription asks the
 * aggregator for the retained windows from there (nothing retained is missed). */
void aggd_client_progress(struct aggd_client *c, uint64_t query_id, uint64_t next_window);
/* Whether the aggregator answered a renewed subscription to query_id with an Error (it no
 * longer has the query: forgotten 10 minutes after its end, or its state lost, while this
 * client was away; or its windows are no longer retained): nothing more of it will come.
 * The Error itself is returned to the caller as any other. */
bool aggd_client_sub_gone(const struct aggd_client *c, uint64_t query_id);
const char *aggd_client_server_name(const struct aggd_client *c);
/* Messages from the aggregator that failed validation (counted, dropped). */
uint64_t aggd_client_rejected(const struct aggd_client *c);

#endif
