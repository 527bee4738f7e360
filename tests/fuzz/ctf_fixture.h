/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A small CTF 1.8 trace written by hand, for the LTTng CTF importer's unit test
 * (tests/unit/test_import_ctf.c) and fuzz target (fuzz_import_ctf.c): plain-text metadata
 * shaped like LTTng-UST's (the weft provider's four events with the documented fields, an
 * application event app:work, the vpid/vtid/procname context, a clock whose origin is the
 * Unix epoch, hostname "fuzzhost") and a builder of one stream file's bytes.  The stream has
 * a packet header (magic, stream id) and no packet context, so the whole file is one packet
 * and every byte after the header is events: what a fuzzer mutates.
 *
 * ctf_fixture_metadata(type) puts `type` where the weft events' trace_hi field's type goes
 * ("uint64_t" as documented; "string" makes a trace whose payload has the wrong type).
 * Header-only, static functions: each including file is one executable.
 */
#ifndef WEFT_TEST_CTF_FIXTURE_H
#define WEFT_TEST_CTF_FIXTURE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CTF_FIX_MAGIC 0xC1FC1FC1u
#define CTF_FIX_OFFSET_S 1700000000 /* the clock's offset: event ns = this * 1e9 + ts */

enum { CTF_EV_BEGIN = 0, CTF_EV_END, CTF_EV_EVENT, CTF_EV_EDGE, CTF_EV_WORK };

/* The metadata text (static buffer). */
static const char *ctf_fixture_metadata(const char *trace_hi_type)
{
	static char buf[4096];

	snprintf(
		buf, sizeof(buf),
		"/* CTF 1.8 */\n"
		"typealias integer { size = 8; align = 8; signed = false; } := uint8_t;\n"
		"typealias integer { size = 32; align = 8; signed = false; } := uint32_t;\n"
		"typealias integer { size = 32; align = 8; signed = true; } := int32_t;\n"
		"typealias integer { size = 64; align = 8; signed = false; } := uint64_t;\n"
		"typealias floating_point { exp_dig = 11; mant_dig = 53; align = 8; } := double;\n"
		"trace { major = 1; minor = 8; byte_order = le;\n"
		"  packet.header := struct { uint32_t magic; uint32_t stream_id; }; };\n"
		"env { hostname = \"fuzzhost\"; domain = \"ust\"; tracer_name = \"lttng-ust\";\n"
		"  tracer_major = 2; tracer_minor = 13; };\n"
		"clock { name = \"monotonic\"; freq = 1000000000; offset_s = %d; offset = 0;\n"
		"  absolute = TRUE; };\n"
		"typealias integer { size = 64; align = 8; signed = false;\n"
		"  map = clock.monotonic.value; } := uint64_clock_t;\n"
		"stream { id = 0;\n"
		"  event.header := struct { uint8_t id; uint64_clock_t timestamp; };\n"
		"  event.context := struct { int32_t _vpid; int32_t _vtid; string _procname; }; };\n"
		"event { name = \"weft:task_begin\"; id = 0; stream_id = 0; fields := struct {\n"
		"  %s _trace_hi; uint64_t _trace_lo; uint64_t _task; uint64_t _parent;\n"
		"  string _service; string _name; }; };\n"
		"event { name = \"weft:task_end\"; id = 1; stream_id = 0; fields := struct {\n"
		"  %s _trace_hi; uint64_t _trace_lo; uint64_t _task; int32_t _status; }; };\n"
		"event { name = \"weft:event\"; id = 2; stream_id = 0; fields := struct {\n"
		"  %s _trace_hi; uint64_t _trace_lo; uint64_t _task; string _name; }; };\n"
		"event { name = \"weft:edge\"; id = 3; stream_id = 0; fields := struct {\n"
		"  %s _trace_hi; uint64_t _trace_lo; string _kind; uint64_t _from_task;\n"
		"  uint64_t _from_event; uint64_t _to_task; uint64_t _to_event; }; };\n"
		"event { name = \"app:work\"; id = 4; stream_id = 0; fields := struct {\n"
		"  int32_t _value; string _label; double _ratio; uint32_t _pair[2]; }; };\n",
		CTF_FIX_OFFSET_S, trace_hi_type, trace_hi_type, trace_hi_type, trace_hi_type);
	return buf;
}

/* A stream file's bytes, little-endian as the metadata says. */
struct ctf_fix_stream {
	unsigned char buf[131072];
	size_t len;
};

static void ctf_fix_put(struct ctf_fix_stream *s, const void *p, size_t n)
{
	if (s->len + n > sizeof(s->buf))
		abort(); /* a fixture bigger than its buffer is a bug of the test */
	memcpy(s->buf + s->len, p, n);
	s->len += n;
}

static void ctf_fix_u8(struct ctf_fix_stream *s, uint8_t v)
{
	ctf_fix_put(s, &v, 1);
}

static void ctf_fix_u32(struct ctf_fix_stream *s, uint32_t v)
{
	unsigned char b[4] = { (unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
			       (unsigned char)(v >> 24) };

	ctf_fix_put(s, b, 4);
}

static void ctf_fix_u64(struct ctf_fix_stream *s, uint64_t v)
{
	ctf_fix_u32(s, (uint32_t)v);
	ctf_fix_u32(s, (uint32_t)(v >> 32));
}

static void ctf_fix_str(struct ctf_fix_stream *s, const char *str)
{
	ctf_fix_put(s, str, strlen(str) + 1);
}

static void ctf_fix_init(struct ctf_fix_stream *s)
{
	s->len = 0;
	ctf_fix_u32(s, CTF_FIX_MAGIC);
	ctf_fix_u32(s, 0);
}

/* An event's header and context: id, timestamp (ns after the clock's offset), vpid, vtid. */
static void ctf_fix_event(struct ctf_fix_stream *s, int id, uint64_t ts, int32_t pid, int32_t tid)
{
	ctf_fix_u8(s, (uint8_t)id);
	ctf_fix_u64(s, ts);
	ctf_fix_u32(s, (uint32_t)pid);
	ctf_fix_u32(s, (uint32_t)tid);
	ctf_fix_str(s, "fixture");
}

/* The trace id fields as the uint64_t metadata has them (with "string": one string). */
static void ctf_fix_trace(struct ctf_fix_stream *s, bool as_string, uint64_t hi, uint64_t lo)
{
	if (as_string)
		ctf_fix_str(s, "0x77");
	else
		ctf_fix_u64(s, hi);
	ctf_fix_u64(s, lo);
}

/* The whole trace into dir (which exists): metadata and one stream file "stream_0". */
static int ctf_fix_write(const char *dir, const char *metadata, const void *stream, size_t len)
{
	char path[4096];
	FILE *f;
	int ok;

	snprintf(path, sizeof(path), "%s/metadata", dir);
	f = fopen(path, "w");
	if (!f)
		return -1;
	ok = fputs(metadata, f) >= 0;
	ok = (fclose(f) == 0) && ok;
	snprintf(path, sizeof(path), "%s/stream_0", dir);
	f = fopen(path, "wb");
	if (!f)
		return -1;
	ok = (fwrite(stream, 1, len, f) == len) && ok;
	ok = (fclose(f) == 0) && ok;
	return ok ? 0 : -1;
}

/*
 * The reference stream (the unit test asserts its import exactly; the fuzz corpus starts
 * from it).  Trace (0x77, 0x88); pid 10, threads 10 and 11; ts every 10 ns from 1000:
 *   0 app:work(-1, "outside")      thread 10, no task open: dropped
 *   1 task_begin 1 (root)          thread 10, service "svc", name "root"
 *   2 weft:event task 1 "hello"
 *   3 task_begin 2 (parent 1)      thread 11, name "child"
 *   4 app:work(5, "in child")      thread 11: an event of task 2
 *   5 app:work(6, "in root")       thread 10: an event of task 1
 *   6 edge follows 1 -> 2
 *   7 task_end 2 status 2          thread 11
 *   8 task_end 1 status 1          thread 10
 *   9 task_begin 3 (root) "open"   never ends: cut at event 11's time
 *  10 task_end 99                  never began: counted
 *  11 weft:event task 42 "nowhere" no such task: dropped at the end
 * So: 3 tasks, 3 events, 2 edges (parent 1 -> 2, follows 1 -> 2).
 */
static void ctf_fix_reference(struct ctf_fix_stream *s, bool as_string)
{
	const uint64_t hi = 0x77, lo = 0x88;
	uint64_t ts = 1000;

	ctf_fix_init(s);
	ctf_fix_event(s, CTF_EV_WORK, ts, 10, 10);
	ctf_fix_u32(s, (uint32_t)-1);
	ctf_fix_str(s, "outside");
	ctf_fix_u64(s, 0); /* 0.0 */
	ctf_fix_u32(s, 1);
	ctf_fix_u32(s, 2);
	ctf_fix_event(s, CTF_EV_BEGIN, ts += 10, 10, 10);
	ctf_fix_trace(s, as_string, hi, lo);
	ctf_fix_u64(s, 1);
	ctf_fix_u64(s, 0);
	ctf_fix_str(s, "svc");
	ctf_fix_str(s, "root");
	ctf_fix_event(s, CTF_EV_EVENT, ts += 10, 10, 10);
	ctf_fix_trace(s, as_string, hi, lo);
	ctf_fix_u64(s, 1);
	ctf_fix_str(s, "hello");
	ctf_fix_event(s, CTF_EV_BEGIN, ts += 10, 10, 11);
	ctf_fix_trace(s, as_string, hi, lo);
	ctf_fix_u64(s, 2);
	ctf_fix_u64(s, 1);
	ctf_fix_str(s, "svc");
	ctf_fix_str(s, "child");
	ctf_fix_event(s, CTF_EV_WORK, ts += 10, 10, 11);
	ctf_fix_u32(s, 5);
	ctf_fix_str(s, "in child");
	ctf_fix_u64(s, 0x3ff8000000000000ULL); /* 1.5 */
	ctf_fix_u32(s, 3);
	ctf_fix_u32(s, 4);
	ctf_fix_event(s, CTF_EV_WORK, ts += 10, 10, 10);
	ctf_fix_u32(s, 6);
	ctf_fix_str(s, "in root");
	ctf_fix_u64(s, 0x4004000000000000ULL); /* 2.5 */
	ctf_fix_u32(s, 5);
	ctf_fix_u32(s, 6);
	ctf_fix_event(s, CTF_EV_EDGE, ts += 10, 10, 10);
	ctf_fix_trace(s, as_string, hi, lo);
	ctf_fix_str(s, "follows");
	ctf_fix_u64(s, 1);
	ctf_fix_u64(s, 0);
	ctf_fix_u64(s, 2);
	ctf_fix_u64(s, 0);
	ctf_fix_event(s, CTF_EV_END, ts += 10, 10, 11);
	ctf_fix_trace(s, as_string, hi, lo);
	ctf_fix_u64(s, 2);
	ctf_fix_u32(s, 2);
	ctf_fix_event(s, CTF_EV_END, ts += 10, 10, 10);
	ctf_fix_trace(s, as_string, hi, lo);
	ctf_fix_u64(s, 1);
	ctf_fix_u32(s, 1);
	ctf_fix_event(s, CTF_EV_BEGIN, ts += 10, 10, 10);
	ctf_fix_trace(s, as_string, hi, lo);
	ctf_fix_u64(s, 3);
	ctf_fix_u64(s, 0);
	ctf_fix_str(s, "svc");
	ctf_fix_str(s, "open");
	ctf_fix_event(s, CTF_EV_END, ts += 10, 10, 10);
	ctf_fix_trace(s, as_string, hi, lo);
	ctf_fix_u64(s, 99);
	ctf_fix_u32(s, 1);
	ctf_fix_event(s, CTF_EV_EVENT, ts += 10, 10, 10);
	ctf_fix_trace(s, as_string, hi, lo);
	ctf_fix_u64(s, 42);
	ctf_fix_str(s, "nowhere");
}

#endif
