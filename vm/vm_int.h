/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What vm/vcpu.c, vm/fuse.c and vm/report.c share and nobody else needs: bounded arrays,
 * the map from thread ids to indices, and interval lists.
 */
#ifndef WEFT_VM_INT_H
#define WEFT_VM_INT_H
#include "vm/vm.h"

/* Makes room for n + 1 elements of elsz in *p (capacity *cap, at most max): 0 or -1. */
int vm_grow(void **p, size_t *cap, size_t n, size_t elsz, size_t max);

/* The index of tid, or -1. */
long vm_tidmap_get(const struct vm_tidmap *m, int64_t tid);
/* Maps tid to idx (tid not yet in m): 0 or -1 (out of memory). */
int vm_tidmap_put(struct vm_tidmap *m, int64_t tid, uint32_t idx);
void vm_tidmap_free(struct vm_tidmap *m);

/*
 * Appends [start, end) to an interval list, merged with the last one if that ends at start
 * with the same state, host state and exit; empty intervals are dropped.  0, or -1 with err
 * set (E_VM_LIMIT: a->max_intervals reached; E_VM_NOMEM).
 */
int vm_iv_add(struct vm_analysis *a, struct vm_interval **iv, size_t *n, size_t *cap, int64_t start,
	      int64_t end, int state, int host, int32_t exit, struct vm_err *err);

/* A "weft_lost" event (VM_LOST_EVENT): its fields.rows added to a->lost_events.  0 or -1. */
int vm_on_lost(struct vm_analysis *a, const struct vm_event *ev, const char *file,
	       struct vm_err *err);

#endif
