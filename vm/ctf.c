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
 * CPU's stream they were written to, and each event is written as one JSON line (jansson).
 * The reading is graph/ctf_read.c's, shared with the graph importer (graph/import_ctf.c);
 * what follows is this file's:
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
 * conversion or graph import at a time per process (ctf_read_lock()).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "graph/bt_dl.h"
#include <jansson.h>

#include "base/text.h"
#include "graph/ctf_read.h"
#include "vm/stream.h"

#define CTF_MAX_TRACES 64 /* trace directories below one input */

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

	if (!ctf_read_is(pay, BT_FIELD_CLASS_TYPE_STRUCTURE))
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
		if (ctf_read_int(f, true, &iv))
			v = json_integer(iv);
		else if (ctf_read_is(f, BT_FIELD_CLASS_TYPE_BOOL))
			v = json_boolean(bt_field_bool_get_value(f));
		else if (ctf_read_is(f, BT_FIELD_CLASS_TYPE_STRING))
			v = ctf_read_text(f, VM_CTF_STR_MAX, true);
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
	const bt_field *f = ctf_read_member(ctx, a);

	if (!f)
		f = ctf_read_member(ctx, b);
	*out = -1;
	if (!f)
		return true;
	if (!ctf_read_int(f, true, out) || *out < 0) {
		conv_fail(c, "E_VM_CTF",
			  "event %" PRIu64 ": context field %s is not an integer >= 0",
			  c->st->events + 1, ctf_read_member(ctx, a) ? a : b);
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
	if (!ctf_read_int(ctf_read_member(pctx, "cpu_id"), true, &cpu) || cpu < 0 ||
	    cpu >= VM_CTF_MAX_CPUS) {
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

		if (dom && bt_value_get_type(dom) == BT_VALUE_TYPE_STRING &&
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

/* The sink's callback (graph/ctf_read.h): the conversion goes on while nothing failed. */
static bool conv_message(const bt_message *msg, void *data)
{
	struct conv *c = data;

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
	return !c->tag;
}

/* ------------------------------------------------------------------ the graph of components */

/* src.ctf.fs per trace -> flt.utils.muxer -> conv_message(); c->tag set on failure. */
static void conv_run(struct conv *c, const struct ctf_read_dirs *dirs)
{
	struct ctf_read_fault f;
	const char *what = f.what;
	char buf[80];

	switch (ctf_read_run(dirs, conv_message, c, &f)) {
	case CTF_READ_OK:
	case CTF_READ_STOPPED: /* c->tag says why */
		return;
	case CTF_READ_CLASSES:
		what = "babeltrace2's src.ctf.fs and flt.utils.muxer cannot be loaded";
		break;
	case CTF_READ_TRACE:
	case CTF_READ_GRAPH:
		break;
	case CTF_READ_AGAIN:
	case CTF_READ_FAILED:
	case CTF_READ_NOMEM:
		snprintf(buf, sizeof(buf), "babeltrace2 failed after event %" PRIu64,
			 c->st->events);
		what = buf;
		break;
	}
	/* a cause of at most 299 bytes, as it always was here */
	conv_fail(c, "E_VM_CTF", "%s%s%.299s", what, f.cause[0] ? ": " : "", f.cause);
}

/* Converts the traces of dir into out: NULL, or the error's tag with msg set. */
static const char *convert(const struct ctf_read_dirs *dirs, FILE *out, struct vm_ctf_stats *st,
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
static int convert_child(const char *dir, const struct ctf_read_dirs *dirs, FILE *tmp,
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
	struct ctf_read_dirs dirs = { 0 };
	char name[PATH_MAX + 8], msg[440];
	FILE *tmp = NULL;
	int ret;

	if (!st)
		st = &local;
	memset(st, 0, sizeof(*st));
	ret = ctf_read_find(dir, CTF_MAX_TRACES, &dirs, NULL, 0);
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
		ctf_read_dirs_free(&dirs);
		return NULL;
	}
	tmp = tmpfile();
	if (!tmp) {
		vm_err_set(err, "E_VM_FILE", "%s: a temporary file: %s", dir, strerror(errno));
		ctf_read_dirs_free(&dirs);
		return NULL;
	}
	ctf_read_lock();
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
	ctf_read_unlock();
	st->traces = dirs.n;
	ctf_read_dirs_free(&dirs);
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
