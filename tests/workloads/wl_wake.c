// SPDX-License-Identifier: Apache-2.0
/*
 * Test workload: T sleeper threads, each woken exactly R times by the main thread, so that a
 * tracer of the scheduler (runqlat, offcputime) can assert its counts exactly.
 *
 * Usage: wl_wake R T
 *   Prints its pid on the first line of stdout, then waits for a byte (or EOF) on stdin so the
 *   tracer can attach first.  Only then it starts the T sleepers (threads named "wlw_sleep").
 *   Sleeper k waits R times on a futex of its own (FUTEX_WAIT: an interruptible sleep, so a
 *   sched_switch with prev_state 1); the main thread wakes it once per round, and only once
 *   the sleeper has been switched out asleep: its voluntary_ctxt_switches (/proc status),
 *   which the kernel counts as it fires sched_switch for a sleeping task, has grown past the
 *   count the sleeper read (getrusage) just before it began this round's wait.  (A wait channel is no proof: a task that has set its state to sleep but not
 *   yet switched out shows one too, and waking it then gives a sched_wakeup with no switch.)
 *   So each round is exactly one sched_switch out of the sleeper in state S, one sched_wakeup
 *   of it (from the main thread's FUTEX_WAKE) and the next sched_switch into it, and nothing
 *   else wakes it.
 *   At the end it prints "wl_wake: T threads, R wakeups each" and one "tid TID" line a thread.
 *
 * Limits: a sleeper could in principle sleep elsewhere (a page fault in D state); its stack and
 * data are touched before its first wait, and nothing it does after that can fault.
 */
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define MAX_THREADS 16

struct sleeper {
	pthread_t thread;
	_Atomic unsigned int word; /* the round the main thread has released */
	_Atomic unsigned long done; /* rounds the sleeper has finished */
	_Atomic int tid;
	unsigned long rounds;
	_Atomic long before; /* its voluntary switches just before its wait of this round */
	_Atomic unsigned long waiting; /* 1 + the round it is about to wait in */
};

static void *sleeper_run(void *arg)
{
	struct sleeper *s = arg;

	prctl(PR_SET_NAME, "wlw_sleep", 0, 0, 0);
	atomic_store(&s->tid, (int)syscall(SYS_gettid));
	for (unsigned long r = 0; r < s->rounds; r++) {
		struct rusage ru;

		/* its voluntary switches before it waits: the next one is that wait's */
		getrusage(RUSAGE_THREAD, &ru);
		atomic_store(&s->before, ru.ru_nvcsw);
		atomic_store(&s->waiting, r + 1);
		while (atomic_load(&s->word) == (unsigned int)r)
			syscall(SYS_futex, &s->word, FUTEX_WAIT_PRIVATE, (unsigned int)r, NULL,
				NULL, 0);
		atomic_store(&s->done, r + 1);
	}
	return NULL;
}

/* The voluntary context switches of thread tid so far (-1 if unknown): the kernel counts one
 * when the thread is switched out asleep, when the sched_switch tracepoint fires. */
static long vol_switches(int tid)
{
	char path[64], line[128];
	long n = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/task/%d/status", tid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "voluntary_ctxt_switches: %ld", &n) == 1)
			break;
	fclose(f);
	return n;
}

int main(int argc, char **argv)
{
	static struct sleeper s[MAX_THREADS];
	const struct timespec nap = { 0, 50000 };
	unsigned long rounds, nt;
	char c;

	if (argc != 3 || (rounds = strtoul(argv[1], NULL, 10)) == 0 ||
	    (nt = strtoul(argv[2], NULL, 10)) == 0 || nt > MAX_THREADS) {
		fprintf(stderr, "usage: wl_wake ROUNDS THREADS (1..%d)\n", MAX_THREADS);
		return 2;
	}
	printf("%d\n", (int)getpid());
	fflush(stdout);
	if (read(0, &c, 1) < 0)
		return 1;
	for (unsigned long k = 0; k < nt; k++) {
		s[k].rounds = rounds;
		if (pthread_create(&s[k].thread, NULL, sleeper_run, &s[k]) != 0)
			return 1;
	}
	for (unsigned long r = 0; r < rounds; r++)
		for (unsigned long k = 0; k < nt; k++) {
			/* asleep: in this round's wait, switched out once since it began it */
			while (atomic_load(&s[k].waiting) != r + 1 ||
			       vol_switches(atomic_load(&s[k].tid)) <= atomic_load(&s[k].before))
				nanosleep(&nap, NULL);
			atomic_store(&s[k].word, (unsigned int)(r + 1));
			syscall(SYS_futex, &s[k].word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
		}
	for (unsigned long k = 0; k < nt; k++)
		pthread_join(s[k].thread, NULL);
	printf("wl_wake: %lu threads, %lu wakeups each\n", nt, rounds);
	for (unsigned long k = 0; k < nt; k++)
		printf("tid %d\n", atomic_load(&s[k].tid));
	return 0;
}
