// SPDX-License-Identifier: Apache-2.0
/*
 * The tokenizer (see lexer.h for the contract).  It is a plain scanner over a NUL-terminated
 * text with one rule per first character.  What must hold:
 *   - every token and every diagnostic carries the exact place of the text it came from,
 *     and lines/columns count from 1 (columns in bytes);
 *   - numbers never overflow silently: a value beyond int64 is E_LEX_NUMBER, a unit that
 *     does not scale to a whole number (1.5ns) too;
 *   - units are unambiguous: durations ns us ms s m h, sizes B KiB MiB GiB TiB (binary,
 *     powers of 1024), from the one table of base/units.h.  K/KB/M/MB/G/GB are refused with
 *     a fix, because half of all tools read KB as 1000 and the other half as 1024;
 *   - the scanner never reads past the terminating NUL and never allocates outside the
 *     arena, so a failed query leaks nothing.
 */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include "base/units.h"
#include "compiler/lexer.h"

static const struct {
	const char *text;
	enum tok_kind kind;
} lexer_keywords[] = {
	{ "from", TOK_FROM }, { "where", TOK_WHERE },	{ "group", TOK_GROUP }, { "by", TOK_BY },
	{ "as", TOK_AS },     { "select", TOK_SELECT }, { "order", TOK_ORDER }, { "asc", TOK_ASC },
	{ "desc", TOK_DESC }, { "limit", TOK_LIMIT },	{ "every", TOK_EVERY }, { "for", TOK_FOR },
	{ "span", TOK_SPAN }, { "on", TOK_ON },		{ "and", TOK_AND },	{ "or", TOK_OR },
	{ "not", TOK_NOT },   { "like", TOK_LIKE },	{ "in", TOK_IN },
};

#define NKEYWORDS (sizeof(lexer_keywords) / sizeof(lexer_keywords[0]))

#define UNITS_FIX "units: ns us ms s m h (durations), B KiB MiB GiB TiB (sizes)"

void lexer_init(struct lexer *lx, const char *src, struct diag_list *dl, struct arena *arena)
{
	memset(lx, 0, sizeof(*lx));
	lx->src = src ? src : "";
	lx->len = strlen(lx->src);
	lx->line = 1;
	lx->dl = dl;
	lx->arena = arena;
}

static struct src_loc lexer_loc(const struct lexer *lx, size_t start, size_t end)
{
	struct src_loc loc = {
		.off = (uint32_t)start,
		.len = (uint32_t)(end - start),
		.line = lx->line,
		.col = (uint32_t)(start - lx->line_start + 1),
	};
	return loc;
}

/* Reports one lexical error; returns the diagnostic for a fix, or NULL when quiet. */
static struct diag *lexer_error(struct lexer *lx, struct token *t, enum diag_tag tag,
				struct src_loc loc, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));

static struct diag *lexer_error(struct lexer *lx, struct token *t, enum diag_tag tag,
				struct src_loc loc, const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	lx->failed = true;
	t->kind = TOK_ERROR;
	t->loc = loc;
	if (!lx->dl)
		return NULL;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return diag_error(lx->dl, tag, loc, "%s", msg);
}

/* Allocation failure: no diagnostic (there is no tag for it), errno says ENOMEM and the
 * caller gives up with -ENOMEM. */
static int lexer_nomem(struct lexer *lx, struct token *t, struct src_loc loc)
{
	lx->failed = true;
	lx->nomem = true;
	t->kind = TOK_ERROR;
	t->loc = loc;
	errno = ENOMEM;
	return -1;
}

/* Skips blanks, newlines (counting lines) and `--` comments. */
static void lexer_skip_blank(struct lexer *lx)
{
	const char *s = lx->src;

	while (lx->pos < lx->len) {
		char c = s[lx->pos];

		if (c == '\n') {
			lx->pos++;
			lx->line++;
			lx->line_start = lx->pos;
		} else if (c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v') {
			lx->pos++;
		} else if (c == '-' && s[lx->pos + 1] == '-') {
			while (lx->pos < lx->len && s[lx->pos] != '\n')
				lx->pos++;
		} else {
			break;
		}
	}
}

static bool is_ident_start(char c)
{
	return isalpha((unsigned char)c) || c == '_';
}

static bool is_ident(char c)
{
	return isalnum((unsigned char)c) || c == '_';
}

static int lexer_ident(struct lexer *lx, struct token *t, size_t start)
{
	size_t n;

	while (lx->pos < lx->len && is_ident(lx->src[lx->pos]))
		lx->pos++;
	n = lx->pos - start;
	t->loc = lexer_loc(lx, start, lx->pos);
	for (size_t i = 0; i < NKEYWORDS; i++) {
		if (strlen(lexer_keywords[i].text) == n &&
		    strncasecmp(lexer_keywords[i].text, lx->src + start, n) == 0) {
			t->kind = lexer_keywords[i].kind;
			return 0;
		}
	}
	t->kind = TOK_NAME;
	t->sval = arena_strndup(lx->arena, lx->src + start, n);
	if (!t->sval)
		return lexer_nomem(lx, t, t->loc);
	return 0;
}

static void lexer_unit_fix(struct diag *d, const char *unit)
{
	static const char *const decimal_sizes[] = { "K",  "KB", "k",  "kb", "kB", "M", "MB",
						     "mb", "G",	 "GB", "gb", "T",  "TB" };

	for (size_t i = 0; i < sizeof(decimal_sizes) / sizeof(decimal_sizes[0]); i++) {
		if (strcmp(unit, decimal_sizes[i]) == 0) {
			diag_fix(
				d,
				"sizes are binary: write KiB, MiB, GiB or TiB (4KiB = 4096 bytes)");
			return;
		}
	}
	if (strcmp(unit, "sec") == 0 || strcmp(unit, "secs") == 0 || strcmp(unit, "min") == 0 ||
	    strcmp(unit, "S") == 0 || strcmp(unit, "MS") == 0 || strcmp(unit, "hr") == 0) {
		diag_fix(d, "durations are written ns, us, ms, s, m or h (e.g. 10s, 5m)");
		return;
	}
	if (strcmp(unit, "hz") == 0 || strcmp(unit, "Hz") == 0) {
		diag_fix(
			d,
			"rates belong to probes (profile:99hz); here write a duration: " UNITS_FIX);
		return;
	}
	diag_fix(d, UNITS_FIX);
}

/* Scales ip.frac (frac has nf decimal digits) by a unit; false if the result is not a whole
 * number or does not fit int64. */
static bool lexer_scale(unsigned __int128 ip, unsigned __int128 frac, int nf, uint64_t scale,
			int64_t *out)
{
	unsigned __int128 v = ip * scale, f = frac * scale, p10 = 1;

	for (int i = 0; i < nf; i++)
		p10 *= 10;
	if (f % p10)
		return false;
	v += f / p10;
	if (v > INT64_MAX)
		return false;
	*out = (int64_t)v;
	return true;
}

static int lexer_number(struct lexer *lx, struct token *t, size_t start)
{
	const char *s = lx->src;
	unsigned __int128 ip = 0, frac = 0;
	bool overflow = false, is_float = false;
	int nf = 0;
	struct diag *d;

	if (s[start] == '0' && (s[start + 1] == 'x' || s[start + 1] == 'X')) {
		size_t digits;

		lx->pos = start + 2;
		digits = lx->pos;
		while (isxdigit((unsigned char)s[lx->pos])) {
			char c = s[lx->pos++];
			int v = isdigit((unsigned char)c) ? c - '0' : (tolower(c) - 'a' + 10);

			ip = ip * 16 + (unsigned)v;
			if (ip > INT64_MAX)
				overflow = true, ip = (unsigned __int128)INT64_MAX + 1;
		}
		if (lx->pos == digits || is_ident(s[lx->pos]) || s[lx->pos] == '.') {
			while (is_ident(s[lx->pos]) || s[lx->pos] == '.')
				lx->pos++;
			d = lexer_error(lx, t, DIAG_E_LEX_NUMBER, lexer_loc(lx, start, lx->pos),
					"malformed hexadecimal number '%.*s'",
					(int)(lx->pos - start), s + start);
			diag_fix(d, "write hexadecimal as 0x followed by 0-9 a-f, e.g. 0x1f");
			return -1;
		}
		if (overflow) {
			d = lexer_error(lx, t, DIAG_E_LEX_NUMBER, lexer_loc(lx, start, lx->pos),
					"number '%.*s' is too large", (int)(lx->pos - start),
					s + start);
			diag_fix(d, "numbers are 64-bit signed: at most 0x7fffffffffffffff");
			return -1;
		}
		t->kind = TOK_INT;
		t->ival = (int64_t)ip;
		t->unit = UNIT_NONE;
		t->loc = lexer_loc(lx, start, lx->pos);
		return 0;
	}

	lx->pos = start;
	while (isdigit((unsigned char)s[lx->pos])) {
		ip = ip * 10 + (unsigned)(s[lx->pos++] - '0');
		if (ip > INT64_MAX)
			overflow = true, ip = (unsigned __int128)INT64_MAX + 1;
	}
	if (s[lx->pos] == '.' && isdigit((unsigned char)s[lx->pos + 1])) {
		is_float = true;
		lx->pos++;
		while (isdigit((unsigned char)s[lx->pos])) {
			/* Digits past the 19th cannot change an integral ns/byte count unless
			 * nonzero; keep a sticky marker digit then. */
			if (nf < 19) {
				frac = frac * 10 + (unsigned)(s[lx->pos] - '0');
				nf++;
			} else if (s[lx->pos] != '0') {
				frac |= 1;
			}
			lx->pos++;
		}
	}
	if (is_ident_start(s[lx->pos])) {
		size_t ustart = lx->pos;
		const struct units_unit *u;
		char unit[32];
		size_t ulen;

		while (is_ident(s[lx->pos]))
			lx->pos++;
		ulen = lx->pos - ustart;
		snprintf(unit, sizeof(unit), "%.*s", (int)(ulen < 31 ? ulen : 31), s + ustart);
		u = units_find(s + ustart, ulen);
		if (u) {
			enum int_unit kind = u->kind == UNITS_DURATION ? UNIT_DURATION : UNIT_SIZE;

			if (overflow || !lexer_scale(ip, frac, nf, u->scale, &t->ival)) {
				d = lexer_error(lx, t, DIAG_E_LEX_NUMBER,
						lexer_loc(lx, start, lx->pos),
						overflow || !is_float ?
							"'%.*s' is too large" :
							"'%.*s' is not a whole number of %s",
						(int)(lx->pos - start), s + start,
						kind == UNIT_DURATION ? "nanoseconds" : "bytes");
				diag_fix(
					d,
					kind == UNIT_DURATION ?
						"durations are whole nanoseconds, at most about 292 years" :
						"sizes are whole bytes, at most 8 EiB");
				return -1;
			}
			t->kind = TOK_INT;
			t->unit = kind;
			t->loc = lexer_loc(lx, start, lx->pos);
			return 0;
		}
		d = lexer_error(lx, t, DIAG_E_LEX_UNIT, lexer_loc(lx, ustart, lx->pos),
				"unknown unit '%s' after a number", unit);
		lexer_unit_fix(d, unit);
		return -1;
	}
	t->loc = lexer_loc(lx, start, lx->pos);
	if (is_float) {
		char buf[96];
		size_t n = lx->pos - start;

		if (n >= sizeof(buf)) {
			lexer_error(lx, t, DIAG_E_LEX_NUMBER, t->loc, "number is too long");
			return -1;
		}
		memcpy(buf, s + start, n);
		buf[n] = '\0';
		t->kind = TOK_FLOAT;
		t->fval = strtod(buf, NULL);
		return 0;
	}
	if (overflow) {
		d = lexer_error(lx, t, DIAG_E_LEX_NUMBER, t->loc, "number '%.*s' is too large",
				(int)(lx->pos - start), s + start);
		diag_fix(d, "numbers are 64-bit signed: at most 9223372036854775807");
		return -1;
	}
	t->kind = TOK_INT;
	t->ival = (int64_t)ip;
	t->unit = UNIT_NONE;
	return 0;
}

static int lexer_string(struct lexer *lx, struct token *t, size_t start)
{
	const char *s = lx->src;
	char quote = s[start];
	size_t end = start + 1, n = 0;
	struct diag *d;
	char *out;

	/* The decoded text is never longer than the raw text. */
	while (end < lx->len && s[end] != '\n' && s[end] != quote)
		end += (s[end] == '\\' && end + 1 < lx->len && s[end + 1] != '\n') ? 2 : 1;
	if (end >= lx->len || s[end] != quote) {
		size_t stop = end;

		if (stop > start && s[stop - 1] == '\r')
			stop--;
		lx->pos = end;
		d = lexer_error(lx, t, DIAG_E_LEX_STRING, lexer_loc(lx, start, stop),
				"string is not closed on its line");
		diag_fix(d, "close it with %c before the end of the line", quote);
		return -1;
	}
	out = arena_alloc(lx->arena, end - start);
	if (!out)
		return lexer_nomem(lx, t, lexer_loc(lx, start, end + 1));
	for (size_t i = start + 1; i < end; i++) {
		char c = s[i];

		if (c != '\\') {
			out[n++] = c;
			continue;
		}
		c = s[++i];
		switch (c) {
		case '\\':
		case '\'':
		case '"':
			out[n++] = c;
			break;
		case 'n':
			out[n++] = '\n';
			break;
		case 't':
			out[n++] = '\t';
			break;
		case '0':
			out[n++] = '\0';
			break;
		default:
			lx->pos = end + 1;
			d = lexer_error(lx, t, DIAG_E_LEX_STRING, lexer_loc(lx, i - 1, i + 1),
					"unknown escape '\\%c' in a string",
					isprint((unsigned char)c) ? c : '?');
			diag_fix(
				d,
				"escapes are \\\\ \\' \\\" \\n \\t \\0; write \\\\ for a backslash");
			return -1;
		}
	}
	out[n] = '\0';
	lx->pos = end + 1;
	t->kind = TOK_STR;
	t->sval = out;
	t->loc = lexer_loc(lx, start, lx->pos);
	return 0;
}

int lexer_next(struct lexer *lx, struct token *t)
{
	const char *s = lx->src;
	size_t start;
	char c, c1;
	enum tok_kind k = TOK_EOF;
	size_t n = 1;
	struct diag *d;

	memset(t, 0, sizeof(*t));
	lexer_skip_blank(lx);
	start = lx->pos;
	if (start >= lx->len) {
		t->kind = TOK_EOF;
		t->loc = lexer_loc(lx, start, start);
		return 0;
	}
	c = s[start];
	c1 = s[start + 1];
	if (is_ident_start(c)) {
		lx->pos = start + 1;
		return lexer_ident(lx, t, start);
	}
	if (isdigit((unsigned char)c) || (c == '.' && isdigit((unsigned char)c1)))
		return lexer_number(lx, t, start);
	if (c == '\'' || c == '"')
		return lexer_string(lx, t, start);

	switch (c) {
	case '+':
		k = TOK_PLUS;
		break;
	case '-':
		k = TOK_MINUS;
		break;
	case '*':
		k = TOK_STAR;
		break;
	case '/':
		k = TOK_SLASH;
		break;
	case '%':
		k = TOK_PERCENT;
		break;
	case '(':
		k = TOK_LPAREN;
		break;
	case ')':
		k = TOK_RPAREN;
		break;
	case ',':
		k = TOK_COMMA;
		break;
	case '.':
		k = TOK_DOT;
		break;
	case '=':
		k = TOK_EQ;
		n = c1 == '=' ? 2 : 1;
		break;
	case '!':
		if (c1 == '=') {
			k = TOK_NE;
			n = 2;
		}
		break;
	case '<':
		k = c1 == '=' ? TOK_LE : c1 == '>' ? TOK_NE : TOK_LT;
		n = (c1 == '=' || c1 == '>') ? 2 : 1;
		break;
	case '>':
		k = c1 == '=' ? TOK_GE : TOK_GT;
		n = c1 == '=' ? 2 : 1;
		break;
	default:
		break;
	}
	if (k != TOK_EOF) {
		lx->pos = start + n;
		t->kind = k;
		t->loc = lexer_loc(lx, start, lx->pos);
		return 0;
	}

	/* Not a token: name the character, and the fix for the usual suspects. */
	n = 1;
	if ((unsigned char)c >= 0xc0) /* a UTF-8 sequence: cover all of it */
		while (n < 4 && ((unsigned char)s[start + n] & 0xc0) == 0x80)
			n++;
	lx->pos = start + n;
	if (isprint((unsigned char)c))
		d = lexer_error(lx, t, DIAG_E_LEX_CHAR, lexer_loc(lx, start, lx->pos),
				"unexpected character '%c'", c);
	else
		d = lexer_error(lx, t, DIAG_E_LEX_CHAR, lexer_loc(lx, start, lx->pos),
				"unexpected byte 0x%02x", (unsigned char)c);
	switch (c) {
	case '!':
		diag_fix(d, "write != for 'not equal', or `not` to negate a condition");
		break;
	case '&':
		diag_fix(d, "write `and`");
		break;
	case '|':
		diag_fix(d, "write `or`");
		break;
	case ';':
		diag_fix(d, "a query needs no ';': remove it");
		break;
	case '`':
		diag_fix(d, "quote strings with ' or \"");
		break;
	case ':':
		diag_fix(d, "':' belongs in probes (syscall:read), which follow `from` or `span(`");
		break;
	case '[':
	case ']':
		diag_fix(d, "fields are reached with '.', e.g. args.count; there is no indexing");
		break;
	default:
		break;
	}
	return -1;
}

int lexer_probe_text(struct lexer *lx, struct token *t)
{
	const char *s = lx->src;
	size_t start;

	memset(t, 0, sizeof(*t));
	lexer_skip_blank(lx);
	start = lx->pos;
	while (lx->pos < lx->len) {
		char c = s[lx->pos];

		if (isspace((unsigned char)c) || c == ',' || c == ')' ||
		    (c == '-' && s[lx->pos + 1] == '-'))
			break;
		lx->pos++;
	}
	t->kind = TOK_PROBE;
	t->loc = lexer_loc(lx, start, lx->pos);
	t->sval = arena_strndup(lx->arena, s + start, lx->pos - start);
	if (!t->sval)
		return lexer_nomem(lx, t, t->loc);
	return 0;
}

const char *lexer_keyword_text(enum tok_kind k)
{
	for (size_t i = 0; i < NKEYWORDS; i++)
		if (lexer_keywords[i].kind == k)
			return lexer_keywords[i].text;
	return NULL;
}

bool lexer_tok_is_keyword(enum tok_kind k)
{
	return k >= TOK_FROM && k <= TOK_IN;
}

const char *lexer_tok_kind_name(enum tok_kind k)
{
	static const char *const names[TOK__COUNT] = {
		[TOK_EOF] = "the end of the query",
		[TOK_ERROR] = "an invalid token",
		[TOK_INT] = "a number",
		[TOK_FLOAT] = "a number",
		[TOK_STR] = "a string",
		[TOK_NAME] = "a name",
		[TOK_PROBE] = "a probe",
		[TOK_FROM] = "`from`",
		[TOK_WHERE] = "`where`",
		[TOK_GROUP] = "`group`",
		[TOK_BY] = "`by`",
		[TOK_AS] = "`as`",
		[TOK_SELECT] = "`select`",
		[TOK_ORDER] = "`order`",
		[TOK_ASC] = "`asc`",
		[TOK_DESC] = "`desc`",
		[TOK_LIMIT] = "`limit`",
		[TOK_EVERY] = "`every`",
		[TOK_FOR] = "`for`",
		[TOK_SPAN] = "`span`",
		[TOK_ON] = "`on`",
		[TOK_AND] = "`and`",
		[TOK_OR] = "`or`",
		[TOK_NOT] = "`not`",
		[TOK_LIKE] = "`like`",
		[TOK_IN] = "`in`",
		[TOK_PLUS] = "'+'",
		[TOK_MINUS] = "'-'",
		[TOK_STAR] = "'*'",
		[TOK_SLASH] = "'/'",
		[TOK_PERCENT] = "'%'",
		[TOK_EQ] = "'='",
		[TOK_NE] = "'!='",
		[TOK_LT] = "'<'",
		[TOK_LE] = "'<='",
		[TOK_GT] = "'>'",
		[TOK_GE] = "'>='",
		[TOK_LPAREN] = "'('",
		[TOK_RPAREN] = "')'",
		[TOK_COMMA] = "','",
		[TOK_DOT] = "'.'",
	};

	if ((unsigned)k >= TOK__COUNT || !names[k])
		return "a token";
	return names[k];
}
