/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Shared harness of the BPF runtime tests (tests/runtime/test_rt_*.c) and tools/bench/bench_rt.c: compile a hand-written
 * BPF C program the way the code generator's output will be compiled (clang -target bpf with
 * the runtime headers of kernel/), load and attach it with libbpf, and drive the wl_syscalls
 * workload (started paused, released once the probes are attached).  Header-only, static
 * functions: each test is one executable.  Needs root and the real kernel; tests skip
 * otherwise.
 */
#ifndef WEFT_RT_HARNESS_H
#define WEFT_RT_HARNESS_H

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "agent/bpfrt.h"

#ifndef WEFT_CLANG_PATH
#define WEFT_CLANG_PATH "clang"
#endif

#define RT_MAX_LINKS 16

struct rt_prog {
	struct bpf_object *obj;
	struct bpf_link *links[RT_MAX_LINKS];
	int nlinks;
	struct bpfrt *rt;
	char dir[64];
};

struct rt_wl {
	pid_t pid;
	int go_fd; /* the workload's stdin: one byte releases it */
};

static inline __u64 rt_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (__u64)ts.tv_sec * 1000000000ull + (__u64)ts.tv_nsec;
}

static inline int rt_is_root(void)
{
	return geteuid() == 0;
}

static inline const char *rt_env(const char *name, const char *fallback)
{
	const char *v = getenv(name);

	return v && *v ? v : fallback;
}

/* Run argv, wait; 0 if it exited 0. */
static inline int rt_run(char *const argv[])
{
	int status;
	pid_t pid = fork();

	if (pid < 0)
		return -errno;
	if (pid == 0) {
		execv(argv[0], argv);
		_exit(127);
	}
	if (waitpid(pid, &status, 0) < 0)
		return -errno;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -EINVAL;
}

/* Write src to <tmpdir>/name.bpf.c and compile it to name.bpf.o; out gets the object path. */
static inline int rt_compile(struct rt_prog *p, const char *name, const char *src, char *out,
			     size_t outlen)
{
	char c_path[PATH_MAX], inc_rt[PATH_MAX], inc_arch[PATH_MAX];
	FILE *f;

	snprintf(p->dir, sizeof(p->dir), "/tmp/weft-rt-XXXXXX");
	if (!mkdtemp(p->dir))
		return -errno;
	if (snprintf(c_path, sizeof(c_path), "%s/%s.bpf.c", p->dir, name) >= (int)sizeof(c_path) ||
	    snprintf(out, outlen, "%s/%s.bpf.o", p->dir, name) >= (int)outlen)
		return -ENAMETOOLONG;
	snprintf(inc_rt, sizeof(inc_rt), "-I%s/kernel", rt_env("WEFT_SOURCE_DIR", WEFT_SOURCE_DIR));
#if defined(__x86_64__)
	snprintf(inc_arch, sizeof(inc_arch), "-I/usr/include/x86_64-linux-gnu");
#elif defined(__aarch64__)
	snprintf(inc_arch, sizeof(inc_arch), "-I/usr/include/aarch64-linux-gnu");
#else
	snprintf(inc_arch, sizeof(inc_arch), "-I/usr/include");
#endif
	f = fopen(c_path, "w");
	if (!f)
		return -errno;
	fputs(src, f);
	fclose(f);
	{
		char *argv[] = { (char *)WEFT_CLANG_PATH,
				 (char *)"-target",
				 (char *)"bpf",
				 (char *)"-O2",
				 (char *)"-g",
				 (char *)"-Wall",
				 (char *)"-Werror",
				 (char *)"-D__TARGET_ARCH_x86",
				 inc_rt,
				 inc_arch,
				 (char *)"-c",
				 c_path,
				 (char *)"-o",
				 out,
				 NULL };

		return rt_run(argv);
	}
}

/*
 * Open obj_path, call setup (rodata, sizes) before load, load, attach every program whose
 * name is not in `skip` (a NULL-terminated list, may be NULL), and open the runtime.
 */
static inline int rt_load(struct rt_prog *p, const char *obj_path,
			  int (*setup)(struct bpf_object *obj, void *arg), void *arg,
			  const char *const *skip)
{
	struct bpf_program *prog;
	int err;

	bpfrt_libbpf_setup();
	p->obj = bpf_object__open_file(obj_path, NULL);
	if (!p->obj)
		return -errno;
	if (setup) {
		err = setup(p->obj, arg);
		if (err)
			return err;
	}
	err = bpf_object__load(p->obj);
	if (err)
		return err;
	bpf_object__for_each_program(prog, p->obj)
	{
		int skipped = 0;

		for (const char *const *s = skip; s && *s; s++)
			skipped |= strcmp(*s, bpf_program__name(prog)) == 0;
		if (skipped)
			continue;
		if (p->nlinks == RT_MAX_LINKS)
			return -E2BIG;
		p->links[p->nlinks] = bpf_program__attach(prog);
		if (!p->links[p->nlinks])
			return -errno;
		p->nlinks++;
	}
	p->rt = bpfrt_open(p->obj);
	return p->rt ? 0 : -errno;
}

static inline void rt_detach(struct rt_prog *p)
{
	for (int i = 0; i < p->nlinks; i++)
		bpf_link__destroy(p->links[i]);
	p->nlinks = 0;
}

static inline void rt_unload(struct rt_prog *p)
{
	char cmd[96];

	rt_detach(p);
	bpfrt_close(p->rt);
	bpf_object__close(p->obj);
	if (p->dir[0]) {
		snprintf(cmd, sizeof(cmd), "rm -rf %s", p->dir);
		if (system(cmd) != 0)
			fprintf(stderr, "could not remove %s\n", p->dir);
	}
	memset(p, 0, sizeof(*p));
}

/* Start `wl_syscalls n threads wait`: it prints its pid and waits for a byte on stdin. */
static inline int rt_wl_start(struct rt_wl *wl, unsigned long n, unsigned long threads)
{
	char path[PATH_MAX], narg[32], targ[32], line[32];
	int in[2], out[2];
	ssize_t len;

	snprintf(path, sizeof(path), "%s/tests/workloads/wl_syscalls",
		 rt_env("WEFT_BINARY_DIR", "."));
	if (access(path, X_OK) != 0) {
		fprintf(stderr,
			"%s: not found: run this from the build tree, or set WEFT_BINARY_DIR to "
			"it\n",
			path);
		return -ENOENT;
	}
	snprintf(narg, sizeof(narg), "%lu", n);
	snprintf(targ, sizeof(targ), "%lu", threads);
	if (pipe(in) || pipe(out))
		return -errno;
	wl->pid = fork();
	if (wl->pid < 0)
		return -errno;
	if (wl->pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		close(in[1]);
		close(out[0]);
		execl(path, path, narg, targ, "wait", (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	wl->go_fd = in[1];
	len = read(out[0], line, sizeof(line) - 1);
	close(out[0]);
	if (len <= 0)
		return -EIO;
	line[len] = 0;
	return atoi(line) == wl->pid ? 0 : -EPROTO;
}

static inline int rt_wl_go(struct rt_wl *wl)
{
	int r = write(wl->go_fd, "g", 1) == 1 ? 0 : -errno;

	close(wl->go_fd);
	return r;
}

/* 1 while running, 0 once exited with status 0, -1 on failure. */
static inline int rt_wl_poll(struct rt_wl *wl, int block)
{
	int status;
	pid_t r = waitpid(wl->pid, &status, block ? 0 : WNOHANG);

	if (r == 0)
		return 1;
	if (r < 0)
		return -1;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

/* Set the runtime's -p filter (rodata) before load. */
static inline int rt_set_target(struct bpf_object *obj, pid_t pid)
{
	__u32 v = (__u32)pid;

	return bpfrt_rodata_set(obj, "weft_target_pid", &v, sizeof(v));
}

static inline void rt_sleep_us(long us)
{
	struct timespec ts = { .tv_sec = us / 1000000, .tv_nsec = (us % 1000000) * 1000 };

	nanosleep(&ts, NULL);
}

#endif
