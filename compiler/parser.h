/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The parser: query text -> struct ast_query (ast.h), by recursive descent over the grammar
 * of docs/language.md.  It checks syntax only; names, fields, types and probes' existence
 * are sema's.  It does split each probe into provider and parts (the provider must exist
 * and take that many parts), so that later passes never see a malformed probe.
 */
#ifndef WEFT_PARSER_H
#define WEFT_PARSER_H
#include "compiler/ast.h"
#include "compiler/diag.h"

/* Nesting of parentheses, `not`, unary minus and calls the parser will follow. */
#define PARSE_MAX_DEPTH 64
/* Height of any expression tree it builds (long `a + b + c ...` chains count too). */
#define PARSE_MAX_HEIGHT 256
/* Arguments of one call, items of one `in (...)` list. */
#define PARSE_MAX_ARGS 64

/* Parses src.  Returns the tree (free with ast_query_free()), or NULL with the first error
 * in dl and errno EINVAL; NULL with errno ENOMEM and possibly no diagnostic if memory ran
 * out.  dl must have been diag_list_init()ed with the same src. */
struct ast_query *parse_query(const char *src, struct diag_list *dl);

#endif
