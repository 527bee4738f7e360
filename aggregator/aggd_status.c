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
#include "base/text.h"
#include "aggregator/aggd_int.h"

static int str_cmp(const void *x, const void *y)
{
	return strcmp(*(char *const *)x, *(char *const *)y);
}

static Weft__QueryStatus *query_status(struct aggd *a, struct query *q, Weft__QueryStatus *qs,
				       char ***hosts_out, Weft__VmSync *vs)
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
	qs->n_only_hosts = q->nonly;
	qs->only_hosts = q->only;
	qs->vm_sync = aggd_vm_state(a, q, vs);
	qs->has_rows = qs->has_rows_dropped = q->stream;
	qs->rows = q->rows;
	qs->rows_dropped = q->rows_dropped;
	qs->has_rows_kept = qs->has_rows_kept_bytes = q->stream;
	qs->rows_kept_bytes = q->keep_bytes;
	qs->rows_kept = 0;
	for (size_t i = 0; i < q->nkeep; i++)
		qs->rows_kept += q->keep[(q->keep_head + i) % q->keep_cap].rows;
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

/* What a StatusReply points to, owned here (status_free()). */
struct status_build {
	Weft__StatusReply r;
	Weft__AgentStatus *as, **asp;
	Weft__QueryStatus *qs, **qsp;
	Weft__VmSync *vs;
	char ***hosts;
	uint64_t **running;
	size_t na, nqs;
	Weft__GraphStatus gs;
	Weft__GraphForwardStatus gf;
	char gf_url[1024], gf_err[256];
};

static void status_free(struct status_build *b)
{
	for (size_t i = 0; b->running && i < b->na; i++)
		free(b->running[i]);
	for (size_t i = 0; b->hosts && i < b->nqs; i++)
		free(b->hosts[i]);
	free(b->running);
	free(b->hosts);
	free(b->as);
	free(b->asp);
	free(b->qs);
	free(b->qsp);
	free(b->vs);
}

/* A StatusReply: every agent and child aggregator, and the queries (one, or all), sorted
 * (by host, by id) so that it reads the same every time.  Its strings are the daemon's:
 * valid until the daemon changes.  0 or -ENOMEM. */
static int status_build(struct aggd *a, uint64_t only_query, struct status_build *b)
{
	Weft__StatusReply *r = &b->r;
	uint64_t now = aggd_mono_ns();

	memset(b, 0, sizeof(*b));
	b->as = calloc(a->npeers + 1, sizeof(*b->as));
	b->asp = calloc(a->npeers + 1, sizeof(*b->asp));
	b->qs = calloc(a->nq + 1, sizeof(*b->qs));
	b->qsp = calloc(a->nq + 1, sizeof(*b->qsp));
	b->vs = calloc(a->nq + 1, sizeof(*b->vs));
	b->hosts = calloc(a->nq + 1, sizeof(*b->hosts));
	b->running = calloc(a->npeers + 1, sizeof(*b->running));
	if (!b->as || !b->asp || !b->qs || !b->qsp || !b->vs || !b->hosts || !b->running) {
		status_free(b);
		return -ENOMEM;
	}
	weft__status_reply__init(r);
	r->aggregator = a->name;
	r->has_rejected = true;
	/* the guard counts every connection gone without a message, refused keys included */
	r->rejected = a->rejected + aggd_guard_failed(a->guard) + aggd_parent_rejected(a);
	if (a->gs) {
		struct aggd_gfwd_stats fs;

		aggd_graph_status(a, &b->gs);
		r->graph = &b->gs;
		if (aggd_gfwd_stats(a, &fs, b->gf_url, sizeof(b->gf_url), b->gf_err,
				    sizeof(b->gf_err))) {
			Weft__GraphForwardStatus *f = &b->gf;

			weft__graph_forward_status__init(f);
			f->url = b->gf_url;
			if (b->gf_err[0])
				f->last_error = b->gf_err;
#define FSET(x)            \
	f->has_##x = true; \
	f->x = fs.x
			FSET(sent);
			FSET(requests);
			FSET(retried);
			FSET(spooled);
			FSET(queued);
			FSET(pending);
			FSET(dropped);
			FSET(rejected);
			FSET(repeated);
			FSET(late);
			FSET(forgotten);
#undef FSET
			b->gs.forward = f;
		}
	}
	for (struct peer *p = a->peers; p && !only_query; p = p->next) {
		Weft__AgentStatus *s = &b->as[b->na];
		size_t nr = 0;

		if (!p->hello || !aggd_peer_is_sender(p))
			continue;
		weft__agent_status__init(s);
		s->host = p->host;
		s->version = p->version;
		s->kernel = p->kernel;
		s->scope = p->scope;
		s->n_features = p->nfeatures;
		s->features = p->features;
		s->alive = p->alive;
		s->last_seen_ms = (now - p->last_seen) / 1000000ULL;
		b->running[b->na] = calloc(p->npq + 1, sizeof(uint64_t));
		for (size_t i = 0; b->running[b->na] && i < p->npq; i++)
			if (p->pq[i].state == PQ_SENT || p->pq[i].state == PQ_RUNNING)
				b->running[b->na][nr++] = p->pq[i].id;
		s->n_running = nr;
		s->running = b->running[b->na];
		s->role = (char *)wire_role_name(p->role);
		s->has_spooled = true;
		s->spooled = p->spooled;
		b->asp[b->na] = s;
		b->na++;
	}
	for (size_t i = 0; i < a->nq; i++) {
		if (only_query && a->q[i]->id != only_query)
			continue;
		b->qsp[b->nqs] =
			query_status(a, a->q[i], &b->qs[b->nqs], &b->hosts[b->nqs], &b->vs[b->nqs]);
		b->nqs++;
	}
	qsort(b->asp, b->na, sizeof(*b->asp), agent_status_cmp);
	qsort(b->qsp, b->nqs, sizeof(*b->qsp), query_status_cmp);
	r->n_agents = b->na;
	r->agents = b->asp;
	r->n_queries = b->nqs;
	r->queries = b->qsp;
	return 0;
}

void aggd_send_status(struct aggd *a, struct peer *to, uint64_t only_query, uint64_t in_reply_to)
{
	struct status_build b;
	Weft__Envelope e;

	if (status_build(a, only_query, &b))
		return;
	b.r.has_in_reply_to = in_reply_to != 0;
	b.r.in_reply_to = in_reply_to;
	aggd_env_init(a, &e);
	e.body_case = WEFT__ENVELOPE__BODY_STATUS_REPLY;
	e.status_reply = &b.r;
	if (aggd_peer_send(a, to, &e) == -EAGAIN)
		to->results_dropped++;
	status_free(&b);
}

char *aggd_status_json_all(struct aggd *a)
{
	struct status_build b;
	char *buf = NULL;
	size_t len = 0;
	FILE *f;

	if (status_build(a, 0, &b))
		return NULL;
	f = open_memstream(&buf, &len);
	if (f) {
		aggd_status_json(&b.r, f);
		if (fclose(f)) {
			free(buf);
			buf = NULL;
		}
	}
	status_free(&b);
	return buf;
}

static const char *query_state(const Weft__QueryStatus *q)
{
	if (q->ended)
		return "ended";
	return "running";
}

void aggd_status_json(const Weft__StatusReply *r, FILE *f)
{
	fputs("{\"type\":\"status\",\"aggregator\":", f);
	text_json_fputs(f, r->aggregator);
	fprintf(f, ",\"rejected\":%" PRIu64, r->rejected);
	if (r->graph) {
		const Weft__GraphStatus *g = r->graph;

		fputs(",\"graph\":{\"path\":", f);
		text_json_fputs(f, g->path);
		fprintf(f,
			",\"batches\":%" PRIu64 ",\"tasks\":%" PRIu64 ",\"events\":%" PRIu64
			",\"edges\":%" PRIu64 ",\"replaced\":%" PRIu64 ",\"rejected\":%" PRIu64
			",\"failed\":%" PRIu64 ",\"lost\":%" PRIu64 ",\"checked\":%" PRIu64
			",\"incomplete\":%" PRIu64 ",\"kernel_matched\":%" PRIu64
			",\"kernel_split\":%" PRIu64 ",\"kernel_bad\":%" PRIu64
			",\"kernel_dropped\":%" PRIu64 ",\"retained\":%" PRIu64,
			g->batches, g->tasks, g->events, g->edges, g->replaced, g->rejected,
			g->failed, g->lost, g->checked, g->incomplete, g->kernel_matched,
			g->kernel_split, g->kernel_bad, g->kernel_dropped, g->retained);
		if (g->has_max_age_ns)
			fprintf(f, ",\"max_age_ns\":%" PRIu64, g->max_age_ns);
		if (g->has_max_bytes)
			fprintf(f, ",\"max_bytes\":%" PRIu64, g->max_bytes);
		if (g->forward) {
			const Weft__GraphForwardStatus *w = g->forward;

			fputs(",\"forward\":{\"url\":", f);
			text_json_fputs(f, w->url);
			fprintf(f,
				",\"sent\":%" PRIu64 ",\"requests\":%" PRIu64
				",\"retried\":%" PRIu64 ",\"spooled\":%" PRIu64
				",\"queued\":%" PRIu64 ",\"pending\":%" PRIu64
				",\"dropped\":%" PRIu64 ",\"rejected\":%" PRIu64
				",\"repeated\":%" PRIu64 ",\"late\":%" PRIu64
				",\"forgotten\":%" PRIu64 ",\"last_error\":",
				w->sent, w->requests, w->retried, w->spooled, w->queued, w->pending,
				w->dropped, w->rejected, w->repeated, w->late, w->forgotten);
			text_json_fputs(f, w->last_error ? w->last_error : "");
			fputc('}', f);
		}
		fputc('}', f);
	}
	fputs(",\"agents\":[", f);
	for (size_t i = 0; i < r->n_agents; i++) {
		const Weft__AgentStatus *a = r->agents[i];

		fputs(i ? ",{\"host\":" : "{\"host\":", f);
		text_json_fputs(f, a->host);
		fputs(",\"role\":", f);
		text_json_fputs(f, a->role ? a->role : "agent");
		fputs(",\"version\":", f);
		text_json_fputs(f, a->version);
		fputs(",\"kernel\":", f);
		text_json_fputs(f, a->kernel);
		fputs(",\"scope\":", f); /* the agent's --scope; null: its whole machine */
		if (a->scope && *a->scope)
			text_json_fputs(f, a->scope);
		else
			fputs("null", f);
		fprintf(f,
			",\"alive\":%s,\"last_seen_ms\":%" PRIu64 ",\"spooled\":%" PRIu64
			",\"running\":[",
			a->alive ? "true" : "false", a->last_seen_ms, a->spooled);
		for (size_t j = 0; j < a->n_running; j++)
			fprintf(f, "%s%" PRIu64, j ? "," : "", a->running[j]);
		fputs("],\"features\":[", f);
		for (size_t j = 0; j < a->n_features; j++) {
			if (j)
				fputc(',', f);
			text_json_fputs(f, a->features[j]);
		}
		fputs("]}", f);
	}
	fputs("],\"queries\":[", f);
	for (size_t i = 0; i < r->n_queries; i++) {
		const Weft__QueryStatus *q = r->queries[i];

		fprintf(f,
			"%s{\"id\":%" PRIu64 ",\"state\":\"%s\",\"windows\":%" PRIu64
			",\"revisions\":%" PRIu64 ",\"late_dropped\":%" PRIu64
			",\"subscribers\":%" PRIu64 ",\"started_realtime_ns\":%" PRIu64
			",\"end_realtime_ns\":%" PRIu64 ",\"every_ns\":%" PRIu64 ",\"query\":",
			i ? "," : "", q->query_id, query_state(q), q->windows, q->revisions,
			q->late_dropped, q->subscribers, q->started_realtime_ns, q->end_realtime_ns,
			q->every_ns);
		text_json_fputs(f, q->query);
		fputs(",\"hosts\":[", f);
		for (size_t j = 0; j < q->n_hosts; j++) {
			if (j)
				fputc(',', f);
			text_json_fputs(f, q->hosts[j]);
		}
		fputs("],\"errors\":[", f);
		for (size_t j = 0; j < q->n_errors; j++) {
			if (j)
				fputc(',', f);
			text_json_fputs(f, q->errors[j]);
		}
		fputc(']', f);
		if (q->n_only_hosts) { /* weft vm sync's sides: the agents it is limited to */
			fputs(",\"only_hosts\":[", f);
			for (size_t j = 0; j < q->n_only_hosts; j++) {
				if (j)
					fputc(',', f);
				text_json_fputs(f, q->only_hosts[j]);
			}
			fputc(']', f);
		}
		if (q->vm_sync) {
			fputs(",\"vm_sync\":", f);
			aggd_vm_sync_json(q->vm_sync, f);
		}
		if (q->has_rows) /* a stream query: rows relayed, and not */
			fprintf(f, ",\"rows\":%" PRIu64 ",\"rows_dropped\":%" PRIu64, q->rows,
				q->rows_dropped);
		if (q->has_rows_kept) /* ... and those kept for a client that comes back */
			fprintf(f, ",\"rows_kept\":%" PRIu64 ",\"rows_kept_bytes\":%" PRIu64,
				q->rows_kept, q->rows_kept_bytes);
		fputc('}', f);
	}
	fputs("]}\n", f);
}
