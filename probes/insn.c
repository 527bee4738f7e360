// SPDX-License-Identifier: Apache-2.0
/*
 * Instruction boundaries and no-ops with capstone (see insn.h for why they matter).  x86 is
 * variable-length, so the only way to know where instructions start is to decode from a
 * known start (the function's symbol) up to the offset in question; arm64 instructions are
 * the aligned 4-byte words.  The bytes come from untrusted files: capstone reads only within
 * the buffer given, and bytes that do not decode stop the walk (-ENOEXEC) rather than being
 * skipped, since then no later offset can be shown to be a boundary.
 *
 * libcapstone is opened on first use, not linked: it carries ~89,000 relocations and 1.3 MB of
 * relocated data that the dynamic loader would process at every start of weft (about 5 ms and
 * 1.5 MB of RSS), while only queries with a uprobe offset or a USDT probe need it.
 */
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <capstone/capstone.h>
#include "probes/insn.h"

#define INSN_STR(x) #x
#define INSN_XSTR(x) INSN_STR(x)
#define INSN_SONAME "libcapstone.so." INSN_XSTR(CS_API_MAJOR)

static struct {
	cs_err (*open)(cs_arch, cs_mode, csh *);
	cs_err (*close)(csh *);
	cs_err (*option)(csh, cs_opt_type, size_t);
	cs_insn *(*malloc)(csh);
	void (*free)(cs_insn *, size_t);
	bool (*disasm_iter)(csh, const uint8_t **, size_t *, uint64_t *, cs_insn *);
	char error[256];
	bool ok;
} cs;
static pthread_once_t cs_once = PTHREAD_ONCE_INIT;

static void cs_load(void)
{
	void *lib = dlopen(INSN_SONAME, RTLD_NOW | RTLD_LOCAL);
	const char *e;

	if (!lib) {
		e = dlerror();
		snprintf(cs.error, sizeof(cs.error), "%s", e ? e : "dlopen failed");
		return;
	}
	*(void **)&cs.open = dlsym(lib, "cs_open");
	*(void **)&cs.close = dlsym(lib, "cs_close");
	*(void **)&cs.option = dlsym(lib, "cs_option");
	*(void **)&cs.malloc = dlsym(lib, "cs_malloc");
	*(void **)&cs.free = dlsym(lib, "cs_free");
	*(void **)&cs.disasm_iter = dlsym(lib, "cs_disasm_iter");
	if (!cs.open || !cs.close || !cs.option || !cs.malloc || !cs.free || !cs.disasm_iter) {
		snprintf(cs.error, sizeof(cs.error), "%s lacks a cs_* function", INSN_SONAME);
		dlclose(lib);
		return;
	}
	cs.ok = true; /* kept open for the life of the process */
}

const char *probe_insn_lib_error(void)
{
	pthread_once(&cs_once, cs_load);
	return cs.ok ? NULL : cs.error;
}

bool probe_insn_machine_ok(uint16_t machine)
{
	return machine == EM_X86_64 || machine == EM_386 || machine == EM_AARCH64;
}

static void insn_fill(struct probe_insn *insn, const cs_insn *ci, uint16_t machine)
{
	insn->start = ci->address;
	insn->len = ci->size;
	insn->nop = machine == EM_AARCH64 ? ci->id == ARM64_INS_NOP : ci->id == X86_INS_NOP;
	snprintf(insn->text, sizeof(insn->text), "%s%s%s", ci->mnemonic, ci->op_str[0] ? " " : "",
		 ci->op_str);
}

int probe_insn_find(uint16_t machine, const uint8_t *code, size_t len, uint64_t off,
		    struct probe_insn *insn)
{
	const uint8_t *p = code;
	size_t left = len;
	uint64_t addr = 0;
	cs_insn *ci;
	cs_err cerr;
	csh h;
	int ret;

	memset(insn, 0, sizeof(*insn));
	if (!probe_insn_machine_ok(machine))
		return -EOPNOTSUPP;
	if (probe_insn_lib_error())
		return -ELIBACC;
	if (off >= len)
		return -ERANGE;
	if (machine == EM_AARCH64) {
		addr = off & ~(uint64_t)3;
		insn->start = addr;
		if (len - addr < 4)
			return -ENOEXEC; /* the word holding off is cut short */
		p = code + addr;
		left = 4;
		cerr = cs.open(CS_ARCH_ARM64, CS_MODE_LITTLE_ENDIAN, &h);
	} else {
		cerr = cs.open(CS_ARCH_X86, machine == EM_386 ? CS_MODE_32 : CS_MODE_64, &h);
	}
	if (cerr == CS_ERR_ARCH)
		return -EOPNOTSUPP; /* a capstone built without this architecture */
	if (cerr != CS_ERR_OK)
		return -ENOMEM;
	if (machine != EM_AARCH64)
		cs.option(h, CS_OPT_SYNTAX, CS_OPT_SYNTAX_ATT);
	ci = cs.malloc(h);
	if (!ci) {
		cs.close(&h);
		return -ENOMEM;
	}
	for (;;) {
		uint64_t at = addr;

		if (!cs.disasm_iter(h, &p, &left, &addr, ci)) {
			insn->start = at;
			ret = -ENOEXEC;
			break;
		}
		if (addr > off) { /* addr is now the end of the instruction holding off */
			insn_fill(insn, ci, machine);
			ret = 0;
			break;
		}
	}
	cs.free(ci, 1);
	cs.close(&h);
	return ret;
}
