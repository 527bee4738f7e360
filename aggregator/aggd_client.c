// SPDX-License-Identifier: Apache-2.0
/*
 * A client's connection to an aggregator (`weft submit`, `weft status`, `weft cancel`).
 *
 * A DEALER socket, CURVE client pinned to the aggregator's public key, with a monitor that
 * reports each completed handshake: every new connection (the first, and each reconnect
 * after the aggregator restarted or the network dropped) begins with Hello, and once
 * welcomed again the client renews its subscriptions.  While waiting for messages it sends
 * a heartbeat every interval the Welcome named, so that the aggregator keeps it (a client
 * silent for 3 intervals is forgotten with its subscriptions).
 *
 * Every message from the aggregator is decoded and checked (wire_decode, a body the
 * aggregator may send, increasing seq per aggregator instance); failures are counted and
 * dropped, never acted on.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>
#include "aggregator/aggd.h"
#include "base/file.h"
#include "base/log.h"

#define NOT_WELCOMED "not welcomed: send Hello first"

struct aggd_client {
	void *zctx, *sock, *mon;
	char endpoint[512];
	uint64_t instance, seq;
	struct wire_seq rx;
	bool welcomed, refused, handshake_failed;
	char server[AGGD_MAX_HOST];
	uint64_t hb_ms, next_hb;
	struct csub {
		uint64_t id, next; /* the next window the caller has not seen */
	} * subs;
	size_t nsubs;
	uint64_t rejected;
};

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000ULL + (uint64_t)ts.tv_nsec / 1000000ULL;
}

static uint64_t real_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

int aggd_client_send(struct aggd_client *c, Weft__Envelope *e)
{
	if (!c || !e)
		return -EINVAL;
	e->version = WIRE_VERSION;
	e->seq = ++c->seq;
	return wire_send(c->sock, NULL, 0, e, false);
}

static void client_hello(struct aggd_client *c)
{
	Weft__Envelope e;
	Weft__Hello h;
	char host[256] = "";

	gethostname(host, sizeof(host) - 1);
	weft__hello__init(&h);
	h.role = "client";
	h.host = host;
	h.version = WEFT_VERSION;
	h.instance = c->instance;
	weft__envelope__init(&e);
	e.body_case = WEFT__ENVELOPE__BODY_HELLO;
	e.hello = &h;
	c->welcomed = false;
	aggd_client_send(c, &e);
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
		weft__envelope__init(&e);
		e.body_case = WEFT__ENVELOPE__BODY_SUBSCRIBE;
		e.subscribe = &s;
		aggd_client_send(c, &e);
	}
}

static void client_heartbeat(struct aggd_client *c)
{
	Weft__Envelope e;
	Weft__Heartbeat hb;

	weft__heartbeat__init(&hb);
	hb.time_ns = real_ns();
	weft__envelope__init(&e);
	e.body_case = WEFT__ENVELOPE__BODY_HEARTBEAT;
	e.heartbeat = &hb;
	aggd_client_send(c, &e);
}

static void client_monitor(struct aggd_client *c)
{
	for (;;) {
		zmq_msg_t m;
		uint16_t event = 0;
		int more = 0;
		size_t msz = sizeof(more);

		zmq_msg_init(&m);
		if (zmq_msg_recv(&m, c->mon, ZMQ_DONTWAIT) < 0) {
			zmq_msg_close(&m);
			return;
		}
		if (zmq_msg_size(&m) >= 2)
			memcpy(&event, zmq_msg_data(&m), 2);
		zmq_getsockopt(c->mon, ZMQ_RCVMORE, &more, &msz);
		zmq_msg_close(&m);
		while (more) {
			zmq_msg_init(&m);
			if (zmq_msg_recv(&m, c->mon, ZMQ_DONTWAIT) < 0)
				more = 0;
			else
				zmq_getsockopt(c->mon, ZMQ_RCVMORE, &more, &msz);
			zmq_msg_close(&m);
		}
		if (event == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) {
			log_debug("client: connected to %s", c->endpoint);
			client_hello(c);
		} else if (event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) {
			c->refused = true;
		} else if (event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL ||
			   event == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL) {
			c->handshake_failed = true;
		} else if (event == ZMQ_EVENT_DISCONNECTED) {
			if (c->welcomed)
				log_info("client: lost %s; reconnecting", c->endpoint);
			c->welcomed = false;
		}
	}
}

/*
 * Reads one message if there is one; handles Welcome and the "send Hello first" error
 * itself.  1 with *out, 0 if nothing for the caller, -errno.
 */
static int client_read(struct aggd_client *c, Weft__Envelope **out)
{
	zmq_msg_t m;
	Weft__Envelope *e;
	char why[256];
	int more = 0;
	size_t msz = sizeof(more);

	zmq_msg_init(&m);
	if (zmq_msg_recv(&m, c->sock, ZMQ_DONTWAIT) < 0) {
		zmq_msg_close(&m);
		return errno == EAGAIN ? 0 : -errno;
	}
	zmq_getsockopt(c->sock, ZMQ_RCVMORE, &more, &msz);
	e = more ? NULL : wire_decode(zmq_msg_data(&m), zmq_msg_size(&m), why, sizeof(why));
	zmq_msg_close(&m);
	while (more) {
		zmq_msg_init(&m);
		if (zmq_msg_recv(&m, c->sock, ZMQ_DONTWAIT) < 0)
			more = 0;
		else
			zmq_getsockopt(c->sock, ZMQ_RCVMORE, &more, &msz);
		zmq_msg_close(&m);
	}
	if (!e || !wire_body_from_server(e->body_case)) {
		c->rejected++;
		log_debug("client: rejected a message: %s", e ? "not from an aggregator" : why);
		wire_free(e);
		return 0;
	}
	if (e->body_case == WEFT__ENVELOPE__BODY_WELCOME) {
		bool again = c->rx.instance != 0;

		c->rx.instance = e->welcome->instance;
		c->rx.last = e->seq;
		snprintf(c->server, sizeof(c->server), "%s", e->welcome->aggregator);
		c->hb_ms = e->welcome->heartbeat_ms;
		c->next_hb = mono_ms() + c->hb_ms;
		c->welcomed = true;
		wire_free(e);
		if (again)
			client_subscribe_all(c);
		return 0;
	}
	if (!wire_seq_accept(&c->rx, c->rx.instance, e->seq)) {
		c->rejected++;
		wire_free(e);
		return 0;
	}
	if (e->body_case == WEFT__ENVELOPE__BODY_ERROR &&
	    strcmp(e->error->message, NOT_WELCOMED) == 0) {
		/* the aggregator restarted and forgot this connection */
		wire_free(e);
		client_hello(c);
		return 0;
	}
	*out = e;
	return 1;
}

int aggd_client_recv(struct aggd_client *c, int timeout_ms, Weft__Envelope **out)
{
	uint64_t deadline = mono_ms() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0);

	if (!c || !out)
		return -EINVAL;
	*out = NULL;
	for (;;) {
		zmq_pollitem_t items[2] = {
			{ .socket = c->sock, .events = ZMQ_POLLIN },
			{ .socket = c->mon, .events = ZMQ_POLLIN },
		};
		uint64_t now = mono_ms();
		long wait = deadline > now ? (long)(deadline - now) : 0;
		int rc;

		if (c->welcomed && c->hb_ms) {
			if (now >= c->next_hb) {
				client_heartbeat(c);
				c->next_hb = now + c->hb_ms;
			}
			if ((long)(c->next_hb - now) < wait)
				wait = (long)(c->next_hb - now);
		}
		if (zmq_poll(items, 2, wait) < 0) {
			if (errno == EINTR)
				return 0; /* a signal: let the caller look */
			return -errno;
		}
		if (items[1].revents & ZMQ_POLLIN)
			client_monitor(c);
		while (items[0].revents & ZMQ_POLLIN) {
			rc = client_read(c, out);
			if (rc != 0)
				return rc;
			/* handled internally; more may be queued */
			{
				int ev = 0;
				size_t esz = sizeof(ev);

				if (zmq_getsockopt(c->sock, ZMQ_EVENTS, &ev, &esz) != 0 ||
				    !(ev & ZMQ_POLLIN))
					break;
			}
		}
		if (mono_ms() >= deadline)
			return 0;
	}
}

struct aggd_client *aggd_client_connect(const struct aggd_client_opts *o, char *err, size_t errsz)
{
	struct aggd_client *c;
	char server_pub[WIRE_KEY_LEN + 1], pub[WIRE_KEY_LEN + 1], sec[WIRE_KEY_LEN + 1];
	char ep[64];
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
	if (getrandom(&c->instance, sizeof(c->instance), 0) != sizeof(c->instance))
		c->instance = real_ns() ^ ((uint64_t)getpid() << 32);
	c->instance |= 1;
	c->zctx = zmq_ctx_new();
	if (!c->zctx) {
		snprintf(err, errsz, "zmq_ctx_new: %s", zmq_strerror(errno));
		goto out_free;
	}
	c->sock = wire_client_socket(c->zctx, o->endpoint, server_pub, pub, sec);
	explicit_bzero(sec, sizeof(sec));
	if (!c->sock) {
		snprintf(err, errsz, "--to %s: %s", o->endpoint,
			 errno == EINVAL ? "not a ZeroMQ endpoint (tcp://HOST:PORT)" :
					   zmq_strerror(errno));
		goto out_free;
	}
	snprintf(ep, sizeof(ep), "inproc://weft-client-mon-%p", (void *)c);
	if (zmq_socket_monitor(c->sock, ep,
			       ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_DISCONNECTED |
				       ZMQ_EVENT_HANDSHAKE_FAILED_AUTH |
				       ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
				       ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL) != 0 ||
	    !(c->mon = zmq_socket(c->zctx, ZMQ_PAIR)) || zmq_connect(c->mon, ep) != 0) {
		snprintf(err, errsz, "monitoring the socket: %s", zmq_strerror(errno));
		goto out_free;
	}
	timeout = o->timeout_ms > 0 ? o->timeout_ms : 5000;
	deadline = mono_ms() + (uint64_t)timeout;
	while (!c->welcomed) {
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
	if (c->mon)
		zmq_close(c->mon);
	if (c->sock) {
		zmq_socket_monitor(c->sock, NULL, 0);
		zmq_close(c->sock);
	}
	if (c->zctx)
		zmq_ctx_term(c->zctx);
	free(c->subs);
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

void aggd_client_progress(struct aggd_client *c, uint64_t query_id, uint64_t next_window)
{
	for (size_t i = 0; c && i < c->nsubs; i++)
		if (c->subs[i].id == query_id && next_window > c->subs[i].next)
			c->subs[i].next = next_window;
}

const char *aggd_client_server_name(const struct aggd_client *c)
{
	return c ? c->server : "";
}

uint64_t aggd_client_rejected(const struct aggd_client *c)
{
	return c ? c->rejected : 0;
}
