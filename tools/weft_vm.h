/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `weft vm`'s subcommands in their files: analyze in tools/weft_vm.c, record (the host query
 * set run live, written as a recorded stream) in tools/weft_vm_record.c, sync (live clock
 * synchronisation through a cluster) in tools/weft_vm_sync.c, live (the fused view computed
 * live from a cluster's stream queries) in tools/weft_vm_live.c, which reuses record's query
 * set, row conversion and stream writer and sync's submitting (declared below).
 */
#ifndef WEFT_TOOLS_WEFT_VM_H
#define WEFT_TOOLS_WEFT_VM_H
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "compiler/compiler.h"
#include "tools/weft_cluster.h"

/* `weft vm record ...` (argv[0] is "record"): a WEFT_EXIT_* status. */
int vm_record_cmd(int argc, char **argv);
/* `weft vm sync ...` (tools/weft_vm_sync.c): a guest's clock against its host's, live,
 * joined in a cluster's aggregator. */
int vm_sync_cmd(int argc, char **argv);
/* `weft vm live ...` (tools/weft_vm_live.c): the fused view computed live from stream queries
 * of a cluster's host and guest agents. */
int vm_live_cmd(int argc, char **argv);

/* ---- shared by record and live (tools/weft_vm_record.c) */

/* One query of the host's set: the stream event its rows become, the tracefs path of its
 * tracepoint when the kernel may lack it (a kvm one; NULL: always there), its text (no
 * `for`). */
struct vm_rq {
	const char *name;
	const char *tp;
	const char *query;
};
extern const struct vm_rq vm_record_queries[];
extern const size_t vm_record_nqueries;
/* Whether the kvm tracepoint of q is on this machine (always true for others). */
bool vm_rq_present(const struct vm_rq *q);

/* An event of a recorded stream being gathered: its time, its order of arrival (the sort is
 * stable by it), and the event as the stream writes it. */
struct vm_rec_ev {
	int64_t time;
	size_t seq;
	json_t *o;
};
/* A `weft run --format json` row of a query as a stream event named `name` (NULL if the row
 * is not one: its "end" line's lost rows are added to *lost). */
json_t *vm_record_row_event(const char *name, json_t *row, uint64_t *lost);
/* The VMs found (processes that called KVM_RUN) and their vCPU threads, on stderr. */
void vm_record_discovery(const struct vm_rec_ev *ev, size_t n);
/* Sorts ev by time (stable) and writes it as a recorded stream, with `lost` rows said as a
 * comment and a last weft_lost event.  0, or -EIO. */
int vm_record_write(FILE *out, struct vm_rec_ev *ev, size_t nev, size_t nqueries, uint64_t lost);

/* ---- shared by sync and live (tools/weft_vm_sync.c): one query submitted to some agents */

struct vm_side {
	const char *who; /* the command, for messages: "weft vm sync" */
	const char *what; /* "host", "guest", ... */
	char *text;
	struct compile_result res;
	struct diag_list dl;
	char *manifest;
	size_t manifest_len;
	uint64_t id;
	bool last;
	/* what comes while waiting for the submit's answer (other queries' rows and windows):
	 * handed to other(ctx, e), which takes it; NULL: dropped */
	void (*other)(void *ctx, Weft__Envelope *e);
	void *ctx;
};
/* Compiles s->text as `weft submit` does (diagnostics on stderr): a WEFT_EXIT_* status. */
int vm_side_compile(struct vm_side *s, int verbose);
/* Submits s, followed, limited to the agents named (pair_host: the host side of a VM
 * synchronisation pair, or 0); its id into s->id.  A WEFT_EXIT_* status. */
int vm_side_submit(struct aggd_client *cl, struct tool_cluster *tc, struct vm_side *s,
		   char **agents, size_t nagents, uint64_t pair_host);
void vm_side_cancel(struct aggd_client *cl, uint64_t id);
void vm_side_free(struct vm_side *s);
/* A USDT probe that stands in for the hypercall (--hypercall-source). */
bool vm_source_ok(const char *s);

/* The options `weft vm sync` and `weft vm live` share (weft_vm_sync.c): each command's own
 * options are numbered from VM_OPT_OWN on. */
#define VM_MAX_AGENTS 64
enum {
	VM_OPT_HOST_AGENT = 256,
	VM_OPT_GUEST_AGENT,
	VM_OPT_GUEST_BINARY,
	VM_OPT_VM_PID,
	VM_OPT_SOURCE,
	VM_OPT_FOR,
	VM_OPT_FORMAT,
	VM_OPT_OWN,
};
struct vm_pair {
	const char *who; /* "weft vm sync": the commands' words begin with it */
	char *hosts[VM_MAX_AGENTS], *guests[VM_MAX_AGENTS];
	size_t nhosts, nguests;
	const char *binary, *source, *dur; /* --guest-binary, --hypercall-source, --for */
	int vm_pid;
	bool json;
};
/* One of the shared options into o: 1 taken, 0 not one of them, -1 a bad value (said). */
int vm_pair_opt(struct vm_pair *o, int c, char *arg);
/* After the options: --guest-binary given and usable in a query; 0, or -1 (said). */
int vm_pair_binary_check(const struct vm_pair *o);
/* Before submitting: agents named on both sides; 0, or -1 (said). */
int vm_pair_agents_check(const struct vm_pair *o);
/* A duration for --every/--for (at least 1 ms), said on stderr if not. */
bool vm_duration_ok(const char *who, const char *opt, const char *arg);

#endif
