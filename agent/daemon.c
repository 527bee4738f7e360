// SPDX-License-Identifier: Apache-2.0
/*
 * The agent daemon: one event loop over its session with the aggregator (agent/session.c:
 * the connection, Hello and Welcome, heartbeats, Acks, resends, reconnects) and a stop fd.
 * This file is what only an agent does: it runs the queries the aggregator starts and keeps
 * the spool of their partials, which the session sends.
 *
 * Queries: started -> (flip at least once a second, merge into the window's table; at each
 * window end ship a Partial) -> ended (QueryStop, end time, or its CPU budget: detach, last
 * flip, last Partial with last=true, and with `stopped` saying why if the budget stopped it)
 * -> freed.  Detaching is done beside the loop, in a thread of its own (query_end()): a
 * uprobe or USDT probe that is a perf event of its own (kernels before 6.6, and libbpf's USDT
 * attach) waits for a grace period on detach, ~70 ms each here, so a query of a few dozen
 * sites would keep the loop, and its heartbeats, away for seconds, and the aggregator would
 * take the agent for dead (silent for 3 heartbeat intervals).  Meanwhile the loop leaves that
 * query alone; once its probes are gone it reads the last of it and ships it as before.
 * A graph query (plan->graph) streams its records into a graphcap
 * (agent/graphcap.h), as `weft run` does; at each window end its finished traces (the kept
 * ones and the aggregates of all) are spooled as a GraphBatch before the window's Partial,
 * which has no groups (the aggregator counts a window's batches when its Partials close it).
 * A stream query (a select without aggregates) has its rows read from its ring buffer as they
 * come, turned into cells (agent_row_cells()) and spooled as RowBatches of at most
 * ROW_BATCH_CELLS cells, the last of a window before its Partial, which has no groups either.
 * Windows are aligned to QueryStart.epoch_realtime_ns: window w
 * ends at epoch + (w+1) * every in CLOCK_REALTIME, on every host alike (the schedule of
 * agent/schedule.h, which weft run follows too; windows the agent was too late for are
 * skipped, not shipped empty).
 *
 * Seq: one counter per process (instance), taken by the session at transmission: a partial's
 * identity on the wire is the (instance, seq) of its latest transmission.
 *
 * Ownership: the daemon owns its ZeroMQ context, its session, every running query (its plan,
 * table, agent_query) and the spool's buffers.  Nothing here exits or prints to stdout.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>
#include "base/zmq_dl.h"
#include "agent/agent.h"
#include "agent/graphcap.h"
#include "agent/daemon.h"
#include "agent/result.h"
#include "agent/session.h"
#include "agent/schedule.h"
#include "agent/scope.h"
#include "agent/wire.h"
#include "agent/wire_graph.h"
#include "compiler/plan.h"
#include "graph/aggs.h"
#include "probes/probes.h"
#include "base/log.h"
#include "base/text.h"

#define NS ((uint64_t)1000000000)
#define MS ((uint64_t)1000000)
#define SHUTDOWN_ACK_WAIT_NS (2 * NS)
#define ENDED_MEMORY 256 /* queries that ended here, so a repeated QueryStart is ignored */
#define GRAPH_POLL_MAX 8 /* graph queries whose ring buffers wake the loop */
#define PARTIAL_ROOM 4096 /* bytes of an envelope besides the partial's groups */
/* cells of one RowBatch: its decode stays within wire_decode()'s memory bound (an integer
 * cell costs 8 bytes decoded, a text cell 16 besides its bytes) */
#define ROW_BATCH_CELLS 65536
#define ROW_BATCH_TEXT (8u << 20) /* text bytes of one RowBatch */
#define ROW_FLUSH_NS (100 * MS) /* rows wait at most about this long for their batch */
#define ROW_DROPS_MAX 64 /* queries whose dropped RowBatches the spool tells apart */

/* ---------------------------------------------------------------- the spool */

struct spool_entry {
	uint64_t seq; /* of its latest transmission on this connection; 0: not sent */
	void *buf; /* a packed Weft__Partial, Weft__GraphBatch or Weft__RowBatch */
	size_t len;
	Weft__Envelope__BodyCase kind;
	uint64_t qid, rows; /* a RowBatch: its query and rows */
};

struct agent_spool {
	struct spool_entry *v; /* ring of cap entries; n of them from head */
	size_t cap, head, n;
	size_t nsent; /* entries [0, nsent) are sent: a prefix */
	uint64_t bytes, dropped;
	uint32_t max;
	uint64_t max_bytes;
	struct {
		uint64_t qid, rows;
	} row_drops[ROW_DROPS_MAX]; /* rows of dropped RowBatches, by query */
};

static struct spool_entry *spool_at(const struct agent_spool *s, size_t i)
{
	return &s->v[(s->head + i) % s->cap];
}

struct agent_spool *agent_spool_new(uint32_t max, uint64_t max_bytes)
{
	struct agent_spool *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->max = max ? max : AGENT_SPOOL_MAX_DEFAULT;
	s->max_bytes = max_bytes ? max_bytes : AGENT_SPOOL_BYTES_DEFAULT;
	return s;
}

static void spool_row_drop(struct agent_spool *s, const struct spool_entry *e)
{
	size_t free_at = ROW_DROPS_MAX;

	for (size_t i = 0; i < ROW_DROPS_MAX; i++) {
		if (s->row_drops[i].rows && s->row_drops[i].qid == e->qid) {
			s->row_drops[i].rows += e->rows;
			return;
		}
		if (!s->row_drops[i].rows && free_at == ROW_DROPS_MAX)
			free_at = i;
	}
	if (free_at < ROW_DROPS_MAX) {
		s->row_drops[free_at].qid = e->qid;
		s->row_drops[free_at].rows = e->rows;
	} else {
		log_err("agent: %" PRIu64 " rows of query %" PRIu64
			" dropped with the spool, not reported to the aggregator (too many "
			"queries lost rows at once)",
			e->rows, e->qid);
	}
}

uint64_t agent_spool_rows_dropped(struct agent_spool *s, uint64_t qid)
{
	for (size_t i = 0; s && i < ROW_DROPS_MAX; i++)
		if (s->row_drops[i].rows && s->row_drops[i].qid == qid) {
			uint64_t n = s->row_drops[i].rows;

			s->row_drops[i].rows = 0;
			return n;
		}
	return 0;
}

static void spool_pop(struct agent_spool *s)
{
	struct spool_entry *e = spool_at(s, 0);

	s->bytes -= e->len;
	free(e->buf);
	memset(e, 0, sizeof(*e));
	s->head = (s->head + 1) % s->cap;
	s->n--;
	if (s->nsent)
		s->nsent--;
}

void agent_spool_free(struct agent_spool *s)
{
	if (!s)
		return;
	while (s->n)
		spool_pop(s);
	free(s->v);
	free(s);
}

static int spool_grow(struct agent_spool *s)
{
	size_t cap = s->cap ? s->cap * 2 : 64;
	struct spool_entry *v;

	if (cap > s->max)
		cap = s->max;
	v = calloc(cap, sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < s->n; i++)
		v[i] = *spool_at(s, i);
	free(s->v);
	s->v = v;
	s->cap = cap;
	s->head = 0;
	return 0;
}

unsigned agent_spool_add(struct agent_spool *s, void *buf, size_t len)
{
	return agent_spool_add_kind(s, WEFT__ENVELOPE__BODY_PARTIAL, buf, len);
}

unsigned agent_spool_add_kind(struct agent_spool *s, Weft__Envelope__BodyCase kind, void *buf,
			      size_t len)
{
	unsigned dropped = 0;

	/* the newest always stays: dropping it instead would lose the freshest data */
	while (s->n && (s->n >= s->max || s->bytes + len > s->max_bytes)) {
		if (spool_at(s, 0)->rows)
			spool_row_drop(s, spool_at(s, 0));
		spool_pop(s);
		s->dropped++;
		dropped++;
	}
	if (s->n == s->cap && spool_grow(s)) {
		/* no memory for the ring: this partial is the one lost */
		free(buf);
		s->dropped++;
		return dropped + 1;
	}
	*spool_at(s, s->n) = (struct spool_entry){ .buf = buf, .len = len, .kind = kind };
	s->n++;
	s->bytes += len;
	return dropped;
}

const void *agent_spool_next(const struct agent_spool *s, size_t *len)
{
	const struct spool_entry *e;

	if (s->nsent >= s->n)
		return NULL;
	e = spool_at(s, s->nsent);
	*len = e->len;
	return e->buf;
}

unsigned agent_spool_add_rows(struct agent_spool *s, void *buf, size_t len, uint64_t qid,
			      uint64_t rows)
{
	unsigned dropped = agent_spool_add_kind(s, WEFT__ENVELOPE__BODY_ROW_BATCH, buf, len);
	struct spool_entry *e = s->n ? spool_at(s, s->n - 1) : NULL;

	if (e && e->buf == buf) {
		e->qid = qid;
		e->rows = rows;
	} else {
		/* no room for the entry: this batch was the one lost */
		struct spool_entry lost = { .qid = qid, .rows = rows };

		spool_row_drop(s, &lost);
	}
	return dropped;
}

Weft__Envelope__BodyCase agent_spool_kind(const struct agent_spool *s)
{
	return s->nsent < s->n ? spool_at(s, s->nsent)->kind : WEFT__ENVELOPE__BODY_PARTIAL;
}

void agent_spool_mark_sent(struct agent_spool *s, uint64_t seq)
{
	if (s->nsent < s->n)
		spool_at(s, s->nsent++)->seq = seq;
}

size_t agent_spool_ack(struct agent_spool *s, uint64_t upto)
{
	size_t k = 0;

	while (s->nsent && spool_at(s, 0)->seq <= upto) {
		spool_pop(s);
		k++;
	}
	return k;
}

size_t agent_spool_rewind(struct agent_spool *s)
{
	for (size_t i = 0; i < s->n; i++)
		spool_at(s, i)->seq = 0;
	s->nsent = 0;
	return s->n;
}

size_t agent_spool_count(const struct agent_spool *s)
{
	return s->n;
}

uint64_t agent_spool_bytes(const struct agent_spool *s)
{
	return s->bytes;
}

uint64_t agent_spool_dropped(const struct agent_spool *s)
{
	return s->dropped;
}

/* ---------------------------------------------------------------- state */

struct dquery {
	uint64_t id;
	struct plan *plan;
	struct agent_query *q;
	struct agent_table *win;
	struct agent_sched s; /* windows on CLOCK_REALTIME (agent/schedule.h); end UINT64_MAX:
				 until QueryStop */
	uint64_t drops[WEFT_DROP_NR], misses;
	const char *stopped; /* why it ended early on this host (its last Partial says so) */
	char *stopped_why; /* stopped, when it is malloc'd */
	struct graphcap *gc; /* a graph query: its capture; its windows' table is of wplan */
	struct plan wplan;
	bool stream; /* a stream query: its rows go in RowBatches; its windows' table is wplan's */
	struct rowacc {
		int64_t *ints;
		size_t nints, intcap;
		struct {
			size_t off, len;
		} * texts;
		size_t ntexts, textcap;
		char *txt;
		size_t txtlen, txtcap;
		uint64_t rows, lost;
		uint64_t shipped; /* CLOCK_MONOTONIC of its last batch */
		struct agent_cell *cells; /* ncols */
	} ra;
	/* ending (query_end()): its probes are being detached by detacher; the loop leaves it
	 * alone until detached, then finishes it with `last` as asked */
	bool detaching, finish_last;
	pthread_t detacher;
	atomic_bool detached;
	uint64_t detach_start; /* CLOCK_MONOTONIC */
	struct agent_daemon *d;
	struct dquery *next;
};

struct agent_daemon {
	struct agent_daemon_opts o;
	char endpoint[512];
	char server_key[WIRE_KEY_LEN + 1], pub[WIRE_KEY_LEN + 1], sec[WIRE_KEY_LEN + 1];
	char host[WIRE_MAX_HOST + 1], kernel[128];
	const char *features[16];
	size_t nfeatures;

	void *zctx;
	struct session *sess;
	bool auth_warned;

	struct dquery *queries;
	int detach_fd; /* an eventfd: a detacher is done */
	struct {
		uint64_t id, epoch; /* ids alone repeat: a fresh aggregator store starts at 1 */
	} ended[ENDED_MEMORY];
	unsigned nended;
	struct agent_spool *spool;
	struct agent_daemon_stats st;
};

static uint64_t clock_ns(clockid_t c)
{
	struct timespec ts;

	clock_gettime(c, &ts);
	return (uint64_t)ts.tv_sec * NS + (uint64_t)ts.tv_nsec;
}

static uint64_t mono_ns(void)
{
	return clock_ns(CLOCK_MONOTONIC);
}

static uint64_t real_ns(void)
{
	return clock_ns(CLOCK_REALTIME);
}

static uint64_t add_sat(uint64_t a, uint64_t b)
{
	return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/* ---------------------------------------------------------------- the session's side */

/* Hello.running and Heartbeat.running. */
static uint64_t *running_ids(void *ctx, size_t *n)
{
	struct agent_daemon *d = ctx;
	size_t k = 0;
	uint64_t *v;

	for (struct dquery *q = d->queries; q; q = q->next)
		k++;
	v = calloc(k + 1, sizeof(*v));
	*n = 0;
	if (!v)
		return NULL;
	for (struct dquery *q = d->queries; q; q = q->next)
		v[(*n)++] = q->id;
	return v;
}

/* The spool as the session sees it (struct session_spool_ops). */
static const void *spool_next(void *sp, size_t *len)
{
	return agent_spool_next(sp, len);
}

static void spool_mark_sent(void *sp, uint64_t seq)
{
	agent_spool_mark_sent(sp, seq);
}

static size_t spool_ack(void *sp, uint64_t upto)
{
	return agent_spool_ack(sp, upto);
}

static size_t spool_rewind(void *sp)
{
	return agent_spool_rewind(sp);
}

static size_t spool_count(void *sp)
{
	return agent_spool_count(sp);
}

static uint64_t spool_dropped(void *sp)
{
	return agent_spool_dropped(sp);
}

static Weft__Envelope__BodyCase spool_kind(void *sp)
{
	return agent_spool_kind(sp);
}

static const struct session_spool_ops agent_spool_ops = {
	.kind = spool_kind,
	.next = spool_next,
	.mark_sent = spool_mark_sent,
	.ack = spool_ack,
	.rewind = spool_rewind,
	.count = spool_count,
	.dropped = spool_dropped,
};

/* Which half of a split trace t goes to at split `depth`: a bit of a hash of its id. */
static bool trace_side(struct graph_id128 t, unsigned depth)
{
	uint64_t x = t.hi ^ (t.lo * 0x9e3779b97f4a7c15ull);

	x ^= x >> 31;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 29;
	return (x >> (depth % 64)) & 1;
}

/*
 * g's elements into a and b (graph_init()ed; their strings stay g's): by trace (depth's bit of
 * the trace id's hash) when that puts something on each side, else by position (one trace too
 * big for a batch).  The open flags of the tasks follow them (*ao, *bo: NULL when open is).
 */
static int graph_halve(const struct graph *g, const bool *open, unsigned depth, struct graph *a,
		       bool **ao, struct graph *b, bool **bo)
{
	size_t na = 0, nta = 0, ntb = 0;
	bool by_trace;

	for (size_t i = 0; i < g->ntasks; i++)
		na += !trace_side(g->tasks[i].trace, depth);
	for (size_t i = 0; i < g->nevents; i++)
		na += !trace_side(g->events[i].trace, depth);
	for (size_t i = 0; i < g->nedges; i++)
		na += !trace_side(g->edges[i].trace, depth);
	by_trace = na > 0 && na < g->ntasks + g->nevents + g->nedges;
	*ao = *bo = NULL;
	if (open) {
		*ao = calloc(g->ntasks + 1, sizeof(**ao));
		*bo = calloc(g->ntasks + 1, sizeof(**bo));
		if (!*ao || !*bo)
			return -ENOMEM;
	}
#define SIDE_A(el, i, n) (by_trace ? !trace_side((el).trace, depth) : (i) < (n) / 2)
	for (size_t i = 0; i < g->ntasks; i++) {
		bool to_a = SIDE_A(g->tasks[i], i, g->ntasks);

		if (!graph_add_task(to_a ? a : b, &g->tasks[i]))
			return -ENOMEM;
		if (open)
			(to_a ? *ao : *bo)[to_a ? nta++ : ntb++] = open[i];
	}
	for (size_t i = 0; i < g->nevents; i++)
		if (!graph_add_event(SIDE_A(g->events[i], i, g->nevents) ? a : b, &g->events[i]))
			return -ENOMEM;
	for (size_t i = 0; i < g->nedges; i++)
		if (!graph_add_edge(SIDE_A(g->edges[i], i, g->nedges) ? a : b, &g->edges[i]))
			return -ENOMEM;
#undef SIDE_A
	return 0;
}

/*
 * The aggregates of a window ride on its first batch; the others carry an encoded empty set
 * (none), which tells the aggregator that their traces are counted already: a batch without
 * any is aggregated from its elements (senders that do not pre-aggregate).
 */
static int graph_batch_ship(struct agent_daemon *d, const struct wire_graph_meta *m,
			    const struct graph *g, unsigned depth, const void *none,
			    size_t none_len)
{
	size_t n = g->ntasks + g->nevents + g->nedges;
	uint32_t max = d->o.graph_batch_max ? d->o.graph_batch_max : AGENT_GRAPH_BATCH_DEFAULT;
	struct wire_graph_meta ma, mb;
	struct graph a, b;
	bool *ao = NULL, *bo = NULL;
	char why[256];
	void *buf;
	size_t len;
	unsigned dropped;
	int rc;

	if (n <= max || n < 2 || depth >= 128) {
		rc = wire_graph_pack(m, g, &buf, &len, why, sizeof(why));
		if (rc == 0) {
			dropped = agent_spool_add_kind(d->spool, WEFT__ENVELOPE__BODY_GRAPH_BATCH,
						       buf, len);
			d->st.graph_batches++;
			if (dropped)
				log_warn("agent: the spool is full: %u oldest entries dropped",
					 dropped);
			return 0;
		}
		if (rc != -EMSGSIZE || n < 2 || depth >= 128) {
			d->st.graph_lost += n;
			log_err("agent: query %" PRIu64 " window %" PRIu64
				": a graph batch cannot be sent: %s",
				m->query_id, m->window, why);
			return rc;
		}
	}
	/* too many elements or bytes for one batch: two halves, each split again if need be */
	graph_init(&a);
	graph_init(&b);
	rc = graph_halve(g, m->open, depth, &a, &ao, &b, &bo);
	if (rc == 0) {
		ma = *m;
		ma.last = false;
		ma.open = ao;
		mb = *m;
		if (m->aggs) {
			mb.aggs = none;
			mb.aggs_len = none_len;
		}
		mb.lost = 0;
		mb.open = bo;
		rc = graph_batch_ship(d, &ma, &a, depth + 1, none, none_len);
		if (rc == 0)
			rc = graph_batch_ship(d, &mb, &b, depth + 1, none, none_len);
		else
			d->st.graph_lost += b.ntasks + b.nevents + b.nedges;
	} else {
		d->st.graph_lost += n;
		log_err("agent: query %" PRIu64 " window %" PRIu64
			": a graph batch cannot be split: %s",
			m->query_id, m->window, strerror(-rc));
	}
	free(ao);
	free(bo);
	graph_free(&a);
	graph_free(&b);
	return rc;
}

int agent_daemon_graph_batch(struct agent_daemon *d, const struct wire_graph_meta *m,
			     const struct graph *g)
{
	struct wire_graph_meta mm;
	struct graph_aggs empty;
	void *none = NULL;
	size_t none_len = 0;
	int rc;

	if (!d || !m || !g)
		return -EINVAL;
	mm = *m;
	mm.host = d->host;
	graph_aggs_init(&empty);
	if (m->aggs && (rc = graph_aggs_encode(&empty, &none, &none_len))) {
		graph_aggs_free(&empty);
		d->st.graph_lost += g->ntasks + g->nevents + g->nedges;
		return rc;
	}
	rc = graph_batch_ship(d, &mm, g, 0, none, none_len);
	free(none);
	graph_aggs_free(&empty);
	session_flush(d->sess);
	return rc;
}

static void send_query_error(struct agent_daemon *d, uint64_t id, const char *msg,
			     const char *detail)
{
	Weft__Envelope e = WEFT__ENVELOPE__INIT;
	Weft__QueryError qe = WEFT__QUERY_ERROR__INIT;
	char m[WIRE_MAX_STRING + 1], det[WIRE_MAX_STRING + 1];

	snprintf(m, sizeof(m), "%s", msg && *msg ? msg : "failed");
	snprintf(det, sizeof(det), "%s", detail ? detail : "");
	/* cut to WIRE_MAX_STRING bytes above; what the receiver would refuse (bytes of a
	 * verifier log may be anything, a cut may split a character) becomes '?' */
	text_clean(m, strlen(m), TEXT_PROSE);
	text_clean(det, strlen(det), TEXT_PROSE);
	log_warn("agent: query %" PRIu64 ": %s", id, m);
	qe.query_id = id;
	qe.message = m;
	qe.detail = det[0] ? det : NULL;
	e.body_case = WEFT__ENVELOPE__BODY_QUERY_ERROR;
	e.query_error = &qe;
	/* sent now if the socket takes it, else dropped (a repeated QueryStart covers it) */
	session_send(d->sess, &e);
}

/* ---------------------------------------------------------------- partials */

/*
 * The groups that fit one envelope: a partial is cut at WIRE_MAX_BYTES (a window of tens of
 * thousands of HyperLogLog groups could exceed it); the groups cut are reported as overflow.
 */
static size_t groups_that_fit(Weft__Group **g, size_t n, size_t room)
{
	size_t used = 0;

	for (size_t i = 0; i < n; i++) {
		size_t sz = weft__group__get_packed_size(g[i]);

		used += sz + 1 + 10; /* tag and length */
		if (used > room)
			return i;
	}
	return n;
}

static void ship_partial(struct agent_daemon *d, struct dquery *q, bool last)
{
	Weft__Envelope e = WEFT__ENVELOPE__INIT;
	Weft__Partial p = WEFT__PARTIAL__INIT;
	Weft__Group **groups = NULL;
	size_t ngroups = 0, keep;
	char why[256], stopped[WIRE_MAX_STRING + 1];
	unsigned dropped;
	void *buf;
	int rc;

	rc = agent_table_to_groups(q->win, &groups, &ngroups);
	if (rc) {
		log_err("agent: query %" PRIu64 " window %" PRIu64 ": %s", q->id, q->s.window,
			strerror(-rc));
		ngroups = 0; /* ship the losses at least */
	}
	keep = groups_that_fit(groups, ngroups, WIRE_MAX_BYTES - PARTIAL_ROOM);
	if (keep < ngroups)
		log_warn("agent: query %" PRIu64 " window %" PRIu64
			 ": %zu of %zu groups do not fit one message; counted as overflow",
			 q->id, q->s.window, ngroups - keep, ngroups);
	p.query_id = q->id;
	p.window = q->s.window;
	p.host = d->host;
	p.groups = groups;
	p.n_groups = keep;
	p.drops = q->drops;
	p.n_drops = WEFT_DROP_NR;
	p.has_misses = true;
	p.misses = q->misses;
	p.has_overflow = true;
	p.overflow = agent_table_overflow(q->win) + (ngroups - keep);
	p.has_last = last;
	p.last = last;
	if (last && q->stopped) {
		snprintf(stopped, sizeof(stopped), "%s", q->stopped);
		text_clean(stopped, strlen(stopped), TEXT_PROSE);
		p.stopped = stopped;
	}
	e.version = WIRE_VERSION;
	e.seq = 1; /* for the check only: the spool stamps each transmission */
	e.body_case = WEFT__ENVELOPE__BODY_PARTIAL;
	e.partial = &p;
	if (wire_validate(&e, why, sizeof(why)) != 0) {
		log_err("agent: query %" PRIu64 " window %" PRIu64 ": invalid partial: %s", q->id,
			q->s.window, why);
		goto out_free;
	}
	buf = malloc(weft__partial__get_packed_size(&p) + 1);
	if (!buf) {
		log_err("agent: query %" PRIu64 ": out of memory for a partial", q->id);
		goto out_free;
	}
	dropped = agent_spool_add(d->spool, buf, weft__partial__pack(&p, buf));
	if (dropped)
		log_warn("agent: the spool is full (%zu partials, %" PRIu64
			 " bytes): dropped the %u oldest; %" PRIu64 " dropped so far",
			 agent_spool_count(d->spool), agent_spool_bytes(d->spool), dropped,
			 agent_spool_dropped(d->spool));
	d->st.partials++;
	log_debug("agent: query %" PRIu64 " window %" PRIu64 ": %zu groups%s", q->id, q->s.window,
		  keep, last ? " (last)" : "");
out_free:
	agent_groups_free(groups, ngroups);
	agent_table_clear(q->win);
	memset(q->drops, 0, sizeof(q->drops));
	q->misses = 0;
}

/* ---------------------------------------------------------------- graph queries */

static int graph_row(void *ctx, const struct plan *p, const void *rec, size_t len)
{
	struct dquery *q = ctx;

	(void)p;
	graphcap_record(q->gc, rec, len); /* refusals and losses are in its stats */
	return 0;
}

/* The window's finished traces as one GraphBatch, spooled before the window's Partial (the
 * aggregator relies on that order).  final: every trace, open tasks dropped. */
static void ship_graph(struct agent_daemon *d, struct dquery *q, bool final, bool last)
{
	struct wire_graph_meta m = { .query_id = q->id, .window = q->s.window, .last = last };
	struct graph kept;
	struct graph_aggs aggs;
	void *abuf = NULL;
	size_t alen = 0;
	int rc;

	agent_query_poll(q->q, 0);
	graph_init(&kept);
	graph_aggs_init(&aggs);
	rc = graphcap_drain(q->gc, final, &kept, &aggs);
	if (rc >= 0 && !graph_aggs_empty(&aggs))
		rc = graph_aggs_encode(&aggs, &abuf, &alen);
	if (rc < 0) {
		log_err("agent: query %" PRIu64 " window %" PRIu64 ": graph capture: %s", q->id,
			q->s.window, strerror(-rc));
		d->st.graph_lost += kept.ntasks + kept.nevents + kept.nedges;
	} else if (kept.ntasks || kept.nevents || kept.nedges || abuf || last) {
		m.aggs = abuf;
		m.aggs_len = alen;
		agent_daemon_graph_batch(d, &m, &kept);
	}
	if (weft_log_get_level() >= WEFT_LOG_DEBUG) {
		struct graphcap_stats gs;

		graphcap_stats(q->gc, &gs);
		log_debug("agent: query %" PRIu64 " window %" PRIu64 ": graph batch of %zu tasks, "
			  "%zu events, %zu edges; %" PRIu64 " records so far (%" PRIu64
			  " refused), %" PRIu64 " traces seen",
			  q->id, q->s.window, kept.ntasks, kept.nevents, kept.nedges, gs.records,
			  gs.bad, gs.traces_seen);
	}
	free(abuf);
	graph_free(&kept);
	graph_aggs_free(&aggs);
}

/* ---------------------------------------------------------------- stream queries */

static void rowacc_reset(struct rowacc *ra)
{
	ra->nints = ra->ntexts = ra->txtlen = 0;
	ra->rows = 0;
}

static void rowacc_free(struct rowacc *ra)
{
	free(ra->ints);
	free(ra->texts);
	free(ra->txt);
	free(ra->cells);
	memset(ra, 0, sizeof(*ra));
}

static bool grow(void **v, size_t *cap, size_t need, size_t elem)
{
	size_t n = *cap ? *cap : 256;
	void *nv;

	if (need <= *cap)
		return true;
	while (n < need)
		n *= 2;
	nv = realloc(*v, n * elem);
	if (!nv)
		return false;
	*v = nv;
	*cap = n;
	return true;
}

/*
 * The rows gathered for q as one RowBatch, spooled (before the window's Partial: the
 * aggregator relays them before it closes the window).  Rows that cannot be packed or
 * spooled are counted in the next batch's `lost`, and so are those the spool dropped.
 */
static void ship_rows(struct agent_daemon *d, struct dquery *q, bool last)
{
	struct rowacc *ra = &q->ra;
	Weft__Envelope e = WEFT__ENVELOPE__INIT;
	Weft__RowBatch b = WEFT__ROW_BATCH__INIT;
	ProtobufCBinaryData *texts = NULL;
	char why[256];
	unsigned dropped;
	void *buf;
	size_t len;

	ra->lost += agent_spool_rows_dropped(d->spool, q->id);
	if (!ra->rows && !ra->lost && !last)
		return;
	if (ra->ntexts && !(texts = calloc(ra->ntexts, sizeof(*texts))))
		goto lost;
	for (size_t i = 0; i < ra->ntexts; i++) {
		texts[i].data = (uint8_t *)ra->txt + ra->texts[i].off;
		texts[i].len = ra->texts[i].len;
	}
	b.query_id = q->id;
	b.window = q->s.window;
	b.host = d->host;
	b.has_columns = true;
	b.columns = (uint32_t)q->plan->ncols;
	b.has_rows = true;
	b.rows = ra->rows;
	b.n_ints = ra->nints;
	b.ints = ra->ints;
	b.n_texts = ra->ntexts;
	b.texts = texts;
	b.has_lost = ra->lost > 0;
	b.lost = ra->lost;
	b.has_last = last;
	b.last = last;
	e.version = WIRE_VERSION;
	e.seq = 1; /* for the check only: the spool stamps each transmission */
	e.body_case = WEFT__ENVELOPE__BODY_ROW_BATCH;
	e.row_batch = &b;
	if (wire_validate(&e, why, sizeof(why)) != 0) {
		log_err("agent: query %" PRIu64 " window %" PRIu64 ": invalid row batch: %s", q->id,
			q->s.window, why);
		goto lost;
	}
	len = weft__row_batch__get_packed_size(&b);
	buf = malloc(len + 1);
	if (!buf) {
		log_err("agent: query %" PRIu64 ": out of memory for a row batch", q->id);
		goto lost;
	}
	weft__row_batch__pack(&b, buf);
	dropped = agent_spool_add_rows(d->spool, buf, len, q->id, ra->rows);
	if (dropped)
		log_warn("agent: the spool is full: %u oldest entries dropped (their rows are "
			 "reported lost)",
			 dropped);
	d->st.row_batches++;
	d->st.rows += ra->rows;
	ra->shipped = mono_ns();
	ra->lost = 0;
	free(texts);
	rowacc_reset(ra);
	return;
lost:
	free(texts);
	d->st.rows_lost += ra->rows;
	ra->lost += ra->rows; /* said in the next batch */
	rowacc_reset(ra);
}

/* A record of a stream query (agent_query_poll()): its cells gathered for the next batch. */
static int stream_row(void *ctx, const struct plan *p, const void *rec, size_t len)
{
	struct dquery *q = ctx;
	struct rowacc *ra = &q->ra;
	size_t ncols = (size_t)p->ncols, ntext = 0;
	int rc;

	rc = agent_row_cells(p, rec, len, agent_query_resolver(q->q), ra->cells, &ra->txt,
			     &ra->txtlen, &ra->txtcap);
	if (rc == 0) {
		for (size_t c = 0; c < ncols; c++)
			ntext += ra->cells[c].text;
		if (!grow((void **)&ra->ints, &ra->intcap, ra->nints + ncols - ntext,
			  sizeof(*ra->ints)) ||
		    !grow((void **)&ra->texts, &ra->textcap, ra->ntexts + ntext,
			  sizeof(*ra->texts)))
			rc = -ENOMEM;
	}
	if (rc) {
		/* a record the plan does not read, or no memory: lost, and said */
		ra->lost++;
		q->d->st.rows_lost++;
		return 0;
	}
	for (size_t c = 0; c < ncols; c++) {
		const struct agent_cell *cl = &ra->cells[c];

		if (cl->text) {
			ra->texts[ra->ntexts].off = (size_t)cl->i;
			ra->texts[ra->ntexts++].len =
				cl->len > WIRE_MAX_CELL ? WIRE_MAX_CELL : cl->len;
		} else {
			ra->ints[ra->nints++] = cl->i;
		}
	}
	ra->rows++;
	if (ra->nints + ra->ntexts + ncols > ROW_BATCH_CELLS || ra->txtlen >= ROW_BATCH_TEXT ||
	    ra->rows >= WIRE_MAX_ROWS)
		ship_rows(q->d, q, false);
	return 0;
}

/* ---------------------------------------------------------------- queries */

static void flip(struct dquery *q)
{
	struct agent_window_stats ws;
	int rc = agent_query_window(q->q, q->win, &ws);

	if (rc < 0)
		log_warn("agent: query %" PRIu64 ": reading the window failed: %s", q->id,
			 strerror(-rc));
	for (int i = 0; i < WEFT_DROP_NR; i++)
		q->drops[i] += ws.drops[i];
	q->misses += ws.misses;
	agent_sched_flipped(&q->s, mono_ns());
}

static void query_free(struct dquery *q)
{
	if (!q)
		return;
	if (q->detaching)
		pthread_join(q->detacher, NULL);
	agent_query_free(q->q);
	graphcap_free(q->gc);
	rowacc_free(&q->ra);
	agent_table_free(q->win);
	plan_free(q->plan);
	free(q->stopped_why);
	free(q);
}

static void remember_ended(struct agent_daemon *d, const struct dquery *q)
{
	unsigned i = d->nended++ % ENDED_MEMORY;

	d->ended[i].id = q->id;
	d->ended[i].epoch = q->s.epoch;
}

static bool has_ended(const struct agent_daemon *d, uint64_t id, uint64_t epoch)
{
	unsigned n = d->nended < ENDED_MEMORY ? d->nended : ENDED_MEMORY;

	for (unsigned i = 0; i < n; i++)
		if (d->ended[i].id == id && d->ended[i].epoch == epoch)
			return true;
	return false;
}

static void unlink_query(struct agent_daemon *d, struct dquery *q)
{
	for (struct dquery **pp = &d->queries; *pp; pp = &(*pp)->next)
		if (*pp == q) {
			*pp = q->next;
			d->st.queries--;
			return;
		}
}

/* Read what was in flight once the probes are gone, ship the window, free.  last: the query
 * ended on this host (false when the agent itself is shutting down: the query goes on
 * elsewhere). */
static void query_done(struct agent_daemon *d, struct dquery *q, bool last)
{
	if (q->detaching) {
		uint64_t ms;

		pthread_join(q->detacher, NULL);
		q->detaching = false;
		ms = (mono_ns() - q->detach_start) / MS;
		if (ms >= 1000)
			log_info("agent: query %" PRIu64 ": detaching its probes took %" PRIu64
				 " ms",
				 q->id, ms);
	}
	agent_query_stop(q->q); /* done already if it was detached beside the loop */
	flip(q);
	if (q->gc)
		ship_graph(d, q, true, last); /* the agent goes: what it holds goes too */
	if (q->stream) {
		agent_query_poll(q->q, 0); /* what was in flight */
		ship_rows(d, q, last);
	}
	ship_partial(d, q, last);
	unlink_query(d, q);
	if (last)
		remember_ended(d, q);
	log_info("agent: query %" PRIu64 " %s after window %" PRIu64, q->id,
		 last ? "ended" : "detached", q->s.window);
	query_free(q);
}

/* Detach, read what was in flight, ship the window, now (the agent is shutting down). */
static void query_finish(struct agent_daemon *d, struct dquery *q, bool last)
{
	if (q->detaching)
		last = q->finish_last; /* it was ending here: its last Partial says so */
	query_done(d, q, last);
}

static void *detach_main(void *arg)
{
	struct dquery *q = arg;

	agent_query_stop(q->q); /* the loop does not touch q meanwhile */
	atomic_store(&q->detached, true);
	(void)eventfd_write(q->d->detach_fd, 1);
	return NULL;
}

/*
 * The query ends on this host (last: its last Partial says so): its probes are detached by
 * a thread of its own, and query_reap() finishes it once they are gone.  Asked again while
 * that goes on, nothing more happens.  Without a thread, it is done here and now.
 */
static void query_end(struct agent_daemon *d, struct dquery *q, bool last)
{
	int rc;

	if (q->detaching)
		return;
	q->d = d;
	q->finish_last = last;
	q->detach_start = mono_ns();
	atomic_store(&q->detached, false);
	rc = d->detach_fd >= 0 ? pthread_create(&q->detacher, NULL, detach_main, q) : ENOSYS;
	if (rc) {
		query_done(d, q, last);
		return;
	}
	q->detaching = true;
}

/* Finishes the queries whose probes are gone. */
static void query_reap(struct agent_daemon *d)
{
	eventfd_t v;

	if (d->detach_fd >= 0)
		(void)eventfd_read(d->detach_fd, &v);
	for (struct dquery *q = d->queries, *next; q; q = next) {
		next = q->next;
		if (q->detaching && atomic_load(&q->detached))
			query_done(d, q, q->finish_last);
	}
}

/* The CPU budget (agent_query_budget()): a window over it is logged; a query it stopped
 * ends here, its last Partial saying why (the aggregator records it for `weft status`).
 * Returns false when the query ended (its probes being detached: query_end()). */
static bool query_budget(struct agent_daemon *d, struct dquery *q)
{
	struct agent_budget_report br;
	char why[sizeof(br.text) + 32];
	int rc = agent_query_budget(q->q, &br);

	if (rc < 0)
		log_warn("agent: query %" PRIu64 ": cannot read the CPU budget's statistics: %s",
			 q->id, strerror(-rc));
	if (rc <= 0 || br.verdict == AGENT_BUDGET_UNDER)
		return true;
	if (br.verdict == AGENT_BUDGET_OVER) {
		log_warn("agent: query %" PRIu64 ": %s [W_CPU_BUDGET]", q->id, br.text);
		return true;
	}
	snprintf(why, sizeof(why), "%s [E_CPU_BUDGET]", br.text);
	log_warn("agent: query %" PRIu64 ": %s", q->id, why);
	q->stopped = q->stopped_why = strdup(why); /* the last Partial, after the detach */
	if (!q->stopped)
		q->stopped = "over its CPU budget [E_CPU_BUDGET]";
	query_end(d, q, true);
	return false;
}

/* Window ends, the query's end, the once-a-second merge: whatever is due
 * (agent/schedule.h, with windows aligned across hosts: late windows are skipped), then the
 * CPU budget.  Returns false when the query ended (query_end()). */
static bool query_tick(struct agent_daemon *d, struct dquery *q)
{
	for (;;) {
		uint64_t w = q->s.window, skipped;

		switch (agent_sched_due(&q->s, real_ns(), mono_ns())) {
		case AGENT_SCHED_END:
			query_end(d, q, true);
			return false;
		case AGENT_SCHED_CLOSE:
			flip(q);
			if (q->gc)
				ship_graph(d, q, false, false);
			if (q->stream) {
				agent_query_poll(q->q, 0);
				ship_rows(d, q, false);
			}
			ship_partial(d, q, false);
			skipped = agent_sched_close(&q->s, real_ns(), mono_ns());
			if (skipped)
				log_warn(
					"agent: query %" PRIu64 ": windows %" PRIu64 "..%" PRIu64
					" skipped (the agent was late); their events are in window "
					"%" PRIu64,
					q->id, w + 1, w + skipped, w);
			continue;
		case AGENT_SCHED_FLIP:
			flip(q);
			return query_budget(d, q);
		case AGENT_SCHED_NONE:
			return query_budget(d, q);
		}
	}
}

static struct dquery *query_find(struct agent_daemon *d, uint64_t id)
{
	for (struct dquery *q = d->queries; q; q = q->next)
		if (q->id == id)
			return q;
	return NULL;
}

static void query_start(struct agent_daemon *d, const Weft__QueryStart *m)
{
	struct agent_query_opts ao = { .sz = sizeof(ao) };
	struct agent_err aerr;
	struct dquery *q;
	char err[512], msg[640], budget[64];
	uint64_t now = real_ns(), end;
	int rc;

	q = query_find(d, m->query_id);
	if (q && q->s.epoch != m->epoch_realtime_ns) {
		/* the id was reused: an aggregator that lost its store forgot the old query */
		log_warn("agent: query %" PRIu64 " started again with another epoch: the old one "
			 "is dropped, the new one runs",
			 m->query_id);
		unlink_query(d, q);
		query_free(q);
	} else if (q || has_ended(d, m->query_id, m->epoch_realtime_ns)) {
		log_debug("agent: query %" PRIu64 " is running or ended here: start ignored",
			  m->query_id);
		return;
	}
	q = calloc(1, sizeof(*q));
	if (!q) {
		send_query_error(d, m->query_id, "out of memory", NULL);
		return;
	}
	q->id = m->query_id;
	err[0] = 0;
	q->plan = manifest_read((const char *)m->manifest.data, m->manifest.len, err, sizeof(err));
	if (!q->plan) {
		snprintf(msg, sizeof(msg), "the manifest was refused: %s",
			 err[0] ? err : strerror(errno));
		send_query_error(d, q->id, msg, NULL);
		goto out_free;
	}
	q->d = d;
	q->stream = !q->plan->aggregating && !q->plan->graph;
	if (q->stream && (q->plan->ncols < 1 || (size_t)q->plan->ncols > WIRE_MAX_CELLS)) {
		send_query_error(d, q->id, "a stream query's columns cannot travel in row batches",
				 NULL);
		goto out_free;
	}
	if (q->plan->pid) {
		send_query_error(d, q->id,
				 "the query was compiled for one process (-p): process ids mean "
				 "nothing on other hosts",
				 NULL);
		goto out_free;
	}
	end = UINT64_MAX;
	if (m->has_end_realtime_ns && m->end_realtime_ns)
		end = m->end_realtime_ns;
	else if (q->plan->for_ns)
		end = add_sat(m->epoch_realtime_ns, q->plan->for_ns);
	agent_sched_init(&q->s, m->epoch_realtime_ns, q->plan->every_ns, end, false, now,
			 mono_ns());
	if (q->plan->graph) {
		struct graphcap_opts go = {
			.sz = sizeof(go), .host = d->host, .sample = -1, .live_clock = true
		};

		plan_graph_windows(q->plan, &q->wplan);
		q->gc = graphcap_new(q->plan, &go);
		if (!q->gc) {
			send_query_error(d, q->id, "cannot set up the graph capture",
					 strerror(errno));
			goto out_free;
		}
		ao.on_row = graph_row;
		ao.row_ctx = q;
	} else if (q->stream) {
		plan_graph_windows(q->plan, &q->wplan); /* windows of no groups */
		q->ra.cells = calloc((size_t)q->plan->ncols, sizeof(*q->ra.cells));
		if (!q->ra.cells) {
			send_query_error(d, q->id, "out of memory", NULL);
			goto out_free;
		}
		ao.on_row = stream_row;
		ao.row_ctx = q;
	}
	q->win = agent_table_new(q->gc || q->stream ? &q->wplan : q->plan, 0);
	if (!q->win) {
		send_query_error(d, q->id, "cannot make the query's table", strerror(errno));
		goto out_free;
	}
	if (now >= end) {
		/* over before it reached us (a late join): say so, with nothing in it */
		agent_sched_set_window(
			&q->s, agent_sched_window_of(&q->s, end - (end > q->s.epoch ? 1 : 0)));
		if (q->stream)
			ship_rows(d, q, true); /* no rows, and no more: the client need not wait */
		ship_partial(d, q, true);
		remember_ended(d, q);
		goto out_free;
	}
	ao.host = d->host;
	ao.verbose = d->o.verbose;
	ao.scope = d->o.scope;
	ao.cpu_budget = d->o.cpu_budget < 0 ? 0 :
			d->o.cpu_budget > 0 ? d->o.cpu_budget :
					      AGENT_CPU_BUDGET_DEFAULT;
	rc = agent_query_start(q->plan, m->object.data, m->object.len, &ao, &q->q, &aerr);
	if (rc) {
		agent_err_line(&aerr, rc, msg, sizeof(msg));
		send_query_error(d, q->id, msg, aerr.detail);
		goto out_free;
	}
	agent_query_budget_start(q->q);
	agent_sched_flipped(&q->s, mono_ns());
	q->next = d->queries;
	d->queries = q;
	d->st.queries++;
	if (ao.cpu_budget > 0)
		snprintf(budget, sizeof(budget), "CPU budget %g%% of one CPU", ao.cpu_budget);
	else
		snprintf(budget, sizeof(budget), "no CPU budget");
	if (q->s.every)
		log_info("agent: query %" PRIu64 " running: %d probe%s, window %" PRIu64
			 " of %" PRIu64 " ms, %s",
			 q->id, q->plan->nattach, q->plan->nattach == 1 ? "" : "s", q->s.window,
			 q->s.every / MS, budget);
	else
		log_info("agent: query %" PRIu64 " running: %d probe%s, one window, %s", q->id,
			 q->plan->nattach, q->plan->nattach == 1 ? "" : "s", budget);
	return;
out_free:
	query_free(q);
}

static void query_stop(struct agent_daemon *d, uint64_t id)
{
	struct dquery *q = query_find(d, id);

	if (!q) {
		log_debug("agent: stop of query %" PRIu64 ", which is not running here", id);
		return;
	}
	query_end(d, q, true);
}

/* ---------------------------------------------------------------- the connection */

static void on_lost(void *ctx, const char *why, bool was_up)
{
	struct agent_daemon *d = ctx;

	if (was_up)
		log_warn("agent: lost the aggregator (%s); reconnecting, %zu partials spooled", why,
			 agent_spool_count(d->spool));
	else
		log_debug("agent: connection attempt ended (%s)", why);
}

static void on_refused(void *ctx, bool auth, uint32_t status)
{
	struct agent_daemon *d = ctx;

	if (d->auth_warned)
		return;
	d->auth_warned = true;
	if (auth)
		log_warn("agent: the aggregator refused this agent's key (ZAP status %u): is its "
			 "public key in the aggregator's allow-list?",
			 status);
	else
		log_warn("agent: the CURVE handshake with %s failed: is --server-key the "
			 "aggregator's public key?",
			 d->endpoint);
}

static void on_welcome(void *ctx, const struct session_welcome *sw)
{
	struct agent_daemon *d = ctx;

	if (sw->restarted)
		log_info("agent: the aggregator restarted (instance %016" PRIx64 ")",
			 sw->w->instance);
	d->auth_warned = false;
	log_info("agent: connected to aggregator %s as %s; %zu partials merged before, %zu to "
		 "send",
		 sw->w->aggregator, d->host, sw->acked, sw->resend);
}

static const struct session_ops agent_session_ops = {
	.running = running_ids,
	.welcomed = on_welcome,
	.lost = on_lost,
	.refused = on_refused,
};

/* What the session hands over: the aggregator's orders. */
static void on_message(struct agent_daemon *d, const Weft__Envelope *e)
{
	switch (e->body_case) {
	case WEFT__ENVELOPE__BODY_QUERY_START:
		query_start(d, e->query_start);
		break;
	case WEFT__ENVELOPE__BODY_QUERY_STOP:
		query_stop(d, e->query_stop->query_id);
		break;
	case WEFT__ENVELOPE__BODY_ERROR:
		log_warn("agent: the aggregator says: %s", e->error->message);
		break;
	default:
		log_debug("agent: ignored a %s", wire_body_name(e->body_case));
		break;
	}
}

static void on_socket(struct agent_daemon *d)
{
	Weft__Envelope *e;

	/* a bounded batch, so that windows and heartbeats are never starved */
	for (int i = 0; i < 256 && session_recv(d->sess, &e) > 0; i++) {
		if (!e)
			continue; /* the session's own, or rejected (counted) */
		on_message(d, e);
		wire_free(e);
	}
}

/* ---------------------------------------------------------------- life cycle */

static void features_probe(struct agent_daemon *d)
{
	const struct probe_features *f = probe_features_get();
	struct {
		bool on;
		const char *name;
	} all[] = {
		{ f && f->tracepoint && f->tracefs, "tracepoint" },
		{ f && f->tracepoint && f->tracefs, "syscall" },
		{ f && f->raw_tp, "raw_tracepoint" },
		{ f && f->uprobe, "uprobe" },
		{ f && f->uprobe, "usdt" },
		{ f && f->uprobe_multi, "uprobe_multi" },
		{ f && f->kprobe, "kprobe" },
		{ f && f->fentry, "fentry" },
		{ f && f->perf_event, "profile" },
		{ f && f->perf_event, "interval" },
		{ f && f->perf_event, "software" },
		{ f && f->ringbuf, "ringbuf" },
		{ f && f->btf, "btf" },
	};

	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		if (all[i].on && d->nfeatures < sizeof(d->features) / sizeof(d->features[0]))
			d->features[d->nfeatures++] = all[i].name;
}

struct agent_daemon *agent_daemon_new(const struct agent_daemon_opts *opts)
{
	struct session_opts so = { .sz = sizeof(so) };
	struct agent_daemon *d;
	struct utsname u;
	int err;

	if (!opts || !opts->endpoint || !*opts->endpoint ||
	    strlen(opts->endpoint) >= sizeof(d->endpoint) || !wire_key_valid(opts->server_key) ||
	    !wire_key_valid(opts->public_key) || !wire_key_valid(opts->secret_key)) {
		errno = EINVAL;
		return NULL;
	}
	d = calloc(1, sizeof(*d));
	if (!d)
		return NULL;
	d->detach_fd = -1;
	memcpy(&d->o, opts, opts->sz && opts->sz < sizeof(d->o) ? opts->sz : sizeof(d->o));
	snprintf(d->endpoint, sizeof(d->endpoint), "%s", opts->endpoint);
	memcpy(d->server_key, opts->server_key, WIRE_KEY_LEN + 1);
	memcpy(d->pub, opts->public_key, WIRE_KEY_LEN + 1);
	memcpy(d->sec, opts->secret_key, WIRE_KEY_LEN + 1);
	d->o.endpoint = d->endpoint;
	d->o.server_key = d->server_key;
	d->o.public_key = d->pub;
	d->o.secret_key = d->sec;
	if (opts->host && *opts->host)
		snprintf(d->host, sizeof(d->host), "%s", opts->host);
	else if (gethostname(d->host, sizeof(d->host) - 1) != 0 || !d->host[0])
		snprintf(d->host, sizeof(d->host), "localhost");
	d->o.host = d->host;
	if (uname(&u) == 0)
		snprintf(d->kernel, sizeof(d->kernel), "%s", u.release);
	features_probe(d);
	d->detach_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (d->detach_fd < 0)
		log_warn("agent: eventfd: %s: queries will be detached in the main loop",
			 strerror(errno));
	d->spool = agent_spool_new(opts->spool_max, opts->spool_max_bytes);
	d->zctx = zmq_ctx_new();
	if (!d->spool || !d->zctx) {
		agent_daemon_free(d);
		errno = ENOMEM;
		return NULL;
	}
	so.zctx = d->zctx;
	so.endpoint = d->endpoint;
	so.server_key = d->server_key;
	so.public_key = d->pub;
	so.secret_key = d->sec;
	so.role = WIRE_ROLE_AGENT;
	so.host = d->host;
	so.version = agent_version();
	so.kernel = d->kernel;
	so.features = d->features;
	so.nfeatures = d->nfeatures;
	so.scope = d->o.scope && d->o.scope->kind != WEFT_SCOPE_ALL ? d->o.scope->text : NULL;
	so.log_name = "agent";
	so.ops = &agent_session_ops;
	so.ctx = d;
	so.spool_ops = &agent_spool_ops;
	so.spool = d->spool;
	d->sess = session_new(&so);
	if (!d->sess) {
		err = errno;
		agent_daemon_free(d);
		errno = err;
		return NULL;
	}
	return d;
}

static void tick(struct agent_daemon *d)
{
	query_reap(d);
	for (struct dquery *q = d->queries, *next; q; q = next) {
		next = q->next;
		if (q->detaching)
			continue;
		if (q->gc || q->stream)
			agent_query_poll(q->q, 0); /* graph records into the capture, rows */
		/* rows do not wait for the window's end: a batch at most every ROW_FLUSH_NS */
		if (q->stream && q->ra.rows && mono_ns() - q->ra.shipped >= ROW_FLUSH_NS)
			ship_rows(d, q, false);
		query_tick(d, q);
	}
	session_tick(d->sess);
}

static int wait_ms(struct agent_daemon *d)
{
	uint64_t now = mono_ns(), real = real_ns(), wait = AGENT_FLIP_MAX_NS;

	for (struct dquery *q = d->queries; q; q = q->next) {
		uint64_t w;

		if (q->detaching) /* its detacher wakes the loop */
			continue;
		w = agent_sched_wait_ns(&q->s, real, now);

		if (q->stream && q->ra.rows) /* rows waiting for their batch */
			w = q->ra.shipped + ROW_FLUSH_NS > now ?
				    q->ra.shipped + ROW_FLUSH_NS - now :
				    0;
		if (w < wait)
			wait = w;
	}
	return session_timeout_ms(d->sess, (int)((wait + MS - 1) / MS));
}

/* Detach every query, ship what each holds, and give the aggregator a moment to ack. */
static void shutdown_queries(struct agent_daemon *d)
{
	uint64_t until;

	while (d->queries)
		query_finish(d, d->queries, false);
	if (!session_up(d->sess))
		return;
	session_flush(d->sess);
	until = mono_ns() + SHUTDOWN_ACK_WAIT_NS;
	while (session_up(d->sess) && agent_spool_count(d->spool) && mono_ns() < until) {
		zmq_pollitem_t it[SESSION_POLL_ITEMS];
		int n = session_poll_items(d->sess, it);

		if (zmq_poll(it, n, 50) < 0 && errno != EINTR)
			break;
		if (n && (it[1].revents & ZMQ_POLLIN))
			session_poll_events(d->sess);
		if (n && (it[0].revents & ZMQ_POLLIN))
			on_socket(d);
		session_flush(d->sess);
	}
	if (agent_spool_count(d->spool))
		log_warn("agent: exiting with %zu partials not acknowledged",
			 agent_spool_count(d->spool));
}

int agent_daemon_run(struct agent_daemon *d)
{
	if (!d)
		return -EINVAL;
	if (geteuid() != 0)
		log_warn("agent: not running as root: loading BPF programs will fail");
	log_info("agent: %s (instance %016" PRIx64 ") connecting to %s; tracing %s%s", d->host,
		 session_instance(d->sess), d->endpoint,
		 d->o.scope && d->o.scope->kind != WEFT_SCOPE_ALL ? "only " : "the whole machine",
		 d->o.scope && d->o.scope->kind != WEFT_SCOPE_ALL ? d->o.scope->text : "");
	for (;;) {
		zmq_pollitem_t it[SESSION_POLL_ITEMS + 2 + GRAPH_POLL_MAX];
		int n, nsess, istop = -1, timeout, ng = 0;

		tick(d);
		timeout = wait_ms(d);
		n = nsess = session_poll_items(d->sess, it);
		if (d->o.stop_fd >= 0) {
			istop = n;
			it[n++] = (zmq_pollitem_t){ .fd = d->o.stop_fd, .events = ZMQ_POLLIN };
		}
		if (d->detach_fd >= 0) /* tick() reaps the queries detached meanwhile */
			it[n++] = (zmq_pollitem_t){ .fd = d->detach_fd, .events = ZMQ_POLLIN };
		/* graph records and stream rows wake the loop (tick() takes them); past
		 * GRAPH_POLL_MAX such queries, the others are read at least every
		 * AGENT_FLIP_MAX_NS */
		for (struct dquery *q = d->queries; q && ng < GRAPH_POLL_MAX; q = q->next)
			if ((q->gc || q->stream) && !q->detaching && agent_query_fd(q->q) >= 0) {
				it[n++] = (zmq_pollitem_t){ .fd = agent_query_fd(q->q),
							    .events = ZMQ_POLLIN };
				ng++;
			}
		if (zmq_poll(it, n, timeout) < 0) {
			if (errno == EINTR)
				continue;
			log_err("agent: poll: %s", strerror(errno));
			shutdown_queries(d);
			return -errno;
		}
		if (istop >= 0 && (it[istop].revents & ZMQ_POLLIN))
			break;
		if (nsess && (it[1].revents & ZMQ_POLLIN))
			session_poll_events(d->sess);
		if (nsess && (it[0].revents & ZMQ_POLLIN))
			on_socket(d);
	}
	log_info("agent: stopping");
	shutdown_queries(d);
	return 0;
}

void agent_daemon_stats(const struct agent_daemon *d, struct agent_daemon_stats *st)
{
	struct session_stats ss = { 0 };

	if (!d || !st)
		return;
	*st = d->st;
	session_stats(d->sess, &ss);
	st->sent = ss.sent;
	st->received = ss.received;
	st->rejected = ss.rejected;
	st->resent = ss.resent;
	st->connects = ss.connects;
	st->connected = session_up(d->sess);
	st->spooled = agent_spool_count(d->spool);
	st->spool_bytes = agent_spool_bytes(d->spool);
	st->spool_dropped = agent_spool_dropped(d->spool);
}

void agent_daemon_free(struct agent_daemon *d)
{
	if (!d)
		return;
	while (d->queries) {
		struct dquery *q = d->queries;

		d->queries = q->next;
		query_free(q);
	}
	session_free(d->sess);
	if (d->zctx)
		zmq_ctx_term(d->zctx);
	if (d->detach_fd >= 0)
		close(d->detach_fd);
	agent_spool_free(d->spool);
	explicit_bzero(d->sec, sizeof(d->sec));
	free(d);
}
