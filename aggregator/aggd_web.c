// SPDX-License-Identifier: Apache-2.0
/*
 * What the web face shows of the daemon (aggregator/web.h), built on the daemon's thread and
 * handed over whole: the cluster's status (the JSON of `weft status --format json`), each
 * closed window of each query (docs/output.md's window object plus the cluster's part), and
 * /metrics: the daemon's health and, for queries submitted with --export-metrics, their
 * latest window (docs/http.md, "/metrics").
 *
 * The web server's thread never reads struct aggd: everything it serves is a string built
 * here.  Status and metrics are rebuilt at most every WEB_PUBLISH_NS, windows as they close.
 *
 * Must never: slow the merge noticeably (a window is formatted once, when it closes; the
 * status at most four times a second), or write a metric line the format does not allow
 * (names are [a-zA-Z_][a-zA-Z0-9_]*, label values escaped: web_prom_escape()).
 */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aggregator/aggd.h"
#include "agent/result.h"
#include "aggregator/aggd_int.h"
#include "aggregator/aggd_kx.h"
#include "aggregator/web.h"
#include "base/log.h"
#include "kernel/aggkind.h"
#include "kernel/aggstate.h"

#define WEB_PUBLISH_NS 250000000ULL /* 250 ms */
#define EXPORT_KEY "export_metrics."

int aggd_web_open(struct aggd *a, char *err, size_t errsz)
{
	struct web_opts wo = { .sz = sizeof(wo),
			       .listen = a->o.http,
			       .token_file = a->o.http_token,
			       .graph_store = a->gs ? a->gpath : a->o.graph_store,
			       .cluster = true };

	a->web = web_start(&wo, err, errsz);
	if (!a->web)
		return -errno;
	aggd_web_tick(a); /* the first documents, before anyone asks */
	return 0;
}

/* The mark outlives restarts: a row of the store's meta table per exported query. */
int aggd_web_export_save(struct aggd *a, struct query *q)
{
	char key[64];

	snprintf(key, sizeof(key), EXPORT_KEY "%" PRIu64, q->id);
	aggd_txn_begin(a);
	return aggd_store_meta_set(a->store, key, 1);
}

int aggd_web_export_load(struct aggd *a, struct query *q)
{
	char key[64];
	uint64_t v = 0;

	snprintf(key, sizeof(key), EXPORT_KEY "%" PRIu64, q->id);
	q->export_metrics = aggd_store_meta_get(a->store, key, &v) == 0 && v;
	return 0;
}

/* ---- metrics ---- */

/* A metric or label name from a column name: [a-zA-Z_][a-zA-Z0-9_]*. */
static void prom_name(char *out, size_t size, const char *s)
{
	size_t n = 0;

	if (*s >= '0' && *s <= '9' && n + 1 < size)
		out[n++] = '_';
	for (; *s && n + 1 < size; s++)
		out[n++] = ((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
			    (*s >= '0' && *s <= '9') || *s == '_') ?
				   *s :
				   '_';
	out[n] = 0;
}

/* One sample line: FAMILY \t TYPE \t HELP \t the line.  Sorted and grouped at publishing. */
static void sample(FILE *f, const char *family, const char *type, const char *help,
		   const char *labels, const char *suffix_labels, double v)
{
	fprintf(f, "%s\t%s\t%s\t%s{%s%s%s} %.17g\n", family, type, help, family, labels,
		*labels && *suffix_labels ? "," : "", suffix_labels, v);
}

/* The latest window of an exported query as sample lines (see sample()). */
static char *window_metrics(const struct query *q, json_t *win)
{
	const struct plan *p = aggd_query_wplan(q);
	json_t *rows = json_object_get(win, "rows"), *row;
	char *buf = NULL, esc[1024], nm[128], fam[160], help[256];
	size_t len = 0, i;
	FILE *f = open_memstream(&buf, &len);

	if (!f)
		return NULL;
	json_array_foreach(rows, i, row)
	{
		char labels[4096];
		size_t ln;

		ln = (size_t)snprintf(labels, sizeof(labels), "query_id=\"%" PRIu64 "\"", q->id);
		for (int c = 0; c < p->ncols && ln < sizeof(labels); c++) {
			json_t *v = json_object_get(row, p->cols[c].name);
			char num[64];
			const char *s = num;

			if (p->cols[c].is_agg)
				continue;
			if (json_is_string(v))
				s = json_string_value(v);
			else if (json_is_integer(v))
				snprintf(num, sizeof(num), "%" JSON_INTEGER_FORMAT,
					 json_integer_value(v));
			else if (json_is_real(v))
				snprintf(num, sizeof(num), "%.17g", json_real_value(v));
			else
				num[0] = 0;
			prom_name(nm, sizeof(nm), p->cols[c].name);
			if (strcmp(nm, "query_id") == 0 || strcmp(nm, "quantile") == 0)
				snprintf(nm, sizeof(nm), "key_%s", p->cols[c].name);
			web_prom_escape(esc, sizeof(esc), s);
			ln += (size_t)snprintf(labels + ln, sizeof(labels) - ln, ",%s=\"%s\"", nm,
					       esc);
		}
		if (ln >= sizeof(labels))
			continue; /* keys too long for a line: left out */
		for (int c = 0; c < p->ncols; c++) {
			json_t *v = json_object_get(row, p->cols[c].name);
			const struct agg_spec *sp;

			if (!p->cols[c].is_agg || !json_is_number(v))
				continue; /* histograms and empty values are not exported */
			sp = &p->aggs[p->cols[c].idx].spec;
			prom_name(nm, sizeof(nm), p->cols[c].name);
			snprintf(fam, sizeof(fam), "weft_query_%s", nm);
			if (sp->kind == AGG_QUANTILE) {
				char ql[64];

				snprintf(help, sizeof(help),
					 "Quantile column %s of the latest window", nm);
				snprintf(ql, sizeof(ql), "quantile=\"%g\"", sp->q);
				sample(f, fam, "summary", help, labels, ql, json_number_value(v));
			} else {
				snprintf(help, sizeof(help), "Column %s (%s) of the latest window",
					 nm, agg_kind_name(sp->kind));
				sample(f, fam, "gauge", help, labels, "", json_number_value(v));
			}
		}
	}
	if (fclose(f)) {
		free(buf);
		return NULL;
	}
	return buf;
}

static int line_cmp(const void *x, const void *y)
{
	const char *a = *(const char *const *)x, *b = *(const char *const *)y;
	size_t la = strcspn(a, "\t"), lb = strcspn(b, "\t");
	int c = strncmp(a, b, la < lb ? la : lb);

	if (c)
		return c;
	if (la != lb)
		return la < lb ? -1 : 1;
	return a < b ? -1 : a > b; /* stable: the order they were written in */
}

/* Exported queries' sample lines grouped by family, each family's HELP and TYPE once. */
static void put_exported(struct aggd *a, FILE *f)
{
	char *all = NULL, **lines = NULL, *save = NULL;
	size_t len = 0, n = 0, cap = 0;
	FILE *m = open_memstream(&all, &len);
	const char *prev = NULL;
	size_t prevlen = 0;

	if (!m)
		return;
	for (size_t i = 0; i < a->nq; i++)
		if (a->q[i]->export_metrics && a->q[i]->metrics)
			fputs(a->q[i]->metrics, m);
	if (fclose(m)) {
		free(all);
		return;
	}
	for (char *l = strtok_r(all, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		if (n == cap) {
			char **nl = realloc(lines, (cap = cap ? cap * 2 : 64) * sizeof(*nl));

			if (!nl)
				break;
			lines = nl;
		}
		lines[n++] = l;
	}
	if (n)
		qsort(lines, n, sizeof(*lines), line_cmp);
	for (size_t i = 0; i < n; i++) {
		char *fam = lines[i], *type, *help, *line;
		size_t fl = strcspn(fam, "\t");

		type = fam + fl + 1;
		help = type + strcspn(type, "\t") + 1;
		line = help + strcspn(help, "\t") + 1;
		if (!prev || prevlen != fl || strncmp(prev, fam, fl) != 0)
			fprintf(f, "# HELP %.*s %.*s\n# TYPE %.*s %.*s\n", (int)fl, fam,
				(int)strcspn(help, "\t"), help, (int)fl, fam,
				(int)strcspn(type, "\t"), type);
		prev = fam;
		prevlen = fl;
		fprintf(f, "%s\n", line);
	}
	free(lines);
	free(all);
}

static char *metrics(struct aggd *a)
{
	char *buf = NULL, esc[512];
	size_t len = 0, alive = 0, dead = 0, running = 0, ended = 0;
	FILE *f = open_memstream(&buf, &len);
	uint64_t rejected = a->rejected + aggd_guard_failed(a->guard) + aggd_parent_rejected(a);

	if (!f)
		return NULL;
	for (struct peer *p = a->peers; p; p = p->next)
		if (p->hello && aggd_peer_is_sender(p))
			p->alive ? alive++ : dead++;
	for (size_t i = 0; i < a->nq; i++)
		a->q[i]->ended ? ended++ : running++;
	fprintf(f,
		"# HELP weft_agents Agents and child aggregators known, by liveness.\n"
		"# TYPE weft_agents gauge\n"
		"weft_agents{state=\"alive\"} %zu\nweft_agents{state=\"expired\"} %zu\n"
		"# HELP weft_queries Queries known, by state (ended ones are kept 10 minutes).\n"
		"# TYPE weft_queries gauge\n"
		"weft_queries{state=\"running\"} %zu\nweft_queries{state=\"ended\"} %zu\n"
		"# HELP weft_windows_closed_total Windows closed and emitted (revisions not "
		"counted).\n"
		"# TYPE weft_windows_closed_total counter\nweft_windows_closed_total %" PRIu64 "\n"
		"# HELP weft_window_revisions_total Windows emitted again with late partials.\n"
		"# TYPE weft_window_revisions_total counter\nweft_window_revisions_total %" PRIu64
		"\n"
		"# HELP weft_partials_merged_total Partials merged into a window.\n"
		"# TYPE weft_partials_merged_total counter\nweft_partials_merged_total %" PRIu64
		"\n"
		"# HELP weft_rejected_total Messages and connections refused by a check.\n"
		"# TYPE weft_rejected_total counter\nweft_rejected_total %" PRIu64 "\n",
		alive, dead, running, ended, a->windows_closed, a->revisions, a->partials_merged,
		rejected);
	fputs("# HELP weft_agent_spooled Partials an agent holds unacknowledged, as it last "
	      "said.\n# TYPE weft_agent_spooled gauge\n",
	      f);
	for (struct peer *p = a->peers; p; p = p->next) {
		if (!p->hello || !aggd_peer_is_sender(p))
			continue;
		web_prom_escape(esc, sizeof(esc), p->host);
		fprintf(f, "weft_agent_spooled{host=\"%s\"} %" PRIu64 "\n", esc, p->spooled);
	}
	{
		struct aggd_gfwd_stats fs;
		char url[1024], e[256];

		if (aggd_gfwd_stats(a, &fs, url, sizeof(url), e, sizeof(e)))
			fprintf(f,
				"# HELP weft_graph_forward_spans_total Spans of stitched graphs "
				"forwarded to the collector, by outcome.\n"
				"# TYPE weft_graph_forward_spans_total counter\n"
				"weft_graph_forward_spans_total{outcome=\"sent\"} %" PRIu64 "\n"
				"weft_graph_forward_spans_total{outcome=\"dropped\"} %" PRIu64 "\n"
				"weft_graph_forward_spans_total{outcome=\"rejected\"} %" PRIu64 "\n"
				"# HELP weft_graph_forward_spool_spans Spans waiting in the "
				"forwarding spool.\n"
				"# TYPE weft_graph_forward_spool_spans gauge\n"
				"weft_graph_forward_spool_spans %" PRIu64 "\n"
				"# HELP weft_graph_forward_pending Graph elements waiting in the "
				"aggregator to be forwarded.\n"
				"# TYPE weft_graph_forward_pending gauge\n"
				"weft_graph_forward_pending %" PRIu64 "\n",
				fs.sent, fs.dropped, fs.rejected, fs.queued, fs.pending);
	}
	if (a->gs)
		fprintf(f,
			"# HELP weft_graph_retained_traces_total Traces dropped from the graph store "
			"by --graph-max-age and --graph-max-size.\n"
			"# TYPE weft_graph_retained_traces_total counter\n"
			"weft_graph_retained_traces_total %" PRIu64 "\n",
			a->gst.retained);
	if (a->kx) {
		struct aggd_kx_stats ks;

		aggd_kx_stats(a->kx, &ks);
		fprintf(f,
			"# HELP weft_graph_kernel_edges_total Kernel message edges across hosts "
			"(a send matched with another agent's receive), by outcome.\n"
			"# TYPE weft_graph_kernel_edges_total counter\n"
			"weft_graph_kernel_edges_total{outcome=\"matched\"} %" PRIu64 "\n"
			"weft_graph_kernel_edges_total{outcome=\"split\"} %" PRIu64 "\n"
			"weft_graph_kernel_edges_total{outcome=\"bad\"} %" PRIu64 "\n"
			"weft_graph_kernel_edges_total{outcome=\"dropped\"} %" PRIu64 "\n",
			ks.matched, ks.split, ks.bad, ks.dropped);
	}
	if (a->has_parent)
		fprintf(f,
			"# HELP weft_parent_spool Partials spooled towards the parent aggregator.\n"
			"# TYPE weft_parent_spool gauge\nweft_parent_spool %zu\n",
			a->par.nrows);
	put_exported(a, f);
	if (fclose(f)) {
		free(buf);
		return NULL;
	}
	return buf;
}

void aggd_web_tick(struct aggd *a)
{
	uint64_t now = aggd_mono_ns();

	if (!a->web || now < a->web_next)
		return;
	a->web_next = now + WEB_PUBLISH_NS;
	web_publish(a->web, WEB_DOC_CLUSTER, aggd_status_json_all(a));
	web_publish(a->web, WEB_DOC_METRICS, metrics(a));
}

/* ---- windows ---- */

static json_t *str_list(const char *const *v, size_t n)
{
	json_t *arr = json_array();

	for (size_t i = 0; arr && i < n; i++)
		json_array_append_new(arr, json_string(v[i]));
	return arr;
}

/*
 * The window's sketch of each quantile column, merged over all its groups (docs/http.md,
 * "sketches"): {"COL": {"q", "n", "neg", "value", "mark", "buckets": [{min, max, count}]}}
 * with the non-empty log-linear buckets (kernel/weft_sketch.h) and mark the index of the bucket
 * holding the quantile's rank.  NULL when the plan has no quantile column or on error.
 */
static json_t *window_sketches(const struct query *q, const struct agent_table *t)
{
	const struct plan *p = q->plan;
	Weft__Group **groups = NULL;
	size_t ngroups = 0;
	json_t *out = NULL;
	void *acc = NULL, *one = NULL;
	int c;

	for (c = 0; c < p->ncols; c++)
		if (p->cols[c].is_agg && p->aggs[p->cols[c].idx].spec.kind == AGG_QUANTILE)
			break;
	if (c == p->ncols || agent_table_to_groups(t, &groups, &ngroups))
		return NULL;
	out = json_object();
	for (; out && c < p->ncols; c++) {
		const struct agg_spec *sp =
			p->cols[c].is_agg ? &p->aggs[p->cols[c].idx].spec : NULL;
		struct agg_result r = { 0 };
		struct agg_bucket *b = NULL;
		size_t nb = 0, mark = 0, size;
		json_t *arr, *sk;

		if (!sp || sp->kind != AGG_QUANTILE)
			continue;
		size = agg_state_size(sp);
		free(acc);
		free(one);
		acc = calloc(1, size);
		one = malloc(size);
		if (!acc || !one)
			break;
		for (size_t g = 0; g < ngroups; g++) {
			const ProtobufCBinaryData *st;

			if ((size_t)p->cols[c].idx >= groups[g]->n_states)
				continue;
			st = &groups[g]->states[p->cols[c].idx];
			if (agg_state_decode(sp, one, st->data, st->len) == 0)
				agg_state_merge(sp, acc, one);
		}
		if (agg_state_final(sp, acc, &r) || agg_quantile_buckets(sp, acc, &b, &nb, &mark))
			continue;
		arr = json_array();
		for (size_t i = 0; arr && i < nb; i++)
			json_array_append_new(arr, json_pack("{s:I, s:I, s:I}", "min",
							     (json_int_t)b[i].min, "max",
							     (json_int_t)b[i].max, "count",
							     (json_int_t)b[i].count));
		free(b);
		sk = json_pack("{s:f, s:I, s:I, s:o, s:I, s:o}", "q", sp->q, "n", (json_int_t)r.n,
			       "neg", (json_int_t)r.neg, "value",
			       r.empty ? json_null() : json_real(r.value), "mark", (json_int_t)mark,
			       "buckets", arr ? arr : json_array());
		agg_result_release(&r);
		if (sk)
			json_object_set_new(out, p->cols[c].name, sk);
	}
	free(acc);
	free(one);
	agent_groups_free(groups, ngroups);
	return out;
}

void aggd_web_window(struct aggd *a, struct query *q, const struct aggd_window_view *v)
{
	struct agent_window_stats st = { .index = v->index,
					 .start_ns = v->start_ns,
					 .end_ns = v->end_ns,
					 .misses = v->misses,
					 .groups = agent_table_groups(v->table) };
	json_t *win, *aggs, *sk;
	char *buf = NULL, *out;
	size_t len = 0;
	FILE *m;
	int rc;

	if (!a->web)
		return;
	memcpy(st.drops, v->drops, sizeof(st.drops));
	m = open_memstream(&buf, &len);
	if (!m)
		return;
	rc = agent_table_print(v->table, AGENT_FMT_JSON, &st, m);
	if (fclose(m) || rc) {
		free(buf);
		return;
	}
	win = json_loads(buf, 0, NULL);
	free(buf);
	if (!win)
		return;
	aggs = json_array();
	for (int c = 0; c < aggd_query_wplan(q)->ncols && aggs; c++) {
		const struct plan_column *col = &aggd_query_wplan(q)->cols[c];
		const struct agg_spec *sp =
			col->is_agg ? &aggd_query_wplan(q)->aggs[col->idx].spec : NULL;

		json_array_append_new(
			aggs, sp ? json_pack("{s:s, s:s, s:f}", "name", col->name, "kind",
					     agg_kind_name(sp->kind), "q", sp->q) :
				   json_pack("{s:s, s:s}", "name", col->name, "kind", "key"));
	}
	json_object_set_new(win, "kinds", aggs);
	json_object_set_new(win, "query_id", json_integer((json_int_t)q->id));
	json_object_set_new(win, "revision", json_integer(v->revision));
	json_object_set_new(win, "last", json_boolean(v->last));
	json_object_set_new(win, "overflow", json_integer((json_int_t)v->overflow));
	json_object_set_new(win, "hosts", str_list(v->hosts, v->nhosts));
	json_object_set_new(win, "missing", str_list(v->missing, v->nmissing));
	sk = window_sketches(q, v->table);
	if (sk)
		json_object_set_new(win, "sketches", sk);
	if (q->export_metrics && (!q->metrics || v->index >= q->metrics_index)) {
		q->metrics_index = v->index;
		free(q->metrics);
		q->metrics = window_metrics(q, win);
	}
	out = json_dumps(win, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(win);
	web_window(a->web, q->id, v->index, out);
}
