// SPDX-License-Identifier: Apache-2.0
/*
 * The manifest: a plan (plan.h) as versioned, line-oriented text that travels with the BPF
 * object to agents and aggregators, which never see the query tree.
 *
 *   weft-manifest 1
 *   query <text>
 *   format <text>                               (a stream's `format` clause; optional)
 *   mode <aggregate|stream> every=<ns> for=<ns> pid=<pid> order=<col> desc=<0|1> limit=<n>
 *   sizes key=<B> value=<B> event=<B> groups=<n> spans=<n> ringbuf=<B> spansave=<B>
 *   flags spans=<0|1> ustack=<0|1> kstack=<0|1>
 *   prog <name> kind=<k> source=<i> end=<0|1> first=<attach>
 *   attach prog=<i> source=<i> target=<i> end=<0|1> cookie=<n> kind=<k> pid=<p> hz=<n>
 *          period=<ns> offset=<n> symoff=<n> nargs=<n> retval=<0|1> tp=<id> name=<s>
 *          category=<s> event=<s> binary=<s> symbol=<s> provider=<s> usdt=<s>
 *   key <name> render=<r> offset=<B> size=<B> kernel=<0|1> [arg=<s>]
 *   agg <name> kind=<k> offset=<B> size=<B> lo=<n> hi=<n> step=<n> q=<x>
 *   field <name> render=<r> offset=<B> size=<B> kernel=<0|1> [arg=<s>]
 *   col <name> agg=<0|1> idx=<i>
 *   end
 *
 * Strings are percent-encoded (anything outside printable ASCII, space, '%', '='), so a
 * line splits on spaces.  The reader is written for hostile input: every number is range-
 * checked, every index is checked against what it indexes, every size against the bounds
 * of plan.h, and the first error stops it with a reason.  Unknown keys are errors (a newer
 * manifest version must say so in its first line).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include "base/rowfmt.h"
#include "compiler/plan.h"
#include "kernel/weft_abi.h"

#define MANIFEST_MAX_LINES 4096
#define MANIFEST_MAX_ATTACH PROBE_MAX_TARGETS
#define MANIFEST_MAX_LEN (4u << 20)

static void put_str(FILE *out, const char *s)
{
	if (!*s) {
		fputs("%00", out); /* empty string: never an empty token */
		return;
	}
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c <= ' ' || c >= 0x7f || c == '%' || c == '=')
			fprintf(out, "%%%02X", c);
		else
			fputc(c, out);
	}
}

static void put_kv(FILE *out, const char *k, const char *v)
{
	fprintf(out, " %s=", k);
	put_str(out, v);
}

int manifest_write(const struct plan *p, FILE *out)
{
	fprintf(out, "weft-manifest %u\nquery ", PLAN_VERSION);
	put_str(out, p->query ? p->query : "");
	if (p->format) {
		fprintf(out, "\nformat ");
		put_str(out, p->format);
	}
	fprintf(out,
		"\nmode %s every=%" PRIu64 " for=%" PRIu64
		" pid=%d order=%d desc=%d limit=%" PRId64,
		p->aggregating ? "aggregate" :
		p->graph       ? "graph" :
				 "stream",
		p->every_ns, p->for_ns, (int)p->pid, p->order_col, p->order_desc, p->limit);
	if (p->graph) /* the head-sample rate in parts per million */
		fprintf(out, " sample=%" PRId64, (int64_t)(p->sample * 1e6 + 0.5));
	fprintf(out, "\n");
	fprintf(out, "sizes key=%u value=%u event=%u groups=%u spans=%u ringbuf=%u spansave=%u\n",
		p->key_size, p->value_size, p->event_size, p->max_groups, p->max_spans,
		p->ringbuf_bytes, p->span_save_size);
	fprintf(out, "flags spans=%d ustack=%d kstack=%d\n", p->has_spans, p->uses_ustack,
		p->uses_kstack);
	for (int i = 0; i < p->nprogs; i++) {
		const struct plan_prog *g = &p->progs[i];

		fprintf(out, "prog ");
		put_str(out, g->name);
		fprintf(out, " kind=%d source=%d end=%d first=%d", g->kind, g->source, g->is_end,
			g->first_attach);
		if (g->raw_tp) /* a raw tracepoint: the number of arguments compiled for */
			fprintf(out, " raw=%d", g->raw_nargs);
		fprintf(out, "\n");
	}
	for (int i = 0; i < p->nattach; i++) {
		const struct plan_attach *a = &p->attach[i];
		const struct probe_target *t = &a->target;

		fprintf(out,
			"attach prog=%d source=%d target=%d end=%d cookie=%" PRIu64
			" kind=%d pid=%d hz=%" PRIu64 " period=%" PRIu64 " offset=%" PRIu64
			" symoff=%" PRIu64 " nargs=%d retval=%d tp=%d",
			a->prog, a->source, a->target_idx, a->is_end, a->cookie, t->kind,
			(int)t->pid, t->hz, t->period_ns, t->offset, t->sym_offset, t->nargs,
			t->has_retval, t->tp_id);
		put_kv(out, "name", t->name);
		put_kv(out, "category", t->category);
		put_kv(out, "event", t->event);
		put_kv(out, "binary", t->binary);
		put_kv(out, "symbol", t->symbol);
		put_kv(out, "provider", t->provider);
		put_kv(out, "usdt", t->usdt_name);
		fputc('\n', out);
	}
	for (int i = 0; i < p->ntpf; i++) {
		const struct plan_tpfield *f = &p->tpf[i];

		fprintf(out, "tpfield prog=%d offset=%u size=%u signed=%d", f->prog, f->offset,
			f->size, f->is_signed);
		put_kv(out, "name", f->name);
		fputc('\n', out);
	}
	for (int i = 0; i < p->nkeys; i++) {
		const struct plan_slot *k = &p->keys[i];

		fprintf(out, "key ");
		put_str(out, k->name);
		fprintf(out, " render=%s offset=%u size=%u kernel=%d", render_name(k->render),
			k->offset, k->size, k->kernel);
		if (k->arg[0])
			put_kv(out, "arg", k->arg);
		fputc('\n', out);
	}
	for (int i = 0; i < p->naggs; i++) {
		const struct plan_agg *a = &p->aggs[i];

		fprintf(out, "agg ");
		put_str(out, a->name);
		fprintf(out,
			" kind=%s offset=%u size=%u lo=%" PRId64 " hi=%" PRId64 " step=%" PRId64
			" q=%.17g\n",
			agg_kind_name(a->spec.kind), a->offset, a->size, a->spec.lo, a->spec.hi,
			a->spec.step, a->spec.q);
	}
	for (int i = 0; i < p->nfields; i++) {
		const struct plan_slot *f = &p->fields[i];

		fprintf(out, "field ");
		put_str(out, f->name);
		fprintf(out, " render=%s offset=%u size=%u kernel=%d", render_name(f->render),
			f->offset, f->size, f->kernel);
		if (f->arg[0])
			put_kv(out, "arg", f->arg);
		fputc('\n', out);
	}
	for (int i = 0; i < p->ncols; i++) {
		fprintf(out, "col ");
		put_str(out, p->cols[i].name);
		fprintf(out, " agg=%d idx=%d\n", p->cols[i].is_agg, p->cols[i].idx);
	}
	fprintf(out, "end\n");
	return ferror(out) ? -EIO : 0;
}

/* ---------------------------------------------------------------- reading */

struct reader {
	char *err;
	size_t errsz;
	int line;
};

static int fail(struct reader *r, const char *fmt, ...)
{
	va_list ap;
	int n = 0;

	if (r->err && r->errsz) {
		n = snprintf(r->err, r->errsz, "manifest line %d: ", r->line);
		va_start(ap, fmt);
		if (n >= 0 && (size_t)n < r->errsz)
			vsnprintf(r->err + n, r->errsz - n, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Decodes a percent-encoded token into out (size sz, always NUL-terminated). */
static int get_str(struct reader *r, const char *tok, char *out, size_t sz)
{
	size_t n = 0;

	for (const char *s = tok; *s; s++) {
		int c = (unsigned char)*s;

		if (c == '%') {
			int h = hexval(s[1]), l = h >= 0 ? hexval(s[2]) : -1;

			if (h < 0 || l < 0)
				return fail(r, "bad escape in '%.40s'", tok);
			c = h * 16 + l;
			s += 2;
		}
		if (c == 0)
			continue; /* the empty-string marker */
		if (n + 1 >= sz)
			return fail(r, "string too long");
		out[n++] = (char)c;
	}
	out[n] = 0;
	return 0;
}

static int get_i64(struct reader *r, const char *v, int64_t lo, int64_t hi, int64_t *out)
{
	char *end;
	long long x;

	errno = 0;
	x = strtoll(v, &end, 10);
	if (errno || end == v || *end || x < lo || x > hi)
		return fail(r, "number '%.30s' out of range", v);
	*out = x;
	return 0;
}

static int get_u64(struct reader *r, const char *v, uint64_t *out)
{
	char *end;
	unsigned long long x;

	if (*v == '-')
		return fail(r, "negative number '%.30s'", v);
	errno = 0;
	x = strtoull(v, &end, 10);
	if (errno || end == v || *end)
		return fail(r, "bad number '%.30s'", v);
	*out = x;
	return 0;
}

/* Splits line into tokens in place; returns the count (at most max). */
static int split(char *line, char **tok, int max)
{
	char *save = NULL;
	int n = 0;

	for (char *s = strtok_r(line, " ", &save); s; s = strtok_r(NULL, " ", &save)) {
		if (n == max)
			return -1;
		tok[n++] = s;
	}
	return n;
}

/* Finds key=value among tokens [from, n); NULL if absent. */
static const char *kv(char **tok, int n, int from, const char *key)
{
	size_t kl = strlen(key);

	for (int i = from; i < n; i++)
		if (strncmp(tok[i], key, kl) == 0 && tok[i][kl] == '=')
			return tok[i] + kl + 1;
	return NULL;
}

/* key=value tokens must all be known */
static int check_keys(struct reader *r, char **tok, int n, int from, const char *const *keys)
{
	for (int i = from; i < n; i++) {
		const char *eq = strchr(tok[i], '=');
		bool ok = false;

		if (!eq)
			return fail(r, "expected key=value, found '%.40s'", tok[i]);
		for (int k = 0; keys[k]; k++)
			if (strlen(keys[k]) == (size_t)(eq - tok[i]) &&
			    strncmp(tok[i], keys[k], eq - tok[i]) == 0)
				ok = true;
		if (!ok)
			return fail(r, "unknown key in '%.40s'", tok[i]);
	}
	return 0;
}

#define NEED_I64(name, lo, hi, dst)                         \
	do {                                                \
		const char *v_ = kv(tok, n, 1, name);       \
		int64_t x_ = 0;                             \
		if (!v_)                                    \
			return fail(r, "missing %s", name); \
		if (get_i64(r, v_, lo, hi, &x_))            \
			return -EINVAL;                     \
		dst = x_;                                   \
	} while (0)

#define NEED_U64(name, dst)                                 \
	do {                                                \
		const char *v_ = kv(tok, n, 1, name);       \
		uint64_t x_ = 0;                            \
		if (!v_)                                    \
			return fail(r, "missing %s", name); \
		if (get_u64(r, v_, &x_))                    \
			return -EINVAL;                     \
		dst = x_;                                   \
	} while (0)

#define NEED_STR(name, dst)                                 \
	do {                                                \
		const char *v_ = kv(tok, n, 1, name);       \
		if (!v_)                                    \
			return fail(r, "missing %s", name); \
		if (get_str(r, v_, dst, sizeof(dst)))       \
			return -EINVAL;                     \
	} while (0)

static int lookup_render(const char *s)
{
	for (int i = 0; i < RENDER__COUNT; i++)
		if (strcmp(render_name(i), s) == 0)
			return i;
	return -1;
}

static int lookup_agg(const char *s)
{
	for (int i = 0; i < AGG__COUNT; i++)
		if (strcmp(agg_kind_name(i), s) == 0)
			return i;
	return -1;
}

static int read_slot(struct reader *r, char **tok, int n, struct plan_slot *s)
{
	static const char *const keys[] = { "render", "offset", "size", "kernel", "arg", NULL };
	const char *rv, *av;
	int rd;

	if (n < 2 || get_str(r, tok[1], s->name, sizeof(s->name)))
		return fail(r, "missing name");
	if (check_keys(r, tok, n, 2, keys))
		return -EINVAL;
	rv = kv(tok, n, 2, "render");
	rd = rv ? lookup_render(rv) : -1;
	if (rd < 0)
		return fail(r, "unknown render");
	s->render = rd;
	NEED_I64("offset", 0, PLAN_MAX_EVENT_SIZE, s->offset);
	NEED_I64("size", 0, PLAN_MAX_KEY_SIZE, s->size);
	NEED_I64("kernel", 0, 1, s->kernel);
	/* lang-a: the enum of an enumname() slot (optional: older manifests have none) */
	av = kv(tok, n, 2, "arg");
	if (av && get_str(r, av, s->arg, sizeof(s->arg)))
		return -EINVAL;
	return 0;
}

static int parse_line(struct reader *r, struct plan *p, char *line, int *state)
{
	char *tok[40];
	int n = split(line, tok, 40);

	if (n < 0)
		return fail(r, "too many tokens");
	if (n == 0)
		return 0;
	if (*state == 0) {
		int64_t v = 0;

		if (n != 2 || strcmp(tok[0], "weft-manifest") != 0)
			return fail(r, "not a weft manifest");
		if (get_i64(r, tok[1], 0, INT32_MAX, &v))
			return -EINVAL;
		if (v != PLAN_VERSION)
			return fail(r, "manifest version %lld; this weft reads version %d",
				    (long long)v, PLAN_VERSION);
		p->version = (uint32_t)v;
		*state = 1;
		return 0;
	}
	if (*state == 2)
		return fail(r, "text after `end`");
	if (strcmp(tok[0], "end") == 0) {
		*state = 2;
		return 0;
	}
	if (strcmp(tok[0], "format") == 0) {
		struct rowfmt *rf;
		uint32_t bo, bl;
		const char *why;
		size_t len = n > 1 ? strlen(tok[1]) + 1 : 1;
		int bad;

		if (p->format)
			return fail(r, "two formats");
		p->format = calloc(1, len);
		if (!p->format)
			return -ENOMEM;
		if (n != 2 || get_str(r, tok[1], p->format, len))
			return fail(r, "bad format line");
		rf = malloc(sizeof(*rf));
		if (!rf)
			return -ENOMEM;
		bad = rowfmt_parse(p->format, strlen(p->format), rf, &bo, &bl, &why);
		free(rf);
		if (bad)
			return fail(r, "bad format: %s", why);
		return 0;
	}
	if (strcmp(tok[0], "query") == 0) {
		char *q;
		size_t len = n > 1 ? strlen(tok[1]) + 1 : 1;

		if (p->query)
			return fail(r, "two queries");
		q = calloc(1, len);
		if (!q)
			return -ENOMEM;
		p->query = q;
		if (n > 1 && get_str(r, tok[1], q, len))
			return -EINVAL;
		return 0;
	}
	if (strcmp(tok[0], "mode") == 0) {
		static const char *const keys[] = { "every", "for",   "pid",	"order",
						    "desc",  "limit", "sample", NULL };

		if (n < 2 || check_keys(r, tok, n, 2, keys))
			return fail(r, "bad mode line");
		if (strcmp(tok[1], "aggregate") == 0) {
			p->aggregating = true;
		} else if (strcmp(tok[1], "graph") == 0) {
			int64_t ppm = 0;

			NEED_I64("sample", 1, 1000000, ppm);
			p->graph = true;
			p->sample = (double)ppm / 1e6;
		} else if (strcmp(tok[1], "stream") != 0) {
			return fail(r, "unknown mode");
		}
		NEED_U64("every", p->every_ns);
		NEED_U64("for", p->for_ns);
		NEED_I64("pid", 0, INT32_MAX, p->pid);
		NEED_I64("order", -1, 2 * AST_MAX_ITEMS - 1, p->order_col);
		NEED_I64("desc", 0, 1, p->order_desc);
		NEED_I64("limit", 0, INT64_MAX, p->limit);
		return 0;
	}
	if (strcmp(tok[0], "sizes") == 0) {
		static const char *const keys[] = { "key",   "value",	"event",    "groups",
						    "spans", "ringbuf", "spansave", NULL };

		if (check_keys(r, tok, n, 1, keys))
			return -EINVAL;
		NEED_I64("key", 0, PLAN_MAX_KEY_SIZE, p->key_size);
		NEED_I64("value", 0, PLAN_MAX_VALUE_SIZE, p->value_size);
		NEED_I64("event", 0, PLAN_MAX_EVENT_SIZE, p->event_size);
		NEED_I64("groups", 0, PLAN_MAX_GROUPS, p->max_groups);
		NEED_I64("spans", 0, PLAN_MAX_SPANS, p->max_spans);
		NEED_I64("ringbuf", 0, PLAN_MAX_RINGBUF, p->ringbuf_bytes);
		NEED_I64("spansave", 0, PLAN_MAX_EVENT_SIZE, p->span_save_size);
		return 0;
	}
	if (strcmp(tok[0], "flags") == 0) {
		static const char *const keys[] = { "spans", "ustack", "kstack", NULL };

		if (check_keys(r, tok, n, 1, keys))
			return -EINVAL;
		NEED_I64("spans", 0, 1, p->has_spans);
		NEED_I64("ustack", 0, 1, p->uses_ustack);
		NEED_I64("kstack", 0, 1, p->uses_kstack);
		return 0;
	}
	if (strcmp(tok[0], "prog") == 0) {
		static const char *const keys[] = { "kind", "source", "end", "first", "raw", NULL };
		struct plan_prog *g;
		const char *raw;

		if (p->nprogs == PLAN_MAX_PROGS)
			return fail(r, "too many programs");
		g = &p->progs[p->nprogs];
		if (n < 2 || get_str(r, tok[1], g->name, sizeof(g->name)) ||
		    check_keys(r, tok, n, 2, keys))
			return fail(r, "bad prog line");
		NEED_I64("kind", PROBE_NONE + 1, PROBE__COUNT - 1, g->kind);
		NEED_I64("source", 0, AST_MAX_SOURCES - 1, g->source);
		NEED_I64("end", 0, 1, g->is_end);
		NEED_I64("first", 0, MANIFEST_MAX_ATTACH - 1, g->first_attach);
		/* optional (a raw tracepoint program, with the number of arguments its tracepoint
		 * passes on the kernel it was compiled for): an agent older than it refuses the key */
		raw = kv(tok, n, 2, "raw");
		g->raw_tp = false;
		g->raw_nargs = 0;
		if (raw) {
			int64_t x = 0;

			if (get_i64(r, raw, 1, PROBE_MAX_FIELDS, &x))
				return -EINVAL;
			g->raw_tp = true;
			g->raw_nargs = (int)x;
		}
		p->nprogs++;
		return 0;
	}
	if (strcmp(tok[0], "attach") == 0) {
		static const char *const keys[] = { "prog",   "source", "target", "end",
						    "cookie", "kind",	"pid",	  "hz",
						    "period", "offset", "symoff", "nargs",
						    "retval", "tp",	"name",	  "category",
						    "event",  "binary", "symbol", "provider",
						    "usdt",   NULL };
		struct plan_attach *a;

		if (p->nattach == MANIFEST_MAX_ATTACH)
			return fail(r, "too many attach points");
		if (check_keys(r, tok, n, 1, keys))
			return -EINVAL;
		a = &p->attach[p->nattach];
		memset(a, 0, sizeof(*a));
		NEED_I64("prog", 0, PLAN_MAX_PROGS - 1, a->prog);
		NEED_I64("source", 0, AST_MAX_SOURCES - 1, a->source);
		NEED_I64("target", 0, MANIFEST_MAX_ATTACH - 1, a->target_idx);
		NEED_I64("end", 0, 1, a->is_end);
		NEED_U64("cookie", a->cookie);
		NEED_I64("kind", PROBE_NONE + 1, PROBE__COUNT - 1, a->target.kind);
		NEED_I64("pid", 0, INT32_MAX, a->target.pid);
		NEED_U64("hz", a->target.hz);
		NEED_U64("period", a->target.period_ns);
		NEED_U64("offset", a->target.offset);
		NEED_U64("symoff", a->target.sym_offset);
		NEED_I64("nargs", 0, 12, a->target.nargs);
		NEED_I64("retval", 0, 1, a->target.has_retval);
		NEED_I64("tp", -1, INT32_MAX, a->target.tp_id);
		NEED_STR("name", a->target.name);
		NEED_STR("category", a->target.category);
		NEED_STR("event", a->target.event);
		NEED_STR("binary", a->target.binary);
		NEED_STR("symbol", a->target.symbol);
		NEED_STR("provider", a->target.provider);
		NEED_STR("usdt", a->target.usdt_name);
		p->nattach++;
		return 0;
	}
	if (strcmp(tok[0], "tpfield") == 0) {
		/* a classic tracepoint's field a program reads (written only by a compiler that
		 * records them: an agent older than it refuses the line) */
		static const char *const keys[] = {
			"prog", "offset", "size", "signed", "name", NULL
		};
		struct plan_tpfield *f;

		if (p->ntpf == PLAN_MAX_TPF)
			return fail(r, "too many tracepoint fields");
		if (p->ntpf % 16 == 0) {
			f = realloc(p->tpf, (size_t)(p->ntpf + 16) * sizeof(*f));
			if (!f)
				return -ENOMEM;
			p->tpf = f;
		}
		f = &p->tpf[p->ntpf];
		memset(f, 0, sizeof(*f));
		if (check_keys(r, tok, n, 1, keys))
			return -EINVAL;
		NEED_I64("prog", 0, PLAN_MAX_PROGS - 1, f->prog);
		NEED_I64("offset", 0, UINT16_MAX, f->offset);
		NEED_I64("size", 1, UINT16_MAX, f->size);
		NEED_I64("signed", 0, 1, f->is_signed);
		NEED_STR("name", f->name);
		if (!f->name[0])
			return fail(r, "tracepoint field without a name");
		p->ntpf++;
		return 0;
	}
	if (strcmp(tok[0], "key") == 0 || strcmp(tok[0], "field") == 0) {
		bool is_key = tok[0][0] == 'k';
		struct plan_slot *s;

		if ((is_key ? p->nkeys : p->nfields) == AST_MAX_ITEMS)
			return fail(r, "too many %ss", tok[0]);
		s = is_key ? &p->keys[p->nkeys] : &p->fields[p->nfields];
		if (read_slot(r, tok, n, s))
			return -EINVAL;
		if (is_key)
			p->nkeys++;
		else
			p->nfields++;
		return 0;
	}
	if (strcmp(tok[0], "agg") == 0) {
		static const char *const keys[] = { "kind", "offset", "size", "lo",
						    "hi",   "step",   "q",    NULL };
		struct plan_agg *a;
		const char *kvs;
		int k;
		char *end;

		if (p->naggs == AST_MAX_ITEMS)
			return fail(r, "too many aggregates");
		a = &p->aggs[p->naggs];
		if (n < 2 || get_str(r, tok[1], a->name, sizeof(a->name)) ||
		    check_keys(r, tok, n, 2, keys))
			return fail(r, "bad agg line");
		kvs = kv(tok, n, 2, "kind");
		k = kvs ? lookup_agg(kvs) : -1;
		if (k < 0)
			return fail(r, "unknown aggregate kind");
		a->spec.kind = k;
		NEED_I64("offset", 0, PLAN_MAX_VALUE_SIZE, a->offset);
		NEED_I64("size", 0, PLAN_MAX_VALUE_SIZE, a->size);
		NEED_I64("lo", INT64_MIN, INT64_MAX, a->spec.lo);
		NEED_I64("hi", INT64_MIN, INT64_MAX, a->spec.hi);
		NEED_I64("step", INT64_MIN, INT64_MAX, a->spec.step);
		kvs = kv(tok, n, 2, "q");
		if (!kvs)
			return fail(r, "missing q");
		a->spec.q = strtod(kvs, &end);
		if (end == kvs || *end || !(a->spec.q >= 0 && a->spec.q < 1))
			return fail(r, "bad q");
		if (a->spec.kind == AGG_LHIST && (a->spec.step <= 0 || a->spec.lo >= a->spec.hi ||
						  (a->spec.hi - a->spec.lo) / a->spec.step > 1024))
			return fail(r, "bad lhist bounds");
		if (a->offset + a->size > PLAN_MAX_VALUE_SIZE)
			return fail(r, "aggregate outside the value");
		p->naggs++;
		return 0;
	}
	if (strcmp(tok[0], "col") == 0) {
		static const char *const keys[] = { "agg", "idx", NULL };
		struct plan_column *c;

		if (p->ncols == AST_MAX_ITEMS + AST_MAX_GROUPS)
			return fail(r, "too many columns");
		c = &p->cols[p->ncols];
		if (n < 2 || get_str(r, tok[1], c->name, sizeof(c->name)) ||
		    check_keys(r, tok, n, 2, keys))
			return fail(r, "bad col line");
		NEED_I64("agg", 0, 1, c->is_agg);
		NEED_I64("idx", 0, AST_MAX_ITEMS - 1, c->idx);
		p->ncols++;
		return 0;
	}
	return fail(r, "unknown line '%.20s'", tok[0]);
}

/* Cross-checks what single lines cannot. */
static int validate(struct reader *r, struct plan *p)
{
	r->line = 0;
	if (!p->query)
		return fail(r, "no query");
	if (p->nprogs == 0 || p->nattach == 0)
		return fail(r, "no probes");
	for (int i = 0; i < p->nprogs; i++)
		if (p->progs[i].first_attach >= p->nattach)
			return fail(r, "program without attach point");
	for (int i = 0; i < p->nattach; i++)
		if (p->attach[i].prog >= p->nprogs)
			return fail(r, "attach point of an unknown program");
	for (int i = 0; i < p->ntpf; i++) {
		const struct plan_prog *g =
			p->tpf[i].prog < p->nprogs ? &p->progs[p->tpf[i].prog] : NULL;

		if (!g || g->raw_tp || (g->kind != PROBE_TRACEPOINT && g->kind != PROBE_SYSCALL))
			return fail(r, "tracepoint field %d of no classic tracepoint program", i);
	}
	for (int i = 0; i < p->ncols; i++) {
		int lim = !p->aggregating ? p->nfields : p->cols[i].is_agg ? p->naggs : p->nkeys;

		if (p->cols[i].idx >= lim)
			return fail(r, "column %d refers to nothing", i);
		if (!p->aggregating && p->cols[i].is_agg)
			return fail(r, "aggregate column in a stream");
	}
	if (p->ncols == 0)
		return fail(r, "no columns");
	if (p->order_col >= p->ncols)
		return fail(r, "order column out of range");
	for (int i = 0; i < p->nkeys; i++)
		if (p->keys[i].kernel && p->keys[i].offset + p->keys[i].size > p->key_size)
			return fail(r, "key %d outside the key", i);
	for (int i = 0; i < p->nfields; i++)
		if (p->fields[i].kernel && p->fields[i].offset + p->fields[i].size > p->event_size)
			return fail(r, "field %d outside the record", i);
	for (int i = 0; i < p->naggs; i++)
		if (p->aggs[i].offset + p->aggs[i].size > p->value_size)
			return fail(r, "aggregate %d outside the value", i);
	if (p->aggregating && (p->key_size == 0 || p->value_size == 0 || p->max_groups == 0))
		return fail(r, "aggregation map without size");
	if (!p->aggregating && p->ringbuf_bytes == 0)
		return fail(r, "stream without ring buffer");
	if (p->graph && p->event_size != sizeof(struct weft_graph_rec))
		return fail(r, "graph query whose record is not weft's graph record");
	return 0;
}

struct plan *manifest_read(const char *text, size_t len, char *err, size_t errsz)
{
	struct reader r = { .err = err, .errsz = errsz };
	struct plan *p = NULL;
	char *copy = NULL, *line, *save = NULL;
	int state = 0, rc = -EINVAL;

	if (err && errsz)
		err[0] = 0;
	if (len > MANIFEST_MAX_LEN) {
		fail(&r, "manifest larger than %u bytes", MANIFEST_MAX_LEN);
		goto out;
	}
	copy = malloc(len + 1);
	p = calloc(1, sizeof(*p));
	if (!copy || !p) {
		rc = -ENOMEM;
		goto out;
	}
	memcpy(copy, text, len);
	copy[len] = 0;
	if (memchr(text, 0, len)) {
		fail(&r, "NUL byte in manifest");
		goto out;
	}
	p->attach = calloc(MANIFEST_MAX_ATTACH, sizeof(*p->attach));
	p->keys = calloc(AST_MAX_ITEMS, sizeof(*p->keys));
	p->aggs = calloc(AST_MAX_ITEMS, sizeof(*p->aggs));
	p->fields = calloc(AST_MAX_ITEMS, sizeof(*p->fields));
	p->cols = calloc(AST_MAX_ITEMS + AST_MAX_GROUPS, sizeof(*p->cols));
	if (!p->attach || !p->keys || !p->aggs || !p->fields || !p->cols) {
		rc = -ENOMEM;
		goto out;
	}
	p->order_col = -1;
	rc = 0;
	for (line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		if (++r.line > MANIFEST_MAX_LINES) {
			rc = fail(&r, "too many lines");
			break;
		}
		rc = parse_line(&r, p, line, &state);
		if (rc)
			break;
	}
	if (!rc && state != 2)
		rc = fail(&r, "missing `end`");
	if (!rc)
		rc = validate(&r, p);
out:
	free(copy);
	if (rc) {
		plan_free(p);
		errno = -rc;
		return NULL;
	}
	return p;
}
