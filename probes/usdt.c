// SPDX-License-Identifier: Apache-2.0
/*
 * The usdt provider: `usdt:BIN:PROVIDER:NAME`, or `usdt:BIN:NAME` for any provider, globs in
 * PROVIDER and NAME.  One target per probe (provider, name), however many call sites the
 * compiler emitted for it: the agent attaches them all (libbpf reads the same notes and
 * decodes each site's argument locations).  A target offers the arguments every site has
 * (nargs is the minimum over sites), sized and signed as the first site's note says.
 *
 * Every site of a probe a query names must be a nop in the file (sys/sdt.h puts one there for
 * the uprobe to replace), and a semaphore must be in the file's loaded segments: a note that
 * points anywhere else (a corrupt or hand-made one) would put a breakpoint inside an
 * instruction, so it is refused when the probe is resolved.
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

/* One probe with all its sites folded in. */
struct usdt_probe {
	const struct probe_elf_usdt *first;
	int nsites;
	int nargs;
	bool semaphore;
};

static int usdt_note_cmp(const void *a, const void *b)
{
	const struct probe_elf_usdt *x = a, *y = b;
	int c = strcmp(x->provider, y->provider);

	if (c)
		return c;
	c = strcmp(x->name, y->name);
	if (c)
		return c;
	return x->pc < y->pc ? -1 : x->pc > y->pc;
}

/* Reads and groups the notes of path into probes sorted by provider:name.  *notes must be
 * freed by the caller; probes point into it. */
static int usdt_probes_read(const char *path, struct probe_elf_usdt **notes,
			    struct usdt_probe **probes, int *nprobes, struct probe_err *err)
{
	struct usdt_probe *v;
	int n, np = 0, ret;

	*probes = NULL;
	*nprobes = 0;
	ret = probe_elf_usdt_read(path, notes, &n);
	if (ret)
		return perr_set(err, PERR_BINARY, NULL, "cannot read the USDT notes of %s: %s",
				path,
				ret == -ENOEXEC ? "corrupt ELF file" : weft_file_strerror(ret));
	if (n == 0)
		return 0;
	qsort(*notes, (size_t)n, sizeof(**notes), usdt_note_cmp);
	v = calloc((size_t)n, sizeof(*v));
	if (!v) {
		free(*notes);
		*notes = NULL;
		return perr_set(err, PERR_SYSTEM, NULL, "out of memory");
	}
	for (int i = 0; i < n; i++) {
		const struct probe_elf_usdt *u = &(*notes)[i];
		struct usdt_probe *p = np ? &v[np - 1] : NULL;

		if (!p || strcmp(p->first->provider, u->provider) ||
		    strcmp(p->first->name, u->name)) {
			p = &v[np++];
			p->first = u;
			p->nargs = u->nargs;
		}
		p->nsites++;
		if (u->nargs < p->nargs)
			p->nargs = u->nargs;
		if (u->semaphore)
			p->semaphore = true;
	}
	*probes = v;
	*nprobes = np;
	return 0;
}

static void usdt_target_fill(struct probe_target *t, const char *path, const struct usdt_probe *p,
			     const struct probe_ctx *ctx)
{
	memset(t, 0, sizeof(*t));
	t->kind = PROBE_USDT;
	snprintf(t->name, sizeof(t->name), "usdt:%s:%s:%s", path, p->first->provider,
		 p->first->name);
	snprintf(t->binary, sizeof(t->binary), "%s", path);
	snprintf(t->provider, sizeof(t->provider), "%s", p->first->provider);
	snprintf(t->usdt_name, sizeof(t->usdt_name), "%s", p->first->name);
	t->sym_offset = p->first->offset;
	t->nsites = p->nsites;
	t->usdt_semaphore = p->semaphore;
	t->nargs = p->nargs;
	for (int i = 0; i < 12; i++) {
		t->arg_size[i] = i < p->first->nargs ? p->first->arg_size[i] : 8;
		t->arg_signed[i] = i < p->first->nargs && p->first->arg_signed[i];
	}
	t->pid = ctx ? ctx->pid : 0;
}

static bool usdt_probe_match(const struct usdt_probe *p, const char *prov, const char *name)
{
	return (!prov || probe_glob_match(prov, p->first->provider)) &&
	       (!name || probe_glob_match(name, p->first->name));
}

static int usdt_unknown(const char *path, const char *prov, const char *name,
			const struct usdt_probe *probes, int np, struct probe_err *err)
{
	const char **cands;
	char(*buf)[130];
	char word[130];

	if (prov)
		perr_set(err, PERR_USDT, NULL, "no USDT probe %s:%s in %s", prov, name, path);
	else
		perr_set(err, PERR_USDT, NULL, "no USDT probe named %s in %s", name, path);
	cands = calloc((size_t)np, sizeof(*cands));
	buf = calloc((size_t)np, sizeof(*buf));
	if (!cands || !buf)
		goto out_free;
	for (int i = 0; i < np; i++) {
		if (prov)
			snprintf(buf[i], sizeof(buf[i]), "%s:%s", probes[i].first->provider,
				 probes[i].first->name);
		else
			snprintf(buf[i], sizeof(buf[i]), "%s", probes[i].first->name);
		cands[i] = buf[i];
	}
	if (prov)
		snprintf(word, sizeof(word), "%s:%s", prov, name);
	else
		snprintf(word, sizeof(word), "%s", name);
	perr_fix_near(err, word, cands, np, NULL);
out_free:
	free(cands);
	free(buf);
	return -1;
}

/* Refuses a site of probe p that is not a nop, or whose semaphore is outside the file's loaded
 * segments (libbpf could not attach it).  0, or -1 with err filled. */
static int usdt_site_check(const char *path, const struct usdt_probe *p,
			   const struct probe_elf_usdt *u, struct probe_err *err)
{
	const char *fix = "the note does not match the file's code (a corrupt or hand-made "
			  "note?): a breakpoint there would corrupt an instruction";
	unsigned long long pc = u->pc, off = u->offset;
	struct probe_insn insn;
	int ret;

	if (u->semaphore && !u->sem_offset)
		return perr_set(err, PERR_USDT_SITE, fix,
				"the semaphore of USDT probe %s:%s in %s, at 0x%llx, is in no "
				"loaded segment of the file",
				u->provider, u->name, path, (unsigned long long)u->semaphore);
	if (!probe_insn_machine_ok(u->machine))
		return perr_set(err, PERR_USDT_SITE, NULL,
				"cannot check the sites of USDT probe %s:%s: weft decodes x86-64, "
				"i386 and arm64 code, and %s is for ELF machine %u",
				u->provider, u->name, path, u->machine);
	ret = probe_insn_find(u->machine, u->code, u->code_len, 0, &insn);
	if (ret == 0 && insn.nop)
		return 0;
	if (ret == 0)
		return perr_set(err, PERR_USDT_SITE, fix,
				"USDT probe %s:%s in %s: the site at 0x%llx (file offset 0x%llx, "
				"site %d of %d) is `%s`, not a nop",
				u->provider, u->name, path, pc, off, (int)(u - p->first) + 1,
				p->nsites, insn.text);
	if (ret == -ENOEXEC)
		return perr_set(err, PERR_USDT_SITE, fix,
				"USDT probe %s:%s in %s: the bytes at its site 0x%llx (file offset "
				"0x%llx) are not an instruction, not a nop",
				u->provider, u->name, path, pc, off);
	if (ret == -ERANGE)
		return perr_set(err, PERR_USDT_SITE, NULL,
				"USDT probe %s:%s in %s: cannot read the code at its site 0x%llx "
				"(file offset 0x%llx)",
				u->provider, u->name, path, pc, off);
	if (ret == -ELIBACC)
		return perr_set(err, PERR_SYSTEM, "install Debian's libcapstone4",
				"cannot check the sites of USDT probe %s:%s: %s", u->provider,
				u->name, probe_insn_lib_error());
	return perr_set(err, PERR_SYSTEM, NULL, "cannot decode the USDT sites of %s: %s", path,
			strerror(-ret));
}

static int usdt_resolve(const char *const *parts, int nparts, uint64_t offset, bool has_offset,
			const struct probe_ctx *ctx, struct probe_set *set, struct probe_err *err)
{
	const char *prov = nparts == 3 ? parts[1] : NULL;
	const char *name = parts[nparts - 1];
	struct probe_elf_usdt *notes = NULL;
	struct usdt_probe *probes = NULL;
	char path[PATH_MAX];
	int np = 0, nmatch = 0, start = set->n, ret = 0;

	if (nparts != 2 && nparts != 3)
		return perr_set(err, PERR_SYNTAX, NULL, "write usdt:BINARY:[PROVIDER:]NAME");
	if (has_offset)
		return perr_set(err, PERR_OFFSET, NULL, "a USDT probe takes no +offset");
	if (probe_binary_part(parts[0], ctx, path, sizeof(path), err))
		return -1;
	if (usdt_probes_read(path, &notes, &probes, &np, err))
		return -1;
	if (np == 0) {
		ret = perr_set(err, PERR_USDT, "see `weft list` for the probes that exist",
			       "%s has no USDT probes (no .note.stapsdt notes)", path);
		goto out_free;
	}
	for (int i = 0; i < np; i++)
		nmatch += usdt_probe_match(&probes[i], prov, name);
	if (nmatch == 0) {
		if (probe_has_wildcard(prov) || probe_has_wildcard(name))
			ret = perr_set(err, PERR_NO_MATCH, NULL,
				       "no USDT probe in %s matches %s%s%s", path, prov ? prov : "",
				       prov ? ":" : "", name);
		else
			ret = usdt_unknown(path, prov, name, probes, np, err);
		goto out_free;
	}
	if (nmatch > probe_ctx_max_targets(ctx)) {
		ret = perr_set(
			err, PERR_TOO_MANY, "narrow the pattern",
			"the pattern matches %d USDT probes in %s, more than the limit of %d",
			nmatch, path, probe_ctx_max_targets(ctx));
		goto out_free;
	}
	for (int i = 0; i < np; i++) {
		struct probe_target *t;

		if (!usdt_probe_match(&probes[i], prov, name))
			continue;
		for (int k = 0; k < probes[i].nsites && ret == 0; k++)
			ret = usdt_site_check(path, &probes[i], &probes[i].first[k], err);
		if (ret) {
			probe_set_truncate(set, start);
			break;
		}
		if (probe_set_push(set, &t)) {
			probe_set_truncate(set, start);
			ret = perr_set(err, PERR_SYSTEM, NULL, "out of memory");
			break;
		}
		usdt_target_fill(t, path, &probes[i], ctx);
	}
out_free:
	free(probes);
	free(notes);
	return ret ? -1 : 0;
}

static int usdt_list(const char *const *parts, int nparts, const struct probe_ctx *ctx,
		     probe_list_cb cb, void *arg, struct probe_err *err)
{
	const char *prov = nparts == 3 ? parts[1] : NULL;
	const char *name = nparts >= 2 ? parts[nparts - 1] : NULL;
	struct probe_elf_usdt *notes = NULL;
	struct usdt_probe *probes = NULL;
	char path[PATH_MAX];
	int np = 0, ret = 0;

	if (nparts < 1)
		return perr_set(err, PERR_SYNTAX, "e.g. weft list usdt:/usr/bin/python3:*",
				"listing USDT probes needs a binary");
	if (probe_binary_part(parts[0], ctx, path, sizeof(path), err))
		return -1;
	if (usdt_probes_read(path, &notes, &probes, &np, err))
		return -1;
	for (int i = 0; i < np && ret == 0; i++) {
		struct probe_target t;

		/* usdt:BIN:X lists probes named X or of provider X */
		if (nparts == 2 && !usdt_probe_match(&probes[i], NULL, name) &&
		    !usdt_probe_match(&probes[i], name, NULL))
			continue;
		if (nparts == 3 && !usdt_probe_match(&probes[i], prov, name))
			continue;
		usdt_target_fill(&t, path, &probes[i], ctx);
		ret = cb(&t, arg);
	}
	free(probes);
	free(notes);
	return ret;
}

static bool usdt_available(struct probe_err *err)
{
	return provider_uprobe.available(err);
}

/* The sites libbpf is about to attach, which it reads from the file on this host: for a query
 * compiled elsewhere (weft submit) not the file usdt_resolve checked.  0, or -1 with err. */
static int usdt_sites_recheck(const struct probe_target *t, struct probe_err *err)
{
	struct probe_elf_usdt *notes = NULL;
	struct usdt_probe *probes = NULL;
	int np = 0, ret = 0;

	if (usdt_probes_read(t->binary, &notes, &probes, &np, err))
		return -1;
	for (int i = 0; i < np && ret == 0; i++) {
		if (!usdt_probe_match(&probes[i], t->provider, t->usdt_name))
			continue;
		for (int k = 0; k < probes[i].nsites && ret == 0; k++)
			ret = usdt_site_check(t->binary, &probes[i], &probes[i].first[k], err);
	}
	free(probes);
	free(notes);
	return ret ? -1 : 0;
}

/* libbpf attaches one uprobe per call site, decodes each site's argument locations into the
 * object's USDT spec map (the program reads them with bpf_usdt_arg), bumps the semaphore
 * through the kernel's uprobe reference counter, and makes the cookie bpf_usdt_cookie's. */
static int usdt_attach(struct bpf_program *prog, const struct probe_target *t, uint64_t cookie,
		       pid_t pid, struct probe_links *links, struct probe_err *err)
{
	LIBBPF_OPTS(bpf_usdt_opts, opts, .usdt_cookie = cookie);
	struct bpf_link *link;

	if (!probe_pmu_exists("uprobe"))
		return perr_set(err, PERR_FEATURE, NULL,
				"this kernel has no uprobe PMU: a USDT probe would be a tracefs "
				"event that outlives weft if it is killed");
	if (probe_binary_attachable(t, pid, err))
		return -1;
	/* A probe with a semaphore fires only while its semaphore is raised.  libbpf raises it
	 * through the kernel's uprobe reference counter (ref_ctr_offset, Linux 4.20), in running
	 * processes too, and refuses with a bare ENOTSUP where the kernel has none: say why. */
	if (t->usdt_semaphore &&
	    access("/sys/bus/event_source/devices/uprobe/format/ref_ctr_offset", F_OK) != 0)
		return perr_set(err, PERR_FEATURE,
				"use a kernel with uprobe reference counters (Linux 4.20 or later)",
				"%s has a semaphore, and this kernel's uprobe PMU cannot raise it "
				"(no ref_ctr_offset): the probe would never fire",
				t->name);
	if (usdt_sites_recheck(t, err))
		return -1;
	link = bpf_program__attach_usdt(prog, pid > 0 ? pid : -1, t->binary, t->provider,
					t->usdt_name, &opts);
	if (!link)
		return perr_attach(err, t, pid, errno);
	if (probe_links_push(links, link)) {
		bpf_link__destroy(link);
		return perr_set(err, PERR_SYSTEM, NULL, "out of memory");
	}
	return 0;
}

const struct probe_provider provider_usdt = {
	.kind = PROBE_USDT,
	.name = "usdt",
	.alias = NULL,
	.min_parts = 2,
	.max_parts = 3,
	.usage = "usdt:BINARY:[PROVIDER:]NAME",
	.resolve = usdt_resolve,
	.list = usdt_list,
	.available = usdt_available,
	.attach = usdt_attach,
};
