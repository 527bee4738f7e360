// SPDX-License-Identifier: Apache-2.0
/*
 * LTTng CTF traces as the VM analysis's input (docs/vm.md, "LTTng CTF traces"): a host's or a
 * guest's LTTng kernel trace (lttng-modules' kvm_x86 and sched events) and, beside it, LTTng-UST
 * traces of weft's provider (weft:vm_sync, weft:vm_tsc, weft:tsc_clock), read with libbabeltrace2
 * and turned into weft's recorded event stream (vm/stream.h), which the analysis then reads as
 * it reads any stream.  One input format behind the analysis means one set of checks: every
 * line this file writes is parsed again, member by member, by vm/stream.c.
 *
 * How it works.  Every directory below the input that holds a file named `metadata` is a trace
 * (an LTTng session's output holds kernel/ and ust/uid/0/64-bit/); each gets a src.ctf.fs, all
 * their streams go through one flt.utils.muxer, so that events arrive in time order whatever
 * CPU's stream they were written to, and a simple sink writes each event as one JSON line
 * (jansson):
 *
 *   time    the event's clock snapshot in ns from its clock's origin (LTTng's clocks have the
 *           Unix epoch as origin: host and guest times are then both wall-clock based, and the
 *           synchronisation points still measure their offset)
 *   cpu     the packet context's cpu_id (LTTng writes one stream per CPU); a trace without it
 *           is refused: the guest pass needs the CPU of every sched_switch.  One kernel trace
 *           per input (two machines' CPUs would mix): a second one is refused
 *   tid     the context's tid (`lttng add-context -k -t tid`), else vtid, else the thread
 *           the CPU's last sched_switch switched in: a kernel trace needs no context at all,
 *           as in Trace Compass.  A kvm event on a CPU before its first sched_switch has no
 *           thread: it is dropped and counted (no_tid), never given a wrong one.
 *   pid     the context's pid, else vpid (absent otherwise: the analysis then cannot tell
 *           VMs apart by their VMM's pid)
 *   name    lttng-modules' name made the kernel's: kvm_x86_X -> kvm_X, kvm_nested_vmrun ->
 *           kvm_nested_vmenter (the kernel renamed it); weft:X (weft's LTTng-UST provider) ->
 *           X; any other name as it is
 *   fields  the payload's integers (enumerations as their number; an unsigned one above
 *           INT64_MAX as its two's complement, as the stream format says), booleans and
 *           strings (at most VM_CTF_STR_MAX bytes, invalid UTF-8 as '?'), at most
 *           VM_CTF_MAX_FIELDS of them; lttng-modules' sched field names made the kernel's
 *           (sched_switch prev_tid/next_tid -> prev_pid/next_pid, sched_wakeup tid -> pid).
 *
 * Events the tracer discarded (its buffers were full) are counted from babeltrace2's
 * discarded-events messages: the caller says so (a state machine that missed events may be
 * wrong around them), as weft run says so of rows lost to a full ring buffer.
 *
 * Limits and safety.  babeltrace2 crashes on some hostile metadata and does not check its
 * preconditions in release builds, so the conversion runs in a child process (as
 * graph/import_ctf.c does), every field's class is checked before its accessor is called, and
 * the child's output is copied into an unnamed temporary file of at most VM_STREAM_FILE_MAX
 * bytes (the stream can then be read twice, as the guest's must); the child's verdict and
 * counts come back on a second pipe.  babeltrace2 also loops forever on some packets (a
 * packet size of 0, found by fuzz_vm_ctf): a child that writes nothing for VM_CTF_STALL_MS
 * is killed and the trace refused.  vm_stream_open_ctf(dir, false, ...) converts in the
 * caller, for the fuzzer's coverage.  babeltrace2's reference counts are not atomic: one
 * conversion at a time per process (a mutex).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <babeltrace2/babeltrace.h>
#include <jansson.h>

#include "base/text.h"
#include "vm/stream.h"

#define CTF_MAX_TRACES 64 /* trace directories below one input */
#define CTF_MAX_DEPTH 8 /* how deep below the input they are searched */

/* ------------------------------------------------------------------ finding the traces */

struct ctf_dirs {
	char *v[CTF_MAX_TRACES];
	size_t n;
};

static void dirs_free(struct ctf_dirs *d)
{
	for (size_t i = 0; i < d->n; i++)
		free(d->v[i]);
	d->n = 0;
}

/* Every entry of a trace directory is a regular file or a directory (a FIFO would block
 * babeltrace2): 0 or -EINVAL. */
static int dir_plain(const char *path)
{
	char sub[PATH_MAX];
	struct stat st;
	struct dirent *de;
	DIR *dir = opendir(path);
	int ret = 0;

	if (!dir)
		return -errno;
	while (ret == 0 && (de = readdir(dir))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (snprintf(sub, sizeof(sub), "%s/%s", path, de->d_name) >= (int)sizeof(sub) ||
		    stat(sub, &st) != 0 || !(S_ISREG(st.st_mode) || S_ISDIR(st.st_mode)))
			ret = -EINVAL;
	}
	closedir(dir);
	return ret;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int dirs_find(const char *path, int depth, struct ctf_dirs *d)
{
	char sub[PATH_MAX];
	struct stat st;
	struct dirent *de;
	DIR *dir;
	int ret = 0;

	if (snprintf(sub, sizeof(sub), "%s/metadata", path) >= (int)sizeof(sub))
		return -ENAMETOOLONG;
	if (stat(sub, &st) == 0 && S_ISREG(st.st_mode)) {
		ret = dir_plain(path);
		if (ret)
			return ret;
		if (d->n == CTF_MAX_TRACES)
			return -E2BIG;
		d->v[d->n] = strdup(path);
		return d->v[d->n] ? (d->n++, 0) : -ENOMEM;
	}
	if (depth >= CTF_MAX_DEPTH)
		return 0;
	dir = opendir(path);
	if (!dir)
		return depth == 0 ? -errno : 0;
	while (ret == 0 && (de = readdir(dir))) {
		if (de->d_name[0] == '.')
			continue;
		if (snprintf(sub, sizeof(sub), "%s/%s", path, de->d_name) >= (int)sizeof(sub))
			continue;
		if (lstat(sub, &st) != 0 || !S_ISDIR(st.st_mode))
			continue;
		ret = dirs_find(sub, depth + 1, d);
	}
	closedir(dir);
	return ret;
}

/* ------------------------------------------------------------------ the conversion */

struct conv {
	FILE *out;
	struct vm_ctf_stats *st;
	int64_t *cur; /* per CPU, the thread its last sched_switch switched in; -1 unknown */
	const bt_trace *kernel; /* the kernel trace: one machine's CPUs, at most one */
	const char *tag; /* NULL while all is well */
	char msg[400];
};

static void conv_fail(struct conv *c, const char *tag, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void conv_fail(struct conv *c, const char *tag, const char *fmt, ...)
{
	va_list ap;

	if (c->tag)
		return;
	c->tag = tag;
	va_start(ap, fmt);
	vsnprintf(c->msg, sizeof(c->msg), fmt, ap);
	va_end(ap);
}

static bool field_is(const bt_field *f, bt_field_class_type type)
{
	return f && bt_field_class_type_is(bt_field_get_class_type(f), type);
}

static const bt_field *member(const bt_field *s, const char *name)
{
	if (!field_is(s, BT_FIELD_CLASS_TYPE_STRUCTURE))
		return NULL;
	return bt_field_structure_borrow_member_field_by_name_const(s, name);
}

/* An integer (or enumeration) field as int64 (unsigned above INT64_MAX wraps); false if not. */
static bool field_int(const bt_field *f, int64_t *v)
{
	if (field_is(f, BT_FIELD_CLASS_TYPE_SIGNED_INTEGER)) {
		*v = bt_field_integer_signed_get_value(f);
		return true;
	}
	if (field_is(f, BT_FIELD_CLASS_TYPE_UNSIGNED_INTEGER)) {
		*v = (int64_t)bt_field_integer_unsigned_get_value(f);
		return true;
	}
	return false;
}

static json_t *json_text(const char *s, size_t len)
{
	char buf[VM_CTF_STR_MAX];

	if (len > sizeof(buf))
		len = sizeof(buf);
	/* a cut may split a UTF-8 sequence: what is left of it becomes '?' like any invalid byte */
	for (size_t i = 0; i < len;) {
		size_t k = text_utf8_seq(s + i, len - i);

		if (!k || (k == 1 && (unsigned char)s[i] < 0x20)) {
			buf[i++] = '?';
		} else {
			memcpy(buf + i, s + i, k);
			i += k;
		}
	}
	return json_stringn(buf, len);
}

/* The kernel's name of a field of event `name` (lttng-modules names a thread id tid). */
static const char *field_name(const char *ev, const char *f)
{
	if (strcmp(ev, "sched_switch") == 0) {
		if (strcmp(f, "prev_tid") == 0)
			return "prev_pid";
		if (strcmp(f, "next_tid") == 0)
			return "next_pid";
	} else if (strncmp(ev, "sched_wak", 9) == 0 || strcmp(ev, "sched_process_exit") == 0) {
		if (strcmp(f, "tid") == 0)
			return "pid";
	}
	return f;
}

/* The payload's integers, booleans and strings into fields (an object). */
static void payload(struct conv *c, const char *ev, const bt_field *pay, json_t *fields)
{
	const bt_field_class *fc;
	uint64_t n;

	if (!field_is(pay, BT_FIELD_CLASS_TYPE_STRUCTURE))
		return;
	fc = bt_field_borrow_class_const(pay);
	n = bt_field_class_structure_get_member_count(fc);
	for (uint64_t i = 0, kept = 0; i < n && kept < VM_CTF_MAX_FIELDS && !c->tag; i++) {
		const bt_field_class_structure_member *m =
			bt_field_class_structure_borrow_member_by_index_const(fc, i);
		const char *name = bt_field_class_structure_member_get_name(m);
		const bt_field *f = bt_field_structure_borrow_member_field_by_index_const(pay, i);
		json_t *v = NULL;
		int64_t iv;

		if (!name || !*name || strlen(name) >= VM_NAME_MAX ||
		    !text_utf8_valid(name, strlen(name), NULL))
			continue; /* no name the stream could carry */
		if (field_int(f, &iv))
			v = json_integer(iv);
		else if (field_is(f, BT_FIELD_CLASS_TYPE_BOOL))
			v = json_boolean(bt_field_bool_get_value(f));
		else if (field_is(f, BT_FIELD_CLASS_TYPE_STRING))
			v = json_text(bt_field_string_get_value(f), bt_field_string_get_length(f));
		else
			continue; /* arrays, structures, reals: nothing the analysis reads */
		if (!v || json_object_set_new(fields, field_name(ev, name), v)) {
			conv_fail(c, "E_VM_NOMEM", "out of memory");
			return;
		}
		kept++;
	}
}

/* The stream's name of an LTTng event (in buf). */
static const char *event_name(const char *name, char *buf, size_t size)
{
	if (strncmp(name, "kvm_x86_", 8) == 0)
		snprintf(buf, size, "kvm_%s", name + 8);
	else if (strncmp(name, "weft:", 5) == 0)
		snprintf(buf, size, "%s", name + 5);
	else
		snprintf(buf, size, "%s", name);
	if (strcmp(buf, "kvm_nested_vmrun") == 0)
		snprintf(buf, size, "kvm_nested_vmenter");
	return buf;
}

static bool ctx_int(struct conv *c, const bt_field *ctx, const char *a, const char *b, int64_t *out)
{
	const bt_field *f = member(ctx, a);

	if (!f)
		f = member(ctx, b);
	*out = -1;
	if (!f)
		return true;
	if (!field_int(f, out) || *out < 0) {
		conv_fail(c, "E_VM_CTF",
			  "event %" PRIu64 ": context field %s is not an integer >= 0",
			  c->st->events + 1, member(ctx, a) ? a : b);
		return false;
	}
	return true;
}

static void conv_event(struct conv *c, const bt_message *msg)
{
	const bt_event *event = bt_message_event_borrow_event_const(msg);
	const bt_packet *packet = bt_event_borrow_packet_const(event);
	const bt_clock_class *cc =
		bt_message_event_borrow_stream_class_default_clock_class_const(msg);
	const char *raw = bt_event_class_get_name(bt_event_borrow_class_const(event));
	const bt_field *pctx, *ctx;
	char name[VM_NAME_MAX];
	int64_t time, cpu, tid, pid;
	json_t *o, *fields;
	char *line;

	if (!raw || !*raw || strlen(raw) >= VM_NAME_MAX ||
	    !text_utf8_valid(raw, strlen(raw), NULL)) {
		conv_fail(c, "E_VM_CTF",
			  "event %" PRIu64 ": no name, one of %d bytes or more, or one not UTF-8",
			  c->st->events + 1, VM_NAME_MAX);
		return;
	}
	event_name(raw, name, sizeof(name));
	if (!cc ||
	    bt_clock_snapshot_get_ns_from_origin(
		    bt_message_event_borrow_default_clock_snapshot_const(msg), &time) !=
		    BT_CLOCK_SNAPSHOT_GET_NS_FROM_ORIGIN_STATUS_OK ||
	    time < 0) {
		conv_fail(c, "E_VM_CTF",
			  "event %" PRIu64 " (%s): no time, or one before its clock's origin",
			  c->st->events + 1, raw);
		return;
	}
	pctx = packet ? bt_packet_borrow_context_field_const(packet) : NULL;
	if (!field_int(member(pctx, "cpu_id"), &cpu) || cpu < 0 || cpu >= VM_CTF_MAX_CPUS) {
		conv_fail(c, "E_VM_CTF",
			  "event %" PRIu64 " (%s): no cpu_id from 0 to %d in its packet context "
			  "(LTTng writes one stream per CPU)",
			  c->st->events + 1, raw, VM_CTF_MAX_CPUS - 1);
		return;
	}
	{
		const bt_trace *tr =
			bt_stream_borrow_trace_const(bt_event_borrow_stream_const(event));
		const bt_value *dom =
			bt_trace_borrow_environment_entry_value_by_name_const(tr, "domain");

		if (dom && bt_value_is_string(dom) &&
		    strcmp(bt_value_string_get(dom), "kernel") == 0) {
			if (c->kernel && c->kernel != tr) {
				conv_fail(c, "E_VM_CTF",
					  "two kernel traces below it (their CPUs would mix): give "
					  "each machine's trace as its own input");
				return;
			}
			c->kernel = tr;
		}
	}
	ctx = bt_event_borrow_common_context_field_const(event);
	if (!ctx_int(c, ctx, "tid", "vtid", &tid) || !ctx_int(c, ctx, "pid", "vpid", &pid))
		return;
	fields = json_object();
	o = json_object();
	if (!fields || !o) {
		json_decref(fields);
		json_decref(o);
		conv_fail(c, "E_VM_NOMEM", "out of memory");
		return;
	}
	payload(c, name, bt_event_borrow_payload_field_const(event), fields);
	if (tid < 0)
		tid = c->cur[cpu];
	if (strcmp(name, "sched_switch") == 0) {
		json_t *next = json_object_get(fields, "next_pid");

		/* the thread switched in runs on from here: later events of this CPU are its */
		c->cur[cpu] = json_is_integer(next) && json_integer_value(next) >= 0 ?
				      json_integer_value(next) :
				      -1;
	}
	c->st->events++;
	if (tid < 0 && strncmp(name, "kvm_", 4) == 0) {
		c->st->no_tid++; /* not given a thread it may not have been on */
		json_decref(fields);
		json_decref(o);
		return;
	}
	if (json_object_set_new(o, "time", json_integer(time)) ||
	    json_object_set_new(o, "cpu", json_integer(cpu)) ||
	    json_object_set_new(o, "name", json_string(name)) ||
	    (tid >= 0 && json_object_set_new(o, "tid", json_integer(tid))) ||
	    (pid >= 0 && json_object_set_new(o, "pid", json_integer(pid))) ||
	    json_object_set_new(o, "fields", fields)) {
		json_decref(o);
		conv_fail(c, "E_VM_NOMEM", "out of memory");
		return;
	}
	line = c->tag ? NULL : json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(o);
	if (c->tag)
		return;
	if (!line) {
		conv_fail(c, "E_VM_NOMEM", "out of memory");
		return;
	}
	if (fputs(line, c->out) < 0 || fputc('\n', c->out) < 0)
		conv_fail(c, "E_VM_FILE", "writing the converted stream: %s", strerror(errno));
	free(line);
}

static void conv_message(struct conv *c, const bt_message *msg)
{
	switch (bt_message_get_type(msg)) {
	case BT_MESSAGE_TYPE_EVENT:
		conv_event(c, msg);
		break;
	case BT_MESSAGE_TYPE_DISCARDED_EVENTS: {
		uint64_t n = 0;

		if (bt_message_discarded_events_get_count(msg, &n) !=
			    BT_PROPERTY_AVAILABILITY_AVAILABLE ||
		    n == 0)
			n = 1; /* at least one, the count unknown */
		c->st->discarded += n;
		break;
	}
	case BT_MESSAGE_TYPE_DISCARDED_PACKETS:
		c->st->discarded++; /* a packet of events: how many is not known */
		break;
	default:
		break;
	}
}

static bt_graph_simple_sink_component_consume_func_status conv_consume(bt_message_iterator *it,
								       void *data)
{
	struct conv *c = data;
	bt_message_array_const msgs;
	uint64_t n = 0;

	switch (bt_message_iterator_next(it, &msgs, &n)) {
	case BT_MESSAGE_ITERATOR_NEXT_STATUS_END:
		return BT_GRAPH_SIMPLE_SINK_COMPONENT_CONSUME_FUNC_STATUS_END;
	case BT_MESSAGE_ITERATOR_NEXT_STATUS_AGAIN:
		return BT_GRAPH_SIMPLE_SINK_COMPONENT_CONSUME_FUNC_STATUS_AGAIN;
	case BT_MESSAGE_ITERATOR_NEXT_STATUS_MEMORY_ERROR:
		return BT_GRAPH_SIMPLE_SINK_COMPONENT_CONSUME_FUNC_STATUS_MEMORY_ERROR;
	case BT_MESSAGE_ITERATOR_NEXT_STATUS_OK:
		break;
	default:
		return BT_GRAPH_SIMPLE_SINK_COMPONENT_CONSUME_FUNC_STATUS_ERROR;
	}
	for (uint64_t i = 0; i < n; i++) {
		if (!c->tag)
			conv_message(c, msgs[i]);
		bt_message_put_ref(msgs[i]);
	}
	return c->tag ? BT_GRAPH_SIMPLE_SINK_COMPONENT_CONSUME_FUNC_STATUS_ERROR :
			BT_GRAPH_SIMPLE_SINK_COMPONENT_CONSUME_FUNC_STATUS_OK;
}

/* ------------------------------------------------------------------ the graph of components */

static pthread_mutex_t ctf_lock = PTHREAD_MUTEX_INITIALIZER;
static const bt_plugin *ctf_plugin, *utils_plugin;

/* babeltrace2's first cause (the deepest: what went wrong first), the error released. */
static void bt_cause(char *buf, size_t size)
{
	const bt_error *e = bt_current_thread_take_error();

	buf[0] = '\0';
	if (!e)
		return;
	if (bt_error_get_cause_count(e)) {
		const char *m = bt_error_cause_get_message(bt_error_borrow_cause_by_index(e, 0));

		snprintf(buf, size, "%s", m ? m : "");
	}
	bt_error_release(e);
}

static void conv_fail_bt(struct conv *c, const char *what)
{
	char cause[300];

	bt_cause(cause, sizeof(cause));
	conv_fail(c, "E_VM_CTF", "%s%s%.300s", what, cause[0] ? ": " : "", cause);
}

/* src.ctf.fs per trace -> flt.utils.muxer -> conv_consume; c->tag set on failure. */
static void conv_run(struct conv *c, const struct ctf_dirs *dirs)
{
	const bt_component_class_source *fs = NULL;
	const bt_component_class_filter *muxc = NULL;
	const bt_component_filter *mux;
	const bt_component_sink *sink;
	bt_graph *graph;
	uint64_t nin = 0;

	if (!ctf_plugin && bt_plugin_find("ctf", BT_FALSE, BT_FALSE, BT_TRUE, BT_TRUE, BT_TRUE,
					  &ctf_plugin) != BT_PLUGIN_FIND_STATUS_OK)
		ctf_plugin = NULL;
	if (!utils_plugin && bt_plugin_find("utils", BT_FALSE, BT_FALSE, BT_TRUE, BT_TRUE, BT_TRUE,
					    &utils_plugin) != BT_PLUGIN_FIND_STATUS_OK)
		utils_plugin = NULL;
	if (ctf_plugin)
		fs = bt_plugin_borrow_source_component_class_by_name_const(ctf_plugin, "fs");
	if (utils_plugin)
		muxc = bt_plugin_borrow_filter_component_class_by_name_const(utils_plugin, "muxer");
	graph = bt_graph_create(0);
	if (!fs || !muxc || !graph) {
		conv_fail_bt(c, "babeltrace2's src.ctf.fs and flt.utils.muxer cannot be loaded");
		goto out;
	}
	if (bt_graph_add_filter_component(graph, muxc, "mux", NULL, BT_LOGGING_LEVEL_NONE, &mux) !=
	    BT_GRAPH_ADD_COMPONENT_STATUS_OK) {
		conv_fail_bt(c, "cannot make a muxer");
		goto out;
	}
	for (size_t i = 0; i < dirs->n; i++) {
		const bt_component_source *src;
		bt_value *params = bt_value_map_create(), *inputs = NULL;
		bt_graph_add_component_status s = BT_GRAPH_ADD_COMPONENT_STATUS_MEMORY_ERROR;
		char name[32], what[PATH_MAX + 64];

		if (params &&
		    bt_value_map_insert_empty_array_entry(params, "inputs", &inputs) ==
			    BT_VALUE_MAP_INSERT_ENTRY_STATUS_OK &&
		    bt_value_array_append_string_element(inputs, dirs->v[i]) ==
			    BT_VALUE_ARRAY_APPEND_ELEMENT_STATUS_OK) {
			snprintf(name, sizeof(name), "src%zu", i);
			s = bt_graph_add_source_component(graph, fs, name, params,
							  BT_LOGGING_LEVEL_NONE, &src);
		}
		bt_value_put_ref(params);
		if (s != BT_GRAPH_ADD_COMPONENT_STATUS_OK) {
			snprintf(what, sizeof(what), "babeltrace2 cannot read the CTF trace %s",
				 dirs->v[i]);
			conv_fail_bt(c, what);
			goto out;
		}
		for (uint64_t p = 0; p < bt_component_source_get_output_port_count(src); p++) {
			const bt_port_input *in =
				bt_component_filter_borrow_input_port_by_index_const(mux, nin);

			if (!in ||
			    bt_graph_connect_ports(
				    graph,
				    bt_component_source_borrow_output_port_by_index_const(src, p),
				    in, NULL) != BT_GRAPH_CONNECT_PORTS_STATUS_OK) {
				conv_fail_bt(c, "cannot connect a stream");
				goto out;
			}
			nin++;
		}
	}
	if (bt_graph_add_simple_sink_component(graph, "weft", NULL, conv_consume, NULL, c, &sink) !=
		    BT_GRAPH_ADD_COMPONENT_STATUS_OK ||
	    bt_graph_connect_ports(graph,
				   bt_component_filter_borrow_output_port_by_name_const(mux, "out"),
				   bt_component_sink_borrow_input_port_by_index_const(sink, 0),
				   NULL) != BT_GRAPH_CONNECT_PORTS_STATUS_OK) {
		conv_fail_bt(c, "cannot make the sink");
		goto out;
	}
	for (unsigned again = 0;;) {
		bt_graph_run_status s = bt_graph_run(graph);

		if (s == BT_GRAPH_RUN_STATUS_AGAIN && ++again < 1000000)
			continue; /* files never make a component wait; bounded all the same */
		if (s == BT_GRAPH_RUN_STATUS_OK)
			break;
		if (c->tag) {
			bt_current_thread_clear_error();
		} else {
			char what[80];

			snprintf(what, sizeof(what), "babeltrace2 failed after event %" PRIu64,
				 c->st->events);
			conv_fail_bt(c, what);
		}
		break;
	}
out:
	bt_graph_put_ref(graph);
	bt_current_thread_clear_error();
}

/* Converts the traces of dir into out: NULL, or the error's tag with msg set. */
static const char *convert(const struct ctf_dirs *dirs, FILE *out, struct vm_ctf_stats *st,
			   char *msg, size_t msgsz)
{
	struct conv c = { .out = out, .st = st };

	c.cur = malloc(VM_CTF_MAX_CPUS * sizeof(*c.cur));
	if (!c.cur) {
		snprintf(msg, msgsz, "out of memory");
		return "E_VM_NOMEM";
	}
	for (size_t i = 0; i < VM_CTF_MAX_CPUS; i++)
		c.cur[i] = -1;
	conv_run(&c, dirs);
	free(c.cur);
	if (!c.tag && fflush(out) != 0)
		conv_fail(&c, "E_VM_FILE", "writing the converted stream: %s", strerror(errno));
	if (c.tag)
		snprintf(msg, msgsz, "%s", c.msg);
	return c.tag;
}

/* ------------------------------------------------------------------ the reader process */

static unsigned stall_ms = VM_CTF_STALL_MS;

void vm_ctf_set_stall_ms(unsigned ms)
{
	stall_ms = ms ? ms : VM_CTF_STALL_MS;
}

/* What the child sends back on its status pipe. */
struct verdict {
	char tag[16]; /* "" on success */
	char msg[440];
	struct vm_ctf_stats st;
};

static const char *const tags[] = { "E_VM_CTF", "E_VM_NOMEM", "E_VM_FILE" };

static const char *tag_of(const char *s)
{
	for (size_t i = 0; i < sizeof(tags) / sizeof(tags[0]); i++)
		if (strcmp(s, tags[i]) == 0)
			return tags[i];
	return "E_VM_CTF";
}

static bool read_full(int fd, void *buf, size_t n)
{
	size_t got = 0;

	while (got < n) {
		ssize_t r = read(fd, (char *)buf + got, n - got);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return false;
		got += (size_t)r;
	}
	return true;
}

/* Runs convert() in a child; its stream copied into tmp.  0, or -1 with err set. */
static int convert_child(const char *dir, const struct ctf_dirs *dirs, FILE *tmp,
			 struct vm_ctf_stats *st, struct vm_err *err)
{
	static const int crash_sigs[] = {
		SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP, SIGSYS
	};
	int data[2], stat[2], status = 0;
	struct verdict v;
	char buf[65536];
	uint64_t total = 0;
	bool over = false, stalled = false, got;
	pid_t pid, w;
	ssize_t n;

	if (pipe2(data, O_CLOEXEC) != 0) {
		vm_err_set(err, "E_VM_FILE", "%s: pipe: %s", dir, strerror(errno));
		return -1;
	}
	if (pipe2(stat, O_CLOEXEC) != 0) {
		vm_err_set(err, "E_VM_FILE", "%s: pipe: %s", dir, strerror(errno));
		close(data[0]);
		close(data[1]);
		return -1;
	}
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		vm_err_set(err, "E_VM_FILE", "%s: fork: %s", dir, strerror(errno));
		close(data[0]);
		close(data[1]);
		close(stat[0]);
		close(stat[1]);
		return -1;
	}
	if (pid == 0) {
		FILE *out;
		const char *tag;

		close(data[0]);
		close(stat[0]);
		for (size_t i = 0; i < sizeof(crash_sigs) / sizeof(crash_sigs[0]); i++)
			signal(crash_sigs[i], SIG_DFL);
		memset(&v, 0, sizeof(v));
		out = fdopen(data[1], "w");
		if (!out) {
			snprintf(v.tag, sizeof(v.tag), "E_VM_NOMEM");
			snprintf(v.msg, sizeof(v.msg), "out of memory");
		} else {
			setvbuf(out, NULL, _IOFBF, 1 << 20);
			tag = convert(dirs, out, &v.st, v.msg, sizeof(v.msg));
			if (tag)
				snprintf(v.tag, sizeof(v.tag), "%s", tag);
			fclose(out); /* the parent sees the end of the stream, then the verdict */
		}
		_exit(write(stat[1], &v, sizeof(v)) == (ssize_t)sizeof(v) ? 0 : 1);
	}
	close(data[1]);
	close(stat[1]);
	for (uint64_t quiet_ms = 0;;) {
		struct pollfd pfd = { .fd = data[0], .events = POLLIN };
		int pr = poll(&pfd, 1, 100);

		if (pr < 0 && errno == EINTR)
			continue;
		if (pr == 0) {
			/* babeltrace2 loops forever on some packets (a size of 0): a reader that
			 * writes nothing for this long is ended, never waited for */
			quiet_ms += 100;
			if (quiet_ms >= stall_ms) {
				kill(pid, SIGKILL);
				stalled = true;
				break;
			}
			continue;
		}
		quiet_ms = 0;
		n = read(data[0], buf, sizeof(buf));
		if (n == 0)
			break;
		if (n < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		total += (uint64_t)n;
		if (total > VM_STREAM_FILE_MAX) {
			over = true;
			break;
		}
		if (fwrite(buf, 1, (size_t)n, tmp) != (size_t)n) {
			over = true;
			break;
		}
	}
	close(data[0]); /* a child still writing gets EPIPE and ends */
	got = read_full(stat[0], &v, sizeof(v));
	close(stat[0]);
	do
		w = waitpid(pid, &status, 0);
	while (w < 0 && errno == EINTR);
	if (stalled) {
		vm_err_set(err, "E_VM_CTF",
			   "%s: babeltrace2 read nothing for %u ms (it loops on some malformed "
			   "packets): the reader was ended",
			   dir, stall_ms);
		return -1;
	}
	if (w == pid && WIFSIGNALED(status) && WTERMSIG(status) != SIGPIPE) {
		vm_err_set(err, "E_VM_CTF",
			   "%s: babeltrace2 crashed reading it (signal %d, %s): a trace it cannot "
			   "read",
			   dir, WTERMSIG(status), strsignal(WTERMSIG(status)));
		return -1;
	}
	if (over) {
		vm_err_set(
			err, total > VM_STREAM_FILE_MAX ? "E_VM_LIMIT" : "E_VM_FILE",
			"%s: its events as a stream exceed %llu bytes, or cannot be written to a "
			"temporary file",
			dir, (unsigned long long)VM_STREAM_FILE_MAX);
		return -1;
	}
	if (!got) {
		vm_err_set(err, "E_VM_CTF", "%s: the reader process failed (status %d)", dir,
			   w == pid ? status : -1);
		return -1;
	}
	v.tag[sizeof(v.tag) - 1] = v.msg[sizeof(v.msg) - 1] = '\0';
	if (v.tag[0]) {
		vm_err_set(err, tag_of(v.tag), "%s: %s", dir, v.msg);
		return -1;
	}
	*st = v.st;
	return 0;
}

struct vm_stream *vm_stream_open_ctf(const char *dir, bool child, struct vm_ctf_stats *st,
				     struct vm_err *err)
{
	struct vm_ctf_stats local;
	struct ctf_dirs dirs = { .n = 0 };
	char name[PATH_MAX + 8], msg[440];
	FILE *tmp = NULL;
	int ret;

	if (!st)
		st = &local;
	memset(st, 0, sizeof(*st));
	ret = dirs_find(dir, 0, &dirs);
	if (ret || !dirs.n) {
		vm_err_set(err,
			   ret == -ENOENT || ret == -ENOTDIR || ret == -EACCES ? "E_VM_FILE" :
										 "E_VM_CTF",
			   "%s: %s", dir,
			   ret == -EINVAL ? "a trace directory holds something other than regular "
					    "files and directories (a FIFO, a device)" :
			   ret == -E2BIG  ? "more than 64 CTF traces below it" :
			   ret		  ? strerror(-ret) :
					    "no CTF trace below it (no file named metadata, 8 levels "
					    "deep)");
		dirs_free(&dirs);
		return NULL;
	}
	qsort(dirs.v, dirs.n, sizeof(dirs.v[0]), cmp_str);
	tmp = tmpfile();
	if (!tmp) {
		vm_err_set(err, "E_VM_FILE", "%s: a temporary file: %s", dir, strerror(errno));
		dirs_free(&dirs);
		return NULL;
	}
	pthread_mutex_lock(&ctf_lock);
	if (child) {
		ret = convert_child(dir, &dirs, tmp, st, err);
	} else {
		const char *tag = convert(&dirs, tmp, st, msg, sizeof(msg));

		ret = 0;
		if (tag) {
			vm_err_set(err, tag, "%s: %s", dir, msg);
			ret = -1;
		}
	}
	pthread_mutex_unlock(&ctf_lock);
	st->traces = dirs.n;
	dirs_free(&dirs);
	if (ret == 0 && (fflush(tmp) != 0 || fseek(tmp, 0, SEEK_SET) != 0)) {
		vm_err_set(err, "E_VM_FILE", "%s: the temporary file: %s", dir, strerror(errno));
		ret = -1;
	}
	if (ret) {
		fclose(tmp);
		return NULL;
	}
	snprintf(name, sizeof(name), "ctf:%s", dir);
	return vm_stream_open_file(name, tmp, err);
}

struct vm_stream *vm_stream_open_input(const char *spec, struct vm_ctf_stats *st,
				       struct vm_err *err)
{
	struct stat sb;

	if (st)
		memset(st, 0, sizeof(*st));
	if (strncmp(spec, "ctf:", 4) == 0)
		return vm_stream_open_ctf(spec + 4, true, st, err);
	if (stat(spec, &sb) == 0 && S_ISDIR(sb.st_mode))
		return vm_stream_open_ctf(spec, true, st, err);
	return vm_stream_open(spec, err);
}
