// SPDX-License-Identifier: Apache-2.0
/*
 * cluster_merge — the aggregator's merge path in one process, on one core, phase by phase.
 *
 * What `weft aggregator` does with each Partial it receives (aggregator/aggd.c, router_one()
 * and on_partial()), minus ZeroMQ and CURVE (cluster_sim measures those, end to end):
 *
 *   decode   wire_decode(): protobuf-c unpack and every check of docs/protocol.md
 *   unpack   (experiment) protobuf-c's unpack and free alone, malloc'd as wire_decode() does
 *   arena    (experiment) the same unpack into a bump arena, freed at once
 *   add      agent_table_add_groups() alone: key and state validation, hash lookup, merge
 *   merge    wire_decode() + aggd_qwin_add() (which calls agent_table_add_groups()) +
 *            wire_free(): the daemon's in-memory work per partial
 *   store    what checkpoints write (aggd_store_sender_set(), aggd_store_member_set() per
 *            partial, aggd_store_snapshot_set() of the window per batch), one
 *            transaction (synchronous=FULL, one fsync) per batch, plus what closing a window
 *            writes (aggd_store_window_emitted(), forgetting old windows)
 *   emit     per window: agent_table_to_groups() of the merged table + wire_encode() of the
 *            Result (what result_send() and emit_window() do)
 *   all      the sequence the daemon runs, interleaved: decode, merge, store, commit every
 *            batch, close and emit each window when all its partials are in
 *
 * The partials are realistic (cluster_bench.h): the plan comes from a real query through its
 * manifest, each of `agents` senders sends `groups` groups per window from a shared key space
 * of `keyspace` groups, each window starts empty (a new table), so a window sees inserts until
 * it holds the key space, then merges.  Every figure is rows (groups of partials) per second
 * of one core's time; the process pins itself to --cpu.
 *
 * Usage: cluster_merge [-q QUERY] [-a AGENTS] [-g GROUPS] [-k KEYSPACE] [-w WINDOWS]
 *                      [-b BATCH] [-s STORE] [-c CPU] [-r ROUNDS] [-p PHASE,...] [-z PAGE]
 *   defaults: the query of cluster_bench.h, 1000 agents, 1000 groups, keyspace 20000,
 *   4 windows per round, batch 100, store in a fresh directory under /var/tmp, CPU 0,
 *   3 rounds (the median round is printed), every phase (-p: the named ones, e.g. to
 *   profile one with perf).  -z PAGE: an experiment, not what the daemon does: the store
 *   created with SQLite page size PAGE (the daemon's store has SQLite's default, 4096).
 */
#include <getopt.h>
#include <inttypes.h>
#include <sched.h>
#include <sqlite3.h>
#include <unistd.h>
#include "aggregator/aggd.h"
#include "tools/bench/cluster_bench.h"
#include "base/log.h"

struct bench {
	const char *query;
	uint32_t agents, groups, keyspace, windows, batch, rounds;
	const char *phases; /* comma-separated names to run; NULL: all */
	uint32_t page_size; /* an experiment: create the store with this SQLite page size */
	int cpu;
	const char *store_dir;
	struct plan *plan;
	char *manifest;
	size_t manifest_len;
	Weft__Group **space; /* the key space: keyspace groups */
	void **env; /* per agent: an encoded Partial envelope of window 0 */
	size_t *envlen;
	void *merged; /* a packed Weft__Partial of a full window, for the store's window rows */
	size_t merged_len;
};

/* Wall time and this thread's CPU time: on a shared machine the CPU time is what the work
 * cost; the wall time adds waiting (fsync) and whatever else ran on the core. */
struct span {
	double wall, cpu;
};

struct mark {
	uint64_t wall, cpu;
};

static struct mark mark_now(void)
{
	struct mark m = { cb_now_ns(CLOCK_MONOTONIC), cb_now_ns(CLOCK_THREAD_CPUTIME_ID) };

	return m;
}

static void span_add(struct span *s, struct mark a)
{
	struct mark b = mark_now();

	s->wall += (double)(b.wall - a.wall) / 1e9;
	s->cpu += (double)(b.cpu - a.cpu) / 1e9;
}

static int cmp_double(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;

	return a < b ? -1 : a > b;
}

/* Builds the key space and one envelope per agent (its partial for window 0). */
static int bench_setup(struct bench *b)
{
	Weft__Group **g;
	char host[32];

	b->plan = cb_plan_make(b->query, &b->manifest, &b->manifest_len, NULL, NULL);
	if (!b->plan)
		return -EINVAL;
	b->space = calloc(b->keyspace, sizeof(*b->space));
	b->env = calloc(b->agents, sizeof(*b->env));
	b->envlen = calloc(b->agents, sizeof(*b->envlen));
	g = calloc(b->groups, sizeof(*g));
	if (!b->space || !b->env || !b->envlen || !g)
		return -ENOMEM;
	for (uint32_t i = 0; i < b->keyspace; i++)
		if (!(b->space[i] = cb_group_make(b->plan, i)))
			return -ENOMEM;
	for (uint32_t a = 0; a < b->agents; a++) {
		Weft__Envelope e = WEFT__ENVELOPE__INIT;
		Weft__Partial pt = WEFT__PARTIAL__INIT;
		uint64_t drops[WEFT_DROP_NR] = { 0 };
		int rc;

		for (uint32_t j = 0; j < b->groups; j++)
			g[j] = b->space[((uint64_t)a * b->groups + j) % b->keyspace];
		snprintf(host, sizeof(host), "sim%04u", a);
		pt.query_id = 1;
		pt.window = 0;
		pt.host = host;
		pt.n_groups = b->groups;
		pt.groups = g;
		pt.n_drops = WEFT_DROP_NR;
		pt.drops = drops;
		pt.has_misses = pt.has_overflow = true;
		e.version = WIRE_VERSION;
		e.seq = 1000 + a;
		e.body_case = WEFT__ENVELOPE__BODY_PARTIAL;
		e.partial = &pt;
		rc = wire_encode(&e, &b->env[a], &b->envlen[a]);
		if (rc)
			return rc;
	}
	{
		/* a full window as the daemon stores it when it closes: every key once */
		Weft__Partial pt = WEFT__PARTIAL__INIT;

		pt.query_id = 1;
		pt.host = "aggregator";
		pt.n_groups =
			b->keyspace < b->agents * b->groups ? b->keyspace : b->agents * b->groups;
		pt.groups = b->space;
		b->merged_len = weft__partial__get_packed_size(&pt);
		b->merged = malloc(b->merged_len);
		if (!b->merged)
			return -ENOMEM;
		weft__partial__pack(&pt, b->merged);
	}
	free(g);
	/* the partials must be what an aggregator accepts: check one through the real path */
	{
		struct agent_table *t = agent_table_new(b->plan, 0);
		char why[256];
		Weft__Envelope *e = wire_decode(b->env[0], b->envlen[0], why, sizeof(why));
		int rc = -EINVAL;

		if (!e)
			fprintf(stderr, "bench: the partial does not decode: %s\n", why);
		else if (t)
			rc = agent_table_add_groups(t, e->partial->groups, e->partial->n_groups);
		if (rc == 0 && agent_table_groups(t) != b->groups)
			rc = -EINVAL;
		wire_free(e);
		agent_table_free(t);
		if (rc) {
			fprintf(stderr, "bench: the partial is refused: %s\n", strerror(-rc));
			return rc;
		}
	}
	return 0;
}

/* ---- phases: each returns the seconds it took for windows * agents partials ---- */

static struct span phase_decode(struct bench *b)
{
	struct mark t0 = mark_now();
	struct span sp = { 0 };
	char why[256];

	for (uint32_t w = 0; w < b->windows; w++)
		for (uint32_t a = 0; a < b->agents; a++) {
			Weft__Envelope *e = wire_decode(b->env[a], b->envlen[a], why, sizeof(why));

			if (!e) {
				fprintf(stderr, "bench: decode: %s\n", why);
				exit(1);
			}
			wire_free(e);
		}
	span_add(&sp, t0);
	return sp;
}

/* Experiments (not what the daemon runs): protobuf-c's unpack alone, with malloc as
 * wire_decode() uses it, and with a bump arena freed at once — the share of wire_decode()
 * that its checks cost, and the share that one allocation per field costs. */
static struct span phase_unpack(struct bench *b)
{
	struct mark t0 = mark_now();
	struct span sp = { 0 };

	for (uint32_t w = 0; w < b->windows; w++)
		for (uint32_t a = 0; a < b->agents; a++) {
			Weft__Envelope *e = weft__envelope__unpack(NULL, b->envlen[a], b->env[a]);

			if (!e)
				exit(1);
			weft__envelope__free_unpacked(e, NULL);
		}
	span_add(&sp, t0);
	return sp;
}

struct arena {
	uint8_t *p;
	size_t used, cap;
};

static void *bump_alloc(void *data, size_t size)
{
	struct arena *ar = data;
	size_t at = (ar->used + 15) & ~(size_t)15;

	if (at + size > ar->cap)
		return NULL;
	ar->used = at + size;
	return ar->p + at;
}

static void bump_free(void *data, void *ptr)
{
	(void)data;
	(void)ptr;
}

static struct span phase_arena(struct bench *b)
{
	struct arena ar = { .cap = 8 * b->envlen[0] + (1u << 20) };
	ProtobufCAllocator al = { .alloc = bump_alloc, .free = bump_free, .allocator_data = &ar };
	struct mark t0;
	struct span sp = { 0 };

	ar.p = malloc(ar.cap);
	if (!ar.p)
		exit(1);
	t0 = mark_now();
	for (uint32_t w = 0; w < b->windows; w++)
		for (uint32_t a = 0; a < b->agents; a++) {
			ar.used = 0; /* everything of the last message, freed at once */
			if (!weft__envelope__unpack(&al, b->envlen[a], b->env[a]))
				exit(1);
		}
	span_add(&sp, t0);
	free(ar.p);
	return sp;
}

static struct span phase_add(struct bench *b)
{
	Weft__Envelope **e = calloc(b->agents, sizeof(*e));
	struct agent_table *t = agent_table_new(b->plan, 0);
	char why[256];
	struct span sp = { 0 };
	struct mark t0;

	if (!e || !t)
		exit(1);
	for (uint32_t a = 0; a < b->agents; a++)
		e[a] = wire_decode(b->env[a], b->envlen[a], why, sizeof(why));
	for (uint32_t w = 0; w < b->windows; w++) {
		t0 = mark_now();
		for (uint32_t a = 0; a < b->agents; a++)
			if (agent_table_add_groups(t, e[a]->partial->groups,
						   e[a]->partial->n_groups)) {
				fprintf(stderr, "bench: add_groups failed\n");
				exit(1);
			}
		span_add(&sp, t0);
		agent_table_clear(t); /* the next window starts empty */
	}
	for (uint32_t a = 0; a < b->agents; a++)
		wire_free(e[a]);
	free(e);
	agent_table_free(t);
	return sp;
}

static struct aggd_qwin *qwin_make(struct bench *b)
{
	struct aggd_qwin_opts o = { .sz = sizeof(o) };
	struct aggd_qwin *q;
	char host[32];

	o.epoch_ns = 1000000000ULL;
	o.every_ns = b->plan->every_ns ? b->plan->every_ns : 1000000000ULL;
	o.lateness_ns = 2000000000ULL;
	q = aggd_qwin_new(b->plan, &o);
	if (!q)
		exit(1);
	for (uint32_t a = 0; a < b->agents; a++) {
		snprintf(host, sizeof(host), "sim%04u", a);
		aggd_qwin_member(q, host, 0, true);
	}
	return q;
}

struct emit_ctx {
	struct bench *b;
	struct aggd_store *store; /* NULL: no store writes */
	bool encode; /* encode the Result */
	uint64_t groups, bytes;
	bool snapshot; /* a checkpoint's snapshot, not an emitted window */
};

/* What the daemon's emit_window() does with a closed window. */
static int emit(void *ctx, const struct aggd_window_view *v)
{
	struct emit_ctx *c = ctx;
	Weft__Group **groups = NULL;
	size_t n = 0;
	int rc;

	if (!c->encode && !c->store)
		return 0;
	rc = agent_table_to_groups(v->table, &groups, &n);
	if (rc)
		return rc;
	if (c->encode) {
		Weft__Envelope e = WEFT__ENVELOPE__INIT;
		Weft__Result r = WEFT__RESULT__INIT;
		void *buf;
		size_t len;

		r.query_id = 1;
		r.window = v->index;
		r.n_groups = n;
		r.groups = groups;
		r.n_drops = WEFT_DROP_NR;
		r.drops = (uint64_t *)v->drops;
		r.n_hosts = v->nhosts;
		r.hosts = (char **)v->hosts;
		e.version = WIRE_VERSION;
		e.seq = 1;
		e.body_case = WEFT__ENVELOPE__BODY_RESULT;
		e.result = &r;
		rc = wire_encode(&e, &buf, &len);
		if (rc == 0) {
			c->bytes += len;
			free(buf);
		}
	}
	if (c->store) {
		Weft__Partial pt = WEFT__PARTIAL__INIT;
		void *body;
		size_t len;

		pt.query_id = 1;
		pt.window = v->index;
		pt.host = "aggregator";
		pt.n_groups = n;
		pt.groups = groups;
		pt.n_hosts = v->nhosts;
		pt.hosts = (char **)v->hosts;
		len = weft__partial__get_packed_size(&pt);
		body = malloc(len);
		if (body) {
			weft__partial__pack(&pt, body);
			rc = c->snapshot ?
				     aggd_store_snapshot_set(c->store, 1, v->index, body, len) :
				     aggd_store_window_emitted(c->store, 1, v->index, v->revision,
							       0, body, len);
			free(body);
		}
	}
	c->groups += n;
	agent_groups_free(groups, n);
	return rc;
}

/* wire_decode + aggd_qwin_add + wire_free for every partial; windows close as they fill. */
static struct span phase_merge(struct bench *b)
{
	struct aggd_qwin *q = qwin_make(b);
	struct emit_ctx c = { b, NULL, false, 0, 0, false };
	struct mark t0 = mark_now();
	struct span sp = { 0 };
	uint64_t now = 1000000000ULL;
	char why[256];

	for (uint32_t w = 0; w < b->windows; w++) {
		for (uint32_t a = 0; a < b->agents; a++) {
			Weft__Envelope *e = wire_decode(b->env[a], b->envlen[a], why, sizeof(why));
			int rc;

			if (!e)
				exit(1);
			e->partial->window = w;
			rc = aggd_qwin_add(q, e->partial, now);
			if (rc != AGGD_MERGED) {
				fprintf(stderr, "bench: aggd_qwin_add: %d\n", rc);
				exit(1);
			}
			wire_free(e);
		}
		if (aggd_qwin_tick(q, now, emit, &c) != 1) {
			fprintf(stderr, "bench: window %u did not close\n", w);
			exit(1);
		}
	}
	span_add(&sp, t0);
	aggd_qwin_free(q);
	return sp;
}

static struct aggd_store *store_make(struct bench *b, char *path, size_t sz)
{
	struct aggd_stored_query sq = { 0 };
	struct aggd_store *s;
	char err[256];

	snprintf(path, sz, "%s/agg-%d-%" PRIu64 ".sqlite", b->store_dir, getpid(),
		 cb_now_ns(CLOCK_MONOTONIC));
	if (b->page_size) {
		/* an empty database with that page size: aggd_store_open() keeps it (the page
		 * size of a database is fixed once it has content, WAL included) */
		sqlite3 *db;
		char sql[64];

		snprintf(sql, sizeof(sql), "PRAGMA page_size = %u; VACUUM;", b->page_size);
		if (sqlite3_open(path, &db) != SQLITE_OK ||
		    sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK) {
			fprintf(stderr, "bench: page size %u: %s\n", b->page_size,
				sqlite3_errmsg(db));
			exit(1);
		}
		sqlite3_close(db);
	}
	s = aggd_store_open(path, err, sizeof(err));
	if (!s) {
		fprintf(stderr, "bench: store %s: %s\n", path, err);
		exit(1);
	}
	sq.query = b->query;
	sq.manifest = b->manifest;
	sq.manifest_len = b->manifest_len;
	sq.object = "x";
	sq.object_len = 1;
	sq.epoch_ns = 1000000000ULL;
	if (aggd_store_query_add(s, &sq))
		exit(1);
	return s;
}

static void store_drop(struct aggd_store *s, const char *path)
{
	char p[600];

	aggd_store_close(s);
	unlink(path);
	snprintf(p, sizeof(p), "%s-wal", path);
	unlink(p);
	snprintf(p, sizeof(p), "%s-shm", path);
	unlink(p);
}

/* What the daemon's checkpoint writes for a member whose progress changed. */
static int ckpt_member(void *ctx, const struct aggd_member_view *m)
{
	struct emit_ctx *c = ctx;
	struct aggd_stored_member sm = { m->host, m->from, m->last, m->hi, m->failed };

	return m->gone ? aggd_store_member_del(c->store, 1, m->host) :
			 aggd_store_member_set(c->store, 1, &sm);
}

/*
 * The store's writes alone, as the daemon's checkpoints make them (aggd.c, txn_commit()):
 * one checkpoint per batch of partials (what arrives in AGGD_CHECKPOINT_NS), writing the
 * sender's seq and member progress of each partial of the batch and the open window's merged
 * state once (here: a full window's, the largest it gets), then a commit; per window the
 * emitted record (replacing its snapshot) and forgetting old windows.
 */
static struct span phase_store(struct bench *b)
{
	char path[512], host[32];
	struct aggd_store *s = store_make(b, path, sizeof(path));
	struct mark t0 = mark_now();
	struct span sp = { 0 };
	uint64_t seq = 0;
	uint32_t inbatch = 0;

	for (uint32_t w = 0; w < b->windows; w++) {
		for (uint32_t a = 0; a < b->agents; a++) {
			struct aggd_stored_member m = { host, 0, UINT64_MAX, w + 1, false };

			snprintf(host, sizeof(host), "sim%04u", a);
			if (!inbatch)
				aggd_store_begin(s);
			seq++;
			if (aggd_store_sender_set(s, host, 1, seq) ||
			    aggd_store_member_set(s, 1, &m))
				exit(1);
			if (++inbatch == b->batch || a + 1 == b->agents) {
				if (aggd_store_snapshot_set(s, 1, w, b->merged, b->merged_len) ||
				    aggd_store_commit(s))
					exit(1);
				inbatch = 0;
			}
		}
		aggd_store_begin(s);
		aggd_store_window_emitted(s, 1, w, 0, 0, b->merged, b->merged_len);
		if (w >= AGGD_KEEP_WINDOWS)
			aggd_store_windows_forget(s, 1, w - AGGD_KEEP_WINDOWS);
		if (aggd_store_commit(s))
			exit(1);
	}
	span_add(&sp, t0);
	store_drop(s, path);
	return sp;
}

/* Per window: the merged table to groups and a Result encoded; returns seconds per window. */
static struct span phase_emit(struct bench *b, uint64_t *groups, uint64_t *bytes)
{
	struct aggd_qwin *q = qwin_make(b);
	struct emit_ctx c = { b, NULL, true, 0, 0, false };
	struct span sp = { 0 };
	uint64_t now = 1000000000ULL;
	char why[256];

	for (uint32_t w = 0; w < b->windows; w++) {
		struct mark t0;

		for (uint32_t a = 0; a < b->agents; a++) {
			Weft__Envelope *e = wire_decode(b->env[a], b->envlen[a], why, sizeof(why));

			e->partial->window = w;
			aggd_qwin_add(q, e->partial, now);
			wire_free(e);
		}
		t0 = mark_now();
		aggd_qwin_tick(q, now, emit, &c);
		span_add(&sp, t0);
	}
	aggd_qwin_free(q);
	*groups = c.groups / b->windows;
	*bytes = c.bytes / b->windows;
	sp.wall /= b->windows;
	sp.cpu /= b->windows;
	return sp;
}

/*
 * Everything, interleaved as aggd_run() does it: the whole per-partial cost.  A checkpoint
 * (sender seqs, the changed windows' merged state and members' progress, a commit) after
 * each batch of partials, then a tick, which closes and emits the window once all agents
 * reported it.
 */
static struct span phase_all(struct bench *b)
{
	char path[512], why[256];
	struct aggd_store *s = store_make(b, path, sizeof(path));
	struct aggd_qwin *q = qwin_make(b);
	struct emit_ctx c = { b, s, true, 0, 0, false };
	struct emit_ctx ck = { b, s, false, 0, 0, true };
	struct mark t0 = mark_now();
	struct span sp = { 0 };
	uint64_t now = 1000000000ULL, seq = 0;
	uint32_t inbatch = 0;

	for (uint32_t w = 0; w < b->windows; w++) {
		for (uint32_t a = 0; a < b->agents; a++) {
			Weft__Envelope *e = wire_decode(b->env[a], b->envlen[a], why, sizeof(why));

			if (!e)
				exit(1);
			e->partial->window = w;
			if (aggd_qwin_add(q, e->partial, now) != AGGD_MERGED)
				exit(1);
			seq++;
			if (!inbatch)
				aggd_store_begin(s);
			aggd_store_sender_set(s, e->partial->host, 1, seq);
			wire_free(e);
			if (++inbatch == b->batch || a + 1 == b->agents) {
				if (aggd_qwin_checkpoint(q, emit, ckpt_member, &ck) ||
				    aggd_store_commit(s))
					exit(1);
				inbatch = 0;
				/* the window closes when its last partial is in: emitted, its record
				 * written (committed with the next checkpoint) */
				aggd_store_begin(s);
				aggd_qwin_tick(q, now, emit, &c);
				if (w >= AGGD_KEEP_WINDOWS)
					aggd_store_windows_forget(s, 1, w - AGGD_KEEP_WINDOWS);
				if (aggd_store_commit(s))
					exit(1);
			}
		}
	}
	span_add(&sp, t0);
	aggd_qwin_free(q);
	store_drop(s, path);
	return sp;
}

static bool phase_on(const struct bench *b, const char *name)
{
	size_t n = strlen(name);

	for (const char *p = b->phases; p && *p;) {
		const char *c = strchr(p, ',');
		size_t len = c ? (size_t)(c - p) : strlen(p);

		if (len == n && strncmp(p, name, n) == 0)
			return true;
		p = c ? c + 1 : p + len;
	}
	return !b->phases;
}

static double median(double *v, uint32_t n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: cluster_merge [-q QUERY] [-a AGENTS] [-g GROUPS] [-k KEYSPACE] "
		"[-w WINDOWS] [-b BATCH] [-s STORE_DIR] [-c CPU] [-r ROUNDS] [-p PHASE,...] "
		"[-z PAGE_SIZE]\n");
}

int main(int argc, char **argv)
{
	struct bench b = {
		.query = CB_DEFAULT_QUERY,
		.agents = 1000,
		.groups = 1000,
		.keyspace = 20000,
		.windows = 4,
		.batch = 100,
		.rounds = 3,
		.cpu = 0,
		.store_dir = "/var/tmp",
	};
	static const struct {
		const char *name;
		struct span (*fn)(struct bench *b);
	} ph[] = {
		{ "decode", phase_decode }, { "unpack", phase_unpack }, { "arena", phase_arena },
		{ "add", phase_add },	    { "merge", phase_merge },	{ "store", phase_store },
		{ "all", phase_all },
	};
	enum { NPH = sizeof(ph) / sizeof(ph[0]) };
	double wall[NPH][64], cpu[NPH][64], emit_wall[64], emit_cpu[64];
	uint64_t egroups = 0, ebytes = 0, rows, bytes = 0;
	cpu_set_t set;
	int opt;

	while ((opt = getopt(argc, argv, "q:a:g:k:w:b:s:c:r:p:z:h")) != -1) {
		switch (opt) {
		case 'z':
			b.page_size = (uint32_t)strtoul(optarg, NULL, 0);
			break;
		case 'p':
			b.phases = optarg;
			break;
		case 'q':
			b.query = optarg;
			break;
		case 'a':
			b.agents = (uint32_t)strtoul(optarg, NULL, 0);
			break;
		case 'g':
			b.groups = (uint32_t)strtoul(optarg, NULL, 0);
			break;
		case 'k':
			b.keyspace = (uint32_t)strtoul(optarg, NULL, 0);
			break;
		case 'w':
			b.windows = (uint32_t)strtoul(optarg, NULL, 0);
			break;
		case 'b':
			b.batch = (uint32_t)strtoul(optarg, NULL, 0);
			break;
		case 's':
			b.store_dir = optarg;
			break;
		case 'c':
			b.cpu = atoi(optarg);
			break;
		case 'r':
			b.rounds = (uint32_t)strtoul(optarg, NULL, 0);
			break;
		default:
			usage();
			return opt == 'h' ? 0 : 2;
		}
	}
	if (!b.agents || !b.groups || !b.keyspace || !b.windows || !b.batch || !b.rounds ||
	    b.rounds > 64) {
		usage();
		return 2;
	}
	weft_log_set_level(WEFT_LOG_WARN);
	CPU_ZERO(&set);
	CPU_SET(b.cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set))
		perror("bench: sched_setaffinity");
	if (bench_setup(&b)) {
		fprintf(stderr, "bench: setup failed\n");
		return 1;
	}
	for (uint32_t a = 0; a < b.agents; a++)
		bytes += b.envlen[a];
	rows = (uint64_t)b.agents * b.groups * b.windows;
	printf("cluster_merge: %s\n", b.query);
	printf("  %u agents x %u groups per partial (key space %u), %u windows per round, "
	       "%" PRIu64 " rows; partial %.1f KiB; store batch %u in %s%s; CPU %d; %u rounds\n",
	       b.agents, b.groups, b.keyspace, b.windows, rows, (double)bytes / b.agents / 1024.0,
	       b.batch, b.store_dir, b.page_size ? " (experiment: page size set)" : "", b.cpu,
	       b.rounds);
	for (uint32_t r = 0; r < b.rounds; r++) {
		struct span e = { 0 };

		for (int p = 0; p < NPH; p++) {
			struct span sp = { 0 };

			if (phase_on(&b, ph[p].name))
				sp = ph[p].fn(&b);
			wall[p][r] = sp.wall;
			cpu[p][r] = sp.cpu;
		}
		if (phase_on(&b, "emit"))
			e = phase_emit(&b, &egroups, &ebytes);
		emit_wall[r] = e.wall;
		emit_cpu[r] = e.cpu;
	}
	printf("  %-8s %14s %14s %12s %12s %12s\n", "phase", "rows/s (wall)", "rows/s (cpu)",
	       "us/partial", "(cpu)", "MB/s (wall)");
	for (int p = 0; p < NPH; p++) {
		double w = median(wall[p], b.rounds), c = median(cpu[p], b.rounds);
		double np = (double)b.agents * b.windows;

		if (!phase_on(&b, ph[p].name))
			continue;
		printf("  %-8s %14.0f %14.0f %12.1f %12.1f %12.1f\n", ph[p].name, (double)rows / w,
		       (double)rows / c, w * 1e6 / np, c * 1e6 / np,
		       (double)bytes * b.windows / w / 1e6);
	}
	if (phase_on(&b, "emit"))
		printf("  emit     %.2f ms per window, %.2f ms cpu (%" PRIu64
		       " groups, Result %.1f KiB)\n",
		       median(emit_wall, b.rounds) * 1e3, median(emit_cpu, b.rounds) * 1e3, egroups,
		       (double)ebytes / 1024.0);
	return 0;
}
