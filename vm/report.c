// SPDX-License-Identifier: Apache-2.0
/*
 * The analysis for people (a text report) and for programs (one JSON object, built with
 * jansson): per vCPU the share of time in each state, the exit reasons with counts and
 * latency quantiles, the clock synchronisation, and the guest threads that lost the most
 * time to the host (docs/vm.md shows both).
 */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include "vm/exits.h"
#include "vm/vm_int.h"

static size_t top_of(const struct vm_report_opts *o)
{
	return o && o->top ? o->top : 10;
}

/* Threads by time lost to the host, most first (ties: by tid); malloc'd indices. */
static size_t *threads_by_loss(const struct vm_analysis *a)
{
	size_t *idx = malloc((a->nthreads ? a->nthreads : 1) * sizeof(*idx));

	if (!idx)
		return NULL;
	for (size_t i = 0; i < a->nthreads; i++)
		idx[i] = i;
	/* Shell sort: n log^2 n for the many threads a guest may have, and no global for a
	 * qsort() comparator to reach the analysis through */
	for (size_t gap = a->nthreads / 2; gap > 0; gap /= 2)
		for (size_t i = gap; i < a->nthreads; i++)
			for (size_t j = i; j >= gap; j -= gap) {
				const struct vm_gthread *x = &a->threads[idx[j - gap]],
							*y = &a->threads[idx[j]];
				int64_t hx = x->state_ns[VM_G_HOST], hy = y->state_ns[VM_G_HOST];
				size_t t;

				if (hx > hy || (hx == hy && x->tid <= y->tid))
					break;
				t = idx[j];
				idx[j] = idx[j - gap];
				idx[j - gap] = t;
			}
	return idx;
}

static void fmt_ns(char *buf, size_t n, double ns)
{
	if (ns < 1e3)
		snprintf(buf, n, "%.0fns", ns);
	else if (ns < 1e6)
		snprintf(buf, n, "%.2fus", ns / 1e3);
	else if (ns < 1e9)
		snprintf(buf, n, "%.2fms", ns / 1e6);
	else
		snprintf(buf, n, "%.3fs", ns / 1e9);
}

static void exit_label(char *buf, size_t n, const struct vm_exit_stat *x)
{
	if (x->name)
		snprintf(buf, n, "%s %s%s", vm_isa_name(x->isa), x->name,
			 x->isa == VM_ISA_VMX && (x->reason & 0x80000000u) ? " (failed entry)" :
									     "");
	else
		snprintf(buf, n, "%s 0x%" PRIx32 " (unknown)", vm_isa_name(x->isa), x->reason);
}

int vm_report_text(FILE *f, const struct vm_analysis *a, const struct vm_report_opts *o)
{
	char b[4][32];
	size_t *idx, top = top_of(o);

	fmt_ns(b[0], sizeof(b[0]), (double)(a->host_last_ns - a->host_first_ns));
	fprintf(f, "host: %" PRIu64 " events over %s, %zu vCPU%s\n", a->host_events, b[0],
		a->nvcpus, a->nvcpus == 1 ? "" : "s");
	if (a->lost_events)
		fprintf(f,
			"WARNING: %" PRIu64 " events were lost while recording: states around "
			"them may be wrong\n",
			a->lost_events);
	if (a->host_ctf.discarded + a->guest_ctf.discarded)
		fprintf(f,
			"WARNING: the tracer discarded %" PRIu64 " events: states around them "
			"may be wrong\n",
			a->host_ctf.discarded + a->guest_ctf.discarded);
	if (a->host_ctf.no_tid + a->guest_ctf.no_tid)
		fprintf(f,
			"WARNING: %" PRIu64 " kvm events had no thread (no tid context, no "
			"sched_switch before them on their CPU): not analysed\n",
			a->host_ctf.no_tid + a->guest_ctf.no_tid);
	for (size_t i = 0; i < a->nvcpus; i++) {
		const struct vm_vcpu *v = &a->vcpus[i];
		double span = (double)(v->last_ns - v->first_ns);

		fmt_ns(b[0], sizeof(b[0]), span);
		fprintf(f, "\nvCPU %" PRId64 " (host thread %" PRId64, v->vcpu_id, v->tid);
		if (v->pid >= 0)
			fprintf(f, ", VMM pid %" PRId64, v->pid);
		fprintf(f, "): %s traced, %" PRIu64 " exits", b[0], v->exits);
		if (v->nested_entries)
			fprintf(f, ", %" PRIu64 " nested entries", v->nested_entries);
		fputc('\n', f);
		for (int s = 0; s < VM_NSTATES; s++) {
			if (s == VM_GUEST_L2 && !v->state_ns[s])
				continue;
			fmt_ns(b[1], sizeof(b[1]), (double)v->state_ns[s]);
			fprintf(f, "  %-11s %6.2f%%  %s\n", vm_state_name(s),
				span > 0 ? 100.0 * (double)v->state_ns[s] / span : 0.0, b[1]);
		}
	}
	if (a->nexits) {
		fprintf(f, "\n%-34s %9s %10s %10s %10s %10s\n", "exit reason", "count", "p50",
			"p90", "p99", "max");
		for (size_t i = 0; i < a->nexits; i++) {
			const struct vm_exit_stat *x = &a->exits[i];
			char label[64];

			exit_label(label, sizeof(label), x);
			fprintf(f, "  %-32s %9" PRIu64, label, x->count);
			if (x->samples) {
				fmt_ns(b[0], sizeof(b[0]), vm_exit_quantile(x, 0.5));
				fmt_ns(b[1], sizeof(b[1]), vm_exit_quantile(x, 0.9));
				fmt_ns(b[2], sizeof(b[2]), vm_exit_quantile(x, 0.99));
				fmt_ns(b[3], sizeof(b[3]), (double)x->max_ns);
				fprintf(f, " %10s %10s %10s %10s", b[0], b[1], b[2], b[3]);
			}
			fputc('\n', f);
		}
		if (a->unknown_exits)
			fprintf(f,
				"  %" PRIu64 " exit%s with a reason these tables do not name "
				"(shown as numbers)\n",
				a->unknown_exits, a->unknown_exits == 1 ? "" : "s");
	}
	if (!a->sync.guest)
		return ferror(f) ? -EIO : 0;
	fputc('\n', f);
	if (!a->sync.synced && !a->sync.assumed) {
		/* live (weft vm live): no point seen on both sides yet */
		fprintf(f,
			"clock: UNSYNCHRONISED: no synchronisation point seen on both sides yet: no "
			"offset, the guest's %" PRIu64
			" events are not on the host's time line and "
			"no guest thread is fused\n",
			a->guest_events);
		return ferror(f) ? -EIO : 0;
	}
	if (a->sync.synced)
		fprintf(f,
			"clock: host = guest %c %" PRId64 " ns, within +-%" PRId64
			" ns (%zu synchronisation point%s)\n",
			a->sync.offset_ns < 0 ? '-' : '+',
			a->sync.offset_ns < 0 ? -a->sync.offset_ns : a->sync.offset_ns,
			a->sync.error_ns, a->sync.points, a->sync.points == 1 ? "" : "s");
	else
		fprintf(f, "clock: UNSYNCHRONISED: no synchronisation points; the guest's times "
			   "were taken as host times (--assume-synced), error unknown\n");
	fprintf(f,
		"guest: %" PRIu64 " events, %zu threads; those that lost the most time to "
		"the host:\n",
		a->guest_events, a->nthreads);
	fprintf(f, "  %8s %-16s %10s %10s %10s %10s %10s %10s\n", "tid", "comm", "running", "host",
		"hypervisor", "vmm", "preempted", "idle");
	idx = threads_by_loss(a);
	if (!idx)
		return -ENOMEM;
	for (size_t k = 0; k < a->nthreads && k < top; k++) {
		const struct vm_gthread *g = &a->threads[idx[k]];
		char c[4][32];

		fmt_ns(b[0], sizeof(b[0]), (double)g->state_ns[VM_G_RUNNING]);
		fmt_ns(b[1], sizeof(b[1]), (double)g->state_ns[VM_G_HOST]);
		fmt_ns(c[0], sizeof(c[0]), (double)g->host_ns[VM_HYPERVISOR]);
		fmt_ns(c[1], sizeof(c[1]), (double)g->host_ns[VM_VMM]);
		fmt_ns(c[2], sizeof(c[2]), (double)g->host_ns[VM_PREEMPTED]);
		fmt_ns(c[3], sizeof(c[3]), (double)g->host_ns[VM_IDLE]);
		fprintf(f, "  %8" PRId64 " %-16s %10s %10s %10s %10s %10s %10s\n", g->tid,
			g->comm[0] ? g->comm : "?", b[0], b[1], c[0], c[1], c[2], c[3]);
	}
	free(idx);
	return ferror(f) ? -EIO : 0;
}

/* ------------------------------------------------------------------------ JSON */

static json_t *states_obj(const int64_t *ns, int n, const char *(*name)(int))
{
	json_t *o = json_object();

	for (int s = 0; s < n; s++)
		json_object_set_new(o, name(s), json_integer(ns[s]));
	return o;
}

static const char *vstate(int s)
{
	return vm_state_name((enum vm_state)s);
}

static const char *gstate(int s)
{
	return vm_gstate_name((enum vm_gstate)s);
}

static json_t *exit_json(const struct vm_exit_stat *x)
{
	json_t *o = json_pack("{s:s, s:I, s:I}", "isa", vm_isa_name(x->isa), "reason",
			      (json_int_t)x->reason, "count", (json_int_t)x->count);

	json_object_set_new(o, "name", x->name ? json_string(x->name) : json_null());
	if (x->samples)
		json_object_set_new(
			o, "latency",
			json_pack("{s:I, s:I, s:I, s:I, s:f, s:f, s:f}", "samples",
				  (json_int_t)x->samples, "min_ns", (json_int_t)x->min_ns, "max_ns",
				  (json_int_t)x->max_ns, "sum_ns", (json_int_t)x->sum_ns, "p50_ns",
				  vm_exit_quantile(x, 0.5), "p90_ns", vm_exit_quantile(x, 0.9),
				  "p99_ns", vm_exit_quantile(x, 0.99)));
	return o;
}

static json_t *intervals_json(const struct vm_analysis *a, const struct vm_interval *iv, size_t n,
			      bool guest)
{
	json_t *arr = json_array();

	for (size_t i = 0; i < n; i++) {
		json_t *o = json_pack("{s:I, s:I, s:s}", "start_ns", (json_int_t)iv[i].start,
				      "end_ns", (json_int_t)iv[i].end, "state",
				      guest ? gstate(iv[i].state) : vstate(iv[i].state));

		if (guest && iv[i].state == VM_G_HOST)
			json_object_set_new(o, "host", json_string(vstate(iv[i].host)));
		if (!guest && iv[i].exit >= 0) {
			char label[64];

			exit_label(label, sizeof(label), &a->exits[iv[i].exit]);
			json_object_set_new(o, "exit", json_string(label));
		}
		json_array_append_new(arr, o);
	}
	return arr;
}

int vm_report_json(FILE *f, const struct vm_analysis *a, const struct vm_report_opts *o)
{
	json_t *root, *arr;
	size_t *idx;
	bool iv = o && o->intervals;
	int rc;

	root = json_pack("{s:{s:I, s:I, s:I}, s:I}", "host", "events", (json_int_t)a->host_events,
			 "first_ns", (json_int_t)a->host_first_ns, "last_ns",
			 (json_int_t)a->host_last_ns, "unknown_exits",
			 (json_int_t)a->unknown_exits);
	if (!root)
		return -ENOMEM;
	if (a->lost_events || a->host_ctf.no_tid || a->host_ctf.discarded || a->guest_ctf.no_tid ||
	    a->guest_ctf.discarded)
		json_object_set_new(root, "warnings",
				    json_pack("{s:I, s:I, s:I, s:I, s:I}", "lost_events",
					      (json_int_t)a->lost_events, "host_no_tid",
					      (json_int_t)a->host_ctf.no_tid, "host_discarded",
					      (json_int_t)a->host_ctf.discarded, "guest_no_tid",
					      (json_int_t)a->guest_ctf.no_tid, "guest_discarded",
					      (json_int_t)a->guest_ctf.discarded));
	arr = json_array();
	for (size_t i = 0; i < a->nvcpus; i++) {
		const struct vm_vcpu *v = &a->vcpus[i];
		json_t *vo = json_pack(
			"{s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "vcpu_id", (json_int_t)v->vcpu_id,
			"tid", (json_int_t)v->tid, "pid", (json_int_t)v->pid, "first_ns",
			(json_int_t)v->first_ns, "last_ns", (json_int_t)v->last_ns, "exits",
			(json_int_t)v->exits, "nested_entries", (json_int_t)v->nested_entries);
		json_t *sh = json_object();
		double span = (double)(v->last_ns - v->first_ns);

		json_object_set_new(vo, "state_ns", states_obj(v->state_ns, VM_NSTATES, vstate));
		for (int s = 0; s < VM_NSTATES; s++)
			json_object_set_new(
				sh, vstate(s),
				json_real(span > 0 ? (double)v->state_ns[s] / span : 0.0));
		json_object_set_new(vo, "shares", sh);
		if (iv)
			json_object_set_new(vo, "intervals",
					    intervals_json(a, v->iv, v->niv, false));
		json_array_append_new(arr, vo);
	}
	json_object_set_new(root, "vcpus", arr);
	arr = json_array();
	for (size_t i = 0; i < a->nexits; i++)
		json_array_append_new(arr, exit_json(&a->exits[i]));
	json_object_set_new(root, "exits", arr);
	if (a->sync.guest) {
		json_object_set_new(root, "sync",
				    json_pack("{s:b, s:b, s:I, s:I, s:I}", "synced", a->sync.synced,
					      "assumed", a->sync.assumed, "points",
					      (json_int_t)a->sync.points, "offset_ns",
					      (json_int_t)a->sync.offset_ns, "error_ns",
					      (json_int_t)a->sync.error_ns));
		if (a->sync.assumed) /* unknown, never 0 */
			json_object_set_new(json_object_get(root, "sync"), "error_ns", json_null());
		if (!a->sync.synced && !a->sync.assumed) /* unsynchronised: no offset at all */
			json_object_set_new(json_object_get(root, "sync"), "offset_ns",
					    json_null());
		if (!a->sync.synced && !a->sync.assumed)
			json_object_set_new(json_object_get(root, "sync"), "error_ns", json_null());
		idx = threads_by_loss(a);
		if (!idx) {
			json_decref(root);
			return -ENOMEM;
		}
		arr = json_array();
		for (size_t k = 0; k < a->nthreads; k++) {
			const struct vm_gthread *g = &a->threads[idx[k]];
			json_t *to =
				json_pack("{s:I, s:s}", "tid", (json_int_t)g->tid, "comm", g->comm);

			json_object_set_new(to, "state_ns",
					    states_obj(g->state_ns, VM_G_NSTATES, gstate));
			json_object_set_new(to, "host_ns",
					    states_obj(g->host_ns, VM_NSTATES, vstate));
			if (iv)
				json_object_set_new(to, "intervals",
						    intervals_json(a, g->iv, g->niv, true));
			json_array_append_new(arr, to);
		}
		free(idx);
		json_object_set_new(root, "guest",
				    json_pack("{s:I, s:o}", "events", (json_int_t)a->guest_events,
					      "threads", arr));
	}
	rc = json_dumpf(root, f, JSON_COMPACT);
	json_decref(root);
	fputc('\n', f);
	return rc || ferror(f) ? -EIO : 0;
}
