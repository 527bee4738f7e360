/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Diagnostics: every user-facing error carries a stable tag (diag_tags.def), a place in the
 * query (line, column, length) and, where one exists, a fix.  A diag_list collects them for
 * one query text; diag_print() renders them as
 *
 *   query:1:6: error: unknown tracepoint 'raw_syscall:sys_enter' [E_PROBE_UNKNOWN]
 *       from tracepoint:raw_syscall:sys_enter
 *            ^~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
 *     did you mean: tracepoint:raw_syscalls:sys_enter
 *
 * The list owns every string in it.
 */
#ifndef WEFT_DIAG_H
#define WEFT_DIAG_H
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

enum diag_tag {
#define DIAG(tag, summary) DIAG_##tag,
#include "compiler/diag_tags.def"
#undef DIAG
	DIAG__COUNT
};

/* A place in the query text.  line and col count from 1; len may be 0. */
struct src_loc {
	uint32_t off;
	uint32_t len;
	uint32_t line;
	uint32_t col;
};

enum diag_severity { DIAG_ERROR, DIAG_WARNING };

struct diag {
	enum diag_tag tag;
	enum diag_severity sev;
	struct src_loc loc;
	char *msg;
	char *fix; /* may be NULL */
};

struct diag_list {
	const char *src; /* query text, borrowed */
	const char *name; /* "query" or the file name, borrowed */
	struct diag *v;
	int n, cap;
	int nerrors;
};

void diag_list_init(struct diag_list *dl, const char *src, const char *name);
void diag_list_free(struct diag_list *dl);

/* Adds a diagnostic; returns it so that a fix can be attached.  Never fails: on allocation
 * failure the message is replaced by a static one. */
struct diag *diag_error(struct diag_list *dl, enum diag_tag tag, struct src_loc loc,
			const char *fmt, ...) __attribute__((format(printf, 4, 5)));
struct diag *diag_warn(struct diag_list *dl, enum diag_tag tag, struct src_loc loc, const char *fmt,
		       ...) __attribute__((format(printf, 4, 5)));
void diag_fix(struct diag *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

bool diag_has_errors(const struct diag_list *dl);
const char *diag_tag_name(enum diag_tag tag);
const char *diag_tag_summary(enum diag_tag tag);
/* DIAG__COUNT if the name is unknown. */
enum diag_tag diag_tag_lookup(const char *name);

void diag_print(const struct diag_list *dl, FILE *out, bool color);

/* Near matches: the up to `max` candidates closest to `word` by edit distance (at most a
 * third of its length, at least 2), best first.  Returns how many were written to out. */
int diag_near(const char *word, const char *const *cands, int ncands, const char **out, int max);
int diag_edit_distance(const char *a, const char *b);

#endif
