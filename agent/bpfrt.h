/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bpfrt — the user side of the BPF runtime (kernel/weft.bpf.h): windows, drains, drop counters,
 * streams and span sweeps over a libbpf object whose maps follow the runtime's naming
 * convention (kernel/weft_abi.h).  It knows nothing about queries: keys and values are bytes,
 * interpreted by the caller through the manifest.
 *
 * Life cycle:
 *   bpfrt_libbpf_setup()                       once per process: libbpf log -> weft_log
 *   bpf_object__open_file()
 *   bpfrt_map_resize(), bpfrt_rodata_set(),    before load: sizes and constants
 *   bpfrt_pcr_size()
 *   bpf_object__load(), attach
 *   rt = bpfrt_open(obj)
 *   bpfrt_live_set(rt, true)                   once all is attached: spans start
 *   loop: bpfrt_window_flip(rt);               epoch e -> e^1, then an RCU grace period
 *         bpfrt_agg_drain(rt, map, fn, ctx)    for every aggregation map: idle half read+cleared
 *         bpfrt_drops_read(rt, counts)         idle half's drop counters, read+cleared
 *         bpfrt_span_sweep(rt, map, max_age)   now and then
 *   bpfrt_stream_reader_start(rt, max)         optional: a thread empties the ring into a queue
 *   bpfrt_stream_poll(rt, timeout)             whenever (another thread may poll)
 *   bpfrt_live_set(rt, false); detach; two last flips with drains collect everything;
 *   bpfrt_close(rt).
 *
 * The window protocol and why no event is lost or counted twice: docs/runtime.md.  What must
 * hold for the caller: after bpfrt_window_flip() returns, drain every aggregation map and the
 * drops before the next flip (the half becomes active again at that flip).  Stack ids found in
 * the idle half stay valid until the next flip.  Not thread-safe except bpfrt_stream_poll(),
 * which may run in its own thread.  Memory is bounded: one drain buffer of at most
 * BPFRT_DRAIN_BUF_BYTES (plus one entry when a single entry is larger).
 */
#ifndef WEFT_AGENT_BPFRT_H
#define WEFT_AGENT_BPFRT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <bpf/libbpf.h>
#include "kernel/weft_abi.h"

#define BPFRT_DRAIN_BUF_BYTES (1u << 20)

struct bpfrt;

/*
 * Forward libbpf's log into weft_log (warnings as warnings, the rest as debug) and turn on
 * libbpf 1.0 semantics.  RLIMIT_MEMLOCK is not touched: kernels >= 5.11 charge BPF memory to
 * the memory cgroup.
 */
void bpfrt_libbpf_setup(void);

/*
 * Before load: set max_entries of map `name`: for a WEFT_AGG_HASH map NAME, of both halves;
 * "weft_stacks" sizes both stack maps; for "weft_events" `n` is the ring size in bytes, rounded
 * up to a power of two of at least a page.  WEFT_AGG_ARRAY maps have a fixed size (-EINVAL).
 */
int bpfrt_map_resize(struct bpf_object *obj, const char *name, uint32_t n);

/* Before load: set the .rodata variable `var` (a `const volatile` global) to size bytes. */
int bpfrt_rodata_set(struct bpf_object *obj, const char *var, const void *val, size_t size);

/*
 * Before load: size the rings of each CPU's own (weft_pcr, kernel/weft.bpf.h WEFT_WANT_PCR) to
 * about ring_bytes a CPU (0: 2 MiB), at most BPFRT_PCR_MAX_BYTES for all CPUs together, and
 * at least BPFRT_PCR_MIN_SLOTS records a CPU.  0 and nothing done when obj has none.
 */
#define BPFRT_PCR_MAX_BYTES (64u << 20)
#define BPFRT_PCR_MIN_SLOTS 256u
int bpfrt_pcr_size(struct bpf_object *obj, uint32_t ring_bytes);

/* After load: the runtime state of obj (not owned).  NULL and errno if obj lacks the runtime. */
struct bpfrt *bpfrt_open(struct bpf_object *obj);
void bpfrt_close(struct bpfrt *rt);

/* Number of possible CPUs: the length of every per-CPU value array. */
unsigned int bpfrt_ncpu(const struct bpfrt *rt);

/* The epoch programs currently update, and the idle one the drains read. */
unsigned int bpfrt_epoch(const struct bpfrt *rt);

/*
 * Flip the window: clear the stack maps of the new epoch (read in the previous window), make
 * it current, then wait until no program that read the old epoch can still be running (an
 * update of weft_sync: synchronize_rcu() in the kernel).  After 0, the old epoch is idle and
 * complete.  On error the idle half must not be drained (drains then fail with -EAGAIN) until
 * a later flip succeeds.
 */
int bpfrt_window_flip(struct bpfrt *rt);

/*
 * Set weft_ctl.live: 1 once every probe of the query is attached, 0 before the first detach.
 * Span programs do nothing while it is 0 (kernel/weft_abi.h).  Objects start with 0.
 */
int bpfrt_live_set(struct bpfrt *rt, bool live);

/* Windows flipped so far. */
uint64_t bpfrt_windows(const struct bpfrt *rt);

/*
 * One entry of an idle half: key bytes (NULL for a WEFT_AGG_ARRAY map) and ncpu pointers to
 * the per-CPU values.  Valid during the call only.  A non-zero return is remembered and
 * returned by the drain, which still clears the whole half.
 */
typedef int (*bpfrt_entry_fn)(void *ctx, const void *key, const void *const *cpu_vals,
			      unsigned int ncpu);

/*
 * Read every entry of the idle half of aggregation map `name` (WEFT_AGG_HASH or
 * WEFT_AGG_ARRAY), call fn for each, and clear the half (hash: deleted by batch
 * lookup-and-delete where the kernel has it, else one by one; array: zeroed).  Returns the
 * number of entries, or -errno.
 */
int bpfrt_agg_drain(struct bpfrt *rt, const char *name, bpfrt_entry_fn fn, void *ctx);

/* Key and value sizes of aggregation map `name` (of one half), or -ENOENT. */
int bpfrt_agg_sizes(struct bpfrt *rt, const char *name, uint32_t *key_size, uint32_t *value_size);

/*
 * Add the idle half's drop counters (summed over CPUs) to counts[WEFT_DROP_NR] and clear them;
 * WEFT_DROP_SPAN_EVICTED gets the sweeps' evictions since the last call.
 */
int bpfrt_drops_read(struct bpfrt *rt, uint64_t counts[WEFT_DROP_NR]);

/*
 * Streams: call fn for each record of weft_events (data starts with struct weft_rec_hdr).
 * bpfrt_stream_poll() waits up to timeout_ms and returns the number of records or -errno;
 * bpfrt_stream_fd() is an epoll fd for the caller's own loop.
 */
int bpfrt_stream_open(struct bpfrt *rt, ring_buffer_sample_fn fn, void *ctx);
int bpfrt_stream_poll(struct bpfrt *rt, int timeout_ms);
int bpfrt_stream_fd(const struct bpfrt *rt);

/*
 * After bpfrt_stream_open(): a thread of bpfrt's own empties the ring as it fills (a small
 * ring then suffices however long the caller's thread is busy) into a queue of at most
 * max_bytes (0: BPFRT_QUEUE_MAX_BYTES; records beyond are counted as WEFT_DROP_RINGBUF_FULL).
 * The callback still runs in the caller's thread, in bpfrt_stream_poll(), in ring order, and
 * bpfrt_stream_fd() becomes an eventfd readable while records wait.  bpfrt_stream_reader_stop()
 * (after the detach) ends the thread; later polls read the ring themselves, so a poll after
 * it gets everything recorded.  bpfrt_close() stops it too.
 */
#define BPFRT_QUEUE_MAX_BYTES (64u << 20)
int bpfrt_stream_reader_start(struct bpfrt *rt, size_t max_bytes);
void bpfrt_stream_reader_stop(struct bpfrt *rt);

/*
 * Remove the starts of span table `name` older than max_age_ns (CLOCK_MONOTONIC, the clock of
 * bpf_ktime_get_ns()) and count them as WEFT_DROP_SPAN_EVICTED.  A start that an end matches
 * concurrently is either matched or evicted, never both (whoever deletes it owns it).
 * Returns the number evicted, or -errno; *open (if not NULL) the starts left in the table,
 * spans in flight at the sweep (counted as the walk saw them: a start made or matched while
 * it walks may or may not be among them).
 */
int bpfrt_span_sweep(struct bpfrt *rt, const char *name, uint64_t max_age_ns, uint64_t *open);

/*
 * The addresses of stack `id` of the idle epoch (WEFT_WANT_STACKS) into ips[max]; returns the
 * depth, or -errno (-ENOENT: no such stack).
 */
int bpfrt_stack_read(struct bpfrt *rt, int64_t id, uint64_t *ips, unsigned int max);

/*
 * Events the kernel did not run the object's programs for because another BPF program was
 * running on that CPU (bpf_prog_info.recursion_misses, summed) since the last call: losses
 * the runtime cannot count itself, to be reported next to the drop counters, which count per
 * window too.
 */
int bpfrt_prog_misses(struct bpfrt *rt, uint64_t *misses);

#endif
