// SPDX-License-Identifier: Apache-2.0
/*
 * End to end, how `weft run` ends, against the real kernel:
 *  - SIGKILL leaves no probe behind.  While weft runs, `bpftool -j perf list` shows its perf
 *    events (by weft's pid) and their programs, `bpftool -j prog show` those programs (named
 *    wp*) and their maps, `bpftool -j link show` their links; after a SIGKILL, within a few
 *    seconds (the kernel frees them after an RCU grace period), none of those programs, maps,
 *    links or perf events exists any more.  For a uprobe query, tracefs's uprobe_events
 *    never holds an entry for the probed binary (weft uses the uprobe PMU, whose events die
 *    with their file descriptors; named tracefs events would outlive it).  The checks run on
 *    the ids seen while weft was alive, so other tracers on the machine do not matter, and
 *    the "before" half shows the checks can fail.
 *  - SIGINT (Ctrl-C) prints the final window and exits 0: its count is exactly the workload's
 *    N calls, made and finished before the signal.
 *  - `-p PID` exits 0 by itself after PID exits, with the final window (exact count).
 *  - Closed output: when the reader of weft's stdout pipe goes away, weft exits by itself with
 *    WEFT_EXIT_PIPE (141) and leaves nothing behind (the same bpftool checks), both while
 *    stream rows flow and when a window query has written nothing yet.
 *  - The -c command: gone after weft's SIGKILL (PR_SET_PDEATHSIG); after weft's SIGTERM, a
 *    command that ignores SIGTERM and its own child are gone and weft exits 0 with its
 *    final window.  The commands write their pids to a file; "gone" is no such process or a
 *    zombie.
 * Deadlines only catch hangs; nothing here asserts elapsed time.
 *  - windows longer than the once-a-second flip are numbered 0, 1, 2, ... (exact count).
 *  - weft's heap in huge pages: for a graph query it re-starts itself with
 *    glibc.malloc.hugetlb=1 where THP is "madvise" (not for an aggregation), and the -c
 *    command gets the user's environment back exactly.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "run_util.h"
#include "tests/slurp.h"
#include "tests/skip.h"
#include "tools/weft.h"

#define N_CALLS 100000
#define MAX_IDS 64
#define GONE_TIMEOUT_MS 10000

struct ids {
	long long v[MAX_IDS];
	size_t n;
};

static void ids_add(struct ids *s, long long id)
{
	for (size_t i = 0; i < s->n; i++)
		if (s->v[i] == id)
			return;
	assert_true(s->n < MAX_IDS);
	s->v[s->n++] = id;
}

static bool ids_has(const struct ids *s, long long id)
{
	for (size_t i = 0; i < s->n; i++)
		if (s->v[i] == id)
			return true;
	return false;
}

static struct wj *bpftool(const char *a, const char *b)
{
	char *argv[] = { (char *)"bpftool", (char *)"-j", (char *)a, (char *)b, NULL };
	struct wj *v = wr_json_of(argv);

	if (!v || v->kind != WJ_ARR)
		fail_msg("bpftool -j %s %s gave no JSON array", a, b);
	return v;
}

/* What of weft's is in the kernel: ids of its perf events' programs, their maps, links. */
struct held {
	struct ids progs, maps, links;
	size_t perf_events; /* perf events (fds) of the pid */
	bool uprobe_seen; /* a uprobe perf event on `binary` */
};

static void held_of(pid_t pid, const struct ids *progs_of_interest, const char *binary,
		    struct held *h)
{
	struct wj *perf = bpftool("perf", "list"), *progs = bpftool("prog", "show"),
		  *links = bpftool("link", "show");

	memset(h, 0, sizeof(*h));
	for (size_t i = 0; i < perf->nkids; i++) {
		const struct wj *e = &perf->kids[i];
		const char *type = wj_str(wj_get(e, "fd_type")), *file;

		if (wj_int_of(e, "pid") != pid)
			continue;
		h->perf_events++;
		ids_add(&h->progs, wj_int_of(e, "prog_id"));
		file = wj_str(wj_get(e, "filename"));
		if (binary && type && strcmp(type, "uprobe") == 0 && file &&
		    strcmp(file, binary) == 0)
			h->uprobe_seen = true;
	}
	if (!progs_of_interest)
		progs_of_interest = &h->progs;
	for (size_t i = 0; i < progs->nkids; i++) {
		const struct wj *p = &progs->kids[i], *maps = wj_get(p, "map_ids");

		if (!ids_has(progs_of_interest, wj_int_of(p, "id")))
			continue;
		if (progs_of_interest == &h->progs) {
			const char *name = wj_str(wj_get(p, "name"));

			if (!name || strncmp(name, "wp", 2) != 0)
				fail_msg("program %lld of weft is named %s", wj_int_of(p, "id"),
					 name ? name : "(none)");
		} else {
			ids_add(&h->progs, wj_int_of(p, "id"));
		}
		for (size_t k = 0; maps && k < maps->nkids; k++)
			ids_add(&h->maps, maps->kids[k].ival);
	}
	for (size_t i = 0; i < links->nkids; i++)
		if (ids_has(progs_of_interest, wj_int_of(&links->kids[i], "prog_id")))
			ids_add(&h->links, wj_int_of(&links->kids[i], "id"));
	wj_free(perf);
	wj_free(progs);
	wj_free(links);
}

static size_t maps_alive(const struct ids *maps)
{
	struct wj *all = bpftool("map", "show");
	size_t n = 0;

	for (size_t i = 0; i < all->nkids; i++)
		n += ids_has(maps, wj_int_of(&all->kids[i], "id"));
	wj_free(all);
	return n;
}

/* The lines of uprobe_events naming `binary` (tracefs may be mounted in either place). */
static int uprobe_events_naming(const char *binary)
{
	const char *paths[] = { "/sys/kernel/tracing/uprobe_events",
				"/sys/kernel/debug/tracing/uprobe_events" };
	char line[4096];
	int n = 0;

	for (size_t i = 0; i < 2; i++) {
		FILE *f = fopen(paths[i], "r");

		if (!f)
			continue;
		while (fgets(line, sizeof(line), f))
			n += strstr(line, binary) != NULL || strstr(line, "weft") != NULL;
		fclose(f);
		return n;
	}
	fail_msg("no uprobe_events in tracefs");
	return -1;
}

/* What weft (pid) holds while it runs; the checks of held_gone() can fail on it. */
static void held_alive(pid_t pid, const char *binary, struct held *alive)
{
	held_of(pid, NULL, binary, alive);
	assert_true(alive->perf_events > 0);
	assert_true(alive->progs.n > 0);
	assert_true(alive->maps.n > 0);
	assert_true(alive->links.n > 0);
	assert_int_equal(maps_alive(&alive->maps), alive->maps.n);
	if (binary) {
		assert_true(alive->uprobe_seen);
		assert_int_equal(uprobe_events_naming(binary), 0);
	}
}

/* After weft (pid) is gone: none of what it held remains, within GONE_TIMEOUT_MS. */
static void held_gone(pid_t pid, const char *binary, const struct held *alive)
{
	uint64_t end = wr_now_ms() + GONE_TIMEOUT_MS;
	struct held after;

	for (;;) {
		size_t maps;

		held_of(pid, &alive->progs, binary, &after);
		maps = maps_alive(&alive->maps);
		if (!after.perf_events && !after.progs.n && !after.links.n && !maps)
			break;
		if (wr_now_ms() >= end)
			fail_msg("after weft ended: %zu perf events, %zu programs, %zu links, "
				 "%zu maps of weft remain",
				 after.perf_events, after.progs.n, after.links.n, maps);
		wr_sleep_ms(100);
	}
	if (binary)
		assert_int_equal(uprobe_events_naming(binary), 0);
}

static void kill_and_check_gone(const char *query, const char *binary)
{
	struct held alive;
	struct wr_proc p;
	int rc;

	assert_int_equal(wr_weft_start(&p, query, NULL), 0);
	rc = wr_wait_err(&p, "attached", WR_TIMEOUT_MS);
	if (rc)
		wr_dump(&p, query);
	assert_int_equal(rc, 0);

	/* alive: the checks below see what weft holds (so they can fail) */
	held_alive(p.pid, binary, &alive);

	assert_int_equal(kill(p.pid, SIGKILL), 0);
	assert_int_equal(wr_finish(&p, WR_TIMEOUT_MS), 128 + SIGKILL);
	held_gone(p.pid, binary, &alive);
	wr_free(&p);
}

static void test_sigkill_tracepoint_leaves_nothing(void **state)
{
	(void)state;
	kill_and_check_gone("from syscall:getppid select count()", NULL);
}

static void test_sigkill_uprobe_leaves_nothing(void **state)
{
	char query[PATH_MAX + 64];
	const char *bin;

	(void)state;
	bin = wr_workload("wl_usdt");
	snprintf(query, sizeof(query), "from span(uprobe:%s:wl_work) select count()", bin);
	kill_and_check_gone(query, bin);
}

/* wl_syscalls N 2, started paused; its pid as text in pid[]. */
static void workload_start(struct wr_proc *wl, char pid[32])
{
	char n[32];
	char *argv[] = { (char *)wr_workload("wl_syscalls"), n, (char *)"2", (char *)"wait", NULL };

	snprintf(n, sizeof(n), "%d", N_CALLS);
	assert_int_equal(wr_workload_start(wl, argv), 0);
	snprintf(pid, 32, "%d", (int)wl->pid);
}

/* Releases the workload once weft says it is attached, and waits until it is done. */
static void workload_run(struct wr_proc *wl, struct wr_proc *weft)
{
	int rc = wr_wait_err(weft, "attached", WR_TIMEOUT_MS);

	if (rc)
		wr_dump(weft, "weft run");
	assert_int_equal(rc, 0);
	assert_int_equal(write(wl->in_fd, "g", 1), 1);
	assert_int_equal(wr_finish(wl, WR_TIMEOUT_MS), 0);
}

static void assert_final_count(struct wr_proc *p, int status, long long n)
{
	const struct wj *w;
	struct wr_json j;

	if (status != 0)
		wr_dump(p, "weft run");
	assert_int_equal(status, 0);
	wr_json_lines(&p->out, &j);
	w = wr_one_window(&j);
	assert_int_equal(wr_nrows(w), 1);
	assert_int_equal(wj_int_of(wr_row(w, 0), "n"), n);
	wr_json_free(&j);
}

static void test_sigint_prints_final_window(void **state)
{
	char pid[32], query[128];
	struct wr_proc wl, p;

	(void)state;
	workload_start(&wl, pid);
	/* no -p: only Ctrl-C ends this query */
	snprintf(query, sizeof(query), "from syscall:getppid where pid = %s select count() as n",
		 pid);
	assert_int_equal(wr_weft_start(&p, "--format", "json", query, NULL), 0);
	workload_run(&wl, &p);
	assert_int_equal(p.out.len, 0); /* nothing before the end */
	assert_int_equal(kill(p.pid, SIGINT), 0);
	assert_final_count(&p, wr_finish(&p, WR_TIMEOUT_MS), N_CALLS);
	wr_free(&p);
	wr_free(&wl);
}

/* How many window lines weft has printed so far. */
static size_t windows_printed(const struct wr_proc *p)
{
	size_t n = 0;

	for (const char *s = p->out.p; s && (s = strstr(s, "\"type\":\"window\"")); s++)
		n++;
	return n;
}

/*
 * Windows longer than the once-a-second flip are numbered 0, 1, 2, ... (they were numbered
 * by flips: 0, 2, 4, ... with `every 1500ms`), and their counts add up to the workload's N.
 */
static void test_windows_longer_than_a_flip(void **state)
{
	char pid[32], query[160];
	struct wr_proc wl, p;
	struct wr_json j;
	uint64_t end;
	size_t n;

	(void)state;
	if (!wr_ready())
		skip();
	workload_start(&wl, pid);
	snprintf(query, sizeof(query),
		 "from syscall:getppid where pid = %s select count() as n every 1500ms", pid);
	assert_int_equal(wr_weft_start(&p, "--format", "json", query, NULL), 0);
	workload_run(&wl, &p);
	/* two windows closed by the schedule, then Ctrl-C for the last one */
	end = wr_now_ms() + WR_TIMEOUT_MS;
	while (windows_printed(&p) < 2 && wr_now_ms() < end && p.out_fd >= 0)
		wr_pump(&p, 100);
	assert_int_equal(kill(p.pid, SIGINT), 0);
	assert_int_equal(wr_finish(&p, WR_TIMEOUT_MS), 0);
	wr_json_lines(&p.out, &j);
	n = wr_check_windows(&j); /* indices 0, 1, 2, ... */
	if (n < 3)
		fail_msg("%zu windows: two closed by `every`, one by Ctrl-C expected", n);
	assert_int_equal(wr_sum_col(&j, "n", NULL, 0), N_CALLS);
	wr_json_free(&j);
	wr_free(&p);
	wr_free(&wl);
}

static void test_pid_exit_ends_run(void **state)
{
	char pid[32];
	struct wr_proc wl, p;

	(void)state;
	workload_start(&wl, pid);
	assert_int_equal(wr_weft_start(&p, "--format", "json", "-p", pid,
				       "from syscall:getppid select count() as n", NULL),
			 0);
	workload_run(&wl, &p);
	/* no signal: weft must notice the exit and end (the deadline only guards a hang) */
	assert_final_count(&p, wr_finish(&p, 15000), N_CALLS);
	assert_false(p.timed_out);
	wr_free(&p);
	wr_free(&wl);
}

/* ------------------------------------------------------------------ closed output */

/*
 * weft with its stdout a pipe whose reader goes away (`weft run ... | head -1`): weft must
 * detach and exit with WEFT_EXIT_PIPE (141) by itself, leaving nothing in the kernel.  The
 * deadline only catches a weft that keeps tracing.
 */
static void close_output_and_check(struct wr_proc *p, const char *query)
{
	struct held alive;
	int rc;

	held_alive(p->pid, NULL, &alive);
	close(p->out_fd); /* the reader is gone */
	p->out_fd = -1;
	rc = wr_finish(p, 20000);
	if (rc != WEFT_EXIT_PIPE || p->timed_out)
		wr_dump(p, query);
	assert_false(p->timed_out);
	assert_int_equal(rc, WEFT_EXIT_PIPE);
	held_gone(p->pid, NULL, &alive);
}

/* A stream whose rows flow when the reader leaves, after reading some of them. */
static void test_closed_output_stream(void **state)
{
	const char *query = "from syscall:getppid select tid";
	char n[32], pid[32];
	char *argv[] = { (char *)wr_workload("wl_syscalls"), n, (char *)"1", NULL };
	struct wr_proc wl, p;
	int rc;

	(void)state;
	if (!wr_ready())
		skip();
	snprintf(n, sizeof(n), "%ld", 4000000000L); /* killed when done */
	assert_int_equal(wr_workload_start(&wl, argv), 0);
	snprintf(pid, sizeof(pid), "%d", (int)wl.pid);
	assert_int_equal(wr_weft_start(&p, "-p", pid, query, NULL), 0);
	rc = wr_wait_err(&p, "attached", WR_TIMEOUT_MS);
	if (rc == 0)
		rc = wr_wait_out(&p, "\n", WR_TIMEOUT_MS); /* rows arrive: head -1 has its line */
	if (rc)
		wr_dump(&p, query);
	assert_int_equal(rc, 0);
	close_output_and_check(&p, query);
	wr_free(&p);
	wr_free(&wl);
}

/* A window query whose reader leaves before anything was written (`| sleep 8` ending):
 * weft must notice although it has nothing to write for ten seconds. */
static void test_closed_output_before_window(void **state)
{
	const char *query = "from syscall:getppid select count() every 10s";
	struct wr_proc p;
	int rc;

	(void)state;
	if (!wr_ready())
		skip();
	assert_int_equal(wr_weft_start(&p, query, NULL), 0);
	rc = wr_wait_err(&p, "attached", WR_TIMEOUT_MS);
	if (rc)
		wr_dump(&p, query);
	assert_int_equal(rc, 0);
	assert_int_equal(p.out.len, 0);
	close_output_and_check(&p, query);
	wr_free(&p);
}

/* ------------------------------------------------------------------ the -c command */

static char tmpdir[64];

static int setup(void **state)
{
	(void)state;
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/weft-lifecycle-XXXXXX");
	return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
	char path[128];

	(void)state;
	snprintf(path, sizeof(path), "%s/pids", tmpdir);
	unlink(path);
	rmdir(tmpdir);
	return 0;
}

/* Whether pid has ended: no such process, or a zombie nobody has reaped yet. */
static bool proc_ended(pid_t pid)
{
	char path[64], buf[512], *rp;
	FILE *f;
	size_t n;

	if (kill(pid, 0) != 0 && errno == ESRCH)
		return true;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return true;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	rp = strrchr(buf, ')'); /* "pid (comm) S ..." */
	return rp && (rp[2] == 'Z' || rp[2] == 'X');
}

/* Waits (up to timeout_ms) for every pid of pids[n] to end; SIGKILLs the survivors so that a
 * failing test leaves nothing running, and returns how many there were. */
static int wait_ended(const pid_t *pids, int n, int timeout_ms)
{
	uint64_t end = wr_now_ms() + (uint64_t)timeout_ms;
	int alive;

	for (;;) {
		alive = 0;
		for (int i = 0; i < n; i++)
			alive += !proc_ended(pids[i]);
		if (!alive || wr_now_ms() >= end)
			break;
		wr_sleep_ms(20);
	}
	for (int i = 0; alive && i < n; i++)
		if (!proc_ended(pids[i]))
			kill(pids[i], SIGKILL);
	return alive;
}

/* Where the -c commands below write their pids (tmpdir/pids), removed first. */
static const char *pids_path_fresh(void)
{
	static char path[128];

	snprintf(path, sizeof(path), "%s/pids", tmpdir);
	unlink(path);
	return path;
}

/* The n pids the command wrote to tmpdir/pids (it writes them once it runs). */
static void read_pids(struct wr_proc *p, pid_t *pids, int n)
{
	uint64_t end = wr_now_ms() + WR_TIMEOUT_MS;
	char path[128];

	snprintf(path, sizeof(path), "%s/pids", tmpdir);
	for (;;) {
		FILE *f = fopen(path, "r");
		int got = 0;
		long v;

		while (f && got < n && fscanf(f, "%ld", &v) == 1)
			pids[got++] = (pid_t)v;
		if (f)
			fclose(f);
		if (got == n)
			break;
		if (wr_now_ms() >= end) {
			wr_dump(p, "weft run -c");
			fail_msg("the command did not write its %d pids to %s", n, path);
		}
		if (!wr_pump(p, 20))
			wr_sleep_ms(20);
	}
	for (int i = 0; i < n; i++)
		assert_false(proc_ended(pids[i]));
}

/* SIGKILL of weft: its -c command dies with it (PR_SET_PDEATHSIG), however long it runs. */
static void test_sigkill_ends_command(void **state)
{
	const char *path;
	char cmd[512];
	struct wr_proc p;
	pid_t child;
	int rc, alive;

	(void)state;
	if (!wr_ready())
		skip();
	path = pids_path_fresh();
	/* the pid, written atomically; then the same process becomes the sleep */
	snprintf(cmd, sizeof(cmd), "sh -c 'echo $$ > %s.t && mv %s.t %s; exec sleep 600'", path,
		 path, path);
	assert_int_equal(wr_weft_start(&p, "-c", cmd, "from syscall:getppid select count()", NULL),
			 0);
	rc = wr_wait_err(&p, "attached", WR_TIMEOUT_MS);
	if (rc)
		wr_dump(&p, cmd);
	assert_int_equal(rc, 0);
	read_pids(&p, &child, 1);
	assert_int_equal(kill(p.pid, SIGKILL), 0);
	/* a surviving command holds weft's pipes: the deadline bounds the wait for their EOF */
	assert_int_equal(wr_finish(&p, 20000), 128 + SIGKILL);
	alive = wait_ended(&child, 1, GONE_TIMEOUT_MS);
	if (alive)
		fail_msg("weft was SIGKILLed but its command (pid %d) still runs", (int)child);
	wr_free(&p);
}

/*
 * SIGTERM of weft whose command ignores SIGTERM and has a child of its own: weft prints its
 * final window and exits 0, as for SIGINT, and the command's whole process group is gone.
 * The deadline only catches a weft that waits for the command.
 */
static void test_sigterm_ends_command_ignoring_it(void **state)
{
	const char *path;
	char cmd[512];
	struct wr_json j;
	struct wr_proc p;
	pid_t pids[2];
	int rc, alive;

	(void)state;
	if (!wr_ready())
		skip();
	path = pids_path_fresh();
	/* the shell and its background sleep both ignore SIGTERM */
	snprintf(cmd, sizeof(cmd),
		 "sh -c 'trap \"\" TERM; sleep 600 & echo $$ $! > %s.t && mv %s.t %s; wait'", path,
		 path, path);
	assert_int_equal(wr_weft_start(&p, "--format", "json", "-c", cmd,
				       "from syscall:getppid select count() as n", NULL),
			 0);
	rc = wr_wait_err(&p, "attached", WR_TIMEOUT_MS);
	if (rc)
		wr_dump(&p, cmd);
	assert_int_equal(rc, 0);
	read_pids(&p, pids, 2);
	assert_int_equal(kill(p.pid, SIGTERM), 0);
	rc = wr_finish(&p, 20000);
	alive = wait_ended(pids, 2, GONE_TIMEOUT_MS);
	if (rc != 0 || p.timed_out)
		wr_dump(&p, cmd);
	assert_false(p.timed_out);
	assert_int_equal(rc, 0);
	if (alive)
		fail_msg("weft ended on SIGTERM but %d process(es) of its command still run",
			 alive);
	wr_json_lines(&p.out, &j);
	wr_one_window(&j); /* the final window, as for SIGINT */
	wr_json_free(&j);
	wr_free(&p);
}

/* weft's environment as it started (the kernel's copy: /proc/PID/environ), '\n' between. */
static char *start_environ(pid_t pid)
{
	char path[64], *env = calloc(1, 1 << 16);
	size_t n;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/environ", (int)pid);
	assert_non_null(env);
	assert_non_null(f = fopen(path, "re"));
	n = fread(env, 1, (1 << 16) - 1, f);
	fclose(f);
	for (size_t i = 0; i < n; i++)
		if (env[i] == '\0')
			env[i] = '\n';
	return env;
}

/*
 * One run for test_heap_hugepages of QUERY (a graph query if `store`, which it writes to):
 * GLIBC_TUNABLES as `user` (NULL: unset) and WEFT_HUGEPAGES as `off`; checks what the -c
 * command saw (the user's environment exactly) and whether weft's own start-up environment
 * carries the tunable (`want`).
 */
static void heap_run(const char *query, const char *store, const char *user, const char *off,
		     bool want)
{
	char *argv[] = {
		getenv("WEFT_BIN"),
		(char *)"run",
		(char *)"--cpu-budget",
		(char *)"0",
		(char *)"-c",
		(char *)"sh -c 'echo T=${GLIBC_TUNABLES-unset} R=${WEFT_HEAP_REEXEC-unset}; "
			"read x'",
		(char *)(store ? "-S" : query),
		(char *)(store ? store : NULL),
		(char *)(store ? query : NULL),
		NULL
	};
	char seen[256], line[256], *env;
	struct wr_proc p;
	bool has;

	assert_int_equal(user ? setenv("GLIBC_TUNABLES", user, 1) : unsetenv("GLIBC_TUNABLES"), 0);
	assert_int_equal(off ? setenv("WEFT_HUGEPAGES", off, 1) : unsetenv("WEFT_HUGEPAGES"), 0);
	assert_int_equal(wr_start(&p, argv), 0);
	assert_int_equal(unsetenv("GLIBC_TUNABLES"), 0);
	assert_int_equal(unsetenv("WEFT_HUGEPAGES"), 0);
	if (wr_wait_out(&p, "R=", WR_TIMEOUT_MS))
		wr_dump(&p, "weft run");
	assert_true(wr_cut_line(&p.out, "T=", line, sizeof(line)));
	env = start_environ(p.pid);
	wr_close_stdin(&p);
	if (wr_finish(&p, WR_TIMEOUT_MS) != 0)
		wr_dump(&p, "weft run");
	snprintf(seen, sizeof(seen), "T=%s R=unset", user ? user : "unset");
	assert_string_equal(line, seen);
	has = strstr(env, "glibc.malloc.hugetlb=1") != NULL;
	if (has != want)
		fail_msg("weft started %s glibc.malloc.hugetlb=1 (%s; GLIBC_TUNABLES %s, "
			 "WEFT_HUGEPAGES %s); its environment:\n%s",
			 has ? "with" : "without", query, user ? user : "unset",
			 off ? off : "unset", env);
	if (want && user)
		assert_non_null(strstr(env, user)); /* the user's tunables kept beside it */
	free(env);
	wr_free(&p);
}

/*
 * Where transparent huge pages are "madvise", `weft run` of a graph query starts itself once
 * more with glibc.malloc.hugetlb=1 (its heap in 2 MiB pages: a growing capture's page
 * faults), and gives the command it runs the user's environment back exactly: no
 * GLIBC_TUNABLES where the user had none, the user's where there was one, never the
 * re-start's mark.  WEFT_HUGEPAGES=0 keeps weft as it started, and so does a query that
 * aggregates (its heap stays small; a second start would cost it a third of its start-up).
 * Elsewhere ("always", "never") weft never re-starts, and the test checks that.
 */
static void test_heap_hugepages(void **state)
{
	char *mode = test_slurp_or_empty("/sys/kernel/mm/transparent_hugepage/enabled");
	bool madvise = strstr(mode, "[madvise]") != NULL;
	const char *graph = "from span(syscall:getppid) graph";
	const char *agg = "from syscall:getppid select count() as n";
	char store[96], side[112];

	(void)state;
	free(mode);
	snprintf(store, sizeof(store), "%s/graph.sqlite", tmpdir);
	heap_run(graph, store, NULL, NULL, madvise);
	heap_run(graph, store, "glibc.malloc.check=0", NULL, madvise);
	heap_run(graph, store, NULL, "0", false);
	heap_run(agg, NULL, NULL, NULL, false);
	heap_run(agg, NULL, "glibc.malloc.check=0", NULL, false);
	for (size_t i = 0; i < 4; i++) {
		snprintf(side, sizeof(side), "%s%s", store,
			 (const char *[]){ "", "-wal", "-shm", "-journal" }[i]);
		unlink(side);
	}
	if (!madvise)
		printf("note: transparent huge pages are not \"madvise\" here: only that weft "
		       "does not re-start was checked\n");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sigkill_tracepoint_leaves_nothing),
		cmocka_unit_test(test_sigkill_uprobe_leaves_nothing),
		cmocka_unit_test(test_sigint_prints_final_window),
		cmocka_unit_test(test_pid_exit_ends_run),
		cmocka_unit_test(test_closed_output_stream),
		cmocka_unit_test(test_closed_output_before_window),
		cmocka_unit_test(test_sigkill_ends_command),
		cmocka_unit_test(test_sigterm_ends_command_ignoring_it),
		cmocka_unit_test(test_windows_longer_than_a_flip),
		cmocka_unit_test(test_heap_hugepages),
	};

	if (!wr_ready())
		return WT_SKIP;
	return wt_status(cmocka_run_group_tests(tests, setup, teardown));
}
