// SPDX-License-Identifier: Apache-2.0
/*
 * What leaves the aggregator when a window closes, and what it writes of it: the Result to
 * every subscriber (or, replayed, to one that subscribed again), the window's snapshot in the
 * store at each checkpoint, and in a tree the window as one Partial spooled for the parent
 * (a late partial that revises a window already sent goes up as it is).  aggd_window.c
 * decides when a window closes; aggd.c's tick calls aggd_emit_window() for each.
 *
 * Must never: wait for a subscriber (a result a client's full queue cannot take is dropped,
 * counted in its next result's results_dropped), or send the parent a revised window whole
 * (the parent sums partials: the rest would count twice).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "aggregator/aggd.h"
#include "agent/agent.h"
#include "agent/result.h"
#include "base/log.h"
#include "aggregator/aggd_int.h"

/* The Result of a window to every subscriber of the query (or to `only`), never waiting:
 * a client too slow to take it loses it, counted and reported in its next result. */
static void result_send(struct aggd *a, struct query *q, const struct aggd_window_view *v,
			Weft__Group **groups, size_t ngroups, struct peer *only)
{
	struct aggd_qwin_stats st;
	Weft__GraphWindow gw;
	Weft__VmSync vs;
	Weft__Result r;
	int rc;

	aggd_qwin_stats(q->qw, &st);
	weft__result__init(&r);
	if (q->plan->graph) {
		aggd_graph_window(a, q, v->index, v->last, &gw);
		r.graph = &gw;
	}
	r.query_id = q->id;
	r.window = v->index;
	r.n_groups = ngroups;
	r.groups = groups;
	r.n_drops = WEFT_DROP_NR;
	r.drops = (uint64_t *)v->drops;
	r.has_misses = true;
	r.misses = v->misses;
	r.has_overflow = true;
	r.overflow = v->overflow;
	r.n_hosts = v->nhosts;
	r.hosts = (char **)v->hosts;
	r.n_missing = v->nmissing;
	r.missing = (char **)v->missing;
	r.has_revision = true;
	r.revision = v->revision;
	r.has_last = true;
	r.last = v->last;
	r.has_start_realtime_ns = true;
	r.start_realtime_ns = v->start_ns;
	r.has_end_realtime_ns = true;
	r.end_realtime_ns = v->end_ns;
	r.has_late_dropped = true;
	r.late_dropped = st.late_dropped;
	r.has_results_dropped = true;
	r.vm_sync = aggd_vm_state(a, q, &vs);

	for (struct peer *p = only ? only : a->peers; p; p = only ? NULL : p->next) {
		struct sub *s;
		Weft__Envelope e;

		if (p->role != WIRE_ROLE_CLIENT || !(s = aggd_peer_sub(p, q->id)))
			continue;
		r.has_manifest = !s->manifest_sent;
		r.manifest.data = q->manifest;
		r.manifest.len = r.has_manifest ? q->manifest_len : 0;
		r.results_dropped = p->results_dropped;
		r.has_rows_dropped = q->stream;
		r.rows_dropped = s->rows_dropped;
		aggd_env_init(a, &e);
		e.body_case = WEFT__ENVELOPE__BODY_RESULT;
		e.result = &r;
		rc = aggd_peer_send(a, p, &e);
		if (rc == -EAGAIN) {
			/* a slow client loses this result, never stalls the merge */
			p->results_dropped++;
			log_info("aggregator: %s is too slow: dropped window %" PRIu64
				 " of query %" PRIu64 " for it (%" PRIu64 " so far)",
				 aggd_peer_label(p), v->index, q->id, p->results_dropped);
		} else if (rc == 0) {
			s->manifest_sent = true;
		}
	}
}

/* A window as one Partial: what the store keeps of it, and what goes to the parent. */
static void window_partial(struct aggd *a, struct query *q, const struct aggd_window_view *v,
			   Weft__Group **groups, size_t ngroups, Weft__Partial *pt)
{
	weft__partial__init(pt);
	pt->query_id = q->parent_id ? q->parent_id : q->id;
	pt->window = v->index;
	pt->host = a->name;
	pt->n_groups = ngroups;
	pt->groups = groups;
	pt->n_drops = WEFT_DROP_NR;
	pt->drops = (uint64_t *)v->drops;
	pt->has_misses = true;
	pt->misses = v->misses;
	pt->has_overflow = true;
	pt->overflow = v->overflow;
	pt->n_hosts = v->nhosts;
	pt->hosts = (char **)v->hosts;
	pt->n_missing = v->nmissing;
	pt->missing = (char **)v->missing;
	pt->has_last = true;
	pt->last = v->last;
}

struct ckpt_ctx {
	struct aggd *a;
	struct query *q;
};

static int ckpt_window(void *ctx, const struct aggd_window_view *v)
{
	struct ckpt_ctx *c = ctx;
	Weft__Group **groups = NULL;
	size_t ngroups = 0, len;
	Weft__Partial pt;
	void *body;
	int rc;

	rc = agent_table_to_groups(v->table, &groups, &ngroups);
	if (rc)
		return rc;
	window_partial(c->a, c->q, v, groups, ngroups, &pt);
	len = weft__partial__get_packed_size(&pt);
	body = malloc(len ? len : 1);
	if (body) {
		weft__partial__pack(&pt, body);
		aggd_txn_begin(c->a);
		rc = aggd_store_snapshot_set(c->a->store, c->q->id, v->index, body, len);
		free(body);
		c->a->ckpt_windows++;
	} else {
		rc = -ENOMEM;
	}
	agent_groups_free(groups, ngroups);
	return rc;
}

static int ckpt_member(void *ctx, const struct aggd_member_view *m)
{
	struct ckpt_ctx *c = ctx;
	struct aggd_stored_member sm = {
		.host = m->host, .from = m->from, .last = m->last, .hi = m->hi, .failed = m->failed
	};

	aggd_txn_begin(c->a);
	c->a->ckpt_members++;
	if (m->gone)
		return aggd_store_member_del(c->a->store, c->q->id, m->host);
	return aggd_store_member_set(c->a->store, c->q->id, &sm);
}

int aggd_query_checkpoint(struct aggd *a, struct query *q)
{
	struct ckpt_ctx c = { a, q };

	return aggd_qwin_checkpoint(q->qw, ckpt_window, ckpt_member, &c);
}

int aggd_emit_window(void *ctx, const struct aggd_window_view *v)
{
	struct aggd_emit_ctx *c = ctx;
	struct aggd *a = c->a;
	struct query *q = c->q;
	Weft__Group **groups = NULL;
	size_t ngroups = 0;
	int rc;

	rc = agent_table_to_groups(v->table, &groups, &ngroups);
	if (rc) {
		log_err("aggregator: query %" PRIu64 " window %" PRIu64 ": %s", q->id, v->index,
			strerror(-rc));
		return rc;
	}
	if (weft_log_get_level() >= WEFT_LOG_INFO) {
		char missing[512] = "";
		size_t n = 0;

		for (size_t i = 0; i < v->nmissing && n < sizeof(missing) - 1; i++)
			n += (size_t)snprintf(missing + n, sizeof(missing) - n, "%s%s",
					      i ? ", " : " (", v->missing[i]);
		if (v->nmissing && n < sizeof(missing) - 1)
			snprintf(missing + n, sizeof(missing) - n, ")");
		log_info("aggregator: query %" PRIu64 " window %" PRIu64 " %s%s: %zu group%s, "
			 "%zu host%s, %zu missing%s",
			 q->id, v->index, v->revision ? "revised" : "closed",
			 v->last ? " (last)" : "", ngroups, ngroups == 1 ? "" : "s", v->nhosts,
			 v->nhosts == 1 ? "" : "s", v->nmissing, missing);
	}

	aggd_vm_window(a, q, v); /* a side of a VM synchronisation: its state rides along */
	result_send(a, q, v, groups, ngroups, NULL);
	if (v->revision)
		a->revisions++;
	else
		a->windows_closed++;
	aggd_web_window(a, q, v);

	{
		/* the window as merged so far, once: it replaces its snapshot in the store
		 * and, the first time, goes to the parent as this subtree's partial */
		Weft__Partial pt;
		void *body;
		size_t len;

		window_partial(a, q, v, groups, ngroups, &pt);
		len = weft__partial__get_packed_size(&pt);
		body = malloc(len ? len : 1);
		aggd_txn_begin(a);
		if (body) {
			weft__partial__pack(&pt, body);
			aggd_store_window_emitted(a->store, q->id, v->index, v->revision,
						  aggd_real_ns(), body, len);
			free(body);
		}
		if (q->parent_id && v->revision == 0) {
			/* later revisions go up as the late partials themselves
			 * (aggd_partial_forward()): the parent sums what it gets */
			rc = aggd_parent_spool(a, &pt);
			if (rc)
				log_err("aggregator: spooling window %" PRIu64
					" for the parent: %s",
					v->index, strerror(-rc));
		}
	}
	agent_groups_free(groups, ngroups);
	return 0;
}

/* A retained window again, for one client that (re)subscribed. */
int aggd_replay_window(void *ctx, const struct aggd_window_view *v)
{
	struct aggd_emit_ctx *c = ctx;
	Weft__Group **groups = NULL;
	size_t ngroups = 0;
	int rc = agent_table_to_groups(v->table, &groups, &ngroups);

	if (rc)
		return rc;
	result_send(c->a, c->q, v, groups, ngroups, c->only);
	agent_groups_free(groups, ngroups);
	return 0;
}

/* A late partial merged into a closed window of a query from the parent: the parent gets
 * it as it is (its windows are sums: the revised total would count the rest twice). */
void aggd_partial_forward(struct aggd *a, struct query *q, const Weft__Partial *in)
{
	Weft__Partial pt = *in;
	char *one[1] = { in->host };

	pt.query_id = q->parent_id;
	pt.host = a->name;
	if (!in->n_hosts) {
		pt.n_hosts = 1;
		pt.hosts = one;
	}
	pt.has_last = false;
	pt.last = false;
	if (aggd_parent_spool(a, &pt) == 0)
		log_info("aggregator: late partial of %s for window %" PRIu64 " forwarded to the "
			 "parent",
			 in->host, in->window);
}
