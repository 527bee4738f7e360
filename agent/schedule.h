/* SPDX-License-Identifier: Apache-2.0 */
/*
 * When a running query's windows close and its kernel maps flip: the one schedule that
 * `weft run` (tools/weft_run.c) and the agent daemon (agent/daemon.c) follow.
 *
 * Window w covers [epoch + w * every, epoch + (w + 1) * every) on the window clock, and the
 * query ends at `end`; every 0 is one window up to the end.  The maps flip at each window's
 * close and at least once per flip_max in between, whatever `every` is: per-CPU counters
 * stay far from overflow and a long window costs no more kernel memory than a short one (the
 * flipped halves are merged into the window's table in user space).
 *
 * Two clocks, which the caller reads and passes in (nothing here reads a clock, sleeps or
 * allocates, so the schedule is unit-tested with made-up times): windows and the end on the
 * window clock, flips on CLOCK_MONOTONIC, which a step of the wall clock never stops.  The
 * daemon's window clock is CLOCK_REALTIME, so that window w is the same span of wall time on
 * every host; weft run's is CLOCK_MONOTONIC, from its start.
 *
 * A caller that wakes late (a stopped process, a loaded machine) follows one of two
 * policies, and that is the one difference between the two users:
 *   catch_up   every window closes in turn, however late (weft run: one window per `every`
 *              and indices 0, 1, 2, ... as a user counts them; the events of the time it
 *              slept are in the first window it closes, the next ones close at once);
 *   skip       the next window is the one that holds now (the daemon: windows are aligned
 *              across hosts, and a wall-clock step of hours must not ship thousands of empty
 *              partials); agent_sched_close() says how many were skipped.
 *
 * The loop of both users:
 *     switch (agent_sched_due(&s, now, mono)) {
 *     case AGENT_SCHED_END:    detach, flip, emit window s.window as the last; done
 *     case AGENT_SCHED_CLOSE:  flip, emit window s.window; agent_sched_close(&s, now, mono)
 *     case AGENT_SCHED_FLIP:   flip (merge into the open window); agent_sched_flipped(&s, mono)
 *     case AGENT_SCHED_NONE:   wait for events, at most agent_sched_wait_ns(&s, now, mono)
 *     }
 * The loop itself stays with each user: weft run polls a signalfd, the traced process's
 * pidfd and a stream's ring buffer, one query at a time; the daemon polls ZeroMQ sockets for
 * many queries and a connection.  A shared loop would need both sets of events as callbacks
 * and would be longer than the two it replaced.
 *
 * Other loops that "tail a query" are not this one, on purpose:
 *   - `weft submit` (tools/weft_submit.c) and the cluster benchmark's client
 *     (tools/bench/cluster_sim.c) read merged results from an aggregator: no kernel maps,
 *     no windows of their own (the aggregator closes them).  What they share is already one
 *     implementation, aggd_client_recv() and aggd_client_progress() of
 *     aggregator/aggd_client.c (reconnect, resubscribe, acknowledge); what is left differs
 *     (printing, --attach reading the plan from the first result, Ctrl-C detaching; against
 *     submitting in the same loop and timing every arrival on a benchmark thread).
 *   - The tests' harness (tests/runtime/run_util.h: wr_wait_in(), wr_finish();
 *     tests/cluster/cluster_util.h: cl_wait_log()) and tools/bench/tsrun.c tail the output
 *     of a weft process, not a query; see those files for why they stay apart.
 */
#ifndef WEFT_AGENT_SCHEDULE_H
#define WEFT_AGENT_SCHEDULE_H
#include <stdbool.h>
#include <stdint.h>

#define AGENT_FLIP_MAX_NS 1000000000ULL /* the maps flip at least once a second */

struct agent_sched {
	uint64_t epoch; /* window 0 starts here (window clock) */
	uint64_t every; /* a window's length; 0: one window */
	uint64_t end; /* the query's end (window clock); UINT64_MAX: none */
	uint64_t window; /* the index of the window being filled */
	uint64_t close_at; /* its end (window clock); UINT64_MAX when every is 0 */
	uint64_t flip_max; /* ns between flips at most */
	uint64_t last_flip; /* CLOCK_MONOTONIC */
	bool catch_up; /* the late-wake policy (see the top) */
};

enum agent_sched_due {
	AGENT_SCHED_NONE, /* nothing is due */
	AGENT_SCHED_FLIP, /* flip_max has passed since the last flip */
	AGENT_SCHED_CLOSE, /* window s.window has ended (and the query goes on after it) */
	AGENT_SCHED_END, /* the query has ended: window s.window is the last */
};

/* Starts the schedule at now (window clock) and mono: the window that holds now is the first
 * to be filled (window 0 before the epoch). */
void agent_sched_init(struct agent_sched *s, uint64_t epoch, uint64_t every, uint64_t end,
		      bool catch_up, uint64_t now, uint64_t mono);

enum agent_sched_due agent_sched_due(const struct agent_sched *s, uint64_t now, uint64_t mono);

/* Window s.window was closed (and the maps flipped) at now and mono: the next one is being
 * filled.  Returns how many windows were skipped (always 0 with catch_up). */
uint64_t agent_sched_close(struct agent_sched *s, uint64_t now, uint64_t mono);

/* The maps were flipped at mono. */
void agent_sched_flipped(struct agent_sched *s, uint64_t mono);

/* Nanoseconds until agent_sched_due() can say anything but NONE; 0 if it does now. */
uint64_t agent_sched_wait_ns(const struct agent_sched *s, uint64_t now, uint64_t mono);

/* The window that holds t (0 before the epoch, and always with every 0). */
uint64_t agent_sched_window_of(const struct agent_sched *s, uint64_t t);
/* Makes w the window being filled (a query that ended before it reached the agent reports
 * the window that holds its end). */
void agent_sched_set_window(struct agent_sched *s, uint64_t w);

#endif
