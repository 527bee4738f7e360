// SPDX-License-Identifier: Apache-2.0
/*
 * Clock-skew correction, after Zipkin's (skew.h states the rules; docs/graphs.md explains
 * them for users).
 *
 * One pass per trace over the tree of graph/critpath.h, parents before children, with an
 * explicit stack (no recursion: a trace may be arbitrarily deep).  Each stack entry carries
 * the shift its subtree inherits: the host it belongs to and the nanoseconds to add.  At a
 * node, the inherited shift is applied if the node is on that host; then the node is compared
 * with its tree parent, whose times are already final, and a shift of its own is applied if
 * the pair proves one; the node passes on its own host's total shift if it had one, else what
 * it inherited.  Zipkin passes on only the latest shift of a server that also inherited one;
 * passing the sum keeps every task of that host on the same clock, and the two agree in every
 * other case.
 *
 * Span kinds are read from the task's attributes ("kind" or "span.kind": client, server,
 * producer, consumer, in any case, with or without OTLP's SPAN_KIND_ prefix), parsed once per
 * task with jansson.  Events are moved in one pass at the end, by the total shift of their
 * task, found by binary search.
 */
#include <errno.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "graph/critpath.h"
#include "graph/skew.h"

enum span_kind { KIND_UNKNOWN = 0, KIND_CLIENT, KIND_SERVER, KIND_PRODUCER, KIND_CONSUMER };

static enum span_kind kind_of_text(const char *s)
{
	if (!strncasecmp(s, "SPAN_KIND_", 10))
		s += 10;
	if (!strcasecmp(s, "client"))
		return KIND_CLIENT;
	if (!strcasecmp(s, "server"))
		return KIND_SERVER;
	if (!strcasecmp(s, "producer"))
		return KIND_PRODUCER;
	if (!strcasecmp(s, "consumer"))
		return KIND_CONSUMER;
	return KIND_UNKNOWN;
}

static enum span_kind task_kind(const struct graph_task *t)
{
	static const char *const keys[] = { "kind", "span.kind" };
	enum span_kind k = KIND_UNKNOWN;
	json_t *o;

	/* cheap test first: most tasks of most sources have no kind at all */
	if (!t->attrs || !strstr(t->attrs, "kind"))
		return KIND_UNKNOWN;
	o = json_loads(t->attrs, JSON_DECODE_ANY, NULL);
	if (!json_is_object(o)) {
		json_decref(o);
		return KIND_UNKNOWN;
	}
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]) && k == KIND_UNKNOWN; i++) {
		json_t *v = json_object_get(o, keys[i]);

		if (json_is_string(v))
			k = kind_of_text(json_string_value(v));
	}
	json_decref(o);
	return k;
}

/*
 * The shift (ns to add to the server) that the pair client -> server proves, or 0.
 * Zipkin's getClockSkew(), in nanoseconds and with the sign of graph_task.skew.
 */
static int64_t pair_shift(const struct graph_task *c, const struct graph_task *s, enum span_kind ck,
			  enum span_kind sk, enum graph_tree_link link)
{
	int64_t cdur, sdur, latency;
	bool rpc;

	if (ck != KIND_UNKNOWN || sk != KIND_UNKNOWN)
		rpc = (ck == KIND_CLIENT || (ck == KIND_UNKNOWN && link == GRAPH_LINK_MESSAGE)) &&
		      (sk == KIND_SERVER || (sk == KIND_UNKNOWN && link == GRAPH_LINK_MESSAGE));
	else
		rpc = link == GRAPH_LINK_MESSAGE;
	if (!rpc || !c->start || !s->start)
		return 0;
	if (s->start > c->start)
		return 0; /* the server started after the client: nothing to see */
	if (!c->host[0] || !s->host[0] || !strcmp(c->host, s->host))
		return 0; /* one host, one clock: an instrumentation bug, not skew */
	cdur = c->end - c->start;
	sdur = s->end - s->start;
	if (!cdur || !sdur || cdur < sdur)
		/* one-way, or the client did not wait: the server at least 1 µs later */
		return c->start - s->start + GRAPH_SKEW_MIN_LATENCY_NS;
	latency = (cdur - sdur) / 2;
	return c->start + latency - s->start;
}

struct frame {
	size_t node;
	const char *host; /* the host the inherited shift belongs to; NULL: none */
	int64_t shift;
};

struct id_shift {
	uint64_t id;
	int64_t shift;
};

static int cmp_id_shift(const void *a, const void *b)
{
	const struct id_shift *x = a, *y = b;

	return x->id < y->id ? -1 : x->id > y->id;
}

static void move_task(struct graph_task *t, int64_t d)
{
	t->start += d;
	t->end += d;
	t->skew += d;
}

int graph_skew_correct(struct graph *g, struct graph_id128 trace, struct graph_skew_stats *st)
{
	struct graph_skew_stats local = { 0 };
	struct graph_tree t;
	struct frame *stack = NULL;
	int64_t *total = NULL;
	unsigned char *kind = NULL;
	struct id_shift *moved = NULL;
	size_t sp = 0, nmoved = 0, ntrue_roots = 0;
	int rc;

	rc = graph_tree_build(g, trace, &t);
	if (rc)
		return rc;
	if (t.n == 0)
		goto out;
	for (size_t r = 0; r < t.nroots; r++)
		ntrue_roots += g->tasks[t.task[t.roots[r]]].parent == 0;
	if (ntrue_roots != 1) {
		local.skipped++;
		goto out;
	}
	rc = -ENOMEM;
	stack = malloc(t.n * sizeof(*stack));
	total = calloc(t.n, sizeof(*total));
	kind = malloc(t.n);
	if (!stack || !total || !kind)
		goto out;
	for (size_t k = 0; k < t.n; k++)
		kind[k] = (unsigned char)task_kind(&g->tasks[t.task[k]]);

	/* every root (an orphan too, as Zipkin hangs it under the root) starts with no shift */
	for (size_t r = t.nroots; r > 0; r--)
		stack[sp++] = (struct frame){ .node = t.roots[r - 1] };
	while (sp) {
		struct frame f = stack[--sp];
		struct graph_task *s = &g->tasks[t.task[f.node]];
		size_t p = t.parent[f.node];
		const char *host = f.host;
		int64_t pass = f.shift, own = 0;

		if (f.host && f.shift && !strcmp(f.host, s->host)) {
			move_task(s, f.shift);
			total[f.node] += f.shift;
		}
		if (p != GRAPH_TREE_NONE)
			own = pair_shift(&g->tasks[t.task[p]], s, kind[p], kind[f.node],
					 t.link[f.node]);
		if (own) {
			move_task(s, own);
			total[f.node] += own;
			local.corrections++;
			host = s->host;
			pass = total[f.node];
		}
		for (size_t c = t.first[f.node + 1]; c > t.first[f.node]; c--)
			stack[sp++] = (struct frame){ .node = t.child[c - 1],
						      .host = host,
						      .shift = pass };
	}

	for (size_t k = 0; k < t.n; k++)
		nmoved += total[k] != 0;
	local.tasks = nmoved;
	if (!nmoved) {
		rc = 0;
		goto out;
	}
	moved = malloc(nmoved * sizeof(*moved));
	if (!moved)
		goto out;
	nmoved = 0;
	for (size_t k = 0; k < t.n; k++) {
		if (total[k])
			moved[nmoved++] = (struct id_shift){ .id = g->tasks[t.task[k]].id,
							     .shift = total[k] };
	}
	qsort(moved, nmoved, sizeof(*moved), cmp_id_shift);
	for (size_t i = 0; i < g->nevents; i++) {
		struct graph_event *e = &g->events[i];
		struct id_shift key = { .id = e->task }, *m;

		if (!graph_id128_eq(e->trace, trace))
			continue;
		m = bsearch(&key, moved, nmoved, sizeof(*moved), cmp_id_shift);
		if (m) {
			e->time += m->shift;
			local.events++;
		}
	}
	rc = 0;
out:
	if (st && !rc) {
		st->corrections += local.corrections;
		st->tasks += local.tasks;
		st->events += local.events;
		st->skipped += local.skipped;
	}
	free(stack);
	free(total);
	free(kind);
	free(moved);
	graph_tree_free(&t);
	return rc;
}

int graph_skew_correct_all(struct graph *g, struct graph_skew_stats *st)
{
	size_t ti = 0, ei = 0, di = 0;

	/* sorted by trace, each trace is one run of each array: a view of those runs is
	 * corrected alone, so a batch of many traces costs O(n log n), not O(traces * n) */
	graph_sort(g);
	while (ti < g->ntasks) {
		struct graph_id128 tr = g->tasks[ti].trace;
		struct graph view;
		int rc;

		while (ei < g->nevents && graph_id128_cmp(g->events[ei].trace, tr) < 0)
			ei++;
		while (di < g->nedges && graph_id128_cmp(g->edges[di].trace, tr) < 0)
			di++;
		memset(&view, 0, sizeof(view));
		view.tasks = g->tasks + ti;
		while (ti + view.ntasks < g->ntasks &&
		       graph_id128_eq(g->tasks[ti + view.ntasks].trace, tr))
			view.ntasks++;
		view.events = g->events + ei;
		while (ei + view.nevents < g->nevents &&
		       graph_id128_eq(g->events[ei + view.nevents].trace, tr))
			view.nevents++;
		view.edges = g->edges + di;
		while (di + view.nedges < g->nedges &&
		       graph_id128_eq(g->edges[di + view.nedges].trace, tr))
			view.nedges++;
		rc = graph_skew_correct(&view, tr, st);
		if (rc)
			return rc;
		ti += view.ntasks;
		ei += view.nevents;
		di += view.nedges;
	}
	return 0;
}
