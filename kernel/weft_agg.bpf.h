/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Update functions of every aggregate kind: fold one value into a per-CPU value of
 * kernel/weft_aggval.h.  Generated BPF programs call them after looking up (or inserting a
 * zeroed) value for the group; the user side calls the very same functions through
 * agg_state_add()'s tests, which is how we know both sides agree bit for bit.
 *
 * What must hold, so that the verifier accepts every caller and the host compiles it too:
 *  - no loops except weft_hash_str()'s, which is bounded by a constant;
 *  - no floats, no signed division, no division by a value that is not a positive constant
 *    once inlined (lhist's step);
 *  - every array index is a 64-bit variable checked against the array's length after an
 *    optimisation barrier, so clang can neither drop the check the verifier needs to see nor
 *    check a zero-extended copy and index with the original;
 *  - lhist's lo, hi and step are compile-time constants at the call site (the code generator
 *    emits literals), so the map value size and the index bound agree for the verifier.
 * Per-CPU values are updated without atomics: a BPF program is not preempted on its CPU by
 * another program updating the same per-CPU value.
 */
#ifndef WEFT_AGG_BPF_H
#define WEFT_AGG_BPF_H

#include "weft_aggval.h"
#include "weft_sketch.h"

/* Hide v's value from the optimiser so a following bounds check is kept for the verifier. */
#define WEFT_BARRIER_VAR(v) __asm__ __volatile__("" : "+r"(v))

WEFT_INLINE void weft_aggval_count_add(struct weft_aggval_count *v, __s64 x)
{
	(void)x;
	v->n++;
}

WEFT_INLINE void weft_aggval_sum_add(struct weft_aggval_sum *v, __s64 x)
{
	v->sum = (__s64)((__u64)v->sum + (__u64)x); /* wraps; no signed-overflow UB on the host */
}

WEFT_INLINE void weft_aggval_min_add(struct weft_aggval_minmax *v, __s64 x)
{
	if (!v->n || x < v->v)
		v->v = x;
	v->n++;
}

WEFT_INLINE void weft_aggval_max_add(struct weft_aggval_minmax *v, __s64 x)
{
	if (!v->n || x > v->v)
		v->v = x;
	v->n++;
}

WEFT_INLINE void weft_aggval_avg_add(struct weft_aggval_avg *v, __s64 x)
{
	v->sum = (__s64)((__u64)v->sum + (__u64)x);
	v->n++;
}

/*
 * x^2 as 128 bits (*hi : *lo) from 32-bit halves: |x| = a1 * 2^32 + a0, so
 * x^2 = a1^2 * 2^64 + 2 * a1 * a0 * 2^32 + a0^2, every partial product fitting in 64 bits.
 */
WEFT_INLINE void weft_square128(__s64 x, __u64 *lo, __u64 *hi)
{
	__u64 a = x < 0 ? -(__u64)x : (__u64)x;
	__u64 a0 = a & 0xffffffffULL, a1 = a >> 32;
	__u64 l = a0 * a0, h = a1 * a1, mid = a1 * a0, t = mid << 32;

	l += t; /* the cross term twice, each with its carry */
	h += (l < t) + (mid >> 32);
	l += t;
	h += (l < t) + (mid >> 32);
	*lo = l;
	*hi = h;
}

WEFT_INLINE void weft_aggval_stddev_add(struct weft_aggval_stddev *v, __s64 x)
{
	__u64 ux = (__u64)x, slo, shi, c;

	v->n++;
	v->sum_lo += ux;
	v->sum_hi = (__s64)((__u64)v->sum_hi + (x < 0 ? ~0ULL : 0) + (v->sum_lo < ux));
	weft_square128(x, &slo, &shi);
	v->sq_lo += slo;
	c = v->sq_lo < slo; /* carry into bits 64..127 */
	shi += c; /* shi <= 2^62, cannot wrap */
	v->sq_hi += shi;
	v->sq_top += v->sq_hi < shi; /* carry into bits 128..191 */
}

/* bpftrace's log2 bucket: negative -> 0, 0 -> 1, x >= 1 -> 2 + floor(log2(x)) (at most 64). */
WEFT_INLINE __u32 weft_hist_index(__s64 x)
{
	if (x < 0)
		return 0;
	if (x == 0)
		return 1;
	return 2 + weft_msb64((__u64)x);
}

WEFT_INLINE void weft_aggval_hist_add(struct weft_aggval_hist *v, __s64 x)
{
	__u64 i = weft_hist_index(x);

	WEFT_BARRIER_VAR(i);
	if (i >= WEFT_HIST_NBUCKETS)
		i = WEFT_HIST_NBUCKETS - 1;
	v->b[i]++;
}

/* lhist bucket of x (see weft_aggval.h); lo < hi and step > 0 must hold. */
WEFT_INLINE __u32 weft_lhist_index(__s64 x, __s64 lo, __s64 hi, __s64 step)
{
	if (x < lo)
		return 0;
	if (x >= hi)
		return WEFT_LHIST_NBUCKETS(lo, hi, step) - 1;
	/* lo <= x < hi: the unsigned difference is exact, and unsigned division is what BPF has */
	return 1 + (__u32)(((__u64)x - (__u64)lo) / (__u64)step);
}

/* b has WEFT_LHIST_NBUCKETS(lo, hi, step) elements; lo, hi, step are constants (see top). */
WEFT_INLINE void weft_aggval_lhist_add(__u64 *b, __s64 x, __s64 lo, __s64 hi, __s64 step)
{
	__u64 nb, i;

	if (step <= 0 || hi <= lo)
		return;
	nb = WEFT_LHIST_NBUCKETS(lo, hi, step);
	if (nb > WEFT_LHIST_MAX_BUCKETS)
		return;
	i = weft_lhist_index(x, lo, hi, step);
	WEFT_BARRIER_VAR(i);
	if (i >= nb)
		i = nb - 1;
	b[i]++;
}

WEFT_INLINE void weft_aggval_quantile_add(struct weft_aggval_quantile *v, __s64 x)
{
	__u64 i = weft_sketch_index(x);

	if (!v->n || x < v->min)
		v->min = x;
	if (!v->n || x > v->max)
		v->max = x;
	v->n++;
	if (x < 0)
		v->neg++;
	WEFT_BARRIER_VAR(i);
	if (i >= WEFT_SKETCH_NBUCKETS)
		i = WEFT_SKETCH_NBUCKETS - 1;
	v->c[i]++;
}

/* splitmix64's finaliser: a bijective 64-bit mixer, so distinct integers never collide. */
WEFT_INLINE __u64 weft_hash_u64(__u64 x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

/*
 * FNV-1a over at most min(max, WEFT_HASH_STR_MAX) bytes of s, stopping at NUL, then mixed.
 * s must be readable for max bytes (a BPF stack or map buffer of that size).
 */
WEFT_INLINE __u64 weft_hash_str(const char *s, __u32 max)
{
	__u64 h = 0xcbf29ce484222325ULL;
	__u32 i;

	for (i = 0; i < WEFT_HASH_STR_MAX; i++) {
		unsigned char c;

		if (i >= max)
			break;
		c = (unsigned char)s[i];
		if (!c)
			break;
		h ^= c;
		h *= 0x100000001b3ULL;
	}
	return weft_hash_u64(h);
}

/* HyperLogLog: the top P bits of h pick the register, the rest give the rank. */
WEFT_INLINE void weft_aggval_distinct_add_hash(struct weft_aggval_distinct *v, __u64 h)
{
	__u32 i = (__u32)(h >> (64 - WEFT_HLL_P)) & (WEFT_HLL_M - 1);
	__u64 rest = h << WEFT_HLL_P;
	__u8 rank = rest ? (__u8)(64 - weft_msb64(rest)) : WEFT_HLL_MAX_RANK;

	if (v->reg[i] < rank)
		v->reg[i] = rank;
}

WEFT_INLINE void weft_aggval_distinct_add(struct weft_aggval_distinct *v, __s64 x)
{
	weft_aggval_distinct_add_hash(v, weft_hash_u64((__u64)x));
}

#endif
