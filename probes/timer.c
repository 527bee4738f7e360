// SPDX-License-Identifier: Apache-2.0
/*
 * The timer providers: `profile:RATE` samples every CPU (RATE "99hz", "99", or a period
 * "10ms"), `interval:PERIOD` fires on one CPU ("1s", "100ms", or a rate "10hz").  The bounds
 * keep tracing cheap: at most 10 kHz per CPU for profile, at most 1 kHz (and at least once an
 * hour) for interval.
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
#include "base/units.h"
#include "probes/probes.h"
#include "probes/provider.h"

#define NSEC_PER_SEC 1000000000ULL
#define PROFILE_HZ_MAX 10000
#define INTERVAL_MIN_NS 1000000ULL /* 1ms */
#define INTERVAL_MAX_NS (3600ULL * NSEC_PER_SEC) /* 1h */

/* "99hz" or "99" -> hz (true, *is_rate); a duration -> ns (true, !*is_rate). */
static bool rate_parse(const char *s, uint64_t *v, bool *is_rate)
{
	char *end;
	unsigned long long n;

	if (!s || !isdigit((unsigned char)*s))
		return false;
	errno = 0;
	n = strtoull(s, &end, 10);
	if (errno)
		return false;
	if (*end == '\0' || strcasecmp(end, "hz") == 0) {
		*v = n;
		*is_rate = true;
		return true;
	}
	*is_rate = false;
	return units_duration_parse(s, 0, v) == 0; /* "10ms": base/units.h */
}

/* Writes a period in the largest unit that states it exactly: "100ms", "1s", "2m". */
static void period_format(uint64_t ns, char *out, size_t outsz)
{
	static const struct {
		const char *sfx;
		uint64_t mul;
	} units[] = {
		{ "h", 3600 * NSEC_PER_SEC },
		{ "m", 60 * NSEC_PER_SEC },
		{ "s", NSEC_PER_SEC },
		{ "ms", 1000000 },
		{ "us", 1000 },
		{ "ns", 1 },
	};

	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (ns % units[i].mul == 0) {
			snprintf(out, outsz, "%llu%s", (unsigned long long)(ns / units[i].mul),
				 units[i].sfx);
			return;
		}
	}
}

static int timer_target_add(struct probe_set *set, enum probe_kind kind, uint64_t hz,
			    uint64_t period_ns, const struct probe_ctx *ctx, struct probe_err *err)
{
	struct probe_target *t;
	char buf[32];

	if (probe_set_push(set, &t))
		return perr_set(err, PERR_SYSTEM, NULL, "out of memory");
	t->kind = kind;
	if (kind == PROBE_PROFILE) {
		snprintf(t->name, sizeof(t->name), "profile:%lluhz", (unsigned long long)hz);
		t->hz = hz;
	} else {
		period_format(period_ns, buf, sizeof(buf));
		snprintf(t->name, sizeof(t->name), "interval:%s", buf);
		t->period_ns = period_ns;
	}
	t->pid = ctx ? ctx->pid : 0;
	return 0;
}

static int timer_check(const char *const *parts, int nparts, bool has_offset, const char *usage,
		       struct probe_err *err)
{
	if (nparts != 1)
		return perr_set(err, PERR_SYNTAX, NULL, "write %s", usage);
	if (has_offset)
		return perr_set(err, PERR_OFFSET, NULL, "a timer takes no +offset");
	if (probe_has_wildcard(parts[0]))
		return perr_set(err, PERR_SYNTAX, NULL, "a timer's rate cannot be a pattern");
	return 0;
}

static int profile_resolve(const char *const *parts, int nparts, uint64_t offset, bool has_offset,
			   const struct probe_ctx *ctx, struct probe_set *set,
			   struct probe_err *err)
{
	uint64_t v, hz;
	bool is_rate;

	if (timer_check(parts, nparts, has_offset, provider_profile.usage, err))
		return -1;
	if (!rate_parse(parts[0], &v, &is_rate))
		return perr_set(err, PERR_SYNTAX, "e.g. profile:99hz or profile:10ms",
				"'%s' is not a rate", parts[0]);
	hz = is_rate ? v : (v ? NSEC_PER_SEC / v : 0);
	if (!is_rate && v && NSEC_PER_SEC % v)
		hz = (NSEC_PER_SEC + v / 2) / v;
	if (hz < 1 || hz > PROFILE_HZ_MAX)
		return perr_set(err, PERR_RATE, "use 1hz to 10000hz; 99hz is usual",
				"profile rate %s is out of range (1 to %d per second)", parts[0],
				PROFILE_HZ_MAX);
	return timer_target_add(set, PROBE_PROFILE, hz, 0, ctx, err);
}

static int interval_resolve(const char *const *parts, int nparts, uint64_t offset, bool has_offset,
			    const struct probe_ctx *ctx, struct probe_set *set,
			    struct probe_err *err)
{
	uint64_t v, ns;
	bool is_rate;

	if (timer_check(parts, nparts, has_offset, provider_interval.usage, err))
		return -1;
	if (!rate_parse(parts[0], &v, &is_rate))
		return perr_set(err, PERR_SYNTAX, "e.g. interval:1s or interval:100ms",
				"'%s' is not a period", parts[0]);
	ns = is_rate ? (v ? NSEC_PER_SEC / v : 0) : v;
	if (ns < INTERVAL_MIN_NS || ns > INTERVAL_MAX_NS)
		return perr_set(err, PERR_RATE, "use a period from 1ms to 1h",
				"interval %s is out of range (1ms to 1h)", parts[0]);
	return timer_target_add(set, PROBE_INTERVAL, 0, ns, ctx, err);
}

#define TIMER_MAX_CPUS 4096

/* The online CPUs, from /sys/devices/system/cpu/online ("0-3,5,8-9"); count or -errno.
 * Shared with the perf event providers (perf.c). */
int probe_cpus_online(int *cpus, int max)
{
	char buf[1024], *p = buf, *end;
	int n = 0;
	FILE *f = fopen("/sys/devices/system/cpu/online", "re");

	if (!f)
		return -errno;
	if (!fgets(buf, sizeof(buf), f)) {
		fclose(f);
		return -EIO;
	}
	fclose(f);
	while (*p && *p != '\n') {
		long lo = strtol(p, &end, 10), hi = lo;

		if (end == p || lo < 0)
			return -EINVAL;
		p = end;
		if (*p == '-') {
			hi = strtol(p + 1, &end, 10);
			if (end == p + 1 || hi < lo)
				return -EINVAL;
			p = end;
		}
		for (long c = lo; c <= hi && n < max; c++)
			cpus[n++] = (int)c;
		if (*p == ',')
			p++;
	}
	return n;
}

/*
 * One software cpu-clock perf event on cpu, for every process (pid -1: -p is filtered by the
 * program; a per-task event would follow one thread only), with prog linked to it.  The
 * event is opened disabled and libbpf enables it once the program is on it; the link owns
 * (and closes) the event's fd.
 */
/* One perf event of attr on cpu, prog attached with cookie, its link in links. */
static int perf_attach_one(struct bpf_program *prog, const struct probe_target *t,
			   const struct perf_event_attr *attr, uint64_t cookie, pid_t pid, int cpu,
			   struct probe_links *links, struct probe_err *err)
{
	LIBBPF_OPTS(bpf_perf_event_opts, opts, .bpf_cookie = cookie);
	struct perf_event_attr a = *attr;
	struct bpf_link *link;
	int fd, e;

	fd = (int)syscall(__NR_perf_event_open, &a, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);
	if (fd < 0)
		return perr_attach(err, t, pid, errno);
	link = bpf_program__attach_perf_event_opts(prog, fd, &opts);
	if (!link) {
		e = errno;
		close(fd);
		return perr_attach(err, t, pid, e);
	}
	if (probe_links_push(links, link)) {
		bpf_link__destroy(link);
		return perr_set(err, PERR_SYSTEM, NULL, "out of memory");
	}
	return 0;
}

int probe_perf_attach_cpus(struct bpf_program *prog, const struct probe_target *t,
			   const struct perf_event_attr *attr, bool first_cpu_only, uint64_t cookie,
			   pid_t pid, struct probe_links *links, struct probe_err *err)
{
	int start = links->n, ncpus, ret = 0;
	int *cpus = malloc(TIMER_MAX_CPUS * sizeof(*cpus));

	if (!cpus)
		return perr_set(err, PERR_SYSTEM, NULL, "out of memory");
	ncpus = probe_cpus_online(cpus, TIMER_MAX_CPUS);
	if (ncpus <= 0) {
		ret = perr_set(err, PERR_SYSTEM, NULL,
			       "cannot read the online CPUs (/sys/devices/system/cpu/online): %s",
			       ncpus ? strerror(-ncpus) : "none listed");
		goto out_free;
	}
	if (first_cpu_only)
		ncpus = 1;
	for (int i = 0; i < ncpus && ret == 0; i++)
		ret = perf_attach_one(prog, t, attr, cookie, pid, cpus[i], links, err);
	if (ret)
		probe_links_truncate(links, start);
out_free:
	free(cpus);
	return ret;
}

bool probe_perf_available(struct probe_err *err)
{
	if (probe_features_get()->perf_event)
		return true;
	perr_set(err, PERR_FEATURE, NULL,
		 "this kernel cannot attach BPF programs to perf events (perf_event_open failed "
		 "or BPF_PROG_TYPE_PERF_EVENT is missing)");
	return false;
}

/* profile: every online CPU; interval: the first online CPU (usually 0). */
static int timer_attach(struct bpf_program *prog, const struct probe_target *t, uint64_t cookie,
			pid_t pid, struct probe_links *links, struct probe_err *err)
{
	struct perf_event_attr attr;

	if (t->kind == PROBE_PROFILE ? t->hz == 0 : t->period_ns == 0)
		return perr_set(err, PERR_RATE, NULL, "%s has no rate", t->name);
	memset(&attr, 0, sizeof(attr));
	attr.size = sizeof(attr);
	attr.type = PERF_TYPE_SOFTWARE;
	attr.config = PERF_COUNT_SW_CPU_CLOCK;
	attr.disabled = 1;
	if (t->kind == PROBE_PROFILE) {
		attr.freq = 1;
		attr.sample_freq = t->hz;
	} else {
		attr.sample_period = t->period_ns; /* cpu-clock counts nanoseconds */
	}
	return probe_perf_attach_cpus(prog, t, &attr, t->kind == PROBE_INTERVAL, cookie, pid, links,
				      err);
}

const struct probe_provider provider_profile = {
	.kind = PROBE_PROFILE,
	.name = "profile",
	.alias = NULL,
	.min_parts = 1,
	.max_parts = 1,
	.usage = "profile:RATE (99hz, 10ms)",
	.resolve = profile_resolve,
	.list = NULL,
	.available = probe_perf_available,
	.attach = timer_attach,
};

const struct probe_provider provider_interval = {
	.kind = PROBE_INTERVAL,
	.name = "interval",
	.alias = NULL,
	.min_parts = 1,
	.max_parts = 1,
	.usage = "interval:PERIOD (1s, 100ms)",
	.resolve = interval_resolve,
	.list = NULL,
	.available = probe_perf_available,
	.attach = timer_attach,
};
