/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Kernel types for queries, from BTF: what `cast(E as struct NAME)`, `curtask` and `.field`
 * on a typed pointer need (docs/language.md, "Kernel structs").  Semantic analysis looks
 * structs and their members up here (through anonymous members, as C does) and marks each
 * member a query reads; the code generator then emits only the marked members of only the
 * structs involved, each struct marked preserve_access_index, so that libbpf relocates the
 * offsets against the BTF of the kernel the program is loaded on (CO-RE).  Generated code
 * never includes vmlinux.h.
 *
 * The types come from $WEFT_BTF when it is set (the BTF of another kernel: raw BTF or an ELF
 * file with a .BTF section), else from the running kernel's /sys/kernel/btf/vmlinux.
 *
 * Must never: read kernel memory (only the BTF file), or emit a member no query reads.
 */
#ifndef WEFT_KBTF_H
#define WEFT_KBTF_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define KBTF_MAX_DEPTH 8 /* `.field` steps in one chain from cast(...), curtask or args.F */
#define KBTF_MAX_STR 256 /* a char array is read as a string of at most this many bytes */
#define KBTF_VMLINUX "/sys/kernel/btf/vmlinux"

struct kbtf;

/* Opens the BTF (above).  NULL with errno; *path says which file was tried. */
struct kbtf *kbtf_open(const char **path);
void kbtf_free(struct kbtf *k);

/* A struct (or union) by name: its id, or 0 when the BTF has none. */
uint32_t kbtf_find(struct kbtf *k, const char *name, bool is_union);
/* Up to max struct (union) names near `name`, best first; pointers into the BTF. */
int kbtf_near_types(struct kbtf *k, const char *name, bool is_union, const char **out, int max);
/* "struct sock" or "union x", for messages. */
const char *kbtf_type_name(struct kbtf *k, uint32_t id, char *buf, size_t sz);

enum kbtf_kind {
	KBTF_INT, /* an integer, enum or bool of `size` bytes */
	KBTF_PTR, /* a pointer; `type_id` the struct/union it points to, or 0 */
	KBTF_COMPOSITE, /* an embedded struct or union, `type_id` */
	KBTF_CHARS, /* a char array of `size` elements: read as a string */
	KBTF_BITFIELD, /* refused: bit-granular reads are not supported */
	KBTF_OTHER, /* refused: `what` says what it is (an array of ints, a float, ...) */
};

struct kbtf_member {
	enum kbtf_kind kind;
	uint32_t type_id;
	uint32_t size;
	bool is_signed;
	bool ptr_to_char; /* KBTF_PTR to char, u8 or void-less text: str() may read it */
	char what[48];
};

/* Member `name` of struct/union `id`, found as C finds it (through anonymous members):
 * 0 with *m filled and the member marked for kbtf_emit(); -ENOENT when there is none. */
int kbtf_member(struct kbtf *k, uint32_t id, const char *name, struct kbtf_member *m);
/* Up to max member names of `id` near `name` (anonymous members looked through). */
int kbtf_near_members(struct kbtf *k, uint32_t id, const char *name, const char **out, int max);
/* The members of `id` as "a, b, c, ..." (at most sz bytes, cut with "...") for a fix. */
void kbtf_list_members(struct kbtf *k, uint32_t id, char *buf, size_t sz);
/* Where `name` is a member of a struct embedded (not pointed to) in `id`, up to two levels
 * down: the path to write before it ("__sk_common"), or false. */
bool kbtf_member_hint(struct kbtf *k, uint32_t id, const char *name, char *buf, size_t sz);

/* The arguments a tracepoint passes to a raw tracepoint program (the kernel's typedef
 * btf_trace_EVENT, a pointer to a function of (void *__data, ARGS...)): the byte size of each
 * of ARGS (8 for a pointer) into sizes[0..max).  Their number, -ENOENT when the BTF has no
 * such typedef, -EINVAL when an argument is neither an integer nor a pointer. */
int kbtf_tp_args(struct kbtf *k, const char *event, uint32_t *sizes, int max);

/* The C name of a struct/union in generated code: "struct sock___wq" (libbpf ignores the
 * ___wq suffix when it matches types against the kernel's). */
const char *kbtf_cname(struct kbtf *k, uint32_t id, char *buf, size_t sz);
/* The definitions of every struct a marked member belongs to, with only those members,
 * in an order C accepts.  0 or -errno. */
int kbtf_emit(struct kbtf *k, FILE *out);

#endif
