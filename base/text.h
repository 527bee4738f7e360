/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Text that crosses a boundary: UTF-8 validation, the two classes of text the wire accepts,
 * and JSON string literals.  The one home of these rules: the wire codec (agent/wire.c)
 * refuses what text_check() refuses, the agent cleans what it sends with text_clean() so
 * that the receiver's check passes, and every JSON printer (agent/output.c, weft status,
 * weft submit) escapes with text_json_*(), so a string reads back the same everywhere.
 *
 * Valid UTF-8 here is RFC 3629's: no overlong forms, no surrogates, nothing above U+10FFFF.
 * Nothing here allocates.
 */
#ifndef WEFT_BASE_TEXT_H
#define WEFT_BASE_TEXT_H
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* Length of the valid UTF-8 character that starts at s (n > 0 bytes left), or 0 if none
 * does (a stray continuation byte, a forbidden form, a sequence cut short). */
size_t text_utf8_seq(const char *s, size_t n);

/* Is s[0, len) valid UTF-8?  If not and bad is not NULL, *bad is the first bad byte's
 * offset. */
bool text_utf8_valid(const char *s, size_t len, size_t *bad);

enum text_class {
	TEXT_NAME, /* one line, no control characters at all: host, role, version, ... */
	TEXT_PROSE, /* query text, messages: newlines, tabs and carriage returns allowed */
};

/* The offset of the first byte of s[0, len) that is not valid UTF-8 or is a control
 * character (C0 or DEL) its class does not allow; len if there is none. */
size_t text_check(const char *s, size_t len, enum text_class c);

/* Replaces, in place, every byte text_check() would stop at with '?': what is left passes
 * text_check() (bytes of a verifier log, say, may be anything). */
void text_clean(char *s, size_t len, enum text_class c);

/*
 * A JSON string literal, quotes included: '"' and '\\' escaped, \n \t \r as such, other
 * control characters (and DEL) as \u00XX, bytes that are not valid UTF-8 as \ufffd; valid
 * UTF-8 is copied as it is.  TEXT_JSON_MAX(len) bytes always suffice (without the NUL).
 */
#define TEXT_JSON_MAX(len) (6 * (size_t)(len) + 2)

/* Writes the literal of s[0, len) into out (size bytes, NUL-terminated when size > 0);
 * returns its length, which may be more than size - 1 (then out holds a prefix), as
 * snprintf does. */
size_t text_json_escape(char *out, size_t size, const char *s, size_t len);

/* Writes the literal of the string s (NULL: "") to f; 0 or -EIO. */
int text_json_fputs(FILE *f, const char *s);

#endif
