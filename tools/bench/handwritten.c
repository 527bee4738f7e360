// SPDX-License-Identifier: Apache-2.0
/*
 * handwritten: the loader of the hand-written baseline (tools/bench/handwritten.bpf.c).  It
 * does what `weft run` does, minus the query language: compile the BPF C with clang at run
 * time (the same flags weft's clang driver uses), load it with libbpf, attach one program,
 * and on SIGINT/SIGTERM read the per-CPU counts, print their total and detach.
 *
 *   handwritten [-s SRC] tp|uprobe count|tid [BIN SYM]
 *     tp       tracepoint syscalls:sys_enter_getppid
 *     uprobe   entry of function SYM in binary BIN
 *     count    one counter (`select count()`); tid: a counter per thread (`group by tid`)
 *
 * Prints "handwritten: attached 1 probe" on stderr once attached, and at the end
 * "handwritten: COUNT events in GROUPS groups" on stdout.
 */
#include <errno.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#ifndef HANDWRITTEN_BPF_SRC
#define HANDWRITTEN_BPF_SRC "tools/bench/handwritten.bpf.c"
#endif
#ifndef WEFT_CLANG_PATH
#define WEFT_CLANG_PATH "clang"
#endif

extern char **environ;

static int quiet_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	return level == LIBBPF_WARN ? vfprintf(stderr, fmt, ap) : 0;
}

/* clang -target bpf, as compiler/clangdrv.c runs it.  0 or -errno. */
static int compile_bpf(const char *src, const char *obj, bool by_tid)
{
	char *argv[] = {
		WEFT_CLANG_PATH,
		"-target",
		"bpf",
		"-O2",
		"-g",
		"-D__TARGET_ARCH_x86",
		"-I",
		"/usr/include/x86_64-linux-gnu",
		by_tid ? "-DBY_TID" : "-DBY_NONE",
		"-fno-stack-protector",
		"-c",
		(char *)src,
		"-o",
		(char *)obj,
		NULL,
	};
	int status, rc;
	pid_t pid;

	rc = posix_spawnp(&pid, argv[0], NULL, NULL, argv, environ);
	if (rc)
		return -rc;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -errno;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -EINVAL;
}

/* Sum of all CPUs' values of all keys; *groups = number of keys. */
static int counts_sum(int map_fd, bool by_tid, unsigned long long *total, unsigned long *groups)
{
	int ncpu = libbpf_num_possible_cpus();
	unsigned long long *vals;
	__u32 key, next;
	bool first = true;

	if (ncpu <= 0)
		return ncpu;
	vals = calloc((size_t)ncpu, sizeof(*vals));
	if (!vals)
		return -ENOMEM;
	*total = 0;
	*groups = 0;
	for (;;) {
		if (by_tid) {
			if (bpf_map_get_next_key(map_fd, first ? NULL : &key, &next))
				break;
		} else if (!first) {
			break;
		} else {
			next = 0;
		}
		first = false;
		key = next;
		if (bpf_map_lookup_elem(map_fd, &key, vals))
			continue;
		for (int c = 0; c < ncpu; c++)
			*total += vals[c];
		(*groups)++;
	}
	free(vals);
	return 0;
}

int main(int argc, char **argv)
{
	char dir[] = "/tmp/weft-hw-XXXXXX", obj_path[64];
	const char *src = HANDWRITTEN_BPF_SRC;
	struct bpf_object *obj = NULL;
	struct bpf_program *prog, *other;
	struct bpf_link *link = NULL;
	unsigned long long total = 0;
	unsigned long groups = 0;
	bool uprobe, by_tid;
	int c, rc = 1, sig;
	sigset_t mask;

	while ((c = getopt(argc, argv, "s:")) != -1) {
		if (c != 's')
			goto usage;
		src = optarg;
	}
	if (argc - optind < 2)
		goto usage;
	uprobe = strcmp(argv[optind], "uprobe") == 0;
	by_tid = strcmp(argv[optind + 1], "tid") == 0;
	if ((!uprobe && strcmp(argv[optind], "tp")) ||
	    (!by_tid && strcmp(argv[optind + 1], "count")) || (uprobe && argc - optind < 4))
		goto usage;

	/* block the stop signals now: one arriving during the load must not kill us */
	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	libbpf_set_print(quiet_print);

	if (!mkdtemp(dir)) {
		perror("handwritten: mkdtemp");
		return 1;
	}
	snprintf(obj_path, sizeof(obj_path), "%s/hw.bpf.o", dir);
	if (compile_bpf(src, obj_path, by_tid)) {
		fprintf(stderr, "handwritten: clang failed on %s\n", src);
		goto out_rmdir;
	}
	obj = bpf_object__open_file(obj_path, NULL);
	if (!obj) {
		fprintf(stderr, "handwritten: open %s: %s\n", obj_path, strerror(errno));
		goto out_rmdir;
	}
	prog = bpf_object__find_program_by_name(obj, uprobe ? "on_uprobe" : "on_tracepoint");
	other = bpf_object__find_program_by_name(obj, uprobe ? "on_tracepoint" : "on_uprobe");
	if (!prog || !other)
		goto out_close;
	bpf_program__set_autoload(other, false);
	if (bpf_object__load(obj)) {
		fprintf(stderr, "handwritten: load: %s\n", strerror(errno));
		goto out_close;
	}
	if (uprobe) {
		LIBBPF_OPTS(bpf_uprobe_opts, uo, .func_name = argv[optind + 3]);

		link = bpf_program__attach_uprobe_opts(prog, -1, argv[optind + 2], 0, &uo);
	} else {
		link = bpf_program__attach(prog);
	}
	if (!link) {
		fprintf(stderr, "handwritten: attach: %s\n", strerror(errno));
		goto out_close;
	}
	fprintf(stderr, "handwritten: attached 1 probe\n");

	sigwait(&mask, &sig);
	bpf_link__destroy(link); /* detach first: the sum is then final */
	link = NULL;
	if (counts_sum(bpf_map__fd(bpf_object__find_map_by_name(obj, "counts")), by_tid, &total,
		       &groups) == 0) {
		printf("handwritten: %llu events in %lu groups\n", total, groups);
		rc = 0;
	}

out_close:
	bpf_link__destroy(link);
	bpf_object__close(obj);
out_rmdir:
	unlink(obj_path);
	rmdir(dir);
	return rc;

usage:
	fprintf(stderr, "usage: %s [-s SRC] tp|uprobe count|tid [BIN SYM]\n", argv[0]);
	return 2;
}
