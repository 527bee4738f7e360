// SPDX-License-Identifier: Apache-2.0
/*
 * Stream queries on a cluster (docs/protocol.md "Row batches"): a select without aggregates
 * runs on every agent like any query, its windows close on Partials of no groups, and its
 * rows come in RowBatches, which the aggregator checks against the query's plan and relays
 * to the query's subscribers as they come.  It keeps no rows: a batch is settled (and
 * acknowledged after the next checkpoint) once relayed, so an agent's spool resends only what
 * the aggregator has not taken.
 *
 * A stream's subscriptions outlive its last window (until the query is forgotten, 10 minutes
 * after its end): an agent late for that window still sends its last rows, with `last`, which
 * the clients wait for (tools/weft_cluster.h, tool_rows_wait).
 *
 * Must never: wait for a client (a batch a client's full queue cannot take is dropped for that
 * client and its rows counted in its sub's rows_dropped, which its next batch and Result say),
 * or relay a batch that does not fit the plan (refused and counted in `rejected`).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include "aggregator/aggd.h"
#include "agent/result.h"
#include "base/log.h"
#include "aggregator/aggd_int.h"

static void settle(struct aggd *a, struct peer *p, uint64_t seq)
{
	p->upto = seq;
	p->ack_due = a->acks_due = true;
}

static void refuse(struct aggd *a, struct peer *p, const Weft__RowBatch *b, const char *why)
{
	a->rejected++;
	log_warn("aggregator: %s: row batch of query %" PRIu64 " window %" PRIu64 " refused: %s",
		 aggd_peer_label(p), b->query_id, b->window, why);
}

/* Whether b's cells are those of q's plan: its column count, and per row as many texts as
 * the plan has text columns (wire_decode() checked rows x columns = ints + texts). */
static bool fits_plan(const struct query *q, const Weft__RowBatch *b, char *why, size_t whysz)
{
	uint64_t rows = b->has_rows ? b->rows : 0, ntext = 0;

	if (!rows)
		return true;
	if (!b->has_columns || b->columns != (uint32_t)q->plan->ncols) {
		snprintf(why, whysz, "%" PRIu32 " columns, the query has %d", b->columns,
			 q->plan->ncols);
		return false;
	}
	for (int c = 0; c < q->plan->ncols; c++)
		ntext += agent_col_is_text(q->plan, c);
	if (b->n_texts != rows * ntext) {
		snprintf(why, whysz,
			 "%zu text cells for %" PRIu64 " rows of %" PRIu64 " text columns",
			 b->n_texts, rows, ntext);
		return false;
	}
	return true;
}

void aggd_on_row_batch(struct aggd *a, struct peer *p, const Weft__Envelope *env)
{
	const Weft__RowBatch *b = env->row_batch;
	uint64_t rows = b->has_rows ? b->rows : 0;
	struct query *q;
	size_t nsubs = 0;
	char why[256];

	if (env->seq <= p->upto) {
		/* relayed already (a repeat): acknowledged again */
		p->ack_due = a->acks_due = true;
		return;
	}
	if (strcmp(b->host, p->host) != 0) {
		refuse(a, p, b, "its host is not the sender's");
		goto out;
	}
	q = aggd_query_find(a, b->query_id);
	if (!q) {
		log_info("aggregator: %s sent a row batch of query %" PRIu64
			 ", which is not running here: stopping it there",
			 p->host, b->query_id);
		aggd_send_stop(a, p, b->query_id);
		goto out;
	}
	if (!q->stream) {
		refuse(a, p, b, "the query is not a stream");
		goto out;
	}
	if (!fits_plan(q, b, why, sizeof(why))) {
		refuse(a, p, b, why);
		goto out;
	}
	if (!q->ended && !aggd_peer_pq(p, q->id))
		aggd_peer_pq_add(p, q->id, aggd_query_active(q) ? PQ_RUNNING : PQ_STOPPED);
	q->rows += rows;
	for (struct peer *c = a->peers; c; c = c->next) {
		Weft__RowBatch out = *b;
		Weft__Envelope e;
		struct sub *s;
		int rc;

		if (c->role != WIRE_ROLE_CLIENT || !(s = aggd_peer_sub(c, q->id)))
			continue;
		nsubs++;
		out.has_dropped = true;
		out.dropped = s->rows_dropped;
		aggd_env_init(a, &e);
		e.body_case = WEFT__ENVELOPE__BODY_ROW_BATCH;
		e.row_batch = &out;
		rc = aggd_peer_send(a, c, &e);
		if (rc == 0)
			continue;
		/* a slow (or gone) client loses these rows, never stalls the others */
		s->rows_dropped += rows;
		q->rows_dropped += rows;
		log_info("aggregator: %s: %" PRIu64 " rows of query %" PRIu64
			 " not relayed (%s); %" PRIu64 " so far",
			 aggd_peer_label(c), rows, q->id, strerror(-rc), s->rows_dropped);
	}
	if (!nsubs && rows) {
		/* nobody to take them: said in status, never silent */
		q->rows_dropped += rows;
		log_debug("aggregator: query %" PRIu64 ": %" PRIu64
			  " rows of %s with no subscriber",
			  q->id, rows, p->host);
	}
out:
	/* relayed or refused: settled, and acknowledged after the next checkpoint */
	settle(a, p, env->seq);
}
