// SPDX-License-Identifier: Apache-2.0
/*
 * Faults with real processes on loopback (docs/operations.md, "Faults: what happens when"):
 *
 *   agent restart       agent b is SIGKILLed while a query runs: windows close without it,
 *                       naming it missing; restarted (a new instance, same host name) it
 *                       rejoins and runs the query again, and every host's count over the
 *                       windows is exact: what b shipped before it died plus everything
 *                       after its restart
 *   aggregator restart  the aggregator is SIGKILLed and started again on the same store and
 *                       port; meanwhile a workload runs (the agents keep its partials); the
 *                       agents reconnect by themselves, the query resumes from the store, a
 *                       new client (`submit --attach ID`) and the original one (which
 *                       reconnects by itself) both get every window, and the sum over the
 *                       windows' answers is exactly the calls made before, during and after
 *                       the outage: nothing lost, nothing counted twice
 *   slow client         one follower is SIGSTOPped (it reads nothing) and a raw client
 *                       floods status requests without ever reading an answer; meanwhile
 *                       the good follower keeps receiving windows in order, with exact
 *                       counts, and the aggregator drops the answers the flooder cannot
 *                       take instead of waiting for it
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
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/cluster/cluster_util.h"
#include "tests/skip.h"

static void expect_running(struct cl_proc *agent, uint64_t id)
{
	char needle[64];

	snprintf(needle, sizeof(needle), "query %llu running", (unsigned long long)id);
	cl_expect_log(agent, needle, CL_WAIT_MS);
}

/* Waits until the follower's answers count `want` calls for each host. */
static void expect_sums(struct cl_proc *sub, const char *const *hosts, long long want)
{
	for (int i = 0; hosts[i]; i++)
		if (!CL_WAIT(cl_file_sum(sub->out, "n", hosts[i], NULL) == want, CL_WAIT_MS))
			fail_msg("%s: host %s counts %lld calls, not %lld", sub->name, hosts[i],
				 cl_file_sum(sub->out, "n", hosts[i], NULL), want);
}

static const char *query_text(const struct cl *cl, const char *comm)
{
	static char q[256];

	(void)cl;
	snprintf(q, sizeof(q),
		 "from syscall:getppid where comm = '%s' group by host select count() as n "
		 "every 1s",
		 comm);
	return q;
}

static void test_agent_restart(void **state)
{
	static const char *const hosts[] = { "a", "b", "c", NULL };
	const unsigned long n1 = 20000, n2 = 15000;
	struct cl *cl = *state;
	struct cl_proc *agg, *agents[3], *b2, *sub;
	char comm[32];
	size_t killed_at, back_at;
	struct cl_res r;
	uint64_t id;

	cl_keygen_agents(cl, hosts);
	agg = cl_aggregator(cl, "agg", NULL, NULL, NULL);
	cl_agents(cl, hosts, NULL, agents);
	snprintf(comm, sizeof(comm), "%sa", cl->tag);
	cl_workload_make(cl, comm);
	sub = cl_submit(cl, "submit", NULL, query_text(cl, comm), &id);
	for (int i = 0; i < 3; i++)
		expect_running(agents[i], id);

	/* b ships its count of the first run, then dies without a word */
	cl_workload(cl, comm, NULL, n1, 2);
	expect_sums(sub, hosts, n1);
	killed_at = cl_file_windows(sub->out);
	assert_int_equal(cl_stop(agents[1], SIGKILL, 5000), 128 + SIGKILL);
	/* windows go on without it, and say so */
	assert_true(CL_WAIT(cl_file_missing(sub->out, "b", killed_at), CL_WAIT_MS));
	assert_false(cl_agent_runs(cl, NULL, "b", id));

	/* restarted: a new instance under the same name, given the running query */
	b2 = cl_agent(cl, "b", "agent-b2", NULL, NULL, true);
	expect_running(b2, id);
	assert_true(CL_WAIT(cl_agent_runs(cl, NULL, "b", id), CL_WAIT_MS));
	assert_int_equal(cl_file_count(agg->err, "agent b (key b) joined"), 2);
	back_at = cl_file_windows(sub->out);
	cl_workload(cl, comm, NULL, n2, 3);
	cl_cancel(cl, NULL, id);
	cl_expect_end(sub);

	cl_res_load(&r, sub->out);
	assert_true(r.ended);
	for (int i = 0; hosts[i]; i++)
		assert_int_equal(cl_res_sum(&r, "n", hosts[i], NULL), n1 + n2);
	cl_res_rows_only(&r, hosts);
	/* b is back in the windows after its restart: those that began after it ran hold all
	 * three hosts (the last those that ran in it).  When back_at windows had been emitted,
	 * window back_at + 1 at the latest was open (a window closes 500 ms after its end). */
	assert_true(r.nwin > back_at);
	cl_res_assert_hosts(&r, back_at + 2 < r.nwin ? back_at + 2 : r.nwin - 1, hosts,
			    (struct cl_proc *const[]){ agents[0], b2, agents[2] }, id);
	assert_int_equal(r.late_dropped, 0);
	cl_res_free(&r);
	cl->passed = true;
}

/* K of the agent's second "connected to aggregator ...; N partials merged before, K to
 * send": the partials it kept while it had no aggregator. */
static long spooled_on_reconnect(struct cl_proc *agent)
{
	char *log = cl_slurp(agent->err), *s = strstr(log, "connected to aggregator");
	long k = -1;

	s = s ? strstr(s + 1, "connected to aggregator") : NULL;
	s = s ? strstr(s, "merged before, ") : NULL;
	if (s)
		k = strtol(s + strlen("merged before, "), NULL, 10);
	free(log);
	return k;
}

static void test_aggregator_restart(void **state)
{
	static const char *const hosts[] = { "a", "b", NULL };
	const unsigned long n1 = 11111, n2 = 22222, n3 = 33333;
	struct cl *cl = *state;
	struct cl_proc *agg, *agents[2], *sub, *att;
	char comm[32];
	struct cl_res r, r2;
	uint64_t id;

	cl_keygen_agents(cl, hosts);
	agg = cl_aggregator(cl, "agg", NULL, NULL, NULL);
	cl_agents(cl, hosts, NULL, agents);
	snprintf(comm, sizeof(comm), "%sr", cl->tag);
	cl_workload_make(cl, comm);
	sub = cl_submit(cl, "submit", NULL, query_text(cl, comm), &id);
	for (int i = 0; i < 2; i++)
		expect_running(agents[i], id);
	cl_workload(cl, comm, NULL, n1, 2);
	expect_sums(sub, hosts, n1);

	/* the aggregator dies; calls made while it is down are kept by the agents */
	assert_int_equal(cl_stop(agg, SIGKILL, 5000), 128 + SIGKILL);
	for (int i = 0; i < 2; i++)
		cl_expect_log(agents[i], "lost the aggregator", CL_WAIT_MS);
	cl_workload(cl, comm, NULL, n2, 3);
	/* longer than a window: at least one window ends while there is no aggregator, so
	 * the agents must keep its partial (checked below) */
	wr_sleep_ms(1500);

	/* the same store and port: the query resumes, the agents come back by themselves */
	agg = cl_aggregator(cl, "agg", NULL, "agg2", NULL);
	cl_expect_log(agg, "agent a (key a) joined", CL_WAIT_MS);
	cl_expect_log(agg, "agent b (key b) joined", CL_WAIT_MS);
	for (int i = 0; i < 2; i++) {
		cl_expect_log(agents[i], "the aggregator restarted", CL_WAIT_MS);
		assert_true(CL_WAIT(cl_agent_runs(cl, NULL, hosts[i], id), CL_WAIT_MS));
	}
	for (int i = 0; i < 2; i++)
		assert_true(spooled_on_reconnect(agents[i]) >= 1);
	att = cl_attach(cl, "attach", NULL, id);
	expect_sums(att, hosts, n1 + n2);
	cl_workload(cl, comm, NULL, n3, 2);
	cl_cancel(cl, NULL, id);
	cl_expect_end(att);
	cl_expect_end(sub);

	/* every window once in the sums: before, during and after the outage */
	cl_res_load(&r, att->out);
	cl_res_load(&r2, sub->out);
	assert_true(r.ended);
	assert_true(r2.ended);
	for (int i = 0; hosts[i]; i++) {
		assert_int_equal(cl_res_sum(&r, "n", hosts[i], NULL), n1 + n2 + n3);
		assert_int_equal(cl_res_sum(&r2, "n", hosts[i], NULL), n1 + n2 + n3);
	}
	cl_res_rows_only(&r, hosts);
	/* both followers saw the same windows with the same answers */
	assert_int_equal(r.nwin, r2.nwin);
	for (size_t w = 0; w < r.nwin; w++)
		for (int i = 0; hosts[i]; i++) {
			long long x = 0, y = 0;

			for (size_t k = 0; k < wr_nrows(r.final[w]); k++)
				if (!strcmp(wj_str(wj_get(wr_row(r.final[w], k), "host")),
					    hosts[i]))
					x += wj_int_of(wr_row(r.final[w], k), "n");
			for (size_t k = 0; k < wr_nrows(r2.final[w]); k++)
				if (!strcmp(wj_str(wj_get(wr_row(r2.final[w], k), "host")),
					    hosts[i]))
					y += wj_int_of(wr_row(r2.final[w], k), "n");
			assert_int_equal(x, y);
		}
	assert_int_equal(r.late_dropped, 0);
	cl_res_free(&r);
	cl_res_free(&r2);
	cl->passed = true;
}

/* Whether the aggregator logged (-vv) a merged partial of host for a window >= w. */
static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/*
 * After a restart, the aggregator knows every member of the query from its store and waits
 * for those not reconnected yet until its restart hold ends: each first close after the
 * restart (its -v log line) must account for every host, merged or named missing.
 */
static void check_complete_after_restart(struct cl_proc *agg, int nhosts)
{
	char *log = cl_slurp(agg->err), *s = log;
	int bad = 0;

	while ((s = strstr(s, " closed"))) {
		int hosts = 0, missing = 0;
		char *colon = strchr(s, ':');

		s++;
		if (!colon || sscanf(colon, ": %*d %*s %d %*s %d missing", &hosts, &missing) != 2)
			continue;
		if (hosts + missing != nhosts) {
			bad++;
			print_message("after the restart a window closed with %d hosts and "
				      "%d missing, of %d\n",
				      hosts, missing, nhosts);
		}
	}
	free(log);
	if (bad)
		fail_msg("%d windows closed incomplete after the restart", bad);
}

/* Whether a checkpoint was committed after the aggregator merged host's partial for a window
 * >= w (both -v log lines). */
static bool checkpointed_after(struct cl_proc *agg, const char *host, long long w)
{
	char *log = cl_slurp(agg->err), needle[64], *at = NULL;
	bool found;

	snprintf(needle, sizeof(needle), " groups of %s for window ", host);
	for (char *s = strstr(log, needle); s && !at; s = strstr(s + 1, needle))
		if (strtoll(s + strlen(needle), NULL, 10) >= w)
			at = s;
	found = at && strstr(at, "aggregator: checkpoint: ");
	free(log);
	return found;
}

/*
 * The aggregator dies while windows are open with partials merged into them: agent c is
 * stopped (alive, but silent for this query), so no window after it stopped can close
 * before the long lateness; a and b report the calls made meanwhile, and a checkpoint
 * writes the open windows holding them.  Restarted, the aggregator resumes those windows from
 * the store; when c resumes and the windows close, every host's count is exact (nothing
 * acknowledged lost, nothing merged twice) and every window accounts for all three hosts.
 */
static void test_aggregator_restart_open_windows(void **state)
{
	static const char *const hosts[] = { "a", "b", "c", NULL };
	const unsigned long n1 = 10101, n2 = 20202, n3 = 30303;
	/* a long lateness and slow heartbeats: the stopped agent keeps the windows open */
	char *const opts[] = {
		(char *)"--lateness", (char *)"20s", (char *)"--heartbeat",
		(char *)"5s",	      (char *)"-vv", NULL,
	};
	struct cl *cl = *state;
	struct cl_proc *agg, *agents[3], *sub;
	char comm[32], *text, *s;
	long long start0, w_n2;
	long members, resumed;
	struct cl_res r;
	uint64_t id;

	cl_keygen_agents(cl, hosts);
	agg = cl_aggregator(cl, "agg", NULL, NULL, opts);
	cl_agents(cl, hosts, NULL, agents);
	snprintf(comm, sizeof(comm), "%so", cl->tag);
	cl_workload_make(cl, comm);
	sub = cl_submit(cl, "submit", NULL, query_text(cl, comm), &id);
	for (int i = 0; i < 3; i++)
		expect_running(agents[i], id);
	cl_workload(cl, comm, NULL, n1, 2);
	expect_sums(sub, hosts, n1);
	cl_res_load(&r, sub->out);
	start0 = wj_int_of(r.final[0], "start_ns"); /* CLOCK_MONOTONIC, docs/output.md */
	cl_res_free(&r);

	/* c stops; the calls made now are in window w_n2 or before, which cannot close */
	assert_int_equal(kill(agents[2]->pid, SIGSTOP), 0);
	cl_workload(cl, comm, NULL, n2, 3);
	w_n2 = ((long long)mono_ns() - start0) / 1000000000ll;
	assert_true(
		CL_WAIT(checkpointed_after(agg, "a", w_n2) && checkpointed_after(agg, "b", w_n2),
			CL_WAIT_MS));
	assert_true(cl_file_sum(sub->out, "n", "a", NULL) == (long long)n1);
	assert_int_equal(cl_stop(agg, SIGKILL, 5000), 128 + SIGKILL);

	/* restarted: the open windows and the members are read back from the store */
	agg = cl_aggregator(cl, "agg", NULL, "agg2", opts);
	cl_expect_log(agg, "windows in progress", CL_WAIT_MS);
	text = cl_slurp(agg->err);
	s = strstr(text, "resumed query ");
	assert_non_null(s);
	assert_int_equal(sscanf(strchr(s, ':'), ": %ld members, %ld windows", &members, &resumed),
			 2);
	free(text);
	print_message("aggregator restart: %ld members, %ld open windows resumed\n", members,
		      resumed);
	assert_int_equal(members, 3);
	assert_true(resumed >= 1);
	assert_int_equal(kill(agents[2]->pid, SIGCONT), 0);
	for (int i = 0; i < 3; i++)
		cl_expect_log(agents[i], "the aggregator restarted", CL_WAIT_MS);
	expect_sums(sub, hosts, n1 + n2);
	check_complete_after_restart(agg, 3);
	cl_workload(cl, comm, NULL, n3, 2);
	cl_cancel(cl, NULL, id);
	cl_expect_end(sub);

	cl_res_load(&r, sub->out);
	assert_true(r.ended);
	for (int i = 0; hosts[i]; i++)
		assert_int_equal(cl_res_sum(&r, "n", hosts[i], NULL), n1 + n2 + n3);
	cl_res_rows_only(&r, hosts);
	assert_int_equal(r.late_dropped, 0);
	cl_res_free(&r);
	cl->passed = true;
}

/* Sends n status requests without reading anything; returns how many went out. */
static size_t flood(struct cl_raw *raw, size_t n)
{
	Weft__StatusRequest sr;
	Weft__Envelope e;
	uint64_t end = wr_now_ms() + 10000;
	size_t sent = 0;

	weft__status_request__init(&sr);
	while (sent < n && wr_now_ms() < end) {
		size_t len;
		void *buf;
		int rc;

		cl_raw_env(raw, &e, WEFT__ENVELOPE__BODY_STATUS_REQUEST, &sr);
		buf = cl_raw_pack(&e, &len);
		rc = cl_raw_bytes(raw, buf, len, ZMQ_DONTWAIT);
		free(buf);
		if (rc == 0) {
			sent++;
		} else {
			raw->seq--; /* not sent: the next one takes its number */
			assert_int_equal(rc, -EAGAIN);
			wr_sleep_ms(1);
		}
	}
	return sent;
}

static void test_slow_client(void **state)
{
	static const char *const hosts[] = { "a", "b", NULL };
	const unsigned long n1 = 5000, n2 = 6000;
	const size_t requests = 30000;
	struct cl *cl = *state;
	struct cl_proc *agg, *agents[2], *good, *slow;
	char comm[32];
	size_t at_stop, sent, answers = 0;
	struct cl_raw raw;
	struct cl_res r;
	uint64_t id;
	Weft__Envelope *m;

	cl_keygen_agents(cl, hosts);
	cl_keygen(cl, "client", "flood", true);
	agg = cl_aggregator(cl, "agg", NULL, NULL, NULL);
	cl_agents(cl, hosts, NULL, agents);
	snprintf(comm, sizeof(comm), "%ss", cl->tag);
	cl_workload_make(cl, comm);
	good = cl_submit(cl, "good", NULL, query_text(cl, comm), &id);
	slow = cl_attach(cl, "slow", NULL, id);
	for (int i = 0; i < 2; i++)
		expect_running(agents[i], id);
	cl_workload(cl, comm, NULL, n1, 2);
	expect_sums(good, hosts, n1);
	expect_sums(slow, hosts, n1);

	/* the slow one stops reading; a raw client asks and asks and never reads */
	assert_int_equal(kill(slow->pid, SIGSTOP), 0);
	cl_raw_open(&raw, cl, cl->endpoint, "flood");
	cl_raw_hello(&raw, "client", "");
	at_stop = cl_file_windows(good->out);
	sent = flood(&raw, requests);
	assert_int_equal(sent, requests);

	/* the good follower goes on: new windows, in order, and the calls made now */
	cl_workload(cl, comm, NULL, n2, 2);
	expect_sums(good, hosts, n1 + n2);
	assert_true(CL_WAIT(cl_file_windows(good->out) >= at_stop + 5, CL_WAIT_MS));
	assert_true(cl_alive(agg));
	assert_true(cl_agent_runs(cl, NULL, "a", id)); /* and it answers others at once */

	/* the flooder gets what its queues held; the rest was dropped, not waited for */
	while ((m = cl_raw_recv(&raw, 2000))) {
		answers++;
		wire_free(m);
	}
	cl_raw_close(&raw);
	print_message("flood: %zu requests sent, %zu answers received\n", sent, answers);
	assert_true(answers > 0);
	assert_true(answers < requests);

	/* the slow one resumes and gets every window, in order, late but exact */
	assert_int_equal(kill(slow->pid, SIGCONT), 0);
	cl_cancel(cl, NULL, id);
	cl_expect_end(good);
	cl_expect_end(slow);
	cl_res_load(&r, good->out);
	assert_true(r.ended);
	for (int i = 0; hosts[i]; i++)
		assert_int_equal(cl_res_sum(&r, "n", hosts[i], NULL), n1 + n2);
	assert_int_equal(r.results_dropped, 0);
	cl_res_free(&r);
	cl_res_load(&r, slow->out);
	assert_true(r.ended);
	for (int i = 0; hosts[i]; i++)
		assert_int_equal(cl_res_sum(&r, "n", hosts[i], NULL), n1 + n2);
	cl_res_free(&r);
	cl->passed = true;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_agent_restart, cl_test_setup,
						cl_test_teardown),
		cmocka_unit_test_setup_teardown(test_aggregator_restart, cl_test_setup,
						cl_test_teardown),
		cmocka_unit_test_setup_teardown(test_aggregator_restart_open_windows, cl_test_setup,
						cl_test_teardown),
		cmocka_unit_test_setup_teardown(test_slow_client, cl_test_setup, cl_test_teardown),
	};

	if (!wr_ready())
		return WT_SKIP;
	return wt_status(cmocka_run_group_tests(tests, NULL, NULL));
}
