// SPDX-License-Identifier: Apache-2.0
/*
 * Diagnostics: the tagged, located errors every pass reports to the user.  A diag_list owns
 * every message and fix string in it.  Adding a diagnostic never fails as seen by the caller:
 * when memory runs out the message becomes a static "out of memory" text (never freed) and,
 * if even the array cannot grow, the diagnostic is counted but kept in a static sink, so a
 * pass can always report and move on.  Printing renders the place (line, column, the source
 * line and a caret under the offending text) the way compilers do, so editors can jump to it.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include "compiler/diag.h"

static const char diag_oom_msg[] = "out of memory while reporting an error";

/* Receives diagnostics that could not be stored; diag_fix() ignores it. */
static struct diag diag_sink;

static const char *const diag_names[] = {
#define DIAG(tag, summary) #tag,
#include "compiler/diag_tags.def"
#undef DIAG
};

static const char *const diag_summaries[] = {
#define DIAG(tag, summary) summary,
#include "compiler/diag_tags.def"
#undef DIAG
};

void diag_list_init(struct diag_list *dl, const char *src, const char *name)
{
	memset(dl, 0, sizeof(*dl));
	dl->src = src;
	dl->name = name ? name : "query";
}

static void diag_str_free(char *s)
{
	if (s && s != diag_oom_msg)
		free(s);
}

void diag_list_free(struct diag_list *dl)
{
	for (int i = 0; i < dl->n; i++) {
		diag_str_free(dl->v[i].msg);
		diag_str_free(dl->v[i].fix);
	}
	free(dl->v);
	dl->v = NULL;
	dl->n = dl->cap = dl->nerrors = 0;
}

static struct diag *diag_add(struct diag_list *dl, enum diag_tag tag, enum diag_severity sev,
			     struct src_loc loc, const char *fmt, va_list ap)
{
	struct diag *d;
	char *msg = NULL;

	if (sev == DIAG_ERROR)
		dl->nerrors++;
	if (dl->n == dl->cap) {
		int cap = dl->cap ? dl->cap * 2 : 8;
		struct diag *v = realloc(dl->v, (size_t)cap * sizeof(*v));

		if (!v) {
			memset(&diag_sink, 0, sizeof(diag_sink));
			diag_sink.tag = tag;
			diag_sink.sev = sev;
			diag_sink.loc = loc;
			diag_sink.msg = (char *)diag_oom_msg;
			return &diag_sink;
		}
		dl->v = v;
		dl->cap = cap;
	}
	if (vasprintf(&msg, fmt, ap) < 0)
		msg = (char *)diag_oom_msg;
	d = &dl->v[dl->n++];
	d->tag = tag;
	d->sev = sev;
	d->loc = loc;
	d->msg = msg;
	d->fix = NULL;
	return d;
}

struct diag *diag_error(struct diag_list *dl, enum diag_tag tag, struct src_loc loc,
			const char *fmt, ...)
{
	struct diag *d;
	va_list ap;

	va_start(ap, fmt);
	d = diag_add(dl, tag, DIAG_ERROR, loc, fmt, ap);
	va_end(ap);
	return d;
}

struct diag *diag_warn(struct diag_list *dl, enum diag_tag tag, struct src_loc loc, const char *fmt,
		       ...)
{
	struct diag *d;
	va_list ap;

	va_start(ap, fmt);
	d = diag_add(dl, tag, DIAG_WARNING, loc, fmt, ap);
	va_end(ap);
	return d;
}

void diag_fix(struct diag *d, const char *fmt, ...)
{
	char *fix = NULL;
	va_list ap;

	if (!d || d == &diag_sink)
		return;
	va_start(ap, fmt);
	if (vasprintf(&fix, fmt, ap) < 0)
		fix = NULL;
	va_end(ap);
	diag_str_free(d->fix);
	d->fix = fix;
}

bool diag_has_errors(const struct diag_list *dl)
{
	return dl->nerrors > 0;
}

const char *diag_tag_name(enum diag_tag tag)
{
	if ((unsigned)tag >= DIAG__COUNT)
		return "E_UNKNOWN";
	return diag_names[tag];
}

const char *diag_tag_summary(enum diag_tag tag)
{
	if ((unsigned)tag >= DIAG__COUNT)
		return "";
	return diag_summaries[tag];
}

enum diag_tag diag_tag_lookup(const char *name)
{
	for (int i = 0; i < DIAG__COUNT; i++)
		if (strcmp(diag_names[i], name) == 0)
			return (enum diag_tag)i;
	return DIAG__COUNT;
}

/* Prints the source line that holds loc, then a caret under the located text.  Tabs in the
 * line are repeated in the caret line so the caret stays aligned in any tab width. */
static void diag_print_place(const struct diag_list *dl, const struct diag *d, FILE *out,
			     bool color)
{
	const char *src = dl->src;
	size_t srclen, start, end, off;
	uint32_t len;

	if (!src || d->loc.line == 0)
		return;
	srclen = strlen(src);
	off = d->loc.off > srclen ? srclen : d->loc.off;
	start = off;
	while (start > 0 && src[start - 1] != '\n')
		start--;
	end = off;
	while (end < srclen && src[end] != '\n')
		end++;
	if (end > start && src[end - 1] == '\r')
		end--;

	fprintf(out, "    %.*s\n    ", (int)(end - start), src + start);
	/* UTF-8 continuation bytes take no column on a terminal. */
	for (size_t i = start; i < off; i++)
		if (((unsigned char)src[i] & 0xc0) != 0x80)
			fputc(src[i] == '\t' ? '\t' : ' ', out);
	if (color)
		fputs("\033[1;32m", out);
	fputc('^', out);
	len = d->loc.len;
	for (size_t i = off + 1; len > 1 && i < off + len && i < end; i++)
		if (((unsigned char)src[i] & 0xc0) != 0x80)
			fputc('~', out);
	if (color)
		fputs("\033[0m", out);
	fputc('\n', out);
}

void diag_print(const struct diag_list *dl, FILE *out, bool color)
{
	const char *name = dl->name ? dl->name : "query";

	for (int i = 0; i < dl->n; i++) {
		const struct diag *d = &dl->v[i];
		const char *sev = d->sev == DIAG_ERROR ? "error" : "warning";
		const char *on = "", *off = "";

		if (color) {
			on = d->sev == DIAG_ERROR ? "\033[1;31m" : "\033[1;35m";
			off = "\033[0m";
		}
		if (d->loc.line)
			fprintf(out, "%s:%u:%u: %s%s:%s %s [%s]\n", name, d->loc.line, d->loc.col,
				on, sev, off, d->msg ? d->msg : "", diag_tag_name(d->tag));
		else
			fprintf(out, "%s: %s%s:%s %s [%s]\n", name, on, sev, off,
				d->msg ? d->msg : "", diag_tag_name(d->tag));
		diag_print_place(dl, d, out, color);
		if (d->fix && d->fix[0])
			fprintf(out, "  %s\n", d->fix);
	}
}

/* Classic two-row Levenshtein distance (insert, delete, substitute each cost 1). */
int diag_edit_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	int small[2][64];
	int *prev, *cur, *heap = NULL, d;

	if (lb + 1 <= 64) {
		prev = small[0];
		cur = small[1];
	} else {
		heap = malloc(2 * (lb + 1) * sizeof(int));
		if (!heap)
			return INT_MAX;
		prev = heap;
		cur = heap + lb + 1;
	}
	for (size_t j = 0; j <= lb; j++)
		prev[j] = (int)j;
	for (size_t i = 1; i <= la; i++) {
		int *t;

		cur[0] = (int)i;
		for (size_t j = 1; j <= lb; j++) {
			int sub = prev[j - 1] + (a[i - 1] != b[j - 1]);
			int del = prev[j] + 1;
			int ins = cur[j - 1] + 1;

			cur[j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
		}
		t = prev;
		prev = cur;
		cur = t;
	}
	d = prev[lb];
	free(heap);
	return d;
}

int diag_near(const char *word, const char *const *cands, int ncands, const char **out, int max)
{
	int bound, n = 0;
	int dist[64];

	if (!word || !cands || max <= 0)
		return 0;
	if (max > 64)
		max = 64;
	bound = (int)strlen(word) / 3;
	if (bound < 2)
		bound = 2;
	for (int i = 0; i < ncands; i++) {
		const char *c = cands[i];
		bool dup = false;
		int d, pos;

		if (!c)
			continue;
		/* Lengths alone can rule a candidate out without the quadratic distance. */
		if (abs((int)strlen(c) - (int)strlen(word)) > bound)
			continue;
		for (int k = 0; k < n; k++)
			if (strcmp(out[k], c) == 0)
				dup = true;
		if (dup)
			continue;
		d = diag_edit_distance(word, c);
		if (d > bound)
			continue;
		/* Insertion sort, stable: equal distances keep the candidates' order. */
		pos = n;
		while (pos > 0 && dist[pos - 1] > d)
			pos--;
		if (pos >= max)
			continue;
		if (n < max)
			n++;
		for (int k = n - 1; k > pos; k--) {
			out[k] = out[k - 1];
			dist[k] = dist[k - 1];
		}
		out[pos] = c;
		dist[pos] = d;
	}
	return n;
}
