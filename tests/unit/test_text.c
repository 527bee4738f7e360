// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests of base/text.[ch], the one UTF-8 validator and JSON escaper of weft: every
 * length of valid character, every forbidden form (overlong, surrogate, beyond U+10FFFF, cut
 * short, a stray continuation byte), the two text classes of the wire, cleaning (what is
 * left passes the check), and JSON literals byte for byte, to a buffer (with snprintf's
 * truncation) and to a stream.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/text.h"

static size_t seq(const char *s)
{
	return text_utf8_seq(s, strlen(s));
}

static void test_utf8_seq(void **state)
{
	(void)state;
	assert_int_equal(seq("a"), 1);
	assert_int_equal(seq("\xc3\xa9"), 2); /* é */
	assert_int_equal(seq("\xe2\x82\xac"), 3); /* € */
	assert_int_equal(seq("\xf0\x9f\x98\x80"), 4); /* U+1F600 */
	assert_int_equal(seq("\xf4\x8f\xbf\xbf"), 4); /* U+10FFFF, the last */
	assert_int_equal(seq("\xed\x9f\xbf"), 3); /* U+D7FF, just below the surrogates */
	assert_int_equal(seq("\x80"), 0); /* a stray continuation byte */
	assert_int_equal(seq("\xc0\x80"), 0); /* overlong NUL */
	assert_int_equal(seq("\xc1\xbf"), 0); /* overlong */
	assert_int_equal(seq("\xe0\x80\x80"), 0); /* overlong */
	assert_int_equal(seq("\xf0\x80\x80\x80"), 0); /* overlong */
	assert_int_equal(seq("\xed\xa0\x80"), 0); /* U+D800, a surrogate */
	assert_int_equal(seq("\xf4\x90\x80\x80"), 0); /* U+110000 */
	assert_int_equal(seq("\xf5\x80\x80\x80"), 0);
	assert_int_equal(seq("\xff"), 0);
	assert_int_equal(seq("\xe2\x82"), 0); /* cut short */
	assert_int_equal(seq("\xe2\x82x"), 0); /* not a continuation */
	assert_int_equal(text_utf8_seq("\xe2\x82\xac", 2), 0); /* n bounds the read */
	assert_int_equal(text_utf8_seq("", 0), 0);
}

static void test_utf8_valid(void **state)
{
	size_t bad = 99;

	(void)state;
	assert_true(text_utf8_valid("", 0, &bad));
	assert_true(text_utf8_valid("caf\xc3\xa9 \xe2\x82\xac", 9, &bad));
	assert_int_equal(bad, 99);
	assert_false(text_utf8_valid("ab\xc3(", 4, &bad));
	assert_int_equal(bad, 2);
	assert_false(text_utf8_valid("abc\xe2\x82", 5, NULL));
	/* a NUL is a character like any other when the length says so */
	assert_true(text_utf8_valid("a\0b", 3, NULL));
}

static void test_classes(void **state)
{
	(void)state;
	assert_int_equal(text_check("host-1", 6, TEXT_NAME), 6);
	assert_int_equal(text_check("a\nb", 3, TEXT_NAME), 1);
	assert_int_equal(text_check("a\nb\tc\r", 6, TEXT_PROSE), 6);
	assert_int_equal(text_check("ab\x01", 3, TEXT_PROSE), 2);
	assert_int_equal(text_check("a\x7f", 2, TEXT_PROSE), 1);
	assert_int_equal(text_check("\xc3\xa9\xff", 3, TEXT_NAME), 2);
	assert_int_equal(text_check("\xe2\x82\xac", 3, TEXT_NAME), 3);
}

static void test_clean(void **state)
{
	char a[] = "ok\x01\xff\xc3\xa9\n\x7f";
	char b[] = "ab\xe2\x82"; /* a character cut by a length limit */
	char c[] = "line\nnext";

	(void)state;
	text_clean(a, strlen(a), TEXT_PROSE);
	assert_string_equal(a, "ok??\xc3\xa9\n?");
	assert_int_equal(text_check(a, strlen(a), TEXT_PROSE), strlen(a));
	text_clean(b, strlen(b), TEXT_PROSE);
	assert_string_equal(b, "ab??");
	text_clean(c, strlen(c), TEXT_NAME);
	assert_string_equal(c, "line?next");
}

static void test_json_escape(void **state)
{
	const char in[] = "a\"b\\c\n\t\r\x01\x7f\xff \xc3\xa9\xf0\x9f\x98\x80";
	const char want[] =
		"\"a\\\"b\\\\c\\n\\t\\r\\u0001\\u007f\\ufffd \xc3\xa9\xf0\x9f\x98\x80\"";
	char out[128];
	size_t n;

	(void)state;
	n = text_json_escape(out, sizeof(out), in, sizeof(in) - 1);
	assert_string_equal(out, want);
	assert_int_equal(n, strlen(want));
	/* a NUL inside the length, and the empty string */
	n = text_json_escape(out, sizeof(out), "x\0y", 3);
	assert_string_equal(out, "\"x\\u0000y\"");
	n = text_json_escape(out, sizeof(out), "", 0);
	assert_string_equal(out, "\"\"");
	assert_int_equal(n, 2);
	/* the bound holds for the worst input */
	n = text_json_escape(out, sizeof(out), "\x01\x01\x01", 3);
	assert_int_equal(n, TEXT_JSON_MAX(3));
	/* snprintf's contract: a prefix, NUL-terminated, and the full length */
	memset(out, 'Z', sizeof(out));
	n = text_json_escape(out, 4, "abcdef", 6);
	assert_int_equal(n, 8);
	assert_string_equal(out, "\"ab");
	assert_int_equal(out[4], 'Z');
	assert_int_equal(text_json_escape(NULL, 0, "ab", 2), 4);
}

static void test_json_fputs(void **state)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	(void)state;
	assert_non_null(f);
	assert_int_equal(text_json_fputs(f, "h\"o\x02st\xc3"), 0);
	assert_int_equal(text_json_fputs(f, NULL), 0);
	fclose(f);
	assert_string_equal(buf, "\"h\\\"o\\u0002st\\ufffd\"\"\"");
	free(buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_utf8_seq),    cmocka_unit_test(test_utf8_valid),
		cmocka_unit_test(test_classes),	    cmocka_unit_test(test_clean),
		cmocka_unit_test(test_json_escape), cmocka_unit_test(test_json_fputs),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
