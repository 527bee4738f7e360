/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The expected execution graphs of the three-tier test program (tests/workloads/wl_3tier.c),
 * checked against a graph store or one trace, however the graphs got there: an LTTng trace
 * imported (tests/runtime/test_graph_3tier.c), a live capture by `weft run`, or an
 * aggregator's stitching of three agents' pieces.  The structure is derived from what
 * wl_3tier does (its header comment; docs/graphs.md, "The three-tier test program"), never
 * from a capture:
 *
 *   per request, one trace of exactly these 4 tasks, each once:
 *     C  client/request        root (parent 0)
 *     F1 frontend/handle       parent C
 *     F2 frontend/call-backend parent F1
 *     B  backend/handle        parent F2
 *   3 events: "reply" in C, "parsed" in F1, "query" in B;
 *   edges: message C -> F1 and F2 -> B (no event ids), and (ge_3tier.parent_edges) parent
 *   C -> F1, F1 -> F2, F2 -> B; each exactly once;
 *   status ok (1) on all four, or error (2) on all four for the request that failed.
 *
 * ge_same_structure() compares two captures of the same run (the live one against the LTTng
 * one): the same tasks (ids, parents, types, statuses), events (task, name) and edges, times
 * and sources aside.
 *
 * Header-only, no test framework: every check returns 0, or -1 with why[] saying what is
 * wrong with which trace and element, so cmocka tests, cluster tests and tools can all use it.
 */
#ifndef WEFT_TEST_GRAPH_EXPECT_H
#define WEFT_TEST_GRAPH_EXPECT_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/graph.h"
#include "graph/store.h"

/* The tiers, in the order of ge_3tier.pid and .host. */
enum { GE_CLIENT, GE_FRONTEND, GE_BACKEND };

struct ge_3tier {
	size_t n; /* requests the client made */
	long error_req; /* the request (0-based) that failed; -1: none */
	/* the trace ids the client printed, n of them in request order; NULL: not checked */
	const struct graph_id128 *traces;
	/* the source of every element of the weft provider (GRAPH_SRC_LTTNG from an LTTng trace,
	 * GRAPH_SRC_WEFT live); GRAPH_SRC_UNKNOWN: not checked */
	enum graph_source source;
	int64_t pid[3]; /* of the client, frontend, backend; 0: not checked (tid = pid too) */
	const char *host[3]; /* their hosts; NULL: not checked */
	bool parent_edges; /* each parent has an explicit GRAPH_EDGE_PARENT edge to its child */
	bool one_clock; /* one clock for all: children inside parents, events inside tasks */
	/* elements of other sources (kernel edges, other tasks of the process) may be in the
	 * traces too: then only those of `source` (which must be set) are counted exactly */
	bool others_allowed;
};

static inline int ge_fail(char *why, size_t whysz, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static inline int ge_fail(char *why, size_t whysz, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, whysz, fmt, ap);
	va_end(ap);
	return -1;
}

/* Whether element source `s` is one the check counts. */
static inline bool ge_counted(const struct ge_3tier *x, enum graph_source s)
{
	return !x->others_allowed || s == x->source;
}

/*
 * Checks one trace (g: every element of one trace, as graph_store_load() gives it).  *failed
 * (if not NULL) says whether it was the failing request.
 */
static inline int ge_3tier_check_trace(const struct graph *g, const struct ge_3tier *x,
				       bool *failed, char *why, size_t whysz)
{
	static const char *const svc[4] = { "client", "frontend", "frontend", "backend" };
	static const char *const name[4] = { "request", "handle", "call-backend", "handle" };
	static const int tier[4] = { GE_CLIENT, GE_FRONTEND, GE_FRONTEND, GE_BACKEND };
	static const char *const evname[3] = { "reply", "parsed", "query" };
	static const int evtask[3] = { 0, 1, 3 }; /* C, F1, B */
	const struct graph_task *t[4] = { NULL, NULL, NULL, NULL };
	char tr[33];
	size_t ntasks = 0, nevents = 0, nedges = 0, want_edges;
	enum graph_status st;

	if (g->ntasks == 0)
		return ge_fail(why, whysz, "a trace without tasks");
	graph_id128_hex(g->tasks[0].trace, tr);
	if (x->others_allowed && x->source == GRAPH_SRC_UNKNOWN)
		return ge_fail(why, whysz, "others_allowed needs a source");
	for (size_t i = 0; i < g->ntasks; i++) {
		const struct graph_task *k = &g->tasks[i];
		int which = -1;

		if (!graph_id128_eq(k->trace, g->tasks[0].trace))
			return ge_fail(why, whysz, "trace %s: a task of another trace", tr);
		if (!ge_counted(x, k->source))
			continue;
		ntasks++;
		for (int j = 0; j < 4; j++)
			if (strcmp(k->service, svc[j]) == 0 && strcmp(k->name, name[j]) == 0)
				which = j;
		if (which < 0)
			return ge_fail(why, whysz, "trace %s: unexpected task %s/%s (%016llx)", tr,
				       k->service, k->name, (unsigned long long)k->id);
		if (t[which])
			return ge_fail(why, whysz, "trace %s: two tasks %s/%s", tr, k->service,
				       k->name);
		if (x->source != GRAPH_SRC_UNKNOWN && k->source != x->source)
			return ge_fail(why, whysz, "trace %s: task %s/%s has source %s, not %s", tr,
				       k->service, k->name, graph_source_name(k->source),
				       graph_source_name(x->source));
		t[which] = k;
	}
	if (ntasks != 4)
		return ge_fail(why, whysz, "trace %s: %zu tasks, not 4", tr, ntasks);
	for (int j = 0; j < 4; j++) {
		uint64_t want = j == 0 ? 0 : t[j - 1]->id;

		if (t[j]->id == 0 || t[j]->parent != want)
			return ge_fail(why, whysz,
				       "trace %s: %s/%s has parent %016llx, not %016llx", tr,
				       svc[j], name[j], (unsigned long long)t[j]->parent,
				       (unsigned long long)want);
		if (x->pid[tier[j]] && (t[j]->pid != x->pid[tier[j]] || t[j]->tid != t[j]->pid))
			return ge_fail(why, whysz,
				       "trace %s: %s/%s ran in pid %lld tid %lld, not %lld", tr,
				       svc[j], name[j], (long long)t[j]->pid, (long long)t[j]->tid,
				       (long long)x->pid[tier[j]]);
		if (x->host[tier[j]] && strcmp(t[j]->host, x->host[tier[j]]) != 0)
			return ge_fail(why, whysz, "trace %s: %s/%s ran on host '%s', not '%s'", tr,
				       svc[j], name[j], t[j]->host, x->host[tier[j]]);
		if (t[j]->end < t[j]->start)
			return ge_fail(why, whysz, "trace %s: %s/%s ends before it starts", tr,
				       svc[j], name[j]);
	}
	if (t[0]->id == t[1]->id || t[1]->id == t[2]->id || t[2]->id == t[3]->id ||
	    t[0]->id == t[2]->id || t[0]->id == t[3]->id || t[1]->id == t[3]->id)
		return ge_fail(why, whysz, "trace %s: two tasks share an id", tr);
	st = t[0]->status;
	if (st != GRAPH_STATUS_OK && st != GRAPH_STATUS_ERROR)
		return ge_fail(why, whysz, "trace %s: client/request has status %s", tr,
			       graph_status_name(st));
	for (int j = 1; j < 4; j++)
		if (t[j]->status != st)
			return ge_fail(why, whysz, "trace %s: %s/%s has status %s, client %s", tr,
				       svc[j], name[j], graph_status_name(t[j]->status),
				       graph_status_name(st));
	if (failed)
		*failed = st == GRAPH_STATUS_ERROR;

	/* events: exactly the three, each in its task */
	for (size_t i = 0; i < g->nevents; i++) {
		const struct graph_event *e = &g->events[i];
		int which = -1;

		if (!ge_counted(x, e->source))
			continue;
		nevents++;
		for (int j = 0; j < 3; j++)
			if (strcmp(e->name, evname[j]) == 0)
				which = j;
		if (which < 0 || e->task != t[evtask[which]]->id)
			return ge_fail(why, whysz,
				       "trace %s: unexpected event '%s' in task %016llx", tr,
				       e->name, (unsigned long long)e->task);
		if (x->source != GRAPH_SRC_UNKNOWN && e->source != x->source)
			return ge_fail(why, whysz, "trace %s: event '%s' has source %s", tr,
				       e->name, graph_source_name(e->source));
		for (size_t k = 0; k < i; k++)
			if (ge_counted(x, g->events[k].source) &&
			    strcmp(g->events[k].name, e->name) == 0)
				return ge_fail(why, whysz, "trace %s: event '%s' twice", tr,
					       e->name);
		if (x->one_clock &&
		    (e->time < t[evtask[which]]->start || e->time > t[evtask[which]]->end))
			return ge_fail(why, whysz, "trace %s: event '%s' outside its task", tr,
				       e->name);
	}
	if (nevents != 3)
		return ge_fail(why, whysz, "trace %s: %zu events, not 3", tr, nevents);

	/* edges: the two messages and (parent_edges) the three parents, each once */
	want_edges = x->parent_edges ? 5 : 2;
	for (size_t i = 0; i < g->nedges; i++) {
		const struct graph_edge *e = &g->edges[i];
		bool ok = false;

		if (!ge_counted(x, e->source))
			continue;
		nedges++;
		if (e->from_event == 0 && e->to_event == 0) {
			if (e->kind == GRAPH_EDGE_MESSAGE)
				ok = (e->from_task == t[0]->id && e->to_task == t[1]->id) ||
				     (e->from_task == t[2]->id && e->to_task == t[3]->id);
			else if (e->kind == GRAPH_EDGE_PARENT && x->parent_edges)
				for (int j = 1; j < 4; j++)
					ok |= e->from_task == t[j - 1]->id &&
					      e->to_task == t[j]->id;
		}
		if (!ok)
			return ge_fail(
				why, whysz,
				"trace %s: unexpected %s edge %016llx/%llu -> %016llx/%llu", tr,
				graph_edge_kind_name(e->kind), (unsigned long long)e->from_task,
				(unsigned long long)e->from_event, (unsigned long long)e->to_task,
				(unsigned long long)e->to_event);
		if (x->source != GRAPH_SRC_UNKNOWN && e->source != x->source)
			return ge_fail(why, whysz, "trace %s: %s edge has source %s", tr,
				       graph_edge_kind_name(e->kind), graph_source_name(e->source));
		for (size_t k = 0; k < i; k++) {
			const struct graph_edge *d = &g->edges[k];

			if (ge_counted(x, d->source) && d->kind == e->kind &&
			    d->from_task == e->from_task && d->to_task == e->to_task)
				return ge_fail(why, whysz, "trace %s: %s edge twice", tr,
					       graph_edge_kind_name(e->kind));
		}
	}
	if (nedges != want_edges)
		return ge_fail(why, whysz, "trace %s: %zu edges, not %zu", tr, nedges, want_edges);

	/* one clock: C starts first and ends last, each child inside its parent */
	if (x->one_clock)
		for (int j = 1; j < 4; j++)
			if (t[j]->start < t[j - 1]->start || t[j]->end > t[j - 1]->end)
				return ge_fail(why, whysz, "trace %s: %s/%s is not inside %s/%s",
					       tr, svc[j], name[j], svc[j - 1], name[j - 1]);
	return 0;
}

/*
 * Checks the store: exactly x->n traces hold a three-tier task (listed by each of the three
 * services), each one as above, exactly one failed (the request x->error_req, when the
 * client's trace ids are given) or none; with x->traces, they are exactly those.
 */
static inline int ge_3tier_check_store(struct graph_store *s, const struct ge_3tier *x, char *why,
				       size_t whysz)
{
	static const char *const services[3] = { "client", "frontend", "backend" };
	struct graph_trace_row *rows = NULL;
	struct graph_filter f = { 0 };
	size_t nfailed = 0;
	ssize_t n;
	int rc = 0;

	/* the traces each tier appears in: the same n */
	for (int k = 0; k < 3 && rc == 0; k++) {
		f.service = services[k];
		f.limit = x->n + 16; /* room to see too many */
		free(rows);
		rows = NULL;
		n = graph_store_list(s, &f, &rows, why, whysz);
		if (n < 0)
			return -1;
		if ((size_t)n != x->n)
			rc = ge_fail(why, whysz, "%zd traces with a %s task, not %zu", n,
				     services[k], x->n);
	}
	for (ssize_t i = 0; rc == 0 && i < n; i++) {
		struct graph g;
		char hex[33];
		bool failed = false;

		graph_id128_hex(rows[i].trace, hex);
		graph_init(&g);
		if (graph_store_load(s, hex, &g, why, whysz) != 0)
			rc = -1;
		else
			rc = ge_3tier_check_trace(&g, x, &failed, why, whysz);
		graph_free(&g);
		nfailed += failed;
		if (rc == 0 && x->traces) {
			size_t r = 0;

			while (r < x->n && !graph_id128_eq(x->traces[r], rows[i].trace))
				r++;
			if (r == x->n)
				rc = ge_fail(why, whysz, "trace %s: not one the client made", hex);
			else if (failed != ((long)r == x->error_req))
				rc = ge_fail(why, whysz, "trace %s (request %zu): %s", hex, r,
					     failed ? "failed" : "did not fail");
		}
	}
	free(rows);
	if (rc == 0 && nfailed != (x->error_req >= 0 ? 1u : 0u))
		rc = ge_fail(why, whysz, "%zu failed requests, not %d", nfailed,
			     x->error_req >= 0 ? 1 : 0);
	return rc;
}

/*
 * The trace ids in wl_3tier client's output ("wl_3tier: request R trace HEX task HEX ok"),
 * into ids[0, n) by request number.  0, or -1 if a request's line is missing or bad.
 */
static inline int ge_3tier_client_traces(const char *out, struct graph_id128 *ids, size_t n)
{
	size_t seen = 0;
	const char *s = out;

	while ((s = strstr(s, "wl_3tier: request ")) != NULL) {
		unsigned long r;
		char hex[33];

		if (sscanf(s, "wl_3tier: request %lu trace %32[0-9a-f]", &r, hex) != 2 || r >= n ||
		    graph_id128_parse_hex(hex, strlen(hex), &ids[r]) != 0)
			return -1;
		seen++;
		s++;
	}
	return seen == n ? 0 : -1;
}

/* Task `id` of g, or NULL. */
static inline const struct graph_task *ge_task(const struct graph *g, uint64_t id)
{
	for (size_t i = 0; i < g->ntasks; i++)
		if (g->tasks[i].id == id)
			return &g->tasks[i];
	return NULL;
}

/*
 * Whether two captures of one trace (a and b: one trace each) have the same structure: the
 * same tasks (id, parent, service, name, status), the same events (task, name, as many of
 * each) and the same edges (kind and both ends), whatever their times, hosts and sources.
 * 0, or -1 with the first difference in why[].
 */
static inline int ge_same_structure(const struct graph *a, const struct graph *b, char *why,
				    size_t whysz)
{
	if (a->ntasks != b->ntasks || a->nevents != b->nevents || a->nedges != b->nedges)
		return ge_fail(why, whysz, "%zu/%zu/%zu tasks/events/edges against %zu/%zu/%zu",
			       a->ntasks, a->nevents, a->nedges, b->ntasks, b->nevents, b->nedges);
	for (size_t i = 0; i < a->ntasks; i++) {
		const struct graph_task *p = &a->tasks[i], *q = ge_task(b, p->id);

		if (!q || q->parent != p->parent || strcmp(q->service, p->service) != 0 ||
		    strcmp(q->name, p->name) != 0 || q->status != p->status)
			return ge_fail(why, whysz, "task %016llx (%s/%s) differs or is missing",
				       (unsigned long long)p->id, p->service, p->name);
	}
	for (size_t i = 0; i < a->nevents; i++) {
		const struct graph_event *p = &a->events[i];
		size_t na = 0, nb = 0;

		for (size_t k = 0; k < a->nevents; k++)
			na += a->events[k].task == p->task && !strcmp(a->events[k].name, p->name);
		for (size_t k = 0; k < b->nevents; k++)
			nb += b->events[k].task == p->task && !strcmp(b->events[k].name, p->name);
		if (na != nb)
			return ge_fail(why, whysz, "event '%s' of task %016llx: %zu against %zu",
				       p->name, (unsigned long long)p->task, na, nb);
	}
	for (size_t i = 0; i < a->nedges; i++) {
		const struct graph_edge *p = &a->edges[i];
		size_t na = 0, nb = 0;

#define GE_SAME_EDGE(e)                                                                       \
	((e).kind == p->kind && (e).from_task == p->from_task && (e).to_task == p->to_task && \
	 (e).from_event == p->from_event && (e).to_event == p->to_event)
		for (size_t k = 0; k < a->nedges; k++)
			na += GE_SAME_EDGE(a->edges[k]);
		for (size_t k = 0; k < b->nedges; k++)
			nb += GE_SAME_EDGE(b->edges[k]);
#undef GE_SAME_EDGE
		if (na != nb)
			return ge_fail(why, whysz, "%s edge %016llx -> %016llx: %zu against %zu",
				       graph_edge_kind_name(p->kind),
				       (unsigned long long)p->from_task,
				       (unsigned long long)p->to_task, na, nb);
	}
	return 0;
}

/*
 * Whether every trace of store a is in store b with the same structure (ge_same_structure),
 * and b has no trace a lacks among the first `limit` of each (newest first).
 */
static inline int ge_stores_same(struct graph_store *a, struct graph_store *b, size_t limit,
				 char *why, size_t whysz)
{
	struct graph_trace_row *ra = NULL, *rb = NULL;
	struct graph_filter f = { .limit = limit };
	ssize_t na = graph_store_list(a, &f, &ra, why, whysz), nb;
	int rc = 0;

	if (na < 0)
		return -1;
	nb = graph_store_list(b, &f, &rb, why, whysz);
	if (nb < 0) {
		free(ra);
		return -1;
	}
	if (na != nb)
		rc = ge_fail(why, whysz, "%zd traces against %zd", na, nb);
	for (ssize_t i = 0; rc == 0 && i < na; i++) {
		struct graph ga, gb;
		char hex[33], sub[512];

		graph_id128_hex(ra[i].trace, hex);
		graph_init(&ga);
		graph_init(&gb);
		if (graph_store_load(a, hex, &ga, why, whysz) != 0)
			rc = -1;
		else if (graph_store_load(b, hex, &gb, why, whysz) != 0)
			rc = ge_fail(why, whysz, "trace %s: not in the second store", hex);
		else if (ge_same_structure(&ga, &gb, sub, sizeof(sub)) != 0)
			rc = ge_fail(why, whysz, "trace %s: %s", hex, sub);
		graph_free(&ga);
		graph_free(&gb);
	}
	free(ra);
	free(rb);
	return rc;
}

/* Drops g's parent edges that say what a task's parent field says (an LTTng import has
 * them, a live capture does not): what is left compares across the two. */
static inline void ge_parent_edges_implicit(struct graph *g)
{
	size_t k = 0;

	for (size_t i = 0; i < g->nedges; i++) {
		const struct graph_edge *e = &g->edges[i];
		const struct graph_task *t = ge_task(g, e->to_task);

		if (e->kind == GRAPH_EDGE_PARENT && !e->from_event && !e->to_event && t &&
		    t->parent == e->from_task)
			continue;
		g->edges[k++] = *e;
	}
	g->nedges = k;
}

/* ge_stores_same(), parent edges taken as implicit in both (ge_parent_edges_implicit()). */
static inline int ge_stores_same_implicit(struct graph_store *a, struct graph_store *b,
					  size_t limit, char *why, size_t whysz)
{
	struct graph_trace_row *ra = NULL, *rb = NULL;
	struct graph_filter f = { .limit = limit };
	ssize_t na = graph_store_list(a, &f, &ra, why, whysz), nb;
	int rc = 0;

	if (na < 0)
		return -1;
	nb = graph_store_list(b, &f, &rb, why, whysz);
	if (nb < 0) {
		free(ra);
		return -1;
	}
	if (na != nb)
		rc = ge_fail(why, whysz, "%zd traces against %zd", na, nb);
	for (ssize_t i = 0; rc == 0 && i < na; i++) {
		struct graph ga, gb;
		char hex[33], sub[512];

		graph_id128_hex(ra[i].trace, hex);
		graph_init(&ga);
		graph_init(&gb);
		if (graph_store_load(a, hex, &ga, why, whysz) != 0) {
			rc = -1;
		} else if (graph_store_load(b, hex, &gb, why, whysz) != 0) {
			rc = ge_fail(why, whysz, "trace %s: not in the second store", hex);
		} else {
			ge_parent_edges_implicit(&ga);
			ge_parent_edges_implicit(&gb);
			if (ge_same_structure(&ga, &gb, sub, sizeof(sub)) != 0)
				rc = ge_fail(why, whysz, "trace %s: %s", hex, sub);
		}
		graph_free(&ga);
		graph_free(&gb);
	}
	free(ra);
	free(rb);
	return rc;
}

#endif
