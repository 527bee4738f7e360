/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Types that cross the kernel/user boundary, defined once and included by both the BPF runtime
 * (kernel/weft.bpf.h) and the agent's window machinery (agent/bpfrt.c): the epoch control
 * word, the drop counters, the stream record header and the span table entry header, plus the
 * names of the maps through which the agent finds them in a loaded object.
 *
 * What must hold: plain fixed-width integers only, every field naturally aligned, no implicit
 * padding, so that clang -target bpf and the host lay every struct out identically.  A change
 * here changes the ABI between a compiled query and the agent: bump WEFT_ABI_VERSION.
 */
#ifndef WEFT_ABI_H
#define WEFT_ABI_H

#include <linux/types.h>

#define WEFT_ABI_VERSION 5

/*
 * Map and section names the agent looks up (docs/runtime.md, "Map layouts").  An aggregation
 * map NAME declared with WEFT_AGG_HASH / WEFT_AGG_ARRAY is found by NAME as well.
 */
#define WEFT_CTL_SEC ".data.weft" /* holds struct weft_ctl weft_ctl, nothing else */
#define WEFT_SYNC_MAP "weft_sync" /* ARRAY_OF_MAPS; updating it waits for an RCU GP */
#define WEFT_SYNC_INNER_MAP "weft_sync_in" /* the one inner map of weft_sync */
#define WEFT_DROPS_MAP "weft_drops" /* PERCPU_ARRAY[2 * WEFT_DROP_NR] of __u64 */
#define WEFT_EVENTS_MAP "weft_events" /* RINGBUF of stream records (WEFT_WANT_RINGBUF) */
#define WEFT_STACKS0_MAP "weft_stacks_0" /* STACK_TRACE maps of epoch 0 and 1 (WEFT_WANT_STACKS) */
#define WEFT_STACKS1_MAP "weft_stacks_1"
#define WEFT_COST_MAP "weft_cost" /* PERCPU_ARRAY[programs] of struct weft_cost */
#define WEFT_PCR_MAP "weft_pcr" /* mmapable ARRAY[CPUs * slots] of struct weft_pcr_slot */
#define WEFT_PCR_POS_MAP "weft_pcr_pos" /* mmapable ARRAY[CPUs] of struct weft_pcr_pos */
#define WEFT_PCR_SLOTS_VAR "weft_pcr_slots" /* rodata __u32: slots a CPU (0: no weft_pcr) */

/*
 * What a query's programs cost, measured by the programs themselves (the CPU budget,
 * agent/budget.c): per program and CPU, its runs, and for one run in WEFT_COST_SAMPLE (the
 * first of each CPU, then every WEFT_COST_SAMPLE-th) the time from its start to its end
 * (bpf_ktime_get_ns()).  The kernel's own statistics (bpf_enable_stats()) time every run of
 * every BPF program of the host for as long as anyone holds them on; this times one run in
 * WEFT_COST_SAMPLE of the query's own.  An object without the map is measured the old way.
 */
#define WEFT_COST_SAMPLE 32 /* a power of two */
struct weft_cost {
	__u64 calls; /* runs */
	__u64 sampled; /* runs timed */
	__u64 ns; /* their time */
	/*
	 * Not the meter's: the program's records submitted with WEFT_REC_SUBMIT_LAZY on this CPU,
	 * and its looks at the ring since one last found less than a quarter waiting.  Here, in
	 * the slot every run touches anyway, rather than in a map of their own: one cache line
	 * and one lookup less a record (docs/performance.md, "Kernel edges: what a record per call
	 * costs").  The agent reads neither.
	 */
	__u32 recs;
	__u32 over;
};

/*
 * The epoch control word, the only variable of section WEFT_CTL_SEC.  Programs read `epoch`
 * once per event and update only that half of every double-buffered map; the agent alone
 * writes it (see the window protocol in docs/runtime.md).  `live` is 0 until the agent has
 * attached every probe of the query and again from when it begins to detach them: the two
 * programs of a span do nothing while it is 0, so that spans start and stop together whatever
 * order their probes attach and detach in (docs/runtime.md, "Spans at attach and detach").
 */
struct weft_ctl {
	__u32 epoch; /* 0 or 1 */
	__u32 abi; /* WEFT_ABI_VERSION, as compiled into the object */
	__u32 live; /* 1 while every probe of the query is attached */
};

/*
 * Why an event (or part of one) did not make it into a result.  weft_drops holds one per-CPU
 * __u64 per (epoch, reason) at index epoch * WEFT_DROP_NR + reason, so that counts belong to a
 * window exactly like aggregates do.  WEFT_DROP_SPAN_EVICTED is counted by the agent (the
 * sweep runs in user space); its kernel slot stays zero.
 */
enum weft_drop {
	/* losses: an event, row or span that is not in any result */
	WEFT_DROP_MAP_FULL = 0, /* a new group did not fit into an aggregation map */
	WEFT_DROP_RINGBUF_FULL = 1, /* a stream row found the ring buffer full */
	WEFT_DROP_SPAN_FULL = 2, /* a span start found the span table full */
	WEFT_DROP_SPAN_EVICTED = 3, /* an unmatched span start was swept by age (agent) */
	WEFT_DROP_SPAN_REPLACED = 4, /* a span start replaced an unmatched one of its key */
	/* notes: the event counted, one of its values is degraded or it had nothing to pair */
	WEFT_DROP_STACK = 5, /* a stack could not be recorded: its id is -1 */
	WEFT_DROP_STR_FAULT = 6, /* a string read faulted: the value is "" */
	WEFT_DROP_STR_TRUNC = 7, /* a string filled its buffer: it may be truncated */
	WEFT_DROP_SPAN_NO_START = 8, /* a span end without a start: began before the query went
				      * live, or its start was lost (counted as such) */
	WEFT_DROP_NR = 9,
};

/* Stable names of the reasons, for reports and the manifest, indexed by enum weft_drop. */
#define WEFT_DROP_NAMES                                                                            \
	{                                                                                          \
		"map_full", "ringbuf_full", "span_table_full", "span_evicted",                     \
			"span_start_replaced", "stack_failed", "string_fault", "string_truncated", \
			"span_end_without_start"                                                   \
	}

/* True for the reasons that mean lost data (the others are notes about values). */
#define WEFT_DROP_IS_LOSS(r) ((r) <= WEFT_DROP_SPAN_REPLACED)

/*
 * Every ring buffer record starts with this header; the code generator defines one record
 * struct per stream probe whose first member is it.  `len` is the whole record's size.
 */
struct weft_rec_hdr {
	__u16 probe; /* query-local probe index (the manifest's numbering) */
	__u16 epoch; /* window epoch the row was produced in */
	__u32 len; /* sizeof the whole record, header included */
};

/*
 * Every span table value starts with this header (key: __u64 tid or `on` key).  The agent's
 * sweep reads start_ns only, so it needs no knowledge of the saved start-side values.
 */
struct weft_span_hdr {
	__u64 start_ns; /* bpf_ktime_get_ns() (CLOCK_MONOTONIC) at the start probe */
};

/*
 * What part of the machine a query traces (`weft run --scope`, `weft agent --scope`): every
 * process, the processes of one network namespace, or those of one cgroup v2 subtree.  The
 * loader sets the rodata variables weft_scope_kind (one of these), weft_scope_netns (the
 * namespace's inode number) and fills the one slot of WEFT_SCOPE_CGROUP_MAP (a CGROUP_ARRAY)
 * with the cgroup directory (docs/runtime.md, "Scope").
 */
enum weft_scope {
	WEFT_SCOPE_ALL = 0,
	WEFT_SCOPE_NETNS = 1,
	WEFT_SCOPE_CGROUP = 2,
};
#define WEFT_SCOPE_CGROUP_MAP "weft_scope_cgroup"

/*
 * A graph query's record (docs/language.md, "Graph queries"): every program of a graph query
 * writes this one layout after struct weft_rec_hdr, whatever its source, and agent/graphcap.c
 * assembles the records into tasks, events and edges.  `kind` says what fired:
 *   WEFT_GREC_TASK_BEGIN  weft:task_begin: a = trace_hi, trace_lo, task, parent; s0 = service,
 *                         s1 = name
 *   WEFT_GREC_TASK_END    weft:task_end: a = trace_hi, trace_lo, task, status
 *   WEFT_GREC_EVENT       weft:event: a = trace_hi, trace_lo, task; s0 = name
 *   WEFT_GREC_EDGE        weft:edge: a = trace_hi, trace_lo, kind (a pointer), from_task,
 *                         from_event, to_task, to_event; s0 = kind ("parent", "message", ...)
 *   WEFT_GREC_SPAN        an instance of span(...): time is its end, dur its duration; the
 *                         probe is the cookie (the span's start attach point)
 *   WEFT_GREC_KSEND       kernel:sockets, a send on a TCP socket: a = laddr, raddr (IPv4, host
 *                         order; 0 on IPv6), lport, rport, the stream's sequence number after
 *                         the send (tcp_sock.write_seq), bytes, the socket's address (its
 *                         identity); family = WEFT_AF_INET or WEFT_AF_INET6, and on IPv6 in6 =
 *                         the local then the remote address (16 bytes each, network order, as
 *                         the socket has them: an IPv4 peer v4-mapped, ::ffff:a.b.c.d)
 *   WEFT_GREC_KRECV       kernel:sockets, a receive: the same, the sequence number after the
 *                         read (tcp_sock.copied_seq)
 *   WEFT_GREC_KWAKE       kernel:sched, a wakeup (sched:sched_wakeup, sched_wakeup_new): the
 *                         waker is the record's thread; a[0] = the woken thread's tid
 *   WEFT_GREC_KFORK       kernel:process, sched:sched_process_fork: the parent is the record's
 *                         thread; a[0] = the child's tid (a process's first thread: its pid)
 *   WEFT_GREC_KEXEC       kernel:process, sched:sched_process_exec: s0 = the file executed
 *   WEFT_GREC_KEXIT       kernel:process, sched:sched_process_exit: the record's thread exits
 *   WEFT_GREC_KERNEL_BASE and above: kernel edge sources
 * Strings are read from the traced process, bounded by WEFT_GREC_STR (NUL-terminated, cut).
 */
#define WEFT_GREC_STR 128
#define WEFT_GREC_NARGS 7

enum weft_grec_kind {
	WEFT_GREC_TASK_BEGIN = 1,
	WEFT_GREC_TASK_END = 2,
	WEFT_GREC_EVENT = 3,
	WEFT_GREC_EDGE = 4,
	WEFT_GREC_SPAN = 5,
	WEFT_GREC_KERNEL_BASE = 16,
	WEFT_GREC_KSEND = 16,
	WEFT_GREC_KRECV = 17,
	WEFT_GREC_KWAKE = 18,
	WEFT_GREC_KFORK = 19,
	WEFT_GREC_KEXEC = 20,
	WEFT_GREC_KEXIT = 21,
};

struct weft_graph_rec {
	__u64 time; /* bpf_ktime_get_ns() (CLOCK_MONOTONIC); a span's end */
	__u64 dur; /* a span's duration, else 0 */
	__u32 pid, tid;
	__u32 kind; /* enum weft_grec_kind */
	__u32 cookie; /* the attach point (the manifest's probe numbering) */
	__u64 a[WEFT_GREC_NARGS];
	char comm[16];
	/* WEFT_GREC_KSEND and KRECV only (other kinds leave them unwritten): the socket's
	 * family (WEFT_AF_INET, or 0 as the agent reads it: the addresses are a[0], a[1];
	 * WEFT_AF_INET6: they are in6; any other: a bad record) */
	__u32 family;
	__u32 reserved;
	__u8 in6[32];
	/* the strings last: a record of a kind without strings (KSEND, KRECV) ends here,
	 * WEFT_GREC_SHORT bytes, and the agent reads the strings as empty */
	char s0[WEFT_GREC_STR];
	char s1[WEFT_GREC_STR];
};

/* The size of a record without its strings: kernel socket records are this long, since a
 * record costs the traced program by its bytes too (docs/performance.md, "Kernel edges"). */
#define WEFT_GREC_SHORT __builtin_offsetof(struct weft_graph_rec, s0)

/*
 * The records of kernel:sockets go into a ring of each CPU's own (WEFT_WANT_PCR; protocol:
 * docs/runtime.md, "Rings of a CPU's own"): no lock and no atomic instruction a record, where
 * the shared ring buffer takes a spin lock with interrupts off and an atomic exchange
 * (docs/performance.md).  weft_pcr holds weft_pcr_slots slots for each CPU in turn;
 * weft_pcr_pos one struct weft_pcr_pos a CPU.  The CPU's program writes slot head % slots
 * (head - tail < slots, else the record is lost and counted as WEFT_DROP_RINGBUF_FULL), sets
 * head + 1, and then, last, the slot's seq to the position + 1: the agent reads a slot while
 * its seq is its position + 1 and then advances tail.  `busy` is set while a program of the CPU
 * writes: a program that finds it set (one that interrupted another) writes to the shared
 * ring instead.  head and busy are written only by the CPU's programs, tail only by the agent.
 */
struct weft_pcr_pos {
	__u64 head; /* records begun on this CPU */
	__u64 tail; /* records the agent has read */
	__u32 busy; /* a program of this CPU is writing a slot */
	__u32 pad0;
	__u64 pad[5]; /* a cache line a CPU */
};

struct weft_pcr_slot {
	__u64 seq; /* the slot's position + 1 once its record is whole */
	struct weft_rec_hdr h; /* h.len: the record's bytes from h on */
	__u8 b[WEFT_GREC_SHORT];
};

/* Depth of recorded stacks: STACK_TRACE map values are WEFT_STACK_DEPTH __u64 addresses. */
#define WEFT_STACK_DEPTH 127
/* A stack value (a key or field) is the STACK_TRACE map's id in its low 32 bits; a depth
 * limit (kstack(8): the 8 innermost frames) rides in bits 32..39, 0 meaning all.  The agent
 * reads the id's frames and keeps that many; groups whose truncated stacks are equal merge
 * by their text (agent/table.c's canonical keys). */
#define WEFT_STACK_ID_MASK 0xffffffffULL
#define WEFT_STACK_DEPTH_SHIFT 32
#define WEFT_STACK_DEPTH_MASK 0xffULL

/*
 * The longest string literal the kernel compares a string with (`=`, `!=`, `in`, `like`),
 * NUL included: WEFT_STREQ unrolls that many bytes and WEFT_LIKE's bit-parallel matcher keeps
 * one bit per pattern byte in a __u64.  The compiler refuses longer literals (E_CONST_RANGE),
 * which the kernel side would never match.
 */
#define WEFT_GLOB_MAX 64

/*
 * ntop(): an address value as the kernel writes it into a key or a record (24 bytes): the
 * family (__u16, host order: 2 AF_INET, 10 AF_INET6, another family as the sockaddr said, 0
 * none) at 0, the address at WEFT_INET_ADDR (4 or 16 bytes, network order), zeros elsewhere.
 * The agent prints it as text (inet_ntop: IPv6 as RFC 5952).
 */
#define WEFT_INET_SIZE 24
#define WEFT_INET_ADDR 8
#define WEFT_AF_INET 2
#define WEFT_AF_INET6 10

/* join(argv [, SEP]): at most WEFT_JOIN_MAX_ARGS elements and WEFT_JOIN_MAX_BYTES bytes (NUL
 * included); a cut argv ends with WEFT_JOIN_MORE.  SEP has at most WEFT_JOIN_MAX_SEP bytes. */
#define WEFT_JOIN_MAX_ARGS 16
#define WEFT_JOIN_MAX_BYTES 256
#define WEFT_JOIN_MAX_SEP 8
#define WEFT_JOIN_MORE "..."

#endif
