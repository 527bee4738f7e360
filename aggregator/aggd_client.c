// SPDX-License-Identifier: Apache-2.0
/*
 * A client's connection to an aggregator (`weft submit`, `weft status`, `weft cancel`).
 *
 * The connection is the sender's session of agent/session.c, as for agents: a DEALER socket,
 * CURVE client pinned to the aggregator's public key; Hello first on every connection (the
 * first, and each reconnect after the aggregator restarted or the network dropped), every
 * message from the aggregator decoded and checked (a body the aggregator may send, the
 * Welcome first, increasing seq per aggregator instance, the Welcome's too), failures counted
 * and dropped, never acted on; a heartbeat every interval the Welcome named, so that the
 * aggregator keeps the client (one silent for 3 intervals is forgotten with its
 * subscriptions).  What is a client's own: once welcomed again, it renews its subscriptions
 * from the next window its caller has not seen (an Error in answer: the aggregator no longer
 * has the query, aggd_client_sub_gone()), and asks again for the stops it asked for
 * that have not taken effect yet (aggd_client_stop()); and its sends wait for room in the queue.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "base/zmq_dl.h"
#include "aggregator/aggd.h"
#include "agent/session.h"
#include "base/file.h"
#include "base/log.h"

struct aggd_client {
	void *zctx;
	struct session *s;
	char endpoint[512];
	bool refused, handshake_failed;
	struct csub {
		uint64_t id, next; /* the next window the caller has not seen */
		uint64_t next_batch; /* the next relayed RowBatch (seq) not returned; 0: none */
		uint64_t renew_seq; /* the seq it was last renewed with (0: not yet) */
		bool gone; /* an Error answered a renewal: the aggregator no longer has it */
	} * subs;
	size_t nsubs;
	struct cstop {
		uint64_t id; /* a QueryStop asked for */
		uint64_t again_seq; /* the seq it was last sent again with (its answer is ours) */
		bool done; /* its last Result, or an Error about it, came: not sent again */
	} * stops;
	size_t nstops;
	uint64_t req_seq; /* the seq of the caller's last message sent */
};

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000ULL + (uint64_t)ts.tv_nsec / 1000000ULL;
}

/* A message of the client's own (renewals, stops sent again): not the caller's request. */
static int client_send(struct aggd_client *c, Weft__Envelope *e)
{
	return session_send(c->s, e);
}

int aggd_client_send(struct aggd_client *c, Weft__Envelope *e)
{
	int rc;

	if (!c || !e)
		return -EINVAL;
	rc = session_send(c->s, e);
	if (rc == 0)
		c->req_seq = e->seq;
	return rc;
}

uint64_t aggd_client_request_seq(const struct aggd_client *c)
{
	return c ? c->req_seq : 0;
}

/* Sends a QueryStop; the seq it went with, 0 if it did not go. */
static uint64_t stop_send(struct aggd_client *c, uint64_t query_id)
{
	Weft__Envelope e;
	Weft__QueryStop st;

	weft__query_stop__init(&st);
	st.query_id = query_id;
	weft__envelope__init(&e);
	e.body_case = WEFT__ENVELOPE__BODY_QUERY_STOP;
	e.query_stop = &st;
	return client_send(c, &e) == 0 ? e.seq : 0;
}

/*
 * A stop asked for is done when its query's last Result comes, or an Error answering a
 * request about it (no such query: it ended; not an agent's error relayed).  Returns whether
 * e answers a stop sent again here, which the caller did not send: then it is not returned
 * (a query that ended while this client was away is answered "no query runs here").
 */
static bool stop_settle(struct aggd_client *c, const Weft__Envelope *e)
{
	uint64_t id;
	bool again;

	if (e->body_case == WEFT__ENVELOPE__BODY_RESULT && e->result->last)
		id = e->result->query_id;
	else if (e->body_case == WEFT__ENVELOPE__BODY_ERROR && e->error->has_query_id &&
		 e->error->has_in_reply_to)
		id = e->error->query_id;
	else
		return false;
	for (size_t i = 0; i < c->nstops; i++)
		if (c->stops[i].id == id) {
			again = e->body_case == WEFT__ENVELOPE__BODY_ERROR &&
				c->stops[i].again_seq == e->error->in_reply_to;
			c->stops[i].done = true;
			return again;
		}
	return false;
}

static void client_subscribe_all(struct aggd_client *c)
{
	for (size_t i = 0; i < c->nsubs; i++) {
		Weft__Envelope e;
		Weft__Subscribe s;

		weft__subscribe__init(&s);
		s.query_id = c->subs[i].id;
		s.has_from_window = true;
		s.from_window = c->subs[i].next;
		/* a stream's rows: those the aggregator still keeps from the first not seen (it
		 * ignores this for other queries) */
		s.has_from_row_batch = true;
		s.from_row_batch = c->subs[i].next_batch ? c->subs[i].next_batch : 1;
		weft__envelope__init(&e);
		e.body_case = WEFT__ENVELOPE__BODY_SUBSCRIBE;
		e.subscribe = &s;
		if (!c->subs[i].gone && client_send(c, &e) == 0)
			c->subs[i].renew_seq = e.seq;
	}
}

/* An Error answering a renewal: that subscription is over (the Error goes to the caller). */
static void sub_settle(struct aggd_client *c, const Weft__Envelope *e)
{
	if (e->body_case != WEFT__ENVELOPE__BODY_ERROR || !e->error->has_in_reply_to ||
	    !e->error->has_query_id)
		return;
	for (size_t i = 0; i < c->nsubs; i++)
		if (c->subs[i].id == e->error->query_id && c->subs[i].renew_seq &&
		    c->subs[i].renew_seq == e->error->in_reply_to)
			c->subs[i].gone = true;
}

/* ---- the session's events ---- */

static void client_connected(void *ctx)
{
	struct aggd_client *c = ctx;

	log_debug("client: connected to %s", c->endpoint);
}

static void client_welcomed(void *ctx, const struct session_welcome *sw)
{
	struct aggd_client *c = ctx;

	if (sw->restarted)
		for (size_t i = 0; i < c->nsubs; i++)
			c->subs[i].next_batch = 0; /* another instance numbers its batches anew */
	if (!sw->first) {
		client_subscribe_all(c);
		for (size_t i = 0; i < c->nstops; i++)
			if (!c->stops[i].done)
				c->stops[i].again_seq = stop_send(c, c->stops[i].id);
	}
}

static void client_lost(void *ctx, const char *why, bool was_up)
{
	struct aggd_client *c = ctx;

	if (was_up)
		log_info("client: lost %s (%s); reconnecting", c->endpoint, why);
}

static void client_refused(void *ctx, bool auth, uint32_t status)
{
	struct aggd_client *c = ctx;

	if (auth)
		c->refused = true;
	else
		c->handshake_failed = true;
}

static const struct session_ops client_session_ops = {
	.connected = client_connected,
	.welcomed = client_welcomed,
	.lost = client_lost,
	.refused = client_refused,
};

/*
 * Whether e is a relayed RowBatch already returned (the aggregator sends again what it keeps
 * from the number the subscription asked for, which a batch still queued here may have
 * passed); else it is noted as the latest.
 */
static bool row_batch_seen(struct aggd_client *c, const Weft__Envelope *e)
{
	const Weft__RowBatch *b;

	if (e->body_case != WEFT__ENVELOPE__BODY_ROW_BATCH || !e->row_batch->has_seq)
		return false;
	b = e->row_batch;
	for (size_t i = 0; i < c->nsubs; i++) {
		if (c->subs[i].id != b->query_id)
			continue;
		if (b->seq < c->subs[i].next_batch)
			return true;
		c->subs[i].next_batch = b->seq + 1;
		return false;
	}
	return false;
}

int aggd_client_recv(struct aggd_client *c, int timeout_ms, Weft__Envelope **out)
{
	uint64_t deadline = mono_ms() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0);

	if (!c || !out)
		return -EINVAL;
	*out = NULL;
	for (;;) {
		zmq_pollitem_t items[SESSION_POLL_ITEMS];
		uint64_t now = mono_ms();
		int wait, n, rc;

		session_tick(c->s);
		wait = session_timeout_ms(c->s, deadline > now ? (int)(deadline - now) : 0);
		n = session_poll_items(c->s, items);
		if (zmq_poll(items, n, wait) < 0) {
			if (errno == EINTR)
				return 0; /* a signal: let the caller look */
			return -errno;
		}
		if (n && (items[1].revents & ZMQ_POLLIN))
			session_poll_events(c->s);
		if (n && (items[0].revents & ZMQ_POLLIN)) {
			/* the session's own messages are handled inside; more may be queued */
			while ((rc = session_recv(c->s, out)) > 0) {
				if (*out && row_batch_seen(c, *out)) {
					wire_free(*out);
					*out = NULL;
					continue;
				}
				if (*out && stop_settle(c, *out)) {
					wire_free(*out);
					*out = NULL;
					continue;
				}
				if (*out)
					sub_settle(c, *out);
				if (*out)
					return 1;
			}
			if (rc < 0)
				return rc;
		}
		if (mono_ms() >= deadline)
			return 0;
	}
}

struct aggd_client *aggd_client_connect(const struct aggd_client_opts *o, char *err, size_t errsz)
{
	struct aggd_client *c;
	char server_pub[WIRE_KEY_LEN + 1], pub[WIRE_KEY_LEN + 1], sec[WIRE_KEY_LEN + 1];
	char host[256] = "";
	struct session_opts so = { .sz = sizeof(so) };
	uint64_t deadline;
	int rc, timeout;

	if (!o || !o->endpoint || !o->server_key_file || !o->key_file) {
		snprintf(err, errsz, "--to, --server-key and --key are required");
		errno = EINVAL;
		return NULL;
	}
	rc = wire_keyfile_read(o->server_key_file, server_pub, NULL);
	if (rc) {
		snprintf(err, errsz, "--server-key %s: %s", o->server_key_file,
			 rc == -EINVAL ? "not a key file (the aggregator's NAME.pub)" :
					 weft_file_strerror(rc));
		errno = -rc;
		return NULL;
	}
	rc = wire_keyfile_read(o->key_file, pub, sec);
	if (rc) {
		snprintf(err, errsz, "--key %s: %s", o->key_file,
			 rc == -ENOKEY ? "holds no secret key (give NAME.key, not NAME.pub)" :
			 rc == -EINVAL ? "not a key file (weft keygen writes one)" :
					 weft_file_strerror(rc));
		errno = -rc;
		return NULL;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		snprintf(err, errsz, "out of memory");
		return NULL;
	}
	snprintf(c->endpoint, sizeof(c->endpoint), "%s", o->endpoint);
	c->zctx = zmq_ctx_new();
	if (!c->zctx) {
		snprintf(err, errsz, "zmq_ctx_new: %s", zmq_strerror(errno));
		goto out_free;
	}
	gethostname(host, sizeof(host) - 1);
	so.zctx = c->zctx;
	so.endpoint = o->endpoint;
	so.server_key = server_pub;
	so.public_key = pub;
	so.secret_key = sec;
	so.role = WIRE_ROLE_CLIENT;
	so.host = host;
	so.version = WEFT_VERSION;
	so.blocking = true;
	so.log_name = "client";
	so.ops = &client_session_ops;
	so.ctx = c;
	c->s = session_new(&so);
	explicit_bzero(sec, sizeof(sec));
	if (!c->s) {
		snprintf(err, errsz, "--to %s: %s", o->endpoint,
			 errno == EINVAL ? "not a ZeroMQ endpoint (tcp://HOST:PORT)" :
					   strerror(errno));
		goto out_free;
	}
	rc = session_connect(c->s);
	if (rc) {
		snprintf(err, errsz, "--to %s: %s", o->endpoint,
			 rc == -EINVAL ? "not a ZeroMQ endpoint (tcp://HOST:PORT)" :
					 zmq_strerror(-rc));
		errno = -rc;
		goto out_free;
	}
	timeout = o->timeout_ms > 0 ? o->timeout_ms : AGGD_CLIENT_TIMEOUT_MS;
	deadline = mono_ms() + (uint64_t)timeout;
	while (!session_up(c->s)) {
		Weft__Envelope *e = NULL;
		uint64_t now = mono_ms();

		if (c->refused) {
			snprintf(
				err, errsz,
				"%s refused this client's key: add its public key to the "
				"aggregator's allow-list as 'client KEY NAME' (weft keygen prints the "
				"line)",
				o->endpoint);
			errno = EACCES;
			goto out_free;
		}
		if (now >= deadline) {
			snprintf(
				err, errsz,
				"no answer from %s in %d ms (is an aggregator running there, and is "
				"--server-key its public key?)%s",
				o->endpoint, timeout,
				c->handshake_failed ? "; the secure handshake failed" : "");
			errno = ETIMEDOUT;
			goto out_free;
		}
		rc = aggd_client_recv(c, (int)(deadline - now > 100 ? 100 : deadline - now), &e);
		if (rc == 1 && e->body_case == WEFT__ENVELOPE__BODY_ERROR) {
			/* refused before Welcome (a key of another role): say why, now */
			snprintf(err, errsz, "%s refused this client: %s", o->endpoint,
				 e->error->message);
			wire_free(e);
			errno = EACCES;
			goto out_free;
		}
		if (rc == 1)
			wire_free(e); /* nothing else can come before Welcome */
	}
	return c;

out_free:
	aggd_client_free(c);
	if (!errno)
		errno = EIO;
	return NULL;
}

void aggd_client_free(struct aggd_client *c)
{
	int e = errno;

	if (!c)
		return;
	session_free(c->s);
	if (c->zctx)
		zmq_ctx_term(c->zctx);
	free(c->subs);
	free(c->stops);
	free(c);
	errno = e;
}

static int sub_add(struct aggd_client *c, uint64_t query_id)
{
	struct csub *nv;

	for (size_t i = 0; i < c->nsubs; i++)
		if (c->subs[i].id == query_id)
			return 0;
	nv = realloc(c->subs, (c->nsubs + 1) * sizeof(*nv));
	if (!nv)
		return -ENOMEM;
	c->subs = nv;
	c->subs[c->nsubs].id = query_id;
	c->subs[c->nsubs].next = 0;
	c->subs[c->nsubs].next_batch = 0;
	c->subs[c->nsubs].renew_seq = 0;
	c->subs[c->nsubs].gone = false;
	c->nsubs++;
	return 0;
}

int aggd_client_subscribe(struct aggd_client *c, uint64_t query_id)
{
	Weft__Envelope e;
	Weft__Subscribe s;
	int rc;

	if (!c || !query_id)
		return -EINVAL;
	rc = sub_add(c, query_id);
	if (rc)
		return rc;
	weft__subscribe__init(&s);
	s.query_id = query_id;
	s.has_from_window = true; /* every window the aggregator still retains, then on */
	s.from_window = 0;
	s.has_from_row_batch = true; /* and a stream's rows it still keeps */
	s.from_row_batch = 1;
	weft__envelope__init(&e);
	e.body_case = WEFT__ENVELOPE__BODY_SUBSCRIBE;
	e.subscribe = &s;
	return aggd_client_send(c, &e);
}

int aggd_client_remember(struct aggd_client *c, uint64_t query_id)
{
	if (!c || !query_id)
		return -EINVAL;
	return sub_add(c, query_id);
}

int aggd_client_stop(struct aggd_client *c, uint64_t query_id)
{
	bool known = false;

	if (!c || !query_id)
		return -EINVAL;
	for (size_t i = 0; i < c->nstops; i++)
		if (c->stops[i].id == query_id) {
			c->stops[i].done = false; /* asked again: until it is done again */
			known = true;
		}
	if (!known) {
		struct cstop *nv = realloc(c->stops, (c->nstops + 1) * sizeof(*nv));

		if (!nv)
			return -ENOMEM;
		c->stops = nv;
		c->stops[c->nstops++] = (struct cstop){ .id = query_id };
	}
	return stop_send(c, query_id) ? 0 : -EAGAIN;
}

void aggd_client_progress(struct aggd_client *c, uint64_t query_id, uint64_t next_window)
{
	for (size_t i = 0; c && i < c->nsubs; i++)
		if (c->subs[i].id == query_id && next_window > c->subs[i].next)
			c->subs[i].next = next_window;
}

bool aggd_client_sub_gone(const struct aggd_client *c, uint64_t query_id)
{
	for (size_t i = 0; c && i < c->nsubs; i++)
		if (c->subs[i].id == query_id)
			return c->subs[i].gone;
	return false;
}

const char *aggd_client_server_name(const struct aggd_client *c)
{
	return c ? session_server_name(c->s) : "";
}

uint64_t aggd_client_rejected(const struct aggd_client *c)
{
	struct session_stats st = { 0 };

	if (c)
		session_stats(c->s, &st);
	return st.rejected;
}
