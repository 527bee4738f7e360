/* SPDX-License-Identifier: Apache-2.0 */
/*
 * babeltrace2 CTF traces read, for weft's two readers of LTTng traces: graph/import_ctf.c
 * (execution graphs from weft's LTTng-UST provider) and vm/ctf.c (the VM analysis' recorded
 * stream from lttng-modules' kernel events).  What they share is what does not depend on what
 * an event means:
 *   - the trace directories found under a path: every directory at most CTF_READ_DEPTH levels
 *     below it that holds a regular file named `metadata` (an LTTng session's output holds
 *     kernel/ and ust/uid/0/64-bit/), each entry of which is a regular file or a directory;
 *   - the component graph: one src.ctf.fs per trace directory, all their streams through one
 *     flt.utils.muxer (so that events come in time order whatever stream, one per CPU, each
 *     was written to), and a simple sink that hands every message to the reader's callback;
 *     babeltrace2's plugins loaded on first use and kept;
 *   - the field helpers: babeltrace2 checks none of its preconditions in its release builds,
 *     so a field's class type is checked before its accessor is called;
 *   - babeltrace2's error cause, which the readers put in their messages.
 * What each reader refuses, in what words, codes and tags, stays with it, as does its reader
 * process: babeltrace2 crashes on some hostile metadata, so each reads in a fork()ed child,
 * with a protocol back of its own (a graph; a stream and a verdict).
 *
 * babeltrace2's reference counts are not atomic, so a process reads one set of traces at a
 * time, whichever reader: ctf_read_plugins() and ctf_read_run() want ctf_read_lock() held.
 * A reader that forks holds it across fork(), so that no other thread is inside babeltrace2
 * then.  Only the two readers and graph/ctf_read.c include this header, and with it
 * libbabeltrace2's.
 */
#ifndef WEFT_GRAPH_CTF_READ_H
#define WEFT_GRAPH_CTF_READ_H
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "graph/bt_dl.h"
#include <jansson.h>

#define CTF_READ_DEPTH 8 /* how deep below the input trace directories are searched */
#define CTF_READ_CAUSE 384 /* bytes of babeltrace2's cause kept, its '\0' included */

/* ------------------------------------------------------------------ finding the traces */

struct ctf_read_dirs {
	char **v; /* the trace directories' paths, in strcmp() order */
	size_t n, cap;
};

/*
 * The trace directories at or below `path` (symbolic links to directories not followed; a
 * trace directory is not searched further, its index/ holds no trace) into d, which starts
 * zeroed and is freed with ctf_read_dirs_free() whatever this returns.  0 (d->n may be 0);
 * -E2BIG beyond max directories; -EINVAL when an entry of a trace directory is not a regular
 * file or a directory (a FIFO or a link to a device, on which babeltrace2 would block), its
 * path then in bad[] if bad is not NULL; -ENAMETOOLONG, -ENOMEM, or opendir()'s -errno for
 * `path` itself or a trace directory.
 */
int ctf_read_find(const char *path, size_t max, struct ctf_read_dirs *d, char *bad, size_t badsz);
void ctf_read_dirs_free(struct ctf_read_dirs *d);

/* ------------------------------------------------------------------ reading fields */

/* Whether f is a field (not NULL) of class type `type` or one derived from it. */
bool ctf_read_is(const bt_field *f, bt_field_class_type type);

/* The member `name` of structure field s, or NULL (s NULL or not a structure too). */
const bt_field *ctf_read_member(const bt_field *s, const char *name);

/* An integer (or enumeration) field of either signedness as int64; false if f is not an
 * integer.  An unsigned value above INT64_MAX is refused (false), or with wrap kept as its
 * two's complement. */
bool ctf_read_int(const bt_field *f, bool wrap, int64_t *v);

/* String field f as a JSON string (jansson wants UTF-8): at most max bytes of it, every byte
 * that is not UTF-8 (a cut may split a sequence) as '?', and with no_ctl the control bytes
 * below 0x20 too.  NULL when out of memory. */
json_t *ctf_read_text(const bt_field *f, size_t max, bool no_ctl);

/* ------------------------------------------------------------------ babeltrace2's error */

/* The message of the deepest cause of this thread's babeltrace2 error (what went wrong
 * first: cause 0, e.g. "Cannot create trace for `DIR`.") into buf, the error released; ""
 * if there is none; why libbabeltrace2 cannot be opened, if it cannot. */
void ctf_read_cause(char *buf, size_t size);

/* ------------------------------------------------------------------ the graph of components */

void ctf_read_lock(void);
void ctf_read_unlock(void);

/* Opens libbabeltrace2 (graph/bt_dl.h) and loads its ctf and utils plugins if not yet done:
 * false if any cannot be (the reason then for ctf_read_cause()).  Nothing of babeltrace2 is
 * used before it returned true. */
bool ctf_read_plugins(void);

/* How ctf_read_run() ended; for all but OK and STOPPED the fault says more. */
enum ctf_read_status {
	CTF_READ_OK, /* every message went to the callback */
	CTF_READ_STOPPED, /* the callback returned false: why is the caller's to say */
	CTF_READ_CLASSES, /* the plugins, src.ctf.fs, flt.utils.muxer or a graph cannot be had */
	CTF_READ_TRACE, /* src.ctf.fs refused a trace directory: the fault's what names it */
	CTF_READ_GRAPH, /* the muxer, a connection or the sink cannot be made: what says which */
	CTF_READ_AGAIN, /* babeltrace2 kept asking to retry */
	CTF_READ_FAILED, /* babeltrace2 failed while the graph ran */
	CTF_READ_NOMEM, /* babeltrace2 ran out of memory while the graph ran */
};

struct ctf_read_fault {
	/* For TRACE and GRAPH, what could not be done ("cannot make a muxer"); "" otherwise,
	 * where each reader has words of its own. */
	char what[PATH_MAX + 64];
	char cause[CTF_READ_CAUSE]; /* babeltrace2's cause (ctf_read_cause()), "" if none */
};

/* Called with every message, in time order; returns false to stop the reading (the caller
 * keeps why).  Messages of every type come: each reader picks those it reads. */
typedef bool (*ctf_read_fn)(const bt_message *msg, void *arg);

/* Reads the traces dirs[] (loading the plugins if not yet done): src.ctf.fs per trace ->
 * flt.utils.muxer -> fn(msg, arg).  The caller holds ctf_read_lock().  babeltrace2's error
 * is left clear on return. */
enum ctf_read_status ctf_read_run(const struct ctf_read_dirs *dirs, ctf_read_fn fn, void *arg,
				  struct ctf_read_fault *fault);

#endif
