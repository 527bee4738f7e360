// SPDX-License-Identifier: Apache-2.0
/*
 * graph_store_bench — the graph store's costs (graph/store_sqlite.c), measured, not asserted.
 *
 *   put     graph_store_put() of generated batches: spans per second of one core's time
 *           (CPU time of the thread, and wall time with the fsyncs WAL mode does at commit);
 *           the batches are built before the clock starts, so this is the store alone (the
 *           importers' parsing comes on top of it, end to end);
 *   bytes   the file's size after a checkpoint, per span stored;
 *   show    graph_store_load() + graph_store_context() of one 50-task trace (20 events, 49
 *           parent edges and 5 message edges, tasks in 4 processes) with 10^3, 10^5 and 10^6
 *           traces stored: the store is closed and opened again before each size (SQLite's
 *           page cache starts empty; the kernel's file cache does not), then the first call
 *           and the median and p90 of 1000 are printed.
 *
 * The filler traces have 5 tasks each (a root and 4 children, 40 task types of 8 services,
 * 16 hosts with 4 processes each, an event in every third task, attributes of ~50 bytes), so
 * that 10^6 traces (5 million spans) fit on disk and fill in a minute or two.  The probe
 * trace shares their types, so its context reads well-filled aggregates.
 *
 * Usage: graph_store_bench [-d DIR] [-n MAXTRACES] [-b BATCH] [-c CPU] [-S]
 *   defaults: a fresh directory under /var/tmp (removed at the end), 1000000 traces,
 *   batches of 10000 spans, CPU 0.  -S: only "show", on the store a run with -d DIR left.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "graph/graph.h"
#include "graph/store.h"

#define T0 1700000000000000000LL
#define MS 1000000LL

static uint64_t rng = 42;

static uint64_t next(void)
{
	rng = rng * 6364136223846793005ull + 1442695040888963407ull;
	return rng >> 33;
}

static double now(clockid_t c)
{
	struct timespec ts;

	clock_gettime(c, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static const char *svc[8] = { "frontend", "cart",  "checkout", "payment",
			      "shipping", "email", "currency", "ads" };
static const char *op[5] = { "GET", "POST", "query", "publish", "render" };
static char hostname[16][16];

static void add_task(struct graph *g, struct graph_id128 tr, uint64_t id, uint64_t parent, int type,
		     int proc, int64_t start, int64_t dur)
{
	struct graph_task t = {
		.trace = tr,
		.id = id,
		.parent = parent,
		.service = svc[type % 8],
		.name = op[type % 5],
		.host = hostname[proc / 4 % 16],
		.pid = 1000 + proc % 4,
		.tid = 1000 + proc % 4,
		.start = start,
		.end = start + dur,
		.status = GRAPH_STATUS_OK,
		.source = GRAPH_SRC_OTLP,
		.attrs = "{\"http.method\":\"GET\",\"http.status_code\":200,\"x\":1}",
	};

	if (!graph_add_task(g, &t)) {
		fprintf(stderr, "out of memory\n");
		abort();
	}
}

static void add_event(struct graph *g, struct graph_id128 tr, uint64_t task, const char *name,
		      int64_t time)
{
	struct graph_event e = { .trace = tr,
				 .task = task,
				 .time = time,
				 .name = name,
				 .source = GRAPH_SRC_OTLP,
				 .attrs = "{}" };

	graph_add_event(g, &e);
}

static void add_edge(struct graph *g, struct graph_id128 tr, enum graph_edge_kind k, uint64_t a,
		     uint64_t b)
{
	struct graph_edge e = { .trace = tr, .kind = k, .from_task = a, .to_task = b };

	graph_add_edge(g, &e);
}

/* Filler trace number i: 5 tasks. */
static void filler(struct graph *g, uint64_t i)
{
	struct graph_id128 tr = { .hi = 0x1000000 + i, .lo = i * 0x9e3779b97f4a7c15ull };
	int64_t t0 = T0 + (int64_t)i * 2 * MS;
	int root = (int)(next() % 40), proc = (int)(next() % 64);

	add_task(g, tr, 1, 0, root, proc, t0, 5 * MS + (int64_t)(next() % (20 * MS)));
	for (uint64_t k = 2; k <= 5; k++) {
		int64_t st = t0 + (int64_t)(next() % (4 * MS));

		add_task(g, tr, k, 1, (int)(next() % 40), (int)(next() % 64), st,
			 (int64_t)(next() % (2 * MS)));
		add_edge(g, tr, GRAPH_EDGE_PARENT, 1, k);
		if (k % 3 == 0)
			add_event(g, tr, k, next() % 50 ? "log" : "retry", st);
	}
}

/* The probe: 50 tasks in 4 processes, 20 events, 49 parent and 5 message edges. */
static struct graph_id128 probe_id = { .hi = 0xfeedface, .lo = 0xcafe };

static void probe(struct graph *g)
{
	int64_t t0 = T0 + 777 * MS;

	for (uint64_t k = 1; k <= 50; k++) {
		add_task(g, probe_id, k, k == 1 ? 0 : (k - 2) / 3 + 1, (int)(k % 40), (int)(k % 4),
			 t0 + (int64_t)k * MS / 10, 10 * MS - (int64_t)k * MS / 10);
		if (k > 1)
			add_edge(g, probe_id, GRAPH_EDGE_PARENT, (k - 2) / 3 + 1, k);
		if (k % 5 == 0 && k <= 25)
			add_edge(g, probe_id, GRAPH_EDGE_MESSAGE, k, k + 1);
	}
	for (uint64_t e = 0; e < 20; e++)
		add_event(g, probe_id, e * 2 + 1, e % 7 ? "log" : "retry", t0 + (int64_t)e * MS);
}

static int cmpd(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static void show(const char *path, uint64_t ntraces)
{
	char why[512], hex[33];
	struct graph_store *s = graph_store_open(path, why, sizeof(why));
	double t[1000], first = 0;

	if (!s) {
		fprintf(stderr, "%s\n", why);
		exit(1);
	}
	graph_id128_hex(probe_id, hex);
	for (int i = 0; i < 1000; i++) {
		struct graph g;
		struct graph_context c;
		double a = now(CLOCK_MONOTONIC);

		graph_init(&g);
		if (graph_store_load(s, hex, &g, why, sizeof(why)) ||
		    graph_store_context(s, &g, &c, why, sizeof(why))) {
			fprintf(stderr, "show: %s\n", why);
			exit(1);
		}
		t[i] = (now(CLOCK_MONOTONIC) - a) * 1e3;
		if (i == 0)
			first = t[0];
		if (g.ntasks != 50) {
			fprintf(stderr, "probe has %zu tasks\n", g.ntasks);
			exit(1);
		}
		graph_context_free(&c);
		graph_free(&g);
	}
	qsort(t, 1000, sizeof(t[0]), cmpd);
	printf("show  %8" PRIu64 " traces stored: load+context of 50 tasks: first %.3f ms, "
	       "median %.3f ms, p90 %.3f ms\n",
	       ntraces, first, t[500], t[900]);
	graph_store_close(s);
}

int main(int argc, char **argv)
{
	char dir[256] = "", path[300], why[512];
	uint64_t maxtr = 1000000, batch = 10000, stored = 0, spans = 0;
	const uint64_t stops[] = { 1000, 100000, 1000000 };
	double cpu = 0, wall = 0;
	int cpuid = 0, opt;
	bool own_dir = true, show_only = false;
	struct graph_store *s;
	struct graph g;
	cpu_set_t set;
	struct stat sb;

	while ((opt = getopt(argc, argv, "d:n:b:c:S")) != -1) {
		switch (opt) {
		case 'd':
			snprintf(dir, sizeof(dir), "%s", optarg);
			own_dir = false;
			break;
		case 'n':
			maxtr = strtoull(optarg, NULL, 0);
			break;
		case 'b':
			batch = strtoull(optarg, NULL, 0);
			break;
		case 'c':
			cpuid = atoi(optarg);
			break;
		case 'S':
			show_only = true;
			break;
		default:
			fprintf(stderr,
				"usage: %s [-d DIR] [-n MAXTRACES] [-b BATCH] [-c CPU] [-S]\n",
				argv[0]);
			return 2;
		}
	}
	CPU_ZERO(&set);
	CPU_SET(cpuid, &set);
	sched_setaffinity(0, sizeof(set), &set);
	if (own_dir) {
		snprintf(dir, sizeof(dir), "/var/tmp/weft-graph-bench-XXXXXX");
		if (!mkdtemp(dir)) {
			perror("mkdtemp");
			return 1;
		}
	}
	for (int i = 0; i < 16; i++)
		snprintf(hostname[i], sizeof(hostname[i]), "node-%02d", i);
	snprintf(path, sizeof(path), "%s/graphs.db", dir);
	if (show_only) {
		show(path, 0);
		return 0;
	}
	unlink(path);
	s = graph_store_open(path, why, sizeof(why));
	if (!s) {
		fprintf(stderr, "%s\n", why);
		return 1;
	}
	graph_init(&g);
	probe(&g);
	if (graph_store_put(s, &g, NULL, why, sizeof(why))) {
		fprintf(stderr, "put: %s\n", why);
		return 1;
	}
	stored = 1;
	spans = 50;
	for (size_t k = 0; k < sizeof(stops) / sizeof(stops[0]) && stops[k] <= maxtr; k++) {
		while (stored < stops[k]) {
			double c0, w0;
			struct graph_put_stats st;

			graph_clear(&g);
			while (g.ntasks + 5 <= batch && stored < stops[k]) {
				filler(&g, stored);
				stored++;
			}
			c0 = now(CLOCK_THREAD_CPUTIME_ID);
			w0 = now(CLOCK_MONOTONIC);
			if (graph_store_put(s, &g, &st, why, sizeof(why))) {
				fprintf(stderr, "put: %s\n", why);
				return 1;
			}
			cpu += now(CLOCK_THREAD_CPUTIME_ID) - c0;
			wall += now(CLOCK_MONOTONIC) - w0;
			spans += st.tasks;
		}
		/* a checkpoint, so that the file's size is what is stored */
		if (graph_store_retain(s, 0, 0, why, sizeof(why)) < 0) {
			fprintf(stderr, "checkpoint: %s\n", why);
			return 1;
		}
		stat(path, &sb);
		printf("put   %8" PRIu64 " traces, %9" PRIu64 " spans: %.0f spans/s of CPU, "
		       "%.0f spans/s wall; %.1f bytes/span (%.1f MB)\n",
		       stored, spans, (double)spans / cpu, (double)spans / wall,
		       (double)sb.st_size / (double)spans, (double)sb.st_size / 1e6);
		graph_store_close(s);
		show(path, stored);
		s = graph_store_open(path, why, sizeof(why));
		if (!s) {
			fprintf(stderr, "%s\n", why);
			return 1;
		}
	}
	graph_free(&g);
	graph_store_close(s);
	if (own_dir) {
		char cmd[400];

		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
		if (system(cmd) != 0)
			fprintf(stderr, "could not remove %s\n", dir);
	}
	return 0;
}
