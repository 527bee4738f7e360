// SPDX-License-Identifier: Apache-2.0
/*
 * The query tree's memory and its printers.  Every node and string of one query lives in
 * one arena: a list of zeroed chunks handed out by bumping a pointer, freed all at once by
 * ast_query_free(), so no pass ever frees a node and error paths cannot leak.  The printers
 * serve `weft explain --dump=parse|sema` and the tests: expr_print() writes an expression
 * back as query text with every binary operation parenthesized (so tests can check
 * precedence), ast_dump() writes an indented tree including what sema resolved.
 */
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "compiler/ast.h"

#define ARENA_CHUNK 8192
#define ARENA_ALIGN 16

struct arena_chunk {
	struct arena_chunk *next;
	size_t size, used;
	_Alignas(ARENA_ALIGN) unsigned char data[];
};

struct arena {
	struct arena_chunk *head;
};

struct arena *arena_new(void)
{
	return calloc(1, sizeof(struct arena));
}

void arena_free(struct arena *a)
{
	struct arena_chunk *c, *next;

	if (!a)
		return;
	for (c = a->head; c; c = next) {
		next = c->next;
		free(c);
	}
	free(a);
}

void *arena_alloc(struct arena *a, size_t n)
{
	struct arena_chunk *c = a ? a->head : NULL;
	size_t need;
	void *p;

	if (!a)
		return NULL;
	if (n == 0)
		n = 1;
	if (n > SIZE_MAX / 2) {
		errno = ENOMEM;
		return NULL;
	}
	need = (n + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);
	if (!c || c->size - c->used < need) {
		size_t size = need > ARENA_CHUNK ? need : ARENA_CHUNK;

		/* calloc: every allocation comes back zeroed, as the header promises. */
		c = calloc(1, sizeof(*c) + size);
		if (!c)
			return NULL;
		c->size = size;
		/* A big one-off block goes behind the head so the head's free space is kept. */
		if (a->head && size > ARENA_CHUNK) {
			c->next = a->head->next;
			a->head->next = c;
		} else {
			c->next = a->head;
			a->head = c;
		}
	}
	p = c->data + c->used;
	c->used += need;
	return p;
}

char *arena_strndup(struct arena *a, const char *s, size_t n)
{
	char *d;

	if (!s)
		return NULL;
	n = strnlen(s, n);
	d = arena_alloc(a, n + 1);
	if (!d)
		return NULL;
	memcpy(d, s, n);
	d[n] = '\0';
	return d;
}

char *arena_strdup(struct arena *a, const char *s)
{
	return s ? arena_strndup(a, s, strlen(s)) : NULL;
}

struct ast_query *ast_query_new(void)
{
	struct ast_query *q = calloc(1, sizeof(*q));

	if (!q)
		return NULL;
	q->arena = arena_new();
	if (!q->arena) {
		free(q);
		errno = ENOMEM;
		return NULL;
	}
	return q;
}

void ast_query_free(struct ast_query *q)
{
	if (!q)
		return;
	/* Probe sets belong to sema: sema_release() frees them before this. */
	arena_free(q->arena);
	free(q);
}

/* ---- names ---- */

const char *builtin_name(enum builtin b)
{
	static const char *const names[BI__COUNT] = {
		[BI_NONE] = "none",	  [BI_TIME] = "time",	      [BI_PID] = "pid",
		[BI_TID] = "tid",	  [BI_UID] = "uid",	      [BI_COMM] = "comm",
		[BI_CPU] = "cpu",	  [BI_CGROUP] = "cgroup",     [BI_HOST] = "host",
		[BI_PROBE] = "probe",	  [BI_USTACK] = "ustack",     [BI_KSTACK] = "kstack",
		[BI_RETVAL] = "retval",	  [BI_DURATION] = "duration", [BI_ARG] = "arg",
		[BI_FIELD] = "field",	  [BI_ALIAS] = "alias",	      [BI_CURTASK] = "curtask",
		[BI_KMEMBER] = "kmember", [BI_WALLTIME] = "walltime", [BI_END_FIELD] = "end_field",
	};

	if ((unsigned)b >= BI__COUNT || !names[b])
		return "?";
	return names[b];
}

const char *func_name(enum func f)
{
	static const char *const names[FN__COUNT] = {
		[FN_NONE] = "none",	    [FN_STR] = "str",		[FN_LOG2] = "log2",
		[FN_BUCKET] = "bucket",	    [FN_USYM] = "usym",		[FN_KSYM] = "ksym",
		[FN_NTOHS] = "ntohs",	    [FN_NTOHL] = "ntohl",	[FN_COUNT] = "count",
		[FN_SUM] = "sum",	    [FN_MIN] = "min",		[FN_MAX] = "max",
		[FN_AVG] = "avg",	    [FN_STDDEV] = "stddev",	[FN_HIST] = "hist",
		[FN_LHIST] = "lhist",	    [FN_QUANTILE] = "quantile", [FN_P50] = "p50",
		[FN_P90] = "p90",	    [FN_P99] = "p99",		[FN_P999] = "p999",
		[FN_DISTINCT] = "distinct", [FN_SYSNAME] = "sysname",	[FN_SIGNAME] = "signame",
		[FN_ERRNAME] = "errname",   [FN_ENUMNAME] = "enumname", [FN_UNIT] = "unit",
		[FN_NTOP] = "ntop",	    [FN_SOCKPORT] = "sockport", [FN_JOIN] = "join",
	};

	if ((unsigned)f >= FN__COUNT || !names[f])
		return "?";
	return names[f];
}

const char *expr_op_name(enum expr_op op)
{
	switch (op) {
	case OP_NONE:
		return "";
	case OP_ADD:
		return "+";
	case OP_SUB:
		return "-";
	case OP_MUL:
		return "*";
	case OP_DIV:
		return "/";
	case OP_MOD:
		return "%";
	case OP_EQ:
		return "=";
	case OP_NE:
		return "!=";
	case OP_LT:
		return "<";
	case OP_LE:
		return "<=";
	case OP_GT:
		return ">";
	case OP_GE:
		return ">=";
	case OP_AND:
		return "and";
	case OP_OR:
		return "or";
	case OP_NOT:
		return "not";
	case OP_NEG:
		return "-";
	}
	return "?";
}

const char *type_name(const struct type *t, char *buf, size_t sz)
{
	if (!buf || sz == 0)
		return "";
	switch (t ? t->kind : TY_NONE) {
	case TY_NONE:
		snprintf(buf, sz, "none");
		break;
	case TY_INT:
		snprintf(buf, sz, "%s%u", t->is_signed ? "s" : "u", (unsigned)t->size * 8);
		break;
	case TY_BOOL:
		snprintf(buf, sz, "bool");
		break;
	case TY_STR:
		snprintf(buf, sz, "str[%u]", (unsigned)t->size);
		break;
	case TY_PTR:
		snprintf(buf, sz, "%s", t->user ? "uptr" : "kptr");
		break;
	case TY_STACK:
		snprintf(buf, sz, "%s", t->user ? "ustack" : "kstack");
		break;
	case TY_FLOAT:
		snprintf(buf, sz, "float");
		break;
	case TY_AGG:
		snprintf(buf, sz, "agg");
		break;
	case TY_STRUCT:
		snprintf(buf, sz, "struct");
		break;
	case TY_INET:
		snprintf(buf, sz, "inet");
		break;
	default:
		snprintf(buf, sz, "?");
		break;
	}
	return buf;
}

/* ---- expr_print ---- */

static void str_print(const char *s, FILE *out)
{
	fputc('\'', out);
	for (; s && *s; s++) {
		switch (*s) {
		case '\\':
			fputs("\\\\", out);
			break;
		case '\'':
			fputs("\\'", out);
			break;
		case '\n':
			fputs("\\n", out);
			break;
		case '\t':
			fputs("\\t", out);
			break;
		default:
			fputc(*s, out);
		}
	}
	fputc('\'', out);
}

/* An integer as it would be written: with the largest unit that divides it exactly. */
static void int_print(int64_t v, enum int_unit unit, FILE *out)
{
	static const struct {
		const char *name;
		int64_t scale;
	} dur[] = {
		{ "h", 3600000000000LL }, { "m", 60000000000LL }, { "s", 1000000000LL },
		{ "ms", 1000000LL },	  { "us", 1000LL },	  { "ns", 1LL },
	},
	  size[] = {
		  { "TiB", 1LL << 40 }, { "GiB", 1LL << 30 }, { "MiB", 1LL << 20 },
		  { "KiB", 1LL << 10 }, { "B", 1LL },
	  };
	int n = 0;

	if (unit == UNIT_DURATION)
		n = sizeof(dur) / sizeof(dur[0]);
	else if (unit == UNIT_SIZE)
		n = sizeof(size) / sizeof(size[0]);
	for (int i = 0; i < n; i++) {
		const char *name = unit == UNIT_DURATION ? dur[i].name : size[i].name;
		int64_t scale = unit == UNIT_DURATION ? dur[i].scale : size[i].scale;

		if (v != 0 && v % scale == 0) {
			fprintf(out, "%" PRId64 "%s", v / scale, name);
			return;
		}
	}
	fprintf(out, "%" PRId64 "%s", v,
		unit == UNIT_DURATION ? "ns" :
		unit == UNIT_SIZE     ? "B" :
					"");
}

void expr_print(const struct expr *e, FILE *out)
{
	if (!e) {
		fputs("<null>", out);
		return;
	}
	switch (e->kind) {
	case EXPR_INT:
		int_print(e->ival, e->unit, out);
		break;
	case EXPR_FLOAT: {
		/* The shortest text that reads back as the same double. */
		char buf[40];

		for (int prec = 6; prec <= 17; prec++) {
			snprintf(buf, sizeof(buf), "%.*g", prec, e->fval);
			if (strtod(buf, NULL) == e->fval)
				break;
		}
		fputs(buf, out);
		break;
	}
	case EXPR_STR:
		str_print(e->sval, out);
		break;
	case EXPR_NAME:
		fputs(e->sval ? e->sval : "?", out);
		break;
	case EXPR_MEMBER:
		expr_print(e->lhs, out);
		fprintf(out, ".%s", e->sval ? e->sval : "?");
		break;
	case EXPR_CALL:
		fprintf(out, "%s(", e->sval ? e->sval : "?");
		for (int i = 0; i < e->nargs; i++) {
			if (i)
				fputs(", ", out);
			expr_print(e->args[i], out);
		}
		fputc(')', out);
		break;
	case EXPR_UNARY:
		if (e->op == OP_NOT)
			fputs("(not ", out);
		else
			fprintf(out, "(%s", expr_op_name(e->op));
		expr_print(e->lhs, out);
		fputc(')', out);
		break;
	case EXPR_BINARY:
		fputc('(', out);
		expr_print(e->lhs, out);
		fprintf(out, " %s ", expr_op_name(e->op));
		expr_print(e->rhs, out);
		fputc(')', out);
		break;
	case EXPR_LIKE:
		fputc('(', out);
		expr_print(e->lhs, out);
		fputs(" like ", out);
		expr_print(e->rhs, out);
		fputc(')', out);
		break;
	case EXPR_IN:
		fputc('(', out);
		expr_print(e->lhs, out);
		fputs(" in (", out);
		for (int i = 0; i < e->nargs; i++) {
			if (i)
				fputs(", ", out);
			expr_print(e->args[i], out);
		}
		fputs("))", out);
		break;
	case EXPR_CAST:
		fputs("cast(", out);
		expr_print(e->lhs, out);
		fprintf(out, " as %s %s)", e->ival ? "union" : "struct", e->sval ? e->sval : "?");
		break;
	}
}

/* ---- ast_dump ---- */

static const char *expr_kind_name(enum expr_kind k)
{
	switch (k) {
	case EXPR_INT:
		return "int";
	case EXPR_FLOAT:
		return "float";
	case EXPR_STR:
		return "str";
	case EXPR_NAME:
		return "name";
	case EXPR_MEMBER:
		return "member";
	case EXPR_CALL:
		return "call";
	case EXPR_UNARY:
		return "unary";
	case EXPR_BINARY:
		return "binary";
	case EXPR_LIKE:
		return "like";
	case EXPR_IN:
		return "in";
	case EXPR_CAST:
		return "cast";
	}
	return "?";
}

static void dump_indent(int depth, FILE *out)
{
	for (int i = 0; i < depth; i++)
		fputs("  ", out);
}

static void dump_loc(struct src_loc loc, FILE *out)
{
	fprintf(out, " @%u:%u", loc.line, loc.col);
}

/* What sema resolved, printed only when set so a parse dump stays short. */
static void dump_sema(const struct expr *e, FILE *out)
{
	char buf[32];

	if (e->ty.kind != TY_NONE)
		fprintf(out, " ty=%s", type_name(&e->ty, buf, sizeof(buf)));
	if (e->bi != BI_NONE) {
		fprintf(out, " bi=%s", builtin_name(e->bi));
		if (e->bi == BI_ARG || e->bi == BI_FIELD || e->bi == BI_ALIAS)
			fprintf(out, "[%d]", e->aux);
	}
	if (e->fn != FN_NONE) {
		fprintf(out, " fn=%s", func_name(e->fn));
		if (FN_IS_AGG(e->fn))
			fprintf(out, " agg_slot=%d", e->agg_slot);
	}
	if (e->is_const && (e->kind == EXPR_UNARY || e->kind == EXPR_BINARY))
		fprintf(out, " const=%lld", (long long)e->ival); /* the folded value */
	else if (e->is_const)
		fputs(" const", out);
}

static void dump_expr(const struct expr *e, int depth, FILE *out)
{
	dump_indent(depth, out);
	if (!e) {
		fputs("<null>\n", out);
		return;
	}
	fputs(expr_kind_name(e->kind), out);
	switch (e->kind) {
	case EXPR_INT:
	case EXPR_FLOAT:
	case EXPR_STR:
		fputc(' ', out);
		expr_print(e, out);
		break;
	case EXPR_NAME:
	case EXPR_CALL:
	case EXPR_MEMBER:
		fprintf(out, " %s", e->sval ? e->sval : "?");
		break;
	case EXPR_CAST:
		fprintf(out, " %s %s", e->ival ? "union" : "struct", e->sval ? e->sval : "?");
		break;
	case EXPR_UNARY:
	case EXPR_BINARY:
		fprintf(out, " %s", expr_op_name(e->op));
		break;
	case EXPR_LIKE:
	case EXPR_IN:
		break;
	}
	dump_sema(e, out);
	dump_loc(e->loc, out);
	fputc('\n', out);
	if (e->lhs)
		dump_expr(e->lhs, depth + 1, out);
	if (e->rhs)
		dump_expr(e->rhs, depth + 1, out);
	for (int i = 0; i < e->nargs; i++)
		dump_expr(e->args[i], depth + 1, out);
}

static void dump_probe(const char *what, const struct probe_spec *p, int depth, FILE *out)
{
	dump_indent(depth, out);
	fprintf(out, "%s %s kind=%s parts=[", what, p->text ? p->text : "?",
		probe_kind_name(p->kind));
	for (int i = 0; i < p->nparts; i++)
		fprintf(out, "%s'%s'", i ? ", " : "", p->parts[i] ? p->parts[i] : "");
	fputc(']', out);
	if (p->has_offset)
		fprintf(out, " offset=0x%" PRIx64, p->offset);
	if (p->wild)
		fputs(" wild", out);
	if (p->hz)
		fprintf(out, " hz=%" PRIu64, p->hz);
	if (p->period_ns)
		fprintf(out, " period_ns=%" PRIu64, p->period_ns);
	if (p->set)
		fprintf(out, " targets=%d", p->set->n);
	dump_loc(p->loc, out);
	fputc('\n', out);
}

/* The per-side parts of a span: its start's and end's filters, its end's own key. */
static void ast_dump_span_sides(const struct source *s, FILE *out)
{
	const struct {
		const char *name;
		const struct expr *e;
	} parts[] = { { "start where", s->start_where },
		      { "end where", s->end_where },
		      { "end on", s->end_on } };

	for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++) {
		if (!parts[i].e)
			continue;
		dump_indent(2, out);
		fprintf(out, "%s\n", parts[i].name);
		dump_expr(parts[i].e, 3, out);
	}
}

void ast_dump(const struct ast_query *q, FILE *out)
{
	if (!q) {
		fputs("<no query>\n", out);
		return;
	}
	fprintf(out, "query%s\n", q->aggregating ? " aggregating" : "");
	for (int i = 0; i < q->nsources; i++) {
		const struct source *s = &q->sources[i];

		if (s->is_span) {
			dump_indent(1, out);
			fputs("span", out);
			dump_loc(s->loc, out);
			fputc('\n', out);
			dump_probe("start", &s->start, 2, out);
			if (s->has_end)
				dump_probe("end", &s->end, 2, out);
			if (s->on) {
				dump_indent(2, out);
				fputs("on\n", out);
				dump_expr(s->on, 3, out);
			}
			ast_dump_span_sides(s, out);
		} else {
			dump_probe("source", &s->start, 1, out);
		}
	}
	if (q->where) {
		dump_indent(1, out);
		fputs("where\n", out);
		dump_expr(q->where, 2, out);
	}
	for (int i = 0; i < q->ngroups; i++) {
		dump_indent(1, out);
		fprintf(out, "group%s%s\n", q->groups[i].alias ? " as " : "",
			q->groups[i].alias ? q->groups[i].alias : "");
		dump_expr(q->groups[i].e, 2, out);
	}
	for (int i = 0; i < q->nitems; i++) {
		const struct select_item *it = &q->items[i];

		dump_indent(1, out);
		fputs("select", out);
		if (it->alias)
			fprintf(out, " as %s", it->alias);
		if (it->name)
			fprintf(out, " name=%s", it->name);
		fputc('\n', out);
		dump_expr(it->e, 2, out);
	}
	if (q->format) {
		dump_indent(1, out);
		fputs("format ", out);
		str_print(q->format, out);
		fputc('\n', out);
	}
	if (q->order) {
		dump_indent(1, out);
		fprintf(out, "order %s\n", q->order_desc ? "desc" : "asc");
		dump_expr(q->order, 2, out);
	}
	if (q->limit) {
		dump_indent(1, out);
		fprintf(out, "limit %" PRId64 "\n", q->limit);
	}
	if (q->every_loc.len) {
		dump_indent(1, out);
		fputs("every ", out);
		int_print((int64_t)q->every_ns, UNIT_DURATION, out);
		fputc('\n', out);
	}
	if (q->for_loc.len) {
		dump_indent(1, out);
		fputs("for ", out);
		int_print((int64_t)q->for_ns, UNIT_DURATION, out);
		fputc('\n', out);
	}
}

bool expr_equal(const struct expr *a, const struct expr *b)
{
	if (!a || !b)
		return a == b;
	if (a->kind != b->kind || a->op != b->op || a->nargs != b->nargs)
		return false;
	switch (a->kind) {
	case EXPR_INT:
		if (a->ival != b->ival)
			return false;
		break;
	case EXPR_FLOAT:
		if (a->fval != b->fval)
			return false;
		break;
	case EXPR_STR:
		if (strcmp(a->sval, b->sval) != 0)
			return false;
		break;
	case EXPR_NAME:
	case EXPR_MEMBER:
	case EXPR_CALL:
		if (strcasecmp(a->sval, b->sval) != 0)
			return false;
		break;
	case EXPR_CAST:
		if (a->ival != b->ival || strcmp(a->sval, b->sval) != 0)
			return false;
		break;
	default:
		break;
	}
	if (!expr_equal(a->lhs, b->lhs) || !expr_equal(a->rhs, b->rhs))
		return false;
	for (int i = 0; i < a->nargs; i++)
		if (!expr_equal(a->args[i], b->args[i]))
			return false;
	return true;
}
