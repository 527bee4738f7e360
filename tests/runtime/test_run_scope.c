// SPDX-License-Identifier: Apache-2.0
/*
 * End to end, `weft run --scope`: the real weft binary against the real kernel, with the same
 * workload binary running in two places of one machine, each making a known and different
 * number of calls.
 *
 *   netns_syscall  wl_syscalls makes N_A getppid() calls in network namespace A
 *                  (/run/netns/weft-scope-PID-a, `ip netns add`) and N_B in B; while both
 *                  run, three weft runs count getppid() with no other filter: scoped to A
 *                  by its bind mount, scoped to B by /proc/PID/ns/net of B's workload, and
 *                  unscoped grouped by pid for the two workloads.  A counts exactly N_A and
 *                  B exactly N_B, although the whole machine calls getppid() meanwhile
 *                  (other tests, other tracers); the unscoped run sees N_A and N_B, so both
 *                  workloads ran while the scoped runs were attached.
 *   netns_uprobe   the same with a user probe (wl_calls' wl_call, attached for every process
 *                  that maps the binary): the scope filters it as it filters a kernel
 *                  probe.  With -p, both filters apply: -p A scoped to A counts N_A, -p A
 *                  scoped to B counts nothing.
 *   netns_usdt     a USDT probe of wl_usdt run with -c in namespace A: scoped to A it counts
 *                  every tick, scoped to B none.
 *   cgroup         a cgroup v2 directory made for the test (under the cgroup2 mount, which
 *                  may be /sys/fs/cgroup/unified on a hybrid host) with a child: wl_syscalls
 *                  in the child makes N_A calls, another in a sibling directory N_B; the run
 *                  scoped to the parent counts exactly N_A (descendants count), the run
 *                  scoped to the sibling exactly N_B.  The directories are removed after.
 *   errors         a missing path, a namespace of another kind, a directory that is not a
 *                  cgroup v2 one, a file that is no namespace and a malformed --scope all
 *                  exit 2 with [E_SCOPE] before anything is compiled or attached; `weft
 *                  agent` refuses a bad --scope the same way, before it reads its keys.
 *
 * The namespaces are removed in the teardown and at exit; those of a crashed earlier run
 * (whose pid is gone) are removed before the group starts.  Needs root; skipped otherwise.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <dirent.h>
#include <mntent.h>
#include <signal.h>
#include <sys/stat.h>
#include "run_util.h"
#include "tests/netns_util.h"
#include "tests/skip.h"

#define N_A 30011ul
#define N_B 20017ul
#define WAIT_MS 60000

static char ns_a[64], ns_b[64]; /* names under /run/netns */
static char cg_root[PATH_MAX - 64]; /* the cgroup2 mount, "" if none */
static char cg_dir[PATH_MAX]; /* the test's cgroup, "" if not made */

/* Runs argv (PATH searched) to its end: its status. */
static int run_cmd(char *const argv[])
{
	struct wr_proc p;
	int rc = wr_start(&p, argv);

	if (rc == 0)
		rc = wr_finish(&p, 30000);
	if (rc != 0)
		fprintf(stderr, "%s %s: status %d: %s", argv[0], argv[1] ? argv[1] : "", rc,
			p.err.p ? p.err.p : "");
	wr_free(&p);
	return rc;
}

static int netns_cmd(const char *verb, const char *name)
{
	char *argv[] = { (char *)"ip", (char *)"netns", (char *)verb, (char *)name, NULL };

	return run_cmd(argv);
}

static void cg_remove(void)
{
	char sub[PATH_MAX + 16];

	if (!cg_dir[0])
		return;
	snprintf(sub, sizeof(sub), "%s/child", cg_dir);
	rmdir(sub);
	snprintf(sub, sizeof(sub), "%s-other", cg_dir);
	rmdir(sub);
	rmdir(cg_dir);
	cg_dir[0] = 0;
}

static void clean(void)
{
	char path[PATH_MAX];

	for (int k = 0; k < 2; k++) {
		const char *ns = k ? ns_b : ns_a;

		snprintf(path, sizeof(path), "/run/netns/%s", ns);
		if (ns[0] && access(path, F_OK) == 0)
			netns_cmd("del", ns);
	}
	cg_remove();
}

static int group_setup(void **state)
{
	FILE *f = setmntent("/proc/self/mounts", "re");
	struct mntent *m;

	(void)state;
	nu_netns_sweep(); /* of earlier runs whose process is gone */
	snprintf(ns_a, sizeof(ns_a), "weft-scope-%d-a", (int)getpid());
	snprintf(ns_b, sizeof(ns_b), "weft-scope-%d-b", (int)getpid());
	atexit(clean);
	if (netns_cmd("add", ns_a) || netns_cmd("add", ns_b))
		return -1;
	while (f && (m = getmntent(f)))
		if (strcmp(m->mnt_type, "cgroup2") == 0 && !cg_root[0])
			snprintf(cg_root, sizeof(cg_root), "%s", m->mnt_dir);
	if (f)
		endmntent(f);
	return 0;
}

static int group_teardown(void **state)
{
	(void)state;
	clean();
	return 0;
}

/* Workload `name` (N calls on 2 threads, holding them until its stdin closes), in network
 * namespace `ns` if not NULL: its pid. */
static long wl_start(struct wr_proc *p, const char *name, const char *ns, unsigned long n)
{
	char num[32], self[64], want[PATH_MAX];
	char *argv[10];
	struct stat a, b;
	int k = 0;

	snprintf(num, sizeof(num), "%lu", n);
	if (ns) {
		argv[k++] = (char *)"ip";
		argv[k++] = (char *)"netns";
		argv[k++] = (char *)"exec";
		argv[k++] = (char *)ns;
	}
	argv[k++] = (char *)wr_workload(name);
	argv[k++] = num;
	argv[k++] = (char *)"2";
	argv[k++] = (char *)"wait";
	argv[k] = NULL;
	if (wr_workload_start(p, argv) != 0) {
		wr_dump(p, name);
		fail_msg("workload %s did not start", name);
	}
	if (ns) { /* `ip netns exec` execs in place: the workload is in the namespace */
		snprintf(self, sizeof(self), "/proc/%d/ns/net", (int)p->pid);
		snprintf(want, sizeof(want), "/run/netns/%s", ns);
		assert_int_equal(stat(self, &a), 0);
		assert_int_equal(stat(want, &b), 0);
		assert_true(a.st_ino == b.st_ino);
	}
	return (long)p->pid;
}

/* Lets the workload make its calls and checks it made them all. */
static void wl_finish(struct wr_proc *p, const char *name)
{
	if (wr_finish(p, WAIT_MS) != 0) {
		wr_dump(p, name);
		fail_msg("workload %s failed", name);
	}
}

/* `weft run --format json ARGS... QUERY`, waited for until attached. */
static void weft_start(struct wr_proc *p, const char *a1, const char *a2, const char *a3,
		       const char *a4, const char *query)
{
	const char *args[5] = { a1, a2, a3, a4, NULL };
	const char *v[6];
	int n = 0;

	for (int i = 0; args[i]; i++)
		v[n++] = args[i];
	v[n++] = query;
	while (n < 6)
		v[n++] = NULL;
	assert_int_equal(wr_weft_start(p, "--format", "json", v[0], v[1], v[2], v[3], v[4], v[5],
				       (char *)NULL),
			 0);
	if (wr_wait_err(p, "attached", WAIT_MS) != 0) {
		wr_finish(p, 5000);
		wr_dump(p, "weft run");
		fail_msg("weft run did not attach");
	}
}

/* Ends a run with SIGINT; its windows (checked: no loss of any kind) into j. */
static void weft_end_json(struct wr_proc *p, struct wr_json *j)
{
	kill(p->pid, SIGINT);
	if (wr_finish(p, WR_TIMEOUT_MS) != 0) {
		wr_dump(p, "weft run");
		fail_msg("weft run failed");
	}
	wr_json_lines(&p->out, j);
	wr_check_windows(j);
}

/* Ends a run and sums column n over its windows and rows. */
static long long weft_end(struct wr_proc *p)
{
	struct wr_json j;
	long long n;

	weft_end_json(p, &j);
	n = wr_sum_col(&j, "n", NULL, 0);
	wr_json_free(&j);
	return n;
}

static void test_netns_syscall(void **state)
{
	struct wr_proc a, b, in_a, in_b, all;
	struct wr_json j;
	char scope_a[128], scope_b[128], q_all[256];
	long pa, pb;

	(void)state;
	pa = wl_start(&a, "wl_syscalls", ns_a, N_A);
	pb = wl_start(&b, "wl_syscalls", ns_b, N_B);
	snprintf(scope_a, sizeof(scope_a), "netns:/run/netns/%s", ns_a);
	snprintf(scope_b, sizeof(scope_b), "netns:/proc/%ld/ns/net", pb);
	snprintf(q_all, sizeof(q_all),
		 "from syscall:getppid where pid = %ld or pid = %ld group by pid "
		 "select count() as n",
		 pa, pb);
	weft_start(&in_a, "--scope", scope_a, NULL, NULL,
		   "from syscall:getppid select count() as n");
	weft_start(&in_b, "--scope", scope_b, NULL, NULL,
		   "from syscall:getppid select count() as n");
	weft_start(&all, q_all, NULL, NULL, NULL, NULL);
	wl_finish(&a, "wl_syscalls in A");
	wl_finish(&b, "wl_syscalls in B");
	assert_int_equal(weft_end(&in_a), N_A);
	assert_int_equal(weft_end(&in_b), N_B);
	weft_end_json(&all, &j);
	assert_int_equal(wr_sum_col(&j, "n", "pid", pa), N_A);
	assert_int_equal(wr_sum_col(&j, "n", "pid", pb), N_B);
	wr_json_free(&j);
	wr_free(&a);
	wr_free(&b);
	wr_free(&in_a);
	wr_free(&in_b);
	wr_free(&all);
}

static void test_netns_uprobe(void **state)
{
	struct wr_proc a, b, in_a, in_b, pa_a, pa_b;
	char scope_a[128], scope_b[128], q[PATH_MAX + 64], pid_a[32];
	long pa;

	(void)state;
	pa = wl_start(&a, "wl_calls", ns_a, N_A);
	wl_start(&b, "wl_calls", ns_b, N_B);
	snprintf(pid_a, sizeof(pid_a), "%ld", pa);
	snprintf(scope_a, sizeof(scope_a), "netns:/run/netns/%s", ns_a);
	snprintf(scope_b, sizeof(scope_b), "netns:/run/netns/%s", ns_b);
	snprintf(q, sizeof(q), "from uprobe:%s:wl_call select count() as n",
		 wr_workload("wl_calls"));
	weft_start(&in_a, "--scope", scope_a, NULL, NULL, q);
	weft_start(&in_b, "--scope", scope_b, NULL, NULL, q);
	weft_start(&pa_a, "-p", pid_a, "--scope", scope_a, q);
	weft_start(&pa_b, "-p", pid_a, "--scope", scope_b, q);
	wl_finish(&a, "wl_calls in A");
	wl_finish(&b, "wl_calls in B");
	assert_int_equal(weft_end(&in_a), N_A);
	assert_int_equal(weft_end(&in_b), N_B);
	assert_int_equal(weft_end(&pa_a), N_A);
	assert_int_equal(weft_end(&pa_b), 0);
	wr_free(&a);
	wr_free(&b);
	wr_free(&in_a);
	wr_free(&in_b);
	wr_free(&pa_a);
	wr_free(&pa_b);
}

/* `weft run --scope SCOPE -c 'ip netns exec NS wl_usdt N'` counting weft_test:tick: the
 * command is in namespace NS, so the scope passes it or not. */
static long long usdt_in(const char *ns, const char *scope_ns, long n)
{
	char scope[128], cmd[PATH_MAX + 128], q[PATH_MAX + 64];
	struct wr_proc p;
	struct wr_json j;
	long long sum;
	int rc;

	snprintf(scope, sizeof(scope), "netns:/run/netns/%s", scope_ns);
	snprintf(cmd, sizeof(cmd), "ip netns exec %s '%s' %ld", ns, wr_workload("wl_usdt"), n);
	snprintf(q, sizeof(q), "from usdt:%s:weft_test:tick select count() as n",
		 wr_workload("wl_usdt"));
	rc = wr_weft_run(&p, "--format", "json", "--scope", scope, "-c", cmd, q);
	if (rc != 0) {
		wr_dump(&p, "weft run -c");
		fail_msg("weft run -c failed");
	}
	wr_json_lines(&p.out, &j);
	wr_check_windows(&j);
	sum = wr_sum_col(&j, "n", NULL, 0);
	wr_json_free(&j);
	wr_free(&p);
	return sum;
}

/* A USDT probe (wl_usdt fires weft_test:tick N times) with -c: scoped to the command's
 * namespace it counts N, scoped to the other one nothing. */
static void test_netns_usdt(void **state)
{
	(void)state;
	assert_int_equal(usdt_in(ns_a, ns_a, 5003), 5003);
	assert_int_equal(usdt_in(ns_a, ns_b, 5003), 0);
}

/* Moves process pid (all its threads) into cgroup directory dir. */
static void cg_move(const char *dir, long pid)
{
	char path[PATH_MAX + 32];
	FILE *f;

	snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
	f = fopen(path, "w");
	assert_non_null(f);
	fprintf(f, "%ld\n", pid);
	assert_int_equal(fclose(f), 0);
}

static void test_cgroup(void **state)
{
	struct wr_proc a, b, in_cg, in_other;
	char child[PATH_MAX + 16], other[PATH_MAX + 16], scope_cg[PATH_MAX + 16],
		scope_other[PATH_MAX + 32];
	const char *q = "from syscall:getppid select count() as n";
	long pa, pb;

	(void)state;
	if (!cg_root[0]) {
		wt_skip("no cgroup2 file system is mounted");
		return;
	}
	snprintf(cg_dir, sizeof(cg_dir), "%s/weft-scope-%d", cg_root, (int)getpid());
	snprintf(child, sizeof(child), "%s/child", cg_dir);
	snprintf(other, sizeof(other), "%s-other", cg_dir);
	assert_int_equal(mkdir(cg_dir, 0755), 0);
	assert_int_equal(mkdir(child, 0755), 0);
	assert_int_equal(mkdir(other, 0755), 0);
	pa = wl_start(&a, "wl_syscalls", NULL, N_A);
	pb = wl_start(&b, "wl_syscalls", NULL, N_B);
	cg_move(child, pa);
	cg_move(other, pb);
	snprintf(scope_cg, sizeof(scope_cg), "cgroup:%s", cg_dir);
	snprintf(scope_other, sizeof(scope_other), "cgroup:%s", other);
	weft_start(&in_cg, "--scope", scope_cg, NULL, NULL, q);
	weft_start(&in_other, "--scope", scope_other, NULL, NULL, q);
	wl_finish(&a, "wl_syscalls in the child cgroup");
	wl_finish(&b, "wl_syscalls in the other cgroup");
	assert_int_equal(weft_end(&in_cg), N_A);
	assert_int_equal(weft_end(&in_other), N_B);
	wr_free(&a);
	wr_free(&b);
	wr_free(&in_cg);
	wr_free(&in_other);
	cg_remove();
}

/* weft run --scope SPEC exits 2 with [E_SCOPE] and attaches nothing. */
static void assert_refused(const char *spec)
{
	struct wr_proc p;
	int rc = wr_weft_run(&p, "--scope", spec, "from syscall:getppid select count()");

	if (rc != 2 || !strstr(p.err.p, "[E_SCOPE]") || strstr(p.err.p, "attached")) {
		wr_dump(&p, spec);
		fail_msg("--scope %s was not refused as it should be", spec);
	}
	wr_free(&p);
}

/* weft agent --scope SPEC exits 2 with [E_SCOPE] before it reads its keys (missing here) or
 * connects anywhere. */
static void assert_agent_refused(const char *spec)
{
	char *argv[] = { getenv("WEFT_BIN"),
			 (char *)"agent",
			 (char *)"--connect",
			 (char *)"tcp://127.0.0.1:9",
			 (char *)"--server-key",
			 (char *)"/nonexistent/weft.pub",
			 (char *)"--key",
			 (char *)"/nonexistent/weft.key",
			 (char *)"--scope",
			 (char *)spec,
			 NULL };
	struct wr_proc p;
	int rc = wr_start(&p, argv);

	if (rc == 0)
		rc = wr_finish(&p, WAIT_MS);
	if (rc != 2 || !strstr(p.err.p, "[E_SCOPE]")) {
		wr_dump(&p, spec);
		fail_msg("weft agent --scope %s was not refused as it should be", spec);
	}
	wr_free(&p);
}

static void test_errors(void **state)
{
	char tmp[] = "/tmp/weft-scope-XXXXXX", spec[PATH_MAX];

	(void)state;
	assert_non_null(mkdtemp(tmp));
	assert_refused("netns:/nonexistent/weft-scope");
	assert_refused("netns:/proc/self/ns/pid");
	snprintf(spec, sizeof(spec), "netns:%s", tmp);
	assert_refused(spec);
	snprintf(spec, sizeof(spec), "cgroup:%s", tmp);
	assert_refused(spec);
	assert_refused("cgroup:/proc/self/ns/net");
	assert_refused("cgroup:/nonexistent/weft-scope");
	assert_refused("pid:1");
	assert_refused("netns:");
	rmdir(tmp);
	assert_agent_refused("netns:/proc/self/ns/pid");
	assert_agent_refused("cgroup:/nonexistent/weft-scope");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_netns_syscall), cmocka_unit_test(test_netns_uprobe),
		cmocka_unit_test(test_netns_usdt),    cmocka_unit_test(test_cgroup),
		cmocka_unit_test(test_errors),
	};

	if (!wr_ready())
		return WT_SKIP;
	return wt_status(cmocka_run_group_tests(tests, group_setup, group_teardown));
}
