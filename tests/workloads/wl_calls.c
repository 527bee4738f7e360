// SPDX-License-Identifier: Apache-2.0
/*
 * Test workload: T threads calling the user function wl_call() flat out, for tests of span
 * probes (uprobe + uretprobe) under load, where a tracer attaches or detaches while every
 * thread is inside or between calls.
 *
 * Usage: wl_calls N T [wait]
 *   Prints its pid on the first line of stdout.  N > 0: thread k (0-based) makes exactly
 *   N / T (+1 for k < N % T) calls and the program exits.  N = 0: the threads call until a
 *   byte (or EOF) arrives on stdin, then stop.  With `wait` (N > 0 only), the threads make no
 *   call until a byte (or EOF) arrives on stdin, so a tracer can attach first.
 *   At the end it prints "wl_calls: C calls" (C: how many it made).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

long wl_call(long i);

/* Not inlined and kept, so that uprobe:wl_calls:wl_call sees every call. */
__attribute__((noinline, used)) long wl_call(long i)
{
	volatile long x = i;

	return x * 2 + 1;
}

struct worker {
	pthread_t thread;
	unsigned long calls; /* 0: until stopped */
	unsigned long made;
};

static pthread_barrier_t start_line;
static atomic_int stop;

static void *worker_run(void *arg)
{
	struct worker *w = arg;
	unsigned long i = 0;

	pthread_barrier_wait(&start_line);
	if (w->calls) {
		for (; i < w->calls; i++)
			wl_call((long)i);
	} else {
		while (!atomic_load_explicit(&stop, memory_order_relaxed))
			wl_call((long)i++);
	}
	w->made = i;
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
	unsigned long n, t, total = 0;
	struct worker *w;
	int wait_go;
	char go;

	if (argc < 3 || parse_ulong(argv[1], &n) || parse_ulong(argv[2], &t) || t == 0 ||
	    t > 1024 || (n && n < t)) {
		fprintf(stderr, "usage: %s N THREADS [wait]  (N = 0: until stdin says stop)\n",
			argv[0]);
		return 2;
	}
	wait_go = n && argc > 3 && strcmp(argv[3], "wait") == 0;
	w = calloc(t, sizeof(*w));
	if (!w || pthread_barrier_init(&start_line, NULL, (unsigned)t + 1))
		return 1;
	for (unsigned long k = 0; k < t; k++) {
		w[k].calls = n ? n / t + (k < n % t) : 0;
		if (pthread_create(&w[k].thread, NULL, worker_run, &w[k]))
			return 1;
	}
	printf("%d\n", (int)getpid());
	fflush(stdout);
	if (wait_go && read(STDIN_FILENO, &go, 1) < 0)
		return 1;
	pthread_barrier_wait(&start_line);
	if (!n) {
		if (read(STDIN_FILENO, &go, 1) < 0)
			return 1;
		atomic_store(&stop, 1);
	}
	for (unsigned long k = 0; k < t; k++) {
		pthread_join(w[k].thread, NULL);
		total += w[k].made;
	}
	pthread_barrier_destroy(&start_line);
	free(w);
	printf("wl_calls: %lu calls\n", total);
	return 0;
}
