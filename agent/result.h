/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Results: the groups of a window as mergeable states, keyed canonically, and their output.
 *
 * A kernel key (bytes laid out by the plan) becomes a canonical key: one typed value per
 * key column — integers as integers, and everything whose kernel form means nothing on
 * another host or in another window turned into text: stack ids into symbolized frames,
 * addresses into symbols (usym/ksym), the `probe` cookie into the probe's name, plus the
 * agent-side `host`.  Two hosts' partial tables can then be merged key by key.
 *
 * A table maps canonical keys to one agg_state per aggregate column (kernel/aggstate.h),
 * bounded by a maximum number of groups (extra groups are counted, not stored).
 *
 * Output: text (columns aligned, histograms drawn as bpftrace does) or JSON lines (one
 * object per window, one per stream row; schema in docs/output.md).
 *
 * Two files implement it, by role: agent/table.c (canonical keys, the table, its merge and
 * wire form: what the agent and the aggregator share) and agent/output.c (text and JSON).
 */
#ifndef WEFT_AGENT_RESULT_H
#define WEFT_AGENT_RESULT_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "agent/agent.h"
#include "compiler/plan.h"

/* FOLDED: windows of an aggregating query only, one `frames count` line a group. */
enum agent_format { AGENT_FMT_TEXT, AGENT_FMT_JSON, AGENT_FMT_FOLDED };

/*
 * Turns what the kernel keeps into text.  Called while a window is being read, before the
 * next flip (stack ids are valid only until then).  Each returns a malloc'd string or NULL.
 */
struct agent_resolver {
	void *ctx;
	char *(*stack)(void *ctx, int64_t id, bool user, uint32_t pid); /* frames, ';'-joined */
	char *(*usym)(void *ctx, uint64_t addr, uint32_t pid);
	char *(*ksym)(void *ctx, uint64_t addr);
	const char *host; /* this host's name */
};

/*
 * A table for an aggregating plan, which it reads but does not own (p must outlive it).
 * max_groups 0: 4 x the plan's kernel bound (windows and hosts add groups), or 40960.
 * NULL with errno EINVAL (not an aggregating plan, or a layout that does not add up) or
 * ENOMEM.  The table owns every allocation it makes; clear and free release them all.
 */
struct agent_table *agent_table_new(const struct plan *p, uint32_t max_groups);
void agent_table_free(struct agent_table *t);
void agent_table_clear(struct agent_table *t); /* no groups, overflow 0 */
size_t agent_table_groups(const struct agent_table *t);
/* Group entries refused since the last clear because the table was full: one per kernel
 * entry or merged group that found no room, plus the overflow of merged tables. */
uint64_t agent_table_overflow(const struct agent_table *t);

/*
 * Folds one kernel entry in: key bytes (plan key_size; may be NULL when the plan has no
 * kernel key, e.g. an array map or `group by host`), ncpu per-CPU values of the plan's value
 * layout (8-aligned).  Stacks, symbols, `probe` and `host` are turned into text through r
 * (NULL, or a NULL callback or answer: a fallback text).  A new group that does not fit is
 * counted in agent_table_overflow() and 0 returned.  0, -EINVAL or -ENOMEM.
 */
int agent_table_add_kernel(struct agent_table *t, const void *key, const void *const *cpu_vals,
			   unsigned int ncpu, const struct agent_resolver *r);
/* dst (+)= src, group by group (the cluster's merge; also `for` across windows).  The plans
 * must have the same key columns and aggregates (-EINVAL otherwise, or if dst == src). */
int agent_table_merge(struct agent_table *dst, const struct agent_table *src);

/* Same groups with byte-equal states (states are canonical: equal inputs, equal bytes). */
bool agent_table_equal(const struct agent_table *a, const struct agent_table *b);

/*
 * Finalize, order, limit and print one window (docs/output.md).  Order: the plan's order by;
 * without one, by the aggregate when there is exactly one aggregate column (ascending, as
 * bpftrace prints maps), else by key; ties by key, so the output never depends on insertion
 * order.  stats may be NULL (index and times 0, no losses).  0, -EINVAL, -ENOMEM or -EIO.
 */
int agent_table_print(const struct agent_table *t, enum agent_format fmt,
		      const struct agent_window_stats *stats, FILE *out);

/* What a caller adds to a JSON window (`weft submit`: the cluster's window): the overflow to
 * report instead of the table's own, and members to append before the object's closing brace
 * (",\"name\":value..." as JSON text the caller wrote, or NULL). */
struct agent_print_extra {
	bool has_overflow;
	uint64_t overflow;
	const char *json_members;
};

/* agent_table_print() with x (NULL: none); x applies to AGENT_FMT_JSON only. */
int agent_table_print_ext(const struct agent_table *t, enum agent_format fmt,
			  const struct agent_window_stats *stats, const struct agent_print_extra *x,
			  FILE *out);

/* Whether windows of p can be printed AGENT_FMT_FOLDED: it aggregates (not a graph), with
 * at least one key column and one aggregate column. */
bool agent_plan_folds(const struct plan *p);

/* One stream record (after the header: len bytes, at least the plan's event_size) as a
 * row; the resolver turns stacks/symbols.  A short record or a plan that is not a stream
 * prints nothing and gives -EINVAL. */
int agent_row_print(const struct plan *p, const void *rec, size_t len, enum agent_format fmt,
		    const struct agent_resolver *r, FILE *out);
/* The header line of a text stream (column names); nothing for JSON. */
void agent_row_header(const struct plan *p, enum agent_format fmt, FILE *out);

/*
 * A stream row as cells, for the cluster (weft.proto's RowBatch): one per column of the
 * select, in order; a column whose render is text (agent_col_is_text()) holds text (s, len,
 * any bytes), any other an integer (printed with the column's render).  The text of many rows
 * is gathered in one malloc'd buffer *txt of *txtlen bytes and *txtcap capacity (NULL, 0, 0
 * at first; the caller frees it).
 */
struct agent_cell {
	bool text;
	int64_t i;
	const char *s;
	size_t len;
};

/* Whether column c of stream plan p holds text (false for a bad index). */
bool agent_col_is_text(const struct plan *p, int c);
/*
 * The cells of one stream record (as agent_row_print() reads it) into cells[p->ncols]; their
 * text is appended to *txt, each text cell's i its offset there (the buffer moves as it
 * grows): agent_cells_fix() makes them pointers once the buffer is complete.  0, -EINVAL
 * (short record, not a stream), -ENOMEM (nothing appended).
 */
int agent_row_cells(const struct plan *p, const void *rec, size_t len,
		    const struct agent_resolver *r, struct agent_cell *cells, char **txt,
		    size_t *txtlen, size_t *txtcap);
void agent_cells_fix(struct agent_cell *cells, size_t n, const char *txt);
/* A row of cells printed as agent_row_print() prints a record, with a column `host` first
 * when host is not NULL (text: before the others; JSON: the member "host"). */
int agent_cells_print(const struct plan *p, const char *host, const struct agent_cell *cells,
		      size_t n, enum agent_format fmt, FILE *out);
/* agent_row_header() with a column `host` first when host is true. */
void agent_row_header_host(const struct plan *p, bool host, enum agent_format fmt, FILE *out);

/* What a count of drop reason `reason` (enum weft_drop) counts, in words ("span starts"). */
const char *agent_drop_what(unsigned int reason);

/*
 * The wire form of a table (agent/weft.proto's Group): one Group per group, its
 * canonical key, and one agg_state_encode()d state per aggregate in plan order (quantiles
 * that share a sketch repeat the same state).  Additions for the cluster (agent/daemon.c and
 * the aggregator daemon).
 */
typedef struct Weft__Group Weft__Group; /* weft.pb-c.h, generated from agent/weft.proto */

/* All groups of t as a malloc'd array of *n malloc'd Groups (each one allocation);
 * release with agent_groups_free(), never with protobuf-c's free.  0, -EINVAL or -ENOMEM. */
int agent_table_to_groups(const struct agent_table *t, Weft__Group ***out, size_t *n);
void agent_groups_free(Weft__Group **groups, size_t n);
/*
 * Merges groups that came from the wire into t.  Everything is checked first: each key must
 * be a well-formed canonical key with t's plan's column count and types, each group must carry
 * one state per aggregate that agg_state_decode() accepts (and quantiles sharing a sketch the
 * same state).  One bad group refuses them all: -EINVAL and t unchanged.  Groups that do not
 * fit are counted in agent_table_overflow(), as for every other merge.  0, -EINVAL, -ENOMEM
 * (t may then hold part of the groups).
 */
int agent_table_add_groups(struct agent_table *t, Weft__Group *const *groups, size_t n);

/*
 * Group i (< agent_table_groups()) of t, when every key column is an integer and every
 * aggregate finalizes to an exact integer (count, sum, min, max): keys into keys[] (the
 * plan's nkeys), aggregates into aggs[] (its naggs), empty[a] for a min or max that saw no
 * value.  0, -EINVAL (a text key or an aggregate that is not an integer) or -ENOMEM.
 */
int agent_table_row_ints(const struct agent_table *t, size_t i, int64_t *keys, int64_t *aggs,
			 bool *empty);

/* s as a JSON string literal, escaped as every JSON line weft prints is (docs/output.md:
 * quotes, backslashes and controls escaped, bytes that are not UTF-8 as U+FFFD). */
void agent_json_str(FILE *out, const char *s);

#endif
