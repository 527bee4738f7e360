// SPDX-License-Identifier: Apache-2.0
/*
 * Names of aggregate kinds (aggkind.h).  The mergeable states themselves live in aggstate.c.
 */
#include "kernel/aggkind.h"

const char *agg_kind_name(enum agg_kind k)
{
	static const char *const names[AGG__COUNT] = {
		[AGG_COUNT] = "count",	     [AGG_SUM] = "sum",	    [AGG_MIN] = "min",
		[AGG_MAX] = "max",	     [AGG_AVG] = "avg",	    [AGG_STDDEV] = "stddev",
		[AGG_HIST] = "hist",	     [AGG_LHIST] = "lhist", [AGG_QUANTILE] = "quantile",
		[AGG_DISTINCT] = "distinct",
	};

	return (unsigned)k < AGG__COUNT ? names[k] : "?";
}
