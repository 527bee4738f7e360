// SPDX-License-Identifier: Apache-2.0
/*
 * The loader of tools/bench/kparts.sh: loads a BPF object (a kparts.bpf.c variant, or weft's
 * generated kernel:sockets program compiled by the script), sizes its ring buffer RING to
 * 2 MiB as a graph query's, attaches every program, and empties the ring as weft's reader
 * thread does: whenever woken, and every 50 ms whether woken or not.  Prints "kparts:
 * attached" on stderr once attached, and the records it read on SIGINT.
 *
 * A variant 11 or 21 object (a ring per CPU of kparts.bpf.c's own: maps kp_pcring and
 * kp_pchead) is read the same way, every 50 ms: each CPU's records from where the last read
 * stopped to its head, each record's words read as a reader would, through the maps' mmap,
 * and the CPU's tail written after.  weft's generated program has such rings too (weft_pcr,
 * weft_pcr_pos: the same layout of head and tail), sized here as those (PC_CPUS x PC_SLOTS)
 * with the rodata weft_pcr_slots set to match (bpfrt_rodata_set(), as weft's loader sets it),
 * and read the same way.
 *
 * Usage: kparts OBJ RING   (KPARTS_RING=BYTES: another ring size, a power of 2 of at least
 *                          a page)
 */
#include <errno.h>
#include <stdbool.h>
#include <signal.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <bpf/libbpf.h>
#include "agent/bpfrt.h"

static volatile sig_atomic_t stop;
static unsigned long long nrec;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

/* variant 11: the per-CPU rings (kparts.bpf.c's KP_PC_SLOTS, KP_PC_CPUS, struct kp_pchead) */
#define PC_SLOTS 16384
#define PC_CPUS 64
static volatile const unsigned char *pc_ring;
static volatile unsigned long long *pc_head;
static size_t pc_rec;
static unsigned long long pc_tail[PC_CPUS], pc_sum;

static void *map_mmap(struct bpf_map *m)
{
	size_t len = (size_t)bpf_map__value_size(m) * bpf_map__max_entries(m);
	long pg = sysconf(_SC_PAGESIZE);
	void *p;

	len = (len + (size_t)pg - 1) / (size_t)pg * (size_t)pg;
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, bpf_map__fd(m), 0);
	return p == MAP_FAILED ? NULL : p;
}

static void pc_read(void)
{
	for (int c = 0; c < PC_CPUS; c++) {
		unsigned long long head = pc_head[c * 8]; /* 64 bytes a CPU */

		if (head - pc_tail[c] > PC_SLOTS) /* overwritten before read */
			pc_tail[c] = head - PC_SLOTS;
		for (; pc_tail[c] < head; pc_tail[c]++) {
			const volatile unsigned long long *w =
				(const volatile unsigned long long *)(pc_ring +
								      ((size_t)c * PC_SLOTS +
								       (pc_tail[c] &
									(PC_SLOTS - 1))) *
									      pc_rec);

			for (size_t k = 0; k < pc_rec / 8; k++)
				pc_sum += w[k];
			nrec++;
		}
		pc_head[c * 8 + 1] =
			pc_tail[c]; /* read: a program that checks it may write again */
	}
}

static int on_rec(void *ctx, void *data, size_t size)
{
	(void)ctx;
	(void)data;
	(void)size;
	nrec++;
	return 0;
}

int main(int argc, char **argv)
{
	struct bpf_object *obj;
	struct bpf_program *prog;
	struct bpf_map *ring;
	struct ring_buffer *rb;
	unsigned long ring_bytes = 2ul << 20;

	if (argc != 3) {
		fprintf(stderr, "usage: kparts OBJ RING\n");
		return 2;
	}
	obj = bpf_object__open_file(argv[1], NULL);
	if (!obj) {
		fprintf(stderr, "kparts: %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	if (getenv("KPARTS_RING"))
		ring_bytes = strtoul(getenv("KPARTS_RING"), NULL, 0);
	ring = bpf_object__find_map_by_name(obj, argv[2]);
	if (bpf_object__find_map_by_name(obj, "weft_pcr") &&
	    (bpf_map__set_max_entries(bpf_object__find_map_by_name(obj, "weft_pcr"),
				      PC_CPUS * PC_SLOTS) ||
	     bpf_map__set_max_entries(bpf_object__find_map_by_name(obj, "weft_pcr_pos"), PC_CPUS) ||
	     bpfrt_rodata_set(obj, WEFT_PCR_SLOTS_VAR, &(unsigned int){ PC_SLOTS },
			      sizeof(unsigned int)))) {
		fprintf(stderr, "kparts: cannot size weft's per-CPU rings\n");
		return 1;
	}
	if (!ring || bpf_map__set_max_entries(ring, ring_bytes) || bpf_object__load(obj)) {
		fprintf(stderr, "kparts: cannot load %s (ring %s)\n", argv[1], argv[2]);
		return 1;
	}
	bpf_object__for_each_program(prog, obj)
	{
		if (!bpf_program__attach(prog)) {
			fprintf(stderr, "kparts: attach %s: %s\n", bpf_program__name(prog),
				strerror(errno));
			return 1;
		}
	}
	if (bpf_object__find_map_by_name(obj, "kp_pchead") ||
	    bpf_object__find_map_by_name(obj, "weft_pcr")) {
		bool weft = bpf_object__find_map_by_name(obj, "weft_pcr") != NULL;
		struct bpf_map *rm =
			bpf_object__find_map_by_name(obj, weft ? "weft_pcr" : "kp_pcring");
		struct bpf_map *hm =
			bpf_object__find_map_by_name(obj, weft ? "weft_pcr_pos" : "kp_pchead");

		pc_rec = bpf_map__value_size(rm);
		pc_ring = map_mmap(rm);
		pc_head = map_mmap(hm);
		if (!pc_ring || !pc_head || bpf_map__max_entries(hm) != PC_CPUS) {
			fprintf(stderr, "kparts: cannot map the per-CPU rings: %s\n",
				strerror(errno));
			return 1;
		}
	}
	rb = ring_buffer__new(bpf_map__fd(ring), on_rec, NULL, NULL);
	if (!rb) {
		fprintf(stderr, "kparts: ring: %s\n", strerror(errno));
		return 1;
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	fprintf(stderr, "kparts: attached\n");
	while (!stop) {
		ring_buffer__poll(rb, 50);
		ring_buffer__consume(rb); /* what the poll did not wake for */
		if (pc_ring)
			pc_read();
	}
	ring_buffer__consume(rb);
	if (pc_ring)
		pc_read();
	printf("%llu\n", nrec);
	ring_buffer__free(rb);
	bpf_object__close(obj);
	return 0;
}
