/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Names where numbers are printed (issue 15, lang-a): syscall numbers, signals, errnos and the
 * enumerators of the running kernel's BTF enums.  The agent renders sysname(), signame(),
 * errname() and enumname() values with these at output; the compiler checks enumname()'s
 * enum against its own BTF.  See probes/names.c.
 */
#ifndef WEFT_PROBES_NAMES_H
#define WEFT_PROBES_NAMES_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The syscall of number nr on this architecture ("openat"), or NULL. */
const char *names_syscall(int64_t nr);
/* The signal's name into buf ("SIGKILL", "SIGRTMIN+3"); false (buf unchanged) if none. */
bool names_signal(int64_t sig, char *buf, size_t sz);
/* The errno's name ("ENOENT") for e or -e, or NULL. */
const char *names_errno(int64_t e);

/*
 * The kernel's BTF (WEFT_BTF, else /sys/kernel/btf/vmlinux), opened once and kept for the
 * process's life; NULL (errno set) when it cannot be read.
 */
struct btf;
const struct btf *names_btf(void);
/*
 * The BTF id of the enum `name` names: an enum type by its name ("sock_type" or
 * "enum sock_type"), else the enum (named or anonymous) that declares an enumerator of that
 * name ("TCP_ESTABLISHED": the anonymous enum of the TCP states).  0 if none.
 */
uint32_t names_enum_find(const struct btf *btf, const char *name);
/* The enumerator of enum `id` whose value is v, or NULL. */
const char *names_enum_value(const struct btf *btf, uint32_t id, int64_t v);

#endif
