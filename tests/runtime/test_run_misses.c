// SPDX-License-Identifier: Apache-2.0
/*
 * Events the kernel never runs weft's programs for, counted exactly: `misses` (the
 * bpf_recursion_miss loss of docs/output.md).
 *
 * The kernel does not run a tracing program on a CPU while another one runs there: an event
 * that fires inside a BPF program is skipped, and the kernel counts it in the skipped
 * program's recursion_misses (kernels 6.7 and later, for tracepoint programs).  A helper
 * program of this test, attached to syscalls:sys_enter_getppid and filtered to one workload,
 * calls bpf_printk() on every call, which fires the tracepoint bpf_trace:bpf_trace_printk
 * inside it; `weft run` counts that tracepoint.  So every one of the workload's N getppid()
 * calls is an event weft's program is not run for: its windows count nothing and, summed over
 * the windows, exactly N misses, however many windows there are.  The calls come in two
 * phases with windows between them: each window reports the misses since the one before
 * (the kernel's counter only grows; a window that reported the running total would count
 * the first phase again).
 *
 * bpf_printk() writes to the kernel's trace buffer, and its first use prints a notice in the
 * kernel log ("trace_printk() being used"): both are harmless.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <linux/perf_event.h>
#include <cmocka.h>
#include "tools/bench/rt_harness.h"
#include "tests/runtime/run_util.h"
#include "tests/skip.h"

#define PRINTK_TP "/sys/kernel/tracing/events/bpf_trace/bpf_trace_printk"

static const char helper_src[] =
	"#include \"weft.bpf.h\"\n"
	"\n"
	"/* [0]: printing on (1) or off (0); [1]: bpf_printk() calls made */\n"
	"struct {\n"
	"	__uint(type, BPF_MAP_TYPE_ARRAY);\n"
	"	__uint(max_entries, 2);\n"
	"	__type(key, __u32);\n"
	"	__type(value, __u64);\n"
	"} ctl SEC(\".maps\");\n"
	"\n"
	"SEC(\"perf_event\")\n"
	"int p_tick(void *ctx)\n"
	"{\n"
	"	__u32 k0 = 0, k1 = 1;\n"
	"	__u64 *on = bpf_map_lookup_elem(&ctl, &k0), *n = bpf_map_lookup_elem(&ctl, &k1);\n"
	"\n"
	"	if (!on || !n || !*on)\n"
	"		return 0;\n"
	"	__sync_fetch_and_add(n, 1);\n"
	"	bpf_printk(\"weft test_run_misses\");\n"
	"	return 0;\n"
	"}\n";

/* The kernel counts a tracepoint program's skipped events from 6.7 on. */
static bool kernel_counts_misses(void)
{
	struct utsname u;
	int major = 0, minor = 0;

	if (uname(&u) != 0 || sscanf(u.release, "%d.%d", &major, &minor) != 2)
		return false;
	return major > 6 || (major == 6 && minor >= 7);
}

/* Sums `misses` and the count column over the windows of the complete lines printed so far. */
static void sum_windows(const struct wr_buf *out, long long *misses, long long *n,
			size_t *windows_missing)
{
	const char *last = out->p ? memrchr(out->p, '\n', out->len) : NULL;
	struct wr_buf done = { .p = out->p, .len = last ? (size_t)(last - out->p) + 1 : 0 };
	struct wr_json j;

	*misses = *n = 0;
	*windows_missing = 0;
	wr_json_lines(&done, &j);
	for (size_t i = 0; i < j.n; i++)
		if (wr_is_type(j.v[i], "window")) {
			long long m = wj_int_of(j.v[i], "misses");

			*misses += m;
			*windows_missing += m > 0;
		}
	*n = wr_sum_col(&j, "n", NULL, 0);
	wr_json_free(&j);
}

/* Reads weft's output until its windows have reported `want` misses (bounded by
 * WR_TIMEOUT_MS); the sums of sum_windows() then. */
static void wait_misses(struct wr_proc *weft, long long want, long long *misses, long long *n,
			size_t *windows_missing)
{
	uint64_t end = wr_now_ms() + WR_TIMEOUT_MS;

	do {
		wr_pump(weft, 100);
		sum_windows(&weft->out, misses, n, windows_missing);
	} while (*misses < want && wr_now_ms() < end);
}

/* The helper's control: printing on or off, and the bpf_printk() calls it made so far. */
static void helper_set(struct rt_prog *helper, __u64 on)
{
	__u32 k = 0;

	assert_int_equal(bpf_map_update_elem(bpf_object__find_map_fd_by_name(helper->obj, "ctl"),
					     &k, &on, BPF_ANY),
			 0);
}

static long long helper_printed(struct rt_prog *helper)
{
	__u32 k = 1;
	__u64 n = 0;

	assert_int_equal(
		bpf_map_lookup_elem(bpf_object__find_map_fd_by_name(helper->obj, "ctl"), &k, &n),
		0);
	return (long long)n;
}

/* Lets the helper print until it has made `want` calls in all. */
static void helper_print_until(struct rt_prog *helper, long long want)
{
	uint64_t end = wr_now_ms() + WR_TIMEOUT_MS;

	helper_set(helper, 1);
	while (helper_printed(helper) < want && wr_now_ms() < end)
		wr_sleep_ms(5);
	helper_set(helper, 0);
	assert_true(helper_printed(helper) >= want);
}

/* The helper on a 1 ms cpu-clock timer of CPU 0 (a perf event: it runs in the timer's
 * interrupt, where the tracepoint it fires is not refused by perf's own recursion guard). */
static int helper_attach(struct rt_prog *helper)
{
	struct perf_event_attr attr = {
		.type = PERF_TYPE_SOFTWARE,
		.size = sizeof(attr),
		.config = PERF_COUNT_SW_CPU_CLOCK,
		.sample_period = 1000000,
	};
	struct bpf_program *prog = bpf_object__find_program_by_name(helper->obj, "p_tick");
	int fd = (int)syscall(__NR_perf_event_open, &attr, -1, 0, -1, PERF_FLAG_FD_CLOEXEC);

	if (fd < 0 || !prog)
		return -errno;
	helper->links[helper->nlinks] = bpf_program__attach_perf_event(prog, fd);
	if (!helper->links[helper->nlinks]) {
		close(fd);
		return -errno;
	}
	helper->nlinks++;
	return 0;
}

static void test_misses_per_window(void **state)
{
	static const char *const manual[] = { "p_tick", NULL };
	char obj[PATH_MAX];
	struct rt_prog helper = { 0 };
	struct wr_proc weft;
	long long misses = 0, n = 0, first, printed;
	size_t windows_missing = 0;

	(void)state;
	assert_int_equal(rt_compile(&helper, "misses_helper", helper_src, obj, sizeof(obj)), 0);
	assert_int_equal(rt_load(&helper, obj, NULL, NULL, manual), 0);
	assert_int_equal(helper_attach(&helper), 0);

	assert_int_equal(wr_weft_start(&weft, "--format", "json",
				       "from tracepoint:bpf_trace:bpf_trace_printk "
				       "select count() as n every 100ms",
				       (char *)NULL),
			 0);
	if (wr_wait_err(&weft, "attached", WR_TIMEOUT_MS) != 0) {
		wr_finish(&weft, 1000);
		wr_dump(&weft, "weft run");
		fail_msg("weft did not attach");
	}

	helper_print_until(&helper, 50);
	first = helper_printed(&helper);
	/* until weft's windows have reported the first phase's misses (a tick in flight when
	 * printing was switched off may add one: the exact total is checked at the end) */
	wait_misses(&weft, first, &misses, &n, &windows_missing);
	printf("# first phase: %lld printk calls, %lld misses in %zu windows\n", first, misses,
	       windows_missing);
	assert_true(misses >= first);
	/* windows go by with nothing skipped: each reports 0, not the total so far */
	wr_pump(&weft, 300);

	helper_print_until(&helper, first + 100);
	rt_detach(&helper); /* the perf event closed: no tick of it runs any more */
	printed = helper_printed(&helper);
	wait_misses(&weft, printed, &misses, &n, &windows_missing);
	kill(weft.pid, SIGINT);
	if (wr_finish(&weft, WR_TIMEOUT_MS) != 0) {
		wr_dump(&weft, "weft run");
		fail_msg("weft run failed");
	}
	rt_unload(&helper);

	sum_windows(&weft.out, &misses, &n, &windows_missing);
	printf("# both phases: %lld printk calls, %lld misses in %zu windows, %lld events "
	       "counted\n",
	       printed, misses, windows_missing, n);
	assert_int_equal(misses, printed);
	assert_true(windows_missing >= 2); /* the phases were apart: at least one window each */
	assert_int_equal(n, 0); /* every printk fired inside the helper: none ran weft's program */
	wr_free(&weft);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_misses_per_window),
	};

	if (!wt_root("it loads and attaches BPF programs") || !wr_ready())
		return WT_SKIP;
	if (access(PRINTK_TP, F_OK) != 0) {
		fprintf(stderr, "skipped: no tracepoint bpf_trace:bpf_trace_printk (%s)\n",
			PRINTK_TP);
		return WT_SKIP;
	}
	if (!kernel_counts_misses()) {
		fprintf(stderr, "skipped: this kernel does not count a tracepoint program's "
				"skipped events (recursion_misses; 6.7 and later)\n");
		return WT_SKIP;
	}
	return wt_status(cmocka_run_group_tests(tests, NULL, NULL));
}
