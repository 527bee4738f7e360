/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Graph capture: the agent side of a graph query (`from ... graph`, docs/language.md).  The
 * kernel part of the query writes one fixed record per element (struct weft_graph_rec,
 * kernel/weft_abi.h) into the ring buffer; graphcap assembles them into execution-graph
 * elements (graph/graph.h) and, per window, hands out what finished:
 *
 *   weft:task_begin / weft:task_end   paired per (trace, task) in a bounded table of open
 *                                     tasks (a begin that finds it full evicts the oldest,
 *                                     counted); an end without a begin is counted, dropped;
 *   weft:event                        attached to its task (held with the trace);
 *   weft:edge                         kept with its trace;
 *   span(...) instances               a task each, of its thread: service = the process's
 *                                     comm, name = the span's probe; ids made here, unique
 *                                     per host (a random instance id mixed in); nested spans
 *                                     of one thread are child tasks (interval containment),
 *                                     a span inside an open weft task of the same thread is
 *                                     that task's child (and joins its trace);
 *   kernel:sockets sends, receives    buffered per thread and socket; an exchange (a run of
 *                                     calls one way, then the other) is a task: receive
 *                                     first, a server task that joins the trace of the send
 *                                     it read (graph/kmsg.c match, a message edge); send
 *                                     first, a client task, child of the server task open on
 *                                     its thread or the root of a new trace; spans of the
 *                                     thread nest inside (docs/graphs.md, "Kernel edges").
 *
 * Host, pid and tid are filled; times are converted from CLOCK_MONOTONIC to ns since the Unix
 * epoch.  A trace is finished when none of its tasks is still open here; graphcap_drain()
 * then adds it to the aggregates (every trace: exact context) and keeps it whole if the head
 * sample selects it (graph_sample_head()) or it is an outlier (a task above its type's p99 as
 * the capture's own sketch knows it, an event or edge rarer than GRAPH_RARE_SHARE, an error
 * status).  Traces with open tasks wait, up to max_traces of them and max_age_ns (then they
 * are drained as they are, their open tasks dropped and counted).
 *
 * Ownership: graphcap copies what it needs from each record; the graphs and aggs that
 * graphcap_drain() fills are the caller's (cleared or appended to: see below).  Not
 * thread-safe: one thread records and drains.  Nothing here exits or prints.
 */
#ifndef WEFT_AGENT_GRAPHCAP_H
#define WEFT_AGENT_GRAPHCAP_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "compiler/plan.h"
#include "graph/aggs.h"
#include "graph/graph.h"

/* Held at most: open tasks (begun, not ended; and kernel:sockets' exchanges, remembered tasks
 * and sends, wakeups, per this), and unfinished traces.  The tables grow as they fill, to
 * these; a kernel:sockets capture holds one to two seconds of requests in them, so these keep
 * up with some 65,000 requests a second. */
#define GRAPHCAP_DEFAULT_OPEN 131072
#define GRAPHCAP_DEFAULT_TRACES 131072
#define GRAPHCAP_DEFAULT_MAX_AGE_NS (60ull * 1000000000ull) /* a trace open that long: drained */

struct graphcap_opts {
	size_t sz; /* sizeof(struct graphcap_opts) */
	const char *host; /* the host name tasks carry (NULL: gethostname) */
	uint64_t instance; /* mixed into the ids made here (0: random, from getrandom()) */
	double sample; /* head-sample rate in (0, 1]; 0 or < 0: the plan's (`graph sample P%`) */
	uint32_t max_open; /* 0: GRAPHCAP_DEFAULT_OPEN */
	uint32_t max_traces; /* 0: GRAPHCAP_DEFAULT_TRACES */
	uint64_t max_age_ns; /* 0: GRAPHCAP_DEFAULT_MAX_AGE_NS */
	bool keep_all; /* keep every finished trace (no sampling decision at all) */
	/* Time moves by CLOCK_MONOTONIC too, not only by the records: at a drain, "now" is at
	 * least the clock, so on a host gone idle the last exchanges and spans complete once
	 * they are GRAPHCAP_SPAN_HOLD_NS old instead of waiting for a newer record or the end.
	 * For live captures (the caller consumed the ring buffer just before the drain); a
	 * test feeding records of its own times leaves it off. */
	bool live_clock;
};

/* Totals since graphcap_new(). */
struct graphcap_stats {
	uint64_t records; /* ring-buffer records taken */
	uint64_t bad; /* records refused (wrong size, unknown kind, zero ids) */
	uint64_t tasks, events, edges; /* finished elements made */
	uint64_t open_evicted; /* open tasks pushed out of a full table */
	uint64_t end_without_begin; /* a task_end whose begin was never seen */
	uint64_t orphans; /* events and edges dropped: their trace was never seen to begin here */
	uint64_t
		unfinished; /* tasks still open when their trace was drained by age or at the end */
	uint64_t traces_seen, kept_head, kept_outlier; /* the sampling decisions */
	uint64_t traces_held; /* traces waiting for open tasks now */
	/* kernel:sched and kernel:process records that made no element: no task on the cause's
	 * thread (weft; for a wakeup or fork also span or kernel task, found at the drain) or
	 * none on the event's, no task of the woken thread within 10 s, or the two ends in
	 * different traces */
	uint64_t kernel_unowned;
	uint64_t kernel_pending_full; /* wakeups and forks lost: the pending table was full */
};

struct graphcap;

/* p: the graph query's plan (p->graph); NULL with errno on failure. */
struct graphcap *graphcap_new(const struct plan *p, const struct graphcap_opts *o);
void graphcap_free(struct graphcap *c);

/* One ring-buffer record, as agent_row_fn gets it (after struct weft_rec_hdr): 0, or -EINVAL
 * for a malformed record (counted in `bad`) or -ENOMEM. */
int graphcap_record(struct graphcap *c, const void *rec, size_t len);

/*
 * Finished traces out: the kept ones appended to *kept (graph_init()ed by the caller; the
 * caller may graph_clear() it between drains), the aggregates of every finished trace added
 * into *aggs (which may be NULL: nothing is aggregated then, for keep_all captures).  With
 * `final`, every trace is drained, open tasks dropped and counted (the query ended).
 * Returns the number of traces drained, or -errno.
 */
int graphcap_drain(struct graphcap *c, bool final, struct graph *kept, struct graph_aggs *aggs);

void graphcap_stats(const struct graphcap *c, struct graphcap_stats *st);

#endif
