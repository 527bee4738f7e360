// SPDX-License-Identifier: Apache-2.0
/*
 * The VM analysis (vm/vm.h) on recorded streams with known answers.
 *
 * tests/data/vm/host.jsonl and guest.jsonl were written by hand for this test; their header
 * comments list the answers, worked out on paper from the events (each interval below is
 * the time between two of the file's lines).  Every vCPU interval is checked exact to the
 * nanosecond with its state and the exit it belongs to, including a preemption while in the
 * hypervisor and a halt, a wake-up and a wait for a CPU; every guest thread's fused interval
 * too, so a guest thread is "host" exactly where its vCPU was out of guest mode; the clock
 * offset and its error bound are recovered from the two synchronisation points.
 *
 * Bad input, in memory: each way a stream can be wrong is refused with its tag and the
 * line, an unknown exit reason is counted and shown as a number, a guest without
 * synchronisation points is refused unless assumed synchronised (and then says so),
 * contradicting points are refused, two VMs whose vCPU ids collide need --vm-pid, and the
 * interval bound holds.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "tests/skip.h"
#include "vm/exits.h"
#include "vm/sync.h"
#include "vm/vm.h"

static const char *data_path(const char *name)
{
	static char path[2][4096];
	static int next;
	char *p = path[next++ % 2];
	const char *src = getenv("WEFT_SOURCE_DIR");

	snprintf(p, sizeof(path[0]), "%s/tests/data/vm/%s", src ? src : WEFT_SOURCE_DIR, name);
	return p;
}

static void analyze_files(struct vm_analysis *a, bool guest)
{
	struct vm_opts o = { .sz = sizeof(o), .host = data_path("host.jsonl") };
	struct vm_err err = { 0 };

	if (guest)
		o.guest = data_path("guest.jsonl");
	if (vm_analyze(&o, a, &err))
		fail_msg("%s: %s", err.tag, err.msg);
}

struct want_iv {
	int64_t start, end;
	int state;
	const char *exit; /* vCPU: the exit's name; guest: the host state's name; NULL: none */
};

static void check_vcpu_intervals(const struct vm_analysis *a, const struct vm_vcpu *v,
				 const struct want_iv *w, size_t n)
{
	for (size_t i = 0; i < n && i < v->niv; i++) {
		const struct vm_interval *iv = &v->iv[i];
		const char *exit = iv->exit >= 0 ? a->exits[iv->exit].name : NULL;

		if (iv->start != w[i].start || iv->end != w[i].end || iv->state != w[i].state ||
		    (exit == NULL) != (w[i].exit == NULL) || (exit && strcmp(exit, w[i].exit) != 0))
			fail_msg("vCPU %lld interval %zu: [%lld, %lld) %s %s, want [%lld, %lld) %s "
				 "%s",
				 (long long)v->vcpu_id, i, (long long)iv->start, (long long)iv->end,
				 vm_state_name(iv->state), exit ? exit : "-", (long long)w[i].start,
				 (long long)w[i].end, vm_state_name(w[i].state),
				 w[i].exit ? w[i].exit : "-");
	}
	assert_int_equal(v->niv, n);
}

static void check_thread_intervals(const struct vm_gthread *g, const struct want_iv *w, size_t n)
{
	for (size_t i = 0; i < n && i < g->niv; i++) {
		const struct vm_interval *iv = &g->iv[i];
		const char *host = iv->state == 1 /* VM_G_HOST */ ? vm_state_name(iv->host) : NULL;

		if (iv->start != w[i].start || iv->end != w[i].end || iv->state != w[i].state ||
		    (host == NULL) != (w[i].exit == NULL) || (host && strcmp(host, w[i].exit)))
			fail_msg("thread %lld interval %zu: [%lld, %lld) %s %s, want [%lld, %lld) "
				 "%s %s",
				 (long long)g->tid, i, (long long)iv->start, (long long)iv->end,
				 vm_gstate_name(iv->state), host ? host : "-",
				 (long long)w[i].start, (long long)w[i].end,
				 vm_gstate_name(w[i].state), w[i].exit ? w[i].exit : "-");
	}
	assert_int_equal(g->niv, n);
}

#define NELEM(x) (sizeof(x) / sizeof((x)[0]))

static void test_vcpu_states(void **state)
{
	static const struct want_iv vcpu0[] = {
		{ 1000, 5000, VM_GUEST, NULL },
		{ 5000, 5200, VM_HYPERVISOR, "EXTERNAL_INTERRUPT" },
		{ 5200, 8200, VM_PREEMPTED,
		  "EXTERNAL_INTERRUPT" }, /* preempted in the hypervisor */
		{ 8200, 8500, VM_HYPERVISOR, "EXTERNAL_INTERRUPT" },
		{ 8500, 12000, VM_GUEST, NULL },
		{ 12000, 12300, VM_HYPERVISOR, "IO_INSTRUCTION" },
		{ 12300, 14000, VM_VMM, "IO_INSTRUCTION" },
		{ 14000, 16000, VM_GUEST, NULL },
		{ 16000, 16400, VM_HYPERVISOR, "HLT" },
		{ 16400, 20000, VM_IDLE, "HLT" },
		{ 20000, 20500, VM_PREEMPTED, "HLT" }, /* woken, waiting for a host CPU */
		{ 20500, 20700, VM_HYPERVISOR, "HLT" },
		{ 20700, 29900, VM_GUEST, NULL },
		{ 29900, 30100, VM_HYPERVISOR, "VMCALL" },
		{ 30100, 40000, VM_GUEST, NULL },
		{ 40000, 40050, VM_HYPERVISOR, NULL }, /* reason 99: no name */
		{ 40050, 50000, VM_GUEST, NULL },
	};
	static const struct want_iv vcpu1[] = {
		{ 2000, 3000, VM_GUEST, NULL },
		{ 3000, 3200, VM_HYPERVISOR, "VMLAUNCH" },
		{ 3200, 6000, VM_GUEST_L2, NULL },
		{ 6000, 6300, VM_HYPERVISOR, "EPT_VIOLATION" },
		{ 6300, 9000, VM_GUEST_L2, NULL },
		{ 9000, 9100, VM_HYPERVISOR, "EXTERNAL_INTERRUPT" },
		{ 9100, 44900, VM_GUEST, NULL },
		{ 44900, 45100, VM_HYPERVISOR, "VMCALL" },
		{ 45100, 50000, VM_GUEST, NULL },
	};
	struct vm_analysis a;
	const struct vm_vcpu *v0, *v1;

	(void)state;
	analyze_files(&a, false);
	assert_int_equal(a.host_events, 33);
	assert_int_equal(a.host_first_ns, 1000);
	assert_int_equal(a.host_last_ns, 50000);
	assert_int_equal(a.nvcpus, 2);
	v0 = vm_vcpu_of_tid(&a, 101);
	v1 = vm_vcpu_of_tid(&a, 102);
	assert_non_null(v0);
	assert_non_null(v1);
	assert_null(vm_vcpu_of_tid(&a, 500)); /* a host task without kvm events */
	assert_int_equal(v0->vcpu_id, 0);
	assert_int_equal(v0->pid, 100);
	assert_int_equal(v1->vcpu_id, 1);
	check_vcpu_intervals(&a, v0, vcpu0, NELEM(vcpu0));
	check_vcpu_intervals(&a, v1, vcpu1, NELEM(vcpu1));
	assert_int_equal(v0->state_ns[VM_GUEST], 38550);
	assert_int_equal(v0->state_ns[VM_GUEST_L2], 0);
	assert_int_equal(v0->state_ns[VM_HYPERVISOR], 1650);
	assert_int_equal(v0->state_ns[VM_VMM], 1700);
	assert_int_equal(v0->state_ns[VM_PREEMPTED], 3500);
	assert_int_equal(v0->state_ns[VM_IDLE], 3600);
	assert_int_equal(v0->first_ns, 1000);
	assert_int_equal(v0->last_ns, 50000);
	assert_int_equal(v0->exits, 5);
	assert_int_equal(v1->state_ns[VM_GUEST], 41700);
	assert_int_equal(v1->state_ns[VM_GUEST_L2], 5500);
	assert_int_equal(v1->state_ns[VM_HYPERVISOR], 800);
	assert_int_equal(v1->exits, 4);
	assert_int_equal(v1->nested_entries, 1);
	assert_false(a.sync.guest);
	vm_analysis_free(&a);
}

static const struct vm_exit_stat *exit_of(const struct vm_analysis *a, uint32_t reason)
{
	for (size_t i = 0; i < a->nexits; i++)
		if (a->exits[i].reason == reason)
			return &a->exits[i];
	fail_msg("no exit reason %u", reason);
	return NULL;
}

static void check_exit(const struct vm_analysis *a, uint32_t reason, const char *name,
		       uint64_t count, int64_t min, int64_t max, int64_t sum)
{
	const struct vm_exit_stat *x = exit_of(a, reason);

	assert_int_equal(x->isa, VM_ISA_VMX);
	if (name) {
		assert_non_null(x->name);
		assert_string_equal(x->name, name);
	} else {
		assert_null(x->name);
	}
	assert_int_equal(x->count, count);
	assert_int_equal(x->samples, count);
	assert_int_equal(x->min_ns, min);
	assert_int_equal(x->max_ns, max);
	assert_int_equal(x->sum_ns, sum);
}

static void test_exit_reasons(void **state)
{
	struct vm_analysis a;
	const struct vm_exit_stat *ei;

	(void)state;
	analyze_files(&a, false);
	assert_int_equal(a.nexits, 7);
	check_exit(&a, 1, "EXTERNAL_INTERRUPT", 2, 100, 3500, 3600);
	check_exit(&a, 30, "IO_INSTRUCTION", 1, 2000, 2000, 2000);
	check_exit(&a, 12, "HLT", 1, 4700, 4700, 4700);
	check_exit(&a, 18, "VMCALL", 2, 200, 200, 400);
	check_exit(&a, 20, "VMLAUNCH", 1, 200, 200, 200);
	check_exit(&a, 48, "EPT_VIOLATION", 1, 300, 300, 300);
	check_exit(&a, 99, NULL, 1, 50, 50, 50);
	assert_int_equal(a.unknown_exits, 1);
	/* nearest rank of two latencies: p50 is the first (exact: the minimum), p99 the max */
	ei = exit_of(&a, 1);
	assert_true(vm_exit_quantile(ei, 0.5) == 100.0);
	assert_true(vm_exit_quantile(ei, 0.99) == 3500.0);
	vm_analysis_free(&a);
}

static void test_exit_names(void **state)
{
	(void)state;
	assert_string_equal(vm_exit_name(VM_ISA_VMX, 30), "IO_INSTRUCTION");
	assert_string_equal(vm_exit_name(VM_ISA_VMX, 48), "EPT_VIOLATION");
	/* a failed entry's flag (bit 31) over the basic reason 33 */
	assert_string_equal(vm_exit_name(VM_ISA_VMX, 0x80000021u), "INVALID_STATE");
	assert_null(vm_exit_name(VM_ISA_VMX, 99));
	assert_string_equal(vm_exit_name(VM_ISA_SVM, 0x7b), "io");
	assert_string_equal(vm_exit_name(VM_ISA_SVM, 0x78), "hlt");
	assert_string_equal(vm_exit_name(VM_ISA_SVM, 0x400), "npf");
	assert_string_equal(vm_exit_name(VM_ISA_SVM, 0x4e), "PF excp");
	assert_string_equal(vm_exit_name(VM_ISA_SVM, 0xffffffffu), "invalid_guest_state");
	assert_null(vm_exit_name(VM_ISA_SVM, 0x7c7c));
	assert_null(vm_exit_name(0, 30)); /* no isa: no table */
	assert_string_equal(vm_isa_name(VM_ISA_SVM), "svm");
}

static void test_sync_offset(void **state)
{
	struct vm_analysis a;

	(void)state;
	analyze_files(&a, true);
	assert_true(a.sync.guest);
	assert_true(a.sync.synced);
	assert_false(a.sync.assumed);
	assert_int_equal(a.sync.points, 2);
	assert_int_equal(a.sync.offset_ns, -100000);
	assert_int_equal(a.sync.error_ns, 20);
	assert_int_equal(a.guest_events, 9);
	vm_analysis_free(&a);
}

static void test_guest_threads_fused(void **state)
{
	static const struct want_iv worker[] = {
		{ 2000, 5000, VM_G_RUNNING, NULL },
		{ 5000, 5200, VM_G_HOST, "hypervisor" },
		{ 5200, 8200, VM_G_HOST, "preempted" },
		{ 8200, 8500, VM_G_HOST, "hypervisor" },
		{ 8500, 12000, VM_G_RUNNING, NULL },
		{ 12000, 12300, VM_G_HOST, "hypervisor" },
		{ 12300, 14000, VM_G_HOST, "vmm" },
		{ 14000, 15000, VM_G_RUNNING, NULL },
		{ 15000, 21000, VM_G_BLOCKED, NULL },
		{ 21000, 29900, VM_G_RUNNING, NULL },
		{ 29900, 30100, VM_G_HOST, "hypervisor" },
		{ 30100, 40000, VM_G_RUNNING, NULL },
		{ 40000, 40050, VM_G_HOST, "hypervisor" },
		{ 40050, 48000, VM_G_RUNNING, NULL },
	};
	static const struct want_iv batch[] = {
		{ 1500, 2000, VM_G_UNTRACED, NULL }, /* before the host saw vCPU 1 */
		{ 2000, 3000, VM_G_RUNNING, NULL },	 { 3000, 3200, VM_G_HOST, "hypervisor" },
		{ 3200, 6000, VM_G_RUNNING, NULL }, /* vCPU 1 in L2: this thread runs it */
		{ 6000, 6300, VM_G_HOST, "hypervisor" }, { 6300, 9000, VM_G_RUNNING, NULL },
		{ 9000, 9100, VM_G_HOST, "hypervisor" }, { 9100, 9500, VM_G_RUNNING, NULL },
		{ 9500, 46000, VM_G_WAITING, NULL },	 { 46000, 48000, VM_G_RUNNING, NULL },
	};
	static const struct want_iv irq[] = {
		{ 9500, 44900, VM_G_RUNNING, NULL },
		{ 44900, 45100, VM_G_HOST, "hypervisor" },
		{ 45100, 46000, VM_G_RUNNING, NULL },
		{ 46000, 48000, VM_G_BLOCKED, NULL },
	};
	struct vm_analysis a;
	const struct vm_gthread *w, *b, *q;

	(void)state;
	analyze_files(&a, true);
	assert_int_equal(a.nthreads, 3); /* the idle tasks (tid 0) are not threads */
	w = vm_gthread_of(&a, 1001);
	b = vm_gthread_of(&a, 1002);
	q = vm_gthread_of(&a, 1003);
	assert_non_null(w);
	assert_non_null(b);
	assert_non_null(q);
	assert_string_equal(w->comm, "worker");
	assert_string_equal(q->comm, "irq/9");
	check_thread_intervals(w, worker, NELEM(worker));
	check_thread_intervals(b, batch, NELEM(batch));
	check_thread_intervals(q, irq, NELEM(irq));
	assert_int_equal(w->state_ns[VM_G_RUNNING], 34250);
	assert_int_equal(w->state_ns[VM_G_HOST], 5750);
	assert_int_equal(w->host_ns[VM_HYPERVISOR], 1050);
	assert_int_equal(w->host_ns[VM_VMM], 1700);
	assert_int_equal(w->host_ns[VM_PREEMPTED], 3000);
	assert_int_equal(w->host_ns[VM_IDLE], 0);
	assert_int_equal(w->state_ns[VM_G_BLOCKED], 6000);
	assert_int_equal(b->state_ns[VM_G_UNTRACED], 500);
	assert_int_equal(b->state_ns[VM_G_RUNNING], 8900);
	assert_int_equal(b->state_ns[VM_G_HOST], 600);
	assert_int_equal(b->state_ns[VM_G_WAITING], 36500);
	assert_int_equal(q->state_ns[VM_G_RUNNING], 36300);
	assert_int_equal(q->state_ns[VM_G_HOST], 200);
	assert_int_equal(q->state_ns[VM_G_BLOCKED], 2000);
	vm_analysis_free(&a);
}

/*
 * The fused view as a graph: a root, one task per stint of a guest thread on a CPU, one
 * child task per stretch its vCPU was out of guest mode, named by the state that took most
 * of it (tests/data/vm's answers: worker's first stint 2000-15000 holds two stretches,
 * 5000-8500 preempted 3000 ns in 3500, 12000-14000 in the VMM 1700 in 2000; its second two;
 * batch's first three; irq/9's one).
 */
static void test_graph(void **state)
{
	static const struct {
		int64_t start, end;
		const char *name, *attrs;
	} worker_stalls[] = {
		{ 5000, 8500, "vcpu preempted",
		  "{\"guest_tid\":1001,\"hypervisor_ns\":500,\"idle_ns\":0,\"preempted_ns\":3000,"
		  "\"vcpu_id\":0,\"vmm_ns\":0}" },
		{ 12000, 14000, "vcpu vmm",
		  "{\"guest_tid\":1001,\"hypervisor_ns\":300,\"idle_ns\":0,\"preempted_ns\":0,"
		  "\"vcpu_id\":0,\"vmm_ns\":1700}" },
	};
	struct vm_analysis a;
	struct graph g;
	struct graph_id128 id;
	char why[256];
	const struct graph_task *stint = NULL;
	size_t stints = 0, stalls = 0, k = 0;

	(void)state;
	analyze_files(&a, true);
	graph_init(&g);
	if (vm_to_graph(&a, 1000000000, &g, &id, why, sizeof(why)))
		fail_msg("%s", why);
	assert_int_equal(g.ntasks, 14);
	assert_int_equal(g.nedges, 13);
	assert_string_equal(g.tasks[0].service, "vm");
	assert_int_equal(g.tasks[0].start, 1000000000 + 1500);
	assert_int_equal(g.tasks[0].end, 1000000000 + 48000);
	for (size_t i = 1; i < g.ntasks; i++) {
		const struct graph_task *t = &g.tasks[i];

		assert_true(graph_id128_eq(t->trace, id));
		if (strcmp(t->service, "guest") == 0) {
			stints++;
			assert_int_equal(t->parent, 1);
			if (t->tid == 1001 && t->start == 1000000000 + 2000)
				stint = t;
			continue;
		}
		stalls++;
		assert_string_equal(t->service, "host");
		if (!stint || t->parent != stint->id)
			continue;
		assert_true(k < NELEM(worker_stalls));
		assert_int_equal(t->start, 1000000000 + worker_stalls[k].start);
		assert_int_equal(t->end, 1000000000 + worker_stalls[k].end);
		assert_string_equal(t->name, worker_stalls[k].name);
		assert_int_equal(t->tid, 101); /* vCPU 0's host thread */
		assert_int_equal(t->pid, 100);
		assert_string_equal(t->attrs, worker_stalls[k].attrs);
		k++;
	}
	assert_int_equal(stints, 5);
	assert_int_equal(stalls, 8);
	assert_non_null(stint);
	assert_int_equal(stint->end, 1000000000 + 15000);
	assert_string_equal(stint->name, "worker");
	assert_int_equal(k, NELEM(worker_stalls));
	graph_free(&g);
	/* without a guest there is no graph */
	vm_analysis_free(&a);
	analyze_files(&a, false);
	graph_init(&g);
	assert_int_equal(vm_to_graph(&a, 0, &g, &id, why, sizeof(why)), -EINVAL);
	graph_free(&g);
	vm_analysis_free(&a);
}

/* ------------------------------------------------------------------------ bad input */

/* Runs the host pass (and the sync and guest passes when guest is given) on streams in
 * memory; returns the error's tag (NULL: none), its message in msg. */
static const char *run_mem(const char *host, const char *guest, bool assume, int64_t vm_pid,
			   size_t max_iv, struct vm_analysis *a, char *msg)
{
	struct vm_err err = { 0 };
	struct vm_stream *h, *g = NULL;
	int rc;

	vm_analysis_init(a, max_iv);
	h = vm_stream_open_mem("host", host, strlen(host), &err);
	assert_non_null(h);
	rc = vm_host_pass(a, h, &err);
	if (!rc && guest) {
		g = vm_stream_open_mem("guest", guest, strlen(guest), &err);
		assert_non_null(g);
		rc = vm_sync_pass(a, g, assume, &err);
		if (!rc)
			rc = vm_stream_rewind(g, &err);
		if (!rc)
			rc = vm_guest_pass(a, g, vm_pid, &err);
	}
	vm_stream_close(h);
	vm_stream_close(g);
	if (msg)
		snprintf(msg, 512, "%s", err.msg);
	if (rc) {
		assert_non_null(err.tag);
		return err.tag;
	}
	return NULL;
}

static void expect_error(const char *host, const char *tag, const char *in_msg)
{
	struct vm_analysis a;
	char msg[512];
	const char *got = run_mem(host, NULL, false, 0, 0, &a, msg);

	vm_analysis_free(&a);
	if (!got || strcmp(got, tag) != 0)
		fail_msg("want %s, got %s: %s\n--- input:\n%s", tag, got ? got : "no error", msg,
			 host);
	if (in_msg && !strstr(msg, in_msg))
		fail_msg("%s: the message \"%s\" does not say \"%s\"", tag, msg, in_msg);
}

#define ENTRY(t) "{\"time\":" #t ",\"cpu\":0,\"name\":\"kvm_entry\",\"tid\":7,\"fields\":{}}\n"

static void test_bad_streams(void **state)
{
	char *longline;

	(void)state;
	/* out of order: refused with the line, never re-sorted */
	expect_error(ENTRY(10) "# a comment\n" ENTRY(5), "E_VM_ORDER", "host:3:");
	expect_error(ENTRY(10) "{\"time\":1,\n", "E_VM_JSON", "host:2:");
	expect_error("[1,2]\n", "E_VM_JSON", "not a JSON object");
	expect_error("{\"time\":1,\"time\":2,\"cpu\":0,\"name\":\"x\"}\n", "E_VM_JSON", "host:1");
	expect_error("{\"cpu\":0,\"name\":\"kvm_entry\",\"tid\":1}\n", "E_VM_FIELD", "\"time\"");
	expect_error("{\"time\":-1,\"cpu\":0,\"name\":\"kvm_entry\",\"tid\":1}\n", "E_VM_FIELD",
		     "\"time\"");
	expect_error("{\"time\":1.5,\"cpu\":0,\"name\":\"kvm_entry\",\"tid\":1}\n", "E_VM_FIELD",
		     "\"time\"");
	expect_error("{\"time\":1,\"name\":\"kvm_entry\",\"tid\":1}\n", "E_VM_FIELD", "\"cpu\"");
	expect_error("{\"time\":1,\"cpu\":0,\"name\":\"\"}\n", "E_VM_FIELD", "\"name\"");
	/* jansson refuses \\u0000 in a string: a name cannot hide a NUL */
	expect_error("{\"time\":1,\"cpu\":0,\"name\":\"kvm_\\u0000x\",\"tid\":1}\n", "E_VM_JSON",
		     "host:1:");
	expect_error("{\"time\":1,\"cpu\":0,\"name\":\"kvm_entry\",\"tid\":1,\"fields\":[]}\n",
		     "E_VM_FIELD", "\"fields\"");
	expect_error("{\"time\":1,\"cpu\":0,\"name\":\"kvm_entry\"}\n", "E_VM_FIELD", "tid");
	expect_error("{\"time\":1,\"cpu\":0,\"name\":\"kvm_exit\",\"tid\":1,\"fields\":{}}\n",
		     "E_VM_FIELD", "exit_reason");
	expect_error("{\"time\":1,\"cpu\":0,\"name\":\"kvm_exit\",\"tid\":1,"
		     "\"fields\":{\"exit_reason\":4294967296}}\n",
		     "E_VM_FIELD", "exit_reason");
	expect_error("{\"time\":1,\"cpu\":0,\"name\":\"sched_switch\",\"tid\":1,\"fields\":{}}\n",
		     "E_VM_FIELD", "prev_pid");
	expect_error(ENTRY(1) "{\"time\":2,\"cpu\":0,\"name\":\"sched_switch\",\"tid\":7,"
			      "\"fields\":{\"prev_pid\":7,\"next_pid\":0,\"prev_state\":[]}}\n",
		     "E_VM_FIELD", "prev_state");
	/* a NUL byte in a line */
	{
		static const char nul[] = "{\"time\":1,\"cpu\":0,\"name\":\"a\"}\n{\"ti\0me\":2}\n";
		struct vm_analysis a;
		struct vm_err err = { 0 };
		struct vm_stream *s = vm_stream_open_mem("host", nul, sizeof(nul) - 1, &err);

		vm_analysis_init(&a, 0);
		assert_int_equal(vm_host_pass(&a, s, &err), -1);
		assert_string_equal(err.tag, "E_VM_JSON");
		assert_non_null(strstr(err.msg, "host:2:"));
		vm_stream_close(s);
		vm_analysis_free(&a);
	}
	/* a line longer than the bound, then a good one: refused at the long line */
	longline = malloc(VM_STREAM_LINE_MAX + 100);
	assert_non_null(longline);
	memset(longline, ' ', VM_STREAM_LINE_MAX + 10);
	strcpy(longline + VM_STREAM_LINE_MAX + 10, "\n" ENTRY(1));
	expect_error(longline, "E_VM_JSON", "host:1:");
	free(longline);
}

static void test_unknown_exit_counted(void **state)
{
	static const char host[] = "{\"time\":0,\"cpu\":0,\"name\":\"kvm_exit\",\"tid\":9,"
				   "\"fields\":{\"exit_reason\":31337,\"isa\":2}}\n"
				   "{\"time\":70,\"cpu\":0,\"name\":\"kvm_entry\",\"tid\":9}\n"
				   "{\"time\":100,\"cpu\":0,\"name\":\"kvm_exit\",\"tid\":9,"
				   "\"fields\":{\"exit_reason\":31337,\"isa\":2}}\n"
				   "{\"time\":110,\"cpu\":0,\"name\":\"kvm_entry\",\"tid\":9}\n"
				   "{\"time\":200,\"cpu\":0,\"name\":\"kvm_exit\",\"tid\":9,"
				   "\"fields\":{\"exit_reason\":123,\"isa\":7}}\n"
				   "{\"time\":300,\"cpu\":0,\"name\":\"kvm_exit\",\"tid\":9,"
				   "\"fields\":{\"exit_reason\":123,\"isa\":7}}\n";
	struct vm_analysis a;

	(void)state;
	assert_null(run_mem(host, NULL, false, 0, 0, &a, NULL));
	assert_int_equal(a.nexits, 2);
	assert_int_equal(a.unknown_exits, 4);
	assert_int_equal(a.exits[0].reason, 31337);
	assert_null(a.exits[0].name);
	assert_int_equal(a.exits[0].count, 2);
	assert_int_equal(a.exits[0].samples, 2);
	assert_int_equal(a.exits[0].min_ns, 10);
	assert_int_equal(a.exits[0].max_ns, 70);
	/* an isa neither VMX nor SVM: counted, never named, latency only where an entry
	 * followed (none did) */
	assert_int_equal(a.exits[1].isa, 7);
	assert_int_equal(a.exits[1].count, 2);
	assert_int_equal(a.exits[1].samples, 0);
	assert_int_equal(a.vcpus[0].state_ns[VM_HYPERVISOR], 70 + 10 + 100);
	assert_int_equal(a.vcpus[0].state_ns[VM_GUEST], 30 + 90);
	vm_analysis_free(&a);
}

/* One vCPU (tid 11 of VMM 10), in guest 0-100, in the hypervisor 100-150, in guest after. */
static const char small_host[] =
	"{\"time\":0,\"cpu\":0,\"name\":\"kvm_entry\",\"tid\":11,\"pid\":10,"
	"\"fields\":{\"vcpu_id\":0}}\n"
	"{\"time\":100,\"cpu\":0,\"name\":\"kvm_exit\",\"tid\":11,\"pid\":10,"
	"\"fields\":{\"vcpu_id\":0,\"exit_reason\":1,\"isa\":1}}\n"
	"{\"time\":150,\"cpu\":0,\"name\":\"kvm_entry\",\"tid\":11,\"pid\":10,"
	"\"fields\":{\"vcpu_id\":0}}\n"
	"{\"time\":300,\"cpu\":0,\"name\":\"kvm_pio\",\"tid\":11,\"pid\":10}\n";

/* A guest thread 5 on CPU 0 from 20 to 200, no synchronisation point, host times. */
static const char nosync_guest[] =
	"{\"time\":20,\"cpu\":0,\"name\":\"sched_switch\",\"tid\":0,"
	"\"fields\":{\"prev_pid\":0,\"prev_state\":0,\"next_pid\":5,\"next_comm\":\"t\\u001b[2J\"}}\n"
	"{\"time\":200,\"cpu\":0,\"name\":\"sched_switch\",\"tid\":5,"
	"\"fields\":{\"prev_pid\":5,\"prev_state\":\"S\",\"next_pid\":0}}\n";

static void test_guest_without_sync(void **state)
{
	struct vm_analysis a;
	const struct vm_gthread *g;
	char msg[512];

	(void)state;
	/* refused: its times cannot be related to the host's */
	assert_string_equal(run_mem(small_host, nosync_guest, false, 0, 0, &a, msg),
			    "E_VM_NO_SYNC");
	assert_non_null(strstr(msg, "--assume-synced"));
	vm_analysis_free(&a);
	/* or taken as host times, and then marked so */
	assert_null(run_mem(small_host, nosync_guest, true, 0, 0, &a, NULL));
	assert_true(a.sync.assumed);
	assert_false(a.sync.synced);
	assert_int_equal(a.sync.offset_ns, 0);
	g = vm_gthread_of(&a, 5);
	assert_non_null(g);
	assert_int_equal(g->state_ns[VM_G_RUNNING], 80 + 50);
	assert_int_equal(g->state_ns[VM_G_HOST], 50);
	assert_int_equal(g->host_ns[VM_HYPERVISOR], 50);
	/* a hostile name is cleaned before anyone prints it */
	assert_null(strchr(g->comm, '\033'));
	vm_analysis_free(&a);
}

static void test_sync_errors(void **state)
{
	static const char host[] =
		"{\"time\":1000,\"cpu\":0,\"name\":\"kvm_hypercall\",\"tid\":11,\"pid\":10,"
		"\"fields\":{\"nr\":2003134068,\"a0\":1}}\n"
		"{\"time\":2000,\"cpu\":0,\"name\":\"kvm_hypercall\",\"tid\":11,\"pid\":10,"
		"\"fields\":{\"nr\":2003134068,\"a0\":2}}\n";
	/* point 1: offset in [890, 900]; point 2: in [1490, 1500]: they cannot both hold */
	static const char guest_drift[] =
		"{\"time\":100,\"cpu\":0,\"name\":\"vm_sync\",\"fields\":{\"id\":1,\"after\":110}}\n"
		"{\"time\":500,\"cpu\":0,\"name\":\"vm_sync\",\"fields\":{\"id\":2,\"after\":510}}\n";
	static const char guest_bad_point[] =
		"{\"time\":100,\"cpu\":0,\"name\":\"vm_sync\",\"fields\":{\"id\":1,\"after\":90}}\n";
	static const char guest_unseen[] =
		"{\"time\":100,\"cpu\":0,\"name\":\"vm_sync\",\"fields\":{\"id\":3,\"after\":110}}\n";
	static const char host_dup[] =
		"{\"time\":1000,\"cpu\":0,\"name\":\"kvm_hypercall\",\"tid\":11,"
		"\"fields\":{\"nr\":2003134068,\"a0\":1}}\n"
		"{\"time\":2000,\"cpu\":0,\"name\":\"kvm_hypercall\",\"tid\":11,"
		"\"fields\":{\"nr\":2003134068,\"a0\":1}}\n";
	struct vm_analysis a;
	char msg[512];

	(void)state;
	assert_string_equal(run_mem(host, guest_drift, false, 0, 0, &a, msg), "E_VM_SYNC");
	assert_non_null(strstr(msg, "line 1"));
	assert_non_null(strstr(msg, "line 2"));
	vm_analysis_free(&a);
	assert_string_equal(run_mem(host, guest_bad_point, false, 0, 0, &a, msg), "E_VM_FIELD");
	assert_non_null(strstr(msg, "guest:1:"));
	vm_analysis_free(&a);
	/* a point the host never saw is no point */
	assert_string_equal(run_mem(host, guest_unseen, false, 0, 0, &a, msg), "E_VM_NO_SYNC");
	vm_analysis_free(&a);
	assert_string_equal(run_mem(host_dup, guest_unseen, false, 0, 0, &a, msg), "E_VM_SYNC");
	vm_analysis_free(&a);
}

static void test_sync_one_point(void **state)
{
	static const char host[] = "{\"time\":1000,\"cpu\":0,\"name\":\"kvm_hypercall\",\"tid\":11,"
				   "\"fields\":{\"nr\":2003134068,\"a0\":1}}\n";
	static const char guest[] =
		"{\"time\":100,\"cpu\":0,\"name\":\"vm_sync\",\"fields\":{\"id\":1,\"after\":111}}\n";
	struct vm_analysis a;

	(void)state;
	assert_null(run_mem(host, guest, false, 0, 0, &a, NULL));
	/* offset in [1000 - 111, 1000 - 100] = [889, 900]: 894, and 900 - 894 = 6 covers both */
	assert_int_equal(a.sync.offset_ns, 894);
	assert_int_equal(a.sync.error_ns, 6);
	assert_int_equal(a.sync.points, 1);
	vm_analysis_free(&a);
}

/*
 * TSC points: the host's TSC runs at 2 GHz and read 5,000,000 at host time 1000 (the reads
 * 10 ns apart); vCPU 0's offset is -4,000,000 (written by the VMM's main thread, tid 10,
 * which does not become a vCPU).  The guest read TSC 1,100,000 between its times 500 and 520:
 * host TSC 5,100,000, 100,000 cycles = 50,000 ns after the reference, host time 51,000; the
 * offset lies in [50480, 50500] widened by 10 + 1 + 1 (the reference's gap, rounding, and
 * the kHz's rounding: 50,000 / 4,000,000 rounds to 0, plus 1) = [50468, 50512]: 50490 +- 22.
 */
static void test_sync_tsc(void **state)
{
	static const char host[] =
		"{\"time\":0,\"cpu\":0,\"name\":\"kvm_write_tsc_offset\",\"tid\":10,\"pid\":10,"
		"\"fields\":{\"vcpu_id\":0,\"previous_tsc_offset\":0,\"next_tsc_offset\":-4000000}}\n"
		"{\"time\":1000,\"cpu\":0,\"name\":\"tsc_clock\",\"tid\":10,"
		"\"fields\":{\"tsc\":5000000,\"khz\":2000000,\"error_ns\":10}}\n"
		"{\"time\":2000,\"cpu\":0,\"name\":\"kvm_entry\",\"tid\":11,\"pid\":10,"
		"\"fields\":{\"vcpu_id\":0}}\n";
	static const char changed[] =
		"{\"time\":0,\"cpu\":0,\"name\":\"kvm_write_tsc_offset\",\"tid\":10,\"pid\":10,"
		"\"fields\":{\"vcpu_id\":0,\"next_tsc_offset\":-4000000}}\n"
		"{\"time\":1000,\"cpu\":0,\"name\":\"tsc_clock\",\"tid\":10,"
		"\"fields\":{\"tsc\":5000000,\"khz\":2000000}}\n"
		"{\"time\":1500,\"cpu\":0,\"name\":\"kvm_write_tsc_offset\",\"tid\":11,\"pid\":10,"
		"\"fields\":{\"vcpu_id\":0,\"next_tsc_offset\":-3000000}}\n";
	static const char guest[] = "{\"time\":500,\"cpu\":0,\"name\":\"vm_tsc\","
				    "\"fields\":{\"tsc\":1100000,\"after\":520}}\n";
	struct vm_analysis a;
	char msg[512];

	(void)state;
	assert_null(run_mem(host, guest, false, 0, 0, &a, msg));
	assert_int_equal(a.nvcpus, 1); /* tid 11 only */
	assert_int_equal(a.vcpus[0].tid, 11);
	assert_true(a.sync.synced);
	assert_int_equal(a.sync.points, 1);
	assert_int_equal(a.sync.offset_ns, 50490);
	assert_int_equal(a.sync.error_ns, 22);
	vm_analysis_free(&a);
	/* an offset written again with another value: its readings cannot be converted */
	assert_string_equal(run_mem(changed, guest, false, 0, 0, &a, msg), "E_VM_SYNC");
	assert_non_null(strstr(msg, "host line 3"));
	vm_analysis_free(&a);
	/* no reference on the host: the reading is no point */
	assert_string_equal(run_mem(small_host, guest, false, 0, 0, &a, msg), "E_VM_NO_SYNC");
	vm_analysis_free(&a);
}

static void test_two_vms(void **state)
{
	/* VMM 10's vCPU 0 (tid 11) and VMM 20's vCPU 0 (tid 21), both in guest mode */
	static const char host[] =
		"{\"time\":0,\"cpu\":0,\"name\":\"kvm_entry\",\"tid\":11,\"pid\":10,"
		"\"fields\":{\"vcpu_id\":0}}\n"
		"{\"time\":0,\"cpu\":1,\"name\":\"kvm_entry\",\"tid\":21,\"pid\":20,"
		"\"fields\":{\"vcpu_id\":0}}\n"
		"{\"time\":50,\"cpu\":1,\"name\":\"kvm_exit\",\"tid\":21,\"pid\":20,"
		"\"fields\":{\"vcpu_id\":0,\"exit_reason\":12,\"isa\":1}}\n"
		"{\"time\":300,\"cpu\":0,\"name\":\"kvm_pio\",\"tid\":11,\"pid\":10}\n";
	struct vm_analysis a;
	const struct vm_gthread *g;
	char msg[512];

	(void)state;
	assert_string_equal(run_mem(host, nosync_guest, true, 0, 0, &a, msg), "E_VM_AMBIGUOUS");
	assert_non_null(strstr(msg, "--vm-pid"));
	vm_analysis_free(&a);
	assert_null(run_mem(host, nosync_guest, true, 10, 0, &a, NULL));
	g = vm_gthread_of(&a, 5);
	assert_int_equal(g->state_ns[VM_G_RUNNING], 180);
	vm_analysis_free(&a);
	assert_null(run_mem(host, nosync_guest, true, 20, 0, &a, NULL));
	g = vm_gthread_of(&a, 5);
	assert_int_equal(g->state_ns[VM_G_RUNNING], 30);
	assert_int_equal(g->host_ns[VM_HYPERVISOR], 150);
	vm_analysis_free(&a);
}

static void test_interval_bound(void **state)
{
	struct vm_analysis a;
	char msg[512];

	(void)state;
	/* small_host makes 3 vCPU intervals: a bound of 2 is reached, 3 is enough */
	assert_string_equal(run_mem(small_host, NULL, false, 0, 2, &a, msg), "E_VM_LIMIT");
	vm_analysis_free(&a);
	assert_null(run_mem(small_host, NULL, false, 0, 3, &a, NULL));
	assert_int_equal(a.vcpus[0].niv, 3);
	vm_analysis_free(&a);
}

/* vm/sync.h, the arithmetic the live path (aggregator/aggd_vm.c) keeps running: points
 * intersect, a contradicting one is refused and counted and changes nothing, the middle
 * rounds down and the bound covers the rest. */
static void test_sync_running(void **state)
{
	struct vm_sync_acc s;
	int64_t lo = 0, hi = 0, off = 0, err = 0;

	(void)state;
	vm_sync_acc_init(&s);
	assert_int_equal(s.points, 0);
	/* h = 1000, the guest read 1100 before and 1110 after: offset in [-110, -100] */
	assert_int_equal(vm_sync_point(1000, 1100, 1110, &lo, &hi), 0);
	assert_int_equal(lo, -110);
	assert_int_equal(hi, -100);
	assert_true(vm_sync_acc_add(&s, lo, hi));
	assert_int_equal(vm_sync_point(2000, 2103, 2115, &lo, &hi), 0); /* [-115, -103] */
	assert_true(vm_sync_acc_add(&s, lo, hi));
	assert_int_equal(s.lo, -110);
	assert_int_equal(s.hi, -103);
	/* a point a second off: refused, counted, the intersection as it was */
	assert_int_equal(vm_sync_point(3000, 1000003100, 1000003110, &lo, &hi), 0);
	assert_false(vm_sync_acc_add(&s, lo, hi));
	assert_int_equal(s.refused, 1);
	assert_int_equal(s.points, 2);
	assert_int_equal(s.lo, -110);
	assert_int_equal(s.hi, -103);
	vm_sync_middle(s.lo, s.hi, &off, &err);
	assert_int_equal(off, -107); /* -110 + 7 / 2 */
	assert_int_equal(err, 4);
	assert_true(off - err <= s.lo && s.hi <= off + err);
	/* after < before, and differences that overflow: not points */
	assert_int_equal(vm_sync_point(0, 10, 9, &lo, &hi), -1);
	assert_int_equal(vm_sync_point(INT64_MIN, 0, INT64_MAX, &lo, &hi), -1);
	/* the widest interval's middle without overflow; the bound saturates */
	vm_sync_middle(INT64_MIN, INT64_MAX, &off, &err);
	assert_int_equal(off, -1);
	assert_int_equal(err, INT64_MAX);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_vcpu_states),
		cmocka_unit_test(test_exit_reasons),
		cmocka_unit_test(test_exit_names),
		cmocka_unit_test(test_sync_offset),
		cmocka_unit_test(test_guest_threads_fused),
		cmocka_unit_test(test_graph),
		cmocka_unit_test(test_bad_streams),
		cmocka_unit_test(test_unknown_exit_counted),
		cmocka_unit_test(test_guest_without_sync),
		cmocka_unit_test(test_sync_errors),
		cmocka_unit_test(test_sync_one_point),
		cmocka_unit_test(test_sync_tsc),
		cmocka_unit_test(test_two_vms),
		cmocka_unit_test(test_interval_bound),
		cmocka_unit_test(test_sync_running),
	};

	return wt_status(cmocka_run_group_tests(tests, NULL, NULL));
}
