// SPDX-License-Identifier: Apache-2.0
/*
 * The loader of tools/bench/kparts.sh: loads a BPF object (a kparts.bpf.c variant, or weft's
 * generated kernel:sockets program compiled by the script), sizes its ring buffer RING to
 * 2 MiB as a graph query's, attaches every program, and empties the ring as weft's reader
 * thread does: whenever woken, and every 50 ms whether woken or not.  Prints "kparts:
 * attached" on stderr once attached, and the records it read on SIGINT.
 *
 * Usage: kparts OBJ RING
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <bpf/libbpf.h>

static volatile sig_atomic_t stop;
static unsigned long long nrec;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
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

	if (argc != 3) {
		fprintf(stderr, "usage: kparts OBJ RING\n");
		return 2;
	}
	obj = bpf_object__open_file(argv[1], NULL);
	if (!obj) {
		fprintf(stderr, "kparts: %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	ring = bpf_object__find_map_by_name(obj, argv[2]);
	if (!ring || bpf_map__set_max_entries(ring, 2u << 20) || bpf_object__load(obj)) {
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
	}
	ring_buffer__consume(rb);
	printf("%llu\n", nrec);
	ring_buffer__free(rb);
	bpf_object__close(obj);
	return 0;
}
