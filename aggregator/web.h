/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The aggregator's web face (docs/http.md): a read-only HTTP server, in the aggregator's
 * process, that serves the pages (plain JavaScript and SVG, embedded in the binary at build
 * time: aggregator/web/) and the JSON API they draw from, and /metrics in the Prometheus text
 * format.
 *
 * Threads.  libmicrohttpd runs one thread of its own that answers every request.  It never
 * touches the aggregator's state: the aggregator thread builds documents (the cluster's
 * status, the metrics, each query's windows as they close) and hands them over with
 * web_publish() and web_window(), which swap a pointer under a mutex; a request copies what
 * it needs under the same mutex and answers outside it.  The graph store is opened by the
 * server thread itself (its own SQLite connection), only when a trace page asks for it.
 *
 * libmicrohttpd is loaded with dlopen() when the server starts, not linked: it pulls in
 * gnutls and nine other libraries, whose relocations every `weft` start would pay
 * (docs/performance.md).
 *
 * Security: binding anything but a loopback address needs a bearer token (web_opts.token_file),
 * compared in constant time; the API and /metrics then answer 401 without it (the static
 * assets, which carry no data, do not need it).  Only GET and HEAD of known paths are
 * answered; everything else is refused and counted (web_stats.rejected), as are requests that
 * libmicrohttpd itself cuts (headers over the connection's memory limit, time-outs).
 *
 * Must never: block the aggregator thread (publishing is a pointer swap), crash on a hostile
 * request, or write anything (the store is opened read-only).
 */
#ifndef WEFT_AGGREGATOR_WEB_H
#define WEFT_AGGREGATOR_WEB_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define WEB_DEFAULT_PORT 7480
#define WEB_MAX_WINDOWS 120 /* windows kept per query for the live page */
#define WEB_MAX_QUERIES 256 /* queries whose windows are kept (oldest forgotten first) */
#define WEB_TOKEN_MAX 512 /* bytes of a token file */

struct web_opts {
	size_t sz; /* sizeof(struct web_opts) */
	const char *listen; /* ADDR:PORT, [ADDR6]:PORT or PORT (loopback); port 0: any */
	const char *token_file; /* the bearer token; required unless the address is loopback */
	const char *graph_store; /* the trace pages' store; NULL: no trace pages */
	bool cluster; /* serve the cluster pages (the aggregator); else traces only */
};

struct web;

/* Checks the options, loads libmicrohttpd and starts serving.  NULL with errno and a one-line
 * reason in err (EINVAL: a bad address, or no token off loopback; EADDRINUSE; ENOENT: no
 * libmicrohttpd). */
struct web *web_start(const struct web_opts *o, char *err, size_t errsz);
void web_stop(struct web *w);
/* The address served, "http://127.0.0.1:7480" (the port bound when 0 was asked). */
const char *web_url(const struct web *w);

/* Documents the aggregator thread publishes; web takes ownership of text (malloc'd). */
enum web_doc {
	WEB_DOC_CLUSTER, /* application/json: agents and queries (docs/http.md) */
	WEB_DOC_METRICS, /* the Prometheus text exposition of the aggregator */
	WEB_DOC__COUNT
};
void web_publish(struct web *w, enum web_doc doc, char *text);
/* One closed window of a query, a JSON object (docs/http.md); web takes ownership.  The last
 * WEB_MAX_WINDOWS of each query are kept, a revision replacing the window it revises. */
void web_window(struct web *w, uint64_t query_id, uint64_t index, char *json);

struct web_stats {
	uint64_t requests; /* answered */
	uint64_t rejected; /* refused (400, 401, 404, 405) or cut by the server */
	uint64_t unauthorized; /* of which 401 */
};
void web_stats(struct web *w, struct web_stats *st);

/* Helpers, exported for the unit tests. */
/* a and b equal, in time that depends only on their lengths */
bool web_token_equal(const char *a, size_t alen, const char *b, size_t blen);
/* Parses ADDR:PORT, [ADDR6]:PORT or PORT into a sockaddr (numeric only); 0 or -EINVAL. */
struct sockaddr_storage;
int web_parse_listen(const char *s, struct sockaddr_storage *ss, bool *loopback);
/* A Prometheus label value escaped (backslash, double quote, newline) into out. */
size_t web_prom_escape(char *out, size_t size, const char *s);

#endif
