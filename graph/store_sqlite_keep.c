// SPDX-License-Identifier: Apache-2.0
/*
 * The SQLite graph store's upkeep (store_sqlite.c's essay says why it is built this way):
 * retention, which drops whole traces by age or by the file's size, and merge, which adds
 * another store's traces and aggregates to this one.  Both are rare, whole-store operations;
 * they are their own file so that the ingest and read paths stay short to read.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <sqlite3.h>

#include "graph/store_sqlite_int.h"

/* ---------------------------------------------------------------- retention */

static int drop_trace(struct sq *s, int64_t tr, char *why, size_t whysz)
{
	sqlite3_stmt *t = sq_stmt(s, ST_DEL_CHUNKS);
	int rc;

	if (tr <= 0 || tr > (INT64_MAX >> 16))
		return sq_failf(why, whysz, -EIO, "graph store: a trace row id out of range");
	sqlite3_bind_int64(t, 1, tr << 16);
	sqlite3_bind_int64(t, 2, tr << 16 | CHUNK_MAX_SEQ);
	if ((rc = sq_step_done(s, t, why, whysz, "dropping a trace")))
		return rc;
	t = sq_stmt(s, ST_MARK_DEL);
	sqlite3_bind_int64(t, 1, tr);
	if ((rc = sq_step_done(s, t, why, whysz, "dropping a trace")))
		return rc;
	t = sq_stmt(s, ST_DEL_TRACE);
	sqlite3_bind_int64(t, 1, tr);
	return sq_step_done(s, t, why, whysz, "dropping a trace");
}

/* Drops the traces the query selects (?1: the query's bound, ?2 and ?3: the (start_ns, tr) of
 * the last trace seen, so that every round continues where the last stopped), oldest first,
 * as long as it finds some, *budget is not spent and, with max_bytes, the pages in use exceed
 * it.  Adds to *dropped, takes from *budget. */
static int drop_where(struct sq *s, const char *sql, int64_t arg, uint64_t max_bytes,
		      ssize_t *dropped, size_t *budget, char *why, size_t whysz)
{
	int64_t trs[256], last_start = INT64_MIN, last_tr = INT64_MIN;
	sqlite3_stmt *q;
	int rc;

	rc = sqlite3_prepare_v2(s->db, sql, -1, &q, NULL);
	if (rc != SQLITE_OK)
		return sq_fail(s, rc, why, whysz, "retention");
	while (*budget) {
		size_t n = 0, i, most = *budget < 256 ? *budget : 256;

		if (max_bytes) {
			int64_t pages, free_pages, psz;

			if ((rc = sq_pragma_int(s, "PRAGMA page_count", &pages, why, whysz)) ||
			    (rc = sq_pragma_int(s, "PRAGMA freelist_count", &free_pages, why,
						whysz)) ||
			    (rc = sq_pragma_int(s, "PRAGMA page_size", &psz, why, whysz)))
				break;
			if ((uint64_t)(pages - free_pages) * (uint64_t)psz <= max_bytes)
				break;
		}
		sqlite3_reset(q);
		sqlite3_bind_int64(q, 1, arg);
		sqlite3_bind_int64(q, 2, last_start);
		sqlite3_bind_int64(q, 3, last_tr);
		while (n < most && (rc = sqlite3_step(q)) == SQLITE_ROW) {
			trs[n++] = last_tr = sqlite3_column_int64(q, 0);
			last_start = sqlite3_column_int64(q, 1);
		}
		sqlite3_reset(q);
		if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
			rc = sq_fail(s, rc, why, whysz, "retention");
			break;
		}
		if (n == 0) {
			rc = 0;
			break;
		}
		for (i = 0; i < n; i++)
			if ((rc = drop_trace(s, trs[i], why, whysz)))
				goto out;
		*dropped += (ssize_t)n;
		*budget -= n;
	}
out:
	sqlite3_finalize(q);
	return rc;
}

/* max_traces 0: all there is to drop, then the file shrunk and the WAL emptied (`weft graph
 * retain`); else a slice (graph_store_retain_some()) */
ssize_t sq_retain(struct graph_store *base, int64_t before, uint64_t max_bytes, size_t max_traces,
		  char *why, size_t whysz)
{
	struct sq *s = (struct sq *)base;
	size_t budget = max_traces ? max_traces : SIZE_MAX;
	int64_t pages, free_pages;
	ssize_t dropped = 0;
	int rc;

	if ((rc = sq_begin(s, why, whysz)))
		return rc;
	if (before &&
	    (rc = drop_where(
		     s,
		     "SELECT tr, start_ns FROM traces WHERE start_ns < ?1 AND (start_ns, tr) > "
		     "(?2, ?3) AND end_ns < ?1 ORDER BY start_ns, tr LIMIT 256",
		     before, 0, &dropped, &budget, why, whysz)))
		goto out_rollback;
	/* by size: the oldest by start first; each round drops up to 256 traces (32 when the
	 * store is small), then measures the pages in use again */
	if (max_bytes &&
	    (rc = drop_where(
		     s,
		     "SELECT tr, start_ns FROM traces WHERE ?1 = 0 AND (start_ns, tr) > (?2, ?3) "
		     "ORDER BY start_ns, tr LIMIT 32",
		     0, max_bytes, &dropped, &budget, why, whysz)))
		goto out_rollback;
	if ((rc = sq_step_done(s, sq_stmt(s, ST_COMMIT), why, whysz, "committing")))
		goto out_rollback;
	if (max_traces) {
		/* a slice: the pages freed are reused by the puts that follow; they go back to
		 * the file system once there is nothing more to drop and they are over a
		 * quarter of the file (a bound lowered, a capture that ended) */
		if ((size_t)dropped == max_traces)
			return dropped;
		if ((rc = sq_pragma_int(s, "PRAGMA page_count", &pages, why, whysz)) ||
		    (rc = sq_pragma_int(s, "PRAGMA freelist_count", &free_pages, why, whysz)))
			return rc;
		if (free_pages * 4 > pages && (rc = sq_exec(s, "PRAGMA incremental_vacuum", why,
							    whysz, "shrinking the file")))
			return rc;
		return dropped;
	}
	/* give the freed pages back to the file system, and empty the WAL */
	if ((rc = sq_exec(s, "PRAGMA incremental_vacuum", why, whysz, "shrinking the file")))
		return rc;
	sqlite3_wal_checkpoint_v2(s->db, NULL, SQLITE_CHECKPOINT_TRUNCATE, NULL, NULL);
	return dropped;
out_rollback:
	sq_rollback(s);
	return rc;
}

/* ---------------------------------------------------------------- merge */

static int merge_types(struct sq *s, struct kmap *map, char *why, size_t whysz)
{
	sqlite3_stmt *q;
	uint64_t *theirs = calloc(WEFT_SKETCH_NBUCKETS, sizeof(*theirs));
	int rc;

	if (!theirs)
		return sq_failf(why, whysz, -ENOMEM, "out of memory");
	rc = sqlite3_prepare_v2(s->db,
				"SELECT id, service, name, count, min_ns, max_ns, sketch FROM "
				"other.types",
				-1, &q, NULL);
	if (rc != SQLITE_OK) {
		free(theirs);
		return sq_fail(s, rc, why, whysz, "reading the other store's types");
	}
	while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
		const unsigned char *sv = sqlite3_column_text(q, 1),
				    *nm = sqlite3_column_text(q, 2);
		int64_t oid = sqlite3_column_int64(q, 0), cnt = sqlite3_column_int64(q, 3);
		int64_t omn = sqlite3_column_int64(q, 4), omx = sqlite3_column_int64(q, 5);
		int64_t id, n, mn, mx;
		struct kent *e;
		sqlite3_stmt *t;

		memset(theirs, 0, WEFT_SKETCH_NBUCKETS * sizeof(*theirs));
		uint64_t sum = 0;

		if (cnt >= 0 && sq_sketch_add_blob(theirs, sqlite3_column_blob(q, 6),
						   (size_t)sqlite3_column_bytes(q, 6)))
			for (size_t b = 0; b < WEFT_SKETCH_NBUCKETS; b++)
				sum += theirs[b];
		/* the buckets hold the count, no more, no less: the context's cache relies on it */
		if (cnt < 0 || sum != (uint64_t)cnt) {
			rc = sq_failf(why, whysz, -EIO,
				      "the other store: type %" PRId64 ": corrupt sketch", oid);
			goto out;
		}
		if ((rc = sq_type_id(s, sv ? (const char *)sv : "", nm ? (const char *)nm : "",
				     true, &id, why, whysz)))
			goto out;
		e = sq_kmap_get(map, (uint64_t)oid, 0, 0, NULL);
		if (!e) {
			rc = sq_failf(why, whysz, -ENOMEM, "out of memory");
			goto out;
		}
		e->v[0] = id;
		if ((rc = sq_read_sketch(s, id, s->scratch, &n, &mn, &mx, why, whysz)))
			goto out;
		for (size_t b = 0; b < WEFT_SKETCH_NBUCKETS; b++)
			s->scratch[b] += theirs[b];
		if (cnt) {
			if (!n || omn < mn)
				mn = omn;
			if (!n || omx > mx)
				mx = omx;
		}
		if (sq_sketch_encode(s->scratch, &s->wb)) {
			rc = sq_failf(why, whysz, -ENOMEM, "out of memory");
			goto out;
		}
		t = sq_stmt(s, ST_TYPE_WRITE);
		sqlite3_bind_int64(t, 1, id);
		sqlite3_bind_int64(t, 2, n + cnt);
		sqlite3_bind_int64(t, 3, mn);
		sqlite3_bind_int64(t, 4, mx);
		sqlite3_bind_blob(t, 5, s->wb.p ? (const void *)s->wb.p : "", (int)s->wb.n,
				  SQLITE_STATIC);
		if ((rc = sq_step_done(s, t, why, whysz, "writing a type")))
			goto out;
	}
	rc = rc == SQLITE_DONE ? 0 : sq_fail(s, rc, why, whysz, "reading the other store's types");
out:
	sqlite3_finalize(q);
	free(theirs);
	return rc;
}

static int merge_counts(struct sq *s, const struct kmap *map, char *why, size_t whysz)
{
	sqlite3_stmt *q;
	int rc;

	rc = sqlite3_prepare_v2(s->db,
				"SELECT ea.type, n.s, ea.ntasks FROM other.event_agg AS ea CROSS "
				"JOIN other.strs AS n ON n.id = ea.name",
				-1, &q, NULL);
	if (rc != SQLITE_OK)
		return sq_fail(s, rc, why, whysz, "reading the other store's event counts");
	while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
		struct kent *e = sq_kmap_find(map, (uint64_t)sqlite3_column_int64(q, 0), 0, 0);
		const unsigned char *nm = sqlite3_column_text(q, 1);
		int64_t name;
		sqlite3_stmt *t;

		if (!e) {
			rc = sq_failf(why, whysz, -EIO,
				      "the other store: event counts of an unknown type");
			goto out;
		}
		if ((rc = sq_str_id(s, nm ? (const char *)nm : "", true, &name, why, whysz)))
			goto out;
		t = sq_stmt(s, ST_EVAGG_ADD);
		sqlite3_bind_int64(t, 1, e->v[0]);
		sqlite3_bind_int64(t, 2, name);
		sqlite3_bind_int64(t, 3, sqlite3_column_int64(q, 2));
		if ((rc = sq_step_done(s, t, why, whysz, "writing event counts")))
			goto out;
	}
	if (rc != SQLITE_DONE) {
		rc = sq_fail(s, rc, why, whysz, "reading the other store's event counts");
		goto out;
	}
	sqlite3_finalize(q);
	rc = sqlite3_prepare_v2(s->db, "SELECT ptype, ctype, kind, count FROM other.edge_agg", -1,
				&q, NULL);
	if (rc != SQLITE_OK)
		return sq_fail(s, rc, why, whysz, "reading the other store's edge counts");
	while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
		struct kent *p = sq_kmap_find(map, (uint64_t)sqlite3_column_int64(q, 0), 0, 0);
		struct kent *c = sq_kmap_find(map, (uint64_t)sqlite3_column_int64(q, 1), 0, 0);
		sqlite3_stmt *t;

		if (!p || !c) {
			rc = sq_failf(why, whysz, -EIO,
				      "the other store: edge counts of an unknown type");
			goto out;
		}
		t = sq_stmt(s, ST_EDGEAGG_ADD);
		sqlite3_bind_int64(t, 1, p->v[0]);
		sqlite3_bind_int64(t, 2, c->v[0]);
		sqlite3_bind_int64(t, 3, sqlite3_column_int64(q, 2));
		sqlite3_bind_int64(t, 4, sqlite3_column_int64(q, 3));
		if ((rc = sq_step_done(s, t, why, whysz, "writing edge counts")))
			goto out;
	}
	rc = rc == SQLITE_DONE ?
		     0 :
		     sq_fail(s, rc, why, whysz, "reading the other store's edge counts");
out:
	sqlite3_finalize(q);
	return rc;
}

static int merge_conc(struct sq *s, char *why, size_t whysz)
{
	uint32_t *theirs = malloc(CONC_MS * sizeof(*theirs));
	sqlite3_stmt *q;
	int rc;

	if (!theirs)
		return sq_failf(why, whysz, -ENOMEM, "out of memory");
	rc = sqlite3_prepare_v2(
		s->db,
		"SELECT h.s, p.pid, c.sec, c.counts FROM other.conc AS c CROSS JOIN "
		"other.procs AS p ON p.id = c.proc CROSS JOIN other.strs AS h ON "
		"h.id = p.host",
		-1, &q, NULL);
	if (rc != SQLITE_OK) {
		free(theirs);
		return sq_fail(s, rc, why, whysz, "reading the other store's concurrency");
	}
	while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
		const unsigned char *h = sqlite3_column_text(q, 0);
		int64_t host, proc, sec = sqlite3_column_int64(q, 2);
		bool found;

		if (!sq_conc_decode(theirs, sqlite3_column_blob(q, 3),
				    (size_t)sqlite3_column_bytes(q, 3))) {
			rc = sq_failf(why, whysz, -EIO,
				      "the other store: corrupt concurrency block");
			goto out;
		}
		if ((rc = sq_str_id(s, h ? (const char *)h : "", true, &host, why, whysz)) ||
		    (rc = sq_proc_id(s, host, sqlite3_column_int64(q, 1), true, &proc, why,
				     whysz)) ||
		    (rc = sq_conc_read(s, proc, sec, s->conc_scratch, &found, why, whysz)))
			goto out;
		for (size_t m = 0; m < CONC_MS; m++) {
			uint64_t v = (uint64_t)s->conc_scratch[m] + theirs[m];

			s->conc_scratch[m] = v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
		}
		if ((rc = sq_conc_write(s, proc, sec, s->conc_scratch, why, whysz)))
			goto out;
	}
	rc = rc == SQLITE_DONE ?
		     0 :
		     sq_fail(s, rc, why, whysz, "reading the other store's concurrency");
out:
	sqlite3_finalize(q);
	free(theirs);
	return rc;
}

int sq_merge(struct graph_store *base, const char *other, char *why, size_t whysz)
{
	struct sq *s = (struct sq *)base;
	struct kmap map = { 0 };
	sqlite3_stmt *t;
	struct stat sb;
	int rc;

	if (stat(other, &sb) != 0)
		return sq_failf(why, whysz, -errno, "%s: %s", other, strerror(errno));
	if (!S_ISREG(sb.st_mode))
		return sq_failf(why, whysz, -EINVAL, "%s: not a regular file", other);
	rc = sqlite3_prepare_v2(s->db, "ATTACH DATABASE ?1 AS other", -1, &t, NULL);
	if (rc != SQLITE_OK)
		return sq_fail(s, rc, why, whysz, "attaching the other store");
	sqlite3_bind_text(t, 1, other, -1, SQLITE_STATIC);
	rc = sqlite3_step(t);
	sqlite3_finalize(t);
	if (rc != SQLITE_DONE)
		return sq_failf(why, whysz, sq_errno(rc), "%s: cannot attach: %s", other,
				sqlite3_errmsg(s->db));
	rc = sq_schema_check(s, other, "other", why, whysz);
	if (rc == 1)
		rc = sq_failf(why, whysz, -EINVAL, "%s: an empty database, not a weft graph store",
			      other);
	if (rc)
		goto out_detach;
	if ((rc = sq_begin(s, why, whysz)))
		goto out_detach;
	if ((rc = merge_types(s, &map, why, whysz)) || (rc = merge_counts(s, &map, why, whysz)) ||
	    (rc = merge_conc(s, why, whysz)) ||
	    (rc = sq_step_done(s, sq_stmt(s, ST_COMMIT), why, whysz, "committing")))
		sq_rollback(s);
out_detach:
	sq_kmap_free(&map);
	sqlite3_exec(s->db, "DETACH DATABASE other", NULL, NULL, NULL);
	return rc;
}
