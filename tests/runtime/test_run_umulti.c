// SPDX-License-Identifier: Apache-2.0
/*
 * Wildcard uprobes through multi-uprobe links (probes/uprobe_multi.c), against the real kernel,
 * on tests/workloads/wl_ufuncs (256 functions; in a run of N rounds function k is called
 * exactly N * (k % 4 + 1) times):
 *  - `weft run` of `uprobe:wl_ufuncs:wl_f*` grouped by probe counts every function exactly, so
 *    each site's cookie names its own function; a uretprobe wildcard gets every return value;
 *    `where probe = '...'` (a test of the cookie in the kernel) keeps exactly one function.
 *  - While it runs, weft holds one multi-uprobe link (its /proc/PID/fdinfo) and no uprobe perf
 *    event; with WEFT_UPROBE_MULTI=0 (over wl_f0*, 16 functions) it holds 16 perf events and
 *    no such link; both count the workload's calls exactly.
 *  - In process, agent_query_stop() detaches fully: the link is gone from the process and
 *    from the kernel (its id no longer opens), and a second run of the workload adds nothing.
 *  - `weft explain` and `weft run` (before "attached") say how many sites a wildcard matched.
 * Kernels without multi-uprobe links skip the checks that need them.
 */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <bpf/bpf.h>

#include "tests/skip.h"
#include "agent/agent.h"
#include "agent/result.h"
#include "compiler/compiler.h"
#include "compiler/plan.h"
#include "probes/probes.h"
#include "run_util.h"

#define NFUNCS 256
#define ROUNDS 7

/* What a process holds: BPF links of type uprobe_multi (their ids), perf-event fds. */
struct held {
	unsigned link_ids[64];
	int nlinks;
	int perf_events;
};

static void held_of(pid_t pid, struct held *h)
{
	char dir[64], path[PATH_MAX], target[256], line[256];
	struct dirent *de;
	DIR *d;

	memset(h, 0, sizeof(*h));
	snprintf(dir, sizeof(dir), "/proc/%d/fd", (int)pid);
	d = opendir(dir);
	assert_non_null(d);
	while ((de = readdir(d))) {
		ssize_t n;
		FILE *f;
		bool umulti = false;
		unsigned id = 0;

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		n = readlink(path, target, sizeof(target) - 1);
		if (n <= 0)
			continue;
		target[n] = 0;
		if (strcmp(target, "anon_inode:[perf_event]") == 0) {
			h->perf_events++;
			continue;
		}
		if (strcmp(target, "anon_inode:bpf_link") != 0)
			continue;
		snprintf(path, sizeof(path), "/proc/%d/fdinfo/%s", (int)pid, de->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		while (fgets(line, sizeof(line), f)) {
			if (strncmp(line, "link_type:", 10) == 0 && strstr(line, "uprobe_multi"))
				umulti = true;
			sscanf(line, "link_id: %u", &id);
		}
		fclose(f);
		if (umulti && id && h->nlinks < 64)
			h->link_ids[h->nlinks++] = id;
	}
	closedir(d);
}

/* k of "...:wl_fHH" */
static int func_index(const char *probe)
{
	const char *s = strstr(probe, ":wl_f");

	if (!s || strlen(s) != 7)
		fail_msg("probe %s is not one of wl_ufuncs", probe);
	return (int)strtol(s + 5, NULL, 16);
}

/* `weft run --format json -c 'wl_ufuncs ROUNDS' QUERY`; its JSON lines in j. */
static void run_counted(const char *query, struct wr_json *j)
{
	char cmd[PATH_MAX + 32];
	struct wr_proc p;
	int rc;

	snprintf(cmd, sizeof(cmd), "%s %d", wr_workload("wl_ufuncs"), ROUNDS);
	rc = wr_weft_run(&p, "--format", "json", "-c", cmd, query);
	if (rc != 0)
		wr_dump(&p, query);
	assert_int_equal(rc, 0);
	wr_json_lines(&p.out, j);
	wr_free(&p);
}

static void check_per_function(const char *query)
{
	const struct wj *w;
	struct wr_json j;
	bool seen[NFUNCS] = { false };

	run_counted(query, &j);
	w = wr_one_window(&j);
	assert_int_equal(wr_nrows(w), NFUNCS);
	for (size_t i = 0; i < NFUNCS; i++) {
		const struct wj *row = wr_row(w, i);
		int k = func_index(wj_str(wj_get(row, "probe")));

		assert_false(seen[k]);
		seen[k] = true;
		if (wj_int_of(row, "n") != ROUNDS * (k % 4 + 1))
			fail_msg("wl_f%02x: %lld calls counted, %d made", k, wj_int_of(row, "n"),
				 ROUNDS * (k % 4 + 1));
	}
	wr_json_free(&j);
}

static char *query_of(const char *fmt)
{
	static char q[PATH_MAX + 512];

	snprintf(q, sizeof(q), fmt, wr_workload("wl_ufuncs"));
	return q;
}

static void test_wildcard_counts_each_function(void **state)
{
	(void)state;
	if (!wr_ready())
		wt_skip("tracing needs root, tracefs and the weft binary");
	check_per_function(query_of("from uprobe:%s:wl_f* group by probe select count() as n"));
}

static void test_wildcard_uretprobe_values(void **state)
{
	const struct wj *w;
	struct wr_json j;

	(void)state;
	if (!wr_ready())
		wt_skip("tracing needs root, tracefs and the weft binary");
	run_counted(query_of("from uretprobe:%s:wl_f* group by probe select count() as n, "
			     "sum(retval) as r"),
		    &j);
	w = wr_one_window(&j);
	assert_int_equal(wr_nrows(w), NFUNCS);
	for (size_t i = 0; i < NFUNCS; i++) {
		const struct wj *row = wr_row(w, i);
		int k = func_index(wj_str(wj_get(row, "probe")));
		long long calls = k % 4 + 1, want = 0;

		/* wl_fK(round) returns round * 3 + K */
		for (int r = 0; r < ROUNDS; r++)
			want += calls * (r * 3 + k);
		assert_int_equal(wj_int_of(row, "n"), ROUNDS * calls);
		assert_int_equal(wj_int_of(row, "r"), want);
	}
	wr_json_free(&j);
}

static void test_wildcard_probe_filter(void **state)
{
	char q[2 * PATH_MAX + 256];
	const struct wj *w;
	struct wr_json j;

	(void)state;
	if (!wr_ready())
		wt_skip("tracing needs root, tracefs and the weft binary");
	/* wl_f05 and wl_fa3: k % 4 + 1 = 2 and 4 */
	snprintf(q, sizeof(q),
		 "from uprobe:%s:wl_f* where probe = 'uprobe:%s:wl_f05' or "
		 "probe = 'uprobe:%s:wl_fa3' select count() as n",
		 wr_workload("wl_ufuncs"), wr_workload("wl_ufuncs"), wr_workload("wl_ufuncs"));
	run_counted(q, &j);
	w = wr_one_window(&j);
	assert_int_equal(wj_int_of(wr_row(w, 0), "n"), ROUNDS * (2 + 4));
	wr_json_free(&j);
}

/*
 * weft run -p on a waiting wl_ufuncs: what weft holds while attached, then the exact total.
 * The multi-link path attaches all 256 functions (wl_f*); the fallback, a link per site, the
 * 16 of wl_f0* (functions 0x00..0x0f: 4 x (1+2+3+4) = 40 calls a round): a uprobe attached and
 * detached on its own costs tens of ms here, and 16 show the path as well as 256 (16 s).
 */
static void links_while_running(bool multi, struct held *h)
{
	char *wl_argv[] = { (char *)wr_workload("wl_ufuncs"), (char *)"3", (char *)"wait", NULL };
	struct wr_proc wl, p;
	char pid[32];
	struct wr_json j;
	int rc;

	if (!multi)
		setenv("WEFT_UPROBE_MULTI", "0", 1);
	assert_int_equal(wr_workload_start(&wl, wl_argv), 0);
	snprintf(pid, sizeof(pid), "%d", (int)wl.pid);
	assert_int_equal(
		wr_weft_start(&p, "--format", "json", "-p", pid,
			      query_of(multi ? "from uprobe:%s:wl_f* select count() as n" :
					       "from uprobe:%s:wl_f0* select count() as n"),
			      NULL),
		0);
	unsetenv("WEFT_UPROBE_MULTI");
	rc = wr_wait_err(&p, "attached", WR_TIMEOUT_MS);
	if (rc)
		wr_dump(&p, "weft run");
	assert_int_equal(rc, 0);
	held_of(p.pid, h);
	assert_int_equal(write(wl.in_fd, "g", 1), 1);
	assert_int_equal(wr_finish(&wl, WR_TIMEOUT_MS), 0);
	rc = wr_finish(&p, WR_TIMEOUT_MS); /* -p: weft ends when the workload does */
	if (rc)
		wr_dump(&p, "weft run");
	assert_int_equal(rc, 0);
	wr_json_lines(&p.out, &j);
	assert_int_equal(wj_int_of(wr_row(wr_one_window(&j), 0), "n"), multi ? 3 * 640 : 3 * 40);
	wr_json_free(&j);
	wr_free(&p);
	wr_free(&wl);
}

static void test_multi_link_held(void **state)
{
	struct held h;

	(void)state;
	if (!wr_ready())
		wt_skip("tracing needs root, tracefs and the weft binary");
	if (!probe_uprobe_multi_supported()) {
		wt_skip("this kernel has no multi-uprobe links");
	}
	links_while_running(true, &h);
	assert_int_equal(h.nlinks, 1);
	assert_int_equal(h.perf_events, 0);
}

static void test_single_links_fallback(void **state)
{
	struct held h;

	(void)state;
	if (!wr_ready())
		wt_skip("tracing needs root, tracefs and the weft binary");
	links_while_running(false, &h);
	assert_int_equal(h.nlinks, 0);
	assert_int_equal(h.perf_events, 16);
}

/* In process: the workload's total through a started query, read as one window. */
static long long workload_through(struct agent_query *q, const struct plan *plan)
{
	char *argv[] = { (char *)wr_workload("wl_ufuncs"), (char *)"2", NULL };
	struct agent_table *t = agent_table_new(plan, 0);
	struct wr_proc wl;
	struct wr_json j;
	struct wr_buf out = { 0 };
	long long n;
	FILE *f;
	char *text = NULL;
	size_t len = 0;

	assert_non_null(t);
	assert_int_equal(wr_start(&wl, argv), 0);
	assert_int_equal(wr_finish(&wl, WR_TIMEOUT_MS), 0);
	wr_free(&wl);
	assert_int_equal(agent_query_window(q, t, NULL), 0);
	f = open_memstream(&text, &len);
	assert_non_null(f);
	agent_table_print(t, AGENT_FMT_JSON, NULL, f);
	fclose(f);
	wr_buf_add(&out, text, len);
	wr_json_lines(&out, &j);
	n = wr_nrows(j.v[0]) ? wj_int_of(wr_row(j.v[0], 0), "n") : 0;
	wr_json_free(&j);
	free(out.p);
	free(text);
	agent_table_free(t);
	return n;
}

static void test_stop_detaches_fully(void **state)
{
	struct compile_opts o = { .sz = sizeof(o) };
	struct agent_query_opts ao = { .sz = sizeof(ao) };
	const char *query = query_of("from uprobe:%s:wl_f* select count() as n");
	struct compile_result res;
	struct agent_err err;
	struct diag_list dl;
	struct agent_query *q = NULL;
	struct held h;
	unsigned ids[64];
	int nids;

	(void)state;
	if (!wr_ready())
		wt_skip("tracing needs root, tracefs and the weft binary");
	if (!probe_uprobe_multi_supported()) {
		wt_skip("this kernel has no multi-uprobe links");
	}
	diag_list_init(&dl, query, "query");
	assert_int_equal(compiler_run(query, &o, PASS_CLANG, &dl, &res), 0);
	assert_int_equal(agent_query_start(res.plan, res.object, res.object_sz, &ao, &q, &err), 0);
	held_of(getpid(), &h);
	assert_int_equal(h.nlinks, 1);
	nids = h.nlinks;
	memcpy(ids, h.link_ids, sizeof(ids));
	assert_int_equal(workload_through(q, res.plan), 2 * 640);

	agent_query_stop(q);
	held_of(getpid(), &h);
	assert_int_equal(h.nlinks, 0);
	for (int i = 0; i < nids; i++) {
		/* the kernel frees a closed link after a grace period: wait for it, bounded */
		uint64_t end = wr_now_ms() + 10000;
		int fd;

		while ((fd = bpf_link_get_fd_by_id(ids[i])) >= 0 && wr_now_ms() < end) {
			close(fd);
			wr_sleep_ms(50);
		}
		if (fd >= 0)
			fail_msg("link %u still exists after the stop", ids[i]);
	}
	/* nothing fires any more: a second run of the workload adds nothing */
	assert_int_equal(workload_through(q, res.plan), 0);
	agent_query_free(q);
	compile_result_free(&res);
	diag_list_free(&dl);
}

/* weft explain, and weft run before attaching, say how many sites each wildcard matched. */
static void test_sites_counted(void **state)
{
	char *argv[] = { getenv("WEFT_BIN"), (char *)"explain",
			 query_of("from uprobe:%s:wl_f0* select count() as n"), NULL };
	char line[PATH_MAX + 64], cmd[PATH_MAX + 32];
	struct wr_proc p;
	int rc;

	(void)state;
	if (!wr_ready())
		wt_skip("tracing needs root, tracefs and the weft binary");
	snprintf(line, sizeof(line), "uprobe:%s:wl_f0* matched 16 sites\n",
		 wr_workload("wl_ufuncs"));
	assert_int_equal(wr_start(&p, argv), 0);
	rc = wr_finish(&p, WR_TIMEOUT_MS);
	if (rc != 0 || !strstr(p.out.p, line))
		wr_dump(&p, "weft explain");
	assert_int_equal(rc, 0);
	assert_non_null(strstr(p.out.p, line));
	wr_free(&p);

	/* a probe without a wildcard gets no such line */
	argv[2] = query_of("from uprobe:%s:wl_f05 select count() as n");
	assert_int_equal(wr_start(&p, argv), 0);
	assert_int_equal(wr_finish(&p, WR_TIMEOUT_MS), 0);
	assert_null(strstr(p.out.p, "matched"));
	wr_free(&p);

	snprintf(cmd, sizeof(cmd), "%s 1", wr_workload("wl_ufuncs"));
	snprintf(line, sizeof(line), "weft: uprobe:%s:wl_f* matched 256 sites\nweft: attached",
		 wr_workload("wl_ufuncs"));
	rc = wr_weft_run(&p, "-c", cmd, query_of("from uprobe:%s:wl_f* select count() as n"));
	if (rc != 0 || !strstr(p.err.p, line))
		wr_dump(&p, "weft run");
	assert_int_equal(rc, 0);
	assert_non_null(strstr(p.err.p, line));
	wr_free(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_wildcard_counts_each_function),
		cmocka_unit_test(test_wildcard_uretprobe_values),
		cmocka_unit_test(test_wildcard_probe_filter),
		cmocka_unit_test(test_multi_link_held),
		cmocka_unit_test(test_single_links_fallback),
		cmocka_unit_test(test_stop_detaches_fully),
		cmocka_unit_test(test_sites_counted),
	};

	if (!wr_ready())
		return WT_SKIP;
	return wt_status(cmocka_run_group_tests(tests, NULL, NULL));
}
