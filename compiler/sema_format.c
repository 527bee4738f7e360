// SPDX-License-Identifier: Apache-2.0
/*
 * The `format 'FMT'` clause of a stream (docs/language.md#formatted-rows): its text parsed by
 * base/rowfmt.c, and each conversion checked, in order, against the select item it will print
 * once the items have their types.  A conversion of numbers (d i u x X c) needs a column the
 * agent prints as a number (an integer, a truth value, an address printed in hex); %s needs one
 * it prints as text (a string, ntop(), join(), a symbol, a stack, `probe`, `host`).  Errors are
 * placed on the conversion itself: the decoded text of the literal is mapped back to its
 * bytes in the query (escapes such as \n take two bytes there, one in the text).
 *
 * Limits: the clause applies to streams only (E_FORMAT_AGG); the checks are those of
 * base/rowfmt.h.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "base/rowfmt.h"
#include "compiler/sema.h"

/* The place of decoded bytes [off, off + len) of the format literal in the query. */
static struct src_loc fmt_loc(const struct ast_query *q, const struct diag_list *dl, uint32_t off,
			      uint32_t len)
{
	struct src_loc loc = q->format_loc;
	const char *src = dl->src;
	uint32_t raw = q->format_loc.off + 1, end = q->format_loc.off + q->format_loc.len - 1;
	uint32_t start = 0;

	if (!src || q->format_loc.len < 2)
		return loc;
	for (uint32_t d = 0; raw < end; d++) {
		if (d == off)
			start = raw;
		if (d == off + len)
			break;
		raw += src[raw] == '\\' ? 2 : 1;
	}
	if (start == 0 || raw <= start)
		return loc;
	loc.col = q->format_loc.col + (start - q->format_loc.off);
	loc.off = start;
	loc.len = raw - start;
	return loc;
}

/* Whether the agent prints a column as text (else as a number): plan.c's renders. */
static bool item_is_text(const struct expr *e)
{
	if (e->kind == EXPR_NAME && (e->bi == BI_PROBE || e->bi == BI_HOST))
		return true;
	if (e->kind == EXPR_CALL && (e->fn == FN_USYM || e->fn == FN_KSYM))
		return true;
	return e->ty.kind == TY_STR || e->ty.kind == TY_STACK || e->ty.kind == TY_INET;
}

int sema_format_check(struct ast_query *q, struct diag_list *dl)
{
	struct rowfmt *f;
	uint32_t bad_off, bad_len;
	const char *why;
	struct diag *d;
	int col = 0, rc = 0;

	if (q->aggregating) {
		d = diag_error(dl, DIAG_E_FORMAT_AGG, q->format_loc,
			       "`format` on an aggregating query: it formats the rows of a stream");
		diag_fix(d, "remove `format`, or select plain values (a stream) instead of "
			    "aggregates");
		return -EINVAL;
	}
	f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	if (rowfmt_parse(q->format, strlen(q->format), f, &bad_off, &bad_len, &why) != 0) {
		d = diag_error(dl, DIAG_E_FORMAT_CONV, fmt_loc(q, dl, bad_off, bad_len),
			       "bad conversion in `format`: %s", why);
		diag_fix(d, "conversions are %%[-][0][width][.precision](d|i|u|x|X|c|s) and %%%%");
		free(f);
		return -EINVAL;
	}
	if (f->nconv != q->nitems) {
		d = diag_error(dl, DIAG_E_FORMAT_COUNT, q->format_loc,
			       "`format` has %d conversion%s for %d column%s", f->nconv,
			       f->nconv == 1 ? "" : "s", q->nitems, q->nitems == 1 ? "" : "s");
		diag_fix(d, "give one conversion per selected column, in order (%%%% for a '%%')");
		free(f);
		return -EINVAL;
	}
	for (int i = 0; i < f->n; i++) {
		const struct rowfmt_piece *pc = &f->v[i];
		const struct select_item *it;
		bool text;

		if (pc->conv == 0 || pc->conv == '%')
			continue;
		it = &q->items[col++];
		text = item_is_text(it->e);
		if (text == !rowfmt_conv_int(pc->conv))
			continue;
		d = diag_error(dl, DIAG_E_FORMAT_TYPE, fmt_loc(q, dl, pc->off, pc->len),
			       "%%%c prints %s, but column %d (%s) is %s", pc->conv,
			       text ? "a number" : "text", col, it->name ? it->name : "?",
			       text ? "text" : "a number");
		diag_fix(d, text ? "print it with %%s" : "print it with %%d, %%u or %%x");
		rc = -EINVAL;
	}
	free(f);
	return rc;
}
