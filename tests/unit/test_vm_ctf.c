// SPDX-License-Identifier: Apache-2.0
/*
 * The VM analysis over LTTng CTF traces (vm/ctf.c, docs/vm.md "LTTng CTF traces"): the recorded
 * streams of tests/data/vm, whose answers tests/unit/test_vm.c checks to the nanosecond, are
 * written as the traces an LTTng session would have left (tests/fuzz/vm_ctf_fixture.h:
 * lttng-modules' kvm_x86_* and sched events in a kernel trace, one stream per CPU with cpu_id
 * in the packet context; weft's LTTng-UST provider's vm_sync in a UST trace beside it), read
 * back through libbabeltrace2, and analysed:
 *
 *   - with the tid context, the host and guest traces give exactly the JSON report (every
 *     interval, every exit's latencies, the offset and its bound) of the streams;
 *   - a kernel trace without any context still works out each event's thread from its CPU's
 *     last sched_switch, and drops (and counts: 15 here) the kvm events no sched_switch
 *     before them places on a thread: vCPU 101 is then found with its 4 exits after its
 *     switch-in at 8200, vCPU 102 (never switched on its CPU) not at all;
 *   - `weft vm analyze --host ctf:DIR --guest DIR` prints what it prints for the streams;
 *   - the reports say what could not be analysed: the kvm events without a thread, and the
 *     events a recorder lost (weft_lost events, summed: 7) or the tracer discarded (a packet
 *     per stream saying 3 were: 6), as "warnings" in JSON and a
 *     WARNING line in text; a weft_lost without a number of rows is refused;
 *   - refused with E_VM_CTF: packets of size 0 (babeltrace2 loops on them: the reader is
 *     ended after 2 s without output), two kernel traces in one input, a trace without cpu_id, metadata babeltrace2 cannot read, a
 *     directory without a trace, a FIFO in a trace directory, time going backwards.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>
#include "tests/slurp.h"

#include "tests/fuzz/vm_ctf_fixture.h"
#include "vm/vm.h"

static char tmpdir[256];

static const char *data_path(const char *name)
{
	static char path[2][4096];
	static int next;
	char *p = path[next++ % 2];
	const char *src = getenv("WEFT_SOURCE_DIR");

	snprintf(p, sizeof(path[0]), "%s/tests/data/vm/%s", src ? src : WEFT_SOURCE_DIR, name);
	return p;
}

/* tests/data/vm/NAME written as traces into tmpdir/SUB. */
static const char *as_ctf(const char *name, const char *sub, unsigned flags)
{
	static char dir[2][512];
	static int next;
	char *d = dir[next++ % 2], cmd[600];
	char *text = test_slurp(data_path(name));

	snprintf(d, sizeof(dir[0]), "%s/%s", tmpdir, sub);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", d);
	assert_int_equal(system(cmd), 0);
	assert_int_equal(vmctf_write(text, d, flags, NULL), 0);
	free(text);
	return d;
}

/* The JSON report (every interval) of an analysis, or the error's tag. */
static char *report(const char *host, const char *guest, struct vm_analysis *keep, const char **tag)
{
	struct vm_opts o = { .sz = sizeof(o), .host = host, .guest = guest };
	struct vm_report_opts ro = { .sz = sizeof(ro), .intervals = true, .top = 100 };
	struct vm_analysis a;
	struct vm_err err = { 0 };
	char *buf = NULL;
	size_t len = 0;
	FILE *f;

	*tag = NULL;
	if (vm_analyze(&o, &a, &err)) {
		*tag = err.tag;
		fprintf(stderr, "refused as expected? %s: %s\n", err.tag, err.msg);
		return NULL;
	}
	f = open_memstream(&buf, &len);
	assert_non_null(f);
	assert_int_equal(vm_report_json(f, &a, &ro), 0);
	fclose(f);
	if (keep)
		*keep = a;
	else
		vm_analysis_free(&a);
	return buf;
}

/* The text report of a host input. */
static char *text_report(const char *host)
{
	struct vm_opts o = { .sz = sizeof(o), .host = host };
	struct vm_report_opts ro = { .sz = sizeof(ro) };
	struct vm_analysis a;
	struct vm_err err = { 0 };
	char *buf = NULL;
	size_t len = 0;
	FILE *f;

	assert_int_equal(vm_analyze(&o, &a, &err), 0);
	f = open_memstream(&buf, &len);
	assert_non_null(f);
	assert_int_equal(vm_report_text(f, &a, &ro), 0);
	fclose(f);
	vm_analysis_free(&a);
	return buf;
}

static void expect_refused(const char *host, const char *want);

static void test_same_as_stream(void **state)
{
	const char *host = as_ctf("host.jsonl", "host", VMCTF_TID);
	const char *guest = as_ctf("guest.jsonl", "guest", 0);
	char spec[600], *want, *got;
	const char *tag;
	struct vm_analysis a;

	(void)state;
	want = report(data_path("host.jsonl"), data_path("guest.jsonl"), NULL, &tag);
	assert_non_null(want);
	snprintf(spec, sizeof(spec), "ctf:%s", host);
	got = report(spec, guest, &a, &tag);
	assert_non_null(got);
	assert_string_equal(got, want);
	/* the host's 33 events, one kernel trace; the guest's 9 (8 kernel, 2 UST minus the
	 * sched_stat_runtime the fixture writes too: all 9 events of tests/data/vm/guest.jsonl) */
	assert_int_equal(a.host_ctf.events, 33);
	assert_int_equal(a.host_ctf.traces, 1);
	assert_int_equal(a.host_ctf.no_tid, 0);
	assert_int_equal(a.host_ctf.discarded, 0);
	assert_int_equal(a.guest_ctf.events, 9);
	assert_int_equal(a.guest_ctf.traces, 2);
	assert_int_equal(a.guest_ctf.no_tid, 0);
	/* and the answers themselves (test_vm checks the streams' in full) */
	assert_true(a.sync.synced);
	assert_int_equal(a.sync.offset_ns, -100000);
	assert_int_equal(a.sync.error_ns, 20);
	assert_int_equal(a.nvcpus, 2);
	vm_analysis_free(&a);
	free(want);
	free(got);
}

static void test_no_context(void **state)
{
	const char *host = as_ctf("host.jsonl", "host_noctx", 0);
	const struct vm_vcpu *v;
	const char *tag;
	struct vm_analysis a;
	char *got;

	(void)state;
	got = report(host, NULL, &a, &tag);
	assert_non_null(got);
	/* CPU 0: kvm_entry 1000 and kvm_exit 5000 come before its first sched_switch (5200);
	 * CPU 1 has none: its 13 kvm events have no thread */
	assert_int_equal(a.host_ctf.no_tid, 15);
	assert_int_equal(a.host_ctf.events, 33);
	assert_int_equal(a.nvcpus, 1);
	v = vm_vcpu_of_tid(&a, 101);
	assert_non_null(v);
	assert_null(vm_vcpu_of_tid(&a, 102));
	/* after its switch-in at 8200: exits at 12000, 16000, 29900 and 40000 */
	assert_int_equal(v->exits, 4);
	assert_int_equal(v->vcpu_id, 0);
	vm_analysis_free(&a);
	/* and the report says so, as data and as text */
	assert_non_null(strstr(got, "\"warnings\":{\"lost_events\":0,\"host_no_tid\":15"));
	free(got);
	got = text_report(host);
	assert_non_null(strstr(got, "WARNING: 15 kvm events had no thread"));
	free(got);
}

/* Events the tracer discarded: counted from babeltrace2's messages, warned, the rest the same. */
static void test_discarded(void **state)
{
	const char *host = as_ctf("host.jsonl", "discard", VMCTF_TID | VMCTF_DISCARD);
	const char *tag;
	struct vm_analysis a;
	char *got;

	(void)state;
	got = report(host, NULL, &a, &tag);
	assert_non_null(got);
	/* two streams (CPUs 0 and 1), each with a packet saying 3 were lost */
	assert_int_equal(a.host_ctf.discarded, 6);
	assert_int_equal(a.host_ctf.events, 33);
	assert_int_equal(a.nvcpus, 2);
	assert_non_null(strstr(got, "\"host_discarded\":6"));
	vm_analysis_free(&a);
	free(got);
	got = text_report(host);
	assert_non_null(strstr(got, "WARNING: the tracer discarded 6 events"));
	free(got);
}

/* A recorder's weft_lost events are summed and reported; a bad one is refused. */
static void test_lost(void **state)
{
	char path[600], *text = test_slurp(data_path("host.jsonl")), *got;
	const char *tag;
	struct vm_analysis a;
	FILE *f;

	(void)state;
	snprintf(path, sizeof(path), "%s/lost.jsonl", tmpdir);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fputs("{\"time\":50000,\"cpu\":0,\"name\":\"weft_lost\",\"fields\":{\"rows\":5}}\n", f);
	fputs("{\"time\":50000,\"cpu\":1,\"name\":\"weft_lost\",\"fields\":{\"rows\":2}}\n", f);
	fclose(f);
	got = report(path, NULL, &a, &tag);
	assert_non_null(got);
	assert_int_equal(a.lost_events, 7);
	assert_non_null(strstr(got, "\"warnings\":{\"lost_events\":7"));
	vm_analysis_free(&a);
	free(got);
	got = text_report(path);
	assert_non_null(strstr(got, "WARNING: 7 events were lost while recording"));
	free(got);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fputs("{\"time\":50000,\"cpu\":0,\"name\":\"weft_lost\",\"fields\":{\"rows\":\"many\"}}\n",
	      f);
	fclose(f);
	expect_refused(path, "E_VM_FIELD");
	free(text);
}

static void test_cli(void **state)
{
	const char *bin = getenv("WEFT_BIN");
	const char *host = as_ctf("host.jsonl", "host", VMCTF_TID);
	const char *guest = as_ctf("guest.jsonl", "guest", 0);
	char cmd[4096], *a, *b;

	(void)state;
	if (!bin) {
		print_message("no WEFT_BIN (run through ctest): the CLI is not run\n");
		return;
	}
	snprintf(cmd, sizeof(cmd),
		 "'%s' vm analyze --host '%s' --guest '%s' --format json --intervals > '%s/a.json'",
		 bin, data_path("host.jsonl"), data_path("guest.jsonl"), tmpdir);
	assert_int_equal(system(cmd), 0);
	snprintf(cmd, sizeof(cmd),
		 "'%s' vm analyze --host 'ctf:%s' --guest '%s' --format json --intervals > "
		 "'%s/b.json'",
		 bin, host, guest, tmpdir);
	assert_int_equal(system(cmd), 0);
	snprintf(cmd, sizeof(cmd), "%s/a.json", tmpdir);
	a = test_slurp(cmd);
	snprintf(cmd, sizeof(cmd), "%s/b.json", tmpdir);
	b = test_slurp(cmd);
	assert_true(strlen(a) > 1000);
	assert_string_equal(a, b);
	free(a);
	free(b);
	/* a refusal: status 1 and the tag on stderr */
	snprintf(cmd, sizeof(cmd),
		 "'%s' vm analyze --host 'ctf:%s/nothing' 2>'%s/err.txt' >/dev/null; test $? = 1",
		 bin, tmpdir, tmpdir);
	assert_int_equal(system(cmd), 0);
	snprintf(cmd, sizeof(cmd), "%s/err.txt", tmpdir);
	a = test_slurp(cmd);
	assert_non_null(strstr(a, "E_VM_"));
	free(a);
}

static void expect_refused(const char *host, const char *want)
{
	const char *tag;
	char *got = report(host, NULL, NULL, &tag);

	assert_null(got);
	assert_non_null(tag);
	assert_string_equal(tag, want);
}

static void test_refused(void **state)
{
	char path[700];
	FILE *f;

	(void)state;
	expect_refused(as_ctf("host.jsonl", "nocpu", VMCTF_NO_CPU), "E_VM_CTF");
	expect_refused(as_ctf("host.jsonl", "backwards", VMCTF_TID | VMCTF_BACKWARDS), "E_VM_CTF");
	/* metadata babeltrace2 cannot parse */
	snprintf(path, sizeof(path), "%s/kernel/metadata", as_ctf("host.jsonl", "bad", VMCTF_TID));
	f = fopen(path, "w");
	assert_non_null(f);
	fputs("/* CTF 1.8 */\ntrace { major = 1; minor = 8; byte_order = le; garbage\n", f);
	fclose(f);
	snprintf(path, sizeof(path), "%s/bad", tmpdir);
	expect_refused(path, "E_VM_CTF");
	/* packet sizes of 0, on which babeltrace2 loops forever: the reader is ended */
	snprintf(path, sizeof(path), "%s/kernel/channel0_0",
		 as_ctf("host.jsonl", "loop", VMCTF_TID));
	f = fopen(path, "r+b");
	assert_non_null(f);
	fseek(f, 24, SEEK_SET);
	for (int i = 0; i < 16; i++)
		fputc(0, f);
	fclose(f);
	snprintf(path, sizeof(path), "%s/loop", tmpdir);
	vm_ctf_set_stall_ms(2000);
	expect_refused(path, "E_VM_CTF");
	vm_ctf_set_stall_ms(0);
	/* two kernel traces (two machines' CPUs) in one input */
	as_ctf("host.jsonl", "two/a", VMCTF_TID);
	as_ctf("host.jsonl", "two/b", VMCTF_TID);
	snprintf(path, sizeof(path), "%s/two", tmpdir);
	expect_refused(path, "E_VM_CTF");
	/* a directory without a trace */
	snprintf(path, sizeof(path), "%s/empty", tmpdir);
	mkdir(path, 0755);
	expect_refused(path, "E_VM_CTF");
	/* a FIFO where a stream file would be: never opened (it would block) */
	snprintf(path, sizeof(path), "%s/kernel/channel0_9",
		 as_ctf("host.jsonl", "fifo", VMCTF_TID));
	assert_int_equal(mkfifo(path, 0600), 0);
	snprintf(path, sizeof(path), "%s/fifo", tmpdir);
	expect_refused(path, "E_VM_CTF");
}

static int setup(void **state)
{
	(void)state;
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/weft_vm_ctf.XXXXXX");
	return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
	char cmd[300];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_same_as_stream),
		cmocka_unit_test(test_no_context),
		cmocka_unit_test(test_cli),
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_lost),
		cmocka_unit_test(test_discarded),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
