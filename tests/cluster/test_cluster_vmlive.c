// SPDX-License-Identifier: Apache-2.0
/*
 * `weft vm live` (docs/vm.md "Live: the fused view"): the fused VM view computed from stream
 * queries of a cluster, with a real aggregator, two real agents over CURVE ZeroMQ ("vmhost"
 * plays the host, "vmguest" the guest, both on this machine under different --host names)
 * and real eBPF.  This machine has no /dev/kvm, so, as in test_vm_record and
 * test_cluster_vmsync: tests/workloads/wl_vmsync_fake (with SLEEP_US) plays the host's vCPU
 * thread (KVM_RUN ioctls on /dev/null, which the discovery finds; the FAKE hypercall, a USDT
 * probe that --hypercall-source puts in place of kvm:kvm_hypercall, whose kvm event makes the
 * thread a vCPU of the analysis; blocked sleeps between points) and the guest (the real
 * weft:vm_sync probe of include/weft/vmsync.h, its guest clock CLOCK_MONOTONIC + 0, so the
 * true offset is 0).
 *
 *   synced    N points: no row lost on the way (the view has no "warnings"); the last view `weft vm live --format json --intervals` prints is,
 *             byte for byte, what `weft vm analyze --format json --intervals` prints over the
 *             streams it saved (--record-host, --record-guest); and against the workload:
 *             N points joined, the offset within its bound of the true 0, exactly one vCPU,
 *             the workload's thread (its pid and tid), with as many idle intervals as the
 *             host stream has blocked switch-outs of it after its first hypercall (at least
 *             N - 2: test_vm_record's allowance for a switch the tracepoint does not deliver)
 *             and as many preempted ones as wake-ups of it while idle plus runnable
 *             switch-outs; as many guest threads as the guest stream has distinct threads
 *             switched in or out, the workload's among them; the discovery names the thread
 *             with its N KVM_RUN calls; exit 0.
 *   unsynced  the fake hypercall never fires: the text view says "UNSYNCHRONISED" (no offset,
 *             never 0), no vCPU, exit 4; `weft vm analyze` over the same streams refuses the
 *             guest (E_VM_NO_SYNC); in JSON the sync has a null offset and bound, 0 points,
 *             and no guest thread is fused (but its events are counted).
 *   forgotten the aggregator no longer has the queries when weft vm live comes back (restarted
 *             on a fresh store while it was stopped): each query is said gone once, the
 *             view of what came is printed, exit 1 (it waited for ever before).
 *
 * Nothing is asserted about timing: the workload runs once every query runs on its agent,
 * and `weft vm live` is stopped with Ctrl-C (it cancels the queries and waits for their last
 * rows) after the workload exited.  Needs root (eBPF); skipped otherwise.
 */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/cluster/cluster_util.h"
#include "tests/cluster/vmpair_util.h"
#include "tests/skip.h"

#define NPOINTS 30
#define SLEEP_US "2000"

static int group_setup(void **state)
{
	return vmpair_setup(state, "wl_vmlive");
}

struct run {
	struct cl_proc *vl;
	long wl_pid;
	int status;
	char host[PATH_MAX], guest[PATH_MAX];
};

/* The arguments of `weft vm live` with --format FMT (and --intervals for json, --every 1s),
 * saving its streams to r's files of this run. */
static void live_argv(struct fixture *f, struct run *r, const char *fmt, char **argv)
{
	struct cl *cl = &f->cl;
	int k = 0;

	snprintf(r->host, sizeof(r->host), "%s/host-%d.jsonl", cl->dir, f->runs);
	snprintf(r->guest, sizeof(r->guest), "%s/guest-%d.jsonl", cl->dir, f->runs);
	argv[k++] = getenv("WEFT_BIN");
	argv[k++] = (char *)"vm";
	argv[k++] = (char *)"live";
	argv[k++] = (char *)"--to";
	argv[k++] = cl->endpoint;
	argv[k++] = (char *)"--server-key";
	argv[k++] = (char *)cl_pub(cl, cl->client_server);
	argv[k++] = (char *)"--key";
	argv[k++] = (char *)cl_path(cl, "me.key");
	argv[k++] = (char *)"--host-agent";
	argv[k++] = (char *)"vmhost";
	argv[k++] = (char *)"--guest-agent";
	argv[k++] = (char *)"vmguest";
	argv[k++] = (char *)"--guest-binary";
	argv[k++] = f->wl;
	argv[k++] = (char *)"--hypercall-source";
	argv[k++] = f->source;
	argv[k++] = (char *)"--every";
	argv[k++] = (char *)"1s";
	argv[k++] = (char *)"--format";
	argv[k++] = (char *)fmt;
	if (strcmp(fmt, "json") == 0)
		argv[k++] = (char *)"--intervals";
	argv[k++] = (char *)"--record-host";
	argv[k++] = r->host;
	argv[k++] = (char *)"--record-guest";
	argv[k++] = r->guest;
	argv[k] = NULL;
}

/*
 * `weft vm live` with --format FMT (and --intervals for json, --every 1s), saving its streams;
 * the workload (mode) run once every query runs on its agent; then Ctrl-C and its exit.
 */
static void run_live(struct fixture *f, struct run *r, const char *fmt, const char *mode)
{
	struct cl *cl = &f->cl;
	char log[32], wlog[32], points[PATH_MAX], n[16], *err, *s;
	char *argv[WR_MAX_ARGS];
	struct cl_proc *wl;
	int queries = 0;

	f->runs++;
	snprintf(log, sizeof(log), "vmlive-%d", f->runs);
	snprintf(wlog, sizeof(wlog), "wl-%d", f->runs);
	snprintf(points, sizeof(points), "%s/points-%d.txt", cl->dir, f->runs);
	live_argv(f, r, fmt, argv);
	assert_true(CL_WAIT(cl_agents_idle(cl, NULL, VMPAIR_HOSTS), CL_WAIT_MS));
	r->vl = cl_spawn(cl, log, NULL, argv);
	cl_expect_log(r->vl, "queries running", CL_WAIT_MS);
	/* every query runs on its agent, and on that one alone */
	err = cl_slurp(r->vl->err);
	for (s = err; (s = strstr(s, " query ")) != NULL; s++) {
		char needle[64], *at;
		unsigned long long id = strtoull(s + 7, &at, 10);
		bool guest;

		if (at == s + 7 || strncmp(at, " sent to 1 agent (", 18) != 0)
			continue;
		guest = strncmp(at + 18, "vmguest)", 8) == 0;
		assert_true(guest || strncmp(at + 18, "vmhost)", 7) == 0);
		snprintf(needle, sizeof(needle), "query %llu running", id);
		cl_expect_log(guest ? f->guest : f->host, needle, CL_WAIT_MS);
		assert_false(cl_file_has(guest ? f->host->err : f->guest->err, needle));
		queries++;
	}
	free(err);
	assert_true(queries >= 5); /* ioctl, 2 sched, the hypercall, vm_sync at least */

	snprintf(n, sizeof(n), "%d", NPOINTS);
	wl = cl_spawn(cl, wlog, NULL,
		      (char *const[]){ f->wl, n, (char *)"0", points, (char *)mode,
				       (char *)SLEEP_US, NULL });
	r->wl_pid = wl->pid;
	assert_int_equal(cl_wait_exit(wl, CL_WAIT_MS), 0);
	kill(r->vl->pid, SIGINT); /* cancels the queries, waits for their last rows */
	/* a bound, not a timing: it waits for every agent's last rows (sanitizer builds are
	 * slow) */
	r->status = cl_wait_exit(r->vl, 6 * CL_WAIT_MS);
	if (r->status < 0) {
		char *text = cl_slurp(r->vl->err);

		print_error("%s\n", text);
		free(text);
		fail_msg("weft vm live did not end");
	}
}

/* The last line of a file, malloc'd, without its newline. */
static char *last_line(const char *path)
{
	char *s = cl_slurp(path), *end, *start, *out;

	end = s + strlen(s);
	while (end > s && end[-1] == '\n')
		end--;
	*end = 0;
	start = strrchr(s, '\n');
	out = strdup(start ? start + 1 : s);
	free(s);
	assert_non_null(out);
	return out;
}

/* The events of a recorded stream, as a jansson array. */
static json_t *stream_load(const char *path)
{
	json_t *arr = json_array();
	char *s = cl_slurp(path), *save = NULL;

	for (char *l = strtok_r(s, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		json_t *o;

		if (l[0] == '#')
			continue;
		o = json_loads(l, 0, NULL);
		assert_non_null(o);
		json_array_append_new(arr, o);
	}
	free(s);
	return arr;
}

static long long jint(const json_t *o, const char *k)
{
	const json_t *v = json_object_get(o, k);

	if (!json_is_integer(v))
		fail_msg("no integer %s", k);
	return (long long)json_integer_value(v);
}

static bool blocked(const json_t *st)
{
	long long v = json_integer_value(st);

	return (v & 0xff) != 0; /* vm/vcpu.c's rule: runnable is no bit of the low byte */
}

static void test_synced(void **state)
{
	struct fixture *f = *state;
	struct cl *cl = &f->cl;
	struct run r;
	char *view, cmd[4 * PATH_MAX + 128], apath[PATH_MAX], *analyzed;
	json_t *v, *sync, *vcpus, *vc, *hs, *gs, *threads;
	long long first = -1, idle_sw = 0, wakes = 0, runnable_sw = 0, iv_idle = 0, iv_pre = 0;
	size_t i;
	json_t *e;
	char want[128];

	cl->passed = false;
	run_live(f, &r, "json", "ok");
	if (r.status != 0)
		fail_msg("weft vm live: status %d: %s", r.status, cl_slurp(r.vl->err));

	/* the live view is what `weft vm analyze` prints over the same streams */
	view = last_line(r.vl->out);
	snprintf(apath, sizeof(apath), "%s/analyze-%d.json", cl->dir, f->runs);
	snprintf(cmd, sizeof(cmd),
		 "'%s' vm analyze --host '%s' --guest '%s' --format json --intervals > '%s'",
		 getenv("WEFT_BIN"), r.host, r.guest, apath);
	assert_int_equal(system(cmd), 0);
	analyzed = last_line(apath);
	assert_string_equal(view, analyzed);
	free(analyzed);

	v = json_loads(view, 0, NULL);
	assert_non_null(v);
	free(view);
	/* no row lost anywhere (a full ring buffer, not shipped, not relayed): no warning */
	assert_null(json_object_get(v, "warnings"));
	/* the points: all joined, the offset within its bound of the true 0 */
	sync = json_object_get(v, "sync");
	assert_true(json_is_true(json_object_get(sync, "synced")));
	assert_int_equal(jint(sync, "points"), NPOINTS);
	assert_true(llabs(jint(sync, "offset_ns")) <= jint(sync, "error_ns"));
	/* one vCPU: the workload's thread */
	vcpus = json_object_get(v, "vcpus");
	assert_int_equal(json_array_size(vcpus), 1);
	vc = json_array_get(vcpus, 0);
	assert_int_equal(jint(vc, "tid"), r.wl_pid);
	assert_int_equal(jint(vc, "pid"), r.wl_pid);
	json_array_foreach(json_object_get(vc, "intervals"), i, e)
	{
		const char *st = json_string_value(json_object_get(e, "state"));

		iv_idle += strcmp(st, "idle") == 0;
		iv_pre += strcmp(st, "preempted") == 0;
	}
	/* the same from the host stream: after the thread's first hypercall, its blocked
	 * switch-outs (idle), its wake-ups while idle and runnable switch-outs (preempted) */
	hs = stream_load(r.host);
	{
		bool idle = false;

		json_array_foreach(hs, i, e)
		{
			const char *name = json_string_value(json_object_get(e, "name"));
			json_t *fl = json_object_get(e, "fields");

			if (strcmp(name, "kvm_hypercall") == 0 && jint(e, "tid") == r.wl_pid &&
			    first < 0)
				first = jint(e, "time");
			if (first < 0)
				continue;
			if (strcmp(name, "sched_switch") == 0 && jint(fl, "prev_pid") == r.wl_pid) {
				idle = blocked(json_object_get(fl, "prev_state"));
				idle_sw += idle;
				runnable_sw += !idle;
			} else if (strcmp(name, "sched_wakeup") == 0 &&
				   jint(fl, "pid") == r.wl_pid && idle) {
				wakes++;
				idle = false;
			}
		}
	}
	assert_true(first >= 0);
	assert_true(idle_sw >= NPOINTS - 2);
	assert_int_equal(iv_idle, idle_sw);
	assert_int_equal(iv_pre, wakes + runnable_sw);
	json_decref(hs);
	/* the guest's threads: every thread its switches name (tid 0, the idle tasks, is none) */
	gs = stream_load(r.guest);
	{
		long long *tids = NULL;
		size_t nt = 0;
		bool wl_seen = false;

		json_array_foreach(gs, i, e)
		{
			json_t *fl = json_object_get(e, "fields");

			if (strcmp(json_string_value(json_object_get(e, "name")), "sched_switch"))
				continue;
			for (int k = 0; k < 2; k++) {
				long long t = jint(fl, k ? "next_pid" : "prev_pid");
				size_t j;

				if (t == 0)
					continue;
				for (j = 0; j < nt && tids[j] != t; j++)
					;
				if (j == nt) {
					tids = realloc(tids, (nt + 1) * sizeof(*tids));
					assert_non_null(tids);
					tids[nt++] = t;
				}
			}
		}
		threads = json_object_get(json_object_get(v, "guest"), "threads");
		assert_int_equal(json_array_size(threads), nt);
		json_array_foreach(threads, i, e) wl_seen |= jint(e, "tid") == r.wl_pid;
		assert_true(wl_seen);
		free(tids);
	}
	json_decref(gs);
	json_decref(v);
	/* the discovery, on stderr */
	snprintf(want, sizeof(want), "vCPU thread %ld (wl_fake_vcpu0): %d KVM_RUN calls", r.wl_pid,
		 NPOINTS);
	assert_true(cl_file_has(r.vl->err, want));
	cl->passed = true;
}

static void test_unsynced(void **state)
{
	struct fixture *f = *state;
	struct cl *cl = &f->cl;
	struct run r;
	char *out, *last;
	json_t *v, *sync;

	cl->passed = false;
	run_live(f, &r, "text", "guest-only");
	assert_int_equal(r.status, 4);
	out = cl_slurp(r.vl->out);
	assert_non_null(strstr(out, "=== weft vm live: the last view ("));
	assert_non_null(strstr(out, "clock: UNSYNCHRONISED: no synchronisation point seen on both "
				    "sides yet"));
	assert_null(strstr(out, "clock: host = guest"));
	assert_null(strstr(out, "vCPU 0 (host thread"));
	free(out);
	{
		/* the same streams: an analysis refuses the guest without points */
		char cmd[4 * PATH_MAX + 128];

		snprintf(cmd, sizeof(cmd),
			 "'%s' vm analyze --host '%s' --guest '%s' --format json 2>&1 | grep -q "
			 "E_VM_NO_SYNC",
			 getenv("WEFT_BIN"), r.host, r.guest);
		assert_int_equal(system(cmd), 0);
	}

	/* JSON: no offset and no bound (null, never 0), no guest thread fused */
	run_live(f, &r, "json", "guest-only");
	assert_int_equal(r.status, 4);
	last = last_line(r.vl->out);
	v = json_loads(last, 0, NULL);
	assert_non_null(v);
	free(last);
	sync = json_object_get(v, "sync");
	assert_true(json_is_false(json_object_get(sync, "synced")));
	assert_true(json_is_false(json_object_get(sync, "assumed")));
	assert_int_equal(jint(sync, "points"), 0);
	assert_true(json_is_null(json_object_get(sync, "offset_ns")));
	assert_true(json_is_null(json_object_get(sync, "error_ns")));
	assert_int_equal(json_array_size(json_object_get(json_object_get(v, "guest"), "threads")),
			 0);
	assert_true(jint(json_object_get(v, "guest"), "events") > 0);
	assert_int_equal(json_array_size(json_object_get(v, "vcpus")), 0);
	json_decref(v);
	cl->passed = true;
}

/*
 * The aggregator no longer has the queries when `weft vm live` comes back: it forgets an
 * ended query 10 minutes after its end; here it lost its state (restarted on a fresh store
 * while `weft vm live` was stopped, which stands in for the forgetting, the same answer).
 * Its renewed subscriptions are answered "no query N runs here": it says, for each query,
 * that rows after those received are not here, and ends with the view of what came, exit
 * 1.  (It waited for the queries' ends for ever before.)
 */
static void test_forgotten(void **state)
{
	struct fixture *f = *state;
	struct cl *cl = &f->cl;
	char *argv[WR_MAX_ARGS], *err, *s, needle[PATH_MAX + 128];
	struct cl_proc *vl;
	struct run r;
	int queries = 0, status;

	cl->passed = false;
	f->runs++;
	live_argv(f, &r, "text", argv);
	assert_true(CL_WAIT(cl_agents_idle(cl, NULL, VMPAIR_HOSTS), CL_WAIT_MS));
	vl = cl_spawn(cl, "vmlive-forgotten", NULL, argv);
	cl_expect_log(vl, "queries running", CL_WAIT_MS);
	kill(vl->pid, SIGSTOP);
	assert_int_equal(cl_stop(f->agg, SIGTERM, CL_WAIT_MS), 0);
	for (const char *const *x = (const char *const[]){ "", "-wal", "-shm", NULL }; *x; x++) {
		char path[PATH_MAX];

		snprintf(path, sizeof(path), "%s/agg.sqlite%s", cl->dir, *x);
		assert_true(unlink(path) == 0 || errno == ENOENT);
	}
	f->agg = cl_aggregator(cl, "agg", NULL, "agg-fresh", NULL);
	/* the agents were told to stop the queries the new instance does not know */
	assert_true(CL_WAIT(cl_agents_idle(cl, NULL, VMPAIR_HOSTS), CL_WAIT_MS));
	kill(vl->pid, SIGCONT);
	status = cl_wait_exit(vl, 2 * CL_WAIT_MS);
	err = cl_slurp(vl->err);
	if (status != 1)
		fail_msg("weft vm live: status %d (1 expected): %s", status, err);
	/* each query it sent: said gone, once */
	for (s = err; (s = strstr(s, " query ")) != NULL; s++) {
		unsigned long long id = strtoull(s + 7, &s, 10);

		if (strncmp(s, " sent to 1 agent (", 18) != 0)
			continue;
		queries++;
		snprintf(needle, sizeof(needle), "no query %llu runs here", id);
		assert_int_equal(cl_file_count(vl->err, needle), 1);
		snprintf(needle, sizeof(needle),
			 " query (%llu) is no longer known to %s (it ended and was forgotten", id,
			 cl->endpoint);
		assert_int_equal(cl_file_count(vl->err, needle), 1);
	}
	free(err);
	assert_true(queries >= 5);
	assert_int_equal(cl_file_count(vl->err, "is no longer known to"), queries);
	/* and the view of what came */
	assert_true(cl_file_has(vl->out, "=== weft vm live: the last view ("));
	cl->passed = true;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_synced),
		cmocka_unit_test(test_unsynced),
		cmocka_unit_test(test_forgotten),
	};

	if (!wr_ready())
		return WT_SKIP;
	return wt_status(cmocka_run_group_tests(tests, group_setup, group_teardown));
}
