// SPDX-License-Identifier: Apache-2.0
/*
 * The syscall provider: `syscall:NAME` is the tracepoint syscalls:sys_enter_NAME, with the
 * system call's arguments as fields (the syscall number is dropped: the probe names it) and
 * every pointer argument marked as user memory, so that str(args.filename) reads with
 * bpf_probe_read_user_str.  span(syscall:NAME) ends at syscalls:sys_exit_NAME, resolved by
 * probe_syscall_exit_resolve(), whose one field is `ret`.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "probes/probes.h"
#include "probes/provider.h"

#define SYS_ENTER "sys_enter_"
#define SYS_EXIT "sys_exit_"

int syscall_names_list(const char *name_glob, struct strv *out)
{
	struct strv evs = { 0 };
	char glob[PROBE_NAME_MAX + 16];
	int ret;

	snprintf(glob, sizeof(glob), SYS_ENTER "%s", name_glob ? name_glob : "*");
	ret = tracefs_events_list("syscalls", glob, &evs);
	for (int i = 0; i < evs.n && ret == 0; i++)
		ret = strv_push(out, evs.v[i] + strlen("syscalls:" SYS_ENTER));
	strv_free(&evs);
	strv_sort(out);
	return ret;
}

/* Drops __syscall_nr and marks pointers as user memory. */
static void syscall_fields_fix(struct probe_target *t)
{
	int w = 0;

	for (int i = 0; i < t->nfields; i++) {
		struct probe_field *f = &t->fields[i];

		if (strcmp(f->name, "__syscall_nr") == 0)
			continue;
		if (f->kind == FIELD_PTR)
			f->user = true;
		t->fields[w++] = *f;
	}
	t->nfields = w;
}

static int syscall_unknown(const char *name, const char *prefix, struct probe_err *err)
{
	struct strv names = { 0 };

	perr_set(err, PERR_UNKNOWN, NULL, "no system call %s (no tracepoint syscalls:%s%s)", name,
		 prefix, name);
	if (syscall_names_list(NULL, &names) == 0)
		perr_fix_near(err, name, (const char *const *)names.v, names.n, "syscall:");
	strv_free(&names);
	return -1;
}

/* Resolves NAME (a glob allowed) to syscalls:sys_enter_NAME or, with exit, sys_exit_NAME. */
static int syscall_resolve_one(const char *name, bool exit, const struct probe_ctx *ctx,
			       struct probe_set *set, struct probe_err *err)
{
	const char *prefix = exit ? SYS_EXIT : SYS_ENTER;
	struct strv names = { 0 };
	int start = set->n, ret = 0;

	if (!probe_has_wildcard(name)) {
		ret = strv_push(&names, name);
	} else {
		ret = syscall_names_list(name, &names);
		if (ret == 0 && names.n == 0) {
			ret = perr_set(err, PERR_NO_MATCH, "see `weft list syscall:*`",
				       "no system call matches %s", name);
			goto out_free;
		}
		if (ret == 0 && names.n > probe_ctx_max_targets(ctx)) {
			ret = perr_set(
				err, PERR_TOO_MANY, "narrow the pattern",
				"syscall:%s matches %d system calls, more than the limit of %d",
				name, names.n, probe_ctx_max_targets(ctx));
			goto out_free;
		}
	}
	if (ret) {
		ret = perr_set(err, ret == -ENODEV ? PERR_FEATURE : PERR_SYSTEM, NULL,
			       "listing system calls: %s", strerror(-ret));
		goto out_free;
	}
	for (int i = 0; i < names.n; i++) {
		char event[PROBE_NAME_MAX + 16];
		struct probe_target *t;

		snprintf(event, sizeof(event), "%s%s", prefix, names.v[i]);
		ret = tracepoint_target_add(set, "syscalls", event, ctx, &t, err);
		if (ret) {
			if (err->kind == PERR_UNKNOWN)
				syscall_unknown(names.v[i], prefix, err);
			probe_set_truncate(set, start);
			break;
		}
		syscall_fields_fix(t);
		if (exit) {
			t->has_retval =
				true; /* a tracepoint, named as one: syscall:NAME is the entry */
		} else {
			t->kind = PROBE_SYSCALL;
			snprintf(t->name, sizeof(t->name), "syscall:%s", names.v[i]);
		}
	}
out_free:
	strv_free(&names);
	return ret;
}

static int syscall_resolve(const char *const *parts, int nparts, uint64_t offset, bool has_offset,
			   const struct probe_ctx *ctx, struct probe_set *set,
			   struct probe_err *err)
{
	if (nparts != 1)
		return perr_set(err, PERR_SYNTAX, "write syscall:NAME",
				"a syscall probe has one part, the system call's name");
	if (has_offset)
		return perr_set(err, PERR_OFFSET, NULL, "a syscall probe takes no +offset");
	return syscall_resolve_one(parts[0], false, ctx, set, err);
}

int probe_syscall_exit_resolve(const char *name, const struct probe_ctx *ctx, struct probe_set *set,
			       struct probe_err *err)
{
	return syscall_resolve_one(name, true, ctx, set, err);
}

static int syscall_list(const char *const *parts, int nparts, const struct probe_ctx *ctx,
			probe_list_cb cb, void *arg, struct probe_err *err)
{
	struct strv names = { 0 };
	struct probe_target t;
	int ret;

	ret = syscall_names_list(nparts > 0 ? parts[0] : NULL, &names);
	if (ret) {
		strv_free(&names);
		return perr_set(err, ret == -ENODEV ? PERR_FEATURE : PERR_SYSTEM, NULL,
				"listing system calls: %s", strerror(-ret));
	}
	for (int i = 0; i < names.n && ret == 0; i++) {
		memset(&t, 0, sizeof(t));
		t.kind = PROBE_SYSCALL;
		snprintf(t.name, sizeof(t.name), "syscall:%s", names.v[i]);
		snprintf(t.category, sizeof(t.category), "syscalls");
		snprintf(t.event, sizeof(t.event), SYS_ENTER "%s", names.v[i]);
		ret = cb(&t, arg);
	}
	strv_free(&names);
	return ret;
}

static bool syscall_available(struct probe_err *err)
{
	struct strv names = { 0 };
	bool ok;

	if (!provider_tracepoint.available(err))
		return false;
	ok = syscall_names_list("read", &names) == 0 && names.n == 1;
	strv_free(&names);
	if (!ok)
		perr_set(err, PERR_FEATURE, "use tracepoint:raw_syscalls:sys_enter",
			 "this kernel has no syscall tracepoints (CONFIG_FTRACE_SYSCALLS)");
	return ok;
}

const struct probe_provider provider_syscall = {
	.kind = PROBE_SYSCALL,
	.name = "syscall",
	.alias = NULL,
	.min_parts = 1,
	.max_parts = 1,
	.usage = "syscall:NAME",
	.resolve = syscall_resolve,
	.list = syscall_list,
	.available = syscall_available,
	.attach = tracepoint_attach, /* the target is syscalls:sys_enter_NAME */
};
