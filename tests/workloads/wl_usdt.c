// SPDX-License-Identifier: Apache-2.0
/*
 * wl_usdt: a self-probing workload with a known number of events, for tests of uprobes and
 * USDT probes.  `wl_usdt [N [DELAY_MS]]` sleeps DELAY_MS (default 0: time for a tracer to
 * attach to this pid), then runs N iterations (default 1000); each calls wl_work(i) once and
 * fires the USDT probe weft_test:tick(int i, long sum) once; at the end weft_test:done fires
 * once.  So a run of N gives exactly N wl_work calls, N ticks and 1 done.  Deterministic:
 * no randomness, no threads; it prints what it did.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/sdt.h>
#include <time.h>

int wl_work(int i);

/* Not inlined and kept even if unused, so that uprobe:wl_usdt:wl_work sees every call. */
__attribute__((noinline, used)) int wl_work(int i)
{
	volatile int x = i;

	return x * 3 + 1;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? strtol(argv[1], NULL, 10) : 1000;
	long delay_ms = argc > 2 ? strtol(argv[2], NULL, 10) : 0;
	long sum = 0;

	if (n < 0)
		n = 0;
	if (delay_ms > 0) {
		struct timespec ts = { delay_ms / 1000, (delay_ms % 1000) * 1000000L };

		nanosleep(&ts, NULL);
	}
	for (int i = 0; i < n; i++) {
		sum += wl_work(i);
		DTRACE_PROBE2(weft_test, tick, i, sum);
	}
	DTRACE_PROBE(weft_test, done);
	printf("wl_usdt: %ld iterations, %ld wl_work calls, %ld ticks, 1 done, sum %ld\n", n, n, n,
	       sum);
	return 0;
}
