// SPDX-License-Identifier: Apache-2.0
/*
 * A full aggregation map against the real kernel: an event whose group does not fit is counted
 * as map_full, never silently lost.  `group by tid select count()` over 4 workload threads
 * with the map resized (bpfrt_map_resize, before load) to 2 groups per half: every window
 * holds at most 2 groups, some events are dropped, and counted + dropped == N exactly.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include "kernel/weft_aggval.h"
#include "tools/bench/rt_harness.h"
#include "tests/skip.h"

#define N_CALLS 400000ul
#define N_THREADS 4ul
#define MAX_GROUPS 2u

static const char prog_src[] = "#include \"weft.bpf.h\"\n"
			       "\n"
			       "struct k0 { __u32 tid; __u32 _pad; };\n"
			       "struct v0 { struct weft_aggval_count c; };\n"
			       "WEFT_AGG_HASH(agg, struct k0, struct v0, 10240);\n"
			       "\n"
			       "SEC(\"tp/syscalls/sys_enter_getppid\")\n"
			       "int p_count(void *ctx)\n"
			       "{\n"
			       "	__u32 e = weft_epoch();\n"
			       "	if (!weft_pid_ok())\n"
			       "		return 0;\n"
			       "	struct k0 k = { .tid = weft_tid() };\n"
			       "	struct v0 *v = WEFT_AGG_GET(agg, e, &k);\n"
			       "	if (!v)\n"
			       "		return 0;\n"
			       "	weft_aggval_count_add(&v->c, 0);\n"
			       "	return 0;\n"
			       "}\n";

struct result {
	__u64 count;
	unsigned int groups, max_groups;
	uint64_t drops[WEFT_DROP_NR];
};

static int on_group(void *ctx, const void *key, const void *const *vals, unsigned int ncpu)
{
	struct result *r = ctx;

	for (unsigned int cpu = 0; cpu < ncpu; cpu++)
		r->count += ((const struct weft_aggval_count *)vals[cpu])->n;
	r->groups++;
	return 0;
}

static int setup(struct bpf_object *obj, void *arg)
{
	int err = rt_set_target(obj, *(pid_t *)arg);

	return err ? err : bpfrt_map_resize(obj, "agg", MAX_GROUPS);
}

static void collect(struct rt_prog *p, struct result *r)
{
	int n;

	assert_int_equal(bpfrt_window_flip(p->rt), 0);
	r->groups = 0;
	n = bpfrt_agg_drain(p->rt, "agg", on_group, r);
	assert_true(n >= 0);
	assert_int_equal((unsigned int)n, r->groups);
	if (r->groups > r->max_groups)
		r->max_groups = r->groups;
	assert_int_equal(bpfrt_drops_read(p->rt, r->drops), 0);
}

static void test_map_full_counted(void **state)
{
	struct rt_prog p = { 0 };
	struct result r = { 0 };
	struct rt_wl wl = { .pid = -1, .go_fd = -1 };
	char obj[PATH_MAX];
	__u32 ksz, vsz;
	int running;

	(void)state;
	assert_int_equal(rt_compile(&p, "mapfull", prog_src, obj, sizeof(obj)), 0);
	assert_int_equal(rt_wl_start(&wl, N_CALLS, N_THREADS), 0);
	assert_int_equal(rt_load(&p, obj, setup, &wl.pid, NULL), 0);
	assert_int_equal(bpfrt_agg_sizes(p.rt, "agg", &ksz, &vsz), 0);
	assert_int_equal(ksz, 8);
	assert_int_equal(vsz, 8);
	assert_int_equal(rt_wl_go(&wl), 0);
	do {
		rt_sleep_us(1000);
		running = rt_wl_poll(&wl, 0);
		collect(&p, &r);
	} while (running == 1);
	assert_int_equal(running, 0);
	collect(&p, &r);
	printf("# %llu counted, %llu dropped (map full), at most %u groups in a window\n",
	       (unsigned long long)r.count, (unsigned long long)r.drops[WEFT_DROP_MAP_FULL],
	       r.max_groups);
	assert_true(r.drops[WEFT_DROP_MAP_FULL] > 0);
	assert_int_equal(r.count + r.drops[WEFT_DROP_MAP_FULL], N_CALLS);
	assert_true(r.max_groups <= MAX_GROUPS);
	assert_true(r.max_groups > 0);
	rt_unload(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_map_full_counted),
	};

	if (!wt_root("it loads and attaches BPF programs"))
		return WT_SKIP;
	return wt_status(cmocka_run_group_tests(tests, NULL, NULL));
}
