// SPDX-License-Identifier: Apache-2.0
/*
 * wl_ufuncs: a workload of 256 distinct functions, wl_f00 .. wl_fff (two hex digits), for tests
 * of wildcard uprobes (`uprobe:wl_ufuncs:wl_f*`, many sites of one program) and for the CPU
 * budget (a uprobe hit in a tight loop).
 *
 * Usage: wl_ufuncs N [wait]
 *   Prints its pid on the first line of stdout.  With `wait`, makes no call until a byte (or
 *   EOF) arrives on stdin, so a tracer can attach first.  Then runs N rounds; in each round
 *   function k (0..255, wl_f<k in hex>) is called (k % 4) + 1 times, so a run of N makes
 *   exactly N * ((k % 4) + 1) calls of function k, 640 * N calls in all: different counts for
 *   neighbouring functions, so a probe credited to the wrong function shows.  N = 0 runs
 *   rounds until killed, or until its parent exits (a test that fails half-way leaves no
 *   busy loop behind).  At the end it prints what it did.
 *
 * Each function returns a different constant, so no two bodies are identical and no
 * compiler or linker folds them into one address (which would make one uprobe site of two).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <signal.h>
#include <unistd.h>

#define WL_NFUNCS 256

/* clang-format off */
#define F(h, l)                                                \
	__attribute__((noinline, used)) int wl_f##h##l(int x); \
	__attribute__((noinline, used)) int wl_f##h##l(int x)  \
	{                                                      \
		volatile int v = x;                            \
		return v * 3 + 0x##h##l;                       \
	}
#define ROW(h)                                                                          \
	F(h, 0) F(h, 1) F(h, 2) F(h, 3) F(h, 4) F(h, 5) F(h, 6) F(h, 7)                 \
	F(h, 8) F(h, 9) F(h, a) F(h, b) F(h, c) F(h, d) F(h, e) F(h, f)

ROW(0) ROW(1) ROW(2) ROW(3) ROW(4) ROW(5) ROW(6) ROW(7)
ROW(8) ROW(9) ROW(a) ROW(b) ROW(c) ROW(d) ROW(e) ROW(f)

#define P(h, l) wl_f##h##l,
#define PROW(h)                                                                         \
	P(h, 0) P(h, 1) P(h, 2) P(h, 3) P(h, 4) P(h, 5) P(h, 6) P(h, 7)                 \
	P(h, 8) P(h, 9) P(h, a) P(h, b) P(h, c) P(h, d) P(h, e) P(h, f)

static int (*const funcs[WL_NFUNCS])(int) = {
	PROW(0) PROW(1) PROW(2) PROW(3) PROW(4) PROW(5) PROW(6) PROW(7)
	PROW(8) PROW(9) PROW(a) PROW(b) PROW(c) PROW(d) PROW(e) PROW(f)
};
/* clang-format on */

int main(int argc, char **argv)
{
	unsigned long n, round;
	char *end;
	long sum = 0;

	if (argc < 2 || !*argv[1] || (n = strtoul(argv[1], &end, 10), *end)) {
		fprintf(stderr, "usage: %s N [wait]\n", argv[0]);
		return 2;
	}
	if (n == 0 && (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() == 1))
		return 1;
	printf("%d\n", (int)getpid());
	fflush(stdout);
	if (argc > 2 && strcmp(argv[2], "wait") == 0) {
		char b;

		if (read(0, &b, 1) < 0)
			return 1;
	}
	for (round = 0; n == 0 || round < n; round++)
		for (int k = 0; k < WL_NFUNCS; k++)
			for (int r = 0; r <= k % 4; r++)
				sum += funcs[k]((int)round);
	printf("wl_ufuncs: %lu rounds, %lu calls, sum %ld\n", n, 640 * n, sum);
	return 0;
}
