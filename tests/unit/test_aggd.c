// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests of the cluster aggregator's pure parts: the windows of a query
 * (aggregator/aggd_window.c: close rules, lateness, expired members, revisions, retention,
 * the end of a query, merge order) and the store (aggregator/aggd_store.c) in a temporary
 * SQLite file.  No sockets: partials are built as agents build them — kernel values folded
 * by the kernel's own update functions (kernel/weft_agg.bpf.h, compiled here as host C) into
 * a table, turned into wire groups by agent_table_to_groups() — and expected results are
 * tables of all the same events added in one place, compared group by group and state by
 * state (agent_table_equal).  Time is passed in by hand.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/result.h"
#include "aggregator/aggd.h"
#include "compiler/compiler.h"
#include "compiler/plan.h"
#include "kernel/weft_agg.bpf.h"
#include "tests/skip.h"

#define S 1000000000ULL
#define EPOCH (1700000000ULL * S)
#define LATE (2 * S)

/* ---- a plan from a real query ---- */

static const char query_text[] =
	"from syscall:getppid group by pid select count(), sum(pid), p99(pid) every 1s";

struct fixture {
	struct compile_result res;
	struct diag_list dl;
	const struct plan *p;
	/* partials made by the test, freed at the end */
	Weft__Partial **pts;
	size_t npts;
	/* windows emitted by the last tick */
	struct emitted {
		uint64_t index;
		uint32_t revision;
		bool last;
		char hosts[256], missing[256];
		uint64_t map_full; /* drops[WEFT_DROP_MAP_FULL]: one per partial merged */
		struct agent_table *t;
	} em[64];
	int nem;
};

static struct fixture *fx_new(const char *q)
{
	struct compile_opts o = { .sz = sizeof(o) };
	struct fixture *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	diag_list_init(&f->dl, q, "query");
	if (compiler_run(q, &o, PASS_PLAN, &f->dl, &f->res)) {
		diag_print(&f->dl, stderr, false);
		fail_msg("cannot compile: %s", q);
	}
	f->p = f->res.plan;
	return f;
}

static void em_clear(struct fixture *f)
{
	for (int i = 0; i < f->nem; i++)
		agent_table_free(f->em[i].t);
	f->nem = 0;
}

static void fx_free(struct fixture *f)
{
	em_clear(f);
	for (size_t i = 0; i < f->npts; i++) {
		agent_groups_free(f->pts[i]->groups, f->pts[i]->n_groups);
		for (size_t h = 0; h < f->pts[i]->n_hosts; h++)
			free(f->pts[i]->hosts[h]);
		free(f->pts[i]->hosts);
		free(f->pts[i]->drops);
		free(f->pts[i]->host);
		free(f->pts[i]);
	}
	free(f->pts);
	compile_result_free(&f->res);
	diag_list_free(&f->dl);
	free(f);
}

/* One event (pid, x) folded into t as the kernel and the agent do it. */
static void table_event(const struct plan *p, struct agent_table *t, uint64_t pid, int64_t x)
{
	uint8_t key[PLAN_MAX_KEY_SIZE] = { 0 };
	uint64_t *val = calloc(1, (p->value_size + 7) & ~7u);
	const void *cpu[1] = { val };

	assert_non_null(val);
	memcpy(key + p->keys[0].offset, &pid, p->keys[0].size < 8 ? p->keys[0].size : 8);
	weft_aggval_count_add((void *)((uint8_t *)val + p->aggs[0].offset), x);
	weft_aggval_sum_add((void *)((uint8_t *)val + p->aggs[1].offset), x);
	weft_aggval_quantile_add((void *)((uint8_t *)val + p->aggs[2].offset), x);
	assert_int_equal(agent_table_add_kernel(t, key, cpu, 1, NULL), 0);
	free(val);
}

struct ev {
	uint64_t pid;
	int64_t x;
};

/* A partial of host for window w holding events ev[0..n). */
static Weft__Partial *partial(struct fixture *f, const char *host, uint64_t w, const struct ev *ev,
			      size_t n, bool last)
{
	struct agent_table *t = agent_table_new(f->p, 0);
	Weft__Partial *pt = calloc(1, sizeof(*pt));
	Weft__Partial **nv;
	Weft__Group **g = NULL;
	size_t ng = 0;

	assert_non_null(t);
	assert_non_null(pt);
	for (size_t i = 0; i < n; i++)
		table_event(f->p, t, ev[i].pid, ev[i].x);
	assert_int_equal(agent_table_to_groups(t, &g, &ng), 0);
	agent_table_free(t);
	weft__partial__init(pt);
	pt->query_id = 1;
	pt->window = w;
	pt->host = strdup(host);
	pt->groups = g;
	pt->n_groups = ng;
	pt->n_drops = WEFT_DROP_NR;
	pt->drops = calloc(WEFT_DROP_NR, sizeof(uint64_t));
	pt->drops[WEFT_DROP_MAP_FULL] = 1; /* every partial reports one loss: summed */
	pt->has_last = last;
	pt->last = last;
	nv = realloc(f->pts, (f->npts + 1) * sizeof(*nv));
	assert_non_null(nv);
	f->pts = nv;
	f->pts[f->npts++] = pt;
	return pt;
}

/* The table of all these events added in one place. */
static struct agent_table *reference(struct fixture *f, const struct ev *ev, size_t n)
{
	struct agent_table *t = agent_table_new(f->p, 0);

	assert_non_null(t);
	for (size_t i = 0; i < n; i++)
		table_event(f->p, t, ev[i].pid, ev[i].x);
	return t;
}

static void join(char *out, size_t sz, const char *const *v, size_t n)
{
	size_t len = 0;

	out[0] = 0;
	for (size_t i = 0; i < n && len < sz; i++)
		len += (size_t)snprintf(out + len, sz - len, "%s%s", i ? "," : "", v[i]);
}

static int on_emit(void *ctx, const struct aggd_window_view *v)
{
	struct fixture *f = ctx;
	struct emitted *e;

	assert_true(f->nem < 64);
	e = &f->em[f->nem++];
	e->index = v->index;
	e->revision = v->revision;
	e->last = v->last;
	join(e->hosts, sizeof(e->hosts), v->hosts, v->nhosts);
	join(e->missing, sizeof(e->missing), v->missing, v->nmissing);
	e->t = agent_table_new(f->p, 0);
	assert_non_null(e->t);
	assert_int_equal(agent_table_merge(e->t, v->table), 0);
	e->map_full = v->drops[WEFT_DROP_MAP_FULL];
	assert_true(v->start_ns < v->end_ns);
	return 0;
}

static struct aggd_qwin *qwin(struct fixture *f, uint64_t end_ns, uint32_t keep)
{
	struct aggd_qwin_opts o = {
		.sz = sizeof(o),
		.epoch_ns = EPOCH,
		.every_ns = f->p->every_ns,
		.end_ns = end_ns,
		.lateness_ns = LATE,
		.keep_windows = keep,
	};
	struct aggd_qwin *q = aggd_qwin_new(f->p, &o);

	assert_non_null(q);
	return q;
}

static int tick(struct fixture *f, struct aggd_qwin *q, uint64_t now)
{
	em_clear(f);
	return aggd_qwin_tick(q, now, on_emit, f);
}

static const struct ev ev_a[] = { { 10, 10 }, { 10, 10 }, { 11, 11 }, { 12, 7 } };
static const struct ev ev_b[] = { { 10, 10 }, { 20, 20 }, { 20, 20 } };
static const struct ev ev_ab[] = { { 10, 10 }, { 10, 10 }, { 11, 11 }, { 12, 7 },
				   { 10, 10 }, { 20, 20 }, { 20, 20 } };

/* ---- windows ---- */

/* A window closes as soon as every live member has reported it, before its deadline. */
static void test_close_when_all_reported(void **state)
{
	struct fixture *f = fx_new(query_text);
	struct aggd_qwin *q = qwin(f, 0, 0);
	struct agent_table *ref = reference(f, ev_ab, 7);
	uint64_t t = EPOCH + S + 100000000ULL; /* 100 ms after window 0 ended */

	(void)state;
	assert_int_equal(aggd_qwin_member(q, "a", 0, true), 0);
	assert_int_equal(aggd_qwin_member(q, "b", 0, true), 0);
	assert_int_equal(aggd_qwin_window_of(q, EPOCH + S + 1), 1);
	assert_int_equal(aggd_qwin_add(q, partial(f, "a", 0, ev_a, 4, false), t), AGGD_MERGED);
	assert_int_equal(tick(f, q, t), 0); /* b has not reported: wait */
	assert_int_equal(aggd_qwin_add(q, partial(f, "b", 0, ev_b, 3, false), t), AGGD_MERGED);
	assert_int_equal(tick(f, q, t), 1);
	assert_int_equal(f->em[0].index, 0);
	assert_int_equal(f->em[0].revision, 0);
	assert_false(f->em[0].last);
	assert_string_equal(f->em[0].hosts, "a,b");
	assert_string_equal(f->em[0].missing, "");
	assert_true(agent_table_equal(f->em[0].t, ref));
	assert_int_equal(f->em[0].map_full, 2); /* the partials' losses are summed */
	/* window 1 has no partial yet: it waits for its deadline */
	assert_int_equal(tick(f, q, t + S), 0);
	assert_int_equal(tick(f, q, EPOCH + 2 * S + LATE), 1);
	assert_int_equal(f->em[0].index, 1);
	assert_string_equal(f->em[0].hosts, "");
	assert_string_equal(f->em[0].missing, "a,b");
	assert_int_equal(agent_table_groups(f->em[0].t), 0);
	agent_table_free(ref);
	aggd_qwin_free(q);
	fx_free(f);
}

/* A member that does not report holds the window until its end plus the lateness bound, and
 * is named missing; an expired member holds nothing. */
static void test_lateness_and_expiry(void **state)
{
	struct fixture *f = fx_new(query_text);
	struct aggd_qwin *q = qwin(f, 0, 0);
	uint64_t end0 = EPOCH + S;

	(void)state;
	aggd_qwin_member(q, "a", 0, true);
	aggd_qwin_member(q, "b", 0, true);
	assert_int_equal(aggd_qwin_add(q, partial(f, "a", 0, ev_a, 4, false), end0), AGGD_MERGED);
	assert_int_equal(tick(f, q, end0 + LATE - 1), 0);
	assert_int_equal(tick(f, q, end0 + LATE), 1);
	assert_string_equal(f->em[0].hosts, "a");
	assert_string_equal(f->em[0].missing, "b");

	/* b expires: window 1 closes as soon as a has reported it */
	aggd_qwin_member(q, "b", 0, false);
	assert_int_equal(aggd_qwin_add(q, partial(f, "a", 1, ev_a, 1, false), end0 + S),
			 AGGD_MERGED);
	assert_int_equal(tick(f, q, end0 + S + 1), 1);
	assert_int_equal(f->em[0].index, 1);
	assert_string_equal(f->em[0].missing, "b"); /* expired, but it ran the query */

	/* b comes back: it is expected again; forgotten, it is not named any more */
	aggd_qwin_member(q, "b", 0, true);
	assert_int_equal(aggd_qwin_add(q, partial(f, "a", 2, ev_a, 1, false), end0 + 2 * S),
			 AGGD_MERGED);
	assert_int_equal(tick(f, q, end0 + 2 * S + 1), 0);
	aggd_qwin_member_forget(q, "b");
	assert_int_equal(tick(f, q, end0 + 2 * S + 2), 1);
	assert_string_equal(f->em[0].missing, "");
	/* a partial for a later window counts as having reported the earlier ones */
	aggd_qwin_member(q, "c", 3, true);
	assert_int_equal(aggd_qwin_add(q, partial(f, "a", 4, ev_a, 1, false), end0 + 4 * S),
			 AGGD_MERGED);
	assert_int_equal(aggd_qwin_add(q, partial(f, "c", 4, ev_b, 1, false), end0 + 4 * S),
			 AGGD_MERGED);
	assert_int_equal(tick(f, q, end0 + 4 * S), 2);
	assert_int_equal(f->em[0].index, 3);
	assert_int_equal(f->em[1].index, 4);
	/* a member that failed (QueryError) is not waited for */
	aggd_qwin_member_fail(q, "c");
	assert_int_equal(aggd_qwin_add(q, partial(f, "a", 5, ev_a, 1, false), end0 + 5 * S),
			 AGGD_MERGED);
	assert_int_equal(tick(f, q, end0 + 5 * S), 1);
	assert_string_equal(f->em[0].missing, "");
	aggd_qwin_free(q);
	fx_free(f);
}

/* A partial for a closed window that is still retained is merged, and the window emitted
 * again with revision + 1; beyond retention it is dropped and counted. */
static void test_revision_and_retention(void **state)
{
	struct fixture *f = fx_new(query_text);
	struct aggd_qwin *q = qwin(f, 0, 2);
	struct agent_table *ref = reference(f, ev_ab, 7);
	struct aggd_qwin_stats st;
	uint64_t t = EPOCH + S + LATE;

	(void)state;
	aggd_qwin_member(q, "a", 0, true);
	aggd_qwin_member(q, "b", 0, true);
	aggd_qwin_add(q, partial(f, "a", 0, ev_a, 4, false), t);
	assert_int_equal(tick(f, q, t), 1);
	assert_string_equal(f->em[0].missing, "b");
	assert_int_equal(aggd_qwin_add(q, partial(f, "b", 0, ev_b, 3, false), t + 1), AGGD_REVISED);
	assert_int_equal(tick(f, q, t + 1), 1);
	assert_int_equal(f->em[0].index, 0);
	assert_int_equal(f->em[0].revision, 1);
	assert_string_equal(f->em[0].hosts, "a,b");
	assert_string_equal(f->em[0].missing, "");
	assert_true(agent_table_equal(f->em[0].t, ref));
	/* nothing new: no re-emission */
	assert_int_equal(tick(f, q, t + 2), 0);

	/* windows 1..3 close empty; only 2 closed windows are retained: 0 and 1 go */
	assert_int_equal(tick(f, q, EPOCH + 4 * S + LATE), 3);
	assert_int_equal(aggd_qwin_retained_from(q), 2);
	assert_int_equal(aggd_qwin_add(q, partial(f, "b", 0, ev_b, 3, false), t + 3 * S),
			 AGGD_LATE);
	assert_int_equal(aggd_qwin_add(q, partial(f, "b", 2, ev_b, 3, false), t + 3 * S),
			 AGGD_REVISED);
	assert_int_equal(tick(f, q, EPOCH + 4 * S + LATE), 1);
	assert_int_equal(f->em[0].index, 2);
	assert_int_equal(f->em[0].revision, 1);
	aggd_qwin_stats(q, &st);
	assert_int_equal(st.late_dropped, 1);
	assert_int_equal(st.revisions, 2);
	assert_int_equal(st.emitted, 6);
	agent_table_free(ref);
	aggd_qwin_free(q);
	fx_free(f);
}

/* `for`: the window holding the end is the last; it closes when the members have sent
 * their last partials, and the query is done. */
static void test_for_end(void **state)
{
	struct fixture *f = fx_new("from syscall:getppid group by pid select count(), sum(pid), "
				   "p99(pid) every 1s for 2500ms");
	struct aggd_qwin *q;
	uint64_t end = EPOCH + 2500000000ULL;

	(void)state;
	q = qwin(f, end, 0);
	aggd_qwin_member(q, "a", 0, true);
	aggd_qwin_add(q, partial(f, "a", 0, ev_a, 1, false), EPOCH + S);
	aggd_qwin_add(q, partial(f, "a", 1, ev_a, 1, false), EPOCH + 2 * S);
	assert_int_equal(tick(f, q, EPOCH + 2 * S), 2);
	assert_false(f->em[1].last);
	assert_false(aggd_qwin_done(q));
	assert_int_equal(aggd_qwin_add(q, partial(f, "a", 2, ev_a, 2, true), end), AGGD_MERGED);
	assert_int_equal(tick(f, q, end), 1);
	assert_int_equal(f->em[0].index, 2);
	assert_true(f->em[0].last);
	assert_true(aggd_qwin_done(q));
	/* after the end: dropped */
	assert_int_equal(aggd_qwin_add(q, partial(f, "a", 3, ev_a, 1, false), end + S), AGGD_LATE);
	assert_int_equal(tick(f, q, end + 10 * S), 0);
	aggd_qwin_free(q);

	/* a member that never sends its last: the final window closes at end + lateness */
	q = qwin(f, end, 0);
	aggd_qwin_member(q, "a", 0, true);
	aggd_qwin_member(q, "b", 0, true);
	aggd_qwin_add(q, partial(f, "a", 2, ev_a, 1, true), end);
	assert_int_equal(tick(f, q, end), 0);
	assert_int_equal(tick(f, q, end + LATE), 3);
	assert_true(f->em[2].last);
	assert_string_equal(f->em[2].missing, "b");
	assert_true(aggd_qwin_done(q));
	aggd_qwin_free(q);
	fx_free(f);
}

/* Closed windows are also retained for a bounded time (AGGD_KEEP_NS after closing), even
 * when there are few of them. */
static void test_retention_age(void **state)
{
	struct fixture *f = fx_new("from syscall:getppid group by pid select count(), sum(pid), "
				   "p99(pid) every 1s for 2s");
	struct aggd_qwin *q = qwin(f, EPOCH + 2 * S, 0);
	uint64_t t = EPOCH + 2 * S;

	(void)state;
	aggd_qwin_member(q, "a", 0, true);
	aggd_qwin_add(q, partial(f, "a", 0, ev_a, 1, false), t);
	aggd_qwin_add(q, partial(f, "a", 1, ev_a, 1, true), t);
	assert_int_equal(tick(f, q, t), 2);
	assert_true(aggd_qwin_done(q));
	assert_int_equal(aggd_qwin_retained_from(q), 0);
	assert_int_equal(aggd_qwin_add(q, partial(f, "b", 1, ev_b, 1, false), t + 1), AGGD_REVISED);
	assert_int_equal(tick(f, q, t + AGGD_KEEP_NS), 1); /* the revision; then evicted */
	assert_int_equal(aggd_qwin_retained_from(q), 2);
	assert_int_equal(aggd_qwin_add(q, partial(f, "b", 1, ev_b, 1, false), t + AGGD_KEEP_NS),
			 AGGD_LATE);
	aggd_qwin_free(q);
	fx_free(f);
}

/* A cancelled query: the window being collected is the last, cut at the stop. */
static void test_stop(void **state)
{
	struct fixture *f = fx_new(query_text);
	struct aggd_qwin *q = qwin(f, 0, 0);
	uint64_t stop = EPOCH + S + 300000000ULL;

	(void)state;
	aggd_qwin_member(q, "a", 0, true);
	aggd_qwin_member(q, "b", 0, true);
	aggd_qwin_add(q, partial(f, "a", 0, ev_a, 1, false), EPOCH + S);
	aggd_qwin_add(q, partial(f, "b", 0, ev_b, 1, false), EPOCH + S);
	assert_int_equal(tick(f, q, EPOCH + S), 1);
	aggd_qwin_stop(q, stop);
	aggd_qwin_add(q, partial(f, "a", 1, ev_a, 1, true), stop);
	assert_int_equal(tick(f, q, stop), 0); /* b's last is missing */
	aggd_qwin_add(q, partial(f, "b", 1, ev_b, 1, true), stop);
	assert_int_equal(tick(f, q, stop), 1);
	assert_int_equal(f->em[0].index, 1);
	assert_true(f->em[0].last);
	assert_true(aggd_qwin_done(q));
	aggd_qwin_free(q);

	/* without every: one window, closed at the stop */
	aggd_qwin_free(NULL);
	{
		struct fixture *g = fx_new("from syscall:getppid group by pid select count(), "
					   "sum(pid), p99(pid)");
		struct aggd_qwin *one = qwin(g, 0, 0);
		struct agent_table *ref = reference(g, ev_ab, 7);

		aggd_qwin_member(one, "a", 0, true);
		aggd_qwin_member(one, "b", 0, true);
		assert_int_equal(tick(g, one, EPOCH + 3600 * S), 0); /* no end: waits */
		assert_int_equal(aggd_qwin_add(one, partial(g, "a", 1, ev_a, 4, true), EPOCH),
				 -EINVAL);
		aggd_qwin_stop(one, EPOCH + 10 * S);
		aggd_qwin_add(one, partial(g, "a", 0, ev_a, 4, true), EPOCH + 10 * S);
		aggd_qwin_add(one, partial(g, "b", 0, ev_b, 3, true), EPOCH + 10 * S);
		assert_int_equal(tick(g, one, EPOCH + 10 * S), 1);
		assert_true(g->em[0].last);
		assert_true(agent_table_equal(g->em[0].t, ref));
		agent_table_free(ref);
		aggd_qwin_free(one);
		fx_free(g);
	}
	fx_free(f);
}

/*
 * Cancelled just after a window boundary of the aggregator's clock, before the senders'
 * timers flipped: they end with window 0, which is then the last; no empty window 1 follows
 * (0 hosts, none missing: it said nothing, and looked like a result).  One sender still
 * running when the others have ended keeps the window of the cancel open for it.
 */
static void test_stop_before_senders_flip(void **state)
{
	struct fixture *f = fx_new(query_text);
	struct aggd_qwin *q = qwin(f, 0, 0);
	struct agent_table *ref = reference(f, ev_ab, 7);
	uint64_t stop = EPOCH + S + 1000000ULL; /* 1 ms into window 1 */

	(void)state;
	aggd_qwin_member(q, "a", 0, true);
	aggd_qwin_member(q, "b", 0, true);
	aggd_qwin_stop(q, stop);
	assert_int_equal(aggd_qwin_add(q, partial(f, "a", 0, ev_a, 4, true), stop), AGGD_MERGED);
	assert_int_equal(tick(f, q, stop), 0); /* b has not reported */
	assert_int_equal(aggd_qwin_add(q, partial(f, "b", 0, ev_b, 3, true), stop), AGGD_MERGED);
	assert_int_equal(tick(f, q, stop), 1);
	assert_int_equal(f->em[0].index, 0);
	assert_true(f->em[0].last);
	assert_string_equal(f->em[0].hosts, "a,b");
	assert_true(agent_table_equal(f->em[0].t, ref));
	assert_true(aggd_qwin_done(q));
	assert_int_equal(tick(f, q, stop + 10 * S), 0); /* and nothing after it */
	aggd_qwin_free(q);

	/* b ends a window later (its clock had flipped): window 0 is not the last */
	q = qwin(f, 0, 0);
	aggd_qwin_member(q, "a", 0, true);
	aggd_qwin_member(q, "b", 0, true);
	aggd_qwin_stop(q, stop);
	aggd_qwin_add(q, partial(f, "a", 0, ev_a, 4, true), stop);
	aggd_qwin_add(q, partial(f, "b", 0, ev_b, 3, false), stop);
	assert_int_equal(tick(f, q, stop), 1);
	assert_int_equal(f->em[0].index, 0);
	assert_false(f->em[0].last);
	assert_false(aggd_qwin_done(q));
	aggd_qwin_add(q, partial(f, "b", 1, ev_b, 1, true), stop);
	assert_int_equal(tick(f, q, stop), 1);
	assert_int_equal(f->em[0].index, 1);
	assert_true(f->em[0].last);
	assert_string_equal(f->em[0].hosts, "b");
	assert_true(aggd_qwin_done(q));
	agent_table_free(ref);
	aggd_qwin_free(q);
	fx_free(f);
}

/* Property: however the events are split into partials, and in whatever order the partials
 * arrive, the merged window is the table of all events. */
static void test_merge_order(void **state)
{
	struct fixture *f = fx_new(query_text);
	enum { NEV = 300, NHOSTS = 3, ROUNDS = 20 };
	static struct ev ev[NEV];
	uint64_t seed = 42;
	struct agent_table *ref;

	(void)state;
	for (int i = 0; i < NEV; i++) {
		seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
		ev[i].pid = (seed >> 33) % 17;
		ev[i].x = (int64_t)((seed >> 20) % 100000) - 50;
	}
	ref = reference(f, ev, NEV);
	for (int r = 0; r < ROUNDS; r++) {
		struct aggd_qwin *q = qwin(f, 0, 0);
		Weft__Partial *pts[NEV];
		int npts = 0, start = 0;
		const char *hosts[NHOSTS] = { "h0", "h1", "h2" };

		for (int h = 0; h < NHOSTS; h++)
			aggd_qwin_member(q, hosts[h], 0, true);
		/* random cuts into partials, each from a random host */
		while (start < NEV) {
			int len;

			seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
			len = 1 + (int)((seed >> 40) % 40);
			if (start + len > NEV)
				len = NEV - start;
			pts[npts++] = partial(f, hosts[(seed >> 10) % NHOSTS], 0, ev + start,
					      (size_t)len, false);
			start += len;
		}
		/* a random order */
		for (int i = npts - 1; i > 0; i--) {
			Weft__Partial *tmp;
			int j;

			seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
			j = (int)((seed >> 33) % (uint64_t)(i + 1));
			tmp = pts[i];
			pts[i] = pts[j];
			pts[j] = tmp;
		}
		for (int i = 0; i < npts; i++)
			assert_int_equal(aggd_qwin_add(q, pts[i], EPOCH + S), AGGD_MERGED);
		assert_int_equal(tick(f, q, EPOCH + S + LATE), 1);
		assert_true(agent_table_equal(f->em[0].t, ref));
		aggd_qwin_free(q);
	}
	agent_table_free(ref);
	fx_free(f);
}

/* Hostile partials change nothing: states that do not decode, windows far ahead, a window
 * other than 0 without `every`. */
static void test_hostile(void **state)
{
	struct fixture *f = fx_new(query_text);
	struct aggd_qwin *q = qwin(f, 0, 0);
	struct agent_table *ref = reference(f, ev_a, 4);
	Weft__Partial *bad;
	uint8_t junk[3] = { 0xff, 0xff, 0xff };

	(void)state;
	aggd_qwin_member(q, "a", 0, true);
	assert_int_equal(aggd_qwin_add(q, partial(f, "a", 0, ev_a, 4, false), EPOCH), AGGD_MERGED);
	bad = partial(f, "a", 0, ev_b, 3, false);
	bad->groups[1]->states[0].data = junk;
	bad->groups[1]->states[0].len = sizeof(junk);
	assert_int_equal(aggd_qwin_add(q, bad, EPOCH), -EINVAL);
	assert_int_equal(aggd_qwin_add(q, partial(f, "a", AGGD_MAX_OPEN, ev_a, 1, false), EPOCH),
			 -EINVAL);
	assert_int_equal(aggd_qwin_add(q, partial(f, "a", UINT64_MAX, ev_a, 1, false), EPOCH),
			 -EINVAL);
	assert_int_equal(tick(f, q, EPOCH + S + LATE), 1);
	assert_true(agent_table_equal(f->em[0].t, ref));
	agent_table_free(ref);
	aggd_qwin_free(q);
	fx_free(f);
}

/* ---- the store ---- */

static char tmpdir[64];

static char *store_path(void)
{
	static char path[128];

	snprintf(tmpdir, sizeof(tmpdir), "/tmp/weft-test-aggd-XXXXXX");
	assert_non_null(mkdtemp(tmpdir));
	snprintf(path, sizeof(path), "%s/sub/dir/agg.sqlite", tmpdir);
	return path;
}

static void rm_store(void)
{
	char cmd[256];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	assert_int_equal(system(cmd), 0);
}

struct loaded {
	int n;
	uint64_t ids[8];
	char text[8][128];
	size_t mlen[8], olen[8];
	uint64_t epoch[8], end[8], parent[8];
	uint64_t wins[16];
	uint32_t revs[16];
	int nwins;
	uint64_t spool_ids[8], spool_tx[8];
	int nspool;
	uint64_t partial_wins[8];
	int npartials;
	char members[8][64];
	uint64_t member_hi[8];
	int nmembers;
};

static int load_p(void *ctx, uint64_t w, const void *body, size_t len)
{
	struct loaded *l = ctx;

	assert_int_equal(len, 2);
	assert_memory_equal(body, w == 5 ? "p5" : "p6", 2);
	l->partial_wins[l->npartials++] = w;
	return 0;
}

static int load_m(void *ctx, const struct aggd_stored_member *m)
{
	struct loaded *l = ctx;

	assert_int_equal(m->from, 3);
	assert_int_equal(m->last, UINT64_MAX);
	assert_true(m->failed == (strcmp(m->host, "b") == 0));
	snprintf(l->members[l->nmembers], sizeof(l->members[0]), "%s", m->host);
	l->member_hi[l->nmembers++] = m->hi;
	return 0;
}

static int load_q(void *ctx, const struct aggd_stored_query *q)
{
	struct loaded *l = ctx;

	l->ids[l->n] = q->id;
	snprintf(l->text[l->n], sizeof(l->text[0]), "%s", q->query);
	l->mlen[l->n] = q->manifest_len;
	l->olen[l->n] = q->object_len;
	l->epoch[l->n] = q->epoch_ns;
	l->end[l->n] = q->end_ns;
	l->parent[l->n] = q->parent_id;
	l->n++;
	return 0;
}

static int load_w(void *ctx, uint64_t w, uint32_t rev, uint64_t closed, const void *body,
		  size_t len)
{
	struct loaded *l = ctx;

	(void)closed;
	assert_int_equal(len, 2);
	assert_memory_equal(body, rev ? "w3" : "w0", 2);
	l->wins[l->nwins] = w;
	l->revs[l->nwins++] = rev;
	return 0;
}

static int load_spool(void *ctx, uint64_t id, uint64_t tx, int kind, const void *body, size_t len)
{
	struct loaded *l = ctx;

	/* row 2 was a GraphBatch, the others Partials: each comes back as what it was */
	assert_int_equal(kind,
			 id == 2 ? WEFT__ENVELOPE__BODY_GRAPH_BATCH : WEFT__ENVELOPE__BODY_PARTIAL);
	assert_int_equal(len, 4);
	assert_memory_equal(body, "abcd", 4);
	l->spool_ids[l->nspool] = id;
	l->spool_tx[l->nspool++] = tx;
	return 0;
}

static void test_store_roundtrip(void **state)
{
	char *path = store_path(), err[256];
	struct aggd_store *s, *s2;
	struct aggd_stored_query q1 = { .query = "from a select count()",
					.manifest = "m1",
					.manifest_len = 2,
					.object = "obj1",
					.object_len = 4,
					.epoch_ns = EPOCH,
					.end_ns = UINT64_MAX - 5 };
	struct aggd_stored_query q2 = q1;
	struct loaded l = { 0 };
	struct stat st;
	uint64_t v;

	(void)state;
	s = aggd_store_open(path, err, sizeof(err));
	assert_non_null(s);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	*strrchr(path, '/') = 0;
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0700);
	strcat(path, "/agg.sqlite");

	/* one process per store */
	errno = 0;
	s2 = aggd_store_open(path, err, sizeof(err));
	assert_null(s2);
	assert_int_equal(errno, EBUSY);
	assert_non_null(strstr(err, "in use"));

	assert_int_equal(aggd_store_query_add(s, &q1), 0);
	q2.parent_id = 77;
	q2.query = "second";
	assert_int_equal(aggd_store_query_add(s, &q2), 0);
	assert_int_equal(q1.id, 1);
	assert_int_equal(q2.id, 2);
	assert_int_equal(aggd_store_query_end(s, 1), 0);

	assert_int_equal(aggd_store_begin(s), 0);
	assert_int_equal(aggd_store_sender_set(s, "a", 0x8000000000000001ULL, 41), 0);
	assert_int_equal(aggd_store_snapshot_set(s, 2, 5, "p5", 2), 0);
	assert_int_equal(aggd_store_snapshot_set(s, 2, 6, "xx", 2), 0);
	assert_int_equal(aggd_store_snapshot_set(s, 2, 6, "p6", 2), 0); /* replaces */
	{
		struct aggd_stored_member ma = { "a", 3, UINT64_MAX, 7, false };
		struct aggd_stored_member mb = { "b", 3, UINT64_MAX, 5, true };
		struct aggd_stored_member mc = { "c", 3, UINT64_MAX, 1, false };

		assert_int_equal(aggd_store_member_set(s, 2, &ma), 0);
		ma.hi = 8;
		assert_int_equal(aggd_store_member_set(s, 2, &ma), 0);
		assert_int_equal(aggd_store_member_set(s, 2, &mb), 0);
		assert_int_equal(aggd_store_member_set(s, 2, &mc), 0);
		assert_int_equal(aggd_store_member_set(s, 1, &mc), 0); /* of the ended query */
		assert_int_equal(aggd_store_member_del(s, 2, "c"), 0);
	}
	assert_int_equal(aggd_store_window_emitted(s, 2, 5, 0, EPOCH, "w0", 2), 0);
	assert_int_equal(aggd_store_window_emitted(s, 2, 5, 3, EPOCH, "w3", 2), 0);
	assert_int_equal(aggd_store_commit(s), 0);
	/* a rolled back batch leaves nothing */
	assert_int_equal(aggd_store_begin(s), 0);
	assert_int_equal(aggd_store_sender_set(s, "a", 0x8000000000000001ULL, 99), 0);
	aggd_store_rollback(s);
	assert_int_equal(aggd_store_meta_get(s, "nothing", &v), -ENOENT);
	assert_int_equal(aggd_store_meta_set(s, "parent_seq", UINT64_MAX), 0);
	assert_int_equal(aggd_store_spool_add(s, 1, WEFT__ENVELOPE__BODY_PARTIAL, "abcd", 4), 0);
	assert_int_equal(aggd_store_spool_add(s, 2, WEFT__ENVELOPE__BODY_GRAPH_BATCH, "abcd", 4),
			 0);
	assert_int_equal(aggd_store_spool_add(s, 3, WEFT__ENVELOPE__BODY_PARTIAL, "abcd", 4), 0);
	assert_int_equal(aggd_store_spool_tx(s, 2, 1234), 0);
	assert_int_equal(aggd_store_spool_del(s, 1), 0);
	aggd_store_close(s);

	/* everything back after a reopen */
	s = aggd_store_open(path, err, sizeof(err));
	assert_non_null(s);
	assert_int_equal(aggd_store_queries_load(s, load_q, &l), 0);
	assert_int_equal(l.n, 1);
	assert_int_equal(l.ids[0], 2);
	assert_string_equal(l.text[0], "second");
	assert_int_equal(l.mlen[0], 2);
	assert_int_equal(l.olen[0], 4);
	assert_int_equal(l.epoch[0], EPOCH);
	assert_int_equal(l.end[0], UINT64_MAX - 5);
	assert_int_equal(l.parent[0], 77);
	assert_int_equal(aggd_store_sender_get(s, "a", 0x8000000000000001ULL, &v), 0);
	assert_int_equal(v, 41);
	assert_int_equal(aggd_store_sender_get(s, "a", 1, &v), 0);
	assert_int_equal(v, 0);
	/* emitting window 5 replaced its snapshot; window 6's stays until it is emitted */
	assert_int_equal(aggd_store_snapshots_load(s, 2, load_p, &l), 0);
	assert_int_equal(l.npartials, 1);
	assert_int_equal(l.partial_wins[0], 6);
	assert_int_equal(aggd_store_window_emitted(s, 2, 6, 0, EPOCH, "w0", 2), 0);
	l.npartials = 0;
	assert_int_equal(aggd_store_snapshots_load(s, 2, load_p, &l), 0);
	assert_int_equal(l.npartials, 0);
	assert_int_equal(aggd_store_snapshot_set(s, 2, 7, "p6", 2), 0);
	/* members: a updated, b, c deleted */
	assert_int_equal(aggd_store_members_load(s, 2, load_m, &l), 0);
	assert_int_equal(l.nmembers, 2);
	assert_string_equal(l.members[0], "a");
	assert_int_equal(l.member_hi[0], 8);
	assert_string_equal(l.members[1], "b");
	assert_int_equal(l.member_hi[1], 5);
	assert_int_equal(aggd_store_windows_load(s, 2, load_w, &l), 0);
	assert_int_equal(l.nwins, 2);
	assert_int_equal(l.wins[0], 5);
	assert_int_equal(l.revs[0], 3);
	assert_int_equal(l.wins[1], 6);
	assert_int_equal(aggd_store_meta_get(s, "parent_seq", &v), 0);
	assert_int_equal(v, UINT64_MAX);
	assert_int_equal(aggd_store_spool_load(s, load_spool, &l), 0);
	assert_int_equal(l.nspool, 2);
	assert_int_equal(l.spool_ids[0], 2);
	assert_int_equal(l.spool_tx[0], 1234);
	assert_int_equal(l.spool_ids[1], 3);
	assert_int_equal(l.spool_tx[1], 0);
	/* forgetting windows below 6 drops window 5's snapshot and record */
	assert_int_equal(aggd_store_snapshot_set(s, 2, 5, "p5", 2), 0);
	assert_int_equal(aggd_store_windows_forget(s, 2, 6), 0);
	l.nwins = 0;
	assert_int_equal(aggd_store_windows_load(s, 2, load_w, &l), 0);
	assert_int_equal(l.nwins, 1);
	assert_int_equal(l.wins[0], 6);
	/* ... but not the snapshot of window 7 */
	l.npartials = 0;
	assert_int_equal(aggd_store_snapshots_load(s, 2, load_p, &l), 0);
	assert_int_equal(l.npartials, 1);
	assert_int_equal(l.partial_wins[0], 7);
	/* a new query never reuses an id, even of an ended one */
	q1.id = 0;
	assert_int_equal(aggd_store_query_end(s, 2), 0);
	/* ending a query forgets its snapshots and members */
	l.npartials = l.nmembers = 0;
	assert_int_equal(aggd_store_snapshots_load(s, 2, load_p, &l), 0);
	assert_int_equal(aggd_store_members_load(s, 2, load_m, &l), 0);
	assert_int_equal(l.npartials + l.nmembers, 0);
	assert_int_equal(aggd_store_query_add(s, &q1), 0);
	assert_int_equal(q1.id, 3);
	aggd_store_close(s);
	rm_store();
}

/* What a restart does: the members, the closed windows and the snapshots of the last
 * checkpoint read back from the store give the same windows; windows wait for members that
 * have not reconnected until the hold ends, then name them missing; a late partial after the
 * restart is a revision. */
struct restore_ctx {
	struct aggd_qwin *q;
	int windows, snapshots, members;
};

static int restore_w(void *ctx, uint64_t w, uint32_t rev, uint64_t closed, const void *body,
		     size_t len)
{
	struct restore_ctx *r = ctx;
	Weft__Partial *pt = weft__partial__unpack(NULL, len, body);
	int rc;

	assert_non_null(pt);
	rc = aggd_qwin_restore_closed(r->q, w, rev, closed, pt);
	weft__partial__free_unpacked(pt, NULL);
	r->windows++;
	return rc;
}

static int restore_s(void *ctx, uint64_t w, const void *body, size_t len)
{
	struct restore_ctx *r = ctx;
	Weft__Partial *pt = weft__partial__unpack(NULL, len, body);
	int rc;

	assert_non_null(pt);
	assert_int_equal(pt->window, w);
	rc = aggd_qwin_restore_snapshot(r->q, pt);
	weft__partial__free_unpacked(pt, NULL);
	r->snapshots++;
	return rc;
}

static int restore_m(void *ctx, const struct aggd_stored_member *sm)
{
	struct restore_ctx *r = ctx;
	struct aggd_member_view m = { .host = sm->host,
				      .from = sm->from,
				      .last = sm->last,
				      .hi = sm->hi,
				      .failed = sm->failed };

	r->members++;
	return aggd_qwin_restore_member(r->q, &m);
}

/* A window as the daemon stores it (emitted or at a checkpoint): merged groups, drops and
 * hosts as a packed Partial. */
static void view_pack(const struct aggd_window_view *v, void **body, size_t *len)
{
	Weft__Partial pt;
	Weft__Group **g = NULL;
	size_t ng = 0;

	assert_int_equal(agent_table_to_groups(v->table, &g, &ng), 0);
	weft__partial__init(&pt);
	pt.query_id = 1;
	pt.window = v->index;
	pt.host = "aggregator";
	pt.groups = g;
	pt.n_groups = ng;
	pt.n_drops = WEFT_DROP_NR;
	pt.drops = (uint64_t *)v->drops;
	pt.n_hosts = v->nhosts;
	pt.hosts = (char **)v->hosts;
	pt.n_missing = v->nmissing;
	pt.missing = (char **)v->missing;
	*len = weft__partial__get_packed_size(&pt);
	*body = malloc(*len ? *len : 1);
	assert_non_null(*body);
	weft__partial__pack(&pt, *body);
	agent_groups_free(g, ng);
}

static struct aggd_store *emit_store;

static int on_emit_store(void *ctx, const struct aggd_window_view *v)
{
	void *body;
	size_t len;

	on_emit(ctx, v);
	view_pack(v, &body, &len);
	assert_int_equal(aggd_store_window_emitted(emit_store, 1, v->index, v->revision, v->end_ns,
						   body, len),
			 0);
	free(body);
	return 0;
}

struct ckpt {
	struct aggd_store *s;
	int windows, members, gone;
};

static int ckpt_w(void *ctx, const struct aggd_window_view *v)
{
	struct ckpt *c = ctx;
	void *body;
	size_t len;

	view_pack(v, &body, &len);
	assert_int_equal(aggd_store_snapshot_set(c->s, 1, v->index, body, len), 0);
	free(body);
	c->windows++;
	return 0;
}

static int ckpt_m(void *ctx, const struct aggd_member_view *m)
{
	struct ckpt *c = ctx;
	struct aggd_stored_member sm = { m->host, m->from, m->last, m->hi, m->failed };

	if (m->gone) {
		c->gone++;
		return aggd_store_member_del(c->s, 1, m->host);
	}
	c->members++;
	return aggd_store_member_set(c->s, 1, &sm);
}

static void checkpoint(struct aggd_qwin *q, struct ckpt *c, int windows, int members, int gone)
{
	c->windows = c->members = c->gone = 0;
	assert_int_equal(aggd_qwin_checkpoint(q, ckpt_w, ckpt_m, c), 0);
	assert_int_equal(c->windows, windows);
	assert_int_equal(c->members, members);
	assert_int_equal(c->gone, gone);
}

static struct aggd_qwin *restart(struct fixture *f, struct aggd_store *s, struct restore_ctx *r)
{
	struct aggd_qwin *q = qwin(f, 0, 0);

	memset(r, 0, sizeof(*r));
	r->q = q;
	assert_int_equal(aggd_store_members_load(s, 1, restore_m, r), 0);
	assert_int_equal(aggd_store_windows_load(s, 1, restore_w, r), 0);
	assert_int_equal(aggd_store_snapshots_load(s, 1, restore_s, r), 0);
	return q;
}

static void test_restore(void **state)
{
	struct fixture *f = fx_new(query_text);
	char *path = store_path(), err[256];
	struct aggd_store *s = aggd_store_open(path, err, sizeof(err));
	struct aggd_qwin *q = qwin(f, 0, 0);
	struct restore_ctx r;
	struct ckpt c = { .s = s };
	uint64_t t = EPOCH + S + LATE;

	(void)state;
	assert_non_null(s);
	emit_store = s;
	aggd_qwin_member(q, "a", 0, true);
	aggd_qwin_member(q, "b", 0, true);
	aggd_qwin_member(q, "gone", 0, true);
	checkpoint(q, &c, 0, 3, 0);
	checkpoint(q, &c, 0, 0, 0); /* nothing changed */
	aggd_qwin_member_forget(q, "gone");
	/* window 0: a only, checkpointed, then closed by its deadline */
	assert_int_equal(aggd_qwin_add(q, partial(f, "a", 0, ev_a, 4, false), t), AGGD_MERGED);
	checkpoint(q, &c, 1, 1, 1); /* window 0, a's progress, "gone" deleted */
	assert_int_equal(aggd_qwin_tick(q, t, on_emit_store, f), 1);
	checkpoint(q, &c, 0, 0, 0); /* the emitted record holds window 0 */
	/* window 1: a, checkpointed; a's second partial for it is not */
	assert_int_equal(aggd_qwin_add(q, partial(f, "a", 1, ev_a, 2, false), t), AGGD_MERGED);
	checkpoint(q, &c, 1, 1, 0);
	assert_int_equal(aggd_qwin_add(q, partial(f, "a", 1, ev_a, 1, false), t), AGGD_MERGED);
	aggd_qwin_free(q);

	/* a restart where b does not come back: window 1 waits for it during the hold, then
	 * closes by its deadline, naming it missing */
	q = restart(f, s, &r);
	assert_int_equal(r.members, 2);
	assert_int_equal(r.windows, 1);
	assert_int_equal(r.snapshots, 1); /* window 0's was replaced by its emitted record */
	assert_int_equal(aggd_qwin_next_close(q), 1);
	aggd_qwin_hold(q, EPOCH + 2 * S + LATE + 1);
	aggd_qwin_member(q, "a", 0, true);
	assert_int_equal(tick(f, q, EPOCH + 2 * S + LATE), 0);
	assert_int_equal(tick(f, q, EPOCH + 2 * S + LATE + 1), 1);
	assert_int_equal(f->em[0].index, 1);
	assert_string_equal(f->em[0].hosts, "a");
	assert_string_equal(f->em[0].missing, "b");
	{
		/* as of the checkpoint: a's unacknowledged second partial is resent by a */
		struct ev two[] = { { 10, 10 }, { 10, 10 } };
		struct agent_table *ref = reference(f, two, 2);

		assert_true(agent_table_equal(f->em[0].t, ref));
		agent_table_free(ref);
	}
	aggd_qwin_free(q);

	/* the same restart where b comes back */
	q = restart(f, s, &r);
	aggd_qwin_hold(q, EPOCH + 100 * S);
	aggd_qwin_member(q, "a", 0, true);
	/* a reported window 1 before the restart; b, restored, is waited for */
	assert_int_equal(tick(f, q, EPOCH + S + LATE), 0);
	aggd_qwin_member(q, "b", 0, true);
	assert_int_equal(tick(f, q, EPOCH + 2 * S + LATE), 0);
	/* b's late partial for window 0 is a revision of what was emitted before */
	assert_int_equal(aggd_qwin_add(q, partial(f, "b", 0, ev_b, 3, false), t), AGGD_REVISED);
	assert_int_equal(aggd_qwin_add(q, partial(f, "b", 1, ev_b, 3, false), t), AGGD_MERGED);
	assert_int_equal(tick(f, q, EPOCH + 2 * S + LATE), 2);
	assert_int_equal(f->em[0].index, 0);
	assert_int_equal(f->em[0].revision, 1);
	{
		struct agent_table *ref = reference(f, ev_ab, 7);

		assert_true(agent_table_equal(f->em[0].t, ref));
		agent_table_free(ref);
	}
	assert_int_equal(f->em[1].index, 1);
	assert_int_equal(f->em[1].revision, 0);
	assert_string_equal(f->em[1].hosts, "a,b");
	assert_string_equal(f->em[1].missing, "");
	{
		struct ev both[] = { { 10, 10 }, { 10, 10 }, { 10, 10 }, { 20, 20 }, { 20, 20 } };
		struct agent_table *ref = reference(f, both, 5);

		assert_true(agent_table_equal(f->em[1].t, ref));
		agent_table_free(ref);
	}
	/* a replay gives the retained windows as last emitted, counting nothing */
	em_clear(f);
	assert_int_equal(aggd_qwin_replay(q, 1, on_emit, f), 1);
	assert_int_equal(f->em[0].index, 1);
	aggd_qwin_free(q);

	/* a revision merged and checkpointed but not emitted before a restart is emitted after
	 * it, from the snapshot */
	q = restart(f, s, &r);
	aggd_qwin_member(q, "b", 0, true);
	assert_int_equal(aggd_qwin_add(q, partial(f, "b", 0, ev_b, 3, false), t), AGGD_REVISED);
	checkpoint(q, &c, 1, 1, 0);
	aggd_qwin_free(q);
	q = restart(f, s, &r);
	assert_int_equal(r.snapshots, 2);
	assert_int_equal(tick(f, q, EPOCH + S), 1);
	assert_int_equal(f->em[0].index, 0);
	assert_int_equal(f->em[0].revision, 1);
	{
		struct agent_table *ref = reference(f, ev_ab, 7);

		assert_true(agent_table_equal(f->em[0].t, ref));
		agent_table_free(ref);
	}
	aggd_qwin_free(q);
	aggd_store_close(s);
	rm_store();
	fx_free(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_close_when_all_reported),
		cmocka_unit_test(test_lateness_and_expiry),
		cmocka_unit_test(test_revision_and_retention),
		cmocka_unit_test(test_retention_age),
		cmocka_unit_test(test_for_end),
		cmocka_unit_test(test_stop),
		cmocka_unit_test(test_stop_before_senders_flip),
		cmocka_unit_test(test_merge_order),
		cmocka_unit_test(test_hostile),
		cmocka_unit_test(test_store_roundtrip),
		cmocka_unit_test(test_restore),
	};

	if (!wt_root("compiling a query resolves its probes in tracefs and probes perf events"))
		return WT_SKIP;
	return wt_status(cmocka_run_group_tests(tests, NULL, NULL));
}
