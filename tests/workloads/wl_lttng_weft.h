/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The `weft` LTTng-UST tracepoint provider, as the LTTng CTF importer reads it
 * (docs/graphs.md, "LTTng CTF"): task_begin, task_end, event and edge, with exactly the
 * fields and types written there.  The test workload wl_lttng.c defines these probes itself;
 * the installed header of Execution graphs II will declare the same events.
 */
#undef LTTNG_UST_TRACEPOINT_PROVIDER
#define LTTNG_UST_TRACEPOINT_PROVIDER weft

#undef LTTNG_UST_TRACEPOINT_INCLUDE
#define LTTNG_UST_TRACEPOINT_INCLUDE "./wl_lttng_weft.h"

#if !defined(WL_LTTNG_WEFT_H) || defined(LTTNG_UST_TRACEPOINT_HEADER_MULTI_READ)
#define WL_LTTNG_WEFT_H

#include <stdint.h>
#include <lttng/tracepoint.h>

/* One field a line reads better than what the formatter makes of these. */
/* clang-format off */
LTTNG_UST_TRACEPOINT_EVENT(weft, task_begin,
	LTTNG_UST_TP_ARGS(uint64_t, trace_hi, uint64_t, trace_lo, uint64_t, task,
			  uint64_t, parent, const char *, service, const char *, name),
	LTTNG_UST_TP_FIELDS(
		lttng_ust_field_integer(uint64_t, trace_hi, trace_hi)
		lttng_ust_field_integer(uint64_t, trace_lo, trace_lo)
		lttng_ust_field_integer(uint64_t, task, task)
		lttng_ust_field_integer(uint64_t, parent, parent)
		lttng_ust_field_string(service, service)
		lttng_ust_field_string(name, name)))

LTTNG_UST_TRACEPOINT_EVENT(weft, task_end,
	LTTNG_UST_TP_ARGS(uint64_t, trace_hi, uint64_t, trace_lo, uint64_t, task, int, status),
	LTTNG_UST_TP_FIELDS(
		lttng_ust_field_integer(uint64_t, trace_hi, trace_hi)
		lttng_ust_field_integer(uint64_t, trace_lo, trace_lo)
		lttng_ust_field_integer(uint64_t, task, task)
		lttng_ust_field_integer(int, status, status)))

LTTNG_UST_TRACEPOINT_EVENT(weft, event,
	LTTNG_UST_TP_ARGS(uint64_t, trace_hi, uint64_t, trace_lo, uint64_t, task,
			  const char *, name),
	LTTNG_UST_TP_FIELDS(
		lttng_ust_field_integer(uint64_t, trace_hi, trace_hi)
		lttng_ust_field_integer(uint64_t, trace_lo, trace_lo)
		lttng_ust_field_integer(uint64_t, task, task)
		lttng_ust_field_string(name, name)))

LTTNG_UST_TRACEPOINT_EVENT(weft, edge,
	LTTNG_UST_TP_ARGS(uint64_t, trace_hi, uint64_t, trace_lo, const char *, kind,
			  uint64_t, from_task, uint64_t, from_event,
			  uint64_t, to_task, uint64_t, to_event),
	LTTNG_UST_TP_FIELDS(
		lttng_ust_field_integer(uint64_t, trace_hi, trace_hi)
		lttng_ust_field_integer(uint64_t, trace_lo, trace_lo)
		lttng_ust_field_string(kind, kind)
		lttng_ust_field_integer(uint64_t, from_task, from_task)
		lttng_ust_field_integer(uint64_t, from_event, from_event)
		lttng_ust_field_integer(uint64_t, to_task, to_task)
		lttng_ust_field_integer(uint64_t, to_event, to_event)))
/* clang-format on */

#endif

#include <lttng/tracepoint-event.h>
