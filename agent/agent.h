/* SPDX-License-Identifier: Apache-2.0 */
/*
 * agent/ — runs compiled queries on one host.  `weft run` and `weft agent` share it.
 *
 *   agent_query_start()   open the object (bytes, from the compiler or the wire), size its
 *                         maps from the plan, set the -p filter, load (the verifier runs),
 *                         attach every attach point through its probe provider
 *   agent_query_window()  end the current window: flip, drain the idle half into a table
 *                         of mergeable states (agent/result.h), read the drop counters
 *   agent_query_poll()    streams: hand ring-buffer records to the row callback
 *   agent_query_stop()    detach everything; one last window collects what was in flight
 *   agent_query_free()
 *
 * Every probe is attached through a BPF link or perf-event file descriptor owned by this
 * process, so the kernel detaches it when the process dies, even by SIGKILL.
 * Nothing here exits or prints to stdout; errors come back as -errno with agent_err.
 */
#ifndef WEFT_AGENT_H
#define WEFT_AGENT_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "compiler/plan.h"
#include "kernel/weft_abi.h"

struct agent_table; /* agent/result.h */
struct agent_resolver; /* agent/result.h */

const char *agent_version(void);

struct agent_err {
	char msg[512]; /* one line: what failed */
	char detail[8192]; /* e.g. the generated line the verifier rejected and its message;
			    * the full verifier log with opts.verbose */
	bool verifier; /* the kernel's verifier rejected a program (E_VERIFIER) */
	bool attach; /* a probe could not be attached (E_ATTACH) */
};

/* Called for each stream record (after the weft_rec_hdr) by agent_query_poll(). */
typedef int (*agent_row_fn)(void *ctx, const struct plan *p, const void *rec, size_t len);

/* The one line that reports a failed agent_query_start() (rc): e's message, or strerror(-rc)
 * without one, and the tag that users and tests match, " [E_VERIFIER]" or " [E_ATTACH]". */
void agent_err_line(const struct agent_err *e, int rc, char *buf, size_t sz);

struct agent_query_opts {
	size_t sz; /* sizeof(struct agent_query_opts) */
	pid_t pid; /* -p: only this process (its thread group); 0: all */
	bool verbose; /* full verifier log in agent_err.detail */
	const char *host; /* this host's name for `host` (NULL: gethostname) */
	agent_row_fn on_row; /* streams */
	void *row_ctx;
	uint32_t max_groups; /* 0: the plan's */
	uint32_t ringbuf_bytes; /* 0: the plan's */
};

struct agent_query;

int agent_query_start(const struct plan *p, const void *obj, size_t obj_sz,
		      const struct agent_query_opts *opts, struct agent_query **out,
		      struct agent_err *err);

/* Losses and notes of one window, by enum weft_drop, plus events the kernel skipped. */
struct agent_window_stats {
	uint64_t index; /* 0, 1, 2, ... */
	uint64_t start_ns, end_ns; /* CLOCK_MONOTONIC */
	uint64_t drops[WEFT_DROP_NR];
	uint64_t misses; /* bpf recursion misses (events not seen at all) */
	uint64_t groups; /* groups read from the kernel */
};

/* Ends the current window: its groups are merged into `into` (which may hold earlier
 * windows: merging is how `for` without `every` gets one result), stats filled. */
int agent_query_window(struct agent_query *q, struct agent_table *into,
		       struct agent_window_stats *stats);

/* Streams: waits up to timeout_ms for records and delivers them; returns how many. */
int agent_query_poll(struct agent_query *q, int timeout_ms);
/* A file descriptor that becomes readable when stream records are waiting (or -1). */
int agent_query_fd(const struct agent_query *q);

/* Detaches every probe.  Windows can still be read afterwards (the last events). */
void agent_query_stop(struct agent_query *q);
void agent_query_free(struct agent_query *q);

const struct plan *agent_query_plan(const struct agent_query *q);
/* The resolver (stacks, symbols, host) that stream rows are printed with. */
const struct agent_resolver *agent_query_resolver(const struct agent_query *q);

#endif
