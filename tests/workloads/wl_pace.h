/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The page `wl_syscalls N T wait paced` shares with its tracer (fd 3, mapped MAP_SHARED), so
 * that the tracer can keep the workload running for as many windows as it flips, whatever
 * the machine's speed: every thread makes its call i only once i < allow, and stores i + 1
 * in done[k] (k: the thread's index) when call i has returned.  The tracer raises allow as
 * it goes; ULONG_MAX lets the threads finish.
 *
 * A tracer that reads done[k] == d after some event E, and later done[k] >= d + 2, knows
 * that thread k entered a system call after E: call d + 1 began after done[k] = d + 1 was
 * stored, which the tracer had not seen yet.
 */
#ifndef WEFT_WL_PACE_H
#define WEFT_WL_PACE_H

#include <stdatomic.h>

#define WL_PACE_FD 3
#define WL_PACE_MAX_THREADS 64

struct wl_pace {
	_Atomic unsigned long allow; /* calls each thread may have made */
	_Atomic unsigned long done[WL_PACE_MAX_THREADS]; /* calls thread k has made */
};

#endif
