// SPDX-License-Identifier: Apache-2.0
/*
 * End to end, errors: the real `weft run` exits with the documented status and names the
 * error by its stable tag.  A query with an error exits 3 with `[TAG]` and its place
 * (`query:LINE:COL`) on stderr and prints nothing on stdout; a bad command line exits 2.
 * Every query carries `for 1s`, so that if weft wrongly accepted one it would end on its own
 * (and fail the status check) rather than run until the harness kills it.
 *
 * The later stages, each provoked for real: clang failing (E_CLANG, exit 3: WEFT_CLANG names
 * a program that fails), the kernel's verifier refusing the program (E_VERIFIER, exit 1:
 * WEFT_CLANG names a wrapper that appends a program with an unchecked map lookup to the
 * generated source before it runs the real clang), and an attachment failing (E_ATTACH, exit
 * 1: a uprobe with -p of a zombie, which /proc and kill(0) still show, but to which the
 * kernel will not attach).  WEFT_CACHE_DIR is a fresh directory, so clang runs every time.
 * And a kernel struct field missing on the kernel the query is loaded on (E_BTF_RELOC, exit
 * 1): the query is compiled against a BTF file written here (WEFT_BTF) whose task_struct has
 * a member this kernel's lacks, so libbpf's CO-RE relocation finds no match at load.  And
 * libzmq and libbabeltrace2 missing (test_without_libzmq): `weft run` unaffected, the
 * cluster commands and the CTF import stop with the reason.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <dlfcn.h>
#include <limits.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <zmq.h>
#include "run_util.h"
#include "tests/skip.h"

#define ERR_TIMEOUT_MS 20000

/* Runs `weft run ARGS...` and checks its status, that stderr holds `want` and stdout is
 * empty. */
static void expect(int status, const char *want, char *const args[])
{
	char *argv[WR_MAX_ARGS] = { getenv("WEFT_BIN"), (char *)"run" };
	struct wr_proc p;
	int n = 2, rc;

	for (int i = 0; args[i] && n < WR_MAX_ARGS - 1; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	assert_int_equal(wr_start(&p, argv), 0);
	rc = wr_finish(&p, ERR_TIMEOUT_MS);
	if (rc != status || !strstr(p.err.p, want) || p.out.len != 0) {
		wr_dump(&p, "weft run");
		fail_msg("status %d (%d expected), stderr %s '%s'", rc, status,
			 strstr(p.err.p, want) ? "has" : "lacks", want);
	}
	if (status == 3 && !strstr(p.err.p, "query:1:"))
		fail_msg("the error does not name its place: %s", p.err.p);
	wr_free(&p);
}

#define EXPECT(status, want, ...) expect((status), (want), (char *const[]){ __VA_ARGS__, NULL })

static void test_query_errors(void **state)
{
	(void)state;
	EXPECT(3, "[E_PROBE_UNKNOWN]", (char *)"from syscall:getppidx select count() for 1s");
	EXPECT(3, "[E_FIELD_UNKNOWN]", (char *)"from syscall:read select sum(args.nope) for 1s");
	EXPECT(3, "[E_AGG_IN_WHERE]",
	       (char *)"from syscall:getppid where count() > 1 select count() for 1s");
	EXPECT(3, "[E_QUANTILE_RANGE]",
	       (char *)"from syscall:read select quantile(args.count, 1.5) for 1s");
	EXPECT(3, "[E_PROBE_BINARY]",
	       (char *)"from uprobe:/nonexistent/weft-test-bin:main select count() for 1s");
	/* the same with --format json: errors are never JSON on stdout */
	EXPECT(3, "[E_PROBE_UNKNOWN]", (char *)"--format", (char *)"json",
	       (char *)"from syscall:getppidx select count() for 1s");
}

/* On a kernel without kprobes the query is refused, naming the fix (skipped on a kernel that
 * has them). */
static void test_kprobe_refused(void **state)
{
	struct stat st;

	(void)state;
	if (stat("/sys/bus/event_source/devices/kprobe", &st) == 0)
		wt_skip("test_kprobe_refused: this kernel has kprobes");
	EXPECT(3, "[E_PROBE_FEATURE]", (char *)"from kprobe:do_sys_open select count() for 1s");
}

static void test_usage_errors(void **state)
{
	char pid[32];
	int p;

	(void)state;
	for (p = 999999; kill(p, 0) == 0 || errno != ESRCH; p++)
		; /* a pid no process has */
	snprintf(pid, sizeof(pid), "%d", p);
	EXPECT(2, pid, (char *)"-p", pid, (char *)"from syscall:getppid select count() for 1s");
	EXPECT(2, "xml", (char *)"--format", (char *)"xml",
	       (char *)"from syscall:getppid select count() for 1s");
	EXPECT(2, "-p", (char *)"-p", (char *)"1", (char *)"-c", (char *)"true",
	       (char *)"from syscall:getppid select count() for 1s");
	EXPECT(2, "", (char *)"--no-such-option", (char *)"from syscall:getppid select count()");
	/* `for` and `every` are clauses: said so, not taken for an abbreviation of --format */
	EXPECT(2, "`for` is a clause of the query", (char *)"--for", (char *)"9s",
	       (char *)"from syscall:getppid select count()");
	EXPECT(2, "`every` is a clause of the query", (char *)"--every=1s",
	       (char *)"from syscall:getppid select count()");
}

/* A program the verifier refuses: it writes through a map lookup it did not check. */
static const char bad_program[] = "struct {\n"
				  "\t__uint(type, BPF_MAP_TYPE_HASH);\n"
				  "\t__uint(max_entries, 1);\n"
				  "\t__type(key, __u32);\n"
				  "\t__type(value, __u64);\n"
				  "} weft_test_bad SEC(\".maps\");\n"
				  "SEC(\"tracepoint\")\n"
				  "int weft_test_bad_prog(void *ctx)\n"
				  "{\n"
				  "\t__u32 k = 0;\n"
				  "\t__u64 *v = bpf_map_lookup_elem(&weft_test_bad, &k);\n"
				  "\t*v += 1;\n"
				  "\treturn 0;\n"
				  "}\n";

static void file_write(const char *path, const char *text, mode_t mode)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	assert_true(fputs(text, f) >= 0);
	assert_int_equal(fclose(f), 0);
	assert_int_equal(chmod(path, mode), 0);
}

static void test_later_stage_errors(void **state)
{
	char dir[] = "/tmp/weft-test-errors-XXXXXX", path[PATH_MAX], cache[PATH_MAX + 8];
	char wrapper[PATH_MAX + 8], script[2 * PATH_MAX + 128], query[PATH_MAX + 128], pid[32];
	int status;
	pid_t zombie;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(cache, sizeof(cache), "%s/cache", dir);
	assert_int_equal(setenv("WEFT_CACHE_DIR", cache, 1), 0);

	/* clang fails: the compiler's last pass reports it, at the query */
	assert_int_equal(setenv("WEFT_CLANG", "/bin/false", 1), 0);
	EXPECT(3, "[E_CLANG]", (char *)"from syscall:getppid select count() for 1s");

	/* the verifier refuses: reported with the generated line it refused */
	snprintf(path, sizeof(path), "%s/bad.c", dir);
	file_write(path, bad_program, 0644);
	snprintf(wrapper, sizeof(wrapper), "%s/clang", dir);
	snprintf(script, sizeof(script), "#!/bin/sh\ncat '%s' >>query.bpf.c\nexec '%s' \"$@\"\n",
		 path, WEFT_CLANG_PATH);
	file_write(wrapper, script, 0755);
	assert_int_equal(setenv("WEFT_CLANG", wrapper, 1), 0);
	EXPECT(1, "[E_VERIFIER]", (char *)"from syscall:getppid select count() for 1s");
	EXPECT(1, "generated line: *v += 1;", (char *)"from syscall:getppid select count() for 1s");
	assert_int_equal(unsetenv("WEFT_CLANG"), 0);

	/* a zombie: it resolves (its pid is in /proc), but no uprobe attaches to it */
	zombie = fork();
	assert_true(zombie >= 0);
	if (zombie == 0)
		_exit(0);
	assert_int_equal(waitid(P_PID, zombie, &(siginfo_t){ 0 }, WEXITED | WNOWAIT), 0);
	snprintf(pid, sizeof(pid), "%d", (int)zombie);
	snprintf(query, sizeof(query), "from uprobe:%s:wl_work select count() for 1s",
		 wr_workload("wl_usdt"));
	EXPECT(1, "[E_ATTACH]", (char *)"-p", pid, query);
	assert_int_equal(waitpid(zombie, &status, 0), zombie);

	assert_int_equal(unsetenv("WEFT_CACHE_DIR"), 0);
	assert_int_equal(wr_rm_rf(dir), 0);
}

static void test_btf_reloc(void **state)
{
	char dir[] = "/tmp/weft-test-btf-XXXXXX", path[PATH_MAX], cache[PATH_MAX + 8];

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(cache, sizeof(cache), "%s/cache", dir);
	snprintf(path, sizeof(path), "%s/vmlinux.btf", dir);
	wr_fake_btf_write(path);
	assert_int_equal(setenv("WEFT_CACHE_DIR", cache, 1), 0);
	assert_int_equal(setenv("WEFT_BTF", path, 1), 0);
	EXPECT(1, "[E_BTF_RELOC]",
	       (char *)"from syscall:getppid select curtask.weft_no_such_field for 1s");
	EXPECT(1, "the query reads struct task_struct.weft_no_such_field, which this kernel does",
	       (char *)"from syscall:getppid select curtask.tgid, curtask.weft_no_such_field "
		       "for 1s");
	assert_int_equal(unsetenv("WEFT_BTF"), 0);
	assert_int_equal(unsetenv("WEFT_CACHE_DIR"), 0);
	assert_int_equal(wr_rm_rf(dir), 0);
}

/* Where the shared object defining `sym` is mapped from, its links resolved, into path. */
static void lib_path(void *sym, char path[PATH_MAX])
{
	Dl_info info;

	if (!sym || !dladdr(sym, &info) || !info.dli_fname || !realpath(info.dli_fname, path))
		fail_msg("cannot tell where a library is mapped from");
}

/*
 * libzmq and libbabeltrace2 are opened on first use (base/zmq_dl.h, graph/bt_dl.h), not
 * linked: in a mount namespace where both libraries' files are /dev/null (their paths taken
 * from copies this test maps), `weft run` still traces and counts (wl_syscalls' 1000
 * getppid() calls, exactly), `weft keygen` and `weft
 * agent` stop at once with exit 1 and the reason, before any misleading later error, and
 * importing a CTF trace or analysing one (`weft vm`) is refused saying which library is
 * missing, never a crash.
 */
static void test_without_libzmq(void **state)
{
	char zmq[PATH_MAX], bt[PATH_MAX], script[8 * PATH_MAX + 1024];
	char dir[] = "/tmp/weft-nozmq-XXXXXX";
	char *argv[] = {
		(char *)"unshare", (char *)"-m", (char *)"sh", (char *)"-c", script, NULL
	};
	const char *weft = getenv("WEFT_BIN");
	void *btlib = dlopen("libbabeltrace2.so.0", RTLD_LAZY | RTLD_LOCAL);
	struct wr_proc p;
	int n;

	(void)state;
	lib_path((void *)zmq_version, zmq);
	lib_path(btlib ? dlsym(btlib, "bt_graph_create") : NULL, bt);
	dlclose(btlib); /* its path is all this wanted */
	assert_non_null(mkdtemp(dir));
	n = snprintf(
		script, sizeof(script),
		"mount --bind /dev/null '%s' && mount --bind /dev/null '%s' || exit 77\n"
		"'%s' run -c '%s 1000 1' 'from syscall:getppid select count() as n'; echo run=$?\n"
		"'%s' keygen -o '%s' k; echo keygen=$?\n"
		"'%s' agent --connect tcp://127.0.0.1:9 --key '%s/k.key' --server-key '%s/k.pub'; "
		"echo agent=$?\n"
		"mkdir '%s/t' && echo x > '%s/t/metadata' && '%s' graph import -S '%s/s.db' "
		"--format ctf '%s/t'; echo import=$?\n"
		"'%s' vm analyze -H 'ctf:%s/t' -g 'ctf:%s/t' --graph-store '%s/vm.db'; "
		"echo vm=$?\n",
		zmq, bt, weft, wr_workload("wl_syscalls"), weft, dir, weft, dir, dir, dir, dir,
		weft, dir, dir, weft, dir, dir, dir);
	assert_true(n > 0 && (size_t)n < sizeof(script));
	assert_int_equal(wr_start(&p, argv), 0);
	assert_int_equal(wr_finish(&p, ERR_TIMEOUT_MS), 0);
	if (p.status == 77 || p.status == 127) {
		wr_free(&p);
		assert_int_equal(wr_rm_rf(dir), 0);
		wt_skip("unshare -m (util-linux) and mount --bind are not available here");
	}
	if (!strstr(p.out.p, "run=0") || !strstr(p.out.p, "keygen=1") ||
	    !strstr(p.out.p, "agent=1") || !strstr(p.out.p, "import=1") || !strstr(p.out.p, "vm=1"))
		wr_dump(&p, "unshare");
	assert_non_null(strstr(p.out.p, "run=0"));
	/* it traced: the workload's 1000 getppid() calls, exactly */
	assert_non_null(strstr(p.out.p, "\n   n\n1000\n"));
	assert_non_null(strstr(p.out.p, "keygen=1"));
	assert_non_null(strstr(p.out.p, "agent=1"));
	assert_non_null(strstr(p.out.p, "import=1"));
	assert_non_null(strstr(p.out.p, "vm=1")); /* a reader with no import in front of it */
	/* the reasons, and nothing else said about keys or files */
	assert_non_null(strstr(p.err.p, "cannot open libzmq"));
	assert_non_null(strstr(p.err.p, "cannot open libbabeltrace2"));
	assert_null(strstr(p.err.p, "not a weft key file"));
	assert_null(strstr(p.err.p, "CURVE"));
	wr_free(&p);
	assert_int_equal(wr_rm_rf(dir), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_query_errors), cmocka_unit_test(test_kprobe_refused),
		cmocka_unit_test(test_usage_errors), cmocka_unit_test(test_later_stage_errors),
		cmocka_unit_test(test_btf_reloc),    cmocka_unit_test(test_without_libzmq),
	};

	if (!wr_ready())
		return WT_SKIP;
	return wt_status(cmocka_run_group_tests(tests, NULL, NULL));
}
