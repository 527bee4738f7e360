// SPDX-License-Identifier: Apache-2.0
/*
 * ELF symbols and USDT notes with libelf.  The files are untrusted (any path a query names),
 * so this code trusts no size or offset in them: libelf checks section data against the file
 * size, gelf_getsym/gelf_getnote check indexes, elf_strptr checks string bounds, and
 * everything else (note descriptors, segment arithmetic) is checked here.  The file is read
 * with ELF_C_READ, not mmap, so a file truncated under us cannot fault.
 *
 * Addresses become file offsets through the PT_LOAD segment that contains them, as the
 * kernel's uprobe API wants (and as libbpf computes them); USDT locations are first adjusted
 * for prelinking by the difference between .stapsdt.base's address and the note's base.
 * The code at such an offset (a function's first bytes, a USDT site) is read with pread,
 * only from the file bytes of the segment that holds it, for insn.c to decode.
 */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "base/file.h"
#include "probes/elf.h"

#define NT_STAPSDT 3
#define ELF_MAX_SEGS 64
#define ELF_MAX_FUNCS (1 << 22) /* bounds memory on a hostile symbol table */
#define ELF_MAX_NOTES (1 << 20)

struct elf_file {
	int fd;
	Elf *elf;
	uint16_t machine; /* e_machine */
	int nsegs;
	struct {
		uint64_t vaddr, filesz, offset;
	} segs[ELF_MAX_SEGS];
};

static void elf_file_close(struct elf_file *ef)
{
	if (ef->elf)
		elf_end(ef->elf);
	if (ef->fd >= 0)
		close(ef->fd);
	ef->elf = NULL;
	ef->fd = -1;
}

static int elf_file_open(const char *path, struct elf_file *ef)
{
	GElf_Ehdr ehdr;
	size_t nph;

	memset(ef, 0, sizeof(*ef));
	ef->fd = -1;
	if (elf_version(EV_CURRENT) == EV_NONE)
		return -ENOSYS;
	/* a path a query names: a FIFO or a device is refused, never waited on (base/file.h) */
	ef->fd = weft_file_open(path, WEFT_FILE_MAX_ELF, NULL, NULL, 0);
	if (ef->fd < 0)
		return ef->fd;
	ef->elf = elf_begin(ef->fd, ELF_C_READ, NULL);
	if (!ef->elf || elf_kind(ef->elf) != ELF_K_ELF || !gelf_getehdr(ef->elf, &ehdr))
		goto out_noexec;
	ef->machine = ehdr.e_machine;
	if (elf_getphdrnum(ef->elf, &nph) != 0)
		nph = 0;
	for (size_t i = 0; i < nph && ef->nsegs < ELF_MAX_SEGS; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(ef->elf, (int)i, &ph) || ph.p_type != PT_LOAD)
			continue;
		if (ph.p_vaddr + ph.p_filesz < ph.p_vaddr ||
		    ph.p_offset + ph.p_filesz < ph.p_offset)
			continue; /* wraps: corrupt */
		ef->segs[ef->nsegs].vaddr = ph.p_vaddr;
		ef->segs[ef->nsegs].filesz = ph.p_filesz;
		ef->segs[ef->nsegs].offset = ph.p_offset;
		ef->nsegs++;
	}
	return 0;

out_noexec:
	elf_file_close(ef);
	return -ENOEXEC;
}

/* File offset of a virtual address, through the PT_LOAD segment holding it. */
static bool elf_addr_to_offset(const struct elf_file *ef, uint64_t addr, uint64_t *off)
{
	for (int i = 0; i < ef->nsegs; i++) {
		if (addr >= ef->segs[i].vaddr && addr - ef->segs[i].vaddr < ef->segs[i].filesz) {
			*off = addr - ef->segs[i].vaddr + ef->segs[i].offset;
			return true;
		}
	}
	return false;
}

/* Reads up to len bytes at file offset off, within the file bytes of the PT_LOAD segment that
 * holds off; *got is how many.  -ERANGE if no segment holds it, -EIO on a short file. */
static int elf_code_pread(const struct elf_file *ef, uint64_t off, void *buf, size_t len,
			  size_t *got)
{
	*got = 0;
	for (int i = 0; i < ef->nsegs; i++) {
		uint64_t start = ef->segs[i].offset, n = ef->segs[i].filesz;
		ssize_t r;

		if (off < start || off - start >= n)
			continue;
		if (len > n - (off - start))
			len = (size_t)(n - (off - start));
		while (*got < len) {
			r = pread(ef->fd, (char *)buf + *got, len - *got, (off_t)(off + *got));
			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0)
				return r < 0 ? -errno : -EIO; /* truncated under the headers */
			*got += (size_t)r;
		}
		return 0;
	}
	return -ERANGE;
}

int probe_elf_code_read(const char *path, uint64_t offset, void *buf, size_t len, size_t *got,
			uint16_t *machine)
{
	struct elf_file ef;
	int ret = elf_file_open(path, &ef);

	*got = 0;
	if (ret)
		return ret;
	*machine = ef.machine;
	ret = elf_code_pread(&ef, offset, buf, len, got);
	elf_file_close(&ef);
	return ret;
}

int probe_elf_check(const char *path)
{
	struct elf_file ef;
	int ret = elf_file_open(path, &ef);

	if (ret == 0)
		elf_file_close(&ef);
	return ret;
}

static int func_cmp(const void *a, const void *b)
{
	const struct probe_elf_func *x = a, *y = b;
	int c = strcmp(x->name, y->name);

	if (c)
		return c;
	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

void probe_elf_funcs_free(struct probe_elf_func *funcs, int n)
{
	for (int i = 0; i < n; i++)
		free(funcs[i].name);
	free(funcs);
}

/* Appends the defined functions of one symbol table section. */
static int elf_symtab_read(struct elf_file *ef, Elf_Scn *scn, const GElf_Shdr *sh,
			   struct probe_elf_func **v, int *n, int *cap)
{
	Elf_Data *data = elf_getdata(scn, NULL);
	size_t entsz = gelf_fsize(ef->elf, ELF_T_SYM, 1, EV_CURRENT);
	size_t count;

	if (!data || !entsz || !data->d_buf)
		return 0; /* unreadable table: skip it, the other may do */
	count = data->d_size / entsz;
	for (size_t i = 1; i < count; i++) {
		GElf_Sym sym;
		const char *name;
		uint64_t off;
		int type;

		if (!gelf_getsym(data, (int)i, &sym))
			break;
		type = GELF_ST_TYPE(sym.st_info);
		if ((type != STT_FUNC && type != STT_GNU_IFUNC) || sym.st_shndx == SHN_UNDEF ||
		    sym.st_size == 0)
			continue;
		name = elf_strptr(ef->elf, sh->sh_link, sym.st_name);
		if (!name || !*name || !elf_addr_to_offset(ef, sym.st_value, &off))
			continue;
		if (*n == *cap) {
			int ncap = *cap ? *cap * 2 : 256;
			struct probe_elf_func *nv;

			if (ncap > ELF_MAX_FUNCS)
				return -E2BIG;
			nv = realloc(*v, (size_t)ncap * sizeof(*nv));
			if (!nv)
				return -ENOMEM;
			*v = nv;
			*cap = ncap;
		}
		(*v)[*n].name = strndup(name, 1024);
		if (!(*v)[*n].name)
			return -ENOMEM;
		(*v)[*n].addr = sym.st_value;
		(*v)[*n].size = sym.st_size;
		(*v)[*n].offset = off;
		(*n)++;
	}
	return 0;
}

int probe_elf_funcs_read(const char *path, struct probe_elf_func **funcs, int *nfuncs)
{
	struct probe_elf_func *v = NULL;
	struct elf_file ef;
	Elf_Scn *scn = NULL;
	int n = 0, cap = 0, w = 0, ret;

	*funcs = NULL;
	*nfuncs = 0;
	ret = elf_file_open(path, &ef);
	if (ret)
		return ret;
	while ((scn = elf_nextscn(ef.elf, scn))) {
		GElf_Shdr sh;

		if (!gelf_getshdr(scn, &sh))
			continue;
		if (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM)
			continue;
		ret = elf_symtab_read(&ef, scn, &sh, &v, &n, &cap);
		if (ret)
			goto out_free;
	}
	if (n > 1)
		qsort(v, (size_t)n, sizeof(*v), func_cmp);
	/* one entry per name: .symtab and .dynsym repeat the exported functions */
	for (int i = 0; i < n; i++) {
		if (w > 0 && strcmp(v[w - 1].name, v[i].name) == 0) {
			free(v[i].name);
			continue;
		}
		v[w++] = v[i];
	}
	*funcs = v;
	*nfuncs = w;
	elf_file_close(&ef);
	return 0;

out_free:
	probe_elf_funcs_free(v, n);
	elf_file_close(&ef);
	return ret;
}

int probe_usdt_args_parse(const char *args, int *size, bool *is_signed, int max)
{
	const char *p = args;
	int n = 0;

	while (*p && n < max) {
		const char *tok;
		int depth = 0, sz = 8;
		bool sgn = false;

		while (*p == ' ' || *p == '\t')
			p++;
		if (!*p)
			break;
		tok = p;
		/* a token ends at a blank outside brackets ("[sp, 8]" on arm64 has one inside) */
		while (*p && (depth > 0 || (*p != ' ' && *p != '\t'))) {
			if (*p == '[' || *p == '(')
				depth++;
			else if ((*p == ']' || *p == ')') && depth > 0)
				depth--;
			p++;
		}
		if (tok[0] == '-' && tok[1] >= '1' && tok[1] <= '8' && tok[2] == '@') {
			sgn = true;
			sz = tok[1] - '0';
		} else if (tok[0] >= '1' && tok[0] <= '8' && tok[1] == '@') {
			sz = tok[0] - '0';
		}
		if (sz != 1 && sz != 2 && sz != 4 && sz != 8)
			sz = 8;
		size[n] = sz;
		is_signed[n] = sgn;
		n++;
	}
	return n;
}

/* Copies the NUL-terminated string at desc[*pos] (within len) into out; false if unterminated. */
static bool note_str(const char *desc, size_t len, size_t *pos, char *out, size_t outsz)
{
	const char *s = desc + *pos;
	const char *end;

	if (*pos >= len)
		return false;
	end = memchr(s, '\0', len - *pos);
	if (!end)
		return false;
	snprintf(out, outsz, "%s", s);
	*pos += (size_t)(end - s) + 1;
	return true;
}

static uint64_t note_addr(const unsigned char *p, size_t asz)
{
	uint32_t a32;
	uint64_t a64;

	/* the notes are in the file's byte order; weft traces the host, so they match it */
	if (asz == 4) {
		memcpy(&a32, p, 4);
		return a32;
	}
	memcpy(&a64, p, 8);
	return a64;
}

static int elf_notes_read(struct elf_file *ef, Elf_Data *data, uint64_t base_addr,
			  struct probe_elf_usdt **v, int *n, int *cap)
{
	size_t asz = gelf_getclass(ef->elf) == ELFCLASS32 ? 4 : 8;
	size_t off = 0, next;
	GElf_Nhdr nh;
	size_t name_off, desc_off, got;

	while (off < data->d_size && (next = gelf_getnote(data, off, &nh, &name_off, &desc_off))) {
		const char *desc = (const char *)data->d_buf + desc_off;
		struct probe_elf_usdt u;
		size_t pos = 3 * asz;

		off = next;
		if (nh.n_type != NT_STAPSDT || nh.n_namesz != 8 ||
		    memcmp((const char *)data->d_buf + name_off, "stapsdt", 8) != 0)
			continue;
		if (desc_off > data->d_size || nh.n_descsz > data->d_size - desc_off ||
		    nh.n_descsz < 3 * asz + 3)
			continue;
		memset(&u, 0, sizeof(u));
		u.pc = note_addr((const unsigned char *)desc, asz);
		u.base = note_addr((const unsigned char *)desc + asz, asz);
		u.semaphore = note_addr((const unsigned char *)desc + 2 * asz, asz);
		if (!note_str(desc, nh.n_descsz, &pos, u.provider, sizeof(u.provider)) ||
		    !note_str(desc, nh.n_descsz, &pos, u.name, sizeof(u.name)) ||
		    !note_str(desc, nh.n_descsz, &pos, u.args, sizeof(u.args)))
			continue;
		/* prelink moved the code: shift by how far .stapsdt.base moved (libbpf does too) */
		if (base_addr)
			u.pc += base_addr - u.base;
		if (!elf_addr_to_offset(ef, u.pc, &u.offset))
			continue;
		if (u.semaphore && !elf_addr_to_offset(ef, u.semaphore, &u.sem_offset))
			u.sem_offset = 0;
		/* the site's instruction, for the check that it is a nop (usdt.c) */
		u.machine = ef->machine;
		if (elf_code_pread(ef, u.offset, u.code, sizeof(u.code), &got) == 0)
			u.code_len = (uint8_t)got;
		u.nargs = probe_usdt_args_parse(u.args, u.arg_size, u.arg_signed,
						PROBE_USDT_MAX_ARGS);
		if (*n == *cap) {
			int ncap = *cap ? *cap * 2 : 16;
			struct probe_elf_usdt *nv;

			if (ncap > ELF_MAX_NOTES)
				return -E2BIG;
			nv = realloc(*v, (size_t)ncap * sizeof(*nv));
			if (!nv)
				return -ENOMEM;
			*v = nv;
			*cap = ncap;
		}
		(*v)[(*n)++] = u;
	}
	return 0;
}

int probe_elf_usdt_read(const char *path, struct probe_elf_usdt **notes, int *nnotes)
{
	struct probe_elf_usdt *v = NULL;
	Elf_Scn *scn = NULL, *note_scn[8];
	uint64_t base_addr = 0;
	struct elf_file ef;
	size_t shstrndx;
	int n = 0, cap = 0, nscn = 0, ret;

	*notes = NULL;
	*nnotes = 0;
	ret = elf_file_open(path, &ef);
	if (ret)
		return ret;
	if (elf_getshdrstrndx(ef.elf, &shstrndx) != 0) {
		elf_file_close(&ef);
		return -ENOEXEC;
	}
	while ((scn = elf_nextscn(ef.elf, scn))) {
		GElf_Shdr sh;
		const char *name;

		if (!gelf_getshdr(scn, &sh))
			continue;
		name = elf_strptr(ef.elf, shstrndx, sh.sh_name);
		if (!name)
			continue;
		if (strcmp(name, ".stapsdt.base") == 0)
			base_addr = sh.sh_addr;
		else if (sh.sh_type == SHT_NOTE && strcmp(name, ".note.stapsdt") == 0 && nscn < 8)
			note_scn[nscn++] = scn;
	}
	for (int i = 0; i < nscn; i++) {
		Elf_Data *data = elf_getdata(note_scn[i], NULL);

		if (!data || !data->d_buf)
			continue;
		ret = elf_notes_read(&ef, data, base_addr, &v, &n, &cap);
		if (ret) {
			free(v);
			elf_file_close(&ef);
			return ret;
		}
	}
	*notes = v;
	*nnotes = n;
	elf_file_close(&ef);
	return 0;
}
