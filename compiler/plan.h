/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The plan: where each part of a checked query runs.
 *
 *   kernel   per event, per CPU: the predicate, the group key, the aggregate updates (all
 *            kernel-exact kinds), span matching, stream records into a ring buffer;
 *            aggregation maps double-buffered by the window epoch.
 *   agent    per window: flip, read and merge per-CPU values, turn kernel values into
 *            mergeable states, add agent-side keys (host), symbolize stacks and addresses,
 *            finalize (quantiles, distinct estimates, averages), order and limit for local
 *            output; or ship the partial states.
 *   cluster  merge partial states by key (associative, commutative), then finalize,
 *            order and limit (top-k after the merge: a per-host top-k would be wrong).
 *
 * struct plan is self-contained for the agent and aggregator: it is what the manifest
 * (manifest.c) serializes, and it holds no pointer into the query tree except the `e`
 * members, which only the code generator reads and the manifest never carries.
 */
#ifndef WEFT_PLAN_H
#define WEFT_PLAN_H
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include "kernel/aggstate.h"
#include "compiler/ast.h"
#include "probes/probes.h"

#define PLAN_VERSION 1
#define PLAN_MAX_PROGS 64
#define PLAN_MAX_TPF 1024 /* tracepoint fields read, all programs together */
#define PLAN_DEFAULT_GROUPS 10240
#define PLAN_MAX_GROUPS (1u << 22) /* weft run --max-groups, and what a manifest may ask */
#define PLAN_DEFAULT_SPANS 10240
#define PLAN_MAX_SPANS (1u << 24)
#define PLAN_DEFAULT_RINGBUF (4u << 20)
/* A graph query's: its records are submitted without a wakeup (WEFT_REC_SUBMIT_LAZY) and a
 * thread of the agent's empties the ring into memory as it fills (bpfrt_stream_reader_start()),
 * so the ring need only hold what comes while that thread waits (at most 50 ms, or until a
 * quarter of the ring waits); small, because on the development VM each record costs the
 * traced program about twice as much in a 16 MiB ring as in a 2 MiB one (docs/performance.md,
 * "Kernel edges"). */
#define PLAN_DEFAULT_GRAPH_RINGBUF (2u << 20)
#define PLAN_MIN_RINGBUF 4096u /* weft run --ringbuf-size, and what a manifest may ask */
#define PLAN_MAX_RINGBUF (1u << 30)
#define PLAN_MAX_KEY_SIZE 256
#define PLAN_MAX_VALUE_SIZE 32768 /* the kernel's limit for a per-CPU value */
#define PLAN_MAX_EVENT_SIZE 4096

/* How the agent turns a kernel value into text. */
enum render {
	RENDER_INT, /* signed decimal */
	RENDER_UINT, /* unsigned decimal */
	RENDER_HEX, /* pointers */
	RENDER_STR, /* NUL-terminated bytes */
	RENDER_USTACK, /* stack id in the user stack map, symbolized */
	RENDER_KSTACK, /* stack id in the kernel stack map, symbolized */
	RENDER_USYM, /* user address, symbolized */
	RENDER_KSYM, /* kernel address, symbolized */
	RENDER_PROBE, /* attach-point index (bpf cookie), rendered as the probe name */
	RENDER_HOST, /* added by the agent: the host name */
	RENDER_BOOL,
	/* lang-a: names and times, resolved at output */
	RENDER_SYSNAME, /* syscall number, as its name */
	RENDER_SIGNAME, /* signal number, as SIGNAME */
	RENDER_ERRNAME, /* errno (e or -e), as ENAME */
	RENDER_ENUM, /* an enumerator of the BTF enum the slot's `arg` names */
	RENDER_WALLTIME, /* ns since the epoch: RFC 3339 in text, a number in JSON */
	RENDER_NS, /* a duration in ns, shown in a unit: unit(e, 1ns) .. unit(e, 1s) */
	RENDER_US,
	RENDER_MS,
	RENDER_S,
	/* lang-b */
	RENDER_INET, /* ntop(): WEFT_INET_SIZE bytes (kernel/weft_abi.h), shown as an address */
	RENDER__COUNT
};

/* A fixed-layout value the kernel writes (a key column or a stream field). */
struct plan_slot {
	char name[64];
	enum render render;
	char arg[64]; /* RENDER_ENUM: the enum's name (lang-a); else empty */
	uint32_t offset; /* in the key / event record */
	uint32_t size;
	bool kernel; /* false: filled by the agent (host), occupies no kernel bytes */
	struct expr *e; /* codegen only; NULL after manifest_read */
};

struct plan_agg {
	char name[64]; /* output column */
	struct agg_spec spec; /* kernel/aggstate.h */
	uint32_t offset; /* in the kernel value struct */
	uint32_t size;
	struct expr *arg; /* NULL for count(); codegen only */
};

/* One attach point: a target of a source, with the program that runs there. */
struct plan_attach {
	struct probe_target target; /* copied, with fields = NULL (see target_idx) */
	int source; /* index of the source in the query */
	int target_idx; /* index in that source's probe set (codegen finds the fields there) */
	bool is_end; /* the end probe of a span */
	int prog; /* index into progs */
	uint64_t cookie; /* = index of this attach point; the `probe` builtin */
};

struct plan_prog {
	char name[32]; /* BPF program (function) name: "wp0", "wp1", ... */
	enum probe_kind kind;
	int source;
	bool is_end;
	int first_attach; /* a representative attach point (its field layout) */
	bool raw_tp; /* a raw tracepoint (sema_ksock_raw()): section tp_btf/EVENT, one attach
		      * point, the fields read from the arguments, the cookie a constant */
	int raw_nargs; /* raw_tp: the tracepoint's arguments in the BTF compiled against; the
			* agent refuses a kernel whose tracepoint passes another number */
};

/* A field of a classic tracepoint's record that a program reads, where the format compiled
 * against put it (codegen fills these; manifest line `tpfield`). */
struct plan_tpfield {
	int prog; /* index into progs */
	char name[64];
	uint16_t offset, size;
	bool is_signed;
};

struct plan_column {
	char name[64];
	bool is_agg;
	int idx; /* into keys[] / aggs[] (aggregating) or fields[] (stream) */
};

struct plan {
	uint32_t version;
	char *query; /* the text, for display and the cluster */
	char *format; /* a stream's `format` text (base/rowfmt.h) for text rows, or NULL */
	bool aggregating;

	struct plan_attach *attach;
	int nattach;
	struct plan_prog progs[PLAN_MAX_PROGS];
	int nprogs;
	/* the classic tracepoint fields the programs read: an agent refuses a kernel whose
	 * tracepoint lays one of them out otherwise (its own format, before loading) */
	struct plan_tpfield *tpf;
	int ntpf;

	/* aggregating: the key and value layouts of the aggregation map */
	struct plan_slot *keys;
	int nkeys;
	uint32_t key_size; /* kernel bytes, 8-aligned, >= 8 (a 1-group query keys on 0) */
	struct plan_agg *aggs;
	int naggs;
	uint32_t value_size;
	uint32_t max_groups;

	/* stream: the ring-buffer record layout (after weft_abi.h's record header) */
	struct plan_slot *fields;
	int nfields;
	uint32_t event_size;
	uint32_t ringbuf_bytes;

	/* the result, in select order */
	struct plan_column *cols;
	int ncols;
	int first_item_col; /* cols before it are group keys the select does not name */

	/* spans */
	bool has_spans;
	uint32_t max_spans;
	uint32_t span_save_size; /* bytes saved at span start for use at the end */

	bool uses_ustack, uses_kstack;

	int order_col; /* -1: none */
	bool order_desc;
	int64_t limit; /* 0: none */
	uint64_t every_ns, for_ns;
	pid_t pid; /* -p: the traced process; 0: all */

	/* a graph query (`graph`): a stream of struct weft_graph_rec (kernel/weft_abi.h) that
	 * agent/graphcap.c assembles; fields[] describe that record */
	bool graph;
	double sample; /* head-sample rate 0..1 */
};

/* Builds the plan of a checked query.  NULL with diagnostics (bounds) or errno. */
struct plan *plan_build(struct ast_query *q, pid_t pid, struct diag_list *dl);
void plan_free(struct plan *p);

/* A graph query's windows: *out becomes p as an aggregating plan of no keys, aggregates,
 * columns or probes, whose tables (agent/table.h) hold no groups, so that its windows are
 * scheduled, shipped and merged in the cluster like any query's while its graph travels in
 * GraphBatches.  out borrows p's strings: it lives no longer than p. */
void plan_graph_windows(const struct plan *p, struct plan *out);

/* A readable account of the plan, for `weft explain`. */
void plan_explain(const struct plan *p, FILE *out);

/* The manifest: the versioned serialized plan (manifest.c). */
int manifest_write(const struct plan *p, FILE *out);
/* Parses a manifest; NULL with errno (EINVAL for malformed or hostile input, with a reason
 * in err when err is not NULL). */
struct plan *manifest_read(const char *text, size_t len, char *err, size_t errsz);

const char *render_name(enum render r);

#endif
