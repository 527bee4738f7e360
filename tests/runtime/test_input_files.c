// SPDX-License-Identifier: Apache-2.0
/*
 * Hostile and accidental input files, end to end with the real `weft` (base/file.h):
 *
 *   allow-list, keys  `weft aggregator --allow /dev/zero` (or a FIFO, or --key /dev/zero)
 *                     exits 1 at once, saying the file is not a regular one; before, it read
 *                     /dev/zero without bound and a FIFO without end, deaf to SIGTERM.  The
 *                     aggregator runs under a 2 GiB address-space limit here so that a
 *                     regression fails the test instead of eating the machine's memory.
 *                     `weft status --server-key FIFO` is refused the same way
 *   binary            a FIFO or a device named as the binary of a uprobe is refused with
 *                     [E_PROBE_BINARY] (`weft explain` used to hang opening the FIFO), and so
 *                     is a FIFO given to -f
 *   compile cache     a cached object truncated, then one with a byte flipped, is noticed
 *                     (its SHA-256 does not match), rebuilt, and the query counts exactly
 *                     the calls of the workload; the entry is whole again afterwards
 *   libbpf's words    an object libbpf refuses (a truncated ELF) is reported in libbpf's
 *                     words, never as "Unknown error 4001"
 *   agent's side      a USDT query compiled against a real binary whose path is then a FIFO
 *                     fails at the attachment, naming the file, instead of hanging in
 *                     libbpf's open of it
 *
 * Every command runs under a bounded wait: a hang is a failure, never a stuck test.  Needs
 * root (weft run loads BPF); skipped otherwise.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <dirent.h>
#include <ftw.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <bpf/libbpf.h>
#include "agent/agent.h"
#include "agent/wire.h"
#include "compiler/compiler.h"
#include "run_util.h"

#define STEP_MS 20000 /* none of these commands comes near it unless it hangs */
#define N_CALLS 30000

static char dir[] = "/tmp/weft-input-XXXXXX";

static const char *in_dir(const char *name)
{
	static char p[8][PATH_MAX];
	static int next;
	char *s = p[next++ % 8];

	snprintf(s, PATH_MAX, "%s/%s", dir, name);
	return s;
}

/* Runs argv (weft's own path first) to its end within STEP_MS; its status. */
static int run(struct wr_proc *p, char *const argv[])
{
	int rc = wr_start(p, argv);

	return rc ? rc : wr_finish(p, STEP_MS);
}

static void expect(struct wr_proc *p, int rc, int status, const char *want, const char *what)
{
	bool has = strstr(p->err.p, want);

	if (rc != status || !has)
		wr_dump(p, what);
	wr_free(p);
	if (rc != status || !has)
		fail_msg("%s: status %d (%d expected), stderr %s '%s'", what, rc, status,
			 has ? "has" : "lacks", want);
}

static void keypair(const char *name)
{
	char pub[WIRE_KEY_LEN + 1], sec[WIRE_KEY_LEN + 1];

	assert_int_equal(wire_keypair_new(pub, sec), 0);
	assert_int_equal(wire_keyfile_write(in_dir(name), pub, sec), 0);
}

/*
 * `weft aggregator --key KEY --allow ALLOW` under a 2 GiB address-space limit (not in a
 * sanitizer build: ASan reserves terabytes of address space for its shadow, and its own
 * allocator bounds what a regression could take).
 */
static int aggregator(struct wr_proc *p, const char *key, const char *allow)
{
#if defined(__SANITIZE_ADDRESS__)
	const int skip = 3;
#else
	const int skip = 0;
#endif
	char *argv[] = { (char *)"prlimit",
			 (char *)"--as=2147483648",
			 (char *)"--",
			 getenv("WEFT_BIN"),
			 (char *)"aggregator",
			 (char *)"--listen",
			 (char *)"tcp://127.0.0.1:1",
			 (char *)"--key",
			 (char *)key,
			 (char *)"--allow",
			 (char *)allow,
			 (char *)"--store",
			 (char *)in_dir("agg.sqlite"),
			 NULL };

	return run(p, argv + skip);
}

static void test_allowlist_and_keys(void **state)
{
	struct wr_proc p;
	char msg[PATH_MAX + 64];
	int rc;

	(void)state;
	if (!wr_ready())
		skip();
	keypair("agg.key");

	rc = aggregator(&p, in_dir("agg.key"), "/dev/zero");
	expect(&p, rc, 1, "--allow /dev/zero: not a regular file", "--allow /dev/zero");
	rc = aggregator(&p, in_dir("agg.key"), in_dir("fifo"));
	snprintf(msg, sizeof(msg), "--allow %s: not a regular file", in_dir("fifo"));
	expect(&p, rc, 1, msg, "--allow FIFO");
	rc = aggregator(&p, in_dir("agg.key"), dir);
	snprintf(msg, sizeof(msg), "--allow %s: a directory", dir);
	expect(&p, rc, 1, msg, "--allow DIR");
	rc = aggregator(&p, "/dev/zero", in_dir("fifo"));
	expect(&p, rc, 1, "--key /dev/zero: not a regular file", "--key /dev/zero");

	/* a client's keys: refused before any connection is tried */
	rc = run(&p, (char *const[]){ getenv("WEFT_BIN"), (char *)"status", (char *)"--to",
				      (char *)"tcp://127.0.0.1:1", (char *)"--server-key",
				      (char *)in_dir("fifo"), (char *)"--key",
				      (char *)in_dir("agg.key"), NULL });
	snprintf(msg, sizeof(msg), "--server-key %s: not a regular file", in_dir("fifo"));
	expect(&p, rc, 1, msg, "weft status --server-key FIFO");
}

static int explain(struct wr_proc *p, const char *a1, const char *a2)
{
	char *argv[] = { getenv("WEFT_BIN"), (char *)"explain", (char *)a1, (char *)a2, NULL };

	return run(p, argv);
}

static void test_binary_fifo(void **state)
{
	struct wr_proc p;
	char q[PATH_MAX + 64];
	int rc;

	(void)state;
	if (!wr_ready())
		skip();
	snprintf(q, sizeof(q), "from uprobe:%s:foo select count()", in_dir("fifo"));
	rc = explain(&p, q, NULL);
	if (rc != 3 || !strstr(p.err.p, "[E_PROBE_BINARY]") ||
	    !strstr(p.err.p, "not a regular file")) {
		wr_dump(&p, "weft explain on a FIFO");
		fail_msg("a FIFO as a uprobe's binary: status %d%s", rc,
			 p.timed_out ? " (it hung)" : "");
	}
	wr_free(&p);
	rc = explain(&p, "from uprobe:/dev/zero:foo select count()", NULL);
	if (rc != 3 || !strstr(p.err.p, "[E_PROBE_BINARY]") ||
	    !strstr(p.err.p, "not a regular file")) {
		wr_dump(&p, "weft explain on /dev/zero");
		fail_msg("/dev/zero as a uprobe's binary: status %d", rc);
	}
	wr_free(&p);
	rc = explain(&p, "-f", in_dir("fifo"));
	snprintf(q, sizeof(q), "-f %s: a FIFO, not a regular file", in_dir("fifo"));
	expect(&p, rc, 2, q, "weft explain -f FIFO");
}

/* The one entry of the cache directory (there must be exactly one). */
static void cache_entry(char *path, size_t sz)
{
	DIR *d = opendir(in_dir("cache"));
	struct dirent *de;
	int n = 0;

	assert_non_null(d);
	while ((de = readdir(d)))
		if (strlen(de->d_name) > 2 &&
		    strcmp(de->d_name + strlen(de->d_name) - 2, ".o") == 0) {
			snprintf(path, sz, "%s/%s", in_dir("cache"), de->d_name);
			n++;
		}
	closedir(d);
	assert_int_equal(n, 1);
}

static off_t file_size(const char *path)
{
	struct stat st;

	assert_int_equal(stat(path, &st), 0);
	return st.st_size;
}

/* weft run of the counting query on the workload: exactly N_CALLS; whether it warned that the
 * cache entry was damaged must be `warned`. */
static void run_counted(bool warned)
{
	char cmd[PATH_MAX + 64];
	struct wr_proc p;
	struct wr_json j;
	int rc;

	snprintf(cmd, sizeof(cmd), "'%s' %d 2", wr_workload("wl_syscalls"), N_CALLS);
	rc = wr_weft_run(&p, "--format", "json", "-c", cmd,
			 "from syscall:getppid select count() as n every 100ms");
	if (rc != 0) {
		wr_dump(&p, "weft run");
		fail_msg("weft run: status %d", rc);
	}
	wr_json_lines(&p.out, &j);
	wr_check_windows(&j);
	assert_int_equal(wr_sum_col(&j, "n", NULL, 0), N_CALLS);
	wr_json_free(&j);
	if (warned != (strstr(p.err.p, "compile cache") && strstr(p.err.p, "SHA-256"))) {
		wr_dump(&p, "weft run");
		fail_msg("the damaged cache entry was %s", warned ? "not noticed" : "reported");
	}
	wr_free(&p);
}

static void test_cache_corrupt(void **state)
{
	char entry[PATH_MAX];
	off_t whole;
	FILE *f;
	int c;

	(void)state;
	if (!wr_ready())
		skip();
	assert_int_equal(mkdir(in_dir("cache"), 0700), 0);
	assert_int_equal(setenv("WEFT_CACHE_DIR", in_dir("cache"), 1), 0);
	run_counted(false); /* compiles, fills the cache */
	cache_entry(entry, sizeof(entry));
	whole = file_size(entry);

	/* truncated: libbpf would refuse it forever ("Unknown error 4001") */
	assert_int_equal(truncate(entry, whole / 2), 0);
	run_counted(true);
	cache_entry(entry, sizeof(entry));
	assert_int_equal(file_size(entry), whole); /* rebuilt */

	/* one byte flipped in the middle of the object */
	f = fopen(entry, "r+");
	assert_non_null(f);
	assert_int_equal(fseek(f, whole / 2, SEEK_SET), 0);
	c = fgetc(f);
	assert_true(c != EOF);
	assert_int_equal(fseek(f, whole / 2, SEEK_SET), 0);
	assert_true(fputc(c ^ 0x10, f) != EOF);
	assert_int_equal(fclose(f), 0);
	run_counted(true);
	run_counted(false); /* whole again: a plain hit */
	unsetenv("WEFT_CACHE_DIR");
}

static void test_libbpf_error_words(void **state)
{
	const char *query = "from syscall:getppid select count()";
	struct compile_opts o = { .sz = sizeof(o), .cache_dir = in_dir("cache2") };
	struct agent_query_opts ao = { .sz = sizeof(ao) };
	struct compile_result res;
	struct agent_query *q = NULL;
	struct agent_err err;
	struct diag_list dl;
	char words[128];
	int rc;

	(void)state;
	if (!wr_ready())
		skip();
	diag_list_init(&dl, query, "query");
	assert_int_equal(compiler_run(query, &o, PASS_CLANG, &dl, &res), 0);
	/* the ELF header and the first sections, but not the rest: libbpf refuses it */
	rc = agent_query_start(res.plan, res.object, res.object_sz / 2, &ao, &q, &err);
	assert_null(q);
	if (rc > -__LIBBPF_ERRNO__START || rc <= -__LIBBPF_ERRNO__END)
		fail_msg("not one of libbpf's own errors (%d: %s): this test proves nothing", rc,
			 err.msg);
	libbpf_strerror(-rc, words, sizeof(words));
	if (strstr(err.msg, "Unknown error") || !strstr(err.msg, words))
		fail_msg("libbpf's error %d reads '%s', not '%s'", -rc, err.msg, words);
	compile_result_free(&res);
	diag_list_free(&dl);
}

/* The test's directory, with a FIFO that nobody ever writes to. */
/*
 * The agent's side: a query compiled against a real binary (a copy of wl_usdt), whose file is
 * then replaced by a FIFO before the query starts (an agent host where the path is not what
 * the submitter's was).  Starting it must fail at the attachment, naming the file, not wait
 * forever in libbpf's open of the FIFO: it runs in a child that SIGALRM ends if it hangs.
 */
static void test_attach_binary_swapped(void **state)
{
	struct compile_opts o = { .sz = sizeof(o), .cache_dir = in_dir("cache2") };
	struct agent_query_opts ao = { .sz = sizeof(ao) };
	struct compile_result res;
	struct diag_list dl;
	char q[PATH_MAX + 64], buf[4096] = "", *bin = (char *)in_dir("wl_usdt_copy");
	int fds[2], ws;
	size_t off = 0;
	ssize_t n;
	pid_t pid;

	(void)state;
	if (!wr_ready())
		skip();
	{
		char cmd[2 * PATH_MAX + 16];

		snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", wr_workload("wl_usdt"), bin);
		assert_int_equal(system(cmd), 0);
	}
	snprintf(q, sizeof(q), "from usdt:%s:weft_test:tick select count()", bin);
	diag_list_init(&dl, q, "query");
	if (compiler_run(q, &o, PASS_CLANG, &dl, &res) != 0) {
		diag_print(&dl, stderr, false);
		fail_msg("the USDT query does not compile");
	}
	assert_int_equal(unlink(bin), 0);
	assert_int_equal(mkfifo(bin, 0600), 0);
	assert_int_equal(pipe(fds), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct agent_query *aq = NULL;
		struct agent_err err;
		int rc;

		close(fds[0]);
		alarm(20);
		rc = agent_query_start(res.plan, res.object, res.object_sz, &ao, &aq, &err);
		dprintf(fds[1], "%d %d %s", rc, err.attach, err.msg);
		_exit(0);
	}
	close(fds[1]);
	while ((n = read(fds[0], buf + off, sizeof(buf) - 1 - off)) > 0)
		off += (size_t)n;
	buf[off] = 0;
	close(fds[0]);
	assert_int_equal(waitpid(pid, &ws, 0), pid);
	if (!WIFEXITED(ws))
		fail_msg("starting the query hung on the FIFO (killed by signal %d)",
			 WIFSIGNALED(ws) ? WTERMSIG(ws) : 0);
	if (buf[0] != '-' || strncmp(strchr(buf, ' ') ? strchr(buf, ' ') : "", " 1 ", 3) != 0 ||
	    !strstr(buf, bin) || !strstr(buf, "not a regular file"))
		fail_msg("the attachment was not refused as expected: '%s'", buf);
	compile_result_free(&res);
	diag_list_free(&dl);
}

static int setup(void **state)
{
	(void)state;
	if (!mkdtemp(dir))
		return -1;
	return mkfifo(in_dir("fifo"), 0600);
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static int teardown(void **state)
{
	(void)state;
	nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_allowlist_and_keys),
		cmocka_unit_test(test_binary_fifo),
		cmocka_unit_test(test_cache_corrupt),
		cmocka_unit_test(test_libbpf_error_words),
		cmocka_unit_test(test_attach_binary_swapped),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
