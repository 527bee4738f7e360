// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests of the tokenizer (compiler/lexer.c): keywords in any case, numbers and units
 * (exact scaled values, overflow, fractional units), strings and escapes, comments,
 * operators, raw probe text, the place of every token, and one test per lexical error tag.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>
#include "compiler/ast.h"
#include "compiler/lexer.h"

#define MAXTOK 64

struct lexed {
	struct arena *arena;
	struct diag_list dl;
	struct token t[MAXTOK];
	int n;
	int rc; /* last lexer_next() result */
};

/* Lexes src up to EOF or the first error. */
static void lex_all(struct lexed *l, const char *src)
{
	struct lexer lx;

	memset(l, 0, sizeof(*l));
	l->arena = arena_new();
	assert_non_null(l->arena);
	diag_list_init(&l->dl, src, "query");
	lexer_init(&lx, src, &l->dl, l->arena);
	while (l->n < MAXTOK) {
		struct token *t = &l->t[l->n++];

		l->rc = lexer_next(&lx, t);
		if (t->kind == TOK_EOF || t->kind == TOK_ERROR)
			break;
	}
}

static void lexed_free(struct lexed *l)
{
	diag_list_free(&l->dl);
	arena_free(l->arena);
}

/* Lexing src fails with exactly one diagnostic carrying tag. */
static void assert_lex_error(const char *src, enum diag_tag tag)
{
	struct lexed l;

	lex_all(&l, src);
	if (l.rc != -1 || l.dl.n != 1 || l.dl.v[0].tag != tag)
		fail_msg("'%s': expected %s, got rc %d, %d diags, first %s", src,
			 diag_tag_name(tag), l.rc, l.dl.n,
			 l.dl.n ? diag_tag_name(l.dl.v[0].tag) : "-");
	assert_int_equal(l.t[l.n - 1].kind, TOK_ERROR);
	lexed_free(&l);
}

static void test_keywords_any_case(void **state)
{
	static const char *const words[] = { "from",   "where", "group", "by",	 "as",
					     "select", "order", "asc",	 "desc", "limit",
					     "every",  "for",	"span",	 "on",	 "and",
					     "or",     "not",	"like",	 "in" };
	struct lexed l;

	(void)state;
	for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
		char up[16], mixed[16];

		for (size_t k = 0; k <= strlen(words[i]); k++) {
			up[k] = (char)(words[i][k] >= 'a' ? words[i][k] - 32 : words[i][k]);
			mixed[k] = (char)(k % 2 ? up[k] : words[i][k]);
		}
		lex_all(&l, words[i]);
		assert_true(lexer_tok_is_keyword(l.t[0].kind));
		assert_string_equal(lexer_keyword_text(l.t[0].kind), words[i]);
		enum tok_kind k = l.t[0].kind;
		lexed_free(&l);
		lex_all(&l, up);
		assert_int_equal(l.t[0].kind, k);
		lexed_free(&l);
		lex_all(&l, mixed);
		assert_int_equal(l.t[0].kind, k);
		lexed_free(&l);
	}
	/* Names keep their spelling and are not keywords. */
	lex_all(&l, "Comm froms _x1");
	assert_int_equal(l.t[0].kind, TOK_NAME);
	assert_string_equal(l.t[0].sval, "Comm");
	assert_int_equal(l.t[1].kind, TOK_NAME);
	assert_string_equal(l.t[1].sval, "froms");
	assert_string_equal(l.t[2].sval, "_x1");
	assert_int_equal(l.t[3].kind, TOK_EOF);
	lexed_free(&l);
}

static void test_numbers_and_units(void **state)
{
	static const struct {
		const char *src;
		enum tok_kind kind;
		int64_t ival;
		enum int_unit unit;
	} cases[] = {
		{ "0", TOK_INT, 0, UNIT_NONE },
		{ "4242", TOK_INT, 4242, UNIT_NONE },
		{ "0x1f", TOK_INT, 31, UNIT_NONE },
		{ "0XFF", TOK_INT, 255, UNIT_NONE },
		{ "9223372036854775807", TOK_INT, INT64_MAX, UNIT_NONE },
		{ "0x7fffffffffffffff", TOK_INT, INT64_MAX, UNIT_NONE },
		{ "10ns", TOK_INT, 10, UNIT_DURATION },
		{ "5us", TOK_INT, 5000, UNIT_DURATION },
		{ "100ms", TOK_INT, 100000000, UNIT_DURATION },
		{ "1s", TOK_INT, 1000000000, UNIT_DURATION },
		{ "2m", TOK_INT, 120000000000LL, UNIT_DURATION },
		{ "1h", TOK_INT, 3600000000000LL, UNIT_DURATION },
		{ "1.5s", TOK_INT, 1500000000, UNIT_DURATION },
		{ "0.25ms", TOK_INT, 250000, UNIT_DURATION },
		{ ".5s", TOK_INT, 500000000, UNIT_DURATION },
		{ "16B", TOK_INT, 16, UNIT_SIZE },
		{ "4KiB", TOK_INT, 4096, UNIT_SIZE },
		{ "1MiB", TOK_INT, 1 << 20, UNIT_SIZE },
		{ "2GiB", TOK_INT, 2LL << 30, UNIT_SIZE },
		{ "1TiB", TOK_INT, 1LL << 40, UNIT_SIZE },
		{ "1.5KiB", TOK_INT, 1536, UNIT_SIZE },
	};
	struct lexed l;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		lex_all(&l, cases[i].src);
		if (l.t[0].kind != cases[i].kind || l.t[0].ival != cases[i].ival ||
		    l.t[0].unit != cases[i].unit)
			fail_msg("'%s': kind %d ival %lld unit %d", cases[i].src, l.t[0].kind,
				 (long long)l.t[0].ival, l.t[0].unit);
		assert_int_equal(l.t[0].loc.len, strlen(cases[i].src));
		assert_int_equal(l.t[1].kind, TOK_EOF);
		lexed_free(&l);
	}
	lex_all(&l, "0.99 .5 3.25");
	assert_int_equal(l.t[0].kind, TOK_FLOAT);
	assert_true(l.t[0].fval == 0.99);
	assert_int_equal(l.t[1].kind, TOK_FLOAT);
	assert_true(l.t[1].fval == 0.5);
	assert_true(l.t[2].fval == 3.25);
	lexed_free(&l);
	/* "1." is the integer 1 then '.', so `x.1` style errors surface in the parser. */
	lex_all(&l, "1.x");
	assert_int_equal(l.t[0].kind, TOK_INT);
	assert_int_equal(l.t[1].kind, TOK_DOT);
	assert_int_equal(l.t[2].kind, TOK_NAME);
	lexed_free(&l);
}

static void test_strings(void **state)
{
	struct lexed l;

	(void)state;
	lex_all(&l, "'postgres' \"a b\" 'it\\'s' \"q\\\"\" '\\\\\\n\\t' ''");
	assert_int_equal(l.t[0].kind, TOK_STR);
	assert_string_equal(l.t[0].sval, "postgres");
	assert_int_equal(l.t[0].loc.len, 10);
	assert_string_equal(l.t[1].sval, "a b");
	assert_string_equal(l.t[2].sval, "it's");
	assert_string_equal(l.t[3].sval, "q\"");
	assert_string_equal(l.t[4].sval, "\\\n\t");
	assert_string_equal(l.t[5].sval, "");
	assert_int_equal(l.t[6].kind, TOK_EOF);
	lexed_free(&l);
	/* \0 ends the C string early; the token still covers the whole literal. */
	lex_all(&l, "'ab\\0cd' x");
	assert_string_equal(l.t[0].sval, "ab");
	assert_int_equal(l.t[0].loc.len, 8);
	assert_int_equal(l.t[1].kind, TOK_NAME);
	lexed_free(&l);
	/* The other quote needs no escape. */
	lex_all(&l, "\"it's\" 'say \"hi\"'");
	assert_string_equal(l.t[0].sval, "it's");
	assert_string_equal(l.t[1].sval, "say \"hi\"");
	lexed_free(&l);
}

static void test_operators(void **state)
{
	static const enum tok_kind want[] = {
		TOK_PLUS, TOK_MINUS,  TOK_STAR,	  TOK_SLASH, TOK_PERCENT, TOK_EQ,
		TOK_EQ,	  TOK_NE,     TOK_NE,	  TOK_LT,    TOK_LE,	  TOK_GT,
		TOK_GE,	  TOK_LPAREN, TOK_RPAREN, TOK_COMMA, TOK_DOT,	  TOK_EOF,
	};
	struct lexed l;

	(void)state;
	lex_all(&l, "+ - * / % = == != <> < <= > >= ( ) , .");
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		assert_int_equal(l.t[i].kind, want[i]);
	lexed_free(&l);
	/* Glued: a<=b, x==1, y<>2 */
	lex_all(&l, "a<=b x==1 y<>2");
	assert_int_equal(l.t[1].kind, TOK_LE);
	assert_int_equal(l.t[4].kind, TOK_EQ);
	assert_int_equal(l.t[4].loc.len, 2);
	assert_int_equal(l.t[7].kind, TOK_NE);
	lexed_free(&l);
}

static void test_comments(void **state)
{
	struct lexed l;

	(void)state;
	lex_all(&l, "-- a comment\nfrom -- another\n  select--glued\n-- last line without newline");
	assert_int_equal(l.t[0].kind, TOK_FROM);
	assert_int_equal(l.t[0].loc.line, 2);
	assert_int_equal(l.t[1].kind, TOK_SELECT);
	assert_int_equal(l.t[1].loc.line, 3);
	assert_int_equal(l.t[1].loc.col, 3);
	assert_int_equal(l.t[2].kind, TOK_EOF);
	lexed_free(&l);
	/* A single '-' is minus, and "- -" is two minuses. */
	lex_all(&l, "a - -b");
	assert_int_equal(l.t[1].kind, TOK_MINUS);
	assert_int_equal(l.t[2].kind, TOK_MINUS);
	assert_int_equal(l.t[3].kind, TOK_NAME);
	lexed_free(&l);
}

static void test_locations(void **state)
{
	const char *src = "from syscall\n\twhere pid = 0x10\n  select  'x', 1.5s\n";
	struct lexed l;

	(void)state;
	lex_all(&l, src);
	/* from(1:1) syscall(1:6) where(2:2) pid(2:8) =(2:12) 0x10(2:14) select(3:3) 'x'(3:11)
	 * ,(3:14) 1.5s(3:16) EOF(4:1) */
	static const uint32_t want[][3] = { { 1, 1, 4 },  { 1, 6, 7 },	{ 2, 2, 5 }, { 2, 8, 3 },
					    { 2, 12, 1 }, { 2, 14, 4 }, { 3, 3, 6 }, { 3, 11, 3 },
					    { 3, 14, 1 }, { 3, 16, 4 }, { 4, 1, 0 } };
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		const struct src_loc *loc = &l.t[i].loc;

		if (loc->line != want[i][0] || loc->col != want[i][1] || loc->len != want[i][2])
			fail_msg("token %zu: %u:%u len %u, want %u:%u len %u", i, loc->line,
				 loc->col, loc->len, want[i][0], want[i][1], want[i][2]);
		/* off and col agree with the text. */
		if (loc->len)
			assert_true(loc->off < strlen(src));
	}
	assert_memory_equal(src + l.t[5].loc.off, "0x10", 4);
	assert_int_equal(l.t[10].kind, TOK_EOF);
	assert_int_equal(l.t[10].loc.off, strlen(src));
	lexed_free(&l);
}

static void test_probe_text(void **state)
{
	static const struct {
		const char *src;
		const char *want;
		enum tok_kind next;
	} cases[] = {
		{ "uprobe:/usr/bin/redis-server:processCommand) where",
		  "uprobe:/usr/bin/redis-server:processCommand", TOK_RPAREN },
		{ "  usdt:/usr/lib/postgresql/15/bin/postgres:postgresql:query__start,\n",
		  "usdt:/usr/lib/postgresql/15/bin/postgres:postgresql:query__start", TOK_COMMA },
		{ "tp:sched:* select", "tp:sched:*", TOK_SELECT },
		{ "uprobe:libc:malloc+0x10", "uprobe:libc:malloc+0x10", TOK_EOF },
		{ "profile:99hz where", "profile:99hz", TOK_WHERE },
		{ "-- comment first\n syscall:read--comment", "syscall:read", TOK_EOF },
		{ "syscall:read on tid", "syscall:read", TOK_ON },
		{ ")", "", TOK_RPAREN },
	};
	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct arena *a = arena_new();
		struct diag_list dl;
		struct lexer lx;
		struct token t;

		diag_list_init(&dl, cases[i].src, "query");
		lexer_init(&lx, cases[i].src, &dl, a);
		assert_int_equal(lexer_probe_text(&lx, &t), 0);
		assert_int_equal(t.kind, TOK_PROBE);
		assert_string_equal(t.sval, cases[i].want);
		assert_int_equal(t.loc.len, strlen(cases[i].want));
		assert_memory_equal(cases[i].src + t.loc.off, cases[i].want, t.loc.len);
		assert_int_equal(lexer_next(&lx, &t), 0);
		assert_int_equal(t.kind, cases[i].next);
		assert_int_equal(dl.n, 0);
		diag_list_free(&dl);
		arena_free(a);
	}
}

static void test_errors(void **state)
{
	(void)state;
	/* E_LEX_STRING */
	assert_lex_error("'postgres", DIAG_E_LEX_STRING);
	assert_lex_error("comm = \"postgres\n\"", DIAG_E_LEX_STRING);
	assert_lex_error("'a\\qb'", DIAG_E_LEX_STRING);
	assert_lex_error("'ends in backslash\\", DIAG_E_LEX_STRING);
	/* E_LEX_NUMBER */
	assert_lex_error("9223372036854775808", DIAG_E_LEX_NUMBER);
	assert_lex_error("0x8000000000000000", DIAG_E_LEX_NUMBER);
	assert_lex_error("0x", DIAG_E_LEX_NUMBER);
	assert_lex_error("0x1g", DIAG_E_LEX_NUMBER);
	assert_lex_error("1.5ns", DIAG_E_LEX_NUMBER);
	assert_lex_error("3000000h", DIAG_E_LEX_NUMBER);
	assert_lex_error("9000000TiB", DIAG_E_LEX_NUMBER);
	/* E_LEX_UNIT */
	assert_lex_error("10KB", DIAG_E_LEX_UNIT);
	assert_lex_error("5sec", DIAG_E_LEX_UNIT);
	assert_lex_error("1e9", DIAG_E_LEX_UNIT);
	assert_lex_error("99hz", DIAG_E_LEX_UNIT);
	assert_lex_error("10S", DIAG_E_LEX_UNIT);
	/* E_LEX_CHAR */
	assert_lex_error("pid & 1", DIAG_E_LEX_CHAR);
	assert_lex_error("!x", DIAG_E_LEX_CHAR);
	assert_lex_error("a; b", DIAG_E_LEX_CHAR);
	assert_lex_error("x = \xc3\xa9", DIAG_E_LEX_CHAR);
	assert_lex_error("args[0]", DIAG_E_LEX_CHAR);
}

static void test_error_places(void **state)
{
	struct lexed l;

	(void)state;
	/* The unit error points at the unit, with the list of units as the fix. */
	lex_all(&l, "every\n  10KB");
	assert_int_equal(l.dl.n, 1);
	assert_int_equal(l.dl.v[0].loc.line, 2);
	assert_int_equal(l.dl.v[0].loc.col, 5);
	assert_int_equal(l.dl.v[0].loc.len, 2);
	assert_non_null(l.dl.v[0].fix);
	assert_non_null(strstr(l.dl.v[0].fix, "KiB"));
	lexed_free(&l);
	lex_all(&l, "x = 7s\ny = 'open");
	assert_int_equal(l.dl.v[0].loc.line, 2);
	assert_int_equal(l.dl.v[0].loc.col, 5);
	assert_int_equal(l.dl.v[0].loc.len, 5);
	lexed_free(&l);
	lex_all(&l, "1 2 3zz");
	assert_int_equal(l.dl.v[0].tag, DIAG_E_LEX_UNIT);
	assert_non_null(strstr(l.dl.v[0].fix, "ns us ms s m h"));
	lexed_free(&l);
}

/* Quiet look-ahead: no diag_list, no diagnostic, still TOK_ERROR. */
static void test_quiet(void **state)
{
	struct arena *a = arena_new();
	struct lexer lx;
	struct token t;

	(void)state;
	lexer_init(&lx, "&", NULL, a);
	assert_int_equal(lexer_next(&lx, &t), -1);
	assert_int_equal(t.kind, TOK_ERROR);
	arena_free(a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_keywords_any_case), cmocka_unit_test(test_numbers_and_units),
		cmocka_unit_test(test_strings),		  cmocka_unit_test(test_operators),
		cmocka_unit_test(test_comments),	  cmocka_unit_test(test_locations),
		cmocka_unit_test(test_probe_text),	  cmocka_unit_test(test_errors),
		cmocka_unit_test(test_error_places),	  cmocka_unit_test(test_quiet),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
