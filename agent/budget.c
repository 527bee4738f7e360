// SPDX-License-Identifier: Apache-2.0
/*
 * The CPU budget of one query: what its probes cost the machine per window of about a second,
 * against a share of one CPU (the rules are in agent/agent.h, agent_query_budget()).
 *
 * The measure: the query's own cost meter (WEFT_COST_MAP, kernel/weft_abi.h), which every
 * generated program keeps: per program and CPU its runs, exactly, and the time of one run in
 * WEFT_COST_SAMPLE.  A window's run time is, per program, the time of its timed runs in the
 * window scaled to all its runs in the window (the mean of the runs timed so far when none was
 * timed in the window).  An object without the meter (compiled before it existed) is measured
 * by the kernel's BPF statistics instead, turned on by bpf_enable_stats(BPF_STATS_RUN_TIME)
 * for as long as the returned file descriptor is open (system-wide and reference-counted: it
 * adds two clock reads to every BPF program run on the host, which cost the kernel-edge
 * benchmark two points of redis's throughput, and ends when weft closes it or dies); each
 * program's bpf_prog_info carries run_time_ns and run_cnt.  User probes cost their traced thread far more than
 * their program (the trap into the kernel; ~5 us against ~150 ns on the development VM), and
 * the statistics do not see it, so each run of a uprobe, uretprobe or usdt program is charged
 * the cost of one such hit as measured on this machine at the first budget that needs it
 * (probes/uprobe_cost.c).  Without that measure (no uprobe PMU?) user probes are charged their
 * run time alone, and a warning says so.
 *
 * Ownership: the budget holds the statistics fd and its per-program counters; the object and
 * plan belong to the query.  Nothing here detaches: query.c does, on a STOPPED verdict.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "agent/budget.h"
#include "kernel/weft_abi.h"
#include "base/log.h"

/* A window ends at the first check at least this long after the previous one (checks come
 * about once a second, a little early or late). */
#define WINDOW_MIN_NS (AGENT_CPU_BUDGET_WINDOW_NS - AGENT_CPU_BUDGET_WINDOW_NS / 10)

struct budget_prog {
	int fd;
	enum probe_kind kind;
	int plan_idx;
	uint64_t run_ns, calls; /* totals at the last window's end */
	uint64_t sampled; /* the meter: runs timed, at the last window's end (run_ns: their time) */
};

struct agent_budget {
	const struct plan *plan;
	double pct;
	int cost_fd; /* the query's cost meter (WEFT_COST_MAP), or -1: the kernel's statistics */
	int ncpus; /* the meter's values per slot */
	struct weft_cost *cost_vals; /* ncpus of them, for reading one slot */
	int stats_fd; /* bpf_enable_stats(): -1 if the sysctl had them on already, or unused */
	struct probe_uprobe_cost ucost;
	bool need_ucost; /* user probes: measure the hit cost at the first window */
	bool have_ucost;
	struct budget_prog *progs;
	int nprogs;
	uint64_t last_ns; /* CLOCK_MONOTONIC at the last window's end */
	uint64_t windows;
	unsigned over;
};

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static bool stats_sysctl_on(void)
{
	FILE *f = fopen("/proc/sys/kernel/bpf_stats_enabled", "r");
	int v = 0;

	if (!f)
		return false;
	if (fscanf(f, "%d", &v) != 1)
		v = 0;
	fclose(f);
	return v == 1;
}

/* The meter's totals of slot idx of the map fd, summed over the CPUs (vals: ncpus of them). */
static int meter_read(int fd, int ncpus, struct weft_cost *vals, uint32_t idx,
		      struct agent_prog_cost *c)
{
	memset(c, 0, sizeof(*c));
	if (bpf_map_lookup_elem(fd, &idx, vals))
		return -errno;
	for (int i = 0; i < ncpus; i++) {
		c->ns += vals[i].ns;
		c->calls += vals[i].calls;
		c->sampled += vals[i].sampled;
	}
	return 0;
}

/* The object's meter, if it has one that fits plan programs of this build. */
static struct bpf_map *meter_find(struct bpf_object *obj, int nprogs)
{
	struct bpf_map *m = bpf_object__find_map_by_name(obj, WEFT_COST_MAP);

	if (!m || bpf_map__fd(m) < 0 || bpf_map__value_size(m) != sizeof(struct weft_cost) ||
	    bpf_map__max_entries(m) < (uint32_t)nprogs || libbpf_num_possible_cpus() <= 0)
		return NULL;
	return m;
}

int agent_cost_read(struct bpf_object *obj, int prog, struct agent_prog_cost *c)
{
	struct bpf_map *m = meter_find(obj, prog + 1);
	int ncpus = libbpf_num_possible_cpus(), rc;
	struct weft_cost *vals;

	memset(c, 0, sizeof(*c));
	if (prog < 0 || !m)
		return -ENOENT;
	vals = calloc((size_t)ncpus, sizeof(*vals));
	if (!vals)
		return -ENOMEM;
	rc = meter_read(bpf_map__fd(m), ncpus, vals, (uint32_t)prog, c);
	free(vals);
	return rc;
}

/* Totals of one program: from the meter (sampled set), or the kernel's statistics. */
static int prog_read(const struct agent_budget *b, const struct budget_prog *bp, uint64_t *run_ns,
		     uint64_t *calls, uint64_t *sampled)
{
	struct bpf_prog_info info;
	uint32_t len = sizeof(info);

	if (b->cost_fd >= 0) {
		struct agent_prog_cost c;
		int rc = meter_read(b->cost_fd, b->ncpus, b->cost_vals, (uint32_t)bp->plan_idx, &c);

		*run_ns = c.ns;
		*calls = c.calls;
		*sampled = c.sampled;
		return rc;
	}
	*sampled = 0;
	memset(&info, 0, sizeof(info));
	if (bpf_obj_get_info_by_fd(bp->fd, &info, &len))
		return -errno;
	*run_ns = info.run_time_ns;
	*calls = info.run_cnt;
	return 0;
}

static bool is_user_probe(enum probe_kind k)
{
	return k == PROBE_UPROBE || k == PROBE_URETPROBE || k == PROBE_USDT;
}

struct agent_budget *agent_budget_new(struct bpf_object *obj, const struct plan *p, double pct,
				      char *why, size_t whysz)
{
	struct agent_budget *b = calloc(1, sizeof(*b));
	struct bpf_map *meter;
	bool user = false;
	int err = 0;

	if (!b) {
		snprintf(why, whysz, "out of memory");
		errno = ENOMEM;
		return NULL;
	}
	b->plan = p;
	b->pct = pct;
	b->cost_fd = -1;
	b->stats_fd = -1;
	b->progs = calloc((size_t)(p->nprogs ? p->nprogs : 1), sizeof(*b->progs));
	if (!b->progs) {
		err = -ENOMEM;
		snprintf(why, whysz, "out of memory");
		goto out_free;
	}
	for (int i = 0; i < p->nprogs; i++) {
		struct bpf_program *prog = bpf_object__find_program_by_name(obj, p->progs[i].name);
		struct budget_prog *bp = &b->progs[b->nprogs];

		if (!prog || bpf_program__fd(prog) < 0)
			continue;
		bp->fd = bpf_program__fd(prog);
		bp->kind = p->progs[i].kind;
		bp->plan_idx = i;
		user |= is_user_probe(bp->kind);
		b->nprogs++;
	}
	meter = meter_find(obj, p->nprogs);
	if (meter) {
		b->ncpus = libbpf_num_possible_cpus();
		b->cost_vals = calloc((size_t)b->ncpus, sizeof(*b->cost_vals));
		if (!b->cost_vals) {
			err = -ENOMEM;
			snprintf(why, whysz, "out of memory");
			goto out_free;
		}
		b->cost_fd = bpf_map__fd(meter);
	} else {
		b->stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
	}
	if (b->cost_fd < 0 && b->stats_fd < 0) {
		err = b->stats_fd;
		if (!stats_sysctl_on()) {
			snprintf(why, whysz,
				 "the kernel's BPF run-time statistics cannot be turned on (%s)",
				 strerror(-err));
			goto out_free;
		}
		err = 0; /* kernel.bpf_stats_enabled=1: they are on anyway */
	}
	b->need_ucost = user;
	for (int i = 0; i < b->nprogs; i++) {
		err = prog_read(b, &b->progs[i], &b->progs[i].run_ns, &b->progs[i].calls,
				&b->progs[i].sampled);
		if (err) {
			snprintf(why, whysz, "cannot read a program's statistics (%s)",
				 strerror(-err));
			goto out_free;
		}
	}
	b->last_ns = mono_ns();
	return b;
out_free:
	agent_budget_free(b);
	errno = err < 0 ? -err : EINVAL;
	return NULL;
}

void agent_budget_free(struct agent_budget *b)
{
	if (!b)
		return;
	if (b->stats_fd >= 0)
		close(b->stats_fd);
	free(b->cost_vals);
	free(b->progs);
	free(b);
}

/* Once, at the first window rather than at start: the measure takes 0.1-0.2 s (it closes
 * two uprobes), which should not delay the first events. */
static void ucost_measure(struct agent_budget *b)
{
	int rc;

	b->need_ucost = false;
	rc = probe_uprobe_cost(&b->ucost);
	b->have_ucost = rc == 0;
	if (rc)
		log_warn("agent: cannot measure what a uprobe hit costs here (%s): the CPU budget "
			 "counts the BPF run time of user probes only",
			 strerror(-rc));
	else
		log_debug("agent: a uprobe hit costs %llu ns here, a uretprobe %llu ns",
			  (unsigned long long)b->ucost.entry_ns,
			  (unsigned long long)b->ucost.ret_ns);
}

static uint64_t trap_cost(const struct agent_budget *b, enum probe_kind k, uint64_t calls)
{
	if (!b->have_ucost || !is_user_probe(k))
		return 0;
	return calls * (k == PROBE_URETPROBE ? b->ucost.ret_ns : b->ucost.entry_ns);
}

static int prog_cmp(const void *x, const void *y)
{
	const struct agent_budget_prog *a = x, *c = y;

	if (a->cost_ns != c->cost_ns)
		return a->cost_ns > c->cost_ns ? -1 : 1;
	return strcmp(a->prog, c->prog);
}

static void fmt_ns(char *buf, size_t sz, double ns)
{
	if (ns >= 1e9)
		snprintf(buf, sz, "%.2f s", ns / 1e9);
	else if (ns >= 1e6)
		snprintf(buf, sz, "%.1f ms", ns / 1e6);
	else if (ns >= 1e3)
		snprintf(buf, sz, "%.1f us", ns / 1e3);
	else
		snprintf(buf, sz, "%.0f ns", ns);
}

/* "wp0 uprobe:/usr/lib/x86_64-linux-gnu/libc.so.6:malloc: 212.4 ms, 1064823 calls,
 * 199 ns/call (BPF 164 ns, trap ~5.2 us)" */
static size_t fmt_prog(char *buf, size_t sz, const struct agent_budget_prog *h)
{
	char cost[32], per[32], run[32], trap[32], more[48] = "";

	fmt_ns(cost, sizeof(cost), (double)h->cost_ns);
	fmt_ns(per, sizeof(per), h->calls ? (double)h->cost_ns / (double)h->calls : 0);
	fmt_ns(run, sizeof(run), h->calls ? (double)h->run_ns / (double)h->calls : 0);
	fmt_ns(trap, sizeof(trap), h->calls ? (double)h->trap_ns / (double)h->calls : 0);
	if (h->sites > 1)
		snprintf(more, sizeof(more), " (and %d more sites)", h->sites - 1);
	if (h->trap_ns)
		return (size_t)snprintf(buf, sz,
					"%s %s%s: %s, %llu calls, %s/call (BPF %s + probe hit %s)",
					h->prog, h->probe, more, cost, (unsigned long long)h->calls,
					per, run, trap);
	return (size_t)snprintf(buf, sz, "%s %s%s: %s, %llu calls, %s/call", h->prog, h->probe,
				more, cost, (unsigned long long)h->calls, per);
}

static void report_text(struct agent_budget_report *r)
{
	char used[32], budget[32];
	size_t off;

	fmt_ns(used, sizeof(used), (double)r->cost_ns);
	fmt_ns(budget, sizeof(budget), (double)r->budget_ns);
	if (r->verdict == AGENT_BUDGET_STOPPED)
		off = (size_t)snprintf(
			r->text, sizeof(r->text),
			"query stopped by its CPU budget: its probes used %s in %.2f s "
			"(%.2f%% of one CPU; budget %g%%, %s), over the budget %u "
			"windows in a row; probes detached; hottest: ",
			used, (double)r->window_ns / 1e9,
			100.0 * (double)r->cost_ns / (double)r->window_ns, r->budget_pct, budget,
			r->over);
	else
		off = (size_t)snprintf(
			r->text, sizeof(r->text),
			"query over its CPU budget: its probes used %s in %.2f s "
			"(%.2f%% of one CPU; budget %g%%, %s), window %u of %u before "
			"it is stopped; hottest: ",
			used, (double)r->window_ns / 1e9,
			100.0 * (double)r->cost_ns / (double)r->window_ns, r->budget_pct, budget,
			r->over, r->limit);
	for (int i = 0; i < r->nhot && off < sizeof(r->text); i++) {
		if (i)
			off += (size_t)snprintf(r->text + off, sizeof(r->text) - off, "; ");
		if (off < sizeof(r->text))
			off += fmt_prog(r->text + off, sizeof(r->text) - off, &r->hot[i]);
	}
}

/*
 * A window's run time from the meter: the time of the runs timed in the window (ns, sampled of
 * them) for all its runs (calls); without a timed run in the window, the mean of all runs timed
 * so far (total_ns over total_sampled).  Exact when every run was timed.
 */
static uint64_t meter_estimate(uint64_t ns, uint64_t calls, uint64_t sampled, uint64_t total_ns,
			       uint64_t total_sampled)
{
	if (sampled)
		return (uint64_t)((double)ns * (double)calls / (double)sampled);
	if (total_sampled)
		return (uint64_t)((double)total_ns * (double)calls / (double)total_sampled);
	return 0;
}

int agent_budget_check(struct agent_budget *b, uint64_t now_ns, struct agent_budget_report *r)
{
	struct agent_budget_prog all[PLAN_MAX_PROGS];
	uint64_t window;
	int n = 0;

	if (now_ns - b->last_ns < WINDOW_MIN_NS)
		return 0;
	if (b->need_ucost)
		ucost_measure(b);
	window = now_ns - b->last_ns;
	memset(r, 0, sizeof(*r));
	for (int i = 0; i < b->nprogs && n < PLAN_MAX_PROGS; i++) {
		struct budget_prog *bp = &b->progs[i];
		const struct plan_prog *pp = &b->plan->progs[bp->plan_idx];
		struct agent_budget_prog *h = &all[n++];
		uint64_t run = 0, calls = 0, sampled = 0;
		int rc = prog_read(b, bp, &run, &calls, &sampled);

		if (rc)
			return rc;
		memset(h, 0, sizeof(*h));
		snprintf(h->prog, sizeof(h->prog), "%s", pp->name);
		if (pp->first_attach >= 0 && pp->first_attach < b->plan->nattach)
			snprintf(h->probe, sizeof(h->probe), "%s",
				 b->plan->attach[pp->first_attach].target.name);
		for (int k = 0; k < b->plan->nattach; k++)
			h->sites += b->plan->attach[k].prog == bp->plan_idx;
		h->run_ns = run >= bp->run_ns ? run - bp->run_ns : 0;
		h->calls = calls >= bp->calls ? calls - bp->calls : 0;
		if (b->cost_fd >= 0)
			h->run_ns = meter_estimate(
				h->run_ns, h->calls,
				sampled >= bp->sampled ? sampled - bp->sampled : 0, run, sampled);
		bp->sampled = sampled;
		h->trap_ns = trap_cost(b, bp->kind, h->calls);
		h->cost_ns = h->run_ns + h->trap_ns;
		bp->run_ns = run;
		bp->calls = calls;
		r->run_ns += h->run_ns;
		r->trap_ns += h->trap_ns;
		r->calls += h->calls;
	}
	b->last_ns = now_ns;
	r->index = b->windows++;
	r->budget_pct = b->pct;
	r->window_ns = window;
	r->budget_ns = (uint64_t)((double)window * b->pct / 100.0);
	r->cost_ns = r->run_ns + r->trap_ns;
	r->limit = AGENT_CPU_BUDGET_WINDOWS;
	qsort(all, (size_t)n, sizeof(all[0]), prog_cmp);
	r->nhot = n < AGENT_CPU_BUDGET_HOT ? n : AGENT_CPU_BUDGET_HOT;
	memcpy(r->hot, all, (size_t)r->nhot * sizeof(all[0]));
	if (r->cost_ns > r->budget_ns) {
		b->over++;
		r->verdict = b->over >= AGENT_CPU_BUDGET_WINDOWS ? AGENT_BUDGET_STOPPED :
								   AGENT_BUDGET_OVER;
	} else {
		b->over = 0;
		r->verdict = AGENT_BUDGET_UNDER;
	}
	r->over = b->over;
	report_text(r);
	return 1;
}
