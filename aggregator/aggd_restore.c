// SPDX-License-Identifier: Apache-2.0
/*
 * Restoring from the store at start-up: queries, their members, their windows' merged
 * states (checkpoints) and revisions, so that a restarted aggregator resumes where its last
 * commit left it (docs/operations.md).
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>
#include "base/zmq_dl.h"
#include "aggregator/aggd.h"
#include "agent/agent.h"
#include "agent/result.h"
#include "base/log.h"
#include "aggregator/aggd_int.h"

/* ---- restoring from the store ---- */

struct restore {
	struct aggd *a;
	struct query *q;
	size_t snapshots, members, bad;
};

static int restore_window(void *ctx, uint64_t window, uint32_t revision, uint64_t closed_ns,
			  const void *body, size_t len)
{
	struct restore *r = ctx;
	Weft__Partial *pt = weft__partial__unpack(NULL, len, body);
	int rc;

	if (!pt)
		r->bad++;
	rc = aggd_qwin_restore_closed(r->q->qw, window, revision, closed_ns, pt);
	if (rc) {
		r->bad++;
		/* closed all the same, without its groups */
		rc = aggd_qwin_restore_closed(r->q->qw, window, revision, closed_ns, NULL);
	}
	if (pt)
		weft__partial__free_unpacked(pt, NULL);
	return rc == -ENOMEM ? rc : 0;
}

static int restore_snapshot(void *ctx, uint64_t window, const void *body, size_t len)
{
	struct restore *r = ctx;
	Weft__Partial *pt = weft__partial__unpack(NULL, len, body);
	int rc = -EINVAL;

	if (pt && pt->window == window)
		rc = aggd_qwin_restore_snapshot(r->q->qw, pt);
	if (rc)
		r->bad++;
	else
		r->snapshots++;
	if (pt)
		weft__partial__free_unpacked(pt, NULL);
	return rc == -ENOMEM ? rc : 0;
}

static int restore_member(void *ctx, const struct aggd_stored_member *sm)
{
	struct restore *r = ctx;
	struct aggd_member_view m = { .host = sm->host,
				      .from = sm->from,
				      .last = sm->last,
				      .hi = sm->hi,
				      .failed = sm->failed };
	int rc = aggd_qwin_restore_member(r->q->qw, &m);

	if (rc)
		r->bad++;
	else
		r->members++;
	return rc == -ENOMEM ? rc : 0;
}

int aggd_restore_query(void *ctx, const struct aggd_stored_query *sq)
{
	struct aggd *a = ctx;
	struct restore r = { .a = a };
	char why[512];
	uint64_t now = aggd_real_ns(), lo;
	struct aggd_qwin_stats st;

	r.q = aggd_query_make(a, sq, why, sizeof(why));
	if (!r.q) {
		log_err("aggregator: stored query %" PRIu64 " cannot resume: %s", sq->id, why);
		aggd_txn_begin(a);
		aggd_store_query_end(a->store, sq->id);
		return 0;
	}
	if (aggd_query_insert(a, r.q)) {
		aggd_query_free(r.q);
		return -ENOMEM;
	}
	aggd_web_export_load(a, r.q);
	aggd_store_members_load(a->store, sq->id, restore_member, &r);
	aggd_store_windows_load(a->store, sq->id, restore_window, &r);
	aggd_store_snapshots_load(a->store, sq->id, restore_snapshot, &r);
	if (sq->vm_host && aggd_vm_attach(a, r.q, sq->vm_host, why, sizeof(why)))
		log_err("aggregator: query %" PRIu64 "'s VM synchronisation does not resume: %s",
			sq->id, why);
	/* windows older than retention that nobody will see: not emitted (empty) */
	lo = aggd_qwin_window_of(r.q->qw, now);
	lo = lo > (a->o.keep_windows ? a->o.keep_windows : AGGD_KEEP_WINDOWS) ?
		     lo - (a->o.keep_windows ? a->o.keep_windows : AGGD_KEEP_WINDOWS) :
		     0;
	aggd_qwin_skip_to(r.q->qw, lo);
	/* agents need time to reconnect and resend what they spooled while we were away */
	aggd_qwin_hold(r.q->qw,
		       now + a->o.lateness_ns +
			       (uint64_t)a->o.heartbeat_ms * 1000000ULL * AGGD_EXPIRE_BEATS);
	aggd_qwin_stats(r.q->qw, &st);
	log_info("aggregator: resumed query %" PRIu64 "%s: %zu members, %zu windows in progress, "
		 "next window %" PRIu64 "%s",
		 r.q->id, r.q->parent_id ? " (from the parent)" : "", r.members, r.snapshots,
		 aggd_qwin_next_close(r.q->qw), r.bad ? " (some stored records unreadable)" : "");
	r.q->forgot_below = 0;
	return 0;
}
