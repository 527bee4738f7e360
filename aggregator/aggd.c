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
 * The other files of the daemon, by role (their insides shared through aggd_int.h):
 * aggd_msg.c handles each checked message, aggd_status.c answers status, aggd_emit.c sends
 * closed windows out (subscribers, checkpoints, the parent), aggd_parent.c is the link to a
 * parent aggregator, aggd_restore.c rebuilds queries from the store, aggd_window.c and
 * aggd_store.c are the windows and the store.
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
#include "base/zmq_dl.h"
#include "aggregator/aggd.h"
#include "agent/agent.h"
#include "agent/result.h"
#include "base/file.h"
#include "base/log.h"
#include "aggregator/aggd_int.h"
#include "aggregator/web.h"
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

/* ---- envelopes ---- */

void aggd_env_init(struct aggd *a, Weft__Envelope *e)
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

void aggd_peer_free(struct aggd *a, struct peer *p)
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
	free(p->scope);
	free(p->pq);
	free(p->subs);
	free(p);
}

bool aggd_peer_is_sender(const struct peer *p)
{
	return p->role == WIRE_ROLE_AGENT || p->role == WIRE_ROLE_AGGREGATOR;
}

struct pq *aggd_peer_pq(struct peer *p, uint64_t id)
{
	for (size_t i = 0; i < p->npq; i++)
		if (p->pq[i].id == id)
			return &p->pq[i];
	return NULL;
}

struct pq *aggd_peer_pq_add(struct peer *p, uint64_t id, enum pq_state st)
{
	struct pq *e = aggd_peer_pq(p, id);

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
	struct pq *e = aggd_peer_pq(p, id);

	if (e)
		*e = p->pq[--p->npq];
}

struct sub *aggd_peer_sub(struct peer *p, uint64_t id)
{
	for (size_t i = 0; i < p->nsubs; i++)
		if (p->subs[i].id == id)
			return &p->subs[i];
	return NULL;
}

int aggd_peer_sub_add(struct peer *p, uint64_t id)
{
	struct sub *nv;

	if (aggd_peer_sub(p, id))
		return 0;
	if (p->nsubs >= AGGD_MAX_QUERIES)
		return -ENOSPC;
	nv = realloc(p->subs, (p->nsubs + 1) * sizeof(*nv));
	if (!nv)
		return -ENOMEM;
	p->subs = nv;
	p->subs[p->nsubs].id = id;
	p->subs[p->nsubs].manifest_sent = false;
	p->subs[p->nsubs].rows_dropped = 0;
	p->nsubs++;
	return 0;
}

void aggd_peer_sub_del(struct peer *p, uint64_t id)
{
	struct sub *s = aggd_peer_sub(p, id);

	if (s)
		*s = p->subs[--p->nsubs];
}

const char *aggd_peer_label(const struct peer *p)
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
int aggd_peer_send(struct aggd *a, struct peer *p, const Weft__Envelope *e)
{
	int rc = wire_send(a->sock, p->rid, p->ridlen, e, true);

	if (rc && rc != -EAGAIN)
		log_debug("aggregator: send %s to %s: %s", wire_body_name(e->body_case),
			  aggd_peer_label(p), strerror(-rc));
	return rc;
}

void aggd_send_error(struct aggd *a, struct peer *p, uint64_t in_reply_to, uint64_t query_id,
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
	aggd_env_init(a, &e);
	e.body_case = WEFT__ENVELOPE__BODY_ERROR;
	e.error = &err;
	aggd_peer_send(a, p, &e);
}

/* ---- queries ---- */

struct query *aggd_query_find(struct aggd *a, uint64_t id)
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
	aggd_graph_query_free(q);
	free(q->gw);
	aggd_qwin_free(q->qw);
	plan_free(q->plan);
	free(q->text);
	free(q->manifest);
	free(q->object);
	for (size_t i = 0; i < q->nerrors; i++)
		free(q->errors[i]);
	free(q->errors);
	free(q->metrics);
	aggd_rows_keep_free(q);
	for (size_t i = 0; i < q->nonly; i++)
		free(q->only[i]);
	free(q->only);
	aggd_vm_free(q->vm);
	free(q);
}

bool aggd_query_runs_on(const struct query *q, const char *host)
{
	if (!q->nonly)
		return true;
	for (size_t i = 0; i < q->nonly; i++)
		if (strcmp(q->only[i], host) == 0)
			return true;
	return false;
}

/* "a\nb" (Submit.only_hosts as stored) into q->only.  0 or -ENOMEM. */
static int only_parse(struct query *q, const char *s)
{
	while (s && *s) {
		const char *nl = strchr(s, '\n');
		size_t n = nl ? (size_t)(nl - s) : strlen(s);
		char **nv;

		if (n) {
			nv = realloc(q->only, (q->nonly + 1) * sizeof(*nv));
			if (!nv)
				return -ENOMEM;
			q->only = nv;
			q->only[q->nonly] = strndup(s, n);
			if (!q->only[q->nonly])
				return -ENOMEM;
			q->nonly++;
		}
		s = nl ? nl + 1 : s + n;
	}
	return 0;
}

void *aggd_memdup(const void *p, size_t n)
{
	void *d = malloc(n ? n : 1);

	if (d && n)
		memcpy(d, p, n);
	return d;
}

/* The plan q's windows merge with: its own, or for a graph or stream query one of no
 * groups. */
const struct plan *aggd_query_wplan(const struct query *q)
{
	return q->plan->graph || q->stream ? &q->wplan : q->plan;
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
	if (!q->text || !q->manifest || !q->object || only_parse(q, sq->only_hosts)) {
		snprintf(why, whysz, "out of memory");
		goto out_free;
	}
	q->plan = manifest_read(q->manifest, q->manifest_len, err, sizeof(err));
	if (!q->plan) {
		snprintf(why, whysz, "the manifest does not read: %s", err[0] ? err : "malformed");
		goto out_free;
	}
	if (q->plan->graph) {
		/* its windows merge partials of no groups; its graph comes in GraphBatches */
		plan_graph_windows(q->plan, &q->wplan);
	} else if (!q->plan->aggregating) {
		/* a stream: its rows are relayed to its subscribers (and, from the parent, passed
		 * up), its windows have no groups */
		if (q->plan->ncols < 1 || q->plan->ncols > (int)WIRE_MAX_CELLS) {
			snprintf(why, whysz, "a stream query of %d columns (1 to %u)",
				 q->plan->ncols, WIRE_MAX_CELLS);
			goto out_free;
		}
		q->stream = true;
		plan_graph_windows(q->plan, &q->wplan);
	}
	wo.epoch_ns = q->epoch_ns;
	wo.every_ns = q->plan->every_ns;
	wo.end_ns = q->end_ns;
	wo.lateness_ns = a->o.lateness_ns;
	wo.keep_windows = a->o.keep_windows;
	q->qw = aggd_qwin_new(aggd_query_wplan(q), &wo);
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

/* ---- the store's transaction around a batch ---- */

void aggd_txn_begin(struct aggd *a)
{
	if (a->txn)
		return;
	if (aggd_store_begin(a->store) == 0)
		a->txn = true;
}

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
		rc = aggd_query_checkpoint(a, a->q[i]);
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
		aggd_env_init(a, &e);
		e.body_case = WEFT__ENVELOPE__BODY_ACK;
		e.ack = &ack;
		if (aggd_peer_send(a, p, &e) == 0)
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

	if (!aggd_query_active(q) || (q->end_ns && now >= q->end_ns) ||
	    !aggd_query_runs_on(q, p->host))
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
	aggd_env_init(a, &e);
	e.body_case = WEFT__ENVELOPE__BODY_QUERY_START;
	e.query_start = &qs;
	rc = aggd_peer_send(a, p, &e);
	if (rc)
		return rc; /* -EAGAIN: tried again at the next tick */
	if (!aggd_peer_pq_add(p, q->id, PQ_SENT))
		return -ENOMEM;
	aggd_qwin_member(q->qw, p->host, aggd_qwin_window_of(q->qw, now), p->alive);
	log_info("aggregator: query %" PRIu64 " sent to %s", q->id, p->host);
	return 0;
}

void aggd_send_stop(struct aggd *a, struct peer *p, uint64_t id)
{
	Weft__Envelope e;
	Weft__QueryStop st;

	weft__query_stop__init(&st);
	st.query_id = id;
	aggd_env_init(a, &e);
	e.body_case = WEFT__ENVELOPE__BODY_QUERY_STOP;
	e.query_stop = &st;
	aggd_peer_send(a, p, &e);
}

/* Starts on p every active query it lacks. */
void aggd_reconcile(struct aggd *a, struct peer *p)
{
	if (!p->hello || !aggd_peer_is_sender(p) || !p->alive)
		return;
	for (size_t i = 0; i < a->nq; i++) {
		struct query *q = a->q[i];

		if (aggd_query_active(q) && !aggd_peer_pq(p, q->id) &&
		    aggd_query_start_on(a, q, p) == -EAGAIN)
			break;
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
		struct query *q = aggd_query_find(a, p->pq[i].id);

		if (q && aggd_qwin_has_member(q->qw, p->host))
			aggd_qwin_member(q->qw, p->host, 0, alive);
	}
	if (alive)
		log_info("aggregator: %s is back", aggd_peer_label(p));
	else
		log_info("aggregator: %s expired (silent for %d heartbeats)", aggd_peer_label(p),
			 AGGD_EXPIRE_BEATS);
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
		/* a stream's subscribers keep it: an agent late for the last window still
		 * sends its last rows (relayed until the query is forgotten) */
		if (!q->stream)
			aggd_peer_sub_del(p, q->id);
		if (aggd_peer_is_sender(p)) {
			struct pq *e = aggd_peer_pq(p, q->id);

			if (e && e->state != PQ_STOPPED && e->state != PQ_FAILED) {
				/* it ended by its `for`: agents stop by themselves; a straggler is
				 * told (idempotent) */
				aggd_send_stop(a, p, q->id);
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

		if (!aggd_peer_is_sender(p) || !(e = aggd_peer_pq(p, q->id)))
			continue;
		aggd_send_stop(a, p, q->id);
		e->state = PQ_STOPPED;
	}
	log_info("aggregator: query %" PRIu64 " %s", q->id, why);
}

/* ---- the ROUTER socket ---- */

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
	aggd_env_init(a, &e);
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
				aggd_send_error(a, p, e->seq, 0, NOT_WELCOMED);
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
		aggd_on_hello(a, p, e, role);
		goto out;
	}
	if (!p->hello) {
		a->before_hello++;
		aggd_send_error(a, p, e->seq, 0, NOT_WELCOMED);
		goto out;
	}
	if (!wire_seq_accept(&p->ctl, p->instance, e->seq)) {
		/* a repeat or out of order: dropped; a repeated partial is acknowledged again */
		log_debug("aggregator: %s: seq %" PRIu64 " after %" PRIu64 ": dropped",
			  aggd_peer_label(p), e->seq, p->ctl.last);
		if (e->body_case == WEFT__ENVELOPE__BODY_PARTIAL ||
		    e->body_case == WEFT__ENVELOPE__BODY_GRAPH_BATCH ||
		    e->body_case == WEFT__ENVELOPE__BODY_ROW_BATCH)
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
			aggd_peer_running(a, p, e->heartbeat->running, e->heartbeat->n_running);
		}
		break;
	case WEFT__ENVELOPE__BODY_PARTIAL:
		aggd_on_partial(a, p, e);
		break;
	case WEFT__ENVELOPE__BODY_GRAPH_BATCH:
		aggd_on_graph_batch(a, p, e);
		break;
	case WEFT__ENVELOPE__BODY_ROW_BATCH:
		aggd_on_row_batch(a, p, e);
		break;
	case WEFT__ENVELOPE__BODY_QUERY_ERROR:
		aggd_on_query_error(a, p, e->query_error);
		break;
	case WEFT__ENVELOPE__BODY_SUBMIT:
		aggd_on_submit(a, p, e);
		break;
	case WEFT__ENVELOPE__BODY_QUERY_STOP:
		aggd_on_client_stop(a, p, e);
		break;
	case WEFT__ENVELOPE__BODY_STATUS_REQUEST:
		aggd_send_status(a, p,
				 e->status_request->has_query_id ? e->status_request->query_id : 0,
				 e->seq);
		break;
	case WEFT__ENVELOPE__BODY_SUBSCRIBE:
		aggd_on_subscribe(a, p, e);
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
				log_info("aggregator: %s expired", aggd_peer_label(p));
			aggd_peer_free(a, p);
			continue;
		}
		peer_set_alive(a, p, false);
		if (mono > p->dead_since && mono - p->dead_since > FORGET_NS) {
			for (size_t i = 0; i < a->nq; i++)
				aggd_qwin_member_forget(a->q[i]->qw, p->host);
			log_info("aggregator: %s forgotten", aggd_peer_label(p));
			aggd_peer_free(a, p);
		}
	}
	for (struct peer *p = full ? a->peers : NULL; p; p = p->next)
		aggd_reconcile(a, p);

	for (size_t i = 0; i < a->nq; i++) {
		struct query *q = a->q[i];
		struct aggd_emit_ctx c = { a, q, NULL };
		uint64_t from;
		int rc;

		if (q->ended)
			continue;
		rc = aggd_qwin_tick(q->qw, real, aggd_emit_window, &c);
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
	if (full)
		aggd_graph_tick(a);
	/* ended queries stay visible in status for a while */
	for (size_t i = 0; full && i < a->nq;) {
		struct query *q = a->q[i];

		if (q->ended && mono > q->ended_mono && mono - q->ended_mono > ENDED_KEEP_NS) {
			for (struct peer *p = a->peers; q->stream && p; p = p->next)
				aggd_peer_sub_del(p, q->id);
			aggd_query_free(q);
			a->q[i] = a->q[--a->nq];
			continue;
		}
		i++;
	}
	aggd_txn_commit(a);
	if (full)
		aggd_web_tick(a);
	if (a->has_parent) {
		/* the windows just closed go up now; connecting and heartbeats at the full tick */
		if (full)
			session_tick(a->par.s);
		else
			session_flush(a->par.s);
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
	if (aggd_graph_open(a, store, err, errsz))
		goto out_free;
	if (aggd_gfwd_open(a, err, errsz))
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
	if (o->http && aggd_web_open(a, err, errsz))
		goto out_free;
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
		zmq_pollitem_t items[3 + SESSION_POLL_ITEMS];
		int n = 0, sig_i = -1, par_i = -1, npar = 0, guard_i, rc;
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
			/* the parent link's socket and its monitor (none while reconnecting) */
			par_i = n;
			npar = session_poll_items(a->par.s, &items[n]);
			n += npar;
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
		if (npar && (items[par_i + 1].revents & ZMQ_POLLIN))
			session_poll_events(a->par.s);
		if (npar && (items[par_i].revents & ZMQ_POLLIN))
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
	web_stop(a->web); /* first: its thread reads what the daemon publishes */
	aggd_gfwd_close(a); /* what waits is forwarded, or spooled */
	if (a->store && (a->txn || a->acks_due))
		aggd_txn_commit(a);
	while (a->peers)
		aggd_peer_free(a, a->peers);
	if (a->store && a->txn)
		aggd_txn_commit(a); /* what aggd_peer_free() wrote */
	for (size_t i = 0; i < a->nq; i++)
		aggd_query_free(a->q[i]);
	free(a->q);
	aggd_parent_close(a);
	aggd_guard_free(a->guard); /* its monitor stops before the socket closes */
	if (a->sock)
		zmq_close(a->sock);
	wire_zap_stop(a->zap);
	if (a->zctx)
		zmq_ctx_term(a->zctx);
	aggd_store_close(a->store);
	aggd_graph_close(a);
	wire_allowlist_free(&a->al);
	free(a->allow_file);
	explicit_bzero(a->sec, sizeof(a->sec));
	free(a);
}
