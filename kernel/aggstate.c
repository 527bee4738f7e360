// SPDX-License-Identifier: Apache-2.0
/*
 * Mergeable aggregate states, user side (see aggstate.h for the contract, docs/aggregates.md
 * for the states, merges and error bounds).
 *
 * The user-side state of every kind except quantile IS the kernel value layout of
 * kernel/weft_aggval.h, updated by the very functions of kernel/weft_agg.bpf.h that the BPF
 * programs run, so "kernel and user agree" is true by construction for them and is tested
 * against the real kernel in tests/unit/test_aggbpf.c.  The quantile state differs only in
 * its counts: 64-bit here (a cluster-wide window may exceed 2^32 in one bucket), 32-bit per
 * CPU per epoch in the kernel.
 *
 * What must never happen here: a merge that depends on order (no floating point before
 * agg_state_final()), or a decode that trusts its input.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernel/aggstate.h"
#include "kernel/weft_agg.bpf.h"

/* The user-side quantile state: the kernel's, with 64-bit counts. */
struct agg_quantile_state {
	__u64 n;
	__u64 neg;
	__s64 min;
	__s64 max;
	__u64 c[WEFT_SKETCH_NBUCKETS];
};

_Static_assert(sizeof(struct weft_aggval_count) == 8, "kernel ABI");
_Static_assert(sizeof(struct weft_aggval_sum) == 8, "kernel ABI");
_Static_assert(sizeof(struct weft_aggval_minmax) == 16, "kernel ABI");
_Static_assert(sizeof(struct weft_aggval_avg) == 16, "kernel ABI");
_Static_assert(sizeof(struct weft_aggval_stddev) == 48, "kernel ABI");
_Static_assert(sizeof(struct weft_aggval_hist) == 520, "kernel ABI");
_Static_assert(sizeof(struct weft_aggval_quantile) == 7584, "kernel ABI");
_Static_assert(sizeof(struct weft_aggval_distinct) == 2048, "kernel ABI");
_Static_assert(WEFT_AGGVAL_QUANTILE_SIZE <= WEFT_AGGVAL_LARGEST_SIZE, "zero buffer too small");
_Static_assert(8 * WEFT_LHIST_MAX_BUCKETS <= WEFT_AGGVAL_LARGEST_SIZE, "zero buffer too small");

#define AGG_WIRE_VERSION 1

uint64_t agg_lhist_nbuckets(int64_t lo, int64_t hi, int64_t step)
{
	uint64_t d, st, in_range;

	if (step <= 0 || hi <= lo)
		return 0;
	d = (uint64_t)hi - (uint64_t)lo;
	st = (uint64_t)step;
	in_range = d / st + (d % st != 0);
	/* lhist(e, INT64_MIN, INT64_MAX, 1) has 2^64 + 1 buckets: saturate, never wrap */
	return in_range > UINT64_MAX - 2 ? UINT64_MAX : in_range + 2;
}

/* lhist's bucket count, or 0 if lo/hi/step are unusable or make too many buckets. */
static uint32_t lhist_nbuckets(const struct agg_spec *s)
{
	uint64_t nb = agg_lhist_nbuckets(s->lo, s->hi, s->step);

	if (nb > WEFT_LHIST_MAX_BUCKETS)
		return 0;
	return (uint32_t)nb;
}

bool agg_spec_valid(const struct agg_spec *spec)
{
	if (!spec)
		return false;
	switch (spec->kind) {
	case AGG_COUNT:
	case AGG_SUM:
	case AGG_MIN:
	case AGG_MAX:
	case AGG_AVG:
	case AGG_STDDEV:
	case AGG_HIST:
	case AGG_DISTINCT:
		return true;
	case AGG_LHIST:
		return lhist_nbuckets(spec) != 0;
	case AGG_QUANTILE:
		return spec->q >= 0.0 && spec->q <= 1.0; /* false for NaN */
	default:
		return false;
	}
}

size_t agg_state_size(const struct agg_spec *spec)
{
	if (!agg_spec_valid(spec))
		return 0;
	if (spec->kind == AGG_QUANTILE)
		return sizeof(struct agg_quantile_state);
	return agg_kernel_value_size(spec);
}

size_t agg_kernel_value_size(const struct agg_spec *spec)
{
	if (!agg_spec_valid(spec))
		return 0;
	switch (spec->kind) {
	case AGG_COUNT:
		return WEFT_AGGVAL_COUNT_SIZE;
	case AGG_SUM:
		return WEFT_AGGVAL_SUM_SIZE;
	case AGG_MIN:
		return WEFT_AGGVAL_MIN_SIZE;
	case AGG_MAX:
		return WEFT_AGGVAL_MAX_SIZE;
	case AGG_AVG:
		return WEFT_AGGVAL_AVG_SIZE;
	case AGG_STDDEV:
		return WEFT_AGGVAL_STDDEV_SIZE;
	case AGG_HIST:
		return WEFT_AGGVAL_HIST_SIZE;
	case AGG_LHIST:
		return WEFT_AGGVAL_LHIST_SIZE(spec->lo, spec->hi, spec->step);
	case AGG_QUANTILE:
		return WEFT_AGGVAL_QUANTILE_SIZE;
	case AGG_DISTINCT:
		return WEFT_AGGVAL_DISTINCT_SIZE;
	default:
		return 0;
	}
}

int agg_state_init(const struct agg_spec *spec, void *state)
{
	size_t sz = agg_state_size(spec);

	if (!sz || !state)
		return -EINVAL;
	memset(state, 0, sz);
	return 0;
}

static void quantile_add(struct agg_quantile_state *q, int64_t x)
{
	/* the same steps as weft_aggval_quantile_add(), with 64-bit counts */
	if (!q->n || x < q->min)
		q->min = x;
	if (!q->n || x > q->max)
		q->max = x;
	q->n++;
	if (x < 0)
		q->neg++;
	q->c[weft_sketch_index(x)]++;
}

int agg_state_add(const struct agg_spec *spec, void *state, int64_t x)
{
	if (!agg_spec_valid(spec) || !state)
		return -EINVAL;
	switch (spec->kind) {
	case AGG_COUNT:
		weft_aggval_count_add(state, x);
		break;
	case AGG_SUM:
		weft_aggval_sum_add(state, x);
		break;
	case AGG_MIN:
		weft_aggval_min_add(state, x);
		break;
	case AGG_MAX:
		weft_aggval_max_add(state, x);
		break;
	case AGG_AVG:
		weft_aggval_avg_add(state, x);
		break;
	case AGG_STDDEV:
		weft_aggval_stddev_add(state, x);
		break;
	case AGG_HIST:
		weft_aggval_hist_add(state, x);
		break;
	case AGG_LHIST:
		weft_aggval_lhist_add(state, x, spec->lo, spec->hi, spec->step);
		break;
	case AGG_QUANTILE:
		quantile_add(state, x);
		break;
	case AGG_DISTINCT:
		weft_aggval_distinct_add(state, x);
		break;
	default:
		return -EINVAL;
	}
	return 0;
}

int agg_state_add_hash(const struct agg_spec *spec, void *state, uint64_t h)
{
	if (!agg_spec_valid(spec) || !state || spec->kind != AGG_DISTINCT)
		return -EINVAL;
	weft_aggval_distinct_add_hash(state, h);
	return 0;
}

static void minmax_merge(struct weft_aggval_minmax *d, const struct weft_aggval_minmax *s,
			 bool is_min)
{
	if (!s->n)
		return;
	if (!d->n || (is_min ? s->v < d->v : s->v > d->v))
		d->v = s->v;
	d->n += s->n;
}

static void u64s_add(__u64 *d, const __u64 *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		d[i] += s[i];
}

/* The n-limb little-endian number d += s (modulo 2^(64 n)). */
static void limbs_add(__u64 *d, const __u64 *s, int n)
{
	__u64 carry = 0;

	for (int i = 0; i < n; i++) {
		__u64 t = d[i] + carry;

		carry = t < carry;
		d[i] = t + s[i];
		carry += d[i] < s[i];
	}
}

static void stddev_merge(struct weft_aggval_stddev *d, const struct weft_aggval_stddev *s)
{
	__u64 ds[2] = { d->sum_lo, (__u64)d->sum_hi }, ss[2] = { s->sum_lo, (__u64)s->sum_hi };
	__u64 dq[3] = { d->sq_lo, d->sq_hi, d->sq_top }, sq[3] = { s->sq_lo, s->sq_hi, s->sq_top };

	d->n += s->n;
	limbs_add(ds, ss, 2);
	limbs_add(dq, sq, 3);
	d->sum_lo = ds[0];
	d->sum_hi = (__s64)ds[1];
	d->sq_lo = dq[0];
	d->sq_hi = dq[1];
	d->sq_top = dq[2];
}

/* Everything but the bucket counts, which differ in width between kernel and user. */
static void quantile_merge_head(struct agg_quantile_state *d, __u64 n, __u64 neg, __s64 min,
				__s64 max)
{
	if (!n)
		return;
	if (!d->n || min < d->min)
		d->min = min;
	if (!d->n || max > d->max)
		d->max = max;
	d->n += n;
	d->neg += neg;
}

static void distinct_merge(struct weft_aggval_distinct *d, const struct weft_aggval_distinct *s)
{
	for (size_t i = 0; i < WEFT_HLL_M; i++)
		if (s->reg[i] > d->reg[i])
			d->reg[i] = s->reg[i];
}

int agg_state_merge(const struct agg_spec *spec, void *dst, const void *src)
{
	if (!agg_spec_valid(spec) || !dst || !src)
		return -EINVAL;
	switch (spec->kind) {
	case AGG_COUNT:
		((struct weft_aggval_count *)dst)->n += ((const struct weft_aggval_count *)src)->n;
		break;
	case AGG_SUM: {
		struct weft_aggval_sum *d = dst;

		d->sum = (__s64)((__u64)d->sum + (__u64)((const struct weft_aggval_sum *)src)->sum);
		break;
	}
	case AGG_MIN:
	case AGG_MAX:
		minmax_merge(dst, src, spec->kind == AGG_MIN);
		break;
	case AGG_AVG: {
		struct weft_aggval_avg *d = dst;
		const struct weft_aggval_avg *s = src;

		d->sum = (__s64)((__u64)d->sum + (__u64)s->sum);
		d->n += s->n;
		break;
	}
	case AGG_STDDEV:
		stddev_merge(dst, src);
		break;
	case AGG_HIST:
	case AGG_LHIST:
		u64s_add(dst, src, agg_state_size(spec) / sizeof(__u64));
		break;
	case AGG_QUANTILE: {
		struct agg_quantile_state *d = dst;
		const struct agg_quantile_state *s = src;

		quantile_merge_head(d, s->n, s->neg, s->min, s->max);
		u64s_add(d->c, s->c, WEFT_SKETCH_NBUCKETS);
		break;
	}
	case AGG_DISTINCT:
		distinct_merge(dst, src);
		break;
	default:
		return -EINVAL;
	}
	return 0;
}

int agg_state_from_kernel(const struct agg_spec *spec, void *dst, const void *kval)
{
	const struct weft_aggval_quantile *k = kval;
	struct agg_quantile_state *d = dst;

	if (!agg_spec_valid(spec) || !dst || !kval)
		return -EINVAL;
	if (spec->kind != AGG_QUANTILE)
		return agg_state_merge(spec, dst, kval); /* same layout on both sides */
	quantile_merge_head(d, k->n, k->neg, k->min, k->max);
	for (size_t i = 0; i < WEFT_SKETCH_NBUCKETS; i++)
		d->c[i] += k->c[i];
	return 0;
}

/* ---- finalising ---- */

uint64_t agg_quantile_rank(double q, uint64_t n)
{
	double r;
	uint64_t k;

	if (!n)
		return 0;
	if (!(q > 0.0))
		return 1;
	if (q >= 1.0)
		return n;
	r = q * (double)n;
	k = (uint64_t)ceil(r - 1e-9 * (r > 1.0 ? r : 1.0));
	if (k < 1)
		k = 1;
	if (k > n)
		k = n;
	return k;
}

int agg_quantile_buckets(const struct agg_spec *spec, const void *state, struct agg_bucket **out,
			 size_t *n, size_t *mark)
{
	const struct agg_quantile_state *s = state;
	uint64_t k, cum = 0;
	size_t nb = 0;

	*out = NULL;
	*n = 0;
	*mark = 0;
	if (!agg_spec_valid(spec) || spec->kind != AGG_QUANTILE)
		return -EINVAL;
	for (size_t i = 0; i < WEFT_SKETCH_NBUCKETS; i++)
		nb += s->c[i] != 0;
	if (!nb)
		return 0;
	*out = calloc(nb, sizeof(**out));
	if (!*out)
		return -ENOMEM;
	k = agg_quantile_rank(spec->q, s->n);
	for (__u32 i = 0; i < WEFT_SKETCH_NBUCKETS; i++) {
		struct agg_bucket *b;
		__u64 lo, width;

		if (!s->c[i])
			continue;
		b = &(*out)[(*n)++];
		weft_sketch_bounds(i, &lo, &width);
		b->min = (int64_t)lo;
		b->max = (int64_t)(lo + width - 1);
		b->count = s->c[i];
		if (cum < k && cum + s->c[i] >= k)
			*mark = *n - 1;
		cum += s->c[i];
	}
	return 0;
}

static double quantile_value(const struct agg_quantile_state *s, double q)
{
	uint64_t k = agg_quantile_rank(q, s->n), cum = 0;
	__u64 lo, width;
	double v;
	size_t i;

	/* negatives were clamped into bucket 0 and sort first: their values are not kept */
	if (k <= s->neg || k == 1)
		return (double)s->min;
	if (k == s->n) /* min and max are exact: p0 and p100 are too */
		return (double)s->max;
	for (i = 0; i < WEFT_SKETCH_NBUCKETS - 1; i++) {
		cum += s->c[i];
		if (cum >= k)
			break;
	}
	weft_sketch_bounds((__u32)i, &lo, &width);
	v = (double)lo + (double)(width - 1) / 2.0; /* midpoint of the bucket's integers */
	if (v < (double)s->min)
		v = (double)s->min;
	if (v > (double)s->max)
		v = (double)s->max;
	return v;
}

/* r (nx + ny limbs) = x * y, unsigned little-endian limbs. */
static void limbs_mul(const uint64_t *x, int nx, const uint64_t *y, int ny, uint64_t *r)
{
	memset(r, 0, (size_t)(nx + ny) * sizeof(r[0]));
	for (int i = 0; i < nx; i++) {
		uint64_t carry = 0;

		for (int j = 0; j < ny; j++) {
			unsigned __int128 t = (unsigned __int128)x[i] * y[j] + r[i + j] + carry;

			r[i + j] = (uint64_t)t;
			carry = (uint64_t)(t >> 64);
		}
		r[i + ny] = carry;
	}
}

/*
 * Population standard deviation sqrt(n * sq - sum^2) / n, with n * sq - sum^2 computed exactly
 * (both < 2^256) and only then rounded to a long double, so there is no cancellation error.
 */
static double stddev_value(const struct weft_aggval_stddev *s)
{
	uint64_t nn[1] = { s->n }, sq[3] = { s->sq_lo, s->sq_hi, s->sq_top };
	uint64_t a[2] = { s->sum_lo, (__u64)s->sum_hi };
	uint64_t p[4], m[4], borrow = 0;
	long double var = 0;

	if ((int64_t)a[1] < 0) { /* |sum| of a 128-bit two's complement number */
		a[0] = ~a[0] + 1;
		a[1] = ~a[1] + (a[0] == 0);
	}
	limbs_mul(nn, 1, sq, 3, p);
	limbs_mul(a, 2, a, 2, m);
	for (int i = 0; i < 4; i++) {
		uint64_t d = p[i] - m[i] - borrow;

		borrow = (p[i] < m[i]) || (p[i] - m[i] < borrow);
		p[i] = d;
	}
	if (borrow) /* n * sq < sum^2 cannot come from real inputs (Cauchy-Schwarz) */
		return 0.0;
	for (int i = 3; i >= 0; i--)
		var = var * 18446744073709551616.0L + (long double)p[i];
	return (double)(sqrtl(var) / (long double)s->n);
}

double agg_hll_estimate(const uint8_t *reg)
{
	const double m = WEFT_HLL_M, alpha = 0.7213 / (1.0 + 1.079 / m);
	unsigned zeros = 0;
	double sum = 0, e;

	for (size_t i = 0; i < WEFT_HLL_M; i++) {
		sum += ldexp(1.0, -(int)reg[i]);
		zeros += reg[i] == 0;
	}
	e = alpha * m * m / sum;
	if (e <= 2.5 * m && zeros)
		e = m * log(m / zeros);
	return e;
}

static int buckets_final(const struct agg_spec *spec, const __u64 *b, struct agg_result *out)
{
	size_t nb = agg_state_size(spec) / sizeof(__u64);

	out->buckets = calloc(nb, sizeof(*out->buckets));
	if (!out->buckets)
		return -ENOMEM;
	out->nbuckets = nb;
	for (size_t i = 0; i < nb; i++) {
		struct agg_bucket *k = &out->buckets[i];

		k->count = b[i];
		out->n += b[i];
		if (spec->kind == AGG_HIST) {
			if (i == 0) {
				k->min = INT64_MIN;
				k->max = -1;
				k->open_below = true;
			} else if (i == 1) {
				k->min = k->max = 0;
			} else {
				k->min = (int64_t)1 << (i - 2);
				k->max = i == WEFT_HIST_NBUCKETS - 1 ? INT64_MAX :
								       ((int64_t)1 << (i - 1)) - 1;
			}
			continue;
		}
		if (i == 0) {
			k->min = INT64_MIN;
			k->max = spec->lo == INT64_MIN ? INT64_MIN : spec->lo - 1;
			k->open_below = true;
		} else if (i == nb - 1) {
			k->min = spec->hi;
			k->max = INT64_MAX;
			k->open_above = true;
		} else {
			/* offsets from lo, unsigned: they cannot wrap below hi - lo */
			uint64_t d = (uint64_t)spec->hi - (uint64_t)spec->lo;
			uint64_t off = (uint64_t)spec->step * (i - 1), step = (uint64_t)spec->step;

			k->min = (int64_t)((uint64_t)spec->lo + off);
			/* the last in-range bucket ends at hi - 1 */
			k->max = step - 1 >= d - off ?
					 spec->hi - 1 :
					 (int64_t)((uint64_t)spec->lo + off + step - 1);
		}
	}
	return 0;
}

int agg_state_final(const struct agg_spec *spec, const void *state, struct agg_result *out)
{
	if (!out)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	if (!agg_spec_valid(spec) || !state)
		return -EINVAL;
	out->kind = spec->kind;
	switch (spec->kind) {
	case AGG_COUNT:
		out->n = ((const struct weft_aggval_count *)state)->n;
		out->integer = true;
		out->ival = (int64_t)out->n;
		out->value = (double)out->n;
		break;
	case AGG_SUM:
		out->integer = true;
		out->ival = ((const struct weft_aggval_sum *)state)->sum;
		out->value = (double)out->ival;
		break;
	case AGG_MIN:
	case AGG_MAX: {
		const struct weft_aggval_minmax *s = state;

		out->n = s->n;
		out->empty = !s->n;
		out->integer = !out->empty;
		out->ival = s->v;
		out->value = (double)s->v;
		break;
	}
	case AGG_AVG: {
		const struct weft_aggval_avg *s = state;

		out->n = s->n;
		out->empty = !s->n;
		out->value = s->n ? (double)s->sum / (double)s->n : 0.0;
		break;
	}
	case AGG_STDDEV: {
		const struct weft_aggval_stddev *s = state;

		out->n = s->n;
		out->empty = !s->n;
		out->value = s->n ? stddev_value(s) : 0.0;
		break;
	}
	case AGG_HIST:
	case AGG_LHIST:
		return buckets_final(spec, state, out);
	case AGG_QUANTILE: {
		const struct agg_quantile_state *s = state;

		out->n = s->n;
		out->neg = s->neg;
		out->empty = !s->n;
		out->value = s->n ? quantile_value(s, spec->q) : 0.0;
		break;
	}
	case AGG_DISTINCT:
		out->value = agg_hll_estimate(((const struct weft_aggval_distinct *)state)->reg);
		out->ival = (int64_t)llround(out->value);
		break;
	default:
		return -EINVAL;
	}
	return 0;
}

void agg_result_release(struct agg_result *r)
{
	if (!r)
		return;
	free(r->buckets);
	r->buckets = NULL;
	r->nbuckets = 0;
}

/* ---- wire form ---- */

struct wbuf {
	uint8_t *p;
	size_t cap, len;
	bool full;
};

static void put(struct wbuf *w, uint64_t v, int bytes)
{
	if (w->full || w->cap - w->len < (size_t)bytes) {
		w->full = true;
		return;
	}
	for (int i = 0; i < bytes; i++)
		w->p[w->len++] = (uint8_t)(v >> (8 * i));
}

struct rbuf {
	const uint8_t *p;
	size_t len, off;
	bool bad;
};

static uint64_t get(struct rbuf *r, int bytes)
{
	uint64_t v = 0;

	if (r->bad || r->len - r->off < (size_t)bytes) {
		r->bad = true;
		return 0;
	}
	for (int i = 0; i < bytes; i++)
		v |= (uint64_t)r->p[r->off++] << (8 * i);
	return v;
}

/* Bucket arrays travel sparse: u32 nb, u32 nnz, nnz x (u32 index, u64 count), index rising. */
static void put_buckets(struct wbuf *w, const __u64 *b, size_t nb)
{
	uint32_t nnz = 0;

	for (size_t i = 0; i < nb; i++)
		nnz += b[i] != 0;
	put(w, nb, 4);
	put(w, nnz, 4);
	for (size_t i = 0; i < nb; i++) {
		if (!b[i])
			continue;
		put(w, i, 4);
		put(w, b[i], 8);
	}
}

/* Fills b (zeroed by the caller); *total gets the sum of counts, false if it overflows. */
static bool get_buckets(struct rbuf *r, __u64 *b, size_t nb, uint64_t *total)
{
	uint64_t n = get(r, 4), nnz = get(r, 4), sum = 0;
	int64_t prev = -1;

	if (r->bad || n != nb || nnz > nb)
		return false;
	for (uint64_t k = 0; k < nnz; k++) {
		uint64_t i = get(r, 4), c = get(r, 8);

		if (r->bad || (int64_t)i <= prev || i >= nb || !c || sum + c < sum)
			return false;
		b[i] = c;
		sum += c;
		prev = (int64_t)i;
	}
	*total = sum;
	return true;
}

/*
 * HyperLogLog registers travel dense (u8 form 0, then WEFT_HLL_M bytes) or sparse (u8 form 1,
 * u16 nnz, nnz x (u16 index, u8 rank), index rising), whichever is smaller: one canonical form.
 */
#define HLL_SPARSE 1
#define HLL_DENSE 0

static bool hll_sparse_smaller(size_t nnz)
{
	return 2 + 3 * nnz < WEFT_HLL_M;
}

size_t agg_state_encoded_max(const struct agg_spec *spec)
{
	if (!agg_spec_valid(spec))
		return 0;
	switch (spec->kind) {
	case AGG_HIST:
	case AGG_LHIST:
		return 2 + 8 + 12 * (agg_state_size(spec) / 8);
	case AGG_QUANTILE:
		return 2 + 32 + 8 + 12 * WEFT_SKETCH_NBUCKETS;
	case AGG_DISTINCT:
		return 2 + 1 + WEFT_HLL_M;
	default:
		return 2 + agg_state_size(spec); /* fixed-size integer fields */
	}
}

ssize_t agg_state_encode(const struct agg_spec *spec, const void *state, void *buf, size_t cap)
{
	struct wbuf w = { .p = buf, .cap = buf ? cap : 0 };

	if (!agg_spec_valid(spec) || !state)
		return -EINVAL;
	put(&w, AGG_WIRE_VERSION, 1);
	put(&w, (uint64_t)spec->kind, 1);
	switch (spec->kind) {
	case AGG_COUNT:
	case AGG_SUM:
	case AGG_MIN:
	case AGG_MAX:
	case AGG_AVG:
	case AGG_STDDEV: {
		const __u64 *f = state; /* all fields are 64-bit integers, in layout order */

		for (size_t i = 0; i < agg_state_size(spec) / 8; i++)
			put(&w, f[i], 8);
		break;
	}
	case AGG_HIST:
	case AGG_LHIST:
		put_buckets(&w, state, agg_state_size(spec) / 8);
		break;
	case AGG_QUANTILE: {
		const struct agg_quantile_state *s = state;

		put(&w, s->n, 8);
		put(&w, s->neg, 8);
		put(&w, (uint64_t)s->min, 8);
		put(&w, (uint64_t)s->max, 8);
		put_buckets(&w, s->c, WEFT_SKETCH_NBUCKETS);
		break;
	}
	case AGG_DISTINCT: {
		const struct weft_aggval_distinct *s = state;
		size_t nnz = 0;

		for (size_t i = 0; i < WEFT_HLL_M; i++)
			nnz += s->reg[i] != 0;
		if (hll_sparse_smaller(nnz)) {
			put(&w, HLL_SPARSE, 1);
			put(&w, nnz, 2);
			for (size_t i = 0; i < WEFT_HLL_M; i++) {
				if (!s->reg[i])
					continue;
				put(&w, i, 2);
				put(&w, s->reg[i], 1);
			}
		} else {
			put(&w, HLL_DENSE, 1);
			for (size_t i = 0; i < WEFT_HLL_M; i++)
				put(&w, s->reg[i], 1);
		}
		break;
	}
	default:
		return -EINVAL;
	}
	return w.full ? -ENOSPC : (ssize_t)w.len;
}

static bool decode_fixed(const struct agg_spec *spec, __u64 *f, struct rbuf *r)
{
	size_t nf = agg_state_size(spec) / 8;

	for (size_t i = 0; i < nf; i++)
		f[i] = get(r, 8);
	if (r->bad)
		return false;
	switch (spec->kind) {
	case AGG_MIN:
	case AGG_MAX: /* {v, n}: empty means v == 0 (canonical) */
		return f[1] || !f[0];
	case AGG_AVG: /* {sum, n} */
		return f[1] || !f[0];
	case AGG_STDDEV: /* {n, sum_lo, sum_hi, sq_lo, sq_hi, sq_top} */
		return f[0] || !(f[1] | f[2] | f[3] | f[4] | f[5]);
	default:
		return true;
	}
}

static bool decode_quantile(struct agg_quantile_state *s, struct rbuf *r)
{
	uint64_t total;
	size_t first = 0, last = 0;

	s->n = get(r, 8);
	s->neg = get(r, 8);
	s->min = (int64_t)get(r, 8);
	s->max = (int64_t)get(r, 8);
	if (r->bad || !get_buckets(r, s->c, WEFT_SKETCH_NBUCKETS, &total) || total != s->n)
		return false;
	if (!s->n)
		return !s->neg && !s->min && !s->max;
	/* what agg_state_add() would have produced: min and max in the end buckets, negatives
	 * (clamped into bucket 0) counted iff min < 0 */
	while (!s->c[first])
		first++;
	for (last = WEFT_SKETCH_NBUCKETS - 1; !s->c[last]; last--)
		;
	return s->min <= s->max && weft_sketch_index(s->min) == first &&
	       weft_sketch_index(s->max) == last && s->neg <= s->c[0] &&
	       (s->min < 0) == (s->neg > 0) && (s->max >= 0 || s->neg == s->n);
}

static bool decode_distinct(struct weft_aggval_distinct *s, struct rbuf *r)
{
	uint64_t form = get(r, 1);

	if (r->bad)
		return false;
	if (form == HLL_DENSE) {
		size_t nnz = 0;

		for (size_t i = 0; i < WEFT_HLL_M; i++) {
			s->reg[i] = (__u8)get(r, 1);
			if (s->reg[i] > WEFT_HLL_MAX_RANK)
				return false;
			nnz += s->reg[i] != 0;
		}
		return !r->bad && !hll_sparse_smaller(nnz); /* canonical: the smaller form */
	}
	if (form == HLL_SPARSE) {
		uint64_t nnz = get(r, 2);
		int64_t prev = -1;

		if (r->bad || nnz > WEFT_HLL_M || !hll_sparse_smaller(nnz))
			return false;
		for (uint64_t k = 0; k < nnz; k++) {
			uint64_t i = get(r, 2), v = get(r, 1);

			if (r->bad || (int64_t)i <= prev || i >= WEFT_HLL_M || !v ||
			    v > WEFT_HLL_MAX_RANK)
				return false;
			s->reg[i] = (__u8)v;
			prev = (int64_t)i;
		}
		return true;
	}
	return false;
}

int agg_state_decode(const struct agg_spec *spec, void *state, const void *buf, size_t len)
{
	struct rbuf r = { .p = buf, .len = buf ? len : 0 };
	uint64_t total;
	bool ok;

	if (agg_state_init(spec, state))
		return -EINVAL;
	if (get(&r, 1) != AGG_WIRE_VERSION || get(&r, 1) != (uint64_t)spec->kind || r.bad)
		return -EINVAL;
	switch (spec->kind) {
	case AGG_HIST:
	case AGG_LHIST:
		ok = get_buckets(&r, state, agg_state_size(spec) / 8, &total);
		break;
	case AGG_QUANTILE:
		ok = decode_quantile(state, &r);
		break;
	case AGG_DISTINCT:
		ok = decode_distinct(state, &r);
		break;
	default:
		ok = decode_fixed(spec, state, &r);
		break;
	}
	if (!ok || r.bad || r.off != r.len) {
		agg_state_init(spec, state);
		return -EINVAL;
	}
	return 0;
}

/* ---- rendering ---- */

/* bpftrace's labels for powers of two: 1024 -> "1K", 2^62 -> "4E". */
static void pow2_label(char *buf, size_t sz, uint64_t v)
{
	static const char suffix[] = " KMGTPE";
	int s = 0;

	while (v >= 1024 && v % 1024 == 0 && s < 6) {
		v /= 1024;
		s++;
	}
	if (s)
		snprintf(buf, sz, "%" PRIu64 "%c", v, suffix[s]);
	else
		snprintf(buf, sz, "%" PRIu64, v);
}

static void bucket_label(char *buf, size_t sz, enum agg_kind kind, const struct agg_bucket *b)
{
	char lo[32], hi[32];

	if (b->open_below) {
		snprintf(buf, sz, "(..., %" PRId64 ")",
			 b->max == INT64_MIN ? INT64_MIN : (int64_t)((uint64_t)b->max + 1));
		return;
	}
	if (b->open_above) {
		snprintf(buf, sz, "[%" PRId64 ", ...)", b->min);
		return;
	}
	if (kind == AGG_HIST && b->min == b->max) {
		snprintf(buf, sz, "[%" PRId64 "]", b->min);
		return;
	}
	if (kind == AGG_HIST) {
		pow2_label(lo, sizeof(lo), (uint64_t)b->min);
		pow2_label(hi, sizeof(hi), (uint64_t)b->max + 1);
	} else {
		snprintf(lo, sizeof(lo), "%" PRId64, b->min);
		if (b->max == INT64_MAX) /* the end 2^63 only fits unsigned */
			snprintf(hi, sizeof(hi), "%" PRIu64, (uint64_t)b->max + 1);
		else
			snprintf(hi, sizeof(hi), "%" PRId64, b->max + 1);
	}
	snprintf(buf, sz, "[%s, %s)", lo, hi);
}

int agg_result_print_hist(FILE *f, const char *title, const struct agg_result *r)
{
	const int width = 52;
	size_t first = SIZE_MAX, last = 0;
	uint64_t top = 0;

	if (!f || !r || (r->kind != AGG_HIST && r->kind != AGG_LHIST) || !r->buckets)
		return -EINVAL;
	if (title)
		fprintf(f, "%s: \n", title);
	for (size_t i = 0; i < r->nbuckets; i++) {
		if (!r->buckets[i].count)
			continue;
		if (first == SIZE_MAX)
			first = i;
		last = i;
		if (r->buckets[i].count > top)
			top = r->buckets[i].count;
	}
	for (size_t i = first; first != SIZE_MAX && i <= last; i++) {
		char label[80], bar[53];
		int n = (int)((double)r->buckets[i].count / (double)top * width);

		bucket_label(label, sizeof(label), r->kind, &r->buckets[i]);
		memset(bar, '@', (size_t)n);
		bar[n] = 0;
		fprintf(f, "%-16s%8" PRIu64 " |%-*s|\n", label, r->buckets[i].count, width, bar);
	}
	return ferror(f) ? -EIO : 0;
}

/* ---- order by … limit ---- */

/* Does row a come before row b? */
static bool topk_before(const double *keys, size_t a, size_t b, bool desc)
{
	double ka = keys[a], kb = keys[b];

	if (isnan(ka) || isnan(kb)) {
		if (isnan(ka) != isnan(kb))
			return !isnan(ka);
		return a < b;
	}
	if (ka != kb)
		return desc ? ka > kb : ka < kb;
	return a < b;
}

/* Max-heap by "comes later": the root is the worst row kept. */
static void topk_sift(const double *keys, size_t *h, size_t n, size_t i, bool desc)
{
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, w = i, t;

		if (l < n && topk_before(keys, h[w], h[l], desc))
			w = l;
		if (r < n && topk_before(keys, h[w], h[r], desc))
			w = r;
		if (w == i)
			return;
		t = h[i];
		h[i] = h[w];
		h[w] = t;
		i = w;
	}
}

size_t agg_topk(const double *keys, size_t n, size_t limit, bool desc, size_t *idx_out)
{
	size_t k = n < limit ? n : limit;

	if (!keys || !idx_out || !k)
		return 0;
	for (size_t i = 0; i < k; i++)
		idx_out[i] = i;
	for (size_t i = k / 2; i-- > 0;)
		topk_sift(keys, idx_out, k, i, desc);
	for (size_t i = k; i < n; i++) {
		if (!topk_before(keys, i, idx_out[0], desc))
			continue;
		idx_out[0] = i;
		topk_sift(keys, idx_out, k, 0, desc);
	}
	/* heap sort: move the worst to the end, best ends first */
	for (size_t end = k; end > 1; end--) {
		size_t t = idx_out[0];

		idx_out[0] = idx_out[end - 1];
		idx_out[end - 1] = t;
		topk_sift(keys, idx_out, end - 1, 0, desc);
	}
	return k;
}
