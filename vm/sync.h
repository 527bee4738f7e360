/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The arithmetic of guest/host clock synchronisation, alone: one synchronisation point as an
 * interval of the offset, and the running intersection of such intervals with its middle and
 * error bound (docs/vm.md, "Synchronisation").  Pure: no streams, no allocation, no clock.
 * vm/fuse.c uses it over recorded streams (where a contradiction refuses the whole guest
 * stream); the aggregator (aggregator/aggd_vm.c) over the points two agents send live (where
 * a contradicting point is refused and counted, and the intersection goes on).
 *
 * The convention: host = guest + offset.  A point is (h, before, after): the host saw the
 * guest's hypercall at host time h, and the guest read its clock just before (before) and
 * just after (after) the hypercall.  h happened between the two readings, so
 *
 *     offset in [h - after, h - before]
 *
 * The intersection over all points is [lo, hi]; the offset given is its middle,
 * lo + (hi - lo) / 2 (rounded down), and the error bound hi - offset, so that the true offset
 * lies in [offset - error, offset + error] whenever every point's readings bracket its
 * hypercall and the clocks keep a constant offset.
 *
 * Limits: integer ns, no drift model (a drifting pair of clocks ends in a contradiction,
 * never in an averaged answer); the first points win: a point that contradicts the
 * intersection so far is refused, however many later points would agree with it.
 */
#ifndef WEFT_VM_SYNC_H
#define WEFT_VM_SYNC_H
#include <stdbool.h>
#include <stdint.h>

/* One point's interval [*lo, *hi] of the offset: 0, or -1 when after < before or a
 * difference overflows (nothing is written then). */
static inline int vm_sync_point(int64_t h, int64_t before, int64_t after, int64_t *lo, int64_t *hi)
{
	int64_t l, u;

	if (after < before || __builtin_sub_overflow(h, after, &l) ||
	    __builtin_sub_overflow(h, before, &u))
		return -1;
	*lo = l;
	*hi = u;
	return 0;
}

/* The running intersection of points' intervals. */
struct vm_sync_acc {
	uint64_t points; /* intervals intersected */
	uint64_t refused; /* intervals refused: they did not meet the intersection so far */
	int64_t lo, hi; /* the intersection; meaningful when points > 0 */
};

static inline void vm_sync_acc_init(struct vm_sync_acc *s)
{
	s->points = 0;
	s->refused = 0;
	s->lo = INT64_MIN;
	s->hi = INT64_MAX;
}

/* Intersects [lo, hi] (lo <= hi) into s: true, or false (refused and counted) when it does
 * not meet the intersection so far, which then stays as it was. */
static inline bool vm_sync_acc_add(struct vm_sync_acc *s, int64_t lo, int64_t hi)
{
	int64_t nl = lo > s->lo ? lo : s->lo, nh = hi < s->hi ? hi : s->hi;

	if (lo > hi || nl > nh) {
		s->refused++;
		return false;
	}
	s->lo = nl;
	s->hi = nh;
	s->points++;
	return true;
}

/* The offset (the middle of [lo, hi]) and its error bound; lo <= hi.  The bound saturates
 * at INT64_MAX (an interval over half the 64-bit range, which no real point gives). */
static inline void vm_sync_middle(int64_t lo, int64_t hi, int64_t *offset, int64_t *error)
{
	/* unsigned: hi - lo may exceed INT64_MAX */
	uint64_t w = (uint64_t)hi - (uint64_t)lo, e = w - w / 2;

	*offset = (int64_t)((uint64_t)lo + w / 2);
	*error = e > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)e;
}

#endif
