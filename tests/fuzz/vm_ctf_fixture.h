/* SPDX-License-Identifier: Apache-2.0 */
/*
 * LTTng CTF traces written by hand from a recorded event stream (docs/vm.md), for the VM
 * analysis's CTF input (vm/ctf.c): its unit test (tests/unit/test_vm_ctf.c) and fuzz target
 * (fuzz_vm_ctf.c).  A stream's events become the traces an LTTng session of the same machine
 * would have written:
 *
 *   DIR/kernel/              lttng-modules' kernel trace: one stream file per CPU
 *                            (channel0_N), a packet context with cpu_id as LTTng's, events
 *                            under lttng-modules' names and fields: kvm_x86_entry,
 *                            kvm_x86_exit (exit_reason, guest_rip, isa, info1, info2,
 *                            intr_info, error_code, vcpu_id), kvm_userspace_exit,
 *                            kvm_x86_hypercall (nr, a0..a3), kvm_x86_nested_vmrun,
 *                            kvm_x86_nested_vmexit, kvm_x86_nested_vmexit_inject, kvm_x86_pio,
 *                            kvm_x86_write_tsc_offset, sched_switch (prev_comm, prev_tid,
 *                            prev_prio, prev_state, next_comm, next_tid, next_prio),
 *                            sched_wakeup (comm, tid, prio, target_cpu), sched_stat_runtime;
 *                            with VMCTF_TID the tid/pid context (`lttng add-context -k -t tid
 *                            -t pid`), without it none
 *   DIR/ust/uid/0/64-bit/    weft's LTTng-UST provider: weft:vm_sync, weft:vm_tsc,
 *                            weft:tsc_clock, with the vtid/vpid context
 *
 * Both traces' clocks have their origin at 0 (offset 0), so an event's ns from the origin is
 * the stream's time: the analysis of the traces must equal the analysis of the stream.  A
 * sched_switch's prev_state "R"/"R+" is written 0, "D" 2, any other letter 1 (the kernel's
 * numbers).  A stream's pid missing is written as its tid.  Events of other names are
 * skipped.  Header-only, static functions: each including file is one executable.
 */
#ifndef WEFT_TEST_VM_CTF_FIXTURE_H
#define WEFT_TEST_VM_CTF_FIXTURE_H

#include <errno.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define VMCTF_MAGIC 0xC1FC1FC1u
#define VMCTF_CPUS 16 /* streams per trace */

enum vmctf_flags {
	VMCTF_TID = 1, /* the kernel trace has the tid and pid context */
	VMCTF_NO_CPU = 2, /* no cpu_id in the packet context (a trace the reader refuses) */
	VMCTF_BACKWARDS = 4, /* the last event of each stream 1 ns before its first (refused) */
	VMCTF_DISCARD = 8, /* each stream ends with a packet saying 3 events were discarded */
};

/* A field: its type (u8 u32 i32 u64 i64 c16: 16 bytes of text), its LTTng name, where its
 * value comes from in the stream's fields (NULL: the LTTng name). */
struct vmctf_field {
	const char *type, *name, *src;
};

struct vmctf_class {
	const char *stream_name, *lttng_name;
	bool ust;
	struct vmctf_field f[9];
};

static const struct vmctf_class vmctf_classes[] = {
	{ "kvm_entry", "kvm_x86_entry", false, { { "u32", "vcpu_id", NULL } } },
	{ "kvm_exit",
	  "kvm_x86_exit",
	  false,
	  { { "u32", "exit_reason", NULL },
	    { "u64", "guest_rip", NULL },
	    { "u32", "isa", NULL },
	    { "u64", "info1", NULL },
	    { "u64", "info2", NULL },
	    { "u32", "intr_info", NULL },
	    { "u32", "error_code", NULL },
	    { "u32", "vcpu_id", NULL } } },
	{ "kvm_userspace_exit",
	  "kvm_userspace_exit",
	  false,
	  { { "u32", "reason", NULL }, { "i32", "errno", NULL } } },
	{ "kvm_hypercall",
	  "kvm_x86_hypercall",
	  false,
	  { { "u64", "nr", NULL },
	    { "u64", "a0", NULL },
	    { "u64", "a1", NULL },
	    { "u64", "a2", NULL },
	    { "u64", "a3", NULL } } },
	{ "kvm_nested_vmenter",
	  "kvm_x86_nested_vmrun",
	  false,
	  { { "u64", "rip", NULL },
	    { "u64", "vmcb", NULL },
	    { "u64", "nested_rip", NULL },
	    { "u32", "int_ctl", NULL },
	    { "u32", "event_inj", NULL },
	    { "u8", "npt", NULL } } },
	{ "kvm_nested_vmexit",
	  "kvm_x86_nested_vmexit",
	  false,
	  { { "u64", "rip", NULL },
	    { "u32", "exit_code", NULL },
	    { "u64", "exit_info1", NULL },
	    { "u64", "exit_info2", NULL },
	    { "u32", "exit_int_info", NULL },
	    { "u32", "exit_int_info_err", NULL },
	    { "u32", "isa", NULL } } },
	{ "kvm_nested_vmexit_inject",
	  "kvm_x86_nested_vmexit_inject",
	  false,
	  { { "u32", "exit_code", NULL },
	    { "u64", "exit_info1", NULL },
	    { "u64", "exit_info2", NULL },
	    { "u32", "exit_int_info", NULL },
	    { "u32", "exit_int_info_err", NULL },
	    { "u32", "isa", NULL } } },
	{ "kvm_pio",
	  "kvm_x86_pio",
	  false,
	  { { "u32", "rw", NULL },
	    { "u32", "port", NULL },
	    { "u32", "size", NULL },
	    { "u32", "count", NULL } } },
	{ "kvm_write_tsc_offset",
	  "kvm_x86_write_tsc_offset",
	  false,
	  { { "u32", "vcpu_id", NULL },
	    { "u64", "previous_tsc_offset", NULL },
	    { "u64", "next_tsc_offset", NULL } } },
	{ "sched_switch",
	  "sched_switch",
	  false,
	  { { "c16", "prev_comm", NULL },
	    { "i32", "prev_tid", "prev_pid" },
	    { "i32", "prev_prio", NULL },
	    { "i64", "prev_state", NULL },
	    { "c16", "next_comm", NULL },
	    { "i32", "next_tid", "next_pid" },
	    { "i32", "next_prio", NULL } } },
	{ "sched_wakeup",
	  "sched_wakeup",
	  false,
	  { { "c16", "comm", NULL },
	    { "i32", "tid", "pid" },
	    { "i32", "prio", NULL },
	    { "i32", "target_cpu", NULL } } },
	{ "sched_stat_runtime",
	  "sched_stat_runtime",
	  false,
	  { { "c16", "comm", NULL },
	    { "i32", "tid", "pid" },
	    { "u64", "runtime", NULL },
	    { "u64", "vruntime", NULL } } },
	{ "vm_sync", "weft:vm_sync", true, { { "u64", "id", NULL }, { "i64", "after", NULL } } },
	{ "vm_tsc", "weft:vm_tsc", true, { { "u64", "tsc", NULL }, { "i64", "after", NULL } } },
	{ "tsc_clock",
	  "weft:tsc_clock",
	  true,
	  { { "u64", "tsc", NULL }, { "u64", "khz", NULL }, { "i64", "error_ns", NULL } } },
};
#define VMCTF_NCLASSES (sizeof(vmctf_classes) / sizeof(vmctf_classes[0]))

static const struct vmctf_class *vmctf_class_of(const char *name, size_t *id)
{
	for (size_t i = 0; i < VMCTF_NCLASSES; i++) {
		if (strcmp(vmctf_classes[i].stream_name, name) == 0) {
			*id = i;
			return &vmctf_classes[i];
		}
	}
	return NULL;
}

/* A trace's metadata (lttng-modules' or LTTng-UST's shape). */
static char *vmctf_metadata(bool ust, unsigned flags)
{
	size_t cap = 16384, n = 0;
	char *b = malloc(cap);

	if (!b)
		abort();
#define VMCTF_PUT(...) (n += (size_t)snprintf(b + n, cap - n, __VA_ARGS__))
	VMCTF_PUT("/* CTF 1.8 */\n"
		  "typealias integer { size = 8; align = 8; signed = false; } := uint8_t;\n"
		  "typealias integer { size = 8; align = 8; signed = false; encoding = UTF8; } := "
		  "char_t;\n"
		  "typealias integer { size = 32; align = 8; signed = false; } := uint32_t;\n"
		  "typealias integer { size = 32; align = 8; signed = true; } := int32_t;\n"
		  "typealias integer { size = 64; align = 8; signed = false; } := uint64_t;\n"
		  "typealias integer { size = 64; align = 8; signed = true; } := int64_t;\n"
		  "trace { major = 1; minor = 8; byte_order = le;\n"
		  "  packet.header := struct { uint32_t magic; uint32_t stream_id; }; };\n"
		  "env { hostname = \"vmhost\"; domain = \"%s\"; tracer_name = \"%s\";\n"
		  "  tracer_major = 2; tracer_minor = 13; };\n"
		  "clock { name = \"monotonic\"; freq = 1000000000; offset_s = 0; offset = 0; };\n"
		  "typealias integer { size = 64; align = 8; signed = false;\n"
		  "  map = clock.monotonic.value; } := uint64_clock_t;\n"
		  "stream { id = 0;\n"
		  "  packet.context := struct { uint64_clock_t timestamp_begin;\n"
		  "    uint64_clock_t timestamp_end; uint64_t content_size; uint64_t packet_size;\n"
		  "    uint64_t packet_seq_num; uint64_t events_discarded;%s };\n"
		  "  event.header := struct { uint32_t id; uint64_clock_t timestamp; };\n",
		  ust ? "ust" : "kernel", ust ? "lttng-ust" : "lttng-modules",
		  flags & VMCTF_NO_CPU ? "" : " uint32_t cpu_id;");
	if (ust)
		VMCTF_PUT("  event.context := struct { int32_t _vpid; int32_t _vtid; };\n");
	else if (flags & VMCTF_TID)
		VMCTF_PUT("  event.context := struct { int32_t _tid; int32_t _pid; };\n");
	VMCTF_PUT("};\n");
	for (size_t i = 0; i < VMCTF_NCLASSES; i++) {
		const struct vmctf_class *c = &vmctf_classes[i];

		if (c->ust != ust)
			continue;
		VMCTF_PUT("event { name = \"%s\"; id = %zu; stream_id = 0; fields := struct {",
			  c->lttng_name, i);
		for (size_t k = 0; k < 9 && c->f[k].type; k++) {
			const char *t = c->f[k].type;

			if (strcmp(t, "c16") == 0)
				VMCTF_PUT(" char_t _%s[16];", c->f[k].name);
			else
				VMCTF_PUT(" %s _%s;",
					  strcmp(t, "u8") == 0	? "uint8_t" :
					  strcmp(t, "u32") == 0 ? "uint32_t" :
					  strcmp(t, "i32") == 0 ? "int32_t" :
					  strcmp(t, "u64") == 0 ? "uint64_t" :
								  "int64_t",
					  c->f[k].name);
		}
		VMCTF_PUT(" }; };\n");
		if (n >= cap - 512)
			abort(); /* a fixture bigger than its buffer is a bug of the test */
	}
#undef VMCTF_PUT
	return b;
}

/* One stream file's bytes. */
struct vmctf_buf {
	unsigned char *p;
	size_t len, cap;
	uint64_t first, last;
	bool any;
};

static void vmctf_put(struct vmctf_buf *s, const void *p, size_t n)
{
	if (s->len + n > s->cap) {
		s->cap = (s->len + n) * 2 + 4096;
		s->p = realloc(s->p, s->cap);
		if (!s->p)
			abort();
	}
	memcpy(s->p + s->len, p, n);
	s->len += n;
}

static void vmctf_le(struct vmctf_buf *s, uint64_t v, int bytes)
{
	unsigned char b[8];

	for (int i = 0; i < bytes; i++)
		b[i] = (unsigned char)(v >> (8 * i));
	vmctf_put(s, b, (size_t)bytes);
}

/* The header and packet context, with sizes and times patched in by vmctf_close(). */
#define VMCTF_HDR_LEN (8 + 6 * 8)
static void vmctf_open(struct vmctf_buf *s, unsigned flags, unsigned cpu)
{
	vmctf_le(s, VMCTF_MAGIC, 4);
	vmctf_le(s, 0, 4);
	for (int i = 0; i < 6; i++)
		vmctf_le(s, 0, 8);
	if (!(flags & VMCTF_NO_CPU))
		vmctf_le(s, cpu, 4);
}

static void vmctf_patch(struct vmctf_buf *s, size_t at, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		s->p[at + (size_t)i] = (unsigned char)(v >> (8 * i));
}

static void vmctf_close(struct vmctf_buf *s)
{
	vmctf_patch(s, 8, s->first);
	vmctf_patch(s, 16, s->last);
	vmctf_patch(s, 24, (uint64_t)s->len * 8);
	vmctf_patch(s, 32, (uint64_t)s->len * 8);
}

/* A second packet, without events, whose events_discarded counter says 3 were lost. */
static void vmctf_discard_packet(struct vmctf_buf *s, unsigned flags, unsigned cpu)
{
	size_t base = s->len;

	vmctf_open(s, flags, cpu);
	vmctf_patch(s, base + 8, s->last);
	vmctf_patch(s, base + 16, s->last);
	vmctf_patch(s, base + 24, (uint64_t)(s->len - base) * 8);
	vmctf_patch(s, base + 32, (uint64_t)(s->len - base) * 8);
	vmctf_patch(s, base + 40, 1);
	vmctf_patch(s, base + 48, 3);
}

static int64_t vmctf_value(json_t *fields, const struct vmctf_field *f)
{
	json_t *v = json_object_get(fields, f->src ? f->src : f->name);

	if (json_is_integer(v))
		return json_integer_value(v);
	if (json_is_true(v))
		return 1;
	if (json_is_string(v) && strcmp(f->name, "prev_state") == 0) {
		const char *s = json_string_value(v);

		return s[0] == 'R' ? 0 : s[0] == 'D' ? 2 : 1;
	}
	return 0;
}

static void vmctf_event(struct vmctf_buf *s, size_t id, const struct vmctf_class *c, json_t *ev,
			uint64_t ts, bool ctx, int64_t tid, int64_t pid)
{
	json_t *fields = json_object_get(ev, "fields");

	if (!s->any)
		s->first = ts;
	s->any = true;
	s->last = ts;
	vmctf_le(s, id, 4);
	vmctf_le(s, ts, 8);
	if (ctx) {
		vmctf_le(s, (uint64_t)(c->ust ? pid : tid), 4);
		vmctf_le(s, (uint64_t)(c->ust ? tid : pid), 4);
	}
	for (size_t k = 0; k < 9 && c->f[k].type; k++) {
		const char *t = c->f[k].type;

		if (strcmp(t, "c16") == 0) {
			char text[16] = { 0 };
			json_t *v = json_object_get(fields, c->f[k].name);

			if (json_is_string(v))
				strncpy(text, json_string_value(v), sizeof(text) - 1);
			vmctf_put(s, text, sizeof(text));
		} else {
			int bytes = t[1] == '8' ? 1 : t[1] == '3' ? 4 : 8;

			vmctf_le(s, (uint64_t)vmctf_value(fields, &c->f[k]), bytes);
		}
	}
}

static void vmctf_write_file(const char *path, const void *p, size_t n)
{
	FILE *f = fopen(path, "wb");

	if (!f || fwrite(p, 1, n, f) != n || fclose(f) != 0)
		abort();
}

static void vmctf_mkdirs(const char *dir)
{
	char p[4096];

	snprintf(p, sizeof(p), "%s", dir);
	for (char *q = p + 1; *q; q++) {
		if (*q == '/') {
			*q = 0;
			mkdir(p, 0755);
			*q = '/';
		}
	}
	mkdir(p, 0755);
}

/*
 * Writes the stream text (JSON lines) as LTTng traces into dir (made): 0, or -1 if a line is
 * not an event of the stream format.  *skipped (may be NULL): events of other names.
 */
static int vmctf_write(const char *text, const char *dir, unsigned flags, size_t *skipped)
{
	struct vmctf_buf k[VMCTF_CPUS], u[VMCTF_CPUS];
	char path[4096];
	const char *line = text;
	size_t nskip = 0;

	memset(k, 0, sizeof(k));
	memset(u, 0, sizeof(u));
	for (unsigned c = 0; c < VMCTF_CPUS; c++) {
		vmctf_open(&k[c], flags, c);
		vmctf_open(&u[c], flags, c);
	}
	while (line && *line) {
		const char *nl = strchr(line, '\n');
		size_t len = nl ? (size_t)(nl - line) : strlen(line);
		json_t *ev;
		size_t id;
		const struct vmctf_class *c;

		if (len == 0 || line[0] == '#') {
			line = nl ? nl + 1 : NULL;
			continue;
		}
		ev = json_loadb(line, len, 0, NULL);
		line = nl ? nl + 1 : NULL;
		if (!ev || !json_is_integer(json_object_get(ev, "cpu")) ||
		    !json_is_integer(json_object_get(ev, "time")) ||
		    json_integer_value(json_object_get(ev, "cpu")) >= VMCTF_CPUS) {
			json_decref(ev);
			return -1;
		}
		c = vmctf_class_of(json_string_value(json_object_get(ev, "name")) ?: "", &id);
		if (!c) {
			nskip++;
		} else {
			int64_t cpu = json_integer_value(json_object_get(ev, "cpu"));
			json_t *jt = json_object_get(ev, "tid"), *jp = json_object_get(ev, "pid");
			int64_t tid = json_is_integer(jt) ? json_integer_value(jt) : 0;
			int64_t pid = json_is_integer(jp) ? json_integer_value(jp) : tid;

			vmctf_event(c->ust ? &u[cpu] : &k[cpu], id, c, ev,
				    (uint64_t)json_integer_value(json_object_get(ev, "time")),
				    c->ust || (flags & VMCTF_TID), tid, pid);
		}
		json_decref(ev);
	}
	for (int t = 0; t < 2; t++) {
		struct vmctf_buf *b = t ? u : k;
		char *meta;
		bool any = false;

		for (unsigned c = 0; c < VMCTF_CPUS; c++)
			any |= b[c].any;
		if (!any) { /* no trace without events (LTTng writes none for a domain unused) */
			for (unsigned c = 0; c < VMCTF_CPUS; c++)
				free(b[c].p);
			continue;
		}
		meta = vmctf_metadata(t == 1, flags);
		snprintf(path, sizeof(path), "%s/%s", dir, t ? "ust/uid/0/64-bit" : "kernel");
		vmctf_mkdirs(path);
		snprintf(path, sizeof(path), "%s/%s/metadata", dir,
			 t ? "ust/uid/0/64-bit" : "kernel");
		vmctf_write_file(path, meta, strlen(meta));
		free(meta);
		for (unsigned c = 0; c < VMCTF_CPUS; c++) {
			if (b[c].any) {
				if (flags & VMCTF_BACKWARDS) {
					/* one more event, before the stream's first */
					json_t *ev = json_pack("{s:{}}", "fields");

					vmctf_event(&b[c], t ? 12 : 0, &vmctf_classes[t ? 12 : 0],
						    ev, b[c].first - 1, t || (flags & VMCTF_TID), 1,
						    1);
					json_decref(ev);
					b[c].last = b[c].first;
				}
				vmctf_close(&b[c]);
				if (flags & VMCTF_DISCARD)
					vmctf_discard_packet(&b[c], flags, c);
				snprintf(path, sizeof(path), "%s/%s/channel0_%u", dir,
					 t ? "ust/uid/0/64-bit" : "kernel", c);
				vmctf_write_file(path, b[c].p, b[c].len);
			}
			free(b[c].p);
		}
	}
	if (skipped)
		*skipped = nskip;
	return 0;
}

#endif
