// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests of the sender's session (agent/session.c), with a real CURVE ROUTER and ZAP
 * handler of the test on loopback playing the aggregator, message by message, and a spool of
 * the test's (struct session_spool_ops) holding packed partials numbered by their window.
 * What must hold:
 *
 *   hello     Hello is the first message on every connection (role, host, instance, the
 *             running ids); nothing else goes out before the Welcome
 *   welcome   Welcome.last_seq drops what was merged and the rest is sent again, in order,
 *             with seqs above the Hello's; a Welcome of the same aggregator instance whose
 *             seq does not increase is rejected, counted, and changes nothing; a new
 *             instance is accepted (restarted)
 *   credit    Ack{upto} drops what was sent at or below upto; heartbeats carry the spool's
 *             counts and the running ids
 *   refuse    garbage, several parts, a body no aggregator sends, anything before the
 *             Welcome, a repeated seq: counted, never handed to the caller
 *   reconnect the aggregator's socket goes away: the session closes its own, says Hello again
 *             on the next connection (same instance, higher seq); a last_seq at or above the
 *             new Hello's seq is trusted only below it, and later seqs go above it
 *   forgot    the Error "not welcomed" makes it say Hello again on the same connection
 *   reserve   a spool with reserve() is given its seqs before anything is sent (a persistent
 *             instance continues from opts.seq); a failed reserve sends nothing
 *   refused   a key the aggregator's allow-list lacks: the refused callback, ZAP status 400
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

#include <cmocka.h>

#include "agent/session.h"
#include "agent/wire.h"
#include "agent/wire_graph.h"
#include "aggregator/zap.h"

#define WAIT_MS 10000 /* only catches a hang */
#define HOST "unit-host"

/* ---------------------------------------------------------------- the test's spool */

struct tentry {
	uint64_t window; /* which partial it is */
	uint64_t seq; /* of its latest transmission; 0: not sent on this connection */
	void *buf;
	size_t len;
	bool graph; /* a packed GraphBatch, not a Partial */
};

struct tspool {
	struct tentry v[64];
	size_t n, nsent;
	bool reserve; /* expose reserve() */
	int fail_reserve; /* that many calls fail */
	int nreserve;
	uint64_t reserved_first, reserved_last;
};

static void tspool_add(struct tspool *sp, uint64_t window)
{
	Weft__Partial p = WEFT__PARTIAL__INIT;
	struct tentry *t = &sp->v[sp->n++];

	assert_true(sp->n <= 64);
	p.query_id = 1;
	p.window = window;
	p.host = HOST;
	t->window = window;
	t->seq = 0;
	t->len = weft__partial__get_packed_size(&p);
	t->buf = malloc(t->len + 1);
	assert_non_null(t->buf);
	weft__partial__pack(&p, t->buf);
}

/* A GraphBatch of window `window`: one task, whose id is the window. */
static void tspool_add_graph(struct tspool *sp, uint64_t window)
{
	struct graph g;
	struct graph_task k = { .trace = { 1, 2 },
				.id = window,
				.service = "s",
				.name = "n",
				.host = "",
				.pid = -1,
				.tid = -1,
				.start = 10,
				.end = 20,
				.attrs = "{}" };
	struct wire_graph_meta m = { .query_id = 1, .window = window, .host = HOST };
	struct tentry *t = &sp->v[sp->n++];
	char why[128];

	assert_true(sp->n <= 64);
	graph_init(&g);
	assert_non_null(graph_add_task(&g, &k));
	t->window = window;
	t->seq = 0;
	t->graph = true;
	assert_int_equal(wire_graph_pack(&m, &g, &t->buf, &t->len, why, sizeof(why)), 0);
	graph_free(&g);
}

static void tspool_pop(struct tspool *sp)
{
	free(sp->v[0].buf);
	memmove(&sp->v[0], &sp->v[1], (sp->n - 1) * sizeof(sp->v[0]));
	sp->n--;
	if (sp->nsent)
		sp->nsent--;
}

static void tspool_free(struct tspool *sp)
{
	while (sp->n)
		tspool_pop(sp);
}

static const void *ts_next(void *ctx, size_t *len)
{
	struct tspool *sp = ctx;

	if (sp->nsent >= sp->n)
		return NULL;
	*len = sp->v[sp->nsent].len;
	return sp->v[sp->nsent].buf;
}

static Weft__Envelope__BodyCase ts_kind(void *ctx)
{
	struct tspool *sp = ctx;

	return sp->nsent < sp->n && sp->v[sp->nsent].graph ? WEFT__ENVELOPE__BODY_GRAPH_BATCH :
							     WEFT__ENVELOPE__BODY_PARTIAL;
}

static ssize_t ts_reserve(void *ctx, uint64_t first)
{
	struct tspool *sp = ctx;

	sp->nreserve++;
	if (sp->fail_reserve) {
		sp->fail_reserve--;
		return -EIO;
	}
	sp->reserved_first = first;
	sp->reserved_last = first + (sp->n - sp->nsent) - 1;
	return (ssize_t)(sp->n - sp->nsent);
}

static void ts_mark_sent(void *ctx, uint64_t seq)
{
	struct tspool *sp = ctx;

	assert_true(sp->nsent < sp->n);
	sp->v[sp->nsent++].seq = seq;
}

static size_t ts_ack(void *ctx, uint64_t upto)
{
	struct tspool *sp = ctx;
	size_t k = 0;

	while (sp->n && sp->v[0].seq && sp->v[0].seq <= upto) {
		tspool_pop(sp);
		k++;
	}
	return k;
}

static size_t ts_rewind(void *ctx)
{
	struct tspool *sp = ctx;

	for (size_t i = 0; i < sp->n; i++)
		sp->v[i].seq = 0;
	sp->nsent = 0;
	return sp->n;
}

static size_t ts_count(void *ctx)
{
	return ((struct tspool *)ctx)->n;
}

static uint64_t ts_dropped(void *ctx)
{
	return 7; /* what heartbeats must carry */
}

static const struct session_spool_ops ts_ops = {
	.kind = ts_kind,
	.next = ts_next,
	.mark_sent = ts_mark_sent,
	.ack = ts_ack,
	.rewind = ts_rewind,
	.count = ts_count,
	.dropped = ts_dropped,
};

static const struct session_spool_ops ts_ops_reserve = {
	.next = ts_next,
	.reserve = ts_reserve,
	.mark_sent = ts_mark_sent,
	.ack = ts_ack,
	.rewind = ts_rewind,
	.count = ts_count,
	.dropped = ts_dropped,
};

/* ---------------------------------------------------------------- the harness */

struct env {
	void *sctx, *cctx, *srv;
	struct wire_zap *zap;
	char ep[128];
	char spub[WIRE_KEY_LEN + 1], ssec[WIRE_KEY_LEN + 1];
	char cpub[WIRE_KEY_LEN + 1], csec[WIRE_KEY_LEN + 1];
	char xpub[WIRE_KEY_LEN + 1], xsec[WIRE_KEY_LEN + 1]; /* not allow-listed */
	uint8_t id[256]; /* the session's routing id on the current connection */
	size_t idlen;
	uint64_t seq; /* the server's */
	struct wire_seq rx; /* the session's seqs as the server checks them */
	uint64_t instance;
	Weft__Envelope *q[64]; /* received by the server, not yet looked at */
	size_t nq;
	struct session *s;
	struct tspool sp;
	/* what the callbacks saw */
	int welcomed, lost, lost_up, connected, refused_auth, refused_other;
	uint32_t refused_status;
	struct session_welcome last;
	uint64_t last_instance;
	Weft__Envelope *given[16]; /* handed to the caller by session_recv() */
	size_t ngiven;
};

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static uint64_t *cb_running(void *ctx, size_t *n)
{
	uint64_t *v = calloc(2, sizeof(*v));

	*n = 0;
	if (v) {
		v[0] = 5;
		*n = 1;
	}
	return v;
}

static void cb_connected(void *ctx)
{
	((struct env *)ctx)->connected++;
}

static void cb_welcomed(void *ctx, const struct session_welcome *sw)
{
	struct env *e = ctx;

	e->welcomed++;
	e->last = *sw;
	e->last.w = NULL; /* freed after the callback */
	e->last_instance = sw->w->instance;
}

static void cb_lost(void *ctx, const char *why, bool was_up)
{
	struct env *e = ctx;

	e->lost++;
	e->lost_up += was_up;
}

static void cb_refused(void *ctx, bool auth, uint32_t status)
{
	struct env *e = ctx;

	if (auth) {
		e->refused_auth++;
		e->refused_status = status;
	} else {
		e->refused_other++;
	}
}

static const struct session_ops cb_ops = {
	.running = cb_running,
	.connected = cb_connected,
	.welcomed = cb_welcomed,
	.lost = cb_lost,
	.refused = cb_refused,
};

static void srv_open(struct env *e)
{
	int zero = 0;

	e->srv = wire_server_socket(e->sctx, e->ep, e->spub, e->ssec);
	assert_non_null(e->srv);
	zmq_setsockopt(e->srv, ZMQ_LINGER, &zero, sizeof(zero));
}

static void srv_close(struct env *e)
{
	zmq_close(e->srv);
	e->srv = NULL;
}

static int setup(void **state)
{
	struct env *e = calloc(1, sizeof(*e));
	struct wire_allowlist al;
	char text[256];
	size_t sz;
	int line;

	assert_non_null(e);
	assert_int_equal(wire_keypair_new(e->spub, e->ssec), 0);
	assert_int_equal(wire_keypair_new(e->cpub, e->csec), 0);
	assert_int_equal(wire_keypair_new(e->xpub, e->xsec), 0);
	snprintf(text, sizeof(text), "agent %s unit\n", e->cpub);
	assert_int_equal(wire_allowlist_parse(text, strlen(text), &al, &line), 0);
	e->sctx = zmq_ctx_new();
	e->cctx = zmq_ctx_new();
	assert_non_null(e->sctx);
	assert_non_null(e->cctx);
	e->zap = wire_zap_start(e->sctx, &al);
	assert_non_null(e->zap);
	wire_allowlist_free(&al);
	snprintf(e->ep, sizeof(e->ep), "tcp://127.0.0.1:*");
	srv_open(e);
	sz = sizeof(e->ep);
	assert_int_equal(zmq_getsockopt(e->srv, ZMQ_LAST_ENDPOINT, e->ep, &sz), 0);
	*state = e;
	return 0;
}

static int teardown(void **state)
{
	struct env *e = *state;

	session_free(e->s);
	for (size_t i = 0; i < e->nq; i++)
		wire_free(e->q[i]);
	for (size_t i = 0; i < e->ngiven; i++)
		wire_free(e->given[i]);
	tspool_free(&e->sp);
	if (e->srv)
		srv_close(e);
	wire_zap_stop(e->zap);
	zmq_ctx_term(e->cctx);
	zmq_ctx_term(e->sctx);
	free(e);
	return 0;
}

static void session_make(struct env *e, const char *pub, const char *sec, uint64_t seq,
			 bool reserve)
{
	struct session_opts o = { .sz = sizeof(o) };
	const char *features[] = { "tracepoint", "uprobe" };

	o.zctx = e->cctx;
	o.endpoint = e->ep;
	o.server_key = e->spub;
	o.public_key = pub;
	o.secret_key = sec;
	o.role = WIRE_ROLE_AGENT;
	o.host = HOST;
	o.version = "9.9.9";
	o.kernel = "6.0-test";
	o.features = features;
	o.nfeatures = 2;
	o.seq = seq;
	o.log_name = "unit";
	o.ops = &cb_ops;
	o.ctx = e;
	e->sp.reserve = reserve;
	o.spool_ops = reserve ? &ts_ops_reserve : &ts_ops;
	o.spool = &e->sp;
	e->s = session_new(&o);
	assert_non_null(e->s);
	assert_int_equal(session_state(e->s), SESSION_DOWN);
}

/* Reads one envelope on the server side (checked as the aggregator would) into the queue. */
static void srv_read(struct env *e)
{
	zmq_msg_t id, body;
	Weft__Envelope *m;
	char why[256];
	int more = 0;
	size_t sz = sizeof(more);

	zmq_msg_init(&id);
	zmq_msg_init(&body);
	assert_true(zmq_msg_recv(&id, e->srv, 0) >= 0);
	assert_true(zmq_msg_recv(&body, e->srv, 0) >= 0);
	zmq_getsockopt(e->srv, ZMQ_RCVMORE, &more, &sz);
	assert_int_equal(more, 0);
	assert_string_equal(zmq_msg_gets(&body, "User-Id"), "agent:unit");
	m = wire_decode(zmq_msg_data(&body), zmq_msg_size(&body), why, sizeof(why));
	if (!m)
		fail_msg("the session sent something invalid: %s", why);
	assert_true(wire_body_allowed(WIRE_ROLE_AGENT, m->body_case));
	if (m->body_case == WEFT__ENVELOPE__BODY_HELLO) {
		e->instance = m->hello->instance;
		assert_true(zmq_msg_size(&id) <= sizeof(e->id));
		memcpy(e->id, zmq_msg_data(&id), zmq_msg_size(&id));
		e->idlen = zmq_msg_size(&id);
	}
	/* strictly increasing over the instance's whole life, across connections */
	if (!wire_seq_accept(&e->rx, e->instance, m->seq))
		fail_msg("seq %llu after %llu", (unsigned long long)m->seq,
			 (unsigned long long)e->rx.last);
	zmq_msg_close(&id);
	zmq_msg_close(&body);
	if (e->nq >= 32 && m->body_case == WEFT__ENVELOPE__BODY_HEARTBEAT) {
		wire_free(m); /* a long wait: enough of them are queued */
		return;
	}
	assert_true(e->nq < 64);
	e->q[e->nq++] = m;
}

/* Drives the session (tick, poll, events, receive) for up to ms or until the server has
 * something queued. */
static void pump(struct env *e, int ms)
{
	uint64_t end = now_ms() + (uint64_t)ms;

	do {
		zmq_pollitem_t it[SESSION_POLL_ITEMS + 1];
		Weft__Envelope *m;
		int n, si;

		session_tick(e->s);
		n = session_poll_items(e->s, it);
		si = n;
		if (e->srv)
			it[n++] = (zmq_pollitem_t){ .socket = e->srv, .events = ZMQ_POLLIN };
		assert_true(zmq_poll(it, n, session_timeout_ms(e->s, 10)) >= 0);
		if (si && (it[1].revents & ZMQ_POLLIN))
			session_poll_events(e->s);
		if (si && (it[0].revents & ZMQ_POLLIN))
			while (session_recv(e->s, &m) > 0)
				if (m) {
					assert_true(e->ngiven < 16);
					e->given[e->ngiven++] = m;
				}
		if (e->srv && si < n && (it[si].revents & ZMQ_POLLIN))
			srv_read(e);
	} while (!e->nq && now_ms() < end);
}

/* Drives the session until cond holds (or fails after WAIT_MS). */
#define PUMP_UNTIL(e, cond)                                \
	do {                                               \
		uint64_t _end = now_ms() + WAIT_MS;        \
		while (!(cond) && now_ms() < _end)         \
			pump(e, 10);                       \
		if (!(cond))                               \
			fail_msg("%s: never held", #cond); \
	} while (0)

/* The next envelope of one kind the server got (heartbeats before it are dropped; any other
 * kind fails the test), or NULL after ms. */
static Weft__Envelope *expect(struct env *e, Weft__Envelope__BodyCase kind, int ms)
{
	uint64_t end = now_ms() + (uint64_t)ms;

	for (;;) {
		while (e->nq) {
			Weft__Envelope *m = e->q[0];

			memmove(&e->q[0], &e->q[1], (e->nq - 1) * sizeof(e->q[0]));
			e->nq--;
			if (m->body_case == kind)
				return m;
			if (m->body_case != WEFT__ENVELOPE__BODY_HEARTBEAT)
				fail_msg("expected a %s, got a %s", wire_body_name(kind),
					 wire_body_name(m->body_case));
			wire_free(m);
		}
		if (now_ms() >= end)
			return NULL;
		pump(e, (int)(end - now_ms()));
	}
}

/* No envelope but heartbeats reaches the server within ms. */
static void expect_quiet(struct env *e, int ms)
{
	uint64_t end = now_ms() + (uint64_t)ms;

	while (now_ms() < end) {
		pump(e, (int)(end - now_ms()));
		while (e->nq) {
			Weft__Envelope *m = e->q[--e->nq];

			if (m->body_case != WEFT__ENVELOPE__BODY_HEARTBEAT)
				fail_msg("an unexpected %s", wire_body_name(m->body_case));
			wire_free(m);
		}
	}
}

static void srv_send(struct env *e, uint64_t seq, Weft__Envelope__BodyCase kind, void *body)
{
	Weft__Envelope m = WEFT__ENVELOPE__INIT;

	m.version = WIRE_VERSION;
	m.seq = seq;
	m.body_case = kind;
	m.hello = body; /* the union's members are all pointers */
	assert_int_equal(wire_send(e->srv, e->id, e->idlen, &m, false), 0);
}

static void srv_welcome(struct env *e, uint64_t instance, uint64_t seq, uint64_t last_seq)
{
	Weft__Welcome w = WEFT__WELCOME__INIT;

	w.aggregator = "unit-agg";
	w.instance = instance;
	w.heartbeat_ms = 50;
	w.has_last_seq = true;
	w.last_seq = last_seq;
	srv_send(e, seq, WEFT__ENVELOPE__BODY_WELCOME, &w);
}

static void srv_ack(struct env *e, uint64_t seq, uint64_t upto)
{
	Weft__Ack a = WEFT__ACK__INIT;

	a.upto = upto;
	srv_send(e, seq, WEFT__ENVELOPE__BODY_ACK, &a);
}

static uint64_t rejected(const struct env *e)
{
	struct session_stats st;

	session_stats(e->s, &st);
	return st.rejected;
}

/* The Hello of a new connection: checked, its seq returned. */
static uint64_t expect_hello(struct env *e)
{
	Weft__Envelope *m = expect(e, WEFT__ENVELOPE__BODY_HELLO, WAIT_MS);
	uint64_t seq;

	assert_non_null(m);
	assert_string_equal(m->hello->role, "agent");
	assert_string_equal(m->hello->host, HOST);
	assert_string_equal(m->hello->version, "9.9.9");
	assert_string_equal(m->hello->kernel, "6.0-test");
	assert_int_equal(m->hello->n_features, 2);
	assert_string_equal(m->hello->features[1], "uprobe");
	assert_int_equal(m->hello->instance, session_instance(e->s));
	assert_int_equal(m->hello->n_running, 1);
	assert_int_equal(m->hello->running[0], 5);
	seq = m->seq;
	wire_free(m);
	return seq;
}

/* The next partial: its window checked, its seq returned. */
static uint64_t expect_partial(struct env *e, uint64_t window)
{
	Weft__Envelope *m = expect(e, WEFT__ENVELOPE__BODY_PARTIAL, WAIT_MS);
	uint64_t seq;

	assert_non_null(m);
	assert_int_equal(m->partial->window, window);
	assert_string_equal(m->partial->host, HOST);
	seq = m->seq;
	wire_free(m);
	return seq;
}

/* ---------------------------------------------------------------- the tests */

static void test_hello_welcome_credit(void **state)
{
	struct env *e = *state;
	Weft__Envelope qerr = WEFT__ENVELOPE__INIT, *m;
	Weft__QueryError qe = WEFT__QUERY_ERROR__INIT;
	uint64_t hello, s1, s2, s3, s4;
	struct session_stats st;

	session_make(e, e->cpub, e->csec, 0, false);
	tspool_add(&e->sp, 1);
	tspool_add(&e->sp, 2);
	tspool_add(&e->sp, 3);
	/* nothing but Hello before the Welcome */
	qerr.body_case = WEFT__ENVELOPE__BODY_QUERY_ERROR;
	qe.query_id = 1;
	qe.message = "x";
	qerr.query_error = &qe;
	assert_int_equal(session_send(e->s, &qerr), -ENOTCONN);
	hello = expect_hello(e);
	assert_int_equal(hello, 1);
	assert_int_equal(session_state(e->s), SESSION_HELLO);
	assert_true(e->connected >= 1);
	expect_quiet(e, 300);
	assert_int_equal(session_send(e->s, &qerr), -ENOTCONN);

	/* welcomed: all three go, in order, above the Hello */
	srv_welcome(e, 100, ++e->seq, 0);
	s1 = expect_partial(e, 1);
	s2 = expect_partial(e, 2);
	s3 = expect_partial(e, 3);
	assert_true(hello < s1 && s1 < s2 && s2 < s3);
	assert_true(session_up(e->s));
	assert_int_equal(e->welcomed, 1);
	assert_true(e->last.first);
	assert_false(e->last.restarted);
	assert_int_equal(e->last.acked, 0);
	assert_int_equal(e->last.resend, 3);
	assert_string_equal(session_server_name(e->s), "unit-agg");

	/* heartbeats: the running ids and the spool's counts */
	m = expect(e, WEFT__ENVELOPE__BODY_HEARTBEAT, WAIT_MS);
	assert_non_null(m);
	assert_int_equal(m->heartbeat->n_running, 1);
	assert_int_equal(m->heartbeat->running[0], 5);
	assert_true(m->heartbeat->has_spooled);
	assert_int_equal(m->heartbeat->spooled, 3);
	assert_int_equal(m->heartbeat->spool_dropped, 7);
	wire_free(m);

	/* credit: an Ack drops what was sent at or below it, nothing else */
	srv_ack(e, ++e->seq, s2);
	PUMP_UNTIL(e, e->sp.n == 1);
	assert_int_equal(e->sp.v[0].window, 3);
	/* a partial made now goes at once, with the next seq */
	tspool_add(&e->sp, 4);
	s4 = expect_partial(e, 4);
	assert_true(s4 > s3);
	/* other messages go when welcomed */
	assert_int_equal(session_send(e->s, &qerr), 0);
	m = expect(e, WEFT__ENVELOPE__BODY_QUERY_ERROR, WAIT_MS);
	assert_non_null(m);
	assert_true(m->seq > s4 && m->seq <= session_seq(e->s));
	assert_int_equal(m->query_error->query_id, 1);
	wire_free(m);
	srv_ack(e, ++e->seq, 1000);
	PUMP_UNTIL(e, e->sp.n == 0);

	session_stats(e->s, &st);
	assert_int_equal(st.connects, 1);
	assert_int_equal(st.resent, 3);
	assert_int_equal(st.received, 3); /* the Welcome and two Acks */
	assert_int_equal(st.rejected, 0);
	assert_int_equal(e->ngiven, 0); /* all of them were the session's own */
}

static void test_welcome_seq(void **state)
{
	struct env *e = *state;
	Weft__QueryStop qs = WEFT__QUERY_STOP__INIT;
	uint64_t s2, s3, s4;

	session_make(e, e->cpub, e->csec, 0, false);
	tspool_add(&e->sp, 1);
	tspool_add(&e->sp, 2);
	expect_hello(e);
	e->seq = 5;
	srv_welcome(e, 100, e->seq, 0);
	expect_partial(e, 1);
	s2 = expect_partial(e, 2);

	/* a stale Welcome of the same instance (lower seq) is rejected, counted, and changes
	 * nothing: no acknowledgement, no resend */
	srv_welcome(e, 100, 4, s2);
	PUMP_UNTIL(e, rejected(e) == 1);
	/* a replay (the same seq) too */
	srv_welcome(e, 100, 5, s2);
	PUMP_UNTIL(e, rejected(e) == 2);
	expect_quiet(e, 200);
	assert_int_equal(e->welcomed, 1);
	assert_int_equal(e->sp.n, 2);
	assert_true(session_up(e->s));

	/* a higher seq of the same instance is a Welcome (nothing sent after our Hello can be
	 * merged yet: both are sent again, with new seqs) */
	e->seq = 6;
	srv_welcome(e, 100, e->seq, 0);
	s3 = expect_partial(e, 1);
	s4 = expect_partial(e, 2);
	assert_true(s2 < s3 && s3 < s4);
	assert_int_equal(e->welcomed, 2);
	assert_false(e->last.first);
	assert_false(e->last.restarted);
	assert_int_equal(e->last.acked, 0);
	assert_int_equal(e->last.resend, 2);

	/* a new instance (the aggregator restarted) starts its seqs anew */
	e->seq = 1;
	srv_welcome(e, 200, e->seq, 0);
	assert_true(expect_partial(e, 1) > s4);
	expect_partial(e, 2);
	assert_int_equal(e->welcomed, 3);
	assert_true(e->last.restarted);
	assert_int_equal(e->last_instance, 200);
	/* and its later messages must go above 1: a repeat is rejected, the next is given */
	qs.query_id = 9;
	srv_send(e, 1, WEFT__ENVELOPE__BODY_QUERY_STOP, &qs);
	PUMP_UNTIL(e, rejected(e) == 3);
	srv_send(e, 2, WEFT__ENVELOPE__BODY_QUERY_STOP, &qs);
	PUMP_UNTIL(e, e->ngiven == 1);
	assert_int_equal(e->given[0]->body_case, WEFT__ENVELOPE__BODY_QUERY_STOP);
	assert_int_equal(e->given[0]->query_stop->query_id, 9);
	srv_ack(e, 3, session_seq(e->s));
	PUMP_UNTIL(e, e->sp.n == 0);
	assert_int_equal(rejected(e), 3);
}

static void test_refuse(void **state)
{
	struct env *e = *state;
	Weft__QueryStop qs = WEFT__QUERY_STOP__INIT;
	Weft__Submit sub = WEFT__SUBMIT__INIT;
	uint64_t welcome_seq;

	session_make(e, e->cpub, e->csec, 0, false);
	expect_hello(e);
	qs.query_id = 3;
	/* before the Welcome: an aggregator's body, still refused */
	srv_send(e, ++e->seq, WEFT__ENVELOPE__BODY_QUERY_STOP, &qs);
	PUMP_UNTIL(e, rejected(e) == 1);
	welcome_seq = ++e->seq;
	srv_welcome(e, 100, welcome_seq, 0);
	PUMP_UNTIL(e, session_up(e->s));
	/* garbage, several parts, a body no aggregator sends, a repeated seq */
	assert_int_equal(zmq_send(e->srv, e->id, e->idlen, ZMQ_SNDMORE), (int)e->idlen);
	assert_int_equal(zmq_send(e->srv, "\xff\xfe garbage", 10, 0), 10);
	PUMP_UNTIL(e, rejected(e) == 2);
	assert_int_equal(zmq_send(e->srv, e->id, e->idlen, ZMQ_SNDMORE), (int)e->idlen);
	assert_int_equal(zmq_send(e->srv, "a", 1, ZMQ_SNDMORE), 1);
	assert_int_equal(zmq_send(e->srv, "b", 1, 0), 1);
	PUMP_UNTIL(e, rejected(e) == 3);
	sub.query = "from syscall:read select count()";
	sub.manifest.data = (uint8_t *)"m";
	sub.manifest.len = 1;
	sub.object.data = (uint8_t *)"o";
	sub.object.len = 1;
	srv_send(e, ++e->seq, WEFT__ENVELOPE__BODY_SUBMIT, &sub);
	PUMP_UNTIL(e, rejected(e) == 4);
	srv_send(e, welcome_seq, WEFT__ENVELOPE__BODY_QUERY_STOP, &qs);
	PUMP_UNTIL(e, rejected(e) == 5);
	assert_int_equal(e->ngiven, 0);
	/* what passes every check is the caller's */
	srv_send(e, ++e->seq, WEFT__ENVELOPE__BODY_QUERY_STOP, &qs);
	PUMP_UNTIL(e, e->ngiven == 1);
	assert_int_equal(e->given[0]->query_stop->query_id, 3);
	assert_int_equal(rejected(e), 5);
	assert_true(session_up(e->s));
}

static void test_reconnect(void **state)
{
	struct env *e = *state;
	uint64_t hello1, hello2, s1, s2, s3, s5;

	session_make(e, e->cpub, e->csec, 0, false);
	tspool_add(&e->sp, 1);
	tspool_add(&e->sp, 2);
	hello1 = expect_hello(e);
	srv_welcome(e, 100, ++e->seq, 0);
	s1 = expect_partial(e, 1);
	s2 = expect_partial(e, 2);
	assert_true(s1 < s2);

	/* the aggregator's socket goes away (Acks lost); the session goes down, spools */
	srv_close(e);
	PUMP_UNTIL(e, e->lost_up == 1);
	assert_int_equal(session_state(e->s), SESSION_DOWN);
	tspool_add(&e->sp, 3);
	srv_open(e);
	/* Hello again: the same instance, above everything before */
	hello2 = expect_hello(e);
	assert_true(hello2 > s2 && hello1 < hello2);
	/* last_seq at or above the new Hello's seq: trusted only below the Hello (both sent
	 * partials dropped), and what follows goes above it */
	srv_welcome(e, 100, ++e->seq, hello2 + 10);
	s3 = expect_partial(e, 3);
	assert_true(s3 > hello2 + 10);
	assert_int_equal(e->last.acked, 2);
	assert_int_equal(e->last.resend, 1);
	assert_false(e->last.restarted);
	assert_int_equal(e->welcomed, 2);

	/* once more, with an honest last_seq: what was merged goes, the rest is resent */
	srv_close(e);
	PUMP_UNTIL(e, e->lost_up == 2);
	tspool_add(&e->sp, 4);
	tspool_add(&e->sp, 5);
	srv_open(e);
	expect_hello(e);
	srv_welcome(e, 100, ++e->seq, s3);
	assert_true(expect_partial(e, 4) > s3);
	s5 = expect_partial(e, 5);
	assert_int_equal(e->last.acked, 1);
	assert_int_equal(e->last.resend, 2);
	srv_ack(e, ++e->seq, s5);
	PUMP_UNTIL(e, e->sp.n == 0);
}

/* A spool of Partials and GraphBatches: each goes out as its kind, in spool order, and again
 * as its kind after a reconnect. */
static void test_graph_batches(void **state)
{
	struct env *e = *state;
	Weft__Envelope *m;
	uint64_t s1, s2, s3;

	session_make(e, e->cpub, e->csec, 0, false);
	tspool_add(&e->sp, 1);
	tspool_add_graph(&e->sp, 2);
	tspool_add(&e->sp, 3);
	expect_hello(e);
	srv_welcome(e, 100, ++e->seq, 0);
	s1 = expect_partial(e, 1);
	m = expect(e, WEFT__ENVELOPE__BODY_GRAPH_BATCH, WAIT_MS);
	assert_non_null(m);
	assert_int_equal(m->graph_batch->window, 2);
	assert_int_equal(m->graph_batch->n_tasks, 1);
	assert_int_equal(m->graph_batch->tasks[0]->id, 2);
	s2 = m->seq;
	wire_free(m);
	s3 = expect_partial(e, 3);
	assert_true(s1 < s2 && s2 < s3);

	/* the link goes; the Welcome says only the first arrived: the batch goes again, as one */
	srv_close(e);
	PUMP_UNTIL(e, e->lost_up == 1);
	srv_open(e);
	expect_hello(e);
	srv_welcome(e, 100, ++e->seq, s1);
	m = expect(e, WEFT__ENVELOPE__BODY_GRAPH_BATCH, WAIT_MS);
	assert_non_null(m);
	assert_int_equal(m->graph_batch->window, 2);
	assert_true(m->seq > s3);
	wire_free(m);
	s3 = expect_partial(e, 3);
	srv_ack(e, ++e->seq, s3);
	PUMP_UNTIL(e, e->sp.n == 0);
}

static void test_not_welcomed(void **state)
{
	struct env *e = *state;
	Weft__Error er = WEFT__ERROR__INIT;
	Weft__QueryStop qs = WEFT__QUERY_STOP__INIT;
	uint64_t hello2;

	session_make(e, e->cpub, e->csec, 0, false);
	tspool_add(&e->sp, 1);
	expect_hello(e);
	srv_welcome(e, 100, ++e->seq, 0);
	expect_partial(e, 1);
	/* the aggregator forgot this connection: Hello again on the same one */
	er.message = SESSION_NOT_WELCOMED;
	srv_send(e, ++e->seq, WEFT__ENVELOPE__BODY_ERROR, &er);
	hello2 = expect_hello(e);
	assert_int_equal(session_state(e->s), SESSION_HELLO);
	assert_int_equal(session_send(e->s, &(Weft__Envelope){ 0 }), -ENOTCONN);
	/* the answers to what came before that Hello are expected, not counted; anything
	 * else before the Welcome is */
	srv_send(e, ++e->seq, WEFT__ENVELOPE__BODY_ERROR, &er);
	qs.query_id = 4;
	srv_send(e, ++e->seq, WEFT__ENVELOPE__BODY_QUERY_STOP, &qs);
	PUMP_UNTIL(e, rejected(e) == 1);
	srv_welcome(e, 100, ++e->seq, 0);
	assert_true(expect_partial(e, 1) > hello2);
	assert_int_equal(e->welcomed, 2);
	assert_int_equal(e->lost, 0);
	assert_int_equal(rejected(e), 1);
	assert_int_equal(e->ngiven, 0);
}

static void test_reserve(void **state)
{
	struct env *e = *state;
	uint64_t hello, s1, s2;
	Weft__Envelope *m;

	/* a persistent instance that used seqs up to 40 before a restart */
	session_make(e, e->cpub, e->csec, 40, true);
	tspool_add(&e->sp, 1);
	tspool_add(&e->sp, 2);
	e->sp.fail_reserve = 1;
	hello = expect_hello(e);
	assert_int_equal(hello, 41);
	srv_welcome(e, 100, ++e->seq, 0);
	/* the first reserve fails: nothing goes; the next tick reserves again, for both at
	 * once, and they go with the seqs reserved */
	s1 = expect_partial(e, 1);
	s2 = expect_partial(e, 2);
	assert_int_equal(e->sp.nreserve, 2);
	assert_true(e->sp.reserved_first > hello);
	assert_int_equal(s1, e->sp.reserved_first);
	assert_int_equal(s2, e->sp.reserved_last);
	assert_int_equal(s2, s1 + 1);
	/* later messages go above what was reserved */
	m = expect(e, WEFT__ENVELOPE__BODY_HEARTBEAT, WAIT_MS);
	assert_non_null(m);
	assert_true(m->seq > s2);
	wire_free(m);
	srv_ack(e, ++e->seq, s2);
	PUMP_UNTIL(e, e->sp.n == 0);
}

static void test_refused(void **state)
{
	struct env *e = *state;

	/* a key the allow-list lacks */
	session_make(e, e->xpub, e->xsec, 0, false);
	PUMP_UNTIL(e, e->refused_auth >= 1);
	assert_int_equal(e->refused_status, 400);
	assert_int_equal(e->welcomed, 0);
	assert_false(session_up(e->s));
	assert_int_equal(wire_zap_accepted(e->zap), 0);
	assert_true(wire_zap_rejected(e->zap) >= 1);
	assert_int_equal(e->nq, 0);
}

static void test_bad_opts(void **state)
{
	struct env *e = *state;
	struct session_opts o = { .sz = sizeof(o) };

	errno = 0;
	assert_null(session_new(NULL));
	assert_int_equal(errno, EINVAL);
	o.zctx = e->cctx;
	o.endpoint = e->ep;
	o.server_key = e->spub;
	o.public_key = e->cpub;
	o.secret_key = "short";
	o.role = WIRE_ROLE_AGENT;
	o.ops = &cb_ops;
	errno = 0;
	assert_null(session_new(&o));
	assert_int_equal(errno, EINVAL);
	/* not an endpoint: refused when it connects, and the session stays down */
	o.secret_key = e->csec;
	o.endpoint = "nowhere";
	e->s = session_new(&o);
	assert_non_null(e->s);
	assert_true(session_connect(e->s) < 0);
	assert_int_equal(session_state(e->s), SESSION_DOWN);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_hello_welcome_credit, setup, teardown),
		cmocka_unit_test_setup_teardown(test_welcome_seq, setup, teardown),
		cmocka_unit_test_setup_teardown(test_refuse, setup, teardown),
		cmocka_unit_test_setup_teardown(test_graph_batches, setup, teardown),
		cmocka_unit_test_setup_teardown(test_reconnect, setup, teardown),
		cmocka_unit_test_setup_teardown(test_not_welcomed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_reserve, setup, teardown),
		cmocka_unit_test_setup_teardown(test_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_opts, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
