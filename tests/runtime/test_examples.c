// SPDX-License-Identifier: Apache-2.0
/*
 * Every example of docs/language.md ("Examples") runs as written on this machine, with real
 * paths and pids substituted where the examples name ones that do not exist here (pid 4242,
 * PostgreSQL).  Each runs under the real `weft run` until Ctrl-C (SIGINT a moment after weft
 * attached or, for the profile, once the profiled process has been on a CPU for 1 s), must
 * exit 0, print its result columns, and, where the example's events certainly happen,
 * results.  (Exact counts are the business of test_run_*.c; this test is about "as
 * written".)
 */
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>
#include <sys/stat.h>
#include "tests/skip.h"

struct out {
	char buf[1 << 16];
	size_t len;
	int status;
};

#define HANG_MS 120000 /* no weft run here comes near it: it only catches a hang */

static long ms_since(const struct timespec *t0)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (t.tv_sec - t0->tv_sec) * 1000 + (t.tv_nsec - t0->tv_nsec) / 1000000;
}

/*
 * Runs weft with argv and collects its stdout and stderr (bounded).  Once it has attached
 * ("weft: attached"), sends it SIGINT when until(ctx) holds, or, without until, run_ms after
 * it attached: how long weft takes to start (clang, a loaded machine, a sanitizer) does not
 * shorten the run.  A weft still running after HANG_MS is killed, and its status says so.
 */
static void run_weft_until(const char *const *args, int run_ms, bool (*until)(void *ctx), void *ctx,
			   struct out *o)
{
	const char *weft = getenv("WEFT_BIN");
	char *argv[16];
	int fds[2], n = 0;
	pid_t pid;
	struct timespec t0, attached;
	bool sent = false, is_attached = false;

	assert_non_null(weft);
	argv[n++] = (char *)weft;
	for (int i = 0; args[i] && n < 15; i++)
		argv[n++] = (char *)args[i];
	argv[n] = NULL;
	assert_int_equal(pipe(fds), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(fds[1], 1);
		dup2(fds[1], 2);
		close(fds[0]);
		execv(weft, argv);
		_exit(127);
	}
	close(fds[1]);
	fcntl(fds[0], F_SETFL, O_NONBLOCK);
	o->len = 0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		struct pollfd p = { .fd = fds[0], .events = POLLIN };

		poll(&p, 1, 50);
		for (;;) {
			ssize_t r = read(fds[0], o->buf + o->len, sizeof(o->buf) - 1 - o->len);

			if (r <= 0)
				break;
			o->len += r;
		}
		o->buf[o->len] = 0;
		if (!is_attached && strstr(o->buf, "weft: attached")) {
			is_attached = true;
			clock_gettime(CLOCK_MONOTONIC, &attached);
		}
		if (is_attached && !sent && (until ? until(ctx) : ms_since(&attached) >= run_ms)) {
			kill(pid, SIGINT);
			sent = true;
		}
		if (ms_since(&t0) > HANG_MS) {
			kill(pid, SIGKILL);
			waitpid(pid, &o->status, 0);
			break;
		}
		if (waitpid(pid, &o->status, WNOHANG) == pid) {
			ssize_t r;

			while ((r = read(fds[0], o->buf + o->len, sizeof(o->buf) - 1 - o->len)) > 0)
				o->len += r;
			break;
		}
	}
	o->buf[o->len] = 0;
	close(fds[0]);
}

static void run_weft(const char *const *args, int run_ms, struct out *o)
{
	run_weft_until(args, run_ms, NULL, NULL, o);
}

static void expect(const struct out *o, const char *what)
{
	if (!strstr(o->buf, what))
		fail_msg("expected '%s' in the output:\n%s", what, o->buf);
}

static void expect_ok(const struct out *o)
{
	if (!WIFEXITED(o->status) || WEXITSTATUS(o->status) != 0)
		fail_msg("weft did not exit 0 (status 0x%x):\n%s", o->status, o->buf);
	expect(o, "weft: attached");
}

/* Burns CPU until killed: the frame the profile must find (not inlined at any -O). */
__attribute__((noinline, used)) void busy_child_loop(void);
__attribute__((noinline, used)) void busy_child_loop(void)
{
	volatile unsigned long x = 0;

	for (;;) {
		for (int i = 0; i < 100000; i++)
			x += i;
		(void)x;
		getppid();
	}
}

static pid_t busy_child(void)
{
	pid_t pid = fork();

	if (pid == 0)
		busy_child_loop();
	return pid;
}

static void test_top_syscalls(void **state)
{
	static struct out o;
	/* a query that starts with a comment starts with "--": end the options first */
	const char *args[] = { "run", "--",
			       "-- system calls by process, top 10 every second\n"
			       "from tracepoint:raw_syscalls:sys_enter\n"
			       "group by comm select count() as calls\n"
			       "order by calls desc limit 10 every 1s",
			       NULL };

	const char *s;
	int shown, lines = 0;
	long long prev = LLONG_MAX;

	run_weft(args, 2500, &o);
	expect_ok(&o);
	expect(&o, "calls");
	/* weft itself makes system calls, so window 0 has rows: at most 10, the most calls
	 * first (which processes they are depends on what else runs on the machine) */
	s = strstr(o.buf, "window 0 at ");
	assert_non_null(s);
	s = strstr(s, "): ");
	assert_non_null(s);
	assert_int_equal(sscanf(s, "): %d", &shown), 1);
	assert_in_range(shown, 1, 10);
	s = strchr(s, '\n');
	assert_non_null(s);
	s = strchr(s + 1, '\n'); /* the column names */
	for (; s && lines < shown; lines++) {
		const char *eol = strchr(s + 1, '\n'), *num;
		long long v;

		assert_non_null(eol);
		for (num = eol; num > s + 1 && num[-1] != ' '; num--)
			;
		assert_int_equal(sscanf(num, "%lld", &v), 1);
		assert_true(v > 0 && v <= prev);
		prev = v;
		s = eol;
	}
	assert_int_equal(lines, shown);
}

static void test_read_bytes(void **state)
{
	static struct out o;
	const char *args[] = {
		"run", "from syscall:read group by comm select sum(args.count) as bytes for 10s",
		NULL
	};

	run_weft(args, 1500, &o);
	expect_ok(&o);
	expect(&o, "bytes");
}

static void test_read_latency(void **state)
{
	static struct out o;
	const char *args[] = {
		"run",
		"from span(syscall:read) where comm = 'postgres'\n"
		"select count(), p50(duration), p99(duration), hist(duration) every 5s",
		NULL
	};

	run_weft(args, 1500, &o);
	expect_ok(&o);
	expect(&o, "p99(duration)");
}

static void test_redis_function(void **state)
{
	static struct out o;
	char query[512], port[16], cmd[128];
	pid_t redis;
	int tries = 0;

	if (access("/usr/bin/redis-server", X_OK) != 0)
		wt_skip("test_redis_function: no /usr/bin/redis-server");
	snprintf(port, sizeof(port), "%d", 17000 + getpid() % 1000);
	redis = fork();
	if (redis == 0) {
		int null = open("/dev/null", O_WRONLY);

		dup2(null, 1);
		dup2(null, 2);
		execl("/usr/bin/redis-server", "redis-server", "--port", port, "--bind",
		      "127.0.0.1", "--save", "", "--appendonly", "no", NULL);
		_exit(127);
	}
	snprintf(cmd, sizeof(cmd), "redis-cli -p %s ping >/dev/null 2>&1", port);
	while (system(cmd) != 0 && tries++ < 50)
		usleep(100000);
	/* the example's pid 4242 is this redis-server's */
	snprintf(query, sizeof(query),
		 "from span(uprobe:/usr/bin/redis-server:processCommand) where pid = %d\n"
		 "select count(), avg(duration), p99(duration) every 1s",
		 (int)redis);
	{
		const char *args[] = { "run", query, NULL };
		pid_t load = fork();

		if (load == 0) {
			char c[160];

			usleep(700000);
			snprintf(c, sizeof(c),
				 "redis-benchmark -p %s -q -n 2000 -t ping >/dev/null 2>&1", port);
			_exit(system(c) == 0 ? 0 : 1);
		}
		run_weft(args, 2500, &o);
		waitpid(load, NULL, 0);
	}
	kill(redis, SIGTERM);
	waitpid(redis, NULL, 0);
	expect_ok(&o);
	expect(&o, "avg(duration)");
}

static void test_usdt_span(void **state)
{
	static struct out o;
	/* The example pairs PostgreSQL's query__start/query__done; python3's USDT probes stand in
	 * for them where PostgreSQL is not installed. */
	const char *pg = "/usr/lib/postgresql/15/bin/postgres";
	char query[512];
	const char *args[] = { "run", query, NULL };

	if (access(pg, X_OK) == 0)
		snprintf(query, sizeof(query),
			 "from span(usdt:%s:postgresql:query__start,\n"
			 "          usdt:%s:postgresql:query__done)\n"
			 "select p50(duration), p99(duration) every 10s",
			 pg, pg);
	else
		snprintf(query, sizeof(query),
			 "from span(usdt:/usr/bin/python3:python:function__entry,\n"
			 "          usdt:/usr/bin/python3:python:function__return)\n"
			 "select p50(duration), p99(duration) every 10s");
	run_weft(args, 1500, &o);
	expect_ok(&o);
	expect(&o, "p50(duration)");
}

static void test_opensnoop(void **state)
{
	static struct out o;
	const char *args[] = { "run", "-c", "cat /etc/hostname",
			       "from syscall:openat select time, pid, comm, str(args.filename)",
			       NULL };

	run_weft(args, 5000, &o); /* ends by itself when cat exits */
	expect_ok(&o);
	expect(&o, "str(args.filename)");
	expect(&o, "/etc/hostname");
}

struct cpu_time {
	clockid_t clock; /* a process's CPU-time clock */
	bool started;
	struct timespec from;
};

/* Whether the process has been on a CPU for 1 s since the first call (99 profile samples'
 * worth), or is gone. */
static bool ran_one_second(void *ctx)
{
	struct cpu_time *c = ctx;
	struct timespec ts;

	if (clock_gettime(c->clock, &ts) != 0)
		return true;
	if (!c->started) {
		c->started = true;
		c->from = ts;
	}
	return (ts.tv_sec - c->from.tv_sec) * 1000000000ll + (ts.tv_nsec - c->from.tv_nsec) >=
	       1000000000ll;
}

static void test_profile(void **state)
{
	static struct out o;
	pid_t busy = busy_child();
	char query[256];
	const char *args[] = { "run", query, NULL };
	struct cpu_time cpu = { 0 };

	assert_int_equal(clock_getcpuclockid(busy, &cpu.clock), 0);
	snprintf(query, sizeof(query),
		 "from profile:99hz where pid = %d group by ustack select count() as samples\n"
		 "order by samples desc limit 20 for 30s",
		 (int)busy);
	/* ended once the child has been on a CPU for 1 s since weft attached (CPU time, so a
	 * loaded machine does not starve it of samples) */
	run_weft_until(args, 0, ran_one_second, &cpu, &o);
	kill(busy, SIGKILL);
	waitpid(busy, NULL, 0);
	expect_ok(&o);
	expect(&o, "samples");
	expect(&o, "busy_child_loop"); /* the child's frames are symbolized */
}

static void test_host(void **state)
{
	static struct out o;
	const char *args[] = { "run",
			       "from syscall:write group by host select sum(args.count) every 10s",
			       NULL };
	char host[256] = "";

	gethostname(host, sizeof(host) - 1);
	run_weft(args, 1500, &o);
	expect_ok(&o);
	expect(&o, host);
}

static void test_kprobe_refused(void **state)
{
	static struct out o;
	const char *args[] = { "run", "from kprobe:do_sys_openat2 select count()", NULL };
	struct stat st;

	if (stat("/sys/bus/event_source/devices/kprobe", &st) == 0)
		wt_skip("test_kprobe_refused: this kernel has kprobes");
	run_weft(args, 5000, &o);
	assert_true(WIFEXITED(o.status));
	assert_int_equal(WEXITSTATUS(o.status), 3);
	expect(&o, "E_PROBE_FEATURE");
	expect(&o, "syscall:openat"); /* names what to use instead */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_top_syscalls),   cmocka_unit_test(test_read_bytes),
		cmocka_unit_test(test_read_latency),   cmocka_unit_test(test_redis_function),
		cmocka_unit_test(test_usdt_span),      cmocka_unit_test(test_opensnoop),
		cmocka_unit_test(test_profile),	       cmocka_unit_test(test_host),
		cmocka_unit_test(test_kprobe_refused),
	};

	if (!wt_root("weft run loads BPF programs"))
		return WT_SKIP;
	if (!getenv("WEFT_BIN")) {
		fprintf(stderr, "skipped: run through ctest (needs WEFT_BIN)\n");
		return WT_SKIP;
	}
	return wt_status(cmocka_run_group_tests(tests, NULL, NULL));
}
