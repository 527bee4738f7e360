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
 * A control runs interleaved with the probed call, in batches of 1000 each, A B A B...: an
 * equally cheap call nobody probes (getpid() for getppid(), evloop_control() for
 * evloop_target()).  Both see the same machine at the same moment, so (probed - control)
 * cancels the drift of a shared machine's load that separate runs cannot.  (For getppid the
 * control is not free of tracing: once any syscall tracepoint is enabled every system call
 * takes the kernel's slow path and visits the tracepoint; only the probed one runs the
 * program.  So the difference measures what a tracer adds beyond that common dispatch.)
 *
 *   evloop getppid N [REPS]   REPS rounds of N getppid() system calls (tracepoint
 *                             syscalls:sys_enter_getppid and raw_syscalls:sys_enter),
 *                             interleaved with N getpid() calls
 *   evloop uprobe N [REPS]    REPS rounds of N calls of evloop_target() (uprobe target),
 *                             interleaved with N calls of evloop_control()
 *   evloop paced N [REPS] [GAP_US]  the same as getppid, but each call (and each control
 *                             call) after a sleep of GAP_US microseconds (default 20): the
 *                             tracer's reader has caught up before every event, which is
 *                             where a ring buffer's wakeup costs the traced call the most
 *   evloop rate R SECONDS [T] getppid() at R calls per second in all for SECONDS, from T
 *                             threads (default 1): a steady load (one thread makes at most
 *                             ~700k calls/s on this VM, so 1M/s needs two)
 *
 * Each round prints "round I: CPU ns/call (wall W) control B"; the last line is
 * "evloop MODE N REPS median M min L ns/call wall W calls C control B diff D": M and L the
 * median and minimum of the rounds' CPU ns per probed call, W the median wall ns per probed
 * call, C the total number of probed calls (which a tracer's count must match), B the median
 * CPU ns per control call and D the median of the rounds' (probed - control).  N is rounded
 * down to a multiple of 1000.  Pin it with taskset: the numbers are per-CPU costs.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define REPS_MAX 1000
#define BATCH 1000

int evloop_target(int i);
int evloop_control(int i);

/* Not inlined and kept: uprobe:evloop:evloop_target must see every call. */
__attribute__((noinline, used)) int evloop_target(int i)
{
	__asm__ volatile("" : : "r"(i) : "memory");
	return i + 1;
}

/* The same code, never probed: the control of evloop_target. */
__attribute__((noinline, used)) int evloop_control(int i)
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

static void loop_getpid(unsigned long n)
{
	for (unsigned long i = 0; i < n; i++)
		syscall(SYS_getpid);
}

static struct timespec pace; /* evloop paced: the sleep before each call */

static void loop_paced_getppid(unsigned long n)
{
	for (unsigned long i = 0; i < n; i++) {
		nanosleep(&pace, NULL);
		syscall(SYS_getppid);
	}
}

static void loop_paced_getpid(unsigned long n)
{
	for (unsigned long i = 0; i < n; i++) {
		nanosleep(&pace, NULL);
		syscall(SYS_getpid);
	}
}

static void loop_uprobe(unsigned long n)
{
	int acc = 0;

	for (unsigned long i = 0; i < n; i++)
		acc = evloop_target(acc);
	__asm__ volatile("" : : "r"(acc));
}

static void loop_control(unsigned long n)
{
	int acc = 0;

	for (unsigned long i = 0; i < n; i++)
		acc = evloop_control(acc);
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
	static double per_call[REPS_MAX], wall[REPS_MAX], control[REPS_MAX], diff[REPS_MAX];
	unsigned long n, reps;
	void (*loop)(unsigned long), (*ctl)(unsigned long);

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
	if (strcmp(argv[1], "getppid") == 0) {
		loop = loop_getppid;
		ctl = loop_getpid;
	} else if (strcmp(argv[1], "paced") == 0) {
		unsigned long gap = argc > 4 ? strtoul(argv[4], NULL, 10) : 20;

		if (gap == 0 || gap >= 1000000)
			goto usage;
		pace.tv_nsec = (long)gap * 1000;
		prctl(PR_SET_TIMERSLACK, 1UL); /* the asked sleep, not 50 us more */
		loop = loop_paced_getppid;
		ctl = loop_paced_getpid;
	} else if (strcmp(argv[1], "uprobe") == 0) {
		loop = loop_uprobe;
		ctl = loop_control;
	} else {
		goto usage;
	}
	n -= n % BATCH;
	if (n == 0 || reps == 0 || reps > REPS_MAX)
		goto usage;

	loop(n / 10 + 1); /* warm the caches and the branch predictors; not counted */
	ctl(n / 10 + 1);
	for (unsigned long r = 0; r < reps; r++) {
		uint64_t a_cpu = 0, a_wall = 0, b_cpu = 0;

		for (unsigned long done = 0; done < n; done += BATCH) {
			uint64_t w0 = now_ns(), c0 = clock_ns(CLOCK_THREAD_CPUTIME_ID), c1, c2;

			loop(BATCH);
			c1 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
			a_wall += now_ns() - w0;
			a_cpu += c1 - c0;
			c1 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
			ctl(BATCH);
			c2 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
			b_cpu += c2 - c1;
		}
		per_call[r] = (double)a_cpu / (double)n;
		wall[r] = (double)a_wall / (double)n;
		control[r] = (double)b_cpu / (double)n;
		diff[r] = per_call[r] - control[r];
		printf("round %lu: %.1f ns/call (wall %.1f) control %.1f\n", r, per_call[r],
		       wall[r], control[r]);
	}
	printf("evloop %s %lu %lu median %.1f", argv[1], n, reps, median_of(per_call, reps));
	printf(" min %.1f ns/call wall %.1f calls %lu", per_call[0], median_of(wall, reps),
	       n * reps + n / 10 + 1);
	printf(" control %.1f diff %.1f\n", median_of(control, reps), median_of(diff, reps));
	return 0;

usage:
	fprintf(stderr,
		"usage: %s getppid|uprobe N [REPS]\n       %s paced N [REPS] [GAP_US]\n"
		"       %s rate CALLS_PER_S SECONDS [THREADS]\n",
		argv[0], argv[0], argv[0]);
	return 2;
}
