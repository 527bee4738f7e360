// SPDX-License-Identifier: Apache-2.0
/*
 * weft — kernel-to-cluster dynamic tracing.  main(): the subcommand dispatcher, the
 * program-wide help, and helpers the subcommands share.  Only files in tools/ exit.
 */
#include <errno.h>
#include <malloc.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include "tools/weft.h"
#include "base/file.h"
#include "base/log.h"
#include "base/units.h"
#include "base/zmq_dl.h"

static const char usage_text[] =
	"Usage: weft COMMAND [OPTIONS] [ARGS]\n"
	"\n"
	"weft compiles a declarative query into eBPF probes that the kernel verifies, attaches\n"
	"them to tracepoints, system calls, user functions and USDT probes, aggregates events in\n"
	"the kernel and prints windowed results; across a cluster, agents ship partial\n"
	"aggregates to an aggregator that merges every host into one answer.\n"
	"\n"
	"Commands:\n"
	"  run [-p PID | -c CMD] 'QUERY' trace: attach the query's probes and print results\n"
	"  explain [-f FILE | 'QUERY']   check a query and show its plan (no probes attached)\n"
	"  list [PATTERN | BINARY]       list probes (tracepoints, syscalls; functions and USDT\n"
	"                                probes of a binary or a process) and their fields\n"
	"  agent --connect ENDPOINT ...  run this host's agent of a weft cluster\n"
	"  aggregator --listen ENDPOINT  run a cluster aggregator: merges agents' windows\n"
	"  submit --to ENDPOINT 'QUERY'  run a query on every agent of a cluster, print merged\n"
	"                                results\n"
	"  status --to ENDPOINT          list a cluster's agents and queries\n"
	"  cancel --to ENDPOINT ID       stop a cluster query everywhere\n"
	"  keygen [-o DIR] NAME          make a key pair for an agent, client or aggregator\n"
	"  graph COMMAND ...             execution graphs: import traces (OTLP, Jaeger, Zipkin,\n"
	"                                X-Trace, LTTng), list, stats, show, export, retain\n"
	"  vm analyze --host FILE ...    virtual machines: vCPU states, exit reasons, guest\n"
	"                                threads that lost time to the host; vm record,\n"
	"                                vm sync (a guest's clock against its host's, live),\n"
	"                                vm live (the fused view, live from a cluster)\n"
	"  help [COMMAND]                this text, or a command's own help\n"
	"  version                       print the version\n"
	"\n"
	"A query reads like a pipeline:\n"
	"  from SOURCE[, SOURCE...] [where COND] [group by EXPR [as NAME], ...]\n"
	"  select ITEM [as NAME], ... [order by COLUMN [asc|desc]] [limit N]\n"
	"  [every DURATION] [for DURATION]\n"
	"\n"
	"Examples:\n"
	"  weft run 'from tracepoint:raw_syscalls:sys_enter group by comm\n"
	"            select count() as calls order by calls desc limit 10 every 1s'\n"
	"  weft run -p 4242 'from span(uprobe:/usr/bin/redis-server:processCommand)\n"
	"                    select count(), p50(duration), p99(duration) every 1s'\n"
	"  weft run 'from syscall:openat select time, pid, comm, str(args.filename)'\n"
	"  weft explain 'from syscall:read group by comm select sum(args.count) as bytes'\n"
	"  weft list 'syscall:open*'\n"
	"  weft list -v tracepoint:sched:sched_switch\n"
	"  weft list /usr/bin/python3\n"
	"\n"
	"Exit status: 0 success, 1 failure while tracing, 2 bad command line, 3 the query has\n"
	"errors (each printed as FILE:LINE:COL with the line, a caret, and a fix), 4 the query\n"
	"was stopped by its CPU budget (weft run --cpu-budget), 141 weft run's standard output\n"
	"was closed (probes detached).\n"
	"\n"
	"Environment: WEFT_CACHE_DIR (compile cache; default /var/cache/weft for root),\n"
	"WEFT_CLANG (the clang to compile with), WEFT_AGGREGATOR, WEFT_SERVER_KEY, WEFT_KEY\n"
	"(defaults of the cluster clients' --to, --server-key, --key), WEFT_UPROBE_MULTI=0\n"
	"(attach wildcard uprobes one link per function, as on kernels before 6.6),\n"
	"WEFT_GRAPH_STORE (weft graph's default --graph-store).\n"
	"\n"
	"The language reference is docs/language.md; `weft help COMMAND` shows a command's\n"
	"options.\n";

static void log_sink(enum weft_log_level level, const char *msg)
{
	static const char *const names[] = { "error", "warning", "info", "debug" };

	fprintf(stderr, "weft: %s: %s\n", names[level], msg);
}

void tool_set_verbose(int level)
{
	weft_log_set_level(level >= 2 ? WEFT_LOG_DEBUG :
			   level == 1 ? WEFT_LOG_INFO :
					WEFT_LOG_WARN);
}

int tool_signals_block(bool hup)
{
	sigset_t mask;

	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	if (hup)
		sigaddset(&mask, SIGHUP);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	return signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
}

int tool_parse_pid(const char *s)
{
	char *end, path[64];
	long pid;
	struct stat st;

	errno = 0;
	pid = strtol(s, &end, 10);
	if (errno || *end || pid <= 0 || pid > 4194304) {
		fprintf(stderr, "weft: -p takes a process id, not '%s'\n", s);
		return -1;
	}
	snprintf(path, sizeof(path), "/proc/%ld", pid);
	if (stat(path, &st) != 0) {
		fprintf(stderr, "weft: no process with id %ld\n", pid);
		return -1;
	}
	return (int)pid;
}

int tool_parse_max_age(const char *opt, const char *arg, uint64_t *ns)
{
	if (units_duration_parse(arg, 0, ns) || !*ns || *ns > (uint64_t)INT64_MAX) {
		fprintf(stderr,
			"weft: %s takes a duration with its unit (30m, 12h, 7d, ...), not '%s'\n",
			opt, arg);
		return -1;
	}
	return 0;
}

int tool_parse_max_size(const char *opt, const char *arg, uint64_t *bytes)
{
	if (units_size_parse(arg, bytes) || !*bytes) {
		fprintf(stderr, "weft: %s takes a size (500MiB, 2G, ...), not '%s'\n", opt, arg);
		return -1;
	}
	return 0;
}

char *tool_read_query(const char *file, const char *arg, const char **name)
{
	FILE *f;
	char *buf = NULL;
	size_t len = 0, cap = 0;
	size_t n;
	char chunk[4096];

	*name = "query";
	if (!file) {
		if (!arg) {
			fprintf(stderr, "weft: no query given (a quoted argument, or -f FILE)\n");
			return NULL;
		}
		buf = strdup(arg);
		if (!buf)
			fprintf(stderr, "weft: out of memory\n");
		return buf;
	}
	if (arg) {
		fprintf(stderr,
			"weft: give the query either as an argument or with -f, not both\n");
		return NULL;
	}
	if (strcmp(file, "-") != 0) {
		char why[160];
		int rc;

		/* a named file must be a regular one of at most 1 MiB: a FIFO or a device is
		 * refused, never waited on (`-f -` reads a pipe) */
		rc = weft_file_read(file, WEFT_FILE_MAX_QUERY, &buf, &len, why, sizeof(why));
		if (rc) {
			fprintf(stderr, "weft: -f %s: %s%s\n", file, why,
				rc == -ENODEV ? " (give a pipe as -f -)" : "");
			return NULL;
		}
		goto out_check;
	}
	f = stdin;
	while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0) {
		if (len + n + 1 > cap) {
			char *nb;

			cap = (len + n + 1) * 2;
			if (cap > WEFT_FILE_MAX_QUERY) {
				fprintf(stderr, "weft: %s: a query file of over 1 MiB\n", file);
				goto fail;
			}
			nb = realloc(buf, cap);
			if (!nb)
				goto fail;
			buf = nb;
		}
		memcpy(buf + len, chunk, n);
		len += n;
	}
	if (ferror(f)) {
		fprintf(stderr, "weft: reading %s: %s\n", file, strerror(errno));
		goto fail;
	}
	if (!buf)
		buf = calloc(1, 1);
	else
		buf[len] = 0;
out_check:
	if (buf && memchr(buf, 0, len)) {
		fprintf(stderr, "weft: %s: not a text file\n", file);
		free(buf);
		return NULL;
	}
	*name = file;
	return buf;
fail:
	free(buf);
	return NULL;
}

static char **main_argv; /* as weft was started: tool_heap_hugepages() starts it again */

/*
 * Transparent huge pages for the heap of the commands that capture and store (agent,
 * aggregator, vm, and `weft run` of a graph query): a capture grows to its working set in its
 * first seconds (~170 MB at 20,000 requests a second under kernel edges), a page fault per
 * 4 KiB page, and in a paravirtualised guest a fault is dear; with 2 MiB pages
 * bench_graphcap took 536 faults instead of 42,387 and weft's CPU a request halved in a
 * just-started capture (docs/performance.md).  Where THP is "madvise" (Debian's default), glibc advises its heaps
 * only if the tunable glibc.malloc.hugetlb=1 was set when the process started, so weft
 * starts itself once more with it, then gives the environment back as it was (the traced
 * programs weft starts inherit the user's environment, not this).  WEFT_HUGEPAGES=0 turns
 * it off; THP "always" or "never", a tunable of the user's, or valgrind leave it alone.
 */
void tool_heap_hugepages(void)
{
	const char *mark = getenv("WEFT_HEAP_REEXEC"), *orig, *v, *pre;
	char mode[128] = "", *tun, *m, **argv = main_argv;
	static bool decided;
	FILE *f;

	if (decided) /* once a process: the second start calls it early (main), then again */
		return;
	decided = true;

	if (mark) { /* the second start: the environment back as the user gave it */
		if (mark[0] == '1')
			setenv("GLIBC_TUNABLES", mark + 1, 1);
		else
			unsetenv("GLIBC_TUNABLES");
		unsetenv("WEFT_HEAP_REEXEC");
		return;
	}
	v = getenv("WEFT_HUGEPAGES");
	orig = getenv("GLIBC_TUNABLES");
	pre = getenv("LD_PRELOAD");
	if ((v && strcmp(v, "0") == 0) || (orig && strstr(orig, "glibc.malloc.hugetlb")) ||
	    (pre && strstr(pre, "vgpreload")))
		return;
	f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "re");
	if (!f)
		return;
	if (!fgets(mode, sizeof(mode), f))
		mode[0] = 0;
	fclose(f);
	if (!strstr(mode, "[madvise]"))
		return;
	if (asprintf(&tun, "%s%sglibc.malloc.hugetlb=1", orig ? orig : "", orig ? ":" : "") < 0)
		return;
	if (asprintf(&m, "%s%s", orig ? "1" : "0", orig ? orig : "") < 0) {
		free(tun);
		return;
	}
	if (setenv("WEFT_HEAP_REEXEC", m, 1) == 0 && setenv("GLIBC_TUNABLES", tun, 1) == 0)
		execv("/proc/self/exe", argv);
	/* not started again: on as before, with 4 KiB pages */
	unsetenv("WEFT_HEAP_REEXEC");
	if (orig)
		setenv("GLIBC_TUNABLES", m + 1, 1);
	else
		unsetenv("GLIBC_TUNABLES");
	free(tun);
	free(m);
}

int main(int argc, char **argv)
{
	const char *cmd;
	char *hargv[3] = { NULL, "--help", NULL };

	main_argv = argv;
	/* `weft run` decides once it knows the query (an aggregation or a stream stays small,
	 * and one start more is a third of its time to the first event); a second start puts
	 * the environment back first of all */
	if (getenv("WEFT_HEAP_REEXEC") ||
	    (argc >= 2 && (strcmp(argv[1], "agent") == 0 || strcmp(argv[1], "aggregator") == 0 ||
			   strcmp(argv[1], "vm") == 0)))
		tool_heap_hugepages();
	weft_log_set_sink(log_sink);
	signal(SIGPIPE, SIG_IGN);
	/*
	 * Memory freed stays with the process for reuse (up to 64 MiB at the heap's top, and no
	 * allocation below 32 MiB gets pages of its own): a graph capture builds tables of a
	 * second's requests and frees them every second, and fresh pages are what it would pay
	 * for most (a page fault each, costly in a paravirtualised guest: 15 % of the agent's
	 * CPU at 20,000 requests a second on the development VM, docs/performance.md).  The
	 * cost: the process keeps its peak.
	 */
	mallopt(M_MMAP_THRESHOLD, 32 << 20);
	mallopt(M_TRIM_THRESHOLD, 64 << 20);
	if (argc < 2) {
		fputs(usage_text, stderr);
		return WEFT_EXIT_USAGE;
	}
	cmd = argv[1];
	if (strcmp(cmd, "-h") == 0 || strcmp(cmd, "--help") == 0 ||
	    (strcmp(cmd, "help") == 0 && argc == 2)) {
		fputs(usage_text, stdout);
		return WEFT_EXIT_OK;
	}
	if (strcmp(cmd, "help") == 0) {
		hargv[0] = argv[2];
		argc = 2;
		argv = hargv;
		cmd = argv[0];
	} else {
		argc -= 1;
		argv += 1;
	}
	if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0) {
		printf("weft %s\n", WEFT_VERSION);
		return WEFT_EXIT_OK;
	}
	/* the commands that always speak ZeroMQ: without libzmq (opened on first use,
	 * base/zmq_dl.h) they stop here with its reason, not on a misleading later error */
	if ((strcmp(cmd, "agent") == 0 || strcmp(cmd, "aggregator") == 0 ||
	     strcmp(cmd, "submit") == 0 || strcmp(cmd, "status") == 0 ||
	     strcmp(cmd, "cancel") == 0 || strcmp(cmd, "keygen") == 0) &&
	    !(argc >= 2 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) &&
	    weft_zmq_load() != 0)
		return WEFT_EXIT_FAIL; /* the reason is logged */
	if (strcmp(cmd, "explain") == 0)
		return cmd_explain(argc, argv);
	if (strcmp(cmd, "list") == 0)
		return cmd_list(argc, argv);
	if (strcmp(cmd, "run") == 0)
		return cmd_run(argc, argv);
	if (strcmp(cmd, "agent") == 0)
		return cmd_agent(argc, argv);
	if (strcmp(cmd, "aggregator") == 0)
		return cmd_aggregator(argc, argv);
	if (strcmp(cmd, "submit") == 0)
		return cmd_submit(argc, argv);
	if (strcmp(cmd, "status") == 0)
		return cmd_status(argc, argv);
	if (strcmp(cmd, "cancel") == 0)
		return cmd_cancel(argc, argv);
	if (strcmp(cmd, "keygen") == 0)
		return cmd_keygen(argc, argv);
	if (strcmp(cmd, "graph") == 0)
		return cmd_graph(argc, argv);
	if (strcmp(cmd, "vm") == 0)
		return cmd_vm(argc, argv);
	fprintf(stderr, "weft: unknown command '%s' (see `weft --help`)\n", cmd);
	return WEFT_EXIT_USAGE;
}
