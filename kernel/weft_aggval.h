/* SPDX-License-Identifier: Apache-2.0 */
/*
 * In-kernel value layouts of every aggregate kind: what one group's aggregate occupies in a
 * per-CPU map value, for one epoch.  Both sides include this header — the BPF runtime updates
 * these structs (kernel/weft_agg.bpf.h), the agent reads one per CPU per epoch and folds it into
 * a user-side state with agg_state_from_kernel() (kernel/aggstate.h).
 *
 * What must hold:
 *  - plain integers only (__u64/__s64/__u32/__u8), every field naturally aligned, no implicit
 *    padding, sizes multiples of 8: the layout is the same for clang -target bpf and the host;
 *  - the all-zero value is the identity (an empty group), so a freshly inserted, zeroed map
 *    value needs no initialisation and the agent clears the idle epoch with zeros;
 *  - values are per CPU and per epoch, updated without atomics; only the agent sums them.
 *
 * Layouts are ABI between the object a query compiles to and the agent that loads it: change
 * one only together with WEFT_AGGVAL_VERSION.
 */
#ifndef WEFT_AGGVAL_H
#define WEFT_AGGVAL_H

#ifndef WEFT_NO_LINUX_TYPES
#include <linux/types.h>
#endif

#include "weft_sketch.h"

#define WEFT_AGGVAL_VERSION 1

/* count(): number of events. */
struct weft_aggval_count {
	__u64 n;
};

/* sum(e): wraps modulo 2^64 (two's complement) on overflow, like every C integer sum. */
struct weft_aggval_sum {
	__s64 sum;
};

/* min(e) / max(e): n == 0 means empty (v is then 0). */
struct weft_aggval_minmax {
	__s64 v;
	__u64 n;
};

/* avg(e): sum (mod 2^64) and count; the user side divides. */
struct weft_aggval_avg {
	__s64 sum;
	__u64 n;
};

/*
 * stddev(e) (population standard deviation): count, 128-bit sum and 192-bit sum of squares,
 * computed with 64-bit operations only (32-bit partial products for the square), so BPF can do
 * it.  With n < 2^64 and x^2 <= 2^126 neither sum can wrap (|sum| < 2^127, sq < 2^190), so the
 * state is exact for any input and E[x^2] - E[x]^2 can be computed without cancellation.
 * sum = (sum_hi : sum_lo) is signed two's complement; sq = (sq_top : sq_hi : sq_lo) unsigned.
 */
struct weft_aggval_stddev {
	__u64 n;
	__u64 sum_lo;
	__s64 sum_hi;
	__u64 sq_lo;
	__u64 sq_hi;
	__u64 sq_top;
};

/*
 * hist(e): log2 buckets, as bpftrace's hist(): b[0] negative values, b[1] the value 0, b[2] the
 * value 1, b[k] for k >= 2 the values [2^(k-2), 2^(k-1)); b[64] is [2^62, 2^63).
 */
#define WEFT_HIST_NBUCKETS 65
struct weft_aggval_hist {
	__u64 b[WEFT_HIST_NBUCKETS];
};

/*
 * lhist(e, lo, hi, step): a __u64 array whose length the manifest gives:
 * b[0] counts x < lo, b[1 + k] counts [lo + k*step, lo + (k+1)*step) (the last in-range bucket
 * ends at hi), b[n-1] counts x >= hi.  Requires hi > lo, step > 0 and at most
 * WEFT_LHIST_MAX_BUCKETS buckets in all (the compiler checks; 8 KiB per group per CPU).
 */
#define WEFT_LHIST_MAX_BUCKETS 1024
/* ceil((hi - lo) / step) + 2, in unsigned 64-bit arithmetic that cannot wrap */
#define WEFT_LHIST_NBUCKETS(lo, hi, step)                                \
	((__u32)(((__u64)(hi) - (__u64)(lo)) / (__u64)(step) +           \
		 ((((__u64)(hi) - (__u64)(lo)) % (__u64)(step)) != 0)) + \
	 2)
#define WEFT_AGGVAL_LHIST_SIZE(lo, hi, step) (8u * WEFT_LHIST_NBUCKETS(lo, hi, step))

/*
 * quantile(e, q), p50/p90/p99/p999: the log-linear sketch of kernel/weft_sketch.h.  n counts
 * all values, neg the negative ones (clamped into bucket 0), min/max are exact (valid when
 * n > 0).  Counts are 32-bit per CPU per epoch: the agent drains epochs far more often than one
 * CPU can fire 2^32 probes.
 */
struct weft_aggval_quantile {
	__u64 n;
	__u64 neg;
	__s64 min;
	__s64 max;
	__u32 c[WEFT_SKETCH_NBUCKETS];
};

/*
 * distinct(e): HyperLogLog with m = 2^WEFT_HLL_P registers of one byte (2 KiB per group per
 * CPU).  Standard error 1.04 / sqrt(m) = 2.3%.  A register holds the largest rank (leading
 * zeros + 1 of the 64-bit hash below the index bits) seen, 0..(64 - P + 1).
 */
#define WEFT_HLL_P 11
#define WEFT_HLL_M (1u << WEFT_HLL_P)
#define WEFT_HLL_MAX_RANK (64 - WEFT_HLL_P + 1)
struct weft_aggval_distinct {
	__u8 reg[WEFT_HLL_M];
};

/* Strings hashed for distinct() are read up to this many bytes (and stop at NUL). */
#define WEFT_HASH_STR_MAX 256

#define WEFT_AGGVAL_COUNT_SIZE sizeof(struct weft_aggval_count) /* 8 */
#define WEFT_AGGVAL_SUM_SIZE sizeof(struct weft_aggval_sum) /* 8 */
#define WEFT_AGGVAL_MIN_SIZE sizeof(struct weft_aggval_minmax) /* 16 */
#define WEFT_AGGVAL_MAX_SIZE sizeof(struct weft_aggval_minmax) /* 16 */
#define WEFT_AGGVAL_AVG_SIZE sizeof(struct weft_aggval_avg) /* 16 */
#define WEFT_AGGVAL_STDDEV_SIZE sizeof(struct weft_aggval_stddev) /* 40 */
#define WEFT_AGGVAL_HIST_SIZE sizeof(struct weft_aggval_hist) /* 520 */
#define WEFT_AGGVAL_QUANTILE_SIZE sizeof(struct weft_aggval_quantile) /* 7584 */
#define WEFT_AGGVAL_DISTINCT_SIZE sizeof(struct weft_aggval_distinct) /* 2048 */
/* The largest value of any one aggregate (lhist's maximum), for zero buffers. */
#define WEFT_AGGVAL_LARGEST_SIZE 8192

#endif
