// SPDX-License-Identifier: Apache-2.0
/*
 * trace_site: what one site of include/weft/trace.h costs the program that has it.  It makes
 * a known number of WEFT_EVENT(hi, lo, task, "tick") sites (weft:event, four arguments, one
 * of them a string) in a tight loop and times them with the thread's CPU clock
 * (CLOCK_THREAD_CPUTIME_ID: a busy machine's other processes drop out; a probe runs in our
 * context, so its cost is in).  Built twice: trace_site (the default build: an LTTng-UST
 * tracepoint with an SDT note) and trace_site_sdt (-DWEFT_TRACE_SDT_ONLY).
 *
 * A control runs interleaved with the sites, in batches of 1000 each, A B A B...: the same
 * loop with the same arguments computed and no site.  Both see the machine at the same
 * moment, so (site - control) cancels the drift of a shared machine's load.
 *
 *   trace_site N [REPS]   REPS rounds (default 5) of N sites and N control iterations
 *
 * Each round prints "round I: site S control C diff D ns/call"; the last line is
 * "trace_site BUILD N REPS median M min L ns/call calls C": M and L the median and minimum of
 * the rounds' (site - control) in ns, C the number of sites run (which a tracer's count must
 * match).  N is rounded down to a multiple of 1000.  Pin it with taskset.  tools/bench/
 * trace_site.sh runs it untraced, under LTTng, weft and bpftrace (docs/performance.md).
 */
#ifndef WEFT_TRACE_SDT_ONLY
#define WEFT_TRACE_DEFINE
#define TRACE_SITE_BUILD "lttng+sdt"
#else
#define TRACE_SITE_BUILD "sdt-only"
#endif
#include <weft/trace.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define REPS_MAX 1000
#define BATCH 1000

static int64_t cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* BATCH sites of the trace (hi, lo), task ids first + 1 .. first + BATCH. */
__attribute__((noinline)) static void sites(uint64_t hi, uint64_t lo, uint64_t first)
{
	for (uint64_t i = first; i < first + BATCH; i++)
		WEFT_EVENT(hi, lo, i + 1, "tick");
}

/* The same loop, the same arguments computed, no site. */
__attribute__((noinline)) static void control(uint64_t hi, uint64_t lo, uint64_t first)
{
	const char *tick = "tick";

	for (uint64_t i = first; i < first + BATCH; i++) {
		uint64_t task = i + 1;

		__asm__ volatile("" : : "r"(hi), "r"(lo), "r"(task), "r"(tick) : "memory");
	}
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	static double diffs[REPS_MAX];
	long n = argc > 1 ? strtol(argv[1], NULL, 10) : 0;
	long reps = argc > 2 ? strtol(argv[2], NULL, 10) : 5;
	long long calls = 0;
	uint64_t hi = weft_id(), lo = weft_id();

	n -= n % BATCH;
	if (n <= 0 || reps <= 0 || reps > REPS_MAX) {
		fprintf(stderr, "usage: trace_site N [REPS]  (N >= %d, 1 <= REPS <= %d)\n", BATCH,
			REPS_MAX);
		return 2;
	}
	for (long r = 0; r < reps; r++) {
		int64_t t_site = 0, t_ctl = 0;

		for (long b = 0; b < n; b += BATCH) {
			int64_t t0 = cpu_ns(), t1, t2;

			sites(hi, lo, (uint64_t)b);
			t1 = cpu_ns();
			control(hi, lo, (uint64_t)b);
			t2 = cpu_ns();
			t_site += t1 - t0;
			t_ctl += t2 - t1;
			calls += BATCH;
		}
		diffs[r] = (double)(t_site - t_ctl) / (double)n;
		printf("round %ld: site %.2f control %.2f diff %.2f ns/call\n", r,
		       (double)t_site / (double)n, (double)t_ctl / (double)n, diffs[r]);
	}
	qsort(diffs, (size_t)reps, sizeof(diffs[0]), cmp_double);
	printf("trace_site %s %ld %ld median %.2f min %.2f ns/call calls %lld\n", TRACE_SITE_BUILD,
	       n, reps, reps % 2 ? diffs[reps / 2] : (diffs[reps / 2 - 1] + diffs[reps / 2]) / 2,
	       diffs[0], calls);
	return 0;
}
