/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Formatted rows: the printf-style text of a stream's `format 'FMT'` clause
 * (docs/language.md#formatted-rows), parsed into literal runs and conversions.  The compiler
 * parses it to check each conversion against the column it will print (placed errors), the
 * manifest reader parses it again to refuse a malformed one, and the agent parses it a third
 * time to print each row.  Nothing here calls the C library's printf with the user's text:
 * each conversion is rebuilt from its parsed parts, so a format can never read an argument
 * that is not there.
 *
 * A conversion is `%[flags][width][.precision]conv`:
 *   flags      any of `-` (left-align) and `0` (pad numbers with zeros)
 *   width      1 to ROWFMT_MAX_WIDTH
 *   precision  only with %s: at most that many bytes of the string (0 to ROWFMT_MAX_WIDTH)
 *   conv       d i (signed decimal), u (unsigned decimal), x X (hexadecimal), c (one byte of
 *              an integer), s (text), and %% for a '%'.
 * There are no length modifiers (every integer is 64 bits) and no `*` widths.  Limits: at
 * most ROWFMT_MAX_PIECES pieces and ROWFMT_MAX_LEN bytes of format.
 */
#ifndef WEFT_BASE_ROWFMT_H
#define WEFT_BASE_ROWFMT_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ROWFMT_MAX_WIDTH 255
#define ROWFMT_MAX_PIECES 128
#define ROWFMT_MAX_LEN 1024

struct rowfmt_piece {
	uint32_t off, len; /* the piece's bytes in the format */
	char conv; /* 0: literal text (off, len); '%': a literal '%'; else d i u x X c s */
	bool minus, zero;
	int width; /* 0: none */
	int prec; /* -1: none */
};

struct rowfmt {
	struct rowfmt_piece v[ROWFMT_MAX_PIECES];
	int n;
	int nconv; /* conversions that take a column (not %%) */
	bool ends_nl; /* the format ends with a newline */
};

/* Parses fmt[0, len).  0, or -1 with *bad_off and *bad_len the offending bytes and *why a
 * static reason (for a diagnostic placed on them). */
int rowfmt_parse(const char *fmt, size_t len, struct rowfmt *out, uint32_t *bad_off,
		 uint32_t *bad_len, const char **why);

/* Whether a conversion takes an integer (d, i, u, x, X, c) rather than text (s). */
static inline bool rowfmt_conv_int(char c)
{
	return c == 'd' || c == 'i' || c == 'u' || c == 'x' || c == 'X' || c == 'c';
}

/* One conversion of an integer into buf (at most ROWFMT_MAX_WIDTH + 24 bytes needed):
 * returns the length written. */
size_t rowfmt_int(const struct rowfmt_piece *pc, int64_t v, char *buf, size_t sz);

/* The padding a conversion adds around text of `len` bytes, and the bytes of text it keeps
 * (precision): *keep <= len; returns the number of spaces; *left says on which side. */
size_t rowfmt_pad(const struct rowfmt_piece *pc, size_t len, size_t *keep, bool *left);

#endif
