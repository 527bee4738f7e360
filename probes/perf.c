// SPDX-License-Identifier: Apache-2.0
/*
 * The perf event providers: `software:EVENT[:PERIOD]` and `hardware:EVENT[:PERIOD]`, a BPF
 * program run every PERIOD occurrences of a kernel software event (page faults, context
 * switches, CPU migrations, the CPU clock) or of a hardware counter of the CPU's PMU
 * (cycles, instructions, cache and branch misses), with bpftrace's event names, aliases and
 * default periods.
 *
 * How it works: resolving maps the name or alias to the canonical name, which the target
 * keeps in `event` (the manifest carries it), and the period (events per sample, default the
 * event's own) in `period_ns`; the agent maps the name back to the perf type and config when
 * it attaches, so a manifest never carries raw perf numbers.  Attaching opens one sampling
 * event per online CPU for every process (pid -1, as profile does: -p is the program's
 * filter), the program linked to each; the links own the events.
 *
 * Limits: the period has a floor per event that keeps sampling cheap: the clock events count
 * nanoseconds (at least 100000, 10 kHz per CPU, profile's bound), hardware counters run at
 * billions a second (at least 10000), the rest (faults, switches, migrations: bounded by
 * their own rate) may sample every event.  `hardware:` needs a PMU the kernel can count
 * with; a virtual machine often has none, and resolving then fails with a clear
 * PERR_FEATURE (checked once by opening a disabled cycles counter).  bpftrace's dummy and
 * bpf-output events never sample anything and are not offered.
 */
#include <ctype.h>
#include <errno.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <bpf/libbpf.h>
#include "probes/probes.h"
#include "probes/provider.h"

#define PERF_MAX_PERIOD 1000000000000ULL /* 1e12: beyond it a sample is never taken */

struct perf_ev {
	const char *name; /* canonical, as bpftrace writes it */
	const char *alias; /* or NULL */
	uint32_t config; /* PERF_COUNT_SW_* / PERF_COUNT_HW_* */
	uint64_t period; /* default events per sample (bpftrace's) */
	uint64_t min_period; /* the floor that keeps sampling cheap */
};

static const struct perf_ev sw_events[] = {
	{ "alignment-faults", NULL, PERF_COUNT_SW_ALIGNMENT_FAULTS, 1, 1 },
	{ "context-switches", "cs", PERF_COUNT_SW_CONTEXT_SWITCHES, 1000, 1 },
	{ "cpu-clock", "cpu", PERF_COUNT_SW_CPU_CLOCK, 1000000, 100000 },
	{ "cpu-migrations", NULL, PERF_COUNT_SW_CPU_MIGRATIONS, 1, 1 },
	{ "emulation-faults", NULL, PERF_COUNT_SW_EMULATION_FAULTS, 1, 1 },
	{ "major-faults", NULL, PERF_COUNT_SW_PAGE_FAULTS_MAJ, 1, 1 },
	{ "minor-faults", NULL, PERF_COUNT_SW_PAGE_FAULTS_MIN, 100, 1 },
	{ "page-faults", "faults", PERF_COUNT_SW_PAGE_FAULTS, 100, 1 },
	{ "task-clock", NULL, PERF_COUNT_SW_TASK_CLOCK, 1000000, 100000 },
	{ NULL, NULL, 0, 0, 0 },
};

static const struct perf_ev hw_events[] = {
	{ "backend-stalls", NULL, PERF_COUNT_HW_STALLED_CYCLES_BACKEND, 1000000, 10000 },
	{ "branch-instructions", "branches", PERF_COUNT_HW_BRANCH_INSTRUCTIONS, 100000, 10000 },
	{ "branch-misses", NULL, PERF_COUNT_HW_BRANCH_MISSES, 100000, 10000 },
	{ "bus-cycles", NULL, PERF_COUNT_HW_BUS_CYCLES, 100000, 10000 },
	{ "cache-misses", NULL, PERF_COUNT_HW_CACHE_MISSES, 1000000, 10000 },
	{ "cache-references", NULL, PERF_COUNT_HW_CACHE_REFERENCES, 1000000, 10000 },
	{ "cpu-cycles", "cycles", PERF_COUNT_HW_CPU_CYCLES, 1000000, 10000 },
	{ "frontend-stalls", NULL, PERF_COUNT_HW_STALLED_CYCLES_FRONTEND, 1000000, 10000 },
	{ "instructions", NULL, PERF_COUNT_HW_INSTRUCTIONS, 1000000, 10000 },
	{ "ref-cycles", NULL, PERF_COUNT_HW_REF_CPU_CYCLES, 1000000, 10000 },
	{ NULL, NULL, 0, 0, 0 },
};

static const struct perf_ev *perf_table(enum probe_kind kind)
{
	return kind == PROBE_HARDWARE ? hw_events : sw_events;
}

static const struct perf_ev *perf_find(enum probe_kind kind, const char *name)
{
	for (const struct perf_ev *e = perf_table(kind); e->name; e++)
		if (strcmp(e->name, name) == 0 || (e->alias && strcmp(e->alias, name) == 0))
			return e;
	return NULL;
}

/* A period: digits, or bpftrace's "1e6" form.  false when malformed or above the bound. */
static bool period_parse(const char *s, uint64_t *out)
{
	uint64_t v = 0;
	const char *p = s;

	if (!isdigit((unsigned char)*p))
		return false;
	for (; isdigit((unsigned char)*p); p++) {
		v = v * 10 + (uint64_t)(*p - '0');
		if (v > PERF_MAX_PERIOD)
			return false;
	}
	if (*p == 'e' || *p == 'E') {
		int x = 0;

		if (!isdigit((unsigned char)p[1]))
			return false;
		for (p++; isdigit((unsigned char)*p); p++) {
			x = x * 10 + (*p - '0');
			if (x > 12)
				return false;
		}
		while (x-- > 0) {
			v *= 10;
			if (v > PERF_MAX_PERIOD)
				return false;
		}
	}
	if (*p)
		return false;
	*out = v;
	return true;
}

/* Whether this machine's kernel can count hardware events (a PMU), checked once. */
static int hw_pmu_errno = -1;

static int hw_pmu_check(void)
{
	struct perf_event_attr attr;
	int fd;

	if (hw_pmu_errno >= 0)
		return hw_pmu_errno;
	memset(&attr, 0, sizeof(attr));
	attr.size = sizeof(attr);
	attr.type = PERF_TYPE_HARDWARE;
	attr.config = PERF_COUNT_HW_CPU_CYCLES;
	attr.disabled = 1;
	attr.sample_period = 1000000;
	fd = (int)syscall(__NR_perf_event_open, &attr, -1, 0, -1, PERF_FLAG_FD_CLOEXEC);
	if (fd >= 0) {
		close(fd);
		hw_pmu_errno = 0;
	} else {
		hw_pmu_errno = errno ? errno : EIO;
	}
	return hw_pmu_errno;
}

static int perf_names_fix(enum probe_kind kind, const char *word, struct probe_err *err)
{
	const char *cands[32];
	int n = 0;

	for (const struct perf_ev *e = perf_table(kind); e->name && n < 30; e++) {
		cands[n++] = e->name;
		if (e->alias)
			cands[n++] = e->alias;
	}
	perr_fix_near(err, word, cands, n, kind == PROBE_HARDWARE ? "hardware:" : "software:");
	if (!err->fix[0]) {
		size_t len = 0;

		len += (size_t)snprintf(err->fix, sizeof(err->fix), "events: ");
		for (const struct perf_ev *e = perf_table(kind); e->name; e++)
			if (len < sizeof(err->fix))
				len += (size_t)snprintf(
					err->fix + len, sizeof(err->fix) - len, "%s%s%s%s%s",
					e == perf_table(kind) ? "" : ", ", e->name,
					e->alias ? " (" : "", e->alias ? e->alias : "",
					e->alias ? ")" : "");
	}
	return -1;
}

static int perf_resolve(enum probe_kind kind, const char *const *parts, int nparts, bool has_offset,
			const struct probe_ctx *ctx, struct probe_set *set, struct probe_err *err)
{
	const char *prov = kind == PROBE_HARDWARE ? "hardware" : "software";
	const struct perf_ev *ev;
	struct probe_target *t;
	uint64_t period;
	int e;

	if (nparts < 1 || nparts > 2)
		return perr_set(err, PERR_SYNTAX, NULL, "write %s:EVENT or %s:EVENT:PERIOD", prov,
				prov);
	if (has_offset)
		return perr_set(err, PERR_OFFSET, NULL, "a perf event takes no +offset");
	if (probe_has_wildcard(parts[0]) || (nparts == 2 && probe_has_wildcard(parts[1])))
		return perr_set(err, PERR_SYNTAX, NULL, "a %s event cannot be a pattern", prov);
	ev = perf_find(kind, parts[0]);
	if (!ev) {
		perr_set(err, PERR_UNKNOWN, NULL, "unknown %s event '%s'", prov, parts[0]);
		return perf_names_fix(kind, parts[0], err);
	}
	period = ev->period;
	if (nparts == 2 && !period_parse(parts[1], &period))
		return perr_set(err, PERR_SYNTAX, "the period counts events: e.g. 1000 or 1e6",
				"'%s' is not a period (a whole number of events up to 1e12)",
				parts[1]);
	if (period < ev->min_period) {
		char fix[96];

		snprintf(fix, sizeof(fix), "use a period of at least %llu for %s",
			 (unsigned long long)ev->min_period, ev->name);
		return perr_set(err, PERR_RATE, fix,
				"period %llu of %s:%s would sample too often (at least %llu)",
				(unsigned long long)period, prov, ev->name,
				(unsigned long long)ev->min_period);
	}
	if (kind == PROBE_HARDWARE && (e = hw_pmu_check()) != 0)
		return perr_set(err, PERR_FEATURE,
				"this machine exposes no hardware counters (a virtual machine "
				"without a virtual PMU?); software:cpu-clock samples by time",
				"hardware events are not available here: perf_event_open of "
				"cpu-cycles failed (%s)",
				strerror(e));
	if (probe_set_push(set, &t))
		return perr_set(err, PERR_SYSTEM, NULL, "out of memory");
	t->kind = kind;
	snprintf(t->event, sizeof(t->event), "%s", ev->name);
	t->period_ns = period;
	snprintf(t->name, sizeof(t->name), "%s:%s:%llu", prov, ev->name,
		 (unsigned long long)period);
	t->pid = ctx ? ctx->pid : 0;
	return 0;
}

static int software_resolve(const char *const *parts, int nparts, uint64_t offset, bool has_offset,
			    const struct probe_ctx *ctx, struct probe_set *set,
			    struct probe_err *err)
{
	(void)offset;
	return perf_resolve(PROBE_SOFTWARE, parts, nparts, has_offset, ctx, set, err);
}

static int hardware_resolve(const char *const *parts, int nparts, uint64_t offset, bool has_offset,
			    const struct probe_ctx *ctx, struct probe_set *set,
			    struct probe_err *err)
{
	(void)offset;
	return perf_resolve(PROBE_HARDWARE, parts, nparts, has_offset, ctx, set, err);
}

static int perf_list(enum probe_kind kind, const char *const *parts, int nparts, probe_list_cb cb,
		     void *arg)
{
	const char *prov = kind == PROBE_HARDWARE ? "hardware" : "software";

	for (const struct perf_ev *e = perf_table(kind); e->name; e++) {
		struct probe_target t;
		int rc;

		if (nparts >= 1 && parts && parts[0] && !probe_glob_match(parts[0], e->name))
			continue;
		memset(&t, 0, sizeof(t));
		t.kind = kind;
		snprintf(t.event, sizeof(t.event), "%s", e->name);
		t.period_ns = e->period;
		snprintf(t.name, sizeof(t.name), "%s:%s", prov, e->name);
		rc = cb(&t, arg);
		if (rc)
			return rc;
	}
	return 0;
}

static int software_list(const char *const *parts, int nparts, const struct probe_ctx *ctx,
			 probe_list_cb cb, void *arg, struct probe_err *err)
{
	(void)ctx;
	(void)err;
	return perf_list(PROBE_SOFTWARE, parts, nparts, cb, arg);
}

static int hardware_list(const char *const *parts, int nparts, const struct probe_ctx *ctx,
			 probe_list_cb cb, void *arg, struct probe_err *err)
{
	(void)ctx;
	(void)err;
	return perf_list(PROBE_HARDWARE, parts, nparts, cb, arg);
}

/* One sampling event of t on cpu for every process, prog linked to it (the link owns it). */
static int perf_attach(struct bpf_program *prog, const struct probe_target *t, uint64_t cookie,
		       pid_t pid, struct probe_links *links, struct probe_err *err)
{
	const struct perf_ev *ev = perf_find(t->kind, t->event);
	struct perf_event_attr attr;

	/* a manifest's target is checked again: the name, and the period's bounds */
	if (!ev || strcmp(ev->name, t->event) != 0)
		return perr_set(err, PERR_UNKNOWN, NULL, "%s: unknown perf event '%s'", t->name,
				t->event);
	if (t->period_ns < ev->min_period || t->period_ns > PERF_MAX_PERIOD)
		return perr_set(err, PERR_RATE, NULL, "%s: period out of range", t->name);
	memset(&attr, 0, sizeof(attr));
	attr.size = sizeof(attr);
	attr.type = t->kind == PROBE_HARDWARE ? PERF_TYPE_HARDWARE : PERF_TYPE_SOFTWARE;
	attr.config = ev->config;
	attr.sample_period = t->period_ns;
	attr.disabled = 1;
	return probe_perf_attach_cpus(prog, t, &attr, false, cookie, pid, links, err);
}

const struct probe_provider provider_software = {
	.kind = PROBE_SOFTWARE,
	.name = "software",
	.alias = NULL,
	.min_parts = 1,
	.max_parts = 2,
	.usage = "software:EVENT[:PERIOD] (software:page-faults:1, software:cs)",
	.resolve = software_resolve,
	.list = software_list,
	.available = probe_perf_available,
	.attach = perf_attach,
};

const struct probe_provider provider_hardware = {
	.kind = PROBE_HARDWARE,
	.name = "hardware",
	.alias = NULL,
	.min_parts = 1,
	.max_parts = 2,
	.usage = "hardware:EVENT[:PERIOD] (hardware:cycles:1000000)",
	.resolve = hardware_resolve,
	.list = hardware_list,
	.available = probe_perf_available,
	.attach = perf_attach,
};
