// SPDX-License-Identifier: Apache-2.0
/*
 * `weft submit`: runs a query on every agent of a cluster.  The query is compiled here (to
 * PASS_CLANG, exactly as `weft run` compiles it, with the same diagnostics), and the object
 * and manifest go to the aggregator, which starts them on every agent (agents never
 * compile).  Then, unless --no-follow, each merged window is printed as `weft run` prints
 * one (docs/output.md), followed by the hosts merged into it and those missing, until the
 * query's last window or Ctrl-C, which only detaches: the query keeps running on the
 * cluster until its `for` ends or `weft cancel` stops it.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>
#include "agent/agent.h"
#include "agent/result.h"
#include "aggregator/aggd.h"
#include "base/text.h"
#include "compiler/compiler.h"
#include "compiler/plan.h"
#include "tools/weft.h"
#include "tools/weft_cluster.h"

/* clang-format off */
static const char submit_help[] =
	"Usage: weft submit --to ENDPOINT --server-key FILE --key FILE [OPTIONS] 'QUERY'\n"
	"       weft submit --to ENDPOINT --server-key FILE --key FILE [OPTIONS] -f FILE\n"
	"       weft submit --to ENDPOINT --server-key FILE --key FILE --attach ID\n"
	"\n"
	"Runs QUERY on every agent of a cluster and prints the merged result of each window.\n"
	"The query is compiled here (errors are reported exactly as `weft run` reports them);\n"
	"the aggregator sends the compiled object to every agent, and to agents that join\n"
	"later, and merges their partial aggregates window by window.\n"
	"\n"
	"Each window is printed as `weft run` prints one (docs/output.md), then a line naming\n"
	"the hosts merged into it and the hosts missing from it (alive agents that did not\n"
	"report before the aggregator's lateness bound, and expired agents that ran the\n"
	"query).  A window printed again with \"revision N\" holds partials that came late.\n"
	"Printing stops after the query's last window.  Ctrl-C only detaches: the query keeps\n"
	"running until its `for` ends or `weft cancel` stops it (`--attach ID` follows it\n"
	"again).  If the connection drops, weft reconnects and asks for the windows it missed.\n"
	"\n"
	"A graph query (`from ... graph`, docs/graphs.md) prints per window what its agents'\n"
	"graph batches stored in the aggregator's graph store: traces touched, tasks, events\n"
	"and edges stored; its last window adds the traces marked incomplete (`weft graph`\n"
	"reads the store).  With --format json each window is one object of type\n"
	"\"graph_window\" (docs/graphs.md \"In the cluster\").\n"
	"\n"
	"A stream of rows (a select without aggregates) prints its rows as the agents ship\n"
	"them, each with the agent's host in a first column `host` (with --format json one\n"
	"object of type \"row\" a row, with a member \"host\"): the rows of one host come in\n"
	"the order they were read there; the hosts' rows interleave as they arrive (a select\n"
	"column `host`, the builtin, stands for the host column).  At the\n"
	"end (the query's last window, or Ctrl-C) a last line counts the rows of each host\n"
	"and every row lost on the way: to a full ring buffer on an agent, not shipped by an\n"
	"agent, not relayed by the aggregator to this client (with --format json an object of\n"
	"type \"stream_end\").  A client the aggregator forgot (stopped, or too busy to send its\n"
	"heartbeats) or whose connection dropped gets the rows it missed when it comes back,\n"
	"as far as the aggregator still keeps them (weft aggregator --stream-keep), each row\n"
	"once.  The query text travels as UTF-8 of at most 64 KiB: anything\n"
	"else is refused here, before connecting (exit status 3).\n"
	"\n"
	CLUSTER_OPTIONS_HELP
	"  -f, --file FILE        read the query from FILE, a regular file ('-': standard\n"
	"                         input, e.g. a pipe)\n"
	"      --format FMT       text (default) or json: one JSON object per window, with the\n"
	"                         members of docs/output.md and query_id, revision, last,\n"
	"                         hosts, missing, late_dropped, results_dropped; or folded:\n"
	"                         one `frames count` line a group, for flame graphs\n"
	"                         (docs/output.md)\n"
	"      --no-follow        submit, print the query's id on standard output and return\n"
	"      --export-metrics   the aggregator shows the query's latest window in its\n"
	"                         /metrics for Prometheus (`weft aggregator --http`): numbers\n"
	"                         as gauges, quantiles as summaries, the group keys as labels\n"
	"                         (docs/http.md)\n"
	"      --only-host NAME   run the query only on the agent NAME (its --host name),\n"
	"                         of those connected to this aggregator; repeat for several.\n"
	"                         Others, and agents that join later under other names, never\n"
	"                         start it (default: every agent)\n"
	"      --attach ID        submit nothing: follow query ID, submitted earlier (e.g.\n"
	"                         after Ctrl-C), from the oldest window the aggregator still\n"
	"                         retains\n"
	"  -v, --verbose          show the compile cache and debug detail\n"
	"  -h, --help             this text\n"
	"\n"
	"Example:\n"
	"  weft submit --to tcp://agg.example:7470 --server-key aggregator.pub \\\n"
	"              --key alice.key 'from syscall:write group by host\n"
	"              select sum(args.count) every 10s'\n"
	"\n"
	"Environment: WEFT_BTF=FILE and WEFT_TRACEFS=DIR compile against another kernel's\n"
	"types and tracepoint formats (the agents' kernels, where they differ from this\n"
	"one's); WEFT_RAW_TP=0 keeps kernel:sockets on classic tracepoints.\n"
	"\n"
	"Exit status: 0 the query ended (or --no-follow, or detached by Ctrl-C), 1 the\n"
	"aggregator could not be reached or refused the query, 2 bad command line, 3 the\n"
	"query has errors.\n";
/* clang-format on */

static uint64_t clock_ns(clockid_t c)
{
	struct timespec ts;

	clock_gettime(c, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* A CLOCK_REALTIME instant as CLOCK_MONOTONIC, which agent_window_stats speaks. */
static uint64_t real_to_mono(uint64_t t)
{
	uint64_t real = clock_ns(CLOCK_REALTIME), mono = clock_ns(CLOCK_MONOTONIC);

	if (!t)
		return 0;
	if (t >= real)
		return mono + (t - real);
	return real - t < mono ? mono - (real - t) : 1;
}

static void json_list(FILE *f, const char *name, char *const *v, size_t n)
{
	fprintf(f, ",\"%s\":[", name);
	for (size_t i = 0; i < n; i++) {
		if (i)
			fputc(',', f);
		text_json_fputs(f, v[i]);
	}
	fputc(']', f);
}

static void text_list(FILE *f, char *const *v, size_t n)
{
	if (!n)
		fputs("none", f);
	for (size_t i = 0; i < n; i++)
		fprintf(f, "%s%s", i ? ", " : "", v[i]);
}

/*
 * One merged window: the table rebuilt from the wire, printed by agent_table_print(); then
 * the cluster's part (hosts, missing, revision, what was lost on the way).
 */
/* A window of a graph query: what its graph batches stored in the aggregator's graph store
 * (docs/graphs.md "In the cluster"), instead of rows. */
static int print_graph_result(const Weft__Result *r, enum agent_format fmt)
{
	const Weft__GraphWindow *g = r->graph;
	uint64_t traces = g ? g->traces : 0, tasks = g ? g->tasks : 0, events = g ? g->events : 0;
	uint64_t edges = g ? g->edges : 0, lost = g ? g->lost : 0;
	bool inc = g && g->has_incomplete;

	if (fmt == AGENT_FMT_JSON) {
		printf("{\"type\":\"graph_window\",\"query_id\":%" PRIu64 ",\"window\":%" PRIu64
		       ",\"revision\":%" PRIu32 ",\"last\":%s,\"traces\":%" PRIu64
		       ",\"tasks\":%" PRIu64 ",\"events\":%" PRIu64 ",\"edges\":%" PRIu64
		       ",\"lost\":%" PRIu64,
		       r->query_id, r->window, r->revision, r->last ? "true" : "false", traces,
		       tasks, events, edges, lost);
		if (inc)
			printf(",\"incomplete\":%" PRIu64, g->incomplete);
		json_list(stdout, "hosts", r->hosts, r->n_hosts);
		json_list(stdout, "missing", r->missing, r->n_missing);
		printf(",\"late_dropped\":%" PRIu64 ",\"results_dropped\":%" PRIu64 "}\n",
		       r->late_dropped, r->results_dropped);
	} else {
		printf("window %" PRIu64 ": %" PRIu64 " traces touched, %" PRIu64 " tasks, %" PRIu64
		       " events, %" PRIu64 " edges stored",
		       r->window, traces, tasks, events, edges);
		if (lost)
			printf(", %" PRIu64 " lost", lost);
		if (inc)
			printf("; %" PRIu64 " traces incomplete", g->incomplete);
		fputs("; hosts: ", stdout);
		text_list(stdout, r->hosts, r->n_hosts);
		if (r->n_missing) {
			fputs("; missing: ", stdout);
			text_list(stdout, r->missing, r->n_missing);
		}
		if (r->revision)
			printf("; revision %" PRIu32 " (late batches stored)", r->revision);
		if (r->last)
			fputs("; last window", stdout);
		fputc('\n', stdout);
	}
	fflush(stdout);
	return 0;
}

static int print_result(const struct plan *p, const Weft__Result *r, enum agent_format fmt)
{
	struct agent_window_stats st = { 0 };
	struct agent_table *t = p->graph ? NULL : agent_table_new(p, 0);
	uint64_t overflow;
	char *buf = NULL;
	size_t len = 0;
	FILE *m;
	int rc;

	if (fmt == AGENT_FMT_FOLDED && !agent_plan_folds(p)) {
		fprintf(stderr, "weft: --format folded needs an aggregating query with a group by "
				"and an aggregate\n");
		agent_table_free(t);
		return -EINVAL;
	}
	if (p->graph)
		return print_graph_result(r, fmt);
	if (!t)
		return -errno;
	rc = agent_table_add_groups(t, r->groups, r->n_groups);
	if (rc) {
		fprintf(stderr, "weft: window %" PRIu64 ": groups that do not fit this query: %s\n",
			r->window, strerror(-rc));
		agent_table_free(t);
		return rc;
	}
	st.index = r->window;
	st.start_ns = real_to_mono(r->start_realtime_ns);
	st.end_ns = real_to_mono(r->end_realtime_ns);
	for (size_t i = 0; i < r->n_drops && i < WEFT_DROP_NR; i++)
		st.drops[i] = r->drops[i];
	st.misses = r->misses;
	st.groups = r->n_groups;
	overflow = r->overflow + agent_table_overflow(t);

	if (fmt == AGENT_FMT_JSON) {
		/* the window object of docs/output.md, its overflow the cluster's, plus the
		 * cluster's members */
		struct agent_print_extra x = { .has_overflow = true, .overflow = overflow };

		m = open_memstream(&buf, &len);
		if (!m) {
			agent_table_free(t);
			return -ENOMEM;
		}
		fprintf(m, ",\"query_id\":%" PRIu64 ",\"revision\":%" PRIu32 ",\"last\":%s",
			r->query_id, r->revision, r->last ? "true" : "false");
		json_list(m, "hosts", r->hosts, r->n_hosts);
		json_list(m, "missing", r->missing, r->n_missing);
		fprintf(m, ",\"late_dropped\":%" PRIu64 ",\"results_dropped\":%" PRIu64,
			r->late_dropped, r->results_dropped);
		rc = fclose(m) ? -ENOMEM : 0;
		x.json_members = buf;
		if (!rc)
			rc = agent_table_print_ext(t, fmt, &st, &x, stdout);
		agent_table_free(t);
		free(buf);
		fflush(stdout);
		return rc;
	}
	m = open_memstream(&buf, &len);
	if (!m) {
		agent_table_free(t);
		return -ENOMEM;
	}
	rc = agent_table_print(t, fmt, &st, m);
	fclose(m);
	agent_table_free(t);
	if (rc) {
		free(buf);
		return rc;
	}
	if (fmt == AGENT_FMT_FOLDED) {
		/* only folded lines on stdout, for flame graph tools; the rest on stderr */
		fputs(buf, stdout);
		if (r->n_missing) {
			fputs("weft: missing: ", stderr);
			text_list(stderr, r->missing, r->n_missing);
			fputc('\n', stderr);
		}
		if (r->overflow)
			fprintf(stderr,
				"weft: lost: %" PRIu64 " groups (agent_table_full) on the way\n",
				r->overflow);
	} else {
		fputs(buf, stdout);
		fputs("hosts: ", stdout);
		text_list(stdout, r->hosts, r->n_hosts);
		if (r->n_missing) {
			fputs("; missing: ", stdout);
			text_list(stdout, r->missing, r->n_missing);
		}
		if (r->revision)
			printf("; revision %" PRIu32 " (late partials merged)", r->revision);
		if (r->last)
			fputs("; last window", stdout);
		fputc('\n', stdout);
		if (r->overflow)
			printf("lost: %" PRIu64 " groups (agent_table_full) on the way\n",
			       r->overflow);
		if (r->late_dropped)
			printf("notes: %" PRIu64 " partials of this query came too late to merge\n",
			       r->late_dropped);
		if (r->results_dropped)
			printf("notes: %" PRIu64 " results were not delivered to this client (too "
			       "slow)\n",
			       r->results_dropped);
	}
	free(buf);
	fflush(stdout);
	return 0;
}

static char *manifest_bytes(const struct plan *p, size_t *len)
{
	char *buf = NULL;
	FILE *m = open_memstream(&buf, len);
	int rc;

	if (!m)
		return NULL;
	rc = manifest_write(p, m);
	if (fclose(m) != 0 || rc) {
		free(buf);
		return NULL;
	}
	return buf;
}

/* ---- stream queries: rows relayed in RowBatches (docs/protocol.md "Row batches") */

#define STREAM_HOSTS_MAX 65536

struct stream_state {
	bool header; /* the text header was printed */
	struct {
		char *host;
		uint64_t rows;
	} * hosts;
	size_t nhosts;
	uint64_t rows, agent_lost, relay_dropped, unprinted, malformed;
	uint64_t received; /* rows of the batches that came */
	struct {
		uint64_t window, ringbuf;
	} * wins; /* rows lost to full ring buffers, per window (its latest revision) */
	size_t nwins;
};

static void stream_free(struct stream_state *ss)
{
	for (size_t i = 0; i < ss->nhosts; i++)
		free(ss->hosts[i].host);
	free(ss->hosts);
	free(ss->wins);
}

static void stream_count_host(struct stream_state *ss, const char *host, uint64_t rows)
{
	void *nv;

	for (size_t i = 0; i < ss->nhosts; i++)
		if (strcmp(ss->hosts[i].host, host) == 0) {
			ss->hosts[i].rows += rows;
			return;
		}
	if (ss->nhosts >= STREAM_HOSTS_MAX)
		return;
	nv = realloc(ss->hosts, (ss->nhosts + 1) * sizeof(*ss->hosts));
	if (!nv)
		return;
	ss->hosts = nv;
	ss->hosts[ss->nhosts].host = strdup(host);
	ss->hosts[ss->nhosts].rows = rows;
	if (ss->hosts[ss->nhosts].host)
		ss->nhosts++;
}

/*
 * Whether stream p has a column named `host`: the host builtin stands for the host column
 * then (1); any other expression so named would clash with it in JSON rows (-1).
 */
static int stream_host_col(const struct plan *p)
{
	for (int c = 0; c < p->ncols; c++)
		if (strcmp(p->cols[c].name, "host") == 0)
			return p->cols[c].idx >= 0 && p->cols[c].idx < p->nfields &&
					       p->fields[p->cols[c].idx].render == RENDER_HOST ?
				       1 :
				       -1;
	return 0;
}

/* A relayed RowBatch: its rows printed with their host (p NULL: no manifest yet, counted). */
static void stream_batch(struct stream_state *ss, const struct plan *p, const Weft__RowBatch *b,
			 enum agent_format fmt)
{
	uint64_t rows = b->has_rows ? b->rows : 0, ntext = 0;
	struct agent_cell *cells;
	size_t ii = 0, it = 0;

	ss->agent_lost += b->lost;
	ss->received += b->has_rows ? b->rows : 0;
	if (b->has_dropped && b->dropped > ss->relay_dropped)
		ss->relay_dropped = b->dropped; /* this client's count so far */
	/* the query's rows so far against those that came here: what this client missed
	 * (also while the aggregator had forgotten it, beyond what it kept) */
	if (b->has_total_rows && b->total_rows > ss->received &&
	    b->total_rows - ss->received > ss->relay_dropped)
		ss->relay_dropped = b->total_rows - ss->received;
	if (!rows)
		return;
	if (!p) {
		ss->unprinted += rows;
		return;
	}
	for (int c = 0; c < p->ncols; c++)
		ntext += agent_col_is_text(p, c);
	cells = calloc((size_t)p->ncols + 1, sizeof(*cells));
	if (!cells || b->columns != (uint32_t)p->ncols || b->n_texts != rows * ntext ||
	    b->n_ints != rows * ((uint64_t)p->ncols - ntext)) {
		ss->malformed += rows;
		free(cells);
		return;
	}
	if (!ss->header) {
		agent_row_header_host(p, stream_host_col(p) == 0, fmt, stdout);
		ss->header = true;
	}
	for (uint64_t r = 0; r < rows; r++) {
		for (int c = 0; c < p->ncols; c++) {
			if (agent_col_is_text(p, c)) {
				cells[c] =
					(struct agent_cell){ .text = true,
							     .s = (const char *)b->texts[it].data,
							     .len = b->texts[it].len };
				it++;
			} else {
				cells[c] = (struct agent_cell){ .i = b->ints[ii++] };
			}
		}
		if (agent_cells_print(p, stream_host_col(p) ? NULL : b->host, cells,
				      (size_t)p->ncols, fmt, stdout))
			ss->unprinted++;
		else
			ss->rows++;
	}
	stream_count_host(ss, b->host, rows);
	free(cells);
	fflush(stdout);
}

/* A window of a stream query: what it says of rows lost to full ring buffers, and of rows
 * this client was not relayed. */
static void stream_result(struct stream_state *ss, const Weft__Result *r)
{
	uint64_t rb = r->n_drops > WEFT_DROP_RINGBUF_FULL ? r->drops[WEFT_DROP_RINGBUF_FULL] : 0;
	void *nv;

	if (r->has_rows_dropped && r->rows_dropped > ss->relay_dropped)
		ss->relay_dropped = r->rows_dropped;
	for (size_t i = 0; i < ss->nwins; i++)
		if (ss->wins[i].window == r->window) {
			ss->wins[i].ringbuf = rb; /* a revision holds the whole window again */
			return;
		}
	if (!rb)
		return;
	nv = realloc(ss->wins, (ss->nwins + 1) * sizeof(*ss->wins));
	if (!nv)
		return;
	ss->wins = nv;
	ss->wins[ss->nwins].window = r->window;
	ss->wins[ss->nwins++].ringbuf = rb;
}

static void drop_msg(void *ctx, Weft__Envelope *e)
{
	(void)ctx;
	wire_free(e); /* after the end: a batch dropped here counts in the difference below */
}

/*
 * At a stream's end: the rows the aggregator took from the agents (its status) against those
 * that came here.  What it could not relay to this client is counted even when no later
 * batch or window could say so (a client it forgot while it was slow loses its subscription,
 * and with it the rows until it subscribes again).
 */
static void stream_reconcile(struct stream_state *ss, struct aggd_client *cl, uint64_t id,
			     const char *to)
{
	Weft__Envelope e, *reply = NULL;
	Weft__StatusRequest req;
	int rc;

	weft__status_request__init(&req);
	req.has_query_id = true;
	req.query_id = id;
	weft__envelope__init(&e);
	e.body_case = WEFT__ENVELOPE__BODY_STATUS_REQUEST;
	e.status_request = &req;
	rc = aggd_client_send(cl, &e);
	if (rc == 0)
		rc = tool_cluster_reply_other(cl, 0, &reply, drop_msg, NULL);
	if (rc <= 0 || reply->body_case != WEFT__ENVELOPE__BODY_STATUS_REPLY) {
		fprintf(stderr,
			"weft: no status from %s: rows it could not relay are not counted\n", to);
		wire_free(reply);
		return;
	}
	for (size_t i = 0; i < reply->status_reply->n_queries; i++) {
		const Weft__QueryStatus *qs = reply->status_reply->queries[i];

		if (qs->query_id == id && qs->has_rows && qs->rows > ss->received &&
		    qs->rows - ss->received > ss->relay_dropped)
			ss->relay_dropped = qs->rows - ss->received;
	}
	wire_free(reply);
}

/* The last line of a stream: rows per host, and every row lost on the way. */
static void stream_end(const struct stream_state *ss, uint64_t id, enum agent_format fmt,
		       bool ended)
{
	uint64_t ringbuf = 0, lost;

	for (size_t i = 0; i < ss->nwins; i++)
		ringbuf += ss->wins[i].ringbuf;
	lost = ringbuf + ss->agent_lost + ss->relay_dropped + ss->unprinted + ss->malformed;
	if (fmt == AGENT_FMT_JSON) {
		printf("{\"type\":\"stream_end\",\"query_id\":%" PRIu64 ",\"ended\":%s,"
		       "\"rows\":%" PRIu64 ",\"hosts\":{",
		       id, ended ? "true" : "false", ss->rows);
		for (size_t i = 0; i < ss->nhosts; i++) {
			if (i)
				putchar(',');
			text_json_fputs(stdout, ss->hosts[i].host);
			printf(":%" PRIu64, ss->hosts[i].rows);
		}
		printf("},\"lost\":%" PRIu64 ",\"ringbuf_full\":%" PRIu64
		       ",\"not_shipped\":%" PRIu64 ",\"not_relayed\":%" PRIu64
		       ",\"unprinted\":%" PRIu64 ",\"malformed\":%" PRIu64 "}\n",
		       lost, ringbuf, ss->agent_lost, ss->relay_dropped, ss->unprinted,
		       ss->malformed);
	} else {
		printf("rows: %" PRIu64, ss->rows);
		for (size_t i = 0; i < ss->nhosts; i++)
			printf("%s%s %" PRIu64, i ? ", " : " (", ss->hosts[i].host,
			       ss->hosts[i].rows);
		printf("%s; lost: ", ss->nhosts ? ")" : "");
		if (!lost)
			printf("none");
		else
			printf("%" PRIu64 " rows (%" PRIu64
			       " to full ring buffers on agents, %" PRIu64
			       " not shipped by agents, %" PRIu64
			       " not relayed to this client, %" PRIu64
			       " not printable here, %" PRIu64 " malformed)",
			       lost, ringbuf, ss->agent_lost, ss->relay_dropped, ss->unprinted,
			       ss->malformed);
		printf("%s\n", ended ? "" : "; detached before the query's end");
	}
	fflush(stdout);
}

/*
 * Prints the results of query id until its last window, Ctrl-C (detach) or a refusal.
 * p: the query's plan, or NULL to take it from the manifest of the first result (--attach).
 */
static int follow(struct aggd_client *cl, uint64_t id, const struct plan *p, enum agent_format fmt,
		  int sfd, const char *to)
{
	struct plan *own = NULL;
	struct stream_state ss = { 0 };
	struct tool_rows_wait rw = { 0 };
	bool stream = p && !p->aggregating && !p->graph, ended = false;
	int rc, status = WEFT_EXIT_OK;

	aggd_client_remember(cl, id);
	for (;;) {
		Weft__Envelope *m = NULL;

		if (sfd >= 0) {
			struct signalfd_siginfo si;

			if (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
				fprintf(stderr,
					"weft: detached; query %" PRIu64 " keeps running "
					"(`weft cancel --to %s %" PRIu64 "` stops it)\n",
					id, to, id);
				break;
			}
		}
		rc = aggd_client_recv(cl, 200, &m);
		if (rc < 0) {
			fprintf(stderr, "weft: %s: %s\n", to, strerror(-rc));
			status = WEFT_EXIT_FAIL;
			break;
		}
		if (rc == 0) {
			if (stream && tool_rows_done(&rw, "weft", id)) {
				ended = true;
				break;
			}
			continue;
		}
		if (m->body_case == WEFT__ENVELOPE__BODY_RESULT && m->result->query_id == id) {
			bool last = m->result->last;

			if (!p && m->result->has_manifest) {
				char err[256] = "";

				own = manifest_read((const char *)m->result->manifest.data,
						    m->result->manifest.len, err, sizeof(err));
				if (!own) {
					fprintf(stderr,
						"weft: query %" PRIu64 ": its manifest does "
						"not read: %s\n",
						id, err[0] ? err : "malformed");
					wire_free(m);
					status = WEFT_EXIT_FAIL;
					break;
				}
				p = own;
				stream = !p->aggregating && !p->graph;
			}
			if (!p) {
				wire_free(m); /* cannot happen: the first result has the manifest */
				continue;
			}
			if (stream) {
				stream_result(&ss, m->result);
				tool_rows_result(&rw, m->result);
			} else if (print_result(p, m->result, fmt)) {
				status = WEFT_EXIT_FAIL;
			}
			aggd_client_progress(cl, id, m->result->window + 1);
			wire_free(m);
			/* a stream's hosts late for its last window still send their last rows */
			if (last && (!stream || tool_rows_done(&rw, "weft", id))) {
				ended = true;
				break;
			}
			continue;
		}
		if (m->body_case == WEFT__ENVELOPE__BODY_ROW_BATCH &&
		    m->row_batch->query_id == id) {
			/* before the first Result of --attach, the plan is not known yet */
			stream = stream || !p;
			stream_batch(&ss, p, m->row_batch, fmt);
			tool_rows_batch(&rw, m->row_batch);
			wire_free(m);
			if (tool_rows_done(&rw, "weft", id)) {
				ended = true;
				break;
			}
			continue;
		}
		if (m->body_case == WEFT__ENVELOPE__BODY_ERROR) {
			/* an answer to our request (no such query) ends it; an agent's failure
			 * to run the query does not: the others go on */
			fprintf(stderr, "weft: %s\n", m->error->message);
			if (m->error->has_in_reply_to) {
				wire_free(m);
				status = WEFT_EXIT_FAIL;
				break;
			}
		}
		wire_free(m);
	}
	if (stream && ended)
		stream_reconcile(&ss, cl, id, to);
	if (stream)
		stream_end(&ss, id, fmt, ended);
	stream_free(&ss);
	tool_rows_free(&rw);
	plan_free(own);
	return status;
}

/* --attach ID: follow a query submitted earlier, from its oldest retained window. */
static int submit_attach(struct tool_cluster *tc, uint64_t id, enum agent_format fmt)
{
	struct aggd_client *cl;
	Weft__Envelope *reply = NULL;
	int sfd, rc, status;

	sfd = tool_signals_block(true);
	cl = tool_cluster_connect(tc);
	if (!cl) {
		if (sfd >= 0)
			close(sfd);
		return tc->usage_error ? WEFT_EXIT_USAGE : WEFT_EXIT_FAIL;
	}
	/* from window 0: the aggregator replays what it retains, then follows */
	rc = aggd_client_subscribe(cl, id);
	if (rc == 0)
		rc = tool_cluster_reply(cl, tc->timeout_ms, &reply);
	if (rc <= 0 || reply->body_case == WEFT__ENVELOPE__BODY_ERROR) {
		fprintf(stderr, "weft: %s: %s\n", tc->to,
			rc < 0	? strerror(-rc) :
			rc == 0 ? "no answer in time" :
				  reply->error->message);
		status = WEFT_EXIT_FAIL;
	} else {
		fprintf(stderr, "weft: following query %" PRIu64 " on %s\n", id,
			reply->status_reply->aggregator);
		status = follow(cl, id, NULL, fmt, sfd, tc->to);
	}
	wire_free(reply);
	aggd_client_free(cl);
	if (sfd >= 0)
		close(sfd);
	return status;
}

#define OPT_ONLY_HOST 300
#define MAX_ONLY_HOSTS 256

int cmd_submit(int argc, char **argv)
{
	static const struct option longopts[] = {
		CLUSTER_LONGOPTS,
		{ "file", required_argument, NULL, 'f' },
		{ "format", required_argument, NULL, 'F' },
		{ "no-follow", no_argument, NULL, 'N' },
		{ "attach", required_argument, NULL, 'A' },
		{ "export-metrics", no_argument, NULL, 'M' },
		{ "only-host", required_argument, NULL, OPT_ONLY_HOST },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct tool_cluster tc = { 0 };
	struct compile_opts copts = { .sz = sizeof(copts) };
	struct compile_result res = { 0 };
	struct aggd_client *cl = NULL;
	enum agent_format fmt = AGENT_FMT_TEXT;
	Weft__Envelope e, *reply = NULL;
	Weft__Submit sub;
	struct diag_list dl;
	const char *file = NULL, *name;
	char *src, *manifest = NULL;
	size_t manifest_len = 0;
	bool follow_it = true, export_metrics = false;
	uint64_t id = 0, attach = 0;
	char *only[MAX_ONLY_HOSTS];
	size_t nonly = 0;
	int c, rc, verbose = 0, status = WEFT_EXIT_OK, sfd = -1;

	optind = 1;
	while ((c = getopt_long(argc, argv, "f:vh", longopts, NULL)) != -1) {
		rc = tool_cluster_opt(&tc, c, optarg);
		if (rc < 0)
			return WEFT_EXIT_USAGE;
		if (rc)
			continue;
		switch (c) {
		case 'f':
			file = optarg;
			break;
		case 'F':
			if (strcmp(optarg, "json") == 0)
				fmt = AGENT_FMT_JSON;
			else if (strcmp(optarg, "text") == 0)
				fmt = AGENT_FMT_TEXT;
			else if (strcmp(optarg, "folded") == 0)
				fmt = AGENT_FMT_FOLDED;
			else {
				fprintf(stderr,
					"weft: --format takes text, json or folded, not '%s'\n",
					optarg);
				return WEFT_EXIT_USAGE;
			}
			break;
		case 'N':
			follow_it = false;
			break;
		case 'M':
			export_metrics = true;
			break;
		case OPT_ONLY_HOST:
			if (nonly >= MAX_ONLY_HOSTS || !*optarg) {
				fprintf(stderr,
					"weft: --only-host takes an agent's host name, at most %d "
					"times\n",
					MAX_ONLY_HOSTS);
				return WEFT_EXIT_USAGE;
			}
			only[nonly++] = optarg;
			break;
		case 'A': {
			char *end;

			errno = 0;
			attach = strtoull(optarg, &end, 10);
			if (errno || *end || !attach) {
				fprintf(stderr, "weft: --attach takes a query id, not '%s'\n",
					optarg);
				return WEFT_EXIT_USAGE;
			}
			break;
		}
		case 'v':
			verbose++;
			break;
		case 'h':
			fputs(submit_help, stdout);
			return WEFT_EXIT_OK;
		default:
			fputs(submit_help, stderr);
			return WEFT_EXIT_USAGE;
		}
	}
	if (optind + 1 < argc) {
		fprintf(stderr, "weft: submit takes one query (quote it)\n");
		return WEFT_EXIT_USAGE;
	}
	tool_set_verbose(verbose);
	if (attach) {
		if (file || optind < argc || !follow_it || export_metrics || nonly) {
			fprintf(stderr,
				"weft: --attach follows a running query: no query text, -f, "
				"--no-follow, --export-metrics or --only-host with it\n");
			return WEFT_EXIT_USAGE;
		}
		return submit_attach(&tc, attach, fmt);
	}
	src = tool_read_query(file, optind < argc ? argv[optind] : NULL, &name);
	if (!src)
		return WEFT_EXIT_USAGE;
	{
		/* what the wire cannot carry is said here, not as "no answer" after sending */
		char why[160];

		if (wire_query_check(src, why, sizeof(why))) {
			fprintf(stderr, "weft: %s\n", why);
			free(src);
			return WEFT_EXIT_QUERY;
		}
	}

	/* compiled here, exactly as weft run compiles: agents never need a compiler */
	copts.verbose = verbose > 0;
	diag_list_init(&dl, src, name);
	rc = compiler_run(src, &copts, PASS_CLANG, &dl, &res);
	diag_print(&dl, stderr, isatty(2));
	if (rc) {
		status = diag_has_errors(&dl) ? WEFT_EXIT_QUERY : WEFT_EXIT_FAIL;
		if (!diag_has_errors(&dl))
			fprintf(stderr, "weft: %s\n", strerror(-rc));
		goto out;
	}
	if (!res.plan->aggregating && !res.plan->graph && stream_host_col(res.plan) < 0) {
		fprintf(stderr, "weft: a stream on a cluster prints each row's host in a column "
				"`host`: name the select's column `host` otherwise\n");
		status = WEFT_EXIT_QUERY;
		goto out;
	}
	if (fmt == AGENT_FMT_FOLDED && !agent_plan_folds(res.plan)) {
		fprintf(stderr, "weft: --format folded needs an aggregating query with a group by "
				"and an aggregate, e.g. ... group by ustack select count()\n");
		status = WEFT_EXIT_USAGE;
		goto out;
	}
	manifest = manifest_bytes(res.plan, &manifest_len);
	if (!manifest) {
		fprintf(stderr, "weft: cannot write the query's manifest\n");
		status = WEFT_EXIT_FAIL;
		goto out;
	}

	sfd = tool_signals_block(true);

	weft__submit__init(&sub);
	sub.query = src;
	sub.manifest.data = (uint8_t *)manifest;
	sub.manifest.len = manifest_len;
	sub.object.data = res.object;
	sub.object.len = res.object_sz;
	sub.has_follow = true;
	sub.follow = follow_it;
	sub.has_export_metrics = export_metrics;
	sub.export_metrics = export_metrics;
	sub.n_only_hosts = nonly;
	sub.only_hosts = only;
	weft__envelope__init(&e);
	e.body_case = WEFT__ENVELOPE__BODY_SUBMIT;
	e.submit = &sub;
	e.version = WIRE_VERSION;
	e.seq = 1; /* aggd_client_send() numbers it; the check wants one */
	{
		char why[256];

		if (wire_validate(&e, why, sizeof(why))) {
			fprintf(stderr, "weft: the query cannot be sent to the cluster: %s\n", why);
			status = WEFT_EXIT_QUERY;
			goto out;
		}
	}
	cl = tool_cluster_connect(&tc);
	if (!cl) {
		status = tc.usage_error ? WEFT_EXIT_USAGE : WEFT_EXIT_FAIL;
		goto out;
	}
	rc = aggd_client_send(cl, &e);
	if (rc) {
		fprintf(stderr, "weft: cannot send the submit to %s: %s\n", tc.to, strerror(-rc));
		status = WEFT_EXIT_FAIL;
		goto out;
	}
	rc = tool_cluster_reply(cl, tc.timeout_ms > 10000 ? tc.timeout_ms : 10000, &reply);
	if (rc <= 0) {
		fprintf(stderr, "weft: no answer from %s to the submit: %s\n", tc.to,
			rc ? strerror(-rc) : "timed out");
		status = WEFT_EXIT_FAIL;
		goto out;
	}
	if (reply->body_case == WEFT__ENVELOPE__BODY_ERROR) {
		fprintf(stderr, "weft: %s: %s\n", tc.to, reply->error->message);
		status = WEFT_EXIT_FAIL;
		goto out;
	}
	if (reply->status_reply->n_queries != 1) {
		fprintf(stderr, "weft: %s answered the submit without a query id\n", tc.to);
		status = WEFT_EXIT_FAIL;
		goto out;
	}
	{
		const Weft__QueryStatus *qs = reply->status_reply->queries[0];

		id = qs->query_id;
		if (qs->n_only_hosts != nonly) {
			/* an aggregator older than Submit.only_hosts runs it on every agent */
			Weft__QueryStop st;

			fprintf(stderr,
				"weft: %s does not limit queries to agents (an older weft?): "
				"query %" PRIu64 " cancelled\n",
				tc.to, id);
			weft__query_stop__init(&st);
			st.query_id = id;
			weft__envelope__init(&e);
			e.body_case = WEFT__ENVELOPE__BODY_QUERY_STOP;
			e.query_stop = &st;
			aggd_client_send(cl, &e);
			status = WEFT_EXIT_FAIL;
			goto out;
		}
		fprintf(stderr, "weft: query %" PRIu64 " runs on %s: sent to %zu agent%s", id,
			reply->status_reply->aggregator, qs->n_hosts, qs->n_hosts == 1 ? "" : "s");
		for (size_t i = 0; i < qs->n_hosts; i++)
			fprintf(stderr, "%s%s", i ? ", " : " (", qs->hosts[i]);
		fprintf(stderr, "%s; `weft cancel --to %s %" PRIu64 "` stops it\n",
			qs->n_hosts ? ")" : "", tc.to, id);
	}
	if (!follow_it) {
		printf("%" PRIu64 "\n", id);
		goto out;
	}
	status = follow(cl, id, res.plan, fmt, sfd, tc.to);

out:
	wire_free(reply);
	aggd_client_free(cl);
	if (sfd >= 0)
		close(sfd);
	free(manifest);
	compile_result_free(&res);
	diag_list_free(&dl);
	free(src);
	return status;
}
