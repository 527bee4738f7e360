// SPDX-License-Identifier: Apache-2.0
/*
 * Semantic analysis, step 1 (compiler/sema.c has the others): every source's probe is
 * resolved by its provider (probes/) against the running kernel (tracefs) or the ELF files
 * it names, into the probe set the later steps read fields from and the agent attaches.
 * A span gets its end probe unless one is given: per syscall its exit tracepoint, a
 * uprobe's uretprobe, a kprobe's kretprobe; a timer cannot start or end a span.
 *
 * Each failure is one diagnostic whose tag comes from the provider's error kind (a fix
 * too when the provider has one), and resolution goes on with the next source, so that one
 * run reports every unknown probe.  This is the one step of semantic analysis that reads
 * the running system; it never attaches anything.  The sets live until sema_release().
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "compiler/kbtf.h"
#include "compiler/sema.h"

struct sema_probes {
	struct ast_query *q;
	struct diag_list *dl;
	pid_t pid;
};

static enum diag_tag perr_tag(enum probe_err_kind k)
{
	switch (k) {
	case PERR_PROVIDER:
		return DIAG_E_PROBE_PROVIDER;
	case PERR_SYNTAX:
		return DIAG_E_PARSE_PROBE;
	case PERR_UNKNOWN:
		return DIAG_E_PROBE_UNKNOWN;
	case PERR_NO_MATCH:
		return DIAG_E_PROBE_NO_MATCH;
	case PERR_TOO_MANY:
		return DIAG_E_PROBE_TOO_MANY;
	case PERR_BINARY:
		return DIAG_E_PROBE_BINARY;
	case PERR_LIBRARY:
		return DIAG_E_PROBE_LIBRARY;
	case PERR_SYMBOL:
		return DIAG_E_PROBE_SYMBOL;
	case PERR_USDT:
		return DIAG_E_PROBE_USDT;
	case PERR_RATE:
		return DIAG_E_PROBE_RATE;
	case PERR_FEATURE:
		return DIAG_E_PROBE_FEATURE;
	case PERR_OFFSET:
		return DIAG_E_PROBE_OFFSET;
	case PERR_PID:
		return DIAG_E_PROBE_PID;
	case PERR_OFFSET_INSN:
		return DIAG_E_PROBE_OFFSET_INSN;
	case PERR_USDT_SITE:
		return DIAG_E_PROBE_USDT_SITE;
	default:
		return DIAG_E_PROBE_UNKNOWN;
	}
}

static void report_perr(struct sema_probes *s, const struct probe_spec *spec,
			const struct probe_err *err)
{
	/* an error about the +offset points at it */
	bool at_off =
		spec->has_offset && (err->kind == PERR_OFFSET || err->kind == PERR_OFFSET_INSN);
	struct diag *d =
		diag_error(s->dl, perr_tag(err->kind), at_off ? spec->offset_loc : spec->loc, "%s",
			   err->msg[0] ? err->msg : "cannot resolve probe");

	if (err->fix[0])
		diag_fix(d, "%s", err->fix);
}

/* Resolves spec as kind `kind` (which may differ from spec->kind for implied span ends). */
static struct probe_set *resolve_as(struct sema_probes *s, const struct probe_spec *spec,
				    enum probe_kind kind, const char *const *parts, int nparts)
{
	const struct probe_provider *p = probe_provider_get(kind);
	struct probe_ctx ctx = { .pid = s->pid, .max_targets = PROBE_MAX_TARGETS };
	struct probe_err err = { 0 };
	struct probe_set *set;

	if (!p || !p->resolve) {
		diag_error(s->dl, DIAG_E_PROBE_PROVIDER, spec->loc,
			   "probe provider '%s' is not available in this build",
			   probe_kind_name(kind));
		return NULL;
	}
	set = arena_alloc(s->q->arena, sizeof(*set));
	if (!set)
		return NULL;
	/* resolve first: a provider the kernel lacks says so itself, with a fix naming the
	 * tracepoints to use instead; available() then catches what resolve cannot know */
	if (p->resolve(parts, nparts, spec->offset, spec->has_offset, &ctx, set, &err) != 0 ||
	    (p->available && !p->available(&err))) {
		probe_set_free(set);
		report_perr(s, spec, &err);
		return NULL;
	}
	if (set->n == 0) {
		probe_set_free(set);
		diag_error(s->dl, DIAG_E_PROBE_NO_MATCH, spec->loc, "'%s' matches no probe",
			   spec->text);
		return NULL;
	}
	return set;
}

static int resolve_spec(struct sema_probes *s, struct probe_spec *spec)
{
	spec->set = resolve_as(s, spec, spec->kind, (const char *const *)spec->parts, spec->nparts);
	return spec->set ? 0 : -EINVAL;
}

/* The implied end of span(P): syscall exit, uretprobe, kretprobe. */
static int resolve_span_end(struct sema_probes *s, struct source *src)
{
	struct probe_spec *st = &src->start;
	struct probe_set *end, *set = st->set;
	enum probe_kind ek;

	switch (st->kind) {
	case PROBE_SYSCALL:
		/* One exit tracepoint per resolved syscall, in the same order. */
		end = arena_alloc(s->q->arena, sizeof(*end));
		if (!end)
			return -ENOMEM;
		end->v = calloc(set->n, sizeof(*end->v));
		if (!end->v)
			return -ENOMEM;
		for (int i = 0; i < set->n; i++) {
			char ev[PROBE_NAME_MAX + 16];
			const char *parts[2] = { "syscalls", ev };
			struct probe_set *one;
			const char *name = set->v[i].event;

			if (strncmp(name, "sys_enter_", 10) == 0)
				name += 10;
			snprintf(ev, sizeof(ev), "sys_exit_%s", name);
			one = resolve_as(s, st, PROBE_TRACEPOINT, parts, 2);
			if (!one) {
				end->n = i;
				src->end.set = end;
				return -EINVAL;
			}
			end->v[i] = one->v[0];
			one->v[0].fields = NULL;
			one->v[0].nfields = 0;
			probe_set_free(one);
			/* the exit record's `ret` is the span's retval */
			end->v[i].has_retval = true;
			end->n = i + 1;
		}
		src->end = *st;
		src->end.kind = PROBE_TRACEPOINT;
		src->end.set = end;
		src->has_end = true;
		return 0;
	case PROBE_UPROBE:
		ek = PROBE_URETPROBE;
		break;
	case PROBE_KPROBE:
		ek = PROBE_KRETPROBE;
		break;
	default:
		diag_fix(diag_error(s->dl, DIAG_E_SPAN_PAIR, st->loc,
				    "span(%s) has no natural end probe", st->text),
			 "name the end probe: span(%s, PROBE [on KEY])", st->text);
		return -EINVAL;
	}
	if (st->has_offset) {
		diag_error(s->dl, DIAG_E_PROBE_OFFSET, st->loc,
			   "span(%s): a function with an offset has no return to pair with",
			   st->text);
		return -EINVAL;
	}
	src->end = *st;
	src->end.kind = ek;
	src->end.set = resolve_as(s, st, ek, (const char *const *)st->parts, st->nparts);
	if (!src->end.set)
		return -EINVAL;
	src->has_end = true;
	return 0;
}

int sema_probes_resolve(struct ast_query *q, pid_t pid, struct diag_list *dl)
{
	struct sema_probes sp = { .q = q, .dl = dl, .pid = pid }, *s = &sp;
	int rc = 0;

	for (int i = 0; i < s->q->nsources; i++) {
		struct source *src = &s->q->sources[i];

		if (resolve_spec(s, &src->start) != 0) {
			rc = -EINVAL;
			continue;
		}
		if (!src->is_span)
			continue;
		if (src->start.kind == PROBE_PROFILE || src->start.kind == PROBE_INTERVAL ||
		    probe_kind_is_perf(src->start.kind)) {
			diag_error(s->dl, DIAG_E_SPAN_PAIR, src->start.loc,
				   "a timer or perf event probe cannot start a span");
			rc = -EINVAL;
			continue;
		}
		if (src->has_end) {
			if (src->end.kind == PROBE_PROFILE || src->end.kind == PROBE_INTERVAL ||
			    probe_kind_is_perf(src->end.kind)) {
				diag_error(s->dl, DIAG_E_SPAN_PAIR, src->end.loc,
					   "a timer or perf event probe cannot end a span");
				rc = -EINVAL;
			} else if (resolve_spec(s, &src->end) != 0) {
				rc = -EINVAL;
			}
		} else if (resolve_span_end(s, src) != 0) {
			rc = -EINVAL;
		}
	}
	return rc;
}

bool sema_span_same_probe(const struct source *src)
{
	return src->is_span && src->has_end && src->start.kind == src->end.kind &&
	       src->start.text && src->end.text && strcmp(src->start.text, src->end.text) == 0 &&
	       src->start.set && src->end.set && src->start.set->n == src->end.set->n;
}

void sema_release(struct ast_query *q)
{
	if (!q)
		return;
	for (int i = 0; i < q->nsources; i++) {
		struct source *src = &q->sources[i];

		if (src->start.set)
			probe_set_free(src->start.set);
		if (src->has_end && src->end.set && src->end.set != src->start.set)
			probe_set_free(src->end.set);
		src->start.set = src->end.set = NULL;
	}
	kbtf_free(q->kbtf);
	q->kbtf = NULL;
}
