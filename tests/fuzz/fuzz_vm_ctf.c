// SPDX-License-Identifier: Apache-2.0
/*
 * libFuzzer target: the VM analysis's LTTng CTF input (vm/ctf.c) on a kernel trace of one
 * stream file, written into a temporary directory, then the host pass over what it read.
 *   - An input that starts with "/" + "* CTF" is the metadata text, a NUL byte, then the
 *     stream's bytes: the field types are the fuzzer's too.  babeltrace2 crashes on some
 *     metadata, so these are read in the child process (vm_stream_open_ctf(..., true)), which
 *     must turn a crash into a refusal.
 *   - Any other input is the stream alone (packet header, packet context with cpu_id, events)
 *     under the fixed metadata of vm_ctf_fixture.h (lttng-modules' kvm_x86_* and sched events
 *     with the tid/pid context), read in this process so that coverage guides the fuzzer;
 *     LeakSanitizer is paused around babeltrace2 (it leaks the packet it was decoding when a
 *     stream fails inside an event).  Packet sizes babeltrace2 would assert on send the input
 *     to the reader process instead (packets_sane()).
 * What must hold besides not crashing: a refusal has a tag and names the directory; what is
 * read is a stream the host pass either refuses with a tag or analyses into vCPU intervals
 * that tile each vCPU's time exactly; no more kvm events are dropped than were read.
 *
 * Seeds: tests/fuzz/corpus/vm_ctf/, written by this target itself from tests/data/vm/host.jsonl:
 * WEFT_VM_CTF_SEEDS=DIR WEFT_SOURCE_DIR=. replay_fuzz_vm_ctf ANY writes them and exits.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/fuzz/vm_ctf_fixture.h"
#include "vm/vm.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);
void __lsan_disable(void) __attribute__((weak));
void __lsan_enable(void) __attribute__((weak));

static char fuzz_dir[64], kdir[128];

static void fuzz_cleanup(void)
{
	char path[256];

	snprintf(path, sizeof(path), "%s/metadata", kdir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/channel0_0", kdir);
	unlink(path);
	rmdir(kdir);
	rmdir(fuzz_dir);
}

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	long n;

	if (!f || fseek(f, 0, SEEK_END) || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) ||
	    !(buf = calloc(1, (size_t)n + 1)) || fread(buf, 1, (size_t)n, f) != (size_t)n) {
		perror(path);
		exit(1);
	}
	fclose(f);
	*len = (size_t)n;
	return buf;
}

static void put(const char *path, const void *a, size_t na, const void *b, size_t nb)
{
	FILE *f = fopen(path, "wb");

	if (!f || fwrite(a, 1, na, f) != na || (nb && fwrite(b, 1, nb, f) != nb) || fclose(f)) {
		perror(path);
		exit(1);
	}
}

static void write_seeds(const char *dir)
{
	const char *src = getenv("WEFT_SOURCE_DIR");
	char path[4096], tmp[] = "/tmp/weft-vm-ctf-seeds-XXXXXX", *text, *s, *meta;
	size_t len, slen;

	snprintf(path, sizeof(path), "%s/tests/data/vm/host.jsonl", src ? src : ".");
	text = slurp(path, &len);
	if (!mkdtemp(tmp) || vmctf_write(text, tmp, VMCTF_TID, NULL)) {
		fprintf(stderr, "cannot write the trace\n");
		exit(1);
	}
	for (int cpu = 0; cpu < 2; cpu++) {
		snprintf(path, sizeof(path), "%s/kernel/channel0_%d", tmp, cpu);
		s = slurp(path, &slen);
		snprintf(path, sizeof(path), "%s/cpu%d", dir, cpu);
		put(path, s, slen, NULL, 0);
		snprintf(path, sizeof(path), "%s/cpu%d_cut", dir, cpu);
		put(path, s, slen - 5, NULL, 0);
		if (cpu == 0) {
			meta = vmctf_metadata(false, VMCTF_TID);
			snprintf(path, sizeof(path), "%s/meta_cpu0", dir);
			put(path, meta, strlen(meta) + 1, s, slen);
			free(meta);
			meta = vmctf_metadata(false, VMCTF_NO_CPU);
			snprintf(path, sizeof(path), "%s/meta_nocpu", dir);
			put(path, meta, strlen(meta) + 1, s, slen);
			free(meta);
		}
		free(s);
	}
	snprintf(path, sizeof(path), "rm -rf '%s'", tmp);
	if (system(path) != 0)
		exit(1);
	free(text);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *seeds = getenv("WEFT_VM_CTF_SEEDS");

	(void)argc;
	(void)argv;
	if (seeds) {
		write_seeds(seeds);
		exit(0);
	}
	snprintf(fuzz_dir, sizeof(fuzz_dir), "/tmp/weft-fuzz-vmctf-XXXXXX");
	if (!mkdtemp(fuzz_dir)) {
		perror("mkdtemp");
		abort();
	}
	snprintf(kdir, sizeof(kdir), "%s/kernel", fuzz_dir);
	if (mkdir(kdir, 0755)) {
		perror(kdir);
		abort();
	}
	atexit(fuzz_cleanup);
	vm_ctf_set_stall_ms(2000); /* within libFuzzer's -timeout=10 */
	return 0;
}

/*
 * Whether babeltrace2 can decode the stream in this process: every packet's content_size and
 * packet_size (bits, at bytes 24 and 32 of the packet: vm_ctf_fixture.h's layout) sane and
 * the packets tiling the input.  babeltrace2 asserts (aborts) on sizes it cannot use (the
 * fuzzer found one: a size above 2^63); such inputs go to the reader process, as every input
 * of `weft vm analyze` does.
 */
static bool packets_sane(const uint8_t *d, size_t size)
{
	size_t p = 0;

	while (p < size) {
		uint64_t content = 0, packet = 0;

		if (size - p < VMCTF_HDR_LEN)
			return false;
		for (int i = 7; i >= 0; i--) {
			content = content << 8 | d[p + 24 + (size_t)i];
			packet = packet << 8 | d[p + 32 + (size_t)i];
		}
		if (packet == 0 || packet % 8 || content > packet || packet / 8 > size - p ||
		    content < VMCTF_HDR_LEN * 8)
			return false;
		p += packet / 8;
	}
	return true;
}

static void check(const struct vm_analysis *a)
{
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
		for (int s = 0; s < VM_NSTATES; s++)
			sum += v->state_ns[s];
		if (sum != v->last_ns - v->first_ns)
			abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct vm_ctf_stats st;
	struct vm_err err = { 0 };
	struct vm_stream *s;
	struct vm_analysis a;
	char path[256];
	bool with_meta;

	if (!fuzz_dir[0] || size > 1 << 20)
		return 0;
	with_meta = size >= 6 && memcmp(data, "/* CTF", 6) == 0;
	snprintf(path, sizeof(path), "%s/metadata", kdir);
	if (with_meta) {
		const uint8_t *nul = memchr(data, '\0', size);

		if (!nul)
			return 0;
		put(path, data, (size_t)(nul - data), NULL, 0);
		snprintf(path, sizeof(path), "%s/channel0_0", kdir);
		put(path, nul + 1, size - (size_t)(nul - data) - 1, NULL, 0);
		s = vm_stream_open_ctf(fuzz_dir, true, &st, &err);
	} else {
		char *meta = vmctf_metadata(false, VMCTF_TID);

		put(path, meta, strlen(meta), NULL, 0);
		free(meta);
		snprintf(path, sizeof(path), "%s/channel0_0", kdir);
		put(path, data, size, NULL, 0);
		if (!packets_sane(data, size)) {
			s = vm_stream_open_ctf(fuzz_dir, true, &st, &err);
		} else {
			if (__lsan_disable)
				__lsan_disable();
			s = vm_stream_open_ctf(fuzz_dir, false, &st, &err);
			if (__lsan_enable)
				__lsan_enable();
		}
	}
	if (!s) {
		if (!err.tag || !strstr(err.msg, fuzz_dir)) {
			fprintf(stderr, "refused without a tag or the directory: %s\n", err.msg);
			abort();
		}
		return 0;
	}
	if (st.no_tid > st.events || st.traces != 1)
		abort();
	vm_analysis_init(&a, 1u << 16);
	if (vm_host_pass(&a, s, &err) == 0)
		check(&a);
	else if (!err.tag)
		abort();
	vm_analysis_free(&a);
	vm_stream_close(s);
	return 0;
}
