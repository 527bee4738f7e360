// SPDX-License-Identifier: Apache-2.0
/*
 * The parent link: an aggregator in a tree is one of its parent's agents.  Closed windows
 * become partials, spooled (persisted in the store) until the parent acknowledges them, and
 * resent after every Welcome; queries the parent starts are started here on our own agents.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>
#include "aggregator/aggd.h"
#include "agent/agent.h"
#include "agent/result.h"
#include "base/file.h"
#include "base/log.h"
#include "aggregator/aggd_int.h"

/* ---- the parent link ---- */

static int parent_send(struct aggd *a, Weft__Envelope *e)
{
	e->version = WIRE_VERSION;
	e->seq = ++a->par.seq;
	return wire_send(a->par.sock, NULL, 0, e, true);
}

static void parent_hello(struct aggd *a)
{
	Weft__Envelope e;
	Weft__Hello h;
	struct utsname u;
	uint64_t *running = calloc(a->nq + 1, sizeof(*running));
	size_t n = 0;
	int rc;

	if (!running)
		return;
	for (size_t i = 0; i < a->nq; i++)
		if (a->q[i]->parent_id && aggd_query_active(a->q[i]))
			running[n++] = a->q[i]->parent_id;
	weft__hello__init(&h);
	h.role = "aggregator";
	h.host = a->name;
	h.version = WEFT_VERSION;
	h.instance = a->par.instance;
	if (uname(&u) == 0)
		h.kernel = u.release;
	h.n_running = n;
	h.running = running;
	weft__envelope__init(&e);
	e.body_case = WEFT__ENVELOPE__BODY_HELLO;
	e.hello = &h;
	a->par.welcomed = false;
	a->par.nsent = 0;
	rc = parent_send(a, &e);
	if (rc)
		log_warn("aggregator: hello to the parent %s: %s", a->o.parent, strerror(-rc));
	else
		log_info("aggregator: connected to the parent %s; said hello", a->o.parent);
	free(running);
}

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
	struct parent *par = &a->par;
	size_t len = weft__partial__get_packed_size(pt);
	struct sprow *r;
	void *body;

	if (par->nrows >= (a->o.spool_max ? a->o.spool_max : SPOOL_MAX_DEFAULT)) {
		/* bounded: the oldest goes, counted and reported in our heartbeats */
		sprow_drop(a, 0);
		par->dropped++;
		log_warn("aggregator: the spool towards the parent is full: dropped its oldest "
			 "partial (%" PRIu64 " so far)",
			 par->dropped);
	}
	if (par->nrows == par->cap) {
		size_t cap = par->cap ? par->cap * 2 : 64;
		struct sprow *nv = realloc(par->rows, cap * sizeof(*nv));

		if (!nv)
			return -ENOMEM;
		par->rows = nv;
		par->cap = cap;
	}
	body = malloc(len ? len : 1);
	if (!body)
		return -ENOMEM;
	weft__partial__pack(pt, body);
	r = &par->rows[par->nrows++];
	r->id = ++par->next_id;
	r->tx = 0;
	r->body = body;
	r->len = len;
	aggd_txn_begin(a);
	return aggd_store_spool_add(a->store, r->id, body, len);
}

/*
 * Sends the rows not yet sent since the last Welcome, in order, each with a fresh seq that
 * is persisted before the bytes leave.  Stops at the first full queue (the rest waits for
 * the next tick: order matters, see parent_welcome()).
 */
void aggd_parent_flush(struct aggd *a)
{
	struct parent *par = &a->par;
	size_t from = par->nsent;
	uint64_t seq = par->seq;

	if (!a->has_parent || !par->welcomed || par->nsent == par->nrows)
		return;
	/* the rows themselves must be committed before they leave, and the numbers below
	 * in a transaction of their own (not nested in an open batch) */
	aggd_txn_commit(a);
	if (aggd_store_begin(a->store) != 0)
		return;
	for (size_t i = from; i < par->nrows; i++) {
		par->rows[i].tx = ++seq;
		aggd_store_spool_tx(a->store, par->rows[i].id, par->rows[i].tx);
	}
	aggd_store_meta_set(a->store, "parent_seq", seq);
	if (aggd_store_commit(a->store) != 0)
		return;
	for (size_t i = from; i < par->nrows; i++) {
		void *buf;
		size_t len;
		int rc = wire_envelope_wrap(par->rows[i].tx, WEFT__ENVELOPE__BODY_PARTIAL,
					    par->rows[i].body, par->rows[i].len, &buf, &len);

		if (rc == 0) {
			rc = wire_send_bytes(par->sock, NULL, 0, buf, len, true);
			free(buf);
		}
		if (rc) {
			/* not sent: the numbers given from here on were never seen by the
			 * parent; they are given again (higher) next time */
			for (size_t j = i; j < par->nrows; j++)
				par->rows[j].tx = 0;
			break;
		}
		par->nsent = i + 1;
		par->seq = par->rows[i].tx;
		log_debug("aggregator: sent a partial to the parent (seq %" PRIu64 ")", par->seq);
	}
	if (par->seq < seq)
		par->seq = seq; /* seqs persisted stay used: never reuse one */
}

static void parent_ack(struct aggd *a, uint64_t upto)
{
	struct parent *par = &a->par;
	bool began = aggd_store_begin(a->store) == 0;

	/* rows [0, nsent) went out in order with increasing seqs */
	while (par->nsent && par->rows[0].tx && par->rows[0].tx <= upto)
		sprow_drop(a, 0);
	if (began)
		aggd_store_commit(a->store);
}

/*
 * Welcome: last_seq is the highest seq of ours that the parent merged.  A row transmitted
 * with a seq <= last_seq was merged (the parent merges in order and only after our Hello on
 * each connection, and a row is never followed on the wire by a higher-numbered row without
 * itself being sent first): drop it; send the rest again.
 */
static void parent_welcome(struct aggd *a, const Weft__Welcome *w)
{
	struct parent *par = &a->par;
	bool began = aggd_store_begin(a->store) == 0;
	size_t dropped = 0;

	for (size_t i = 0; i < par->nrows;) {
		if (par->rows[i].tx && w->has_last_seq && par->rows[i].tx <= w->last_seq) {
			sprow_drop(a, i);
			dropped++;
			continue;
		}
		par->rows[i].tx = 0;
		i++;
	}
	if (began)
		aggd_store_commit(a->store);
	par->nsent = 0;
	if (w->has_last_seq && w->last_seq > par->seq)
		par->seq = w->last_seq;
	par->hb_ms = w->heartbeat_ms;
	par->next_hb = aggd_mono_ns();
	par->welcomed = true;
	log_info("aggregator: welcomed by the parent %s (%s); %zu spooled partials merged "
		 "before, %zu to send",
		 w->aggregator, a->o.parent, dropped, par->nrows);
	aggd_parent_flush(a);
}

void aggd_parent_heartbeat(struct aggd *a)
{
	Weft__Envelope e;
	Weft__Heartbeat hb;
	uint64_t *running = calloc(a->nq + 1, sizeof(*running));
	size_t n = 0;

	if (!running)
		return;
	for (size_t i = 0; i < a->nq; i++)
		if (a->q[i]->parent_id && aggd_query_active(a->q[i]))
			running[n++] = a->q[i]->parent_id;
	weft__heartbeat__init(&hb);
	hb.time_ns = aggd_real_ns();
	hb.n_running = n;
	hb.running = running;
	hb.has_spooled = true;
	hb.spooled = a->par.nrows;
	hb.has_spool_dropped = true;
	hb.spool_dropped = a->par.dropped;
	weft__envelope__init(&e);
	e.body_case = WEFT__ENVELOPE__BODY_HEARTBEAT;
	e.heartbeat = &hb;
	parent_send(a, &e);
	free(running);
}

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
	for (int n = 0; n < BATCH_MAX; n++) {
		zmq_msg_t m;
		Weft__Envelope *e;
		char why[256];
		int more = 0;
		size_t msz = sizeof(more);

		zmq_msg_init(&m);
		if (zmq_msg_recv(&m, a->par.sock, ZMQ_DONTWAIT) < 0) {
			zmq_msg_close(&m);
			return;
		}
		zmq_getsockopt(a->par.sock, ZMQ_RCVMORE, &more, &msz);
		e = more ? NULL : wire_decode(zmq_msg_data(&m), zmq_msg_size(&m), why, sizeof(why));
		zmq_msg_close(&m);
		while (more) { /* a DEALER gets one part per envelope; drain anything else */
			zmq_msg_init(&m);
			if (zmq_msg_recv(&m, a->par.sock, ZMQ_DONTWAIT) < 0)
				more = 0;
			else
				zmq_getsockopt(a->par.sock, ZMQ_RCVMORE, &more, &msz);
			zmq_msg_close(&m);
			snprintf(why, sizeof(why), "several parts");
		}
		if (!e || !wire_body_from_server(e->body_case)) {
			a->rejected++;
			log_debug("aggregator: rejected a message from the parent: %s",
				  e ? "not a body the parent sends" : why);
			wire_free(e);
			continue;
		}
		if (e->body_case == WEFT__ENVELOPE__BODY_WELCOME) {
			a->par.rx.instance = e->welcome->instance;
			a->par.rx.last = e->seq;
			parent_welcome(a, e->welcome);
			wire_free(e);
			continue;
		}
		if (!a->par.welcomed || !wire_seq_accept(&a->par.rx, a->par.rx.instance, e->seq)) {
			a->rejected++;
			wire_free(e);
			continue;
		}
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
		case WEFT__ENVELOPE__BODY_ACK:
			parent_ack(a, e->ack->upto);
			break;
		case WEFT__ENVELOPE__BODY_ERROR:
			if (strcmp(e->error->message, NOT_WELCOMED) == 0) {
				/* the parent restarted and forgot us */
				parent_hello(a);
			} else {
				log_warn("aggregator: the parent says: %s", e->error->message);
			}
			break;
		default:
			break;
		}
		wire_free(e);
	}
}

/* The parent socket's monitor: every completed handshake is a new connection, which must
 * begin with Hello. */
void aggd_parent_monitor(struct aggd *a)
{
	for (;;) {
		zmq_msg_t m;
		uint16_t event = 0;
		int more = 0;
		size_t msz = sizeof(more);

		zmq_msg_init(&m);
		if (zmq_msg_recv(&m, a->par.mon, ZMQ_DONTWAIT) < 0) {
			zmq_msg_close(&m);
			return;
		}
		if (zmq_msg_size(&m) >= 2)
			memcpy(&event, zmq_msg_data(&m), 2);
		zmq_getsockopt(a->par.mon, ZMQ_RCVMORE, &more, &msz);
		zmq_msg_close(&m);
		while (more) {
			zmq_msg_init(&m);
			if (zmq_msg_recv(&m, a->par.mon, ZMQ_DONTWAIT) < 0)
				more = 0;
			else
				zmq_getsockopt(a->par.mon, ZMQ_RCVMORE, &more, &msz);
			zmq_msg_close(&m);
		}
		if (event == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) {
			parent_hello(a);
		} else if (event == ZMQ_EVENT_DISCONNECTED) {
			a->par.welcomed = false;
			log_info("aggregator: lost the parent %s; reconnecting", a->o.parent);
		} else if (event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) {
			log_err("aggregator: the parent %s refused our key (is it in the parent's "
				"allow-list with the role aggregator?)",
				a->o.parent);
		} else if (event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL ||
			   event == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL) {
			log_err("aggregator: the handshake with the parent %s failed (is "
				"--parent-key its public key?)",
				a->o.parent);
		}
	}
}

static int spool_load_row(void *ctx, uint64_t id, uint64_t tx, const void *body, size_t len)
{
	struct aggd *a = ctx;
	struct parent *par = &a->par;
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
	par->nrows++;
	if (id > par->next_id)
		par->next_id = id;
	if (tx > par->seq)
		par->seq = tx;
	return 0;
}

int aggd_parent_open(struct aggd *a, char *err, size_t errsz)
{
	struct parent *par = &a->par;
	char ep[64];
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
		par->seq = v;
	rc = aggd_store_spool_load(a->store, spool_load_row, a);
	if (rc) {
		snprintf(err, errsz, "reading the spool from the store: %s", strerror(-rc));
		return rc;
	}
	/* the rows keep their tx seqs: the parent's Welcome says which of them it merged */
	par->sock = wire_client_socket(a->zctx, a->o.parent, par->pub, a->pub, a->sec);
	if (!par->sock) {
		snprintf(err, errsz, "--parent %s: %s", a->o.parent, strerror(errno));
		return -errno;
	}
	snprintf(ep, sizeof(ep), "inproc://weft-aggd-parent-%p", (void *)a);
	if (zmq_socket_monitor(par->sock, ep,
			       ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_DISCONNECTED |
				       ZMQ_EVENT_HANDSHAKE_FAILED_AUTH |
				       ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
				       ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL) != 0 ||
	    !(par->mon = zmq_socket(a->zctx, ZMQ_PAIR)) || zmq_connect(par->mon, ep) != 0) {
		snprintf(err, errsz, "monitoring the parent socket: %s", zmq_strerror(errno));
		return -EIO;
	}
	a->has_parent = true;
	return 0;
}
