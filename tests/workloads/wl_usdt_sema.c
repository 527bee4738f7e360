// SPDX-License-Identifier: Apache-2.0
/*
 * wl_usdt_sema: a workload whose USDT probe has a semaphore, for tests of tracing a process
 * that is already running.  `wl_usdt_sema N` prints its pid on the first line, waits for a
 * byte (or EOF) on stdin, then runs N iterations; each reads the semaphore of
 * weft_sema:fire and, only when a tracer has raised it, fires weft_sema:fire(int i) once.  At
 * the end it prints how many fired: "wl_usdt_sema: N iterations, F fired".  So with a tracer
 * attached before the byte arrives F = N, without one F = 0.  A semaphore is what every
 * `if (PROBE_ENABLED())` guard of a real program reads; the kernel raises it in a running
 * process through the uprobe's reference counter (ref_ctr_offset).  Deterministic: no
 * randomness, no threads.
 */
#define _SDT_HAS_SEMAPHORES 1 /* every probe of this file has a semaphore (sys/sdt.h) */
#include <stdio.h>
#include <stdlib.h>
#include <sys/sdt.h>
#include <unistd.h>

/* sys/sdt.h names it PROVIDER_NAME_semaphore; .probes is where dtrace -G puts them */
__attribute__((section(".probes"), used)) volatile unsigned short weft_sema_fire_semaphore;

int main(int argc, char **argv)
{
	long n = argc > 1 ? strtol(argv[1], NULL, 10) : 1000, fired = 0;
	char go;

	if (n < 0)
		n = 0;
	printf("%d\n", (int)getpid());
	fflush(stdout);
	if (read(STDIN_FILENO, &go, 1) < 0)
		return 1;
	for (int i = 0; i < n; i++) {
		if (weft_sema_fire_semaphore) {
			fired++;
			DTRACE_PROBE1(weft_sema, fire, i);
		}
	}
	printf("wl_usdt_sema: %ld iterations, %ld fired\n", n, fired);
	return 0;
}
