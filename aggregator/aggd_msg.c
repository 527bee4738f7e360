// SPDX-License-Identifier: Apache-2.0
/*
 * The aggregator's message handlers: what each message from a peer does once aggd.c's
 * router_one() has checked it (allow-listed role, a body that role may send, Hello first,
 * seq in order).  Senders (agents, child aggregators): Hello (replacing an older connection
 * of the same host; Welcome.last_seq from the store), Partial (merged once per seq, then
 * acknowledged after the checkpoint), QueryError, and what their Hello and heartbeats say
 * they run.  Clients: Submit, QueryStop (cancel), Subscribe (with the replay of retained
 * windows); StatusRequest is aggd_status.c's.
 *
 * Must never: act on a message for another host than the sender's (refused, counted), merge a
 * partial whose seq is at or below the sender's merged seq, tell a sender a Welcome.last_seq
 * that is not committed, or name a submitted query's id before it is committed.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "aggregator/aggd.h"
#include "agent/agent.h"
#include "agent/result.h"
#include "base/log.h"
#include "aggregator/aggd_int.h"

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

/* Whether p was told to stop query id lately (remembered if not). */
static bool told_stop(struct peer *p, uint64_t id)
{
	unsigned n = p->ntold_stop < 8 ? p->ntold_stop : 8;

	for (unsigned i = 0; i < n; i++)
		if (p->told_stop[i] == id)
			return true;
	p->told_stop[p->ntold_stop++ % 8] = id;
	return false;
}

/* What a sender says it runs (Hello, Heartbeat): queries we do not run any more are stopped
 * there; the others are confirmed. */
void aggd_peer_running(struct aggd *a, struct peer *p, const uint64_t *ids, size_t n)
{
	uint64_t now = aggd_real_ns();

	for (size_t i = 0; i < n; i++) {
		struct query *q = aggd_query_find(a, ids[i]);
		struct pq *e;

		if (!q || q->ended) {
			if (told_stop(p, ids[i]))
				log_debug("aggregator: %s still runs query %" PRIu64
					  " (detaching): stopping it there",
					  p->host, ids[i]);
			else
				log_info("aggregator: %s runs query %" PRIu64 ", which is not "
					 "running here: stopping it there",
					 p->host, ids[i]);
			aggd_send_stop(a, p, ids[i]);
			continue;
		}
		if (q->stopping) {
			e = aggd_peer_pq(p, q->id);
			if (!e || e->state != PQ_STOPPED) {
				aggd_send_stop(a, p, q->id);
				aggd_peer_pq_add(p, q->id, PQ_STOPPED);
			}
			continue;
		}
		e = aggd_peer_pq(p, q->id);
		if (!e || e->state == PQ_SENT) {
			aggd_peer_pq_add(p, q->id, PQ_RUNNING);
			aggd_qwin_member(q->qw, p->host, aggd_qwin_window_of(q->qw, now), true);
		}
	}
}

void aggd_on_hello(struct aggd *a, struct peer *p, const Weft__Envelope *env, enum wire_role role)
{
	const Weft__Hello *h = env->hello;
	Weft__Envelope e;
	Weft__Welcome w;
	uint64_t upto = 0;

	if (wire_role_parse(h->role) != role) {
		a->rejected++;
		aggd_send_error(
			a, p, env->seq, 0,
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
			aggd_peer_free(a, o);
		}
	}
	snprintf(p->host, sizeof(p->host), "%s", h->host ? h->host : "");
	snprintf(p->version, sizeof(p->version), "%s", h->version);
	snprintf(p->kernel, sizeof(p->kernel), "%s", h->kernel ? h->kernel : "");
	free(p->scope);
	p->scope = h->scope && *h->scope ? strdup(h->scope) : NULL;
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
	aggd_env_init(a, &e);
	e.body_case = WEFT__ENVELOPE__BODY_WELCOME;
	e.welcome = &w;
	aggd_peer_send(a, p, &e);
	if (aggd_peer_is_sender(p))
		log_info("aggregator: %s joined (version %s, instance %" PRIx64 ", merged up to "
			 "seq %" PRIu64 ")",
			 aggd_peer_label(p), p->version, p->instance, p->upto);
	else
		log_info("aggregator: %s joined", aggd_peer_label(p));
	if (aggd_peer_is_sender(p)) {
		aggd_peer_running(a, p, h->running, h->n_running);
		aggd_reconcile(a, p);
	}
}

/* A sender stopped the query early (its last Partial says why: its CPU budget): no longer
 * running there, recorded with the query's errors for `weft status`, and told to its
 * subscribers. */
static void query_host_stopped(struct aggd *a, struct query *q, struct peer *p, const char *why)
{
	log_warn("aggregator: query %" PRIu64 " stopped on %s: %s", q->id, p->host, why);
	aggd_peer_pq_add(p, q->id, PQ_STOPPED); /* not running there, and not to be started again */
	query_add_error(q, p->host, why);
	for (struct peer *c = a->peers; c; c = c->next)
		if (c->role == WIRE_ROLE_CLIENT && aggd_peer_sub(c, q->id))
			aggd_send_error(a, c, 0, q->id, "%s: %s", p->host, why);
}

void aggd_on_partial(struct aggd *a, struct peer *p, const Weft__Envelope *env)
{
	const Weft__Partial *pt = env->partial;
	struct query *q;
	int rc;

	if (env->seq <= p->upto) {
		/* merged already (a repeat): acknowledged again */
		p->ack_due = a->acks_due = true;
		return;
	}
	q = aggd_query_find(a, pt->query_id);
	if (strcmp(pt->host, p->host) != 0) {
		a->rejected++;
		log_warn("aggregator: %s sent a partial for host %s: refused", aggd_peer_label(p),
			 pt->host);
	} else if (!q) {
		log_info("aggregator: %s sent a partial of query %" PRIu64 ", which is not running "
			 "here: stopping it there",
			 p->host, pt->query_id);
		aggd_send_stop(a, p, pt->query_id);
	} else {
		if (!aggd_peer_pq(p, q->id))
			aggd_peer_pq_add(p, q->id, aggd_query_active(q) ? PQ_RUNNING : PQ_STOPPED);
		rc = aggd_qwin_add(q->qw, pt, aggd_real_ns());
		if (rc < 0) {
			a->rejected++;
			log_warn("aggregator: %s: partial of query %" PRIu64 " window %" PRIu64
				 " refused: %s",
				 aggd_peer_label(p), q->id, pt->window,
				 rc == -EINVAL ? "states or window out of range" : strerror(-rc));
		} else if (rc == AGGD_LATE) {
			log_info("aggregator: query %" PRIu64 ": partial of %s for window %" PRIu64
				 " came too late: dropped (counted)",
				 q->id, p->host, pt->window);
		} else {
			a->partials_merged++;
			log_debug("aggregator: query %" PRIu64
				  ": merged %zu groups of %s for window "
				  "%" PRIu64 "%s",
				  q->id, pt->n_groups, p->host, pt->window,
				  rc == AGGD_REVISED ? " (late: a revision follows)" : "");
			if (rc == AGGD_REVISED && q->parent_id)
				aggd_partial_forward(a, q, pt);
		}
		if (pt->stopped && *pt->stopped)
			query_host_stopped(a, q, p, pt->stopped);
	}
	/* merged, refused or too late: either way it is settled, and acknowledged after the
	 * next checkpoint (aggd_txn_commit()) */
	p->upto = env->seq;
	p->ack_due = a->acks_due = true;
}

void aggd_on_query_error(struct aggd *a, struct peer *p, const Weft__QueryError *qe)
{
	struct query *q = aggd_query_find(a, qe->query_id);

	log_warn("aggregator: query %" PRIu64 " failed on %s: %s", qe->query_id, p->host,
		 qe->message);
	if (!q)
		return;
	aggd_peer_pq_add(p, q->id, PQ_FAILED);
	aggd_qwin_member_fail(q->qw, p->host);
	query_add_error(q, p->host, qe->message);
	for (struct peer *c = a->peers; c; c = c->next)
		if (c->role == WIRE_ROLE_CLIENT && aggd_peer_sub(c, q->id))
			aggd_send_error(a, c, 0, q->id, "%s: %s%s%s", p->host, qe->message,
					qe->detail && *qe->detail ? "\n" : "",
					qe->detail ? qe->detail : "");
	if (a->has_parent && q->parent_id) {
		/* not forwarded as a QueryError (we are not the failing host): logged */
	}
}

void aggd_on_submit(struct aggd *a, struct peer *p, const Weft__Envelope *env)
{
	const Weft__Submit *s = env->submit;
	struct aggd_stored_query sq = {
		.query = s->query,
		.manifest = s->manifest.data,
		.manifest_len = s->manifest.len,
		.object = s->object.data,
		.object_len = s->object.len,
		.epoch_ns = aggd_real_ns(),
		.vm_host = s->has_vm_sync_host ? s->vm_sync_host : 0,
	};
	struct query *q;
	char why[512], *only = NULL;
	size_t only_len = 0;
	int rc;

	if (aggd_queries_active(a) >= AGGD_MAX_QUERIES) {
		aggd_send_error(a, p, env->seq, 0, "%d queries are running: cancel one first",
				AGGD_MAX_QUERIES);
		return;
	}
	if (s->n_only_hosts) {
		/* stored '\n'-separated: host names are TEXT_NAME, without control characters */
		FILE *m = open_memstream(&only, &only_len);

		for (size_t i = 0; m && i < s->n_only_hosts; i++)
			fprintf(m, "%s%s", i ? "\n" : "", s->only_hosts[i]);
		if (!m || fclose(m)) {
			aggd_send_error(a, p, env->seq, 0, "out of memory");
			return;
		}
		sq.only_hosts = only;
	}
	q = aggd_query_make(a, &sq, why, sizeof(why));
	if (q && sq.vm_host && aggd_vm_attach(a, q, sq.vm_host, why, sizeof(why))) {
		aggd_query_free(q);
		q = NULL;
	}
	if (!q) {
		free(only);
		aggd_send_error(a, p, env->seq, 0, "query refused: %s", why);
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

		q->qw = aggd_qwin_new(aggd_query_wplan(q), &wo);
	}
	aggd_txn_begin(a);
	rc = q->qw ? aggd_store_query_add(a->store, &sq) : -ENOMEM;
	free(only);
	sq.only_hosts = NULL;
	if (rc || aggd_query_insert(a, q)) {
		aggd_send_error(a, p, env->seq, 0, "the aggregator cannot store the query: %s",
				strerror(rc ? -rc : ENOMEM));
		aggd_query_free(q);
		return;
	}
	q->id = sq.id;
	q->export_metrics = s->has_export_metrics && s->export_metrics;
	if (q->export_metrics)
		aggd_web_export_save(a, q);
	/* committed before anyone hears of the id: a restart must know it */
	aggd_txn_commit(a);
	log_info("aggregator: query %" PRIu64 " submitted by %s: %s", q->id, aggd_peer_label(p),
		 q->text);
	if (s->has_follow && s->follow)
		aggd_peer_sub_add(p, q->id);
	for (struct peer *o = a->peers; o; o = o->next)
		if (o->hello && aggd_peer_is_sender(o) && o->alive)
			aggd_query_start_on(a, q, o);
	aggd_send_status(a, p, q->id, env->seq);
}

void aggd_on_client_stop(struct aggd *a, struct peer *p, const Weft__Envelope *env)
{
	struct query *q = aggd_query_find(a, env->query_stop->query_id);

	if (!q || q->ended) {
		aggd_send_error(a, p, env->seq, env->query_stop->query_id,
				"no query %" PRIu64 " runs here", env->query_stop->query_id);
		return;
	}
	if (q->stopping) {
		aggd_send_status(a, p, q->id, env->seq);
		return;
	}
	aggd_query_stop(a, q, "cancelled");
	log_info("aggregator: query %" PRIu64 " cancelled by %s", q->id, aggd_peer_label(p));
	aggd_send_status(a, p, q->id, env->seq);
}

void aggd_on_subscribe(struct aggd *a, struct peer *p, const Weft__Envelope *env)
{
	struct query *q = aggd_query_find(a, env->subscribe->query_id);
	int n = 0;

	if (!q) {
		aggd_send_error(a, p, env->seq, env->subscribe->query_id,
				"no query %" PRIu64 " runs here", env->subscribe->query_id);
		return;
	}
	if (aggd_peer_sub_add(p, q->id)) {
		aggd_send_error(a, p, env->seq, q->id, "too many subscriptions");
		return;
	}
	aggd_send_status(a, p, q->id, env->seq);
	if (env->subscribe->has_from_window) {
		struct aggd_emit_ctx c = { a, q, p };

		n = aggd_qwin_replay(q->qw, env->subscribe->from_window, aggd_replay_window, &c);
	}
	if (q->stream && env->subscribe->has_from_row_batch)
		aggd_rows_replay(a, p, q, env->subscribe->from_row_batch);
	/* an ended query (still listed in status) has nothing more to send */
	if (q->ended) {
		aggd_peer_sub_del(p, q->id);
		if (n <= 0)
			aggd_send_error(a, p, env->seq, q->id,
					"query %" PRIu64
					" has ended, and its windows are no longer "
					"retained",
					q->id);
	}
}
