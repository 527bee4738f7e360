/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The aggregate kinds: the vocabulary that the compiler (plans, manifests), the kernel
 * runtime (value layouts), the agent and the aggregator (mergeable states, the wire) share,
 * so it sits at the bottom of the stack with the kernel runtime.
 *
 * Every aggregate is a state with an identity element, a merge that is associative and
 * commutative, and a finalizer that turns the state into the value a user sees
 * (kernel/aggstate.h; kernel layouts in kernel/weft_aggval.h; docs/aggregates.md).
 * The enum values are part of the wire form and the manifest: append, never renumber.
 */
#ifndef WEFT_AGGKIND_H
#define WEFT_AGGKIND_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum agg_kind {
	AGG_COUNT,
	AGG_SUM,
	AGG_MIN,
	AGG_MAX,
	AGG_AVG,
	AGG_STDDEV,
	AGG_HIST, /* log2 buckets */
	AGG_LHIST, /* linear buckets lo..hi by step */
	AGG_QUANTILE, /* log-linear sketch (kernel/weft_sketch.h) */
	AGG_DISTINCT, /* HyperLogLog */
	AGG__COUNT
};

const char *agg_kind_name(enum agg_kind k);

#endif
