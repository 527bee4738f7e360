// SPDX-License-Identifier: Apache-2.0
/*
 * The kprobe and kretprobe providers: `kprobe:FUNC[+OFF]`, `kretprobe:FUNC`.  Where the
 * kernel has kprobes, FUNC (a glob allowed) is resolved against the functions ftrace can
 * attach to (available_filter_functions), or /proc/kallsyms's text symbols when that file is
 * absent.  Where it has none (a kernel built without CONFIG_KPROBES, as on weft's development
 * machines) every kprobe is refused before anything else, and the fix names the tracepoints
 * that cover the same ground: the system call a do_sys_* function implements, or tracepoints
 * whose names contain the function's name or a part of it.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/libbpf.h>
#include "probes/probes.h"
#include "probes/provider.h"

#define KPROBE_NO_FEATURE                                                                    \
	"this kernel has no kprobes (no kprobe PMU in /sys/bus/event_source/devices and no " \
	"kprobe_events in tracefs)"

/* Adds s to the fix list unless present; false when the list is full. */
static bool fix_add(struct strv *fix, const char *s)
{
	for (int i = 0; i < fix->n; i++)
		if (strcmp(fix->v[i], s) == 0)
			return true;
	if (fix->n >= 6)
		return false;
	return strv_push(fix, s) == 0;
}

/* The part of a kernel function name that names what it does: "__x64_sys_openat" and
 * "do_sys_openat2" give "openat" and "openat2". */
static const char *kfunc_core(const char *fn)
{
	static const char *const prefixes[] = { "__x64_sys_", "__ia32_sys_", "__se_sys_",
						"__do_sys_",  "__sys_",	     "ksys_",
						"do_sys_",    "sys_",	     "do_",
						"__" };

	for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++) {
		size_t len = strlen(prefixes[i]);

		if (strncmp(fn, prefixes[i], len) == 0 && fn[len])
			return fn + len;
	}
	return fn;
}

static void syscall_suggest(struct strv *fix, const struct strv *sys, const char *name, bool ret)
{
	char buf[PROBE_NAME_MAX * 2 + 64];

	for (int i = 0; i < sys->n; i++) {
		if (strcmp(sys->v[i], name) != 0)
			continue;
		if (ret)
			snprintf(buf, sizeof(buf),
				 "span(syscall:%s) or tracepoint:syscalls:sys_exit_%s", name, name);
		else
			snprintf(buf, sizeof(buf), "syscall:%s (tracepoint:syscalls:sys_enter_%s)",
				 name, name);
		fix_add(fix, buf);
	}
}

/* Fills err->fix with tracepoints that may stand in for kernel function fn. */
static void kprobe_fix(const char *fn, bool ret, struct probe_err *err)
{
	struct strv sys = { 0 }, tps = { 0 }, fix = { 0 };
	const char *core = kfunc_core(fn);
	char tok[PROBE_NAME_MAX], *save = NULL, *t;
	size_t len = 0;

	syscall_names_list(NULL, &sys);
	tracefs_events_list(NULL, NULL, &tps);

	/* 1. the syscall it implements, and its sibling without a version digit (openat2) */
	snprintf(tok, sizeof(tok), "%s", core);
	syscall_suggest(&fix, &sys, tok, ret);
	for (len = strlen(tok); len > 0 && isdigit((unsigned char)tok[len - 1]); len--)
		tok[len - 1] = '\0';
	syscall_suggest(&fix, &sys, tok, ret);
	/* 2. tracepoints outside syscalls whose names contain the core name */
	for (int i = 0; i < tps.n; i++)
		if (strncmp(tps.v[i], "syscalls:", 9) != 0 && strstr(tps.v[i], core)) {
			char buf[PROBE_NAME_MAX * 2 + 16];

			snprintf(buf, sizeof(buf), "tracepoint:%s", tps.v[i]);
			if (!fix_add(&fix, buf))
				break;
		}
	/* 3. syscalls named by a part of it ("vfs_read" -> read) */
	snprintf(tok, sizeof(tok), "%s", core);
	for (t = strtok_r(tok, "_", &save); t; t = strtok_r(NULL, "_", &save))
		if (strlen(t) >= 3)
			syscall_suggest(&fix, &sys, t, ret);

	if (fix.n == 0) {
		snprintf(err->fix, sizeof(err->fix),
			 "use tracepoint:CATEGORY:EVENT or syscall:NAME instead (see `weft list`)");
	} else {
		len = (size_t)snprintf(err->fix, sizeof(err->fix), "use instead: ");
		for (int i = 0; i < fix.n && len < sizeof(err->fix); i++)
			len += (size_t)snprintf(err->fix + len, sizeof(err->fix) - len, "%s%s",
						i ? ", " : "", fix.v[i]);
	}
	strv_free(&sys);
	strv_free(&tps);
	strv_free(&fix);
}

/* Every attachable kernel function, sorted and unique. */
static int kfuncs_read(struct strv *out)
{
	const char *tfs = tracefs_dir();
	char path[128], line[512];
	bool kallsyms = false;
	FILE *f = NULL;

	if (tfs) {
		snprintf(path, sizeof(path), "%s/available_filter_functions", tfs);
		f = fopen(path, "re");
	}
	if (!f) {
		f = fopen("/proc/kallsyms", "re");
		kallsyms = true;
	}
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		char name[256], type = 0;
		unsigned long long addr;

		if (kallsyms) {
			if (sscanf(line, "%llx %c %255s", &addr, &type, name) != 3 ||
			    (type != 't' && type != 'T'))
				continue;
		} else if (sscanf(line, "%255s", name) != 1) {
			continue;
		}
		if (strv_push(out, name)) {
			fclose(f);
			return -ENOMEM;
		}
	}
	fclose(f);
	strv_sort(out);
	strv_uniq(out);
	return 0;
}

static int kprobe_resolve_kind(enum probe_kind kind, const char *const *parts, int nparts,
			       uint64_t offset, bool has_offset, const struct probe_ctx *ctx,
			       struct probe_set *set, struct probe_err *err)
{
	bool ret_probe = kind == PROBE_KRETPROBE;
	struct strv fns = { 0 };
	int start = set->n, nmatch = 0, rc = 0;

	if (nparts != 1)
		return perr_set(err, PERR_SYNTAX, NULL, "write %s:FUNCTION", probe_kind_name(kind));
	if (!probe_features_get()->kprobe) {
		perr_set(err, PERR_FEATURE, NULL, KPROBE_NO_FEATURE);
		kprobe_fix(parts[0], ret_probe, err);
		return -1;
	}
	if (has_offset && ret_probe)
		return perr_set(err, PERR_OFFSET, NULL, "a kretprobe takes no +offset");
	if (has_offset && probe_has_wildcard(parts[0]))
		return perr_set(err, PERR_OFFSET, NULL, "an +offset needs one function");
	rc = kfuncs_read(&fns);
	if (rc) {
		strv_free(&fns);
		return perr_set(err, PERR_SYSTEM, NULL, "reading kernel functions: %s",
				strerror(-rc));
	}
	for (int i = 0; i < fns.n; i++)
		nmatch += probe_glob_match(parts[0], fns.v[i]);
	if (nmatch == 0) {
		if (probe_has_wildcard(parts[0])) {
			rc = perr_set(err, PERR_NO_MATCH, NULL, "no kernel function matches %s",
				      parts[0]);
		} else {
			rc = perr_set(err, PERR_SYMBOL, NULL,
				      "no kernel function %s that can be probed", parts[0]);
			perr_fix_near(err, parts[0], (const char *const *)fns.v, fns.n, NULL);
		}
		goto out_free;
	}
	if (nmatch > probe_ctx_max_targets(ctx)) {
		rc = perr_set(err, PERR_TOO_MANY, "narrow the pattern",
			      "%s matches %d kernel functions, more than the limit of %d", parts[0],
			      nmatch, probe_ctx_max_targets(ctx));
		goto out_free;
	}
	for (int i = 0; i < fns.n; i++) {
		struct probe_target *t;

		if (!probe_glob_match(parts[0], fns.v[i]))
			continue;
		if (probe_set_push(set, &t)) {
			probe_set_truncate(set, start);
			rc = perr_set(err, PERR_SYSTEM, NULL, "out of memory");
			break;
		}
		t->kind = kind;
		if (has_offset)
			snprintf(t->name, sizeof(t->name), "%s:%s+0x%llx", probe_kind_name(kind),
				 fns.v[i], (unsigned long long)offset);
		else
			snprintf(t->name, sizeof(t->name), "%s:%s", probe_kind_name(kind),
				 fns.v[i]);
		snprintf(t->symbol, sizeof(t->symbol), "%s", fns.v[i]);
		t->offset = offset;
		t->nargs = 6;
		for (int k = 0; k < 12; k++)
			t->arg_size[k] = 8;
		t->has_retval = ret_probe;
		t->pid = ctx ? ctx->pid : 0;
	}
out_free:
	strv_free(&fns);
	return rc ? -1 : 0;
}

static int kprobe_resolve(const char *const *parts, int nparts, uint64_t offset, bool has_offset,
			  const struct probe_ctx *ctx, struct probe_set *set, struct probe_err *err)
{
	return kprobe_resolve_kind(PROBE_KPROBE, parts, nparts, offset, has_offset, ctx, set, err);
}

static int kretprobe_resolve(const char *const *parts, int nparts, uint64_t offset, bool has_offset,
			     const struct probe_ctx *ctx, struct probe_set *set,
			     struct probe_err *err)
{
	return kprobe_resolve_kind(PROBE_KRETPROBE, parts, nparts, offset, has_offset, ctx, set,
				   err);
}

static int kprobe_list_kind(enum probe_kind kind, const char *const *parts, int nparts,
			    probe_list_cb cb, void *arg, struct probe_err *err)
{
	struct strv fns = { 0 };
	int rc;

	if (!probe_features_get()->kprobe) {
		perr_set(err, PERR_FEATURE, NULL, KPROBE_NO_FEATURE);
		kprobe_fix(nparts > 0 ? parts[0] : "", kind == PROBE_KRETPROBE, err);
		return -1;
	}
	rc = kfuncs_read(&fns);
	if (rc) {
		strv_free(&fns);
		return perr_set(err, PERR_SYSTEM, NULL, "reading kernel functions: %s",
				strerror(-rc));
	}
	for (int i = 0; i < fns.n && rc == 0; i++) {
		struct probe_target t;

		if (nparts > 0 && !probe_glob_match(parts[0], fns.v[i]))
			continue;
		memset(&t, 0, sizeof(t));
		t.kind = kind;
		snprintf(t.name, sizeof(t.name), "%s:%s", probe_kind_name(kind), fns.v[i]);
		snprintf(t.symbol, sizeof(t.symbol), "%s", fns.v[i]);
		t.nargs = 6;
		t.has_retval = kind == PROBE_KRETPROBE;
		rc = cb(&t, arg);
	}
	strv_free(&fns);
	return rc;
}

static int kprobe_list(const char *const *parts, int nparts, const struct probe_ctx *ctx,
		       probe_list_cb cb, void *arg, struct probe_err *err)
{
	return kprobe_list_kind(PROBE_KPROBE, parts, nparts, cb, arg, err);
}

static int kretprobe_list(const char *const *parts, int nparts, const struct probe_ctx *ctx,
			  probe_list_cb cb, void *arg, struct probe_err *err)
{
	return kprobe_list_kind(PROBE_KRETPROBE, parts, nparts, cb, arg, err);
}

static bool kprobe_available(struct probe_err *err)
{
	if (probe_features_get()->kprobe)
		return true;
	perr_set(err, PERR_FEATURE,
		 "use tracepoint:CATEGORY:EVENT or syscall:NAME instead (see "
		 "`weft list`)",
		 KPROBE_NO_FEATURE);
	return false;
}

/* Where the kernel has kprobes (not weft's development machines: there the catalog refuses
 * first and probe_attach_target's availability check second). */
static int kprobe_attach(struct bpf_program *prog, const struct probe_target *t, uint64_t cookie,
			 pid_t pid, struct probe_links *links, struct probe_err *err)
{
	LIBBPF_OPTS(bpf_kprobe_opts, opts, .bpf_cookie = cookie, .offset = (size_t)t->offset,
		    .retprobe = t->kind == PROBE_KRETPROBE);
	struct bpf_link *link;

	if (!probe_features_get()->kprobe || !probe_pmu_exists("kprobe"))
		return perr_set(err, PERR_FEATURE,
				"use tracepoint:CATEGORY:EVENT or syscall:NAME instead (see "
				"`weft list`)",
				"this kernel has no kprobe PMU: cannot attach %s", t->name);
	link = bpf_program__attach_kprobe_opts(prog, t->symbol, &opts);
	if (!link)
		return perr_attach(err, t, pid, errno);
	if (probe_links_push(links, link)) {
		bpf_link__destroy(link);
		return perr_set(err, PERR_SYSTEM, NULL, "out of memory");
	}
	return 0;
}

const struct probe_provider provider_kprobe = {
	.kind = PROBE_KPROBE,
	.name = "kprobe",
	.alias = NULL,
	.min_parts = 1,
	.max_parts = 1,
	.usage = "kprobe:FUNCTION[+OFFSET]",
	.resolve = kprobe_resolve,
	.list = kprobe_list,
	.available = kprobe_available,
	.attach = kprobe_attach,
};

const struct probe_provider provider_kretprobe = {
	.kind = PROBE_KRETPROBE,
	.name = "kretprobe",
	.alias = NULL,
	.min_parts = 1,
	.max_parts = 1,
	.usage = "kretprobe:FUNCTION",
	.resolve = kretprobe_resolve,
	.list = kretprobe_list,
	.available = kprobe_available,
	.attach = kprobe_attach, /* t->kind says which */
};
