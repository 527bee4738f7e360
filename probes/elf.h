/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ELF reading for user-space probes (internal to probes/, exported for tests): the function
 * symbols of a file with the file offset a uprobe attaches at, and its USDT (SystemTap SDT)
 * notes.  Input files are untrusted: every offset, size and string is bounds-checked, and a
 * corrupt file is an error (-ENOEXEC), never a crash.
 */
#ifndef WEFT_PROBES_ELF_H
#define WEFT_PROBES_ELF_H
#include <stdbool.h>
#include <stdint.h>

#define PROBE_USDT_MAX_ARGS 12

struct probe_elf_func {
	char *name; /* owned by the array (freed by probe_elf_funcs_free) */
	uint64_t addr; /* st_value */
	uint64_t size; /* st_size */
	uint64_t offset; /* file offset of addr: where a uprobe attaches */
};

struct probe_elf_usdt {
	char provider[64];
	char name[64];
	uint64_t pc; /* note address, adjusted for prelinking (.stapsdt.base) */
	uint64_t offset; /* file offset of pc */
	uint64_t base; /* the note's recorded .stapsdt.base address */
	uint64_t semaphore; /* address of the semaphore, 0: none */
	uint64_t sem_offset; /* file offset of the semaphore (uprobe ref_ctr_offset), 0: none */
	uint16_t machine; /* the file's e_machine, for decoding code[] */
	uint8_t code_len; /* bytes of code[] read: short at a segment's end, 0 if unreadable */
	uint8_t code[16]; /* the file's bytes at offset: what a uprobe there would patch */
	char args[256]; /* as written: "-4@%eax 8@-8(%rbp)" */
	int nargs;
	int arg_size[PROBE_USDT_MAX_ARGS]; /* bytes: 1, 2, 4, 8 */
	bool arg_signed[PROBE_USDT_MAX_ARGS];
};

/* 0 when path is a readable ELF file; -ENOENT, -EACCES, -ENOEXEC (not ELF or corrupt), or
 * -ENODEV / -EISDIR (not a regular file: a FIFO is refused, never waited on; base/file.h). */
int probe_elf_check(const char *path);

/* Defined function symbols (STT_FUNC, STT_GNU_IFUNC, size > 0) of .symtab and .dynsym, one
 * per name, sorted by name, with offsets through the PT_LOAD segment holding them.
 * *funcs is malloc'd (NULL when *n is 0).  0 or -errno (-ENOEXEC: not ELF or corrupt). */
int probe_elf_funcs_read(const char *path, struct probe_elf_func **funcs, int *n);
void probe_elf_funcs_free(struct probe_elf_func *funcs, int n);

/* The notes of .note.stapsdt in file order.  *notes is malloc'd (NULL when *n is 0);
 * a file without notes gives 0 and *n = 0.  0 or -errno as above. */
int probe_elf_usdt_read(const char *path, struct probe_elf_usdt **notes, int *n);

/* Up to len bytes of path at file offset `offset` into buf, and the file's e_machine: the code
 * a uprobe at that offset would patch.  The offset must be within the file bytes of a PT_LOAD
 * segment, and the read stops at that segment's end: *got says how many bytes were read.
 * 0 or -errno (-ENOEXEC: not ELF or corrupt; -ERANGE: the offset is in no loaded segment). */
int probe_elf_code_read(const char *path, uint64_t offset, void *buf, size_t len, size_t *got,
			uint16_t *machine);

/* Parses a note's argument string into sizes and signs; returns the argument count. */
int probe_usdt_args_parse(const char *args, int *size, bool *is_signed, int max);

#endif
