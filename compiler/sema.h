/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Semantic analysis: resolves every probe against the running kernel and the ELF files it
 * names (probes/), every name against the built-in fields, the probes' fields and the
 * select aliases, types every expression, and checks where aggregates may stand.  It
 * annotates the tree in place (expr.ty, .bi, .fn, .aux; probe_spec.set; ast_query.aggregating).
 */
#ifndef WEFT_SEMA_H
#define WEFT_SEMA_H
#include <sys/types.h>
#include "compiler/ast.h"

struct sema_opts {
	pid_t pid; /* -p PID, or 0 */
};

/* 0, or -EINVAL with diagnostics in dl. */
int sema_check(struct ast_query *q, const struct sema_opts *opts, struct diag_list *dl);

/* What a probe of weft's provider records in a graph query: WEFT_GREC_TASK_BEGIN ..
 * WEFT_GREC_EDGE (kernel/weft_abi.h), or -1 for any other probe. */
struct probe_target;
int sema_graph_probe_kind(const struct probe_target *t);
/* Whether kernel:sockets can read IPv6 sockets' addresses from this kernel's BTF (sock_common's
 * skc_v6_rcv_saddr and skc_v6_daddr); marks them for kbtf_emit() when it can. */
struct kbtf;
bool sema_ksock_ipv6(struct kbtf *k);
/* Whether kernel:sockets' programs can read the task's comm from this kernel's BTF
 * (task_struct.comm, char[16]); marks it for kbtf_emit() when they can. */
bool sema_ksock_comm(struct kbtf *k);
/* Whether kernel:sockets' target t is attached as a raw tracepoint (codegen.c: section
 * tp_btf/EVENT, one program a tracepoint, fields read from the arguments): every field of its
 * record is an argument or read from the socket on this kernel (its BTF).  False (a classic
 * tracepoint) otherwise, or when WEFT_RAW_TP=0 is set. */
bool sema_ksock_raw(struct kbtf *k, const struct probe_target *t);
/* Where field i of t is in a raw tracepoint program: the argument's index, or read from the
 * socket (argument 0), or SEMA_RAW_NONE. */
enum { SEMA_RAW_NONE = -1, SEMA_RAW_SK_FAMILY = -2, SEMA_RAW_SK_PROTOCOL = -3 };
int sema_ksock_raw_field(struct kbtf *k, const struct probe_target *t, int field);
/* Frees what sema attached to the tree (probe sets).  Safe on an unchecked tree. */
void sema_release(struct ast_query *q);

/* Step 1 of sema_check() (compiler/sema_probes.c): resolves every source's probes (pid: -p,
 * or 0) into probe_spec.set.  0, or -EINVAL with diagnostics in dl. */
/* Whether a span has the same probe on both sides (span(P on K1, P on K2)): one program then
 * runs at P, ending the span under the end key, then starting one under the start key. */
bool sema_span_same_probe(const struct source *src);

/* lang-a (compiler/sema_names.c): names and times.  The render (enum render of plan.h) an
 * expression asks for by its function (sysname() ...) or built-in (walltime), or -1. */
int sema_names_render(const struct expr *e);
/* The slot argument of that render into buf (enumname(): the enum's name), else "". */
void sema_names_arg(const struct expr *e, char *buf, size_t sz);
/* Checks a call of sysname/signame/errname/enumname/unit whose arguments are checked, and
 * types it; `kernel` when the kernel would need its value (E_NAME_PLACE). */
struct diag_list;
int sema_names_check_call(struct diag_list *dl, struct expr *e, bool kernel);
/* The same for the built-in walltime. */
int sema_names_check_walltime(struct diag_list *dl, struct expr *e, bool kernel);
/* A comparison of a duration with a size literal (E_UNIT_MISMATCH); 0 if fine. */
int sema_names_check_compare(struct diag_list *dl, const struct expr *e);

int sema_probes_resolve(struct ast_query *q, pid_t pid, struct diag_list *dl);

/* The probe spec whose fields a source's expressions see: the start probe. */
#define SOURCE_FIELDS(s) (&(s)->start)

/* The address an ntop()/sockport() argument holds, in its `aux` (compiler/sema.c). */
enum inet_arg {
	INET_ARG_V4INT = 1, /* an integer: an IPv4 address in network order (skc_daddr) */
	INET_ARG_BYTES4, /* a u8[4] tracepoint field (ty TY_INET of size 4) */
	INET_ARG_BYTES16, /* a u8[16] tracepoint field (ty TY_INET of size 16) */
	INET_ARG_SOCKADDR, /* a pointer to a sockaddr (user memory if ty.user) */
	INET_ARG_IN6, /* a kernel struct in6_addr member (BTF) */
};

/* A `format` clause checked against the select items' types (compiler/sema_format.c).
 * 0, or -EINVAL with placed diagnostics. */
int sema_format_check(struct ast_query *q, struct diag_list *dl);

/* A field of an attach point by name, or NULL. */
const struct probe_field *sema_target_field(const struct probe_target *t, const char *name);

#endif
