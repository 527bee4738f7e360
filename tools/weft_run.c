// SPDX-License-Identifier: Apache-2.0
/*
 * `weft run`: the one-host experience.  Compiles the query (or takes it from the compile
 * cache), loads and attaches it through the agent library, prints each window (or each
 * stream row) as it comes, and on Ctrl-C, `for` expiring, or the traced process exiting,
 * detaches everything and prints the last window.
 *
 * Windows: the kernel's maps are flipped at least once a second even when `every` is
 * longer (or absent), and the parts are merged in user space: per-CPU counters stay far
 * from overflow and a long `for` costs no more kernel memory than a short one.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <wordexp.h>
#include "agent/agent.h"
#include "agent/result.h"
#include "compiler/compiler.h"
#include "compiler/plan.h"
#include "probes/probes.h"
#include "tools/weft.h"

#define TICK_MAX_NS 1000000000ULL

static const char run_help[] =
	"Usage: weft run [OPTIONS] 'QUERY'\n"
	"       weft run [OPTIONS] -f FILE\n"
	"\n"
	"Compiles QUERY to eBPF, attaches it, and prints results: one table per window\n"
	"(`every D`), or one table when the query ends (`for D`, Ctrl-C, or the traced\n"
	"process exiting); a select without aggregates prints one row per event.\n"
	"Every probe is detached when weft exits, however it exits.  A query that starts\n"
	"with a `--` comment needs `--` before it: weft run -- '-- top callers ...'.\n"
	"\n"
	"Options:\n"
	"  -f, --file FILE       read the query from FILE, a regular file ('-': standard\n"
	"                        input, e.g. a pipe)\n"
	"  -p, --pid PID         trace only process PID (its threads); library names in probes\n"
	"                        resolve through its maps; weft stops when it exits\n"
	"  -c, --cmd 'CMD ARGS'  run CMD (split into words as a shell would, with quotes, but\n"
	"                        no shell runs) with the probes attached before its first\n"
	"                        instruction; trace only it; stop when it exits\n"
	"      --format FMT      text (default) or json: one JSON object per line, per window or\n"
	"                        per stream row (docs/output.md)\n"
	"      --max-groups N    bound of groups per window in the kernel (default 10240)\n"
	"      --ringbuf-size S  ring buffer of a stream, a power of two from 4KiB (default\n"
	"                        4MiB); rows that find it full are counted and reported\n"
	"  -v, --verbose         show the compile cache, libbpf and verifier detail\n"
	"  -h, --help            this text\n"
	"\n"
	"Exit status: 0 success, 1 failure while loading or tracing (e.g. the verifier\n"
	"rejected a program: its generated line is shown), 2 bad command line, 3 the query has\n"
	"errors.\n";

struct run {
	struct agent_query *q;
	const struct plan *p;
	enum agent_format fmt;
	uint64_t rows;
	bool stop;
	bool header_done;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

static int on_row(void *ctx, const struct plan *p, const void *rec, size_t len)
{
	struct run *r = ctx;

	if (r->stop)
		return 0;
	if (!r->header_done) {
		agent_row_header(p, r->fmt, stdout);
		r->header_done = true;
	}
	agent_row_print(p, rec, len, r->fmt, agent_query_resolver(r->q), stdout);
	r->rows++;
	if (p->limit && r->rows >= (uint64_t)p->limit)
		r->stop = true;
	return 0;
}

/* -c: a child that waits for the go byte before exec, so nothing is missed.  CMD is split
 * as a shell would split words (quotes, escapes), without running a shell or substituting
 * commands. */
static pid_t spawn_held(const char *cmd, int *go_fd)
{
	wordexp_t we;
	int fds[2], rc;
	pid_t pid;

	rc = wordexp(cmd, &we, WRDE_NOCMD | WRDE_UNDEF);
	if (rc != 0 || we.we_wordc == 0) {
		fprintf(stderr, "weft: -c '%s': %s\n", cmd,
			rc == WRDE_CMDSUB  ? "command substitution is not allowed" :
			rc == WRDE_BADCHAR ? "unquoted special character (| & ; < > ( ) { })" :
			rc == WRDE_BADVAL  ? "undefined variable" :
			rc == 0		   ? "no command" :
					     "cannot split the command");
		if (rc == 0)
			wordfree(&we);
		return -1;
	}
	if (pipe2(fds, O_CLOEXEC) != 0) {
		wordfree(&we);
		return -1;
	}
	pid = fork();
	if (pid == 0) {
		char b;

		close(fds[1]);
		if (read(fds[0], &b, 1) != 1)
			_exit(127); /* weft gave up: do not run untraced */
		execvp(we.we_wordv[0], we.we_wordv);
		fprintf(stderr, "weft: cannot run %s: %s\n", we.we_wordv[0], strerror(errno));
		_exit(127);
	}
	close(fds[0]);
	wordfree(&we);
	if (pid < 0) {
		close(fds[1]);
		return -1;
	}
	*go_fd = fds[1];
	return pid;
}

static int pidfd_of(pid_t pid)
{
	return (int)syscall(SYS_pidfd_open, pid, 0);
}

/* A stream has no window to carry its losses and notes: they are reported on stderr when it
 * ends, as a window's `lost:` and `notes:` lines would (never dropped silently). */
/* Streams have no windows, but the drop counters are kept per epoch all the same: flip
 * once a second to read them, so that losses are reported while they happen. */
static void stream_drops(struct run *r, struct agent_window_stats *acc, bool live)
{
	static const char *const names[] = WEFT_DROP_NAMES;
	struct agent_window_stats st;

	if (agent_query_window(r->q, NULL, &st) < 0)
		return;
	for (int i = 0; i < WEFT_DROP_NR; i++) {
		acc->drops[i] += st.drops[i];
		if (live && st.drops[i] && WEFT_DROP_IS_LOSS(i))
			fprintf(stderr, "weft: lost: %llu rows (%s) in the last second\n",
				(unsigned long long)st.drops[i], names[i]);
	}
	acc->misses += st.misses;
}

/* The end of a stream: totals of what was lost, on stderr, and as a last JSON line. */
static void stream_summary(struct run *r, const struct agent_window_stats *acc)
{
	static const char *const names[] = WEFT_DROP_NAMES;

	if (r->fmt == AGENT_FMT_JSON) {
		printf("{\"type\":\"end\",\"rows\":%llu,\"lost\":{", (unsigned long long)r->rows);
		for (int i = 0, n = 0; i < WEFT_DROP_NR; i++)
			if (WEFT_DROP_IS_LOSS(i))
				printf("%s\"%s\":%llu", n++ ? "," : "", names[i],
				       (unsigned long long)acc->drops[i]);
		printf("},\"notes\":{");
		for (int i = 0, n = 0; i < WEFT_DROP_NR; i++)
			if (!WEFT_DROP_IS_LOSS(i))
				printf("%s\"%s\":%llu", n++ ? "," : "", names[i],
				       (unsigned long long)acc->drops[i]);
		printf("},\"misses\":%llu}\n", (unsigned long long)acc->misses);
		fflush(stdout);
	}
	/* and for people, on stderr, whatever the format */
	for (int i = 0; i < WEFT_DROP_NR; i++)
		if (acc->drops[i])
			fprintf(stderr, "weft: %s: %llu %s (%s)\n",
				WEFT_DROP_IS_LOSS(i) ? "lost" : "notes",
				(unsigned long long)acc->drops[i],
				WEFT_DROP_IS_LOSS(i) ? "rows" : "values", names[i]);
	if (acc->misses)
		fprintf(stderr, "weft: lost: %llu events (bpf_recursion_miss)\n",
			(unsigned long long)acc->misses);
}

/* "4MiB", "65536", "256KiB" -> bytes; 0 on a bad size. */
static uint64_t parse_size(const char *s)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s)
		return 0;
	if (strcasecmp(end, "k") == 0 || strcmp(end, "KiB") == 0)
		v <<= 10;
	else if (strcasecmp(end, "m") == 0 || strcmp(end, "MiB") == 0)
		v <<= 20;
	else if (strcasecmp(end, "g") == 0 || strcmp(end, "GiB") == 0)
		v <<= 30;
	else if (*end)
		return 0;
	return v;
}

static void print_window(struct run *r, struct agent_table *t, struct agent_window_stats *st)
{
	agent_table_print(t, r->fmt, st, stdout);
	fflush(stdout);
}

int cmd_run(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "file", required_argument, NULL, 'f' },
		{ "pid", required_argument, NULL, 'p' },
		{ "cmd", required_argument, NULL, 'c' },
		{ "format", required_argument, NULL, 'F' },
		{ "max-groups", required_argument, NULL, 'G' },
		{ "ringbuf-size", required_argument, NULL, 'R' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct compile_opts copts = { .sz = sizeof(copts) };
	struct agent_query_opts aopts = { .sz = sizeof(aopts) };
	struct compile_result res = { 0 };
	struct agent_table *win = NULL;
	struct agent_window_stats acc = { 0 }, st;
	struct agent_err aerr = { 0 };
	struct run r = { .fmt = AGENT_FMT_TEXT };
	struct diag_list dl;
	const char *file = NULL, *cmd = NULL, *name;
	int c, verbose = 0, rc, status = WEFT_EXIT_OK, go_fd = -1, sfd = -1, pfd = -1;
	pid_t pid = 0, child = 0;
	char *src;
	sigset_t mask;
	uint64_t start, tick, next_tick, next_window, end_at;
	long max_groups = 0;
	uint64_t ringbuf = 0;

	optind = 1;
	while ((c = getopt_long(argc, argv, "f:p:c:vh", longopts, NULL)) != -1) {
		switch (c) {
		case 'f':
			file = optarg;
			break;
		case 'p':
			pid = tool_parse_pid(optarg);
			if (pid < 0)
				return WEFT_EXIT_USAGE;
			break;
		case 'c':
			cmd = optarg;
			break;
		case 'F':
			if (strcmp(optarg, "json") == 0)
				r.fmt = AGENT_FMT_JSON;
			else if (strcmp(optarg, "text") == 0)
				r.fmt = AGENT_FMT_TEXT;
			else {
				fprintf(stderr, "weft: --format takes text or json, not '%s'\n",
					optarg);
				return WEFT_EXIT_USAGE;
			}
			break;
		case 'G': {
			char *end;

			max_groups = strtol(optarg, &end, 10);
			if (*end || max_groups < 1 || max_groups > (1 << 22)) {
				fprintf(stderr, "weft: --max-groups takes 1 to 4194304\n");
				return WEFT_EXIT_USAGE;
			}
			break;
		}
		case 'R':
			ringbuf = parse_size(optarg);
			if (ringbuf < 4096 || ringbuf > (1ULL << 30)) {
				fprintf(stderr,
					"weft: --ringbuf-size takes 4KiB to 1GiB, not '%s'\n",
					optarg);
				return WEFT_EXIT_USAGE;
			}
			break;
		case 'v':
			verbose++;
			break;
		case 'h':
			fputs(run_help, stdout);
			return WEFT_EXIT_OK;
		default:
			fputs(run_help, stderr);
			return WEFT_EXIT_USAGE;
		}
	}
	if (optind + 1 < argc) {
		fprintf(stderr, "weft: run takes one query (quote it)\n");
		return WEFT_EXIT_USAGE;
	}
	if (pid && cmd) {
		fprintf(stderr, "weft: -p and -c exclude each other\n");
		return WEFT_EXIT_USAGE;
	}
	tool_set_verbose(verbose);
	src = tool_read_query(file, optind < argc ? argv[optind] : NULL, &name);
	if (!src)
		return WEFT_EXIT_USAGE;

	copts.pid = pid;
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
	r.p = res.plan;

	/* signals are read from a signalfd in the main loop, never handled asynchronously */
	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGHUP);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);

	if (cmd) {
		child = spawn_held(cmd, &go_fd);
		if (child < 0) {
			status = WEFT_EXIT_USAGE;
			goto out;
		}
		pid = child;
	}
	aopts.pid = pid;
	aopts.verbose = verbose > 0;
	aopts.on_row = on_row;
	aopts.row_ctx = &r;
	aopts.max_groups = (uint32_t)max_groups;
	aopts.ringbuf_bytes = (uint32_t)ringbuf;
	rc = agent_query_start(res.plan, res.object, res.object_sz, &aopts, &r.q, &aerr);
	if (rc) {
		fprintf(stderr, "weft: %s%s\n", aerr.msg[0] ? aerr.msg : probe_bpf_strerror(rc),
			aerr.verifier ? " [E_VERIFIER]" :
			aerr.attach   ? " [E_ATTACH]" :
					"");
		if (aerr.detail[0])
			fprintf(stderr, "%s\n", aerr.detail);
		status = WEFT_EXIT_FAIL;
		goto out;
	}
	if (pid)
		pfd = pidfd_of(pid);
	fprintf(stderr, "weft: attached %d probe%s%s; %s\n", res.plan->nattach,
		res.plan->nattach == 1 ? "" : "s", res.cache_hit ? " (compile cache)" : "",
		res.plan->for_ns ? "running" : "Ctrl-C to stop");
	if (go_fd >= 0) {
		if (write(go_fd, "g", 1) != 1)
			fprintf(stderr, "weft: cannot start the command\n");
		close(go_fd);
		go_fd = -1;
	}

	if (res.plan->aggregating) {
		win = agent_table_new(res.plan, 0);
		if (!win) {
			status = WEFT_EXIT_FAIL;
			goto out_stop;
		}
	}
	start = now_ns();
	tick = res.plan->every_ns && res.plan->every_ns < TICK_MAX_NS ? res.plan->every_ns :
									TICK_MAX_NS;
	next_tick = start + tick; /* streams too: their drop counters are read every tick */
	next_window = res.plan->every_ns ? start + res.plan->every_ns : UINT64_MAX;
	end_at = res.plan->for_ns ? start + res.plan->for_ns : UINT64_MAX;
	acc.start_ns = start;

	while (!r.stop) {
		struct pollfd fds[3];
		int nfds = 0, timeout;
		uint64_t t = now_ns(), wake = next_tick < end_at ? next_tick : end_at;

		if (t >= end_at)
			break;
		if (res.plan->aggregating && t >= next_tick) {
			bool close_window = t >= next_window;

			rc = agent_query_window(r.q, win, &st);
			if (rc < 0)
				fprintf(stderr, "weft: reading the window failed: %s\n",
					probe_bpf_strerror(rc));
			for (int i = 0; i < WEFT_DROP_NR; i++)
				acc.drops[i] += st.drops[i];
			acc.misses += st.misses;
			acc.groups += st.groups;
			next_tick += tick;
			if (close_window) {
				acc.end_ns = now_ns();
				print_window(&r, win, &acc);
				agent_table_clear(win);
				memset(&acc, 0, sizeof(acc));
				acc.index = st.index + 1;
				acc.start_ns = now_ns();
				next_window += res.plan->every_ns;
			}
			continue;
		}
		if (!res.plan->aggregating && t >= next_tick) {
			stream_drops(&r, &acc, r.fmt == AGENT_FMT_TEXT);
			next_tick += tick;
			continue;
		}
		timeout = wake == UINT64_MAX ? 1000 : (int)((wake - t) / 1000000ULL) + 1;
		if (timeout > 1000)
			timeout = 1000;
		if (!res.plan->aggregating) {
			fds[nfds].fd = agent_query_fd(r.q);
			fds[nfds++].events = POLLIN;
		}
		if (sfd >= 0) {
			fds[nfds].fd = sfd;
			fds[nfds++].events = POLLIN;
		}
		if (pfd >= 0) {
			fds[nfds].fd = pfd;
			fds[nfds++].events = POLLIN;
		}
		if (poll(fds, nfds, timeout) < 0 && errno != EINTR)
			break;
		if (!res.plan->aggregating)
			agent_query_poll(r.q, 0);
		if (sfd >= 0) {
			struct signalfd_siginfo si;

			if (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
				break;
		}
		if (pfd >= 0) {
			struct pollfd one = { .fd = pfd, .events = POLLIN };

			if (poll(&one, 1, 0) == 1) /* the traced process exited */
				break;
		}
	}

out_stop:
	agent_query_stop(r.q);
	if (res.plan->aggregating && win) {
		/* the last partial window: everything up to the detach */
		if (agent_query_window(r.q, win, &st) >= 0) {
			for (int i = 0; i < WEFT_DROP_NR; i++)
				acc.drops[i] += st.drops[i];
			acc.misses += st.misses;
			acc.groups += st.groups;
		}
		acc.end_ns = now_ns();
		print_window(&r, win, &acc);
	} else if (!res.plan->aggregating) {
		agent_query_poll(r.q, 0);
		if (r.fmt == AGENT_FMT_TEXT && r.rows == 0)
			fprintf(stderr, "weft: no events\n");
		stream_drops(&r, &acc, false);
		stream_summary(&r, &acc);
	}
	agent_table_free(win);
	agent_query_free(r.q);
out:
	if (go_fd >= 0)
		close(go_fd);
	if (child > 0) {
		int ws;

		if (status != WEFT_EXIT_OK)
			kill(child, SIGKILL);
		waitpid(child, &ws, 0);
	}
	if (sfd >= 0)
		close(sfd);
	if (pfd >= 0)
		close(pfd);
	compile_result_free(&res);
	diag_list_free(&dl);
	free(src);
	return status;
}
