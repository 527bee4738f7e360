/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Virtual machines: what a guest's vCPUs were really doing, seen from the host, and each guest
 * thread's time corrected by it (docs/vm.md).
 *
 * A guest thread that looks "running" from inside the guest may be stalled: its vCPU left
 * guest mode to let the hypervisor handle an exit, went up to the VMM in user space, or its
 * host thread was preempted.  Neither side alone sees it.  This folder fuses the two:
 *
 *   1. host pass (vm/vcpu.c): the host's events drive one state machine per vCPU thread:
 *
 *        kvm_entry ------------------------------------------> GUEST (GUEST_L2 if nested)
 *        kvm_exit (reason) -----------------------------------> HYPERVISOR
 *        kvm_userspace_exit ----------------------------------> VMM
 *        sched_switch out, still runnable (preempted) --------> PREEMPTED
 *        sched_switch out, blocked (halted, waiting) ---------> IDLE
 *        sched_wakeup while IDLE ------------------------------> PREEMPTED (runnable, no CPU)
 *        sched_switch in -------------------------------------> the state it left (GUEST,
 *                                                                HYPERVISOR or VMM)
 *        kvm_nested_vmenter / kvm_nested_vmexit_inject -------> L2 runs / L1 runs again: the
 *                                                                next entries are GUEST_L2 /
 *                                                                GUEST
 *
 *      A thread is a vCPU from its first kvm event on (any kvm_* tracepoint fires on the vCPU
 *      thread); its first state is the one that event implies (HYPERVISOR for events the
 *      host kernel emits while handling an exit).  Every kvm_exit is counted by reason
 *      (vm/exits.h names them) and its latency, from the exit to the next entry, goes into
 *      a quantile sketch (kernel/aggstate.h's, 1.6 % relative error).
 *   2. synchronisation (vm/fuse.c): guest times become host times by an offset recovered
 *      from synchronisation points, with a stated error bound (below).
 *   3. guest pass (vm/fuse.c): each guest thread's time on a guest CPU is split by the
 *      state of the vCPU under it: RUNNING where the vCPU was in guest mode, HOST where it
 *      was not (preempted by the host: in the hypervisor, in the VMM, preempted or idle on
 *      the host), UNTRACED where the host stream does not cover it.
 *
 * TSC points.  A guest that reads its TSC next to its clock records "vm_tsc" (time, fields
 * tsc, after); the host stream gives each vCPU's TSC offset (kvm_write_tsc_offset) and one
 * "tsc_clock" reference (its TSC and its clock read together, the TSC's kHz, the reads' gap
 * as error_ns).  The guest's TSC minus the offset is the host's TSC, which the reference
 * turns into host ns: the point's offset lies in [h - after, h - time] widened by the
 * reference's error and 1 ns of rounding, and joins the hypercall points' intersection.  A
 * vCPU whose offset was written again with another value cannot be converted (E_VM_SYNC).
 *
 * Synchronisation.  The guest records a point with its time just before a hypercall and just
 * after it returns ("vm_sync" with fields id, after); the host sees the hypercall as
 * kvm:kvm_hypercall with nr VM_SYNC_HYPERCALL and a0 = id.  The host's event happened between
 * the guest's two readings, so the offset (host - guest) of point i lies in
 * [t_host - t_after, t_host - t_before]; the offset is the middle of the intersection over
 * all points and the error bound half its width.  Points that do not intersect (the clocks
 * drift, or the points are wrong) are refused (E_VM_SYNC), never averaged (the arithmetic is
 * vm/sync.h's, which the aggregator's live pairs of `weft vm sync` share).  A guest stream
 * without points is refused (E_VM_NO_SYNC) unless the caller says its times already are host
 * times (assume_synced), and the result then says the error is unknown.
 *
 * What it must never do: trust its input (every event is checked by vm/stream.c, every
 * number for range), grow without bound (vCPUs, threads, reasons and intervals are bounded
 * by VM_MAX_*; reaching one is E_VM_LIMIT), or report a fused view whose clocks it could not
 * relate without saying so.
 */
#ifndef WEFT_VM_VM_H
#define WEFT_VM_VM_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "graph/graph.h"
#include "vm/stream.h"

#define VM_SYNC_HYPERCALL 0x77656674ULL /* "weft": the nr of a synchronisation hypercall */
/* The event a recorder writes when it lost events (weft vm record: rows that found a ring
 * buffer full): fields.rows, how many */
#define VM_LOST_EVENT "weft_lost"

#define VM_MAX_VCPUS 4096
#define VM_MAX_THREADS (1u << 20) /* guest threads */
#define VM_MAX_REASONS 1024 /* distinct (isa, exit reason) pairs */
#define VM_MAX_INTERVALS (16u << 20) /* state intervals kept, host and guest together */
#define VM_MAX_SYNC (1u << 20) /* synchronisation points */

enum vm_state {
	VM_GUEST, /* in guest mode (L1) */
	VM_GUEST_L2, /* in guest mode, running a nested guest (L2) */
	VM_HYPERVISOR, /* in the host kernel, handling an exit */
	VM_VMM, /* in the VMM in user space (after kvm_userspace_exit) */
	VM_PREEMPTED, /* runnable on the host, but not running */
	VM_IDLE, /* blocked on the host (the guest halted, or the VMM waits) */
	VM_NSTATES,
	VM_UNKNOWN = VM_NSTATES, /* before the vCPU's first event */
};

/* A guest thread's fused state */
enum vm_gstate {
	VM_G_RUNNING, /* on a guest CPU whose vCPU was in guest mode */
	VM_G_HOST, /* on a guest CPU whose vCPU was not: preempted by the host */
	VM_G_UNTRACED, /* on a guest CPU, but the host stream does not cover that time */
	VM_G_WAITING, /* runnable in the guest, not on a CPU */
	VM_G_BLOCKED, /* blocked in the guest */
	VM_G_NSTATES,
};

const char *vm_state_name(enum vm_state s);
const char *vm_gstate_name(enum vm_gstate s);

/*
 * One interval [start, end) of a vCPU (state: enum vm_state, exit: the index into
 * vm_analysis.exits of the exit being handled in HYPERVISOR and what followed it until the
 * next entry, -1 if none) or of a guest thread (state: enum vm_gstate; host: the vCPU's
 * state in VM_G_HOST; exit: the index of the vCPU in vm_analysis.vcpus while on a CPU the
 * host traced, else -1).  Times are host ns.
 */
struct vm_interval {
	int64_t start, end;
	uint8_t state, host;
	int32_t exit;
};

struct vm_exit_stat {
	uint32_t isa, reason;
	const char *name; /* NULL: unknown to vm/exits.c, shown as the number */
	uint64_t count; /* kvm_exit events */
	uint64_t samples; /* exits whose next entry was seen: latencies in the sketch */
	int64_t min_ns, max_ns, sum_ns; /* of the latencies (sum_ns saturates at INT64_MAX) */
	void *sketch; /* the quantile state (kernel/aggstate.h) */
};

struct vm_vcpu {
	int64_t tid, pid; /* the host thread (pid -1 if the stream did not say) */
	int64_t vcpu_id; /* from kvm_entry/kvm_exit's vcpu_id; -1 until seen */
	int64_t first_ns, last_ns; /* the span its states cover */
	int64_t state_ns[VM_NSTATES];
	uint64_t exits, nested_entries;
	struct vm_interval *iv;
	size_t niv, capiv;
	/* the machine */
	enum vm_state state, resume; /* resume: the on-CPU state to go back to when switched in */
	int64_t since;
	int32_t cur_exit; /* exit being handled (index), -1 */
	int64_t exit_time;
	bool nested;
};

struct vm_gthread {
	int64_t tid;
	char comm[16];
	int64_t state_ns[VM_G_NSTATES];
	int64_t host_ns[VM_NSTATES]; /* VM_G_HOST time by the vCPU's state */
	struct vm_interval *iv;
	size_t niv, capiv;
	/* the machine */
	int64_t cpu; /* the guest CPU it runs on, -1 if not running */
	enum vm_gstate off; /* when not running: WAITING or BLOCKED */
	int64_t since; /* host ns; -1 before its first event */
};

struct vm_sync {
	bool guest; /* a guest stream was given */
	bool synced; /* the offset comes from points */
	bool assumed; /* no points: guest times taken as host times, error unknown */
	size_t points;
	int64_t offset_ns; /* host = guest + offset */
	int64_t error_ns; /* |true offset - offset_ns| <= error_ns */
};

struct vm_opts {
	size_t sz; /* sizeof(struct vm_opts) */
	const char *host, *guest; /* inputs (vm_stream_open_input()); guest may be NULL */
	int64_t vm_pid; /* the guest's VM (its VMM's pid) when the host has several; 0: any */
	bool assume_synced; /* a guest without points: its times are host times */
	size_t max_intervals; /* 0: VM_MAX_INTERVALS */
};

struct vm_analysis {
	int64_t host_first_ns, host_last_ns;
	uint64_t host_events, guest_events;
	uint64_t unknown_exits; /* kvm_exit events whose reason no table names */
	struct vm_vcpu *vcpus;
	size_t nvcpus;
	struct vm_exit_stat *exits;
	size_t nexits;
	struct vm_gthread *threads;
	size_t nthreads;
	struct vm_sync sync;
	/* private */
	struct vm_sync_host {
		uint64_t id;
		int64_t time;
	} * hsync; /* the host's synchronisation hypercalls */
	size_t nhsync, caphsync;
	struct vm_tsc_offset {
		int64_t vcpu_id, pid;
		uint64_t offset; /* guest TSC = host TSC + offset (mod 2^64) */
		unsigned long changed; /* a line where it was written again with another value */
	} * tscoff; /* from kvm_write_tsc_offset */
	size_t ntscoff, captscoff;
	struct {
		bool have;
		int64_t time, error_ns; /* host ns when the host's TSC read tsc; the reads' gap */
		uint64_t tsc, khz;
	} tscref; /* the host's first tsc_clock event */
	size_t intervals, max_intervals;
	size_t capvcpus, capexits, capthreads;
	struct vm_tidmap {
		int64_t *key;
		uint32_t *val;
		size_t cap, n;
	} vmap, tmap; /* host tid -> vCPU, guest tid -> thread */
	/* what reading a CTF input (vm/ctf.c) could not carry over; all 0 for a stream file */
	struct vm_ctf_stats host_ctf, guest_ctf;
	/* events the recorder lost ("weft_lost" events of either stream: fields.rows, summed,
	 * saturating): the reports say so, states around them may be wrong */
	uint64_t lost_events;
};

/* Runs the whole analysis of o->host (and o->guest): 0 into *a, or -1 with err set. */
int vm_analyze(const struct vm_opts *o, struct vm_analysis *a, struct vm_err *err);
void vm_analysis_free(struct vm_analysis *a);

/* The steps vm_analyze() runs (tests drive them on streams in memory). */
void vm_analysis_init(struct vm_analysis *a, size_t max_intervals);
int vm_host_pass(struct vm_analysis *a, struct vm_stream *host, struct vm_err *err);
int vm_sync_pass(struct vm_analysis *a, struct vm_stream *guest, bool assume_synced,
		 struct vm_err *err);
int vm_guest_pass(struct vm_analysis *a, struct vm_stream *guest, int64_t vm_pid,
		  struct vm_err *err);

/* Quantile q (0..1) of an exit reason's latency (ns; the sketch's nearest rank). */
double vm_exit_quantile(const struct vm_exit_stat *x, double q);

/* The vCPU of host thread tid, or NULL. */
const struct vm_vcpu *vm_vcpu_of_tid(const struct vm_analysis *a, int64_t tid);
/* The guest thread tid, or NULL. */
const struct vm_gthread *vm_gthread_of(const struct vm_analysis *a, int64_t tid);

/*
 * The fused view as one trace of an execution graph (vm/graph.c has its shape): appended to
 * g, checked (graph_check()); times + epoch_ns.  0, or with why[] set: -EINVAL (no guest
 * threads, or a graph graph_check() refuses), -ENODATA (the threads have no intervals), -ERANGE
 * (a time before 0, or past INT64_MAX with the epoch), -ENOMEM.  *trace is the trace's id.
 */
int vm_to_graph(const struct vm_analysis *a, int64_t epoch_ns, struct graph *g,
		struct graph_id128 *trace, char *why, size_t whysz);

/* Reports (vm/report.c): text for people, one JSON object for programs.  0 or -EIO. */
struct vm_report_opts {
	size_t sz;
	size_t top; /* guest threads listed (most time lost first); 0: 10 */
	bool intervals; /* JSON: every state interval too */
};
int vm_report_text(FILE *f, const struct vm_analysis *a, const struct vm_report_opts *o);
int vm_report_json(FILE *f, const struct vm_analysis *a, const struct vm_report_opts *o);

#endif
