// SPDX-License-Identifier: Apache-2.0
/*
 * What one uprobe hit costs the thread that hits it, measured on this machine: the trap into
 * the kernel, the uprobe's dispatch, single-stepping or emulating the probed instruction, and
 * the return to user space.  The kernel's BPF statistics (run_time_ns) see none of that, only
 * the program, and on this development VM the trap is ~4 us against ~150 ns of program: a
 * CPU budget that counted BPF run time alone would let a uprobe on malloc slow every process
 * down several times over while it stayed under 5% (agent/budget.c charges calls x this cost).
 *
 * How: a function of this process (cost_target) is called in batches with no probe, with a
 * uprobe on its entry, and with a uretprobe, all on this thread; each probe is a perf event of
 * the uprobe PMU (pid 0: this thread only) running a program that returns 0.  The cost is the
 * smallest time per call of the probed batches minus the smallest of the plain ones (the
 * minimum is the run least disturbed by other work on a shared machine).  Measured once per
 * process, on first use (~100 ms: closing each perf event waits for a grace period).
 *
 * Must never: leave a probe behind (the perf events are closed before returning, and die with
 * the process anyway), or fail loudly: without the uprobe PMU or BPF, the result is an error
 * and the caller decides.
 */
#include <errno.h>
#include <inttypes.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "probes/probes.h"

#define COST_BATCH 200 /* calls per timed batch */
#define COST_ROUNDS 7 /* batches per mode */

/*
 * The probed function.  Its first instruction matters: the kernel emulates `push` (most
 * function entries, with or without frame pointers: malloc starts with push %r12) but must
 * single-step others out of line, which costs a second trap.  So on x86-64 the target starts
 * as compiled functions do, with push %rbp; elsewhere it is whatever the compiler makes.
 */
#if defined(__x86_64__)
int weft_uprobe_cost_target(int x);
__asm__(".text\n"
	".globl weft_uprobe_cost_target\n"
	".type weft_uprobe_cost_target, @function\n"
	"weft_uprobe_cost_target:\n"
	"\tpush %rbp\n"
	"\tmov %rsp, %rbp\n"
	"\tlea 1(%rdi), %eax\n"
	"\tpop %rbp\n"
	"\tret\n"
	".size weft_uprobe_cost_target, .-weft_uprobe_cost_target\n");
#define cost_target weft_uprobe_cost_target
#else
static __attribute__((noinline)) int cost_target(int x)
{
	__asm__ volatile("" : "+r"(x));
	return x + 1;
}
#endif

static int (*volatile cost_fn)(int) = cost_target;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The file and file offset of code address addr, from /proc/self/maps. */
static int code_location(uintptr_t addr, char *path, size_t pathsz, uint64_t *off)
{
	char line[4096 + 128];
	FILE *f = fopen("/proc/self/maps", "r");
	int rc = -ENOENT;

	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long start, end, foff;
		char perms[8];
		int n = 0;

		if (sscanf(line, "%llx-%llx %7s %llx %*s %*s %n", &start, &end, perms, &foff, &n) <
			    4 ||
		    addr < start || addr >= end || !n || line[n] != '/')
			continue;
		line[strcspn(line, "\n")] = 0;
		snprintf(path, pathsz, "%s", line + n);
		*off = addr - start + foff;
		rc = 0;
		break;
	}
	fclose(f);
	return rc;
}

static int read_int_file(const char *path, int *v)
{
	FILE *f = fopen(path, "r");
	int ok;

	if (!f)
		return -errno;
	ok = fscanf(f, "%d", v) == 1;
	fclose(f);
	return ok ? 0 : -EINVAL;
}

/* A uprobe (or uretprobe) perf event on path:off for this thread, running prog. */
static int uprobe_event_open(int type, int ret_bit, bool ret, const char *path, uint64_t off,
			     int prog)
{
	struct perf_event_attr attr;
	int fd;

	memset(&attr, 0, sizeof(attr));
	attr.size = sizeof(attr);
	attr.type = (uint32_t)type;
	attr.config = ret ? 1ull << ret_bit : 0;
	attr.config1 = (uint64_t)(uintptr_t)path;
	attr.config2 = off;
	fd = (int)syscall(__NR_perf_event_open, &attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (ioctl(fd, PERF_EVENT_IOC_SET_BPF, prog) || ioctl(fd, PERF_EVENT_IOC_ENABLE, 0)) {
		int rc = -errno;

		close(fd);
		return rc;
	}
	return fd;
}

/* The smallest ns per call over COST_ROUNDS batches. */
static double per_call_min(void)
{
	double best = 1e18;

	for (int r = 0; r < COST_ROUNDS; r++) {
		uint64_t t0 = now_ns();
		int x = 0;

		for (int i = 0; i < COST_BATCH; i++)
			x = cost_fn(x);
		t0 = now_ns() - t0;
		if ((double)t0 / COST_BATCH < best)
			best = (double)t0 / COST_BATCH;
	}
	return best;
}

static int measure(struct probe_uprobe_cost *c)
{
	const struct bpf_insn insns[] = {
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0 },
		{ .code = BPF_JMP | BPF_EXIT },
	};
	char path[4096], fmt[64];
	int type, ret_bit = 0, prog, fd, rc;
	double plain, probed, again;
	uint64_t off = 0;
	FILE *f;

	rc = read_int_file("/sys/bus/event_source/devices/uprobe/type", &type);
	if (rc)
		return rc;
	f = fopen("/sys/bus/event_source/devices/uprobe/format/retprobe", "r");
	if (f) { /* "config:0" */
		if (!fgets(fmt, sizeof(fmt), f) || sscanf(fmt, "config:%d", &ret_bit) != 1)
			ret_bit = 0;
		fclose(f);
	}
	rc = code_location((uintptr_t)cost_target, path, sizeof(path), &off);
	if (rc)
		return rc;
	prog = bpf_prog_load(BPF_PROG_TYPE_KPROBE, NULL, "GPL", insns, 2, NULL);
	if (prog < 0)
		return prog;
	plain = per_call_min();
	for (int ret = 0; ret < 2 && rc == 0; ret++) {
		fd = uprobe_event_open(type, ret_bit, ret, path, off, prog);
		if (fd < 0) {
			rc = fd;
			break;
		}
		probed = per_call_min();
		close(fd);
		again = per_call_min();
		if (again < plain)
			plain = again;
		if (ret)
			c->ret_ns = probed > plain ? (uint64_t)(probed - plain) : 0;
		else
			c->entry_ns = probed > plain ? (uint64_t)(probed - plain) : 0;
	}
	close(prog);
	return rc;
}

int probe_uprobe_cost(struct probe_uprobe_cost *out)
{
	static struct probe_uprobe_cost cached;
	static int state; /* 0: not measured, 1: measured, < 0: -errno of the failure */

	if (state == 0) {
		int rc = measure(&cached);

		state = rc ? rc : 1;
	}
	if (state < 0)
		return state;
	*out = cached;
	return 0;
}
