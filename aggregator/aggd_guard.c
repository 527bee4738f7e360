// SPDX-License-Identifier: Apache-2.0
/*
 * The guard over the server socket's connections: bounds those still in their handshake,
 * cuts the oldest of them when descriptors run short, and counts the connections that went
 * away without delivering a message.  aggd_guard.h says what and why; here is how.
 *
 * A connection is known by its descriptor.  The monitor (ZMQ_EVENT_ACCEPTED and
 * ZMQ_EVENT_DISCONNECTED carry it) says when one starts and ends; the first message of a
 * routing id carries it too (ZMQ_SRCFD), which makes the connection established.  libzmq
 * writes a connection's ACCEPTED event before it delivers any of its messages, so the
 * monitor is drained before a message's descriptor is looked at: the slot then describes
 * that very connection.  Descriptors are reused as soon as libzmq closes them, so before
 * cutting one the guard checks that it is still the connection it recorded (same peer
 * address and port, read with getpeername() when it was accepted); if not, it is left alone.
 *
 * Cutting is shutdown(2), not close(2): the descriptor stays libzmq's, which sees the
 * connection end, closes it and reports DISCONNECTED like any other.
 *
 * Must never: cut an established connection, block, or act on a descriptor that does not
 * hold the connection it recorded.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include "aggregator/aggd_guard.h"
#include "agent/wire.h"
#include "base/log.h"

#define EVENTS_PER_POLL 8192 /* monitor events handled per call: the loop stays responsive */
#define KEEP_NEWEST 16 /* pending connections never cut: the newest (a client getting in) */
#define LOG_EVERY_MS 5000

enum slot_state { SLOT_FREE, SLOT_PENDING, SLOT_ESTABLISHED };

struct peer_addr {
	sa_family_t family; /* 0: unknown */
	in_port_t port;
	uint8_t addr[16];
};

struct slot {
	uint8_t state;
	bool cut; /* tried once (or its peer unknown): never again */
	bool shut; /* shut down by the guard, its end not reported yet */
	uint32_t serial; /* of its ACCEPTED event: matches its queue entry */
	struct peer_addr peer;
};

struct qent {
	int fd;
	uint32_t serial;
};

struct aggd_guard {
	void *sock; /* the server socket (not ours) */
	void *mon; /* PAIR connected to the monitor of sock */
	struct slot *slots; /* by descriptor */
	size_t nslots;
	struct qent *q; /* pending connections, oldest first (stale entries skipped) */
	size_t qhead, qlen, qcap;
	uint32_t serial;
	size_t pending, established;
	size_t shut; /* pending ones shut down, their end not reported yet */
	size_t budget; /* connections held at most: the descriptor limit minus a reserve */
	size_t limit; /* RLIMIT_NOFILE */
	uint64_t failed, cut, accept_failed;
	uint64_t logged_ms, cut_logged;
	bool short_of_fds; /* an accept failed: cut more */
};

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000ULL + (uint64_t)ts.tv_nsec / 1000000ULL;
}

static bool peer_read(int fd, struct peer_addr *p)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	memset(p, 0, sizeof(*p));
	if (getpeername(fd, (struct sockaddr *)&ss, &len) != 0)
		return false;
	if (ss.ss_family == AF_INET) {
		const struct sockaddr_in *s = (const struct sockaddr_in *)&ss;

		p->port = s->sin_port;
		memcpy(p->addr, &s->sin_addr, 4);
	} else if (ss.ss_family == AF_INET6) {
		const struct sockaddr_in6 *s = (const struct sockaddr_in6 *)&ss;

		p->port = s->sin6_port;
		memcpy(p->addr, &s->sin6_addr, 16);
	} else {
		return false;
	}
	p->family = ss.ss_family;
	return true;
}

static struct slot *slot_get(struct aggd_guard *g, int fd, bool grow)
{
	if (fd < 0)
		return NULL;
	if ((size_t)fd >= g->nslots) {
		size_t n = g->nslots ? g->nslots : 1024;
		struct slot *nv;

		if (!grow)
			return NULL;
		while (n <= (size_t)fd)
			n *= 2;
		nv = realloc(g->slots, n * sizeof(*nv));
		if (!nv)
			return NULL;
		memset(nv + g->nslots, 0, (n - g->nslots) * sizeof(*nv));
		g->slots = nv;
		g->nslots = n;
	}
	return &g->slots[fd];
}

/* Drops the entries of connections no longer pending (established or gone). */
static void queue_compact(struct aggd_guard *g)
{
	size_t n = 0;

	for (size_t i = g->qhead; i < g->qhead + g->qlen; i++) {
		const struct slot *s = slot_get(g, g->q[i].fd, false);

		if (s && s->state == SLOT_PENDING && s->serial == g->q[i].serial)
			g->q[n++] = g->q[i];
	}
	g->qhead = 0;
	g->qlen = n;
}

static void queue_push(struct aggd_guard *g, int fd, uint32_t serial)
{
	/* entries are dropped when cut; the others linger until compacted */
	if (g->qlen > 2 * g->pending + 1024)
		queue_compact(g);
	if (g->qhead && g->qhead >= g->qcap / 2) {
		memmove(g->q, g->q + g->qhead, g->qlen * sizeof(*g->q));
		g->qhead = 0;
	}
	if (g->qhead + g->qlen == g->qcap) {
		size_t cap = g->qcap ? g->qcap * 2 : 1024;
		struct qent *nv = realloc(g->q, cap * sizeof(*nv));

		if (!nv)
			return; /* not queued: never cut, still closed by the handshake timeout */
		g->q = nv;
		g->qcap = cap;
	}
	g->q[g->qhead + g->qlen++] = (struct qent){ fd, serial };
}

/* A connection is over: counted if it never delivered a message. */
static void slot_end(struct aggd_guard *g, struct slot *s)
{
	if (s->state == SLOT_PENDING) {
		g->pending--;
		g->failed++;
	} else if (s->state == SLOT_ESTABLISHED) {
		g->established--;
	}
	if (s->shut)
		g->shut--;
	s->state = SLOT_FREE;
	s->cut = false;
	s->shut = false;
}

static void on_event(struct aggd_guard *g, uint16_t event, uint32_t value)
{
	int fd = (int)value;
	struct slot *s;

	switch (event) {
	case ZMQ_EVENT_ACCEPTED:
		s = slot_get(g, fd, true);
		if (!s)
			return;
		if (s->state != SLOT_FREE)
			slot_end(g, s); /* its end was not reported: it is gone all the same */
		s->state = SLOT_PENDING;
		s->cut = !peer_read(fd, &s->peer); /* unknown peer: never cut */
		s->serial = ++g->serial;
		g->pending++;
		queue_push(g, fd, s->serial);
		break;
	case ZMQ_EVENT_DISCONNECTED:
		s = slot_get(g, fd, false);
		if (s)
			slot_end(g, s);
		break;
	case ZMQ_EVENT_ACCEPT_FAILED:
		/* EMFILE, ENFILE, ENOBUFS: the bound was not enough; cut more */
		g->accept_failed++;
		g->short_of_fds = true;
		break;
	default:
		break;
	}
}

/* Reads up to max monitor events. */
static void drain(struct aggd_guard *g, int max)
{
	for (int n = 0; n < max; n++) {
		uint32_t value = 0;
		int event = wire_monitor_read(g->mon, &value);

		if (!event)
			return;
		on_event(g, (uint16_t)event, value);
	}
}

/* How many pending connections are over the bounds now. */
static size_t over(const struct aggd_guard *g)
{
	/* those already shut down are as good as gone: libzmq is closing them */
	size_t pending = g->pending - g->shut, held = pending + g->established, n = 0;

	if (held > g->budget)
		n = held - g->budget;
	if (pending > AGGD_GUARD_MAX_PENDING && pending - AGGD_GUARD_MAX_PENDING > n)
		n = pending - AGGD_GUARD_MAX_PENDING;
	if (g->short_of_fds) {
		size_t extra = (g->limit - g->budget) / 4;

		if (n < extra)
			n = extra;
	}
	return n;
}

/* Cuts the oldest pending connections that are over the bounds. */
static void shed(struct aggd_guard *g)
{
	size_t want = over(g), done = 0;

	g->short_of_fds = false;
	if (!want)
		return;
	queue_compact(g); /* so that the newest kept are pending ones */
	while (done < want && g->qlen > KEEP_NEWEST) {
		struct qent e = g->q[g->qhead];
		struct slot *s = slot_get(g, e.fd, false);
		struct peer_addr now;

		g->qhead++;
		g->qlen--;
		if (!s || s->state != SLOT_PENDING || s->serial != e.serial || s->cut)
			continue; /* established, gone, or not ours to cut */
		s->cut = true;
		/* the descriptor must still hold the connection that was accepted */
		if (!peer_read(e.fd, &now) || memcmp(&now, &s->peer, sizeof(now)) != 0)
			continue;
		if (shutdown(e.fd, SHUT_RDWR) == 0) {
			s->shut = true;
			g->shut++;
			g->cut++;
			done++;
		}
	}
	if (done && (mono_ms() - g->logged_ms >= LOG_EVERY_MS || !g->logged_ms)) {
		log_warn("aggregator: %zu connections waiting for their handshake, %zu established "
			 "(descriptor limit %zu): cut the oldest waiting ones, %" PRIu64
			 " since the last report",
			 g->pending, g->established, g->limit, g->cut - g->cut_logged);
		g->logged_ms = mono_ms();
		g->cut_logged = g->cut;
	}
}

struct aggd_guard *aggd_guard_new(void *zctx, void *sock)
{
	struct aggd_guard *g = calloc(1, sizeof(*g));
	struct rlimit rl;
	size_t reserve;
	int err;

	if (!g)
		return NULL;
	g->sock = sock;
	g->limit = 1024;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
		g->limit = (size_t)rl.rlim_cur;
	reserve = g->limit / AGGD_GUARD_RESERVE_DIV;
	if (reserve < AGGD_GUARD_RESERVE_MIN)
		reserve = AGGD_GUARD_RESERVE_MIN;
	g->budget = g->limit > 2 * reserve ? g->limit - reserve : g->limit / 2;
	/* no high-water mark on what the monitor sends us (wire_monitor_open()): an event
	 * dropped would leave a slot wrong; they are small, and drained at every turn */
	g->mon = wire_monitor_open(
		zctx, sock, ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_ACCEPT_FAILED);
	if (!g->mon)
		goto out_errno;
	log_debug("aggregator: descriptor limit %zu: at most %zu connections, %d of them in "
		  "their handshake",
		  g->limit, g->budget, AGGD_GUARD_MAX_PENDING);
	return g;

out_errno:
	err = errno;
	free(g);
	errno = err;
	return NULL;
}

void aggd_guard_free(struct aggd_guard *g)
{
	if (!g)
		return;
	wire_monitor_close(g->sock, g->mon);
	free(g->slots);
	free(g->q);
	free(g);
}

void *aggd_guard_socket(const struct aggd_guard *g)
{
	return g ? g->mon : NULL;
}

void aggd_guard_poll(struct aggd_guard *g)
{
	if (!g)
		return;
	drain(g, EVENTS_PER_POLL);
	shed(g);
}

void aggd_guard_seen(struct aggd_guard *g, zmq_msg_t *msg)
{
	struct slot *s;
	int fd;

	if (!g)
		return;
	fd = zmq_msg_get(msg, ZMQ_SRCFD);
	if (fd < 0)
		return;
	/* its ACCEPTED event was written before the message: read up to it, and so every
	 * event before it (a finite number: the monitor is read faster than libzmq accepts) */
	drain(g, INT_MAX);
	s = slot_get(g, fd, false);
	if (!s || s->state != SLOT_PENDING)
		return;
	s->state = SLOT_ESTABLISHED;
	g->pending--;
	g->established++;
	if (s->shut) {
		/* a message it sent before it was cut: it is closing all the same */
		s->shut = false;
		g->shut--;
	}
}

uint64_t aggd_guard_failed(const struct aggd_guard *g)
{
	return g ? g->failed : 0;
}

uint64_t aggd_guard_cut(const struct aggd_guard *g)
{
	return g ? g->cut : 0;
}
