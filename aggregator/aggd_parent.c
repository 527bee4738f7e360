// SPDX-License-Identifier: Apache-2.0
/*
 * The parent link: an aggregator in a tree is one of its parent's agents.  Closed windows
 * become partials, spooled (persisted in the store) until the parent acknowledges them, and
 * resent after every Welcome; queries the parent starts are started here on our own agents.
 *
 * The connection itself (Hello, the Welcome and its sequence check, heartbeats, Acks, resends,
 * reconnects) is the sender's session of agent/session.c, as for an agent; this file is the
 * spool it reads through struct session_spool_ops (rows in memory, mirrored in the store) and
 * what the parent's messages mean here.
 *
 * Must never: let a seq be sent twice by this instance, across restarts too (reserve() makes
 * the seqs durable before the bytes leave; the instance itself is persisted), or drop a row
 * the parent has not acknowledged unless the spool is full (counted, and reported in our
 * heartbeats).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/types.h>
#include <sys/utsname.h>
#include <unistd.h>
#include "base/zmq_dl.h"
#include "aggregator/aggd.h"
#include "agent/agent.h"
#include "agent/result.h"
#include "agent/session.h"
#include "base/file.h"
#include "base/log.h"
#include "aggregator/aggd_int.h"

/* ---- the spool of partials for the parent ---- */

static void sprow_drop(struct aggd *a, size_t i)
{
	struct parent *par = &a->par;

	aggd_store_spool_del(a->store, par->rows[i].id);
	free(par->rows[i].body);
	memmove(&par->rows[i], &par->rows[i + 1], (par->nrows - i - 1) * sizeof(*par->rows));
	par->nrows--;
	if (i < par->nsent)
		par->nsent--;
}

/* Spools one packed partial for the parent (inside the batch's transaction). */
int aggd_parent_spool(struct aggd *a, const Weft__Partial *pt)
{
	size_t len = weft__partial__get_packed_size(pt);
	void *body = malloc(len ? len : 1);

	if (!body)
		return -ENOMEM;
	weft__partial__pack(pt, body);
	return aggd_parent_spool_body(a, WEFT__ENVELOPE__BODY_PARTIAL, body, len);
}

int aggd_parent_spool_body(struct aggd *a, Weft__Envelope__BodyCase kind, void *body, size_t len)
{
	struct parent *par = &a->par;
	struct sprow *r;

	if (par->nrows >= (a->o.spool_max ? a->o.spool_max : SPOOL_MAX_DEFAULT)) {
		Weft__Envelope__BodyCase oldest = par->rows[0].kind;

		/* bounded: the oldest goes, counted and reported in our heartbeats */
		sprow_drop(a, 0);
		par->dropped++;
		log_warn("aggregator: the spool towards the parent is full: dropped its oldest "
			 "%s (%" PRIu64 " so far)",
			 oldest == WEFT__ENVELOPE__BODY_ROW_BATCH   ? "row batch" :
			 oldest == WEFT__ENVELOPE__BODY_GRAPH_BATCH ? "graph batch" :
								      "partial",
			 par->dropped);
	}
	if (par->nrows == par->cap) {
		size_t cap = par->cap ? par->cap * 2 : 64;
		struct sprow *nv = realloc(par->rows, cap * sizeof(*nv));

		if (!nv) {
			free(body);
			return -ENOMEM;
		}
		par->rows = nv;
		par->cap = cap;
	}
	r = &par->rows[par->nrows++];
	r->id = ++par->next_id;
	r->tx = 0;
	r->body = body;
	r->len = len;
	r->kind = kind;
	aggd_txn_begin(a);
	return aggd_store_spool_add(a->store, r->id, (int)kind, body, len);
}

/* What the session sees of the rows (struct session_spool_ops); ctx is the aggregator. */
static const void *spool_next(void *ctx, size_t *len)
{
	struct parent *par = &((struct aggd *)ctx)->par;

	if (par->nsent >= par->nrows)
		return NULL;
	*len = par->rows[par->nsent].len;
	return par->rows[par->nsent].body;
}

/* The body of the next row to send (struct session_spool_ops.kind). */
static Weft__Envelope__BodyCase spool_kind(void *ctx)
{
	struct parent *par = &((struct aggd *)ctx)->par;

	return par->nsent < par->nrows ? par->rows[par->nsent].kind : WEFT__ENVELOPE__BODY_PARTIAL;
}

/*
 * Seqs first, first + 1, ... for the rows not sent since the last Welcome, persisted with the
 * highest before any leaves: a seq given is never given again, even after a crash.
 */
static ssize_t spool_reserve(void *ctx, uint64_t first)
{
	struct aggd *a = ctx;
	struct parent *par = &a->par;
	uint64_t seq = first;

	/* the rows themselves must be committed before they leave, and the numbers below
	 * in a transaction of their own (not nested in an open batch) */
	aggd_txn_commit(a);
	if (aggd_store_begin(a->store) != 0)
		return -EIO;
	for (size_t i = par->nsent; i < par->nrows; i++)
		aggd_store_spool_tx(a->store, par->rows[i].id, seq++);
	aggd_store_meta_set(a->store, "parent_seq", seq - 1);
	if (aggd_store_commit(a->store) != 0)
		return -EIO;
	return (ssize_t)(seq - first);
}

static void spool_mark_sent(void *ctx, uint64_t seq)
{
	struct parent *par = &((struct aggd *)ctx)->par;

	if (par->nsent >= par->nrows)
		return;
	par->rows[par->nsent++].tx = seq;
	log_debug("aggregator: sent a partial to the parent (seq %" PRIu64 ")", seq);
}

/*
 * Ack{upto}, and Welcome.last_seq: a row transmitted with a seq <= upto was merged (the parent
 * merges in order and only after our Hello on each connection, and a row is never followed on
 * the wire by a higher-numbered row without itself being sent first).  Rows loaded from the
 * store keep the seq they were last given, for the first Welcome to judge.
 */
static size_t spool_ack(void *ctx, uint64_t upto)
{
	struct aggd *a = ctx;
	struct parent *par = &a->par;
	bool began = aggd_store_begin(a->store) == 0;
	size_t k = 0;

	while (par->nrows && par->rows[0].tx && par->rows[0].tx <= upto) {
		sprow_drop(a, 0);
		k++;
	}
	if (began)
		aggd_store_commit(a->store);
	return k;
}

static size_t spool_rewind(void *ctx)
{
	struct parent *par = &((struct aggd *)ctx)->par;

	for (size_t i = 0; i < par->nrows; i++)
		par->rows[i].tx = 0;
	par->nsent = 0;
	return par->nrows;
}

static size_t spool_count(void *ctx)
{
	return ((struct aggd *)ctx)->par.nrows;
}

static uint64_t spool_dropped(void *ctx)
{
	return ((struct aggd *)ctx)->par.dropped;
}

static const struct session_spool_ops parent_spool_ops = {
	.kind = spool_kind,
	.next = spool_next,
	.reserve = spool_reserve,
	.mark_sent = spool_mark_sent,
	.ack = spool_ack,
	.rewind = spool_rewind,
	.count = spool_count,
	.dropped = spool_dropped,
};

/* ---- the session's events ---- */

/* Hello.running and Heartbeat.running: the parent's ids of the queries active here. */
static uint64_t *parent_running(void *ctx, size_t *n)
{
	struct aggd *a = ctx;
	uint64_t *running = calloc(a->nq + 1, sizeof(*running));

	*n = 0;
	if (!running)
		return NULL;
	for (size_t i = 0; i < a->nq; i++)
		if (a->q[i]->parent_id && aggd_query_active(a->q[i]))
			running[(*n)++] = a->q[i]->parent_id;
	return running;
}

static void parent_connected(void *ctx)
{
	struct aggd *a = ctx;

	log_info("aggregator: connected to the parent %s; said hello", a->o.parent);
}

static void parent_welcomed(void *ctx, const struct session_welcome *sw)
{
	struct aggd *a = ctx;

	log_info("aggregator: welcomed by the parent %s (%s); %zu spooled partials merged "
		 "before, %zu to send",
		 sw->w->aggregator, a->o.parent, sw->acked, sw->resend);
}

static void parent_lost(void *ctx, const char *why, bool was_up)
{
	struct aggd *a = ctx;

	if (was_up)
		log_info("aggregator: lost the parent %s (%s); reconnecting", a->o.parent, why);
	else
		log_debug("aggregator: connection attempt to the parent %s ended (%s)", a->o.parent,
			  why);
}

static void parent_refused(void *ctx, bool auth, uint32_t status)
{
	struct aggd *a = ctx;

	if (auth)
		log_err("aggregator: the parent %s refused our key (is it in the parent's "
			"allow-list with the role aggregator?)",
			a->o.parent);
	else
		log_err("aggregator: the handshake with the parent %s failed (is --parent-key its "
			"public key?)",
			a->o.parent);
}

static const struct session_ops parent_session_ops = {
	.running = parent_running,
	.connected = parent_connected,
	.welcomed = parent_welcomed,
	.lost = parent_lost,
	.refused = parent_refused,
};

/* ---- the parent's orders ---- */

/* The parent asks us to run a query across our subtree. */
static void parent_query_start(struct aggd *a, const Weft__QueryStart *qs)
{
	struct aggd_stored_query sq = {
		.query = qs->query ? qs->query : "",
		.manifest = qs->manifest.data,
		.manifest_len = qs->manifest.len,
		.object = qs->object.data,
		.object_len = qs->object.len,
		.epoch_ns = qs->epoch_realtime_ns,
		.end_ns = qs->has_end_realtime_ns ? qs->end_realtime_ns : 0,
		.parent_id = qs->query_id,
	};
	struct query *q = aggd_query_find_parent(a, qs->query_id);
	char why[512];
	int rc;

	if (q)
		return; /* running it (or it ended here): a repeat */
	if (aggd_queries_active(a) >= AGGD_MAX_QUERIES) {
		log_warn("aggregator: the parent's query %" PRIu64 " refused: %d queries run here",
			 qs->query_id, AGGD_MAX_QUERIES);
		return;
	}
	/* the id is ours; the manifest is checked before anything is stored */
	sq.id = 0;
	q = aggd_query_make(a, &sq, why, sizeof(why));
	if (!q) {
		log_warn("aggregator: the parent's query %" PRIu64 " refused: %s", qs->query_id,
			 why);
		return;
	}
	aggd_txn_begin(a);
	rc = aggd_store_query_add(a->store, &sq);
	if (rc || aggd_query_insert(a, q)) {
		log_err("aggregator: cannot store the parent's query %" PRIu64 ": %s", qs->query_id,
			strerror(rc ? -rc : ENOMEM));
		aggd_query_free(q);
		return;
	}
	q->id = sq.id;
	log_info("aggregator: query %" PRIu64 " (the parent's %" PRIu64 "): %s", q->id,
		 q->parent_id, q->text);
	for (struct peer *p = a->peers; p; p = p->next)
		if (p->hello && aggd_peer_is_sender(p) && p->alive)
			aggd_query_start_on(a, q, p);
}

void aggd_parent_recv(struct aggd *a)
{
	Weft__Envelope *e;

	for (int n = 0; n < BATCH_MAX && session_recv(a->par.s, &e) > 0; n++) {
		if (!e)
			continue; /* the session's own (Welcome, Ack), or rejected and counted */
		switch (e->body_case) {
		case WEFT__ENVELOPE__BODY_QUERY_START:
			parent_query_start(a, e->query_start);
			break;
		case WEFT__ENVELOPE__BODY_QUERY_STOP: {
			struct query *q = aggd_query_find_parent(a, e->query_stop->query_id);

			if (q)
				aggd_query_stop(a, q, "stopped by the parent");
			break;
		}
		case WEFT__ENVELOPE__BODY_ERROR:
			log_warn("aggregator: the parent says: %s", e->error->message);
			break;
		default:
			break;
		}
		wire_free(e);
	}
}

uint64_t aggd_parent_rejected(const struct aggd *a)
{
	struct session_stats st = { 0 };

	if (a->has_parent)
		session_stats(a->par.s, &st);
	return st.rejected;
}

/* ---- opening and closing ---- */

struct spool_load {
	struct aggd *a;
	uint64_t seq; /* the highest seq a row was given */
};

static int spool_load_row(void *ctx, uint64_t id, uint64_t tx, int kind, const void *body,
			  size_t len)
{
	struct spool_load *l = ctx;
	struct parent *par = &l->a->par;
	struct sprow *r;

	if (par->nrows == par->cap) {
		size_t cap = par->cap ? par->cap * 2 : 64;
		struct sprow *nv = realloc(par->rows, cap * sizeof(*nv));

		if (!nv)
			return -ENOMEM;
		par->rows = nv;
		par->cap = cap;
	}
	r = &par->rows[par->nrows];
	r->body = aggd_memdup(body, len);
	if (!r->body)
		return -ENOMEM;
	r->id = id;
	r->tx = tx;
	r->len = len;
	/* a kind this weft does not send goes as a Partial, which the parent refuses */
	r->kind =
		kind == WEFT__ENVELOPE__BODY_GRAPH_BATCH || kind == WEFT__ENVELOPE__BODY_ROW_BATCH ?
			(Weft__Envelope__BodyCase)kind :
			WEFT__ENVELOPE__BODY_PARTIAL;
	par->nrows++;
	if (id > par->next_id)
		par->next_id = id;
	if (tx > l->seq)
		l->seq = tx;
	return 0;
}

int aggd_parent_open(struct aggd *a, char *err, size_t errsz)
{
	struct parent *par = &a->par;
	struct session_opts so = { .sz = sizeof(so) };
	struct spool_load l = { .a = a };
	struct utsname u;
	uint64_t v;
	int rc;

	rc = wire_keyfile_read(a->o.parent_key, par->pub, NULL);
	if (rc) {
		snprintf(err, errsz, "--parent-key %s: %s", a->o.parent_key,
			 rc == -EINVAL ? "not a public key file (weft keygen writes NAME.pub)" :
					 weft_file_strerror(rc));
		return rc;
	}
	/* our identity towards the parent outlives restarts: the parent dedups by it */
	if (aggd_store_meta_get(a->store, "parent_instance", &v) == 0 && v) {
		par->instance = v;
	} else {
		if (getrandom(&par->instance, sizeof(par->instance), 0) != sizeof(par->instance))
			par->instance = (uint64_t)aggd_real_ns() ^ ((uint64_t)getpid() << 32);
		par->instance |= 1;
		aggd_store_meta_set(a->store, "parent_instance", par->instance);
	}
	if (aggd_store_meta_get(a->store, "parent_seq", &v) == 0)
		l.seq = v;
	rc = aggd_store_spool_load(a->store, spool_load_row, &l);
	if (rc) {
		snprintf(err, errsz, "reading the spool from the store: %s", strerror(-rc));
		return rc;
	}
	/* the rows keep their tx seqs: the parent's Welcome says which of them it merged */
	so.zctx = a->zctx;
	so.endpoint = a->o.parent;
	so.server_key = par->pub;
	so.public_key = a->pub;
	so.secret_key = a->sec;
	so.role = WIRE_ROLE_AGGREGATOR;
	so.host = a->name;
	so.version = WEFT_VERSION;
	so.kernel = uname(&u) == 0 ? u.release : NULL;
	so.instance = par->instance;
	so.seq = l.seq;
	so.log_name = "aggregator";
	so.ops = &parent_session_ops;
	so.ctx = a;
	so.spool_ops = &parent_spool_ops;
	so.spool = a;
	par->s = session_new(&so);
	if (!par->s) {
		snprintf(err, errsz, "--parent %s: %s", a->o.parent, strerror(errno));
		return -errno;
	}
	/* the socket itself is made at the first tick, once the queries are restored (Hello
	 * lists those the parent started) */
	a->has_parent = true;
	return 0;
}

void aggd_parent_close(struct aggd *a)
{
	session_free(a->par.s);
	a->par.s = NULL;
	for (size_t i = 0; i < a->par.nrows; i++)
		free(a->par.rows[i].body);
	free(a->par.rows);
	a->par.rows = NULL;
	a->par.nrows = a->par.nsent = 0;
}
