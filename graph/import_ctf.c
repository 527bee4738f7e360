// SPDX-License-Identifier: Apache-2.0
/*
 * The LTTng CTF importer (docs/graphs.md, "LTTng CTF"): the tracepoints of the `weft` LTTng-UST
 * provider in a CTF trace directory become tasks, events and edges, and every other LTTng-UST
 * event becomes an event of the weft task open on its thread at that moment.
 *
 * CTF is read by libbabeltrace2, never by hand, through graph/ctf_read.c (vm/ctf.c reads
 * kernel traces with it too).  The directory is searched for CTF traces (every directory
 * below it that holds a file named `metadata`, as an LTTng session's output holds
 * ust/uid/0/64-bit, ust/pid/..., kernel/), one src.ctf.fs component per trace; all their
 * streams go through one flt.utils.muxer, so that the events reach the importer in time
 * order whatever stream (one per CPU) each was written to; a simple sink hands each
 * message to the importer proper (ctf_message()).
 *
 * The importer is a small state machine over the time-ordered events:
 *   - weft:task_begin appends a task (end unknown) and pushes it on its thread's stack of
 *     open tasks (a thread is host, vpid, vtid); a parent id also makes a parent edge;
 *   - weft:task_end sets the task's end and status and takes it off its thread's stack,
 *     wherever it is there (a task may end out of order);
 *   - weft:event and weft:edge name their tasks by id: they are kept as they are, and only at
 *     the end are those naming a task that never began in the trace dropped (an edge may be
 *     written before the task at its end begins);
 *   - any other event is attached to the top of its thread's stack, its payload as the
 *     event's attributes (JSON built with jansson), or dropped and counted if the stack is
 *     empty;
 *   - at the end, a task still open ends at the last event of the trace, marked "cut".
 * Kernel traces (environment `domain` = "kernel") are skipped: their events are not
 * application events of a thread.
 *
 * Everything read is hostile: babeltrace2's preconditions are not checked in its release
 * builds, so every field's class type is checked before its accessor is called, a trace that
 * babeltrace2 refuses is refused with babeltrace2's own cause, and counts are bounded by
 * GRAPH_MAX_ELEMS (graph_add_*() refuses the next one).  On error the graph's element counts
 * are put back as they were (strings already copied stay in the arena, unreachable).
 * babeltrace2 itself crashes on some hostile metadata, so all of the above runs in a child
 * process that sends the graph back through a pipe ("the reader process" below);
 * graph_import_ctf_here() runs it in the caller, for the fuzzer's coverage.
 *
 * Why one file of ~1,270 lines: it is one importer over one state (struct ctf_import); its
 * parts (reading weft's fields, the state machine, the sink, the reader process) are each
 * used only by the next.  What does not depend on what an event means (finding the traces,
 * the component graph, babeltrace2's fields and error cause) is graph/ctf_read.c's, shared
 * with vm/ctf.c; libbabeltrace2's types stay out of every other file of graph/.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "graph/bt_dl.h"
#include <jansson.h>

#include "graph/ctf_read.h"
#include "graph/graph.h"
#include "graph/import.h"
#include "graph/import_priv.h" /* IMP_TIME_MAX, the bound of every importer */

#define CTF_MAX_TRACES 1024 /* trace directories under one input */
#define CTF_ATTR_DEPTH 16 /* nesting of a payload field kept as an attribute */
#define CTF_ATTR_ELEMS 1024 /* elements of one array kept */
#define CTF_ATTR_NODES 65536 /* values of one event's attributes (arrays nest: a bound in all) */
/* Open tasks of one thread that other events may go to: a thread that begins more without
 * ending them (an event loop) forgets its oldest, so that ending one costs O(this). */
#define CTF_MAX_OPEN 1024

/* ------------------------------------------------------------------ the importer's state */

struct ctf_thread {
	const char *host; /* in the graph's arena */
	int64_t pid, tid;
	size_t *open; /* indices into g->tasks of its open tasks, innermost last */
	size_t nopen, cap;
};

struct ctf_task {
	size_t thread; /* index into threads[] of the thread it began on */
	bool ended;
};

/* A trace object of babeltrace2 (one per trace directory) and what we read from it once. */
struct ctf_trace {
	const bt_trace *trace;
	const char *host;
	bool kernel;
};

struct ctf_import {
	struct graph *g;
	struct graph_ctf_stats *st;
	size_t base_tasks, base_events, base_edges; /* g's counts before the call */
	struct ctf_task *tasks; /* parallel to g->tasks[base_tasks ..] */
	size_t cap_tasks;
	size_t *task_tab; /* open addressing: 1 + index into g->tasks, 0 empty */
	size_t task_tab_cap;
	struct ctf_thread *threads;
	size_t nthreads, cap_threads;
	size_t *thread_tab; /* 1 + index into threads[], 0 empty */
	size_t thread_tab_cap;
	struct ctf_trace traces[CTF_MAX_TRACES];
	size_t ntraces, last_trace; /* last_trace: the one of the previous event */
	uint64_t index; /* of the event being read, from 0 */
	int64_t last; /* time of the last event read */
	bool any;
	int err; /* -errno once the consume function failed */
	char msg[sizeof(((struct graph_import_err *)0)->msg)];
};

static void ctf_fail(struct ctf_import *im, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void ctf_fail(struct ctf_import *im, int err, const char *fmt, ...)
{
	va_list ap;

	if (im->err)
		return;
	im->err = err;
	va_start(ap, fmt);
	vsnprintf(im->msg, sizeof(im->msg), fmt, ap);
	va_end(ap);
}

static uint64_t mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	x ^= x >> 33;
	return x;
}

static uint64_t task_hash(struct graph_id128 trace, uint64_t id)
{
	return mix64(trace.hi ^ mix64(trace.lo ^ mix64(id)));
}

/* The slot of task (trace, id) in task_tab: where it is, or the empty slot it would go to. */
static size_t task_slot(const struct ctf_import *im, struct graph_id128 trace, uint64_t id)
{
	size_t mask = im->task_tab_cap - 1, i = task_hash(trace, id) & mask;

	for (;; i = (i + 1) & mask) {
		size_t v = im->task_tab[i];
		const struct graph_task *t;

		if (!v)
			return i;
		t = &im->g->tasks[v - 1];
		if (t->id == id && graph_id128_eq(t->trace, trace))
			return i;
	}
}

/* Index into g->tasks of task (trace, id) of this import, or SIZE_MAX. */
static size_t task_find(const struct ctf_import *im, struct graph_id128 trace, uint64_t id)
{
	size_t v;

	if (!im->task_tab_cap)
		return SIZE_MAX;
	v = im->task_tab[task_slot(im, trace, id)];
	return v ? v - 1 : SIZE_MAX;
}

/* Makes room in task_tab and tasks[] for one more task (load factor under 1/2). */
static int task_reserve(struct ctf_import *im)
{
	size_t n = im->g->ntasks - im->base_tasks;

	if (n + 1 > im->cap_tasks) {
		size_t ncap = im->cap_tasks ? im->cap_tasks * 2 : 64;
		struct ctf_task *p = realloc(im->tasks, ncap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		im->tasks = p;
		im->cap_tasks = ncap;
	}
	if (2 * (n + 1) > im->task_tab_cap) {
		size_t ncap = im->task_tab_cap ? im->task_tab_cap * 2 : 128;
		size_t *old = im->task_tab, oldcap = im->task_tab_cap;

		im->task_tab = calloc(ncap, sizeof(size_t));
		if (!im->task_tab) {
			im->task_tab = old;
			return -ENOMEM;
		}
		im->task_tab_cap = ncap;
		for (size_t i = 0; i < oldcap; i++) {
			const struct graph_task *t;

			if (!old[i])
				continue;
			t = &im->g->tasks[old[i] - 1];
			im->task_tab[task_slot(im, t->trace, t->id)] = old[i];
		}
		free(old);
	}
	return 0;
}

static uint64_t thread_hash(const char *host, int64_t pid, int64_t tid)
{
	uint64_t h = 1469598103934665603ULL;

	for (; *host; host++)
		h = (h ^ (unsigned char)*host) * 1099511628211ULL;
	return mix64(h ^ mix64((uint64_t)pid ^ mix64((uint64_t)tid)));
}

/* The index of thread (host, pid, tid) in threads[], added if new; SIZE_MAX out of memory. */
static size_t thread_get(struct ctf_import *im, const char *host, int64_t pid, int64_t tid)
{
	size_t mask, i;
	struct ctf_thread *th;

	if (2 * (im->nthreads + 1) > im->thread_tab_cap) {
		size_t ncap = im->thread_tab_cap ? im->thread_tab_cap * 2 : 64;
		size_t *tab = calloc(ncap, sizeof(size_t));

		if (!tab)
			return SIZE_MAX;
		for (size_t k = 0; k < im->nthreads; k++) {
			th = &im->threads[k];
			i = thread_hash(th->host, th->pid, th->tid) & (ncap - 1);
			while (tab[i])
				i = (i + 1) & (ncap - 1);
			tab[i] = k + 1;
		}
		free(im->thread_tab);
		im->thread_tab = tab;
		im->thread_tab_cap = ncap;
	}
	mask = im->thread_tab_cap - 1;
	for (i = thread_hash(host, pid, tid) & mask; im->thread_tab[i]; i = (i + 1) & mask) {
		th = &im->threads[im->thread_tab[i] - 1];
		if (th->pid == pid && th->tid == tid && strcmp(th->host, host) == 0)
			return im->thread_tab[i] - 1;
	}
	if (im->nthreads == im->cap_threads) {
		size_t ncap = im->cap_threads ? im->cap_threads * 2 : 16;
		struct ctf_thread *p = realloc(im->threads, ncap * sizeof(*p));

		if (!p)
			return SIZE_MAX;
		im->threads = p;
		im->cap_threads = ncap;
	}
	th = &im->threads[im->nthreads];
	memset(th, 0, sizeof(*th));
	th->host = host;
	th->pid = pid;
	th->tid = tid;
	im->thread_tab[i] = im->nthreads + 1;
	return im->nthreads++;
}

static int thread_push(struct ctf_thread *th, size_t task)
{
	if (th->nopen == CTF_MAX_OPEN) {
		memmove(&th->open[0], &th->open[1], (th->nopen - 1) * sizeof(th->open[0]));
		th->nopen--;
	}
	if (th->nopen == th->cap) {
		size_t ncap = th->cap ? th->cap * 2 : 8;
		size_t *p = realloc(th->open, ncap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		th->open = p;
		th->cap = ncap;
	}
	th->open[th->nopen++] = task;
	return 0;
}

static void thread_remove(struct ctf_thread *th, size_t task)
{
	for (size_t i = th->nopen; i-- > 0;) {
		if (th->open[i] == task) {
			memmove(&th->open[i], &th->open[i + 1],
				(th->nopen - i - 1) * sizeof(th->open[0]));
			th->nopen--;
			return;
		}
	}
}

static void ctf_import_free(struct ctf_import *im)
{
	for (size_t i = 0; i < im->nthreads; i++)
		free(im->threads[i].open);
	free(im->threads);
	free(im->thread_tab);
	free(im->task_tab);
	free(im->tasks);
}

/* ------------------------------------------------------------------ reading fields */

/* The payload's unsigned integer member `name`; refuses (false, im failed) anything else. */
static bool pay_u64(struct ctf_import *im, const bt_field *pay, const char *ev, const char *name,
		    uint64_t *v)
{
	const bt_field *f = ctf_read_member(pay, name);

	if (!f) {
		ctf_fail(im, -EINVAL, "event %" PRIu64 " (%s): no payload field %s", im->index, ev,
			 name);
		return false;
	}
	if (!ctf_read_is(f, BT_FIELD_CLASS_TYPE_UNSIGNED_INTEGER)) {
		ctf_fail(im, -EINVAL,
			 "event %" PRIu64 " (%s): payload field %s is not an unsigned integer",
			 im->index, ev, name);
		return false;
	}
	*v = bt_field_integer_unsigned_get_value(f);
	return true;
}

static bool pay_str(struct ctf_import *im, const bt_field *pay, const char *ev, const char *name,
		    const char **s, uint64_t *len)
{
	const bt_field *f = ctf_read_member(pay, name);

	if (!f) {
		ctf_fail(im, -EINVAL, "event %" PRIu64 " (%s): no payload field %s", im->index, ev,
			 name);
		return false;
	}
	if (!ctf_read_is(f, BT_FIELD_CLASS_TYPE_STRING)) {
		ctf_fail(im, -EINVAL, "event %" PRIu64 " (%s): payload field %s is not a string",
			 im->index, ev, name);
		return false;
	}
	*s = bt_field_string_get_value(f);
	*len = bt_field_string_get_length(f);
	return true;
}

/* trace_hi and trace_lo, which every weft event starts with; an all-zero id is refused. */
static bool pay_trace(struct ctf_import *im, const bt_field *pay, const char *ev,
		      struct graph_id128 *trace)
{
	if (!pay_u64(im, pay, ev, "trace_hi", &trace->hi) ||
	    !pay_u64(im, pay, ev, "trace_lo", &trace->lo))
		return false;
	if (!trace->hi && !trace->lo) {
		ctf_fail(im, -EINVAL, "event %" PRIu64 " (%s): trace id 0", im->index, ev);
		return false;
	}
	return true;
}

/* A field as JSON: integers (an unsigned one above INT64_MAX as a decimal string), reals
 * (null unless finite), strings, booleans, bit arrays, structures as objects, arrays cut at
 * CTF_ATTR_ELEMS, options and variants as what they hold; null below CTF_ATTR_DEPTH levels
 * and once *budget values were made.  NULL when out of memory. */
static json_t *field_json(const bt_field *f, int depth, size_t *budget)
{
	bt_field_class_type t;

	if (!f || depth > CTF_ATTR_DEPTH || !*budget)
		return json_null();
	--*budget;
	t = bt_field_get_class_type(f);
	if (bt_field_class_type_is(t, BT_FIELD_CLASS_TYPE_BOOL))
		return json_boolean(bt_field_bool_get_value(f));
	if (bt_field_class_type_is(t, BT_FIELD_CLASS_TYPE_BIT_ARRAY)) {
		uint64_t u = bt_field_bit_array_get_value_as_integer(f);
		char buf[24];

		if (u <= INT64_MAX)
			return json_integer((json_int_t)u);
		snprintf(buf, sizeof(buf), "%" PRIu64, u);
		return json_string(buf);
	}
	if (bt_field_class_type_is(t, BT_FIELD_CLASS_TYPE_UNSIGNED_INTEGER)) {
		uint64_t u = bt_field_integer_unsigned_get_value(f);
		char buf[24];

		if (u <= INT64_MAX)
			return json_integer((json_int_t)u);
		snprintf(buf, sizeof(buf), "%" PRIu64, u);
		return json_string(buf);
	}
	if (bt_field_class_type_is(t, BT_FIELD_CLASS_TYPE_SIGNED_INTEGER))
		return json_integer(bt_field_integer_signed_get_value(f));
	if (bt_field_class_type_is(t, BT_FIELD_CLASS_TYPE_REAL)) {
		double d = t == BT_FIELD_CLASS_TYPE_SINGLE_PRECISION_REAL ?
				   bt_field_real_single_precision_get_value(f) :
				   bt_field_real_double_precision_get_value(f);

		return isfinite(d) ? json_real(d) : json_null();
	}
	if (bt_field_class_type_is(t, BT_FIELD_CLASS_TYPE_STRING))
		return ctf_read_text(f, SIZE_MAX, false);
	if (bt_field_class_type_is(t, BT_FIELD_CLASS_TYPE_STRUCTURE)) {
		const bt_field_class *fc = bt_field_borrow_class_const(f);
		uint64_t n = bt_field_class_structure_get_member_count(fc);
		json_t *o = json_object();

		for (uint64_t i = 0; o && i < n; i++) {
			const bt_field_class_structure_member *m =
				bt_field_class_structure_borrow_member_by_index_const(fc, i);
			json_t *v = field_json(
				bt_field_structure_borrow_member_field_by_index_const(f, i),
				depth + 1, budget);

			if (!v || json_object_set_new(
					  o, bt_field_class_structure_member_get_name(m), v) != 0) {
				json_decref(o);
				o = NULL;
			}
		}
		return o;
	}
	if (bt_field_class_type_is(t, BT_FIELD_CLASS_TYPE_ARRAY)) {
		uint64_t n = bt_field_array_get_length(f);
		json_t *a = json_array();

		if (n > CTF_ATTR_ELEMS)
			n = CTF_ATTR_ELEMS;
		for (uint64_t i = 0; a && i < n; i++) {
			json_t *v =
				field_json(bt_field_array_borrow_element_field_by_index_const(f, i),
					   depth + 1, budget);

			if (!v || json_array_append_new(a, v) != 0) {
				json_decref(a);
				a = NULL;
			}
		}
		return a;
	}
	if (bt_field_class_type_is(t, BT_FIELD_CLASS_TYPE_OPTION))
		return field_json(bt_field_option_borrow_field_const(f), depth + 1, budget);
	if (bt_field_class_type_is(t, BT_FIELD_CLASS_TYPE_VARIANT))
		return field_json(bt_field_variant_borrow_selected_option_field_const(f), depth + 1,
				  budget);
	return json_null();
}

/* The compact text of JSON object o in the graph's arena (o is released); an object whose
 * text is longer than GRAPH_MAX_STR (cutting it would not be JSON) becomes
 * {"attrs_cut":true}.  NULL when out of memory. */
static const char *json_arena(struct graph *g, json_t *o)
{
	char *s;
	const char *r;

	if (!o)
		return NULL;
	s = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(o);
	if (!s)
		return NULL;
	r = strlen(s) > GRAPH_MAX_STR ? graph_strdup(g, "{\"attrs_cut\":true}") :
					graph_strdup(g, s);
	free(s);
	return r;
}

/* ------------------------------------------------------------------ the weft events */

struct ctf_where {
	const char *host;
	int64_t pid, tid;
	const bt_field *procname;
	int64_t time;
};

static void task_begin(struct ctf_import *im, const bt_field *pay, const struct ctf_where *w)
{
	static const char ev[] = "weft:task_begin";
	struct graph_task t = { .pid = w->pid, .tid = w->tid, .start = w->time, .end = w->time };
	const char *service, *name;
	uint64_t lsvc, lname;
	size_t slot, th, idx;
	size_t budget = 1;
	json_t *attrs;

	if (!pay_trace(im, pay, ev, &t.trace) || !pay_u64(im, pay, ev, "task", &t.id) ||
	    !pay_u64(im, pay, ev, "parent", &t.parent) ||
	    !pay_str(im, pay, ev, "service", &service, &lsvc) ||
	    !pay_str(im, pay, ev, "name", &name, &lname))
		return;
	if (!t.id) {
		ctf_fail(im, -EINVAL, "event %" PRIu64 " (%s): task id 0", im->index, ev);
		return;
	}
	if (t.parent == t.id) {
		ctf_fail(im, -EINVAL, "event %" PRIu64 " (%s): task %" PRIx64 " is its own parent",
			 im->index, ev, t.id);
		return;
	}
	if (task_reserve(im) != 0)
		goto out_nomem;
	slot = task_slot(im, t.trace, t.id);
	if (im->task_tab[slot]) {
		ctf_fail(im, -EINVAL, "event %" PRIu64 " (%s): task %" PRIx64 " begins twice",
			 im->index, ev, t.id);
		return;
	}
	th = thread_get(im, w->host, w->pid, w->tid);
	if (th == SIZE_MAX)
		goto out_nomem;
	attrs = json_object();
	if (attrs && w->procname &&
	    json_object_set_new(attrs, "procname", field_json(w->procname, 0, &budget)) != 0) {
		json_decref(attrs);
		attrs = NULL;
	}
	t.service = graph_strndup(im->g, service, lsvc);
	t.name = graph_strndup(im->g, name, lname);
	t.host = w->host;
	t.status = GRAPH_STATUS_UNSET;
	t.source = GRAPH_SRC_LTTNG;
	t.attrs = json_arena(im->g, attrs);
	if (!t.service || !t.name || !t.attrs)
		goto out_nomem;
	if (!graph_add_task(im->g, &t))
		goto out_full;
	idx = im->g->ntasks - 1;
	im->task_tab[slot] = idx + 1;
	im->tasks[idx - im->base_tasks] = (struct ctf_task){ .thread = th };
	if (thread_push(&im->threads[th], idx) != 0)
		goto out_nomem;
	if (t.parent) {
		struct graph_edge e = { .trace = t.trace,
					.kind = GRAPH_EDGE_PARENT,
					.from_task = t.parent,
					.to_task = t.id,
					.source = GRAPH_SRC_LTTNG };

		if (!graph_add_edge(im->g, &e))
			goto out_full;
	}
	return;
out_full:
	ctf_fail(im, -E2BIG, "event %" PRIu64 " (%s): more than %u elements of a kind", im->index,
		 ev, GRAPH_MAX_ELEMS);
	return;
out_nomem:
	ctf_fail(im, -ENOMEM, "event %" PRIu64 " (%s): out of memory", im->index, ev);
}

static void task_end(struct ctf_import *im, const bt_field *pay, const struct ctf_where *w)
{
	static const char ev[] = "weft:task_end";
	struct graph_id128 trace;
	const bt_field *f;
	uint64_t id;
	int64_t status;
	size_t idx;
	struct graph_task *t;
	struct ctf_task *ct;

	if (!pay_trace(im, pay, ev, &trace) || !pay_u64(im, pay, ev, "task", &id))
		return;
	f = ctf_read_member(pay, "status");
	if (!f || !ctf_read_int(f, false, &status) || status < GRAPH_STATUS_UNSET ||
	    status > GRAPH_STATUS_ERROR) {
		ctf_fail(im, -EINVAL,
			 "event %" PRIu64 " (%s): payload field status is not an integer 0, 1 or 2",
			 im->index, ev);
		return;
	}
	idx = task_find(im, trace, id);
	if (idx == SIZE_MAX || im->tasks[idx - im->base_tasks].ended) {
		im->st->unmatched_ends++;
		return;
	}
	ct = &im->tasks[idx - im->base_tasks];
	t = &im->g->tasks[idx];
	t->end = w->time > t->start ? w->time : t->start;
	t->status = (enum graph_status)status;
	ct->ended = true;
	thread_remove(&im->threads[ct->thread], idx);
}

static void weft_event(struct ctf_import *im, const bt_field *pay, const struct ctf_where *w)
{
	static const char ev[] = "weft:event";
	struct graph_event e = { .time = w->time, .source = GRAPH_SRC_LTTNG };
	const char *name;
	uint64_t len;

	if (!pay_trace(im, pay, ev, &e.trace) || !pay_u64(im, pay, ev, "task", &e.task) ||
	    !pay_str(im, pay, ev, "name", &name, &len))
		return;
	e.name = graph_strndup(im->g, name, len);
	e.attrs = graph_strdup(im->g, "{}");
	if (!e.name || !e.attrs) {
		ctf_fail(im, -ENOMEM, "event %" PRIu64 " (%s): out of memory", im->index, ev);
		return;
	}
	if (!graph_add_event(im->g, &e))
		ctf_fail(im, -E2BIG, "event %" PRIu64 " (%s): more than %u events", im->index, ev,
			 GRAPH_MAX_ELEMS);
}

static void weft_edge(struct ctf_import *im, const bt_field *pay)
{
	static const char ev[] = "weft:edge";
	struct graph_edge e = { .source = GRAPH_SRC_LTTNG };
	const char *kind;
	uint64_t len;
	char buf[32];
	int k;

	if (!pay_trace(im, pay, ev, &e.trace) || !pay_str(im, pay, ev, "kind", &kind, &len) ||
	    !pay_u64(im, pay, ev, "from_task", &e.from_task) ||
	    !pay_u64(im, pay, ev, "from_event", &e.from_event) ||
	    !pay_u64(im, pay, ev, "to_task", &e.to_task) ||
	    !pay_u64(im, pay, ev, "to_event", &e.to_event))
		return;
	k = -1;
	if (len < sizeof(buf) && memchr(kind, '\0', len) == NULL) {
		memcpy(buf, kind, len);
		buf[len] = '\0';
		k = graph_edge_kind_parse(buf);
	}
	if (k < 0) {
		ctf_fail(im, -EINVAL, "event %" PRIu64 " (%s): kind is not an edge kind", im->index,
			 ev);
		return;
	}
	e.kind = (enum graph_edge_kind)k;
	if (!e.from_task || !e.to_task) {
		ctf_fail(im, -EINVAL, "event %" PRIu64 " (%s): task id 0", im->index, ev);
		return;
	}
	if (!graph_add_edge(im->g, &e))
		ctf_fail(im, -E2BIG, "event %" PRIu64 " (%s): more than %u edges", im->index, ev,
			 GRAPH_MAX_ELEMS);
}

/* Any other event: an event of the innermost open task of its thread, or dropped. */
static void other_event(struct ctf_import *im, const char *name, const bt_field *pay,
			const struct ctf_where *w)
{
	struct graph_event e = { .time = w->time, .source = GRAPH_SRC_LTTNG };
	size_t th = thread_get(im, w->host, w->pid, w->tid);
	const struct graph_task *t;
	size_t budget = CTF_ATTR_NODES;
	json_t *attrs;

	if (th == SIZE_MAX) {
		ctf_fail(im, -ENOMEM, "event %" PRIu64 " (%s): out of memory", im->index, name);
		return;
	}
	if (!im->threads[th].nopen) {
		im->st->dropped_no_task++;
		return;
	}
	t = &im->g->tasks[im->threads[th].open[im->threads[th].nopen - 1]];
	e.trace = t->trace;
	e.task = t->id;
	e.name = graph_strdup(im->g, name);
	attrs = ctf_read_is(pay, BT_FIELD_CLASS_TYPE_STRUCTURE) ? field_json(pay, 0, &budget) :
								  json_object();
	e.attrs = json_arena(im->g, attrs);
	if (!e.name || !e.attrs) {
		ctf_fail(im, -ENOMEM, "event %" PRIu64 " (%s): out of memory", im->index, name);
		return;
	}
	if (!graph_add_event(im->g, &e))
		ctf_fail(im, -E2BIG, "event %" PRIu64 " (%s): more than %u events", im->index, name,
			 GRAPH_MAX_ELEMS);
}

/* ------------------------------------------------------------------ the sink */

static struct ctf_trace *trace_info(struct ctf_import *im, const bt_trace *trace)
{
	struct ctf_trace *ti;
	const bt_value *v;

	if (im->ntraces && im->traces[im->last_trace].trace == trace)
		return &im->traces[im->last_trace];
	for (size_t i = 0; i < im->ntraces; i++) {
		if (im->traces[i].trace == trace) {
			im->last_trace = i;
			return &im->traces[i];
		}
	}
	if (im->ntraces == CTF_MAX_TRACES) {
		ctf_fail(im, -E2BIG, "more than %d traces", CTF_MAX_TRACES);
		return NULL;
	}
	ti = &im->traces[im->ntraces];
	ti->trace = trace;
	v = bt_trace_borrow_environment_entry_value_by_name_const(trace, "hostname");
	ti->host = graph_strdup(im->g, v && bt_value_get_type(v) == BT_VALUE_TYPE_STRING ?
					       bt_value_string_get(v) :
					       "");
	v = bt_trace_borrow_environment_entry_value_by_name_const(trace, "domain");
	ti->kernel = v && bt_value_get_type(v) == BT_VALUE_TYPE_STRING &&
		     strcmp(bt_value_string_get(v), "kernel") == 0;
	if (!ti->host) {
		ctf_fail(im, -ENOMEM, "out of memory");
		return NULL;
	}
	im->last_trace = im->ntraces++;
	return ti;
}

/* vpid, vtid (-1 if the session did not add them) and procname of the common context. */
static bool event_context(struct ctf_import *im, const bt_event *event, const char *name,
			  struct ctf_where *w)
{
	const bt_field *ctx = bt_event_borrow_common_context_field_const(event);
	static const char *const keys[] = { "vpid", "vtid" };
	int64_t *out[] = { &w->pid, &w->tid };

	w->pid = w->tid = -1;
	w->procname = NULL;
	if (!ctf_read_is(ctx, BT_FIELD_CLASS_TYPE_STRUCTURE))
		return true;
	for (size_t i = 0; i < 2; i++) {
		const bt_field *f = ctf_read_member(ctx, keys[i]);

		if (f && !ctf_read_int(f, false, out[i])) {
			ctf_fail(im, -EINVAL,
				 "event %" PRIu64 " (%s): context field %s is not an integer",
				 im->index, name, keys[i]);
			return false;
		}
	}
	w->procname = ctf_read_member(ctx, "procname");
	if (w->procname && !ctf_read_is(w->procname, BT_FIELD_CLASS_TYPE_STRING)) {
		ctf_fail(im, -EINVAL,
			 "event %" PRIu64 " (%s): context field procname is not a string",
			 im->index, name);
		return false;
	}
	return true;
}

static void ctf_message(struct ctf_import *im, const bt_message *msg)
{
	const bt_event *event;
	const bt_event_class *ec;
	const bt_clock_class *cc;
	const bt_field *pay;
	struct ctf_trace *ti;
	struct ctf_where w;
	const char *name;

	if (bt_message_get_type(msg) != BT_MESSAGE_TYPE_EVENT)
		return;
	event = bt_message_event_borrow_event_const(msg);
	ec = bt_event_borrow_class_const(event);
	name = bt_event_class_get_name(ec);
	if (!name)
		name = "";
	ti = trace_info(im, bt_stream_borrow_trace_const(bt_event_borrow_stream_const(event)));
	if (!ti)
		return;
	if (ti->kernel) {
		im->st->kernel_events++;
		goto out;
	}
	cc = bt_message_event_borrow_stream_class_default_clock_class_const(msg);
	if (!cc) {
		ctf_fail(im, -EINVAL,
			 "event %" PRIu64 " (%s): no timestamp (its stream has no clock)",
			 im->index, name);
		return;
	}
	if (!bt_clock_class_origin_is_unix_epoch(cc)) {
		ctf_fail(im, -EINVAL,
			 "event %" PRIu64 " (%s): its clock's origin is not the Unix epoch",
			 im->index, name);
		return;
	}
	if (bt_clock_snapshot_get_ns_from_origin(
		    bt_message_event_borrow_default_clock_snapshot_const(msg), &w.time) !=
		    BT_CLOCK_SNAPSHOT_GET_NS_FROM_ORIGIN_STATUS_OK ||
	    w.time < 0 || w.time > IMP_TIME_MAX) {
		ctf_fail(im, -EINVAL,
			 "event %" PRIu64
			 " (%s): timestamp out of range (before 1970 or after 2200)",
			 im->index, name);
		return;
	}
	w.host = ti->host;
	if (!event_context(im, event, name, &w))
		return;
	im->st->events++;
	if (!im->any || w.time > im->last)
		im->last = w.time;
	im->any = true;
	pay = bt_event_borrow_payload_field_const(event);
	if (strcmp(name, "weft:task_begin") == 0)
		task_begin(im, pay, &w);
	else if (strcmp(name, "weft:task_end") == 0)
		task_end(im, pay, &w);
	else if (strcmp(name, "weft:event") == 0)
		weft_event(im, pay, &w);
	else if (strcmp(name, "weft:edge") == 0)
		weft_edge(im, pay);
	else
		other_event(im, name, pay, &w);
out:
	im->index++;
}

/* ------------------------------------------------------------------ the graph of components */

/* err's message "DIR: WHAT: CAUSE" (": CAUSE" only if there is one), cut at its size. */
static int ctf_fail_bt(struct graph_import_err *err, const char *dir, int ret, const char *what,
		       const char *cause)
{
	int n = snprintf(err->msg, sizeof(err->msg), "%s: %s", dir, what);

	if (cause[0] && n >= 0 && (size_t)n < sizeof(err->msg))
		snprintf(err->msg + n, sizeof(err->msg) - (size_t)n, ": %s", cause);
	return ret;
}

/* Loads babeltrace2's plugins if not yet done, in the caller's process: its reader processes
 * then find them loaded (graph/ctf_read.c keeps them).  The caller holds ctf_read_lock(). */
static int ctf_plugins_load(const char *dir, struct graph_import_err *err)
{
	char cause[CTF_READ_CAUSE];

	if (ctf_read_plugins())
		return 0;
	ctf_read_cause(cause, sizeof(cause));
	return ctf_fail_bt(err, dir, -ENOENT,
			   "babeltrace2's ctf and utils plugins cannot be loaded", cause);
}

/* The sink's callback (graph/ctf_read.h): the importer reads on while nothing failed. */
static bool ctf_on_message(const bt_message *msg, void *data)
{
	struct ctf_import *im = data;

	ctf_message(im, msg);
	return !im->err;
}

/* src.ctf.fs (one per trace directory) -> flt.utils.muxer -> the importer: 0, or -errno with
 * err's message set. */
static int ctf_run(const char *dir, const struct ctf_read_dirs *dirs, struct ctf_import *im,
		   struct graph_import_err *err)
{
	struct ctf_read_fault f;
	enum ctf_read_status rs = ctf_read_run(dirs, ctf_on_message, im, &f);
	char what[64];

	switch (rs) {
	case CTF_READ_OK:
		return 0;
	case CTF_READ_STOPPED:
		snprintf(err->msg, sizeof(err->msg), "%s: %.400s", dir, im->msg);
		return im->err;
	case CTF_READ_CLASSES:
		return ctf_fail_bt(err, dir, -ENOENT, "babeltrace2 has no src.ctf.fs or muxer",
				   f.cause);
	case CTF_READ_TRACE:
		return ctf_fail_bt(err, dir, -EINVAL, f.what, f.cause);
	case CTF_READ_GRAPH:
		return ctf_fail_bt(err, dir, -ENOMEM, f.what, f.cause);
	case CTF_READ_AGAIN:
		snprintf(err->msg, sizeof(err->msg), "%s: babeltrace2 keeps asking to retry", dir);
		return -EAGAIN;
	case CTF_READ_FAILED:
	case CTF_READ_NOMEM:
		break;
	}
	snprintf(what, sizeof(what), "babeltrace2 failed at event %" PRIu64, im->index);
	return ctf_fail_bt(err, dir, rs == CTF_READ_NOMEM ? -ENOMEM : -EINVAL, what, f.cause);
}

/* After the last event: cut tasks end there; events and edges naming no task of this import
 * are dropped (a parent edge may name a parent outside it, as graph_check() allows: the
 * parent id of a task whose parent was not recorded). */
static int ctf_finish(struct ctf_import *im)
{
	struct graph *g = im->g;
	size_t k;

	for (size_t i = im->base_tasks; i < g->ntasks; i++) {
		struct graph_task *t = &g->tasks[i];
		json_t *o;

		if (im->tasks[i - im->base_tasks].ended)
			continue;
		im->st->cut++;
		t->end = im->last > t->start ? im->last : t->start;
		o = json_loads(t->attrs, 0, NULL); /* ours, made by json_arena() */
		if (o && json_object_set_new(o, "cut", json_true()) != 0) {
			json_decref(o);
			o = NULL;
		}
		t->attrs = json_arena(g, o);
		if (!t->attrs)
			return -ENOMEM;
	}
	for (size_t i = k = im->base_events; i < g->nevents; i++) {
		if (task_find(im, g->events[i].trace, g->events[i].task) == SIZE_MAX) {
			im->st->dropped_unknown++;
			continue;
		}
		g->events[k++] = g->events[i];
	}
	g->nevents = k;
	for (size_t i = k = im->base_edges; i < g->nedges; i++) {
		const struct graph_edge *e = &g->edges[i];

		if (task_find(im, e->trace, e->to_task) == SIZE_MAX ||
		    (e->kind != GRAPH_EDGE_PARENT &&
		     task_find(im, e->trace, e->from_task) == SIZE_MAX)) {
			im->st->dropped_unknown++;
			continue;
		}
		g->edges[k++] = g->edges[i];
	}
	g->nedges = k;
	return 0;
}

/* The import proper, in this process, of the traces dirs[] found in dir: into g (left as it
 * was on error), with its statistics in *st.  The caller holds ctf_read_lock(). */
static int ctf_import_here(const char *dir, const struct ctf_read_dirs *dirs, struct graph *g,
			   struct graph_ctf_stats *st, struct graph_import_err *err)
{
	struct ctf_import *im = calloc(1, sizeof(*im));
	int ret;

	if (!im) {
		snprintf(err->msg, sizeof(err->msg), "%s: out of memory", dir);
		return -ENOMEM;
	}
	im->g = g;
	im->st = st;
	im->base_tasks = g->ntasks;
	im->base_events = g->nevents;
	im->base_edges = g->nedges;
	ret = ctf_run(dir, dirs, im, err);
	if (ret == 0 && ctf_finish(im) != 0) {
		snprintf(err->msg, sizeof(err->msg), "%s: out of memory", dir);
		ret = -ENOMEM;
	}
	if (ret == 0) {
		ret = GRAPH_FMT_CTF;
	} else {
		g->ntasks = im->base_tasks;
		g->nevents = im->base_events;
		g->nedges = im->base_edges;
		memset(st, 0, sizeof(*st));
	}
	ctf_import_free(im);
	free(im);
	return ret;
}

/* ------------------------------------------------------------------ the reader process */

/*
 * babeltrace2 2.0.4 crashes on some hostile metadata (SIGFPE on a clock without a frequency,
 * a failed assertion on an LTTng trace whose stream has no clock; its own CLI too) and leaks
 * what it made of a trace whose stream fails mid-packet.  So by default the import runs in a
 * child process: fork(), the child imports into a graph of its own, writes it into a pipe and
 * _exit()s (its leaks go with it); the parent reads the graph back.  A child that dies of a
 * signal is a refused trace, not a dead caller.
 *
 * The pipe carries a header (the child's return value, message and statistics, and the
 * element counts), each task and event as its struct followed by its strings (a 32-bit
 * length, then the bytes), the edges' structs, and a trailer.  Both ends are one binary, so
 * structs are copied as they are (their pointers replaced on arrival); the parent checks
 * every count and length all the same.
 */
#define CTF_PIPE_MAGIC 0x77656674637466ULL /* "weftctf" */
#define CTF_PIPE_BUF (1 << 20) /* stdio's buffer at each end: fewer, larger reads and writes */

struct ctf_pipe_head {
	uint64_t magic;
	int32_t ret;
	char msg[sizeof(((struct graph_import_err *)0)->msg)];
	struct graph_ctf_stats st;
	uint64_t ntasks, nevents, nedges;
};

static bool pipe_str(FILE *f, const char *s)
{
	uint32_t len = (uint32_t)strlen(s);

	return fwrite(&len, sizeof(len), 1, f) == 1 && fwrite(s, 1, len, f) == len;
}

/* The child's side: its import g and the outcome into f; true if all of it went. */
static bool pipe_write(FILE *f, const struct graph *g, int ret, const struct graph_ctf_stats *st,
		       const struct graph_import_err *err)
{
	struct ctf_pipe_head h = { .magic = CTF_PIPE_MAGIC, .ret = ret, .st = *st };
	uint64_t trailer = ~CTF_PIPE_MAGIC;

	memcpy(h.msg, err->msg, sizeof(h.msg));
	if (ret > 0) {
		h.ntasks = g->ntasks;
		h.nevents = g->nevents;
		h.nedges = g->nedges;
	}
	if (fwrite(&h, sizeof(h), 1, f) != 1)
		return false;
	for (size_t i = 0; i < h.ntasks; i++) {
		const struct graph_task *t = &g->tasks[i];

		if (fwrite(t, sizeof(*t), 1, f) != 1 || !pipe_str(f, t->service) ||
		    !pipe_str(f, t->name) || !pipe_str(f, t->host) || !pipe_str(f, t->attrs))
			return false;
	}
	for (size_t i = 0; i < h.nevents; i++) {
		const struct graph_event *e = &g->events[i];

		if (fwrite(e, sizeof(*e), 1, f) != 1 || !pipe_str(f, e->name) ||
		    !pipe_str(f, e->attrs))
			return false;
	}
	if (h.nedges && fwrite(g->edges, sizeof(g->edges[0]), h.nedges, f) != h.nedges)
		return false;
	return fwrite(&trailer, sizeof(trailer), 1, f) == 1 && fflush(f) == 0;
}

/* One string from the child into g's arena; NULL with *bad set when the pipe ends early or
 * the length is absurd, NULL with *bad clear when out of memory. */
static const char *pipe_read_str(FILE *f, struct graph *g, char **buf, size_t *cap, bool *bad)
{
	uint32_t len;

	if (fread(&len, sizeof(len), 1, f) != 1 || len > 16 * GRAPH_MAX_STR) {
		*bad = true;
		return NULL;
	}
	if (len + 1 > *cap) {
		char *p = realloc(*buf, len + 1);

		if (!p)
			return NULL;
		*buf = p;
		*cap = len + 1;
	}
	if (len && fread(*buf, 1, len, f) != len) {
		*bad = true;
		return NULL;
	}
	return graph_strndup(g, *buf, len);
}

/* The parent's side: the child's outcome from f into g and *st.  The child's return value,
 * or -EIO (the pipe ended early or holds nonsense: the child died), -ENOMEM, -E2BIG. */
static int pipe_read(FILE *f, const char *dir, struct graph *g, struct graph_ctf_stats *st,
		     struct graph_import_err *err)
{
	struct ctf_pipe_head h;
	char *buf = NULL;
	size_t cap = 0;
	bool bad = false;
	uint64_t trailer;
	int ret = 0;

	if (fread(&h, sizeof(h), 1, f) != 1 || h.magic != CTF_PIPE_MAGIC ||
	    h.ntasks > GRAPH_MAX_ELEMS || h.nevents > GRAPH_MAX_ELEMS || h.nedges > GRAPH_MAX_ELEMS)
		return -EIO;
	if (h.ret <= 0) {
		h.msg[sizeof(h.msg) - 1] = '\0';
		memcpy(err->msg, h.msg, sizeof(err->msg));
		return h.ret < 0 ? h.ret : -EIO;
	}
	for (uint64_t i = 0; ret == 0 && i < h.ntasks; i++) {
		struct graph_task t;

		if (fread(&t, sizeof(t), 1, f) != 1) {
			ret = -EIO;
			break;
		}
		t.service = pipe_read_str(f, g, &buf, &cap, &bad);
		t.name = t.service ? pipe_read_str(f, g, &buf, &cap, &bad) : NULL;
		t.host = t.name ? pipe_read_str(f, g, &buf, &cap, &bad) : NULL;
		t.attrs = t.host ? pipe_read_str(f, g, &buf, &cap, &bad) : NULL;
		if (!t.attrs)
			ret = bad ? -EIO : -ENOMEM;
		else if (!graph_add_task(g, &t))
			ret = -E2BIG;
	}
	for (uint64_t i = 0; ret == 0 && i < h.nevents; i++) {
		struct graph_event e;

		if (fread(&e, sizeof(e), 1, f) != 1) {
			ret = -EIO;
			break;
		}
		e.name = pipe_read_str(f, g, &buf, &cap, &bad);
		e.attrs = e.name ? pipe_read_str(f, g, &buf, &cap, &bad) : NULL;
		if (!e.attrs)
			ret = bad ? -EIO : -ENOMEM;
		else if (!graph_add_event(g, &e))
			ret = -E2BIG;
	}
	for (uint64_t i = 0; ret == 0 && i < h.nedges; i++) {
		struct graph_edge e;

		if (fread(&e, sizeof(e), 1, f) != 1)
			ret = -EIO;
		else if (!graph_add_edge(g, &e))
			ret = -E2BIG;
	}
	free(buf);
	if (ret == 0 && (fread(&trailer, sizeof(trailer), 1, f) != 1 || trailer != ~CTF_PIPE_MAGIC))
		ret = -EIO;
	if (ret == 0) {
		*st = h.st;
		return h.ret;
	}
	if (ret == -ENOMEM)
		snprintf(err->msg, sizeof(err->msg), "%s: out of memory", dir);
	else if (ret == -E2BIG)
		snprintf(err->msg, sizeof(err->msg), "%s: more than %u elements of a kind", dir,
			 GRAPH_MAX_ELEMS);
	return ret;
}

/* Imports in a child process (see above).  The caller holds ctf_read_lock(): no other thread
 * of this process is inside babeltrace2 while it forks. */
static int ctf_import_child(const char *dir, const struct ctf_read_dirs *dirs, struct graph *g,
			    struct graph_ctf_stats *st, struct graph_import_err *err)
{
	static const int crash_sigs[] = {
		SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP, SIGSYS
	};
	size_t nt = g->ntasks, ne = g->nevents, nd = g->nedges;
	int fds[2], status = 0, ret;
	pid_t pid, w;
	FILE *f;

	if (pipe2(fds, O_CLOEXEC) != 0) {
		ret = -errno;
		snprintf(err->msg, sizeof(err->msg), "%s: pipe: %s", dir, strerror(-ret));
		return ret;
	}
	pid = fork();
	if (pid < 0) {
		ret = -errno;
		close(fds[0]);
		close(fds[1]);
		snprintf(err->msg, sizeof(err->msg), "%s: fork: %s", dir, strerror(-ret));
		return ret;
	}
	if (pid == 0) {
		struct graph cg;
		struct graph_ctf_stats cst = { 0 };
		struct graph_import_err cerr = { .offset = -1 };
		FILE *out;

		close(fds[0]);
		/* a crash ends this process: not a handler of the caller's (a test harness's
		 * longjmp() would run the caller's code on in here) */
		for (size_t i = 0; i < sizeof(crash_sigs) / sizeof(crash_sigs[0]); i++)
			signal(crash_sigs[i], SIG_DFL);
		graph_init(&cg);
		ret = ctf_import_here(dir, dirs, &cg, &cst, &cerr);
		out = fdopen(fds[1], "w");
		if (out)
			setvbuf(out, NULL, _IOFBF, CTF_PIPE_BUF);
		_exit(out && pipe_write(out, &cg, ret, &cst, &cerr) ? 0 : 1);
	}
	close(fds[1]);
	f = fdopen(fds[0], "r");
	if (!f) {
		ret = -errno;
		close(fds[0]);
	} else {
		setvbuf(f, NULL, _IOFBF, CTF_PIPE_BUF);
		ret = pipe_read(f, dir, g, st, err);
		fclose(f); /* a child still writing gets EPIPE and exits */
	}
	do
		w = waitpid(pid, &status, 0);
	while (w < 0 && errno == EINTR);
	if (w == pid && WIFSIGNALED(status)) {
		snprintf(
			err->msg, sizeof(err->msg),
			"%s: babeltrace2 crashed reading it (signal %d, %s): a trace it cannot read",
			dir, WTERMSIG(status), strsignal(WTERMSIG(status)));
		ret = -EINVAL;
	} else if (ret == -EIO) {
		snprintf(err->msg, sizeof(err->msg), "%s: the reader process failed (status %d)",
			 dir, w == pid ? status : -1);
	}
	if (ret < 0) {
		g->ntasks = nt;
		g->nevents = ne;
		g->nedges = nd;
		memset(st, 0, sizeof(*st));
	}
	return ret;
}

static int ctf_import(const char *dir, struct graph *g, struct graph_ctf_stats *st,
		      struct graph_import_err *err, bool child)
{
	struct graph_ctf_stats local;
	struct ctf_read_dirs dirs = { 0 };
	char bad[PATH_MAX] = "";
	int ret;

	memset(err, 0, sizeof(*err));
	err->offset = -1;
	if (!st)
		st = &local;
	memset(st, 0, sizeof(*st));
	ret = ctf_read_find(dir, CTF_MAX_TRACES, &dirs, bad, sizeof(bad));
	if (ret) {
		if (ret == -EINVAL)
			snprintf(err->msg, sizeof(err->msg),
				 "%s: %.300s is not a regular file (a stream of a CTF trace)", dir,
				 bad);
		else
			snprintf(err->msg, sizeof(err->msg), "%s: %s", dir,
				 ret == -E2BIG ? "more than 1024 CTF traces in it" :
						 strerror(-ret));
		goto out_dirs;
	}
	if (!dirs.n) {
		snprintf(err->msg, sizeof(err->msg),
			 "%s: no CTF trace in it (no file named metadata, %d levels deep)", dir,
			 CTF_READ_DEPTH);
		ret = -ENOENT;
		goto out_dirs;
	}
	ctf_read_lock();
	ret = ctf_plugins_load(dir, err);
	if (ret == 0)
		ret = child ? ctf_import_child(dir, &dirs, g, st, err) :
			      ctf_import_here(dir, &dirs, g, st, err);
	ctf_read_unlock();
out_dirs:
	ctf_read_dirs_free(&dirs);
	return ret;
}

int graph_import_ctf_stats(const char *dir, struct graph *g, struct graph_ctf_stats *st,
			   struct graph_import_err *err)
{
	return ctf_import(dir, g, st, err, true);
}

int graph_import_ctf_here(const char *dir, struct graph *g, struct graph_ctf_stats *st,
			  struct graph_import_err *err)
{
	return ctf_import(dir, g, st, err, false);
}

int graph_import_ctf(const char *dir, struct graph *g, struct graph_import_err *err)
{
	return graph_import_ctf_stats(dir, g, NULL, err);
}
