// SPDX-License-Identifier: Apache-2.0
/*
 * The LTTng CTF importer (graph/import_ctf.c) on a CTF trace written by hand
 * (tests/fuzz/ctf_fixture.h), so that it runs without root or a session daemon: the exact
 * graph of the reference stream (its comment in the fixture says what each event becomes),
 * the search for traces below a directory, kernel traces skipped, edges and events naming
 * unknown tasks dropped, a thread's bound of open tasks, and the refusals: a payload field of
 * the wrong type, a status, edge kind or time out of range, a task begun twice, a stream cut
 * short, a FIFO among the streams, metadata that crashes babeltrace2 itself (the reader
 * process dies, the test lives), each with the event index or the directory, and the graph
 * left as it was.  Most imports go through the reader process (graph_import_ctf_stats());
 * test_here reads the reference in this process.  The recorded trace of a real LTTng session
 * is tests/runtime/test_graph_ctf.c's.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "graph/graph.h"
#include "graph/import.h"
#include "tests/fuzz/ctf_fixture.h"

#define NS(ts) ((int64_t)CTF_FIX_OFFSET_S * 1000000000 + (ts))

static char dir[256];

static int mk_dir(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/weft-test-ctf-XXXXXX");
	return mkdtemp(dir) ? 0 : -1;
}

static int rm_dir(void **state)
{
	char cmd[PATH_MAX + 16];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd) == 0 ? 0 : -1;
}

static const struct graph_task *task(const struct graph *g, uint64_t id)
{
	for (size_t i = 0; i < g->ntasks; i++)
		if (g->tasks[i].id == id)
			return &g->tasks[i];
	fail_msg("no task %llu", (unsigned long long)id);
	return NULL;
}

static void check_json(const char *text, const char *expect)
{
	json_t *a = json_loads(text, 0, NULL), *b = json_loads(expect, 0, NULL);

	assert_non_null(a);
	assert_non_null(b);
	if (!json_equal(a, b))
		fail_msg("attrs %s, expected %s", text, expect);
	json_decref(a);
	json_decref(b);
}

static void test_reference(void **state)
{
	struct ctf_fix_stream s;
	struct graph g;
	struct graph_ctf_stats st;
	struct graph_import_err err;
	const struct graph_task *t;
	char why[256];
	size_t work = 0;

	(void)state;
	ctf_fix_reference(&s, false);
	assert_int_equal(ctf_fix_write(dir, ctf_fixture_metadata("uint64_t"), s.buf, s.len), 0);
	graph_init(&g);
	assert_int_equal(graph_import_ctf_stats(dir, &g, &st, &err), GRAPH_FMT_CTF);
	assert_int_equal(g.ntasks, 3);
	assert_int_equal(g.nevents, 3);
	assert_int_equal(g.nedges, 2);
	assert_int_equal(st.events, 12);
	assert_int_equal(st.dropped_no_task, 1);
	assert_int_equal(st.dropped_unknown, 1);
	assert_int_equal(st.unmatched_ends, 1);
	assert_int_equal(st.cut, 1);
	assert_int_equal(st.kernel_events, 0);
	assert_int_equal(graph_check(&g, why, sizeof(why)), 0);

	t = task(&g, 1);
	assert_int_equal(t->trace.hi, 0x77);
	assert_int_equal(t->trace.lo, 0x88);
	assert_int_equal(t->parent, 0);
	assert_string_equal(t->service, "svc");
	assert_string_equal(t->name, "root");
	assert_string_equal(t->host, "fuzzhost");
	assert_int_equal(t->pid, 10);
	assert_int_equal(t->tid, 10);
	assert_int_equal(t->start, NS(1010));
	assert_int_equal(t->end, NS(1080));
	assert_int_equal(t->status, GRAPH_STATUS_OK);
	assert_int_equal(t->source, GRAPH_SRC_LTTNG);
	check_json(t->attrs, "{\"procname\":\"fixture\"}");
	t = task(&g, 2);
	assert_int_equal(t->parent, 1);
	assert_int_equal(t->tid, 11);
	assert_int_equal(t->start, NS(1030));
	assert_int_equal(t->end, NS(1070));
	assert_int_equal(t->status, GRAPH_STATUS_ERROR);
	t = task(&g, 3);
	assert_int_equal(t->start, NS(1090));
	assert_int_equal(t->end, NS(1110)); /* the trace's last event */
	assert_int_equal(t->status, GRAPH_STATUS_UNSET);
	check_json(t->attrs, "{\"procname\":\"fixture\",\"cut\":true}");

	for (size_t i = 0; i < g.nevents; i++) {
		const struct graph_event *e = &g.events[i];

		assert_int_equal(e->source, GRAPH_SRC_LTTNG);
		if (strcmp(e->name, "hello") == 0) {
			assert_int_equal(e->task, 1);
			assert_int_equal(e->time, NS(1020));
			assert_string_equal(e->attrs, "{}");
			continue;
		}
		assert_string_equal(e->name, "app:work");
		work++;
		if (e->task == 2) {
			assert_int_equal(e->time, NS(1040));
			check_json(e->attrs, "{\"value\":5,\"label\":\"in child\",\"ratio\":1.5,"
					     "\"pair\":[3,4]}");
		} else {
			assert_int_equal(e->task, 1);
			assert_int_equal(e->time, NS(1050));
			check_json(e->attrs, "{\"value\":6,\"label\":\"in root\",\"ratio\":2.5,"
					     "\"pair\":[5,6]}");
		}
	}
	assert_int_equal(work, 2);
	for (size_t i = 0; i < g.nedges; i++) {
		const struct graph_edge *e = &g.edges[i];

		assert_int_equal(e->from_task, 1);
		assert_int_equal(e->to_task, 2);
		assert_int_equal(e->kind, i == 0 ? GRAPH_EDGE_PARENT : GRAPH_EDGE_FOLLOWS);
	}
	graph_free(&g);
}

/* Appends to what g holds; the traces are found below the directory given. */
static void test_nested_append(void **state)
{
	struct ctf_fix_stream s;
	struct graph g;
	struct graph_import_err err;
	struct graph_task t0 = { .trace = { 1, 1 }, .id = 5, .service = "", .name = "" };
	char sub[PATH_MAX];

	(void)state;
	ctf_fix_reference(&s, false);
	snprintf(sub, sizeof(sub), "%s/ust", dir);
	assert_int_equal(mkdir(sub, 0755), 0);
	snprintf(sub, sizeof(sub), "%s/ust/uid", dir);
	assert_int_equal(mkdir(sub, 0755), 0);
	assert_int_equal(ctf_fix_write(sub, ctf_fixture_metadata("uint64_t"), s.buf, s.len), 0);
	graph_init(&g);
	assert_non_null(graph_add_task(&g, &t0));
	assert_int_equal(graph_import_ctf(dir, &g, &err), GRAPH_FMT_CTF);
	assert_int_equal(g.ntasks, 1 + 3);
	assert_int_equal(g.tasks[0].id, 5);
	assert_int_equal(g.nevents, 3);
	assert_int_equal(g.nedges, 2);
	graph_free(&g);
}

static void test_kernel_skipped(void **state)
{
	struct ctf_fix_stream s;
	struct graph g;
	struct graph_ctf_stats st;
	struct graph_import_err err;
	char meta[4096], out[4200];
	const char *q;

	(void)state;
	ctf_fix_reference(&s, false);
	snprintf(meta, sizeof(meta), "%s", ctf_fixture_metadata("uint64_t"));
	q = strstr(meta, "domain = \"ust\"");
	assert_non_null(q);
	snprintf(out, sizeof(out), "%.*sdomain = \"kernel\"%s", (int)(q - meta), meta,
		 q + strlen("domain = \"ust\""));
	assert_int_equal(ctf_fix_write(dir, out, s.buf, s.len), 0);
	graph_init(&g);
	assert_int_equal(graph_import_ctf_stats(dir, &g, &st, &err), GRAPH_FMT_CTF);
	assert_int_equal(g.ntasks + g.nevents + g.nedges, 0);
	assert_int_equal(st.kernel_events, 12);
	assert_int_equal(st.events, 0);
	graph_free(&g);
}

/* An import refused: the message holds `want`, and g still holds its one task only. */
static void refused(const char *metadata, const void *stream, size_t len, int ret, const char *want)
{
	struct graph g;
	struct graph_ctf_stats st;
	struct graph_import_err err;
	struct graph_task t0 = { .trace = { 1, 1 }, .id = 5, .service = "", .name = "" };

	assert_int_equal(ctf_fix_write(dir, metadata, stream, len), 0);
	graph_init(&g);
	assert_non_null(graph_add_task(&g, &t0));
	assert_int_equal(graph_import_ctf_stats(dir, &g, &st, &err), ret);
	if (!strstr(err.msg, want) || !strstr(err.msg, dir))
		fail_msg("message '%s' lacks '%s' or the directory", err.msg, want);
	assert_int_equal(g.ntasks, 1);
	assert_int_equal(g.tasks[0].id, 5);
	assert_int_equal(g.nevents, 0);
	assert_int_equal(g.nedges, 0);
	assert_int_equal(st.events, 0);
	graph_free(&g);
}

static void test_wrong_type(void **state)
{
	struct ctf_fix_stream s;

	(void)state;
	ctf_fix_reference(&s, true);
	/* event 0 is app:work, event 1 the first task_begin */
	refused(ctf_fixture_metadata("string"), s.buf, s.len, -EINVAL,
		"event 1 (weft:task_begin): payload field trace_hi is not an unsigned integer");
}

static void test_bad_status(void **state)
{
	struct ctf_fix_stream s;

	(void)state;
	ctf_fix_init(&s);
	ctf_fix_event(&s, CTF_EV_BEGIN, 10, 1, 1);
	ctf_fix_trace(&s, false, 1, 2);
	ctf_fix_u64(&s, 1);
	ctf_fix_u64(&s, 0);
	ctf_fix_str(&s, "a");
	ctf_fix_str(&s, "b");
	ctf_fix_event(&s, CTF_EV_END, 20, 1, 1);
	ctf_fix_trace(&s, false, 1, 2);
	ctf_fix_u64(&s, 1);
	ctf_fix_u32(&s, 7);
	refused(ctf_fixture_metadata("uint64_t"), s.buf, s.len, -EINVAL,
		"event 1 (weft:task_end): payload field status");
}

static void test_bad_kind(void **state)
{
	struct ctf_fix_stream s;

	(void)state;
	ctf_fix_init(&s);
	ctf_fix_event(&s, CTF_EV_EDGE, 10, 1, 1);
	ctf_fix_trace(&s, false, 1, 2);
	ctf_fix_str(&s, "sideways");
	ctf_fix_u64(&s, 1);
	ctf_fix_u64(&s, 0);
	ctf_fix_u64(&s, 2);
	ctf_fix_u64(&s, 0);
	refused(ctf_fixture_metadata("uint64_t"), s.buf, s.len, -EINVAL,
		"event 0 (weft:edge): kind is not an edge kind");
}

static void test_twice(void **state)
{
	struct ctf_fix_stream s;

	(void)state;
	ctf_fix_init(&s);
	for (int i = 0; i < 2; i++) {
		ctf_fix_event(&s, CTF_EV_BEGIN, 10 + (uint64_t)i, 1, 1);
		ctf_fix_trace(&s, false, 1, 2);
		ctf_fix_u64(&s, 1);
		ctf_fix_u64(&s, 0);
		ctf_fix_str(&s, "a");
		ctf_fix_str(&s, "b");
	}
	refused(ctf_fixture_metadata("uint64_t"), s.buf, s.len, -EINVAL,
		"event 1 (weft:task_begin): task 1 begins twice");
}

static void test_time_range(void **state)
{
	struct ctf_fix_stream s;

	(void)state;
	ctf_fix_init(&s);
	ctf_fix_event(&s, CTF_EV_WORK, 10, 1, 1);
	ctf_fix_u32(&s, 1);
	ctf_fix_str(&s, "fine");
	ctf_fix_u64(&s, 0);
	ctf_fix_u32(&s, 0);
	ctf_fix_u32(&s, 0);
	ctf_fix_event(&s, CTF_EV_WORK, UINT64_C(3) << 61, 1, 1); /* 2023 + 219 years */
	ctf_fix_u32(&s, 2);
	ctf_fix_str(&s, "late");
	ctf_fix_u64(&s, 0);
	ctf_fix_u32(&s, 0);
	ctf_fix_u32(&s, 0);
	refused(ctf_fixture_metadata("uint64_t"), s.buf, s.len, -EINVAL,
		"event 1 (app:work): timestamp out of range");
}

/* A stream cut inside an event: babeltrace2 refuses it mid-way; nothing of it is kept.
 * (babeltrace2 2.0.4 leaks the packet it was decoding there, as its own CLI does on this
 * trace: in the reader process, which exits.) */
static void test_truncated(void **state)
{
	struct ctf_fix_stream s;

	(void)state;
	ctf_fix_reference(&s, false);
	refused(ctf_fixture_metadata("uint64_t"), s.buf, s.len - 3, -EINVAL, "babeltrace2");
}

/* The fixture's metadata with `from` replaced by `to` (static buffer). */
static const char *meta_with(const char *from, const char *to)
{
	static char out[8192];
	const char *m = ctf_fixture_metadata("uint64_t"), *q = strstr(m, from);

	assert_non_null(q);
	snprintf(out, sizeof(out), "%.*s%s%s", (int)(q - m), m, to, q + strlen(from));
	return out;
}

/* Metadata that crashes babeltrace2 2.0.4 itself (its CLI too): a clock without a frequency
 * (SIGFPE), an LTTng trace whose stream has no clock, its timestamp being a structure (a
 * failed assertion).  The reader
 * process dies; the import is refused and the caller lives. */
static void test_bt2_crashes(void **state)
{
	struct ctf_fix_stream s;

	(void)state;
	ctf_fix_reference(&s, false);
	refused(meta_with("freq = 1000000000;", ""), s.buf, s.len, -EINVAL,
		"babeltrace2 crashed reading it (signal 8");
	refused(meta_with("uint64_clock_t timestamp;", "struct { string a; } timestamp;"), s.buf,
		s.len, -EINVAL, "babeltrace2 crashed reading it (signal 6");
}

/* graph_import_ctf_here(), in this process, reads the same graph. */
static void test_here(void **state)
{
	struct ctf_fix_stream s;
	struct graph g;
	struct graph_ctf_stats st;
	struct graph_import_err err;
	char why[256];

	(void)state;
	ctf_fix_reference(&s, false);
	assert_int_equal(ctf_fix_write(dir, ctf_fixture_metadata("uint64_t"), s.buf, s.len), 0);
	graph_init(&g);
	assert_int_equal(graph_import_ctf_here(dir, &g, &st, &err), GRAPH_FMT_CTF);
	assert_int_equal(g.ntasks, 3);
	assert_int_equal(g.nevents, 3);
	assert_int_equal(g.nedges, 2);
	assert_int_equal(st.events, 12);
	assert_int_equal(st.dropped_no_task, 1);
	assert_int_equal(st.cut, 1);
	assert_string_equal(task(&g, 2)->name, "child");
	assert_int_equal(task(&g, 3)->end, NS(1110));
	assert_int_equal(graph_check(&g, why, sizeof(why)), 0);
	graph_free(&g);
}

/* A FIFO among the streams would block babeltrace2 for ever: refused before it reads. */
static void test_fifo(void **state)
{
	struct ctf_fix_stream s;
	struct graph g;
	struct graph_import_err err;
	char fifo[PATH_MAX];

	(void)state;
	ctf_fix_reference(&s, false);
	assert_int_equal(ctf_fix_write(dir, ctf_fixture_metadata("uint64_t"), s.buf, s.len), 0);
	snprintf(fifo, sizeof(fifo), "%s/stream_1", dir);
	assert_int_equal(mkfifo(fifo, 0600), 0);
	graph_init(&g);
	assert_int_equal(graph_import_ctf(dir, &g, &err), -EINVAL);
	assert_non_null(strstr(err.msg, fifo));
	assert_non_null(strstr(err.msg, "not a regular file"));
	assert_int_equal(g.ntasks, 0);
	graph_free(&g);
}

/* weft:edge events naming tasks that never began are dropped, a parent edge too when its
 * child is unknown; one between known tasks is kept. */
static void test_edge_unknown(void **state)
{
	static const struct {
		const char *kind;
		uint64_t from, to;
	} edges[] = { { "parent", 9, 1 },
		      { "parent", 1, 9 },
		      { "message", 1, 9 },
		      { "wakeup", 9, 1 },
		      { "fork", 1, 1 } };
	struct ctf_fix_stream s;
	struct graph g;
	struct graph_ctf_stats st;
	struct graph_import_err err;
	char why[256];

	(void)state;
	ctf_fix_init(&s);
	ctf_fix_event(&s, CTF_EV_BEGIN, 10, 1, 1);
	ctf_fix_trace(&s, false, 1, 2);
	ctf_fix_u64(&s, 1);
	ctf_fix_u64(&s, 0);
	ctf_fix_str(&s, "a");
	ctf_fix_str(&s, "b");
	for (size_t i = 0; i < sizeof(edges) / sizeof(edges[0]); i++) {
		ctf_fix_event(&s, CTF_EV_EDGE, 20 + i, 1, 1);
		ctf_fix_trace(&s, false, 1, 2);
		ctf_fix_str(&s, edges[i].kind);
		ctf_fix_u64(&s, edges[i].from);
		ctf_fix_u64(&s, 0);
		ctf_fix_u64(&s, edges[i].to);
		ctf_fix_u64(&s, 0);
	}
	assert_int_equal(ctf_fix_write(dir, ctf_fixture_metadata("uint64_t"), s.buf, s.len), 0);
	graph_init(&g);
	assert_int_equal(graph_import_ctf_stats(dir, &g, &st, &err), GRAPH_FMT_CTF);
	/* kept: parent 9 -> 1 (a parent outside the trace) and fork 1 -> 1 */
	assert_int_equal(g.nedges, 2);
	assert_int_equal(g.edges[0].kind, GRAPH_EDGE_PARENT);
	assert_int_equal(g.edges[0].from_task, 9);
	assert_int_equal(g.edges[1].kind, GRAPH_EDGE_FORK);
	assert_int_equal(st.dropped_unknown, 3);
	assert_int_equal(st.cut, 1);
	assert_int_equal(graph_check(&g, why, sizeof(why)), 0);
	graph_free(&g);
}

/* A thread keeps the 1024 innermost of its open tasks as the places of other events: with
 * task 1 and then 1024 more open, task 1 is forgotten; once the 1024 end, an application
 * event finds no task (task 1 itself is kept, cut at the end). */
static void test_open_bound(void **state)
{
	static struct ctf_fix_stream s;
	struct graph g;
	struct graph_ctf_stats st;
	struct graph_import_err err;
	uint64_t ts = 10;

	(void)state;
	ctf_fix_init(&s);
	for (uint64_t id = 1; id <= 1025; id++) {
		ctf_fix_event(&s, CTF_EV_BEGIN, ts++, 1, 1);
		ctf_fix_trace(&s, false, 1, 2);
		ctf_fix_u64(&s, id);
		ctf_fix_u64(&s, 0);
		ctf_fix_str(&s, "");
		ctf_fix_str(&s, "");
	}
	for (uint64_t id = 1025; id >= 2; id--) {
		ctf_fix_event(&s, CTF_EV_END, ts++, 1, 1);
		ctf_fix_trace(&s, false, 1, 2);
		ctf_fix_u64(&s, id);
		ctf_fix_u32(&s, 1);
	}
	ctf_fix_event(&s, CTF_EV_WORK, ts++, 1, 1);
	ctf_fix_u32(&s, 1);
	ctf_fix_str(&s, "");
	ctf_fix_u64(&s, 0);
	ctf_fix_u32(&s, 0);
	ctf_fix_u32(&s, 0);
	assert_int_equal(ctf_fix_write(dir, ctf_fixture_metadata("uint64_t"), s.buf, s.len), 0);
	graph_init(&g);
	assert_int_equal(graph_import_ctf_stats(dir, &g, &st, &err), GRAPH_FMT_CTF);
	assert_int_equal(g.ntasks, 1025);
	assert_int_equal(g.nevents, 0);
	assert_int_equal(st.dropped_no_task, 1);
	assert_int_equal(st.cut, 1);
	assert_int_equal(task(&g, 1)->end, NS(ts - 1));
	graph_free(&g);
}

static void test_no_trace(void **state)
{
	struct graph g;
	struct graph_import_err err;
	char missing[PATH_MAX + 8];

	(void)state;
	graph_init(&g);
	assert_int_equal(graph_import_ctf(dir, &g, &err), -ENOENT);
	assert_non_null(strstr(err.msg, dir));
	snprintf(missing, sizeof(missing), "%s/nope", dir);
	assert_int_equal(graph_import_ctf(missing, &g, &err), -ENOENT);
	assert_non_null(strstr(err.msg, missing));
	graph_free(&g);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_reference, mk_dir, rm_dir),
		cmocka_unit_test_setup_teardown(test_nested_append, mk_dir, rm_dir),
		cmocka_unit_test_setup_teardown(test_kernel_skipped, mk_dir, rm_dir),
		cmocka_unit_test_setup_teardown(test_wrong_type, mk_dir, rm_dir),
		cmocka_unit_test_setup_teardown(test_bad_status, mk_dir, rm_dir),
		cmocka_unit_test_setup_teardown(test_bad_kind, mk_dir, rm_dir),
		cmocka_unit_test_setup_teardown(test_twice, mk_dir, rm_dir),
		cmocka_unit_test_setup_teardown(test_time_range, mk_dir, rm_dir),
		cmocka_unit_test_setup_teardown(test_truncated, mk_dir, rm_dir),
		cmocka_unit_test_setup_teardown(test_bt2_crashes, mk_dir, rm_dir),
		cmocka_unit_test_setup_teardown(test_here, mk_dir, rm_dir),
		cmocka_unit_test_setup_teardown(test_fifo, mk_dir, rm_dir),
		cmocka_unit_test_setup_teardown(test_edge_unknown, mk_dir, rm_dir),
		cmocka_unit_test_setup_teardown(test_open_bound, mk_dir, rm_dir),
		cmocka_unit_test_setup_teardown(test_no_trace, mk_dir, rm_dir),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
