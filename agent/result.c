// SPDX-License-Identifier: Apache-2.0
/*
 * Results: the table of one window's groups, and how windows and stream rows are printed.
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
 * Printing finalizes every group, orders (plan order by, else deterministic: by key, or by
 * the one aggregate as bpftrace does), limits, and writes text or one JSON line
 * (docs/output.md).  Output order never depends on insertion order, so a merged table prints
 * exactly like a table built from all the inputs at once.
 *
 * Must never: trust key, value or record bytes beyond the plan's layout (a short record is
 * refused), index attach[] with an unchecked cookie, or drop a loss without reporting it.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "agent/result.h"
#include "kernel/aggstate.h"
#include "kernel/weft_abi.h"
#include "weft.pb-c.h"

#define CK_INT 'i'
#define CK_TEXT 's'
#define TABLE_DEFAULT_GROUPS 40960u
#define TABLE_MAX_GROUPS (1u << 24)

/* ---- growable byte buffer ---- */

struct sbuf {
	char *p;
	size_t len, cap;
	bool oom;
};

static bool sb_reserve(struct sbuf *b, size_t n)
{
	size_t cap;
	char *p;

	if (b->oom)
		return false;
	if (b->len + n + 1 <= b->cap)
		return true;
	cap = b->cap ? b->cap : 256;
	while (cap < b->len + n + 1)
		cap *= 2;
	p = realloc(b->p, cap);
	if (!p) {
		b->oom = true;
		return false;
	}
	b->p = p;
	b->cap = cap;
	return true;
}

static void sb_put(struct sbuf *b, const void *d, size_t n)
{
	if (!sb_reserve(b, n))
		return;
	memcpy(b->p + b->len, d, n);
	b->len += n;
	b->p[b->len] = 0;
}

static void sb_putc(struct sbuf *b, char c)
{
	sb_put(b, &c, 1);
}

static void sb_puts(struct sbuf *b, const char *s)
{
	sb_put(b, s, strlen(s));
}

__attribute__((format(printf, 2, 3))) static void sb_printf(struct sbuf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0 || !sb_reserve(b, (size_t)n))
		return;
	va_start(ap, fmt);
	vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
}

static void sb_free(struct sbuf *b)
{
	free(b->p);
	memset(b, 0, sizeof(*b));
}

/* ---- escaping ---- */

/* Length of the valid UTF-8 sequence at s (n bytes left), or 0 if it is not one. */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
	unsigned c = s[0];
	size_t need, i;

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		need = 1;
	else if (c >= 0xe0 && c <= 0xef)
		need = 2;
	else if (c >= 0xf0 && c <= 0xf4)
		need = 3;
	else
		return 0;
	if (n < need + 1)
		return 0;
	for (i = 1; i <= need; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	/* no overlong forms, no surrogates, nothing above U+10FFFF */
	if ((c == 0xe0 && s[1] < 0xa0) || (c == 0xed && s[1] > 0x9f) ||
	    (c == 0xf0 && s[1] < 0x90) || (c == 0xf4 && s[1] > 0x8f))
		return 0;
	return need + 1;
}

/* A JSON string literal: quotes, backslash and controls escaped, bad UTF-8 as U+FFFD. */
static void sb_json_str(struct sbuf *b, const char *s, size_t len)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t i = 0;

	sb_putc(b, '"');
	while (i < len) {
		unsigned c = u[i];
		size_t n;

		if (c == '"' || c == '\\') {
			sb_putc(b, '\\');
			sb_putc(b, (char)c);
			i++;
		} else if (c == '\n') {
			sb_puts(b, "\\n");
			i++;
		} else if (c == '\t') {
			sb_puts(b, "\\t");
			i++;
		} else if (c == '\r') {
			sb_puts(b, "\\r");
			i++;
		} else if (c < 0x20 || c == 0x7f) {
			sb_printf(b, "\\u%04x", c);
			i++;
		} else if ((n = utf8_seq(u + i, len - i)) > 0) {
			sb_put(b, u + i, n);
			i += n;
		} else {
			sb_puts(b, "\\ufffd");
			i++;
		}
	}
	sb_putc(b, '"');
}

/* Text for a terminal: control characters become C escapes, so a row stays one line. */
static void sb_text(struct sbuf *b, const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c == '\n')
			sb_puts(b, "\\n");
		else if (c == '\t')
			sb_puts(b, "\\t");
		else if (c < 0x20 || c == 0x7f)
			sb_printf(b, "\\x%02x", c);
		else
			sb_putc(b, (char)c);
	}
}

/* ---- slot values: kernel bytes -> typed values ---- */

/* A decoded value: an integer, or text (s, len) that lives in some buffer of the caller. */
struct kv {
	bool text;
	int64_t i;
	const char *s;
	uint32_t len;
};

static int64_t load_s64(const uint8_t *b)
{
	int64_t v;

	memcpy(&v, b, sizeof(v)); /* host order: the kernel wrote it on this host */
	return v;
}

static bool render_is_text(enum render r)
{
	return r == RENDER_STR || r == RENDER_USTACK || r == RENDER_KSTACK || r == RENDER_USYM ||
	       r == RENDER_KSYM || r == RENDER_PROBE || r == RENDER_HOST;
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
	default:
		return 8;
	}
}

/* Does slot s fit in `limit` kernel bytes, with the size its render needs? */
static bool slot_valid(const struct plan_slot *s, uint32_t limit)
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

/*
 * The value of slot s whose bytes start at b (already bounds-checked).  Text is appended to
 * txt, which the caller resets; kv->s then points into txt->p after the call completes (the
 * caller fixes it up, as txt may move).
 */
static void slot_value(const struct plan *p, const struct plan_slot *s, const uint8_t *b,
		       const struct agent_resolver *r, struct sbuf *txt, struct kv *kv)
{
	size_t start = txt->len;
	bool has_int = s->render != RENDER_HOST && s->render != RENDER_STR;
	int64_t v = has_int ? load_s64(b) : 0; /* slot_valid(): integer slots have 8 bytes */
	int64_t pid =
		(s->render == RENDER_USTACK || s->render == RENDER_USYM) ? load_s64(b + 8) : 0;

	memset(kv, 0, sizeof(*kv));
	kv->text = render_is_text(s->render);
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
	case RENDER_BOOL:
		kv->i = v != 0;
		return;
	default:
		kv->i = v;
		return;
	}
	kv->i = (int64_t)start; /* offset into txt, made a pointer by the caller */
	kv->len = (uint32_t)(txt->len - start);
}

/* After every slot_value() into txt: turn the recorded offsets into pointers. */
static void kv_fix(struct kv *kv, int n, const struct sbuf *txt)
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
		if (!slot_valid(&p->keys[i], p->key_size))
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
		slot_value(p, s, s->render == RENDER_HOST ? NULL : key + s->offset, r, &txt, &kv);
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
		if (kv[k].text != render_is_text(p->keys[k].render))
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

/* ---- finalizing and ordering ---- */

/* One group ready to print: its key values and one result per aggregate. */
struct prow {
	const struct group *g;
	struct kv *kv;
	struct agg_result *res;
};

struct order_ctx {
	const struct plan *p;
	const struct prow *rows;
	int key; /* key column to order by first, or -1 */
	bool desc;
};

static bool render_signed(enum render r)
{
	return r == RENDER_INT;
}

static int kv_cmp(enum render r, const struct kv *a, const struct kv *b)
{
	if (a->text != b->text)
		return a->text ? 1 : -1;
	if (a->text) {
		size_t n = a->len < b->len ? a->len : b->len;
		int c = n ? memcmp(a->s, b->s, n) : 0;

		if (c)
			return c < 0 ? -1 : 1;
		return a->len < b->len ? -1 : a->len > b->len;
	}
	if (render_signed(r))
		return a->i < b->i ? -1 : a->i > b->i;
	return (uint64_t)a->i < (uint64_t)b->i ? -1 : (uint64_t)a->i > (uint64_t)b->i;
}

/* By every key column in plan order, ascending: the deterministic order of groups. */
static int row_key_cmp(const struct plan *p, const struct prow *a, const struct prow *b)
{
	for (int k = 0; k < p->nkeys; k++) {
		int c = kv_cmp(p->keys[k].render, &a->kv[k], &b->kv[k]);

		if (c)
			return c;
	}
	return 0;
}

static int order_cmp(const void *x, const void *y, void *arg)
{
	const struct order_ctx *o = arg;
	const struct prow *a = &o->rows[*(const size_t *)x], *b = &o->rows[*(const size_t *)y];
	int c;

	if (o->key >= 0) {
		c = kv_cmp(o->p->keys[o->key].render, &a->kv[o->key], &b->kv[o->key]);
		if (c)
			return o->desc ? -c : c;
	}
	return row_key_cmp(o->p, a, b);
}

/* What `order by` an aggregate compares: NaN (sorted last) when it has no value. */
static double order_value(const struct agg_result *r)
{
	if (r->kind == AGG_HIST || r->kind == AGG_LHIST)
		return (double)r->n;
	if (r->empty)
		return NAN;
	if (r->integer)
		return (double)r->ival;
	if (r->kind == AGG_DISTINCT)
		return (double)r->ival;
	return r->value;
}

static bool is_hist(enum agg_kind k)
{
	return k == AGG_HIST || k == AGG_LHIST;
}

/* ---- cells ---- */

static void sb_double(struct sbuf *b, double v, bool json)
{
	double a = fabs(v);

	if (!isfinite(v))
		sb_puts(b, json ? "null" : (isnan(v) ? "nan" : v > 0 ? "inf" : "-inf"));
	else if (json)
		sb_printf(b, "%.15g", v);
	else if (a < 1e15 && v == floor(v))
		sb_printf(b, "%.0f", v);
	else if (a >= 1e15 || a < 0.01)
		sb_printf(b, "%.6g", v);
	else
		sb_printf(b, "%.2f", v);
}

/* An aggregate's value as a table cell or a JSON value (histograms: JSON only). */
static void sb_agg(struct sbuf *b, const struct agg_result *r, bool json)
{
	if (is_hist(r->kind)) {
		size_t first = SIZE_MAX, last = 0;
		bool comma = false;

		if (!json) {
			sb_printf(b, "%" PRIu64, r->n);
			return;
		}
		for (size_t i = 0; i < r->nbuckets; i++)
			if (r->buckets[i].count) {
				if (first == SIZE_MAX)
					first = i;
				last = i;
			}
		sb_puts(b, "{\"buckets\":[");
		for (size_t i = first; first != SIZE_MAX && i <= last; i++) {
			const struct agg_bucket *k = &r->buckets[i];

			sb_puts(b, comma ? ",{\"min\":" : "{\"min\":");
			if (k->open_below)
				sb_puts(b, "null");
			else
				sb_printf(b, "%" PRId64, k->min);
			sb_puts(b, ",\"max\":");
			if (k->open_above)
				sb_puts(b, "null");
			else
				sb_printf(b, "%" PRId64, k->max);
			sb_printf(b, ",\"count\":%" PRIu64 "}", k->count);
			comma = true;
		}
		sb_printf(b, "],\"count\":%" PRIu64 "}", r->n);
		return;
	}
	if (r->empty)
		sb_puts(b, json ? "null" : "-");
	else if (r->integer)
		sb_printf(b, "%" PRId64, r->ival);
	else if (r->kind == AGG_DISTINCT)
		sb_printf(b, "%" PRId64, r->ival);
	else
		sb_double(b, r->value, json);
}

/* A key or field value as a table cell or a JSON value. */
static void sb_kv(struct sbuf *b, enum render r, const struct kv *v, bool json)
{
	if (v->text) {
		if (json)
			sb_json_str(b, v->s, v->len);
		else
			sb_text(b, v->s, v->len);
		return;
	}
	switch (r) {
	case RENDER_INT:
		sb_printf(b, "%" PRId64, v->i);
		break;
	case RENDER_HEX:
		/* JSON numbers lose 64-bit addresses in most parsers: a string */
		sb_printf(b, json ? "\"0x%" PRIx64 "\"" : "0x%" PRIx64, (uint64_t)v->i);
		break;
	case RENDER_BOOL:
		sb_puts(b, v->i ? "true" : "false");
		break;
	default:
		sb_printf(b, "%" PRIu64, (uint64_t)v->i);
		break;
	}
}

/* ---- window output ---- */

static const char *const drop_names[WEFT_DROP_NR] = WEFT_DROP_NAMES;
static const char *const drop_units[WEFT_DROP_NR] = {
	[WEFT_DROP_MAP_FULL] = "events",
	[WEFT_DROP_RINGBUF_FULL] = "rows",
	[WEFT_DROP_SPAN_FULL] = "span starts",
	[WEFT_DROP_SPAN_EVICTED] = "span starts",
	[WEFT_DROP_SPAN_REPLACED] = "span starts",
	[WEFT_DROP_STACK] = "stacks",
	[WEFT_DROP_STR_FAULT] = "strings",
	[WEFT_DROP_STR_TRUNC] = "strings",
	[WEFT_DROP_SPAN_NO_START] =
		"span ends whose call began before attach or whose start was lost",
};

const char *agent_drop_what(unsigned int reason)
{
	return reason < WEFT_DROP_NR ? drop_units[reason] : "events";
}

static void sb_json_window(struct sbuf *b, const struct agent_table *t,
			   const struct agent_window_stats *st, const struct prow *rows,
			   const size_t *idx, size_t nshow)
{
	const struct plan *p = t->p;
	bool comma = false;

	sb_printf(b,
		  "{\"type\":\"window\",\"index\":%" PRIu64 ",\"start_ns\":%" PRIu64
		  ",\"end_ns\":%" PRIu64 ",\"columns\":[",
		  st->index, st->start_ns, st->end_ns);
	for (int c = 0; c < p->ncols; c++) {
		if (c)
			sb_putc(b, ',');
		sb_json_str(b, p->cols[c].name, strnlen(p->cols[c].name, sizeof(p->cols[c].name)));
	}
	sb_puts(b, "],\"rows\":[");
	for (size_t i = 0; i < nshow; i++) {
		const struct prow *r = &rows[idx[i]];

		sb_puts(b, i ? ",{" : "{");
		for (int c = 0; c < p->ncols; c++) {
			const struct plan_column *col = &p->cols[c];

			if (c)
				sb_putc(b, ',');
			sb_json_str(b, col->name, strnlen(col->name, sizeof(col->name)));
			sb_putc(b, ':');
			if (col->is_agg)
				sb_agg(b, &r->res[col->idx], true);
			else
				sb_kv(b, p->keys[col->idx].render, &r->kv[col->idx], true);
		}
		sb_putc(b, '}');
	}
	sb_printf(b, "],\"groups\":%zu,\"lost\":{", t->ngroups);
	for (int d = 0; d < WEFT_DROP_NR; d++)
		if (WEFT_DROP_IS_LOSS(d)) {
			sb_printf(b, "%s\"%s\":%" PRIu64, comma ? "," : "", drop_names[d],
				  st->drops[d]);
			comma = true;
		}
	sb_puts(b, "},\"notes\":{");
	comma = false;
	for (int d = 0; d < WEFT_DROP_NR; d++)
		if (!WEFT_DROP_IS_LOSS(d)) {
			sb_printf(b, "%s\"%s\":%" PRIu64, comma ? "," : "", drop_names[d],
				  st->drops[d]);
			comma = true;
		}
	sb_printf(b, "},\"misses\":%" PRIu64 ",\"overflow\":%" PRIu64 "}\n", st->misses,
		  t->overflow);
}

/* "lost: 12 events (map_full), ..." and "notes: ..." lines; nothing when all are zero. */
static void sb_losses(struct sbuf *b, const struct agent_window_stats *st, uint64_t overflow)
{
	bool any = false;

	for (int d = 0; d < WEFT_DROP_NR; d++)
		if (WEFT_DROP_IS_LOSS(d) && st->drops[d]) {
			sb_printf(b, "%s%" PRIu64 " %s (%s)", any ? ", " : "lost: ", st->drops[d],
				  drop_units[d], drop_names[d]);
			any = true;
		}
	if (st->misses) {
		sb_printf(b, "%s%" PRIu64 " events (bpf_recursion_miss)",
			  any ? ", " : "lost: ", st->misses);
		any = true;
	}
	if (overflow) {
		sb_printf(b, "%s%" PRIu64 " groups (agent_table_full)",
			  any ? ", " : "lost: ", overflow);
		any = true;
	}
	if (any)
		sb_putc(b, '\n');
	any = false;
	for (int d = 0; d < WEFT_DROP_NR; d++)
		if (!WEFT_DROP_IS_LOSS(d) && st->drops[d]) {
			sb_printf(b, "%s%" PRIu64 " %s (%s)", any ? ", " : "notes: ", st->drops[d],
				  drop_units[d], drop_names[d]);
			any = true;
		}
	if (any)
		sb_putc(b, '\n');
}

static void sb_window_title(struct sbuf *b, const struct agent_window_stats *st, size_t nshow,
			    size_t ngroups)
{
	sb_printf(b, "window %" PRIu64, st->index);
	if (st->end_ns) {
		struct timespec mono, real;
		char when[32] = "";

		clock_gettime(CLOCK_MONOTONIC, &mono);
		clock_gettime(CLOCK_REALTIME, &real);
		{
			/* the wall-clock time of the window's end, however late we print it */
			int64_t now = (int64_t)mono.tv_sec * 1000000000LL + mono.tv_nsec;
			int64_t ago = now - (int64_t)st->end_ns;
			time_t end = real.tv_sec - (time_t)((ago > 0 ? ago : 0) / 1000000000LL);
			struct tm tm;

			if (localtime_r(&end, &tm))
				strftime(when, sizeof(when), "%H:%M:%S", &tm);
		}
		sb_printf(b, " at %s", when);
		if (st->end_ns >= st->start_ns && st->start_ns)
			sb_printf(b, " (%.3fs)", (double)(st->end_ns - st->start_ns) / 1e9);
	}
	if (nshow < ngroups)
		sb_printf(b, ": %zu of %zu groups\n", nshow, ngroups);
	else
		sb_printf(b, ": %zu group%s\n", ngroups, ngroups == 1 ? "" : "s");
}

/* The title of a row's histogram: the column, then the row's key values. */
static void sb_hist_title(struct sbuf *b, const struct plan *p, const struct prow *r,
			  const char *col)
{
	bool first = true;

	sb_puts(b, col);
	for (int c = 0; c < p->ncols; c++) {
		if (p->cols[c].is_agg)
			continue;
		sb_puts(b, first ? "[" : ", ");
		sb_kv(b, p->keys[p->cols[c].idx].render, &r->kv[p->cols[c].idx], false);
		first = false;
	}
	if (!first)
		sb_putc(b, ']');
}

static bool col_numeric(const struct plan *p, const struct plan_column *c)
{
	return c->is_agg || !render_is_text(p->keys[c->idx].render);
}

static int print_text_window(const struct agent_table *t, const struct agent_window_stats *st,
			     const struct prow *rows, const size_t *idx, size_t nshow, FILE *out)
{
	const struct plan *p = t->p;
	struct sbuf b = { 0 }, *cells;
	size_t *width;
	int rc = 0, ntab = 0, last = -1;

	cells = calloc((size_t)p->ncols * (nshow + 1) + 1, sizeof(*cells));
	width = calloc((size_t)p->ncols + 1, sizeof(*width));
	if (!cells || !width) {
		rc = -ENOMEM;
		goto out_free;
	}
	/* which columns go into the table: all but histograms, drawn under each row */
	for (int c = 0; c < p->ncols; c++) {
		const struct plan_column *col = &p->cols[c];

		if (col->is_agg && is_hist(p->aggs[col->idx].spec.kind))
			continue;
		ntab++;
		last = c;
		width[c] = strnlen(col->name, sizeof(col->name));
		for (size_t i = 0; i < nshow; i++) {
			const struct prow *r = &rows[idx[i]];
			struct sbuf *cell = &cells[i * (size_t)p->ncols + c];

			if (col->is_agg)
				sb_agg(cell, &r->res[col->idx], false);
			else
				sb_kv(cell, p->keys[col->idx].render, &r->kv[col->idx], false);
			if (cell->oom)
				rc = -ENOMEM;
			if (cell->len > width[c])
				width[c] = cell->len;
		}
	}
	if (rc)
		goto out_free;

	sb_window_title(&b, st, nshow, t->ngroups);
	if (ntab) {
		for (int c = 0; c <= last; c++) {
			const struct plan_column *col = &p->cols[c];
			bool num = col_numeric(p, col);

			if (col->is_agg && is_hist(p->aggs[col->idx].spec.kind))
				continue;
			if (c == last && !num)
				sb_printf(&b, "%s", col->name);
			else
				sb_printf(&b, num ? "%*s" : "%-*s", (int)width[c], col->name);
			sb_puts(&b, c == last ? "\n" : "  ");
		}
	}
	for (size_t i = 0; i < nshow; i++) {
		const struct prow *r = &rows[idx[i]];

		for (int c = 0; c <= last; c++) {
			const struct plan_column *col = &p->cols[c];
			const struct sbuf *cell = &cells[i * (size_t)p->ncols + c];
			bool num = col_numeric(p, col);

			if (col->is_agg && is_hist(p->aggs[col->idx].spec.kind))
				continue;
			if (c == last && !num)
				sb_printf(&b, "%s", cell->p ? cell->p : "");
			else
				sb_printf(&b, num ? "%*s" : "%-*s", (int)width[c],
					  cell->p ? cell->p : "");
			sb_puts(&b, c == last ? "\n" : "  ");
		}
		for (int c = 0; c < p->ncols; c++) {
			const struct plan_column *col = &p->cols[c];
			struct sbuf title = { 0 };
			char *hist = NULL;
			size_t hlen = 0;
			FILE *hf;

			if (!col->is_agg || !is_hist(p->aggs[col->idx].spec.kind))
				continue;
			sb_hist_title(&title, p, r, col->name);
			hf = open_memstream(&hist, &hlen);
			if (!hf || title.oom) {
				if (hf)
					fclose(hf);
				sb_free(&title);
				rc = -ENOMEM;
				goto out_free;
			}
			agg_result_print_hist(hf, title.p, &r->res[col->idx]);
			fclose(hf);
			sb_put(&b, hist, hlen);
			sb_putc(&b, '\n');
			free(hist);
			sb_free(&title);
		}
	}
	sb_losses(&b, st, t->overflow);
	if (b.oom)
		rc = -ENOMEM;
	else if (fwrite(b.p, 1, b.len, out) != b.len)
		rc = -EIO;

out_free:
	for (size_t i = 0; cells && i < (size_t)p->ncols * (nshow + 1); i++)
		sb_free(&cells[i]);
	free(cells);
	free(width);
	sb_free(&b);
	return rc;
}

int agent_table_print(const struct agent_table *t, enum agent_format fmt,
		      const struct agent_window_stats *stats, FILE *out)
{
	const struct agent_window_stats none = { 0 };
	const struct agent_window_stats *st = stats ? stats : &none;
	const struct plan *p;
	struct prow *rows = NULL;
	struct kv *kvs = NULL;
	struct agg_result *res = NULL;
	size_t n, nshow, *base = NULL, *idx = NULL;
	double *keys = NULL;
	int rc = 0, nagg_cols = 0, agg_col = -1;

	if (!t || !out || (fmt != AGENT_FMT_TEXT && fmt != AGENT_FMT_JSON))
		return -EINVAL;
	p = t->p;
	n = t->ngroups;
	rows = calloc(n + 1, sizeof(*rows));
	kvs = calloc(n * (size_t)p->nkeys + 1, sizeof(*kvs));
	res = calloc(n * (size_t)p->naggs + 1, sizeof(*res));
	base = calloc(n + 1, sizeof(*base));
	idx = calloc(n + 1, sizeof(*idx));
	keys = calloc(n + 1, sizeof(*keys));
	if (!rows || !kvs || !res || !base || !idx || !keys) {
		rc = -ENOMEM;
		goto out_free;
	}
	for (size_t i = 0; i < n; i++) {
		struct prow *r = &rows[i];

		r->g = t->groups[i];
		r->kv = &kvs[i * (size_t)p->nkeys];
		r->res = &res[i * (size_t)p->naggs];
		rc = key_decode(p, r->g->key, r->g->klen, r->kv);
		for (int a = 0; a < p->naggs && !rc; a++) {
			struct agg_spec s = spec_of(&p->aggs[a]);

			rc = agg_state_final(
				&s, (const uint8_t *)r->g->states + t->slots[t->agg_slot[a]].soff,
				&r->res[a]);
		}
		if (rc)
			goto out_free;
		base[i] = i;
	}

	/* the deterministic order first (by key), so ties below fall back to it */
	{
		struct order_ctx o = { .p = p, .rows = rows, .key = -1 };

		qsort_r(base, n, sizeof(*base), order_cmp, &o);
	}
	for (int c = 0; c < p->ncols; c++)
		if (p->cols[c].is_agg) {
			nagg_cols++;
			agg_col = c;
		}
	nshow = p->limit > 0 && (uint64_t)p->limit < n ? (size_t)p->limit : n;
	if (p->order_col >= 0 && p->order_col < p->ncols && !p->cols[p->order_col].is_agg) {
		struct order_ctx o = { .p = p,
				       .rows = rows,
				       .key = p->cols[p->order_col].idx,
				       .desc = p->order_desc };

		memcpy(idx, base, n * sizeof(*idx));
		qsort_r(idx, n, sizeof(*idx), order_cmp, &o);
	} else if ((p->order_col >= 0 && p->order_col < p->ncols) || nagg_cols == 1) {
		/* an aggregate: top-k; without order by, bpftrace's ascending by value */
		bool ordered = p->order_col >= 0 && p->order_col < p->ncols;
		int a = p->cols[ordered ? p->order_col : agg_col].idx;

		for (size_t i = 0; i < n; i++)
			keys[i] = order_value(&rows[base[i]].res[a]);
		nshow = agg_topk(keys, n, nshow, ordered && p->order_desc, idx);
		for (size_t i = 0; i < nshow; i++)
			idx[i] = base[idx[i]];
	} else {
		memcpy(idx, base, n * sizeof(*idx));
	}

	if (fmt == AGENT_FMT_JSON) {
		struct sbuf b = { 0 };

		sb_json_window(&b, t, st, rows, idx, nshow);
		if (b.oom)
			rc = -ENOMEM;
		else if (fwrite(b.p, 1, b.len, out) != b.len)
			rc = -EIO;
		sb_free(&b);
	} else {
		rc = print_text_window(t, st, rows, idx, nshow, out);
	}

out_free:
	for (size_t i = 0; res && i < n * (size_t)p->naggs; i++)
		agg_result_release(&res[i]);
	free(rows);
	free(kvs);
	free(res);
	free(base);
	free(idx);
	free(keys);
	return rc;
}

/* ---- stream rows ---- */

static bool plan_valid_stream(const struct plan *p)
{
	if (!p || p->aggregating || p->nfields < 0 || p->ncols < 0 || p->nattach < 0)
		return false;
	if ((p->nfields && !p->fields) || (p->ncols && !p->cols) || (p->nattach && !p->attach))
		return false;
	for (int i = 0; i < p->nfields; i++)
		if (!slot_valid(&p->fields[i], p->event_size))
			return false;
	for (int i = 0; i < p->ncols; i++)
		if (p->cols[i].is_agg || p->cols[i].idx < 0 || p->cols[i].idx >= p->nfields)
			return false;
	return true;
}

/* Width of a stream column in text: enough for typical values, as opensnoop does. */
static int field_width(const struct plan_slot *f, bool last)
{
	int w, name = (int)strnlen(f->name, sizeof(f->name));
	/* by name: f->e may not outlive the compile (NULL after manifest_read) */
	bool is_time = strcmp(f->name, "time") == 0;

	switch (f->render) {
	case RENDER_INT:
	case RENDER_UINT:
		w = is_time ? 16 : 7;
		break;
	case RENDER_HEX:
		w = 18;
		break;
	case RENDER_BOOL:
		w = 5;
		break;
	case RENDER_USTACK:
	case RENDER_KSTACK:
		w = 0;
		break;
	default:
		w = 16;
		break;
	}
	if (last && render_is_text(f->render))
		return 0; /* strings at the end are not padded */
	return w > name ? w : name;
}

void agent_row_header(const struct plan *p, enum agent_format fmt, FILE *out)
{
	struct sbuf b = { 0 };

	if (fmt != AGENT_FMT_TEXT || !out || !plan_valid_stream(p))
		return;
	for (int c = 0; c < p->ncols; c++) {
		const struct plan_slot *f = &p->fields[p->cols[c].idx];
		bool last = c == p->ncols - 1;
		int w = field_width(f, last);

		if (c)
			sb_putc(&b, ' ');
		sb_printf(&b, render_is_text(f->render) ? "%-*s" : "%*s", w, p->cols[c].name);
	}
	sb_putc(&b, '\n');
	if (!b.oom)
		fwrite(b.p, 1, b.len, out);
	sb_free(&b);
}

int agent_row_print(const struct plan *p, const void *rec, size_t len, enum agent_format fmt,
		    const struct agent_resolver *r, FILE *out)
{
	struct sbuf txt = { 0 }, b = { 0 };
	struct kv *kv;
	int rc = 0;

	if (!rec || !out || (fmt != AGENT_FMT_TEXT && fmt != AGENT_FMT_JSON) ||
	    !plan_valid_stream(p) || len < p->event_size)
		return -EINVAL; /* a short or garbled record: nothing printed */
	kv = calloc((size_t)p->nfields + 1, sizeof(*kv));
	if (!kv)
		return -ENOMEM;
	for (int i = 0; i < p->nfields; i++) {
		const struct plan_slot *f = &p->fields[i];

		slot_value(p, f, f->render == RENDER_HOST ? NULL : (const uint8_t *)rec + f->offset,
			   r, &txt, &kv[i]);
	}
	kv_fix(kv, p->nfields, &txt);
	if (fmt == AGENT_FMT_JSON)
		sb_puts(&b, "{\"type\":\"row\"");
	for (int c = 0; c < p->ncols; c++) {
		const struct plan_slot *f = &p->fields[p->cols[c].idx];
		const struct kv *v = &kv[p->cols[c].idx];

		if (fmt == AGENT_FMT_JSON) {
			sb_putc(&b, ',');
			sb_json_str(&b, p->cols[c].name,
				    strnlen(p->cols[c].name, sizeof(p->cols[c].name)));
			sb_putc(&b, ':');
			sb_kv(&b, f->render, v, true);
		} else {
			struct sbuf cell = { 0 };
			int w = field_width(f, c == p->ncols - 1);

			sb_kv(&cell, f->render, v, false);
			if (c)
				sb_putc(&b, ' ');
			sb_printf(&b, render_is_text(f->render) ? "%-*s" : "%*s", w,
				  cell.p ? cell.p : "");
			if (cell.oom)
				b.oom = true;
			sb_free(&cell);
		}
	}
	sb_puts(&b, fmt == AGENT_FMT_JSON ? "}\n" : "\n");
	if (b.oom || txt.oom)
		rc = -ENOMEM;
	else if (fwrite(b.p, 1, b.len, out) != b.len)
		rc = -EIO;
	sb_free(&b);
	sb_free(&txt);
	free(kv);
	return rc;
}

void agent_json_str(FILE *out, const char *s)
{
	struct sbuf b = { 0 };

	sb_json_str(&b, s ? s : "", s ? strlen(s) : 0);
	if (!b.oom && b.p)
		fputs(b.p, out);
	else
		fputs("\"\"", out);
	sb_free(&b);
}
