// SPDX-License-Identifier: Apache-2.0
/*
 * libFuzzer target: the VM analysis (vm/vm.h) of arbitrary bytes as recorded streams.  The
 * input is a host stream, optionally followed by "\n--guest--\n" and a guest stream (taken
 * as synchronised when it has no points).  Every input is either refused with a tag or
 * analysed; what is analysed must hold together, else abort():
 *   - each vCPU's intervals are sorted, do not overlap, tile [first_ns, last_ns) exactly,
 *     and its state times sum to last_ns - first_ns;
 *   - each guest thread's intervals are sorted and do not overlap, and its state times sum
 *     to their lengths (and its host times to its "host" state's);
 *   - exit counts add up to the vCPUs' exits; both reports are written without error;
 *   - with guest threads, the fused view as a graph passes graph_check().
 * Seeds: tests/fuzz/corpus/vm_stream/ (tests/data/vm's streams, joined, and near misses).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "vm/vm.h"

#define SEP "\n--guest--\n"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const struct vm_analysis *a)
{
	uint64_t exits = 0, counted = 0;

	for (size_t i = 0; i < a->nvcpus; i++) {
		const struct vm_vcpu *v = &a->vcpus[i];
		int64_t at = v->first_ns, sum = 0;

		for (size_t k = 0; k < v->niv; k++) {
			if (v->iv[k].start != at || v->iv[k].end <= v->iv[k].start)
				abort();
			at = v->iv[k].end;
		}
		if (v->niv && at != v->last_ns)
			abort();
		for (int s = 0; s < VM_NSTATES; s++) {
			if (v->state_ns[s] < 0)
				abort();
			sum += v->state_ns[s];
		}
		if (sum != v->last_ns - v->first_ns)
			abort();
		exits += v->exits;
	}
	for (size_t i = 0; i < a->nexits; i++)
		counted += a->exits[i].count;
	if (counted != exits)
		abort();
	for (size_t i = 0; i < a->nthreads; i++) {
		const struct vm_gthread *g = &a->threads[i];
		int64_t at = INT64_MIN, len = 0, sum = 0, host = 0;

		for (size_t k = 0; k < g->niv; k++) {
			if (g->iv[k].start < at || g->iv[k].end <= g->iv[k].start)
				abort();
			at = g->iv[k].end;
			len += g->iv[k].end - g->iv[k].start;
		}
		for (int s = 0; s < VM_G_NSTATES; s++)
			sum += g->state_ns[s];
		for (int s = 0; s < VM_NSTATES; s++)
			host += g->host_ns[s];
		if (sum != len || host != g->state_ns[VM_G_HOST])
			abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *buf = (const char *)data, *sep = memmem(buf, size, SEP, strlen(SEP));
	size_t hlen = sep ? (size_t)(sep - buf) : size;
	struct vm_analysis a;
	struct vm_err err = { 0 };
	struct vm_stream *h, *g = NULL;
	struct vm_report_opts ro = { .sz = sizeof(ro), .intervals = true };
	int rc;

	vm_analysis_init(&a, 1u << 16);
	h = vm_stream_open_mem("host", buf, hlen, &err);
	if (!h)
		abort();
	rc = vm_host_pass(&a, h, &err);
	if (!rc && sep) {
		const char *gb = sep + strlen(SEP);

		g = vm_stream_open_mem("guest", gb, size - (size_t)(gb - buf), &err);
		if (!g)
			abort();
		rc = vm_sync_pass(&a, g, true, &err) || vm_stream_rewind(g, &err) ||
		     vm_guest_pass(&a, g, 0, &err);
	}
	if (rc && !err.tag)
		abort(); /* every refusal says why */
	if (!rc) {
		FILE *f = fopen("/dev/null", "w");

		check(&a);
		if (!f || vm_report_text(f, &a, &ro) || vm_report_json(f, &a, &ro))
			abort();
		fclose(f);
		if (a.nthreads) {
			struct graph gr;
			struct graph_id128 id;
			char why[256];

			graph_init(&gr);
			why[0] = 0;
			rc = vm_to_graph(&a, 0, &gr, &id, why, sizeof(why));
			/* refused for what the stream holds (no intervals, times out of range),
			 * saying why; never a graph that graph_check() refuses (-EINVAL) */
			if (rc && ((rc != -ENODATA && rc != -ERANGE) || !why[0]))
				abort();
			graph_free(&gr);
		}
	}
	vm_stream_close(h);
	vm_stream_close(g);
	vm_analysis_free(&a);
	return 0;
}
