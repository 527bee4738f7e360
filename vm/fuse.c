// SPDX-License-Identifier: Apache-2.0
/*
 * Guest and host on one time line (the offset from synchronisation points, with its error
 * bound) and the fused view: each guest thread's time on a guest CPU split by the state of the
 * vCPU under it (vm/vm.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "base/text.h"
#include "vm/sync.h"
#include "vm/vm_int.h"

#define VM_SYNC_EVENT "vm_sync"
#define VM_TSC_EVENT "vm_tsc"

/*
 * A guest TSC reading as an offset interval [*lo, *hi] (vm/vm.h, "TSC points"): 0, 1 if it
 * cannot be a point (no TSC offset of that vCPU, no host reference: not an error, like a
 * hypercall the host did not see), -1 with err set.
 */
static int tsc_point(const struct vm_analysis *a, const struct vm_event *ev, const char *file,
		     int64_t *lo, int64_t *hi, struct vm_err *err)
{
	const struct vm_tsc_offset *off = NULL;
	int64_t tsc, after, host, slack;
	__int128 ns;

	if (vm_event_s64(ev, "tsc", &tsc) || vm_event_s64(ev, "after", &after) ||
	    after < ev->time) {
		vm_err_set(err, "E_VM_FIELD",
			   "%s:%lu: vm_tsc needs fields.tsc (the guest's TSC, a u64 above 2^63 as "
			   "its two's complement) and fields.after (the guest's time after the "
			   "read, >= time)",
			   file, ev->line);
		return -1;
	}
	for (size_t i = 0; i < a->ntscoff; i++) {
		if (a->tscoff[i].vcpu_id != ev->cpu)
			continue;
		if (off) {
			vm_err_set(err, "E_VM_AMBIGUOUS",
				   "%s:%lu: several VMs wrote a TSC offset for vCPU %lld: use "
				   "hypercall points",
				   file, ev->line, (long long)ev->cpu);
			return -1;
		}
		off = &a->tscoff[i];
	}
	if (!off || !a->tscref.have)
		return 1;
	if (off->changed) {
		vm_err_set(err, "E_VM_SYNC",
			   "%s:%lu: vCPU %lld's TSC offset was written again with another value "
			   "(host line %lu): its TSC readings cannot be converted",
			   file, ev->line, (long long)ev->cpu, off->changed);
		return -1;
	}
	/* host TSC = guest TSC - offset; ns since the reference = cycles * 1e6 / kHz */
	ns = (__int128)(int64_t)((uint64_t)tsc - off->offset - a->tscref.tsc) * 1000000 /
	     (__int128)a->tscref.khz;
	if (ns > INT64_MAX / 2 || ns < -(INT64_MAX / 2) ||
	    __builtin_add_overflow(a->tscref.time, (int64_t)ns, &host) ||
	    __builtin_sub_overflow(host, after, lo) || __builtin_sub_overflow(host, ev->time, hi)) {
		vm_err_set(err, "E_VM_FIELD", "%s:%lu: the TSC reading is out of range", file,
			   ev->line);
		return -1;
	}
	/* the reference's reads' gap, 1 ns of rounding, and the kHz's own rounding (half a kHz:
	 * |ns| / (2 kHz) more), which grows with the distance from the reference */
	slack = a->tscref.error_ns + 1 + (int64_t)((ns < 0 ? -ns : ns) / (2 * a->tscref.khz)) + 1;
	if (__builtin_sub_overflow(*lo, slack, lo) || __builtin_add_overflow(*hi, slack, hi)) {
		vm_err_set(err, "E_VM_FIELD", "%s:%lu: the TSC reading is out of range", file,
			   ev->line);
		return -1;
	}
	return 0;
}

static int cmp_hsync(const void *x, const void *y)
{
	const struct vm_sync_host *a = x, *b = y;

	return a->id < b->id ? -1 : a->id > b->id;
}

int vm_sync_pass(struct vm_analysis *a, struct vm_stream *guest, bool assume_synced,
		 struct vm_err *err)
{
	const char *file = vm_stream_name(guest);
	struct vm_event ev;
	int64_t lo = INT64_MIN, hi = INT64_MAX;
	unsigned long lo_line = 0, hi_line = 0;
	size_t guest_points = 0;
	int rc;

	memset(&a->sync, 0, sizeof(a->sync));
	a->sync.guest = true;
	if (a->nhsync) /* qsort() and bsearch() take no NULL array, even empty */
		qsort(a->hsync, a->nhsync, sizeof(*a->hsync), cmp_hsync);
	for (size_t i = 1; i < a->nhsync; i++)
		if (a->hsync[i].id == a->hsync[i - 1].id) {
			vm_err_set(
				err, "E_VM_SYNC",
				"the host saw synchronisation point %llu twice: ids must be unique",
				(unsigned long long)a->hsync[i].id);
			return -1;
		}
	while ((rc = vm_stream_next(guest, &ev, err)) == 1) {
		struct vm_sync_host key, *h;
		uint64_t id;
		int64_t after, l, u;

		if (strcmp(ev.name, VM_TSC_EVENT) == 0) {
			guest_points++;
			rc = tsc_point(a, &ev, file, &l, &u, err);
			if (rc < 0)
				return -1;
			if (rc == 0)
				goto narrow;
			continue;
		}
		if (strcmp(ev.name, VM_SYNC_EVENT) != 0)
			continue;
		guest_points++;
		if (vm_event_u64(&ev, "id", &id) || vm_event_s64(&ev, "after", &after) ||
		    after < ev.time) {
			vm_err_set(err, "E_VM_FIELD",
				   "%s:%lu: vm_sync needs fields.id (an integer >= 0) and "
				   "fields.after (the guest's time when the hypercall returned, >= "
				   "time)",
				   file, ev.line);
			return -1;
		}
		key.id = id;
		h = a->nhsync ? bsearch(&key, a->hsync, a->nhsync, sizeof(*a->hsync), cmp_hsync) :
				NULL;
		if (!h)
			continue; /* the host did not trace it: no point */
		/* the host saw it between the guest's readings: offset in [h - after, h - time] */
		if (vm_sync_point(h->time, ev.time, after, &l, &u)) {
			vm_err_set(err, "E_VM_FIELD", "%s:%lu: times out of range", file, ev.line);
			return -1;
		}
narrow:
		if (l > lo) {
			lo = l;
			lo_line = ev.line;
		}
		if (u < hi) {
			hi = u;
			hi_line = ev.line;
		}
		a->sync.points++;
	}
	if (rc < 0)
		return -1;
	if (!a->sync.points) {
		if (assume_synced) {
			a->sync.assumed = true;
			return 0;
		}
		vm_err_set(
			err, "E_VM_NO_SYNC",
			"%s: %zu synchronisation point%s, none the host saw or could convert: "
			"guest and host times cannot be related (record vm_sync or vm_tsc points, "
			"see docs/vm.md, or say that the guest's times are host times with "
			"--assume-synced)",
			file, guest_points, guest_points == 1 ? "" : "s");
		return -1;
	}
	if (lo > hi) {
		vm_err_set(err, "E_VM_SYNC",
			   "%s: synchronisation points disagree: line %lu puts the offset at least "
			   "%lld ns, line %lu at most %lld ns (do the clocks drift?)",
			   file, lo_line, (long long)lo, hi_line, (long long)hi);
		return -1;
	}
	a->sync.synced = true;
	vm_sync_middle(lo, hi, &a->sync.offset_ns, &a->sync.error_ns);
	return 0;
}

static struct vm_gthread *thread_get(struct vm_analysis *a, int64_t tid, unsigned long line,
				     struct vm_err *err)
{
	long i = vm_tidmap_get(&a->tmap, tid);
	struct vm_gthread *g;

	if (i >= 0)
		return &a->threads[i];
	if (vm_grow((void **)&a->threads, &a->capthreads, a->nthreads, sizeof(*a->threads),
		    VM_MAX_THREADS) ||
	    vm_tidmap_put(&a->tmap, tid, (uint32_t)a->nthreads)) {
		vm_err_set(err, a->nthreads >= VM_MAX_THREADS ? "E_VM_LIMIT" : "E_VM_NOMEM",
			   "line %lu: more than %u guest threads, or out of memory", line,
			   VM_MAX_THREADS);
		return NULL;
	}
	g = &a->threads[a->nthreads++];
	memset(g, 0, sizeof(*g));
	g->tid = tid;
	g->cpu = -1;
	g->since = -1;
	g->off = VM_G_BLOCKED;
	return g;
}

const struct vm_gthread *vm_gthread_of(const struct vm_analysis *a, int64_t tid)
{
	long i = vm_tidmap_get(&a->tmap, tid);

	return i < 0 ? NULL : &a->threads[i];
}

static int g_add(struct vm_analysis *a, struct vm_gthread *g, int64_t s, int64_t e,
		 enum vm_gstate st, int host, int32_t vcpu, struct vm_err *err)
{
	if (e <= s)
		return 0;
	g->state_ns[st] += e - s;
	if (st == VM_G_HOST)
		g->host_ns[host] += e - s;
	return vm_iv_add(a, &g->iv, &g->niv, &g->capiv, s, e, st, host, vcpu, err);
}

/* g ran on a guest CPU whose vCPU is v (NULL: not in the host stream) over [s, e). */
static int g_ran(struct vm_analysis *a, struct vm_gthread *g, const struct vm_vcpu *v, int64_t s,
		 int64_t e, struct vm_err *err)
{
	size_t lo = 0, hi;
	int32_t vidx = v ? (int32_t)(v - a->vcpus) : -1;

	if (!v || !v->niv)
		return g_add(a, g, s, e, VM_G_UNTRACED, 0, -1, err);
	/* the first interval that ends after s */
	hi = v->niv;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (v->iv[mid].end <= s)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (size_t i = lo; i < v->niv && s < e; i++) {
		const struct vm_interval *iv = &v->iv[i];
		int64_t end = iv->end < e ? iv->end : e;

		if (iv->start > s) { /* not covered by the host stream (before the vCPU's start) */
			int64_t gap = iv->start < e ? iv->start : e;

			if (g_add(a, g, s, gap, VM_G_UNTRACED, 0, -1, err))
				return -1;
			s = gap;
			if (s >= e)
				break;
		}
		if (iv->state == VM_GUEST || iv->state == VM_GUEST_L2) {
			if (g_add(a, g, s, end, VM_G_RUNNING, 0, vidx, err))
				return -1;
		} else if (g_add(a, g, s, end, VM_G_HOST, iv->state, vidx, err)) {
			return -1;
		}
		s = end;
	}
	return g_add(a, g, s, e, VM_G_UNTRACED, 0, -1, err); /* after the host stream's end */
}

/* The vCPU that runs guest CPU `cpu`: by vcpu_id (and the VMM's pid when given). */
static int vcpu_for_cpu(const struct vm_analysis *a, int64_t cpu, int64_t vm_pid,
			const struct vm_vcpu **out, struct vm_err *err)
{
	const struct vm_vcpu *found = NULL;

	for (size_t i = 0; i < a->nvcpus; i++) {
		const struct vm_vcpu *v = &a->vcpus[i];

		if (v->vcpu_id != cpu || (vm_pid > 0 && v->pid != vm_pid))
			continue;
		if (found) {
			vm_err_set(err, "E_VM_AMBIGUOUS",
				   "vCPU %lld of the guest: host threads %lld (pid %lld) and %lld "
				   "(pid %lld) both run a vCPU %lld; choose the guest's VM with "
				   "--vm-pid",
				   (long long)cpu, (long long)found->tid, (long long)found->pid,
				   (long long)v->tid, (long long)v->pid, (long long)cpu);
			return -1;
		}
		found = v;
	}
	*out = found;
	return 0;
}

static int g_close(struct vm_analysis *a, struct vm_gthread *g, int64_t t,
		   const struct vm_vcpu **cpus, struct vm_err *err)
{
	int rc = 0;

	if (g->since < 0)
		return 0;
	if (g->cpu >= 0)
		rc = g_ran(a, g, cpus[g->cpu], g->since, t, err);
	else
		rc = g_add(a, g, g->since, t, g->off, 0, -1, err);
	g->since = t;
	return rc;
}

int vm_guest_pass(struct vm_analysis *a, struct vm_stream *guest, int64_t vm_pid,
		  struct vm_err *err)
{
	const char *file = vm_stream_name(guest);
	const struct vm_vcpu **cpus = NULL; /* guest CPU -> vCPU */
	bool *mapped = NULL;
	struct vm_event ev;
	int64_t last = -1;
	int rc = -1, r;

	cpus = calloc(VM_MAX_VCPUS, sizeof(*cpus));
	mapped = calloc(VM_MAX_VCPUS, sizeof(*mapped));
	if (!cpus || !mapped) {
		vm_err_set(err, "E_VM_NOMEM", "out of memory");
		goto out;
	}
	while ((r = vm_stream_next(guest, &ev, err)) == 1) {
		int64_t t, prev, next, tids[2];
		struct vm_gthread *g;
		const char *comm[2];
		int runnable;

		a->guest_events++;
		if (__builtin_add_overflow(ev.time, a->sync.offset_ns, &t) || t < 0) {
			vm_err_set(err, "E_VM_FIELD",
				   "%s:%lu: time %lld is before the host's time 0 once converted "
				   "(offset %lld ns)",
				   file, ev.line, (long long)ev.time, (long long)a->sync.offset_ns);
			goto out;
		}
		last = t; /* the guest stream's end, in host time */
		if (strcmp(ev.name, VM_LOST_EVENT) == 0 && vm_on_lost(a, &ev, file, err))
			goto out;
		if (strcmp(ev.name, "sched_switch") != 0)
			continue;
		if (ev.cpu >= VM_MAX_VCPUS) {
			vm_err_set(err, "E_VM_LIMIT", "%s:%lu: guest CPU %lld (at most %d)", file,
				   ev.line, (long long)ev.cpu, VM_MAX_VCPUS - 1);
			goto out;
		}
		if (!mapped[ev.cpu]) {
			if (vcpu_for_cpu(a, ev.cpu, vm_pid, &cpus[ev.cpu], err))
				goto out;
			mapped[ev.cpu] = true;
		}
		if (vm_event_s64(&ev, "prev_pid", &prev) || vm_event_s64(&ev, "next_pid", &next) ||
		    prev < 0 || next < 0) {
			vm_err_set(err, "E_VM_FIELD",
				   "%s:%lu: sched_switch needs fields.prev_pid and fields.next_pid",
				   file, ev.line);
			goto out;
		}
		tids[0] = prev;
		tids[1] = next;
		comm[0] = vm_event_str(&ev, "prev_comm");
		comm[1] = vm_event_str(&ev, "next_comm");
		{
			const char *st = vm_event_str(&ev, "prev_state");
			int64_t v;

			if (st)
				runnable = st[0] == 'R';
			else if (vm_event_s64(&ev, "prev_state", &v) == 0 && v >= 0)
				runnable = (v & 0xff) == 0;
			else
				runnable = 0;
		}
		for (int k = 0; k < 2; k++) {
			if (tids[k] == 0)
				continue; /* the guest CPU's idle task */
			g = thread_get(a, tids[k], ev.line, err);
			if (!g)
				goto out;
			if (comm[k]) { /* a hostile stream's name never reaches a terminal raw */
				snprintf(g->comm, sizeof(g->comm), "%s", comm[k]);
				text_clean(g->comm, strlen(g->comm), TEXT_NAME);
			}
			if (g_close(a, g, t, cpus, err))
				goto out;
			g->since = t;
			if (k == 0) {
				g->cpu = -1;
				g->off = runnable ? VM_G_WAITING : VM_G_BLOCKED;
			} else {
				g->cpu = ev.cpu;
			}
		}
	}
	if (r < 0)
		goto out;
	for (size_t i = 0; i < a->nthreads; i++)
		if (g_close(a, &a->threads[i], last, cpus, err))
			goto out;
	rc = 0;
out:
	free(cpus);
	free(mapped);
	return rc;
}

int vm_analyze(const struct vm_opts *o, struct vm_analysis *a, struct vm_err *err)
{
	struct vm_stream *h, *g = NULL;
	int rc = -1;

	vm_analysis_init(a, o->max_intervals);
	h = vm_stream_open_input(o->host, &a->host_ctf, err);
	if (!h)
		return -1;
	if (vm_host_pass(a, h, err))
		goto out;
	if (o->guest) {
		g = vm_stream_open_input(o->guest, &a->guest_ctf, err);
		if (!g || vm_sync_pass(a, g, o->assume_synced, err) || vm_stream_rewind(g, err) ||
		    vm_guest_pass(a, g, o->vm_pid, err))
			goto out;
	}
	rc = 0;
out:
	vm_stream_close(h);
	vm_stream_close(g);
	if (rc)
		vm_analysis_free(a);
	return rc;
}
