// SPDX-License-Identifier: Apache-2.0
/*
 * Graph capture (graphcap.h): records of a graph query in, finished traces out.
 *
 *   record   task_begin -> an open task (the open table, by (trace, task)); task_end -> the
 *            open task becomes a finished task of its trace's pending elements; event and
 *            edge -> pending elements of their trace; span -> buffered per thread until the
 *            drain nests it (spans end inner first, so nesting waits for the outer one).
 *            kernel:sockets sends and receives -> buffered until their exchange is complete;
 *            a kernel:sched or kernel:process wakeup or fork -> an edge between weft tasks
 *            at once, or, when its waker has none, buffered for the drain.
 *   drain    exchanges made kernel tasks; spans nested and given ids, the wakeups into them
 *            resolved against the kernel and span tasks (a root span woken by a task joins
 *            its trace); then every trace with no open task and nothing held is finished:
 *            added to the aggregates (all of them), then kept whole when the head sample or
 *            an outlier rule selects it.
 *
 * Bounds: open tasks (max_open; the oldest evicted), traces waiting (max_traces; the oldest
 * drained as they are), buffered spans (max_open), buffered wakeups (max_open, counted in
 * kernel_pending_full), strings (WEFT_GREC_STR).  Every record
 * is checked before use: it came from the kernel, but a wrong layout must not crash us.
 */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "agent/graphcap.h"
#include "graph/kmsg.h"
#include "graph/store.h"
#include "kernel/weft_abi.h"
#include "kernel/weft_sketch.h"

/* Spans that ended this close to the newest record wait for the next drain: an outer span
 * still open may contain them (docs/graphs.md, "Spans as tasks"). */
#define GRAPHCAP_SPAN_HOLD_NS 1000000000ull
/* Socket sends and receives buffered at most, per open task allowed (max_open): they wait
 * for the drain (once a second) plus GRAPHCAP_SPAN_HOLD_NS, four a request/response, so at
 * the default 131072 x 4 (48 bytes each: 24 MiB at most, and at most as many shared parts,
 * struct kctx, 96 bytes each, one per socket and thread in use) a capture keeps up with
 * 260,000 socket calls a second, some 65,000 requests; beyond, calls are lost and counted
 * (open_evicted).  (With 65536 open tasks, a redis-benchmark on a core of its own, 40,000
 * to 49,000 requests a second, lost 18 % of its requests so, and then its traces.) */
#define GRAPHCAP_KOPS_PER_OPEN 4
/* The outlier rules judge a type only once this many of its tasks were seen. */
#define GRAPHCAP_MIN_TYPE_COUNT 100

/* ---------------------------------------------------------------- a small hash map */

/*
 * Open addressing with linear probing, at most half full.  Which slots are in use is a bitmap
 * apart from the entries: a lookup of an absent key (as many of a drain's are) reads only
 * the bitmap, a 256th of the entries' size (more often in the cache), and an entry is 32
 * bytes in a 64-byte-aligned array, so a present key costs one line of the entries, never two
 * (with the flag in the entry, 40 bytes, half the entries straddled two lines).
 */
struct hent {
	uint64_t k[3];
	size_t v;
};

struct hmap {
	struct hent *e;
	uint64_t *used; /* cap bits */
	size_t n, cap;
};

static uint64_t mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 31;
	return x;
}

static size_t hslot(const struct hmap *m, const uint64_t *k)
{
	return mix64(k[0] ^ mix64(k[1] ^ mix64(k[2]))) & (m->cap - 1);
}

static bool hused(const uint64_t *used, size_t i)
{
	return used[i / 64] >> (i % 64) & 1;
}

static void hmark(uint64_t *used, size_t i, bool on)
{
	if (on)
		used[i / 64] |= 1ull << (i % 64);
	else
		used[i / 64] &= ~(1ull << (i % 64));
}

static struct hent *hmap_find(const struct hmap *m, uint64_t a, uint64_t b, uint64_t c)
{
	uint64_t k[3] = { a, b, c };

	if (!m->cap)
		return NULL;
	for (size_t i = hslot(m, k);; i = (i + 1) & (m->cap - 1)) {
		struct hent *e = &m->e[i];

		if (!hused(m->used, i))
			return NULL;
		if (e->k[0] == a && e->k[1] == b && e->k[2] == c)
			return e;
	}
}

/* Rehash into a table of at least 64 and at least 2 * n slots, a power of two. */
static int hmap_resize(struct hmap *m, size_t n)
{
	size_t ncap = 64;
	struct hmap t;

	while (ncap < 2 * n)
		ncap *= 2;
	if (ncap <= m->cap)
		return 0;
	t = (struct hmap){ .e = aligned_alloc(64, ncap * sizeof(*t.e)),
			   .used = calloc(ncap / 64, sizeof(*t.used)),
			   .n = m->n,
			   .cap = ncap };
	if (!t.e || !t.used) {
		free(t.e);
		free(t.used);
		return -ENOMEM;
	}
	for (size_t i = 0; i < m->cap; i++) {
		size_t j;

		if (!hused(m->used, i))
			continue;
		for (j = hslot(&t, m->e[i].k); hused(t.used, j); j = (j + 1) & (ncap - 1))
			;
		t.e[j] = m->e[i];
		hmark(t.used, j, true);
	}
	free(m->e);
	free(m->used);
	*m = t;
	return 0;
}

static int hmap_grow(struct hmap *m)
{
	return hmap_resize(m, m->cap ? m->cap : 32);
}

/* Room for n more entries without a rehash on the way (one allocation, not one per doubling:
 * a drain's table of exchanges is built anew each time). */
static int hmap_reserve(struct hmap *m, size_t n)
{
	return hmap_resize(m, m->n + n + 1);
}

/* The entry of the key, created (v = 0) if absent; NULL when out of memory. */
static struct hent *hmap_get(struct hmap *m, uint64_t a, uint64_t b, uint64_t c, bool *isnew)
{
	uint64_t k[3] = { a, b, c };
	size_t i;

	if ((m->n + 1) * 2 > m->cap && hmap_grow(m))
		return NULL;
	for (i = hslot(m, k); hused(m->used, i); i = (i + 1) & (m->cap - 1))
		if (m->e[i].k[0] == a && m->e[i].k[1] == b && m->e[i].k[2] == c) {
			*isnew = false;
			return &m->e[i];
		}
	m->e[i] = (struct hent){ .k = { a, b, c } };
	hmark(m->used, i, true);
	m->n++;
	*isnew = true;
	return &m->e[i];
}

/* Removes e (linear probing: the entries after it move back into the hole). */
static void hmap_del(struct hmap *m, struct hent *e)
{
	size_t i = (size_t)(e - m->e), j = i;

	hmark(m->used, i, false);
	m->n--;
	for (;;) {
		size_t h;

		j = (j + 1) & (m->cap - 1);
		if (!hused(m->used, j))
			return;
		h = hslot(m, m->e[j].k);
		/* move j into i unless its home h lies cyclically in (i, j] */
		if (i <= j ? (i < h && h <= j) : (i < h || h <= j))
			continue;
		m->e[i] = m->e[j];
		hmark(m->used, i, true);
		hmark(m->used, j, false);
		i = j;
	}
}

static void hmap_free(struct hmap *m)
{
	free(m->e);
	free(m->used);
	memset(m, 0, sizeof(*m));
}

/* ---------------------------------------------------------------- state */

struct open_task {
	struct graph_id128 trace;
	uint64_t id, parent;
	char service[WEFT_GREC_STR], name[WEFT_GREC_STR];
	int64_t start; /* monotonic ns */
	int64_t pid, tid;
	uint64_t seq; /* begin order: the oldest is evicted first */
	uint64_t prev_on_tid[3]; /* the task open on this thread before it (key), or zeros */
	bool used;
};

struct span_rec {
	int64_t start, end; /* monotonic ns */
	int64_t pid, tid;
	uint32_t cookie;
	char comm[16];
	/* the innermost weft task open on the thread when the span ended, if any */
	struct graph_id128 wtrace;
	uint64_t wtask;
	int64_t wstart;
};

/* A send or receive of kernel:sockets, buffered until its exchange is complete. */
struct kop {
	int64_t time; /* monotonic ns */
	int64_t pid, tid;
	uint64_t sk;
	uint32_t seq_end, len; /* its struct kmsg_io's own (kop_io()) */
	uint32_t ctx; /* the rest: its socket's 4-tuple and its thread's comm, c->kctx[ctx] */
	bool send;
};

/*
 * What the calls of one socket on one thread have in common, kept once (a call is 48 bytes
 * instead of 112, and some two seconds of calls are held: docs/performance.md, "What the
 * agent's memory under kernel edges is"): the 4-tuple (seq_end and len 0) and the comm.
 * Found by (socket, pid, tid) through kctx_ix, which names the latest; a socket whose
 * 4-tuple or thread's comm changed gets a new one.  Rebuilt with the held calls after each
 * drain (kctx_compact()), so it holds no more than they use.
 */
struct kctx {
	uint64_t sk;
	int64_t pid, tid;
	struct kmsg_io io;
	char comm[16];
};

/* The id and trace given to an exchange (a task of kernel:sockets) when first seen: kept
 * while its ops are buffered, so that every drain sees the same. */
struct kassign {
	uint64_t id;
	struct graph_id128 trace; /* zero: not resolved yet */
	uint64_t parent; /* client: the server task it runs in; server: 0 */
	uint64_t from; /* server: the task whose send it received first; 0: none */
	bool used;
};

/* A send of an emitted exchange: later receives may still match it. */
struct ksent {
	struct kmsg_io io;
	int64_t time;
	uint64_t task;
	struct graph_id128 trace;
};

/* An emitted kernel task: spans of its thread nest inside it. */
struct ktask {
	int64_t pid, tid, start, end; /* monotonic ns */
	uint64_t id;
	struct graph_id128 trace;
};

/* A wakeup or fork whose target thread had no task open yet: its next task ends the edge. */
struct kpend {
	int64_t tid; /* the woken thread, the child */
	enum graph_edge_kind kind;
	struct graph_id128 trace;
	uint64_t from; /* the waker's, the parent's task */
};

/* A wakeup or fork whose waker had no weft task open: resolved at drain time, when the
 * kernel and span tasks of both threads are known (docs/graphs.md, "Scheduler and process
 * edges"). */
struct kwake {
	int64_t time; /* monotonic ns */
	int64_t pid, tid; /* the waker, the parent */
	int64_t to; /* the woken thread, the child */
	enum graph_edge_kind kind;
	bool used; /* consumed by a task of the woken thread */
};

struct ptrace {
	uint64_t kheld; /* exchanges of the trace still buffered (kernel:sockets) */
	uint64_t nopen; /* open tasks of the trace */
	uint64_t first; /* monotonic ns of its first record */
	uint64_t seq; /* first-seen order */
	uint64_t span_gen; /* = drain_gen: a span held by this drain may join it (spans_drain) */
};

/*
 * Strings of a graph that repeat (a task type's service and name, the host): the last few
 * copied into it, per field, reused by a task with the same text (one copy in the graph's
 * arena, pointed at by many tasks) instead of a copy each.  Valid while that arena lives.
 */
#define STR_CACHE 4
struct str_cache {
	const char *s[3][STR_CACHE];
	unsigned next[3];
};

struct graphcap {
	const struct plan *plan;
	struct graphcap_opts o;
	char host[256];
	double rate;
	int64_t mono_to_real; /* add to CLOCK_MONOTONIC ns: ns since the epoch */
	uint64_t next_id; /* agent-made ids: a counter mixed with the instance */
	uint64_t seq;
	uint64_t newest; /* newest record time (monotonic) */
	uint64_t drain_gen; /* drains so far */

	struct open_task *open;
	size_t nopen_slots, cap_open; /* slots used at most; free slots have !used */
	size_t *free_slots;
	size_t nfree;
	struct hmap open_ix; /* (hi, lo, task) -> slot */
	struct hmap tid_top; /* (pid, tid, 0) -> slot of the innermost open task + 1 */
	struct hmap traces; /* (hi, lo, 0) -> index into tr[] */
	struct hmap tid_khold; /* (pid, tid, 0) -> start of its first waiting exchange */
	struct ptrace *tr;
	struct graph_id128 *trid;
	size_t ntr, cap_tr;

	struct graph pend; /* finished elements of traces not yet drained */
	struct str_cache pend_strs; /* kernel tasks' strings in pend's arena */
	struct span_rec *spans;
	size_t nspans, cap_spans;

	/* kernel:sockets */
	struct kop *kops;
	struct kctx *kctx; /* the calls' shared parts (struct kctx) */
	size_t nkctx, cap_kctx;
	struct hmap kctx_ix; /* (sk, pid, tid) -> its latest kctx */
	uint32_t kctx_last[256]; /* a kctx + 1 by (sk, tid) hashed: most calls skip kctx_ix */
	size_t nkops, cap_kops;
	struct hmap kix; /* waiting exchanges: (pid << 32 | tid, sk, first op time) -> kas + 1 */
	struct kassign *kas;
	size_t nkas, cap_kas;
	struct ksent *ksent;
	size_t nksent, cap_ksent;
	struct ktask *ktasks;
	size_t nktasks, cap_ktasks;
	/* the earliest end among them (UINT64_MAX: none): ktasks_make_room() has nothing to
	 * take while it is within two span holds of the newest record */
	uint64_t ktasks_min_end;
	/* kernel tasks not remembered (ktasks full) span [kforgot_from, kforgot_to]: a span in
	 * that time that finds no kernel task may have lost its own (counted then) */
	bool kforgot;
	int64_t kforgot_from, kforgot_to;

	/* kernel:sched and kernel:process: wakeups and forks waiting for their target's task */
	struct kpend *kpend;
	size_t nkpend, cap_kpend;
	/* ... and those whose waker had none, for the drain; with the tasks they may name: the
	 * span tasks emitted lately and the exchanges still buffered (id and trace as assigned) */
	struct kwake *kw;
	size_t nkw, cap_kw;
	struct ktask *stasks, *kheldx;
	size_t nstasks, cap_stasks, nkheldx, cap_kheldx;
	/* during spans_drain: per buffered span, the latest end of its thread's spans up to it
	 * (by start), and the pass of the drain going on */
	int64_t *span_pmax;
	int span_pass;

	struct graph_aggs total; /* every finished trace so far: the outlier rules' view */
	struct graphcap_stats st;
};

static int64_t clock_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

struct graphcap *graphcap_new(const struct plan *p, const struct graphcap_opts *o)
{
	struct graphcap *c;
	int64_t m0, r, m1;

	if (!p || !p->graph) {
		errno = EINVAL;
		return NULL;
	}
	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->plan = p;
	if (o)
		memcpy(&c->o, o, o->sz < sizeof(c->o) ? o->sz : sizeof(c->o));
	c->o.sz = sizeof(c->o);
	if (!c->o.max_open)
		c->o.max_open = GRAPHCAP_DEFAULT_OPEN;
	if (!c->o.max_traces)
		c->o.max_traces = GRAPHCAP_DEFAULT_TRACES;
	if (!c->o.max_age_ns)
		c->o.max_age_ns = GRAPHCAP_DEFAULT_MAX_AGE_NS;
	c->rate = c->o.sample > 0 && c->o.sample <= 1 ? c->o.sample : p->sample;
	if (!(c->rate > 0 && c->rate <= 1))
		c->rate = 1;
	if (c->o.host)
		snprintf(c->host, sizeof(c->host), "%s", c->o.host);
	else if (gethostname(c->host, sizeof(c->host) - 1) != 0)
		snprintf(c->host, sizeof(c->host), "localhost");
	c->o.host = NULL; /* not kept: copied */
	while (!c->o.instance) {
		if (getrandom(&c->o.instance, sizeof(c->o.instance), 0) != sizeof(c->o.instance))
			c->o.instance = mix64((uint64_t)clock_ns(CLOCK_MONOTONIC) ^
					      ((uint64_t)getpid() << 32));
	}
	/* the offset between the clocks, read between two monotonic reads */
	m0 = clock_ns(CLOCK_MONOTONIC);
	r = clock_ns(CLOCK_REALTIME);
	m1 = clock_ns(CLOCK_MONOTONIC);
	c->mono_to_real = r - (m0 + (m1 - m0) / 2);
	c->ktasks_min_end = UINT64_MAX;
	graph_init(&c->pend);
	graph_aggs_init(&c->total);
	c->total.sampling.rate = c->rate;
	return c;
}

void graphcap_free(struct graphcap *c)
{
	if (!c)
		return;
	free(c->open);
	free(c->free_slots);
	hmap_free(&c->open_ix);
	hmap_free(&c->tid_top);
	hmap_free(&c->tid_khold);
	hmap_free(&c->traces);
	free(c->tr);
	free(c->trid);
	graph_free(&c->pend);
	free(c->spans);
	free(c->kops);
	hmap_free(&c->kix);
	hmap_free(&c->kctx_ix);
	free(c->kctx);
	free(c->kas);
	free(c->ksent);
	free(c->ktasks);
	free(c->kpend);
	free(c->kw);
	free(c->stasks);
	free(c->kheldx);
	graph_aggs_free(&c->total);
	free(c);
}

void graphcap_stats(const struct graphcap *c, struct graphcap_stats *st)
{
	*st = c->st;
	st->traces_held = c->ntr;
}

/* An id made here: unique per host (the instance mixed in), never 0. */
static uint64_t make_id(struct graphcap *c)
{
	uint64_t id;

	do
		id = mix64(c->o.instance ^ mix64(++c->next_id));
	while (!id);
	return id;
}

/* The trace's pending entry, created; NULL when the table is full or out of memory. */
static struct ptrace *trace_get(struct graphcap *c, struct graph_id128 id, uint64_t now,
				bool create)
{
	bool isnew;
	struct hent *e;

	if (!create) {
		e = hmap_find(&c->traces, id.hi, id.lo, 0);
		return e ? &c->tr[e->v] : NULL;
	}
	if (c->ntr >= c->o.max_traces && !hmap_find(&c->traces, id.hi, id.lo, 0))
		return NULL;
	e = hmap_get(&c->traces, id.hi, id.lo, 0, &isnew);
	if (!e)
		return NULL;
	if (isnew) {
		if (c->ntr == c->cap_tr) {
			size_t ncap = c->cap_tr ? c->cap_tr * 2 : 64;
			struct ptrace *nt = realloc(c->tr, ncap * sizeof(*nt));
			struct graph_id128 *ni;

			if (nt)
				c->tr = nt;
			ni = nt ? realloc(c->trid, ncap * sizeof(*ni)) : NULL;
			if (!ni) {
				hmap_del(&c->traces, e);
				return NULL;
			}
			c->trid = ni;
			c->cap_tr = ncap;
		}
		e->v = c->ntr;
		c->tr[c->ntr] = (struct ptrace){ .first = now, .seq = ++c->seq };
		c->trid[c->ntr] = id;
		c->ntr++;
	}
	return &c->tr[e->v];
}

static int64_t to_real(const struct graphcap *c, uint64_t mono)
{
	return (int64_t)mono + c->mono_to_real;
}

/* A copy of a NUL-terminated-within-n string of a record. */
static void rec_str(char *dst, const char *src, size_t n)
{
	size_t len = strnlen(src, n);

	if (len == n)
		len = n - 1;
	memcpy(dst, src, len);
	dst[len] = 0;
}

/* Takes the oldest open task out of the table (counted): room for a new one. */
static void evict_oldest(struct graphcap *c)
{
	size_t best = SIZE_MAX;
	struct hent *e;
	struct ptrace *t;

	for (size_t i = 0; i < c->nopen_slots; i++)
		if (c->open[i].used && (best == SIZE_MAX || c->open[i].seq < c->open[best].seq))
			best = i;
	if (best == SIZE_MAX)
		return;
	e = hmap_find(&c->open_ix, c->open[best].trace.hi, c->open[best].trace.lo,
		      c->open[best].id);
	if (e)
		hmap_del(&c->open_ix, e);
	t = trace_get(c, c->open[best].trace, 0, false);
	if (t && t->nopen)
		t->nopen--;
	c->open[best].used = false;
	c->free_slots[c->nfree++] = best;
	c->st.open_evicted++;
}

static int kpend_resolve(struct graphcap *c, const struct open_task *ot);
static int grow(void **v, size_t *cap, size_t need, size_t elsz);

static int on_begin(struct graphcap *c, const struct weft_graph_rec *r)
{
	struct graph_id128 tr = { r->a[0], r->a[1] };
	struct open_task *ot;
	struct ptrace *t;
	struct hent *e, *top;
	bool isnew;
	size_t slot;

	if (!r->a[2] || (!tr.hi && !tr.lo))
		return -EINVAL;
	if (hmap_find(&c->open_ix, tr.hi, tr.lo, r->a[2]))
		return -EINVAL; /* begun twice: the first stays */
	if (c->open_ix.n >= c->o.max_open)
		evict_oldest(c);
	t = trace_get(c, tr, r->time, true);
	if (!t)
		return -ENOSPC;
	if (c->nfree) {
		slot = c->free_slots[--c->nfree];
	} else {
		if (c->nopen_slots == c->cap_open) {
			size_t ncap = c->cap_open ? c->cap_open * 2 : 64;
			struct open_task *no = realloc(c->open, ncap * sizeof(*no));
			size_t *nf;

			if (!no)
				return -ENOMEM;
			c->open = no;
			nf = realloc(c->free_slots, ncap * sizeof(*nf));
			if (!nf)
				return -ENOMEM;
			c->free_slots = nf;
			c->cap_open = ncap;
		}
		slot = c->nopen_slots++;
	}
	ot = &c->open[slot];
	memset(ot, 0, sizeof(*ot));
	ot->used = true;
	ot->trace = tr;
	ot->id = r->a[2];
	ot->parent = r->a[3];
	rec_str(ot->service, r->s0, sizeof(r->s0));
	rec_str(ot->name, r->s1, sizeof(r->s1));
	ot->start = (int64_t)r->time;
	ot->pid = r->pid;
	ot->tid = r->tid;
	ot->seq = ++c->seq;
	e = hmap_get(&c->open_ix, tr.hi, tr.lo, ot->id, &isnew);
	if (!e) {
		ot->used = false;
		c->free_slots[c->nfree++] = slot;
		return -ENOMEM;
	}
	e->v = slot;
	t->nopen++;
	/* the thread's innermost open task is now this one */
	top = hmap_get(&c->tid_top, r->pid, r->tid, 0, &isnew);
	if (top) {
		if (!isnew && top->v) {
			const struct open_task *prev = &c->open[top->v - 1];

			if (prev->used) {
				ot->prev_on_tid[0] = prev->trace.hi;
				ot->prev_on_tid[1] = prev->trace.lo;
				ot->prev_on_tid[2] = prev->id;
			}
		}
		top->v = slot + 1;
	}
	return c->nkpend ? kpend_resolve(c, ot) : 0;
}

static int on_end(struct graphcap *c, const struct weft_graph_rec *r)
{
	struct graph_id128 tr = { r->a[0], r->a[1] };
	struct hent *e = hmap_find(&c->open_ix, tr.hi, tr.lo, r->a[2]), *top;
	struct open_task *ot;
	struct ptrace *t;
	struct graph_task k = { 0 };
	int status = (int)r->a[3];

	if (!e) {
		c->st.end_without_begin++;
		return 0;
	}
	ot = &c->open[e->v];
	k.trace = tr;
	k.id = ot->id;
	k.parent = ot->parent;
	k.service = graph_strdup(&c->pend, ot->service);
	k.name = graph_strdup(&c->pend, ot->name);
	k.host = graph_strdup(&c->pend, c->host);
	k.pid = ot->pid;
	k.tid = ot->tid;
	k.start = to_real(c, (uint64_t)ot->start);
	k.end = to_real(c, r->time);
	if (k.end < k.start)
		k.end = k.start;
	k.status = status == 1 ? GRAPH_STATUS_OK :
		   status == 2 ? GRAPH_STATUS_ERROR :
				 GRAPH_STATUS_UNSET;
	k.source = GRAPH_SRC_WEFT;
	k.attrs = "{}";
	if (!k.service || !k.name || !k.host || !graph_add_task(&c->pend, &k))
		return -ENOMEM;
	/* the thread's innermost task goes back to the one open before it */
	top = hmap_find(&c->tid_top, (uint64_t)ot->pid, (uint64_t)ot->tid, 0);
	if (top && top->v == e->v + 1) {
		struct hent *prev = ot->prev_on_tid[2] ?
					    hmap_find(&c->open_ix, ot->prev_on_tid[0],
						      ot->prev_on_tid[1], ot->prev_on_tid[2]) :
					    NULL;

		if (prev)
			top->v = prev->v + 1;
		else
			hmap_del(&c->tid_top, top);
	}
	ot->used = false;
	c->free_slots[c->nfree++] = e->v;
	hmap_del(&c->open_ix, e);
	t = trace_get(c, tr, r->time, false);
	if (t && t->nopen)
		t->nopen--;
	return 0;
}

static int on_event(struct graphcap *c, const struct weft_graph_rec *r)
{
	struct graph_id128 tr = { r->a[0], r->a[1] };
	struct graph_event ev = { 0 };
	char name[WEFT_GREC_STR];

	if (!r->a[2])
		return -EINVAL;
	if (!trace_get(c, tr, r->time, false)) {
		c->st.orphans++; /* its trace never began here (or was drained) */
		return 0;
	}
	rec_str(name, r->s0, sizeof(r->s0));
	ev.trace = tr;
	ev.task = r->a[2];
	ev.time = to_real(c, r->time);
	ev.name = graph_strdup(&c->pend, name);
	ev.source = GRAPH_SRC_WEFT;
	ev.attrs = "{}";
	return ev.name && graph_add_event(&c->pend, &ev) ? 0 : -ENOMEM;
}

static int on_edge(struct graphcap *c, const struct weft_graph_rec *r)
{
	struct graph_id128 tr = { r->a[0], r->a[1] };
	struct graph_edge ed = { 0 };
	char kind[WEFT_GREC_STR];
	int k;

	rec_str(kind, r->s0, sizeof(r->s0));
	k = graph_edge_kind_parse(kind);
	if (k < 0 || !r->a[3] || !r->a[5])
		return -EINVAL;
	/* an edge may name a trace that only other hosts began: it opens the trace here */
	if (!trace_get(c, tr, r->time, true))
		return -ENOSPC;
	ed.trace = tr;
	ed.kind = (enum graph_edge_kind)k;
	ed.from_task = r->a[3];
	ed.from_event = r->a[4];
	ed.to_task = r->a[5];
	ed.to_event = r->a[6];
	ed.source = GRAPH_SRC_WEFT;
	return graph_add_edge(&c->pend, &ed) ? 0 : -ENOMEM;
}

static int on_span(struct graphcap *c, const struct weft_graph_rec *r)
{
	struct span_rec *s;
	struct hent *top;

	if (r->dur > r->time)
		return -EINVAL;
	if (c->nspans >= c->o.max_open) {
		c->st.open_evicted++; /* the span buffer is full: this span is lost */
		return 0;
	}
	if (c->nspans == c->cap_spans) {
		size_t ncap = c->cap_spans ? c->cap_spans * 2 : 64;
		struct span_rec *ns = realloc(c->spans, ncap * sizeof(*ns));

		if (!ns)
			return -ENOMEM;
		c->spans = ns;
		c->cap_spans = ncap;
	}
	s = &c->spans[c->nspans++];
	memset(s, 0, sizeof(*s));
	s->end = (int64_t)r->time;
	s->start = (int64_t)(r->time - r->dur);
	s->pid = r->pid;
	s->tid = r->tid;
	s->cookie = r->cookie;
	rec_str(s->comm, r->comm, sizeof(r->comm));
	top = hmap_find(&c->tid_top, r->pid, r->tid, 0);
	if (top && top->v && c->open[top->v - 1].used) {
		const struct open_task *ot = &c->open[top->v - 1];

		s->wtrace = ot->trace;
		s->wtask = ot->id;
		s->wstart = ot->start;
	}
	return 0;
}

/* Whether a and b are the same 4-tuple (seq_end and len aside). */
static bool kio_same_tuple(const struct kmsg_io *a, const struct kmsg_io *b)
{
	return a->laddr == b->laddr && a->raddr == b->raddr && a->lport == b->lport &&
	       a->rport == b->rport && a->v6 == b->v6 &&
	       (!a->v6 ||
		(memcmp(a->laddr6, b->laddr6, 16) == 0 && memcmp(a->raddr6, b->raddr6, 16) == 0));
}

/* The index in c->kctx of (sk, pid, tid) with this tuple and comm, made if new. */
static int kctx_get(struct graphcap *c, uint64_t sk, int64_t pid, int64_t tid,
		    const struct kmsg_io *io, const char *comm, uint32_t *ctx)
{
	uint32_t *last = &c->kctx_last[((sk >> 6) ^ (uint64_t)tid * 0x9e3779b1u) & 255];
	struct hent *e;
	struct kctx *x;
	bool isnew;

	if (*last) {
		x = &c->kctx[*last - 1];
		if (x->sk == sk && x->pid == pid && x->tid == tid && kio_same_tuple(&x->io, io) &&
		    strcmp(x->comm, comm) == 0) {
			*ctx = *last - 1;
			return 0;
		}
	}
	e = hmap_get(&c->kctx_ix, sk, (uint64_t)pid, (uint64_t)tid, &isnew);
	if (!e)
		return -ENOMEM;
	if (!isnew) {
		x = &c->kctx[e->v];
		if (kio_same_tuple(&x->io, io) && strcmp(x->comm, comm) == 0) {
			*ctx = (uint32_t)e->v;
			*last = *ctx + 1;
			return 0;
		}
	}
	if (c->nkctx >= UINT32_MAX ||
	    grow((void **)&c->kctx, &c->cap_kctx, c->nkctx + 1, sizeof(*c->kctx))) {
		if (isnew)
			hmap_del(&c->kctx_ix, e);
		return -ENOMEM;
	}
	x = &c->kctx[c->nkctx];
	x->sk = sk;
	x->pid = pid;
	x->tid = tid;
	x->io = *io;
	x->io.seq_end = x->io.len = 0;
	memcpy(x->comm, comm, sizeof(x->comm));
	e->v = c->nkctx;
	*ctx = (uint32_t)c->nkctx++;
	*last = *ctx + 1;
	return 0;
}

/* Call k's struct kmsg_io, whole. */
static struct kmsg_io kop_io(const struct graphcap *c, const struct kop *k)
{
	struct kmsg_io io = c->kctx[k->ctx].io;

	io.seq_end = k->seq_end;
	io.len = k->len;
	return io;
}

/* After a drain: c->kctx holds only what the held calls use, in their order, and the index
 * names for each (sk, pid, tid) its latest (the calls are in time order per thread and
 * socket).  -ENOMEM leaves everything as it was. */
static int kctx_compact(struct graphcap *c)
{
	struct kctx *nx = NULL;
	uint32_t *map = NULL;
	struct hmap ix = { 0 };
	size_t n = 0, cap = 0;

	if (c->nkctx && !(map = malloc(c->nkctx * sizeof(*map))))
		return -ENOMEM;
	for (size_t i = 0; i < c->nkctx; i++)
		map[i] = UINT32_MAX;
	for (size_t i = 0; i < c->nkops; i++) {
		const struct kctx *x = &c->kctx[c->kops[i].ctx];
		struct hent *e;
		bool isnew;

		if (map[c->kops[i].ctx] != UINT32_MAX)
			continue;
		if (grow((void **)&nx, &cap, n + 1, sizeof(*nx)))
			goto fail;
		nx[n] = *x;
		map[c->kops[i].ctx] = (uint32_t)n;
		/* a later one of the same (sk, pid, tid) comes after it, and replaces it */
		e = hmap_get(&ix, x->sk, (uint64_t)x->pid, (uint64_t)x->tid, &isnew);
		if (!e)
			goto fail;
		e->v = n++;
	}
	for (size_t i = 0; i < c->nkops; i++)
		c->kops[i].ctx = map[c->kops[i].ctx];
	free(map);
	free(c->kctx);
	hmap_free(&c->kctx_ix);
	c->kctx = nx;
	c->nkctx = n;
	c->cap_kctx = cap;
	c->kctx_ix = ix;
	memset(c->kctx_last, 0, sizeof(c->kctx_last)); /* the indices changed */
	return 0;
fail:
	free(map);
	free(nx);
	hmap_free(&ix);
	return -ENOMEM;
}

static int on_kop(struct graphcap *c, const struct weft_graph_rec *r)
{
	struct kop *k;
	struct kmsg_io io;
	char comm[16];
	uint32_t ctx;
	int rc;

	if (!r->a[6] || !r->a[5] || r->a[5] > UINT32_MAX || r->a[2] > UINT16_MAX ||
	    r->a[3] > UINT16_MAX || r->a[0] > UINT32_MAX || r->a[1] > UINT32_MAX ||
	    r->a[4] > UINT32_MAX ||
	    (r->family && r->family != WEFT_AF_INET && r->family != WEFT_AF_INET6))
		return -EINVAL;
	if (c->nkops >= (size_t)c->o.max_open * GRAPHCAP_KOPS_PER_OPEN) {
		c->st.open_evicted++; /* the buffer is full: this send or receive is lost */
		return 0;
	}
	if (c->nkops == c->cap_kops) {
		size_t ncap = c->cap_kops ? c->cap_kops * 2 : 256;
		struct kop *nk = realloc(c->kops, ncap * sizeof(*nk));

		if (!nk)
			return -ENOMEM;
		c->kops = nk;
		c->cap_kops = ncap;
	}
	memset(&io, 0, sizeof(io));
	io.laddr = (uint32_t)r->a[0];
	io.raddr = (uint32_t)r->a[1];
	io.lport = (uint16_t)r->a[2];
	io.rport = (uint16_t)r->a[3];
	if (r->family == WEFT_AF_INET6) /* v4-mapped ones become IPv4 there (graph/kmsg.h) */
		kmsg_io_set6(&io, r->in6, r->in6 + 16);
	memset(comm, 0, sizeof(comm));
	rec_str(comm, r->comm, sizeof(r->comm));
	if ((rc = kctx_get(c, r->a[6], r->pid, r->tid, &io, comm, &ctx)))
		return rc;
	k = &c->kops[c->nkops++];
	memset(k, 0, sizeof(*k));
	k->time = (int64_t)r->time;
	k->pid = r->pid;
	k->tid = r->tid;
	k->sk = r->a[6];
	k->send = r->kind == WEFT_GREC_KSEND;
	k->seq_end = (uint32_t)r->a[4];
	k->len = (uint32_t)r->a[5];
	k->ctx = ctx;
	return 0;
}

/* ------------------------------------------------------ kernel:sched and kernel:process */

/*
 * Wakeups, forks, execs and exits (docs/graphs.md, "Scheduler and process edges").  The task
 * of a thread at a moment is the innermost weft task (weft/trace.h) open on it then
 * (tid_top).  A wakeup or fork is an edge from the task of the waker (the parent) to the task
 * of the woken thread (the child): the one open on it at that moment, else the next one it
 * begins; such a wait is kept in a bounded table (max_open entries; a full table counts the
 * loss in kernel_pending_full) and forgotten when the thread exits.  An edge joins two tasks
 * of one trace: ends in different traces make no edge and are counted (kernel_unowned).  A
 * cause whose waker has no weft task open is buffered (kw) for the drain, where its waker's
 * span or kernel task and its woken thread's span are known (spans_drain, below); with none,
 * it is counted there.  exec and exit are events of the thread's open task, exec's with
 * the file executed ({"filename": ...}); an exit then ends the tasks still open on its thread
 * (innermost first, status unset), which no one else could end.
 */
static const struct open_task *tid_open(const struct graphcap *c, int64_t pid, int64_t tid)
{
	const struct hent *top = hmap_find(&c->tid_top, (uint64_t)pid, (uint64_t)tid, 0);

	if (!top || !top->v || !c->open[top->v - 1].used)
		return NULL;
	return &c->open[top->v - 1];
}

/* The open task of a thread known by its tid alone (the tracepoints name no process). */
static const struct open_task *tid_open_any(const struct graphcap *c, int64_t tid)
{
	for (size_t i = 0; i < c->nopen_slots; i++)
		if (c->open[i].used && c->open[i].tid == tid) {
			const struct open_task *ot = tid_open(c, c->open[i].pid, tid);

			if (ot)
				return ot;
		}
	return NULL;
}

static int kedge_add(struct graphcap *c, enum graph_edge_kind kind, struct graph_id128 trace,
		     uint64_t from, const struct open_task *to)
{
	struct graph_edge ed = { 0 };

	if (to->trace.hi != trace.hi || to->trace.lo != trace.lo || to->id == from) {
		c->st.kernel_unowned++;
		return 0;
	}
	ed.trace = trace;
	ed.kind = kind;
	ed.from_task = from;
	ed.to_task = to->id;
	ed.source = GRAPH_SRC_KERNEL;
	return graph_add_edge(&c->pend, &ed) ? 0 : -ENOMEM;
}

static int kpend_resolve(struct graphcap *c, const struct open_task *ot)
{
	size_t i = 0;
	int rc = 0;

	while (i < c->nkpend) {
		struct kpend *k = &c->kpend[i];

		if (k->tid != ot->tid) {
			i++;
			continue;
		}
		if (!rc)
			rc = kedge_add(c, k->kind, k->trace, k->from, ot);
		*k = c->kpend[--c->nkpend];
	}
	return rc;
}

static void kpend_forget(struct graphcap *c, int64_t tid)
{
	size_t i = 0;

	while (i < c->nkpend)
		if (c->kpend[i].tid == tid)
			c->kpend[i] = c->kpend[--c->nkpend];
		else
			i++;
}

static int on_kcause(struct graphcap *c, const struct weft_graph_rec *r)
{
	const struct open_task *from, *to;
	int64_t tid = (int64_t)r->a[0];
	struct kpend *k;

	if (!r->a[0] || r->a[0] > INT32_MAX)
		return -EINVAL;
	from = tid_open(c, r->pid, r->tid);
	if (tid == (int64_t)r->tid) {
		c->st.kernel_unowned++;
		return 0;
	}
	if (!from) {
		/* the waker may lie in a kernel or span task: known at the drain */
		struct kwake *w;

		if (c->nkw >= c->o.max_open) {
			c->st.kernel_pending_full++;
			return 0;
		}
		if (grow((void **)&c->kw, &c->cap_kw, c->nkw + 1, sizeof(*c->kw)))
			return -ENOMEM;
		w = &c->kw[c->nkw++];
		*w = (struct kwake){ (int64_t)r->time,
				     r->pid,
				     r->tid,
				     tid,
				     r->kind == WEFT_GREC_KFORK ? GRAPH_EDGE_FORK :
								  GRAPH_EDGE_WAKEUP,
				     false };
		return 0;
	}
	to = tid_open_any(c, tid);
	if (to)
		return kedge_add(c,
				 r->kind == WEFT_GREC_KFORK ? GRAPH_EDGE_FORK : GRAPH_EDGE_WAKEUP,
				 from->trace, from->id, to);
	if (c->nkpend >= c->o.max_open) {
		c->st.kernel_pending_full++;
		return 0;
	}
	if (grow((void **)&c->kpend, &c->cap_kpend, c->nkpend + 1, sizeof(*c->kpend)))
		return -ENOMEM;
	k = &c->kpend[c->nkpend++];
	k->tid = tid;
	k->kind = r->kind == WEFT_GREC_KFORK ? GRAPH_EDGE_FORK : GRAPH_EDGE_WAKEUP;
	k->trace = from->trace;
	k->from = from->id;
	return 0;
}

static int on_kproc_event(struct graphcap *c, const struct weft_graph_rec *r)
{
	const struct open_task *ot = tid_open(c, r->pid, r->tid);
	struct graph_event ev = { 0 };
	char file[WEFT_GREC_STR];

	if (r->kind == WEFT_GREC_KEXIT)
		kpend_forget(c, r->tid);
	if (!ot) {
		c->st.kernel_unowned++;
		return 0;
	}
	ev.trace = ot->trace;
	ev.task = ot->id;
	ev.time = to_real(c, r->time);
	ev.source = GRAPH_SRC_KERNEL;
	ev.attrs = "{}";
	if (r->kind == WEFT_GREC_KEXEC) {
		json_t *o;
		char *txt;

		rec_str(file, r->s0, sizeof(r->s0));
		o = json_pack("{s:s}", "filename", file);
		if (!o)
			return -EINVAL; /* not UTF-8: counted in bad */
		txt = json_dumps(o, JSON_COMPACT);
		json_decref(o);
		if (!txt)
			return -ENOMEM;
		ev.attrs = graph_strdup(&c->pend, txt);
		free(txt);
		if (!ev.attrs)
			return -ENOMEM;
	}
	ev.name = r->kind == WEFT_GREC_KEXEC ? "exec" : "exit";
	if (!graph_add_event(&c->pend, &ev))
		return -ENOMEM;
	if (r->kind != WEFT_GREC_KEXIT)
		return 0;
	/* an exiting thread ends no task any more: its open ones end here, status unset */
	for (int n = 0; n < WEFT_GREC_STR && (ot = tid_open(c, r->pid, r->tid)); n++) {
		struct weft_graph_rec end = { .time = r->time, .pid = r->pid, .tid = r->tid };
		int rc;

		end.kind = WEFT_GREC_TASK_END;
		end.a[0] = ot->trace.hi;
		end.a[1] = ot->trace.lo;
		end.a[2] = ot->id;
		rc = on_end(c, &end);
		if (rc)
			return rc;
	}
	return 0;
}

int graphcap_record(struct graphcap *c, const void *rec, size_t len)
{
	struct weft_graph_rec r;
	int rc;

	c->st.records++;
	if (len < WEFT_GREC_SHORT) {
		c->st.bad++;
		return -EINVAL;
	}
	/* a short record (kernel sockets) has no strings: they read as empty */
	memset(r.s0, 0, sizeof(r.s0) + sizeof(r.s1));
	memcpy(&r, rec, len < sizeof(r) ? len : sizeof(r));
	if (r.time > c->newest)
		c->newest = r.time;
	switch (r.kind) {
	case WEFT_GREC_TASK_BEGIN:
		rc = on_begin(c, &r);
		break;
	case WEFT_GREC_TASK_END:
		rc = on_end(c, &r);
		break;
	case WEFT_GREC_EVENT:
		rc = on_event(c, &r);
		break;
	case WEFT_GREC_EDGE:
		rc = on_edge(c, &r);
		break;
	case WEFT_GREC_SPAN:
		rc = on_span(c, &r);
		break;
	case WEFT_GREC_KSEND:
	case WEFT_GREC_KRECV:
		rc = on_kop(c, &r);
		break;
	case WEFT_GREC_KWAKE:
	case WEFT_GREC_KFORK:
		rc = on_kcause(c, &r);
		break;
	case WEFT_GREC_KEXEC:
	case WEFT_GREC_KEXIT:
		rc = on_kproc_event(c, &r);
		break;
	default:
		rc = -EINVAL;
	}
	if (rc == -EINVAL || rc == -ENOSPC)
		c->st.bad++;
	return rc == -ENOSPC ? 0 : rc;
}

/* ---------------------------------------------------------------- kernel:sockets into tasks */

/*
 * The sends and receives of kernel:sockets (docs/graphs.md, "Kernel edges").  Per thread and
 * socket, an exchange is a run of ops in one direction followed by a run in the other: on a
 * server, receives (the request) then sends (the reply); on a client, sends then receives.
 * The next op in the first direction begins the next exchange.  Each exchange is a task of
 * its thread: a server's joins the trace of the task whose send it received first (matched
 * by graph/kmsg.c: mirrored 4-tuple, overlapping bytes of the stream), with a message edge
 * from it; a client's is the child of the server task it runs in on the same thread (a tier
 * calling the next one), else the root of a trace of its own.  An exchange is complete when
 * its last op is GRAPHCAP_SPAN_HOLD_NS older than the newest record, or than the clock for a
 * live capture (live_clock: a host gone idle), or at the end: the spans of its thread nest
 * inside it then, as they end before it does.
 */
#define KSENT_KEEP_NS (10 * GRAPHCAP_SPAN_HOLD_NS) /* sends of emitted tasks kept to match */

struct kex {
	size_t first, end; /* its ops: [first, end) of c->kops, sorted */
	bool server, complete;
	size_t as; /* index into c->kas */
	size_t encl; /* client: the server exchange it runs in + 1, or 0 */
	ssize_t sender; /* server: the send that its first receive matched (index), or -1 */
};

static int kop_cmp(const void *pa, const void *pb)
{
	const struct kop *a = pa, *b = pb;

	if (a->pid != b->pid)
		return a->pid < b->pid ? -1 : 1;
	if (a->tid != b->tid)
		return a->tid < b->tid ? -1 : 1;
	if (a->sk != b->sk)
		return a->sk < b->sk ? -1 : 1;
	return (a->time > b->time) - (a->time < b->time);
}

/* A (time, position) pair: a thread's calls on a socket that came out of time order. */
struct tpos {
	int64_t time;
	size_t pos;
};

static int tpos_cmp(const void *pa, const void *pb)
{
	const struct tpos *a = pa, *b = pb;

	if (a->time != b->time)
		return a->time < b->time ? -1 : 1;
	return (a->pos > b->pos) - (a->pos < b->pos);
}

/* A thread's socket among the buffered calls: its key, its calls' count and place. */
struct kgroup {
	int64_t pid, tid;
	uint64_t sk;
	size_t n, at, rank;
};

static int kgroup_cmp(const void *pa, const void *pb)
{
	const struct kgroup *a = pa, *b = pb;

	if (a->pid != b->pid)
		return a->pid < b->pid ? -1 : 1;
	if (a->tid != b->tid)
		return a->tid < b->tid ? -1 : 1;
	return (a->sk > b->sk) - (a->sk < b->sk);
}

/*
 * The buffered calls in kop_cmp() order, ties in the order they came (as the stable sort
 * they had): grouped by thread and socket with a counting sort, and a group sorted by time
 * only when its calls came out of order (they come in time order but for another CPU's
 * records now and then).  Not a comparison sort of every call: the calls held over from the
 * last drain are in order already, and a thread's calls in the order they came.
 */
static int kops_sort(struct graphcap *c)
{
	size_t n = c->nkops, ng = 0, capg = 0, *grp = malloc((n + 1) * sizeof(*grp)), *rank = NULL;
	struct kop *out = malloc(c->cap_kops * sizeof(*out));
	struct kgroup *g = NULL, *sorted = NULL;
	struct hmap m = { 0 };
	int rc = -ENOMEM;

	if (!grp || !out)
		goto out;
	for (size_t i = 0; i < n; i++) {
		const struct kop *k = &c->kops[i];
		bool isnew;
		struct hent *e = hmap_get(&m, (uint64_t)k->pid, (uint64_t)k->tid, k->sk, &isnew);

		if (!e)
			goto out;
		if (isnew) {
			if (grow((void **)&g, &capg, ng + 1, sizeof(*g)))
				goto out;
			g[ng] = (struct kgroup){ .pid = k->pid, .tid = k->tid, .sk = k->sk };
			e->v = ng++;
		}
		grp[i] = e->v;
		g[e->v].n++;
	}
	sorted = malloc((ng + 1) * sizeof(*sorted));
	rank = malloc((ng + 1) * sizeof(*rank));
	if (!sorted || !rank)
		goto out;
	for (size_t i = 0; i < ng; i++) {
		sorted[i] = g[i];
		sorted[i].rank = i; /* its index in g, while sorted[] is sorted */
	}
	qsort(sorted, ng, sizeof(*sorted), kgroup_cmp);
	for (size_t i = 0, at = 0; i < ng; i++) {
		g[sorted[i].rank].at = at;
		rank[sorted[i].rank] = at;
		at += sorted[i].n;
	}
	for (size_t i = 0; i < n; i++)
		out[g[grp[i]].at++] = c->kops[i];
	/* each group in time order (rank[]: where it starts) */
	for (size_t x = 0; x < ng; x++) {
		size_t a = rank[x], b = a + g[x].n, i;
		struct tpos *tp;
		struct kop *tmp;

		for (i = a + 1; i < b && out[i].time >= out[i - 1].time; i++)
			;
		if (i >= b)
			continue;
		tp = malloc((b - a) * sizeof(*tp));
		tmp = malloc((b - a) * sizeof(*tmp));
		if (!tp || !tmp) {
			free(tp);
			free(tmp);
			goto out;
		}
		for (i = a; i < b; i++)
			tp[i - a] = (struct tpos){ out[i].time, i };
		qsort(tp, b - a, sizeof(*tp), tpos_cmp);
		for (i = a; i < b; i++)
			tmp[i - a] = out[tp[i - a].pos];
		memcpy(out + a, tmp, (b - a) * sizeof(*tmp));
		free(tp);
		free(tmp);
	}
	free(c->kops);
	c->kops = out;
	out = NULL;
	rc = 0;
out:
	hmap_free(&m);
	free(grp);
	free(rank);
	free(g);
	free(sorted);
	free(out);
	return rc;
}

static int ktask_cmp(const void *pa, const void *pb)
{
	const struct ktask *a = pa, *b = pb;

	if (a->pid != b->pid)
		return a->pid < b->pid ? -1 : 1;
	if (a->tid != b->tid)
		return a->tid < b->tid ? -1 : 1;
	return (a->start > b->start) - (a->start < b->start);
}

static bool kop_same_thread(const struct kop *a, const struct kop *b)
{
	return a->pid == b->pid && a->tid == b->tid;
}

static int grow(void **v, size_t *cap, size_t need, size_t elsz)
{
	size_t ncap = *cap ? *cap : 64;
	void *nv;

	if (need <= *cap)
		return 0;
	while (ncap < need)
		ncap *= 2;
	nv = realloc(*v, ncap * elsz);
	if (!nv)
		return -ENOMEM;
	*v = nv;
	*cap = ncap;
	return 0;
}

/*
 * A trace id made here for a trace that starts at mono: the high half is the start's second
 * (wall clock) above 32 bits of the instance, the low half a made id (unique per instance,
 * random-looking: samplers that read the low bits as randomness, as OpenTelemetry's do, stay
 * fair).  Time first, as in UUIDv7: a store's unique index on the trace id then takes a
 * second's new traces at one end, a few pages, instead of at random places across the whole
 * index, whose every page a put would otherwise rewrite once the store has grown (the cost of
 * a put grew with the store's size: `bench_graphcap -n 4000000`, docs/performance.md).
 */
static struct graph_id128 new_trace(struct graphcap *c, uint64_t mono)
{
	int64_t real = to_real(c, mono);
	uint64_t sec = real > 0 ? (uint64_t)real / 1000000000u : 0;
	struct graph_id128 t = { sec << 32 | (uint32_t)mix64(c->o.instance), make_id(c) };

	return t;
}

static bool trace_set(struct graph_id128 t)
{
	return t.hi || t.lo;
}

/* One send or receive as the attributes' array [laddr, lport, raddr, rport, seq_end, len]:
 * IPv4 addresses as numbers (host order), IPv6 ones as their RFC 5952 text (inet_ntop(): hex
 * digits, ':' and '.', nothing to escape). */
/* v in decimal at p (no NUL): its length, 10 at most.  What snprintf("%u") writes, without
 * its cost: a kernel task's name and attributes are written once per task. */
static size_t put_u32(char *p, uint32_t v)
{
	static const char pairs[] = "00010203040506070809101112131415161718192021222324"
				    "25262728293031323334353637383940414243444546474849"
				    "50515253545556575859606162636465666768697071727374"
				    "75767778798081828384858687888990919293949596979899";
	size_t n = 1;
	char *q;

	for (uint32_t t = v; t >= 10; t /= 10)
		n++;
	q = p + n;
	for (; v >= 100; v /= 100) { /* two digits at a time, from the last */
		q -= 2;
		memcpy(q, pairs + 2 * (v % 100), 2);
	}
	if (v >= 10)
		memcpy(q - 2, pairs + 2 * v, 2);
	else
		q[-1] = (char)('0' + v);
	return n;
}

static size_t kio_json(char *buf, size_t sz, const struct kmsg_io *io)
{
	char la[KMSG_ADDR_TEXT], ra[KMSG_ADDR_TEXT];
	int n;

	if (!io->v6) { /* "[%u,%u,%u,%u,%u,%u]" */
		const uint32_t v[6] = { io->laddr, io->lport,	io->raddr,
					io->rport, io->seq_end, io->len };
		char t[6 * 11 + 2];
		size_t k = 0;

		for (int i = 0; i < 6; i++) {
			t[k++] = i ? ',' : '[';
			k += put_u32(t + k, v[i]);
		}
		t[k++] = ']';
		if (k >= sz)
			return 0;
		memcpy(buf, t, k);
		buf[k] = 0;
		return k;
	}
	if (io->v6)
		n = snprintf(buf, sz, "[\"%s\",%u,\"%s\",%u,%u,%u]",
			     kmsg_addr_text(io, false, la, sizeof(la)), (unsigned)io->lport,
			     kmsg_addr_text(io, true, ra, sizeof(ra)), (unsigned)io->rport,
			     (unsigned)io->seq_end, (unsigned)io->len);
	else
		n = snprintf(buf, sz, "[%u,%u,%u,%u,%u,%u]", (unsigned)io->laddr,
			     (unsigned)io->lport, (unsigned)io->raddr, (unsigned)io->rport,
			     (unsigned)io->seq_end, (unsigned)io->len);
	return n < 0 || (size_t)n >= sz ? 0 : (size_t)n;
}

/* A string of g (the field's cache: struct str_cache), copied only when not there. */
static const char *cached_str(struct graph *g, struct str_cache *sc, int field, const char *s)
{
	const char **c = sc->s[field];
	const char *p;

	for (int i = 0; i < STR_CACHE && c[i]; i++)
		if (strcmp(c[i], s) == 0)
			return c[i];
	if ((p = graph_strdup(g, s)) && strcmp(p, s) == 0) /* as given: the same text again */
		c[sc->next[field]++ % STR_CACHE] = p;
	return p;
}

/*
 * The socket data a kernel task ships for matching on another host (docs/graphs.md, "Across
 * hosts"): a server task its first receive ("kernel.recv"), a client task its first
 * KEX_ATTR_SENDS sends ("kernel.sends"); numbers only, so written here, not parsed.  Into
 * c->pend's arena; NULL when out of memory.
 */
#define KEX_ATTR_SENDS 8
static const char *kex_attrs(struct graphcap *c, const struct kex *x)
{
	char buf[64 + KEX_ATTR_SENDS * (72 + 2 * KMSG_ADDR_TEXT)];
	size_t n = 0, ns = 0;

	if (x->server) {
		struct kmsg_io io = kop_io(c, &c->kops[x->first]);

		n = strlen(strcpy(buf, "{\"kernel.recv\":"));
		n += kio_json(buf + n, sizeof(buf) - n, &io);
		buf[n++] = '}';
		buf[n] = 0;
		return graph_strndup(&c->pend, buf, n);
	}
	n = strlen(strcpy(buf, "{\"kernel.sends\":["));
	for (size_t i = x->first; i < x->end && ns < KEX_ATTR_SENDS; i++) {
		struct kmsg_io io;

		if (!c->kops[i].send)
			continue;
		if (ns++)
			buf[n++] = ',';
		io = kop_io(c, &c->kops[i]);
		n += kio_json(buf + n, sizeof(buf) - n, &io);
	}
	buf[n++] = ']';
	buf[n++] = '}';
	buf[n] = 0;
	return graph_strndup(&c->pend, buf, n);
}

/* The kernel task of an exchange into c->pend (and its edges), remembered for spans and
 * its sends for later receives. */
/* The remembered kernel tasks that ended two span holds before the newest record go (their
 * spans have all come: a span is held at most one hold); the order of the rest is kept. */
static void ktasks_make_room(struct graphcap *c)
{
	uint64_t min_end = UINT64_MAX;
	size_t w = 0;

	/* nothing to take (a full table of recent tasks): no pass over it, once per task */
	if (c->ktasks_min_end == UINT64_MAX ||
	    c->ktasks_min_end + 2 * GRAPHCAP_SPAN_HOLD_NS > c->newest)
		return;
	for (size_t i = 0; i < c->nktasks; i++)
		if ((uint64_t)c->ktasks[i].end + 2 * GRAPHCAP_SPAN_HOLD_NS > c->newest) {
			if ((uint64_t)c->ktasks[i].end < min_end)
				min_end = (uint64_t)c->ktasks[i].end;
			c->ktasks[w++] = c->ktasks[i];
		}
	c->nktasks = w;
	c->ktasks_min_end = min_end;
}

/* The remembered sends are full: the older half goes (in the order they were remembered,
 * which is the order of the drains that emitted them), so that a late receive finds the
 * newest sends rather than none of those sent after the table filled.  No drain's match
 * indexes them by then: kex_emit() runs after the traces are resolved. */
static void ksent_make_room(struct graphcap *c)
{
	size_t drop = (c->nksent + 1) / 2;

	memmove(c->ksent, c->ksent + drop, (c->nksent - drop) * sizeof(*c->ksent));
	c->nksent -= drop;
}

static int kex_emit(struct graphcap *c, const struct kex *x)
{
	const struct kop *f = &c->kops[x->first], *l = &c->kops[x->end - 1];
	const struct kctx *fx = &c->kctx[f->ctx];
	const struct kassign *as = &c->kas[x->as];
	struct graph_task k = { 0 };
	char name[32 + KMSG_ADDR_TEXT], ra[KMSG_ADDR_TEXT];
	struct ktask *kt;

	if (x->server) { /* "serve :%u" */
		size_t n = strlen(strcpy(name, "serve :"));

		name[n + put_u32(name + n, fx->io.lport)] = 0;
	} else if (!fx->io.v6) { /* "request %s:%u", the address as kmsg_addr_text() writes it */
		size_t n = strlen(strcpy(name, "request "));

		for (int i = 3; i >= 0; i--) {
			n += put_u32(name + n, (fx->io.raddr >> (8 * i)) & 255);
			name[n++] = i ? '.' : ':';
		}
		name[n + put_u32(name + n, fx->io.rport)] = 0;
	} else { /* "request [2001:db8::1]:6379" */
		snprintf(name, sizeof(name), "request [%s]:%u",
			 kmsg_addr_text(&fx->io, true, ra, sizeof(ra)), (unsigned)fx->io.rport);
	}
	k.trace = as->trace;
	k.id = as->id;
	k.parent = as->parent;
	k.service = cached_str(&c->pend, &c->pend_strs, 0, fx->comm);
	k.name = cached_str(&c->pend, &c->pend_strs, 1, name);
	k.host = cached_str(&c->pend, &c->pend_strs, 2, c->host);
	k.pid = f->pid;
	k.tid = f->tid;
	k.start = to_real(c, (uint64_t)f->time);
	k.end = to_real(c, (uint64_t)l->time);
	k.status = GRAPH_STATUS_UNSET;
	k.source = GRAPH_SRC_KERNEL;
	k.attrs = kex_attrs(c, x);
	if (!k.service || !k.name || !k.host || !k.attrs || !graph_add_task(&c->pend, &k))
		return -ENOMEM;
	if (as->parent) {
		struct graph_edge ed = { .trace = k.trace,
					 .kind = GRAPH_EDGE_PARENT,
					 .from_task = as->parent,
					 .to_task = k.id,
					 .source = GRAPH_SRC_KERNEL };

		if (!graph_add_edge(&c->pend, &ed))
			return -ENOMEM;
	}
	if (as->from) {
		struct graph_edge ed = { .trace = k.trace,
					 .kind = GRAPH_EDGE_MESSAGE,
					 .from_task = as->from,
					 .to_task = k.id,
					 .source = GRAPH_SRC_KERNEL };

		if (!graph_add_edge(&c->pend, &ed))
			return -ENOMEM;
	}
	if (!trace_get(c, k.trace, (uint64_t)f->time, true))
		c->st.bad++; /* the trace table is full: drained by age */
	/* remembered for the spans of its thread, as many as open tasks at most: past that, the
	 * oldest make room if no span can still be waiting for them (ended two span holds
	 * before the newest record: a busy host fills the table long before KSENT_KEEP_NS), and
	 * only then a task is not remembered: a span inside it stays a root, counted when a span
	 * of that time finds no kernel task (kforgot; not here: without spans nothing is lost) */
	if (c->nktasks >= c->o.max_open)
		ktasks_make_room(c);
	if (c->nktasks < c->o.max_open) {
		if (grow((void **)&c->ktasks, &c->cap_ktasks, c->nktasks + 1, sizeof(*c->ktasks)))
			return -ENOMEM;
		kt = &c->ktasks[c->nktasks++];
		*kt = (struct ktask){ f->pid, f->tid, f->time, l->time, k.id, k.trace };
		if ((uint64_t)l->time < c->ktasks_min_end)
			c->ktasks_min_end = (uint64_t)l->time;
	} else {
		if (!c->kforgot || f->time < c->kforgot_from)
			c->kforgot_from = f->time;
		if (!c->kforgot || l->time > c->kforgot_to)
			c->kforgot_to = l->time;
		c->kforgot = true;
	}
	for (size_t i = x->first; i < x->end; i++) {
		if (!c->kops[i].send)
			continue;
		if (c->nksent >= c->o.max_open)
			ksent_make_room(c);
		if (grow((void **)&c->ksent, &c->cap_ksent, c->nksent + 1, sizeof(*c->ksent)))
			return -ENOMEM;
		c->ksent[c->nksent++] =
			(struct ksent){ kop_io(c, &c->kops[i]), c->kops[i].time, k.id, k.trace };
	}
	return 0;
}

/* Drops remembered sends and kernel tasks older than KSENT_KEEP_NS (all of them at the end). */
static void ksock_prune(struct graphcap *c, bool final)
{
	size_t w = 0;

	for (size_t i = 0; i < c->nksent; i++)
		if (!final && (uint64_t)c->ksent[i].time + KSENT_KEEP_NS > c->newest)
			c->ksent[w++] = c->ksent[i];
	c->nksent = w;
	w = 0;
	c->ktasks_min_end = UINT64_MAX;
	for (size_t i = 0; i < c->nktasks; i++)
		if (!final && (uint64_t)c->ktasks[i].end + KSENT_KEEP_NS > c->newest) {
			if ((uint64_t)c->ktasks[i].end < c->ktasks_min_end)
				c->ktasks_min_end = (uint64_t)c->ktasks[i].end;
			c->ktasks[w++] = c->ktasks[i];
		}
	c->nktasks = w;
	if (c->kforgot && (final || (uint64_t)c->kforgot_to + KSENT_KEEP_NS <= c->newest))
		c->kforgot = false;
	w = 0;
	for (size_t i = 0; i < c->nstasks; i++)
		if (!final && (uint64_t)c->stasks[i].end + KSENT_KEEP_NS > c->newest)
			c->stasks[w++] = c->stasks[i];
	c->nstasks = w;
}

static int ksock_drain(struct graphcap *c, bool final)
{
	int64_t cutoff = final ? INT64_MAX : (int64_t)c->newest - (int64_t)GRAPHCAP_SPAN_HOLD_NS;
	struct kex *xs = NULL;
	size_t nx = 0, capx = 0, nsends = 0, *opx = NULL;
	struct kmsg_io *sends = NULL, *recvs = NULL;
	size_t *send_op = NULL, *recv_x = NULL, nrecvs = 0;
	struct kmsg_match *m = NULL;
	size_t nm = 0;
	struct hmap nkix = { 0 };
	struct kassign *nkas = NULL;
	size_t nnkas = 0, capnkas = 0, w = 0;
	int rc = 0;

	for (size_t i = 0; i < c->ntr; i++)
		c->tr[i].kheld = 0;
	ksock_prune(c, false);
	hmap_free(&c->tid_khold);
	c->nkheldx = 0;
	if (!c->nkops)
		goto sort_tasks;
	if ((rc = kops_sort(c)))
		goto out;
	opx = malloc(c->nkops * sizeof(*opx));
	/* at most an exchange per op (the tables of exchanges are sized once their number is
	 * known: a table is cleared when made, and a second's worth of ops is large) */
	if (!opx || grow((void **)&xs, &capx, c->nkops, sizeof(*xs)) ||
	    grow((void **)&c->kas, &c->cap_kas, c->nkas + c->nkops, sizeof(*c->kas))) {
		rc = -ENOMEM;
		goto out;
	}
	/* the exchanges */
	for (size_t i = 0; i < c->nkops;) {
		size_t j = i;
		bool dir0 = c->kops[i].send;
		struct kex *x;

		while (j < c->nkops && kop_cmp(&c->kops[j], &c->kops[i]) >= 0 &&
		       c->kops[j].sk == c->kops[i].sk &&
		       kop_same_thread(&c->kops[j], &c->kops[i]) && c->kops[j].send == dir0)
			j++;
		while (j < c->nkops && c->kops[j].sk == c->kops[i].sk &&
		       kop_same_thread(&c->kops[j], &c->kops[i]) && c->kops[j].send != dir0)
			j++;
		if ((rc = grow((void **)&xs, &capx, nx + 1, sizeof(*xs))))
			goto out;
		x = &xs[nx];
		memset(x, 0, sizeof(*x));
		x->first = i;
		x->end = j;
		x->server = !dir0;
		x->complete = final || c->kops[j - 1].time < cutoff;
		x->sender = -1;
		for (size_t k = i; k < j; k++)
			opx[k] = nx;
		nx++;
		i = j;
	}
	/* each an assignment, in the exchanges' order: an exchange that waited in the drain
	 * before keeps its own (kix holds only those), any other gets a new one, not entered in
	 * kix (the table of the waiting ones is made anew below; entering the complete ones too,
	 * each a cache miss in a table grown for all of them, was ~5 % of the capture's CPU in
	 * bench_graphcap) */
	for (size_t i = 0; i < nx; i++) {
		const struct kop *f = &c->kops[xs[i].first];
		const struct hent *e =
			hmap_find(&c->kix, ((uint64_t)f->pid << 32) | (uint32_t)f->tid, f->sk,
				  (uint64_t)f->time);

		if (e && e->v) {
			xs[i].as = e->v - 1;
			continue;
		}
		if ((rc = grow((void **)&c->kas, &c->cap_kas, c->nkas + 1, sizeof(*c->kas))))
			goto out;
		c->kas[c->nkas] = (struct kassign){ .id = make_id(c), .used = true };
		xs[i].as = c->nkas++;
	}
	/* message matches: every buffered or remembered send against first receives */
	sends = malloc((c->nkops + c->nksent + 1) * sizeof(*sends));
	send_op = malloc((c->nkops + c->nksent + 1) * sizeof(*send_op));
	recvs = malloc((nx + 1) * sizeof(*recvs));
	recv_x = malloc((nx + 1) * sizeof(*recv_x));
	if (!sends || !send_op || !recvs || !recv_x) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < c->nkops; i++)
		if (c->kops[i].send) {
			send_op[nsends] = i;
			sends[nsends++] = kop_io(c, &c->kops[i]);
		}
	for (size_t i = 0; i < c->nksent; i++) {
		send_op[nsends] = SIZE_MAX;
		sends[nsends++] = c->ksent[i].io;
	}
	for (size_t i = 0; i < nx; i++)
		if (xs[i].server && !trace_set(c->kas[xs[i].as].trace)) {
			recv_x[nrecvs] = i;
			recvs[nrecvs++] = kop_io(c, &c->kops[xs[i].first]);
		}
	if ((rc = kmsg_match(sends, nsends, recvs, nrecvs, &m, &nm)))
		goto out;
	for (size_t i = 0; i < nm; i++) {
		struct kex *x = &xs[recv_x[m[i].recv]];

		if (x->sender < 0)
			x->sender = (ssize_t)m[i].send;
	}
	/* a client exchange inside a server exchange of its thread: the latest one begun
	 * before it that had not replied yet when it began */
	for (size_t i = 0; i < nx;) {
		size_t j = i;
		bool any_server = false;

		while (j < nx && kop_same_thread(&c->kops[xs[j].first], &c->kops[xs[i].first])) {
			any_server |= xs[j].server;
			j++;
		}
		for (size_t a = i; a < j && any_server; a++) {
			int64_t t0 = c->kops[xs[a].first].time, best = INT64_MIN;

			if (xs[a].server)
				continue;
			for (size_t b = i; b < j; b++) {
				const struct kex *s = &xs[b];
				int64_t st = c->kops[s->first].time;
				bool replied = false;

				if (!s->server || st > t0 || st < best)
					continue;
				for (size_t k = s->first; k < s->end && !replied; k++)
					replied = c->kops[k].send && c->kops[k].time < t0;
				if (!replied) {
					best = st;
					xs[a].encl = b + 1;
				}
			}
		}
		i = j;
	}
	/* traces: from the sender (server), from the enclosing server task (client), else new;
	 * repeated while that resolves more (chains of tiers), then the rest are roots */
	for (int pass = 0, changed = 1; changed && pass < 64; pass++) {
		changed = 0;
		for (size_t i = 0; i < nx; i++) {
			struct kex *x = &xs[i];
			struct kassign *as = &c->kas[x->as];

			if (trace_set(as->trace))
				continue;
			if (x->server && x->sender >= 0) {
				size_t so = send_op[x->sender];

				if (so == SIZE_MAX) {
					const struct ksent *ks =
						&c->ksent[(size_t)x->sender - (nsends - c->nksent)];

					as->trace = ks->trace;
					as->from = ks->task;
				} else {
					const struct kassign *fa = &c->kas[xs[opx[so]].as];

					if (!trace_set(fa->trace))
						continue;
					as->trace = fa->trace;
					as->from = fa->id;
				}
			} else if (x->server) {
				if (!x->complete && c->kops[x->first].time >= cutoff)
					continue; /* its sender's send may not be here yet */
				as->trace = new_trace(c, c->kops[x->first].time);
			} else if (x->encl) {
				const struct kassign *pa = &c->kas[xs[x->encl - 1].as];

				if (!trace_set(pa->trace))
					continue;
				as->trace = pa->trace;
				as->parent = pa->id;
			} else {
				as->trace = new_trace(c, c->kops[x->first].time);
			}
			changed = 1;
		}
	}
	for (size_t i = 0; i < nx; i++)
		if (xs[i].complete && !trace_set(c->kas[xs[i].as].trace))
			c->kas[xs[i].as].trace = new_trace(
				c, c->kops[xs[i].first].time); /* a cycle: cannot happen; safe */
	/* out: the complete exchanges; the others wait, their traces held */
	for (size_t i = 0; i < nx && !rc; i++) {
		struct kex *x = &xs[i];
		const struct kassign *as = &c->kas[x->as];

		if (x->complete) {
			rc = kex_emit(c, x);
			continue;
		}
		if (trace_set(as->trace)) {
			struct ptrace *t =
				trace_get(c, as->trace, (uint64_t)c->kops[x->first].time, true);

			if (t)
				t->kheld++;
		}
	}
	if (rc)
		goto out;
	/* what stays: the ops and assignments of the waiting exchanges; per thread, when the
	 * first of them began (its spans wait for it) */
	{
		size_t nheld = 0;

		for (size_t i = 0; i < nx; i++)
			nheld += !xs[i].complete;
		if (hmap_reserve(&nkix, nheld)) {
			rc = -ENOMEM;
			goto out;
		}
	}
	for (size_t i = 0; i < nx; i++) {
		const struct kex *x = &xs[i];
		const struct kop *f;
		struct hent *e;
		size_t w0 = w;
		bool isnew;

		if (x->complete)
			continue;
		for (size_t k = x->first; k < x->end; k++)
			c->kops[w++] = c->kops[k];
		f = &c->kops[w0];
		e = hmap_get(&nkix, ((uint64_t)f->pid << 32) | (uint32_t)f->tid, f->sk,
			     (uint64_t)f->time, &isnew);
		if (!e || grow((void **)&nkas, &capnkas, nnkas + 1, sizeof(*nkas))) {
			rc = -ENOMEM;
			goto out;
		}
		nkas[nnkas] = c->kas[x->as];
		e->v = ++nnkas;
		/* for the wakeups of its thread (kwake_from): who it is so far */
		if (grow((void **)&c->kheldx, &c->cap_kheldx, c->nkheldx + 1, sizeof(*c->kheldx))) {
			rc = -ENOMEM;
			goto out;
		}
		c->kheldx[c->nkheldx++] = (struct ktask){ f->pid,	    f->tid,
							  f->time,	    c->kops[w - 1].time,
							  c->kas[x->as].id, c->kas[x->as].trace };
		e = hmap_get(&c->tid_khold, (uint64_t)f->pid, (uint64_t)f->tid, 0, &isnew);
		if (!e) {
			rc = -ENOMEM;
			goto out;
		}
		if (isnew || (int64_t)e->v > f->time)
			e->v = (size_t)f->time;
	}
	c->nkops = w;
	/* out of memory, the table stays as it was: valid, only larger */
	(void)kctx_compact(c);
	hmap_free(&c->kix);
	c->kix = nkix;
	memset(&nkix, 0, sizeof(nkix));
	free(c->kas);
	c->kas = nkas;
	c->nkas = nnkas;
	c->cap_kas = capnkas;
	nkas = NULL;
sort_tasks:
	if (c->nktasks)
		qsort(c->ktasks, c->nktasks, sizeof(*c->ktasks), ktask_cmp);
	if (c->nkheldx)
		qsort(c->kheldx, c->nkheldx, sizeof(*c->kheldx), ktask_cmp);
out:
	hmap_free(&nkix);
	free(nkas);
	free(xs);
	free(opx);
	free(sends);
	free(send_op);
	free(recvs);
	free(recv_x);
	free(m);
	return rc;
}

/* The kernel task of the thread that contains [start, end], or NULL. */
static const struct ktask *ktask_around(const struct graphcap *c, int64_t pid, int64_t tid,
					int64_t start, int64_t end)
{
	size_t lo = 0, hi = c->nktasks;
	struct ktask key = { .pid = pid, .tid = tid, .start = start };

	/* the first task after (pid, tid, start); the candidates are before it */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (ktask_cmp(&c->ktasks[mid], &key) <= 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	while (lo > 0) {
		const struct ktask *k = &c->ktasks[--lo];

		if (k->pid != pid || k->tid != tid)
			return NULL;
		if (k->start <= start && end <= k->end)
			return k;
		if (k->end < start)
			return NULL; /* tasks of a thread do not overlap: none earlier contains it */
	}
	return NULL;
}

/* ---------------------------------------------------------------- spans into tasks */

/* The span's name: its start probe's function, USDT probe or event name. */
static const char *span_name(const struct graphcap *c, uint32_t cookie)
{
	const struct plan *p = c->plan;
	const struct plan_attach *a, *s;

	if ((int)cookie >= p->nattach)
		return "?";
	a = s = &p->attach[cookie];
	if (a->is_end)
		for (int i = 0; i < p->nattach; i++)
			if (p->attach[i].source == a->source && !p->attach[i].is_end &&
			    p->attach[i].target_idx == a->target_idx) {
				s = &p->attach[i];
				break;
			}
	if (s->target.symbol[0])
		return s->target.symbol;
	if (s->target.usdt_name[0])
		return s->target.usdt_name;
	if (s->target.event[0])
		return s->target.event;
	return s->target.name;
}

static int span_cmp(const void *pa, const void *pb)
{
	const struct span_rec *a = pa, *b = pb;

	if (a->pid != b->pid)
		return a->pid < b->pid ? -1 : 1;
	if (a->tid != b->tid)
		return a->tid < b->tid ? -1 : 1;
	if (a->start != b->start)
		return a->start < b->start ? -1 : 1;
	/* the longer (outer) first at equal starts */
	return a->end > b->end ? -1 : a->end < b->end;
}

#define SPAN_DEPTH 64

/*
 * Wakeups and forks whose waker had no weft task open (struct kwake; docs/graphs.md,
 * "Scheduler and process edges") are resolved here, when the tasks they may name exist: the
 * waker's task is the innermost span task of its thread around the wakeup's time (emitted:
 * stasks), else its kernel task (emitted: ktasks; still buffered: kheldx, with the id and
 * trace assigned so far).  The woken thread's task is its outermost span that contains the
 * moment or begins next (the wakeups of a thread between the end of one outermost span and
 * the end of the next are that next one's).  A span that would root a trace of its own joins
 * the trace of the latest such wakeup (or fork) before it, with that edge: a thread pool's
 * worker in the trace of the server task that handed it the request.  Any other wakeup is an
 * edge when its two tasks are in one trace, else counted (kernel_unowned), as is one whose
 * waker was in no task.  A wakeup waits (kw, at most max_open, beyond that counted in
 * kernel_pending_full) while its waker's task is not known yet (an exchange or span of that
 * thread still buffered, or it is younger than GRAPHCAP_SPAN_HOLD_NS: a span around it may not
 * have ended) and, its waker's task known, up to KSENT_KEEP_NS for a span of the woken thread;
 * while the woken thread has spans held, the waker's trace is held with them, so that it is
 * not finished before they join it.
 */
struct sgroup {
	size_t i, j; /* the thread's spans: [i, j) of c->spans */
	size_t m; /* [m, j) wait for a later drain (SG_HELD: m = i); [i, m) go now */
	int state; /* SG_* */
	int pass; /* SG_DONE: in which pass (its span tasks are sorted into stasks after it) */
};
enum { SG_WAIT, SG_DONE, SG_HELD };

static int kwake_cmp(const void *pa, const void *pb)
{
	const struct kwake *a = pa, *b = pb;

	if (a->to != b->to)
		return a->to < b->to ? -1 : 1;
	return (a->time > b->time) - (a->time < b->time);
}

/* The innermost emitted span task of the thread around t, or NULL (nested SPAN_DEPTH deep at
 * most). */
static const struct ktask *stask_at(const struct graphcap *c, int64_t pid, int64_t tid, int64_t t)
{
	size_t lo = 0, hi = c->nstasks;
	struct ktask key = { .pid = pid, .tid = tid, .start = t };

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (ktask_cmp(&c->stasks[mid], &key) <= 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (int n = 0; lo > 0 && n < SPAN_DEPTH; n++) {
		const struct ktask *k = &c->stasks[--lo];

		if (k->pid != pid || k->tid != tid)
			return NULL;
		if (k->start <= t && t <= k->end)
			return k;
	}
	return NULL;
}

/* The buffered exchange of the thread begun last at or before t, or NULL. */
static const struct ktask *kheld_at(const struct graphcap *c, int64_t pid, int64_t tid, int64_t t)
{
	size_t lo = 0, hi = c->nkheldx;
	struct ktask key = { .pid = pid, .tid = tid, .start = t };

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (ktask_cmp(&c->kheldx[mid], &key) <= 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo || c->kheldx[lo - 1].pid != pid || c->kheldx[lo - 1].tid != tid)
		return NULL;
	return &c->kheldx[lo - 1];
}

/* The span group of a thread, or NULL. */
static struct sgroup *sgroup_of(const struct graphcap *c, struct sgroup *gs, size_t ng, int64_t pid,
				int64_t tid)
{
	size_t lo = 0, hi = ng;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct span_rec *s = &c->spans[gs[mid].i];

		if (s->pid == pid && s->tid == tid)
			return &gs[mid];
		if (s->pid < pid || (s->pid == pid && s->tid < tid))
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

/* The task the waker of w was in: 1 (*from, *trace), 0 none, -1 not known before a later
 * drain, -2 not known before its thread's spans of this drain are emitted. */
static int kwake_from(const struct graphcap *c, struct sgroup *gs, size_t ng, const struct kwake *w,
		      bool final, uint64_t *from, struct graph_id128 *trace)
{
	const struct sgroup *g = sgroup_of(c, gs, ng, w->pid, w->tid);
	const struct ktask *k;

	if (g && (g->state != SG_DONE || g->pass == c->span_pass || g->m < g->j)) {
		/* a span of it around the time: the last begun by then ends after it */
		size_t lo = g->i, hi = g->j;

		while (lo < hi) {
			size_t mid = lo + (hi - lo) / 2;

			if (c->spans[mid].start <= w->time)
				lo = mid + 1;
			else
				hi = mid;
		}
		/* one of those that wait (the ones that go end before the first of them) */
		if (lo > g->m && c->span_pmax[lo - 1] >= w->time)
			return -1;
		if (lo > g->i && c->span_pmax[lo - 1] >= w->time &&
		    (g->state != SG_DONE || g->pass == c->span_pass))
			return g->state == SG_HELD ? -1 : -2;
	}
	k = stask_at(c, w->pid, w->tid, w->time);
	if (!k)
		k = ktask_around(c, w->pid, w->tid, w->time, w->time);
	if (!k && (k = kheld_at(c, w->pid, w->tid, w->time)) && w->time > k->end) {
		if (!final)
			return -1; /* the exchange may go on past it */
		k = NULL;
	}
	if (k) {
		if (!trace_set(k->trace))
			return final ? 0 : -1;
		*from = k->id;
		*trace = k->trace;
		return 1;
	}
	if (!final && (uint64_t)w->time + GRAPHCAP_SPAN_HOLD_NS > c->newest)
		return -1; /* a span around it may not have ended yet */
	return 0;
}

/* The first wakeup of c->kw (sorted) to thread `to` after time `after`. */
static size_t kwake_first(const struct graphcap *c, int64_t to, int64_t after)
{
	size_t lo = 0, hi = c->nkw;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct kwake *w = &c->kw[mid];

		if (w->to < to || (w->to == to && w->time <= after))
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Whether the thread's spans can be emitted now as far as wakeups go: 0 yes, -1 hold them
 * (their wakers' tasks are not known yet), -2 after this pass. */
static int sgroup_ready(const struct graphcap *c, struct sgroup *gs, size_t ng,
			const struct sgroup *g, bool final, bool last_pass)
{
	int64_t ends[SPAN_DEPTH], pe = INT64_MIN;
	size_t top = 0;
	int ready = 0;

	for (size_t i = g->i; i < g->m && c->nkw; i++) {
		const struct span_rec *s = &c->spans[i];

		while (top && ends[top - 1] < s->end)
			top--;
		if (!top) {
			for (size_t k = kwake_first(c, s->tid, pe);
			     k < c->nkw && c->kw[k].to == s->tid && c->kw[k].time <= s->end; k++) {
				uint64_t from;
				struct graph_id128 tr;
				int r = kwake_from(c, gs, ng, &c->kw[k], final, &from, &tr);

				if (r == -1 || (r == -2 && last_pass && !final))
					return -1;
				if (r == -2 && !last_pass)
					ready = -2;
			}
			pe = s->end;
		}
		if (top < SPAN_DEPTH)
			ends[top++] = s->end;
	}
	return ready;
}

/* Emits the spans of one thread (their wakeups resolved). */
static int sgroup_emit(struct graphcap *c, struct sgroup *gs, size_t ng, struct sgroup *g)
{
	size_t top = 0;
	int64_t pe = INT64_MIN;
	int rc = 0;
	struct {
		int64_t end;
		uint64_t id;
		struct graph_id128 trace;
	} st[SPAN_DEPTH];

	for (size_t i = g->i; i < g->m && !rc; i++) {
		const struct span_rec *s = &c->spans[i];
		const struct ktask *kt;
		struct graph_task k = { 0 };
		size_t w0 = 0, w1 = 0;

		while (top && st[top - 1].end < s->end)
			top--;
		k.id = make_id(c);
		if (!top) {
			/* its wakeups: from the end of the previous outermost span to its end */
			w0 = c->nkw ? kwake_first(c, s->tid, pe) : 0;
			for (w1 = w0;
			     w1 < c->nkw && c->kw[w1].to == s->tid && c->kw[w1].time <= s->end;
			     w1++)
				;
			pe = s->end;
		}
		if (top) {
			k.trace = st[top - 1].trace;
			k.parent = st[top - 1].id;
		} else if (s->wtask && s->wstart <= s->start) {
			k.trace = s->wtrace;
			k.parent = s->wtask;
		} else if ((kt = ktask_around(c, s->pid, s->tid, s->start, s->end))) {
			k.trace = kt->trace;
			k.parent = kt->id;
		} else {
			/* its kernel task may be one that was not remembered: counted, a root */
			if (c->kforgot && s->start <= c->kforgot_to && s->end >= c->kforgot_from)
				c->st.open_evicted++;
			/* a root, unless woken into a trace: the latest wakeup before it */
			for (size_t w = w1; w > w0 && !trace_set(k.trace); w--) {
				uint64_t from;

				if (c->kw[w - 1].time <= s->start &&
				    kwake_from(c, gs, ng, &c->kw[w - 1], true, &from, &k.trace) !=
					    1)
					k.trace = (struct graph_id128){ 0, 0 };
			}
			if (!trace_set(k.trace))
				k.trace = new_trace(c, s->start);
		}
		k.service = graph_strdup(&c->pend, s->comm);
		k.name = graph_strdup(&c->pend, span_name(c, s->cookie));
		k.host = graph_strdup(&c->pend, c->host);
		k.pid = s->pid;
		k.tid = s->tid;
		k.start = to_real(c, (uint64_t)s->start);
		k.end = to_real(c, (uint64_t)s->end);
		k.status = GRAPH_STATUS_UNSET;
		k.source = GRAPH_SRC_KERNEL;
		k.attrs = "{}";
		if (!k.service || !k.name || !k.host || !graph_add_task(&c->pend, &k))
			return -ENOMEM;
		if (k.parent) {
			struct graph_edge ed = { .trace = k.trace,
						 .kind = GRAPH_EDGE_PARENT,
						 .from_task = k.parent,
						 .to_task = k.id,
						 .source = GRAPH_SRC_KERNEL };

			if (!graph_add_edge(&c->pend, &ed))
				return -ENOMEM;
		}
		/* the wakeups and forks into it: edges within its trace; the rest counted */
		for (size_t w = w0; w < w1; w++) {
			struct graph_edge ed = { .trace = k.trace,
						 .kind = c->kw[w].kind,
						 .to_task = k.id,
						 .source = GRAPH_SRC_KERNEL };
			struct graph_id128 tr;

			c->kw[w].used = true;
			if (kwake_from(c, gs, ng, &c->kw[w], true, &ed.from_task, &tr) != 1 ||
			    tr.hi != k.trace.hi || tr.lo != k.trace.lo || ed.from_task == k.id) {
				c->st.kernel_unowned++;
				continue;
			}
			if (!graph_add_edge(&c->pend, &ed))
				return -ENOMEM;
		}
		if (!trace_get(c, k.trace, (uint64_t)s->start, true))
			c->st.bad++; /* the trace table is full: drained by age */
		if (top < SPAN_DEPTH) {
			st[top].end = s->end;
			st[top].id = k.id;
			st[top].trace = k.trace;
			top++;
		}
		/* remembered for the wakeups its thread makes, as many as open tasks at most */
		if (c->nstasks < c->o.max_open) {
			if (grow((void **)&c->stasks, &c->cap_stasks, c->nstasks + 1,
				 sizeof(*c->stasks)))
				return -ENOMEM;
			c->stasks[c->nstasks++] =
				(struct ktask){ s->pid, s->tid, s->start, s->end, k.id, k.trace };
		} else if (c->nkw) {
			c->st.open_evicted++;
		}
	}
	return rc;
}

/* The wakeups no span took: those whose waker was in no task are counted now; those whose
 * waker's task is known hold its trace while their thread has spans held, and wait up to
 * KSENT_KEEP_NS (the end: counted). */
static int kwake_settle(struct graphcap *c, struct sgroup *gs, size_t ng, bool final)
{
	struct hmap held = { 0 };
	size_t w = 0;
	bool isnew;

	for (size_t i = 0; i < ng; i++)
		if ((gs[i].state != SG_DONE || gs[i].m < gs[i].j) &&
		    !hmap_get(&held, (uint64_t)c->spans[gs[i].i].tid, 0, 0, &isnew)) {
			hmap_free(&held);
			return -ENOMEM;
		}
	for (size_t i = 0; i < c->nkw; i++) {
		struct kwake *k = &c->kw[i];
		uint64_t from;
		struct graph_id128 tr;
		int r;

		if (k->used)
			continue;
		r = kwake_from(c, gs, ng, k, final, &from, &tr);
		if (final || r == 0 || (uint64_t)k->time + KSENT_KEEP_NS < c->newest) {
			c->st.kernel_unowned++;
			continue;
		}
		if (r == 1 && hmap_find(&held, (uint64_t)k->to, 0, 0)) {
			/* (a trace finished already has nothing left to hold) */
			struct ptrace *t = trace_get(c, tr, (uint64_t)k->time, false);

			if (t)
				t->kheld++;
		}
		c->kw[w++] = *k;
	}
	c->nkw = w;
	hmap_free(&held);
	return 0;
}

/*
 * The buffered spans of each thread, by start: a stack of the spans that contain the next
 * one gives its parent; an outermost span is the child of the weft task open around it on its
 * thread, else of the kernel task around it, else joins the trace of the task that woke it
 * (above), else roots a trace of its own.  Spans that ended less than GRAPHCAP_SPAN_HOLD_NS
 * before the newest record wait (unless final): their outer span may not have ended yet; so
 * do those that end inside an exchange of their thread still buffered, and every span of the
 * thread that starts after the first of those (the earlier ones neither contain one that waits
 * nor are contained by one: a busy thread's spans go a second behind, not never).  A thread's
 * spans that go are held together when the task of a thread that woke one is not known yet;
 * they are emitted in passes, so that a span woken by a span of another thread of the same
 * drain follows it.  The trace a waiting span would join as things stand waits with it
 * (ptrace.span_gen).
 */
static int spans_drain(struct graphcap *c, bool final)
{
	struct sgroup *gs = NULL;
	size_t ng = 0, capg = 0, kept = 0;
	int rc = 0;

	if (c->nkw)
		qsort(c->kw, c->nkw, sizeof(*c->kw), kwake_cmp);
	if (c->nspans)
		qsort(c->spans, c->nspans, sizeof(*c->spans), span_cmp);
	for (size_t i = 0, j; i < c->nspans; i = j) {
		int64_t held_from = INT64_MAX; /* the earliest start of a span that waits */
		struct hent *kh = NULL;
		size_t m;

		for (j = i; j < c->nspans && c->spans[j].pid == c->spans[i].pid &&
			    c->spans[j].tid == c->spans[i].tid;
		     j++)
			;
		/* an exchange of kernel:sockets still waits on this thread: the spans after its
		 * start may nest in it */
		if (!final)
			kh = hmap_find(&c->tid_khold, (uint64_t)c->spans[i].pid,
				       (uint64_t)c->spans[i].tid, 0);
		for (size_t k = i; k < j && !final; k++)
			if (((uint64_t)c->spans[k].end + GRAPHCAP_SPAN_HOLD_NS > c->newest ||
			     (kh && c->spans[k].end >= (int64_t)kh->v)) &&
			    c->spans[k].start < held_from)
				held_from = c->spans[k].start;
		/* those that start before it go: none of them contains one that waits (it would
		 * end after it, and so wait too) or is contained by one (it starts later); on a
		 * thread that is never idle for a second, that is all but the last second's */
		for (m = i; m < j && c->spans[m].start < held_from; m++)
			;
		if (grow((void **)&gs, &capg, ng + 1, sizeof(*gs))) {
			free(gs);
			return -ENOMEM;
		}
		gs[ng++] = (struct sgroup){ i, j, m, m == i ? SG_HELD : SG_WAIT, -1 };
	}
	c->span_pmax = malloc((c->nspans + 1) * sizeof(*c->span_pmax));
	if (!c->span_pmax) {
		free(gs);
		return -ENOMEM;
	}
	for (size_t g = 0; g < ng; g++)
		for (size_t i = gs[g].i; i < gs[g].j; i++)
			c->span_pmax[i] = i > gs[g].i && c->span_pmax[i - 1] > c->spans[i].end ?
						  c->span_pmax[i - 1] :
						  c->spans[i].end;
	/* in passes: a thread woken from a span of another thread waits for it */
	for (int pass = 0; pass < 3 && !rc; pass++) {
		bool again = false;

		c->span_pass = pass;
		for (size_t g = 0; g < ng && !rc; g++) {
			int r;

			if (gs[g].state != SG_WAIT)
				continue;
			r = sgroup_ready(c, gs, ng, &gs[g], final, pass == 2);
			if (r == -1 && !final)
				gs[g].state = SG_HELD;
			else if (r == -2)
				again = true;
			else if (!(rc = sgroup_emit(c, gs, ng, &gs[g]))) {
				gs[g].state = SG_DONE;
				gs[g].pass = pass;
			}
		}
		if (c->nstasks)
			qsort(c->stasks, c->nstasks, sizeof(*c->stasks), ktask_cmp);
		if (!again)
			break;
	}
	for (size_t g = 0; g < ng && !rc; g++) {
		if (gs[g].state == SG_WAIT)
			gs[g].state = SG_HELD; /* cannot happen (the last pass decides); safe */
	}
	c->span_pass = -1; /* every span task emitted is sorted into stasks now */
	if (!rc)
		rc = kwake_settle(c, gs, ng, final);
	if (!rc) {
		for (size_t g = 0; g < ng; g++) {
			size_t from = gs[g].state == SG_HELD ? gs[g].i : gs[g].m;
			size_t n = gs[g].j - from;

			if (!n)
				continue;
			/* the trace a held span would join as it stands (the weft task open
			 * around it, the kernel task emitted around it) is not finished yet: its
			 * tasks and the span are stored together, not in two puts (a reader in
			 * between would see a server task without its work) */
			for (size_t k = from; k < gs[g].j; k++) {
				const struct span_rec *s = &c->spans[k];
				const struct ktask *kt;
				struct ptrace *t = NULL;

				if (s->wtask && s->wstart <= s->start)
					t = trace_get(c, s->wtrace, 0, false);
				else if ((kt = ktask_around(c, s->pid, s->tid, s->start, s->end)))
					t = trace_get(c, kt->trace, 0, false);
				if (t)
					t->span_gen = c->drain_gen;
			}
			memmove(&c->spans[kept], &c->spans[from], n * sizeof(*c->spans));
			kept += n;
		}
		c->nspans = kept;
	}
	free(c->span_pmax);
	c->span_pmax = NULL;
	free(gs);
	return rc;
}

/* ---------------------------------------------------------------- drain */

/* The sketch bucket at the p99 rank of a type (UINT32_MAX when too few tasks to judge). */
static uint32_t p99_bucket(const struct graph_agg_type *t)
{
	uint64_t rank, cum = 0;

	if (t->count < GRAPHCAP_MIN_TYPE_COUNT)
		return UINT32_MAX;
	rank = (t->count * 99 + 99) / 100; /* ceil(0.99 n) */
	for (uint32_t b = 0; b < WEFT_SKETCH_NBUCKETS; b++) {
		cum += t->sketch[b];
		if (cum >= rank)
			return b;
	}
	return UINT32_MAX;
}

/* Lookups into c->total by name: small linear helpers over its index-free arrays would be
 * O(types); types are few, events and edges per type few. */
static const struct graph_agg_type *total_type(const struct graphcap *c, const char *svc,
					       const char *name, uint32_t *ix)
{
	for (size_t i = 0; i < c->total.ntypes; i++)
		if (strcmp(c->total.types[i].service, svc) == 0 &&
		    strcmp(c->total.types[i].name, name) == 0) {
			*ix = (uint32_t)i;
			return &c->total.types[i];
		}
	return NULL;
}

/* Why the trace of tasks/events/edges [..] is an outlier: 0 not one. */
static bool is_outlier(const struct graphcap *c, const struct graph *g)
{
	for (size_t i = 0; i < g->ntasks; i++) {
		const struct graph_task *k = &g->tasks[i];
		const struct graph_agg_type *t;
		uint32_t ix;
		int64_t lat = k->end > k->start ? k->end - k->start : 0;

		if (k->status == GRAPH_STATUS_ERROR)
			return true;
		t = total_type(c, k->service, k->name, &ix);
		if (t && weft_sketch_index(lat) > p99_bucket(t))
			return true;
	}
	for (size_t i = 0; i < g->nevents; i++) {
		const struct graph_event *ev = &g->events[i];
		const struct graph_task *k = NULL;
		const struct graph_agg_type *t;
		uint32_t ix;

		for (size_t j = 0; j < g->ntasks && !k; j++)
			if (g->tasks[j].id == ev->task)
				k = &g->tasks[j];
		if (!k || !(t = total_type(c, k->service, k->name, &ix)) ||
		    t->count < GRAPHCAP_MIN_TYPE_COUNT)
			continue;
		for (size_t e = 0; e < c->total.nevents; e++)
			if (c->total.events[e].type == ix &&
			    strcmp(c->total.events[e].name, ev->name) == 0 &&
			    (double)c->total.events[e].ntasks / (double)t->count < GRAPH_RARE_SHARE)
				return true;
	}
	for (size_t i = 0; i < g->nedges; i++) {
		const struct graph_edge *ed = &g->edges[i];
		const struct graph_task *from = NULL, *to = NULL;
		const struct graph_agg_type *pt, *ct;
		uint32_t pix, cix;

		for (size_t j = 0; j < g->ntasks; j++) {
			if (g->tasks[j].id == ed->from_task)
				from = &g->tasks[j];
			if (g->tasks[j].id == ed->to_task)
				to = &g->tasks[j];
		}
		if (!from || !to || !(pt = total_type(c, from->service, from->name, &pix)) ||
		    !(ct = total_type(c, to->service, to->name, &cix)) ||
		    pt->count < GRAPHCAP_MIN_TYPE_COUNT)
			continue;
		for (size_t e = 0; e < c->total.nedges; e++)
			if (c->total.edges[e].ptype == pix && c->total.edges[e].ctype == cix &&
			    c->total.edges[e].kind == ed->kind &&
			    (double)c->total.edges[e].count / (double)pt->count < GRAPH_RARE_SHARE)
				return true;
	}
	return false;
}

static int add_task(struct graph *g, const struct graph_task *t)
{
	struct graph_task k = *t;

	k.service = graph_strdup(g, t->service);
	k.name = graph_strdup(g, t->name);
	k.host = graph_strdup(g, t->host);
	k.attrs = graph_strdup(g, t->attrs);
	return k.service && k.name && k.host && k.attrs && graph_add_task(g, &k) ? 0 : -ENOMEM;
}

/* A finished task into kept: its strings that repeat copied once (ks: for one drain). */
static int add_task_kept(struct graph *g, struct str_cache *ks, const struct graph_task *t)
{
	struct graph_task k = *t;

	k.service = cached_str(g, ks, 0, t->service);
	k.name = cached_str(g, ks, 1, t->name);
	k.host = cached_str(g, ks, 2, t->host);
	k.attrs = graph_strdup(g, t->attrs);
	return k.service && k.name && k.host && k.attrs && graph_add_task(g, &k) ? 0 : -ENOMEM;
}

static int add_event(struct graph *g, const struct graph_event *e)
{
	struct graph_event k = *e;

	k.name = graph_strdup(g, e->name);
	k.attrs = graph_strdup(g, e->attrs);
	return k.name && k.attrs && graph_add_event(g, &k) ? 0 : -ENOMEM;
}

/*
 * A drain's aggregates into the running total, without the concurrency: the outlier rules
 * read types, events and edges only, and a total of every ms of every process since the start
 * would grow without end (past GRAPH_AGGS_MAX entries every add failed with -E2BIG).
 */
static int total_merge(struct graphcap *c, const struct graph_aggs *d)
{
	uint32_t stackmap[64], *map = d->ntypes <= 64 ? stackmap : calloc(d->ntypes, sizeof(*map));
	int rc = 0;

	if (!map)
		return -ENOMEM;
	for (size_t i = 0; i < d->ntypes && !rc; i++) {
		const struct graph_agg_type *t = &d->types[i];

		rc = graph_aggs_add_type(&c->total, t->service, t->name, t->count, t->min, t->max,
					 t->sketch, &map[i]);
	}
	for (size_t i = 0; i < d->nevents && !rc; i++)
		rc = graph_aggs_add_event(&c->total, map[d->events[i].type], d->events[i].name,
					  d->events[i].ntasks);
	for (size_t i = 0; i < d->nedges && !rc; i++)
		rc = graph_aggs_add_edge(&c->total, map[d->edges[i].ptype], map[d->edges[i].ctype],
					 d->edges[i].kind, d->edges[i].count);
	if (map != stackmap)
		free(map);
	return rc;
}

int graphcap_drain(struct graphcap *c, bool final, struct graph *kept, struct graph_aggs *aggs)
{
	struct graph rest, one;
	struct graph_aggs drained; /* the finished traces' aggregates, once each */
	struct str_cache ks = { 0 };
	bool *done = NULL;
	size_t ndone = 0;
	int rc;

	if (c->o.live_clock) {
		struct timespec ts;

		if (clock_gettime(CLOCK_MONOTONIC, &ts) == 0) {
			uint64_t now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;

			if (now > c->newest)
				c->newest = now;
		}
	}
	c->drain_gen++;
	if ((rc = ksock_drain(c, final)) || (rc = spans_drain(c, final)))
		return rc;
	/* which traces are finished: no open task; or final; or too old; or too many */
	done = calloc(c->ntr + 1, sizeof(*done));
	if (!done)
		return -ENOMEM;
	for (size_t i = 0; i < c->ntr; i++) {
		const struct ptrace *t = &c->tr[i];

		done[i] = final || (!t->nopen && !t->kheld && t->span_gen != c->drain_gen) ||
			  t->first + c->o.max_age_ns < c->newest || c->ntr >= c->o.max_traces;
		ndone += done[i];
	}
	graph_init(&rest);
	graph_init(&one);
	graph_aggs_init(&drained);
	/* split pend: elements of finished traces into `one` trace at a time */
	{
		size_t nt = c->pend.ntasks, ne = c->pend.nevents, nd = c->pend.nedges;
		size_t *ti = malloc((nt + 1) * sizeof(*ti)), *ei = malloc((ne + 1) * sizeof(*ei)),
		       *di = malloc((nd + 1) * sizeof(*di));
		struct hent *h;
		size_t ntr = c->ntr;
		/* per trace: its pending elements, gathered by counting sort on the trace index */
		size_t *ct = calloc(3 * (ntr + 1), sizeof(*ct));

		if (!ti || !ei || !di || !ct) {
			rc = -ENOMEM;
			goto out_split;
		}
#define TIX(trace) ((h = hmap_find(&c->traces, (trace).hi, (trace).lo, 0)) ? h->v : ntr)
		for (size_t i = 0; i < nt; i++)
			ct[TIX(c->pend.tasks[i].trace)]++;
		for (size_t i = 0; i < ne; i++)
			ct[ntr + 1 + TIX(c->pend.events[i].trace)]++;
		for (size_t i = 0; i < nd; i++)
			ct[2 * (ntr + 1) + TIX(c->pend.edges[i].trace)]++;
		/* prefix sums: the start of each trace's run */
		for (int k = 0; k < 3; k++) {
			size_t sum = 0;

			for (size_t i = 0; i <= ntr; i++) {
				size_t n = ct[k * (ntr + 1) + i];

				ct[k * (ntr + 1) + i] = sum;
				sum += n;
			}
		}
		{
			size_t *pos = malloc(3 * (ntr + 1) * sizeof(*pos));

			if (!pos) {
				rc = -ENOMEM;
				goto out_split;
			}
			memcpy(pos, ct, 3 * (ntr + 1) * sizeof(*pos));
			for (size_t i = 0; i < nt; i++)
				ti[pos[TIX(c->pend.tasks[i].trace)]++] = i;
			for (size_t i = 0; i < ne; i++)
				ei[pos[ntr + 1 + TIX(c->pend.events[i].trace)]++] = i;
			for (size_t i = 0; i < nd; i++)
				di[pos[2 * (ntr + 1) + TIX(c->pend.edges[i].trace)]++] = i;
			free(pos);
		}
#undef TIX
		for (size_t x = 0; x <= ntr && !rc; x++) {
			size_t t0 = ct[x], t1 = x < ntr ? ct[x + 1] : nt;
			size_t e0 = ct[ntr + 1 + x], e1 = x < ntr ? ct[ntr + 1 + x + 1] : ne;
			size_t d0 = ct[2 * (ntr + 1) + x],
			       d1 = x < ntr ? ct[2 * (ntr + 1) + x + 1] : nd;
			bool fin = x < ntr && done[x];
			struct graph *dst = fin ? &one : &rest;

			if (x == ntr) {
				/* elements whose trace is not in the table (cannot happen; safe) */
				c->st.orphans += (e1 - e0) + (d1 - d0) + (t1 - t0);
				continue;
			}
			graph_clear(&one);
			/* a finished trace's `one` is read before pend goes: its strings stay
			 * pend's (not copied); the rest is copied into what becomes pend */
			for (size_t i = t0; i < t1 && !rc; i++)
				rc = fin ? (graph_add_task(&one, &c->pend.tasks[ti[i]]) ? 0 :
											  -ENOMEM) :
					   add_task(dst, &c->pend.tasks[ti[i]]);
			for (size_t i = e0; i < e1 && !rc; i++) {
				const struct graph_event *ev = &c->pend.events[ei[i]];
				bool known = false;

				/* an event of a task that never ended here cannot be stored */
				for (size_t j = t0; j < t1 && !known; j++)
					known = c->pend.tasks[ti[j]].id == ev->task;
				if (!known && fin) {
					c->st.orphans++;
					continue;
				}
				rc = fin ? (graph_add_event(&one, ev) ? 0 : -ENOMEM) :
					   add_event(dst, ev);
			}
			for (size_t i = d0; i < d1 && !rc; i++)
				rc = graph_add_edge(dst, &c->pend.edges[di[i]]) ? 0 : -ENOMEM;
			if (rc || !fin)
				continue;
			/* a finished trace: aggregates, then the decision */
			c->st.unfinished += c->tr[x].nopen;
			c->st.tasks += one.ntasks;
			c->st.events += one.nevents;
			c->st.edges += one.nedges;
			c->st.traces_seen++;
			if ((rc = graph_aggs_add(&drained, &one)))
				break;
		}
		/* this drain's aggregates, added once a trace: into the running total (what the
		 * outlier rules read: types, events, edges) and the caller's */
		if (!rc)
			rc = total_merge(c, &drained);
		if (!rc && aggs)
			rc = graph_aggs_merge(aggs, &drained);
		if (rc)
			goto out_split;
		/* the decisions, against aggregates that include this drain's traces */
		for (size_t x = 0; x < ntr && !rc; x++) {
			size_t t0 = ct[x], t1 = ct[x + 1];
			size_t e0 = ct[ntr + 1 + x], e1 = ct[ntr + 1 + x + 1];
			size_t d0 = ct[2 * (ntr + 1) + x], d1 = ct[2 * (ntr + 1) + x + 1];
			bool head, keep;

			if (!done[x])
				continue;
			graph_clear(&one); /* as above: pend's strings, copied only into kept */
			for (size_t i = t0; i < t1 && !rc; i++)
				rc = graph_add_task(&one, &c->pend.tasks[ti[i]]) ? 0 : -ENOMEM;
			for (size_t i = e0; i < e1 && !rc; i++) {
				const struct graph_event *ev = &c->pend.events[ei[i]];
				bool known = false;

				for (size_t j = t0; j < t1 && !known; j++)
					known = c->pend.tasks[ti[j]].id == ev->task;
				if (known)
					rc = graph_add_event(&one, ev) ? 0 : -ENOMEM;
			}
			for (size_t i = d0; i < d1 && !rc; i++)
				rc = graph_add_edge(&one, &c->pend.edges[di[i]]) ? 0 : -ENOMEM;
			if (rc)
				break;
			head = graph_sample_head(c->trid[x], c->rate);
			keep = c->o.keep_all || head || is_outlier(c, &one);
			if (!c->o.keep_all) {
				if (head)
					c->st.kept_head++;
				else if (keep)
					c->st.kept_outlier++;
			}
			if (aggs && !c->o.keep_all) {
				aggs->sampling.rate = c->rate;
				aggs->sampling.seen++;
				aggs->sampling.kept_head += head;
				aggs->sampling.kept_outlier += keep && !head;
			}
			if (!keep)
				continue;
			for (size_t i = 0; i < one.ntasks && !rc; i++)
				rc = add_task_kept(kept, &ks, &one.tasks[i]);
			for (size_t i = 0; i < one.nevents && !rc; i++)
				rc = add_event(kept, &one.events[i]);
			for (size_t i = 0; i < one.nedges && !rc; i++)
				rc = graph_add_edge(kept, &one.edges[i]) ? 0 : -ENOMEM;
		}
out_split:
		free(ti);
		free(ei);
		free(di);
		free(ct);
	}
	if (rc)
		goto out;
	/* what stays: the unfinished traces' elements and table entries */
	graph_free(&c->pend);
	c->pend = rest;
	memset(&c->pend_strs, 0, sizeof(c->pend_strs)); /* they were the old pend's */
	graph_init(&rest);
	{
		size_t w = 0;

		for (size_t i = 0; i < c->ntr; i++) {
			struct hent *h = hmap_find(&c->traces, c->trid[i].hi, c->trid[i].lo, 0);

			if (done[i]) {
				if (h)
					hmap_del(&c->traces, h);
				continue;
			}
			c->tr[w] = c->tr[i];
			c->trid[w] = c->trid[i];
			if (h)
				h->v = w;
			w++;
		}
		c->ntr = w;
	}
	/* open tasks of the drained traces are gone with them */
	for (size_t i = 0; i < c->nopen_slots; i++) {
		struct open_task *ot = &c->open[i];
		struct hent *h;

		if (!ot->used || hmap_find(&c->traces, ot->trace.hi, ot->trace.lo, 0))
			continue;
		h = hmap_find(&c->open_ix, ot->trace.hi, ot->trace.lo, ot->id);
		if (h)
			hmap_del(&c->open_ix, h);
		ot->used = false;
		c->free_slots[c->nfree++] = i;
	}
	if (final) {
		hmap_free(&c->tid_top);
		ksock_prune(c, true);
	}
	rc = (int)(ndone > INT32_MAX ? INT32_MAX : ndone);
out:
	graph_free(&rest);
	graph_free(&one);
	graph_aggs_free(&drained);
	free(done);
	return rc;
}
