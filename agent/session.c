// SPDX-License-Identifier: Apache-2.0
/*
 * The sender's session (agent/session.h): one DEALER socket at a time, its monitor, and the
 * protocol every sender speaks on it, whatever it sends besides.
 *
 * Transitions:
 *     down  -> hello   the back-off expired (or session_connect()): a new socket, Hello queued
 *                      first (ZeroMQ delivers it once the CURVE handshake is done)
 *     hello -> up      a Welcome, in sequence: Welcome.last_seq acknowledges the spool, which
 *                      is rewound and sent again in order with new seqs
 *     up    -> hello   the Error "not welcomed" (the aggregator restarted or forgot us while
 *                      the connection stayed): Hello again on the same socket
 *     any   -> down    the monitor reports a disconnect (ZeroMQ's heartbeats notice a silent
 *                      peer too), or no Welcome 10 s after the handshake: the socket is closed
 *                      with linger 0, dropping whatever ZeroMQ still queued
 * Closing the socket is what makes the acknowledgement rule sound: a new socket starts with an
 * empty queue, so each connection delivers a prefix of what was sent on it, and
 * Welcome.last_seq then tells exactly which partials arrived (docs/protocol.md).
 *
 * Seq: one counter per sender instance, taken at transmission: resends get a new seq, so the
 * aggregator always sees them increase.  A spool with reserve() (a child aggregator, whose
 * instance outlives its restarts) makes the seqs durable before the bytes leave.
 *
 * Received: every message is decoded and checked (one part, wire_decode(), a body an
 * aggregator sends, nothing but a Welcome (or an Error refusing the Hello, which goes to the
 * caller) before the Welcome, seq strictly increasing per
 * aggregator instance, the Welcome's own included: a replayed or stale Welcome would drop
 * partials from the spool that were never merged); a failure is counted and logged at debug,
 * never acted on.
 *
 * Must never: block unless opts.blocking, exit, or print anything but log lines.  Owns its
 * socket, its monitor and copies of its options; not the context, nor the spool.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>
#include "base/zmq_dl.h"
#include "agent/session.h"
#include "base/log.h"

#define NS ((uint64_t)1000000000)
#define MS ((uint64_t)1000000)
#define MONITOR_EVENTS                                                                \
	(ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_HANDSHAKE_SUCCEEDED |                     \
	 ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL | \
	 ZMQ_EVENT_HANDSHAKE_FAILED_AUTH)

struct session {
	struct session_opts o;
	char endpoint[512];
	char server_key[WIRE_KEY_LEN + 1], pub[WIRE_KEY_LEN + 1], sec[WIRE_KEY_LEN + 1];
	char *host, *version, *kernel, *scope, **features;
	size_t nfeatures;
	char log_name[32];
	uint64_t instance;
	uint64_t seq; /* the last seq this instance used */

	void *sock, *mon;
	enum session_state state;
	bool handshake_ok; /* on this socket */
	bool welcomed_once;
	uint64_t hello_seq, hello_at, reconnect_at, backoff; /* CLOCK_MONOTONIC ns */
	uint64_t hb_ns, next_hb;
	struct wire_seq rx; /* the aggregator's seqs */
	uint64_t srv_instance;
	char srv_name[256];
	struct session_stats st;
};

static uint64_t clock_ns(clockid_t c)
{
	struct timespec ts;

	clock_gettime(c, &ts);
	return (uint64_t)ts.tv_sec * NS + (uint64_t)ts.tv_nsec;
}

static uint64_t mono_ns(void)
{
	return clock_ns(CLOCK_MONOTONIC);
}

/* ---------------------------------------------------------------- sending */

static int send_env(struct session *s, Weft__Envelope *e)
{
	void *buf;
	size_t len;
	int rc;

	if (!s->sock)
		return -ENOTCONN;
	e->version = WIRE_VERSION;
	e->seq = s->seq + 1;
	rc = wire_encode(e, &buf, &len);
	if (rc) {
		log_err("%s: cannot encode a %s: %s", s->log_name, wire_body_name(e->body_case),
			strerror(-rc));
		return rc;
	}
	rc = wire_send_bytes(s->sock, NULL, 0, buf, len, !s->o.blocking);
	free(buf);
	if (rc) {
		log_debug("%s: %s not sent: %s", s->log_name, wire_body_name(e->body_case),
			  strerror(-rc));
		return rc;
	}
	s->seq++;
	s->st.sent++;
	return 0;
}

int session_send(struct session *s, Weft__Envelope *e)
{
	if (!s || !e)
		return -EINVAL;
	if (s->state != SESSION_UP)
		return -ENOTCONN;
	return send_env(s, e);
}

static uint64_t *running_ids(struct session *s, size_t *n)
{
	*n = 0;
	return s->o.ops->running ? s->o.ops->running(s->o.ctx, n) : NULL;
}

static void send_hello(struct session *s)
{
	Weft__Envelope e = WEFT__ENVELOPE__INIT;
	Weft__Hello h = WEFT__HELLO__INIT;

	h.role = (char *)wire_role_name(s->o.role);
	h.host = s->host;
	h.version = s->version;
	h.instance = s->instance;
	h.kernel = s->kernel;
	h.scope = s->scope;
	h.features = s->features;
	h.n_features = s->nfeatures;
	h.running = running_ids(s, &h.n_running);
	e.body_case = WEFT__ENVELOPE__BODY_HELLO;
	e.hello = &h;
	s->hello_seq = 0;
	if (send_env(s, &e) == 0)
		s->hello_seq = s->seq;
	free(h.running);
}

static void send_heartbeat(struct session *s)
{
	const struct session_spool_ops *sp = s->o.spool_ops;
	Weft__Envelope e = WEFT__ENVELOPE__INIT;
	Weft__Heartbeat h = WEFT__HEARTBEAT__INIT;

	h.time_ns = clock_ns(CLOCK_REALTIME);
	h.running = running_ids(s, &h.n_running);
	if (sp) {
		h.has_spooled = true;
		h.spooled = sp->count(s->o.spool);
		h.has_spool_dropped = true;
		h.spool_dropped = sp->dropped ? sp->dropped(s->o.spool) : 0;
	}
	e.body_case = WEFT__ENVELOPE__BODY_HEARTBEAT;
	e.heartbeat = &h;
	send_env(s, &e);
	free(h.running);
}

/* One spooled partial with seq: 0, or -errno (-EAGAIN: the queue is full). */
static int send_partial(struct session *s, uint64_t seq, const void *body, size_t len)
{
	const struct session_spool_ops *sp = s->o.spool_ops;
	Weft__Envelope__BodyCase kind =
		sp->kind ? sp->kind(s->o.spool) : WEFT__ENVELOPE__BODY_PARTIAL;
	void *env;
	size_t elen;
	int rc = wire_envelope_wrap(seq, kind, body, len, &env, &elen);

	if (rc) {
		log_err("%s: cannot wrap a partial: %s", s->log_name, strerror(-rc));
		return rc;
	}
	rc = wire_send_bytes(s->sock, NULL, 0, env, elen, !s->o.blocking);
	free(env);
	if (rc == 0)
		s->st.sent++;
	return rc;
}

/* Partials go in order, each transmission with a fresh seq; the first that ZeroMQ does not
 * take stops the round (order matters: see the top). */
void session_flush(struct session *s)
{
	const struct session_spool_ops *sp = s ? s->o.spool_ops : NULL;
	const void *buf;
	size_t len;

	if (!sp || s->state != SESSION_UP || !sp->next(s->o.spool, &len))
		return;
	if (sp->reserve) {
		uint64_t first = s->seq + 1;
		ssize_t n = sp->reserve(s->o.spool, first);

		if (n <= 0)
			return;
		s->seq += (uint64_t)n; /* durable now: used, sent or not */
		for (ssize_t k = 0; k < n && (buf = sp->next(s->o.spool, &len)); k++) {
			if (send_partial(s, first + (uint64_t)k, buf, len))
				return;
			sp->mark_sent(s->o.spool, first + (uint64_t)k);
		}
		return;
	}
	while ((buf = sp->next(s->o.spool, &len))) {
		if (send_partial(s, s->seq + 1, buf, len))
			return; /* -EAGAIN: the next round tries again */
		s->seq++;
		sp->mark_sent(s->o.spool, s->seq);
	}
}

/* ---------------------------------------------------------------- the connection */

static void sock_close(struct session *s)
{
	int zero = 0;

	wire_monitor_close(s->sock, s->mon);
	s->mon = NULL;
	if (s->sock) {
		/* linger 0: what ZeroMQ still queued dies with the socket (see the top) */
		zmq_setsockopt(s->sock, ZMQ_LINGER, &zero, sizeof(zero));
		zmq_close(s->sock);
		s->sock = NULL;
	}
}

static void go_down(struct session *s, const char *why)
{
	bool was_up = s->state == SESSION_UP;

	sock_close(s);
	s->state = SESSION_DOWN;
	s->reconnect_at = mono_ns() + s->backoff;
	s->backoff = s->backoff * 2 > SESSION_BACKOFF_MAX_MS * MS ? SESSION_BACKOFF_MAX_MS * MS :
								    s->backoff * 2;
	if (s->o.ops->lost)
		s->o.ops->lost(s->o.ctx, why, was_up);
	else
		log_debug("%s: connection to %s ended (%s)", s->log_name, s->endpoint, why);
}

int session_connect(struct session *s)
{
	int rc;

	if (!s)
		return -EINVAL;
	if (s->sock)
		return 0;
	s->sock = wire_client_socket(s->o.zctx, s->endpoint, s->server_key, s->pub, s->sec);
	if (!s->sock)
		return -errno;
	s->mon = wire_monitor_open(s->o.zctx, s->sock, MONITOR_EVENTS);
	if (!s->mon) {
		rc = -errno;
		sock_close(s);
		return rc;
	}
	s->state = SESSION_HELLO;
	s->handshake_ok = false;
	s->hello_at = mono_ns();
	/* queued until the handshake completes: always the first message on the wire */
	send_hello(s);
	return 0;
}

void session_poll_events(struct session *s)
{
	uint32_t val = 0;
	int ev;

	while (s && s->mon && (ev = wire_monitor_read(s->mon, &val))) {
		switch (ev) {
		case ZMQ_EVENT_HANDSHAKE_SUCCEEDED:
			s->handshake_ok = true;
			s->hello_at = mono_ns();
			if (s->o.ops->connected)
				s->o.ops->connected(s->o.ctx);
			break;
		case ZMQ_EVENT_HANDSHAKE_FAILED_AUTH:
			if (s->o.ops->refused)
				s->o.ops->refused(s->o.ctx, true, val);
			break;
		case ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL:
		case ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL:
			if (s->o.ops->refused)
				s->o.ops->refused(s->o.ctx, false, val);
			break;
		case ZMQ_EVENT_DISCONNECTED:
			go_down(s, "disconnected");
			return; /* the monitor is gone with the socket */
		default:
			break;
		}
	}
}

int session_poll_items(struct session *s, zmq_pollitem_t *it)
{
	if (!s || !s->sock)
		return 0;
	it[0] = (zmq_pollitem_t){ .socket = s->sock, .events = ZMQ_POLLIN };
	it[1] = (zmq_pollitem_t){ .socket = s->mon, .events = ZMQ_POLLIN };
	return 2;
}

/* ---------------------------------------------------------------- receiving */

static void on_welcome(struct session *s, const Weft__Welcome *w)
{
	const struct session_spool_ops *sp = s->o.spool_ops;
	struct session_welcome sw = { .w = w, .first = !s->welcomed_once };
	uint64_t last = w->has_last_seq ? w->last_seq : 0;

	if (s->hello_seq && last >= s->hello_seq) {
		/* the aggregator counted our Hello as merged data: trust only what came before;
		 * and send above what it believes it has, or it would take our next partials
		 * for repeats */
		log_warn("%s: Welcome.last_seq %" PRIu64 " is not below our Hello's seq %" PRIu64,
			 s->log_name, last, s->hello_seq);
		if (last > s->seq)
			s->seq = last;
		last = s->hello_seq - 1;
	}
	sw.restarted = s->srv_instance && s->srv_instance != w->instance;
	s->srv_instance = w->instance;
	snprintf(s->srv_name, sizeof(s->srv_name), "%s", w->aggregator);
	if (sp) {
		sw.acked = sp->ack(s->o.spool, last);
		sw.resend = sp->rewind(s->o.spool);
	}
	s->st.resent += sw.resend;
	s->st.connects++;
	s->state = SESSION_UP;
	s->welcomed_once = true;
	s->backoff = SESSION_BACKOFF_MIN_MS * MS;
	s->hb_ns = w->heartbeat_ms * MS;
	s->next_hb = mono_ns() + s->hb_ns;
	s->o.ops->welcomed(s->o.ctx, &sw);
	session_flush(s);
}

static bool is_not_welcomed(const Weft__Envelope *e)
{
	return e->body_case == WEFT__ENVELOPE__BODY_ERROR &&
	       strcmp(e->error->message, SESSION_NOT_WELCOMED) == 0;
}

static int reject(struct session *s, Weft__Envelope *e)
{
	s->st.rejected++;
	wire_free(e);
	return 1;
}

int session_recv(struct session *s, Weft__Envelope **out)
{
	Weft__Envelope *e;
	zmq_msg_t m;
	char why[256];
	int more = 0;
	size_t sz = sizeof(more), len;

	if (!s || !out)
		return -EINVAL;
	*out = NULL;
	if (!s->sock)
		return 0;
	zmq_msg_init(&m);
	if (zmq_msg_recv(&m, s->sock, ZMQ_DONTWAIT) < 0) {
		int err = errno;

		zmq_msg_close(&m);
		return err == EAGAIN || err == EINTR ? 0 : -err;
	}
	zmq_getsockopt(s->sock, ZMQ_RCVMORE, &more, &sz);
	if (more) {
		/* one envelope is one part: a multipart message is malformed */
		zmq_msg_close(&m);
		while (more) {
			zmq_msg_init(&m);
			if (zmq_msg_recv(&m, s->sock, 0) < 0)
				more = 0;
			else
				zmq_getsockopt(s->sock, ZMQ_RCVMORE, &more, &sz);
			zmq_msg_close(&m);
		}
		log_debug("%s: rejected a multipart message", s->log_name);
		return reject(s, NULL);
	}
	len = zmq_msg_size(&m);
	e = wire_decode(zmq_msg_data(&m), len, why, sizeof(why));
	zmq_msg_close(&m);
	if (!e) {
		log_debug("%s: rejected %zu bytes from the aggregator: %s", s->log_name, len, why);
		return reject(s, NULL);
	}
	if (!wire_body_from_server(e->body_case)) {
		log_debug("%s: rejected a %s: not an aggregator's message", s->log_name,
			  wire_body_name(e->body_case));
		return reject(s, e);
	}
	if (e->body_case == WEFT__ENVELOPE__BODY_WELCOME) {
		/* a new aggregator instance starts its seqs anew; the same one only goes up */
		if (!wire_seq_accept(&s->rx, e->welcome->instance, e->seq)) {
			log_debug("%s: dropped a welcome with seq %" PRIu64 " (last %" PRIu64 ")",
				  s->log_name, e->seq, s->rx.last);
			return reject(s, e);
		}
		s->st.received++;
		on_welcome(s, e->welcome);
		wire_free(e);
		return 1;
	}
	if (s->state != SESSION_UP) {
		if (s->state == SESSION_HELLO && is_not_welcomed(e)) {
			/* the answers to what we sent before our Hello again: expected */
			wire_free(e);
			return 1;
		}
		if (s->state == SESSION_HELLO && e->body_case == WEFT__ENVELOPE__BODY_ERROR) {
			/* the aggregator refused our Hello (a key of another role, a bad Hello):
			 * the caller says why instead of waiting for a Welcome that cannot come */
			s->st.received++;
			*out = e;
			return 1;
		}
		log_debug("%s: rejected a %s before the Welcome", s->log_name,
			  wire_body_name(e->body_case));
		return reject(s, e);
	}
	if (!wire_seq_accept(&s->rx, s->srv_instance, e->seq)) {
		log_debug("%s: dropped a %s with seq %" PRIu64 " (last %" PRIu64 ")", s->log_name,
			  wire_body_name(e->body_case), e->seq, s->rx.last);
		return reject(s, e);
	}
	s->st.received++;
	if (e->body_case == WEFT__ENVELOPE__BODY_ACK) {
		if (s->o.spool_ops)
			s->o.spool_ops->ack(s->o.spool, e->ack->upto);
		wire_free(e);
		return 1;
	}
	if (is_not_welcomed(e)) {
		/* the aggregator restarted or forgot this connection: start it over */
		log_info("%s: %s forgot this connection: saying Hello again", s->log_name,
			 s->srv_name);
		s->state = SESSION_HELLO;
		s->hello_at = mono_ns();
		send_hello(s);
		wire_free(e);
		return 1;
	}
	*out = e;
	return 1;
}

/* ---------------------------------------------------------------- time */

void session_tick(struct session *s)
{
	uint64_t now = mono_ns();
	int rc;

	if (!s)
		return;
	switch (s->state) {
	case SESSION_DOWN:
		if (now < s->reconnect_at)
			break;
		rc = session_connect(s);
		if (rc) {
			log_warn("%s: cannot connect to %s: %s", s->log_name, s->endpoint,
				 strerror(-rc));
			go_down(s, strerror(-rc));
		}
		break;
	case SESSION_HELLO:
		if (s->handshake_ok && now - s->hello_at >= SESSION_WELCOME_TIMEOUT_MS * MS)
			go_down(s, "no Welcome in reply to Hello");
		break;
	case SESSION_UP:
		if (now >= s->next_hb) {
			send_heartbeat(s);
			s->next_hb = now + s->hb_ns;
		}
		session_flush(s);
		break;
	}
}

static uint64_t until(uint64_t now, uint64_t at, uint64_t wait)
{
	if (at <= now)
		return 0;
	return at - now < wait ? at - now : wait;
}

int session_timeout_ms(const struct session *s, int max_ms)
{
	uint64_t now = mono_ns(), wait = (uint64_t)(max_ms > 0 ? max_ms : 0) * MS;
	size_t len;

	if (!s)
		return max_ms;
	switch (s->state) {
	case SESSION_DOWN:
		wait = until(now, s->reconnect_at, wait);
		break;
	case SESSION_HELLO:
		if (s->handshake_ok)
			wait = until(now, s->hello_at + SESSION_WELCOME_TIMEOUT_MS * MS, wait);
		break;
	case SESSION_UP:
		wait = until(now, s->next_hb, wait);
		if (s->o.spool_ops && s->o.spool_ops->next(s->o.spool, &len))
			wait = until(now, now + SESSION_RETRY_MS * MS,
				     wait); /* the queue was full */
		break;
	}
	return (int)((wait + MS - 1) / MS);
}

/* ---------------------------------------------------------------- life cycle */

struct session *session_new(const struct session_opts *o)
{
	struct session *s;

	if (!o || !o->zctx || !o->endpoint || !*o->endpoint || !o->ops || !o->ops->welcomed ||
	    !wire_key_valid(o->server_key) || !wire_key_valid(o->public_key) ||
	    !wire_key_valid(o->secret_key) || o->role == WIRE_ROLE_NONE ||
	    (o->spool_ops &&
	     (!o->spool_ops->next || !o->spool_ops->mark_sent || !o->spool_ops->ack ||
	      !o->spool_ops->rewind || !o->spool_ops->count))) {
		errno = EINVAL;
		return NULL;
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	memcpy(&s->o, o, o->sz && o->sz < sizeof(s->o) ? o->sz : sizeof(s->o));
	if (strlen(o->endpoint) >= sizeof(s->endpoint))
		goto out_inval;
	snprintf(s->endpoint, sizeof(s->endpoint), "%s", o->endpoint);
	memcpy(s->server_key, o->server_key, WIRE_KEY_LEN + 1);
	memcpy(s->pub, o->public_key, WIRE_KEY_LEN + 1);
	memcpy(s->sec, o->secret_key, WIRE_KEY_LEN + 1);
	s->o.endpoint = s->endpoint;
	s->o.server_key = s->server_key;
	s->o.public_key = s->pub;
	s->o.secret_key = s->sec;
	snprintf(s->log_name, sizeof(s->log_name), "%s", o->log_name ? o->log_name : "session");
	s->host = strdup(o->host ? o->host : "");
	s->version = strdup(o->version ? o->version : "");
	if (!s->host || !s->version ||
	    (o->kernel && *o->kernel && !(s->kernel = strdup(o->kernel))) ||
	    (o->scope && *o->scope && !(s->scope = strdup(o->scope))))
		goto out_nomem;
	if (o->nfeatures) {
		s->features = calloc(o->nfeatures, sizeof(*s->features));
		if (!s->features)
			goto out_nomem;
		for (; s->nfeatures < o->nfeatures; s->nfeatures++)
			if (!(s->features[s->nfeatures] = strdup(o->features[s->nfeatures])))
				goto out_nomem;
	}
	s->o.host = s->o.version = s->o.kernel = s->o.scope = NULL; /* ours are above */
	s->o.features = NULL;
	s->instance = o->instance;
	while (!s->instance)
		if (getrandom(&s->instance, sizeof(s->instance), 0) != sizeof(s->instance))
			s->instance = mono_ns() ^ ((uint64_t)getpid() << 32);
	s->seq = o->seq;
	s->state = SESSION_DOWN;
	s->backoff = SESSION_BACKOFF_MIN_MS * MS;
	s->reconnect_at = 0; /* the first tick connects */
	return s;

out_inval:
	session_free(s);
	errno = EINVAL;
	return NULL;
out_nomem:
	session_free(s);
	errno = ENOMEM;
	return NULL;
}

void session_free(struct session *s)
{
	if (!s)
		return;
	wire_monitor_close(s->sock, s->mon);
	if (s->sock)
		zmq_close(s->sock);
	for (size_t i = 0; i < s->nfeatures; i++)
		free(s->features[i]);
	free(s->features);
	free(s->host);
	free(s->version);
	free(s->kernel);
	free(s->scope);
	explicit_bzero(s->sec, sizeof(s->sec));
	free(s);
}

enum session_state session_state(const struct session *s)
{
	return s ? s->state : SESSION_DOWN;
}

bool session_up(const struct session *s)
{
	return s && s->state == SESSION_UP;
}

uint64_t session_instance(const struct session *s)
{
	return s ? s->instance : 0;
}

uint64_t session_seq(const struct session *s)
{
	return s ? s->seq : 0;
}

const char *session_server_name(const struct session *s)
{
	return s ? s->srv_name : "";
}

void session_stats(const struct session *s, struct session_stats *st)
{
	if (s && st)
		*st = s->st;
}
