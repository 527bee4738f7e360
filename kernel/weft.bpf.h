/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The BPF-side runtime: the one header a generated program includes.  It brings the kernel UAPI
 * types, libbpf's helper declarations, the shared ABI (weft_abi.h) and the aggregate update
 * functions (weft_agg.bpf.h), and defines what every query's object has:
 *
 *  - the epoch control word weft_ctl (section .data.weft) and the sync map weft_sync through
 *    which the agent flips windows (protocol: docs/runtime.md);
 *  - the drop counters weft_drops, per CPU and per epoch, indexed by enum weft_drop;
 *  - macros that declare double-buffered aggregation maps (WEFT_AGG_HASH, WEFT_AGG_ARRAY),
 *    span tables (WEFT_SPAN_MAP) and, on request, the stream ring buffer (WEFT_WANT_RINGBUF)
 *    and the stack maps (WEFT_WANT_STACKS);
 *  - small always-inline accessors for fields, strings, stacks, spans and `like`.
 *
 * What a program must do: read the epoch once per event (`__u32 e = weft_epoch();`) and pass
 * that same `e` to everything it updates for the event, so that an event lands in one window
 * only.  What this header must never do: loop without a constant bound, read a map value
 * without a NULL check, or let an insert failure pass uncounted.
 *
 * Knobs a generated file may #define before including this header:
 *   WEFT_WANT_RINGBUF          declare weft_events (size set by the loader, default 256 KiB)
 *   WEFT_WANT_STACKS           declare weft_stacks_0/1 (max entries set by the loader)
 *   WEFT_WANT_PCR              declare weft_pcr and weft_pcr_pos, rings of each CPU's own for
 *                              kernel:sockets records (needs WEFT_WANT_RINGBUF)
 */
#ifndef WEFT_BPF_H
#define WEFT_BPF_H

#include <linux/types.h>
#include <linux/bpf.h>
#include <linux/ptrace.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#ifndef WEFT_INLINE
#define WEFT_INLINE static inline __attribute__((always_inline))
#endif

#include "weft_abi.h"
#include "weft_agg.bpf.h"

#ifndef NULL
#define NULL ((void *)0)
#endif
#ifndef EEXIST
#define EEXIST 17
#endif

/* Probe helpers such as bpf_probe_read_*() and bpf_get_stackid() are GPL-only. */
char _weft_license[] SEC("license") = "GPL";

/* ---------------------------------------------------------------------------------------- */
/* Windows: the epoch and the sync map                                                       */

/*
 * Alone in its own section so the agent can rewrite the whole section (it holds nothing else)
 * and find it by name.  Only the agent writes it; programs read it once per event.
 */
struct weft_ctl weft_ctl SEC(".data.weft") = { .epoch = 0, .abi = WEFT_ABI_VERSION, .live = 0 };

/*
 * weft_sync is never read by programs: the agent updates its one slot after writing a new
 * epoch, and the kernel then waits for an RCU grace period (map-in-map update ->
 * maybe_wait_bpf_programs() -> synchronize_rcu()), after which no program that read the old
 * epoch is still running.
 */
struct weft_sync_in_t {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} weft_sync_in SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, 1);
	__type(key, __u32);
	__array(values, struct weft_sync_in_t);
} weft_sync SEC(".maps") = { .values = { &weft_sync_in } };

/* The current epoch (0 or 1).  Read once per event; pass the result everywhere. */
WEFT_INLINE __u32 weft_epoch(void)
{
	return *(volatile __u32 *)&weft_ctl.epoch & 1;
}

/*
 * Whether the query is live: every probe attached, none detached yet.  Span programs return
 * at once while it is 0 (see struct weft_ctl).
 */
WEFT_INLINE __u32 weft_live(void)
{
	return *(volatile __u32 *)&weft_ctl.live;
}

/*
 * The cost meter (struct weft_cost, WEFT_COST_MAP): every generated program begins with
 * weft_cost_begin() and ends with weft_cost_end(), its body between.  A run is counted; one in
 * WEFT_COST_SAMPLE is timed.  `map` is the query's weft_cost map (declared by the generated
 * code, one slot per program), `idx` the program's slot.
 */
WEFT_INLINE struct weft_cost *weft_cost_begin(void *map, __u32 idx, __u64 *t0)
{
	struct weft_cost *c = bpf_map_lookup_elem(map, &idx);

	*t0 = 0;
	if (c && (c->calls++ & (WEFT_COST_SAMPLE - 1)) == 0)
		*t0 = bpf_ktime_get_ns();
	return c;
}

WEFT_INLINE void weft_cost_end(struct weft_cost *c, __u64 t0)
{
	if (c && t0) {
		c->ns += bpf_ktime_get_ns() - t0;
		c->sampled++;
	}
}

/* ---------------------------------------------------------------------------------------- */
/* Drop counters                                                                             */

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2 * WEFT_DROP_NR);
	__type(key, __u32);
	__type(value, __u64);
} weft_drops SEC(".maps");

/* Count one event of `reason` (enum weft_drop) in the window of epoch e. */
WEFT_INLINE void weft_drop(__u32 e, __u32 reason)
{
	__u32 i = (e & 1) * WEFT_DROP_NR + reason;
	__u64 *c = bpf_map_lookup_elem(&weft_drops, &i);

	if (c)
		(*c)++;
}

/* ---------------------------------------------------------------------------------------- */
/* Aggregation maps                                                                          */

/*
 * A grouped aggregation map: two PERCPU_HASH halves NAME_0 and NAME_1 (key K, value V), one
 * per epoch.  N is the default max_entries of each half; the loader resizes them
 * (bpfrt_map_resize(obj, "NAME", n)).  Also defines NAME_zero, the all-zero V an absent group
 * is inserted with (kernel/weft_aggval.h: zero is every aggregate's identity).
 *
 * Why two plain maps and not an ARRAY_OF_MAPS indexed by the epoch, nor the epoch in the key:
 * the verifier inlines a hash lookup only when it knows the map at the call site, so the
 * cheapest form is one call site per half, each with its own constant map (WEFT_AGG_UPDATE).
 * tools/bench/bench_rt measures the alternatives; docs/runtime.md quotes it.
 */
#define WEFT_AGG_HASH(NAME, K, V, N)                    \
	struct NAME##_half_t {                          \
		__uint(type, BPF_MAP_TYPE_PERCPU_HASH); \
		__uint(max_entries, N);                 \
		__type(key, K);                         \
		__type(value, V);                       \
	} NAME##_0 SEC(".maps"), NAME##_1 SEC(".maps"); \
	V NAME##_zero

/*
 * An aggregation without `group by`: a PERCPU_ARRAY of two V, the element of index e being
 * epoch e's value.  No insertion, so nothing can be dropped.
 */
#define WEFT_AGG_ARRAY(NAME, V)                          \
	struct {                                         \
		__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY); \
		__uint(max_entries, 2);                  \
		__type(key, __u32);                      \
		__type(value, V);                        \
	} NAME SEC(".maps")

/*
 * This CPU's value of group *key in one half, inserted zeroed if absent.  NULL when the half is
 * full: the event is counted as WEFT_DROP_MAP_FULL in epoch e and must be skipped.  BPF_NOEXIST,
 * so a racing insert of the same group on another CPU is never overwritten.
 */
WEFT_INLINE void *weft_agg_half_get(void *half, __u32 e, const void *key, const void *zero)
{
	void *v = bpf_map_lookup_elem(half, key);
	long err;

	if (v)
		return v;
	err = bpf_map_update_elem(half, key, zero, BPF_NOEXIST);
	if (err && err != -EEXIST) {
		weft_drop(e, WEFT_DROP_MAP_FULL);
		return NULL;
	}
	return bpf_map_lookup_elem(half, key);
}

/*
 * Update group *keyp of WEFT_AGG_HASH map NAME in epoch e: runs the statements `...` with `v`
 * pointing to this CPU's value (type of NAME_zero), or does nothing when the group could not
 * be inserted (counted).  The statements are emitted once per half; the two differently
 * spelled no-op asm statements keep clang from merging the halves' code back into one call
 * site with a variable map, which would cost the verifier's inlining.
 *
 *	WEFT_AGG_UPDATE(agg, e, &k, v, weft_aggval_count_add(&v->a0, 0);
 *			weft_aggval_sum_add(&v->a1, x););
 */
#define WEFT_AGG_UPDATE(NAME, e, keyp, v, ...)                                         \
	do {                                                                           \
		if (e) {                                                               \
			__typeof__(NAME##_zero) *v =                                   \
				weft_agg_half_get(&NAME##_1, 1, (keyp), &NAME##_zero); \
			if (v) {                                                       \
				__VA_ARGS__                                            \
			}                                                              \
			__asm__ __volatile__("%0 = %0" : "+r"(e));                     \
		} else {                                                               \
			__typeof__(NAME##_zero) *v =                                   \
				weft_agg_half_get(&NAME##_0, 0, (keyp), &NAME##_zero); \
			if (v) {                                                       \
				__VA_ARGS__                                            \
			}                                                              \
			__asm__ __volatile__("%0 += 0" : "+r"(e));                     \
		}                                                                      \
	} while (0)

/*
 * The same as a pointer, for code that needs one (a single call site: the map is chosen at run
 * time, so the lookup is not inlined — measurably slower than WEFT_AGG_UPDATE).
 */
#define WEFT_AGG_GET(NAME, e, keyp)                                                                \
	((__typeof__(NAME##_zero) *)weft_agg_half_get((e) ? (void *)&NAME##_1 : (void *)&NAME##_0, \
						      (e), (keyp), &NAME##_zero))

/* This CPU's value of epoch e of a WEFT_AGG_ARRAY map: `V *v = WEFT_AGG_GET1(agg, V, e);`. */
#define WEFT_AGG_GET1(NAME, V, e) ((V *)bpf_map_lookup_elem(&NAME, &(__u32){ (e) }))

/* ---------------------------------------------------------------------------------------- */
/* Streams                                                                                   */

#ifdef WEFT_WANT_RINGBUF
#ifndef WEFT_RINGBUF_DEFAULT_SIZE
#define WEFT_RINGBUF_DEFAULT_SIZE (256 * 1024)
#endif
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, WEFT_RINGBUF_DEFAULT_SIZE);
} weft_events SEC(".maps");

/*
 * Reserve a stream record of `size` bytes (a constant) for probe index `probe`, header filled.
 * NULL when the buffer is full: counted as WEFT_DROP_RINGBUF_FULL.  A non-NULL record must be
 * passed to WEFT_REC_SUBMIT() on every path (the verifier insists).
 */
WEFT_INLINE void *weft_rec_reserve_sz(__u32 size, __u16 probe, __u32 e)
{
	struct weft_rec_hdr *h = bpf_ringbuf_reserve(&weft_events, size, 0);

	if (!h) {
		weft_drop(e, WEFT_DROP_RINGBUF_FULL);
		return NULL;
	}
	h->probe = probe;
	h->epoch = (__u16)e;
	h->len = size;
	return h;
}

/* `struct rec0 *r = WEFT_REC_RESERVE(struct rec0, 0, e);` — rec0 begins with weft_rec_hdr. */
#define WEFT_REC_RESERVE(T, probe, e) ((T *)weft_rec_reserve_sz(sizeof(T), (probe), (e)))
#define WEFT_REC_SUBMIT(r) bpf_ringbuf_submit((r), 0)
#define WEFT_WAKE_CHECK 8 /* a look at the ring every 8th record of a program on a CPU */
#define WEFT_WAKE_EVERY 8 /* a wakeup every 8th look over the quarter: 64 records */

/*
 * The flags of a record's submit, counted in the program's cost slot c (struct weft_cost,
 * recs and over: per program and CPU, in the line its run touches anyway; NULL: never wake).
 * Every WEFT_WAKE_CHECK-th record of a program on a CPU looks at the ring (two queries: ~25 ns
 * a record when every record looked, docs/performance.md); none wakes the reader while less
 * than a quarter waits; the first look that finds a quarter waiting wakes it, and then one
 * look in WEFT_WAKE_EVERY while that lasts.  Not every record over the quarter: between the
 * crossing and the reader's catching up, a busy traced program submits hundreds, and each
 * forced wakeup costs it an interrupt (irq_work, a self-IPI: in this paravirtualised guest a
 * trap to the host), which took 3 % of redis-benchmark's throughput at ~54,000 requests a
 * second (docs/performance.md, "Kernel edges: the wakeups").  One wakeup is enough (the reader
 * empties the ring whenever it runs); the later ones are a safety net.
 */
WEFT_INLINE __u64 weft_rec_wake_flags(struct weft_cost *c)
{
	if (!c || (c->recs++ & (WEFT_WAKE_CHECK - 1)))
		return BPF_RB_NO_WAKEUP;
	if (bpf_ringbuf_query(&weft_events, BPF_RB_AVAIL_DATA) <=
	    bpf_ringbuf_query(&weft_events, BPF_RB_RING_SIZE) / 4) {
		c->over = 0;
		return BPF_RB_NO_WAKEUP;
	}
	return c->over++ & (WEFT_WAKE_EVERY - 1) ? BPF_RB_NO_WAKEUP : BPF_RB_FORCE_WAKEUP;
}

/*
 * Submit without waking the reader until a quarter of the buffer waits (weft_rec_wake_flags();
 * cost: the program's slot of WEFT_COST_MAP, as weft_cost_begin() returned it): what generated
 * programs use (stream rows and graph records), read by the agent's reader thread, which also
 * wakes by itself every 50 ms.  A row or a record per socket call must not cost the traced
 * program an interrupt and a wakeup of the agent each (docs/performance.md, "Kernel edges" and
 * "Stream rows").  The reader still sees every record: at the latest on its next timed poll.
 */
#define WEFT_REC_SUBMIT_LAZY(r, cost) bpf_ringbuf_submit((r), weft_rec_wake_flags(cost))

#ifdef WEFT_WANT_PCR
/*
 * Rings of each CPU's own, for the records of kernel:sockets (kernel/weft_abi.h, struct
 * weft_pcr_pos; docs/runtime.md, "Rings of a CPU's own").  Only for programs that run with
 * preemption off (tracepoints, raw tracepoints): `busy` protects a slot from a program that
 * interrupts another and ends before it resumes, not from one that preempts it.  The loader sizes both maps
 * (CPUs * weft_pcr_slots slots, CPUs positions) and sets weft_pcr_slots, a power of two; at 0
 * (a loader that sized nothing) every record goes to the shared ring.
 */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct weft_pcr_slot);
} weft_pcr SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct weft_pcr_pos);
} weft_pcr_pos SEC(".maps");

const volatile __u32 weft_pcr_slots = 0;

/* The slot's seq last, after the record: x86 keeps stores in order (a compiler barrier is
 * enough); elsewhere an exchange, which BPF orders fully. */
#if defined(__TARGET_ARCH_x86)
#define WEFT_PCR_PUBLISH(p, v)                         \
	do {                                           \
		__asm__ __volatile__("" ::: "memory"); \
		*(volatile __u64 *)(p) = (v);          \
	} while (0)
#else
#define WEFT_PCR_PUBLISH(p, v) ((void)__sync_lock_test_and_set((p), (v)))
#endif

/*
 * Reserve a record of `size` bytes (a constant, header included, at most the header and
 * WEFT_GREC_SHORT: a kernel:sockets record) for probe index `probe`: a slot of this CPU's
 * ring, *slot and *pos set; or, when the CPU's ring is in use by the program this one
 * interrupted (or there is none), a record of the shared ring, *slot NULL.  NULL when the
 * CPU's ring or the shared one is full (counted as WEFT_DROP_RINGBUF_FULL).  Pass what it
 * returns to WEFT_PCR_SUBMIT() on every path.
 */
WEFT_INLINE void *weft_pcr_reserve(__u32 size, __u16 probe, __u32 e, struct weft_pcr_slot **slot,
				   struct weft_pcr_pos **pos)
{
	__u32 n = weft_pcr_slots, cpu, i;
	struct weft_pcr_slot *s;
	struct weft_pcr_pos *p;
	__u64 head;

	*slot = NULL;
	*pos = NULL;
	if (n) {
		cpu = bpf_get_smp_processor_id();
		p = bpf_map_lookup_elem(&weft_pcr_pos, &cpu);
		if (p && !p->busy) {
			/* busy before head is read: a program that interrupts this one from
			 * here on writes to the shared ring, and one that came before is done */
			p->busy = 1;
			__asm__ __volatile__("" ::: "memory");
			head = p->head;
			if (head - *(volatile __u64 *)&p->tail >= n) {
				p->busy = 0;
				weft_drop(e, WEFT_DROP_RINGBUF_FULL);
				return NULL;
			}
			i = cpu * n + (__u32)(head & (n - 1));
			s = bpf_map_lookup_elem(&weft_pcr, &i);
			if (s) {
				p->head = head + 1;
				s->h.probe = probe;
				s->h.epoch = (__u16)e;
				s->h.len = size;
				*slot = s;
				*pos = p;
				return &s->h;
			}
			p->busy = 0;
		}
	}
	return weft_rec_reserve_sz(size, probe, e);
}

/*
 * Wake the agent's reader when this CPU's ring is a quarter full, by the rule of
 * weft_rec_wake_flags() (c: the program's cost slot): a record reserved in the shared ring
 * and discarded with a wakeup, which the reader skips (it reads the CPUs' rings whenever it
 * reads the shared one).
 */
WEFT_INLINE void weft_pcr_wake(struct weft_cost *c, struct weft_pcr_pos *p, __u32 n)
{
	void *w;

	if (!c || (c->recs++ & (WEFT_WAKE_CHECK - 1)))
		return;
	if (p->head - *(volatile __u64 *)&p->tail <= n / 4) {
		c->over = 0;
		return;
	}
	if (c->over++ & (WEFT_WAKE_EVERY - 1))
		return;
	w = bpf_ringbuf_reserve(&weft_events, 8, 0);
	if (w)
		bpf_ringbuf_discard(w, BPF_RB_FORCE_WAKEUP);
}

/* Commit a record of weft_pcr_reserve(): the slot's seq last, then the CPU's ring free
 * again; or the shared ring's submit (WEFT_REC_SUBMIT_LAZY). */
#define WEFT_PCR_SUBMIT(r, cost, slot, pos)                           \
	do {                                                          \
		if (slot) {                                           \
			WEFT_PCR_PUBLISH(&(slot)->seq, (pos)->head);  \
			__asm__ __volatile__("" ::: "memory");        \
			(pos)->busy = 0;                              \
			weft_pcr_wake((cost), (pos), weft_pcr_slots); \
		} else {                                              \
			WEFT_REC_SUBMIT_LAZY((r), (cost));            \
		}                                                     \
	} while (0)
#endif /* WEFT_WANT_PCR */
#endif /* WEFT_WANT_RINGBUF */

/* ---------------------------------------------------------------------------------------- */
/* Spans                                                                                     */

/*
 * A span table: HASH keyed by a __u64 (tid, or the value of `on`), value V whose first member
 * is `struct weft_span_hdr h` followed by the start-side values the end needs.  Not double
 * buffered: a span belongs to the window of its end.  N is the default max_entries.
 */
#define WEFT_SPAN_MAP(NAME, V, N)                \
	struct {                                 \
		__uint(type, BPF_MAP_TYPE_HASH); \
		__uint(max_entries, N);          \
		__type(key, __u64);              \
		__type(value, V);                \
	} NAME SEC(".maps")

/*
 * Record a span start: stamps val->h.start_ns and stores *val under key.  A start that finds an
 * unmatched one of its key replaces it (recursion pairs innermost first, as in bpftrace) and
 * counts the lost outer span as WEFT_DROP_SPAN_REPLACED; a start that finds the table full is
 * counted as WEFT_DROP_SPAN_FULL.  Returns 0 or -1.
 */
WEFT_INLINE int weft_span_begin(void *map, __u32 e, __u64 key, void *val)
{
	long err;

	((struct weft_span_hdr *)val)->start_ns = bpf_ktime_get_ns();
	err = bpf_map_update_elem(map, &key, val, BPF_NOEXIST);
	if (err == -EEXIST) {
		weft_drop(e, WEFT_DROP_SPAN_REPLACED);
		err = bpf_map_update_elem(map, &key, val, BPF_ANY);
	}
	if (err) {
		weft_drop(e, WEFT_DROP_SPAN_FULL);
		return -1;
	}
	return 0;
}

/*
 * Match a span end: copies the start's value into *out (the span table's V), removes it, and
 * evaluates to the duration in ns, or to -1 when there is no start or the agent's sweep
 * evicted it first.  Exactly one of "matched here" and "evicted by the sweep" happens to a
 * start: whoever deletes it owns it.  An end without a start is counted as
 * WEFT_DROP_SPAN_NO_START when `note` (a constant) is true; the code generator passes false
 * when the query's predicate filters starts in a way the end cannot check, since such ends
 * are then mostly of filtered calls.
 */
#define WEFT_SPAN_MATCH(map, e, key, out, note)                                        \
	({                                                                             \
		__s64 __d = -1;                                                        \
		__u64 __k = (key);                                                     \
		__typeof__(out) __v = bpf_map_lookup_elem((map), &__k);                \
		if (!__v) {                                                            \
			if (note)                                                      \
				weft_drop((e), WEFT_DROP_SPAN_NO_START);               \
		} else {                                                               \
			*(out) = *__v;                                                 \
			if (bpf_map_delete_elem((map), &__k) == 0)                     \
				__d = (__s64)(bpf_ktime_get_ns() - (out)->h.start_ns); \
		}                                                                      \
		__d;                                                                   \
	})

/* WEFT_SPAN_MATCH that notes every end without a start. */
#define WEFT_SPAN_END(map, e, key, out) WEFT_SPAN_MATCH(map, e, key, out, 1)

/* ---------------------------------------------------------------------------------------- */
/* Built-in fields                                                                           */

/*
 * Process filter set by the loader before load (bpfrt_rodata_set(obj, "weft_target_pid")):
 * 0 traces every process, otherwise only the thread group of that pid.
 */
const volatile __u32 weft_target_pid = 0;

WEFT_INLINE __u32 weft_pid(void)
{
	return (__u32)(bpf_get_current_pid_tgid() >> 32);
}

WEFT_INLINE __u32 weft_tid(void)
{
	return (__u32)bpf_get_current_pid_tgid();
}

/* True when the event's process passes the -p filter. */
WEFT_INLINE int weft_pid_ok(void)
{
	return !weft_target_pid || weft_pid() == weft_target_pid;
}

/*
 * The scope of the query (enum weft_scope, set by the loader like weft_target_pid): which
 * processes an event must come from.  Both variables are read-only data the loader fills
 * before load, so the verifier knows their values and drops the branches a scope does not
 * take: an unscoped query (WEFT_SCOPE_ALL) pays one load of weft_scope_kind and no branch,
 * and a scoped one runs only its own kind's check.
 */
const volatile __u32 weft_scope_kind = WEFT_SCOPE_ALL;
const volatile __u32 weft_scope_netns = 0; /* WEFT_SCOPE_NETNS: the namespace's inode number */

/*
 * WEFT_SCOPE_CGROUP: slot 0 holds the scope's cgroup v2 directory (the loader puts its file
 * descriptor there after load).  bpf_current_task_under_cgroup() asks the kernel whether the
 * current task's cgroup is that one or below it.  Chosen over comparing
 * bpf_get_current_ancestor_cgroup_id(level) with the directory's id because the level is the
 * cgroup's depth in the whole hierarchy, which an agent inside a cgroup namespace (a
 * container) cannot see: its /sys/fs/cgroup starts at its namespace's root.  The kernel's own
 * walk needs nothing from user space but the directory, and costs one helper call.
 */
struct {
	__uint(type, BPF_MAP_TYPE_CGROUP_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} weft_scope_cgroup SEC(".maps");

/*
 * WEFT_SCOPE_NETNS: where the network namespace's inode number is, from the task: the byte
 * offsets of task_struct.nsproxy, nsproxy.net_ns and net.ns.inum in the running kernel, which
 * the loader finds in the kernel's BTF and sets with the scope (agent/scope.c).  Not CO-RE
 * relocations: any of those in an object makes libbpf load and parse the whole vmlinux BTF
 * (5.5 MB here, 5 to 80 ms) at every load, scoped or not, and every query would pay for what
 * only a netns scope needs.  Unset (0: no kernel has nsproxy first), the read gives 0, which
 * no namespace has: a scope that could not be configured traces nothing, never everything.
 */
const volatile __u32 weft_netns_off_nsproxy = 0;
const volatile __u32 weft_netns_off_net = 0;
const volatile __u32 weft_netns_off_inum = 0;

/*
 * The inode number of the current task's network namespace (task->nsproxy->net_ns->ns.inum,
 * what stat() of /proc/PID/ns/net gives as st_ino), or 0 when it has none: a task that is
 * exiting has released its namespaces (nsproxy NULL), and the faulting read yields 0.
 */
WEFT_INLINE __u32 weft_netns(void)
{
	const char *t = (const char *)bpf_get_current_task(), *nsp = NULL, *net = NULL;
	__u32 inum = 0;

	if (!weft_netns_off_nsproxy ||
	    bpf_probe_read_kernel(&nsp, sizeof(nsp), t + weft_netns_off_nsproxy) || !nsp ||
	    bpf_probe_read_kernel(&net, sizeof(net), nsp + weft_netns_off_net) || !net ||
	    bpf_probe_read_kernel(&inum, sizeof(inum), net + weft_netns_off_inum))
		return 0;
	return inum;
}

/*
 * True when the event's task is inside the query's scope.  Called right after weft_pid_ok(),
 * before any map work.
 */
WEFT_INLINE int weft_scope_ok(void)
{
	__u32 kind = weft_scope_kind; /* one load: the verifier knows its value */

	if (kind == WEFT_SCOPE_NETNS)
		return weft_netns() == weft_scope_netns;
	if (kind == WEFT_SCOPE_CGROUP)
		return bpf_current_task_under_cgroup(&weft_scope_cgroup, 0) == 1;
	return 1;
}

WEFT_INLINE __u32 weft_uid(void)
{
	return (__u32)bpf_get_current_uid_gid();
}

WEFT_INLINE __u32 weft_cpu(void)
{
	return bpf_get_smp_processor_id();
}

WEFT_INLINE __u64 weft_cgroup(void)
{
	return bpf_get_current_cgroup_id();
}

/* CLOCK_MONOTONIC ns, the clock of `time`, `duration` and the span sweep. */
WEFT_INLINE __u64 weft_time(void)
{
	return bpf_ktime_get_ns();
}

#define WEFT_COMM_LEN 16
/* The task's comm, NUL-padded to 16 bytes (so it can be part of a hash key as is). */
WEFT_INLINE void weft_comm(char *buf16)
{
	bpf_get_current_comm(buf16, WEFT_COMM_LEN);
}

/* ---------------------------------------------------------------------------------------- */
/* Probe arguments                                                                           */

/*
 * A tracepoint field at byte offset `off` of the raw record (offsets from tracefs format).
 * T must be the field's 1-, 2-, 4- or 8-byte type and off a multiple of its size; the common_*
 * fields (off < 8) are not readable by BPF programs.
 */
#define WEFT_TP(ctx, off, T) (*(const T *)((const char *)(ctx) + (off)))

/* A raw tracepoint argument (BPF_PROG_TYPE_RAW_TRACEPOINT). */
#define WEFT_RAW_ARG(ctx, n) ((__s64)((struct bpf_raw_tracepoint_args *)(ctx))->args[n])

/* uprobe/kprobe/USDT-less function arguments 0..5 and the return value (x86-64 ABI). */
#define WEFT_ARG0(ctx) ((__s64)PT_REGS_PARM1((struct pt_regs *)(ctx)))
#define WEFT_ARG1(ctx) ((__s64)PT_REGS_PARM2((struct pt_regs *)(ctx)))
#define WEFT_ARG2(ctx) ((__s64)PT_REGS_PARM3((struct pt_regs *)(ctx)))
#define WEFT_ARG3(ctx) ((__s64)PT_REGS_PARM4((struct pt_regs *)(ctx)))
#define WEFT_ARG4(ctx) ((__s64)PT_REGS_PARM5((struct pt_regs *)(ctx)))
#if defined(__TARGET_ARCH_x86)
#define WEFT_ARG5(ctx) ((__s64)((struct pt_regs *)(ctx))->r9)
#endif
#define WEFT_RETVAL(ctx) ((__s64)PT_REGS_RC((struct pt_regs *)(ctx)))

/* ---------------------------------------------------------------------------------------- */
/* Strings                                                                                   */

/* Account a bpf_probe_read_*_str() result n for a buffer of `size`: fault -> "", full -> note. */
WEFT_INLINE long weft_str_account(__u32 e, char *buf, __u32 size, long n)
{
	if (n < 0) {
		buf[0] = 0;
		weft_drop(e, WEFT_DROP_STR_FAULT);
		return 0;
	}
	if ((__u64)n >= size)
		weft_drop(e, WEFT_DROP_STR_TRUNC);
	return n;
}

/*
 * A NUL-terminated user (or kernel) string of at most size - 1 bytes into buf.  Bytes after the
 * NUL are left as they were: zero the buffer (or the key holding it) first when it is hashed.
 * Returns the length including the NUL, 0 on a fault.
 */
WEFT_INLINE long weft_str_user(__u32 e, char *buf, __u32 size, const void *p)
{
	return weft_str_account(e, buf, size, bpf_probe_read_user_str(buf, size, p));
}

WEFT_INLINE long weft_str_kernel(__u32 e, char *buf, __u32 size, const void *p)
{
	return weft_str_account(e, buf, size, bpf_probe_read_kernel_str(buf, size, p));
}

/* A tracepoint's `__data_loc char[]` field at `off`: (len << 16 | offset) into the record. */
WEFT_INLINE long weft_tp_str_loc(__u32 e, void *ctx, __u32 off, char *buf, __u32 size)
{
	__u32 loc = WEFT_TP(ctx, off, __u32);

	return weft_str_kernel(e, buf, size, (const char *)ctx + (loc & 0xffff));
}

/*
 * A tracepoint's inline `char f[N]` field at `off` (N = asize), read as a string into size
 * bytes (at most N + 1).  A string that fills the buffer is cut only if the array goes on past
 * it: with size <= N, if the array's byte at size - 1 is not its NUL (a 15-character comm
 * fills a 16-byte buffer exactly and is whole); read whole (size N + 1), if the array has no
 * NUL at all, as for a kernel struct's char array.
 */
WEFT_INLINE long weft_tp_str(__u32 e, void *ctx, __u32 off, char *buf, __u32 size, __u32 asize)
{
	long n = bpf_probe_read_kernel_str(buf, size, (const char *)ctx + off);

	if (n < 0) {
		buf[0] = 0;
		weft_drop(e, WEFT_DROP_STR_FAULT);
		return 0;
	}
	if ((__u64)n >= size && (size > asize || WEFT_TP(ctx, off + size - 1, char) != 0))
		weft_drop(e, WEFT_DROP_STR_TRUNC);
	return n;
}

/* WEFT_GLOB_MAX (weft_abi.h): the longest literal of WEFT_STREQ / WEFT_LIKE, NUL included */
#define WEFT_GLOB_STR_MAX 4096 /* longest string `like` looks at */

/*
 * Whether the string in s (a buffer of ssz bytes) equals the literal lit.  lit must be a string
 * literal: its length is a compile-time constant, so the comparison unrolls to straight-line
 * code (at most WEFT_GLOB_MAX bytes).
 */
#define WEFT_STREQ(s, ssz, lit) weft_streq_n((s), (ssz), (lit), sizeof(lit) - 1)
WEFT_INLINE int weft_streq_n(const char *s, __u32 ssz, const char *lit, __u32 n)
{
	if (n >= ssz || n >= WEFT_GLOB_MAX) /* lit and its NUL must fit into s */
		return 0;
#pragma clang loop unroll(full)
	for (__u32 j = 0; j < WEFT_GLOB_MAX; j++) {
		if (j > n)
			break;
		if (s[j] != lit[j])
			return 0;
	}
	return 1;
}

/*
 * WEFT_STREQ for a string at the start of an 8-byte-aligned buffer of ssz bytes, a multiple of
 * 8 (a string in a stream query's scratch): the literal's bytes and its NUL are compared a
 * word at a time, each word and its mask folded at compile time, so a comm against a literal is
 * two compares instead of sixteen.  The bytes after the NUL are not looked at (a kernel before
 * 6.x may leave an older name's bytes there).
 */
#define WEFT_STREQ_W(s, ssz, lit) weft_streq_w((const __u64 *)(s), (ssz), (lit), sizeof(lit) - 1)
WEFT_INLINE int weft_streq_w(const __u64 *s, __u32 ssz, const char *lit, __u32 n)
{
	if (n >= ssz || n >= WEFT_GLOB_MAX) /* lit and its NUL must fit into s */
		return 0;
#pragma clang loop unroll(full)
	for (__u32 w = 0; w < WEFT_GLOB_MAX / 8; w++) {
		__u64 word = 0, mask = 0;

		if (w * 8 > n)
			break;
#pragma clang loop unroll(full)
		for (__u32 b = 0; b < 8; b++) {
			if (w * 8 + b > n)
				break;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
			word |= (__u64)(__u8)lit[w * 8 + b] << (8 * b);
			mask |= (__u64)0xff << (8 * b);
#else
			word |= (__u64)(__u8)lit[w * 8 + b] << (56 - 8 * b);
			mask |= (__u64)0xff << (56 - 8 * b);
#endif
		}
		if ((s[w] & mask) != word)
			return 0;
	}
	return 1;
}

/*
 * `s like pat`: glob with `*` (any run, also empty) and `?` (any one byte); every other byte,
 * `[` and `\\` included, is literal.  pat must be a string literal of at most
 * WEFT_GLOB_MAX - 1 bytes.  The matcher is a bit-parallel NFA — bit j of the state means "the
 * first j pattern bytes are matched" — so it is one bounded loop over s, linear in the string,
 * with no backtracking.  Everything that depends on the pattern folds at compile time, and the
 * per-byte step is branch-free arithmetic, so the verifier's cost is one pass over the loop
 * (no state explosion) and the run time is a few instructions per pattern byte per string
 * byte.
 */
#define WEFT_LIKE(s, ssz, lit) weft_glob((s), (ssz), (lit), sizeof(lit) - 1)

/* 1 << bit when c == p, else 0, without a branch: (c ^ p) - 1 wraps only for c == p. */
WEFT_INLINE __u64 weft_glob_eq_bit(unsigned char c, unsigned char p, __u32 bit)
{
	return ((((__u64)(unsigned char)(c ^ p)) - 1) >> 63) << bit;
}

/*
 * Closure of state d over runs of stars (a star may match nothing): a bit inside a run of
 * star positions (mask star) spreads to the rest of the run and the position after it.  That
 * is a carry chain: adding the run to the bits in it carries to the run's end.
 */
WEFT_INLINE __u64 weft_glob_skip_stars(__u64 d, __u64 star)
{
	return d | (((d & star) + star) ^ star);
}

WEFT_INLINE int weft_glob(const char *s, __u32 ssz, const char *pat, __u32 plen)
{
	__u64 star = 0, any = 0, stay, d;
	__u32 i;

	if (plen >= WEFT_GLOB_MAX)
		return 0;
#pragma clang loop unroll(full)
	for (__u32 j = 0; j < WEFT_GLOB_MAX - 1; j++) {
		if (j >= plen)
			break;
		if (pat[j] == '*')
			star |= 1ULL << j;
		else if (pat[j] == '?')
			any |= 1ULL << (j + 1);
	}
	stay = star << 1; /* past a star, any byte keeps the state */
	d = weft_glob_skip_stars(1, star);
	for (i = 0; i < WEFT_GLOB_STR_MAX; i++) {
		unsigned char c;
		__u64 m = any;

		if (i >= ssz)
			break;
		c = (unsigned char)s[i];
		if (!c)
			break;
#pragma clang loop unroll(full)
		for (__u32 j = 0; j < WEFT_GLOB_MAX - 1; j++) {
			if (j >= plen)
				break;
			if (pat[j] != '*' && pat[j] != '?')
				m |= weft_glob_eq_bit(c, (unsigned char)pat[j], j + 1);
		}
		d = weft_glob_skip_stars(((d << 1) & m) | (d & stay), star);
	}
	return (int)((d >> plen) & 1);
}

/* ---------------------------------------------------------------------------------------- */
/* Stacks                                                                                    */

#ifdef WEFT_WANT_STACKS
#ifndef WEFT_STACKS_DEFAULT_ENTRIES
#define WEFT_STACKS_DEFAULT_ENTRIES 4096
#endif
/*
 * One STACK_TRACE map per epoch: stack ids in the keys of epoch e's aggregates refer to
 * weft_stacks_e, which the agent clears only after it has read that window (bpfrt).
 */
struct weft_stacks_t {
	__uint(type, BPF_MAP_TYPE_STACK_TRACE);
	__uint(max_entries, WEFT_STACKS_DEFAULT_ENTRIES);
	__type(key, __u32);
	__uint(value_size, WEFT_STACK_DEPTH * sizeof(__u64));
} weft_stacks_0 SEC(".maps"), weft_stacks_1 SEC(".maps");

/* A stack id for epoch e, or -1 (counted as WEFT_DROP_STACK). */
WEFT_INLINE __s64 weft_stack_id(void *ctx, __u32 e, __u64 flags)
{
	long id;

	if (e)
		id = bpf_get_stackid(ctx, &weft_stacks_1, flags);
	else
		id = bpf_get_stackid(ctx, &weft_stacks_0, flags);
	if (id < 0) {
		weft_drop(e, WEFT_DROP_STACK);
		return -1;
	}
	return id;
}

#define weft_ustack(ctx, e) weft_stack_id((ctx), (e), BPF_F_USER_STACK)
#define weft_kstack(ctx, e) weft_stack_id((ctx), (e), 0)
/* A stack id with a depth limit (weft_abi.h): -1 stays -1. */
WEFT_INLINE __s64 weft_stack_depth(__s64 id, __u64 depth)
{
	return id < 0 ? id :
			(id | (__s64)((depth & WEFT_STACK_DEPTH_MASK) << WEFT_STACK_DEPTH_SHIFT));
}
#endif /* WEFT_WANT_STACKS */

#include "weft_net.bpf.h" /* ntop(), sockport(), join() */

#endif /* WEFT_BPF_H */
