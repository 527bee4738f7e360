// SPDX-License-Identifier: Apache-2.0
/*
 * wl_vmsync_fake: plays a guest that makes N clock synchronisation points, with a FAKE
 * hypercall, for `weft vm sync` on a machine without KVM (this project's development machine
 * has no /dev/kvm: kvm:kvm_hypercall never fires there).
 *
 *   wl_vmsync_fake N K_NS OUT [ok|contradict|guest-only|dirty] [SLEEP_US]
 *
 * Its "guest clock" is CLOCK_MONOTONIC + K_NS.  For id = 1..N: it reads the guest clock
 * (before), fires the USDT probe weft_fake:fake_kvm_hypercall(nr 0x77656674, a0 id) -- THE
 * FAKE: it stands in for the hypercall the host would see as kvm:kvm_hypercall, and `weft vm
 * sync --hypercall-source usdt:THIS:weft_fake:fake_kvm_hypercall` attaches it on the host
 * side instead of the tracepoint -- reads the guest clock again (after), and fires the real
 * guest-side probe weft:vm_sync(id, before, after) of include/weft/vmsync.h.  The host's
 * `time` of the fake probe is the kernel's CLOCK_MONOTONIC, between the two readings, so the
 * true offset (host = guest + offset) is exactly -K_NS.
 *
 * Modes: ok (the default); contradict: the last point (id N) reports before and after one
 * second later than read (a wrong point: its interval misses the true offset by about a
 * second); guest-only: no fake hypercall at all (the host side sees nothing); dirty (N >= 3):
 * point N - 1's fake hypercall fires twice (which one was the point cannot be told) and point
 * N reports an after one ns before its before (malformed).
 *
 * OUT gets one line per point: "id before after honest", the values the probe reported and
 * whether they are the ones read (1) or the contradict mode's (0); then "done N".
 * With SLEEP_US > 0 it also plays the host's vCPU thread for `weft vm live` (test_cluster_vmlive):
 * it names itself wl_fake_vcpu0 and, after each point, calls ioctl(fd, KVM_RUN) on /dev/null
 * (ENOTTY, but syscall:ioctl with cmd 0xae80 fires: `weft vm record`'s discovery finds it,
 * as test_vm_record's wl_kvm_ioctl) and sleeps SLEEP_US (blocked on the host: idle, then
 * woken: preempted until it runs).  The fake hypercall, a kvm event of the host stream, makes
 * it a vCPU of the analysis.
 * Deterministic apart from the clock values; no threads.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/sdt.h>
#include <time.h>
#include <unistd.h>
#include <weft/vmsync.h>

static int64_t guest_clock(int64_t k)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec + k;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? strtol(argv[1], NULL, 10) : 0;
	long long k = argc > 2 ? strtoll(argv[2], NULL, 10) : 0;
	const char *mode = argc > 4 ? argv[4] : "ok";
	bool contradict = strcmp(mode, "contradict") == 0, fake = strcmp(mode, "guest-only") != 0;
	bool dirty = strcmp(mode, "dirty") == 0;
	long sleep_us = argc > 5 ? strtol(argv[5], NULL, 10) : 0;
	int vcpu = -1;
	FILE *out;

	if (argc < 4 || n <= 0 || k < 0 || (dirty && n < 3) ||
	    (strcmp(mode, "ok") && !contradict && strcmp(mode, "guest-only") && !dirty)) {
		fprintf(stderr,
			"usage: wl_vmsync_fake N K_NS OUT [ok|contradict|guest-only|dirty]\n");
		return 2;
	}
	out = fopen(argv[3], "w");
	if (!out)
		return 1;
	if (sleep_us > 0) {
		prctl(PR_SET_NAME, "wl_fake_vcpu0", 0, 0, 0);
		vcpu = open("/dev/null", O_RDONLY | O_CLOEXEC);
		if (vcpu < 0)
			return 1;
	}
	for (long id = 1; id <= n; id++) {
		int64_t before, after;
		int honest = 1;

		before = guest_clock(k);
		if (fake) /* THE FAKE hypercall: what the host would see as kvm:kvm_hypercall */
			DTRACE_PROBE2(weft_fake, fake_kvm_hypercall, WEFT_VMSYNC_HYPERCALL,
				      (uint64_t)id);
		if (dirty && id == n - 1) /* twice: not a point */
			DTRACE_PROBE2(weft_fake, fake_kvm_hypercall, WEFT_VMSYNC_HYPERCALL,
				      (uint64_t)id);
		after = guest_clock(k);
		if (dirty && id == n) {
			after = before - 1;
			honest = 0;
		}
		if (contradict && id == n) {
			before += 1000000000LL;
			after += 1000000000LL;
			honest = 0;
		}
		WEFT_VMSYNC_POINT(id, before, after);
		fprintf(out, "%ld %lld %lld %d\n", id, (long long)before, (long long)after, honest);
		if (vcpu >= 0) {
			struct timespec nap = { sleep_us / 1000000, (sleep_us % 1000000) * 1000 };

			if (ioctl(vcpu, 0xae80 /* KVM_RUN */, 0) >= 0 || errno != ENOTTY)
				return 1;
			nanosleep(&nap, NULL);
		}
	}
	fprintf(out, "done %ld\n", n);
	if (fclose(out))
		return 1;
	printf("wl_vmsync_fake: %ld points, mode %s\n", n, mode);
	return 0;
}
