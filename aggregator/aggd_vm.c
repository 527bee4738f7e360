// SPDX-License-Identifier: Apache-2.0
/*
 * VM synchronisation, live (docs/vm.md "Live: guest and host agents"): the aggregator joins a
 * host side's hypercall points and a guest side's clock readings by id, as their windows
 * close, and keeps the offset between the two clocks with its error bound.
 *
 * The two sides are two ordinary aggregating queries, each limited to its agents
 * (Submit.only_hosts), so the points travel as aggregated windows like any other result:
 *
 *   host   ... group by <a0> as id select min(time) as host_ns, count() as n
 *   guest  ... group by <arg0> as id select min(<before>) as before, max(<after>) as after,
 *              count() as n
 *
 * (`weft vm sync` writes them; the guest side's Submit names the host side's query id in
 * vm_sync_host, which makes the pair.)  Every window either side emits (a revision too) is
 * read group by group: an id seen on one side waits for the other (bounded:
 * AGGD_VM_MAX_IDS ids, then dropped and counted); once both are there the id is a point,
 * [host_ns - after, host_ns - before] (vm/sync.h), intersected into the pair's running
 * interval.  The points that a window completes are intersected in id order, so the outcome
 * does not depend on hash order.  A point whose interval does not meet the intersection so far
 * is refused and counted, never averaged in: the offset stays what the earlier points
 * allow.  An id seen twice on one side with another value, or counted more than once in one
 * window (n > 1), is not a point (duplicates); a guest reading with after < before is
 * malformed.  Neither makes an offset.  Until a point joins the pair is unsynchronised:
 * no offset at all, never 0.
 *
 * The pair's state rides on every Result of either query (Result.vm_sync) and on their
 * QueryStatus: a client following both sees it after each window, and the last state once
 * both sides' last windows were joined (host_done, guest_done).
 *
 * Limits: nothing of the pair is stored; after a restart it is rebuilt from the windows the
 * aggregator still retains of both queries (AGGD_KEEP_WINDOWS, 10 minutes), so points older
 * than that are lost to the intersection.  One host query pairs with one guest query.  Only
 * the agents of this aggregator (only_hosts names them, not a child aggregator's agents).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "agent/result.h"
#include "aggregator/aggd_int.h"
#include "base/log.h"
#include "vm/sync.h"

#define HAVE_HOST 1u
#define HAVE_GUEST 2u
#define JOINED 4u
#define BAD 8u /* a duplicate with another value: never a point */

struct vm_id {
	uint64_t id;
	int64_t host_ns, before, after;
	uint8_t flags; /* 0: a free slot */
};

struct aggd_vm {
	uint64_t host_id; /* the guest side is the query that holds the pair */
	/* the columns of each side's plan */
	int h_id, h_ns, h_n, g_id, g_before, g_after, g_n;
	struct vm_sync_acc acc;
	struct vm_id *tab; /* open addressing, cap a power of 2, at most half full */
	size_t cap, n;
	uint64_t malformed, duplicates, dropped;
	bool host_done, guest_done;
};

static int col_key(const struct plan *p, const char *name)
{
	for (int i = 0; i < p->nkeys; i++)
		if (strcmp(p->keys[i].name, name) == 0)
			return i;
	return -1;
}

static int col_agg(const struct plan *p, const char *name, enum agg_kind kind)
{
	for (int i = 0; i < p->naggs; i++)
		if (strcmp(p->aggs[i].name, name) == 0 && p->aggs[i].spec.kind == kind)
			return i;
	return -1;
}

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	return x;
}

/* The slot of id: found, a free one (flags 0) to take, or NULL when the bound is reached. */
static struct vm_id *slot(struct aggd_vm *v, uint64_t id)
{
	if (v->n + 1 > v->cap / 2) {
		size_t cap = v->cap ? v->cap * 2 : 1024;
		struct vm_id *nt;

		if (v->n >= AGGD_VM_MAX_IDS)
			goto find;
		nt = calloc(cap, sizeof(*nt));
		if (!nt)
			goto find;
		for (size_t i = 0; i < v->cap; i++) {
			size_t j;

			if (!v->tab[i].flags)
				continue;
			for (j = mix(v->tab[i].id) & (cap - 1); nt[j].flags;
			     j = (j + 1) & (cap - 1))
				;
			nt[j] = v->tab[i];
		}
		free(v->tab);
		v->tab = nt;
		v->cap = cap;
	}
find:
	if (!v->cap)
		return NULL;
	for (size_t j = mix(id) & (v->cap - 1);; j = (j + 1) & (v->cap - 1)) {
		if (!v->tab[j].flags)
			return v->n + 1 > v->cap / 2 ? NULL : &v->tab[j];
		if (v->tab[j].id == id)
			return &v->tab[j];
	}
}

static int cmp_u64(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;

	return a < b ? -1 : a > b;
}

/*
 * One window of either side into the pair: each group's id on its side, then the ids it
 * completed intersected in id order.
 */
static void feed(struct aggd_vm *v, const struct plan *p, bool host,
		 const struct aggd_window_view *w)
{
	size_t ng = agent_table_groups(w->table), nj = 0;
	int64_t *keys = calloc((size_t)p->nkeys + 1, sizeof(*keys));
	int64_t *aggs = calloc((size_t)p->naggs + 1, sizeof(*aggs));
	bool *empty = calloc((size_t)p->naggs + 1, sizeof(*empty));
	uint64_t *joined = calloc(ng + 1, sizeof(*joined));

	if (!keys || !aggs || !empty || !joined) {
		v->dropped += ng;
		goto out;
	}
	for (size_t i = 0; i < ng; i++) {
		struct vm_id *e;
		uint64_t id;
		int64_t a, b = 0, n;
		unsigned side = host ? HAVE_HOST : HAVE_GUEST;

		if (agent_table_row_ints(w->table, i, keys, aggs, empty)) {
			v->malformed++;
			continue;
		}
		id = (uint64_t)keys[host ? v->h_id : v->g_id];
		n = aggs[host ? v->h_n : v->g_n];
		a = aggs[host ? v->h_ns : v->g_before];
		if (!host)
			b = aggs[v->g_after];
		if (empty[host ? v->h_ns : v->g_before] || (!host && empty[v->g_after]) ||
		    (!host && (b < a || a < 0))) {
			v->malformed++;
			continue;
		}
		e = slot(v, id);
		if (!e) {
			v->dropped++;
			continue;
		}
		if (!e->flags) {
			e->id = id;
			v->n++;
		}
		if (e->flags & BAD)
			continue;
		if (e->flags & side) {
			/* a window again (a revision, a replay): the same value is no news */
			if (host ? e->host_ns == a : e->before == a && e->after == b)
				continue;
			v->duplicates++;
			if (!(e->flags & JOINED))
				e->flags |= BAD;
			continue;
		}
		e->flags |= side;
		if (host) {
			e->host_ns = a;
		} else {
			e->before = a;
			e->after = b;
		}
		if (n > 1) { /* the id fired twice in one window: which one was the point? */
			v->duplicates++;
			e->flags |= BAD;
			continue;
		}
		if ((e->flags & (HAVE_HOST | HAVE_GUEST)) == (HAVE_HOST | HAVE_GUEST))
			joined[nj++] = id;
	}
	if (nj)
		qsort(joined, nj, sizeof(*joined), cmp_u64);
	for (size_t i = 0; i < nj; i++) {
		struct vm_id *e = slot(v, joined[i]);
		int64_t lo, hi;

		if (!e || e->id != joined[i])
			continue; /* cannot happen: it was just stored */
		e->flags |= JOINED;
		if (vm_sync_point(e->host_ns, e->before, e->after, &lo, &hi))
			v->malformed++;
		else
			vm_sync_acc_add(&v->acc, lo, hi);
	}
	if (w->last) {
		if (host)
			v->host_done = true;
		else
			v->guest_done = true;
	}
out:
	free(keys);
	free(aggs);
	free(empty);
	free(joined);
}

void aggd_vm_free(struct aggd_vm *v)
{
	if (!v)
		return;
	free(v->tab);
	free(v);
}

/* The pair q is a side of, and whether q is its host side; NULL if none. */
static struct aggd_vm *pair_of(struct aggd *a, const struct query *q, struct query **guest,
			       bool *host)
{
	if (q->vm) {
		*host = false;
		*guest = (struct query *)q;
		return q->vm;
	}
	for (size_t i = 0; i < a->nq; i++)
		if (a->q[i]->vm && a->q[i]->vm->host_id == q->id) {
			*host = true;
			*guest = a->q[i];
			return a->q[i]->vm;
		}
	return NULL;
}

struct feed_ctx {
	struct aggd_vm *v;
	const struct plan *p;
	bool host;
};

static int feed_cb(void *ctx, const struct aggd_window_view *w)
{
	struct feed_ctx *c = ctx;

	feed(c->v, c->p, c->host, w);
	return 0;
}

int aggd_vm_attach(struct aggd *a, struct query *q, uint64_t host_id, char *why, size_t whysz)
{
	struct query *h = aggd_query_find(a, host_id), *g;
	struct aggd_vm *v;
	bool is_host;

	if (!h || h == q) {
		snprintf(why, whysz, "the VM synchronisation's host query %" PRIu64 " is not here",
			 host_id);
		return -ENOENT;
	}
	if (h->vm || pair_of(a, h, &g, &is_host)) {
		snprintf(why, whysz,
			 "query %" PRIu64 " is a side of another VM synchronisation already",
			 host_id);
		return -EBUSY;
	}
	v = calloc(1, sizeof(*v));
	if (!v) {
		snprintf(why, whysz, "out of memory");
		return -ENOMEM;
	}
	v->host_id = host_id;
	v->h_id = col_key(h->plan, "id");
	v->h_ns = col_agg(h->plan, "host_ns", AGG_MIN);
	v->h_n = col_agg(h->plan, "n", AGG_COUNT);
	v->g_id = col_key(q->plan, "id");
	v->g_before = col_agg(q->plan, "before", AGG_MIN);
	v->g_after = col_agg(q->plan, "after", AGG_MAX);
	v->g_n = col_agg(q->plan, "n", AGG_COUNT);
	if (h->plan->graph || q->plan->graph || v->h_id < 0 || v->h_ns < 0 || v->h_n < 0 ||
	    v->g_id < 0 || v->g_before < 0 || v->g_after < 0 || v->g_n < 0) {
		snprintf(why, whysz,
			 "a VM synchronisation pairs a host query `group by ... as id select "
			 "min(...) as host_ns, count() as n` with a guest query `group by ... as "
			 "id select min(...) as before, max(...) as after, count() as n` "
			 "(`weft vm sync` writes both)");
		free(v);
		return -EINVAL;
	}
	vm_sync_acc_init(&v->acc);
	q->vm = v;
	/* what either side emitted already (a restart, or a host window closed before the
	 * guest side came) */
	{
		struct feed_ctx c = { v, h->plan, true };

		aggd_qwin_replay(h->qw, 0, feed_cb, &c);
		c = (struct feed_ctx){ v, q->plan, false };
		aggd_qwin_replay(q->qw, 0, feed_cb, &c);
	}
	log_info("aggregator: a VM synchronisation with host query %" PRIu64, host_id);
	return 0;
}

void aggd_vm_window(struct aggd *a, struct query *q, const struct aggd_window_view *w)
{
	struct query *g;
	bool host;
	struct aggd_vm *v = pair_of(a, q, &g, &host);
	uint64_t before;

	if (!v)
		return;
	before = v->acc.refused;
	feed(v, q->plan, host, w);
	if (v->acc.refused != before)
		log_warn("aggregator: VM synchronisation %" PRIu64 "/%" PRIu64 ": %" PRIu64
			 " contradicting point%s refused so far",
			 v->host_id, g->id, v->acc.refused, v->acc.refused == 1 ? "" : "s");
}

Weft__VmSync *aggd_vm_state(struct aggd *a, const struct query *q, Weft__VmSync *out)
{
	struct query *g;
	bool host;
	const struct aggd_vm *v = pair_of(a, q, &g, &host);

	if (!v)
		return NULL;
	weft__vm_sync__init(out);
	out->host_query = v->host_id;
	out->guest_query = g->id;
	out->points = v->acc.points;
	out->has_refused = out->has_malformed = out->has_duplicates = true;
	out->refused = v->acc.refused;
	out->malformed = v->malformed;
	out->duplicates = v->duplicates;
	out->has_guest_waiting = out->has_host_waiting = out->has_dropped = true;
	for (size_t i = 0; i < v->cap; i++) {
		unsigned f = v->tab[i].flags;

		if (!f || (f & BAD))
			continue;
		if ((f & (HAVE_HOST | HAVE_GUEST)) == HAVE_GUEST)
			out->guest_waiting++;
		else if ((f & (HAVE_HOST | HAVE_GUEST)) == HAVE_HOST)
			out->host_waiting++;
	}
	out->dropped = v->dropped;
	out->has_synced = true;
	out->synced = v->acc.points > 0;
	if (out->synced) {
		out->has_offset_ns = out->has_error_ns = out->has_lo_ns = out->has_hi_ns = true;
		vm_sync_middle(v->acc.lo, v->acc.hi, &out->offset_ns, &out->error_ns);
		out->lo_ns = v->acc.lo;
		out->hi_ns = v->acc.hi;
	}
	out->has_host_done = out->has_guest_done = true;
	out->host_done = v->host_done;
	out->guest_done = v->guest_done;
	return out;
}

void aggd_vm_sync_json(const Weft__VmSync *v, FILE *f)
{
	bool synced = v->has_synced && v->synced;

	fprintf(f,
		"{\"host_query\":%" PRIu64 ",\"guest_query\":%" PRIu64 ",\"synced\":%s"
		",\"points\":%" PRIu64,
		v->host_query, v->guest_query, synced ? "true" : "false", v->points);
	if (synced)
		fprintf(f,
			",\"offset_ns\":%" PRId64 ",\"error_ns\":%" PRId64 ",\"lo_ns\":%" PRId64
			",\"hi_ns\":%" PRId64,
			v->offset_ns, v->error_ns, v->lo_ns, v->hi_ns);
	else
		fputs(",\"offset_ns\":null,\"error_ns\":null,\"lo_ns\":null,\"hi_ns\":null", f);
	fprintf(f,
		",\"refused\":%" PRIu64 ",\"malformed\":%" PRIu64 ",\"duplicates\":%" PRIu64
		",\"guest_waiting\":%" PRIu64 ",\"host_waiting\":%" PRIu64 ",\"dropped\":%" PRIu64
		",\"host_done\":%s,\"guest_done\":%s}",
		v->refused, v->malformed, v->duplicates, v->guest_waiting, v->host_waiting,
		v->dropped, v->host_done ? "true" : "false", v->guest_done ? "true" : "false");
}

void aggd_vm_sync_text(const Weft__VmSync *v, FILE *f)
{
	if (v->has_synced && v->synced)
		fprintf(f,
			"host = guest %s %" PRIu64 " ns, within +-%" PRId64 " ns (%" PRIu64
			" point%s; offset in [%" PRId64 ", %" PRId64 "])",
			v->offset_ns < 0 ? "-" : "+",
			v->offset_ns < 0 ? (uint64_t)0 - (uint64_t)v->offset_ns :
					   (uint64_t)v->offset_ns,
			v->error_ns, v->points, v->points == 1 ? "" : "s", v->lo_ns, v->hi_ns);
	else
		fputs("unsynchronised: no point seen on both sides yet, no offset", f);
	if (v->refused)
		fprintf(f, "; %" PRIu64 " contradicting point%s refused", v->refused,
			v->refused == 1 ? "" : "s");
	if (v->malformed)
		fprintf(f, "; %" PRIu64 " malformed", v->malformed);
	if (v->duplicates)
		fprintf(f, "; %" PRIu64 " duplicate id%s", v->duplicates,
			v->duplicates == 1 ? "" : "s");
	if (v->dropped)
		fprintf(f, "; %" PRIu64 " dropped (bound)", v->dropped);
	if (v->guest_waiting || v->host_waiting)
		fprintf(f, "; waiting: %" PRIu64 " guest reading%s, %" PRIu64 " hypercall%s",
			v->guest_waiting, v->guest_waiting == 1 ? "" : "s", v->host_waiting,
			v->host_waiting == 1 ? "" : "s");
}
