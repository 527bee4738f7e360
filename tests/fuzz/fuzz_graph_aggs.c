// SPDX-License-Identifier: Apache-2.0
/*
 * libFuzzer target: graph_aggs_decode() on arbitrary bytes (GraphBatch.aggs arrives from the
 * network).  Aggregates it accepts must encode and decode again to the same bytes.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "graph/aggs.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct graph_aggs a, b;
	char why[256];
	void *e1 = NULL, *e2 = NULL;
	size_t l1 = 0, l2 = 0;

	graph_aggs_init(&a);
	graph_aggs_init(&b);
	if (graph_aggs_decode(&a, data, size, why, sizeof(why)) == 0) {
		if (graph_aggs_encode(&a, &e1, &l1) ||
		    graph_aggs_decode(&b, e1, l1, why, sizeof(why)) ||
		    graph_aggs_encode(&b, &e2, &l2))
			abort(); /* what we write we must read */
		if (l1 != l2 || memcmp(e1, e2, l1) != 0)
			abort();
	}
	free(e1);
	free(e2);
	graph_aggs_free(&a);
	graph_aggs_free(&b);
	return 0;
}
