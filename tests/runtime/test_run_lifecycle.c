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
 *  - windows longer than the once-a-second flip are numbered 0, 1, 2, ... (exact count).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "run_util.h"

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

static void kill_and_check_gone(const char *query, const char *binary)
{
	struct held alive, after;
	struct wr_proc p;
	uint64_t end;
	int rc;

	assert_int_equal(wr_weft_start(&p, query, NULL), 0);
	rc = wr_wait_err(&p, "attached", WR_TIMEOUT_MS);
	if (rc)
		wr_dump(&p, query);
	assert_int_equal(rc, 0);

	/* alive: the checks below see what weft holds (so they can fail) */
	held_of(p.pid, NULL, binary, &alive);
	assert_true(alive.perf_events > 0);
	assert_true(alive.progs.n > 0);
	assert_true(alive.maps.n > 0);
	assert_true(alive.links.n > 0);
	assert_int_equal(maps_alive(&alive.maps), alive.maps.n);
	if (binary) {
		assert_true(alive.uprobe_seen);
		assert_int_equal(uprobe_events_naming(binary), 0);
	}

	assert_int_equal(kill(p.pid, SIGKILL), 0);
	assert_int_equal(wr_finish(&p, WR_TIMEOUT_MS), 128 + SIGKILL);

	end = wr_now_ms() + GONE_TIMEOUT_MS;
	for (;;) {
		size_t maps;

		held_of(p.pid, &alive.progs, binary, &after);
		maps = maps_alive(&alive.maps);
		if (!after.perf_events && !after.progs.n && !after.links.n && !maps)
			break;
		if (wr_now_ms() >= end)
			fail_msg(
				"after SIGKILL: %zu perf events, %zu programs, %zu links, %zu maps "
				"of weft remain",
				after.perf_events, after.progs.n, after.links.n, maps);
		wr_sleep_ms(100);
	}
	if (binary)
		assert_int_equal(uprobe_events_naming(binary), 0);
	wr_free(&p);
}

static void test_sigkill_tracepoint_leaves_nothing(void **state)
{
	(void)state;
	if (!wr_ready())
		skip();
	kill_and_check_gone("from syscall:getppid select count()", NULL);
}

static void test_sigkill_uprobe_leaves_nothing(void **state)
{
	char query[PATH_MAX + 64];
	const char *bin;

	(void)state;
	if (!wr_ready())
		skip();
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
	if (!wr_ready())
		skip();
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
	if (!wr_ready())
		skip();
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sigkill_tracepoint_leaves_nothing),
		cmocka_unit_test(test_sigkill_uprobe_leaves_nothing),
		cmocka_unit_test(test_sigint_prints_final_window),
		cmocka_unit_test(test_pid_exit_ends_run),
		cmocka_unit_test(test_windows_longer_than_a_flip),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
