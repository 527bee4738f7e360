/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Graph batches on the wire (weft.proto's GraphBatch; docs/protocol.md "Graph batches"): a
 * struct graph (graph/graph.h) packed into the body a sender spools, and a checked GraphBatch
 * turned back into a struct graph the aggregator stores.
 *
 * Ownership: wire_graph_pack() returns a malloc'd buffer (the caller frees it);
 * wire_graph_unpack() copies every string into the graph's arena, so the graph outlives the
 * envelope it came from.
 */
#ifndef WEFT_AGENT_WIRE_GRAPH_H
#define WEFT_AGENT_WIRE_GRAPH_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "agent/wire.h"
#include "graph/graph.h"

/* What a batch says besides its elements. */
struct wire_graph_meta {
	uint64_t query_id;
	uint64_t window;
	const char *host; /* the sender's host */
	bool last; /* its last batch of the query */
	uint64_t lost; /* elements recorded but not shipped */
	/* tasks[i] had not ended when the query did (NULL: all ended); the graph's end of such
	 * a task is not sent */
	const bool *open;
	const void *aggs; /* encoded struct graph_aggs (agent/graphcap.c), or NULL */
	size_t aggs_len;
};

/*
 * Packs the elements of g and m into a Weft__GraphBatch body (for the spool, and
 * wire_envelope_wrap()), checked as wire_decode() checks it.  Strings over GRAPH_MAX_STR or
 * not UTF-8 cannot occur in a struct graph (graph_strndup() cuts and mends them).  0, -EINVAL
 * (with why: a task of id 0, more than WIRE_MAX_ELEMS of a kind, ...), -EMSGSIZE (over
 * WIRE_MAX_BYTES: send smaller batches), -ENOMEM.
 */
int wire_graph_pack(const struct wire_graph_meta *m, const struct graph *g, void **buf, size_t *len,
		    char *why, size_t whysz);

/*
 * The elements of a decoded (so checked) batch into g (initialised by the caller; appended
 * to).  A task without host gets `host`; a task without end gets end = start and counts in
 * *nopen.  0, or -ENOMEM, -E2BIG (over GRAPH_MAX_ELEMS) with why.
 */
int wire_graph_unpack(const Weft__GraphBatch *b, const char *host, struct graph *g, size_t *nopen,
		      char *why, size_t whysz);

#endif
