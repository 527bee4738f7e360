// SPDX-License-Identifier: Apache-2.0
/*
 * Names where numbers are printed (issue 15, lang-a).
 *
 * What it is for: sysname(e), signame(e), errname(e) and enumname(e, 'ENUM') keep the number
 * in the kernel (a group key, a stream field: 8 bytes) and the agent prints the name at
 * output, like usym/ksym.  This file holds the tables behind those names.
 *
 * How it works:
 *   - syscalls: a table indexed by number, generated at build time by probes/gen_sysnames.sh
 *     from the <asm/unistd.h> of the compiler's kernel headers (`[__NR_read] = "read"`), so
 *     it is the build architecture's numbering, which raw_syscalls:sys_enter's `id` uses;
 *   - signals: glibc's sigabbrev_np() ("KILL" -> "SIGKILL"); real-time signals as
 *     SIGRTMIN+N; errnos: glibc's strerrorname_np() ("ENOENT"), for e or -e (a syscall's
 *     return value);
 *   - enums: the kernel's BTF, read once; an enum by its type name, or by one of its
 *     enumerators' names for anonymous enums (the TCP states have no type name:
 *     'TCP_ESTABLISHED' names their enum).
 *
 * Limits: the syscall table is the build's architecture (a 32-bit compat syscall of a 64-bit
 * kernel is printed by the 64-bit numbering); an unknown number is printed as a number by the
 * caller.  The BTF stays loaded for the process's life (a few MiB, one parse).
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <asm/unistd.h>
#include <bpf/btf.h>
#include "probes/names.h"

static const char *const sysnames[] = {
#include "sysnames.h"
};

const char *names_syscall(int64_t nr)
{
	if (nr < 0 || (uint64_t)nr >= sizeof(sysnames) / sizeof(sysnames[0]))
		return NULL;
	return sysnames[nr];
}

bool names_signal(int64_t sig, char *buf, size_t sz)
{
	const char *abbrev;

	if (sig <= 0 || sig > SIGRTMAX)
		return false;
	if (sig >= SIGRTMIN) {
		if (sig == SIGRTMIN)
			snprintf(buf, sz, "SIGRTMIN");
		else
			snprintf(buf, sz, "SIGRTMIN+%d", (int)sig - SIGRTMIN);
		return true;
	}
	abbrev = sigabbrev_np((int)sig);
	if (!abbrev)
		return false;
	snprintf(buf, sz, "SIG%s", abbrev);
	return true;
}

const char *names_errno(int64_t e)
{
	if (e < 0)
		e = -e;
	if (e <= 0 || e > 4095)
		return NULL;
	return strerrorname_np((int)e);
}

const struct btf *names_btf(void)
{
	static struct btf *btf;
	static int err;
	const char *path = getenv("WEFT_BTF");

	if (btf)
		return btf;
	if (err) {
		errno = err;
		return NULL;
	}
	btf = path && *path ? btf__parse(path, NULL) : btf__load_vmlinux_btf();
	if (!btf) {
		err = errno ? errno : ENOENT;
		btf = NULL;
		errno = err;
	}
	return btf;
}

static bool is_enum(const struct btf_type *t)
{
	return btf_is_enum(t) || btf_is_enum64(t);
}

uint32_t names_enum_find(const struct btf *btf, const char *name)
{
	uint32_t n;

	if (!btf || !name || !*name)
		return 0;
	if (strncmp(name, "enum ", 5) == 0)
		name += 5;
	n = btf__type_cnt(btf);
	for (uint32_t id = 1; id < n; id++) {
		const struct btf_type *t = btf__type_by_id(btf, id);

		if (is_enum(t) && t->name_off &&
		    strcmp(btf__name_by_offset(btf, t->name_off), name) == 0)
			return id;
	}
	for (uint32_t id = 1; id < n; id++) {
		const struct btf_type *t = btf__type_by_id(btf, id);
		int vlen = btf_vlen(t);

		if (!is_enum(t))
			continue;
		for (int i = 0; i < vlen; i++) {
			uint32_t off = btf_is_enum(t) ? btf_enum(t)[i].name_off :
							btf_enum64(t)[i].name_off;

			if (strcmp(btf__name_by_offset(btf, off), name) == 0)
				return id;
		}
	}
	return 0;
}

const char *names_enum_value(const struct btf *btf, uint32_t id, int64_t v)
{
	const struct btf_type *t = btf ? btf__type_by_id(btf, id) : NULL;
	int vlen;

	if (!t || !is_enum(t))
		return NULL;
	vlen = btf_vlen(t);
	for (int i = 0; i < vlen; i++) {
		if (btf_is_enum(t)) {
			const struct btf_enum *en = &btf_enum(t)[i];
			/* a 32-bit field may hold it sign-extended or not */
			if ((int64_t)(int32_t)en->val == v || (int64_t)en->val == v)
				return btf__name_by_offset(btf, en->name_off);
		} else {
			const struct btf_enum64 *en = &btf_enum64(t)[i];

			if ((int64_t)btf_enum64_value(en) == v)
				return btf__name_by_offset(btf, en->name_off);
		}
	}
	return NULL;
}
