// SPDX-License-Identifier: Apache-2.0
/*
 * Code generation: from a plan and its checked tree to one BPF C file.
 *
 * The file includes only the runtime (kernel/weft.bpf.h, which brings the kernel UAPI and
 * libbpf headers) and declares only the types the query needs: a key struct and a value
 * struct of the plan's layouts, a stream record, a span entry per span source, and one
 * per-CPU scratch struct that holds everything too large for the 512-byte BPF stack
 * (the key being built, strings, saved span values).  Then one function per program:
 *
 *   read the epoch once; -p filter; [span: return unless the query is live]; scratch;
 *   [span end: end-evaluable conjuncts of the predicate; match the start, or return]
 *   strings the predicate needs; predicate; other strings;
 *   aggregate: key -> value of this group in this epoch -> one update per aggregate
 *   stream:    reserve a record -> fill -> submit
 *   [span start: save the start-side values the end needs, record the start]
 *
 * Spans: an expression that mentions no end-side value (duration, retval, stacks) is
 * "start-side".  The start program computes every maximal start-side subexpression the
 * end needs and saves it in the span entry; the end program reads it back.  The predicate
 * is split into its `and`ed conjuncts: the start-side ones run at the start, so filtered
 * events cost no span entry, and the others at the end after the match.  A start-side
 * conjunct that has the same value at the end (pid, tid, constants: end_evaluable()) runs at
 * the end before the match too, so the ends of filtered calls cost no lookup and are not
 * noted as ends without a start.
 *
 * Must never: emit an unbounded loop, a signed division (BPF has none before ISA v4), a map
 * value access without a NULL check, or C whose behaviour is undefined (a division by zero,
 * a signed overflow: clang may fold those to anything); or golden-test its output (tests run
 * programs).
 *
 * Why one file of ~1,400 lines: every part (span saves, string temporaries, expressions,
 * programs) writes into one struct cg (the output, the temporaries, the span save layouts) and
 * the expression emitter is called back from each; cut apart they would need that state as
 * an internal API, for no part that is used alone.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include "compiler/codegen.h"
#include "compiler/ext.h"
#include "compiler/kbtf.h"
#include "compiler/sema.h"
#include "kernel/weft_abi.h"

#define SCRATCH_MAX 16384 /* bytes of per-CPU scratch one query may use */
#define SCRATCH_STACK_MAX 64 /* a stream query's scratch up to this: on the stack */
#define MAX_TEMPS 64
#define STREQ_LIT_MAX 63 /* longest literal of WEFT_STREQ (weft.bpf.h: WEFT_GLOB_MAX - 1) */

struct temp {
	const struct expr *e;
	uint32_t off; /* in scratch s[] */
	uint32_t size;
};

struct saved {
	const struct expr *e;
	uint32_t off; /* in the span entry's b[] */
	uint32_t size;
	bool is_str;
};

struct cg {
	FILE *out;
	struct ast_query *q;
	struct plan *p;
	struct diag_list *dl;

	/* the program being emitted */
	const struct plan_prog *prog;
	const struct probe_target *tgt; /* representative target (its fields) */
	const struct source *src;
	bool span_end; /* end program of a span: start-side values come from the entry */
	bool span_start; /* start program of a span */

	struct temp temps[MAX_TEMPS];
	int ntemps;
	uint32_t temps_size;

	/* per span source: the save layout (same for start and end programs) */
	struct saved saves[AST_MAX_SOURCES][MAX_TEMPS];
	int nsaves[AST_MAX_SOURCES];
	uint32_t save_size[AST_MAX_SOURCES];

	uint32_t max_temps_size;
	int err;
};

static void emit(struct cg *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void emit(struct cg *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfprintf(c->out, fmt, ap);
	va_end(ap);
}

/* ---------------------------------------------------------------- classification */

static bool is_end_leaf(const struct expr *e)
{
	/* a stack is the end's, unless the query asked for the start's (start.kstack: aux 1) */
	return (e->kind == EXPR_NAME &&
		(e->bi == BI_DURATION || e->bi == BI_RETVAL ||
		 ((e->bi == BI_USTACK || e->bi == BI_KSTACK) && e->aux != 1))) ||
	       (e->kind == EXPR_MEMBER && e->bi == BI_END_FIELD); /* lang-a: end.args.F */
}

static bool mentions_end(const struct expr *e)
{
	if (!e)
		return false;
	if (is_end_leaf(e))
		return true;
	if (mentions_end(e->lhs) || mentions_end(e->rhs))
		return true;
	for (int i = 0; i < e->nargs; i++)
		if (mentions_end(e->args[i]))
			return true;
	return false;
}

static bool is_constant(const struct expr *e)
{
	switch (e->kind) {
	case EXPR_INT:
	case EXPR_FLOAT:
	case EXPR_STR:
		return true;
	case EXPR_UNARY:
		return is_constant(e->lhs);
	case EXPR_BINARY:
		return is_constant(e->lhs) && is_constant(e->rhs);
	default:
		return false;
	}
}

static bool is_host(const struct expr *e)
{
	return e->kind == EXPR_NAME && e->bi == BI_HOST;
}

/* A value held as bytes in scratch, copied whole into keys and records: a string, or an
 * address from ntop() (not the u8[N] field ntop() reads, which is no value of its own). */
static bool is_bytes(const struct expr *e)
{
	return e->ty.kind == TY_STR || (e->kind == EXPR_CALL && e->fn == FN_NTOP);
}

/* ---------------------------------------------------------------- span saves */

static const struct saved *find_save(struct cg *c, const struct expr *e)
{
	int s = c->src - c->q->sources;

	for (int i = 0; i < c->nsaves[s]; i++)
		if (c->saves[s][i].e == e)
			return &c->saves[s][i];
	return NULL;
}

static void plan_saves(struct cg *c, int s, const struct expr *e)
{
	struct saved *sv;

	if (!e || is_constant(e) || is_host(e))
		return;
	if (!mentions_end(e)) {
		if (c->nsaves[s] == MAX_TEMPS) {
			c->err = -E2BIG;
			return;
		}
		sv = &c->saves[s][c->nsaves[s]++];
		sv->e = e;
		sv->is_str = is_bytes(e);
		sv->size = sv->is_str ? ((e->ty.size + 7u) & ~7u) : 8;
		sv->off = c->save_size[s];
		c->save_size[s] += sv->size;
		return;
	}
	if (is_end_leaf(e))
		return; /* read at the end (end.args.F: its left side is no value) */
	/* an aggregate call itself is not a value: descend into its argument */
	plan_saves(c, s, e->lhs);
	plan_saves(c, s, e->rhs);
	for (int i = 0; i < e->nargs; i++)
		plan_saves(c, s, e->args[i]);
}

#define MAX_CONJUNCTS 64

static int conjuncts_add(const struct expr *e, const struct expr **out, int n)
{
	if (e->kind == EXPR_BINARY && e->op == OP_AND) {
		n = conjuncts_add(e->lhs, out, n);
		return conjuncts_add(e->rhs, out, n);
	}
	if (n < MAX_CONJUNCTS)
		out[n] = e;
	return n + 1;
}

/*
 * The conjuncts of the predicate (`a and b and c` -> a, b, c), each a condition every counted
 * event passes (a predicate of more than MAX_CONJUNCTS is taken whole).  Spans filter by
 * conjuncts where they can: the start-side ones at the start (a filtered start costs no span
 * entry), those that mention end-side values at the end after the match, and the end-evaluable
 * ones at the end before the match as well (an end no start can match costs no lookup).
 */
static int where_conjuncts(const struct expr *where, const struct expr *out[MAX_CONJUNCTS])
{
	int n;

	if (!where)
		return 0;
	n = conjuncts_add(where, out, 0);
	if (n > MAX_CONJUNCTS) {
		out[0] = where;
		n = 1;
	}
	return n;
}

/*
 * Whether e has the same value at a span's end as at its start, so the end can evaluate it
 * before looking the start up: integer constants, and (for spans keyed by thread, whose two
 * halves run on the same thread) pid and tid, combined by operators and log2/bucket.  Not uid,
 * comm, cgroup or cpu (a call may change them), nor probe arguments, fields or `probe` (the
 * end probe has its own); no strings, so that it needs no scratch space.
 */
static bool end_evaluable(const struct source *src, const struct expr *e)
{
	if (!e)
		return true;
	switch (e->kind) {
	case EXPR_INT:
	case EXPR_FLOAT:
		return true;
	case EXPR_NAME:
		return !src->on && (e->bi == BI_PID || e->bi == BI_TID);
	case EXPR_CALL:
		if (e->fn != FN_LOG2 && e->fn != FN_BUCKET)
			return false;
		break;
	case EXPR_UNARY:
	case EXPR_BINARY:
	case EXPR_IN:
		break;
	default:
		return false;
	}
	if (!end_evaluable(src, e->lhs) || !end_evaluable(src, e->rhs))
		return false;
	for (int i = 0; i < e->nargs; i++)
		if (!end_evaluable(src, e->args[i]))
			return false;
	return true;
}

/* Which conjuncts a span program checks, and where (above). */
enum where_part { WHERE_START, WHERE_END_BEFORE_MATCH, WHERE_END_AFTER_MATCH };

static bool where_part_has(const struct cg *c, enum where_part part, const struct expr *e)
{
	switch (part) {
	case WHERE_START:
		return !mentions_end(e);
	case WHERE_END_BEFORE_MATCH:
		return !mentions_end(e) && end_evaluable(c->src, e);
	default:
		return mentions_end(e);
	}
}

/*
 * Whether a span end that finds no start is noted (span_end_without_start): not when a
 * start-side conjunct the end cannot evaluate filters starts, or the span's own start-side
 * `where` (span(P1 where C1, P2)), which the end never checks, for then most such ends are of
 * calls the predicate filtered out, not of calls begun before the query went live or whose
 * start was lost (counted as a loss in any case).
 */
static bool span_notes_no_start(const struct cg *c)
{
	const struct expr *conj[MAX_CONJUNCTS];
	int n = where_conjuncts(c->q->where, conj);

	if (c->src && c->src->start_where)
		return false;

	for (int i = 0; i < n; i++)
		if (!mentions_end(conj[i]) && !end_evaluable(c->src, conj[i]))
			return false;
	return true;
}

static void plan_span_saves(struct cg *c)
{
	struct ast_query *q = c->q;

	for (int s = 0; s < q->nsources; s++) {
		if (!q->sources[s].is_span)
			continue;
		if (q->where && mentions_end(q->where)) {
			/* the end evaluates only the conjuncts that mention end-side values: the
			 * others were checked at the start */
			const struct expr *conj[MAX_CONJUNCTS];
			int n = where_conjuncts(q->where, conj);

			for (int i = 0; i < n; i++)
				if (mentions_end(conj[i]))
					plan_saves(c, s, conj[i]);
		}
		if (c->p->aggregating) {
			for (int k = 0; k < c->p->nkeys; k++)
				if (c->p->keys[k].kernel)
					plan_saves(c, s, c->p->keys[k].e);
			for (int a = 0; a < c->p->naggs; a++)
				plan_saves(c, s, c->p->aggs[a].arg);
		} else {
			for (int f = 0; f < c->p->nfields; f++)
				if (c->p->fields[f].kernel)
					plan_saves(c, s, c->p->fields[f].e);
		}
		if (c->save_size[s] == 0)
			c->save_size[s] = 8;
	}
}

/* ---------------------------------------------------------------- string temporaries */

static const struct temp *find_temp(struct cg *c, const struct expr *e)
{
	for (int i = 0; i < c->ntemps; i++)
		if (c->temps[i].e == e)
			return &c->temps[i];
	return NULL;
}

static void emit_int(struct cg *c, const struct expr *e);
static void emit_str_fill(struct cg *c, const struct expr *e, const struct temp *t);

/* Allocates (and emits the code filling) a temporary for every string node under e that
 * needs a buffer, children first.  Literals need none; saved values need none at the end. */
static void temps_for(struct cg *c, const struct expr *e)
{
	struct temp *t;

	if (!e || is_host(e))
		return;
	if (c->span_end && find_save(c, e))
		return;
	if (e->kind == EXPR_CALL && FN_IS_AGG(e->fn)) {
		for (int i = 0; i < e->nargs; i++)
			temps_for(c, e->args[i]);
		return;
	}
	temps_for(c, e->lhs);
	temps_for(c, e->rhs);
	for (int i = 0; i < e->nargs; i++)
		temps_for(c, e->args[i]);
	if (!is_bytes(e) || e->kind == EXPR_STR || find_temp(c, e))
		return;
	if (c->ntemps == MAX_TEMPS) {
		c->err = -E2BIG;
		return;
	}
	t = &c->temps[c->ntemps++];
	t->e = e;
	t->size = (e->ty.size + 7u) & ~7u;
	if (t->size == 0)
		t->size = 8;
	if (e->kind == EXPR_CALL && e->fn == FN_JOIN)
		t->size *= 2; /* room the verifier needs (kernel/weft_net.bpf.h: weft_join_argv) */
	t->off = c->temps_size;
	c->temps_size += t->size;
	if (c->temps_size > c->max_temps_size)
		c->max_temps_size = c->temps_size;
	emit_str_fill(c, e, t);
}

/* ---------------------------------------------------------------- expressions */

static void emit_expr(struct cg *c, const struct expr *e);

/*
 * Remembers that the current program reads field f of a classic tracepoint's record, at the
 * offset of the format compiled against (plan.tpf, the manifest's `tpfield` lines): the agent
 * checks its own kernel's format before loading, since a record laid out otherwise would be
 * read at the wrong bytes and the verifier would take it.
 */
static void tpf_note(struct cg *c, const struct probe_field *f)
{
	struct plan *p = c->p;
	int prog = (int)(c->prog - p->progs);
	struct plan_tpfield *t;

	if (c->prog->raw_tp ||
	    (c->prog->kind != PROBE_TRACEPOINT && c->prog->kind != PROBE_SYSCALL))
		return;
	for (int i = 0; i < p->ntpf; i++)
		if (p->tpf[i].prog == prog && strcmp(p->tpf[i].name, f->name) == 0)
			return;
	if (p->ntpf == PLAN_MAX_TPF) {
		c->err = -E2BIG;
		return;
	}
	if (p->ntpf % 16 == 0) {
		t = realloc(p->tpf, (size_t)(p->ntpf + 16) * sizeof(*t));
		if (!t) {
			c->err = -ENOMEM;
			return;
		}
		p->tpf = t;
	}
	t = &p->tpf[p->ntpf++];
	memset(t, 0, sizeof(*t));
	t->prog = prog;
	snprintf(t->name, sizeof(t->name), "%s", f->name);
	t->offset = f->offset;
	t->size = f->size;
	t->is_signed = f->is_signed;
}

static const struct probe_field *cur_field(struct cg *c, const char *name)
{
	const struct probe_field *f = c->tgt ? sema_target_field(c->tgt, name) : NULL;

	if (!f)
		c->err = -EINVAL;
	else
		tpf_note(c, f);
	return f;
}

static const char *int_ctype(unsigned size, bool is_signed)
{
	switch (size) {
	case 1:
		return is_signed ? "__s8" : "__u8";
	case 2:
		return is_signed ? "__s16" : "__u16";
	case 4:
		return is_signed ? "__s32" : "__u32";
	default:
		return is_signed ? "__s64" : "__u64";
	}
}

static bool prog_is_usdt(const struct cg *c)
{
	return c->prog->kind == PROBE_USDT;
}

/*
 * A tracepoint field as C of type T: read from the record (WEFT_TP), or, in a raw tracepoint
 * program (plan_prog.raw_tp, sema_ksock_raw()), the argument of the same position.
 */
static const char *tp_read(const struct cg *c, const struct probe_field *f, const char *T,
			   char *buf, size_t sz)
{
	struct kbtf *k = c->q->kbtf;
	char cn[160];
	int at;

	if (!c->prog->raw_tp) {
		snprintf(buf, sz, "WEFT_TP(ctx, %u, %s)", f->offset, T);
		return buf;
	}
	at = sema_ksock_raw_field(k, c->tgt, (int)(f - c->tgt->fields));
	if (at >= 0 && f->kind == FIELD_PTR) {
		/* a typed pointer in a tp_btf program (the verifier's PTR_TO_BTF_ID, which no
		 * arithmetic may touch): the query's expressions get its value as a number */
		snprintf(buf, sz,
			 "({ __u64 _v = 0; bpf_probe_read_kernel(&_v, 8, (const __u64 *)ctx + %d); "
			 "(%s)_v; })",
			 at, T);
		return buf;
	}
	if (at >= 0) {
		snprintf(buf, sz, "((%s)WEFT_RAW_ARG(ctx, %d))", T, at);
		return buf;
	}
	/* filled by the tracepoint from the socket (argument 0): read where it does, through
	 * the typed pointer (a load the verifier checks against the kernel's BTF) */
	kbtf_cname(k, kbtf_find(k, at == SEMA_RAW_SK_FAMILY ? "sock_common" : "sock", false), cn,
		   sizeof(cn));
	snprintf(buf, sz, "((%s)__builtin_preserve_access_index(((%s *)WEFT_RAW_ARG(ctx, 0))->%s))",
		 T, cn, at == SEMA_RAW_SK_FAMILY ? "skc_family" : "sk_protocol");
	return buf;
}

/* The attach point's cookie (the `probe` builtin): a raw tracepoint program has one attach
 * point and no cookie (Debian 12's libbpf cannot give it one), so it is that point's. */
static const char *cookie_expr(const struct cg *c, char *buf, size_t sz)
{
	if (c->prog->raw_tp)
		snprintf(buf, sz, "%lluULL",
			 (unsigned long long)c->p->attach[c->prog->first_attach].cookie);
	else
		snprintf(buf, sz, "%s",
			 prog_is_usdt(c) ? "bpf_usdt_cookie(ctx)" : "bpf_get_attach_cookie(ctx)");
	return buf;
}

static void emit_lit_str(struct cg *c, const char *s);

/* A string value: the address of its bytes and its size. */
static void emit_str_ref(struct cg *c, const struct expr *e, uint32_t *size)
{
	const struct saved *sv = c->span_end ? find_save(c, e) : NULL;
	const struct temp *t;

	if (e->kind == EXPR_STR) {
		/* a literal is its own buffer, NUL included: `select 'x'`, str('x') */
		emit_lit_str(c, e->sval);
		*size = (uint32_t)strlen(e->sval) + 1;
		return;
	}
	if (sv) {
		emit(c, "((const char *)&sc->span.b[%u])", sv->off);
		*size = sv->size;
		return;
	}
	t = find_temp(c, e);
	if (!t) {
		c->err = -EINVAL;
		emit(c, "\"\"");
		*size = 1;
		return;
	}
	emit(c, "((const char *)&sc->s[%u])", t->off);
	*size = t->size;
}

/*
 * Kernel struct reads (BTF, CO-RE).  A chain such as cast(args.sk as struct sock)
 * .__sk_common.skc_dport reads memory once per pointer it follows: the base pointer (here
 * args.sk) goes into a variable, and the member is read with bpf_probe_read_kernel() from the
 * address of a __builtin_preserve_access_index() expression over the struct definitions
 * kbtf_emit() wrote, so that libbpf relocates the offset against the running kernel's BTF.
 * A pointer member followed further is such a read itself, nested.  A read that faults (a NULL
 * pointer on the way) gives 0, or "" for a string.
 */
static bool is_kmember(const struct expr *e)
{
	return e->kind == EXPR_MEMBER && e->bi == BI_KMEMBER;
}

/* The pointer a kernel member is read through: e's left side, past embedded structs. */
static const struct expr *kbase_of(const struct expr *e)
{
	const struct expr *b = e->lhs;

	while (b->ty.kind == TY_STRUCT && is_kmember(b))
		b = b->lhs;
	return b;
}

/* `__u64 _bD = (__u64)(BASE);` (D: e's depth in its chain, unique among nested reads). */
static void emit_kbase(struct cg *c, const struct expr *e)
{
	const struct expr *b = kbase_of(e);

	if (b->ty.kind != TY_PTR || !b->ty.btf || !c->q->kbtf) {
		c->err = -EINVAL;
		return;
	}
	emit(c, "__u64 _b%d = (__u64)(", e->aux);
	emit_int(c, b);
	emit(c, "); ");
}

/* The member's path from its base: ->a.b.c */
static void emit_kpath(struct cg *c, const struct expr *e)
{
	if (e->lhs->ty.kind == TY_STRUCT && is_kmember(e->lhs)) {
		emit_kpath(c, e->lhs);
		emit(c, ".%s", e->sval);
	} else {
		emit(c, "->%s", e->sval);
	}
}

/* The CO-RE address of kernel member e (after emit_kbase). */
static void emit_kaddr(struct cg *c, const struct expr *e)
{
	char buf[160];

	emit(c, "__builtin_preserve_access_index(&((%s *)_b%d)",
	     kbtf_cname(c->q->kbtf, kbase_of(e)->ty.btf, buf, sizeof(buf)), e->aux);
	emit_kpath(c, e);
	emit(c, ")");
}

/* An integer or pointer member, as an __s64 C expression. */
static void emit_kread(struct cg *c, const struct expr *e)
{
	const char *ct = e->ty.kind == TY_INT ? int_ctype(e->ty.size, e->ty.is_signed) : "__u64";

	emit(c, "({ ");
	emit_kbase(c, e);
	emit(c, "%s _k%d = 0; bpf_probe_read_kernel(&_k%d, sizeof(_k%d), ", ct, e->aux, e->aux,
	     e->aux);
	emit_kaddr(c, e);
	emit(c, "); (__s64)_k%d; })", e->aux);
}

/*
 * ntop() and join() into their temporary (kernel/weft_net.bpf.h), which emit_str_fill() has
 * zeroed: ntop() from the kind of address sema found (enum inet_arg), join() from an argv in
 * user memory (syscall fields, argN of user probes) or kernel memory.
 */
static void emit_net_fill(struct cg *c, const struct expr *e, const struct temp *t)
{
	const struct expr *a = e->args[0];

	if (e->fn == FN_JOIN) {
		const char *sep = e->nargs == 2 ? e->args[1]->sval : " ";

		emit(c, "\tweft_join_argv(e, &sc->s[%u], %u, (const void *)(", t->off, e->ty.size);
		emit_int(c, a);
		emit(c, "), %d, ", e->ty.user);
		emit_lit_str(c, sep);
		emit(c, ", %u);\n", (unsigned)strlen(sep));
		return;
	}
	switch (a->aux) {
	case INET_ARG_BYTES4:
	case INET_ARG_BYTES16: {
		const struct probe_field *f = cur_field(c, a->sval);

		if (f)
			emit(c, "\tweft_inet_raw(&sc->s[%u], %d, (const char *)ctx + %u, %u);\n",
			     t->off, f->size == 4 ? 2 : 10, f->offset, f->size);
		return;
	}
	case INET_ARG_V4INT:
		emit(c, "\tweft_inet_v4(&sc->s[%u], ", t->off);
		emit_int(c, a);
		emit(c, ");\n");
		return;
	case INET_ARG_SOCKADDR:
		emit(c, "\tweft_inet_sockaddr(&sc->s[%u], (const void *)(", t->off);
		emit_int(c, a);
		emit(c, "), %d);\n", a->ty.user);
		return;
	case INET_ARG_IN6:
		emit(c, "\t{\n\t\t");
		emit_kbase(c, a);
		emit(c, "\n\t\tweft_inet_raw(&sc->s[%u], 10, ", t->off);
		emit_kaddr(c, a);
		emit(c, ", 16);\n\t}\n");
		return;
	default:
		c->err = -EINVAL;
		return;
	}
}

static bool graph_ksock(const struct cg *c);

/*
 * The task's comm into the 16 bytes at dst (a C lvalue's address): bpf_get_current_comm(),
 * or in a kernel:sockets program, two loads from task_struct.comm through BTF
 * (sema_ksock_comm(): 45 ns less a call; the comm is a string there, never a key).
 */
static void emit_comm_read(struct cg *c, const char *ind, const char *dst)
{
	char tn[160];

	if (!graph_ksock(c) || !c->q->kbtf || !sema_ksock_comm(c->q->kbtf)) {
		emit(c, "%sweft_comm(%s);\n", ind, dst);
		return;
	}
	kbtf_cname(c->q->kbtf, kbtf_find(c->q->kbtf, "task_struct", false), tn, sizeof(tn));
	emit(c, "%s{\n%s\t%s *_t = (%s *)bpf_get_current_task_btf();\n\n", ind, ind, tn, tn);
	emit(c,
	     "%s\t((__u64 *)(%s))[0] = *(__u64 *)__builtin_preserve_access_index(&_t->comm[0]);\n",
	     ind, dst);
	emit(c,
	     "%s\t((__u64 *)(%s))[1] = *(__u64 *)__builtin_preserve_access_index(&_t->comm[8]);\n",
	     ind, dst);
	emit(c, "%s}\n", ind);
}

static void emit_str_fill(struct cg *c, const struct expr *e, const struct temp *t)
{
	emit(c, "\t__builtin_memset(&sc->s[%u], 0, %u);\n", t->off, t->size);
	if (e->kind == EXPR_NAME && e->bi == BI_COMM) {
		char dst[32];

		snprintf(dst, sizeof(dst), "&sc->s[%u]", t->off);
		emit_comm_read(c, "\t", dst);
		return;
	}
	if (e->kind == EXPR_MEMBER && (e->bi == BI_FIELD || e->bi == BI_END_FIELD)) {
		const struct probe_field *f = cur_field(c, e->sval);

		if (!f || c->prog->raw_tp) { /* sema_ksock_raw(): no string fields */
			c->err = -EINVAL;
			return;
		}
		if (f->kind == FIELD_DATA_LOC)
			emit(c, "\tweft_tp_str_loc(e, ctx, %u, &sc->s[%u], %u);\n", f->offset,
			     t->off, t->size);
		else
			emit(c, "\tweft_tp_str(e, ctx, %u, &sc->s[%u], %u, %u);\n", f->offset,
			     t->off, t->size < f->size + 1u ? t->size : f->size + 1u, f->size);
		return;
	}
	if (is_kmember(e)) {
		/* a char array member, read as a string */
		emit(c, "\t{\n\t\t");
		emit_kbase(c, e);
		emit(c, "\n\t\tweft_str_kernel(e, &sc->s[%u], %u, ", t->off,
		     t->size < e->ty.size ? t->size : e->ty.size);
		emit_kaddr(c, e);
		emit(c, ");\n\t}\n");
		return;
	}
	if (e->kind == EXPR_CALL && (e->fn == FN_NTOP || e->fn == FN_JOIN)) {
		emit_net_fill(c, e, t);
		return;
	}
	if (e->kind == EXPR_CALL && e->fn == FN_STR) {
		const struct expr *a = e->args[0];
		uint32_t sz = e->ty.size ? e->ty.size : 64;

		if (a->ty.kind == TY_STR) {
			uint32_t asz;

			emit(c, "\t__builtin_memcpy(&sc->s[%u], ", t->off);
			emit_str_ref(c, a, &asz);
			emit(c, ", %u);\n\tsc->s[%u] = 0;\n", (asz < sz ? asz : sz),
			     t->off + sz - 1);
			return;
		}
		emit(c, "\tweft_str_%s(e, &sc->s[%u], %u, (const void *)(",
		     e->ty.user ? "user" : "kernel", t->off, sz);
		emit_int(c, a);
		emit(c, "));\n");
		return;
	}
	c->err = -EINVAL;
}

static void emit_leaf(struct cg *c, const struct expr *e)
{
	char rb[320];

	switch (e->bi) {
	case BI_TIME:
	case BI_WALLTIME: /* the agent adds the wall clock's offset at output (lang-a) */
		emit(c, "(__s64)weft_time()");
		return;
	case BI_PID:
		emit(c, "(__s64)weft_pid()");
		return;
	case BI_TID:
		emit(c, "(__s64)weft_tid()");
		return;
	case BI_UID:
		emit(c, "(__s64)weft_uid()");
		return;
	case BI_CPU:
		emit(c, "(__s64)weft_cpu()");
		return;
	case BI_CGROUP:
		emit(c, "(__s64)weft_cgroup()");
		return;
	case BI_PROBE:
		emit(c, "(__s64)%s", cookie_expr(c, rb, sizeof(rb)));
		return;
	case BI_USTACK:
	case BI_KSTACK:
		/* ival: a depth (ustack(8)), which travels in the id's high bits (weft_abi.h) */
		if (e->ival > 0)
			emit(c, "weft_stack_depth(weft_%s(ctx, e), %lld)",
			     e->bi == BI_USTACK ? "ustack" : "kstack", (long long)e->ival);
		else
			emit(c, "weft_%s(ctx, e)", e->bi == BI_USTACK ? "ustack" : "kstack");
		return;
	case BI_DURATION:
		emit(c, "span_d");
		return;
	case BI_CURTASK:
		emit(c, "(__s64)bpf_get_current_task()");
		return;
	case BI_RETVAL:
		if (c->prog->kind == PROBE_TRACEPOINT || c->prog->kind == PROBE_SYSCALL) {
			const struct probe_field *f = cur_field(c, "ret");

			if (f)
				emit(c, "(__s64)%s",
				     tp_read(c, f, int_ctype(f->size, true), rb, sizeof(rb)));
			return;
		}
		emit(c, "WEFT_RETVAL(ctx)");
		return;
	case BI_ARG:
		if (prog_is_usdt(c))
			emit(c, "({ long _a = 0; bpf_usdt_arg(ctx, %d, &_a); (__s64)_a; })",
			     e->aux);
		else
			emit(c, "WEFT_ARG%d(ctx)", e->aux);
		return;
	case BI_FIELD:
	case BI_END_FIELD: { /* in the end program, whose target is the end probe */
		const struct probe_field *f = cur_field(c, e->sval);

		if (!f)
			return;
		emit(c, "(__s64)%s",
		     tp_read(c, f,
			     f->kind == FIELD_PTR ? "__u64" : int_ctype(f->size, f->is_signed), rb,
			     sizeof(rb)));
		return;
	}
	default:
		c->err = -EINVAL;
		emit(c, "0");
	}
}

static bool cmp_signed(const struct expr *a, const struct expr *b)
{
	return a->ty.is_signed || b->ty.is_signed;
}

static void emit_str_eq(struct cg *c, const struct expr *a, const struct expr *b)
{
	uint32_t sa, sb;

	/* WEFT_STREQ unrolls a literal of at most STREQ_LIT_MAX bytes; a longer one is
	 * compared by the loop of weft_q_streq (WEFT_STREQ would say "not equal") */
	if (b->kind == EXPR_STR && a->kind != EXPR_STR && strlen(b->sval) <= STREQ_LIT_MAX) {
		const struct temp *t = c->span_end && find_save(c, a) ? NULL : find_temp(c, a);

		/* a word at a time where the string's buffer is 8-aligned: a temp of a query
		 * without a group key, whose scratch strings begin at byte 8 (struct wscratch) */
		if (t && !c->p->aggregating) {
			emit(c, "WEFT_STREQ_W(&sc->s[%u], %u, \"", t->off, t->size);
		} else {
			emit(c, "WEFT_STREQ(");
			emit_str_ref(c, a, &sa);
			emit(c, ", %u, \"", sa);
		}
		for (const char *s = b->sval; *s; s++) {
			unsigned char ch = (unsigned char)*s;

			if (ch < ' ' || ch >= 0x7f || ch == '"' || ch == '\\')
				emit(c, "\\%03o", ch);
			else
				emit(c, "%c", ch);
		}
		emit(c, "\")");
		return;
	}
	if (a->kind == EXPR_STR && b->kind != EXPR_STR && strlen(a->sval) <= STREQ_LIT_MAX) {
		emit_str_eq(c, b, a);
		return;
	}
	emit(c, "weft_q_streq(");
	emit_str_ref(c, a, &sa);
	emit(c, ", %u, ", sa);
	emit_str_ref(c, b, &sb);
	emit(c, ", %u)", sb);
}

static void emit_lit_str(struct cg *c, const char *s)
{
	emit(c, "\"");
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;

		if (ch < ' ' || ch >= 0x7f || ch == '"' || ch == '\\')
			emit(c, "\\%03o", ch);
		else
			emit(c, "%c", ch);
	}
	emit(c, "\"");
}

/* `probe = 'NAME'` / `probe like 'GLOB'`: the cookies of the attach points so named.  A name
 * that matches none of the query's probes is an error, not a silent `false`. */
static void emit_probe_match(struct cg *c, const struct expr *e, const char *pat, bool glob)
{
	char rb[64];
	int n = 0;

	emit(c, "({ __u64 _c = %s; (0", cookie_expr(c, rb, sizeof(rb)));
	for (int i = 0; i < c->p->nattach; i++) {
		const char *name = c->p->attach[i].target.name;

		if (glob ? probe_glob_match(pat, name) : strcmp(pat, name) == 0) {
			emit(c, " || _c == %lluULL", (unsigned long long)c->p->attach[i].cookie);
			n++;
		}
	}
	emit(c, "); })");
	if (n == 0 && !c->err) {
		struct diag *d = diag_error(c->dl, DIAG_E_PROBE_NO_MATCH, e->loc,
					    "no probe of this query is named '%s'", pat);

		diag_fix(d, "the query's probes are named like %s",
			 c->p->nattach ? c->p->attach[0].target.name : "?");
		c->err = -EINVAL;
	}
}

/* An integer-valued expression (also booleans), as an __s64 C expression. */
static void emit_int(struct cg *c, const struct expr *e)
{
	emit_expr(c, e);
}

/* An integer constant as C; INT64_MIN has no literal of its own. */
static void emit_const(struct cg *c, int64_t v)
{
	if (v == INT64_MIN)
		emit(c, "((__s64)(-9223372036854775807LL - 1))");
	else
		emit(c, "((__s64)%lldLL)", (long long)v);
}

static void emit_expr(struct cg *c, const struct expr *e)
{
	const struct saved *sv = c->span_end ? find_save(c, e) : NULL;
	uint32_t sz;

	if (sv && !sv->is_str) {
		emit(c, "(*(__s64 *)&sc->span.b[%u])", sv->off);
		return;
	}
	/* an operator over constants: sema folded its value (1024 * 4, 1 - 1, 2 > 1) */
	if (e->is_const && (e->kind == EXPR_UNARY || e->kind == EXPR_BINARY) &&
	    (e->ty.kind == TY_INT || e->ty.kind == TY_BOOL)) {
		emit_const(c, e->ival);
		return;
	}
	switch (e->kind) {
	case EXPR_INT:
		emit_const(c, e->ival);
		return;
	case EXPR_FLOAT:
		emit(c, "((__s64)%lld)", (long long)e->fval);
		return;
	case EXPR_STR:
		emit_lit_str(c, e->sval);
		return;
	case EXPR_NAME:
		emit_leaf(c, e);
		return;
	case EXPR_MEMBER:
		if (e->ty.kind == TY_STR) {
			emit_str_ref(c, e, &sz);
			return;
		}
		if (is_kmember(e)) {
			emit_kread(c, e);
			return;
		}
		emit_leaf(c, e);
		return;
	case EXPR_CAST:
		/* the address itself: its type matters only to the members read through it */
		emit(c, "((__s64)(");
		emit_int(c, e->lhs);
		emit(c, "))");
		return;
	case EXPR_CALL:
		switch (e->fn) {
		case FN_STR:
		case FN_NTOP:
		case FN_JOIN:
			emit_str_ref(c, e, &sz);
			return;
		case FN_SOCKPORT:
			emit(c, "weft_sockport((const void *)(");
			emit_int(c, e->args[0]);
			emit(c, "), %d)", e->args[0]->ty.user);
			return;
		case FN_LOG2:
			emit(c, "weft_q_log2(");
			emit_int(c, e->args[0]);
			emit(c, ")");
			return;
		case FN_BUCKET:
			emit(c, "weft_q_bucket(");
			emit_int(c, e->args[0]);
			emit(c, ", ");
			emit_int(c, e->args[1]);
			emit(c, ")");
			return;
		case FN_NTOHS:
		case FN_NTOHL:
			emit(c, e->fn == FN_NTOHS ? "((__s64)__builtin_bswap16((__u16)(" :
						    "((__s64)__builtin_bswap32((__u32)(");
			emit_int(c, e->args[0]);
			emit(c, ")))");
			return;
		case FN_USYM:
		case FN_KSYM:
		case FN_SYSNAME: /* lang-a: named or shown in a unit at output */
		case FN_SIGNAME:
		case FN_ERRNAME:
		case FN_ENUMNAME:
		case FN_UNIT:
			emit(c, "((__s64)(");
			emit_int(c, e->args[0]);
			emit(c, "))");
			return;
		case FN_EXT: {
			/* a function of the `using` file, each argument cast to its parameter's
			 * type as the file writes it (sema checked integer or pointer) */
			const struct ext_fn *f = &c->q->ext->fns[e->aux];

			emit(c, "((__s64)%s(", f->name);
			for (int i = 0; i < e->nargs; i++) {
				emit(c, "%s(%s)(", i ? ", " : "", f->ptype[i]);
				emit_int(c, e->args[i]);
				emit(c, ")");
			}
			emit(c, "))");
			return;
		}
		default:
			c->err = -EINVAL;
			emit(c, "0");
			return;
		}
	case EXPR_UNARY:
		/* negation in unsigned arithmetic: -INT64_MIN wraps instead of being undefined */
		emit(c, e->op == OP_NOT ? "(!(" : "((__s64)(-(__u64)(");
		emit_expr(c, e->lhs);
		emit(c, e->op == OP_NOT ? "))" : ")))");
		return;
	case EXPR_LIKE:
		if (e->lhs->kind == EXPR_NAME && e->lhs->bi == BI_PROBE) {
			emit_probe_match(c, e, e->rhs->sval, true);
			return;
		}
		emit(c, "WEFT_LIKE(");
		emit_str_ref(c, e->lhs, &sz);
		emit(c, ", %u, ", sz);
		emit_lit_str(c, e->rhs->sval);
		emit(c, ")");
		return;
	case EXPR_IN:
		emit(c, "(");
		for (int i = 0; i < e->nargs; i++) {
			if (i)
				emit(c, " || ");
			if (e->lhs->ty.kind == TY_STR) {
				emit_str_eq(c, e->lhs, e->args[i]);
			} else {
				emit(c, "(");
				emit_int(c, e->lhs);
				emit(c, " == ");
				emit_int(c, e->args[i]);
				emit(c, ")");
			}
		}
		emit(c, ")");
		return;
	case EXPR_BINARY:
		break;
	}

	/* binary */
	switch (e->op) {
	case OP_AND:
	case OP_OR:
		emit(c, "(");
		emit_expr(c, e->lhs);
		emit(c, e->op == OP_AND ? " && " : " || ");
		emit_expr(c, e->rhs);
		emit(c, ")");
		return;
	case OP_EQ:
	case OP_NE:
		if ((e->lhs->bi == BI_PROBE && e->rhs->kind == EXPR_STR) ||
		    (e->rhs->bi == BI_PROBE && e->lhs->kind == EXPR_STR)) {
			emit(c, e->op == OP_NE ? "(!" : "(");
			emit_probe_match(c, e,
					 e->lhs->kind == EXPR_STR ? e->lhs->sval : e->rhs->sval,
					 false);
			emit(c, ")");
			return;
		}
		if (e->lhs->ty.kind == TY_STR) {
			emit(c, e->op == OP_NE ? "(!" : "(");
			emit_str_eq(c, e->lhs, e->rhs);
			emit(c, ")");
			return;
		}
		/* fall through */
	case OP_LT:
	case OP_LE:
	case OP_GT:
	case OP_GE: {
		static const char *const ops[] = { [OP_EQ] = "==", [OP_NE] = "!=", [OP_LT] = "<",
						   [OP_LE] = "<=", [OP_GT] = ">",  [OP_GE] = ">=" };
		const char *t = cmp_signed(e->lhs, e->rhs) ? "__s64" : "__u64";

		emit(c, "((%s)", t);
		emit_int(c, e->lhs);
		emit(c, " %s (%s)", ops[e->op], t);
		emit_int(c, e->rhs);
		emit(c, ")");
		return;
	}
	case OP_DIV:
	case OP_MOD:
		/* BPF before ISA v4 has no signed division: weft_q_sdiv/smod do it by hand.  All
		 * four helpers define x / 0 = 0 and x % 0 = x (the BPF rule) in C too: a bare
		 * `x / 0` is undefined in C, and clang may fold it to anything. */
		if (e->ty.is_signed)
			emit(c, e->op == OP_DIV ? "weft_q_sdiv(" : "weft_q_smod(");
		else
			emit(c, e->op == OP_DIV ? "weft_q_udiv((__u64)" : "weft_q_umod((__u64)");
		emit_int(c, e->lhs);
		emit(c, e->ty.is_signed ? ", " : ", (__u64)");
		emit_int(c, e->rhs);
		emit(c, ")");
		return;
	default: {
		const char *op = e->op == OP_ADD ? "+" : e->op == OP_SUB ? "-" : "*";

		/* wrap-around arithmetic is defined on unsigned values */
		emit(c, "((__s64)((__u64)");
		emit_int(c, e->lhs);
		emit(c, " %s (__u64)", op);
		emit_int(c, e->rhs);
		emit(c, "))");
		return;
	}
	}
}

/* ---------------------------------------------------------------- programs */

static const char *sec_name(enum probe_kind k)
{
	switch (k) {
	case PROBE_TRACEPOINT:
	case PROBE_SYSCALL:
		return "tracepoint";
	case PROBE_UPROBE:
		return "uprobe";
	case PROBE_URETPROBE:
		return "uretprobe";
	case PROBE_USDT:
		return "usdt";
	case PROBE_KPROBE:
		return "kprobe";
	case PROBE_KRETPROBE:
		return "kretprobe";
	default:
		return "perf_event";
	}
}

static void emit_store_value(struct cg *c, const char *base, uint32_t off, uint32_t size,
			     const struct expr *e)
{
	if (is_bytes(e)) {
		uint32_t ssz;

		emit(c, "\t__builtin_memcpy(&%s[%u], ", base, off);
		emit_str_ref(c, e, &ssz);
		emit(c, ", %u);\n", ssz < size ? ssz : size);
		return;
	}
	emit(c, "\t*(__s64 *)&%s[%u] = ", base, off);
	emit_int(c, e);
	emit(c, ";\n");
	/* user stacks and symbols carry the process, for symbolization (plan.c: 16 bytes) */
	if (size == 16 &&
	    ((e->ty.kind == TY_STACK && e->ty.user) || (e->kind == EXPR_CALL && e->fn == FN_USYM)))
		emit(c, "\t*(__s64 *)&%s[%u] = (__s64)weft_pid();\n", base, off + 8);
}

static void emit_agg_update(struct cg *c, const struct plan_agg *a)
{
	static const char *const fn[AGG__COUNT] = {
		[AGG_COUNT] = "count", [AGG_SUM] = "sum",	    [AGG_MIN] = "min",
		[AGG_MAX] = "max",     [AGG_AVG] = "avg",	    [AGG_STDDEV] = "stddev",
		[AGG_HIST] = "hist",   [AGG_QUANTILE] = "quantile",
	};
	static const char *const ty[AGG__COUNT] = {
		[AGG_COUNT] = "count", [AGG_SUM] = "sum",	    [AGG_MIN] = "minmax",
		[AGG_MAX] = "minmax",  [AGG_AVG] = "avg",	    [AGG_STDDEV] = "stddev",
		[AGG_HIST] = "hist",   [AGG_QUANTILE] = "quantile", [AGG_DISTINCT] = "distinct",
	};

	switch (a->spec.kind) {
	case AGG_COUNT:
		emit(c, "\tweft_aggval_count_add((struct weft_aggval_count *)&v->b[%u], 1);\n",
		     a->offset);
		return;
	case AGG_LHIST:
		emit(c, "\tweft_aggval_lhist_add((__u64 *)&v->b[%u], ", a->offset);
		emit_int(c, a->arg);
		emit(c, ", %lldLL, %lldLL, %lldLL);\n", (long long)a->spec.lo,
		     (long long)a->spec.hi, (long long)a->spec.step);
		return;
	case AGG_DISTINCT:
		if (a->arg->ty.kind == TY_STR) {
			uint32_t sz;

			emit(c,
			     "\tweft_aggval_distinct_add_hash((struct weft_aggval_distinct *)&v->b[%u], "
			     "weft_hash_str(",
			     a->offset);
			emit_str_ref(c, a->arg, &sz);
			emit(c, ", %u));\n", sz);
			return;
		}
		emit(c, "\tweft_aggval_distinct_add((struct weft_aggval_distinct *)&v->b[%u], ",
		     a->offset);
		emit_int(c, a->arg);
		emit(c, ");\n");
		return;
	default:
		emit(c, "\tweft_aggval_%s_add((struct weft_aggval_%s *)&v->b[%u], ",
		     fn[a->spec.kind], ty[a->spec.kind], a->offset);
		emit_int(c, a->arg);
		emit(c, ");\n");
	}
}

static bool plan_keyed(const struct plan *p)
{
	for (int k = 0; k < p->nkeys; k++)
		if (p->keys[k].kernel)
			return true;
	return false;
}

/*
 * A graph query's record (struct weft_graph_rec): what fired, when, where, the arguments of a
 * weft provider probe and its strings (read from the traced process, bounded, faults and
 * truncation counted like str()'s), or a span's duration.  What each probe of weft's provider
 * records is decided here, per attach point, from the probe's name.
 */
/*
 * kernel:sockets (probes/kernel.c): the tracepoints sock:sock_send_length and
 * sock:sock_recv_length.  Only what moved bytes on a TCP socket over IPv4 or IPv6 is recorded
 * (family 2 or 10, protocol 6, ret > 0, a receive without MSG_PEEK); the record then carries
 *   a[0] laddr, a[1] raddr (IPv4, host order; 0 on IPv6), a[2] lport, a[3] rport, a[4] the
 *   stream's sequence number after the send (tcp_sock.write_seq) or receive (copied_seq),
 *   a[5] bytes, a[6] sk, family, and on IPv6 in6: skc_v6_rcv_saddr then skc_v6_daddr as
 *   they are (network order; an IPv4 peer v4-mapped: graph/kmsg.c normalises),
 * read through BTF (CO-RE: the members sema marked, mark_kernel_edges()).  The IPv4 path
 * reads what it always did; the 16-byte reads are on IPv6 only.  A kernel whose BTF has no
 * IPv6 members (no CONFIG_IPV6) gets the IPv4-only program.
 */
static bool graph_ksock(const struct cg *c)
{
	return c->src && c->src->start.kernel && c->tgt && strcmp(c->tgt->category, "sock") == 0;
}

/* Whether a program of the graph query is one of kernel:sockets (graph_ksock()): its records
 * go to the CPUs' own rings (WEFT_WANT_PCR). */
static bool plan_ksock(const struct cg *c)
{
	const struct plan *p = c->p;

	if (!p->graph)
		return false;
	for (int i = 0; i < p->nattach; i++)
		if (c->q->sources[p->attach[i].source].start.kernel &&
		    strcmp(p->attach[i].target.category, "sock") == 0)
			return true;
	return false;
}

/*
 * kernel:sched and kernel:process (probes/kernel.c): tracepoints of category sched.  The
 * record's thread is the waker, the parent, the thread that execs or exits; a[0] is the woken
 * thread (sched_waking, sched_wakeup_new: pid) or the child (sched_process_fork: child_pid);
 * s0 the file that sched_process_exec ran.  A thread waking itself is not recorded.
 */
static bool graph_ksched(const struct cg *c)
{
	return c->src && c->src->start.kernel && c->tgt && strcmp(c->tgt->category, "sched") == 0;
}

static int ksched_kind(const char *event)
{
	if (strcmp(event, "sched_waking") == 0 || strcmp(event, "sched_wakeup_new") == 0)
		return WEFT_GREC_KWAKE;
	if (strcmp(event, "sched_process_fork") == 0)
		return WEFT_GREC_KFORK;
	if (strcmp(event, "sched_process_exec") == 0)
		return WEFT_GREC_KEXEC;
	return WEFT_GREC_KEXIT;
}

static void emit_graph_ksched_filter(struct cg *c)
{
	const struct probe_field *pid;

	if (ksched_kind(c->tgt->event) != WEFT_GREC_KWAKE)
		return;
	pid = cur_field(c, "pid");
	if (!pid)
		return;
	emit(c,
	     "\tif ((__u32)WEFT_TP(ctx, %u, __s32) == (__u32)bpf_get_current_pid_tgid())\n"
	     "\t\treturn 0;\n",
	     pid->offset);
}

static void emit_graph_ksched(struct cg *c)
{
	int kind = ksched_kind(c->tgt->event);
	const struct probe_field *f;

	emit(c, "#pragma clang loop unroll(full)\n");
	emit(c, "\t\tfor (int i = 0; i < WEFT_GREC_NARGS; i++)\n\t\t\tg->a[i] = 0;\n");
	emit(c, "\t\tg->kind = %d;\n", kind);
	switch (kind) {
	case WEFT_GREC_KWAKE:
	case WEFT_GREC_KFORK:
		f = cur_field(c, kind == WEFT_GREC_KWAKE ? "pid" : "child_pid");
		if (f)
			emit(c, "\t\tg->a[0] = (__u32)WEFT_TP(ctx, %u, __s32);\n", f->offset);
		break;
	case WEFT_GREC_KEXEC:
		f = cur_field(c, "filename");
		if (f)
			emit(c, "\t\tweft_tp_str_loc(e, ctx, %u, g->s0, WEFT_GREC_STR);\n",
			     f->offset);
		break;
	default:
		break;
	}
}

static void emit_graph_ksock_filter(struct cg *c)
{
	const struct probe_field *fam = cur_field(c, "family"), *proto = cur_field(c, "protocol"),
				 *ret = cur_field(c, "ret"), *flags = cur_field(c, "flags");
	char f1[320], f2[320], f3[320], f4[320];

	if (!fam || !proto || !ret || !flags)
		return;
	tp_read(c, fam, "__u16", f1, sizeof(f1));
	tp_read(c, proto, "__u16", f2, sizeof(f2));
	tp_read(c, ret, "__s32", f3, sizeof(f3));
	tp_read(c, flags, "__s32", f4, sizeof(f4));
	/* the family once (read from the socket by a raw tracepoint on later kernels) */
	emit(c, "\t__u16 _kfam = %s;\n\n", f1);
	if (c->q->kbtf && sema_ksock_ipv6(c->q->kbtf))
		emit(c,
		     "\tif ((_kfam != 2 && _kfam != 10) ||\n"
		     "\t    %s != 6 ||\n"
		     "\t    %s <= 0 || (%s & 2))\n"
		     "\t\treturn 0;\n",
		     f2, f3, f4);
	else
		emit(c,
		     "\tif (_kfam != 2 || %s != 6 ||\n"
		     "\t    %s <= 0 || (%s & 2))\n"
		     "\t\treturn 0;\n",
		     f2, f3, f4);
}

/* dst = the socket's member m (of struct type T, in sock_common): a load through the typed
 * pointer in a tp_btf program, else bpf_probe_read_kernel() (sk is a number there). */
static void ksk_read(struct cg *c, const char *ind, const char *dst, int size, const char *T,
		     const char *m)
{
	if (c->prog->raw_tp)
		emit(c, "%s%s = __builtin_preserve_access_index(((%s *)_sk)->%s);\n", ind, dst, T,
		     m);
	else
		emit(c,
		     "%sbpf_probe_read_kernel(&%s, %d, __builtin_preserve_access_index("
		     "&((%s *)_sk)->%s));\n",
		     ind, dst, size, T, m);
}

static void emit_graph_ksock(struct cg *c)
{
	const struct plan *p = c->p;
	const struct probe_field *sk = cur_field(c, "sk"), *ret = cur_field(c, "ret"),
				 *fam = cur_field(c, "family");
	struct kbtf *k = c->q->kbtf;
	char sc[160], ts[160], rb[320];
	int prog = (int)(c->prog - p->progs);
	bool v6;

	if (!sk || !ret || !fam || !k) {
		c->err = -EINVAL;
		return;
	}
	v6 = sema_ksock_ipv6(k);
	kbtf_cname(k, kbtf_find(k, "sock_common", false), sc, sizeof(sc));
	kbtf_cname(k, kbtf_find(k, "tcp_sock", false), ts, sizeof(ts));
	/* the kind, the cookie and the family in locals: the code reads them again below, and a
	 * read of the record's new line waits for it (docs/performance.md, "Kernel edges: a ring
	 * of each CPU's own") */
	/* a raw tracepoint's cookie is a constant; a classic one's is a helper's, read once */
	emit(c, "\t\t__u32 _kk = 0;\n\n\t\tswitch ((__u32)%s) {\n",
	     c->prog->raw_tp ? cookie_expr(c, rb, sizeof(rb)) : "g->cookie");
	for (int i = 0; i < p->nattach; i++)
		if (p->attach[i].prog == prog)
			emit(c, "\t\tcase %d:\n\t\t\t_kk = %d;\n\t\t\tbreak;\n",
			     (int)p->attach[i].cookie,
			     strcmp(p->attach[i].target.event, "sock_send_length") == 0 ?
				     WEFT_GREC_KSEND :
				     WEFT_GREC_KRECV);
	emit(c, "\t\t}\n\t\tg->kind = _kk;\n");
	if (c->prog->raw_tp) /* the typed pointer (tp_btf): its members are loads */
		emit(c, "\t\t{\n\t\t\t__u64 _sk = (__u64)WEFT_RAW_ARG(ctx, %d);\n",
		     sema_ksock_raw_field(k, c->tgt, (int)(sk - c->tgt->fields)));
	else
		emit(c, "\t\t{\n\t\t\t__u64 _sk = %s;\n", tp_read(c, sk, "__u64", rb, sizeof(rb)));
	emit(c, "\t\t\t__u32 _la = 0, _ra = 0, _seq = 0;\n\t\t\t__u16 _lp = 0, _rp = 0;\n\n");
	emit(c, "\t\t\tg->family = _kfam; /* read by the filter */\n\t\t\tg->reserved = 0;\n");
	/* the IPv4 path reads what it did before; the 16-byte reads only on IPv6 */
	if (v6)
		emit(c, "\t\t\tif (_kfam == %d) {\n", WEFT_AF_INET);
	ksk_read(c, v6 ? "\t\t\t\t" : "\t\t\t", "_la", 4, sc, "skc_rcv_saddr");
	ksk_read(c, v6 ? "\t\t\t\t" : "\t\t\t", "_ra", 4, sc, "skc_daddr");
	if (v6) {
		emit(c, "\t\t\t} else {\n");
		emit(c,
		     "\t\t\t\tbpf_probe_read_kernel(&g->in6[0], 16, "
		     "__builtin_preserve_access_index(&((%s *)_sk)->skc_v6_rcv_saddr));\n",
		     sc);
		emit(c,
		     "\t\t\t\tbpf_probe_read_kernel(&g->in6[16], 16, "
		     "__builtin_preserve_access_index(&((%s *)_sk)->skc_v6_daddr));\n",
		     sc);
		emit(c, "\t\t\t}\n");
	}
	ksk_read(c, "\t\t\t", "_lp", 2, sc, "skc_num");
	ksk_read(c, "\t\t\t", "_rp", 2, sc, "skc_dport");
	/* tcp_sock lies beyond struct sock, where a typed sock pointer may not load: in a tp_btf
	 * program, bpf_skc_to_tcp_sock() (Linux 5.9; kernel:sockets needs 6.3) gives the typed
	 * tcp_sock: a load, not a copy (330 -> 301 ns a call in tools/bench/kedges.sh), else a
	 * copy */
	if (c->prog->raw_tp) {
		emit(c, "\t\t\t{\n\t\t\t\t%s *_tp = (%s *)bpf_skc_to_tcp_sock((void *)_sk);\n\n",
		     ts, ts);
		emit(c,
		     "\t\t\t\tif (_tp)\n\t\t\t\t\t_seq = _kk == %d ? "
		     "__builtin_preserve_access_index(_tp->write_seq) : "
		     "__builtin_preserve_access_index(_tp->copied_seq);\n\t\t\t}\n",
		     WEFT_GREC_KSEND);
	} else {
		emit(c,
		     "\t\t\tif (_kk == %d)\n\t\t\t\tbpf_probe_read_kernel(&_seq, 4, "
		     "__builtin_preserve_access_index(&((%s *)_sk)->write_seq));\n",
		     WEFT_GREC_KSEND, ts);
		emit(c,
		     "\t\t\telse\n\t\t\t\tbpf_probe_read_kernel(&_seq, 4, "
		     "__builtin_preserve_access_index(&((%s *)_sk)->copied_seq));\n",
		     ts);
	}
	emit(c, "\t\t\tg->a[0] = __builtin_bswap32(_la);\n\t\t\tg->a[1] = "
		"__builtin_bswap32(_ra);\n");
	emit(c, "\t\t\tg->a[2] = _lp;\n\t\t\tg->a[3] = __builtin_bswap16(_rp);\n");
	emit(c, "\t\t\tg->a[4] = _seq;\n\t\t\tg->a[5] = (__u64)%s;\n",
	     tp_read(c, ret, "__s32", rb, sizeof(rb)));
	emit(c, "\t\t\tg->a[6] = _sk;\n\t\t}\n");
}

/* A temporary of the program holding the thread's comm (the filter read it: `comm = '...'`),
 * or NULL.  Temporaries are filled at the top of the program's function, before any branch. */
static const struct temp *comm_temp(const struct cg *c)
{
	for (int i = 0; i < c->ntemps; i++)
		if (c->temps[i].e->kind == EXPR_NAME && c->temps[i].e->bi == BI_COMM &&
		    c->temps[i].size >= sizeof(((struct weft_graph_rec *)0)->comm))
			return &c->temps[i];
	return NULL;
}

static void emit_graph_sink(struct cg *c)
{
	const struct temp *ct;
	const struct plan *p = c->p;
	int prog = (int)(c->prog - p->progs);
	char rb[64];

	if (graph_ksock(c))
		emit_graph_ksock_filter(c);
	if (graph_ksched(c))
		emit_graph_ksched_filter(c);
	if (graph_ksock(c)) /* no strings: the record ends before them (WEFT_GREC_SHORT); in
			     * the CPU's own ring (kernel/weft.bpf.h, weft_pcr_reserve()) */
		emit(c,
		     "\tstruct weft_pcr_slot *_pcs;\n\tstruct weft_pcr_pos *_pcp;\n\n"
		     "\tr = (struct wrec *)weft_pcr_reserve(sizeof(struct weft_rec_hdr) + "
		     "WEFT_GREC_SHORT, %d, e, &_pcs, &_pcp);\n",
		     c->prog->source);
	else
		emit(c, "\tr = WEFT_REC_RESERVE(struct wrec, %d, e);\n", c->prog->source);
	emit(c, "\tif (!r)\n\t\treturn 0;\n");
	emit(c, "\t{\n\t\tstruct weft_graph_rec *g = (struct weft_graph_rec *)r->b;\n");
	emit(c, "\t\t__u64 pt = bpf_get_current_pid_tgid();\n\n");
	emit(c, "\t\tg->time = weft_time();\n");
	emit(c, "\t\tg->dur = %s;\n", c->span_end ? "(__u64)span_d" : "0");
	emit(c, "\t\tg->pid = (__u32)(pt >> 32);\n\t\tg->tid = (__u32)pt;\n");
	emit(c, "\t\tg->cookie = (__u32)%s;\n", cookie_expr(c, rb, sizeof(rb)));
	/* the filter's copy when it read the comm: one helper call less a record */
	if ((ct = comm_temp(c)))
		emit(c, "\t\t__builtin_memcpy(g->comm, &sc->s[%u], %zu);\n", ct->off,
		     sizeof(((struct weft_graph_rec *)0)->comm));
	else
		emit_comm_read(c, "\t\t", "g->comm");
	if (!graph_ksock(c))
		emit(c, "\t\tg->s0[0] = 0;\n\t\tg->s1[0] = 0;\n");
	if (graph_ksock(c)) {
		emit_graph_ksock(c);
	} else if (graph_ksched(c)) {
		emit_graph_ksched(c);
	} else if (c->span_end || !prog_is_usdt(c)) {
		emit(c, "#pragma clang loop unroll(full)\n");
		emit(c, "\t\tfor (int i = 0; i < WEFT_GREC_NARGS; i++)\n\t\t\tg->a[i] = 0;\n");
		emit(c, "\t\tg->kind = WEFT_GREC_SPAN;\n");
	} else {
		emit(c, "#pragma clang loop unroll(full)\n");
		emit(c, "\t\tfor (int i = 0; i < WEFT_GREC_NARGS; i++) {\n"
			"\t\t\tlong a = 0;\n\n"
			"\t\t\tbpf_usdt_arg(ctx, i, &a);\n"
			"\t\t\tg->a[i] = (__u64)a;\n\t\t}\n");
		emit(c, "\t\tswitch (g->cookie) {\n");
		for (int i = 0; i < p->nattach; i++) {
			int k;

			if (p->attach[i].prog != prog)
				continue;
			k = sema_graph_probe_kind(&p->attach[i].target);
			emit(c, "\t\tcase %d:\n\t\t\tg->kind = %d;\n\t\t\tbreak;\n",
			     (int)p->attach[i].cookie, k < 0 ? 0 : k);
		}
		emit(c, "\t\tdefault:\n\t\t\tg->kind = 0;\n\t\t}\n");
		emit(c, "\t\tif (g->kind == WEFT_GREC_TASK_BEGIN) {\n"
			"\t\t\tweft_str_user(e, g->s0, WEFT_GREC_STR, (const void *)g->a[4]);\n"
			"\t\t\tweft_str_user(e, g->s1, WEFT_GREC_STR, (const void *)g->a[5]);\n"
			"\t\t} else if (g->kind == WEFT_GREC_EVENT) {\n"
			"\t\t\tweft_str_user(e, g->s0, WEFT_GREC_STR, (const void *)g->a[3]);\n"
			"\t\t} else if (g->kind == WEFT_GREC_EDGE) {\n"
			"\t\t\tweft_str_user(e, g->s0, WEFT_GREC_STR, (const void *)g->a[2]);\n"
			"\t\t}\n");
	}
	if (graph_ksock(c))
		emit(c, "\t}\n\tWEFT_PCR_SUBMIT(r, _cost, _pcs, _pcp);\n");
	else
		emit(c, "\t}\n\tWEFT_REC_SUBMIT_LAZY(r, _cost);\n");
}

/* The body after filtering: aggregate update or stream record. */
static void emit_sink(struct cg *c)
{
	struct plan *p = c->p;

	if (p->graph) {
		emit_graph_sink(c);
		return;
	}

	if (p->aggregating) {
		bool keyed = false;

		for (int k = 0; k < p->nkeys; k++)
			keyed |= p->keys[k].kernel;
		for (int k = 0; k < p->nkeys; k++)
			if (p->keys[k].kernel)
				temps_for(c, p->keys[k].e);
		for (int a = 0; a < p->naggs; a++)
			if (p->aggs[a].arg)
				temps_for(c, p->aggs[a].arg);
		if (keyed) {
			/* WEFT_AGG_UPDATE emits the updates once per epoch half: a lookup whose
			 * map is fixed at its call site takes the kernel's fast path */
			emit(c, "\t__builtin_memset(&sc->key, 0, sizeof(sc->key));\n");
			for (int k = 0; k < p->nkeys; k++)
				if (p->keys[k].kernel)
					emit_store_value(c, "sc->key.b", p->keys[k].offset,
							 p->keys[k].size, p->keys[k].e);
			emit(c, "\tWEFT_AGG_UPDATE(weft_agg, e, &sc->key, v,\n");
		} else {
			emit(c, "\tv = WEFT_AGG_GET1(weft_agg, struct wval, e);\n");
			emit(c, "\tif (!v)\n\t\treturn 0;\n");
		}
		for (int a = 0; a < p->naggs; a++) {
			bool dup = false;

			for (int b = 0; b < a; b++)
				dup |= p->aggs[b].offset == p->aggs[a].offset;
			if (!dup)
				emit_agg_update(c, &p->aggs[a]);
		}
		if (keyed)
			emit(c, "\t);\n");
		return;
	}
	for (int f = 0; f < p->nfields; f++)
		if (p->fields[f].kernel)
			temps_for(c, p->fields[f].e);
	emit(c, "\tr = WEFT_REC_RESERVE(struct wrec, %d, e);\n", c->prog->source);
	emit(c, "\tif (!r)\n\t\treturn 0;\n");
	for (int f = 0; f < p->nfields; f++)
		if (p->fields[f].kernel)
			emit_store_value(c, "r->b", p->fields[f].offset, p->fields[f].size,
					 p->fields[f].e);
	emit(c, "\tWEFT_REC_SUBMIT_LAZY(r, _cost);\n");
}

static void emit_span_key(struct cg *c)
{
	/* the end's own key (span(S on K1, E on K2)), else the one key of both sides */
	const struct expr *key = c->span_end && c->src->end_on ? c->src->end_on : c->src->on;

	if (key) {
		bool saved_end = c->span_end;

		/* the `on` key is evaluated natively by both probes */
		c->span_end = false;
		temps_for(c, key);
		emit(c, "\tspan_key = (__u64)");
		emit_int(c, key);
		emit(c, ";\n");
		c->span_end = saved_end;
	} else {
		emit(c, "\tspan_key = bpf_get_current_pid_tgid();\n");
	}
}

/* `if (!(C)) return 0;` for each conjunct C of the predicate that `part` of a span checks. */
static void emit_where_part(struct cg *c, enum where_part part)
{
	const struct expr *conj[MAX_CONJUNCTS];
	int n = where_conjuncts(c->q->where, conj);
	bool saved_end = c->span_end;

	/* before the match there are no saved values: evaluate natively */
	if (part == WHERE_END_BEFORE_MATCH)
		c->span_end = false;
	for (int i = 0; i < n; i++) {
		if (!where_part_has(c, part, conj[i]))
			continue;
		temps_for(c, conj[i]);
		emit(c, "\tif (!(");
		emit_expr(c, conj[i]);
		emit(c, "))\n\t\treturn 0;\n");
	}
	c->span_end = saved_end;
}

/* `if (!(C)) return 0;` for a span side's own `where` (lang-a), evaluated natively. */
static void emit_side_where(struct cg *c, const struct expr *w)
{
	bool saved_end = c->span_end;

	if (!w)
		return;
	c->span_end = false;
	temps_for(c, w);
	emit(c, "\tif (!(");
	emit_expr(c, w);
	emit(c, "))\n\t\treturn 0;\n");
	c->span_end = saved_end;
}

/* One program's function: the start or the end of a span, or a plain probe, under `head`
 * (a SEC() program, or an inline half of a program that is both ends of a span). */
static void emit_prog_fn(struct cg *c, const struct plan_prog *pr, bool is_end, const char *head)
{
	const struct plan_attach *a = &c->p->attach[pr->first_attach];
	struct source *src = &c->q->sources[pr->source];
	/* the same probe on both sides has only start attach points: its fields serve both */
	struct probe_spec *sp = is_end && pr->is_end ? &src->end : &src->start;
	int s = pr->source;

	c->prog = pr;
	c->src = src;
	c->tgt = &sp->set->v[a->target_idx];
	c->span_start = src->is_span && !is_end;
	c->span_end = src->is_span && is_end;
	c->ntemps = 0;
	c->temps_size = 0;

	emit(c, "\n/* %s%s */\n", c->tgt->name,
	     c->span_end   ? " (span end)" :
	     c->span_start ? " (span start)" :
			     "");
	emit(c, "%s\n{\n", head);
	emit(c,
	     "\t__u32 e = weft_epoch(), zero = 0;\n\tstruct wscratch *sc;\n\tWEFT_SCRATCH_DECL\n");
	if (c->p->aggregating && !c->span_start && !plan_keyed(c->p))
		emit(c, "\tstruct wval *v;\n");
	if (!c->p->aggregating && !c->span_start)
		emit(c, "\tstruct wrec *r;\n");
	if (src->is_span)
		emit(c, "\t__u64 span_key;\n");
	if (c->span_end)
		emit(c, "\t__s64 span_d;\n");
	/* -p, then the agent's scope (a network namespace or cgroup): both set at load time,
	 * so the verifier drops the branches of an unscoped agent (kernel/weft.bpf.h) */
	emit(c, "\n\tif (!weft_pid_ok() || !weft_scope_ok())\n\t\treturn 0;\n");
	/* both halves of a span wait until every probe of the query is attached (the agent
	 * sets weft_ctl.live), and stop together when it begins to detach */
	if (src->is_span)
		emit(c, "\tif (!weft_live())\n\t\treturn 0;\n");
	/* needs no scratch (no strings): a filtered end costs no map lookup at all */
	if (c->span_end)
		emit_where_part(c, WHERE_END_BEFORE_MATCH);
	emit(c, "\tsc = WEFT_SCRATCH_GET();\n\tif (!sc)\n\t\treturn 0;\n");

	if (c->span_end) {
		emit_side_where(c, src->end_where);
		emit_span_key(c);
		emit(c, "\tspan_d = WEFT_SPAN_MATCH(&weft_span%d, e, span_key, &sc->span, %d);\n",
		     s, span_notes_no_start(c));
		emit(c, "\tif (span_d < 0)\n\t\treturn 0;\n");
		emit_where_part(c, WHERE_END_AFTER_MATCH);
		emit_sink(c);
	} else if (c->span_start) {
		emit_side_where(c, src->start_where);
		emit_where_part(c, WHERE_START);
		for (int i = 0; i < c->nsaves[s]; i++) {
			const struct saved *sv = &c->saves[s][i];

			temps_for(c, sv->e);
			emit_store_value(c, "sc->span.b", sv->off, sv->size, sv->e);
		}
		emit_span_key(c);
		emit(c, "\tweft_span_begin(&weft_span%d, e, span_key, &sc->span);\n", s);
	} else {
		if (c->q->where) {
			temps_for(c, c->q->where);
			emit(c, "\tif (!(");
			emit_expr(c, c->q->where);
			emit(c, "))\n\t\treturn 0;\n");
		}
		emit_sink(c);
	}
	emit(c, "\treturn 0;\n}\n");
}

/*
 * A program.  The same probe on both sides of a span (offcputime: sched_switch ends the span
 * of the task switched in and starts one for the task switched out) is one program that runs
 * the end half, then the start half: an event ends a span under its end key before it begins
 * one under its start key, whatever order the kernel would run two programs in.
 */
static void emit_prog(struct cg *c, const struct plan_prog *pr)
{
	const struct source *src = &c->q->sources[pr->source];
	char head[160];

	if (sema_span_same_probe(src)) {
		snprintf(head, sizeof(head),
			 "static __always_inline int %s_end(void *ctx, struct weft_cost *_cost)",
			 pr->name);
		emit_prog_fn(c, pr, true, head);
		snprintf(head, sizeof(head),
			 "static __always_inline int %s_start(void *ctx, struct weft_cost *_cost)",
			 pr->name);
		emit_prog_fn(c, pr, false, head);
	} else {
		snprintf(head, sizeof(head),
			 "static __always_inline int %s_body(void *ctx, struct weft_cost *_cost)",
			 pr->name);
		emit_prog_fn(c, pr, pr->is_end, head);
	}
	/* the program: its body between the two halves of the cost meter (WEFT_COST_MAP) */
	if (pr->raw_tp)
		emit(c, "\nSEC(\"tp_btf/%s\")\nint %s(void *ctx)\n{\n",
		     c->p->attach[pr->first_attach].target.event, pr->name);
	else
		emit(c, "\nSEC(\"%s\")\nint %s(void *ctx)\n{\n", sec_name(pr->kind), pr->name);
	emit(c, "\tstruct weft_cost *_cost;\n\t__u64 _t0;\n\tint _rc;\n\n");
	emit(c, "\t_cost = weft_cost_begin(&weft_cost, %d, &_t0);\n", (int)(pr - c->p->progs));
	if (sema_span_same_probe(src))
		emit(c, "\t%s_end(ctx, _cost);\n\t_rc = %s_start(ctx, _cost);\n", pr->name,
		     pr->name);
	else
		emit(c, "\t_rc = %s_body(ctx, _cost);\n", pr->name);
	emit(c, "\tweft_cost_end(_cost, _t0);\n\treturn _rc;\n}\n");
}

static const char prelude[] =
	"/* query-language helpers */\n"
	"static __always_inline __s64 weft_q_log2(__s64 x)\n"
	"{\n\treturn x <= 0 ? 0 : (__s64)weft_msb64((__u64)x);\n}\n"
	"static __always_inline __s64 weft_q_bucket(__s64 x, __s64 step)\n"
	"{\n\t__u64 ux = x < 0 ? -(__u64)x : (__u64)x, q = ux / (__u64)step * (__u64)step;\n"
	"\treturn (__s64)(x < 0 ? -q : q);\n}\n"
	"static __always_inline __s64 weft_q_sdiv(__s64 a, __s64 b)\n"
	"{\n\t__u64 ua = a < 0 ? -(__u64)a : (__u64)a, ub = b < 0 ? -(__u64)b : (__u64)b;\n"
	"\t__u64 q = ub ? ua / ub : 0;\n\treturn (__s64)((a < 0) != (b < 0) ? -q : q);\n}\n"
	"static __always_inline __s64 weft_q_smod(__s64 a, __s64 b)\n"
	"{\n\t__u64 ua = a < 0 ? -(__u64)a : (__u64)a, ub = b < 0 ? -(__u64)b : (__u64)b;\n"
	"\t__u64 r = ub ? ua % ub : ua;\n\treturn (__s64)(a < 0 ? -r : r);\n}\n"
	"static __always_inline __s64 weft_q_udiv(__u64 a, __u64 b)\n"
	"{\n\treturn (__s64)(b ? a / b : 0);\n}\n"
	"static __always_inline __s64 weft_q_umod(__u64 a, __u64 b)\n"
	"{\n\treturn (__s64)(b ? a % b : a);\n}\n"
	"static __always_inline int weft_q_streq(const char *a, __u32 asz, const char *b, __u32 bsz)\n"
	"{\n\t__u32 n = asz < bsz ? asz : bsz;\n"
	"\tfor (__u32 i = 0; i < 256; i++) {\n\t\tif (i >= n)\n\t\t\treturn 1;\n"
	"\t\tif (a[i] != b[i])\n\t\t\treturn 0;\n\t\tif (!a[i])\n\t\t\treturn 1;\n\t}\n"
	"\treturn 1;\n}\n";

int codegen_emit(struct ast_query *q, struct plan *p, struct diag_list *dl, char **out)
{
	struct cg *c = calloc(1, sizeof(*c));
	char *buf = NULL;
	size_t len = 0;
	bool usdt = false, spans = false;
	uint32_t span_entry = 0;
	char *body = NULL;
	size_t body_len = 0;
	FILE *bodyf;
	int rc = 0;

	*out = NULL;
	if (!c)
		return -ENOMEM;
	c->q = q;
	c->p = p;
	c->dl = dl;
	plan_span_saves(c);
	for (int i = 0; i < p->nprogs; i++)
		usdt |= p->progs[i].kind == PROBE_USDT;

	/* programs first, into their own buffer: they decide the scratch size */
	bodyf = open_memstream(&body, &body_len);
	if (!bodyf) {
		free(c);
		return -ENOMEM;
	}
	c->out = bodyf;
	for (int i = 0; i < p->nprogs && !c->err; i++)
		emit_prog(c, &p->progs[i]);
	fclose(bodyf);

	for (int s = 0; s < q->nsources; s++)
		if (q->sources[s].is_span) {
			spans = true;
			if (c->save_size[s] > span_entry)
				span_entry = c->save_size[s];
		}
	p->span_save_size = span_entry;
	if (c->err) {
		rc = c->err;
		goto out;
	}
	if (c->max_temps_size + p->key_size + span_entry > SCRATCH_MAX) {
		diag_error(dl, DIAG_E_TOO_MANY, q->loc,
			   "the query needs %u bytes of per-event scratch space; at most %d",
			   c->max_temps_size + p->key_size + span_entry, SCRATCH_MAX);
		rc = -EINVAL;
		goto out;
	}

	c->out = open_memstream(&buf, &len);
	if (!c->out) {
		rc = -ENOMEM;
		goto out;
	}
	emit(c, "/* Generated by weft %s; do not edit.  The query:\n", WEFT_VERSION);
	for (const char *s = dl->src ? dl->src : ""; *s; s++) {
		if (s[0] == '*' && s[1] == '/')
			emit(c, "* /");
		else if (*s != '*' || s[1] != '/')
			fputc(*s, c->out);
	}
	emit(c, "\n */\n");
	if (!p->aggregating)
		emit(c, "#define WEFT_WANT_RINGBUF 1\n");
	if (plan_ksock(c))
		emit(c, "#define WEFT_WANT_PCR 1\n");
	if (p->uses_ustack || p->uses_kstack)
		emit(c, "#define WEFT_WANT_STACKS 1\n");
	emit(c, "#include \"weft.bpf.h\"\n");
	if (usdt)
		emit(c, "#include <stdbool.h>\n#include <bpf/usdt.bpf.h>\n");
	emit(c, "\n%s\n", prelude);
	if (c->q->ext) /* `using`: the user's functions, compiled and verified with the query */
		emit(c, "/* the query's `using` file */\n%s\n/* end of the `using` file */\n\n",
		     c->q->ext->src);
	if (kbtf_emit(q->kbtf, c->out) != 0) {
		fclose(c->out);
		c->out = NULL;
		free(buf);
		buf = NULL;
		rc = -ENOMEM;
		goto out;
	}
	if (p->aggregating) {
		bool keyed = false;

		for (int k = 0; k < p->nkeys; k++)
			keyed |= p->keys[k].kernel;
		emit(c, "struct wkey {\n\t__u8 b[%u];\n} __attribute__((aligned(8)));\n",
		     p->key_size);
		emit(c, "struct wval {\n\t__u8 b[%u];\n} __attribute__((aligned(8)));\n",
		     p->value_size);
		if (keyed)
			emit(c, "WEFT_AGG_HASH(weft_agg, struct wkey, struct wval, %u);\n",
			     p->max_groups);
		else
			emit(c, "WEFT_AGG_ARRAY(weft_agg, struct wval);\n");
	} else {
		emit(c,
		     "struct wrec {\n\tstruct weft_rec_hdr h;\n\t__u8 b[%u];\n} "
		     "__attribute__((aligned(8)));\n",
		     p->event_size ? p->event_size : 8);
	}
	if (spans) {
		emit(c,
		     "struct wspan {\n\tstruct weft_span_hdr h;\n\t__u8 b[%u];\n} "
		     "__attribute__((aligned(8)));\n",
		     span_entry ? span_entry : 8);
		for (int s = 0; s < q->nsources; s++)
			if (q->sources[s].is_span)
				emit(c, "WEFT_SPAN_MAP(weft_span%d, struct wspan, %u);\n", s,
				     p->max_spans);
	}
	if (!p->aggregating)
		emit(c, "struct wkey {\n\t__u8 b[8];\n};\n");
	emit(c, "struct wscratch {\n\tstruct wkey key;\n");
	if (spans)
		emit(c, "\tstruct wspan span;\n");
	emit(c, "\t__u8 s[%u];\n} __attribute__((aligned(8)));\n",
	     c->max_temps_size ? c->max_temps_size : 8);
	/*
	 * Where a program's scratch lives.  A stream or graph query with no span and a few
	 * bytes of strings (kernel:sockets: the comm) keeps it on the stack: the per-CPU map's
	 * lookup and its cache line cost such a program ~0.4 % of a traced request loop's
	 * throughput (docs/performance.md, "Kernel edges: what a record per call costs").  Not an
	 * aggregation: its key is built in scratch and hashed whole, and a map's bytes that no
	 * event writes stay zero where the stack's would not.
	 */
	if (!p->aggregating && !spans && c->max_temps_size <= SCRATCH_STACK_MAX) {
		emit(c, "/* scratch on the stack (%u bytes) */\n",
		     c->max_temps_size ? c->max_temps_size : 8);
		emit(c, "#define WEFT_SCRATCH_DECL struct wscratch _wsc;\n"
			"#define WEFT_SCRATCH_GET() (&_wsc)\n");
	} else {
		emit(c, "struct {\n\t__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);\n"
			"\t__uint(max_entries, 1);\n\t__type(key, __u32);\n"
			"\t__type(value, struct wscratch);\n} weft_scratch SEC(\".maps\");\n");
		emit(c, "#define WEFT_SCRATCH_DECL\n"
			"#define WEFT_SCRATCH_GET() bpf_map_lookup_elem(&weft_scratch, &zero)\n");
	}
	emit(c,
	     "struct {\n\t__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);\n\t__uint(max_entries, %d);\n"
	     "\t__type(key, __u32);\n\t__type(value, struct weft_cost);\n} weft_cost SEC(\".maps\");\n",
	     p->nprogs > 0 ? p->nprogs : 1);
	fputs(body, c->out);
	if (fclose(c->out) != 0)
		rc = -EIO;
	c->out = NULL;
out:
	free(body);
	if (rc) {
		free(buf);
		if (rc == -E2BIG)
			diag_error(dl, DIAG_E_TOO_MANY, q->loc,
				   "the query has more values than one program can hold");
		else if (!diag_has_errors(dl))
			diag_error(dl, DIAG_E_CLANG, q->loc,
				   "internal error: cannot generate code for this query (%s)",
				   strerror(-rc));
		rc = -EINVAL;
	} else {
		*out = buf;
	}
	free(c);
	return rc;
}
