/* SPDX-License-Identifier: Apache-2.0 */
/*
 * weft's recorded event stream: JSON lines, one event a line, so that any tracer's events can
 * be fed to the VM analysis (docs/vm.md, "The stream format"):
 *
 *   {"time":1000,"cpu":0,"name":"kvm_exit","tid":4242,"pid":4240,
 *    "fields":{"exit_reason":30,"isa":1,"vcpu_id":0}}
 *
 *   time    nanoseconds on the stream's clock, an integer >= 0 (required)
 *   cpu     the CPU the event happened on, an integer >= 0 (required)
 *   name    the event's name, as the kernel's tracepoint is named (required, 1..63 bytes)
 *   tid     the thread that was running (required by every event this analysis uses)
 *   pid     its process (optional)
 *   fields  the tracepoint's fields by their kernel names (optional, an object)
 *
 * Blank lines and lines starting with '#' are comments.  Times must not decrease from one
 * line to the next: a stream out of order is refused with the line number, never re-sorted
 * (a merge of per-CPU buffers is sorted first, e.g. with `sort -s -n -k ...` on a time column
 * or by the tool that wrote it).
 *
 * Hostile input is refused with the file, the line and what is wrong, never a crash: a line is
 * at most VM_STREAM_LINE_MAX bytes, JSON is parsed by jansson (duplicate keys refused) and every
 * field is checked for its type and range before it is used.  The reader holds one line at a
 * time: memory does not grow with the file.
 */
#ifndef WEFT_VM_STREAM_H
#define WEFT_VM_STREAM_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define VM_STREAM_LINE_MAX 65536
#define VM_STREAM_FILE_MAX (64ULL << 30) /* a recorded stream: 64 GiB */
#define VM_NAME_MAX 64

/*
 * An error for the user: a stable tag (tests assert it), the place and what is wrong.
 *   E_VM_FILE      the file cannot be opened or read
 *   E_VM_JSON      a line is not a JSON object, or longer than VM_STREAM_LINE_MAX
 *   E_VM_FIELD     a required member is missing or has the wrong type or range
 *   E_VM_ORDER     time went backwards
 *   E_VM_LIMIT     a bound of the analysis was reached (vCPUs, threads, intervals, reasons)
 *   E_VM_NO_SYNC   a guest stream without synchronisation points (and no --assume-synced)
 *   E_VM_SYNC      synchronisation points that contradict each other
 *   E_VM_AMBIGUOUS several VMs in the host stream, the guest's not chosen (--vm-pid)
 *   E_VM_NOMEM     out of memory
 *   E_VM_CTF       a CTF trace babeltrace2 cannot read, or whose events lack what the stream
 *                  needs (a clock, a CPU)
 */
struct vm_err {
	const char *tag; /* NULL: no error */
	char msg[512];
};

void vm_err_set(struct vm_err *e, const char *tag, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

struct vm_event {
	int64_t time; /* ns */
	int64_t cpu;
	int64_t tid; /* -1 if absent */
	int64_t pid; /* -1 if absent */
	char name[VM_NAME_MAX];
	void *fields; /* the jansson object (json_t *), owned by the reader until the next event */
	unsigned long line; /* 1-based line of the file */
};

struct vm_stream;

/* Opens a stream file (a regular file, weft_file_open()'s rules); NULL with err set. */
struct vm_stream *vm_stream_open(const char *path, struct vm_err *err);
/* A stream in memory (tests, fuzzing): the buffer must outlive the stream. */
struct vm_stream *vm_stream_open_mem(const char *name, const char *buf, size_t len,
				     struct vm_err *err);
/* The next event: 1, 0 at the end, or -1 with err set (the file and line in its message). */
int vm_stream_next(struct vm_stream *s, struct vm_event *ev, struct vm_err *err);
/* Back to the first line (a second pass). 0 or -1 with err set. */
int vm_stream_rewind(struct vm_stream *s, struct vm_err *err);
const char *vm_stream_name(const struct vm_stream *s);
void vm_stream_close(struct vm_stream *s);
/* A stream over an open, seekable file (taken over: closed by vm_stream_close()); NULL with err
 * set (f closed). */
struct vm_stream *vm_stream_open_file(const char *name, FILE *f, struct vm_err *err);

/*
 * LTTng kernel (and LTTng-UST) CTF traces as a stream (vm/ctf.c): every trace below the
 * directory, read with libbabeltrace2 in a child process, its events in time order written as
 * the stream's JSON lines (event k of the trace is line k), so that the analysis has one input
 * format.  lttng-modules' names become the kernel's (kvm_x86_exit -> kvm_exit, prev_tid ->
 * prev_pid, ...; docs/vm.md, "LTTng CTF traces").  What it could not carry over is counted:
 */
struct vm_ctf_stats {
	uint64_t events; /* events read (all of them, written as lines) */
	uint64_t no_tid; /* kvm events dropped: no tid context, no sched_switch on their CPU yet */
	uint64_t discarded; /* events the tracer said it lost (discarded-events messages) */
	uint64_t traces; /* CTF traces found below the directory */
};
/* 0 < max_cpus: CPU numbers from 0 to VM_CTF_MAX_CPUS - 1 (a packet's cpu_id) */
#define VM_CTF_MAX_CPUS 8192
#define VM_CTF_MAX_FIELDS 64 /* payload fields of one event carried over */
#define VM_CTF_STR_MAX 256 /* bytes of one string field carried over */
struct vm_stream *vm_stream_open_ctf(const char *dir, bool child, struct vm_ctf_stats *st,
				     struct vm_err *err);
/* A reader process that writes nothing for this long is ended and the trace refused
 * (babeltrace2 loops forever on some malformed packets).  0: the default. */
#define VM_CTF_STALL_MS 10000u
void vm_ctf_set_stall_ms(unsigned ms);
/*
 * An input by name: "ctf:DIR" or a directory is a CTF trace (vm_stream_open_ctf() in a child
 * process), anything else a JSON-lines file.  st (may be NULL) is zeroed, then filled for CTF.
 */
struct vm_stream *vm_stream_open_input(const char *spec, struct vm_ctf_stats *st,
				       struct vm_err *err);

/*
 * A field of the event's "fields" as an unsigned integer (a JSON integer >= 0, or a
 * boolean as 0/1): 0, -ENOENT (absent) or -EINVAL (another type, or negative).
 */
int vm_event_u64(const struct vm_event *ev, const char *field, uint64_t *out);
/* A field as a signed integer: 0, -ENOENT or -EINVAL. */
int vm_event_s64(const struct vm_event *ev, const char *field, int64_t *out);
/* A string field (NULL if absent or not a string); valid until the next event. */
const char *vm_event_str(const struct vm_event *ev, const char *field);

#endif
