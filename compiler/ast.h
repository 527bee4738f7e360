/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The query tree.  The parser builds it; semantic analysis annotates it in place (types,
 * resolved names, aggregate slots); the planner reads it.  All nodes of one query live in
 * one arena owned by struct ast_query and are freed together by ast_query_free().
 */
#ifndef WEFT_AST_H
#define WEFT_AST_H
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include "compiler/diag.h"
#include "probes/probes.h"

/* ---- types (set by sema) ---- */
enum type_kind {
	TY_NONE = 0, /* not yet typed */
	TY_INT, /* integer of `size` bytes, `is_signed` */
	TY_BOOL, /* result of a comparison or logic operator */
	TY_STR, /* bounded string of at most `size` bytes including NUL */
	TY_PTR, /* address: `user` says which address space */
	TY_STACK, /* a stack id: `user` for ustack, else kstack */
	TY_FLOAT, /* only constants (quantile levels) */
	TY_AGG, /* value of an aggregate */
	TY_STRUCT, /* a kernel struct or union in kernel memory (`btf`): only `.field` reads it */
	TY_INET, /* ntop(): an address of WEFT_INET_SIZE bytes (kernel/weft_abi.h), or as the
		  * argument of ntop() a u8[`size`] address field */
};

struct type {
	enum type_kind kind;
	uint16_t size;
	bool is_signed;
	bool user; /* TY_PTR/TY_STACK: user space */
	uint32_t btf; /* TY_PTR: the kernel struct it points to, TY_STRUCT: the struct (BTF id);
		       * 0: none (compiler/kbtf.h) */
};

/* ---- expressions ---- */
enum expr_kind {
	EXPR_INT, /* ival; unit says how it was written */
	EXPR_FLOAT, /* fval */
	EXPR_STR, /* sval */
	EXPR_NAME, /* sval: a built-in field, an argN, or a select alias */
	EXPR_MEMBER, /* lhs . sval (args.count) */
	EXPR_CALL, /* sval(args...): a function or an aggregate */
	EXPR_UNARY, /* op lhs */
	EXPR_BINARY, /* lhs op rhs */
	EXPR_LIKE, /* lhs like rhs(string literal) */
	EXPR_IN, /* lhs in (args...) */
	EXPR_CAST, /* cast(lhs as struct sval); ival 1 for `union` */
};

enum expr_op {
	OP_NONE,
	OP_ADD,
	OP_SUB,
	OP_MUL,
	OP_DIV,
	OP_MOD,
	OP_EQ,
	OP_NE,
	OP_LT,
	OP_LE,
	OP_GT,
	OP_GE,
	OP_AND,
	OP_OR,
	OP_NOT,
	OP_NEG,
};

enum int_unit { UNIT_NONE, UNIT_DURATION, UNIT_SIZE };

/* What a name resolved to (sema). */
enum builtin {
	BI_NONE,
	BI_TIME,
	BI_PID,
	BI_TID,
	BI_UID,
	BI_COMM,
	BI_CPU,
	BI_CGROUP,
	BI_HOST,
	BI_PROBE,
	BI_USTACK,
	BI_KSTACK,
	BI_RETVAL,
	BI_DURATION,
	BI_ARG, /* argN: aux = N */
	BI_FIELD, /* args.F: aux = field index in the source's probe catalog entry */
	BI_ALIAS, /* a select alias: aux = item index */
	BI_CURTASK, /* the current task, a struct task_struct pointer */
	BI_KMEMBER, /* lhs.sval of a kernel struct (BTF): aux = steps from the chain's root */
	BI_WALLTIME, /* lang-a: the event's wall-clock time (the agent adds the clock offset) */
	BI_END_FIELD, /* lang-a: end.args.F, a field of a span's end probe (sval: F) */
	BI__COUNT
};

/* Functions and aggregates (sema resolves EXPR_CALL names to these). */
enum func {
	FN_NONE,
	/* scalar functions */
	FN_STR,
	FN_LOG2,
	FN_BUCKET,
	FN_USYM,
	FN_KSYM,
	FN_NTOHS,
	FN_NTOHL,
	/* lang-a: numbers shown by name or in a unit at output (compiler/sema_names.c) */
	FN_SYSNAME,
	FN_SIGNAME,
	FN_ERRNAME,
	FN_ENUMNAME,
	FN_UNIT,
	FN_NTOP, /* an IPv4/IPv6 address, shown as text (a TY_INET value) */
	FN_SOCKPORT, /* the port of a sockaddr, host order */
	FN_JOIN, /* an argv (pointer to char pointers) joined into one string */
	FN_EXT, /* a function of the query's `using` file (compiler/ext.h); aux: its index */
	/* aggregates */
	FN_COUNT,
	FN_SUM,
	FN_MIN,
	FN_MAX,
	FN_AVG,
	FN_STDDEV,
	FN_HIST,
	FN_LHIST,
	FN_QUANTILE,
	FN_P50,
	FN_P90,
	FN_P99,
	FN_P999,
	FN_DISTINCT,
	FN__COUNT
};
#define FN_IS_AGG(f) ((f) >= FN_COUNT && (f) < FN__COUNT)

struct expr {
	enum expr_kind kind;
	struct src_loc loc;
	enum expr_op op;
	enum int_unit unit;
	int64_t ival;
	double fval;
	char *sval;
	struct expr *lhs, *rhs;
	struct expr **args;
	int nargs;

	/* set by sema */
	struct type ty;
	enum builtin bi;
	enum func fn;
	int aux; /* BI_ARG index, BI_FIELD index, BI_ALIAS item */
	int agg_slot; /* FN_IS_AGG: index into the plan's aggregate list, else -1 */
	bool is_const; /* a constant; integers and booleans folded into ival (sema) */

	/* set by the parser: levels in this subtree (a leaf is 1).  The parser refuses trees
	 * higher than PARSE_MAX_HEIGHT (parser.h), so every later pass may recurse freely. */
	int height;
};

/* ---- probes and sources ---- */
#define PROBE_MAX_PARTS 3

struct probe_spec {
	struct src_loc loc;
	char *text; /* as written, e.g. "tp:sched:sched_switch" */
	enum probe_kind kind;
	char *parts[PROBE_MAX_PARTS];
	int nparts;
	uint64_t offset; /* uprobe/kprobe +OFF */
	bool has_offset;
	struct src_loc offset_loc; /* the "+OFF" text, when has_offset */
	uint64_t hz; /* profile */
	uint64_t period_ns; /* interval */
	bool wild; /* some part contains '*' or '?' */

	/* set by sema: the resolved attach points (probes/probes.h) */
	struct probe_set *set;
};

struct source {
	struct src_loc loc;
	bool is_span;
	struct probe_spec start;
	struct probe_spec end; /* valid when has_end */
	bool has_end;
	struct expr *on; /* span key (the start's when end_on is set), or NULL: by thread */
	/* per-side span parts (lang-a): span(P1 [where C1] [on K1], P2 [where C2] [on K2]) */
	struct expr *end_on; /* the end's key when each side has its own, else NULL */
	struct expr *start_where; /* only starts that pass it begin a span, or NULL */
	struct expr *end_where; /* only ends that pass it end a span, or NULL */
};

struct group_key {
	struct expr *e;
	char *alias; /* NULL: named after the expression */
	struct src_loc alias_loc;
	char *name; /* sema: alias or a name made from the expression; owned by the arena */
};

struct select_item {
	struct expr *e;
	char *alias;
	struct src_loc alias_loc;
	char *name; /* sema: alias or a name made from the expression; owned by the arena */
};

#define AST_MAX_SOURCES 16
#define AST_MAX_GROUPS 8
#define AST_MAX_ITEMS 32

struct ast_query {
	struct src_loc loc;
	struct source *sources;
	int nsources;
	struct expr *where;
	struct group_key *groups;
	int ngroups;
	struct select_item *items;
	int nitems;
	struct expr *order; /* NULL: none */
	bool order_desc;
	struct src_loc order_loc;
	int64_t limit; /* 0: none */
	struct src_loc limit_loc;
	uint64_t every_ns; /* 0: once, at the end */
	struct src_loc every_loc;
	uint64_t for_ns; /* 0: until interrupted */
	struct src_loc for_loc;
	/* the graph form: `graph [sample P%]` instead of group by/select/order by/limit */
	bool graph;
	struct src_loc graph_loc;
	double sample; /* head-sample rate 0..1 (1 without `sample`) */
	struct src_loc sample_loc;
	/* `select ... format 'FMT'`: a stream's text rows (base/rowfmt.h); NULL: none */
	char *format;
	struct src_loc format_loc;

	/* sema */
	bool aggregating; /* some select item is an aggregate */
	struct kbtf *kbtf; /* kernel types, opened when the query reads kernel structs */

	/* `using 'FILE.bpf.c'` (compiler/ext.h): the path as written, its place, and what
	 * sema loaded from it (in the arena) */
	char *using_path;
	struct src_loc using_loc;
	struct ext_file *ext;

	struct arena *arena;
};

struct kbtf;

/* ---- arena ---- */
struct arena;
struct arena *arena_new(void);
void arena_free(struct arena *a);
void *arena_alloc(struct arena *a, size_t n); /* zeroed; NULL on failure */
char *arena_strndup(struct arena *a, const char *s, size_t n);
char *arena_strdup(struct arena *a, const char *s);

struct ast_query *ast_query_new(void);
void ast_query_free(struct ast_query *q);

/* Whether two expressions are the same expression as written: same structure, operators
 * and constants; names compared case-insensitively (keywords and built-ins are). */
bool expr_equal(const struct expr *a, const struct expr *b);

/* Printing, for `weft explain --dump=parse|sema` and tests. */
void ast_dump(const struct ast_query *q, FILE *out);
void expr_print(const struct expr *e, FILE *out); /* as query text, fully parenthesized */
const char *probe_kind_name(enum probe_kind k);
const char *builtin_name(enum builtin b);
const char *func_name(enum func f);
const char *expr_op_name(enum expr_op op);
const char *type_name(const struct type *t, char *buf, size_t sz);

#endif
