// SPDX-License-Identifier: Apache-2.0
/*
 * The host pass: one state machine per vCPU thread, driven by the host's kvm and scheduler
 * events (vm/vm.h draws it), with every exit counted by reason and its latency sketched.
 * Also the helpers the passes share (vm/vm_int.h) and the analysis' life cycle.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "kernel/aggstate.h"
#include "vm/exits.h"
#include "vm/vm_int.h"

static const struct agg_spec sketch_spec = { .kind = AGG_QUANTILE, .q = 0.5 };

const char *vm_state_name(enum vm_state s)
{
	static const char *const names[] = { "guest",	  "guest_l2", "hypervisor", "vmm",
					     "preempted", "idle",     "unknown" };

	return (unsigned)s <= VM_UNKNOWN ? names[s] : "?";
}

const char *vm_gstate_name(enum vm_gstate s)
{
	static const char *const names[] = { "running", "host", "untraced", "waiting", "blocked" };

	return (unsigned)s < VM_G_NSTATES ? names[s] : "?";
}

int vm_grow(void **p, size_t *cap, size_t n, size_t elsz, size_t max)
{
	size_t nc;
	void *np;

	if (n < *cap)
		return 0;
	if (n >= max)
		return -1;
	nc = *cap ? *cap * 2 : 16;
	if (nc > max)
		nc = max;
	np = realloc(*p, nc * elsz);
	if (!np)
		return -1;
	*p = np;
	*cap = nc;
	return 0;
}

static size_t tid_hash(int64_t tid, size_t cap)
{
	uint64_t h = (uint64_t)tid * 0x9e3779b97f4a7c15ULL;

	return (size_t)(h >> 20) & (cap - 1);
}

long vm_tidmap_get(const struct vm_tidmap *m, int64_t tid)
{
	if (!m->cap)
		return -1;
	for (size_t i = tid_hash(tid, m->cap);; i = (i + 1) & (m->cap - 1)) {
		if (!m->val[i])
			return -1;
		if (m->key[i] == tid)
			return (long)m->val[i] - 1;
	}
}

int vm_tidmap_put(struct vm_tidmap *m, int64_t tid, uint32_t idx)
{
	if ((m->n + 1) * 2 > m->cap) { /* at most half full: rehash into twice the size */
		struct vm_tidmap nm = { .cap = m->cap ? m->cap * 2 : 64 };

		nm.key = calloc(nm.cap, sizeof(*nm.key));
		nm.val = calloc(nm.cap, sizeof(*nm.val));
		if (!nm.key || !nm.val) {
			vm_tidmap_free(&nm);
			return -1;
		}
		for (size_t i = 0; i < m->cap; i++)
			if (m->val[i])
				vm_tidmap_put(&nm, m->key[i], m->val[i] - 1);
		vm_tidmap_free(m);
		*m = nm;
	}
	for (size_t i = tid_hash(tid, m->cap);; i = (i + 1) & (m->cap - 1)) {
		if (!m->val[i]) {
			m->key[i] = tid;
			m->val[i] = idx + 1;
			m->n++;
			return 0;
		}
	}
}

void vm_tidmap_free(struct vm_tidmap *m)
{
	free(m->key);
	free(m->val);
	memset(m, 0, sizeof(*m));
}

int vm_iv_add(struct vm_analysis *a, struct vm_interval **iv, size_t *n, size_t *cap, int64_t start,
	      int64_t end, int state, int host, int32_t exit, struct vm_err *err)
{
	struct vm_interval *last = *n ? &(*iv)[*n - 1] : NULL;

	if (end <= start)
		return 0;
	if (last && last->end == start && last->state == state && last->host == host &&
	    last->exit == exit) {
		last->end = end;
		return 0;
	}
	if (a->intervals >= a->max_intervals) {
		vm_err_set(err, "E_VM_LIMIT",
			   "more than %zu state intervals: analyse a shorter stream",
			   a->max_intervals);
		return -1;
	}
	if (vm_grow((void **)iv, cap, *n, sizeof(**iv), (size_t)-1 / sizeof(**iv))) {
		vm_err_set(err, "E_VM_NOMEM", "out of memory for state intervals");
		return -1;
	}
	(*iv)[(*n)++] = (struct vm_interval){ .start = start,
					      .end = end,
					      .state = (uint8_t)state,
					      .host = (uint8_t)host,
					      .exit = exit };
	a->intervals++;
	return 0;
}

int vm_on_lost(struct vm_analysis *a, const struct vm_event *ev, const char *file,
	       struct vm_err *err)
{
	uint64_t n;

	if (vm_event_u64(ev, "rows", &n)) {
		vm_err_set(err, "E_VM_FIELD", "%s:%lu: %s needs fields.rows, an integer >= 0", file,
			   ev->line, VM_LOST_EVENT);
		return -1;
	}
	if (__builtin_add_overflow(a->lost_events, n, &a->lost_events))
		a->lost_events = UINT64_MAX;
	return 0;
}

void vm_analysis_init(struct vm_analysis *a, size_t max_intervals)
{
	memset(a, 0, sizeof(*a));
	a->host_first_ns = -1;
	a->host_last_ns = -1;
	a->max_intervals = max_intervals ? max_intervals : VM_MAX_INTERVALS;
}

void vm_analysis_free(struct vm_analysis *a)
{
	for (size_t i = 0; i < a->nvcpus; i++)
		free(a->vcpus[i].iv);
	for (size_t i = 0; i < a->nexits; i++)
		free(a->exits[i].sketch);
	for (size_t i = 0; i < a->nthreads; i++)
		free(a->threads[i].iv);
	free(a->vcpus);
	free(a->exits);
	free(a->threads);
	free(a->hsync);
	free(a->tscoff);
	vm_tidmap_free(&a->vmap);
	vm_tidmap_free(&a->tmap);
	memset(a, 0, sizeof(*a));
}

const struct vm_vcpu *vm_vcpu_of_tid(const struct vm_analysis *a, int64_t tid)
{
	long i = vm_tidmap_get(&a->vmap, tid);

	return i < 0 ? NULL : &a->vcpus[i];
}

double vm_exit_quantile(const struct vm_exit_stat *x, double q)
{
	struct agg_spec spec = { .kind = AGG_QUANTILE, .q = q };
	struct agg_result r;

	if (!x->samples || agg_state_final(&spec, x->sketch, &r))
		return 0;
	return r.value;
}

/* ------------------------------------------------------------------------ the machine */

static struct vm_vcpu *vcpu_get(struct vm_analysis *a, const struct vm_event *ev,
				struct vm_err *err)
{
	long i = vm_tidmap_get(&a->vmap, ev->tid);
	struct vm_vcpu *v;

	if (i >= 0)
		return &a->vcpus[i];
	if (vm_grow((void **)&a->vcpus, &a->capvcpus, a->nvcpus, sizeof(*a->vcpus), VM_MAX_VCPUS)) {
		if (a->nvcpus >= VM_MAX_VCPUS)
			vm_err_set(err, "E_VM_LIMIT", "line %lu: more than %d vCPU threads",
				   ev->line, VM_MAX_VCPUS);
		else
			vm_err_set(err, "E_VM_NOMEM", "out of memory");
		return NULL;
	}
	if (vm_tidmap_put(&a->vmap, ev->tid, (uint32_t)a->nvcpus)) {
		vm_err_set(err, "E_VM_NOMEM", "out of memory");
		return NULL;
	}
	v = &a->vcpus[a->nvcpus++];
	memset(v, 0, sizeof(*v));
	v->tid = ev->tid;
	v->pid = ev->pid;
	v->vcpu_id = -1;
	v->first_ns = v->since = ev->time;
	v->state = v->resume = VM_UNKNOWN;
	v->cur_exit = -1;
	return v;
}

/* v enters state s at time t (exit: the exit being handled, -1 none). */
static int vcpu_set(struct vm_analysis *a, struct vm_vcpu *v, int64_t t, enum vm_state s,
		    struct vm_err *err)
{
	if (v->state != VM_UNKNOWN) {
		v->state_ns[v->state] += t - v->since;
		if (vm_iv_add(a, &v->iv, &v->niv, &v->capiv, v->since, t, v->state, 0,
			      v->state == VM_GUEST || v->state == VM_GUEST_L2 ? -1 : v->cur_exit,
			      err))
			return -1;
	}
	v->state = s;
	v->since = t;
	if (s != VM_PREEMPTED && s != VM_IDLE)
		v->resume = s;
	return 0;
}

static int exit_get(struct vm_analysis *a, uint32_t isa, uint32_t reason, unsigned long line,
		    struct vm_err *err)
{
	struct vm_exit_stat *x;

	for (size_t i = 0; i < a->nexits; i++)
		if (a->exits[i].isa == isa && a->exits[i].reason == reason)
			return (int)i;
	if (vm_grow((void **)&a->exits, &a->capexits, a->nexits, sizeof(*a->exits),
		    VM_MAX_REASONS)) {
		vm_err_set(err, a->nexits >= VM_MAX_REASONS ? "E_VM_LIMIT" : "E_VM_NOMEM",
			   "line %lu: more than %d distinct exit reasons, or out of memory", line,
			   VM_MAX_REASONS);
		return -1;
	}
	x = &a->exits[a->nexits];
	memset(x, 0, sizeof(*x));
	x->isa = isa;
	x->reason = reason;
	x->name = vm_exit_name(isa, reason);
	x->sketch = calloc(1, agg_state_size(&sketch_spec));
	if (!x->sketch) {
		vm_err_set(err, "E_VM_NOMEM", "out of memory");
		return -1;
	}
	return (int)a->nexits++;
}

static int need_u64(const struct vm_event *ev, const char *field, uint64_t max, uint64_t *out,
		    const char *file, struct vm_err *err)
{
	int rc = vm_event_u64(ev, field, out);

	if (rc || *out > max) {
		vm_err_set(err, "E_VM_FIELD", "%s:%lu: %s needs fields.%s, an integer 0..%llu",
			   file, ev->line, ev->name, field, (unsigned long long)max);
		return -1;
	}
	return 0;
}

/* sched_switch's prev_state: runnable (preempted) or blocked.  -1 if not understood. */
static int prev_runnable(const struct vm_event *ev)
{
	const char *s = vm_event_str(ev, "prev_state");
	int64_t v;

	if (s) /* as trace-cmd and perf print it */
		return s[0] == 'R' && (!s[1] || (s[1] == '+' && !s[2])) ? 1 : 0;
	if (vm_event_s64(ev, "prev_state", &v) || v < 0)
		return -1;
	/* the kernel's report bits (TASK_REPORT) are the low byte; TASK_REPORT_MAX (0x100)
	 * alone marks a preemption, so a runnable task has no bit of the low byte set */
	return (v & 0xff) == 0;
}

/*
 * kvm_write_tsc_offset: fires on whichever thread writes the offset (the VMM's when it creates
 * the vCPU), so it makes no thread a vCPU.  A u64 offset above INT64_MAX is written as its
 * two's complement (JSON integers are signed 64-bit here).
 */
static int on_tsc_offset(struct vm_analysis *a, const struct vm_event *ev, const char *file,
			 struct vm_err *err)
{
	int64_t id, off;

	if (vm_event_s64(ev, "vcpu_id", &id) || id < 0 ||
	    vm_event_s64(ev, "next_tsc_offset", &off)) {
		vm_err_set(err, "E_VM_FIELD",
			   "%s:%lu: kvm_write_tsc_offset needs fields.vcpu_id and "
			   "fields.next_tsc_offset (a u64 above 2^63 as its two's complement)",
			   file, ev->line);
		return -1;
	}
	for (size_t i = 0; i < a->ntscoff; i++) {
		struct vm_tsc_offset *t = &a->tscoff[i];

		if (t->vcpu_id == id && t->pid == ev->pid) {
			if (t->offset != (uint64_t)off && !t->changed)
				t->changed = ev->line;
			return 0;
		}
	}
	if (vm_grow((void **)&a->tscoff, &a->captscoff, a->ntscoff, sizeof(*a->tscoff),
		    VM_MAX_VCPUS)) {
		vm_err_set(err, "E_VM_LIMIT", "%s:%lu: TSC offsets of more than %d vCPUs", file,
			   ev->line, VM_MAX_VCPUS);
		return -1;
	}
	a->tscoff[a->ntscoff++] =
		(struct vm_tsc_offset){ .vcpu_id = id, .pid = ev->pid, .offset = (uint64_t)off };
	return 0;
}

/* tsc_clock: the host's TSC and clock read together (the first one is the reference). */
static int on_tsc_clock(struct vm_analysis *a, const struct vm_event *ev, const char *file,
			struct vm_err *err)
{
	int64_t tsc, khz, e = 0;
	int erc = vm_event_s64(ev, "error_ns", &e);

	if (vm_event_s64(ev, "tsc", &tsc) || vm_event_s64(ev, "khz", &khz) || khz <= 0 ||
	    khz > 100000000 || (erc && erc != -ENOENT) || e < 0 || e > INT64_MAX / 4) {
		vm_err_set(err, "E_VM_FIELD",
			   "%s:%lu: tsc_clock needs fields.tsc, fields.khz (1..1e8) and may have "
			   "fields.error_ns (>= 0)",
			   file, ev->line);
		return -1;
	}
	if (a->tscref.have)
		return 0;
	a->tscref.have = true;
	a->tscref.time = ev->time;
	a->tscref.tsc = (uint64_t)tsc;
	a->tscref.khz = (uint64_t)khz;
	a->tscref.error_ns = e;
	return 0;
}

static int on_kvm(struct vm_analysis *a, const struct vm_event *ev, const char *file,
		  struct vm_err *err)
{
	struct vm_vcpu *v;
	uint64_t u, isa = 0;
	int64_t t = ev->time;

	if (strcmp(ev->name, "kvm_write_tsc_offset") == 0) /* on any thread: VMM or vCPU */
		return on_tsc_offset(a, ev, file, err);
	if (ev->tid < 0) {
		vm_err_set(err, "E_VM_FIELD", "%s:%lu: %s without \"tid\" (the vCPU thread)", file,
			   ev->line, ev->name);
		return -1;
	}
	v = vcpu_get(a, ev, err);
	if (!v)
		return -1;
	if (v->pid < 0 && ev->pid >= 0)
		v->pid = ev->pid;
	if (vm_event_u64(ev, "vcpu_id", &u) == 0 && u <= INT32_MAX)
		v->vcpu_id = (int64_t)u;
	if (strcmp(ev->name, "kvm_entry") == 0) {
		if (v->cur_exit >= 0) {
			struct vm_exit_stat *x = &a->exits[v->cur_exit];
			int64_t lat = t - v->exit_time;

			if (!x->samples || lat < x->min_ns)
				x->min_ns = lat;
			if (lat > x->max_ns)
				x->max_ns = lat;
			if (__builtin_add_overflow(x->sum_ns, lat, &x->sum_ns))
				x->sum_ns =
					INT64_MAX; /* saturated: only a hostile stream gets here */
			x->samples++;
			agg_state_add(&sketch_spec, x->sketch, lat);
		}
		if (vcpu_set(a, v, t, v->nested ? VM_GUEST_L2 : VM_GUEST, err))
			return -1;
		v->cur_exit = -1;
		return 0;
	}
	if (strcmp(ev->name, "kvm_exit") == 0) {
		int idx;

		if (need_u64(ev, "exit_reason", UINT32_MAX, &u, file, err))
			return -1;
		if (vm_event_u64(ev, "isa", &isa) == 0 && isa > UINT32_MAX)
			isa = 0;
		idx = exit_get(a, (uint32_t)isa, (uint32_t)u, ev->line, err);
		if (idx < 0)
			return -1;
		a->exits[idx].count++;
		if (!a->exits[idx].name)
			a->unknown_exits++;
		v->exits++;
		/* the interval before the exit is closed with the previous exit index */
		if (vcpu_set(a, v, t, VM_HYPERVISOR, err))
			return -1;
		v->cur_exit = idx;
		v->exit_time = t;
		return 0;
	}
	if (strcmp(ev->name, "kvm_userspace_exit") == 0)
		return vcpu_set(a, v, t, VM_VMM, err);
	if (strcmp(ev->name, "kvm_nested_vmenter") == 0) {
		v->nested = true;
		v->nested_entries++;
	} else if (strcmp(ev->name, "kvm_nested_vmexit_inject") == 0) {
		v->nested = false;
	} else if (strcmp(ev->name, "kvm_hypercall") == 0 && vm_event_u64(ev, "nr", &u) == 0 &&
		   u == VM_SYNC_HYPERCALL) {
		if (need_u64(ev, "a0", UINT64_MAX >> 1, &u, file, err))
			return -1;
		if (vm_grow((void **)&a->hsync, &a->caphsync, a->nhsync, sizeof(*a->hsync),
			    VM_MAX_SYNC)) {
			vm_err_set(err, "E_VM_LIMIT", "%s:%lu: more than %d synchronisation points",
				   file, ev->line, VM_MAX_SYNC);
			return -1;
		}
		a->hsync[a->nhsync++] = (struct vm_sync_host){ .id = u, .time = t };
	}
	/* any other kvm event fires in the host kernel on the running vCPU thread */
	if (v->state != VM_HYPERVISOR && v->state != VM_GUEST && v->state != VM_GUEST_L2 &&
	    v->state != VM_VMM)
		return vcpu_set(a, v, t, VM_HYPERVISOR, err);
	return 0;
}

static int on_sched(struct vm_analysis *a, const struct vm_event *ev, const char *file,
		    struct vm_err *err)
{
	int64_t prev, next;
	long i;

	if (strcmp(ev->name, "sched_switch") == 0) {
		if (vm_event_s64(ev, "prev_pid", &prev) || vm_event_s64(ev, "next_pid", &next)) {
			vm_err_set(err, "E_VM_FIELD",
				   "%s:%lu: sched_switch needs fields.prev_pid and fields.next_pid",
				   file, ev->line);
			return -1;
		}
		i = vm_tidmap_get(&a->vmap, prev);
		if (i >= 0) {
			int r = prev_runnable(ev);

			if (r < 0) {
				vm_err_set(
					err, "E_VM_FIELD",
					"%s:%lu: sched_switch's fields.prev_state must be the "
					"kernel's number (>= 0) or a state letter (\"R\", \"R+\", "
					"\"S\", ...)",
					file, ev->line);
				return -1;
			}
			if (vcpu_set(a, &a->vcpus[i], ev->time, r ? VM_PREEMPTED : VM_IDLE, err))
				return -1;
		}
		i = vm_tidmap_get(&a->vmap, next);
		if (i >= 0) {
			struct vm_vcpu *v = &a->vcpus[i];

			if (vcpu_set(a, v, ev->time,
				     v->resume == VM_UNKNOWN ? VM_HYPERVISOR : v->resume, err))
				return -1;
		}
		return 0;
	}
	/* sched_wakeup, sched_wakeup_new: a blocked vCPU becomes runnable */
	if (vm_event_s64(ev, "pid", &next)) {
		vm_err_set(err, "E_VM_FIELD", "%s:%lu: %s needs fields.pid", file, ev->line,
			   ev->name);
		return -1;
	}
	i = vm_tidmap_get(&a->vmap, next);
	if (i >= 0 && a->vcpus[i].state == VM_IDLE)
		return vcpu_set(a, &a->vcpus[i], ev->time, VM_PREEMPTED, err);
	return 0;
}

int vm_host_pass(struct vm_analysis *a, struct vm_stream *host, struct vm_err *err)
{
	struct vm_event ev;
	const char *file = vm_stream_name(host);
	int rc;

	while ((rc = vm_stream_next(host, &ev, err)) == 1) {
		if (a->host_first_ns < 0)
			a->host_first_ns = ev.time;
		a->host_last_ns = ev.time;
		a->host_events++;
		if (strncmp(ev.name, "kvm_", 4) == 0)
			rc = on_kvm(a, &ev, file, err);
		else if (strcmp(ev.name, "tsc_clock") == 0)
			rc = on_tsc_clock(a, &ev, file, err);
		else if (strcmp(ev.name, VM_LOST_EVENT) == 0)
			rc = vm_on_lost(a, &ev, file, err);
		else if (strcmp(ev.name, "sched_switch") == 0 ||
			 strcmp(ev.name, "sched_wakeup") == 0 ||
			 strcmp(ev.name, "sched_wakeup_new") == 0)
			rc = on_sched(a, &ev, file, err);
		else
			rc = 0; /* not an event of this analysis */
		if (rc)
			return -1;
	}
	if (rc < 0)
		return -1;
	/* every vCPU's last state lasts until the end of the stream */
	for (size_t i = 0; i < a->nvcpus; i++) {
		struct vm_vcpu *v = &a->vcpus[i];

		if (vcpu_set(a, v, a->host_last_ns, v->state, err))
			return -1;
		v->last_ns = a->host_last_ns;
	}
	return 0;
}
