// SPDX-License-Identifier: Apache-2.0
/*
 * `weft vm sync` live (docs/vm.md "Live: guest and host agents"): a real aggregator, two real
 * agents over CURVE ZeroMQ ("vmhost" plays the host, "vmguest" the guest, both on this
 * machine under different --host names), and tests/workloads/wl_vmsync_fake playing a guest
 * whose clock is CLOCK_MONOTONIC + K.  This machine has no /dev/kvm, so the hypercall is a
 * FAKE: the workload fires the USDT probe weft_fake:fake_kvm_hypercall(nr, id) where a guest
 * would make the hypercall, and `--hypercall-source` puts that probe in the host query in
 * place of kvm:kvm_hypercall (everything else is the product's query).  The guest side is
 * the real one: include/weft/vmsync.h's weft:vm_sync(id, before, after).
 *
 *   synced        N points: each side's query ran on its agent alone (the stderr of `weft vm
 *                 sync` names one agent each; the other agent never started it); the last
 *                 state joins exactly N points, refuses none, and its interval [lo, hi] is
 *                 exactly the intersection the test recomputes from the workload's own
 *                 before/after (its file) and the host's h of each id (the host query's
 *                 windows, followed with `weft submit --attach`); the offset is its middle,
 *                 the bound half its width; the true offset -K lies inside; `weft status
 *                 --format json` shows the pair's state on both queries.
 *   unsynced      the guest makes N readings, the fake hypercall never fires: the state is
 *                 "synced": false with a null offset (never 0), N guest readings waiting,
 *                 exit status 4; the text form says "unsynchronised".
 *   contradict    the last point reports readings a second late: refused and counted (1),
 *                 the other N - 1 make the offset (-K inside); text output.
 *   dirty         point N - 1's hypercall seen twice (a duplicate) and point N's readings
 *                 backwards (malformed): both counted, neither a point; N - 2 points.
 *   only_host     `weft submit --only-host vmguest`: of the two agents that could run the
 *                 query, only vmguest does; its N counts are exact, no row of vmhost.
 *   pair_refused  the aggregator refuses to pair with a host query that is not there, plans
 *                 of another shape, or a query that is a side of a pair already.
 *   restart       the aggregator restarts while a pair runs: both queries resume on their
 *                 agents alone, the pair is rebuilt from the retained windows (the same
 *                 points and interval in `weft status`), the follower ends with them.
 *
 * Nothing is asserted about timing: the workload runs after both agents run their queries,
 * and `weft vm sync` is stopped (Ctrl-C: it cancels both and waits for the last windows)
 * after the workload exited.  Needs root (eBPF); skipped otherwise.
 */
#include <errno.h>
#include <inttypes.h>
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

#include "compiler/compiler.h"
#include "compiler/plan.h"
#include "tests/cluster/cluster_util.h"
#include "tests/cluster/vmpair_util.h"
#include "tests/skip.h"
#include "vm/sync.h"

#define K_NS 7000000123LL
#define NPOINTS 40

static int group_setup(void **state)
{
	return vmpair_setup(state, "wl_vmsync");
}

/* The id after "weft vm sync: SIDE query " on p's stderr, and the agent it was sent to. */
static uint64_t side_id(struct cl_proc *p, const char *side, const char *agent)
{
	char needle[64], want[64], *err, *s;
	uint64_t id;

	snprintf(needle, sizeof(needle), "weft vm sync: %s query ", side);
	cl_expect_log(p, needle, CL_WAIT_MS);
	err = cl_slurp(p->err);
	s = strstr(err, needle);
	assert_non_null(s);
	id = strtoull(s + strlen(needle), NULL, 10);
	assert_true(id >= 1);
	/* limited to its agent: sent to exactly one, the one named */
	snprintf(want, sizeof(want), " sent to 1 agent (%s)", agent);
	if (!strstr(s, want))
		fail_msg("the %s query was not sent to %s alone: %s", side, agent, s);
	free(err);
	return id;
}

/*
 * `weft vm sync` of the fixture's pair (host side on vmhost, guest side on vmguest), logging
 * into LOG, with --every EVERY unless it is NULL, --format json or text; returns once each
 * agent runs its side, with the sides' query ids in *hid and *gid.
 */
static struct cl_proc *vs_spawn(struct fixture *f, const char *log, const char *every, bool json,
				uint64_t *hid, uint64_t *gid)
{
	struct cl *cl = &f->cl;
	char *argv[WR_MAX_ARGS], needle[64];
	struct cl_proc *vs;
	int n = 0;

	argv[n++] = getenv("WEFT_BIN");
	argv[n++] = (char *)"vm";
	argv[n++] = (char *)"sync";
	argv[n++] = (char *)"--to";
	argv[n++] = cl->endpoint;
	argv[n++] = (char *)"--server-key";
	argv[n++] = (char *)cl_pub(cl, cl->client_server);
	argv[n++] = (char *)"--key";
	argv[n++] = (char *)cl_path(cl, "me.key");
	argv[n++] = (char *)"--host-agent";
	argv[n++] = (char *)"vmhost";
	argv[n++] = (char *)"--guest-agent";
	argv[n++] = (char *)"vmguest";
	argv[n++] = (char *)"--guest-binary";
	argv[n++] = f->wl;
	argv[n++] = (char *)"--hypercall-source";
	argv[n++] = f->source;
	if (every) {
		argv[n++] = (char *)"--every";
		argv[n++] = (char *)every;
	}
	argv[n++] = (char *)"--format";
	argv[n++] = (char *)(json ? "json" : "text");
	argv[n] = NULL;
	assert_true(CL_WAIT(cl_agents_idle(cl, NULL, VMPAIR_HOSTS), CL_WAIT_MS));
	vs = cl_spawn(cl, log, NULL, argv);
	*hid = side_id(vs, "host", "vmhost");
	*gid = side_id(vs, "guest", "vmguest");
	snprintf(needle, sizeof(needle), "query %llu running", (unsigned long long)*hid);
	cl_expect_log(f->host, needle, CL_WAIT_MS);
	snprintf(needle, sizeof(needle), "query %llu running", (unsigned long long)*gid);
	cl_expect_log(f->guest, needle, CL_WAIT_MS);
	return vs;
}

/* The workload (NPOINTS points, clock offset K_NS, `mode`) run to its end, logging into LOG,
 * its points written to `points`. */
static void vs_workload(struct fixture *f, const char *log, const char *points, const char *mode)
{
	char n[16], k[32];
	struct cl_proc *wl;

	snprintf(n, sizeof(n), "%d", NPOINTS);
	snprintf(k, sizeof(k), "%lld", K_NS);
	wl = cl_spawn(&f->cl, log, NULL,
		      (char *const[]){ f->wl, n, k, (char *)points, (char *)mode, NULL });
	assert_int_equal(cl_wait_exit(wl, CL_WAIT_MS), 0);
}

/* Neither agent ran the other side's query: each side is limited to its own agent. */
static void vs_sides_apart(struct fixture *f, uint64_t hid, uint64_t gid)
{
	char needle[64];

	snprintf(needle, sizeof(needle), "query %llu running", (unsigned long long)hid);
	assert_false(cl_file_has(f->guest->err, needle));
	snprintf(needle, sizeof(needle), "query %llu running", (unsigned long long)gid);
	assert_false(cl_file_has(f->host->err, needle));
}

/* The JSON lines of the file at path (a `weft vm sync` stdout) into *j, empty before. */
static void vs_json_lines(const char *path, struct wr_json *j)
{
	struct wr_buf b = { 0 };
	char *out = cl_slurp(path);

	wr_buf_add(&b, out, strlen(out));
	free(out);
	wr_json_lines(&b, j);
	free(b.p);
}

struct run {
	uint64_t hid, gid;
	struct cl_proc *vs;
	int status;
	char points[PATH_MAX];
};

/* One `weft vm sync` over a run of the workload in `mode`; stopped with Ctrl-C after it. */
static void run_sync(struct fixture *f, struct run *r, const char *mode, bool json)
{
	struct cl *cl = &f->cl;
	char log[32], wlog[32];

	f->runs++;
	snprintf(log, sizeof(log), "vmsync-%d", f->runs);
	snprintf(wlog, sizeof(wlog), "wl-%d", f->runs);
	snprintf(r->points, sizeof(r->points), "%s/points-%d.txt", cl->dir, f->runs);
	r->vs = vs_spawn(f, log, "1s", json, &r->hid, &r->gid);
	vs_workload(f, wlog, r->points, mode);

	kill(r->vs->pid, SIGINT); /* cancels both queries, waits for their last windows */
	r->status = cl_wait_exit(r->vs, CL_WAIT_MS);
	if (r->status < 0)
		fail_msg("weft vm sync did not end: %s", cl_slurp(r->vs->err));
	/* the other agent never ran the other side's query */
	vs_sides_apart(f, r->hid, r->gid);
}

struct point {
	long long id, before, after;
	int honest;
};

/* The workload's points file: exactly NPOINTS lines, then "done NPOINTS". */
static void points_load(const char *path, struct point *pt)
{
	FILE *in = fopen(path, "r");
	long done = 0;

	assert_non_null(in);
	for (int i = 0; i < NPOINTS; i++) {
		assert_int_equal(fscanf(in, "%lld %lld %lld %d", &pt[i].id, &pt[i].before,
					&pt[i].after, &pt[i].honest),
				 4);
		assert_int_equal(pt[i].id, i + 1);
	}
	assert_int_equal(fscanf(in, " done %ld", &done), 1);
	assert_int_equal(done, NPOINTS);
	fclose(in);
}

/* The last vm_sync object `weft vm sync --format json` printed, with every line checked. */
static const struct wj *last_state(const struct wr_json *j, const struct run *r)
{
	const struct wj *last = NULL;
	bool hlast = false, glast = false;

	assert_true(j->n >= 2);
	for (size_t i = 0; i < j->n; i++) {
		const struct wj *w = j->v[i], *s = wj_get(w, "sync");
		long long q = wj_int_of(w, "query_id");
		const char *side = wj_str(wj_get(w, "side"));

		assert_true(wr_is_type(w, "vm_sync"));
		assert_non_null(s);
		assert_non_null(side);
		assert_true(q == (long long)r->hid || q == (long long)r->gid);
		assert_string_equal(side, q == (long long)r->hid ? "host" : "guest");
		assert_int_equal(wj_int_of(s, "host_query"), r->hid);
		assert_int_equal(wj_int_of(s, "guest_query"), r->gid);
		if (cl_json_true(w, "last"))
			*(q == (long long)r->hid ? &hlast : &glast) = true;
		last = s;
	}
	assert_true(hlast && glast);
	assert_true(cl_json_true(last, "host_done"));
	assert_true(cl_json_true(last, "guest_done"));
	return last;
}

static void test_synced(void **state)
{
	struct fixture *f = *state;
	struct cl *cl = &f->cl;
	struct point pt[NPOINTS];
	long long h[NPOINTS + 1];
	struct vm_sync_acc acc;
	int64_t off, err;
	struct run r;
	struct wr_json j = { 0 };
	struct cl_proc *att;
	struct cl_res hr;
	const struct wj *s;
	struct wj *st;

	cl->passed = false;
	run_sync(f, &r, "ok", true);
	assert_int_equal(r.status, 0);
	points_load(r.points, pt);

	/* the host's h of every id, from the host query's own windows */
	for (int i = 0; i <= NPOINTS; i++)
		h[i] = -1;
	att = cl_attach(cl, "attach-host", NULL, r.hid);
	cl_expect_end(att);
	cl_res_load(&hr, att->out);
	for (size_t w = 0; w < hr.nwin; w++)
		for (size_t k = 0; k < wr_nrows(hr.final[w]); k++) {
			const struct wj *row = wr_row(hr.final[w], k);
			long long id = wj_int_of(row, "id");

			assert_true(id >= 1 && id <= NPOINTS);
			assert_int_equal(h[id], -1); /* once */
			assert_int_equal(wj_int_of(row, "n"), 1);
			h[id] = wj_int_of(row, "host_ns");
		}
	cl_res_free(&hr);
	vm_sync_acc_init(&acc);
	for (int i = 0; i < NPOINTS; i++) {
		int64_t lo = 0, hi = 0;

		assert_true(h[i + 1] > 0);
		assert_int_equal(vm_sync_point(h[i + 1], pt[i].before, pt[i].after, &lo, &hi), 0);
		assert_true(vm_sync_acc_add(&acc, lo, hi));
	}
	vm_sync_middle(acc.lo, acc.hi, &off, &err);

	vs_json_lines(r.vs->out, &j);
	s = last_state(&j, &r);
	assert_true(cl_json_true(s, "synced"));
	assert_int_equal(wj_int_of(s, "points"), NPOINTS);
	assert_int_equal(wj_int_of(s, "refused"), 0);
	assert_int_equal(wj_int_of(s, "malformed"), 0);
	assert_int_equal(wj_int_of(s, "duplicates"), 0);
	assert_int_equal(wj_int_of(s, "guest_waiting"), 0);
	assert_int_equal(wj_int_of(s, "host_waiting"), 0);
	assert_int_equal(wj_int_of(s, "lo_ns"), acc.lo);
	assert_int_equal(wj_int_of(s, "hi_ns"), acc.hi);
	assert_int_equal(wj_int_of(s, "offset_ns"), off);
	assert_int_equal(wj_int_of(s, "error_ns"), err);
	/* the true offset: host = guest - K */
	assert_true(acc.lo <= -K_NS && -K_NS <= acc.hi);
	assert_true(off - err <= -K_NS && -K_NS <= off + err);
	wr_json_free(&j);

	/* weft status shows the pair on both queries */
	st = cl_status(cl, NULL);
	{
		const struct wj *qs = wj_get(st, "queries");
		int seen = 0;

		assert_non_null(qs);
		for (size_t i = 0; i < qs->nkids; i++) {
			const struct wj *q = &qs->kids[i], *v = wj_get(q, "vm_sync");
			long long id = wj_int_of(q, "id");

			if (id != (long long)r.hid && id != (long long)r.gid)
				continue;
			seen++;
			assert_non_null(v);
			assert_int_equal(wj_int_of(v, "points"), NPOINTS);
			assert_int_equal(wj_int_of(v, "lo_ns"), acc.lo);
			assert_int_equal(wj_int_of(v, "hi_ns"), acc.hi);
			assert_true(cl_json_has_str(q, "only_hosts",
						    id == (long long)r.hid ? "vmhost" : "vmguest"));
		}
		assert_int_equal(seen, 2);
	}
	wj_free(st);
	{
		/* and the text: the agents each side is limited to, the pair's state */
		struct wr_proc text;
		char want[96];

		assert_int_equal(cl_weft(&text, (char *)"status", (char *)"--to", cl->endpoint,
					 (char *)"--server-key",
					 (char *)cl_pub(cl, cl->client_server), (char *)"--key",
					 (char *)cl_path(cl, "me.key")),
				 0);
		snprintf(want, sizeof(want),
			 "vm sync (host query %llu, guest query %llu): host = guest - ",
			 (unsigned long long)r.hid, (unsigned long long)r.gid);
		assert_non_null(strstr(text.out.p, want));
		snprintf(want, sizeof(want), "(%d points; offset in [%lld, %lld])", NPOINTS,
			 (long long)acc.lo, (long long)acc.hi);
		assert_non_null(strstr(text.out.p, want));
		assert_non_null(strstr(text.out.p, "only on: vmhost\n"));
		assert_non_null(strstr(text.out.p, "only on: vmguest\n"));
		wr_free(&text);
	}
	cl->passed = true;
}

static void test_unsynced(void **state)
{
	struct fixture *f = *state;
	struct point pt[NPOINTS];
	struct run r;
	struct wr_json j = { 0 };
	const struct wj *s, *o;

	f->cl.passed = false;
	run_sync(f, &r, "guest-only", true);
	assert_int_equal(r.status, 4); /* ended unsynchronised */
	points_load(r.points, pt);
	vs_json_lines(r.vs->out, &j);
	s = last_state(&j, &r);
	assert_false(cl_json_true(s, "synced"));
	assert_int_equal(wj_int_of(s, "points"), 0);
	assert_int_equal(wj_int_of(s, "guest_waiting"), NPOINTS);
	assert_int_equal(wj_int_of(s, "host_waiting"), 0);
	o = wj_get(s, "offset_ns");
	assert_non_null(o);
	assert_int_equal(o->kind, WJ_NULL); /* no offset, never 0 */
	o = wj_get(s, "error_ns");
	assert_non_null(o);
	assert_int_equal(o->kind, WJ_NULL);
	/* every state of the run said so */
	for (size_t i = 0; i < j.n; i++)
		assert_false(cl_json_true(wj_get(j.v[i], "sync"), "synced"));
	wr_json_free(&j);
	f->cl.passed = true;
}

static void test_contradict(void **state)
{
	struct fixture *f = *state;
	struct point pt[NPOINTS];
	struct run r;
	char *out, *last, want[96];

	f->cl.passed = false;
	run_sync(f, &r, "contradict", false);
	assert_int_equal(r.status, 0);
	points_load(r.points, pt);
	assert_int_equal(pt[NPOINTS - 1].honest, 0);
	out = cl_slurp(r.vs->out);
	/* the last line is the last state (text) */
	last = out + strlen(out);
	assert_true(last > out && last[-1] == '\n');
	last[-1] = 0;
	last = strrchr(out, '\n');
	last = last ? last + 1 : out;
	snprintf(want, sizeof(want), "(%d points; offset in [", NPOINTS - 1);
	if (!strstr(last, "host = guest - ") || !strstr(last, want) ||
	    !strstr(last, "; 1 contradicting point refused") || !strstr(last, "(last)"))
		fail_msg("the last state is not %d points with 1 refused: %s", NPOINTS - 1, last);
	{
		/* -K within the interval printed: "offset in [LO, HI]" */
		long long lo, hi;
		const char *p = strstr(last, "offset in [");

		assert_non_null(p);
		assert_int_equal(sscanf(p, "offset in [%lld, %lld]", &lo, &hi), 2);
		assert_true(lo <= -K_NS && -K_NS <= hi);
	}
	free(out);
	f->cl.passed = true;
}

/* The last line of path holding needle, into line (false if none). */
static bool last_line_with(const char *path, const char *needle, char *line, size_t sz)
{
	char *s = cl_slurp(path), *p = s, *nl, *found = NULL;

	for (; (nl = strchr(p, '\n')); p = nl + 1) {
		*nl = 0;
		if (strstr(p, needle))
			found = p;
	}
	if (found)
		snprintf(line, sz, "%s", found);
	free(s);
	return found != NULL;
}

/*
 * An aggregator restart while a pair runs: both queries resume limited to their agents (the
 * store keeps only_hosts and the pairing), and the pair is rebuilt from the windows the
 * aggregator retains: `weft status` shows the same points and interval as before the
 * restart, and the follower, reconnected, ends with them.
 */
static void test_restart(void **state)
{
	struct fixture *f = *state;
	struct cl *cl = &f->cl;
	char want[64], before[4096], pts[PATH_MAX];
	struct cl_proc *vs;
	uint64_t hid, gid;
	struct wj *st, *line;
	const struct wj *s0;
	long long lo, hi;

	cl->passed = false;
	vs = vs_spawn(f, "vmsync-restart", NULL, true, &hid, &gid);
	snprintf(pts, sizeof(pts), "%s/points-restart.txt", cl->dir);
	vs_workload(f, "wl-restart", pts, "ok");
	snprintf(want, sizeof(want), "\"points\":%d,", NPOINTS);
	assert_true(CL_WAIT(last_line_with(vs->out, want, before, sizeof(before)), CL_WAIT_MS));
	line = wj_parse(before, strlen(before));
	assert_non_null(line);
	s0 = wj_get(line, "sync");
	lo = wj_int_of(s0, "lo_ns");
	hi = wj_int_of(s0, "hi_ns");
	assert_true(lo <= -K_NS && -K_NS <= hi);
	wj_free(line);

	assert_int_equal(cl_stop(f->agg, SIGTERM, CL_WAIT_MS), 0);
	f->agg = cl_aggregator(cl, "agg", NULL, "agg-restart", NULL);
	assert_true(CL_WAIT(cl_agent_runs(cl, NULL, "vmguest", gid) &&
				    cl_agent_runs(cl, NULL, "vmhost", hid),
			    CL_WAIT_MS));
	st = cl_status(cl, NULL);
	{
		const struct wj *qs = wj_get(st, "queries");
		int seen = 0;

		for (size_t i = 0; qs && i < qs->nkids; i++) {
			const struct wj *q = &qs->kids[i], *v = wj_get(q, "vm_sync");
			long long id = wj_int_of(q, "id");

			if (id != (long long)hid && id != (long long)gid)
				continue;
			seen++;
			assert_true(cl_json_has_str(q, "only_hosts",
						    id == (long long)hid ? "vmhost" : "vmguest"));
			assert_non_null(v);
			assert_int_equal(wj_int_of(v, "points"), NPOINTS);
			assert_int_equal(wj_int_of(v, "lo_ns"), lo);
			assert_int_equal(wj_int_of(v, "hi_ns"), hi);
		}
		assert_int_equal(seen, 2);
	}
	wj_free(st);
	kill(vs->pid, SIGINT);
	assert_int_equal(cl_wait_exit(vs, CL_WAIT_MS), 0);
	assert_true(last_line_with(vs->out, "\"guest_done\":true}", before, sizeof(before)));
	snprintf(want, sizeof(want), "\"points\":%d,", NPOINTS);
	assert_non_null(strstr(before, want));
	vs_sides_apart(f, hid, gid);
	cl->passed = true;
}

/* The subscribers of query id in `weft status`, -1 if it is not listed. */
static long long subscribers(struct cl *cl, uint64_t id)
{
	struct wj *st = cl_status(cl, NULL);
	const struct wj *qs = wj_get(st, "queries");
	long long n = -1;

	for (size_t i = 0; qs && i < qs->nkids; i++)
		if (wj_int_of(&qs->kids[i], "id") == (long long)id)
			n = wj_int_of(&qs->kids[i], "subscribers");
	wj_free(st);
	return n;
}

/*
 * Ctrl-C while the aggregator has forgotten the client (stopped for more than 3 heartbeats):
 * its QueryStops reach an aggregator that drops them unread (not welcomed) or are refused by
 * a session saying Hello again; the client asks again once welcomed back, and both queries
 * end with their last windows (before, they ran on and the client waited for ever).
 */
static void test_cancel_forgotten(void **state)
{
	struct fixture *f = *state;
	struct cl *cl = &f->cl;
	struct cl_proc *vs;
	uint64_t hid, gid;
	char needle[64];

	cl->passed = false;
	vs = vs_spawn(f, "vmsync-forgotten", NULL, true, &hid, &gid);
	kill(vs->pid, SIGSTOP);
	/* forgotten: with it, its subscriptions (other clients of the fixture expire too) */
	assert_true(CL_WAIT(subscribers(cl, hid) == 0 && subscribers(cl, gid) == 0, CL_WAIT_MS));
	kill(vs->pid, SIGINT); /* pending: read first thing when it goes on */
	kill(vs->pid, SIGCONT);
	if (cl_wait_exit(vs, CL_WAIT_MS) != 4) /* ended, unsynchronised: no workload ran */
		fail_msg("weft vm sync did not end as cancelled: %s", cl_slurp(vs->err));
	for (int k = 0; k < 2; k++) {
		snprintf(needle, sizeof(needle), "query %llu cancelled by",
			 (unsigned long long)(k ? gid : hid));
		assert_int_equal(cl_file_count(f->agg->err, needle), 1);
		snprintf(needle, sizeof(needle), "query %llu ended",
			 (unsigned long long)(k ? gid : hid));
		assert_int_equal(cl_file_count(f->agg->err, needle), 1);
	}
	assert_true(cl_file_has(vs->out, "\"last\":true"));
	cl->passed = true;
}

/* Neither a hypercall seen twice for one id nor readings that go backwards make a point. */
static void test_dirty(void **state)
{
	struct fixture *f = *state;
	struct point pt[NPOINTS];
	struct run r;
	struct wr_json j = { 0 };
	const struct wj *s;

	f->cl.passed = false;
	run_sync(f, &r, "dirty", true);
	assert_int_equal(r.status, 0);
	points_load(r.points, pt);
	assert_true(pt[NPOINTS - 1].after < pt[NPOINTS - 1].before);
	vs_json_lines(r.vs->out, &j);
	s = last_state(&j, &r);
	assert_true(cl_json_true(s, "synced"));
	assert_int_equal(wj_int_of(s, "points"), NPOINTS - 2);
	assert_int_equal(wj_int_of(s, "duplicates"), 1); /* id N - 1: n = 2 on the host */
	assert_int_equal(wj_int_of(s, "malformed"), 1); /* id N: after < before */
	assert_int_equal(wj_int_of(s, "refused"), 0);
	assert_int_equal(wj_int_of(s, "host_waiting"), 1); /* id N's hypercall, alone */
	assert_int_equal(wj_int_of(s, "guest_waiting"), 0);
	assert_true(wj_int_of(s, "lo_ns") <= -K_NS && -K_NS <= wj_int_of(s, "hi_ns"));
	wr_json_free(&j);
	f->cl.passed = true;
}

/* A query compiled here as `weft submit` compiles it: manifest and object. */
struct compiled {
	struct compile_result res;
	char *manifest;
	size_t len;
};

static void compile_here(const char *src, struct compiled *c)
{
	struct compile_opts o = { .sz = sizeof(o) };
	struct diag_list dl;
	FILE *m;

	memset(c, 0, sizeof(*c));
	diag_list_init(&dl, src, "query");
	if (compiler_run(src, &o, PASS_CLANG, &dl, &c->res)) {
		diag_print(&dl, stderr, false);
		fail_msg("does not compile: %s", src);
	}
	diag_list_free(&dl);
	m = open_memstream(&c->manifest, &c->len);
	assert_non_null(m);
	assert_int_equal(manifest_write(c->res.plan, m), 0);
	assert_int_equal(fclose(m), 0);
}

static void compiled_free(struct compiled *c)
{
	compile_result_free(&c->res);
	free(c->manifest);
}

/* Submits c (paired with host query pair, if not 0) as a raw client: the reply. */
static Weft__Envelope *raw_submit(struct cl_raw *raw, const char *src, struct compiled *c,
				  uint64_t pair)
{
	Weft__Envelope e, *m = NULL;
	Weft__Submit sub;

	weft__submit__init(&sub);
	sub.query = (char *)src;
	sub.manifest.data = (uint8_t *)c->manifest;
	sub.manifest.len = c->len;
	sub.object.data = c->res.object;
	sub.object.len = c->res.object_sz;
	sub.has_vm_sync_host = pair != 0;
	sub.vm_sync_host = pair;
	cl_raw_env(raw, &e, WEFT__ENVELOPE__BODY_SUBMIT, &sub);
	cl_raw_send(raw, &e);
	for (uint64_t end = wr_now_ms() + CL_WAIT_MS; !m && wr_now_ms() < end;) {
		m = cl_raw_recv(raw, 200);
		if (m && m->body_case != WEFT__ENVELOPE__BODY_ERROR &&
		    m->body_case != WEFT__ENVELOPE__BODY_STATUS_REPLY) {
			wire_free(m);
			m = NULL;
		}
	}
	assert_non_null(m);
	return m;
}

static void expect_refusal(Weft__Envelope *m, const char *want)
{
	if (m->body_case != WEFT__ENVELOPE__BODY_ERROR)
		fail_msg("a pair the aggregator should refuse was accepted (%s)", want);
	assert_true(m->error->has_in_reply_to);
	if (!strstr(m->error->message, want))
		fail_msg("the refusal '%s' does not say '%s'", m->error->message, want);
	wire_free(m);
}

static uint64_t expect_query(Weft__Envelope *m)
{
	uint64_t id;

	if (m->body_case != WEFT__ENVELOPE__BODY_STATUS_REPLY)
		fail_msg("refused: %s", m->error->message);
	assert_int_equal(m->status_reply->n_queries, 1);
	id = m->status_reply->queries[0]->query_id;
	wire_free(m);
	return id;
}

/*
 * What the aggregator refuses to pair (each an Error in reply to the Submit, no query made):
 * a host query that is not there, plans of another shape, a host query paired already.
 */
static void test_pair_refused(void **state)
{
	struct fixture *f = *state;
	struct cl *cl = &f->cl;
	char hq[PATH_MAX + 256], gq[PATH_MAX + 256], bad[PATH_MAX + 256];
	struct compiled h, g, b;
	struct cl_raw raw;
	uint64_t hid, gid, bid;

	cl->passed = false;
	snprintf(hq, sizeof(hq),
		 "from %s where arg0 = 0x77656674 group by arg1 as id select min(time) as host_ns, "
		 "count() as n every 1s",
		 f->source);
	snprintf(gq, sizeof(gq),
		 "from usdt:%s:weft:vm_sync group by arg0 as id select min(arg1) as before, "
		 "max(arg2) as after, count() as n every 1s",
		 f->wl);
	snprintf(bad, sizeof(bad),
		 "from usdt:%s:weft:vm_sync group by arg0 as id select count() as n every 1s",
		 f->wl);
	compile_here(hq, &h);
	compile_here(gq, &g);
	compile_here(bad, &b);
	cl_raw_open(&raw, cl, cl->endpoint, "me");
	cl_raw_hello(&raw, "client", "");

	expect_refusal(raw_submit(&raw, gq, &g, 999999),
		       "the VM synchronisation's host query 999999 is not here");
	hid = expect_query(raw_submit(&raw, hq, &h, 0));
	expect_refusal(raw_submit(&raw, bad, &b, hid), "a VM synchronisation pairs a host query");
	bid = expect_query(raw_submit(&raw, bad, &b, 0));
	expect_refusal(raw_submit(&raw, gq, &g, bid), "a VM synchronisation pairs a host query");
	gid = expect_query(raw_submit(&raw, gq, &g, hid)); /* the right shapes: paired */
	expect_refusal(raw_submit(&raw, gq, &g, hid), "is a side of another VM synchronisation");
	expect_refusal(raw_submit(&raw, gq, &g, gid), "is a side of another VM synchronisation");
	cl_raw_close(&raw);
	cl_cancel(cl, NULL, hid);
	cl_cancel(cl, NULL, bid);
	cl_cancel(cl, NULL, gid);
	compiled_free(&h);
	compiled_free(&g);
	compiled_free(&b);
	cl->passed = true;
}

/* `weft submit --only-host`: a query that only one agent runs, though both could. */
static void test_only_host(void **state)
{
	struct fixture *f = *state;
	struct cl *cl = &f->cl;
	char q[PATH_MAX + 128], needle[64], pts[PATH_MAX], n[16];
	const char *const guest_only[] = { "vmguest", NULL };
	struct cl_proc *sub, *wl;
	struct cl_res r;
	uint64_t id;

	cl->passed = false;
	snprintf(q, sizeof(q),
		 "from usdt:%s:weft:vm_sync group by host select count() as n every 1s", f->wl);
	assert_true(CL_WAIT(cl_agents_idle(cl, NULL, VMPAIR_HOSTS), CL_WAIT_MS));
	sub = cl_spawn(cl, "only-host", NULL,
		       (char *const[]){
			       getenv("WEFT_BIN"), (char *)"submit", (char *)"--to", cl->endpoint,
			       (char *)"--server-key", (char *)cl_pub(cl, cl->client_server),
			       (char *)"--key", (char *)cl_path(cl, "me.key"), (char *)"--format",
			       (char *)"json", (char *)"--only-host", (char *)"vmguest", q, NULL });
	cl_expect_log(sub, " runs on ", CL_WAIT_MS);
	{
		char *err = cl_slurp(sub->err), *s = strstr(err, "weft: query ");

		assert_non_null(s);
		id = strtoull(s + strlen("weft: query "), NULL, 10);
		assert_non_null(strstr(s, "sent to 1 agent (vmguest)"));
		free(err);
	}
	snprintf(needle, sizeof(needle), "query %llu running", (unsigned long long)id);
	cl_expect_log(f->guest, needle, CL_WAIT_MS);
	snprintf(pts, sizeof(pts), "%s/points-only.txt", cl->dir);
	snprintf(n, sizeof(n), "%d", NPOINTS);
	wl = cl_spawn(cl, "wl-only", NULL,
		      (char *const[]){ f->wl, n, (char *)"0", pts, (char *)"ok", NULL });
	assert_int_equal(cl_wait_exit(wl, CL_WAIT_MS), 0);
	assert_true(CL_WAIT(cl_file_sum(sub->out, "n", "vmguest", NULL) == NPOINTS, CL_WAIT_MS));
	cl_cancel(cl, NULL, id);
	cl_expect_end(sub);
	cl_res_load(&r, sub->out);
	assert_int_equal(cl_res_sum(&r, "n", "vmguest", NULL), NPOINTS);
	cl_res_rows_only(&r, guest_only);
	cl_res_free(&r);
	assert_false(cl_file_has(f->host->err, needle)); /* vmhost never started it */
	cl->passed = true;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_synced),	     cmocka_unit_test(test_unsynced),
		cmocka_unit_test(test_contradict),   cmocka_unit_test(test_dirty),
		cmocka_unit_test(test_only_host),    cmocka_unit_test(test_restart),
		cmocka_unit_test(test_pair_refused), cmocka_unit_test(test_cancel_forgotten),
	};

	if (!wr_ready())
		return WT_SKIP;
	return wt_status(cmocka_run_group_tests(tests, group_setup, group_teardown));
}
