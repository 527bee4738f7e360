/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The quantile sketch math that the BPF runtime and the user side share, so that both compute
 * the same bucket for the same value, bit for bit.
 *
 * The sketch is a log-linear histogram (HdrHistogram-like): values 0..31 have a bucket each
 * (exact); above that every power of two [2^e, 2^(e+1)) is split into 32 equal sub-buckets
 * (WEFT_SKETCH_SUB_BITS = 5).  A bucket [L, L + w) above 31 has L >= 32 * w, so any point of the
 * bucket is within w / (2 * 32w) = 2^-6 (1.5625%) of every value in it.  Counts are integers,
 * so merging sketches is a sum of counts: exact, associative and commutative — the result is
 * the same on one host or merged from a thousand.
 *
 * Negative values: the sketch is for durations and sizes, which are never negative.  A
 * negative value is clamped to 0 (it lands in bucket 0) and counted in the value's `neg`
 * field, so a result can say that the input was out of the sketch's domain.
 *
 * Everything here compiles both under clang -target bpf (no loops, no floats, no division) and
 * as host C.  weft_msb64() is a branch-only binary search: no loop for the verifier to bound.
 */
#ifndef WEFT_SKETCH_H
#define WEFT_SKETCH_H

#ifndef WEFT_NO_LINUX_TYPES
#include <linux/types.h>
#endif

#ifndef WEFT_INLINE
#define WEFT_INLINE static inline __attribute__((always_inline))
#endif

#define WEFT_SKETCH_SUB_BITS 5
#define WEFT_SKETCH_SUB_COUNT (1u << WEFT_SKETCH_SUB_BITS) /* 32 */
/*
 * Inputs are clamped to [0, INT64_MAX], so the top bit index is 62: octaves 5..62 give
 * (62 - 5 + 1) * 32 buckets above the 32 exact ones.
 */
#define WEFT_SKETCH_NBUCKETS \
	(WEFT_SKETCH_SUB_COUNT + (62 - WEFT_SKETCH_SUB_BITS + 1) * WEFT_SKETCH_SUB_COUNT) /* 1888 */

/*
 * Index of the most significant set bit of v (0..63); 0 for v == 0.  Six comparisons, no loop,
 * no builtin (so no libcall and nothing the BPF backend might not lower).
 */
WEFT_INLINE __u32 weft_msb64(__u64 v)
{
	__u32 r = 0;

	if (v >> 32) {
		v >>= 32;
		r += 32;
	}
	if (v >> 16) {
		v >>= 16;
		r += 16;
	}
	if (v >> 8) {
		v >>= 8;
		r += 8;
	}
	if (v >> 4) {
		v >>= 4;
		r += 4;
	}
	if (v >> 2) {
		v >>= 2;
		r += 2;
	}
	if (v >> 1)
		r += 1;
	return r;
}

/*
 * Bucket of a value: x < 32 is its own bucket; otherwise with e = msb(x) the bucket is
 * (e - 4) * 32 + the 5 bits below the top bit.  Always < WEFT_SKETCH_NBUCKETS.
 */
WEFT_INLINE __u32 weft_sketch_index(__s64 x)
{
	__u64 v = x < 0 ? 0 : (__u64)x;
	__u32 e;

	if (v < WEFT_SKETCH_SUB_COUNT)
		return (__u32)v;
	e = weft_msb64(v);
	return ((e - (WEFT_SKETCH_SUB_BITS - 1)) << WEFT_SKETCH_SUB_BITS) +
	       (__u32)((v >> (e - WEFT_SKETCH_SUB_BITS)) & (WEFT_SKETCH_SUB_COUNT - 1));
}

/*
 * The integer values of bucket i are [*lo, *lo + *width - 1].  The user side reports the
 * midpoint of that range; for i < 32 the bucket is exact (width 1).  i must be
 * < WEFT_SKETCH_NBUCKETS.
 */
WEFT_INLINE void weft_sketch_bounds(__u32 i, __u64 *lo, __u64 *width)
{
	__u32 octave = i >> WEFT_SKETCH_SUB_BITS, sub = i & (WEFT_SKETCH_SUB_COUNT - 1);
	__u32 shift;

	if (octave == 0) {
		*lo = i;
		*width = 1;
		return;
	}
	shift = octave - 1; /* e - SUB_BITS, with e = octave + SUB_BITS - 1 */
	*lo = (__u64)(WEFT_SKETCH_SUB_COUNT + sub) << shift;
	*width = (__u64)1 << shift;
}

#endif
