// SPDX-License-Identifier: Apache-2.0
/*
 * The aggregator under a flood of connections that never finish their handshake
 * (aggregator/aggd_guard.h), with real processes on loopback:
 *
 *   The aggregator runs with 1,024 file descriptors (prlimit --nofile=1024:1024, so that
 *   raising the soft limit cannot help and the guard must).  Three agents report a query.
 *   A thread of this test then floods the aggregator's port with plain TCP connections, in
 *   waves of FLOOD_WAVE, holding up to FLOOD_OPEN at once (well over the aggregator's
 *   descriptors): a third send nothing, a third half a ZMTP greeting (the 10-byte
 *   signature, then silence), a third garbage (an HTTP request).  While the flood goes on:
 *     - a workload makes a known number of calls, and the merged totals are exact;
 *     - `weft status` answers (before the guard, it could not get a descriptor: "no
 *       answer"), listing the three agents alive;
 *   and afterwards `rejected` grew by at least the flood connections the aggregator is
 *   known to have accepted (it sent them its greeting) and by at most the connections
 *   made, plus the few status clients that may have been cut in their own handshake.
 *   Then, with nothing else going on, K connections (idle, half a greeting, garbage), each
 *   accepted, are closed: `rejected` grows by K, and by at most one more per `weft status`
 *   the test ran to read it (two runs under load counted 3 and 16 more: a status client can
 *   be counted too, which is not understood yet; the roadmap has it).
 *
 * The flood is bounded in count (FLOOD_WAVES waves) and time (FLOOD_MAX_MS), and stays on
 * 127.0.0.1.  Needs root (agents load BPF) and FLOOD_OPEN + 256 descriptors for this test
 * process (it raises its soft limit to the hard one); skipped otherwise.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/cluster/cluster_util.h"

#define AGG_NOFILE 1024
#define FLOOD_WAVE 600 /* connections opened at once */
#define FLOOD_OPEN 3000 /* held at once, at most: the oldest wave is closed beyond */
#define FLOOD_WAVES 12 /* then the flood stops by itself */
#define FLOOD_MAX_MS 60000 /* ... or after this long */
#define EXACT_K 60

static const char greeting_half[10] = { (char)0xff, 0, 0, 0, 0, 0, 0, 0, 1, 0x7f };
static const char garbage[] = "GET / HTTP/1.0\r\n\r\n";

struct flood {
	int port;
	pthread_t thread;
	atomic_bool stop;
	atomic_long made; /* connects that completed */
	/* read after the join */
	long accepted; /* of those, greeted by the aggregator: it accepted them */
	int *fds;
	size_t nfds, head;
};

static int tcp_connect_nb(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	int s = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	if (s < 0)
		return -1;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(s, (struct sockaddr *)&a, sizeof(a)) != 0 && errno != EINPROGRESS) {
		close(s);
		return -1;
	}
	return s;
}

/* Whether the aggregator spoke on s (its greeting: it accepted the connection), or closed
 * it, which it can only do after accepting it. */
static bool greeted(int s)
{
	char buf[64];
	ssize_t n = recv(s, buf, sizeof(buf), MSG_DONTWAIT);

	return n >= 0;
}

/* Closes the oldest n held connections, noting which were accepted. */
static void flood_close(struct flood *f, size_t n)
{
	for (; n && f->head < f->nfds; n--, f->head++) {
		f->accepted += greeted(f->fds[f->head]);
		close(f->fds[f->head]);
	}
}

/* One wave: FLOOD_WAVE connects; those that complete within 2 s get their kind's bytes. */
static void flood_wave(struct flood *f, int wave)
{
	struct pollfd pf[FLOOD_WAVE];
	int n = 0;
	uint64_t end;

	for (int i = 0; i < FLOOD_WAVE; i++) {
		int s = tcp_connect_nb(f->port);

		if (s >= 0)
			pf[n++] = (struct pollfd){ .fd = s, .events = POLLOUT };
	}
	end = wr_now_ms() + 2000;
	for (int left = n; left > 0 && wr_now_ms() < end;) {
		if (poll(pf, (nfds_t)n, 100) <= 0)
			continue;
		for (int i = 0; i < n; i++) {
			int err = 0;
			socklen_t len = sizeof(err);

			if (pf[i].fd < 0 || !(pf[i].revents & (POLLOUT | POLLERR | POLLHUP)))
				continue;
			left--;
			if (getsockopt(pf[i].fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err) {
				close(pf[i].fd);
			} else {
				int kind = (wave + i) % 3;

				f->made++;
				if (kind == 1)
					(void)!send(pf[i].fd, greeting_half, sizeof(greeting_half),
						    MSG_NOSIGNAL);
				else if (kind == 2)
					(void)!send(pf[i].fd, garbage, sizeof(garbage) - 1,
						    MSG_NOSIGNAL);
				f->fds[f->nfds++] = pf[i].fd;
			}
			pf[i].fd = -1; /* poll ignores it from now on */
		}
	}
	for (int i = 0; i < n; i++)
		if (pf[i].fd >= 0)
			close(pf[i].fd); /* never completed: not the aggregator's */
}

static void *flood_run(void *arg)
{
	struct flood *f = arg;
	uint64_t end = wr_now_ms() + FLOOD_MAX_MS;

	for (int w = 0; w < FLOOD_WAVES && !atomic_load(&f->stop) && wr_now_ms() < end; w++) {
		if (f->nfds - f->head + FLOOD_WAVE > FLOOD_OPEN)
			flood_close(f, FLOOD_WAVE);
		flood_wave(f, w);
		wr_sleep_ms(300);
	}
	return NULL;
}

static int setup(void **state)
{
	struct cl *cl = calloc(1, sizeof(*cl));
	struct rlimit rl;

	if (!cl)
		return -1;
	*state = cl;
	if (!wr_ready())
		return 0;
	/* this process holds the flood: its soft limit up to the hard one, once the
	 * aggregator's own limit is set apart (prlimit) */
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_max < FLOOD_OPEN + FLOOD_WAVE + 256) {
		fprintf(stderr, "skipped: needs %d file descriptors (hard limit %llu)\n",
			FLOOD_OPEN + FLOOD_WAVE + 256, (unsigned long long)rl.rlim_max);
		return 0;
	}
	rl.rlim_cur = rl.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
		return 0;
	cl_init(cl);
	cl->agg_nofile = AGG_NOFILE;
	return 0;
}

/* A status that answers, with the three agents alive. */
static void expect_status(struct cl *cl, const char *const *hosts)
{
	struct wj *st = cl_status(cl, NULL);

	for (int i = 0; hosts[i]; i++) {
		const struct wj *ag = cl_status_agent(st, hosts[i]);

		if (!ag || !cl_json_true(ag, "alive"))
			fail_msg("agent %s is not listed alive during the flood", hosts[i]);
	}
	wj_free(st);
}

/* K connections, each accepted (greeted), of every kind, then closed: K more rejected, and
 * at most one more for each `weft status` this phase ran (the count is read through them;
 * like the flood phase's bound, a status client may be counted, as seen twice under load
 * and ASan: 63 and 76 for 60). */
static void exact_count(struct cl *cl)
{
	int fds[EXACT_K], statuses = 1;
	long long r0 = cl_rejected(cl, NULL), r;
	uint64_t end;

	for (int i = 0; i < EXACT_K; i++) {
		struct pollfd pf;

		fds[i] = tcp_connect_nb(cl->port);
		assert_true(fds[i] >= 0);
		pf = (struct pollfd){ .fd = fds[i], .events = POLLIN };
		/* the aggregator's greeting: it accepted this connection */
		if (poll(&pf, 1, CL_WAIT_MS) != 1)
			fail_msg("connection %d was not accepted", i);
		if (i % 3 == 1)
			assert_int_equal(
				send(fds[i], greeting_half, sizeof(greeting_half), MSG_NOSIGNAL),
				sizeof(greeting_half));
		else if (i % 3 == 2)
			assert_int_equal(send(fds[i], garbage, sizeof(garbage) - 1, MSG_NOSIGNAL),
					 sizeof(garbage) - 1);
	}
	for (int i = 0; i < EXACT_K; i++)
		close(fds[i]);
	end = wr_now_ms() + CL_WAIT_MS;
	for (;;) {
		r = cl_rejected(cl, NULL);
		statuses++;
		if (r - r0 >= EXACT_K || wr_now_ms() >= end)
			break;
		wr_sleep_ms(50);
	}
	if (r - r0 < EXACT_K || r - r0 > EXACT_K + statuses)
		fail_msg("%d connections closed without a message: rejected went from %lld to "
			 "%lld (%d status clients)",
			 EXACT_K, r0, r, statuses);
	if (r - r0 > EXACT_K)
		fprintf(stderr, "flood: %lld more rejected than the %d closed, %d status clients\n",
			r - r0 - EXACT_K, EXACT_K, statuses);
}

static void test_flood(void **state)
{
	static const char *const hosts[] = { "a", "b", "c", NULL };
	const unsigned long n1 = 12345, n2 = 23456;
	struct cl *cl = *state;
	struct cl_proc *agents[3], *sub;
	struct flood f = { 0 };
	char comm[32], q[256];
	long long r0, r1;
	int statuses = 0;
	struct cl_res r;
	uint64_t id;

	if (!cl->dir[0])
		skip();
	cl_keygen_agents(cl, hosts);
	cl_aggregator(cl, "agg", NULL, NULL, NULL);
	cl_agents(cl, hosts, NULL, agents);
	snprintf(comm, sizeof(comm), "%sf", cl->tag);
	cl_workload_make(cl, comm);
	snprintf(q, sizeof(q),
		 "from syscall:getppid where comm = '%s' group by host select count() as n "
		 "every 1s",
		 comm);
	sub = cl_submit(cl, "submit", NULL, q, &id);
	for (int i = 0; i < 3; i++) {
		char needle[64];

		snprintf(needle, sizeof(needle), "query %llu running", (unsigned long long)id);
		cl_expect_log(agents[i], needle, CL_WAIT_MS);
	}
	r0 = cl_rejected(cl, NULL);
	statuses++;

	/* the flood, and everything must go on through it */
	f.port = cl->port;
	f.fds = calloc(FLOOD_WAVES * FLOOD_WAVE, sizeof(*f.fds));
	assert_non_null(f.fds);
	assert_int_equal(pthread_create(&f.thread, NULL, flood_run, &f), 0);
	/* more connections made than the aggregator has descriptors: they are contested */
	if (!CL_WAIT(atomic_load(&f.made) > AGG_NOFILE + FLOOD_WAVE, CL_WAIT_MS))
		fail_msg("the flood made only %ld connections", atomic_load(&f.made));
	expect_status(cl, hosts);
	statuses++;
	cl_workload(cl, comm, NULL, n1, 2);
	expect_status(cl, hosts);
	statuses++;
	cl_workload(cl, comm, NULL, n2, 3);
	expect_status(cl, hosts);
	statuses++;
	atomic_store(&f.stop, true);
	pthread_join(f.thread, NULL);
	flood_close(&f, f.nfds - f.head);
	free(f.fds);
	fprintf(stderr, "flood: %ld connections made, %ld of them known accepted\n",
		atomic_load(&f.made), f.accepted);
	/* more than the aggregator had descriptors for, or nothing was tested */
	assert_true(f.made > AGG_NOFILE);

	/* every flood connection the aggregator accepted is counted, none twice */
	if (!CL_WAIT((r1 = cl_rejected(cl, NULL)) - r0 >= f.accepted, CL_WAIT_MS))
		fail_msg("rejected grew by %lld, but %ld flood connections were accepted", r1 - r0,
			 f.accepted);
	wr_sleep_ms(1000);
	r1 = cl_rejected(cl, NULL);
	if (r1 - r0 > f.made + statuses + 2)
		fail_msg("rejected grew by %lld for %ld flood connections", r1 - r0, f.made);

	cl_cancel(cl, NULL, id);
	cl_expect_end(sub);
	cl_res_load(&r, sub->out);
	assert_true(r.ended);
	for (int i = 0; hosts[i]; i++)
		assert_int_equal(cl_res_sum(&r, "n", hosts[i], NULL), n1 + n2);
	cl_res_rows_only(&r, hosts);
	cl_res_free(&r);

	exact_count(cl);
	cl->passed = true;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_flood, setup, cl_test_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
