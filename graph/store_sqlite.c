// SPDX-License-Identifier: Apache-2.0
/*
 * The graph store on SQLite (store.h; docs/graphs.md "The store" has the schema table by
 * table).  One file, WAL mode, one writer; every put is one transaction.
 *
 * Why it is built this way:
 *
 *  - Showing one trace with its context must cost O(size of the trace), whatever the number of
 *    traces stored.  So the elements (tasks, events, edges) that one put brings for one trace
 *    are one "chunk" BLOB whose row id is the trace's row id times 2^16 plus a sequence
 *    number: loading a trace is one range scan of the chunk table, and every aggregate the
 *    context reads is a point lookup by primary key (types, event_agg, edge_agg, conc).
 *    Nothing on that path scans a table; tests/unit/test_graph_store.c checks the plans with
 *    EXPLAIN QUERY PLAN.
 *
 *  - A row per span would cost two to three B-tree inserts per span (task, edge, event) and
 *    cap a put near 100,000 spans/s; a chunk is one insert per trace and put, and about a
 *    third of the bytes (varints, times relative to the chunk's first, ids for strings).  The
 *    price: a task is not a row SQL can query; graph_store_list()'s filters on the tasks of a
 *    trace read its chunks through weft_chunk_match(), a function this file registers.
 *
 *  - A put visits its batch trace by trace (its elements grouped by a hash of the trace ids,
 *    the traces in the order they first appear): the maps that find a trace's tasks, hosts,
 *    edges and event names hold one trace and stay in cache, and each trace's chunk is
 *    written as soon as its elements are coded.
 *
 *  - The aggregates are maintained on ingest, and a put accumulates them in memory (hash maps
 *    keyed by ids) and writes each touched aggregate row once, at the end of the
 *    transaction, so that a batch of a million spans of ten task types updates ten sketch
 *    rows, not a million.  The accumulators are bounded: past a limit they are written back
 *    early, inside the same transaction, so the all-or-nothing rule still holds.
 *
 *  - Concurrency per millisecond is kept per (process, one-second block) as a run-length
 *    coded BLOB of 1000 counters.  A task adds +1 at its first ms and -1 after its last in a
 *    difference array per touched block, so its cost is the number of blocks it touches, not
 *    its length in ms; only its first GRAPH_CONC_MAX_MS ms count (at most 61 blocks).
 *
 *  - Strings that repeat (hosts, event names) and task types are interned, and their ids
 *    are cached in memory across puts; a rolled-back put drops the caches, since the ids it
 *    created are gone with it.
 *
 *  - A trace put again, or continued in a later batch, has its stored chunks decoded into the
 *    put's maps first (O(size of that trace)), so that a task, an edge or an event name of a
 *    task is counted once in the aggregates however often it arrives.
 *
 *  - Anything read back from the file may be hostile (a corrupt or crafted store): every BLOB
 *    is decoded with bounds checks, every enum clamped, every string cut; an error says what is
 *    wrong and nothing crashes.
 *
 * Trace ids are stored as two integers with the sign bit flipped, so that SQL's signed order
 * is the unsigned order of the hex form and a hex prefix is an index range.
 *
 * The store is five files by role, sharing struct sq and their helpers (prefixed sq_) through
 * the private store_sqlite_int.h: this one opens, creates and migrates the file, holds the
 * prepared statements, the id caches and the ops table, and closes; store_sqlite_code.c the
 * hash maps and BLOB codings; store_sqlite_put.c ingest, put_aggs and marks;
 * store_sqlite_read.c load, context, list, stats, sketches; store_sqlite_keep.c retention
 * and merge.
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

/* ---------------------------------------------------------------- the store */

static const char *const stmt_sql[ST_COUNT] = {
	[ST_BEGIN] = "BEGIN IMMEDIATE",
	[ST_COMMIT] = "COMMIT",
	[ST_ROLLBACK] = "ROLLBACK",
	[ST_STR_GET] = "SELECT id FROM strs WHERE s = ?1",
	[ST_STR_INS] = "INSERT INTO strs(s) VALUES (?1)",
	[ST_STR_TEXT] = "SELECT s FROM strs WHERE id = ?1",
	[ST_TYPE_NAMES] = "SELECT service, name FROM types WHERE id = ?1",
	[ST_TYPE_COUNT] = "SELECT count FROM types WHERE id = ?1",
	[ST_CHUNK_INS] = "INSERT INTO chunks(id, data) VALUES (?1, ?2)",
	[ST_CHUNKS_GET] = "SELECT data, id FROM chunks WHERE id BETWEEN ?1 AND ?2",
	[ST_DEL_CHUNKS] = "DELETE FROM chunks WHERE id BETWEEN ?1 AND ?2",
	[ST_TYPE_GET] = "SELECT id FROM types WHERE service = ?1 AND name = ?2",
	[ST_TYPE_INS] = "INSERT INTO types(service, name, count, min_ns, max_ns, sketch) "
			"VALUES (?1, ?2, 0, 0, 0, x'')",
	[ST_TYPE_READ] = "SELECT count, min_ns, max_ns, sketch FROM types WHERE id = ?1",
	[ST_TYPE_WRITE] = "UPDATE types SET count = ?2, min_ns = ?3, max_ns = ?4, sketch = ?5 "
			  "WHERE id = ?1",
	[ST_PROC_GET] = "SELECT id FROM procs WHERE host = ?1 AND pid = ?2",
	[ST_PROC_INS] = "INSERT INTO procs(host, pid) VALUES (?1, ?2)",
	/* a put's lookup of a trace, mostly absent: the id index alone, the row only if found */
	[ST_TRACE_GET] = "SELECT tr FROM traces WHERE hi = ?1 AND lo = ?2",
	[ST_TRACE_ROW] = "SELECT start_ns, end_ns, ntasks, nhosts, root_task, root_type, "
			 "root_host, root_start, root_parentless FROM traces WHERE tr = ?1",
	[ST_TRACE_INS] = "INSERT INTO traces(tr, hi, lo, start_ns, end_ns, ntasks, nhosts, "
			 "root_task, root_type, root_host, root_start, root_parentless) "
			 "VALUES (?1, ?11, ?12, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
	[ST_TRACE_UPD] = "UPDATE traces SET start_ns = ?2, end_ns = ?3, ntasks = ?4, nhosts = ?5, "
			 "root_task = ?6, root_type = ?7, root_host = ?8, root_start = ?9, "
			 "root_parentless = ?10 WHERE tr = ?1",
	[ST_TRACE_MAX] = "SELECT coalesce(max(tr), 0) FROM traces",
	[ST_EVAGG_ADD] = "INSERT INTO event_agg(type, name, ntasks) VALUES (?1, ?2, ?3) "
			 "ON CONFLICT(type, name) DO UPDATE SET ntasks = ntasks + excluded.ntasks",
	[ST_EDGEAGG_ADD] =
		"INSERT INTO edge_agg(ptype, ctype, kind, count) VALUES (?1, ?2, ?3, ?4) "
		"ON CONFLICT(ptype, ctype, kind) DO UPDATE SET count = count + excluded.count",
	[ST_EVAGG_GET] = "SELECT ntasks FROM event_agg WHERE type = ?1 AND name = ?2",
	[ST_EDGEAGG_GET] =
		"SELECT count FROM edge_agg WHERE ptype = ?1 AND ctype = ?2 AND kind = ?3",
	[ST_CONC_GET] = "SELECT counts FROM conc WHERE proc = ?1 AND sec = ?2",
	[ST_CONC_PUT] = "INSERT OR REPLACE INTO conc(proc, sec, counts) VALUES (?1, ?2, ?3)",
	[ST_FIND_EXACT] = "SELECT tr, hi, lo FROM traces WHERE hi = ?1 AND lo = ?2",
	[ST_FIND_HI] = "SELECT tr, hi, lo FROM traces WHERE hi BETWEEN ?1 AND ?2 LIMIT 2",
	[ST_FIND_LO] =
		"SELECT tr, hi, lo FROM traces WHERE hi = ?1 AND lo BETWEEN ?2 AND ?3 LIMIT 2",
	[ST_DEL_TRACE] = "DELETE FROM traces WHERE tr = ?1",
	[ST_MARK_GET] = "SELECT flags FROM marks WHERE tr = ?1",
	[ST_MARK_SET] = "INSERT OR REPLACE INTO marks(tr, flags) VALUES (?1, ?2)",
	[ST_MARK_DEL] = "DELETE FROM marks WHERE tr = ?1",
};

/* Version 2: traces marked incomplete (GRAPH_INC_*), a row only for a marked trace. */
#define MARKS_SQL "CREATE TABLE marks(tr INTEGER PRIMARY KEY, flags INTEGER NOT NULL);"

static const char schema_sql[] =
	"CREATE TABLE strs(id INTEGER PRIMARY KEY, s TEXT NOT NULL UNIQUE);"
	"CREATE TABLE types(id INTEGER PRIMARY KEY, service TEXT NOT NULL, name TEXT NOT NULL,"
	" count INTEGER NOT NULL, min_ns INTEGER NOT NULL, max_ns INTEGER NOT NULL,"
	" sketch BLOB NOT NULL, UNIQUE(service, name));"
	"CREATE TABLE procs(id INTEGER PRIMARY KEY, host INTEGER NOT NULL, pid INTEGER NOT NULL,"
	" UNIQUE(host, pid));"
	"CREATE TABLE traces(tr INTEGER PRIMARY KEY, hi INTEGER NOT NULL, lo INTEGER NOT NULL,"
	" start_ns INTEGER NOT NULL, end_ns INTEGER NOT NULL, ntasks INTEGER NOT NULL,"
	" nhosts INTEGER NOT NULL, root_task INTEGER NOT NULL, root_type INTEGER NOT NULL,"
	" root_host INTEGER NOT NULL, root_start INTEGER NOT NULL,"
	" root_parentless INTEGER NOT NULL);"
	"CREATE UNIQUE INDEX traces_id ON traces(hi, lo);"
	"CREATE INDEX traces_start ON traces(start_ns);"
	"CREATE TABLE chunks(id INTEGER PRIMARY KEY, data BLOB NOT NULL);"
	"CREATE TABLE event_agg(type INTEGER NOT NULL, name INTEGER NOT NULL,"
	" ntasks INTEGER NOT NULL, PRIMARY KEY(type, name)) WITHOUT ROWID;"
	"CREATE TABLE edge_agg(ptype INTEGER NOT NULL, ctype INTEGER NOT NULL,"
	" kind INTEGER NOT NULL, count INTEGER NOT NULL,"
	" PRIMARY KEY(ptype, ctype, kind)) WITHOUT ROWID;"
	"CREATE TABLE conc(proc INTEGER NOT NULL, sec INTEGER NOT NULL, counts BLOB NOT NULL,"
	" PRIMARY KEY(proc, sec)) WITHOUT ROWID;" MARKS_SQL;

static const struct graph_store_ops sqlite_ops;

int sq_fail(struct sq *s, int rc, char *why, size_t whysz, const char *what)
{
	return sq_failf(why, whysz, sq_errno(rc), "graph store: %s: %s", what,
			sqlite3_errmsg(s->db));
}

/* A prepared statement, reset with its bindings cleared. */
sqlite3_stmt *sq_stmt(struct sq *s, int which)
{
	sqlite3_stmt *t = s->st[which];

	sqlite3_reset(t); /* callers bind every parameter */
	return t;
}

/* Runs a statement that returns no row (or whose rows are ignored). */
int sq_step_done(struct sq *s, sqlite3_stmt *t, char *why, size_t whysz, const char *what)
{
	int rc;

	while ((rc = sqlite3_step(t)) == SQLITE_ROW)
		;
	if (rc != SQLITE_DONE) {
		rc = sq_fail(s, rc, why, whysz, what);
		sqlite3_reset(t);
		return rc;
	}
	sqlite3_reset(t);
	return 0;
}

/* Executes one integer-returning statement: 1 and *out if a row came, 0 if none, -errno. */
int sq_step_int(struct sq *s, sqlite3_stmt *t, int64_t *out, char *why, size_t whysz,
		const char *what)
{
	int rc = sqlite3_step(t);

	if (rc == SQLITE_ROW) {
		*out = sqlite3_column_int64(t, 0);
		sqlite3_reset(t);
		return 1;
	}
	if (rc == SQLITE_DONE) {
		sqlite3_reset(t);
		return 0;
	}
	rc = sq_fail(s, rc, why, whysz, what);
	sqlite3_reset(t);
	return rc;
}

void sq_drop_caches(struct sq *s)
{
	sq_smap_clear(&s->strs);
	sq_smap_clear(&s->types);
	sq_kmap_free(&s->procs);
}

/* The id of a string, interned if create; 0 when absent and !create (ids start at 1). */
int sq_str_id(struct sq *s, const char *str, bool create, int64_t *id, char *why, size_t whysz)
{
	size_t len = strlen(str);
	uint64_t h = sq_shash(str, len);
	struct sent *e = sq_smap_find(&s->strs, str, len, h);
	sqlite3_stmt *t;
	int rc;

	if (e) {
		*id = e->v;
		return 0;
	}
	t = sq_stmt(s, ST_STR_GET);
	sqlite3_bind_text(t, 1, str, (int)len, SQLITE_STATIC);
	rc = sq_step_int(s, t, id, why, whysz, "reading a string");
	if (rc < 0)
		return rc;
	if (!rc) {
		if (!create) {
			*id = 0;
			return 0;
		}
		t = sq_stmt(s, ST_STR_INS);
		sqlite3_bind_text(t, 1, str, (int)len, SQLITE_STATIC);
		rc = sq_step_done(s, t, why, whysz, "adding a string");
		if (rc)
			return rc;
		*id = sqlite3_last_insert_rowid(s->db);
	}
	return sq_smap_put(&s->strs, str, len, h, *id) ?
		       sq_failf(why, whysz, -ENOMEM, "out of memory") :
		       0;
}

int sq_type_id(struct sq *s, const char *service, const char *name, bool create, int64_t *id,
	       char *why, size_t whysz)
{
	size_t ls = strlen(service), ln = strlen(name), len = ls + 1 + ln;
	char stackkey[512], *key = len <= sizeof(stackkey) ? stackkey : malloc(len);
	struct sent *e;
	sqlite3_stmt *t;
	uint64_t h;
	int rc = 0;

	if (!key)
		return sq_failf(why, whysz, -ENOMEM, "out of memory");
	memcpy(key, service, ls);
	key[ls] = 0;
	memcpy(key + ls + 1, name, ln);
	h = sq_shash(key, len);
	e = sq_smap_find(&s->types, key, len, h);
	if (e) {
		*id = e->v;
		goto out;
	}
	t = sq_stmt(s, ST_TYPE_GET);
	sqlite3_bind_text(t, 1, service, (int)ls, SQLITE_STATIC);
	sqlite3_bind_text(t, 2, name, (int)ln, SQLITE_STATIC);
	rc = sq_step_int(s, t, id, why, whysz, "reading a task type");
	if (rc < 0)
		goto out;
	if (!rc) {
		*id = 0;
		if (!create)
			goto out;
		t = sq_stmt(s, ST_TYPE_INS);
		sqlite3_bind_text(t, 1, service, (int)ls, SQLITE_STATIC);
		sqlite3_bind_text(t, 2, name, (int)ln, SQLITE_STATIC);
		rc = sq_step_done(s, t, why, whysz, "adding a task type");
		if (rc)
			goto out;
		*id = sqlite3_last_insert_rowid(s->db);
	}
	rc = sq_smap_put(&s->types, key, len, h, *id) ?
		     sq_failf(why, whysz, -ENOMEM, "out of memory") :
		     0;
out:
	if (key != stackkey)
		free(key);
	return rc;
}

int sq_proc_id(struct sq *s, int64_t host, int64_t pid, bool create, int64_t *id, char *why,
	       size_t whysz)
{
	struct kent *e = sq_kmap_find(&s->procs, (uint64_t)host, (uint64_t)pid, 0);
	sqlite3_stmt *t;
	int rc;

	if (e) {
		*id = e->v[0];
		return 0;
	}
	t = sq_stmt(s, ST_PROC_GET);
	sqlite3_bind_int64(t, 1, host);
	sqlite3_bind_int64(t, 2, pid);
	rc = sq_step_int(s, t, id, why, whysz, "reading a process");
	if (rc < 0)
		return rc;
	if (!rc) {
		*id = 0;
		if (!create)
			return 0;
		t = sq_stmt(s, ST_PROC_INS);
		sqlite3_bind_int64(t, 1, host);
		sqlite3_bind_int64(t, 2, pid);
		rc = sq_step_done(s, t, why, whysz, "adding a process");
		if (rc)
			return rc;
		*id = sqlite3_last_insert_rowid(s->db);
	}
	if (s->procs.n >= CACHE_MAX)
		sq_kmap_free(&s->procs);
	e = sq_kmap_get(&s->procs, (uint64_t)host, (uint64_t)pid, 0, NULL);
	if (!e)
		return sq_failf(why, whysz, -ENOMEM, "out of memory");
	e->v[0] = *id;
	return 0;
}

/* ---------------------------------------------------------------- open and close */

int sq_exec(struct sq *s, const char *sql, char *why, size_t whysz, const char *what)
{
	char *msg = NULL;
	int rc = sqlite3_exec(s->db, sql, NULL, NULL, &msg);

	if (rc != SQLITE_OK) {
		rc = sq_failf(why, whysz, sq_errno(rc), "graph store: %s: %s", what,
			      msg ? msg : sqlite3_errstr(rc));
		sqlite3_free(msg);
		return rc;
	}
	return 0;
}

int sq_pragma_int(struct sq *s, const char *sql, int64_t *out, char *why, size_t whysz)
{
	sqlite3_stmt *t;
	int rc = sqlite3_prepare_v2(s->db, sql, -1, &t, NULL);

	if (rc != SQLITE_OK)
		return sq_fail(s, rc, why, whysz, sql);
	rc = sq_step_int(s, t, out, why, whysz, sql);
	sqlite3_finalize(t);
	if (rc == 0)
		*out = 0;
	return rc < 0 ? rc : 0;
}

/* Checks (or creates) the schema of the file just opened. */
int sq_schema_check(struct sq *s, const char *path, const char *alias, char *why, size_t whysz)
{
	char sql[128];
	int64_t app, ver, ntab;
	int rc;

	snprintf(sql, sizeof(sql), "PRAGMA %s.application_id", alias);
	rc = sq_pragma_int(s, sql, &app, why, whysz);
	if (rc) {
		/* SQLITE_NOTADB comes here: the first read of the header */
		return sq_failf(why, whysz, -EINVAL, "%s: not a weft graph store (%s)", path,
				sqlite3_errmsg(s->db));
	}
	snprintf(sql, sizeof(sql), "PRAGMA %s.user_version", alias);
	if ((rc = sq_pragma_int(s, sql, &ver, why, whysz)))
		return rc;
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM %s.sqlite_master", alias);
	if ((rc = sq_pragma_int(s, sql, &ntab, why, whysz)))
		return rc;
	if (app == 0 && ver == 0 && ntab == 0)
		return 1; /* an empty database: a new store */
	if (app != APP_ID)
		return sq_failf(why, whysz, -EINVAL,
				"%s: a SQLite database but not a weft graph store (application_id "
				"%#" PRIx64 ")",
				path, (uint64_t)app);
	if (ver > GRAPH_STORE_VERSION)
		return sq_failf(why, whysz, -EPROTONOSUPPORT,
				"%s: graph store schema version %" PRId64
				" is newer than this weft's (%d): use a newer weft",
				path, ver, GRAPH_STORE_VERSION);
	if (ver < 1)
		return sq_failf(why, whysz, -EINVAL,
				"%s: graph store schema version %" PRId64 " unknown", path, ver);
	return ver < GRAPH_STORE_VERSION ? 2 : 0;
}

static void sq_close(struct graph_store *base)
{
	struct sq *s = (struct sq *)base;
	size_t i;

	for (i = 0; i < ST_COUNT; i++)
		sqlite3_finalize(s->st[i]);
	sqlite3_close(s->db);
	sq_drop_caches(s);
	sq_kmap_free(&s->ptraces);
	sq_kmap_free(&s->ptasks);
	sq_kmap_free(&s->pevseen);
	sq_kmap_free(&s->pedges);
	sq_kmap_free(&s->lf_types);
	sq_kmap_free(&s->ctcache);
	for (i = 0; i < s->nct; i++) {
		free(s->ct[i].idx);
		free(s->ct[i].cum);
	}
	free(s->ct);
	free(s->dangle);
	sq_kmap_free(&s->pth);
	sq_kmap_free(&s->pevagg);
	sq_kmap_free(&s->pedgeagg);
	sq_kmap_free(&s->ptypes);
	sq_kmap_free(&s->pblocks);
	free(s->tacc);
	free(s->tbloom);
	free(s->body.p);
	if (s->tya)
		for (i = 0; i < FLUSH_TYPES; i++)
			free(s->tya[i].counts);
	free(s->tya);
	free(s->blk);
	free(s->wb.p);
	free(s->scratch);
	free(s);
}

struct graph_store *graph_store_sqlite_open(const char *path, char *why, size_t whysz)
{
	struct sq *s = calloc(1, sizeof(*s));
	struct stat sb;
	int64_t psz = 0;
	char wal[64];
	int rc, err;
	size_t i;

	if (!s) {
		sq_failf(why, whysz, -ENOMEM, "out of memory");
		errno = ENOMEM;
		return NULL;
	}
	s->base.ops = &sqlite_ops;
	s->scratch = calloc(WEFT_SKETCH_NBUCKETS, sizeof(*s->scratch));
	s->tya = calloc(FLUSH_TYPES, sizeof(*s->tya));
	if (!s->scratch || !s->tya) {
		err = sq_failf(why, whysz, -ENOMEM, "out of memory");
		goto out_free;
	}
	if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode)) {
		err = sq_failf(why, whysz, -EINVAL, "%s: not a regular file", path);
		goto out_free;
	}
	/* no connection mutex: a store is used by one thread at a time (its prepared statements
	 * and caches are not shared safely anyway), so SQLite's lock around every call (bind,
	 * step, column, reset) is pure cost: ~1,000 instructions a trace put (bench_graphcap) */
	rc = sqlite3_open_v2(path, &s->db,
			     SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
			     NULL);
	if (rc != SQLITE_OK) {
		err = sq_failf(why, whysz, sq_errno(rc), "%s: cannot open: %s", path,
			       s->db ? sqlite3_errmsg(s->db) : sqlite3_errstr(rc));
		goto out_free;
	}
	sqlite3_busy_timeout(s->db, 10000);
	sqlite3_extended_result_codes(s->db, 0);
	err = sq_schema_check(s, path, "main", why, whysz);
	if (err < 0)
		goto out_free;
	if (err == 1) {
		char sql[160];

		/*
		 * Before the first table: auto_vacuum (retain can shrink the file) and the page
		 * size.  16 KiB pages: a put writes its pages twice (the WAL, then the checkpoint),
		 * a system call each, and its rows are mostly appended; 16 KiB took ~10 % off the
		 * agent's CPU a request under kernel edges against 4 KiB (docs/performance.md,
		 * "Trace ids in time order"), reads the same.  A store made before keeps its size.
		 */
		snprintf(sql, sizeof(sql),
			 "PRAGMA page_size = 16384; PRAGMA auto_vacuum = INCREMENTAL;"
			 " PRAGMA application_id = %d; PRAGMA user_version = %d;",
			 APP_ID, GRAPH_STORE_VERSION);
		if ((err = sq_exec(s, sql, why, whysz, "creating the store")) ||
		    (err = sq_exec(s, "BEGIN IMMEDIATE", why, whysz, "creating the store")))
			goto out_free;
		if ((err = sq_exec(s, schema_sql, why, whysz, "creating the schema"))) {
			sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
			goto out_free;
		}
		if ((err = sq_exec(s, "COMMIT", why, whysz, "creating the schema")))
			goto out_free;
	} else if (err == 2) {
		char sql[160];

		/* version 1 -> 2: the marks of incomplete traces (an empty table) */
		snprintf(sql, sizeof(sql), "BEGIN IMMEDIATE; %s PRAGMA user_version = %d; COMMIT;",
			 MARKS_SQL, GRAPH_STORE_VERSION);
		if ((err = sq_exec(s, sql, why, whysz, "upgrading the schema to version 2"))) {
			sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
			goto out_free;
		}
	}
	/* 16 MiB of page cache (cache_size in KiB when negative), a checkpoint every 32 MiB of
	 * WAL whatever the page size (wal_autocheckpoint counts pages) */
	if ((err = sq_exec(s,
			   "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;"
			   " PRAGMA cache_size = -16384;",
			   why, whysz, "setting WAL mode")) ||
	    (err = sq_pragma_int(s, "PRAGMA page_size", &psz, why, whysz)))
		goto out_free;
	snprintf(wal, sizeof(wal), "PRAGMA wal_autocheckpoint = %lld",
		 (long long)((32 << 20) / (psz >= 512 ? psz : 4096)));
	if ((err = sq_exec(s, wal, why, whysz, "setting WAL mode")))
		goto out_free;
	rc = sqlite3_create_function(s->db, "weft_chunk_match", 2,
				     SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_DIRECTONLY, s,
				     sq_chunk_match, NULL, NULL);
	if (rc != SQLITE_OK) {
		err = sq_failf(why, whysz, sq_errno(rc), "%s: %s", path, sqlite3_errmsg(s->db));
		goto out_free;
	}
	for (i = 0; i < ST_COUNT; i++) {
		rc = sqlite3_prepare_v3(s->db, stmt_sql[i], -1, SQLITE_PREPARE_PERSISTENT,
					&s->st[i], NULL);
		if (rc != SQLITE_OK) {
			/* a weft graph store whose tables are not ours: crafted or damaged */
			err = sq_failf(why, whysz, -EINVAL, "%s: not a usable weft graph store: %s",
				       path, sqlite3_errmsg(s->db));
			goto out_free;
		}
	}
	return &s->base;

out_free:
	sq_close(&s->base);
	errno = -err;
	return NULL;
}

/* ---------------------------------------------------------------- plans */

int graph_store_sqlite_check_plans(struct graph_store *base, char *why, size_t whysz)
{
	static const int hot[] = {
		ST_FIND_EXACT, ST_FIND_HI,    ST_FIND_LO,     ST_CHUNKS_GET, ST_TYPE_GET,
		ST_TYPE_READ,  ST_TYPE_NAMES, ST_TYPE_COUNT,  ST_STR_GET,    ST_STR_TEXT,
		ST_PROC_GET,   ST_EVAGG_GET,  ST_EDGEAGG_GET, ST_CONC_GET,   ST_TRACE_GET,
		ST_TRACE_ROW,  ST_TRACE_UPD,  ST_TYPE_WRITE,  ST_DEL_CHUNKS, ST_DEL_TRACE,
		ST_TRACE_MAX,
	};
	struct sq *s = (struct sq *)base;
	char q[1024];
	size_t i;
	int rc;

	if (base->ops != &sqlite_ops)
		return sq_failf(why, whysz, -EINVAL, "not a SQLite graph store");
	for (i = 0; i < sizeof(hot) / sizeof(hot[0]); i++) {
		sqlite3_stmt *t;

		snprintf(q, sizeof(q), "EXPLAIN QUERY PLAN %s", stmt_sql[hot[i]]);
		rc = sqlite3_prepare_v2(s->db, q, -1, &t, NULL);
		if (rc != SQLITE_OK)
			return sq_fail(s, rc, why, whysz, "explaining a statement");
		while ((rc = sqlite3_step(t)) == SQLITE_ROW) {
			const char *d = (const char *)sqlite3_column_text(t, 3);

			if (d && !strncmp(d, "SCAN", 4)) {
				sq_failf(why, whysz, -EINVAL, "%s: %s", stmt_sql[hot[i]], d);
				sqlite3_finalize(t);
				return -EINVAL;
			}
		}
		sqlite3_finalize(t);
	}
	return 0;
}

static const struct graph_store_ops sqlite_ops = {
	.name = "sqlite",
	.put = sq_put,
	.list = sq_list,
	.load = sq_load,
	.context = sq_context,
	.type_sketch = sq_type_sketch,
	.concurrency = sq_concurrency,
	.stats = sq_stats,
	.retain = sq_retain,
	.merge = sq_merge,
	.close = sq_close,
	.put_opts = sq_put_opts,
	.put_aggs = sq_put_aggs,
	.sampling = sq_sampling,
	.mark_get = sq_mark_get,
	.mark_set = sq_mark_set,
};
