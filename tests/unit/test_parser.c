// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests of the parser (compiler/parser.c): every example of the language spec parses
 * as written into the tree it means; precedence and associativity, checked through
 * expr_print(); probe splitting; each parse-level error tag from a specific input, as the
 * first and only diagnostic; places of nodes and errors in a multi-line query; the
 * recursion and size bounds.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "compiler/ast.h"
#include "compiler/parser.h"

/* The examples of docs/language.md ("Examples": each must work as written), verbatim. */
static const char *const examples[] = {
	"-- system calls by process, top 10 every second\n"
	"from tracepoint:raw_syscalls:sys_enter\n"
	"group by comm select count() as calls\n"
	"order by calls desc limit 10 every 1s\n",

	"-- bytes read per process, once after 10 seconds\n"
	"from syscall:read group by comm select sum(args.count) as bytes for 10s\n",

	"-- read latency: distribution and tail\n"
	"from span(syscall:read) where comm = 'postgres'\n"
	"select count(), p50(duration), p99(duration), hist(duration) every 5s\n",

	"-- a function in a live process\n"
	"from span(uprobe:/usr/bin/redis-server:processCommand) where pid = 4242\n"
	"select count(), avg(duration), p99(duration) every 1s\n",

	"-- two USDT probes paired into a span\n"
	"from span(usdt:/usr/lib/postgresql/15/bin/postgres:postgresql:query__start,\n"
	"          usdt:/usr/lib/postgresql/15/bin/postgres:postgresql:query__done)\n"
	"select p50(duration), p99(duration) every 10s\n",

	"-- a stream of events: every file opened, by whom\n"
	"from syscall:openat select time, pid, comm, str(args.filename)\n",

	"-- where a process spends its CPU\n"
	"from profile:99hz where pid = 4242 group by ustack select count() as samples\n"
	"order by samples desc limit 20 for 30s\n",

	"-- across the cluster: bytes written per host\n"
	"from syscall:write group by host select sum(args.count) every 10s\n",
};

#define NEXAMPLES (sizeof(examples) / sizeof(examples[0]))

static struct ast_query *parse_ok(const char *src)
{
	struct diag_list dl;
	struct ast_query *q;

	diag_list_init(&dl, src, "query");
	q = parse_query(src, &dl);
	if (!q || dl.n) {
		diag_print(&dl, stderr, false);
		fail_msg("'%s' did not parse", src);
	}
	diag_list_free(&dl);
	return q;
}

/* expr_print() into a string; the caller frees it. */
static char *expr_text(const struct expr *e)
{
	char *buf = NULL;
	size_t sz = 0;
	FILE *f = open_memstream(&buf, &sz);

	assert_non_null(f);
	expr_print(e, f);
	fclose(f);
	return buf;
}

static void assert_expr(const struct expr *e, const char *want)
{
	char *got = expr_text(e);

	if (strcmp(got, want) != 0)
		fail_msg("expr_print: got '%s', want '%s'", got, want);
	free(got);
}

static void test_examples(void **state)
{
	struct ast_query *q;
	struct source *s;

	(void)state;
	/* 1: tracepoint, group, alias, order desc, limit, every */
	q = parse_ok(examples[0]);
	assert_int_equal(q->nsources, 1);
	s = &q->sources[0];
	assert_false(s->is_span);
	assert_int_equal(s->start.kind, PROBE_TRACEPOINT);
	assert_int_equal(s->start.nparts, 2);
	assert_string_equal(s->start.parts[0], "raw_syscalls");
	assert_string_equal(s->start.parts[1], "sys_enter");
	assert_string_equal(s->start.text, "tracepoint:raw_syscalls:sys_enter");
	assert_int_equal(q->ngroups, 1);
	assert_expr(q->groups[0].e, "comm");
	assert_int_equal(q->nitems, 1);
	assert_expr(q->items[0].e, "count()");
	assert_string_equal(q->items[0].alias, "calls");
	assert_expr(q->order, "calls");
	assert_true(q->order_desc);
	assert_int_equal(q->limit, 10);
	assert_int_equal(q->every_ns, 1000000000ull);
	assert_int_equal(q->for_ns, 0);
	ast_query_free(q);

	/* 2: member access, for */
	q = parse_ok(examples[1]);
	assert_int_equal(q->sources[0].start.kind, PROBE_SYSCALL);
	assert_string_equal(q->sources[0].start.parts[0], "read");
	assert_expr(q->items[0].e, "sum(args.count)");
	assert_string_equal(q->items[0].alias, "bytes");
	assert_int_equal(q->for_ns, 10000000000ull);
	assert_int_equal(q->every_ns, 0);
	ast_query_free(q);

	/* 3: span of a syscall, string comparison, four aggregates */
	q = parse_ok(examples[2]);
	s = &q->sources[0];
	assert_true(s->is_span);
	assert_false(s->has_end);
	assert_null(s->on);
	assert_int_equal(s->start.kind, PROBE_SYSCALL);
	assert_expr(q->where, "(comm = 'postgres')");
	assert_int_equal(q->nitems, 4);
	assert_expr(q->items[3].e, "hist(duration)");
	assert_int_equal(q->every_ns, 5000000000ull);
	ast_query_free(q);

	/* 4: span of a uprobe with a path */
	q = parse_ok(examples[3]);
	s = &q->sources[0];
	assert_true(s->is_span);
	assert_int_equal(s->start.kind, PROBE_UPROBE);
	assert_int_equal(s->start.nparts, 2);
	assert_string_equal(s->start.parts[0], "/usr/bin/redis-server");
	assert_string_equal(s->start.parts[1], "processCommand");
	assert_false(s->start.has_offset);
	assert_expr(q->where, "(pid = 4242)");
	ast_query_free(q);

	/* 5: two USDT probes across lines */
	q = parse_ok(examples[4]);
	s = &q->sources[0];
	assert_true(s->is_span);
	assert_true(s->has_end);
	assert_int_equal(s->start.kind, PROBE_USDT);
	assert_int_equal(s->start.nparts, 3);
	assert_string_equal(s->start.parts[0], "/usr/lib/postgresql/15/bin/postgres");
	assert_string_equal(s->start.parts[1], "postgresql");
	assert_string_equal(s->start.parts[2], "query__start");
	assert_string_equal(s->end.parts[2], "query__done");
	assert_int_equal(s->end.loc.line, 3);
	assert_int_equal(s->end.loc.col, 11);
	assert_int_equal(q->every_ns, 10000000000ull);
	ast_query_free(q);

	/* 6: a stream */
	q = parse_ok(examples[5]);
	assert_int_equal(q->nitems, 4);
	assert_expr(q->items[0].e, "time");
	assert_expr(q->items[3].e, "str(args.filename)");
	assert_null(q->where);
	assert_int_equal(q->ngroups, 0);
	ast_query_free(q);

	/* 7: profile (rate kept as a part, not parsed here), for */
	q = parse_ok(examples[6]);
	assert_int_equal(q->sources[0].start.kind, PROBE_PROFILE);
	assert_string_equal(q->sources[0].start.parts[0], "99hz");
	assert_expr(q->groups[0].e, "ustack");
	assert_int_equal(q->limit, 20);
	assert_int_equal(q->for_ns, 30000000000ull);
	ast_query_free(q);

	/* 8 */
	q = parse_ok(examples[7]);
	assert_expr(q->groups[0].e, "host");
	ast_query_free(q);
}

/* Every example also dumps without trouble, and the dump names its probes. */
static void test_examples_dump(void **state)
{
	(void)state;
	for (size_t i = 0; i < NEXAMPLES; i++) {
		struct ast_query *q = parse_ok(examples[i]);
		char *buf = NULL;
		size_t sz = 0;
		FILE *f = open_memstream(&buf, &sz);

		ast_dump(q, f);
		fclose(f);
		assert_non_null(strstr(buf, q->sources[0].start.text));
		assert_non_null(strstr(buf, "select"));
		free(buf);
		ast_query_free(q);
	}
}

static void test_precedence(void **state)
{
	static const struct {
		const char *where;
		const char *want;
	} cases[] = {
		{ "a + b * c", "(a + (b * c))" },
		{ "a * b + c", "((a * b) + c)" },
		{ "a - b - c", "((a - b) - c)" },
		{ "a / b % c * d", "(((a / b) % c) * d)" },
		{ "(a + b) * c", "((a + b) * c)" },
		{ "-a * b", "((-a) * b)" },
		{ "- -a", "(-(-a))" },
		{ "-args.x", "(-args.x)" },
		{ "-5 + 3", "(-5 + 3)" },
		{ "a = 1 or b = 2 and c = 3", "((a = 1) or ((b = 2) and (c = 3)))" },
		{ "a or b or c", "((a or b) or c)" },
		{ "not a = 1 and b", "((not (a = 1)) and b)" },
		{ "not not a", "(not (not a))" },
		{ "a + 1 < b * 2", "((a + 1) < (b * 2))" },
		{ "a == 1", "(a = 1)" },
		{ "a <> 1", "(a != 1)" },
		{ "a != 1", "(a != 1)" },
		{ "a <= 1 and a >= 0 and a > b and a < c",
		  "((((a <= 1) and (a >= 0)) and (a > b)) and (a < c))" },
		{ "comm like 'post*'", "(comm like 'post*')" },
		/* a cast binds as a primary: `.F` after it reads the struct's member */
		{ "cast(args.sk as struct sock).a.b + 1",
		  "(cast(args.sk as struct sock).a.b + 1)" },
		{ "CAST(arg0 + 8 as union u).x", "cast((arg0 + 8) as union u).x" },
		{ "cast(cast(a as struct x).p as struct y).q",
		  "cast(cast(a as struct x).p as struct y).q" },
		{ "comm not like 'post*'", "(not (comm like 'post*'))" },
		{ "pid in (1, 2, 3)", "(pid in (1, 2, 3))" },
		{ "pid not in (1, -2)", "(not (pid in (1, -2)))" },
		{ "pid + 1 in (2)", "((pid + 1) in (2))" },
		{ "not comm like 'x' or pid in (1)", "((not (comm like 'x')) or (pid in (1)))" },
		{ "args.count / 1KiB > 4", "((args.count / 1KiB) > 4)" },
		{ "duration > 1.5ms", "(duration > 1500us)" },
		{ "bucket(args.count, 1024) = log2(x)", "(bucket(args.count, 1024) = log2(x))" },
		{ "str(args.filename, 32) = \"a'b\"", "(str(args.filename, 32) = 'a\\'b')" },
		{ "x.y.z = 0x10", "(x.y.z = 16)" },
		{ "args.from = 1", "(args.from = 1)" },
		{ "quantile(duration, 0.99) > 0", "(quantile(duration, 0.99) > 0)" },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char src[256];
		struct ast_query *q;

		snprintf(src, sizeof(src), "from syscall:read where %s select count()",
			 cases[i].where);
		q = parse_ok(src);
		assert_expr(q->where, cases[i].want);
		ast_query_free(q);
	}
}

static void test_probes(void **state)
{
	struct ast_query *q;
	struct probe_spec *p;

	(void)state;
	q = parse_ok("from uprobe:libc:malloc+0x10, kprobe:do_sys_open+16, tp:sched:*,\n"
		     "  uprobe:/usr/lib/x86_64-linux-gnu/libstdc++.so.6:_Znw?,\n"
		     "  usdt:/usr/bin/python3:function__entry, interval:1s, Syscall:read,\n"
		     "  uretprobe:libc:malloc, kretprobe:vfs_read -- comment\n"
		     "select count()");
	assert_int_equal(q->nsources, 9);
	p = &q->sources[0].start;
	assert_int_equal(p->kind, PROBE_UPROBE);
	assert_string_equal(p->parts[0], "libc");
	assert_string_equal(p->parts[1], "malloc");
	assert_true(p->has_offset);
	assert_int_equal(p->offset, 16);
	assert_string_equal(p->text, "uprobe:libc:malloc+0x10");
	assert_int_equal(p->loc.len, strlen("uprobe:libc:malloc+0x10"));
	assert_false(p->wild);
	p = &q->sources[1].start;
	assert_int_equal(p->kind, PROBE_KPROBE);
	assert_string_equal(p->parts[0], "do_sys_open");
	assert_int_equal(p->offset, 16);
	p = &q->sources[2].start;
	assert_int_equal(p->kind, PROBE_TRACEPOINT);
	assert_true(p->wild);
	p = &q->sources[3].start;
	assert_string_equal(p->parts[0], "/usr/lib/x86_64-linux-gnu/libstdc++.so.6");
	assert_false(p->has_offset);
	assert_true(p->wild);
	p = &q->sources[4].start;
	assert_int_equal(p->kind, PROBE_USDT);
	assert_int_equal(p->nparts, 2);
	assert_int_equal(q->sources[5].start.kind, PROBE_INTERVAL);
	assert_string_equal(q->sources[5].start.parts[0], "1s");
	assert_int_equal(q->sources[6].start.kind, PROBE_SYSCALL);
	assert_int_equal(q->sources[7].start.kind, PROBE_URETPROBE);
	assert_int_equal(q->sources[8].start.kind, PROBE_KRETPROBE);
	assert_int_equal(q->sources[8].start.loc.line, 4);
	ast_query_free(q);

	/* span forms: on-key, space before '(', keyword case */
	q = parse_ok("from SPAN (uprobe:/bin/x:f, uretprobe:/bin/x:f ON arg0 + 8), "
		     "span(syscall:read on tid) select count()");
	assert_int_equal(q->nsources, 2);
	assert_true(q->sources[0].is_span);
	assert_true(q->sources[0].has_end);
	assert_int_equal(q->sources[0].end.kind, PROBE_URETPROBE);
	assert_expr(q->sources[0].on, "(arg0 + 8)");
	assert_int_equal(q->sources[0].loc.col, 6);
	assert_false(q->sources[1].has_end);
	assert_expr(q->sources[1].on, "tid");
	ast_query_free(q);
}

struct err_case {
	const char *src;
	enum diag_tag tag;
};

static void assert_parse_error(const struct err_case *c)
{
	struct diag_list dl;
	struct ast_query *q;
	char *out = NULL;
	size_t sz = 0;
	FILE *f;

	diag_list_init(&dl, c->src, "query");
	q = parse_query(c->src, &dl);
	if (q || dl.n != 1 || dl.v[0].tag != c->tag || dl.v[0].sev != DIAG_ERROR)
		fail_msg("'%s': want one %s, got %s with %d diags, first %s", c->src,
			 diag_tag_name(c->tag), q ? "a tree" : "NULL", dl.n,
			 dl.n ? diag_tag_name(dl.v[0].tag) : "-");
	/* Every error has a place on a real line and prints with a caret. */
	assert_true(dl.v[0].loc.line >= 1);
	assert_true(dl.v[0].loc.off <= strlen(c->src));
	f = open_memstream(&out, &sz);
	diag_print(&dl, f, false);
	fclose(f);
	assert_non_null(strstr(out, diag_tag_name(c->tag)));
	if (c->src[0])
		assert_non_null(strchr(out, '^'));
	free(out);
	diag_list_free(&dl);
}

static void test_errors(void **state)
{
	static const struct err_case cases[] = {
		/* lexing, through the parser */
		{ "from syscall:read where pid & 1 select count()", DIAG_E_LEX_CHAR },
		{ "from syscall:read where comm = 'bash select count()", DIAG_E_LEX_STRING },
		{ "from syscall:read where pid = 99999999999999999999 select count()",
		  DIAG_E_LEX_NUMBER },
		{ "from syscall:read select count() every 10sec", DIAG_E_LEX_UNIT },
		/* parsing */
		{ "from syscall:read where pid = select count()", DIAG_E_PARSE_EXPECTED },
		{ "from syscall:read where pid = 1 selct count()", DIAG_E_PARSE_EXPECTED },
		{ "from syscall:read group comm select count()", DIAG_E_PARSE_EXPECTED },
		{ "from syscall:read select count() order calls", DIAG_E_PARSE_EXPECTED },
		{ "from syscall:read select count(", DIAG_E_PARSE_EXPECTED },
		{ "from syscall:read select count() as limit", DIAG_E_PARSE_EXPECTED },
		{ "from syscall:read where 1 < pid < 9 select count()", DIAG_E_PARSE_EXPECTED },
		{ "from syscall:read where pid in () select count()", DIAG_E_PARSE_EXPECTED },
		{ "from syscall:read select args.", DIAG_E_PARSE_EXPECTED },
		{ "from syscall:read select cast(args.buf as sock).x", DIAG_E_PARSE_EXPECTED },
		{ "from syscall:read select cast(args.buf struct sock).x", DIAG_E_PARSE_EXPECTED },
		{ "from syscall:read select cast(args.buf as struct).x", DIAG_E_PARSE_EXPECTED },
		{ "from syscall:read select cast(args.buf as struct sock.x", DIAG_E_PARSE_EXPECTED },
		{ "select count() from syscall:read", DIAG_E_PARSE_NO_FROM },
		{ "syscall:read select count()", DIAG_E_PARSE_NO_FROM },
		{ "from syscall:read where pid = 1", DIAG_E_PARSE_NO_SELECT },
		{ "from syscall:read count()", DIAG_E_PARSE_NO_SELECT },
		{ "from syscall:read select count() pid", DIAG_E_PARSE_TRAILING },
		{ "from syscall:read select count() every 1s )", DIAG_E_PARSE_TRAILING },
		{ "from tracepoint:sched_switch select count()", DIAG_E_PARSE_PROBE },
		{ "from syscall select count()", DIAG_E_PARSE_PROBE },
		{ "from select count()", DIAG_E_PARSE_PROBE },
		{ "from syscall:read, select count()", DIAG_E_PARSE_PROBE },
		{ "from uprobe:/bin/bash:readline:extra select count()", DIAG_E_PARSE_PROBE },
		{ "from tracepoint::sys_enter select count()", DIAG_E_PARSE_PROBE },
		{ "from uprobe:libc:malloc+ select count()", DIAG_E_PARSE_PROBE },
		{ "from uprobe:libc:malloc+0xzz select count()", DIAG_E_PARSE_PROBE },
		{ "from read select count()", DIAG_E_PARSE_PROBE },
		{ "from span syscall:read select count()", DIAG_E_PARSE_SPAN },
		{ "from span(syscall:read select count()", DIAG_E_PARSE_SPAN },
		{ "from span(syscall:read, syscall:write, syscall:close) select count()",
		  DIAG_E_PARSE_SPAN },
		{ "from syscall:read select count() where pid = 1", DIAG_E_PARSE_CLAUSE_ORDER },
		{ "from syscall:read where pid = 1 where tid = 2 select count()",
		  DIAG_E_PARSE_CLAUSE_ORDER },
		{ "from syscall:read select count() every 1s limit 5", DIAG_E_PARSE_CLAUSE_ORDER },
		{ "from syscall:read select count() from syscall:write",
		  DIAG_E_PARSE_CLAUSE_ORDER },
		{ "from syscall:read select count() every 5", DIAG_E_PARSE_DURATION },
		{ "from syscall:read select count() for 1MiB", DIAG_E_PARSE_DURATION },
		{ "from syscall:read select count() every", DIAG_E_PARSE_DURATION },
		{ "from syscall:read select count() limit 0", DIAG_E_PARSE_LIMIT },
		{ "from syscall:read select count() limit -3", DIAG_E_PARSE_LIMIT },
		{ "from syscall:read select count() limit 10s", DIAG_E_PARSE_LIMIT },
		{ "", DIAG_E_PARSE_EMPTY },
		{ "   \n\t ", DIAG_E_PARSE_EMPTY },
		{ "-- just a comment\n-- and another", DIAG_E_PARSE_EMPTY },
		/* probes */
		{ "from sycall:read select count()", DIAG_E_PROBE_PROVIDER },
		{ "from tracepint:sched:sched_switch select count()", DIAG_E_PROBE_PROVIDER },
		{ "from fentry:vfs_read select count()", DIAG_E_PROBE_PROVIDER },
		{ "from syscall:read+8 select count()", DIAG_E_PROBE_OFFSET },
		{ "from uretprobe:libc:malloc+8 select count()", DIAG_E_PROBE_OFFSET },
		{ "from tp:sched:sched_switch+0x4 select count()", DIAG_E_PROBE_OFFSET },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		assert_parse_error(&cases[i]);
}

static char *repeat(const char *head, const char *unit, const char *sep, int n, const char *tail)
{
	size_t len = strlen(head) + strlen(tail) + (size_t)n * (strlen(unit) + strlen(sep)) + 1;
	char *s = malloc(len);

	assert_non_null(s);
	strcpy(s, head);
	for (int i = 0; i < n; i++) {
		if (i)
			strcat(s, sep);
		strcat(s, unit);
	}
	strcat(s, tail);
	return s;
}

static void test_bounds(void **state)
{
	struct err_case c;
	struct ast_query *q;
	char *src;

	(void)state;
	/* 64 levels of nesting are fine, 70 are not; nor is a 300-term chain. */
	src = malloc(1024);
	assert_non_null(src);
	strcpy(src, "from syscall:read where ");
	for (int i = 0; i < 60; i++)
		strcat(src, "(");
	strcat(src, "pid");
	for (int i = 0; i < 60; i++)
		strcat(src, ")");
	strcat(src, " = 1 select count()");
	q = parse_ok(src);
	assert_expr(q->where, "(pid = 1)");
	ast_query_free(q);
	strcpy(src, "from syscall:read where ");
	for (int i = 0; i < 70; i++)
		strcat(src, "(");
	strcat(src, "pid");
	c.src = src;
	c.tag = DIAG_E_PARSE_DEPTH;
	assert_parse_error(&c);
	strcpy(src, "from syscall:read where ");
	for (int i = 0; i < 200; i++)
		strcat(src, "not ");
	strcat(src, "pid select count()");
	assert_parse_error(&c);
	free(src);

	src = repeat("from syscall:read where ", "x", " + ", 300, " = 1 select count()");
	c.src = src;
	assert_parse_error(&c);
	free(src);

	/* Sizes: the limits of ast.h hold exactly. */
	src = repeat("from syscall:read select ", "x", ", ", AST_MAX_ITEMS, "");
	q = parse_ok(src);
	assert_int_equal(q->nitems, AST_MAX_ITEMS);
	ast_query_free(q);
	free(src);
	src = repeat("from syscall:read select ", "x", ", ", AST_MAX_ITEMS + 1, "");
	c.src = src;
	c.tag = DIAG_E_TOO_MANY;
	assert_parse_error(&c);
	free(src);
	src = repeat("from syscall:read group by ", "x", ", ", AST_MAX_GROUPS, " select count()");
	q = parse_ok(src);
	assert_int_equal(q->ngroups, AST_MAX_GROUPS);
	ast_query_free(q);
	free(src);
	src = repeat("from syscall:read group by ", "x", ", ", AST_MAX_GROUPS + 1,
		     " select count()");
	c.src = src;
	assert_parse_error(&c);
	free(src);
	src = repeat("from ", "syscall:read", ", ", AST_MAX_SOURCES, " select count()");
	q = parse_ok(src);
	assert_int_equal(q->nsources, AST_MAX_SOURCES);
	ast_query_free(q);
	free(src);
	src = repeat("from ", "syscall:read", ", ", AST_MAX_SOURCES + 1, " select count()");
	c.src = src;
	assert_parse_error(&c);
	free(src);
	src = repeat("from syscall:read where pid in (", "1", ", ", PARSE_MAX_ARGS + 1,
		     ") select count()");
	c.src = src;
	assert_parse_error(&c);
	free(src);
}

static void test_locations(void **state)
{
	const char *src = "from syscall:read\n"
			  "where comm = 'postgres'\n"
			  "  and pid > 10\n"
			  "group by comm\n"
			  "select count() as n,\n"
			  "       sum(args.count)\n"
			  "every 1s";
	struct ast_query *q = parse_ok(src);
	const struct expr *w = q->where;
	struct diag_list dl;

	(void)state;
	assert_int_equal(q->sources[0].start.loc.line, 1);
	assert_int_equal(q->sources[0].start.loc.col, 6);
	assert_int_equal(q->sources[0].start.loc.len, 12);
	/* where: (comm = 'postgres') and (pid > 10), spanning lines 2-3 */
	assert_int_equal(w->loc.line, 2);
	assert_int_equal(w->loc.col, 7);
	assert_int_equal(w->rhs->loc.line, 3);
	assert_int_equal(w->rhs->loc.col, 7);
	assert_int_equal(w->rhs->rhs->loc.col, 13);
	assert_memory_equal(src + w->rhs->loc.off, "pid > 10", w->rhs->loc.len);
	assert_int_equal(q->groups[0].e->loc.line, 4);
	assert_int_equal(q->groups[0].e->loc.col, 10);
	assert_int_equal(q->items[0].alias_loc.line, 5);
	assert_int_equal(q->items[0].alias_loc.col, 19);
	assert_int_equal(q->items[1].e->loc.line, 6);
	assert_int_equal(q->items[1].e->loc.col, 8);
	assert_memory_equal(src + q->items[1].e->loc.off, "sum(args.count)",
			    q->items[1].e->loc.len);
	assert_int_equal(q->items[1].e->args[0]->loc.col, 12);
	assert_int_equal(q->every_loc.line, 7);
	assert_int_equal(q->every_loc.col, 7);
	assert_int_equal(q->loc.line, 1);
	assert_int_equal(q->loc.len, strlen(src));
	ast_query_free(q);

	/* An error on line 3 is reported there, with the probe part under the caret. */
	src = "-- comment\n"
	      "from syscall:read,\n"
	      "     tracepoint::sys_exit\n"
	      "select count()";
	diag_list_init(&dl, src, "query");
	assert_null(parse_query(src, &dl));
	assert_int_equal(dl.n, 1);
	assert_int_equal(dl.v[0].tag, DIAG_E_PARSE_PROBE);
	assert_int_equal(dl.v[0].loc.line, 3);
	assert_int_equal(dl.v[0].loc.col, 17);
	diag_list_free(&dl);
	src = "from syscall:read\n"
	      "\tselect count()\n"
	      "\twhere pid = 1";
	diag_list_init(&dl, src, "query");
	assert_null(parse_query(src, &dl));
	assert_int_equal(dl.v[0].tag, DIAG_E_PARSE_CLAUSE_ORDER);
	assert_int_equal(dl.v[0].loc.line, 3);
	assert_int_equal(dl.v[0].loc.col, 2);
	assert_int_equal(dl.v[0].loc.len, 5);
	diag_list_free(&dl);
	src = "from sycall:read select count()";
	diag_list_init(&dl, src, "query");
	assert_null(parse_query(src, &dl));
	assert_int_equal(dl.v[0].loc.col, 6);
	assert_int_equal(dl.v[0].loc.len, 6);
	assert_non_null(dl.v[0].fix);
	assert_non_null(strstr(dl.v[0].fix, "syscall"));
	diag_list_free(&dl);
}

/* diag_print's layout, exactly: the users' and editors' contract. */
static void test_diag_print(void **state)
{
	const char *src = "from syscall:read\nselect count() every 10KB";
	const char *want = "q.wq:2:24: error: unknown unit 'KB' after a number [E_LEX_UNIT]\n"
			   "    select count() every 10KB\n"
			   "                           ^~\n"
			   "  sizes are binary: write KiB, MiB, GiB or TiB (4KiB = 4096 bytes)\n";
	struct diag_list dl;
	char *out = NULL;
	size_t sz = 0;
	FILE *f;

	(void)state;
	diag_list_init(&dl, src, "q.wq");
	assert_null(parse_query(src, &dl));
	f = open_memstream(&out, &sz);
	diag_print(&dl, f, false);
	fclose(f);
	assert_string_equal(out, want);
	free(out);
	diag_list_free(&dl);
}

static void test_diag_near(void **state)
{
	static const char *const cands[] = { "tracepoint", "tp",       "syscall", "uprobe",
					     "uretprobe",  "usdt",     "kprobe",  "kretprobe",
					     "profile",	   "interval", "syscall" };
	const char *out[4];
	int n;

	(void)state;
	n = diag_near("uprobes", cands, 11, out, 4);
	assert_true(n >= 2);
	assert_string_equal(out[0], "uprobe");
	assert_string_equal(out[1], "kprobe"); /* uretprobe is 3 away: beyond the bound */
	n = diag_near("sycall", cands, 11, out, 4);
	assert_int_equal(n, 1); /* deduplicated */
	assert_string_equal(out[0], "syscall");
	assert_int_equal(diag_near("zzzzzzzz", cands, 11, out, 4), 0);
	assert_int_equal(diag_edit_distance("kitten", "sitting"), 3);
	assert_int_equal(diag_edit_distance("", "abc"), 3);
	assert_int_equal(diag_tag_lookup("E_PARSE_LIMIT"), DIAG_E_PARSE_LIMIT);
	assert_int_equal(diag_tag_lookup("E_NOPE"), DIAG__COUNT);
	assert_string_equal(diag_tag_name(DIAG_E_TOO_MANY), "E_TOO_MANY");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_examples),   cmocka_unit_test(test_examples_dump),
		cmocka_unit_test(test_precedence), cmocka_unit_test(test_probes),
		cmocka_unit_test(test_errors),	   cmocka_unit_test(test_bounds),
		cmocka_unit_test(test_locations),  cmocka_unit_test(test_diag_print),
		cmocka_unit_test(test_diag_near),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
