// SPDX-License-Identifier: Apache-2.0
/*
 * The real host query of `weft vm sync` (docs/vm.md "Live: guest and host agents") against
 * the real kernel: the query `weft vm sync --print-queries` writes over
 * tracepoint:kvm:kvm_hypercall (nr 0x77656674, grouped by a0) compiles, loads and attaches,
 * with and without --vm-pid, and runs its windows through `weft run`.  test_cluster_vmsync
 * runs the whole pair with a fake hypercall instead (this machine has no /dev/kvm); this is
 * the proof that the one probe it swaps is a query the kernel takes.
 *
 * Without /dev/kvm the tracepoint never fires: the window must then be empty.  Where
 * /dev/kvm exists, a guest of this machine could make such hypercalls, and the rows are not
 * asserted.  Skipped where the kernel has no kvm tracepoints (no KVM module), or not root.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "run_util.h"
#include "tests/skip.h"

#define HYPERCALL_TP "/sys/kernel/tracing/events/kvm/kvm_hypercall/format"
#define HYPERCALL_TP_OLD "/sys/kernel/debug/tracing/events/kvm/kvm_hypercall/format"

/* The host query `weft vm sync --print-queries ARGS` prints (malloc'd). */
static char *host_query(const char *vm_pid)
{
	struct wr_proc p;
	char line[4096];
	char *argv[16];
	int n = 0;

	argv[n++] = getenv("WEFT_BIN");
	argv[n++] = (char *)"vm";
	argv[n++] = (char *)"sync";
	argv[n++] = (char *)"--print-queries";
	argv[n++] = (char *)"--guest-binary";
	argv[n++] = (char *)"/bin/true";
	argv[n++] = (char *)"--for";
	argv[n++] = (char *)"1s";
	if (vm_pid) {
		argv[n++] = (char *)"--vm-pid";
		argv[n++] = (char *)vm_pid;
	}
	argv[n] = NULL;
	assert_int_equal(wr_start(&p, argv), 0);
	assert_int_equal(wr_finish(&p, WR_TIMEOUT_MS), 0);
	if (!wr_cut_line(&p.out, "host:  ", line, sizeof(line)))
		fail_msg("no host query in: %s", p.out.p ? p.out.p : "");
	wr_free(&p);
	return strdup(line + strlen("host:  "));
}

static void run_host_query(const char *vm_pid)
{
	char *q = host_query(vm_pid);
	struct wr_json j = { 0 };
	struct wr_proc p;
	const struct wj *w, *cols;
	int rc;

	assert_non_null(q);
	/* the product's query: the tracepoint, the nr, grouped by a0, nothing swapped */
	assert_non_null(strstr(q, "from tracepoint:kvm:kvm_hypercall where args.nr = 0x77656674"));
	assert_non_null(strstr(q, "group by args.a0 as id select min(time) as host_ns, "
				  "count() as n every 1s for 1s"));
	if (vm_pid) {
		char want[64];

		snprintf(want, sizeof(want), " and pid = %s ", vm_pid);
		assert_non_null(strstr(q, want));
	}
	rc = wr_weft_run(&p, (char *)"--format", (char *)"json", q);
	if (rc != 0)
		wr_dump(&p, "weft run");
	assert_int_equal(rc, 0);
	assert_non_null(strstr(p.err.p, "attached 1 probe"));
	wr_json_lines(&p.out, &j);
	w = wr_one_window(&j);
	cols = wj_get(w, "columns");
	assert_non_null(cols);
	assert_int_equal(cols->nkids, 3);
	assert_string_equal(wj_str(&cols->kids[0]), "id");
	assert_string_equal(wj_str(&cols->kids[1]), "host_ns");
	assert_string_equal(wj_str(&cols->kids[2]), "n");
	if (access("/dev/kvm", F_OK) != 0)
		assert_int_equal(wr_nrows(w), 0); /* no KVM here: the tracepoint never fires */
	wr_json_free(&j);
	wr_free(&p);
	free(q);
}

static void test_host_query(void **state)
{
	(void)state;
	run_host_query(NULL);
}

static void test_host_query_vm_pid(void **state)
{
	char pid[16];

	(void)state;
	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	run_host_query(pid);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_host_query),
		cmocka_unit_test(test_host_query_vm_pid),
	};

	if (!wr_ready())
		return WT_SKIP;
	if (access(HYPERCALL_TP, F_OK) != 0 && access(HYPERCALL_TP_OLD, F_OK) != 0) {
		fprintf(stderr, "skipped: the kernel has no kvm:kvm_hypercall tracepoint (no KVM "
				"module)\n");
		return WT_SKIP;
	}
	return wt_status(cmocka_run_group_tests(tests, NULL, NULL));
}
