// SPDX-License-Identifier: Apache-2.0
/*
 * The terminal Gantt chart and the JSON of one trace with its context (show.h).
 *
 * Both outputs are drawn from one view of the trace, built once: the tree and the critical
 * path (graph/critpath.h), the time the path spends in each task, and each task's events and
 * incoming edges as CSR lists, so that drawing is one pass over the lanes and the cost is
 * O(n log n) in the size of the trace, never in the size of the store.
 *
 * A lane is a fixed layout: a marker column ('*': on the critical path), the label indented
 * two columns per depth (capped, so a deep trace still leaves room for its name), the bar
 * between '|'s, and the notes.  The bar is a row of cells, each a character and a style, so
 * that the plain and coloured outputs are the same characters and differ only in escapes.
 * Widths are counted in code points: names are UTF-8 (the graph's arena makes them valid),
 * and every control character is printed as '?'.
 */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "graph/critpath.h"
#include "graph/show.h"

#define LABEL_MIN 16
#define LABEL_MAX 48
#define NOTES_MIN 28 /* columns kept for the notes after the bar */
#define BAR_MIN 10
#define INDENT_MAX 16 /* depths beyond this are not indented further */

struct view {
	const struct graph *g;
	struct graph_id128 trace;
	struct graph_tree t;
	struct graph_critpath cp;
	const struct graph_context *ctx; /* NULL unless it matches g */
	int64_t start, end;
	size_t nhosts, nevents, nedges, ncrit_tasks, nskewed;
	int64_t *crit_ns; /* node -> time on the critical path */
	size_t *ev_first, *ev; /* node -> its events (indices in g->events), by time */
	size_t *ed_first, *ed; /* node -> edges into it (indices in g->edges) */
	size_t *cs_first, *cs; /* node -> its critical-path segments (indices in cp.segs) */
};

static void view_free(struct view *v)
{
	graph_tree_free(&v->t);
	graph_critpath_free(&v->cp);
	free(v->crit_ns);
	free(v->ev_first);
	free(v->ev);
	free(v->ed_first);
	free(v->ed);
	free(v->cs_first);
	free(v->cs);
}

static int cmp_str_p(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int cmp_event_time(const void *a, const void *b, void *arg)
{
	const struct graph *g = arg;
	const struct graph_event *x = &g->events[*(const size_t *)a];
	const struct graph_event *y = &g->events[*(const size_t *)b];

	if (x->time != y->time)
		return x->time < y->time ? -1 : 1;
	return *(const size_t *)a < *(const size_t *)b ? -1 : 1;
}

/* CSR of the elements `node_of[i]` (GRAPH_TREE_NONE: not ours) over n nodes. */
static int csr(size_t nodes, const size_t *node_of, size_t nelem, size_t **first, size_t **list)
{
	size_t *pos;

	*first = calloc(nodes + 2, sizeof(**first));
	*list = malloc((nelem + 1) * sizeof(**list));
	pos = calloc(nodes + 1, sizeof(*pos));
	if (!*first || !*list || !pos) {
		free(pos);
		return -ENOMEM;
	}
	for (size_t i = 0; i < nelem; i++)
		if (node_of[i] != GRAPH_TREE_NONE)
			(*first)[node_of[i] + 1]++;
	for (size_t k = 0; k < nodes; k++)
		(*first)[k + 1] += (*first)[k];
	for (size_t i = 0; i < nelem; i++)
		if (node_of[i] != GRAPH_TREE_NONE)
			(*list)[(*first)[node_of[i]] + pos[node_of[i]]++] = i;
	free(pos);
	return 0;
}

static int view_build(struct view *v, const struct graph *g, struct graph_id128 trace,
		      const struct graph_context *ctx)
{
	const char **hosts = NULL;
	size_t *node_of = NULL, *tmp = NULL, nh = 0, big;
	int rc;

	memset(v, 0, sizeof(*v));
	v->g = g;
	v->trace = trace;
	if (ctx && ctx->ntasks == g->ntasks && ctx->nevents == g->nevents &&
	    ctx->nedges == g->nedges)
		v->ctx = ctx;
	rc = graph_tree_build(g, trace, &v->t);
	if (rc)
		return rc;
	if (!v->t.n) {
		view_free(v);
		return -ENOENT;
	}
	rc = graph_critpath_tree(g, &v->t, &v->cp);
	if (rc)
		goto out_free;
	rc = -ENOMEM;
	big = g->ntasks > g->nevents ? g->ntasks : g->nevents;
	if (g->nedges > big)
		big = g->nedges;
	if (v->cp.n > big)
		big = v->cp.n;
	node_of = malloc((big + 1) * sizeof(*node_of));
	tmp = malloc((g->ntasks + 1) * sizeof(*tmp));
	hosts = malloc((v->t.n + 1) * sizeof(*hosts));
	v->crit_ns = calloc(v->t.n, sizeof(*v->crit_ns));
	if (!node_of || !tmp || !hosts || !v->crit_ns)
		goto out_free;

	v->start = g->tasks[v->t.task[0]].start;
	v->end = g->tasks[v->t.task[0]].end;
	for (size_t i = 0; i < g->ntasks; i++)
		tmp[i] = GRAPH_TREE_NONE;
	for (size_t k = 0; k < v->t.n; k++) {
		const struct graph_task *tk = &g->tasks[v->t.task[k]];

		tmp[v->t.task[k]] = k;
		if (tk->start < v->start)
			v->start = tk->start;
		if (tk->end > v->end)
			v->end = tk->end;
		if (tk->host[0])
			hosts[nh++] = tk->host;
		v->nskewed += tk->skew != 0;
	}
	qsort(hosts, nh, sizeof(*hosts), cmp_str_p);
	for (size_t i = 0; i < nh; i++)
		v->nhosts += i == 0 || strcmp(hosts[i], hosts[i - 1]) != 0;
	for (size_t i = 0; i < v->cp.n; i++) {
		size_t k = tmp[v->cp.segs[i].task];

		if (!v->crit_ns[k])
			v->ncrit_tasks++;
		v->crit_ns[k] += v->cp.segs[i].to - v->cp.segs[i].from;
		node_of[i] = k;
	}
	if (csr(v->t.n, node_of, v->cp.n, &v->cs_first, &v->cs))
		goto out_free;

	for (size_t i = 0; i < g->nevents; i++) {
		const struct graph_event *e = &g->events[i];

		node_of[i] = graph_id128_eq(e->trace, trace) ? graph_tree_find(g, &v->t, e->task) :
							       GRAPH_TREE_NONE;
		v->nevents += node_of[i] != GRAPH_TREE_NONE;
	}
	if (csr(v->t.n, node_of, g->nevents, &v->ev_first, &v->ev))
		goto out_free;
	for (size_t k = 0; k < v->t.n; k++)
		qsort_r(v->ev + v->ev_first[k], v->ev_first[k + 1] - v->ev_first[k], sizeof(size_t),
			cmp_event_time, (void *)g);
	for (size_t i = 0; i < g->nedges; i++) {
		const struct graph_edge *e = &g->edges[i];

		node_of[i] = graph_id128_eq(e->trace, trace) ?
				     graph_tree_find(g, &v->t, e->to_task) :
				     GRAPH_TREE_NONE;
		v->nedges += node_of[i] != GRAPH_TREE_NONE;
	}
	if (csr(v->t.n, node_of, g->nedges, &v->ed_first, &v->ed))
		goto out_free;
	rc = 0;
out_free:
	free(node_of);
	free(tmp);
	free(hosts);
	if (rc)
		view_free(v);
	return rc;
}

/* ---- text ---- */

/* A duration, 3 significant digits, in the unit that reads best: 481µs, 65.9ms, 1.20s. */
static void fmt_dur(char *buf, size_t sz, int64_t ns)
{
	static const struct {
		int64_t scale;
		const char *unit;
	} units[] = { { 1000000000, "s" }, { 1000000, "ms" }, { 1000, "µs" } };
	const char *sign = ns < 0 ? "-" : "";
	double a = ns < 0 ? -(double)ns : (double)ns;

	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		double x = a / (double)units[i].scale;

		if (a < (double)units[i].scale)
			continue;
		snprintf(buf, sz, "%s%.*f%s", sign,
			 x >= 99.95 ? 0 :
			 x >= 9.995 ? 1 :
				      2,
			 x, units[i].unit);
		return;
	}
	snprintf(buf, sz, "%s%.0fns", sign, a);
}

/* Writes s with control characters as '?', at most `cols` code points; returns them. */
static size_t put_clean(FILE *f, const char *s, size_t cols)
{
	size_t n = 0;

	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		bool lead = (*p & 0xc0) != 0x80;

		if (lead && n == cols)
			break;
		n += lead;
		fputc(*p < 0x20 || *p == 0x7f ? '?' : *p, f);
	}
	return n;
}

enum style { ST_NONE = 0, ST_BAR, ST_CRIT, ST_COMMON, ST_RARE, ST_ERROR };

static const char *style_esc(enum style s)
{
	switch (s) {
	case ST_CRIT:
		return "\033[1;31m";
	case ST_COMMON:
		return "\033[2m";
	case ST_RARE:
		return "\033[1;33m";
	case ST_ERROR:
		return "\033[31m";
	default:
		return "";
	}
}

struct cell {
	char c;
	unsigned char style;
};

static size_t col_of(const struct view *v, int64_t t, size_t bar)
{
	double span = (double)(v->end - v->start);
	double x;

	if (span <= 0)
		return 0;
	x = (double)(t - v->start) * (double)bar / span;
	if (x < 0)
		return 0;
	if (x >= (double)bar)
		return bar - 1;
	return (size_t)x;
}

static void put_rfc3339(FILE *f, int64_t ns)
{
	time_t s = (time_t)(ns / 1000000000);
	struct tm tm;
	char buf[64];

	if (ns < 0 || !gmtime_r(&s, &tm) || !strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm)) {
		fprintf(f, "%" PRId64 "ns", ns);
		return;
	}
	fprintf(f, "%s.%06" PRId64 "Z", buf, (ns % 1000000000) / 1000);
}

static void put_axis(FILE *f, const struct view *v, size_t label, size_t bar)
{
	char *ax = malloc(bar + 1), mid[32], end[32];
	size_t lm, le;

	if (!ax)
		return;
	memset(ax, ' ', bar);
	ax[bar] = 0;
	fmt_dur(mid, sizeof(mid), (v->end - v->start) / 2);
	fmt_dur(end, sizeof(end), v->end - v->start);
	lm = strlen(mid);
	le = strlen(end);
	ax[0] = '0';
	/* "µ" is two bytes for one column: the labels are placed by bytes, the line is cut by
	 * code points, so a label may sit one column off; never off the end */
	if (le + 2 < bar)
		memcpy(ax + bar - le, end, le);
	if (lm + le + 6 < bar)
		memcpy(ax + bar / 2 - lm / 2, mid, lm);
	fprintf(f, "%*s|", (int)(label + 3), "");
	fputs(ax, f);
	fputs("\n", f);
	free(ax);
}

static void draw_lane(FILE *f, const struct view *v, size_t k, size_t label, size_t bar,
		      struct cell *cells, bool color)
{
	const struct graph *g = v->g;
	size_t ti = v->t.task[k];
	const struct graph_task *tk = &g->tasks[ti];
	const struct graph_task_ctx *tc = v->ctx ? &v->ctx->tasks[ti] : NULL;
	bool crit = v->crit_ns[k] > 0;
	size_t depth = v->t.depth[k] > INDENT_MAX ? INDENT_MAX : v->t.depth[k];
	size_t indent = 2 * depth, used = 0, c0, c1;
	char buf[48], buf2[48];

	/* marker and label */
	if (color && crit)
		fputs("\033[1m*", f);
	else
		fputc(crit ? '*' : ' ', f);
	fputc(' ', f);
	if (color && tk->status == GRAPH_STATUS_ERROR)
		fputs(style_esc(ST_ERROR), f);
	if (indent + 4 > label)
		indent = label > 4 ? label - 4 : 0;
	fprintf(f, "%*s", (int)indent, "");
	used = indent;
	if (tk->service[0]) {
		used += put_clean(f, tk->service, label - used);
		if (used + 2 <= label) {
			fputs(": ", f);
			used += 2;
		}
	}
	used += put_clean(f, tk->name, label - used);
	if (color && (crit || tk->status == GRAPH_STATUS_ERROR))
		fputs("\033[0m", f);
	fprintf(f, "%*s |", (int)(label - used), "");

	/* the bar: the task's span, its critical sections, its events */
	for (size_t i = 0; i < bar; i++)
		cells[i] = (struct cell){ ' ', ST_NONE };
	c0 = col_of(v, tk->start, bar);
	c1 = col_of(v, tk->end, bar);
	for (size_t i = c0; i <= c1; i++)
		cells[i] = (struct cell){ '=', ST_BAR };
	for (size_t i = v->cs_first[k]; i < v->cs_first[k + 1]; i++) {
		const struct graph_critseg *sg = &v->cp.segs[v->cs[i]];

		for (size_t j = col_of(v, sg->from, bar); j <= col_of(v, sg->to, bar) && j < bar;
		     j++)
			cells[j] = (struct cell){ '#', ST_CRIT };
	}
	for (size_t i = v->ev_first[k]; i < v->ev_first[k + 1]; i++) {
		size_t ei = v->ev[i], j = col_of(v, g->events[ei].time, bar);
		bool rare = v->ctx && v->ctx->events[ei].rare;

		if (rare || cells[j].style != ST_RARE)
			cells[j] = (struct cell){ rare ? '!' : '.', rare ? ST_RARE : ST_COMMON };
	}
	for (size_t i = 0; i < bar; i++) {
		bool esc = color && cells[i].style != ST_NONE && cells[i].style != ST_BAR;

		if (esc)
			fputs(style_esc(cells[i].style), f);
		fputc(cells[i].c, f);
		if (esc)
			fputs("\033[0m", f);
	}
	fputc('|', f);

	/* the notes */
	fmt_dur(buf, sizeof(buf), tk->start - v->start);
	fmt_dur(buf2, sizeof(buf2), tk->end - tk->start);
	fprintf(f, " @%s %s", buf, buf2);
	if (tc && tc->type_count)
		fprintf(f, " p%.0f", tc->percentile);
	if (tc && tc->type_count)
		fprintf(f, " c%" PRIu32, tc->concurrency_max);
	if (tk->skew) {
		fmt_dur(buf, sizeof(buf), tk->skew);
		fprintf(f, " %sskew %s%s%s", color ? "\033[36m" : "", tk->skew > 0 ? "+" : "", buf,
			color ? "\033[0m" : "");
	}
	if (tk->status == GRAPH_STATUS_ERROR)
		fprintf(f, " %serror%s", color ? style_esc(ST_ERROR) : "", color ? "\033[0m" : "");
	if (v->ctx) {
		for (size_t i = v->ev_first[k]; i < v->ev_first[k + 1]; i++) {
			size_t ei = v->ev[i];

			if (!v->ctx->events[ei].rare)
				continue;
			fprintf(f, " %s!", color ? style_esc(ST_RARE) : "");
			put_clean(f, g->events[ei].name, 40);
			fprintf(f, "%s (%.1f%%)", color ? "\033[0m" : "",
				100.0 * v->ctx->events[ei].share);
		}
		for (size_t i = v->ed_first[k]; i < v->ed_first[k + 1]; i++) {
			size_t di = v->ed[i];
			size_t fk = graph_tree_find(g, &v->t, g->edges[di].from_task);
			const struct graph_task *from =
				fk == GRAPH_TREE_NONE ? NULL : &g->tasks[v->t.task[fk]];

			if (!v->ctx->edges[di].rare)
				continue;
			fprintf(f, " %s^rare %s edge from ", color ? style_esc(ST_RARE) : "",
				graph_edge_kind_name(g->edges[di].kind));
			if (from && from->service[0]) {
				put_clean(f, from->service, 40);
				fputs(": ", f);
			}
			put_clean(f, from ? from->name : "?", 40);
			fprintf(f, "%s (%.1f%%)", color ? "\033[0m" : "",
				100.0 * v->ctx->edges[di].share);
		}
	}
	fputc('\n', f);
}

int graph_show_text(FILE *f, const struct graph *g, struct graph_id128 trace,
		    const struct graph_context *ctx, const struct graph_show_opts *o)
{
	struct view v;
	struct cell *cells;
	char hex[33], buf[48];
	int width = o && o->width > 0 ? o->width : GRAPH_SHOW_WIDTH;
	bool color = o && o->color;
	size_t label, bar;
	int rc;

	rc = view_build(&v, g, trace, ctx);
	if (rc)
		return rc;
	label = (size_t)width * 3 / 10;
	if (label < LABEL_MIN)
		label = LABEL_MIN;
	if (label > LABEL_MAX)
		label = LABEL_MAX;
	bar = (size_t)width > label + 4 + NOTES_MIN + BAR_MIN ?
		      (size_t)width - label - 4 - NOTES_MIN :
		      BAR_MIN;
	cells = malloc(bar * sizeof(*cells));
	if (!cells) {
		view_free(&v);
		return -ENOMEM;
	}

	graph_id128_hex(trace, hex);
	fmt_dur(buf, sizeof(buf), v.end - v.start);
	fprintf(f, "%strace %s%s  %zu task%s, %zu event%s, %zu edge%s on %zu host%s  %s  from ",
		color ? "\033[1m" : "", hex, color ? "\033[0m" : "", v.t.n, v.t.n == 1 ? "" : "s",
		v.nevents, v.nevents == 1 ? "" : "s", v.nedges, v.nedges == 1 ? "" : "s", v.nhosts,
		v.nhosts == 1 ? "" : "s", buf);
	put_rfc3339(f, v.start);
	fputc('\n', f);
	if (v.nskewed)
		fprintf(f, "clock skew corrected: %zu task%s moved (see \"skew\" on their lanes)\n",
			v.nskewed, v.nskewed == 1 ? "" : "s");
	if (!v.ctx)
		fputs("(no aggregate context: percentiles, concurrency and rarity left out)\n", f);
	put_axis(f, &v, label, bar);
	for (size_t o2 = 0; o2 < v.t.n; o2++)
		draw_lane(f, &v, v.t.order[o2], label, bar, cells, color);
	fmt_dur(buf, sizeof(buf), g->tasks[v.cp.root].end - g->tasks[v.cp.root].start);
	fprintf(f, "critical path: %zu segment%s through %zu task%s over %s\n", v.cp.n,
		v.cp.n == 1 ? "" : "s", v.ncrit_tasks, v.ncrit_tasks == 1 ? "" : "s", buf);
	fprintf(f,
		"legend: * a task on the critical path (# its time on it), = running,\n"
		"        ! a rare event, . a common one, ^ a rare edge into the task;\n"
		"        rare: seen in under %g%% of the tasks of the type (service: name);\n"
		"        @ start after the trace's start, then duration; pNN the latency's\n"
		"        percentile within its type; cN the most other tasks of the same process\n"
		"        running at once; skew: the clock-skew correction added to the task\n",
		GRAPH_RARE_SHARE * 100.0);
	free(cells);
	view_free(&v);
	return ferror(f) ? -EIO : 0;
}

/* ---- JSON ---- */

static json_t *id64_json(uint64_t id)
{
	char hex[17];

	if (!id)
		return json_null();
	graph_id64_hex(id, hex);
	return json_string(hex);
}

static json_t *attrs_json(const char *attrs)
{
	json_t *o = attrs ? json_loads(attrs, JSON_DECODE_ANY, NULL) : NULL;

	return o ? o : json_object();
}

/* json_object_set_new() that remembers a failure (out of memory) instead of checking each. */
static void put(json_t *o, const char *k, json_t *v, bool *bad)
{
	if (!v || json_object_set_new(o, k, v))
		*bad = true;
}

static void append(json_t *a, json_t *v, bool *bad)
{
	if (!v || json_array_append_new(a, v))
		*bad = true;
}

int graph_show_json_obj(const struct graph *g, struct graph_id128 trace,
			const struct graph_context *ctx, json_t **out)
{
	struct view v;
	json_t *root, *tasks, *edges, *path;
	char hex[33];
	bool bad = false;
	int rc;

	rc = view_build(&v, g, trace, ctx);
	if (rc)
		return rc;
	root = json_object();
	tasks = json_array();
	edges = json_array();
	path = json_array();
	graph_id128_hex(trace, hex);
	put(root, "trace", json_string(hex), &bad);
	put(root, "start", json_integer(v.start), &bad);
	put(root, "end", json_integer(v.end), &bad);
	put(root, "duration", json_integer(v.end - v.start), &bad);
	put(root, "hosts", json_integer((json_int_t)v.nhosts), &bad);
	put(root, "rare_share", json_real(GRAPH_RARE_SHARE), &bad);
	put(root, "context", json_boolean(v.ctx != NULL), &bad);
	put(root, "skewed_tasks", json_integer((json_int_t)v.nskewed), &bad);

	for (size_t o = 0; o < v.t.n && !bad; o++) {
		size_t k = v.t.order[o], ti = v.t.task[k];
		const struct graph_task *tk = &g->tasks[ti];
		json_t *t = json_object(), *evs = json_array();
		size_t p = v.t.parent[k];

		put(t, "id", id64_json(tk->id), &bad);
		put(t, "parent", id64_json(tk->parent), &bad);
		put(t, "tree_parent",
		    p == GRAPH_TREE_NONE ? json_null() : id64_json(g->tasks[v.t.task[p]].id), &bad);
		put(t, "depth", json_integer((json_int_t)v.t.depth[k]), &bad);
		put(t, "service", json_string(tk->service), &bad);
		put(t, "name", json_string(tk->name), &bad);
		put(t, "host", json_string(tk->host), &bad);
		put(t, "pid", json_integer(tk->pid), &bad);
		put(t, "tid", json_integer(tk->tid), &bad);
		put(t, "start", json_integer(tk->start), &bad);
		put(t, "end", json_integer(tk->end), &bad);
		put(t, "offset", json_integer(tk->start - v.start), &bad);
		put(t, "duration", json_integer(tk->end - tk->start), &bad);
		put(t, "skew", json_integer(tk->skew), &bad);
		put(t, "status", json_string(graph_status_name(tk->status)), &bad);
		put(t, "source", json_string(graph_source_name(tk->source)), &bad);
		put(t, "critical", json_boolean(v.crit_ns[k] > 0), &bad);
		put(t, "critical_ns", json_integer(v.crit_ns[k]), &bad);
		if (v.ctx) {
			const struct graph_task_ctx *tc = &v.ctx->tasks[ti];

			put(t, "type_count", json_integer((json_int_t)tc->type_count), &bad);
			put(t, "percentile", json_real(tc->percentile), &bad);
			put(t, "hist_bin", json_integer(tc->hist_bin), &bad);
			put(t, "concurrency", json_integer(tc->concurrency_max), &bad);
		}
		put(t, "attrs", attrs_json(tk->attrs), &bad);
		for (size_t i = v.ev_first[k]; i < v.ev_first[k + 1]; i++) {
			size_t ei = v.ev[i];
			const struct graph_event *e = &g->events[ei];
			json_t *je = json_object();

			put(je, "name", json_string(e->name), &bad);
			put(je, "id", id64_json(e->id), &bad);
			put(je, "time", json_integer(e->time), &bad);
			put(je, "offset", json_integer(e->time - v.start), &bad);
			if (v.ctx) {
				put(je, "share", json_real(v.ctx->events[ei].share), &bad);
				put(je, "rare", json_boolean(v.ctx->events[ei].rare), &bad);
			}
			put(je, "attrs", attrs_json(e->attrs), &bad);
			append(evs, je, &bad);
		}
		put(t, "events", evs, &bad);
		append(tasks, t, &bad);
	}
	for (size_t i = 0; i < g->nedges && !bad; i++) {
		const struct graph_edge *e = &g->edges[i];
		json_t *je;

		if (!graph_id128_eq(e->trace, trace))
			continue;
		je = json_object();
		put(je, "kind", json_string(graph_edge_kind_name(e->kind)), &bad);
		put(je, "from", id64_json(e->from_task), &bad);
		put(je, "from_event", id64_json(e->from_event), &bad);
		put(je, "to", id64_json(e->to_task), &bad);
		put(je, "to_event", id64_json(e->to_event), &bad);
		put(je, "source", json_string(graph_source_name(e->source)), &bad);
		if (v.ctx) {
			put(je, "share", json_real(v.ctx->edges[i].share), &bad);
			put(je, "rare", json_boolean(v.ctx->edges[i].rare), &bad);
		}
		append(edges, je, &bad);
	}
	for (size_t i = 0; i < v.cp.n && !bad; i++) {
		json_t *js = json_object();

		put(js, "task", id64_json(g->tasks[v.cp.segs[i].task].id), &bad);
		put(js, "from", json_integer(v.cp.segs[i].from), &bad);
		put(js, "to", json_integer(v.cp.segs[i].to), &bad);
		append(path, js, &bad);
	}
	put(root, "root", id64_json(g->tasks[v.cp.root].id), &bad);
	put(root, "tasks", tasks, &bad);
	put(root, "edges", edges, &bad);
	put(root, "critical_path", path, &bad);
	view_free(&v);
	if (bad) {
		json_decref(root);
		return -ENOMEM;
	}
	*out = root;
	return 0;
}

int graph_show_json(FILE *f, const struct graph *g, struct graph_id128 trace,
		    const struct graph_context *ctx)
{
	json_t *root;
	int rc = graph_show_json_obj(g, trace, ctx, &root);

	if (rc)
		return rc;
	rc = -EIO;
	if (!json_dumpf(root, f, JSON_INDENT(2) | JSON_PRESERVE_ORDER)) {
		fputc('\n', f);
		rc = ferror(f) ? -EIO : 0;
	}
	json_decref(root);
	return rc;
}
