// SPDX-License-Identifier: Apache-2.0
/*
 * The CPU budget of one query: what its probes cost the machine per window of about a second,
 * against a share of one CPU (the rules are in agent/agent.h, agent_query_budget()).
 *
 * The measure: the kernel's BPF statistics, turned on by bpf_enable_stats(BPF_STATS_RUN_TIME)
 * for as long as the returned file descriptor is open (system-wide and reference-counted: it
 * adds two clock reads to every BPF program run on the host, and ends when weft closes it or
 * dies).  Each program's bpf_prog_info carries run_time_ns and run_cnt; a window's cost is the
 * difference from the previous window.  User probes cost their traced thread far more than
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
#include "base/log.h"

/* A window ends at the first check at least this long after the previous one (checks come
 * about once a second, a little early or late). */
#define WINDOW_MIN_NS (AGENT_CPU_BUDGET_WINDOW_NS - AGENT_CPU_BUDGET_WINDOW_NS / 10)

struct budget_prog {
	int fd;
	enum probe_kind kind;
	int plan_idx;
	uint64_t run_ns, calls; /* totals at the last window's end */
};

struct agent_budget {
	const struct plan *plan;
	double pct;
	int stats_fd; /* bpf_enable_stats(): -1 if the sysctl had them on already */
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

static int prog_read(const struct budget_prog *bp, uint64_t *run_ns, uint64_t *calls)
{
	struct bpf_prog_info info;
	uint32_t len = sizeof(info);

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
	bool user = false;
	int err = 0;

	if (!b) {
		snprintf(why, whysz, "out of memory");
		errno = ENOMEM;
		return NULL;
	}
	b->plan = p;
	b->pct = pct;
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
	b->stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
	if (b->stats_fd < 0) {
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
		err = prog_read(&b->progs[i], &b->progs[i].run_ns, &b->progs[i].calls);
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
		uint64_t run = 0, calls = 0;
		int rc = prog_read(bp, &run, &calls);

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
