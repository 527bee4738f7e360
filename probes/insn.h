/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Instruction decoding for user probes (internal to probes/, exported for tests).  A uprobe
 * writes a breakpoint over the first byte of an instruction; written anywhere else it corrupts
 * the instruction it lands in, and the traced process loops or dies.  So an offset into a
 * function is accepted only at an instruction boundary, found by decoding from the function's
 * first byte (a linear sweep, as objdump does), and a USDT site only on a no-op, which is what
 * sys/sdt.h emits there.  Decoding is capstone's; the machine is the ELF file's e_machine.
 */
#ifndef WEFT_PROBES_INSN_H
#define WEFT_PROBES_INSN_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PROBE_INSN_MAX 16 /* longer than any instruction (x86: 15 bytes) */

struct probe_insn {
	uint64_t start; /* offset of the instruction's first byte in the code buffer */
	uint32_t len; /* its length in bytes */
	bool nop; /* a no-op: x86 nop/nopl/nopw (0x90, 0f 1f /0, ...), arm64 nop */
	char text[192]; /* "pushq %r12" (AT&T syntax on x86, as objdump prints it) */
};

/* Whether instructions of this ELF machine (EM_X86_64, EM_386, EM_AARCH64) can be decoded. */
bool probe_insn_machine_ok(uint16_t machine);

/*
 * Finds the instruction of code[0..len) that holds byte `off`, decoding one instruction after
 * another from code[0], which must be the first byte of an instruction (a function's start).
 * On arm64 every instruction is the aligned 4 bytes holding `off`.  Returns 0 with *insn filled
 * (off is an instruction boundary iff insn->start == off); -ENOEXEC with insn->start set when
 * the bytes there are no instruction, or one that len cuts short (insn->len is then 0);
 * -ERANGE when off >= len; -EOPNOTSUPP for a machine that cannot be decoded; -ELIBACC when
 * libcapstone cannot be loaded (probe_insn_lib_error() says why); -ENOMEM.
 */
int probe_insn_find(uint16_t machine, const uint8_t *code, size_t len, uint64_t off,
		    struct probe_insn *insn);

/* NULL once libcapstone is loaded (on first call); else why it cannot be (dlerror's text). */
const char *probe_insn_lib_error(void);

#endif
