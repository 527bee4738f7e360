// SPDX-License-Identifier: Apache-2.0
/*
 * Streams against the real kernel: every row is either received or counted as dropped, never
 * silently lost, and never received twice.
 *
 * A stream program (like `from syscall:getppid select tid, args...`) on raw_syscalls:sys_enter
 * sends one ring buffer record per getppid() of the wl_syscalls workload, carrying the
 * workload's (thread, sequence) pair.  The test receives them through bpfrt while flipping
 * windows, and checks each (thread, sequence) at most once:
 *  - a ring buffer larger than all rows: received == N, dropped == 0, every pair seen;
 *  - a one-page ring buffer polled every millisecond: dropped > 0 and received + dropped == N;
 *  - bpfrt's reader thread (bpfrt_stream_reader_start(), what graph queries use) with a 64 KiB
 *    ring and a caller that does not poll at all until the workload has ended: more rows
 *    received than the ring holds, received + dropped == N; with the thread's queue bounded
 *    to one chunk, the rows neither ring nor queue could hold are counted, received +
 *    dropped == N exactly; with a ring that holds every row, the caller's first poll after
 *    the workload gets all N (the poll waits for the thread to empty the ring);
 *  - WEFT_REC_SUBMIT_LAZY's wakeups, one record at a time into a ring nobody reads: none
 *    until a record that looks at the ring (every WEFT_WAKE_CHECK-th of the CPU's) finds more
 *    than a quarter waiting, that one, and then one in 64 records while that lasts, exactly.
 */
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <cmocka.h>
#include "tools/bench/rt_harness.h"
#include "tests/skip.h"

#define N_CALLS 200000ul
#define N_THREADS 2ul
#define PROBE_INDEX 3

static const char prog_src[] =
	"#define WEFT_WANT_RINGBUF\n"
	"#include \"weft.bpf.h\"\n"
	"\n"
	"struct rec0 { struct weft_rec_hdr h; __u32 tid; __u32 thread; __u64 seq; };\n"
	"\n"
	"SEC(\"tp/raw_syscalls/sys_enter\")\n"
	"int p_stream(void *ctx)\n"
	"{\n"
	"	__u32 e = weft_epoch();\n"
	"	if (!weft_pid_ok())\n"
	"		return 0;\n"
	"	if (WEFT_TP(ctx, 8, __s64) != WL_NR)\n"
	"		return 0;\n"
	"	struct rec0 *r = WEFT_REC_RESERVE(struct rec0, PROBE, e);\n"
	"	if (!r)\n"
	"		return 0;\n"
	"	r->tid = weft_tid();\n"
	"	r->seq = WEFT_TP(ctx, 16, __u64);\n"
	"	r->thread = WEFT_TP(ctx, 24, __u64);\n"
	"	WEFT_REC_SUBMIT(r);\n"
	"	return 0;\n"
	"}\n";

/* The same rows through the rings of each CPU's own (WEFT_WANT_PCR, what kernel:sockets
 * records take), woken by the rule of WEFT_PCR_SUBMIT() through the program's cost slot. */
static const char pcr_src[] =
	"#define WEFT_WANT_RINGBUF\n"
	"#define WEFT_WANT_PCR\n"
	"#include \"weft.bpf.h\"\n"
	"\n"
	"struct rec0 { struct weft_rec_hdr h; __u32 tid; __u32 thread; __u64 seq; };\n"
	"struct {\n"
	"	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);\n"
	"	__uint(max_entries, 1);\n"
	"	__type(key, __u32);\n"
	"	__type(value, struct weft_cost);\n"
	"} weft_cost SEC(\".maps\");\n"
	"\n"
	"SEC(\"tp/raw_syscalls/sys_enter\")\n"
	"int p_pcr(void *ctx)\n"
	"{\n"
	"	__u32 e = weft_epoch();\n"
	"	struct weft_pcr_slot *s;\n"
	"	struct weft_pcr_pos *pp;\n"
	"	if (!weft_pid_ok())\n"
	"		return 0;\n"
	"	if (WEFT_TP(ctx, 8, __s64) != WL_NR)\n"
	"		return 0;\n"
	"	struct rec0 *r = weft_pcr_reserve(sizeof(struct rec0), PROBE, e, &s, &pp);\n"
	"	if (!r)\n"
	"		return 0;\n"
	"	r->tid = weft_tid();\n"
	"	r->seq = WEFT_TP(ctx, 16, __u64);\n"
	"	r->thread = WEFT_TP(ctx, 24, __u64);\n"
	"	WEFT_PCR_SUBMIT(r, bpf_map_lookup_elem(&weft_cost, &(__u32){ 0 }), s, pp);\n"
	"	return 0;\n"
	"}\n";

struct rec0 {
	struct weft_rec_hdr h;
	__u32 tid;
	__u32 thread;
	__u64 seq;
};

struct rx {
	unsigned char *seen[N_THREADS]; /* one byte per (thread, seq) */
	__u64 received;
	__u64 bad, dup;
};

static int on_row(void *ctx, void *data, size_t size)
{
	struct rx *rx = ctx;
	const struct rec0 *r = data;

	if (size != sizeof(*r) || r->h.len != sizeof(*r) || r->h.probe != PROBE_INDEX ||
	    r->h.epoch > 1 || r->thread >= N_THREADS || r->seq >= N_CALLS / N_THREADS) {
		rx->bad++;
		return 0;
	}
	if (rx->seen[r->thread][r->seq]++)
		rx->dup++;
	rx->received++;
	return 0;
}

struct setup_arg {
	pid_t pid;
	__u32 ring_bytes;
	__u32 pcr_bytes; /* the CPUs' rings, a CPU (pcr_src) */
};

static int setup(struct bpf_object *obj, void *arg)
{
	struct setup_arg *a = arg;
	int err = rt_set_target(obj, a->pid);

	if (!err)
		err = bpfrt_map_resize(obj, "weft_events", a->ring_bytes);
	if (!err && a->pcr_bytes)
		err = bpfrt_pcr_size(obj, a->pcr_bytes);
	return err;
}

/* reader: 0 the caller reads the ring; else bpfrt's reader thread with a queue of at most
 * queue_max bytes (0: the default), and the caller polls only once the workload has ended;
 * pcr_bytes: 0 the shared ring, else the CPUs' own rings of about that many bytes each */
static void run_stream_p(__u32 ring_bytes, __u32 pcr_bytes, bool reader, size_t queue_max,
			 __u64 *received, __u64 *dropped, __u64 *missing, __u64 *at_first_poll)
{
	struct rt_prog p = { 0 };
	struct rx rx = { 0 };
	uint64_t drops[WEFT_DROP_NR] = { 0 };
	struct setup_arg arg = { .ring_bytes = ring_bytes, .pcr_bytes = pcr_bytes };
	struct rt_wl wl = { .pid = -1, .go_fd = -1 };
	char obj[PATH_MAX], src[sizeof(pcr_src) + 64];
	int running, n;

	for (unsigned long k = 0; k < N_THREADS; k++) {
		rx.seen[k] = calloc(N_CALLS / N_THREADS, 1);
		assert_non_null(rx.seen[k]);
	}
	snprintf(src, sizeof(src), "#define WL_NR %d\n#define PROBE %d\n%s", (int)SYS_getppid,
		 PROBE_INDEX, pcr_bytes ? pcr_src : prog_src);
	assert_int_equal(rt_compile(&p, pcr_bytes ? "pcr" : "stream", src, obj, sizeof(obj)), 0);
	assert_int_equal(rt_wl_start(&wl, N_CALLS, N_THREADS), 0);
	arg.pid = wl.pid;
	assert_int_equal(rt_load(&p, obj, setup, &arg, NULL), 0);
	assert_int_equal(bpfrt_stream_open(p.rt, on_row, &rx), 0);
	if (reader)
		assert_int_equal(bpfrt_stream_reader_start(p.rt, queue_max), 0);
	assert_int_equal(rt_wl_go(&wl), 0);
	do {
		running = rt_wl_poll(&wl, reader ? 10 : 0);
		if (!reader) /* with the reader, the caller is away: only the thread reads */
			assert_true(bpfrt_stream_poll(p.rt, 1) >= 0);
		assert_int_equal(bpfrt_window_flip(p.rt), 0);
		assert_int_equal(bpfrt_drops_read(p.rt, drops), 0);
	} while (running == 1);
	assert_int_equal(running, 0);
	if (reader) { /* nothing reaches the callback outside a poll */
		assert_int_equal(rx.received, 0);
		/* one poll without waiting: everything committed before it, whatever the
		 * thread had read so far (bpfrt_stream_poll() syncs with the thread) */
		assert_true(bpfrt_stream_poll(p.rt, 0) >= 0);
		*at_first_poll = rx.received;
		bpfrt_stream_reader_stop(p.rt); /* the polls below read the ring themselves */
	}
	assert_int_equal(bpfrt_window_flip(p.rt), 0);
	assert_int_equal(bpfrt_drops_read(p.rt, drops), 0);
	do
		n = bpfrt_stream_poll(p.rt, 0);
	while (n > 0);
	assert_int_equal(n, 0);
	assert_int_equal(bpfrt_drops_read(p.rt, drops), 0); /* the queue's last losses */

	*missing = 0;
	for (unsigned long k = 0; k < N_THREADS; k++) {
		for (unsigned long i = 0; i < N_CALLS / N_THREADS; i++)
			*missing += !rx.seen[k][i];
		free(rx.seen[k]);
	}
	printf("# ring %u bytes%s%s: %llu received, %llu dropped\n", ring_bytes,
	       pcr_bytes ? ", rings of the CPUs' own" : "", reader ? ", read by a thread" : "",
	       (unsigned long long)rx.received, (unsigned long long)drops[WEFT_DROP_RINGBUF_FULL]);
	assert_int_equal(rx.bad, 0);
	assert_int_equal(rx.dup, 0);
	for (int r = 0; r < WEFT_DROP_NR; r++)
		if (r != WEFT_DROP_RINGBUF_FULL)
			assert_int_equal(drops[r], 0);
	*received = rx.received;
	*dropped = drops[WEFT_DROP_RINGBUF_FULL];
	rt_unload(&p);
}

static void run_stream_r(__u32 ring_bytes, bool reader, size_t queue_max, __u64 *received,
			 __u64 *dropped, __u64 *missing, __u64 *at_first_poll)
{
	run_stream_p(ring_bytes, 0, reader, queue_max, received, dropped, missing, at_first_poll);
}

static void run_stream(__u32 ring_bytes, __u64 *received, __u64 *dropped, __u64 *missing)
{
	__u64 first;

	run_stream_r(ring_bytes, false, 0, received, dropped, missing, &first);
}

static void test_stream_large_ring_loses_nothing(void **state)
{
	__u64 received, dropped, missing;

	(void)state;
	/* 32-byte records (+8 bytes of ring header each): 16 MiB holds all of them */
	run_stream(16u << 20, &received, &dropped, &missing);
	assert_int_equal(received, N_CALLS);
	assert_int_equal(dropped, 0);
	assert_int_equal(missing, 0);
}

static void test_stream_small_ring_counts_drops(void **state)
{
	__u64 received, dropped, missing;

	(void)state;
	run_stream(4096, &received, &dropped, &missing);
	assert_true(dropped > 0);
	assert_true(received > 0);
	assert_int_equal(received + dropped, N_CALLS);
	assert_int_equal(missing, dropped);
}

/* 40 bytes a row in the ring (32 + its 8-byte header) */
#define RING_ROWS(bytes) ((bytes) / 40)

static void test_stream_reader_reads_while_caller_away(void **state)
{
	__u64 received, dropped, missing;

	(void)state;
	__u64 first;

	run_stream_r(64u << 10, true, 0, &received, &dropped, &missing, &first);
	/* without the thread at most a ring's worth could arrive: the caller never polled
	 * while the workload ran (the thread's share of the CPU decides the rest: counted) */
	assert_true(received > RING_ROWS(64u << 10));
	assert_int_equal(received + dropped, N_CALLS);
	assert_int_equal(missing, dropped);
}

static void test_stream_reader_queue_bound_counts(void **state)
{
	__u64 received, dropped, missing;

	(void)state;
	/* one 256 KiB chunk of queue (6,553 rows of 40 bytes) and a 64 KiB ring: of 200,000
	 * rows at most ~8,200 fit while the caller is away; the rest are counted */
	__u64 first;

	run_stream_r(64u << 10, true, 256u << 10, &received, &dropped, &missing, &first);
	assert_true(received > 0);
	/* ring and queue together hold at most 320 KiB of 40-byte rows */
	assert_true(received <= RING_ROWS((64u << 10) + (256u << 10)) + 1);
	assert_true(dropped > 0);
	assert_int_equal(received + dropped, N_CALLS);
	assert_int_equal(missing, dropped);
}

/* A ring that holds every row, read by the thread: the caller's first poll after the workload
 * gets all of them, exactly, and nothing is lost. */
static void test_stream_reader_first_poll_has_all(void **state)
{
	__u64 received, dropped, missing, first;

	(void)state;
	run_stream_r(16u << 20, true, 0, &received, &dropped, &missing, &first);
	assert_int_equal(first, N_CALLS);
	assert_int_equal(received, N_CALLS);
	assert_int_equal(dropped, 0);
	assert_int_equal(missing, 0);
}

/*
 * The rings of each CPU's own (bpfrt_pcr_size(): 16 MiB a CPU, at most 64 MiB in all, gives
 * 65,536 slots of 160 bytes a CPU): the caller polling every millisecond gets every row once.
 */
static void test_pcr_large_loses_nothing(void **state)
{
	__u64 received, dropped, missing, first;

	(void)state;
	run_stream_p(64u << 10, 16u << 20, false, 0, &received, &dropped, &missing, &first);
	assert_int_equal(received, N_CALLS);
	assert_int_equal(dropped, 0);
	assert_int_equal(missing, 0);
}

/* Read by bpfrt's thread: the caller's first poll after the workload has every row. */
static void test_pcr_reader_first_poll_has_all(void **state)
{
	__u64 received, dropped, missing, first;

	(void)state;
	run_stream_p(64u << 10, 16u << 20, true, 0, &received, &dropped, &missing, &first);
	assert_int_equal(first, N_CALLS);
	assert_int_equal(received, N_CALLS);
	assert_int_equal(dropped, 0);
	assert_int_equal(missing, 0);
}

static const char lazy_src[] =
	"#define WEFT_WANT_RINGBUF\n"
	"#include \"weft.bpf.h\"\n"
	"\n"
	"struct rec1 { struct weft_rec_hdr h; __u64 n[7]; };\n"
	"struct {\n"
	"	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);\n"
	"	__uint(max_entries, 1);\n"
	"	__type(key, __u32);\n"
	"	__type(value, struct weft_cost);\n"
	"} weft_cost SEC(\".maps\");\n"
	"\n"
	"SEC(\"tp/raw_syscalls/sys_enter\")\n"
	"int p_lazy(void *ctx)\n"
	"{\n"
	"	__u32 e = weft_epoch();\n"
	"	if (!weft_pid_ok() || WEFT_TP(ctx, 8, __s64) != WL_NR)\n"
	"		return 0;\n"
	"	struct rec1 *r = WEFT_REC_RESERVE(struct rec1, 0, e);\n"
	"	if (!r)\n"
	"		return 0;\n"
	"	r->n[0] = 1;\n"
	"	WEFT_REC_SUBMIT_LAZY(r, bpf_map_lookup_elem(&weft_cost, &(__u32){ 0 }));\n"
	"	return 0;\n"
	"}\n";

#define LAZY_RING (64u << 10)
#define LAZY_REC 72u /* 64 bytes and the ring's 8-byte header */
#define LAZY_CALLS 900 /* fewer than the 910 records the ring holds */
/* the first record over the quarter (228), and the first of those that looks at the ring:
 * records 1, 9, 17, ... of the CPU look (WEFT_WAKE_CHECK), so 233 */
#define LAZY_OVER (LAZY_RING / 4 / LAZY_REC + 1)
#define LAZY_FIRST ((LAZY_OVER - 1 + 7) / 8 * 8 + 1)

/* Pin this thread to the CPU it is on (the wakeup counters are per CPU), or unpin it. */
static void pin_here(bool on)
{
	cpu_set_t cpus;

	CPU_ZERO(&cpus);
	if (on)
		CPU_SET(sched_getcpu(), &cpus);
	else
		for (int c = 0; c < CPU_SETSIZE; c++)
			CPU_SET(c, &cpus);
	assert_int_equal(sched_setaffinity(0, sizeof(cpus), &cpus), 0);
}

/* An edge-triggered epoll of the program's shared ring: readable once per wakeup. */
static int ring_epoll(struct rt_prog *p)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLET };
	int ep = epoll_create1(EPOLL_CLOEXEC);

	assert_true(ep >= 0);
	assert_int_equal(epoll_ctl(ep, EPOLL_CTL_ADD,
				   bpf_map__fd(bpf_object__find_map_by_name(p->obj, "weft_events")),
				   &ev),
			 0);
	return ep;
}

/*
 * n getppid(from + k - 1) calls, k = 1..n, each followed by a look at the epoll: the number of
 * wakeups; *first is the k of the first, and *bad counts the calls whose wakeup (or none)
 * was not the rule's: one at the first look over the quarter (call `wake_from`), then one
 * every 64 calls up to call `last`.
 */
static unsigned wake_calls(int ep, unsigned from, unsigned n, unsigned wake_from, unsigned last,
			   unsigned *first, unsigned *bad)
{
	struct epoll_event ev;
	unsigned nwake = 0;

	for (unsigned k = 1; k <= n; k++) {
		bool want = k >= wake_from && k <= last && (k - wake_from) % 64 == 0;
		int got;

		syscall(SYS_getppid, (long)(from + k - 1), 0L);
		got = epoll_wait(ep, &ev, 1, 0);
		assert_true(got >= 0);
		if (got && !*first)
			*first = k;
		nwake += (unsigned)got;
		*bad += (got != 0) != want;
	}
	return nwake;
}

/*
 * This thread, pinned to one CPU (the wakeup counter is per CPU), writes one record with
 * each getppid(); after each, an edge-triggered epoll of the ring says whether that record
 * woke its reader (the wakeup runs as an irq_work, an interrupt taken before the system
 * call returns).  Until 2026-11-28 every record over the quarter woke it (673 here): on a
 * busy traced program a storm of interrupts until the reader caught up.  The counters are
 * the CPU's, zero at load, and only this thread's getppid() records go through them.
 */
static void test_stream_lazy_wakeups(void **state)
{
	struct rt_prog p = { 0 };
	struct setup_arg arg = { .ring_bytes = LAZY_RING, .pid = getpid() };
	char obj[PATH_MAX], src[sizeof(lazy_src) + 64];
	unsigned first = 0, nwake, bad = 0;
	int ep;

	(void)state;
	pin_here(true);
	snprintf(src, sizeof(src), "#define WL_NR %d\n%s", (int)SYS_getppid, lazy_src);
	assert_int_equal(rt_compile(&p, "lazy", src, obj, sizeof(obj)), 0);
	assert_int_equal(rt_load(&p, obj, setup, &arg, NULL), 0);
	ep = ring_epoll(&p);
	/* the first look that finds more than a quarter waiting (the ring holds k records
	 * then), and every 64th record after it */
	nwake = wake_calls(ep, 0, LAZY_CALLS, LAZY_FIRST, LAZY_CALLS, &first, &bad);
	printf("# %u records: %u wakeups, the first at record %u\n", LAZY_CALLS, nwake, first);
	assert_int_equal(first, 233);
	assert_int_equal(first, LAZY_FIRST);
	assert_int_equal(nwake, (LAZY_CALLS - first) / 64 + 1); /* 11 */
	assert_int_equal(bad, 0);
	close(ep);
	rt_unload(&p);
	pin_here(false);
}

/*
 * The smallest rings (BPFRT_PCR_MIN_SLOTS, 256 slots a CPU) and nobody reading: this thread,
 * pinned, writes one row with each getppid(k) and checks after each whether it woke the
 * reader (an edge-triggered epoll of the shared ring, where the wakeup is a discarded record).
 * The rule is the shared ring's: a look every 8th record of the CPU, a wakeup at the first
 * look that finds more than a quarter (64) waiting and every 8th look after; so records 65,
 * 129 and 193.  Records 257 to 300 find the ring full and are counted, not written; one read
 * gets rows 0 to 255, once each, in order, and frees the slots: the next 100 rows arrive
 * whole, with one wakeup at the 65th of them.
 */
#define PCR_SLOTS BPFRT_PCR_MIN_SLOTS
#define PCR_CALLS 300u

struct pcr_rx {
	__u64 next, received, bad;
};

static int on_pcr_row(void *ctx, void *data, size_t size)
{
	struct pcr_rx *rx = ctx;
	const struct rec0 *r = data;

	if (size != sizeof(*r) || r->h.len != sizeof(*r) || r->h.probe != PROBE_INDEX ||
	    r->seq != rx->next) {
		rx->bad++;
		return 0;
	}
	rx->next++;
	rx->received++;
	return 0;
}

static void test_pcr_wakeups_and_full(void **state)
{
	struct rt_prog p = { 0 };
	struct setup_arg arg = { .ring_bytes = 64u << 10, .pcr_bytes = 1, .pid = getpid() };
	uint64_t drops[WEFT_DROP_NR] = { 0 };
	char obj[PATH_MAX], src[sizeof(pcr_src) + 64];
	struct pcr_rx rx = { 0 };
	unsigned first = 0, bad = 0, nwake;
	int ep;

	(void)state;
	pin_here(true);
	snprintf(src, sizeof(src), "#define WL_NR %d\n#define PROBE %d\n%s", (int)SYS_getppid,
		 PROBE_INDEX, pcr_src);
	assert_int_equal(rt_compile(&p, "pcrwake", src, obj, sizeof(obj)), 0);
	assert_int_equal(rt_load(&p, obj, setup, &arg, NULL), 0);
	assert_int_equal(bpf_map__max_entries(bpf_object__find_map_by_name(p.obj, "weft_pcr")),
			 PCR_SLOTS * bpfrt_ncpu(p.rt));
	ep = ring_epoll(&p);
	nwake = wake_calls(ep, 0, PCR_CALLS, PCR_SLOTS / 4 + 1, PCR_SLOTS, &first, &bad);
	printf("# %u rows into %u slots: %u wakeups, the first at row %u\n", PCR_CALLS, PCR_SLOTS,
	       nwake, first);
	assert_int_equal(first, 65);
	assert_int_equal(nwake, 3);
	assert_int_equal(bad, 0);
	assert_int_equal(bpfrt_stream_open(p.rt, on_pcr_row, &rx), 0);
	assert_int_equal(bpfrt_stream_poll(p.rt, 0), PCR_SLOTS);
	assert_int_equal(rx.received, PCR_SLOTS);
	assert_int_equal(rx.bad, 0);
	assert_int_equal(bpfrt_window_flip(p.rt), 0);
	assert_int_equal(bpfrt_drops_read(p.rt, drops), 0);
	assert_int_equal(bpfrt_window_flip(p.rt), 0);
	assert_int_equal(bpfrt_drops_read(p.rt, drops), 0);
	assert_int_equal(drops[WEFT_DROP_RINGBUF_FULL], PCR_CALLS - PCR_SLOTS);
	/* the slots are free again: rows from 256 on (the seq the reader expects next) */
	first = 0;
	nwake = wake_calls(ep, PCR_SLOTS, 100, PCR_SLOTS / 4 + 1, PCR_SLOTS, &first, &bad);
	assert_int_equal(first, 65);
	assert_int_equal(nwake, 1);
	assert_int_equal(bad, 0);
	assert_int_equal(bpfrt_stream_poll(p.rt, 0), 100);
	assert_int_equal(rx.received, PCR_SLOTS + 100);
	assert_int_equal(rx.bad, 0);
	close(ep);
	rt_unload(&p);
	pin_here(false);
}

/*
 * A program that interrupts another one writing to its CPU's ring (kernel/weft.bpf.h: `busy`)
 * writes to the shared ring instead, and nothing is lost or torn.  Program A, on getppid(),
 * holds its slot for a while (a bounded loop of clock reads between reservation and commit);
 * program B, a raw tracepoint on hrtimer_expire_entry, runs from the timer interrupt (250 Hz
 * here), some of the time inside A's window on the same CPU.  Every row of A arrives once,
 * every row of B that was not counted lost arrives once, and some of B's went to the shared
 * ring (the counter `nested`): the path was taken.
 */
static const char nest_src[] =
	"#define WEFT_WANT_RINGBUF\n"
	"#define WEFT_WANT_PCR\n"
	"#include \"weft.bpf.h\"\n"
	"\n"
	"struct rec0 { struct weft_rec_hdr h; __u32 tid; __u32 thread; __u64 seq; };\n"
	"struct {\n"
	"	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);\n"
	"	__uint(max_entries, 2);\n"
	"	__type(key, __u32);\n"
	"	__type(value, struct weft_cost);\n"
	"} weft_cost SEC(\".maps\");\n"
	"struct {\n"
	"	__uint(type, BPF_MAP_TYPE_ARRAY);\n"
	"	__uint(max_entries, 2);\n"
	"	__type(key, __u32);\n"
	"	__type(value, __u64);\n"
	"} nest_counts SEC(\".maps\");\n"
	"\n"
	"SEC(\"tp/raw_syscalls/sys_enter\")\n"
	"int p_a(void *ctx)\n"
	"{\n"
	"	__u32 e = weft_epoch();\n"
	"	struct weft_pcr_slot *s;\n"
	"	struct weft_pcr_pos *pp;\n"
	"	if (!weft_pid_ok() || WEFT_TP(ctx, 8, __s64) != WL_NR)\n"
	"		return 0;\n"
	"	struct rec0 *r = weft_pcr_reserve(sizeof(struct rec0), 0, e, &s, &pp);\n"
	"	if (!r)\n"
	"		return 0;\n"
	"	r->tid = weft_tid();\n"
	"	r->thread = 0;\n"
	"	r->seq = WEFT_TP(ctx, 16, __u64);\n"
	"	for (int i = 0; i < 1000; i++)\n"
	"		if (bpf_ktime_get_ns() == 1)\n"
	"			break;\n"
	"	WEFT_PCR_SUBMIT(r, bpf_map_lookup_elem(&weft_cost, &(__u32){ 0 }), s, pp);\n"
	"	return 0;\n"
	"}\n"
	"\n"
	"SEC(\"raw_tp/hrtimer_expire_entry\")\n"
	"int p_b(void *ctx)\n"
	"{\n"
	"	__u32 e = weft_epoch();\n"
	"	struct weft_pcr_slot *s;\n"
	"	struct weft_pcr_pos *pp;\n"
	"	__u64 *fired = bpf_map_lookup_elem(&nest_counts, &(__u32){ 0 });\n"
	"	__u64 *nested = bpf_map_lookup_elem(&nest_counts, &(__u32){ 1 });\n"
	"	if (!fired || !nested)\n"
	"		return 0;\n"
	"	struct rec0 *r = weft_pcr_reserve(sizeof(struct rec0), 1, e, &s, &pp);\n"
	"	if (!r)\n"
	"		return 0;\n"
	"	r->tid = 0;\n"
	"	r->thread = 1;\n"
	"	r->seq = __sync_fetch_and_add(fired, 1);\n"
	"	if (!s)\n"
	"		__sync_fetch_and_add(nested, 1);\n"
	"	WEFT_PCR_SUBMIT(r, bpf_map_lookup_elem(&weft_cost, &(__u32){ 1 }), s, pp);\n"
	"	return 0;\n"
	"}\n";

#define NEST_CALLS 20000u
#define NEST_B_MAX (1u << 20)

struct nest_rx {
	unsigned char *a, *b; /* one byte per row */
	__u64 na, nb, bad, dup;
};

static int on_nest_row(void *ctx, void *data, size_t size)
{
	struct nest_rx *rx = ctx;
	const struct rec0 *r = data;
	unsigned char *seen;

	if (size != sizeof(*r) || r->h.len != sizeof(*r) || r->h.probe != r->thread ||
	    r->thread > 1 || r->seq >= (r->thread ? NEST_B_MAX : NEST_CALLS)) {
		rx->bad++;
		return 0;
	}
	seen = r->thread ? &rx->b[r->seq] : &rx->a[r->seq];
	if ((*seen)++)
		rx->dup++;
	*(r->thread ? &rx->nb : &rx->na) += 1;
	return 0;
}

static void test_pcr_nested_program_uses_shared_ring(void **state)
{
	struct rt_prog p = { 0 };
	struct setup_arg arg = { .ring_bytes = 16u << 20, .pcr_bytes = 16u << 20, .pid = getpid() };
	uint64_t drops[WEFT_DROP_NR] = { 0 };
	char obj[PATH_MAX], src[sizeof(nest_src) + 64];
	struct nest_rx rx = { 0 };
	__u64 fired = 0, nested = 0;
	int fd, n;

	(void)state;
	rx.a = calloc(NEST_CALLS, 1);
	rx.b = calloc(NEST_B_MAX, 1);
	assert_non_null(rx.a);
	assert_non_null(rx.b);
	snprintf(src, sizeof(src), "#define WL_NR %d\n%s", (int)SYS_getppid, nest_src);
	assert_int_equal(rt_compile(&p, "pcrnest", src, obj, sizeof(obj)), 0);
	assert_int_equal(rt_load(&p, obj, setup, &arg, NULL), 0);
	assert_int_equal(bpfrt_stream_open(p.rt, on_nest_row, &rx), 0);
	for (unsigned k = 0; k < NEST_CALLS; k++) {
		syscall(SYS_getppid, (long)k, 0L);
		if (k % 1000 == 999)
			assert_true(bpfrt_stream_poll(p.rt, 0) >= 0);
	}
	rt_detach(&p);
	do
		n = bpfrt_stream_poll(p.rt, 0);
	while (n > 0);
	assert_int_equal(n, 0);
	for (int w = 0; w < 2; w++) {
		assert_int_equal(bpfrt_window_flip(p.rt), 0);
		assert_int_equal(bpfrt_drops_read(p.rt, drops), 0);
	}
	fd = bpf_map__fd(bpf_object__find_map_by_name(p.obj, "nest_counts"));
	assert_int_equal(bpf_map_lookup_elem(fd, &(__u32){ 0 }, &fired), 0);
	assert_int_equal(bpf_map_lookup_elem(fd, &(__u32){ 1 }, &nested), 0);
	printf("# %u rows of A, %llu of B (%llu of them in the shared ring, inside A), %llu "
	       "lost\n",
	       NEST_CALLS, (unsigned long long)fired, (unsigned long long)nested,
	       (unsigned long long)drops[WEFT_DROP_RINGBUF_FULL]);
	assert_int_equal(rx.bad, 0);
	assert_int_equal(rx.dup, 0);
	assert_int_equal(drops[WEFT_DROP_RINGBUF_FULL], 0);
	assert_int_equal(rx.na, NEST_CALLS);
	assert_int_equal(rx.nb, fired);
	for (unsigned k = 0; k < NEST_CALLS; k++)
		assert_int_equal(rx.a[k], 1);
	assert_true(fired > 0 && fired < NEST_B_MAX);
	assert_true(nested > 0);
	free(rx.a);
	free(rx.b);
	rt_unload(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_stream_large_ring_loses_nothing),
		cmocka_unit_test(test_stream_small_ring_counts_drops),
		cmocka_unit_test(test_stream_reader_reads_while_caller_away),
		cmocka_unit_test(test_stream_reader_queue_bound_counts),
		cmocka_unit_test(test_stream_reader_first_poll_has_all),
		cmocka_unit_test(test_stream_lazy_wakeups),
		cmocka_unit_test(test_pcr_large_loses_nothing),
		cmocka_unit_test(test_pcr_reader_first_poll_has_all),
		cmocka_unit_test(test_pcr_wakeups_and_full),
		cmocka_unit_test(test_pcr_nested_program_uses_shared_ring),
	};

	if (!wt_root("it loads and attaches BPF programs"))
		return WT_SKIP;
	return wt_status(cmocka_run_group_tests(tests, NULL, NULL));
}
