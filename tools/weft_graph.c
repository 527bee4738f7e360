// SPDX-License-Identifier: Apache-2.0
/*
 * `weft graph`: execution graphs on the command line (docs/graphs.md, "`weft graph`").
 *
 * Six subcommands over one store (graph/store.h): import files of other tracers, list the
 * traces stored, the statistics of every task type, export one trace, show one trace with its
 * aggregate context (graph/show.h), and retention.  Each subcommand parses its own options;
 * --graph-store may come before the subcommand or among its options.
 *
 * Import is one transaction per file: a file is read whole (graph/import.h), checked, its
 * clock skew corrected (graph/skew.h), then stored; a file refused at any step leaves nothing
 * in the store and the import goes on with the next file, the exit status saying that one
 * failed.  Show corrects skew again before drawing, which changes nothing on what import
 * stored and corrects traces that reached the store another way.
 *
 * Only this file's entry point returns an exit status; everything below tools/ returns
 * -errno with a reason in a buffer, printed here once.
 *
 * Why one file of ~1,600 lines: it is the command line of one tool, its subcommands sharing
 * the store option, the forwarding options and the error printing; each subcommand is a
 * section of option parsing over graph/, whose code does the work.  Split it by subcommand
 * group if it grows further.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "aggregator/aggd.h"
#include "base/units.h"
#include "graph/forward.h"
#include "graph/graph.h"
#include "graph/import.h"
#include "graph/show.h"
#include "graph/skew.h"
#include "graph/store.h"
#include "tools/weft.h"

#define LIST_MAX 100000 /* rows of ~700 bytes: at most ~70 MB */

static const char graph_help[] =
	"Usage: weft graph [--graph-store PATH] COMMAND [OPTIONS] [ARGS]\n"
	"\n"
	"Execution graphs: the flow of one request across threads, processes and hosts, read\n"
	"from other tracers' files into a store that keeps, next to every trace, the aggregate\n"
	"context of each task type: its latency distribution, how often each event and edge\n"
	"occurs, and how many tasks of each process run at once.\n"
	"\n"
	"Commands:\n"
	"  import FILE|DIR...        store traces from OTLP, Jaeger, Zipkin v2 or X-Trace JSON\n"
	"                            files and LTTng CTF trace directories\n"
	"  list                      the traces stored, filtered and sorted\n"
	"  stats                     per task type: count, p50/p90/p99, rarest events and edges\n"
	"  show TRACE                one trace as a Gantt chart with its context\n"
	"  export TRACE --format F   one trace as Chrome trace JSON, OTLP JSON or Jaeger JSON\n"
	"  retain --max-age D --max-size S   drop old traces\n"
	"  forward --to URL [TRACE...]       send traces to an OpenTelemetry Collector over\n"
	"                            OTLP/HTTP, and what an earlier forward left spooled\n"
	"\n"
	"A trace is named by its hex id or by a prefix of it that names only one trace; the\n"
	"16 leading zeros of a 64-bit id (Zipkin's, Jaeger's) may be left out.\n"
	"`weft graph COMMAND --help` describes a command's options.\n"
	"\n"
	"Options (before the command, or among its options):\n"
	"  -S, --graph-store PATH  the store, an SQLite file (created if absent).  Default:\n"
	"                          $WEFT_GRAPH_STORE, else graph.sqlite in the directory of the\n"
	"                          aggregator's store: /var/lib/weft/ as root, else\n"
	"                          $XDG_STATE_HOME/weft/ or ~/.local/state/weft/ (made mode 0700)\n"
	"  -h, --help              this text\n"
	"\n"
	"Examples:\n"
	"  weft graph import trace.json otel-export.jsonl /tmp/lttng-traces/session-1\n"
	"  weft graph list --service checkout --min-duration 250ms --since 1h\n"
	"  weft graph show 4bf92f35\n"
	"  weft graph export 4bf92f35 --format chrome -o trace.json\n"
	"  weft graph import --forward http://collector:4318 trace.json\n"
	"\n"
	"Exit status: 0 success, 1 failure (a file refused, a trace not found, the store cannot\n"
	"be opened or written), 2 bad command line.\n";

static const char import_help[] =
	"Usage: weft graph import [OPTIONS] FILE|DIR...\n"
	"\n"
	"Stores the traces of each FILE, in one transaction per file.  The format is detected\n"
	"from the content (a directory is an LTTng CTF trace), or given with --format.  Each\n"
	"trace's clock skew is corrected before it is stored, where an RPC proves it (Zipkin's\n"
	"rules; docs/graphs.md, \"Clock skew\").  For each file one line says what was stored:\n"
	"\n"
	"  FILE: FORMAT, T traces, N tasks, E events, D edges stored[, R tasks already stored]\n"
	"\n"
	"A file that is malformed or inconsistent is refused with its name and the place of\n"
	"the fault (LINE:COLUMN in a JSON file, or a byte offset or event index), and nothing of\n"
	"it is stored; the other files are still imported, and the exit status is 1.\n"
	"\n"
	"Options:\n"
	"  -f, --format F          otlp, jaeger, zipkin, xtrace or ctf (default: detected)\n"
	"  -q, --quiet             print only refusals\n"
	"  -S, --graph-store PATH  the store (see `weft graph --help`)\n"
	"  -h, --help              this text\n"
	"\n"
	"Forwarding (docs/operations.md, \"Forwarding graphs\"): with --forward, every trace\n"
	"stored is also sent to an OpenTelemetry Collector as OTLP/HTTP JSON, and a last line\n"
	"counts what happened to its spans:\n"
	"\n"
	"  forward to URL: S spans sent (R requests), T retries, P spooled, D dropped,\n"
	"  J rejected, Q waiting in the spool\n"
	"\n"
	"  --forward URL           the collector's OTLP/HTTP endpoint: http://HOST:4318 (then\n"
	"                          /v1/traces is added) or the full URL of its traces path\n"
	"  --forward-spool DIR     where requests wait while the collector is unreachable or\n"
	"                          failing (default: graph-forward.spool next to the store)\n"
	"  --forward-spool-size S  the spool's bound (default 256MiB); a request that does not\n"
	"                          fit is dropped and counted\n"
	"  --forward-batch N       spans per request, about: whole traces are never split\n"
	"                          (default 512)\n"
	"  --forward-wait D        at the end, how long to keep retrying before leaving what\n"
	"                          remains in the spool for `weft graph forward` (default 30s;\n"
	"                          0: do not wait)\n"
	"\n"
	"Exit status: 0 every file was stored (and with --forward, every span was taken by the\n"
	"collector), 1 a file was refused or the store failed (or spans were dropped, rejected\n"
	"or left in the spool), 2 bad command line.\n";

static const char forward_help[] =
	"Usage: weft graph forward --to URL [OPTIONS] [TRACE...]\n"
	"\n"
	"Sends traces of the store to an OpenTelemetry Collector (or any OTLP/HTTP receiver)\n"
	"as OTLP JSON ExportTraceServiceRequests, POSTed to URL/v1/traces: each task a span\n"
	"(its parent the parentSpanId), each event a span event, every other edge a span link;\n"
	"service, host and pid the resource (service.name, host.name, process.pid), the thread\n"
	"the span attribute thread.id.  First it sends what an earlier forward left in the\n"
	"spool; then the TRACEs named, or with --all every trace of the store.  With neither it\n"
	"only empties the spool.\n"
	"\n"
	"A request answered 429, 502, 503 or 504, or not answered at all (connection refused,\n"
	"reset, timed out), is retried with exponential back-off (100 ms doubling to 30 s, with\n"
	"jitter; a Retry-After is honoured), and waits in the spool meanwhile.  Any other 4xx\n"
	"or 5xx is a refusal: its spans are counted rejected and never sent again.  The last\n"
	"line counts what happened to the spans:\n"
	"\n"
	"  forward to URL: S spans sent (R requests), T retries, P spooled, D dropped,\n"
	"  J rejected, Q waiting in the spool\n"
	"\n"
	"Options:\n"
	"  --to URL                the collector's OTLP/HTTP endpoint: http://HOST:4318 (then\n"
	"                          /v1/traces is added) or the full URL of its traces path\n"
	"  -a, --all               every trace of the store (at most 100000, oldest first)\n"
	"  -A, --aggregates        also the store's per-type aggregates, as OTLP metrics to\n"
	"                          URL/v1/metrics under the resource service.name =\n"
	"                          weft-aggregates: weft.task.duration (a histogram per task\n"
	"                          type), weft.task.event.tasks and weft.task.edge.count (the\n"
	"                          rarest event names and edges of each type); a snapshot,\n"
	"                          retried during --wait, never spooled\n"
	"  --spool DIR             where requests wait (default: graph-forward.spool next to\n"
	"                          the store)\n"
	"  --spool-size S          the spool's bound (default 256MiB); a request that does not\n"
	"                          fit is dropped and counted\n"
	"  --batch N               spans per request, about: whole traces are never split\n"
	"                          (default 512)\n"
	"  --wait D                how long to keep retrying before leaving what remains in\n"
	"                          the spool for a later run (default 30s; 0: do not wait)\n"
	"  -S, --graph-store PATH  the store (see `weft graph --help`)\n"
	"  -h, --help              this text\n"
	"\n"
	"Example:\n"
	"  weft graph forward --to http://collector:4318 --all\n"
	"\n"
	"Exit status: 0 every span was taken by the collector, 1 spans were dropped, rejected\n"
	"or left in the spool, or a trace was not found, 2 bad command line.\n";

static const char list_help[] =
	"Usage: weft graph list [OPTIONS]\n"
	"\n"
	"Lists the traces stored, one per line: id, start (UTC), duration, tasks, hosts and\n"
	"the root task (service: name).  Filters combine; a trace matches --service, --name or\n"
	"--host when any of its tasks does.  A trace the aggregator found incomplete after its\n"
	"query ended (a task's parent or an edge's task never arrived, or a task never ended)\n"
	"ends with [incomplete]; in JSON, \"incomplete\" lists why: parent, edge, open.\n"
	"\n"
	"Options:\n"
	"      --service S         a task of service S\n"
	"      --name N            a task named N\n"
	"      --host H            a task on host H\n"
	"      --since T           started at or after T: RFC 3339 (2024-05-01T12:00:00Z,\n"
	"                          with a fraction or an offset) or a time ago (90s, 15m, 1h)\n"
	"      --until T           started before T (same forms)\n"
	"      --min-duration D    lasted at least D (10ms, 2s, ...)\n"
	"      --max-duration D    lasted at most D\n"
	"      --sort start|duration   newest first (default) or longest first\n"
	"  -r, --reverse           oldest, or shortest, first\n"
	"  -n, --limit N           at most N traces (default 20, at most 100000)\n"
	"      --format text|json  a table (default) or a JSON array of objects\n"
	"  -S, --graph-store PATH  the store (see `weft graph --help`)\n"
	"  -h, --help              this text\n"
	"\n"
	"Exit status: 0 success (also when nothing matched), 1 the store failed, 2 bad\n"
	"command line.\n";

static const char stats_help[] =
	"Usage: weft graph stats [OPTIONS]\n"
	"\n"
	"Per task type (service: name), most frequent first: how many tasks were stored, the\n"
	"latency's p50, p90 and p99 (from a sketch, within 1.6%), and the rarest event names\n"
	"and outgoing edges with the share of the type's tasks that had them.  The statistics\n"
	"cover every trace ever imported, including those retention dropped since.  When\n"
	"sampled captures (`weft run` of `... graph sample P%`) wrote to the store, a first line\n"
	"says how many traces they saw and kept (by the head sample, as outliers): the counts\n"
	"are of every trace seen, the stored traces a sample of them.\n"
	"\n"
	"Options:\n"
	"      --format text|json  a table (default) or a JSON array of objects\n"
	"  -S, --graph-store PATH  the store (see `weft graph --help`)\n"
	"  -h, --help              this text\n"
	"\n"
	"Exit status: 0 success, 1 the store failed, 2 bad command line.\n";

static const char show_help[] =
	"Usage: weft graph show [OPTIONS] TRACE\n"
	"\n"
	"Draws one trace as a Gantt chart: one lane per task, indented under its parent, bars to\n"
	"scale in the terminal's width, times from the trace's start.  Each lane carries:\n"
	"  @T D     its start after the trace's start and its duration\n"
	"  pNN      the percentile of its latency among all stored tasks of its type\n"
	"  cN       the most other tasks of its process that ran at the same time\n"
	"  skew +D  the clock-skew correction applied to it\n"
	"  !EVENT   a rare event (seen in under 5% of the tasks of its type; '.' in the bar\n"
	"           marks a common one)\n"
	"  ^rare    a rare edge into the task (under 5% of its parent type's tasks)\n"
	"Lanes on the critical path (from the end of the root, back through the dependency that\n"
	"finished last) start with '*', and the bar shows their time on it as '#'.  Colour and\n"
	"bold are used when standard output is a terminal and NO_COLOR is not set.  The width is\n"
	"$COLUMNS, else the terminal's, else 100.\n"
	"\n"
	"Options:\n"
	"      --format text|json  the chart (default), or the same content as one JSON object\n"
	"  -S, --graph-store PATH  the store (see `weft graph --help`)\n"
	"  -h, --help              this text\n"
	"\n"
	"Exit status: 0 success, 1 no such trace (or a prefix of several) or the store failed,\n"
	"2 bad command line.\n";

static const char export_help[] =
	"Usage: weft graph export [OPTIONS] TRACE --format chrome|otlp|jaeger\n"
	"\n"
	"Writes one trace in another tool's format: Chrome trace event JSON (Perfetto,\n"
	"chrome://tracing), OTLP JSON (an ExportTraceServiceRequest), or Jaeger UI JSON (its\n"
	"\"upload\").  Importing the OTLP or Jaeger output gives the same trace back.\n"
	"\n"
	"Options:\n"
	"  -f, --format F          chrome, otlp or jaeger (required)\n"
	"  -o, --output FILE       write to FILE (default: standard output)\n"
	"  -S, --graph-store PATH  the store (see `weft graph --help`)\n"
	"  -h, --help              this text\n"
	"\n"
	"Exit status: 0 success, 1 no such trace, the store failed or the output could not be\n"
	"written, 2 bad command line.\n";

static const char retain_help[] =
	"Usage: weft graph retain [--max-age D] [--max-size S] [OPTIONS]\n"
	"\n"
	"Drops the traces that ended more than D ago (30m, 12h, 7d, ...), then the oldest\n"
	"traces until the store's file is at most S (500MiB, 2G, ...).  The aggregate context\n"
	"(latency distributions, event and edge frequencies, concurrency) is kept: it describes\n"
	"every trace ever imported.  Prints how many traces were dropped.\n"
	"\n"
	"Options:\n"
	"      --max-age D         drop traces that ended before now - D\n"
	"      --max-size S        then keep the file at most S bytes\n"
	"  -S, --graph-store PATH  the store (see `weft graph --help`)\n"
	"  -h, --help              this text\n"
	"\n"
	"At least one of --max-age and --max-size is required.  To keep a store bounded as it\n"
	"is written, give its writer the same bounds: weft run or weft aggregator\n"
	"--graph-max-age D --graph-max-size S (once a second).\n"
	"\n"
	"Exit status: 0 success, 1 the store failed, 2 bad command line.\n";

/* --graph-store's value, from before the command or among its options */
static const char *store_opt;

/* getopt's value for --graph-store and --format in every subcommand */
enum { OPT_STORE = 'S', OPT_FORMAT = 'F' };

int weft_graph_store_default(char *buf, size_t sz)
{
	char *slash;
	int rc;

	/* the aggregator's: $WEFT_GRAPH_STORE, else next to its default store */
	rc = aggd_graph_default_path(NULL, buf, sz);
	if (rc)
		return rc;
	slash = strrchr(buf, '/');
	if (!slash || getenv("WEFT_GRAPH_STORE"))
		return 0;
	/* make the directory as the aggregator does: mode 0700, parents too */
	for (char *p = buf + 1; p && *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		if (mkdir(buf, 0700) != 0 && errno != EEXIST) {
			rc = -errno;
			*p = '/';
			return rc;
		}
		*p = '/';
	}
	return 0;
}

/* The store's file name, from --graph-store or the default; -1 (said why) if none. */
static int store_path(char *path, size_t sz)
{
	int rc;

	if (store_opt) {
		if (!*store_opt) {
			fprintf(stderr, "weft: --graph-store takes a file name\n");
			return -1;
		}
		snprintf(path, sz, "%s", store_opt);
		return 0;
	}
	rc = weft_graph_store_default(path, sz);
	if (rc) {
		fprintf(stderr,
			"weft: no default graph store (%s); give --graph-store PATH or "
			"set WEFT_GRAPH_STORE\n",
			strerror(-rc));
		return -1;
	}
	return 0;
}

static struct graph_store *open_store(void)
{
	char path[4096], why[512];
	struct graph_store *s;

	if (store_path(path, sizeof(path)))
		return NULL;
	why[0] = 0;
	s = graph_store_open(path, why, sizeof(why));
	if (!s)
		fprintf(stderr, "weft: %s\n", why[0] ? why : "cannot open the graph store");
	return s;
}

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/*
 * A time for --since/--until: RFC 3339 ("2024-05-01T12:00:00Z", "...00.5+02:00", a space
 * or 't' for 'T', 'z' for 'Z'), "now", or a duration ago ("1h").  0 or -EINVAL.
 */
static int parse_time(const char *s, int64_t *out)
{
	struct tm tm;
	const char *p;
	int64_t secs, frac = 0, scale = 100000000;
	uint64_t ago;
	time_t t;

	if (!strcmp(s, "now")) {
		*out = now_ns();
		return 0;
	}
	if (units_duration_parse(s, 0, &ago) == 0) {
		if (ago > (uint64_t)now_ns())
			return -EINVAL;
		*out = now_ns() - (int64_t)ago;
		return 0;
	}
	memset(&tm, 0, sizeof(tm));
	p = strptime(s, "%Y-%m-%d", &tm);
	if (!p || (*p != 'T' && *p != 't' && *p != ' '))
		return -EINVAL;
	p = strptime(p + 1, "%H:%M:%S", &tm);
	if (!p)
		return -EINVAL;
	if (*p == '.') {
		if (p[1] < '0' || p[1] > '9')
			return -EINVAL;
		for (p++; *p >= '0' && *p <= '9'; p++) {
			frac += (*p - '0') * scale;
			scale /= 10;
		}
	}
	t = timegm(&tm);
	if (t == (time_t)-1 || t < 0)
		return -EINVAL;
	secs = (int64_t)t;
	if (*p == 'Z' || *p == 'z') {
		p++;
	} else if (*p == '+' || *p == '-') {
		int hh, mm, n = 0;

		if (sscanf(p + 1, "%2d:%2d%n", &hh, &mm, &n) != 2 || n != 5 || hh > 23 || mm > 59)
			return -EINVAL;
		secs -= (*p == '+' ? 1 : -1) * (hh * 3600 + mm * 60);
		p += 6;
	} else {
		return -EINVAL; /* RFC 3339 requires the offset */
	}
	if (*p || secs < 0 || secs > 9000000000LL)
		return -EINVAL;
	*out = secs * 1000000000LL + frac;
	return 0;
}

static void fmt_dur(char *buf, size_t sz, int64_t ns)
{
	double a = (double)ns;

	if (ns >= 1000000000)
		snprintf(buf, sz, "%.3gs", a / 1e9);
	else if (ns >= 1000000)
		snprintf(buf, sz, "%.3gms", a / 1e6);
	else if (ns >= 1000)
		snprintf(buf, sz, "%.3gµs", a / 1e3);
	else
		snprintf(buf, sz, "%" PRId64 "ns", ns);
}

static void fmt_time(char *buf, size_t sz, int64_t ns)
{
	time_t s = (time_t)(ns / 1000000000);
	struct tm tm;
	char b[40];

	if (ns < 0 || !gmtime_r(&s, &tm) || !strftime(b, sizeof(b), "%Y-%m-%dT%H:%M:%S", &tm)) {
		snprintf(buf, sz, "%" PRId64, ns);
		return;
	}
	snprintf(buf, sz, "%s.%06" PRId64 "Z", b, (ns % 1000000000) / 1000);
}

/* Writes s with control characters as '?' (names come from untrusted files). */
static void put_clean(FILE *f, const char *s)
{
	for (; *s; s++)
		fputc((unsigned char)*s < 0x20 || *s == 0x7f ? '?' : *s, f);
}

static int parse_format_opt(const char *s, bool *json)
{
	if (!strcmp(s, "text")) {
		*json = false;
		return 0;
	}
	if (!strcmp(s, "json")) {
		*json = true;
		return 0;
	}
	fprintf(stderr, "weft: --format takes text or json, not '%s'\n", s);
	return -1;
}

static int dump_json(json_t *v)
{
	int rc = v ? json_dumpf(v, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : -1;

	json_decref(v);
	if (rc) {
		fprintf(stderr, "weft: out of memory\n");
		return WEFT_EXIT_FAIL;
	}
	fputc('\n', stdout);
	return WEFT_EXIT_OK;
}

/* ---- forwarding (graph/forward.h), shared by import --forward and forward ---- */

struct fwd_cli {
	const char *url, *spool;
	uint64_t spool_max, wait_ns;
	size_t batch;
};

enum { OPT_FWD = 0x100, OPT_FWD_SPOOL, OPT_FWD_SPOOL_SIZE, OPT_FWD_BATCH, OPT_FWD_WAIT };

#define FWD_WAIT_DEFAULT (30 * UNITS_NS_PER_SEC)
#define FWD_SPOOL_DIR "graph-forward.spool"

/* One forwarding option (name: its long name); -1 when its value is bad (said). */
static int fwd_opt(struct fwd_cli *c, int opt, const char *name, const char *arg)
{
	uint64_t v;
	char *end;

	switch (opt) {
	case OPT_FWD:
		if (strncmp(arg, "http://", 7) && strncmp(arg, "https://", 8)) {
			fprintf(stderr,
				"weft: --%s takes the collector's OTLP/HTTP endpoint, an http:// or "
				"https:// URL (e.g. http://collector:4318), not '%s'\n",
				name, arg);
			return -1;
		}
		c->url = arg;
		return 0;
	case OPT_FWD_SPOOL:
		if (!*arg) {
			fprintf(stderr, "weft: --%s takes a directory\n", name);
			return -1;
		}
		c->spool = arg;
		return 0;
	case OPT_FWD_SPOOL_SIZE:
		if (units_size_parse(arg, &v) || v == 0) {
			fprintf(stderr,
				"weft: --%s takes a size above 0 (64MiB, 1GiB, ...), not '%s'\n",
				name, arg);
			return -1;
		}
		c->spool_max = v;
		return 0;
	case OPT_FWD_BATCH:
		errno = 0;
		v = strtoull(arg, &end, 10);
		if (errno || end == arg || *end || arg[0] == '-' || v == 0 || v > 1000000) {
			fprintf(stderr,
				"weft: --%s takes a number of spans, 1 to 1000000, not '%s'\n",
				name, arg);
			return -1;
		}
		c->batch = (size_t)v;
		return 0;
	case OPT_FWD_WAIT:
		if (units_duration_parse(arg, UNITS_NS_PER_SEC, &v)) {
			fprintf(stderr,
				"weft: --%s takes a duration (30s, 5m; a bare number counts "
				"seconds), not '%s'\n",
				name, arg);
			return -1;
		}
		c->wait_ns = v;
		return 0;
	}
	return -1;
}

static struct graph_fwd *fwd_open(const struct fwd_cli *c)
{
	struct graph_fwd_opts o = { .sz = sizeof(o) };
	struct graph_fwd *f;
	char spool[4096], why[512];

	if (c->spool) {
		snprintf(spool, sizeof(spool), "%s", c->spool);
	} else {
		char *slash;

		if (store_path(spool, sizeof(spool)))
			return NULL;
		slash = strrchr(spool, '/');
		if (!slash)
			snprintf(spool, sizeof(spool), "%s", FWD_SPOOL_DIR);
		else if ((size_t)(slash + 1 - spool) + sizeof(FWD_SPOOL_DIR) <= sizeof(spool))
			strcpy(slash + 1, FWD_SPOOL_DIR);
	}
	o.url = c->url;
	o.spool_dir = spool;
	o.spool_max = c->spool_max;
	o.batch_spans = c->batch;
	f = graph_fwd_open(&o, why, sizeof(why));
	if (!f)
		fprintf(stderr, "weft: cannot forward: %s\n", why);
	return f;
}

/* Sends what remains (waiting up to wait_ns), prints the summary line, closes f.  0 when
 * every span was taken by the collector, -1 otherwise (said why). */
static int fwd_finish(struct graph_fwd *f, const struct fwd_cli *c)
{
	struct graph_fwd_stats st;
	char url[512], err[256];

	graph_fwd_drain(f, c->wait_ns);
	graph_fwd_stats(f, &st);
	snprintf(url, sizeof(url), "%s", graph_fwd_url(f));
	snprintf(err, sizeof(err), "%s", graph_fwd_last_error(f));
	graph_fwd_close(f); /* nothing gathered is left after the drain */
	printf("forward to %s: %" PRIu64 " spans sent (%" PRIu64 " requests), %" PRIu64
	       " retries, %" PRIu64 " spooled, %" PRIu64 " dropped, %" PRIu64 " rejected, %" PRIu64
	       " waiting in the spool\n",
	       url, st.sent, st.requests, st.retried, st.spooled, st.dropped, st.rejected,
	       st.queued);
	fflush(stdout);
	if (st.queued)
		fprintf(stderr,
			"weft: %" PRIu64 " spans wait in the spool (last error: %s); "
			"`weft graph forward --to URL` sends them\n",
			st.queued, err[0] ? err : "none");
	if (st.dropped)
		fprintf(stderr, "weft: %" PRIu64 " spans dropped: the spool was full\n",
			st.dropped);
	if (st.rejected)
		fprintf(stderr, "weft: %" PRIu64 " spans rejected by the collector (last: %s)\n",
			st.rejected, err[0] ? err : "?");
	return st.queued || st.dropped || st.rejected ? -1 : 0;
}

/* ---- import ---- */

static int import_one(struct graph_store *s, const char *path, int fmt, bool quiet,
		      struct graph_fwd *fwd)
{
	struct graph_import_err err = { .offset = -1 };
	struct graph_put_stats st = { 0 };
	struct graph_skew_stats sk = { 0 };
	struct graph g;
	struct stat sb;
	char why[512];
	int rc;

	graph_init(&g);
	if (fmt == GRAPH_FMT_CTF ||
	    (fmt == GRAPH_FMT_AUTO && stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)))
		rc = graph_import_ctf(path, &g, &err);
	else
		rc = graph_import_file(path, (enum graph_format)fmt, &g, &err);
	if (rc < 0) {
		fprintf(stderr, "weft: refused %s: %s\n", path,
			err.msg[0] ? err.msg : strerror(-rc));
		goto out_free;
	}
	if (rc == 0)
		rc = GRAPH_FMT_CTF; /* graph_import_ctf() may say 0 */
	why[0] = 0;
	if (graph_check(&g, why, sizeof(why))) {
		fprintf(stderr, "weft: refused %s: %s\n", path, why);
		rc = -EINVAL;
		goto out_free;
	}
	fmt = rc;
	rc = graph_skew_correct_all(&g, &sk);
	if (rc) {
		fprintf(stderr, "weft: %s: %s\n", path, strerror(-rc));
		goto out_free;
	}
	why[0] = 0;
	rc = graph_store_put(s, &g, &st, why, sizeof(why));
	if (rc) {
		fprintf(stderr, "weft: %s: not stored: %s\n", path, why[0] ? why : strerror(-rc));
		goto out_free;
	}
	if (!quiet) {
		printf("%s: %s, %" PRIu64 " trace%s, %" PRIu64 " tasks, %" PRIu64
		       " events, %" PRIu64 " edges stored",
		       path, graph_format_name((enum graph_format)fmt), st.traces,
		       st.traces == 1 ? "" : "s", st.tasks, st.events, st.edges);
		if (st.replaced)
			printf(", %" PRIu64 " tasks already stored", st.replaced);
		if (sk.tasks)
			printf("; clock skew corrected on %zu task%s", sk.tasks,
			       sk.tasks == 1 ? "" : "s");
		putchar('\n');
	}
	/* what was stored, skew corrected, goes on: a refused file is not forwarded either */
	if (fwd && graph_fwd_add(fwd, &g))
		fprintf(stderr, "weft: %s: not forwarded: out of memory\n", path);
out_free:
	graph_free(&g);
	return rc;
}

static int graph_import(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "format", required_argument, NULL, 'f' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "graph-store", required_argument, NULL, OPT_STORE },
		{ "forward", required_argument, NULL, OPT_FWD },
		{ "forward-spool", required_argument, NULL, OPT_FWD_SPOOL },
		{ "forward-spool-size", required_argument, NULL, OPT_FWD_SPOOL_SIZE },
		{ "forward-batch", required_argument, NULL, OPT_FWD_BATCH },
		{ "forward-wait", required_argument, NULL, OPT_FWD_WAIT },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct fwd_cli fc = { .wait_ns = FWD_WAIT_DEFAULT };
	bool fwd_opts = false, quiet = false;
	struct graph_fwd *fwd = NULL;
	struct graph_store *s;
	int c, idx = 0, fmt = GRAPH_FMT_AUTO, failed = 0;

	optind = 1;
	while ((c = getopt_long(argc, argv, "f:qS:h", longopts, &idx)) != -1) {
		switch (c) {
		case OPT_FWD:
		case OPT_FWD_SPOOL:
		case OPT_FWD_SPOOL_SIZE:
		case OPT_FWD_BATCH:
		case OPT_FWD_WAIT:
			if (fwd_opt(&fc, c, longopts[idx].name, optarg))
				return WEFT_EXIT_USAGE;
			fwd_opts |= c != OPT_FWD;
			break;
		case 'f':
			fmt = graph_format_parse(optarg);
			if (fmt <= 0 || fmt == GRAPH_FMT_CHROME) {
				fprintf(stderr,
					"weft: --format takes otlp, jaeger, zipkin, xtrace or ctf, "
					"not '%s'\n",
					optarg);
				return WEFT_EXIT_USAGE;
			}
			break;
		case 'q':
			quiet = true;
			break;
		case OPT_STORE:
			store_opt = optarg;
			break;
		case 'h':
			fputs(import_help, stdout);
			return WEFT_EXIT_OK;
		default:
			fputs(import_help, stderr);
			return WEFT_EXIT_USAGE;
		}
	}
	if (optind >= argc) {
		fprintf(stderr, "weft: graph import needs at least one FILE or DIR\n");
		return WEFT_EXIT_USAGE;
	}
	if (fwd_opts && !fc.url) {
		fprintf(stderr, "weft: the --forward-* options need --forward URL\n");
		return WEFT_EXIT_USAGE;
	}
	s = open_store();
	if (!s)
		return WEFT_EXIT_FAIL;
	if (fc.url) {
		fwd = fwd_open(&fc);
		if (!fwd) {
			graph_store_close(s);
			return WEFT_EXIT_FAIL;
		}
	}
	for (int i = optind; i < argc; i++)
		failed += import_one(s, argv[i], fmt, quiet, fwd) != 0;
	graph_store_close(s);
	if (failed && argc - optind > 1)
		fprintf(stderr, "weft: %d of %d files refused or not stored\n", failed,
			argc - optind);
	if (fwd && fwd_finish(fwd, &fc))
		failed++;
	return failed ? WEFT_EXIT_FAIL : WEFT_EXIT_OK;
}

/* ---- list ---- */

static int parse_dur_opt(const char *opt, const char *s, int64_t *out)
{
	uint64_t v;

	if (units_duration_parse(s, 0, &v) || v == 0 || v > (uint64_t)INT64_MAX) {
		fprintf(stderr,
			"weft: %s takes a positive duration with its unit (500us, 10ms, 2s, "
			"...), not '%s'\n",
			opt, s);
		return -1;
	}
	*out = (int64_t)v;
	return 0;
}

/* Why a trace is incomplete (GRAPH_INC_*), as words. */
static const struct {
	uint32_t bit;
	const char *word, *text;
} inc_reasons[] = {
	{ GRAPH_INC_PARENT, "parent", "a task's parent is missing" },
	{ GRAPH_INC_EDGE, "edge", "an edge's task is missing" },
	{ GRAPH_INC_OPEN, "open", "a task never ended" },
};

static json_t *incomplete_json(uint32_t flags)
{
	json_t *a = json_array();

	for (size_t i = 0; a && i < sizeof(inc_reasons) / sizeof(inc_reasons[0]); i++)
		if ((flags & inc_reasons[i].bit) &&
		    json_array_append_new(a, json_string(inc_reasons[i].word))) {
			json_decref(a);
			a = NULL;
		}
	return a;
}

static int graph_list(int argc, char **argv)
{
	enum { O_SERVICE = 256, O_NAME, O_HOST, O_SINCE, O_UNTIL, O_MIN, O_MAX, O_SORT };
	static const struct option longopts[] = {
		{ "service", required_argument, NULL, O_SERVICE },
		{ "name", required_argument, NULL, O_NAME },
		{ "host", required_argument, NULL, O_HOST },
		{ "since", required_argument, NULL, O_SINCE },
		{ "until", required_argument, NULL, O_UNTIL },
		{ "min-duration", required_argument, NULL, O_MIN },
		{ "max-duration", required_argument, NULL, O_MAX },
		{ "sort", required_argument, NULL, O_SORT },
		{ "reverse", no_argument, NULL, 'r' },
		{ "limit", required_argument, NULL, 'n' },
		{ "format", required_argument, NULL, OPT_FORMAT },
		{ "graph-store", required_argument, NULL, OPT_STORE },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct graph_filter f = { .sort = GRAPH_SORT_START_DESC, .limit = 20 };
	struct graph_trace_row *rows = NULL;
	struct graph_store *s;
	bool json = false, by_dur = false, reverse = false;
	char why[512];
	ssize_t n;
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, "rn:S:h", longopts, NULL)) != -1) {
		switch (c) {
		case O_SERVICE:
			f.service = optarg;
			break;
		case O_NAME:
			f.name = optarg;
			break;
		case O_HOST:
			f.host = optarg;
			break;
		case O_SINCE:
		case O_UNTIL:
			if (parse_time(optarg, c == O_SINCE ? &f.from : &f.to)) {
				fprintf(stderr,
					"weft: --%s takes an RFC 3339 time "
					"(2024-05-01T12:00:00Z) or a time ago (15m, 1h), not "
					"'%s'\n",
					c == O_SINCE ? "since" : "until", optarg);
				return WEFT_EXIT_USAGE;
			}
			break;
		case O_MIN:
			if (parse_dur_opt("--min-duration", optarg, &f.min_dur))
				return WEFT_EXIT_USAGE;
			break;
		case O_MAX:
			if (parse_dur_opt("--max-duration", optarg, &f.max_dur))
				return WEFT_EXIT_USAGE;
			break;
		case O_SORT:
			if (strcmp(optarg, "start") && strcmp(optarg, "duration")) {
				fprintf(stderr, "weft: --sort takes start or duration, not '%s'\n",
					optarg);
				return WEFT_EXIT_USAGE;
			}
			by_dur = !strcmp(optarg, "duration");
			break;
		case 'r':
			reverse = true;
			break;
		case 'n': {
			char *end;
			unsigned long long v;

			errno = 0;
			v = strtoull(optarg, &end, 10);
			if (errno || end == optarg || *end || v == 0 || v > LIST_MAX ||
			    optarg[0] == '-') {
				fprintf(stderr,
					"weft: --limit takes a number from 1 to %d, not '%s'\n",
					LIST_MAX, optarg);
				return WEFT_EXIT_USAGE;
			}
			f.limit = (size_t)v;
			break;
		}
		case OPT_FORMAT:
			if (parse_format_opt(optarg, &json))
				return WEFT_EXIT_USAGE;
			break;
		case OPT_STORE:
			store_opt = optarg;
			break;
		case 'h':
			fputs(list_help, stdout);
			return WEFT_EXIT_OK;
		default:
			fputs(list_help, stderr);
			return WEFT_EXIT_USAGE;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "weft: graph list takes no arguments ('%s')\n", argv[optind]);
		return WEFT_EXIT_USAGE;
	}
	if (f.from && f.to && f.from >= f.to) {
		fprintf(stderr, "weft: --since must be before --until\n");
		return WEFT_EXIT_USAGE;
	}
	if (f.min_dur && f.max_dur && f.min_dur > f.max_dur) {
		fprintf(stderr, "weft: --min-duration is above --max-duration\n");
		return WEFT_EXIT_USAGE;
	}
	f.sort = by_dur ? (reverse ? GRAPH_SORT_DURATION_ASC : GRAPH_SORT_DURATION_DESC) :
			  (reverse ? GRAPH_SORT_START_ASC : GRAPH_SORT_START_DESC);
	s = open_store();
	if (!s)
		return WEFT_EXIT_FAIL;
	why[0] = 0;
	n = graph_store_list(s, &f, &rows, why, sizeof(why));
	graph_store_close(s);
	if (n < 0) {
		fprintf(stderr, "weft: %s\n", why[0] ? why : strerror((int)-n));
		return WEFT_EXIT_FAIL;
	}
	if (json) {
		json_t *a = json_array();

		for (ssize_t i = 0; i < n && a; i++) {
			const struct graph_trace_row *r = &rows[i];
			char hex[33];
			json_t *o;

			graph_id128_hex(r->trace, hex);
			o = json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:s, s:s, s:s}", "trace", hex,
				      "start", (json_int_t)r->start, "end", (json_int_t)r->end,
				      "duration", (json_int_t)(r->end - r->start), "tasks",
				      (json_int_t)r->ntasks, "hosts", (json_int_t)r->nhosts,
				      "service", r->service, "name", r->name, "host", r->host);
			if (o && r->incomplete &&
			    json_object_set_new(o, "incomplete", incomplete_json(r->incomplete))) {
				json_decref(o);
				o = NULL;
			}
			if (!o || json_array_append_new(a, o)) {
				json_decref(a);
				a = NULL;
			}
		}
		free(rows);
		return dump_json(a);
	}
	printf("%-32s  %-27s  %9s  %6s  %5s  %s\n", "TRACE", "START", "DURATION", "TASKS", "HOSTS",
	       "ROOT");
	for (ssize_t i = 0; i < n; i++) {
		const struct graph_trace_row *r = &rows[i];
		char hex[33], t[48], d[32];

		graph_id128_hex(r->trace, hex);
		fmt_time(t, sizeof(t), r->start);
		fmt_dur(d, sizeof(d), r->end - r->start);
		printf("%-32s  %-27s  %9s  %6" PRIu32 "  %5" PRIu32 "  ", hex, t, d, r->ntasks,
		       r->nhosts);
		if (r->service[0]) {
			put_clean(stdout, r->service);
			fputs(": ", stdout);
		}
		put_clean(stdout, r->name);
		if (r->incomplete)
			fputs("  [incomplete]", stdout);
		putchar('\n');
	}
	free(rows);
	return ferror(stdout) ? WEFT_EXIT_FAIL : WEFT_EXIT_OK;
}

/* ---- stats ---- */

static int graph_stats(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "format", required_argument, NULL, OPT_FORMAT },
		{ "graph-store", required_argument, NULL, OPT_STORE },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct graph_sampling sm = { 0 };
	struct graph_type_stats *rows = NULL;
	struct graph_store *s;
	bool json = false;
	char why[512];
	ssize_t n;
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, "S:h", longopts, NULL)) != -1) {
		switch (c) {
		case OPT_FORMAT:
			if (parse_format_opt(optarg, &json))
				return WEFT_EXIT_USAGE;
			break;
		case OPT_STORE:
			store_opt = optarg;
			break;
		case 'h':
			fputs(stats_help, stdout);
			return WEFT_EXIT_OK;
		default:
			fputs(stats_help, stderr);
			return WEFT_EXIT_USAGE;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "weft: graph stats takes no arguments ('%s')\n", argv[optind]);
		return WEFT_EXIT_USAGE;
	}
	s = open_store();
	if (!s)
		return WEFT_EXIT_FAIL;
	why[0] = 0;
	n = graph_store_stats(s, &rows, why, sizeof(why));
	if (n >= 0 && graph_store_sampling(s, &sm, why, sizeof(why)) < 0)
		n = -EIO;
	graph_store_close(s);
	if (n < 0) {
		free(rows);
		fprintf(stderr, "weft: %s\n", why[0] ? why : strerror((int)-n));
		return WEFT_EXIT_FAIL;
	}
	/* what sampled captures stored (weft run of `graph sample P%`): the traces kept are a
	 * sample, the aggregates below count every trace seen */
	if (sm.seen && !json)
		printf("sampled captures: %" PRIu64 " traces seen, %" PRIu64 " kept by the head "
		       "sample (%g%%), %" PRIu64 " kept as outliers; the counts below are of all "
		       "traces seen\n",
		       sm.seen, sm.kept_head, sm.rate * 100, sm.kept_outlier);
	if (json) {
		json_t *a = json_array();

		for (ssize_t i = 0; i < n && a; i++) {
			const struct graph_type_stats *r = &rows[i];
			json_t *o, *ev = json_array(), *ed = json_array();

			for (uint32_t k = 0; k < r->nrare_events && k < GRAPH_STATS_RAREST; k++)
				json_array_append_new(ev,
						      json_pack("{s:s, s:I, s:f}", "name",
								r->rare_events[k].name, "tasks",
								(json_int_t)r->rare_events[k].tasks,
								"share", r->rare_events[k].share));
			for (uint32_t k = 0; k < r->nrare_edges && k < GRAPH_STATS_RAREST; k++)
				json_array_append_new(
					ed, json_pack("{s:s, s:s, s:s, s:I, s:f}", "kind",
						      graph_edge_kind_name(r->rare_edges[k].kind),
						      "service", r->rare_edges[k].service, "name",
						      r->rare_edges[k].name, "count",
						      (json_int_t)r->rare_edges[k].count, "share",
						      r->rare_edges[k].share));
			o = json_pack("{s:s, s:s, s:I, s:I, s:I, s:I, s:o, s:o}", "service",
				      r->service, "name", r->name, "count", (json_int_t)r->count,
				      "p50", (json_int_t)r->p50, "p90", (json_int_t)r->p90, "p99",
				      (json_int_t)r->p99, "rarest_events", ev, "rarest_edges", ed);
			if (!o || json_array_append_new(a, o)) {
				json_decref(a);
				a = NULL;
			}
		}
		free(rows);
		return dump_json(a);
	}
	printf("%-40s  %8s  %9s  %9s  %9s\n", "TYPE (SERVICE: NAME)", "COUNT", "P50", "P90", "P99");
	for (ssize_t i = 0; i < n; i++) {
		const struct graph_type_stats *r = &rows[i];
		char p50[32], p90[32], p99[32], label[512];

		fmt_dur(p50, sizeof(p50), r->p50);
		fmt_dur(p90, sizeof(p90), r->p90);
		fmt_dur(p99, sizeof(p99), r->p99);
		snprintf(label, sizeof(label), "%s%s%s", r->service, r->service[0] ? ": " : "",
			 r->name);
		put_clean(stdout, label);
		printf("%*s  %8" PRIu64 "  %9s  %9s  %9s\n",
		       strlen(label) < 40 ? (int)(40 - strlen(label)) : 0, "", r->count, p50, p90,
		       p99);
		for (uint32_t k = 0; k < r->nrare_events && k < GRAPH_STATS_RAREST; k++) {
			fputs("    rarest event  ", stdout);
			put_clean(stdout, r->rare_events[k].name);
			printf("  %.1f%% (%" PRIu64 " of %" PRIu64 ")\n",
			       100.0 * r->rare_events[k].share, r->rare_events[k].tasks, r->count);
		}
		for (uint32_t k = 0; k < r->nrare_edges && k < GRAPH_STATS_RAREST; k++) {
			printf("    rarest edge   %s -> ",
			       graph_edge_kind_name(r->rare_edges[k].kind));
			if (r->rare_edges[k].service[0]) {
				put_clean(stdout, r->rare_edges[k].service);
				fputs(": ", stdout);
			}
			put_clean(stdout, r->rare_edges[k].name);
			printf("  %.1f%% (%" PRIu64 " per %" PRIu64 " tasks)\n",
			       100.0 * r->rare_edges[k].share, r->rare_edges[k].count, r->count);
		}
	}
	free(rows);
	return ferror(stdout) ? WEFT_EXIT_FAIL : WEFT_EXIT_OK;
}

/* ---- show, export ---- */

/*
 * Loads the trace named by a hex id or a unique prefix of its 32 digits.  A 64-bit id (Zipkin,
 * Jaeger) prints with 16 leading zeros; a prefix of its own 16 digits is tried that way when
 * it names nothing as it is.
 */
static int load_trace(struct graph_store *s, const char *name, struct graph *g)
{
	char why[512];
	int rc = graph_store_load_name(s, name, g, why, sizeof(why));

	if (rc)
		fprintf(stderr, "weft: %s\n", why[0] ? why : strerror(-rc));
	return rc;
}

static int terminal_width(void)
{
	const char *c = getenv("COLUMNS");
	struct winsize ws;

	if (c && *c) {
		char *end;
		long v = strtol(c, &end, 10);

		if (!*end && v >= 20 && v <= 10000)
			return (int)v;
	}
	if (isatty(1) && ioctl(1, TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 20)
		return ws.ws_col;
	return GRAPH_SHOW_WIDTH;
}

static int graph_show(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "format", required_argument, NULL, OPT_FORMAT },
		{ "graph-store", required_argument, NULL, OPT_STORE },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct graph_context ctx = { 0 };
	struct graph_show_opts o = { .sz = sizeof(o) };
	struct graph_store *s;
	struct graph g;
	bool json = false, have_ctx;
	const char *nc = getenv("NO_COLOR");
	uint32_t marks = 0;
	char hex[33];
	char why[512];
	int c, rc;

	optind = 1;
	while ((c = getopt_long(argc, argv, "S:h", longopts, NULL)) != -1) {
		switch (c) {
		case OPT_FORMAT:
			if (parse_format_opt(optarg, &json))
				return WEFT_EXIT_USAGE;
			break;
		case OPT_STORE:
			store_opt = optarg;
			break;
		case 'h':
			fputs(show_help, stdout);
			return WEFT_EXIT_OK;
		default:
			fputs(show_help, stderr);
			return WEFT_EXIT_USAGE;
		}
	}
	if (optind + 1 != argc) {
		fprintf(stderr, "weft: graph show takes one TRACE (a hex id or a prefix of one)\n");
		return WEFT_EXIT_USAGE;
	}
	s = open_store();
	if (!s)
		return WEFT_EXIT_FAIL;
	graph_init(&g);
	rc = load_trace(s, argv[optind], &g);
	if (rc)
		goto out;
	why[0] = 0;
	have_ctx = graph_store_context(s, &g, &ctx, why, sizeof(why)) == 0;
	if (!have_ctx)
		fprintf(stderr, "weft: warning: no aggregate context: %s\n",
			why[0] ? why : "unknown error");
	/* after the context, which is index-aligned with g: correcting moves, never reorders */
	rc = graph_skew_correct(&g, g.tasks[0].trace, NULL);
	if (rc) {
		fprintf(stderr, "weft: %s\n", strerror(-rc));
		goto out;
	}
	o.width = terminal_width();
	o.color = isatty(1) && !(nc && *nc);
	graph_id128_hex(g.tasks[0].trace, hex);
	if (!json && graph_store_mark_get(s, hex, &marks, why, sizeof(why)) == 0 && marks) {
		fputs("incomplete:", stdout);
		for (size_t i = 0, k = 0; i < sizeof(inc_reasons) / sizeof(inc_reasons[0]); i++)
			if (marks & inc_reasons[i].bit)
				printf("%s %s", k++ ? "," : "", inc_reasons[i].text);
		fputs(" (stitched by the aggregator after its query ended)\n", stdout);
	}
	rc = json ? graph_show_json(stdout, &g, g.tasks[0].trace, have_ctx ? &ctx : NULL) :
		    graph_show_text(stdout, &g, g.tasks[0].trace, have_ctx ? &ctx : NULL, &o);
	if (rc)
		fprintf(stderr, "weft: graph show: %s\n", strerror(-rc));
	if (have_ctx)
		graph_context_free(&ctx);
out:
	graph_free(&g);
	graph_store_close(s);
	return rc ? WEFT_EXIT_FAIL : WEFT_EXIT_OK;
}

static int graph_export_cmd(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "format", required_argument, NULL, 'f' },
		{ "output", required_argument, NULL, 'o' },
		{ "graph-store", required_argument, NULL, OPT_STORE },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct graph_store *s;
	struct graph g;
	const char *out = NULL;
	FILE *f = stdout;
	int c, rc, fmt = -1;

	optind = 1;
	while ((c = getopt_long(argc, argv, "f:o:S:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'f':
			fmt = graph_format_parse(optarg);
			if (fmt != GRAPH_FMT_CHROME && fmt != GRAPH_FMT_OTLP &&
			    fmt != GRAPH_FMT_JAEGER) {
				fprintf(stderr,
					"weft: --format takes chrome, otlp or jaeger, not '%s'\n",
					optarg);
				return WEFT_EXIT_USAGE;
			}
			break;
		case 'o':
			out = optarg;
			break;
		case OPT_STORE:
			store_opt = optarg;
			break;
		case 'h':
			fputs(export_help, stdout);
			return WEFT_EXIT_OK;
		default:
			fputs(export_help, stderr);
			return WEFT_EXIT_USAGE;
		}
	}
	if (optind + 1 != argc) {
		fprintf(stderr,
			"weft: graph export takes one TRACE (a hex id or a prefix of one)\n");
		return WEFT_EXIT_USAGE;
	}
	if (fmt < 0) {
		fprintf(stderr, "weft: graph export needs --format chrome, otlp or jaeger\n");
		return WEFT_EXIT_USAGE;
	}
	s = open_store();
	if (!s)
		return WEFT_EXIT_FAIL;
	graph_init(&g);
	rc = load_trace(s, argv[optind], &g);
	graph_store_close(s);
	if (rc)
		goto out;
	if (out && strcmp(out, "-") != 0) {
		f = fopen(out, "w");
		if (!f) {
			rc = -errno;
			fprintf(stderr, "weft: -o %s: %s\n", out, strerror(errno));
			goto out;
		}
	}
	rc = graph_export(f, &g, (enum graph_format)fmt);
	if (f != stdout) {
		if (fclose(f) != 0 && !rc)
			rc = -EIO;
	} else if (fflush(stdout) != 0 && !rc) {
		rc = -EIO;
	}
	if (rc) {
		bool file = out && strcmp(out, "-") != 0;

		fprintf(stderr, "weft: graph export to %s: %s\n", file ? out : "standard output",
			strerror(-rc));
		if (file)
			unlink(out);
	}
out:
	graph_free(&g);
	return rc ? WEFT_EXIT_FAIL : WEFT_EXIT_OK;
}

/* ---- retain ---- */

static int graph_retain(int argc, char **argv)
{
	enum { O_AGE = 256, O_SIZE };
	static const struct option longopts[] = {
		{ "max-age", required_argument, NULL, O_AGE },
		{ "max-size", required_argument, NULL, O_SIZE },
		{ "graph-store", required_argument, NULL, OPT_STORE },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct graph_store *s;
	uint64_t age = 0, size = 0;
	int64_t before = 0;
	char why[512];
	ssize_t n;
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, "S:h", longopts, NULL)) != -1) {
		switch (c) {
		case O_AGE:
			if (tool_parse_max_age("--max-age", optarg, &age))
				return WEFT_EXIT_USAGE;
			break;
		case O_SIZE:
			if (tool_parse_max_size("--max-size", optarg, &size))
				return WEFT_EXIT_USAGE;
			break;
		case OPT_STORE:
			store_opt = optarg;
			break;
		case 'h':
			fputs(retain_help, stdout);
			return WEFT_EXIT_OK;
		default:
			fputs(retain_help, stderr);
			return WEFT_EXIT_USAGE;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "weft: graph retain takes no arguments ('%s')\n", argv[optind]);
		return WEFT_EXIT_USAGE;
	}
	if (!age && !size) {
		fprintf(stderr, "weft: graph retain needs --max-age, --max-size or both\n");
		return WEFT_EXIT_USAGE;
	}
	if (age) {
		int64_t now = now_ns();

		before = (uint64_t)now > age ? now - (int64_t)age : 1;
	}
	s = open_store();
	if (!s)
		return WEFT_EXIT_FAIL;
	why[0] = 0;
	n = graph_store_retain(s, before, size, why, sizeof(why));
	graph_store_close(s);
	if (n < 0) {
		fprintf(stderr, "weft: %s\n", why[0] ? why : strerror((int)-n));
		return WEFT_EXIT_FAIL;
	}
	printf("%zd trace%s dropped\n", n, n == 1 ? "" : "s");
	return WEFT_EXIT_OK;
}

/* ---- forward ---- */

static int graph_forward(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "to", required_argument, NULL, OPT_FWD },
		{ "all", no_argument, NULL, 'a' },
		{ "aggregates", no_argument, NULL, 'A' },
		{ "spool", required_argument, NULL, OPT_FWD_SPOOL },
		{ "spool-size", required_argument, NULL, OPT_FWD_SPOOL_SIZE },
		{ "batch", required_argument, NULL, OPT_FWD_BATCH },
		{ "wait", required_argument, NULL, OPT_FWD_WAIT },
		{ "graph-store", required_argument, NULL, OPT_STORE },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct fwd_cli fc = { .wait_ns = FWD_WAIT_DEFAULT };
	struct graph_trace_row *rows = NULL;
	struct graph_store *s = NULL;
	struct graph_fwd *fwd;
	ssize_t nrows = 0;
	bool all = false, aggs = false;
	int c, idx = 0, failed = 0;

	optind = 1;
	while ((c = getopt_long(argc, argv, "aAS:h", longopts, &idx)) != -1) {
		switch (c) {
		case OPT_FWD:
		case OPT_FWD_SPOOL:
		case OPT_FWD_SPOOL_SIZE:
		case OPT_FWD_BATCH:
		case OPT_FWD_WAIT:
			if (fwd_opt(&fc, c, longopts[idx].name, optarg))
				return WEFT_EXIT_USAGE;
			break;
		case 'a':
			all = true;
			break;
		case 'A':
			aggs = true;
			break;
		case OPT_STORE:
			store_opt = optarg;
			break;
		case 'h':
			fputs(forward_help, stdout);
			return WEFT_EXIT_OK;
		default:
			fputs(forward_help, stderr);
			return WEFT_EXIT_USAGE;
		}
	}
	if (!fc.url) {
		fprintf(stderr, "weft: graph forward needs --to URL (e.g. "
				"--to http://collector:4318)\n");
		return WEFT_EXIT_USAGE;
	}
	if (all && optind < argc) {
		fprintf(stderr, "weft: graph forward takes TRACEs or --all, not both\n");
		return WEFT_EXIT_USAGE;
	}
	if (all || aggs || optind < argc) {
		s = open_store();
		if (!s)
			return WEFT_EXIT_FAIL;
	}
	if (all) {
		struct graph_filter flt = { .sort = GRAPH_SORT_START_ASC, .limit = LIST_MAX };
		char why[512] = "";

		nrows = graph_store_list(s, &flt, &rows, why, sizeof(why));
		if (nrows < 0) {
			fprintf(stderr, "weft: %s\n", why[0] ? why : strerror((int)-nrows));
			graph_store_close(s);
			return WEFT_EXIT_FAIL;
		}
		if (nrows == LIST_MAX)
			fprintf(stderr,
				"weft: --all forwards the %d oldest traces of the store; name the "
				"others, or run again after `weft graph retain` dropped these\n",
				LIST_MAX);
	}
	fwd = fwd_open(&fc);
	if (!fwd) {
		free(rows);
		graph_store_close(s);
		return WEFT_EXIT_FAIL;
	}
	graph_fwd_poll(fwd); /* what an earlier run spooled goes first */
	for (int i = 0; s && i < (all ? (int)nrows : argc - optind); i++) {
		struct graph g;
		char hex[33];
		const char *name = argv[optind + i];

		if (all) {
			graph_id128_hex(rows[i].trace, hex);
			name = hex;
		}
		graph_init(&g);
		if (load_trace(s, name, &g) == 0) {
			if (graph_fwd_add(fwd, &g))
				fprintf(stderr, "weft: trace %s: not forwarded: out of memory\n",
					name);
			graph_fwd_poll(fwd);
		} else {
			failed++;
		}
		graph_free(&g);
	}
	free(rows);
	if (aggs) {
		struct graph_fwd_stats st;
		char why[512];
		int rc =
			graph_fwd_aggregates(fwd, s, fc.wait_ns ? fc.wait_ns : 1, why, sizeof(why));

		graph_fwd_stats(fwd, &st);
		if (rc) {
			fprintf(stderr, "weft: aggregates not forwarded: %s\n",
				why[0] ? why : strerror(-rc));
			failed++;
		} else {
			printf("aggregates: %" PRIu64 " data points sent\n", st.metric_points);
		}
	}
	if (s)
		graph_store_close(s);
	if (fwd_finish(fwd, &fc))
		failed++;
	return failed ? WEFT_EXIT_FAIL : WEFT_EXIT_OK;
}

int cmd_graph(int argc, char **argv)
{
	static const struct {
		const char *name;
		int (*fn)(int, char **);
	} cmds[] = {
		{ "import", graph_import },	{ "list", graph_list },
		{ "stats", graph_stats },	{ "show", graph_show },
		{ "export", graph_export_cmd }, { "retain", graph_retain },
		{ "forward", graph_forward },
	};
	int i = 1;

	/* options before the command: --graph-store and --help only */
	while (i < argc && argv[i][0] == '-') {
		const char *a = argv[i];

		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			fputs(graph_help, stdout);
			return WEFT_EXIT_OK;
		}
		if (!strcmp(a, "-S") || !strcmp(a, "--graph-store")) {
			if (i + 1 >= argc) {
				fprintf(stderr, "weft: %s needs a PATH\n", a);
				return WEFT_EXIT_USAGE;
			}
			store_opt = argv[i + 1];
			i += 2;
			continue;
		}
		if (!strncmp(a, "--graph-store=", 14)) {
			store_opt = a + 14;
			i++;
			continue;
		}
		fprintf(stderr, "weft: graph: unknown option '%s' (see `weft graph --help`)\n", a);
		return WEFT_EXIT_USAGE;
	}
	if (i >= argc) {
		fputs(graph_help, stderr);
		return WEFT_EXIT_USAGE;
	}
	for (size_t k = 0; k < sizeof(cmds) / sizeof(cmds[0]); k++)
		if (!strcmp(argv[i], cmds[k].name))
			return cmds[k].fn(argc - i, argv + i);
	if (!strcmp(argv[i], "help")) {
		char *hargv[] = { argv[i + 1 < argc ? i + 1 : i], "--help", NULL };

		if (i + 1 >= argc) {
			fputs(graph_help, stdout);
			return WEFT_EXIT_OK;
		}
		for (size_t k = 0; k < sizeof(cmds) / sizeof(cmds[0]); k++)
			if (!strcmp(argv[i + 1], cmds[k].name))
				return cmds[k].fn(2, hargv);
	}
	fprintf(stderr, "weft: graph: unknown command '%s' (see `weft graph --help`)\n", argv[i]);
	return WEFT_EXIT_USAGE;
}
