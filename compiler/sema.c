// SPDX-License-Identifier: Apache-2.0
/*
 * Semantic analysis.
 *
 * Order of work, each step reporting what it finds with a tagged diagnostic and going on
 * where it safely can, so that one run shows as many real mistakes as possible:
 *   1. probes (compiler/sema_probes.c, the one step that reads the running system): every
 *      source's probe is resolved by its provider against the running kernel (tracefs) or
 *      the ELF files it names; span sources get their end probe (the syscall exit
 *      tracepoint, the uretprobe, the kretprobe) unless one is given;
 *   2. names and types: `where`, the `on` keys, `group by`, `select` and `order by`, in that
 *      order, so that aliases are known before `order by` uses them;
 *   3. aggregate placement: none in `where`/`group by`, none nested, every plain select item
 *      of an aggregating query is a group key, `group by`/`order by` need aggregates;
 *   4. windows: `every` and `for` within bounds.
 * Steps 2 to 4 are here: they read only the tree and the resolved probes' fields.
 *
 * Why one file of ~1,800 lines: steps 2 to 4 share one private state (struct sema: the query,
 * the visible probe fields, the aliases known so far) and one recursive walk (check_expr(),
 * constant folding included) that every clause check calls back into; cut apart they would
 * need that state and walk as an internal API.  The kernel-struct (BTF) checks of member
 * access and casts, about 400 lines, are part of that walk and report through the same
 * state, so they stay too.  The step that reads the system is apart.
 *
 * Must never: touch the kernel beyond reading tracefs, ELF files and /proc; attach
 * anything; keep state between queries.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "compiler/ext.h"
#include "compiler/kbtf.h"
#include "compiler/sema.h"
#include "kernel/aggstate.h"
#include "kernel/weft_abi.h"
#include "kernel/weft_aggval.h"

#define MAX_STR 256
#define DEFAULT_STR 64
#define MIN_WINDOW_NS 10000000ULL /* 10 ms */
#define MAX_WINDOW_NS (24ULL * 3600 * 1000000000ULL) /* a day */
#define COLUMN_NAME_MAX 63 /* bytes of a column name the plan keeps (plan.h: name[64]) */

enum sema_ctx { CTX_WHERE, CTX_ON, CTX_GROUP, CTX_SELECT, CTX_ORDER };

struct sema {
	struct ast_query *q;
	struct diag_list *dl;
	pid_t pid;
	enum sema_ctx ctx;
	int agg_depth; /* > 0 inside an aggregate's arguments */
	int on_source; /* CTX_ON: the span source being checked */
	bool on_end; /* CTX_ON: checking against the end probe */
	bool struct_ok; /* the expression being checked is the left side of `.field` */
	bool end_fields; /* checking end.args.F: the end probes' fields are visible (lang-a) */
	bool btf_failed; /* E_BTF_NONE was reported */
};

static const struct type ty_none = { TY_NONE, 0, false, false, 0 };
static const struct type ty_bool = { TY_BOOL, 1, false, false, 0 };
static const struct type ty_u64 = { TY_INT, 8, false, false, 0 };
static const struct type ty_s64 = { TY_INT, 8, true, false, 0 };

/* ---------------------------------------------------------------- built-in fields */

struct builtin_def {
	const char *name;
	enum builtin bi;
	struct type ty;
};

static const struct builtin_def builtins[] = {
	{ "time", BI_TIME, { TY_INT, 8, false, false, 0 } },
	{ "pid", BI_PID, { TY_INT, 4, false, false, 0 } },
	{ "tid", BI_TID, { TY_INT, 4, false, false, 0 } },
	{ "uid", BI_UID, { TY_INT, 4, false, false, 0 } },
	{ "comm", BI_COMM, { TY_STR, 16, false, false, 0 } },
	{ "cpu", BI_CPU, { TY_INT, 4, false, false, 0 } },
	{ "cgroup", BI_CGROUP, { TY_INT, 8, false, false, 0 } },
	{ "host", BI_HOST, { TY_STR, 64, false, false, 0 } },
	{ "probe", BI_PROBE, { TY_INT, 8, false, false, 0 } },
	{ "ustack", BI_USTACK, { TY_STACK, 4, false, true, 0 } },
	{ "kstack", BI_KSTACK, { TY_STACK, 4, false, false, 0 } },
	{ "retval", BI_RETVAL, { TY_INT, 8, true, false, 0 } },
	{ "duration", BI_DURATION, { TY_INT, 8, false, false, 0 } },
	{ "curtask", BI_CURTASK, { TY_PTR, 8, false, false, 0 } },
	{ "walltime", BI_WALLTIME, { TY_INT, 8, false, false, 0 } }, /* lang-a */
};

struct func_def {
	const char *name;
	enum func fn;
	int min_args, max_args;
};

static const struct func_def funcs[] = {
	{ "str", FN_STR, 1, 2 },
	{ "log2", FN_LOG2, 1, 1 },
	{ "bucket", FN_BUCKET, 2, 2 },
	{ "usym", FN_USYM, 1, 1 },
	{ "ksym", FN_KSYM, 1, 1 },
	{ "count", FN_COUNT, 0, 0 },
	{ "sum", FN_SUM, 1, 1 },
	{ "min", FN_MIN, 1, 1 },
	{ "max", FN_MAX, 1, 1 },
	{ "avg", FN_AVG, 1, 1 },
	{ "stddev", FN_STDDEV, 1, 1 },
	{ "hist", FN_HIST, 1, 1 },
	{ "lhist", FN_LHIST, 4, 4 },
	{ "quantile", FN_QUANTILE, 2, 2 },
	{ "p50", FN_P50, 1, 1 },
	{ "p90", FN_P90, 1, 1 },
	{ "p99", FN_P99, 1, 1 },
	{ "p999", FN_P999, 1, 1 },
	{ "distinct", FN_DISTINCT, 1, 1 },
	{ "ntohs", FN_NTOHS, 1, 1 },
	{ "ntohl", FN_NTOHL, 1, 1 },
	/* lang-a */
	{ "sysname", FN_SYSNAME, 1, 1 },
	{ "signame", FN_SIGNAME, 1, 1 },
	{ "errname", FN_ERRNAME, 1, 1 },
	{ "enumname", FN_ENUMNAME, 2, 2 },
	{ "unit", FN_UNIT, 2, 2 },
	/* lang-b */
	{ "ntop", FN_NTOP, 1, 1 },
	{ "sockport", FN_SOCKPORT, 1, 1 },
	{ "join", FN_JOIN, 1, 2 },
};

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

const struct probe_field *sema_target_field(const struct probe_target *t, const char *name)
{
	for (int i = 0; i < t->nfields; i++)
		if (strcmp(t->fields[i].name, name) == 0)
			return &t->fields[i];
	return NULL;
}

/* ---------------------------------------------------------------- names */

static bool kind_has_args(enum probe_kind k)
{
	return k == PROBE_UPROBE || k == PROBE_URETPROBE || k == PROBE_USDT || k == PROBE_KPROBE ||
	       k == PROBE_KRETPROBE;
}

static bool kind_is_user(enum probe_kind k)
{
	return k == PROBE_UPROBE || k == PROBE_URETPROBE || k == PROBE_USDT;
}

/* The probe specs whose fields an expression in the current context sees. */
static int visible_specs(struct sema *s, const struct probe_spec **out, int max)
{
	int n = 0;

	if (s->end_fields) {
		for (int i = 0; i < s->q->nsources && n < max; i++)
			out[n++] = &s->q->sources[i].end;
		return n;
	}
	if (s->ctx == CTX_ON) {
		struct source *src = &s->q->sources[s->on_source];

		out[n++] = s->on_end ? &src->end : &src->start;
		return n;
	}
	for (int i = 0; i < s->q->nsources && n < max; i++)
		out[n++] = &s->q->sources[i].start;
	return n;
}

static struct type field_type(const struct probe_field *f)
{
	struct type t = ty_none;

	switch (f->kind) {
	case FIELD_INT:
		t.kind = TY_INT;
		t.size = f->size;
		t.is_signed = f->is_signed;
		break;
	case FIELD_PTR:
		t.kind = TY_PTR;
		t.size = 8;
		t.user = f->user;
		break;
	case FIELD_CHARS:
		t.kind = TY_STR;
		t.size = f->size;
		break;
	case FIELD_DATA_LOC:
		t.kind = TY_STR;
		t.size = DEFAULT_STR;
		break;
	case FIELD_ARRAY:
		break;
	}
	return t;
}

static void list_fields(struct diag *d, const struct probe_target *t)
{
	char buf[900];
	size_t off = 0;

	buf[0] = 0;
	for (int i = 0; i < t->nfields && off < sizeof(buf) - 80; i++)
		off += snprintf(buf + off, sizeof(buf) - off, "%sargs.%s", i ? ", " : "",
				t->fields[i].name);
	if (t->nfields == 0)
		diag_fix(d, "%s has no argument fields", t->name);
	else
		diag_fix(d, "fields of %s: %s", t->name, buf);
}

static int check_expr(struct sema *s, struct expr *e);
static int check_kmember(struct sema *s, struct expr *e);

static int check_args_member(struct sema *s, struct expr *e);

/* Whether e is `end.args`: the fields of a span's end probe follow (lang-a). */
static bool is_end_args(const struct expr *e)
{
	return e->kind == EXPR_MEMBER && strcmp(e->sval, "args") == 0 &&
	       e->lhs->kind == EXPR_NAME && strcasecmp(e->lhs->sval, "end") == 0;
}

/* end.args.F: a field of the end probe of every source, all spans, read at the end. */
static int check_end_member(struct sema *s, struct expr *e)
{
	int rc;

	if (s->ctx == CTX_ON) {
		diag_fix(diag_error(s->dl, DIAG_E_END_FIELD, e->loc,
				    "a span side's `where` and `on` read that side's own probe"),
			 "write args.%s", e->sval);
		return -EINVAL;
	}
	for (int i = 0; i < s->q->nsources; i++)
		if (!s->q->sources[i].is_span) {
			diag_fix(diag_error(s->dl, DIAG_E_END_FIELD, e->loc,
					    "end.args.%s: only a span has an end probe", e->sval),
				 "pair the probes: from span(START, END) ... select end.args.%s",
				 e->sval);
			return -EINVAL;
		}
	s->end_fields = true;
	rc = check_args_member(s, e);
	s->end_fields = false;
	if (rc == 0)
		e->bi = BI_END_FIELD;
	return rc;
}

static int check_member(struct sema *s, struct expr *e)
{
	if (is_end_args(e->lhs))
		return check_end_member(s, e);
	if (e->lhs->kind != EXPR_NAME || strcmp(e->lhs->sval, "args") != 0)
		return check_kmember(s, e);
	return check_args_member(s, e);
}

/* args.F (or, with s->end_fields, end.args.F) in the probes visible here. */
static int check_args_member(struct sema *s, struct expr *e)
{
	const struct probe_spec *specs[AST_MAX_SOURCES];
	int n = visible_specs(s, specs, AST_MAX_SOURCES);
	struct type t = ty_none;
	const char *fname = e->sval;

	for (int i = 0; i < n; i++) {
		const struct probe_spec *sp = specs[i];

		if (!sp->set)
			return -EINVAL; /* already reported */
		if (sp->kind != PROBE_TRACEPOINT && sp->kind != PROBE_SYSCALL) {
			struct diag *d = diag_error(s->dl, DIAG_E_FIELD_NO_ARGS, e->loc,
						    "%s probes have no `args` fields",
						    probe_kind_name(sp->kind));

			if (kind_has_args(sp->kind))
				diag_fix(d, "use arg0, arg1, ... for the arguments of %s",
					 sp->text);
			return -EINVAL;
		}
		for (int j = 0; j < sp->set->n; j++) {
			const struct probe_target *tg = &sp->set->v[j];
			const struct probe_field *f = sema_target_field(tg, fname);
			struct type ft;

			if (!f) {
				struct diag *d;

				if (n == 1 && sp->set->n == 1) {
					d = diag_error(s->dl, DIAG_E_FIELD_UNKNOWN, e->loc,
						       "%s has no field '%s'", tg->name, fname);
				} else {
					d = diag_error(
						s->dl, DIAG_E_FIELD_NOT_COMMON, e->loc,
						"field '%s' is not in every probe: %s lacks it",
						fname, tg->name);
				}
				list_fields(d, tg);
				return -EINVAL;
			}
			ft = field_type(f);
			if (ft.kind == TY_NONE) {
				diag_error(
					s->dl, DIAG_E_FIELD_UNKNOWN, e->loc,
					"field '%s' of %s is an array (%s), which queries cannot use",
					fname, tg->name, f->ctype);
				return -EINVAL;
			}
			if (t.kind == TY_NONE) {
				t = ft;
			} else if (t.kind != ft.kind) {
				diag_error(s->dl, DIAG_E_FIELD_NOT_COMMON, e->loc,
					   "field '%s' has different types in the matched probes",
					   fname);
				return -EINVAL;
			} else if (ft.size > t.size) {
				t.size = ft.size;
			}
		}
	}
	e->bi = BI_FIELD;
	e->ty = t;
	return 0;
}

/* ---------------------------------------------------------------- kernel structs (BTF) */

/* The kernel's types, opened once per query; NULL after E_BTF_NONE (reported once). */
static struct kbtf *sema_kbtf(struct sema *s, struct src_loc loc)
{
	const char *path = KBTF_VMLINUX;

	if (s->q->kbtf || s->btf_failed)
		return s->q->kbtf;
	s->q->kbtf = kbtf_open(&path);
	if (!s->q->kbtf) {
		int err = errno;

		s->btf_failed = true;
		diag_fix(diag_error(s->dl, DIAG_E_BTF_NONE, loc,
				    "kernel struct fields need the kernel's BTF, and %s cannot be "
				    "read (%s)",
				    path, strerror(err)),
			 "run on a kernel built with CONFIG_DEBUG_INFO_BTF=y, or set WEFT_BTF to "
			 "the BTF file of the kernel the query will run on");
	}
	return s->q->kbtf;
}

/* The type of a pointer to struct/union `id`, or E_BTF_STRUCT with near names. */
static int resolve_struct(struct sema *s, struct src_loc loc, const char *name, bool is_union,
			  struct type *t)
{
	struct kbtf *k = sema_kbtf(s, loc);
	const char *near[3];
	struct diag *d;
	uint32_t id;
	int nn;

	if (!k)
		return -EINVAL;
	id = kbtf_find(k, name, is_union);
	if (id) {
		*t = (struct type){ TY_PTR, 8, false, false, id };
		return 0;
	}
	d = diag_error(s->dl, DIAG_E_BTF_STRUCT, loc, "the kernel has no %s %s",
		       is_union ? "union" : "struct", name);
	nn = kbtf_near_types(k, name, is_union, near, 3);
	if (nn == 1)
		diag_fix(d, "did you mean %s %s?", is_union ? "union" : "struct", near[0]);
	else if (nn > 1)
		diag_fix(d, "did you mean one of: %s, %s%s%s?", near[0], near[1],
			 nn > 2 ? ", " : "", nn > 2 ? near[2] : "");
	else if (kbtf_find(k, name, !is_union))
		diag_fix(d, "it is a %s: write cast(... as %s %s)", is_union ? "struct" : "union",
			 is_union ? "struct" : "union", name);
	return -EINVAL;
}

/* cast(E as struct NAME): E is a kernel address (a pointer field, an untyped register, or a
 * 64-bit integer such as another cast or a pointer member); the result points to NAME. */
static int check_cast(struct sema *s, struct expr *e)
{
	struct expr *a = e->lhs;
	char buf[32];

	if (check_expr(s, a))
		return -EINVAL;
	if (a->ty.kind == TY_PTR && a->ty.user) {
		diag_fix(
			diag_error(s->dl, DIAG_E_CAST_ARG, a->loc,
				   "cast(... as struct %s) reads kernel memory, and this is a "
				   "user-space address",
				   e->sval),
			"cast a kernel pointer: a tracepoint field such as args.sk, or a member of "
			"curtask");
		return -EINVAL;
	}
	if (a->ty.kind != TY_PTR && !(a->ty.kind == TY_INT && a->ty.size == 8)) {
		diag_fix(diag_error(s->dl, DIAG_E_CAST_ARG, a->loc,
				    "cast() takes a kernel address, not %s",
				    type_name(&a->ty, buf, sizeof(buf))),
			 "cast a pointer-valued field, e.g. cast(args.sk as struct sock)");
		return -EINVAL;
	}
	return resolve_struct(s, e->loc, e->sval, e->ival != 0, &e->ty);
}

/* The struct a tracepoint field points to by the C type of its format ("struct cred *",
 * "const struct user_namespace *"), or 0 with name[0] == 0 when it is no struct pointer. */
static void field_struct_name(const struct sema *s, const struct expr *f, char *name, size_t sz,
			      bool *is_union)
{
	const struct probe_spec *specs[AST_MAX_SOURCES];
	int n = visible_specs((struct sema *)s, specs, AST_MAX_SOURCES);
	const struct probe_field *pf = NULL;
	const char *p;
	size_t len;

	name[0] = 0;
	for (int i = 0; i < n && !pf; i++)
		if (specs[i]->set && specs[i]->set->n)
			pf = sema_target_field(&specs[i]->set->v[0], f->sval);
	if (!pf || pf->kind != FIELD_PTR)
		return;
	p = pf->ctype;
	if (strncmp(p, "const ", 6) == 0)
		p += 6;
	if (strncmp(p, "struct ", 7) == 0) {
		*is_union = false;
		p += 7;
	} else if (strncmp(p, "union ", 6) == 0) {
		*is_union = true;
		p += 6;
	} else {
		return;
	}
	len = strcspn(p, " *");
	if (len == 0 || len >= sz || strcmp(p + len + strspn(p + len, " "), "*") != 0)
		return; /* not exactly one level of pointer */
	memcpy(name, p, len);
	name[len] = 0;
}

/* `.field` on a kernel struct: a typed pointer (cast, curtask, a pointer member, a tracepoint
 * field whose format says `struct X *`) or an embedded struct. */
static int check_kmember(struct sema *s, struct expr *e)
{
	struct expr *l = e->lhs;
	struct type lt;
	struct kbtf_member m;
	struct kbtf *k;
	char tn[96], list[600];
	int depth;

	s->struct_ok = true;
	if (check_expr(s, l))
		return -EINVAL;
	lt = l->ty;
	depth = l->kind == EXPR_MEMBER && l->bi == BI_KMEMBER ? l->aux + 1 : 1;
	if (lt.kind == TY_PTR && !lt.btf && l->kind == EXPR_MEMBER && l->bi == BI_FIELD &&
	    !lt.user) {
		char name[64];
		bool is_union = false;

		field_struct_name(s, l, name, sizeof(name), &is_union);
		if (name[0] && resolve_struct(s, l->loc, name, is_union, &lt))
			return -EINVAL;
		l->ty = lt;
	}
	if (lt.kind == TY_PTR && !lt.btf && l->bi == BI_CURTASK &&
	    resolve_struct(s, l->loc, "task_struct", false, &lt))
		return -EINVAL;
	if (lt.kind == TY_PTR && l->bi == BI_CURTASK)
		l->ty = lt;
	if (!((lt.kind == TY_PTR || lt.kind == TY_STRUCT) && lt.btf)) {
		struct diag *d;
		char buf[32];

		if (l->kind == EXPR_NAME && l->bi != BI_CURTASK) {
			d = diag_error(
				s->dl, DIAG_E_BTF_NOT_STRUCT, e->loc,
				"`%s` has no fields: only args, curtask and kernel structs do",
				l->sval);
			diag_fix(d,
				 "write args.FIELD for a tracepoint field, or cast(%s as struct "
				 "NAME).%s for a kernel pointer",
				 l->sval, e->sval);
			return -EINVAL;
		}
		d = diag_error(s->dl, DIAG_E_BTF_NOT_STRUCT, e->loc,
			       "'.%s' needs a kernel struct on its left, not %s", e->sval,
			       lt.kind == TY_PTR ? "an untyped pointer" :
						   type_name(&lt, buf, sizeof(buf)));
		if (lt.kind == TY_PTR && !lt.user)
			diag_fix(d, "say what it points to: cast(EXPR as struct NAME).%s", e->sval);
		return -EINVAL;
	}
	if (depth > KBTF_MAX_DEPTH) {
		diag_fix(diag_error(s->dl, DIAG_E_BTF_DEPTH, e->loc,
				    "a chain of more than %d fields", KBTF_MAX_DEPTH),
			 "each step may read kernel memory; start a shorter chain with cast()");
		return -EINVAL;
	}
	k = s->q->kbtf;
	kbtf_type_name(k, lt.btf, tn, sizeof(tn));
	if (kbtf_member(k, lt.btf, e->sval, &m) != 0) {
		const char *near[3];
		char hint[128];
		struct diag *d = diag_error(s->dl, DIAG_E_BTF_FIELD, e->loc, "%s has no field '%s'",
					    tn, e->sval);
		int nn = kbtf_near_members(k, lt.btf, e->sval, near, 3);

		if (kbtf_member_hint(k, lt.btf, e->sval, hint, sizeof(hint)))
			diag_fix(d, "it is in an embedded struct: write .%s.%s", hint, e->sval);
		else if (nn == 1)
			diag_fix(d, "did you mean '%s'?", near[0]);
		else if (nn > 1)
			diag_fix(d, "did you mean one of: %s, %s%s%s?", near[0], near[1],
				 nn > 2 ? ", " : "", nn > 2 ? near[2] : "");
		else {
			kbtf_list_members(k, lt.btf, list, sizeof(list));
			diag_fix(d, "fields of %s: %s", tn, list);
		}
		return -EINVAL;
	}
	e->bi = BI_KMEMBER;
	e->aux = depth;
	switch (m.kind) {
	case KBTF_INT:
		e->ty = (struct type){ TY_INT, (uint16_t)m.size, m.is_signed, false, 0 };
		return 0;
	case KBTF_PTR:
		e->ty = (struct type){ TY_PTR, 8, false, false, m.type_id };
		e->ival = m.ptr_to_char; /* str() may read it */
		return 0;
	case KBTF_COMPOSITE:
		e->ty = (struct type){ TY_STRUCT, 0, false, false, m.type_id };
		return 0;
	case KBTF_CHARS:
		/* N chars and room for the NUL a full array lacks: a string filling the array is
		 * then not noted as cut (string_truncated), one without a NUL in it is */
		e->ty = (struct type){
			TY_STR, (uint16_t)(m.size < KBTF_MAX_STR ? m.size + 1 : KBTF_MAX_STR),
			false, false, 0
		};
		return 0;
	case KBTF_BITFIELD:
		diag_fix(diag_error(s->dl, DIAG_E_BTF_BITFIELD, e->loc,
				    "%s.%s is a bitfield (%u bits), which queries cannot read", tn,
				    e->sval, m.size),
			 "read a whole member instead");
		return -EINVAL;
	case KBTF_OTHER:
		diag_error(s->dl, DIAG_E_BTF_TYPE, e->loc, "%s.%s is %s, which queries cannot read",
			   tn, e->sval, m.what);
		return -EINVAL;
	}
	return -EINVAL;
}

/* argN: uprobes/kprobes 0..5, usdt per notes. */
static int check_argn(struct sema *s, struct expr *e, int idx)
{
	const struct probe_spec *specs[AST_MAX_SOURCES];
	int n = visible_specs(s, specs, AST_MAX_SOURCES);
	struct type t = ty_s64;

	for (int i = 0; i < n; i++) {
		const struct probe_spec *sp = specs[i];

		if (!sp->set)
			return -EINVAL;
		if (!kind_has_args(sp->kind)) {
			struct diag *d =
				diag_error(s->dl, DIAG_E_ARG_INDEX, e->loc,
					   "%s probes have no argN", probe_kind_name(sp->kind));

			if (sp->kind == PROBE_TRACEPOINT || sp->kind == PROBE_SYSCALL)
				list_fields(d, &sp->set->v[0]);
			return -EINVAL;
		}
		for (int j = 0; j < sp->set->n; j++) {
			const struct probe_target *tg = &sp->set->v[j];

			if (idx >= tg->nargs) {
				diag_fix(diag_error(s->dl, DIAG_E_ARG_INDEX, e->loc,
						    "%s has %d argument%s: arg%d does not exist",
						    tg->name, tg->nargs, tg->nargs == 1 ? "" : "s",
						    idx),
					 tg->nargs ? "use arg0 .. arg%d" : "this probe has none",
					 tg->nargs - 1);
				return -EINVAL;
			}
			if (sp->kind == PROBE_USDT && idx < 12 && tg->arg_size[idx] &&
			    tg->arg_size[idx] < 8) {
				t.size = tg->arg_size[idx];
				t.is_signed = tg->arg_signed[idx];
			}
		}
	}
	e->bi = BI_ARG;
	e->aux = idx;
	e->ty = t;
	return 0;
}

static bool spec_has_retval(const struct probe_spec *sp)
{
	if (!sp->set)
		return false;
	for (int j = 0; j < sp->set->n; j++)
		if (!sp->set->v[j].has_retval)
			return false;
	return true;
}

/* Whether the value being checked is one the kernel must compute (a filter, a span key, an
 * aggregate's argument), so that names and times resolved at output cannot be used. */
static bool sema_at_output_only(const struct sema *s)
{
	return s->ctx == CTX_WHERE || s->ctx == CTX_ON || s->agg_depth > 0;
}

static int check_builtin(struct sema *s, struct expr *e, const struct builtin_def *b)
{
	e->bi = b->bi;
	e->ty = b->ty;
	switch (b->bi) {
	case BI_HOST:
		if (s->ctx == CTX_WHERE || s->ctx == CTX_ON || s->agg_depth) {
			diag_fix(diag_error(s->dl, DIAG_E_HOST_PLACE, e->loc,
					    "`host` is known to the agent, not to the kernel"),
				 "use host in `group by` or in a select without aggregates");
			return -EINVAL;
		}
		return 0;
	case BI_WALLTIME:
		return sema_names_check_walltime(s->dl, e, sema_at_output_only(s));
	case BI_DURATION:
		if (s->ctx == CTX_ON)
			goto no_span;
		for (int i = 0; i < s->q->nsources; i++)
			if (!s->q->sources[i].is_span)
				goto no_span;
		return 0;
	case BI_RETVAL:
		if (s->ctx == CTX_ON) {
			if (s->on_end && spec_has_retval(&s->q->sources[s->on_source].end))
				return 0;
			goto no_ret;
		}
		for (int i = 0; i < s->q->nsources; i++) {
			struct source *src = &s->q->sources[i];
			const struct probe_spec *sp = src->is_span ? &src->end : &src->start;

			if (!spec_has_retval(sp))
				goto no_ret;
		}
		return 0;
	default:
		return 0;
	}
no_span:
	diag_fix(diag_error(s->dl, DIAG_E_DURATION_NO_SPAN, e->loc,
			    "`duration` is only known for span(...) sources"),
		 "pair entry and return: from span(PROBE) ...");
	return -EINVAL;
no_ret:
	diag_fix(diag_error(s->dl, DIAG_E_RETVAL_NO_RETURN, e->loc,
			    "`retval` is only known where a probe fires on return"),
		 "use uretprobe:..., or span(syscall:NAME) / span(uprobe:BIN:FUNC)");
	return -EINVAL;
}

static int check_name(struct sema *s, struct expr *e)
{
	const char *name = e->sval;
	const char *cands[ARRAY_SIZE(builtins) + AST_MAX_ITEMS + AST_MAX_GROUPS + 2];
	const char *near[3];
	int nc = 0, nn;
	struct diag *d;

	for (size_t i = 0; i < ARRAY_SIZE(builtins); i++)
		if (strcasecmp(builtins[i].name, name) == 0)
			return check_builtin(s, e, &builtins[i]);
	if (strncmp(name, "arg", 3) == 0 && name[3] >= '0' && name[3] <= '9') {
		char *end;
		long idx = strtol(name + 3, &end, 10);

		if (*end == 0 && idx < 64)
			return check_argn(s, e, (int)idx);
	}
	/* group aliases are visible in select and order by; select aliases in order by */
	if (s->ctx == CTX_SELECT || s->ctx == CTX_ORDER) {
		for (int i = 0; i < s->q->ngroups; i++) {
			struct group_key *g = &s->q->groups[i];

			if (g->alias && strcmp(g->alias, name) == 0) {
				e->bi = BI_ALIAS;
				e->aux = -1 - i; /* negative: a group key */
				e->ty = g->e->ty;
				return 0;
			}
		}
	}
	if (s->ctx == CTX_ORDER) {
		for (int i = 0; i < s->q->nitems; i++) {
			struct select_item *it = &s->q->items[i];

			if (it->name && strcmp(it->name, name) == 0) {
				e->bi = BI_ALIAS;
				e->aux = i;
				e->ty = it->e->ty;
				return 0;
			}
		}
	}
	if (strcasecmp(name, "end") == 0) {
		diag_fix(diag_error(s->dl, DIAG_E_END_FIELD, e->loc,
				    "`end` is followed by .args.F: a field of a span's end probe"),
			 "e.g. end.args.next_pid; end.comm and other built-ins are not supported");
		return -EINVAL;
	}
	if (strcmp(name, "args") == 0) {
		d = diag_error(s->dl, DIAG_E_NAME_UNKNOWN, e->loc,
			       "`args` is not a value; name one of its fields");
		diag_fix(d, "write args.FIELD (see `weft list -v PROBE`)");
		return -EINVAL;
	}
	for (size_t i = 0; i < ARRAY_SIZE(builtins); i++)
		cands[nc++] = builtins[i].name;
	for (int i = 0; i < s->q->ngroups; i++)
		if (s->q->groups[i].alias)
			cands[nc++] = s->q->groups[i].alias;
	if (s->ctx == CTX_ORDER)
		for (int i = 0; i < s->q->nitems; i++)
			if (s->q->items[i].name)
				cands[nc++] = s->q->items[i].name;
	d = diag_error(s->dl, DIAG_E_NAME_UNKNOWN, e->loc, "unknown name '%s'", name);
	nn = diag_near(name, cands, nc, near, 3);
	if (nn == 1)
		diag_fix(d, "did you mean '%s'?", near[0]);
	else if (nn > 1)
		diag_fix(d, "did you mean one of: %s%s%s%s%s?", near[0], ", ", near[1],
			 nn > 2 ? ", " : "", nn > 2 ? near[2] : "");
	return -EINVAL;
}

/* ---------------------------------------------------------------- expressions */

static bool is_int(const struct type *t)
{
	return t->kind == TY_INT;
}

static bool is_num(const struct type *t)
{
	return t->kind == TY_INT || t->kind == TY_BOOL;
}

/* The value of a checked integer constant: a literal or a folded expression (1024 * 4). */
static bool const_int(const struct expr *e, int64_t *v)
{
	if (!e->is_const || e->ty.kind != TY_INT)
		return false;
	*v = e->ival;
	return true;
}

/* The same for integers and truth values (0 or 1). */
static bool const_val(const struct expr *e, int64_t *v)
{
	if (!e->is_const || (e->ty.kind != TY_INT && e->ty.kind != TY_BOOL))
		return false;
	*v = e->ival;
	return true;
}

static bool const_num(const struct expr *e, double *v)
{
	int64_t i;

	if (e->kind == EXPR_FLOAT) {
		*v = e->fval;
		return true;
	}
	if (const_int(e, &i)) {
		*v = (double)i;
		return true;
	}
	return false;
}

static int type_error(struct sema *s, enum diag_tag tag, struct expr *e, const char *what,
		      const struct type *t)
{
	char buf[32];

	diag_error(s->dl, tag, e->loc, "%s, not %s", what, type_name(t, buf, sizeof(buf)));
	return -EINVAL;
}

/* What a pointer field points to, by the C type its format gives it. */
enum pointee { PT_CHAR, PT_OTHER, PT_PTR }; /* in increasing badness */

static enum pointee ctype_pointee(const char *ctype)
{
	const char *base = NULL, *p = ctype;
	size_t blen = 0;
	int stars = 0;

	while (*p) {
		size_t n = strcspn(p, " \t*");

		if (*p == '*') {
			stars++;
			p++;
			continue;
		}
		if (n == 0) {
			p++;
			continue;
		}
		if (!((n == 5 && strncmp(p, "const", 5) == 0) ||
		      (n == 8 && strncmp(p, "volatile", 8) == 0) ||
		      (n == 6 && strncmp(p, "signed", 6) == 0) ||
		      (n == 8 && strncmp(p, "unsigned", 8) == 0) ||
		      (n == 6 && strncmp(p, "__user", 6) == 0))) {
			base = p;
			blen = n;
		}
		p += n;
	}
	if (stars >= 2)
		return PT_PTR;
	if (stars == 1 && base &&
	    ((blen == 4 && strncmp(base, "char", 4) == 0) ||
	     (blen == 2 && strncmp(base, "u8", 2) == 0) ||
	     (blen == 4 && strncmp(base, "__u8", 4) == 0)))
		return PT_CHAR;
	return PT_OTHER;
}

/*
 * str() of a pointer field: it must point to chars.  The field's C type, in every probe the
 * expression sees, says what it points to; `const char *const *argv` is a pointer to
 * pointers, whose strings str() cannot join (yet), and `void *` or `struct x *` are no text.
 */
static int check_str_pointer(struct sema *s, const struct expr *a)
{
	const struct probe_spec *specs[AST_MAX_SOURCES];
	int n = visible_specs(s, specs, AST_MAX_SOURCES);
	enum pointee worst = PT_CHAR;
	const char *ctype = "?";

	if (a->kind != EXPR_MEMBER || a->bi != BI_FIELD)
		return 0;
	for (int i = 0; i < n; i++)
		for (int j = 0; specs[i]->set && j < specs[i]->set->n; j++) {
			const struct probe_field *f =
				sema_target_field(&specs[i]->set->v[j], a->sval);
			enum pointee pt;

			if (!f || f->kind != FIELD_PTR)
				continue;
			pt = ctype_pointee(f->ctype);
			if (pt > worst || (pt == worst && !strcmp(ctype, "?"))) {
				worst = pt;
				ctype = f->ctype;
			}
		}
	if (worst == PT_PTR) {
		diag_fix(diag_error(s->dl, DIAG_E_STR_ARGV, a->loc,
				    "args.%s is a pointer to pointers (%s): str() reads one string",
				    a->sval, ctype),
			 "use join(args.%s) to join its strings", a->sval);
		return -EINVAL;
	}
	if (worst == PT_OTHER) {
		diag_fix(
			diag_error(s->dl, DIAG_E_STR_ARG, a->loc,
				   "args.%s is `%s`, not a char pointer: it does not point to text",
				   a->sval, ctype),
			"str() reads a NUL-terminated string from a char pointer or array");
		return -EINVAL;
	}
	return 0;
}

/* Whether retval is an untyped register (uretprobe/kretprobe) in every source. */
static bool retval_untyped(const struct sema *s)
{
	for (int i = 0; i < s->q->nsources; i++) {
		const struct source *src = &s->q->sources[i];
		enum probe_kind k = src->is_span ? src->end.kind : src->start.kind;

		if (k != PROBE_URETPROBE && k != PROBE_KRETPROBE)
			return false;
	}
	return true;
}

/* ---------------------------------------------------------------- addresses and argv */

/*
 * ntop(e), sockport(e) and join(e [, SEP]) take arguments no other function does: an address
 * array field (u8[4], u8[16]) that is no value of its own, a sockaddr pointer, an argv (a
 * pointer to char pointers).  They are checked here, before and instead of the generic
 * argument checks.  The kind of address goes into the argument's `aux` (enum inet_arg,
 * compiler/sema.h) for the code generator.
 */

/* The address field args.F of every visible probe, or NULL (then nothing was reported). */
static const struct probe_field *inet_array_field(struct sema *s, const struct expr *a)
{
	const struct probe_spec *specs[AST_MAX_SOURCES];
	int n = visible_specs(s, specs, AST_MAX_SOURCES);
	const struct probe_field *first = NULL;

	if (a->kind != EXPR_MEMBER || a->lhs->kind != EXPR_NAME || strcmp(a->lhs->sval, "args"))
		return NULL;
	for (int i = 0; i < n; i++)
		for (int j = 0; specs[i]->set && j < specs[i]->set->n; j++) {
			const struct probe_field *f =
				sema_target_field(&specs[i]->set->v[j], a->sval);

			if (!f || f->kind != FIELD_ARRAY)
				return NULL;
			if (first && first->size != f->size)
				return NULL;
			first = f;
		}
	return first;
}

/* Whether a pointer of this query points to a sockaddr: a tracepoint field whose C type
 * names one (struct sockaddr *uservaddr), or a BTF pointer to struct sockaddr*. */
static bool is_sockaddr_ptr(struct sema *s, const struct expr *a)
{
	char buf[128];

	if (a->ty.kind != TY_PTR)
		return false;
	if (a->ty.btf)
		return s->q->kbtf &&
		       strncmp(kbtf_type_name(s->q->kbtf, a->ty.btf, buf, sizeof(buf)),
			       "struct sockaddr", 15) == 0;
	if (a->kind == EXPR_MEMBER && a->bi == BI_FIELD) {
		const struct probe_spec *specs[AST_MAX_SOURCES];
		int n = visible_specs(s, specs, AST_MAX_SOURCES);

		for (int i = 0; i < n; i++)
			for (int j = 0; specs[i]->set && j < specs[i]->set->n; j++) {
				const struct probe_field *f =
					sema_target_field(&specs[i]->set->v[j], a->sval);

				if (!f || !strstr(f->ctype, "sockaddr") ||
				    strchr(f->ctype, '*') != strrchr(f->ctype, '*'))
					return false;
			}
		return true;
	}
	return false;
}

static int check_ntop(struct sema *s, struct expr *e)
{
	struct expr *a = e->args[0];
	const struct probe_field *f = inet_array_field(s, a);
	char buf[128];

	if (f) {
		if (f->size != 4 && f->size != 16) {
			diag_fix(diag_error(s->dl, DIAG_E_NTOP_ARG, a->loc,
					    "args.%s is %s: an address is 4 (IPv4) or 16 (IPv6) "
					    "bytes",
					    a->sval, f->ctype),
				 "give ntop() a u8[4] or u8[16] field such as args.daddr");
			return -EINVAL;
		}
		a->bi = BI_FIELD;
		a->ty = (struct type){ TY_INET, f->size, false, false, 0 };
		a->aux = f->size == 4 ? INET_ARG_BYTES4 : INET_ARG_BYTES16;
	} else {
		bool was = s->struct_ok;

		s->struct_ok = true; /* a struct in6_addr member is read whole */
		if (check_expr(s, a) != 0) {
			s->struct_ok = was;
			return -EINVAL;
		}
		s->struct_ok = was;
		if (a->ty.kind == TY_INT) {
			a->aux = INET_ARG_V4INT;
		} else if (is_sockaddr_ptr(s, a)) {
			a->aux = INET_ARG_SOCKADDR;
		} else if (a->ty.kind == TY_STRUCT && a->kind == EXPR_MEMBER &&
			   a->bi == BI_KMEMBER && s->q->kbtf &&
			   strcmp(kbtf_type_name(s->q->kbtf, a->ty.btf, buf, sizeof(buf)),
				  "struct in6_addr") == 0) {
			a->aux = INET_ARG_IN6;
		} else {
			diag_fix(diag_error(s->dl, DIAG_E_NTOP_ARG, a->loc,
					    "ntop() takes an address, not %s",
					    type_name(&a->ty, buf, sizeof(buf))),
				 "give a u8[4]/u8[16] field (args.daddr), an IPv4 integer in "
				 "network order (skc_daddr), a struct sockaddr pointer "
				 "(args.uservaddr) or a struct in6_addr member");
			return -EINVAL;
		}
	}
	e->ty = (struct type){ TY_INET, WEFT_INET_SIZE, false, false, 0 };
	return 0;
}

static int check_sockport(struct sema *s, struct expr *e)
{
	struct expr *a = e->args[0];
	char buf[32];

	if (check_expr(s, a) != 0)
		return -EINVAL;
	if (!is_sockaddr_ptr(s, a)) {
		diag_fix(diag_error(s->dl, DIAG_E_NTOP_ARG, a->loc,
				    "sockport() takes a pointer to a struct sockaddr, not %s",
				    type_name(&a->ty, buf, sizeof(buf))),
			 a->ty.kind == TY_INT ? "a port field in network order needs ntohs(), "
						"e.g. ntohs(args.dport)" :
						"e.g. sockport(args.uservaddr) of syscall:connect");
		return -EINVAL;
	}
	a->aux = INET_ARG_SOCKADDR;
	e->ty = (struct type){ TY_INT, 2, false, false, 0 };
	return 0;
}

/* Whether an argument is an argv: a pointer field to char pointers, or an untyped register
 * (argN) of a user probe, taken as the address of one (main's argv). */
static bool is_argv(struct sema *s, const struct expr *a)
{
	if (a->kind == EXPR_NAME && a->bi == BI_ARG) {
		for (int i = 0; i < s->q->nsources; i++)
			if (!kind_is_user(s->q->sources[i].start.kind))
				return false;
		return true;
	}
	if (a->ty.kind != TY_PTR || a->ty.btf || a->kind != EXPR_MEMBER || a->bi != BI_FIELD)
		return false;
	{
		const struct probe_spec *specs[AST_MAX_SOURCES];
		int n = visible_specs(s, specs, AST_MAX_SOURCES);

		for (int i = 0; i < n; i++)
			for (int j = 0; specs[i]->set && j < specs[i]->set->n; j++) {
				const struct probe_field *f =
					sema_target_field(&specs[i]->set->v[j], a->sval);
				const char *c = f ? strstr(f->ctype, "char") : NULL;

				if (!c || ctype_pointee(f->ctype) != PT_PTR ||
				    strchr(f->ctype, '*') == strrchr(f->ctype, '*') ||
				    strstr(strchr(f->ctype, '*') + 1, "**"))
					return false;
			}
	}
	return true;
}

static int check_join(struct sema *s, struct expr *e)
{
	struct expr *a = e->args[0];
	char buf[32];

	if (check_expr(s, a) != 0)
		return -EINVAL;
	if (!is_argv(s, a)) {
		struct diag *d = diag_error(s->dl, DIAG_E_JOIN_ARG, a->loc,
					    "join() takes an argv (a pointer to char pointers), "
					    "not %s",
					    type_name(&a->ty, buf, sizeof(buf)));

		diag_fix(d, a->ty.kind == TY_PTR ? "str() reads one string from a char pointer" :
						   "e.g. join(args.argv) of syscall:execve");
		return -EINVAL;
	}
	if (e->nargs == 2) {
		struct expr *sep = e->args[1];

		if (sep->kind != EXPR_STR || strlen(sep->sval) > WEFT_JOIN_MAX_SEP) {
			diag_fix(diag_error(
					 s->dl, DIAG_E_JOIN_ARG, sep->loc,
					 "join(argv, SEP): SEP must be a string literal of at most "
					 "%d bytes",
					 WEFT_JOIN_MAX_SEP),
				 "e.g. join(args.argv, ',')");
			return -EINVAL;
		}
		sep->ty =
			(struct type){ TY_STR, (uint16_t)(strlen(sep->sval) + 1), false, false, 0 };
	}
	/* an argN of a user probe points into user memory, a field says where it points */
	e->ty = (struct type){ TY_STR, WEFT_JOIN_MAX_BYTES, false,
			       a->kind == EXPR_NAME || a->ty.user, 0 };
	return 0;
}

/* ---- stacks as values: depths and the start side of a span ---- */

static const struct builtin_def *stack_builtin(const char *name)
{
	for (size_t i = 0; name && i < ARRAY_SIZE(builtins); i++)
		if ((builtins[i].bi == BI_USTACK || builtins[i].bi == BI_KSTACK) &&
		    strcasecmp(builtins[i].name, name) == 0)
			return &builtins[i];
	return NULL;
}

/* `start.ustack`, `start.kstack` (and their calls): whether e is one. */
static bool is_start_stack(const struct expr *e)
{
	return (e->kind == EXPR_MEMBER || e->kind == EXPR_CALL) && e->lhs &&
	       e->lhs->kind == EXPR_NAME && strcasecmp(e->lhs->sval, "start") == 0 &&
	       stack_builtin(e->sval);
}

/*
 * ustack, kstack with a depth (`kstack(8)`) or taken at a span's start (`start.kstack`,
 * `start.ustack(8)`): e becomes the stack name itself, its depth in ival (0: all
 * WEFT_STACK_DEPTH frames) and aux 1 for the start side, which codegen saves in the span
 * entry like any start-side value.
 */
static int check_stack_value(struct sema *s, struct expr *e)
{
	const struct builtin_def *b = stack_builtin(e->sval);
	bool start = e->lhs != NULL;
	int64_t depth = 0;

	if (e->kind == EXPR_CALL) {
		if (e->nargs != 1) {
			diag_fix(diag_error(s->dl, DIAG_E_FUNC_ARITY, e->loc,
					    "%s(N) takes one argument, the depth, not %d", b->name,
					    e->nargs),
				 "write %s for the whole stack, %s(N) for its N innermost frames",
				 b->name, b->name);
			return -EINVAL;
		}
		if (check_expr(s, e->args[0]) != 0)
			return -EINVAL;
		if (!const_int(e->args[0], &depth) || depth < 1 || depth > WEFT_STACK_DEPTH) {
			diag_fix(diag_error(s->dl, DIAG_E_STACK_DEPTH, e->args[0]->loc,
					    "a stack's depth must be a constant from 1 to %d",
					    WEFT_STACK_DEPTH),
				 "e.g. %s(8): the 8 innermost frames", b->name);
			return -EINVAL;
		}
	}
	if (start) {
		for (int i = 0; i < s->q->nsources; i++)
			if (!s->q->sources[i].is_span) {
				diag_fix(diag_error(s->dl, DIAG_E_STACK_START, e->loc,
						    "start.%s is only known for span(...) sources",
						    b->name),
					 "pair the probes: from span(START, END) ... group by "
					 "start.%s; or use %s, the stack of the event",
					 b->name, b->name);
				return -EINVAL;
			}
	}
	e->kind = EXPR_NAME;
	e->lhs = NULL;
	e->args = NULL;
	e->nargs = 0;
	e->sval = (char *)b->name;
	e->bi = b->bi;
	e->ty = b->ty;
	e->ival = depth;
	e->aux = start ? 1 : 0;
	return 0;
}

/* The fix of an unknown function in a query with a `using` file: its near matches among
 * the file's functions, or the list of them. */
static void ext_unknown_fix(struct sema *s, struct diag *d, const char *name)
{
	const struct ext_file *x = s->q->ext;
	const char *cands[EXT_MAX_FNS], *near[1];
	char list[512];
	size_t len = 0;

	list[0] = 0;
	for (int i = 0; i < x->nfns; i++) {
		cands[i] = x->fns[i].name;
		if (len < sizeof(list))
			len += (size_t)snprintf(list + len, sizeof(list) - len, "%s%s()",
						i ? ", " : "", x->fns[i].name);
	}
	if (diag_near(name, cands, x->nfns, near, 1) == 1)
		diag_fix(d, "did you mean %s()? %s defines %s", near[0], s->q->using_path, list);
	else
		diag_fix(d, "%s defines %s", s->q->using_path, x->nfns ? list : "no functions");
}

/* A call of a function of the `using` file: its arguments against its signature. */
static int check_ext_call(struct sema *s, struct expr *e, const struct ext_fn *f, int idx)
{
	int rc = 0;

	if (f->unsupported) {
		diag_fix(diag_error(s->dl, DIAG_E_EXT_TYPE, e->loc,
				    "%s() of %s cannot be called from a query: %s", f->name,
				    s->q->using_path, f->unsupported),
			 "give it integer or pointer parameters and an integer return type");
		return -EINVAL;
	}
	if (e->nargs != f->nparams) {
		diag_fix(diag_error(s->dl, DIAG_E_FUNC_ARITY, e->loc,
				    "%s() takes %d argument%s, not %d", f->name, f->nparams,
				    f->nparams == 1 ? "" : "s", e->nargs),
			 "as %s declares it", s->q->using_path);
		return -EINVAL;
	}
	for (int i = 0; i < e->nargs; i++) {
		struct expr *a = e->args[i];
		bool ok;

		if (check_expr(s, a) != 0) {
			rc = -EINVAL;
			continue;
		}
		ok = f->pptr[i] ?
			     (a->ty.kind == TY_PTR || (a->ty.kind == TY_INT && a->ty.size == 8)) :
			     (is_int(&a->ty) || a->ty.kind == TY_BOOL || a->ty.kind == TY_PTR);
		if (!ok) {
			rc = type_error(s, DIAG_E_EXT_TYPE, a,
					f->pptr[i] ? "this parameter is a pointer" :
						     "this parameter is an integer",
					&a->ty);
			diag_fix(&s->dl->v[s->dl->n - 1], "%s() takes %s as argument %d", f->name,
				 f->ptype[i], i + 1);
		}
	}
	if (rc)
		return rc;
	e->fn = FN_EXT;
	e->aux = idx;
	e->ty = f->ret_signed ? ty_s64 : ty_u64;
	return 0;
}

static int check_call(struct sema *s, struct expr *e)
{
	const struct func_def *f = NULL;
	int rc = 0;

	if (is_start_stack(e) || (!e->lhs && stack_builtin(e->sval)))
		return check_stack_value(s, e);
	if (e->lhs) {
		diag_fix(diag_error(s->dl, DIAG_E_FUNC_UNKNOWN, e->loc,
				    "'%s' is not a function of a value", e->sval),
			 "only a span's start side has stacks: start.kstack(N), start.ustack(N)");
		return -EINVAL;
	}
	for (size_t i = 0; i < ARRAY_SIZE(funcs); i++)
		if (strcasecmp(funcs[i].name, e->sval) == 0)
			f = &funcs[i];
	if (!f && s->q->ext) {
		int idx;
		const struct ext_fn *x = ext_find(s->q->ext, e->sval, &idx);

		if (x)
			return check_ext_call(s, e, x, idx);
	}
	if (!f) {
		const char *cands[ARRAY_SIZE(funcs)], *near[1];
		struct diag *d;

		for (size_t i = 0; i < ARRAY_SIZE(funcs); i++)
			cands[i] = funcs[i].name;
		d = diag_error(s->dl, DIAG_E_FUNC_UNKNOWN, e->loc, "unknown function '%s'",
			       e->sval);
		if (s->q->ext)
			ext_unknown_fix(s, d, e->sval);
		else if (diag_near(e->sval, cands, ARRAY_SIZE(funcs), near, 1) == 1)
			diag_fix(d, "did you mean %s()?", near[0]);
		return -EINVAL;
	}
	e->fn = f->fn;
	if (e->nargs >= f->min_args && e->nargs <= f->max_args &&
	    (f->fn == FN_NTOP || f->fn == FN_SOCKPORT || f->fn == FN_JOIN)) {
		/* the functions of addresses and argv check their own arguments (above) */
		if (f->fn == FN_NTOP)
			return check_ntop(s, e);
		return f->fn == FN_SOCKPORT ? check_sockport(s, e) : check_join(s, e);
	}
	if (e->nargs < f->min_args || e->nargs > f->max_args) {
		if (f->min_args == f->max_args)
			diag_error(s->dl, DIAG_E_FUNC_ARITY, e->loc,
				   "%s() takes %d argument%s, not %d", f->name, f->min_args,
				   f->min_args == 1 ? "" : "s", e->nargs);
		else
			diag_error(s->dl, DIAG_E_FUNC_ARITY, e->loc,
				   "%s() takes %d to %d arguments, not %d", f->name, f->min_args,
				   f->max_args, e->nargs);
		return -EINVAL;
	}
	if (FN_IS_AGG(f->fn)) {
		if (s->agg_depth) {
			diag_error(s->dl, DIAG_E_AGG_NESTED, e->loc,
				   "%s() inside another aggregate", f->name);
			return -EINVAL;
		}
		switch (s->ctx) {
		case CTX_WHERE:
		case CTX_ON:
			diag_fix(diag_error(s->dl, DIAG_E_AGG_IN_WHERE, e->loc,
					    "aggregate %s() in `where`", f->name),
				 "`where` filters single events; aggregates belong in `select`");
			return -EINVAL;
		case CTX_GROUP:
			diag_error(s->dl, DIAG_E_AGG_IN_GROUP, e->loc,
				   "aggregate %s() in `group by`", f->name);
			return -EINVAL;
		default:
			break;
		}
		s->agg_depth++;
	}
	for (int i = 0; i < e->nargs; i++)
		if (check_expr(s, e->args[i]) != 0)
			rc = -EINVAL;
	if (FN_IS_AGG(f->fn))
		s->agg_depth--;
	if (rc)
		return rc;

	struct expr *a0 = e->nargs ? e->args[0] : NULL;
	int64_t v;
	double q;

	switch (f->fn) {
	case FN_STR:
		/* an integer is an address only where the probe's arguments are untyped
		 * registers (argN, retval of uretprobes/kretprobes) */
		if (a0->ty.kind != TY_PTR && a0->ty.kind != TY_STR &&
		    !(a0->ty.kind == TY_INT && a0->ty.size == 8 &&
		      (a0->bi == BI_ARG || (a0->bi == BI_RETVAL && retval_untyped(s)))))
			return type_error(s, DIAG_E_STR_ARG, a0,
					  "str() takes a char pointer or a string", &a0->ty);
		if (a0->ty.kind == TY_PTR && check_str_pointer(s, a0) != 0)
			return -EINVAL;
		if (a0->ty.kind == TY_PTR && (a0->kind == EXPR_CAST || a0->bi == BI_CURTASK ||
					      (a0->bi == BI_KMEMBER && !a0->ival))) {
			diag_fix(
				diag_error(s->dl, DIAG_E_STR_ARG, a0->loc,
					   "this kernel pointer does not point to chars"),
				"str() reads a NUL-terminated string from a char pointer or array");
			return -EINVAL;
		}
		e->ty = (struct type){ TY_STR, DEFAULT_STR, false, a0->ty.user, 0 };
		if (a0->ty.kind == TY_INT) {
			/* an integer argument of a user probe is a user address */
			for (int i = 0; i < s->q->nsources; i++)
				if (kind_is_user(s->q->sources[i].start.kind))
					e->ty.user = true;
		}
		if (e->nargs == 2) {
			if (!const_int(e->args[1], &v) || v < 1 || v > MAX_STR) {
				diag_error(s->dl, DIAG_E_STR_MAX, e->args[1]->loc,
					   "str(e, max): max must be a constant from 1 to %d",
					   MAX_STR);
				return -EINVAL;
			}
			e->ty.size = (uint16_t)v;
		}
		if (a0->ty.kind == TY_STR && a0->ty.size < e->ty.size)
			e->ty.size = a0->ty.size;
		return 0;
	case FN_LOG2:
	case FN_USYM:
	case FN_KSYM:
		if (!is_int(&a0->ty) && a0->ty.kind != TY_PTR)
			return type_error(s, DIAG_E_FUNC_ARG, a0,
					  "this function takes a number or address", &a0->ty);
		e->ty = f->fn == FN_LOG2 ? ty_s64 : ty_u64;
		return 0;
	case FN_NTOHS:
	case FN_NTOHL:
		if (!is_int(&a0->ty))
			return type_error(s, DIAG_E_FUNC_ARG, a0,
					  "ntohs()/ntohl() take a number (a port or an address)",
					  &a0->ty);
		e->ty = (struct type){ TY_INT, f->fn == FN_NTOHS ? 2 : 4, false, false, 0 };
		if (const_int(a0, &v)) {
			e->ival = f->fn == FN_NTOHS ? __builtin_bswap16((uint16_t)v) :
						      __builtin_bswap32((uint32_t)v);
			e->is_const = true;
		}
		return 0;
	case FN_BUCKET:
		if (!is_int(&a0->ty))
			return type_error(s, DIAG_E_FUNC_ARG, a0, "bucket() takes a number",
					  &a0->ty);
		if (!const_int(e->args[1], &v) || v <= 0) {
			diag_error(s->dl, DIAG_E_CONST_RANGE, e->args[1]->loc,
				   "bucket(e, step): step must be a positive constant");
			return -EINVAL;
		}
		e->ty = a0->ty;
		e->ty.size = 8;
		return 0;
	case FN_COUNT:
		e->ty = ty_u64;
		e->ty.kind = TY_AGG;
		return 0;
	case FN_DISTINCT:
		if (!is_num(&a0->ty) && a0->ty.kind != TY_STR && a0->ty.kind != TY_PTR)
			return type_error(s, DIAG_E_AGG_ARG, a0,
					  "distinct() takes a number, address or string", &a0->ty);
		e->ty = (struct type){ TY_AGG, 8, false, false, 0 };
		return 0;
	case FN_LHIST: {
		int64_t lo, hi, step;
		uint64_t nb;

		if (!const_int(e->args[1], &lo) || !const_int(e->args[2], &hi) ||
		    !const_int(e->args[3], &step) || lo >= hi || step <= 0) {
			diag_fix(
				diag_error(
					s->dl, DIAG_E_LHIST_ARGS, e->loc,
					"lhist(e, lo, hi, step) needs constants with lo < hi and step > 0"),
				"e.g. lhist(args.count, 0, 4096, 256)");
			return -EINVAL;
		}
		/* the runtime's bound (kernel/weft_aggval.h), counted as the runtime counts:
		 * in all, below lo and from hi up included, in arithmetic that cannot wrap */
		nb = agg_lhist_nbuckets(lo, hi, step);
		if (nb > WEFT_LHIST_MAX_BUCKETS) {
			struct diag *d =
				nb == UINT64_MAX ?
					diag_error(
						s->dl, DIAG_E_LHIST_ARGS, e->loc,
						"lhist would have 2^64 buckets or more; at most %d",
						WEFT_LHIST_MAX_BUCKETS) :
					diag_error(s->dl, DIAG_E_LHIST_ARGS, e->loc,
						   "lhist would have %llu buckets; at most %d",
						   (unsigned long long)nb, WEFT_LHIST_MAX_BUCKETS);

			diag_fix(d,
				 "ceil((hi - lo) / step) + 2 buckets: widen step or narrow lo..hi");
			return -EINVAL;
		}
	}
		/* fall through */
	case FN_SUM:
	case FN_MIN:
	case FN_MAX:
	case FN_AVG:
	case FN_STDDEV:
	case FN_HIST:
	case FN_P50:
	case FN_P90:
	case FN_P99:
	case FN_P999:
	case FN_QUANTILE:
		if (!is_num(&a0->ty)) {
			struct diag *d;
			char buf[32];

			d = diag_error(s->dl, DIAG_E_AGG_ARG, a0->loc,
				       "%s() takes a number, not %s", f->name,
				       type_name(&a0->ty, buf, sizeof(buf)));
			if (a0->ty.kind == TY_STR)
				diag_fix(
					d,
					"to count per string, group by it: group by ... select count()");
			return -EINVAL;
		}
		if (f->fn == FN_QUANTILE) {
			if (!const_num(e->args[1], &q) || !(q > 0 && q < 1)) {
				diag_fix(
					diag_error(
						s->dl, DIAG_E_QUANTILE_RANGE, e->args[1]->loc,
						"quantile(e, q): q must be a constant between 0 and 1 (exclusive)"),
					"e.g. quantile(duration, 0.95), or p50/p90/p99/p999");
				return -EINVAL;
			}
		}
		e->ty = (struct type){ TY_AGG, 8, true, false, 0 };
		return 0;
	case FN_SYSNAME:
	case FN_SIGNAME:
	case FN_ERRNAME:
	case FN_ENUMNAME:
	case FN_UNIT:
		return sema_names_check_call(s->dl, e, sema_at_output_only(s));
	default:
		return 0;
	}
}

static bool is_probe(const struct expr *e)
{
	return e->kind == EXPR_NAME && e->bi == BI_PROBE;
}

/*
 * Constant folding.  An operator whose operands are integer or truth-value constants is a
 * constant too: its value goes into e->ival and e->is_const is set, so every later check
 * (division by zero, lhist bounds, str max, `in` items, constant group keys) sees through
 * `1024 * 4` or `(1 - 1)`, and the code generator emits the value.  The arithmetic is the one
 * the kernel runs: 64-bit two's complement, `/` truncating toward zero, `%` taking the sign
 * of the dividend, comparisons signed when either side is signed.  Unlike at run time, where
 * + - * wrap around, a constant whose exact value does not fit 64 bits is refused
 * (E_CONST_RANGE): no one writes an overflowing constant on purpose.
 */
static int fold_overflow(struct sema *s, struct expr *e)
{
	diag_fix(diag_error(s->dl, DIAG_E_CONST_RANGE, e->loc,
			    "this constant expression overflows 64-bit integers"),
		 "constants are 64-bit signed integers, -9223372036854775808 .. "
		 "9223372036854775807");
	return -EINVAL;
}

static int fold_binary(struct sema *s, struct expr *e)
{
	int64_t a, b, r = 0;
	bool sgn = e->lhs->ty.is_signed || e->rhs->ty.is_signed, ovf = false;
	uint64_t ua, ub;

	if (!const_val(e->lhs, &a) || !const_val(e->rhs, &b))
		return 0;
	ua = (uint64_t)a;
	ub = (uint64_t)b;
	switch (e->op) {
	case OP_ADD:
		ovf = sgn ? __builtin_add_overflow(a, b, &r) : __builtin_add_overflow(ua, ub, &ua);
		break;
	case OP_SUB: /* a difference is signed */
		ovf = __builtin_sub_overflow(a, b, &r);
		break;
	case OP_MUL:
		ovf = sgn ? __builtin_mul_overflow(a, b, &r) : __builtin_mul_overflow(ua, ub, &ua);
		break;
	case OP_DIV: /* b != 0: check_binary refused it */
		if (sgn)
			ovf = a == INT64_MIN && b == -1;
		if (sgn && !ovf)
			r = a / b;
		else
			ua = ua / ub;
		break;
	case OP_MOD:
		if (sgn)
			r = b == -1 ? 0 : a % b;
		else
			ua = ua % ub;
		break;
	case OP_EQ:
		r = a == b;
		break;
	case OP_NE:
		r = a != b;
		break;
	case OP_LT:
		r = sgn ? a < b : ua < ub;
		break;
	case OP_LE:
		r = sgn ? a <= b : ua <= ub;
		break;
	case OP_GT:
		r = sgn ? a > b : ua > ub;
		break;
	case OP_GE:
		r = sgn ? a >= b : ua >= ub;
		break;
	case OP_AND:
		r = a && b;
		break;
	case OP_OR:
		r = a || b;
		break;
	default:
		return 0;
	}
	if (ovf)
		return fold_overflow(s, e);
	if (!sgn && e->op != OP_SUB && e->ty.kind == TY_INT) {
		/* unsigned arithmetic (only truth values are unsigned constants) */
		if (ua > (uint64_t)INT64_MAX)
			return fold_overflow(s, e);
		r = (int64_t)ua;
	}
	e->ival = r;
	e->is_const = true;
	return 0;
}

/* A `like` pattern: at most WEFT_GLOB_MAX - 1 bytes, the kernel's matcher keeps one bit per
 * pattern byte (kernel/weft_abi.h).  (Equality with a longer literal is compiled to a loop
 * compare by the code generator, so = != in take literals of any length.) */
static int check_kernel_literal(struct sema *s, const struct expr *lit)
{
	size_t n;

	if (lit->kind != EXPR_STR || (n = strlen(lit->sval)) < WEFT_GLOB_MAX)
		return 0;
	diag_fix(diag_error(s->dl, DIAG_E_CONST_RANGE, lit->loc,
			    "a `like` pattern is at most %d bytes; this one has %zu",
			    WEFT_GLOB_MAX - 1, n),
		 "compare a prefix: e like 'its first %d bytes*'", WEFT_GLOB_MAX - 2);
	return -EINVAL;
}

static int check_binary(struct sema *s, struct expr *e)
{
	struct type *l, *r;
	char b1[32], b2[32];
	int64_t v;

	if (check_expr(s, e->lhs) | check_expr(s, e->rhs))
		return -EINVAL;
	l = &e->lhs->ty;
	r = &e->rhs->ty;
	if (l->kind == TY_STACK || r->kind == TY_STACK) {
		diag_fix(diag_error(s->dl, DIAG_E_TYPE_STACK, e->loc,
				    "a stack cannot be used in an expression"),
			 "use ustack/kstack alone, in group by or select");
		return -EINVAL;
	}
	if (l->kind == TY_AGG || r->kind == TY_AGG) {
		diag_fix(diag_error(s->dl, DIAG_E_AGG_NESTED, e->loc,
				    "arithmetic or comparison over aggregates is not supported"),
			 "select each aggregate as its own column");
		return -EINVAL;
	}
	switch (e->op) {
	case OP_AND:
	case OP_OR:
		if (l->kind != TY_BOOL)
			return type_error(s, DIAG_E_TYPE_BOOL, e->lhs, "`and`/`or` need conditions",
					  l);
		if (r->kind != TY_BOOL)
			return type_error(s, DIAG_E_TYPE_BOOL, e->rhs, "`and`/`or` need conditions",
					  r);
		e->ty = ty_bool;
		return fold_binary(s, e);
	case OP_EQ:
	case OP_NE:
	case OP_LT:
	case OP_LE:
	case OP_GT:
	case OP_GE: {
		bool lnum = is_num(l) || l->kind == TY_PTR, rnum = is_num(r) || r->kind == TY_PTR;

		/* `probe = 'NAME'`: the attach points of that name (codegen turns the name
		 * into their cookies) */
		if ((e->op == OP_EQ || e->op == OP_NE) &&
		    ((is_probe(e->lhs) && e->rhs->kind == EXPR_STR) ||
		     (is_probe(e->rhs) && e->lhs->kind == EXPR_STR))) {
			e->ty = ty_bool;
			return 0;
		}

		if ((lnum && rnum) || (l->kind == TY_STR && r->kind == TY_STR)) {
			if (lnum && rnum && sema_names_check_compare(s->dl, e) != 0)
				return -EINVAL;
			if (l->kind == TY_STR && e->op != OP_EQ && e->op != OP_NE) {
				diag_fix(diag_error(s->dl, DIAG_E_TYPE_MISMATCH, e->loc,
						    "strings can be compared with = and != only"),
					 "for patterns use: e like 'pre*'");
				return -EINVAL;
			}
			e->ty = ty_bool;
			return fold_binary(s, e);
		}
		struct diag *d =
			diag_error(s->dl, DIAG_E_TYPE_MISMATCH, e->loc, "cannot compare %s with %s",
				   type_name(l, b1, sizeof(b1)), type_name(r, b2, sizeof(b2)));
		if (l->kind == TY_PTR && r->kind == TY_STR)
			diag_fix(d, "read the string first: str(%s) = ...", "FIELD");
		return -EINVAL;
	}
	default: /* arithmetic */
		if (!is_num(l))
			return type_error(s, DIAG_E_TYPE_ARITH, e->lhs, "arithmetic needs numbers",
					  l);
		if (!is_num(r))
			return type_error(s, DIAG_E_TYPE_ARITH, e->rhs, "arithmetic needs numbers",
					  r);
		if ((e->op == OP_DIV || e->op == OP_MOD) && const_val(e->rhs, &v) && v == 0) {
			struct diag *d =
				diag_error(s->dl, DIAG_E_DIV_ZERO, e->rhs->loc, "%s by zero",
					   e->op == OP_DIV ? "division" : "modulo");

			if (e->rhs->kind != EXPR_INT)
				diag_fix(d,
					 "this divisor is a constant expression whose value is 0");
			return -EINVAL;
		}
		e->ty = (struct type){ TY_INT, 8, l->is_signed || r->is_signed, false, 0 };
		if (e->op == OP_SUB)
			e->ty.is_signed = true;
		return fold_binary(s, e);
	}
}

static int check_expr(struct sema *s, struct expr *e)
{
	bool struct_ok = s->struct_ok;
	int64_t v;

	s->struct_ok = false; /* only the direct left side of `.field` may be a struct */
	switch (e->kind) {
	case EXPR_INT:
		e->ty = e->ival < 0 ? ty_s64 : ty_u64;
		e->ty.is_signed = true;
		e->is_const = true;
		return 0;
	case EXPR_FLOAT:
		e->ty = (struct type){ TY_FLOAT, 8, true, false, 0 };
		e->is_const = true;
		return 0;
	case EXPR_STR:
		e->ty = (struct type){ TY_STR, (uint16_t)(strlen(e->sval) + 1), false, false, 0 };
		e->is_const = true;
		if (strlen(e->sval) >= MAX_STR) {
			diag_error(s->dl, DIAG_E_CONST_RANGE, e->loc,
				   "string constant longer than %d bytes", MAX_STR - 1);
			return -EINVAL;
		}
		return 0;
	case EXPR_NAME:
		return check_name(s, e);
	case EXPR_MEMBER:
		if (is_start_stack(e))
			return check_stack_value(s, e);
		if (check_member(s, e))
			return -EINVAL;
		if (e->ty.kind == TY_STRUCT && !struct_ok) {
			char tn[96], list[400];

			kbtf_type_name(s->q->kbtf, e->ty.btf, tn, sizeof(tn));
			kbtf_list_members(s->q->kbtf, e->ty.btf, list, sizeof(list));
			diag_fix(diag_error(s->dl, DIAG_E_BTF_TYPE, e->loc,
					    "%s is a whole %s, not a value: read one of its fields",
					    e->sval, tn),
				 "fields of %s: %s", tn, list);
			return -EINVAL;
		}
		return 0;
	case EXPR_CAST:
		return check_cast(s, e);
	case EXPR_CALL:
		return check_call(s, e);
	case EXPR_UNARY:
		if (check_expr(s, e->lhs))
			return -EINVAL;
		if (e->op == OP_NOT) {
			if (e->lhs->ty.kind != TY_BOOL)
				return type_error(s, DIAG_E_TYPE_BOOL, e->lhs,
						  "`not` needs a condition", &e->lhs->ty);
			e->ty = ty_bool;
			if (const_val(e->lhs, &v)) {
				e->ival = !v;
				e->is_const = true;
			}
			return 0;
		}
		if (!is_int(&e->lhs->ty))
			return type_error(s, DIAG_E_TYPE_ARITH, e->lhs, "`-` needs a number",
					  &e->lhs->ty);
		e->ty = e->lhs->ty;
		e->ty.is_signed = true;
		if (const_int(e->lhs, &v)) {
			if (v == INT64_MIN)
				return fold_overflow(s, e);
			e->ival = -v;
			e->is_const = true;
		}
		return 0;
	case EXPR_BINARY:
		return check_binary(s, e);
	case EXPR_LIKE:
		if (check_expr(s, e->lhs) | check_expr(s, e->rhs))
			return -EINVAL;
		if (is_probe(e->lhs) && e->rhs->kind == EXPR_STR) {
			e->ty = ty_bool;
			return 0;
		}
		if (e->lhs->ty.kind != TY_STR) {
			struct diag *d = diag_error(s->dl, DIAG_E_LIKE_TYPE, e->lhs->loc,
						    "`like` matches strings");

			if (e->lhs->ty.kind == TY_PTR)
				diag_fix(d, "read the string first: str(...) like '...'");
			return -EINVAL;
		}
		if (e->rhs->kind != EXPR_STR) {
			diag_error(s->dl, DIAG_E_LIKE_TYPE, e->rhs->loc,
				   "the pattern of `like` must be a string constant");
			return -EINVAL;
		}
		if (check_kernel_literal(s, e->rhs))
			return -EINVAL;
		e->ty = ty_bool;
		return 0;
	case EXPR_IN:
		if (check_expr(s, e->lhs))
			return -EINVAL;
		for (int i = 0; i < e->nargs; i++) {
			struct expr *a = e->args[i];

			if (check_expr(s, a))
				return -EINVAL;
			if (!a->is_const) {
				diag_error(s->dl, DIAG_E_IN_TYPE, a->loc,
					   "the items of `in (...)` must be constants");
				return -EINVAL;
			}
			bool ok = e->lhs->ty.kind == TY_STR ?
					  a->kind == EXPR_STR :
					  (is_num(&e->lhs->ty) && const_int(a, &v));
			if (!ok) {
				char b1[32], b2[32];

				diag_error(s->dl, DIAG_E_IN_TYPE, a->loc,
					   "`in` list item is %s but the value is %s",
					   type_name(&a->ty, b1, sizeof(b1)),
					   type_name(&e->lhs->ty, b2, sizeof(b2)));
				return -EINVAL;
			}
		}
		e->ty = ty_bool;
		return 0;
	}
	return -EINVAL;
}

/* ---------------------------------------------------------------- clauses */

static bool contains_agg(const struct expr *e)
{
	if (!e)
		return false;
	if (e->kind == EXPR_CALL && FN_IS_AGG(e->fn))
		return true;
	if (contains_agg(e->lhs) || contains_agg(e->rhs))
		return true;
	for (int i = 0; i < e->nargs; i++)
		if (contains_agg(e->args[i]))
			return true;
	return false;
}

/* The column name of an expression without alias: its text ("args.count", "count()"). */
static char *derived_name(struct sema *s, const struct expr *e)
{
	char *buf = NULL, *out;
	size_t len;
	FILE *f;

	if (e->kind == EXPR_NAME)
		return e->sval;
	if (e->kind == EXPR_MEMBER && e->lhs->kind == EXPR_NAME) {
		size_t n = strlen(e->lhs->sval) + strlen(e->sval) + 2;

		out = arena_alloc(s->q->arena, n);
		if (out)
			snprintf(out, n, "%s.%s", e->lhs->sval, e->sval);
		return out;
	}
	f = open_memstream(&buf, &len);
	if (!f)
		return NULL;
	expr_print(e, f);
	fclose(f);
	out = buf ? arena_strdup(s->q->arena, buf) : NULL;
	free(buf);
	return out;
}

static int check_windows(struct sema *s)
{
	struct ast_query *q = s->q;
	int rc = 0;

	if ((q->every_ns || q->every_loc.len) &&
	    (q->every_ns < MIN_WINDOW_NS || q->every_ns > MAX_WINDOW_NS)) {
		diag_fix(diag_error(s->dl, DIAG_E_WINDOW_RANGE, q->every_loc,
				    "`every` must be between 10ms and 24h"),
			 "e.g. every 1s");
		rc = -EINVAL;
	}
	if ((q->for_ns || q->for_loc.len) &&
	    (q->for_ns < 1000000ULL || q->for_ns > 365ULL * MAX_WINDOW_NS)) {
		diag_error(s->dl, DIAG_E_WINDOW_RANGE, q->for_loc,
			   "`for` must be between 1ms and a year");
		rc = -EINVAL;
	}
	if (!rc && q->every_ns && q->for_ns && q->for_ns < q->every_ns)
		diag_warn(s->dl, DIAG_W_FOR_SHORT, q->for_loc,
			  "`for` is shorter than `every`: only the final window is emitted");
	return rc;
}

/* One side's key (end: against the end probe) or, with both, one key for both sides. */
static int check_span_key(struct sema *s, struct expr *key, int first, int last)
{
	for (int end = first; end <= last; end++) {
		s->on_end = end;
		if (check_expr(s, key) != 0)
			return -EINVAL;
		if (!is_int(&key->ty) && key->ty.kind != TY_PTR)
			return type_error(s, DIAG_E_SPAN_ON, key,
					  "a span key must be a number or address", &key->ty);
	}
	return 0;
}

/* A span side's own `where` (lang-a): a condition on that side's probe alone. */
static int check_span_where(struct sema *s, struct expr *w, bool end)
{
	s->on_end = end;
	if (check_expr(s, w) != 0)
		return -EINVAL;
	if (w->ty.kind != TY_BOOL)
		return type_error(
			s, DIAG_E_TYPE_BOOL, w,
			"a span side's `where` needs a condition (e.g. args.newstate = 7)", &w->ty);
	return 0;
}

static int check_on(struct sema *s)
{
	int rc = 0;

	s->ctx = CTX_ON;
	for (int i = 0; i < s->q->nsources; i++) {
		struct source *src = &s->q->sources[i];

		if (!src->on && !src->start_where && !src->end_where)
			continue;
		if (!src->start.set || !src->end.set) {
			rc = -EINVAL;
			continue;
		}
		s->on_source = i;
		if (src->on && check_span_key(s, src->on, 0, src->end_on ? 0 : 1) != 0)
			rc = -EINVAL;
		if (src->end_on && check_span_key(s, src->end_on, 1, 1) != 0)
			rc = -EINVAL;
		if (src->start_where && check_span_where(s, src->start_where, false) != 0)
			rc = -EINVAL;
		if (src->end_where && check_span_where(s, src->end_where, true) != 0)
			rc = -EINVAL;
	}
	return rc;
}

/* Whether select item it names group key g (so that key is not a column of its own). */
static bool item_names_key(const struct ast_query *q, const struct select_item *it, int g)
{
	const struct expr *e = it->e;

	return (e->kind == EXPR_NAME && e->bi == BI_ALIAS && -1 - e->aux == g) ||
	       expr_equal(e, q->groups[g].e);
}

/* Whether group key g is a column of the result that no select item names (plan.c puts
 * those first: `group by comm select count()` shows comm). */
static bool key_is_extra_column(const struct ast_query *q, int g)
{
	for (int i = 0; i < q->nitems; i++)
		if (item_names_key(q, &q->items[i], g))
			return false;
	return true;
}

/* Two names the same as output columns (names are cut to COLUMN_NAME_MAX bytes). */
static bool same_name(const char *a, const char *b)
{
	return a && b && strncmp(a, b, COLUMN_NAME_MAX) == 0;
}

/*
 * The names of the result's columns are unique: they are the members of a JSON row.  The
 * columns are the select items and, in an aggregating select, the group keys no item names.
 * Group keys are unique among themselves too.  A stream row's JSON object has a member
 * "type" of its own, so no stream column may take that name.
 */
static int check_names(struct sema *s)
{
	struct ast_query *q = s->q;

	for (int i = 0; i < q->ngroups && q->aggregating; i++)
		for (int j = 0; j < i; j++)
			if (same_name(q->groups[i].name, q->groups[j].name)) {
				struct src_loc loc = q->groups[i].alias ? q->groups[i].alias_loc :
									  q->groups[i].e->loc;

				diag_fix(diag_error(s->dl, DIAG_E_ALIAS_DUP, loc,
						    "two group keys named '%s'", q->groups[i].name),
					 "group by each value once, or name one with `as NAME`");
				return -EINVAL;
			}
	for (int i = 0; i < q->nitems; i++) {
		const struct select_item *it = &q->items[i];
		struct src_loc loc = it->alias ? it->alias_loc : it->e->loc;

		for (int j = 0; j < i; j++)
			if (same_name(it->name, q->items[j].name)) {
				struct diag *d;

				if (strcmp(it->name, q->items[j].name) == 0)
					d = diag_error(s->dl, DIAG_E_ALIAS_DUP, loc,
						       "two columns named '%s'", it->name);
				else
					d = diag_error(s->dl, DIAG_E_ALIAS_DUP, loc,
						       "two columns whose names agree in their "
						       "first %d bytes, all a column name keeps",
						       COLUMN_NAME_MAX);
				diag_fix(d, "name one of them with `as NAME`");
				return -EINVAL;
			}
		for (int g = 0; g < q->ngroups && q->aggregating; g++)
			if (same_name(it->name, q->groups[g].name) && key_is_extra_column(q, g)) {
				diag_fix(
					diag_error(s->dl, DIAG_E_ALIAS_DUP, loc,
						   "the group key '%s' is a column of the result "
						   "already",
						   it->name),
					"name this column otherwise, or the key with `group by ... "
					"as NAME`");
				return -EINVAL;
			}
		if (!q->aggregating && same_name(it->name, "type")) {
			diag_fix(diag_error(s->dl, DIAG_E_ALIAS_DUP, loc,
					    "a stream column cannot be named 'type': each JSON row "
					    "has a member \"type\" already"),
				 "name it otherwise with `as NAME`");
			return -EINVAL;
		}
	}
	return 0;
}

static int check_select(struct sema *s)
{
	struct ast_query *q = s->q;
	int rc = 0;

	s->ctx = CTX_GROUP;
	for (int i = 0; i < q->ngroups; i++) {
		struct group_key *g = &q->groups[i];

		if (check_expr(s, g->e) != 0) {
			rc = -EINVAL;
			continue;
		}
		if (g->e->ty.kind == TY_BOOL || g->e->ty.kind == TY_FLOAT) {
			/* booleans group fine; floats cannot exist outside constants */
		}
		if (g->e->is_const) {
			diag_error(s->dl, DIAG_E_CONST_RANGE, g->e->loc,
				   "grouping by a constant makes one group; drop it");
			rc = -EINVAL;
		}
	}
	s->ctx = CTX_SELECT;
	for (int i = 0; i < q->nitems; i++) {
		struct select_item *it = &q->items[i];

		if (check_expr(s, it->e) != 0) {
			rc = -EINVAL;
			continue;
		}
		if (contains_agg(it->e))
			q->aggregating = true;
		it->name = it->alias ? it->alias : derived_name(s, it->e);
		if (it->e->ty.kind == TY_FLOAT) {
			diag_fix(diag_error(s->dl, DIAG_E_CONST_RANGE, it->e->loc,
					    "a fraction is not a value a column can hold"),
				 "fractions are quantile levels only: quantile(e, 0.95)");
			rc = -EINVAL;
		}
	}
	for (int i = 0; i < q->ngroups; i++) {
		struct group_key *g = &q->groups[i];

		g->name = g->alias ? g->alias : derived_name(s, g->e);
	}
	if (rc)
		return rc;
	if (check_names(s) != 0)
		return -EINVAL;

	if (!q->aggregating) {
		if (q->ngroups) {
			diag_fix(diag_error(s->dl, DIAG_E_GROUP_STREAM, q->groups[0].e->loc,
					    "`group by` without an aggregate in `select`"),
				 "add an aggregate, e.g. select count()");
			return -EINVAL;
		}
		if (q->order) {
			diag_fix(diag_error(
					 s->dl, DIAG_E_ORDER_STREAM, q->order_loc,
					 "`order by` on a stream: events are printed as they come"),
				 "aggregate (group by ... select count()) to order results");
			return -EINVAL;
		}
		return 0;
	}

	/* aggregating: every item is an aggregate or a group key */
	for (int i = 0; i < q->nitems; i++) {
		struct select_item *it = &q->items[i];
		bool is_key = false;

		if (it->e->kind == EXPR_CALL && FN_IS_AGG(it->e->fn))
			continue;
		if (contains_agg(it->e)) {
			diag_fix(diag_error(s->dl, DIAG_E_AGG_NESTED, it->e->loc,
					    "an aggregate inside an expression is not supported"),
				 "select the aggregate as its own column");
			return -EINVAL;
		}
		if (it->e->kind == EXPR_NAME && it->e->bi == BI_ALIAS && it->e->aux < 0)
			is_key = true;
		for (int g = 0; g < q->ngroups && !is_key; g++)
			is_key = expr_equal(it->e, q->groups[g].e);
		if (!is_key && it->e->is_const) {
			diag_fix(diag_error(s->dl, DIAG_E_AGG_UNGROUPED, it->e->loc,
					    "a constant column is not supported in a select with "
					    "aggregates"),
				 "drop it: each column here is an aggregate or a group key "
				 "(constant columns work in a select without aggregates)");
			return -EINVAL;
		}
		if (!is_key) {
			struct diag *d = diag_error(s->dl, DIAG_E_AGG_UNGROUPED, it->e->loc,
						    "'%s' is neither an aggregate nor a group key",
						    it->name ? it->name : "this column");

			diag_fix(d, "add it to `group by`, or wrap it in an aggregate");
			return -EINVAL;
		}
	}
	return 0;
}

static int check_order(struct sema *s)
{
	struct ast_query *q = s->q;
	struct expr *o = q->order;

	if (!o)
		return 0;
	s->ctx = CTX_ORDER;
	if (o->kind == EXPR_NAME) {
		for (int i = 0; i < q->nitems; i++)
			if (q->items[i].name && strcmp(q->items[i].name, o->sval) == 0) {
				o->bi = BI_ALIAS;
				o->aux = i;
				o->ty = q->items[i].e->ty;
				return 0;
			}
	}
	for (int i = 0; i < q->nitems; i++)
		if (expr_equal(o, q->items[i].e)) {
			o->bi = BI_ALIAS;
			o->aux = i;
			o->ty = q->items[i].e->ty;
			return 0;
		}
	/* a group key is a column of the result too (shown even when not selected) */
	for (int g = 0; g < q->ngroups && q->aggregating; g++)
		if ((o->kind == EXPR_NAME && q->groups[g].alias &&
		     strcmp(q->groups[g].alias, o->sval) == 0) ||
		    expr_equal(o, q->groups[g].e)) {
			o->bi = BI_ALIAS;
			o->aux = -1 - g;
			o->ty = q->groups[g].e->ty;
			return 0;
		}
	{
		const char *cands[AST_MAX_ITEMS], *near[1];
		int nc = 0;
		struct diag *d;

		for (int i = 0; i < q->nitems; i++)
			if (q->items[i].name)
				cands[nc++] = q->items[i].name;
		d = diag_error(s->dl, DIAG_E_ORDER_UNKNOWN, o->loc,
			       "`order by` must name a column of the result");
		if (o->kind == EXPR_NAME && diag_near(o->sval, cands, nc, near, 1) == 1)
			diag_fix(d, "did you mean '%s'?", near[0]);
		else
			diag_fix(
				d,
				"order by a select item or its alias (select count() as n ... order by n)");
	}
	return -EINVAL;
}

/* The probes of weft's provider a graph query reads, and the arguments each must have
 * (the contract of include/weft/trace.h and docs/graphs.md). */
static const struct {
	const char *name;
	int nargs;
} graph_probes[] = {
	{ "task_begin", 6 },
	{ "task_end", 4 },
	{ "event", 4 },
	{ "edge", 7 },
};

int sema_graph_probe_kind(const struct probe_target *t)
{
	if (t->kind != PROBE_USDT || strcmp(t->provider, "weft") != 0)
		return -1;
	for (size_t i = 0; i < sizeof(graph_probes) / sizeof(graph_probes[0]); i++)
		if (strcmp(t->usdt_name, graph_probes[i].name) == 0)
			return (int)i + 1; /* WEFT_GREC_TASK_BEGIN .. WEFT_GREC_EDGE */
	return -1;
}

/* What kernel:sockets reads from a socket (codegen.c, emit_graph_ksock()): the members are
 * marked for kbtf_emit(), so that the generated program has their CO-RE definitions. */
static const struct {
	const char *type, *member;
} ksock_members[] = {
	{ "sock_common", "skc_rcv_saddr" }, { "sock_common", "skc_daddr" },
	{ "sock_common", "skc_num" },	    { "sock_common", "skc_dport" },
	{ "tcp_sock", "write_seq" },	    { "tcp_sock", "copied_seq" },
};

/*
 * IPv6 sockets (family 10) too, where the kernel has IPv6 (CONFIG_IPV6): their 16-byte
 * addresses, sock_common's skc_v6_rcv_saddr and skc_v6_daddr (struct in6_addr, read whole
 * through its in6_u.u6_addr8).  Marked when all are there; codegen.c records IPv6 sockets
 * only then (sema_ksock_ipv6()), a kernel without them keeps to IPv4.
 */
bool sema_ksock_ipv6(struct kbtf *k)
{
	static const char *const v6[] = { "skc_v6_rcv_saddr", "skc_v6_daddr" };
	uint32_t sc = kbtf_find(k, "sock_common", false);
	uint32_t in6 = kbtf_find(k, "in6_addr", false);
	struct kbtf_member m;

	/* in6_addr's member first: a struct in6_addr emitted is never empty */
	if (!sc || !in6 || kbtf_member(k, in6, "in6_u", &m) != 0 || m.kind != KBTF_COMPOSITE ||
	    kbtf_member(k, m.type_id, "u6_addr8", &m) != 0 || m.kind != KBTF_CHARS || m.size != 16)
		return false;
	for (size_t i = 0; i < 2; i++)
		if (kbtf_member(k, sc, v6[i], &m) != 0 || m.kind != KBTF_COMPOSITE ||
		    m.type_id != in6)
			return false;
	return true;
}

/*
 * The current task's comm read through BTF (task_struct.comm, a char[16]) instead of
 * bpf_get_current_comm(): two loads instead of a helper that copies and pads the string, 45
 * of a kernel:sockets program's ~280 ns a call here (docs/performance.md, "Kernel edges:
 * the wakeups and the comm").  Only where the program reads sockets through BTF already (the
 * object relocates against the kernel's BTF either way) and where the comm is a string (a
 * filter's compare, a graph record's name), never a key: a kernel before 6.x pads a comm
 * shorter than an earlier one with what was there (strlcpy), and a key would differ by the
 * bytes after the NUL.  Marks the member; false when this BTF has no such member.
 */
bool sema_ksock_comm(struct kbtf *k)
{
	uint32_t t = kbtf_find(k, "task_struct", false);
	struct kbtf_member m;

	return t && kbtf_member(k, t, "comm", &m) == 0 && m.kind == KBTF_CHARS && m.size == 16;
}

/*
 * Raw tracepoints for kernel:sockets.  A classic tracepoint program runs after the kernel has
 * written the tracepoint's record (a perf buffer of its own, filled field by field); a raw one
 * (tp_btf: its arguments typed by the kernel's BTF) gets the arguments the tracepoint was
 * called with and loads the socket's members through the typed pointer, and costs the traced
 * call less (docs/performance.md).  The record of sock_send_length and
 * sock_recv_length (sock_msg_length in include/trace/events/sock.h) is (sk, family, protocol,
 * ret, flags); the arguments were the same five when the tracepoints came (Linux 6.3) and are
 * (sk, ret, flags) in later kernels, which fill family and protocol from the socket
 * (sk->sk_family, sk->sk_protocol).  Which one this kernel has is read from its BTF (the
 * arguments' count and sizes); a field is then an argument or read from the socket (CO-RE,
 * the members marked here).  Any other shape keeps the classic tracepoint.  Debian 12's
 * libbpf gives a raw tracepoint no BPF cookie, so each tracepoint gets its own program
 * (compiler/plan.c) with its cookie as a constant.
 */
int sema_ksock_raw_field(struct kbtf *k, const struct probe_target *t, int field)
{
	static const struct {
		const char *name;
		enum field_kind kind;
		uint16_t size;
		int in5, in3; /* where it is with five arguments, with three */
	} rec[] = {
		{ "sk", FIELD_PTR, 8, 0, 0 },
		{ "family", FIELD_INT, 2, 1, SEMA_RAW_SK_FAMILY },
		{ "protocol", FIELD_INT, 2, 2, SEMA_RAW_SK_PROTOCOL },
		{ "ret", FIELD_INT, 4, 3, 1 },
		{ "flags", FIELD_INT, 4, 4, 2 },
	};
	static const uint32_t five[] = { 8, 2, 2, 4, 4 }, three[] = { 8, 4, 4 };
	const char *env = getenv("WEFT_RAW_TP");
	uint32_t sizes[PROBE_MAX_FIELDS];
	struct kbtf_member m;
	uint32_t sc, so;
	int n;

	if (!k || (env && strcmp(env, "0") == 0) || t->kind != PROBE_TRACEPOINT ||
	    strcmp(t->category, "sock") != 0 ||
	    (strcmp(t->event, "sock_send_length") != 0 &&
	     strcmp(t->event, "sock_recv_length") != 0) ||
	    t->nfields != 5 || field < 0 || field >= 5)
		return SEMA_RAW_NONE;
	for (int i = 0; i < 5; i++)
		if (strcmp(t->fields[i].name, rec[i].name) != 0 ||
		    t->fields[i].kind != rec[i].kind || t->fields[i].size != rec[i].size)
			return SEMA_RAW_NONE;
	n = kbtf_tp_args(k, t->event, sizes, PROBE_MAX_FIELDS);
	if (n == 5 && memcmp(sizes, five, sizeof(five)) == 0)
		return rec[field].in5;
	if (n != 3 || memcmp(sizes, three, sizeof(three)) != 0)
		return SEMA_RAW_NONE;
	sc = kbtf_find(k, "sock_common", false);
	so = kbtf_find(k, "sock", false);
	if (!sc || !so || kbtf_member(k, sc, "skc_family", &m) != 0 || m.kind != KBTF_INT ||
	    m.size != 2 || kbtf_member(k, so, "sk_protocol", &m) != 0 || m.kind != KBTF_INT ||
	    m.size != 2)
		return SEMA_RAW_NONE;
	return rec[field].in3;
}

bool sema_ksock_raw(struct kbtf *k, const struct probe_target *t)
{
	for (int i = 0; i < t->nfields; i++)
		if (sema_ksock_raw_field(k, t, i) == SEMA_RAW_NONE)
			return false;
	return t->nfields > 0;
}

static int mark_kernel_edges(struct sema *s, const struct probe_spec *sp)
{
	struct kbtf *k = sema_kbtf(s, sp->loc);

	if (!k)
		return -EINVAL;
	for (size_t i = 0; i < sizeof(ksock_members) / sizeof(ksock_members[0]); i++) {
		struct kbtf_member m;
		uint32_t id = kbtf_find(k, ksock_members[i].type, false);

		if (!id || kbtf_member(k, id, ksock_members[i].member, &m) != 0 ||
		    m.kind != KBTF_INT) {
			diag_fix(diag_error(s->dl, DIAG_E_KERNEL_SOURCE, sp->loc,
					    "%s needs struct %s's integer member %s, which this "
					    "kernel's BTF lacks",
					    sp->text, ksock_members[i].type,
					    ksock_members[i].member),
				 "kernel:sockets reads TCP sockets of Linux 6.3 or later");
			return -EINVAL;
		}
	}
	(void)sema_ksock_ipv6(k); /* marks the IPv6 members where the kernel has them */
	(void)sema_ksock_comm(k); /* and task_struct.comm */
	return 0;
}

/*
 * A graph query's sources must give graph elements: span(...) (each instance a task), or
 * probes of weft's provider with the contract's arguments.
 */
static int check_graph(struct sema *s)
{
	struct ast_query *q = s->q;
	int rc = 0;

	for (int i = 0; i < q->nsources; i++) {
		struct source *src = &q->sources[i];
		struct probe_spec *sp = &src->start;

		if (src->is_span || !sp->set)
			continue;
		if (sp->kernel) {
			/* kernel:sockets reads sockets through BTF; the sched sources read none */
			if (sp->set->n && strcmp(sp->set->v[0].category, "sock") == 0 &&
			    mark_kernel_edges(s, sp) != 0)
				rc = -EINVAL;
			continue;
		}
		for (int j = 0; j < sp->set->n; j++) {
			const struct probe_target *t = &sp->set->v[j];
			int k = sema_graph_probe_kind(t);
			struct diag *d;

			if (k < 0) {
				d = diag_error(s->dl, DIAG_E_GRAPH_SOURCE, sp->loc,
					       "%s gives no graph elements", t->name);
				diag_fix(d, "a graph query reads weft's provider "
					    "(usdt:BIN:weft:*: task_begin, task_end, event, edge) "
					    "or spans (span(uprobe:BIN:FUNC))");
				rc = -EINVAL;
				break;
			}
			if (t->nargs < graph_probes[k - 1].nargs) {
				d = diag_error(s->dl, DIAG_E_GRAPH_SOURCE, sp->loc,
					       "%s has %d argument%s, weft's provider has %d",
					       t->name, t->nargs, t->nargs == 1 ? "" : "s",
					       graph_probes[k - 1].nargs);
				diag_fix(d, "build the program with include/weft/trace.h (see "
					    "docs/graphs.md)");
				rc = -EINVAL;
				break;
			}
		}
	}
	return rc;
}

int sema_check(struct ast_query *q, const struct sema_opts *opts, struct diag_list *dl)
{
	struct sema s = { .q = q, .dl = dl, .pid = opts ? opts->pid : 0 };
	int rc = 0;

	if (sema_probes_resolve(q, s.pid, dl) != 0)
		return -EINVAL; /* names cannot be checked against unknown probes */
	if (ext_load(q, dl) != 0)
		return -EINVAL; /* calls cannot be checked against an unread extension */
	if (check_on(&s) != 0)
		rc = -EINVAL;
	s.ctx = CTX_WHERE;
	if (q->where) {
		if (check_expr(&s, q->where) != 0)
			rc = -EINVAL;
		else if (q->where->ty.kind != TY_BOOL)
			rc = type_error(&s, DIAG_E_TYPE_BOOL, q->where,
					"`where` needs a condition (e.g. pid = 42)", &q->where->ty);
	}
	if (q->graph) {
		if (check_graph(&s) != 0)
			rc = -EINVAL;
	} else {
		for (int i = 0; i < q->nsources; i++)
			if (q->sources[i].start.kernel && !q->sources[i].is_span) {
				diag_fix(diag_error(s.dl, DIAG_E_KERNEL_SOURCE,
						    q->sources[i].start.loc,
						    "%s gives kernel edges, which only a graph "
						    "query records",
						    q->sources[i].start.text),
					 "end the query with `graph` (from %s graph), or read the "
					 "tracepoints themselves (tp:%s:%s)",
					 q->sources[i].start.text,
					 q->sources[i].start.set && q->sources[i].start.set->n ?
						 q->sources[i].start.set->v[0].category :
						 "sock",
					 q->sources[i].start.set && q->sources[i].start.set->n ?
						 q->sources[i].start.set->v[0].event :
						 "sock_send_length");
				rc = -EINVAL;
			}
		if (check_select(&s) != 0)
			rc = -EINVAL;
		if (!rc && check_order(&s) != 0)
			rc = -EINVAL;
	}
	if (check_windows(&s) != 0)
		rc = -EINVAL;
	if (!rc && q->format && sema_format_check(q, dl) != 0)
		rc = -EINVAL;
	return rc || diag_has_errors(dl) ? -EINVAL : 0;
}
