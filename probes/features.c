// SPDX-License-Identifier: Apache-2.0
/*
 * What the running kernel can do, probed once and cached.  Program and map types are asked
 * of the kernel itself (libbpf's probes load a trivial program or create a tiny map); probe
 * types that need a PMU or tracefs file are read from sysfs; fentry is tried for real (load a
 * tracing program against a vmlinux BTF function and attach it), because a kernel can accept
 * the program type yet have no trampoline to attach it with.  Detection must stay quiet:
 * libbpf's log is silenced while probing, and a missing feature is a false, never an error.
 */
#include <errno.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include "probes/probes.h"
#include "probes/provider.h"

static int silent_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	return 0;
}

static bool path_exists(const char *path)
{
	return access(path, F_OK) == 0;
}

static bool tracefs_file_exists(const char *tracefs, const char *file)
{
	char path[128];

	if (!tracefs)
		return false;
	snprintf(path, sizeof(path), "%s/%s", tracefs, file);
	return path_exists(path);
}

static bool perf_event_works(void)
{
	struct perf_event_attr attr;
	int fd;

	memset(&attr, 0, sizeof(attr));
	attr.size = sizeof(attr);
	attr.type = PERF_TYPE_SOFTWARE;
	attr.config = PERF_COUNT_SW_CPU_CLOCK;
	attr.sample_period = 1000000;
	attr.disabled = 1;
	fd = (int)syscall(__NR_perf_event_open, &attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
	if (fd < 0)
		return false;
	close(fd);
	return true;
}

/* Loads `return 0` as an fentry program on a kernel function and attaches it for an instant.
 * bpf_fentry_test1 exists for exactly this kind of test; the others are fallbacks that are
 * always built.  The program does nothing, so the brief attachment is harmless. */
static bool fentry_works(void)
{
	static const char *const funcs[] = { "bpf_fentry_test1", "__x64_sys_getpid",
					     "do_nanosleep" };
	const struct bpf_insn insns[] = {
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0 },
		{ .code = BPF_JMP | BPF_EXIT },
	};
	struct btf *vmlinux = btf__load_vmlinux_btf();
	bool ok = false;
	int id = -1;

	if (!vmlinux)
		return false;
	for (size_t i = 0; i < sizeof(funcs) / sizeof(funcs[0]) && id < 0; i++)
		id = btf__find_by_name_kind(vmlinux, funcs[i], BTF_KIND_FUNC);
	if (id > 0) {
		LIBBPF_OPTS(bpf_prog_load_opts, opts, .expected_attach_type = BPF_TRACE_FENTRY,
			    .attach_btf_id = (__u32)id);
		int prog = bpf_prog_load(BPF_PROG_TYPE_TRACING, NULL, "GPL", insns, 2, &opts);

		if (prog >= 0) {
			int link = bpf_link_create(prog, 0, BPF_TRACE_FENTRY, NULL);

			if (link < 0)
				link = bpf_raw_tracepoint_open(NULL, prog);
			if (link >= 0) {
				ok = true;
				close(link);
			}
			close(prog);
		}
	}
	btf__free(vmlinux);
	return ok;
}

const struct probe_features *probe_features_get(void)
{
	static struct probe_features f;
	static bool done;
	libbpf_print_fn_t old;
	const char *tfs;

	if (done)
		return &f;
	done = true;
	old = libbpf_set_print(silent_print);

	tfs = tracefs_dir();
	f.tracefs = tfs != NULL;
	snprintf(f.tracefs_path, sizeof(f.tracefs_path), "%s", tfs ? tfs : "");
	f.tracepoint = libbpf_probe_bpf_prog_type(BPF_PROG_TYPE_TRACEPOINT, NULL) == 1;
	f.raw_tp = libbpf_probe_bpf_prog_type(BPF_PROG_TYPE_RAW_TRACEPOINT, NULL) == 1;
	f.perf_event = libbpf_probe_bpf_prog_type(BPF_PROG_TYPE_PERF_EVENT, NULL) == 1 &&
		       perf_event_works();
	f.uprobe = path_exists("/sys/bus/event_source/devices/uprobe/type") ||
		   tracefs_file_exists(tfs, "uprobe_events");
	f.uprobe_multi = f.uprobe && probe_uprobe_multi_supported();
	f.kprobe = path_exists("/sys/bus/event_source/devices/kprobe/type") ||
		   tracefs_file_exists(tfs, "kprobe_events");
	f.ringbuf = libbpf_probe_bpf_map_type(BPF_MAP_TYPE_RINGBUF, NULL) == 1;
	f.percpu_hash = libbpf_probe_bpf_map_type(BPF_MAP_TYPE_PERCPU_HASH, NULL) == 1;
	f.btf = path_exists("/sys/kernel/btf/vmlinux");
	f.fentry = f.btf && libbpf_probe_bpf_prog_type(BPF_PROG_TYPE_TRACING, NULL) == 1 &&
		   fentry_works();

	libbpf_set_print(old);
	return &f;
}
