/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Network namespaces and redis-server in them, for the tests that run real programs on two
 * "hosts" of one kernel (tests/runtime/test_run_kedges.c; the cluster tests through
 * tests/cluster/cluster_util.h, which builds its namespaces, veths and sweep on these):
 *
 *  - `ip` is run with an argv, never through a shell; what it says on a failure goes to the
 *    test's stderr.
 *  - A namespace is made with its loopback up; one is deleted only if it exists (a teardown
 *    may run twice: the group's, then at exit), and deleting it deletes the veth ends in it.
 *  - A veth pair joins two namespaces (or a namespace and the root namespace), each end with
 *    its IPv4 address and, where the test wants one, its IPv6 address (added nodad: no
 *    duplicate address detection to wait for).
 *  - redis-server listens on port 6379 of one address, saves nothing and is unprotected;
 *    it is up when redis-cli, run in the client's namespace, has its PING answered (the
 *    pings come before any query runs: they are not traced).
 *
 * Header-only (static inline), like tests/runtime/run_util.h which it builds on.  Include
 * <cmocka.h> first.
 */
#ifndef WEFT_TEST_NETNS_UTIL_H
#define WEFT_TEST_NETNS_UTIL_H

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "tests/runtime/run_util.h"

#define NU_REDIS_BIN "/usr/bin/redis-server"
#define NU_BENCH_BIN "/usr/bin/redis-benchmark"
#define NU_REDIS_PORT "6379"

/* Whether this test can make namespaces and run redis in them (root, ip(8), redis-server,
 * redis-benchmark and redis-cli); if not, it says why on stderr. */
static inline bool nu_redis_ready(void)
{
	if (geteuid() != 0) {
		fprintf(stderr, "skipped: needs root (network namespaces)\n");
		return false;
	}
	if (access(NU_REDIS_BIN, X_OK) != 0 || access(NU_BENCH_BIN, X_OK) != 0 ||
	    system("command -v redis-cli >/dev/null && command -v ip >/dev/null") != 0) {
		fprintf(stderr, "skipped: needs redis-server, redis-benchmark, redis-cli and ip\n");
		return false;
	}
	return true;
}

/* Runs `ip ARGS` (one string, split on spaces): its status. */
static inline int nu_ip(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline int nu_ip(const char *fmt, ...)
{
	char line[512], *argv[WR_MAX_ARGS], *save = NULL;
	struct wr_proc p;
	va_list ap;
	int n = 0, rc;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	argv[n++] = (char *)"ip";
	for (char *w = strtok_r(line, " ", &save); w && n < WR_MAX_ARGS - 1;
	     w = strtok_r(NULL, " ", &save))
		argv[n++] = w;
	argv[n] = NULL;
	rc = wr_start(&p, argv);
	if (rc == 0)
		rc = wr_finish(&p, 10000);
	if (rc != 0)
		fprintf(stderr, "ip %s: status %d: %s", fmt, rc, p.err.p ? p.err.p : "");
	wr_free(&p);
	return rc;
}

/* `ip netns add NAME`, its loopback up: 0 or the failed command's status. */
static inline int nu_netns_add(const char *name)
{
	int rc = nu_ip("netns add %s", name);

	return rc ? rc : nu_ip("-n %s link set lo up", name);
}

/* Deletes namespace NAME if it exists (and with it the veth ends in it). */
static inline void nu_netns_del(const char *name)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "/run/netns/%s", name);
	if (name[0] && access(path, F_OK) == 0)
		nu_ip("netns del %s", name);
}

/*
 * Deletes the namespaces that runs of weft's tests and benchmarks left behind when they were
 * killed (a ctest timeout is a SIGKILL, which no teardown survives): every /run/netns/weft-
 * TAG-PID-... (test_run_kedges' weft-ke, test_run_scope's weft-scope, the cluster tests'
 * weft-ns, tools/bench's weft-bke and weft-bkp) whose process PID is gone.  A namespace of a
 * live run is never touched, whoever made it.
 */
static inline void nu_netns_sweep(void)
{
	DIR *d = opendir("/run/netns");
	struct dirent *e;

	while (d && (e = readdir(d))) {
		long pid;

		if (sscanf(e->d_name, "weft-%*[a-z]-%ld-", &pid) == 1 && pid > 0 &&
		    kill((pid_t)pid, 0) != 0 && errno == ESRCH)
			nu_ip("netns del %s", e->d_name);
	}
	if (d)
		closedir(d);
}

/* One end of a veth pair. */
struct nu_end {
	const char *ns; /* its namespace; NULL: the root namespace */
	const char *dev; /* its name (at most 15 characters) */
	const char *ip; /* its IPv4 address, without the prefix length */
	const char *ip6; /* NULL, or its IPv6 address (a /64, added nodad) */
};

/* `ip -n NS ARGS` for an end in namespace NS, `ip ARGS` in the root namespace. */
#define nu_ip_in(end, fmt, ...) \
	((end)->ns ? nu_ip("-n %s " fmt, (end)->ns, __VA_ARGS__) : nu_ip(fmt, __VA_ARGS__))

/*
 * The veth pair a->dev, b->dev, each end moved into its namespace with its address (a
 * /prefix IPv4 one, and its IPv6 one if any) and up.  0 or the failed command's status.
 */
static inline int nu_veth(const struct nu_end *a, const struct nu_end *b, int prefix)
{
	const struct nu_end *e[2] = { a, b };
	int rc = nu_ip("link add %s type veth peer name %s", a->dev, b->dev);

	for (int k = 0; k < 2 && !rc; k++)
		if (e[k]->ns)
			rc = nu_ip("link set %s netns %s", e[k]->dev, e[k]->ns);
	for (int k = 0; k < 2 && !rc; k++) {
		rc = nu_ip_in(e[k], "addr add %s/%d dev %s", e[k]->ip, prefix, e[k]->dev);
		if (!rc && e[k]->ip6)
			rc = nu_ip_in(e[k], "-6 addr add %s/64 dev %s nodad", e[k]->ip6, e[k]->dev);
		if (!rc)
			rc = nu_ip_in(e[k], "link set %s up", e[k]->dev);
	}
	return rc;
}

/*
 * The argv of redis-server on port 6379 of `bind`, saving nothing, unprotected, after
 * `prefix` (NULL-terminated, may be NULL: `ip netns exec NS`), into argv[NU_REDIS_ARGV].
 */
#define NU_REDIS_ARGV 20
static inline void nu_redis_argv(char *argv[NU_REDIS_ARGV], char *const prefix[], const char *bind)
{
	char *const args[] = { (char *)NU_REDIS_BIN,
			       (char *)"--port",
			       (char *)NU_REDIS_PORT,
			       (char *)"--bind",
			       (char *)bind,
			       (char *)"--save",
			       (char *)"",
			       (char *)"--appendonly",
			       (char *)"no",
			       (char *)"--protected-mode",
			       (char *)"no",
			       NULL };
	int n = 0;

	for (int i = 0; prefix && prefix[i]; i++)
		argv[n++] = prefix[i];
	for (int i = 0; args[i]; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
}

/* Whether redis-server at addr:6379 answers a PING from namespace ns (redis-cli). */
static inline bool nu_redis_ping(const char *ns, const char *addr)
{
	char cmd[512];

	snprintf(cmd, sizeof(cmd),
		 "ip netns exec %s redis-cli -h %s -p " NU_REDIS_PORT " ping >/dev/null 2>&1", ns,
		 addr);
	return system(cmd) == 0;
}

/*
 * Starts redis-server in namespace ns bound to `bind` (its output on p's pipes, its stdin
 * closed) and waits until it answers from namespace client_ns: 0; or -1 with its output
 * dumped and the process killed and reaped.
 */
static inline int nu_redis_start(struct wr_proc *p, const char *ns, const char *client_ns,
				 const char *bind)
{
	char *const in_ns[] = { (char *)"ip", (char *)"netns", (char *)"exec", (char *)ns, NULL };
	char *argv[NU_REDIS_ARGV];
	bool ready = false;

	nu_redis_argv(argv, in_ns, bind);
	if (wr_start(p, argv) != 0)
		return -1;
	wr_close_stdin(p);
	for (uint64_t end = wr_now_ms() + WR_TIMEOUT_MS; !ready && wr_now_ms() < end;) {
		ready = nu_redis_ping(client_ns, bind);
		wr_pump(p, ready ? 0 : 50);
	}
	if (ready)
		return 0;
	kill(p->pid, SIGKILL);
	wr_finish(p, WR_TIMEOUT_MS);
	wr_dump(p, "redis-server");
	wr_free(p);
	return -1;
}

/* SIGTERM, then its end collected (SIGKILL after WR_TIMEOUT_MS): its status. */
static inline int nu_redis_stop(struct wr_proc *p)
{
	kill(p->pid, SIGTERM);
	return wr_finish(p, WR_TIMEOUT_MS);
}

#endif
