// SPDX-License-Identifier: Apache-2.0
/*
 * libFuzzer target: the LTTng CTF importer on a CTF trace of one stream file, written into a
 * temporary directory.
 *   - An input that starts with "/" + "* CTF" is the metadata text, a NUL byte, then the
 *     stream's bytes: the fuzzer changes the field types too (the importer's type checks,
 *     payloads of every kind made into attributes).  babeltrace2 2.0.4 itself crashes on
 *     some metadata (docs/graphs.md), so these go through graph_import_ctf_stats(), which
 *     reads in a child process and refuses what kills it.
 *   - Any other input is the stream alone, under the fixed metadata of ctf_fixture.h
 *     (LTTng-UST-like: the weft provider's events and an application event): the values the
 *     importer reads (ids, strings, statuses, edge kinds, timestamps, context) are the
 *     fuzzer's.  These go through graph_import_ctf_here(), in this process, so that the
 *     importer's coverage guides the fuzzer; babeltrace2 leaks the packet it was decoding
 *     when a stream fails inside an event, so LeakSanitizer is paused around that call (the
 *     importer's own allocations are leak-checked by tests/unit/test_import_ctf.c).
 * Run it with -detect_leaks=0 for speed: with leak detection on, libFuzzer looks for leaks
 * after every input whose mallocs and frees differ, which babeltrace2's caches make most.
 * What babeltrace2 leaks in this process adds up (about 30 KB an input that fails inside a
 * packet): a run of about 100,000 inputs reaches 4 GB and ends as "out-of-memory".
 * What must hold besides not crashing:
 *   - refused: the graph is empty again and the message names the directory;
 *   - taken: graph_check() passes, every element is tagged GRAPH_SRC_LTTNG, every
 *     attribute text is a JSON object, and the counts fit the statistics (no more tasks and
 *     events than events read, no more edges than twice that).
 *
 * Seeds: tests/fuzz/corpus/import_ctf/, written by this target itself:
 * WEFT_CTF_SEEDS=DIR replay_fuzz_import_ctf ANY writes them into DIR and exits; two of them
 * crash babeltrace2 (in the reader process).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "graph/graph.h"
#include "graph/import.h"
#include "tests/fuzz/ctf_fixture.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);
void __lsan_disable(void) __attribute__((weak));
void __lsan_enable(void) __attribute__((weak));

static char fuzz_dir[64];

static void fuzz_cleanup(void)
{
	char path[128];

	snprintf(path, sizeof(path), "%s/metadata", fuzz_dir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/stream_0", fuzz_dir);
	unlink(path);
	rmdir(fuzz_dir);
}

static void seed(const char *dir, const char *name, const struct ctf_fix_stream *s, size_t len)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "wb");
	if (!f || fwrite(s->buf, 1, len, f) != len || fclose(f) != 0) {
		perror(path);
		exit(1);
	}
}

/* metadata m with its first `from` replaced by `to` (static buffer) */
static const char *meta_with(const char *m, const char *from, const char *to)
{
	static char out[8192];
	const char *q = strstr(m, from);

	if (!q)
		abort();
	snprintf(out, sizeof(out), "%.*s%s%s", (int)(q - m), m, to, q + strlen(from));
	return out;
}

/* a seed that carries its metadata: the text, a NUL, the stream */
static void seed_meta(const char *dir, const char *name, const char *m,
		      const struct ctf_fix_stream *s)
{
	static struct ctf_fix_stream in;
	size_t n = strlen(m) + 1;

	if (n + s->len > sizeof(in.buf))
		abort();
	memcpy(in.buf, m, n);
	memcpy(in.buf + n, s->buf, s->len);
	in.len = n + s->len;
	seed(dir, name, &in, in.len);
}

static void write_seeds(const char *dir)
{
	struct ctf_fix_stream s;

	ctf_fix_reference(&s, false);
	seed(dir, "reference", &s, s.len);
	seed(dir, "reference_cut", &s, s.len - 3);
	/* one task, begun and ended, with an application event (a string that is not UTF-8, an
	 * infinite ratio) and a message edge to a task that never began */
	ctf_fix_init(&s);
	ctf_fix_event(&s, CTF_EV_BEGIN, 5, 1, 1);
	ctf_fix_trace(&s, false, 0, 9);
	ctf_fix_u64(&s, 4);
	ctf_fix_u64(&s, 8);
	ctf_fix_str(&s, "s");
	ctf_fix_str(&s, "n");
	ctf_fix_event(&s, CTF_EV_WORK, 6, 1, 1);
	ctf_fix_u32(&s, 1);
	ctf_fix_str(&s, "\xff\xfe not utf-8");
	ctf_fix_u64(&s, 0x7ff0000000000000ULL); /* +inf */
	ctf_fix_u32(&s, 0);
	ctf_fix_u32(&s, 0xffffffffu);
	ctf_fix_event(&s, CTF_EV_EDGE, 7, 1, 1);
	ctf_fix_trace(&s, false, 0, 9);
	ctf_fix_str(&s, "message");
	ctf_fix_u64(&s, 4);
	ctf_fix_u64(&s, 0);
	ctf_fix_u64(&s, 5);
	ctf_fix_u64(&s, 0);
	ctf_fix_event(&s, CTF_EV_END, 8, 1, 1);
	ctf_fix_trace(&s, false, 0, 9);
	ctf_fix_u64(&s, 4);
	ctf_fix_u32(&s, 1);
	seed(dir, "one_task", &s, s.len);
	/* a header only */
	ctf_fix_init(&s);
	seed(dir, "empty", &s, s.len);
	/* metadata in the input: the documented types, trace_hi a string, and two that crash
	 * babeltrace2 2.0.4 (a clock without a frequency; a timestamp that is a structure) */
	ctf_fix_reference(&s, false);
	seed_meta(dir, "meta_reference", ctf_fixture_metadata("uint64_t"), &s);
	seed_meta(dir, "meta_bt2_sigfpe",
		  meta_with(ctf_fixture_metadata("uint64_t"), "freq = 1000000000;", ""), &s);
	seed_meta(dir, "meta_bt2_abort",
		  meta_with(ctf_fixture_metadata("uint64_t"), "uint64_clock_t timestamp;",
			    "struct { string a; } timestamp;"),
		  &s);
	ctf_fix_reference(&s, true);
	seed_meta(dir, "meta_wrong_type", ctf_fixture_metadata("string"), &s);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *seeds = getenv("WEFT_CTF_SEEDS");

	(void)argc;
	(void)argv;
	if (seeds) {
		write_seeds(seeds);
		exit(0);
	}
	snprintf(fuzz_dir, sizeof(fuzz_dir), "/tmp/weft-fuzz-ctf-XXXXXX");
	if (!mkdtemp(fuzz_dir)) {
		perror("mkdtemp");
		abort();
	}
	atexit(fuzz_cleanup);
	return 0;
}

static void check_attrs(const char *text)
{
	json_t *j = json_loads(text, 0, NULL);

	if (!json_is_object(j)) {
		fprintf(stderr, "attributes are not a JSON object: %s\n", text);
		abort();
	}
	json_decref(j);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct graph g;
	struct graph_ctf_stats st;
	struct graph_import_err err;
	char why[256];
	bool with_meta;
	int ret;

	if (!fuzz_dir[0] || size > 1 << 20)
		return 0;
	with_meta = size >= 6 && memcmp(data, "/* CTF", 6) == 0;
	if (with_meta) {
		const uint8_t *nul = memchr(data, '\0', size);
		char *meta;

		if (!nul)
			return 0;
		meta = strndup((const char *)data, (size_t)(nul - data));
		if (!meta)
			return 0;
		ret = ctf_fix_write(fuzz_dir, meta, nul + 1, size - (size_t)(nul - data) - 1);
		free(meta);
	} else {
		ret = ctf_fix_write(fuzz_dir, ctf_fixture_metadata("uint64_t"), data, size);
	}
	if (ret != 0)
		abort();
	graph_init(&g);
	if (with_meta) {
		ret = graph_import_ctf_stats(fuzz_dir, &g, &st, &err);
	} else {
		if (__lsan_disable)
			__lsan_disable();
		ret = graph_import_ctf_here(fuzz_dir, &g, &st, &err);
		if (__lsan_enable)
			__lsan_enable();
	}
	if (ret < 0) {
		if (g.ntasks || g.nevents || g.nedges || !strstr(err.msg, fuzz_dir)) {
			fprintf(stderr, "refused (%s) but the graph holds elements\n", err.msg);
			abort();
		}
	} else {
		if (ret != GRAPH_FMT_CTF || graph_check(&g, why, sizeof(why)) != 0) {
			fprintf(stderr, "taken, but graph_check: %s\n", why);
			abort();
		}
		if (g.nevents > st.events || g.ntasks > st.events || g.nedges > 2 * st.events)
			abort();
		for (size_t i = 0; i < g.ntasks; i++) {
			if (g.tasks[i].source != GRAPH_SRC_LTTNG)
				abort();
			check_attrs(g.tasks[i].attrs);
		}
		for (size_t i = 0; i < g.nevents; i++) {
			if (g.events[i].source != GRAPH_SRC_LTTNG)
				abort();
			check_attrs(g.events[i].attrs);
		}
		for (size_t i = 0; i < g.nedges; i++)
			if (g.edges[i].source != GRAPH_SRC_LTTNG)
				abort();
	}
	graph_free(&g);
	return 0;
}
