// SPDX-License-Identifier: Apache-2.0
/*
 * Test workload: makes exactly N getppid() system calls, split over T threads that run flat
 * out, so that a tracer can assert its counts exactly.  getppid is cheap and nothing else in
 * a test run calls it in this process.
 *
 * Usage: wl_syscalls N T [wait [paced]]
 *   Prints its pid on the first line of stdout.  With `wait`, the threads are started but
 *   make no call until a byte (or EOF) arrives on stdin, so the tracer can attach first.
 *   With `paced`, fd 3 is a struct wl_pace (wl_pace.h) that the tracer shares: each thread
 *   makes a call only when the tracer allows it, and publishes how many it has made.
 *
 * Thread k (0-based) makes n_k = N / T (+1 for k < N % T) calls; its i-th call passes
 * (i, k) in the first two argument registers, which the getppid tracepoint ignores but the
 * raw_syscalls:sys_enter tracepoint reports as args[0] and args[1].  So a tracer can check not
 * only how many calls it saw but which ones: the sequence numbers of one thread are 0..n_k-1.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "tests/workloads/wl_pace.h"

struct worker {
	pthread_t thread;
	unsigned long index;
	unsigned long calls;
};

static pthread_barrier_t start_line;
static struct wl_pace *pace; /* with `paced` */

static void *worker_run(void *arg)
{
	struct worker *w = arg;
	const struct timespec nap = { 0, 20000 };

	pthread_barrier_wait(&start_line);
	for (unsigned long i = 0; i < w->calls; i++) {
		while (pace && i >= atomic_load(&pace->allow))
			nanosleep(&nap, NULL);
		syscall(SYS_getppid, i, w->index);
		if (pace)
			atomic_store(&pace->done[w->index], i + 1);
	}
	return NULL;
}

static int parse_ulong(const char *s, unsigned long *out)
{
	char *end;

	*out = strtoul(s, &end, 10);
	return (*s && !*end) ? 0 : -1;
}

int main(int argc, char **argv)
{
	unsigned long n, t;
	struct worker *w;
	int wait_go;

	if (argc < 3 || parse_ulong(argv[1], &n) || parse_ulong(argv[2], &t) || t == 0 ||
	    t > 1024) {
		fprintf(stderr, "usage: %s N THREADS [wait]\n", argv[0]);
		return 2;
	}
	wait_go = argc > 3 && strcmp(argv[3], "wait") == 0;
	if (argc > 4 && strcmp(argv[4], "paced") == 0) {
		if (t > WL_PACE_MAX_THREADS) {
			fprintf(stderr, "%s: at most %d threads when paced\n", argv[0],
				WL_PACE_MAX_THREADS);
			return 2;
		}
		pace = mmap(NULL, sizeof(*pace), PROT_READ | PROT_WRITE, MAP_SHARED, WL_PACE_FD, 0);
		if (pace == MAP_FAILED) {
			perror("wl_syscalls: mmap of the pace page (fd 3)");
			return 1;
		}
	}
	w = calloc(t, sizeof(*w));
	if (!w || pthread_barrier_init(&start_line, NULL, (unsigned)t + 1))
		return 1;
	for (unsigned long k = 0; k < t; k++) {
		w[k].index = k;
		w[k].calls = n / t + (k < n % t);
		if (pthread_create(&w[k].thread, NULL, worker_run, &w[k]))
			return 1;
	}
	printf("%d\n", (int)getpid());
	fflush(stdout);
	if (wait_go) {
		char go;

		if (read(STDIN_FILENO, &go, 1) < 0)
			return 1;
	}
	pthread_barrier_wait(&start_line);
	for (unsigned long k = 0; k < t; k++)
		pthread_join(w[k].thread, NULL);
	pthread_barrier_destroy(&start_line);
	free(w);
	return 0;
}
