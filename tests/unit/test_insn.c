// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests of the instruction decoding that guards uprobe offsets and USDT sites
 * (probes/insn.c), on byte buffers whose instruction lengths are known from the architecture
 * manuals (and agree with objdump): every offset of a buffer is checked, boundaries and the
 * inside of each instruction, so a decoder that got one length wrong would shift every later
 * boundary and fail.  Also no-ops of each length, bytes that are no instruction, a buffer cut
 * inside an instruction, i386 and arm64, and a machine that is not decoded.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <elf.h>
#include <errno.h>
#include <stdio.h>
#include "probes/insn.h"

struct insn_case {
	const char *bytes; /* hex, instructions separated by '|' */
	bool nop;
};

/* Decodes "41 54|55" into code[], recording where each instruction starts; returns the size. */
static size_t code_of(const struct insn_case *c, size_t ncase, uint8_t *code, size_t *start,
		      bool *nop)
{
	size_t len = 0;

	for (size_t i = 0; i < ncase; i++) {
		const char *p = c[i].bytes;
		unsigned int b;
		int used;

		start[i] = len;
		nop[i] = c[i].nop;
		while (sscanf(p, " %2x%n", &b, &used) == 1) {
			code[len++] = (uint8_t)b;
			p += used;
		}
	}
	start[ncase] = len;
	return len;
}

/* Every offset of the buffer: a boundary is found as itself, an inside byte as its
 * instruction, with the right length and nop flag. */
static void check_all_offsets(uint16_t machine, const struct insn_case *c, size_t ncase)
{
	uint8_t code[256];
	size_t start[32], len;
	bool nop[32];

	assert_true(ncase < 32);
	len = code_of(c, ncase, code, start, nop);
	for (size_t k = 0; k < ncase; k++) {
		for (uint64_t off = start[k]; off < start[k + 1]; off++) {
			struct probe_insn insn;
			int ret = probe_insn_find(machine, code, len, off, &insn);

			if (ret != 0)
				fail_msg("%s: offset %llu: %d", c[k].bytes, (unsigned long long)off,
					 ret);
			if (insn.start != start[k] || insn.len != start[k + 1] - start[k])
				fail_msg("%s: offset %llu in [%llu, +%u), want [%zu, +%zu) (%s)",
					 c[k].bytes, (unsigned long long)off,
					 (unsigned long long)insn.start, insn.len, start[k],
					 start[k + 1] - start[k], insn.text);
			if (insn.nop != nop[k])
				fail_msg("%s: nop %d, want %d (%s)", c[k].bytes, insn.nop, nop[k],
					 insn.text);
			assert_true(insn.text[0] != '\0');
		}
	}
	/* past the end */
	{
		struct probe_insn insn;

		assert_int_equal(probe_insn_find(machine, code, len, len, &insn), -ERANGE);
	}
}

static void test_x86_64_lengths(void **state)
{
	/* the start of glibc 2.36's malloc, then prologue, branch and no-op forms */
	static const struct insn_case c[] = {
		{ "41 54", false }, /* push %r12 */
		{ "55", false }, /* push %rbp */
		{ "48 89 fb", false }, /* mov %rdi,%rbx */
		{ "48 83 ec 10", false }, /* sub $0x10,%rsp */
		{ "80 3d 46 1b 14 00 00", false }, /* cmpb $0x0,0x141b46(%rip) */
		{ "0f 84 f8 01 00 00", false }, /* je rel32 */
		{ "f3 0f 1e fa", false }, /* endbr64 */
		{ "48 b8 88 77 66 55 44 33 22 11", false }, /* movabs $imm64,%rax: 10 bytes */
		{ "90", true }, /* nop */
		{ "66 90", true }, /* xchg %ax,%ax: the 2-byte nop */
		{ "0f 1f 00", true }, /* nopl (%rax) */
		{ "0f 1f 44 00 00", true }, /* nopl 0x0(%rax,%rax,1) */
		{ "66 2e 0f 1f 84 00 00 00 00 00", true }, /* nopw %cs:0x0(%rax,%rax,1) */
		{ "cc", false }, /* int3: not a nop */
		{ "f3 90", false }, /* pause: not a nop */
		{ "c3", false }, /* ret */
	};
	struct probe_insn insn;
	uint8_t code[] = { 0x41, 0x54 };

	(void)state;
	check_all_offsets(EM_X86_64, c, sizeof(c) / sizeof(c[0]));
	assert_int_equal(probe_insn_find(EM_X86_64, code, 2, 1, &insn), 0);
	assert_string_equal(insn.text, "pushq %r12");
}

static void test_x86_64_undecodable(void **state)
{
	/* 0x06 (push %es) does not exist in 64-bit mode */
	static const uint8_t bad[] = { 0x55, 0x48, 0x89, 0xe5, 0x06, 0x90, 0x90 };
	/* a 7-byte cmpb cut after 5 bytes */
	static const uint8_t cut[] = { 0x55, 0x80, 0x3d, 0x46, 0x1b, 0x14 };
	struct probe_insn insn;

	(void)state;
	assert_int_equal(probe_insn_find(EM_X86_64, bad, sizeof(bad), 1, &insn), 0);
	assert_int_equal(insn.start, 1);
	assert_int_equal(insn.len, 3);
	assert_int_equal(probe_insn_find(EM_X86_64, bad, sizeof(bad), 4, &insn), -ENOEXEC);
	assert_int_equal(insn.start, 4);
	/* nothing after an undecodable byte can be shown to be a boundary */
	assert_int_equal(probe_insn_find(EM_X86_64, bad, sizeof(bad), 5, &insn), -ENOEXEC);
	assert_int_equal(insn.start, 4);
	assert_int_equal(probe_insn_find(EM_X86_64, cut, sizeof(cut), 0, &insn), 0);
	assert_int_equal(probe_insn_find(EM_X86_64, cut, sizeof(cut), 3, &insn), -ENOEXEC);
	assert_int_equal(insn.start, 1);
	assert_int_equal(probe_insn_find(EM_X86_64, cut, 0, 0, &insn), -ERANGE);
}

static void test_i386_lengths(void **state)
{
	static const struct insn_case c[] = {
		{ "55", false }, /* push %ebp */
		{ "89 e5", false }, /* mov %esp,%ebp */
		{ "83 ec 08", false }, /* sub $0x8,%esp */
		{ "06", false }, /* push %es: valid in 32-bit mode */
		{ "8d 74 26 00", false }, /* lea 0x0(%esi,%eiz,1),%esi: a filler, not a nop */
		{ "0f 1f 40 00", true }, /* nopl 0x0(%eax) */
		{ "90", true },		  { "c3", false },
	};

	(void)state;
	check_all_offsets(EM_386, c, sizeof(c) / sizeof(c[0]));
}

static void test_arm64(void **state)
{
	static const struct insn_case c[] = {
		{ "fd 7b bf a9", false }, /* stp x29, x30, [sp, #-16]! */
		{ "fd 03 00 91", false }, /* mov x29, sp */
		{ "1f 20 03 d5", true }, /* nop */
		{ "c0 03 5f d6", false }, /* ret */
	};
	static const uint8_t cut[] = { 0xfd, 0x7b, 0xbf, 0xa9, 0xfd, 0x03 };
	struct probe_insn insn;

	(void)state;
	check_all_offsets(EM_AARCH64, c, sizeof(c) / sizeof(c[0]));
	assert_int_equal(probe_insn_find(EM_AARCH64, cut, sizeof(cut), 5, &insn), -ENOEXEC);
	assert_int_equal(insn.start, 4);
}

static void test_machine_unknown(void **state)
{
	static const uint8_t code[] = { 0x13, 0x00, 0x00, 0x00 }; /* riscv nop */
	struct probe_insn insn;

	(void)state;
	assert_false(probe_insn_machine_ok(EM_RISCV));
	assert_int_equal(probe_insn_find(EM_RISCV, code, sizeof(code), 0, &insn), -EOPNOTSUPP);
	assert_true(probe_insn_machine_ok(EM_X86_64));
	assert_true(probe_insn_machine_ok(EM_AARCH64));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_x86_64_lengths),	cmocka_unit_test(test_x86_64_undecodable),
		cmocka_unit_test(test_i386_lengths),	cmocka_unit_test(test_arm64),
		cmocka_unit_test(test_machine_unknown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
