// SPDX-License-Identifier: Apache-2.0
/*
 * `weft vm record`: the host query set of the VM analysis, run live with weft's own loader,
 * written as a recorded event stream (docs/vm.md, "Live on the host"), which `weft vm analyze`
 * then reads.  No compiler is needed beyond weft's: each query is compiled where it runs.
 *
 * How it works.  One `weft run --format json` child (this very executable, /proc/self/exe) per
 * query, since a union of probes must share its fields and these do not:
 *
 *   syscall:ioctl where args.cmd = 0xae80   KVM_RUN calls: the VMs (pid) and their vCPU threads
 *                                           (tid), found even where no kvm event fires
 *   tracepoint:sched:sched_switch           prev_pid, prev_state, next_pid, the comms
 *   tracepoint:sched:sched_wakeup           pid, target_cpu
 *   tracepoint:kvm:kvm_entry, kvm_exit, kvm_userspace_exit, kvm_hypercall,
 *   kvm_write_tsc_offset, kvm_nested_vmenter, kvm_nested_vmexit_inject
 *                                           their fields as the analysis reads them; a kvm
 *                                           tracepoint this kernel lacks (no KVM module) is
 *                                           left out and said so
 *
 * Each child's stream rows are read as they come (a poll loop over their stdout and stderr);
 * once every child has said "attached", the command after `--` (if any) is started, and the
 * recording ends when it exits, when `--for D` has passed (every query carries `for D`), or
 * on SIGINT/SIGTERM, which are passed on to the children so that they detach and flush.  Then
 * the rows become stream events (name from the query, time, cpu, pid, tid, and the other
 * columns as fields), sorted by time (stable: the children's clocks are all the kernel's
 * monotonic clock, so the merge is exact), and written as JSON lines (jansson).
 *
 * What it says.  The discovery on stderr: each process that called KVM_RUN (a VMM) with its
 * threads (vCPUs) and their calls.  Rows a child lost to a full ring buffer are never
 * silent: a warning on stderr, a comment line in the stream ("# lost: N rows") and a last
 * event "weft_lost" (fields.rows) that the analysis counts and reports as a warning.  Bounded:
 * at most VM_RECORD_MAX_BYTES of rows are held in all (the recording stops there, E_VM_LIMIT).
 * Limits: the children run one after another's attach, so events of the first seconds before
 * all attached are missing from some queries (the command starts only after all are in); a
 * sched_switch of every thread of the host is recorded (the analysis keeps the vCPUs').
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tools/weft.h"
#include "tools/weft_vm.h"
#include "vm/vm.h"

#define VM_RECORD_MAX_BYTES (1ULL << 30) /* rows held, all children together */
#define VM_RECORD_MAX_Q 12

const struct vm_rq vm_record_queries[] = {
	{ "sys_enter_ioctl", NULL,
	  "from syscall:ioctl where args.cmd = 0xae80 select time, cpu, pid, tid, comm, args.cmd as "
	  "cmd, args.fd as fd" },
	{ "sched_switch", NULL,
	  "from tracepoint:sched:sched_switch select time, cpu, pid, tid, args.prev_pid as "
	  "prev_pid, args.prev_state as prev_state, args.next_pid as next_pid, str(args.prev_comm) "
	  "as prev_comm, str(args.next_comm) as next_comm" },
	{ "sched_wakeup", NULL,
	  "from tracepoint:sched:sched_wakeup select time, cpu, pid, tid, args.pid as woken, "
	  "args.target_cpu as target_cpu" },
	{ "kvm_entry", "kvm/kvm_entry",
	  "from tracepoint:kvm:kvm_entry select time, cpu, pid, tid, args.vcpu_id as vcpu_id" },
	{ "kvm_exit", "kvm/kvm_exit",
	  "from tracepoint:kvm:kvm_exit select time, cpu, pid, tid, args.exit_reason as "
	  "exit_reason, args.isa as isa, args.vcpu_id as vcpu_id" },
	{ "kvm_userspace_exit", "kvm/kvm_userspace_exit",
	  "from tracepoint:kvm:kvm_userspace_exit select time, cpu, pid, tid, args.reason as "
	  "reason, args.errno as errno" },
	{ "kvm_hypercall", "kvm/kvm_hypercall",
	  "from tracepoint:kvm:kvm_hypercall select time, cpu, pid, tid, args.nr as nr, args.a0 as "
	  "a0" },
	{ "kvm_write_tsc_offset", "kvm/kvm_write_tsc_offset",
	  "from tracepoint:kvm:kvm_write_tsc_offset select time, cpu, pid, tid, args.vcpu_id as "
	  "vcpu_id, args.next_tsc_offset as next_tsc_offset" },
	{ "kvm_nested_vmenter", "kvm/kvm_nested_vmenter",
	  "from tracepoint:kvm:kvm_nested_vmenter select time, cpu, pid, tid, args.isa as isa" },
	{ "kvm_nested_vmexit_inject", "kvm/kvm_nested_vmexit_inject",
	  "from tracepoint:kvm:kvm_nested_vmexit_inject select time, cpu, pid, tid, args.exit_code "
	  "as exit_code, args.isa as isa" },
};
#define NRQ (sizeof(vm_record_queries) / sizeof(vm_record_queries[0]))
const size_t vm_record_nqueries = NRQ;

bool vm_rq_present(const struct vm_rq *q)
{
	char path[256];

	if (!q->tp)
		return true;
	snprintf(path, sizeof(path), "/sys/kernel/tracing/events/%s", q->tp);
	return access(path, F_OK) == 0;
}

static const char record_help[] =
	"Usage: weft vm record --output FILE [--for D] [OPTIONS] [-- CMD ARGS...]\n"
	"\n"
	"Records the host's side of the VM analysis live, with weft's own probes, as a\n"
	"recorded event stream for `weft vm analyze --host FILE`.  One `weft run` per query:\n"
	"  syscall:ioctl with cmd KVM_RUN (0xae80)   the VMMs and their vCPU threads\n"
	"  sched:sched_switch, sched:sched_wakeup    when vCPU threads run, wait, sleep\n"
	"  kvm:kvm_entry, kvm_exit, kvm_userspace_exit, kvm_hypercall,\n"
	"  kvm_write_tsc_offset, kvm_nested_vmenter, kvm_nested_vmexit_inject\n"
	"(a kvm tracepoint this kernel lacks is left out, and said so).  Once all are\n"
	"attached, CMD (if given) starts; the recording ends when CMD exits, when --for D\n"
	"has passed, or on Ctrl-C.  Then the events of all queries are merged by time\n"
	"and written, and the VMs found (processes that called KVM_RUN) and their vCPU\n"
	"threads are listed on stderr.\n"
	"\n"
	"Options:\n"
	"  -o, --output FILE     the stream to write ('-': standard output; CMD's standard\n"
	"                        output then goes to standard error)\n"
	"      --for D           stop after D (a weft duration: 10s, 1m, ...)\n"
	"      --ringbuf-size S  each query's ring buffer (weft run's option; default 4MiB):\n"
	"                        rows that find it full are counted, warned about on stderr\n"
	"                        and noted in the stream (a weft_lost event, which\n"
	"                        `weft vm analyze` reports as a WARNING)\n"
	"  -h, --help            this text\n"
	"\n"
	"Needs root (the probes are eBPF).  Example:\n"
	"  weft vm record -o host.jsonl --for 10s\n"
	"  weft vm analyze --host host.jsonl\n"
	"\n"
	"Exit status: 0 recorded, 1 a query failed to load or the recording failed (E_VM_LIMIT:\n"
	"more than 1 GiB of rows), 2 bad command line.\n";

struct child {
	const struct vm_rq *q;
	pid_t pid;
	int out, err; /* -1 once at EOF */
	char *buf; /* stdout */
	size_t len, cap;
	char errbuf[2048]; /* the last of stderr */
	size_t errlen;
	bool attached, early; /* early: ended before it attached */
	int status;
};

static volatile sig_atomic_t stop_signal;

static void on_signal(int sig)
{
	stop_signal = sig;
}

static int spawn(struct child *c, const char *self, const char *forclause, const char *ringbuf)
{
	int o[2], e[2];
	char query[1024];

	snprintf(query, sizeof(query), "%s%s", c->q->query, forclause);
	if (pipe2(o, O_CLOEXEC) || pipe2(e, O_CLOEXEC))
		return -1;
	c->pid = fork();
	if (c->pid < 0)
		return -1;
	if (c->pid == 0) {
		const char *argv[10];
		int n = 0, devnull = open("/dev/null", O_RDONLY);

		argv[n++] = "weft";
		argv[n++] = "run";
		argv[n++] = "--format";
		argv[n++] = "json";
		if (ringbuf) {
			argv[n++] = "--ringbuf-size";
			argv[n++] = ringbuf;
		}
		argv[n++] = query;
		argv[n] = NULL;
		if (devnull >= 0)
			dup2(devnull, 0);
		dup2(o[1], 1);
		dup2(e[1], 2);
		/* SIGINT from a terminal reaches us: we pass it on when the children are ready */
		setpgid(0, 0);
		prctl(PR_SET_PDEATHSIG, SIGINT); /* never outlives us, even killed */
		execv(self, (char *const *)argv);
		_exit(127);
	}
	close(o[1]);
	close(e[1]);
	c->out = o[0];
	c->err = e[0];
	return 0;
}

/* Reads what is there from one fd of c: 0, or -1 at EOF (fd closed). */
static int drain(struct child *c, bool isout, uint64_t *total)
{
	char tmp[65536];
	int fd = isout ? c->out : c->err;
	ssize_t n = read(fd, tmp, sizeof(tmp));

	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return 0;
	if (n <= 0) {
		close(fd);
		if (isout)
			c->out = -1;
		else
			c->err = -1;
		return -1;
	}
	if (isout) {
		if (c->len + (size_t)n > c->cap) {
			size_t ncap = (c->len + (size_t)n) * 2;
			char *b = realloc(c->buf, ncap);

			if (!b)
				return -2;
			c->buf = b;
			c->cap = ncap;
		}
		memcpy(c->buf + c->len, tmp, (size_t)n);
		c->len += (size_t)n;
		*total += (uint64_t)n;
	} else {
		/* keep the last bytes; "attached" is a whole line weft prints once */
		if ((size_t)n >= sizeof(c->errbuf) - 1) {
			memcpy(c->errbuf, tmp + n - (sizeof(c->errbuf) - 1), sizeof(c->errbuf) - 1);
			c->errlen = sizeof(c->errbuf) - 1;
		} else {
			if (c->errlen + (size_t)n >= sizeof(c->errbuf)) {
				size_t drop = c->errlen + (size_t)n - (sizeof(c->errbuf) - 1);

				memmove(c->errbuf, c->errbuf + drop, c->errlen - drop);
				c->errlen -= drop;
			}
			memcpy(c->errbuf + c->errlen, tmp, (size_t)n);
			c->errlen += (size_t)n;
		}
		c->errbuf[c->errlen] = 0;
		if (strstr(c->errbuf, "weft: attached"))
			c->attached = true;
	}
	return 0;
}

static int cmp_ev(const void *a, const void *b)
{
	const struct vm_rec_ev *x = a, *y = b;

	if (x->time != y->time)
		return x->time < y->time ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

json_t *vm_record_row_event(const char *name, json_t *row, uint64_t *lost)
{
	const char *type = json_string_value(json_object_get(row, "type"));
	json_t *o, *fields;
	const char *key;
	json_t *v;

	if (type && strcmp(type, "end") == 0) {
		json_object_foreach(json_object_get(row, "lost"), key, v)
		{
			if (json_is_integer(v) && json_integer_value(v) > 0)
				*lost += (uint64_t)json_integer_value(v);
		}
		return NULL;
	}
	if (!type || strcmp(type, "row") != 0 || !json_is_integer(json_object_get(row, "time")))
		return NULL;
	fields = json_object();
	o = json_pack("{s:O, s:O, s:s, s:O, s:O}", "time", json_object_get(row, "time"), "cpu",
		      json_object_get(row, "cpu"), "name", name, "tid", json_object_get(row, "tid"),
		      "pid", json_object_get(row, "pid"));
	if (!o || !fields) {
		json_decref(o);
		json_decref(fields);
		return NULL;
	}
	json_object_foreach(row, key, v)
	{
		if (!strcmp(key, "type") || !strcmp(key, "time") || !strcmp(key, "cpu") ||
		    !strcmp(key, "pid") || !strcmp(key, "tid") || !strcmp(key, "comm"))
			continue;
		/* sched_wakeup's woken thread: `pid` is the waker's built-in */
		json_object_set(fields, strcmp(key, "woken") == 0 ? "pid" : key, v);
	}
	if (json_object_get(row, "comm"))
		json_object_set(o, "comm", json_object_get(row, "comm"));
	json_object_set_new(o, "fields", fields);
	return o;
}

void vm_record_discovery(const struct vm_rec_ev *ev, size_t n)
{
	struct thr {
		int64_t pid, tid;
		uint64_t runs;
		char comm[32];
	} *t = NULL;
	size_t nt = 0, cap = 0;

	for (size_t i = 0; i < n; i++) {
		json_t *o = ev[i].o;
		int64_t pid, tid;
		size_t k;

		if (strcmp(json_string_value(json_object_get(o, "name")), "sys_enter_ioctl") != 0)
			continue;
		pid = json_integer_value(json_object_get(o, "pid"));
		tid = json_integer_value(json_object_get(o, "tid"));
		for (k = 0; k < nt && t[k].tid != tid; k++)
			;
		if (k == nt) {
			if (nt == cap) {
				size_t ncap = cap ? cap * 2 : 16;
				struct thr *nt2 = realloc(t, ncap * sizeof(*t));

				if (!nt2)
					break;
				t = nt2;
				cap = ncap;
			}
			t[nt] = (struct thr){ .pid = pid, .tid = tid };
			snprintf(t[nt].comm, sizeof(t[nt].comm), "%s",
				 json_string_value(json_object_get(o, "comm")) ?: "?");
			nt++;
		}
		t[k].runs++;
	}
	if (!nt)
		fputs("weft vm: no process called KVM_RUN: no VM ran while recording\n", stderr);
	for (size_t i = 0; i < nt; i++) {
		bool first = true;

		for (size_t k = 0; k < i; k++)
			first &= t[k].pid != t[i].pid;
		if (first)
			fprintf(stderr, "weft vm: VMM pid %" PRId64 "\n", t[i].pid);
		fprintf(stderr,
			"weft vm:   vCPU thread %" PRId64 " (%s): %" PRIu64 " KVM_RUN calls\n",
			t[i].tid, t[i].comm, t[i].runs);
	}
	free(t);
}

int vm_record_write(FILE *out, struct vm_rec_ev *ev, size_t nev, size_t nqueries, uint64_t lost)
{
	if (nev)
		qsort(ev, nev, sizeof(*ev), cmp_ev);
	fprintf(out, "# weft vm record: %zu events from %zu queries\n", nev, nqueries);
	if (lost)
		fprintf(out,
			"# lost: %" PRIu64 " rows (full ring buffers): states around them may "
			"be wrong\n",
			lost);
	for (size_t i = 0; i < nev; i++) {
		/* the comm is the discovery's, not the stream's: out while dumping */
		json_t *comm = json_object_get(ev[i].o, "comm");
		int rc;

		if (comm) {
			json_incref(comm);
			json_object_del(ev[i].o, "comm");
		}
		rc = json_dumpf(ev[i].o, out, JSON_COMPACT | JSON_PRESERVE_ORDER);
		if (comm)
			json_object_set_new(ev[i].o, "comm", comm);
		if (rc || fputc('\n', out) < 0)
			return -EIO;
	}
	if (lost) /* an event too, which the analysis counts and reports (VM_LOST_EVENT) */
		fprintf(out,
			"{\"time\":%" PRId64
			",\"cpu\":0,\"name\":\"%s\",\"fields\":{\"rows\":%" PRIu64 "}}\n",
			nev ? ev[nev - 1].time : 0, VM_LOST_EVENT, lost);
	return ferror(out) ? -EIO : 0;
}

int vm_record_cmd(int argc, char **argv)
{
	enum { OPT_FOR = 256, OPT_RINGBUF };
	static const struct option longopts[] = {
		{ "output", required_argument, NULL, 'o' },
		{ "for", required_argument, NULL, OPT_FOR },
		{ "ringbuf-size", required_argument, NULL, OPT_RINGBUF },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct child ch[VM_RECORD_MAX_Q];
	const char *output = NULL, *dur = NULL, *ringbuf = NULL;
	char forclause[80] = "", self[4096];
	struct sigaction sa = { .sa_handler = on_signal }, old_int, old_term;
	struct vm_rec_ev *ev = NULL;
	size_t nch = 0, nev = 0, capev = 0;
	uint64_t total = 0, lost = 0;
	pid_t cmd = -1;
	bool started = false, failed = false, over = false;
	int c, rc = WEFT_EXIT_FAIL, cmd_status = 0;
	ssize_t sl;
	FILE *out;

	optind = 1;
	while ((c = getopt_long(argc, argv, "+o:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'o':
			output = optarg;
			break;
		case OPT_FOR:
			dur = optarg;
			break;
		case OPT_RINGBUF:
			ringbuf = optarg;
			break;
		case 'h':
			fputs(record_help, stdout);
			return WEFT_EXIT_OK;
		default:
			fputs("weft vm record: see `weft vm record --help`\n", stderr);
			return WEFT_EXIT_USAGE;
		}
	}
	if (!output) {
		fputs("weft vm record: no --output FILE ('-' for standard output)\n", stderr);
		return WEFT_EXIT_USAGE;
	}
	if (dur) {
		/* the compiler checks it; only characters of a duration reach the query text */
		if (!*dur || strlen(dur) > 32 || strspn(dur, "0123456789.smhdu") != strlen(dur)) {
			fprintf(stderr,
				"weft vm record: --for takes a duration (10s, 1m), not '%s'\n",
				dur);
			return WEFT_EXIT_USAGE;
		}
		snprintf(forclause, sizeof(forclause), " for %s", dur);
	}
	if (optind == argc && !dur)
		fputs("weft vm record: recording until Ctrl-C (no --for, no command)\n", stderr);
	sl = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (sl <= 0) {
		fprintf(stderr, "weft vm record: /proc/self/exe: %s\n", strerror(errno));
		return WEFT_EXIT_FAIL;
	}
	self[sl] = 0;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, &old_int);
	sigaction(SIGTERM, &sa, &old_term);
	memset(ch, 0, sizeof(ch));
	for (size_t i = 0; i < NRQ; i++) {
		if (!vm_rq_present(&vm_record_queries[i])) {
			fprintf(stderr,
				"weft vm record: no tracepoint %s on this kernel (no KVM "
				"module?): left out\n",
				vm_record_queries[i].tp);
			continue;
		}
		ch[nch].q = &vm_record_queries[i];
		ch[nch].out = ch[nch].err = -1;
		if (spawn(&ch[nch], self, forclause, ringbuf)) {
			fprintf(stderr, "weft vm record: starting weft run: %s\n", strerror(errno));
			failed = true;
			break;
		}
		nch++;
	}
	for (;;) {
		struct pollfd pfd[2 * VM_RECORD_MAX_Q];
		size_t map[2 * VM_RECORD_MAX_Q];
		int np = 0, all = 1;

		for (size_t i = 0; i < nch; i++) {
			if (ch[i].out >= 0) {
				map[np] = 2 * i;
				pfd[np++] = (struct pollfd){ .fd = ch[i].out, .events = POLLIN };
			}
			if (ch[i].err >= 0) {
				map[np] = 2 * i + 1;
				pfd[np++] = (struct pollfd){ .fd = ch[i].err, .events = POLLIN };
			}
			all &= ch[i].attached;
		}
		if (np == 0)
			break;
		if (!started && all && !failed && !stop_signal) {
			started = true;
			fprintf(stderr, "weft vm record: %zu queries attached; recording\n", nch);
			if (optind < argc) {
				fflush(NULL);
				cmd = fork();
				if (cmd == 0) {
					sigaction(SIGINT, &old_int, NULL);
					sigaction(SIGTERM, &old_term, NULL);
					if (strcmp(output, "-") == 0)
						dup2(2, 1); /* the stream owns standard output */
					execvp(argv[optind], argv + optind);
					fprintf(stderr, "weft vm record: %s: %s\n", argv[optind],
						strerror(errno));
					_exit(127);
				}
			}
		}
		if (cmd > 0 && waitpid(cmd, &cmd_status, WNOHANG) == cmd) {
			cmd = -1;
			stop_signal = SIGINT; /* the command is done: so is the recording */
		}
		if (stop_signal || failed || over) {
			for (size_t i = 0; i < nch; i++)
				if (ch[i].pid > 0)
					kill(ch[i].pid, SIGINT);
			if (cmd > 0)
				kill(cmd, SIGTERM);
		}
		if (poll(pfd, (nfds_t)np, 200) < 0 && errno != EINTR)
			break;
		for (int k = 0; k < np; k++) {
			struct child *cc = &ch[map[k] / 2];

			if (!(pfd[k].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			if (drain(cc, map[k] % 2 == 0, &total) == -2 || total > VM_RECORD_MAX_BYTES)
				over = true;
		}
		/* a child that ended before it attached failed */
		for (size_t i = 0; i < nch; i++) {
			if (ch[i].pid > 0 &&
			    waitpid(ch[i].pid, &ch[i].status, WNOHANG) == ch[i].pid) {
				ch[i].pid = 0;
				if (!ch[i].attached && !stop_signal && WIFEXITED(ch[i].status) &&
				    WEXITSTATUS(ch[i].status) != 0) {
					ch[i].early = true; /* said once its stderr is all read */
					failed = true;
				}
			}
		}
	}
	for (size_t i = 0; i < nch; i++) {
		if (ch[i].pid > 0)
			waitpid(ch[i].pid, &ch[i].status, 0);
		if (ch[i].early)
			fprintf(stderr, "weft vm record: the %s query failed:\n%s", ch[i].q->name,
				ch[i].errbuf);
		else if (WIFEXITED(ch[i].status) && WEXITSTATUS(ch[i].status) != 0 && !failed) {
			fprintf(stderr, "weft vm record: the %s query ended with status %d:\n%s",
				ch[i].q->name, WEXITSTATUS(ch[i].status), ch[i].errbuf);
			failed = true;
		}
	}
	if (cmd > 0)
		waitpid(cmd, &cmd_status, 0);
	sigaction(SIGINT, &old_int, NULL);
	sigaction(SIGTERM, &old_term, NULL);
	if (over) {
		fprintf(stderr, "weft vm record: E_VM_LIMIT: more than %llu bytes of rows\n",
			(unsigned long long)VM_RECORD_MAX_BYTES);
		failed = true;
	}
	if (failed)
		goto out;
	for (size_t i = 0; i < nch && !failed; i++) {
		char *p = ch[i].buf, *end = ch[i].buf + ch[i].len;

		while (p && p < end) {
			char *nl = memchr(p, '\n', (size_t)(end - p));
			size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
			json_t *row = json_loadb(p, len, 0, NULL), *o;

			p = nl ? nl + 1 : end;
			if (!row)
				continue;
			o = vm_record_row_event(ch[i].q->name, row, &lost);
			json_decref(row);
			if (!o)
				continue;
			if (nev == capev) {
				size_t ncap = capev ? capev * 2 : 4096;
				struct vm_rec_ev *n2 = realloc(ev, ncap * sizeof(*ev));

				if (!n2) {
					json_decref(o);
					fputs("weft vm record: E_VM_NOMEM: out of memory\n",
					      stderr);
					failed = true;
					break;
				}
				ev = n2;
				capev = ncap;
			}
			ev[nev] =
				(struct vm_rec_ev){ json_integer_value(json_object_get(o, "time")),
						    nev, o };
			nev++;
		}
		free(ch[i].buf);
		ch[i].buf = NULL;
	}
	if (failed)
		goto out;
	out = strcmp(output, "-") == 0 ? stdout : fopen(output, "w");
	if (!out) {
		fprintf(stderr, "weft vm record: %s: %s\n", output, strerror(errno));
		goto out;
	}
	if (nev)
		qsort(ev, nev, sizeof(*ev), cmp_ev);
	vm_record_discovery(ev, nev);
	if (vm_record_write(out, ev, nev, nch, lost) ||
	    (out == stdout ? fflush(out) : fclose(out)) != 0) {
		fprintf(stderr, "weft vm record: writing %s: %s\n", output, strerror(errno));
		goto out;
	}
	if (lost)
		fprintf(stderr,
			"weft vm record: warning: %" PRIu64 " rows lost to full ring buffers (a "
			"larger --ringbuf-size)\n",
			lost);
	fprintf(stderr, "weft vm record: %zu events written to %s\n", nev, output);
	rc = WEFT_EXIT_OK;
out:
	for (size_t i = 0; i < nch; i++)
		free(ch[i].buf);
	for (size_t i = 0; i < nev; i++)
		json_decref(ev[i].o);
	free(ev);
	return rc;
}
