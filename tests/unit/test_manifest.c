// SPDX-License-Identifier: Apache-2.0
/*
 * The manifest: every example query's plan survives write -> read -> write byte for byte,
 * and malformed or hostile manifests are refused with a reason, never crash.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "compiler/compiler.h"
#include "compiler/plan.h"
#include "tests/skip.h"

static const char *const queries[] = {
	"from tracepoint:raw_syscalls:sys_enter group by comm select count() as calls "
	"order by calls desc limit 10 every 1s",
	"from syscall:read group by comm select sum(args.count) as bytes for 10s",
	"from span(syscall:read) where comm = 'postgres' "
	"select count(), p50(duration), p99(duration), hist(duration) every 5s",
	"from syscall:openat select time, pid, comm, str(args.filename)",
	"from profile:99hz where pid = 4242 group by ustack select count() as samples "
	"order by samples desc limit 20 for 30s",
	"from syscall:write group by host select sum(args.count) every 10s",
	"from syscall:read, syscall:write group by probe select lhist(args.count, 0, 4096, 256), "
	"distinct(args.fd), stddev(args.count)",
	"from uprobe:libc:malloc select quantile(arg0, 0.75) as q, max(arg0)",
	"from span(syscall:read), span(uprobe:libc:malloc) graph sample 2.5% every 1s",
	/* raw tracepoint programs (raw=N, the tracepoint's arguments) where the BTF allows */
	"from kernel:sockets where comm = 'redis-benchmark' graph",
};

static char *write_plan(const struct plan *p, size_t *len)
{
	char *buf = NULL;
	FILE *f = open_memstream(&buf, len);

	assert_non_null(f);
	assert_int_equal(manifest_write(p, f), 0);
	fclose(f);
	return buf;
}

static void test_round_trip(void **state)
{
	for (size_t i = 0; i < sizeof(queries) / sizeof(queries[0]); i++) {
		struct compile_opts o = { .sz = sizeof(o) };
		struct compile_result res;
		struct diag_list dl;
		char err[256], *a, *b;
		size_t la, lb;
		struct plan *p;

		diag_list_init(&dl, queries[i], "query");
		/* through codegen, which adds the tracepoint fields read (tpfield lines) */
		assert_int_equal(compiler_run(queries[i], &o, PASS_CODEGEN, &dl, &res), 0);
		a = write_plan(res.plan, &la);
		p = manifest_read(a, la, err, sizeof(err));
		if (!p)
			fail_msg("query %zu: %s", i, err);
		b = write_plan(p, &lb);
		assert_int_equal(la, lb);
		assert_memory_equal(a, b, la);
		assert_int_equal(p->nattach, res.plan->nattach);
		assert_int_equal(p->ncols, res.plan->ncols);
		assert_int_equal(p->aggregating, res.plan->aggregating);
		assert_int_equal(p->graph, res.plan->graph);
		assert_true(p->sample == res.plan->sample);
		assert_int_equal(p->event_size, res.plan->event_size);
		assert_string_equal(p->query, queries[i]);
		assert_int_equal(p->nprogs, res.plan->nprogs);
		for (int k = 0; k < p->nprogs; k++) {
			assert_int_equal(p->progs[k].raw_tp, res.plan->progs[k].raw_tp);
			assert_int_equal(p->progs[k].raw_nargs, res.plan->progs[k].raw_nargs);
		}
		assert_int_equal(p->ntpf, res.plan->ntpf);
		for (int k = 0; k < p->ntpf; k++) {
			assert_int_equal(p->tpf[k].prog, res.plan->tpf[k].prog);
			assert_string_equal(p->tpf[k].name, res.plan->tpf[k].name);
			assert_int_equal(p->tpf[k].offset, res.plan->tpf[k].offset);
			assert_int_equal(p->tpf[k].size, res.plan->tpf[k].size);
			assert_int_equal(p->tpf[k].is_signed, res.plan->tpf[k].is_signed);
		}
		/* `sum(args.count)` of syscall:read: its one field read, where this kernel's
		 * format puts it; a query reading no field has none */
		if (strstr(queries[i], "from syscall:read group by comm")) {
			assert_int_equal(p->ntpf, 1);
			assert_string_equal(p->tpf[0].name, "count");
			assert_int_equal(p->tpf[0].size, 8);
		} else if (i == 0) {
			assert_int_equal(p->ntpf, 0);
		}
		plan_free(p);
		free(a);
		free(b);
		compile_result_free(&res);
		diag_list_free(&dl);
	}
}

static struct plan *compile_first(char **text, size_t *len)
{
	struct compile_opts o = { .sz = sizeof(o) };
	struct compile_result res;
	struct diag_list dl;
	struct plan *p;

	diag_list_init(&dl, queries[0], "query");
	assert_int_equal(compiler_run(queries[0], &o, PASS_PLAN, &dl, &res), 0);
	*text = write_plan(res.plan, len);
	p = res.plan;
	res.plan = NULL;
	compile_result_free(&res);
	diag_list_free(&dl);
	return p;
}

/* Replace the first occurrence of `from` by `to` in a copy of text. */
static char *edit(const char *text, const char *from, const char *to)
{
	const char *at = strstr(text, from);
	char *out;

	assert_non_null(at);
	out = malloc(strlen(text) + strlen(to) + 1);
	memcpy(out, text, at - text);
	strcpy(out + (at - text), to);
	strcat(out, at + strlen(from));
	return out;
}

static void expect_refused(const char *text, const char *why)
{
	char err[256];
	struct plan *p = manifest_read(text, strlen(text), err, sizeof(err));

	if (p)
		fail_msg("accepted a manifest with %s", why);
	assert_true(err[0] != 0);
}

static void test_hostile(void **state)
{
	size_t len;
	char *text, *bad;
	struct plan *p = compile_first(&text, &len);
	static const struct {
		const char *from, *to, *why;
	} edits[] = {
		{ "weft-manifest 1", "weft-manifest 2", "a future version" },
		{ "weft-manifest 1", "weft-manifesto 1", "a wrong magic" },
		{ "\nend\n", "\n", "no end" },
		{ "\nend\n", "\nend\nextra 1\n", "text after end" },
		{ "key=16", "key=100000", "an oversized key" },
		{ "prog=0", "prog=9", "an attach point of an unknown program" },
		{ "idx=0", "idx=31", "a column pointing nowhere" },
		{ "offset=0 size=16", "offset=8 size=16", "a key outside the key" },
		{ "kind=count offset=0", "kind=bogus offset=0", "an unknown aggregate" },
		{ "render=str", "render=zzz", "an unknown render" },
		{ "every=1000000000", "every=-5", "a negative duration" },
		{ "every=1000000000", "every=1000000000 color=red", "an unknown key" },
		{ "name=tracepoint", "name=trace%ZZpoint", "a bad escape" },
		{ "order=1", "order=99", "an order column out of range" },
		{ "desc=1", "desc=7", "a flag out of range" },
		{ " first=0", " first=0 raw=0", "a raw tracepoint of no arguments" },
		{ " first=0", " first=0 raw=65",
		  "a raw tracepoint of more arguments than a field list" },
		{ "\nkey ", "\ntpfield prog=5 offset=8 size=8 signed=1 name=id\nkey ",
		  "a tracepoint field of an unknown program" },
		{ "\nkey ", "\ntpfield prog=0 offset=8 size=0 signed=1 name=id\nkey ",
		  "a tracepoint field of no bytes" },
		{ "\nkey ", "\ntpfield prog=0 offset=70000 size=8 signed=1 name=id\nkey ",
		  "a tracepoint field beyond any record" },
		{ "\nkey ", "\ntpfield prog=0 offset=8 size=8 signed=2 name=id\nkey ",
		  "a tracepoint field neither signed nor unsigned" },
		{ "\nkey ", "\ntpfield prog=0 offset=8 size=8 signed=1 name=\nkey ",
		  "a tracepoint field without a name" },
		{ "\nkey ", "\ntpfield prog=0 offset=8 size=8 signed=1\nkey ",
		  "a tracepoint field whose name is missing" },
		{ "\nkey ", "\ntpfield prog=0 offset=8 size=8 signed=1 name=id color=red\nkey ",
		  "a tracepoint field with an unknown key" },
	};

	for (size_t i = 0; i < sizeof(edits) / sizeof(edits[0]); i++) {
		bad = edit(text, edits[i].from, edits[i].to);
		expect_refused(bad, edits[i].why);
		free(bad);
	}
	/* the same line, well formed, is read (the refusals above are for their reasons) */
	bad = edit(text, "\nkey ", "\ntpfield prog=0 offset=8 size=8 signed=1 name=id\nkey ");
	{
		char err[128];
		struct plan *q = manifest_read(bad, strlen(bad), err, sizeof(err));

		if (!q)
			fail_msg("refused a good tpfield line: %s", err);
		assert_int_equal(q->ntpf, 1);
		assert_string_equal(q->tpf[0].name, "id");
		assert_int_equal(q->tpf[0].offset, 8);
		plan_free(q);
	}
	free(bad);
	/* every truncation is refused (the end line is missing) */
	for (size_t cut = 0; cut + 5 < len; cut += 7) {
		char err[128], *copy = strndup(text, cut);
		struct plan *q = manifest_read(copy, cut, err, sizeof(err));

		assert_null(q);
		free(copy);
	}
	/* NUL bytes inside */
	bad = strdup(text);
	bad[10] = 0;
	{
		char err[64];

		assert_null(manifest_read(bad, len, err, sizeof(err)));
	}
	free(bad);
	free(text);
	plan_free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_hostile),
	};

	if (!wt_root("compiling a query resolves its probes in tracefs and probes perf events"))
		return WT_SKIP;
	return wt_status(cmocka_run_group_tests(tests, NULL, NULL));
}
