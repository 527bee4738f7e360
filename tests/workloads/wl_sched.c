// SPDX-License-Identifier: Apache-2.0
/*
 * wl_sched: threads and processes inside weft tasks, for the kernel:sched and kernel:process
 * tests (tests/runtime/test_run_ksched.c).  `wl_sched N K` runs one trace
 * {WL_SCHED_TRACE_HI, 1} through include/weft/trace.h (plain <sys/sdt.h> sites,
 * WEFT_TRACE_SDT_ONLY):
 *
 *   task 1  "sched" "main" on the main thread (root), open throughout;
 *   task 2  "sched" "worker" (parent 1) on a second thread (pthread_create), begun first
 *           thing there and ended last thing;
 *   the two threads hand a token back and forth N times through a futex: each side waits
 *           (FUTEX_WAIT) until the token is its own, the other side gives it and calls
 *           FUTEX_WAKE.  FUTEX_WAKE returns how many threads it woke (0 when the other was
 *           not asleep yet), so the wakeups are counted, not guessed: "wakes A B" below;
 *   then K children, one after the other: child k (fork) begins task 100 + k "sched"
 *           "child" (parent 1), then execs this program (by the path /proc/self/exe names,
 *           so that its comm stays wl_sched) as `wl_sched --child`, which
 *           exits without ending the task (its thread's exit ends it); the parent waits.
 *
 * It prints "wl_sched: wakes A B forks K" where A counts the main thread's wakeups of the
 * worker, B the worker's of the main thread.  The kernel adds one wakeup of its own from task
 * 1's thread: the new worker thread's first (sched_wakeup_new), and one fork (the clone).
 */
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <weft/trace.h>

#define WL_SCHED_TRACE_HI 0x7765667400000005ull

static _Atomic uint32_t token; /* 0: the main thread's turn, 1: the worker's */
static long rounds, wakes_main, wakes_worker;

static long futex(_Atomic uint32_t *addr, int op, uint32_t val)
{
	return syscall(SYS_futex, (uint32_t *)addr, op, val, NULL, NULL, 0);
}

/* Waits for the token to be `mine`, then passes it on and wakes the other side. */
static long take_give(uint32_t mine)
{
	while (atomic_load(&token) != mine)
		futex(&token, FUTEX_WAIT_PRIVATE, !mine);
	atomic_store(&token, !mine);
	return futex(&token, FUTEX_WAKE_PRIVATE, 1);
}

static void *worker(void *arg)
{
	uint64_t hi = WL_SCHED_TRACE_HI, lo = 1, id = 2, parent = 1;

	(void)arg;
	WEFT_TASK_BEGIN(hi, lo, id, parent, "sched", "worker");
	for (long i = 0; i < rounds; i++)
		wakes_worker += take_give(1);
	WEFT_TASK_END(hi, lo, id, WEFT_STATUS_OK);
	return NULL;
}

int main(int argc, char **argv)
{
	uint64_t hi = WL_SCHED_TRACE_HI, lo = 1, root = 1, zero = 0;
	char self[4096];
	ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
	pthread_t th;
	long k;

	if (argc > 1 && strcmp(argv[1], "--child") == 0)
		return 0; /* the task its parent side began ends with this thread */
	rounds = argc > 1 ? strtol(argv[1], NULL, 10) : 100;
	k = argc > 2 ? strtol(argv[2], NULL, 10) : 3;
	if (rounds < 0 || k < 0 || len <= 0)
		return 2;
	self[len] = 0; /* exec'd by its path: the child keeps the comm wl_sched */
	WEFT_TASK_BEGIN(hi, lo, root, zero, "sched", "main");
	if (pthread_create(&th, NULL, worker, NULL) != 0)
		return 1;
	for (long i = 0; i < rounds; i++)
		wakes_main += take_give(0);
	pthread_join(th, NULL);
	for (long i = 0; i < k; i++) {
		pid_t pid = fork();
		int st;

		if (pid < 0)
			return 1;
		if (pid == 0) {
			uint64_t id = 100 + (uint64_t)i;

			WEFT_TASK_BEGIN(hi, lo, id, root, "sched", "child");
			execl(self, argv[0], "--child", (char *)NULL);
			_exit(127);
		}
		if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
			return 1;
	}
	printf("wl_sched: wakes %ld %ld forks %ld\n", wakes_main, wakes_worker, k);
	fflush(stdout);
	WEFT_TASK_END(hi, lo, root, WEFT_STATUS_OK);
	return 0;
}
