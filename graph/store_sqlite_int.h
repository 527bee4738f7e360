// SPDX-License-Identifier: Apache-2.0
/*
 * The SQLite graph store's private header: its constants, struct sq and the types a put and
 * a read share, and the helpers its files (store_sqlite.c, store_sqlite_code.c,
 * store_sqlite_put.c, store_sqlite_read.c, store_sqlite_keep.c) call across files.  Not
 * part of the store's interface (graph/store.h is); only those files include it.
 */
#ifndef WEFT_GRAPH_STORE_SQLITE_INT_H
#define WEFT_GRAPH_STORE_SQLITE_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <sqlite3.h>

#include "graph/store.h"
#include "kernel/aggstate.h"
#include "kernel/weft_sketch.h"

#define APP_ID 0x57464752 /* "WFGR": PRAGMA application_id of a weft graph store */
#define CONC_MS 1000 /* counters per concurrency block */
#define FLUSH_TYPES 512 /* touched types with a dense sketch delta in memory, at most */
#define FLUSH_BLOCKS 2048 /* concurrency difference blocks in memory, at most (8 MiB) */
#define CACHE_MAX (1u << 20) /* entries of an id cache before it is dropped */
#define ID_BIAS 0x8000000000000000ull

/* Keys of up to three 64-bit words, values of three 64-bit words; open addressing. */
struct kent {
	uint64_t k[3];
	int64_t v[3];
	uint8_t used;
};

struct kmap {
	struct kent *e;
	size_t cap, n;
};

/* String keys (a byte string with its length), one 64-bit value: the id caches. */
struct sent {
	char *s;
	size_t len;
	uint64_t h;
	int64_t v;
};

struct smap {
	struct sent *e;
	size_t cap, n;
};

struct wbuf {
	uint8_t *p;
	size_t n, cap;
};

/*
 * A chunk: the elements of one trace that one put stored, as one BLOB (docs/graphs.md gives
 * the layout).  Varints throughout, signed values zigzagged, times relative to the chunk's
 * base; strings that repeat are ids (types, strs), attributes are inline.
 *
 *   u8 version (1) | ntasks | nevents | nedges | zz base
 *   task:  id parent type host zz:pid zz:tid zz:start-base dur zz:skew status source
 *          attrs-length attrs (length 0: "{}")
 *   event: task id zz:time-base name source attrs-length attrs
 *   edge:  kind from_task from_event to_task to_event source
 */
#define CHUNK_VERSION 1
#define CHUNK_MAX_SEQ 0xffff /* chunks per trace: rowid = tr << 16 | seq */

struct ctask {
	uint64_t id, parent;
	int64_t type, host, pid, tid, start, skew;
	uint64_t dur; /* end - start, modulo 2^64: exact for any two int64 */
	uint32_t status, source;
	const char *attrs;
	size_t alen;
};

struct cevent {
	uint64_t task, id;
	int64_t time, name;
	uint32_t source;
	const char *attrs;
	size_t alen;
};

struct cedge {
	uint32_t kind, source;
	uint64_t from_task, from_event, to_task, to_event;
};

struct cvisit {
	int (*task)(void *arg, const struct ctask *t);
	int (*event)(void *arg, const struct cevent *e);
	int (*edge)(void *arg, const struct cedge *e);
	void *arg;
};

struct rd {
	const uint8_t *p;
	size_t n, off;
	bool bad;
};

enum {
	ST_BEGIN,
	ST_COMMIT,
	ST_ROLLBACK,
	ST_STR_GET,
	ST_STR_INS,
	ST_STR_TEXT,
	ST_TYPE_GET,
	ST_TYPE_INS,
	ST_TYPE_READ,
	ST_TYPE_WRITE,
	ST_TYPE_NAMES,
	ST_TYPE_COUNT,
	ST_PROC_GET,
	ST_PROC_INS,
	ST_TRACE_GET,
	ST_TRACE_ROW,
	ST_TRACE_INS,
	ST_TRACE_UPD,
	ST_TRACE_MAX,
	ST_CHUNK_INS,
	ST_CHUNKS_GET,
	ST_EVAGG_ADD,
	ST_EDGEAGG_ADD,
	ST_EVAGG_GET,
	ST_EDGEAGG_GET,
	ST_CONC_GET,
	ST_CONC_PUT,
	ST_FIND_EXACT,
	ST_FIND_HI,
	ST_FIND_LO,
	ST_DEL_CHUNKS,
	ST_DEL_TRACE,
	ST_MARK_GET,
	ST_MARK_SET,
	ST_MARK_DEL,
	ST_COUNT
};

/* A trace a put touches: its row, updated in memory and written once at commit. */
struct tacc {
	int64_t hi, lo; /* biased */
	int64_t tr, start, end, ntasks, nhosts, root_task, root_type, root_host, root_start;
	int64_t root_parentless;
	int64_t nchunks; /* stored chunks: the next one's seq */
	bool isnew, based;
	int64_t base; /* the chunk's time base: its first element's time */
	uint64_t nt, ne, nd; /* elements this put adds (coded in struct sq's body) */
};

/* A type a put touches: deltas, added to its row when flushed. */
struct typeacc {
	int64_t id;
	uint64_t count;
	int64_t min, max;
	uint64_t *counts; /* WEFT_SKETCH_NBUCKETS */
};

/* Flags of a task in put's task map (v[2]). */
#define PT_NEW 1 /* stored by this put */
#define PT_DUP 2 /* in the batch but already stored: replaced */
#define PT_STORED 4 /* not in the batch, found stored */

/*
 * A type's sketch as the context reads it: its non-empty buckets, increasing, with the running
 * count up to and including each; a task's "at or below" count is a binary search.  Kept
 * across calls (struct sq's ctcache) and valid while the type's count is unchanged: every
 * change to a sketch (put, merge) changes the count.
 */
struct ctx_type {
	uint64_t count;
	uint32_t *idx;
	uint64_t *cum;
	size_t n;
};

#define CT_MAX 4096 /* decoded sketches kept */

struct sq {
	struct graph_store base;
	sqlite3 *db;
	sqlite3_stmt *st[ST_COUNT];
	/* id caches, kept across puts, dropped on rollback */
	struct smap strs, types;
	struct kmap procs;
	/* a put's accumulators */
	struct kmap ptraces, ptasks, pevseen, pedges, pth, pevagg, pedgeagg, ptypes, pblocks;
	int64_t next_tr; /* row id of the next new trace */
	struct tacc *tacc;
	size_t ntacc, captacc;
	struct typeacc *tya;
	size_t ntya;
	int32_t (*blk)[CONC_MS + 1];
	size_t nblk;
	struct wbuf wb;
	struct wbuf body; /* the elements of the trace a put is at, coded for its chunk */
	/* stored edges of the trace a put is at with an end not stored (yet): when the put
	 * brings that task, the edge's shape is counted (stitching: pieces of a trace come
	 * from several hosts, in any order) */
	struct cedge *dangle;
	size_t ndangle, capdangle;
	uint64_t *scratch; /* WEFT_SKETCH_NBUCKETS */
	uint32_t conc_scratch[CONC_MS];
	/* the context's decoded sketches */
	struct kmap ctcache;
	struct ctx_type *ct;
	size_t nct, capct;
	/* put_opts(GRAPH_PUT_NO_AGGS): elements only, the aggregates come by put_aggs */
	bool noaggs;
	/* graph_store_list()'s filters, for weft_chunk_match() */
	struct kmap lf_types;
	int64_t lf_host;
	/* A Bloom filter of the trace ids in the store (store_sqlite_put.c, tbloom_*): a put
	 * looks up a trace the batch brings only when the filter may hold it, so a new trace
	 * (most of them, under kernel edges) costs no index lookup.  Built at a put from the
	 * traces table, again when another connection changed the file (data_version) or more
	 * ids were added than it was sized for; ids of deleted traces stay in it (a lookup that
	 * finds nothing, as before). */
	uint64_t *tbloom;
	uint64_t tbloom_mask; /* bits - 1 */
	uint64_t tbloom_n, tbloom_cap; /* ids added; ids it was sized for */
	int64_t tbloom_dv; /* PRAGMA data_version when built */
};

/* store_sqlite.c */
int sq_fail(struct sq *s, int rc, char *why, size_t whysz, const char *what);
sqlite3_stmt *sq_stmt(struct sq *s, int which);
int sq_step_done(struct sq *s, sqlite3_stmt *t, char *why, size_t whysz, const char *what);
int sq_step_int(struct sq *s, sqlite3_stmt *t, int64_t *out, char *why, size_t whysz,
		const char *what);
void sq_drop_caches(struct sq *s);
int sq_str_id(struct sq *s, const char *str, bool create, int64_t *id, char *why, size_t whysz);
int sq_type_id(struct sq *s, const char *service, const char *name, bool create, int64_t *id,
	       char *why, size_t whysz);
int sq_proc_id(struct sq *s, int64_t host, int64_t pid, bool create, int64_t *id, char *why,
	       size_t whysz);
int sq_exec(struct sq *s, const char *sql, char *why, size_t whysz, const char *what);
int sq_pragma_int(struct sq *s, const char *sql, int64_t *out, char *why, size_t whysz);
int sq_schema_check(struct sq *s, const char *path, const char *alias, char *why, size_t whysz);
/* store_sqlite_code.c */
int sq_failf(char *why, size_t whysz, int err, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
int sq_errno(int rc);
size_t sq_khash(uint64_t a, uint64_t b, uint64_t c);
struct kent *sq_kmap_find(const struct kmap *m, uint64_t a, uint64_t b, uint64_t c);
int sq_kmap_grow(struct kmap *m);
int sq_kmap_reserve(struct kmap *m, size_t n);
struct kent *sq_kmap_get(struct kmap *m, uint64_t a, uint64_t b, uint64_t c, bool *isnew);
void sq_kmap_clear(struct kmap *m);
void sq_kmap_free(struct kmap *m);
uint64_t sq_shash(const char *s, size_t len);
struct sent *sq_smap_find(const struct smap *m, const char *s, size_t len, uint64_t h);
void sq_smap_clear(struct smap *m);
int sq_smap_put(struct smap *m, const char *s, size_t len, uint64_t h, int64_t v);
int sq_wb_varint(struct wbuf *b, uint64_t v);
bool sq_rd_varint(const uint8_t *p, size_t len, size_t *off, uint64_t *v);
bool sq_sketch_add_blob(uint64_t *counts, const void *blob, size_t len);
int sq_sketch_encode(const uint64_t *counts, struct wbuf *b);
bool sq_conc_decode(uint32_t *out, const void *blob, size_t len);
int sq_conc_encode(const uint32_t *c, struct wbuf *b);
int64_t sq_floordiv(int64_t a, int64_t b);
int64_t sq_ceildiv(int64_t a, int64_t b);
void sq_task_ms(int64_t start, int64_t end, int64_t *first, int64_t *last);
int64_t sq_task_lat(const struct graph_task *k);
int64_t sq_bias(uint64_t v);
uint64_t sq_unbias(int64_t v);
void sq_cpy(char *dst, size_t sz, const unsigned char *src);
uint64_t sq_zz(int64_t v);
int64_t sq_rel(int64_t v, int64_t base);
int sq_chunk_decode(const void *blob, size_t len, const struct cvisit *v);
int sq_wb_bytes(struct wbuf *b, const void *p, size_t n);
int sq_wb_attrs(struct wbuf *b, const char *attrs);
/* store_sqlite_put.c */
int sq_conc_read(struct sq *s, int64_t proc, int64_t sec, uint32_t *c, bool *found, char *why,
		 size_t whysz);
int sq_conc_write(struct sq *s, int64_t proc, int64_t sec, const uint32_t *c, char *why,
		  size_t whysz);
int sq_begin(struct sq *s, char *why, size_t whysz);
void sq_rollback(struct sq *s);
int sq_put_opts(struct graph_store *base, const struct graph *g, unsigned flags,
		struct graph_put_stats *stp, char *why, size_t whysz);
int sq_put(struct graph_store *base, const struct graph *g, struct graph_put_stats *stp, char *why,
	   size_t whysz);
int sq_put_aggs(struct graph_store *base, const struct graph_aggs *a, char *why, size_t whysz);
int sq_sampling(struct graph_store *base, struct graph_sampling *out, char *why, size_t whysz);
int sq_mark_get(struct graph_store *base, const char *trace_hex, uint32_t *flags, char *why,
		size_t whysz);
int sq_mark_set(struct graph_store *base, const char *trace_hex, uint32_t flags, char *why,
		size_t whysz);
/* store_sqlite_read.c */
int sq_find_trace(struct sq *s, const char *hex, int64_t *tr, int64_t *thi, int64_t *tlo, char *why,
		  size_t whysz);
int sq_load(struct graph_store *base, const char *hex, struct graph *g, char *why, size_t whysz);
int sq_context(struct graph_store *base, const struct graph *g, struct graph_context *c, char *why,
	       size_t whysz);
int sq_read_sketch(struct sq *s, int64_t type, uint64_t *counts, int64_t *n, int64_t *mn,
		   int64_t *mx, char *why, size_t whysz);
int sq_type_sketch(struct graph_store *base, const char *service, const char *name,
		   uint64_t *counts, char *why, size_t whysz);
int sq_concurrency(struct graph_store *base, const char *host, int64_t pid, int64_t from,
		   int64_t to, uint32_t *counts, size_t n, char *why, size_t whysz);
void sq_chunk_match(sqlite3_context *ctx, int argc, sqlite3_value **argv);
ssize_t sq_list(struct graph_store *base, const struct graph_filter *fp,
		struct graph_trace_row **rows, char *why, size_t whysz);
ssize_t sq_stats(struct graph_store *base, struct graph_type_stats **rows, char *why, size_t whysz);
/* store_sqlite_keep.c */
ssize_t sq_retain(struct graph_store *base, int64_t before, uint64_t max_bytes, size_t max_traces,
		  char *why, size_t whysz);
int sq_merge(struct graph_store *base, const char *other, char *why, size_t whysz);

#endif
