// SPDX-License-Identifier: Apache-2.0
/*
 * Kernel message edges across hosts (docs/graphs.md, "Across hosts"): the aggregator matches
 * one agent's socket send with another agent's receive, which neither agent can do alone.
 *
 * What the agents ship (agent/graphcap.c): every kernel task of kernel:sockets carries its
 * socket data in its attributes: a server task its first receive ("kernel.recv"), a client
 * task its first sends ("kernel.sends"), each [laddr, lport, raddr, rport, seq_end, len] (host
 * order, graph/kmsg.h; IPv6 addresses as text, "2001:db8::1").  An agent that saw both ends already joined them: the server task
 * has a message edge into it.  One that saw only the receive made the server task the root of
 * a trace of its own (with its spans and the client tasks it ran as children).
 *
 * How: before a batch is stored, aggd_kx_batch() rewrites it:
 *   1. trace ids that an earlier match moved are moved again (later pieces of that trace);
 *   2. a server task that is a root, with no message edge into it, is matched against the
 *      sends remembered from earlier batches (and this one) by graph/kmsg.c's rule (mirrored
 *      4-tuple, overlapping bytes of the stream): on a match, its whole trace in the batch
 *      moves into the client task's trace, with a message edge client -> server; without
 *      one, the receive is remembered;
 *   3. a client task's sends are matched against the remembered receives: on a match, the
 *      client task's trace in the batch moves into the server task's (already stored), with
 *      the message edge; then its sends are remembered.
 * So whichever side arrives second moves into the trace of the side already stored: the
 * order of arrival does not matter, and the store is never rewritten (a chain of tiers,
 * where the innermost completes first, joins tier by tier).  A side that would move a trace
 * which earlier batches of the query already stored pieces of is not moved (that would split
 * it): counted in `split`.
 *
 * Limits: sends, receives and moves are remembered for KX_KEEP_NS of the aggregator's clock
 * and KX_MAX of each at most (the oldest forgotten first, counted in `dropped`); a match
 * needs both sides within that.  Lookups scan the remembered entries of the query
 * (O(KX_MAX) per task).  Attributes that are not what an agent writes are ignored and
 * counted in `bad`, never refused (the batch is stored as it came).  State is in memory: an
 * aggregator restarted between the two sides of a request leaves them apart.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <jansson.h>
#include "aggregator/aggd_kx.h"
#include "graph/kmsg.h"

#define KX_MAX 16384
#define KX_KEEP_NS (30ull * 1000000000ull)
#define KX_SENDS 8 /* sends of one client task looked at */

struct kx_io {
	uint64_t query;
	struct kmsg_io io;
	struct graph_id128 trace;
	uint64_t task;
	uint64_t at; /* CLOCK_MONOTONIC ns */
	bool used;
};

struct kx_move {
	uint64_t query;
	struct graph_id128 from, to;
	uint64_t at;
	bool used;
};

/* A ring of at most KX_MAX entries: the oldest is overwritten first. */
struct aggd_kx {
	struct kx_io sends[KX_MAX], recvs[KX_MAX];
	struct kx_move moves[KX_MAX];
	size_t nsend, nrecv, nmove; /* next slot to write (mod KX_MAX) */
	struct aggd_kx_stats st;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

struct aggd_kx *aggd_kx_new(void)
{
	return calloc(1, sizeof(struct aggd_kx));
}

void aggd_kx_free(struct aggd_kx *k)
{
	free(k);
}

void aggd_kx_stats(const struct aggd_kx *k, struct aggd_kx_stats *st)
{
	if (k)
		*st = k->st;
	else
		memset(st, 0, sizeof(*st));
}

static bool id_eq(struct graph_id128 a, struct graph_id128 b)
{
	return a.hi == b.hi && a.lo == b.lo;
}

static bool fresh(uint64_t at, uint64_t now)
{
	return at + KX_KEEP_NS > now;
}

/*
 * One [laddr, lport, raddr, rport, seq_end, len]; false if it is not one.  The addresses are
 * both numbers (IPv4, host order: what every agent writes for IPv4) or both IPv6 text
 * ("2001:db8::1"), normalised by kmsg_io_set6() (a v4-mapped text is its IPv4 address).
 */
static bool kio_parse(json_t *a, struct kmsg_io *io)
{
	json_int_t v[6] = { 0 };
	uint8_t a6[2][16];
	bool v6;

	if (!json_is_array(a) || json_array_size(a) != 6)
		return false;
	v6 = json_is_string(json_array_get(a, 0));
	for (size_t i = 0; i < 6; i++) {
		json_t *x = json_array_get(a, i);

		if (v6 && (i == 0 || i == 2)) {
			if (!json_is_string(x) ||
			    !kmsg_addr6_parse(json_string_value(x), a6[i / 2]))
				return false;
			continue;
		}
		if (!json_is_integer(x))
			return false;
		v[i] = json_integer_value(x);
		if (v[i] < 0 || v[i] > ((i == 1 || i == 3) ? 65535 : (json_int_t)UINT32_MAX))
			return false;
	}
	*io = (struct kmsg_io){ .laddr = (uint32_t)v[0],
				.raddr = (uint32_t)v[2],
				.lport = (uint16_t)v[1],
				.rport = (uint16_t)v[3],
				.seq_end = (uint32_t)v[4],
				.len = (uint32_t)v[5] };
	if (v6)
		kmsg_io_set6(io, a6[0], a6[1]);
	return io->len != 0;
}

static bool matches(const struct kmsg_io *send, const struct kmsg_io *recv)
{
	struct kmsg_match *m = NULL;
	size_t n = 0;

	if (!kmsg_mirrored(send, recv))
		return false; /* the cheap test first: kmsg_match() says the same */
	if (kmsg_match(send, 1, recv, 1, &m, &n))
		return false;
	free(m);
	return n > 0;
}

static void put_io(struct kx_io *ring, size_t *next, struct aggd_kx *k, const struct kx_io *e)
{
	struct kx_io *slot = &ring[*next % KX_MAX];

	if (slot->used && fresh(slot->at, e->at))
		k->st.dropped++;
	*slot = *e;
	slot->used = true;
	(*next)++;
}

static void put_move(struct aggd_kx *k, uint64_t q, struct graph_id128 from, struct graph_id128 to,
		     uint64_t now)
{
	struct kx_move *slot = &k->moves[k->nmove++ % KX_MAX];

	if (slot->used && fresh(slot->at, now))
		k->st.dropped++;
	*slot = (struct kx_move){ q, from, to, now, true };
}

/* Every element of trace `from` in g into trace `to`. */
static void retrace(struct graph *g, struct graph_id128 from, struct graph_id128 to)
{
	for (size_t i = 0; i < g->ntasks; i++)
		if (id_eq(g->tasks[i].trace, from))
			g->tasks[i].trace = to;
	for (size_t i = 0; i < g->nevents; i++)
		if (id_eq(g->events[i].trace, from))
			g->events[i].trace = to;
	for (size_t i = 0; i < g->nedges; i++)
		if (id_eq(g->edges[i].trace, from))
			g->edges[i].trace = to;
}

static bool has_msg_into(const struct graph *g, const struct graph_task *t)
{
	for (size_t i = 0; i < g->nedges; i++) {
		const struct graph_edge *e = &g->edges[i];

		if (e->kind == GRAPH_EDGE_MESSAGE && e->to_task == t->id &&
		    id_eq(e->trace, t->trace))
			return true;
	}
	return false;
}

/* Moves trace `from` of the batch into `to` with a message edge client -> server (in `to`);
 * false (counted) when earlier batches stored pieces of `from`. */
static int join(struct aggd_kx *k, uint64_t q, struct graph *g, struct graph_id128 from,
		struct graph_id128 to, uint64_t client, uint64_t server, aggd_kx_stored_fn stored,
		void *arg, uint64_t now)
{
	struct graph_edge ed = { .trace = to,
				 .kind = GRAPH_EDGE_MESSAGE,
				 .from_task = client,
				 .to_task = server,
				 .source = GRAPH_SRC_KERNEL };

	if (id_eq(from, to))
		return 0;
	if (stored && stored(arg, from)) {
		k->st.split++;
		return 0;
	}
	retrace(g, from, to);
	if (!graph_add_edge(g, &ed))
		return -ENOMEM;
	put_move(k, q, from, to, now);
	/* moves that led into `from` now lead into `to` */
	for (size_t i = 0; i < KX_MAX; i++)
		if (k->moves[i].used && k->moves[i].query == q && id_eq(k->moves[i].to, from))
			k->moves[i].to = to;
	for (size_t i = 0; i < KX_MAX; i++) {
		if (k->sends[i].used && k->sends[i].query == q && id_eq(k->sends[i].trace, from))
			k->sends[i].trace = to;
		if (k->recvs[i].used && k->recvs[i].query == q && id_eq(k->recvs[i].trace, from))
			k->recvs[i].trace = to;
	}
	k->st.matched++;
	return 1;
}

int aggd_kx_batch(struct aggd_kx *k, uint64_t q, struct graph *g, aggd_kx_stored_fn stored,
		  void *arg)
{
	uint64_t now = now_ns();
	int rc = 0;

	if (!k)
		return 0;
	/* 1: later pieces of moved traces */
	for (size_t i = 0; i < KX_MAX; i++) {
		const struct kx_move *mv = &k->moves[i];

		if (mv->used && mv->query == q && fresh(mv->at, now))
			retrace(g, mv->from, mv->to);
	}
	/* 2: server tasks that are roots of their own trace */
	for (size_t i = 0; i < g->ntasks && rc >= 0; i++) {
		struct graph_task *t = &g->tasks[i];
		json_t *o, *a;
		struct kmsg_io io;
		bool done = false;

		if (t->source != GRAPH_SRC_KERNEL || !t->attrs || !strstr(t->attrs, "kernel.recv"))
			continue;
		o = json_loads(t->attrs, 0, NULL);
		a = json_object_get(o, "kernel.recv");
		if (!a) {
			json_decref(o);
			continue;
		}
		if (!kio_parse(a, &io)) {
			k->st.bad++;
			json_decref(o);
			continue;
		}
		json_decref(o);
		if (t->parent || has_msg_into(g, t))
			continue; /* joined already (by its agent) */
		for (size_t s = 0; s < KX_MAX && !done; s++) {
			const struct kx_io *e = &k->sends[s];

			if (!e->used || e->query != q || !fresh(e->at, now) ||
			    !matches(&e->io, &io))
				continue;
			rc = join(k, q, g, g->tasks[i].trace, e->trace, e->task, g->tasks[i].id,
				  stored, arg, now);
			done = true;
		}
		if (!done)
			put_io(k->recvs, &k->nrecv, k,
			       &(struct kx_io){ q, io, g->tasks[i].trace, g->tasks[i].id, now,
						true });
	}
	/* 3: client tasks: matched against remembered receives, then remembered */
	for (size_t i = 0; i < g->ntasks && rc >= 0; i++) {
		struct graph_task *t = &g->tasks[i];
		struct kmsg_io ios[KX_SENDS];
		size_t n = 0;
		json_t *o, *a;
		bool bad = false;

		if (t->source != GRAPH_SRC_KERNEL || !t->attrs || !strstr(t->attrs, "kernel.sends"))
			continue;
		o = json_loads(t->attrs, 0, NULL);
		a = json_object_get(o, "kernel.sends");
		if (!a) {
			json_decref(o);
			continue;
		}
		if (!json_is_array(a))
			bad = true;
		for (size_t s = 0; !bad && s < json_array_size(a) && n < KX_SENDS; s++)
			bad = !kio_parse(json_array_get(a, s), &ios[n++]);
		json_decref(o);
		if (bad) {
			k->st.bad++;
			continue;
		}
		for (size_t s = 0; s < n && rc >= 0; s++) {
			for (size_t r = 0; r < KX_MAX; r++) {
				struct kx_io *e = &k->recvs[r];

				if (!e->used || e->query != q || !fresh(e->at, now) ||
				    !matches(&ios[s], &e->io))
					continue;
				e->used = false; /* one sender per receive */
				rc = join(k, q, g, g->tasks[i].trace, e->trace, g->tasks[i].id,
					  e->task, stored, arg, now);
				break;
			}
		}
		for (size_t s = 0; s < n; s++)
			put_io(k->sends, &k->nsend, k,
			       &(struct kx_io){ q, ios[s], g->tasks[i].trace, g->tasks[i].id, now,
						true });
	}
	return rc < 0 ? rc : 0;
}
