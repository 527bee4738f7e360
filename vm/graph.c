// SPDX-License-Identifier: Apache-2.0
/*
 * The fused view as an execution graph (graph/graph.h), so that the graph store keeps it and
 * `weft graph show` draws it with its critical path through the host's stalls
 * (docs/vm.md, "In the graph store").
 *
 * One trace per analysis.  Its root task (service "vm", name "guest threads") spans the guest
 * stream; under it, one task per stint of a guest thread on a guest CPU (service "guest",
 * name its comm, host "guest", tid the guest tid), from the switch-in to the switch-out; under
 * each stint, one task per stretch its vCPU was out of guest mode (service "host", name
 * "vcpu " and the state that took most of the stretch: "vcpu hypervisor", "vcpu vmm", "vcpu
 * preempted" or "vcpu idle"; host "host", pid the VMM, tid the vCPU thread, attributes
 * vcpu_id, guest_tid and the ns of each state in the stretch).  A stretch is one task, not
 * one per state, because the critical path's walk (graph/critpath.c, Jaeger's rule) never
 * chains siblings that touch: a hypervisor-preempted-hypervisor stall drawn as three tasks
 * would leave its preemption off the path.  Parent edges tie them.  Times are
 * host ns plus the caller's epoch offset (the graph model's times are ns since the Unix
 * epoch; a recorded stream's are on its own clock).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include "vm/vm_int.h"

static struct graph_id128 trace_id(const struct vm_analysis *a)
{
	/* FNV-1a over what identifies the analysis: the same streams give the same trace */
	uint64_t h = 0xcbf29ce484222325ULL,
		 vals[5] = { (uint64_t)a->host_first_ns, (uint64_t)a->host_last_ns, a->host_events,
			     a->guest_events, (uint64_t)a->sync.offset_ns };
	struct graph_id128 id;

	for (size_t i = 0; i < 5; i++)
		for (int b = 0; b < 8; b++) {
			h ^= (vals[i] >> (8 * b)) & 0xff;
			h *= 0x100000001b3ULL;
		}
	id.hi = h ^ 0x766d; /* "vm" */
	id.lo = h * 0x9e3779b97f4a7c15ULL | 1;
	return id;
}

int vm_to_graph(const struct vm_analysis *a, int64_t epoch_ns, struct graph *g,
		struct graph_id128 *trace, char *why, size_t whysz)
{
	struct graph_task root = { 0 };
	uint64_t next = 2;
	int64_t first = INT64_MAX, last = INT64_MIN;
	char attrs[256], name[64];

	if (!a->sync.guest || !a->nthreads) {
		snprintf(why, whysz, "no guest threads: the graph needs a --guest stream");
		return -EINVAL;
	}
	root.trace = trace_id(a);
	*trace = root.trace;
	for (size_t i = 0; i < a->nthreads; i++) {
		const struct vm_gthread *t = &a->threads[i];

		for (size_t k = 0; k < t->niv; k++) {
			if (t->iv[k].start < first)
				first = t->iv[k].start;
			if (t->iv[k].end > last)
				last = t->iv[k].end;
		}
	}
	if (first > last) {
		snprintf(why, whysz, "the guest threads have no intervals: nothing to draw");
		return -ENODATA;
	}
	if (first < 0) {
		snprintf(why, whysz, "a guest interval starts before the host's time 0 (%lld ns)",
			 (long long)first);
		return -ERANGE;
	}
	if (epoch_ns < 0 || last > INT64_MAX - epoch_ns) {
		snprintf(why, whysz, "times plus the epoch offset %lld overflow",
			 (long long)epoch_ns);
		return -ERANGE;
	}
	root.id = 1;
	root.service = "vm";
	root.name = "guest threads";
	root.host = "guest";
	root.pid = root.tid = -1;
	root.start = first + epoch_ns;
	root.end = last + epoch_ns;
	root.source = GRAPH_SRC_KERNEL;
	root.attrs = "{}";
	if (!graph_add_task(g, &root))
		goto nomem;
	for (size_t i = 0; i < a->nthreads; i++) {
		const struct vm_gthread *t = &a->threads[i];
		size_t k = 0;

		while (k < t->niv) {
			struct graph_task stint = root;
			struct graph_edge edge = { .trace = root.trace,
						   .kind = GRAPH_EDGE_PARENT,
						   .source = GRAPH_SRC_KERNEL };
			size_t end;

			if (t->iv[k].state == VM_G_WAITING || t->iv[k].state == VM_G_BLOCKED) {
				k++;
				continue;
			}
			/* a stint: on a CPU (running, host, untraced) without a gap */
			for (end = k + 1;
			     end < t->niv && t->iv[end].start == t->iv[end - 1].end &&
			     t->iv[end].state != VM_G_WAITING && t->iv[end].state != VM_G_BLOCKED;
			     end++)
				;
			snprintf(name, sizeof(name), "%s", t->comm[0] ? t->comm : "thread");
			stint.id = next++;
			stint.parent = 1;
			stint.service = "guest";
			stint.name = graph_strdup(g, name);
			stint.tid = t->tid;
			stint.start = t->iv[k].start + epoch_ns;
			stint.end = t->iv[end - 1].end + epoch_ns;
			if (!stint.name || !graph_add_task(g, &stint))
				goto nomem;
			edge.from_task = 1;
			edge.to_task = stint.id;
			if (!graph_add_edge(g, &edge))
				goto nomem;
			while (k < end) {
				struct graph_task stall = stint;
				const struct vm_vcpu *v;
				int64_t ns[VM_NSTATES] = { 0 };
				size_t e, top = 0;
				int64_t s0;

				if (t->iv[k].state != VM_G_HOST) {
					k++;
					continue;
				}
				/* one stall per stretch out of guest mode: stalls that touch would
				 * hide each other from the critical path's walk */
				v = t->iv[k].exit >= 0 ? &a->vcpus[t->iv[k].exit] : NULL;
				s0 = t->iv[k].start;
				for (e = k; e < end && t->iv[e].state == VM_G_HOST &&
					    (e == k || t->iv[e].start == t->iv[e - 1].end);
				     e++)
					ns[t->iv[e].host] += t->iv[e].end - t->iv[e].start;
				for (size_t st = 1; st < VM_NSTATES; st++)
					if (ns[st] > ns[top])
						top = st;
				snprintf(name, sizeof(name), "vcpu %s", vm_state_name((int)top));
				snprintf(
					attrs, sizeof(attrs),
					"{\"guest_tid\":%lld,\"hypervisor_ns\":%lld,\"idle_ns\":%lld,"
					"\"preempted_ns\":%lld,\"vcpu_id\":%lld,\"vmm_ns\":%lld}",
					(long long)t->tid, (long long)ns[VM_HYPERVISOR],
					(long long)ns[VM_IDLE], (long long)ns[VM_PREEMPTED],
					(long long)(v ? v->vcpu_id : -1), (long long)ns[VM_VMM]);
				stall.id = next++;
				stall.parent = stint.id;
				stall.service = "host";
				stall.name = graph_strdup(g, name);
				stall.host = "host";
				stall.pid = v ? v->pid : -1;
				stall.tid = v ? v->tid : -1;
				stall.start = s0 + epoch_ns;
				stall.end = t->iv[e - 1].end + epoch_ns;
				stall.attrs = graph_strdup(g, attrs);
				if (!stall.name || !stall.attrs || !graph_add_task(g, &stall))
					goto nomem;
				edge.from_task = stint.id;
				edge.to_task = stall.id;
				if (!graph_add_edge(g, &edge))
					goto nomem;
				k = e;
			}
		}
	}
	return graph_check(g, why, whysz);
nomem:
	snprintf(why, whysz, "out of memory, or more tasks than one graph holds");
	return -ENOMEM;
}
