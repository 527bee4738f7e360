// SPDX-License-Identifier: Apache-2.0
/*
 * CURVE and ZAP over real TCP sockets on loopback (agent/wire_sock.c, aggregator/zap.c): a
 * ROUTER made by wire_server_socket() with the ZAP handler and an allow-list, and DEALERs made by
 * wire_client_socket().  An allowed client exchanges envelopes both ways and its messages
 * carry the user id "ROLE:NAME"; a client whose key is not listed is refused by the ZAP
 * handler (counted once) and nothing it sends arrives; a client that trusts another server
 * key, or speaks no CURVE at all, never gets through the handshake.
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
#include <unistd.h>
#include <zmq.h>

#include <cmocka.h>

#include "agent/wire.h"
#include "aggregator/zap.h"

struct env {
	void *zctx;
	struct wire_zap *zap;
	void *server;
	char endpoint[128];
	char srv_pub[WIRE_KEY_LEN + 1], srv_sec[WIRE_KEY_LEN + 1];
	char ok_pub[WIRE_KEY_LEN + 1], ok_sec[WIRE_KEY_LEN + 1];
	char bad_pub[WIRE_KEY_LEN + 1], bad_sec[WIRE_KEY_LEN + 1];
	char other_pub[WIRE_KEY_LEN + 1], other_sec[WIRE_KEY_LEN + 1];
	void *socks[8]; /* a test's sockets: a failed assertion leaves them to the teardown */
	int nsocks;
};

/* A socket the teardown closes (zmq_ctx_term would wait for it forever otherwise). */
static void *track(struct env *e, void *s)
{
	assert_non_null(s);
	assert_true(e->nsocks < 8);
	e->socks[e->nsocks++] = s;
	return s;
}

static void close_tracked(struct env *e, void *s)
{
	for (int i = 0; i < e->nsocks; i++)
		if (e->socks[i] == s)
			e->socks[i] = NULL;
	zmq_close(s);
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static int setup(void **state)
{
	struct env *e = calloc(1, sizeof(*e));
	struct wire_allowlist al;
	char text[256];
	size_t sz;
	int line;

	assert_non_null(e);
	assert_int_equal(wire_keypair_new(e->srv_pub, e->srv_sec), 0);
	assert_int_equal(wire_keypair_new(e->ok_pub, e->ok_sec), 0);
	assert_int_equal(wire_keypair_new(e->bad_pub, e->bad_sec), 0);
	assert_int_equal(wire_keypair_new(e->other_pub, e->other_sec), 0);
	snprintf(text, sizeof(text), "agent %s web-1\n", e->ok_pub);
	assert_int_equal(wire_allowlist_parse(text, strlen(text), &al, &line), 0);
	e->zctx = zmq_ctx_new();
	assert_non_null(e->zctx);
	e->zap = wire_zap_start(e->zctx, &al);
	assert_non_null(e->zap);
	wire_allowlist_free(&al); /* the handler keeps its own copy */
	/* port 0: the kernel picks a free one */
	e->server = wire_server_socket(e->zctx, "tcp://127.0.0.1:*", e->srv_pub, e->srv_sec);
	assert_non_null(e->server);
	sz = sizeof(e->endpoint);
	assert_int_equal(zmq_getsockopt(e->server, ZMQ_LAST_ENDPOINT, e->endpoint, &sz), 0);
	*state = e;
	return 0;
}

static int teardown(void **state)
{
	struct env *e = *state;
	int zero = 0;

	for (int i = 0; i < e->nsocks; i++)
		if (e->socks[i]) {
			zmq_socket_monitor(e->socks[i], NULL, 0);
			zmq_setsockopt(e->socks[i], ZMQ_LINGER, &zero, sizeof(zero));
			zmq_close(e->socks[i]);
		}
	zmq_close(e->server);
	wire_zap_stop(e->zap);
	zmq_ctx_term(e->zctx);
	free(e);
	return 0;
}

static Weft__Envelope *hello(Weft__Hello *h, uint64_t seq)
{
	static Weft__Envelope env;

	weft__envelope__init(&env);
	weft__hello__init(h);
	h->role = "agent";
	h->host = "web-1";
	h->version = "0.1.0";
	h->instance = 77;
	env.version = WIRE_VERSION;
	env.seq = seq;
	env.body_case = WEFT__ENVELOPE__BODY_HELLO;
	env.hello = h;
	return &env;
}

/* Waits up to ms for a message on the server; 0 and the parts if one came. */
static int server_recv(struct env *e, int ms, zmq_msg_t *id, zmq_msg_t *body)
{
	zmq_pollitem_t it = { .socket = e->server, .events = ZMQ_POLLIN };
	int more = 0;
	size_t sz = sizeof(more);

	if (zmq_poll(&it, 1, ms) <= 0)
		return -EAGAIN;
	zmq_msg_init(id);
	zmq_msg_init(body);
	assert_true(zmq_msg_recv(id, e->server, 0) >= 0);
	assert_int_equal(zmq_getsockopt(e->server, ZMQ_RCVMORE, &more, &sz), 0);
	assert_int_equal(more, 1);
	assert_true(zmq_msg_recv(body, e->server, 0) >= 0);
	assert_int_equal(zmq_getsockopt(e->server, ZMQ_RCVMORE, &more, &sz), 0);
	assert_int_equal(more, 0);
	return 0;
}

/* An allowed agent: Hello in, Welcome out, and the role comes with every message. */
static void test_allowed_client(void **state)
{
	struct env *e = *state;
	void *c = track(e,
			wire_client_socket(e->zctx, e->endpoint, e->srv_pub, e->ok_pub, e->ok_sec));
	Weft__Hello h;
	Weft__Envelope w = WEFT__ENVELOPE__INIT, *d;
	Weft__Welcome wm = WEFT__WELCOME__INIT;
	zmq_msg_t id, body;
	const char *user, *name;
	char why[256], buf[4096];
	int n;
	zmq_pollitem_t it;

	assert_non_null(c);
	assert_int_equal(wire_send(c, NULL, 0, hello(&h, 1), false), 0);
	assert_int_equal(server_recv(e, 5000, &id, &body), 0);
	user = zmq_msg_gets(&body, "User-Id");
	assert_non_null(user);
	assert_string_equal(user, "agent:web-1");
	assert_int_equal(wire_user_id_role(user, &name), WIRE_ROLE_AGENT);
	assert_string_equal(name, "web-1");
	d = wire_decode(zmq_msg_data(&body), zmq_msg_size(&body), why, sizeof(why));
	assert_non_null(d);
	assert_int_equal(d->body_case, WEFT__ENVELOPE__BODY_HELLO);
	assert_string_equal(d->hello->host, "web-1");
	assert_true(wire_body_allowed(wire_user_id_role(user, NULL), d->body_case));
	wire_free(d);

	/* and back, addressed by the routing id */
	wm.aggregator = "root";
	wm.instance = 5;
	wm.heartbeat_ms = 1000;
	w.version = WIRE_VERSION;
	w.seq = 1;
	w.body_case = WEFT__ENVELOPE__BODY_WELCOME;
	w.welcome = &wm;
	assert_int_equal(wire_send(e->server, zmq_msg_data(&id), zmq_msg_size(&id), &w, true), 0);
	zmq_msg_close(&id);
	zmq_msg_close(&body);
	it = (zmq_pollitem_t){ .socket = c, .events = ZMQ_POLLIN };
	assert_int_equal(zmq_poll(&it, 1, 5000), 1);
	n = zmq_recv(c, buf, sizeof(buf), 0);
	assert_true(n > 0 && n < (int)sizeof(buf));
	d = wire_decode(buf, (size_t)n, why, sizeof(why));
	assert_non_null(d);
	assert_int_equal(d->body_case, WEFT__ENVELOPE__BODY_WELCOME);
	assert_int_equal(d->welcome->heartbeat_ms, 1000);
	assert_true(wire_body_from_server(d->body_case));
	wire_free(d);

	/* a peer that is gone: ROUTER_MANDATORY makes the send fail instead of vanishing */
	assert_int_equal(wire_send(e->server, "nobody", 6, &w, true), -EHOSTUNREACH);

	assert_int_equal(wire_zap_accepted(e->zap), 1);
	assert_int_equal(wire_zap_rejected(e->zap), 0);
	close_tracked(e, c);
}

/* Next monitor event of a client socket, or 0 after ms. */
static uint16_t monitor_event(void *mon, int ms, uint32_t *value)
{
	zmq_pollitem_t it = { .socket = mon, .events = ZMQ_POLLIN };
	uint8_t frame[6];
	uint16_t ev;
	char ep[256];

	if (zmq_poll(&it, 1, ms) <= 0)
		return 0;
	if (zmq_recv(mon, frame, sizeof(frame), 0) != 6)
		return 0;
	zmq_recv(mon, ep, sizeof(ep), 0);
	memcpy(&ev, frame, 2);
	memcpy(value, frame + 2, 4);
	return ev;
}

/* An unknown key: the ZAP handler refuses it once; what it sent never arrives. */
static void test_unknown_key_refused(void **state)
{
	struct env *e = *state;
	void *c = track(
		e, wire_client_socket(e->zctx, e->endpoint, e->srv_pub, e->bad_pub, e->bad_sec));
	void *mon = track(e, zmq_socket(e->zctx, ZMQ_PAIR));
	Weft__Hello h;
	zmq_msg_t id, body;
	uint64_t until;
	uint32_t value = 0;
	uint16_t ev;
	bool auth_failed = false;

	assert_non_null(c);
	assert_non_null(mon);
	assert_int_equal(
		zmq_socket_monitor(c, "inproc://test-unknown-mon",
				   ZMQ_EVENT_HANDSHAKE_FAILED_AUTH | ZMQ_EVENT_HANDSHAKE_SUCCEEDED),
		0);
	assert_int_equal(zmq_connect(mon, "inproc://test-unknown-mon"), 0);
	assert_int_equal(wire_send(c, NULL, 0, hello(&h, 1), false), 0);
	until = now_ms() + 5000;
	while (!auth_failed && now_ms() < until) {
		ev = monitor_event(mon, 100, &value);
		assert_int_not_equal(ev, ZMQ_EVENT_HANDSHAKE_SUCCEEDED);
		if (ev == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) {
			auth_failed = true;
			assert_int_equal(value, 400);
		}
	}
	assert_true(auth_failed);
	/* closed at once, before ZeroMQ's reconnect (200 ms) could ask again */
	zmq_socket_monitor(c, NULL, 0);
	close_tracked(e, mon);
	close_tracked(e, c);
	assert_int_equal(wire_zap_rejected(e->zap), 1);
	assert_int_equal(wire_zap_accepted(e->zap), 0);
	assert_int_equal(server_recv(e, 1000, &id, &body), -EAGAIN);
	assert_int_equal(wire_zap_rejected(e->zap), 1);
}

/* A client that trusts another server key cannot talk (the handshake fails before any ZAP
 * request), nor can a client without CURVE. */
static void test_wrong_server_key(void **state)
{
	struct env *e = *state;
	void *c = track(
		e, wire_client_socket(e->zctx, e->endpoint, e->other_pub, e->ok_pub, e->ok_sec));
	void *plain = track(e, zmq_socket(e->zctx, ZMQ_DEALER));
	Weft__Hello h;
	zmq_msg_t id, body;
	int zero = 0;
	char buf[64];

	assert_non_null(c);
	assert_non_null(plain);
	assert_int_equal(wire_send(c, NULL, 0, hello(&h, 1), false), 0);
	zmq_setsockopt(plain, ZMQ_LINGER, &zero, sizeof(zero));
	assert_int_equal(zmq_connect(plain, e->endpoint), 0);
	assert_int_equal(wire_send(plain, NULL, 0, hello(&h, 1), false), 0);
	assert_int_equal(server_recv(e, 2000, &id, &body), -EAGAIN);
	assert_int_equal(wire_zap_accepted(e->zap), 0);
	/* nothing comes back either */
	assert_int_equal(zmq_recv(c, buf, sizeof(buf), ZMQ_DONTWAIT), -1);
	assert_int_equal(errno, EAGAIN);
	close_tracked(e, c);
	close_tracked(e, plain);

	/* the right key works on the same server afterwards */
	c = track(e, wire_client_socket(e->zctx, e->endpoint, e->srv_pub, e->ok_pub, e->ok_sec));
	assert_int_equal(wire_send(c, NULL, 0, hello(&h, 2), false), 0);
	assert_int_equal(server_recv(e, 5000, &id, &body), 0);
	zmq_msg_close(&id);
	zmq_msg_close(&body);
	assert_int_equal(wire_zap_accepted(e->zap), 1);
	close_tracked(e, c);
}

/* Bad keys and endpoints fail at once, with errno. */
static void test_socket_errors(void **state)
{
	struct env *e = *state;
	struct wire_zap *z2;
	struct wire_allowlist al = { 0 };

	errno = 0;
	assert_null(wire_client_socket(e->zctx, e->endpoint, "short", e->ok_pub, e->ok_sec));
	assert_int_equal(errno, EINVAL);
	/* a public and a secret key of different pairs */
	assert_null(wire_client_socket(e->zctx, e->endpoint, e->srv_pub, e->ok_pub, e->bad_sec));
	assert_int_equal(errno, EINVAL);
	assert_null(wire_server_socket(e->zctx, "tcp://127.0.0.1:*", e->srv_pub, e->ok_sec));
	assert_int_equal(errno, EINVAL);
	/* the port is taken */
	assert_null(wire_server_socket(e->zctx, e->endpoint, e->srv_pub, e->srv_sec));
	assert_int_equal(errno, EADDRINUSE);
	/* one ZAP handler per context */
	z2 = wire_zap_start(e->zctx, &al);
	assert_null(z2);
	assert_int_equal(errno, EADDRINUSE);
}

/* A reloaded allow-list takes effect for new handshakes. */
static void test_reload(void **state)
{
	struct env *e = *state;
	struct wire_allowlist al;
	char text[256];
	int line;
	void *c;
	Weft__Hello h;
	zmq_msg_t id, body;

	snprintf(text, sizeof(text), "client %s newcomer\n", e->bad_pub);
	assert_int_equal(wire_allowlist_parse(text, strlen(text), &al, &line), 0);
	assert_int_equal(wire_zap_reload(e->zap, &al), 0);
	wire_allowlist_free(&al);
	c = track(e, wire_client_socket(e->zctx, e->endpoint, e->srv_pub, e->bad_pub, e->bad_sec));
	assert_int_equal(wire_send(c, NULL, 0, hello(&h, 1), false), 0);
	assert_int_equal(server_recv(e, 5000, &id, &body), 0);
	assert_string_equal(zmq_msg_gets(&body, "User-Id"), "client:newcomer");
	zmq_msg_close(&id);
	zmq_msg_close(&body);
	close_tracked(e, c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_allowed_client, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unknown_key_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_wrong_server_key, setup, teardown),
		cmocka_unit_test_setup_teardown(test_socket_errors, setup, teardown),
		cmocka_unit_test_setup_teardown(test_reload, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
