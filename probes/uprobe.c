// SPDX-License-Identifier: Apache-2.0
/*
 * The uprobe and uretprobe providers: `uprobe:BIN:FUNC[+OFF]`, `uretprobe:BIN:FUNC`.  BIN is
 * resolved to an ELF file (binary.c), FUNC (a glob allowed) against its function symbols
 * (elf.c), and each target carries the file offset the kernel attaches at.  A pattern that
 * names several aliases of one address keeps one of them: two probes on one instruction would
 * count every call twice.  An +offset must be the first byte of an instruction: the function's
 * code is decoded from its start up to the offset (insn.c), since a breakpoint written inside
 * an instruction corrupts it and the traced process loops or dies.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/libbpf.h>
#include "base/file.h"
#include "probes/elf.h"
#include "probes/insn.h"
#include "probes/probes.h"
#include "probes/provider.h"

int probe_binary_part(const char *bin, const struct probe_ctx *ctx, char *out, size_t outsz,
		      struct probe_err *err)
{
	int ret;

	if (probe_ctx_check_pid(ctx, err))
		return -1;
	if (probe_resolve_binary(bin, ctx ? ctx->pid : 0, out, outsz) != 0) {
		if (strchr(bin, '/'))
			return perr_set(err, PERR_BINARY, NULL, "no such file: %s", bin);
		return perr_set(err, PERR_LIBRARY,
				"give the file's path, or -p PID of a process that maps it",
				"cannot find a library or program named '%s'%s", bin,
				ctx && ctx->pid > 0 ?
					" (in the maps of that process, the linker "
					"cache, the library directories or PATH)" :
					" (in the linker cache, the library directories "
					"or PATH)");
	}
	ret = probe_elf_check(out);
	if (ret == -ENOENT)
		return perr_set(err, PERR_BINARY, NULL, "no such file: %s", out);
	if (ret == -ENOEXEC)
		return perr_set(err, PERR_BINARY, NULL, "not an ELF file: %s", out);
	if (ret)
		return perr_set(err, PERR_BINARY, NULL, "cannot read %s: %s", out,
				weft_file_strerror(ret));
	return 0;
}

int probe_binary_attachable(const struct probe_target *t, pid_t pid, struct probe_err *err)
{
	char why[160];
	int fd = weft_file_open(t->binary, WEFT_FILE_MAX_ELF, NULL, why, sizeof(why));

	if (fd == -ENODEV || fd == -EISDIR || fd == -EFBIG)
		return perr_set(err, PERR_ATTACH,
				"the file is not what the query was compiled against: compile it "
				"again on this host",
				"cannot attach to %s: %s: %s", t->name, t->binary, why);
	if (fd < 0)
		return perr_attach(err, t, pid, -fd); /* gone, unreadable: as libbpf would say */
	close(fd);
	return 0;
}

static int func_name_cmp(const void *key, const void *elem)
{
	return strcmp(key, ((const struct probe_elf_func *)elem)->name);
}

static int offset_cmp(const void *a, const void *b)
{
	const struct probe_elf_func *x = *(const struct probe_elf_func *const *)a;
	const struct probe_elf_func *y = *(const struct probe_elf_func *const *)b;

	if (x->offset != y->offset)
		return x->offset < y->offset ? -1 : 1;
	return strcmp(x->name, y->name);
}

static int name_ptr_cmp(const void *a, const void *b)
{
	const struct probe_elf_func *x = *(const struct probe_elf_func *const *)a;
	const struct probe_elf_func *y = *(const struct probe_elf_func *const *)b;

	return strcmp(x->name, y->name);
}

static int symbol_unknown(const char *path, const char *sym, const struct probe_elf_func *funcs,
			  int nfuncs, struct probe_err *err)
{
	const char **names;

	if (nfuncs <= 0)
		return perr_set(err, PERR_SYMBOL,
				"use a binary with a symbol table, or usdt: probes",
				"%s has no function symbols (stripped?)", path);
	perr_set(err, PERR_SYMBOL, NULL, "no function %s in %s", sym, path);
	names = malloc((size_t)nfuncs * sizeof(*names));
	if (!names)
		return -1;
	for (int i = 0; i < nfuncs; i++)
		names[i] = funcs[i].name;
	perr_fix_near(err, sym, names, nfuncs, NULL);
	free(names);
	return -1;
}

#define UPROBE_OFFSET_CHECK_MAX (16u << 20)

/*
 * Refuses an +offset into fn that is not an instruction boundary, naming the instruction it
 * falls in and the boundaries on either side.  Only fn's first offset + PROBE_INSN_MAX bytes
 * are read and decoded (offset < fn->size holds already).  0, or -1 with err filled.
 */
static int uprobe_offset_check(const char *path, const struct probe_elf_func *fn, uint64_t offset,
			       struct probe_err *err)
{
	const char *f = fn->name;
	uint64_t want = offset + PROBE_INSN_MAX < fn->size ? offset + PROBE_INSN_MAX : fn->size;
	unsigned long long at, end, off = offset;
	struct probe_insn insn;
	uint16_t machine = 0;
	uint8_t *code;
	size_t got;
	int ret;

	if (offset == 0)
		return 0; /* the symbol's address starts an instruction */
	if (offset > UPROBE_OFFSET_CHECK_MAX) /* bounds the bytes read and decoded */
		return perr_set(err, PERR_OFFSET_INSN, "probe an offset below 16 MiB",
				"cannot check that %s+%llu starts an instruction: it is more than "
				"16 MiB into %s",
				f, off, f);
	code = malloc((size_t)want);
	if (!code)
		return perr_set(err, PERR_SYSTEM, NULL, "out of memory");
	ret = probe_elf_code_read(path, fn->offset, code, (size_t)want, &got, &machine);
	if (ret) {
		free(code);
		return perr_set(err, PERR_BINARY, NULL, "cannot read the code of %s in %s: %s", f,
				path, ret == -ENOEXEC ? "corrupt ELF file" : strerror(-ret));
	}
	if (!probe_insn_machine_ok(machine)) {
		free(code);
		return perr_set(
			err, PERR_OFFSET_INSN, "drop the +offset: the entry always works",
			"cannot check that %s+%llu starts an instruction: weft decodes x86-64, "
			"i386 and arm64 code, and %s is for ELF machine %u",
			f, off, path, machine);
	}
	ret = probe_insn_find(machine, code, got, offset, &insn);
	free(code);
	at = insn.start;
	end = insn.start + insn.len;
	if (ret == 0 && insn.start == offset)
		return 0;
	if (ret == 0 && end < fn->size)
		return perr_set(
			err, PERR_OFFSET_INSN,
			"a breakpoint inside an instruction corrupts it: probe the first "
			"byte of one (objdump -d shows them)",
			"%s+%llu is inside the instruction at %s+%llu (%u bytes: %s); nearest "
			"boundaries: %s+%llu, %s+%llu",
			f, off, f, at, insn.len, insn.text, f, at, f, end);
	if (ret == 0)
		return perr_set(
			err, PERR_OFFSET_INSN,
			"a breakpoint inside an instruction corrupts it: probe the first "
			"byte of one (objdump -d shows them)",
			"%s+%llu is inside the last instruction of %s, at %s+%llu (%u bytes: "
			"%s); nearest boundary: %s+%llu",
			f, off, f, f, at, insn.len, insn.text, f, at);
	if (ret == -ENOEXEC)
		return perr_set(err, PERR_OFFSET_INSN,
				"probe an offset before it, or the function's entry",
				"cannot check that %s+%llu starts an instruction: the bytes at "
				"%s+%llu do not decode (data, or an instruction capstone does not "
				"know)",
				f, off, f, at);
	if (ret == -ERANGE)
		return perr_set(err, PERR_OFFSET_INSN, NULL,
				"%s+%llu is beyond the code of %s in %s (the symbol's size, %llu, "
				"runs past its segment)",
				f, off, f, path, (unsigned long long)fn->size);
	if (ret == -ELIBACC)
		return perr_set(err, PERR_SYSTEM, "install Debian's libcapstone4",
				"cannot check that %s+%llu starts an instruction: %s", f, off,
				probe_insn_lib_error());
	return perr_set(err, PERR_SYSTEM, NULL, "cannot decode the code of %s: %s", f,
			strerror(-ret));
}

static void uprobe_target_fill(struct probe_target *t, enum probe_kind kind, const char *path,
			       const struct probe_elf_func *fn, uint64_t offset, bool has_offset,
			       const struct probe_ctx *ctx)
{
	memset(t, 0, sizeof(*t));
	t->kind = kind;
	if (has_offset)
		snprintf(t->name, sizeof(t->name), "%s:%s:%s+0x%llx", probe_kind_name(kind), path,
			 fn->name, (unsigned long long)offset);
	else
		snprintf(t->name, sizeof(t->name), "%s:%s:%s", probe_kind_name(kind), path,
			 fn->name);
	snprintf(t->binary, sizeof(t->binary), "%s", path);
	snprintf(t->symbol, sizeof(t->symbol), "%s", fn->name);
	t->sym_offset = fn->offset;
	t->offset = offset;
	t->nargs = 6;
	for (int i = 0; i < 12; i++)
		t->arg_size[i] = 8;
	t->has_retval = kind == PROBE_URETPROBE;
	t->pid = ctx ? ctx->pid : 0;
}

static int uprobe_target_add(struct probe_set *set, enum probe_kind kind, const char *path,
			     const struct probe_elf_func *fn, uint64_t offset, bool has_offset,
			     const struct probe_ctx *ctx, struct probe_err *err)
{
	struct probe_target *t;

	if (probe_set_push(set, &t))
		return perr_set(err, PERR_SYSTEM, NULL, "out of memory");
	uprobe_target_fill(t, kind, path, fn, offset, has_offset, ctx);
	return 0;
}

static int uprobe_resolve_kind(enum probe_kind kind, const char *const *parts, int nparts,
			       uint64_t offset, bool has_offset, const struct probe_ctx *ctx,
			       struct probe_set *set, struct probe_err *err)
{
	const struct probe_elf_func **match = NULL;
	struct probe_elf_func *funcs = NULL;
	char path[PATH_MAX];
	int nfuncs = 0, nmatch = 0, start = set->n, ret;

	if (nparts != 2)
		return perr_set(err, PERR_SYNTAX, NULL, "write %s",
				kind == PROBE_UPROBE ? "uprobe:BINARY:FUNCTION[+OFFSET]" :
						       "uretprobe:BINARY:FUNCTION");
	if (has_offset && kind == PROBE_URETPROBE)
		return perr_set(err, PERR_OFFSET,
				"drop the +offset: a return probe fires on return",
				"a uretprobe takes no +offset");
	if (has_offset && probe_has_wildcard(parts[1]))
		return perr_set(err, PERR_OFFSET, "name one function",
				"an +offset needs one function, not a pattern");
	if (probe_binary_part(parts[0], ctx, path, sizeof(path), err))
		return -1;
	ret = probe_elf_funcs_read(path, &funcs, &nfuncs);
	if (ret)
		return perr_set(err, PERR_BINARY, NULL, "cannot read the symbols of %s: %s", path,
				ret == -ENOEXEC ? "corrupt ELF file" : weft_file_strerror(ret));

	if (!probe_has_wildcard(parts[1])) {
		const struct probe_elf_func *fn = NULL;

		if (nfuncs > 0) /* bsearch wants a real array, even of nothing */
			fn = bsearch(parts[1], funcs, (size_t)nfuncs, sizeof(*funcs),
				     func_name_cmp);

		if (!fn) {
			ret = symbol_unknown(path, parts[1], funcs, nfuncs, err);
			goto out_free;
		}
		if (has_offset && offset >= fn->size) {
			ret = perr_set(err, PERR_OFFSET, NULL,
				       "+0x%llx is past the end of %s (%llu bytes)",
				       (unsigned long long)offset, fn->name,
				       (unsigned long long)fn->size);
			goto out_free;
		}
		if (has_offset && uprobe_offset_check(path, fn, offset, err)) {
			ret = -1;
			goto out_free;
		}
		ret = uprobe_target_add(set, kind, path, fn, offset, has_offset, ctx, err);
		goto out_free;
	}

	match = malloc((size_t)(nfuncs ? nfuncs : 1) * sizeof(*match));
	if (!match) {
		ret = perr_set(err, PERR_SYSTEM, NULL, "out of memory");
		goto out_free;
	}
	for (int i = 0; i < nfuncs; i++)
		if (probe_glob_match(parts[1], funcs[i].name))
			match[nmatch++] = &funcs[i];
	/* one target per address: aliases (memcpy/__memcpy) would fire twice */
	if (nmatch > 1) {
		int w = 1;

		qsort(match, (size_t)nmatch, sizeof(*match), offset_cmp);
		for (int i = 1; i < nmatch; i++)
			if (match[i]->offset != match[w - 1]->offset)
				match[w++] = match[i];
		nmatch = w;
		qsort(match, (size_t)nmatch, sizeof(*match), name_ptr_cmp);
	}
	if (nmatch == 0) {
		ret = perr_set(err, PERR_NO_MATCH, NULL, "no function in %s matches %s", path,
			       parts[1]);
		goto out_free;
	}
	if (nmatch > probe_ctx_max_targets(ctx)) {
		ret = perr_set(err, PERR_TOO_MANY, "narrow the pattern",
			       "%s matches %d functions in %s, more than the limit of %d", parts[1],
			       nmatch, path, probe_ctx_max_targets(ctx));
		goto out_free;
	}
	for (int i = 0; i < nmatch && ret == 0; i++)
		ret = uprobe_target_add(set, kind, path, match[i], 0, false, ctx, err);
	if (ret)
		probe_set_truncate(set, start);
out_free:
	free(match);
	probe_elf_funcs_free(funcs, nfuncs);
	return ret ? -1 : 0;
}

static int uprobe_resolve(const char *const *parts, int nparts, uint64_t offset, bool has_offset,
			  const struct probe_ctx *ctx, struct probe_set *set, struct probe_err *err)
{
	return uprobe_resolve_kind(PROBE_UPROBE, parts, nparts, offset, has_offset, ctx, set, err);
}

static int uretprobe_resolve(const char *const *parts, int nparts, uint64_t offset, bool has_offset,
			     const struct probe_ctx *ctx, struct probe_set *set,
			     struct probe_err *err)
{
	return uprobe_resolve_kind(PROBE_URETPROBE, parts, nparts, offset, has_offset, ctx, set,
				   err);
}

static int uprobe_list_kind(enum probe_kind kind, const char *const *parts, int nparts,
			    const struct probe_ctx *ctx, probe_list_cb cb, void *arg,
			    struct probe_err *err)
{
	struct probe_elf_func *funcs = NULL;
	const char *glob = nparts > 1 ? parts[1] : NULL;
	char path[PATH_MAX];
	int nfuncs = 0, ret;

	if (nparts < 1)
		return perr_set(err, PERR_SYNTAX, "e.g. weft list uprobe:/usr/bin/python3:*",
				"listing uprobes needs a binary");
	if (probe_binary_part(parts[0], ctx, path, sizeof(path), err))
		return -1;
	ret = probe_elf_funcs_read(path, &funcs, &nfuncs);
	if (ret)
		return perr_set(err, PERR_BINARY, NULL, "cannot read the symbols of %s: %s", path,
				ret == -ENOEXEC ? "corrupt ELF file" : weft_file_strerror(ret));
	for (int i = 0; i < nfuncs && ret == 0; i++) {
		struct probe_target t;

		if (glob && !probe_glob_match(glob, funcs[i].name))
			continue;
		uprobe_target_fill(&t, kind, path, &funcs[i], 0, false, ctx);
		ret = cb(&t, arg);
	}
	probe_elf_funcs_free(funcs, nfuncs);
	return ret;
}

static int uprobe_list(const char *const *parts, int nparts, const struct probe_ctx *ctx,
		       probe_list_cb cb, void *arg, struct probe_err *err)
{
	return uprobe_list_kind(PROBE_UPROBE, parts, nparts, ctx, cb, arg, err);
}

static int uretprobe_list(const char *const *parts, int nparts, const struct probe_ctx *ctx,
			  probe_list_cb cb, void *arg, struct probe_err *err)
{
	return uprobe_list_kind(PROBE_URETPROBE, parts, nparts, ctx, cb, arg, err);
}

static bool uprobe_available(struct probe_err *err)
{
	if (probe_features_get()->uprobe)
		return true;
	perr_set(err, PERR_FEATURE, "use tracepoint:... or syscall:... (see `weft list`)",
		 "this kernel has no uprobes (no /sys/bus/event_source/devices/uprobe and no "
		 "uprobe_events in tracefs)");
	return false;
}

/*
 * An +offset checked again where it is attached: a query compiled on another host (weft
 * submit) was checked against that host's file, and the function must be where the query
 * says in this one too before the offset can be checked here.  0, or -1 with err filled.
 */
static int uprobe_offset_recheck(const struct probe_target *t, struct probe_err *err)
{
	struct probe_elf_func *funcs = NULL, *fn = NULL;
	int nfuncs = 0, ret;

	ret = probe_elf_funcs_read(t->binary, &funcs, &nfuncs);
	if (ret)
		return perr_attach(err, t, 0, -ret);
	if (nfuncs > 0)
		fn = bsearch(t->symbol, funcs, (size_t)nfuncs, sizeof(*funcs), func_name_cmp);
	if (!fn || fn->offset != t->sym_offset || t->offset >= fn->size)
		ret = perr_set(
			err, PERR_OFFSET_INSN,
			"compile the query against this host's file (an +offset is checked "
			"against the code it lands in)",
			"%s: %s is not where the query was compiled to find it in %s (the file "
			"differs): +%llu cannot be checked",
			t->name, t->symbol, t->binary, (unsigned long long)t->offset);
	else
		ret = uprobe_offset_check(t->binary, fn, t->offset, err);
	probe_elf_funcs_free(funcs, nfuncs);
	return ret ? -1 : 0;
}

/* A uprobe perf event on the file offset of the function (plus +OFF), owned by the link.
 * libbpf's pid -1 is every process and 0 is the caller: ours is 0 for every process. */
static int uprobe_attach(struct bpf_program *prog, const struct probe_target *t, uint64_t cookie,
			 pid_t pid, struct probe_links *links, struct probe_err *err)
{
	LIBBPF_OPTS(bpf_uprobe_opts, opts, .bpf_cookie = cookie,
		    .retprobe = t->kind == PROBE_URETPROBE);
	struct bpf_link *link;

	if (!probe_pmu_exists("uprobe"))
		return perr_set(err, PERR_FEATURE, NULL,
				"this kernel has no uprobe PMU: a uprobe would be a tracefs event "
				"that outlives weft if it is killed");
	if (probe_binary_attachable(t, pid, err))
		return -1;
	if (t->offset && uprobe_offset_recheck(t, err))
		return -1;
	link = bpf_program__attach_uprobe_opts(prog, pid > 0 ? pid : -1, t->binary,
					       (size_t)(t->sym_offset + t->offset), &opts);
	if (!link)
		return perr_attach(err, t, pid, errno);
	if (probe_links_push(links, link)) {
		bpf_link__destroy(link);
		return perr_set(err, PERR_SYSTEM, NULL, "out of memory");
	}
	return 0;
}

const struct probe_provider provider_uprobe = {
	.kind = PROBE_UPROBE,
	.name = "uprobe",
	.alias = NULL,
	.min_parts = 2,
	.max_parts = 2,
	.usage = "uprobe:BINARY:FUNCTION[+OFFSET]",
	.resolve = uprobe_resolve,
	.list = uprobe_list,
	.available = uprobe_available,
	.attach = uprobe_attach,
};

const struct probe_provider provider_uretprobe = {
	.kind = PROBE_URETPROBE,
	.name = "uretprobe",
	.alias = NULL,
	.min_parts = 2,
	.max_parts = 2,
	.usage = "uretprobe:BINARY:FUNCTION",
	.resolve = uretprobe_resolve,
	.list = uretprobe_list,
	.available = uprobe_available,
	.attach = uprobe_attach, /* t->kind says which */
};
