// SPDX-License-Identifier: Apache-2.0
/*
 * The front door of the JSON importers: reads a file (base/file.h, bounded at 1 GiB), parses it
 * with jansson, tells the format from the content when asked to, hands the tree to the
 * format's importer (graph/import_{otlp,jaeger,zipkin,xtrace}.c), and makes the import all or
 * nothing: if the importer refuses, the graph's element counts are put back as they were, so
 * nothing of a refused file remains (strings it copied stay in the arena, unreachable, and die
 * with the graph).
 *
 * Parsing: jansson with JSON_REJECT_DUPLICATES (a key twice in one object is an error, not a
 * silent "last one wins") and its own nesting bound (JSON_PARSER_MAX_DEPTH, 2048 in Debian's
 * 2.14), so a hostile file cannot make the parser recurse without bound.  A syntax error is
 * refused with the file's name and jansson's line:column.  OTLP files written by the
 * collector's file exporter hold one ExportTraceServiceRequest per line (JSON Lines), so a
 * file may hold several JSON values; every one must then be OTLP.
 *
 * Detection (GRAPH_FMT_AUTO) looks at the first value's shape only:
 *   an object with "resourceSpans"                        OTLP
 *   an object with "data", a list (empty, or of objects with "spans")     Jaeger
 *   a list whose first item is an object with "traceId" and "id"          Zipkin v2
 *   a list whose first item is an object with "id" and "reports"          X-Trace
 *   an empty list                                         Zipkin (no spans)
 * and each importer then checks every item, so a file that only starts right is refused at
 * its first wrong item.  Also here: the helpers every importer shares (import_priv.h).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/file.h"
#include "graph/import.h"
#include "graph/import_priv.h"

#define IMPORT_MAX_FILE (1ULL << 30)

static const char *const format_names[GRAPH_FMT_COUNT] = {
	[GRAPH_FMT_AUTO] = "auto",     [GRAPH_FMT_OTLP] = "otlp",     [GRAPH_FMT_JAEGER] = "jaeger",
	[GRAPH_FMT_ZIPKIN] = "zipkin", [GRAPH_FMT_XTRACE] = "xtrace", [GRAPH_FMT_CTF] = "ctf",
	[GRAPH_FMT_CHROME] = "chrome",
};

const char *graph_format_name(enum graph_format f)
{
	return (unsigned)f < GRAPH_FMT_COUNT ? format_names[f] : "unknown";
}

int graph_format_parse(const char *name)
{
	int i;

	if (!name)
		return -1;
	for (i = 0; i < GRAPH_FMT_COUNT; i++)
		if (!strcmp(name, format_names[i]))
			return i;
	return -1;
}

int imp_fail(struct imp *im, const char *fmt, ...)
{
	struct graph_import_err *e = im->err;
	va_list ap;
	int n;

	n = snprintf(e->msg, sizeof(e->msg), "%s: ", im->name);
	if (n < 0 || (size_t)n >= sizeof(e->msg))
		n = 0;
	va_start(ap, fmt);
	vsnprintf(e->msg + n, sizeof(e->msg) - (size_t)n, fmt, ap);
	va_end(ap);
	e->line = e->column = 0;
	e->offset = -1;
	return -EINVAL;
}

int imp_nomem(struct imp *im)
{
	imp_fail(im, "out of memory");
	return -ENOMEM;
}

/* A copy of obj whose strings longer than IMP_ATTR_CUT bytes are cut (on a UTF-8 boundary). */
#define IMP_ATTR_CUT 1024
static json_t *cut_strings(const json_t *obj)
{
	json_t *o = json_deep_copy(obj), *v;
	const char *k;

	if (!o)
		return NULL;
	json_object_foreach(o, k, v)
	{
		if (json_is_string(v) && json_string_length(v) > IMP_ATTR_CUT) {
			const char *s = json_string_value(v);
			size_t n = IMP_ATTR_CUT;

			while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80)
				n--;
			json_object_set_new(o, k, json_stringn(s, n));
		}
	}
	json_object_set_new(o, "weft.attrs_cut", json_true());
	return o;
}

const char *imp_attrs(struct imp *im, const json_t *obj)
{
	const char *s;
	char *txt;
	size_t len;

	if (!obj || json_object_size(obj) == 0)
		return graph_strndup(im->g, "{}", 2);
	txt = json_dumps(obj, JSON_COMPACT | JSON_SORT_KEYS);
	if (!txt)
		return NULL;
	len = strlen(txt);
	if (len > GRAPH_MAX_STR) {
		/* the arena would cut the text, and the JSON with it: cut long strings first, and
		 * if that is not enough keep only the mark */
		json_t *c = cut_strings(obj);

		free(txt);
		txt = c ? json_dumps(c, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
		json_decref(c);
		if (!txt)
			return NULL;
		len = strlen(txt);
		if (len > GRAPH_MAX_STR) {
			free(txt);
			return graph_strdup(im->g, "{\"weft.attrs_cut\":true}");
		}
	}
	s = graph_strndup(im->g, txt, len);
	free(txt);
	return s;
}

const char *imp_jstr(struct imp *im, const json_t *s)
{
	if (!json_is_string(s))
		return graph_strndup(im->g, "", 0);
	return graph_strndup(im->g, json_string_value(s), json_string_length(s));
}

bool imp_us_to_ns(json_int_t us, int64_t *ns)
{
	if (us < 0 || us > IMP_TIME_MAX / 1000)
		return false;
	*ns = (int64_t)us * 1000;
	return true;
}

bool imp_json_depth_ok(const json_t *v, int max)
{
	const json_t *x;
	const char *k;
	size_t i;

	if (!json_is_array(v) && !json_is_object(v))
		return true;
	if (max <= 0)
		return false;
	if (json_is_array(v)) {
		json_array_foreach(v, i, x)
		{
			if (!imp_json_depth_ok(x, max - 1))
				return false;
		}
		return true;
	}
	json_object_foreach((json_t *)v, k, x)
	{
		if (!imp_json_depth_ok(x, max - 1))
			return false;
	}
	return true;
}

static int parse_u64(const char *s, size_t len, uint64_t max, uint64_t *out)
{
	uint64_t v = 0;
	size_t i;

	if (len == 0 || len > 20)
		return -EINVAL;
	for (i = 0; i < len; i++) {
		unsigned d = (unsigned char)s[i] - '0';

		if (d > 9 || v > (UINT64_MAX - d) / 10)
			return -EINVAL;
		v = v * 10 + d;
	}
	if (v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

int imp_json_u64(const json_t *v, uint64_t max, uint64_t *out)
{
	if (json_is_integer(v)) {
		json_int_t i = json_integer_value(v);

		if (i < 0 || (uint64_t)i > max)
			return -EINVAL;
		*out = (uint64_t)i;
		return 0;
	}
	if (json_is_string(v))
		return parse_u64(json_string_value(v), json_string_length(v), max, out);
	return -EINVAL;
}

int imp_json_i64(const json_t *v, int64_t *out)
{
	uint64_t u;
	const char *s;
	size_t len;

	if (json_is_integer(v)) {
		*out = json_integer_value(v);
		return 0;
	}
	if (!json_is_string(v))
		return -EINVAL;
	s = json_string_value(v);
	len = json_string_length(v);
	if (len > 0 && s[0] == '-') {
		if (parse_u64(s + 1, len - 1, (uint64_t)INT64_MAX + 1, &u))
			return -EINVAL;
		*out = (int64_t)(0 - u);
		return 0;
	}
	if (parse_u64(s, len, INT64_MAX, &u))
		return -EINVAL;
	*out = (int64_t)u;
	return 0;
}

int imp_id64(const json_t *v, bool b64, bool zero_ok, uint64_t *out)
{
	const char *s;
	size_t len;

	if (!json_is_string(v))
		return -EINVAL;
	s = json_string_value(v);
	len = json_string_length(v);
	/* base64 of 8 bytes is 11 or 12 characters, which could also be short hex: full-width
	 * hex is hex, otherwise base64 if it decodes, else hex */
	if (!(b64 && len != 16 && !graph_id64_parse_base64(s, len, out)) &&
	    graph_id64_parse_hex(s, len, out))
		return -EINVAL;
	if (*out == 0 && !zero_ok)
		return -EINVAL;
	return 0;
}

int imp_id128(const json_t *v, bool b64, struct graph_id128 *out)
{
	const char *s;
	size_t len;

	if (!json_is_string(v))
		return -EINVAL;
	s = json_string_value(v);
	len = json_string_length(v);
	if (!(b64 && len != 16 && len != 32 && !graph_id128_parse_base64(s, len, out)) &&
	    graph_id128_parse_hex(s, len, out))
		return -EINVAL;
	if (out->hi == 0 && out->lo == 0)
		return -EINVAL;
	return 0;
}

static int cmp_ix(const void *a, const void *b, void *arg)
{
	const struct graph *g = arg;
	const struct graph_task *x = &g->tasks[*(const size_t *)a];
	const struct graph_task *y = &g->tasks[*(const size_t *)b];
	int c = graph_id128_cmp(x->trace, y->trace);

	if (c)
		return c;
	if (x->id != y->id)
		return x->id < y->id ? -1 : 1;
	return *(const size_t *)a < *(const size_t *)b ? -1 : 1;
}

int imp_index_build(struct imp_index *ix, const struct graph *g, size_t from)
{
	size_t i;

	ix->g = g;
	ix->n = g->ntasks - from;
	ix->idx = malloc((ix->n ? ix->n : 1) * sizeof(*ix->idx));
	if (!ix->idx)
		return -ENOMEM;
	for (i = 0; i < ix->n; i++)
		ix->idx[i] = from + i;
	qsort_r(ix->idx, ix->n, sizeof(*ix->idx), cmp_ix, (void *)g);
	return 0;
}

long imp_index_find(const struct imp_index *ix, struct graph_id128 trace, uint64_t id)
{
	size_t lo = 0, hi = ix->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct graph_task *t = &ix->g->tasks[ix->idx[mid]];
		int c = graph_id128_cmp(t->trace, trace);

		if (c == 0)
			c = t->id < id ? -1 : t->id > id;
		if (c == 0) {
			/* the first of equal ones: the earliest in the file */
			while (mid > lo) {
				const struct graph_task *p = &ix->g->tasks[ix->idx[mid - 1]];

				if (p->id != id || !graph_id128_eq(p->trace, trace))
					break;
				mid--;
			}
			return (long)ix->idx[mid];
		}
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -1;
}

bool imp_index_dup(const struct imp_index *ix, struct graph_id128 *trace, uint64_t *id)
{
	size_t i;

	for (i = 1; i < ix->n; i++) {
		const struct graph_task *a = &ix->g->tasks[ix->idx[i - 1]];
		const struct graph_task *b = &ix->g->tasks[ix->idx[i]];

		if (a->id == b->id && graph_id128_eq(a->trace, b->trace)) {
			*trace = a->trace;
			*id = a->id;
			return true;
		}
	}
	return false;
}

void imp_index_free(struct imp_index *ix)
{
	free(ix->idx);
	ix->idx = NULL;
	ix->n = 0;
}

uint64_t imp_fnv1a(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;
	size_t i;

	for (i = 0; i < n; i++) {
		h ^= b[i];
		h *= 0x100000001b3ULL;
	}
	return h;
}

static enum graph_format detect(const json_t *root)
{
	const json_t *first, *data;

	if (json_is_object(root)) {
		if (json_object_get(root, "resourceSpans"))
			return GRAPH_FMT_OTLP;
		data = json_object_get(root, "data");
		if (json_is_array(data)) {
			first = json_array_get(data, 0);
			if (!first || (json_is_object(first) && json_object_get(first, "spans")))
				return GRAPH_FMT_JAEGER;
		}
		return GRAPH_FMT_AUTO;
	}
	if (!json_is_array(root))
		return GRAPH_FMT_AUTO;
	if (json_array_size(root) == 0)
		return GRAPH_FMT_ZIPKIN;
	first = json_array_get(root, 0);
	if (!json_is_object(first) || !json_object_get(first, "id"))
		return GRAPH_FMT_AUTO;
	if (json_object_get(first, "traceId"))
		return GRAPH_FMT_ZIPKIN;
	if (json_object_get(first, "reports"))
		return GRAPH_FMT_XTRACE;
	return GRAPH_FMT_AUTO;
}

/* The 1-based line and column of byte `off` of buf. */
static void place(const char *buf, size_t off, long *line, long *col)
{
	size_t i, bol = 0;
	long l = 1;

	for (i = 0; i < off; i++) {
		if (buf[i] == '\n') {
			l++;
			bol = i + 1;
		}
	}
	*line = l;
	*col = (long)(off - bol) + 1;
}

static size_t skip_space(const char *buf, size_t len, size_t i)
{
	while (i < len && (buf[i] == ' ' || buf[i] == '\t' || buf[i] == '\n' || buf[i] == '\r'))
		i++;
	return i;
}

static int syntax_error(struct imp *im, const char *buf, size_t base, const json_error_t *je)
{
	struct graph_import_err *e = im->err;
	long line = je->line, col = je->column;

	if (base > 0 && line > 0) { /* a later value of a JSON Lines file: place it in the file */
		long bl, bc;

		place(buf, base, &bl, &bc);
		if (line == 1)
			col += bc - 1;
		line += bl - 1;
	}
	snprintf(e->msg, sizeof(e->msg), "%s:%ld:%ld: %s", im->name, line, col, je->text);
	e->line = line;
	e->column = col;
	e->offset = je->position >= 0 ? (long long)(base + (size_t)je->position) : -1;
	return -EINVAL;
}

static int import_one(struct imp *im, json_t *root, enum graph_format fmt, size_t vi)
{
	switch (fmt) {
	case GRAPH_FMT_OTLP:
		return imp_otlp(im, root, vi);
	case GRAPH_FMT_JAEGER:
		return imp_jaeger(im, root);
	case GRAPH_FMT_ZIPKIN:
		return imp_zipkin(im, root);
	case GRAPH_FMT_XTRACE:
		return imp_xtrace(im, root);
	default:
		return imp_fail(im, "cannot import the %s format from JSON",
				graph_format_name(fmt));
	}
}

int graph_import_buffer(const char *name, const char *buf, size_t len, enum graph_format fmt,
			struct graph *g, struct graph_import_err *err)
{
	struct imp im = { .name = name ? name : "(buffer)", .g = g, .err = err };
	size_t pos = 0, vi = 0;
	int ret = 0;

	im.nt = g->ntasks;
	im.ne = g->nevents;
	im.nd = g->nedges;
	memset(err, 0, sizeof(*err));
	err->offset = -1;
	if (fmt != GRAPH_FMT_AUTO && fmt != GRAPH_FMT_OTLP && fmt != GRAPH_FMT_JAEGER &&
	    fmt != GRAPH_FMT_ZIPKIN && fmt != GRAPH_FMT_XTRACE)
		return imp_fail(&im, "the %s format cannot be read from a JSON file",
				graph_format_name(fmt));
	if (len > IMPORT_MAX_FILE) {
		imp_fail(&im, "larger than 1 GiB");
		return -EFBIG;
	}
	for (;;) {
		json_error_t je;
		json_t *root;
		enum graph_format f;
		size_t used;

		pos = skip_space(buf, len, pos);
		if (pos == len && vi > 0)
			break;
		root = json_loadb(buf + pos, len - pos,
				  JSON_REJECT_DUPLICATES | JSON_DISABLE_EOF_CHECK, &je);
		if (!root) {
			ret = syntax_error(&im, buf, pos, &je);
			goto out_restore;
		}
		used = je.position > 0 ? (size_t)je.position : len - pos;
		f = detect(root);
		if (vi == 0 && fmt == GRAPH_FMT_AUTO) {
			if (f == GRAPH_FMT_AUTO) {
				json_decref(root);
				ret = imp_fail(
					&im,
					"not a trace file weft knows: expected an OTLP JSON object with "
					"\"resourceSpans\", a Jaeger JSON object with \"data\": "
					"[{\"spans\"...}], a Zipkin v2 list of spans (\"traceId\", \"id\") "
					"or an X-Trace list of {\"id\", \"reports\"}");
				goto out_restore;
			}
			fmt = f;
		}
		if (vi > 0 && fmt != GRAPH_FMT_OTLP) {
			long line, col;

			json_decref(root);
			place(buf, pos, &line, &col);
			ret = imp_fail(&im, "%ld:%ld: more after the %s JSON value", line, col,
				       graph_format_name(fmt));
			err->line = line;
			err->column = col;
			err->offset = (long long)pos;
			goto out_restore;
		}
		ret = import_one(&im, root, fmt, vi);
		json_decref(root);
		if (ret < 0)
			goto out_restore;
		pos += used;
		vi++;
	}
	return fmt;

out_restore:
	g->ntasks = im.nt;
	g->nevents = im.ne;
	g->nedges = im.nd;
	return ret;
}

int graph_import_file(const char *path, enum graph_format fmt, struct graph *g,
		      struct graph_import_err *err)
{
	char why[256];
	char *data;
	size_t len;
	int ret;

	memset(err, 0, sizeof(*err));
	err->offset = -1;
	ret = weft_file_read(path, IMPORT_MAX_FILE, &data, &len, why, sizeof(why));
	if (ret < 0) {
		snprintf(err->msg, sizeof(err->msg), "%s: %s", path, why);
		return ret;
	}
	ret = graph_import_buffer(path, data, len, fmt, g, err);
	free(data);
	return ret;
}
