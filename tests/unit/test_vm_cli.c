// SPDX-License-Identifier: Apache-2.0
/*
 * `weft vm analyze` end to end: the real binary (WEFT_BIN) on the recorded streams of
 * tests/data/vm, whose answers their header comments list (tests/unit/test_vm.c checks the
 * library on them interval by interval).  Here: the JSON report carries those answers
 * (state times and shares per vCPU, exit counts and latencies, the clock offset and its
 * bound, guest threads most time lost first, intervals on request), the text report says
 * the same to a person, and a refused stream or a bad command line gives its tag and exit
 * status.
 */
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "tests/runtime/run_util.h"
#include "tests/skip.h"

static const char *data_path(const char *name)
{
	static char path[4][4096];
	static int next;
	char *p = path[next++ % 4];

	snprintf(p, sizeof(path[0]), "%s/tests/data/vm/%s", getenv("WEFT_SOURCE_DIR"), name);
	return p;
}

/* Runs `weft vm ARGS...` (NULL-terminated) to its end: *p holds its output. */
static int run_vm(struct wr_proc *p, ...)
{
	char *argv[24];
	int n = 0, rc;
	va_list ap;

	argv[n++] = getenv("WEFT_BIN");
	argv[n++] = (char *)"vm";
	va_start(ap, p);
	while (n < 23 && (argv[n] = va_arg(ap, char *)) != NULL)
		n++;
	va_end(ap);
	argv[n] = NULL;
	rc = wr_start(p, argv);
	if (rc)
		return rc;
	return wr_finish(p, 30000);
}

static json_t *jget(json_t *o, const char *path)
{
	char buf[256], *save = NULL, *k;

	snprintf(buf, sizeof(buf), "%s", path);
	for (k = strtok_r(buf, ".", &save); k && o; k = strtok_r(NULL, ".", &save))
		o = json_is_array(o) ? json_array_get(o, (size_t)atoi(k)) : json_object_get(o, k);
	if (!o)
		fail_msg("no %s in the report", path);
	return o;
}

static long long jint(json_t *o, const char *path)
{
	json_t *v = jget(o, path);

	if (!json_is_integer(v))
		fail_msg("%s is not an integer", path);
	return json_integer_value(v);
}

static void test_json_report(void **state)
{
	struct wr_proc p;
	json_error_t jerr;
	json_t *r, *exits;
	int rc;
	long long io = -1, unknown = -1;

	(void)state;
	rc = run_vm(&p, "analyze", "--host", data_path("host.jsonl"), "--guest",
		    data_path("guest.jsonl"), "--format", "json", "--intervals", NULL);
	if (rc)
		wr_dump(&p, "weft vm analyze");
	assert_int_equal(rc, 0);
	r = json_loads(p.out.p, 0, &jerr);
	if (!r)
		fail_msg("not JSON: %s", jerr.text);
	assert_int_equal(jint(r, "host.events"), 33);
	assert_int_equal(jint(r, "vcpus.0.tid"), 101);
	assert_int_equal(jint(r, "vcpus.0.state_ns.guest"), 38550);
	assert_int_equal(jint(r, "vcpus.0.state_ns.preempted"), 3500);
	assert_int_equal(jint(r, "vcpus.0.state_ns.idle"), 3600);
	assert_true(json_real_value(jget(r, "vcpus.0.shares.guest")) == 38550.0 / 49000.0);
	assert_int_equal(jint(r, "vcpus.1.state_ns.guest_l2"), 5500);
	/* the third interval of vCPU 0: preempted while handling an external interrupt */
	assert_int_equal(jint(r, "vcpus.0.intervals.2.start_ns"), 5200);
	assert_int_equal(jint(r, "vcpus.0.intervals.2.end_ns"), 8200);
	assert_string_equal(json_string_value(jget(r, "vcpus.0.intervals.2.state")), "preempted");
	assert_string_equal(json_string_value(jget(r, "vcpus.0.intervals.2.exit")),
			    "vmx EXTERNAL_INTERRUPT");
	exits = jget(r, "exits");
	for (size_t i = 0; i < json_array_size(exits); i++) {
		json_t *x = json_array_get(exits, i);

		if (json_integer_value(json_object_get(x, "reason")) == 30) {
			assert_string_equal(json_string_value(json_object_get(x, "name")),
					    "IO_INSTRUCTION");
			io = jint(x, "count");
			assert_int_equal(jint(x, "latency.max_ns"), 2000);
		}
		if (json_integer_value(json_object_get(x, "reason")) == 99) {
			assert_true(json_is_null(json_object_get(x, "name")));
			unknown = jint(x, "count");
		}
	}
	assert_int_equal(io, 1);
	assert_int_equal(unknown, 1);
	assert_int_equal(jint(r, "unknown_exits"), 1);
	assert_int_equal(jint(r, "sync.offset_ns"), -100000);
	assert_int_equal(jint(r, "sync.error_ns"), 20);
	assert_int_equal(jint(r, "sync.points"), 2);
	/* most time lost to the host first */
	assert_int_equal(jint(r, "guest.threads.0.tid"), 1001);
	assert_int_equal(jint(r, "guest.threads.0.state_ns.host"), 5750);
	assert_int_equal(jint(r, "guest.threads.0.host_ns.vmm"), 1700);
	assert_int_equal(jint(r, "guest.threads.1.tid"), 1002);
	assert_int_equal(jint(r, "guest.threads.2.tid"), 1003);
	assert_string_equal(json_string_value(jget(r, "guest.threads.0.intervals.2.host")),
			    "preempted");
	json_decref(r);
	wr_free(&p);
}

static void test_text_report(void **state)
{
	struct wr_proc p;
	int rc;

	(void)state;
	rc = run_vm(&p, "analyze", "--host", data_path("host.jsonl"), "--guest",
		    data_path("guest.jsonl"), "--top", "1", NULL);
	if (rc)
		wr_dump(&p, "weft vm analyze");
	assert_int_equal(rc, 0);
	assert_non_null(strstr(p.out.p, "2 vCPUs"));
	assert_non_null(strstr(p.out.p, "vmx IO_INSTRUCTION"));
	assert_non_null(strstr(p.out.p, "vmx 0x63 (unknown)"));
	assert_non_null(strstr(p.out.p, "host = guest - 100000 ns, within +-20 ns"));
	assert_non_null(strstr(p.out.p, "worker"));
	assert_null(strstr(p.out.p, "irq/9")); /* --top 1 */
	wr_free(&p);
}

/*
 * --graph-store: the fused view stored as a trace, and `weft graph show` putting the host's
 * stalls on the critical path: worker's 3.5 us stretch out of guest mode (mostly preempted)
 * and its 2 us trip to the VMM lie wholly on it.
 */
static void test_graph_store(void **state)
{
	char dir[] = "/tmp/weft-vm-test.XXXXXX", store[128], id[40] = "", *nl;
	struct wr_proc p;
	json_error_t jerr;
	json_t *r, *tasks;
	char *argv[8];
	int rc, found = 0;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(store, sizeof(store), "%s/vm.sqlite", dir);
	rc = run_vm(&p, "analyze", "--host", data_path("host.jsonl"), "--guest",
		    data_path("guest.jsonl"), "--graph-store", store, NULL);
	if (rc)
		wr_dump(&p, "weft vm analyze --graph-store");
	assert_int_equal(rc, 0);
	nl = strstr(p.err.p, "stored trace ");
	assert_non_null(nl);
	snprintf(id, sizeof(id), "%.32s", nl + strlen("stored trace "));
	assert_non_null(strstr(p.err.p, "(14 tasks)"));
	wr_free(&p);
	argv[0] = getenv("WEFT_BIN");
	argv[1] = (char *)"graph";
	argv[2] = (char *)"--graph-store";
	argv[3] = store;
	argv[4] = (char *)"show";
	argv[5] = id;
	argv[6] = (char *)"--format=json";
	argv[7] = NULL;
	assert_int_equal(wr_start(&p, argv), 0);
	rc = wr_finish(&p, 30000);
	if (rc)
		wr_dump(&p, "weft graph show");
	assert_int_equal(rc, 0);
	r = json_loads(p.out.p, 0, &jerr);
	if (!r)
		fail_msg("weft graph show: not JSON: %s", jerr.text);
	tasks = json_object_get(r, "tasks");
	for (size_t i = 0; i < json_array_size(tasks); i++) {
		json_t *t = json_array_get(tasks, i);
		const char *name = json_string_value(json_object_get(t, "name"));

		if (!name || strcmp(json_string_value(json_object_get(t, "service")), "host"))
			continue;
		if (strcmp(name, "vcpu preempted") == 0) {
			assert_true(json_is_true(json_object_get(t, "critical")));
			assert_int_equal(jint(t, "critical_ns"), 3500);
			found++;
		} else if (strcmp(name, "vcpu vmm") == 0) {
			assert_true(json_is_true(json_object_get(t, "critical")));
			assert_int_equal(jint(t, "critical_ns"), 2000);
			found++;
		}
	}
	assert_int_equal(found, 2);
	json_decref(r);
	wr_free(&p);
	unlink(store);
	rmdir(dir);
}

static void test_refusals(void **state)
{
	struct wr_proc p;
	int rc;

	(void)state;
	/* a guest without synchronisation points: refused, status 1, with the tag */
	rc = run_vm(&p, "analyze", "--host", data_path("host.jsonl"), "--guest",
		    data_path("host.jsonl"), NULL);
	assert_int_equal(rc, 1);
	assert_non_null(strstr(p.err.p, "E_VM_NO_SYNC"));
	wr_free(&p);
	/* a stream that is not a file */
	rc = run_vm(&p, "analyze", "--host", "/dev/zero", NULL);
	assert_int_equal(rc, 1);
	assert_non_null(strstr(p.err.p, "E_VM_FILE"));
	wr_free(&p);
	rc = run_vm(&p, "analyze", NULL);
	assert_int_equal(rc, 2);
	assert_non_null(strstr(p.err.p, "--host"));
	wr_free(&p);
	rc = run_vm(&p, "analyze", "--host", data_path("host.jsonl"), "--format", "xml", NULL);
	assert_int_equal(rc, 2);
	wr_free(&p);
	/* the graph holds guest threads: --graph-store needs --guest */
	rc = run_vm(&p, "analyze", "--host", data_path("host.jsonl"), "--graph-store",
		    "/tmp/never-made.sqlite", NULL);
	assert_int_equal(rc, 2);
	wr_free(&p);
	rc = run_vm(&p, "frobnicate", NULL);
	assert_int_equal(rc, 2);
	wr_free(&p);
	rc = run_vm(&p, "--help", NULL);
	assert_int_equal(rc, 0);
	assert_non_null(strstr(p.out.p, "Usage: weft vm analyze"));
	wr_free(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_json_report),
		cmocka_unit_test(test_text_report),
		cmocka_unit_test(test_graph_store),
		cmocka_unit_test(test_refusals),
	};

	if (!getenv("WEFT_BIN") || !getenv("WEFT_SOURCE_DIR")) {
		fprintf(stderr, "skipped: WEFT_BIN and WEFT_SOURCE_DIR are not set\n");
		return WT_SKIP;
	}
	return wt_status(cmocka_run_group_tests(tests, NULL, NULL));
}
