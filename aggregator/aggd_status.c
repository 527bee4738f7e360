// SPDX-License-Identifier: Apache-2.0
/*
 * Status replies (`weft status`, and the answer to Submit, QueryStop and Subscribe): every
 * agent and child aggregator with what it runs, and the queries (one, or all) with their
 * hosts, windows, errors and counters, sorted (agents by host, queries by id) so that a reply
 * reads the same every time; `rejected` adds up every check that refused something (messages
 * here and on the parent link, connections the ZAP handler refused).
 *
 * Must never: wait for the asker (a reply its full queue cannot take is dropped and counted in
 * its results_dropped), or change anything it reports on.
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

		if (aggd_peer_is_sender(p) && p->hello && p->alive &&
		    (e = aggd_peer_pq(p, q->id)) && (e->state == PQ_SENT || e->state == PQ_RUNNING))
			hosts[nh++] = p->host;
		if (p->role == WIRE_ROLE_CLIENT && aggd_peer_sub(p, q->id))
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
void aggd_send_status(struct aggd *a, struct peer *to, uint64_t only_query)
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
	Weft__GraphStatus gs;

	if (!as || !asp || !qs || !qsp || !hosts || !running)
		goto out_free;
	weft__status_reply__init(&r);
	r.aggregator = a->name;
	r.has_rejected = true;
	/* the guard counts every connection gone without a message, refused keys included */
	r.rejected = a->rejected + aggd_guard_failed(a->guard) + aggd_parent_rejected(a);
	if (a->gs) {
		aggd_graph_status(a, &gs);
		r.graph = &gs;
	}
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
	aggd_env_init(a, &e);
	e.body_case = WEFT__ENVELOPE__BODY_STATUS_REPLY;
	e.status_reply = &r;
	if (aggd_peer_send(a, to, &e) == -EAGAIN)
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
