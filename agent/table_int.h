/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The insides that agent/table.c (the table of mergeable states) and agent/output.c (text and
 * JSON output) share: a growable byte buffer, decoded values, and how kernel bytes become
 * values.  Not an API: nothing outside agent/table.c and agent/output.c includes it; the
 * table's layout stays private to table.c, output reads it through agent_table_row().
 */
#ifndef WEFT_AGENT_TABLE_INT_H
#define WEFT_AGENT_TABLE_INT_H
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "agent/result.h"
#include "kernel/aggstate.h"

/* ---- growable byte buffer: an allocation failure sticks (oom) and later puts do nothing */

struct sbuf {
	char *p;
	size_t len, cap;
	bool oom;
};

static inline bool sb_reserve(struct sbuf *b, size_t n)
{
	size_t cap;
	char *p;

	if (b->oom)
		return false;
	if (b->len + n + 1 <= b->cap)
		return true;
	cap = b->cap ? b->cap : 256;
	while (cap < b->len + n + 1)
		cap *= 2;
	p = realloc(b->p, cap);
	if (!p) {
		b->oom = true;
		return false;
	}
	b->p = p;
	b->cap = cap;
	return true;
}

static inline void sb_put(struct sbuf *b, const void *d, size_t n)
{
	if (!sb_reserve(b, n))
		return;
	memcpy(b->p + b->len, d, n);
	b->len += n;
	b->p[b->len] = 0;
}

static inline void sb_putc(struct sbuf *b, char c)
{
	sb_put(b, &c, 1);
}

static inline void sb_puts(struct sbuf *b, const char *s)
{
	sb_put(b, s, strlen(s));
}

__attribute__((format(printf, 2, 3))) static inline void sb_printf(struct sbuf *b, const char *fmt,
								   ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0 || !sb_reserve(b, (size_t)n))
		return;
	va_start(ap, fmt);
	vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
}

static inline void sb_free(struct sbuf *b)
{
	free(b->p);
	memset(b, 0, sizeof(*b));
}

/* ---- values ---- */

/* A decoded value: an integer, or text (s, len) that lives in some buffer of the caller. */
struct kv {
	bool text;
	int64_t i;
	const char *s;
	uint32_t len;
};

/* Renders whose value is text (strings, stacks, symbols, probe, host). */
bool agent_render_is_text(enum render r);
/* Does slot s fit in `limit` kernel bytes, with the size its render needs? */
bool agent_slot_valid(const struct plan_slot *s, uint32_t limit);
/*
 * The value of slot s whose bytes start at b (already bounds-checked).  Text is appended to
 * txt; kv->i then holds its offset in txt until agent_kv_fix() makes pointers of them all
 * (txt may move while it grows).
 */
void agent_slot_value(const struct plan *p, const struct plan_slot *s, const uint8_t *b,
		      const struct agent_resolver *r, struct sbuf *txt, struct kv *kv);
void agent_kv_fix(struct kv *kv, int n, const struct sbuf *txt);

/* lang-a (agent/render_names.c): names and times at output. */
bool agent_names_is_text(enum render r); /* sysname, signame, errname, enum */
void agent_names_text(const struct plan_slot *s, int64_t v, struct sbuf *txt);
int64_t agent_names_walltime(int64_t mono_ns); /* CLOCK_MONOTONIC ns -> ns since the epoch */
/* A walltime or unit() value as text or JSON into b; false for other renders. */
bool agent_names_kv(struct sbuf *b, enum render r, int64_t v, bool json);

/* ---- the table, read by output ---- */

const struct plan *agent_table_plan(const struct agent_table *t);
/*
 * Group i (< agent_table_groups()) of t: its key values into kv (the plan's nkeys; text
 * points into the table, valid until it changes) and its aggregates finalized into res (the
 * plan's naggs; release each with agg_result_release(), also on failure).  0 or -errno.
 */
int agent_table_row(const struct agent_table *t, size_t i, struct kv *kv, struct agg_result *res);

#endif
