// SPDX-License-Identifier: Apache-2.0
/*
 * Forwarding graphs over OTLP/HTTP (graph/forward.c) end to end: the real weft binary
 * (WEFT_BIN) sends Zipkin's UI test traces (tests/data/zipkin) to a real HTTP receiver,
 * tests/otlp_receiver.py, which records every span of every request it answers 200.
 *
 * The eight files below hold 77 tasks (test_graph_cli.c derives the counts from the raw JSON):
 *   skew 4, ascend 8, envoy 1, messaging 4, messaging2 11, messaging-kafka 28,
 *   simple-db-p6 5, yelp 16
 * with 82 edges in all and one event (yelp).  Each task is a span; an edge is either the
 * span's parentSpanId or one of its links, so parents + links = 82.  With --forward-batch 1
 * each file is one request, in the order given.
 *
 * Every wait is for a condition (a file appears, a process exits) with a generous bound;
 * no test asserts how long anything took.  The receiver answers Retry-After: 1 to its
 * scripted 503s, so the restart test takes a few seconds.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include "tests/slurp.h"
#include <jansson.h>

#include "tests/skip.h"

#define NFILES 8
#define NSPANS 77
#define NEDGES 82
#define WAIT_S 180 /* bound of every wait: far above what any step takes */

static const char *const files[NFILES] = {
	"skew.json",	   "ascend.json",	   "envoy.json",	"messaging.json",
	"messaging2.json", "messaging-kafka.json", "simple-db-p6.json", "yelp.json",
};
static const unsigned spans_of_file[NFILES] = { 4, 8, 1, 4, 11, 28, 5, 16 };

static char dir[] = "/tmp/weft-graph-fwd-XXXXXX";
static char data[1024], receiver[1024];
static const char *bin;

static char *path_in(const char *name)
{
	static char buf[8][600];
	static int k;
	char *p = buf[k++ % 8];

	snprintf(p, 600, "%s/%s", dir, name);
	return p;
}

static void pause_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
}

/* Starts argv (NULL-terminated) with stdout and stderr to out and err (paths). */
static pid_t spawn(const char *const *argv, const char *out, const char *err)
{
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0) {
		int o = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		int e = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0600);

		if (o < 0 || e < 0)
			_exit(126);
		dup2(o, 1);
		dup2(e, 2);
		unsetenv("WEFT_GRAPH_STORE");
		unsetenv("http_proxy");
		unsetenv("HTTP_PROXY");
		execvp(argv[0], (char *const *)argv);
		_exit(127);
	}
	return pid;
}

/* The exit status of pid, waiting at most WAIT_S (then it is killed and the test fails). */
static int wait_exit(pid_t pid)
{
	int st;

	for (int i = 0; i < WAIT_S * 20; i++) {
		pid_t r = waitpid(pid, &st, WNOHANG);

		assert_true(r >= 0);
		if (r == pid) {
			assert_true(WIFEXITED(st));
			return WEXITSTATUS(st);
		}
		pause_ms(50);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	fail_msg("process %d did not exit within %d s", (int)pid, WAIT_S);
	return -1;
}

struct rcv {
	pid_t pid;
	int port;
	char tag[32];
};

/* Starts the receiver named tag on port (0: any) with extra options; waits until it listens. */
static struct rcv rcv_start(const char *tag, int port, const char *opt1, const char *opt2)
{
	char portarg[16], pf[64], rec[64], log[64], out[64], err[64];
	const char *argv[16];
	struct rcv r = { 0 };
	size_t n = 0;

	snprintf(r.tag, sizeof(r.tag), "%s", tag);
	snprintf(portarg, sizeof(portarg), "%d", port);
	snprintf(pf, sizeof(pf), "%s.port", tag);
	snprintf(rec, sizeof(rec), "%s.rec", tag);
	snprintf(log, sizeof(log), "%s.log", tag);
	snprintf(out, sizeof(out), "%s.out", tag);
	snprintf(err, sizeof(err), "%s.err", tag);
	unlink(path_in(pf));
	argv[n++] = "python3";
	argv[n++] = receiver;
	argv[n++] = "--port";
	argv[n++] = portarg;
	argv[n++] = "--port-file";
	argv[n++] = strdup(path_in(pf));
	argv[n++] = "--record";
	argv[n++] = strdup(path_in(rec));
	argv[n++] = "--log";
	argv[n++] = strdup(path_in(log));
	if (opt1)
		argv[n++] = opt1;
	if (opt2)
		argv[n++] = opt2;
	argv[n] = NULL;
	r.pid = spawn(argv, path_in(out), path_in(err));
	for (int i = 0; i < WAIT_S * 20 && !r.port; i++) {
		char *s = test_slurp_or_empty(path_in(pf));

		r.port = atoi(s);
		free(s);
		if (!r.port) {
			assert_int_equal(waitpid(r.pid, NULL, WNOHANG), 0); /* still alive */
			pause_ms(50);
		}
	}
	assert_true(r.port > 0);
	if (port)
		assert_int_equal(r.port, port);
	for (size_t i = 5; i <= 9; i += 2)
		free((void *)argv[i]);
	return r;
}

static void rcv_stop(struct rcv *r)
{
	if (r->pid > 0) {
		kill(r->pid, SIGTERM);
		waitpid(r->pid, NULL, 0);
		r->pid = 0;
	}
}

static char *url_of(int port)
{
	static char buf[64];

	snprintf(buf, sizeof(buf), "http://127.0.0.1:%d", port);
	return buf;
}

/* What a receiver recorded: spans (lines), distinct (trace, span) ids, duplicates, and the
 * totals of parents, events and links. */
struct rec {
	unsigned spans, distinct, dups, parents, events, links;
};

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static struct rec rec_read(const char *tag)
{
	char name[64], *text, *save = NULL, *line, *keys[4096];
	struct rec r = { 0 };

	snprintf(name, sizeof(name), "%s.rec", tag);
	text = test_slurp_or_empty(path_in(name));
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char trace[64], span[32], parent[32];
		unsigned ev, ln;

		assert_int_equal(
			sscanf(line, "%63s %31s %31s %u %u", trace, span, parent, &ev, &ln), 5);
		assert_true(r.spans < 4096);
		assert_int_equal(strlen(trace), 32);
		assert_int_equal(strlen(span), 16);
		keys[r.spans] = malloc(96); /* room for both as scanned: -Wformat-truncation */
		snprintf(keys[r.spans], 96, "%s %s", trace, span);
		r.spans++;
		r.parents += strcmp(parent, "-") != 0;
		r.events += ev;
		r.links += ln;
	}
	qsort(keys, r.spans, sizeof(keys[0]), cmp_str);
	for (unsigned i = 0; i < r.spans; i++) {
		if (i == 0 || strcmp(keys[i], keys[i - 1]))
			r.distinct++;
		else
			r.dups++;
	}
	for (unsigned i = 0; i < r.spans; i++)
		free(keys[i]);
	free(text);
	return r;
}

/* The receiver's log: requests answered `code`, and the spans in them (in order). */
static unsigned log_count(const char *tag, int code, unsigned *spans, unsigned nspans)
{
	char name[64], *text, *save = NULL, *line;
	unsigned n = 0;

	snprintf(name, sizeof(name), "%s.log", tag);
	text = test_slurp_or_empty(path_in(name));
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		unsigned req, sp;
		int c;

		assert_int_equal(sscanf(line, "%u %d %u", &req, &c, &sp), 3);
		if (c != code)
			continue;
		if (spans && n < nspans)
			spans[n] = sp;
		n++;
	}
	free(text);
	return n;
}

/* The counters of weft's summary line ("forward to URL: S spans sent (R requests), ..."). */
struct sum {
	unsigned long sent, requests, retried, spooled, dropped, rejected, queued;
};

static struct sum sum_read(const char *out)
{
	char *text = test_slurp_or_empty(out), *p = strstr(text, "forward to ");
	struct sum s;

	assert_non_null(p);
	p = strstr(p, ": ");
	assert_non_null(p);
	assert_int_equal(sscanf(p,
				": %lu spans sent (%lu requests), %lu retries, %lu spooled, %lu "
				"dropped, %lu rejected, %lu waiting in the spool",
				&s.sent, &s.requests, &s.retried, &s.spooled, &s.dropped,
				&s.rejected, &s.queued),
			 7);
	free(text);
	return s;
}

/* Spool files (SEQ-SPANS.json): how many, their spans (from the names) and bytes. */
static unsigned spool_files(const char *spool, unsigned *spans, unsigned long *bytes)
{
	DIR *d = opendir(spool);
	struct dirent *de;
	unsigned n = 0;

	*spans = 0;
	*bytes = 0;
	if (!d)
		return 0;
	while ((de = readdir(d))) {
		char p[1024];
		struct stat sb;
		unsigned sp;

		if (de->d_name[0] == '.')
			continue;
		assert_int_equal(sscanf(de->d_name, "%*16x-%u.json", &sp), 1);
		snprintf(p, sizeof(p), "%s/%s", spool, de->d_name);
		assert_int_equal(stat(p, &sb), 0);
		*spans += sp;
		*bytes += (unsigned long)sb.st_size;
		n++;
	}
	closedir(d);
	return n;
}

/* weft graph import of the eight files with forwarding options; started, not waited for. */
static pid_t import_start(const char *store, const char *out, const char *err,
			  const char *const *fwd_opts)
{
	const char *argv[64];
	char paths[NFILES][1100];
	size_t n = 0;

	argv[n++] = bin;
	argv[n++] = "graph";
	argv[n++] = "-S";
	argv[n++] = store;
	argv[n++] = "import";
	argv[n++] = "-q";
	for (; *fwd_opts; fwd_opts++)
		argv[n++] = *fwd_opts;
	for (int i = 0; i < NFILES; i++) {
		snprintf(paths[i], sizeof(paths[i]), "%s/%s", data, files[i]);
		argv[n++] = paths[i];
	}
	argv[n] = NULL;
	return spawn(argv, out, err); /* paths[] are copied by exec */
}

/*
 * The receiver answers three requests, then stops (its port refuses); weft spools the rest
 * and retries; a new receiver on the same port answers three 503s (Retry-After: 1), then
 * takes everything.  Every span arrives exactly once, in a request the receiver answered.
 */
static void test_restart_exactly_once(void **state)
{
	struct rcv a, b;
	struct sum s;
	struct rec r;
	unsigned sp, spans[8];
	unsigned long bytes;
	pid_t w;
	int i;
	(void)state;

	a = rcv_start("a", 0, "--exit-after", "3");
	w = import_start(path_in("s1.sqlite"), path_in("w1.out"), path_in("w1.err"),
			 (const char *const[]){ "--forward", url_of(a.port), "--forward-batch", "1",
						"--forward-spool", path_in("spool1"),
						"--forward-wait", "170s", NULL });
	/* the first receiver exits after its third 200; the fourth request is refused and
	 * spooled: wait for that before restarting the receiver */
	assert_int_equal(wait_exit(a.pid), 0);
	for (i = 0; i < WAIT_S * 20 && spool_files(path_in("spool1"), &sp, &bytes) == 0; i++)
		pause_ms(50);
	assert_true(i < WAIT_S * 20);
	b = rcv_start("b", a.port, "--fail", "503:3");
	assert_int_equal(wait_exit(w), 0);
	rcv_stop(&b);

	s = sum_read(path_in("w1.out"));
	assert_int_equal(s.sent, NSPANS);
	assert_int_equal(s.requests, NFILES);
	assert_int_equal(s.dropped, 0);
	assert_int_equal(s.rejected, 0);
	assert_int_equal(s.queued, 0);
	/* the first three files went at once (4 + 8 + 1); the rest waited in the spool */
	assert_int_equal(s.spooled, NSPANS - 13);
	assert_true(s.retried >= 4); /* at least one refusal, and the three 503s */
	assert_int_equal(spool_files(path_in("spool1"), &sp, &bytes), 0);

	/* the first receiver took the first three files */
	assert_int_equal(log_count("a", 200, spans, 8), 3);
	assert_int_equal(spans[0], 4);
	assert_int_equal(spans[1], 8);
	assert_int_equal(spans[2], 1);
	/* the second refused the fourth (messaging, 4 spans) three times, then took the rest in
	 * order: the spool is sent oldest first */
	assert_int_equal(log_count("b", 503, spans, 8), 3);
	for (i = 0; i < 3; i++)
		assert_int_equal(spans[i], 4);
	assert_int_equal(log_count("b", 200, spans, 8), NFILES - 3);
	for (i = 3; i < NFILES; i++)
		assert_int_equal(spans[i - 3], spans_of_file[i]);

	/* exactly once across the restart */
	r = rec_read("a");
	assert_int_equal(r.spans, 13);
	r = rec_read("b");
	assert_int_equal(r.spans, NSPANS - 13);
	{
		/* both files together: 77 distinct spans, none twice */
		char *x = test_slurp_or_empty(path_in("a.rec")),
		     *y = test_slurp_or_empty(path_in("b.rec"));
		FILE *f = fopen(path_in("ab.rec"), "w");

		assert_non_null(f);
		fputs(x, f);
		fputs(y, f);
		fclose(f);
		free(x);
		free(y);
	}
	r = rec_read("ab");
	assert_int_equal(r.spans, NSPANS);
	assert_int_equal(r.distinct, NSPANS);
	assert_int_equal(r.dups, 0);
	/* the structure travelled: every edge a parent or a link, yelp's one event */
	assert_int_equal(r.parents + r.links, NEDGES);
	assert_int_equal(r.events, 1);
}

/* `weft graph forward --all --aggregates` sends the store the restart test filled (it runs
 * first): the same spans, line for line, and the store's aggregates as metrics. */
static void test_forward_all_from_store(void **state)
{
	struct rcv c;
	struct sum s;
	struct rec r;
	pid_t w;
	char *x, *y;
	(void)state;

	c = rcv_start("c", 0, NULL, NULL);
	w = spawn((const char *const[]){ bin, "graph", "forward", "-S", path_in("s1.sqlite"),
					 "--to", url_of(c.port), "--all", "--aggregates", "--spool",
					 path_in("spool2"), NULL },
		  path_in("w2.out"), path_in("w2.err"));
	assert_int_equal(wait_exit(w), 0);
	rcv_stop(&c);
	s = sum_read(path_in("w2.out"));
	assert_int_equal(s.sent, NSPANS);
	assert_int_equal(s.retried + s.spooled + s.dropped + s.rejected + s.queued, 0);
	r = rec_read("c");
	assert_int_equal(r.spans, NSPANS);
	assert_int_equal(r.distinct, NSPANS);
	assert_int_equal(r.parents + r.links, NEDGES);
	assert_int_equal(r.events, 1);

	/* line for line what the import forwarded (ids, parents, events, links), in any order */
	{
		char cmd[2048];

		snprintf(cmd, sizeof(cmd), "LC_ALL=C sort %s > %s && LC_ALL=C sort %s > %s",
			 path_in("ab.rec"), path_in("ab.sorted"), path_in("c.rec"),
			 path_in("c.sorted"));
		assert_int_equal(system(cmd), 0);
	}
	x = test_slurp_or_empty(path_in("ab.sorted"));
	y = test_slurp_or_empty(path_in("c.sorted"));
	assert_string_equal(x, y);
	free(x);
	free(y);

	/* the aggregates, as metrics of their own resource: one duration histogram per task
	 * type with the type's count (77 in all), one sum per rarest event and edge, exactly
	 * as `weft graph stats --format json` lists them */
	{
		unsigned long points = 0, n = 0, hists = 0, hist_total = 0, others = 0;
		unsigned long want_types, want_others = 0;
		char *out = test_slurp_or_empty(path_in("w2.out")), *text, *save = NULL, *line, *p;
		json_t *stats, *row;
		size_t i;

		p = strstr(out, "aggregates: ");
		assert_non_null(p);
		assert_int_equal(sscanf(p, "aggregates: %lu data points sent", &points), 1);
		free(out);
		w = spawn((const char *const[]){ bin, "graph", "stats", "-S", path_in("s1.sqlite"),
						 "--format", "json", NULL },
			  path_in("st.out"), path_in("st.err"));
		assert_int_equal(wait_exit(w), 0);
		stats = json_load_file(path_in("st.out"), 0, NULL);
		assert_true(json_is_array(stats));
		want_types = json_array_size(stats);
		json_array_foreach(stats, i, row)
		{
			want_others += json_array_size(json_object_get(row, "rarest_events"));
			want_others += json_array_size(json_object_get(row, "rarest_edges"));
		}
		json_decref(stats);
		assert_true(want_types > 0 && want_others > 0);

		text = test_slurp_or_empty(path_in("c.rec.metrics"));
		for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
			char *last = strrchr(line, ' ');

			assert_non_null(last);
			assert_int_equal(strncmp(line, "weft-aggregates ", 16), 0);
			n++;
			if (!strncmp(line + 16, "weft.task.duration ", 19)) {
				hists++;
				hist_total += strtoul(last + 1, NULL, 10);
			} else {
				assert_true(!strncmp(line + 16, "weft.task.event.tasks ", 22) ||
					    !strncmp(line + 16, "weft.task.edge.count ", 21));
				others++;
			}
		}
		free(text);
		assert_int_equal(n, points);
		assert_int_equal(hists, want_types);
		assert_int_equal(hist_total, NSPANS);
		assert_int_equal(others, want_others);
	}
}

/* Any 4xx but 429 is a refusal: counted rejected, never retried. */
static void test_rejected_not_retried(void **state)
{
	struct rcv d;
	struct sum s;
	struct rec r;
	pid_t w;
	(void)state;

	d = rcv_start("d", 0, "--fail", "400:2");
	w = import_start(path_in("s3.sqlite"), path_in("w3.out"), path_in("w3.err"),
			 (const char *const[]){ "--forward", url_of(d.port), "--forward-batch", "1",
						"--forward-spool", path_in("spool3"), NULL });
	assert_int_equal(wait_exit(w), 1); /* spans were rejected */
	rcv_stop(&d);
	s = sum_read(path_in("w3.out"));
	assert_int_equal(s.rejected, 4 + 8);
	assert_int_equal(s.sent, NSPANS - 12);
	assert_int_equal(s.requests, NFILES - 2);
	assert_int_equal(s.retried, 0);
	assert_int_equal(s.spooled + s.dropped + s.queued, 0);
	assert_int_equal(log_count("d", 400, NULL, 0), 2);
	assert_int_equal(log_count("d", 200, NULL, 0), NFILES - 2);
	r = rec_read("d");
	assert_int_equal(r.spans, NSPANS - 12);
	assert_int_equal(r.distinct, NSPANS - 12);
	{
		char *err = test_slurp_or_empty(path_in("w3.err"));

		assert_non_null(strstr(err, "12 spans rejected"));
		assert_non_null(strstr(err, "HTTP 400"));
		free(err);
	}
}

/*
 * Batches are cut into traces: three files of two traces each (tests/data: otlp/checkout.json
 * 5 tasks, 2 events, 4 edges; jaeger/hotrod.json 5, 4, 5; xtrace/rpc.json 4, 11, 6, as
 * test_graph_import checks) give six requests of one trace each with --forward-batch 1, and
 * one request with the default batch; events and edges of all three formats travel.
 */
static void test_batches_by_trace(void **state)
{
	static const char *const batch[2] = { "1", "512" };
	static const unsigned long requests[2] = { 6, 1 };
	(void)state;

	for (int k = 0; k < 2; k++) {
		char tag[8], st[16], out[16], err[16], sp[16], f1[1100], f2[1100], f3[1100];
		struct rcv h;
		struct sum s;
		struct rec r;
		pid_t w;

		snprintf(tag, sizeof(tag), "h%d", k);
		snprintf(st, sizeof(st), "s7%d.sqlite", k);
		snprintf(out, sizeof(out), "w7%d.out", k);
		snprintf(err, sizeof(err), "w7%d.err", k);
		snprintf(sp, sizeof(sp), "spool7%d", k);
		snprintf(f1, sizeof(f1), "%s/../otlp/checkout.json", data);
		snprintf(f2, sizeof(f2), "%s/../jaeger/hotrod.json", data);
		snprintf(f3, sizeof(f3), "%s/../xtrace/rpc.json", data);
		h = rcv_start(tag, 0, NULL, NULL);
		w = spawn((const char *const[]){ bin, "graph", "-S", path_in(st), "import", "-q",
						 "--forward", url_of(h.port), "--forward-batch",
						 batch[k], "--forward-spool", path_in(sp), f1, f2,
						 f3, NULL },
			  path_in(out), path_in(err));
		assert_int_equal(wait_exit(w), 0);
		rcv_stop(&h);
		s = sum_read(path_in(out));
		assert_int_equal(s.sent, 14);
		assert_int_equal(s.requests, requests[k]);
		assert_int_equal(log_count(tag, 200, NULL, 0), requests[k]);
		r = rec_read(tag);
		assert_int_equal(r.spans, 14);
		assert_int_equal(r.distinct, 14);
		assert_int_equal(r.events, 2 + 4 + 11);
		assert_int_equal(r.parents + r.links, 4 + 5 + 6);
	}
}

/* A 200 with an OTLP partialSuccess: the spans it names are counted rejected, the rest sent. */
static void test_partial_success(void **state)
{
	struct rcv g;
	struct sum s;
	pid_t w;
	(void)state;

	g = rcv_start("g", 0, "--partial-reject", "1");
	w = import_start(path_in("s6.sqlite"), path_in("w6.out"), path_in("w6.err"),
			 (const char *const[]){ "--forward", url_of(g.port), "--forward-batch", "1",
						"--forward-spool", path_in("spool6"), NULL });
	assert_int_equal(wait_exit(w), 1); /* spans were rejected */
	rcv_stop(&g);
	s = sum_read(path_in("w6.out"));
	assert_int_equal(s.requests, NFILES);
	assert_int_equal(s.rejected, NFILES); /* one per request */
	assert_int_equal(s.sent, NSPANS - NFILES);
	assert_int_equal(s.retried + s.spooled + s.dropped + s.queued, 0);
	assert_int_equal(log_count("g", 200, NULL, 0), NFILES);
}

/*
 * The collector is down for the whole import and the spool (20 KiB) holds only part of the
 * 44 KB of requests: what does not fit is dropped and counted, the spool never exceeds its
 * bound, and a later `weft graph forward` delivers exactly what was spooled.
 */
static void test_spool_too_small(void **state)
{
	struct rcv e;
	struct sum s, s2;
	struct rec r;
	unsigned files_n, sp;
	unsigned long bytes;
	int port;
	pid_t w;
	(void)state;

	e = rcv_start("e0", 0, NULL, NULL); /* a free port, then nobody listening on it */
	port = e.port;
	rcv_stop(&e);
	w = import_start(path_in("s4.sqlite"), path_in("w4.out"), path_in("w4.err"),
			 (const char *const[]){ "--forward", url_of(port), "--forward-batch", "1",
						"--forward-spool", path_in("spool4"),
						"--forward-spool-size", "20KiB", "--forward-wait",
						"0", NULL });
	assert_int_equal(wait_exit(w), 1);
	s = sum_read(path_in("w4.out"));
	assert_int_equal(s.sent, 0);
	assert_int_equal(s.rejected, 0);
	assert_true(s.dropped > 0);
	assert_true(s.spooled > 0);
	assert_int_equal(s.spooled + s.dropped, NSPANS);
	assert_int_equal(s.queued, s.spooled);
	files_n = spool_files(path_in("spool4"), &sp, &bytes);
	assert_true(files_n > 0 && files_n < NFILES);
	assert_int_equal(sp, s.spooled);
	assert_true(bytes <= 20 * 1024);
	{
		char *err = test_slurp_or_empty(path_in("w4.err"));
		char want[64];

		snprintf(want, sizeof(want), "%lu spans dropped", s.dropped);
		assert_non_null(strstr(err, want));
		free(err);
	}

	/* the collector is back: the spool alone is sent */
	e = rcv_start("e", port, NULL, NULL);
	w = spawn((const char *const[]){ bin, "graph", "forward", "-S", path_in("s4.sqlite"),
					 "--to", url_of(port), "--spool", path_in("spool4"), NULL },
		  path_in("w5.out"), path_in("w5.err"));
	assert_int_equal(wait_exit(w), 0);
	rcv_stop(&e);
	s2 = sum_read(path_in("w5.out"));
	assert_int_equal(s2.sent, s.spooled);
	assert_int_equal(s2.requests, files_n);
	assert_int_equal(s2.queued + s2.dropped + s2.rejected, 0);
	r = rec_read("e");
	assert_int_equal(r.spans, s.spooled);
	assert_int_equal(r.distinct, s.spooled);
	assert_int_equal(spool_files(path_in("spool4"), &sp, &bytes), 0);
}

/* Bad command lines are refused before anything is sent, naming the option. */
static void test_usage(void **state)
{
	static const struct {
		const char *argv[8];
		const char *says;
	} cases[] = {
		{ { "graph", "forward", NULL }, "needs --to URL" },
		{ { "graph", "forward", "--to", "ftp://x", NULL }, "http:// or https://" },
		{ { "graph", "import", "--forward", "http://x", "--forward-batch", "0", "f", NULL },
		  "--forward-batch takes" },
		{ { "graph", "import", "--forward-spool-size", "1MiB", "f", NULL },
		  "need --forward URL" },
		{ { "graph", "forward", "--to", "http://x", "--spool-size", "lots", NULL },
		  "--spool-size takes" },
		{ { "graph", "forward", "--to", "http://x", "--all", "abc", NULL },
		  "TRACEs or --all" },
	};
	(void)state;

	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		const char *argv[10] = { bin };
		char *err;
		pid_t w;

		for (int i = 0; cases[k].argv[i]; i++)
			argv[i + 1] = cases[k].argv[i];
		w = spawn(argv, path_in("u.out"), path_in("u.err"));
		assert_int_equal(wait_exit(w), 2);
		err = test_slurp_or_empty(path_in("u.err"));
		if (!strstr(err, cases[k].says))
			fail_msg("case %zu: '%s' not in: %s", k, cases[k].says, err);
		free(err);
	}
}

/* libcurl is opened on first use, never linked: weft's start-up does not load it. */
static void test_curl_not_linked(void **state)
{
	char cmd[1400], *deps;
	(void)state;

	snprintf(cmd, sizeof(cmd), "ldd '%s' > '%s' 2>&1", bin, path_in("ldd.out"));
	if (system(cmd) != 0) {
		wt_skip("ldd cannot read %s", bin);
		return;
	}
	deps = test_slurp_or_empty(path_in("ldd.out"));
	assert_non_null(strstr(deps, "libc.so")); /* ldd did list the dependencies */
	assert_null(strstr(deps, "libcurl"));
	free(deps);
}

int main(void)
{
	const char *src = getenv("WEFT_SOURCE_DIR");
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_restart_exactly_once),
		cmocka_unit_test(test_forward_all_from_store),
		cmocka_unit_test(test_rejected_not_retried),
		cmocka_unit_test(test_partial_success),
		cmocka_unit_test(test_batches_by_trace),
		cmocka_unit_test(test_spool_too_small),
		cmocka_unit_test(test_usage),
		cmocka_unit_test(test_curl_not_linked),
	};
	int rc;

	bin = getenv("WEFT_BIN");
	if (!bin || !src) {
		fprintf(stderr,
			"skipped: WEFT_BIN and WEFT_SOURCE_DIR must be set (ctest sets them)\n");
		return WT_SKIP;
	}
	if (system("python3 -c 'import http.server, json' >/dev/null 2>&1") != 0) {
		fprintf(stderr, "skipped: python3 (with http.server and json) is not installed\n");
		return WT_SKIP;
	}
	snprintf(data, sizeof(data), "%s/tests/data/zipkin", src);
	snprintf(receiver, sizeof(receiver), "%s/tests/otlp_receiver.py", src);
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	signal(SIGPIPE, SIG_IGN);
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	if (rc == 0) {
		char cmd[128];

		snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
		if (system(cmd) != 0)
			fprintf(stderr, "cannot remove %s\n", dir);
	}
	return wt_status(rc);
}
