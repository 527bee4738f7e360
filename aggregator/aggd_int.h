/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The aggregator daemon's insides, shared by the files that make it up (aggd.c: the server,
 * its peers and queries, and its main loop; aggd_msg.c: the message handlers; aggd_status.c:
 * status replies; aggd_emit.c: windows out; aggd_parent.c: the link to a parent aggregator in
 * a tree; aggd_restore.c: rebuilding queries from the store at start-up).  Not an API:
 * nothing outside aggregator/aggd*.c includes it.
 */
#ifndef WEFT_AGGD_INT_H
#define WEFT_AGGD_INT_H
#include <stdbool.h>
#include <stdint.h>
#include "agent/session.h"
#include "aggregator/aggd.h"
#include "aggregator/aggd_guard.h"
#include "graph/store.h"

#define BATCH_MAX 1000 /* messages per batch: ticks stay timely under load */
#define TICK_NS 100000000ULL /* 100 ms */
#define PEER_BUCKETS 4096
#define FORGET_NS (600ULL * 1000000000ULL) /* expired agents are forgotten after 10 min */
#define ENDED_KEEP_NS (600ULL * 1000000000ULL) /* ended queries stay in status for 10 min */
#define SPOOL_MAX_DEFAULT 4096
#define NOT_WELCOMED SESSION_NOT_WELCOMED

enum pq_state { PQ_SENT, PQ_RUNNING, PQ_FAILED, PQ_STOPPED };

/* A query as one agent (or child aggregator) peer has it. */
struct pq {
	uint64_t id;
	enum pq_state state;
};

struct sub {
	uint64_t id;
	bool manifest_sent;
	uint64_t rows_dropped; /* a stream query: its rows not relayed to this client */
};

struct peer {
	struct peer *hnext; /* hash chain by routing id */
	struct peer *next, *prev; /* all peers */
	uint8_t rid[256];
	size_t ridlen;
	enum wire_role role;
	char name[64]; /* from the allow-list */
	bool hello;
	char host[AGGD_MAX_HOST];
	char version[64];
	char kernel[128];
	char *scope; /* Hello.scope: what part of its machine an agent traces; NULL: all */
	char **features;
	size_t nfeatures;
	uint64_t instance;
	struct wire_seq ctl; /* every message after Hello on this connection */
	uint64_t upto; /* highest seq of a merged partial, this instance */
	uint64_t acked; /* highest upto acknowledged */
	bool ack_due;
	uint64_t last_seen; /* CLOCK_MONOTONIC */
	bool alive;
	uint64_t dead_since;
	uint64_t spooled, spool_dropped;
	struct pq *pq;
	size_t npq, pqcap;
	/* the last queries it was told to stop as not running here (logged once each, not at
	 * every heartbeat of an agent still detaching one) */
	uint64_t told_stop[8];
	unsigned ntold_stop;
	struct sub *subs;
	size_t nsubs;
	uint64_t results_dropped;
};

struct query {
	uint64_t id;
	uint64_t parent_id; /* 0: submitted here */
	char *text;
	void *manifest;
	size_t manifest_len;
	void *object;
	size_t object_len;
	struct plan *plan;
	uint64_t epoch_ns, end_ns;
	struct aggd_qwin *qw;
	bool stopping, ended;
	uint64_t ended_mono;
	uint64_t forgot_below; /* store rows of windows below this are gone */
	char **errors;
	size_t nerrors;
	struct aggd_tset *touched; /* traces its graph batches touched (aggd_graph.c) */
	bool gchecked; /* ended, and those traces checked */
	/* a graph query (plan->graph): the plan its windows merge with (no keys, no
	 * aggregates: its partials carry no groups), what each window's batches stored, and
	 * its traces marked incomplete */
	struct plan wplan;
	struct aggd_gwin *gw;
	size_t ngw, gwcap;
	uint64_t gincomplete;
	bool export_metrics; /* its latest window is in /metrics (weft submit --export-metrics) */
	char *metrics; /* that window in the Prometheus text format, or NULL */
	uint64_t metrics_index; /* ... and its index */
	char **only; /* Submit.only_hosts: it runs on these agents alone; none: on every one */
	size_t nonly;
	struct aggd_vm *vm; /* the guest side of a VM synchronisation: the pair (aggd_vm.c) */
	bool stream; /* a select without aggregates: its rows are relayed (aggd_rows.c), its
		      * windows merge partials of no groups (wplan) */
	uint64_t rows, rows_dropped; /* rows its agents shipped; those not relayed to some
				      * subscriber */
	/* its relayed batches, numbered (row_seq: the last number given), the latest kept for
	 * a client that comes back (aggd_rows.c): a ring of nkeep from keep_head, keep_bytes
	 * of packed RowBatches */
	uint64_t row_seq;
	struct rowkeep {
		uint64_t seq, rows;
		uint64_t gen; /* the aggregator's count of kept batches when kept: the oldest of
			       * all streams has the lowest */
		void *buf;
		size_t len;
	} * keep;
	size_t nkeep, keep_cap, keep_head, keep_bytes;
};

/* A partial waiting for the parent's Ack: its packed Weft__Partial, and the seq of its latest
 * transmission (0: not sent since the last Welcome; rows loaded from the store keep the seq
 * the store has, which the first Welcome judges). */
struct sprow {
	uint64_t id, tx;
	void *body;
	size_t len;
	Weft__Envelope__BodyCase kind; /* a Partial or a GraphBatch */
};

/* The link to a parent aggregator: we are one of its agents, through a session
 * (agent/session.h) whose spool is the rows below, persisted in the store. */
struct parent {
	struct session *s;
	char pub[WIRE_KEY_LEN + 1];
	uint64_t instance; /* persisted: the parent dedups our partials across our restarts */
	struct sprow *rows; /* oldest first; rows[0..nsent) were sent since the last Welcome */
	size_t nrows, cap, nsent;
	uint64_t next_id;
	uint64_t dropped; /* rows dropped because the spool was full */
};

/* What GraphBatches did since the aggregator started (StatusReply.graph). */
struct aggd_graph_stats {
	uint64_t batches, tasks, events, edges, replaced, rejected, failed, lost;
	uint64_t incomplete, checked;
	uint64_t retained; /* traces dropped by --graph-max-age, --graph-max-size */
};

struct aggd {
	struct aggd_opts o;
	char name[AGGD_MAX_HOST];
	char pub[WIRE_KEY_LEN + 1], sec[WIRE_KEY_LEN + 1];
	struct wire_allowlist al;
	char *allow_file;
	void *zctx, *sock;
	struct wire_zap *zap;
	struct aggd_guard *guard; /* the server socket's connections (aggd_guard.h) */
	struct aggd_store *store;
	struct graph_store *gs; /* the graph store (aggd_graph.c) */
	char gpath[4096];
	struct aggd_graph_stats gst;
	struct graph_retention keep; /* --graph-max-age, --graph-max-size */
	uint64_t keep_next; /* CLOCK_MONOTONIC: the next retention pass */
	struct aggd_kx *kx; /* kernel edges across hosts (aggd_kx.c), with the graph store */
	uint64_t instance, seq;
	struct peer *buckets[PEER_BUCKETS];
	struct peer *peers;
	size_t npeers;
	struct query **q;
	size_t nq, qcap;
	uint64_t keep_gen; /* row batches kept so far, every stream's (aggd_rows.c) */
	struct parent par;
	bool has_parent;
	uint64_t rejected, before_hello;
	bool txn;
	bool acks_due;
	uint64_t next_tick;
	uint64_t next_ckpt; /* CLOCK_MONOTONIC: the earliest next checkpoint */
	size_t ckpt_windows, ckpt_members; /* written by the checkpoint in progress */
	bool seq_unsaved; /* a gone sender's merged seq is written but not committed yet */
	uint64_t start_mono;
	uint64_t partials_merged, windows_closed, revisions; /* since start, for /metrics */
	struct web *web; /* the web face (aggregator/web.h), or NULL */
	uint64_t web_next; /* CLOCK_MONOTONIC: when the web documents are published next */
	struct aggd_gfwd *gfwd; /* forwarding graphs to a collector (aggd_gfwd.c), or NULL */
};

/* A window's emission: to every subscriber, or (a replay) to `only`. */
struct aggd_emit_ctx {
	struct aggd *a;
	struct query *q;
	struct peer *only;
};

/* aggd.c: time, envelopes, peers, queries, the store's transaction, queries on senders */
void *aggd_memdup(const void *p, size_t n);
uint64_t aggd_mono_ns(void);
uint64_t aggd_real_ns(void);
void aggd_env_init(struct aggd *a, Weft__Envelope *e);
void aggd_peer_free(struct aggd *a, struct peer *p);
bool aggd_peer_is_sender(const struct peer *p);
const char *aggd_peer_label(const struct peer *p);
struct pq *aggd_peer_pq(struct peer *p, uint64_t id);
struct pq *aggd_peer_pq_add(struct peer *p, uint64_t id, enum pq_state st);
int aggd_peer_send(struct aggd *a, struct peer *p, const Weft__Envelope *e);
struct sub *aggd_peer_sub(struct peer *p, uint64_t id);
int aggd_peer_sub_add(struct peer *p, uint64_t id);
void aggd_peer_sub_del(struct peer *p, uint64_t id);
void aggd_send_error(struct aggd *a, struct peer *p, uint64_t in_reply_to, uint64_t query_id,
		     const char *fmt, ...) __attribute__((format(printf, 5, 6)));
void aggd_send_stop(struct aggd *a, struct peer *p, uint64_t id);
size_t aggd_queries_active(const struct aggd *a);
bool aggd_query_active(const struct query *q);
struct query *aggd_query_find(struct aggd *a, uint64_t id);
struct query *aggd_query_find_parent(struct aggd *a, uint64_t parent_id);
void aggd_query_free(struct query *q);
int aggd_query_insert(struct aggd *a, struct query *q);
struct query *aggd_query_make(struct aggd *a, const struct aggd_stored_query *sq, char *why,
			      size_t whysz);
const struct plan *aggd_query_wplan(const struct query *q);
int aggd_query_start_on(struct aggd *a, struct query *q, struct peer *p);
void aggd_query_stop(struct aggd *a, struct query *q, const char *why);
void aggd_reconcile(struct aggd *a, struct peer *p);
void aggd_txn_begin(struct aggd *a);
void aggd_txn_commit(struct aggd *a);

/* aggd_msg.c: the handlers of checked messages */
void aggd_on_hello(struct aggd *a, struct peer *p, const Weft__Envelope *env, enum wire_role role);
void aggd_on_partial(struct aggd *a, struct peer *p, const Weft__Envelope *env);
void aggd_on_query_error(struct aggd *a, struct peer *p, const Weft__QueryError *qe);
void aggd_on_submit(struct aggd *a, struct peer *p, const Weft__Envelope *env);
void aggd_on_client_stop(struct aggd *a, struct peer *p, const Weft__Envelope *env);
void aggd_on_subscribe(struct aggd *a, struct peer *p, const Weft__Envelope *env);
void aggd_peer_running(struct aggd *a, struct peer *p, const uint64_t *ids, size_t n);

/* aggd_status.c; aggd_status_json_all(): every agent and query as JSON (malloc'd) */
char *aggd_status_json_all(struct aggd *a);
void aggd_send_status(struct aggd *a, struct peer *to, uint64_t only_query, uint64_t in_reply_to);

/* aggd_emit.c: windows out (aggd_qwin_tick() and aggd_qwin_replay() callbacks; ctx is a
 * struct aggd_emit_ctx), their checkpoints, partials to the parent */
int aggd_emit_window(void *ctx, const struct aggd_window_view *v);
int aggd_replay_window(void *ctx, const struct aggd_window_view *v);
int aggd_query_checkpoint(struct aggd *a, struct query *q);
void aggd_partial_forward(struct aggd *a, struct query *q, const Weft__Partial *in);

/* aggd_parent.c: the link to a parent aggregator */
void aggd_parent_close(struct aggd *a);
int aggd_parent_open(struct aggd *a, char *err, size_t errsz);
void aggd_parent_recv(struct aggd *a);
uint64_t aggd_parent_rejected(const struct aggd *a);
int aggd_parent_spool(struct aggd *a, const Weft__Partial *pt);
/* Spools a packed body of another kind (a GraphBatch) for the parent; takes body. */
int aggd_parent_spool_body(struct aggd *a, Weft__Envelope__BodyCase kind, void *body, size_t len);

/* aggd_rows.c: a stream query's RowBatches relayed to its subscribers */
void aggd_on_row_batch(struct aggd *a, struct peer *p, const Weft__Envelope *env);
/* Sends client p the batches of stream q kept from number `from` on (a Subscribe's
 * from_row_batch); those it cannot take are counted as not relayed. */
void aggd_rows_replay(struct aggd *a, struct peer *p, struct query *q, uint64_t from);
void aggd_rows_keep_free(struct query *q);

/* aggd_graph.c: graph batches into the graph store, stitching, the completeness check */
#define AGGD_GRAPH_TOUCHED_MAX (1u << 20) /* traces per query checked at its end */
struct graph_store;
struct aggd_tset;
int aggd_graph_open(struct aggd *a, const char *store, char *err, size_t errsz);
void aggd_graph_close(struct aggd *a);
void aggd_on_graph_batch(struct aggd *a, struct peer *p, const Weft__Envelope *env);
void aggd_graph_tick(struct aggd *a);
void aggd_graph_query_free(struct query *q);
void aggd_graph_status(struct aggd *a, Weft__GraphStatus *s);
/* What window `window` of graph query q stored, into out (its strings none); for the last
 * window, q's traces are checked first and out->incomplete counts the incomplete ones. */
void aggd_graph_window(struct aggd *a, struct query *q, uint64_t window, bool last,
		       Weft__GraphWindow *out);

/* aggd_gfwd.c: stitched graphs forwarded to an OTLP/HTTP collector by a thread of their own.
 * Counts in tasks (spans) unless said otherwise. */
struct aggd_gfwd_stats {
	uint64_t forwarded; /* handed to the forwarder (graph/forward.h) */
	uint64_t repeated; /* tasks forwarded already: not again */
	uint64_t late; /* events and edges whose span was sent before they came, or never came */
	uint64_t forgotten; /* traces forgotten early: the memory of what was sent was full */
	uint64_t pending; /* elements waiting here (queue and linger) */
	uint64_t sent, requests, retried, spooled, rejected, queued, metric_points; /* forward.h */
	uint64_t dropped; /* lost: the queue or the spool had no room (queue_dropped included) */
	uint64_t queue_dropped; /* of which: the queue was full */
};
struct graph;
int aggd_gfwd_open(struct aggd *a, char *err, size_t errsz);
void aggd_gfwd_close(struct aggd *a); /* flushes, waits up to wait_ns, joins the thread */
/* Takes a stored batch's graph for forwarding: moved, *g is empty after.  Never blocks. */
void aggd_gfwd_put(struct aggd *a, struct graph *g);
/* false when not forwarding; url and the last delivery error ("" if none) */
bool aggd_gfwd_stats(struct aggd *a, struct aggd_gfwd_stats *st, char *url, size_t urlsz, char *err,
		     size_t errsz);

/* aggd_web.c: what the web face shows (aggregator/web.h), built on this thread */
int aggd_web_open(struct aggd *a, char *err, size_t errsz);
void aggd_web_tick(struct aggd *a);
void aggd_web_window(struct aggd *a, struct query *q, const struct aggd_window_view *v);
int aggd_web_export_load(struct aggd *a, struct query *q);
int aggd_web_export_save(struct aggd *a, struct query *q);

/* aggd_vm.c: VM synchronisation, live: a host query's hypercall points and a guest query's
 * clock readings joined by id, the offset and its bound (docs/vm.md) */
#define AGGD_VM_MAX_IDS (1u << 20) /* ids held per pair, waiting or joined */
struct aggd_vm;
/* Makes q the guest side of a pair with query host_id, reading both sides' retained windows.
 * 0, or -errno with why set (no such query, one paired already, plans of another shape). */
int aggd_vm_attach(struct aggd *a, struct query *q, uint64_t host_id, char *why, size_t whysz);
void aggd_vm_free(struct aggd_vm *v);
/* A window q emitted: into its pair, if q is a side of one. */
void aggd_vm_window(struct aggd *a, struct query *q, const struct aggd_window_view *w);
/* The state of the pair q is a side of into *out (out), or NULL if none. */
Weft__VmSync *aggd_vm_state(struct aggd *a, const struct query *q, Weft__VmSync *out);
/* Whether q may run on agent host (Submit.only_hosts). */
bool aggd_query_runs_on(const struct query *q, const char *host);

/* aggd_restore.c */
int aggd_restore_query(void *ctx, const struct aggd_stored_query *sq);
#endif
