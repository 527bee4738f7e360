// SPDX-License-Identifier: Apache-2.0
/*
 * The table of one window's groups as mergeable states (agent/result.h): canonical keys, the
 * hash table, folding kernel entries in, the merge, and the wire form of groups.  Both the
 * agent (windows, `for` across windows) and the aggregator (the cluster's merge) use it;
 * printing is agent/output.c's.
 *
 * Canonical keys.  A kernel key means something only on the host and in the window it was
 * read in (stack ids, addresses, attach cookies), so each group is keyed by a canonical byte
 * string instead: for every key column, in plan key order, either
 *     'i' + 8 bytes little-endian int64                (int, uint, hex, bool)
 *     's' + 4 bytes little-endian length + the bytes   (str, stacks, symbols, probe, host)
 * Text is what the resolver made of the kernel value (or a stable fallback when it has no
 * callback or fails).  Equal canonical keys are the same group on any host, in any window;
 * that is what makes agent_table_merge() the cluster's merge.
 *
 * The table is an open-addressing hash map from canonical key to a group; a group owns one
 * allocation holding its mergeable states and its key bytes.  Aggregates that share a kernel
 * sketch (quantiles of one expression) share one state too ("slots"): the state is folded
 * once and finalized once per quantile.  The table never holds more than max_groups groups;
 * a group that does not fit is counted in `overflow` and reported with the window.
 *
 * Must never: trust key or value bytes beyond the plan's layout, trust a key or state that
 * came from the wire before all of them are checked, or drop a group without counting it.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include "agent/result.h"
#include "agent/table_int.h"
#include "kernel/aggstate.h"
#include "kernel/weft_abi.h"
#include "weft.pb-c.h"

#define CK_INT 'i'
#define CK_TEXT 's'
#define TABLE_DEFAULT_GROUPS 40960u
#define TABLE_MAX_GROUPS (1u << 24)

/* ---- slot values: kernel bytes -> typed values ---- */

static int64_t load_s64(const uint8_t *b)
{
	int64_t v;

	memcpy(&v, b, sizeof(v)); /* host order: the kernel wrote it on this host */
	return v;
}

bool agent_render_is_text(enum render r)
{
	return r == RENDER_STR || r == RENDER_USTACK || r == RENDER_KSTACK || r == RENDER_USYM ||
	       r == RENDER_KSYM || r == RENDER_PROBE || r == RENDER_HOST ||
	       agent_names_is_text(r) || r == RENDER_INET;
}

/* The kernel bytes a slot of this render needs at least. */
static uint32_t render_min_size(enum render r)
{
	switch (r) {
	case RENDER_STR:
		return 1;
	case RENDER_USTACK:
	case RENDER_USYM:
		return 16;
	case RENDER_HOST:
		return 0;
	case RENDER_INET:
		return WEFT_INET_SIZE;
	default:
		return 8;
	}
}

bool agent_slot_valid(const struct plan_slot *s, uint32_t limit)
{
	if ((unsigned)s->render >= RENDER__COUNT)
		return false;
	if (s->render == RENDER_HOST)
		return true; /* no kernel bytes, whatever `kernel` says */
	if (!s->kernel || s->size < render_min_size(s->render))
		return false;
	return (uint64_t)s->offset + s->size <= limit;
}

static void host_name(const struct agent_resolver *r, struct sbuf *txt)
{
	char buf[256];

	if (r && r->host) {
		sb_puts(txt, r->host);
		return;
	}
	if (gethostname(buf, sizeof(buf)) != 0)
		snprintf(buf, sizeof(buf), "unknown");
	buf[sizeof(buf) - 1] = 0;
	sb_puts(txt, buf);
}

/* Take a resolver's malloc'd answer; false if there was none. */
static bool take(struct sbuf *txt, char *s)
{
	if (!s)
		return false;
	sb_puts(txt, s);
	free(s);
	return true;
}

/* An ntop() value (kernel/weft_abi.h: the family, then the address at WEFT_INET_ADDR) as
 * text: inet_ntop()'s, which writes IPv6 as RFC 5952 does (::1, ::ffff:127.0.0.1). */
static void inet_text(const uint8_t *b, struct sbuf *txt)
{
	char buf[INET6_ADDRSTRLEN];
	uint16_t family;

	memcpy(&family, b, sizeof(family));
	if (family == WEFT_AF_INET || family == WEFT_AF_INET6) {
		if (inet_ntop(family == WEFT_AF_INET ? AF_INET : AF_INET6, b + WEFT_INET_ADDR, buf,
			      sizeof(buf)))
			sb_puts(txt, buf);
		return;
	}
	if (family == 0)
		sb_puts(txt, "[no address]");
	else
		sb_printf(txt, "[family %u]", family);
}

void agent_slot_value(const struct plan *p, const struct plan_slot *s, const uint8_t *b,
		      const struct agent_resolver *r, struct sbuf *txt, struct kv *kv)
{
	size_t start = txt->len;
	bool has_int =
		s->render != RENDER_HOST && s->render != RENDER_STR && s->render != RENDER_INET;
	int64_t v = has_int ? load_s64(b) : 0; /* agent_slot_valid(): integer slots have 8 bytes */
	int64_t pid =
		(s->render == RENDER_USTACK || s->render == RENDER_USYM) ? load_s64(b + 8) : 0;

	memset(kv, 0, sizeof(*kv));
	kv->text = agent_render_is_text(s->render);
	switch (s->render) {
	case RENDER_STR:
		sb_put(txt, b, strnlen((const char *)b, s->size));
		break;
	case RENDER_USTACK:
	case RENDER_KSTACK: {
		bool user = s->render == RENDER_USTACK;

		if (v >= 0 && r && r->stack &&
		    take(txt, r->stack(r->ctx, v, user, user ? (uint32_t)pid : 0)))
			break;
		if (v < 0)
			sb_puts(txt, "[no stack]");
		else
			sb_printf(txt, "[%s %" PRId64 "]", user ? "ustack" : "kstack", v);
		break;
	}
	case RENDER_USYM:
		if (!(r && r->usym && take(txt, r->usym(r->ctx, (uint64_t)v, (uint32_t)pid))))
			sb_printf(txt, "0x%" PRIx64, (uint64_t)v);
		break;
	case RENDER_KSYM:
		if (!(r && r->ksym && take(txt, r->ksym(r->ctx, (uint64_t)v))))
			sb_printf(txt, "0x%" PRIx64, (uint64_t)v);
		break;
	case RENDER_PROBE:
		/* the cookie comes from the kernel: check it before it indexes anything */
		if (v >= 0 && v < p->nattach && p->attach)
			sb_put(txt, p->attach[v].target.name,
			       strnlen(p->attach[v].target.name, sizeof(p->attach[v].target.name)));
		else
			sb_printf(txt, "[probe %" PRIu64 "]", (uint64_t)v);
		break;
	case RENDER_HOST:
		host_name(r, txt);
		break;
	case RENDER_INET:
		inet_text(b, txt);
		break;
	case RENDER_BOOL:
		kv->i = v != 0;
		return;
	case RENDER_SYSNAME:
	case RENDER_SIGNAME:
	case RENDER_ERRNAME:
	case RENDER_ENUM:
		agent_names_text(s, v, txt);
		break;
	case RENDER_WALLTIME:
		kv->i = agent_names_walltime(v);
		return;
	default:
		kv->i = v;
		return;
	}
	kv->i = (int64_t)start; /* offset into txt, made a pointer by the caller */
	kv->len = (uint32_t)(txt->len - start);
}

void agent_kv_fix(struct kv *kv, int n, const struct sbuf *txt)
{
	for (int i = 0; i < n; i++)
		if (kv[i].text) {
			kv[i].s = txt->p ? txt->p + kv[i].i : "";
			kv[i].i = 0;
		}
}

/* ---- the table ---- */

struct agg_slot {
	struct agg_spec spec;
	uint32_t koff; /* in the kernel value */
	size_t soff; /* in the group's states */
};

struct group {
	uint64_t hash;
	uint32_t klen;
	uint8_t *key; /* klen bytes, in this allocation after the states */
	uint64_t states[]; /* t->state_bytes bytes, 8-aligned */
};

/* The hash beside the group: probes that miss never touch the group itself. */
struct map_slot {
	uint64_t hash;
	struct group *g;
};

struct agent_table {
	const struct plan *p; /* not owned: must outlive the table */
	uint32_t max_groups;
	bool kernel_keys; /* some key has kernel bytes (else key may be NULL) */
	struct agg_slot *slots;
	int nslots;
	int *agg_slot; /* naggs: aggregate -> slot */
	size_t state_bytes;
	struct group **groups;
	size_t ngroups, cap;
	struct map_slot *map; /* open addressing, linear probing; g NULL = empty */
	size_t mapcap; /* power of two, > 2 * ngroups */
	uint64_t overflow;
};

static struct agg_spec spec_of(const struct plan_agg *a)
{
	struct agg_spec s = {
		.kind = a->spec.kind,
		.lo = a->spec.lo,
		.hi = a->spec.hi,
		.step = a->spec.step,
		.q = a->spec.q,
	};

	return s;
}

/* A plan this module can read without going out of bounds anywhere. */
static bool plan_valid_aggregating(const struct plan *p)
{
	if (!p || !p->aggregating || p->nkeys < 0 || p->naggs < 0 || p->ncols < 0)
		return false;
	if ((p->nkeys && !p->keys) || (p->naggs && !p->aggs) || (p->ncols && !p->cols) ||
	    (p->nattach && !p->attach) || p->nattach < 0)
		return false;
	for (int i = 0; i < p->nkeys; i++)
		if (!agent_slot_valid(&p->keys[i], p->key_size))
			return false;
	for (int i = 0; i < p->naggs; i++) {
		struct agg_spec s = spec_of(&p->aggs[i]);
		size_t ks = agg_kernel_value_size(&s);

		if (!ks || (uint64_t)p->aggs[i].offset + ks > p->value_size)
			return false;
	}
	for (int i = 0; i < p->ncols; i++) {
		const struct plan_column *c = &p->cols[i];

		if (c->idx < 0 || c->idx >= (c->is_agg ? p->naggs : p->nkeys))
			return false;
	}
	return true;
}

struct agent_table *agent_table_new(const struct plan *p, uint32_t max_groups)
{
	struct agent_table *t;
	uint64_t mg = max_groups;

	if (!plan_valid_aggregating(p)) {
		errno = EINVAL;
		return NULL;
	}
	t = calloc(1, sizeof(*t));
	if (!t)
		goto out_nomem;
	t->p = p;
	if (!mg)
		mg = p->max_groups ? (uint64_t)p->max_groups * 4 : TABLE_DEFAULT_GROUPS;
	t->max_groups = (uint32_t)(mg > TABLE_MAX_GROUPS ? TABLE_MAX_GROUPS : mg);
	for (int i = 0; i < p->nkeys; i++)
		t->kernel_keys |= p->keys[i].render != RENDER_HOST;
	t->slots = calloc((size_t)p->naggs + 1, sizeof(*t->slots));
	t->agg_slot = calloc((size_t)p->naggs + 1, sizeof(*t->agg_slot));
	if (!t->slots || !t->agg_slot)
		goto out_free;
	for (int i = 0; i < p->naggs; i++) {
		struct agg_spec s = spec_of(&p->aggs[i]);
		int slot = -1;

		/* quantiles of one expression read one kernel sketch: one state for them all */
		for (int j = 0; j < t->nslots && s.kind == AGG_QUANTILE; j++)
			if (t->slots[j].spec.kind == AGG_QUANTILE &&
			    t->slots[j].koff == p->aggs[i].offset)
				slot = j;
		if (slot < 0) {
			slot = t->nslots++;
			t->slots[slot].spec = s;
			t->slots[slot].koff = p->aggs[i].offset;
			t->slots[slot].soff = t->state_bytes;
			t->state_bytes += (agg_state_size(&s) + 7) & ~(size_t)7;
		}
		t->agg_slot[i] = slot;
	}
	return t;

out_free:
	agent_table_free(t);
out_nomem:
	errno = ENOMEM;
	return NULL;
}

void agent_table_clear(struct agent_table *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->ngroups; i++)
		free(t->groups[i]);
	free(t->groups);
	free(t->map);
	t->groups = NULL;
	t->map = NULL;
	t->ngroups = t->cap = t->mapcap = 0;
	t->overflow = 0;
}

void agent_table_free(struct agent_table *t)
{
	if (!t)
		return;
	agent_table_clear(t);
	free(t->slots);
	free(t->agg_slot);
	free(t);
}

size_t agent_table_groups(const struct agent_table *t)
{
	return t ? t->ngroups : 0;
}

uint64_t agent_table_overflow(const struct agent_table *t)
{
	return t ? t->overflow : 0;
}

/* A word at a time (keys are tens of bytes: a byte-at-a-time hash was a tenth of the
 * aggregator's time), finished with a full avalanche so that the low bits index well. */
static uint64_t key_hash(const void *k, size_t len)
{
	const unsigned char *b = k;
	uint64_t h = 0x9e3779b97f4a7c15ULL ^ (len * 0xc2b2ae3d27d4eb4fULL);
	uint64_t v;

	for (; len >= 8; b += 8, len -= 8) {
		memcpy(&v, b, 8);
		h = (h ^ v) * 0xff51afd7ed558ccdULL;
		h ^= h >> 29;
	}
	if (len) {
		v = 0;
		memcpy(&v, b, len);
		h = (h ^ v) * 0xc4ceb9fe1a85ec53ULL;
	}
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdULL;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ULL;
	return h ^ (h >> 33);
}

static int map_grow(struct agent_table *t)
{
	size_t cap = t->mapcap ? t->mapcap * 2 : 64;
	struct map_slot *m = calloc(cap, sizeof(*m));

	if (!m)
		return -ENOMEM;
	for (size_t i = 0; i < t->ngroups; i++) {
		size_t j = t->groups[i]->hash & (cap - 1);

		while (m[j].g)
			j = (j + 1) & (cap - 1);
		m[j].hash = t->groups[i]->hash;
		m[j].g = t->groups[i];
	}
	free(t->map);
	t->map = m;
	t->mapcap = cap;
	return 0;
}

static struct group *table_find(const struct agent_table *t, const void *key, size_t klen,
				uint64_t h)
{
	if (!t->mapcap)
		return NULL;
	for (size_t j = h & (t->mapcap - 1); t->map[j].g; j = (j + 1) & (t->mapcap - 1)) {
		struct group *g = t->map[j].g;

		if (t->map[j].hash == h && g->klen == klen && memcmp(g->key, key, klen) == 0)
			return g;
	}
	return NULL;
}

/* The group of key, inserted (empty) if new.  NULL with *rc = 0 when the table is full
 * (counted in overflow), or -ENOMEM. */
static struct group *table_get(struct agent_table *t, const void *key, size_t klen, int *rc)
{
	uint64_t h = key_hash(key, klen);
	struct group *g = table_find(t, key, klen, h);
	size_t j;

	*rc = 0;
	if (g)
		return g;
	if (t->ngroups >= t->max_groups || klen > UINT32_MAX) {
		t->overflow++;
		return NULL;
	}
	if ((t->ngroups + 1) * 2 > t->mapcap && (*rc = map_grow(t)) != 0)
		return NULL;
	if (t->ngroups == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 64;
		struct group **gs = realloc(t->groups, cap * sizeof(*gs));

		if (!gs) {
			*rc = -ENOMEM;
			return NULL;
		}
		t->groups = gs;
		t->cap = cap;
	}
	g = calloc(1, sizeof(*g) + t->state_bytes + klen + 1);
	if (!g) {
		*rc = -ENOMEM;
		return NULL;
	}
	g->hash = h;
	g->klen = (uint32_t)klen;
	g->key = (uint8_t *)g->states + t->state_bytes;
	if (klen)
		memcpy(g->key, key, klen);
	for (j = h & (t->mapcap - 1); t->map[j].g; j = (j + 1) & (t->mapcap - 1))
		;
	t->groups[t->ngroups++] = g;
	t->map[j].hash = h;
	t->map[j].g = g;
	return g;
}

/* The canonical key of a kernel key (see the top of the file) into ck. */
static int key_canon(const struct plan *p, const uint8_t *key, const struct agent_resolver *r,
		     struct sbuf *ck)
{
	struct sbuf txt = { 0 };

	for (int k = 0; k < p->nkeys; k++) {
		const struct plan_slot *s = &p->keys[k];
		struct kv kv;

		txt.len = 0;
		agent_slot_value(p, s, s->render == RENDER_HOST ? NULL : key + s->offset, r, &txt,
				 &kv);
		if (kv.text) {
			uint32_t n = kv.len;
			uint8_t len[4] = { (uint8_t)n, (uint8_t)(n >> 8), (uint8_t)(n >> 16),
					   (uint8_t)(n >> 24) };

			sb_putc(ck, CK_TEXT);
			sb_put(ck, len, sizeof(len));
			if (n)
				sb_put(ck, txt.p + (size_t)kv.i, n);
		} else {
			uint64_t u = (uint64_t)kv.i;
			uint8_t le[8];

			for (int i = 0; i < 8; i++)
				le[i] = (uint8_t)(u >> (8 * i));
			sb_putc(ck, CK_INT);
			sb_put(ck, le, sizeof(le));
		}
	}
	if (ck->len == 0)
		sb_reserve(ck, 1); /* a 1-group key is empty, but ck->p must exist */
	sb_free(&txt);
	return ck->oom || txt.oom ? -ENOMEM : 0;
}

/* Decode a canonical key (which this module wrote) into nkeys values pointing into it. */
static int key_decode(const struct plan *p, const uint8_t *ck, size_t len, struct kv *out)
{
	size_t off = 0;

	for (int k = 0; k < p->nkeys; k++) {
		memset(&out[k], 0, sizeof(out[k]));
		if (off >= len)
			return -EINVAL;
		if (ck[off] == CK_INT && off + 9 <= len) {
			uint64_t u = 0;

			for (int i = 0; i < 8; i++)
				u |= (uint64_t)ck[off + 1 + i] << (8 * i);
			out[k].i = (int64_t)u;
			off += 9;
		} else if (ck[off] == CK_TEXT && off + 5 <= len) {
			uint32_t n = (uint32_t)ck[off + 1] | (uint32_t)ck[off + 2] << 8 |
				     (uint32_t)ck[off + 3] << 16 | (uint32_t)ck[off + 4] << 24;

			if (off + 5 + (uint64_t)n > len)
				return -EINVAL;
			out[k].text = true;
			out[k].s = (const char *)ck + off + 5;
			out[k].len = n;
			off += 5 + (size_t)n;
		} else {
			return -EINVAL;
		}
	}
	return off == len ? 0 : -EINVAL;
}

int agent_table_add_kernel(struct agent_table *t, const void *key, const void *const *cpu_vals,
			   unsigned int ncpu, const struct agent_resolver *r)
{
	struct sbuf ck = { 0 };
	struct group *g;
	int rc;

	if (!t || (ncpu && !cpu_vals) || (!key && t->kernel_keys))
		return -EINVAL;
	for (unsigned int c = 0; c < ncpu; c++)
		if (!cpu_vals[c])
			return -EINVAL;
	rc = key_canon(t->p, key, r, &ck);
	if (rc)
		goto out;
	g = table_get(t, ck.p, ck.len, &rc);
	if (!g)
		goto out; /* full (counted) or -ENOMEM */
	for (int s = 0; s < t->nslots && !rc; s++) {
		const struct agg_slot *sl = &t->slots[s];

		for (unsigned int c = 0; c < ncpu && !rc; c++)
			rc = agg_state_from_kernel(&sl->spec, (uint8_t *)g->states + sl->soff,
						   (const uint8_t *)cpu_vals[c] + sl->koff);
	}
out:
	sb_free(&ck);
	return rc;
}

/* Same key columns and aggregates: states and canonical keys mean the same thing. */
static bool table_compatible(const struct agent_table *a, const struct agent_table *b)
{
	const struct plan *p = a->p, *q = b->p;

	if (p == q)
		return true;
	if (p->nkeys != q->nkeys || p->naggs != q->naggs || a->state_bytes != b->state_bytes ||
	    a->nslots != b->nslots)
		return false;
	for (int i = 0; i < p->nkeys; i++)
		if (p->keys[i].render != q->keys[i].render)
			return false;
	for (int i = 0; i < p->naggs; i++) {
		const struct agg_spec *x = &p->aggs[i].spec, *y = &q->aggs[i].spec;

		if (x->kind != y->kind || x->lo != y->lo || x->hi != y->hi || x->step != y->step ||
		    x->q != y->q || a->agg_slot[i] != b->agg_slot[i])
			return false;
	}
	return true;
}

int agent_table_merge(struct agent_table *dst, const struct agent_table *src)
{
	int rc = 0;

	if (!dst || !src || dst == src || !table_compatible(dst, src))
		return -EINVAL;
	for (size_t i = 0; i < src->ngroups && !rc; i++) {
		const struct group *sg = src->groups[i];
		struct group *g = table_get(dst, sg->key, sg->klen, &rc);

		if (!g)
			continue; /* full: counted in dst->overflow; or rc = -ENOMEM */
		for (int s = 0; s < dst->nslots && !rc; s++)
			rc = agg_state_merge(&dst->slots[s].spec,
					     (uint8_t *)g->states + dst->slots[s].soff,
					     (const uint8_t *)sg->states + dst->slots[s].soff);
	}
	dst->overflow += src->overflow;
	return rc;
}

bool agent_table_equal(const struct agent_table *a, const struct agent_table *b)
{
	if (!a || !b || !table_compatible(a, b) || a->ngroups != b->ngroups)
		return false;
	for (size_t i = 0; i < a->ngroups; i++) {
		const struct group *g = a->groups[i];
		const struct group *h = table_find(b, g->key, g->klen, g->hash);

		if (!h || memcmp(g->states, h->states, a->state_bytes) != 0)
			return false;
	}
	return true;
}

/* ---- the wire form (agent/weft.proto Group) ---- */

void agent_groups_free(Weft__Group **groups, size_t n)
{
	if (!groups)
		return;
	for (size_t i = 0; i < n; i++)
		free(groups[i]); /* one allocation per group: struct, states, key, bytes */
	free(groups);
}

int agent_table_to_groups(const struct agent_table *t, Weft__Group ***out, size_t *n)
{
	const struct plan *p;
	Weft__Group **gs;
	size_t enc_max = 0;

	if (!t || !out || !n)
		return -EINVAL;
	*out = NULL;
	*n = 0;
	p = t->p;
	for (int a = 0; a < p->naggs; a++) {
		struct agg_spec s = spec_of(&p->aggs[a]);

		enc_max += agg_state_encoded_max(&s);
	}
	gs = calloc(t->ngroups + 1, sizeof(*gs));
	if (!gs)
		return -ENOMEM;
	for (size_t i = 0; i < t->ngroups; i++) {
		const struct group *g = t->groups[i];
		size_t states = (size_t)p->naggs * sizeof(ProtobufCBinaryData);
		Weft__Group *w = malloc(sizeof(*w) + states + g->klen + enc_max);
		uint8_t *data;

		if (!w) {
			agent_groups_free(gs, i);
			return -ENOMEM;
		}
		weft__group__init(w);
		w->n_states = (size_t)p->naggs;
		w->states = (ProtobufCBinaryData *)(w + 1);
		data = (uint8_t *)w->states + states;
		memcpy(data, g->key, g->klen);
		w->key.data = data;
		w->key.len = g->klen;
		data += g->klen;
		for (int a = 0; a < p->naggs; a++) {
			struct agg_spec s = spec_of(&p->aggs[a]);
			const uint8_t *st =
				(const uint8_t *)g->states + t->slots[t->agg_slot[a]].soff;
			ssize_t len = agg_state_encode(&s, st, data, agg_state_encoded_max(&s));

			if (len < 0) {
				free(w);
				agent_groups_free(gs, i);
				return -EINVAL;
			}
			w->states[a].data = data;
			w->states[a].len = (size_t)len;
			data += len;
		}
		gs[i] = w;
	}
	*out = gs;
	*n = t->ngroups;
	return 0;
}

/* A canonical key from elsewhere: well formed, and one value per key column of this plan's
 * type (text where the plan renders text, an integer elsewhere, 0 or 1 for a bool). */
static int wire_key_check(const struct plan *p, const ProtobufCBinaryData *key, struct kv *kv)
{
	if (key->len && !key->data)
		return -EINVAL;
	if (key->len > UINT32_MAX || key_decode(p, key->data, key->len, kv))
		return -EINVAL;
	for (int k = 0; k < p->nkeys; k++) {
		if (kv[k].text != agent_render_is_text(p->keys[k].render))
			return -EINVAL;
		if (p->keys[k].render == RENDER_BOOL && (uint64_t)kv[k].i > 1)
			return -EINVAL;
	}
	return 0;
}

/*
 * The states of a wire group into st (the table's slot layout).  first[a] tells whether
 * aggregate a is the first of its slot; the others (quantiles of one sketch) must carry the
 * very same state, decoded into tmp to compare.
 */
static int wire_states_decode(const struct agent_table *t, const Weft__Group *w, const bool *first,
			      uint8_t *st, uint8_t *tmp)
{
	const struct plan *p = t->p;

	if (w->n_states != (size_t)p->naggs || (w->n_states && !w->states))
		return -EINVAL;
	for (int a = 0; a < p->naggs; a++) {
		const struct agg_slot *sl = &t->slots[t->agg_slot[a]];
		const ProtobufCBinaryData *b = &w->states[a];

		if (b->len && !b->data)
			return -EINVAL;
		if (first[a]) {
			if (agg_state_decode(&sl->spec, st + sl->soff, b->data, b->len))
				return -EINVAL;
		} else if (agg_state_decode(&sl->spec, tmp, b->data, b->len) ||
			   memcmp(tmp, st + sl->soff, agg_state_size(&sl->spec)) != 0) {
			return -EINVAL;
		}
	}
	return 0;
}

int agent_table_add_groups(struct agent_table *t, Weft__Group *const *groups, size_t n)
{
	const struct plan *p;
	size_t tmp_bytes = 8;
	struct kv *kv = NULL;
	uint8_t *st = NULL, *tmp = NULL;
	bool *first = NULL;
	int rc = 0;

	if (!t || (n && !groups))
		return -EINVAL;
	p = t->p;
	for (int s = 0; s < t->nslots; s++)
		if (agg_state_size(&t->slots[s].spec) > tmp_bytes)
			tmp_bytes = agg_state_size(&t->slots[s].spec);
	kv = calloc((size_t)p->nkeys + 1, sizeof(*kv));
	st = calloc(1, t->state_bytes + 8);
	tmp = calloc(1, tmp_bytes);
	first = calloc((size_t)p->naggs + 1, sizeof(*first));
	if (!kv || !st || !tmp || !first) {
		rc = -ENOMEM;
		goto out_free;
	}
	for (int a = 0; a < p->naggs; a++) {
		first[a] = true;
		for (int b = 0; b < a; b++)
			if (t->agg_slot[b] == t->agg_slot[a])
				first[a] = false;
	}
	/* everything is checked before anything is merged: a bad group refuses the lot */
	for (size_t i = 0; i < n; i++) {
		if (!groups[i] || wire_key_check(p, &groups[i]->key, kv) ||
		    wire_states_decode(t, groups[i], first, st, tmp)) {
			rc = -EINVAL;
			goto out_free;
		}
	}
	for (size_t i = 0; i < n && !rc; i++) {
		const Weft__Group *w = groups[i];
		const void *key = w->key.data ? (const void *)w->key.data : "";
		struct group *g = table_get(t, key, w->key.len, &rc);

		if (!g)
			continue; /* full (counted in overflow), or rc = -ENOMEM */
		rc = wire_states_decode(t, w, first, st, tmp);
		for (int s = 0; s < t->nslots && !rc; s++)
			rc = agg_state_merge(&t->slots[s].spec,
					     (uint8_t *)g->states + t->slots[s].soff,
					     st + t->slots[s].soff);
	}
out_free:
	free(kv);
	free(st);
	free(tmp);
	free(first);
	return rc;
}

/* ---- read by output (agent/table_int.h) ---- */

const struct plan *agent_table_plan(const struct agent_table *t)
{
	return t->p;
}

int agent_table_row(const struct agent_table *t, size_t i, struct kv *kv, struct agg_result *res)
{
	const struct plan *p = t->p;
	const struct group *g = t->groups[i];
	int rc = key_decode(p, g->key, g->klen, kv);

	for (int a = 0; a < p->naggs && !rc; a++) {
		struct agg_spec s = spec_of(&p->aggs[a]);

		rc = agg_state_final(&s, (const uint8_t *)g->states + t->slots[t->agg_slot[a]].soff,
				     &res[a]);
	}
	return rc;
}

int agent_table_row_ints(const struct agent_table *t, size_t i, int64_t *keys, int64_t *aggs,
			 bool *empty)
{
	const struct plan *p = t->p;
	struct kv *kv;
	struct agg_result *res;
	int rc;

	if (i >= agent_table_groups(t))
		return -EINVAL;
	kv = calloc((size_t)p->nkeys + 1, sizeof(*kv));
	res = calloc((size_t)p->naggs + 1, sizeof(*res));
	rc = kv && res ? agent_table_row(t, i, kv, res) : -ENOMEM;
	for (int k = 0; !rc && k < p->nkeys; k++) {
		if (kv[k].text)
			rc = -EINVAL;
		else
			keys[k] = kv[k].i;
	}
	for (int a = 0; !rc && a < p->naggs; a++) {
		if (!res[a].integer && !res[a].empty)
			rc = -EINVAL;
		aggs[a] = res[a].ival;
		empty[a] = res[a].empty;
	}
	for (int a = 0; res && a < p->naggs; a++)
		agg_result_release(&res[a]);
	free(kv);
	free(res);
	return rc;
}
