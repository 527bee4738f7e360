// SPDX-License-Identifier: Apache-2.0
/*
 * A cluster of real processes on loopback: one `weft aggregator`, `weft agent`s with their
 * own host names, and `weft submit`/`status`/`cancel` clients, all over CURVE-secured
 * ZeroMQ (docs/operations.md, "Cluster in five minutes").
 *
 *   merge     three agents (a, b, c) run the same queries; every agent sees every process
 *             of this one machine, so grouped by host each host counts the workload's calls
 *             exactly, and the ungrouped count is exactly three times that, summed over the
 *             windows' answers
 *   keys      a client whose key is not allow-listed is refused (exit status 1, the refusal
 *             counted in `rejected`); an agent whose key is not listed never joins and never
 *             receives the query that an allowed agent runs
 *   hostile   raw DEALERs with allowed keys send garbage, malformed envelopes, bodies their
 *             role may not send and partials with hostile groups: every one counted once in
 *             `rejected`, none merged, the aggregator stays up, and queries (one running,
 *             one submitted afterwards) still count exactly
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

#include "tests/cluster/cluster_util.h"
#include "tests/skip.h"

/* Waits for "query ID running" on an agent's log: its probes are attached. */
static void expect_running(struct cl_proc *agent, uint64_t id)
{
	char needle[64];

	snprintf(needle, sizeof(needle), "query %llu running", (unsigned long long)id);
	cl_expect_log(agent, needle, CL_WAIT_MS);
}

static void test_merge(void **state)
{
	static const char *const hosts[] = { "a", "b", "c", NULL };
	const unsigned long n1 = 30000, n2 = 12345;
	struct cl *cl = *state;
	struct cl_proc *agents[3], *by_host, *total;
	char comm[32], q_host[256], q_total[256];
	struct cl_res r;
	uint64_t id_host, id_total;
	struct wj *st;

	cl_keygen_agents(cl, hosts);
	cl_aggregator(cl, "agg", NULL, NULL, NULL);
	cl_agents(cl, hosts, NULL, agents);
	snprintf(comm, sizeof(comm), "%sm", cl->tag);
	cl_workload_make(cl, comm);
	snprintf(q_host, sizeof(q_host),
		 "from syscall:getppid where comm = '%s' group by host select count() as n "
		 "every 1s",
		 comm);
	snprintf(q_total, sizeof(q_total),
		 "from syscall:getppid where comm = '%s' select count() as n every 1s", comm);
	by_host = cl_submit(cl, "submit-host", NULL, q_host, &id_host);
	total = cl_submit(cl, "submit-total", NULL, q_total, &id_total);
	for (int i = 0; i < 3; i++) {
		expect_running(agents[i], id_host);
		expect_running(agents[i], id_total);
	}

	/* the aggregator knows all three, alive, each running both queries */
	st = cl_status(cl, NULL);
	for (int i = 0; hosts[i]; i++) {
		const struct wj *ag = cl_status_agent(st, hosts[i]);

		assert_non_null(ag);
		assert_true(cl_json_true(ag, "alive"));
		assert_string_equal(wj_str(wj_get(ag, "role")), "agent");
		assert_true(cl_json_has_int(ag, "running", (long long)id_host));
		assert_true(cl_json_has_int(ag, "running", (long long)id_total));
	}
	wj_free(st);

	/* the second run starts after every host's count of the first was merged: the sums
	 * below span windows */
	cl_workload(cl, comm, NULL, n1, 3);
	for (int i = 0; hosts[i]; i++)
		assert_true(CL_WAIT(cl_file_sum(by_host->out, "n", hosts[i], NULL) == (long long)n1,
				    CL_WAIT_MS));
	cl_workload(cl, comm, NULL, n2, 2);
	cl_cancel(cl, NULL, id_host);
	cl_cancel(cl, NULL, id_total);
	cl_expect_end(by_host);
	cl_expect_end(total);

	/* grouped by host: each host counted every call, nothing else, and the two runs in
	 * windows of their own (the second started once the first was merged) */
	cl_res_load(&r, by_host->out);
	assert_true(r.ended);
	for (int i = 0; hosts[i]; i++) {
		assert_int_equal(cl_res_sum(&r, "n", hosts[i], NULL), n1 + n2);
		assert_true(cl_res_splits(&r, "n", hosts[i], NULL, n1, n2));
	}
	cl_res_rows_only(&r, hosts);
	cl_res_assert_hosts(&r, 0, hosts, agents, id_host);
	assert_int_equal(r.late_dropped, 0);
	cl_res_free(&r);

	/* merged: the three hosts' partials summed, window by window */
	cl_res_load(&r, total->out);
	assert_true(r.ended);
	assert_int_equal(cl_res_sum(&r, "n", NULL, NULL), 3 * (n1 + n2));
	cl_res_assert_hosts(&r, 0, hosts, agents, id_total);
	cl_res_free(&r);

	assert_int_equal(cl_rejected(cl, NULL), 0);
	cl->passed = true;
}

static void test_keys(void **state)
{
	const unsigned long calls = 7777;
	struct cl *cl = *state;
	struct cl_proc *agg, *a, *intruder, *sub;
	char comm[32], q[256];
	struct wr_proc p;
	long long r0, r1, r2;
	struct cl_res r;
	uint64_t id;
	struct wj *st;
	int rc;

	cl_keygen(cl, "agent", "a", true);
	cl_keygen(cl, "agent", "intruder", false); /* never allow-listed */
	cl_keygen(cl, "client", "stranger", false);
	agg = cl_aggregator(cl, "agg", NULL, NULL, NULL);
	a = cl_agent(cl, "a", "agent-a", NULL, NULL, true);
	snprintf(comm, sizeof(comm), "%sk", cl->tag);
	cl_workload_make(cl, comm);
	snprintf(q, sizeof(q),
		 "from syscall:getppid where comm = '%s' group by host select count() as n "
		 "every 1s",
		 comm);
	r0 = cl_rejected(cl, NULL);

	/* a client with an unknown key: refused at the handshake, told so, counted */
	rc = cl_weft(&p, (char *)"submit", (char *)"--to", cl->endpoint, (char *)"--server-key",
		     (char *)cl_path(cl, "agg.pub"), (char *)"--key",
		     (char *)cl_path(cl, "stranger.key"), (char *)"--timeout", (char *)"2s",
		     (char *)"--format", (char *)"json", q);
	if (rc != 1 || !strstr(p.err.p, "refused this client's key") || p.out.len != 0) {
		wr_dump(&p, "weft submit with an unknown key");
		fail_msg("an unknown client key was not refused as documented");
	}
	wr_free(&p);
	rc = cl_weft(&p, (char *)"status", (char *)"--to", cl->endpoint, (char *)"--server-key",
		     (char *)cl_path(cl, "agg.pub"), (char *)"--key",
		     (char *)cl_path(cl, "stranger.key"), (char *)"--timeout", (char *)"2s");
	if (rc != 1 || !strstr(p.err.p, "refused this client's key") || p.out.len != 0) {
		wr_dump(&p, "weft status with an unknown key");
		fail_msg("weft status with an unknown key: status %d", rc);
	}
	wr_free(&p);
	r1 = cl_rejected(cl, NULL);
	assert_true(r1 > r0);
	assert_int_equal(cl_file_count(agg->err, "submitted by"), 0);

	/* an agent with an unknown key: it keeps trying, and is refused every time */
	intruder = cl_agent(cl, "intruder", "agent-intruder", NULL, NULL, false);
	assert_true(CL_WAIT((r2 = cl_rejected(cl, NULL)) > r1, CL_WAIT_MS));

	sub = cl_submit(cl, "submit", NULL, q, &id);
	expect_running(a, id);
	cl_workload(cl, comm, NULL, calls, 2);
	cl_cancel(cl, NULL, id);
	cl_expect_end(sub);

	cl_res_load(&r, sub->out);
	assert_true(r.ended);
	assert_int_equal(cl_res_sum(&r, "n", "a", NULL), calls);
	cl_res_rows_only(&r, (const char *const[]){ "a", NULL });
	for (size_t w = 0; w < r.nwin; w++)
		assert_true(
			cl_json_strs_are(r.final[w], "hosts", (const char *const[]){ "a", NULL }));
	cl_res_free(&r);

	/* the intruder never joined, never got the query, and is still trying */
	assert_true(cl_alive(intruder));
	assert_true(cl_file_has(intruder->err, "refused this agent's key"));
	assert_false(cl_file_has(intruder->err, "connected to aggregator"));
	assert_false(cl_file_has(intruder->err, "query"));
	assert_false(cl_file_has(agg->err, "intruder"));
	st = cl_status(cl, NULL);
	assert_null(cl_status_agent(st, "intruder"));
	assert_true(wj_int_of(st, "rejected") >= r2);
	wj_free(st);
	cl->passed = true;
}

/* Packs a heartbeat envelope with the given version and seq. */
static void *heartbeat_bytes(uint32_t version, uint64_t seq, size_t *len)
{
	Weft__Envelope e;
	Weft__Heartbeat hb;

	weft__heartbeat__init(&hb);
	hb.time_ns = 1;
	weft__envelope__init(&e);
	e.version = version;
	e.seq = seq;
	e.body_case = WEFT__ENVELOPE__BODY_HEARTBEAT;
	e.heartbeat = &hb;
	return cl_raw_pack(&e, len);
}

/* Asks for the status over a raw client and returns its `rejected`. */
static long long raw_rejected(struct cl_raw *raw)
{
	Weft__Envelope e, *reply;
	Weft__StatusRequest sr;
	long long n;

	weft__status_request__init(&sr);
	cl_raw_env(raw, &e, WEFT__ENVELOPE__BODY_STATUS_REQUEST, &sr);
	cl_raw_send(raw, &e);
	reply = cl_raw_expect(raw, WEFT__ENVELOPE__BODY_STATUS_REPLY, CL_WAIT_MS);
	assert_non_null(reply);
	/* it names the request it answers */
	assert_true(reply->status_reply->has_in_reply_to);
	assert_int_equal(reply->status_reply->in_reply_to, e.seq);
	assert_true(reply->status_reply->has_rejected);
	n = (long long)reply->status_reply->rejected;
	wire_free(reply);
	return n;
}

static void test_hostile(void **state)
{
	const unsigned long before = 4321, after = 9876;
	struct cl *cl = *state;
	struct cl_proc *agg, *a, *sub, *sub2;
	struct cl_raw raw, evil;
	char comm[32], q[256];
	uint8_t junk[300];
	uint64_t id, id2, x = 0x9e3779b97f4a7c15ull;
	long long r0;
	Weft__Envelope e, *m;
	struct cl_res r;
	size_t len, len2;
	void *buf, *buf2;

	cl_keygen(cl, "agent", "a", true);
	cl_keygen(cl, "client", "raw", true);
	cl_keygen(cl, "agent", "evil", true);
	agg = cl_aggregator(cl, "agg", NULL, NULL, NULL);
	a = cl_agent(cl, "a", "agent-a", NULL, NULL, true);
	snprintf(comm, sizeof(comm), "%sh", cl->tag);
	cl_workload_make(cl, comm);
	snprintf(q, sizeof(q),
		 "from syscall:getppid where comm = '%s' group by host select count() as n "
		 "every 1s",
		 comm);
	sub = cl_submit(cl, "submit", NULL, q, &id);
	expect_running(a, id);
	cl_workload(cl, comm, NULL, before, 2);

	/* an allowed client saying what no client may say */
	cl_raw_open(&raw, cl, cl->endpoint, "raw");
	cl_raw_hello(&raw, "client", "");
	r0 = raw_rejected(&raw);

	junk[0] = 0x07; /* wire type 7 does not exist: never a protobuf message */
	for (size_t i = 1; i < sizeof(junk); i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		junk[i] = (uint8_t)x;
	}
	assert_int_equal(cl_raw_bytes(&raw, junk, sizeof(junk), 0), 0); /* 1: garbage */
	assert_int_equal(cl_raw_bytes(&raw, "", 0, 0), 0); /* 2: nothing */
	buf = heartbeat_bytes(2, ++raw.seq, &len); /* 3: a version this peer does not speak */
	assert_int_equal(cl_raw_bytes(&raw, buf, len, 0), 0);
	free(buf);
	buf = heartbeat_bytes(WIRE_VERSION, 0, &len); /* 4: seq 0 */
	assert_int_equal(cl_raw_bytes(&raw, buf, len, 0), 0);
	free(buf);
	buf = heartbeat_bytes(WIRE_VERSION, ++raw.seq, &len); /* 5: truncated */
	assert_int_equal(cl_raw_bytes(&raw, buf, len - 3, 0), 0);
	free(buf);
	{
		/* 6: two bodies in one envelope (protobuf-c alone would keep the last) */
		Weft__StatusRequest sr;
		char *two;

		weft__status_request__init(&sr);
		buf = heartbeat_bytes(WIRE_VERSION, ++raw.seq, &len);
		cl_raw_env(&raw, &e, WEFT__ENVELOPE__BODY_STATUS_REQUEST, &sr);
		buf2 = cl_raw_pack(&e, &len2);
		two = malloc(len + len2);
		assert_non_null(two);
		memcpy(two, buf, len);
		memcpy(two + len, buf2, len2);
		assert_int_equal(cl_raw_bytes(&raw, two, len + len2, 0), 0);
		free(two);
		free(buf);
		free(buf2);
	}
	/* 7: one message of two parts */
	buf = heartbeat_bytes(WIRE_VERSION, ++raw.seq, &len);
	assert_int_equal(cl_raw_bytes(&raw, buf, len, ZMQ_SNDMORE), 0);
	assert_int_equal(cl_raw_bytes(&raw, buf, len, 0), 0);
	free(buf);
	{
		/* 8: a partial, which a client may not send */
		Weft__Partial pt;

		weft__partial__init(&pt);
		pt.query_id = id;
		pt.window = 0;
		pt.host = (char *)"a";
		cl_raw_env(&raw, &e, WEFT__ENVELOPE__BODY_PARTIAL, &pt);
		cl_raw_send(&raw, &e);
	}
	{
		/* 9: a Hello claiming the agent role with a client's key */
		Weft__Hello h;

		weft__hello__init(&h);
		h.role = (char *)"agent";
		h.host = (char *)"a";
		h.version = (char *)"0.1.0";
		h.instance = 99;
		cl_raw_env(&raw, &e, WEFT__ENVELOPE__BODY_HELLO, &h);
		cl_raw_send(&raw, &e);
	}
	{
		/* 10: a QueryStart, which only an aggregator sends */
		Weft__QueryStart qs;
		uint8_t one = 1;

		weft__query_start__init(&qs);
		qs.query_id = 77;
		qs.query = (char *)"from syscall:getppid select count()";
		qs.manifest.data = &one;
		qs.manifest.len = 1;
		qs.object.data = &one;
		qs.object.len = 1;
		qs.epoch_realtime_ns = 1;
		cl_raw_env(&raw, &e, WEFT__ENVELOPE__BODY_QUERY_START, &qs);
		cl_raw_send(&raw, &e);
	}
	/* messages of one connection are handled in order: all ten are counted by now */
	assert_int_equal(raw_rejected(&raw), r0 + 10);
	cl_raw_close(&raw);

	/* an allowed agent key sending partials that must not be merged */
	cl_raw_open(&evil, cl, cl->endpoint, "evil");
	cl_raw_hello(&evil, "agent", "evil");
	m = cl_raw_expect(&evil, WEFT__ENVELOPE__BODY_QUERY_START, CL_WAIT_MS);
	assert_non_null(m); /* an allowed agent gets the running query */
	assert_int_equal(m->query_start->query_id, id);
	wire_free(m);
	{
		Weft__Partial pt;
		Weft__Group g, *gs[1] = { &g };
		uint8_t key[5] = { 0xff, 0xfe, 0x00, 0x13, 0x37 }, st[3] = { 0xee, 0x01, 0x02 };
		ProtobufCBinaryData sb = { .len = sizeof(st), .data = st };
		weft__group__init(&g);
		g.key.data = key;
		g.key.len = sizeof(key);
		g.n_states = 1;
		g.states = &sb;
		weft__partial__init(&pt);
		pt.query_id = id;
		pt.window = 0;
		pt.host = (char *)"evil";
		pt.n_groups = 1;
		pt.groups = gs;
		/* 11: groups that are not this query's keys and states */
		cl_raw_env(&evil, &e, WEFT__ENVELOPE__BODY_PARTIAL, &pt);
		cl_raw_send(&evil, &e);
		/* a refused partial is settled all the same: acknowledged */
		for (uint64_t upto = 0; upto != evil.seq;) {
			m = cl_raw_expect(&evil, WEFT__ENVELOPE__BODY_ACK, CL_WAIT_MS);
			assert_non_null(m);
			upto = m->ack->upto;
			assert_true(upto <= evil.seq);
			wire_free(m);
		}
		/* 12: a partial in the name of another host */
		pt.host = (char *)"a";
		pt.n_groups = 0;
		pt.groups = NULL;
		cl_raw_env(&evil, &e, WEFT__ENVELOPE__BODY_PARTIAL, &pt);
		cl_raw_send(&evil, &e);
	}
	cl_raw_close(&evil);

	/* still up; both refusals counted, nothing else */
	assert_true(cl_alive(agg));
	assert_true(CL_WAIT(cl_rejected(cl, NULL) == r0 + 12, 5000));

	/* a query submitted now works, and so does the one that ran through it all */
	snprintf(q, sizeof(q),
		 "from syscall:getppid where comm = '%s' select count() as n every 1s", comm);
	sub2 = cl_submit(cl, "submit2", NULL, q, &id2);
	expect_running(a, id2);
	cl_workload(cl, comm, NULL, after, 3);
	cl_cancel(cl, NULL, id);
	cl_cancel(cl, NULL, id2);
	cl_expect_end(sub);
	cl_expect_end(sub2);

	cl_res_load(&r, sub->out);
	assert_true(r.ended);
	assert_int_equal(cl_res_sum(&r, "n", "a", NULL), before + after);
	cl_res_rows_only(&r, (const char *const[]){ "a", NULL });
	for (size_t w = 0; w < r.nwin; w++)
		assert_false(cl_json_has_str(r.final[w], "hosts", "evil"));
	cl_res_free(&r);
	cl_res_load(&r, sub2->out);
	assert_true(r.ended);
	assert_int_equal(cl_res_sum(&r, "n", NULL, NULL), after);
	cl_res_free(&r);

	assert_true(cl_alive(agg));
	assert_int_equal(cl_rejected(cl, NULL), r0 + 12);
	cl->passed = true;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_merge, cl_test_setup, cl_test_teardown),
		cmocka_unit_test_setup_teardown(test_keys, cl_test_setup, cl_test_teardown),
		cmocka_unit_test_setup_teardown(test_hostile, cl_test_setup, cl_test_teardown),
	};

	if (!wr_ready())
		return WT_SKIP;
	return wt_status(cmocka_run_group_tests(tests, NULL, NULL));
}
