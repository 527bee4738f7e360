/* SPDX-License-Identifier: Apache-2.0 */
/*
 * weft/trace.h: mark the work of a C or C++ program so that its execution graphs can be
 * drawn: tasks (spans of work) that begin and end, events inside them, explicit edges between
 * them, and the W3C `traceparent` that carries a trace across a process boundary.
 * docs/graphs.md ("Instrumenting a program") is the guide, with a complete example.
 *
 * Every site is a tracepoint of the provider `weft`, with exactly these arguments, in this
 * order (the contract graph/import_ctf.c reads from LTTng and weft's usdt provider reads as
 * arg0, arg1, ...):
 *
 *   weft:task_begin (trace_hi u64, trace_lo u64, task u64, parent u64 [0: a root],
 *                    service string, name string)
 *   weft:task_end   (trace_hi u64, trace_lo u64, task u64, status int [0 unset, 1 ok, 2 error])
 *   weft:event      (trace_hi u64, trace_lo u64, task u64, name string)
 *   weft:edge       (trace_hi u64, trace_lo u64, kind string, from_task u64, from_event u64,
 *                    to_task u64, to_event u64)
 *
 * Three builds of the same sites, chosen by a macro defined before the first include:
 *   (default)              an LTTng-UST tracepoint that is also a USDT (SystemTap SDT) probe:
 *                          LTTng records it, `weft run 'from usdt:BIN:weft:*'` attaches it.
 *                          Debian's liblttng-ust is built without SDT integration, so this
 *                          header defines LTTNG_UST_HAVE_SDT_INTEGRATION before it includes
 *                          <lttng/tracepoint.h>.  Exactly one translation unit of the program
 *                          defines WEFT_TRACE_DEFINE before including this header (it
 *                          instantiates the provider); link with -llttng-ust -ldl.
 *   WEFT_TRACE_SDT_ONLY    a plain <sys/sdt.h> probe (same provider, names and arguments),
 *                          for programs that cannot link liblttng-ust; weft attaches it,
 *                          LTTng cannot record it.  No library, no WEFT_TRACE_DEFINE needed.
 *   WEFT_TRACE_OFF         nothing: the sites compile to nothing, their arguments are not
 *                          evaluated.
 * Every translation unit of a program uses the same build.  A probe nobody attaches costs a
 * nop (SDT) plus, in the default build, a load and a branch (LTTng's "is a session recording
 * this?"); docs/performance.md has the numbers.
 *
 * Arguments are evaluated exactly once (never with WEFT_TRACE_OFF) and converted to the
 * contract's types (uint64_t, const char *, int) before the probe, so that every build's
 * notes say the same sizes.  Strings are read by the tracer from the program's memory while the site runs:
 * they must be NUL-terminated and alive at the site, nothing more (a tracer reads at most a
 * bounded prefix).
 *
 * Header-only (static inline functions and macros), C11 or later, C++11 or later; it includes
 * no other header of weft.  Nothing here allocates, blocks or exits.
 */
#ifndef WEFT_TRACE_H
#define WEFT_TRACE_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/random.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Task statuses (weft:task_end's status). */
#define WEFT_STATUS_UNSET 0
#define WEFT_STATUS_OK 1
#define WEFT_STATUS_ERROR 2

/* Edge kinds (weft:edge's kind), docs/graphs.md "The model". */
#define WEFT_EDGE_PARENT "parent" /* parent task -> child task */
#define WEFT_EDGE_FOLLOWS "follows" /* follows-from: the cause does not wait for the effect */
#define WEFT_EDGE_MESSAGE "message" /* a send -> its receive */
#define WEFT_EDGE_WAKEUP "wakeup" /* the waking thread -> the woken one */
#define WEFT_EDGE_FORK "fork" /* a process or thread -> the one it created */
#define WEFT_EDGE_EVENT "event" /* event -> event */

/*
 * A trace context: the trace a task belongs to, the task, and its parent.  A context with a
 * trace id of 0:0 or a task of 0 is empty (no trace).  Plain data: copy it, put it in a
 * request, keep it in a thread-local variable, as the program likes.
 */
struct weft_ctx {
	uint64_t trace_hi, trace_lo; /* the 128-bit trace id, never 0:0 in a valid context */
	uint64_t task; /* this task's id, unique in its trace, never 0 */
	uint64_t parent; /* the parent task's id, 0 for a root */
};

/* ------------------------------------------------------------------------ ids */

/* splitmix64's finalizer: a bijection of 64-bit values that spreads every input bit. */
static inline uint64_t weft_id_mix(uint64_t x)
{
	x += UINT64_C(0x9e3779b97f4a7c15);
	x = (x ^ (x >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	x = (x ^ (x >> 27)) * UINT64_C(0x94d049bb133111eb);
	return x ^ (x >> 31);
}

/*
 * A random 64-bit id, never 0: a task id, or half of a trace id.  From getrandom(2), without
 * blocking; where that fails (early in boot, or a seccomp filter refuses the call) from a mix
 * of the clock, the process, the thread's stack and a counter, which still differ between calls,
 * threads, processes and hosts with overwhelming probability.  Thread-safe; costs one system
 * call (about 0.3 us): make ids where a task begins, not in a loop that does not need them.
 */
static inline uint64_t weft_id(void)
{
	static uint64_t counter;
	uint64_t v = 0;

	for (int i = 0; i < 4 && v == 0; i++) {
		ssize_t r = getrandom(&v, sizeof(v), GRND_NONBLOCK);

		if (r != (ssize_t)sizeof(v))
			v = 0;
		if (r < 0 && errno != EINTR)
			break;
	}
	while (v == 0) {
		struct timespec ts = { 0, 0 };
		uint64_t n = __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED);

		timespec_get(&ts, TIME_UTC);
		v = weft_id_mix((uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec);
		v = weft_id_mix(v ^ (uint64_t)clock() ^ ((uint64_t)getpid() << 32));
		/* the address of v differs between the threads (their stacks) */
		v = weft_id_mix(v ^ n ^ (uint64_t)(uintptr_t)&v);
	}
	return v;
}

/* ------------------------------------------------------------------------ contexts */

/* Whether c names a task of a trace (trace id not 0:0, task not 0). */
static inline bool weft_ctx_valid(const struct weft_ctx *c)
{
	return c && (c->trace_hi | c->trace_lo) != 0 && c->task != 0;
}

/*
 * A new trace: a trace id whose first 32 bits are the current Unix second and whose other 96
 * are random, a random task id, no parent (the root task of a request).  Time first, as in
 * UUIDv7: a B-tree index on trace ids (weft's graph store has one) takes a second's new
 * traces at one end instead of at random places; the last 7 bytes stay random, as W3C Trace
 * Context's "random" flag asks, for samplers that read them.
 */
static inline void weft_ctx_root(struct weft_ctx *c)
{
	struct timespec ts = { 0, 0 };

	timespec_get(&ts, TIME_UTC);
	c->trace_hi = (uint64_t)ts.tv_sec << 32 | (weft_id() & UINT64_C(0xffffffff));
	c->trace_lo = weft_id();
	c->task = weft_id();
	c->parent = 0;
}

/*
 * A child of `parent`: the same trace, a new task id, `parent`'s task as its parent.  When
 * parent is NULL or not valid (a request that came without a traceparent), a new root.
 */
static inline void weft_ctx_child(struct weft_ctx *c, const struct weft_ctx *parent)
{
	if (!weft_ctx_valid(parent)) {
		weft_ctx_root(c);
		return;
	}
	c->trace_hi = parent->trace_hi;
	c->trace_lo = parent->trace_lo;
	c->parent = parent->task;
	c->task = weft_id();
}

/* ------------------------------------------------------------------------ traceparent */

/*
 * W3C Trace Context (https://www.w3.org/TR/trace-context/), the `traceparent` header:
 *
 *   00-<trace-id: 32 hex>-<parent-id: 16 hex>-<trace-flags: 2 hex>     (55 characters)
 *
 * The trace-id is the context's trace (hi then lo), the parent-id the task of the sender:
 * the task the receiver's first task is a child of.  Hex is lower-case.
 */
#define WEFT_TRACEPARENT_LEN 55 /* characters of a version-00 traceparent */
#define WEFT_TRACEPARENT_SIZE 56 /* a buffer for one, with its NUL */
#define WEFT_TRACEPARENT_SAMPLED 0x01u /* trace-flags: the caller may have recorded it */

static inline void weft_traceparent_hex(char *out, uint64_t v, int digits)
{
	static const char hex[] = "0123456789abcdef";

	for (int i = digits - 1; i >= 0; i--) {
		out[i] = hex[v & 15];
		v >>= 4;
	}
}

/*
 * Writes c's traceparent (version 00, trace-flags `flags`, 0 to 255) into buf[0, size) with
 * its NUL.  Returns WEFT_TRACEPARENT_LEN; -EINVAL if c is not valid (a traceparent cannot
 * carry a zero id) or flags is over 255, -ENOSPC if size < WEFT_TRACEPARENT_SIZE.
 */
static inline int weft_traceparent_format(const struct weft_ctx *c, unsigned flags, char *buf,
					  size_t size)
{
	if (!weft_ctx_valid(c) || flags > 255)
		return -EINVAL;
	if (!buf || size < WEFT_TRACEPARENT_SIZE)
		return -ENOSPC;
	buf[0] = '0';
	buf[1] = '0';
	buf[2] = '-';
	weft_traceparent_hex(buf + 3, c->trace_hi, 16);
	weft_traceparent_hex(buf + 19, c->trace_lo, 16);
	buf[35] = '-';
	weft_traceparent_hex(buf + 36, c->task, 16);
	buf[52] = '-';
	weft_traceparent_hex(buf + 53, flags, 2);
	buf[55] = 0;
	return WEFT_TRACEPARENT_LEN;
}

/* Lower-case hex s[0, n) into *v (n <= 16); false on any other character. */
static inline bool weft_traceparent_unhex(const char *s, int n, uint64_t *v)
{
	uint64_t x = 0;

	for (int i = 0; i < n; i++) {
		char ch = s[i];

		if (ch >= '0' && ch <= '9')
			x = x << 4 | (uint64_t)(ch - '0');
		else if (ch >= 'a' && ch <= 'f')
			x = x << 4 | (uint64_t)(ch - 'a' + 10);
		else
			return false;
	}
	*v = x;
	return true;
}

/*
 * Parses a traceparent value s[0, len) (as received, without surrounding white space; it need
 * not be NUL-terminated) by the W3C rules: the version is two lower-case hex digits and not
 * `ff`; a version-00 value is exactly 55 characters; a later version is at least 55, and
 * whatever follows the flags starts with '-' (fields a later version added, ignored); the
 * trace-id is 32 and the parent-id 16 lower-case hex digits, neither all zeros; the flags are
 * two lower-case hex digits.  On success c is the sender's context (its trace, its task as
 * c->task, c->parent 0): weft_ctx_child(&mine, c) makes the receiver's task.  *flags (if not
 * NULL) gets the trace-flags.  Returns 0, or -EINVAL (c and *flags unchanged): the receiver
 * then starts a trace of its own, as the specification says.
 */
static inline int weft_traceparent_parse(const char *s, size_t len, struct weft_ctx *c,
					 unsigned *flags)
{
	uint64_t version, hi, lo, task, fl;

	if (!s || !c || len < WEFT_TRACEPARENT_LEN)
		return -EINVAL;
	if (!weft_traceparent_unhex(s, 2, &version) || version == 0xff || s[2] != '-' ||
	    s[35] != '-' || s[52] != '-')
		return -EINVAL;
	if (version == 0 ? len != WEFT_TRACEPARENT_LEN :
			   len > WEFT_TRACEPARENT_LEN && s[WEFT_TRACEPARENT_LEN] != '-')
		return -EINVAL;
	if (!weft_traceparent_unhex(s + 3, 16, &hi) || !weft_traceparent_unhex(s + 19, 16, &lo) ||
	    !weft_traceparent_unhex(s + 36, 16, &task) || !weft_traceparent_unhex(s + 53, 2, &fl))
		return -EINVAL;
	if ((hi | lo) == 0 || task == 0)
		return -EINVAL;
	c->trace_hi = hi;
	c->trace_lo = lo;
	c->task = task;
	c->parent = 0;
	if (flags)
		*flags = (unsigned)fl;
	return 0;
}

#ifdef __cplusplus
}
#endif

/* ------------------------------------------------------------------------ the sites */

/*
 * The four tracepoints, argument for argument (above).  Each is a statement; its arguments
 * are evaluated once.  WEFT__SITE(event, nargs, decls, args...) declares the converted
 * arguments (decls: declarations separated by ';', up to the first ',') and fires the build's
 * probe with them.
 */
/*
 * A tracer reads a string argument with bpf_probe_read_user_str(), which cannot fault a page
 * in: a string literal on a page of the program that the process has not touched yet would
 * read as a fault.  So each site touches the first byte of its strings (one load, which
 * also keeps a NULL from reaching the probe as anything but NULL).
 */
static inline const char *weft_trace_touch(const char *s)
{
	if (s)
		(void)*(const volatile char *)s;
	return s;
}

#if defined(__GNUC__)
#define WEFT__UNUSED __attribute__((unused))
#else
#define WEFT__UNUSED
#endif
#if defined(WEFT_TRACE_OFF)
/* type-checked, never evaluated */
#define WEFT__SITE(event, nargs, decls, ...) \
	do {                                 \
		if (0) {                     \
			decls;               \
		}                            \
	} while (0)
#elif defined(WEFT_TRACE_SDT_ONLY)
#include <sys/sdt.h>
#define WEFT__SITE(event, nargs, decls, ...)                 \
	do {                                                 \
		decls;                                       \
		STAP_PROBE##nargs(weft, event, __VA_ARGS__); \
	} while (0)
#else
#define WEFT__LTTNG 1
#ifdef _LTTNG_UST_TRACEPOINT_H
#if !defined(LTTNG_UST_HAVE_SDT_INTEGRATION)
#error "include <weft/trace.h> before <lttng/tracepoint.h> (its sites need LTTNG_UST_HAVE_SDT_INTEGRATION), or define LTTNG_UST_HAVE_SDT_INTEGRATION first"
#endif
#if defined(WEFT_TRACE_DEFINE) && !defined(LTTNG_UST_TRACEPOINT_DEFINE)
#error "WEFT_TRACE_DEFINE: include <weft/trace.h> before <lttng/tracepoint.h>, or define LTTNG_UST_TRACEPOINT_DEFINE first"
#endif
#endif
#ifndef LTTNG_UST_HAVE_SDT_INTEGRATION
#define LTTNG_UST_HAVE_SDT_INTEGRATION 1
#endif
#ifdef WEFT_TRACE_DEFINE
#define LTTNG_UST_TRACEPOINT_DEFINE
#define LTTNG_UST_TRACEPOINT_CREATE_PROBES
#endif
#define WEFT__SITE(event, nargs, decls, ...)                    \
	do {                                                    \
		decls;                                          \
		lttng_ust_tracepoint(weft, event, __VA_ARGS__); \
	} while (0)
#endif

/* A task begins: trace (hi, lo), its id, its parent's id (0: a root), its type. */
#define WEFT_TASK_BEGIN(trace_hi, trace_lo, task, parent, service, name)                   \
	WEFT__SITE(task_begin, 6, WEFT__UNUSED uint64_t weft__hi = (trace_hi);             \
		   WEFT__UNUSED uint64_t weft__lo = (trace_lo);                            \
		   WEFT__UNUSED uint64_t weft__task = (task);                              \
		   WEFT__UNUSED uint64_t weft__parent = (parent);                          \
		   WEFT__UNUSED const char *weft__service = weft_trace_touch(service);     \
		   WEFT__UNUSED const char *weft__name = weft_trace_touch(name), weft__hi, \
		   weft__lo, weft__task, weft__parent, weft__service, weft__name)

/* A task ends with a status (WEFT_STATUS_*). */
#define WEFT_TASK_END(trace_hi, trace_lo, task, status)                                           \
	WEFT__SITE(task_end, 4, WEFT__UNUSED uint64_t weft__hi = (trace_hi);                      \
		   WEFT__UNUSED uint64_t weft__lo = (trace_lo);                                   \
		   WEFT__UNUSED uint64_t weft__task = (task);                                     \
		   WEFT__UNUSED int weft__status = (int)(status), weft__hi, weft__lo, weft__task, \
		   weft__status)

/* A named point in time inside a task. */
#define WEFT_EVENT(trace_hi, trace_lo, task, name)                                         \
	WEFT__SITE(event, 4, WEFT__UNUSED uint64_t weft__hi = (trace_hi);                  \
		   WEFT__UNUSED uint64_t weft__lo = (trace_lo);                            \
		   WEFT__UNUSED uint64_t weft__task = (task);                              \
		   WEFT__UNUSED const char *weft__name = weft_trace_touch(name), weft__hi, \
		   weft__lo, weft__task, weft__name)

/* An edge of kind WEFT_EDGE_* from a task (and one of its events, 0: none) to another. */
#define WEFT_EDGE(trace_hi, trace_lo, kind, from_task, from_event, to_task, to_event)              \
	WEFT__SITE(edge, 7, WEFT__UNUSED uint64_t weft__hi = (trace_hi);                           \
		   WEFT__UNUSED uint64_t weft__lo = (trace_lo);                                    \
		   WEFT__UNUSED const char *weft__kind = weft_trace_touch(kind);                   \
		   WEFT__UNUSED uint64_t weft__from = (from_task);                                 \
		   WEFT__UNUSED uint64_t weft__from_ev = (from_event);                             \
		   WEFT__UNUSED uint64_t weft__to = (to_task);                                     \
		   WEFT__UNUSED uint64_t weft__to_ev = (to_event), weft__hi, weft__lo, weft__kind, \
		   weft__from, weft__from_ev, weft__to, weft__to_ev)

/* The same sites for a context (struct weft_ctx *). */
#define WEFT_BEGIN(ctx, service, name) \
	WEFT_TASK_BEGIN((ctx)->trace_hi, (ctx)->trace_lo, (ctx)->task, (ctx)->parent, service, name)
#define WEFT_END(ctx, status) WEFT_TASK_END((ctx)->trace_hi, (ctx)->trace_lo, (ctx)->task, status)
#define WEFT_MARK(ctx, name) WEFT_EVENT((ctx)->trace_hi, (ctx)->trace_lo, (ctx)->task, name)
/* A message from the sender's task to the receiver's task (both contexts of one trace):
 * written by the receiver, who knows both (the sender's from the traceparent it received). */
#define WEFT_MESSAGE(from_ctx, to_ctx)                                                            \
	WEFT_EDGE((to_ctx)->trace_hi, (to_ctx)->trace_lo, WEFT_EDGE_MESSAGE, (from_ctx)->task, 0, \
		  (to_ctx)->task, 0)

#endif /* WEFT_TRACE_H */

/*
 * The LTTng-UST provider `weft`.  Outside the include guard: <lttng/tracepoint-event.h>
 * reads this part again, several times, in the translation unit that defines
 * WEFT_TRACE_DEFINE (LTTNG_UST_TRACEPOINT_HEADER_MULTI_READ), to generate the probes.
 */
#ifdef WEFT__LTTNG
#undef LTTNG_UST_TRACEPOINT_PROVIDER
#define LTTNG_UST_TRACEPOINT_PROVIDER weft
#undef LTTNG_UST_TRACEPOINT_INCLUDE
#define LTTNG_UST_TRACEPOINT_INCLUDE "weft/trace.h"

#if !defined(WEFT_TRACE_TP_H) || defined(LTTNG_UST_TRACEPOINT_HEADER_MULTI_READ)
#define WEFT_TRACE_TP_H

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

#endif /* WEFT_TRACE_TP_H */

#include <lttng/tracepoint-event.h>
#endif /* WEFT__LTTNG */
