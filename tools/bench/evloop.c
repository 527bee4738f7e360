// SPDX-License-Identifier: Apache-2.0
/*
 * evloop: the event generator of the per-event cost and agent-CPU benchmarks.  It makes a
 * known number of cheap, traceable calls in a tight loop and times them with
 * clock_gettime, so the cost a tracer adds to each event is the difference between a traced
 * and an untraced run (perf's hardware counters do not exist in this VM).  Two clocks: the
 * thread's CPU time (CLOCK_THREAD_CPUTIME_ID: the primary figure, as it excludes the time
 * other processes of a busy machine run on our CPU; the probe runs in our context, so its cost
 * is included) and wall time (CLOCK_MONOTONIC).
 *
 *   evloop getppid N [REPS]   REPS rounds of N getppid() system calls (tracepoint
 *                             syscalls:sys_enter_getppid and raw_syscalls:sys_enter)
 *   evloop uprobe N [REPS]    REPS rounds of N calls of evloop_target() (uprobe target)
 *   evloop rate R SECONDS [T] getppid() at R calls per second in all for SECONDS, from T
 *                             threads (default 1): a steady load (one thread makes at most
 *                             ~700k calls/s on this VM, so 1M/s needs two)
 *
 * Each round prints "round I: CPU ns/call (wall W)"; the last line is
 * "evloop MODE N REPS median M min L ns/call wall W calls C": M and L the median and minimum
 * of the rounds' CPU ns/call, W the median wall ns/call, C the total number of calls, which a
 * tracer's count must match.  Pin it with taskset: the numbers are per-CPU costs.
 */
#include <pthread.h>
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

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static uint64_t clock_ns(clockid_t clk)
{
	struct timespec ts;

	clock_gettime(clk, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static uint64_t now_ns(void)
{
	return clock_ns(CLOCK_MONOTONIC);
}

static double median_of(double *v, unsigned long n)
{
	qsort(v, n, sizeof(v[0]), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
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

struct rate_arg {
	unsigned long rate, seconds;
	uint64_t done;
};

/*
 * A steady rate: batches of 1000 calls, then sleep until the schedule catches up, so the
 * event rate is the asked one on average over any few milliseconds and over the whole run.
 */
static void *rate_run(void *p)
{
	struct rate_arg *a = p;
	const unsigned long batch = 1000;
	uint64_t start = now_ns(), end = start + a->seconds * 1000000000ULL, t;

	while ((t = now_ns()) < end) {
		uint64_t due = start + (a->done + batch) * 1000000000ULL / a->rate;

		if (t < due) {
			struct timespec ts = { 0, (long)(due - t) };

			nanosleep(&ts, NULL);
			continue;
		}
		loop_getppid(batch);
		a->done += batch;
	}
	return NULL;
}

static int run_rate(unsigned long rate, unsigned long seconds, unsigned long nthreads)
{
	struct rate_arg args[64];
	pthread_t th[64];
	uint64_t start = now_ns(), done = 0;

	for (unsigned long i = 0; i < nthreads; i++) {
		args[i] = (struct rate_arg){ .rate = rate / nthreads, .seconds = seconds };
		if (pthread_create(&th[i], NULL, rate_run, &args[i]))
			return 1;
	}
	for (unsigned long i = 0; i < nthreads; i++) {
		pthread_join(th[i], NULL);
		done += args[i].done;
	}
	printf("evloop rate %lu for %lus on %lu threads: %llu calls, %.0f calls/s\n", rate, seconds,
	       nthreads, (unsigned long long)done, (double)done * 1e9 / (double)(now_ns() - start));
	return 0;
}

int main(int argc, char **argv)
{
	static double per_call[REPS_MAX], wall[REPS_MAX];
	unsigned long n, reps;
	void (*loop)(unsigned long);

	if (argc < 3)
		goto usage;
	n = strtoul(argv[2], NULL, 10);
	reps = argc > 3 ? strtoul(argv[3], NULL, 10) : 5;
	if (strcmp(argv[1], "rate") == 0) {
		unsigned long nthreads = argc > 4 ? strtoul(argv[4], NULL, 10) : 1;

		if (n == 0 || reps == 0 || nthreads == 0 || nthreads > 64)
			goto usage;
		return run_rate(n, reps, nthreads);
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
		uint64_t w0 = now_ns(), c0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);

		loop(n);
		per_call[r] = (double)(clock_ns(CLOCK_THREAD_CPUTIME_ID) - c0) / (double)n;
		wall[r] = (double)(now_ns() - w0) / (double)n;
		printf("round %lu: %.1f ns/call (wall %.1f)\n", r, per_call[r], wall[r]);
	}
	printf("evloop %s %lu %lu median %.1f", argv[1], n, reps, median_of(per_call, reps));
	printf(" min %.1f ns/call wall %.1f calls %lu\n", per_call[0], median_of(wall, reps),
	       n * reps + n / 10 + 1);
	return 0;

usage:
	fprintf(stderr,
		"usage: %s getppid|uprobe N [REPS]\n       %s rate CALLS_PER_S SECONDS [THREADS]\n",
		argv[0], argv[0]);
	return 2;
}
