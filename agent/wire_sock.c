// SPDX-License-Identifier: Apache-2.0
/*
 * The sockets both ends of the wire open: the aggregator's CURVE-server ROUTER (its
 * connections authenticated by aggregator/zap.c's handler against the allow-list) and every
 * sender's CURVE-client DEALER, with the options they share (bounded queues and messages, a
 * short linger, dead-peer detection), sending an envelope on them, and the one socket monitor
 * every sender watches its connection with.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "base/zmq_dl.h"
#include "agent/wire.h"

#define WIRE_DOMAIN "weft" /* the ZAP domain of a server socket */
#define SOCK_LINGER_MS 200
#define SOCK_HWM 1000
#define SOCK_HEARTBEAT_IVL_MS 2000
#define SOCK_HEARTBEAT_TIMEOUT_MS 6000
#define SOCK_KEEPALIVE_IDLE_S 30 /* the server's TCP keepalive: a dead client is closed after */
#define SOCK_KEEPALIVE_INTVL_S 10 /* 30 s idle + 3 unanswered probes 10 s apart */
#define SOCK_KEEPALIVE_CNT 3
#define SOCK_HANDSHAKE_MS 10000 /* a connection still in its handshake after this is closed */
#define SOCK_RECONNECT_MS 200
#define SOCK_RECONNECT_MAX_MS 5000

static int set_int(void *s, int opt, int v)
{
	return zmq_setsockopt(s, opt, &v, sizeof(v));
}

/*
 * What both ends share: bounded queues and messages, a short linger.  Dead peers (gone
 * without a FIN: cable, firewall) are noticed differently at each end:
 *   - a client sends ZMTP heartbeats and reconnects when the server stops answering them;
 *   - the server sends none and asks for no TTL, but uses TCP keepalive to close dead
 *     connections; liveness itself is the protocol's Heartbeat.  ZMTP heartbeat and TTL
 *     timers would cost the server's I/O thread a scan of every connection's timers for each
 *     message received (libzmq cancels a timer by a linear search), a few percent of its time
 *     with 1,000 agents and growing with their number.
 */
static int common_opts(void *s, bool server)
{
	int64_t max = WIRE_MAX_BYTES;

	if (set_int(s, ZMQ_LINGER, SOCK_LINGER_MS) || set_int(s, ZMQ_SNDHWM, SOCK_HWM) ||
	    set_int(s, ZMQ_RCVHWM, SOCK_HWM) ||
	    zmq_setsockopt(s, ZMQ_MAXMSGSIZE, &max, sizeof(max)) || set_int(s, ZMQ_IPV6, 1))
		return -1;
	if (server) {
		/* a connection that never finishes its handshake (idle, half a greeting) holds a
		 * descriptor: not for long (aggregator/aggd_guard.h bounds how many) */
		if (set_int(s, ZMQ_HANDSHAKE_IVL, SOCK_HANDSHAKE_MS) ||
		    set_int(s, ZMQ_TCP_KEEPALIVE, 1) ||
		    set_int(s, ZMQ_TCP_KEEPALIVE_IDLE, SOCK_KEEPALIVE_IDLE_S) ||
		    set_int(s, ZMQ_TCP_KEEPALIVE_INTVL, SOCK_KEEPALIVE_INTVL_S) ||
		    set_int(s, ZMQ_TCP_KEEPALIVE_CNT, SOCK_KEEPALIVE_CNT))
			return -1;
		return 0;
	}
	if (set_int(s, ZMQ_HEARTBEAT_IVL, SOCK_HEARTBEAT_IVL_MS) ||
	    set_int(s, ZMQ_HEARTBEAT_TIMEOUT, SOCK_HEARTBEAT_TIMEOUT_MS))
		return -1;
	return 0;
}

void *wire_server_socket(void *zctx, const char *endpoint, const char *pub, const char *sec)
{
	void *s;
	int err;

	if (!zctx || !endpoint || !wire_key_valid(sec) || (pub && !wire_key_valid(pub)) ||
	    (pub && !wire_keypair_matches(pub, sec))) {
		errno = EINVAL;
		return NULL;
	}
	s = zmq_socket(zctx, ZMQ_ROUTER);
	if (!s)
		return NULL;
	/* ROUTER_MANDATORY: a send to a gone or full peer fails (EHOSTUNREACH, EAGAIN)
	 * instead of vanishing, so the daemon can count and expire */
	if (common_opts(s, true) || set_int(s, ZMQ_ROUTER_MANDATORY, 1) ||
	    set_int(s, ZMQ_CURVE_SERVER, 1) ||
	    zmq_setsockopt(s, ZMQ_CURVE_SECRETKEY, sec, WIRE_KEY_LEN + 1) ||
	    (pub && zmq_setsockopt(s, ZMQ_CURVE_PUBLICKEY, pub, WIRE_KEY_LEN + 1)) ||
	    zmq_setsockopt(s, ZMQ_ZAP_DOMAIN, WIRE_DOMAIN, strlen(WIRE_DOMAIN)) ||
	    zmq_bind(s, endpoint) != 0) {
		err = errno;
		zmq_close(s);
		errno = err;
		return NULL;
	}
	return s;
}

void *wire_client_socket(void *zctx, const char *endpoint, const char *server_pub, const char *pub,
			 const char *sec)
{
	void *s;
	int err;

	if (!zctx || !endpoint || !wire_key_valid(server_pub) || !wire_key_valid(pub) ||
	    !wire_key_valid(sec) || !wire_keypair_matches(pub, sec)) {
		errno = EINVAL;
		return NULL;
	}
	s = zmq_socket(zctx, ZMQ_DEALER);
	if (!s)
		return NULL;
	if (common_opts(s, false) || set_int(s, ZMQ_RECONNECT_IVL, SOCK_RECONNECT_MS) ||
	    set_int(s, ZMQ_RECONNECT_IVL_MAX, SOCK_RECONNECT_MAX_MS) ||
	    zmq_setsockopt(s, ZMQ_CURVE_SERVERKEY, server_pub, WIRE_KEY_LEN + 1) ||
	    zmq_setsockopt(s, ZMQ_CURVE_PUBLICKEY, pub, WIRE_KEY_LEN + 1) ||
	    zmq_setsockopt(s, ZMQ_CURVE_SECRETKEY, sec, WIRE_KEY_LEN + 1) ||
	    zmq_connect(s, endpoint) != 0) {
		err = errno;
		zmq_close(s);
		errno = err;
		return NULL;
	}
	return s;
}

int wire_send_bytes(void *sock, const void *identity, size_t idlen, const void *buf, size_t len,
		    bool dontwait)
{
	int flags = dontwait ? ZMQ_DONTWAIT : 0;

	if (!sock || (len && !buf) || (idlen && !identity))
		return -EINVAL;
	if (identity && zmq_send(sock, identity, idlen, flags | ZMQ_SNDMORE) < 0)
		return errno == EAGAIN ? -EAGAIN : -errno;
	/* after the identity frame was taken, the body goes into the same pipe: it cannot
	 * find it full (ZeroMQ queues multipart messages atomically) */
	if (zmq_send(sock, buf, len, flags) < 0)
		return errno == EAGAIN ? -EAGAIN : -errno;
	return 0;
}

int wire_send(void *sock, const void *identity, size_t idlen, const Weft__Envelope *e,
	      bool dontwait)
{
	void *buf;
	size_t len;
	int rc;

	rc = wire_encode(e, &buf, &len);
	if (rc)
		return rc;
	rc = wire_send_bytes(sock, identity, idlen, buf, len, dontwait);
	free(buf);
	return rc;
}

void *wire_monitor_open(void *zctx, void *sock, int events)
{
	static atomic_uint next;
	char ep[96];
	void *mon;
	int err, zero = 0;

	if (!zctx || !sock) {
		errno = EINVAL;
		return NULL;
	}
	/* unique within the process: the name of an inproc endpoint is global to the context,
	 * and a socket's address may come again after it was closed */
	snprintf(ep, sizeof(ep), "inproc://weft-monitor-%p-%u", sock, atomic_fetch_add(&next, 1));
	if (zmq_socket_monitor(sock, ep, events) != 0)
		return NULL;
	mon = zmq_socket(zctx, ZMQ_PAIR);
	/* no high-water mark: a dropped event would leave its reader's state wrong (events are
	 * small and read at every turn of the loop); no linger: they die with the socket */
	if (!mon || zmq_setsockopt(mon, ZMQ_RCVHWM, &zero, sizeof(zero)) != 0 ||
	    zmq_setsockopt(mon, ZMQ_LINGER, &zero, sizeof(zero)) != 0 ||
	    zmq_connect(mon, ep) != 0) {
		err = errno;
		if (mon)
			zmq_close(mon);
		zmq_socket_monitor(sock, NULL, 0);
		errno = err;
		return NULL;
	}
	return mon;
}

int wire_monitor_read(void *mon, uint32_t *value)
{
	zmq_msg_t m;
	uint16_t ev = 0;
	uint32_t val = 0;
	int more = 0;
	size_t sz = sizeof(more);

	if (!mon)
		return 0;
	zmq_msg_init(&m);
	if (zmq_msg_recv(&m, mon, ZMQ_DONTWAIT) < 0) {
		zmq_msg_close(&m);
		return 0;
	}
	/* frame 1: the event (16 bits) and its value (32 bits); frame 2: the endpoint */
	if (zmq_msg_size(&m) >= 6) {
		memcpy(&ev, zmq_msg_data(&m), 2);
		memcpy(&val, (uint8_t *)zmq_msg_data(&m) + 2, 4);
	}
	zmq_getsockopt(mon, ZMQ_RCVMORE, &more, &sz);
	zmq_msg_close(&m);
	while (more) {
		zmq_msg_init(&m);
		if (zmq_msg_recv(&m, mon, 0) < 0)
			more = 0;
		else
			zmq_getsockopt(mon, ZMQ_RCVMORE, &more, &sz);
		zmq_msg_close(&m);
	}
	if (value)
		*value = val;
	return ev; /* ZMQ_EVENT_* are all nonzero */
}

void wire_monitor_close(void *sock, void *mon)
{
	if (sock)
		zmq_socket_monitor(sock, NULL, 0);
	if (mon)
		zmq_close(mon);
}
