// SPDX-License-Identifier: Apache-2.0
/*
 * wl_3tier: a three-tier program instrumented with include/weft/trace.h, client -> frontend
 * -> backend over TCP, the W3C traceparent carried in the request payload.  One binary, three
 * modes; each process may run in a network namespace of its own (addresses are arguments):
 *
 *   wl_3tier backend  LISTEN [COUNT]
 *   wl_3tier frontend LISTEN BACKEND [COUNT]
 *   wl_3tier client   FRONTEND N [ERROR]
 *
 * Addresses are ADDR:PORT or [ADDR6]:PORT, numeric; a listening port of 0 takes a free one.
 * A server prints "wl_3tier: MODE listening on ADDR:PORT pid PID" once it listens, serves
 * COUNT requests one connection at a time (0, the default: until SIGTERM or SIGINT), prints
 * "wl_3tier: MODE served C requests" and exits 0.  The client makes N requests one after the
 * other, one connection each; request number ERROR (0-based; none by default) asks to fail.
 * It prints "wl_3tier: request R trace <32 hex> task <16 hex> ok|error" per request and
 * "wl_3tier: client made N requests, E errors" at the end, and exits 0 if every reply was
 * the one expected (ERR for request ERROR, OK for the others), else 1.
 *
 * Wire, one line each way per connection: "REQ <r> <traceparent> <fail: 0|1>\n", answered
 * "OK <r>\n" or "ERR <r>\n" ("BAD\n" to a line that is not a request; it is not served).
 *
 * What request r records, in this order (docs/graphs.md, "The three-tier test program"):
 *
 *   client    task C  client/request, a root of a new trace
 *             -> REQ r traceparent(C)
 *   frontend  task F1 frontend/handle, parent C; edge message C -> F1; event "parsed"
 *             task F2 frontend/call-backend, parent F1
 *             -> REQ r traceparent(F2)
 *   backend   task B  backend/handle, parent F2; edge message F2 -> B; event "query";
 *             B ends (error if asked to fail, else ok)
 *             <- OK|ERR r
 *   frontend  F2 ends, then F1 ends, with the backend's status
 *             <- OK|ERR r
 *   client    event "reply"; C ends with the reply's status
 *
 * So N requests make N traces, each of exactly 4 tasks (3 with a parent: 3 parent edges), 3
 * events and 2 message edges; every task of the failing request has status error (2), every
 * other task ok (1).  On one clock each child lies inside its parent and each event inside
 * its task: C starts first and ends last, B ends before its reply is written.  All three
 * processes are single-threaded.  A frontend that cannot reach its backend ends F2 and F1
 * with error and answers ERR.  Lines are bounded (512 bytes), reads time out after 30 s, and
 * a peer that goes away costs a refused request, never the process.
 */
#ifndef WEFT_TRACE_SDT_ONLY
#define WEFT_TRACE_DEFINE
#endif
#include <weft/trace.h>

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#define LINE_MAX_LEN 512
#define IO_TIMEOUT_S 30

static volatile sig_atomic_t stopping;

static void on_stop(int sig)
{
	(void)sig;
	stopping = 1;
}

/* "ADDR:PORT" or "[ADDR6]:PORT" resolved (numerically) into a fresh addrinfo list. */
static struct addrinfo *resolve(const char *spec, bool passive)
{
	char host[256];
	const char *port;
	struct addrinfo hints = { 0 }, *ai = NULL;
	int rc;

	if (spec[0] == '[') {
		const char *close = strchr(spec, ']');

		if (!close || close[1] != ':' || (size_t)(close - spec - 1) >= sizeof(host))
			goto bad;
		snprintf(host, sizeof(host), "%.*s", (int)(close - spec - 1), spec + 1);
		port = close + 2;
	} else {
		const char *colon = strrchr(spec, ':');

		if (!colon || (size_t)(colon - spec) >= sizeof(host))
			goto bad;
		snprintf(host, sizeof(host), "%.*s", (int)(colon - spec), spec);
		port = colon + 1;
	}
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
	rc = getaddrinfo(host, port, &hints, &ai);
	if (rc == 0)
		return ai;
	fprintf(stderr, "wl_3tier: %s: %s\n", spec, gai_strerror(rc));
	return NULL;
bad:
	fprintf(stderr, "wl_3tier: %s: not ADDR:PORT or [ADDR6]:PORT\n", spec);
	return NULL;
}

static void set_timeouts(int fd)
{
	struct timeval tv = { IO_TIMEOUT_S, 0 };

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

static int dial(const char *spec)
{
	struct addrinfo *ai = resolve(spec, false);
	int fd;

	if (!ai)
		return -1;
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd >= 0) {
		set_timeouts(fd);
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
			fprintf(stderr, "wl_3tier: connect %s: %s\n", spec, strerror(errno));
			close(fd);
			fd = -1;
		}
	}
	freeaddrinfo(ai);
	return fd;
}

/* Sends all of s; 0 or -1. */
static int send_all(int fd, const char *s)
{
	size_t len = strlen(s);

	while (len) {
		ssize_t n = send(fd, s, len, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		s += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Reads one line (without its '\n') into buf; 0, or -1 (closed, timed out, too long). */
static int read_line(int fd, char *buf, size_t size)
{
	size_t len = 0;

	while (len + 1 < size) {
		ssize_t n = recv(fd, buf + len, 1, 0);

		if (n < 0 && errno == EINTR && !stopping)
			continue;
		if (n <= 0)
			return -1;
		if (buf[len] == '\n') {
			buf[len] = 0;
			return 0;
		}
		len++;
	}
	return -1;
}

struct request {
	unsigned r;
	struct weft_ctx caller; /* from the traceparent; not valid if there was none */
	int fail;
};

/* "REQ <r> <traceparent> <0|1>"; false if the line is not a request.  A traceparent that
 * the W3C rules refuse leaves caller empty: the server's task is then a root. */
static bool parse_request(const char *line, struct request *q)
{
	char tp[WEFT_TRACEPARENT_SIZE + 8];
	int fail;

	if (sscanf(line, "REQ %u %63s %d", &q->r, tp, &fail) != 3 || (fail != 0 && fail != 1))
		return false;
	q->fail = fail;
	if (weft_traceparent_parse(tp, strlen(tp), &q->caller, NULL) != 0)
		q->caller = (struct weft_ctx){ 0, 0, 0, 0 };
	return true;
}

/* The backend's work on one request; its reply's status. */
static int backend_handle(const struct request *q)
{
	struct weft_ctx b;
	int st = q->fail ? WEFT_STATUS_ERROR : WEFT_STATUS_OK;

	weft_ctx_child(&b, &q->caller);
	WEFT_BEGIN(&b, "backend", "handle");
	if (weft_ctx_valid(&q->caller))
		WEFT_MESSAGE(&q->caller, &b);
	WEFT_MARK(&b, "query");
	WEFT_END(&b, st);
	return st;
}

/* The frontend's work on one request: a call to the backend; the status it ends with. */
static int frontend_handle(const struct request *q, const char *backend)
{
	struct weft_ctx f1, f2;
	char tp[WEFT_TRACEPARENT_SIZE], line[LINE_MAX_LEN];
	int fd, st = WEFT_STATUS_ERROR;

	weft_ctx_child(&f1, &q->caller);
	WEFT_BEGIN(&f1, "frontend", "handle");
	if (weft_ctx_valid(&q->caller))
		WEFT_MESSAGE(&q->caller, &f1);
	WEFT_MARK(&f1, "parsed");
	weft_ctx_child(&f2, &f1);
	WEFT_BEGIN(&f2, "frontend", "call-backend");
	fd = dial(backend);
	if (fd >= 0) {
		weft_traceparent_format(&f2, WEFT_TRACEPARENT_SAMPLED, tp, sizeof(tp));
		snprintf(line, sizeof(line), "REQ %u %s %d\n", q->r, tp, q->fail);
		if (send_all(fd, line) == 0 && read_line(fd, line, sizeof(line)) == 0 &&
		    strncmp(line, "OK ", 3) == 0)
			st = WEFT_STATUS_OK;
		close(fd);
	}
	WEFT_END(&f2, st);
	WEFT_END(&f1, st);
	return st;
}

static int serve(const char *mode, const char *listen_spec, const char *backend, long count)
{
	struct addrinfo *ai = resolve(listen_spec, true);
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char host[NI_MAXHOST], port[NI_MAXSERV];
	struct sigaction sa = { 0 };
	long served = 0;
	int one = 1, lfd;

	if (!ai)
		return 2;
	lfd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (lfd < 0 || setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
	    bind(lfd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(lfd, 16) != 0 ||
	    getsockname(lfd, (struct sockaddr *)&ss, &sl) != 0 ||
	    getnameinfo((struct sockaddr *)&ss, sl, host, sizeof(host), port, sizeof(port),
			NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
		fprintf(stderr, "wl_3tier: %s: cannot listen on %s: %s\n", mode, listen_spec,
			strerror(errno));
		freeaddrinfo(ai);
		return 1;
	}
	freeaddrinfo(ai);
	sa.sa_handler = on_stop; /* no SA_RESTART: accept() returns EINTR */
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	printf("wl_3tier: %s listening on %s%s%s:%s pid %d\n", mode, strchr(host, ':') ? "[" : "",
	       host, strchr(host, ':') ? "]" : "", port, (int)getpid());
	fflush(stdout);
	while (!stopping && (count == 0 || served < count)) {
		struct request q;
		char line[LINE_MAX_LEN];
		int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC), st;

		if (fd < 0) {
			if (errno != EINTR && errno != ECONNABORTED)
				fprintf(stderr, "wl_3tier: accept: %s\n", strerror(errno));
			continue;
		}
		set_timeouts(fd);
		if (read_line(fd, line, sizeof(line)) != 0 || !parse_request(line, &q)) {
			send_all(fd, "BAD\n");
			close(fd);
			continue;
		}
		st = backend ? frontend_handle(&q, backend) : backend_handle(&q);
		snprintf(line, sizeof(line), "%s %u\n", st == WEFT_STATUS_OK ? "OK" : "ERR", q.r);
		send_all(fd, line);
		close(fd);
		served++;
	}
	close(lfd);
	printf("wl_3tier: %s served %ld requests\n", mode, served);
	return 0;
}

static int client(const char *frontend, long n, long error_req)
{
	long errors = 0, wrong = 0;

	for (long r = 0; r < n; r++) {
		struct weft_ctx c;
		char tp[WEFT_TRACEPARENT_SIZE], line[LINE_MAX_LEN];
		int fd, st = WEFT_STATUS_ERROR, fail = r == error_req;

		weft_ctx_root(&c);
		WEFT_BEGIN(&c, "client", "request");
		fd = dial(frontend);
		if (fd >= 0) {
			weft_traceparent_format(&c, WEFT_TRACEPARENT_SAMPLED, tp, sizeof(tp));
			snprintf(line, sizeof(line), "REQ %ld %s %d\n", r, tp, fail);
			if (send_all(fd, line) == 0 && read_line(fd, line, sizeof(line)) == 0 &&
			    strncmp(line, "OK ", 3) == 0)
				st = WEFT_STATUS_OK;
			close(fd);
		}
		WEFT_MARK(&c, "reply");
		WEFT_END(&c, st);
		errors += st != WEFT_STATUS_OK;
		wrong += (st != WEFT_STATUS_OK) != fail;
		printf("wl_3tier: request %ld trace %016llx%016llx task %016llx %s\n", r,
		       (unsigned long long)c.trace_hi, (unsigned long long)c.trace_lo,
		       (unsigned long long)c.task, st == WEFT_STATUS_OK ? "ok" : "error");
	}
	printf("wl_3tier: client made %ld requests, %ld errors\n", n, errors);
	return wrong ? 1 : 0;
}

static long number(const char *s, long max)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	return errno || end == s || *end || v < 0 || v > max ? -1 : v;
}

static int usage(void)
{
	fprintf(stderr, "usage: wl_3tier backend LISTEN [COUNT]\n"
			"       wl_3tier frontend LISTEN BACKEND [COUNT]\n"
			"       wl_3tier client FRONTEND N [ERROR]\n"
			"addresses ADDR:PORT or [ADDR6]:PORT; COUNT 0: serve until SIGTERM\n");
	return 2;
}

int main(int argc, char **argv)
{
	long count = 0, n, err = -1;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc >= 3 && strcmp(argv[1], "backend") == 0 && argc <= 4) {
		if (argc == 4 && (count = number(argv[3], 100000000)) < 0)
			return usage();
		return serve("backend", argv[2], NULL, count);
	}
	if (argc >= 4 && strcmp(argv[1], "frontend") == 0 && argc <= 5) {
		if (argc == 5 && (count = number(argv[4], 100000000)) < 0)
			return usage();
		return serve("frontend", argv[2], argv[3], count);
	}
	if (argc >= 4 && strcmp(argv[1], "client") == 0 && argc <= 5) {
		if ((n = number(argv[3], 100000000)) < 0 ||
		    (argc == 5 && (err = number(argv[4], 100000000)) < 0))
			return usage();
		return client(argv[2], n, err);
	}
	return usage();
}
