// SPDX-License-Identifier: Apache-2.0
/*
 * The SQLite graph store's reads (store_sqlite.c's essay says why it is built this way):
 * finding a trace by hex prefix, loading it from its chunks, its context from point lookups
 * of the aggregates, a type's sketch and a process's concurrency, list with
 * weft_chunk_match() for the filters on tasks, and the per-type stats.  Nothing here
 * writes; every BLOB read back is decoded with bounds checks.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <sqlite3.h>

#include "graph/store_sqlite_int.h"

/* ---------------------------------------------------------------- load */

/* The row id of the trace a hex id or a unique prefix of the 32-digit form names. */
int sq_find_trace(struct sq *s, const char *hex, int64_t *tr, int64_t *thi, int64_t *tlo, char *why,
		  size_t whysz)
{
	size_t len = strlen(hex), i;
	struct graph_id128 id, lo, hi;
	char buf[33];
	sqlite3_stmt *t;
	int rc, n = 0;

	for (i = 0; i < len; i++)
		if (!((hex[i] >= '0' && hex[i] <= '9') || (hex[i] >= 'a' && hex[i] <= 'f') ||
		      (hex[i] >= 'A' && hex[i] <= 'F')))
			break;
	if (!len || len > 32 || i < len)
		return sq_failf(why, whysz, -EINVAL,
				"graph store: '%.40s' is not a trace id (1 to 32 "
				"hex digits)",
				hex);
	if (graph_id128_parse_hex(hex, len, &id) == 0) {
		t = sq_stmt(s, ST_FIND_EXACT);
		sqlite3_bind_int64(t, 1, sq_bias(id.hi));
		sqlite3_bind_int64(t, 2, sq_bias(id.lo));
		rc = sqlite3_step(t);
		if (rc == SQLITE_ROW) {
			*tr = sqlite3_column_int64(t, 0);
			*thi = sqlite3_column_int64(t, 1);
			*tlo = sqlite3_column_int64(t, 2);
		}
		sqlite3_reset(t);
		if (rc == SQLITE_ROW)
			return 0;
		if (rc != SQLITE_DONE)
			return sq_fail(s, rc, why, whysz, "finding a trace");
	}
	/* a prefix of the 32-digit form: the range of ids it covers */
	memcpy(buf, hex, len);
	memset(buf + len, '0', 32 - len);
	buf[32] = 0;
	if (graph_id128_parse_hex(buf, 32, &lo))
		return sq_failf(why, whysz, -EINVAL, "graph store: '%s' is not a trace id", hex);
	memset(buf + len, 'f', 32 - len);
	if (graph_id128_parse_hex(buf, 32, &hi))
		return sq_failf(why, whysz, -EINVAL, "graph store: '%s' is not a trace id", hex);
	if (len <= 16) {
		t = sq_stmt(s, ST_FIND_HI);
		sqlite3_bind_int64(t, 1, sq_bias(lo.hi));
		sqlite3_bind_int64(t, 2, sq_bias(hi.hi));
	} else {
		t = sq_stmt(s, ST_FIND_LO);
		sqlite3_bind_int64(t, 1, sq_bias(lo.hi));
		sqlite3_bind_int64(t, 2, sq_bias(lo.lo));
		sqlite3_bind_int64(t, 3, sq_bias(hi.lo));
	}
	while ((rc = sqlite3_step(t)) == SQLITE_ROW) {
		*tr = sqlite3_column_int64(t, 0);
		*thi = sqlite3_column_int64(t, 1);
		*tlo = sqlite3_column_int64(t, 2);
		n++;
	}
	sqlite3_reset(t);
	if (rc != SQLITE_DONE)
		return sq_fail(s, rc, why, whysz, "finding a trace");
	if (n == 0)
		return sq_failf(why, whysz, -ENOENT, "graph store: no trace %s", hex);
	if (n > 1)
		return sq_failf(why, whysz, -EINVAL,
				"graph store: %s is the prefix of several traces: give more digits",
				hex);
	return 0;
}

static const char *col_text(struct graph *g, sqlite3_stmt *t, int col)
{
	const unsigned char *p = sqlite3_column_text(t, col);

	return graph_strndup(g, p ? (const char *)p : "",
			     p ? (size_t)sqlite3_column_bytes(t, col) : 0);
}

/* Turning a chunk's ids back into strings, each looked up once per load. */
struct loadctx {
	struct sq *s;
	struct graph *g;
	struct graph_id128 id;
	struct kmap types, strs; /* id -> index into names[] */
	const char **names;
	size_t nnames, capnames;
	int err;
};

static int name_add(struct loadctx *l, const char *p)
{
	if (!p)
		return -ENOMEM;
	if (l->nnames == l->capnames) {
		size_t ncap = l->capnames ? l->capnames * 2 : 32;
		const char **n = realloc(l->names, ncap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		l->names = n;
		l->capnames = ncap;
	}
	l->names[l->nnames++] = p;
	return 0;
}

static const char *load_str(struct loadctx *l, int64_t id)
{
	bool isnew;
	struct kent *e = sq_kmap_get(&l->strs, (uint64_t)id, 0, 0, &isnew);
	sqlite3_stmt *t;

	if (!e) {
		l->err = -ENOMEM;
		return NULL;
	}
	if (!isnew)
		return l->names[e->v[0]];
	t = sq_stmt(l->s, ST_STR_TEXT);
	sqlite3_bind_int64(t, 1, id);
	if (sqlite3_step(t) != SQLITE_ROW) {
		sqlite3_reset(t);
		l->err = -EIO; /* a chunk names a string that is not there */
		return NULL;
	}
	e->v[0] = (int64_t)l->nnames;
	l->err = name_add(l, col_text(l->g, t, 0));
	sqlite3_reset(t);
	return l->err ? NULL : l->names[e->v[0]];
}

static int load_type(struct loadctx *l, int64_t id, const char **svc, const char **name)
{
	bool isnew;
	struct kent *e = sq_kmap_get(&l->types, (uint64_t)id, 0, 0, &isnew);
	sqlite3_stmt *t;
	int rc;

	if (!e)
		return -ENOMEM;
	if (isnew) {
		t = sq_stmt(l->s, ST_TYPE_NAMES);
		sqlite3_bind_int64(t, 1, id);
		if (sqlite3_step(t) != SQLITE_ROW) {
			sqlite3_reset(t);
			return -EIO;
		}
		e->v[0] = (int64_t)l->nnames;
		rc = name_add(l, col_text(l->g, t, 0));
		if (!rc)
			rc = name_add(l, col_text(l->g, t, 1));
		sqlite3_reset(t);
		if (rc)
			return rc;
	}
	*svc = l->names[e->v[0]];
	*name = l->names[e->v[0] + 1];
	return 0;
}

static const char *load_attrs(struct loadctx *l, const char *p, size_t n)
{
	return n ? graph_strndup(l->g, p, n) : graph_strdup(l->g, "{}");
}

static int load_task(void *arg, const struct ctask *c)
{
	struct loadctx *l = arg;
	struct graph_task k = { .trace = l->id };
	int rc;

	if ((rc = load_type(l, c->type, &k.service, &k.name)))
		return rc;
	if (!(k.host = load_str(l, c->host)))
		return l->err;
	k.id = c->id;
	k.parent = c->parent;
	k.pid = c->pid;
	k.tid = c->tid;
	k.start = c->start;
	k.end = (int64_t)((uint64_t)c->start + c->dur);
	if (k.end < k.start)
		k.end = k.start; /* a damaged chunk: never end before start */
	k.skew = c->skew;
	k.status =
		c->status <= GRAPH_STATUS_ERROR ? (enum graph_status)c->status : GRAPH_STATUS_UNSET;
	k.source = c->source < GRAPH_SRC_COUNT ? (enum graph_source)c->source : GRAPH_SRC_UNKNOWN;
	k.attrs = load_attrs(l, c->attrs, c->alen);
	return k.attrs && graph_add_task(l->g, &k) ? 0 : -ENOMEM;
}

static int load_event(void *arg, const struct cevent *c)
{
	struct loadctx *l = arg;
	struct graph_event e = { .trace = l->id };

	if (!(e.name = load_str(l, c->name)))
		return l->err;
	e.task = c->task;
	e.id = c->id;
	e.time = c->time;
	e.source = c->source < GRAPH_SRC_COUNT ? (enum graph_source)c->source : GRAPH_SRC_UNKNOWN;
	e.attrs = load_attrs(l, c->attrs, c->alen);
	return e.attrs && graph_add_event(l->g, &e) ? 0 : -ENOMEM;
}

static int load_edge(void *arg, const struct cedge *c)
{
	struct loadctx *l = arg;
	struct graph_edge d = { .trace = l->id };

	if (c->kind >= GRAPH_EDGE_COUNT)
		return -EIO;
	d.kind = (enum graph_edge_kind)c->kind;
	d.from_task = c->from_task;
	d.from_event = c->from_event;
	d.to_task = c->to_task;
	d.to_event = c->to_event;
	d.source = c->source < GRAPH_SRC_COUNT ? (enum graph_source)c->source : GRAPH_SRC_UNKNOWN;
	return graph_add_edge(l->g, &d) ? 0 : -ENOMEM;
}

/*
 * graph_sort() of graph.c passes a NULL array to qsort() when a kind has no element (undefined
 * behaviour that UBSan reports): lend it an empty array until graph.c checks the count.
 */
static void sort_loaded(struct graph *g)
{
	struct graph_task t0;
	struct graph_event e0;
	struct graph_edge d0;
	bool nt = !g->tasks, ne = !g->events, nd = !g->edges;

	if (nt)
		g->tasks = &t0;
	if (ne)
		g->events = &e0;
	if (nd)
		g->edges = &d0;
	graph_sort(g);
	if (nt)
		g->tasks = NULL;
	if (ne)
		g->events = NULL;
	if (nd)
		g->edges = NULL;
}

int sq_load(struct graph_store *base, const char *hex, struct graph *g, char *why, size_t whysz)
{
	struct sq *s = (struct sq *)base;
	size_t nt = g->ntasks, ne = g->nevents, nd = g->nedges;
	struct loadctx l = { .s = s, .g = g };
	const struct cvisit v = {
		.task = load_task, .event = load_event, .edge = load_edge, .arg = &l
	};
	int64_t tr = 0, hi = 0, lo = 0;
	bool txn = false;
	sqlite3_stmt *t;
	int rc;

	/* one read transaction: the trace row and its chunks from one snapshot */
	if (sqlite3_get_autocommit(s->db)) {
		if ((rc = sq_exec(s, "BEGIN", why, whysz, "reading")))
			return rc;
		txn = true;
	}
	if ((rc = sq_find_trace(s, hex, &tr, &hi, &lo, why, whysz)))
		goto out;
	if (tr <= 0 || tr > (INT64_MAX >> 16)) {
		rc = sq_failf(why, whysz, -EIO, "graph store: trace %s: row id out of range", hex);
		goto out;
	}
	l.id.hi = sq_unbias(hi);
	l.id.lo = sq_unbias(lo);
	t = sq_stmt(s, ST_CHUNKS_GET);
	sqlite3_bind_int64(t, 1, tr << 16);
	sqlite3_bind_int64(t, 2, tr << 16 | CHUNK_MAX_SEQ);
	while ((rc = sqlite3_step(t)) == SQLITE_ROW) {
		int err = sq_chunk_decode(sqlite3_column_blob(t, 0),
					  (size_t)sqlite3_column_bytes(t, 0), &v);

		if (err) {
			sqlite3_reset(t);
			rc = err == -ENOMEM ? sq_failf(why, whysz, -ENOMEM,
						       "out of memory loading %s", hex) :
					      sq_failf(why, whysz, -EIO,
						       "graph store: trace %s: corrupt chunk", hex);
			goto out;
		}
	}
	sqlite3_reset(t);
	rc = rc == SQLITE_DONE ? 0 : sq_fail(s, rc, why, whysz, "loading a trace");
out:
	if (txn)
		sq_exec(s, "COMMIT", NULL, 0, "reading");
	sq_kmap_free(&l.types);
	sq_kmap_free(&l.strs);
	free(l.names);
	if (rc) {
		g->ntasks = nt;
		g->nevents = ne;
		g->nedges = nd;
		return rc;
	}
	sort_loaded(g);
	return 0;
}

/* ---------------------------------------------------------------- context */

static bool sketch_prefix(struct ctx_type *y, const void *blob, size_t len)
{
	const uint8_t *p = blob;
	size_t off = 0, cap = len / 2 < WEFT_SKETCH_NBUCKETS ? len / 2 : WEFT_SKETCH_NBUCKETS;
	uint64_t idx = 0, d, c, sum = 0;
	bool first = true;

	y->idx = malloc((cap + 1) * sizeof(*y->idx));
	y->cum = malloc((cap + 1) * sizeof(*y->cum));
	if (!y->idx || !y->cum)
		return false;
	while (off < len) {
		if (!sq_rd_varint(p, len, &off, &d) || !sq_rd_varint(p, len, &off, &c) || !c ||
		    d >= WEFT_SKETCH_NBUCKETS || y->n >= cap)
			return false;
		idx = first ? d : idx + d + 1;
		first = false;
		if (idx >= WEFT_SKETCH_NBUCKETS)
			return false;
		sum += c;
		y->idx[y->n] = (uint32_t)idx;
		y->cum[y->n++] = sum;
	}
	return true;
}

/* Tasks of the sketch in buckets <= bin (every task of the task's own bucket counts). */
static uint64_t sketch_at_or_below(const struct ctx_type *y, uint32_t bin)
{
	size_t lo = 0, hi = y->n; /* the first bucket above bin is in [lo, hi] */

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (y->idx[mid] <= bin)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo ? y->cum[lo - 1] : 0;
}

/* The decoded sketch of a type, from the cache if its count is unchanged. */
static int ctx_type_get(struct sq *s, int64_t type, struct ctx_type **out, char *why, size_t whysz)
{
	struct kent *e = sq_kmap_find(&s->ctcache, (uint64_t)type, 0, 0);
	sqlite3_stmt *t = sq_stmt(s, ST_TYPE_COUNT);
	struct ctx_type *y;
	int64_t n = 0;
	int rc;
	bool ok;

	sqlite3_bind_int64(t, 1, type);
	if ((rc = sq_step_int(s, t, &n, why, whysz, "reading a type")) < 0)
		return rc;
	if (e && s->ct[e->v[0]].count == (uint64_t)(n > 0 ? n : 0)) {
		*out = &s->ct[e->v[0]];
		return 0;
	}
	if (!e) { /* room was made at the start of the call */
		e = sq_kmap_get(&s->ctcache, (uint64_t)type, 0, 0, NULL);
		if (!e)
			return sq_failf(why, whysz, -ENOMEM, "out of memory");
		e->v[0] = (int64_t)s->nct++;
		memset(&s->ct[e->v[0]], 0, sizeof(s->ct[0]));
	}
	y = &s->ct[e->v[0]];
	free(y->idx);
	free(y->cum);
	memset(y, 0, sizeof(*y));
	t = sq_stmt(s, ST_TYPE_READ);
	sqlite3_bind_int64(t, 1, type);
	if ((rc = sqlite3_step(t)) != SQLITE_ROW) {
		sqlite3_reset(t);
		return rc == SQLITE_DONE ?
			       sq_failf(why, whysz, -EIO, "graph store: type %" PRId64 " vanished",
					type) :
			       sq_fail(s, rc, why, whysz, "reading a type");
	}
	n = sqlite3_column_int64(t, 0);
	ok = sketch_prefix(y, sqlite3_column_blob(t, 3), (size_t)sqlite3_column_bytes(t, 3));
	sqlite3_reset(t);
	if (!ok || n < 0 || (y->n && y->cum[y->n - 1] != (uint64_t)n) || (!y->n && n)) {
		rc = y->idx && y->cum ? -EIO : -ENOMEM;
		y->count = UINT64_MAX; /* never valid: read again next time */
		return sq_failf(why, whysz, rc, "graph store: type %" PRId64 ": corrupt sketch",
				type);
	}
	y->count = (uint64_t)n;
	*out = y;
	return 0;
}

int sq_context(struct graph_store *base, const struct graph *g, struct graph_context *c, char *why,
	       size_t whysz)
{
	struct sq *s = (struct sq *)base;
	struct kmap tasks = { 0 }, types = { 0 }, blocks = { 0 };
	uint32_t(*blk)[CONC_MS] = NULL;
	size_t nblk = 0, i;
	int64_t *ttype = NULL;
	int rc = 0;

	memset(c, 0, sizeof(*c));
	c->tasks = calloc(g->ntasks + 1, sizeof(*c->tasks));
	c->events = calloc(g->nevents + 1, sizeof(*c->events));
	c->edges = calloc(g->nedges + 1, sizeof(*c->edges));
	ttype = calloc(g->ntasks + 1, sizeof(*ttype));
	if (!c->tasks || !c->events || !c->edges || !ttype) {
		rc = sq_failf(why, whysz, -ENOMEM, "out of memory");
		goto out;
	}
	c->ntasks = g->ntasks;
	/* room in the sketch cache for every type of this trace, so that entries stay put */
	if (s->nct + g->ntasks > CT_MAX) {
		for (i = 0; i < s->nct; i++) {
			free(s->ct[i].idx);
			free(s->ct[i].cum);
		}
		s->nct = 0;
		sq_kmap_free(&s->ctcache);
	}
	if (s->nct + g->ntasks > s->capct) {
		size_t ncap = s->nct + g->ntasks + 64;
		struct ctx_type *n = realloc(s->ct, ncap * sizeof(*n));

		if (!n) {
			rc = sq_failf(why, whysz, -ENOMEM, "out of memory");
			goto out;
		}
		s->ct = n;
		s->capct = ncap;
	}
	c->nevents = g->nevents;
	c->nedges = g->nedges;
	if (sqlite3_get_autocommit(s->db) && (rc = sq_exec(s, "BEGIN", why, whysz, "reading")))
		goto out;
	for (i = 0; i < g->ntasks; i++) {
		const struct graph_task *k = &g->tasks[i];
		struct graph_task_ctx *x = &c->tasks[i];
		int64_t lat = sq_task_lat(k), type, host, proc;
		struct kent *e;
		struct ctx_type *y = NULL;
		uint64_t cum;
		bool isnew;

		e = sq_kmap_get(&tasks, k->trace.hi ^ k->trace.lo * 0x9e3779b97f4a7c15ull,
				k->trace.lo, k->id, NULL);
		if (!e) {
			rc = sq_failf(why, whysz, -ENOMEM, "out of memory");
			goto out_end;
		}
		e->v[0] = (int64_t)i + 1;
		x->hist_bin = weft_sketch_index(lat);
		if ((rc = sq_type_id(s, k->service ? k->service : "", k->name ? k->name : "", false,
				     &type, why, whysz)))
			goto out_end;
		ttype[i] = type;
		if (type) {
			e = sq_kmap_get(&types, (uint64_t)type, 0, 0, &isnew);
			if (!e) {
				rc = sq_failf(why, whysz, -ENOMEM, "out of memory");
				goto out_end;
			}
			if (isnew) {
				if ((rc = ctx_type_get(s, type, &y, why, whysz)))
					goto out_end;
				e->v[0] = y - s->ct;
			}
			y = &s->ct[e->v[0]];
			x->type_count = y->count;
			if (y->count) {
				cum = sketch_at_or_below(y, x->hist_bin);
				x->percentile = 100.0 * (double)cum / (double)y->count;
				if (x->percentile > 100.0)
					x->percentile = 100.0;
			}
		}
		if (k->pid < 0)
			continue;
		if ((rc = sq_str_id(s, k->host ? k->host : "", false, &host, why, whysz)))
			goto out_end;
		if (!host)
			continue;
		if ((rc = sq_proc_id(s, host, k->pid, false, &proc, why, whysz)))
			goto out_end;
		if (!proc)
			continue;
		{
			int64_t first, last, ms;
			uint32_t mx = 0;

			sq_task_ms(k->start, k->end > k->start ? k->end : k->start, &first, &last);
			for (ms = first; ms <= last;) {
				int64_t sec = sq_floordiv(ms, CONC_MS), off = ms - sec * CONC_MS;
				uint32_t *b;

				e = sq_kmap_get(&blocks, (uint64_t)proc, (uint64_t)sec, 0, &isnew);
				if (!e) {
					rc = sq_failf(why, whysz, -ENOMEM, "out of memory");
					goto out_end;
				}
				if (isnew) {
					bool found;

					if (!(nblk & (nblk - 1)) || !nblk) {
						void *nb = realloc(blk, (nblk ? nblk * 2 : 4) *
										sizeof(*blk));

						if (!nb) {
							rc = sq_failf(why, whysz, -ENOMEM,
								      "out of memory");
							goto out_end;
						}
						blk = nb;
					}
					if ((rc = sq_conc_read(s, proc, sec, blk[nblk], &found, why,
							       whysz)))
						goto out_end;
					e->v[0] = (int64_t)nblk++;
				}
				b = blk[e->v[0]];
				for (; off < CONC_MS && ms <= last; off++, ms++)
					if (b[off] > mx)
						mx = b[off];
			}
			x->concurrency_max = mx ? mx - 1 : 0;
		}
	}
	for (i = 0; i < g->nevents; i++) {
		const struct graph_event *ev = &g->events[i];
		struct kent *e =
			sq_kmap_find(&tasks, ev->trace.hi ^ ev->trace.lo * 0x9e3779b97f4a7c15ull,
				     ev->trace.lo, ev->task);
		int64_t type, name, n;
		sqlite3_stmt *t;
		uint64_t count;

		if (!e || !(type = ttype[e->v[0] - 1]))
			continue;
		count = c->tasks[e->v[0] - 1].type_count;
		if ((rc = sq_str_id(s, ev->name ? ev->name : "", false, &name, why, whysz)))
			goto out_end;
		n = 0;
		if (name) {
			t = sq_stmt(s, ST_EVAGG_GET);
			sqlite3_bind_int64(t, 1, type);
			sqlite3_bind_int64(t, 2, name);
			if ((rc = sq_step_int(s, t, &n, why, whysz, "reading event counts")) < 0)
				goto out_end;
			rc = 0;
		}
		c->events[i].share = count && n > 0 ? (double)n / (double)count : 0.0;
		c->events[i].rare = count && c->events[i].share < GRAPH_RARE_SHARE;
	}
	for (i = 0; i < g->nedges; i++) {
		const struct graph_edge *ed = &g->edges[i];
		uint64_t th = ed->trace.hi ^ ed->trace.lo * 0x9e3779b97f4a7c15ull;
		struct kent *f = sq_kmap_find(&tasks, th, ed->trace.lo, ed->from_task);
		struct kent *to = sq_kmap_find(&tasks, th, ed->trace.lo, ed->to_task);
		int64_t pt, ct, n = 0;
		uint64_t count;
		sqlite3_stmt *t;

		if (!f || !to || !(pt = ttype[f->v[0] - 1]) || !(ct = ttype[to->v[0] - 1]))
			continue;
		count = c->tasks[f->v[0] - 1].type_count;
		t = sq_stmt(s, ST_EDGEAGG_GET);
		sqlite3_bind_int64(t, 1, pt);
		sqlite3_bind_int64(t, 2, ct);
		sqlite3_bind_int(t, 3, (int)ed->kind);
		if ((rc = sq_step_int(s, t, &n, why, whysz, "reading edge counts")) < 0)
			goto out_end;
		rc = 0;
		c->edges[i].share = count && n > 0 ? (double)n / (double)count : 0.0;
		c->edges[i].rare = count && c->edges[i].share < GRAPH_RARE_SHARE;
	}
out_end:
	sq_exec(s, "COMMIT", NULL, 0, "reading");
out:
	free(ttype);
	free(blk);
	sq_kmap_free(&tasks);
	sq_kmap_free(&types);
	sq_kmap_free(&blocks);
	if (rc)
		graph_context_free(c);
	return rc;
}

/* ---------------------------------------------------------------- sketch, concurrency */

int sq_read_sketch(struct sq *s, int64_t type, uint64_t *counts, int64_t *n, int64_t *mn,
		   int64_t *mx, char *why, size_t whysz)
{
	sqlite3_stmt *t = sq_stmt(s, ST_TYPE_READ);
	int rc;
	bool ok;

	sqlite3_bind_int64(t, 1, type);
	rc = sqlite3_step(t);
	if (rc != SQLITE_ROW) {
		sqlite3_reset(t);
		return rc == SQLITE_DONE ?
			       sq_failf(why, whysz, -ENOENT, "graph store: no such type") :
			       sq_fail(s, rc, why, whysz, "reading a type");
	}
	memset(counts, 0, WEFT_SKETCH_NBUCKETS * sizeof(*counts));
	*n = sqlite3_column_int64(t, 0);
	*mn = sqlite3_column_int64(t, 1);
	*mx = sqlite3_column_int64(t, 2);
	ok = sq_sketch_add_blob(counts, sqlite3_column_blob(t, 3),
				(size_t)sqlite3_column_bytes(t, 3));
	sqlite3_reset(t);
	if (!ok || *n < 0)
		return sq_failf(why, whysz, -EIO, "graph store: type %" PRId64 ": corrupt sketch",
				type);
	return 0;
}

int sq_type_sketch(struct graph_store *base, const char *service, const char *name,
		   uint64_t *counts, char *why, size_t whysz)
{
	struct sq *s = (struct sq *)base;
	int64_t type, n, mn, mx;
	int rc;

	if ((rc = sq_type_id(s, service, name, false, &type, why, whysz)))
		return rc;
	if (!type)
		return sq_failf(why, whysz, -ENOENT, "graph store: no task type %s/%s", service,
				name);
	return sq_read_sketch(s, type, counts, &n, &mn, &mx, why, whysz);
}

int sq_concurrency(struct graph_store *base, const char *host, int64_t pid, int64_t from,
		   int64_t to, uint32_t *counts, size_t n, char *why, size_t whysz)
{
	struct sq *s = (struct sq *)base;
	int64_t first = sq_floordiv(from, 1000000), end = sq_ceildiv(to, 1000000), hid, proc = 0,
		ms;
	size_t i = 0;
	int rc;

	if (end < first)
		return sq_failf(why, whysz, -EINVAL, "graph store: concurrency: to before from");
	if ((uint64_t)(end - first) < n)
		n = (size_t)(end - first);
	memset(counts, 0, n * sizeof(*counts));
	if ((rc = sq_str_id(s, host, false, &hid, why, whysz)))
		return rc;
	if (hid && (rc = sq_proc_id(s, hid, pid, false, &proc, why, whysz)))
		return rc;
	if (!proc)
		return (int)(n > INT_MAX ? INT_MAX : n);
	for (ms = first; i < n;) {
		int64_t sec = sq_floordiv(ms, CONC_MS), off = ms - sec * CONC_MS;
		bool found;

		if ((rc = sq_conc_read(s, proc, sec, s->conc_scratch, &found, why, whysz)))
			return rc;
		for (; off < CONC_MS && i < n; off++, ms++)
			counts[i++] = s->conc_scratch[off];
	}
	return (int)(n > INT_MAX ? INT_MAX : n);
}

/* ---------------------------------------------------------------- list and stats */

/* weft_chunk_match(data, what): 1 if a task of the chunk has a type of the list's filter
 * (what 1) or its host (what 2).  Registered as SQLITE_DIRECTONLY: a view or trigger in a
 * crafted file cannot call it. */
static int match_task(void *arg, const struct ctask *t)
{
	const int64_t *w = arg; /* [0]: what, [1]: struct sq * */
	const struct sq *s = (const struct sq *)(intptr_t)w[1];

	if (w[0] == 1)
		return sq_kmap_find(&s->lf_types, (uint64_t)t->type, 0, 0) ? 1 : 0;
	return t->host == s->lf_host ? 1 : 0;
}

void sq_chunk_match(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
	int64_t w[2] = { 0, (int64_t)(intptr_t)sqlite3_user_data(ctx) };
	const struct cvisit v = { .task = match_task, .arg = w };
	int rc;

	(void)argc;
	w[0] = sqlite3_value_int64(argv[1]);
	rc = sq_chunk_decode(sqlite3_value_blob(argv[0]), (size_t)sqlite3_value_bytes(argv[0]), &v);
	if (rc < 0) {
		sqlite3_result_error(ctx, "corrupt chunk", -1);
		return;
	}
	sqlite3_result_int(ctx, rc == 1);
}

ssize_t sq_list(struct graph_store *base, const struct graph_filter *fp,
		struct graph_trace_row **rows, char *why, size_t whysz)
{
	struct sq *s = (struct sq *)base;
	struct graph_filter f = fp ? *fp : (struct graph_filter){ 0 };
	size_t limit = f.limit ? f.limit : 20, n = 0;
	char sql[1536];
	int len, rc, arg = 1;
	int64_t hostid = 0;
	sqlite3_stmt *t;
	const char *order;

	*rows = NULL;
	if (limit > 1000000)
		limit = 1000000;
	if (f.host) {
		if ((rc = sq_str_id(s, f.host, false, &hostid, why, whysz)))
			return rc;
		if (!hostid)
			return 0;
	}
	s->lf_host = hostid;
	sq_kmap_free(&s->lf_types);
	if (f.service || f.name) { /* the ids of the types that match */
		rc = sqlite3_prepare_v2(
			s->db,
			"SELECT id FROM types WHERE (?1 IS NULL OR service = ?1) AND "
			"(?2 IS NULL OR name = ?2)",
			-1, &t, NULL);
		if (rc != SQLITE_OK)
			return sq_fail(s, rc, why, whysz, "listing traces");
		if (f.service)
			sqlite3_bind_text(t, 1, f.service, -1, SQLITE_STATIC);
		if (f.name)
			sqlite3_bind_text(t, 2, f.name, -1, SQLITE_STATIC);
		while ((rc = sqlite3_step(t)) == SQLITE_ROW)
			if (!sq_kmap_get(&s->lf_types, (uint64_t)sqlite3_column_int64(t, 0), 0, 0,
					 NULL)) {
				rc = SQLITE_NOMEM;
				break;
			}
		sqlite3_finalize(t);
		if (rc != SQLITE_DONE)
			return sq_failf(why, whysz, sq_errno(rc), "graph store: listing traces: %s",
					sqlite3_errstr(rc));
		if (!s->lf_types.n)
			return 0;
	}
	switch (f.sort) {
	case GRAPH_SORT_START_ASC:
		order = "t.start_ns ASC, t.tr ASC";
		break;
	case GRAPH_SORT_DURATION_DESC:
		order = "t.end_ns - t.start_ns DESC, t.tr DESC";
		break;
	case GRAPH_SORT_DURATION_ASC:
		order = "t.end_ns - t.start_ns ASC, t.tr ASC";
		break;
	default:
		order = "t.start_ns DESC, t.tr DESC";
		break;
	}
	len = snprintf(sql, sizeof(sql),
		       "SELECT t.hi, t.lo, t.start_ns, t.end_ns, t.ntasks, t.nhosts, ty.service, "
		       "ty.name, h.s, coalesce(m.flags, 0) FROM traces AS t LEFT JOIN types AS ty "
		       "ON ty.id = t.root_type LEFT JOIN strs AS h ON h.id = t.root_host "
		       "LEFT JOIN marks AS m ON m.tr = t.tr WHERE 1%s%s%s%s%s%s%s%s%s "
		       "ORDER BY %s LIMIT %zu",
		       f.from ? " AND t.start_ns >= ?1" : "", f.to ? " AND t.start_ns < ?2" : "",
		       f.min_dur ? " AND t.end_ns - t.start_ns >= ?3" : "",
		       f.max_dur ? " AND t.end_ns - t.start_ns <= ?4" : "",
		       f.service || f.name ? " AND EXISTS (SELECT 1 FROM chunks AS c WHERE c.id "
					     "BETWEEN t.tr * 65536 AND t.tr * 65536 + 65535 AND "
					     "weft_chunk_match(c.data, 1))" :
					     "",
		       "", "", "",
		       f.host ? " AND EXISTS (SELECT 1 FROM chunks AS c WHERE c.id BETWEEN "
				"t.tr * 65536 AND t.tr * 65536 + 65535 AND "
				"weft_chunk_match(c.data, 2))" :
				"",
		       order, limit);
	if (len < 0 || (size_t)len >= sizeof(sql))
		return sq_failf(why, whysz, -EINVAL, "graph store: list: query too long");
	rc = sqlite3_prepare_v2(s->db, sql, -1, &t, NULL);
	if (rc != SQLITE_OK)
		return sq_fail(s, rc, why, whysz, "listing traces");
	(void)arg;
	if (f.from)
		sqlite3_bind_int64(t, 1, f.from);
	if (f.to)
		sqlite3_bind_int64(t, 2, f.to);
	if (f.min_dur)
		sqlite3_bind_int64(t, 3, f.min_dur);
	if (f.max_dur)
		sqlite3_bind_int64(t, 4, f.max_dur);
	*rows = calloc(limit < 64 ? limit : 64, sizeof(**rows));
	if (!*rows) {
		sqlite3_finalize(t);
		return sq_failf(why, whysz, -ENOMEM, "out of memory");
	}
	while ((rc = sqlite3_step(t)) == SQLITE_ROW) {
		struct graph_trace_row *r;

		if (n >= 64 && !(n & (n - 1))) {
			struct graph_trace_row *nr = realloc(*rows, 2 * n * sizeof(*nr));

			if (!nr) {
				rc = SQLITE_NOMEM;
				break;
			}
			*rows = nr;
		}
		r = &(*rows)[n++];
		memset(r, 0, sizeof(*r));
		r->trace.hi = sq_unbias(sqlite3_column_int64(t, 0));
		r->trace.lo = sq_unbias(sqlite3_column_int64(t, 1));
		r->start = sqlite3_column_int64(t, 2);
		r->end = sqlite3_column_int64(t, 3);
		r->ntasks = (uint32_t)sqlite3_column_int64(t, 4);
		r->nhosts = (uint32_t)sqlite3_column_int64(t, 5);
		sq_cpy(r->service, sizeof(r->service), sqlite3_column_text(t, 6));
		sq_cpy(r->name, sizeof(r->name), sqlite3_column_text(t, 7));
		sq_cpy(r->host, sizeof(r->host), sqlite3_column_text(t, 8));
		r->incomplete = (uint32_t)sqlite3_column_int64(t, 9) & GRAPH_INC_ALL;
	}
	if (rc != SQLITE_DONE) {
		rc = sq_fail(s, rc, why, whysz, "listing traces");
		sqlite3_finalize(t);
		free(*rows);
		*rows = NULL;
		return rc;
	}
	sqlite3_finalize(t);
	return (ssize_t)n;
}

/* The nearest-rank quantile of a sketch, as agg_state_final() computes it for AGG_QUANTILE:
 * rank 1 is the min and rank n the max (both exact), otherwise the midpoint of the bucket's
 * integers, clamped to [min, max]; rounded to the nearest ns. */
static int64_t sketch_quantile(const uint64_t *counts, uint64_t n, int64_t mn, int64_t mx, double q)
{
	uint64_t k = agg_quantile_rank(q, n), cum = 0;
	__u64 lo, width;
	double v;
	size_t i;

	if (!n)
		return 0;
	if (k == 1)
		return mn;
	if (k == n)
		return mx;
	for (i = 0; i < WEFT_SKETCH_NBUCKETS - 1; i++) {
		cum += counts[i];
		if (cum >= k)
			break;
	}
	weft_sketch_bounds((__u32)i, &lo, &width);
	v = (double)lo + (double)(width - 1) / 2.0;
	if (v < (double)mn)
		v = (double)mn;
	if (v > (double)mx)
		v = (double)mx;
	return (int64_t)llround(v);
}

ssize_t sq_stats(struct graph_store *base, struct graph_type_stats **rows, char *why, size_t whysz)
{
	struct sq *s = (struct sq *)base;
	sqlite3_stmt *t = NULL, *ev = NULL, *ed = NULL;
	size_t n = 0, cap = 0;
	int rc;

	*rows = NULL;
	rc = sqlite3_prepare_v2(s->db,
				"SELECT id, service, name FROM types WHERE count > 0 "
				"ORDER BY count DESC, service, name",
				-1, &t, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_prepare_v2(s->db,
					"SELECT n.s, ea.ntasks FROM event_agg AS ea CROSS JOIN "
					"strs AS n ON n.id = ea.name WHERE ea.type = ?1 "
					"ORDER BY ea.ntasks ASC, n.s ASC LIMIT "
					"3",
					-1, &ev, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_prepare_v2(s->db,
					"SELECT y.service, y.name, ea.kind, ea.count FROM edge_agg "
					"AS ea CROSS JOIN types AS y ON y.id = ea.ctype WHERE "
					"ea.ptype = ?1 ORDER BY ea.count ASC, y.service, y.name, "
					"ea.kind LIMIT 3",
					-1, &ed, NULL);
	if (rc != SQLITE_OK) {
		rc = sq_fail(s, rc, why, whysz, "reading statistics");
		goto out;
	}
	if (sqlite3_get_autocommit(s->db) && (rc = sq_exec(s, "BEGIN", why, whysz, "reading")))
		goto out;
	while ((rc = sqlite3_step(t)) == SQLITE_ROW) {
		struct graph_type_stats *r;
		int64_t cnt, mn, mx, type = sqlite3_column_int64(t, 0);
		int rc2;

		if (n == cap) {
			size_t ncap = cap ? cap * 2 : 16;
			struct graph_type_stats *nr = realloc(*rows, ncap * sizeof(*nr));

			if (!nr) {
				rc = sq_failf(why, whysz, -ENOMEM, "out of memory");
				goto out_end;
			}
			*rows = nr;
			cap = ncap;
		}
		r = &(*rows)[n++];
		memset(r, 0, sizeof(*r));
		sq_cpy(r->service, sizeof(r->service), sqlite3_column_text(t, 1));
		sq_cpy(r->name, sizeof(r->name), sqlite3_column_text(t, 2));
		if ((rc = sq_read_sketch(s, type, s->scratch, &cnt, &mn, &mx, why, whysz)))
			goto out_end;
		r->count = (uint64_t)cnt;
		r->p50 = sketch_quantile(s->scratch, r->count, mn, mx, 0.5);
		r->p90 = sketch_quantile(s->scratch, r->count, mn, mx, 0.9);
		r->p99 = sketch_quantile(s->scratch, r->count, mn, mx, 0.99);
		sqlite3_reset(ev);
		sqlite3_bind_int64(ev, 1, type);
		while ((rc2 = sqlite3_step(ev)) == SQLITE_ROW &&
		       r->nrare_events < GRAPH_STATS_RAREST) {
			struct graph_rare_event *x = &r->rare_events[r->nrare_events++];
			int64_t k = sqlite3_column_int64(ev, 1);

			sq_cpy(x->name, sizeof(x->name), sqlite3_column_text(ev, 0));
			x->tasks = k > 0 ? (uint64_t)k : 0;
			x->share = r->count ? (double)x->tasks / (double)r->count : 0;
		}
		sqlite3_reset(ev);
		sqlite3_reset(ed);
		sqlite3_bind_int64(ed, 1, type);
		while ((rc2 = sqlite3_step(ed)) == SQLITE_ROW &&
		       r->nrare_edges < GRAPH_STATS_RAREST) {
			struct graph_rare_edge *x = &r->rare_edges[r->nrare_edges++];
			int64_t k = sqlite3_column_int64(ed, 3);
			int kind = sqlite3_column_int(ed, 2);

			sq_cpy(x->service, sizeof(x->service), sqlite3_column_text(ed, 0));
			sq_cpy(x->name, sizeof(x->name), sqlite3_column_text(ed, 1));
			x->kind = kind >= 0 && kind < GRAPH_EDGE_COUNT ?
					  (enum graph_edge_kind)kind :
					  GRAPH_EDGE_FOLLOWS;
			x->count = k > 0 ? (uint64_t)k : 0;
			x->share = r->count ? (double)x->count / (double)r->count : 0;
		}
		sqlite3_reset(ed);
	}
	rc = rc == SQLITE_DONE ? 0 : sq_fail(s, rc, why, whysz, "reading statistics");
out_end:
	sq_exec(s, "COMMIT", NULL, 0, "reading");
out:
	sqlite3_finalize(t);
	sqlite3_finalize(ev);
	sqlite3_finalize(ed);
	if (rc) {
		free(*rows);
		*rows = NULL;
		return rc;
	}
	return (ssize_t)n;
}
