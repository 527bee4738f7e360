// SPDX-License-Identifier: Apache-2.0
/*
 * Stream queries on a cluster (docs/protocol.md "Row batches"): a select without aggregates
 * submitted with `weft submit`, its rows shipped by the agents in RowBatches and relayed by
 * the aggregator to the client, which prints them with a host column.  Two "hosts" in two
 * network namespaces of one kernel (weft-ns-PID-1 and -2), each agent scoped to its
 * namespace, one aggregator in the root namespace, all over CURVE ZeroMQ, real eBPF.
 *
 *   rows       the same workload binary runs in both namespaces, N1 getppid() calls on one
 *              thread in the first and N2 on two threads in the second, while the stream
 *              query `... select time, cpu, tid, comm, args.__syscall_nr as nr` runs.  The
 *              client (--format json) prints exactly N1 rows of host ns1 and N2 of ns2, each
 *              with the workload's comm and getppid's number, the tids of ns1 one thread's
 *              N1 and those of ns2 two threads' N2 / 2 each; its stream_end line counts the
 *              same per host and no row lost anywhere; `weft status` counts N1 + N2 rows.
 *   text       the text form: a header with `host` first, one line a row, N1 of them
 *              starting with ns1; the last line "rows: N1 (ns1 N1); lost: none".
 *   hostile    a raw agent (authenticated, welcomed) sends RowBatches for a running stream
 *              query: one whose cell count is not rows x columns (refused by the wire's
 *              checks), one with another column count than the query's and one with text
 *              where the query has integers (refused by the aggregator against the plan):
 *              each counted in `rejected`, none relayed; then a good one of 2 rows, relayed
 *              to the client with exactly its values under the raw agent's host; the raw
 *              agent never sends its last batch (`last`), which the client waits for after
 *              the query's last window and then names on stderr.  A raw client (a key
 *              allow-listed as client) sending the same good batch is refused for its role,
 *              answered with an Error and counted; its rows reach nobody.
 *   comeback   a client is stopped (SIGSTOP); ns1's N1 rows are relayed to it (they wait
 *              in its connection's queue); the aggregator forgets it (silent for three
 *              heartbeats); ns2's N2 rows come, relayed to nobody; the client is continued:
 *              it reads ns1's rows, says Hello again, subscribes again from the first batch
 *              it has not seen, gets the batches the aggregator kept (its log says so) and
 *              prints exactly N1 and N2 rows, each once, with nothing lost.  (With nothing
 *              kept, as before --stream-keep, ns2's rows never came.)  Beyond what is kept
 *              (the aggregator keeps 128 KiB a stream here; 20,000 rows of ns2): all of
 *              ns1's, fewer of ns2's, and the rows printed plus those it counts as not
 *              relayed are exactly the rows the aggregator took, its lost those.
 *
 * Nothing is asserted about timing: the workloads run after both agents run the query, and
 * the query is cancelled after they have exited and the client has printed their rows.
 * Needs root (eBPF, namespaces); skipped otherwise.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/cluster/cluster_util.h"
#include "tests/skip.h"

#define NS 2

static const char *const hosts[] = { "ns1", "ns2", NULL };

struct fixture {
	struct cl cl;
	struct cl_net net;
	struct cl_proc *agg, *agents[NS];
	char scope[NS][PATH_MAX];
	char comm[32];
	bool failed;
};

static int group_setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	char listen[64];

	if (!f)
		return -1;
	*state = f;
	cl_net_group_begin(&f->cl, &f->net, &f->failed);
	f->failed = true;
	cl_init(&f->cl);
	cl_net_setup(&f->net, NS);
	cl_net_endpoint(&f->cl, &f->net, listen);
	for (int k = 0; k < NS; k++)
		cl_keygen(&f->cl, "agent", hosts[k], true);
	cl_keygen(&f->cl, "agent", "rawagent", true);
	cl_keygen(&f->cl, "client", "slow", true);
	/* 128 KiB of rows kept a stream: test_comeback_beyond_kept goes beyond */
	f->agg = cl_aggregator(&f->cl, "agg", listen, NULL,
			       (char *const[]){ (char *)"--stream-keep", (char *)"128KiB", NULL });
	cl_net_scoped_agents(&f->cl, &f->net, hosts, NS, listen, f->scope, f->agents);
	snprintf(f->comm, sizeof(f->comm), "%s_r", f->cl.tag);
	cl_workload_make(&f->cl, f->comm);
	f->failed = false;
	return 0;
}

static int group_teardown(void **state)
{
	struct fixture *f = *state;

	cl_net_group_end(&f->cl, &f->net, f->failed);
	free(f);
	return 0;
}

static void query_of(const struct fixture *f, char *q, size_t sz)
{
	snprintf(q, sz,
		 "from tracepoint:syscalls:sys_enter_getppid where comm = '%s' select time, cpu, "
		 "tid, comm, args.__syscall_nr as nr",
		 f->comm);
}

/* `weft submit --format FMT QUERY` with key KEY (NAME.key), following; returns once each
 * agent runs it. */
static struct cl_proc *submit_as(struct fixture *f, const char *key, const char *log,
				 const char *fmt, const char *query, uint64_t *id)
{
	struct cl *cl = &f->cl;
	struct cl_proc *p;
	char needle[64], keyfile[64], *err, *s;

	snprintf(keyfile, sizeof(keyfile), "%s.key", key);
	p = cl_spawn(cl, log, NULL,
		     (char *const[]){ getenv("WEFT_BIN"), (char *)"submit", (char *)"--to",
				      cl->endpoint, (char *)"--server-key",
				      (char *)cl_pub(cl, cl->client_server), (char *)"--key",
				      (char *)cl_path(cl, keyfile), (char *)"--format", (char *)fmt,
				      (char *)query, NULL });
	cl_expect_log(p, " runs on ", CL_WAIT_MS);
	err = cl_slurp(p->err);
	s = strstr(err, "weft: query ");
	assert_non_null(s);
	*id = strtoull(s + strlen("weft: query "), NULL, 10);
	assert_true(*id >= 1);
	free(err);
	snprintf(needle, sizeof(needle), "query %llu running", (unsigned long long)*id);
	for (int k = 0; k < NS; k++)
		cl_expect_log(f->agents[k], needle, CL_WAIT_MS);
	return p;
}

static struct cl_proc *submit(struct fixture *f, const char *log, const char *fmt,
			      const char *query, uint64_t *id)
{
	return submit_as(f, "me", log, fmt, query, id);
}

/* The JSON lines of file path into j: its complete lines (a line still being written is
 * left out). */
static void json_lines(const char *path, struct wr_json *j)
{
	struct wr_buf b = { 0 };
	char *s = cl_slurp(path), *nl = strrchr(s, '\n');

	wr_buf_add(&b, s, nl ? (size_t)(nl - s + 1) : 0);
	free(s);
	wr_json_lines(&b, j);
	free(b.p);
}

/* Rows of a --format json output: those of host (NULL: any). */
static long long json_rows(const char *path, const char *host)
{
	struct cl_res r;
	long long n = 0;

	memset(&r, 0, sizeof(r));
	json_lines(path, &r.j);
	for (size_t i = 0; i < r.j.n; i++)
		if (wr_is_type(r.j.v[i], "row") &&
		    (!host || (wj_str(wj_get(r.j.v[i], "host")) &&
			       strcmp(wj_str(wj_get(r.j.v[i], "host")), host) == 0)))
			n++;
	wr_json_free(&r.j);
	return n;
}

static void test_rows(void **state)
{
	const unsigned long calls[NS] = { 3001, 5002 };
	const int threads[NS] = { 1, 2 };
	struct fixture *f = *state;
	struct cl *cl = &f->cl;
	struct cl_proc *sub;
	struct wr_json j = { 0 };
	char q[256];
	const struct wj *end = NULL, *qs = NULL;
	long long per_host[NS] = { 0 };
	struct {
		long long tid, n;
	} tids[NS][4];
	int ntids[NS] = { 0 };
	uint64_t id;
	struct wj *st;

	cl->passed = false;
	query_of(f, q, sizeof(q));
	sub = submit(f, "rows", "json", q, &id);
	for (int k = 0; k < NS; k++)
		cl_workload(cl, f->comm, f->net.ns[k], calls[k], threads[k]);
	assert_true(
		CL_WAIT(json_rows(sub->out, NULL) >= (long long)(calls[0] + calls[1]), CL_WAIT_MS));
	cl_cancel(cl, NULL, id);
	cl_expect_end(sub);

	json_lines(sub->out, &j);
	memset(tids, 0, sizeof(tids));
	for (size_t i = 0; i < j.n; i++) {
		const struct wj *w = j.v[i];
		const char *host;
		int k;

		if (wr_is_type(w, "stream_end")) {
			assert_null(end); /* one, the last line */
			assert_int_equal(i, j.n - 1);
			end = w;
			continue;
		}
		assert_true(wr_is_type(w, "row"));
		host = wj_str(wj_get(w, "host"));
		assert_non_null(host);
		for (k = 0; k < NS && strcmp(host, hosts[k]); k++)
			;
		if (k == NS)
			fail_msg("a row of host %s", host);
		per_host[k]++;
		assert_string_equal(wj_str(wj_get(w, "comm")), f->comm);
		assert_int_equal(wj_int_of(w, "nr"), SYS_getppid);
		assert_true(wj_int_of(w, "time") > 0);
		assert_true(wj_int_of(w, "cpu") >= 0);
		{
			long long tid = wj_int_of(w, "tid");
			int t;

			for (t = 0; t < ntids[k] && tids[k][t].tid != tid; t++)
				;
			if (t == ntids[k]) {
				assert_true(ntids[k] < 4);
				tids[k][ntids[k]++].tid = tid;
			}
			tids[k][t].n++;
		}
	}
	for (int k = 0; k < NS; k++) {
		assert_int_equal(per_host[k], calls[k]);
		/* the workload's split: thread t makes calls / threads (+1 for t < calls % T) */
		assert_int_equal(ntids[k], threads[k]);
		for (int t = 0; t < ntids[k]; t++)
			assert_int_equal(tids[k][t].n, calls[k] / (unsigned long)threads[k]);
	}
	assert_non_null(end);
	assert_true(cl_json_true(end, "ended"));
	assert_int_equal(wj_int_of(end, "rows"), calls[0] + calls[1]);
	assert_int_equal(wj_int_of(end, "lost"), 0);
	assert_int_equal(wj_int_of(end, "ringbuf_full"), 0);
	for (int k = 0; k < NS; k++)
		assert_int_equal(wj_int_of(wj_get(end, "hosts"), hosts[k]), calls[k]);
	wr_json_free(&j);

	/* the aggregator's count, in status */
	st = cl_status(cl, NULL);
	{
		const struct wj *qv = wj_get(st, "queries");

		for (size_t i = 0; qv && i < qv->nkids; i++)
			if (wj_int_of(&qv->kids[i], "id") == (long long)id)
				qs = &qv->kids[i];
	}
	assert_non_null(qs);
	assert_int_equal(wj_int_of(qs, "rows"), calls[0] + calls[1]);
	assert_int_equal(wj_int_of(qs, "rows_dropped"), 0);
	wj_free(st);
	cl->passed = true;
}

static void test_text(void **state)
{
	const unsigned long n = 777;
	struct fixture *f = *state;
	struct cl *cl = &f->cl;
	struct cl_proc *sub;
	char q[256], want[128], *out, *line;
	uint64_t id;
	long long rows = 0;
	bool header = false;
	char *save = NULL;

	cl->passed = false;
	query_of(f, q, sizeof(q));
	sub = submit(f, "text", "text", q, &id);
	cl_workload(cl, f->comm, f->net.ns[0], n, 1);
	assert_true(CL_WAIT(cl_file_count(sub->out, f->comm) >= (int)n, CL_WAIT_MS));
	cl_cancel(cl, NULL, id);
	cl_expect_end(sub);
	out = cl_slurp(sub->out);
	for (line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		if (!header) {
			/* "host         time  cpu ..." */
			assert_true(strncmp(line, "host ", 5) == 0);
			assert_non_null(strstr(line, " comm"));
			header = true;
			continue;
		}
		if (strncmp(line, "rows: ", 6) == 0) {
			snprintf(want, sizeof(want), "rows: %lu (ns1 %lu); lost: none", n, n);
			assert_string_equal(line, want);
			assert_null(strtok_r(NULL, "\n", &save)); /* the last line */
			break;
		}
		assert_true(strncmp(line, "ns1 ", 4) == 0);
		assert_non_null(strstr(line, f->comm));
		rows++;
	}
	assert_int_equal(rows, n);
	free(out);
	cl->passed = true;
}

/* A RowBatch of query id from the raw agent. */
static void raw_batch(struct cl_raw *r, uint64_t id, uint32_t cols, uint64_t rows, int64_t *ints,
		      size_t nints, ProtobufCBinaryData *texts, size_t ntexts)
{
	Weft__RowBatch b = WEFT__ROW_BATCH__INIT;
	Weft__Envelope e;

	b.query_id = id;
	b.window = 0;
	b.host = (char *)"rawagent";
	b.has_columns = b.has_rows = true;
	b.columns = cols;
	b.rows = rows;
	b.n_ints = nints;
	b.ints = ints;
	b.n_texts = ntexts;
	b.texts = texts;
	cl_raw_env(r, &e, WEFT__ENVELOPE__BODY_ROW_BATCH, &b);
	cl_raw_send(r, &e);
}

static void test_hostile(void **state)
{
	struct fixture *f = *state;
	struct cl *cl = &f->cl;
	struct cl_proc *sub;
	struct cl_raw raw;
	char q[256];
	uint64_t id;
	long long rejected;
	/* time, cpu, tid, (comm), nr: four integers and one text a row */
	int64_t ints[8] = { 1000, 1, 4242, 110, 2000, 0, 4343, 110 };
	ProtobufCBinaryData texts[2] = { { 4, (uint8_t *)"rawA" }, { 4, (uint8_t *)"rawB" } };
	struct wr_json j = { 0 };
	int seen = 0;

	cl->passed = false;
	query_of(f, q, sizeof(q));
	sub = submit(f, "hostile", "json", q, &id);
	rejected = cl_rejected(cl, NULL);
	cl_raw_open(&raw, cl, cl->endpoint, "rawagent");
	cl_raw_hello(&raw, "agent", "rawagent");
	/* 7 cells for 2 rows of 5 columns: the wire refuses it */
	raw_batch(&raw, id, 5, 2, ints, 7, texts, 0);
	assert_true(CL_WAIT(cl_rejected(cl, NULL) == rejected + 1, CL_WAIT_MS));
	/* 4 columns, the query has 5 */
	raw_batch(&raw, id, 4, 2, ints, 8, NULL, 0);
	assert_true(CL_WAIT(cl_rejected(cl, NULL) == rejected + 2, CL_WAIT_MS));
	/* 5 columns but no text: the query's comm is text */
	{
		int64_t ten[10] = { 0 };

		raw_batch(&raw, id, 5, 2, ten, 10, NULL, 0);
	}
	assert_true(CL_WAIT(cl_rejected(cl, NULL) == rejected + 3, CL_WAIT_MS));
	/* a good one: relayed with its values */
	raw_batch(&raw, id, 5, 2, ints, 8, texts, 2);
	assert_true(CL_WAIT(json_rows(sub->out, "rawagent") == 2, CL_WAIT_MS));
	assert_int_equal(cl_rejected(cl, NULL), rejected + 3);
	cl_raw_close(&raw);
	/* a client may not send rows: refused by its key's role, answered and counted */
	cl_raw_open(&raw, cl, cl->endpoint, "me");
	cl_raw_hello(&raw, "client", "");
	raw_batch(&raw, id, 5, 2, ints, 8, texts, 2);
	{
		Weft__Envelope *m = cl_raw_expect(&raw, WEFT__ENVELOPE__BODY_ERROR, CL_WAIT_MS);

		assert_non_null(m);
		assert_true(m->error->has_in_reply_to);
		assert_int_equal(m->error->in_reply_to, raw.seq);
		assert_non_null(strstr(m->error->message, "may not send row_batch"));
		wire_free(m);
	}
	assert_true(CL_WAIT(cl_rejected(cl, NULL) == rejected + 4, CL_WAIT_MS));
	cl_raw_close(&raw);
	cl_cancel(cl, NULL, id);
	cl_expect_end(sub);
	/* the raw agent never sends its last rows: the client waited for them, and says so */
	assert_true(cl_file_has(sub->err, ": the last rows of rawagent did not come within"));

	json_lines(sub->out, &j);
	for (size_t i = 0; i < j.n; i++) {
		const struct wj *w = j.v[i];

		if (!wr_is_type(w, "row"))
			continue;
		/* nothing but the good batch: no real row (no workload ran) */
		assert_string_equal(wj_str(wj_get(w, "host")), "rawagent");
		assert_int_equal(wj_int_of(w, "time"), ints[seen * 4]);
		assert_int_equal(wj_int_of(w, "cpu"), ints[seen * 4 + 1]);
		assert_int_equal(wj_int_of(w, "tid"), ints[seen * 4 + 2]);
		assert_string_equal(wj_str(wj_get(w, "comm")), seen ? "rawB" : "rawA");
		assert_int_equal(wj_int_of(w, "nr"), 110);
		seen++;
	}
	assert_int_equal(seen, 2);
	wr_json_free(&j);
	cl->passed = true;
}

/* Member `name` of query id in `weft status --format json`, -1 if absent. */
static long long status_of(struct cl *cl, uint64_t id, const char *name)
{
	struct wj *st = cl_status(cl, NULL);
	const struct wj *qv = wj_get(st, "queries");
	long long n = -1;

	for (size_t i = 0; qv && i < qv->nkids; i++)
		if (wj_int_of(&qv->kids[i], "id") == (long long)id && wj_get(&qv->kids[i], name))
			n = wj_int_of(&qv->kids[i], name);
	wj_free(st);
	return n;
}

/* The rows the aggregator has taken for query id. */
static long long status_rows(struct cl *cl, uint64_t id)
{
	return status_of(cl, id, "rows");
}

/*
 * A client stopped while ns1's calls[0] rows are relayed to it, forgotten, then ns2's
 * calls[1] come, relayed to nobody, then continued: its rows per host into got[], and its
 * stream_end checked against what the aggregator took (status): the rows it printed and
 * those it counts as not relayed add up to them exactly, and its lost are those.
 */
static void comeback(struct fixture *f, const unsigned long calls[NS], const char *log,
		     long long got[NS], uint64_t *id)
{
	struct cl *cl = &f->cl;
	struct cl_proc *sub;
	struct wr_json j = { 0 };
	char q[256], needle[128], joined[128], host[256] = "";
	const struct wj *end = NULL;
	long long taken;
	int joins, expiries;

	gethostname(host, sizeof(host) - 1);
	snprintf(needle, sizeof(needle), "client %s (key slow) expired", host);
	snprintf(joined, sizeof(joined), "client %s (key slow) joined", host);
	/* an earlier test's client (gone) expired first: its expiry is not this one's */
	assert_true(
		CL_WAIT(cl_file_count(f->agg->err, needle) == cl_file_count(f->agg->err, joined),
			CL_WAIT_MS));
	query_of(f, q, sizeof(q));
	sub = submit_as(f, "slow", log, "json", q, id);
	expiries = cl_file_count(f->agg->err, needle);
	assert_int_equal(kill(sub->pid, SIGSTOP), 0);
	/* ns1's rows relayed to the stopped client (they wait in its connection's queue),
	 * then the client forgotten, then ns2's rows relayed to nobody */
	cl_workload(cl, f->comm, f->net.ns[0], calls[0], 1);
	assert_true(CL_WAIT(status_rows(cl, *id) == (long long)calls[0], CL_WAIT_MS));
	assert_true(CL_WAIT(cl_file_count(f->agg->err, needle) == expiries + 1, CL_WAIT_MS));
	cl_workload(cl, f->comm, f->net.ns[1], calls[1], 1);
	assert_true(CL_WAIT(status_rows(cl, *id) == (long long)(calls[0] + calls[1]), CL_WAIT_MS));
	taken = calls[0] + calls[1];
	assert_int_equal(json_rows(sub->out, NULL), 0);
	joins = cl_file_count(f->agg->err, joined);
	assert_int_equal(kill(sub->pid, SIGCONT), 0);
	/* it says Hello again and subscribes again: what is kept, then the rest */
	assert_true(CL_WAIT(cl_file_count(f->agg->err, joined) == joins + 1, CL_WAIT_MS));
	assert_true(CL_WAIT(json_rows(sub->out, hosts[0]) >= (long long)calls[0], CL_WAIT_MS));
	cl_cancel(cl, NULL, *id);
	cl_expect_end(sub);

	json_lines(sub->out, &j);
	got[0] = got[1] = 0;
	for (size_t i = 0; i < j.n; i++) {
		const struct wj *w = j.v[i];
		int k;

		if (wr_is_type(w, "stream_end")) {
			end = w;
			continue;
		}
		for (k = 0; k < NS && strcmp(wj_str(wj_get(w, "host")), hosts[k]); k++)
			;
		assert_true(k < NS);
		got[k]++;
		assert_string_equal(wj_str(wj_get(w, "comm")), f->comm);
	}
	assert_non_null(end);
	assert_int_equal(wj_int_of(end, "rows"), got[0] + got[1]);
	assert_int_equal(wj_int_of(end, "rows") + wj_int_of(end, "not_relayed"), taken);
	assert_int_equal(wj_int_of(end, "lost"), wj_int_of(end, "not_relayed"));
	wr_json_free(&j);
}

static void test_comeback(void **state)
{
	const unsigned long calls[NS] = { 1201, 1202 };
	struct fixture *f = *state;
	long long got[NS];
	char needle[128];
	uint64_t id;

	f->cl.passed = false;
	comeback(f, calls, "comeback", got, &id);
	/* the aggregator keeps both hosts' rows (72 KB of the 128 KiB it may), and says so */
	assert_int_equal(status_of(&f->cl, id, "rows_kept"), calls[0] + calls[1]);
	assert_true(status_of(&f->cl, id, "rows_kept_bytes") > 0);
	assert_true(status_of(&f->cl, id, "rows_kept_bytes") <= 128 * 1024);
	/* everything, each row once: ns2's from what the aggregator kept */
	snprintf(needle, sizeof(needle), "kept row batches of query %llu sent again (from ",
		 (unsigned long long)id);
	assert_true(cl_file_has(f->agg->err, needle));
	for (int k = 0; k < NS; k++)
		assert_int_equal(got[k], calls[k]);
	f->cl.passed = true;
}

/*
 * The same beyond what is kept (the fixture's aggregator keeps 128 KiB a stream): ns2's
 * 20,000 rows (some 600 KB) do not all fit, so the client gets ns1's rows, fewer of ns2's,
 * and counts the rest as not relayed, exactly (checked in comeback()).
 */
static void test_comeback_beyond_kept(void **state)
{
	const unsigned long calls[NS] = { 1201, 20000 };
	struct fixture *f = *state;
	long long got[NS];
	uint64_t id;

	f->cl.passed = false;
	comeback(f, calls, "comeback-beyond", got, &id);
	assert_int_equal(got[0], calls[0]);
	assert_true(got[1] < (long long)calls[1]);
	assert_true(status_of(&f->cl, id, "rows_kept") < (long long)(calls[0] + calls[1]));
	assert_true(status_of(&f->cl, id, "rows_kept_bytes") <= 128 * 1024);
	f->cl.passed = true;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rows),
		cmocka_unit_test(test_text),
		cmocka_unit_test(test_hostile),
		cmocka_unit_test(test_comeback),
		cmocka_unit_test(test_comeback_beyond_kept),
	};

	if (!wr_ready())
		return WT_SKIP;
	return wt_status(cmocka_run_group_tests(tests, group_setup, group_teardown));
}
