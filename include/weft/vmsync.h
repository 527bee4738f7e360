/* SPDX-License-Identifier: Apache-2.0 */
/*
 * weft/vmsync.h: the guest side of a live VM clock synchronisation (docs/vm.md "Live: guest
 * and host agents"; `weft vm sync`).
 *
 * A synchronisation point is made in the guest by a helper that
 *
 *   1. reads the guest's CLOCK_MONOTONIC (before),
 *   2. makes the hypercall nr WEFT_VMSYNC_HYPERCALL (0x77656674, "weft") with a0 = id, which
 *      the host's KVM traces as kvm:kvm_hypercall (nr, a0) at host time h,
 *   3. reads CLOCK_MONOTONIC again (after),
 *   4. fires WEFT_VMSYNC_POINT(id, before, after): the USDT (SystemTap SDT) probe
 *      weft:vm_sync with exactly these arguments, in this order: id u64 (unique for the
 *      guest), before i64 ns, after i64 ns (after >= before).
 *
 * The guest's weft agent attaches usdt:HELPER:weft:vm_sync; the host's agents
 * kvm:kvm_hypercall; the aggregator joins them by id (offset in [h - after, h - before]).
 *
 * Where the hypercall is made: KVM executes hypercalls for code at CPL 0 only (it answers a
 * user-space vmcall with -KVM_EPERM), so in a real guest step 2 belongs to a guest kernel
 * module or another ring-0 path; the probe itself may be fired from user space by the same
 * helper once it has the two readings.  weft ships no such module: this header is the
 * contract any helper follows.  On a machine without KVM the tests fake step 2 with a USDT
 * probe that `weft vm sync --hypercall-source` attaches instead
 * (tests/workloads/wl_vmsync_fake.c).
 *
 * Header-only, C11 or C++11; needs <sys/sdt.h> (Debian: systemtap-sdt-dev), includes nothing
 * of weft.  A probe nobody attaches costs a nop.
 */
#ifndef WEFT_VMSYNC_H
#define WEFT_VMSYNC_H

#include <stdint.h>
#include <sys/sdt.h>

#define WEFT_VMSYNC_HYPERCALL 0x77656674ULL

/* The point (id, before, after) for the guest's weft agent: USDT weft:vm_sync. */
#define WEFT_VMSYNC_POINT(id, before, after)                                           \
	do {                                                                           \
		uint64_t weft_vs_id_ = (uint64_t)(id);                                 \
		int64_t weft_vs_b_ = (int64_t)(before), weft_vs_a_ = (int64_t)(after); \
		DTRACE_PROBE3(weft, vm_sync, weft_vs_id_, weft_vs_b_, weft_vs_a_);     \
	} while (0)

#endif
