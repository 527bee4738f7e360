// SPDX-License-Identifier: Apache-2.0
/*
 * Kernel types for queries, from BTF (kbtf.h): lookups for semantic analysis, and the
 * minimal CO-RE struct definitions the code generator emits.
 *
 * Lookups go through libbpf's btf.h.  Every member a query reads is marked as a pair
 * (struct id, member index), the anonymous structs and unions on the way to it included;
 * kbtf_emit() then writes, for each named struct that has marks, a definition with only its
 * marked members, in BTF order, anonymous members inline as C nests them, embedded named
 * structs defined first.  Every pointer member is emitted as `void *`, every integer as the
 * __uN/__sN of its size, an enum as an anonymous enum (libbpf matches an anonymous local enum
 * with any enum), a char array as `char name[N]`: all that libbpf's field relocation checks
 * is that the kinds agree, and the code generator casts a pointer it follows itself.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/btf.h>
#include "compiler/diag.h"
#include "compiler/kbtf.h"
#include "probes/probes.h"

struct kbtf_mark {
	uint32_t id; /* a struct or union */
	uint32_t idx; /* its member */
};

struct kbtf {
	struct btf *btf;
	struct kbtf_mark *marks;
	size_t nmarks, cap;
	const char **names; /* names of structs and unions, for near matches (lazily) */
	int nnames;
	bool names_union;
	bool names_ok;
	int nenums; /* anonymous enums emitted, for unique enumerator names */
};

struct kbtf *kbtf_open(const char **path)
{
	const char *p = getenv("WEFT_BTF");
	struct kbtf *k;
	struct btf *b;

	if (!p || !*p)
		p = KBTF_VMLINUX;
	if (path)
		*path = p;
	b = btf__parse(p, NULL);
	if (!b) {
		if (!errno)
			errno = ENOENT;
		return NULL;
	}
	k = calloc(1, sizeof(*k));
	if (!k) {
		btf__free(b);
		errno = ENOMEM;
		return NULL;
	}
	k->btf = b;
	return k;
}

void kbtf_free(struct kbtf *k)
{
	if (!k)
		return;
	btf__free(k->btf);
	free(k->marks);
	free(k->names);
	free(k);
}

static const struct btf_type *skip_mods(const struct btf *b, uint32_t id, uint32_t *res)
{
	const struct btf_type *t = btf__type_by_id(b, id);

	/* bounded: a type graph with a cycle of modifiers would be corrupt BTF */
	for (int i = 0; t && i < 32 && (btf_is_mod(t) || btf_is_typedef(t)); i++) {
		id = t->type;
		t = btf__type_by_id(b, id);
	}
	if (t && (btf_is_mod(t) || btf_is_typedef(t)))
		t = NULL;
	if (res)
		*res = id;
	return t;
}

uint32_t kbtf_find(struct kbtf *k, const char *name, bool is_union)
{
	int id = btf__find_by_name_kind(k->btf, name, is_union ? BTF_KIND_UNION : BTF_KIND_STRUCT);

	return id > 0 ? (uint32_t)id : 0;
}

int kbtf_near_types(struct kbtf *k, const char *name, bool is_union, const char **out, int max)
{
	uint32_t n = btf__type_cnt(k->btf);

	if (!k->names_ok || k->names_union != is_union) {
		free(k->names);
		k->names = calloc(n, sizeof(*k->names));
		k->nnames = 0;
		if (!k->names)
			return 0;
		for (uint32_t id = 1; id < n; id++) {
			const struct btf_type *t = btf__type_by_id(k->btf, id);

			if (t && t->name_off &&
			    btf_kind(t) == (is_union ? BTF_KIND_UNION : BTF_KIND_STRUCT))
				k->names[k->nnames++] = btf__name_by_offset(k->btf, t->name_off);
		}
		k->names_ok = true;
		k->names_union = is_union;
	}
	return diag_near(name, k->names, k->nnames, out, max);
}

const char *kbtf_type_name(struct kbtf *k, uint32_t id, char *buf, size_t sz)
{
	const struct btf_type *t = btf__type_by_id(k->btf, id);
	const char *n = t && t->name_off ? btf__name_by_offset(k->btf, t->name_off) : "";

	snprintf(buf, sz, "%s %s", t && btf_is_union(t) ? "union" : "struct",
		 n && *n ? n : "(anonymous)");
	return buf;
}

int kbtf_tp_args(struct kbtf *k, const char *event, uint32_t *sizes, int max)
{
	return probe_tp_btf_args(k->btf, event, sizes, max);
}

const char *kbtf_cname(struct kbtf *k, uint32_t id, char *buf, size_t sz)
{
	const struct btf_type *t = btf__type_by_id(k->btf, id);
	const char *n = t && t->name_off ? btf__name_by_offset(k->btf, t->name_off) : "";

	snprintf(buf, sz, "%s %s___wq", t && btf_is_union(t) ? "union" : "struct", n ? n : "");
	return buf;
}

static int mark(struct kbtf *k, uint32_t id, uint32_t idx)
{
	for (size_t i = 0; i < k->nmarks; i++)
		if (k->marks[i].id == id && k->marks[i].idx == idx)
			return 0;
	if (k->nmarks == k->cap) {
		size_t cap = k->cap ? k->cap * 2 : 16;
		struct kbtf_mark *m = realloc(k->marks, cap * sizeof(*m));

		if (!m)
			return -ENOMEM;
		k->marks = m;
		k->cap = cap;
	}
	k->marks[k->nmarks++] = (struct kbtf_mark){ id, idx };
	return 0;
}

static bool marked(const struct kbtf *k, uint32_t id, uint32_t idx)
{
	for (size_t i = 0; i < k->nmarks; i++)
		if (k->marks[i].id == id && k->marks[i].idx == idx)
			return true;
	return false;
}

static bool has_marks(const struct kbtf *k, uint32_t id)
{
	for (size_t i = 0; i < k->nmarks; i++)
		if (k->marks[i].id == id)
			return true;
	return false;
}

static bool is_anon_composite_member(const struct btf *b, const struct btf_member *m)
{
	const struct btf_type *t;

	if (m->name_off && *btf__name_by_offset(b, m->name_off))
		return false;
	t = skip_mods(b, m->type, NULL);
	return t && btf_is_composite(t);
}

/* Finds `name` in composite id, depth-first through anonymous members as C does; marks the
 * path when found.  Returns the index of the member in its own (innermost) composite and
 * its composite in *owner, or -ENOENT. */
static int find_member(struct kbtf *k, uint32_t id, const char *name, int depth, uint32_t *owner)
{
	const struct btf_type *t = btf__type_by_id(k->btf, id);
	const struct btf_member *m;

	if (!t || !btf_is_composite(t) || depth > 16)
		return -ENOENT;
	m = btf_members(t);
	for (int i = 0; i < btf_vlen(t); i++) {
		const char *n = btf__name_by_offset(k->btf, m[i].name_off);

		if (n && *n && strcmp(n, name) == 0) {
			*owner = id;
			return mark(k, id, (uint32_t)i) ? -ENOMEM : i;
		}
	}
	for (int i = 0; i < btf_vlen(t); i++) {
		uint32_t sub;
		int r;

		if (!is_anon_composite_member(k->btf, &m[i]))
			continue;
		skip_mods(k->btf, m[i].type, &sub);
		r = find_member(k, sub, name, depth + 1, owner);
		if (r >= 0)
			return mark(k, id, (uint32_t)i) ? -ENOMEM : r;
	}
	return -ENOENT;
}

static bool is_char_int(const struct btf_type *t)
{
	return t && btf_is_int(t) && t->size == 1;
}

int kbtf_member(struct kbtf *k, uint32_t id, const char *name, struct kbtf_member *out)
{
	const struct btf_type *ct, *t;
	const struct btf_member *m;
	uint32_t owner = 0, tid;
	int idx;

	memset(out, 0, sizeof(*out));
	idx = find_member(k, id, name, 0, &owner);
	if (idx < 0)
		return idx;
	ct = btf__type_by_id(k->btf, owner);
	m = &btf_members(ct)[idx];
	if (btf_member_bitfield_size(ct, (uint32_t)idx) ||
	    btf_member_bit_offset(ct, (uint32_t)idx) % 8) {
		out->kind = KBTF_BITFIELD;
		out->size = btf_member_bitfield_size(ct, (uint32_t)idx);
		return 0;
	}
	t = skip_mods(k->btf, m->type, &tid);
	out->kind = KBTF_OTHER;
	snprintf(out->what, sizeof(out->what), "a type queries cannot read");
	if (!t)
		return 0;
	switch (btf_kind(t)) {
	case BTF_KIND_INT:
		if (t->size == 1 || t->size == 2 || t->size == 4 || t->size == 8) {
			if (btf_int_offset(t) || btf_int_bits(t) != t->size * 8u) {
				out->kind = KBTF_BITFIELD;
				out->size = btf_int_bits(t);
				return 0;
			}
			out->kind = KBTF_INT;
			out->size = t->size;
			out->is_signed = btf_int_encoding(t) & BTF_INT_SIGNED;
		} else {
			snprintf(out->what, sizeof(out->what), "a %u-byte integer", t->size);
		}
		return 0;
	case BTF_KIND_ENUM:
	case BTF_KIND_ENUM64:
		if (t->size == 1 || t->size == 2 || t->size == 4 || t->size == 8) {
			out->kind = KBTF_INT;
			out->size = t->size;
			out->is_signed = btf_kflag(t);
		}
		return 0;
	case BTF_KIND_PTR: {
		uint32_t pid;
		const struct btf_type *pt = skip_mods(k->btf, t->type, &pid);

		out->kind = KBTF_PTR;
		out->size = 8;
		if (pt && btf_is_composite(pt) && pt->name_off)
			out->type_id = pid; /* an anonymous one has no name to define it by */
		out->ptr_to_char = is_char_int(pt);
		return 0;
	}
	case BTF_KIND_STRUCT:
	case BTF_KIND_UNION:
		out->kind = KBTF_COMPOSITE;
		out->type_id = tid;
		return 0;
	case BTF_KIND_ARRAY: {
		const struct btf_array *a = btf_array(t);
		const struct btf_type *et = skip_mods(k->btf, a->type, NULL);

		if (is_char_int(et) && a->nelems > 0) {
			out->kind = KBTF_CHARS;
			out->size = a->nelems < KBTF_MAX_STR ? a->nelems : KBTF_MAX_STR;
			return 0;
		}
		snprintf(out->what, sizeof(out->what), "an array of %u %s", a->nelems,
			 et && btf_is_composite(et) ? "structs" :
			 et && btf_is_ptr(et)	    ? "pointers" :
						      "numbers");
		return 0;
	}
	case BTF_KIND_FLOAT:
		snprintf(out->what, sizeof(out->what), "a floating-point number");
		return 0;
	case BTF_KIND_FUNC_PROTO:
		snprintf(out->what, sizeof(out->what), "a function");
		return 0;
	default:
		return 0;
	}
}

/* Names of the members of id, anonymous members looked through, appended to v. */
static void collect_members(const struct kbtf *k, uint32_t id, const char **v, int *n, int max,
			    int depth)
{
	const struct btf_type *t = btf__type_by_id(k->btf, id);
	const struct btf_member *m;

	if (!t || !btf_is_composite(t) || depth > 16)
		return;
	m = btf_members(t);
	for (int i = 0; i < btf_vlen(t) && *n < max; i++) {
		const char *name = btf__name_by_offset(k->btf, m[i].name_off);

		if (name && *name) {
			v[(*n)++] = name;
		} else if (is_anon_composite_member(k->btf, &m[i])) {
			uint32_t sub;

			skip_mods(k->btf, m[i].type, &sub);
			collect_members(k, sub, v, n, max, depth + 1);
		}
	}
}

#define MAX_LISTED 1024

int kbtf_near_members(struct kbtf *k, uint32_t id, const char *name, const char **out, int max)
{
	const char **v = calloc(MAX_LISTED, sizeof(*v));
	int n = 0, r;

	if (!v)
		return 0;
	collect_members(k, id, v, &n, MAX_LISTED, 0);
	r = diag_near(name, v, n, out, max);
	free(v);
	return r;
}

void kbtf_list_members(struct kbtf *k, uint32_t id, char *buf, size_t sz)
{
	const char **v = calloc(MAX_LISTED, sizeof(*v));
	size_t off = 0;
	int n = 0;

	if (sz)
		buf[0] = 0;
	if (!v || sz < 8) {
		free(v);
		return;
	}
	collect_members(k, id, v, &n, MAX_LISTED, 0);
	for (int i = 0; i < n; i++) {
		size_t len = strlen(v[i]) + (i ? 2 : 0);

		if (off + len + 5 > sz) {
			snprintf(buf + off, sz - off, "%s...", i ? ", " : "");
			break;
		}
		off += (size_t)snprintf(buf + off, sz - off, "%s%s", i ? ", " : "", v[i]);
	}
	free(v);
}

static bool hint_in(struct kbtf *k, uint32_t id, const char *name, int depth, char *buf, size_t sz)
{
	const struct btf_type *t = btf__type_by_id(k->btf, id);
	const struct btf_member *m;

	if (!t || !btf_is_composite(t) || depth > 2)
		return false;
	m = btf_members(t);
	for (int i = 0; i < btf_vlen(t); i++) {
		const char *mn = btf__name_by_offset(k->btf, m[i].name_off);
		const struct btf_type *mt;
		size_t len = strlen(buf);
		uint32_t sub;

		mt = skip_mods(k->btf, m[i].type, &sub);
		if (!mt || !btf_is_composite(mt))
			continue;
		if (mn && *mn) {
			/* a named embedded struct: does C find `name` in it? */
			const char **v = calloc(MAX_LISTED, sizeof(*v));
			bool found = false;
			int n = 0;

			if (!v)
				return false;
			snprintf(buf + len, sz - len, "%s%s", len ? "." : "", mn);
			collect_members(k, sub, v, &n, MAX_LISTED, 0);
			for (int j = 0; j < n && !found; j++)
				found = strcmp(v[j], name) == 0;
			free(v);
			if (found)
				return true;
		}
		if (hint_in(k, sub, name, depth + 1, buf, sz))
			return true;
		buf[len] = 0;
	}
	return false;
}

bool kbtf_member_hint(struct kbtf *k, uint32_t id, const char *name, char *buf, size_t sz)
{
	if (sz)
		buf[0] = 0;
	return sz > 1 && hint_in(k, id, name, 0, buf, sz);
}

/* ---------------------------------------------------------------- emission */

static int emit_named(struct kbtf *k, FILE *out, uint32_t id, uint8_t *done);

static const char *int_cname(uint32_t size, bool sgn)
{
	switch (size) {
	case 1:
		return sgn ? "__s8" : "__u8";
	case 2:
		return sgn ? "__s16" : "__u16";
	case 4:
		return sgn ? "__s32" : "__u32";
	default:
		return sgn ? "__s64" : "__u64";
	}
}

/* Defines the named structs that marked members of id embed (not point to), first. */
static int emit_deps(struct kbtf *k, FILE *out, uint32_t id, uint8_t *done, int depth)
{
	const struct btf_type *t = btf__type_by_id(k->btf, id);
	const struct btf_member *m = btf_members(t);

	if (depth > 16)
		return -ELOOP;
	for (int i = 0; i < btf_vlen(t); i++) {
		const struct btf_type *mt;
		uint32_t sub;
		int rc;

		if (!marked(k, id, (uint32_t)i))
			continue;
		mt = skip_mods(k->btf, m[i].type, &sub);
		if (!mt || !btf_is_composite(mt))
			continue;
		rc = mt->name_off ? emit_named(k, out, sub, done) :
				    emit_deps(k, out, sub, done, depth + 1);
		if (rc)
			return rc;
	}
	return 0;
}

static void indent(FILE *out, int n)
{
	for (int i = 0; i < n; i++)
		fputc('\t', out);
}

static void emit_members(struct kbtf *k, FILE *out, uint32_t id, int depth)
{
	const struct btf_type *t = btf__type_by_id(k->btf, id);
	const struct btf_member *m = btf_members(t);
	char buf[160];

	for (int i = 0; i < btf_vlen(t); i++) {
		const char *name = btf__name_by_offset(k->btf, m[i].name_off);
		const struct btf_type *mt;
		uint32_t sub;

		if (!marked(k, id, (uint32_t)i))
			continue;
		if (!name)
			name = "";
		mt = skip_mods(k->btf, m[i].type, &sub);
		if (!mt)
			continue;
		indent(out, depth + 1);
		if (btf_is_composite(mt) && !mt->name_off) {
			/* anonymous: nested inline, as the kernel's C has it */
			fprintf(out, "%s __attribute__((preserve_access_index)) {\n",
				btf_is_union(mt) ? "union" : "struct");
			emit_members(k, out, sub, depth + 1);
			indent(out, depth + 1);
			fprintf(out, "}%s%s;\n", *name ? " " : "", name);
		} else if (btf_is_composite(mt)) {
			fprintf(out, "%s %s;\n", kbtf_cname(k, sub, buf, sizeof(buf)), name);
		} else if (btf_is_ptr(mt)) {
			fprintf(out, "void *%s;\n", name);
		} else if (btf_is_enum(mt) || btf_is_enum64(mt)) {
			fprintf(out, "enum { weft_enum%d___wq } %s;\n", k->nenums++, name);
		} else if (btf_is_array(mt)) {
			fprintf(out, "char %s[%u];\n", name, btf_array(mt)->nelems);
		} else {
			fprintf(out, "%s %s;\n",
				int_cname(mt->size, btf_is_int(mt) && (btf_int_encoding(mt) &
								       BTF_INT_SIGNED)),
				name);
		}
	}
}

static int emit_named(struct kbtf *k, FILE *out, uint32_t id, uint8_t *done)
{
	const struct btf_type *t = btf__type_by_id(k->btf, id);
	char buf[160];
	int rc;

	if (done[id])
		return 0;
	done[id] = 1;
	rc = emit_deps(k, out, id, done, 0);
	if (rc)
		return rc;
	kbtf_cname(k, id, buf, sizeof(buf));
	/* "struct sock___wq" -> struct __attribute__((...)) sock___wq */
	fprintf(out, "%s __attribute__((preserve_access_index)) %s {\n",
		btf_is_union(t) ? "union" : "struct", strchr(buf, ' ') + 1);
	emit_members(k, out, id, 0);
	fputs("};\n", out);
	return 0;
}

int kbtf_emit(struct kbtf *k, FILE *out)
{
	uint32_t n;
	uint8_t *done;
	int rc = 0;

	if (!k || !k->nmarks)
		return 0;
	n = btf__type_cnt(k->btf);
	done = calloc(n, 1);
	if (!done)
		return -ENOMEM;
	fputs("/* kernel structs the query reads (BTF, CO-RE: libbpf relocates every offset) */\n",
	      out);
	k->nenums = 0;
	for (size_t i = 0; i < k->nmarks && !rc; i++) {
		const struct btf_type *t = btf__type_by_id(k->btf, k->marks[i].id);

		if (t && t->name_off && has_marks(k, k->marks[i].id))
			rc = emit_named(k, out, k->marks[i].id, done);
	}
	free(done);
	return rc;
}
