// SPDX-License-Identifier: Apache-2.0
/*
 * The windows of one cluster query: partial aggregates in, merged windows out.
 *
 * Window w covers [epoch + w * every, epoch + (w + 1) * every) of CLOCK_REALTIME (one window
 * [epoch, end) without `every`).  A window is open from its first partial until it is
 * closed, strictly in index order, when
 *   - every live member expected for it has reported it (a member reports windows in order,
 *     so a partial for a later window counts as having reported this one), or
 *   - its end plus the lateness bound has passed (members that did not report are missing),
 *     or
 *   - the query is finishing and no live member is still running it.
 * Closing emits the window; a partial for a closed window that is still retained is merged
 * and the window emitted again with revision + 1 at the next tick; a partial for a window
 * no longer retained is dropped and counted.  Retention is bounded by a number of windows
 * and an age.
 *
 * Merges are all-or-nothing: agent_table_add_groups() checks every group before it merges
 * any, so a hostile state that does not decode leaves the window as it was.  Nothing here
 * reads a clock: every call that needs the time takes it, so tests drive time by hand.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "aggregator/aggd.h"
#include "agent/result.h"

struct strset {
	char **v;
	size_t n, cap;
};

struct member {
	char *host;
	uint64_t from; /* the first window it runs */
	uint64_t last; /* its last window (it sent last); UINT64_MAX: still running */
	uint64_t hi; /* highest window reported + 1; 0: none */
	bool alive, failed;
	bool restored; /* read back from the store, not reconnected yet */
	bool ckpt; /* changed since the last checkpoint */
};

struct win {
	uint64_t index;
	struct agent_table *t;
	uint64_t drops[WEFT_DROP_NR];
	uint64_t misses, overflow;
	struct strset hosts; /* merged into it */
	struct strset sub_missing; /* reported missing by child aggregators */
	bool closed, dirty, last;
	bool ckpt; /* merged into since the last checkpoint or emission */
	uint32_t revision;
	uint64_t closed_ns;
};

struct aggd_qwin {
	const struct plan *p;
	struct aggd_qwin_opts o;
	struct win **w; /* open and retained windows, by index */
	size_t nw, wcap;
	uint64_t next_close;
	uint64_t final; /* the last window, once known; UINT64_MAX before */
	bool stopping, done;
	uint64_t stop_ns;
	uint64_t hold_ns; /* no window closes by its deadline before this */
	struct member *m;
	size_t nm, mcap;
	struct strset gone; /* members forgotten since the last checkpoint */
	struct aggd_qwin_stats st;
};

/* ---- sorted string sets ---- */

static size_t strset_find(const struct strset *s, const char *x, bool *found)
{
	size_t lo = 0, hi = s->n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		int c = strcmp(s->v[mid], x);

		if (c == 0) {
			*found = true;
			return mid;
		}
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	*found = false;
	return lo;
}

static bool strset_has(const struct strset *s, const char *x)
{
	bool found;

	strset_find(s, x, &found);
	return found;
}

static int strset_add(struct strset *s, const char *x)
{
	bool found;
	size_t at = strset_find(s, x, &found);
	char *d;

	if (found)
		return 0;
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 4;
		char **nv = realloc(s->v, cap * sizeof(*nv));

		if (!nv)
			return -ENOMEM;
		s->v = nv;
		s->cap = cap;
	}
	d = strdup(x);
	if (!d)
		return -ENOMEM;
	memmove(&s->v[at + 1], &s->v[at], (s->n - at) * sizeof(*s->v));
	s->v[at] = d;
	s->n++;
	return 0;
}

static void strset_free(struct strset *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->v[i]);
	free(s->v);
	memset(s, 0, sizeof(*s));
}

/* ---- windows ---- */

static void win_free(struct win *w)
{
	if (!w)
		return;
	agent_table_free(w->t);
	strset_free(&w->hosts);
	strset_free(&w->sub_missing);
	free(w);
}

static size_t win_find(const struct aggd_qwin *q, uint64_t index, bool *found)
{
	size_t lo = 0, hi = q->nw;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (q->w[mid]->index == index) {
			*found = true;
			return mid;
		}
		if (q->w[mid]->index < index)
			lo = mid + 1;
		else
			hi = mid;
	}
	*found = false;
	return lo;
}

static struct win *win_get(struct aggd_qwin *q, uint64_t index, bool create)
{
	bool found;
	size_t at = win_find(q, index, &found);
	struct win *w;

	if (found)
		return q->w[at];
	if (!create)
		return NULL;
	if (q->nw == q->wcap) {
		size_t cap = q->wcap ? q->wcap * 2 : 8;
		struct win **nv = realloc(q->w, cap * sizeof(*nv));

		if (!nv)
			return NULL;
		q->w = nv;
		q->wcap = cap;
	}
	w = calloc(1, sizeof(*w));
	if (!w)
		return NULL;
	w->index = index;
	w->t = agent_table_new(q->p, q->o.max_groups);
	if (!w->t) {
		free(w);
		return NULL;
	}
	memmove(&q->w[at + 1], &q->w[at], (q->nw - at) * sizeof(*q->w));
	q->w[at] = w;
	q->nw++;
	return w;
}

static void win_remove_at(struct aggd_qwin *q, size_t at)
{
	win_free(q->w[at]);
	memmove(&q->w[at], &q->w[at + 1], (q->nw - at - 1) * sizeof(*q->w));
	q->nw--;
}

/* ---- the query ---- */

struct aggd_qwin *aggd_qwin_new(const struct plan *p, const struct aggd_qwin_opts *o)
{
	struct aggd_qwin *q;

	if (!p || !o || !p->aggregating) {
		errno = EINVAL;
		return NULL;
	}
	q = calloc(1, sizeof(*q));
	if (!q) {
		errno = ENOMEM;
		return NULL;
	}
	q->p = p;
	memcpy(&q->o, o, o->sz < sizeof(q->o) ? o->sz : sizeof(q->o));
	q->o.sz = sizeof(q->o);
	if (!q->o.keep_windows)
		q->o.keep_windows = AGGD_KEEP_WINDOWS;
	if (!q->o.keep_ns)
		q->o.keep_ns = AGGD_KEEP_NS;
	q->final = UINT64_MAX;
	if (q->o.end_ns)
		q->final = aggd_qwin_window_of(q, q->o.end_ns > q->o.epoch_ns ? q->o.end_ns - 1 :
										q->o.epoch_ns);
	return q;
}

void aggd_qwin_free(struct aggd_qwin *q)
{
	if (!q)
		return;
	for (size_t i = 0; i < q->nw; i++)
		win_free(q->w[i]);
	free(q->w);
	for (size_t i = 0; i < q->nm; i++)
		free(q->m[i].host);
	free(q->m);
	strset_free(&q->gone);
	free(q);
}

uint64_t aggd_qwin_window_of(const struct aggd_qwin *q, uint64_t t_ns)
{
	if (!q->o.every_ns || t_ns <= q->o.epoch_ns)
		return 0;
	return (t_ns - q->o.epoch_ns) / q->o.every_ns;
}

static uint64_t sat_add(uint64_t a, uint64_t b)
{
	return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static uint64_t window_start(const struct aggd_qwin *q, uint64_t w)
{
	if (!q->o.every_ns)
		return q->o.epoch_ns;
	if (w > (UINT64_MAX - q->o.epoch_ns) / q->o.every_ns)
		return UINT64_MAX;
	return q->o.epoch_ns + w * q->o.every_ns;
}

/* The window's end as the query sees it: cut short by `for` and by a stop. */
static uint64_t window_end(const struct aggd_qwin *q, uint64_t w)
{
	uint64_t end = q->o.every_ns ? window_start(q, sat_add(w, 1)) : UINT64_MAX;

	if (q->o.end_ns && q->o.end_ns < end)
		end = q->o.end_ns;
	if (q->stopping && q->stop_ns < end)
		end = q->stop_ns;
	return end;
}

static struct member *member_find(const struct aggd_qwin *q, const char *host)
{
	for (size_t i = 0; i < q->nm; i++)
		if (strcmp(q->m[i].host, host) == 0)
			return &q->m[i];
	return NULL;
}

bool aggd_qwin_has_member(const struct aggd_qwin *q, const char *host)
{
	return q && host && member_find(q, host);
}

int aggd_qwin_member(struct aggd_qwin *q, const char *host, uint64_t from_window, bool alive)
{
	struct member *m;

	if (!q || !host)
		return -EINVAL;
	m = member_find(q, host);
	if (m) {
		m->alive = alive;
		if (alive) {
			m->restored = false;
			if (m->failed)
				m->ckpt = true;
			m->failed = false; /* a restarted agent was sent the query again */
		}
		return 0;
	}
	if (q->nm == q->mcap) {
		size_t cap = q->mcap ? q->mcap * 2 : 8;
		struct member *nv = realloc(q->m, cap * sizeof(*nv));

		if (!nv)
			return -ENOMEM;
		q->m = nv;
		q->mcap = cap;
	}
	m = &q->m[q->nm];
	memset(m, 0, sizeof(*m));
	m->host = strdup(host);
	if (!m->host)
		return -ENOMEM;
	m->from = from_window;
	m->last = UINT64_MAX;
	m->alive = alive;
	m->ckpt = true;
	q->nm++;
	return 0;
}

void aggd_qwin_member_fail(struct aggd_qwin *q, const char *host)
{
	struct member *m = q && host ? member_find(q, host) : NULL;

	if (m && !m->failed) {
		m->failed = true;
		m->ckpt = true;
	}
}

void aggd_qwin_member_forget(struct aggd_qwin *q, const char *host)
{
	struct member *m = q && host ? member_find(q, host) : NULL;

	if (!m)
		return;
	strset_add(&q->gone, m->host); /* at worst (ENOMEM) it is restored, and missing */
	free(m->host);
	*m = q->m[--q->nm];
}

/* A restored member counts as alive until the restart's hold ends: it may reconnect. */
static bool member_alive(const struct aggd_qwin *q, const struct member *m, uint64_t now)
{
	return m->alive || (m->restored && now < q->hold_ns);
}

static bool member_expected(const struct member *m, uint64_t w)
{
	return !m->failed && m->from <= w && w <= m->last;
}

static bool member_reported(const struct member *m, uint64_t w)
{
	return m->hi > w;
}

/*
 * Whether every sender has sent its last partial, for window w or before: a cancelled query
 * whose senders all stopped before their clocks reached the window of the cancel ends with
 * w, not with an empty window after it.  A sender that has not ended, alive or not, may still
 * send: then no.
 */
static bool all_ended_by(const struct aggd_qwin *q, uint64_t w)
{
	size_t ended = 0;

	for (size_t i = 0; i < q->nm; i++) {
		const struct member *m = &q->m[i];

		if (m->failed)
			continue;
		if (m->last == UINT64_MAX || m->last > w)
			return false;
		ended++;
	}
	return ended > 0;
}

/* Whether window w (== next_close) may close now. */
static bool window_due(const struct aggd_qwin *q, uint64_t w, uint64_t now)
{
	uint64_t end = window_end(q, w);
	size_t live_expected = 0, live_reported = 0, alive = 0, alive_running = 0;
	bool finishing = q->final != UINT64_MAX && w <= q->final;

	if (end != UINT64_MAX && now >= sat_add(end, q->o.lateness_ns) && now >= q->hold_ns)
		return true;
	for (size_t i = 0; i < q->nm; i++) {
		const struct member *m = &q->m[i];

		if (!member_alive(q, m, now))
			continue;
		alive++;
		if (!m->failed && m->last == UINT64_MAX)
			alive_running++;
		if (member_expected(m, w)) {
			live_expected++;
			live_reported += member_reported(m, w);
		}
	}
	if (live_expected)
		return live_reported == live_expected;
	/* nobody alive is expected for w: if the query is finishing and nobody alive runs it
	 * any more, nothing will come; otherwise (no member alive) wait for the deadline */
	return finishing && alive && !alive_running;
}

/*
 * Merges pt into w: groups, drops, hosts.  A partial names the hosts it holds (a child
 * aggregator's) or, when it names none, is its sender's (with sender_host); a window read
 * back from the store names them all.  Checks every group before merging any: a refusal
 * leaves the window unchanged.
 */
static int win_merge(struct win *w, const Weft__Partial *pt, bool sender_host)
{
	int rc;

	rc = agent_table_add_groups(w->t, pt->groups, pt->n_groups);
	if (rc)
		return rc < 0 ? rc : -EINVAL;
	for (size_t i = 0; i < pt->n_drops && i < WEFT_DROP_NR; i++)
		w->drops[i] += pt->drops[i];
	w->misses += pt->misses;
	w->overflow += pt->overflow;
	for (size_t i = 0; i < pt->n_hosts; i++)
		if (pt->hosts[i] && (rc = strset_add(&w->hosts, pt->hosts[i])))
			return rc;
	if (!pt->n_hosts && sender_host && pt->host && (rc = strset_add(&w->hosts, pt->host)))
		return rc;
	for (size_t i = 0; i < pt->n_missing; i++)
		if (pt->missing[i] && (rc = strset_add(&w->sub_missing, pt->missing[i])))
			return rc;
	return 0;
}

int aggd_qwin_add(struct aggd_qwin *q, const Weft__Partial *pt, uint64_t now_ns)
{
	struct member *m;
	struct win *w;
	bool closed;
	int rc;

	if (!q || !pt || !pt->host)
		return -EINVAL;
	if (!q->o.every_ns && pt->window != 0)
		return -EINVAL;
	(void)now_ns;
	if (pt->window >= sat_add(q->next_close, AGGD_MAX_OPEN))
		return -EINVAL; /* far ahead of anything that can be running */

	/* the sender's progress counts even when its data comes too late */
	m = member_find(q, pt->host);
	if (!m) {
		/* a sender we did not start (e.g. it kept running across our restart) */
		rc = aggd_qwin_member(q, pt->host, pt->window, true);
		if (rc)
			return rc;
		m = member_find(q, pt->host);
	}
	if (pt->last && (m->last == UINT64_MAX || pt->window > m->last)) {
		m->last = pt->window;
		m->ckpt = true;
	}
	if (q->stopping && !q->done && pt->window > q->final && pt->window <= sat_add(q->final, 1))
		q->final = pt->window; /* a sender whose clock runs ahead ended one window later */

	if (pt->window < q->next_close) {
		w = win_get(q, pt->window, false);
		if (!w || !w->closed) {
			q->st.late_dropped++;
			if (pt->window + 1 > m->hi) {
				m->hi = pt->window + 1;
				m->ckpt = true;
			}
			return AGGD_LATE;
		}
		closed = true;
	} else {
		if (q->final != UINT64_MAX && pt->window > q->final) {
			q->st.late_dropped++;
			return AGGD_LATE; /* after the end */
		}
		closed = false;
		w = NULL;
	}

	if (!w) {
		w = win_get(q, pt->window, true);
		if (!w)
			return -ENOMEM;
	}
	rc = win_merge(w, pt, true);
	if (rc)
		return rc;
	if (pt->window + 1 > m->hi) {
		m->hi = pt->window + 1;
		m->ckpt = true;
	}
	w->ckpt = true;
	if (closed) {
		w->dirty = true;
		return AGGD_REVISED;
	}
	return AGGD_MERGED;
}

uint64_t aggd_qwin_retained_from(const struct aggd_qwin *q)
{
	if (!q)
		return 0;
	return q->nw && q->w[0]->index < q->next_close ? q->w[0]->index : q->next_close;
}

/* The hosts expected for w that did not report it, and those child aggregators named. */
static int window_missing(const struct aggd_qwin *q, const struct win *w, struct strset *out)
{
	int rc;

	for (size_t i = 0; i < q->nm; i++) {
		const struct member *m = &q->m[i];

		if (member_expected(m, w->index) && !member_reported(m, w->index) &&
		    !strset_has(&w->hosts, m->host) && (rc = strset_add(out, m->host)))
			return rc;
	}
	for (size_t i = 0; i < w->sub_missing.n; i++)
		if (!strset_has(&w->hosts, w->sub_missing.v[i]) &&
		    (rc = strset_add(out, w->sub_missing.v[i])))
			return rc;
	return 0;
}

/* What a window holds, as callbacks see it, with missing as the hosts named missing. */
static void win_view(const struct aggd_qwin *q, const struct win *w, const struct strset *missing,
		     struct aggd_window_view *v)
{
	v->index = w->index;
	v->start_ns = window_start(q, w->index);
	v->end_ns = window_end(q, w->index);
	v->table = w->t;
	memcpy(v->drops, w->drops, sizeof(v->drops));
	v->misses = w->misses;
	v->overflow = w->overflow + agent_table_overflow(w->t);
	v->hosts = (const char *const *)w->hosts.v;
	v->nhosts = w->hosts.n;
	v->missing = (const char *const *)missing->v;
	v->nmissing = missing->n;
}

static int window_emit(struct aggd_qwin *q, struct win *w, aggd_emit_fn fn, void *ctx, bool count)
{
	struct strset missing = { 0 };
	struct aggd_window_view v = { 0 };
	int rc;

	rc = window_missing(q, w, &missing);
	if (rc)
		goto out;
	win_view(q, w, &missing, &v);
	if (v.end_ns == UINT64_MAX) /* one window, never given an end: it ended when closed */
		v.end_ns = w->closed_ns;
	v.revision = w->revision;
	v.last = w->last;
	if (count) {
		q->st.emitted++;
		if (w->revision)
			q->st.revisions++;
	}
	rc = fn ? fn(ctx, &v) : 0;
out:
	strset_free(&missing);
	return rc;
}

static void evict(struct aggd_qwin *q, uint64_t now)
{
	size_t nclosed = 0;

	for (size_t i = 0; i < q->nw; i++)
		nclosed += q->w[i]->closed;
	/* closed windows are the lowest indices: evict from the front */
	while (q->nw && q->w[0]->closed && !q->w[0]->dirty &&
	       (nclosed > q->o.keep_windows || sat_add(q->w[0]->closed_ns, q->o.keep_ns) <= now)) {
		win_remove_at(q, 0);
		nclosed--;
	}
}

int aggd_qwin_tick(struct aggd_qwin *q, uint64_t now_ns, aggd_emit_fn fn, void *ctx)
{
	int n = 0, rc, first_err = 0;

	if (!q)
		return -EINVAL;
	/* revisions first: they concern older windows */
	for (size_t i = 0; i < q->nw; i++) {
		struct win *w = q->w[i];

		if (!w->closed || !w->dirty)
			continue;
		w->dirty = false;
		w->revision++;
		rc = window_emit(q, w, fn, ctx, true);
		if (rc && !first_err)
			first_err = rc;
		if (!rc)
			w->ckpt = false; /* the emitted record holds it */
		n++;
	}
	while (!q->done && window_due(q, q->next_close, now_ns)) {
		struct win *w = win_get(q, q->next_close, true);

		if (!w)
			return -ENOMEM;
		w->closed = true;
		w->closed_ns = now_ns;
		w->last = q->final != UINT64_MAX && w->index >= q->final;
		if (!w->last && q->stopping && all_ended_by(q, w->index)) {
			q->final = w->index; /* nothing can come for a later window */
			w->last = true;
		}
		rc = window_emit(q, w, fn, ctx, true);
		if (rc && !first_err)
			first_err = rc;
		if (!rc)
			w->ckpt = false;
		n++;
		q->next_close++;
		if (w->last)
			q->done = true;
	}
	evict(q, now_ns);
	{
		struct aggd_qwin_stats *st = &q->st;

		st->open = st->retained = 0;
		for (size_t i = 0; i < q->nw; i++) {
			if (q->w[i]->closed)
				st->retained++;
			else
				st->open++;
		}
	}
	return first_err ? first_err : n;
}

int aggd_qwin_replay(struct aggd_qwin *q, uint64_t from, aggd_emit_fn fn, void *ctx)
{
	int n = 0, rc;

	if (!q)
		return -EINVAL;
	for (size_t i = 0; i < q->nw; i++) {
		struct win *w = q->w[i];

		if (!w->closed || w->index < from)
			continue;
		rc = window_emit(q, w, fn, ctx, false);
		if (rc)
			return rc;
		n++;
	}
	return n;
}

void aggd_qwin_stop(struct aggd_qwin *q, uint64_t now_ns)
{
	uint64_t final;

	if (!q || q->stopping || q->done)
		return;
	q->stopping = true;
	q->stop_ns = now_ns;
	final = aggd_qwin_window_of(q, now_ns);
	for (size_t i = 0; i < q->nw; i++)
		if (q->w[i]->index > final)
			final = q->w[i]->index;
	if (final < q->next_close)
		final = q->next_close; /* the window being collected now is the last */
	if (final < q->final)
		q->final = final;
}

bool aggd_qwin_done(const struct aggd_qwin *q)
{
	return q && q->done;
}

int aggd_qwin_restore_closed(struct aggd_qwin *q, uint64_t index, uint32_t revision,
			     uint64_t closed_ns, const Weft__Partial *merged)
{
	struct win *w;
	int rc;

	if (!q)
		return -EINVAL;
	w = win_get(q, index, true);
	if (!w)
		return -ENOMEM;
	/* what the window held when it was emitted */
	if (merged && (rc = win_merge(w, merged, false)))
		return rc;
	w->closed = true;
	w->dirty = false;
	w->revision = revision;
	w->closed_ns = closed_ns;
	w->last = q->final != UINT64_MAX && index >= q->final;
	if (index + 1 > q->next_close)
		q->next_close = index + 1;
	if (w->last)
		q->done = true;
	/* windows below a closed one were closed too (closing goes in order) */
	for (size_t i = 0; i < q->nw && q->w[i]->index < index; i++)
		if (!q->w[i]->closed) {
			q->w[i]->closed = true;
			q->w[i]->closed_ns = closed_ns;
		}
	return 0;
}

int aggd_qwin_restore_snapshot(struct aggd_qwin *q, const Weft__Partial *merged)
{
	struct win *w;
	bool closed;

	if (!q || !merged || (!q->o.every_ns && merged->window != 0))
		return -EINVAL;
	closed = merged->window < q->next_close;
	w = win_get(q, merged->window, !closed);
	if (!w)
		return closed ? 0 : -ENOMEM; /* closed and no longer retained: nothing to revise */
	if (closed) {
		/* merged into after it was emitted: the snapshot holds all of it, emitted again */
		struct agent_table *t = agent_table_new(q->p, q->o.max_groups);

		if (!t)
			return -ENOMEM;
		agent_table_free(w->t);
		w->t = t;
		memset(w->drops, 0, sizeof(w->drops));
		w->misses = w->overflow = 0;
		strset_free(&w->hosts);
		strset_free(&w->sub_missing);
		w->dirty = true;
	}
	return win_merge(w, merged, false);
}

int aggd_qwin_restore_member(struct aggd_qwin *q, const struct aggd_member_view *v)
{
	struct member *m;
	int rc;

	if (!q || !v || !v->host)
		return -EINVAL;
	rc = aggd_qwin_member(q, v->host, v->from, false);
	if (rc)
		return rc;
	m = member_find(q, v->host);
	m->from = v->from;
	m->last = v->last;
	m->hi = v->hi;
	m->failed = v->failed;
	m->restored = true;
	m->ckpt = false; /* as stored */
	return 0;
}

void aggd_qwin_changed_all(struct aggd_qwin *q)
{
	if (!q)
		return;
	for (size_t i = 0; i < q->nm; i++)
		q->m[i].ckpt = true;
	for (size_t i = 0; i < q->nw; i++)
		if (!q->w[i]->closed || q->w[i]->dirty)
			q->w[i]->ckpt = true;
}

int aggd_qwin_checkpoint(struct aggd_qwin *q, aggd_emit_fn win_fn,
			 int (*mem_fn)(void *ctx, const struct aggd_member_view *m), void *ctx)
{
	int rc;

	if (!q)
		return -EINVAL;
	while (q->gone.n) {
		struct aggd_member_view v = { .host = q->gone.v[q->gone.n - 1], .gone = true };

		if (mem_fn && (rc = mem_fn(ctx, &v)))
			return rc;
		free(q->gone.v[--q->gone.n]);
	}
	for (size_t i = 0; i < q->nm; i++) {
		struct member *m = &q->m[i];
		struct aggd_member_view v = { .host = m->host,
					      .from = m->from,
					      .last = m->last,
					      .hi = m->hi,
					      .failed = m->failed };

		if (!m->ckpt)
			continue;
		if (mem_fn && (rc = mem_fn(ctx, &v)))
			return rc;
		m->ckpt = false;
	}
	for (size_t i = 0; i < q->nw; i++) {
		struct win *w = q->w[i];
		struct aggd_window_view v = { 0 };

		if (!w->ckpt)
			continue;
		win_view(q, w, &w->sub_missing, &v);
		if (win_fn && (rc = win_fn(ctx, &v)))
			return rc;
		w->ckpt = false;
	}
	return 0;
}

void aggd_qwin_hold(struct aggd_qwin *q, uint64_t until_ns)
{
	if (q)
		q->hold_ns = until_ns;
}

uint64_t aggd_qwin_next_close(const struct aggd_qwin *q)
{
	return q ? q->next_close : 0;
}

void aggd_qwin_skip_to(struct aggd_qwin *q, uint64_t index)
{
	if (!q || index <= q->next_close)
		return;
	for (size_t i = 0; i < q->nw; i++)
		if (!q->w[i]->closed && q->w[i]->index < index)
			index = q->w[i]->index; /* never skip a window holding data */
	if (q->final != UINT64_MAX && index > q->final)
		index = q->final;
	if (index > q->next_close)
		q->next_close = index;
}

void aggd_qwin_stats(const struct aggd_qwin *q, struct aggd_qwin_stats *st)
{
	if (q && st)
		*st = q->st;
}
