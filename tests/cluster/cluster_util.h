/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Shared harness of the multi-process cluster tests (tests/cluster/test_cluster_*.c): real
 * `weft aggregator`, `weft agent`, `weft submit`, `status` and `cancel` processes (env
 * WEFT_BIN) talking real CURVE-secured ZeroMQ over loopback and over veth pairs into network
 * namespaces that the test makes and removes.  What must hold for these tests to be honest
 * and harmless:
 *
 *  - Counts are exact: every query filters on the comm of a workload copied under a name
 *    unique to this test process (`wlc<pid>...`, wl_syscalls under another file name), so
 *    nothing else on the machine can add to a count, and each workload makes a known number
 *    of getppid() calls.  Results are read with --format json; a window's latest revision is
 *    its answer.  Nothing is asserted about timing beyond the order of events.
 *  - Every process the harness starts is recorded, gets PR_SET_PDEATHSIG (a test killed by
 *    ctest's timeout takes its daemons with it), and is stopped by pid in the teardown:
 *    SIGTERM, then SIGKILL.  Never by name.
 *  - Daemons write stdout and stderr to files in the test's directory (never a pipe that
 *    nobody reads, which would stall them); the tests wait for log lines in those files.
 *  - Network namespaces are `weft-ns-<pid>-<k>`, veths `wft<pid>r<k>` / `wft<pid>n<k>`, with
 *    10.201.X.0/24 addresses that exist only on those veths; cl_net_sweep() removes those
 *    whose owning test process is gone, so a crashed run leaves nothing for the next.  The
 *    `ip` commands, and redis-server in a namespace, are tests/netns_util.h's.
 *  - On failure the teardown prints the tail of every log and keeps the directory (so does
 *    WEFT_CLUSTER_KEEP=1 on success).
 *
 * Header-only (static inline), like tests/runtime/run_util.h which it builds on.  Include
 * <cmocka.h> first: the checking helpers fail the test.
 */
#ifndef WEFT_TEST_CLUSTER_UTIL_H
#define WEFT_TEST_CLUSTER_UTIL_H

#include <arpa/inet.h>
#include <dirent.h>
#include <ftw.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <zmq.h>

#include "agent/wire.h"
#include "tests/netns_util.h"
#include "tests/runtime/run_util.h"

#define CL_MAX_PROCS 48
#define CL_WAIT_MS 20000 /* no single step of these tests comes near it */
#define CL_NET_MAX 4

/* Polls `cond` every 50 ms until it holds or timeout_ms pass; the value is whether it held. */
#define CL_WAIT(cond, timeout_ms)                                     \
	({                                                            \
		uint64_t _end = wr_now_ms() + (uint64_t)(timeout_ms); \
		bool _ok;                                             \
		while (!(_ok = (cond)) && wr_now_ms() < _end)         \
			wr_sleep_ms(50);                              \
		_ok;                                                  \
	})

/* ------------------------------------------------------------------------ processes */

struct cl_proc {
	pid_t pid;
	int status; /* exit code, 128 + signal; -1 while running */
	char name[40];
	char out[PATH_MAX], err[PATH_MAX];
};

struct cl {
	char dir[64]; /* this test's directory: keys, stores, logs, workloads */
	char tag[16]; /* "wlc<pid>": the prefix of this process's workload comms */
	int port; /* the aggregator's port */
	char endpoint[96]; /* where clients connect */
	char client_server[32]; /* the aggregator clients talk to: its DIR/NAME.pub ("agg") */
	char agent_server[32]; /* the aggregator agents connect to ("agg") */
	struct cl_proc procs[CL_MAX_PROCS];
	int nprocs;
	bool passed; /* set by a test at its end: the teardown keeps the logs otherwise */
	int agg_nofile; /* > 0: aggregators start with RLIMIT_NOFILE soft = hard = this */
};

/* "DIR/NAME" in one of eight static buffers. */
static inline const char *cl_path(const struct cl *cl, const char *name)
{
	static char paths[8][PATH_MAX];
	static int next;
	char *p = paths[next++ % 8];

	snprintf(p, PATH_MAX, "%s/%s", cl->dir, name);
	return p;
}

/* DIR/NAME.pub: the public key of aggregator NAME. */
static inline const char *cl_pub(const struct cl *cl, const char *name)
{
	char file[64];

	snprintf(file, sizeof(file), "%s.pub", name);
	return cl_path(cl, file);
}

/* The whole file as a NUL-terminated malloc'd string ("" if it does not exist). */
static inline char *cl_slurp(const char *path)
{
	struct wr_buf b = { 0 };
	char buf[65536];
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	wr_buf_add(&b, "", 0);
	if (fd < 0)
		return b.p;
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		wr_buf_add(&b, buf, (size_t)n);
	close(fd);
	return b.p;
}

/* How many times needle occurs in the file. */
static inline int cl_file_count(const char *path, const char *needle)
{
	char *s = cl_slurp(path), *p = s;
	int n = 0;

	while ((p = strstr(p, needle))) {
		n++;
		p += strlen(needle);
	}
	free(s);
	return n;
}

static inline bool cl_file_has(const char *path, const char *needle)
{
	return cl_file_count(path, needle) > 0;
}

/* Reaps p if it has exited; true if it is still running. */
static inline bool cl_alive(struct cl_proc *p)
{
	int ws;

	if (p->pid <= 0 || p->status >= 0)
		return false;
	if (waitpid(p->pid, &ws, WNOHANG) != p->pid)
		return true;
	p->status = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
	return false;
}

/* Waits up to timeout_ms for p to exit by itself: its status, or -ETIMEDOUT. */
static inline int cl_wait_exit(struct cl_proc *p, int timeout_ms)
{
	if (!CL_WAIT(!cl_alive(p), timeout_ms))
		return -ETIMEDOUT;
	return p->status;
}

/* Sends sig, waits up to timeout_ms, then SIGKILL; returns its status. */
static inline int cl_stop(struct cl_proc *p, int sig, int timeout_ms)
{
	if (!cl_alive(p))
		return p->status;
	kill(p->pid, sig);
	if (cl_wait_exit(p, timeout_ms) >= 0)
		return p->status;
	kill(p->pid, SIGKILL);
	cl_wait_exit(p, 10000);
	return p->status;
}

/*
 * Starts argv (PATH searched), in network namespace `netns` if not NULL (through
 * `ip netns exec`, which execs in place: the pid is the command's), with stdin from
 * /dev/null and stdout, stderr into DIR/NAME.out, DIR/NAME.err.  NAME must be new.
 */
static inline struct cl_proc *cl_spawn(struct cl *cl, const char *name, const char *netns,
				       char *const argv[])
{
	struct cl_proc *p;
	char *full[WR_MAX_ARGS + 4];
	pid_t parent = getpid();
	int n = 0;

	assert_true(cl->nprocs < CL_MAX_PROCS);
	p = &cl->procs[cl->nprocs++];
	memset(p, 0, sizeof(*p));
	p->status = -1;
	snprintf(p->name, sizeof(p->name), "%s", name);
	{
		char dir[sizeof(cl->dir)]; /* p lives inside cl: no overlapping snprintf */

		memcpy(dir, cl->dir, sizeof(dir));
		snprintf(p->out, sizeof(p->out), "%s/%s.out", dir, name);
		snprintf(p->err, sizeof(p->err), "%s/%s.err", dir, name);
	}
	if (netns) {
		full[n++] = (char *)"ip";
		full[n++] = (char *)"netns";
		full[n++] = (char *)"exec";
		full[n++] = (char *)netns;
	}
	for (int i = 0; argv[i] && n < WR_MAX_ARGS + 3; i++)
		full[n++] = argv[i];
	full[n] = NULL;
	/*
	 * The logs are emptied here, before the fork: a name used twice (two `submit`s in one
	 * test) must not show the parent the last process's words before the new one has
	 * opened them (cl_submit() once read the previous query's id so, and the test ran its
	 * workload before the agents had the new query).
	 */
	for (int k = 0; k < 2; k++) {
		int fd = open(k ? p->err : p->out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

		assert_true(fd >= 0);
		close(fd);
	}
	p->pid = fork();
	assert_true(p->pid >= 0);
	if (p->pid == 0) {
		int in = open("/dev/null", O_RDONLY);
		int out = open(p->out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		int err = open(p->err, O_WRONLY | O_CREAT | O_TRUNC, 0644);

		if (in < 0 || out < 0 || err < 0)
			_exit(127);
		dup2(in, 0);
		dup2(out, 1);
		dup2(err, 2);
		/* dies with the test, whatever kills it */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(127);
		execvp(full[0], full);
		fprintf(stderr, "cannot run %s: %s\n", full[0], strerror(errno));
		_exit(127);
	}
	return p;
}

/* Waits for needle in p's stderr: 0, -ETIMEDOUT, or -EPIPE if p exited without it. */
static inline int cl_wait_log(struct cl_proc *p, const char *needle, int timeout_ms)
{
	uint64_t end = wr_now_ms() + (uint64_t)timeout_ms;

	for (;;) {
		bool alive = cl_alive(p);

		if (cl_file_has(p->err, needle))
			return 0;
		if (!alive)
			return -EPIPE;
		if (wr_now_ms() >= end)
			return -ETIMEDOUT;
		wr_sleep_ms(50);
	}
}

/* Same, failing the test with the log if it does not come. */
static inline void cl_expect_log(struct cl_proc *p, const char *needle, int timeout_ms)
{
	int rc = cl_wait_log(p, needle, timeout_ms);

	if (rc) {
		char *log = cl_slurp(p->err);

		fail_msg("%s: no '%s' on its stderr (%s); it says:\n%s", p->name, needle,
			 rc == -EPIPE ? "it exited" : "timed out", log);
	}
}

/* Runs `weft ARGS...` (NULL-terminated) to its end with pipes: its status; output in p. */
static inline int cl_weft_argv(struct wr_proc *p, char *const args[])
{
	char *argv[WR_MAX_ARGS];
	int n = 0, rc;

	argv[n++] = getenv("WEFT_BIN");
	for (int i = 0; args[i] && n < WR_MAX_ARGS - 1; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	rc = wr_start(p, argv);
	return rc ? rc : wr_finish(p, 30000);
}

#define cl_weft(p, ...) cl_weft_argv((p), (char *const[]){ __VA_ARGS__, NULL })

/* ------------------------------------------------------------------------ set-up */

/* A port outside the ephemeral range (no outgoing connection can hold it), free now and
 * not returned before by this process. */
static inline int cl_free_port(void)
{
	static unsigned int next;

	for (int i = 0; i < 2000; i++) {
		unsigned int k = next++;
		int port = 20000 + (int)(((unsigned)getpid() * 13u + k * 7919u) % 12000u);
		struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
		int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), ok;

		assert_true(s >= 0);
		ok = bind(s, (struct sockaddr *)&a, sizeof(a)) == 0;
		close(s);
		if (ok)
			return port;
	}
	fail_msg("no free port");
	return -1;
}

/*
 * `weft keygen -o DIR --role ROLE NAME`: DIR/NAME.key and DIR/NAME.pub; with allow, its
 * printed allow-list line goes into DIR/allow (one allow-list for every aggregator of the
 * test: each key has its role, which is what matters).
 */
static inline void cl_keygen(struct cl *cl, const char *role, const char *name, bool allow)
{
	struct wr_proc p;
	int rc = cl_weft(&p, (char *)"keygen", (char *)"-o", cl->dir, (char *)"--role",
			 (char *)role, (char *)name);

	if (rc != 0) {
		wr_dump(&p, "weft keygen");
		fail_msg("weft keygen %s: status %d", name, rc);
	}
	if (allow) {
		FILE *f = fopen(cl_path(cl, "allow"), "a");

		assert_non_null(f);
		fputs(p.out.p, f);
		fclose(f);
	}
	wr_free(&p);
}

static inline int cl_rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

/*
 * A fresh directory, a port, the aggregator's key pair ("agg") and a client's ("me", allowed).
 * The aggregator is started by the test (cl_aggregator) once it has made its other keys.
 */
static inline void cl_init(struct cl *cl)
{
	memset(cl, 0, sizeof(*cl));
	snprintf(cl->dir, sizeof(cl->dir), "/tmp/weft-cluster-XXXXXX");
	assert_non_null(mkdtemp(cl->dir));
	snprintf(cl->tag, sizeof(cl->tag), "wlc%d", (int)getpid());
	cl->port = cl_free_port();
	snprintf(cl->endpoint, sizeof(cl->endpoint), "tcp://127.0.0.1:%d", cl->port);
	snprintf(cl->client_server, sizeof(cl->client_server), "agg");
	snprintf(cl->agent_server, sizeof(cl->agent_server), "agg");
	cl_keygen(cl, "aggregator", "agg", false);
	cl_keygen(cl, "client", "me", true);
}

/* Prints the last `lines` lines of a file (what a failed test needs to be understood). */
static inline void cl_dump_tail(const char *path, int lines)
{
	char *s = cl_slurp(path);
	char *p = s + strlen(s);
	int n = 0;

	while (p > s && n <= lines)
		if (*--p == '\n')
			n++;
	if (*s)
		fprintf(stderr, "--- %s:\n%s%s\n", path, p == s ? "" : "...", p == s ? p : p + 1);
	free(s);
}

/* Stops every process (all at once: SIGTERM, then SIGKILL after 4 s), keeps the directory
 * and prints the logs if the test did not pass, else removes it. */
static inline void cl_fini(struct cl *cl)
{
	uint64_t end;

	for (int i = cl->nprocs - 1; i >= 0; i--) {
		if (cl_alive(&cl->procs[i])) {
			kill(cl->procs[i].pid, SIGCONT); /* a stopped one must see the SIGTERM */
			kill(cl->procs[i].pid, SIGTERM);
		}
	}
	end = wr_now_ms() + 4000;
	for (int i = 0; i < cl->nprocs; i++) {
		while (cl_alive(&cl->procs[i]) && wr_now_ms() < end)
			wr_sleep_ms(20);
		if (cl_alive(&cl->procs[i])) {
			kill(cl->procs[i].pid, SIGKILL);
			cl_wait_exit(&cl->procs[i], 10000);
		}
	}
	if (!cl->passed)
		for (int i = 0; i < cl->nprocs; i++)
			cl_dump_tail(cl->procs[i].err, 40);
	if (!cl->passed || getenv("WEFT_CLUSTER_KEEP")) {
		fprintf(stderr, "--- kept %s\n", cl->dir);
	} else if (cl->dir[0]) {
		nftw(cl->dir, cl_rm_one, 16, FTW_DEPTH | FTW_PHYS);
	}
	cl->nprocs = 0;
}

/* cmocka set-up of a test with a cluster of its own (*state: a struct cl), made by cl_init()
 * where the test can run (wr_ready()); a test that cannot sees cl->dir empty. */
static inline int cl_test_setup(void **state)
{
	struct cl *cl = calloc(1, sizeof(*cl));

	if (!cl)
		return -1;
	if (wr_ready())
		cl_init(cl);
	*state = cl;
	return 0;
}

/* Its teardown: cl_fini() of what cl_init() made. */
static inline int cl_test_teardown(void **state)
{
	struct cl *cl = *state;

	if (cl->dir[0])
		cl_fini(cl);
	free(cl);
	return 0;
}

/*
 * `weft aggregator` named NAME (its key DIR/NAME.key, made here unless it exists; store
 * DIR/NAME.sqlite) listening on `listen` (NULL: the test's endpoint), with short lateness
 * and heartbeats to keep the tests fast; `extra` (NULL-terminated, may be NULL) is appended
 * and may override them; under `prlimit --nofile=N:N` when cl->agg_nofile is N.  Returns once
 * it listens.
 */
static inline struct cl_proc *cl_aggregator(struct cl *cl, const char *name, const char *listen,
					    const char *log, char *const extra[])
{
	char key[PATH_MAX], store[PATH_MAX], keyname[64], nofile[48];
	char *argv[WR_MAX_ARGS];
	struct cl_proc *p;
	int n = 0;

	snprintf(keyname, sizeof(keyname), "%s.key", name);
	if (access(cl_path(cl, keyname), F_OK) != 0)
		cl_keygen(cl, "aggregator", name, false);
	snprintf(key, sizeof(key), "%s/%s.key", cl->dir, name);
	snprintf(store, sizeof(store), "%s/%s.sqlite", cl->dir, name);
	if (cl->agg_nofile > 0) {
		/* prlimit sets its own limits and execs the command: the pid stays weft's */
		snprintf(nofile, sizeof(nofile), "--nofile=%d:%d", cl->agg_nofile, cl->agg_nofile);
		argv[n++] = (char *)"prlimit";
		argv[n++] = nofile;
		argv[n++] = (char *)"--";
	}
	argv[n++] = getenv("WEFT_BIN");
	argv[n++] = (char *)"aggregator";
	argv[n++] = (char *)"--listen";
	argv[n++] = (char *)(listen ? listen : cl->endpoint);
	argv[n++] = (char *)"--key";
	argv[n++] = key;
	argv[n++] = (char *)"--allow";
	argv[n++] = (char *)cl_path(cl, "allow");
	argv[n++] = (char *)"--store";
	argv[n++] = store;
	argv[n++] = (char *)"--name";
	argv[n++] = (char *)name;
	argv[n++] = (char *)"--lateness";
	argv[n++] = (char *)"500ms";
	argv[n++] = (char *)"--heartbeat";
	argv[n++] = (char *)"200ms";
	argv[n++] = (char *)"-v";
	for (int i = 0; extra && extra[i] && n < WR_MAX_ARGS - 1; i++)
		argv[n++] = extra[i];
	argv[n] = NULL;
	p = cl_spawn(cl, log ? log : name, NULL, argv);
	cl_expect_log(p, "listening on", CL_WAIT_MS);
	return p;
}

/* The inode of a network namespace: of /proc/PID/ns/net, or of /run/netns/NAME. */
static inline ino_t cl_netns_ino(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 ? st.st_ino : 0;
}

/*
 * `weft agent --host HOST` (key DIR/HOST.key, which the test made and allowed, or not;
 * trusting the key of aggregator cl->agent_server), logging into DIR/LOG.err, in network
 * namespace `netns` if not NULL (checked: the agent's /proc/PID/ns/net is that namespace),
 * connecting to `endpoint` (NULL: the test's), with the options `extra` (NULL-terminated;
 * NULL: none) after the others.  With wait, returns once it is connected (welcomed by its
 * aggregator).
 */
static inline struct cl_proc *cl_agent_with(struct cl *cl, const char *host, const char *log,
					    const char *netns, const char *endpoint, bool wait,
					    char *const *extra)
{
	char key[PATH_MAX];
	char *argv[WR_MAX_ARGS];
	struct cl_proc *p;
	int n = 0;

	snprintf(key, sizeof(key), "%s/%s.key", cl->dir, host);
	argv[n++] = getenv("WEFT_BIN");
	argv[n++] = (char *)"agent";
	argv[n++] = (char *)"--connect";
	argv[n++] = (char *)(endpoint ? endpoint : cl->endpoint);
	argv[n++] = (char *)"--server-key";
	argv[n++] = (char *)cl_pub(cl, cl->agent_server);
	argv[n++] = (char *)"--key";
	argv[n++] = key;
	argv[n++] = (char *)"--host";
	argv[n++] = (char *)host;
	/* no CPU budget: flat-out workloads must count exactly, however loaded the machine
	 * (test_cluster_budget tests it) */
	argv[n++] = (char *)"--cpu-budget";
	argv[n++] = (char *)"0";
	for (int i = 0; extra && extra[i] && n < WR_MAX_ARGS - 1; i++)
		argv[n++] = extra[i];
	argv[n] = NULL;
	p = cl_spawn(cl, log, netns, argv);
	if (netns) {
		char self[64], ns[PATH_MAX];
		ino_t want;

		snprintf(ns, sizeof(ns), "/run/netns/%s", netns);
		want = cl_netns_ino(ns);
		snprintf(self, sizeof(self), "/proc/%d/ns/net", (int)p->pid);
		assert_true(want != 0);
		/* `ip netns exec` switches namespace before it execs weft */
		if (!CL_WAIT(cl_netns_ino(self) == want || !cl_alive(p), 5000))
			fail_msg("agent %s is not in namespace %s", host, netns);
	}
	if (wait)
		cl_expect_log(p, "connected to aggregator", CL_WAIT_MS);
	return p;
}

/* cl_agent_with() without extra options. */
static inline struct cl_proc *cl_agent(struct cl *cl, const char *host, const char *log,
				       const char *netns, const char *endpoint, bool wait)
{
	return cl_agent_with(cl, host, log, netns, endpoint, wait, NULL);
}

/* A key pair for the agent of each of hosts (NULL-terminated), allowed: DIR/HOST.key. */
static inline void cl_keygen_agents(struct cl *cl, const char *const hosts[])
{
	for (int i = 0; hosts[i]; i++)
		cl_keygen(cl, "agent", hosts[i], true);
}

/* cl_agent() for each of hosts (NULL-terminated) into agents[], logging into agent-HOST,
 * connecting to endpoint (NULL: the test's); returns once all are connected. */
static inline void cl_agents(struct cl *cl, const char *const hosts[], const char *endpoint,
			     struct cl_proc *agents[])
{
	char log[32];

	for (int i = 0; hosts[i]; i++) {
		snprintf(log, sizeof(log), "agent-%s", hosts[i]);
		agents[i] = cl_agent(cl, hosts[i], log, NULL, endpoint, true);
	}
}

/* `weft submit --format json QUERY` to endpoint (NULL: the test's), following; returns once
 * the aggregator accepted it, with its id in *id. */
static inline struct cl_proc *cl_submit(struct cl *cl, const char *log, const char *endpoint,
					const char *query, uint64_t *id)
{
	struct cl_proc *p;
	char *err, *s;

	p = cl_spawn(cl, log, NULL,
		     (char *const[]){ getenv("WEFT_BIN"), (char *)"submit", (char *)"--to",
				      (char *)(endpoint ? endpoint : cl->endpoint),
				      (char *)"--server-key", (char *)cl_pub(cl, cl->client_server),
				      (char *)"--key", (char *)cl_path(cl, "me.key"),
				      (char *)"--format", (char *)"json", (char *)query, NULL });
	cl_expect_log(p, " runs on ", CL_WAIT_MS);
	err = cl_slurp(p->err);
	s = strstr(err, "weft: query ");
	assert_non_null(s);
	*id = strtoull(s + strlen("weft: query "), NULL, 10);
	assert_true(*id >= 1);
	free(err);
	return p;
}

/* `weft submit --attach ID --format json`: follows query id from the oldest retained window;
 * returns once it follows. */
static inline struct cl_proc *cl_attach(struct cl *cl, const char *log, const char *endpoint,
					uint64_t id)
{
	char ids[32];
	struct cl_proc *p;

	snprintf(ids, sizeof(ids), "%llu", (unsigned long long)id);
	p = cl_spawn(cl, log, NULL,
		     (char *const[]){ getenv("WEFT_BIN"), (char *)"submit", (char *)"--to",
				      (char *)(endpoint ? endpoint : cl->endpoint),
				      (char *)"--server-key", (char *)cl_pub(cl, cl->client_server),
				      (char *)"--key", (char *)cl_path(cl, "me.key"),
				      (char *)"--format", (char *)"json", (char *)"--attach", ids,
				      NULL });
	cl_expect_log(p, "following query", CL_WAIT_MS);
	return p;
}

/* `weft cancel ID`, which must succeed. */
static inline void cl_cancel(struct cl *cl, const char *endpoint, uint64_t id)
{
	struct wr_proc p;
	char ids[32];
	int rc;

	snprintf(ids, sizeof(ids), "%llu", (unsigned long long)id);
	rc = cl_weft(&p, (char *)"cancel", (char *)"--to",
		     (char *)(endpoint ? endpoint : cl->endpoint), (char *)"--server-key",
		     (char *)cl_pub(cl, cl->client_server), (char *)"--key",
		     (char *)cl_path(cl, "me.key"), ids);
	if (rc != 0) {
		wr_dump(&p, "weft cancel");
		fail_msg("weft cancel %s: status %d", ids, rc);
	}
	wr_free(&p);
}

/* `weft status --format json` of endpoint (NULL: the test's), parsed; fails the test if it
 * does not answer. */
static inline struct wj *cl_status(struct cl *cl, const char *endpoint)
{
	struct wr_proc p;
	struct wj *v = NULL;
	int rc = cl_weft(&p, (char *)"status", (char *)"--to",
			 (char *)(endpoint ? endpoint : cl->endpoint), (char *)"--server-key",
			 (char *)cl_pub(cl, cl->client_server), (char *)"--key",
			 (char *)cl_path(cl, "me.key"), (char *)"--format", (char *)"json");

	if (rc == 0)
		v = wj_parse(p.out.p, p.out.len);
	if (!v) {
		wr_dump(&p, "weft status");
		fail_msg("weft status: status %d", rc);
	}
	wr_free(&p);
	return v;
}

/* A count of the graph store's object in `weft status --format json` (of its `forward`
 * object with fwd); fails the test if there is no such object. */
static inline long long cl_status_graph(struct cl *cl, bool fwd, const char *name)
{
	struct wj *st = cl_status(cl, NULL);
	const struct wj *g = wj_get(st, "graph");
	long long v;

	if (fwd)
		g = g ? wj_get(g, "forward") : NULL;
	assert_non_null(g);
	v = wj_int_of(g, name);
	wj_free(st);
	return v;
}

static inline long long cl_graph_count(struct cl *cl, const char *name)
{
	return cl_status_graph(cl, false, name);
}

static inline long long cl_fwd_count(struct cl *cl, const char *name)
{
	return cl_status_graph(cl, true, name);
}

/* The agent entry of host in a status (NULL if not listed). */
static inline const struct wj *cl_status_agent(const struct wj *st, const char *host)
{
	const struct wj *agents = wj_get(st, "agents");

	for (size_t i = 0; agents && i < agents->nkids; i++) {
		const char *h = wj_str(wj_get(&agents->kids[i], "host"));

		if (h && strcmp(h, host) == 0)
			return &agents->kids[i];
	}
	return NULL;
}

static inline bool cl_json_true(const struct wj *o, const char *name)
{
	const struct wj *v = wj_get(o, name);

	return v && v->kind == WJ_BOOL && v->b;
}

/* Whether an integer array member holds v. */
static inline bool cl_json_has_int(const struct wj *o, const char *name, long long v)
{
	const struct wj *a = wj_get(o, name);

	for (size_t i = 0; a && a->kind == WJ_ARR && i < a->nkids; i++)
		if (a->kids[i].is_int && a->kids[i].ival == v)
			return true;
	return false;
}

/* Whether a string array member holds s. */
static inline bool cl_json_has_str(const struct wj *o, const char *name, const char *s)
{
	const struct wj *a = wj_get(o, name);

	for (size_t i = 0; a && a->kind == WJ_ARR && i < a->nkids; i++)
		if (a->kids[i].kind == WJ_STR && strcmp(a->kids[i].str, s) == 0)
			return true;
	return false;
}

/* Whether a string array member holds exactly the strings of list (NULL-terminated), in
 * that order (weft sorts host lists). */
static inline bool cl_json_strs_are(const struct wj *o, const char *name, const char *const *list)
{
	const struct wj *a = wj_get(o, name);
	size_t n = 0;

	if (!a || a->kind != WJ_ARR)
		return false;
	for (; list[n]; n++)
		if (n >= a->nkids || a->kids[n].kind != WJ_STR || strcmp(a->kids[n].str, list[n]))
			return false;
	return n == a->nkids;
}

/* Whether host is listed alive and running query id in a fresh status. */
static inline bool cl_agent_runs(struct cl *cl, const char *endpoint, const char *host, uint64_t id)
{
	struct wj *st = cl_status(cl, endpoint);
	const struct wj *ag = cl_status_agent(st, host);
	bool ok = ag && cl_json_true(ag, "alive") && cl_json_has_int(ag, "running", (long long)id);

	wj_free(st);
	return ok;
}

/*
 * Whether every host of hosts (NULL-terminated) is listed alive and running nothing: queries
 * submitted then are sent to them at once (an agent busy detaching the last test's probes can
 * miss its heartbeats, be taken for dead, and get a query only when it is back).
 */
static inline bool cl_agents_idle(struct cl *cl, const char *endpoint, const char *const *hosts)
{
	struct wj *st = cl_status(cl, endpoint);
	bool idle = true;

	for (int k = 0; hosts[k]; k++) {
		const struct wj *ag = cl_status_agent(st, hosts[k]);
		const struct wj *run = ag ? wj_get(ag, "running") : NULL;

		idle &= ag && cl_json_true(ag, "alive") && (!run || run->nkids == 0);
	}
	wj_free(st);
	return idle;
}

static inline long long cl_rejected(struct cl *cl, const char *endpoint)
{
	struct wj *st = cl_status(cl, endpoint);
	long long n = wj_int_of(st, "rejected");

	wj_free(st);
	return n;
}

/* ------------------------------------------------------------------------ results */

/*
 * The windows a `weft submit --format json` printed so far (complete lines only: it may be
 * writing one).  Checks what a follower must see whatever happened: every line a window
 * of one query; windows appear first in index order 0, 1, 2, ... without a gap (usually as
 * revision 0, but a follower that reconnected is sent a window it missed as last emitted,
 * maybe revised); a window printed again only with a higher revision.  final[i] is the
 * latest emission of window i: its answer.
 */
struct cl_res {
	struct wr_json j;
	const struct wj **final;
	size_t nwin;
	bool ended; /* the window marked last was printed */
	long long late_dropped, results_dropped; /* as of the last line */
};

static inline void cl_res_free(struct cl_res *r)
{
	wr_json_free(&r->j);
	free(r->final);
	memset(r, 0, sizeof(*r));
}

static inline void cl_res_load(struct cl_res *r, const char *path)
{
	struct wr_buf b = { 0 };
	char *s = cl_slurp(path), *nl = strrchr(s, '\n');
	long long qid = -1;

	memset(r, 0, sizeof(*r));
	wr_buf_add(&b, s, nl ? (size_t)(nl - s + 1) : 0);
	free(s);
	wr_json_lines(&b, &r->j);
	free(b.p);
	r->final = calloc(r->j.n + 1, sizeof(*r->final));
	assert_non_null(r->final);
	for (size_t i = 0; i < r->j.n; i++) {
		const struct wj *w = r->j.v[i];
		long long idx, rev;

		if (!wr_is_type(w, "window"))
			fail_msg("%s: line %zu is not a window", path, i + 1);
		idx = wj_int_of(w, "index");
		rev = wj_int_of(w, "revision");
		if (qid < 0)
			qid = wj_int_of(w, "query_id");
		if (wj_int_of(w, "query_id") != qid)
			fail_msg("%s: windows of queries %lld and %lld", path, qid,
				 wj_int_of(w, "query_id"));
		if (idx < 0 || idx > (long long)r->nwin)
			fail_msg(
				"%s: window %lld printed after %zu windows (out of order or a gap)",
				path, idx, r->nwin);
		if (idx == (long long)r->nwin) {
			r->final[r->nwin++] = w;
		} else {
			if (rev <= wj_int_of(r->final[idx], "revision"))
				fail_msg("%s: window %lld: revision %lld after revision %lld", path,
					 idx, rev, wj_int_of(r->final[idx], "revision"));
			r->final[idx] = w;
		}
		if (cl_json_true(w, "last"))
			r->ended = true;
		r->late_dropped = wj_int_of(w, "late_dropped");
		r->results_dropped = wj_int_of(w, "results_dropped");
	}
}

/*
 * The sum over window i's answer of column col, in the rows whose "host" is host and whose
 * "comm" is comm (NULL: any).
 */
static inline long long cl_res_window_sum(const struct cl_res *r, size_t i, const char *col,
					  const char *host, const char *comm)
{
	long long sum = 0;

	for (size_t k = 0; k < wr_nrows(r->final[i]); k++) {
		const struct wj *row = wr_row(r->final[i], k);
		const char *h = wj_str(wj_get(row, "host"));
		const char *c = wj_str(wj_get(row, "comm"));

		if (host && (!h || strcmp(h, host)))
			continue;
		if (comm && (!c || strcmp(c, comm)))
			continue;
		sum += wj_int_of(row, col);
	}
	return sum;
}

/* cl_res_window_sum over every window's answer. */
static inline long long cl_res_sum(const struct cl_res *r, const char *col, const char *host,
				   const char *comm)
{
	long long sum = 0;

	for (size_t i = 0; i < r->nwin; i++)
		sum += cl_res_window_sum(r, i, col, host, comm);
	return sum;
}

/*
 * Whether the windows split exactly into two runs of calls made one after the other: some
 * window index s, 0 < s < nwin, has the windows before it summing to `first` and the windows
 * from it on to `second` (cl_res_window_sum), so no window holds calls of both runs.
 */
static inline bool cl_res_splits(const struct cl_res *r, const char *col, const char *host,
				 const char *comm, long long first, long long second)
{
	long long sum = 0;
	size_t s = 0;

	while (s < r->nwin && sum < first)
		sum += cl_res_window_sum(r, s++, col, host, comm);
	return sum == first && s < r->nwin && cl_res_sum(r, col, host, comm) == first + second;
}

/* Whether some emission (any revision) of window i named host missing (NULL: any host). */
static inline bool cl_res_was_missing(const struct cl_res *r, size_t i, const char *host)
{
	for (size_t k = 0; k < r->j.n; k++) {
		const struct wj *w = r->j.v[k], *m = wj_get(w, "missing");

		if (wj_int_of(w, "index") != (long long)i || !m)
			continue;
		if (host ? cl_json_has_str(w, "missing", host) : m->nkids > 0)
			return true;
	}
	return false;
}

/* Every row's host is one of hosts (NULL-terminated). */
static inline void cl_res_rows_only(const struct cl_res *r, const char *const *hosts)
{
	for (size_t i = 0; i < r->nwin; i++) {
		for (size_t k = 0; k < wr_nrows(r->final[i]); k++) {
			const char *h = wj_str(wj_get(wr_row(r->final[i], k), "host"));
			bool known = false;

			for (size_t x = 0; h && hosts[x]; x++)
				known |= strcmp(h, hosts[x]) == 0;
			if (!known)
				fail_msg("window %zu has a row of host %s", i, h ? h : "(none)");
		}
	}
}

/* The window after which an agent ended query id, from its log ("query ID ended after window
 * W"); -1 while it has not. */
static inline long long cl_agent_ended_after(const struct cl_proc *agent, uint64_t id)
{
	char needle[80], *s = cl_slurp(agent->err), *p;
	long long w = -1;

	snprintf(needle, sizeof(needle), "query %llu ended after window ", (unsigned long long)id);
	p = strstr(s, needle);
	if (p)
		w = strtoll(p + strlen(needle), NULL, 10);
	free(s);
	return w;
}

/*
 * Whether an agent skipped window w of query id: a daemon that wakes late (a loaded machine)
 * does not close the windows it slept through; their events go into the window it closes, and
 * it logs "query ID: windows A..B skipped".
 */
static inline bool cl_agent_skipped(const struct cl_proc *agent, uint64_t id, uint64_t w)
{
	char needle[80], *s = cl_slurp(agent->err), *p = s;
	bool skipped = false;

	snprintf(needle, sizeof(needle), "query %llu: windows ", (unsigned long long)id);
	while (!skipped && (p = strstr(p, needle))) {
		unsigned long long a, b;

		p += strlen(needle);
		if (sscanf(p, "%llu..%llu skipped", &a, &b) == 2 && a <= w && w <= b)
			skipped = true;
	}
	free(s);
	return skipped;
}

/*
 * Each answer of windows from..last lists exactly the hosts that ran in it (agents[i] runs
 * hosts[i]), and names as missing none but hosts that skipped it:
 * - a host is in every window before the last, except those its agent skipped for waking
 *   late (cl_agent_skipped(): a loaded machine), whose events it counted in a later window;
 * - in the last, the hosts whose agent ended query id after it.  A cancel reaches the agents
 *   some milliseconds apart: one that gets it just before a window boundary the others have
 *   crossed ends a window earlier, and the aggregator rightly does not expect it there.
 * Every agent ended after the last window or the one before, and at least one after the last:
 * when the cancel reaches the aggregator after a boundary its agents had not yet flipped at
 * (their windows flip on their own timers, a few ms late on a loaded machine), all of them end
 * a window earlier, and that window is the last (no empty window after it).
 */
static inline void cl_res_assert_hosts(const struct cl_res *r, size_t from,
				       const char *const *hosts, struct cl_proc *const *agents,
				       uint64_t id)
{
	long long ended[16], latest = -1;
	size_t last, nhosts = 0;

	if (r->nwin == 0)
		fail_msg("no window");
	last = r->nwin - 1;
	for (; hosts[nhosts]; nhosts++) {
		long long at = -1;

		if (nhosts + 1 >= sizeof(ended) / sizeof(ended[0]))
			fail_msg("too many hosts");
		if (!CL_WAIT((at = cl_agent_ended_after(agents[nhosts], id)) >= 0, CL_WAIT_MS))
			fail_msg("agent %s did not end query %llu", hosts[nhosts],
				 (unsigned long long)id);
		if (at != (long long)last && at + 1 != (long long)last)
			fail_msg("agent %s ended query %llu after window %lld; the last is %zu",
				 hosts[nhosts], (unsigned long long)id, at, last);
		ended[nhosts] = at;
		latest = at > latest ? at : latest;
	}
	if (latest != (long long)last)
		fail_msg("no agent ended query %llu after the last window, %zu",
			 (unsigned long long)id, last);
	for (size_t w = from; w <= last; w++) {
		const char *want[16] = { NULL }, *may_miss[16] = { NULL };
		const struct wj *missing = wj_get(r->final[w], "missing");
		size_t n = 0, m = 0;

		for (size_t i = 0; i < nhosts; i++) {
			if (cl_agent_skipped(agents[i], id, w))
				may_miss[m++] = hosts[i];
			else if (ended[i] >= (long long)w)
				want[n++] = hosts[i];
		}
		if (!cl_json_strs_are(r->final[w], "hosts", want))
			fail_msg("window %zu does not list exactly the %zu hosts that ran in it", w,
				 n);
		for (size_t k = 0; missing && missing->kind == WJ_ARR && k < missing->nkids; k++) {
			bool ok = false;

			for (size_t i = 0; i < m; i++)
				ok |= missing->kids[k].kind == WJ_STR &&
				      strcmp(missing->kids[k].str, may_miss[i]) == 0;
			if (!ok)
				fail_msg("window %zu names a host missing that did not skip it", w);
		}
	}
}

/* cl_res_sum of the file as it is now (for waiting until a result arrived). */
static inline long long cl_file_sum(const char *path, const char *col, const char *host,
				    const char *comm)
{
	struct cl_res r;
	long long sum;

	cl_res_load(&r, path);
	sum = cl_res_sum(&r, col, host, comm);
	cl_res_free(&r);
	return sum;
}

/* The number of windows first emitted so far. */
static inline size_t cl_file_windows(const char *path)
{
	struct cl_res r;
	size_t n;

	cl_res_load(&r, path);
	n = r.nwin;
	cl_res_free(&r);
	return n;
}

/* Whether some emission (any revision) of a window at or after `from` lists host missing. */
static inline bool cl_file_missing(const char *path, const char *host, size_t from)
{
	struct cl_res r;
	bool found = false;

	cl_res_load(&r, path);
	for (size_t i = 0; i < r.j.n && !found; i++)
		found = wj_int_of(r.j.v[i], "index") >= (long long)from &&
			cl_json_has_str(r.j.v[i], "missing", host);
	cl_res_free(&r);
	return found;
}

/* Waits for a follower to print the query's last window and exit 0; fails otherwise. */
static inline void cl_expect_end(struct cl_proc *p)
{
	int rc = cl_wait_exit(p, CL_WAIT_MS);

	if (rc != 0) {
		char *log = cl_slurp(p->err);

		fail_msg("%s: %s (status %d); stderr:\n%s", p->name,
			 rc == -ETIMEDOUT ? "did not end" : "failed", rc, log);
	}
}

/* ------------------------------------------------------------------------ workloads */

/* A copy of file `from` at `to`, executable (a workload of this test's own: uprobes are by
 * inode, so no other test's process fires its probes). */
static inline void cl_copy_file(const char *from, const char *to)
{
	char buf[65536];
	ssize_t n;
	int in, out;

	in = open(from, O_RDONLY | O_CLOEXEC);
	assert_true(in >= 0);
	out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
	assert_true(out >= 0);
	while ((n = read(in, buf, sizeof(buf))) > 0)
		assert_int_equal(write(out, buf, (size_t)n), n);
	close(in);
	close(out);
}

/*
 * A copy of wl_syscalls at DIR/NAME: its comm is NAME (at most 15 characters, unique to
 * this test process when it starts with cl->tag), so a query can count its calls alone.
 */
static inline void cl_workload_make(struct cl *cl, const char *name)
{
	assert_true(strlen(name) <= 15);
	cl_copy_file(wr_workload("wl_syscalls"), cl_path(cl, name));
}

/* The probes a process holds: its perf-event file descriptors, and with links its BPF-link
 * ones too. */
static inline int cl_probes_held(pid_t pid, bool links)
{
	char dir[64], path[PATH_MAX], target[64];
	struct dirent *de;
	DIR *d;
	int n = 0;

	snprintf(dir, sizeof(dir), "/proc/%d/fd", (int)pid);
	d = opendir(dir);
	assert_non_null(d);
	while ((de = readdir(d))) {
		ssize_t len;

		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		len = readlink(path, target, sizeof(target) - 1);
		if (len <= 0)
			continue;
		target[len] = 0;
		n += strcmp(target, "anon_inode:[perf_event]") == 0 ||
		     (links && strcmp(target, "anon_inode:bpf_link") == 0);
	}
	closedir(d);
	return n;
}

/*
 * Runs workload NAME to its end: exactly `calls` getppid() calls on `threads` threads, in
 * network namespace `netns` if not NULL (checked before it makes a call: it waits for its
 * stdin to close first).
 */
static inline void cl_workload(struct cl *cl, const char *name, const char *netns,
			       unsigned long calls, int threads)
{
	char n[32], t[16], self[64], nspath[PATH_MAX];
	char *argv[10];
	struct wr_proc p;
	int k = 0;

	snprintf(n, sizeof(n), "%lu", calls);
	snprintf(t, sizeof(t), "%d", threads);
	if (netns) {
		argv[k++] = (char *)"ip";
		argv[k++] = (char *)"netns";
		argv[k++] = (char *)"exec";
		argv[k++] = (char *)netns;
	}
	argv[k++] = (char *)cl_path(cl, name);
	argv[k++] = n;
	argv[k++] = t;
	argv[k++] = (char *)"wait";
	argv[k] = NULL;
	if (wr_workload_start(&p, argv) != 0) {
		wr_finish(&p, 5000);
		wr_dump(&p, name);
		fail_msg("workload %s did not start", name);
	}
	if (netns) {
		snprintf(self, sizeof(self), "/proc/%d/ns/net", (int)p.pid);
		snprintf(nspath, sizeof(nspath), "/run/netns/%s", netns);
		assert_true(cl_netns_ino(nspath) != 0);
		assert_true(cl_netns_ino(self) == cl_netns_ino(nspath));
	}
	if (wr_finish(&p, 30000) != 0) {
		wr_dump(&p, name);
		fail_msg("workload %s failed", name);
	}
	wr_free(&p);
}

/* ------------------------------------------------------------------------ namespaces */

static inline bool cl_pid_gone(long pid)
{
	return pid > 0 && kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

/*
 * Removes the namespaces (weft-ns-PID-K) and veths (wftPID...) of test processes that are
 * gone: a run that crashed, or was killed, leaves nothing behind for the next.
 */
static inline void cl_net_sweep(void)
{
	struct wr_proc p;
	char *argv[] = { (char *)"ip", (char *)"-o", (char *)"link", (char *)"show", NULL };

	nu_netns_sweep();
	if (wr_start(&p, argv) == 0 && wr_finish(&p, 10000) == 0) {
		for (char *l = p.out.p; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
			char name[32];
			long pid;

			/* "7: wft1234r0@if6: <BROADCAST,..." */
			if (sscanf(l, "%*d: %31[^@:]", name) == 1 &&
			    sscanf(name, "wft%ld", &pid) == 1 && cl_pid_gone(pid))
				nu_ip("link del %s", name);
		}
	}
	wr_free(&p);
}

struct cl_net {
	int n;
	char ns[CL_NET_MAX][32];
	char vroot[CL_NET_MAX][16], vns[CL_NET_MAX][16];
	char root_ip[CL_NET_MAX][32], ns_ip[CL_NET_MAX][32];
	char listen_ip[32]; /* the root end of the first veth: where the aggregator listens */
	int x; /* the X of 10.201.X.0/24 */
};

/*
 * Namespace k (0-based) gets 10.201.X.(4k+2)/30, its veth's root end 10.201.X.(4k+1)/30;
 * namespaces other than the first reach the aggregator's address (the first root end)
 * through their own root end.  X is chosen so that no address of 10.201.X.0/24 exists on
 * this host (another test run may hold one).  Links up, loopback up in each.
 */
static inline void cl_net_setup(struct cl_net *net, int n)
{
	struct wr_proc p;
	char *argv[] = { (char *)"ip", (char *)"-o", (char *)"-4", (char *)"addr", NULL };
	int x = 16 + (int)(getpid() % 200);

	assert_true(n <= CL_NET_MAX);
	memset(net, 0, sizeof(*net));
	cl_net_sweep();
	assert_int_equal(wr_start(&p, argv), 0);
	assert_int_equal(wr_finish(&p, 10000), 0);
	for (int tries = 0; tries < 200; tries++, x = 16 + (x - 16 + 1) % 200) {
		char pre[32];

		snprintf(pre, sizeof(pre), "inet 10.201.%d.", x);
		if (!strstr(p.out.p, pre))
			break;
	}
	wr_free(&p);
	for (int k = 0; k < n; k++) {
		snprintf(net->ns[k], sizeof(net->ns[k]), "weft-ns-%d-%d", (int)getpid(), k + 1);
		snprintf(net->vroot[k], sizeof(net->vroot[k]), "wft%dr%d", (int)getpid(), k + 1);
		snprintf(net->vns[k], sizeof(net->vns[k]), "wft%dn%d", (int)getpid(), k + 1);
		snprintf(net->root_ip[k], sizeof(net->root_ip[k]), "10.201.%d.%d", x, 4 * k + 1);
		snprintf(net->ns_ip[k], sizeof(net->ns_ip[k]), "10.201.%d.%d", x, 4 * k + 2);
	}
	snprintf(net->listen_ip, sizeof(net->listen_ip), "%s", net->root_ip[0]);
	net->x = x;
	net->n = n; /* from here the teardown removes whatever exists */
	for (int k = 0; k < n; k++) {
		struct nu_end root = { .dev = net->vroot[k], .ip = net->root_ip[k] };
		struct nu_end in = { .ns = net->ns[k], .dev = net->vns[k], .ip = net->ns_ip[k] };

		assert_int_equal(nu_netns_add(net->ns[k]), 0);
		assert_int_equal(nu_veth(&root, &in, 30), 0);
		if (k > 0)
			assert_int_equal(nu_ip("-n %s route add %s/32 via %s", net->ns[k],
					       net->listen_ip, net->root_ip[k]),
					 0);
	}
}

/*
 * Takes the root end of namespace k's veth down (the namespace is cut off: what its
 * processes send is dropped, nothing reaches them) or up again.  The namespace's own
 * addresses and routes stay as they are, so the link coming back is all that changes.
 */
static inline void cl_net_link(struct cl_net *net, int k, bool up)
{
	assert_int_equal(nu_ip("link set %s %s", net->vroot[k], up ? "up" : "down"), 0);
}

/* Removes the namespaces and veths (deleting a namespace deletes its veth's end, and with it
 * the pair); call after the processes in them have stopped. */
static inline void cl_net_teardown(struct cl_net *net)
{
	for (int k = 0; k < net->n; k++) {
		char path[PATH_MAX];

		nu_netns_del(net->ns[k]);
		snprintf(path, sizeof(path), "/sys/class/net/%s", net->vroot[k]);
		if (access(path, F_OK) == 0)
			nu_ip("link del %s", net->vroot[k]);
	}
	net->n = 0;
}

/*
 * A test's cluster in namespaces taken down, in its group teardown and at exit (a failed
 * group setup skips the teardown): the processes stopped first (they run in the namespaces),
 * the logs kept if `failed`, then the namespaces and veths removed.  Runs twice harmlessly.
 */
static inline void cl_net_fini(struct cl *cl, struct cl_net *net, bool failed)
{
	if (cl->dir[0]) {
		cl->passed = !failed;
		cl_fini(cl);
		cl->dir[0] = 0;
	}
	cl_net_teardown(net);
}

/* The cluster of the group of tests running now, in namespaces, for the exit handler. */
struct cl_net_group {
	struct cl *cl;
	struct cl_net *net;
	const bool *failed;
};

static inline struct cl_net_group *cl_net_group_live(void)
{
	static struct cl_net_group g;

	return &g;
}

static inline void cl_net_group_at_exit(void)
{
	struct cl_net_group *g = cl_net_group_live();

	if (g->cl)
		cl_net_fini(g->cl, g->net, *g->failed);
}

/*
 * Called first in a group set-up: the group's cluster (its cl, net and failed flag) is taken
 * down at exit unless its teardown ran (a failed group set-up skips the teardown, and the
 * namespaces must not outlive the test).  The exit handler is registered once.
 */
static inline void cl_net_group_begin(struct cl *cl, struct cl_net *net, const bool *failed)
{
	static bool registered;

	if (!registered)
		atexit(cl_net_group_at_exit);
	registered = true;
	*cl_net_group_live() = (struct cl_net_group){ .cl = cl, .net = net, .failed = failed };
}

/* The group teardown: cl_net_fini(), the logs kept if the group or its last test failed;
 * nothing is left for the exit handler. */
static inline void cl_net_group_end(struct cl *cl, struct cl_net *net, bool failed)
{
	cl_net_fini(cl, net, failed || !cl->passed);
	*cl_net_group_live() = (struct cl_net_group){ 0 };
}

/* The aggregator's endpoint on the root end of the first veth, tcp://IP:PORT, into listen
 * (64 bytes) and cl->endpoint, where the clients connect. */
static inline void cl_net_endpoint(struct cl *cl, const struct cl_net *net, char listen[64])
{
	snprintf(listen, 64, "tcp://%s:%d", net->listen_ip, cl->port);
	snprintf(cl->endpoint, sizeof(cl->endpoint), "%s", listen);
}

/*
 * A veth pair wft<pid><tag>a / ...b of its own joining namespaces a and b directly (not
 * through the root namespace), with IPv4 addresses ipa, ipb (/30) and, if not NULL, IPv6
 * addresses ip6a, ip6b; it goes with its namespaces in the teardown.
 */
static inline void cl_net_join(const struct cl_net *net, const char *tag, int a, int b,
			       const char *ipa, const char *ipb, const char *ip6a, const char *ip6b)
{
	char va[16], vb[16];
	struct nu_end ea = { .ns = net->ns[a], .dev = va, .ip = ipa, .ip6 = ip6a };
	struct nu_end eb = { .ns = net->ns[b], .dev = vb, .ip = ipb, .ip6 = ip6b };

	snprintf(va, sizeof(va), "wft%d%sa", (int)getpid(), tag);
	snprintf(vb, sizeof(vb), "wft%d%sb", (int)getpid(), tag);
	assert_int_equal(nu_veth(&ea, &eb, 30), 0);
}

/*
 * `weft agent` for hosts[k] in namespace k, k < n, each scoped to its namespace (--scope
 * netns:/run/netns/NS, kept in scope[k]) and logging into agent-HOST, connecting to listen;
 * returns once each says it traces only its namespace.
 */
static inline void cl_net_scoped_agents(struct cl *cl, const struct cl_net *net,
					const char *const hosts[], int n, const char *listen,
					char scope[][PATH_MAX], struct cl_proc *agents[])
{
	char log[32];

	for (int k = 0; k < n; k++) {
		snprintf(scope[k], PATH_MAX, "netns:/run/netns/%s", net->ns[k]);
		snprintf(log, sizeof(log), "agent-%s", hosts[k]);
		agents[k] = cl_agent_with(cl, hosts[k], log, net->ns[k], listen, true,
					  (char *const[]){ (char *)"--scope", scope[k], NULL });
		cl_expect_log(agents[k], "tracing only netns:", CL_WAIT_MS);
	}
}

/*
 * redis-server (as process NAME) in namespace ns bound to `bind`, port 6379
 * (tests/netns_util.h); returns once it answers from namespace client_ns, fails the test
 * with its output if it exits first or does not answer in CL_WAIT_MS.  Stop it with cl_stop().
 */
static inline struct cl_proc *cl_redis(struct cl *cl, const char *name, const char *ns,
				       const char *client_ns, const char *bind)
{
	char *argv[NU_REDIS_ARGV];
	struct cl_proc *p;

	nu_redis_argv(argv, NULL, bind);
	p = cl_spawn(cl, name, ns, argv);
	if (!CL_WAIT(nu_redis_ping(client_ns, bind) || !cl_alive(p), CL_WAIT_MS) || !cl_alive(p))
		fail_msg("redis-server did not come up: %s", cl_slurp(p->out));
	return p;
}

/* ------------------------------------------------------------------------ raw peers */

/*
 * A raw ZeroMQ DEALER with a CURVE key of the test (DIR/NAME.key), to say what weft's own
 * tools never would: hostile bytes, bodies its role may not send, requests it never reads
 * the answers of.  Envelopes are packed by protobuf-c directly, without wire_encode()'s
 * checks.
 */
struct cl_raw {
	void *zctx, *sock;
	uint64_t seq;
};

static inline void cl_raw_open(struct cl_raw *r, struct cl *cl, const char *endpoint,
			       const char *keyname)
{
	char pub[WIRE_KEY_LEN + 1], sec[WIRE_KEY_LEN + 1], spub[WIRE_KEY_LEN + 1], path[96];
	int zero = 0;

	memset(r, 0, sizeof(*r));
	snprintf(path, sizeof(path), "%s.key", keyname);
	assert_int_equal(wire_keyfile_read(cl_path(cl, path), pub, sec), 0);
	assert_int_equal(wire_keyfile_read(cl_pub(cl, cl->client_server), spub, NULL), 0);
	r->zctx = zmq_ctx_new();
	assert_non_null(r->zctx);
	r->sock = wire_client_socket(r->zctx, endpoint, spub, pub, sec);
	assert_non_null(r->sock);
	zmq_setsockopt(r->sock, ZMQ_LINGER, &zero, sizeof(zero));
}

static inline void cl_raw_close(struct cl_raw *r)
{
	if (r->sock)
		zmq_close(r->sock);
	if (r->zctx)
		zmq_ctx_term(r->zctx);
	memset(r, 0, sizeof(*r));
}

/* Sends bytes as one message (flags: ZMQ_SNDMORE, ZMQ_DONTWAIT): 0 or -errno. */
static inline int cl_raw_bytes(struct cl_raw *r, const void *buf, size_t len, int flags)
{
	return zmq_send(r->sock, buf, len, flags) >= 0 ? 0 : -errno;
}

/* Packs e as it is (version and seq included) with protobuf-c into a malloc'd buffer. */
static inline void *cl_raw_pack(const Weft__Envelope *e, size_t *len)
{
	void *buf;

	*len = weft__envelope__get_packed_size(e);
	buf = malloc(*len ? *len : 1);
	assert_non_null(buf);
	weft__envelope__pack(e, buf);
	return buf;
}

/* An envelope of version 1 with the next seq around body (kind). */
static inline void cl_raw_env(struct cl_raw *r, Weft__Envelope *e, Weft__Envelope__BodyCase kind,
			      void *body)
{
	weft__envelope__init(e);
	e->version = WIRE_VERSION;
	e->seq = ++r->seq;
	e->body_case = kind;
	e->hello = body; /* the union's members are all pointers */
}

static inline void cl_raw_send(struct cl_raw *r, const Weft__Envelope *e)
{
	size_t len;
	void *buf = cl_raw_pack(e, &len);

	assert_int_equal(cl_raw_bytes(r, buf, len, 0), 0);
	free(buf);
}

/* The next message within timeout_ms, decoded (NULL on timeout; fails if it does not
 * decode: the aggregator never sends what it would refuse). */
static inline Weft__Envelope *cl_raw_recv(struct cl_raw *r, int timeout_ms)
{
	zmq_pollitem_t it = { .socket = r->sock, .events = ZMQ_POLLIN };
	Weft__Envelope *e;
	zmq_msg_t m;
	char why[256];

	if (zmq_poll(&it, 1, timeout_ms) <= 0)
		return NULL;
	zmq_msg_init(&m);
	assert_true(zmq_msg_recv(&m, r->sock, 0) >= 0);
	e = wire_decode(zmq_msg_data(&m), zmq_msg_size(&m), why, sizeof(why));
	zmq_msg_close(&m);
	if (!e)
		fail_msg("the aggregator sent something invalid: %s", why);
	return e;
}

/* The next message of one kind within timeout_ms (others are dropped), or NULL. */
static inline Weft__Envelope *cl_raw_expect(struct cl_raw *r, Weft__Envelope__BodyCase kind,
					    int timeout_ms)
{
	uint64_t end = wr_now_ms() + (uint64_t)timeout_ms;

	while (wr_now_ms() < end) {
		Weft__Envelope *e = cl_raw_recv(r, (int)(end - wr_now_ms()) + 1);

		if (e && e->body_case == kind)
			return e;
		wire_free(e);
	}
	return NULL;
}

/* Hello as role (host for an agent), and its Welcome. */
static inline void cl_raw_hello(struct cl_raw *r, const char *role, const char *host)
{
	Weft__Envelope e, *w;
	Weft__Hello h;

	weft__hello__init(&h);
	h.role = (char *)role;
	h.host = (char *)host;
	h.version = (char *)"0.1.0";
	h.instance = ((uint64_t)getpid() << 20) ^ wr_now_ms() ^ 0x5eed;
	cl_raw_env(r, &e, WEFT__ENVELOPE__BODY_HELLO, &h);
	cl_raw_send(r, &e);
	w = cl_raw_expect(r, WEFT__ENVELOPE__BODY_WELCOME, CL_WAIT_MS);
	if (!w)
		fail_msg("no Welcome for a raw %s", role);
	wire_free(w);
}

#endif
