// SPDX-License-Identifier: Apache-2.0
/*
 * Test workload: the smallest virtual machine monitor that runs a real KVM guest, so that a
 * tracer can count its exits exactly.  It opens /dev/kvm, makes a VM with one page of guest
 * memory and one vCPU in real mode, and runs on a thread of its own (named "wl_kvm_vcpu0",
 * the VM's vCPU thread) a guest of four instructions:
 *
 *     0x1000:  mov al, cl        88 c8      the value written: the loop counter
 *     0x1002:  out dx, al        ee         one KVM_EXIT_IO to this process
 *     0x1003:  loop 0x1000       e2 fb      cx -= 1; again while cx != 0
 *     0x1005:  hlt               f4         KVM_EXIT_HLT (no in-kernel irqchip)
 *
 * with cx = N and dx = PORT set through KVM_SET_REGS.  Every `out` leaves KVM_RUN with
 * KVM_EXIT_IO; the monitor checks each (port, direction, size, count, the value N, N-1, ...
 * 1) and runs the vCPU again; the `hlt` leaves with KVM_EXIT_HLT and the run ends.  So the
 * vCPU thread returns from KVM_RUN exactly N + 1 times, unless a signal interrupts it (then
 * KVM_RUN fails with EINTR, which the monitor counts and retries; nothing here sends one).
 *
 * Usage: wl_kvm N [PORT]      (1 <= N <= 65535; PORT defaults to 0x3f8)
 *   Prints its pid on the first line of stdout, then, when the guest has halted, one line
 *   "vcpu_tid=T runs=R io=I hlt=H eintr=E other=O" with what the monitor saw: the vCPU
 *   thread's id, the KVM_RUN calls that returned, and the exits by reason.  Exit status 0
 *   if the guest did exactly what it was given, 3 if /dev/kvm cannot be used here (the
 *   reason on stderr: the test skips), 1 otherwise.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/kvm.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#define GUEST_MEM_SIZE 0x10000 /* 64 KiB at guest physical 0 */
#define GUEST_CODE 0x1000

static const uint8_t guest_code[] = {
	0x88, 0xc8, /* mov al, cl */
	0xee, /* out dx, al */
	0xe2, 0xfb, /* loop -5 */
	0xf4, /* hlt */
};

struct vm {
	int kvm, vm, vcpu;
	struct kvm_run *run;
	size_t run_size;
	uint8_t *mem;
	unsigned long n;
	unsigned int port;
	/* what the vCPU thread saw */
	pid_t tid;
	unsigned long runs, io, hlt, eintr, other;
	int bad; /* the guest did something it was not given */
};

/* exit status 3: KVM is not usable here, which the test reports as a skip */
static int unusable(const char *what)
{
	fprintf(stderr, "wl_kvm: %s: %s\n", what, strerror(errno));
	return 3;
}

static int vm_setup(struct vm *v)
{
	struct kvm_userspace_memory_region region;
	struct kvm_sregs sregs;
	struct kvm_regs regs;
	int mmap_size;

	v->kvm = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	if (v->kvm < 0)
		return unusable("open /dev/kvm");
	if (ioctl(v->kvm, KVM_GET_API_VERSION, 0) != KVM_API_VERSION) {
		fprintf(stderr, "wl_kvm: KVM API version is not %d\n", KVM_API_VERSION);
		return 3;
	}
	v->vm = ioctl(v->kvm, KVM_CREATE_VM, 0);
	if (v->vm < 0)
		return unusable("KVM_CREATE_VM");
	v->mem = mmap(NULL, GUEST_MEM_SIZE, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (v->mem == MAP_FAILED)
		return unusable("mmap guest memory");
	memcpy(v->mem + GUEST_CODE, guest_code, sizeof(guest_code));
	region = (struct kvm_userspace_memory_region){
		.slot = 0,
		.guest_phys_addr = 0,
		.memory_size = GUEST_MEM_SIZE,
		.userspace_addr = (uint64_t)(uintptr_t)v->mem,
	};
	if (ioctl(v->vm, KVM_SET_USER_MEMORY_REGION, &region) < 0)
		return unusable("KVM_SET_USER_MEMORY_REGION");
	v->vcpu = ioctl(v->vm, KVM_CREATE_VCPU, 0);
	if (v->vcpu < 0)
		return unusable("KVM_CREATE_VCPU");
	mmap_size = ioctl(v->kvm, KVM_GET_VCPU_MMAP_SIZE, 0);
	if (mmap_size < (int)sizeof(struct kvm_run))
		return unusable("KVM_GET_VCPU_MMAP_SIZE");
	v->run_size = (size_t)mmap_size;
	v->run = mmap(NULL, v->run_size, PROT_READ | PROT_WRITE, MAP_SHARED, v->vcpu, 0);
	if (v->run == MAP_FAILED)
		return unusable("mmap kvm_run");
	/* real mode at 0:0x1000: code segment base 0 */
	if (ioctl(v->vcpu, KVM_GET_SREGS, &sregs) < 0)
		return unusable("KVM_GET_SREGS");
	sregs.cs.base = 0;
	sregs.cs.selector = 0;
	if (ioctl(v->vcpu, KVM_SET_SREGS, &sregs) < 0)
		return unusable("KVM_SET_SREGS");
	memset(&regs, 0, sizeof(regs));
	regs.rip = GUEST_CODE;
	regs.rcx = v->n;
	regs.rdx = v->port;
	regs.rflags = 0x2; /* bit 1 is always set */
	if (ioctl(v->vcpu, KVM_SET_REGS, &regs) < 0)
		return unusable("KVM_SET_REGS");
	return 0;
}

/* The vCPU thread: KVM_RUN until the guest halts, each exit checked. */
static void *vcpu_thread(void *arg)
{
	struct vm *v = arg;
	unsigned long want = v->n; /* the next value the guest must write */

	/* named before its first KVM_RUN, so that every exit is traced under this name */
	prctl(PR_SET_NAME, "wl_kvm_vcpu0", 0, 0, 0);
	v->tid = (pid_t)syscall(SYS_gettid);
	for (;;) {
		struct kvm_run *r = v->run;

		if (ioctl(v->vcpu, KVM_RUN, 0) < 0) {
			if (errno == EINTR || errno == EAGAIN) {
				v->eintr++;
				continue;
			}
			fprintf(stderr, "wl_kvm: KVM_RUN: %s\n", strerror(errno));
			v->bad = 1;
			return NULL;
		}
		v->runs++;
		switch (r->exit_reason) {
		case KVM_EXIT_IO: {
			uint8_t val = *((uint8_t *)r + r->io.data_offset);

			v->io++;
			if (r->io.direction != KVM_EXIT_IO_OUT || r->io.port != v->port ||
			    r->io.size != 1 || r->io.count != 1 || want == 0 ||
			    val != (uint8_t)want) {
				fprintf(stderr,
					"wl_kvm: unexpected I/O exit %lu: dir %u port 0x%x size %u "
					"count %u val %u (want %lu)\n",
					v->io, r->io.direction, r->io.port, r->io.size, r->io.count,
					val, want);
				v->bad = 1;
				return NULL;
			}
			want--;
			break;
		}
		case KVM_EXIT_HLT:
			v->hlt++;
			if (want != 0) {
				fprintf(stderr, "wl_kvm: halted with %lu writes missing\n", want);
				v->bad = 1;
			}
			return NULL;
		default:
			v->other++;
			fprintf(stderr, "wl_kvm: unexpected exit reason %u\n", r->exit_reason);
			v->bad = 1;
			return NULL;
		}
	}
}

int main(int argc, char **argv)
{
	struct vm v = { .kvm = -1, .vm = -1, .vcpu = -1, .port = 0x3f8 };
	pthread_t t;
	char *end;
	int rc;

	printf("%d\n", (int)getpid());
	fflush(stdout);
	if (argc < 2 || argc > 3) {
		fprintf(stderr, "usage: %s N [PORT]\n", argv[0]);
		return 2;
	}
	v.n = strtoul(argv[1], &end, 0);
	if (*end || v.n == 0 || v.n > 65535) {
		fprintf(stderr, "wl_kvm: N must be 1..65535 (the guest counts in cx)\n");
		return 2;
	}
	if (argc == 3) {
		v.port = (unsigned int)strtoul(argv[2], &end, 0);
		if (*end || v.port > 0xffff) {
			fprintf(stderr, "wl_kvm: PORT must be 0..0xffff\n");
			return 2;
		}
	}
	rc = vm_setup(&v);
	if (rc)
		return rc;
	if (pthread_create(&t, NULL, vcpu_thread, &v)) {
		fprintf(stderr, "wl_kvm: cannot start the vCPU thread\n");
		return 1;
	}
	pthread_join(t, NULL);
	printf("vcpu_tid=%d runs=%lu io=%lu hlt=%lu eintr=%lu other=%lu\n", (int)v.tid, v.runs,
	       v.io, v.hlt, v.eintr, v.other);
	fflush(stdout);
	munmap(v.run, v.run_size);
	munmap(v.mem, GUEST_MEM_SIZE);
	close(v.vcpu);
	close(v.vm);
	close(v.kvm);
	return v.bad || v.io != v.n || v.hlt != 1 ? 1 : 0;
}
