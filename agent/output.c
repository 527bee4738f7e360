// SPDX-License-Identifier: Apache-2.0
/*
 * Output (agent/result.h): windows and stream rows as text or JSON lines (docs/output.md);
 * windows also in the folded form of flame graphs (root;...;leaf COUNT).
 *
 * A window: every group of the table (agent/table.c) is finalized, ordered (the plan's order
 * by, else deterministic: by key, or by the one aggregate as bpftrace does), limited, and
 * written as aligned text columns with histograms drawn under their row, or as one JSON
 * object.  Output order never depends on insertion order, so a merged table prints exactly
 * like a table built from all the inputs at once.  A stream row: the record's fields, turned
 * into values as keys are (agent_slot_value()).
 *
 * Strings are escaped, never trusted: JSON through base/text.h (bad UTF-8 becomes U+FFFD),
 * text with C escapes so that a row stays one line.  Losses and notes are printed with the
 * window they happened in, never dropped.
 *
 * Must never: read record bytes beyond the plan's layout (a short record is refused), or
 * index attach[] with an unchecked cookie.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "agent/result.h"
#include "agent/table_int.h"
#include "base/rowfmt.h"
#include "base/text.h"
#include "kernel/aggstate.h"
#include "kernel/weft_abi.h"

/* ---- escaping ---- */

/* A JSON string literal (base/text.h: quotes, backslash and controls escaped, bad UTF-8 as
 * U+FFFD). */
static void sb_json_str(struct sbuf *b, const char *s, size_t len)
{
	size_t max = TEXT_JSON_MAX(len);

	if (!sb_reserve(b, max))
		return;
	b->len += text_json_escape(b->p + b->len, max + 1, s, len);
}

/* Text for a terminal: control characters become C escapes, so a row stays one line. */
static void sb_text(struct sbuf *b, const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c == '\n')
			sb_puts(b, "\\n");
		else if (c == '\t')
			sb_puts(b, "\\t");
		else if (c < 0x20 || c == 0x7f)
			sb_printf(b, "\\x%02x", c);
		else
			sb_putc(b, (char)c);
	}
}

/* ---- finalizing and ordering ---- */

/* One group ready to print: its key values and one result per aggregate. */
struct prow {
	struct kv *kv;
	struct agg_result *res;
};

struct order_ctx {
	const struct plan *p;
	const struct prow *rows;
	int key; /* key column to order by first, or -1 */
	bool desc;
};

static bool render_signed(enum render r)
{
	return r == RENDER_INT;
}

static int kv_cmp(enum render r, const struct kv *a, const struct kv *b)
{
	if (a->text != b->text)
		return a->text ? 1 : -1;
	if (a->text) {
		size_t n = a->len < b->len ? a->len : b->len;
		int c = n ? memcmp(a->s, b->s, n) : 0;

		if (c)
			return c < 0 ? -1 : 1;
		return a->len < b->len ? -1 : a->len > b->len;
	}
	if (render_signed(r))
		return a->i < b->i ? -1 : a->i > b->i;
	return (uint64_t)a->i < (uint64_t)b->i ? -1 : (uint64_t)a->i > (uint64_t)b->i;
}

/* By every key column in plan order, ascending: the deterministic order of groups. */
static int row_key_cmp(const struct plan *p, const struct prow *a, const struct prow *b)
{
	for (int k = 0; k < p->nkeys; k++) {
		int c = kv_cmp(p->keys[k].render, &a->kv[k], &b->kv[k]);

		if (c)
			return c;
	}
	return 0;
}

static int order_cmp(const void *x, const void *y, void *arg)
{
	const struct order_ctx *o = arg;
	const struct prow *a = &o->rows[*(const size_t *)x], *b = &o->rows[*(const size_t *)y];
	int c;

	if (o->key >= 0) {
		c = kv_cmp(o->p->keys[o->key].render, &a->kv[o->key], &b->kv[o->key]);
		if (c)
			return o->desc ? -c : c;
	}
	return row_key_cmp(o->p, a, b);
}

/* What `order by` an aggregate compares: NaN (sorted last) when it has no value. */
static double order_value(const struct agg_result *r)
{
	if (r->kind == AGG_HIST || r->kind == AGG_LHIST)
		return (double)r->n;
	if (r->empty)
		return NAN;
	if (r->integer)
		return (double)r->ival;
	if (r->kind == AGG_DISTINCT)
		return (double)r->ival;
	return r->value;
}

static bool is_hist(enum agg_kind k)
{
	return k == AGG_HIST || k == AGG_LHIST;
}

/* ---- cells ---- */

static void sb_double(struct sbuf *b, double v, bool json)
{
	double a = fabs(v);

	if (!isfinite(v))
		sb_puts(b, json ? "null" : (isnan(v) ? "nan" : v > 0 ? "inf" : "-inf"));
	else if (json)
		sb_printf(b, "%.15g", v);
	else if (a < 1e15 && v == floor(v))
		sb_printf(b, "%.0f", v);
	else if (a >= 1e15 || a < 0.01)
		sb_printf(b, "%.6g", v);
	else
		sb_printf(b, "%.2f", v);
}

/* An aggregate's value as a table cell or a JSON value (histograms: JSON only). */
static void sb_agg(struct sbuf *b, const struct agg_result *r, bool json)
{
	if (is_hist(r->kind)) {
		size_t first = SIZE_MAX, last = 0;
		bool comma = false;

		if (!json) {
			sb_printf(b, "%" PRIu64, r->n);
			return;
		}
		for (size_t i = 0; i < r->nbuckets; i++)
			if (r->buckets[i].count) {
				if (first == SIZE_MAX)
					first = i;
				last = i;
			}
		sb_puts(b, "{\"buckets\":[");
		for (size_t i = first; first != SIZE_MAX && i <= last; i++) {
			const struct agg_bucket *k = &r->buckets[i];

			sb_puts(b, comma ? ",{\"min\":" : "{\"min\":");
			if (k->open_below)
				sb_puts(b, "null");
			else
				sb_printf(b, "%" PRId64, k->min);
			sb_puts(b, ",\"max\":");
			if (k->open_above)
				sb_puts(b, "null");
			else
				sb_printf(b, "%" PRId64, k->max);
			sb_printf(b, ",\"count\":%" PRIu64 "}", k->count);
			comma = true;
		}
		sb_printf(b, "],\"count\":%" PRIu64 "}", r->n);
		return;
	}
	if (r->empty)
		sb_puts(b, json ? "null" : "-");
	else if (r->integer)
		sb_printf(b, "%" PRId64, r->ival);
	else if (r->kind == AGG_DISTINCT)
		sb_printf(b, "%" PRId64, r->ival);
	else
		sb_double(b, r->value, json);
}

/* A key or field value as a table cell or a JSON value. */
static void sb_kv(struct sbuf *b, enum render r, const struct kv *v, bool json)
{
	if (v->text) {
		if (json)
			sb_json_str(b, v->s, v->len);
		else
			sb_text(b, v->s, v->len);
		return;
	}
	if (agent_names_kv(b, r, v->i, json))
		return;
	switch (r) {
	case RENDER_INT:
		sb_printf(b, "%" PRId64, v->i);
		break;
	case RENDER_HEX:
		/* JSON numbers lose 64-bit addresses in most parsers: a string */
		sb_printf(b, json ? "\"0x%" PRIx64 "\"" : "0x%" PRIx64, (uint64_t)v->i);
		break;
	case RENDER_BOOL:
		sb_puts(b, v->i ? "true" : "false");
		break;
	default:
		sb_printf(b, "%" PRIu64, (uint64_t)v->i);
		break;
	}
}

/* ---- window output ---- */

static const char *const drop_names[WEFT_DROP_NR] = WEFT_DROP_NAMES;
static const char *const drop_units[WEFT_DROP_NR] = {
	[WEFT_DROP_MAP_FULL] = "events",
	[WEFT_DROP_RINGBUF_FULL] = "rows",
	[WEFT_DROP_SPAN_FULL] = "span starts",
	[WEFT_DROP_SPAN_EVICTED] = "span starts",
	[WEFT_DROP_SPAN_REPLACED] = "span starts",
	[WEFT_DROP_STACK] = "stacks",
	[WEFT_DROP_STR_FAULT] = "strings",
	[WEFT_DROP_STR_TRUNC] = "strings",
	[WEFT_DROP_SPAN_NO_START] =
		"span ends whose call began before attach or whose start was lost",
};

const char *agent_drop_what(unsigned int reason)
{
	return reason < WEFT_DROP_NR ? drop_units[reason] : "events";
}

static void sb_json_window(struct sbuf *b, const struct agent_table *t,
			   const struct agent_window_stats *st, const struct agent_print_extra *x,
			   const struct prow *rows, const size_t *idx, size_t nshow)
{
	const struct plan *p = agent_table_plan(t);
	bool comma = false;

	sb_printf(b,
		  "{\"type\":\"window\",\"index\":%" PRIu64 ",\"start_ns\":%" PRIu64
		  ",\"end_ns\":%" PRIu64 ",\"columns\":[",
		  st->index, st->start_ns, st->end_ns);
	for (int c = 0; c < p->ncols; c++) {
		if (c)
			sb_putc(b, ',');
		sb_json_str(b, p->cols[c].name, strnlen(p->cols[c].name, sizeof(p->cols[c].name)));
	}
	sb_puts(b, "],\"rows\":[");
	for (size_t i = 0; i < nshow; i++) {
		const struct prow *r = &rows[idx[i]];

		sb_puts(b, i ? ",{" : "{");
		for (int c = 0; c < p->ncols; c++) {
			const struct plan_column *col = &p->cols[c];

			if (c)
				sb_putc(b, ',');
			sb_json_str(b, col->name, strnlen(col->name, sizeof(col->name)));
			sb_putc(b, ':');
			if (col->is_agg)
				sb_agg(b, &r->res[col->idx], true);
			else
				sb_kv(b, p->keys[col->idx].render, &r->kv[col->idx], true);
		}
		sb_putc(b, '}');
	}
	sb_printf(b, "],\"groups\":%zu,", agent_table_groups(t));
	if (st->spans_known)
		sb_printf(b, "\"spans_open\":%" PRIu64 ",", st->spans_open);
	sb_puts(b, "\"lost\":{");
	for (int d = 0; d < WEFT_DROP_NR; d++)
		if (WEFT_DROP_IS_LOSS(d)) {
			sb_printf(b, "%s\"%s\":%" PRIu64, comma ? "," : "", drop_names[d],
				  st->drops[d]);
			comma = true;
		}
	sb_puts(b, "},\"notes\":{");
	comma = false;
	for (int d = 0; d < WEFT_DROP_NR; d++)
		if (!WEFT_DROP_IS_LOSS(d)) {
			sb_printf(b, "%s\"%s\":%" PRIu64, comma ? "," : "", drop_names[d],
				  st->drops[d]);
			comma = true;
		}
	sb_printf(b, "},\"misses\":%" PRIu64 ",\"overflow\":%" PRIu64, st->misses,
		  x && x->has_overflow ? x->overflow : agent_table_overflow(t));
	if (x && x->json_members)
		sb_puts(b, x->json_members);
	sb_puts(b, "}\n");
}

/* "lost: 12 events (map_full), ..." and "notes: ..." lines; nothing when all are zero. */
static void sb_losses(struct sbuf *b, const struct agent_window_stats *st, uint64_t overflow)
{
	bool any = false;

	for (int d = 0; d < WEFT_DROP_NR; d++)
		if (WEFT_DROP_IS_LOSS(d) && st->drops[d]) {
			sb_printf(b, "%s%" PRIu64 " %s (%s)", any ? ", " : "lost: ", st->drops[d],
				  drop_units[d], drop_names[d]);
			any = true;
		}
	if (st->misses) {
		sb_printf(b, "%s%" PRIu64 " events (bpf_recursion_miss)",
			  any ? ", " : "lost: ", st->misses);
		any = true;
	}
	if (overflow) {
		sb_printf(b, "%s%" PRIu64 " groups (agent_table_full)",
			  any ? ", " : "lost: ", overflow);
		any = true;
	}
	if (any)
		sb_putc(b, '\n');
	any = false;
	for (int d = 0; d < WEFT_DROP_NR; d++)
		if (!WEFT_DROP_IS_LOSS(d) && st->drops[d]) {
			sb_printf(b, "%s%" PRIu64 " %s (%s)", any ? ", " : "notes: ", st->drops[d],
				  drop_units[d], drop_names[d]);
			any = true;
		}
	if (any)
		sb_putc(b, '\n');
}

static void sb_window_title(struct sbuf *b, const struct agent_window_stats *st, size_t nshow,
			    size_t ngroups)
{
	sb_printf(b, "window %" PRIu64, st->index);
	if (st->end_ns) {
		struct timespec mono, real;
		char when[32] = "";

		clock_gettime(CLOCK_MONOTONIC, &mono);
		clock_gettime(CLOCK_REALTIME, &real);
		{
			/* the wall-clock time of the window's end, however late we print it */
			int64_t now = (int64_t)mono.tv_sec * 1000000000LL + mono.tv_nsec;
			int64_t ago = now - (int64_t)st->end_ns;
			time_t end = real.tv_sec - (time_t)((ago > 0 ? ago : 0) / 1000000000LL);
			struct tm tm;

			if (localtime_r(&end, &tm))
				strftime(when, sizeof(when), "%H:%M:%S", &tm);
		}
		sb_printf(b, " at %s", when);
		if (st->end_ns >= st->start_ns && st->start_ns)
			sb_printf(b, " (%.3fs)", (double)(st->end_ns - st->start_ns) / 1e9);
	}
	if (nshow < ngroups)
		sb_printf(b, ": %zu of %zu groups\n", nshow, ngroups);
	else
		sb_printf(b, ": %zu group%s\n", ngroups, ngroups == 1 ? "" : "s");
}

/* The title of a row's histogram: the column, then the row's key values. */
static void sb_hist_title(struct sbuf *b, const struct plan *p, const struct prow *r,
			  const char *col)
{
	bool first = true;

	sb_puts(b, col);
	for (int c = 0; c < p->ncols; c++) {
		if (p->cols[c].is_agg)
			continue;
		sb_puts(b, first ? "[" : ", ");
		sb_kv(b, p->keys[p->cols[c].idx].render, &r->kv[p->cols[c].idx], false);
		first = false;
	}
	if (!first)
		sb_putc(b, ']');
}

static bool col_numeric(const struct plan *p, const struct plan_column *c)
{
	return c->is_agg || !agent_render_is_text(p->keys[c->idx].render);
}

static int print_text_window(const struct agent_table *t, const struct agent_window_stats *st,
			     const struct prow *rows, const size_t *idx, size_t nshow, FILE *out)
{
	const struct plan *p = agent_table_plan(t);
	struct sbuf b = { 0 }, *cells;
	size_t *width;
	int rc = 0, ntab = 0, last = -1;

	cells = calloc((size_t)p->ncols * (nshow + 1) + 1, sizeof(*cells));
	width = calloc((size_t)p->ncols + 1, sizeof(*width));
	if (!cells || !width) {
		rc = -ENOMEM;
		goto out_free;
	}
	/* which columns go into the table: all but histograms, drawn under each row */
	for (int c = 0; c < p->ncols; c++) {
		const struct plan_column *col = &p->cols[c];

		if (col->is_agg && is_hist(p->aggs[col->idx].spec.kind))
			continue;
		ntab++;
		last = c;
		width[c] = strnlen(col->name, sizeof(col->name));
		for (size_t i = 0; i < nshow; i++) {
			const struct prow *r = &rows[idx[i]];
			struct sbuf *cell = &cells[i * (size_t)p->ncols + c];

			if (col->is_agg)
				sb_agg(cell, &r->res[col->idx], false);
			else
				sb_kv(cell, p->keys[col->idx].render, &r->kv[col->idx], false);
			if (cell->oom)
				rc = -ENOMEM;
			if (cell->len > width[c])
				width[c] = cell->len;
		}
	}
	if (rc)
		goto out_free;

	sb_window_title(&b, st, nshow, agent_table_groups(t));
	if (ntab) {
		for (int c = 0; c <= last; c++) {
			const struct plan_column *col = &p->cols[c];
			bool num = col_numeric(p, col);

			if (col->is_agg && is_hist(p->aggs[col->idx].spec.kind))
				continue;
			if (c == last && !num)
				sb_printf(&b, "%s", col->name);
			else
				sb_printf(&b, num ? "%*s" : "%-*s", (int)width[c], col->name);
			sb_puts(&b, c == last ? "\n" : "  ");
		}
	}
	for (size_t i = 0; i < nshow; i++) {
		const struct prow *r = &rows[idx[i]];

		for (int c = 0; c <= last; c++) {
			const struct plan_column *col = &p->cols[c];
			const struct sbuf *cell = &cells[i * (size_t)p->ncols + c];
			bool num = col_numeric(p, col);

			if (col->is_agg && is_hist(p->aggs[col->idx].spec.kind))
				continue;
			if (c == last && !num)
				sb_printf(&b, "%s", cell->p ? cell->p : "");
			else
				sb_printf(&b, num ? "%*s" : "%-*s", (int)width[c],
					  cell->p ? cell->p : "");
			sb_puts(&b, c == last ? "\n" : "  ");
		}
		for (int c = 0; c < p->ncols; c++) {
			const struct plan_column *col = &p->cols[c];
			struct sbuf title = { 0 };
			char *hist = NULL;
			size_t hlen = 0;
			FILE *hf;

			if (!col->is_agg || !is_hist(p->aggs[col->idx].spec.kind))
				continue;
			sb_hist_title(&title, p, r, col->name);
			hf = open_memstream(&hist, &hlen);
			if (!hf || title.oom) {
				if (hf)
					fclose(hf);
				sb_free(&title);
				rc = -ENOMEM;
				goto out_free;
			}
			agg_result_print_hist(hf, title.p, &r->res[col->idx]);
			fclose(hf);
			sb_put(&b, hist, hlen);
			sb_putc(&b, '\n');
			free(hist);
			sb_free(&title);
		}
	}
	sb_losses(&b, st, agent_table_overflow(t));
	if (b.oom)
		rc = -ENOMEM;
	else if (fwrite(b.p, 1, b.len, out) != b.len)
		rc = -EIO;

out_free:
	for (size_t i = 0; cells && i < (size_t)p->ncols * (nshow + 1); i++)
		sb_free(&cells[i]);
	free(cells);
	free(width);
	sb_free(&b);
	return rc;
}

/* ---- folded stacks (flame graphs) ---- */

/* One frame of a folded line: text escaped as a table cell is, with ';' (the frame
 * separator) written as ','. */
static void sb_frame(struct sbuf *b, const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		if (s[i] == ';')
			sb_putc(b, ',');
		else
			sb_text(b, s + i, 1);
	}
}

/* The length of frame f without a "+0x1f" offset, so that every call site of a function is
 * one frame of the graph. */
static size_t frame_len(const char *f, size_t len)
{
	size_t i = len;

	while (i > 0 &&
	       ((f[i - 1] >= '0' && f[i - 1] <= '9') || (f[i - 1] >= 'a' && f[i - 1] <= 'f')))
		i--;
	if (i < len && i >= 3 && f[i - 1] == 'x' && f[i - 2] == '0' && f[i - 3] == '+')
		return i - 3;
	return len;
}

/* A stack's text (frames innermost first, ';'-joined) root first, offsets dropped. */
static void sb_folded_stack(struct sbuf *b, const char *s, size_t len)
{
	size_t end = len;
	bool first = true;

	while (end > 0 || first) {
		size_t start = end;

		while (start > 0 && s[start - 1] != ';')
			start--;
		if (!first)
			sb_putc(b, ';');
		sb_frame(b, s + start, frame_len(s + start, end - start));
		first = false;
		if (start == 0)
			break;
		end = start - 1;
	}
}

/*
 * The folded form flamegraph.pl reads: one line a group, the key columns in order as frames
 * joined by ';' (a stack expands into its frames, root first; any other key is one frame),
 * a space, and the first aggregate column as a number (a histogram: its count; an empty
 * value: 0).
 */
static int print_folded_window(const struct plan *p, const struct prow *rows, const size_t *idx,
			       size_t nshow, FILE *out)
{
	struct sbuf b = { 0 };
	int agg = -1, rc = 0;

	for (int c = 0; c < p->ncols && agg < 0; c++)
		if (p->cols[c].is_agg)
			agg = p->cols[c].idx;
	if (agg < 0)
		return -EINVAL;
	for (size_t i = 0; i < nshow; i++) {
		const struct prow *r = &rows[idx[i]];
		const struct agg_result *a = &r->res[agg];
		bool sep = false;

		for (int c = 0; c < p->ncols; c++) {
			const struct plan_column *col = &p->cols[c];
			const struct kv *v;
			enum render rd;

			if (col->is_agg)
				continue;
			v = &r->kv[col->idx];
			rd = p->keys[col->idx].render;
			if (sep)
				sb_putc(&b, ';');
			sep = true;
			if ((rd == RENDER_USTACK || rd == RENDER_KSTACK) && v->text) {
				sb_folded_stack(&b, v->s, v->len);
			} else if (v->text) {
				sb_frame(&b, v->s, v->len);
			} else {
				struct sbuf cell = { 0 };

				sb_kv(&cell, rd, v, false);
				sb_frame(&b, cell.p ? cell.p : "", cell.len);
				sb_free(&cell);
			}
		}
		if (is_hist(a->kind))
			sb_printf(&b, " %" PRIu64 "\n", a->n);
		else if (a->empty)
			sb_puts(&b, " 0\n");
		else if (a->integer || a->kind == AGG_DISTINCT)
			sb_printf(&b, " %" PRId64 "\n", a->ival);
		else
			sb_printf(&b, " %.15g\n", a->value);
	}
	if (b.oom)
		rc = -ENOMEM;
	else if (b.len && fwrite(b.p, 1, b.len, out) != b.len)
		rc = -EIO;
	sb_free(&b);
	return rc;
}

bool agent_plan_folds(const struct plan *p)
{
	bool key = false, agg = false;

	if (!p || !p->aggregating || p->graph)
		return false;
	for (int c = 0; c < p->ncols; c++) {
		agg |= p->cols[c].is_agg;
		key |= !p->cols[c].is_agg;
	}
	return key && agg;
}

int agent_table_print(const struct agent_table *t, enum agent_format fmt,
		      const struct agent_window_stats *stats, FILE *out)
{
	return agent_table_print_ext(t, fmt, stats, NULL, out);
}

int agent_table_print_ext(const struct agent_table *t, enum agent_format fmt,
			  const struct agent_window_stats *stats, const struct agent_print_extra *x,
			  FILE *out)
{
	const struct agent_window_stats none = { 0 };
	const struct agent_window_stats *st = stats ? stats : &none;
	const struct plan *p;
	struct prow *rows = NULL;
	struct kv *kvs = NULL;
	struct agg_result *res = NULL;
	size_t n, nshow, *base = NULL, *idx = NULL;
	double *keys = NULL;
	int rc = 0, nagg_cols = 0, agg_col = -1;

	if (!t || !out ||
	    (fmt != AGENT_FMT_TEXT && fmt != AGENT_FMT_JSON && fmt != AGENT_FMT_FOLDED))
		return -EINVAL;
	p = agent_table_plan(t);
	n = agent_table_groups(t);
	rows = calloc(n + 1, sizeof(*rows));
	kvs = calloc(n * (size_t)p->nkeys + 1, sizeof(*kvs));
	res = calloc(n * (size_t)p->naggs + 1, sizeof(*res));
	base = calloc(n + 1, sizeof(*base));
	idx = calloc(n + 1, sizeof(*idx));
	keys = calloc(n + 1, sizeof(*keys));
	if (!rows || !kvs || !res || !base || !idx || !keys) {
		rc = -ENOMEM;
		goto out_free;
	}
	for (size_t i = 0; i < n; i++) {
		struct prow *r = &rows[i];

		r->kv = &kvs[i * (size_t)p->nkeys];
		r->res = &res[i * (size_t)p->naggs];
		rc = agent_table_row(t, i, r->kv, r->res);
		if (rc)
			goto out_free;
		base[i] = i;
	}

	/* the deterministic order first (by key), so ties below fall back to it */
	{
		struct order_ctx o = { .p = p, .rows = rows, .key = -1 };

		qsort_r(base, n, sizeof(*base), order_cmp, &o);
	}
	for (int c = 0; c < p->ncols; c++)
		if (p->cols[c].is_agg) {
			nagg_cols++;
			agg_col = c;
		}
	nshow = p->limit > 0 && (uint64_t)p->limit < n ? (size_t)p->limit : n;
	if (p->order_col >= 0 && p->order_col < p->ncols && !p->cols[p->order_col].is_agg) {
		struct order_ctx o = { .p = p,
				       .rows = rows,
				       .key = p->cols[p->order_col].idx,
				       .desc = p->order_desc };

		memcpy(idx, base, n * sizeof(*idx));
		qsort_r(idx, n, sizeof(*idx), order_cmp, &o);
	} else if ((p->order_col >= 0 && p->order_col < p->ncols) || nagg_cols == 1) {
		/* an aggregate: top-k; without order by, bpftrace's ascending by value */
		bool ordered = p->order_col >= 0 && p->order_col < p->ncols;
		int a = p->cols[ordered ? p->order_col : agg_col].idx;

		for (size_t i = 0; i < n; i++)
			keys[i] = order_value(&rows[base[i]].res[a]);
		nshow = agg_topk(keys, n, nshow, ordered && p->order_desc, idx);
		for (size_t i = 0; i < nshow; i++)
			idx[i] = base[idx[i]];
	} else {
		memcpy(idx, base, n * sizeof(*idx));
	}

	if (fmt == AGENT_FMT_JSON) {
		struct sbuf b = { 0 };

		sb_json_window(&b, t, st, x, rows, idx, nshow);
		if (b.oom)
			rc = -ENOMEM;
		else if (fwrite(b.p, 1, b.len, out) != b.len)
			rc = -EIO;
		sb_free(&b);
	} else if (fmt == AGENT_FMT_FOLDED) {
		struct sbuf lb = { 0 };

		rc = print_folded_window(p, rows, idx, nshow, out);
		/* losses and notes go to stderr: the folded lines are for a flame graph tool */
		sb_losses(&lb, st, agent_table_overflow(t));
		if (lb.len && !lb.oom) {
			fputs("weft: ", stderr);
			fwrite(lb.p, 1, lb.len, stderr);
		}
		sb_free(&lb);
	} else {
		rc = print_text_window(t, st, rows, idx, nshow, out);
	}

out_free:
	for (size_t i = 0; res && i < n * (size_t)p->naggs; i++)
		agg_result_release(&res[i]);
	free(rows);
	free(kvs);
	free(res);
	free(base);
	free(idx);
	free(keys);
	return rc;
}

/* ---- stream rows ---- */

static bool plan_valid_stream(const struct plan *p)
{
	if (!p || p->aggregating || p->nfields < 0 || p->ncols < 0 || p->nattach < 0)
		return false;
	if ((p->nfields && !p->fields) || (p->ncols && !p->cols) || (p->nattach && !p->attach))
		return false;
	for (int i = 0; i < p->nfields; i++)
		if (!agent_slot_valid(&p->fields[i], p->event_size))
			return false;
	for (int i = 0; i < p->ncols; i++)
		if (p->cols[i].is_agg || p->cols[i].idx < 0 || p->cols[i].idx >= p->nfields)
			return false;
	return true;
}

/* Width of a stream column in text: enough for typical values, as opensnoop does. */
static int field_width(const struct plan_slot *f, bool last)
{
	int w, name = (int)strnlen(f->name, sizeof(f->name));
	/* by name: f->e may not outlive the compile (NULL after manifest_read) */
	bool is_time = strcmp(f->name, "time") == 0;

	switch (f->render) {
	case RENDER_INT:
	case RENDER_UINT:
		w = is_time ? 16 : 7;
		break;
	case RENDER_HEX:
		w = 18;
		break;
	case RENDER_BOOL:
		w = 5;
		break;
	case RENDER_WALLTIME: /* lang-a: 2026-01-02T03:04:05.123456789Z */
		w = 30;
		break;
	case RENDER_NS:
	case RENDER_US:
	case RENDER_MS:
	case RENDER_S:
		w = 12;
		break;
	case RENDER_USTACK:
	case RENDER_KSTACK:
		w = 0;
		break;
	default:
		w = 16;
		break;
	}
	if (last && agent_render_is_text(f->render))
		return 0; /* strings at the end are not padded */
	return w > name ? w : name;
}

#define HOST_WIDTH 12 /* the host column of a cluster's stream rows */

void agent_row_header_host(const struct plan *p, bool host, enum agent_format fmt, FILE *out)
{
	struct sbuf b = { 0 };

	if (fmt != AGENT_FMT_TEXT || !out || !plan_valid_stream(p) || p->format)
		return; /* formatted rows have no header: they are for scripts */
	if (host)
		sb_printf(&b, "%-*s", p->ncols ? HOST_WIDTH : 0, "host");
	for (int c = 0; c < p->ncols; c++) {
		const struct plan_slot *f = &p->fields[p->cols[c].idx];
		bool last = c == p->ncols - 1;
		int w = field_width(f, last);

		if (c || host)
			sb_putc(&b, ' ');
		sb_printf(&b, agent_render_is_text(f->render) ? "%-*s" : "%*s", w, p->cols[c].name);
	}
	sb_putc(&b, '\n');
	if (!b.oom)
		fwrite(b.p, 1, b.len, out);
	sb_free(&b);
}

void agent_row_header(const struct plan *p, enum agent_format fmt, FILE *out)
{
	agent_row_header_host(p, false, fmt, out);
}

/*
 * A row as its `format` says (base/rowfmt.h): literal text as written, each conversion of the
 * next column's cell.  Integers are printed from their value, text as the table shows it
 * (escaped), cut to the precision and padded to the width; a conversion that does not fit its
 * column (only a hand-made manifest has one: the compiler refuses it) prints the cell as text,
 * and one past the last column prints nothing.  A newline ends the row unless the format does.
 */
static void row_format(const struct plan *p, const struct rowfmt *rf, const struct kv *kv,
		       struct sbuf *b)
{
	int col = 0;

	for (int i = 0; i < rf->n; i++) {
		const struct rowfmt_piece *pc = &rf->v[i];
		const struct plan_slot *f;
		const struct kv *v;
		struct sbuf cell = { 0 };
		size_t keep, pad;
		bool left;

		if (pc->conv == 0) {
			sb_put(b, p->format + pc->off, pc->len);
			continue;
		}
		if (pc->conv == '%') {
			sb_putc(b, '%');
			continue;
		}
		if (col >= p->ncols)
			continue;
		f = &p->fields[p->cols[col].idx];
		v = &kv[p->cols[col].idx];
		col++;
		if (!v->text && rowfmt_conv_int(pc->conv) && f->render != RENDER_BOOL) {
			char num[ROWFMT_MAX_WIDTH + 32];

			sb_put(b, num, rowfmt_int(pc, v->i, num, sizeof(num)));
			continue;
		}
		if (!v->text && rowfmt_conv_int(pc->conv)) { /* a truth value: 1 or 0 */
			char num[ROWFMT_MAX_WIDTH + 32];

			sb_put(b, num, rowfmt_int(pc, v->i != 0, num, sizeof(num)));
			continue;
		}
		sb_kv(&cell, f->render, v, false);
		pad = rowfmt_pad(pc, cell.len, &keep, &left);
		for (size_t k = 0; left && k < pad; k++)
			sb_putc(b, ' ');
		if (cell.p)
			sb_put(b, cell.p, keep);
		for (size_t k = 0; !left && k < pad; k++)
			sb_putc(b, ' ');
		if (cell.oom)
			b->oom = true;
		sb_free(&cell);
	}
	if (!rf->ends_nl)
		sb_putc(b, '\n');
}

/* A row whose values are kv (by field index) printed to out; host: a first column. */
static int kv_row_print(const struct plan *p, const char *host, const struct kv *kv,
			enum agent_format fmt, FILE *out)
{
	struct sbuf b = { 0 };
	int rc = 0;

	if (fmt == AGENT_FMT_TEXT && p->format) {
		struct rowfmt *rf = malloc(sizeof(*rf));
		uint32_t bo, bl;
		const char *why;

		if (host) {
			sb_text(&b, host, strlen(host));
			sb_putc(&b, ' ');
		}
		/* the manifest reader refused a malformed format: this parse succeeds */
		if (rf && rowfmt_parse(p->format, strlen(p->format), rf, &bo, &bl, &why) == 0)
			row_format(p, rf, kv, &b);
		else
			rc = -EINVAL;
		free(rf);
		goto done;
	}
	if (fmt == AGENT_FMT_JSON) {
		sb_puts(&b, "{\"type\":\"row\"");
		if (host) {
			sb_puts(&b, ",\"host\":");
			sb_json_str(&b, host, strlen(host));
		}
	} else if (host) {
		struct sbuf cell = { 0 };

		sb_text(&cell, host, strlen(host));
		sb_printf(&b, "%-*s", p->ncols ? HOST_WIDTH : 0, cell.p ? cell.p : "");
		if (cell.oom)
			b.oom = true;
		sb_free(&cell);
	}
	for (int c = 0; c < p->ncols; c++) {
		const struct plan_slot *f = &p->fields[p->cols[c].idx];
		const struct kv *v = &kv[p->cols[c].idx];

		if (fmt == AGENT_FMT_JSON) {
			sb_putc(&b, ',');
			sb_json_str(&b, p->cols[c].name,
				    strnlen(p->cols[c].name, sizeof(p->cols[c].name)));
			sb_putc(&b, ':');
			sb_kv(&b, f->render, v, true);
		} else {
			struct sbuf cell = { 0 };
			int w = field_width(f, c == p->ncols - 1);

			sb_kv(&cell, f->render, v, false);
			if (c || host)
				sb_putc(&b, ' ');
			sb_printf(&b, agent_render_is_text(f->render) ? "%-*s" : "%*s", w,
				  cell.p ? cell.p : "");
			if (cell.oom)
				b.oom = true;
			sb_free(&cell);
		}
	}
	sb_puts(&b, fmt == AGENT_FMT_JSON ? "}\n" : "\n");
done:
	if (!rc && b.oom)
		rc = -ENOMEM;
	else if (!rc && b.len && fwrite(b.p, 1, b.len, out) != b.len)
		rc = -EIO;
	sb_free(&b);
	return rc;
}

/* The values of record rec by field index; their text in txt (kv made pointers). */
static int record_kv(const struct plan *p, const void *rec, size_t len,
		     const struct agent_resolver *r, struct sbuf *txt, struct kv **out)
{
	struct kv *kv;

	if (!rec || !plan_valid_stream(p) || len < p->event_size)
		return -EINVAL; /* a short or garbled record */
	kv = calloc((size_t)p->nfields + 1, sizeof(*kv));
	if (!kv)
		return -ENOMEM;
	for (int i = 0; i < p->nfields; i++) {
		const struct plan_slot *f = &p->fields[i];

		agent_slot_value(p, f,
				 f->render == RENDER_HOST ? NULL : (const uint8_t *)rec + f->offset,
				 r, txt, &kv[i]);
	}
	agent_kv_fix(kv, p->nfields, txt);
	if (txt->oom) {
		free(kv);
		return -ENOMEM;
	}
	*out = kv;
	return 0;
}

int agent_row_print(const struct plan *p, const void *rec, size_t len, enum agent_format fmt,
		    const struct agent_resolver *r, FILE *out)
{
	struct sbuf txt = { 0 };
	struct kv *kv = NULL;
	int rc;

	if (!out || (fmt != AGENT_FMT_TEXT && fmt != AGENT_FMT_JSON))
		return -EINVAL;
	rc = record_kv(p, rec, len, r, &txt, &kv);
	if (rc == 0)
		rc = kv_row_print(p, NULL, kv, fmt, out);
	sb_free(&txt);
	free(kv);
	return rc;
}

bool agent_col_is_text(const struct plan *p, int c)
{
	if (!p || c < 0 || c >= p->ncols || !p->cols || !p->fields || p->cols[c].idx < 0 ||
	    p->cols[c].idx >= p->nfields)
		return false;
	return agent_render_is_text(p->fields[p->cols[c].idx].render);
}

int agent_row_cells(const struct plan *p, const void *rec, size_t len,
		    const struct agent_resolver *r, struct agent_cell *cells, char **txtp,
		    size_t *txtlen, size_t *txtcap)
{
	struct sbuf txt = { .p = *txtp, .len = *txtlen, .cap = *txtp ? *txtcap : 0 };
	size_t len0 = *txtlen;
	struct sbuf own = { 0 };
	struct kv *kv = NULL;
	int rc;

	rc = record_kv(p, rec, len, r, &own, &kv);
	if (rc)
		goto out;
	for (int c = 0; c < p->ncols; c++) {
		const struct kv *v = &kv[p->cols[c].idx];

		cells[c] = (struct agent_cell){ .text = v->text, .i = v->i };
		if (v->text) {
			cells[c].i = (int64_t)txt.len; /* an offset until agent_cells_fix() */
			cells[c].len = v->len;
			sb_put(&txt, v->s, v->len);
		}
	}
	/* the buffer may have moved even if a later growth failed */
	*txtp = txt.p;
	*txtcap = txt.cap;
	*txtlen = txt.oom ? len0 : txt.len;
	if (txt.oom)
		rc = -ENOMEM;
out:
	free(kv);
	sb_free(&own);
	return rc;
}

void agent_cells_fix(struct agent_cell *cells, size_t n, const char *txt)
{
	for (size_t i = 0; i < n; i++)
		if (cells[i].text) {
			cells[i].s = txt ? txt + cells[i].i : "";
			cells[i].i = 0;
		}
}

int agent_cells_print(const struct plan *p, const char *host, const struct agent_cell *cells,
		      size_t n, enum agent_format fmt, FILE *out)
{
	struct kv *kv;
	int rc;

	if (!out || !cells || (fmt != AGENT_FMT_TEXT && fmt != AGENT_FMT_JSON) ||
	    !plan_valid_stream(p) || n != (size_t)p->ncols)
		return -EINVAL;
	kv = calloc((size_t)p->nfields + 1, sizeof(*kv));
	if (!kv)
		return -ENOMEM;
	for (int c = 0; c < p->ncols; c++) {
		struct kv *v = &kv[p->cols[c].idx];

		v->text = cells[c].text;
		v->i = cells[c].text ? 0 : cells[c].i;
		v->s = cells[c].text ? cells[c].s : NULL;
		v->len = cells[c].len > UINT32_MAX ? UINT32_MAX : (uint32_t)cells[c].len;
		if (v->text && !v->s)
			v->s = "", v->len = 0;
	}
	rc = kv_row_print(p, host, kv, fmt, out);
	free(kv);
	return rc;
}

void agent_json_str(FILE *out, const char *s)
{
	struct sbuf b = { 0 };

	sb_json_str(&b, s ? s : "", s ? strlen(s) : 0);
	if (!b.oom && b.p)
		fputs(b.p, out);
	else
		fputs("\"\"", out);
	sb_free(&b);
}
