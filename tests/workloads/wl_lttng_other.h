/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A second LTTng-UST provider, `wl_other`, for the LTTng CTF importer's test: an application's
 * own tracepoint that is not weft's, whose events become events of the weft task running on
 * their thread.  work(value, label, ratio) has an integer, a string and a float field.
 */
#undef LTTNG_UST_TRACEPOINT_PROVIDER
#define LTTNG_UST_TRACEPOINT_PROVIDER wl_other

#undef LTTNG_UST_TRACEPOINT_INCLUDE
#define LTTNG_UST_TRACEPOINT_INCLUDE "./wl_lttng_other.h"

#if !defined(WL_LTTNG_OTHER_H) || defined(LTTNG_UST_TRACEPOINT_HEADER_MULTI_READ)
#define WL_LTTNG_OTHER_H

#include <lttng/tracepoint.h>

/* clang-format off */
LTTNG_UST_TRACEPOINT_EVENT(wl_other, work,
	LTTNG_UST_TP_ARGS(int, value, const char *, label, double, ratio),
	LTTNG_UST_TP_FIELDS(
		lttng_ust_field_integer(int, value, value)
		lttng_ust_field_string(label, label)
		lttng_ust_field_float(double, ratio, ratio)))
/* clang-format on */

#endif

#include <lttng/tracepoint-event.h>
