// SPDX-License-Identifier: Apache-2.0
/*
 * `weft aggregator`: the middle of a weft cluster.  Parses the options, then hands over to
 * the daemon (aggregator/aggd.h) until SIGINT or SIGTERM (exit 0); SIGHUP reloads the
 * allow-list.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
#include "aggregator/aggd.h"
#include "base/log.h"
#include "base/text.h"
#include "base/units.h"
#include "tools/weft.h"

static const char aggregator_help[] =
	"Usage: weft aggregator --key FILE --allow FILE [OPTIONS]\n"
	"\n"
	"Runs a cluster aggregator.  Agents (`weft agent`) connect to it and run the queries\n"
	"clients submit (`weft submit`); each agent ships one partial aggregate per window,\n"
	"and the aggregator merges them into one result per window for every client that\n"
	"follows the query.  A window is emitted once every live agent running the query has\n"
	"reported it, or when the lateness bound has passed after its end; the result names the\n"
	"hosts merged into it and those missing.  A partial that arrives after its window was\n"
	"emitted is merged and the window emitted again, with a higher revision, while the\n"
	"window is retained (64 windows, at most 10 minutes); later ones are dropped and\n"
	"counted.\n"
	"\n"
	"Queries, the partials merged into windows still retained, and each agent's position\n"
	"are kept in an embedded SQLite store and committed before an agent's partials are\n"
	"acknowledged: after a restart the aggregator resumes its queries, agents reconnect by\n"
	"themselves and resend what was not acknowledged, and nothing is merged twice.\n"
	"\n"
	"The execution graphs a graph query (`from ... graph`) records on the agents come in\n"
	"batches, each stored once, in one transaction, in the graph store; pieces of one trace\n"
	"from several hosts join by trace id, and after the query's last window every trace it\n"
	"touched is checked and marked incomplete when a task's parent or an edge's task never\n"
	"arrived, or a task never ended (`weft graph list`).\n"
	"\n"
	"Every connection is encrypted and authenticated with CURVE; only keys listed in the\n"
	"allow-list get in, each with its role (docs/operations.md).  A connection must finish\n"
	"its handshake within 10 s; when descriptors run short, the oldest connections still\n"
	"in their handshake are cut (established ones never); the open-file limit is raised\n"
	"to the hard limit at start.  Connections that end without a message are counted in\n"
	"`rejected` (weft status).\n"
	"\n"
	"Options:\n"
	"  -l, --listen ENDPOINT   where agents and clients connect (default tcp://*:7470)\n"
	"  -k, --key FILE          this aggregator's key pair (`weft keygen`; mode 0600)\n"
	"  -a, --allow FILE        the allow-list: one 'ROLE PUBLIC-KEY [NAME]' per line, ROLE\n"
	"                          agent, client or aggregator; '#' starts a comment.  SIGHUP\n"
	"                          reloads it (new connections only)\n"
	"  -s, --store PATH        the SQLite store (default /var/lib/weft/aggregator.sqlite\n"
	"                          as root, else ~/.local/state/weft/aggregator.sqlite; the\n"
	"                          directory is made mode 0700); ':memory:' keeps nothing\n"
	"  -G, --graph-store PATH  where the execution graphs agents capture are stitched and\n"
	"                          stored (a graph query's GraphBatches), the file `weft graph`\n"
	"                          reads, and whose traces the web face shows (default:\n"
	"                          $WEFT_GRAPH_STORE, else graph.sqlite in the directory of\n"
	"                          --store)\n"
	"      --graph-max-age D   keep the graph store bounded: drop the traces that ended\n"
	"                          more than D ago (30m, 12h, 7d, ...), checked every second;\n"
	"                          the aggregates of every trace stay (as `weft graph retain`)\n"
	"      --graph-max-size S  and then the oldest traces until the store's pages in use\n"
	"                          are at most S (500MiB, 2G, ...).  `weft status` counts the\n"
	"                          traces dropped\n"
	"  -p, --parent ENDPOINT   report every closed window to a parent aggregator, as one\n"
	"                          of its agents (a tree); the parent's allow-list must list\n"
	"                          this aggregator's public key with the role aggregator\n"
	"  -P, --parent-key FILE   the parent's public key (required with --parent)\n"
	"  -n, --name NAME         this aggregator's name: in Welcome, in status, and the host\n"
	"                          name of its partials at a parent (default: the host name)\n"
	"  -L, --lateness D        how long after its end a window waits for agents that have\n"
	"                          not reported (default 2s; 500ms, 10s, ...).  At a parent,\n"
	"                          make it longer than the children's\n"
	"      --heartbeat D       the heartbeat interval agents and clients are told to keep\n"
	"                          (default 1s); a peer silent for 3 intervals is expired\n"
	"      --keep N            closed windows retained per query for late partials\n"
	"                          (default 64)\n"
	"      --spool-max N       windows (and row and graph batches) kept for the parent\n"
	"                          until acknowledged (default 4096); the oldest is dropped\n"
	"                          when full, counted\n"
	"      --stream-keep S     a stream query's latest row batches kept in memory for a\n"
	"                          client that comes back (forgotten while it was too slow to\n"
	"                          send its heartbeats, or reconnected): it gets them before\n"
	"                          anything new, and counts what was no longer kept as lost\n"
	"                          (default 32MiB a query, all streams' together at most 8\n"
	"                          times that; 0: none)\n"
	"      --http ADDR:PORT    serve the web face: pages of the cluster, live queries and\n"
	"                          traces, their JSON API and /metrics for Prometheus\n"
	"                          (docs/http.md).  Read-only.  PORT alone binds 127.0.0.1;\n"
	"                          any address but loopback needs --http-token\n"
	"      --http-token FILE   a bearer token (one line, at least 16 characters): the API\n"
	"                          and /metrics then answer 401 without 'Authorization:\n"
	"                          Bearer TOKEN'.  Prefer a reverse proxy with TLS in front of\n"
	"                          it (docs/operations.md)\n"
	"\n"
	"Forwarding graphs (docs/operations.md, \"Forwarding graphs from the aggregator\"):\n"
	"      --graph-forward URL the OpenTelemetry Collector's OTLP/HTTP endpoint\n"
	"                          (http://HOST:4318, to which /v1/traces is appended, or the\n"
	"                          full traces URL): every stitched graph the graph store takes\n"
	"                          goes there as OTLP JSON (tasks as spans, events as span\n"
	"                          events, edges as span links), and the per-type aggregates\n"
	"                          as OTLP metrics of their own resource (weft-aggregates).  An\n"
	"                          element goes --graph-forward-linger after it arrived, with\n"
	"                          every other piece of its trace that arrived by then, from\n"
	"                          any agent; a piece that comes later goes on its own, with the\n"
	"                          same trace id.  Each span is sent once.  Sending runs on a\n"
	"                          thread of its own: a slow or absent collector never holds up\n"
	"                          the agents; what it cannot take waits in the spool, retried\n"
	"                          with back-off.  `weft status` and /metrics count what was\n"
	"                          sent, spooled, dropped and rejected\n"
	"      --graph-forward-spool DIR  where requests wait while the collector is\n"
	"                          unreachable or failing, sent first at the next start\n"
	"                          (default: graph-forward.spool next to the graph store)\n"
	"      --graph-forward-spool-size S  the spool's bound (default 256MiB); a request that\n"
	"                          does not fit is dropped, its spans counted\n"
	"      --graph-forward-batch N  spans per request, about; a trace is never split\n"
	"                          (default 512)\n"
	"      --graph-forward-linger D  how long an element waits for the rest of its trace\n"
	"                          (default 2s; 100ms to 10m)\n"
	"      --graph-forward-queue N  graph elements waiting for the forwarding thread\n"
	"                          (default 1000000); a batch that does not fit is not\n"
	"                          forwarded, its tasks counted dropped\n"
	"      --graph-forward-aggregates D  how often the aggregates are sent (default 60s;\n"
	"                          and at the end); 0: never\n"
	"      --graph-forward-wait D  at SIGINT or SIGTERM, how long to keep sending before\n"
	"                          what remains is left in the spool (default 5s; 0: do not\n"
	"                          wait)\n"
	"\n"
	"  -v, --verbose           log joins, windows and queries (-vv: every message)\n"
	"  -h, --help              this text\n"
	"\n"
	"Example:\n"
	"  weft keygen -o /etc/weft aggregator\n"
	"  weft aggregator --key /etc/weft/aggregator.key --allow /etc/weft/allow -v\n"
	"  weft aggregator --key aggregator.key --allow allow --http 7480   # http://127.0.0.1:7480/\n"
	"  weft aggregator --key aggregator.key --allow allow --graph-forward http://otelcol:4318\n"
	"\n"
	"Environment: WEFT_HUGEPAGES=0 keeps the aggregator's heap in 4 KiB pages (by default,\n"
	"where transparent huge pages are \"madvise\", weft starts itself again with\n"
	"glibc's glibc.malloc.hugetlb=1: fewer page faults as its stores grow).\n"
	"\n"
	"Exit status: 0 stopped by SIGINT or SIGTERM, 1 failure (unreadable keys, a store in\n"
	"use, an address in use), 2 bad command line.\n";

static int parse_count(const char *opt, const char *s, uint64_t max, uint64_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || *end || v == 0 || v > max) {
		fprintf(stderr, "weft: %s takes a number from 1 to %" PRIu64 ", not '%s'\n", opt,
			max, s);
		return -1;
	}
	*out = v;
	return 0;
}

/*
 * Every connection holds a descriptor, and the default soft limit (often 1024) is far below
 * what an aggregator of many agents, or one under a flood of connections, needs: raise it
 * to the hard limit, which any process may.  The guard (aggregator/aggd_guard.h) sizes its
 * bounds from the limit in force.
 */
static void nofile_raise(void)
{
	struct rlimit rl;
	rlim_t was;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= rl.rlim_max)
		return;
	was = rl.rlim_cur;
	/* Linux refuses RLIM_INFINITY here: nr_open (default 1048576) is the real bound */
	rl.rlim_cur = rl.rlim_max == RLIM_INFINITY ? 1048576 : rl.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &rl) == 0)
		log_info("aggregator: open-file limit raised from %llu to %llu",
			 (unsigned long long)was, (unsigned long long)rl.rlim_cur);
}

enum {
	OPT_GFWD = 0x100,
	OPT_GFWD_SPOOL,
	OPT_GFWD_SPOOL_SIZE,
	OPT_GFWD_BATCH,
	OPT_GFWD_LINGER,
	OPT_GFWD_QUEUE,
	OPT_GFWD_AGGS,
	OPT_GFWD_WAIT,
	OPT_STREAM_KEEP,
	OPT_GRAPH_MAX_AGE,
	OPT_GRAPH_MAX_SIZE,
};

/* A --graph-forward* option into o; -1 when its value is bad (said). */
static int gfwd_opt(struct aggd_opts *o, int opt, const char *arg)
{
	uint64_t v;

	switch (opt) {
	case OPT_GFWD:
		if (strncmp(arg, "http://", 7) && strncmp(arg, "https://", 8)) {
			fprintf(stderr,
				"weft: --graph-forward takes the collector's OTLP/HTTP endpoint, an "
				"http:// or https:// URL (e.g. http://collector:4318), not '%s'\n",
				arg);
			return -1;
		}
		o->graph_forward = arg;
		return 0;
	case OPT_GFWD_SPOOL:
		if (!*arg) {
			fprintf(stderr, "weft: --graph-forward-spool takes a directory\n");
			return -1;
		}
		o->graph_forward_spool = arg;
		return 0;
	case OPT_GFWD_SPOOL_SIZE:
		if (units_size_parse(arg, &v) || v == 0) {
			fprintf(stderr,
				"weft: --graph-forward-spool-size takes a size above 0 (64MiB, "
				"1GiB, ...), not '%s'\n",
				arg);
			return -1;
		}
		o->graph_forward_spool_max = v;
		return 0;
	case OPT_GFWD_BATCH:
		if (parse_count("--graph-forward-batch", arg, 1000000, &v))
			return -1;
		o->graph_forward_batch = (size_t)v;
		return 0;
	case OPT_GFWD_QUEUE:
		if (parse_count("--graph-forward-queue", arg, 100000000, &v))
			return -1;
		o->graph_forward_queue = v;
		return 0;
	case OPT_GFWD_LINGER:
		if (units_duration_parse(arg, UNITS_NS_PER_SEC, &v) || v < 100000000ULL ||
		    v > 600ULL * UNITS_NS_PER_SEC) {
			fprintf(stderr,
				"weft: --graph-forward-linger takes a duration from 100ms to 10m, "
				"not '%s'\n",
				arg);
			return -1;
		}
		o->graph_forward_linger_ns = v;
		return 0;
	case OPT_GFWD_AGGS:
	case OPT_GFWD_WAIT:
		if (units_duration_parse(arg, UNITS_NS_PER_SEC, &v) ||
		    v > 24ULL * 3600 * UNITS_NS_PER_SEC) {
			fprintf(stderr,
				"weft: --graph-forward-%s takes a duration (30s, 5m; a bare number "
				"counts seconds; 0: %s), not '%s'\n",
				opt == OPT_GFWD_AGGS ? "aggregates" : "wait",
				opt == OPT_GFWD_AGGS ? "never" : "do not wait", arg);
			return -1;
		}
		if (opt == OPT_GFWD_AGGS)
			o->graph_forward_aggs_ns = v ? v : UINT64_MAX;
		else
			o->graph_forward_wait_ns = v ? v : UINT64_MAX;
		return 0;
	}
	return -1;
}

int cmd_aggregator(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "listen", required_argument, NULL, 'l' },
		{ "key", required_argument, NULL, 'k' },
		{ "allow", required_argument, NULL, 'a' },
		{ "store", required_argument, NULL, 's' },
		{ "graph-store", required_argument, NULL, 'G' },
		{ "graph-max-age", required_argument, NULL, OPT_GRAPH_MAX_AGE },
		{ "graph-max-size", required_argument, NULL, OPT_GRAPH_MAX_SIZE },
		{ "parent", required_argument, NULL, 'p' },
		{ "parent-key", required_argument, NULL, 'P' },
		{ "name", required_argument, NULL, 'n' },
		{ "lateness", required_argument, NULL, 'L' },
		{ "heartbeat", required_argument, NULL, 'B' },
		{ "keep", required_argument, NULL, 'K' },
		{ "spool-max", required_argument, NULL, 'S' },
		{ "stream-keep", required_argument, NULL, OPT_STREAM_KEEP },
		{ "http", required_argument, NULL, 'H' },
		{ "http-token", required_argument, NULL, 'T' },
		{ "graph-forward", required_argument, NULL, OPT_GFWD },
		{ "graph-forward-spool", required_argument, NULL, OPT_GFWD_SPOOL },
		{ "graph-forward-spool-size", required_argument, NULL, OPT_GFWD_SPOOL_SIZE },
		{ "graph-forward-batch", required_argument, NULL, OPT_GFWD_BATCH },
		{ "graph-forward-linger", required_argument, NULL, OPT_GFWD_LINGER },
		{ "graph-forward-queue", required_argument, NULL, OPT_GFWD_QUEUE },
		{ "graph-forward-aggregates", required_argument, NULL, OPT_GFWD_AGGS },
		{ "graph-forward-wait", required_argument, NULL, OPT_GFWD_WAIT },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct aggd_opts o = { .sz = sizeof(o), .listen = "tcp://*:7470" };
	struct aggd *a;
	char err[1024];
	uint64_t v;
	int c, verbose = 0, sfd, rc;
	bool gfwd_any = false;

	optind = 1;
	while ((c = getopt_long(argc, argv, "l:k:a:s:G:p:P:n:L:vh", longopts, NULL)) != -1) {
		switch (c) {
		case 'l':
			o.listen = optarg;
			break;
		case 'H':
			o.http = optarg;
			break;
		case 'T':
			o.http_token = optarg;
			break;
		case 'k':
			o.key_file = optarg;
			break;
		case 'a':
			o.allow_file = optarg;
			break;
		case 's':
			o.store = optarg;
			break;
		case 'G':
			if (!*optarg) {
				fprintf(stderr, "weft: --graph-store takes a file name\n");
				return WEFT_EXIT_USAGE;
			}
			o.graph_store = optarg;
			break;
		case OPT_GRAPH_MAX_AGE:
			if (tool_parse_max_age("--graph-max-age", optarg, &o.graph_max_age_ns))
				return WEFT_EXIT_USAGE;
			break;
		case OPT_GRAPH_MAX_SIZE:
			if (tool_parse_max_size("--graph-max-size", optarg, &o.graph_max_bytes))
				return WEFT_EXIT_USAGE;
			break;
		case 'p':
			o.parent = optarg;
			break;
		case 'P':
			o.parent_key = optarg;
			break;
		case 'n':
			/* what the wire takes as a host (agent/wire.h, base/text.h) */
			if (!*optarg || strlen(optarg) > WIRE_MAX_HOST || strchr(optarg, ' ') ||
			    text_check(optarg, strlen(optarg), TEXT_NAME) != strlen(optarg)) {
				fprintf(stderr,
					"weft: --name takes a name of 1 to %d bytes of UTF-8 without "
					"spaces or control characters\n",
					WIRE_MAX_HOST);
				return WEFT_EXIT_USAGE;
			}
			o.name = optarg;
			break;
		case 'L':
			if (units_duration_parse(optarg, UNITS_NS_PER_SEC, &o.lateness_ns) ||
			    !o.lateness_ns || o.lateness_ns > 3600ULL * 1000000000ULL) {
				fprintf(stderr,
					"weft: --lateness takes a duration (500ms, 2s, ...; at "
					"most 1h), not '%s'\n",
					optarg);
				return WEFT_EXIT_USAGE;
			}
			break;
		case 'B':
			if (units_duration_parse(optarg, UNITS_NS_PER_SEC, &v) || v < 10000000ULL ||
			    v > 3600ULL * 1000000000ULL) {
				fprintf(stderr,
					"weft: --heartbeat takes a duration from 10ms to 1h, "
					"not '%s'\n",
					optarg);
				return WEFT_EXIT_USAGE;
			}
			o.heartbeat_ms = v / 1000000ULL;
			break;
		case 'K':
			if (parse_count("--keep", optarg, 100000, &v))
				return WEFT_EXIT_USAGE;
			o.keep_windows = (uint32_t)v;
			break;
		case 'S':
			if (parse_count("--spool-max", optarg, 1000000, &v))
				return WEFT_EXIT_USAGE;
			o.spool_max = v;
			break;
		case OPT_STREAM_KEEP:
			if (strcmp(optarg, "0") == 0) {
				o.stream_keep = -1;
			} else if (units_size_parse(optarg, &v) || v == 0 || v > (1ULL << 40)) {
				fprintf(stderr,
					"weft: --stream-keep takes a size up to 1TiB (16MiB, 1GiB, "
					"...; 0: none), not '%s'\n",
					optarg);
				return WEFT_EXIT_USAGE;
			} else {
				o.stream_keep = (int64_t)v;
			}
			break;
		case OPT_GFWD:
		case OPT_GFWD_SPOOL:
		case OPT_GFWD_SPOOL_SIZE:
		case OPT_GFWD_BATCH:
		case OPT_GFWD_LINGER:
		case OPT_GFWD_QUEUE:
		case OPT_GFWD_AGGS:
		case OPT_GFWD_WAIT:
			if (gfwd_opt(&o, c, optarg))
				return WEFT_EXIT_USAGE;
			gfwd_any = true;
			break;
		case 'v':
			verbose++;
			break;
		case 'h':
			fputs(aggregator_help, stdout);
			return WEFT_EXIT_OK;
		default:
			fputs(aggregator_help, stderr);
			return WEFT_EXIT_USAGE;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "weft: aggregator takes no arguments ('%s')\n", argv[optind]);
		return WEFT_EXIT_USAGE;
	}
	if (!o.key_file || !o.allow_file) {
		fprintf(stderr, "weft: aggregator needs --key FILE and --allow FILE (see `weft "
				"aggregator --help`)\n");
		return WEFT_EXIT_USAGE;
	}
	if (!o.parent != !o.parent_key) {
		fprintf(stderr, "weft: --parent and --parent-key go together\n");
		return WEFT_EXIT_USAGE;
	}
	if (!o.http && o.http_token) {
		fprintf(stderr,
			"weft: --http-token is for the web face: give --http ADDR:PORT too\n");
		return WEFT_EXIT_USAGE;
	}
	if (gfwd_any && !o.graph_forward) {
		fprintf(stderr, "weft: the --graph-forward-* options need --graph-forward URL\n");
		return WEFT_EXIT_USAGE;
	}
	tool_set_verbose(verbose);

	/* signals are read from a signalfd in the daemon's loop, never handled asynchronously */
	sfd = tool_signals_block(true);
	if (sfd < 0) {
		fprintf(stderr, "weft: signalfd: %s\n", strerror(errno));
		return WEFT_EXIT_FAIL;
	}

#ifdef M_MMAP_THRESHOLD
	/*
	 * Partials decode into arenas of a few hundred KiB and checkpoints encode windows into
	 * buffers of a MiB or more.  With glibc's defaults those come from mmap() and go back at
	 * each free (or are trimmed off the heap), and every reuse faults each 4 KiB page in
	 * again: a tenth of the aggregator's time with 1,000 agents.  Keep them in the heap; the
	 * cost is that the process keeps its peak heap.
	 */
	mallopt(M_MMAP_THRESHOLD, 32 << 20);
	mallopt(M_TRIM_THRESHOLD, 128 << 20);
#endif
	nofile_raise();
	a = aggd_new(&o, err, sizeof(err));
	if (!a) {
		fprintf(stderr, "weft: aggregator: %s\n", err);
		close(sfd);
		return WEFT_EXIT_FAIL;
	}
	rc = aggd_run(a, sfd);
	aggd_free(a);
	close(sfd);
	return rc ? WEFT_EXIT_FAIL : WEFT_EXIT_OK;
}
