// SPDX-License-Identifier: Apache-2.0
/*
 * Stream queries on a cluster (docs/protocol.md "Row batches"): a select without aggregates
 * runs on every agent like any query, its windows close on Partials of no groups, and its
 * rows come in RowBatches, which the aggregator checks against the query's plan and relays
 * to the query's subscribers as they come.  A batch is settled (and acknowledged after the
 * next checkpoint) once relayed, so an agent's spool resends only what the aggregator has
 * not taken.
 *
 * Relayed batches are numbered per query (seq 1, 2, ...) and carry the query's rows so far
 * (total_rows), so that a client knows exactly what it missed; the latest are kept in memory
 * (--stream-keep bytes a query, AGGD_STREAM_KEEP_BATCHES batches at most, and all streams'
 * together AGGD_STREAM_KEEP_STREAMS times --stream-keep: the oldest go first, of the query, or
 * of all when the whole is full) for a client that comes back: one forgotten while it was
 * too slow to send its heartbeats, or reconnected, subscribes again from the next number it
 * has not seen and gets what is still kept before anything new.  Nothing is stored: an aggregator's restart loses
 * them.
 *
 * In a tree, a child aggregator runs the parent's stream on its agents and passes every batch
 * it takes up through the parent link's spool (resent until the parent acknowledges it, kept
 * across the child's restarts), under the parent's query id and with the host it came from:
 * the parent takes batches of any host from a child aggregator (its subtree's), and only the
 * sender's own from an agent.  The parent's Results name the leaf hosts (the child's partials
 * carry them), whose `last` batches come up unchanged, so its clients wait for them as for
 * agents of its own.
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
#include <stdlib.h>
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

void aggd_rows_keep_free(struct query *q)
{
	for (size_t i = 0; i < q->nkeep; i++)
		free(q->keep[(q->keep_head + i) % q->keep_cap].buf);
	free(q->keep);
	q->keep = NULL;
	q->nkeep = q->keep_cap = q->keep_head = q->keep_bytes = 0;
}

static void keep_drop_oldest(struct query *q)
{
	struct rowkeep *k = &q->keep[q->keep_head];

	q->keep_bytes -= k->len;
	free(k->buf);
	k->buf = NULL;
	q->keep_head = (q->keep_head + 1) % q->keep_cap;
	q->nkeep--;
}

/* The query whose oldest kept batch is the oldest of all streams', or NULL if none keeps
 * any; *total: the bytes all keep. */
static struct query *keep_oldest(struct aggd *a, uint64_t *total)
{
	struct query *o = NULL;

	*total = 0;
	for (size_t i = 0; i < a->nq; i++) {
		struct query *q = a->q[i];

		if (!q->nkeep)
			continue;
		*total += q->keep_bytes;
		if (!o || q->keep[q->keep_head].gen < o->keep[o->keep_head].gen)
			o = q;
	}
	return o;
}

/* Keeps relayed batch b of q, the oldest dropped to stay within the bounds (q's first, then
 * all streams'); a batch that cannot be kept (larger than the bound, no memory) is not, and
 * a client coming back will count its rows as missed (total_rows). */
static void keep_add(struct aggd *a, struct query *q, const Weft__RowBatch *b)
{
	int64_t max = a->o.stream_keep ? a->o.stream_keep : AGGD_STREAM_KEEP_DEFAULT;
	uint64_t all_max = (uint64_t)max * AGGD_STREAM_KEEP_STREAMS, total;
	size_t len = weft__row_batch__get_packed_size(b);
	struct query *o;
	struct rowkeep *k;
	void *buf;

	if (max < 0 || len > (uint64_t)max)
		return;
	while (q->nkeep &&
	       (q->keep_bytes + len > (uint64_t)max || q->nkeep >= AGGD_STREAM_KEEP_BATCHES))
		keep_drop_oldest(q);
	while ((o = keep_oldest(a, &total)) && total + len > all_max)
		keep_drop_oldest(o);
	if (q->nkeep == q->keep_cap) {
		size_t cap = q->keep_cap ? 2 * q->keep_cap : 64;
		struct rowkeep *nv = calloc(cap, sizeof(*nv));

		if (!nv)
			return;
		for (size_t i = 0; i < q->nkeep; i++)
			nv[i] = q->keep[(q->keep_head + i) % q->keep_cap];
		free(q->keep);
		q->keep = nv;
		q->keep_cap = cap;
		q->keep_head = 0;
	}
	buf = malloc(len ? len : 1);
	if (!buf)
		return;
	weft__row_batch__pack(b, buf);
	k = &q->keep[(q->keep_head + q->nkeep) % q->keep_cap];
	k->seq = b->seq;
	k->gen = ++a->keep_gen;
	k->rows = b->has_rows ? b->rows : 0;
	k->buf = buf;
	k->len = len;
	q->nkeep++;
	q->keep_bytes += len;
}

/* Sends relayed batch b to client c under its subscription s; its rows are counted as not
 * relayed to c when c cannot take it (its queue is full, or it is gone). */
static void relay_to(struct aggd *a, struct peer *c, struct sub *s, struct query *q,
		     const Weft__RowBatch *b)
{
	Weft__RowBatch out = *b;
	uint64_t rows = b->has_rows ? b->rows : 0;
	Weft__Envelope e;
	int rc;

	out.has_dropped = true;
	out.dropped = s->rows_dropped;
	aggd_env_init(a, &e);
	e.body_case = WEFT__ENVELOPE__BODY_ROW_BATCH;
	e.row_batch = &out;
	rc = aggd_peer_send(a, c, &e);
	if (rc == 0)
		return;
	/* a slow (or gone) client loses these rows, never stalls the others */
	s->rows_dropped += rows;
	q->rows_dropped += rows;
	log_info("aggregator: %s: %" PRIu64 " rows of query %" PRIu64 " not relayed (%s); %" PRIu64
		 " so far",
		 aggd_peer_label(c), rows, q->id, strerror(-rc), s->rows_dropped);
}

void aggd_rows_replay(struct aggd *a, struct peer *p, struct query *q, uint64_t from)
{
	struct sub *s = aggd_peer_sub(p, q->id);
	size_t sent = 0;

	if (!s || !q->stream)
		return;
	for (size_t i = 0; i < q->nkeep; i++) {
		const struct rowkeep *k = &q->keep[(q->keep_head + i) % q->keep_cap];
		Weft__RowBatch *b;

		if (k->seq < from)
			continue;
		b = weft__row_batch__unpack(NULL, k->len, k->buf);
		if (!b) {
			/* packed here from a batch that was checked: only memory can fail */
			s->rows_dropped += k->rows;
			q->rows_dropped += k->rows;
			continue;
		}
		relay_to(a, p, s, q, b);
		weft__row_batch__free_unpacked(b, NULL);
		sent++;
	}
	if (sent)
		log_info("aggregator: %s: %zu kept row batches of query %" PRIu64
			 " sent again (from %" PRIu64 ")",
			 aggd_peer_label(p), sent, q->id, from);
}

/* A child aggregator: batch b of q (checked) up to the parent, as it came but for the query
 * id; not relayed there is logged and counted in q's rows_dropped. */
static void forward_up(struct aggd *a, struct query *q, const Weft__RowBatch *b)
{
	Weft__RowBatch up = *b;
	uint64_t rows = b->has_rows ? b->rows : 0;
	size_t len;
	void *body;
	int rc = -ENOMEM;

	up.query_id = q->parent_id;
	up.has_seq = up.has_total_rows = up.has_dropped = false;
	len = weft__row_batch__get_packed_size(&up);
	body = malloc(len ? len : 1);
	if (body) {
		weft__row_batch__pack(&up, body);
		/* the spool owns body from here, failing or not */
		rc = aggd_parent_spool_body(a, WEFT__ENVELOPE__BODY_ROW_BATCH, body, len);
	}
	if (rc) {
		q->rows_dropped += rows;
		log_err("aggregator: query %" PRIu64 ": a row batch of %s (%" PRIu64
			" rows) not passed to the parent: %s",
			q->id, b->host, rows, strerror(-rc));
	}
}

void aggd_on_row_batch(struct aggd *a, struct peer *p, const Weft__Envelope *env)
{
	const Weft__RowBatch *b = env->row_batch;
	uint64_t rows = b->has_rows ? b->rows : 0;
	Weft__RowBatch relayed;
	struct query *q;
	size_t nsubs = 0;
	char why[256];

	if (env->seq <= p->upto) {
		/* relayed already (a repeat): acknowledged again */
		p->ack_due = a->acks_due = true;
		return;
	}
	if (p->role != WIRE_ROLE_AGGREGATOR && strcmp(b->host, p->host) != 0) {
		/* a child aggregator passes up its agents' batches; an agent sends its own */
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
	if (q->parent_id && a->has_parent)
		forward_up(a, q, b);
	relayed = *b;
	relayed.has_seq = relayed.has_total_rows = true;
	relayed.seq = ++q->row_seq;
	relayed.total_rows = q->rows;
	relayed.has_dropped = false; /* each client's own */
	keep_add(a, q, &relayed);
	for (struct peer *c = a->peers; c; c = c->next) {
		struct sub *s;

		if (c->role != WIRE_ROLE_CLIENT || !(s = aggd_peer_sub(c, q->id)))
			continue;
		nsubs++;
		relay_to(a, c, s, q, &relayed);
	}
	if (!nsubs && rows) {
		/* nobody to take them now (a client that comes back may get them from those
		 * kept): said in status, never silent */
		q->rows_dropped += rows;
		log_debug("aggregator: query %" PRIu64 ": %" PRIu64
			  " rows of %s with no subscriber",
			  q->id, rows, p->host);
	}
out:
	/* relayed or refused: settled, and acknowledged after the next checkpoint */
	settle(a, p, env->seq);
}
