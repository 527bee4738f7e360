// SPDX-License-Identifier: Apache-2.0
/*
 * UTF-8 validation, text classes and JSON string literals (base/text.h).  Every function
 * walks its input once, one character at a time, with text_utf8_seq() deciding where a
 * character ends: validation, cleaning and escaping cannot disagree about what is valid.
 */
#include <errno.h>
#include <string.h>
#include "base/text.h"

size_t text_utf8_seq(const char *s, size_t n)
{
	const unsigned char *u = (const unsigned char *)s;
	unsigned c;
	size_t need;

	if (n == 0)
		return 0;
	c = u[0];
	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		need = 1;
	else if (c >= 0xe0 && c <= 0xef)
		need = 2;
	else if (c >= 0xf0 && c <= 0xf4)
		need = 3;
	else
		return 0; /* a continuation byte, an overlong lead (c0, c1) or beyond U+10FFFF */
	if (n < need + 1)
		return 0;
	for (size_t i = 1; i <= need; i++)
		if ((u[i] & 0xc0) != 0x80)
			return 0;
	/* no overlong forms, no surrogates, nothing above U+10FFFF */
	if ((c == 0xe0 && u[1] < 0xa0) || (c == 0xed && u[1] > 0x9f) ||
	    (c == 0xf0 && u[1] < 0x90) || (c == 0xf4 && u[1] > 0x8f))
		return 0;
	return need + 1;
}

bool text_utf8_valid(const char *s, size_t len, size_t *bad)
{
	size_t i = 0;

	while (i < len) {
		size_t n = text_utf8_seq(s + i, len - i);

		if (n == 0) {
			if (bad)
				*bad = i;
			return false;
		}
		i += n;
	}
	return true;
}

static bool text_control_ok(unsigned char c, enum text_class cls)
{
	if (c >= 0x20 && c != 0x7f)
		return true;
	return cls == TEXT_PROSE && (c == '\n' || c == '\t' || c == '\r');
}

size_t text_check(const char *s, size_t len, enum text_class cls)
{
	size_t i = 0;

	while (i < len) {
		size_t n = text_utf8_seq(s + i, len - i);

		if (n == 0 || (n == 1 && !text_control_ok((unsigned char)s[i], cls)))
			return i;
		i += n;
	}
	return len;
}

void text_clean(char *s, size_t len, enum text_class cls)
{
	size_t i = 0;

	while (i < len) {
		size_t n = text_utf8_seq(s + i, len - i);

		if (n == 0 || (n == 1 && !text_control_ok((unsigned char)s[i], cls))) {
			s[i++] = '?';
			continue;
		}
		i += n;
	}
}

/* The escaped form of the character at s (n > 0 bytes left) into out (at most 6 bytes);
 * *used: how many input bytes it stands for.  Returns the output length. */
static size_t json_char(const char *s, size_t n, char out[6], size_t *used)
{
	static const char hex[] = "0123456789abcdef";
	unsigned char c = (unsigned char)s[0];
	size_t k;

	*used = 1;
	switch (c) {
	case '"':
	case '\\':
		out[0] = '\\';
		out[1] = (char)c;
		return 2;
	case '\n':
		memcpy(out, "\\n", 2);
		return 2;
	case '\t':
		memcpy(out, "\\t", 2);
		return 2;
	case '\r':
		memcpy(out, "\\r", 2);
		return 2;
	}
	if (c < 0x20 || c == 0x7f) {
		memcpy(out, "\\u00", 4);
		out[4] = hex[c >> 4];
		out[5] = hex[c & 15];
		return 6;
	}
	k = text_utf8_seq(s, n);
	if (k == 0) {
		memcpy(out, "\\ufffd", 6);
		return 6;
	}
	memcpy(out, s, k); /* k <= 4 */
	*used = k;
	return k;
}

/* Appends p[0, k) at *o, keeping what fits in out[0, size - 1). */
static void json_put(char *out, size_t size, size_t *o, const char *p, size_t k)
{
	for (size_t j = 0; j < k; j++, (*o)++)
		if (*o + 1 < size)
			out[*o] = p[j];
}

size_t text_json_escape(char *out, size_t size, const char *s, size_t len)
{
	size_t o = 0, i = 0;
	char one[6];

	json_put(out, size, &o, "\"", 1);
	while (i < len) {
		size_t used, k = json_char(s + i, len - i, one, &used);

		json_put(out, size, &o, one, k);
		i += used;
	}
	json_put(out, size, &o, "\"", 1);
	if (size)
		out[o < size ? o : size - 1] = 0;
	return o;
}

int text_json_fputs(FILE *f, const char *s)
{
	size_t len, i = 0;
	char one[6];

	s = s ? s : "";
	len = strlen(s);
	if (fputc('"', f) == EOF)
		return -EIO;
	while (i < len) {
		size_t used, k = json_char(s + i, len - i, one, &used);

		if (fwrite(one, 1, k, f) != k)
			return -EIO;
		i += used;
	}
	return fputc('"', f) == EOF ? -EIO : 0;
}
