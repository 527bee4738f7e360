// SPDX-License-Identifier: Apache-2.0
/*
 * The aggregator's embedded store (SQLite): what must survive a restart so that no partial
 * is merged twice and none that was acknowledged is lost.
 *
 *   queries   id, text, manifest, object, epoch, end, the parent's id; ended or not; the
 *             agents it is limited to and the host query it pairs with (a VM synchronisation)
 *   snapshots per (query, window): the window's merged state (a packed Weft__Partial) as of
 *             the last checkpoint, for windows open, or closed and merged into since their
 *             last emission — a restart resumes them, so acknowledged data is never lost
 *   members   per (query, host): the senders expected for the query's windows and how far
 *             each has reported, so that after a restart a window is not closed as complete
 *             before those who have not reconnected yet report it (or are named missing)
 *   senders   per (host, instance): the highest sequence number merged — written in the same
 *             transaction as the snapshots that hold those partials, so a restart never
 *             merges one twice
 *   windows   each window emitted and still retained: its revision and its merged groups (a
 *             packed Weft__Partial), which replace its snapshot — so a late partial after a
 *             restart is a revision, not a new window
 *   spool     partials waiting for the parent aggregator's Ack (the tree), each with the seq
 *             of its latest transmission
 *   meta      small integers: the schema version, the parent link's instance and sequence
 *
 * What is written does not grow with the number of agents: a checkpoint writes each window
 * changed since the last one once, however many partials were merged into it (the daemon
 * checkpoints at most every AGGD_CHECKPOINT_NS and acknowledges partials only after the
 * checkpoint holding them committed).  WAL journal, synchronous=FULL: a committed checkpoint
 * survives a crash of the process and of the machine.  The store is opened in exclusive locking
 * mode, so two aggregators can never share one by mistake.
 */
#include <errno.h>
#include <limits.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "aggregator/aggd.h"
#include "base/log.h"

/* bump, and migrate, when a table changes.  2: merged snapshots of open windows and the
 * members of each query replace schema 1's table of every partial */
#define STORE_SCHEMA \
	4 /* 3: spool.kind, the body of a spooled row (a Partial or a GraphBatch);
			  * 4: queries.only_hosts and vm_host (a VM synchronisation) */

enum stmt {
	ST_QUERY_ADD,
	ST_QUERY_END,
	ST_QUERY_END_SNAPSHOTS,
	ST_QUERY_END_WINDOWS,
	ST_QUERY_END_MEMBERS,
	ST_QUERIES,
	ST_SNAPSHOT_SET,
	ST_SNAPSHOTS,
	ST_MEMBER_SET,
	ST_MEMBER_DEL,
	ST_MEMBERS,
	ST_FORGET_SNAPSHOTS,
	ST_FORGET_WINDOWS,
	ST_SENDER_GET,
	ST_SENDER_SET,
	ST_WINDOW_SET,
	ST_WINDOW_SNAPSHOT,
	ST_WINDOWS,
	ST_META_GET,
	ST_META_SET,
	ST_SPOOL_ADD,
	ST_SPOOL_TX,
	ST_SPOOL_DEL,
	ST_SPOOL_LOAD,
	ST__COUNT
};

static const char *const stmt_sql[ST__COUNT] = {
	[ST_QUERY_ADD] = "INSERT INTO queries(query, manifest, object, epoch_ns, end_ns, parent_id,"
			 " only_hosts, vm_host) VALUES(?, ?, ?, ?, ?, ?, ?, ?)",
	[ST_QUERY_END] = "UPDATE queries SET ended = 1, object = x'' WHERE id = ?",
	[ST_QUERY_END_SNAPSHOTS] = "DELETE FROM snapshots WHERE query_id = ?",
	[ST_QUERY_END_WINDOWS] = "DELETE FROM windows WHERE query_id = ?",
	[ST_QUERY_END_MEMBERS] = "DELETE FROM members WHERE query_id = ?",
	[ST_QUERIES] = "SELECT id, query, manifest, object, epoch_ns, end_ns, parent_id,"
		       " only_hosts, vm_host FROM queries WHERE ended = 0 ORDER BY id",
	[ST_SNAPSHOT_SET] = "INSERT INTO snapshots(query_id, win, body) VALUES(?, ?, ?)"
			    " ON CONFLICT(query_id, win) DO UPDATE SET body = excluded.body",
	[ST_SNAPSHOTS] = "SELECT win, body FROM snapshots WHERE query_id = ? ORDER BY win",
	[ST_MEMBER_SET] = "INSERT INTO members(query_id, host, from_win, last_win, hi, failed)"
			  " VALUES(?, ?, ?, ?, ?, ?) ON CONFLICT(query_id, host) DO UPDATE SET"
			  " from_win = excluded.from_win, last_win = excluded.last_win,"
			  " hi = excluded.hi, failed = excluded.failed",
	[ST_MEMBER_DEL] = "DELETE FROM members WHERE query_id = ? AND host = ?",
	[ST_MEMBERS] = "SELECT host, from_win, last_win, hi, failed FROM members"
		       " WHERE query_id = ? ORDER BY host",
	[ST_FORGET_SNAPSHOTS] = "DELETE FROM snapshots WHERE query_id = ? AND win < ?",
	[ST_FORGET_WINDOWS] = "DELETE FROM windows WHERE query_id = ? AND win < ?",
	[ST_SENDER_GET] = "SELECT upto FROM senders WHERE host = ? AND instance = ?",
	[ST_SENDER_SET] = "INSERT INTO senders(host, instance, upto, seen_ns) VALUES(?, ?, ?, ?)"
			  " ON CONFLICT(host, instance) DO UPDATE SET upto = excluded.upto,"
			  " seen_ns = excluded.seen_ns",
	[ST_WINDOW_SET] = "INSERT INTO windows(query_id, win, revision, closed_ns, body)"
			  " VALUES(?, ?, ?, ?, ?) ON CONFLICT(query_id, win) DO UPDATE SET"
			  " revision = excluded.revision, body = excluded.body",
	[ST_WINDOW_SNAPSHOT] = "DELETE FROM snapshots WHERE query_id = ? AND win = ?",
	[ST_WINDOWS] = "SELECT win, revision, closed_ns, body FROM windows WHERE query_id = ?"
		       " ORDER BY win",
	[ST_META_GET] = "SELECT value FROM meta WHERE key = ?",
	[ST_META_SET] = "INSERT INTO meta(key, value) VALUES(?, ?)"
			" ON CONFLICT(key) DO UPDATE SET value = excluded.value",
	[ST_SPOOL_ADD] = "INSERT OR REPLACE INTO spool(id, tx, body, kind) VALUES(?, 0, ?, ?)",
	[ST_SPOOL_TX] = "UPDATE spool SET tx = ? WHERE id = ?",
	[ST_SPOOL_DEL] = "DELETE FROM spool WHERE id = ?",
	[ST_SPOOL_LOAD] = "SELECT id, tx, body, kind FROM spool ORDER BY id",
};

static const char schema_sql[] =
	"CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value INTEGER NOT NULL);"
	"CREATE TABLE IF NOT EXISTS queries(id INTEGER PRIMARY KEY AUTOINCREMENT,"
	" query TEXT NOT NULL, manifest BLOB NOT NULL, object BLOB NOT NULL,"
	" epoch_ns INTEGER NOT NULL, end_ns INTEGER NOT NULL,"
	" parent_id INTEGER NOT NULL DEFAULT 0, ended INTEGER NOT NULL DEFAULT 0,"
	" only_hosts TEXT NOT NULL DEFAULT '', vm_host INTEGER NOT NULL DEFAULT 0);"
	"DROP TABLE IF EXISTS partials;" /* schema 1: its open windows are not carried over */
	"CREATE TABLE IF NOT EXISTS snapshots(query_id INTEGER NOT NULL, win INTEGER NOT NULL,"
	" body BLOB NOT NULL, PRIMARY KEY(query_id, win));"
	"CREATE TABLE IF NOT EXISTS members(query_id INTEGER NOT NULL, host TEXT NOT NULL,"
	" from_win INTEGER NOT NULL, last_win INTEGER NOT NULL, hi INTEGER NOT NULL,"
	" failed INTEGER NOT NULL, PRIMARY KEY(query_id, host));"
	"CREATE TABLE IF NOT EXISTS senders(host TEXT NOT NULL, instance INTEGER NOT NULL,"
	" upto INTEGER NOT NULL, seen_ns INTEGER NOT NULL, PRIMARY KEY(host, instance));"
	"CREATE TABLE IF NOT EXISTS windows(query_id INTEGER NOT NULL, win INTEGER NOT NULL,"
	" revision INTEGER NOT NULL, closed_ns INTEGER NOT NULL, body BLOB NOT NULL,"
	" PRIMARY KEY(query_id, win));"
	"CREATE TABLE IF NOT EXISTS spool(id INTEGER PRIMARY KEY, tx INTEGER NOT NULL,"
	" body BLOB NOT NULL, kind INTEGER NOT NULL DEFAULT 16);";

struct aggd_store {
	sqlite3 *db;
	sqlite3_stmt *st[ST__COUNT];
	int depth; /* nested begins */
	bool failed; /* a statement failed inside the open transaction: roll back, not commit */
};

/* SQLite integers are signed 64-bit: unsigned values travel as their bit pattern. */
static sqlite3_int64 i64(uint64_t v)
{
	sqlite3_int64 r;

	memcpy(&r, &v, sizeof(r));
	return r;
}

static uint64_t u64(sqlite3_int64 v)
{
	uint64_t r;

	memcpy(&r, &v, sizeof(r));
	return r;
}

static uint64_t realtime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static int sql_errno(int rc)
{
	switch (rc & 0xff) {
	case SQLITE_OK:
	case SQLITE_DONE:
	case SQLITE_ROW:
		return 0;
	case SQLITE_BUSY:
	case SQLITE_LOCKED:
		return -EBUSY;
	case SQLITE_NOMEM:
		return -ENOMEM;
	case SQLITE_FULL:
		return -ENOSPC;
	case SQLITE_READONLY:
	case SQLITE_PERM:
	case SQLITE_AUTH:
		return -EACCES;
	case SQLITE_CANTOPEN:
		return -ENOENT;
	case SQLITE_TOOBIG:
		return -E2BIG;
	case SQLITE_CORRUPT:
	case SQLITE_NOTADB:
		return -EBADMSG;
	default:
		return -EIO;
	}
}

static sqlite3_stmt *stmt(struct aggd_store *s, enum stmt which)
{
	sqlite3_stmt *st = s->st[which];

	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	return st;
}

/* Runs a statement that returns no rows; records a failure inside a transaction. */
static int step_done(struct aggd_store *s, sqlite3_stmt *st)
{
	int rc = sqlite3_step(st);

	sqlite3_reset(st);
	if (rc != SQLITE_DONE) {
		log_err("store: %s", sqlite3_errmsg(s->db));
		if (s->depth)
			s->failed = true;
		return sql_errno(rc) ? sql_errno(rc) : -EIO;
	}
	return 0;
}

static int mkdir_parents(const char *path)
{
	char buf[PATH_MAX];
	size_t len = strlen(path);

	if (len >= sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(buf, path, len + 1);
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		if (mkdir(buf, 0700) != 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	return 0;
}

int aggd_store_default_path(char *buf, size_t sz)
{
	const char *state = getenv("XDG_STATE_HOME"), *home = getenv("HOME");
	int n;

	if (geteuid() == 0)
		n = snprintf(buf, sz, "/var/lib/weft/aggregator.sqlite");
	else if (state && *state == '/')
		n = snprintf(buf, sz, "%s/weft/aggregator.sqlite", state);
	else if (home && *home == '/')
		n = snprintf(buf, sz, "%s/.local/state/weft/aggregator.sqlite", home);
	else
		return -ENOENT;
	return n < 0 || (size_t)n >= sz ? -ENAMETOOLONG : 0;
}

struct aggd_store *aggd_store_open(const char *path, char *err, size_t errsz)
{
	struct aggd_store *s;
	bool mem = strcmp(path, ":memory:") == 0;
	sqlite3_int64 schema = 0;
	int rc, e = EIO;

	s = calloc(1, sizeof(*s));
	if (!s) {
		snprintf(err, errsz, "out of memory");
		errno = ENOMEM;
		return NULL;
	}
	if (!mem) {
		rc = mkdir_parents(path);
		if (rc) {
			snprintf(err, errsz, "cannot create the directory of %s: %s", path,
				 strerror(-rc));
			e = -rc;
			goto out_free;
		}
	}
	rc = sqlite3_open_v2(path, &s->db,
			     SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
			     NULL);
	if (rc != SQLITE_OK) {
		snprintf(err, errsz, "cannot open %s: %s", path,
			 s->db ? sqlite3_errmsg(s->db) : sqlite3_errstr(rc));
		e = -sql_errno(rc);
		goto out_close;
	}
	if (!mem)
		chmod(path, 0600);
	/* exclusive before WAL: the lock is taken at the first write below and held */
	rc = sqlite3_exec(s->db,
			  "PRAGMA locking_mode = EXCLUSIVE; PRAGMA journal_mode = WAL;"
			  " PRAGMA synchronous = FULL; PRAGMA foreign_keys = OFF;",
			  NULL, NULL, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_exec(s->db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_exec(s->db, schema_sql, NULL, NULL, NULL);
	if (rc == SQLITE_OK) {
		/* schema 2 -> 3: a spool without kinds holds Partials (body 16) */
		sqlite3_stmt *probe = NULL;

		if (sqlite3_prepare_v2(s->db, "SELECT kind FROM spool LIMIT 0", -1, &probe, NULL) !=
		    SQLITE_OK)
			rc = sqlite3_exec(s->db,
					  "ALTER TABLE spool ADD COLUMN kind INTEGER NOT NULL "
					  "DEFAULT 16",
					  NULL, NULL, NULL);
		sqlite3_finalize(probe);
	}
	if (rc == SQLITE_OK) {
		/* schema 3 -> 4: queries run everywhere and pair with nothing */
		sqlite3_stmt *probe = NULL;

		if (sqlite3_prepare_v2(s->db, "SELECT vm_host FROM queries LIMIT 0", -1, &probe,
				       NULL) != SQLITE_OK)
			rc = sqlite3_exec(s->db,
					  "ALTER TABLE queries ADD COLUMN only_hosts TEXT NOT NULL "
					  "DEFAULT '';"
					  "ALTER TABLE queries ADD COLUMN vm_host INTEGER NOT NULL "
					  "DEFAULT 0",
					  NULL, NULL, NULL);
		sqlite3_finalize(probe);
	}
	if (rc == SQLITE_OK)
		rc = sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL);
	if (rc != SQLITE_OK) {
		if ((rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED)
			snprintf(err, errsz, "%s is in use by another aggregator", path);
		else
			snprintf(err, errsz, "%s: %s", path, sqlite3_errmsg(s->db));
		e = -sql_errno(rc);
		goto out_close;
	}
	for (int i = 0; i < ST__COUNT; i++) {
		rc = sqlite3_prepare_v3(s->db, stmt_sql[i], -1, SQLITE_PREPARE_PERSISTENT,
					&s->st[i], NULL);
		if (rc != SQLITE_OK) {
			snprintf(err, errsz, "%s: %s", path, sqlite3_errmsg(s->db));
			goto out_close;
		}
	}
	{
		sqlite3_stmt *st = stmt(s, ST_META_GET);

		sqlite3_bind_text(st, 1, "schema", -1, SQLITE_STATIC);
		if (sqlite3_step(st) == SQLITE_ROW)
			schema = sqlite3_column_int64(st, 0);
		sqlite3_reset(st);
	}
	if (schema > STORE_SCHEMA) {
		snprintf(err, errsz, "%s was written by a newer weft (schema %lld)", path,
			 (long long)schema);
		e = EPROTO;
		goto out_close;
	}
	if (schema < STORE_SCHEMA && aggd_store_meta_set(s, "schema", STORE_SCHEMA)) {
		snprintf(err, errsz, "%s: %s", path, sqlite3_errmsg(s->db));
		goto out_close;
	}
	/* sender records of instances gone for a week are of no use */
	{
		char sql[128];

		snprintf(sql, sizeof(sql), "DELETE FROM senders WHERE seen_ns < %lld",
			 (long long)i64(realtime_ns() - 7ULL * 86400 * 1000000000ULL));
		sqlite3_exec(s->db, sql, NULL, NULL, NULL);
	}
	return s;

out_close:
	for (int i = 0; i < ST__COUNT; i++)
		sqlite3_finalize(s->st[i]);
	sqlite3_close(s->db);
out_free:
	free(s);
	errno = e > 0 ? e : EIO;
	return NULL;
}

void aggd_store_close(struct aggd_store *s)
{
	if (!s)
		return;
	if (s->depth)
		aggd_store_rollback(s);
	for (int i = 0; i < ST__COUNT; i++)
		sqlite3_finalize(s->st[i]);
	sqlite3_close(s->db);
	free(s);
}

int aggd_store_begin(struct aggd_store *s)
{
	int rc;

	if (s->depth++)
		return 0;
	s->failed = false;
	rc = sqlite3_exec(s->db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
	if (rc != SQLITE_OK) {
		s->depth = 0;
		log_err("store: begin: %s", sqlite3_errmsg(s->db));
		return sql_errno(rc);
	}
	return 0;
}

int aggd_store_commit(struct aggd_store *s)
{
	int rc;

	if (!s->depth)
		return -EINVAL;
	if (--s->depth)
		return 0;
	if (s->failed) {
		sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
		s->failed = false;
		return -EIO;
	}
	rc = sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL);
	if (rc != SQLITE_OK) {
		log_err("store: commit: %s", sqlite3_errmsg(s->db));
		sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
		return sql_errno(rc);
	}
	return 0;
}

void aggd_store_rollback(struct aggd_store *s)
{
	if (!s->depth)
		return;
	s->depth = 0;
	s->failed = false;
	sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
}

int aggd_store_query_add(struct aggd_store *s, struct aggd_stored_query *q)
{
	sqlite3_stmt *st = stmt(s, ST_QUERY_ADD);
	int rc;

	sqlite3_bind_text(st, 1, q->query, -1, SQLITE_STATIC);
	sqlite3_bind_blob64(st, 2, q->manifest, q->manifest_len, SQLITE_STATIC);
	sqlite3_bind_blob64(st, 3, q->object, q->object_len, SQLITE_STATIC);
	sqlite3_bind_int64(st, 4, i64(q->epoch_ns));
	sqlite3_bind_int64(st, 5, i64(q->end_ns));
	sqlite3_bind_int64(st, 6, i64(q->parent_id));
	sqlite3_bind_text(st, 7, q->only_hosts ? q->only_hosts : "", -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 8, i64(q->vm_host));
	rc = step_done(s, st);
	if (rc)
		return rc;
	q->id = u64(sqlite3_last_insert_rowid(s->db));
	return 0;
}

int aggd_store_query_end(struct aggd_store *s, uint64_t id)
{
	static const enum stmt which[] = { ST_QUERY_END, ST_QUERY_END_SNAPSHOTS,
					   ST_QUERY_END_WINDOWS, ST_QUERY_END_MEMBERS };
	int rc = 0;

	for (size_t i = 0; i < sizeof(which) / sizeof(which[0]) && !rc; i++) {
		sqlite3_stmt *st = stmt(s, which[i]);

		sqlite3_bind_int64(st, 1, i64(id));
		rc = step_done(s, st);
	}
	return rc;
}

int aggd_store_queries_load(struct aggd_store *s,
			    int (*fn)(void *ctx, const struct aggd_stored_query *q), void *ctx)
{
	sqlite3_stmt *st = stmt(s, ST_QUERIES);
	int rc;

	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct aggd_stored_query q = {
			.id = u64(sqlite3_column_int64(st, 0)),
			.query = (const char *)sqlite3_column_text(st, 1),
			.manifest = sqlite3_column_blob(st, 2),
			.manifest_len = (size_t)sqlite3_column_bytes(st, 2),
			.object = sqlite3_column_blob(st, 3),
			.object_len = (size_t)sqlite3_column_bytes(st, 3),
			.epoch_ns = u64(sqlite3_column_int64(st, 4)),
			.end_ns = u64(sqlite3_column_int64(st, 5)),
			.parent_id = u64(sqlite3_column_int64(st, 6)),
			.only_hosts = (const char *)sqlite3_column_text(st, 7),
			.vm_host = u64(sqlite3_column_int64(st, 8)),
		};
		int frc;

		if (!q.query)
			q.query = "";
		frc = fn(ctx, &q);
		if (frc) {
			sqlite3_reset(st);
			return frc;
		}
	}
	sqlite3_reset(st);
	return rc == SQLITE_DONE ? 0 : sql_errno(rc);
}

int aggd_store_snapshot_set(struct aggd_store *s, uint64_t query_id, uint64_t window,
			    const void *body, size_t len)
{
	sqlite3_stmt *st = stmt(s, ST_SNAPSHOT_SET);

	sqlite3_bind_int64(st, 1, i64(query_id));
	sqlite3_bind_int64(st, 2, i64(window));
	sqlite3_bind_blob64(st, 3, body ? body : "", len, SQLITE_STATIC);
	return step_done(s, st);
}

int aggd_store_snapshots_load(struct aggd_store *s, uint64_t query_id,
			      int (*fn)(void *ctx, uint64_t window, const void *body, size_t len),
			      void *ctx)
{
	sqlite3_stmt *st = stmt(s, ST_SNAPSHOTS);
	int rc;

	sqlite3_bind_int64(st, 1, i64(query_id));
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		int frc = fn(ctx, u64(sqlite3_column_int64(st, 0)), sqlite3_column_blob(st, 1),
			     (size_t)sqlite3_column_bytes(st, 1));

		if (frc) {
			sqlite3_reset(st);
			return frc;
		}
	}
	sqlite3_reset(st);
	return rc == SQLITE_DONE ? 0 : sql_errno(rc);
}

int aggd_store_member_set(struct aggd_store *s, uint64_t query_id,
			  const struct aggd_stored_member *m)
{
	sqlite3_stmt *st = stmt(s, ST_MEMBER_SET);

	sqlite3_bind_int64(st, 1, i64(query_id));
	sqlite3_bind_text(st, 2, m->host, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 3, i64(m->from));
	sqlite3_bind_int64(st, 4, i64(m->last));
	sqlite3_bind_int64(st, 5, i64(m->hi));
	sqlite3_bind_int(st, 6, m->failed);
	return step_done(s, st);
}

int aggd_store_member_del(struct aggd_store *s, uint64_t query_id, const char *host)
{
	sqlite3_stmt *st = stmt(s, ST_MEMBER_DEL);

	sqlite3_bind_int64(st, 1, i64(query_id));
	sqlite3_bind_text(st, 2, host, -1, SQLITE_STATIC);
	return step_done(s, st);
}

int aggd_store_members_load(struct aggd_store *s, uint64_t query_id,
			    int (*fn)(void *ctx, const struct aggd_stored_member *m), void *ctx)
{
	sqlite3_stmt *st = stmt(s, ST_MEMBERS);
	int rc;

	sqlite3_bind_int64(st, 1, i64(query_id));
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct aggd_stored_member m = {
			.host = (const char *)sqlite3_column_text(st, 0),
			.from = u64(sqlite3_column_int64(st, 1)),
			.last = u64(sqlite3_column_int64(st, 2)),
			.hi = u64(sqlite3_column_int64(st, 3)),
			.failed = sqlite3_column_int(st, 4) != 0,
		};
		int frc;

		if (!m.host)
			continue;
		frc = fn(ctx, &m);
		if (frc) {
			sqlite3_reset(st);
			return frc;
		}
	}
	sqlite3_reset(st);
	return rc == SQLITE_DONE ? 0 : sql_errno(rc);
}

int aggd_store_windows_forget(struct aggd_store *s, uint64_t query_id, uint64_t window)
{
	sqlite3_stmt *st = stmt(s, ST_FORGET_SNAPSHOTS);
	int rc;

	sqlite3_bind_int64(st, 1, i64(query_id));
	sqlite3_bind_int64(st, 2, i64(window));
	rc = step_done(s, st);
	if (rc)
		return rc;
	st = stmt(s, ST_FORGET_WINDOWS);
	sqlite3_bind_int64(st, 1, i64(query_id));
	sqlite3_bind_int64(st, 2, i64(window));
	return step_done(s, st);
}

int aggd_store_sender_get(struct aggd_store *s, const char *host, uint64_t instance, uint64_t *upto)
{
	sqlite3_stmt *st = stmt(s, ST_SENDER_GET);
	int rc;

	sqlite3_bind_text(st, 1, host, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 2, i64(instance));
	rc = sqlite3_step(st);
	*upto = rc == SQLITE_ROW ? u64(sqlite3_column_int64(st, 0)) : 0;
	sqlite3_reset(st);
	return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : sql_errno(rc);
}

int aggd_store_sender_set(struct aggd_store *s, const char *host, uint64_t instance, uint64_t upto)
{
	sqlite3_stmt *st = stmt(s, ST_SENDER_SET);

	sqlite3_bind_text(st, 1, host, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 2, i64(instance));
	sqlite3_bind_int64(st, 3, i64(upto));
	sqlite3_bind_int64(st, 4, i64(realtime_ns()));
	return step_done(s, st);
}

int aggd_store_window_emitted(struct aggd_store *s, uint64_t query_id, uint64_t window,
			      uint32_t revision, uint64_t closed_ns, const void *body, size_t len)
{
	sqlite3_stmt *st = stmt(s, ST_WINDOW_SET);
	int rc;

	sqlite3_bind_int64(st, 1, i64(query_id));
	sqlite3_bind_int64(st, 2, i64(window));
	sqlite3_bind_int64(st, 3, revision);
	sqlite3_bind_int64(st, 4, i64(closed_ns));
	sqlite3_bind_blob64(st, 5, body ? body : "", len, SQLITE_STATIC);
	rc = step_done(s, st);
	if (rc)
		return rc;
	/* the emitted window holds all its snapshot held, and more */
	st = stmt(s, ST_WINDOW_SNAPSHOT);
	sqlite3_bind_int64(st, 1, i64(query_id));
	sqlite3_bind_int64(st, 2, i64(window));
	return step_done(s, st);
}

int aggd_store_windows_load(struct aggd_store *s, uint64_t query_id,
			    int (*fn)(void *ctx, uint64_t window, uint32_t revision,
				      uint64_t closed_ns, const void *body, size_t len),
			    void *ctx)
{
	sqlite3_stmt *st = stmt(s, ST_WINDOWS);
	int rc;

	sqlite3_bind_int64(st, 1, i64(query_id));
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		sqlite3_int64 rev = sqlite3_column_int64(st, 1);
		int frc = fn(ctx, u64(sqlite3_column_int64(st, 0)),
			     rev < 0 || rev > UINT32_MAX ? 0 : (uint32_t)rev,
			     u64(sqlite3_column_int64(st, 2)), sqlite3_column_blob(st, 3),
			     (size_t)sqlite3_column_bytes(st, 3));

		if (frc) {
			sqlite3_reset(st);
			return frc;
		}
	}
	sqlite3_reset(st);
	return rc == SQLITE_DONE ? 0 : sql_errno(rc);
}

int aggd_store_meta_get(struct aggd_store *s, const char *key, uint64_t *v)
{
	sqlite3_stmt *st = stmt(s, ST_META_GET);
	int rc;

	sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		*v = u64(sqlite3_column_int64(st, 0));
	sqlite3_reset(st);
	if (rc == SQLITE_ROW)
		return 0;
	return rc == SQLITE_DONE ? -ENOENT : sql_errno(rc);
}

int aggd_store_meta_set(struct aggd_store *s, const char *key, uint64_t v)
{
	sqlite3_stmt *st = stmt(s, ST_META_SET);

	sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 2, i64(v));
	return step_done(s, st);
}

int aggd_store_spool_add(struct aggd_store *s, uint64_t id, int kind, const void *body, size_t len)
{
	sqlite3_stmt *st = stmt(s, ST_SPOOL_ADD);

	sqlite3_bind_int64(st, 1, i64(id));
	sqlite3_bind_blob64(st, 2, body ? body : "", len, SQLITE_STATIC);
	sqlite3_bind_int(st, 3, kind);
	return step_done(s, st);
}

int aggd_store_spool_tx(struct aggd_store *s, uint64_t id, uint64_t tx)
{
	sqlite3_stmt *st = stmt(s, ST_SPOOL_TX);

	sqlite3_bind_int64(st, 1, i64(tx));
	sqlite3_bind_int64(st, 2, i64(id));
	return step_done(s, st);
}

int aggd_store_spool_del(struct aggd_store *s, uint64_t id)
{
	sqlite3_stmt *st = stmt(s, ST_SPOOL_DEL);

	sqlite3_bind_int64(st, 1, i64(id));
	return step_done(s, st);
}

int aggd_store_spool_load(struct aggd_store *s,
			  int (*fn)(void *ctx, uint64_t id, uint64_t tx, int kind, const void *body,
				    size_t len),
			  void *ctx)
{
	sqlite3_stmt *st = stmt(s, ST_SPOOL_LOAD);
	int rc;

	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		int frc = fn(ctx, u64(sqlite3_column_int64(st, 0)),
			     u64(sqlite3_column_int64(st, 1)), sqlite3_column_int(st, 3),
			     sqlite3_column_blob(st, 2), (size_t)sqlite3_column_bytes(st, 2));

		if (frc) {
			sqlite3_reset(st);
			return frc;
		}
	}
	sqlite3_reset(st);
	return rc == SQLITE_DONE ? 0 : sql_errno(rc);
}
