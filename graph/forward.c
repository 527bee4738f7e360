// SPDX-License-Identifier: Apache-2.0
/*
 * The OTLP/HTTP forwarder (forward.h says what it promises).  Its states:
 *
 *   gathering   graph_fwd_add() appends copies of batches to `pending` (graph_append) until
 *               batch_spans are there or the oldest is batch_delay_ns old;
 *   a request   pending is written as OTLP JSON by graph_export() into memory and cleared;
 *   sending     when the spool is empty and no back-off runs, the request goes at once;
 *               otherwise, or if that attempt fails in a way worth retrying, it becomes a
 *               spool file (or is dropped, counted, when the spool has no room);
 *   draining    the spool's oldest file is sent when the back-off allows; the file is
 *               deleted once the collector answered (2xx, or a refusal never retried).
 *
 * Spool files are named SEQ-SPANS.json (SEQ 16 hex digits, increasing; SPANS the request's
 * span count) and written as .tmp-SEQ first, then renamed, so a crash leaves whole files
 * only; stray .tmp files are removed at open.  The spool is ours, but it is read back with a
 * bound (spool_max) all the same.
 *
 * Exactly once holds when every attempt either fails before the collector reads the request
 * (refused, reset before it was read) or gets an answer.  A request whose answer is lost after
 * the collector took it (a timeout, a connection cut mid-answer) is sent again: at least once
 * then, as every OTLP exporter is.
 *
 * libcurl is opened on first use with dlopen() (as probes/insn.c opens capstone): curl's
 * header gives the constants and prototypes, the library is never linked.
 */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <jansson.h>

#include "base/log.h"
#include "graph/forward.h"
#include "graph/import.h"
#include "graph/import_priv.h"
#include "graph/store.h"
#include "kernel/weft_sketch.h"

#define CURL_SONAME "libcurl.so.4"
#define RESP_MAX 65536 /* bytes of a collector's answer kept (its partialSuccess) */

static struct {
	CURLcode (*global_init)(long);
	CURL *(*easy_init)(void);
	CURLcode (*easy_setopt)(CURL *, CURLoption, ...);
	CURLcode (*easy_perform)(CURL *);
	CURLcode (*easy_getinfo)(CURL *, CURLINFO, ...);
	void (*easy_cleanup)(CURL *);
	const char *(*easy_strerror)(CURLcode);
	struct curl_slist *(*slist_append)(struct curl_slist *, const char *);
	void (*slist_free_all)(struct curl_slist *);
	char error[256];
	bool ok;
} cu;
static pthread_once_t cu_once = PTHREAD_ONCE_INIT;

static void cu_load(void)
{
	void *lib = dlopen(CURL_SONAME, RTLD_NOW | RTLD_LOCAL);
	const char *e;

	if (!lib) {
		e = dlerror();
		snprintf(cu.error, sizeof(cu.error),
			 "cannot load libcurl (%s): install the package libcurl4", e ? e : "?");
		return;
	}
	*(void **)&cu.global_init = dlsym(lib, "curl_global_init");
	*(void **)&cu.easy_init = dlsym(lib, "curl_easy_init");
	*(void **)&cu.easy_setopt = dlsym(lib, "curl_easy_setopt");
	*(void **)&cu.easy_perform = dlsym(lib, "curl_easy_perform");
	*(void **)&cu.easy_getinfo = dlsym(lib, "curl_easy_getinfo");
	*(void **)&cu.easy_cleanup = dlsym(lib, "curl_easy_cleanup");
	*(void **)&cu.easy_strerror = dlsym(lib, "curl_easy_strerror");
	*(void **)&cu.slist_append = dlsym(lib, "curl_slist_append");
	*(void **)&cu.slist_free_all = dlsym(lib, "curl_slist_free_all");
	if (!cu.global_init || !cu.easy_init || !cu.easy_setopt || !cu.easy_perform ||
	    !cu.easy_getinfo || !cu.easy_cleanup || !cu.easy_strerror || !cu.slist_append ||
	    !cu.slist_free_all) {
		snprintf(cu.error, sizeof(cu.error), "%s lacks a curl_* function", CURL_SONAME);
		dlclose(lib);
		return;
	}
	if (cu.global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
		snprintf(cu.error, sizeof(cu.error), "curl_global_init failed");
		return;
	}
	cu.ok = true; /* kept open for the life of the process */
}

struct spool_file {
	uint64_t seq, spans, bytes;
};

struct graph_fwd {
	char *url, *dir;
	uint64_t spool_max, batch_delay, bmin, bmax, timeout;
	size_t batch_spans;

	struct graph pending;
	int64_t pending_since; /* monotonic ns of the oldest pending element */

	struct spool_file *q; /* the spool, oldest first: q[qhead, qn) */
	size_t qhead, qn, qcap;
	uint64_t seq_next;

	int64_t next_try; /* monotonic ns before which nothing is sent */
	unsigned fails; /* consecutive failed attempts */
	uint64_t rng;

	CURL *curl;
	struct curl_slist *hdrs;
	char *resp;
	size_t resp_len;

	struct graph_fwd_stats st;
	char err[256];
};

static int64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static uint64_t rng_next(struct graph_fwd *f)
{
	/* xorshift64*: jitter needs spread, not secrecy */
	f->rng ^= f->rng >> 12;
	f->rng ^= f->rng << 25;
	f->rng ^= f->rng >> 27;
	return f->rng * 0x2545F4914F6CDD1DULL;
}

static size_t on_body(char *p, size_t size, size_t n, void *arg)
{
	struct graph_fwd *f = arg;
	size_t len = size * n, room = RESP_MAX - f->resp_len;

	if (len < room)
		room = len;
	memcpy(f->resp + f->resp_len, p, room); /* the rest is read and ignored */
	f->resp_len += room;
	return len;
}

/* ---- the spool ---- */

static void spool_path(const struct graph_fwd *f, const struct spool_file *s, char *buf, size_t sz)
{
	snprintf(buf, sz, "%s/%016" PRIx64 "-%" PRIu64 ".json", f->dir, s->seq, s->spans);
}

static int cmp_seq(const void *a, const void *b)
{
	const struct spool_file *x = a, *y = b;

	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int q_push(struct graph_fwd *f, const struct spool_file *s)
{
	if (f->qhead && f->qn == f->qcap) { /* reuse the room of files already sent */
		memmove(f->q, f->q + f->qhead, (f->qn - f->qhead) * sizeof(*f->q));
		f->qn -= f->qhead;
		f->qhead = 0;
	}
	if (f->qn == f->qcap) {
		size_t ncap = f->qcap ? f->qcap * 2 : 64;
		struct spool_file *q = realloc(f->q, ncap * sizeof(*q));

		if (!q)
			return -ENOMEM;
		f->q = q;
		f->qcap = ncap;
	}
	f->q[f->qn++] = *s;
	f->st.queued += s->spans;
	f->st.queued_bytes += s->bytes;
	return 0;
}

/* The files an earlier run left, oldest first; stray temporary files removed. */
static int spool_scan(struct graph_fwd *f, char *why, size_t whysz)
{
	DIR *d = opendir(f->dir);
	struct dirent *de;
	size_t first = f->qn;

	if (!d) {
		snprintf(why, whysz, "spool %s: %s", f->dir, strerror(errno));
		return -errno;
	}
	while ((de = readdir(d))) {
		struct spool_file s = { 0 };
		char path[4096], tail[8];
		struct stat sb;

		if (!strncmp(de->d_name, ".tmp-", 5)) {
			snprintf(path, sizeof(path), "%s/%s", f->dir, de->d_name);
			unlink(path);
			continue;
		}
		if (sscanf(de->d_name, "%16" SCNx64 "-%" SCNu64 "%7s", &s.seq, &s.spans, tail) !=
			    3 ||
		    strcmp(tail, ".json") || strlen(de->d_name) < 22 || de->d_name[16] != '-')
			continue;
		snprintf(path, sizeof(path), "%s/%s", f->dir, de->d_name);
		if (stat(path, &sb) || !S_ISREG(sb.st_mode))
			continue;
		s.bytes = (uint64_t)sb.st_size;
		if (q_push(f, &s)) {
			closedir(d);
			snprintf(why, whysz, "spool %s: out of memory", f->dir);
			return -ENOMEM;
		}
		if (s.seq >= f->seq_next)
			f->seq_next = s.seq + 1;
	}
	closedir(d);
	qsort(f->q + first, f->qn - first, sizeof(*f->q), cmp_seq);
	return 0;
}

/* Writes a request to the spool, or drops it (counted) when it does not fit. */
static void spool_put(struct graph_fwd *f, const char *body, size_t len, uint64_t spans)
{
	struct spool_file s = { .seq = f->seq_next, .spans = spans, .bytes = len };
	char tmp[4096], path[4096];
	FILE *o;
	int ok, fd;

	if (f->st.queued_bytes + len > f->spool_max) {
		f->st.dropped += spans;
		log_warn("graph forward: spool %s full (%" PRIu64 " of %" PRIu64 " bytes): %" PRIu64
			 " spans dropped",
			 f->dir, f->st.queued_bytes, f->spool_max, spans);
		return;
	}
	snprintf(tmp, sizeof(tmp), "%s/.tmp-%016" PRIx64, f->dir, s.seq);
	spool_path(f, &s, path, sizeof(path));
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	o = fd >= 0 ? fdopen(fd, "w") : NULL;
	if (!o) {
		if (fd >= 0) {
			close(fd);
			unlink(tmp);
		}
		goto out_drop;
	}
	ok = fwrite(body, 1, len, o) == len;
	ok &= fflush(o) == 0 && fsync(fileno(o)) == 0;
	ok &= fclose(o) == 0;
	if (!ok || rename(tmp, path))
		goto out_unlink;
	if (q_push(f, &s)) {
		unlink(path);
		goto out_drop;
	}
	f->seq_next++;
	f->st.spooled += spans;
	return;
out_unlink:
	unlink(tmp);
out_drop:
	f->st.dropped += spans;
	log_warn("graph forward: cannot write to the spool %s (%s): %" PRIu64 " spans dropped",
		 f->dir, strerror(errno), spans);
}

static void spool_pop(struct graph_fwd *f)
{
	struct spool_file *s = &f->q[f->qhead];
	char path[4096];

	spool_path(f, s, path, sizeof(path));
	if (unlink(path) && errno != ENOENT)
		log_warn("graph forward: cannot remove %s: %s", path, strerror(errno));
	f->st.queued -= s->spans;
	f->st.queued_bytes -= s->bytes;
	f->qhead++;
	if (f->qhead == f->qn)
		f->qhead = f->qn = 0;
}

/* ---- one request ---- */

enum outcome { SENT, RETRY, REJECTED };

/* partialSuccess.rejectedSpans of an OTLP JSON answer (0 if none or not JSON). */
static uint64_t partial_rejected(const struct graph_fwd *f)
{
	json_t *root, *ps, *n;
	uint64_t r = 0;

	if (!f->resp_len)
		return 0;
	root = json_loadb(f->resp, f->resp_len, 0, NULL);
	ps = json_object_get(root, "partialSuccess");
	n = json_object_get(ps, "rejectedSpans");
	if (json_is_string(n)) /* int64 is a string in OTLP JSON; a number is taken too */
		r = strtoull(json_string_value(n), NULL, 10);
	else if (json_is_integer(n) && json_integer_value(n) > 0)
		r = (uint64_t)json_integer_value(n);
	json_decref(root);
	return r;
}

/* The collector's words on a refusal, made printable and short. */
static void resp_text(const struct graph_fwd *f, char *buf, size_t sz)
{
	size_t i, n = f->resp_len < sz - 1 ? f->resp_len : sz - 1;

	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)f->resp[i];

		buf[i] = c >= 0x20 && c < 0x7f ? (char)c : ' ';
	}
	buf[n] = 0;
}

static void backoff(struct graph_fwd *f, uint64_t retry_after_ns)
{
	uint64_t d = f->bmin;
	unsigned i;

	for (i = 0; i < f->fails && d < f->bmax; i++)
		d *= 2;
	if (d > f->bmax)
		d = f->bmax;
	/* "equal jitter": half fixed, half random, so retries of many forwarders spread out */
	d = d / 2 + rng_next(f) % (d / 2 + 1);
	if (retry_after_ns) /* the collector said when: not earlier than that */
		d = retry_after_ns;
	f->fails++;
	f->next_try = mono_ns() + (int64_t)d;
	log_info("graph forward: %s; retrying in %" PRIu64 " ms", f->err, d / 1000000);
}

/* One POST of body to url.  On failure f->err says why and *ra_ns is the Retry-After (0 if
 * none); no counter is touched. */
static enum outcome post(struct graph_fwd *f, const char *url, const char *body, size_t len,
			 uint64_t *ra_ns)
{
	long code = 0;
	curl_off_t ra = -1;
	CURLcode rc;
	char words[200];

	*ra_ns = 0;
	f->resp_len = 0;
	cu.easy_setopt(f->curl, CURLOPT_URL, url);
	cu.easy_setopt(f->curl, CURLOPT_POSTFIELDS, body);
	cu.easy_setopt(f->curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
	rc = cu.easy_perform(f->curl);
	if (rc != CURLE_OK) {
		snprintf(f->err, sizeof(f->err), "%s: %s", url, cu.easy_strerror(rc));
		return RETRY;
	}
	cu.easy_getinfo(f->curl, CURLINFO_RESPONSE_CODE, &code);
	if (code >= 200 && code < 300)
		return SENT;
	if (code == 429 || code == 502 || code == 503 || code == 504) {
		cu.easy_getinfo(f->curl, CURLINFO_RETRY_AFTER, &ra);
		if (ra > 0) {
			*ra_ns = (uint64_t)ra * 1000000000ULL;
			if (*ra_ns > GRAPH_FWD_RETRY_AFTER_MAX_NS ||
			    *ra_ns / 1000000000ULL != (uint64_t)ra)
				*ra_ns = GRAPH_FWD_RETRY_AFTER_MAX_NS;
		}
		snprintf(f->err, sizeof(f->err), "%s answered HTTP %ld", url, code);
		return RETRY;
	}
	resp_text(f, words, sizeof(words));
	snprintf(f->err, sizeof(f->err), "%s refused the request with HTTP %ld: %s", url, code,
		 words);
	return REJECTED;
}

/* A traces request: posted, counted, and the back-off set after a failure. */
static enum outcome send_one(struct graph_fwd *f, const char *body, size_t len, uint64_t spans)
{
	uint64_t ra_ns;
	enum outcome o = post(f, f->url, body, len, &ra_ns);
	char words[200];

	switch (o) {
	case SENT: {
		uint64_t rej = partial_rejected(f);

		if (rej > spans)
			rej = spans;
		f->st.sent += spans - rej;
		f->st.rejected += rej;
		f->st.requests++;
		f->fails = 0;
		f->next_try = 0;
		if (rej) {
			resp_text(f, words, sizeof(words));
			log_warn("graph forward: %s took the request but rejected %" PRIu64
				 " spans: %s",
				 f->url, rej, words);
		}
		break;
	}
	case RETRY:
		f->st.retried++;
		backoff(f, ra_ns);
		break;
	case REJECTED:
		log_warn("graph forward: %" PRIu64 " spans rejected: %s", spans, f->err);
		f->st.rejected += spans;
		f->fails = 0;
		f->next_try = 0;
		break;
	}
	return o;
}

/* ---- batches ---- */

static bool may_send(const struct graph_fwd *f)
{
	return f->qhead == f->qn && mono_ns() >= f->next_try;
}

/* The pending batch becomes a request: sent now if nothing waits, else spooled. */
static int flush_pending(struct graph_fwd *f)
{
	uint64_t spans = f->pending.ntasks;
	char *body = NULL;
	size_t len = 0;
	FILE *m;
	int rc;

	if (!spans && !f->pending.nevents && !f->pending.nedges)
		return 0;
	m = open_memstream(&body, &len);
	if (!m) {
		rc = -errno;
		goto out_drop;
	}
	rc = graph_export(m, &f->pending, GRAPH_FMT_OTLP);
	if (fclose(m) && !rc)
		rc = -EIO;
	if (rc)
		goto out_drop;
	graph_clear(&f->pending);
	f->st.pending = 0;
	if (!may_send(f) || send_one(f, body, len, spans) == RETRY)
		spool_put(f, body, len, spans);
	free(body);
	return 0;
out_drop:
	free(body);
	f->st.dropped += spans;
	graph_clear(&f->pending);
	f->st.pending = 0;
	log_warn("graph forward: cannot write a request (%s): %" PRIu64 " spans dropped",
		 strerror(-rc), spans);
	return rc;
}

/* Sends spooled requests, oldest first, while the collector takes them. */
static void send_spool(struct graph_fwd *f)
{
	while (f->qhead < f->qn && mono_ns() >= f->next_try) {
		struct spool_file *s = &f->q[f->qhead];
		char path[4096], *body;
		size_t len = 0;
		FILE *in;

		spool_path(f, s, path, sizeof(path));
		in = s->bytes <= f->spool_max ? fopen(path, "r") : NULL;
		body = in ? malloc(s->bytes + 1) : NULL;
		if (body)
			len = fread(body, 1, s->bytes + 1, in);
		if (in)
			fclose(in);
		if (!body || len != s->bytes) {
			/* gone, grown or unreadable: it cannot be sent as it was spooled */
			log_warn("graph forward: spool file %s unreadable: %" PRIu64
				 " spans dropped",
				 path, s->spans);
			f->st.dropped += s->spans;
			free(body);
			spool_pop(f);
			continue;
		}
		if (send_one(f, body, len, s->spans) != RETRY)
			spool_pop(f);
		free(body);
	}
}

int graph_fwd_add(struct graph_fwd *f, const struct graph *g)
{
	int rc;

	if (!g->ntasks && !g->nevents && !g->nedges)
		return 0;
	if (!f->pending.ntasks && !f->pending.nevents && !f->pending.nedges)
		f->pending_since = mono_ns();
	rc = graph_append(&f->pending, g);
	if (rc) {
		f->st.dropped += g->ntasks;
		return rc;
	}
	f->st.pending = f->pending.ntasks;
	if (f->pending.ntasks >= f->batch_spans)
		return flush_pending(f);
	return 0;
}

int64_t graph_fwd_poll(struct graph_fwd *f)
{
	int64_t now = mono_ns(), due = -1;
	bool gathered = f->pending.ntasks || f->pending.nevents || f->pending.nedges;

	if (gathered && now - f->pending_since >= (int64_t)f->batch_delay) {
		flush_pending(f);
		gathered = false;
	}
	send_spool(f);
	now = mono_ns();
	if (gathered) {
		due = f->pending_since + (int64_t)f->batch_delay - now;
		if (due < 0)
			due = 0;
	}
	if (f->qhead < f->qn) {
		int64_t d = f->next_try > now ? f->next_try - now : 0;

		if (due < 0 || d < due)
			due = d;
	}
	return due;
}

int graph_fwd_drain(struct graph_fwd *f, uint64_t timeout_ns)
{
	int64_t end =
		mono_ns() + (int64_t)(timeout_ns > INT64_MAX / 2 ? INT64_MAX / 2 : timeout_ns);

	flush_pending(f);
	for (;;) {
		int64_t due = graph_fwd_poll(f), now = mono_ns();
		struct timespec ts;

		if (due < 0)
			return 0;
		if (now >= end)
			return -ETIMEDOUT;
		if (now + due > end)
			due = end - now;
		ts.tv_sec = due / 1000000000;
		ts.tv_nsec = due % 1000000000;
		nanosleep(&ts, NULL);
	}
}

/* ---- the aggregates, as OTLP metrics ---- */

static json_t *u64_str(uint64_t v)
{
	char b[24];

	snprintf(b, sizeof(b), "%" PRIu64, v);
	return json_string(b);
}

static json_t *type_attrs(const struct graph_type_stats *t)
{
	json_t *a = json_array();

	json_array_append_new(a, graph_otlp_attr("weft.task.service", json_string(t->service)));
	json_array_append_new(a, graph_otlp_attr("weft.task.name", json_string(t->name)));
	return a;
}

static json_t *metric(json_t *metrics, const char *name, const char *unit, const char *desc,
		      const char *kind, json_t **points)
{
	json_t *m = json_object(), *k = json_object();

	*points = json_array();
	json_object_set_new(m, "name", json_string(name));
	json_object_set_new(m, "unit", json_string(unit));
	json_object_set_new(m, "description", json_string(desc));
	json_object_set_new(k, "aggregationTemporality", json_integer(2)); /* cumulative */
	if (strcmp(kind, "histogram"))
		json_object_set_new(k, "isMonotonic", json_true());
	json_object_set_new(k, "dataPoints", *points);
	json_object_set_new(m, kind, k);
	json_array_append_new(metrics, m);
	return m;
}

/*
 * The sketch's non-empty buckets as an explicit-bounds histogram.  OTLP buckets are
 * (bound[i-1], bound[i]]; sketch bucket i holds the integers [lo, lo + width - 1], that is
 * (lo - 1, lo + width - 1]: each non-empty bucket contributes its two edges (shared with a
 * non-empty neighbour), the gaps between them become empty buckets.
 */
static json_t *sketch_point(const struct graph_type_stats *t, const uint64_t *counts,
			    const char *now)
{
	json_t *p = json_object(), *bounds = json_array(), *bc = json_array();
	uint64_t total = 0;
	double last = -1.0;
	bool any = false;

	for (uint32_t i = 0; i < WEFT_SKETCH_NBUCKETS; i++) {
		__u64 lo, width;
		double a, b;

		if (!counts[i])
			continue;
		weft_sketch_bounds(i, &lo, &width);
		a = (double)lo - 1.0;
		b = (double)(lo + width - 1);
		if (!any || a != last) {
			json_array_append_new(bounds, json_real(a));
			json_array_append_new(bc, u64_str(0)); /* up to a: nothing */
		}
		json_array_append_new(bounds, json_real(b));
		json_array_append_new(bc, u64_str(counts[i]));
		total += counts[i];
		last = b;
		any = true;
	}
	json_array_append_new(bc, u64_str(0)); /* above the last bound */
	json_object_set_new(p, "attributes", type_attrs(t));
	json_object_set_new(p, "timeUnixNano", json_string(now));
	json_object_set_new(p, "count", u64_str(total));
	json_object_set_new(p, "explicitBounds", bounds);
	json_object_set_new(p, "bucketCounts", bc);
	return p;
}

static json_t *sum_point(json_t *attrs, uint64_t v, const char *now)
{
	json_t *p = json_object();

	json_object_set_new(p, "attributes", attrs);
	json_object_set_new(p, "timeUnixNano", json_string(now));
	json_object_set_new(p, "asInt", u64_str(v));
	return p;
}

/* The request's JSON text (malloc'd) and its data points, or NULL with why[] filled. */
static char *aggregates_json(struct graph_store *s, uint64_t *npoints, char *why, size_t whysz)
{
	struct graph_type_stats *rows = NULL;
	json_t *root, *rm, *res, *ra, *sm, *scope, *metrics, *hist, *evs, *eds;
	uint64_t *counts = malloc(WEFT_SKETCH_NBUCKETS * sizeof(uint64_t));
	char now[24], host[256] = "";
	struct timespec ts;
	ssize_t n;
	char *text = NULL;

	*npoints = 0;
	if (!counts) {
		snprintf(why, whysz, "out of memory");
		return NULL;
	}
	n = graph_store_stats(s, &rows, why, whysz);
	if (n < 0) {
		free(counts);
		return NULL;
	}
	clock_gettime(CLOCK_REALTIME, &ts);
	snprintf(now, sizeof(now), "%lld", (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec);
	gethostname(host, sizeof(host) - 1);

	root = json_object();
	rm = json_array();
	res = json_object();
	ra = json_array();
	json_array_append_new(ra, graph_otlp_attr("service.name", json_string("weft-aggregates")));
	if (host[0])
		json_array_append_new(ra, graph_otlp_attr("host.name", json_string(host)));
	json_object_set_new(res, "attributes", ra);
	sm = json_object();
	scope = json_object();
	json_object_set_new(scope, "name", json_string("weft.graph"));
	json_object_set_new(sm, "scope", scope);
	metrics = json_array();
	json_object_set_new(sm, "metrics", metrics);
	{
		json_t *r = json_object(), *sms = json_array();

		json_array_append_new(sms, sm);
		json_object_set_new(r, "resource", res);
		json_object_set_new(r, "scopeMetrics", sms);
		json_array_append_new(rm, r);
	}
	json_object_set_new(root, "resourceMetrics", rm);
	metric(metrics, "weft.task.duration", "ns", "latency of the tasks of a type (its sketch)",
	       "histogram", &hist);
	metric(metrics, "weft.task.event.tasks", "{task}",
	       "tasks of a type with an event of a name (the rarest names)", "sum", &evs);
	metric(metrics, "weft.task.edge.count", "{edge}",
	       "edges of a kind from a type to a child type (the rarest ones)", "sum", &eds);

	for (ssize_t i = 0; i < n; i++) {
		const struct graph_type_stats *t = &rows[i];
		char w[256];

		if (graph_store_type_sketch(s, t->service, t->name, counts, w, sizeof(w)) == 0) {
			json_array_append_new(hist, sketch_point(t, counts, now));
			++*npoints;
		}
		for (uint32_t k = 0; k < t->nrare_events; k++) {
			json_t *a = type_attrs(t);

			json_array_append_new(a,
					      graph_otlp_attr("weft.event.name",
							      json_string(t->rare_events[k].name)));
			json_array_append_new(evs, sum_point(a, t->rare_events[k].tasks, now));
			++*npoints;
		}
		for (uint32_t k = 0; k < t->nrare_edges; k++) {
			const struct graph_rare_edge *e = &t->rare_edges[k];
			json_t *a = type_attrs(t);

			json_array_append_new(
				a, graph_otlp_attr("weft.edge.kind",
						   json_string(graph_edge_kind_name(e->kind))));
			json_array_append_new(
				a, graph_otlp_attr("weft.child.service", json_string(e->service)));
			json_array_append_new(
				a, graph_otlp_attr("weft.child.name", json_string(e->name)));
			json_array_append_new(eds, sum_point(a, e->count, now));
			++*npoints;
		}
	}
	text = json_dumps(root, JSON_COMPACT);
	if (!text)
		snprintf(why, whysz, "out of memory");
	json_decref(root);
	free(rows);
	free(counts);
	return text;
}

int graph_fwd_aggregates(struct graph_fwd *f, struct graph_store *s, uint64_t timeout_ns, char *why,
			 size_t whysz)
{
	static const char tr[] = "/v1/traces";
	int64_t end =
		mono_ns() + (int64_t)(timeout_ns > INT64_MAX / 2 ? INT64_MAX / 2 : timeout_ns);
	uint64_t npoints, delay = f->bmin;
	size_t n = strlen(f->url);
	char *body, *url;
	int rc = 0;

	why[0] = 0;
	body = aggregates_json(s, &npoints, why, whysz);
	if (!body)
		return -ENOMEM;
	url = malloc(n + sizeof("/v1/metrics"));
	if (!url) {
		free(body);
		snprintf(why, whysz, "out of memory");
		return -ENOMEM;
	}
	/* f->url always ends in /v1/traces (traces_url()) */
	memcpy(url, f->url, n - (sizeof(tr) - 1));
	strcpy(url + n - (sizeof(tr) - 1), "/v1/metrics");
	for (;;) {
		uint64_t ra_ns;
		enum outcome o = post(f, url, body, strlen(body), &ra_ns);
		struct timespec ts;
		int64_t now;

		if (o == SENT) {
			f->st.metric_points += npoints;
			break;
		}
		if (o == REJECTED) {
			snprintf(why, whysz, "%s", f->err);
			rc = -EBADMSG;
			break;
		}
		now = mono_ns();
		if (!ra_ns) {
			ra_ns = delay / 2 + rng_next(f) % (delay / 2 + 1);
			delay = delay * 2 > f->bmax ? f->bmax : delay * 2;
		}
		if (now + (int64_t)ra_ns >= end) {
			snprintf(why, whysz, "%s", f->err);
			rc = -ETIMEDOUT;
			break;
		}
		log_info("graph forward: aggregates: %s; retrying in %" PRIu64 " ms", f->err,
			 ra_ns / 1000000);
		ts.tv_sec = (time_t)(ra_ns / 1000000000);
		ts.tv_nsec = (long)(ra_ns % 1000000000);
		nanosleep(&ts, NULL);
	}
	cu.easy_setopt(f->curl, CURLOPT_URL, f->url);
	free(url);
	free(body);
	return rc;
}

void graph_fwd_stats(const struct graph_fwd *f, struct graph_fwd_stats *st)
{
	*st = f->st;
}

const char *graph_fwd_url(const struct graph_fwd *f)
{
	return f->url;
}

const char *graph_fwd_last_error(const struct graph_fwd *f)
{
	return f->err;
}

/* ---- open, close ---- */

static char *traces_url(const char *url, char *why, size_t whysz)
{
	static const char sfx[] = "/v1/traces";
	size_t n = strlen(url);
	char *u;

	if (strncmp(url, "http://", 7) && strncmp(url, "https://", 8)) {
		snprintf(why, whysz,
			 "'%s' is not an http:// or https:// URL (the collector's OTLP/HTTP "
			 "receiver, e.g. http://collector:4318)",
			 url);
		return NULL;
	}
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)url[i] <= 0x20 || url[i] == 0x7f) {
			snprintf(why, whysz, "the URL '%s' has a space or control character", url);
			return NULL;
		}
	while (n > 0 && url[n - 1] == '/')
		n--;
	u = malloc(n + sizeof(sfx));
	if (!u) {
		snprintf(why, whysz, "out of memory");
		return NULL;
	}
	memcpy(u, url, n);
	u[n] = 0;
	if (n < sizeof(sfx) - 1 || strcmp(u + n - (sizeof(sfx) - 1), sfx))
		strcat(u, sfx);
	return u;
}

struct graph_fwd *graph_fwd_open(const struct graph_fwd_opts *o, char *why, size_t whysz)
{
	struct graph_fwd *f;
	struct stat sb;

	why[0] = 0;
	if (!o || o->sz < sizeof(*o) || !o->url || !o->spool_dir || !o->spool_dir[0]) {
		snprintf(why, whysz, "a URL and a spool directory are needed");
		errno = EINVAL;
		return NULL;
	}
	f = calloc(1, sizeof(*f));
	if (!f) {
		snprintf(why, whysz, "out of memory");
		return NULL;
	}
	graph_init(&f->pending);
	f->url = traces_url(o->url, why, whysz);
	f->dir = strdup(o->spool_dir);
	f->resp = malloc(RESP_MAX);
	if (!f->url || !f->dir || !f->resp) {
		if (!why[0])
			snprintf(why, whysz, "out of memory");
		errno = f->url ? ENOMEM : EINVAL;
		goto out_free;
	}
	f->spool_max = o->spool_max ? o->spool_max : GRAPH_FWD_SPOOL_MAX;
	f->batch_spans = o->batch_spans ? o->batch_spans : GRAPH_FWD_BATCH_SPANS;
	f->batch_delay = o->batch_delay_ns ? o->batch_delay_ns : GRAPH_FWD_BATCH_DELAY_NS;
	f->bmin = o->backoff_min_ns ? o->backoff_min_ns : GRAPH_FWD_BACKOFF_MIN_NS;
	f->bmax = o->backoff_max_ns ? o->backoff_max_ns : GRAPH_FWD_BACKOFF_MAX_NS;
	if (f->bmax < f->bmin)
		f->bmax = f->bmin;
	f->timeout = o->timeout_ns ? o->timeout_ns : GRAPH_FWD_TIMEOUT_NS;
	if (getrandom(&f->rng, sizeof(f->rng), GRND_NONBLOCK) != sizeof(f->rng))
		f->rng = (uint64_t)mono_ns();
	f->rng |= 1;

	if (mkdir(f->dir, 0700) && errno != EEXIST) {
		snprintf(why, whysz, "cannot make the spool directory %s: %s", f->dir,
			 strerror(errno));
		goto out_free;
	}
	if (stat(f->dir, &sb) || !S_ISDIR(sb.st_mode)) {
		snprintf(why, whysz, "the spool %s is not a directory", f->dir);
		errno = ENOTDIR;
		goto out_free;
	}
	if (spool_scan(f, why, whysz))
		goto out_free;

	pthread_once(&cu_once, cu_load);
	if (!cu.ok) {
		snprintf(why, whysz, "%s", cu.error);
		errno = ENOENT;
		goto out_free;
	}
	f->curl = cu.easy_init();
	f->hdrs = cu.slist_append(NULL, "Content-Type: application/json");
	if (!f->curl || !f->hdrs) {
		snprintf(why, whysz, "libcurl: cannot make a handle");
		errno = ENOMEM;
		goto out_free;
	}
	cu.easy_setopt(f->curl, CURLOPT_URL, f->url);
	cu.easy_setopt(f->curl, CURLOPT_HTTPHEADER, f->hdrs);
	cu.easy_setopt(f->curl, CURLOPT_USERAGENT, "weft-graph-forward/1");
	cu.easy_setopt(f->curl, CURLOPT_NOSIGNAL, 1L);
	cu.easy_setopt(f->curl, CURLOPT_TIMEOUT_MS, (long)(f->timeout / 1000000));
	cu.easy_setopt(f->curl, CURLOPT_CONNECTTIMEOUT_MS, (long)(f->timeout / 1000000));
	cu.easy_setopt(f->curl, CURLOPT_WRITEFUNCTION, on_body);
	cu.easy_setopt(f->curl, CURLOPT_WRITEDATA, f);
	/* a redirect would resend the body elsewhere: the URL given is the one used */
	cu.easy_setopt(f->curl, CURLOPT_FOLLOWLOCATION, 0L);
	cu.easy_setopt(f->curl, CURLOPT_PROTOCOLS_STR, "http,https");
	return f;
out_free:
	graph_fwd_close(f);
	return NULL;
}

void graph_fwd_close(struct graph_fwd *f)
{
	if (!f)
		return;
	if (f->curl) { /* opened whole: nothing gathered is lost on close */
		f->next_try = INT64_MAX; /* no attempt now: the batch goes to the spool */
		flush_pending(f);
		cu.easy_cleanup(f->curl);
	}
	if (f->hdrs)
		cu.slist_free_all(f->hdrs);
	graph_free(&f->pending);
	free(f->q);
	free(f->resp);
	free(f->url);
	free(f->dir);
	free(f);
}
