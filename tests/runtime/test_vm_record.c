// SPDX-License-Identifier: Apache-2.0
/*
 * `weft vm record` live, against the real kernel, where it can run without /dev/kvm: the
 * discovery of VMMs and vCPU threads from their KVM_RUN ioctls, and the sched events of those
 * threads, merged from the query set's `weft run` children into one stream by time.
 *
 * tests/workloads/wl_kvm_ioctl is a monitor without a VM: its thread "wl_fake_vcpu0" calls
 * ioctl(fd, KVM_RUN) N times on /dev/null (ENOTTY: the system call is still entered, so
 * syscall:ioctl with cmd 0xae80 fires) and sleeps 1 ms after each.  The test checks, exactly:
 *   - the stream holds N sys_enter_ioctl events with cmd 0xae80, all of that thread and
 *     process (the tid and pid it reports), and no other thread's;
 *   - the discovery on stderr names the VMM pid and "vCPU thread TID (wl_fake_vcpu0): N
 *     KVM_RUN calls";
 *   - the merge is in time order and its sched events are that thread's: between two of its
 *     KVM_RUN calls it was switched out blocked (its nanosleep) and switched back in: N - 1
 *     such intervals, but for a few where the kernel's tracepoint did not deliver the
 *     switch-in (counted; see the assertion);
 *   - every kvm query of the set attached (the tracepoints exist here, they never fire: the
 *     stream has no kvm_* event) and `weft vm analyze` reads the stream: no vCPU, no exit.
 * Every thread's sched_switch of this loaded machine goes through one ring buffer: 32 MiB of
 * it, so that rows are not lost to a reader the load keeps off the CPU (a loss would be said
 * in the stream, and fails the test).
 * What needs /dev/kvm (kvm_entry/kvm_exit/kvm_userspace_exit of a running guest) is
 * test_vm_kvm's, which skips here.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include "tests/slurp.h"

#include <jansson.h>
#include "run_util.h"
#include "tests/skip.h"

#define N_RUNS 200

static char tmpdir[128];

static bool blocked(json_t *state)
{
	return json_is_integer(state) && (json_integer_value(state) & 0xff) != 0;
}

static void test_record_discovery(void **state)
{
	char cmd[4096], path[256], *out, *err, *line, *save = NULL;
	long tid = -1, pid = -1, runs = -1, enotty = -1;
	long ioctls = 0, others = 0, kvm = 0, between_out = 0, outs_since = 0, ins_since = 0;
	long holes = 0, preempted = 0;
	long long last_time = -1;
	bool seen_first = false;

	(void)state;
	snprintf(cmd, sizeof(cmd),
		 "timeout 300 '%s' vm record --ringbuf-size 32MiB -o '%s/host.jsonl' -- '%s' %d > "
		 "'%s/out.txt' "
		 "2> '%s/err.txt'",
		 getenv("WEFT_BIN"), tmpdir, wr_workload("wl_kvm_ioctl"), N_RUNS, tmpdir, tmpdir);
	if (system(cmd) != 0) {
		snprintf(path, sizeof(path), "%s/err.txt", tmpdir);
		fprintf(stderr, "%s", test_slurp(path));
		fail_msg("weft vm record failed");
	}
	snprintf(path, sizeof(path), "%s/out.txt", tmpdir);
	out = test_slurp(path);
	assert_int_equal(sscanf(strstr(out, "vcpu_tid=") ?: "",
				"vcpu_tid=%ld pid=%ld runs=%ld enotty=%ld", &tid, &pid, &runs,
				&enotty),
			 4);
	assert_int_equal(runs, N_RUNS);
	assert_int_equal(enotty, N_RUNS);
	free(out);
	snprintf(path, sizeof(path), "%s/err.txt", tmpdir);
	err = test_slurp(path);
	snprintf(cmd, sizeof(cmd), "weft vm: VMM pid %ld\n", pid);
	assert_non_null(strstr(err, cmd));
	snprintf(cmd, sizeof(cmd), "vCPU thread %ld (wl_fake_vcpu0): %d KVM_RUN calls\n", tid,
		 N_RUNS);
	assert_non_null(strstr(err, cmd));
	/* the set: 3 queries plus one per kvm tracepoint this kernel has, all attached */
	{
		static const char *const tps[] = { "kvm_entry",
						   "kvm_exit",
						   "kvm_userspace_exit",
						   "kvm_hypercall",
						   "kvm_write_tsc_offset",
						   "kvm_nested_vmenter",
						   "kvm_nested_vmexit_inject" };
		int nq = 3;

		for (size_t i = 0; i < sizeof(tps) / sizeof(tps[0]); i++) {
			snprintf(path, sizeof(path), "/sys/kernel/tracing/events/kvm/%s", tps[i]);
			nq += access(path, F_OK) == 0;
		}
		snprintf(cmd, sizeof(cmd), "%d queries attached", nq);
		assert_non_null(strstr(err, cmd));
	}
	free(err);

	snprintf(path, sizeof(path), "%s/host.jsonl", tmpdir);
	out = test_slurp(path);
	for (line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		json_t *o, *f;
		const char *name;
		long long t;

		if (line[0] == '#') {
			assert_null(strstr(line, "lost")); /* a full ring buffer would be said */
			continue;
		}
		o = json_loads(line, 0, NULL);
		assert_non_null(o);
		name = json_string_value(json_object_get(o, "name"));
		f = json_object_get(o, "fields");
		t = json_integer_value(json_object_get(o, "time"));
		assert_true(t >= last_time); /* merged by time */
		last_time = t;
		if (strncmp(name, "kvm_", 4) == 0)
			kvm++;
		if (strcmp(name, "sys_enter_ioctl") == 0) {
			assert_int_equal(json_integer_value(json_object_get(f, "cmd")), 0xae80);
			if (json_integer_value(json_object_get(o, "tid")) == tid) {
				assert_int_equal(json_integer_value(json_object_get(o, "pid")),
						 pid);
				if (seen_first) {
					/* since the previous call: out blocked (the sleep), back in;
					 * or a switch-in the tracepoint did not deliver (below) */
					if (outs_since > 0 && ins_since > 0)
						between_out++;
					else if (outs_since > 0)
						holes++;
					else if (ins_since > 0 && preempted > 0)
						between_out++; /* see below */
					else
						fail_msg("an interval with no switch-out (%ld in)",
							 ins_since);
				}
				seen_first = true;
				outs_since = ins_since = preempted = 0;
				ioctls++;
			} else {
				others++;
			}
		} else if (strcmp(name, "sched_switch") == 0) {
			if (json_integer_value(json_object_get(f, "prev_pid")) == tid) {
				if (blocked(json_object_get(f, "prev_state")))
					outs_since++;
				else
					preempted++;
			}
			if (json_integer_value(json_object_get(f, "next_pid")) == tid)
				ins_since++;
		}
		json_decref(o);
	}
	free(out);
	assert_int_equal(ioctls, N_RUNS);
	assert_int_equal(others, 0);
	/*
	 * Every interval between two calls holds the thread's blocked switch-out and its switch-in
	 * back.  Two exceptions, neither a loss of weft's:
	 *  - preempted between arming its sleep's timer and blocking, for longer than the sleep,
	 *    the thread is switched out runnable (prev_state 0) and never blocks: such an
	 *    interval counts as a switch-out and back;
	 *  - on this kernel, now and then a switch-in reaches no consumer of the tracepoint at all
	 *    (seen by weft, bpftrace and a plain ftrace instance alike, with nothing counted lost:
	 *    tests/runtime/test_run_span_sides.c has the evidence): an interval with the blocked
	 *    switch-out and no switch-in is a hole.  Measured 2026-11-27 with this workload under
	 *    `weft vm record`: none in 3 runs on the idle machine; beside two busy loops, 2 in 14
	 *    runs (one each in two); beside bpftrace attaching and detaching sched_switch, 4 in
	 *    14 runs (one run had 2); 3 in one run of a CI's sanitizer build (2 cores, two tests
	 *    at once).
	 *    Allowed: 10 of the 199 intervals, every one a lost switch-in.  An interval with no
	 *    switch-out at all fails the test at once (above).
	 */
	if (holes)
		printf("# %ld intervals with their switch-in missing\n", holes);
	assert_true(holes <= 10);
	assert_int_equal(between_out + holes, N_RUNS - 1);
	assert_int_equal(kvm, 0);

	/* and the analysis reads it: no kvm event, so no vCPU and no exit */
	snprintf(cmd, sizeof(cmd),
		 "timeout 120 '%s' vm analyze --host '%s/host.jsonl' --format json > '%s/a.json'",
		 getenv("WEFT_BIN"), tmpdir, tmpdir);
	assert_int_equal(system(cmd), 0);
	snprintf(path, sizeof(path), "%s/a.json", tmpdir);
	{
		json_t *a = json_load_file(path, 0, NULL);

		assert_non_null(a);
		assert_int_equal(json_array_size(json_object_get(a, "vcpus")), 0);
		assert_int_equal(json_array_size(json_object_get(a, "exits")), 0);
		assert_true(json_integer_value(json_object_get(json_object_get(a, "host"),
							       "events")) > N_RUNS);
		json_decref(a);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_record_discovery),
	};
	int rc;

	if (!wr_ready())
		return WT_SKIP;
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/weft_vm_record.XXXXXX");
	if (!mkdtemp(tmpdir))
		return 1;
	rc = wt_status(cmocka_run_group_tests(tests, NULL, NULL));
	if (wr_rm_rf(tmpdir) != 0)
		return 1;
	return rc;
}
