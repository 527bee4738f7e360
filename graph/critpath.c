// SPDX-License-Identifier: Apache-2.0
/*
 * One trace as a tree, and its critical path (critpath.h says what each means).
 *
 * The tree is built in arrays indexed by node, never with pointers between tasks: a sorted
 * (id, node) index resolves edge ends by binary search, a parent array holds the links, and
 * the children are a CSR list (first[], child[]).  Cycles are found with the three-colour walk
 * up the parent links (each node is walked once), so building is O(n log n) whatever the
 * input claims.
 *
 * The critical path follows Jaeger UI's "last finishing child" walk: children are first
 * clipped to their parent's (clipped) span, and a child entirely outside it is dropped with
 * its subtree, since nothing the parent waited on can lie outside the parent.  The walk then
 * runs as a loop with one cursor per node into its children sorted by clipped end, latest
 * first: returning to a node with a bound only moves its cursor forward, so the whole walk is
 * O(n) after the sort and needs no recursion.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "graph/critpath.h"

struct id_node {
	uint64_t id;
	size_t node;
};

static int cmp_id_node(const void *a, const void *b)
{
	const struct id_node *x = a, *y = b;

	if (x->id != y->id)
		return x->id < y->id ? -1 : 1;
	return x->node < y->node ? -1 : x->node > y->node;
}

static size_t find_node(const struct id_node *ids, size_t n, uint64_t id)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (ids[mid].id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && ids[lo].id == id ? ids[lo].node : GRAPH_TREE_NONE;
}

size_t graph_tree_find(const struct graph *g, const struct graph_tree *t, uint64_t id)
{
	(void)g;
	/* the id index lives just after the roots, in their block (see graph_tree_build) */
	return find_node((const struct id_node *)(const void *)(t->roots + t->n), t->n, id);
}

struct sort_ctx {
	const struct graph *g;
	const size_t *task;
};

/* Children and roots in the order lanes are drawn: by start, then id. */
static int cmp_by_start(const void *a, const void *b, void *arg)
{
	const struct sort_ctx *c = arg;
	const struct graph_task *x = &c->g->tasks[c->task[*(const size_t *)a]];
	const struct graph_task *y = &c->g->tasks[c->task[*(const size_t *)b]];

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	if (x->id != y->id)
		return x->id < y->id ? -1 : 1;
	return 0;
}

void graph_tree_free(struct graph_tree *t)
{
	free(t->task);
	free(t->parent);
	free(t->link);
	free(t->depth);
	free(t->first);
	free(t->child);
	free(t->order);
	free(t->roots);
	memset(t, 0, sizeof(*t));
}

static void set_parent(struct graph_tree *t, size_t node, size_t parent, enum graph_tree_link l)
{
	if (node == GRAPH_TREE_NONE || parent == GRAPH_TREE_NONE || node == parent)
		return;
	if (t->link[node] != GRAPH_LINK_NONE)
		return; /* an earlier, stronger link holds */
	t->parent[node] = parent;
	t->link[node] = l;
}

/* Whether edge e arrives where its task began: at the task itself, or at its first named
 * event. */
static bool begins(const struct graph *g, const struct graph_tree *t, const struct id_node *ids,
		   const size_t *first_ev, const struct graph_edge *e)
{
	size_t k;

	if (!e->to_event)
		return true;
	k = find_node(ids, t->n, e->to_task);
	return k != GRAPH_TREE_NONE && first_ev[k] != GRAPH_TREE_NONE &&
	       g->events[first_ev[k]].id == e->to_event;
}

int graph_tree_build(const struct graph *g, struct graph_id128 trace, struct graph_tree *t)
{
	struct sort_ctx sc;
	struct id_node *ids;
	unsigned char *state = NULL;
	size_t n = 0, i, k, *stack = NULL, *first_ev = NULL, sp, nord;

	memset(t, 0, sizeof(*t));
	for (i = 0; i < g->ntasks; i++)
		n += graph_id128_eq(g->tasks[i].trace, trace);
	t->n = n;
	t->task = malloc((n + 1) * sizeof(*t->task));
	t->parent = malloc((n + 1) * sizeof(*t->parent));
	t->link = calloc(n + 1, sizeof(*t->link));
	t->depth = calloc(n + 1, sizeof(*t->depth));
	t->first = calloc(n + 2, sizeof(*t->first));
	t->child = malloc((n + 1) * sizeof(*t->child));
	t->order = malloc((n + 1) * sizeof(*t->order));
	/* roots, then the id index, in one block */
	t->roots = malloc((n + 1) * sizeof(*t->roots) + (n + 1) * sizeof(*ids));
	state = calloc(n + 1, 1);
	stack = malloc((n + 1) * sizeof(*stack));
	first_ev = malloc((n + 1) * sizeof(*first_ev));
	if (!t->task || !t->parent || !t->link || !t->depth || !t->first || !t->child ||
	    !t->order || !t->roots || !state || !stack || !first_ev)
		goto out_nomem;
	ids = (struct id_node *)(void *)(t->roots + n);
	k = 0;
	for (i = 0; i < g->ntasks; i++) {
		if (!graph_id128_eq(g->tasks[i].trace, trace))
			continue;
		t->task[k] = i;
		t->parent[k] = GRAPH_TREE_NONE;
		first_ev[k] = GRAPH_TREE_NONE;
		ids[k].id = g->tasks[i].id;
		ids[k].node = k;
		k++;
	}
	qsort(ids, n, sizeof(*ids), cmp_id_node);

	/*
	 * Each task's first named event (X-Trace names events): an edge that names the event it
	 * arrives at makes a tree link only if that event is where the task began.  A reply
	 * arriving in the middle of its client, or a join back into a task, is no parent.
	 */
	for (i = 0; i < g->nevents; i++) {
		const struct graph_event *e = &g->events[i];
		size_t k2;

		if (!e->id || !graph_id128_eq(e->trace, trace))
			continue;
		k2 = find_node(ids, n, e->task);
		if (k2 == GRAPH_TREE_NONE)
			continue;
		if (first_ev[k2] == GRAPH_TREE_NONE || e->time < g->events[first_ev[k2]].time ||
		    (e->time == g->events[first_ev[k2]].time && e->id < g->events[first_ev[k2]].id))
			first_ev[k2] = i;
	}

	/* the links, strongest first: a message, the task's parent, a fork, a parent edge */
	for (i = 0; i < g->nedges; i++) {
		const struct graph_edge *e = &g->edges[i];

		if (e->kind == GRAPH_EDGE_MESSAGE && graph_id128_eq(e->trace, trace) &&
		    begins(g, t, ids, first_ev, e))
			set_parent(t, find_node(ids, n, e->to_task),
				   find_node(ids, n, e->from_task), GRAPH_LINK_MESSAGE);
	}
	for (k = 0; k < n; k++) {
		const struct graph_task *tk = &g->tasks[t->task[k]];

		if (tk->parent)
			set_parent(t, k, find_node(ids, n, tk->parent), GRAPH_LINK_PARENT);
	}
	for (int pass = 0; pass < 4; pass++) {
		static const enum graph_edge_kind kinds[] = { GRAPH_EDGE_FORK, GRAPH_EDGE_PARENT,
							      GRAPH_EDGE_EVENT,
							      GRAPH_EDGE_FOLLOWS };
		static const enum graph_tree_link links[] = { GRAPH_LINK_FORK, GRAPH_LINK_PARENT,
							      GRAPH_LINK_EVENT,
							      GRAPH_LINK_FOLLOWS };

		for (i = 0; i < g->nedges; i++) {
			const struct graph_edge *e = &g->edges[i];
			size_t to, from;

			if (e->kind != kinds[pass] || !graph_id128_eq(e->trace, trace))
				continue;
			to = find_node(ids, n, e->to_task);
			from = find_node(ids, n, e->from_task);
			if (to == GRAPH_TREE_NONE || from == GRAPH_TREE_NONE ||
			    !begins(g, t, ids, first_ev, e))
				continue;
			if (e->kind == GRAPH_EDGE_EVENT &&
			    g->tasks[t->task[from]].start > g->tasks[t->task[to]].start)
				continue;
			set_parent(t, to, from, links[pass]);
		}
	}

	/* cut cycles: 0 unseen, 1 on the path being walked, 2 done */
	for (k = 0; k < n; k++) {
		size_t j = k, last = GRAPH_TREE_NONE;

		while (j != GRAPH_TREE_NONE && state[j] == 0) {
			state[j] = 1;
			last = j;
			j = t->parent[j];
		}
		if (j != GRAPH_TREE_NONE && state[j] == 1) {
			t->parent[last] = GRAPH_TREE_NONE;
			t->link[last] = GRAPH_LINK_NONE;
		}
		for (j = k; j != GRAPH_TREE_NONE && state[j] == 1; j = t->parent[j])
			state[j] = 2;
	}

	/* children as CSR, roots */
	for (k = 0; k < n; k++) {
		if (t->parent[k] != GRAPH_TREE_NONE)
			t->first[t->parent[k] + 1]++;
	}
	for (k = 0; k < n; k++)
		t->first[k + 1] += t->first[k];
	memset(stack, 0, (n + 1) * sizeof(*stack)); /* fill positions */
	for (k = 0; k < n; k++) {
		size_t p = t->parent[k];

		if (p == GRAPH_TREE_NONE) {
			const struct graph_task *tk = &g->tasks[t->task[k]];

			t->roots[t->nroots++] = k;
			if (tk->parent && find_node(ids, n, tk->parent) == GRAPH_TREE_NONE)
				t->orphans++;
		} else {
			t->child[t->first[p] + stack[p]++] = k;
		}
	}
	sc.g = g;
	sc.task = t->task;
	for (k = 0; k < n; k++)
		qsort_r(t->child + t->first[k], t->first[k + 1] - t->first[k], sizeof(size_t),
			cmp_by_start, &sc);
	qsort_r(t->roots, t->nroots, sizeof(size_t), cmp_by_start, &sc);

	/* depth-first order for the lanes, iteratively; depth along the way */
	nord = 0;
	for (size_t r = 0; r < t->nroots; r++) {
		sp = 0;
		stack[sp++] = t->roots[r];
		t->depth[t->roots[r]] = 0;
		while (sp) {
			size_t v = stack[--sp];

			t->order[nord++] = v;
			/* pushed in reverse so the earliest child comes out first */
			for (size_t c = t->first[v + 1]; c > t->first[v]; c--) {
				size_t ch = t->child[c - 1];

				t->depth[ch] = t->depth[v] + 1;
				stack[sp++] = ch;
			}
		}
	}
	free(state);
	free(stack);
	free(first_ev);
	return 0;

out_nomem:
	free(state);
	free(stack);
	free(first_ev);
	graph_tree_free(t);
	return -ENOMEM;
}

/* ---- the critical path ---- */

struct cp_ctx {
	const int64_t *cstart, *cend;
	const struct graph *g;
	const size_t *task;
};

/* Latest clipped end first; ties: the earlier start (the longer wait), then the lower id. */
static int cmp_by_end_desc(const void *a, const void *b, void *arg)
{
	const struct cp_ctx *c = arg;
	size_t x = *(const size_t *)a, y = *(const size_t *)b;
	uint64_t ix, iy;

	if (c->cend[x] != c->cend[y])
		return c->cend[x] > c->cend[y] ? -1 : 1;
	if (c->cstart[x] != c->cstart[y])
		return c->cstart[x] < c->cstart[y] ? -1 : 1;
	ix = c->g->tasks[c->task[x]].id;
	iy = c->g->tasks[c->task[y]].id;
	return ix < iy ? -1 : ix > iy;
}

/* The task the walk starts from: a true root (no parent named) ending last. */
static size_t pick_root(const struct graph *g, const struct graph_tree *t)
{
	size_t best = GRAPH_TREE_NONE;

	for (int pass = 0; pass < 2 && best == GRAPH_TREE_NONE; pass++) {
		for (size_t r = 0; r < t->nroots; r++) {
			const struct graph_task *x = &g->tasks[t->task[t->roots[r]]], *b;

			if (pass == 0 && x->parent)
				continue;
			if (best == GRAPH_TREE_NONE) {
				best = t->roots[r];
				continue;
			}
			b = &g->tasks[t->task[best]];
			if (x->end > b->end ||
			    (x->end == b->end &&
			     (x->start < b->start || (x->start == b->start && x->id < b->id))))
				best = t->roots[r];
		}
	}
	return best;
}

static void push_seg(struct graph_critpath *cp, size_t task, int64_t from, int64_t to)
{
	if (to <= from)
		return;
	cp->segs[cp->n].task = task;
	cp->segs[cp->n].from = from;
	cp->segs[cp->n].to = to;
	cp->n++;
}

int graph_critpath_tree(const struct graph *g, const struct graph_tree *t,
			struct graph_critpath *cp)
{
	int64_t *cstart = NULL, *cend = NULL, limit = 0;
	bool *dropped = NULL, has_limit = false;
	size_t *sorted = NULL, *cursor = NULL, root, v, steps;
	struct cp_ctx cc;
	int rc = -ENOMEM;

	memset(cp, 0, sizeof(*cp));
	if (t->n == 0)
		return -ENOENT;
	cstart = malloc(t->n * sizeof(*cstart));
	cend = malloc(t->n * sizeof(*cend));
	dropped = calloc(t->n, sizeof(*dropped));
	sorted = malloc(t->n * sizeof(*sorted));
	cursor = calloc(t->n, sizeof(*cursor));
	cp->segs = malloc((2 * t->n + 2) * sizeof(*cp->segs));
	if (!cstart || !cend || !dropped || !sorted || !cursor || !cp->segs)
		goto out;

	/* clip every task to its parent's clipped span, parents first (the lane order is) */
	for (size_t o = 0; o < t->n; o++) {
		size_t k = t->order[o], p = t->parent[k];
		const struct graph_task *tk = &g->tasks[t->task[k]];

		cstart[k] = tk->start;
		cend[k] = tk->end;
		if (p == GRAPH_TREE_NONE)
			continue;
		if (dropped[p] || tk->end < cstart[p] || tk->start > cend[p]) {
			dropped[k] = true;
			continue;
		}
		if (cstart[k] < cstart[p])
			cstart[k] = cstart[p];
		if (cend[k] > cend[p])
			cend[k] = cend[p];
	}
	memcpy(sorted, t->child, t->n * sizeof(*sorted));
	cc.cstart = cstart;
	cc.cend = cend;
	cc.g = g;
	cc.task = t->task;
	for (size_t k = 0; k < t->n; k++) {
		qsort_r(sorted + t->first[k], t->first[k + 1] - t->first[k], sizeof(size_t),
			cmp_by_end_desc, &cc);
		cursor[k] = t->first[k];
	}

	root = pick_root(g, t);
	cp->root = t->task[root];
	v = root;
	/* each step either descends to a child not yet visited or returns to a parent: at most
	 * 2n steps; the bound is a guard, not a limit the walk is expected to reach */
	for (steps = 0; steps <= 2 * t->n + 1; steps++) {
		size_t pick = GRAPH_TREE_NONE;
		int64_t upto = has_limit ? limit : cend[v];

		while (cursor[v] < t->first[v + 1]) {
			size_t c = sorted[cursor[v]];

			if (dropped[c] || t->link[c] == GRAPH_LINK_FOLLOWS ||
			    (has_limit && cend[c] >= limit)) {
				cursor[v]++;
				continue;
			}
			pick = c;
			cursor[v]++;
			break;
		}
		if (pick != GRAPH_TREE_NONE) {
			push_seg(cp, t->task[v], cend[pick], upto);
			v = pick;
			has_limit = false;
			continue;
		}
		push_seg(cp, t->task[v], cstart[v], upto);
		if (v == root || t->parent[v] == GRAPH_TREE_NONE)
			break;
		limit = cstart[v];
		has_limit = true;
		v = t->parent[v];
	}
	/* the walk went backwards in time */
	for (size_t i = 0; i < cp->n / 2; i++) {
		struct graph_critseg s = cp->segs[i];

		cp->segs[i] = cp->segs[cp->n - 1 - i];
		cp->segs[cp->n - 1 - i] = s;
	}
	rc = 0;
out:
	free(cstart);
	free(cend);
	free(dropped);
	free(sorted);
	free(cursor);
	if (rc)
		graph_critpath_free(cp);
	return rc;
}

int graph_critpath(const struct graph *g, struct graph_id128 trace, struct graph_critpath *cp)
{
	struct graph_tree t;
	int rc;

	memset(cp, 0, sizeof(*cp));
	rc = graph_tree_build(g, trace, &t);
	if (rc)
		return rc;
	rc = graph_critpath_tree(g, &t, cp);
	graph_tree_free(&t);
	return rc;
}

void graph_critpath_free(struct graph_critpath *cp)
{
	free(cp->segs);
	memset(cp, 0, sizeof(*cp));
}
