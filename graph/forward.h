/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Forwarding execution graphs to a trace backend over OTLP/HTTP (docs/operations.md,
 * "Forwarding graphs to an OpenTelemetry Collector"; docs/graphs.md, "Another backend").
 *
 * A forwarder takes graph batches as they are stored (graph_fwd_add), gathers them into
 * requests of about opts.batch_spans spans or opts.batch_delay_ns of age, and POSTs each as
 * an OTLP JSON ExportTraceServiceRequest (written by graph_export(), GRAPH_FMT_OTLP: tasks are
 * spans, events span events, other edges span links; service, host and pid the resource,
 * the thread the span attribute thread.id) to URL/v1/traces with Content-Type
 * application/json.
 *
 * Delivery:
 *   2xx                        sent (an OTLP partialSuccess.rejectedSpans is counted rejected)
 *   429, 502, 503, 504, or no  retried with exponential back-off and jitter; Retry-After
 *   answer (refused, reset,    (seconds or an HTTP date) is honoured
 *   timed out)
 *   any other status           rejected: counted, never retried
 * A request that cannot go now (the collector is failing, or older requests wait) is written
 * to the spool, a directory of one file per request whose total size is bounded by
 * opts.spool_max; requests leave it oldest first, each deleted once the collector answered
 * it.  A request that does not fit in the spool is dropped and its spans counted.  Files
 * left by an earlier run are sent first.
 *
 * The HTTP client is libcurl, opened with dlopen() on the first graph_fwd_open(), so that
 * weft's start-up does not pay for it; without it, graph_fwd_open() fails and says so.
 * Sending is synchronous: graph_fwd_add() and graph_fwd_poll() may each block for up to
 * opts.timeout_ns per request they make.  One forwarder is used by one thread.
 */
#ifndef WEFT_GRAPH_FORWARD_H
#define WEFT_GRAPH_FORWARD_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "graph/graph.h"

#define GRAPH_FWD_BATCH_SPANS 512
#define GRAPH_FWD_BATCH_DELAY_NS 1000000000ULL /* 1 s */
#define GRAPH_FWD_SPOOL_MAX (256ULL << 20) /* 256 MiB */
#define GRAPH_FWD_BACKOFF_MIN_NS 100000000ULL /* 100 ms */
#define GRAPH_FWD_BACKOFF_MAX_NS 30000000000ULL /* 30 s */
#define GRAPH_FWD_TIMEOUT_NS 10000000000ULL /* 10 s */
#define GRAPH_FWD_RETRY_AFTER_MAX_NS 600000000000ULL /* a Retry-After above 10 min is cut */

struct graph_fwd_opts {
	size_t sz; /* sizeof(struct graph_fwd_opts) */
	/* http:// or https:// endpoint: the collector's base (http://host:4318, to which
	 * /v1/traces is appended) or the full traces URL (ending in /v1/traces) */
	const char *url;
	const char *spool_dir; /* created (mode 0700) if absent; required */
	uint64_t spool_max; /* bytes; 0: GRAPH_FWD_SPOOL_MAX */
	size_t batch_spans; /* 0: GRAPH_FWD_BATCH_SPANS */
	uint64_t batch_delay_ns; /* 0: GRAPH_FWD_BATCH_DELAY_NS */
	uint64_t backoff_min_ns, backoff_max_ns; /* 0: the defaults above */
	uint64_t timeout_ns; /* per request; 0: GRAPH_FWD_TIMEOUT_NS */
};

/* Counters since graph_fwd_open(), in spans unless said otherwise. */
struct graph_fwd_stats {
	uint64_t sent; /* accepted by the collector */
	uint64_t requests; /* requests the collector answered 2xx */
	uint64_t retried; /* attempts that failed and will be made again (requests) */
	uint64_t spooled; /* written to the spool because they could not go at once */
	uint64_t dropped; /* lost: the spool had no room for them */
	uint64_t rejected; /* refused by the collector (a 4xx other than 429, partial success) */
	uint64_t queued; /* in the spool now (from earlier runs too) */
	uint64_t queued_bytes; /* bytes of the spool's files now */
	uint64_t pending; /* gathered, not yet a request */
	uint64_t metric_points; /* data points of aggregates taken by the collector */
};

struct graph_fwd;

/* NULL with why[] filled (bad URL, spool directory unusable, libcurl missing). */
struct graph_fwd *graph_fwd_open(const struct graph_fwd_opts *opts, char *why, size_t whysz);
void graph_fwd_close(struct graph_fwd *f); /* pending spans are flushed to the spool first */

/* Adds a copy of g's elements; a request is made when batch_spans are gathered.  0 or
 * -errno (-ENOMEM: nothing of g was added, and its tasks are counted dropped). */
int graph_fwd_add(struct graph_fwd *f, const struct graph *g);

/* Does what is due: closes a batch older than batch_delay_ns, sends spooled requests whose
 * back-off has passed.  Returns the ns until something is due again, or -1 when idle
 * (nothing gathered, nothing spooled). */
int64_t graph_fwd_poll(struct graph_fwd *f);

/* Closes the batch now and sends until the spool is empty or timeout_ns passed.  0 when
 * everything was answered, -ETIMEDOUT when requests remain in the spool. */
int graph_fwd_drain(struct graph_fwd *f, uint64_t timeout_ns);

/*
 * The store's per-type aggregates as OTLP metrics, "as their own resource": one
 * ExportMetricsServiceRequest (JSON) POSTed to the collector's /v1/metrics (the traces URL
 * with /v1/traces replaced), resource service.name = weft-aggregates and host.name this
 * host, scope weft.graph, all cumulative since the store began:
 *   weft.task.duration     histogram (ns) per task type (weft.task.service, weft.task.name):
 *                          the latency sketch's non-empty buckets as explicit bounds;
 *   weft.task.event.tasks  sum: tasks of the type with an event of that name
 *                          (weft.event.name), for the type's rarest event names;
 *   weft.task.edge.count   sum: edges of a kind (weft.edge.kind) from the type to a child
 *                          type (weft.child.service, weft.child.name), the rarest ones.
 * A snapshot, not a stream: it is not spooled (the next one supersedes it); a failure worth
 * retrying is retried with back-off until timeout_ns.  0 (st->metric_points counts the data
 * points sent), -ETIMEDOUT, -EBADMSG (refused) or another -errno, with why[] filled.
 */
struct graph_store;
int graph_fwd_aggregates(struct graph_fwd *f, struct graph_store *s, uint64_t timeout_ns, char *why,
			 size_t whysz);

void graph_fwd_stats(const struct graph_fwd *f, struct graph_fwd_stats *st);
/* The URL requests go to, and the last delivery error ("" if none). */
const char *graph_fwd_url(const struct graph_fwd *f);
const char *graph_fwd_last_error(const struct graph_fwd *f);

#endif
