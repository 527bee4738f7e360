/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Clock-skew correction (docs/graphs.md, "Clock skew"): hosts' clocks disagree, so a server
 * may appear to answer before its client asked.  Where an RPC proves the order, the server
 * host's side of the trace is moved, following Zipkin's rules (zipkin-lens clock-skew.js,
 * formerly zipkin2.internal.CorrectForClockSkew):
 *
 *   - only a client -> server pair on two different, known hosts is looked at: the span kinds
 *     say client and server, or a message edge joins them and no kind says otherwise
 *     (producer -> consumer hand-offs are never corrected, as in Zipkin);
 *   - nothing is done when the server starts after the client;
 *   - otherwise, when either has no duration ("one way"), or the client ended before the
 *     server (async), the server is moved to start 1 µs after the client; else the network
 *     latency is taken as half the difference of the durations and the server is moved to
 *     start that long after the client;
 *   - the shift applies to the server and to every task of the server's host below it in the
 *     tree (graph/critpath.h's tree), and to their events;
 *   - a trace with no root, or with several, is left alone (Zipkin skips headless traces and
 *     duplicate roots: there is no clock to call the reference).
 *
 * Each shift is added to graph_task.skew, so the correction is visible (weft graph show
 * prints it).  Correcting twice changes nothing: after one pass no server precedes its
 * client.
 */
#ifndef WEFT_GRAPH_SKEW_H
#define WEFT_GRAPH_SKEW_H
#include <stddef.h>
#include <stdint.h>

#include "graph/graph.h"

/* The least network latency assumed, as Zipkin's 1 µs. */
#define GRAPH_SKEW_MIN_LATENCY_NS 1000

struct graph_skew_stats {
	size_t corrections; /* client -> server pairs found skewed */
	size_t tasks; /* tasks moved */
	size_t events; /* events moved */
	size_t skipped; /* traces left alone for want of exactly one root */
};

/* Corrects trace `trace` of g in place (stats added into *st, which may be NULL).  0 or
 * -ENOMEM; a trace with no task is no error. */
int graph_skew_correct(struct graph *g, struct graph_id128 trace, struct graph_skew_stats *st);
/* Every trace of g; sorts g first (graph_sort()), so a context index-aligned with g no
 * longer is: correct a loaded trace with graph_skew_correct(), which moves but never reorders. */
int graph_skew_correct_all(struct graph *g, struct graph_skew_stats *st);

#endif
