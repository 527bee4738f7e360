// SPDX-License-Identifier: Apache-2.0
/*
 * End to end, hardware perf events.  Where this machine exposes a PMU (perf_event_open of
 * PERF_COUNT_HW_CPU_CYCLES succeeds), `hardware:instructions:1000000` over `wl_perf spin 300`
 * samples wl_spin (a loop of millions of instructions: at least one sample, and every sample
 * of the process under its name; the count itself depends on the CPU).  Where it does not (a
 * virtual machine without a virtual PMU, as the machine this was written on), weft must
 * refuse the query before running anything, with E_PROBE_FEATURE placed on the probe and
 * the software alternative in the fix, and the counting test is skipped with the reason.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <linux/perf_event.h>
#include <sys/syscall.h>
#include "run_util.h"
#include "tests/skip.h"

/* 0 if the kernel can count cycles here, else the errno of perf_event_open. */
static int pmu_errno(void)
{
	struct perf_event_attr attr;
	int fd;

	memset(&attr, 0, sizeof(attr));
	attr.size = sizeof(attr);
	attr.type = PERF_TYPE_HARDWARE;
	attr.config = PERF_COUNT_HW_CPU_CYCLES;
	attr.disabled = 1;
	attr.sample_period = 1000000;
	fd = (int)syscall(__NR_perf_event_open, &attr, -1, 0, -1, 0);
	if (fd >= 0) {
		close(fd);
		return 0;
	}
	return errno ? errno : EIO;
}

static void test_hardware(void **state)
{
	char cmd[PATH_MAX + 32];
	struct wr_proc p;
	int e = pmu_errno(), rc;

	(void)state;
	snprintf(cmd, sizeof(cmd), "'%s' spin 300", wr_workload("wl_perf"));
	if (e) {
		rc = wr_weft_run(&p, "-c", cmd, "from hardware:cycles select count()");
		assert_int_equal(rc, 3); /* a query error: nothing ran */
		assert_non_null(strstr(p.err.p, "query:1:6: error: hardware events are not "
						"available here"));
		assert_non_null(strstr(p.err.p, "[E_PROBE_FEATURE]"));
		assert_non_null(strstr(p.err.p, "software:cpu-clock"));
		assert_null(strstr(p.out.p, "wl_perf:")); /* the workload never started */
		wr_free(&p);
		wt_skip("no hardware PMU here (perf_event_open of cpu-cycles: %s): the error is "
			"checked, counting is not",
			strerror(e));
		return;
	}
	{
		struct wr_json j;
		const struct wj *w;

		rc = wr_weft_run(
			&p, "--format", "json", "-c", cmd,
			"from hardware:instructions:1000000 group by comm select count() as n");
		if (rc)
			wr_dump(&p, "hardware");
		assert_int_equal(rc, 0);
		wr_json_lines(&p.out, &j);
		w = wr_one_window(&j);
		assert_int_equal(wr_nrows(w), 1);
		assert_true(wj_int_of(wr_row(w, 0), "n") >= 1);
		wr_json_free(&j);
		wr_free(&p);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = { cmocka_unit_test(test_hardware) };

	if (!wr_ready())
		return WT_SKIP;
	return wt_status(cmocka_run_group_tests(tests, NULL, NULL));
}
