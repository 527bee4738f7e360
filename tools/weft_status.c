// SPDX-License-Identifier: Apache-2.0
/*
 * `weft status`: a cluster's agents and queries, as the aggregator sees them.  Also the
 * connection options every cluster client shares (tool_cluster_*), used by `weft submit`
 * and `weft cancel` too (tools/weft_cluster.h).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "aggregator/aggd.h"
#include "base/text.h"
#include "base/units.h"
#include "tools/weft.h"
#include "tools/weft_cluster.h"

/* clang-format off */
static const char status_help[] =
	"Usage: weft status --to ENDPOINT --server-key FILE --key FILE [OPTIONS] [ID]\n"
	"\n"
	"Asks a cluster aggregator for its agents and queries and prints them.\n"
	"\n"
	"Agents (and child aggregators): the host name results are keyed by, its role, whether\n"
	"it is alive (it is expired after 3 silent heartbeat intervals), how long ago it was\n"
	"last heard from, its weft version and kernel, the queries it runs, the partials it\n"
	"holds unacknowledged, the part of its machine it traces (SCOPE: \"all\", or the\n"
	"netns:PATH or cgroup:PATH of its --scope), and the kernel features it has.\n"
	"\n"
	"Queries: the id, whether it runs or has ended, the windows emitted, the agents\n"
	"running it, and the text; then, per query, the errors agents reported and the\n"
	"partials that came too late to merge.  With ID, only that query.\n"
	"\n"
	CLUSTER_OPTIONS_HELP
	"      --format FMT       text (default) or json (one object)\n"
	"  -v, --verbose          debug detail on stderr\n"
	"  -h, --help             this text\n"
	"\n"
	"Exit status: 0 success, 1 the aggregator could not be reached or refused this key,\n"
	"2 bad command line.\n";
/* clang-format on */

/* ---- shared by the cluster clients ---- */

_Static_assert(AGGD_CLIENT_TIMEOUT_MS == 5000, "CLUSTER_OPTIONS_HELP says 5s");

int tool_cluster_opt(struct tool_cluster *tc, int c, const char *arg)
{
	switch (c) {
	case 'T':
		tc->to = arg;
		return 1;
	case 'S':
		tc->server_key = arg;
		return 1;
	case 'K':
		tc->key = arg;
		return 1;
	case 'W': {
		uint64_t ns;

		if (units_duration_parse(arg, UNITS_NS_PER_SEC, &ns) || ns < 100000000ULL ||
		    ns > 3600ULL * 1000000000ULL) {
			fprintf(stderr,
				"weft: --timeout takes a duration from 100ms to 1h, not '%s'\n",
				arg);
			return -1;
		}
		tc->timeout_ms = (int)(ns / 1000000ULL);
		return 1;
	}
	default:
		return 0;
	}
}

struct aggd_client *tool_cluster_connect(struct tool_cluster *tc)
{
	struct aggd_client_opts o = { .sz = sizeof(o) };
	struct aggd_client *c;
	char err[1024];

	if (!tc->to)
		tc->to = getenv("WEFT_AGGREGATOR");
	if (!tc->server_key)
		tc->server_key = getenv("WEFT_SERVER_KEY");
	if (!tc->key)
		tc->key = getenv("WEFT_KEY");
	if (!tc->to || !tc->server_key || !tc->key) {
		fprintf(stderr, "weft: missing %s (or $%s)\n",
			!tc->to		? "--to ENDPOINT" :
			!tc->server_key ? "--server-key FILE" :
					  "--key FILE",
			!tc->to		? "WEFT_AGGREGATOR" :
			!tc->server_key ? "WEFT_SERVER_KEY" :
					  "WEFT_KEY");
		tc->usage_error = true;
		return NULL;
	}
	o.endpoint = tc->to;
	o.server_key_file = tc->server_key;
	o.key_file = tc->key;
	o.timeout_ms = tc->timeout_ms;
	c = aggd_client_connect(&o, err, sizeof(err));
	if (!c)
		fprintf(stderr, "weft: %s\n", err);
	return c;
}

/*
 * Waits for the aggregator's answer to the request just sent: the first StatusReply or
 * Error.  Other messages (results of a subscription) are dropped, and so are receive errors
 * (aggd_client_recv() reconnects): 1 with *out, or 0 when timeout_ms (0: the default) passed.
 */
int tool_cluster_reply(struct aggd_client *c, int timeout_ms, Weft__Envelope **out)
{
	return tool_cluster_reply_other(c, timeout_ms, out, NULL, NULL);
}

/* Whether an answer is to the caller's last request: one that names the request it answers
 * must name that one (an older aggregator names none: then any is). */
static bool reply_is_ours(const struct aggd_client *c, bool has, uint64_t in_reply_to)
{
	return !has || in_reply_to == aggd_client_request_seq(c);
}

int tool_cluster_reply_other(struct aggd_client *c, int timeout_ms, Weft__Envelope **out,
			     void (*other)(void *ctx, Weft__Envelope *e), void *ctx)
{
	struct timespec t0, t1;

	if (timeout_ms <= 0)
		timeout_ms = AGGD_CLIENT_TIMEOUT_MS;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		long left;
		int rc;

		clock_gettime(CLOCK_MONOTONIC, &t1);
		left = timeout_ms -
		       ((t1.tv_sec - t0.tv_sec) * 1000L + (t1.tv_nsec - t0.tv_nsec) / 1000000L);
		if (left <= 0)
			return 0;
		rc = aggd_client_recv(c, (int)left, out);
		if (rc <= 0)
			continue;
		if (((*out)->body_case == WEFT__ENVELOPE__BODY_STATUS_REPLY &&
		     reply_is_ours(c, (*out)->status_reply->has_in_reply_to,
				   (*out)->status_reply->in_reply_to)) ||
		    ((*out)->body_case == WEFT__ENVELOPE__BODY_ERROR &&
		     (!other || (*out)->error->has_in_reply_to) &&
		     reply_is_ours(c, (*out)->error->has_in_reply_to, (*out)->error->in_reply_to)))
			return 1;
		if (other)
			other(ctx, *out); /* takes it */
		else
			wire_free(*out);
		*out = NULL;
	}
}

/* ---- the end of a stream query's rows ---- */

static uint64_t rows_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static bool rows_has(char *const *v, size_t n, const char *h)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(v[i], h) == 0)
			return true;
	return false;
}

static void rows_add(char ***v, size_t *n, const char *h)
{
	char **nv;

	if (rows_has(*v, *n, h) || *n >= 65536)
		return;
	nv = realloc(*v, (*n + 1) * sizeof(**v));
	if (!nv)
		return;
	*v = nv;
	if (((*v)[*n] = strdup(h)))
		(*n)++;
}

void tool_rows_batch(struct tool_rows_wait *w, const Weft__RowBatch *b)
{
	if (b->has_last && b->last)
		rows_add(&w->got, &w->ngot, b->host);
}

void tool_rows_result(struct tool_rows_wait *w, const Weft__Result *r)
{
	if (!r->last)
		return;
	for (size_t i = 0; i < r->n_hosts; i++)
		rows_add(&w->need, &w->nneed, r->hosts[i]);
	for (size_t i = 0; i < r->n_missing; i++)
		rows_add(&w->need, &w->nneed, r->missing[i]);
	if (!w->result_last)
		w->deadline_ms = rows_now_ms() + TOOL_ROWS_GRACE_MS;
	w->result_last = true;
}

bool tool_rows_done(struct tool_rows_wait *w, const char *who, uint64_t query_id)
{
	bool all = true;

	if (!w->result_last)
		return false;
	for (size_t i = 0; i < w->nneed; i++)
		all &= rows_has(w->got, w->ngot, w->need[i]);
	if (all)
		return true;
	if (rows_now_ms() < w->deadline_ms)
		return false;
	fprintf(stderr, "%s: query %" PRIu64 ": the last rows of", who, query_id);
	for (size_t i = 0, k = 0; i < w->nneed; i++)
		if (!rows_has(w->got, w->ngot, w->need[i]))
			fprintf(stderr, "%s %s", k++ ? "," : "", w->need[i]);
	fprintf(stderr, " did not come within %d s: rows they send later are not here\n",
		TOOL_ROWS_GRACE_MS / 1000);
	return true;
}

void tool_rows_free(struct tool_rows_wait *w)
{
	for (size_t i = 0; i < w->ngot; i++)
		free(w->got[i]);
	for (size_t i = 0; i < w->nneed; i++)
		free(w->need[i]);
	free(w->got);
	free(w->need);
	memset(w, 0, sizeof(*w));
}

/* ---- printing ---- */

/* Query text on one line: runs of white space become one space. */
static void one_line(FILE *f, const char *s, size_t max)
{
	size_t n = 0;
	bool space = false;

	for (; s && *s && n < max; s++) {
		if (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r') {
			space = n > 0;
			continue;
		}
		if (space) {
			fputc(' ', f);
			n++;
			space = false;
		}
		fputc(*s, f);
		n++;
	}
	if (s && *s)
		fputs("...", f);
}

static int width_of(const char *s, int w)
{
	int n = (int)strlen(s ? s : "");

	return n > w ? n : w;
}

static void print_status_text(const Weft__StatusReply *r, bool one_query, FILE *f)
{
	int wh = 4, wv = 7, wk = 6, ws = 5;

	if (one_query)
		fprintf(f, "aggregator %s\n", r->aggregator);
	else
		fprintf(f, "aggregator %s: %zu agent%s, %zu quer%s, %" PRIu64 " rejected\n",
			r->aggregator, r->n_agents, r->n_agents == 1 ? "" : "s", r->n_queries,
			r->n_queries == 1 ? "y" : "ies", r->rejected);
	if (r->graph && !one_query)
		fprintf(f,
			"graph store %s: %" PRIu64 " batches, %" PRIu64 " tasks, %" PRIu64
			" events, %" PRIu64 " edges stored (%" PRIu64
			" tasks stored already); %" PRIu64 " batches refused, %" PRIu64
			" failed, %" PRIu64 " elements lost by senders; %" PRIu64
			" traces checked, %" PRIu64 " incomplete\n",
			r->graph->path, r->graph->batches, r->graph->tasks, r->graph->events,
			r->graph->edges, r->graph->replaced, r->graph->rejected, r->graph->failed,
			r->graph->lost, r->graph->checked, r->graph->incomplete);
	if (r->graph && !one_query && r->graph->has_retained) {
		const Weft__GraphStatus *g = r->graph;
		char bounds[96] = "", v[32];
		size_t n = 0;

		/* an older aggregator says no bound: then the line names none */
		if (g->has_max_age_ns)
			n += (size_t)snprintf(bounds + n, sizeof(bounds) - n,
					      " (--graph-max-age %s",
					      units_duration_format(g->max_age_ns, v, sizeof(v)));
		if (g->has_max_bytes)
			n += (size_t)snprintf(bounds + n, sizeof(bounds) - n,
					      "%s--graph-max-size %s", n ? ", " : " (",
					      units_size_format(g->max_bytes, v, sizeof(v)));
		fprintf(f, "graph store retention%s%s: %" PRIu64 " traces dropped\n", bounds,
			n ? ")" : "", g->retained);
	}
	if (r->graph && !one_query &&
	    (r->graph->kernel_matched || r->graph->kernel_split || r->graph->kernel_bad ||
	     r->graph->kernel_dropped))
		fprintf(f,
			"kernel edges across hosts: %" PRIu64 " matched, %" PRIu64
			" not joined (trace stored already), %" PRIu64 " malformed, %" PRIu64
			" forgotten early\n",
			r->graph->kernel_matched, r->graph->kernel_split, r->graph->kernel_bad,
			r->graph->kernel_dropped);
	if (r->graph && r->graph->forward && !one_query) {
		const Weft__GraphForwardStatus *w = r->graph->forward;

		fprintf(f,
			"graph forward to %s: %" PRIu64 " spans sent (%" PRIu64
			" requests), %" PRIu64 " retries, %" PRIu64 " spooled, %" PRIu64
			" waiting in the spool, %" PRIu64 " elements pending, %" PRIu64
			" dropped, %" PRIu64 " rejected, %" PRIu64 " repeated, %" PRIu64
			" late%s%s\n",
			w->url, w->sent, w->requests, w->retried, w->spooled, w->queued, w->pending,
			w->dropped, w->rejected, w->repeated, w->late,
			w->last_error && *w->last_error ? "; last error: " : "",
			w->last_error && *w->last_error ? w->last_error : "");
	}
	if (r->n_agents) {
		for (size_t i = 0; i < r->n_agents; i++) {
			wh = width_of(r->agents[i]->host, wh);
			wv = width_of(r->agents[i]->version, wv);
			wk = width_of(r->agents[i]->kernel, wk);
			ws = width_of(r->agents[i]->scope, ws);
		}
		fprintf(f, "\n%-*s  %-10s  %-5s  %9s  %-*s  %-*s  %-7s  %7s  %-*s  %s\n", wh,
			"HOST", "ROLE", "ALIVE", "LAST SEEN", wv, "VERSION", wk, "KERNEL",
			"QUERIES", "SPOOLED", ws, "SCOPE", "FEATURES");
		for (size_t i = 0; i < r->n_agents; i++) {
			const Weft__AgentStatus *a = r->agents[i];
			char seen[32], qs[64] = "-";
			size_t n = 0;

			snprintf(seen, sizeof(seen), "%.1fs", (double)a->last_seen_ms / 1000.0);
			for (size_t j = 0; j < a->n_running && n + 24 < sizeof(qs); j++)
				n += (size_t)snprintf(qs + n, sizeof(qs) - n, "%s%" PRIu64,
						      j ? "," : "", a->running[j]);
			fprintf(f, "%-*s  %-10s  %-5s  %9s  %-*s  %-*s  %-7s  %7" PRIu64 "  ", wh,
				a->host, a->role ? a->role : "agent", a->alive ? "yes" : "no", seen,
				wv, a->version, wk, a->kernel ? a->kernel : "", qs, a->spooled);
			/* the part of its machine an agent traces: all of it, or its --scope */
			fprintf(f, "%-*s  ", ws, a->scope && *a->scope ? a->scope : "all");
			for (size_t j = 0; j < a->n_features; j++)
				fprintf(f, "%s%s", j ? "," : "", a->features[j]);
			fputc('\n', f);
		}
	}
	if (r->n_queries) {
		fprintf(f, "\n%4s  %-7s  %7s  %-20s  %s\n", "ID", "STATE", "WINDOWS", "HOSTS",
			"QUERY");
		for (size_t i = 0; i < r->n_queries; i++) {
			const Weft__QueryStatus *q = r->queries[i];
			char hosts[256] = "-";
			size_t n = 0;

			for (size_t j = 0; j < q->n_hosts && n + 8 < sizeof(hosts); j++)
				n += (size_t)snprintf(hosts + n, sizeof(hosts) - n, "%s%s",
						      j ? "," : "", q->hosts[j]);
			fprintf(f, "%4" PRIu64 "  %-7s  %7" PRIu64 "  %-20s  ", q->query_id,
				q->ended ? "ended" : "running", q->windows, hosts);
			one_line(f, q->query, 200);
			fputc('\n', f);
			if (q->revisions || q->late_dropped)
				fprintf(f,
					"      %" PRIu64 " revised window%s, %" PRIu64
					" late partial%s dropped\n",
					q->revisions, q->revisions == 1 ? "" : "s", q->late_dropped,
					q->late_dropped == 1 ? "" : "s");
			if (q->n_only_hosts) {
				fputs("      only on:", f);
				for (size_t j = 0; j < q->n_only_hosts; j++)
					fprintf(f, "%s%s", j ? ", " : " ", q->only_hosts[j]);
				fputc('\n', f);
			}
			if (q->has_rows) /* a stream query */
				fprintf(f,
					"      rows: %" PRIu64 " relayed from agents, %" PRIu64
					" not relayed to a subscriber",
					q->rows, q->rows_dropped);
			if (q->has_rows && q->has_rows_kept)
				fprintf(f, ", %" PRIu64 " kept (%" PRIu64 " bytes)", q->rows_kept,
					q->rows_kept_bytes);
			if (q->has_rows)
				fputc('\n', f);
			if (q->vm_sync) { /* a side of `weft vm sync`: the pair's state */
				fprintf(f,
					"      vm sync (host query %" PRIu64
					", guest query %" PRIu64 "): ",
					q->vm_sync->host_query, q->vm_sync->guest_query);
				aggd_vm_sync_text(q->vm_sync, f);
				fputc('\n', f);
			}
			for (size_t j = 0; j < q->n_errors; j++) {
				fputs("      error: ", f);
				one_line(f, q->errors[j], 300);
				fputc('\n', f);
			}
		}
	}
}

int cmd_status(int argc, char **argv)
{
	static const struct option longopts[] = {
		CLUSTER_LONGOPTS,
		{ "format", required_argument, NULL, 'F' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct tool_cluster tc = { 0 };
	struct aggd_client *cl;
	Weft__Envelope e, *reply = NULL;
	Weft__StatusRequest req;
	bool json = false;
	uint64_t id = 0;
	int c, rc, verbose = 0, status = WEFT_EXIT_OK;

	optind = 1;
	while ((c = getopt_long(argc, argv, "vh", longopts, NULL)) != -1) {
		rc = tool_cluster_opt(&tc, c, optarg);
		if (rc < 0)
			return WEFT_EXIT_USAGE;
		if (rc)
			continue;
		switch (c) {
		case 'F':
			if (strcmp(optarg, "json") == 0 || strcmp(optarg, "text") == 0) {
				json = strcmp(optarg, "json") == 0;
				break;
			}
			fprintf(stderr, "weft: --format takes text or json, not '%s'\n", optarg);
			return WEFT_EXIT_USAGE;
		case 'v':
			verbose++;
			break;
		case 'h':
			fputs(status_help, stdout);
			return WEFT_EXIT_OK;
		default:
			fputs(status_help, stderr);
			return WEFT_EXIT_USAGE;
		}
	}
	if (optind + 1 < argc) {
		fprintf(stderr, "weft: status takes at most one query id\n");
		return WEFT_EXIT_USAGE;
	}
	if (optind < argc) {
		char *end;

		errno = 0;
		id = strtoull(argv[optind], &end, 10);
		if (errno || *end || !id) {
			fprintf(stderr, "weft: '%s' is not a query id\n", argv[optind]);
			return WEFT_EXIT_USAGE;
		}
	}
	tool_set_verbose(verbose);
	cl = tool_cluster_connect(&tc);
	if (!cl)
		return tc.usage_error ? WEFT_EXIT_USAGE : WEFT_EXIT_FAIL;
	weft__status_request__init(&req);
	if (id) {
		req.has_query_id = true;
		req.query_id = id;
	}
	weft__envelope__init(&e);
	e.body_case = WEFT__ENVELOPE__BODY_STATUS_REQUEST;
	e.status_request = &req;
	rc = aggd_client_send(cl, &e);
	if (rc == 0)
		rc = tool_cluster_reply(cl, tc.timeout_ms, &reply);
	if (rc <= 0) {
		fprintf(stderr, "weft: no status from %s: %s\n", tc.to,
			rc ? strerror(-rc) : "no answer in time");
		status = WEFT_EXIT_FAIL;
	} else if (reply->body_case == WEFT__ENVELOPE__BODY_ERROR) {
		fprintf(stderr, "weft: %s: %s\n", tc.to, reply->error->message);
		status = WEFT_EXIT_FAIL;
	} else if (json) {
		aggd_status_json(reply->status_reply, stdout);
	} else {
		print_status_text(reply->status_reply, id != 0, stdout);
	}
	wire_free(reply);
	aggd_client_free(cl);
	return status;
}
