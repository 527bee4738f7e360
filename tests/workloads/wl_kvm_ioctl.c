// SPDX-License-Identifier: Apache-2.0
/*
 * A monitor without a VM, for `weft vm record`'s discovery where /dev/kvm is missing
 * (tests/runtime/test_vm_record.c): one thread named "wl_fake_vcpu0" calls
 * ioctl(fd, KVM_RUN, 0) N times on a file that is not a vCPU (/dev/null: the kernel answers
 * ENOTTY, but the system call was entered, so syscall:ioctl with cmd 0xae80 fires each time)
 * and sleeps 1 ms after each call (a sched_switch out, blocked, and one back in), then the
 * thread ends.  It prints "vcpu_tid=T pid=P runs=N enotty=E" with E the calls that failed
 * with ENOTTY (all of them: the test checks it).
 *
 *   wl_kvm_ioctl N
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define KVM_RUN_CMD 0xae80 /* _IO(KVMIO, 0x80): <linux/kvm.h>'s KVM_RUN */

static long n_runs, enotty;
static pid_t vcpu_tid;

static void *vcpu(void *arg)
{
	int fd = *(int *)arg;
	struct timespec ms = { 0, 1000000 };

	prctl(PR_SET_NAME, "wl_fake_vcpu0", 0, 0, 0);
	vcpu_tid = (pid_t)syscall(SYS_gettid);
	for (long i = 0; i < n_runs; i++) {
		if (ioctl(fd, KVM_RUN_CMD, 0) < 0 && errno == ENOTTY)
			enotty++;
		nanosleep(&ms, NULL);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t t;
	int fd;

	if (argc != 2 || (n_runs = strtol(argv[1], NULL, 10)) <= 0) {
		fprintf(stderr, "usage: wl_kvm_ioctl N\n");
		return 2;
	}
	fd = open("/dev/null", O_RDWR);
	if (fd < 0 || pthread_create(&t, NULL, vcpu, &fd) != 0 || pthread_join(t, NULL) != 0) {
		perror("wl_kvm_ioctl");
		return 1;
	}
	printf("vcpu_tid=%d pid=%d runs=%ld enotty=%ld\n", (int)vcpu_tid, (int)getpid(), n_runs,
	       enotty);
	return 0;
}
