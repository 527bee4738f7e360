// SPDX-License-Identifier: Apache-2.0
/*
 * Virtual machines, live: the real `weft run --format json -c 'wl_kvm N'` against the real
 * kernel and a real KVM guest.  wl_kvm (tests/workloads/wl_kvm.c) is a tiny monitor: one
 * vCPU thread ("wl_kvm_vcpu0") runs a real-mode guest that writes N bytes to port 0x3f8 with
 * `out` and then halts, so KVM_RUN returns to user space exactly N times with KVM_EXIT_IO and
 * once with KVM_EXIT_HLT — N + 1 exits, which the monitor checks one by one and reports.
 * These tests check, with counts asserted exactly:
 *
 *   - kvm:kvm_userspace_exit finds the vCPU thread (the only thread with exits, named
 *     wl_kvm_vcpu0, the tid the monitor reports) and counts N exits with reason 2
 *     (KVM_EXIT_IO) and 1 with reason 5 (KVM_EXIT_HLT), errno 0, nothing else;
 *   - kvm:kvm_pio counts the N writes: rw 1, port 0x3f8, size 1, count 1;
 *   - syscall:ioctl with cmd KVM_RUN (0xae80) counts the N + 1 calls of the vCPU thread;
 *   - `weft vm record -- wl_kvm N` (tools/weft_vm_record.c): its stream holds the N + 1 exits
 *     to user space and the KVM_RUN calls of that thread, its discovery names the thread,
 *     and `weft vm analyze` finds it as a vCPU with every kvm_exit the stream holds (at least
 *     N + 1 where the guest ran in hardware);
 *   - kvm:kvm_entry and kvm:kvm_exit: where KVM runs the guest in hardware, exit reasons
 *     IO_INSTRUCTION and HLT (VMX 30 and 12, SVM 0x7b and 0x78) count N and 1 and every
 *     exit has its entry; where KVM emulates the guest (no kvm_entry fires at all) the test
 *     says so on stderr and checks that neither fires.
 *
 * Without a usable /dev/kvm (no KVM module bound, or this kernel is itself a guest of a
 * hypervisor that does not offer it) every test is skipped with the monitor's reason.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include "tests/slurp.h"

#include <jansson.h>
#include <sys/stat.h>
#include "run_util.h"
#include "tests/skip.h"

#define N_OUTS 5000 /* the guest's `out`s */
#define PORT 0x3f8

struct vmm_report {
	long tid, runs, io, hlt, eintr, other;
};

/* -c 'wl_kvm N', the path quoted as weft splits words like a shell */
static const char *wl_cmd(void)
{
	static char cmd[PATH_MAX + 64];

	snprintf(cmd, sizeof(cmd), "'%s' %d %d", wr_workload("wl_kvm"), N_OUTS, PORT);
	return cmd;
}

/* The monitor's own account, cut out of the stdout it shares with weft. */
static void vmm_report_of(struct wr_proc *p, struct vmm_report *r)
{
	char line[256];

	if (!wr_cut_line(&p->out, "vcpu_tid=", line, sizeof(line)))
		fail_msg("wl_kvm printed no report");
	if (sscanf(line, "vcpu_tid=%ld runs=%ld io=%ld hlt=%ld eintr=%ld other=%ld", &r->tid,
		   &r->runs, &r->io, &r->hlt, &r->eintr, &r->other) != 6)
		fail_msg("wl_kvm's report does not parse: %s", line);
	/* the guest did exactly what it was given: N checked writes, one halt */
	assert_int_equal(r->io, N_OUTS);
	assert_int_equal(r->hlt, 1);
	assert_int_equal(r->other, 0);
	assert_int_equal(r->runs, N_OUTS + 1);
}

/* Runs the query over wl_kvm; *j its JSON lines, *r the monitor's report. */
static void run_over_vm(const char *query, struct wr_json *j, struct vmm_report *r)
{
	struct wr_proc p;
	int rc;

	rc = wr_weft_run(&p, "--format", "json", "-c", wl_cmd(), query);
	if (rc != 0)
		wr_dump(&p, "weft run");
	assert_int_equal(rc, 0);
	vmm_report_of(&p, r);
	wr_json_lines(&p.out, j);
	wr_check_windows(j);
	wr_free(&p);
}

static void test_userspace_exits(void **state)
{
	struct wr_json j;
	struct vmm_report r;
	const struct wj *w;
	long long io = 0, hlt = 0;

	(void)state;
	run_over_vm("from tracepoint:kvm:kvm_userspace_exit group by tid, comm, "
		    "args.reason as reason, args.errno as err select count() as n",
		    &j, &r);
	w = wr_one_window(&j);
	for (size_t i = 0; i < wr_nrows(w); i++) {
		const struct wj *row = wr_row(w, i);
		const char *comm = wj_str(wj_get(row, "comm"));

		/* the vCPU thread, found: the only thread that left KVM_RUN */
		assert_int_equal(wj_int_of(row, "tid"), r.tid);
		assert_non_null(comm);
		assert_string_equal(comm, "wl_kvm_vcpu0");
		assert_int_equal(wj_int_of(row, "err"), 0);
		if (wj_int_of(row, "reason") == 2)
			io += wj_int_of(row, "n");
		else if (wj_int_of(row, "reason") == 5)
			hlt += wj_int_of(row, "n");
		else
			fail_msg("an exit to user space with reason %lld",
				 wj_int_of(row, "reason"));
	}
	assert_int_equal(io, N_OUTS);
	assert_int_equal(hlt, 1);
	wr_json_free(&j);
}

static void test_pio(void **state)
{
	struct wr_json j;
	struct vmm_report r;
	const struct wj *w;

	(void)state;
	run_over_vm("from tracepoint:kvm:kvm_pio group by tid, args.rw as rw, args.port as port, "
		    "args.size as size, args.count as cnt select count() as n",
		    &j, &r);
	w = wr_one_window(&j);
	assert_int_equal(wr_nrows(w), 1);
	assert_int_equal(wj_int_of(wr_row(w, 0), "tid"), r.tid);
	assert_int_equal(wj_int_of(wr_row(w, 0), "rw"), 1);
	assert_int_equal(wj_int_of(wr_row(w, 0), "port"), PORT);
	assert_int_equal(wj_int_of(wr_row(w, 0), "size"), 1);
	assert_int_equal(wj_int_of(wr_row(w, 0), "cnt"), 1);
	assert_int_equal(wj_int_of(wr_row(w, 0), "n"), N_OUTS);
	wr_json_free(&j);
}

/* KVM_RUN is _IO(KVMIO, 0x80) = 0xae80 */
static void test_kvm_run_ioctls(void **state)
{
	struct wr_json j;
	struct vmm_report r;

	(void)state;
	run_over_vm("from syscall:ioctl where args.cmd = 0xae80 group by tid "
		    "select count() as n",
		    &j, &r);
	assert_int_equal(wr_sum_col(&j, "n", NULL, 0), r.runs + r.eintr);
	assert_int_equal(wr_sum_col(&j, "n", "tid", r.tid), r.runs + r.eintr);
	wr_json_free(&j);
}

static void test_entries_and_exits(void **state)
{
	struct wr_json j;
	struct vmm_report r;
	const struct wj *w;
	long long entries = 0, exits = 0, io = 0, hlt = 0;

	(void)state;
	run_over_vm("from tracepoint:kvm:kvm_entry, tracepoint:kvm:kvm_exit group by probe, tid "
		    "select count() as n",
		    &j, &r);
	w = wr_one_window(&j);
	for (size_t i = 0; i < wr_nrows(w); i++) {
		const struct wj *row = wr_row(w, i);
		const char *probe = wj_str(wj_get(row, "probe"));

		assert_int_equal(wj_int_of(row, "tid"), r.tid);
		if (probe && strstr(probe, "kvm_entry"))
			entries += wj_int_of(row, "n");
		else
			exits += wj_int_of(row, "n");
	}
	wr_json_free(&j);
	if (entries == 0) {
		/* KVM emulates this guest: it never enters hardware guest mode */
		assert_int_equal(exits, 0);
		fprintf(stderr,
			"note: this kernel's KVM emulated the guest: kvm_entry and "
			"kvm_exit never fired; %d exits to user space were counted\n",
			N_OUTS + 1);
		return;
	}
	/* in hardware: every exit follows an entry (the last exit is the halt) */
	assert_int_equal(entries, exits);
	run_over_vm("from tracepoint:kvm:kvm_exit group by args.isa as isa, "
		    "args.exit_reason as reason select count() as n",
		    &j, &r);
	w = wr_one_window(&j);
	for (size_t i = 0; i < wr_nrows(w); i++) {
		const struct wj *row = wr_row(w, i);
		long long isa = wj_int_of(row, "isa"), reason = wj_int_of(row, "reason");

		/* isa 1 is VMX (reason & 0xffff), else SVM */
		if ((isa == 1 && (reason & 0xffff) == 30) || (isa != 1 && reason == 0x7b))
			io += wj_int_of(row, "n");
		if ((isa == 1 && (reason & 0xffff) == 12) || (isa != 1 && reason == 0x78))
			hlt += wj_int_of(row, "n");
	}
	assert_int_equal(io, N_OUTS);
	assert_int_equal(hlt, 1);
	wr_json_free(&j);
}

/* The whole file at path (NUL-terminated, malloc'd). */
/* `weft vm record -- wl_kvm N`: the stream holds the monitor's exits and KVM_RUN calls, the
 * discovery names its vCPU thread, and `weft vm analyze` finds that vCPU. */
static void test_record(void **state)
{
	char dir[] = "/tmp/weft_vm_kvm_rec.XXXXXX", cmd[PATH_MAX * 2 + 256], *out, *line,
	     *save = NULL;
	long tid = -1, runs = -1, io = -1, hlt = -1, eintr = -1, other = -1;
	long long uio = 0, uhlt = 0, ioctls = 0, kexits = 0;
	json_t *a;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(cmd, sizeof(cmd),
		 "timeout 300 '%s' vm record -o '%s/h.jsonl' -- '%s' %d %d > '%s/out' 2> "
		 "'%s/err'",
		 getenv("WEFT_BIN"), dir, wr_workload("wl_kvm"), N_OUTS, PORT, dir, dir);
	assert_int_equal(system(cmd), 0);
	snprintf(cmd, sizeof(cmd), "%s/out", dir);
	out = test_slurp(cmd);
	assert_int_equal(sscanf(strstr(out, "vcpu_tid=") ? strstr(out, "vcpu_tid=") : "",
				"vcpu_tid=%ld runs=%ld io=%ld hlt=%ld eintr=%ld other=%ld", &tid,
				&runs, &io, &hlt, &eintr, &other),
			 6);
	free(out);
	snprintf(cmd, sizeof(cmd), "%s/err", dir);
	out = test_slurp(cmd);
	snprintf(cmd, sizeof(cmd), "vCPU thread %ld (wl_kvm_vcpu0): %ld KVM_RUN calls\n", tid,
		 runs + eintr);
	assert_non_null(strstr(out, cmd));
	free(out);
	snprintf(cmd, sizeof(cmd), "%s/h.jsonl", dir);
	out = test_slurp(cmd);
	for (line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		json_t *o = line[0] == '{' ? json_loads(line, 0, NULL) : NULL;
		const char *name;

		if (!o)
			continue;
		name = json_string_value(json_object_get(o, "name"));
		if (json_integer_value(json_object_get(o, "tid")) == tid && name) {
			json_t *f = json_object_get(o, "fields");

			if (!strcmp(name, "kvm_userspace_exit")) {
				long long r = json_integer_value(json_object_get(f, "reason"));

				uio += r == 2;
				uhlt += r == 5;
			}
			ioctls += !strcmp(name, "sys_enter_ioctl");
			kexits += !strcmp(name, "kvm_exit");
		}
		json_decref(o);
	}
	free(out);
	assert_int_equal(uio, N_OUTS);
	assert_int_equal(uhlt, 1);
	assert_int_equal(ioctls, runs + eintr);
	snprintf(cmd, sizeof(cmd),
		 "timeout 120 '%s' vm analyze --host '%s/h.jsonl' --format json > '%s/a.json'",
		 getenv("WEFT_BIN"), dir, dir);
	assert_int_equal(system(cmd), 0);
	snprintf(cmd, sizeof(cmd), "%s/a.json", dir);
	a = json_load_file(cmd, 0, NULL);
	assert_non_null(a);
	{
		json_t *v = json_object_get(a, "vcpus"), *mine = NULL;

		for (size_t i = 0; i < json_array_size(v); i++)
			if (json_integer_value(json_object_get(json_array_get(v, i), "tid")) == tid)
				mine = json_array_get(v, i);
		assert_non_null(mine);
		/* every kvm_exit of the thread in the stream is the vCPU's (none where KVM
		 * emulated the guest; in hardware at least the N port writes and the halt) */
		assert_int_equal(json_integer_value(json_object_get(mine, "exits")), kexits);
		if (kexits)
			assert_true(kexits >= N_OUTS + 1);
	}
	json_decref(a);
	assert_int_equal(wr_rm_rf(dir), 0);
}

/* Whether this machine can run a KVM guest at all: the monitor itself says (status 3). */
static bool kvm_usable(void)
{
	char *argv[] = { (char *)wr_workload("wl_kvm"), (char *)"1", NULL };
	struct wr_proc p;
	int rc;
	bool ok;

	if (wr_start(&p, argv))
		return false;
	rc = wr_finish(&p, 10000);
	ok = rc == 0;
	if (!ok)
		fprintf(stderr, "skipped: no KVM guest can run here (wl_kvm exit %d: %s)\n", rc,
			p.err.p[0] ? strtok(p.err.p, "\n") : "no reason given");
	wr_free(&p);
	return ok;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_userspace_exits), cmocka_unit_test(test_pio),
		cmocka_unit_test(test_kvm_run_ioctls),	cmocka_unit_test(test_entries_and_exits),
		cmocka_unit_test(test_record),
	};

	if (!wr_ready())
		return WT_SKIP;
	if (!kvm_usable())
		return WT_SKIP;
	return wt_status(cmocka_run_group_tests(tests, NULL, NULL));
}
