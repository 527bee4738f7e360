// SPDX-License-Identifier: Apache-2.0
/*
 * The cluster aggregator daemon (`weft aggregator`).
 *
 * One ROUTER socket serves agents, clients and child aggregators; the ZAP handler (zap.c)
 * lets in only allow-listed keys and names each peer's role.  The main loop:
 *
 *   receive   a batch of messages (at most BATCH_MAX), each one decoded and checked — body
 *             allowed for the role, Hello first on every connection, sequence numbers
 *             strictly increasing per sender instance — or counted as rejected; the writes
 *             of the batch (merged partials, each sender's merged sequence number) go into
 *             one store transaction
 *   commit    then, and only then, Ack{upto} to every sender whose partials were merged
 *   tick      expire silent peers (3 heartbeat intervals), start queries on agents that lack
 *             them, close the windows that are due and emit their results to subscribers
 *             (and, in a tree, spool them as partials towards the parent), forget what
 *             retention no longer covers
 *
 * Per query, aggd_window.c decides when a window closes; this file decides who is expected:
 * every agent that was sent the query (or says it runs it) is a member, alive while its
 * peer is.  Agents are keyed by their host name: a reconnecting agent (new connection, same
 * or new instance) replaces its old connection.
 *
 * Must never: block on a peer (every send is non-blocking; a client too slow to take its
 * results loses them, counted), crash or act on a message that failed a check, merge a
 * partial twice (its sender instance's merged sequence number is persisted with the merge),
 * acknowledge a partial before it is persisted.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>
#include "aggregator/aggd.h"
#include "agent/agent.h"
#include "agent/result.h"
#include "base/file.h"
#include "base/log.h"
#include "aggregator/aggd_int.h"
/* ---- time ---- */

static uint64_t clock_ns(clockid_t c)
{
	struct timespec ts;

	clock_gettime(c, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

uint64_t aggd_mono_ns(void)
{
	return clock_ns(CLOCK_MONOTONIC);
}

uint64_t aggd_real_ns(void)
{
	return clock_ns(CLOCK_REALTIME);
}

int aggd_duration_parse(const char *s, uint64_t *ns)
{
	static const struct {
		const char *suffix;
		uint64_t mult;
	} units[] = {
		{ "ns", 1ULL },		{ "us", 1000ULL },	 { "ms", 1000000ULL },
		{ "s", 1000000000ULL }, { "m", 60000000000ULL }, { "h", 3600000000000ULL },
		{ "", 1000000000ULL },
	};
	char *end;
	unsigned long long v;

	if (!s || !ns || *s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno)
		return -EINVAL;
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
		if (strcmp(end, units[i].suffix) == 0) {
			if (v > UINT64_MAX / units[i].mult)
				return -EINVAL;
			*ns = v * units[i].mult;
			return 0;
		}
	return -EINVAL;
}

/* ---- envelopes ---- */

static void env_init(struct aggd *a, Weft__Envelope *e)
{
	weft__envelope__init(e);
	e->version = WIRE_VERSION;
	e->seq = ++a->seq;
}

/* ---- peers ---- */

static size_t rid_hash(const uint8_t *rid, size_t len)
{
	uint64_t h = 1469598103934665603ULL;

	for (size_t i = 0; i < len; i++)
		h = (h ^ rid[i]) * 1099511628211ULL;
	return (size_t)(h % PEER_BUCKETS);
}

static struct peer *peer_find(struct aggd *a, const uint8_t *rid, size_t len)
{
	for (struct peer *p = a->buckets[rid_hash(rid, len)]; p; p = p->hnext)
		if (p->ridlen == len && memcmp(p->rid, rid, len) == 0)
			return p;
	return NULL;
}

static struct peer *peer_new(struct aggd *a, const uint8_t *rid, size_t len)
{
	struct peer *p;
	size_t b;

	if (len == 0 || len > sizeof(p->rid))
		return NULL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	memcpy(p->rid, rid, len);
	p->ridlen = len;
	b = rid_hash(rid, len);
	p->hnext = a->buckets[b];
	a->buckets[b] = p;
	p->next = a->peers;
	if (a->peers)
		a->peers->prev = p;
	a->peers = p;
	a->npeers++;
	return p;
}

static void peer_free(struct aggd *a, struct peer *p)
{
	struct peer **pp = &a->buckets[rid_hash(p->rid, p->ridlen)];

	if (p->ack_due) {
		/* merged, not acknowledged yet: the next checkpoint commits how far */
		aggd_txn_begin(a);
		aggd_store_sender_set(a->store, p->host, p->instance, p->upto);
		a->seq_unsaved = true;
	}
	while (*pp && *pp != p)
		pp = &(*pp)->hnext;
	if (*pp)
		*pp = p->hnext;
	if (p->prev)
		p->prev->next = p->next;
	else
		a->peers = p->next;
	if (p->next)
		p->next->prev = p->prev;
	a->npeers--;
	for (size_t i = 0; i < p->nfeatures; i++)
		free(p->features[i]);
	free(p->features);
	free(p->pq);
	free(p->subs);
	free(p);
}

bool aggd_peer_is_sender(const struct peer *p)
{
	return p->role == WIRE_ROLE_AGENT || p->role == WIRE_ROLE_AGGREGATOR;
}

static struct pq *peer_pq(struct peer *p, uint64_t id)
{
	for (size_t i = 0; i < p->npq; i++)
		if (p->pq[i].id == id)
			return &p->pq[i];
	return NULL;
}

static struct pq *peer_pq_add(struct peer *p, uint64_t id, enum pq_state st)
{
	struct pq *e = peer_pq(p, id);

	if (e) {
		e->state = st;
		return e;
	}
	if (p->npq == p->pqcap) {
		size_t cap = p->pqcap ? p->pqcap * 2 : 4;
		struct pq *nv = realloc(p->pq, cap * sizeof(*nv));

		if (!nv)
			return NULL;
		p->pq = nv;
		p->pqcap = cap;
	}
	e = &p->pq[p->npq++];
	e->id = id;
	e->state = st;
	return e;
}

static void peer_pq_del(struct peer *p, uint64_t id)
{
	struct pq *e = peer_pq(p, id);

	if (e)
		*e = p->pq[--p->npq];
}

static struct sub *peer_sub(struct peer *p, uint64_t id)
{
	for (size_t i = 0; i < p->nsubs; i++)
		if (p->subs[i].id == id)
			return &p->subs[i];
	return NULL;
}

static int peer_sub_add(struct peer *p, uint64_t id)
{
	struct sub *nv;

	if (peer_sub(p, id))
		return 0;
	if (p->nsubs >= AGGD_MAX_QUERIES)
		return -ENOSPC;
	nv = realloc(p->subs, (p->nsubs + 1) * sizeof(*nv));
	if (!nv)
		return -ENOMEM;
	p->subs = nv;
	p->subs[p->nsubs].id = id;
	p->subs[p->nsubs].manifest_sent = false;
	p->nsubs++;
	return 0;
}

static void peer_sub_del(struct peer *p, uint64_t id)
{
	struct sub *s = peer_sub(p, id);

	if (s)
		*s = p->subs[--p->nsubs];
}

static const char *peer_label(const struct peer *p)
{
	static __thread char buf[AGGD_MAX_HOST + 96];

	if (p->hello && p->host[0])
		snprintf(buf, sizeof(buf), "%s %s (key %s)", wire_role_name(p->role), p->host,
			 p->name);
	else
		snprintf(buf, sizeof(buf), "%s %s", wire_role_name(p->role), p->name);
	return buf;
}

/* Sends to a peer without ever waiting.  -EAGAIN: its queue is full; -EHOSTUNREACH: it is
 * gone (its connection closed). */
static int peer_send(struct aggd *a, struct peer *p, const Weft__Envelope *e)
{
	int rc = wire_send(a->sock, p->rid, p->ridlen, e, true);

	if (rc && rc != -EAGAIN)
		log_debug("aggregator: send %s to %s: %s", wire_body_name(e->body_case),
			  peer_label(p), strerror(-rc));
	return rc;
}

static void send_error(struct aggd *a, struct peer *p, uint64_t in_reply_to, uint64_t query_id,
		       const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static void send_error(struct aggd *a, struct peer *p, uint64_t in_reply_to, uint64_t query_id,
		       const char *fmt, ...)
{
	Weft__Envelope e;
	Weft__Error err;
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	weft__error__init(&err);
	err.message = msg;
	if (in_reply_to) {
		err.has_in_reply_to = true;
		err.in_reply_to = in_reply_to;
	}
	if (query_id) {
		err.has_query_id = true;
		err.query_id = query_id;
	}
	env_init(a, &e);
	e.body_case = WEFT__ENVELOPE__BODY_ERROR;
	e.error = &err;
	peer_send(a, p, &e);
}

/* ---- queries ---- */

static struct query *query_find(struct aggd *a, uint64_t id)
{
	for (size_t i = 0; i < a->nq; i++)
		if (a->q[i]->id == id)
			return a->q[i];
	return NULL;
}

struct query *aggd_query_find_parent(struct aggd *a, uint64_t parent_id)
{
	for (size_t i = 0; i < a->nq; i++)
		if (a->q[i]->parent_id == parent_id)
			return a->q[i];
	return NULL;
}

bool aggd_query_active(const struct query *q)
{
	return !q->stopping && !q->ended;
}

size_t aggd_queries_active(const struct aggd *a)
{
	size_t n = 0;

	for (size_t i = 0; i < a->nq; i++)
		n += aggd_query_active(a->q[i]);
	return n;
}

void aggd_query_free(struct query *q)
{
	if (!q)
		return;
	aggd_qwin_free(q->qw);
	plan_free(q->plan);
	free(q->text);
	free(q->manifest);
	free(q->object);
	for (size_t i = 0; i < q->nerrors; i++)
		free(q->errors[i]);
	free(q->errors);
	free(q);
}

void *aggd_memdup(const void *p, size_t n)
{
	void *d = malloc(n ? n : 1);

	if (d && n)
		memcpy(d, p, n);
	return d;
}

/* A query in memory, from a submit or the store.  NULL with a reason in why. */
struct query *aggd_query_make(struct aggd *a, const struct aggd_stored_query *sq, char *why,
			      size_t whysz)
{
	struct aggd_qwin_opts wo = { .sz = sizeof(wo) };
	struct query *q = calloc(1, sizeof(*q));
	char err[256] = "";

	if (!q) {
		snprintf(why, whysz, "out of memory");
		return NULL;
	}
	q->id = sq->id;
	q->parent_id = sq->parent_id;
	q->epoch_ns = sq->epoch_ns;
	q->end_ns = sq->end_ns;
	q->text = strdup(sq->query);
	q->manifest = aggd_memdup(sq->manifest, sq->manifest_len);
	q->manifest_len = sq->manifest_len;
	q->object = aggd_memdup(sq->object, sq->object_len);
	q->object_len = sq->object_len;
	if (!q->text || !q->manifest || !q->object) {
		snprintf(why, whysz, "out of memory");
		goto out_free;
	}
	q->plan = manifest_read(q->manifest, q->manifest_len, err, sizeof(err));
	if (!q->plan) {
		snprintf(why, whysz, "the manifest does not read: %s", err[0] ? err : "malformed");
		goto out_free;
	}
	if (!q->plan->aggregating) {
		snprintf(
			why, whysz,
			"a select without aggregates is a stream of rows, which the cluster does not "
			"merge: run it on one host with `weft run`");
		goto out_free;
	}
	wo.epoch_ns = q->epoch_ns;
	wo.every_ns = q->plan->every_ns;
	wo.end_ns = q->end_ns;
	wo.lateness_ns = a->o.lateness_ns;
	wo.keep_windows = a->o.keep_windows;
	q->qw = aggd_qwin_new(q->plan, &wo);
	if (!q->qw) {
		snprintf(why, whysz, "cannot set up its windows: %s", strerror(errno));
		goto out_free;
	}
	return q;

out_free:
	aggd_query_free(q);
	return NULL;
}

int aggd_query_insert(struct aggd *a, struct query *q)
{
	if (a->nq == a->qcap) {
		size_t cap = a->qcap ? a->qcap * 2 : 16;
		struct query **nv = realloc(a->q, cap * sizeof(*nv));

		if (!nv)
			return -ENOMEM;
		a->q = nv;
		a->qcap = cap;
	}
	a->q[a->nq++] = q;
	return 0;
}

static void query_add_error(struct query *q, const char *host, const char *msg)
{
	char **nv;
	char *s;

	if (q->nerrors >= 64)
		return;
	if (asprintf(&s, "%s: %s", host, msg) < 0)
		return;
	nv = realloc(q->errors, (q->nerrors + 1) * sizeof(*nv));
	if (!nv) {
		free(s);
		return;
	}
	q->errors = nv;
	q->errors[q->nerrors++] = s;
}

/* ---- the store's transaction around a batch ---- */

void aggd_txn_begin(struct aggd *a)
{
	if (a->txn)
		return;
	if (aggd_store_begin(a->store) == 0)
		a->txn = true;
}

static int query_checkpoint(struct aggd *a, struct query *q);

/*
 * A checkpoint: writes, into the open transaction, the seq merged up to of every sender with
 * partials to acknowledge and the windows and members changed since the last checkpoint;
 * commits; then acknowledges.  Every commit is a checkpoint, so a committed seq never runs
 * ahead of the windows holding its partials: after a crash, what was acknowledged is in the
 * store and what was not is resent by its agent and merged once.  The daemon checkpoints at
 * most every AGGD_CHECKPOINT_NS under load, so the store's writes follow the number of
 * windows changed, not the number of partials merged.
 */
void aggd_txn_commit(struct aggd *a)
{
	int rc = 0;

	a->next_ckpt = aggd_mono_ns() + AGGD_CHECKPOINT_NS;
	a->ckpt_windows = a->ckpt_members = 0;
	for (struct peer *p = a->peers; p && !rc; p = p->next)
		if (p->ack_due) {
			aggd_txn_begin(a);
			rc = aggd_store_sender_set(a->store, p->host, p->instance, p->upto);
		}
	for (size_t i = 0; i < a->nq && !rc; i++)
		rc = query_checkpoint(a, a->q[i]);
	if (!a->txn)
		return;
	a->txn = false;
	if (rc)
		aggd_store_rollback(a->store);
	else
		rc = aggd_store_commit(a->store);
	if (rc) {
		/* nothing is acknowledged: the senders keep their partials, which are merged
		 * here; the next checkpoint writes everything again */
		log_err("aggregator: the store did not commit (%s): partials stay "
			"unacknowledged until the next checkpoint",
			strerror(-rc));
		for (size_t i = 0; i < a->nq; i++)
			aggd_qwin_changed_all(a->q[i]->qw);
		return;
	}
	a->seq_unsaved = false;
	if (a->ckpt_windows || a->ckpt_members)
		log_debug("aggregator: checkpoint: %zu windows, %zu members written",
			  a->ckpt_windows, a->ckpt_members);
	if (!a->acks_due)
		return;
	a->acks_due = false;
	for (struct peer *p = a->peers; p; p = p->next) {
		Weft__Envelope e;
		Weft__Ack ack;

		if (!p->ack_due)
			continue;
		p->ack_due = false;
		weft__ack__init(&ack);
		ack.upto = p->upto;
		env_init(a, &e);
		e.body_case = WEFT__ENVELOPE__BODY_ACK;
		e.ack = &ack;
		if (peer_send(a, p, &e) == 0)
			p->acked = p->upto;
	}
}

/* ---- queries on agents ---- */

/* Sends QueryStart to one agent (or child aggregator) and makes it a member. */
int aggd_query_start_on(struct aggd *a, struct query *q, struct peer *p)
{
	Weft__Envelope e;
	Weft__QueryStart qs;
	uint64_t now = aggd_real_ns();
	int rc;

	if (!aggd_query_active(q) || (q->end_ns && now >= q->end_ns))
		return 0;
	weft__query_start__init(&qs);
	qs.query_id = q->id;
	qs.query = q->text;
	qs.manifest.data = q->manifest;
	qs.manifest.len = q->manifest_len;
	qs.object.data = q->object;
	qs.object.len = q->object_len;
	qs.epoch_realtime_ns = q->epoch_ns;
	if (q->end_ns) {
		qs.has_end_realtime_ns = true;
		qs.end_realtime_ns = q->end_ns;
	}
	env_init(a, &e);
	e.body_case = WEFT__ENVELOPE__BODY_QUERY_START;
	e.query_start = &qs;
	rc = peer_send(a, p, &e);
	if (rc)
		return rc; /* -EAGAIN: tried again at the next tick */
	if (!peer_pq_add(p, q->id, PQ_SENT))
		return -ENOMEM;
	aggd_qwin_member(q->qw, p->host, aggd_qwin_window_of(q->qw, now), p->alive);
	log_info("aggregator: query %" PRIu64 " sent to %s", q->id, p->host);
	return 0;
}

static void send_stop(struct aggd *a, struct peer *p, uint64_t id)
{
	Weft__Envelope e;
	Weft__QueryStop st;

	weft__query_stop__init(&st);
	st.query_id = id;
	env_init(a, &e);
	e.body_case = WEFT__ENVELOPE__BODY_QUERY_STOP;
	e.query_stop = &st;
	peer_send(a, p, &e);
}

/* Starts on p every active query it lacks. */
void aggd_reconcile(struct aggd *a, struct peer *p)
{
	if (!p->hello || !aggd_peer_is_sender(p) || !p->alive)
		return;
	for (size_t i = 0; i < a->nq; i++) {
		struct query *q = a->q[i];

		if (aggd_query_active(q) && !peer_pq(p, q->id) &&
		    aggd_query_start_on(a, q, p) == -EAGAIN)
			break;
	}
}

/* What a sender says it runs (Hello, Heartbeat): queries we do not run any more are stopped
 * there; the others are confirmed. */
static void peer_running(struct aggd *a, struct peer *p, const uint64_t *ids, size_t n)
{
	uint64_t now = aggd_real_ns();

	for (size_t i = 0; i < n; i++) {
		struct query *q = query_find(a, ids[i]);
		struct pq *e;

		if (!q || q->ended) {
			log_info("aggregator: %s runs query %" PRIu64 ", which is not running "
				 "here: stopping it there",
				 p->host, ids[i]);
			send_stop(a, p, ids[i]);
			continue;
		}
		if (q->stopping) {
			e = peer_pq(p, q->id);
			if (!e || e->state != PQ_STOPPED) {
				send_stop(a, p, q->id);
				peer_pq_add(p, q->id, PQ_STOPPED);
			}
			continue;
		}
		e = peer_pq(p, q->id);
		if (!e || e->state == PQ_SENT) {
			peer_pq_add(p, q->id, PQ_RUNNING);
			aggd_qwin_member(q->qw, p->host, aggd_qwin_window_of(q->qw, now), true);
		}
	}
}

static void peer_set_alive(struct aggd *a, struct peer *p, bool alive)
{
	if (p->alive == alive)
		return;
	p->alive = alive;
	if (!alive)
		p->dead_since = aggd_mono_ns();
	if (!aggd_peer_is_sender(p) || !p->hello)
		return;
	for (size_t i = 0; i < p->npq; i++) {
		struct query *q = query_find(a, p->pq[i].id);

		if (q && aggd_qwin_has_member(q->qw, p->host))
			aggd_qwin_member(q->qw, p->host, 0, alive);
	}
	if (alive)
		log_info("aggregator: %s is back", peer_label(p));
	else
		log_info("aggregator: %s expired (silent for %d heartbeats)", peer_label(p),
			 AGGD_EXPIRE_BEATS);
}

/* ---- results ---- */

struct emit_ctx {
	struct aggd *a;
	struct query *q;
	struct peer *only; /* a replay to one subscriber */
};

/* The Result of a window to every subscriber of the query (or to `only`), never waiting:
 * a client too slow to take it loses it, counted and reported in its next result. */
static void result_send(struct aggd *a, struct query *q, const struct aggd_window_view *v,
			Weft__Group **groups, size_t ngroups, struct peer *only)
{
	struct aggd_qwin_stats st;
	Weft__Result r;
	int rc;

	aggd_qwin_stats(q->qw, &st);
	weft__result__init(&r);
	r.query_id = q->id;
	r.window = v->index;
	r.n_groups = ngroups;
	r.groups = groups;
	r.n_drops = WEFT_DROP_NR;
	r.drops = (uint64_t *)v->drops;
	r.has_misses = true;
	r.misses = v->misses;
	r.has_overflow = true;
	r.overflow = v->overflow;
	r.n_hosts = v->nhosts;
	r.hosts = (char **)v->hosts;
	r.n_missing = v->nmissing;
	r.missing = (char **)v->missing;
	r.has_revision = true;
	r.revision = v->revision;
	r.has_last = true;
	r.last = v->last;
	r.has_start_realtime_ns = true;
	r.start_realtime_ns = v->start_ns;
	r.has_end_realtime_ns = true;
	r.end_realtime_ns = v->end_ns;
	r.has_late_dropped = true;
	r.late_dropped = st.late_dropped;
	r.has_results_dropped = true;

	for (struct peer *p = only ? only : a->peers; p; p = only ? NULL : p->next) {
		struct sub *s;
		Weft__Envelope e;

		if (p->role != WIRE_ROLE_CLIENT || !(s = peer_sub(p, q->id)))
			continue;
		r.has_manifest = !s->manifest_sent;
		r.manifest.data = q->manifest;
		r.manifest.len = r.has_manifest ? q->manifest_len : 0;
		r.results_dropped = p->results_dropped;
		env_init(a, &e);
		e.body_case = WEFT__ENVELOPE__BODY_RESULT;
		e.result = &r;
		rc = peer_send(a, p, &e);
		if (rc == -EAGAIN) {
			/* a slow client loses this result, never stalls the merge */
			p->results_dropped++;
			log_info("aggregator: %s is too slow: dropped window %" PRIu64
				 " of query %" PRIu64 " for it (%" PRIu64 " so far)",
				 peer_label(p), v->index, q->id, p->results_dropped);
		} else if (rc == 0) {
			s->manifest_sent = true;
		}
	}
}

/* A window as one Partial: what the store keeps of it, and what goes to the parent. */
static void window_partial(struct aggd *a, struct query *q, const struct aggd_window_view *v,
			   Weft__Group **groups, size_t ngroups, Weft__Partial *pt)
{
	weft__partial__init(pt);
	pt->query_id = q->parent_id ? q->parent_id : q->id;
	pt->window = v->index;
	pt->host = a->name;
	pt->n_groups = ngroups;
	pt->groups = groups;
	pt->n_drops = WEFT_DROP_NR;
	pt->drops = (uint64_t *)v->drops;
	pt->has_misses = true;
	pt->misses = v->misses;
	pt->has_overflow = true;
	pt->overflow = v->overflow;
	pt->n_hosts = v->nhosts;
	pt->hosts = (char **)v->hosts;
	pt->n_missing = v->nmissing;
	pt->missing = (char **)v->missing;
	pt->has_last = true;
	pt->last = v->last;
}

struct ckpt_ctx {
	struct aggd *a;
	struct query *q;
};

static int ckpt_window(void *ctx, const struct aggd_window_view *v)
{
	struct ckpt_ctx *c = ctx;
	Weft__Group **groups = NULL;
	size_t ngroups = 0, len;
	Weft__Partial pt;
	void *body;
	int rc;

	rc = agent_table_to_groups(v->table, &groups, &ngroups);
	if (rc)
		return rc;
	window_partial(c->a, c->q, v, groups, ngroups, &pt);
	len = weft__partial__get_packed_size(&pt);
	body = malloc(len ? len : 1);
	if (body) {
		weft__partial__pack(&pt, body);
		aggd_txn_begin(c->a);
		rc = aggd_store_snapshot_set(c->a->store, c->q->id, v->index, body, len);
		free(body);
		c->a->ckpt_windows++;
	} else {
		rc = -ENOMEM;
	}
	agent_groups_free(groups, ngroups);
	return rc;
}

static int ckpt_member(void *ctx, const struct aggd_member_view *m)
{
	struct ckpt_ctx *c = ctx;
	struct aggd_stored_member sm = {
		.host = m->host, .from = m->from, .last = m->last, .hi = m->hi, .failed = m->failed
	};

	aggd_txn_begin(c->a);
	c->a->ckpt_members++;
	if (m->gone)
		return aggd_store_member_del(c->a->store, c->q->id, m->host);
	return aggd_store_member_set(c->a->store, c->q->id, &sm);
}

static int query_checkpoint(struct aggd *a, struct query *q)
{
	struct ckpt_ctx c = { a, q };

	return aggd_qwin_checkpoint(q->qw, ckpt_window, ckpt_member, &c);
}

static int emit_window(void *ctx, const struct aggd_window_view *v)
{
	struct emit_ctx *c = ctx;
	struct aggd *a = c->a;
	struct query *q = c->q;
	Weft__Group **groups = NULL;
	size_t ngroups = 0;
	int rc;

	rc = agent_table_to_groups(v->table, &groups, &ngroups);
	if (rc) {
		log_err("aggregator: query %" PRIu64 " window %" PRIu64 ": %s", q->id, v->index,
			strerror(-rc));
		return rc;
	}
	if (weft_log_get_level() >= WEFT_LOG_INFO) {
		char missing[512] = "";
		size_t n = 0;

		for (size_t i = 0; i < v->nmissing && n < sizeof(missing) - 1; i++)
			n += (size_t)snprintf(missing + n, sizeof(missing) - n, "%s%s",
					      i ? ", " : " (", v->missing[i]);
		if (v->nmissing && n < sizeof(missing) - 1)
			snprintf(missing + n, sizeof(missing) - n, ")");
		log_info("aggregator: query %" PRIu64 " window %" PRIu64 " %s%s: %zu group%s, "
			 "%zu host%s, %zu missing%s",
			 q->id, v->index, v->revision ? "revised" : "closed",
			 v->last ? " (last)" : "", ngroups, ngroups == 1 ? "" : "s", v->nhosts,
			 v->nhosts == 1 ? "" : "s", v->nmissing, missing);
	}

	result_send(a, q, v, groups, ngroups, NULL);

	{
		/* the window as merged so far, once: it replaces its snapshot in the store
		 * and, the first time, goes to the parent as this subtree's partial */
		Weft__Partial pt;
		void *body;
		size_t len;

		window_partial(a, q, v, groups, ngroups, &pt);
		len = weft__partial__get_packed_size(&pt);
		body = malloc(len ? len : 1);
		aggd_txn_begin(a);
		if (body) {
			weft__partial__pack(&pt, body);
			aggd_store_window_emitted(a->store, q->id, v->index, v->revision,
						  aggd_real_ns(), body, len);
			free(body);
		}
		if (q->parent_id && v->revision == 0) {
			/* later revisions go up as the late partials themselves
			 * (partial_forward()): the parent sums what it gets */
			rc = aggd_parent_spool(a, &pt);
			if (rc)
				log_err("aggregator: spooling window %" PRIu64
					" for the parent: %s",
					v->index, strerror(-rc));
		}
	}
	agent_groups_free(groups, ngroups);
	return 0;
}

/* A retained window again, for one client that (re)subscribed. */
static int replay_window(void *ctx, const struct aggd_window_view *v)
{
	struct emit_ctx *c = ctx;
	Weft__Group **groups = NULL;
	size_t ngroups = 0;
	int rc = agent_table_to_groups(v->table, &groups, &ngroups);

	if (rc)
		return rc;
	result_send(c->a, c->q, v, groups, ngroups, c->only);
	agent_groups_free(groups, ngroups);
	return 0;
}

/* A late partial merged into a closed window of a query from the parent: the parent gets
 * it as it is (its windows are sums: the revised total would count the rest twice). */
static void partial_forward(struct aggd *a, struct query *q, const Weft__Partial *in)
{
	Weft__Partial pt = *in;
	char *one[1] = { in->host };

	pt.query_id = q->parent_id;
	pt.host = a->name;
	if (!in->n_hosts) {
		pt.n_hosts = 1;
		pt.hosts = one;
	}
	pt.has_last = false;
	pt.last = false;
	if (aggd_parent_spool(a, &pt) == 0)
		log_info("aggregator: late partial of %s for window %" PRIu64 " forwarded to the "
			 "parent",
			 in->host, in->window);
}

static void query_end(struct aggd *a, struct query *q)
{
	if (q->ended)
		return;
	q->ended = true;
	q->ended_mono = aggd_mono_ns();
	aggd_txn_begin(a);
	aggd_store_query_end(a->store, q->id);
	for (struct peer *p = a->peers; p; p = p->next) {
		peer_sub_del(p, q->id);
		if (aggd_peer_is_sender(p)) {
			struct pq *e = peer_pq(p, q->id);

			if (e && e->state != PQ_STOPPED && e->state != PQ_FAILED) {
				/* it ended by its `for`: agents stop by themselves; a straggler is
				 * told (idempotent) */
				send_stop(a, p, q->id);
			}
			peer_pq_del(p, q->id);
		}
	}
	log_info("aggregator: query %" PRIu64 " ended", q->id);
}

void aggd_query_stop(struct aggd *a, struct query *q, const char *why)
{
	if (!aggd_query_active(q))
		return;
	q->stopping = true;
	aggd_qwin_stop(q->qw, aggd_real_ns());
	for (struct peer *p = a->peers; p; p = p->next) {
		struct pq *e;

		if (!aggd_peer_is_sender(p) || !(e = peer_pq(p, q->id)))
			continue;
		send_stop(a, p, q->id);
		e->state = PQ_STOPPED;
	}
	log_info("aggregator: query %" PRIu64 " %s", q->id, why);
}

/* ---- messages ---- */

static void on_hello(struct aggd *a, struct peer *p, const Weft__Envelope *env, enum wire_role role)
{
	const Weft__Hello *h = env->hello;
	Weft__Envelope e;
	Weft__Welcome w;
	uint64_t upto = 0;

	if (wire_role_parse(h->role) != role) {
		a->rejected++;
		send_error(a, p, env->seq, 0,
			   "Hello.role %s, but this key is allow-listed as %s \"%s\": use a key "
			   "allow-listed as %s (weft keygen --role %s prints its line)",
			   h->role, wire_role_name(role), p->name, h->role, h->role);
		return;
	}
	if (aggd_peer_is_sender(p) || role == WIRE_ROLE_AGENT || role == WIRE_ROLE_AGGREGATOR) {
		/* one connection per host name: a new one replaces the old (reconnect, restart) */
		for (struct peer *o = a->peers, *next; o; o = next) {
			next = o->next;
			if (o == p || !o->hello || !aggd_peer_is_sender(o) ||
			    strcmp(o->host, h->host))
				continue;
			if (o->instance == h->instance && o->upto > upto)
				upto = o->upto;
			if (o->alive && o->instance != h->instance)
				log_warn("aggregator: host %s: a new connection (instance %" PRIx64
					 ") replaces a live one (instance %" PRIx64
					 "); give every agent its own --host",
					 h->host, h->instance, o->instance);
			peer_free(a, o);
		}
	}
	snprintf(p->host, sizeof(p->host), "%s", h->host ? h->host : "");
	snprintf(p->version, sizeof(p->version), "%s", h->version);
	snprintf(p->kernel, sizeof(p->kernel), "%s", h->kernel ? h->kernel : "");
	for (size_t i = 0; i < p->nfeatures; i++)
		free(p->features[i]);
	free(p->features);
	p->features = NULL;
	p->nfeatures = 0;
	if (h->n_features && (p->features = calloc(h->n_features, sizeof(char *)))) {
		for (size_t i = 0; i < h->n_features; i++)
			if ((p->features[p->nfeatures] = strdup(h->features[i])))
				p->nfeatures++;
	}
	p->instance = h->instance;
	p->ctl.instance = h->instance;
	p->ctl.last = env->seq;
	p->hello = true;
	p->alive = true;
	if (aggd_peer_is_sender(p)) {
		uint64_t stored = 0;

		/* Welcome.last_seq lets the sender drop its spool up to it: it must be committed,
		 * with the windows holding those partials, not just merged (the store's reads
		 * see the open transaction) */
		if (a->seq_unsaved)
			aggd_txn_commit(a);
		aggd_store_sender_get(a->store, p->host, p->instance, &stored);
		p->upto = stored > upto ? stored : upto;
		p->acked = p->upto;
	}
	weft__welcome__init(&w);
	w.aggregator = a->name;
	w.instance = a->instance;
	w.heartbeat_ms = a->o.heartbeat_ms;
	if (aggd_peer_is_sender(p)) {
		w.has_last_seq = true;
		w.last_seq = p->upto;
	}
	env_init(a, &e);
	e.body_case = WEFT__ENVELOPE__BODY_WELCOME;
	e.welcome = &w;
	peer_send(a, p, &e);
	if (aggd_peer_is_sender(p))
		log_info("aggregator: %s joined (version %s, instance %" PRIx64 ", merged up to "
			 "seq %" PRIu64 ")",
			 peer_label(p), p->version, p->instance, p->upto);
	else
		log_info("aggregator: %s joined", peer_label(p));
	if (aggd_peer_is_sender(p)) {
		peer_running(a, p, h->running, h->n_running);
		aggd_reconcile(a, p);
	}
}

static void on_partial(struct aggd *a, struct peer *p, const Weft__Envelope *env)
{
	const Weft__Partial *pt = env->partial;
	struct query *q;
	int rc;

	if (env->seq <= p->upto) {
		/* merged already (a repeat): acknowledged again */
		p->ack_due = a->acks_due = true;
		return;
	}
	q = query_find(a, pt->query_id);
	if (strcmp(pt->host, p->host) != 0) {
		a->rejected++;
		log_warn("aggregator: %s sent a partial for host %s: refused", peer_label(p),
			 pt->host);
	} else if (!q) {
		log_info("aggregator: %s sent a partial of query %" PRIu64 ", which is not running "
			 "here: stopping it there",
			 p->host, pt->query_id);
		send_stop(a, p, pt->query_id);
	} else {
		if (!peer_pq(p, q->id))
			peer_pq_add(p, q->id, aggd_query_active(q) ? PQ_RUNNING : PQ_STOPPED);
		rc = aggd_qwin_add(q->qw, pt, aggd_real_ns());
		if (rc < 0) {
			a->rejected++;
			log_warn("aggregator: %s: partial of query %" PRIu64 " window %" PRIu64
				 " refused: %s",
				 peer_label(p), q->id, pt->window,
				 rc == -EINVAL ? "states or window out of range" : strerror(-rc));
		} else if (rc == AGGD_LATE) {
			log_info("aggregator: query %" PRIu64 ": partial of %s for window %" PRIu64
				 " came too late: dropped (counted)",
				 q->id, p->host, pt->window);
		} else {
			log_debug("aggregator: query %" PRIu64
				  ": merged %zu groups of %s for window "
				  "%" PRIu64 "%s",
				  q->id, pt->n_groups, p->host, pt->window,
				  rc == AGGD_REVISED ? " (late: a revision follows)" : "");
			if (rc == AGGD_REVISED && q->parent_id)
				partial_forward(a, q, pt);
		}
	}
	/* merged, refused or too late: either way it is settled, and acknowledged after the
	 * next checkpoint (aggd_txn_commit()) */
	p->upto = env->seq;
	p->ack_due = a->acks_due = true;
}

static void on_query_error(struct aggd *a, struct peer *p, const Weft__QueryError *qe)
{
	struct query *q = query_find(a, qe->query_id);

	log_warn("aggregator: query %" PRIu64 " failed on %s: %s", qe->query_id, p->host,
		 qe->message);
	if (!q)
		return;
	peer_pq_add(p, q->id, PQ_FAILED);
	aggd_qwin_member_fail(q->qw, p->host);
	query_add_error(q, p->host, qe->message);
	for (struct peer *c = a->peers; c; c = c->next)
		if (c->role == WIRE_ROLE_CLIENT && peer_sub(c, q->id))
			send_error(a, c, 0, q->id, "%s: %s%s%s", p->host, qe->message,
				   qe->detail && *qe->detail ? "\n" : "",
				   qe->detail ? qe->detail : "");
	if (a->has_parent && q->parent_id) {
		/* not forwarded as a QueryError (we are not the failing host): logged */
	}
}

static int str_cmp(const void *x, const void *y)
{
	return strcmp(*(char *const *)x, *(char *const *)y);
}

static Weft__QueryStatus *query_status(struct aggd *a, struct query *q, Weft__QueryStatus *qs,
				       char ***hosts_out)
{
	struct aggd_qwin_stats st;
	char **hosts = calloc(a->npeers + 1, sizeof(char *));
	size_t nh = 0, nsubs = 0;

	aggd_qwin_stats(q->qw, &st);
	weft__query_status__init(qs);
	qs->query_id = q->id;
	qs->query = q->text;
	qs->windows = st.emitted - st.revisions;
	for (struct peer *p = a->peers; p && hosts; p = p->next) {
		struct pq *e;

		if (aggd_peer_is_sender(p) && p->hello && p->alive && (e = peer_pq(p, q->id)) &&
		    (e->state == PQ_SENT || e->state == PQ_RUNNING))
			hosts[nh++] = p->host;
		if (p->role == WIRE_ROLE_CLIENT && peer_sub(p, q->id))
			nsubs++;
	}
	if (hosts)
		qsort(hosts, nh, sizeof(*hosts), str_cmp);
	qs->n_hosts = nh;
	qs->hosts = hosts;
	qs->has_started_realtime_ns = true;
	qs->started_realtime_ns = q->epoch_ns;
	qs->has_ended = true;
	qs->ended = q->ended;
	qs->has_every_ns = true;
	qs->every_ns = q->plan->every_ns;
	qs->has_end_realtime_ns = true;
	qs->end_realtime_ns = q->end_ns;
	qs->has_late_dropped = true;
	qs->late_dropped = st.late_dropped;
	qs->has_revisions = true;
	qs->revisions = st.revisions;
	qs->n_errors = q->nerrors;
	qs->errors = q->errors;
	qs->has_subscribers = true;
	qs->subscribers = nsubs;
	*hosts_out = hosts;
	return qs;
}

static int agent_status_cmp(const void *x, const void *y)
{
	const Weft__AgentStatus *a = *(Weft__AgentStatus *const *)x;
	const Weft__AgentStatus *b = *(Weft__AgentStatus *const *)y;

	return strcmp(a->host, b->host);
}

static int query_status_cmp(const void *x, const void *y)
{
	const Weft__QueryStatus *a = *(Weft__QueryStatus *const *)x;
	const Weft__QueryStatus *b = *(Weft__QueryStatus *const *)y;

	return a->query_id < b->query_id ? -1 : a->query_id > b->query_id;
}

/* A StatusReply: every agent and child aggregator, and the queries (one, or all), sorted
 * (by host, by id) so that it reads the same every time. */
static void send_status(struct aggd *a, struct peer *to, uint64_t only_query)
{
	Weft__Envelope e;
	Weft__StatusReply r;
	Weft__AgentStatus *as = calloc(a->npeers + 1, sizeof(*as));
	Weft__AgentStatus **asp = calloc(a->npeers + 1, sizeof(*asp));
	Weft__QueryStatus *qs = calloc(a->nq + 1, sizeof(*qs));
	Weft__QueryStatus **qsp = calloc(a->nq + 1, sizeof(*qsp));
	char ***hosts = calloc(a->nq + 1, sizeof(*hosts));
	uint64_t **running = calloc(a->npeers + 1, sizeof(*running));
	size_t na = 0, nqs = 0;
	uint64_t now = aggd_mono_ns();

	if (!as || !asp || !qs || !qsp || !hosts || !running)
		goto out_free;
	weft__status_reply__init(&r);
	r.aggregator = a->name;
	r.has_rejected = true;
	/* the guard counts every connection gone without a message, refused keys included */
	r.rejected = a->rejected + aggd_guard_failed(a->guard);
	for (struct peer *p = a->peers; p && !only_query; p = p->next) {
		Weft__AgentStatus *s = &as[na];
		size_t nr = 0;

		if (!p->hello || !aggd_peer_is_sender(p))
			continue;
		weft__agent_status__init(s);
		s->host = p->host;
		s->version = p->version;
		s->kernel = p->kernel;
		s->n_features = p->nfeatures;
		s->features = p->features;
		s->alive = p->alive;
		s->last_seen_ms = (now - p->last_seen) / 1000000ULL;
		running[na] = calloc(p->npq + 1, sizeof(uint64_t));
		for (size_t i = 0; running[na] && i < p->npq; i++)
			if (p->pq[i].state == PQ_SENT || p->pq[i].state == PQ_RUNNING)
				running[na][nr++] = p->pq[i].id;
		s->n_running = nr;
		s->running = running[na];
		s->role = (char *)wire_role_name(p->role);
		s->has_spooled = true;
		s->spooled = p->spooled;
		asp[na] = s;
		na++;
	}
	for (size_t i = 0; i < a->nq; i++) {
		if (only_query && a->q[i]->id != only_query)
			continue;
		qsp[nqs] = query_status(a, a->q[i], &qs[nqs], &hosts[nqs]);
		nqs++;
	}
	qsort(asp, na, sizeof(*asp), agent_status_cmp);
	qsort(qsp, nqs, sizeof(*qsp), query_status_cmp);
	r.n_agents = na;
	r.agents = asp;
	r.n_queries = nqs;
	r.queries = qsp;
	env_init(a, &e);
	e.body_case = WEFT__ENVELOPE__BODY_STATUS_REPLY;
	e.status_reply = &r;
	if (peer_send(a, to, &e) == -EAGAIN)
		to->results_dropped++;
out_free:
	for (size_t i = 0; running && i < na; i++)
		free(running[i]);
	for (size_t i = 0; hosts && i < nqs; i++)
		free(hosts[i]);
	free(running);
	free(hosts);
	free(as);
	free(asp);
	free(qs);
	free(qsp);
}

static void on_submit(struct aggd *a, struct peer *p, const Weft__Envelope *env)
{
	const Weft__Submit *s = env->submit;
	struct aggd_stored_query sq = {
		.query = s->query,
		.manifest = s->manifest.data,
		.manifest_len = s->manifest.len,
		.object = s->object.data,
		.object_len = s->object.len,
		.epoch_ns = aggd_real_ns(),
	};
	struct query *q;
	char why[512];
	int rc;

	if (aggd_queries_active(a) >= AGGD_MAX_QUERIES) {
		send_error(a, p, env->seq, 0, "%d queries are running: cancel one first",
			   AGGD_MAX_QUERIES);
		return;
	}
	q = aggd_query_make(a, &sq, why, sizeof(why));
	if (!q) {
		send_error(a, p, env->seq, 0, "query refused: %s", why);
		return;
	}
	if (q->plan->for_ns)
		q->end_ns = sq.end_ns = sq.epoch_ns + q->plan->for_ns;
	aggd_qwin_free(q->qw);
	{
		/* the end is known only now */
		struct aggd_qwin_opts wo = { .sz = sizeof(wo),
					     .epoch_ns = q->epoch_ns,
					     .every_ns = q->plan->every_ns,
					     .end_ns = q->end_ns,
					     .lateness_ns = a->o.lateness_ns,
					     .keep_windows = a->o.keep_windows };

		q->qw = aggd_qwin_new(q->plan, &wo);
	}
	aggd_txn_begin(a);
	rc = q->qw ? aggd_store_query_add(a->store, &sq) : -ENOMEM;
	if (rc || aggd_query_insert(a, q)) {
		send_error(a, p, env->seq, 0, "the aggregator cannot store the query: %s",
			   strerror(rc ? -rc : ENOMEM));
		aggd_query_free(q);
		return;
	}
	q->id = sq.id;
	/* committed before anyone hears of the id: a restart must know it */
	aggd_txn_commit(a);
	log_info("aggregator: query %" PRIu64 " submitted by %s: %s", q->id, peer_label(p),
		 q->text);
	if (s->has_follow && s->follow)
		peer_sub_add(p, q->id);
	for (struct peer *o = a->peers; o; o = o->next)
		if (o->hello && aggd_peer_is_sender(o) && o->alive)
			aggd_query_start_on(a, q, o);
	send_status(a, p, q->id);
}

static void on_client_stop(struct aggd *a, struct peer *p, const Weft__Envelope *env)
{
	struct query *q = query_find(a, env->query_stop->query_id);

	if (!q || q->ended) {
		send_error(a, p, env->seq, env->query_stop->query_id,
			   "no query %" PRIu64 " runs here", env->query_stop->query_id);
		return;
	}
	if (q->stopping) {
		send_status(a, p, q->id);
		return;
	}
	aggd_query_stop(a, q, "cancelled");
	log_info("aggregator: query %" PRIu64 " cancelled by %s", q->id, peer_label(p));
	send_status(a, p, q->id);
}

static void on_subscribe(struct aggd *a, struct peer *p, const Weft__Envelope *env)
{
	struct query *q = query_find(a, env->subscribe->query_id);
	int n = 0;

	if (!q) {
		send_error(a, p, env->seq, env->subscribe->query_id,
			   "no query %" PRIu64 " runs here", env->subscribe->query_id);
		return;
	}
	if (peer_sub_add(p, q->id)) {
		send_error(a, p, env->seq, q->id, "too many subscriptions");
		return;
	}
	send_status(a, p, q->id);
	if (env->subscribe->has_from_window) {
		struct emit_ctx c = { a, q, p };

		n = aggd_qwin_replay(q->qw, env->subscribe->from_window, replay_window, &c);
	}
	/* an ended query (still listed in status) has nothing more to send */
	if (q->ended) {
		peer_sub_del(p, q->id);
		if (n <= 0)
			send_error(a, p, env->seq, q->id,
				   "query %" PRIu64 " has ended, and its windows are no longer "
				   "retained",
				   q->id);
	}
}

/*
 * A body the sender's role may not send: refused (counted by the caller) and answered with
 * an Error naming the role, so that a tool used with the wrong key (`weft submit` with an
 * agent's key) says why at once instead of waiting for an answer.  The sender may not have
 * said Hello: the answer goes to its routing id.
 */
static void router_refuse_role(struct aggd *a, zmq_msg_t *idm, const Weft__Envelope *in,
			       enum wire_role role, const char *name)
{
	static const enum wire_role roles[] = { WIRE_ROLE_AGENT, WIRE_ROLE_CLIENT,
						WIRE_ROLE_AGGREGATOR };
	const char *body = wire_body_name(in->body_case);
	char who[64] = "", msg[256];
	Weft__Envelope e;
	Weft__Error err;
	size_t n = 0;

	for (size_t i = 0; i < sizeof(roles) / sizeof(roles[0]); i++)
		if (wire_body_allowed(roles[i], in->body_case) && n < sizeof(who))
			n += (size_t)snprintf(who + n, sizeof(who) - n, "%s%s", n ? " or " : "",
					      wire_role_name(roles[i]));
	if (who[0])
		snprintf(msg, sizeof(msg),
			 "this key is allow-listed as %s \"%s\", which may not send %s: %s "
			 "takes a key allow-listed as %s",
			 wire_role_name(role), name ? name : "?", body, body, who);
	else
		snprintf(msg, sizeof(msg),
			 "this key is allow-listed as %s \"%s\", which may not send %s: only the "
			 "aggregator sends it",
			 wire_role_name(role), name ? name : "?", body);
	weft__error__init(&err);
	err.message = msg;
	if (in->seq) {
		err.has_in_reply_to = true;
		err.in_reply_to = in->seq;
	}
	env_init(a, &e);
	e.body_case = WEFT__ENVELOPE__BODY_ERROR;
	e.error = &err;
	wire_send(a->sock, zmq_msg_data(idm), zmq_msg_size(idm), &e, true);
}

/* One message from the ROUTER socket (identity, body). */
static void router_one(struct aggd *a, zmq_msg_t *idm, zmq_msg_t *body)
{
	const char *uid = zmq_msg_gets(body, "User-Id");
	const char *name = NULL;
	enum wire_role role = wire_user_id_role(uid, &name);
	struct peer *p;
	Weft__Envelope *e;
	char why[256];

	if (role == WIRE_ROLE_NONE) {
		a->rejected++;
		log_debug("aggregator: a message without an allow-listed user id: rejected");
		return;
	}
	e = wire_decode(zmq_msg_data(body), zmq_msg_size(body), why, sizeof(why));
	p = peer_find(a, zmq_msg_data(idm), zmq_msg_size(idm));
	if (!p)
		aggd_guard_seen(a->guard, body); /* a new connection got through */
	if (!e) {
		a->rejected++;
		log_debug("aggregator: rejected a message from %s %s: %s", wire_role_name(role),
			  name ? name : "?", why);
		return;
	}
	if (!wire_body_allowed(role, e->body_case)) {
		a->rejected++;
		log_debug("aggregator: rejected %s from %s %s: not allowed for its role",
			  wire_body_name(e->body_case), wire_role_name(role), name ? name : "?");
		router_refuse_role(a, idm, e, role, name);
		goto out;
	}
	if (!p) {
		if (e->body_case != WEFT__ENVELOPE__BODY_HELLO) {
			/* a connection that has not said Hello (e.g. what was queued before a
			 * reconnect): dropped; the sender resends after its Welcome */
			a->before_hello++;
			p = peer_new(a, zmq_msg_data(idm), zmq_msg_size(idm));
			if (p) {
				p->role = role;
				snprintf(p->name, sizeof(p->name), "%s", name ? name : "");
				p->last_seen = aggd_mono_ns();
				send_error(a, p, e->seq, 0, NOT_WELCOMED);
			}
			goto out;
		}
		p = peer_new(a, zmq_msg_data(idm), zmq_msg_size(idm));
		if (!p)
			goto out;
		p->role = role;
		snprintf(p->name, sizeof(p->name), "%s", name ? name : "");
	}
	p->last_seen = aggd_mono_ns();
	if (p->role != role) { /* cannot happen: one connection, one key */
		a->rejected++;
		goto out;
	}
	if (e->body_case == WEFT__ENVELOPE__BODY_HELLO) {
		on_hello(a, p, e, role);
		goto out;
	}
	if (!p->hello) {
		a->before_hello++;
		send_error(a, p, e->seq, 0, NOT_WELCOMED);
		goto out;
	}
	if (!wire_seq_accept(&p->ctl, p->instance, e->seq)) {
		/* a repeat or out of order: dropped; a repeated partial is acknowledged again */
		log_debug("aggregator: %s: seq %" PRIu64 " after %" PRIu64 ": dropped",
			  peer_label(p), e->seq, p->ctl.last);
		if (e->body_case == WEFT__ENVELOPE__BODY_PARTIAL)
			p->ack_due = a->acks_due = true;
		goto out;
	}
	if (aggd_peer_is_sender(p))
		peer_set_alive(a, p, true);
	switch (e->body_case) {
	case WEFT__ENVELOPE__BODY_HEARTBEAT:
		if (aggd_peer_is_sender(p)) {
			p->spooled = e->heartbeat->has_spooled ? e->heartbeat->spooled : 0;
			p->spool_dropped = e->heartbeat->spool_dropped;
			peer_running(a, p, e->heartbeat->running, e->heartbeat->n_running);
		}
		break;
	case WEFT__ENVELOPE__BODY_PARTIAL:
		on_partial(a, p, e);
		break;
	case WEFT__ENVELOPE__BODY_QUERY_ERROR:
		on_query_error(a, p, e->query_error);
		break;
	case WEFT__ENVELOPE__BODY_SUBMIT:
		on_submit(a, p, e);
		break;
	case WEFT__ENVELOPE__BODY_QUERY_STOP:
		on_client_stop(a, p, e);
		break;
	case WEFT__ENVELOPE__BODY_STATUS_REQUEST:
		send_status(a, p,
			    e->status_request->has_query_id ? e->status_request->query_id : 0);
		break;
	case WEFT__ENVELOPE__BODY_SUBSCRIBE:
		on_subscribe(a, p, e);
		break;
	default:
		a->rejected++;
		break;
	}
out:
	wire_free(e);
}

/* Reads up to BATCH_MAX messages; returns how many. */
static int router_batch(struct aggd *a)
{
	int n;

	for (n = 0; n < BATCH_MAX; n++) {
		zmq_msg_t parts[2], extra;
		int more = 0, nparts = 0;
		size_t msz = sizeof(more);

		zmq_msg_init(&parts[0]);
		if (zmq_msg_recv(&parts[0], a->sock, ZMQ_DONTWAIT) < 0) {
			zmq_msg_close(&parts[0]);
			break;
		}
		nparts = 1;
		zmq_getsockopt(a->sock, ZMQ_RCVMORE, &more, &msz);
		if (more) {
			zmq_msg_init(&parts[1]);
			if (zmq_msg_recv(&parts[1], a->sock, 0) >= 0) {
				nparts = 2;
				zmq_getsockopt(a->sock, ZMQ_RCVMORE, &more, &msz);
			} else {
				zmq_msg_close(&parts[1]);
				more = 0;
			}
		}
		if (more) {
			/* one envelope per message: anything in more parts is hostile */
			while (more) {
				zmq_msg_init(&extra);
				if (zmq_msg_recv(&extra, a->sock, 0) < 0)
					more = 0;
				else
					zmq_getsockopt(a->sock, ZMQ_RCVMORE, &more, &msz);
				zmq_msg_close(&extra);
			}
			a->rejected++;
		} else if (nparts == 2) {
			router_one(a, &parts[0], &parts[1]);
		} else {
			a->rejected++;
		}
		for (int i = 0; i < nparts; i++)
			zmq_msg_close(&parts[i]);
	}
	return n;
}

/* ---- tick ---- */

/*
 * full: the periodic tick (every TICK_NS): liveness, starting queries on agents that lack
 * them, forgetting.  Otherwise only the windows, after a batch of messages: a window whose
 * last partial just came closes now, not at the next tick.
 */
static void tick(struct aggd *a, bool full)
{
	uint64_t mono = aggd_mono_ns(), real = aggd_real_ns();
	uint64_t expire = (uint64_t)a->o.heartbeat_ms * 1000000ULL * AGGD_EXPIRE_BEATS;

	/* liveness: agents expire (their windows stop waiting), clients are forgotten */
	for (struct peer *p = full ? a->peers : NULL, *next; p; p = next) {
		next = p->next;
		if (mono <= p->last_seen || mono - p->last_seen <= expire)
			continue;
		if (!p->hello || p->role == WIRE_ROLE_CLIENT) {
			if (p->hello)
				log_info("aggregator: %s expired", peer_label(p));
			peer_free(a, p);
			continue;
		}
		peer_set_alive(a, p, false);
		if (mono > p->dead_since && mono - p->dead_since > FORGET_NS) {
			for (size_t i = 0; i < a->nq; i++)
				aggd_qwin_member_forget(a->q[i]->qw, p->host);
			log_info("aggregator: %s forgotten", peer_label(p));
			peer_free(a, p);
		}
	}
	for (struct peer *p = full ? a->peers : NULL; p; p = p->next)
		aggd_reconcile(a, p);

	for (size_t i = 0; i < a->nq; i++) {
		struct query *q = a->q[i];
		struct emit_ctx c = { a, q, NULL };
		uint64_t from;
		int rc;

		if (q->ended)
			continue;
		rc = aggd_qwin_tick(q->qw, real, emit_window, &c);
		if (rc < 0)
			log_err("aggregator: query %" PRIu64 ": %s", q->id, strerror(-rc));
		from = aggd_qwin_retained_from(q->qw);
		if (from > q->forgot_below) {
			aggd_txn_begin(a);
			aggd_store_windows_forget(a->store, q->id, from);
			q->forgot_below = from;
		}
		if (aggd_qwin_done(q->qw))
			query_end(a, q);
	}
	/* ended queries stay visible in status for a while */
	for (size_t i = 0; full && i < a->nq;) {
		struct query *q = a->q[i];

		if (q->ended && mono > q->ended_mono && mono - q->ended_mono > ENDED_KEEP_NS) {
			aggd_query_free(q);
			a->q[i] = a->q[--a->nq];
			continue;
		}
		i++;
	}
	aggd_txn_commit(a);
	if (a->has_parent) {
		aggd_parent_flush(a);
		if (full && a->par.welcomed && mono >= a->par.next_hb) {
			aggd_parent_heartbeat(a);
			a->par.next_hb = mono + a->par.hb_ms * 1000000ULL;
		}
	}
}

/* ---- life cycle ---- */

struct aggd *aggd_new(const struct aggd_opts *o, char *err, size_t errsz)
{
	struct aggd *a;
	char path[4096];
	const char *store;
	int rc, line = 0;

	if (!o || !o->listen || !o->key_file || !o->allow_file) {
		snprintf(err, errsz, "--listen, --key and --allow are required");
		errno = EINVAL;
		return NULL;
	}
	a = calloc(1, sizeof(*a));
	if (!a) {
		snprintf(err, errsz, "out of memory");
		return NULL;
	}
	memcpy(&a->o, o, o->sz < sizeof(a->o) ? o->sz : sizeof(a->o));
	a->o.sz = sizeof(a->o);
	if (!a->o.lateness_ns)
		a->o.lateness_ns = AGGD_DEFAULT_LATENESS_NS;
	if (!a->o.heartbeat_ms)
		a->o.heartbeat_ms = AGGD_DEFAULT_HEARTBEAT_MS;
	if (!a->o.keep_windows)
		a->o.keep_windows = AGGD_KEEP_WINDOWS;
	if (o->name && *o->name)
		snprintf(a->name, sizeof(a->name), "%s", o->name);
	else if (gethostname(a->name, sizeof(a->name) - 1) != 0)
		snprintf(a->name, sizeof(a->name), "aggregator");
	a->start_mono = aggd_mono_ns();
	if (getrandom(&a->instance, sizeof(a->instance), 0) != sizeof(a->instance))
		a->instance = aggd_real_ns() ^ ((uint64_t)getpid() << 32);
	a->instance |= 1;

	rc = wire_keyfile_read(o->key_file, a->pub, a->sec);
	if (rc) {
		snprintf(err, errsz, "--key %s: %s", o->key_file,
			 rc == -ENOKEY ? "holds no secret key (give NAME.key, not NAME.pub)" :
			 rc == -EINVAL ? "not a key file (weft keygen writes one)" :
					 weft_file_strerror(rc));
		goto out_free;
	}
	rc = wire_allowlist_load(o->allow_file, &a->al, &line);
	if (rc) {
		if (rc == -EINVAL)
			snprintf(
				err, errsz,
				"--allow %s:%d: not 'ROLE PUBLIC-KEY [NAME]' (ROLE agent, client or "
				"aggregator; each key once)",
				o->allow_file, line);
		else
			snprintf(err, errsz, "--allow %s: %s", o->allow_file,
				 weft_file_strerror(rc));
		goto out_free;
	}
	a->allow_file = strdup(o->allow_file);
	store = o->store;
	if (!store) {
		rc = aggd_store_default_path(path, sizeof(path));
		if (rc) {
			snprintf(err, errsz, "no default store path (set HOME or give --store)");
			goto out_free;
		}
		store = path;
	}
	a->store = aggd_store_open(store, err, errsz);
	if (!a->store)
		goto out_free;
	a->zctx = zmq_ctx_new();
	if (!a->zctx) {
		snprintf(err, errsz, "zmq_ctx_new: %s", zmq_strerror(errno));
		goto out_free;
	}
	a->zap = wire_zap_start(a->zctx, &a->al);
	if (!a->zap) {
		snprintf(err, errsz, "cannot start the authentication handler: %s",
			 strerror(errno));
		goto out_free;
	}
	a->sock = wire_server_socket(a->zctx, o->listen, a->pub, a->sec);
	if (!a->sock) {
		snprintf(err, errsz, "cannot listen on %s: %s", o->listen, zmq_strerror(errno));
		goto out_free;
	}
	a->guard = aggd_guard_new(a->zctx, a->sock);
	if (!a->guard) {
		snprintf(err, errsz, "cannot watch the connections: %s", zmq_strerror(errno));
		goto out_free;
	}
	if (o->parent && aggd_parent_open(a, err, errsz))
		goto out_free;
	rc = aggd_store_queries_load(a->store, aggd_restore_query, a);
	aggd_txn_commit(a);
	if (rc) {
		snprintf(err, errsz, "reading the store %s: %s", store, strerror(-rc));
		goto out_free;
	}
	log_info("aggregator: %s listening on %s (store %s, %zu allow-listed keys, lateness "
		 "%" PRIu64 " ms, heartbeat %" PRIu64 " ms)",
		 a->name, o->listen, store, a->al.n, (uint64_t)(a->o.lateness_ns / 1000000ULL),
		 a->o.heartbeat_ms);
	return a;

out_free:
	aggd_free(a);
	errno = EINVAL;
	return NULL;
}

static void reload_allowlist(struct aggd *a)
{
	struct wire_allowlist al = { 0 };
	int line = 0, rc = wire_allowlist_load(a->allow_file, &al, &line);

	if (rc) {
		if (rc == -EINVAL)
			log_err("aggregator: reloading %s failed (line %d is not 'ROLE PUBLIC-KEY "
				"[NAME]', or a key listed twice): keeping the old allow-list",
				a->allow_file, line);
		else
			log_err("aggregator: reloading %s failed (%s): keeping the old allow-list",
				a->allow_file, weft_file_strerror(rc));
		return;
	}
	rc = wire_zap_reload(a->zap, &al);
	if (rc == 0) {
		wire_allowlist_free(&a->al);
		a->al = al;
		log_info("aggregator: reloaded %s (%zu keys); connections already made stay",
			 a->allow_file, al.n);
	} else {
		wire_allowlist_free(&al);
	}
}

int aggd_run(struct aggd *a, int sig_fd)
{
	if (!a)
		return -EINVAL;
	a->next_tick = aggd_mono_ns();
	for (;;) {
		zmq_pollitem_t items[5];
		int n = 0, sig_i = -1, par_i = -1, mon_i = -1, guard_i, rc;
		uint64_t now = aggd_mono_ns();
		/* the next tick, or the next checkpoint when one is pending */
		uint64_t wake = (a->txn || a->acks_due) && a->next_ckpt < a->next_tick ?
					a->next_ckpt :
					a->next_tick;
		long timeout = now >= wake ? 0 : (long)((wake - now + 999999ULL) / 1000000ULL);

		items[n++] = (zmq_pollitem_t){ .socket = a->sock, .events = ZMQ_POLLIN };
		guard_i = n;
		items[n++] = (zmq_pollitem_t){ .socket = aggd_guard_socket(a->guard),
					       .events = ZMQ_POLLIN };
		if (sig_fd >= 0) {
			sig_i = n;
			items[n++] = (zmq_pollitem_t){ .fd = sig_fd, .events = ZMQ_POLLIN };
		}
		if (a->has_parent) {
			par_i = n;
			items[n++] =
				(zmq_pollitem_t){ .socket = a->par.sock, .events = ZMQ_POLLIN };
			mon_i = n;
			items[n++] = (zmq_pollitem_t){ .socket = a->par.mon, .events = ZMQ_POLLIN };
		}
		rc = zmq_poll(items, n, timeout);
		if (rc < 0) {
			if (errno == EINTR)
				continue;
			log_err("aggregator: poll: %s", zmq_strerror(errno));
			return -EIO;
		}
		if (sig_i >= 0 && (items[sig_i].revents & ZMQ_POLLIN)) {
			struct signalfd_siginfo si;
			ssize_t got = read(sig_fd, &si, sizeof(si));

			if (got == (ssize_t)sizeof(si) && si.ssi_signo == SIGHUP) {
				reload_allowlist(a);
			} else {
				log_info("aggregator: stopping (%s)",
					 got == (ssize_t)sizeof(si) ? strsignal((int)si.ssi_signo) :
								      "stop requested");
				break;
			}
		}
		if (items[guard_i].revents & ZMQ_POLLIN)
			aggd_guard_poll(a->guard);
		if (mon_i >= 0 && (items[mon_i].revents & ZMQ_POLLIN))
			aggd_parent_monitor(a);
		if (par_i >= 0 && (items[par_i].revents & ZMQ_POLLIN))
			aggd_parent_recv(a);
		/* ZMQ_POLLIN on a ZeroMQ socket is level-triggered for zmq_poll: drain a batch */
		if (items[0].revents & ZMQ_POLLIN)
			router_batch(a);
		/* a checkpoint, then the Acks it allows: at most every AGGD_CHECKPOINT_NS, so
		 * that under load one holds many batches; windows completed close at once */
		if ((a->txn || a->acks_due) && aggd_mono_ns() >= a->next_ckpt)
			aggd_txn_commit(a);
		if (aggd_mono_ns() >= a->next_tick) {
			tick(a, true);
			a->next_tick = aggd_mono_ns() + TICK_NS;
		} else if (items[0].revents & ZMQ_POLLIN) {
			tick(a, false);
		}
	}
	aggd_txn_commit(a);
	return 0;
}

void aggd_free(struct aggd *a)
{
	if (!a)
		return;
	if (a->store && (a->txn || a->acks_due))
		aggd_txn_commit(a);
	while (a->peers)
		peer_free(a, a->peers);
	if (a->store && a->txn)
		aggd_txn_commit(a); /* what peer_free() wrote */
	for (size_t i = 0; i < a->nq; i++)
		aggd_query_free(a->q[i]);
	free(a->q);
	for (size_t i = 0; i < a->par.nrows; i++)
		free(a->par.rows[i].body);
	free(a->par.rows);
	if (a->par.mon)
		zmq_close(a->par.mon);
	if (a->par.sock) {
		zmq_socket_monitor(a->par.sock, NULL, 0);
		zmq_close(a->par.sock);
	}
	aggd_guard_free(a->guard); /* its monitor stops before the socket closes */
	if (a->sock)
		zmq_close(a->sock);
	wire_zap_stop(a->zap);
	if (a->zctx)
		zmq_ctx_term(a->zctx);
	aggd_store_close(a->store);
	wire_allowlist_free(&a->al);
	free(a->allow_file);
	explicit_bzero(a->sec, sizeof(a->sec));
	free(a);
}
