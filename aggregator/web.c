// SPDX-License-Identifier: Apache-2.0
/*
 * The web face's server (web.h): libmicrohttpd loaded at start, the routes, the token, the
 * documents the aggregator thread hands over, and the trace pages' reads of the graph store.
 *
 * Routes (docs/http.md):
 *   /, /app.js, /style.css          the pages (embedded: web_assets.c, generated)
 *   /api/cluster                    WEB_DOC_CLUSTER as published
 *   /api/queries/ID/windows         the windows kept of query ID (?since=SEQ: newer only)
 *   /api/traces                     graph_store_list() with the filters of `weft graph list`
 *   /api/traces/ID                  one trace with its context (web_trace.c)
 *   /api/traces/ID/export           ?format=chrome|otlp|jaeger (graph/export.c)
 *   /metrics                        WEB_DOC_METRICS plus the server's own counters
 *
 * Must never: hold the mutex while answering (a request copies under it, answers outside),
 * read the aggregator's structures, accept a method but GET and HEAD.
 */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "aggregator/web.h"
#include "aggregator/web_int.h"
#include "base/file.h"
#include "base/log.h"

#define MHD_SONAME "libmicrohttpd.so.12"
#define Q_MAX 256 /* bytes of a query-string value we look at */

/* libmicrohttpd's entry points, found with dlsym() (web.h says why not linked) */
static struct {
	struct MHD_Daemon *(*start)(unsigned int, uint16_t, MHD_AcceptPolicyCallback, void *,
				    MHD_AccessHandlerCallback, void *, ...);
	void (*stop)(struct MHD_Daemon *);
	struct MHD_Response *(*from_buffer)(size_t, void *, enum MHD_ResponseMemoryMode);
	enum MHD_Result (*add_header)(struct MHD_Response *, const char *, const char *);
	enum MHD_Result (*queue)(struct MHD_Connection *, unsigned int, struct MHD_Response *);
	void (*destroy)(struct MHD_Response *);
	const char *(*lookup)(struct MHD_Connection *, enum MHD_ValueKind, const char *);
	const union MHD_DaemonInfo *(*info)(struct MHD_Daemon *, enum MHD_DaemonInfoType, ...);
	char error[256];
	bool ok;
} mhd;
static pthread_once_t mhd_once = PTHREAD_ONCE_INIT;

static void mhd_load(void)
{
	void *lib = dlopen(MHD_SONAME, RTLD_NOW | RTLD_LOCAL);
	const char *e;

	if (!lib) {
		e = dlerror();
		snprintf(mhd.error, sizeof(mhd.error), "%s (install libmicrohttpd12)",
			 e ? e : "dlopen failed");
		return;
	}
	*(void **)&mhd.start = dlsym(lib, "MHD_start_daemon");
	*(void **)&mhd.stop = dlsym(lib, "MHD_stop_daemon");
	*(void **)&mhd.from_buffer = dlsym(lib, "MHD_create_response_from_buffer");
	*(void **)&mhd.add_header = dlsym(lib, "MHD_add_response_header");
	*(void **)&mhd.queue = dlsym(lib, "MHD_queue_response");
	*(void **)&mhd.destroy = dlsym(lib, "MHD_destroy_response");
	*(void **)&mhd.lookup = dlsym(lib, "MHD_lookup_connection_value");
	*(void **)&mhd.info = dlsym(lib, "MHD_get_daemon_info");
	if (!mhd.start || !mhd.stop || !mhd.from_buffer || !mhd.add_header || !mhd.queue ||
	    !mhd.destroy || !mhd.lookup || !mhd.info) {
		snprintf(mhd.error, sizeof(mhd.error), "%s lacks an MHD_* function", MHD_SONAME);
		dlclose(lib);
		return;
	}
	mhd.ok = true; /* kept open for the life of the process */
}

/* ---- helpers ---- */

bool web_token_equal(const char *a, size_t alen, const char *b, size_t blen)
{
	/* every byte of the longer is looked at whatever matches: no early exit */
	size_t n = alen > blen ? alen : blen;
	unsigned char d = (unsigned char)(alen != blen);

	for (size_t i = 0; i < n; i++) {
		unsigned char x = i < alen ? (unsigned char)a[i] : 0;
		unsigned char y = i < blen ? (unsigned char)b[i] : 0;

		d |= x ^ y;
	}
	return d == 0;
}

int web_parse_listen(const char *s, struct sockaddr_storage *ss, bool *loopback)
{
	char host[128];
	const char *port_s;
	char *end;
	unsigned long port;
	size_t hl;

	memset(ss, 0, sizeof(*ss));
	if (!s || !*s)
		return -EINVAL;
	if (s[0] == '[') {
		const char *rb = strchr(s, ']');

		if (!rb || rb[1] != ':')
			return -EINVAL;
		hl = (size_t)(rb - s - 1);
		if (hl == 0 || hl >= sizeof(host))
			return -EINVAL;
		memcpy(host, s + 1, hl);
		host[hl] = 0;
		port_s = rb + 2;
	} else if ((port_s = strrchr(s, ':'))) {
		hl = (size_t)(port_s - s);
		if (hl >= sizeof(host) || memchr(s, ':', hl))
			return -EINVAL;
		memcpy(host, s, hl);
		host[hl] = 0;
		port_s++;
	} else {
		host[0] = 0; /* a port alone: loopback */
		port_s = s;
	}
	if (!*port_s || *port_s == '-' || *port_s == '+')
		return -EINVAL;
	errno = 0;
	port = strtoul(port_s, &end, 10);
	if (errno || *end || port > 65535)
		return -EINVAL;
	if (!host[0] || strcmp(host, "localhost") == 0)
		snprintf(host, sizeof(host), "127.0.0.1");
	if (strchr(host, ':')) {
		struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ss;

		if (inet_pton(AF_INET6, host, &a6->sin6_addr) != 1)
			return -EINVAL;
		a6->sin6_family = AF_INET6;
		a6->sin6_port = htons((uint16_t)port);
		*loopback = IN6_IS_ADDR_LOOPBACK(&a6->sin6_addr);
	} else {
		struct sockaddr_in *a4 = (struct sockaddr_in *)ss;

		if (inet_pton(AF_INET, host, &a4->sin_addr) != 1)
			return -EINVAL;
		a4->sin_family = AF_INET;
		a4->sin_port = htons((uint16_t)port);
		*loopback = (ntohl(a4->sin_addr.s_addr) >> 24) == 127;
	}
	return 0;
}

size_t web_prom_escape(char *out, size_t size, const char *s)
{
	size_t n = 0;

	for (; s && *s; s++) {
		const char *rep = *s == '\\' ? "\\\\" :
				  *s == '"'  ? "\\\"" :
				  *s == '\n' ? "\\n" :
					       NULL;
		size_t k = rep ? 2 : 1;

		if (n + k + 1 > size)
			break;
		if (rep)
			memcpy(out + n, rep, 2);
		else
			out[n] = *s;
		n += k;
	}
	if (size)
		out[n < size ? n : size - 1] = 0;
	return n;
}

/* ---- documents ---- */

struct qwin {
	uint64_t seq, index;
	char *json;
};

struct qring {
	uint64_t id;
	uint64_t last_use; /* w->seq when last written: the oldest is forgotten first */
	struct qwin win[WEB_MAX_WINDOWS];
	size_t n; /* by index, ascending */
};

void web_publish(struct web *w, enum web_doc doc, char *text)
{
	char *old;

	if (!w || doc >= WEB_DOC__COUNT) {
		free(text);
		return;
	}
	pthread_mutex_lock(&w->mu);
	old = w->docs[doc];
	w->docs[doc] = text;
	pthread_mutex_unlock(&w->mu);
	free(old);
}

static struct qring *ring_get(struct web *w, uint64_t id, bool create)
{
	struct qring *oldest = NULL;

	for (size_t i = 0; i < w->nrings; i++) {
		if (w->rings[i]->id == id)
			return w->rings[i];
		if (!oldest || w->rings[i]->last_use < oldest->last_use)
			oldest = w->rings[i];
	}
	if (!create)
		return NULL;
	if (w->nrings < WEB_MAX_QUERIES) {
		oldest = calloc(1, sizeof(*oldest));
		if (!oldest)
			return NULL;
		w->rings[w->nrings++] = oldest;
	} else {
		for (size_t i = 0; i < oldest->n; i++)
			free(oldest->win[i].json);
		memset(oldest, 0, sizeof(*oldest));
	}
	oldest->id = id;
	return oldest;
}

void web_window(struct web *w, uint64_t query_id, uint64_t index, char *json)
{
	struct qring *r;
	char *old = NULL;
	size_t i;

	if (!w || !json) {
		free(json);
		return;
	}
	pthread_mutex_lock(&w->mu);
	r = ring_get(w, query_id, true);
	if (!r) {
		pthread_mutex_unlock(&w->mu);
		free(json);
		return;
	}
	r->last_use = ++w->seq;
	for (i = 0; i < r->n && r->win[i].index < index; i++)
		;
	if (i < r->n && r->win[i].index == index) {
		old = r->win[i].json; /* a revision replaces the window */
	} else if (i == 0 && r->n == WEB_MAX_WINDOWS) {
		old = json; /* older than everything kept */
		json = NULL;
	} else {
		if (r->n == WEB_MAX_WINDOWS) {
			old = r->win[0].json;
			memmove(&r->win[0], &r->win[1], (r->n - 1) * sizeof(r->win[0]));
			r->n--;
			i--;
		}
		memmove(&r->win[i + 1], &r->win[i], (r->n - i) * sizeof(r->win[0]));
		r->n++;
	}
	if (json)
		r->win[i] = (struct qwin){ .seq = w->seq, .index = index, .json = json };
	pthread_mutex_unlock(&w->mu);
	free(old);
}

void web_stats(struct web *w, struct web_stats *st)
{
	pthread_mutex_lock(&w->mu);
	*st = w->st;
	pthread_mutex_unlock(&w->mu);
}

/* ---- answers ---- */

static void count(struct web *w, unsigned int status)
{
	pthread_mutex_lock(&w->mu);
	w->st.requests++;
	if (status >= 400 && status != 503 && status != 500) {
		w->st.rejected++;
		w->st.unauthorized += status == 401;
	}
	pthread_mutex_unlock(&w->mu);
}

/* Answers with body (malloc'd, taken; NULL: an empty body). */
static enum MHD_Result answer(struct web *w, struct MHD_Connection *c, unsigned int status,
			      const char *type, char *body, size_t len, const char *disposition)
{
	struct MHD_Response *r = body ? mhd.from_buffer(len, body, MHD_RESPMEM_MUST_FREE) :
					mhd.from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
	enum MHD_Result rc;

	if (!r) {
		free(body);
		return MHD_NO;
	}
	count(w, status);
	mhd.add_header(r, "Content-Type", type);
	mhd.add_header(r, "Cache-Control", "no-store");
	mhd.add_header(r, "X-Content-Type-Options", "nosniff");
	mhd.add_header(
		r, "Content-Security-Policy",
		"default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
		"frame-ancestors 'none'");
	if (status == 401)
		mhd.add_header(r, "WWW-Authenticate", "Bearer realm=\"weft\"");
	if (status == 405)
		mhd.add_header(r, "Allow", "GET, HEAD");
	if (disposition)
		mhd.add_header(r, "Content-Disposition", disposition);
	rc = mhd.queue(c, status, r);
	mhd.destroy(r);
	return rc;
}

/* A JSON error body: {"error": "...", "status": N}. */
static enum MHD_Result fail(struct web *w, struct MHD_Connection *c, unsigned int status,
			    const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static enum MHD_Result fail(struct web *w, struct MHD_Connection *c, unsigned int status,
			    const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	char *body;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	body = web_json_error(status, msg);
	return answer(w, c, status, "application/json", body, body ? strlen(body) : 0, NULL);
}

static enum MHD_Result send_doc(struct web *w, struct MHD_Connection *c, enum web_doc doc,
				const char *type)
{
	char *copy = NULL;

	pthread_mutex_lock(&w->mu);
	if (w->docs[doc])
		copy = strdup(w->docs[doc]);
	pthread_mutex_unlock(&w->mu);
	if (!copy)
		return fail(w, c, 503, "not published yet: try again in a moment");
	if (doc == WEB_DOC_METRICS) {
		/* the server's own counters end the exposition */
		struct web_stats st;
		char *more = NULL;
		size_t len = 0;
		FILE *f = open_memstream(&more, &len);

		web_stats(w, &st);
		if (f) {
			fputs(copy, f);
			fprintf(f,
				"# HELP weft_http_requests_total Requests the web server answered.\n"
				"# TYPE weft_http_requests_total counter\n"
				"weft_http_requests_total %" PRIu64 "\n"
				"# HELP weft_http_rejected_total Requests refused (bad path, method "
				"or token) or cut.\n"
				"# TYPE weft_http_rejected_total counter\n"
				"weft_http_rejected_total %" PRIu64 "\n"
				"# HELP weft_http_unauthorized_total Requests refused for want of the "
				"token.\n"
				"# TYPE weft_http_unauthorized_total counter\n"
				"weft_http_unauthorized_total %" PRIu64 "\n",
				st.requests, st.rejected, st.unauthorized);
			if (fclose(f) == 0) {
				free(copy);
				copy = more;
			} else {
				free(more);
			}
		}
	}
	return answer(w, c, 200, type, copy, strlen(copy), NULL);
}

static enum MHD_Result send_windows(struct web *w, struct MHD_Connection *c, uint64_t id,
				    uint64_t since)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	struct qring *r;
	bool first = true;

	if (!f)
		return fail(w, c, 500, "out of memory");
	pthread_mutex_lock(&w->mu);
	r = ring_get(w, id, false);
	fprintf(f, "{\"query\":%" PRIu64 ",\"seq\":%" PRIu64 ",\"windows\":[", id, w->seq);
	for (size_t i = 0; r && i < r->n; i++) {
		if (r->win[i].seq <= since)
			continue;
		fprintf(f, "%s{\"seq\":%" PRIu64 ",\"window\":%s}", first ? "" : ",", r->win[i].seq,
			r->win[i].json);
		first = false;
	}
	fputs("]}", f);
	pthread_mutex_unlock(&w->mu);
	if (fclose(f)) {
		free(buf);
		return fail(w, c, 500, "out of memory");
	}
	return answer(w, c, 200, "application/json", buf, len, NULL);
}

static bool parse_u64(const char *s, uint64_t *v)
{
	char *end;

	if (!s || !*s || *s < '0' || *s > '9' || strlen(s) > 20)
		return false;
	errno = 0;
	*v = strtoull(s, &end, 10);
	return !errno && !*end;
}

static bool authorized(struct web *w, struct MHD_Connection *c)
{
	const char *h;
	size_t n;

	if (!w->token_len)
		return true;
	h = mhd.lookup(c, MHD_HEADER_KIND, "Authorization");
	if (!h || strncasecmp(h, "Bearer ", 7) != 0)
		return false;
	h += 7;
	n = strnlen(h, WEB_TOKEN_MAX + 1);
	return web_token_equal(h, n, w->token, w->token_len);
}

static const char *arg(struct MHD_Connection *c, const char *k)
{
	const char *v = mhd.lookup(c, MHD_GET_ARGUMENT_KIND, k);

	return v && *v && strnlen(v, Q_MAX + 1) <= Q_MAX ? v : NULL;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
				  const char *method, const char *version, const char *upload,
				  size_t *upload_size, void **con_cls)
{
	struct web *w = cls;
	const struct web_asset *as;
	uint64_t id, since = 0;
	char tail[64];
	int n;

	(void)version;
	(void)upload;
	(void)con_cls;
	if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
		if (upload_size)
			*upload_size = 0;
		return fail(w, c, 405, "read-only: only GET and HEAD");
	}
	if (strcmp(url, "/") == 0)
		url = "/index.html";
	if (strcmp(url, "/favicon.ico") == 0) /* browsers ask; the pages say "none" */
		return answer(w, c, 204, "image/x-icon", NULL, 0, NULL);
	for (as = web_assets; as->path; as++)
		if (strcmp(url, as->path) == 0)
			return answer(w, c, 200, as->type, web_memdup(as->data, as->len), as->len,
				      NULL);
	if (strncmp(url, "/api/", 5) != 0 && strcmp(url, "/metrics") != 0)
		return fail(w, c, 404, "no such page");
	if (!authorized(w, c))
		return fail(w, c, 401, "this server needs 'Authorization: Bearer TOKEN'");
	if (strcmp(url, "/metrics") == 0 && w->o.cluster)
		return send_doc(w, c, WEB_DOC_METRICS, "text/plain; version=0.0.4; charset=utf-8");
	if (strcmp(url, "/api/cluster") == 0 && w->o.cluster)
		return send_doc(w, c, WEB_DOC_CLUSTER, "application/json");
	if (w->o.cluster && sscanf(url, "/api/queries/%20[0-9]%n", tail, &n) == 1 &&
	    strcmp(url + n, "/windows") == 0 && parse_u64(tail, &id)) {
		const char *s = arg(c, "since");

		if (s && !parse_u64(s, &since))
			return fail(w, c, 400, "since: not a number");
		return send_windows(w, c, id, since);
	}
	if (strcmp(url, "/api/traces") == 0 || strncmp(url, "/api/traces/", 12) == 0) {
		struct web_trace_req rq = {
			.id = url[11] == '/' ? url + 12 : NULL,
			.service = arg(c, "service"),
			.name = arg(c, "name"),
			.host = arg(c, "host"),
			.min_duration = arg(c, "min_duration"),
			.max_duration = arg(c, "max_duration"),
			.sort = arg(c, "sort"),
			.limit = arg(c, "limit"),
			.format = arg(c, "format"),
		};
		struct web_reply rp = { 0 };

		if (!w->o.graph_store)
			return fail(w, c, 404, "no graph store: start with --graph-store PATH");
		web_trace_answer(w, &rq, &rp);
		if (!rp.body)
			return fail(w, c, rp.status ? rp.status : 500, "%s",
				    rp.why[0] ? rp.why : "out of memory");
		return answer(w, c, 200, rp.type, rp.body, rp.len,
			      rp.disposition[0] ? rp.disposition : NULL);
	}
	return fail(w, c, 404, "no such endpoint");
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
			 enum MHD_RequestTerminationCode toe)
{
	struct web *w = cls;

	(void)c;
	(void)con_cls;
	if (toe == MHD_REQUEST_TERMINATED_COMPLETED_OK ||
	    toe == MHD_REQUEST_TERMINATED_DAEMON_SHUTDOWN)
		return;
	pthread_mutex_lock(&w->mu);
	w->st.rejected++;
	pthread_mutex_unlock(&w->mu);
}

static void on_log(void *cls, const char *fmt, va_list ap)
{
	char buf[512];
	size_t n;

	(void)cls;
	vsnprintf(buf, sizeof(buf), fmt, ap);
	n = strlen(buf);
	while (n && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
		buf[--n] = 0;
	log_debug("web: %s", buf);
}

static int read_token(struct web *w, const char *path, char *err, size_t errsz)
{
	char *data = NULL, why[256] = "";
	size_t len = 0;
	int rc = weft_file_read(path, WEB_TOKEN_MAX, &data, &len, why, sizeof(why));

	if (rc) {
		snprintf(err, errsz, "--http-token %s: %s", path,
			 why[0] ? why : weft_file_strerror(rc));
		return rc;
	}
	while (len && (data[len - 1] == '\n' || data[len - 1] == '\r' || data[len - 1] == ' '))
		len--;
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)data[i] <= ' ' || data[i] == 0x7f) {
			len = 0;
			break;
		}
	if (len < 16) {
		snprintf(err, errsz,
			 "--http-token %s: a token is one line of at least 16 printable characters "
			 "without spaces (e.g. head -c 32 /dev/urandom | base64 > %s)",
			 path, path);
		explicit_bzero(data, len);
		free(data);
		return -EINVAL;
	}
	memcpy(w->token, data, len);
	w->token_len = len;
	explicit_bzero(data, len);
	free(data);
	return 0;
}

struct web *web_start(const struct web_opts *o, char *err, size_t errsz)
{
	struct sockaddr_storage ss;
	struct web *w;
	bool loop = false;
	char host[INET6_ADDRSTRLEN] = "?";
	const union MHD_DaemonInfo *di;
	unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_USE_ERROR_LOG;
	uint16_t port;

	if (!o || !o->listen || web_parse_listen(o->listen, &ss, &loop)) {
		snprintf(err, errsz,
			 "--http %s: not ADDR:PORT, [ADDR6]:PORT or PORT (numeric, e.g. "
			 "127.0.0.1:%d)",
			 o && o->listen ? o->listen : "", WEB_DEFAULT_PORT);
		errno = EINVAL;
		return NULL;
	}
	if (!loop && !o->token_file) {
		snprintf(
			err, errsz,
			"--http %s is not a loopback address: give --http-token FILE (clients then "
			"send 'Authorization: Bearer TOKEN'), or bind 127.0.0.1 behind a reverse "
			"proxy (docs/operations.md)",
			o->listen);
		errno = EINVAL;
		return NULL;
	}
	pthread_once(&mhd_once, mhd_load);
	if (!mhd.ok) {
		snprintf(err, errsz, "cannot serve HTTP: %s", mhd.error);
		errno = ENOENT;
		return NULL;
	}
	w = calloc(1, sizeof(*w));
	if (!w) {
		snprintf(err, errsz, "out of memory");
		return NULL;
	}
	memcpy(&w->o, o, o->sz < sizeof(w->o) ? o->sz : sizeof(w->o));
	w->o.listen = NULL; /* not kept: the caller's */
	w->o.token_file = NULL;
	if (o->graph_store && !(w->graph_store = strdup(o->graph_store)))
		goto out_nomem;
	w->o.graph_store = w->graph_store;
	pthread_mutex_init(&w->mu, NULL);
	if (o->token_file && read_token(w, o->token_file, err, errsz)) {
		web_stop(w);
		errno = EINVAL;
		return NULL;
	}
	if (ss.ss_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	w->d = mhd.start(flags, 0, NULL, NULL, on_request, w, MHD_OPTION_SOCK_ADDR,
			 (struct sockaddr *)&ss, MHD_OPTION_CONNECTION_LIMIT, (unsigned int)64,
			 MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)15,
			 MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(64 * 1024),
			 MHD_OPTION_NOTIFY_COMPLETED, on_completed, w, MHD_OPTION_EXTERNAL_LOGGER,
			 on_log, w, MHD_OPTION_END);
	if (!w->d) {
		snprintf(err, errsz, "cannot serve HTTP on %s: %s", o->listen,
			 errno ? strerror(errno) : "the server did not start");
		web_stop(w);
		errno = errno ? errno : EADDRINUSE;
		return NULL;
	}
	di = mhd.info(w->d, MHD_DAEMON_INFO_BIND_PORT);
	port = di ? di->port : 0;
	if (ss.ss_family == AF_INET6) {
		inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, host, sizeof(host));
		snprintf(w->url, sizeof(w->url), "http://[%s]:%u", host, port);
	} else {
		inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, host, sizeof(host));
		snprintf(w->url, sizeof(w->url), "http://%s:%u", host, port);
	}
	log_info("web: serving %s%s%s", w->url, w->token_len ? " (token required)" : "",
		 w->graph_store ? "" : " (no graph store: no trace pages)");
	return w;
out_nomem:
	free(w);
	snprintf(err, errsz, "out of memory");
	errno = ENOMEM;
	return NULL;
}

const char *web_url(const struct web *w)
{
	return w->url;
}

void web_stop(struct web *w)
{
	if (!w)
		return;
	if (w->d)
		mhd.stop(w->d); /* joins the server's thread: nothing reads w after this */
	web_trace_close(w);
	for (int i = 0; i < WEB_DOC__COUNT; i++)
		free(w->docs[i]);
	for (size_t i = 0; i < w->nrings; i++) {
		for (size_t k = 0; k < w->rings[i]->n; k++)
			free(w->rings[i]->win[k].json);
		free(w->rings[i]);
	}
	pthread_mutex_destroy(&w->mu);
	explicit_bzero(w->token, sizeof(w->token));
	free(w->graph_store);
	free(w);
}
