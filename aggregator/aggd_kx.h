/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Kernel message edges across hosts, matched by the aggregator (aggd_kx.c; docs/graphs.md,
 * "Across hosts"): a batch's kernel tasks are joined with those of earlier batches of the
 * same query by their socket data, before the batch is stored.
 */
#ifndef WEFT_AGGREGATOR_AGGD_KX_H
#define WEFT_AGGREGATOR_AGGD_KX_H
#include <stdbool.h>
#include <stdint.h>
#include "graph/graph.h"

struct aggd_kx;

struct aggd_kx_stats {
	uint64_t matched; /* message edges added (sends matched with receives of another batch) */
	uint64_t split; /* matches not joined: the trace to move had pieces stored already */
	uint64_t bad; /* kernel socket attributes that are not what an agent writes */
	uint64_t dropped; /* remembered sends, receives or moves forgotten before their time */
};

/* Whether earlier batches of the query stored elements of trace t. */
typedef bool (*aggd_kx_stored_fn)(void *arg, struct graph_id128 t);

struct aggd_kx *aggd_kx_new(void); /* NULL when out of memory */
void aggd_kx_free(struct aggd_kx *k);
void aggd_kx_stats(const struct aggd_kx *k, struct aggd_kx_stats *st);

/*
 * Rewrites g (a batch of query q, about to be stored) as aggd_kx.c says: moved traces, message
 * edges added.  k NULL: nothing.  0 or -ENOMEM (g may then be partly rewritten: still valid).
 */
int aggd_kx_batch(struct aggd_kx *k, uint64_t q, struct graph *g, aggd_kx_stored_fn stored,
		  void *arg);

#endif
