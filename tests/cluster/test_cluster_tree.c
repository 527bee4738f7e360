// SPDX-License-Identifier: Apache-2.0
/*
 * A tree of aggregators (docs/operations.md, "A tree of aggregators"): a root aggregator,
 * a region aggregator reporting to it (`--parent`, its key allow-listed at the root with the
 * role aggregator), and two agents connected to the region.  Queries are submitted to the
 * root; the region runs them on its agents under ids of its own and sends each window up as
 * one partial.  At the root, grouped by host, each leaf host counts the workload's calls
 * exactly, the two runs in windows of their own, and the results name the leaf hosts, not
 * the region; ungrouped, the count is exactly twice the calls.  Cancelling at the root stops
 * the queries on the agents.  A stream query (a select without aggregates) submitted at the
 * root runs on the agents through the region too: the region passes their row batches up,
 * and the root's client prints exactly n3 rows of each leaf host (named as the agent, not
 * the region) from a workload of its own, each with that workload's comm, and its
 * stream_end counts them and no row lost.
 *
 * The parent link's Welcome (test_parent_welcome_seq): this test plays the parent of a real
 * child aggregator and sends it Welcomes; one whose seq does not increase over the parent
 * instance's previous messages (a stale or replayed Welcome, which could drop partials the
 * parent never merged) is rejected and counted in the child's `weft status` `rejected`; one
 * that does increase, or comes from a new parent instance, is accepted.
 *
 * Needs root (agents load BPF); skipped otherwise.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "aggregator/zap.h"
#include "tests/cluster/cluster_util.h"
#include "tests/skip.h"

/* The output of a stream's `weft submit --format json`: exactly n rows of each host, of the
 * workload's comm, none of any other host, and a last line that counts them, lost none. */
static void stream_check(const char *path, const char *comm, const char *const *hosts,
			 unsigned long n)
{
	struct wr_json j = { 0 };
	struct wr_buf b = { 0 };
	char *out = cl_slurp(path);
	long long per[2] = { 0 };
	const struct wj *end = NULL;

	wr_buf_add(&b, out, strlen(out));
	free(out);
	wr_json_lines(&b, &j);
	free(b.p);
	for (size_t i = 0; i < j.n; i++) {
		const struct wj *w = j.v[i];
		const char *host = wj_str(wj_get(w, "host"));
		int k;

		if (wr_is_type(w, "stream_end")) {
			assert_int_equal(i, j.n - 1);
			end = w;
			continue;
		}
		assert_true(wr_is_type(w, "row"));
		assert_non_null(host);
		for (k = 0; hosts[k] && strcmp(host, hosts[k]); k++)
			;
		if (!hosts[k] || k > 1)
			fail_msg("a row of host %s", host);
		per[k]++;
		assert_string_equal(wj_str(wj_get(w, "comm")), comm);
	}
	assert_int_equal(per[0], n);
	assert_int_equal(per[1], n);
	assert_non_null(end);
	assert_true(cl_json_true(end, "ended"));
	assert_int_equal(wj_int_of(end, "rows"), 2 * n);
	assert_int_equal(wj_int_of(end, "lost"), 0);
	for (int k = 0; k < 2; k++)
		assert_int_equal(wj_int_of(wj_get(end, "hosts"), hosts[k]), n);
	wr_json_free(&j);
}

static void test_tree(void **state)
{
	static const char *const hosts[] = { "a", "b", NULL };
	const unsigned long n1 = 25000, n2 = 8000, n3 = 1500;
	struct cl *cl = *state;
	struct cl_proc *root, *region, *agents[2], *by_host, *total, *stream;
	char comm[32], scomm[32], q_host[256], q_total[256], q_stream[256], region_ep[64];
	char id_text[32];
	uint64_t id_host, id_total, id_stream;
	const struct wj *ag;
	struct cl_res r;
	struct wj *st;

	cl_keygen(cl, "aggregator", "root", false);
	cl_keygen(cl, "aggregator", "region1", true); /* a child of the root */
	cl_keygen_agents(cl, hosts);
	/* the root waits longer than the region, which closes its windows first */
	root = cl_aggregator(cl, "root", NULL, NULL,
			     (char *const[]){ (char *)"--lateness", (char *)"1500ms", NULL });
	snprintf(region_ep, sizeof(region_ep), "tcp://127.0.0.1:%d", cl_free_port());
	region = cl_aggregator(cl, "region1", region_ep, NULL,
			       (char *const[]){ (char *)"--parent", cl->endpoint,
						(char *)"--parent-key", (char *)cl_pub(cl, "root"),
						NULL });
	cl_expect_log(region, "welcomed by the parent", CL_WAIT_MS);
	snprintf(cl->agent_server, sizeof(cl->agent_server), "region1");
	snprintf(cl->client_server, sizeof(cl->client_server), "root");
	cl_agents(cl, hosts, region_ep, agents);

	snprintf(comm, sizeof(comm), "%st", cl->tag);
	cl_workload_make(cl, comm);
	snprintf(q_host, sizeof(q_host),
		 "from syscall:getppid where comm = '%s' group by host select count() as n "
		 "every 1s",
		 comm);
	snprintf(q_total, sizeof(q_total),
		 "from syscall:getppid where comm = '%s' select count() as n every 1s", comm);
	/* the stream's workload of its own, smaller: rows cost more than counts */
	snprintf(scomm, sizeof(scomm), "%ss", cl->tag);
	cl_workload_make(cl, scomm);
	snprintf(q_stream, sizeof(q_stream),
		 "from syscall:getppid where comm = '%s' select tid, comm", scomm);
	by_host = cl_submit(cl, "submit-host", NULL, q_host, &id_host);
	total = cl_submit(cl, "submit-total", NULL, q_total, &id_total);
	stream = cl_submit(cl, "submit-stream", NULL, q_stream, &id_stream);
	/* the region runs the three under ids of its own */
	for (int i = 0; i < 2; i++)
		if (!CL_WAIT(cl_file_count(agents[i]->err, " running: ") == 3, CL_WAIT_MS))
			fail_msg("agent %s does not run the three queries", hosts[i]);

	/* the root sees the region (an aggregator), not the agents */
	st = cl_status(cl, NULL);
	ag = cl_status_agent(st, "region1");
	assert_non_null(ag);
	assert_string_equal(wj_str(wj_get(ag, "role")), "aggregator");
	assert_true(cl_json_true(ag, "alive"));
	assert_true(cl_json_has_int(ag, "running", (long long)id_host));
	assert_null(cl_status_agent(st, "a"));
	wj_free(st);

	cl_workload(cl, comm, NULL, n1, 2);
	for (int i = 0; hosts[i]; i++)
		assert_true(CL_WAIT(cl_file_sum(by_host->out, "n", hosts[i], NULL) == (long long)n1,
				    CL_WAIT_MS));
	cl_workload(cl, comm, NULL, n2, 3);
	cl_workload(cl, scomm, NULL, n3, 2);
	/* every row of both hosts at the root's client before the cancel */
	assert_true(
		CL_WAIT(cl_file_count(stream->out, "\"type\":\"row\"") == 2 * (int)n3, CL_WAIT_MS));
	cl_cancel(cl, NULL, id_host);
	cl_cancel(cl, NULL, id_total);
	cl_cancel(cl, NULL, id_stream);
	cl_expect_end(by_host);
	cl_expect_end(total);
	cl_expect_end(stream);
	/* stopped all the way down */
	for (int i = 0; i < 2; i++)
		assert_true(CL_WAIT(cl_file_count(agents[i]->err, " ended after window ") == 3,
				    CL_WAIT_MS));
	stream_check(stream->out, scomm, hosts, n3);

	cl_res_load(&r, by_host->out);
	assert_true(r.ended);
	for (int i = 0; hosts[i]; i++) {
		assert_int_equal(cl_res_sum(&r, "n", hosts[i], NULL), n1 + n2);
		/* the second run started once the first was merged: windows of its own */
		assert_true(cl_res_splits(&r, "n", hosts[i], NULL, n1, n2));
	}
	cl_res_rows_only(&r, hosts);
	cl_res_assert_hosts(&r, 0, hosts, agents, id_host);
	assert_int_equal(r.late_dropped, 0);
	cl_res_free(&r);

	cl_res_load(&r, total->out);
	assert_true(r.ended);
	assert_int_equal(cl_res_sum(&r, "n", NULL, NULL), 2 * (n1 + n2));
	cl_res_assert_hosts(&r, 0, hosts, agents, id_total);
	cl_res_free(&r);

	assert_true(cl_alive(root));
	assert_true(cl_alive(region));
	snprintf(id_text, sizeof(id_text), "query %llu ended", (unsigned long long)id_host);
	assert_true(cl_file_has(root->err, id_text));
	cl->passed = true;
}

/* A parent played by the test: a CURVE ROUTER with the test's allow-list. */
struct fake_parent {
	void *zctx, *sock;
	struct wire_zap *zap;
	uint8_t id[256]; /* the child's routing id */
	size_t idlen;
};

/* The next envelope from the child within ms (the routing id kept), or NULL. */
static Weft__Envelope *fake_recv(struct fake_parent *f, int ms)
{
	zmq_pollitem_t it = { .socket = f->sock, .events = ZMQ_POLLIN };
	zmq_msg_t id, body;
	Weft__Envelope *e;
	char why[256];

	if (zmq_poll(&it, 1, ms) <= 0)
		return NULL;
	zmq_msg_init(&id);
	zmq_msg_init(&body);
	assert_true(zmq_msg_recv(&id, f->sock, 0) >= 0);
	assert_true(zmq_msg_recv(&body, f->sock, 0) >= 0);
	assert_string_equal(zmq_msg_gets(&body, "User-Id"), "aggregator:region1");
	e = wire_decode(zmq_msg_data(&body), zmq_msg_size(&body), why, sizeof(why));
	if (!e)
		fail_msg("the child sent something invalid: %s", why);
	assert_true(zmq_msg_size(&id) <= sizeof(f->id));
	memcpy(f->id, zmq_msg_data(&id), zmq_msg_size(&id));
	f->idlen = zmq_msg_size(&id);
	zmq_msg_close(&id);
	zmq_msg_close(&body);
	return e;
}

static void fake_welcome(struct fake_parent *f, uint64_t instance, uint64_t seq)
{
	Weft__Envelope e = WEFT__ENVELOPE__INIT;
	Weft__Welcome w = WEFT__WELCOME__INIT;

	w.aggregator = "fake-parent";
	w.instance = instance;
	w.heartbeat_ms = 200;
	w.has_last_seq = true;
	w.last_seq = 0;
	e.version = WIRE_VERSION;
	e.seq = seq;
	e.body_case = WEFT__ENVELOPE__BODY_WELCOME;
	e.welcome = &w;
	assert_int_equal(wire_send(f->sock, f->id, f->idlen, &e, false), 0);
}

static void test_parent_welcome_seq(void **state)
{
	struct cl *cl = *state;
	struct fake_parent f = { 0 };
	struct wire_allowlist al = { 0 };
	struct cl_proc *region;
	char pub[WIRE_KEY_LEN + 1], sec[WIRE_KEY_LEN + 1], parent_ep[64], region_ep[64];
	Weft__Envelope *e;
	uint64_t until;
	int line = 0, zero = 0;

	if (!cl->dir[0])
		skip();
	cl_keygen(cl, "aggregator", "parent", false);
	cl_keygen(cl, "aggregator", "region1", true);
	assert_int_equal(wire_keyfile_read(cl_path(cl, "parent.key"), pub, sec), 0);
	assert_int_equal(wire_allowlist_load(cl_path(cl, "allow"), &al, &line), 0);
	f.zctx = zmq_ctx_new();
	assert_non_null(f.zctx);
	f.zap = wire_zap_start(f.zctx, &al);
	assert_non_null(f.zap);
	wire_allowlist_free(&al);
	snprintf(parent_ep, sizeof(parent_ep), "tcp://127.0.0.1:%d", cl_free_port());
	f.sock = wire_server_socket(f.zctx, parent_ep, pub, sec);
	assert_non_null(f.sock);
	zmq_setsockopt(f.sock, ZMQ_LINGER, &zero, sizeof(zero));

	snprintf(region_ep, sizeof(region_ep), "tcp://127.0.0.1:%d", cl_free_port());
	region = cl_aggregator(cl, "region1", region_ep, NULL,
			       (char *const[]){ (char *)"--parent", parent_ep,
						(char *)"--parent-key",
						(char *)cl_pub(cl, "parent"), NULL });
	snprintf(cl->client_server, sizeof(cl->client_server), "region1");
	until = wr_now_ms() + CL_WAIT_MS;
	while (!(e = fake_recv(&f, 500)) || e->body_case != WEFT__ENVELOPE__BODY_HELLO) {
		wire_free(e);
		if (wr_now_ms() > until)
			fail_msg("no Hello from the child");
	}
	assert_string_equal(e->hello->role, "aggregator");
	assert_string_equal(e->hello->host, "region1");
	wire_free(e);

	/* welcomed by parent instance 7 with seq 10 */
	fake_welcome(&f, 7, 10);
	cl_expect_log(region, "welcomed by the parent", CL_WAIT_MS);
	assert_int_equal(cl_rejected(cl, region_ep), 0);

	/* the same instance again with a lower seq, then with the same one: both rejected */
	fake_welcome(&f, 7, 5);
	assert_true(CL_WAIT(cl_rejected(cl, region_ep) == 1, CL_WAIT_MS));
	fake_welcome(&f, 7, 10);
	assert_true(CL_WAIT(cl_rejected(cl, region_ep) == 2, CL_WAIT_MS));
	assert_int_equal(cl_file_count(region->err, "welcomed by the parent"), 1);

	/* a higher seq of the same instance is a Welcome again; a new instance starts anew */
	fake_welcome(&f, 7, 11);
	assert_true(CL_WAIT(cl_file_count(region->err, "welcomed by the parent") == 2, CL_WAIT_MS));
	fake_welcome(&f, 8, 1);
	assert_true(CL_WAIT(cl_file_count(region->err, "welcomed by the parent") == 3, CL_WAIT_MS));
	assert_int_equal(cl_rejected(cl, region_ep), 2);
	assert_true(cl_alive(region));

	zmq_close(f.sock);
	wire_zap_stop(f.zap);
	zmq_ctx_term(f.zctx);
	cl->passed = true;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_tree, cl_test_setup, cl_test_teardown),
		cmocka_unit_test_setup_teardown(test_parent_welcome_seq, cl_test_setup,
						cl_test_teardown),
	};

	if (!wr_ready())
		return WT_SKIP;
	return wt_status(cmocka_run_group_tests(tests, NULL, NULL));
}
