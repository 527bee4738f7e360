// SPDX-License-Identifier: Apache-2.0
/*
 * The hand-written baseline of the per-event cost benchmark: the least a BPF program can do
 * to count events, written the way libbpf-tools would, with no window epochs, no pid filter
 * and no generated scaffolding.  weft's generated program is measured against this.
 *
 * Built at run time by tools/bench/handwritten.c with clang -target bpf -O2:
 *   default      `select count()`: one PERCPU_ARRAY slot, incremented in place
 *   -DBY_TID     `group by tid select count()`: a PERCPU_HASH keyed by thread id
 * Two programs, one per probe type; the loader attaches the one it is asked for.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#ifdef BY_TID
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 10240);
	__type(key, __u32);
	__type(value, __u64);
} counts SEC(".maps");
#else
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} counts SEC(".maps");
#endif

static __always_inline int count_one(void)
{
#ifdef BY_TID
	__u32 key = (__u32)bpf_get_current_pid_tgid();
#else
	__u32 key = 0;
#endif
	__u64 *v = bpf_map_lookup_elem(&counts, &key);

	if (v) {
		(*v)++; /* per-CPU slot: no other CPU writes it */
		return 0;
	}
#ifdef BY_TID
	{
		__u64 one = 1;

		/* a first event of this thread; another CPU may have inserted it meanwhile */
		if (bpf_map_update_elem(&counts, &key, &one, BPF_NOEXIST) != 0) {
			v = bpf_map_lookup_elem(&counts, &key);
			if (v)
				(*v)++;
		}
	}
#endif
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_getppid")
int on_tracepoint(void *ctx)
{
	return count_one();
}

SEC("uprobe")
int on_uprobe(void *ctx)
{
	return count_one();
}

char LICENSE[] SEC("license") = "GPL";
