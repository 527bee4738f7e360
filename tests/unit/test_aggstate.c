// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests of the mergeable aggregate states (kernel/aggstate.c) and of the kernel-side
 * update functions they share (kernel/weft_agg.bpf.h, run here as host C).  Every expectation
 * is computed independently in the test: exact sorted-array quantiles, long double standard
 * deviations, 128-bit integer sums of squares, true distinct counts.  Merge properties are
 * checked byte for byte over random partitions and random merge trees, for several seeds.
 */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kernel/aggstate.h"
#include "kernel/weft_agg.bpf.h"

/* ---- deterministic randomness ---- */

static uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static uint64_t rng_below(uint64_t *s, uint64_t n)
{
	return rng_next(s) % n;
}

/* Values of every magnitude and sign, with the extremes and small numbers well represented. */
static int64_t rng_value(uint64_t *s)
{
	uint64_t r = rng_next(s);

	switch (r & 7) {
	case 0:
		return (int64_t)rng_below(s, 40); /* exact sketch range, hist 0/1 */
	case 1:
		return -(int64_t)rng_below(s, 1000);
	case 2: {
		static const int64_t edge[] = { INT64_MIN,
						INT64_MAX,
						INT64_MIN + 1,
						INT64_MAX - 1,
						(int64_t)1 << 62,
						((int64_t)1 << 62) - 1,
						0,
						1,
						-1 };
		return edge[rng_below(s, sizeof(edge) / sizeof(edge[0]))];
	}
	default: {
		int64_t v = (int64_t)(rng_next(s) >> (1 + rng_below(s, 63)));

		return (r & 8) ? -v : v;
	}
	}
}

/* ---- the specs under test ---- */

static const struct agg_spec specs[] = {
	{ .kind = AGG_COUNT },
	{ .kind = AGG_SUM },
	{ .kind = AGG_MIN },
	{ .kind = AGG_MAX },
	{ .kind = AGG_AVG },
	{ .kind = AGG_STDDEV },
	{ .kind = AGG_HIST },
	{ .kind = AGG_LHIST, .lo = -10, .hi = 100, .step = 7 },
	{ .kind = AGG_LHIST, .lo = 0, .hi = 1000000, .step = 1000 },
	{ .kind = AGG_QUANTILE, .q = 0.5 },
	{ .kind = AGG_QUANTILE, .q = 0.99 },
	{ .kind = AGG_DISTINCT },
};
#define NSPECS (sizeof(specs) / sizeof(specs[0]))

static void *state_new(const struct agg_spec *spec)
{
	size_t sz = agg_state_size(spec);
	void *s;

	assert_true(sz > 0);
	s = malloc(sz);
	assert_non_null(s);
	assert_int_equal(agg_state_init(spec, s), 0);
	return s;
}

/* The kernel's update function for a spec, applied to a kernel value. */
static void kernel_add(const struct agg_spec *spec, void *kval, int64_t x)
{
	switch (spec->kind) {
	case AGG_COUNT:
		weft_aggval_count_add(kval, x);
		break;
	case AGG_SUM:
		weft_aggval_sum_add(kval, x);
		break;
	case AGG_MIN:
		weft_aggval_min_add(kval, x);
		break;
	case AGG_MAX:
		weft_aggval_max_add(kval, x);
		break;
	case AGG_AVG:
		weft_aggval_avg_add(kval, x);
		break;
	case AGG_STDDEV:
		weft_aggval_stddev_add(kval, x);
		break;
	case AGG_HIST:
		weft_aggval_hist_add(kval, x);
		break;
	case AGG_LHIST:
		weft_aggval_lhist_add(kval, x, spec->lo, spec->hi, spec->step);
		break;
	case AGG_QUANTILE:
		weft_aggval_quantile_add(kval, x);
		break;
	case AGG_DISTINCT:
		weft_aggval_distinct_add(kval, x);
		break;
	default:
		fail();
	}
}

/* ---- kernel update functions and agg_state_add agree ---- */

static void test_kernel_matches_user(void **unused)
{
	for (size_t si = 0; si < NSPECS; si++) {
		const struct agg_spec *spec = &specs[si];
		size_t ksz = agg_kernel_value_size(spec), ssz = agg_state_size(spec);
		enum { NCPU = 3 };
		void *kv[NCPU], *user = state_new(spec), *fromk = state_new(spec);
		uint64_t seed = 1000 + si;

		assert_true(ksz > 0);
		for (int c = 0; c < NCPU; c++) {
			kv[c] = calloc(1, ksz); /* the kernel's fresh value is all zeros */
			assert_non_null(kv[c]);
		}
		for (int i = 0; i < 20000; i++) {
			int64_t x = rng_value(&seed);

			kernel_add(spec, kv[rng_below(&seed, NCPU)], x);
			assert_int_equal(agg_state_add(spec, user, x), 0);
		}
		for (int c = 0; c < NCPU; c++)
			assert_int_equal(agg_state_from_kernel(spec, fromk, kv[c]), 0);
		assert_memory_equal(user, fromk, ssz);
		for (int c = 0; c < NCPU; c++)
			free(kv[c]);
		free(user);
		free(fromk);
	}
}

/* ---- merge: associative, commutative, identity — byte for byte ---- */

static void test_merge_properties(void **unused)
{
	for (size_t si = 0; si < NSPECS; si++) {
		const struct agg_spec *spec = &specs[si];
		size_t ssz = agg_state_size(spec);

		for (uint64_t seed0 = 1; seed0 <= 5; seed0++) {
			uint64_t seed = seed0 * 7919 + si;
			size_t nparts = 1 + rng_below(&seed, 24), n = 3000 + rng_below(&seed, 3000);
			void *all = state_new(spec), *parts[24];
			size_t live = nparts;

			for (size_t p = 0; p < nparts; p++)
				parts[p] = state_new(spec);
			for (size_t i = 0; i < n; i++) {
				int64_t x = rng_value(&seed);

				agg_state_add(spec, all, x);
				/* partition 0 stays small and some partitions stay empty */
				agg_state_add(spec, parts[rng_below(&seed, nparts)], x);
			}
			/* a random merge tree: any two states, in either order */
			while (live > 1) {
				size_t a = rng_below(&seed, live), b = rng_below(&seed, live - 1);

				if (b >= a)
					b++;
				assert_int_equal(agg_state_merge(spec, parts[a], parts[b]), 0);
				free(parts[b]);
				parts[b] = parts[--live];
			}
			assert_memory_equal(parts[0], all, ssz);

			/* the empty state is the identity on both sides */
			void *empty = state_new(spec), *copy = malloc(ssz);

			memcpy(copy, all, ssz);
			agg_state_merge(spec, copy, empty);
			assert_memory_equal(copy, all, ssz);
			agg_state_merge(spec, empty, all);
			assert_memory_equal(empty, all, ssz);
			free(empty);
			free(copy);
			free(parts[0]);
			free(all);
		}
	}
}

/* ---- quantiles against the exact sorted-array quantile ---- */

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

static int64_t gen_dist(int dist, uint64_t *s)
{
	double u = ((double)(rng_next(s) >> 11) + 0.5) / 9007199254740992.0;

	switch (dist) {
	case 0: /* uniform 0..1e6 */
		return (int64_t)rng_below(s, 1000001);
	case 1: /* exponential, mean 100 µs in ns */
		return (int64_t)(-log(u) * 100000.0);
	case 2: /* log-uniform over 1 ns .. 2^62 */
		return (int64_t)exp2(u * 62.0);
	case 3: /* small exact values */
		return (int64_t)rng_below(s, 32);
	case 4: /* a constant */
		return 123456789;
	case 5: /* bimodal latencies: 90% fast, 10% slow */
		return rng_below(s, 10) ? 1000 + (int64_t)rng_below(s, 200) :
					  5000000 + (int64_t)rng_below(s, 1000000);
	default: /* the whole non-negative range */
		return (int64_t)(rng_next(s) >> 1);
	}
}

static void test_quantile_error_bound(void **unused)
{
	static const double qs[] = { 0.0, 0.001, 0.01, 0.25, 0.5, 0.75, 0.9, 0.99, 0.999, 1.0 };

	for (int dist = 0; dist <= 6; dist++) {
		uint64_t seed = 424242 + (uint64_t)dist;
		size_t n = 20000 + rng_below(&seed, 5000);
		int64_t *v = malloc(n * sizeof(*v));

		assert_non_null(v);
		for (size_t i = 0; i < n; i++)
			v[i] = gen_dist(dist, &seed);
		for (size_t qi = 0; qi < sizeof(qs) / sizeof(qs[0]); qi++) {
			struct agg_spec spec = { .kind = AGG_QUANTILE, .q = qs[qi] };
			void *one = state_new(&spec), *parts[4];
			struct agg_result r;

			for (int p = 0; p < 4; p++)
				parts[p] = state_new(&spec);
			for (size_t i = 0; i < n; i++) {
				agg_state_add(&spec, one, v[i]);
				agg_state_add(&spec, parts[i % 4], v[i]);
			}
			for (int p = 1; p < 4; p++)
				agg_state_merge(&spec, parts[0], parts[p]);
			assert_memory_equal(one, parts[0], agg_state_size(&spec));

			assert_int_equal(agg_state_final(&spec, one, &r), 0);
			int64_t *sorted = malloc(n * sizeof(*sorted));

			memcpy(sorted, v, n * sizeof(*v));
			qsort(sorted, n, sizeof(*sorted), cmp_i64);
			double exact = (double)sorted[agg_quantile_rank(qs[qi], n) - 1];
			double bound = exact / 64.0; /* 2^-(SUB_BITS+1) */

			assert_false(r.empty);
			assert_int_equal(r.n, n);
			if (exact < 32)
				assert_true(r.value == exact);
			else if (fabs(r.value - exact) > bound * (1 + 1e-12))
				fail_msg("dist %d q %g: reported %.17g exact %.17g (bound %g)",
					 dist, qs[qi], r.value, exact, bound);
			if (qs[qi] == 0.0) /* min and max are kept exactly */
				assert_true(r.value == (double)sorted[0]);
			if (qs[qi] == 1.0)
				assert_true(r.value == (double)sorted[n - 1]);
			free(sorted);
			for (int p = 0; p < 4; p++)
				free(parts[p]);
			free(one);
		}
		free(v);
	}
}

static void test_quantile_rank_and_negatives(void **unused)
{
	struct agg_spec spec = { .kind = AGG_QUANTILE, .q = 0.25 };
	void *s = state_new(&spec);
	struct agg_result r;

	assert_int_equal(agg_quantile_rank(0.99, 100), 99);
	assert_int_equal(agg_quantile_rank(0.5, 1), 1);
	assert_int_equal(agg_quantile_rank(0.5, 3), 2);
	assert_int_equal(agg_quantile_rank(0.0, 10), 1);
	assert_int_equal(agg_quantile_rank(1.0, 10), 10);
	assert_int_equal(agg_quantile_rank(0.999, 1000), 999);
	assert_int_equal(agg_quantile_rank(0.001, 1000), 1);

	/* empty */
	assert_int_equal(agg_state_final(&spec, s, &r), 0);
	assert_true(r.empty);
	/* -5, -3, 10, 1000: rank 1 is negative -> reported as the exact min */
	agg_state_add(&spec, s, 1000);
	agg_state_add(&spec, s, -3);
	agg_state_add(&spec, s, 10);
	agg_state_add(&spec, s, -5);
	assert_int_equal(agg_state_final(&spec, s, &r), 0);
	assert_int_equal(r.neg, 2);
	assert_true(r.value == -5.0);
	spec.q = 0.75; /* rank 3 */
	assert_int_equal(agg_state_final(&spec, s, &r), 0);
	assert_true(r.value == 10.0);
	spec.q = 1.0;
	assert_int_equal(agg_state_final(&spec, s, &r), 0);
	assert_true(r.value == 1000.0);

	/* the non-empty buckets in order, the rank's marked: 0 (the two negatives), 10, 1000 */
	{
		struct agg_bucket *b;
		size_t nb, mark;
		struct agg_spec hist = { .kind = AGG_HIST };

		assert_int_equal(agg_quantile_buckets(&spec, s, &b, &nb, &mark), 0);
		assert_int_equal(nb, 3);
		assert_int_equal(mark, 2); /* q 1: rank 4 */
		assert_true(b[0].min == 0 && b[0].max == 0 && b[0].count == 2);
		assert_true(b[1].min == 10 && b[1].max == 10 && b[1].count == 1);
		/* 1000 = 0b1111101000: octave 512, sub-bucket width 16 */
		assert_true(b[2].min == 992 && b[2].max == 1007 && b[2].count == 1);
		free(b);
		spec.q = 0.75; /* rank 3 */
		assert_int_equal(agg_quantile_buckets(&spec, s, &b, &nb, &mark), 0);
		assert_int_equal(mark, 1);
		free(b);
		spec.q = 0.25; /* rank 1 */
		assert_int_equal(agg_quantile_buckets(&spec, s, &b, &nb, &mark), 0);
		assert_int_equal(mark, 0);
		free(b);
		assert_int_equal(agg_quantile_buckets(&hist, s, &b, &nb, &mark), -EINVAL);
		memset(s, 0, agg_state_size(&spec));
		assert_int_equal(agg_quantile_buckets(&spec, s, &b, &nb, &mark), 0);
		assert_true(b == NULL && nb == 0 && mark == 0);
	}
	free(s);
}

/* The sketch's buckets tile [0, INT64_MAX] and index() agrees with bounds(). */
static void test_sketch_buckets(void **unused)
{
	__u64 next = 0;
	uint64_t seed = 99;

	for (__u32 i = 0; i < WEFT_SKETCH_NBUCKETS; i++) {
		__u64 lo, w;

		weft_sketch_bounds(i, &lo, &w);
		assert_int_equal(lo, next);
		assert_int_equal(weft_sketch_index((int64_t)lo), i);
		assert_int_equal(weft_sketch_index((int64_t)(lo + w - 1)), i);
		if (i >= WEFT_SKETCH_SUB_COUNT)
			assert_true(lo >= WEFT_SKETCH_SUB_COUNT * w); /* the relative error bound */
		next = lo + w;
	}
	assert_int_equal(next, (__u64)INT64_MAX + 1);
	for (int i = 0; i < 100000; i++) {
		int64_t x = (int64_t)(rng_next(&seed) >> (1 + rng_below(&seed, 63)));
		__u64 lo, w;

		weft_sketch_bounds(weft_sketch_index(x), &lo, &w);
		assert_true((__u64)x >= lo && (__u64)x - lo < w);
	}
	assert_int_equal(weft_sketch_index(-1), 0);
	assert_int_equal(weft_sketch_index(INT64_MIN), 0);
	assert_int_equal(weft_sketch_index(31), 31);
	assert_int_equal(weft_sketch_index(32), 32);
	assert_int_equal(weft_sketch_index(INT64_MAX), WEFT_SKETCH_NBUCKETS - 1);
}

/* ---- stddev and the 128-bit sums ---- */

static long double ref_stddev(const int64_t *v, size_t n)
{
	long double mean = 0, acc = 0;

	for (size_t i = 0; i < n; i++)
		mean += (long double)v[i];
	mean /= (long double)n;
	for (size_t i = 0; i < n; i++)
		acc += ((long double)v[i] - mean) * ((long double)v[i] - mean);
	return sqrtl(acc / (long double)n);
}

static void check_stddev(const int64_t *v, size_t n)
{
	struct agg_spec spec = { .kind = AGG_STDDEV };
	void *s = state_new(&spec);
	struct agg_result r;
	long double ref = ref_stddev(v, n);

	for (size_t i = 0; i < n; i++)
		agg_state_add(&spec, s, v[i]);
	assert_int_equal(agg_state_final(&spec, s, &r), 0);
	assert_int_equal(r.n, n);
	if (ref == 0)
		assert_true(r.value == 0.0);
	else if (fabsl((long double)r.value - ref) > 1e-9L * ref)
		fail_msg("stddev %.17g, reference %.17Lg", r.value, ref);
	free(s);
}

static void test_stddev(void **unused)
{
	uint64_t seed = 5;
	enum { N = 10000 };
	int64_t *v = malloc(N * sizeof(*v));

	/* small, wide, a large offset with tiny spread (cancellation), negative */
	for (int i = 0; i < N; i++)
		v[i] = (int64_t)rng_below(&seed, 1000);
	check_stddev(v, N);
	for (int i = 0; i < N; i++)
		v[i] = (int64_t)(rng_next(&seed) >> 2) - ((int64_t)1 << 61);
	check_stddev(v, N);
	for (int i = 0; i < N; i++)
		v[i] = 1000000000000LL + (int64_t)rng_below(&seed, 3);
	check_stddev(v, N);
	for (int i = 0; i < N; i++)
		v[i] = -(int64_t)rng_below(&seed, 1000000);
	check_stddev(v, N);
	for (int i = 0; i < N; i++)
		v[i] = 77;
	check_stddev(v, N);
	check_stddev(v, 1);
	/* the extremes: mean -0.5, stddev 2^63 - 0.5 */
	v[0] = INT64_MAX;
	v[1] = INT64_MIN;
	check_stddev(v, 2);
	v[2] = INT64_MAX;
	check_stddev(v, 3);
	free(v);
}

static void test_stddev_128bit_sums(void **unused)
{
	static const int64_t edge[] = { INT64_MAX,
					INT64_MIN,
					INT64_MIN + 1,
					INT64_MAX - 1,
					(int64_t)1 << 62,
					-((int64_t)1 << 62),
					(int64_t)0xffffffffLL,
					(int64_t)0x100000000LL,
					-1,
					0 };
	struct weft_aggval_stddev k = { 0 };
	unsigned __int128 sq = 0; /* the reference: 192 bits as sq_top : sq */
	uint64_t sq_top = 0;
	__int128 sum = 0;
	uint64_t seed = 77;

	for (size_t i = 0; i < sizeof(edge) / sizeof(edge[0]); i++) {
		__u64 lo, hi;
		unsigned __int128 a = edge[i] < 0 ? -(unsigned __int128)(__int128)edge[i] :
						    (unsigned __int128)edge[i];

		weft_square128(edge[i], &lo, &hi);
		assert_true(lo == (__u64)(a * a) && hi == (__u64)((a * a) >> 64));
	}
	/* three values near 2^63 already need bits 126 and 127 of the sum of squares */
	for (int i = 0; i < 3; i++) {
		int64_t x = edge[i];

		weft_aggval_stddev_add(&k, x);
		sum += x;
		sq += (unsigned __int128)((__int128)x * (__int128)x);
	}
	assert_true(k.sq_lo == (__u64)sq && k.sq_hi == (__u64)(sq >> 64) && k.sq_top == 0);
	assert_true(k.sum_lo == (__u64)sum &&
		    (__u64)k.sum_hi == (__u64)((unsigned __int128)sum >> 64));
	assert_true(k.sq_hi >= (1ULL << 63)); /* really used the top bit */
	/* two more INT64_MIN: 3 * 2^126 - 2^65 + 2 + 2 * 2^126 = 2^128 + 2^126 - 2^65 + 2 */
	weft_aggval_stddev_add(&k, INT64_MIN);
	weft_aggval_stddev_add(&k, INT64_MIN);
	assert_int_equal(k.sq_top, 1);
	assert_true(k.sq_hi == (1ULL << 62) - 2 && k.sq_lo == 2);

	/* random values of every magnitude against the compiler's 128-bit arithmetic */
	memset(&k, 0, sizeof(k));
	sq = 0;
	sum = 0;
	for (int i = 0; i < 100000; i++) {
		int64_t x = (int64_t)(rng_next(&seed) >> rng_below(&seed, 40));
		unsigned __int128 x2 = (unsigned __int128)((__int128)x * (__int128)x);

		weft_aggval_stddev_add(&k, x);
		sum += x;
		sq += x2;
		sq_top += sq < x2;
	}
	assert_true(k.sq_lo == (__u64)sq && k.sq_hi == (__u64)(sq >> 64) && k.sq_top == sq_top);
	assert_true(sq_top > 0);
	assert_true(k.sum_lo == (__u64)sum &&
		    (__u64)k.sum_hi == (__u64)((unsigned __int128)sum >> 64));
	assert_int_equal(k.n, 100000);
}

/* ---- count/sum/min/max/avg exact ---- */

static void test_simple_kinds(void **unused)
{
	struct agg_spec c = { .kind = AGG_COUNT }, s = { .kind = AGG_SUM },
			mi = { .kind = AGG_MIN }, ma = { .kind = AGG_MAX },
			av = { .kind = AGG_AVG };
	void *sc = state_new(&c), *ss = state_new(&s), *smi = state_new(&mi), *sma = state_new(&ma),
	     *sav = state_new(&av);
	struct agg_result r;

	assert_int_equal(agg_state_final(&mi, smi, &r), 0);
	assert_true(r.empty);
	assert_int_equal(agg_state_final(&av, sav, &r), 0);
	assert_true(r.empty);
	for (int64_t x = -500; x <= 1000; x++) {
		agg_state_add(&c, sc, x);
		agg_state_add(&s, ss, x);
		agg_state_add(&mi, smi, x);
		agg_state_add(&ma, sma, x);
		agg_state_add(&av, sav, x);
	}
	assert_int_equal(agg_state_final(&c, sc, &r), 0);
	assert_true(r.integer && r.ival == 1501);
	assert_int_equal(agg_state_final(&s, ss, &r), 0);
	assert_true(r.integer && r.ival == (1000 * 1001 / 2) - (500 * 501 / 2));
	assert_int_equal(agg_state_final(&mi, smi, &r), 0);
	assert_true(r.integer && r.ival == -500 && !r.empty);
	assert_int_equal(agg_state_final(&ma, sma, &r), 0);
	assert_true(r.integer && r.ival == 1000);
	assert_int_equal(agg_state_final(&av, sav, &r), 0);
	assert_true(r.value == 250.0 && r.n == 1501);
	/* sum wraps modulo 2^64 rather than invoking undefined behaviour */
	agg_state_init(&s, ss);
	agg_state_add(&s, ss, INT64_MAX);
	agg_state_add(&s, ss, 2);
	agg_state_final(&s, ss, &r);
	assert_true(r.ival == INT64_MIN + 1);
	free(sc);
	free(ss);
	free(smi);
	free(sma);
	free(sav);
}

/* ---- HyperLogLog ---- */

static void test_distinct(void **unused)
{
	static const uint64_t truth[] = { 10, 1000, 100000 };
	struct agg_spec spec = { .kind = AGG_DISTINCT };
	const double sigma = 1.04 / sqrt((double)WEFT_HLL_M);

	for (size_t t = 0; t < 3; t++) {
		for (uint64_t seed0 = 0; seed0 < 4; seed0++) {
			void *s = state_new(&spec), *a = state_new(&spec), *b = state_new(&spec);
			uint64_t seed = 31337 + seed0, base = rng_next(&seed);
			size_t sz = agg_state_size(&spec);
			struct agg_result r;

			/* distinct values, each added 1..3 times, split over two states */
			for (uint64_t i = 0; i < truth[t]; i++) {
				int64_t x = (int64_t)(base + i * (seed0 + 1));
				int reps = 1 + (int)rng_below(&seed, 3);

				for (int k = 0; k < reps; k++) {
					agg_state_add(&spec, s, x);
					agg_state_add(&spec, rng_below(&seed, 2) ? a : b, x);
				}
			}
			agg_state_merge(&spec, a, b);
			assert_memory_equal(a, s, sz);
			assert_int_equal(agg_state_final(&spec, s, &r), 0);
			if (fabs(r.value - (double)truth[t]) > 3 * sigma * (double)truth[t])
				fail_msg("distinct %g for %llu true (3 sigma = %g)", r.value,
					 (unsigned long long)truth[t],
					 3 * sigma * (double)truth[t]);
			free(s);
			free(a);
			free(b);
		}
	}
}

static void test_distinct_strings(void **unused)
{
	struct agg_spec spec = { .kind = AGG_DISTINCT };
	void *s = state_new(&spec);
	struct agg_result r;
	char buf[64], big[WEFT_HASH_STR_MAX + 40];

	for (int i = 0; i < 5000; i++) {
		snprintf(buf, sizeof(buf), "process-%d", i % 2500);
		assert_int_equal(agg_state_add_hash(&spec, s, weft_hash_str(buf, sizeof(buf))), 0);
	}
	agg_state_final(&spec, s, &r);
	assert_true(fabs(r.value - 2500) < 3 * 1.04 / sqrt(WEFT_HLL_M) * 2500);
	/* bytes after NUL and beyond the bounds do not count */
	memset(buf, 'x', sizeof(buf));
	memcpy(buf, "abc", 4);
	assert_true(weft_hash_str(buf, sizeof(buf)) == weft_hash_str("abc", 4));
	assert_true(weft_hash_str("abcdef", 3) == weft_hash_str("abc", 4));
	assert_true(weft_hash_str("abd", 4) != weft_hash_str("abc", 4));
	memset(big, 'y', sizeof(big));
	big[sizeof(big) - 1] = 0;
	assert_true(weft_hash_str(big, sizeof(big)) == weft_hash_str(big, WEFT_HASH_STR_MAX));
	/* not a distinct spec */
	spec.kind = AGG_COUNT;
	assert_int_equal(agg_state_add_hash(&spec, s, 1), -EINVAL);
	free(s);
}

/* ---- hist and lhist buckets ---- */

static void test_hist_boundaries(void **unused)
{
	static const struct {
		int64_t x;
		unsigned b;
	} cases[] = {
		{ INT64_MIN, 0 },
		{ -1, 0 },
		{ 0, 1 },
		{ 1, 2 },
		{ 2, 3 },
		{ 3, 3 },
		{ 4, 4 },
		{ 7, 4 },
		{ 8, 5 },
		{ 1023, 11 },
		{ 1024, 12 },
		{ ((int64_t)1 << 62) - 1, 63 },
		{ (int64_t)1 << 62, 64 },
		{ INT64_MAX, 64 },
	};
	struct agg_spec spec = { .kind = AGG_HIST };
	struct agg_result r;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct weft_aggval_hist *h = state_new(&spec);

		agg_state_add(&spec, h, cases[i].x);
		for (unsigned b = 0; b < WEFT_HIST_NBUCKETS; b++)
			assert_int_equal(h->b[b], b == cases[i].b);
		assert_int_equal(agg_state_final(&spec, h, &r), 0);
		assert_int_equal(r.nbuckets, WEFT_HIST_NBUCKETS);
		/* the bucket's reported range contains the value */
		assert_true(r.buckets[cases[i].b].min <= cases[i].x &&
			    cases[i].x <= r.buckets[cases[i].b].max);
		agg_result_release(&r);
		free(h);
	}
	/* the buckets tile the int64 range */
	struct weft_aggval_hist *h = state_new(&spec);

	assert_int_equal(agg_state_final(&spec, h, &r), 0);
	assert_true(r.buckets[0].min == INT64_MIN && r.buckets[0].open_below);
	for (size_t b = 1; b < r.nbuckets; b++)
		assert_true(r.buckets[b].min == r.buckets[b - 1].max + 1);
	assert_true(r.buckets[64].min == (int64_t)1 << 62 && r.buckets[64].max == INT64_MAX);
	agg_result_release(&r);
	free(h);
}

static void test_lhist(void **unused)
{
	struct agg_spec spec = { .kind = AGG_LHIST, .lo = 0, .hi = 95, .step = 10 };
	static const struct {
		int64_t x;
		unsigned b;
	} cases[] = {
		{ INT64_MIN, 0 }, { -1, 0 },  { 0, 1 },	  { 9, 1 },   { 10, 2 },
		{ 89, 9 },	  { 90, 10 }, { 94, 10 }, { 95, 11 }, { INT64_MAX, 11 },
	};
	struct agg_result r;

	assert_int_equal(agg_state_size(&spec), 12 * 8);
	assert_int_equal(WEFT_LHIST_NBUCKETS(0, 95, 10), 12);
	assert_int_equal(WEFT_LHIST_NBUCKETS(0, 100, 10), 12);
	assert_int_equal(WEFT_LHIST_NBUCKETS(-10, 100, 7), 18);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		__u64 *b = state_new(&spec);

		agg_state_add(&spec, b, cases[i].x);
		for (unsigned k = 0; k < 12; k++)
			assert_int_equal(b[k], k == cases[i].b);
		assert_int_equal(agg_state_final(&spec, b, &r), 0);
		assert_true(r.buckets[cases[i].b].min <= cases[i].x &&
			    cases[i].x <= r.buckets[cases[i].b].max);
		agg_result_release(&r);
		free(b);
	}
	__u64 *b = state_new(&spec);

	assert_int_equal(agg_state_final(&spec, b, &r), 0);
	assert_true(r.buckets[0].open_below && r.buckets[0].max == -1);
	assert_true(r.buckets[10].min == 90 && r.buckets[10].max == 94); /* clipped at hi */
	assert_true(r.buckets[11].open_above && r.buckets[11].min == 95);
	agg_result_release(&r);

	/* invalid specs */
	struct agg_spec bad[] = {
		{ .kind = AGG_LHIST, .lo = 0, .hi = 100, .step = 0 },
		{ .kind = AGG_LHIST, .lo = 0, .hi = 100, .step = -1 },
		{ .kind = AGG_LHIST, .lo = 10, .hi = 10, .step = 1 },
		{ .kind = AGG_LHIST, .lo = 0, .hi = 100000, .step = 1 }, /* too many buckets */
		{ .kind = AGG_LHIST, .lo = 0, .hi = 1023, .step = 1 }, /* 1025 buckets */
		/* 2^64 + 1 buckets, which a wrapping count took for 1 */
		{ .kind = AGG_LHIST, .lo = INT64_MIN, .hi = INT64_MAX, .step = 1 },
		{ .kind = AGG_QUANTILE, .q = 1.5 },
		{ .kind = AGG_QUANTILE, .q = NAN },
		{ .kind = AGG__COUNT },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_false(agg_spec_valid(&bad[i]));
		assert_int_equal(agg_state_size(&bad[i]), 0);
		assert_int_equal(agg_state_add(&bad[i], b, 1), -EINVAL);
	}
	free(b);
	/* the one bound, in all (below lo and from hi up included): 1022 + 2 fit */
	struct agg_spec edge = { .kind = AGG_LHIST, .lo = 0, .hi = 1022, .step = 1 };
	assert_true(agg_spec_valid(&edge));
	assert_int_equal(agg_lhist_nbuckets(0, 1022, 1), WEFT_LHIST_MAX_BUCKETS);
	assert_int_equal(agg_lhist_nbuckets(0, 1023, 1), WEFT_LHIST_MAX_BUCKETS + 1);
	assert_int_equal(agg_lhist_nbuckets(0, 95, 10), WEFT_LHIST_NBUCKETS(0, 95, 10));
	assert_true(agg_lhist_nbuckets(INT64_MIN, INT64_MAX, 1) == UINT64_MAX); /* saturated */
	assert_true(agg_lhist_nbuckets(INT64_MIN, INT64_MAX, 2) == (1ULL << 63) + 2);
	assert_int_equal(agg_lhist_nbuckets(5, 5, 1), 0);
	assert_int_equal(agg_lhist_nbuckets(0, 5, 0), 0);
	/* ceil() without wrapping: 2^64 - 1 over 2^63 - 1 is 3 buckets (the last one short) */
	struct agg_spec whole = {
		.kind = AGG_LHIST, .lo = INT64_MIN, .hi = INT64_MAX, .step = INT64_MAX
	};
	assert_int_equal(agg_state_size(&whole), 5 * 8);
	/* the widest spec that fits: 1022 in-range buckets over the whole range */
	struct agg_spec wide = { .kind = AGG_LHIST,
				 .lo = INT64_MIN,
				 .hi = INT64_MAX,
				 .step = (int64_t)(UINT64_MAX / 1022 + 1) };
	assert_true(agg_spec_valid(&wide));
	assert_int_equal(agg_state_size(&wide), 8 * 1024);
	b = state_new(&wide);
	agg_state_add(&wide, b, INT64_MIN);
	agg_state_add(&wide, b, INT64_MAX - 1);
	agg_state_add(&wide, b, INT64_MAX);
	assert_int_equal(b[1], 1);
	assert_int_equal(b[1022], 1);
	assert_int_equal(b[1023], 1);
	free(b);
}

/* bpftrace 0.17 prints exactly this for hist(-1), hist(5), hist(1000) (run and copied). */
static void test_hist_render(void **unused)
{
	static const char expect[] =
		"@h: \n"
		"(..., 0)               1 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n"
		"[0]                    0 |                                                    |\n"
		"[1]                    0 |                                                    |\n"
		"[2, 4)                 0 |                                                    |\n"
		"[4, 8)                 1 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n"
		"[8, 16)                0 |                                                    |\n"
		"[16, 32)               0 |                                                    |\n"
		"[32, 64)               0 |                                                    |\n"
		"[64, 128)              0 |                                                    |\n"
		"[128, 256)             0 |                                                    |\n"
		"[256, 512)             0 |                                                    |\n"
		"[512, 1K)              1 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n";
	static const char expect_l[] =
		"(..., 0)               1 |@@@@@@@@@@@@@@@@@@@@@@@@@@                          |\n"
		"[0, 10)                2 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n"
		"[10, 20)               0 |                                                    |\n"
		"[20, 30)               0 |                                                    |\n"
		"[30, 40)               0 |                                                    |\n"
		"[40, 50)               0 |                                                    |\n"
		"[50, 60)               0 |                                                    |\n"
		"[60, 70)               0 |                                                    |\n"
		"[70, 80)               0 |                                                    |\n"
		"[80, 90)               0 |                                                    |\n"
		"[90, 100)              0 |                                                    |\n"
		"[100, ...)             1 |@@@@@@@@@@@@@@@@@@@@@@@@@@                          |\n";
	struct agg_spec spec = { .kind = AGG_HIST };
	struct agg_spec lspec = { .kind = AGG_LHIST, .lo = 0, .hi = 100, .step = 10 };
	void *s = state_new(&spec), *l = state_new(&lspec);
	struct agg_result r;
	char *out = NULL;
	size_t len = 0;
	FILE *f;

	agg_state_add(&spec, s, -1);
	agg_state_add(&spec, s, 5);
	agg_state_add(&spec, s, 1000);
	assert_int_equal(agg_state_final(&spec, s, &r), 0);
	f = open_memstream(&out, &len);
	assert_int_equal(agg_result_print_hist(f, "@h", &r), 0);
	fclose(f);
	assert_string_equal(out, expect);
	free(out);
	agg_result_release(&r);

	agg_state_add(&lspec, l, 5);
	agg_state_add(&lspec, l, 0);
	agg_state_add(&lspec, l, -3);
	agg_state_add(&lspec, l, 300);
	assert_int_equal(agg_state_final(&lspec, l, &r), 0);
	f = open_memstream(&out, &len);
	assert_int_equal(agg_result_print_hist(f, NULL, &r), 0);
	fclose(f);
	assert_string_equal(out, expect_l);
	free(out);
	agg_result_release(&r);

	/* the top bucket's label */
	agg_state_init(&spec, s);
	agg_state_add(&spec, s, INT64_MAX);
	agg_state_final(&spec, s, &r);
	f = open_memstream(&out, &len);
	agg_result_print_hist(f, NULL, &r);
	fclose(f);
	assert_string_equal(
		out,
		"[4E, 8E)               1 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n");
	free(out);
	agg_result_release(&r);
	free(s);
	free(l);
}

/* ---- wire form ---- */

static void fill_random(const struct agg_spec *spec, void *s, uint64_t *seed, size_t n)
{
	for (size_t i = 0; i < n; i++)
		agg_state_add(spec, s, rng_value(seed));
}

static void test_encode_decode(void **unused)
{
	for (size_t si = 0; si < NSPECS; si++) {
		const struct agg_spec *spec = &specs[si];
		size_t max = agg_state_encoded_max(spec), ssz = agg_state_size(spec);
		uint8_t *buf = malloc(max + 1);
		void *s = state_new(spec), *d = state_new(spec);
		uint64_t seed = 555 + si;
		static const size_t sizes[] = { 0, 1, 5, 100, 20000 };

		for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
			ssize_t len;

			agg_state_init(spec, s);
			fill_random(spec, s, &seed, sizes[k]);
			len = agg_state_encode(spec, s, buf, max);
			assert_true(len > 0 && (size_t)len <= max);
			assert_int_equal(agg_state_decode(spec, d, buf, (size_t)len), 0);
			assert_memory_equal(s, d, ssz);
			/* too small a buffer */
			assert_int_equal(agg_state_encode(spec, s, buf, (size_t)len - 1), -ENOSPC);
			len = agg_state_encode(spec, s, buf, max);
			/* every truncation and one trailing byte are rejected, state left empty */
			for (ssize_t cut = 0; cut < len; cut++) {
				assert_int_equal(agg_state_decode(spec, d, buf, (size_t)cut),
						 -EINVAL);
				void *z = state_new(spec);

				assert_memory_equal(d, z, ssz);
				free(z);
			}
			buf[len] = 0;
			assert_int_equal(agg_state_decode(spec, d, buf, (size_t)len + 1), -EINVAL);
		}
		/* a state of another kind is refused */
		{
			struct agg_spec other = *spec;
			ssize_t len;

			other.kind = spec->kind == AGG_COUNT ? AGG_SUM : AGG_COUNT;
			len = agg_state_encode(spec, s, buf, max);
			assert_int_equal(agg_state_decode(&other, d, buf, (size_t)len), -EINVAL);
		}
		free(buf);
		free(s);
		free(d);
	}
}

/*
 * Hostile input: random bytes and random mutations of valid encodings.  decode must not crash
 * (run under ASan in CI), and whatever it accepts must be canonical: re-encoding gives the same
 * bytes, so validation admits no state agg_state_encode() would not produce for it.
 */
static void test_decode_hostile(void **unused)
{
	for (size_t si = 0; si < NSPECS; si++) {
		const struct agg_spec *spec = &specs[si];
		size_t max = agg_state_encoded_max(spec);
		uint8_t *buf = malloc(max + 100), *re = malloc(max);
		void *s = state_new(spec), *d = state_new(spec);
		uint64_t seed = 8080 + si;
		unsigned accepted = 0, rejected = 0;

		for (int it = 0; it < 3000; it++) {
			size_t len;
			ssize_t rl;

			if (it % 3 == 0) { /* random bytes with a valid header */
				len = 2 + rng_below(&seed, 80);
				for (size_t i = 0; i < len; i++)
					buf[i] = (uint8_t)rng_next(&seed);
				buf[0] = 1;
				buf[1] = (uint8_t)spec->kind;
			} else { /* a valid encoding with a few bytes changed */
				agg_state_init(spec, s);
				fill_random(spec, s, &seed, rng_below(&seed, 50));
				len = (size_t)agg_state_encode(spec, s, buf, max);
				for (int m = 0; m <= (int)rng_below(&seed, 3); m++)
					buf[rng_below(&seed, len)] ^=
						(uint8_t)(1 + rng_below(&seed, 255));
			}
			if (agg_state_decode(spec, d, buf, len) != 0) {
				rejected++;
				continue;
			}
			accepted++;
			rl = agg_state_encode(spec, d, re, max);
			assert_int_equal(rl, len);
			assert_memory_equal(re, buf, len);
		}
		assert_true(rejected > 0);
		free(buf);
		free(re);
		free(s);
		free(d);
	}
}

/* ---- order by … limit ---- */

static const double *sort_keys;
static int sort_desc;

static int cmp_rows(const void *a, const void *b)
{
	size_t i = *(const size_t *)a, j = *(const size_t *)b;
	double x = sort_keys[i], y = sort_keys[j];

	if (isnan(x) || isnan(y)) {
		if (isnan(x) != isnan(y))
			return isnan(x) ? 1 : -1;
	} else if (x != y) {
		return (sort_desc ? x > y : x < y) ? -1 : 1;
	}
	return (i > j) - (i < j);
}

static void test_topk(void **unused)
{
	uint64_t seed = 3;

	for (int round = 0; round < 200; round++) {
		size_t n = rng_below(&seed, 300), limits[] = { 0, 1, 5, 10, n, n + 3 };
		double *keys = malloc((n + 1) * sizeof(*keys));
		size_t *ref = malloc((n + 1) * sizeof(*ref)), *out = malloc((n + 4) * sizeof(*out));

		for (size_t i = 0; i < n; i++) {
			uint64_t r = rng_below(&seed, 100);

			keys[i] = r < 5 ? NAN : (double)rng_below(&seed, 20); /* many ties */
			ref[i] = i;
		}
		for (int desc = 0; desc <= 1; desc++) {
			sort_keys = keys;
			sort_desc = desc;
			qsort(ref, n, sizeof(*ref), cmp_rows);
			for (size_t l = 0; l < sizeof(limits) / sizeof(limits[0]); l++) {
				size_t want = limits[l] < n ? limits[l] : n;

				assert_int_equal(agg_topk(keys, n, limits[l], desc, out), want);
				assert_memory_equal(out, ref, want * sizeof(*out));
			}
		}
		free(keys);
		free(ref);
		free(out);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_kernel_matches_user),
		cmocka_unit_test(test_merge_properties),
		cmocka_unit_test(test_quantile_error_bound),
		cmocka_unit_test(test_quantile_rank_and_negatives),
		cmocka_unit_test(test_sketch_buckets),
		cmocka_unit_test(test_stddev),
		cmocka_unit_test(test_stddev_128bit_sums),
		cmocka_unit_test(test_simple_kinds),
		cmocka_unit_test(test_distinct),
		cmocka_unit_test(test_distinct_strings),
		cmocka_unit_test(test_hist_boundaries),
		cmocka_unit_test(test_lhist),
		cmocka_unit_test(test_hist_render),
		cmocka_unit_test(test_encode_decode),
		cmocka_unit_test(test_decode_hostile),
		cmocka_unit_test(test_topk),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
