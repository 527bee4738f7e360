// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests of agent/result.h (agent/table.c, agent/output.c): canonical keys, tables of
 * mergeable states, window and stream output.  Plans come from compiling real queries (compiler_run up to PASS_PLAN); kernel keys
 * and per-CPU kernel values are built exactly as the generated BPF code builds them — the
 * key bytes at the plan's offsets, the values by the kernel's own update functions
 * (kernel/weft_agg.bpf.h, compiled here as host C) on two "CPUs".  Expected values are
 * computed independently from the inputs.  The symbol resolver used for stacks and
 * addresses is a fake (named so): real symbolization needs live processes, and what is
 * tested here is only how the table uses the resolver's answers.
 */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <jansson.h>

#include "agent/result.h"
#include "base/rowfmt.h"
#include "compiler/compiler.h"
#include "compiler/plan.h"
#include "kernel/weft_abi.h"
#include "kernel/weft_agg.bpf.h"
#include "tests/skip.h"

#define NCPU 2

/* ---- plans from real queries ---- */

struct compiled {
	struct compile_result res;
	struct diag_list dl;
	const struct plan *p;
};

static struct compiled *compile(const char *q)
{
	struct compile_opts o = { .sz = sizeof(o) };
	struct compiled *c = calloc(1, sizeof(*c));
	int rc;

	assert_non_null(c);
	diag_list_init(&c->dl, q, "query");
	rc = compiler_run(q, &o, PASS_PLAN, &c->dl, &c->res);
	if (rc) {
		diag_print(&c->dl, stderr, false);
		fail_msg("cannot compile: %s", q);
	}
	c->p = c->res.plan;
	return c;
}

static void compiled_free(struct compiled *c)
{
	compile_result_free(&c->res);
	diag_list_free(&c->dl);
	free(c);
}

/* ---- kernel keys and values, as the generated program writes them ---- */

/* What emit_agg_update() emits: one update per distinct value offset (shared sketches). */
static void kval_add(const struct plan *p, void *val, int64_t x)
{
	for (int a = 0; a < p->naggs; a++) {
		const struct plan_agg *g = &p->aggs[a];
		void *v = (uint8_t *)val + g->offset;
		bool dup = false;

		for (int b = 0; b < a; b++)
			dup |= p->aggs[b].offset == g->offset;
		if (dup)
			continue;
		switch (g->spec.kind) {
		case AGG_COUNT:
			weft_aggval_count_add(v, x);
			break;
		case AGG_SUM:
			weft_aggval_sum_add(v, x);
			break;
		case AGG_MIN:
			weft_aggval_min_add(v, x);
			break;
		case AGG_MAX:
			weft_aggval_max_add(v, x);
			break;
		case AGG_AVG:
			weft_aggval_avg_add(v, x);
			break;
		case AGG_STDDEV:
			weft_aggval_stddev_add(v, x);
			break;
		case AGG_HIST:
			weft_aggval_hist_add(v, x);
			break;
		case AGG_LHIST:
			weft_aggval_lhist_add(v, x, g->spec.lo, g->spec.hi, g->spec.step);
			break;
		case AGG_QUANTILE:
			weft_aggval_quantile_add(v, x);
			break;
		case AGG_DISTINCT:
			weft_aggval_distinct_add(v, x);
			break;
		default:
			fail();
		}
	}
}

/*
 * A fake kernel map: nkeys groups, each with a key and NCPU per-CPU values (8-aligned, as
 * libbpf hands them out).  `used` marks the groups that got an event (the map has no others).
 */
struct kmap {
	const struct plan *p;
	int n;
	uint8_t *keys;
	uint64_t *vals;
	size_t vwords;
	bool *used;
};

static struct kmap *kmap_new(const struct plan *p, int n)
{
	struct kmap *m = calloc(1, sizeof(*m));

	assert_non_null(m);
	m->p = p;
	m->n = n;
	m->vwords = (p->value_size + 7) / 8;
	m->keys = calloc((size_t)n, p->key_size);
	m->vals = calloc((size_t)n * NCPU * m->vwords, 8);
	m->used = calloc((size_t)n, sizeof(bool));
	assert_non_null(m->keys);
	assert_non_null(m->vals);
	assert_non_null(m->used);
	return m;
}

static void kmap_free(struct kmap *m)
{
	free(m->keys);
	free(m->vals);
	free(m->used);
	free(m);
}

static uint8_t *kmap_key(struct kmap *m, int k)
{
	return m->keys + (size_t)k * m->p->key_size;
}

static uint64_t *kmap_val(struct kmap *m, int k, int cpu)
{
	return m->vals + ((size_t)k * NCPU + (size_t)cpu) * m->vwords;
}

static void key_str(struct kmap *m, int k, int slot, const char *s)
{
	const struct plan_slot *ks = &m->p->keys[slot];

	memcpy(kmap_key(m, k) + ks->offset, s, strnlen(s, ks->size));
}

static void key_int(struct kmap *m, int k, int slot, int word, int64_t v)
{
	memcpy(kmap_key(m, k) + m->p->keys[slot].offset + 8 * word, &v, sizeof(v));
}

static void kmap_event(struct kmap *m, int k, int cpu, int64_t x)
{
	kval_add(m->p, kmap_val(m, k, cpu), x);
	m->used[k] = true;
}

/* Drain the fake map into t, as the agent's drain callback does. */
static void kmap_drain(struct kmap *m, struct agent_table *t, const struct agent_resolver *r)
{
	for (int k = 0; k < m->n; k++) {
		const void *cpu_vals[NCPU];

		if (!m->used[k])
			continue;
		for (int c = 0; c < NCPU; c++)
			cpu_vals[c] = kmap_val(m, k, c);
		assert_int_equal(agent_table_add_kernel(t, kmap_key(m, k), cpu_vals, NCPU, r), 0);
	}
}

/* ---- output capture ---- */

static char *print_table(const struct agent_table *t, enum agent_format fmt,
			 const struct agent_window_stats *st)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	assert_non_null(f);
	assert_int_equal(agent_table_print(t, fmt, st, f), 0);
	fclose(f);
	assert_non_null(buf);
	return buf;
}

static void assert_contains(const char *hay, const char *needle)
{
	if (!strstr(hay, needle))
		fail_msg("expected\n  %s\nin\n%s", needle, hay);
}

static void assert_lacks(const char *hay, const char *needle)
{
	if (strstr(hay, needle))
		fail_msg("did not expect\n  %s\nin\n%s", needle, hay);
}

/* One JSON window: exactly one line, an object. */
static void assert_one_json_line(const char *s)
{
	size_t n = strlen(s);

	assert_true(n > 2);
	assert_int_equal(s[0], '{');
	assert_int_equal(s[n - 1], '\n');
	assert_int_equal(s[n - 2], '}');
	assert_null(memchr(s, '\n', n - 1));
}

/* ---- tests ---- */

static const char q_calls[] = "from profile:99hz group by comm select count() as calls, "
			      "sum(cpu) as total order by calls desc limit 3";

/* Per-CPU values of one group become one group; count and sum exact. */
static void test_merge_across_cpus(void **state)
{
	struct compiled *c = compile(q_calls);
	struct kmap *m = kmap_new(c->p, 2);
	struct agent_table *t = agent_table_new(c->p, 0);
	struct agent_window_stats st = { .index = 0 };
	char *json, *text;

	assert_non_null(t);
	key_str(m, 0, 0, "bash");
	key_str(m, 1, 0, "cat");
	for (int i = 0; i < 5; i++)
		kmap_event(m, 0, 0, 3);
	for (int i = 0; i < 7; i++)
		kmap_event(m, 0, 1, 4);
	for (int i = 0; i < 3; i++)
		kmap_event(m, 1, 1, 1);
	kmap_drain(m, t, NULL);
	assert_int_equal(agent_table_groups(t), 2);
	assert_int_equal(agent_table_overflow(t), 0);

	json = print_table(t, AGENT_FMT_JSON, &st);
	assert_one_json_line(json);
	assert_contains(json, "\"type\":\"window\",\"index\":0,");
	assert_contains(json, "\"columns\":[\"comm\",\"calls\",\"total\"]");
	assert_contains(json, "\"rows\":[{\"comm\":\"bash\",\"calls\":12,\"total\":43},"
			      "{\"comm\":\"cat\",\"calls\":3,\"total\":3}]");
	assert_contains(json, "\"lost\":{\"map_full\":0,\"ringbuf_full\":0,");
	assert_contains(json, "\"misses\":0,\"overflow\":0}");

	/* aligned: text left, numbers right, two spaces between columns */
	text = print_table(t, AGENT_FMT_TEXT, &st);
	assert_string_equal(text, "window 0: 2 groups\n"
				  "comm  calls  total\n"
				  "bash     12     43\n"
				  "cat       3      3\n");

	/* the same entries drained again add up (windows merged into one table) */
	kmap_drain(m, t, NULL);
	free(json);
	json = print_table(t, AGENT_FMT_JSON, &st);
	assert_contains(json, "{\"comm\":\"bash\",\"calls\":24,\"total\":86}");

	agent_table_clear(t);
	assert_int_equal(agent_table_groups(t), 0);
	free(json);
	free(text);
	agent_table_free(t);
	kmap_free(m);
	compiled_free(c);
}

/* order by calls desc limit 3 over 10 groups: the top 3, best first. */
static void test_order_limit(void **state)
{
	static const int counts[10] = { 4, 9, 1, 10, 6, 2, 8, 3, 7, 5 };
	struct compiled *c = compile(q_calls);
	struct kmap *m = kmap_new(c->p, 10);
	struct agent_table *t = agent_table_new(c->p, 0);
	struct agent_window_stats st = { .index = 7 };
	const char *a, *b, *d;
	char *json, *text;

	assert_non_null(t);
	for (int k = 0; k < 10; k++) {
		char name[16];

		snprintf(name, sizeof(name), "proc%d", k);
		key_str(m, k, 0, name);
		for (int i = 0; i < counts[k]; i++)
			kmap_event(m, k, i % NCPU, 1);
	}
	kmap_drain(m, t, NULL);
	assert_int_equal(agent_table_groups(t), 10);

	json = print_table(t, AGENT_FMT_JSON, &st);
	assert_contains(json, "\"index\":7,");
	assert_contains(json, "\"rows\":[{\"comm\":\"proc3\",\"calls\":10,\"total\":10},"
			      "{\"comm\":\"proc1\",\"calls\":9,\"total\":9},"
			      "{\"comm\":\"proc6\",\"calls\":8,\"total\":8}],\"groups\":10,");
	assert_lacks(json, "proc8");

	text = print_table(t, AGENT_FMT_TEXT, &st);
	assert_contains(text, "window 7: 3 of 10 groups\n");
	a = strstr(text, "proc3");
	b = strstr(text, "proc1");
	d = strstr(text, "proc6");
	assert_non_null(a);
	assert_non_null(b);
	assert_non_null(d);
	assert_true(a < b && b < d);
	assert_null(strstr(text, "proc8"));

	free(json);
	free(text);
	agent_table_free(t);
	kmap_free(m);
	compiled_free(c);
}

/* Without order by: by the one aggregate ascending (as bpftrace), else by key. */
static void test_default_order(void **state)
{
	struct compiled *c1 = compile("from profile:99hz group by comm select count() as n");
	struct compiled *c2 = compile("from profile:99hz group by cpu select count() as n, "
				      "max(pid) as top");
	struct kmap *m1 = kmap_new(c1->p, 3), *m2 = kmap_new(c2->p, 3);
	struct agent_table *t1 = agent_table_new(c1->p, 0), *t2 = agent_table_new(c2->p, 0);
	char *j1, *j2;

	key_str(m1, 0, 0, "a");
	key_str(m1, 1, 0, "b");
	key_str(m1, 2, 0, "c");
	for (int i = 0; i < 3; i++)
		kmap_event(m1, 0, 0, 0);
	kmap_event(m1, 1, 1, 0);
	kmap_event(m1, 2, 0, 0);
	kmap_event(m1, 2, 1, 0);
	kmap_drain(m1, t1, NULL);
	j1 = print_table(t1, AGENT_FMT_JSON, NULL);
	assert_contains(j1, "\"rows\":[{\"comm\":\"b\",\"n\":1},{\"comm\":\"c\",\"n\":2},"
			    "{\"comm\":\"a\",\"n\":3}]");

	/* integer keys compare as numbers, not as bytes */
	key_int(m2, 0, 0, 0, 256);
	key_int(m2, 1, 0, 0, 3);
	key_int(m2, 2, 0, 0, 17);
	kmap_event(m2, 0, 0, 5);
	kmap_event(m2, 1, 0, 6);
	kmap_event(m2, 2, 1, 7);
	kmap_drain(m2, t2, NULL);
	j2 = print_table(t2, AGENT_FMT_JSON, NULL);
	assert_contains(j2,
			"\"rows\":[{\"cpu\":3,\"n\":1,\"top\":6},{\"cpu\":17,\"n\":1,\"top\":7},"
			"{\"cpu\":256,\"n\":1,\"top\":5}]");

	free(j1);
	free(j2);
	agent_table_free(t1);
	agent_table_free(t2);
	kmap_free(m1);
	kmap_free(m2);
	compiled_free(c1);
	compiled_free(c2);
}

/* order by a key column: by its value (desc here), then limit. */
static void test_order_by_key(void **state)
{
	struct compiled *c = compile("from profile:99hz group by comm select comm, count() as n "
				     "order by comm desc limit 2");
	struct kmap *m = kmap_new(c->p, 4);
	struct agent_table *t = agent_table_new(c->p, 0);
	struct agent_window_stats st = { .index = 5, .start_ns = 1000000000, .end_ns = 2500000000 };
	static const char *const names[] = { "bb", "a", "zz", "c" };
	char *json, *text;

	for (int k = 0; k < 4; k++) {
		key_str(m, k, 0, names[k]);
		for (int i = 0; i <= k; i++)
			kmap_event(m, k, 0, 0);
	}
	kmap_drain(m, t, NULL);
	json = print_table(t, AGENT_FMT_JSON, &st);
	assert_contains(json, "\"start_ns\":1000000000,\"end_ns\":2500000000,");
	assert_contains(json, "\"rows\":[{\"comm\":\"zz\",\"n\":3},{\"comm\":\"c\",\"n\":4}],");
	text = print_table(t, AGENT_FMT_TEXT, &st);
	assert_contains(text, "window 5 at ");
	assert_contains(text, " (1.500s): 2 of 4 groups\ncomm  n\nzz    3\nc     4\n");
	free(json);
	free(text);
	agent_table_free(t);
	kmap_free(m);
	compiled_free(c);
}

static const char q_all[] =
	"from profile:99hz group by comm select count() as calls, sum(cpu) as s, min(cpu) as lo, "
	"max(cpu) as hi, avg(cpu) as mean, stddev(cpu) as sd, hist(cpu) as h, "
	"lhist(cpu, 0, 100, 10) as lh, p50(cpu) as med, p99(cpu) as p99, distinct(cpu) as d";

/* Every aggregate kind's value, in JSON and text; empty values are null / "-". */
static void test_aggregate_values(void **state)
{
	struct compiled *c = compile(q_all);
	struct kmap *m = kmap_new(c->p, 2);
	struct agent_table *t = agent_table_new(c->p, 0);
	char *json, *text, sd[64], expect[512];
	const void *zero[NCPU];

	assert_non_null(t);
	key_str(m, 0, 0, "bash");
	kmap_event(m, 0, 0, 1);
	kmap_event(m, 0, 1, 2);
	kmap_event(m, 0, 1, 3);
	kmap_event(m, 0, 0, 4);
	kmap_drain(m, t, NULL);
	/* a group whose values are all zero (nothing added): the empty state of every kind */
	key_str(m, 1, 0, "idle");
	zero[0] = kmap_val(m, 1, 0);
	zero[1] = kmap_val(m, 1, 1);
	assert_int_equal(agent_table_add_kernel(t, kmap_key(m, 1), zero, NCPU, NULL), 0);

	json = print_table(t, AGENT_FMT_JSON, NULL);
	assert_one_json_line(json);
	/* population stddev of 1..4 is sqrt(5/4) */
	snprintf(sd, sizeof(sd), "%.15g", sqrt(1.25));
	snprintf(expect, sizeof(expect),
		 "{\"comm\":\"bash\",\"calls\":4,\"s\":10,\"lo\":1,\"hi\":4,\"mean\":2.5,"
		 "\"sd\":%s,\"h\":{\"buckets\":[{\"min\":1,\"max\":1,\"count\":1},"
		 "{\"min\":2,\"max\":3,\"count\":2},{\"min\":4,\"max\":7,\"count\":1}],"
		 "\"count\":4},\"lh\":{\"buckets\":[{\"min\":0,\"max\":9,\"count\":4}],"
		 "\"count\":4},\"med\":2,\"p99\":4,\"d\":4}",
		 sd);
	assert_contains(json, expect);
	assert_contains(json, "{\"comm\":\"idle\",\"calls\":0,\"s\":0,\"lo\":null,\"hi\":null,"
			      "\"mean\":null,\"sd\":null,\"h\":{\"buckets\":[],\"count\":0},"
			      "\"lh\":{\"buckets\":[],\"count\":0},\"med\":null,\"p99\":null,"
			      "\"d\":0}");

	text = print_table(t, AGENT_FMT_TEXT, NULL);
	assert_contains(text, "comm  calls   s  lo  hi  mean    sd  med  p99  d\n");
	assert_contains(text, "bash      4  10   1   4  2.50  1.12    2    4  4\n");
	assert_contains(text, "idle      0   0   -   -     -     -    -    -  0\n");
	/* histograms under their row, bpftrace's bars, titled by column and key */
	assert_contains(
		text,
		"h[bash]: \n"
		"[1]                    1 |@@@@@@@@@@@@@@@@@@@@@@@@@@                          |\n"
		"[2, 4)                 2 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n"
		"[4, 8)                 1 |@@@@@@@@@@@@@@@@@@@@@@@@@@                          |\n");
	assert_contains(text, "lh[bash]: \n[0, 10)                4 |");

	free(json);
	free(text);
	agent_table_free(t);
	kmap_free(m);
	compiled_free(c);
}

static uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/*
 * Inputs split at random between two tables (two hosts, or two windows): merging them gives
 * exactly the table of all inputs, in either order, and prints identically.
 */
static void test_merge_equals_union(void **state)
{
	static const char *const names[] = { "bash",	     "cat",  "postgres",
					     "redis-server", "sshd", "weft" };
	const int nk = (int)(sizeof(names) / sizeof(names[0]));

	for (uint64_t seed = 1; seed <= 3; seed++) {
		struct compiled *c = compile(q_all);
		struct kmap *ma = kmap_new(c->p, nk), *mb = kmap_new(c->p, nk),
			    *mall = kmap_new(c->p, nk);
		struct agent_table *a = agent_table_new(c->p, 0), *b = agent_table_new(c->p, 0),
				   *b2 = agent_table_new(c->p, 0), *all = agent_table_new(c->p, 0);
		struct agent_window_stats st = { .index = 3, .start_ns = 1, .end_ns = 0 };
		uint64_t s = seed;
		char *ja, *jall, *ta, *tall;

		for (int k = 0; k < nk; k++) {
			key_str(ma, k, 0, names[k]);
			key_str(mb, k, 0, names[k]);
			key_str(mall, k, 0, names[k]);
		}
		for (int i = 0; i < 2000; i++) {
			int k = (int)(rng_next(&s) % (uint64_t)nk),
			    cpu = (int)(rng_next(&s) % NCPU);
			int64_t x = (int64_t)(rng_next(&s) % 100000) - 100;

			kmap_event((rng_next(&s) & 1) ? ma : mb, k, cpu, x);
			kmap_event(mall, k, cpu, x);
		}
		kmap_drain(ma, a, NULL);
		kmap_drain(mb, b, NULL);
		kmap_drain(mb, b2, NULL);
		kmap_drain(mall, all, NULL);
		assert_false(agent_table_equal(a, all));

		assert_int_equal(agent_table_merge(a, b), 0);
		assert_true(agent_table_equal(a, all));
		assert_true(agent_table_equal(all, a));
		ja = print_table(a, AGENT_FMT_JSON, &st);
		jall = print_table(all, AGENT_FMT_JSON, &st);
		assert_string_equal(ja, jall);
		ta = print_table(a, AGENT_FMT_TEXT, &st);
		tall = print_table(all, AGENT_FMT_TEXT, &st);
		assert_string_equal(ta, tall);

		/* the other order */
		kmap_drain(ma, b2, NULL); /* b2 = b + a, built the other way round */
		assert_true(agent_table_equal(b2, all));

		/* a table cannot merge into itself */
		assert_int_equal(agent_table_merge(a, a), -EINVAL);

		free(ja);
		free(jall);
		free(ta);
		free(tall);
		agent_table_free(a);
		agent_table_free(b);
		agent_table_free(b2);
		agent_table_free(all);
		kmap_free(ma);
		kmap_free(mb);
		kmap_free(mall);
		compiled_free(c);
	}
}

/* A table never grows past max_groups: the rest is counted and reported. */
static void test_overflow(void **state)
{
	struct compiled *c = compile(q_calls);
	struct kmap *m = kmap_new(c->p, 5);
	struct agent_table *t = agent_table_new(c->p, 3), *big = agent_table_new(c->p, 0);
	struct agent_table *small = agent_table_new(c->p, 2);
	struct agent_window_stats st = { .index = 1 };
	char *json, *text;

	st.drops[WEFT_DROP_MAP_FULL] = 12;
	st.drops[WEFT_DROP_STR_TRUNC] = 4;
	for (int k = 0; k < 5; k++) {
		char name[16];

		snprintf(name, sizeof(name), "p%d", k);
		key_str(m, k, 0, name);
		kmap_event(m, k, 0, 1);
	}
	kmap_drain(m, t, NULL);
	assert_int_equal(agent_table_groups(t), 3);
	assert_int_equal(agent_table_overflow(t), 2);

	json = print_table(t, AGENT_FMT_JSON, &st);
	assert_contains(json, "\"lost\":{\"map_full\":12,\"ringbuf_full\":0,\"span_table_full\":0,"
			      "\"span_evicted\":0,\"span_start_replaced\":0},");
	assert_contains(json, "\"notes\":{\"stack_failed\":0,\"string_fault\":0,"
			      "\"string_truncated\":4,\"span_end_without_start\":0},");
	assert_contains(json, "\"overflow\":2}");
	/* a caller's overflow and members (weft submit: the cluster's): one valid object */
	{
		struct agent_print_extra x = { .has_overflow = true,
					       .overflow = 9,
					       .json_members =
						       ",\"query_id\":7,\"hosts\":[\"a\"]" };
		char *buf = NULL;
		size_t len = 0;
		FILE *f = open_memstream(&buf, &len);
		json_error_t err;
		json_t *o;

		assert_non_null(f);
		assert_int_equal(agent_table_print_ext(t, AGENT_FMT_JSON, &st, &x, f), 0);
		fclose(f);
		o = json_loads(buf, JSON_REJECT_DUPLICATES, &err);
		if (!o)
			fail_msg("not JSON (%s): %s", err.text, buf);
		assert_int_equal(json_integer_value(json_object_get(o, "overflow")), 9);
		assert_int_equal(json_integer_value(json_object_get(o, "query_id")), 7);
		assert_string_equal(
			json_string_value(json_array_get(json_object_get(o, "hosts"), 0)), "a");
		assert_int_equal(json_integer_value(json_object_get(o, "groups")), 3);
		json_decref(o);
		free(buf);
	}
	text = print_table(t, AGENT_FMT_TEXT, &st);
	assert_contains(text, "\nlost: 12 events (map_full), 2 groups (agent_table_full)\n");
	assert_contains(text, "\nnotes: 4 strings (string_truncated)\n");

	/* merging counts what does not fit, plus what the source could not hold */
	kmap_drain(m, big, NULL);
	assert_int_equal(agent_table_merge(small, big), 0);
	assert_int_equal(agent_table_groups(small), 2);
	assert_int_equal(agent_table_overflow(small), 3);
	assert_int_equal(agent_table_merge(small, t), 0);
	assert_int_equal(agent_table_overflow(small), 3 + 1 + 2);
	agent_table_clear(small);
	assert_int_equal(agent_table_overflow(small), 0);

	free(json);
	free(text);
	agent_table_free(t);
	agent_table_free(big);
	agent_table_free(small);
	kmap_free(m);
	compiled_free(c);
}

/* ---- a fake resolver (see the top of the file) ---- */

struct fake_ctx {
	int stack_calls;
	uint32_t last_pid;
	bool last_user;
};

static char *fake_stack(void *ctx, int64_t id, bool user, uint32_t pid)
{
	struct fake_ctx *f = ctx;

	f->stack_calls++;
	f->last_pid = pid;
	f->last_user = user;
	if (id == 99)
		return NULL; /* cannot symbolize */
	if (!user)
		return strdup("do_syscall_64;ksys_read");
	return strdup(id == 1 || id == 7 ? "main;work;leaf" : "main;idle");
}

static char *fake_usym(void *ctx, uint64_t addr, uint32_t pid)
{
	char buf[64];

	if (addr == 0xdead)
		return NULL;
	snprintf(buf, sizeof(buf), "malloc+%u@%u", (unsigned)(addr & 0xff), pid);
	return strdup(buf);
}

static char *fake_ksym(void *ctx, uint64_t addr)
{
	return addr == 0xffffffff81000000ULL ? strdup("_text") : NULL;
}

/* Stack ids differ across windows; their symbolized frames are the key. */
static void test_canonical_stacks(void **state)
{
	struct compiled *c = compile("from profile:99hz group by ustack, kstack "
				     "select count() as samples");
	struct kmap *m = kmap_new(c->p, 5);
	struct agent_table *t = agent_table_new(c->p, 0), *t2 = agent_table_new(c->p, 0);
	struct fake_ctx fc = { 0 };
	struct agent_resolver r = { .ctx = &fc, .stack = fake_stack, .host = "h1" };
	char *json;

	/* ids 1 and 7 (two windows) are the same stack; 3 another; 99 unresolvable; -1 lost */
	key_int(m, 0, 0, 0, 1);
	key_int(m, 0, 0, 1, 4242);
	key_int(m, 1, 0, 0, 7);
	key_int(m, 1, 0, 1, 4242);
	key_int(m, 2, 0, 0, 3);
	key_int(m, 3, 0, 0, 99);
	key_int(m, 4, 0, 0, -1);
	for (int k = 0; k < 5; k++)
		key_int(m, k, 1, 0, 5);
	kmap_event(m, 0, 0, 0);
	kmap_event(m, 0, 1, 0);
	kmap_event(m, 1, 1, 0);
	kmap_event(m, 2, 0, 0);
	kmap_event(m, 3, 0, 0);
	kmap_event(m, 4, 1, 0);
	kmap_drain(m, t, &r);
	assert_int_equal(agent_table_groups(t), 4);
	assert_int_equal(fc.stack_calls, 4 + 5); /* no call for id -1 */
	json = print_table(t, AGENT_FMT_JSON, NULL);
	assert_contains(json,
			"{\"ustack\":\"main;work;leaf\",\"kstack\":\"do_syscall_64;ksys_read\","
			"\"samples\":3}");
	assert_contains(json, "{\"ustack\":\"main;idle\",\"kstack\":\"do_syscall_64;ksys_read\","
			      "\"samples\":1}");
	assert_contains(json, "{\"ustack\":\"[ustack 99]\",");
	assert_contains(json, "{\"ustack\":\"[no stack]\",");

	/* the pid in the key's second word reaches the resolver */
	fc.stack_calls = 0;
	{
		const void *v[NCPU] = { kmap_val(m, 0, 0), kmap_val(m, 0, 1) };
		struct agent_resolver only_user = { .ctx = &fc, .stack = fake_stack };

		assert_int_equal(agent_table_add_kernel(t2, kmap_key(m, 0), v, NCPU, &only_user),
				 0);
		assert_int_equal(fc.stack_calls, 2);
		assert_false(fc.last_user); /* kstack last, with pid 0 */
		assert_int_equal(fc.last_pid, 0);
	}
	fc.stack_calls = 0;
	{
		struct compiled *cu = compile("from profile:99hz group by ustack select count()");
		struct kmap *mu = kmap_new(cu->p, 1);
		struct agent_table *tu = agent_table_new(cu->p, 0);

		key_int(mu, 0, 0, 0, 1);
		key_int(mu, 0, 0, 1, 4242);
		kmap_event(mu, 0, 0, 0);
		kmap_drain(mu, tu, &r);
		assert_true(fc.last_user);
		assert_int_equal(fc.last_pid, 4242);
		agent_table_free(tu);
		kmap_free(mu);
		compiled_free(cu);
	}

	/* without a resolver: stable fallback text, no crash */
	agent_table_clear(t2);
	kmap_drain(m, t2, NULL);
	free(json);
	json = print_table(t2, AGENT_FMT_JSON, NULL);
	assert_contains(json,
			"{\"ustack\":\"[ustack 1]\",\"kstack\":\"[kstack 5]\",\"samples\":2}");

	free(json);
	agent_table_free(t);
	agent_table_free(t2);
	kmap_free(m);
	compiled_free(c);
}

/* usym/ksym through the resolver or as hex; host from the resolver; tables of two hosts. */
static void test_symbols_and_host(void **state)
{
	struct compiled *c = compile("from uprobe:libc:malloc group by usym(arg0) as fn, "
				     "ksym(arg1) as kfn, host select count() as n");
	struct kmap *m = kmap_new(c->p, 2);
	struct agent_table *ta = agent_table_new(c->p, 0), *tb = agent_table_new(c->p, 0);
	struct agent_resolver ra = { .usym = fake_usym, .ksym = fake_ksym, .host = "alpha" };
	struct agent_resolver rb = { .usym = fake_usym, .ksym = fake_ksym, .host = "beta" };
	char *json;

	key_int(m, 0, 0, 0, 0x1010);
	key_int(m, 0, 0, 1, 77);
	key_int(m, 0, 1, 0, (int64_t)0xffffffff81000000ULL);
	key_int(m, 1, 0, 0, 0xdead);
	key_int(m, 1, 0, 1, 77);
	key_int(m, 1, 1, 0, 0x1234);
	kmap_event(m, 0, 0, 0);
	kmap_event(m, 1, 1, 0);
	kmap_event(m, 1, 1, 0);
	kmap_drain(m, ta, &ra);
	kmap_drain(m, tb, &rb);
	kmap_drain(m, tb, &rb);
	assert_int_equal(agent_table_merge(ta, tb), 0);
	assert_int_equal(agent_table_groups(ta), 4);
	json = print_table(ta, AGENT_FMT_JSON, NULL);
	assert_contains(json,
			"{\"fn\":\"malloc+16@77\",\"kfn\":\"_text\",\"host\":\"alpha\",\"n\":1}");
	assert_contains(json,
			"{\"fn\":\"malloc+16@77\",\"kfn\":\"_text\",\"host\":\"beta\",\"n\":2}");
	assert_contains(json, "{\"fn\":\"0xdead\",\"kfn\":\"0x1234\",\"host\":\"beta\",\"n\":4}");

	free(json);
	agent_table_free(ta);
	agent_table_free(tb);
	kmap_free(m);
	compiled_free(c);
}

/* `probe` renders the attach point's name; a cookie out of range is rendered, not followed. */
static void test_probe_cookie(void **state)
{
	struct compiled *c = compile("from profile:99hz, interval:1s group by probe "
				     "select count() as n");
	struct kmap *m = kmap_new(c->p, 4);
	struct agent_table *t = agent_table_new(c->p, 0);
	char *json, expect[512];

	assert_int_equal(c->p->nattach, 2);
	key_int(m, 0, 0, 0, 0);
	key_int(m, 1, 0, 0, 1);
	key_int(m, 2, 0, 0, 2);
	key_int(m, 3, 0, 0, -1);
	for (int k = 0; k < 4; k++)
		kmap_event(m, k, 0, 0);
	kmap_drain(m, t, NULL);
	json = print_table(t, AGENT_FMT_JSON, NULL);
	snprintf(expect, sizeof(expect), "{\"probe\":\"%s\",\"n\":1}", c->p->attach[0].target.name);
	assert_contains(json, expect);
	assert_contains(json, "{\"probe\":\"profile:99hz\",\"n\":1}");
	assert_contains(json, "{\"probe\":\"interval:1s\",\"n\":1}");
	assert_contains(json, "{\"probe\":\"[probe 2]\",\"n\":1}");
	assert_contains(json, "{\"probe\":\"[probe 18446744073709551615]\",\"n\":1}");
	free(json);
	agent_table_free(t);
	kmap_free(m);
	compiled_free(c);
}

/* A query with no key: one group; the kernel array map hands over no key bytes. */
static void test_no_key(void **state)
{
	struct compiled *c = compile("from profile:99hz select count() as n, p50(cpu) as med, "
				     "p90(cpu) as p90");
	struct kmap *m = kmap_new(c->p, 1);
	struct agent_table *t = agent_table_new(c->p, 0);
	const void *v[NCPU] = { kmap_val(m, 0, 0), kmap_val(m, 0, 1) };
	char *json, *text;

	for (int i = 1; i <= 10; i++)
		kmap_event(m, 0, i % NCPU, i);
	assert_int_equal(agent_table_add_kernel(t, NULL, v, NCPU, NULL), 0);
	assert_int_equal(agent_table_add_kernel(t, NULL, v, NCPU, NULL), 0);
	assert_int_equal(agent_table_groups(t), 1);
	json = print_table(t, AGENT_FMT_JSON, NULL);
	/* 20 values, 1..10 twice: nearest rank 10 is 5, rank 18 is 9 */
	assert_contains(json, "\"rows\":[{\"n\":20,\"med\":5,\"p90\":9}]");
	text = print_table(t, AGENT_FMT_TEXT, NULL);
	assert_string_equal(text, "window 0: 1 group\n"
				  " n  med  p90\n"
				  "20    5    9\n");
	/* a keyed plan refuses a missing key */
	{
		struct compiled *ck = compile(q_calls);
		struct agent_table *tk = agent_table_new(ck->p, 0);

		assert_int_equal(agent_table_add_kernel(tk, NULL, v, NCPU, NULL), -EINVAL);
		assert_int_equal(agent_table_merge(tk, t), -EINVAL); /* different layouts */
		agent_table_free(tk);
		compiled_free(ck);
	}
	free(json);
	free(text);
	agent_table_free(t);
	kmap_free(m);
	compiled_free(c);
}

/* Strings: JSON escapes quotes, backslashes, controls and bad UTF-8; text stays one line. */
static void test_escaping(void **state)
{
	struct compiled *c = compile("from profile:99hz group by comm select count() as n");
	struct kmap *m = kmap_new(c->p, 2);
	struct agent_table *t = agent_table_new(c->p, 0);
	char *json, *text;

	key_str(m, 0, 0, "a\"b\\c\x01\xff\n");
	key_str(m, 1, 0, "caf\xc3\xa9");
	kmap_event(m, 0, 0, 0);
	kmap_event(m, 1, 0, 0);
	kmap_event(m, 1, 0, 0);
	kmap_drain(m, t, NULL);
	json = print_table(t, AGENT_FMT_JSON, NULL);
	assert_one_json_line(json);
	assert_contains(json, "{\"comm\":\"a\\\"b\\\\c\\u0001\\ufffd\\n\",\"n\":1}");
	assert_contains(json, "{\"comm\":\"caf\xc3\xa9\",\"n\":2}");
	text = print_table(t, AGENT_FMT_TEXT, NULL);
	assert_contains(text, "a\"b\\c\\x01\xff\\n  1\n");
	free(json);
	free(text);
	agent_table_free(t);
	kmap_free(m);
	compiled_free(c);
}

/* ---- stream rows ---- */

static char *print_row(const struct plan *p, const void *rec, size_t len, enum agent_format fmt,
		       const struct agent_resolver *r, int expect_rc)
{
	char *buf = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&buf, &n);

	assert_non_null(f);
	assert_int_equal(agent_row_print(p, rec, len, fmt, r, f), expect_rc);
	fclose(f);
	return buf;
}

static void test_stream_row(void **state)
{
	struct compiled *c = compile("from profile:99hz select time, pid, comm, cpu, probe");
	const struct plan *p = c->p;
	uint64_t rec[8] = { 0 }; /* the record after its header */
	uint8_t *b = (uint8_t *)rec;
	int64_t v;
	char *out = NULL;
	size_t n = 0;
	FILE *f;

	assert_false(p->aggregating);
	assert_int_equal(p->event_size, 48);
	v = 123456789;
	memcpy(b + p->fields[0].offset, &v, 8);
	v = 4242;
	memcpy(b + p->fields[1].offset, &v, 8);
	memcpy(b + p->fields[2].offset, "cat", 3);
	v = 1;
	memcpy(b + p->fields[3].offset, &v, 8);
	v = 0;
	memcpy(b + p->fields[4].offset, &v, 8);

	f = open_memstream(&out, &n);
	agent_row_header(p, AGENT_FMT_TEXT, f);
	agent_row_header(p, AGENT_FMT_JSON, f); /* nothing */
	fclose(f);
	assert_string_equal(out, "            time     pid comm                 cpu probe\n");
	free(out);

	out = print_row(p, rec, 48, AGENT_FMT_TEXT, NULL, 0);
	assert_string_equal(out,
			    "       123456789    4242 cat                    1 profile:99hz\n");
	free(out);
	out = print_row(p, rec, 48, AGENT_FMT_JSON, NULL, 0);
	assert_string_equal(out,
			    "{\"type\":\"row\",\"time\":123456789,\"pid\":4242,\"comm\":\"cat\","
			    "\"cpu\":1,\"probe\":\"profile:99hz\"}\n");
	free(out);

	/* a record longer than the layout (padding) is fine */
	out = print_row(p, rec, sizeof(rec), AGENT_FMT_JSON, NULL, 0);
	assert_contains(out, "\"pid\":4242");
	free(out);

	/* truncated: refused, nothing printed */
	out = print_row(p, rec, 47, AGENT_FMT_TEXT, NULL, -EINVAL);
	assert_string_equal(out, "");
	free(out);
	out = print_row(p, rec, 0, AGENT_FMT_JSON, NULL, -EINVAL);
	assert_string_equal(out, "");
	free(out);

	/* garbled: a comm without NUL, a wild cookie */
	memset(b + p->fields[2].offset, 'x', 16);
	v = 0x7fffffffffffffffLL;
	memcpy(b + p->fields[4].offset, &v, 8);
	out = print_row(p, rec, 48, AGENT_FMT_JSON, NULL, 0);
	assert_contains(out, "\"comm\":\"xxxxxxxxxxxxxxxx\",\"cpu\":1,"
			     "\"probe\":\"[probe 9223372036854775807]\"}\n");
	free(out);

	/* an aggregating plan is not a stream */
	{
		struct compiled *ca = compile(q_calls);

		out = print_row(ca->p, rec, 48, AGENT_FMT_TEXT, NULL, -EINVAL);
		assert_string_equal(out, "");
		free(out);
		compiled_free(ca);
	}
	compiled_free(c);
}

/* ntop() values as text (v4, v6 as RFC 5952, other families, none), and `format` rows. */
static void test_stream_format_inet(void **state)
{
	struct compiled *c = compile("from syscall:connect select pid, ntop(args.uservaddr) as a, "
				     "comm, args.addrlen as len, args.addrlen as ch "
				     "format '[%-6d] %20s|%.2s|%04x|%c%%'");
	const struct plan *p = c->p;
	uint64_t rec[16] = { 0 };
	uint8_t *b = (uint8_t *)rec;
	uint8_t *a = b + p->fields[1].offset;
	int64_t v;
	uint16_t fam;
	char *out;
	static const uint8_t v6[16] = {
		0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1
	};

	(void)state;
	assert_non_null(p->format);
	assert_int_equal(p->fields[1].render, RENDER_INET);
	assert_int_equal(p->fields[1].size, WEFT_INET_SIZE);
	v = 4242;
	memcpy(b + p->fields[0].offset, &v, 8);
	memcpy(b + p->fields[2].offset, "curl", 4);
	v = 0x41; /* 'A' for %c, 0041 for %04x */
	memcpy(b + p->fields[3].offset, &v, 8);
	memcpy(b + p->fields[4].offset, &v, 8);
	fam = WEFT_AF_INET6;
	memcpy(a, &fam, 2);
	memcpy(a + WEFT_INET_ADDR, v6, 16);
	out = print_row(p, rec, p->event_size, AGENT_FMT_TEXT, NULL, 0);
	assert_string_equal(out, "[4242  ]          2001:db8::1|cu|0041|A%\n");
	free(out);
	/* JSON is unchanged by the format: the address is a string */
	out = print_row(p, rec, p->event_size, AGENT_FMT_JSON, NULL, 0);
	assert_string_equal(out, "{\"type\":\"row\",\"pid\":4242,\"a\":\"2001:db8::1\","
				 "\"comm\":\"curl\",\"len\":65,\"ch\":65}\n");
	free(out);
	fam = WEFT_AF_INET;
	memcpy(a, &fam, 2);
	memcpy(a + WEFT_INET_ADDR, "\x0a\x00\x00\x01", 4);
	out = print_row(p, rec, p->event_size, AGENT_FMT_TEXT, NULL, 0);
	assert_string_equal(out, "[4242  ]             10.0.0.1|cu|0041|A%\n");
	free(out);
	fam = 1; /* AF_UNIX */
	memcpy(a, &fam, 2);
	out = print_row(p, rec, p->event_size, AGENT_FMT_JSON, NULL, 0);
	assert_contains(out, "\"a\":\"[family 1]\"");
	free(out);
	fam = 0;
	memcpy(a, &fam, 2);
	out = print_row(p, rec, p->event_size, AGENT_FMT_JSON, NULL, 0);
	assert_contains(out, "\"a\":\"[no address]\"");
	free(out);
	/* no header for formatted rows */
	{
		char *h = NULL;
		size_t n = 0;
		FILE *f = open_memstream(&h, &n);

		agent_row_header(p, AGENT_FMT_TEXT, f);
		fclose(f);
		assert_string_equal(h, "");
		free(h);
	}
	compiled_free(c);
}

/* The format parser: what it accepts, and where it places what it refuses. */
static void test_rowfmt_parse(void **state)
{
	static const struct {
		const char *fmt;
		int rc, nconv;
		uint32_t bad_off, bad_len;
	} cases[] = {
		{ "%d %s\n", 0, 2, 0, 0 },    { "%-08d%%", 0, 1, 0, 0 }, { "", 0, 0, 0, 0 },
		{ "%.5s|%255s", 0, 2, 0, 0 }, { "x %q", -1, 0, 2, 2 },	 { "%lld", -1, 0, 0, 2 },
		{ "%256d", -1, 0, 0, 4 },     { "%.3d", -1, 0, 0, 4 },	 { "ab%", -1, 0, 2, 1 },
		{ "%*d", -1, 0, 0, 2 },	      { "%05s", -1, 0, 0, 4 },	 { "%-%", -1, 0, 0, 3 },
		{ "%.", -1, 0, 0, 2 },
	};
	struct rowfmt *f = malloc(sizeof(*f));

	(void)state;
	assert_non_null(f);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint32_t bo = 0, bl = 0;
		const char *why = NULL;
		int rc = rowfmt_parse(cases[i].fmt, strlen(cases[i].fmt), f, &bo, &bl, &why);

		if (rc != cases[i].rc)
			fail_msg("'%s': %d, not %d", cases[i].fmt, rc, cases[i].rc);
		if (rc == 0) {
			assert_int_equal(f->nconv, cases[i].nconv);
		} else {
			assert_non_null(why);
			if (bo != cases[i].bad_off || bl != cases[i].bad_len)
				fail_msg("'%s': bad at %u+%u, not %u+%u", cases[i].fmt, bo, bl,
					 cases[i].bad_off, cases[i].bad_len);
		}
	}
	free(f);
}

/* Bad arguments and plans are refused, never followed. */
static void test_bad_input(void **state)
{
	struct compiled *c = compile(q_calls);
	struct plan bad;
	struct agent_table *t;
	const void *v[NCPU] = { NULL, NULL };
	uint8_t key[16] = "x";

	errno = 0;
	assert_null(agent_table_new(NULL, 0));
	assert_int_equal(errno, EINVAL);
	/* a key slot past key_size (a hostile manifest) */
	bad = *c->p;
	bad.key_size = 8;
	assert_null(agent_table_new(&bad, 0));
	bad = *c->p;
	bad.value_size = 8;
	assert_null(agent_table_new(&bad, 0));

	t = agent_table_new(c->p, 0);
	assert_non_null(t);
	assert_int_equal(agent_table_add_kernel(t, key, v, NCPU, NULL), -EINVAL);
	assert_int_equal(agent_table_add_kernel(t, key, NULL, NCPU, NULL), -EINVAL);
	assert_int_equal(agent_table_print(t, (enum agent_format)9, NULL, stdout), -EINVAL);
	assert_int_equal(agent_table_merge(t, NULL), -EINVAL);
	assert_int_equal(agent_table_groups(NULL), 0);
	agent_table_free(NULL);
	agent_table_free(t);
	compiled_free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_merge_across_cpus),
		cmocka_unit_test(test_order_limit),
		cmocka_unit_test(test_default_order),
		cmocka_unit_test(test_order_by_key),
		cmocka_unit_test(test_aggregate_values),
		cmocka_unit_test(test_merge_equals_union),
		cmocka_unit_test(test_overflow),
		cmocka_unit_test(test_canonical_stacks),
		cmocka_unit_test(test_symbols_and_host),
		cmocka_unit_test(test_probe_cookie),
		cmocka_unit_test(test_no_key),
		cmocka_unit_test(test_escaping),
		cmocka_unit_test(test_stream_row),
		cmocka_unit_test(test_stream_format_inet),
		cmocka_unit_test(test_rowfmt_parse),
		cmocka_unit_test(test_bad_input),
	};

	if (!wt_root("compiling a query resolves its probes in tracefs and probes perf events"))
		return WT_SKIP;
	return wt_status(cmocka_run_group_tests(tests, NULL, NULL));
}
