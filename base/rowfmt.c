// SPDX-License-Identifier: Apache-2.0
/*
 * Formatted rows (rowfmt.h): the parser of a `format 'FMT'` text and the two conversions the
 * agent applies, integers (rebuilt as a fixed C format from the parsed flags, width and
 * conversion, with a 64-bit argument) and text (padding and precision computed here, so the
 * text itself is copied by the caller and never passes through printf).
 *
 * Limits: widths and precisions are bounded by ROWFMT_MAX_WIDTH; width counts bytes, not
 * characters, as C's printf does.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include "base/rowfmt.h"

static int fail(uint32_t *bad_off, uint32_t *bad_len, const char **why, size_t off, size_t len,
		const char *msg)
{
	*bad_off = (uint32_t)off;
	*bad_len = (uint32_t)(len ? len : 1);
	*why = msg;
	return -1;
}

static bool push(struct rowfmt *out, struct rowfmt_piece pc)
{
	if (out->n == ROWFMT_MAX_PIECES)
		return false;
	out->v[out->n++] = pc;
	return true;
}

static int read_num(const char *fmt, size_t len, size_t *i)
{
	int v = 0;

	while (*i < len && fmt[*i] >= '0' && fmt[*i] <= '9') {
		if (v <= ROWFMT_MAX_WIDTH)
			v = v * 10 + (fmt[*i] - '0');
		(*i)++;
	}
	return v;
}

int rowfmt_parse(const char *fmt, size_t len, struct rowfmt *out, uint32_t *bad_off,
		 uint32_t *bad_len, const char **why)
{
	size_t i = 0;

	memset(out, 0, sizeof(*out));
	if (len > ROWFMT_MAX_LEN)
		return fail(bad_off, bad_len, why, 0, len, "a format of more than 1024 bytes");
	if (memchr(fmt, 0, len))
		return fail(bad_off, bad_len, why,
			    (size_t)((const char *)memchr(fmt, 0, len) - fmt), 1,
			    "a NUL byte in the format");
	while (i < len) {
		struct rowfmt_piece pc = { .off = (uint32_t)i, .prec = -1 };
		size_t start = i;

		if (fmt[i] != '%') {
			while (i < len && fmt[i] != '%')
				i++;
			pc.len = (uint32_t)(i - start);
			if (!push(out, pc))
				return fail(bad_off, bad_len, why, start, i - start,
					    "more than 128 pieces in the format");
			continue;
		}
		i++;
		for (; i < len && (fmt[i] == '-' || fmt[i] == '0'); i++) {
			if (fmt[i] == '-')
				pc.minus = true;
			else
				pc.zero = true;
		}
		if (i < len && fmt[i] >= '1' && fmt[i] <= '9') {
			pc.width = read_num(fmt, len, &i);
			if (pc.width > ROWFMT_MAX_WIDTH)
				return fail(bad_off, bad_len, why, start, i - start,
					    "a width above 255");
		}
		if (i < len && fmt[i] == '.') {
			i++;
			if (i >= len || fmt[i] < '0' || fmt[i] > '9')
				return fail(bad_off, bad_len, why, start, i - start,
					    "a '.' without a precision after it");
			pc.prec = read_num(fmt, len, &i);
			if (pc.prec > ROWFMT_MAX_WIDTH)
				return fail(bad_off, bad_len, why, start, i - start,
					    "a precision above 255");
		}
		if (i >= len)
			return fail(bad_off, bad_len, why, start, i - start,
				    "a '%' at the end of the format without a conversion");
		pc.conv = fmt[i++];
		pc.len = (uint32_t)(i - start);
		if (pc.conv == '*')
			return fail(bad_off, bad_len, why, start, i - start,
				    "a '*' width: widths must be written as numbers");
		if (strchr("lhzjtL", pc.conv))
			return fail(
				bad_off, bad_len, why, start, i - start,
				"a length modifier: every integer is 64 bits, so none is needed");
		if (pc.conv != '%' && !rowfmt_conv_int(pc.conv) && pc.conv != 's')
			return fail(bad_off, bad_len, why, start, i - start,
				    "an unknown conversion");
		if (pc.conv == '%' && pc.len != 2)
			return fail(bad_off, bad_len, why, start, i - start,
				    "flags or a width on %%");
		if (pc.prec >= 0 && pc.conv != 's')
			return fail(bad_off, bad_len, why, start, i - start,
				    "a precision on a conversion other than %s");
		if (pc.zero && (pc.conv == 's' || pc.conv == 'c'))
			return fail(bad_off, bad_len, why, start, i - start,
				    "the flag 0 on text (it pads numbers)");
		if (!push(out, pc))
			return fail(bad_off, bad_len, why, start, i - start,
				    "more than 128 pieces in the format");
		if (pc.conv != '%')
			out->nconv++;
	}
	out->ends_nl = len > 0 && fmt[len - 1] == '\n';
	return 0;
}

size_t rowfmt_int(const struct rowfmt_piece *pc, int64_t v, char *buf, size_t sz)
{
	char spec[16];
	size_t n = 0;
	int r;

	if (!sz)
		return 0;
	spec[n++] = '%';
	if (pc->minus)
		spec[n++] = '-';
	else if (pc->zero)
		spec[n++] = '0';
	spec[n++] = '*';
	switch (pc->conv) {
	case 'u':
		memcpy(spec + n, PRIu64, sizeof(PRIu64));
		r = snprintf(buf, sz, spec, pc->width, (uint64_t)v);
		break;
	case 'x':
		memcpy(spec + n, PRIx64, sizeof(PRIx64));
		r = snprintf(buf, sz, spec, pc->width, (uint64_t)v);
		break;
	case 'X':
		memcpy(spec + n, PRIX64, sizeof(PRIX64));
		r = snprintf(buf, sz, spec, pc->width, (uint64_t)v);
		break;
	case 'c':
		spec[n++] = 'c';
		spec[n] = 0;
		r = snprintf(buf, sz, spec, pc->width, (int)(unsigned char)v);
		break;
	default:
		memcpy(spec + n, PRId64, sizeof(PRId64));
		r = snprintf(buf, sz, spec, pc->width, v);
		break;
	}
	if (r < 0)
		return 0;
	return (size_t)r < sz ? (size_t)r : sz - 1;
}

size_t rowfmt_pad(const struct rowfmt_piece *pc, size_t len, size_t *keep, bool *left)
{
	*keep = pc->prec >= 0 && (size_t)pc->prec < len ? (size_t)pc->prec : len;
	*left = !pc->minus; /* right-aligned: spaces on the left */
	return (size_t)pc->width > *keep ? (size_t)pc->width - *keep : 0;
}
