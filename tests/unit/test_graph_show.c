// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests of graph/show.[ch]: the terminal chart and the JSON of one trace, drawn from a
 * hand-built graph (Zipkin's skew.json as four tasks, corrected) and a hand-filled context,
 * so every mark has a known cause: exactly one lane per task, in tree order and indented by
 * depth; '*' on the four lanes of the critical path (all four are on it, worked out in
 * test_graph_skew.c); the skew note on the two lanes the correction moved; the rare event
 * marked '!' with its share and the common one not; the rare edge noted; the percentile and
 * concurrency from the context; the legend stating the 5% threshold; no escape sequences
 * without colour, and a hostile name's control characters printed as '?'.  The JSON carries
 * the same content, parsed back with jansson.
 */
#include <errno.h>
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "graph/graph.h"
#include "graph/show.h"
#include "graph/skew.h"

#define US 1000LL
#define T0 1470150000000000LL

static const struct graph_id128 TR = { 0, 0x1e223ff1f80f1c69ULL };

enum { ROOT = 1, CLIENT = 2, SERVER = 3, ASYNC = 4 };

static void task(struct graph *g, uint64_t id, uint64_t parent, const char *svc, const char *name,
		 const char *host, int64_t start_us, int64_t dur_us, const char *attrs)
{
	struct graph_task t = {
		.trace = TR,
		.id = id,
		.parent = parent,
		.service = svc,
		.name = name,
		.host = host,
		.pid = 7,
		.tid = 7,
		.start = start_us * US,
		.end = (start_us + dur_us) * US,
		.attrs = attrs,
	};

	assert_non_null(graph_add_task(g, &t));
}

static void event(struct graph *g, uint64_t task, int64_t t_us, const char *name)
{
	struct graph_event e = {
		.trace = TR, .task = task, .time = t_us * US, .name = name, .attrs = "{}"
	};

	assert_non_null(graph_add_event(g, &e));
}

/* skew.json's spans; the async task's name holds an escape sequence (hostile input) */
static void build(struct graph *g, struct graph_context *c)
{
	struct graph_edge e = {
		.trace = TR, .kind = GRAPH_EDGE_MESSAGE, .from_task = CLIENT, .to_task = SERVER
	};

	graph_init(g);
	task(g, ROOT, 0, "servicea", "get", "127.0.0.0", T0 + 4071068, 99411,
	     "{\"kind\":\"SERVER\"}");
	task(g, CLIENT, ROOT, "servicea", "post", "127.0.0.0", T0 + 4074202, 94539,
	     "{\"kind\":\"CLIENT\"}");
	task(g, SERVER, CLIENT, "serviceb", "post", "192.0.0.0", T0 + 4008761, 93577,
	     "{\"kind\":\"SERVER\"}");
	task(g, ASYNC, SERVER, "serviceb", "async\033]0;pwned\007", "192.0.0.0", T0 + 4008762,
	     65000, "{}");
	event(g, SERVER, T0 + 4008770, "wr");
	event(g, ROOT, T0 + 4100000, "retry");
	assert_non_null(graph_add_edge(g, &e));
	assert_int_equal(graph_skew_correct(g, TR, NULL), 0);

	/* the context as a store would give it: index-aligned with g */
	c->ntasks = g->ntasks;
	c->nevents = g->nevents;
	c->nedges = g->nedges;
	c->tasks = calloc(c->ntasks, sizeof(*c->tasks));
	c->events = calloc(c->nevents, sizeof(*c->events));
	c->edges = calloc(c->nedges, sizeof(*c->edges));
	assert_non_null(c->tasks);
	assert_non_null(c->events);
	assert_non_null(c->edges);
	for (size_t i = 0; i < c->ntasks; i++) {
		c->tasks[i].type_count = 10;
		c->tasks[i].percentile = 10.0 * (double)(i + 1); /* 10, 20, 30, 40 */
		c->tasks[i].concurrency_max = (uint32_t)i;
	}
	c->events[0] = (struct graph_event_ctx){ .share = 0.9, .rare = false }; /* wr */
	c->events[1] = (struct graph_event_ctx){ .share = 0.02, .rare = true }; /* retry */
	c->edges[0] = (struct graph_edge_ctx){ .share = 0.01, .rare = true };
}

static void ctx_free(struct graph_context *c)
{
	free(c->tasks);
	free(c->events);
	free(c->edges);
}

static char *render(const struct graph *g, const struct graph_context *c, bool color, int w)
{
	struct graph_show_opts o = { .sz = sizeof(o), .width = w, .color = color };
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	assert_non_null(f);
	assert_int_equal(graph_show_text(f, g, TR, c, &o), 0);
	fclose(f);
	return buf;
}

/* The lane of a task: the line that holds its label (unique in these tests). */
static const char *lane(const char *out, const char *label, char *line, size_t sz)
{
	const char *p = strstr(out, label), *b, *e;

	assert_non_null(p);
	for (b = p; b > out && b[-1] != '\n'; b--)
		;
	e = strchr(p, '\n');
	assert_non_null(e);
	assert_true((size_t)(e - b) < sz);
	memcpy(line, b, (size_t)(e - b));
	line[e - b] = 0;
	return line;
}

static void test_text(void **state)
{
	struct graph g;
	struct graph_context c = { 0 };
	char *out, line[1024];
	size_t lanes = 0;

	(void)state;
	build(&g, &c);
	out = render(&g, &c, false, 100);
	/* lanes are the lines with a bar "|...|" followed by " @" */
	for (const char *p = out; *p;) {
		const char *nl = strchr(p, '\n');
		size_t n = nl ? (size_t)(nl - p) : strlen(p);

		if (memmem(p, n, "| @", 3))
			lanes++;
		p += n + (nl != NULL);
	}
	assert_int_equal(lanes, 4);
	assert_null(strchr(out, '\033')); /* plain text: no escapes, the hostile one neither */
	assert_non_null(strstr(out, "async?]0;pwned"));

	/* tree order and indentation: root, client (2 spaces), server (4), async (6) */
	assert_true(strstr(out, "* servicea: get") < strstr(out, "*   servicea: post"));
	assert_true(strstr(out, "*   servicea: post") < strstr(out, "*     serviceb: post"));
	assert_true(strstr(out, "*     serviceb: post") < strstr(out, "*       serviceb: async"));

	/* skew on the two moved lanes only: +65922 µs printed to 3 digits */
	lane(out, "serviceb: post", line, sizeof(line));
	assert_non_null(strstr(line, "skew +65.9ms"));
	assert_non_null(strstr(line, " p30 c2"));
	assert_non_null(strstr(line, "^rare message edge from servicea: post (1.0%)"));
	lane(out, "serviceb: async", line, sizeof(line));
	assert_non_null(strstr(line, "skew +65.9ms"));
	lane(out, "servicea: get", line, sizeof(line));
	assert_null(strstr(line, "skew"));
	/* the root: 99.4 ms from the trace's start, its rare event marked with its share */
	assert_non_null(strstr(line, "@0ns 99.4ms p10 c0"));
	assert_non_null(strstr(line, "!retry (2.0%)"));
	assert_non_null(strchr(line, '!'));
	/* the common event is drawn ('.') but not listed */
	lane(out, "serviceb: post", line, sizeof(line));
	assert_null(strstr(line, "!wr"));
	assert_non_null(strstr(out, "under 5% of the tasks"));
	assert_non_null(strstr(out, "critical path: 7 segments through 4 tasks over 99.4ms"));
	assert_non_null(strstr(out, "clock skew corrected: 2 tasks moved"));
	free(out);

	/* colour: escapes appear, and the hostile name still has none of its own */
	out = render(&g, &c, true, 100);
	assert_non_null(strstr(out, "\033[1;31m#"));
	assert_null(strstr(out, "\033]0;"));
	free(out);

	/* no context: drawn, with a note, no percentiles */
	out = render(&g, NULL, false, 40);
	assert_non_null(strstr(out, "no aggregate context"));
	assert_null(strstr(out, " p10"));
	free(out);
	ctx_free(&c);
	graph_free(&g);
}

static void test_json(void **state)
{
	struct graph g;
	struct graph_context c = { 0 };
	char *buf = NULL;
	size_t len = 0, crit = 0;
	FILE *f;
	json_t *root, *tasks, *t;
	json_error_t err;

	(void)state;
	build(&g, &c);
	f = open_memstream(&buf, &len);
	assert_non_null(f);
	assert_int_equal(graph_show_json(f, &g, TR, &c), 0);
	fclose(f);
	root = json_loads(buf, 0, &err);
	assert_non_null(root);
	assert_string_equal(json_string_value(json_object_get(root, "trace")),
			    "00000000000000001e223ff1f80f1c69");
	/* the trace runs from get's start to get's end: 99411 µs */
	assert_int_equal(json_integer_value(json_object_get(root, "duration")), 99411 * US);
	assert_true(json_real_value(json_object_get(root, "rare_share")) == 0.05);
	tasks = json_object_get(root, "tasks");
	assert_int_equal(json_array_size(tasks), 4);
	for (size_t i = 0; i < 4; i++)
		crit += json_is_true(json_object_get(json_array_get(tasks, i), "critical"));
	assert_int_equal(crit, 4);
	t = json_array_get(tasks, 2); /* lane order: the server half */
	assert_string_equal(json_string_value(json_object_get(t, "id")), "0000000000000003");
	assert_int_equal(json_integer_value(json_object_get(t, "depth")), 2);
	assert_int_equal(json_integer_value(json_object_get(t, "skew")), 65922 * US);
	assert_int_equal(json_integer_value(json_object_get(t, "offset")),
			 (4074683 - 4071068) * US);
	assert_string_equal(json_string_value(json_object_get(json_object_get(t, "attrs"), "kind")),
			    "SERVER");
	assert_int_equal(json_array_size(json_object_get(t, "events")), 1);
	assert_int_equal(json_array_size(json_object_get(root, "critical_path")), 7);
	assert_true(json_is_true(
		json_object_get(json_array_get(json_object_get(root, "edges"), 0), "rare")));
	json_decref(root);
	free(buf);
	ctx_free(&c);
	graph_free(&g);
}

static void test_unknown_trace(void **state)
{
	struct graph g;
	struct graph_context c = { 0 };
	struct graph_id128 other = { 9, 9 };

	(void)state;
	build(&g, &c);
	assert_int_equal(graph_show_text(stdout, &g, other, &c, NULL), -ENOENT);
	assert_int_equal(graph_show_json(stdout, &g, other, &c), -ENOENT);
	ctx_free(&c);
	graph_free(&g);
}

/* 50,000 tasks deep: one lane each, indentation capped, no crash. */
static void test_deep(void **state)
{
	enum { N = 50000 };
	struct graph g;
	char *buf = NULL;
	size_t len = 0, lines = 0;
	FILE *f;

	(void)state;
	graph_init(&g);
	for (int64_t i = 0; i < N; i++)
		task(&g, (uint64_t)i + 1, (uint64_t)i, "s", "n", "h", i, 2 * N - 2 * i, "{}");
	f = open_memstream(&buf, &len);
	assert_non_null(f);
	assert_int_equal(graph_show_text(f, &g, TR, NULL, NULL), 0);
	fclose(f);
	/* not strstr() in a loop: ASan's strstr measures the rest of the buffer on every call */
	for (size_t i = 0; i + 3 <= len; i++)
		lines += memcmp(buf + i, "| @", 3) == 0;
	assert_int_equal(lines, N);
	free(buf);
	graph_free(&g);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_text),
		cmocka_unit_test(test_json),
		cmocka_unit_test(test_unknown_trace),
		cmocka_unit_test(test_deep),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
