// SPDX-License-Identifier: Apache-2.0
/*
 * End to end, kernel edges (`from kernel:sockets ... graph`, docs/graphs.md, "Kernel edges"):
 * unmodified programs, real processes, two network namespaces joined by a veth pair.
 *
 * redis-server runs in namespace S (10.231.P.1, P from this test's pid), redis-benchmark in
 * namespace C (10.231.P.2) with `-c 1 -n N -t set -P 1`: one connection, N SET commands,
 * one at a time.  Before its test, redis-benchmark (7.x) fetches the server's settings on a
 * connection of its own: it writes `CONFIG GET save` and `CONFIG GET appendonly` in one
 * write and reads both replies (redis-benchmark.c, getRedisConfig()).  `weft run` of
 *   from kernel:sockets, span(uprobe:REDIS:processCommand)
 *   where pid = REDIS_PID or comm = 'redis-benchmark' graph
 * must then store, among the traces whose client task is this redis-benchmark's, exactly:
 *   - N traces of a SET: a client task (redis-benchmark, "request 10.231.P.1:6379", the
 *     root), a message edge from it to a server task (redis-server, "serve :6379") and one
 *     processCommand task, the server task's child on its thread (with a parent edge);
 *   - 1 trace of the settings: the same, with two processCommand children;
 * and no other trace may hold a task of this redis-server (all of its work is accounted).
 * Then the same over IPv6 (test_redis_ipv6): the veth ends also have fd00:231:P::1 and ::2
 * (added with nodad: no duplicate address detection to wait for), redis-server binds the
 * first, and the same N + 1 traces must be stored, the client task named
 * "request [fd00:231:P::1]:6379" (RFC 5952 text) and the tasks' kernel.sends and kernel.recv
 * carrying the IPv6 addresses as text.
 * They must be stored while weft still runs, with redis-server stopped (SIGSTOP) after the
 * benchmark so that no record comes (the last exchanges complete by the clock), and the store
 * must hold exactly the same after the end.
 * Other processes called redis-benchmark on the machine (other tests) may add traces of
 * their own: they are told apart by pid and ignored.
 *
 * Needs root, ip(8), redis-server and redis-benchmark, and the sock tracepoints; skipped
 * otherwise.  The namespaces are removed at exit.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <jansson.h>
#include "graph/kmsg.h"
#include "graph/store.h"
#include "run_util.h"
#include "tests/kedges_expect.h"
#include "tests/netns_util.h"
#include "tests/skip.h"

#define N_SET 200

static char ns_s[64], ns_c[64], addr_s[32], addr_c[32], dir[64];
static char addr6_s[48], addr6_c[48];
/* the server address of the test running: what the client task names, the attributes' form */
static const char *want_addr = addr_s;
static bool want_v6;
static pid_t redis_pid; /* killed at exit if a failure left it running */

static void clean(void)
{
	if (redis_pid > 0)
		kill(redis_pid, SIGKILL);
	nu_netns_del(ns_s); /* and with them the veth */
	nu_netns_del(ns_c);
	if (dir[0] && wr_rm_rf(dir) != 0)
		fprintf(stderr, "cannot remove %s\n", dir);
}

static int group_setup(void **state)
{
	int p = (int)getpid();
	char va[16], vb[16];
	struct nu_end s = { .ns = ns_s, .dev = va, .ip = addr_s, .ip6 = addr6_s };
	struct nu_end c = { .ns = ns_c, .dev = vb, .ip = addr_c, .ip6 = addr6_c };

	(void)state;
	snprintf(ns_s, sizeof(ns_s), "weft-ke-%d-s", p);
	snprintf(ns_c, sizeof(ns_c), "weft-ke-%d-c", p);
	snprintf(va, sizeof(va), "wke%da", p % 10000000);
	snprintf(vb, sizeof(vb), "wke%db", p % 10000000);
	snprintf(addr_s, sizeof(addr_s), "10.231.%d.1", p % 250);
	snprintf(addr_c, sizeof(addr_c), "10.231.%d.2", p % 250);
	/* never a 0 group: "fd00:231:0::1" is not RFC 5952 text (that is "fd00:231::1"), which
	 * the names weft writes are and the checks compare with */
	snprintf(addr6_s, sizeof(addr6_s), "fd00:231:%d::1", p % 250 + 1);
	snprintf(addr6_c, sizeof(addr6_c), "fd00:231:%d::2", p % 250 + 1);
	snprintf(dir, sizeof(dir), "/tmp/weft-test-kedges-XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	atexit(clean);
	nu_netns_sweep(); /* of earlier runs that were killed */
	if (nu_netns_add(ns_s) || nu_netns_add(ns_c) || nu_veth(&s, &c, 24))
		return -1;
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	clean();
	return 0;
}

/* One [laddr, lport, raddr, rport, seq_end, len] of a kernel task's attributes: IPv4
 * addresses numbers, IPv6 ones RFC 5952 text (want_v6), the server's want_addr. */
static struct kmsg_io kio_of(json_t *a, bool server)
{
	struct kmsg_io io = { 0 };
	uint8_t a6[2][16];

	assert_true(json_is_array(a) && json_array_size(a) == 6);
	for (size_t i = 0; i < 6; i++)
		if (want_v6 && (i == 0 || i == 2))
			assert_true(json_is_string(json_array_get(a, i)));
		else
			assert_true(json_is_integer(json_array_get(a, i)));
	if (want_v6) {
		const char *la = json_string_value(json_array_get(a, 0));
		const char *ra = json_string_value(json_array_get(a, 2));

		assert_string_equal(server ? la : ra, addr6_s);
		assert_string_equal(server ? ra : la, addr6_c);
		assert_true(kmsg_addr6_parse(la, a6[0]) && kmsg_addr6_parse(ra, a6[1]));
		kmsg_io_set6(&io, a6[0], a6[1]);
		assert_true(io.v6);
	} else {
		io.laddr = (uint32_t)json_integer_value(json_array_get(a, 0));
		io.raddr = (uint32_t)json_integer_value(json_array_get(a, 2));
	}
	io.lport = (uint16_t)json_integer_value(json_array_get(a, 1));
	io.rport = (uint16_t)json_integer_value(json_array_get(a, 3));
	io.seq_end = (uint32_t)json_integer_value(json_array_get(a, 4));
	io.len = (uint32_t)json_integer_value(json_array_get(a, 5));
	return io;
}

/* What the tasks ship for a match on another host (docs/graphs.md, "Across hosts"): the
 * server task's first receive matches exactly one of the client task's sends by the rule of
 * graph/kmsg.c, the 4-tuples being the real ones (the server's port 6379). */
static void check_kattrs(const struct graph_task *cl, const struct graph_task *sv)
{
	json_t *ca = json_loads(cl->attrs, 0, NULL), *sa = json_loads(sv->attrs, 0, NULL);
	json_t *sends = json_object_get(ca, "kernel.sends");
	struct kmsg_io recv, snd[8];
	struct kmsg_match *m = NULL;
	size_t ns, nm = 0;

	assert_true(json_is_array(sends));
	ns = json_array_size(sends);
	assert_true(ns >= 1 && ns <= 8);
	for (size_t i = 0; i < ns; i++) {
		snd[i] = kio_of(json_array_get(sends, i), false);
		assert_int_equal(snd[i].rport, 6379);
	}
	recv = kio_of(json_object_get(sa, "kernel.recv"), true);
	assert_int_equal(recv.lport, 6379);
	assert_int_equal(kmsg_match(snd, ns, &recv, 1, &m, &nm), 0);
	assert_int_equal(nm, 1);
	free(m);
	json_decref(ca);
	json_decref(sa);
}

/* What this test checks of a trace's client and server tasks beyond their shape
 * (ke_redis_trace()): the server task within the client task (one clock, a millisecond of
 * slack) and the addresses they ship (check_kattrs()). */
static void check_pair(const struct graph_task *cl, const struct graph_task *sv)
{
	assert_true(sv->start >= cl->start - 1000000 && sv->end <= cl->end + 1000000);
	check_kattrs(cl, sv);
}

/* redis-server bound to `bind` in S, redis-benchmark against it from C, under weft run. */
static void run_redis(const char *bind)
{
	char store[PATH_MAX], query[256], num[32];
	char *bargv[] = { (char *)"ip", (char *)"netns",      (char *)"exec",
			  ns_c,		(char *)NU_BENCH_BIN, (char *)"-h",
			  (char *)bind, (char *)"-p",	      (char *)"6379",
			  (char *)"-c", (char *)"1",	      (char *)"-n",
			  num,		(char *)"-t",	      (char *)"set",
			  (char *)"-P", (char *)"1",	      (char *)"-q",
			  NULL };
	struct wr_proc redis, weft, bench;
	struct ke_redis x = { .check_pair = check_pair };
	long by_npc[3] = { 0 };

	snprintf(store, sizeof(store), "%s/kedges-%s.db", dir, want_v6 ? "6" : "4");
	snprintf(num, sizeof(num), "%d", N_SET);
	/* up when it answers (before weft attaches: these pings are not traced) */
	if (nu_redis_start(&redis, ns_s, ns_c, bind) != 0)
		fail_msg("redis-server did not come up");
	redis_pid = redis.pid;
	snprintf(query, sizeof(query),
		 "from kernel:sockets, span(uprobe:%s:processCommand) "
		 "where pid = %d or comm = 'redis-benchmark' graph",
		 NU_REDIS_BIN, (int)redis.pid);
	assert_int_equal(wr_weft_start(&weft, "--format", "json", "-S", store, query, (char *)NULL),
			 0);
	if (wr_wait_err(&weft, "attached", WR_TIMEOUT_MS) != 0) {
		wr_finish(&weft, 1000);
		wr_dump(&weft, "weft run");
		fail_msg("weft did not attach");
	}
	assert_int_equal(wr_start(&bench, bargv), 0);
	wr_close_stdin(&bench);
	{
		uint64_t end = wr_now_ms() + WR_TIMEOUT_MS;

		while (wr_pump(&bench, 20) && wr_now_ms() < end)
			wr_pump(&weft, 0);
		if (wr_reap(&bench, end) != 0 || bench.status != 0) {
			wr_dump(&bench, "redis-benchmark");
			fail_msg("redis-benchmark failed");
		}
	}
	/*
	 * While weft still runs and the traced processes are idle (redis-benchmark gone,
	 * redis-server stopped: no record passes the filter any more): every request is stored
	 * within a few seconds, as the last exchanges complete by the clock (their last op a
	 * second old, then the next drain), not only when the query ends.
	 */
	x.bench = (long)bench.pid;
	x.redis = (long)redis.pid;
	snprintf(x.request, sizeof(x.request), want_v6 ? "request [%s]:6379" : "request %s:6379",
		 want_addr);
	assert_int_equal(kill(redis.pid, SIGSTOP), 0);
	{
		uint64_t t0 = wr_now_ms(), end = t0 + 15000; /* a drain a second: ~2 s */

		for (;;) {
			wr_pump(&weft, 200);
			ke_redis_count(store, &x, by_npc);
			if ((by_npc[1] == N_SET && by_npc[2] == 1) || wr_now_ms() >= end)
				break;
		}
		printf("# while weft ran: %ld SET traces, %ld settings traces after %llu ms\n",
		       by_npc[1], by_npc[2], (unsigned long long)(wr_now_ms() - t0));
		assert_int_equal(by_npc[1], N_SET);
		assert_int_equal(by_npc[2], 1);
	}
	assert_int_equal(kill(redis.pid, SIGCONT), 0);
	kill(weft.pid, SIGINT);
	if (wr_finish(&weft, WR_TIMEOUT_MS) != 0) {
		wr_dump(&weft, "weft run");
		fail_msg("weft run failed");
	}
	nu_redis_stop(&redis);
	redis_pid = 0;

	/* and after it ended, still exactly those: nothing stored twice, nothing late */
	ke_redis_count(store, &x, by_npc);
	assert_int_equal(by_npc[1], N_SET); /* the SETs */
	assert_int_equal(by_npc[2], 1); /* CONFIG GET save, CONFIG GET appendonly */
	wr_free(&weft);
	wr_free(&bench);
	wr_free(&redis);
}

static void test_redis_local(void **state)
{
	(void)state;
	want_addr = addr_s;
	want_v6 = false;
	run_redis(addr_s);
}

static void test_redis_ipv6(void **state)
{
	(void)state;
	want_addr = addr6_s;
	want_v6 = true;
	run_redis(addr6_s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_redis_local),
		cmocka_unit_test(test_redis_ipv6),
	};

	if (!wr_ready() || !nu_redis_ready() || !ke_sock_ready())
		return WT_SKIP;
	return wt_status(cmocka_run_group_tests(tests, group_setup, group_teardown));
}
