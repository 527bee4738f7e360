// SPDX-License-Identifier: Apache-2.0
/*
 * Graph batches on the wire (agent/wire_graph.h): struct graph <-> Weft__GraphBatch.
 *
 * Packing builds the protobuf-c tree over three flat arrays (one per kind of element, plus
 * their pointer arrays) instead of one allocation per element: a batch of 100,000 tasks is
 * six mallocs.  The tree borrows the graph's strings; it is checked with wire_validate()
 * (what the receiver's wire_decode() will check) before it is packed, so a sender never ships
 * what its aggregator would refuse.
 *
 * Unpacking trusts only what wire_decode() checked (ids, kinds, bounds, UTF-8) and copies
 * every string into the graph's arena.
 *
 * Must never: keep a pointer into the envelope, or allocate per element outside the graph.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "agent/wire_graph.h"

int wire_graph_pack(const struct wire_graph_meta *m, const struct graph *g, void **buf, size_t *len,
		    char *why, size_t whysz)
{
	Weft__GraphTask *tv = NULL, **tp = NULL;
	Weft__GraphEvent *ev = NULL, **ep = NULL;
	Weft__GraphEdge *dv = NULL, **dp = NULL;
	Weft__GraphBatch b;
	Weft__Envelope env;
	size_t n;
	void *p;
	int rc = -ENOMEM;

	if (why && whysz)
		why[0] = 0;
	if (!m || !g || !buf || !len)
		return -EINVAL;
	*buf = NULL;
	*len = 0;
	if (g->ntasks > WIRE_MAX_ELEMS || g->nevents > WIRE_MAX_ELEMS ||
	    g->nedges > WIRE_MAX_ELEMS) {
		snprintf(why, whysz, "a batch holds at most %u elements of each kind",
			 WIRE_MAX_ELEMS);
		return -EINVAL;
	}
	weft__graph_batch__init(&b);
	b.query_id = m->query_id;
	b.window = m->window;
	b.host = (char *)(m->host ? m->host : "");
	b.has_last = m->last;
	b.last = m->last;
	b.has_lost = m->lost != 0;
	b.lost = m->lost;
	if (m->aggs) {
		b.has_aggs = true;
		b.aggs.data = (uint8_t *)m->aggs;
		b.aggs.len = m->aggs_len;
	}
	if ((g->ntasks &&
	     (!(tv = calloc(g->ntasks, sizeof(*tv))) || !(tp = calloc(g->ntasks, sizeof(*tp))))) ||
	    (g->nevents && (!(ev = calloc(g->nevents, sizeof(*ev))) ||
			    !(ep = calloc(g->nevents, sizeof(*ep))))) ||
	    (g->nedges &&
	     (!(dv = calloc(g->nedges, sizeof(*dv))) || !(dp = calloc(g->nedges, sizeof(*dp))))))
		goto out;
	for (size_t i = 0; i < g->ntasks; i++) {
		const struct graph_task *k = &g->tasks[i];
		Weft__GraphTask *t = &tv[i];

		weft__graph_task__init(t);
		t->trace_hi = k->trace.hi;
		t->trace_lo = k->trace.lo;
		t->id = k->id;
		t->has_parent = k->parent != 0;
		t->parent = k->parent;
		t->service = (char *)(k->service && *k->service ? k->service : NULL);
		t->name = (char *)(k->name ? k->name : "");
		t->host = (char *)(k->host && *k->host ? k->host : NULL);
		t->has_pid = k->pid >= 0;
		t->pid = k->pid;
		t->has_tid = k->tid >= 0;
		t->tid = k->tid;
		t->start_ns = k->start;
		t->has_end_ns = !(m->open && m->open[i]);
		t->end_ns = k->end;
		t->has_status = k->status != GRAPH_STATUS_UNSET;
		t->status = (uint32_t)k->status;
		t->has_source = k->source != GRAPH_SRC_UNKNOWN;
		t->source = (uint32_t)k->source;
		t->attrs = (char *)(k->attrs && strcmp(k->attrs, "{}") ? k->attrs : NULL);
		tp[i] = t;
	}
	for (size_t i = 0; i < g->nevents; i++) {
		const struct graph_event *k = &g->events[i];
		Weft__GraphEvent *e = &ev[i];

		weft__graph_event__init(e);
		e->trace_hi = k->trace.hi;
		e->trace_lo = k->trace.lo;
		e->task = k->task;
		e->has_id = k->id != 0;
		e->id = k->id;
		e->time_ns = k->time;
		e->name = (char *)(k->name ? k->name : "");
		e->has_source = k->source != GRAPH_SRC_UNKNOWN;
		e->source = (uint32_t)k->source;
		e->attrs = (char *)(k->attrs && strcmp(k->attrs, "{}") ? k->attrs : NULL);
		ep[i] = e;
	}
	for (size_t i = 0; i < g->nedges; i++) {
		const struct graph_edge *k = &g->edges[i];
		Weft__GraphEdge *d = &dv[i];

		weft__graph_edge__init(d);
		d->trace_hi = k->trace.hi;
		d->trace_lo = k->trace.lo;
		d->kind = (uint32_t)k->kind;
		d->from_task = k->from_task;
		d->has_from_event = k->from_event != 0;
		d->from_event = k->from_event;
		d->to_task = k->to_task;
		d->has_to_event = k->to_event != 0;
		d->to_event = k->to_event;
		d->has_source = k->source != GRAPH_SRC_UNKNOWN;
		d->source = (uint32_t)k->source;
		dp[i] = d;
	}
	b.n_tasks = g->ntasks;
	b.tasks = tp;
	b.n_events = g->nevents;
	b.events = ep;
	b.n_edges = g->nedges;
	b.edges = dp;

	weft__envelope__init(&env);
	env.version = WIRE_VERSION;
	env.seq = 1;
	env.body_case = WEFT__ENVELOPE__BODY_GRAPH_BATCH;
	env.graph_batch = &b;
	if ((rc = wire_validate(&env, why, whysz)))
		goto out;
	n = weft__graph_batch__get_packed_size(&b);
	if (n + 32 > WIRE_MAX_BYTES) {
		snprintf(why, whysz, "a batch of %zu bytes (an envelope is at most %u)", n,
			 WIRE_MAX_BYTES);
		rc = -EMSGSIZE;
		goto out;
	}
	p = malloc(n ? n : 1);
	if (!p) {
		rc = -ENOMEM;
		goto out;
	}
	weft__graph_batch__pack(&b, p);
	*buf = p;
	*len = n;
	rc = 0;
out:
	if (rc == -ENOMEM && why && whysz)
		snprintf(why, whysz, "out of memory");
	free(tv);
	free(tp);
	free(ev);
	free(ep);
	free(dv);
	free(dp);
	return rc;
}

static const char *dup_or(struct graph *g, const char *s, const char *dflt)
{
	return graph_strdup(g, s && *s ? s : dflt);
}

int wire_graph_unpack(const Weft__GraphBatch *b, const char *host, struct graph *g, size_t *nopen,
		      char *why, size_t whysz)
{
	const char *h = graph_strdup(g, host ? host : "");
	size_t open = 0;

	if (why && whysz)
		why[0] = 0;
	if (!h)
		goto nomem;
	for (size_t i = 0; i < b->n_tasks; i++) {
		const Weft__GraphTask *t = b->tasks[i];
		struct graph_task k = {
			.trace = { t->trace_hi, t->trace_lo },
			.id = t->id,
			.parent = t->has_parent ? t->parent : 0,
			.pid = t->has_pid ? t->pid : -1,
			.tid = t->has_tid ? t->tid : -1,
			.start = t->start_ns,
			.end = t->has_end_ns ? t->end_ns : t->start_ns,
			.status = t->has_status ? (enum graph_status)t->status : GRAPH_STATUS_UNSET,
			.source = t->has_source ? (enum graph_source)t->source : GRAPH_SRC_UNKNOWN,
		};

		open += !t->has_end_ns;
		k.service = dup_or(g, t->service, "");
		k.name = dup_or(g, t->name, "");
		k.host = t->host && *t->host ? graph_strdup(g, t->host) : h;
		k.attrs = dup_or(g, t->attrs, "{}");
		if (!k.service || !k.name || !k.host || !k.attrs || !graph_add_task(g, &k))
			goto nomem;
	}
	for (size_t i = 0; i < b->n_events; i++) {
		const Weft__GraphEvent *v = b->events[i];
		struct graph_event k = {
			.trace = { v->trace_hi, v->trace_lo },
			.task = v->task,
			.id = v->has_id ? v->id : 0,
			.time = v->time_ns,
			.source = v->has_source ? (enum graph_source)v->source : GRAPH_SRC_UNKNOWN,
		};

		k.name = dup_or(g, v->name, "");
		k.attrs = dup_or(g, v->attrs, "{}");
		if (!k.name || !k.attrs || !graph_add_event(g, &k))
			goto nomem;
	}
	for (size_t i = 0; i < b->n_edges; i++) {
		const Weft__GraphEdge *d = b->edges[i];
		struct graph_edge k = {
			.trace = { d->trace_hi, d->trace_lo },
			.kind = (enum graph_edge_kind)d->kind,
			.from_task = d->from_task,
			.from_event = d->has_from_event ? d->from_event : 0,
			.to_task = d->to_task,
			.to_event = d->has_to_event ? d->to_event : 0,
			.source = d->has_source ? (enum graph_source)d->source : GRAPH_SRC_UNKNOWN,
		};

		if (!graph_add_edge(g, &k))
			goto nomem;
	}
	if (nopen)
		*nopen = open;
	return 0;
nomem:
	snprintf(why, whysz, "out of memory (or over %u elements of a kind)",
		 (unsigned)GRAPH_MAX_ELEMS);
	return -ENOMEM;
}
