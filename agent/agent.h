/* SPDX-License-Identifier: Apache-2.0 */
/*
 * agent/ — runs compiled queries on one host.  `weft run` and `weft agent` share it.
 *
 *   agent_query_start()   open the object (bytes, from the compiler or the wire), size its
 *                         maps from the plan, set the -p filter and the scope, load (the
 *                         verifier runs),
 *                         attach every attach point through its probe provider
 *   agent_query_window()  end the current window: flip, drain the idle half into a table
 *                         of mergeable states (agent/result.h), read the drop counters
 *   agent_query_poll()    streams: hand ring-buffer records to the row callback
 *   agent_query_budget()  the CPU budget: a verdict per window of about a second; a query
 *                         that stays over it is detached
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
struct agent_scope; /* agent/scope.h */

const char *agent_version(void);

struct agent_err {
	char msg[512]; /* one line: what failed */
	char detail[8192]; /* e.g. the generated line the verifier rejected and its message;
			    * the full verifier log with opts.verbose */
	bool verifier; /* the kernel's verifier rejected a program (E_VERIFIER) */
	bool attach; /* a probe could not be attached (E_ATTACH) */
	bool reloc; /* a kernel struct field the query reads is not in this kernel (E_BTF_RELOC) */
};

/* Called for each stream record (after the weft_rec_hdr) by agent_query_poll(); a negative
 * return ends that poll after this record (which is consumed), and the poll returns it. */
typedef int (*agent_row_fn)(void *ctx, const struct plan *p, const void *rec, size_t len);

/* The one line that reports a failed agent_query_start() (rc): e's message, or strerror(-rc)
 * without one, and the tag that users and tests match, " [E_VERIFIER]", " [E_BTF_RELOC]" or
 * " [E_ATTACH]". */
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
	double cpu_budget; /* % of one CPU the query's probes may use (agent_query_budget());
			    * 0: no budget (tools pass AGENT_CPU_BUDGET_DEFAULT) */
	const struct agent_scope *scope; /* only these processes (agent/scope.h); NULL: all.
					  * Borrowed: it must stay open while the query runs */
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
	uint64_t spans_open; /* span starts not yet ended when the window was read: spans in
			      * flight; after agent_query_stop(), spans that never ended */
	bool spans_known; /* spans_open was read (a local query with spans; a cluster's merged
			   * window does not know it) */
};

/* Ends the current window: its groups are merged into `into` (which may hold earlier
 * windows: merging is how `for` without `every` gets one result), stats filled. */
int agent_query_window(struct agent_query *q, struct agent_table *into,
		       struct agent_window_stats *stats);

/* Streams: waits up to timeout_ms for records and delivers them; returns how many. */
int agent_query_poll(struct agent_query *q, int timeout_ms);
/* A file descriptor that becomes readable when stream records are waiting (or -1). */
int agent_query_fd(const struct agent_query *q);

/*
 * What one program of the query has cost so far, from the cost meter every program keeps
 * (kernel/weft_abi.h, WEFT_COST_MAP), summed over the CPUs: its runs, the runs timed (one in
 * WEFT_COST_SAMPLE, the first on each CPU included) and their time.  0, or -ENOENT for an
 * object without the meter or a program it has no slot for; -errno if the map cannot be read.
 */
struct agent_prog_cost {
	uint64_t calls, sampled, ns;
};
int agent_query_cost(const struct agent_query *q, int prog, struct agent_prog_cost *c);

/* Detaches every probe.  Windows can still be read afterwards (the last events). */
void agent_query_stop(struct agent_query *q);
void agent_query_free(struct agent_query *q);

/*
 * The CPU budget: what a query's probes cost the machine, checked once a window of about a
 * second (AGENT_CPU_BUDGET_WINDOW_NS) against `cpu_budget` % of one CPU.  The cost of a window
 * is, summed over the query's BPF programs, their run time in the kernel (each program's own
 * cost meter, agent_query_cost(), one run in WEFT_COST_SAMPLE timed and scaled to all; for an
 * object without the meter the kernel's BPF statistics, on while the query runs) plus, for user probes
 * (uprobe, uretprobe, usdt), each run times the cost of one hit of such a probe measured on
 * this machine (probe_uprobe_cost(): the trap, which the statistics do not see and which is
 * most of a uprobe's cost).  A window over the budget is a warning (W_CPU_BUDGET); the
 * AGENT_CPU_BUDGET_WINDOWS-th window over in a row detaches the query (E_CPU_BUDGET).
 */
#define AGENT_CPU_BUDGET_DEFAULT 5.0 /* % of one CPU: 50 ms per second */
#define AGENT_CPU_BUDGET_WINDOWS 3 /* consecutive windows over the budget: detached */
#define AGENT_CPU_BUDGET_WINDOW_NS 1000000000ull
#define AGENT_CPU_BUDGET_HOT 3 /* programs named in a report, hottest first */

enum agent_budget_verdict {
	AGENT_BUDGET_UNDER, /* within the budget */
	AGENT_BUDGET_OVER, /* over it: a warning */
	AGENT_BUDGET_STOPPED, /* over it AGENT_CPU_BUDGET_WINDOWS times in a row: detached */
};

/* One BPF program of the query in one window. */
struct agent_budget_prog {
	char prog[32]; /* "wp0" */
	char probe[PROBE_NAME_MAX * 2]; /* its first attach point */
	int sites; /* its attach points */
	uint64_t cost_ns; /* run_ns + trap_ns */
	uint64_t run_ns; /* BPF run time */
	uint64_t trap_ns; /* calls x the measured cost of one user-probe hit; 0 for others */
	uint64_t calls; /* runs */
};

struct agent_budget_report {
	enum agent_budget_verdict verdict;
	uint64_t index; /* budget windows of this query: 0, 1, ... */
	double budget_pct; /* the budget, % of one CPU */
	uint64_t window_ns; /* the window's length */
	uint64_t budget_ns; /* budget_pct of window_ns */
	uint64_t cost_ns, run_ns, trap_ns, calls; /* summed over the query's programs */
	unsigned over; /* windows over the budget in a row, this one included */
	unsigned limit; /* AGENT_CPU_BUDGET_WINDOWS */
	int nhot;
	struct agent_budget_prog hot[AGENT_CPU_BUDGET_HOT]; /* by cost, highest first */
	char text[1536]; /* one line for people (no tag), e.g. "over its CPU budget: ..." */
};

/*
 * Called at least once a second (each window flip will do).  0: no budget, or no window
 * ended since the last call; 1: a window ended and r describes it.  AGENT_BUDGET_STOPPED means
 * the query was detached (agent_query_stop()) before returning: read its last window and
 * report r->text.  -errno if the statistics could not be read (the query runs on).
 */
int agent_query_budget(struct agent_query *q, struct agent_budget_report *r);
/* Starts measuring the CPU budget (the first window begins now): call it right after
 * agent_query_start() has returned and the start is announced.  agent_query_budget() starts
 * it too if it has not been; idempotent. */
void agent_query_budget_start(struct agent_query *q);
/* Whether the budget stopped the query. */
bool agent_query_budget_stopped(const struct agent_query *q);

const struct plan *agent_query_plan(const struct agent_query *q);
/* The resolver (stacks, symbols, host) that stream rows are printed with. */
const struct agent_resolver *agent_query_resolver(const struct agent_query *q);

#endif
