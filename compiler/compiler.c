// SPDX-License-Identifier: Apache-2.0
/*
 * The pass driver: runs parse -> sema -> plan -> codegen -> clang in order, stopping at the
 * first pass that reports an error, and dumps the tree or plan after any pass on request
 * (`weft explain --dump=PASS`).  It owns nothing beyond the compile_result it fills.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "compiler/compiler.h"
#include "compiler/ast.h"
#include "compiler/parser.h"
#include "compiler/plan.h"
#include "compiler/sema.h"
#include "compiler/codegen.h"

static const char *const pass_names[PASS__COUNT] = {
	[PASS_PARSE] = "parse",	    [PASS_SEMA] = "sema",   [PASS_PLAN] = "plan",
	[PASS_CODEGEN] = "codegen", [PASS_CLANG] = "clang",
};

const char *compile_pass_name(enum compile_pass p)
{
	return (unsigned)p < PASS__COUNT ? pass_names[p] : "?";
}

enum compile_pass compile_pass_lookup(const char *name)
{
	for (int i = 0; i < PASS__COUNT; i++)
		if (strcmp(pass_names[i], name) == 0)
			return i;
	return PASS__COUNT;
}

static void dump(const struct compile_opts *o, enum compile_pass p, struct compile_result *r)
{
	FILE *out = o->dump_out ? o->dump_out : stdout;

	if (!(o->dump & (1u << p)))
		return;
	fprintf(out, "== after %s\n", compile_pass_name(p));
	switch (p) {
	case PASS_PARSE:
	case PASS_SEMA:
		ast_dump(r->ast, out);
		break;
	case PASS_PLAN:
		manifest_write(r->plan, out);
		break;
	case PASS_CODEGEN:
		fputs(r->bpf_source, out);
		break;
	case PASS_CLANG:
		fprintf(out, "BPF object: %zu bytes%s\n", r->object_sz,
			r->cache_hit ? " (from the compile cache)" : "");
		break;
	default:
		break;
	}
}

int compiler_run(const char *src, const struct compile_opts *opts, enum compile_pass last,
		 struct diag_list *dl, struct compile_result *res)
{
	struct compile_opts o = { 0 };
	struct sema_opts so = { 0 };
	int rc;

	if (opts)
		memcpy(&o, opts, opts->sz && opts->sz < sizeof(o) ? opts->sz : sizeof(o));
	memset(res, 0, sizeof(*res));

	res->ast = parse_query(src, dl);
	if (!res->ast)
		return diag_has_errors(dl) ? -EINVAL : -ENOMEM;
	dump(&o, PASS_PARSE, res);
	if (last == PASS_PARSE)
		return 0;

	so.pid = o.pid;
	rc = sema_check(res->ast, &so, dl);
	if (rc)
		return rc;
	dump(&o, PASS_SEMA, res);
	if (last == PASS_SEMA)
		return 0;

	res->plan = plan_build(res->ast, o.pid, dl);
	if (!res->plan)
		return diag_has_errors(dl) ? -EINVAL : -errno;
	dump(&o, PASS_PLAN, res);
	if (last == PASS_PLAN)
		return 0;

	rc = codegen_emit(res->ast, res->plan, dl, &res->bpf_source);
	if (rc)
		return rc;
	dump(&o, PASS_CODEGEN, res);
	if (last == PASS_CODEGEN)
		return 0;

	rc = clang_compile(res->bpf_source, &o, dl, &res->object, &res->object_sz, &res->cache_hit);
	if (rc)
		return rc;
	dump(&o, PASS_CLANG, res);
	return 0;
}

void compile_result_free(struct compile_result *res)
{
	if (!res)
		return;
	plan_free(res->plan);
	sema_release(res->ast);
	ast_query_free(res->ast);
	free(res->bpf_source);
	free(res->object);
	memset(res, 0, sizeof(*res));
}

/* Sites of one resolved probe as written: attach points, USDT call sites each. */
static int spec_sites(const struct probe_spec *sp)
{
	int n = 0;

	for (int i = 0; sp->set && i < sp->set->n; i++)
		n += sp->set->v[i].kind == PROBE_USDT && sp->set->v[i].nsites > 0 ?
			     sp->set->v[i].nsites :
			     1;
	return n;
}

int compile_sites_print(const struct compile_result *res, const char *prefix, FILE *out)
{
	const struct ast_query *q = res->ast;
	int lines = 0;

	for (int i = 0; q && i < q->nsources; i++) {
		const struct source *src = &q->sources[i];

		for (int end = 0; end < 2; end++) {
			const struct probe_spec *sp = end ? &src->end : &src->start;
			int n;

			/* an implied span end (uretprobe of the same functions) adds nothing new */
			if ((end && (!src->is_span || !src->has_end)) || !sp->wild || !sp->set)
				continue;
			n = spec_sites(sp);
			fprintf(out, "%s%s matched %d site%s\n", prefix, sp->text, n,
				n == 1 ? "" : "s");
			lines++;
		}
	}
	return lines;
}
