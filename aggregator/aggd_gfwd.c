// SPDX-License-Identifier: Apache-2.0
/*
 * Forwarding stitched graphs from the aggregator to an OpenTelemetry Collector
 * (`weft aggregator --graph-forward URL`; docs/operations.md, "Forwarding graphs from the
 * aggregator"; graph/forward.h does the OTLP/HTTP part: batching by trace, retries with
 * back-off, the bounded spool on disk).
 *
 * What goes, and when.  Every GraphBatch the graph store took (aggd_graph.c) is handed here,
 * whole, after its put committed.  An element is forwarded `linger` (default 2 s) after it
 * reached the aggregator, together with every other element of its trace that reached it by
 * then, from any host: so the pieces that several agents ship of one request within the
 * linger go out as one stitched trace in one request.  A piece of a trace that comes later
 * (a slow agent, a late batch) is forwarded on its own, linger after it came, with the same
 * trace id: the backend joins it by trace id and parent span id, as it joins any spans.  So a
 * span is never held back for ever and never lost for coming late.
 *
 * Exactly once.  The OTLP span of a task carries its events (span events) and the edges that
 * end in it (span links); a span cannot be amended once sent.  So:
 *   - a task is forwarded once per (trace, id): one seen again (a resent batch, two hosts
 *     that report the same task: the store's own rule keeps the first) is counted
 *     `repeated` and not sent;
 *   - an event or edge goes with its task (for an edge, the task it ends in); one whose task
 *     was forwarded before it came is counted `late` (stored, not forwarded); one whose task
 *     has not come waits for it, up to `keep` (30 s) after its trace was last touched, then
 *     is counted `late` too (its trace is incomplete);
 *   - the memory of what was forwarded is per trace, and a trace is forgotten `keep` after
 *     its last element: a task of it seen again after that would be forwarded again.  It is
 *     bounded (AGGD_GFWD_KEYS_MAX tasks and traces); when full, the traces touched longest ago
 *     are forgotten first (counted `forgotten`).
 *
 * Never blocking the loop.  The socket loop only moves the batch's graph (no copy) onto a
 * queue under a mutex; a thread of its own does the rest: the linger, the dedup, the OTLP
 * requests (graph_fwd_add() and graph_fwd_poll(), which block on the network) and, every
 * `aggregates` interval (60 s) and at the end, the per-type aggregates as OTLP metrics of
 * their own resource (graph_fwd_aggregates(), read through a second handle on the graph
 * store file).  The queue is bounded (AGGD_GFWD_QUEUE_DEFAULT elements, --graph-forward-queue):
 * a batch that does not fit is not forwarded and its tasks counted `dropped`, with those the
 * spool had no room for.  The counters are in `weft status` and /metrics.
 *
 * Limits.  What waits in memory (the queue, the linger) is lost if the aggregator is killed
 * (SIGKILL, a crash); a clean stop (SIGINT, SIGTERM) forwards it, waits up to --graph-forward-wait
 * (5 s) for the collector, and leaves the rest in the spool, which the next start sends first.
 * After a crash, batches a sender resends are stored once but forwarded again (the memory of
 * what was forwarded does not survive a restart).  A graph store of ":memory:" forwards spans
 * but not the aggregates (the thread cannot open a second handle on it).
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "aggregator/aggd.h"
#include "base/log.h"
#include "graph/forward.h"
#include "graph/store.h"
#include "aggregator/aggd_int.h"

#define KEYS_MAX AGGD_GFWD_KEYS_MAX
#define WAKE_MAX_NS 250000000ULL /* the thread looks at its clock at least this often */

/* A batch waiting: moved from the loop, then held for its linger. */
struct item {
	struct item *next;
	struct graph g;
	uint64_t arrived; /* CLOCK_MONOTONIC */
	size_t left; /* elements not yet forwarded nor counted */
};

/*
 * One table for two kinds of keys: a trace (id 0; a = when it was last touched, b = the
 * flush it is due in) and a forwarded task (id its id; a = the flush that sent it).
 */
struct key {
	uint64_t hi, lo, id;
	uint64_t a, b;
	bool used;
};

struct aggd_gfwd {
	/* shared with the loop, under mu */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct item *qhead, *qtail;
	uint64_t qelems; /* elements queued */
	bool stop;
	struct aggd_gfwd_stats pub; /* what status shows */
	char last_error[256];

	/* the thread's own */
	pthread_t th;
	bool started;
	struct graph_fwd *f;
	char url[1024];
	char gpath[4096]; /* the graph store, for the aggregates ("" if none) */
	uint64_t linger, keep, aggs_every, wait, queue_max;
	struct item *phead, *ptail; /* pending: lingering, or holding elements whose task is
				     * not here yet */
	struct key *k;
	size_t kcap, kn;
	uint64_t gen; /* flushes so far */
	uint64_t next_flush, next_aggs;
	bool stored_since_aggs;
	struct aggd_gfwd_stats st; /* the thread's counts, copied to pub */
};

static uint64_t mono(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* ---- the table ---- */

static size_t khash(uint64_t hi, uint64_t lo, uint64_t id)
{
	uint64_t x = hi * 0x9e3779b97f4a7c15ull ^ lo ^ id * 0xc2b2ae3d27d4eb4full;

	x ^= x >> 31;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 29;
	return (size_t)x;
}

static struct key *kfind(struct aggd_gfwd *w, uint64_t hi, uint64_t lo, uint64_t id)
{
	if (!w->kcap)
		return NULL;
	for (size_t i = khash(hi, lo, id) & (w->kcap - 1); w->k[i].used;
	     i = (i + 1) & (w->kcap - 1))
		if (w->k[i].hi == hi && w->k[i].lo == lo && w->k[i].id == id)
			return &w->k[i];
	return NULL;
}

/* Into a table of cap slots (a power of two, > n): no check for presence. */
static void kput_raw(struct key *t, size_t cap, const struct key *e)
{
	size_t i;

	for (i = khash(e->hi, e->lo, e->id) & (cap - 1); t[i].used; i = (i + 1) & (cap - 1))
		;
	t[i] = *e;
}

/*
 * Rebuilds the table without the traces touched at or before `before` and their tasks
 * (with before = 0: only resizes).  Returns the traces forgotten, or -ENOMEM.
 */
static long krebuild(struct aggd_gfwd *w, size_t cap, uint64_t before)
{
	struct key *t = calloc(cap, sizeof(*t));
	long gone = 0;

	if (!t)
		return -ENOMEM;
	w->kn = 0;
	for (size_t i = 0; i < w->kcap; i++) {
		const struct key *e = &w->k[i];

		if (!e->used || e->id)
			continue;
		if (before && e->a <= before) {
			gone++;
			continue;
		}
		kput_raw(t, cap, e);
		w->kn++;
	}
	for (size_t i = 0; i < w->kcap; i++) {
		const struct key *e = &w->k[i];
		size_t j;

		if (!e->used || !e->id)
			continue;
		/* kept with its trace */
		for (j = khash(e->hi, e->lo, 0) & (cap - 1); t[j].used; j = (j + 1) & (cap - 1))
			if (t[j].hi == e->hi && t[j].lo == e->lo && !t[j].id)
				break;
		if (!t[j].used)
			continue;
		kput_raw(t, cap, e);
		w->kn++;
	}
	free(w->k);
	w->k = t;
	w->kcap = cap;
	return gone;
}

/* The key, added if absent (a = b = 0); NULL when the table is full or out of memory. */
static struct key *kget(struct aggd_gfwd *w, uint64_t hi, uint64_t lo, uint64_t id)
{
	struct key *e = kfind(w, hi, lo, id), n = { .hi = hi, .lo = lo, .id = id, .used = true };

	if (e)
		return e;
	if ((w->kn + 1) * 2 > w->kcap) {
		size_t cap = w->kcap ? w->kcap * 2 : 4096;

		if (w->kn >= KEYS_MAX || krebuild(w, cap, 0) < 0)
			return NULL;
	}
	kput_raw(w->k, w->kcap, &n);
	w->kn++;
	return kfind(w, hi, lo, id);
}

/* Forgets traces untouched for keep, and, if the table is still over half full of its
 * bound, the older half of what remains (counted). */
static void kexpire(struct aggd_gfwd *w, uint64_t now)
{
	uint64_t before = now > w->keep ? now - w->keep : 0;
	long gone;

	if (!w->kcap)
		return;
	gone = krebuild(w, w->kcap, before ? before : 1);
	if (gone < 0)
		return;
	if (w->kn > KEYS_MAX / 2) {
		/* the table fills faster than keep empties it: halve what is remembered */
		uint64_t span = now > before ? now - before : 0;
		long more = krebuild(w, w->kcap, now - span / 2);

		if (more > 0)
			w->st.forgotten += (uint64_t)more;
	}
}

/* ---- flushing ---- */

static bool trace_due(struct aggd_gfwd *w, struct graph_id128 t)
{
	struct key *r = kfind(w, t.hi, t.lo, 0);

	return r && r->b == w->gen;
}

/*
 * One flush: the traces of every batch whose linger passed (all, when final) are due; their
 * tasks not forwarded before, from every pending batch, and the events and edges of those
 * tasks go to the collector in one graph_fwd_add(); what is left waits.
 */
static void flush(struct aggd_gfwd *w, uint64_t now, bool final)
{
	struct graph out;
	struct item **pp;
	bool any = false;

	w->gen++;
	for (struct item *it = w->phead; it; it = it->next) {
		const struct graph *g = &it->g;

		if (!final && it->arrived + w->linger > now)
			continue;
		for (size_t i = 0; i < g->ntasks + g->nevents + g->nedges; i++) {
			struct graph_id128 t = i < g->ntasks ?
						       g->tasks[i].trace :
					       i < g->ntasks + g->nevents ?
						       g->events[i - g->ntasks].trace :
						       g->edges[i - g->ntasks - g->nevents].trace;
			struct key *r = kfind(w, t.hi, t.lo, 0);

			if (!r && (r = kget(w, t.hi, t.lo, 0)))
				r->a = 0; /* forgotten while it waited: its wait is over */
			if (r) {
				r->b = w->gen;
				any = true;
			}
		}
	}
	if (!any)
		return;
	graph_init(&out);
	/* the due traces' new tasks */
	for (struct item *it = w->phead; it; it = it->next) {
		struct graph *g = &it->g;

		for (size_t i = 0; i < g->ntasks; i++) {
			struct graph_task *t = &g->tasks[i];
			struct key *e;

			if (!t->id || !trace_due(w, t->trace))
				continue;
			e = kfind(w, t->trace.hi, t->trace.lo, t->id);
			if (e) {
				w->st.repeated++;
			} else if (!(e = kget(w, t->trace.hi, t->trace.lo, t->id)) ||
				   !graph_add_task(&out, t)) {
				w->st.dropped++; /* no memory to remember it: not sent */
			} else {
				e->a = w->gen;
			}
			t->id = 0; /* done with */
			it->left--;
		}
	}
	/* their events and edges: with their task, late, or waiting for it */
	for (struct item *it = w->phead; it; it = it->next) {
		struct graph *g = &it->g;

		for (size_t i = 0; i < g->nevents + g->nedges; i++) {
			bool ev = i < g->nevents;
			struct graph_event *e = ev ? &g->events[i] : NULL;
			struct graph_edge *d = ev ? NULL : &g->edges[i - g->nevents];
			struct graph_id128 t = ev ? e->trace : d->trace;
			uint64_t task = ev ? e->task : d->to_task;
			struct key *k, *r;

			if (!task || !trace_due(w, t))
				continue;
			k = kfind(w, t.hi, t.lo, task);
			if (k && k->a == w->gen) {
				if (ev ? !graph_add_event(&out, e) : !graph_add_edge(&out, d))
					w->st.late++;
			} else if (k || final ||
				   ((r = kfind(w, t.hi, t.lo, 0)) && r->a + w->keep <= now)) {
				w->st.late++;
			} else {
				continue; /* its task may come yet */
			}
			if (ev)
				e->task = 0;
			else
				d->to_task = 0;
			it->left--;
		}
	}
	if (out.ntasks) {
		int rc = graph_fwd_add(w->f, &out);

		if (rc)
			log_err("aggregator: graph forwarding: %s", strerror(-rc));
		w->st.forwarded += out.ntasks;
		w->stored_since_aggs = true;
	}
	graph_free(&out); /* its strings are the batches' */
	for (pp = &w->phead; *pp;) {
		struct item *it = *pp;

		if (it->left) {
			w->ptail = it;
			pp = &it->next;
			continue;
		}
		*pp = it->next;
		graph_free(&it->g);
		free(it);
	}
	w->ptail = NULL;
	for (struct item *it = w->phead; it; it = it->next)
		w->ptail = it;
}

/* A batch from the queue into pending: its traces touched. */
static void take(struct aggd_gfwd *w, struct item *it, uint64_t now)
{
	const struct graph *g = &it->g;

	it->arrived = now;
	it->left = g->ntasks + g->nevents + g->nedges;
	for (size_t i = 0; i < it->left; i++) {
		struct graph_id128 t = i < g->ntasks ? g->tasks[i].trace :
				       i < g->ntasks + g->nevents ?
						       g->events[i - g->ntasks].trace :
						       g->edges[i - g->ntasks - g->nevents].trace;
		struct key *r = kget(w, t.hi, t.lo, 0);

		if (!r) {
			/* full of traces touched within keep: forget the older half now */
			kexpire(w, now);
			r = kget(w, t.hi, t.lo, 0);
		}
		if (r)
			r->a = now;
	}
	it->next = NULL;
	if (w->ptail)
		w->ptail->next = it;
	else
		w->phead = it;
	w->ptail = it;
}

static void aggregates(struct aggd_gfwd *w)
{
	struct graph_store *s;
	char why[512] = "";
	int rc;

	if (!w->gpath[0])
		return;
	s = graph_store_open(w->gpath, why, sizeof(why));
	if (!s) {
		log_err("aggregator: graph forwarding: the aggregates not sent: %s", why);
		return;
	}
	rc = graph_fwd_aggregates(w->f, s, 5000000000ULL, why, sizeof(why));
	graph_store_close(s);
	if (rc)
		log_warn("aggregator: graph forwarding: the aggregates not sent: %s",
			 why[0] ? why : strerror(-rc));
	else
		w->stored_since_aggs = false;
}

static void publish(struct aggd_gfwd *w)
{
	struct graph_fwd_stats fs;
	uint64_t pending = 0;

	graph_fwd_stats(w->f, &fs);
	for (struct item *it = w->phead; it; it = it->next)
		pending += it->left;
	pthread_mutex_lock(&w->mu);
	w->pub.forwarded = w->st.forwarded;
	w->pub.repeated = w->st.repeated;
	w->pub.late = w->st.late;
	w->pub.forgotten = w->st.forgotten;
	w->pub.pending = pending + w->qelems;
	w->pub.sent = fs.sent;
	w->pub.requests = fs.requests;
	w->pub.retried = fs.retried;
	w->pub.spooled = fs.spooled;
	w->pub.dropped = fs.dropped + w->st.dropped; /* queue_dropped added when read */
	w->pub.rejected = fs.rejected;
	w->pub.queued = fs.queued;
	w->pub.metric_points = fs.metric_points;
	snprintf(w->last_error, sizeof(w->last_error), "%s", graph_fwd_last_error(w->f));
	pthread_mutex_unlock(&w->mu);
}

static void *run(void *arg)
{
	struct aggd_gfwd *w = arg;
	uint64_t next_expire = mono() + w->keep;
	bool stop = false;

	w->next_aggs = mono() + w->aggs_every;
	while (!stop) {
		struct item *got, *it;
		uint64_t now = mono(), until = now + WAKE_MAX_NS;
		int64_t due = graph_fwd_poll(w->f);
		struct timespec ts;

		if (due >= 0 && now + (uint64_t)due < until)
			until = now + (uint64_t)due;
		if (w->phead && w->next_flush < until)
			until = w->next_flush > now ? w->next_flush : now;
		ts.tv_sec = (time_t)(until / 1000000000ULL);
		ts.tv_nsec = (long)(until % 1000000000ULL);
		pthread_mutex_lock(&w->mu);
		while (!w->qhead && !w->stop && mono() < until)
			pthread_cond_timedwait(&w->cv, &w->mu, &ts);
		got = w->qhead;
		w->qhead = w->qtail = NULL;
		w->qelems = 0;
		stop = w->stop;
		pthread_mutex_unlock(&w->mu);

		now = mono();
		for (; got; got = it) {
			it = got->next;
			take(w, got, now);
		}
		if (stop || (w->phead && now >= w->next_flush)) {
			flush(w, now, stop);
			w->next_flush = now + w->linger / 2;
		}
		if (now >= next_expire) {
			kexpire(w, now);
			next_expire = now + w->keep / 4;
		}
		if (w->aggs_every && now >= w->next_aggs) {
			if (w->stored_since_aggs)
				aggregates(w);
			w->next_aggs = now + w->aggs_every;
		}
		publish(w);
	}
	/* the end: everything was flushed above; the collector gets until `wait` */
	if (graph_fwd_drain(w->f, w->wait))
		log_warn("aggregator: graph forwarding: spans left in the spool (%s)",
			 graph_fwd_last_error(w->f));
	if (w->aggs_every && w->stored_since_aggs)
		aggregates(w);
	publish(w);
	return NULL;
}

/* ---- the loop's side ---- */

int aggd_gfwd_open(struct aggd *a, char *err, size_t errsz)
{
	const struct aggd_opts *o = &a->o;
	struct graph_fwd_opts fo = { .sz = sizeof(fo) };
	struct aggd_gfwd *w;
	char spool[4096], why[512] = "";
	const char *slash;

	if (!o->graph_forward)
		return 0;
	if (!a->gs) {
		snprintf(err, errsz, "--graph-forward needs the graph store");
		return -EINVAL;
	}
	if (o->graph_forward_spool) {
		snprintf(spool, sizeof(spool), "%s", o->graph_forward_spool);
	} else if (strcmp(a->gpath, ":memory:") == 0) {
		snprintf(err, errsz,
			 "--graph-forward with a graph store of :memory: needs "
			 "--graph-forward-spool DIR");
		return -EINVAL;
	} else {
		slash = strrchr(a->gpath, '/');
		if (!slash)
			snprintf(spool, sizeof(spool), "%s", AGGD_GFWD_SPOOL_DIR);
		else
			snprintf(spool, sizeof(spool), "%.*s/%s", (int)(slash - a->gpath), a->gpath,
				 AGGD_GFWD_SPOOL_DIR);
	}
	w = calloc(1, sizeof(*w));
	if (!w) {
		snprintf(err, errsz, "out of memory");
		return -ENOMEM;
	}
	fo.url = o->graph_forward;
	fo.spool_dir = spool;
	fo.spool_max = o->graph_forward_spool_max;
	fo.batch_spans = o->graph_forward_batch;
	w->f = graph_fwd_open(&fo, why, sizeof(why));
	if (!w->f) {
		snprintf(err, errsz, "--graph-forward %s: %s", o->graph_forward, why);
		free(w);
		return -EINVAL;
	}
	snprintf(w->url, sizeof(w->url), "%s", graph_fwd_url(w->f));
	if (strcmp(a->gpath, ":memory:") != 0)
		snprintf(w->gpath, sizeof(w->gpath), "%s", a->gpath);
	w->linger = o->graph_forward_linger_ns ? o->graph_forward_linger_ns : AGGD_GFWD_LINGER_NS;
	w->keep = AGGD_GFWD_KEEP_NS > w->linger * 4 ? AGGD_GFWD_KEEP_NS : w->linger * 4;
	w->aggs_every = o->graph_forward_aggs_ns == UINT64_MAX ? 0 :
			o->graph_forward_aggs_ns	       ? o->graph_forward_aggs_ns :
								 AGGD_GFWD_AGGS_NS;
	w->wait = o->graph_forward_wait_ns == UINT64_MAX ? 0 :
		  o->graph_forward_wait_ns		 ? o->graph_forward_wait_ns :
							   AGGD_GFWD_WAIT_NS;
	w->queue_max = o->graph_forward_queue ? o->graph_forward_queue : AGGD_GFWD_QUEUE_DEFAULT;
	pthread_mutex_init(&w->mu, NULL);
	{
		pthread_condattr_t ca; /* the thread's deadlines are CLOCK_MONOTONIC */

		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&w->cv, &ca);
		pthread_condattr_destroy(&ca);
	}
	if (pthread_create(&w->th, NULL, run, w) != 0) {
		snprintf(err, errsz, "cannot start the graph forwarding thread");
		graph_fwd_close(w->f);
		pthread_mutex_destroy(&w->mu);
		pthread_cond_destroy(&w->cv);
		free(w);
		return -EAGAIN;
	}
	w->started = true;
	a->gfwd = w;
	log_info("aggregator: forwarding graphs to %s (spool %s, linger %" PRIu64 " ms)", w->url,
		 spool, (uint64_t)(w->linger / 1000000ULL));
	return 0;
}

void aggd_gfwd_close(struct aggd *a)
{
	struct aggd_gfwd *w = a->gfwd;

	if (!w)
		return;
	pthread_mutex_lock(&w->mu);
	w->stop = true;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->mu);
	if (w->started)
		pthread_join(w->th, NULL);
	log_info("aggregator: graph forwarding to %s: %" PRIu64 " spans sent, %" PRIu64
		 " in the spool, %" PRIu64 " dropped",
		 w->url, w->pub.sent, w->pub.queued, w->pub.dropped + w->pub.queue_dropped);
	graph_fwd_close(w->f); /* what was not answered stays in the spool */
	while (w->phead) {
		struct item *it = w->phead;

		w->phead = it->next;
		graph_free(&it->g);
		free(it);
	}
	free(w->k);
	pthread_mutex_destroy(&w->mu);
	pthread_cond_destroy(&w->cv);
	free(w);
	a->gfwd = NULL;
}

void aggd_gfwd_put(struct aggd *a, struct graph *g)
{
	struct aggd_gfwd *w = a->gfwd;
	size_t n = g->ntasks + g->nevents + g->nedges;
	struct item *it;

	if (!w || !n)
		return;
	it = malloc(sizeof(*it));
	pthread_mutex_lock(&w->mu);
	if (!it || w->qelems + n > w->queue_max) {
		w->pub.queue_dropped += g->ntasks;
		pthread_mutex_unlock(&w->mu);
		free(it);
		log_warn("aggregator: graph forwarding: %zu tasks not forwarded: %s", g->ntasks,
			 it ? "the queue is full (--graph-forward-queue)" : "out of memory");
		return;
	}
	it->g = *g; /* moved: the batch's arena is the item's now */
	it->next = NULL;
	graph_init(g);
	if (w->qtail)
		w->qtail->next = it;
	else
		w->qhead = it;
	w->qtail = it;
	w->qelems += n;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->mu);
}

bool aggd_gfwd_stats(struct aggd *a, struct aggd_gfwd_stats *st, char *url, size_t urlsz, char *err,
		     size_t errsz)
{
	struct aggd_gfwd *w = a->gfwd;

	if (!w)
		return false;
	pthread_mutex_lock(&w->mu);
	*st = w->pub;
	st->dropped += st->queue_dropped;
	snprintf(err, errsz, "%s", w->last_error);
	pthread_mutex_unlock(&w->mu);
	snprintf(url, urlsz, "%s", w->url);
	return true;
}
