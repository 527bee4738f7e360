/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Shared harness of the end-to-end tests (tests/runtime/test_run_*.c), which drive the real
 * `weft` binary (env WEFT_BIN) as root against the real kernel: spawn a process with its
 * stdin, stdout and stderr on pipes, collect both outputs under a deadline (a hung weft is
 * SIGKILLed and the test fails, it never hangs ctest), wait for a line on stderr ("attached"),
 * and read `--format json` output: parsed by jansson, copied into a small tree (struct wj)
 * that the checks walk, for weft's windows and rows and for `bpftool -j`.  Header-only,
 * static inline functions: each test is one executable.  Include <cmocka.h> first: the
 * checking helpers fail the test.
 *
 * One loop tails a process's pipes (wr_pump(), under wr_wait_in() and wr_finish()); the
 * cluster harness builds on it (tests/cluster/cluster_util.h), except for its daemons, which
 * write into files that cl_wait_log() polls: a daemon that outlives a test step must never
 * block on a pipe nobody reads.  tools/bench/tsrun.c tails a child's pipes too, but it is
 * a program of its own for the start-up benchmark (it times every line as it arrives, for
 * tracers other than weft as well) and cannot use a test header (tools/ is below tests/);
 * a shared pump would have to serve both line timing and whole-output collection.
 */
#ifndef WEFT_TEST_RUN_UTIL_H
#define WEFT_TEST_RUN_UTIL_H

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <bpf/btf.h>
#include <jansson.h>

#define WR_TIMEOUT_MS 60000 /* no single weft run of these tests comes near it */
#define WR_MAX_ARGS 32

/* ------------------------------------------------------------------------ environment */

static inline bool wr_ready(void)
{
	const char *bin = getenv("WEFT_BIN"), *dir = getenv("WEFT_BINARY_DIR");

	if (geteuid() != 0) {
		fprintf(stderr, "skipped: needs root\n");
		return false;
	}
	if (!bin || !*bin || !dir || !*dir) {
		fprintf(stderr,
			"skipped: run through ctest (needs WEFT_BIN and WEFT_BINARY_DIR)\n");
		return false;
	}
	return true;
}

/* The path of workload `name` (tests/workloads/name.c) in a static buffer of four. */
static inline const char *wr_workload(const char *name)
{
	static char paths[4][PATH_MAX];
	static int next;
	char *p = paths[next++ % 4];

	snprintf(p, PATH_MAX, "%s/tests/workloads/%s", getenv("WEFT_BINARY_DIR"), name);
	return p;
}

static inline uint64_t wr_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static inline void wr_sleep_ms(long ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* ------------------------------------------------------------------------ processes */

struct wr_buf {
	char *p; /* NUL-terminated */
	size_t len, cap;
};

struct wr_proc {
	pid_t pid;
	int in_fd; /* its stdin; -1 once closed */
	int out_fd, err_fd; /* -1 at EOF */
	struct wr_buf out, err;
	int status; /* exit code, 128 + signal if killed; -1 until reaped */
	bool timed_out; /* the deadline passed and it was SIGKILLed */
};

static inline void wr_buf_add(struct wr_buf *b, const char *s, size_t n)
{
	if (n > ((size_t)1 << 40))
		abort(); /* a negative length cast: a bug in the caller */
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 32;

		while (cap < b->len + n + 1)
			cap *= 2;
		b->p = realloc(b->p, cap);
		if (!b->p)
			abort();
		b->cap = cap;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = 0;
}

/* Starts argv (PATH searched) with its three standard streams on pipes. */
static inline int wr_start(struct wr_proc *p, char *const argv[])
{
	int in[2], out[2], err[2];

	memset(p, 0, sizeof(*p));
	p->status = -1;
	p->in_fd = p->out_fd = p->err_fd = -1;
	wr_buf_add(&p->out, "", 0);
	wr_buf_add(&p->err, "", 0);
	if (pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC) || pipe2(err, O_CLOEXEC))
		return -errno;
	p->pid = fork();
	if (p->pid < 0)
		return -errno;
	if (p->pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		dup2(err[1], 2);
		execvp(argv[0], argv);
		fprintf(stderr, "cannot run %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	close(err[1]);
	p->in_fd = in[1];
	p->out_fd = out[0];
	p->err_fd = err[0];
	return 0;
}

/* Reads what is there, waiting up to timeout_ms for something; false once both are at EOF. */
static inline bool wr_pump(struct wr_proc *p, int timeout_ms)
{
	struct pollfd fds[2];
	int *which[2], n = 0;
	char buf[65536];

	if (p->out_fd >= 0) {
		fds[n] = (struct pollfd){ .fd = p->out_fd, .events = POLLIN };
		which[n++] = &p->out_fd;
	}
	if (p->err_fd >= 0) {
		fds[n] = (struct pollfd){ .fd = p->err_fd, .events = POLLIN };
		which[n++] = &p->err_fd;
	}
	if (n == 0)
		return false;
	if (poll(fds, n, timeout_ms) <= 0)
		return true;
	for (int i = 0; i < n; i++) {
		ssize_t r;

		if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR)))
			continue;
		r = read(fds[i].fd, buf, sizeof(buf));
		if (r > 0) {
			wr_buf_add(which[i] == &p->out_fd ? &p->out : &p->err, buf, (size_t)r);
		} else if (r == 0 || errno != EINTR) {
			close(*which[i]);
			*which[i] = -1;
		}
	}
	return p->out_fd >= 0 || p->err_fd >= 0;
}

/* Collects output until `needle` appears in *buf (its stdout or stderr), whose pipe is *fd:
 * 0, or -ETIMEDOUT, or -EPIPE if it closed that pipe (exited) first. */
static inline int wr_wait_in(struct wr_proc *p, const struct wr_buf *buf, const int *fd,
			     const char *needle, int timeout_ms)
{
	uint64_t end = wr_now_ms() + (uint64_t)timeout_ms;

	while (!strstr(buf->p, needle)) {
		uint64_t now = wr_now_ms();

		if (*fd < 0)
			return -EPIPE;
		if (now >= end)
			return -ETIMEDOUT;
		wr_pump(p, (int)(end - now));
	}
	return 0;
}

/* Waits for needle on its stderr ("attached"). */
static inline int wr_wait_err(struct wr_proc *p, const char *needle, int timeout_ms)
{
	return wr_wait_in(p, &p->err, &p->err_fd, needle, timeout_ms);
}

/* Same for its stdout. */
static inline int wr_wait_out(struct wr_proc *p, const char *needle, int timeout_ms)
{
	return wr_wait_in(p, &p->out, &p->out_fd, needle, timeout_ms);
}

static inline void wr_close_stdin(struct wr_proc *p)
{
	if (p->in_fd >= 0)
		close(p->in_fd);
	p->in_fd = -1;
}

/* Reaps it without blocking past the deadline (then SIGKILL); returns its status. */
static inline int wr_reap(struct wr_proc *p, uint64_t deadline_ms)
{
	int ws;

	if (p->status >= 0 || p->pid <= 0)
		return p->status;
	for (;;) {
		pid_t r = waitpid(p->pid, &ws, WNOHANG);

		if (r == p->pid)
			break;
		if (r < 0)
			return p->status = -1;
		if (wr_now_ms() >= deadline_ms && !p->timed_out) {
			p->timed_out = true;
			kill(p->pid, SIGKILL);
		}
		if (!wr_pump(p, 10))
			wr_sleep_ms(5);
	}
	p->status = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
	return p->status;
}

/* Closes its stdin, collects everything it prints until it exits (SIGKILL after timeout_ms:
 * timed_out), returns the status. */
static inline int wr_finish(struct wr_proc *p, int timeout_ms)
{
	uint64_t end = wr_now_ms() + (uint64_t)timeout_ms;

	wr_close_stdin(p);
	while (wr_pump(p, 100)) {
		if (wr_now_ms() >= end + 2000)
			break; /* dead, but something it started still holds the pipes */
		if (wr_now_ms() >= end && !p->timed_out) {
			p->timed_out = true;
			kill(p->pid, SIGKILL);
		}
	}
	return wr_reap(p, end);
}

static inline void wr_free(struct wr_proc *p)
{
	if (p->pid > 0 && p->status < 0) {
		kill(p->pid, SIGKILL);
		wr_reap(p, 0);
	}
	wr_close_stdin(p);
	if (p->out_fd >= 0)
		close(p->out_fd);
	if (p->err_fd >= 0)
		close(p->err_fd);
	free(p->out.p);
	free(p->err.p);
	memset(p, 0, sizeof(*p));
	p->in_fd = p->out_fd = p->err_fd = -1;
}

/*
 * Starts `weft run ARGS...` (NULL-terminated).  Unless ARGS set --cpu-budget, the run has
 * none (--cpu-budget 0): the budget measures time, and whether a flat-out workload's probes
 * stay under 5 % of a CPU depends on the machine and its load, which no counting test may
 * depend on; test_run_budget tests the budget itself (WR_DEFAULT_BUDGET among ARGS: the run
 * keeps weft's default budget).
 */
#define WR_DEFAULT_BUDGET "--cpu-budget=(weft's default)"
static inline int wr_weft_start(struct wr_proc *p, ...)
{
	char *argv[WR_MAX_ARGS];
	int n = 0, first;
	bool budget = false;
	va_list ap;

	argv[n++] = getenv("WEFT_BIN");
	argv[n++] = (char *)"run";
	first = n;
	argv[n++] = (char *)"--cpu-budget";
	argv[n++] = (char *)"0";
	va_start(ap, p);
	while (n < WR_MAX_ARGS - 1 && (argv[n] = va_arg(ap, char *)) != NULL) {
		if (strncmp(argv[n], "--cpu-budget", 12) == 0)
			budget = true;
		n++;
	}
	va_end(ap);
	argv[n] = NULL;
	if (budget) { /* the test's own, or weft's default */
		memmove(&argv[first], &argv[first + 2], (size_t)(n - first - 1) * sizeof(*argv));
		n -= 2;
		for (int i = first; i < n; i++)
			if (strcmp(argv[i], WR_DEFAULT_BUDGET) == 0) {
				memmove(&argv[i], &argv[i + 1], (size_t)(n - i) * sizeof(*argv));
				n--;
				break;
			}
	}
	return wr_start(p, argv);
}

/* Runs `weft run ARGS...` to its end; returns its status (-errno if it could not start). */
#define wr_weft_run(p, ...)                                              \
	({                                                               \
		int _rc = wr_weft_start((p), __VA_ARGS__, (char *)NULL); \
		_rc ? _rc : wr_finish((p), WR_TIMEOUT_MS);               \
	})

/*
 * Cuts the first line that starts with `prefix` out of b (a -c workload shares weft's stdout,
 * and its line may land in the middle of one of weft's, which stdio writes in pieces) and
 * copies it, without the newline, into line[0..size).  False if there is none.
 */
static inline bool wr_cut_line(struct wr_buf *b, const char *prefix, char *line, size_t size)
{
	char *s = strstr(b->p, prefix), *nl;
	size_t n;

	if (!s)
		return false;
	nl = strchr(s, '\n');
	n = nl ? (size_t)(nl - s) : strlen(s);
	snprintf(line, size, "%.*s", (int)n, s);
	if (nl)
		n++;
	memmove(s, s + n, b->len - (size_t)(s - b->p) - n + 1);
	b->len -= n;
	return true;
}

/* `rm -rf DIR`, a test's own temporary directory: 0, or -1 if it failed. */
static inline int wr_rm_rf(const char *dir)
{
	char cmd[PATH_MAX + 16];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd) == 0 ? 0 : -1;
}

/* Prints what a failed check needs to be understood. */
static inline void wr_dump(const struct wr_proc *p, const char *what)
{
	fprintf(stderr, "--- %s: status %d%s\n--- stderr:\n%s\n--- stdout (%zu bytes):\n%.4000s\n",
		what, p->status, p->timed_out ? " (timed out, killed)" : "", p->err.p, p->out.len,
		p->out.p);
}

/*
 * A workload started with its stdin on a pipe; the first line it prints is its pid
 * (wl_syscalls does that), which must be the pid we started.
 */
static inline int wr_workload_start(struct wr_proc *p, char *const argv[])
{
	int rc = wr_start(p, argv);

	if (rc)
		return rc;
	if (wr_wait_out(p, "\n", 10000))
		return -EIO;
	return atoi(p->out.p) == p->pid ? 0 : -EPROTO;
}

/* ------------------------------------------------------------------------ JSON */

enum wj_kind { WJ_NULL, WJ_BOOL, WJ_NUM, WJ_STR, WJ_ARR, WJ_OBJ };

struct wj {
	enum wj_kind kind;
	char *name; /* member name, in an object */
	char *str; /* WJ_STR: decoded; WJ_NUM: the literal */
	bool b; /* WJ_BOOL */
	double num; /* WJ_NUM */
	bool is_int; /* WJ_NUM without fraction or exponent, in range of long long */
	long long ival; /* WJ_NUM when is_int */
	struct wj *kids; /* WJ_ARR, WJ_OBJ */
	size_t nkids;
};

static inline void wj_free_kids(struct wj *v)
{
	for (size_t i = 0; i < v->nkids; i++)
		wj_free_kids(&v->kids[i]);
	free(v->kids);
	free(v->name);
	free(v->str);
}

static inline void wj_free(struct wj *v)
{
	if (!v)
		return;
	wj_free_kids(v);
	free(v);
}

static inline void *wj_alloc(size_t n)
{
	void *p = calloc(n ? n : 1, 1);

	if (!p)
		abort();
	return p;
}

static inline char *wj_dup(const char *s, size_t n)
{
	char *d = wj_alloc(n + 1);

	memcpy(d, s, n);
	return d;
}

/*
 * v from jansson's value j (copied: the tests walk struct wj).  as_real: the text was read
 * with every integer as a real (it had one beyond long long); an integral one within 2^53
 * counts as an integer then.
 */
static inline void wj_from(const json_t *j, struct wj *v, bool as_real)
{
	char lit[64];

	switch (json_typeof(j)) {
	case JSON_OBJECT: {
		const char *k;
		json_t *x;
		size_t i = 0;

		v->kind = WJ_OBJ;
		v->nkids = json_object_size(j);
		v->kids = wj_alloc(v->nkids * sizeof(*v->kids));
		json_object_foreach((json_t *)j, k, x)
		{
			v->kids[i].name = wj_dup(k, strlen(k));
			wj_from(x, &v->kids[i++], as_real);
		}
		return;
	}
	case JSON_ARRAY:
		v->kind = WJ_ARR;
		v->nkids = json_array_size(j);
		v->kids = wj_alloc(v->nkids * sizeof(*v->kids));
		for (size_t i = 0; i < v->nkids; i++)
			wj_from(json_array_get(j, i), &v->kids[i], as_real);
		return;
	case JSON_STRING:
		v->kind = WJ_STR;
		v->str = wj_dup(json_string_value(j), json_string_length(j));
		return;
	case JSON_INTEGER:
		v->kind = WJ_NUM;
		v->is_int = true;
		v->ival = (long long)json_integer_value(j);
		v->num = (double)v->ival;
		snprintf(lit, sizeof(lit), "%lld", v->ival);
		v->str = wj_dup(lit, strlen(lit));
		return;
	case JSON_REAL:
		v->kind = WJ_NUM;
		v->num = json_real_value(j);
		if (as_real && v->num == (double)(long long)v->num &&
		    v->num <= 9007199254740992.0 && v->num >= -9007199254740992.0) {
			v->is_int = true;
			v->ival = (long long)v->num;
		}
		snprintf(lit, sizeof(lit), "%.17g", v->num);
		v->str = wj_dup(lit, strlen(lit));
		return;
	case JSON_TRUE:
	case JSON_FALSE:
		v->kind = WJ_BOOL;
		v->b = json_is_true(j);
		return;
	default:
		v->kind = WJ_NULL;
		return;
	}
}

/* One JSON value filling s[0..len) (surrounding white space allowed); NULL if malformed.
 * jansson parses (JSON is never parsed by hand here); an integer beyond long long is read as
 * a real (wj_from()). */
static inline struct wj *wj_parse(const char *s, size_t len)
{
	const size_t flags = JSON_DECODE_ANY | JSON_ALLOW_NUL;
	json_error_t err;
	bool as_real = false;
	json_t *j = json_loadb(s, len, flags, &err);
	struct wj *v;

	if (!j && json_error_code(&err) == json_error_numeric_overflow) {
		j = json_loadb(s, len, flags | JSON_DECODE_INT_AS_REAL, &err);
		as_real = true;
	}
	if (!j)
		return NULL;
	v = wj_alloc(sizeof(*v));
	wj_from(j, v, as_real);
	json_decref(j);
	return v;
}

/* Member `name` of an object (NULL if absent or not an object). */
static inline const struct wj *wj_get(const struct wj *o, const char *name)
{
	if (!o || o->kind != WJ_OBJ)
		return NULL;
	for (size_t i = 0; i < o->nkids; i++)
		if (strcmp(o->kids[i].name, name) == 0)
			return &o->kids[i];
	return NULL;
}

static inline const char *wj_str(const struct wj *v)
{
	return v && v->kind == WJ_STR ? v->str : NULL;
}

/* An integer member, failing the test if it is absent or not an integer. */
static inline long long wj_int_of(const struct wj *o, const char *name)
{
	const struct wj *v = wj_get(o, name);

	if (!v || v->kind != WJ_NUM || !v->is_int)
		fail_msg("JSON member '%s' is %s, not an integer", name,
			 !v		    ? "absent" :
			 v->kind == WJ_NULL ? "null" :
			 v->str		    ? v->str :
					      "not a number");
	return v->ival;
}

/* A number member (integer or not), failing the test if it is absent or not a number. */
static inline double wj_num_of(const struct wj *o, const char *name)
{
	const struct wj *v = wj_get(o, name);

	if (!v || v->kind != WJ_NUM)
		fail_msg("JSON member '%s' is %s, not a number", name,
			 !v		    ? "absent" :
			 v->kind == WJ_NULL ? "null" :
					      "not a number");
	return v->num;
}

/* ------------------------------------------------------------------------ weft's output */

struct wr_json {
	struct wj **v; /* one per JSON line of stdout */
	size_t n;
};

/*
 * Parses every line of stdout that starts with '{' (weft's objects; a -c workload shares
 * stdout and prints its own lines, which are skipped).  A '{' line that is not valid JSON
 * fails the test: every line weft prints must parse.
 */
static inline void wr_json_lines(const struct wr_buf *b, struct wr_json *out)
{
	const char *s = b->p, *end = b->p + b->len;

	memset(out, 0, sizeof(*out));
	while (s < end) {
		const char *nl = memchr(s, '\n', (size_t)(end - s));
		const char *e = nl ? nl : end;

		if (*s == '{') {
			struct wj *v = wj_parse(s, (size_t)(e - s));

			if (!v)
				fail_msg("weft printed a line that is not JSON: %.*s", (int)(e - s),
					 s);
			if ((out->n & (out->n - 1)) == 0) { /* 0, 1, 2, 4, ...: grow by doubling */
				out->v = realloc(out->v,
						 (out->n ? 2 * out->n : 1) * sizeof(*out->v));
				if (!out->v)
					abort();
			}
			out->v[out->n++] = v;
		}
		s = e + 1;
	}
}

static inline void wr_json_free(struct wr_json *j)
{
	for (size_t i = 0; i < j->n; i++)
		wj_free(j->v[i]);
	free(j->v);
	memset(j, 0, sizeof(*j));
}

static inline bool wr_is_type(const struct wj *v, const char *type)
{
	const char *t = wj_str(wj_get(v, "type"));

	return t && strcmp(t, type) == 0;
}

/*
 * Checks the windows of a run: at least one, indexed 0, 1, 2, ... in order, each with
 * `rows` an array, and no loss of any kind (every lost counter, misses and overflow zero).
 * Returns the number of windows.
 */
static inline size_t wr_check_windows(const struct wr_json *j)
{
	size_t n = 0;

	for (size_t i = 0; i < j->n; i++) {
		const struct wj *w = j->v[i], *lost = wj_get(w, "lost"), *rows = wj_get(w, "rows");

		if (!wr_is_type(w, "window"))
			continue;
		if (wj_int_of(w, "index") != (long long)n)
			fail_msg("window %zu has index %lld", n, wj_int_of(w, "index"));
		if (!rows || rows->kind != WJ_ARR)
			fail_msg("window %zu has no rows array", n);
		if (!lost || lost->kind != WJ_OBJ)
			fail_msg("window %zu has no lost object", n);
		for (size_t k = 0; k < lost->nkids; k++)
			if (!lost->kids[k].is_int || lost->kids[k].ival != 0)
				fail_msg("window %zu lost %s events (%s)", n, lost->kids[k].str,
					 lost->kids[k].name);
		if (wj_int_of(w, "misses") != 0 || wj_int_of(w, "overflow") != 0)
			fail_msg("window %zu: misses %lld, overflow %lld", n,
				 wj_int_of(w, "misses"), wj_int_of(w, "overflow"));
		n++;
	}
	if (n == 0)
		fail_msg("no window was printed");
	return n;
}

/* The only window of a run (fails unless there is exactly one). */
static inline const struct wj *wr_one_window(const struct wr_json *j)
{
	const struct wj *w = NULL;

	if (wr_check_windows(j) != 1)
		fail_msg("%zu windows where one was expected", wr_check_windows(j));
	for (size_t i = 0; i < j->n && !w; i++)
		if (wr_is_type(j->v[i], "window"))
			w = j->v[i];
	return w;
}

/* Row `i` of a window (fails if there is none). */
static inline const struct wj *wr_row(const struct wj *w, size_t i)
{
	const struct wj *rows = wj_get(w, "rows");

	if (!rows || i >= rows->nkids)
		fail_msg("the window has %zu rows, not %zu", rows ? rows->nkids : 0, i + 1);
	return &rows->kids[i];
}

static inline size_t wr_nrows(const struct wj *w)
{
	const struct wj *rows = wj_get(w, "rows");

	return rows ? rows->nkids : 0;
}

/*
 * The sum over all windows and rows of integer column `col`, for the rows whose column `key`
 * (NULL: every row) is the integer `keyval`.
 */
static inline long long wr_sum_col(const struct wr_json *j, const char *col, const char *key,
				   long long keyval)
{
	long long sum = 0;

	for (size_t i = 0; i < j->n; i++) {
		if (!wr_is_type(j->v[i], "window"))
			continue;
		for (size_t r = 0; r < wr_nrows(j->v[i]); r++) {
			const struct wj *row = wr_row(j->v[i], r);

			if (!key || wj_int_of(row, key) == keyval)
				sum += wj_int_of(row, col);
		}
	}
	return sum;
}

/* ------------------------------------------------------------------------ kernel types */

/*
 * Writes the BTF of a made-up kernel to path: struct task_struct { int tgid; int
 * weft_no_such_field; }.  A query compiled against it (WEFT_BTF=path) reads tgid at offset 0,
 * which CO-RE must relocate to the real kernel's offset at load; weft_no_such_field is a member
 * no real kernel has, whose relocation must fail.
 */
static inline void wr_fake_btf_write(const char *path)
{
	struct btf *b = btf__new_empty();
	const void *raw;
	__u32 sz;
	FILE *f;
	int i;

	assert_non_null(b);
	i = btf__add_int(b, "int", 4, BTF_INT_SIGNED);
	assert_true(i > 0);
	assert_true(btf__add_struct(b, "task_struct", 8) > 0);
	assert_int_equal(btf__add_field(b, "tgid", i, 0, 0), 0);
	assert_int_equal(btf__add_field(b, "weft_no_such_field", i, 32, 0), 0);
	raw = btf__raw_data(b, &sz);
	assert_non_null(raw);
	f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(raw, 1, sz, f), sz);
	assert_int_equal(fclose(f), 0);
	btf__free(b);
}

/* ------------------------------------------------------------------------ other tools */

/* Runs a command (PATH searched) to its end and parses all its stdout as one JSON value. */
static inline struct wj *wr_json_of(char *const argv[])
{
	struct wr_proc p;
	struct wj *v = NULL;

	if (wr_start(&p, argv) == 0 && wr_finish(&p, 30000) == 0)
		v = wj_parse(p.out.p, p.out.len);
	if (!v)
		wr_dump(&p, argv[0]);
	wr_free(&p);
	return v;
}

#endif
