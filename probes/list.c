// SPDX-License-Identifier: Apache-2.0
/*
 * `weft list [PATTERN]`: the probes a query may name, one a line, sorted, in canonical form.
 * PATTERN is a probe as written, with globs ("syscall:open*", "tp:sched:*",
 * "uprobe:libc:mall*", "usdt:/usr/bin/python3:*"); missing trailing parts mean "*".  Without
 * a provider it is a binary (a path, or a library or program name: its functions and USDT
 * probes), or a glob over tracepoint and syscall names.  With `verbose`, each probe is
 * followed by its fields (tracepoint, syscall), its arguments (usdt) or its file offset
 * (uprobe), read the same way the compiler reads them.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "probes/probes.h"
#include "probes/provider.h"

#define LIST_MAX_PARTS 4

struct list_entry {
	char *name;
	char *detail; /* verbose lines, or NULL */
};

struct list_state {
	struct list_entry *v;
	int n, cap;
	bool verbose;
	const struct probe_ctx *ctx;
	const char *name_glob; /* bare-word listing: filter by this glob, NULL: all */
};

static const char *field_kind_desc(const struct probe_field *f, char *buf, size_t sz)
{
	switch (f->kind) {
	case FIELD_INT:
		snprintf(buf, sz, "%c%d", f->is_signed ? 's' : 'u', f->size * 8);
		return buf;
	case FIELD_PTR:
		return f->user ? "user pointer" : "kernel pointer";
	case FIELD_CHARS:
	case FIELD_DATA_LOC:
		return "string";
	case FIELD_ARRAY:
		return "array, not usable";
	}
	return "?";
}

/* Appends one "    TYPE NAME  (KIND)" line per field to a malloc'd string. */
static char *fields_describe(const struct probe_target *t)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	if (!f)
		return NULL;
	for (int i = 0; i < t->nfields; i++) {
		const struct probe_field *fl = &t->fields[i];
		const char *lb = strchr(fl->ctype, '[');
		char kbuf[16];

		/* "char[16]" + "comm" reads best as the C declaration "char comm[16]" */
		if (lb && fl->kind != FIELD_DATA_LOC && strncmp(fl->ctype, "__", 2) != 0)
			fprintf(f, "    %.*s %s%s  (%s)\n", (int)(lb - fl->ctype), fl->ctype,
				fl->name, lb, field_kind_desc(fl, kbuf, sizeof(kbuf)));
		else
			fprintf(f, "    %s %s  (%s)\n", fl->ctype, fl->name,
				field_kind_desc(fl, kbuf, sizeof(kbuf)));
	}
	if (t->has_retval)
		fprintf(f, "    retval\n");
	fclose(f);
	return buf;
}

static char *target_describe(const struct list_state *st, const struct probe_target *t)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f;

	if (t->kind == PROBE_TRACEPOINT || t->kind == PROBE_SYSCALL) {
		const struct probe_provider *p = probe_provider_get(t->kind);
		const char *parts[2] = { t->kind == PROBE_SYSCALL ? t->name + 8 : t->category,
					 t->event };
		struct probe_set set = { 0 };
		struct probe_err err;
		char *d = NULL;

		if (p->resolve(parts, t->kind == PROBE_SYSCALL ? 1 : 2, 0, false, st->ctx, &set,
			       &err) == 0 &&
		    set.n == 1)
			d = fields_describe(&set.v[0]);
		probe_set_free(&set);
		return d;
	}
	f = open_memstream(&buf, &len);
	if (!f)
		return NULL;
	if (t->kind == PROBE_USDT) {
		for (int i = 0; i < t->nargs && i < 12; i++)
			fprintf(f, "    arg%d  (%c%d)\n", i, t->arg_signed[i] ? 's' : 'u',
				t->arg_size[i] * 8);
		fprintf(f, "    %d call site%s%s\n", t->nsites, t->nsites == 1 ? "" : "s",
			t->usdt_semaphore ? ", semaphore" : "");
	} else if (t->kind == PROBE_UPROBE || t->kind == PROBE_URETPROBE) {
		fprintf(f, "    file offset 0x%llx\n", (unsigned long long)t->sym_offset);
	} else if (t->nargs) {
		fprintf(f, "    arg0..arg%d%s\n", t->nargs - 1, t->has_retval ? ", retval" : "");
	}
	fclose(f);
	return buf;
}

static int list_collect(const struct probe_target *t, void *arg)
{
	struct list_state *st = arg;
	struct list_entry *e;

	if (st->name_glob) {
		const char *colon = strchr(t->name, ':');

		/* a bare word matches the name without the provider, or any part of it */
		if (!colon || (!probe_glob_match(st->name_glob, colon + 1) &&
			       !probe_glob_match(st->name_glob, t->event) &&
			       !probe_glob_match(st->name_glob, t->name)))
			return 0;
	}
	if (st->n == st->cap) {
		int cap = st->cap ? st->cap * 2 : 256;
		struct list_entry *v = realloc(st->v, (size_t)cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		st->v = v;
		st->cap = cap;
	}
	e = &st->v[st->n];
	e->name = strdup(t->name);
	if (!e->name)
		return -ENOMEM;
	e->detail = st->verbose ? target_describe(st, t) : NULL;
	st->n++;
	return 0;
}

static int entry_cmp(const void *a, const void *b)
{
	return strcmp(((const struct list_entry *)a)->name, ((const struct list_entry *)b)->name);
}

/* Runs one provider's list op; a callback failure (-ENOMEM) becomes PERR_SYSTEM. */
static int list_run(const struct probe_provider *p, const char *const *parts, int nparts,
		    struct list_state *st, struct probe_err *err)
{
	int ret;

	if (!p->list)
		return perr_set(err, PERR_SYNTAX, NULL, "%s probes are not listed: any %s works",
				p->name, p->usage);
	err->kind = PERR_NONE;
	ret = p->list(parts, nparts, st->ctx, list_collect, st, err);
	if (ret && err->kind == PERR_NONE)
		return perr_set(err, PERR_SYSTEM, NULL, "out of memory");
	return ret ? -1 : 0;
}

static bool looks_like_binary(const char *word, const struct probe_ctx *ctx)
{
	char path[4096];

	if (strchr(word, '/'))
		return true;
	if (probe_has_wildcard(word) || strchr(word, ':'))
		return false;
	return probe_resolve_binary(word, ctx ? ctx->pid : 0, path, sizeof(path)) == 0;
}

static int list_unknown_provider(char *pat, struct probe_err *err)
{
	const char *names[PROBE__COUNT + 1];
	int n = 0;

	*strchr(pat, ':') = '\0';
	for (int i = 0; probe_providers[i] && n < PROBE__COUNT; i++)
		names[n++] = probe_providers[i]->name;
	perr_set(err, PERR_PROVIDER, NULL, "unknown probe provider '%s'", pat);
	perr_fix_near(err, pat, names, n, NULL);
	return -1;
}

static int list_pattern(char *pat, struct list_state *st, struct probe_err *err)
{
	const struct probe_provider *p;
	const char *parts[LIST_MAX_PARTS + 1];
	int nparts = 0;
	char *s = pat, *colon;

	if (!pat || !*pat) {
		if (list_run(&provider_tracepoint, NULL, 0, st, err))
			return -1;
		return list_run(&provider_syscall, NULL, 0, st, err);
	}
	colon = strchr(pat, ':');
	if (colon)
		*colon = '\0';
	p = probe_provider_find(pat);
	if (colon)
		*colon = ':';
	if (!p) {
		if (looks_like_binary(pat, st->ctx)) {
			/* a binary on its own: its functions and its USDT probes */
			parts[0] = pat;
			if (list_run(&provider_uprobe, parts, 1, st, err))
				return -1;
			return list_run(&provider_usdt, parts, 1, st, err);
		}
		if (colon && strchr(colon + 1, ':'))
			return list_unknown_provider(pat, err);
		if (colon) {
			/* "sched:sched_*": a tracepoint written without its provider */
			*colon = '\0';
			parts[0] = pat;
			parts[1] = colon + 1;
			return list_run(&provider_tracepoint, parts, 2, st, err);
		}
		st->name_glob = pat;
		if (list_run(&provider_tracepoint, NULL, 0, st, err))
			return -1;
		return list_run(&provider_syscall, NULL, 0, st, err);
	}
	s = colon ? colon + 1 : NULL;
	while (s && nparts < LIST_MAX_PARTS) {
		char *c = strchr(s, ':');

		if (c)
			*c = '\0';
		parts[nparts++] = s;
		s = c ? c + 1 : NULL;
	}
	if (s || nparts > p->max_parts)
		return perr_set(err, PERR_SYNTAX, NULL, "too many parts for %s", p->usage);
	if (nparts > 0) {
		char *plus = strchr(parts[nparts - 1], '+');

		if (plus && (p->kind == PROBE_UPROBE || p->kind == PROBE_KPROBE))
			*plus = '\0';
	}
	return list_run(p, parts, nparts, st, err);
}

int probe_list_print(const char *pattern, const struct probe_ctx *ctx, bool verbose, FILE *out,
		     struct probe_err *err)
{
	struct list_state st = { .verbose = verbose, .ctx = ctx };
	char *pat = pattern ? strdup(pattern) : NULL;
	int ret;

	if (pattern && !pat)
		return perr_set(err, PERR_SYSTEM, NULL, "out of memory");
	ret = list_pattern(pat, &st, err);
	if (ret == 0) {
		int printed = 0;

		if (st.n > 1)
			qsort(st.v, (size_t)st.n, sizeof(*st.v), entry_cmp);
		for (int i = 0; i < st.n; i++) {
			/* a probe reached twice is printed once */
			if (i > 0 && strcmp(st.v[i].name, st.v[i - 1].name) == 0)
				continue;
			fprintf(out, "%s\n", st.v[i].name);
			printed++;
			if (st.v[i].detail)
				fputs(st.v[i].detail, out);
		}
		ret = printed;
	}
	for (int i = 0; i < st.n; i++) {
		free(st.v[i].name);
		free(st.v[i].detail);
	}
	free(st.v);
	free(pat);
	return ret;
}
