// SPDX-License-Identifier: Apache-2.0
/*
 * End to end against real programs nobody here wrote, with the real `weft run`:
 *  - CPython (Debian's /usr/bin/python3.11): a script calls f() exactly N times; weft counts
 *    the USDT probes python:function__entry and python:line whose function name (arg1, a
 *    user string) is 'f': N each (f has one line).  Both probes are in the query because
 *    CPython 3.11 reaches function__entry only on the tracing path that python:line's
 *    semaphore turns on (docs/architecture.md).  The interpreter is named by its path in both
 *    the query and -c: a `python3` found through PATH may be another build (pyenv) without
 *    these probes.
 *  - redis-server, on a private loopback port: span(uprobe:redis-server:processCommand) with
 *    -p counts every command redis executes while weft is attached.  The test sends N INCR
 *    (pipelined) and then INFO commandstats over its own socket; redis's own per-command
 *    call counts, read before attaching and after the commands, must differ by exactly
 *    weft's count (N INCR + the first INFO, which redis counts only after it returns, and
 *    not the second, which weft sees and redis has not counted yet), and INCR's by N.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include "run_util.h"
#include "tests/skip.h"

#define PYTHON "/usr/bin/python3"
#define REDIS "/usr/bin/redis-server"
#define N_PY 3000
#define N_REDIS 10000
#define REDIS_BATCH 500

static const char py_script[] = "import sys\n"
				"def f(i):\n"
				"    return i\n"
				"for i in range(int(sys.argv[1])):\n"
				"    f(i)\n";

static char tmpdir[64];

static int setup(void **state)
{
	(void)state;
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/weft-e2e-XXXXXX");
	return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
	char path[128];

	(void)state;
	snprintf(path, sizeof(path), "%s/f.py", tmpdir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/dump.rdb", tmpdir);
	unlink(path);
	rmdir(tmpdir);
	return 0;
}

static bool executable(const char *path)
{
	return access(path, X_OK) == 0;
}

static void test_python_function_entry(void **state)
{
	char script[128], cmd[256], entry[64] = "", line[64] = "";
	const struct wj *w;
	struct wr_proc p;
	struct wr_json j;
	FILE *f;
	int rc;

	(void)state;
	if (!executable(PYTHON))
		wt_skip("test_python_function_entry: no %s", PYTHON);
	snprintf(script, sizeof(script), "%s/f.py", tmpdir);
	f = fopen(script, "w");
	assert_non_null(f);
	fputs(py_script, f);
	fclose(f);
	snprintf(cmd, sizeof(cmd), "%s %s %d", PYTHON, script, N_PY);
	rc = wr_weft_run(&p, "--format", "json", "-c", cmd,
			 "from usdt:" PYTHON ":python:function__entry, usdt:" PYTHON ":python:line "
			 "where str(arg1) = 'f' group by probe select count() as n");
	if (rc != 0)
		wr_dump(&p, "weft run");
	assert_int_equal(rc, 0);
	wr_json_lines(&p.out, &j);
	w = wr_one_window(&j);
	if (wr_nrows(w) == 0) {
		wr_dump(&p, "weft run");
		fail_msg("no python:function__entry or python:line event of f at all");
	}
	snprintf(entry, sizeof(entry), "usdt:%s:python:function__entry", PYTHON);
	snprintf(line, sizeof(line), "usdt:%s:python:line", PYTHON);
	assert_int_equal(wr_nrows(w), 2);
	for (size_t r = 0; r < 2; r++) {
		const char *probe = wj_str(wj_get(wr_row(w, r), "probe"));

		assert_non_null(probe);
		if (strcmp(probe, entry) != 0 && strcmp(probe, line) != 0)
			fail_msg("unexpected probe %s", probe);
		if (wj_int_of(wr_row(w, r), "n") != N_PY)
			fail_msg("%s: %lld calls of f, %d made", probe,
				 wj_int_of(wr_row(w, r), "n"), N_PY);
	}
	wr_json_free(&j);
	wr_free(&p);
}

/* ---------------------------------------------------------------------- redis */

static int free_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), port = -1;

	if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
	    getsockname(fd, (struct sockaddr *)&a, &len) == 0)
		port = ntohs(a.sin_port);
	if (fd >= 0)
		close(fd);
	return port;
}

static int redis_connect(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static void send_all(int fd, const char *s, size_t n)
{
	while (n) {
		ssize_t w = write(fd, s, n);

		assert_true(w > 0);
		s += w;
		n -= (size_t)w;
	}
}

/* Reads until `lines` CRLF-terminated lines have arrived in b (b is reset first). */
static void read_lines(int fd, struct wr_buf *b, size_t lines)
{
	size_t seen = 0, scanned = 0;
	char buf[65536];

	b->len = 0;
	wr_buf_add(b, "", 0);
	while (seen < lines) {
		ssize_t r = read(fd, buf, sizeof(buf));

		assert_true(r > 0);
		wr_buf_add(b, buf, (size_t)r);
		for (; scanned < b->len; scanned++)
			seen += b->p[scanned] == '\n';
	}
}

/* INFO commandstats as one bulk reply: "$LEN\r\n" then LEN bytes then "\r\n". */
static void redis_commandstats(int fd, long long *total, long long *incr)
{
	static const char req[] = "*2\r\n$4\r\nINFO\r\n$12\r\ncommandstats\r\n";
	struct wr_buf b = { 0 };
	char buf[65536];
	long long len;
	char *s, *body;

	send_all(fd, req, sizeof(req) - 1);
	read_lines(fd, &b, 1);
	assert_int_equal(b.p[0], '$');
	len = atoll(b.p + 1);
	body = strchr(b.p, '\n') + 1;
	while ((long long)(b.len - (size_t)(body - b.p)) < len + 2) {
		ssize_t r = read(fd, buf, sizeof(buf));
		size_t off = (size_t)(body - b.p);

		assert_true(r > 0);
		wr_buf_add(&b, buf, (size_t)r);
		body = b.p + off;
	}
	*total = *incr = 0;
	for (s = strstr(body, "cmdstat_"); s; s = strstr(s + 1, "cmdstat_")) {
		char *calls = strstr(s, ":calls=");

		assert_non_null(calls);
		*total += atoll(calls + 7);
		if (strncmp(s, "cmdstat_incr:", 13) == 0)
			*incr = atoll(calls + 7);
	}
	free(b.p);
}

static void test_redis_process_command(void **state)
{
	static const char incr[] = "*2\r\n$4\r\nINCR\r\n$1\r\nk\r\n";
	char port_s[16], pid_s[16], last[32], *batch;
	char *redis_argv[] = { (char *)REDIS,
			       (char *)"--port",
			       port_s,
			       (char *)"--bind",
			       (char *)"127.0.0.1",
			       (char *)"--save",
			       (char *)"",
			       (char *)"--appendonly",
			       (char *)"no",
			       (char *)"--dir",
			       tmpdir,
			       (char *)"--loglevel",
			       (char *)"warning",
			       NULL };
	long long total0, incr0, total1, incr1, n;
	struct wr_proc redis, p;
	struct wr_buf replies = { 0 };
	struct wr_json j;
	const struct wj *w;
	uint64_t end;
	int port, fd = -1, rc;

	(void)state;
	if (!executable(REDIS))
		wt_skip("test_redis_process_command: no %s", REDIS);
	port = free_port();
	assert_true(port > 0);
	snprintf(port_s, sizeof(port_s), "%d", port);
	assert_int_equal(wr_start(&redis, redis_argv), 0);
	for (end = wr_now_ms() + 15000; fd < 0 && wr_now_ms() < end;) {
		wr_pump(&redis, 50); /* keep its output flowing */
		fd = redis_connect(port);
	}
	if (fd < 0)
		wr_dump(&redis, "redis-server");
	assert_true(fd >= 0);

	redis_commandstats(fd, &total0, &incr0); /* before weft attaches */
	snprintf(pid_s, sizeof(pid_s), "%d", (int)redis.pid);
	assert_int_equal(wr_weft_start(&p, "--format", "json", "-p", pid_s,
				       "from span(uprobe:" REDIS ":processCommand) "
				       "select count() as n, min(duration) as dmin",
				       NULL),
			 0);
	rc = wr_wait_err(&p, "attached", WR_TIMEOUT_MS);
	if (rc)
		wr_dump(&p, "weft run");
	assert_int_equal(rc, 0);

	batch = malloc(REDIS_BATCH * (sizeof(incr) - 1));
	assert_non_null(batch);
	for (int i = 0; i < REDIS_BATCH; i++)
		memcpy(batch + (size_t)i * (sizeof(incr) - 1), incr, sizeof(incr) - 1);
	for (int sent = 0; sent < N_REDIS; sent += REDIS_BATCH) {
		send_all(fd, batch, REDIS_BATCH * (sizeof(incr) - 1));
		read_lines(fd, &replies, REDIS_BATCH);
	}
	free(batch);
	snprintf(last, sizeof(last), ":%d\r\n", N_REDIS); /* k counted up to N */
	assert_true(replies.len >= strlen(last));
	assert_string_equal(replies.p + replies.len - strlen(last), last);
	free(replies.p);
	redis_commandstats(fd, &total1, &incr1);
	close(fd);

	assert_int_equal(kill(p.pid, SIGINT), 0);
	rc = wr_finish(&p, WR_TIMEOUT_MS);
	if (rc)
		wr_dump(&p, "weft run");
	assert_int_equal(rc, 0);
	kill(redis.pid, SIGTERM);
	wr_finish(&redis, WR_TIMEOUT_MS);

	assert_int_equal(incr1 - incr0, N_REDIS);
	wr_json_lines(&p.out, &j);
	w = wr_one_window(&j);
	n = wj_int_of(wr_row(w, 0), "n");
	fprintf(stderr, "redis: %lld commands by its count, %lld by weft's\n", total1 - total0, n);
	assert_int_equal(n, total1 - total0);
	assert_true(wj_int_of(wr_row(w, 0), "dmin") > 0);
	wr_json_free(&j);
	wr_free(&p);
	wr_free(&redis);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_python_function_entry),
		cmocka_unit_test(test_redis_process_command),
	};

	if (!wr_ready())
		return WT_SKIP;
	return wt_status(cmocka_run_group_tests(tests, setup, teardown));
}
