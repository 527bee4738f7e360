// SPDX-License-Identifier: Apache-2.0
/*
 * The parser: recursive descent over the grammar in docs/language.md, one function per rule,
 * with one token of look-ahead (p->cur).  Two places look further, on a copy of the lexer
 * that reports nothing: `span` followed by `(` (the span form, else a probe), and `not`
 * followed by `like`/`in`.
 *
 * Probes are not expression tokens: after `from`, ',' (between sources) and `span(` the
 * parser asks the lexer for the raw probe text, then splits it here (provider, parts,
 * +offset, wildcards) against the provider table of probes/.
 *
 * What must hold:
 *   - the first error stops the parse: one diagnostic, a NULL result, nothing leaked (every
 *     node is in the query's arena, freed with it);
 *   - recursion is bounded (PARSE_MAX_DEPTH) and so is the height of every tree built
 *     (PARSE_MAX_HEIGHT), so neither this parser nor any later pass can exhaust the stack;
 *   - clauses come in the grammar's order, each at most once, and an error about order
 *     names the order.
 *
 * One file, on purpose: a recursive-descent parser reads best as the grammar does, one
 * function per rule next to the rules it calls, and every rule shares the parser's state
 * (the look-ahead, the depth bound, the first-error-stops flag) through the helpers at the
 * top.  Its parts are sections, in the grammar's order: errors and tokens, expressions
 * (precedence climbing from `or` down to primaries), probes (splitting a probe's raw text),
 * clauses.  Split into files they would need that state in a shared header and would no
 * longer read top to bottom as the grammar in docs/language.md does.
 */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include "compiler/lexer.h"
#include "compiler/parser.h"
#include "probes/probes.h"

#define CLAUSE_ORDER_FIX \
	"clauses go in this order: from, where, group by, select, order by, limit, every, for"
#define GRAPH_ORDER_FIX \
	"a graph query is: from SOURCES [where EXPR] graph [sample P%%] [every D] [for D]"

struct parser {
	struct lexer lx;
	struct token cur; /* the look-ahead token */
	struct token prev; /* the token consumed last */
	struct ast_query *q;
	struct diag_list *dl;
	int depth;
	bool failed;
	bool nomem;
};

enum clause {
	CL_NONE,
	CL_WHERE,
	CL_GRAPH,
	CL_GROUP,
	CL_SELECT,
	CL_ORDER,
	CL_LIMIT,
	CL_EVERY,
	CL_FOR
};

static const char *const clause_names[] = {
	[CL_NONE] = "from",	 [CL_WHERE] = "where",	 [CL_GRAPH] = "graph",
	[CL_GROUP] = "group by", [CL_SELECT] = "select", [CL_ORDER] = "order by",
	[CL_LIMIT] = "limit",	 [CL_EVERY] = "every",	 [CL_FOR] = "for",
};

/* ---- errors ---- */

static struct diag *parse_error(struct parser *p, enum diag_tag tag, struct src_loc loc,
				const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* Reports the first error only: once failed, later calls add nothing and return NULL. */
static struct diag *parse_error(struct parser *p, enum diag_tag tag, struct src_loc loc,
				const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	if (p->failed)
		return NULL;
	p->failed = true;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return diag_error(p->dl, tag, loc, "%s", msg);
}

static void parse_nomem(struct parser *p)
{
	p->failed = true;
	p->nomem = true;
}

/* How a token is shown in "found ...": its own text where it has one. */
static const char *tok_describe(const struct parser *p, const struct token *t, char *buf, size_t sz)
{
	int n = (int)(t->loc.len > 40 ? 40 : t->loc.len);
	const char *text = p->lx.src + t->loc.off;

	switch (t->kind) {
	case TOK_EOF:
		return "the end of the query";
	case TOK_NAME:
	case TOK_INT:
	case TOK_FLOAT:
	case TOK_STR:
	case TOK_PROBE:
		snprintf(buf, sz, "'%.*s%s'", n, text, t->loc.len > 40 ? "..." : "");
		return buf;
	default:
		if (lexer_tok_is_keyword(t->kind)) {
			snprintf(buf, sz, "keyword `%.*s`", n, text);
			return buf;
		}
		return lexer_tok_kind_name(t->kind);
	}
}

/* "expected WHAT, found <cur>"; silent if the lexer already reported cur. */
static struct diag *parse_expected(struct parser *p, const char *what)
{
	char buf[64];

	if (p->cur.kind == TOK_ERROR) {
		p->failed = true;
		return NULL;
	}
	return parse_error(p, DIAG_E_PARSE_EXPECTED, p->cur.loc, "expected %s, found %s", what,
			   tok_describe(p, &p->cur, buf, sizeof(buf)));
}

/* ---- tokens ---- */

static bool parse_advance(struct parser *p)
{
	if (p->failed)
		return false;
	p->prev = p->cur;
	if (lexer_next(&p->lx, &p->cur) < 0) {
		p->failed = true;
		p->nomem = p->lx.nomem;
		return false;
	}
	return true;
}

static bool parse_accept(struct parser *p, enum tok_kind k)
{
	if (p->failed || p->cur.kind != k)
		return false;
	return parse_advance(p);
}

static bool parse_expect(struct parser *p, enum tok_kind k, const char *what)
{
	if (p->failed)
		return false;
	if (p->cur.kind != k) {
		parse_expected(p, what);
		return false;
	}
	return parse_advance(p);
}

/* The kind of the token after cur, read without reporting anything. */
static enum tok_kind parse_peek(struct parser *p)
{
	struct lexer save = p->lx;
	struct token t;

	p->lx.dl = NULL;
	lexer_next(&p->lx, &t);
	p->lx = save;
	return t.kind;
}

static struct src_loc loc_join(struct src_loc a, struct src_loc b)
{
	struct src_loc r = a;

	if (b.off + b.len > a.off)
		r.len = b.off + b.len - a.off;
	return r;
}

/* ---- expressions ---- */

static struct expr *parse_expr(struct parser *p);

static struct expr *expr_new(struct parser *p, enum expr_kind kind, struct src_loc loc)
{
	struct expr *e;

	if (p->failed)
		return NULL;
	e = arena_alloc(p->q->arena, sizeof(*e));
	if (!e) {
		parse_nomem(p);
		return NULL;
	}
	e->kind = kind;
	e->loc = loc;
	e->agg_slot = -1;
	e->height = 1;
	return e;
}

/* Records a child's height in its parent and refuses a tree that grew too high. */
static bool expr_grow(struct parser *p, struct expr *parent, const struct expr *child)
{
	if (!child)
		return true;
	if (child->height + 1 > parent->height)
		parent->height = child->height + 1;
	if (parent->height > PARSE_MAX_HEIGHT) {
		struct diag *d =
			parse_error(p, DIAG_E_PARSE_DEPTH, parent->loc,
				    "expression is more than %d levels deep", PARSE_MAX_HEIGHT);
		diag_fix(d, "split it, or use `in (...)` instead of long chains of `or`");
		return false;
	}
	return true;
}

static struct expr *expr_binary(struct parser *p, enum expr_kind kind, enum expr_op op,
				struct expr *l, struct expr *r)
{
	struct expr *e;

	if (!l || !r)
		return NULL;
	e = expr_new(p, kind, loc_join(l->loc, r->loc));
	if (!e)
		return NULL;
	e->op = op;
	e->lhs = l;
	e->rhs = r;
	if (!expr_grow(p, e, l) || !expr_grow(p, e, r))
		return NULL;
	return e;
}

static bool parse_enter(struct parser *p)
{
	if (p->failed)
		return false;
	if (++p->depth > PARSE_MAX_DEPTH) {
		struct diag *d =
			parse_error(p, DIAG_E_PARSE_DEPTH, p->cur.loc,
				    "expression nested more than %d deep", PARSE_MAX_DEPTH);
		diag_fix(d, "remove redundant parentheses or split the expression");
		p->depth--;
		return false;
	}
	return true;
}

static void parse_leave(struct parser *p)
{
	p->depth--;
}

/* A comma-separated list of expressions up to ')' (consumed); cur is just past '('. */
static int parse_args(struct parser *p, struct expr *e, const char *what)
{
	struct expr **v = NULL;
	int cap = 0;

	if (p->cur.kind == TOK_RPAREN)
		return parse_advance(p) ? 0 : -1;
	for (;;) {
		struct expr *a;

		if (e->nargs == PARSE_MAX_ARGS) {
			struct diag *d = parse_error(p, DIAG_E_TOO_MANY, p->cur.loc,
						     "more than %d %s", PARSE_MAX_ARGS, what);
			diag_fix(d, "split the list");
			return -1;
		}
		a = parse_expr(p);
		if (!a)
			return -1;
		if (e->nargs == cap) {
			struct expr **nv;

			cap = cap ? cap * 2 : 4;
			nv = arena_alloc(p->q->arena, (size_t)cap * sizeof(*nv));
			if (!nv) {
				parse_nomem(p);
				return -1;
			}
			if (e->nargs)
				memcpy(nv, v, (size_t)e->nargs * sizeof(*nv));
			v = nv;
			e->args = v;
		}
		v[e->nargs++] = a;
		if (!expr_grow(p, e, a))
			return -1;
		if (parse_accept(p, TOK_COMMA))
			continue;
		if (p->failed)
			return -1;
		if (p->cur.kind != TOK_RPAREN) {
			parse_expected(p, "',' or ')'");
			return -1;
		}
		e->loc = loc_join(e->loc, p->cur.loc);
		return parse_advance(p) ? 0 : -1;
	}
}

/* cast(EXPR as struct NAME) or cast(EXPR as union NAME); cur is the '(' after `cast`. */
static struct expr *parse_cast(struct parser *p, struct src_loc loc)
{
	struct expr *e = expr_new(p, EXPR_CAST, loc), *a;
	bool is_union;

	if (!e || !parse_advance(p))
		return NULL;
	a = parse_expr(p);
	if (!a || !parse_expect(p, TOK_AS, "`as` (cast(EXPR as struct NAME))"))
		return NULL;
	if (p->cur.kind != TOK_NAME ||
	    (strcmp(p->cur.sval, "struct") != 0 && strcmp(p->cur.sval, "union") != 0)) {
		diag_fix(parse_expected(p, "`struct` or `union`"),
			 "write cast(EXPR as struct NAME), e.g. cast(args.sk as struct sock)");
		return NULL;
	}
	is_union = strcmp(p->cur.sval, "union") == 0;
	if (!parse_advance(p))
		return NULL;
	if (p->cur.kind != TOK_NAME) {
		parse_expected(p, is_union ? "a union name" : "a struct name");
		return NULL;
	}
	e->sval = p->cur.sval;
	e->ival = is_union;
	e->lhs = a;
	if (!expr_grow(p, e, a) || !parse_advance(p))
		return NULL;
	if (p->cur.kind != TOK_RPAREN) {
		parse_expected(p, "')'");
		return NULL;
	}
	e->loc = loc_join(e->loc, p->cur.loc);
	return parse_advance(p) ? e : NULL;
}

static struct expr *parse_primary(struct parser *p)
{
	struct token t = p->cur;
	struct expr *e;

	switch (t.kind) {
	case TOK_INT:
		e = expr_new(p, EXPR_INT, t.loc);
		if (!e)
			return NULL;
		e->ival = t.ival;
		e->unit = t.unit;
		parse_advance(p);
		return p->failed ? NULL : e;
	case TOK_FLOAT:
		e = expr_new(p, EXPR_FLOAT, t.loc);
		if (!e)
			return NULL;
		e->fval = t.fval;
		parse_advance(p);
		return p->failed ? NULL : e;
	case TOK_STR:
		e = expr_new(p, EXPR_STR, t.loc);
		if (!e)
			return NULL;
		e->sval = t.sval;
		parse_advance(p);
		return p->failed ? NULL : e;
	case TOK_NAME:
		if (!parse_advance(p))
			return NULL;
		if (p->cur.kind != TOK_LPAREN) {
			e = expr_new(p, EXPR_NAME, t.loc);
			if (e)
				e->sval = t.sval;
			return e;
		}
		if (strcasecmp(t.sval, "cast") == 0)
			return parse_cast(p, t.loc);
		/* Nesting is counted by parse_expr(), once per level of parentheses. */
		e = expr_new(p, EXPR_CALL, t.loc);
		if (!e)
			return NULL;
		e->sval = t.sval;
		if (!parse_advance(p) || parse_args(p, e, "arguments") < 0)
			return NULL;
		return e;
	case TOK_LPAREN:
		if (!parse_advance(p))
			return NULL;
		e = parse_expr(p);
		if (e && !parse_expect(p, TOK_RPAREN, "')'"))
			e = NULL;
		return e;
	default:
		parse_expected(p, "an expression");
		return NULL;
	}
}

static struct expr *parse_postfix(struct parser *p)
{
	struct expr *e = parse_primary(p);

	while (e && p->cur.kind == TOK_DOT) {
		struct expr *m;
		struct token t;

		if (!parse_advance(p))
			return NULL;
		t = p->cur;
		/* Any word may follow '.': tracepoint fields can be named like keywords. */
		if (t.kind != TOK_NAME && !lexer_tok_is_keyword(t.kind)) {
			parse_expected(p, "a field name after '.'");
			return NULL;
		}
		m = expr_new(p, EXPR_MEMBER, loc_join(e->loc, t.loc));
		if (!m)
			return NULL;
		m->lhs = e;
		m->sval = t.kind == TOK_NAME ?
				  t.sval :
				  arena_strndup(p->q->arena, p->lx.src + t.loc.off, t.loc.len);
		if (!m->sval) {
			parse_nomem(p);
			return NULL;
		}
		if (!expr_grow(p, m, e) || !parse_advance(p))
			return NULL;
		if (p->cur.kind == TOK_LPAREN) {
			/* `start.kstack(8)`: a call on a member; sema allows only the start-side
			 * stacks of a span (sema_stacks.c) */
			m->kind = EXPR_CALL;
			if (!parse_advance(p) || parse_args(p, m, "arguments") < 0)
				return NULL;
		}
		e = m;
	}
	return e;
}

static struct expr *parse_unary(struct parser *p)
{
	struct src_loc loc = p->cur.loc;
	struct expr *e, *u;

	if (p->cur.kind != TOK_MINUS)
		return parse_postfix(p);
	if (!parse_enter(p))
		return NULL;
	parse_advance(p);
	e = parse_unary(p);
	parse_leave(p);
	if (!e)
		return NULL;
	/* Negative literals are folded, so `-1` is one constant, as users read it. */
	if (e->kind == EXPR_INT || e->kind == EXPR_FLOAT) {
		e->ival = -e->ival;
		e->fval = -e->fval;
		e->loc = loc_join(loc, e->loc);
		return e;
	}
	u = expr_new(p, EXPR_UNARY, loc_join(loc, e->loc));
	if (!u)
		return NULL;
	u->op = OP_NEG;
	u->lhs = e;
	return expr_grow(p, u, e) ? u : NULL;
}

static struct expr *parse_mul(struct parser *p)
{
	struct expr *l = parse_unary(p);

	while (l) {
		enum expr_op op = p->cur.kind == TOK_STAR    ? OP_MUL :
				  p->cur.kind == TOK_SLASH   ? OP_DIV :
				  p->cur.kind == TOK_PERCENT ? OP_MOD :
							       OP_NONE;

		if (op == OP_NONE || !parse_advance(p))
			break;
		l = expr_binary(p, EXPR_BINARY, op, l, parse_unary(p));
	}
	return p->failed ? NULL : l;
}

static struct expr *parse_add(struct parser *p)
{
	struct expr *l = parse_mul(p);

	while (l) {
		enum expr_op op = p->cur.kind == TOK_PLUS  ? OP_ADD :
				  p->cur.kind == TOK_MINUS ? OP_SUB :
							     OP_NONE;

		if (op == OP_NONE || !parse_advance(p))
			break;
		l = expr_binary(p, EXPR_BINARY, op, l, parse_mul(p));
	}
	return p->failed ? NULL : l;
}

static enum expr_op cmp_op(enum tok_kind k)
{
	switch (k) {
	case TOK_EQ:
		return OP_EQ;
	case TOK_NE:
		return OP_NE;
	case TOK_LT:
		return OP_LT;
	case TOK_LE:
		return OP_LE;
	case TOK_GT:
		return OP_GT;
	case TOK_GE:
		return OP_GE;
	default:
		return OP_NONE;
	}
}

/* comparison = sum [ cmpop sum | ["not"] "like" sum | ["not"] "in" "(" expr {"," expr} ")" ]
 * Non-associative: `a < b < c` is refused rather than read as `(a < b) < c`. */
static struct expr *parse_cmp(struct parser *p)
{
	struct expr *l = parse_add(p), *e;
	struct src_loc not_loc = p->cur.loc;
	bool negate = false;
	enum expr_op op;

	if (!l)
		return NULL;
	op = cmp_op(p->cur.kind);
	if (op != OP_NONE) {
		parse_advance(p);
		e = expr_binary(p, EXPR_BINARY, op, l, parse_add(p));
	} else {
		if (p->cur.kind == TOK_NOT) {
			enum tok_kind next = parse_peek(p);

			if (next != TOK_LIKE && next != TOK_IN)
				return l;
			negate = true;
			parse_advance(p);
		}
		if (p->cur.kind == TOK_LIKE) {
			parse_advance(p);
			e = expr_binary(p, EXPR_LIKE, OP_NONE, l, parse_add(p));
		} else if (p->cur.kind == TOK_IN) {
			parse_advance(p);
			e = expr_new(p, EXPR_IN, l->loc);
			if (!e || !parse_expect(p, TOK_LPAREN, "'(' after `in`"))
				return NULL;
			e->lhs = l;
			if (!expr_grow(p, e, l))
				return NULL;
			if (p->cur.kind == TOK_RPAREN) {
				parse_expected(p, "a value in the list");
				return NULL;
			}
			if (parse_args(p, e, "items in the list") < 0)
				return NULL;
		} else {
			return l;
		}
	}
	if (!e)
		return NULL;
	if (negate) {
		struct expr *n = expr_new(p, EXPR_UNARY, loc_join(not_loc, e->loc));

		if (!n)
			return NULL;
		n->op = OP_NOT;
		n->lhs = e;
		if (!expr_grow(p, n, e))
			return NULL;
		/* The tree says not(l like r); keep the place where the user wrote it. */
		n->loc = loc_join(l->loc, e->loc);
		e = n;
	}
	if (cmp_op(p->cur.kind) != OP_NONE || p->cur.kind == TOK_LIKE || p->cur.kind == TOK_IN) {
		char buf[64];
		struct diag *d =
			parse_error(p, DIAG_E_PARSE_EXPECTED, p->cur.loc,
				    "comparisons do not chain: found %s after a comparison",
				    tok_describe(p, &p->cur, buf, sizeof(buf)));

		diag_fix(d, "join two comparisons with `and`, e.g. a < b and b < c");
		return NULL;
	}
	return e;
}

static struct expr *parse_not(struct parser *p)
{
	struct src_loc loc = p->cur.loc;
	struct expr *e, *n;

	if (p->cur.kind != TOK_NOT)
		return parse_cmp(p);
	if (!parse_enter(p))
		return NULL;
	parse_advance(p);
	e = parse_not(p);
	parse_leave(p);
	if (!e)
		return NULL;
	n = expr_new(p, EXPR_UNARY, loc_join(loc, e->loc));
	if (!n)
		return NULL;
	n->op = OP_NOT;
	n->lhs = e;
	return expr_grow(p, n, e) ? n : NULL;
}

static struct expr *parse_and(struct parser *p)
{
	struct expr *l = parse_not(p);

	while (l && p->cur.kind == TOK_AND) {
		if (!parse_advance(p))
			return NULL;
		l = expr_binary(p, EXPR_BINARY, OP_AND, l, parse_not(p));
	}
	return p->failed ? NULL : l;
}

static struct expr *parse_or(struct parser *p)
{
	struct expr *l = parse_and(p);

	while (l && p->cur.kind == TOK_OR) {
		if (!parse_advance(p))
			return NULL;
		l = expr_binary(p, EXPR_BINARY, OP_OR, l, parse_and(p));
	}
	return p->failed ? NULL : l;
}

static struct expr *parse_expr(struct parser *p)
{
	struct expr *e;

	if (!parse_enter(p))
		return NULL;
	e = parse_or(p);
	parse_leave(p);
	return p->failed ? NULL : e;
}

/* ---- probes ---- */

static struct src_loc loc_sub(struct src_loc loc, size_t off, size_t len)
{
	/* Probe text holds no newline, so a part's column is the probe's plus its offset. */
	struct src_loc r = { loc.off + (uint32_t)off, (uint32_t)len, loc.line,
			     loc.col + (uint32_t)off };
	return r;
}

static void providers_fix(struct diag *d, const char *word)
{
	const char *cands[2 * PROBE__COUNT + 2], *near[4];
	char all[256] = "";
	int n = 0, nn;

	for (int i = 0; probe_providers[i]; i++) {
		const struct probe_provider *pv = probe_providers[i];
		size_t len = strlen(all);

		cands[n++] = pv->name;
		if (pv->alias)
			cands[n++] = pv->alias;
		snprintf(all + len, sizeof(all) - len, "%s%s%s%s%s", len ? ", " : "", pv->name,
			 pv->alias ? " (" : "", pv->alias ? pv->alias : "", pv->alias ? ")" : "");
	}
	nn = word ? diag_near(word, cands, n, near, 4) : 0;
	if (nn == 1)
		diag_fix(d, "did you mean: %s? providers: %s", near[0], all);
	else if (nn > 1)
		diag_fix(d, "did you mean: %s%s%s? providers: %s", near[0], nn > 1 ? ", " : "",
			 near[1], all);
	else
		diag_fix(d, "providers: %s", all);
}

static bool provider_near(const char *word)
{
	const char *cands[2 * PROBE__COUNT + 2], *near[1];
	int n = 0;

	for (int i = 0; probe_providers[i]; i++) {
		cands[n++] = probe_providers[i]->name;
		if (probe_providers[i]->alias)
			cands[n++] = probe_providers[i]->alias;
	}
	return strlen(word) >= 3 && diag_near(word, cands, n, near, 1) > 0;
}

static bool word_is_keyword(const char *w)
{
	for (int k = TOK_FROM; k <= TOK_IN; k++)
		if (strcasecmp(w, lexer_keyword_text((enum tok_kind)k)) == 0)
			return true;
	return false;
}

/* "+OFF" in decimal or 0x hex; false if malformed. */
static bool parse_offset(const char *s, uint64_t *out)
{
	uint64_t v = 0;
	int base = 10;

	if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
		base = 16;
		s += 2;
	}
	if (!*s)
		return false;
	for (; *s; s++) {
		int d;

		if (isdigit((unsigned char)*s))
			d = *s - '0';
		else if (base == 16 && isxdigit((unsigned char)*s))
			d = tolower((unsigned char)*s) - 'a' + 10;
		else
			return false;
		if (v > (UINT64_MAX - (uint64_t)d) / (uint64_t)base)
			return false;
		v = v * (uint64_t)base + (uint64_t)d;
	}
	*out = v;
	return true;
}

/* Splits raw probe text into provider, parts and +offset (see the grammar in
 * docs/language.md).  `after` names what came before it, for messages. */
static int probe_split(struct parser *p, const struct token *t, struct probe_spec *ps,
		       const char *after)
{
	const char *text = t->sval, *colon = strchr(text, ':');
	const struct probe_provider *pv;
	char prov[64];
	size_t plen, off;
	struct diag *d;
	int nparts = 0;
	char *rest;

	ps->text = t->sval;
	ps->loc = t->loc;
	if (!colon) {
		if (!text[0] || word_is_keyword(text)) {
			char buf[64];

			if (!text[0]) {
				struct lexer save = p->lx;
				struct token nt;

				p->lx.dl = NULL;
				lexer_next(&p->lx, &nt);
				p->lx = save;
				nt.loc.off = t->loc.off;
				d = parse_error(p, DIAG_E_PARSE_PROBE, t->loc,
						"expected a probe after %s, found %s", after,
						nt.kind == TOK_EOF ? "the end of the query" :
								     lexer_tok_kind_name(nt.kind));
			} else {
				d = parse_error(p, DIAG_E_PARSE_PROBE, t->loc,
						"expected a probe after %s, found keyword `%s`",
						after, text);
			}
			(void)buf;
			diag_fix(d, "a probe is PROVIDER:..., e.g. syscall:read or "
				    "tracepoint:sched:sched_switch");
			return -1;
		}
		pv = probe_provider_find(text);
		if (pv) {
			d = parse_error(p, DIAG_E_PARSE_PROBE, t->loc,
					"probe '%s' names a provider but no probe", text);
			diag_fix(d, "write %s", pv->usage);
			return -1;
		}
		if (provider_near(text)) {
			d = parse_error(p, DIAG_E_PROBE_PROVIDER, t->loc,
					"unknown probe provider '%s'", text);
			providers_fix(d, text);
			return -1;
		}
		d = parse_error(p, DIAG_E_PARSE_PROBE, t->loc, "'%s' is not a probe", text);
		diag_fix(d,
			 "a probe is PROVIDER:..., e.g. syscall:%s; providers: tracepoint (tp), "
			 "syscall, uprobe, uretprobe, usdt, kprobe, kretprobe, profile, interval, "
			 "software, hardware, kernel (graph queries)",
			 text);
		return -1;
	}

	plen = (size_t)(colon - text);
	if (plen == 0 || plen >= sizeof(prov)) {
		d = parse_error(p, DIAG_E_PROBE_PROVIDER, loc_sub(t->loc, 0, plen ? plen : 1),
				plen ? "unknown probe provider '%.*s'" :
				       "probe without a provider%.*s",
				(int)(plen > 40 ? 40 : plen), text);
		providers_fix(d, NULL);
		return -1;
	}
	/* Providers are matched case-insensitively, like keywords. */
	for (size_t i = 0; i < plen; i++)
		prov[i] = (char)tolower((unsigned char)text[i]);
	prov[plen] = '\0';
	pv = probe_provider_find(prov);
	if (!pv) {
		d = parse_error(p, DIAG_E_PROBE_PROVIDER, loc_sub(t->loc, 0, plen),
				"unknown probe provider '%.*s'", (int)plen, text);
		providers_fix(d, prov);
		return -1;
	}
	ps->kind = pv->kind;

	/* Parts: split a copy of the text after the provider at every ':'. */
	rest = arena_strdup(p->q->arena, colon + 1);
	if (!rest) {
		parse_nomem(p);
		return -1;
	}
	off = plen + 1;
	for (char *part = rest;;) {
		char *end = strchr(part, ':');
		size_t len = end ? (size_t)(end - part) : strlen(part);

		if (nparts == PROBE_MAX_PARTS || nparts == pv->max_parts) {
			d = parse_error(p, DIAG_E_PARSE_PROBE, t->loc,
					"too many parts in probe '%s': %s takes at most %d", text,
					pv->name, pv->max_parts);
			diag_fix(d, "write %s", pv->usage);
			return -1;
		}
		if (len == 0) {
			d = parse_error(p, DIAG_E_PARSE_PROBE, loc_sub(t->loc, off, 0),
					"empty part in probe '%s'", text);
			diag_fix(d, "write %s", pv->usage);
			return -1;
		}
		if (end)
			*end = '\0';
		ps->parts[nparts++] = part;

		/* '+': an offset at the end of a uprobe/kprobe function; literal in a binary's
		 * path (libstdc++.so); an error anywhere else. */
		char *plus = strchr(part, '+');
		bool last = !end;
		bool is_binary = nparts == 1 && pv->max_parts > 1 &&
				 (pv->kind == PROBE_UPROBE || pv->kind == PROBE_URETPROBE ||
				  pv->kind == PROBE_USDT);

		if (plus && !is_binary) {
			size_t poff = off + (size_t)(plus - part);

			if (!last || (pv->kind != PROBE_UPROBE && pv->kind != PROBE_KPROBE)) {
				d = parse_error(p, DIAG_E_PROBE_OFFSET,
						loc_sub(t->loc, poff, len - (size_t)(plus - part)),
						"%s probes take no +offset", pv->name);
				diag_fix(d, "only uprobe:BINARY:FUNCTION+OFFSET and "
					    "kprobe:FUNCTION+OFFSET take an offset");
				return -1;
			}
			if (plus == part) {
				d = parse_error(p, DIAG_E_PARSE_PROBE, loc_sub(t->loc, off, len),
						"offset without a function in probe '%s'", text);
				diag_fix(d, "write %s", pv->usage);
				return -1;
			}
			if (!parse_offset(plus + 1, &ps->offset)) {
				d = parse_error(p, DIAG_E_PARSE_PROBE,
						loc_sub(t->loc, poff, len - (size_t)(plus - part)),
						"malformed offset '%s'", plus);
				diag_fix(d, "an offset is +DECIMAL or +0xHEX, e.g. malloc+0x10");
				return -1;
			}
			ps->has_offset = true;
			ps->offset_loc = loc_sub(t->loc, poff, len - (size_t)(plus - part));
			*plus = '\0';
		}
		if (strpbrk(part, "*?"))
			ps->wild = true;
		if (!end)
			break;
		off += len + 1;
		part = end + 1;
	}
	ps->nparts = nparts;
	if (nparts < pv->min_parts) {
		d = parse_error(p, DIAG_E_PARSE_PROBE, t->loc,
				"too few parts in probe '%s': %s takes %d%s", text, pv->name,
				pv->min_parts, pv->min_parts < pv->max_parts ? " or more" : "");
		diag_fix(d, "write %s", pv->usage);
		return -1;
	}
	return 0;
}

/* Reads a raw probe at the lexer's position (just after `from`, ',' or `span(`), splits
 * it, then reads the next token into cur. */
static int parse_probe(struct parser *p, struct probe_spec *ps, const char *after)
{
	struct token t;

	if (p->failed)
		return -1;
	if (lexer_probe_text(&p->lx, &t) < 0) {
		parse_nomem(p);
		return -1;
	}
	if (probe_split(p, &t, ps, after) < 0)
		return -1;
	p->cur = t;
	return parse_advance(p) ? 0 : -1;
}

/* What may follow a probe inside span(...): [ "where" expr ] [ "on" expr ] (lang-a). */
static int parse_span_side(struct parser *p, struct expr **where, struct expr **on)
{
	if (parse_accept(p, TOK_WHERE)) {
		*where = parse_expr(p);
		if (!*where)
			return -1;
	}
	if (p->failed)
		return -1;
	if (parse_accept(p, TOK_ON)) {
		*on = parse_expr(p);
		if (!*on)
			return -1;
	}
	if (p->failed)
		return -1;
	if (p->cur.kind == TOK_WHERE) {
		struct diag *d = parse_error(p, DIAG_E_PARSE_SPAN, p->cur.loc,
					     "a span side's `where` goes before its `on`");
		diag_fix(d, "write span(PROBE where COND on KEY, ...)");
		return -1;
	}
	return 0;
}

/* source = probe | "span" "(" side ["," side] ")"
 * side   = probe ["where" expr] ["on" expr]
 * The `on` of the end side alone keys both sides (the older span(START, END on KEY)); when the
 * start has its own `on`, the end must have one too.
 * Called with cur on the token before the source (`from` or ','). */
static int parse_source(struct parser *p, struct source *s, const char *after)
{
	struct lexer save = p->lx;
	struct token t1, t2;
	struct diag *d;

	memset(s, 0, sizeof(*s));
	p->lx.dl = NULL;
	lexer_next(&p->lx, &t1);
	if (t1.kind != TOK_SPAN) {
		p->lx = save;
		if (parse_probe(p, &s->start, after) < 0)
			return -1;
		s->loc = s->start.loc;
		return 0;
	}
	lexer_next(&p->lx, &t2);
	p->lx.dl = save.dl;
	if (t2.kind != TOK_LPAREN) {
		p->lx = save;
		d = parse_error(p, DIAG_E_PARSE_SPAN, t1.loc, "expected '(' after `span`");
		diag_fix(d, "write span(PROBE), span(START, END) or span(START, END on KEY)");
		return -1;
	}
	p->lx.failed = save.failed;
	s->is_span = true;
	if (parse_probe(p, &s->start, "`span(`") < 0)
		return -1;
	if (parse_span_side(p, &s->start_where, &s->on) < 0)
		return -1;
	if (p->cur.kind == TOK_COMMA) {
		struct src_loc end_loc;
		struct expr *end_on = NULL;

		/* cur is the ',' and the lexer stands just after it: the end probe is raw. */
		if (parse_probe(p, &s->end, "',' in span(...)") < 0)
			return -1;
		s->has_end = true;
		end_loc = s->end.loc;
		if (parse_span_side(p, &s->end_where, &end_on) < 0)
			return -1;
		if (s->on && !end_on) {
			d = parse_error(p, DIAG_E_PARSE_SPAN, end_loc,
					"the start probe has its own `on` key, and this end probe "
					"has none");
			diag_fix(d, "give each side its key: span(START on K1, END on K2), or one "
				    "key for both after the end: span(START, END on KEY)");
			return -1;
		}
		if (s->on)
			s->end_on = end_on;
		else
			s->on = end_on;
	}
	if (p->failed)
		return -1;
	if (p->cur.kind == TOK_COMMA) {
		d = parse_error(p, DIAG_E_PARSE_SPAN, p->cur.loc,
				"a span pairs at most two probes");
		diag_fix(d, "write span(START, END); list more sources after the span, "
			    "separated by commas");
		return -1;
	}
	if (p->failed)
		return -1;
	if (p->cur.kind != TOK_RPAREN) {
		char buf[64];

		if (p->cur.kind == TOK_ERROR)
			return -1;
		d = parse_error(p, DIAG_E_PARSE_SPAN, p->cur.loc,
				"expected ')' to close span(...), found %s",
				tok_describe(p, &p->cur, buf, sizeof(buf)));
		diag_fix(d, "write span(PROBE), span(START, END), span(START, END on KEY) or "
			    "span(START [where C] [on K], END [where C] [on K])");
		return -1;
	}
	s->loc = loc_join(t1.loc, p->cur.loc);
	return parse_advance(p) ? 0 : -1;
}

/* ---- clauses ---- */

static int parse_alias(struct parser *p, char **alias, struct src_loc *loc)
{
	if (!parse_accept(p, TOK_AS))
		return p->failed ? -1 : 0;
	if (p->cur.kind != TOK_NAME) {
		struct diag *d = parse_expected(p, "a name after `as`");

		if (lexer_tok_is_keyword(p->cur.kind))
			diag_fix(d, "keywords cannot be names: choose another");
		return -1;
	}
	*alias = p->cur.sval;
	*loc = p->cur.loc;
	return parse_advance(p) ? 0 : -1;
}

static int parse_group(struct parser *p)
{
	struct ast_query *q = p->q;

	if (!parse_advance(p) || !parse_expect(p, TOK_BY, "`by` after `group`"))
		return -1;
	q->groups = arena_alloc(q->arena, AST_MAX_GROUPS * sizeof(*q->groups));
	if (!q->groups) {
		parse_nomem(p);
		return -1;
	}
	do {
		struct group_key *g;
		struct src_loc at = p->cur.loc;

		if (q->ngroups == AST_MAX_GROUPS) {
			struct diag *d =
				parse_error(p, DIAG_E_TOO_MANY, at, "more than %d `group by` keys",
					    AST_MAX_GROUPS);
			diag_fix(d, "group by at most %d keys", AST_MAX_GROUPS);
			return -1;
		}
		g = &q->groups[q->ngroups];
		g->e = parse_expr(p);
		if (!g->e || parse_alias(p, &g->alias, &g->alias_loc) < 0)
			return -1;
		q->ngroups++;
	} while (parse_accept(p, TOK_COMMA));
	return p->failed ? -1 : 0;
}

/*
 * `format 'FMT'` right after the select items: a word `format` followed by a string, so a
 * field or alias called format keeps working.  Its conversions are checked by sema
 * (compiler/sema_format.c), where the columns' types are known.
 */
static int parse_format(struct parser *p)
{
	struct ast_query *q = p->q;
	struct diag *d;
	char buf[64];

	if (p->cur.kind != TOK_NAME || strcasecmp(p->cur.sval, "format") != 0)
		return 0;
	if (parse_peek(p) != TOK_STR) {
		if (parse_peek(p) == TOK_LPAREN || parse_peek(p) == TOK_DOT)
			return 0;
		if (!parse_advance(p))
			return -1;
		d = parse_error(p, DIAG_E_PARSE_EXPECTED, p->cur.loc,
				"`format` needs a string, found %s",
				tok_describe(p, &p->cur, buf, sizeof(buf)));
		diag_fix(d, "e.g. select pid, comm format '%%-6d %%s'");
		return -1;
	}
	if (!parse_advance(p))
		return -1;
	q->format = p->cur.sval;
	q->format_loc = p->cur.loc;
	return parse_advance(p) ? 0 : -1;
}

static int parse_select(struct parser *p)
{
	struct ast_query *q = p->q;

	if (!parse_advance(p))
		return -1;
	q->items = arena_alloc(q->arena, AST_MAX_ITEMS * sizeof(*q->items));
	if (!q->items) {
		parse_nomem(p);
		return -1;
	}
	do {
		struct select_item *it;
		struct src_loc at = p->cur.loc;

		if (q->nitems == AST_MAX_ITEMS) {
			struct diag *d =
				parse_error(p, DIAG_E_TOO_MANY, at,
					    "more than %d columns in `select`", AST_MAX_ITEMS);
			diag_fix(d, "select at most %d columns", AST_MAX_ITEMS);
			return -1;
		}
		it = &q->items[q->nitems];
		it->e = parse_expr(p);
		if (!it->e || parse_alias(p, &it->alias, &it->alias_loc) < 0)
			return -1;
		q->nitems++;
	} while (parse_accept(p, TOK_COMMA));
	if (p->failed)
		return -1;
	return parse_format(p);
}

static int parse_order(struct parser *p)
{
	struct ast_query *q = p->q;

	if (!parse_advance(p) || !parse_expect(p, TOK_BY, "`by` after `order`"))
		return -1;
	q->order = parse_expr(p);
	if (!q->order)
		return -1;
	q->order_loc = q->order->loc;
	if (parse_accept(p, TOK_DESC))
		q->order_desc = true;
	else
		parse_accept(p, TOK_ASC);
	return p->failed ? -1 : 0;
}

static int parse_limit(struct parser *p)
{
	struct ast_query *q = p->q;
	struct token t;

	if (!parse_advance(p))
		return -1;
	t = p->cur;
	if (t.kind != TOK_INT || t.unit != UNIT_NONE || t.ival <= 0) {
		char buf[64];
		struct diag *d;

		if (t.kind == TOK_ERROR)
			return -1;
		d = parse_error(p, DIAG_E_PARSE_LIMIT, t.loc,
				"`limit` needs a positive whole number, found %s",
				tok_describe(p, &t, buf, sizeof(buf)));
		diag_fix(d, "e.g. limit 10");
		return -1;
	}
	q->limit = t.ival;
	q->limit_loc = t.loc;
	return parse_advance(p) ? 0 : -1;
}

static int parse_window(struct parser *p, uint64_t *ns, struct src_loc *loc, const char *kw)
{
	struct token t;

	if (!parse_advance(p))
		return -1;
	t = p->cur;
	if (t.kind != TOK_INT || t.unit != UNIT_DURATION) {
		char buf[64];
		struct diag *d;

		if (t.kind == TOK_ERROR)
			return -1;
		d = parse_error(p, DIAG_E_PARSE_DURATION, t.loc, "`%s` needs a duration, found %s",
				kw, tok_describe(p, &t, buf, sizeof(buf)));
		if (t.kind == TOK_INT && t.unit == UNIT_NONE && t.ival > 0)
			diag_fix(d, "write a unit, e.g. %llds or %lldms", (long long)t.ival,
				 (long long)t.ival);
		else if (t.kind == TOK_INT && t.unit == UNIT_SIZE)
			diag_fix(d, "a size is not a duration: write a unit, e.g. 1s");
		else
			diag_fix(d, "write a unit, e.g. 1s");
		return -1;
	}
	*ns = (uint64_t)t.ival;
	*loc = t.loc;
	return parse_advance(p) ? 0 : -1;
}

/* `graph` is a keyword only where a clause may begin (a field or alias may still be called
 * graph): a name `graph` not followed by '(' or '.'. */
static bool tok_is_graph(struct parser *p)
{
	enum tok_kind next;

	if (p->cur.kind != TOK_NAME || strcasecmp(p->cur.sval, "graph") != 0)
		return false;
	next = parse_peek(p);
	return next != TOK_LPAREN && next != TOK_DOT;
}

/*
 * graph [sample NUM%]: the rate is a percentage in (0, 100], a whole or decimal number.
 */
static int parse_graph(struct parser *p)
{
	struct ast_query *q = p->q;
	struct token t;
	double pct;
	struct diag *d;
	char buf[64];

	q->graph = true;
	q->graph_loc = p->cur.loc;
	q->sample = 1.0;
	if (!parse_advance(p))
		return -1;
	if (p->cur.kind != TOK_NAME || strcasecmp(p->cur.sval, "sample") != 0)
		return 0;
	if (!parse_advance(p))
		return -1;
	t = p->cur;
	if ((t.kind != TOK_INT || t.unit != UNIT_NONE) && t.kind != TOK_FLOAT) {
		if (t.kind == TOK_ERROR)
			return -1;
		d = parse_error(p, DIAG_E_GRAPH_SAMPLE, t.loc,
				"`sample` needs a percentage, found %s",
				tok_describe(p, &t, buf, sizeof(buf)));
		diag_fix(d, "e.g. graph sample 10%%");
		return -1;
	}
	pct = t.kind == TOK_INT ? (double)t.ival : t.fval;
	if (!parse_advance(p))
		return -1;
	if (p->cur.kind != TOK_PERCENT) {
		if (p->cur.kind == TOK_ERROR)
			return -1;
		d = parse_error(p, DIAG_E_GRAPH_SAMPLE, p->cur.loc,
				"`sample %g` needs a '%%' after the number, found %s", pct,
				tok_describe(p, &p->cur, buf, sizeof(buf)));
		diag_fix(d, "write the rate as a percentage, e.g. sample %g%%", pct);
		return -1;
	}
	q->sample_loc = loc_join(t.loc, p->cur.loc);
	if (!(pct > 0 && pct <= 100)) {
		d = parse_error(p, DIAG_E_GRAPH_SAMPLE, q->sample_loc,
				"a sample rate of %g%% is outside (0%%, 100%%]", pct);
		diag_fix(d, "give a percentage above 0 and at most 100, e.g. sample 1%%");
		return -1;
	}
	q->sample = pct / 100.0;
	return parse_advance(p) ? 0 : -1;
}

static enum clause clause_of(struct parser *p)
{
	enum tok_kind k = p->cur.kind;

	if (tok_is_graph(p))
		return CL_GRAPH;
	switch (k) {
	case TOK_WHERE:
		return CL_WHERE;
	case TOK_GROUP:
		return CL_GROUP;
	case TOK_SELECT:
		return CL_SELECT;
	case TOK_ORDER:
		return CL_ORDER;
	case TOK_LIMIT:
		return CL_LIMIT;
	case TOK_EVERY:
		return CL_EVERY;
	case TOK_FOR:
		return CL_FOR;
	default:
		return CL_NONE;
	}
}

static void clause_repeat_fix(struct diag *d, enum clause cl)
{
	switch (cl) {
	case CL_WHERE:
		diag_fix(d, "give one `where` and join the conditions with `and`");
		break;
	case CL_GROUP:
		diag_fix(d, "give one `group by` and separate the keys with ','");
		break;
	case CL_SELECT:
		diag_fix(d, "give one `select` and separate the columns with ','");
		break;
	default:
		diag_fix(d, "give `%s` once", clause_names[cl]);
		break;
	}
}

/* A word after the query that looks like a misspelt clause keyword, or NULL. */
static const char *clause_near(struct parser *p)
{
	static const char *const words[] = { "from",  "where", "group", "select",
					     "order", "limit", "every", "for" };
	const char *near[1];
	enum tok_kind next;

	if (p->cur.kind != TOK_NAME || strlen(p->cur.sval) < 3)
		return NULL;
	next = parse_peek(p);
	if (next == TOK_LPAREN || next == TOK_DOT)
		return NULL;
	if (diag_near(p->cur.sval, words, 8, near, 1) == 1 &&
	    diag_edit_distance(p->cur.sval, near[0]) <= 2)
		return near[0];
	return NULL;
}

static int parse_clauses(struct parser *p)
{
	struct ast_query *q = p->q;
	enum clause last = CL_NONE;
	bool have_select = false;
	struct diag *d;
	const char *near;
	char buf[64];

	while (!p->failed) {
		enum clause cl = clause_of(p);
		int err;

		if (p->cur.kind == TOK_FROM) {
			d = parse_error(p, DIAG_E_PARSE_CLAUSE_ORDER, p->cur.loc,
					"a second `from`");
			diag_fix(d, "list every source after one `from`, separated by ','");
			return -1;
		}
		if (cl == CL_NONE)
			break;
		if ((q->graph && cl >= CL_GROUP && cl <= CL_LIMIT) ||
		    (cl == CL_GRAPH && last >= CL_GROUP && last <= CL_LIMIT)) {
			d = parse_error(p, DIAG_E_GRAPH_CLAUSE, p->cur.loc,
					"`%s` and `%s` in one query",
					clause_names[cl == CL_GRAPH ? last : cl], "graph");
			diag_fix(d, "a graph query records tasks, events and edges instead of "
				    "computing columns; " GRAPH_ORDER_FIX);
			return -1;
		}
		if (cl <= last) {
			if (cl == last) {
				d = parse_error(p, DIAG_E_PARSE_CLAUSE_ORDER, p->cur.loc,
						"a second `%s` clause", clause_names[cl]);
				clause_repeat_fix(d, cl);
			} else {
				d = parse_error(p, DIAG_E_PARSE_CLAUSE_ORDER, p->cur.loc,
						"`%s` after `%s`", clause_names[cl],
						clause_names[last]);
				diag_fix(d, CLAUSE_ORDER_FIX);
			}
			return -1;
		}
		last = cl;
		switch (cl) {
		case CL_WHERE:
			err = parse_advance(p) && (q->where = parse_expr(p)) ? 0 : -1;
			break;
		case CL_GRAPH:
			err = parse_graph(p);
			break;
		case CL_GROUP:
			err = parse_group(p);
			break;
		case CL_SELECT:
			err = parse_select(p);
			have_select = true;
			break;
		case CL_ORDER:
			err = parse_order(p);
			break;
		case CL_LIMIT:
			err = parse_limit(p);
			break;
		case CL_EVERY:
			err = parse_window(p, &q->every_ns, &q->every_loc, "every");
			break;
		case CL_FOR:
			err = parse_window(p, &q->for_ns, &q->for_loc, "for");
			break;
		default:
			err = -1;
			break;
		}
		if (err < 0 || p->failed)
			return -1;
	}
	if (p->failed)
		return -1;
	if (p->cur.kind == TOK_EOF) {
		if (!have_select && !q->graph) {
			d = parse_error(p, DIAG_E_PARSE_NO_SELECT, p->cur.loc,
					"the query has no `select` clause");
			diag_fix(d, "say what to compute, e.g. `select count()`");
			return -1;
		}
		return 0;
	}
	near = clause_near(p);
	if (near) {
		d = parse_error(p, DIAG_E_PARSE_EXPECTED, p->cur.loc, "expected a clause, found %s",
				tok_describe(p, &p->cur, buf, sizeof(buf)));
		diag_fix(d, "did you mean: %s", near);
		return -1;
	}
	if (!have_select && !q->graph) {
		d = parse_error(p, DIAG_E_PARSE_NO_SELECT, p->cur.loc,
				"expected `select`, found %s",
				tok_describe(p, &p->cur, buf, sizeof(buf)));
		diag_fix(d, last == CL_NONE ? "after the sources come `where`, `group by` or "
					      "`select`, e.g. from syscall:read select count()" :
					      CLAUSE_ORDER_FIX);
		return -1;
	}
	d = parse_error(p, DIAG_E_PARSE_TRAILING, p->cur.loc,
			"unexpected %s after the end of the query",
			tok_describe(p, &p->cur, buf, sizeof(buf)));
	if ((last == CL_SELECT || last == CL_GROUP) && p->cur.kind != TOK_RPAREN)
		diag_fix(d, "separate columns with ','; " CLAUSE_ORDER_FIX);
	else
		diag_fix(d, CLAUSE_ORDER_FIX);
	return -1;
}

static int parse_sources(struct parser *p)
{
	struct ast_query *q = p->q;
	const char *after = "`from`";

	q->sources = arena_alloc(q->arena, AST_MAX_SOURCES * sizeof(*q->sources));
	if (!q->sources) {
		parse_nomem(p);
		return -1;
	}
	for (;;) {
		struct source s;

		if (parse_source(p, &s, after) < 0)
			return -1;
		if (q->nsources == AST_MAX_SOURCES) {
			struct diag *d = parse_error(p, DIAG_E_TOO_MANY, s.loc,
						     "more than %d sources", AST_MAX_SOURCES);
			diag_fix(d, "use a wildcard (syscall:read*) or split the query");
			return -1;
		}
		q->sources[q->nsources++] = s;
		if (p->cur.kind != TOK_COMMA)
			return p->failed ? -1 : 0;
		/* cur is the ',': the next probe is read raw from just after it. */
		after = "','";
	}
}

/* `using 'FILE.bpf.c'` before `from`: the extension file (compiler/ext.h). */
static int parse_using(struct parser *p)
{
	if (!parse_advance(p))
		return -1;
	if (p->cur.kind != TOK_STR) {
		struct diag *d = parse_error(p, DIAG_E_EXT_FILE, p->cur.loc,
					     "`using` needs a file name in quotes");

		diag_fix(d, "e.g. using 'parse_http.bpf.c' from uprobe:...");
		return -1;
	}
	p->q->using_path = p->cur.sval;
	p->q->using_loc = p->cur.loc;
	return parse_advance(p) ? 0 : -1;
}

struct ast_query *parse_query(const char *src, struct diag_list *dl)
{
	struct parser p;
	struct diag *d;

	memset(&p, 0, sizeof(p));
	p.dl = dl;
	p.q = ast_query_new();
	if (!p.q) {
		errno = ENOMEM;
		return NULL;
	}
	lexer_init(&p.lx, src, dl, p.q->arena);
	if (lexer_next(&p.lx, &p.cur) < 0) {
		p.failed = true;
		p.nomem = p.lx.nomem;
		goto out_free_query;
	}
	p.q->loc = p.cur.loc;
	if (p.cur.kind == TOK_EOF) {
		d = parse_error(&p, DIAG_E_PARSE_EMPTY, p.cur.loc, "the query is empty");
		diag_fix(d, "e.g. from syscall:read select count()");
		goto out_free_query;
	}
	if (p.cur.kind == TOK_NAME && strcasecmp(p.cur.sval, "using") == 0 && parse_using(&p) < 0)
		goto out_free_query;
	if (p.cur.kind != TOK_FROM) {
		char buf[64];

		d = parse_error(&p, DIAG_E_PARSE_NO_FROM, p.cur.loc,
				"a query begins with `from`, found %s",
				tok_describe(&p, &p.cur, buf, sizeof(buf)));
		diag_fix(d, p.cur.kind == TOK_SELECT ?
				    "write the source first: from PROBE ... select ..." :
				    "e.g. from syscall:read select count()");
		goto out_free_query;
	}
	if (parse_sources(&p) < 0 || parse_clauses(&p) < 0)
		goto out_free_query;
	p.q->loc = loc_join(p.q->loc, p.prev.loc);
	return p.q;

out_free_query:
	ast_query_free(p.q);
	errno = p.nomem ? ENOMEM : EINVAL;
	return NULL;
}
