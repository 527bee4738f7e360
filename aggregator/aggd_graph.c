// SPDX-License-Identifier: Apache-2.0
/*
 * The aggregator's graph store (docs/graphs.md "Stitching", docs/protocol.md "Graph
 * batches"): GraphBatches from senders are stored, one graph_store_put() (one transaction)
 * each, in the SQLite graph store next to the aggregator's own store; pieces of one trace
 * that several senders hold join there by trace id (a task stored twice counts once: the
 * store's own rule), and after a query's last window every trace it touched is checked and
 * marked incomplete when a task's parent or an edge's task never arrived, or a task never
 * ended.
 *
 * Exactly once: a batch is settled (stored, or refused) at most once per sender instance and
 * seq, like a Partial (p->upto, written with the next checkpoint, Ack after it commits).  The
 * graph store commits first, so a crash between the two makes the sender resend a batch that
 * is already stored: its tasks and edges are recognised as stored and not counted again
 * (graph_store_put()'s rule); only events of a task stored by an earlier batch would be kept
 * twice in that window of at most AGGD_CHECKPOINT_NS.
 *
 * The check of a query's traces runs in slices of CHECK_SLICE traces per tick, so that a
 * query that touched a million traces does not stall the loop.  The set of traces a query
 * touched is in memory, bounded (AGGD_GRAPH_TOUCHED_MAX; traces past it are counted
 * unchecked); an aggregator restarted while a graph query runs does not check the traces
 * touched before the restart.
 *
 * Must never: store a batch of another host than its sender's (an agent's), store a batch
 * twice, or block the loop on a long check.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>
#include "agent/wire_graph.h"
#include "aggregator/aggd.h"
#include "aggregator/aggd_kx.h"
#include "base/log.h"
#include "graph/aggs.h"
#include "graph/store.h"
#include "aggregator/aggd_int.h"

#define CHECK_SLICE 2000 /* traces checked per tick */
/* Retention (--graph-max-age, --graph-max-size): a pass a second, in slices of RETAIN_SLICE
 * traces for at most RETAIN_TICK_NS a tick; a pass that has more to drop goes on at the next
 * tick (~20 slices a second: ~5,000 traces a second at least, more where a drop is cheaper) */
#define RETAIN_SLICE 500
#define RETAIN_TICK_NS 50000000ULL /* 50 ms */
#define RETAIN_EVERY_NS 1000000000ULL /* 1 s */
#define RETAIN_AFTER_ERROR_NS 60000000000ULL /* 60 s */

/* ---- the set of traces a query touched ---- */

struct tent {
	uint64_t hi, lo;
	uint8_t used, open;
};

struct aggd_tset {
	struct tent *e;
	size_t cap, n;
	size_t pos; /* the check's next slot */
	uint64_t unchecked; /* traces past the bound */
};

static size_t thash(uint64_t hi, uint64_t lo)
{
	uint64_t x = hi * 0x9e3779b97f4a7c15ull ^ lo;

	x ^= x >> 31;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 29;
	return (size_t)x;
}

static int tset_add(struct aggd_tset *t, uint64_t hi, uint64_t lo, bool open)
{
	size_t i;

	if ((t->n + 1) * 2 > t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 1024;
		struct tent *e;

		if (t->n >= AGGD_GRAPH_TOUCHED_MAX) {
			/* a full set still finds the traces it holds */
			for (i = thash(hi, lo) & (t->cap - 1); t->e[i].used;
			     i = (i + 1) & (t->cap - 1))
				if (t->e[i].hi == hi && t->e[i].lo == lo) {
					t->e[i].open |= open;
					return 0;
				}
			t->unchecked++;
			return 0;
		}
		e = calloc(cap, sizeof(*e));
		if (!e)
			return -ENOMEM;
		for (size_t k = 0; k < t->cap; k++) {
			if (!t->e[k].used)
				continue;
			for (i = thash(t->e[k].hi, t->e[k].lo) & (cap - 1); e[i].used;
			     i = (i + 1) & (cap - 1))
				;
			e[i] = t->e[k];
		}
		free(t->e);
		t->e = e;
		t->cap = cap;
	}
	for (i = thash(hi, lo) & (t->cap - 1); t->e[i].used; i = (i + 1) & (t->cap - 1))
		if (t->e[i].hi == hi && t->e[i].lo == lo) {
			t->e[i].open |= open;
			return 0;
		}
	t->e[i] = (struct tent){ .hi = hi, .lo = lo, .used = 1, .open = open };
	t->n++;
	return 0;
}

/* Whether the set holds trace (hi, lo). */
static bool tset_has(const struct aggd_tset *t, uint64_t hi, uint64_t lo)
{
	if (!t || !t->cap)
		return false;
	for (size_t i = thash(hi, lo) & (t->cap - 1); t->e[i].used; i = (i + 1) & (t->cap - 1))
		if (t->e[i].hi == hi && t->e[i].lo == lo)
			return true;
	return false;
}

/* aggd_kx's question: did earlier batches of the query store pieces of trace t? */
static bool kx_stored(void *arg, struct graph_id128 t)
{
	const struct query *q = arg;

	return tset_has(q->touched, t.hi, t.lo);
}

void aggd_graph_query_free(struct query *q)
{
	if (!q || !q->touched)
		return;
	free(q->touched->e);
	free(q->touched);
	q->touched = NULL;
}

/* ---- what each window of a graph query stored ---- */

struct aggd_gwin {
	uint64_t window, traces, tasks, events, edges, lost;
};

static struct aggd_gwin *gwin_get(struct query *q, uint64_t window)
{
	for (size_t i = q->ngw; i-- > 0;)
		if (q->gw[i].window == window)
			return &q->gw[i];
	if (q->ngw == q->gwcap) {
		size_t cap = q->gwcap ? q->gwcap * 2 : 8;
		struct aggd_gwin *nv = realloc(q->gw, cap * sizeof(*nv));

		if (!nv)
			return NULL;
		q->gw = nv;
		q->gwcap = cap;
	}
	q->gw[q->ngw] = (struct aggd_gwin){ .window = window };
	return &q->gw[q->ngw++];
}

/* Windows far below the latest are forgotten: a graph query's results need the recent ones
 * only (a revision of an old window reports what its batches stored since). */
static void gwin_trim(struct query *q)
{
	if (q->ngw < 256)
		return;
	memmove(q->gw, q->gw + 128, (q->ngw - 128) * sizeof(*q->gw));
	q->ngw -= 128;
}

/* ---- the store ---- */

int aggd_graph_default_path(const char *store, char *buf, size_t sz)
{
	const char *env = getenv("WEFT_GRAPH_STORE"), *slash;
	char def[4096];
	int n, rc;

	if (env && *env) {
		n = snprintf(buf, sz, "%s", env);
		return n < 0 || (size_t)n >= sz ? -ENAMETOOLONG : 0;
	}
	if (store && strcmp(store, ":memory:") == 0) {
		n = snprintf(buf, sz, ":memory:"); /* an aggregator of no files keeps graphs so */
		return n < 0 || (size_t)n >= sz ? -ENAMETOOLONG : 0;
	}
	if (!store) {
		if ((rc = aggd_store_default_path(def, sizeof(def))))
			return rc;
		store = def;
	}
	slash = strrchr(store, '/');
	if (!slash)
		n = snprintf(buf, sz, "%s", AGGD_GRAPH_FILE);
	else
		n = snprintf(buf, sz, "%.*s/%s", (int)(slash - store), store, AGGD_GRAPH_FILE);
	return n < 0 || (size_t)n >= sz ? -ENAMETOOLONG : 0;
}

int aggd_graph_open(struct aggd *a, const char *store, char *err, size_t errsz)
{
	char why[512] = "";
	int rc;

	if (a->o.graph_store && *a->o.graph_store)
		snprintf(a->gpath, sizeof(a->gpath), "%s", a->o.graph_store);
	else if ((rc = aggd_graph_default_path(store, a->gpath, sizeof(a->gpath)))) {
		snprintf(err, errsz, "no default graph store path (%s): give --graph-store",
			 strerror(-rc));
		return rc;
	}
	a->gs = graph_store_open(a->gpath, why, sizeof(why));
	if (!a->gs) {
		snprintf(err, errsz, "--graph-store %s: %s", a->gpath,
			 why[0] ? why : "cannot open the graph store");
		return -EINVAL;
	}
	a->keep.max_age_ns = a->o.graph_max_age_ns;
	a->keep.max_bytes = a->o.graph_max_bytes;
	a->kx = aggd_kx_new();
	if (!a->kx) {
		snprintf(err, errsz, "out of memory");
		return -ENOMEM;
	}
	return 0;
}

void aggd_graph_close(struct aggd *a)
{
	struct aggd_kx_stats ks;

	aggd_kx_stats(a->kx, &ks);
	if (ks.matched || ks.split || ks.bad || ks.dropped)
		log_info("aggregator: kernel edges across hosts: %" PRIu64 " matched, %" PRIu64
			 " split, %" PRIu64 " bad, %" PRIu64 " dropped",
			 ks.matched, ks.split, ks.bad, ks.dropped);
	aggd_kx_free(a->kx);
	a->kx = NULL;
	graph_store_close(a->gs);
	a->gs = NULL;
}

/* ---- batches ---- */

/* Attributes, when present, must be a JSON object's text (jansson; what every output of the
 * store parses them as): NULL, or which element's are not. */
static const char *attrs_bad(const Weft__GraphBatch *b, char *buf, size_t sz)
{
	for (size_t k = 0; k < b->n_tasks + b->n_events; k++) {
		const char *t =
			k < b->n_tasks ? b->tasks[k]->attrs : b->events[k - b->n_tasks]->attrs;
		json_t *o;
		bool ok;

		if (!t || !*t)
			continue;
		o = json_loads(t, JSON_REJECT_DUPLICATES, NULL);
		ok = json_is_object(o);
		json_decref(o);
		if (!ok) {
			snprintf(buf, sz, "the attributes of %s %zu are not a JSON object",
				 k < b->n_tasks ? "task" : "event",
				 k < b->n_tasks ? k : k - b->n_tasks);
			return buf;
		}
	}
	return NULL;
}

static void settle(struct aggd *a, struct peer *p, uint64_t seq)
{
	p->upto = seq;
	p->ack_due = a->acks_due = true;
}

static void refuse(struct aggd *a, struct peer *p, const Weft__GraphBatch *b, const char *why)
{
	a->rejected++;
	a->gst.rejected++;
	log_warn("aggregator: %s: graph batch of query %" PRIu64 " window %" PRIu64 " refused: %s",
		 aggd_peer_label(p), b->query_id, b->window, why);
}

/* check_trace()'s answer for a trace no longer in the store (retention dropped it) */
#define CHECK_GONE (UINT32_MAX - 1)

static uint32_t check_trace(struct aggd *a, const struct tent *t, char *why, size_t whysz)
{
	struct graph g;
	char hex[33];
	uint32_t old = 0, f;
	int rc;

	graph_id128_hex((struct graph_id128){ t->hi, t->lo }, hex);
	graph_init(&g);
	rc = graph_store_load(a->gs, hex, &g, why, whysz);
	if (rc) {
		graph_free(&g);
		return rc == -ENOENT ? CHECK_GONE : UINT32_MAX;
	}
	f = graph_trace_gaps(&g) | (t->open ? GRAPH_INC_OPEN : 0);
	graph_free(&g);
	if (graph_store_mark_get(a->gs, hex, &old, why, whysz))
		return UINT32_MAX;
	/* an open task is known only to the batch that brought it: never cleared */
	f |= old & GRAPH_INC_OPEN;
	if (f != old && graph_store_mark_set(a->gs, hex, f, why, whysz))
		return UINT32_MAX;
	return f;
}

/* Checks up to max traces of q's set from its position; true when it has checked them all. */
static bool check_slice(struct aggd *a, struct query *q, size_t max)
{
	struct aggd_tset *t = q->touched;
	char why[512];

	while (t && t->pos < t->cap && max) {
		const struct tent *e = &t->e[t->pos++];
		uint32_t f;

		if (!e->used)
			continue;
		max--;
		f = check_trace(a, e, why, sizeof(why));
		if (f == CHECK_GONE)
			continue; /* dropped by --graph-max-age or --graph-max-size: not checked */
		if (f == UINT32_MAX) {
			log_err("aggregator: query %" PRIu64 ": checking a trace: %s", q->id, why);
			continue;
		}
		a->gst.checked++;
		if (f) {
			a->gst.incomplete++;
			q->gincomplete++;
		}
	}
	return !t || t->pos >= t->cap;
}

/* A retention pass, or a part of one (--graph-max-age, --graph-max-size). */
static void retain_tick(struct aggd *a)
{
	uint64_t t0 = aggd_mono_ns(), t = t0, before = a->keep.dropped;
	char why[512];
	ssize_t n;

	if (!a->gs || (!a->keep.max_age_ns && !a->keep.max_bytes) || t0 < a->keep_next)
		return;
	do {
		why[0] = 0;
		n = graph_retention_step(a->gs, &a->keep, RETAIN_SLICE, why, sizeof(why));
		t = aggd_mono_ns();
	} while (n == RETAIN_SLICE && t - t0 < RETAIN_TICK_NS);
	a->gst.retained = a->keep.dropped;
	if (a->keep.dropped > before)
		log_debug("aggregator: graph store: %" PRIu64 " traces dropped by retention",
			  a->keep.dropped - before);
	if (n < 0) {
		log_err("aggregator: graph store %s: retention: %s (again in 60 s)", a->gpath,
			why[0] ? why : strerror((int)-n));
		a->keep_next = t + RETAIN_AFTER_ERROR_NS;
		return;
	}
	a->keep_next = n == RETAIN_SLICE ? t : t + RETAIN_EVERY_NS;
}

void aggd_graph_tick(struct aggd *a)
{
	retain_tick(a);
	for (size_t i = 0; a->gs && i < a->nq; i++) {
		struct query *q = a->q[i];

		if (!q->ended || q->gchecked)
			continue;
		if (check_slice(a, q, CHECK_SLICE)) {
			q->gchecked = true;
			if (!q->touched)
				continue;
			log_info("aggregator: query %" PRIu64 ": %zu traces checked (%" PRIu64
				 " incomplete so far%s)",
				 q->id, q->touched->n, a->gst.incomplete,
				 q->touched->unchecked ? ", some not checked: too many" : "");
			/* later batches of the query (late ones) are checked one by one */
			free(q->touched->e);
			q->touched->e = NULL;
			q->touched->cap = q->touched->n = q->touched->pos = 0;
		}
	}
}

/*
 * A child aggregator passes every batch it takes up to its parent, as its own (host: its
 * name; tasks keep their hosts; the parent's query id), through the parent link's spool: it
 * is resent after reconnects until the parent acknowledges it, like the child's partials.
 */
static void forward_up(struct aggd *a, struct query *q, const Weft__GraphBatch *b,
		       const struct graph *g)
{
	struct wire_graph_meta m = { .query_id = q->parent_id,
				     .window = b->window,
				     .host = a->name,
				     .last = false,
				     .lost = b->lost };
	bool *open = g->ntasks ? calloc(g->ntasks, sizeof(*open)) : NULL;
	char why[256] = "";
	void *body;
	size_t len;
	int rc;

	if (g->ntasks && !open) {
		log_err("aggregator: out of memory: a graph batch not forwarded to the parent");
		return;
	}
	for (size_t i = 0; i < b->n_tasks && open; i++)
		open[i] = !b->tasks[i]->has_end_ns;
	m.open = open;
	if (b->has_aggs && b->aggs.len) {
		m.aggs = b->aggs.data;
		m.aggs_len = b->aggs.len;
	}
	rc = wire_graph_pack(&m, g, &body, &len, why, sizeof(why));
	free(open);
	if (rc == 0)
		rc = aggd_parent_spool_body(a, WEFT__ENVELOPE__BODY_GRAPH_BATCH, body, len);
	if (rc)
		log_err("aggregator: query %" PRIu64
			": a graph batch not forwarded to the parent: %s",
			q->id, why[0] ? why : strerror(-rc));
}

void aggd_on_graph_batch(struct aggd *a, struct peer *p, const Weft__Envelope *env)
{
	const Weft__GraphBatch *b = env->graph_batch;
	struct graph_put_stats st = { 0 };
	struct graph_aggs aggs;
	struct query *q;
	struct graph g;
	size_t nopen = 0;
	char why[512] = "";
	int rc;

	if (env->seq <= p->upto) {
		/* stored already (a repeat): acknowledged again */
		p->ack_due = a->acks_due = true;
		return;
	}
	q = aggd_query_find(a, b->query_id);
	if (strcmp(b->host, p->host) != 0) {
		refuse(a, p, b, "its host is not the sender's");
		goto out;
	}
	if (!q) {
		log_info("aggregator: %s sent a graph batch of query %" PRIu64
			 ", which is not running here: stopping it there",
			 p->host, b->query_id);
		aggd_send_stop(a, p, b->query_id);
		a->gst.rejected++;
		goto out;
	}
	if (!a->gs) {
		refuse(a, p, b, "this aggregator has no graph store");
		goto out;
	}
	if (p->role == WIRE_ROLE_AGENT) {
		for (size_t i = 0; i < b->n_tasks; i++)
			if (b->tasks[i]->host && *b->tasks[i]->host &&
			    strcmp(b->tasks[i]->host, p->host)) {
				refuse(a, p, b, "a task of another host");
				goto out;
			}
	}
	if (attrs_bad(b, why, sizeof(why))) {
		refuse(a, p, b, why);
		goto out;
	}
	if (!aggd_peer_pq(p, q->id))
		aggd_peer_pq_add(p, q->id, aggd_query_active(q) ? PQ_RUNNING : PQ_STOPPED);
	graph_init(&g);
	graph_aggs_init(&aggs);
	rc = wire_graph_unpack(b, p->host, &g, &nopen, why, sizeof(why));
	/* kernel message edges whose two ends two senders hold (aggd_kx.c) */
	if (rc == 0 && (rc = aggd_kx_batch(a->kx, q->id, &g, kx_stored, q)))
		snprintf(why, sizeof(why), "out of memory matching kernel edges");
	if (rc == 0 && b->has_aggs && b->aggs.len)
		rc = graph_aggs_decode(&aggs, b->aggs.data, b->aggs.len, why, sizeof(why));
	if (rc == 0) {
		/* a sender that pre-aggregated (a sampling agent) brings the aggregates of every
		 * trace it saw: its kept traces add none of their own */
		bool pre = b->has_aggs && b->aggs.len;

		rc = graph_store_put_opts(a->gs, &g, pre ? GRAPH_PUT_NO_AGGS : 0, &st, why,
					  sizeof(why));
		if (rc == 0 && pre && !graph_aggs_empty(&aggs))
			rc = graph_store_put_aggs(a->gs, &aggs, why, sizeof(why));
		/* what this store could not take (but for a refusal) the parent may */
		if (rc != -EINVAL && a->has_parent && q->parent_id)
			forward_up(a, q, b, &g);
	}
	if (rc == -EINVAL) {
		refuse(a, p, b, why);
	} else if (rc) {
		a->gst.failed++;
		log_err("aggregator: %s: graph batch of query %" PRIu64 " window %" PRIu64
			" not stored: %s",
			aggd_peer_label(p), b->query_id, b->window, why[0] ? why : strerror(-rc));
	} else {
		if (!q->touched)
			q->touched = calloc(1, sizeof(*q->touched));
		/* g's ids, as stored (aggd_kx may have moved some); its tasks are b's, in order */
		for (size_t i = 0; q->touched && i < g.ntasks; i++)
			tset_add(q->touched, g.tasks[i].trace.hi, g.tasks[i].trace.lo,
				 i < b->n_tasks && !b->tasks[i]->has_end_ns);
		for (size_t i = 0; q->touched && i < g.nevents; i++)
			tset_add(q->touched, g.events[i].trace.hi, g.events[i].trace.lo, false);
		for (size_t i = 0; q->touched && i < g.nedges; i++)
			tset_add(q->touched, g.edges[i].trace.hi, g.edges[i].trace.lo, false);
		struct aggd_gwin *gw = q->plan->graph ? gwin_get(q, b->window) : NULL;

		if (gw) {
			gw->traces += st.traces;
			gw->tasks += st.tasks;
			gw->events += st.events;
			gw->edges += st.edges;
			gw->lost += b->lost;
			gwin_trim(q);
		}
		a->gst.batches++;
		a->gst.tasks += st.tasks;
		a->gst.events += st.events;
		a->gst.edges += st.edges;
		a->gst.replaced += st.replaced;
		aggd_gfwd_put(a, &g); /* to the collector, when forwarding (aggd_gfwd.c) */
		log_debug("aggregator: query %" PRIu64 ": graph batch of %s window %" PRIu64
			  ": %" PRIu64 " traces, %" PRIu64 " tasks (%" PRIu64
			  " stored already), %" PRIu64 " events, %" PRIu64 " edges, %zu open",
			  q->id, p->host, b->window, st.traces, st.tasks, st.replaced, st.events,
			  st.edges, nopen);
		if ((q->ended || q->gchecked) && q->touched) {
			/* a batch after the query's end: checked now, alone (the set holds only
			 * its traces); during the end's check, that check starts over (a mark is
			 * the same however often it is made) */
			q->touched->pos = 0;
			if (q->gchecked) {
				check_slice(a, q, SIZE_MAX);
				free(q->touched->e);
				q->touched->e = NULL;
				q->touched->cap = q->touched->n = q->touched->pos = 0;
			}
		}
	}
	graph_free(&g);
	graph_aggs_free(&aggs);
	a->gst.lost += b->lost;
out:
	/* stored, refused or failed: settled, and acknowledged after the next checkpoint */
	settle(a, p, env->seq);
}

void aggd_graph_window(struct aggd *a, struct query *q, uint64_t window, bool last,
		       Weft__GraphWindow *out)
{
	weft__graph_window__init(out);
	for (size_t i = 0; i < q->ngw; i++)
		if (q->gw[i].window == window) {
			out->traces = q->gw[i].traces;
			out->tasks = q->gw[i].tasks;
			out->events = q->gw[i].events;
			out->edges = q->gw[i].edges;
			out->has_lost = true;
			out->lost = q->gw[i].lost;
		}
	if (!last)
		return;
	if (a->gs && !q->gchecked) {
		/* the query's end: its traces are checked now, whole, for the last result (the
		 * set is bounded by AGGD_GRAPH_TOUCHED_MAX); later batches are checked alone */
		check_slice(a, q, SIZE_MAX);
		q->gchecked = true;
		if (q->touched) {
			free(q->touched->e);
			q->touched->e = NULL;
			q->touched->cap = q->touched->n = q->touched->pos = 0;
		}
	}
	out->has_incomplete = true;
	out->incomplete = q->gincomplete;
}

void aggd_graph_status(struct aggd *a, Weft__GraphStatus *s)
{
	weft__graph_status__init(s);
	s->path = a->gpath;
#define GSET(f)            \
	s->has_##f = true; \
	s->f = a->gst.f
	GSET(batches);
	GSET(tasks);
	GSET(events);
	GSET(edges);
	GSET(replaced);
	GSET(rejected);
	GSET(failed);
	GSET(lost);
	GSET(incomplete);
	GSET(checked);
#undef GSET
	/* said only where the store has a bound */
	s->has_retained = a->keep.max_age_ns || a->keep.max_bytes;
	s->retained = a->gst.retained;
	s->has_max_age_ns = a->keep.max_age_ns != 0;
	s->max_age_ns = a->keep.max_age_ns;
	s->has_max_bytes = a->keep.max_bytes != 0;
	s->max_bytes = a->keep.max_bytes;
	if (a->kx) {
		struct aggd_kx_stats ks;

		aggd_kx_stats(a->kx, &ks);
		s->has_kernel_matched = s->has_kernel_split = true;
		s->has_kernel_bad = s->has_kernel_dropped = true;
		s->kernel_matched = ks.matched;
		s->kernel_split = ks.split;
		s->kernel_bad = ks.bad;
		s->kernel_dropped = ks.dropped;
	}
}
