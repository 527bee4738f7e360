// SPDX-License-Identifier: Apache-2.0
/*
 * The tracepoint provider: `tracepoint:CATEGORY:EVENT` (alias `tp:`), globs in either part.
 * Targets carry the fields of the event's tracefs format and its id; resolution is a pure
 * read of tracefs, so it needs root only for the mount, never for listing.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include "probes/probes.h"
#include "probes/provider.h"

int tracepoint_target_add(struct probe_set *set, const char *cat, const char *event,
			  const struct probe_ctx *ctx, struct probe_target **out,
			  struct probe_err *err)
{
	struct probe_field *fields;
	struct probe_target *t;
	int nfields, id, ret;

	ret = tracefs_format_read(cat, event, &fields, &nfields, &id);
	if (ret == -ENOENT || ret == -EINVAL || ret == -ENOTDIR)
		return perr_set(err, PERR_UNKNOWN, NULL, "no tracepoint %s:%s", cat, event);
	if (ret == -ENODEV)
		return perr_set(err, PERR_FEATURE,
				"mount it: mount -t tracefs nodev /sys/kernel/tracing",
				"tracefs is not mounted and could not be mounted");
	if (ret)
		return perr_set(err, PERR_SYSTEM, NULL, "reading the format of %s:%s: %s", cat,
				event, strerror(-ret));
	if (probe_set_push(set, &t)) {
		free(fields);
		return perr_set(err, PERR_SYSTEM, NULL, "out of memory");
	}
	t->kind = PROBE_TRACEPOINT;
	snprintf(t->name, sizeof(t->name), "tracepoint:%s:%s", cat, event);
	snprintf(t->category, sizeof(t->category), "%s", cat);
	snprintf(t->event, sizeof(t->event), "%s", event);
	t->tp_id = id;
	/* a system call's pointer arguments point into the caller's memory, whichever provider
	 * names the tracepoint (syscall:openat or tracepoint:syscalls:sys_enter_openat) */
	if (strcmp(cat, "syscalls") == 0)
		for (int i = 0; i < nfields; i++)
			if (fields[i].kind == FIELD_PTR)
				fields[i].user = true;
	t->fields = fields;
	t->nfields = nfields;
	t->pid = ctx ? ctx->pid : 0;
	if (out)
		*out = t;
	return 0;
}

/* Fills err for an unknown CAT:EVENT with near matches over every tracepoint. */
static int tracepoint_unknown(const char *cat, const char *event, struct probe_err *err)
{
	struct strv all = { 0 };
	char word[2 * PROBE_NAME_MAX + 2];

	perr_set(err, PERR_UNKNOWN, NULL, "no tracepoint %s:%s", cat, event);
	snprintf(word, sizeof(word), "%s:%s", cat, event);
	if (tracefs_events_list(NULL, NULL, &all) == 0)
		perr_fix_near(err, word, (const char *const *)all.v, all.n, "tracepoint:");
	strv_free(&all);
	return -1;
}

static int tracepoint_resolve(const char *const *parts, int nparts, uint64_t offset,
			      bool has_offset, const struct probe_ctx *ctx, struct probe_set *set,
			      struct probe_err *err)
{
	struct strv names = { 0 };
	int start = set->n, ret = 0;

	if (nparts != 2)
		return perr_set(err, PERR_SYNTAX, "write tracepoint:CATEGORY:EVENT",
				"a tracepoint has two parts, CATEGORY:EVENT");
	if (has_offset)
		return perr_set(err, PERR_OFFSET, NULL, "a tracepoint takes no +offset");
	if (!probe_has_wildcard(parts[0]) && !probe_has_wildcard(parts[1])) {
		if (tracepoint_target_add(set, parts[0], parts[1], ctx, NULL, err) == 0)
			return 0;
		if (err->kind == PERR_UNKNOWN)
			return tracepoint_unknown(parts[0], parts[1], err);
		return -1;
	}
	ret = tracefs_events_list(parts[0], parts[1], &names);
	if (ret == -ENODEV) {
		ret = perr_set(err, PERR_FEATURE, NULL, "tracefs is not mounted");
		goto out_free;
	}
	if (ret) {
		ret = perr_set(err, PERR_SYSTEM, NULL, "listing tracepoints: %s", strerror(-ret));
		goto out_free;
	}
	if (names.n == 0) {
		ret = perr_set(err, PERR_NO_MATCH, "see `weft list tracepoint:*`",
			       "no tracepoint matches %s:%s", parts[0], parts[1]);
		goto out_free;
	}
	if (names.n > probe_ctx_max_targets(ctx)) {
		ret = perr_set(err, PERR_TOO_MANY, "narrow the pattern",
			       "%s:%s matches %d tracepoints, more than the limit of %d", parts[0],
			       parts[1], names.n, probe_ctx_max_targets(ctx));
		goto out_free;
	}
	for (int i = 0; i < names.n; i++) {
		char *ev = strchr(names.v[i], ':');

		*ev++ = '\0';
		ret = tracepoint_target_add(set, names.v[i], ev, ctx, NULL, err);
		if (ret) {
			probe_set_truncate(set, start);
			break;
		}
	}
out_free:
	strv_free(&names);
	return ret;
}

static int tracepoint_list(const char *const *parts, int nparts, const struct probe_ctx *ctx,
			   probe_list_cb cb, void *arg, struct probe_err *err)
{
	struct strv names = { 0 };
	struct probe_target t;
	int ret;

	ret = tracefs_events_list(nparts > 0 ? parts[0] : NULL, nparts > 1 ? parts[1] : NULL,
				  &names);
	if (ret) {
		strv_free(&names);
		return perr_set(err, ret == -ENODEV ? PERR_FEATURE : PERR_SYSTEM, NULL,
				"listing tracepoints: %s", strerror(-ret));
	}
	for (int i = 0; i < names.n && ret == 0; i++) {
		char *ev = strchr(names.v[i], ':');

		*ev++ = '\0';
		memset(&t, 0, sizeof(t));
		t.kind = PROBE_TRACEPOINT;
		snprintf(t.name, sizeof(t.name), "tracepoint:%s:%s", names.v[i], ev);
		snprintf(t.category, sizeof(t.category), "%s", names.v[i]);
		snprintf(t.event, sizeof(t.event), "%s", ev);
		ret = cb(&t, arg);
	}
	strv_free(&names);
	return ret;
}

static bool tracepoint_available(struct probe_err *err)
{
	const struct probe_features *f = probe_features_get();

	if (!f->tracefs) {
		perr_set(err, PERR_FEATURE, "mount it: mount -t tracefs nodev /sys/kernel/tracing",
			 "tracefs is not mounted and could not be mounted");
		return false;
	}
	if (!f->tracepoint) {
		perr_set(err, PERR_FEATURE, NULL,
			 "this kernel cannot load BPF tracepoint programs");
		return false;
	}
	return true;
}

static const struct btf_type *btf_skip_mods(const struct btf *b, uint32_t id)
{
	const struct btf_type *t = btf__type_by_id(b, id);

	/* bounded: a cycle of modifiers would be corrupt BTF */
	for (int i = 0; t && i < 32 && (btf_is_mod(t) || btf_is_typedef(t)); i++)
		t = btf__type_by_id(b, t->type);
	return t && !btf_is_mod(t) && !btf_is_typedef(t) ? t : NULL;
}

int probe_tp_btf_args(const struct btf *b, const char *event, uint32_t *sizes, int max)
{
	struct btf *own = NULL;
	const struct btf_type *t;
	const struct btf_param *pa;
	char name[192];
	int id, n = -ENOENT;

	if (snprintf(name, sizeof(name), "btf_trace_%s", event) >= (int)sizeof(name))
		return -ENOENT;
	if (!b) {
		own = btf__load_vmlinux_btf();
		if (!own)
			return -ENOENT;
		b = own;
	}
	id = btf__find_by_name_kind(b, name, BTF_KIND_TYPEDEF);
	if (id <= 0)
		goto out;
	n = -EINVAL;
	t = btf__type_by_id(b, btf__type_by_id(b, (uint32_t)id)->type);
	if (!t || !btf_is_ptr(t))
		goto out;
	t = btf__type_by_id(b, t->type);
	if (!t || !btf_is_func_proto(t) || btf_vlen(t) < 1)
		goto out;
	pa = btf_params(t);
	for (int i = 0; i + 1 < btf_vlen(t) && i < max; i++) {
		const struct btf_type *a = btf_skip_mods(b, pa[i + 1].type);

		if (a && btf_is_ptr(a))
			sizes[i] = 8;
		else if (a && (btf_is_int(a) || btf_is_any_enum(a)))
			sizes[i] = a->size;
		else
			goto out;
	}
	n = btf_vlen(t) - 1; /* the first is the probe's own data */
out:
	btf__free(own);
	return n;
}

/* A perf event of type tracepoint with the program linked to it (BPF_LINK_CREATE when the
 * kernel has perf links, which bpf cookies need anyway).  pid is ignored: a tracepoint fires
 * for every process and the program filters, so that one attachment serves -p too.  A raw
 * tracepoint program (the compiler's choice for kernel:sockets: tp_btf/EVENT, its arguments
 * typed by the kernel's BTF, which libbpf resolves from the section name at load) is attached
 * as one, and a plain raw_tp program by the event's name; neither has a cookie: the program
 * was compiled for its one attach point. */
int tracepoint_attach(struct bpf_program *prog, const struct probe_target *t, uint64_t cookie,
		      pid_t pid, struct probe_links *links, struct probe_err *err)
{
	LIBBPF_OPTS(bpf_tracepoint_opts, opts, .bpf_cookie = cookie);
	struct bpf_link *link;

	if (bpf_program__type(prog) == BPF_PROG_TYPE_TRACING) /* tp_btf/EVENT */
		link = bpf_program__attach_trace(prog);
	else if (bpf_program__type(prog) == BPF_PROG_TYPE_RAW_TRACEPOINT)
		link = bpf_program__attach_raw_tracepoint(prog, t->event);
	else
		link = bpf_program__attach_tracepoint_opts(prog, t->category, t->event, &opts);
	if (!link)
		return perr_attach(err, t, pid, errno);
	if (probe_links_push(links, link)) {
		bpf_link__destroy(link);
		return perr_set(err, PERR_SYSTEM, NULL, "out of memory");
	}
	return 0;
}

const struct probe_provider provider_tracepoint = {
	.kind = PROBE_TRACEPOINT,
	.name = "tracepoint",
	.alias = "tp",
	.min_parts = 2,
	.max_parts = 2,
	.usage = "tracepoint:CATEGORY:EVENT",
	.resolve = tracepoint_resolve,
	.list = tracepoint_list,
	.available = tracepoint_available,
	.attach = tracepoint_attach,
};
