// SPDX-License-Identifier: Apache-2.0
/*
 * The workload of the perf event and stack tests (tests/runtime/test_run_perf.c): it does a
 * known number of one thing while its name (comm) is one the query filters on, so that what
 * the process does around it (the loader's page faults, exit) never counts.
 *
 *   wl_perf faults N   writes one byte into each of N fresh anonymous pages (no huge pages)
 *                      while named "wl_touch": exactly N page faults
 *   wl_perf sleeps N   sleeps 1 ms N times while named "wl_sleep": N voluntary switches
 *   wl_perf stack N    main -> wl_a -> wl_b -> wl_c, and wl_c makes the getppid system call
 *                      N times itself (inline on x86-64, so the user stack at the syscall
 *                      starts in wl_c: a libc wrapper without a frame would hide wl_c)
 *   wl_perf stackwait N  the same once a line arrives on its stdin, then reads its stdin until
 *                      EOF (alive until the test has the symbolized output)
 *   wl_perf requests N calls wl_request(line, len) N times with HTTP request lines: GET for
 *                      i % 3 == 0, POST for 1, PUT for 2, path /item/i
 *   wl_perf spin N     burns the CPU for N ms in wl_spin (for cpu-clock samples)
 *
 * Each prints "wl_perf: MODE N" at the end.  Built with frame pointers and no inlining
 * (tests/workloads/CMakeLists.txt).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static void name_set(const char *name)
{
	prctl(PR_SET_NAME, (unsigned long)name, 0, 0, 0);
}

static __attribute__((noinline)) void touch(volatile char *p, long n, long pagesz)
{
	for (long i = 0; i < n; i++)
		p[i * pagesz] = 1;
}

static int faults(long n)
{
	long pagesz = sysconf(_SC_PAGESIZE);
	char *p = mmap(NULL, (size_t)(n + 1) * (size_t)pagesz, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return 1;
	madvise(p, (size_t)(n + 1) * (size_t)pagesz, MADV_NOHUGEPAGE);
	/* warm up the code and the stack on the extra page: every page the touching path
	 * itself needs is present before the counted name is set */
	name_set("wl_warm");
	touch(p + n * pagesz, 1, pagesz);
	name_set("wl_touch");
	touch(p, n, pagesz);
	name_set("wl_perf");
	return 0;
}

static int sleeps(long n)
{
	struct timespec ts = { 0, 1000000 };

	name_set("wl_warm");
	nanosleep(&ts, NULL);
	name_set("wl_sleep");
	for (long i = 0; i < n; i++)
		nanosleep(&ts, NULL);
	name_set("wl_perf");
	return 0;
}

void wl_c(long n);
void wl_sink(long n);
void wl_b(long n);
void wl_a(long n);
void wl_spin(long ms);
void wl_request(const char *buf, long len);

/* Called by wl_c after its system calls, so that wl_c is no leaf and has a frame of its own
 * (the compiler may leave a leaf without one even with -fno-omit-frame-pointer). */
__attribute__((noinline)) void wl_sink(long n)
{
	__asm__ volatile("" : : "r"(n) : "memory");
}

__attribute__((noinline)) void wl_c(long n)
{
	for (long i = 0; i < n; i++) {
#if defined(__x86_64__)
		long ret;

		__asm__ volatile("syscall"
				 : "=a"(ret)
				 : "a"((long)SYS_getppid)
				 : "rcx", "r11", "memory");
		(void)ret;
#else
		syscall(SYS_getppid);
#endif
	}
	wl_sink(n);
}

__attribute__((noinline)) void wl_b(long n)
{
	wl_c(n);
	__asm__ volatile("" ::: "memory"); /* not a tail call: b keeps its frame */
}

__attribute__((noinline)) void wl_a(long n)
{
	wl_b(n);
	__asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void wl_spin(long ms)
{
	struct timespec t0, t;
	volatile unsigned long x = 0;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		for (int i = 0; i < 100000; i++)
			x += (unsigned long)i;
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 < ms);
	__asm__ volatile("" : : "r"(x)); /* read: clang's -Wunused-but-set-variable */
}

/* The uprobe site of `requests`: one HTTP request line, its bytes and length. */
__attribute__((noinline)) void wl_request(const char *buf, long len)
{
	__asm__ volatile("" : : "r"(buf), "r"(len) : "memory");
}

/* N requests: i % 3 == 0 GET, 1 POST, 2 PUT, with the path /item/i. */
static void requests(long n)
{
	static const char *const methods[] = { "GET", "POST", "PUT" };
	char line[128];

	for (long i = 0; i < n; i++) {
		int len = snprintf(line, sizeof(line), "%s /item/%ld HTTP/1.1\r\n", methods[i % 3],
				   i);

		wl_request(line, len);
	}
}

int main(int argc, char **argv)
{
	long n;
	int rc = 0;

	if (argc != 3 || (n = atol(argv[2])) < 0) {
		fprintf(stderr, "usage: wl_perf faults|sleeps|stack|spin N\n");
		return 2;
	}
	if (strcmp(argv[1], "faults") == 0)
		rc = faults(n);
	else if (strcmp(argv[1], "sleeps") == 0)
		rc = sleeps(n);
	else if (strcmp(argv[1], "stack") == 0)
		wl_a(n);
	else if (strcmp(argv[1], "stackwait") == 0 && getchar() != EOF)
		wl_a(n);
	else if (strcmp(argv[1], "spin") == 0)
		wl_spin(n);
	else if (strcmp(argv[1], "requests") == 0)
		requests(n);
	else
		return 2;
	printf("wl_perf: %s %ld\n", argv[1], n);
	fflush(stdout);
	/* stackwait: alive until its stdin closes, so that its stacks can be symbolized */
	if (strcmp(argv[1], "stackwait") == 0)
		while (getchar() != EOF)
			;
	return rc;
}
