// SPDX-License-Identifier: Apache-2.0
/*
 * The LTTng CTF importer (graph/import_ctf.c) on a real trace: lttng-tools records the
 * workload wl_lttng (tests/workloads/wl_lttng.c, LTTng-UST providers `weft` and `wl_other`)
 * into a CTF trace in the build directory, and graph_import_ctf_stats() reads it back.
 *
 * The expected graph is derived here from what wl_lttng does (its header comment), not from
 * the importer's output: N requests make 3N + 1 tasks, 3N + 1 weft events plus 2N wl_other
 * events inside tasks, N wl_other events outside any task (dropped), 2N parent edges and N
 * message edges, 13N + 2 events read.  Times are checked for order only (a child inside its
 * parent, an event inside its task), never against durations.
 *
 * The workload runs as a copy named for this run (wlctf-PID), and the session records only
 * the processes of that name: other tests running wl_lttng or weft's header at the same time
 * stay out of the trace (tests/runtime/lttng_util.h).  The recording runs once in the group
 * setup; the session is destroyed in the setup right
 * after recording and again in the teardown, which cmocka runs even when a test failed, so no
 * session is left behind.  Skips (77) when not root, or lttng / lttng-sessiond are missing
 * or no session daemon can be reached.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "graph/graph.h"
#include "graph/import.h"
#include "lttng_util.h"
#include "tests/skip.h"

#define NREQ 4 /* requests wl_lttng serves */

static char tracedir[PATH_MAX], workload[PATH_MAX];
static const char *procname; /* the workload copy's name */
static struct lt_session session;
static pid_t wl_pid; /* the recorded workload's pid: its tasks' pid */
static int64_t t_before, t_after; /* CLOCK_REALTIME around the workload's run, ns */
static struct graph g;
static struct graph_ctf_stats st;
static const char *skip_why; /* set when the recording cannot be made here */

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int record(void **state)
{
	static const char *const events[] = { "weft:*", "wl_other:*", NULL };
	const char *bdir = getenv("WEFT_BINARY_DIR");
	struct graph_import_err err;
	char nreq[16];
	int ret;

	(void)state;
	graph_init(&g);
	if (!bdir || !*bdir) {
		skip_why = "run through ctest (needs WEFT_BINARY_DIR)";
		return 0;
	}
	snprintf(tracedir, sizeof(tracedir), "%s/tests/graph_ctf_trace", bdir);
	snprintf(lt_logpath, sizeof(lt_logpath), "%s/tests/graph_ctf.log", bdir);
	snprintf(nreq, sizeof(nreq), "%d", NREQ);
	unlink(lt_logpath);
	{
		char src[PATH_MAX], dir[PATH_MAX];

		/* a copy named for this run: other tests' wl_lttng runs stay out of the trace */
		snprintf(src, sizeof(src), "%s/tests/workloads/wl_lttng", bdir);
		snprintf(dir, sizeof(dir), "%s/tests", bdir);
		if (lt_copy_unique(src, dir, "wlctf", workload, sizeof(workload)) != 0) {
			lt_dump_log();
			return -1;
		}
		procname = strrchr(workload, '/') + 1;
	}
	ret = lt_session_start(&session, "weft-test-ctf", tracedir, events, procname, &skip_why);
	if (ret > 0) {
		lt_dump_log();
		return 0;
	}
	if (ret < 0)
		goto out_fail;
	t_before = now_ns();
	{
		char *const av[] = { workload, nreq, NULL };

		ret = lt_run(av, &wl_pid);
	}
	t_after = now_ns();
	if (ret != 0 || lt_session_stop(&session) != 0)
		goto out_fail;
	ret = graph_import_ctf_stats(tracedir, &g, &st, &err);
	if (ret != GRAPH_FMT_CTF) {
		fprintf(stderr, "import: %d %s\n", ret, err.msg);
		return -1;
	}
	return 0;
out_fail:
	fprintf(stderr, "recording the trace failed; the commands' output:\n");
	lt_dump_log();
	lt_session_destroy(&session);
	return -1;
}

static int cleanup(void **state)
{
	(void)state;
	lt_session_destroy(&session);
	if (procname)
		unlink(workload);
	graph_free(&g);
	return 0;
}

static const struct graph_task *find_task(uint64_t hi, uint64_t lo, uint64_t id)
{
	const struct graph_task *found = NULL;

	for (size_t i = 0; i < g.ntasks; i++) {
		const struct graph_task *t = &g.tasks[i];

		if (t->trace.hi == hi && t->trace.lo == lo && t->id == id) {
			assert_null(found); /* unique */
			found = t;
		}
	}
	assert_non_null(found);
	return found;
}

/* The events of task (hi, lo, id) named `name`: how many, and the last one. */
static size_t find_events(uint64_t hi, uint64_t lo, uint64_t id, const char *name,
			  const struct graph_event **last)
{
	size_t n = 0;

	for (size_t i = 0; i < g.nevents; i++) {
		const struct graph_event *e = &g.events[i];

		if (e->trace.hi == hi && e->trace.lo == lo && e->task == id &&
		    strcmp(e->name, name) == 0) {
			n++;
			*last = e;
		}
	}
	return n;
}

static size_t count_edges(uint64_t hi, uint64_t lo, enum graph_edge_kind k, uint64_t from,
			  uint64_t to)
{
	size_t n = 0;

	for (size_t i = 0; i < g.nedges; i++) {
		const struct graph_edge *e = &g.edges[i];

		n += e->trace.hi == hi && e->trace.lo == lo && e->kind == k &&
		     e->from_task == from && e->to_task == to && e->from_event == 0 &&
		     e->to_event == 0 && e->source == GRAPH_SRC_LTTNG;
	}
	return n;
}

static void test_counts(void **state)
{
	char why[256];

	(void)state;
	wt_skip_if(skip_why);
	assert_int_equal(g.ntasks, 3 * NREQ + 1);
	assert_int_equal(g.nevents, 3 * NREQ + 1 + 2 * NREQ);
	assert_int_equal(g.nedges, 3 * NREQ);
	/* per request: work outside, 2 begins, accepted, sql, work inside, the worker's begin,
	 * read, work and end, the edge, 2 ends; then the cut task's begin and its event */
	assert_int_equal(st.events, 13 * NREQ + 2);
	assert_int_equal(st.dropped_no_task, NREQ);
	assert_int_equal(st.dropped_unknown, 0);
	assert_int_equal(st.unmatched_ends, 0);
	assert_int_equal(st.cut, 1);
	assert_int_equal(st.kernel_events, 0);
	assert_int_equal(graph_check(&g, why, sizeof(why)), 0);
}

static void check_attr_procname(const struct graph_task *t)
{
	json_t *a = json_loads(t->attrs, 0, NULL);

	assert_non_null(a);
	assert_string_equal(json_string_value(json_object_get(a, "procname")), procname);
	json_decref(a);
}

static void test_tasks(void **state)
{
	char host[256] = "";

	(void)state;
	wt_skip_if(skip_why);
	assert_int_equal(gethostname(host, sizeof(host) - 1), 0);
	for (uint64_t r = 0; r < NREQ; r++) {
		uint64_t hi = 0xabc0 + r, lo = 0x1234 + r;
		const struct graph_task *t1 = find_task(hi, lo, 1), *t2 = find_task(hi, lo, 2),
					*t3 = find_task(hi, lo, 3);

		assert_int_equal(t1->parent, 0);
		assert_int_equal(t2->parent, 1);
		assert_int_equal(t3->parent, 2);
		assert_string_equal(t1->service, "frontend");
		assert_string_equal(t1->name, "handle");
		assert_string_equal(t2->service, "frontend");
		assert_string_equal(t2->name, "query");
		assert_string_equal(t3->service, "backend");
		assert_string_equal(t3->name, "serve");
		assert_int_equal(t1->status, GRAPH_STATUS_OK);
		assert_int_equal(t2->status, GRAPH_STATUS_OK);
		assert_int_equal(t3->status, GRAPH_STATUS_ERROR);
		/* tasks 1 and 2 on the main thread (tid = pid), task 3 on a thread of its own */
		assert_int_equal(t1->pid, wl_pid);
		assert_int_equal(t1->tid, wl_pid);
		assert_int_equal(t2->tid, wl_pid);
		assert_int_equal(t3->pid, wl_pid);
		assert_int_not_equal(t3->tid, wl_pid);
		assert_true(t3->tid > 0);
		for (const struct graph_task *t = t1; t; t = t == t1 ? t2 : t == t2 ? t3 : NULL) {
			assert_string_equal(t->host, host);
			assert_int_equal(t->source, GRAPH_SRC_LTTNG);
			check_attr_procname(t);
			/* ns since the Unix epoch, not since boot: within the run as the
			 * realtime clock saw it.  LTTng's clock is CLOCK_MONOTONIC plus an offset
			 * it measured; a minute of slack covers a clock step under NTP (this is
			 * about the origin, not a duration) */
			assert_true(t->start >= t_before - 60 * INT64_C(1000000000));
			assert_true(t->end <= t_after + 60 * INT64_C(1000000000));
		}
		/* order: the child inside its parent, the worker's task inside task 2 */
		assert_true(t1->start <= t2->start);
		assert_true(t2->start <= t3->start);
		assert_true(t3->start <= t3->end);
		assert_true(t3->end <= t2->end);
		assert_true(t2->end <= t1->end);
		if (r > 0)
			assert_true(find_task(hi - 1, lo - 1, 1)->end <= t1->start);
	}
}

static void test_cut_task(void **state)
{
	const struct graph_task *t;
	const struct graph_event *last = NULL;
	json_t *a;

	(void)state;
	wt_skip_if(skip_why);
	t = find_task(0xdead, 1, 7);
	assert_string_equal(t->name, "cut");
	assert_int_equal(t->status, GRAPH_STATUS_UNSET);
	a = json_loads(t->attrs, 0, NULL);
	assert_non_null(a);
	assert_true(json_is_true(json_object_get(a, "cut")));
	json_decref(a);
	/* its end is the trace's last event, which is its own event "last" */
	assert_int_equal(find_events(0xdead, 1, 7, "last", &last), 1);
	assert_int_equal(t->end, last->time);
	assert_true(t->start <= t->end);
	for (size_t i = 0; i < g.nevents; i++)
		assert_true(g.events[i].time <= last->time);
	for (size_t i = 0; i < g.ntasks; i++)
		assert_true(g.tasks[i].end <= last->time);
	/* the others are not cut */
	for (size_t i = 0; i < g.ntasks; i++)
		if (&g.tasks[i] != t)
			assert_null(strstr(g.tasks[i].attrs, "\"cut\""));
}

/* The wl_other:work event of a task: its attributes are its payload. */
static void check_work(uint64_t hi, uint64_t lo, uint64_t task, int value, const char *label,
		       double ratio)
{
	const struct graph_event *e = NULL;
	const struct graph_task *t = find_task(hi, lo, task);
	json_t *a;

	assert_int_equal(find_events(hi, lo, task, "wl_other:work", &e), 1);
	a = json_loads(e->attrs, 0, NULL);
	assert_non_null(a);
	assert_int_equal(json_object_size(a), 3);
	assert_int_equal(json_integer_value(json_object_get(a, "value")), value);
	assert_string_equal(json_string_value(json_object_get(a, "label")), label);
	assert_true(json_real_value(json_object_get(a, "ratio")) == ratio);
	json_decref(a);
	assert_true(e->time >= t->start && e->time <= t->end);
}

static void test_events(void **state)
{
	(void)state;
	wt_skip_if(skip_why);
	for (uint64_t r = 0; r < NREQ; r++) {
		uint64_t hi = 0xabc0 + r, lo = 0x1234 + r;
		const struct graph_event *e = NULL;
		static const struct {
			uint64_t task;
			const char *name;
		} weft[] = { { 1, "accepted" }, { 2, "sql" }, { 3, "read" } };

		for (size_t i = 0; i < 3; i++) {
			const struct graph_task *t = find_task(hi, lo, weft[i].task);

			assert_int_equal(find_events(hi, lo, weft[i].task, weft[i].name, &e), 1);
			assert_string_equal(e->attrs, "{}");
			assert_int_equal(e->id, 0);
			assert_int_equal(e->source, GRAPH_SRC_LTTNG);
			assert_true(e->time >= t->start && e->time <= t->end);
		}
		/* none of "outside": no task was open on the thread */
		assert_int_equal(find_events(hi, lo, 1, "wl_other:work", &e), 0);
		check_work(hi, lo, 2, (int)r, "inside", 0.25);
		check_work(hi, lo, 3, 100 + (int)r, "worker", 0.5);
	}
}

static void test_edges(void **state)
{
	(void)state;
	wt_skip_if(skip_why);
	for (uint64_t r = 0; r < NREQ; r++) {
		uint64_t hi = 0xabc0 + r, lo = 0x1234 + r;

		assert_int_equal(count_edges(hi, lo, GRAPH_EDGE_PARENT, 1, 2), 1);
		assert_int_equal(count_edges(hi, lo, GRAPH_EDGE_PARENT, 2, 3), 1);
		assert_int_equal(count_edges(hi, lo, GRAPH_EDGE_MESSAGE, 2, 3), 1);
	}
}

/* A directory babeltrace2 refuses: the error names it, and the graph is as it was. */
static void test_refused(void **state)
{
	char dir[] = "/tmp/weft-ctf-bad-XXXXXX", path[PATH_MAX];
	struct graph h;
	struct graph_import_err err;
	struct graph_task t = { .trace = { 1, 2 }, .id = 3, .service = "s", .name = "n" };
	FILE *f;

	(void)state;
	graph_init(&h);
	assert_non_null(graph_add_task(&h, &t));
	assert_non_null(mkdtemp(dir));
	/* nothing in it */
	assert_int_equal(graph_import_ctf(dir, &h, &err), -ENOENT);
	assert_non_null(strstr(err.msg, dir));
	/* a metadata file that is not CTF */
	snprintf(path, sizeof(path), "%s/metadata", dir);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs("this is not CTF metadata\n", f);
	fclose(f);
	assert_int_equal(graph_import_ctf(dir, &h, &err), -EINVAL);
	assert_non_null(strstr(err.msg, dir));
	assert_non_null(strstr(err.msg, "Cannot create trace")); /* babeltrace2's cause */
	assert_int_equal(h.ntasks, 1);
	assert_int_equal(h.nevents, 0);
	assert_int_equal(h.nedges, 0);
	unlink(path);
	rmdir(dir);
	graph_free(&h);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_counts),	 cmocka_unit_test(test_tasks),
		cmocka_unit_test(test_cut_task), cmocka_unit_test(test_events),
		cmocka_unit_test(test_edges),	 cmocka_unit_test(test_refused),
	};

	if (!wt_root("lttng-sessiond and a trace of root's session"))
		return WT_SKIP;
	return wt_status(cmocka_run_group_tests(tests, record, cleanup));
}
