// SPDX-License-Identifier: Apache-2.0
/*
 * evloop: the event generator of the per-event cost and agent-CPU benchmarks.  It makes a
 * known number of cheap, traceable calls in a tight loop and times them with
 * clock_gettime(CLOCK_MONOTONIC), so the cost a tracer adds to each event is the difference
 * between a traced and an untraced run (perf's hardware counters do not exist in this VM).
 *
 *   evloop getppid N [REPS]   REPS rounds of N getppid() system calls (tracepoint
 *                             syscalls:sys_enter_getppid and raw_syscalls:sys_enter)
 *   evloop uprobe N [REPS]    REPS rounds of N calls of evloop_target() (uprobe target)
 *   evloop rate R SECONDS     getppid() at R calls per second for SECONDS (a steady load)
 *
 * Each round prints "round I: T ns/call"; the last line is
 * "evloop MODE N REPS median M min L ns/call calls C", with C the total number of calls, which
 * a tracer's count must match.  Pin it with taskset: the numbers are per-CPU costs.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define REPS_MAX 1000

int evloop_target(int i);

/* Not inlined and kept: uprobe:evloop:evloop_target must see every call. */
__attribute__((noinline, used)) int evloop_target(int i)
{
	__asm__ volatile("" : : "r"(i) : "memory");
	return i + 1;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static void loop_getppid(unsigned long n)
{
	for (unsigned long i = 0; i < n; i++)
		syscall(SYS_getppid);
}

static void loop_uprobe(unsigned long n)
{
	int acc = 0;

	for (unsigned long i = 0; i < n; i++)
		acc = evloop_target(acc);
	__asm__ volatile("" : : "r"(acc));
}

/*
 * A steady rate: batches of 1000 calls, then sleep until the schedule catches up, so the
 * event rate is R per second on average over any 1 ms window and over the whole run.
 */
static int run_rate(unsigned long rate, unsigned long seconds)
{
	const unsigned long batch = 1000;
	uint64_t start = now_ns(), end = start + seconds * 1000000000ULL, done = 0, t;

	while ((t = now_ns()) < end) {
		uint64_t due = start + (done + batch) * 1000000000ULL / rate;

		if (t < due) {
			struct timespec ts = { 0, (long)(due - t) };

			nanosleep(&ts, NULL);
			continue;
		}
		loop_getppid(batch);
		done += batch;
	}
	t = now_ns();
	printf("evloop rate %lu for %lus: %llu calls, %.0f calls/s\n", rate, seconds,
	       (unsigned long long)done, (double)done * 1e9 / (double)(t - start));
	return 0;
}

int main(int argc, char **argv)
{
	static double per_call[REPS_MAX];
	unsigned long n, reps;
	void (*loop)(unsigned long);

	if (argc < 3)
		goto usage;
	n = strtoul(argv[2], NULL, 10);
	reps = argc > 3 ? strtoul(argv[3], NULL, 10) : 5;
	if (strcmp(argv[1], "rate") == 0) {
		if (n == 0 || reps == 0)
			goto usage;
		return run_rate(n, reps);
	}
	if (strcmp(argv[1], "getppid") == 0)
		loop = loop_getppid;
	else if (strcmp(argv[1], "uprobe") == 0)
		loop = loop_uprobe;
	else
		goto usage;
	if (n == 0 || reps == 0 || reps > REPS_MAX)
		goto usage;

	loop(n / 10 + 1); /* warm the caches and the branch predictors; not counted */
	for (unsigned long r = 0; r < reps; r++) {
		uint64_t t0 = now_ns();

		loop(n);
		per_call[r] = (double)(now_ns() - t0) / (double)n;
		printf("round %lu: %.1f ns/call\n", r, per_call[r]);
	}
	qsort(per_call, reps, sizeof(per_call[0]), cmp_double);
	printf("evloop %s %lu %lu median %.1f min %.1f ns/call calls %lu\n", argv[1], n, reps,
	       reps % 2 ? per_call[reps / 2] : (per_call[reps / 2 - 1] + per_call[reps / 2]) / 2,
	       per_call[0], n * reps + n / 10 + 1);
	return 0;

usage:
	fprintf(stderr, "usage: %s getppid|uprobe N [REPS]\n       %s rate CALLS_PER_S SECONDS\n",
		argv[0], argv[0]);
	return 2;
}
