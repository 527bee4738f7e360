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
 * The recording runs once in the group setup; the session is destroyed in the setup right
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
#include "tests/skip.h"

#define NREQ 4 /* requests wl_lttng serves */
#define CMD_TIMEOUT_S 120 /* no lttng command or workload run comes near it */

static char session[64], tracedir[PATH_MAX], logpath[PATH_MAX], workload[PATH_MAX];
static bool session_made;
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

static bool in_path(const char *prog)
{
	const char *path = getenv("PATH");
	char buf[PATH_MAX];

	if (!path)
		path = "/usr/bin:/bin:/usr/sbin:/sbin";
	while (*path) {
		size_t n = strcspn(path, ":");

		if (snprintf(buf, sizeof(buf), "%.*s/%s", (int)n, path, prog) < (int)sizeof(buf) &&
		    access(buf, X_OK) == 0)
			return true;
		path += n;
		if (*path == ':')
			path++;
	}
	return false;
}

/* Runs argv with its output appended to logpath; its exit status, or -1 (killed, timed out,
 * not started).  *pid_out (if not NULL) gets the child's pid. */
static int run(char *const argv[], pid_t *pid_out)
{
	time_t deadline = time(NULL) + CMD_TIMEOUT_S;
	pid_t pid = fork();
	int status;

	if (pid < 0)
		return -1;
	if (pid == 0) {
		int fd = open(logpath, O_WRONLY | O_CREAT | O_APPEND, 0644);

		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
			close(fd);
		}
		execvp(argv[0], argv);
		_exit(127);
	}
	if (pid_out)
		*pid_out = pid;
	for (;;) {
		pid_t r = waitpid(pid, &status, WNOHANG);
		struct timespec ts = { 0, 10 * 1000 * 1000 };

		if (r == pid)
			break;
		if (r < 0 && errno != EINTR)
			return -1;
		if (time(NULL) > deadline) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			fprintf(stderr, "%s: timed out\n", argv[0]);
			return -1;
		}
		nanosleep(&ts, NULL);
	}
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* run() of the command given as arguments, ended by NULL (at most 15 words). */
static int runv(const char *arg0, ...)
{
	char *av[16];
	size_t n = 0;
	va_list ap;

	av[n++] = (char *)arg0;
	va_start(ap, arg0);
	while (n < 15 && (av[n] = va_arg(ap, char *)))
		n++;
	va_end(ap);
	av[n] = NULL;
	return run(av, NULL);
}

#define RUN(...) runv(__VA_ARGS__, (char *)NULL)

static void destroy_session(void)
{
	if (session_made && RUN("lttng", "destroy", session) == 0)
		session_made = false;
}

static void dump_log(void)
{
	FILE *f = fopen(logpath, "r");
	char line[512];

	if (!f)
		return;
	while (fgets(line, sizeof(line), f))
		fprintf(stderr, "  | %s", line);
	fclose(f);
}

static int record(void **state)
{
	const char *bdir = getenv("WEFT_BINARY_DIR");
	struct graph_import_err err;
	char nreq[16];
	int ret;

	(void)state;
	graph_init(&g);
	if (!in_path("lttng") || !in_path("lttng-sessiond")) {
		skip_why = "lttng-tools (lttng, lttng-sessiond) is not installed";
		return 0;
	}
	if (!bdir || !*bdir) {
		skip_why = "run through ctest (needs WEFT_BINARY_DIR)";
		return 0;
	}
	snprintf(session, sizeof(session), "weft-test-ctf-%d", (int)getpid());
	snprintf(tracedir, sizeof(tracedir), "%s/tests/graph_ctf_trace", bdir);
	snprintf(logpath, sizeof(logpath), "%s/tests/graph_ctf.log", bdir);
	snprintf(workload, sizeof(workload), "%s/tests/workloads/wl_lttng", bdir);
	snprintf(nreq, sizeof(nreq), "%d", NREQ);
	unlink(logpath);
	RUN("rm", "-rf", tracedir);
	if (RUN("lttng", "list") != 0) {
		/* fails harmlessly if another daemon races us to it */
		RUN("lttng-sessiond", "--daemonize");
		if (RUN("lttng", "list") != 0) {
			skip_why = "no LTTng session daemon can be reached or started";
			dump_log();
			return 0;
		}
	}
	if (RUN("lttng", "create", session, "--output", tracedir) != 0)
		goto out_fail;
	session_made = true;
	/* the session daemon is the machine's: only the workload's events, not those of any
	 * other program with weft's provider that runs meanwhile */
	if (RUN("lttng", "enable-event", "-u", "weft:*", "-s", session, "--filter",
		"$ctx.procname == \"wl_lttng\"") != 0 ||
	    RUN("lttng", "enable-event", "-u", "wl_other:*", "-s", session, "--filter",
		"$ctx.procname == \"wl_lttng\"") != 0 ||
	    RUN("lttng", "add-context", "-u", "-t", "vpid", "-t", "vtid", "-t", "procname", "-s",
		session) != 0 ||
	    RUN("lttng", "start", session) != 0)
		goto out_fail;
	/* the workload's LTTng-UST waits for the session daemon at start-up, not 3 s only */
	setenv("LTTNG_UST_REGISTER_TIMEOUT", "60000", 1);
	t_before = now_ns();
	{
		char *const av[] = { workload, nreq, NULL };

		ret = run(av, &wl_pid);
	}
	t_after = now_ns();
	if (ret != 0 || RUN("lttng", "stop", session) != 0)
		goto out_fail;
	destroy_session();
	ret = graph_import_ctf_stats(tracedir, &g, &st, &err);
	if (ret != GRAPH_FMT_CTF) {
		fprintf(stderr, "import: %d %s\n", ret, err.msg);
		return -1;
	}
	return 0;
out_fail:
	fprintf(stderr, "recording the trace failed; the commands' output:\n");
	dump_log();
	destroy_session();
	return -1;
}

static int cleanup(void **state)
{
	(void)state;
	destroy_session();
	graph_free(&g);
	return 0;
}

#define NEED_TRACE()                             \
	do {                                     \
		if (skip_why) {                  \
			wt_skip("%s", skip_why); \
			return;                  \
		}                                \
	} while (0)

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
	NEED_TRACE();
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
	assert_string_equal(json_string_value(json_object_get(a, "procname")), "wl_lttng");
	json_decref(a);
}

static void test_tasks(void **state)
{
	char host[256] = "";

	(void)state;
	NEED_TRACE();
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
	NEED_TRACE();
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
	NEED_TRACE();
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
	NEED_TRACE();
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
