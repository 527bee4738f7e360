/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The shape of one trace and its critical path (docs/graphs.md, "The critical path").
 *
 * graph_tree_build() turns the edges of one trace into a tree: every task gets at most one
 * tree parent, the task that caused it, found in this order:
 *   1. the sender of a message edge to it (an RPC's client for its server, a producer for
 *      its consumer): the message is the causal proof, even when the source also names a
 *      parent;
 *   2. its parent (graph_task.parent), when that task is in the trace;
 *   3. the creator of a fork edge to it, then the source of a parent edge to it;
 *   4. the task of the event an event edge comes from, when that task started no later
 *      (X-Trace: the event that began this thread's run; a join back into a task that
 *      started earlier is not a parent);
 *   5. the cause of a follows-from edge (drawn as a child, but never waited on).
 * An edge that names the event it arrives at links only if that event is the task's first
 * (where the task began): a reply arriving in the middle of its client is no parent.  Wakeup
 * edges make no tree link.  A cycle (hostile or broken input) is cut where it closes.  Clock-skew correction
 * (graph/skew.h), the critical path and the terminal view (graph/show.h) all read this tree,
 * so they agree on who is whose parent.
 *
 * The critical path is the "last finishing child" walk (Jaeger UI's, after Uber's CRISP):
 * from the end of the root, go to the dependency that finished last; from its start, back in
 * its parent, to the dependency that finished last before that point; and so on until the
 * root's start.  The segments (task, from, to) tile the root's span.  Follows-from children
 * are not dependencies (their cause does not wait for them).  The walk is a loop over
 * an explicit state, never recursion: a trace may be a million tasks deep.
 */
#ifndef WEFT_GRAPH_CRITPATH_H
#define WEFT_GRAPH_CRITPATH_H
#include <stddef.h>
#include <stdint.h>

#include "graph/graph.h"

#define GRAPH_TREE_NONE ((size_t)-1)

/* How a task's tree parent was found. */
enum graph_tree_link {
	GRAPH_LINK_NONE = 0, /* a root */
	GRAPH_LINK_MESSAGE, /* a message edge from the parent */
	GRAPH_LINK_PARENT, /* graph_task.parent, or a parent edge */
	GRAPH_LINK_FORK, /* a fork edge */
	GRAPH_LINK_EVENT, /* an event edge from an event of the parent */
	GRAPH_LINK_FOLLOWS, /* a follows-from edge: a child the parent does not wait for */
};

/* The tasks of one trace as a tree.  Nodes are numbered 0..n-1 in the order the tasks appear
 * in the graph; task[i] is the node's index in g->tasks. */
struct graph_tree {
	size_t n;
	size_t *task; /* node -> index in g->tasks */
	size_t *parent; /* node -> parent node, GRAPH_TREE_NONE for a root */
	enum graph_tree_link *link; /* node -> how its parent was found */
	size_t *depth; /* node -> number of ancestors */
	size_t *first, *child; /* children of node i: child[first[i] .. first[i + 1]), by
				  (start, id) */
	size_t *order; /* every node once, depth first (children by start): lanes */
	size_t nroots;
	size_t *roots; /* nodes without a tree parent, by (start, id) */
	size_t orphans; /* roots whose graph_task.parent names a task not in the trace */
};

/* Builds the tree of trace `trace` of g.  0 or -ENOMEM; an unknown trace gives n == 0. */
int graph_tree_build(const struct graph *g, struct graph_id128 trace, struct graph_tree *t);
void graph_tree_free(struct graph_tree *t);
/* The node of task id `id`, or GRAPH_TREE_NONE. */
size_t graph_tree_find(const struct graph *g, const struct graph_tree *t, uint64_t id);

/* One piece of the critical path: task (index in g->tasks) was what the request waited on
 * during [from, to) (ns since the epoch). */
struct graph_critseg {
	size_t task;
	int64_t from, to;
};

struct graph_critpath {
	struct graph_critseg *segs; /* in time order; empty segments are left out */
	size_t n;
	size_t root; /* index in g->tasks of the task the walk started from */
};

/*
 * The critical path of trace `trace` of g (times as they are in g: correct clock skew first).
 * The root is the trace's only task without a parent; with several, the one that ends last
 * (ties: the earlier start, then the lower id).  0, -ENOENT (no task of that trace) or
 * -ENOMEM.
 */
int graph_critpath(const struct graph *g, struct graph_id128 trace, struct graph_critpath *cp);
/* The same on a tree already built. */
int graph_critpath_tree(const struct graph *g, const struct graph_tree *t,
			struct graph_critpath *cp);
void graph_critpath_free(struct graph_critpath *cp);

#endif
