/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The tokenizer of the query language.  It turns query text into tokens on demand, one
 * lexer_next() at a time, each with its place (offset, length, 1-based line and column).
 * Keywords are case-insensitive; `--` starts a comment to the end of the line; numbers
 * glued to a unit (`100ms`, `4KiB`) become scaled integers.  Probes are not tokens of the
 * expression grammar (`uprobe:/usr/bin/x:f+0x10` holds '/', ':' and '+'), so the parser
 * asks for them explicitly with lexer_probe_text(), which takes the raw text.
 *
 * Strings and names are copied into the arena given at init (the query's), so tokens stay
 * valid as long as the query.  On a lexical error the lexer reports one diagnostic (unless
 * it has no diag_list: the parser's quiet look-ahead) and returns TOK_ERROR.
 */
#ifndef WEFT_LEXER_H
#define WEFT_LEXER_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "compiler/ast.h"
#include "compiler/diag.h"

enum tok_kind {
	TOK_EOF,
	TOK_ERROR, /* a diagnostic was reported */
	TOK_INT, /* ival, unit */
	TOK_FLOAT, /* fval */
	TOK_STR, /* sval: the decoded string */
	TOK_NAME, /* sval */
	TOK_PROBE, /* sval: raw probe text (lexer_probe_text only) */
	/* keywords */
	TOK_FROM,
	TOK_WHERE,
	TOK_GROUP,
	TOK_BY,
	TOK_AS,
	TOK_SELECT,
	TOK_ORDER,
	TOK_ASC,
	TOK_DESC,
	TOK_LIMIT,
	TOK_EVERY,
	TOK_FOR,
	TOK_SPAN,
	TOK_ON,
	TOK_AND,
	TOK_OR,
	TOK_NOT,
	TOK_LIKE,
	TOK_IN,
	/* operators and punctuation */
	TOK_PLUS,
	TOK_MINUS,
	TOK_STAR,
	TOK_SLASH,
	TOK_PERCENT,
	TOK_EQ, /* = or == */
	TOK_NE, /* != or <> */
	TOK_LT,
	TOK_LE,
	TOK_GT,
	TOK_GE,
	TOK_LPAREN,
	TOK_RPAREN,
	TOK_COMMA,
	TOK_DOT,
	TOK__COUNT
};

struct token {
	enum tok_kind kind;
	struct src_loc loc;
	int64_t ival;
	enum int_unit unit;
	double fval;
	char *sval; /* in the lexer's arena */
};

struct lexer {
	const char *src;
	size_t len;
	size_t pos;
	uint32_t line;
	size_t line_start; /* offset of the first byte of the current line */
	struct diag_list *dl; /* NULL: report nothing (look-ahead) */
	struct arena *arena;
	bool failed; /* a lexical error was seen */
	bool nomem; /* ...and it was an allocation failure (no diagnostic) */
};

void lexer_init(struct lexer *lx, const char *src, struct diag_list *dl, struct arena *arena);
/* The next token.  0, or -1 with t->kind == TOK_ERROR after a diagnostic (or, with
 * lx->nomem set and errno ENOMEM, after an allocation failure, which has no diagnostic).  At the end it returns TOK_EOF again and again. */
int lexer_next(struct lexer *lx, struct token *t);
/* Skips blanks and comments, then takes the longest run of characters that are not blank,
 * ',' or ')' and do not start a `--` comment, as a TOK_PROBE.  An empty run gives a
 * TOK_PROBE with sval "" and len 0 at the next character.  0 or -1 (allocation failure). */
int lexer_probe_text(struct lexer *lx, struct token *t);

/* "`select`", "'+'", "a number"...: how a token kind is named in a message. */
const char *lexer_tok_kind_name(enum tok_kind k);
bool lexer_tok_is_keyword(enum tok_kind k);
/* The keyword's spelling ("select"), or NULL. */
const char *lexer_keyword_text(enum tok_kind k);

#endif
