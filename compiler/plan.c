// SPDX-License-Identifier: Apache-2.0
/*
 * The planner: turns a checked query into a plan (plan.h) — programs and attach points,
 * the key and value layouts of the aggregation map, the record layout of a stream, and the
 * result columns — and explains it.
 *
 * Decisions taken here:
 *   - every aggregate kind is kept exactly in the kernel (weft_aggval.h); quantiles over the
 *     same expression share one sketch, so p50(x), p99(x) cost one update;
 *   - `host` is the only agent-side key: it occupies no kernel bytes;
 *   - a program serves every attach point of a source with the same record layout (the
 *     same tracepoint format, or any uprobe/usdt); the `probe` builtin is the bpf cookie;
 *   - kernel keys and stream fields are 8-byte aligned slots; integers are widened to 64
 *     bits so the agent needs no per-width code.
 * Must never: allocate kernel resources or look at the machine (sema did that).
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "compiler/kbtf.h"
#include "compiler/plan.h"
#include "compiler/sema.h"
#include "kernel/aggstate.h"
#include "kernel/weft_abi.h"

#define ALIGN8(x) (((x) + 7u) & ~7u)

const char *render_name(enum render r)
{
	static const char *const names[RENDER__COUNT] = {
		[RENDER_INT] = "int",
		[RENDER_UINT] = "uint",
		[RENDER_HEX] = "hex",
		[RENDER_STR] = "str",
		[RENDER_USTACK] = "ustack",
		[RENDER_KSTACK] = "kstack",
		[RENDER_USYM] = "usym",
		[RENDER_KSYM] = "ksym",
		[RENDER_PROBE] = "probe",
		[RENDER_HOST] = "host",
		[RENDER_BOOL] = "bool",
		/* lang-a */
		[RENDER_SYSNAME] = "sysname",
		[RENDER_SIGNAME] = "signame",
		[RENDER_ERRNAME] = "errname",
		[RENDER_ENUM] = "enum",
		[RENDER_WALLTIME] = "walltime",
		[RENDER_NS] = "ns",
		[RENDER_US] = "us",
		[RENDER_MS] = "ms",
		[RENDER_S] = "s",
		/* lang-b */
		[RENDER_INET] = "inet",
	};

	return (unsigned)r < RENDER__COUNT ? names[r] : "?";
}

static enum render expr_render(const struct expr *e)
{
	if (e->kind == EXPR_NAME && e->bi == BI_PROBE)
		return RENDER_PROBE;
	if (e->kind == EXPR_NAME && e->bi == BI_HOST)
		return RENDER_HOST;
	if (e->kind == EXPR_CALL && e->fn == FN_USYM)
		return RENDER_USYM;
	if (e->kind == EXPR_CALL && e->fn == FN_KSYM)
		return RENDER_KSYM;
	if (sema_names_render(e) >= 0)
		return (enum render)sema_names_render(e);
	if (e->kind == EXPR_CALL && e->fn == FN_NTOP)
		return RENDER_INET;
	switch (e->ty.kind) {
	case TY_STR:
		return RENDER_STR;
	case TY_PTR:
		return RENDER_HEX;
	case TY_STACK:
		return e->ty.user ? RENDER_USTACK : RENDER_KSTACK;
	case TY_BOOL:
		return RENDER_BOOL;
	default:
		return e->ty.is_signed ? RENDER_INT : RENDER_UINT;
	}
}

static uint32_t slot_size(const struct expr *e)
{
	/* user stacks and user symbols need the process to be symbolized: id/address, pid */
	enum render r = expr_render(e);

	if (r == RENDER_USTACK || r == RENDER_USYM)
		return 16;
	if (r == RENDER_INET)
		return WEFT_INET_SIZE;
	if (e->ty.kind == TY_STR)
		return ALIGN8(e->ty.size ? e->ty.size : 64);
	return 8;
}

static enum agg_kind fn_agg(enum func fn, double *q)
{
	switch (fn) {
	case FN_COUNT:
		return AGG_COUNT;
	case FN_SUM:
		return AGG_SUM;
	case FN_MIN:
		return AGG_MIN;
	case FN_MAX:
		return AGG_MAX;
	case FN_AVG:
		return AGG_AVG;
	case FN_STDDEV:
		return AGG_STDDEV;
	case FN_HIST:
		return AGG_HIST;
	case FN_LHIST:
		return AGG_LHIST;
	case FN_P50:
		*q = 0.5;
		return AGG_QUANTILE;
	case FN_P90:
		*q = 0.9;
		return AGG_QUANTILE;
	case FN_P99:
		*q = 0.99;
		return AGG_QUANTILE;
	case FN_P999:
		*q = 0.999;
		return AGG_QUANTILE;
	case FN_QUANTILE:
		return AGG_QUANTILE;
	default:
		return AGG_DISTINCT;
	}
}

/* A constant's value: a literal, or an expression sema folded (its value is in ival). */
static int64_t const_of(const struct expr *e)
{
	return e->kind == EXPR_INT || e->is_const ? e->ival : 0;
}

/* A string describing the record layout of a target; equal strings share a program. */
static void layout_sig(const struct probe_target *t, char *buf, size_t sz)
{
	size_t off = 0;

	off += snprintf(buf, sz, "%d|", t->kind);
	if (t->kind != PROBE_TRACEPOINT && t->kind != PROBE_SYSCALL)
		return;
	for (int i = 0; i < t->nfields && off < sz - 1; i++)
		off += snprintf(buf + off, sz - off, "%s:%u:%u:%d;", t->fields[i].name,
				t->fields[i].offset, t->fields[i].size, t->fields[i].kind);
}

static int plan_probes(struct plan *p, struct ast_query *q, struct diag_list *dl)
{
	int total = 0;

	for (int i = 0; i < q->nsources; i++) {
		total += q->sources[i].start.set ? q->sources[i].start.set->n : 0;
		if (q->sources[i].is_span && q->sources[i].end.set &&
		    !sema_span_same_probe(&q->sources[i]))
			total += q->sources[i].end.set->n;
	}
	p->attach = calloc(total ? total : 1, sizeof(*p->attach));
	if (!p->attach)
		return -ENOMEM;
	for (int i = 0; i < q->nsources; i++) {
		struct source *src = &q->sources[i];

		for (int end = 0; end < 2; end++) {
			struct probe_spec *sp = end ? &src->end : &src->start;
			int first_prog = p->nprogs;

			if (end && (!src->is_span || sema_span_same_probe(src)))
				break; /* the same probe on both sides: one program does both */
			for (int t = 0; t < sp->set->n; t++) {
				struct probe_target *tg = &sp->set->v[t];
				struct plan_attach *a = &p->attach[p->nattach];
				char sig[2048], sig2[2048];
				int prog = -1;

				bool raw = sp->kernel && sema_ksock_raw(q->kbtf, tg);

				layout_sig(tg, sig, sizeof(sig));
				for (int k = first_prog; k < p->nprogs && !raw; k++) {
					int rep = p->attach[p->progs[k].first_attach].target_idx;

					layout_sig(&sp->set->v[rep], sig2, sizeof(sig2));
					if (!p->progs[k].raw_tp && strcmp(sig, sig2) == 0) {
						prog = k;
						break;
					}
				}
				if (prog < 0) {
					struct plan_prog *pr;

					if (p->nprogs == PLAN_MAX_PROGS) {
						diag_fix(
							diag_error(
								dl, DIAG_E_TOO_MANY, sp->loc,
								"the query needs more than %d distinct BPF programs",
								PLAN_MAX_PROGS),
							"narrow the wildcard");
						return -EINVAL;
					}
					prog = p->nprogs++;
					pr = &p->progs[prog];
					snprintf(pr->name, sizeof(pr->name), "wp%d", prog);
					pr->kind = tg->kind;
					pr->source = i;
					pr->is_end = end;
					pr->first_attach = p->nattach;
					pr->raw_tp = raw; /* its own program: no cookie */
					if (raw) {
						uint32_t sz[PROBE_MAX_FIELDS];

						pr->raw_nargs = kbtf_tp_args(q->kbtf, tg->event, sz,
									     PROBE_MAX_FIELDS);
					}
				}
				a->target = *tg;
				a->target.fields = NULL; /* owned by the probe set */
				a->target.nfields = 0;
				a->target_idx = t;
				a->source = i;
				a->is_end = end;
				a->prog = prog;
				a->cookie = (uint64_t)p->nattach;
				p->nattach++;
			}
		}
	}
	return 0;
}

static int plan_aggregating(struct plan *p, struct ast_query *q, struct diag_list *dl)
{
	uint32_t off = 0;

	p->keys = calloc(q->ngroups + 1, sizeof(*p->keys));
	p->aggs = calloc(q->nitems + 1, sizeof(*p->aggs));
	p->cols = calloc(q->nitems + q->ngroups + 1, sizeof(*p->cols));
	if (!p->keys || !p->aggs || !p->cols)
		return -ENOMEM;
	for (int i = 0; i < q->ngroups; i++) {
		struct group_key *g = &q->groups[i];
		struct plan_slot *k = &p->keys[p->nkeys++];
		const char *name = g->name ? g->name : g->alias;
		char *buf = NULL;
		size_t len;

		if (!name) {
			FILE *f = open_memstream(&buf, &len);

			if (f) {
				expr_print(g->e, f);
				fclose(f);
			}
			name = buf ? buf : "key";
			/* args.count prints as (args.count) in some printers: keep it simple */
		}
		snprintf(k->name, sizeof(k->name), "%s", name);
		free(buf);
		k->render = expr_render(g->e);
		sema_names_arg(g->e, k->arg, sizeof(k->arg));
		k->e = g->e;
		if (k->render == RENDER_HOST) {
			k->kernel = false;
			continue;
		}
		k->kernel = true;
		k->offset = off;
		k->size = slot_size(g->e);
		off += k->size;
		if (k->render == RENDER_USTACK)
			p->uses_ustack = true;
		if (k->render == RENDER_KSTACK)
			p->uses_kstack = true;
	}
	if (off > PLAN_MAX_KEY_SIZE) {
		diag_error(dl, DIAG_E_TOO_MANY, q->groups[0].e->loc,
			   "the group key is %u bytes; at most %d", off, PLAN_MAX_KEY_SIZE);
		return -EINVAL;
	}
	p->key_size = off ? off : 8;

	/* Group keys the select does not name come first, as bpftrace prints its map keys:
	 * `group by comm select count()` shows comm. */
	for (int g = 0; g < q->ngroups; g++) {
		bool named = false;

		for (int i = 0; i < q->nitems && !named; i++) {
			struct expr *e = q->items[i].e;

			named = (e->kind == EXPR_NAME && e->bi == BI_ALIAS && -1 - e->aux == g) ||
				expr_equal(e, q->groups[g].e);
		}
		if (!named) {
			struct plan_column *c = &p->cols[p->ncols++];

			snprintf(c->name, sizeof(c->name), "%s", p->keys[g].name);
			c->is_agg = false;
			c->idx = g;
		}
	}
	p->first_item_col = p->ncols;

	off = 0;
	for (int i = 0; i < q->nitems; i++) {
		struct select_item *it = &q->items[i];
		struct plan_column *c = &p->cols[p->ncols++];

		snprintf(c->name, sizeof(c->name), "%s", it->name ? it->name : "?");
		if (it->e->kind == EXPR_CALL && FN_IS_AGG(it->e->fn)) {
			struct plan_agg *a = &p->aggs[p->naggs];
			int shared = -1;

			snprintf(a->name, sizeof(a->name), "%s", c->name);
			a->spec.kind = fn_agg(it->e->fn, &a->spec.q);
			if (it->e->fn == FN_QUANTILE)
				a->spec.q = it->e->args[1]->kind == EXPR_FLOAT ?
						    it->e->args[1]->fval :
						    (double)const_of(it->e->args[1]);
			if (a->spec.kind == AGG_LHIST) {
				a->spec.lo = const_of(it->e->args[1]);
				a->spec.hi = const_of(it->e->args[2]);
				a->spec.step = const_of(it->e->args[3]);
			}
			a->arg = it->e->nargs ? it->e->args[0] : NULL;
			a->size = (uint32_t)agg_kernel_value_size(&a->spec);
			/* quantiles of the same expression share one sketch */
			if (a->spec.kind == AGG_QUANTILE)
				for (int j = 0; j < p->naggs; j++)
					if (p->aggs[j].spec.kind == AGG_QUANTILE &&
					    expr_equal(p->aggs[j].arg, a->arg))
						shared = j;
			if (shared >= 0) {
				a->offset = p->aggs[shared].offset;
			} else {
				a->offset = off;
				off += a->size;
			}
			it->e->agg_slot = p->naggs;
			c->is_agg = true;
			c->idx = p->naggs++;
		} else {
			/* a group key: by alias or by text */
			c->is_agg = false;
			c->idx = -1;
			if (it->e->kind == EXPR_NAME && it->e->bi == BI_ALIAS && it->e->aux < 0)
				c->idx = -1 - it->e->aux;
			for (int g = 0; g < q->ngroups && c->idx < 0; g++)
				if (expr_equal(it->e, q->groups[g].e))
					c->idx = g;
			if (c->idx < 0)
				c->idx = 0; /* sema guarantees a match */
		}
	}
	if (off > PLAN_MAX_VALUE_SIZE) {
		diag_fix(diag_error(dl, DIAG_E_TOO_MANY, q->items[0].e->loc,
				    "the aggregates need %u bytes per group; at most %d", off,
				    PLAN_MAX_VALUE_SIZE),
			 "quantiles and distinct are large (see docs/aggregates.md): use fewer");
		return -EINVAL;
	}
	p->value_size = off ? off : 8;
	p->max_groups = PLAN_DEFAULT_GROUPS;
	/* large values: keep the map (2 epochs x CPUs) bounded near 64 MiB per CPU */
	while (p->max_groups > 64 && (uint64_t)p->max_groups * p->value_size > (32u << 20))
		p->max_groups /= 2;
	return 0;
}

static int plan_stream(struct plan *p, struct ast_query *q, struct diag_list *dl)
{
	uint32_t off = 0;

	p->fields = calloc(q->nitems + 1, sizeof(*p->fields));
	p->cols = calloc(q->nitems + 1, sizeof(*p->cols));
	if (!p->fields || !p->cols)
		return -ENOMEM;
	for (int i = 0; i < q->nitems; i++) {
		struct select_item *it = &q->items[i];
		struct plan_slot *f = &p->fields[p->nfields];
		struct plan_column *c = &p->cols[p->ncols++];

		snprintf(f->name, sizeof(f->name), "%s", it->name ? it->name : "?");
		snprintf(c->name, sizeof(c->name), "%s", f->name);
		f->render = expr_render(it->e);
		sema_names_arg(it->e, f->arg, sizeof(f->arg));
		f->e = it->e;
		f->kernel = f->render != RENDER_HOST;
		if (f->kernel) {
			f->offset = off;
			f->size = slot_size(it->e);
			off += f->size;
		}
		if (f->render == RENDER_USTACK)
			p->uses_ustack = true;
		if (f->render == RENDER_KSTACK)
			p->uses_kstack = true;
		c->is_agg = false;
		c->idx = p->nfields++;
	}
	if (off > PLAN_MAX_EVENT_SIZE) {
		diag_error(dl, DIAG_E_TOO_MANY, q->items[0].e->loc,
			   "a stream row is %u bytes; at most %d", off, PLAN_MAX_EVENT_SIZE);
		return -EINVAL;
	}
	p->event_size = off;
	p->ringbuf_bytes = PLAN_DEFAULT_RINGBUF;
	return 0;
}

/*
 * A graph query's record is fixed (struct weft_graph_rec): the fields say where its members
 * are, so that `weft explain` shows it and a stream printer could show the raw records.
 */
static int plan_graph(struct plan *p, const struct ast_query *q)
{
	static const struct {
		const char *name;
		enum render render;
		uint32_t offset, size;
	} f[] = {
#define GF(n, r, m) \
	{ n, r, offsetof(struct weft_graph_rec, m), sizeof(((struct weft_graph_rec *)0)->m) }
		GF("time", RENDER_UINT, time),	   GF("dur", RENDER_UINT, dur),
		GF("pid", RENDER_INT, pid),	   GF("tid", RENDER_INT, tid),
		GF("kind", RENDER_UINT, kind),	   GF("probe", RENDER_PROBE, cookie),
		GF("a0", RENDER_HEX, a[0]),	   GF("a1", RENDER_HEX, a[1]),
		GF("a2", RENDER_HEX, a[2]),	   GF("a3", RENDER_HEX, a[3]),
		GF("a4", RENDER_HEX, a[4]),	   GF("a5", RENDER_HEX, a[5]),
		GF("a6", RENDER_HEX, a[6]),	   GF("comm", RENDER_STR, comm),
		GF("s0", RENDER_STR, s0),	   GF("s1", RENDER_STR, s1),
		GF("family", RENDER_UINT, family),
#undef GF
	};
	int n = (int)(sizeof(f) / sizeof(f[0]));

	p->graph = true;
	p->sample = q->sample > 0 && q->sample <= 1 ? q->sample : 1.0;
	p->fields = calloc(n, sizeof(*p->fields));
	p->cols = calloc(n, sizeof(*p->cols));
	if (!p->fields || !p->cols)
		return -ENOMEM;
	for (int i = 0; i < n; i++) {
		struct plan_slot *s = &p->fields[i];

		snprintf(s->name, sizeof(s->name), "%s", f[i].name);
		s->render = f[i].render;
		s->offset = f[i].offset;
		s->size = f[i].size;
		s->kernel = true;
		snprintf(p->cols[i].name, sizeof(p->cols[i].name), "%s", f[i].name);
		p->cols[i].idx = i;
	}
	p->nfields = p->ncols = n;
	p->event_size = sizeof(struct weft_graph_rec);
	p->ringbuf_bytes = PLAN_DEFAULT_GRAPH_RINGBUF;
	return 0;
}

/* `probe = 'NAME'` and `probe like 'GLOB'` must name some attach point of the query. */
static int check_probe_names(const struct plan *p, const struct expr *e, struct diag_list *dl)
{
	const char *pat = NULL;
	bool glob = false;
	int rc = 0;

	if (!e)
		return 0;
	if (e->kind == EXPR_LIKE && e->lhs->bi == BI_PROBE && e->rhs->kind == EXPR_STR) {
		pat = e->rhs->sval;
		glob = true;
	} else if (e->kind == EXPR_BINARY && (e->op == OP_EQ || e->op == OP_NE)) {
		if (e->lhs->bi == BI_PROBE && e->rhs->kind == EXPR_STR)
			pat = e->rhs->sval;
		else if (e->rhs->bi == BI_PROBE && e->lhs->kind == EXPR_STR)
			pat = e->lhs->sval;
	}
	if (pat) {
		int n = 0;

		for (int i = 0; i < p->nattach; i++)
			n += glob ? probe_glob_match(pat, p->attach[i].target.name) :
				    strcmp(pat, p->attach[i].target.name) == 0;
		if (n == 0) {
			const char *names[PROBE_MAX_TARGETS], *near[1];
			struct diag *d = diag_error(dl, DIAG_E_PROBE_NO_MATCH, e->loc,
						    "no probe of this query is named '%s'", pat);
			int k = p->nattach < PROBE_MAX_TARGETS ? p->nattach : PROBE_MAX_TARGETS;

			for (int i = 0; i < k; i++)
				names[i] = p->attach[i].target.name;
			if (!glob && diag_near(pat, names, k, near, 1) == 1)
				diag_fix(d, "did you mean '%s'?", near[0]);
			else
				diag_fix(d, "the query's probes are named like '%s'", names[0]);
			return -EINVAL;
		}
		return 0;
	}
	rc |= check_probe_names(p, e->lhs, dl);
	rc |= check_probe_names(p, e->rhs, dl);
	for (int i = 0; i < e->nargs; i++)
		rc |= check_probe_names(p, e->args[i], dl);
	return rc;
}

struct plan *plan_build(struct ast_query *q, pid_t pid, struct diag_list *dl)
{
	struct plan *p = calloc(1, sizeof(*p));
	int rc;

	if (!p) {
		errno = ENOMEM;
		return NULL;
	}
	p->version = PLAN_VERSION;
	p->aggregating = q->aggregating;
	p->every_ns = q->every_ns;
	p->for_ns = q->for_ns;
	p->limit = q->limit;
	p->order_col = -1;
	p->pid = pid;
	p->max_spans = PLAN_DEFAULT_SPANS;
	for (int i = 0; i < q->nsources; i++)
		if (q->sources[i].is_span)
			p->has_spans = true;
	p->query = dl->src ? strdup(dl->src) : strdup("");
	if (p->query && q->format && !(p->format = strdup(q->format)))
		rc = -ENOMEM;
	else
		rc = p->query ? plan_probes(p, q, dl) : -ENOMEM;
	if (!rc) {
		rc = check_probe_names(p, q->where, dl);
		for (int i = 0; !rc && i < q->nitems; i++)
			rc = check_probe_names(p, q->items[i].e, dl);
		for (int i = 0; !rc && i < q->ngroups; i++)
			rc = check_probe_names(p, q->groups[i].e, dl);
	}
	if (!rc)
		rc = q->graph	    ? plan_graph(p, q) :
		     q->aggregating ? plan_aggregating(p, q, dl) :
				      plan_stream(p, q, dl);
	if (rc) {
		plan_free(p);
		errno = -rc;
		return NULL;
	}
	if (q->order) {
		if (q->order->aux >= 0) {
			p->order_col = p->first_item_col + q->order->aux;
		} else {
			/* a group key: its column, prepended or selected */
			for (int c = 0; c < p->ncols; c++)
				if (!p->cols[c].is_agg && p->cols[c].idx == -1 - q->order->aux) {
					p->order_col = c;
					break;
				}
		}
		p->order_desc = q->order_desc;
	}
	return p;
}

void plan_graph_windows(const struct plan *p, struct plan *out)
{
	*out = *p;
	out->aggregating = true;
	out->attach = NULL;
	out->nattach = 0;
	out->nprogs = 0;
	out->tpf = NULL;
	out->ntpf = 0;
	out->keys = NULL;
	out->nkeys = 0;
	out->key_size = 8;
	out->aggs = NULL;
	out->naggs = 0;
	out->value_size = 0;
	out->fields = NULL;
	out->nfields = 0;
	out->cols = NULL;
	out->ncols = 0;
	out->first_item_col = 0;
	out->order_col = -1;
	out->limit = 0;
}

void plan_free(struct plan *p)
{
	if (!p)
		return;
	free(p->query);
	free(p->format);
	free(p->attach);
	free(p->tpf);
	free(p->keys);
	free(p->aggs);
	free(p->fields);
	free(p->cols);
	free(p);
}

/* ---------------------------------------------------------------- explain */

static void fmt_ns(uint64_t ns, char *buf, size_t sz)
{
	if (ns % 1000000000ULL == 0)
		snprintf(buf, sz, "%llus", (unsigned long long)(ns / 1000000000ULL));
	else if (ns % 1000000ULL == 0)
		snprintf(buf, sz, "%llums", (unsigned long long)(ns / 1000000ULL));
	else if (ns % 1000ULL == 0)
		snprintf(buf, sz, "%lluus", (unsigned long long)(ns / 1000ULL));
	else
		snprintf(buf, sz, "%lluns", (unsigned long long)ns);
}

static void explain_agg(const struct plan_agg *a, FILE *out)
{
	fprintf(out, "%s", agg_kind_name(a->spec.kind));
	if (a->spec.kind == AGG_QUANTILE)
		fprintf(out, "(q=%g)", a->spec.q);
	if (a->spec.kind == AGG_LHIST)
		fprintf(out, "(%lld..%lld step %lld)", (long long)a->spec.lo, (long long)a->spec.hi,
			(long long)a->spec.step);
}

void plan_explain(const struct plan *p, FILE *out)
{
	char b1[32], b2[32];

	fprintf(out, "probes: %d attach point%s, %d BPF program%s\n", p->nattach,
		p->nattach == 1 ? "" : "s", p->nprogs, p->nprogs == 1 ? "" : "s");
	for (int i = 0; i < p->nattach && i < 20; i++) {
		const struct plan_attach *a = &p->attach[i];

		fprintf(out, "  [%d] %-48s program %s%s%s\n", (int)a->cookie, a->target.name,
			p->progs[a->prog].name, p->progs[a->prog].raw_tp ? " (raw tracepoint)" : "",
			a->is_end ? " (span end)" : "");
	}
	if (p->nattach > 20)
		fprintf(out, "  ... and %d more\n", p->nattach - 20);

	fprintf(out, "kernel: per event, on the CPU that fired\n");
	if (p->has_spans)
		fprintf(out,
			"  span matching: start saved in a hash of %u entries (by %s), "
			"matched at the end; starts that find the table full are counted\n",
			p->max_spans, "thread or `on` key");
	if (p->aggregating) {
		fprintf(out,
			"  aggregation map: per-CPU hash, 2 epochs x %u groups, key %u B, "
			"value %u B\n",
			p->max_groups, p->key_size, p->value_size);
		for (int i = 0; i < p->nkeys; i++) {
			const struct plan_slot *k = &p->keys[i];

			if (k->kernel)
				fprintf(out, "  key   %-20s %-7s @%u (%u B)\n", k->name,
					render_name(k->render), k->offset, k->size);
		}
		if (p->nkeys == 0)
			fprintf(out, "  key   (none: one group)\n");
		for (int i = 0; i < p->naggs; i++) {
			const struct plan_agg *a = &p->aggs[i];
			bool shared = false;

			for (int j = 0; j < i; j++)
				shared |= p->aggs[j].offset == a->offset;
			fprintf(out, "  value %-20s ", a->name);
			explain_agg(a, out);
			fprintf(out, " @%u (%u B)%s\n", a->offset, a->size,
				shared ? " shared sketch" : "");
		}
	} else {
		fprintf(out,
			"  stream: one %u-byte record per event into a %u KiB ring buffer; "
			"records lost to a full buffer are counted\n",
			p->event_size, p->ringbuf_bytes >> 10);
		for (int i = 0; i < p->nfields; i++) {
			const struct plan_slot *f = &p->fields[i];

			if (f->kernel)
				fprintf(out, "  field %-20s %-7s @%u (%u B)\n", f->name,
					render_name(f->render), f->offset, f->size);
		}
	}

	fprintf(out, "agent: ");
	if (p->every_ns) {
		fmt_ns(p->every_ns, b1, sizeof(b1));
		fprintf(out, "every %s", b1);
	} else {
		fprintf(out, "once, at the end");
	}
	if (p->for_ns) {
		fmt_ns(p->for_ns, b2, sizeof(b2));
		fprintf(out, ", for %s", b2);
	}
	fprintf(out, "\n");
	if (p->aggregating) {
		fprintf(out, "  flip the window epoch, wait for running probes, read and clear the "
			     "idle half, merge per-CPU values into mergeable states\n");
		for (int i = 0; i < p->nkeys; i++)
			if (!p->keys[i].kernel)
				fprintf(out, "  add key %s (this host's name)\n", p->keys[i].name);
		for (int i = 0; i < p->nkeys; i++)
			if (p->keys[i].render == RENDER_USTACK ||
			    p->keys[i].render == RENDER_KSTACK ||
			    p->keys[i].render == RENDER_USYM || p->keys[i].render == RENDER_KSYM)
				fprintf(out, "  symbolize key %s\n", p->keys[i].name);
		for (int i = 0; i < p->naggs; i++) {
			enum agg_kind k = p->aggs[i].spec.kind;

			if (k == AGG_QUANTILE || k == AGG_DISTINCT || k == AGG_AVG ||
			    k == AGG_STDDEV)
				fprintf(out, "  finalize %s (%s)\n", p->aggs[i].name,
					agg_kind_name(k));
		}
	} else if (p->graph) {
		fprintf(out,
			"  graph: assemble the records into tasks, events and edges "
			"(agent/graphcap.c); a trace with no open task is finished: its "
			"aggregates always kept, the trace itself if the head sample (%g%%) "
			"selects it or it is an outlier\n",
			p->sample * 100);
	} else {
		fprintf(out, "  poll the ring buffer, render each record as a row\n");
	}
	if (p->order_col >= 0)
		fprintf(out, "  order by %s %s\n", p->cols[p->order_col].name,
			p->order_desc ? "desc" : "asc");
	if (p->limit)
		fprintf(out, "  limit %lld%s\n", (long long)p->limit,
			p->aggregating ? " (top-k)" : " rows, then stop");

	fprintf(out, "cluster: ");
	if (p->aggregating)
		fprintf(out, "merge partial states by key (associative, commutative)%s%s\n",
			p->order_col >= 0 ? ", then order" : "", p->limit ? " and limit" : "");
	else
		fprintf(out, "concatenate the streams of every host\n");
	fprintf(out, "columns:");
	for (int i = 0; i < p->ncols; i++)
		fprintf(out, " %s%s", p->cols[i].name, i + 1 < p->ncols ? "," : "\n");
}
