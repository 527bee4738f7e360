// SPDX-License-Identifier: Apache-2.0
/*
 * Symbolization: addresses to "function+0xoffset", for kstack/ustack, ksym() and usym().
 *
 * Kernel addresses go through /proc/kallsyms, read once (on the first kernel lookup): its
 * text symbols sorted by address, so that a lookup is a binary search for the last symbol at
 * or below the address.  Of symbols that share an address the first global one kallsyms lists
 * names it (__x64_sys_getpid, not its local alias __do_sys_getpid), else the first local one.
 * kallsyms has no sizes, so an address belongs to the symbol below it up to the next one,
 * and no further than SYM_KERNEL_MAX_OFF (past the last symbol of a region is not "in" it).
 *
 * A user address of process PID goes through the process's mappings (/proc/PID/maps): the
 * mapping that holds it gives the file and the file offset (addr - start + pgoff), and the
 * file's function symbols (elf.c), sorted by file offset, give the function whose
 * [offset, offset + size) holds it.  Working in file offsets rather than addresses makes
 * the load bias of PIE executables and shared libraries drop out.  Mappings are cached per
 * process and read again when an address falls outside all of them (a library loaded since)
 * at most once per SYM_MAPS_REFRESH_NS; symbol tables are cached per (path, inode), so the
 * libc of a hundred processes is read once.  Both caches are bounded and evict the least
 * recently used entry.  A process that has exited gives hex addresses, not an error.
 *
 * What it must never do: trust a file (elf.c bounds-checks every ELF it reads), grow without
 * bound, or block on anything but local /proc and file reads.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "probes/elf.h"
#include "probes/probes.h"

#define SYM_MAX_PROCS 64 /* processes whose mappings are cached */
#define SYM_MAX_ELFS 64 /* ELF files whose symbol tables are cached */
#define SYM_MAX_MAPS 16384 /* mappings kept per process (the kernel's default limit is 65530) */
#define SYM_KERNEL_MAX_OFF (1u << 20)
#define SYM_MAPS_REFRESH_NS 1000000000ull
#define DELETED " (deleted)"

struct ksym {
	uint64_t addr;
	uint32_t name; /* offset in the kernel name pool */
	uint32_t order : 31; /* line in kallsyms: the tie-break among aliases */
	uint32_t local : 1; /* type 't': a global alias (__x64_sys_getpid) is preferred */
};

struct sym_fn {
	uint64_t off; /* file offset of the function's first byte */
	uint64_t size;
	const char *name; /* points into the sym_elf's funcs */
};

struct sym_elf {
	char *path; /* as the process maps it (the key, with ino) */
	unsigned long ino;
	struct probe_elf_func *funcs; /* owns the names */
	int nfuncs;
	struct sym_fn *fns; /* sorted by off, one per address */
	int nfns;
	uint64_t used;
};

struct sym_map {
	uint64_t start, end, pgoff;
	unsigned long ino;
	char *path; /* "/usr/lib/...", or "[vdso]"-style names; NULL if anonymous */
};

struct sym_proc {
	pid_t pid;
	struct sym_map *maps; /* sorted by start (the kernel lists them so) */
	int nmaps;
	uint64_t read_ns; /* when the maps were read */
	uint64_t used;
};

struct sym_cache {
	/* kernel */
	bool kernel_loaded;
	int kernel_err; /* 0 or why kallsyms is unusable */
	struct ksym *ksyms;
	int nksyms;
	char *kpool;
	size_t kpool_len;

	/* user */
	struct sym_proc *procs[SYM_MAX_PROCS];
	int nprocs;
	struct sym_elf *elfs[SYM_MAX_ELFS];
	int nelfs;
	uint64_t tick; /* LRU clock */
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

struct sym_cache *sym_cache_new(void)
{
	return calloc(1, sizeof(struct sym_cache));
}

static void sym_proc_free(struct sym_proc *p)
{
	if (!p)
		return;
	for (int i = 0; i < p->nmaps; i++)
		free(p->maps[i].path);
	free(p->maps);
	free(p);
}

static void sym_elf_free(struct sym_elf *e)
{
	if (!e)
		return;
	probe_elf_funcs_free(e->funcs, e->nfuncs);
	free(e->fns);
	free(e->path);
	free(e);
}

void sym_cache_free(struct sym_cache *c)
{
	if (!c)
		return;
	for (int i = 0; i < c->nprocs; i++)
		sym_proc_free(c->procs[i]);
	for (int i = 0; i < c->nelfs; i++)
		sym_elf_free(c->elfs[i]);
	free(c->ksyms);
	free(c->kpool);
	free(c);
}

static int hex_write(uint64_t addr, char *buf, size_t sz, int ret)
{
	if (addr == 0)
		snprintf(buf, sz, "[unknown]");
	else
		snprintf(buf, sz, "0x%" PRIx64, addr);
	return ret;
}

static void sym_write(const char *name, uint64_t off, char *buf, size_t sz)
{
	if (off)
		snprintf(buf, sz, "%s+0x%" PRIx64, name, off);
	else
		snprintf(buf, sz, "%s", name);
}

/* ------------------------------------------------------------------------------ kernel */

static int ksym_cmp(const void *a, const void *b)
{
	const struct ksym *x = a, *y = b;

	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	if (x->local != y->local)
		return x->local ? 1 : -1;
	return x->order < y->order ? -1 : x->order > y->order;
}

static int kpool_add(struct sym_cache *c, size_t *cap, const char *name, uint32_t *off)
{
	size_t len = strlen(name) + 1;

	if (c->kpool_len + len > UINT32_MAX)
		return -E2BIG;
	if (c->kpool_len + len > *cap) {
		size_t ncap = *cap ? *cap * 2 : 1 << 20;
		char *np;

		while (ncap < c->kpool_len + len)
			ncap *= 2;
		np = realloc(c->kpool, ncap);
		if (!np)
			return -ENOMEM;
		c->kpool = np;
		*cap = ncap;
	}
	memcpy(c->kpool + c->kpool_len, name, len);
	*off = (uint32_t)c->kpool_len;
	c->kpool_len += len;
	return 0;
}

/* Reads the text symbols of /proc/kallsyms.  All addresses read as 0 when kptr_restrict hides
 * them from us: then there is nothing to look up (-EPERM). */
static int kallsyms_load(struct sym_cache *c)
{
	size_t cap = 0, pool_cap = 0;
	char line[512];
	uint32_t order = 0;
	int w = 0, ret = 0;
	FILE *f = fopen("/proc/kallsyms", "re");

	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		char name[256], type;
		unsigned long long addr;

		order++;
		if (sscanf(line, "%llx %c %255s", &addr, &type, name) != 3)
			continue;
		if ((type != 't' && type != 'T') || addr == 0)
			continue;
		if ((size_t)c->nksyms == cap) {
			size_t ncap = cap ? cap * 2 : 65536;
			struct ksym *nv = realloc(c->ksyms, ncap * sizeof(*nv));

			if (!nv) {
				ret = -ENOMEM;
				goto out_close;
			}
			c->ksyms = nv;
			cap = ncap;
		}
		ret = kpool_add(c, &pool_cap, name, &c->ksyms[c->nksyms].name);
		if (ret)
			goto out_close;
		c->ksyms[c->nksyms].addr = addr;
		c->ksyms[c->nksyms].order = order & 0x7fffffff;
		c->ksyms[c->nksyms].local = type == 't';
		c->nksyms++;
	}
	if (c->nksyms == 0) {
		ret = -EPERM; /* hidden (kptr_restrict, not root) or empty */
		goto out_close;
	}
	qsort(c->ksyms, (size_t)c->nksyms, sizeof(*c->ksyms), ksym_cmp);
	for (int i = 0; i < c->nksyms; i++) /* one name per address: the best alias */
		if (w == 0 || c->ksyms[w - 1].addr != c->ksyms[i].addr)
			c->ksyms[w++] = c->ksyms[i];
	c->nksyms = w;
out_close:
	fclose(f);
	return ret;
}

int sym_kernel(struct sym_cache *c, uint64_t addr, char *buf, size_t sz)
{
	int lo = 0, hi;
	uint64_t off;

	if (!buf || sz == 0)
		return -EINVAL;
	if (addr == 0)
		return hex_write(addr, buf, sz, -ENOENT);
	if (!c)
		return hex_write(addr, buf, sz, -EINVAL);
	if (!c->kernel_loaded) {
		c->kernel_loaded = true;
		c->kernel_err = kallsyms_load(c);
	}
	if (c->kernel_err)
		return hex_write(addr, buf, sz, c->kernel_err);
	/* the last symbol at or below addr */
	hi = c->nksyms;
	while (lo < hi) {
		int mid = lo + (hi - lo) / 2;

		if (c->ksyms[mid].addr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return hex_write(addr, buf, sz, -ENOENT);
	off = addr - c->ksyms[lo - 1].addr;
	if (off >= SYM_KERNEL_MAX_OFF)
		return hex_write(addr, buf, sz, -ENOENT);
	sym_write(c->kpool + c->ksyms[lo - 1].name, off, buf, sz);
	return 0;
}

/* -------------------------------------------------------------------------------- user */

/* Among aliases of one address, the name a person would write: fewer leading underscores,
 * then shorter ("getpid" over "__getpid"), then alphabetical for a stable answer. */
static int name_rank_cmp(const char *a, const char *b)
{
	size_t ua = strspn(a, "_"), ub = strspn(b, "_");
	size_t la = strlen(a), lb = strlen(b);

	if (ua != ub)
		return ua < ub ? -1 : 1;
	if (la != lb)
		return la < lb ? -1 : 1;
	return strcmp(a, b);
}

static int fn_cmp(const void *a, const void *b)
{
	const struct sym_fn *x = a, *y = b;

	if (x->off != y->off)
		return x->off < y->off ? -1 : 1;
	return name_rank_cmp(x->name, y->name);
}

static struct sym_elf *sym_elf_load(const char *open_path, const char *path, unsigned long ino)
{
	struct sym_elf *e = calloc(1, sizeof(*e));
	int ret, w = 0;

	if (!e)
		return NULL;
	e->path = strdup(path);
	if (!e->path)
		goto out_free;
	e->ino = ino;
	/* a file we cannot read (gone, not ELF) is cached empty: we will not retry it each time */
	ret = probe_elf_funcs_read(open_path, &e->funcs, &e->nfuncs);
	if (ret == -ENOMEM)
		goto out_free;
	if (ret || e->nfuncs == 0)
		return e;
	e->fns = malloc((size_t)e->nfuncs * sizeof(*e->fns));
	if (!e->fns)
		goto out_free;
	for (int i = 0; i < e->nfuncs; i++) {
		e->fns[i].off = e->funcs[i].offset;
		e->fns[i].size = e->funcs[i].size;
		e->fns[i].name = e->funcs[i].name;
	}
	qsort(e->fns, (size_t)e->nfuncs, sizeof(*e->fns), fn_cmp);
	for (int i = 0; i < e->nfuncs; i++) /* aliases: keep the best-ranked name */
		if (w == 0 || e->fns[w - 1].off != e->fns[i].off)
			e->fns[w++] = e->fns[i];
	e->nfns = w;
	return e;

out_free:
	sym_elf_free(e);
	return NULL;
}

/* The cached symbols of the file mapped at m in process pid, loading them on a miss. */
static struct sym_elf *sym_elf_get(struct sym_cache *c, pid_t pid, const struct sym_map *m)
{
	char rooted[PATH_MAX + 64];
	const char *open_path = m->path;
	struct sym_elf *e;
	int victim = 0;
	size_t plen;

	for (int i = 0; i < c->nelfs; i++) {
		if (c->elfs[i]->ino == m->ino && strcmp(c->elfs[i]->path, m->path) == 0) {
			c->elfs[i]->used = ++c->tick;
			return c->elfs[i];
		}
	}
	/* the path is the process's view: a file deleted (or replaced) since it was mapped is
	 * still open through map_files; one in another mount namespace is under its root */
	plen = strlen(m->path);
	if (plen > strlen(DELETED) && strcmp(m->path + plen - strlen(DELETED), DELETED) == 0) {
		snprintf(rooted, sizeof(rooted), "/proc/%d/map_files/%" PRIx64 "-%" PRIx64,
			 (int)pid, m->start, m->end);
		open_path = rooted;
	} else if (access(m->path, R_OK) != 0) {
		snprintf(rooted, sizeof(rooted), "/proc/%d/root%s", (int)pid, m->path);
		open_path = rooted;
	}
	e = sym_elf_load(open_path, m->path, m->ino);
	if (!e)
		return NULL;
	e->used = ++c->tick;
	if (c->nelfs < SYM_MAX_ELFS) {
		c->elfs[c->nelfs++] = e;
		return e;
	}
	for (int i = 1; i < c->nelfs; i++)
		if (c->elfs[i]->used < c->elfs[victim]->used)
			victim = i;
	sym_elf_free(c->elfs[victim]);
	c->elfs[victim] = e;
	return e;
}

/* Parses one line of /proc/PID/maps: "start-end perms pgoff dev ino   path". */
static bool maps_line_parse(char *line, struct sym_map *m, char **path)
{
	unsigned long long start, end, pgoff;
	unsigned long ino;
	int n = 0;
	char *p, *nl;

	if (sscanf(line, "%llx-%llx %*s %llx %*s %lu %n", &start, &end, &pgoff, &ino, &n) < 4 ||
	    n == 0)
		return false;
	p = line + n;
	nl = strchr(p, '\n');
	if (nl)
		*nl = '\0';
	m->start = start;
	m->end = end;
	m->pgoff = pgoff;
	m->ino = ino;
	*path = *p ? p : NULL;
	return true;
}

static int proc_maps_read(struct sym_proc *p)
{
	char path[64], line[PATH_MAX + 256];
	struct sym_map *v = NULL;
	int n = 0, cap = 0, ret = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)p->pid);
	f = fopen(path, "re");
	if (!f)
		return errno == ENOENT ? -ESRCH : -errno;
	while (fgets(line, sizeof(line), f) && n < SYM_MAX_MAPS) {
		struct sym_map m = { 0 };
		char *file;

		if (!maps_line_parse(line, &m, &file) || !file)
			continue; /* anonymous memory: nothing to name it by */
		if (n == cap) {
			int ncap = cap ? cap * 2 : 64;
			struct sym_map *nv = realloc(v, (size_t)ncap * sizeof(*nv));

			if (!nv) {
				ret = -ENOMEM;
				break;
			}
			v = nv;
			cap = ncap;
		}
		m.path = strdup(file);
		if (!m.path) {
			ret = -ENOMEM;
			break;
		}
		v[n++] = m;
	}
	fclose(f);
	if (ret || n == 0) {
		for (int i = 0; i < n; i++)
			free(v[i].path);
		free(v);
		return ret ? ret : -ESRCH; /* no mappings: a zombie or a kernel thread */
	}
	for (int i = 0; i < p->nmaps; i++)
		free(p->maps[i].path);
	free(p->maps);
	p->maps = v;
	p->nmaps = n;
	p->read_ns = now_ns();
	return 0;
}

static int proc_index(struct sym_cache *c, pid_t pid)
{
	for (int i = 0; i < c->nprocs; i++)
		if (c->procs[i]->pid == pid)
			return i;
	return -1;
}

void sym_cache_forget(struct sym_cache *c, pid_t pid)
{
	int i = c ? proc_index(c, pid) : -1;

	if (i < 0)
		return;
	sym_proc_free(c->procs[i]);
	c->procs[i] = c->procs[--c->nprocs];
}

/* The cached process, reading its maps on a miss; NULL and *err when it has none. */
static struct sym_proc *sym_proc_get(struct sym_cache *c, pid_t pid, int *err)
{
	int i = proc_index(c, pid), victim = 0;
	struct sym_proc *p;

	if (i >= 0) {
		c->procs[i]->used = ++c->tick;
		return c->procs[i];
	}
	p = calloc(1, sizeof(*p));
	if (!p) {
		*err = -ENOMEM;
		return NULL;
	}
	p->pid = pid;
	*err = proc_maps_read(p);
	if (*err) {
		sym_proc_free(p);
		return NULL;
	}
	p->used = ++c->tick;
	if (c->nprocs < SYM_MAX_PROCS) {
		c->procs[c->nprocs++] = p;
		return p;
	}
	for (i = 1; i < c->nprocs; i++)
		if (c->procs[i]->used < c->procs[victim]->used)
			victim = i;
	sym_proc_free(c->procs[victim]);
	c->procs[victim] = p;
	return p;
}

static const struct sym_map *proc_map_find(const struct sym_proc *p, uint64_t addr)
{
	int lo = 0, hi = p->nmaps;

	while (lo < hi) {
		int mid = lo + (hi - lo) / 2;

		if (p->maps[mid].start <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo > 0 && addr < p->maps[lo - 1].end)
		return &p->maps[lo - 1];
	return NULL;
}

static const struct sym_fn *elf_fn_find(const struct sym_elf *e, uint64_t off)
{
	int lo = 0, hi = e->nfns;

	while (lo < hi) {
		int mid = lo + (hi - lo) / 2;

		if (e->fns[mid].off <= off)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo > 0 && off - e->fns[lo - 1].off < e->fns[lo - 1].size)
		return &e->fns[lo - 1];
	return NULL;
}

int sym_user(struct sym_cache *c, pid_t pid, uint64_t addr, char *buf, size_t sz)
{
	const struct sym_map *m;
	const struct sym_fn *fn;
	struct sym_proc *p;
	struct sym_elf *e;
	const char *base;
	uint64_t off;
	int err = 0;

	if (!buf || sz == 0)
		return -EINVAL;
	if (addr == 0)
		return hex_write(addr, buf, sz, -ENOENT);
	if (!c || pid <= 0)
		return hex_write(addr, buf, sz, -EINVAL);
	p = sym_proc_get(c, pid, &err);
	if (!p)
		return hex_write(addr, buf, sz, err);
	m = proc_map_find(p, addr);
	if (!m && now_ns() - p->read_ns >= SYM_MAPS_REFRESH_NS) {
		/* mapped since we looked (dlopen), or gone: look again, not too often */
		err = proc_maps_read(p);
		if (err == -ESRCH) {
			sym_cache_forget(c, pid);
			return hex_write(addr, buf, sz, -ESRCH);
		}
		m = proc_map_find(p, addr);
	}
	if (!m)
		return hex_write(addr, buf, sz, -ENOENT);
	base = strrchr(m->path, '/');
	base = base ? base + 1 : m->path;
	if (m->path[0] != '/') { /* [vdso], [heap]: no file to read */
		snprintf(buf, sz, "%s+0x%" PRIx64, m->path, addr - m->start);
		return -ENOENT;
	}
	off = addr - m->start + m->pgoff;
	e = sym_elf_get(c, pid, m);
	fn = e ? elf_fn_find(e, off) : NULL;
	if (!fn) {
		snprintf(buf, sz, "%s+0x%" PRIx64, base, off);
		return e ? -ENOENT : -ENOMEM;
	}
	sym_write(fn->name, off - fn->off, buf, sz);
	return 0;
}
