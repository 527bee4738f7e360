// SPDX-License-Identifier: Apache-2.0
/*
 * bench_graphcap — the agent side of a kernel-edge graph query (agent/graphcap.c and the
 * graph store), measured on synthetic kernel:sockets records, and checked.
 *
 * It models what `weft run 'from kernel:sockets ... graph'` sees under `redis-benchmark -c 1
 * -n N -t set -P 1` against redis-server (tools/bench/kedges.sh): first one request on a
 * connection of its own (the settings redis-benchmark fetches), then N requests on one TCP
 * connection, one every 45 us, each four socket calls: the client's send of the request
 * (45 bytes), the server's receive of it, the server's send of the reply (5 bytes), the
 * client's receive of it; the sequence numbers advance by the bytes, the 4-tuple mirrors.
 * Records reach the capture as the ring buffer hands them over: in time order, except that
 * every 7th request's server receive comes before the client's send (another CPU committed it
 * first).  The records are the kernel's short ones (WEFT_GREC_SHORT bytes, no strings).
 *
 * The cadence is weft run's (tools/weft_run.c): records in, and once a second of the
 * records' time a graph_flush(): graphcap_drain() at sample 1 (every trace kept), the kept
 * traces into a fresh SQLite store with graph_store_put_opts(GRAPH_PUT_NO_AGGS), the
 * aggregates with graph_store_put_aggs(); a final drain at the end.  The capture's clock is
 * the records' own (live_clock off: a live capture reads CLOCK_MONOTONIC, which the records
 * follow; here the records run faster than real time).  Freed memory is kept for reuse, as
 * weft's main() sets it (mallopt).
 *
 * It checks what it stored, so that it cannot measure a broken path: exactly N + 1 traces,
 * 2 (N + 1) tasks and N + 1 message edges put, both task types N + 1 times in the store's
 * aggregates, nothing lost or bad in the capture's counters; and it prints a digest of the
 * stored content that does not depend on the ids the capture makes (names, processes, times
 * relative to the first request, attributes, the parent and edge shapes), so that a change
 * of the capture can show it stores the same.  Exit 0 only when every check holds.
 *
 * Usage: bench_graphcap [-n N] [-d DIR] [-D DIGEST]   (default 60000 requests, a directory
 * under /tmp; -D: also fail unless the digest is DIGEST, as an earlier build printed it for
 * the same N: a change that stores other content in the same numbers is caught)
 * Measure with `valgrind --tool=callgrind` (instruction counts repeat on a shared machine)
 * and with the CPU time it prints (getrusage); docs/performance.md, "Kernel edges".  Besides
 * the CPU a request over the whole run it prints that of the last quarter of the requests
 * (`cpu_us_per_request_last_quarter`, the final drain included): well above the whole run's
 * at a large N, the cost grows with the capture's length (a store that grew, a table that
 * is scanned whole), which a short run does not show.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <unistd.h>

#include "agent/graphcap.h"
#include "compiler/plan.h"
#include "graph/aggs.h"
#include "graph/store.h"
#include "kernel/weft_abi.h"

#define T0 1000000000000ull /* monotonic ns of the first record */
#define REQ_NS 45000ull /* one request every 45 us: ~22,000 a second */
#define DRAIN_NS 1000000000ull /* weft run's graph_flush(): once a second */
#define REQ_LEN 45 /* a SET as redis-benchmark sends it */
#define REP_LEN 5 /* "+OK\r\n" */
#define CLI 0x0a000001u /* 10.0.0.1 */
#define SRV 0x0a000002u /* 10.0.0.2 */

struct bench {
	struct graphcap *c;
	struct graph_store *s;
	struct graph_put_stats put;
	uint64_t digest;
	int64_t anchor; /* the real-time start of the first client task seen; 0: none yet */
	unsigned long drains;
	double digest_cpu; /* CPU seconds of the digest: not counted in the capture's */
};

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;

	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return h;
}

static uint64_t fnv_str(uint64_t h, const char *s)
{
	return fnv(h, s, strlen(s) + 1);
}

static uint64_t fnv_i64(uint64_t h, int64_t v)
{
	return fnv(h, &v, sizeof(v));
}

struct tix {
	uint64_t hi, lo, id;
	size_t i;
};

static int tix_cmp(const void *pa, const void *pb)
{
	const struct tix *a = pa, *b = pb;

	if (a->hi != b->hi)
		return a->hi < b->hi ? -1 : 1;
	if (a->lo != b->lo)
		return a->lo < b->lo ? -1 : 1;
	return (a->id > b->id) - (a->id < b->id);
}

static const struct graph_task *task_by_id(const struct graph *g, const struct tix *ix,
					   struct graph_id128 tr, uint64_t id)
{
	struct tix key = { tr.hi, tr.lo, id, 0 };
	const struct tix *f = bsearch(&key, ix, g->ntasks, sizeof(*ix), tix_cmp);

	return f ? &g->tasks[f->i] : NULL;
}

/* A task's hash without its ids: what it is, where, when (relative to the first request). */
static uint64_t task_hash(const struct bench *b, const struct graph_task *t)
{
	uint64_t h = 0xcbf29ce484222325ull;

	h = fnv_str(h, t->service);
	h = fnv_str(h, t->name);
	h = fnv_str(h, t->host);
	h = fnv_str(h, t->attrs);
	h = fnv_i64(h, t->pid);
	h = fnv_i64(h, t->tid);
	h = fnv_i64(h, t->start - b->anchor);
	h = fnv_i64(h, t->end - b->anchor);
	h = fnv_i64(h, t->status);
	return fnv_i64(h, t->source);
}

/* Sums (order-independent) a hash of every task and edge of a batch of kept traces. */
static int digest_add(struct bench *b, const struct graph *g)
{
	struct tix *ix = malloc((g->ntasks + 1) * sizeof(*ix));
	int rc = 0;

	if (!ix)
		return -1;
	for (size_t i = 0; i < g->ntasks; i++) {
		ix[i] = (struct tix){ g->tasks[i].trace.hi, g->tasks[i].trace.lo, g->tasks[i].id,
				      i };
		if (!b->anchor || g->tasks[i].start < b->anchor)
			b->anchor = g->tasks[i].start;
	}
	qsort(ix, g->ntasks, sizeof(*ix), tix_cmp);
	for (size_t i = 0; i < g->ntasks && !rc; i++) {
		const struct graph_task *t = &g->tasks[i], *p = NULL;
		uint64_t h = task_hash(b, t);

		if (t->parent && !(p = task_by_id(g, ix, t->trace, t->parent)))
			rc = -1;
		b->digest += fnv_i64(h, p ? (int64_t)task_hash(b, p) : 0);
	}
	/* an edge joins two tasks of one trace: its hash ties them together */
	for (size_t i = 0; i < g->nedges && !rc; i++) {
		const struct graph_edge *e = &g->edges[i];
		const struct graph_task *f = task_by_id(g, ix, e->trace, e->from_task),
					*t = task_by_id(g, ix, e->trace, e->to_task);
		uint64_t h = 0x84222325cbf29ce4ull;

		if (!f || !t) {
			rc = -1;
			break;
		}
		h = fnv_i64(h, e->kind);
		h = fnv_i64(h, e->source);
		h = fnv_i64(h, (int64_t)task_hash(b, f));
		b->digest += fnv_i64(h, (int64_t)task_hash(b, t));
	}
	free(ix);
	return rc;
}

static double cpu_s(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
	       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

/* weft run's graph_flush() (tools/weft_run.c), with the kept traces digested first. */
static int flush(struct bench *b, bool final)
{
	struct graph kept;
	struct graph_aggs aggs;
	struct graph_put_stats st = { 0 };
	char why[512] = "";
	double d0;
	int rc;

	graph_init(&kept);
	graph_aggs_init(&aggs);
	rc = graphcap_drain(b->c, final, &kept, &aggs);
	b->drains++;
	d0 = cpu_s();
	if (rc >= 0 && digest_add(b, &kept)) {
		fprintf(stderr, "bench_graphcap: a parent or edge names no task of its batch\n");
		rc = -EINVAL;
	}
	b->digest_cpu += cpu_s() - d0;
	if (rc > 0 && kept.ntasks + kept.nevents + kept.nedges)
		rc = graph_store_put_opts(b->s, &kept, GRAPH_PUT_NO_AGGS, &st, why, sizeof(why));
	if (rc >= 0 && !graph_aggs_empty(&aggs))
		rc = graph_store_put_aggs(b->s, &aggs, why, sizeof(why));
	if (rc < 0)
		fprintf(stderr, "bench_graphcap: drain or store: %s\n",
			why[0] ? why : strerror(-rc));
	b->put.traces += st.traces;
	b->put.tasks += st.tasks;
	b->put.events += st.events;
	b->put.edges += st.edges;
	b->put.replaced += st.replaced;
	graph_free(&kept);
	graph_aggs_free(&aggs);
	return rc < 0 ? rc : 0;
}

/* One kernel:sockets record, as the kernel writes it (short: no strings). */
static int sock(struct bench *b, bool send, uint64_t t, uint32_t pid, uint64_t sk, uint32_t la,
		uint16_t lp, uint32_t ra, uint16_t rp, uint32_t seq_end, uint32_t len,
		const char *comm)
{
	struct weft_graph_rec r;

	memset(&r, 0, WEFT_GREC_SHORT);
	r.kind = send ? WEFT_GREC_KSEND : WEFT_GREC_KRECV;
	r.time = t;
	r.pid = pid;
	r.tid = pid;
	snprintf(r.comm, sizeof(r.comm), "%s", comm);
	r.family = WEFT_AF_INET;
	r.a[0] = la;
	r.a[1] = ra;
	r.a[2] = lp;
	r.a[3] = rp;
	r.a[4] = seq_end;
	r.a[5] = len;
	r.a[6] = sk;
	return graphcap_record(b->c, &r, WEFT_GREC_SHORT);
}

struct conn {
	uint64_t csk, ssk; /* the client's, the server's socket */
	uint16_t cport;
	uint32_t cseq, sseq; /* the client's, the server's stream: the next byte */
};

/* One request/response at t; swap: the server's receive is handed over first. */
static int request(struct bench *b, struct conn *k, uint64_t t, bool swap)
{
	uint32_t q = k->cseq + REQ_LEN, p = k->sseq + REP_LEN;
	int rc = 0;

	if (swap)
		rc = sock(b, false, t + 9000, 200, k->ssk, SRV, 6379, CLI, k->cport, q, REQ_LEN,
			  "redis-server");
	rc = rc	   ?:
		     sock(b, true, t, 100, k->csk, CLI, k->cport, SRV, 6379, q, REQ_LEN,
			  "redis-benchmar");
	if (!swap)
		rc = rc	   ?:
			     sock(b, false, t + 9000, 200, k->ssk, SRV, 6379, CLI, k->cport, q,
				  REQ_LEN, "redis-server");
	rc = rc	   ?:
		     sock(b, true, t + 20000, 200, k->ssk, SRV, 6379, CLI, k->cport, p, REP_LEN,
			  "redis-server");
	rc = rc	   ?:
		     sock(b, false, t + 29000, 100, k->csk, CLI, k->cport, SRV, 6379, p, REP_LEN,
			  "redis-benchmar");
	k->cseq = q;
	k->sseq = p;
	return rc;
}

static int check(const char *what, uint64_t got, uint64_t want)
{
	if (got == want)
		return 0;
	fprintf(stderr, "bench_graphcap: %s: %" PRIu64 ", expected %" PRIu64 "\n", what, got, want);
	return 1;
}

int main(int argc, char **argv)
{
	struct plan_attach at[1];
	struct plan p = { .graph = true, .sample = 1.0, .attach = at, .nattach = 0 };
	struct graphcap_opts o = {
		.sz = sizeof(o), .host = "bench-host", .instance = 7, .sample = -1
	};
	struct conn setup = { 0xa1, 0xb1, 40000, 1000, 5000 }, main = { 0xa2, 0xb2, 40001, 7, 9 };
	char dir[] = "/tmp/weft-bench-graphcap-XXXXXX", path[4200], why[256] = "", cmd[4300];
	struct graph_type_stats *rows = NULL;
	struct graphcap_stats gs;
	struct bench b = { 0 };
	const char *d = NULL;
	long n = 60000;
	uint64_t t, next_drain;
	double c0, c1, cq = 0;
	ssize_t nrows;
	const char *want = NULL;
	char got[17];
	int opt, bad = 0;

	/* as weft's main() does (tools/weft.c): freed memory is kept for reuse */
	mallopt(M_MMAP_THRESHOLD, 32 << 20);
	mallopt(M_TRIM_THRESHOLD, 64 << 20);
	memset(at, 0, sizeof(at));
	while ((opt = getopt(argc, argv, "n:d:D:")) != -1) {
		if (opt == 'n')
			n = strtol(optarg, NULL, 10);
		else if (opt == 'd')
			d = optarg;
		else if (opt == 'D')
			want = optarg;
		else {
			fprintf(stderr, "usage: bench_graphcap [-n N] [-d DIR] [-D DIGEST]\n");
			return 2;
		}
	}
	if (n < 1) {
		fprintf(stderr, "bench_graphcap: -n takes a count > 0\n");
		return 2;
	}
	if (!d && !(d = mkdtemp(dir))) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(path, sizeof(path), "%s/graph.sqlite", d);
	unlink(path);
	b.s = graph_store_open(path, why, sizeof(why));
	b.c = graphcap_new(&p, &o);
	if (!b.s || !b.c) {
		fprintf(stderr, "bench_graphcap: %s\n", why[0] ? why : strerror(errno));
		return 1;
	}
	c0 = cpu_s();
	t = T0;
	next_drain = T0 + DRAIN_NS;
	bad |= request(&b, &setup, t, false) != 0;
	t += 2 * REQ_NS;
	for (long i = 0; i < n && !bad; i++, t += REQ_NS) {
		if (i == n - n / 4)
			cq = cpu_s() - b.digest_cpu;
		if (t >= next_drain) {
			bad |= flush(&b, false) != 0;
			next_drain += DRAIN_NS;
		}
		bad |= request(&b, &main, t, i % 7 == 3) != 0;
	}
	bad |= flush(&b, true) != 0;
	c1 = cpu_s() - b.digest_cpu;
	graphcap_stats(b.c, &gs);
	bad |= check("traces put", b.put.traces, (uint64_t)n + 1);
	bad |= check("tasks put", b.put.tasks, 2 * ((uint64_t)n + 1));
	bad |= check("edges put", b.put.edges, (uint64_t)n + 1);
	bad |= check("events put", b.put.events, 0);
	bad |= check("tasks replaced", b.put.replaced, 0);
	bad |= check("records", gs.records, 4 * ((uint64_t)n + 1));
	bad |= check("bad records", gs.bad, 0);
	bad |= check("evicted", gs.open_evicted, 0);
	bad |= check("orphans", gs.orphans, 0);
	bad |= check("traces held", gs.traces_held, 0);
	nrows = graph_store_stats(b.s, &rows, why, sizeof(why));
	bad |= check("task types stored", nrows < 0 ? 0 : (uint64_t)nrows, 2);
	for (ssize_t i = 0; i < nrows; i++)
		bad |= check(rows[i].name, rows[i].count, (uint64_t)n + 1);
	free(rows);
	snprintf(got, sizeof(got), "%016" PRIx64, b.digest);
	if (want && strcasecmp(want, got)) {
		fprintf(stderr, "bench_graphcap: digest %s, not %s: other content stored\n", got,
			want);
		bad = 1;
	}
	printf("{\"bench\":\"graphcap\",\"requests\":%ld,\"drains\":%lu,\"traces\":%" PRIu64
	       ",\"tasks\":%" PRIu64 ",\"edges\":%" PRIu64
	       ",\"digest\":\"%s\",\"cpu_s\":%.3f,\"cpu_us_per_request\":%.2f,"
	       "\"cpu_us_per_request_last_quarter\":%.2f,\"ok\":%s}\n",
	       n, b.drains, b.put.traces, b.put.tasks, b.put.edges, got, c1 - c0,
	       (c1 - c0) * 1e6 / (double)n, n / 4 ? (c1 - cq) * 1e6 / (double)(n / 4) : 0.0,
	       bad ? "false" : "true");
	graphcap_free(b.c);
	graph_store_close(b.s);
	if (d == dir) {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
		if (system(cmd) != 0)
			fprintf(stderr, "bench_graphcap: cannot remove %s\n", dir);
	}
	return bad ? 1 : 0;
}
