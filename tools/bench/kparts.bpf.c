// SPDX-License-Identifier: Apache-2.0
/*
 * What a kernel-edges program's parts cost (tools/bench/kparts.sh, docs/performance.md,
 * "Kernel edges: the wakeups and the comm"): variants of the work weft's kernel:sockets
 * program does on the raw tracepoints sock:sock_send_length and sock:sock_recv_length, each
 * adding one part.  Built at run time by kparts.sh with clang against the running kernel's
 * vmlinux.h (bpftool), -DKP=<variant> -DKP_PID=<the server's pid>; loaded by kparts.c.
 *
 *   1 empty             return at once: what the tracepoints firing a program costs
 *   2 pid               bpf_get_current_pid_tgid()
 *   3 comm-helper       bpf_get_current_comm()
 *   4 comm-btf          the comm as two loads from task_struct.comm
 *   5 filter            pid or comm (the helper), family, protocol, length, flags
 *   6 clock             5 + bpf_ktime_get_ns()
 *   7 ring              6 + a 152-byte record reserved, filled, committed without a wakeup
 *   8 array             7, the record in a per-CPU slot array instead of the ring
 *   9 ring64            7 with a 64-byte record
 *  10 wake-each         7, every record over a quarter of the ring forcing a wakeup
 *  11 pcpu-ring         7, the record in a ring of the CPU's own instead (an mmap-able array:
 *                       slots per CPU, the CPU's head in a second one), which kparts.c reads
 *                       as it reads the shared ring (every 50 ms), without a lock or a wakeup
 *  12 hot-array         8 with 64 slots a CPU (10 KB, always in the cache): what writing the
 *                       record costs when its lines are warm, against 8's 2.5 MB a CPU
 *  13 filter-btf-clock  6 with 4's comm (as weft's program reads it): no record at all
 *  14 ring-btf          7 with 4's comm: weft's work as the bench's variants do it
 *  15 pair-sk           14, but a call's time, sequence number and length wait in the
 *                       socket's local storage (SK_STORAGE) until the first call the other
 *                       way on that socket, which writes one record for the two: a record
 *                       a request and side instead of two (a measure of pairing in the
 *                       kernel, not a design: runs of calls one way are only summed)
 *  16 one-page          13 + four lines of one page written (a vmalloc'd array, a page a CPU)
 *  17 four-pages        13 + a line in each of four pages of the same array: against 16, what
 *                       a page more costs beside a line more
 *  18 four-pages-km     17 in an array small enough for kmalloc (the direct map's pages)
 *  19 sock-reads        13 + the record's members read (the 4-tuple, the sequence number
 *                       through bpf_skc_to_tcp_sock()) into a record on the stack, not kept
 *  20 hot-array-btf     12 with 4's comm: 14 with the record in a per-CPU array in the cache
 *  21 pcpu-ring-btf     11 with 4's comm: 14 with the record in a ring of the CPU's own
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "GPL";

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 2 << 20); /* as a graph query's */
} kp_ring SEC(".maps");

struct kp_rec {
	__u64 hdr, time;
	__u32 pid, tid;
	char comm[16];
	__u64 a[7];
	__u32 kind, family;
#if KP != 9
	__u8 pad[40];
#endif
};

#define KP_SLOTS 16384
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 64 * KP_SLOTS);
	__type(key, __u32);
	__type(value, struct kp_rec);
} kp_slots SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} kp_head SEC(".maps");

#if KP == 11 || KP == 21
/* per CPU: KP_PC_SLOTS records, and its head (records written) on a cache line of its own */
#define KP_PC_SLOTS 16384
#define KP_PC_CPUS 64
struct kp_pchead {
	__u64 head;
	__u64 pad[7];
};
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, KP_PC_CPUS *KP_PC_SLOTS);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct kp_rec);
} kp_pcring SEC(".maps");
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, KP_PC_CPUS);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct kp_pchead);
} kp_pchead SEC(".maps");
#endif

#if KP == 16 || KP == 17 || KP == 18
struct kp_line {
	__u64 n;
	__u64 pad[7];
};
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	/* 256 lines (four pages) a CPU: 64 CPUs, 1 MiB, vmalloc'd; 18: 2 CPUs, 32 KiB, kmalloc'd */
	__uint(max_entries, (KP == 18 ? 2 : 64) * 256);
	__type(key, __u32);
	__type(value, struct kp_line);
} kp_lines SEC(".maps");
#endif

#if KP == 15
/* a socket's staged run of calls one way: its first call's time and sequence number, the bytes
 * of the run, and the way (0: nothing staged, 1 receive, 2 send) */
struct kp_sst {
	__u64 t;
	__u32 seq, len;
	__u32 dir, pad;
};
struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct kp_sst);
} kp_sks SEC(".maps");
#endif

/* "redis-benchmark" as two little-endian words */
#define KP_COMM0 0x65622d7369646572ULL
#define KP_COMM1 0x006b72616d68636eULL

/* a record's members that every variant writes alike */
static __always_inline void kp_fill(struct kp_rec *r, __u64 pt, const __u64 *comm, int send,
				    __u16 fam, struct sock *sk)
{
	r->pid = pt >> 32;
	r->tid = pt;
	__builtin_memcpy(r->comm, comm, 16);
	r->kind = send;
	r->family = fam;
	r->a[0] = __builtin_bswap32(sk->__sk_common.skc_rcv_saddr);
	r->a[1] = __builtin_bswap32(sk->__sk_common.skc_daddr);
	r->a[2] = sk->__sk_common.skc_num;
	r->a[3] = __builtin_bswap16(sk->__sk_common.skc_dport);
}

static __always_inline int kp_body(struct sock *sk, int ret, int flags, int send)
{
	__u64 pt = bpf_get_current_pid_tgid(), comm[2];
	struct task_struct *t;
	struct tcp_sock *tp;
	struct kp_rec *r;
	__u16 fam;

	if (KP == 1)
		return 0;
	if (KP == 2)
		return pt == 1;
	if (KP == 4) {
		t = bpf_get_current_task_btf();
		comm[0] = *(__u64 *)&t->comm[0];
		comm[1] = *(__u64 *)&t->comm[8];
		return comm[0] == 1 || comm[1] == 1;
	}
	if (KP >= 13) {
		t = bpf_get_current_task_btf();
		comm[0] = *(__u64 *)&t->comm[0];
		comm[1] = *(__u64 *)&t->comm[8];
	} else {
		bpf_get_current_comm(comm, 16);
	}
	if (KP == 3)
		return comm[0] == 1;
	if ((__u32)(pt >> 32) != KP_PID && (comm[0] != KP_COMM0 || comm[1] != KP_COMM1))
		return 0;
	fam = sk->__sk_common.skc_family;
	if (fam != 2 || sk->sk_protocol != 6 || ret <= 0 || (flags & 2))
		return 0;
	if (KP == 5)
		return 0;
	if (KP == 6 || KP == 13)
		return bpf_ktime_get_ns() == 1;
#if KP == 16 || KP == 17 || KP == 18
	{
		__u32 base = (bpf_get_smp_processor_id() & (KP == 18 ? 1 : 63)) * 256;
		__u32 step = KP == 16 ? 1 : 64;

		for (__u32 j = 0; j < 4; j++) {
			__u32 i = base + j * step;
			struct kp_line *l = bpf_map_lookup_elem(&kp_lines, &i);

			if (l)
				l->n++;
		}
		return bpf_ktime_get_ns() == 1;
	}
#endif
#if KP == 15
	struct kp_sst *st = bpf_sk_storage_get(&kp_sks, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	__u64 now = bpf_ktime_get_ns();
	__u32 seq;

	if (!st)
		return 0;
	tp = bpf_skc_to_tcp_sock(sk);
	seq = tp ? (send ? tp->write_seq : tp->copied_seq) : 0;
	if (st->dir == 0 || st->dir == (__u32)send + 1) { /* stage, or add to the run */
		if (st->dir == 0) {
			st->t = now;
			st->seq = seq;
			st->len = 0;
			st->dir = send + 1;
		}
		st->len += ret;
		return 0;
	}
	r = bpf_ringbuf_reserve(&kp_ring, sizeof(*r), 0);
	st->dir = 0;
	if (!r)
		return 0;
	r->time = st->t;
	kp_fill(r, pt, comm, send, fam, sk);
	r->a[4] = st->seq;
	r->a[5] = st->len;
	r->a[6] = (__u64)sk;
	*(__u64 *)&r->pad[0] = now;
	*(__u32 *)&r->pad[8] = seq;
	*(__u32 *)&r->pad[12] = ret;
	bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP);
	return 0;
#endif
#if KP == 19
	{
		struct kp_rec sr;

		sr.time = bpf_ktime_get_ns();
		kp_fill(&sr, pt, comm, send, fam, sk);
		tp = bpf_skc_to_tcp_sock(sk);
		sr.a[4] = tp ? (send ? tp->write_seq : tp->copied_seq) : 0;
		sr.a[5] = ret;
		sr.a[6] = (__u64)sk;
		asm volatile("" : : "r"(&sr) : "memory"); /* the stores happen */
		return 0;
	}
#endif
#if KP == 11 || KP == 21
	struct kp_pchead *ph;
	__u32 cpu = bpf_get_smp_processor_id(), pi;

	ph = bpf_map_lookup_elem(&kp_pchead, &cpu);
	if (!ph)
		return 0;
	pi = cpu * KP_PC_SLOTS + (ph->head & (KP_PC_SLOTS - 1));
	r = bpf_map_lookup_elem(&kp_pcring, &pi);
	if (!r)
		return 0;
#else
	if (KP == 8 || KP == 12 || KP == 20) {
		__u64 *h = bpf_map_lookup_elem(&kp_head, &(__u32){ 0 });
		__u32 i;

		if (!h)
			return 0;
		i = bpf_get_smp_processor_id() * KP_SLOTS +
		    (*h & (KP == 12 || KP == 20 ? 63 : KP_SLOTS - 1));
		r = bpf_map_lookup_elem(&kp_slots, &i);
		if (!r)
			return 0;
		(*h)++;
	} else {
		r = bpf_ringbuf_reserve(&kp_ring, sizeof(*r), 0);
		if (!r)
			return 0;
	}
#endif
	r->time = bpf_ktime_get_ns();
	kp_fill(r, pt, comm, send, fam, sk);
	tp = bpf_skc_to_tcp_sock(sk);
	r->a[4] = tp ? (send ? tp->write_seq : tp->copied_seq) : 0;
	r->a[5] = ret;
	r->a[6] = (__u64)sk;
#if KP == 11 || KP == 21
	asm volatile("" ::: "memory"); /* the record before the head that publishes it */
	*(volatile __u64 *)&ph->head = ph->head + 1;
	return 0;
#endif
	if (KP == 8 || KP == 12 || KP == 20)
		return 0;
	if (KP == 10)
		bpf_ringbuf_submit(
			r, bpf_ringbuf_query(&kp_ring, BPF_RB_AVAIL_DATA) >
					   bpf_ringbuf_query(&kp_ring, BPF_RB_RING_SIZE) / 4 ?
				   BPF_RB_FORCE_WAKEUP :
				   BPF_RB_NO_WAKEUP);
	else
		bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP);
	return 0;
}

SEC("tp_btf/sock_send_length")
int BPF_PROG(kp_send, struct sock *sk, int ret, int flags)
{
	return kp_body(sk, ret, flags, 1);
}

SEC("tp_btf/sock_recv_length")
int BPF_PROG(kp_recv, struct sock *sk, int ret, int flags)
{
	return kp_body(sk, ret, flags, 0);
}
