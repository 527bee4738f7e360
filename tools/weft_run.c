// SPDX-License-Identifier: Apache-2.0
/*
 * `weft run`: the one-host experience.  Compiles the query (or takes it from the compile
 * cache), loads and attaches it through the agent library, prints each window (or each
 * stream row) as it comes, and on Ctrl-C (SIGINT, SIGTERM, SIGHUP), `for` expiring, or the
 * traced process exiting, detaches everything and prints the last window.  When its standard
 * output is closed (the reader of a pipe went away), it detaches and exits at once with
 * WEFT_EXIT_PIPE.
 *
 * The -c command: runs in its own process group, dies with weft (PR_SET_PDEATHSIG, also when
 * weft is SIGKILLed), and never keeps weft waiting after a signal: the signal is passed on to
 * its group, which gets SIGKILL CHILD_GRACE_MS later if it is still there.  When the query
 * ends by itself (`for`, `limit`), weft waits for the command to exit; a signal ends it.
 *
 * Windows: the kernel's maps are flipped at least once a second even when `every` is
 * longer (or absent), and the parts are merged in user space: per-CPU counters stay far
 * from overflow and a long `for` costs no more kernel memory than a short one.  When windows
 * close and maps flip is agent/schedule.h's, as for the agent daemon; windows here run on
 * CLOCK_MONOTONIC from the attach, and a late wake closes every window in turn, so windows
 * are numbered 0, 1, 2, ... whatever `every` is.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <wordexp.h>
#include "agent/agent.h"
#include "agent/graphcap.h"
#include "agent/result.h"
#include "agent/schedule.h"
#include "agent/scope.h"
#include "base/units.h"
#include "compiler/compiler.h"
#include "compiler/plan.h"
#include "graph/store.h"
#include "probes/probes.h"
#include "tools/weft.h"

#define CHILD_GRACE_MS 500 /* from a signal passed on to the -c command to its SIGKILL */

static const char run_help[] =
	"Usage: weft run [OPTIONS] 'QUERY'\n"
	"       weft run [OPTIONS] -f FILE\n"
	"\n"
	"Compiles QUERY to eBPF, attaches it, and prints results: one table per window\n"
	"(`every D`), or one table when the query ends (`for D`, Ctrl-C, or the traced\n"
	"process exiting); a select without aggregates prints one row per event; a graph\n"
	"query (`from ... graph`) stores tasks, events and edges in a graph store and prints\n"
	"what it stored, sampled and dropped (docs/language.md, Graph queries).\n"
	"Every probe is detached when weft exits, however it exits.  A query that starts\n"
	"with a `--` comment needs `--` before it: weft run -- '-- top callers ...'.\n"
	"\n"
	"Options:\n"
	"  -f, --file FILE       read the query from FILE, a regular file ('-': standard\n"
	"                        input, e.g. a pipe)\n"
	"  -p, --pid PID         trace only process PID (its threads); library names in probes\n"
	"                        resolve through its maps; weft stops when it exits\n"
	"      --scope netns:PATH | cgroup:PATH\n"
	"                        trace only the processes of one network namespace (PATH:\n"
	"                        /proc/PID/ns/net, or a bind mount such as /run/netns/NAME) or\n"
	"                        of one cgroup v2 directory and every cgroup below it (e.g.\n"
	"                        /sys/fs/cgroup/system.slice/nginx.service); with -p or -c,\n"
	"                        both filters apply\n"
	"  -c, --cmd 'CMD ARGS'  run CMD (split into words as a shell would, with quotes, but\n"
	"                        no shell runs) with the probes attached before its first\n"
	"                        instruction; trace only it; stop when it exits\n"
	"      --format FMT      text (default) or json: one JSON object per line, per window or\n"
	"                        per stream row; or folded: per window, one line a group, its\n"
	"                        key columns as frames (stacks root first) joined by ';', a\n"
	"                        space and the first aggregate: what flamegraph.pl reads (an\n"
	"                        aggregating query with group by; docs/output.md)\n"
	"      --max-groups N    bound of groups per window in the kernel (default 10240)\n"
	"      --ringbuf-size S  ring buffer of a stream, a power of two from 4KiB (default\n"
	"                        4MiB; a graph query's 2MiB, and as much for each CPU's own\n"
	"                        ring of kernel:sockets records, 64MiB at most for all CPUs);\n"
	"                        rows that find it full are counted and reported\n"
	"  -S, --graph-store PATH  a graph query (`from ... graph`) stores its traces in PATH, an\n"
	"                        SQLite file (created if absent); default: weft graph's store\n"
	"                        ($WEFT_GRAPH_STORE, else graph.sqlite next to the\n"
	"                        aggregator's store); a summary is printed instead of rows\n"
	"      --graph-max-age D  keep the graph store bounded as it is written: once a second,\n"
	"                        drop the traces that ended more than D ago (30m, 12h, 7d,\n"
	"                        ...); their aggregates stay (as `weft graph retain`)\n"
	"      --graph-max-size S  and then the oldest traces until the store's pages in use\n"
	"                        are at most S (500MiB, 2G, ...)\n"
	"      --cpu-budget PCT  the share of one CPU the query's probes may cost (default 5;\n"
	"                        0: no limit): each second over it is a warning, and three\n"
	"                        seconds over it in a row detach the query (exit status 4)\n"
	"  -v, --verbose         show the compile cache, libbpf and verifier detail\n"
	"  -h, --help            this text\n"
	"\n"
	"SIGINT (Ctrl-C), SIGTERM and SIGHUP end the run: the probes are detached and the\n"
	"last window is printed.  The -c command runs in its own process group and dies with\n"
	"weft: a signal is passed on to its group, which is killed (SIGKILL) half a second\n"
	"later if still there; when `for`, `limit` or the CPU budget ends the query, weft\n"
	"waits for it.\n"
	"\n"
	"Environment: WEFT_BTF=FILE and WEFT_TRACEFS=DIR compile against another kernel's\n"
	"types and tracepoint formats; WEFT_RAW_TP=0 keeps kernel:sockets on classic\n"
	"tracepoints; WEFT_HUGEPAGES=0 keeps a graph query's heap in 4 KiB pages (by\n"
	"default, where transparent huge pages are \"madvise\", weft starts itself again\n"
	"with glibc's glibc.malloc.hugetlb=1 once it knows the query is a graph query, not\n"
	"read from -f -; the -c command gets the environment as given).\n"
	"\n"
	"Exit status: 0 success (also when ended by a signal), 1 failure while loading or\n"
	"tracing (e.g. the verifier rejected a program: its generated line is shown; a\n"
	"--scope this kernel cannot apply), 2 bad command line (also a --scope that is\n"
	"missing, or no network namespace or cgroup v2 directory), 3 the query has errors,\n"
	"4 the query was stopped by its CPU budget (its last window is printed), 141\n"
	"standard output was closed (e.g. the reader of `weft run ... | head` exited): the\n"
	"probes were detached, the last window is lost.\n";

/* the numbers the help and the messages state */
_Static_assert(PLAN_DEFAULT_GROUPS == 10240 && PLAN_DEFAULT_RINGBUF == 4u << 20 &&
		       PLAN_DEFAULT_GRAPH_RINGBUF == 2u << 20,
	       "run_help");
_Static_assert(PLAN_MIN_RINGBUF == 4096 && PLAN_MAX_RINGBUF == 1u << 30, "--ringbuf-size");

struct run {
	struct agent_query *q;
	const struct plan *p;
	enum agent_format fmt;
	uint64_t rows;
	uint32_t batch; /* rows since the main loop last had a turn */
	bool stop;
	bool header_done;
	bool out_pollable; /* stdout is a pipe or socket: poll tells when its reader is gone */
	int out_err; /* errno of the first failed write of stdout (EPIPE: reader gone), or 0 */
	bool budget_stopped;
	/* a graph query: records -> graphcap -> the graph store */
	struct graphcap *gc;
	struct graph_store *gs;
	char gs_path[4096];
	struct graph_put_stats put; /* summed over every put */
	struct graph_retention keep; /* --graph-max-age, --graph-max-size */
	int graph_err; /* the first failed put or capture, -errno */
};

/* Traces retention may drop after a put: more than the put stored, so that a store over its
 * bound comes back under it, but bounded, so that a bound lowered on a large store does not
 * stall the capture (the rest goes a slice a second) */
#define RETAIN_SLICE 2000

/* The -c command: its pid is also its process group's id. */
struct child {
	pid_t pid; /* 0: none */
	int pfd; /* its pidfd, or -1 */
	uint64_t kill_at; /* once asked to end: when its group gets SIGKILL (ns), else 0 */
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

static int out_check(struct run *r);

/* Rows a poll of the ring buffer delivers at most before the main loop has a turn: a producer
 * faster than the writing must not keep weft from its signals and a closed output. */
#define RUN_ROWS_PER_POLL 65536u

static int on_row(void *ctx, const struct plan *p, const void *rec, size_t len)
{
	struct run *r = ctx;

	if (r->gc) {
		int rc = graphcap_record(r->gc, rec, len);

		r->rows++;
		if (rc == -ENOMEM && !r->graph_err)
			r->graph_err = rc;
		return 0;
	}
	if (r->stop || r->out_err)
		return -ECANCELED; /* the ring buffer's poll stops: nothing more is written */
	if (!r->header_done) {
		agent_row_header(p, r->fmt, stdout);
		r->header_done = true;
	}
	agent_row_print(p, rec, len, r->fmt, agent_query_resolver(r->q), stdout);
	r->rows++;
	if (p->limit && r->rows >= (uint64_t)p->limit)
		r->stop = true;
	if (++r->batch >= RUN_ROWS_PER_POLL) {
		r->batch = 0;
		return out_check(r) ? -ECANCELED : -EAGAIN; /* the main loop's turn */
	}
	return 0;
}

/* -c: a child that waits for the go byte before exec, so nothing is missed.  CMD is split
 * as a shell would split words (quotes, escapes), without running a shell or substituting
 * commands. */
static pid_t spawn_held(const char *cmd, int *go_fd)
{
	wordexp_t we;
	int fds[2], rc;
	pid_t pid, parent;

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
	parent = getpid();
	pid = fork();
	if (pid == 0) {
		sigset_t none;
		char b;

		/* its own group, so that weft can end all it started; and it dies with weft,
		 * even by SIGKILL (weft may have died before the prctl: then getppid() changed) */
		setpgid(0, 0);
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
			_exit(127);
		/* weft's own signal settings are not the command's */
		signal(SIGPIPE, SIG_DFL);
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
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
	setpgid(pid, pid); /* as well, so the group exists whichever of the two runs first */
	*go_fd = fds[1];
	return pid;
}

static int pidfd_of(pid_t pid)
{
	return (int)syscall(SYS_pidfd_open, pid, 0);
}

/* Whether the command has exited, without reaping it (its pid keeps its group's id taken). */
static bool child_exited(const struct child *ch)
{
	siginfo_t si = { 0 };

	if (waitid(P_PID, (id_t)ch->pid, &si, WEXITED | WNOHANG | WNOWAIT) != 0)
		return errno == ECHILD;
	return si.si_pid == ch->pid;
}

/* Up to ms milliseconds for the command to exit (its pidfd, or looking every 10 ms). */
static void child_wait_ms(const struct child *ch, int ms)
{
	if (ch->pfd >= 0) {
		struct pollfd p = { .fd = ch->pfd, .events = POLLIN };

		poll(&p, 1, ms);
		return;
	}
	for (; ms > 0 && !child_exited(ch); ms -= 10)
		usleep(10000);
}

/* Passes sig on to the command's process group; SIGKILL follows CHILD_GRACE_MS later. */
static void child_signal(struct child *ch, int sig)
{
	if (ch->pid <= 0 || ch->kill_at)
		return;
	kill(-ch->pid, sig);
	ch->kill_at = now_ns() + CHILD_GRACE_MS * 1000000ULL;
}

/*
 * The end of the command.  Asked to end (child_signal): it has until kill_at, then its group
 * gets SIGKILL (its own children too, should it have exited first).  With wait (the query
 * ended by itself), it may run on until it exits or a signal comes, which is passed on as
 * above.  Without, a command still running is asked to end with SIGTERM.  Then it is reaped.
 * Its pidfd stays open (the caller's).
 */
static void child_finish(struct child *ch, int sfd, bool wait)
{
	int ws;

	if (ch->pid <= 0)
		return;
	if (wait && !ch->kill_at && !child_exited(ch)) {
		fprintf(stderr,
			"weft: the query has ended; waiting for the command (pid %d) to exit "
			"(Ctrl-C ends it)\n",
			(int)ch->pid);
		while (!child_exited(ch)) {
			struct pollfd fds[2] = { { .fd = sfd, .events = POLLIN },
						 { .fd = ch->pfd, .events = POLLIN } };
			struct signalfd_siginfo si;

			poll(fds, ch->pfd >= 0 ? 2 : 1, ch->pfd >= 0 ? -1 : 10);
			if (sfd >= 0 && read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
				child_signal(ch, (int)si.ssi_signo);
				break;
			}
		}
	}
	if (!wait && !ch->kill_at && !child_exited(ch))
		child_signal(ch, SIGTERM); /* weft ends for a reason of its own */
	if (ch->kill_at) {
		for (uint64_t t = now_ns(); t < ch->kill_at && !child_exited(ch); t = now_ns())
			child_wait_ms(ch, (int)((ch->kill_at - t) / 1000000ULL) + 1);
		kill(-ch->pid, SIGKILL);
	}
	while (waitpid(ch->pid, &ws, 0) < 0 && errno == EINTR)
		;
	ch->pid = 0;
}

/*
 * Whether standard output can still be written, and why not: flushes it, and for a pipe or
 * socket asks poll() whether its reader is gone (POLLERR/POLLHUP on the writing end), which
 * also tells a run that has not written anything yet.  Sets r->out_err once.
 */
static int out_check(struct run *r)
{
	int err = 0;

	if (r->out_err)
		return r->out_err;
	errno = 0;
	if (fflush(stdout) == EOF)
		err = errno ? errno : EIO;
	else if (ferror(stdout))
		err = EIO;
	if (r->out_pollable) {
		struct pollfd p = { .fd = STDOUT_FILENO, .events = 0 };

		if (poll(&p, 1, 0) == 1 && (p.revents & (POLLERR | POLLHUP)))
			err = EPIPE;
	}
	r->out_err = err;
	return err;
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

	if (r->fmt == AGENT_FMT_JSON && !r->out_err) {
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
				(unsigned long long)acc->drops[i], agent_drop_what(i), names[i]);
	if (acc->misses)
		fprintf(stderr, "weft: lost: %llu events (bpf_recursion_miss)\n",
			(unsigned long long)acc->misses);
}

/* A budget window over the budget, as a JSON line (docs/output.md). */
static void budget_json(const struct agent_budget_report *br)
{
	printf("{\"type\":\"cpu_budget\",\"index\":%llu,\"verdict\":\"%s\",\"window_ns\":%llu,"
	       "\"budget_pct\":%g,\"budget_ns\":%llu,\"cost_ns\":%llu,\"run_ns\":%llu,"
	       "\"trap_ns\":%llu,\"calls\":%llu,\"over\":%u,\"limit\":%u,\"probes\":[",
	       (unsigned long long)br->index,
	       br->verdict == AGENT_BUDGET_STOPPED ? "stopped" : "over",
	       (unsigned long long)br->window_ns, br->budget_pct, (unsigned long long)br->budget_ns,
	       (unsigned long long)br->cost_ns, (unsigned long long)br->run_ns,
	       (unsigned long long)br->trap_ns, (unsigned long long)br->calls, br->over, br->limit);
	for (int i = 0; i < br->nhot; i++) {
		const struct agent_budget_prog *h = &br->hot[i];

		printf("%s{\"program\":", i ? "," : "");
		agent_json_str(stdout, h->prog);
		printf(",\"probe\":");
		agent_json_str(stdout, h->probe);
		printf(",\"sites\":%d,\"cost_ns\":%llu,\"run_ns\":%llu,\"trap_ns\":%llu,"
		       "\"calls\":%llu}",
		       h->sites, (unsigned long long)h->cost_ns, (unsigned long long)h->run_ns,
		       (unsigned long long)h->trap_ns, (unsigned long long)h->calls);
	}
	printf("],\"message\":");
	agent_json_str(stdout, br->text);
	printf("}\n");
	fflush(stdout);
}

/* The CPU budget, at every tick: a window over it is a warning, the last one a stop (the
 * query is detached already).  True when the query was stopped. */
static bool budget_tick(struct run *r)
{
	struct agent_budget_report br;
	int rc = agent_query_budget(r->q, &br);

	if (rc < 0) {
		fprintf(stderr, "weft: warning: cannot read the CPU budget's statistics: %s\n",
			strerror(-rc));
		return false;
	}
	if (rc == 0 || br.verdict == AGENT_BUDGET_UNDER)
		return false;
	if (br.verdict == AGENT_BUDGET_STOPPED) {
		fprintf(stderr, "weft: %s [E_CPU_BUDGET]\n", br.text);
		fprintf(stderr, "  (--cpu-budget PCT sets the budget, 0 removes it; or narrow the "
				"probes, filter with -p)\n");
	} else {
		fprintf(stderr, "weft: warning: %s [W_CPU_BUDGET]\n", br.text);
	}
	if (r->fmt == AGENT_FMT_JSON)
		budget_json(&br);
	if (br.verdict != AGENT_BUDGET_STOPPED)
		return false;
	r->budget_stopped = true;
	return true;
}

/* Finished traces into the store: the kept ones without their aggregates, then the
 * aggregates of every finished trace (graph/aggs.h: exact whatever the sampling). */
static void graph_flush(struct run *r, bool final)
{
	struct graph kept;
	struct graph_aggs aggs;
	struct graph_put_stats st = { 0 };
	char why[512] = "";
	int rc;

	/* every record there first: the capture's live clock says that whatever was written
	 * before now has been seen (graph records are submitted without a wakeup) */
	agent_query_poll(r->q, 0);
	graph_init(&kept);
	graph_aggs_init(&aggs);
	rc = graphcap_drain(r->gc, final, &kept, &aggs);
	if (rc > 0 && kept.ntasks + kept.nevents + kept.nedges)
		rc = graph_store_put_opts(r->gs, &kept, GRAPH_PUT_NO_AGGS, &st, why, sizeof(why));
	if (rc >= 0 && !graph_aggs_empty(&aggs))
		rc = graph_store_put_aggs(r->gs, &aggs, why, sizeof(why));
	if (rc < 0) {
		if (!r->graph_err)
			fprintf(stderr, "weft: graph store %s: %s\n", r->gs_path,
				why[0] ? why : strerror(-rc));
		if (!r->graph_err)
			r->graph_err = rc;
	} else {
		r->put.traces += st.traces;
		r->put.tasks += st.tasks;
		r->put.events += st.events;
		r->put.edges += st.edges;
		r->put.replaced += st.replaced;
	}
	if (rc >= 0 && (r->keep.max_age_ns || r->keep.max_bytes)) {
		why[0] = 0;
		rc = (int)graph_retention_step(r->gs, &r->keep, RETAIN_SLICE + 2 * st.traces, why,
					       sizeof(why));
		if (rc < 0 && !r->graph_err) {
			fprintf(stderr, "weft: graph store %s: retention: %s\n", r->gs_path,
				why[0] ? why : strerror(-rc));
			r->graph_err = rc;
		}
	}
	graph_free(&kept);
	graph_aggs_free(&aggs);
}

/* The end of a graph query: what was stored, sampled and lost, instead of rows. */
static void graph_summary(struct run *r, const struct agent_window_stats *acc)
{
	static const char *const names[] = WEFT_DROP_NAMES;
	struct graphcap_stats gs;
	uint64_t lost = 0;

	graphcap_stats(r->gc, &gs);
	for (int i = 0; i < WEFT_DROP_NR; i++)
		if (WEFT_DROP_IS_LOSS(i))
			lost += acc->drops[i];
	if (r->fmt == AGENT_FMT_JSON) {
		printf("{\"type\":\"graph\",\"records\":%llu,\"traces\":%llu,\"tasks\":%llu,"
		       "\"events\":%llu,\"edges\":%llu,\"replaced\":%llu,\"sample\":%g,"
		       "\"seen\":%llu,\"kept_head\":%llu,\"kept_outlier\":%llu,"
		       "\"open_evicted\":%llu,\"end_without_begin\":%llu,\"orphans\":%llu,"
		       "\"unfinished\":%llu,\"kernel_unowned\":%llu,\"kernel_pending_full\":%llu,"
		       "\"bad\":%llu,\"retained\":%llu,\"lost\":{",
		       (unsigned long long)r->rows, (unsigned long long)r->put.traces,
		       (unsigned long long)r->put.tasks, (unsigned long long)r->put.events,
		       (unsigned long long)r->put.edges, (unsigned long long)r->put.replaced,
		       r->p->sample * 100, (unsigned long long)gs.traces_seen,
		       (unsigned long long)gs.kept_head, (unsigned long long)gs.kept_outlier,
		       (unsigned long long)gs.open_evicted,
		       (unsigned long long)gs.end_without_begin, (unsigned long long)gs.orphans,
		       (unsigned long long)gs.unfinished, (unsigned long long)gs.kernel_unowned,
		       (unsigned long long)gs.kernel_pending_full, (unsigned long long)gs.bad,
		       (unsigned long long)r->keep.dropped);
		for (int i = 0, n = 0; i < WEFT_DROP_NR; i++)
			if (WEFT_DROP_IS_LOSS(i))
				printf("%s\"%s\":%llu", n++ ? "," : "", names[i],
				       (unsigned long long)acc->drops[i]);
		printf("}}\n");
		fflush(stdout);
		return;
	}
	printf("graph store %s\n", r->gs_path);
	printf("stored: %llu traces, %llu tasks, %llu events, %llu edges\n",
	       (unsigned long long)r->put.traces, (unsigned long long)r->put.tasks,
	       (unsigned long long)r->put.events, (unsigned long long)r->put.edges);
	printf("sampled: %g%% head sample; %llu traces seen, kept %llu (head sample %llu, "
	       "outliers %llu); aggregates of all %llu\n",
	       r->p->sample * 100, (unsigned long long)gs.traces_seen,
	       (unsigned long long)(gs.kept_head + gs.kept_outlier),
	       (unsigned long long)gs.kept_head, (unsigned long long)gs.kept_outlier,
	       (unsigned long long)gs.traces_seen);
	printf("dropped: %llu records lost in the kernel, %llu open tasks evicted, %llu ends "
	       "without a begin, %llu orphan events, %llu tasks unfinished, %llu bad records\n",
	       (unsigned long long)lost, (unsigned long long)gs.open_evicted,
	       (unsigned long long)gs.end_without_begin, (unsigned long long)gs.orphans,
	       (unsigned long long)gs.unfinished, (unsigned long long)gs.bad);
	if (gs.kernel_unowned || gs.kernel_pending_full)
		printf("kernel:sched/process: %llu records in no task (no element), %llu wakeups "
		       "and forks lost (pending table full)\n",
		       (unsigned long long)gs.kernel_unowned,
		       (unsigned long long)gs.kernel_pending_full);
	if (r->keep.max_age_ns || r->keep.max_bytes)
		printf("retention: %llu traces dropped from the store (their aggregates kept)\n",
		       (unsigned long long)r->keep.dropped);
	fflush(stdout);
}

static void print_window(struct run *r, struct agent_table *t, struct agent_window_stats *st)
{
	if (r->out_err)
		return;
	agent_table_print(t, r->fmt, st, stdout);
	out_check(r);
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
		{ "cpu-budget", required_argument, NULL, 'B' },
		{ "scope", required_argument, NULL, 'O' },
		{ "graph-store", required_argument, NULL, 'S' },
		{ "graph-max-age", required_argument, NULL, 3 },
		{ "graph-max-size", required_argument, NULL, 4 },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		/* clauses of the query, not options: named so that getopt does not take `--for`
		 * for an abbreviation of --format, and so that the error says where they go */
		{ "for", required_argument, NULL, 1 },
		{ "every", required_argument, NULL, 2 },
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
	pid_t pid = 0;
	struct child ch = { .pfd = -1 };
	struct stat out_st;
	bool ended_by_query = false; /* `for` or `limit`: the -c command may run on */
	char *src;
	struct agent_sched sched = { 0 };
	uint64_t start;
	long max_groups = 0;
	uint64_t ringbuf = 0;
	double budget = AGENT_CPU_BUDGET_DEFAULT;
	const char *scope_spec = NULL;
	struct agent_scope scope;
	const char *graph_store = NULL;

	optind = 1;
	while ((c = getopt_long(argc, argv, "f:p:c:S:vh", longopts, NULL)) != -1) {
		switch (c) {
		case 'S':
			if (!*optarg) {
				fprintf(stderr, "weft: --graph-store takes a file name\n");
				return WEFT_EXIT_USAGE;
			}
			graph_store = optarg;
			break;
		case 3:
			if (tool_parse_max_age("--graph-max-age", optarg, &r.keep.max_age_ns))
				return WEFT_EXIT_USAGE;
			break;
		case 4:
			if (tool_parse_max_size("--graph-max-size", optarg, &r.keep.max_bytes))
				return WEFT_EXIT_USAGE;
			break;
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
		case 1:
		case 2: {
			const char *cl = c == 1 ? "for" : "every";

			fprintf(stderr,
				"weft: `%s` is a clause of the query, not an option: weft run "
				"'from ... %s %s'\n",
				cl, cl, optarg);
			return WEFT_EXIT_USAGE;
		}
		case 'F':
			if (strcmp(optarg, "json") == 0)
				r.fmt = AGENT_FMT_JSON;
			else if (strcmp(optarg, "text") == 0)
				r.fmt = AGENT_FMT_TEXT;
			else if (strcmp(optarg, "folded") == 0)
				r.fmt = AGENT_FMT_FOLDED;
			else {
				fprintf(stderr,
					"weft: --format takes text, json or folded, not '%s'\n",
					optarg);
				return WEFT_EXIT_USAGE;
			}
			break;
		case 'G': {
			char *end;

			max_groups = strtol(optarg, &end, 10);
			if (*end || max_groups < 1 || max_groups > PLAN_MAX_GROUPS) {
				fprintf(stderr, "weft: --max-groups takes 1 to %u\n",
					PLAN_MAX_GROUPS);
				return WEFT_EXIT_USAGE;
			}
			break;
		}
		case 'R':
			if (units_size_parse(optarg, &ringbuf) || ringbuf < PLAN_MIN_RINGBUF ||
			    ringbuf > PLAN_MAX_RINGBUF) {
				fprintf(stderr,
					"weft: --ringbuf-size takes 4KiB to 1GiB, not '%s'\n",
					optarg);
				return WEFT_EXIT_USAGE;
			}
			break;
		case 'B': {
			char *end;

			budget = strtod(optarg, &end);
			if (end == optarg || *end || !(budget >= 0 && budget <= 100000)) {
				fprintf(stderr,
					"weft: --cpu-budget takes a percentage of one CPU from 0 "
					"(no limit) to 100000, not '%s'\n",
					optarg);
				return WEFT_EXIT_USAGE;
			}
			break;
		}
		case 'O':
			scope_spec = optarg;
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
	agent_scope_init(&scope);
	if (scope_spec) {
		char why[AGENT_SCOPE_TEXT_MAX + 256];

		rc = agent_scope_open(scope_spec, &scope, why, sizeof(why));
		if (rc) {
			fprintf(stderr, "weft: %s\n", why);
			free(src);
			return rc == -EINVAL || rc == -ENOENT ? WEFT_EXIT_USAGE : WEFT_EXIT_FAIL;
		}
	}

	copts.pid = pid;
	copts.verbose = verbose > 0;
	diag_list_init(&dl, src, name);
	rc = compiler_run(src, &copts, PASS_CLANG, &dl, &res);
	/* a graph capture's heap grows to hundreds of MB: in huge pages, by a second start (the
	 * object is in the compile cache by now); not for a query read from standard input,
	 * which a second start could not read again */
	if (rc == 0 && res.plan->graph && !(file && strcmp(file, "-") == 0))
		tool_heap_hugepages();
	diag_print(&dl, stderr, isatty(2));
	if (rc) {
		status = diag_has_errors(&dl) ? WEFT_EXIT_QUERY : WEFT_EXIT_FAIL;
		if (!diag_has_errors(&dl))
			fprintf(stderr, "weft: %s\n", strerror(-rc));
		goto out;
	}
	r.p = res.plan;
	if (r.fmt == AGENT_FMT_FOLDED && !agent_plan_folds(res.plan)) {
		fprintf(stderr, "weft: --format folded needs an aggregating query with a group by "
				"and an aggregate, e.g. ... group by ustack select count()\n");
		status = WEFT_EXIT_USAGE;
		goto out;
	}
	if ((graph_store || r.keep.max_age_ns || r.keep.max_bytes) && !res.plan->graph) {
		fprintf(stderr, "weft: --graph-store, --graph-max-age and --graph-max-size are for "
				"graph queries (from ... graph)\n");
		status = WEFT_EXIT_USAGE;
		goto out;
	}
	if (res.plan->graph) {
		struct graphcap_opts gopts = { .sz = sizeof(gopts),
					       .sample = -1,
					       .live_clock = true };
		char why[512] = "";

		if (graph_store) {
			snprintf(r.gs_path, sizeof(r.gs_path), "%s", graph_store);
		} else if ((rc = weft_graph_store_default(r.gs_path, sizeof(r.gs_path)))) {
			fprintf(stderr,
				"weft: no default graph store (%s); give --graph-store PATH or set "
				"WEFT_GRAPH_STORE\n",
				strerror(-rc));
			status = WEFT_EXIT_FAIL;
			goto out;
		}
		r.gs = graph_store_open(r.gs_path, why, sizeof(why));
		if (!r.gs) {
			fprintf(stderr, "weft: %s\n", why[0] ? why : "cannot open the graph store");
			status = WEFT_EXIT_FAIL;
			goto out;
		}
		r.gc = graphcap_new(res.plan, &gopts);
		if (!r.gc) {
			fprintf(stderr, "weft: %s\n", strerror(errno));
			status = WEFT_EXIT_FAIL;
			goto out;
		}
	}

	/* signals are read from a signalfd in the main loop, never handled asynchronously */
	sfd = tool_signals_block(true);

	r.out_pollable = fstat(STDOUT_FILENO, &out_st) == 0 &&
			 (S_ISFIFO(out_st.st_mode) || S_ISSOCK(out_st.st_mode));

	if (cmd) {
		ch.pid = spawn_held(cmd, &go_fd);
		if (ch.pid < 0) {
			ch.pid = 0;
			status = WEFT_EXIT_USAGE;
			goto out;
		}
		pid = ch.pid;
	}
	aopts.pid = pid;
	aopts.verbose = verbose > 0;
	aopts.on_row = on_row;
	aopts.row_ctx = &r;
	aopts.max_groups = (uint32_t)max_groups;
	aopts.ringbuf_bytes = (uint32_t)ringbuf;
	aopts.cpu_budget = budget;
	aopts.scope = scope_spec ? &scope : NULL;
	compile_sites_print(&res, "weft: ", stderr);
	rc = agent_query_start(res.plan, res.object, res.object_sz, &aopts, &r.q, &aerr);
	if (rc) {
		char line[sizeof(aerr.msg) + 32];

		agent_err_line(&aerr, rc, line, sizeof(line));
		fprintf(stderr, "weft: %s\n", line);
		if (aerr.detail[0])
			fprintf(stderr, "%s\n", aerr.detail);
		status = WEFT_EXIT_FAIL;
		goto out;
	}
	if (pid)
		pfd = pidfd_of(pid);
	ch.pfd = ch.pid ? pfd : -1;
	fprintf(stderr, "weft: attached %d probe%s%s; %s\n", res.plan->nattach,
		res.plan->nattach == 1 ? "" : "s", res.cache_hit ? " (compile cache)" : "",
		res.plan->for_ns ? "running" : "Ctrl-C to stop");
	agent_query_budget_start(r.q); /* after the line: it costs ~10 ms the first time */
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
	/* windows on CLOCK_MONOTONIC from now; a late wake closes every window in turn */
	start = now_ns();
	agent_sched_init(&sched, start, res.plan->every_ns,
			 res.plan->for_ns ? start + res.plan->for_ns : UINT64_MAX, true, start,
			 start);
	acc.start_ns = start;

	while (!r.stop) {
		struct pollfd fds[4];
		int nfds = 0, timeout;
		uint64_t t = now_ns();
		enum agent_sched_due due = agent_sched_due(&sched, t, t);

		if (r.out_err)
			break;
		if (due == AGENT_SCHED_END) {
			ended_by_query = true;
			break;
		}
		if (due == AGENT_SCHED_CLOSE || due == AGENT_SCHED_FLIP) {
			/* streams flip too: their drop counters are read every second */
			if (!res.plan->aggregating) {
				stream_drops(&r, &acc, r.fmt == AGENT_FMT_TEXT);
				if (r.gc) /* finished traces into the store, once a second */
					graph_flush(&r, false);
			} else {
				rc = agent_query_window(r.q, win, &st);
				if (rc < 0)
					fprintf(stderr, "weft: reading the window failed: %s\n",
						probe_bpf_strerror(rc));
				for (int i = 0; i < WEFT_DROP_NR; i++)
					acc.drops[i] += st.drops[i];
				acc.misses += st.misses;
				acc.groups += st.groups;
				acc.spans_open = st.spans_open; /* a state, not a count */
				acc.spans_known = st.spans_known;
			}
			if (budget_tick(&r))
				break;
			if (due == AGENT_SCHED_FLIP) {
				agent_sched_flipped(&sched, t);
				continue;
			}
			if (res.plan->aggregating) {
				acc.index = sched.window;
				acc.end_ns = now_ns();
				print_window(&r, win, &acc);
				agent_table_clear(win);
				memset(&acc, 0, sizeof(acc));
				acc.start_ns = now_ns();
			}
			agent_sched_close(&sched, t, t);
			continue;
		}
		timeout = (int)(agent_sched_wait_ns(&sched, t, t) / 1000000ULL) + 1;
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
		if (r.out_pollable) { /* POLLERR (pipe) or POLLHUP (socket): the reader left */
			fds[nfds].fd = STDOUT_FILENO;
			fds[nfds++].events = 0;
		}
		if (poll(fds, nfds, timeout) < 0 && errno != EINTR)
			break;
		if (!res.plan->aggregating) {
			agent_query_poll(r.q, 0);
			if (r.stop)
				ended_by_query = true; /* limit */
		}
		if (out_check(&r))
			break;
		if (sfd >= 0) {
			struct signalfd_siginfo si;

			if (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
				child_signal(&ch, (int)si.ssi_signo);
				break;
			}
		}
		if (pfd >= 0) {
			struct pollfd one = { .fd = pfd, .events = POLLIN };

			if (poll(&one, 1, 0) == 1) /* the traced process exited */
				break;
		}
	}

out_stop:
	agent_query_stop(r.q);
	if (r.out_err) {
		/* nobody reads: end the command too, and say why weft stops */
		child_signal(&ch, SIGTERM);
		if (r.out_err == EPIPE)
			fprintf(stderr, "weft: standard output was closed; probes detached\n");
		else
			fprintf(stderr, "weft: cannot write the output: %s; probes detached\n",
				strerror(r.out_err));
	}
	if (res.plan->aggregating && win) {
		/* the last partial window: everything up to the detach */
		if (agent_query_window(r.q, win, &st) >= 0) {
			for (int i = 0; i < WEFT_DROP_NR; i++)
				acc.drops[i] += st.drops[i];
			acc.misses += st.misses;
			acc.groups += st.groups;
			acc.spans_open = st.spans_open; /* after the detach: never ended */
			acc.spans_known = st.spans_known;
		}
		acc.index = sched.window;
		acc.end_ns = now_ns();
		print_window(&r, win, &acc);
	} else if (r.gc) {
		agent_query_poll(r.q, 0);
		stream_drops(&r, &acc, false);
		graph_flush(&r, true);
		graph_summary(&r, &acc);
		if (r.graph_err && status == WEFT_EXIT_OK)
			status = WEFT_EXIT_FAIL;
	} else if (!res.plan->aggregating) {
		while (agent_query_poll(r.q, 0) == -EAGAIN) /* all that was recorded */
			;
		if (r.fmt == AGENT_FMT_TEXT && r.rows == 0 && !r.out_err)
			fprintf(stderr, "weft: no events\n");
		stream_drops(&r, &acc, false);
		stream_summary(&r, &acc);
	}
	if (out_check(&r) && status == WEFT_EXIT_OK)
		status = r.out_err == EPIPE ? WEFT_EXIT_PIPE : WEFT_EXIT_FAIL;
	agent_table_free(win);
	agent_query_free(r.q);
	if (r.budget_stopped)
		status = WEFT_EXIT_BUDGET;
out:
	if (go_fd >= 0)
		close(go_fd);
	if (status != WEFT_EXIT_OK && status != WEFT_EXIT_PIPE && status != WEFT_EXIT_BUDGET)
		child_signal(&ch, SIGKILL); /* it may not even have started */
	if (status == WEFT_EXIT_BUDGET && ch.pid > 0)
		/* the budget protects the command: it goes on, untraced, and weft waits for it */
		fprintf(stderr, "weft: the command (pid %d) goes on untraced\n", (int)ch.pid);
	child_finish(&ch, sfd, ended_by_query || status == WEFT_EXIT_BUDGET);
	if (sfd >= 0)
		close(sfd);
	if (pfd >= 0)
		close(pfd);
	graphcap_free(r.gc);
	graph_store_close(r.gs);
	compile_result_free(&res);
	diag_list_free(&dl);
	agent_scope_close(&scope);
	free(src);
	return status;
}
