/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Mergeable aggregate states, user side: what the agent folds per-CPU kernel values into, what
 * travels on the wire, and what the cluster aggregator merges.
 *
 * A state is a flat, caller-owned byte buffer of agg_state_size(spec) bytes, interpreted
 * according to its spec.  States are canonical: two states that hold the same multiset of
 * inputs are equal byte for byte, however the inputs were split, merged and ordered.  That
 * holds because every state is integers only (sums modulo 2^64 or 2^128, counts, min/max with
 * an explicit count, bucket counts, HyperLogLog register maxima) and the empty state is all
 * zeros.  Finalising (doubles, estimates) happens only in agg_state_final(), never in a merge.
 *
 * agg_state_add() gives exactly the state the kernel's update functions
 * (kernel/weft_agg.bpf.h) give after agg_state_from_kernel(); tests/unit/test_aggbpf.c proves it
 * against the real verifier and kernel.  See docs/aggregates.md for the states and error
 * bounds.
 *
 * Every function taking a spec checks it (agg_spec_valid()) and returns -EINVAL (or 0 for the
 * sizes) if it is not valid; none crashes on a bad spec.
 */
#ifndef WEFT_AGGSTATE_H
#define WEFT_AGGSTATE_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "kernel/aggkind.h"

struct agg_spec {
	enum agg_kind kind;
	int64_t lo, hi, step; /* AGG_LHIST: hi > lo, step > 0, at most WEFT_LHIST_MAX_BUCKETS */
	double q; /* AGG_QUANTILE: 0 <= q <= 1 (p50 is 0.5, p999 is 0.999) */
};

bool agg_spec_valid(const struct agg_spec *spec);
/*
 * lhist's bucket count in all, below lo and from hi up included: ceil((hi - lo) / step) + 2,
 * the WEFT_LHIST_NBUCKETS of kernel/weft_aggval.h in unsigned 64-bit arithmetic that neither
 * wraps nor truncates, whatever lo, hi and step are; 0 if hi <= lo or step <= 0.  A spec is
 * valid with at most WEFT_LHIST_MAX_BUCKETS (the compiler checks the same bound with it).
 */
uint64_t agg_lhist_nbuckets(int64_t lo, int64_t hi, int64_t step);
/* Bytes of the user-side state; 0 if the spec is not valid. */
size_t agg_state_size(const struct agg_spec *spec);
/* Bytes of one per-CPU kernel value (kernel/weft_aggval.h); 0 if the spec is not valid. */
size_t agg_kernel_value_size(const struct agg_spec *spec);

/* The identity (empty) state: all zeros. */
int agg_state_init(const struct agg_spec *spec, void *state);
/* Fold one value in, exactly as the kernel's weft_aggval_<kind>_add() does. */
int agg_state_add(const struct agg_spec *spec, void *state, int64_t x);
/* AGG_DISTINCT only: fold in a value already hashed (weft_hash_str() for strings). */
int agg_state_add_hash(const struct agg_spec *spec, void *state, uint64_t h);
/* dst = dst (+) src; associative and commutative.  dst and src may not overlap. */
int agg_state_merge(const struct agg_spec *spec, void *dst, const void *src);
/* dst = dst (+) one per-CPU kernel value of agg_kernel_value_size(spec) bytes. */
int agg_state_from_kernel(const struct agg_spec *spec, void *dst, const void *kval);

/* One histogram bucket: the integers [min, max]; open_* mark the under/overflow buckets. */
struct agg_bucket {
	int64_t min, max;
	uint64_t count;
	bool open_below, open_above;
};

struct agg_result {
	enum agg_kind kind;
	bool empty; /* nothing was added: min/max/avg/stddev/quantile have no value */
	bool integer; /* ival holds the exact value (count, sum, min, max) */
	int64_t ival;
	double value; /* the value as a double (also for integer kinds); 0 when empty */
	uint64_t n; /* values added (for distinct: the number of values seen is unknown, 0) */
	uint64_t neg; /* quantile: how many inputs were negative (outside the sketch's domain) */
	size_t nbuckets;
	struct agg_bucket *buckets; /* hist/lhist: owned by the result, agg_result_release() */
};

/* Turn a state into what a user sees.  0, -EINVAL or -ENOMEM (hist/lhist bucket array). */
int agg_state_final(const struct agg_spec *spec, const void *state, struct agg_result *out);
void agg_result_release(struct agg_result *r);

/*
 * Portable little-endian wire form (docs/aggregates.md).  encode returns the bytes written or
 * -ENOSPC; agg_state_encoded_max() bytes always suffice.  decode validates the length and the
 * contents (a hostile peer may send anything) and returns 0 or -EINVAL, leaving state
 * initialised (empty) on error.
 */
size_t agg_state_encoded_max(const struct agg_spec *spec);
ssize_t agg_state_encode(const struct agg_spec *spec, const void *state, void *buf, size_t cap);
int agg_state_decode(const struct agg_spec *spec, void *state, const void *buf, size_t len);

/*
 * Draw a hist/lhist result as bpftrace does: one line per bucket from the first non-empty to
 * the last non-empty, "[4, 8)   12 |@@@@@     |", preceded by "title:" when title is not NULL.
 * 0 or -EINVAL (not a histogram) or -EIO (write error).
 */
int agg_result_print_hist(FILE *f, const char *title, const struct agg_result *r);

/*
 * Nearest-rank quantile: the 1-based rank ceil(q * n) of n sorted values, at least 1 (q * n
 * is taken with a 1e-9 tolerance so that 0.99 * 100 is rank 99, not 100).
 */
uint64_t agg_quantile_rank(double q, uint64_t n);

/*
 * AGG_QUANTILE: the sketch's non-empty buckets in order (malloc'd into *out, *n of them; free()
 * it), bounds from weft_sketch_bounds(), and in *mark the index among them of the bucket that
 * holds the value of rank agg_quantile_rank(spec->q, n) (the bucket whose value
 * agg_state_final() reports; negatives count in bucket 0).  An empty sketch: *out NULL, *n 0,
 * *mark 0.  0, -EINVAL (not a quantile) or -ENOMEM.
 */
int agg_quantile_buckets(const struct agg_spec *spec, const void *state, struct agg_bucket **out,
			 size_t *n, size_t *mark);

/*
 * HyperLogLog estimate of WEFT_HLL_M registers (p = WEFT_HLL_P): the raw estimate, with linear
 * counting below 2.5 m when some register is still zero.  64-bit hashes need no large-range
 * correction.
 */
double agg_hll_estimate(const uint8_t *reg);

/*
 * order by … limit: the indices of the best min(n, limit) rows by keys[] (largest first if
 * desc, else smallest first), best first in idx_out.  Ties keep the lower index first and NaN
 * keys sort last either way, so the order is deterministic.  O(n log limit).  Returns the
 * number of indices written.
 */
size_t agg_topk(const double *keys, size_t n, size_t limit, bool desc, size_t *idx_out);

#endif
