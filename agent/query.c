// SPDX-License-Identifier: Apache-2.0
/*
 * A compiled query running on this host: open the object from bytes, size its maps from
 * the plan, set the -p filter and the scope, load it (the kernel's verifier runs; a rejection is mapped to
 * the generated line that caused it), attach every attach point through its provider, and
 * then read windows (bpfrt.c) into tables of mergeable states (table.c) or hand stream
 * records to the caller.
 *
 * States: started -> (windows, polls) -> stopped (detached; windows still readable) -> freed.
 * Ownership: the query owns the bpf_object, the runtime state, the links, the symbol cache
 * and its resolver strings; the plan and object bytes belong to the caller and must outlive
 * agent_query_start() only (the plan: the whole query).
 * Must never: leave a probe attached on any error path, or print to stdout.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "agent/agent.h"
#include "agent/attach_multi.h"
#include "agent/bpfrt.h"
#include "agent/budget.h"
#include "agent/result.h"
#include "agent/scope.h"
#include "probes/probes.h"
#include "base/log.h"

#define SPAN_MAX_AGE_NS (60ULL * 1000000000ULL)
#define VERIFIER_LOG_MAX (1u << 20)
#define AGENT_STREAM_QUEUE_BYTES (8u << 20) /* a stream's rows read, not yet handed out */

struct agent_query {
	const struct plan *plan;
	struct bpf_object *obj;
	struct bpfrt *rt;
	struct probe_links links; /* span starts and plain probes */
	struct probe_links end_links; /* span ends */
	struct sym_cache *syms;
	struct agent_resolver resolver;
	char host[256];
	agent_row_fn on_row;
	void *row_ctx;
	bool stopped;
	uint64_t window_start;
	struct agent_table *drain_into; /* during a drain */
	uint8_t zero_key[PLAN_MAX_KEY_SIZE];
	int drain_err;
	struct agent_budget *budget; /* NULL: no CPU budget (yet) */
	const struct plan *budget_plan; /* with budget_pct: what agent_query_budget_start() needs */
	double budget_pct; /* 0: none asked for, or started (or failed) already */
	bool budget_stopped;
};

const char *agent_version(void)
{
	return WEFT_VERSION;
}

void agent_err_line(const struct agent_err *e, int rc, char *buf, size_t sz)
{
	snprintf(buf, sz, "%s%s", e->msg[0] ? e->msg : probe_bpf_strerror(rc),
		 e->reloc    ? " [E_BTF_RELOC]" :
		 e->verifier ? " [E_VERIFIER]" :
		 e->attach   ? " [E_ATTACH]" :
			       "");
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

static void set_err(struct agent_err *err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void set_err(struct agent_err *err, const char *fmt, ...)
{
	va_list ap;

	if (!err)
		return;
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
}

/* ---------------------------------------------------------------- resolver */

static char *res_ksym(void *ctx, uint64_t addr)
{
	struct agent_query *q = ctx;
	char buf[256];

	if (!q->syms || sym_kernel(q->syms, addr, buf, sizeof(buf)) < 0)
		snprintf(buf, sizeof(buf), "0x%llx", (unsigned long long)addr);
	return strdup(buf);
}

static char *res_usym(void *ctx, uint64_t addr, uint32_t pid)
{
	struct agent_query *q = ctx;
	char buf[256];

	if (!q->syms || sym_user(q->syms, (pid_t)pid, addr, buf, sizeof(buf)) < 0)
		snprintf(buf, sizeof(buf), "0x%llx", (unsigned long long)addr);
	return strdup(buf);
}

/* Frames innermost first, joined by ';' (the folded-stack convention of flame graphs,
 * read right to left). */
static char *res_stack(void *ctx, int64_t id, bool user, uint32_t pid)
{
	struct agent_query *q = ctx;
	uint64_t ips[WEFT_STACK_DEPTH];
	char *out = NULL;
	size_t len = 0;
	FILE *f;
	int n, depth;

	if (id < 0)
		return strdup("[no stack]");
	depth = (int)(((uint64_t)id >> WEFT_STACK_DEPTH_SHIFT) & WEFT_STACK_DEPTH_MASK);
	n = bpfrt_stack_read(q->rt, (int64_t)((uint64_t)id & WEFT_STACK_ID_MASK), ips,
			     WEFT_STACK_DEPTH);
	if (n <= 0)
		return strdup("[stack lost]");
	if (depth > 0 && n > depth)
		n = depth; /* kstack(N): the N innermost frames */
	f = open_memstream(&out, &len);
	if (!f)
		return NULL;
	for (int i = 0; i < n; i++) {
		char buf[256];
		int rc = user ? sym_user(q->syms, (pid_t)pid, ips[i], buf, sizeof(buf)) :
				sym_kernel(q->syms, ips[i], buf, sizeof(buf));

		if (rc < 0)
			snprintf(buf, sizeof(buf), "0x%llx", (unsigned long long)ips[i]);
		fprintf(f, "%s%s", i ? ";" : "", buf);
	}
	fclose(f);
	return out;
}

/* ---------------------------------------------------------------- loading */

/* libbpf's messages while loading, kept to find what the verifier said. */
static char *load_log;
static size_t load_log_len;

static int capture_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	char buf[4096];
	va_list aq;
	int n;

	/* into the load log whole: libbpf prints the verifier's log in one call, longer than
	 * buf, and its last lines say what failed (a failed CO-RE relocation, say) */
	va_copy(aq, ap);
	if (load_log && load_log_len + 1 < VERIFIER_LOG_MAX) {
		int m = vsnprintf(load_log + load_log_len, VERIFIER_LOG_MAX - load_log_len, fmt,
				  aq);

		if (m > 0)
			load_log_len += (size_t)m < VERIFIER_LOG_MAX - 1 - load_log_len ?
						(size_t)m :
						VERIFIER_LOG_MAX - 1 - load_log_len;
	}
	va_end(aq);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	if (n <= 0)
		return 0;
	if ((size_t)n >= sizeof(buf))
		n = sizeof(buf) - 1;
	if (level == LIBBPF_DEBUG)
		log_debug("libbpf: %.*s", n && buf[n - 1] == '\n' ? n - 1 : n, buf);
	return 0;
}

/*
 * The verifier's log names the source line of each instruction as "; TEXT @ FILE:LINE" when
 * the object carries line info (clang -g).  The line before the error is what to show.
 */
static void explain_verifier(const char *log, struct agent_err *err, bool verbose)
{
	const char *begin = strstr(log, "-- BEGIN PROG LOAD LOG --");
	const char *end = begin ? strstr(begin, "-- END PROG LOAD LOG --") : NULL;
	const char *src = NULL, *msg = NULL, *p;
	size_t off = 0;

	if (!begin)
		begin = log;
	if (!end)
		end = log + strlen(log);
	/* the last source line, and the last message before the statistics */
	for (p = begin; p && p < end; p = memchr(p, '\n', end - p), p = p ? p + 1 : NULL) {
		if (p[0] == ';' && p[1] == ' ')
			src = p + 2;
		else if (strncmp(p, "processed ", 10) == 0 ||
			 strncmp(p, "verification time", 17) == 0)
			break;
		else if (p[0] != '\n' && p[0] != '-' && !(p[0] >= '0' && p[0] <= '9'))
			msg = p;
	}
	if (src) {
		const char *nl = memchr(src, '\n', end - src);
		const char *at = nl ? memmem(src, nl - src, " @ ", 3) : NULL;
		int n = (int)((at ? at : nl ? nl : end) - src);

		off += snprintf(err->detail + off, sizeof(err->detail) - off,
				"  generated line: %.*s%s%.*s%s\n", n, src, at ? "   (" : "",
				at ? (int)(nl - at - 3) : 0, at ? at + 3 : "", at ? ")" : "");
	}
	if (msg && off < sizeof(err->detail)) {
		const char *nl = memchr(msg, '\n', end - msg);

		off += snprintf(err->detail + off, sizeof(err->detail) - off, "  verifier: %.*s\n",
				(int)((nl ? nl : end) - msg), msg);
	}
	if (off < sizeof(err->detail))
		off += snprintf(err->detail + off, sizeof(err->detail) - off, "%s",
				verbose ? "" :
					  "  (-v shows the whole verifier log; "
					  "weft explain --dump=codegen shows the program)\n");
	if (verbose && off < sizeof(err->detail))
		snprintf(err->detail + off, sizeof(err->detail) - off, "%.*s", (int)(end - begin),
			 begin);
}

/*
 * A CO-RE relocation that found no match: the query was compiled against the BTF of a kernel
 * (WEFT_BTF, or another host's) whose struct has a member this kernel's lacks.  libbpf
 * poisons the instruction and the verifier refuses it; its log names the member as
 * "failed to resolve CO-RE relocation <byte_off> [ID] struct NAME___wq.FIELD (...)".  Says
 * so in the message (E_BTF_RELOC) instead of a bare verifier error.
 */
/*
 * A kernel symbol that an extension (`using 'FILE.bpf.c'`) declares `__ksym` and this kernel
 * does not name: libbpf says "extern 'NAME' (strong): not resolved".  Data symbols are in
 * /proc/kallsyms only with CONFIG_KALLSYMS_ALL, so the usual cause is a kernel without it.
 */
static bool ksym_unresolved(const char *log, struct agent_err *err)
{
	const char *p = strstr(log, "extern '");
	char name[64];
	size_t n = 0;

	if (!p || !strstr(p, "not resolved"))
		return false;
	p += strlen("extern '");
	while (p[n] && p[n] != '\'' && n < sizeof(name) - 1) {
		name[n] = p[n];
		n++;
	}
	name[n] = 0;
	set_err(err,
		"the kernel does not name the symbol '%s' that the query's extension reads "
		"(__ksym)",
		name);
	if (err)
		snprintf(err->detail, sizeof(err->detail),
			 "libbpf finds a __ksym through /proc/kallsyms, which lists data symbols "
			 "only on kernels built with CONFIG_KALLSYMS_ALL; check: grep -w %s "
			 "/proc/kallsyms",
			 name);
	return true;
}

static bool core_reloc_failed(const char *log, struct agent_err *err)
{
	const char *p = strstr(log, "failed to resolve CO-RE relocation"), *s, *end, *kw = "";
	char name[160];
	size_t n = 0;

	if (!p)
		return false;
	s = strstr(p, "] ");
	end = strchr(p, '\n');
	if (!s || (end && s > end))
		return false;
	s += 2;
	if (strncmp(s, "struct ", 7) == 0 || strncmp(s, "union ", 6) == 0) {
		kw = *s == 's' ? "struct " : "union ";
		s += strlen(kw);
	}
	/* "sock___wq.__sk_common.skc_dport (0:0:...)": the name without the ___wq flavour */
	while (*s && *s != ' ' && *s != '\n' && n < sizeof(name) - 1) {
		if (strncmp(s, "___wq", 5) == 0)
			s += 5;
		else
			name[n++] = *s++;
	}
	name[n] = 0;
	err->reloc = true;
	set_err(err,
		"the query reads %s%s, which this kernel does not have (CO-RE relocation failed: "
		"the query was compiled against another kernel's BTF)",
		kw, name);
	return true;
}

static int size_maps(struct bpf_object *obj, const struct plan *p, const struct agent_query_opts *o)
{
	uint32_t groups = o->max_groups ? o->max_groups : p->max_groups;
	uint32_t ring = o->ringbuf_bytes ? o->ringbuf_bytes : p->ringbuf_bytes;
	bool keyed = false;
	int rc = 0;

	for (int k = 0; k < p->nkeys; k++)
		keyed |= p->keys[k].kernel;
	if (p->aggregating && keyed)
		rc = bpfrt_map_resize(obj, "weft_agg", groups);
	if (!rc && !p->aggregating && ring)
		rc = bpfrt_map_resize(obj, WEFT_EVENTS_MAP, ring);
	if (!rc && !p->aggregating)
		rc = bpfrt_pcr_size(obj, ring);
	for (int s = 0; !rc && p->has_spans && s < AST_MAX_SOURCES; s++) {
		char name[32];

		snprintf(name, sizeof(name), "weft_span%d", s);
		if (bpf_object__find_map_by_name(obj, name))
			rc = bpfrt_map_resize(obj, name, p->max_spans);
	}
	return rc;
}

/*
 * A raw tracepoint program reads the tracepoint's arguments by position, as the kernel it was
 * compiled against passes them (plan_prog.raw_nargs, compiler/sema.c): on a kernel whose
 * tracepoint passes another number of them, the same positions hold other values (and the
 * verifier would accept most of them), so such a query is refused here, before anything loads.
 */
static int raw_args_check(const struct plan *p, struct agent_err *err)
{
	uint32_t sizes[PROBE_MAX_FIELDS];

	for (int i = 0; i < p->nprogs; i++) {
		const struct plan_prog *g = &p->progs[i];
		const char *ev;
		int n;

		if (!g->raw_tp)
			continue;
		if (g->first_attach < 0 || g->first_attach >= p->nattach) {
			set_err(err, "manifest: program %s has no attach point", g->name);
			return -EINVAL;
		}
		ev = p->attach[g->first_attach].target.event;
		n = probe_tp_btf_args(NULL, ev, sizes, PROBE_MAX_FIELDS);
		if (n == g->raw_nargs)
			continue;
		if (n < 0)
			set_err(err,
				"the query reads the raw tracepoint %s, whose arguments this "
				"kernel's BTF does not give (%s)",
				ev, strerror(-n));
		else
			set_err(err,
				"the query was compiled for a kernel whose tracepoint %s passes %d "
				"arguments; this kernel's passes %d",
				ev, g->raw_nargs, n);
		if (err)
			snprintf(
				err->detail, sizeof(err->detail),
				"compile it where the kernel's tracepoints are this host's, or with "
				"WEFT_RAW_TP=0 in the environment of `weft submit` or `weft run` "
				"(classic tracepoints)");
		return -EINVAL;
	}
	return 0;
}

/*
 * A classic tracepoint program reads its record's fields at the offsets of the format it was
 * compiled against (plan.tpf, the manifest's `tpfield` lines): on a kernel whose tracepoint
 * lays a field out otherwise it would read other bytes, and the verifier would take it (the
 * record's bytes are all readable).  So each field is checked against this host's own format
 * of every tracepoint the program attaches to, before anything loads.
 */
static int tp_layout_check(const struct plan *p, struct agent_err *err)
{
	for (int a = 0; a < p->nattach; a++) {
		const struct probe_target *t = &p->attach[a].target;
		struct probe_field *fields = NULL;
		const struct plan_tpfield *bad = NULL;
		const struct probe_field *have = NULL;
		bool any = false;
		int nf = 0, rc;

		for (int i = 0; i < p->ntpf && !any; i++)
			any = p->tpf[i].prog == p->attach[a].prog;
		if (!any)
			continue;
		rc = tracefs_format_read_host(t->category, t->event, &fields, &nf, NULL);
		if (rc) {
			set_err(err, "cannot read this host's format of tracepoint %s:%s: %s",
				t->category, t->event, strerror(-rc));
			return rc;
		}
		for (int i = 0; i < p->ntpf && !bad; i++) {
			const struct plan_tpfield *f = &p->tpf[i];

			if (f->prog != p->attach[a].prog)
				continue;
			have = NULL;
			for (int k = 0; k < nf && !have; k++)
				if (strcmp(fields[k].name, f->name) == 0)
					have = &fields[k];
			if (!have || have->offset != f->offset || have->size != f->size ||
			    have->is_signed != f->is_signed)
				bad = f;
		}
		if (bad && !have)
			set_err(err,
				"the query reads field %s of tracepoint %s:%s, which this kernel's "
				"tracepoint does not have",
				bad->name, t->category, t->event);
		else if (bad)
			set_err(err,
				"the query was compiled where tracepoint %s:%s has field %s at offset "
				"%u (%u bytes, %s); this kernel's has it at offset %u (%u bytes, %s)",
				t->category, t->event, bad->name, bad->offset, bad->size,
				bad->is_signed ? "signed" : "unsigned", have->offset, have->size,
				have->is_signed ? "signed" : "unsigned");
		free(fields);
		if (bad) {
			if (err)
				snprintf(
					err->detail, sizeof(err->detail),
					"agents do not compile: compile the query where the kernel "
					"lays the tracepoint out as this host's does, and submit it "
					"to the agents of such kernels (weft submit --only-host)");
			return -EINVAL;
		}
	}
	return 0;
}

/*
 * The scope's rodata before load (kernel/weft.bpf.h: weft_scope_kind, weft_scope_netns and,
 * for a namespace, where it is in a task: weft_netns_off_*).  An object compiled by a weft
 * that had no scopes lacks them: fine unscoped, refused scoped (it would trace the whole
 * machine).
 */
static int scope_set(struct bpf_object *obj, const struct agent_scope *s, struct agent_err *err)
{
	uint32_t kind = s ? (uint32_t)s->kind : WEFT_SCOPE_ALL, ino;
	int rc = bpfrt_rodata_set(obj, "weft_scope_kind", &kind, sizeof(kind));

	if (rc == -ENOENT && kind == WEFT_SCOPE_ALL)
		return 0;
	if (rc == 0 && kind == WEFT_SCOPE_NETNS) {
		static const char *const off[3] = { "weft_netns_off_nsproxy", "weft_netns_off_net",
						    "weft_netns_off_inum" };

		ino = (uint32_t)s->ino;
		rc = bpfrt_rodata_set(obj, "weft_scope_netns", &ino, sizeof(ino));
		for (int i = 0; i < 3 && rc == 0; i++) {
			rc = bpfrt_rodata_set(obj, off[i], &s->netns_off[i],
					      sizeof(s->netns_off[i]));
			if (rc == -ENOENT && i == 0) { /* an older weft's: it reads with CO-RE */
				rc = 0;
				break;
			}
		}
	}
	if (rc)
		set_err(err,
			"cannot scope the query to %s: %s (an object compiled by a weft without "
			"scopes?) [E_SCOPE]",
			s->text, probe_bpf_strerror(rc));
	return rc;
}

/* After load, before any attach: the cgroup directory into its slot (CGROUP_ARRAY). */
static int scope_fill(struct bpf_object *obj, const struct agent_scope *s, struct agent_err *err)
{
	struct bpf_map *m;
	uint32_t zero = 0;

	if (!s || s->kind != WEFT_SCOPE_CGROUP)
		return 0;
	m = bpf_object__find_map_by_name(obj, WEFT_SCOPE_CGROUP_MAP);
	if (!m || bpf_map__fd(m) < 0) {
		set_err(err, "cannot scope the query to %s: the object has no %s [E_SCOPE]",
			s->text, WEFT_SCOPE_CGROUP_MAP);
		return -ENOENT;
	}
	if (bpf_map_update_elem(bpf_map__fd(m), &zero, &s->fd, BPF_ANY) != 0) {
		int rc = -errno;

		set_err(err, "cannot scope the query to %s: %s [E_SCOPE]", s->text,
			probe_bpf_strerror(rc));
		return rc;
	}
	return 0;
}

static int on_sample(void *ctx, void *data, size_t size)
{
	struct agent_query *q = ctx;
	int rc;

	if (size < sizeof(struct weft_rec_hdr) || !q->on_row)
		return 0;
	rc = q->on_row(q->row_ctx, q->plan, (const char *)data + sizeof(struct weft_rec_hdr),
		       size - sizeof(struct weft_rec_hdr));
	return rc < 0 ? rc : 0; /* < 0: the poll stops after this record (it is consumed) */
}

int agent_query_start(const struct plan *p, const void *objbuf, size_t obj_sz,
		      const struct agent_query_opts *opts, struct agent_query **out,
		      struct agent_err *err)
{
	struct agent_query_opts o = { 0 };
	LIBBPF_OPTS(bpf_object_open_opts, oo, .object_name = "weft");
	struct agent_query *q;
	libbpf_print_fn_t prev;
	uint64_t multi, multi_done = 0; /* programs with multi-uprobe links; attached */
	uint32_t pid;
	int rc;

	if (err)
		memset(err, 0, sizeof(*err));
	if (opts)
		memcpy(&o, opts, opts->sz && opts->sz < sizeof(o) ? opts->sz : sizeof(o));
	*out = NULL;
	q = calloc(1, sizeof(*q));
	if (!q)
		return -ENOMEM;
	q->plan = p;
	q->on_row = o.on_row;
	q->row_ctx = o.row_ctx;
	if (o.host)
		snprintf(q->host, sizeof(q->host), "%s", o.host);
	else if (gethostname(q->host, sizeof(q->host) - 1) != 0)
		snprintf(q->host, sizeof(q->host), "localhost");
	q->syms = sym_cache_new();
	q->resolver = (struct agent_resolver){
		.ctx = q, .stack = res_stack, .usym = res_usym, .ksym = res_ksym, .host = q->host
	};

	bpfrt_libbpf_setup();
	q->obj = bpf_object__open_mem(objbuf, obj_sz, &oo);
	if (!q->obj) {
		rc = -errno;
		set_err(err, "not a loadable BPF object: %s", probe_bpf_strerror(rc));
		goto fail;
	}
	rc = size_maps(q->obj, p, &o);
	if (rc) {
		set_err(err, "cannot size the query's maps: %s", probe_bpf_strerror(rc));
		goto fail;
	}
	pid = (uint32_t)o.pid;
	rc = bpfrt_rodata_set(q->obj, "weft_target_pid", &pid, sizeof(pid));
	if (rc) {
		set_err(err, "cannot set the process filter: %s", probe_bpf_strerror(rc));
		goto fail;
	}
	rc = scope_set(q->obj, o.scope, err);
	if (rc)
		goto fail;

	rc = raw_args_check(p, err);
	if (!rc)
		rc = tp_layout_check(p, err);
	if (rc)
		goto fail;
	multi = agent_multi_prepare(q->obj, p);
	load_log = malloc(VERIFIER_LOG_MAX);
	load_log_len = 0;
	if (load_log)
		load_log[0] = 0;
	prev = libbpf_set_print(capture_print);
	rc = bpf_object__load(q->obj);
	libbpf_set_print(prev);
	if (rc) {
		bool verifier = load_log && (strstr(load_log, "-- BEGIN PROG LOAD LOG --") ||
					     strstr(load_log, "processed "));

		if (err) {
			err->verifier = verifier;
			if (verifier && core_reloc_failed(load_log, err)) {
				explain_verifier(load_log, err, o.verbose);
			} else if (verifier) {
				set_err(err,
					"the kernel's verifier rejected the generated program");
				explain_verifier(load_log, err, o.verbose);
			} else if (load_log && ksym_unresolved(load_log, err)) {
				/* said: a kernel symbol of an extension this kernel does not name */
			} else {
				set_err(err, "cannot load the query's BPF object: %s",
					probe_bpf_strerror(rc));
				if (load_log)
					snprintf(err->detail, sizeof(err->detail), "%s", load_log);
			}
		}
		free(load_log);
		load_log = NULL;
		goto fail;
	}
	free(load_log);
	load_log = NULL;

	rc = scope_fill(q->obj, o.scope, err);
	if (rc)
		goto fail;

	q->rt = bpfrt_open(q->obj);
	if (!q->rt) {
		rc = -errno;
		set_err(err, "the object lacks weft's runtime: %s", probe_bpf_strerror(rc));
		goto fail;
	}
	/*
	 * The budget starts after the probes are attached (agent_query_budget_start()), not here:
	 * turning the kernel's BPF statistics on flips a static key, which patches kernel text
	 * (~10 ms on the development VM) and would sit between the start and the first event.
	 */
	q->budget_plan = p;
	q->budget_pct = o.cpu_budget > 0 ? o.cpu_budget : 0;
	if (!p->aggregating) {
		rc = bpfrt_stream_open(q->rt, on_sample, q);
		if (rc) {
			set_err(err, "cannot open the ring buffer: %s", probe_bpf_strerror(rc));
			goto fail;
		}
		/*
		 * Records are read by a thread of their own and submitted without a wakeup
		 * (WEFT_REC_SUBMIT_LAZY): the thread wakes every 50 ms or when a quarter of the
		 * ring waits, instead of the traced program paying an interrupt and a wakeup
		 * for every row (docs/performance.md, "Stream rows").  A graph query's ring
		 * can then be small, which makes each record cheaper still (bpfrt.c).  The
		 * queue behind a stream is bounded lower: rows a slow output cannot take are
		 * counted lost (ringbuf_full) rather than held.
		 */
		rc = bpfrt_stream_reader_start(q->rt, p->graph ? 0 : AGENT_STREAM_QUEUE_BYTES);
		if (rc)
			weft_log(WEFT_LOG_WARN,
				 "no reader thread (%s): the ring is read between windows",
				 strerror(-rc));
	}
	/*
	 * Starts (and plain probes) first, then span ends; the span programs stay quiet until
	 * weft_ctl.live is set below, once every probe is attached.  So no span can begin
	 * while its end cannot fire (its start would linger until a later one replaced it, a
	 * loss) and no end fires for a call whose start probe was not yet there, except for the
	 * calls in flight at that one instant: at most one per thread (or per `on` key).
	 */
	for (int k = 0; k < 2 * p->nattach; k++) {
		const struct plan_attach *a = &p->attach[k % p->nattach];
		struct bpf_program *prog;
		struct probe_err perr = { 0 };

		if (a->is_end != (k >= p->nattach))
			continue;

		if (a->prog < 0 || a->prog >= p->nprogs) {
			rc = -EINVAL;
			set_err(err, "manifest: attach point %d has no program", k % p->nattach);
			goto fail;
		}
		prog = bpf_object__find_program_by_name(q->obj, p->progs[a->prog].name);
		if (!prog) {
			rc = -ENOENT;
			set_err(err, "the object has no program %s", p->progs[a->prog].name);
			goto fail;
		}
		if (multi & (1ull << a->prog)) {
			/* all the sites of the program at once, at its first attach point */
			if (multi_done & (1ull << a->prog))
				continue;
			multi_done |= 1ull << a->prog;
			rc = agent_multi_attach(p, a->prog, prog, o.pid,
						a->is_end ? &q->end_links : &q->links, &perr);
		} else {
			rc = probe_attach_target(prog, &a->target, a->cookie, o.pid,
						 a->is_end ? &q->end_links : &q->links, &perr);
		}
		if (rc) {
			if (err) {
				err->attach = true;
				set_err(err, "cannot attach %s: %s", a->target.name,
					perr.msg[0] ? perr.msg : probe_bpf_strerror(rc));
				snprintf(err->detail, sizeof(err->detail), "%s", perr.fix);
			}
			goto fail;
		}
	}
	rc = bpfrt_live_set(q->rt, true);
	if (rc) {
		set_err(err, "cannot start the query's spans: %s", strerror(-rc));
		goto fail;
	}
	q->window_start = mono_ns();
	*out = q;
	return 0;
fail:
	agent_query_free(q);
	return rc ? rc : -EINVAL;
}

/* ---------------------------------------------------------------- windows and streams */

static int on_entry(void *ctx, const void *key, const void *const *cpu_vals, unsigned int ncpu)
{
	struct agent_query *q = ctx;
	int rc = agent_table_add_kernel(q->drain_into, key ? key : q->zero_key, cpu_vals, ncpu,
					&q->resolver);

	if (rc && !q->drain_err)
		q->drain_err = rc;
	return 0;
}

int agent_query_window(struct agent_query *q, struct agent_table *into,
		       struct agent_window_stats *st)
{
	uint64_t misses = 0, spans_open = 0, open;
	int rc, n = 0;

	if (st) {
		memset(st, 0, sizeof(*st));
		st->index = bpfrt_windows(q->rt);
		st->start_ns = q->window_start;
	}
	rc = bpfrt_window_flip(q->rt);
	if (rc)
		return rc;
	q->window_start = mono_ns();
	if (q->plan->aggregating && into) {
		q->drain_into = into;
		q->drain_err = 0;
		n = bpfrt_agg_drain(q->rt, "weft_agg", on_entry, q);
		q->drain_into = NULL;
		if (n < 0)
			return n;
	}
	if (q->plan->has_spans)
		for (int s = 0; s < AST_MAX_SOURCES; s++) {
			char name[32];

			snprintf(name, sizeof(name), "weft_span%d", s);
			if (bpf_object__find_map_by_name(q->obj, name) &&
			    bpfrt_span_sweep(q->rt, name, SPAN_MAX_AGE_NS, &open) >= 0)
				spans_open += open;
		}
	if (st) {
		bpfrt_drops_read(q->rt, st->drops);
		if (bpfrt_prog_misses(q->rt, &misses) == 0)
			st->misses = misses;
		st->groups = n > 0 ? (uint64_t)n : 0;
		st->spans_open = spans_open;
		st->spans_known = q->plan->has_spans;
		st->end_ns = q->window_start;
	}
	return q->drain_err ? q->drain_err : 0;
}

int agent_query_poll(struct agent_query *q, int timeout_ms)
{
	if (q->plan->aggregating)
		return 0;
	return bpfrt_stream_poll(q->rt, timeout_ms);
}

int agent_query_fd(const struct agent_query *q)
{
	return q->plan->aggregating ? -1 : bpfrt_stream_fd(q->rt);
}

int agent_query_cost(const struct agent_query *q, int prog, struct agent_prog_cost *c)
{
	if (prog >= q->plan->nprogs)
		return -ENOENT;
	return agent_cost_read(q->obj, prog, c);
}

void agent_query_stop(struct agent_query *q)
{
	if (!q || q->stopped)
		return;
	/*
	 * Spans stop at one instant (weft_ctl.live = 0): a span in flight then is not counted
	 * (it had not ended while the query ran) and no end is noted for a call that starts
	 * later.  Then ends before starts, in the reverse of the attach order: should the flag
	 * not be written, a start left without its end is never counted, whereas an end left
	 * without its start would be noted.
	 */
	if (q->rt)
		bpfrt_live_set(q->rt, false);
	probe_links_destroy(&q->end_links);
	probe_links_destroy(&q->links);
	if (q->rt) /* from now on the caller's polls read what is left in the ring */
		bpfrt_stream_reader_stop(q->rt);
	q->stopped = true;
}

void agent_query_free(struct agent_query *q)
{
	if (!q)
		return;
	agent_query_stop(q);
	agent_budget_free(q->budget);
	if (q->rt)
		bpfrt_close(q->rt);
	if (q->obj)
		bpf_object__close(q->obj);
	if (q->syms)
		sym_cache_free(q->syms);
	free(q);
}

const struct plan *agent_query_plan(const struct agent_query *q)
{
	return q->plan;
}

const struct agent_resolver *agent_query_resolver(const struct agent_query *q)
{
	return &q->resolver;
}

/* ---------------------------------------------------------------- the CPU budget */

void agent_query_budget_start(struct agent_query *q)
{
	char why[256];

	if (q->budget || q->budget_pct <= 0 || q->stopped)
		return;
	q->budget = agent_budget_new(q->obj, q->budget_plan, q->budget_pct, why, sizeof(why));
	q->budget_pct = 0; /* once, whatever the outcome */
	if (!q->budget)
		log_warn("agent: the query's CPU budget cannot be enforced: %s", why);
}

int agent_query_budget(struct agent_query *q, struct agent_budget_report *r)
{
	int rc;

	agent_query_budget_start(q); /* if the caller has not */
	if (!q->budget || q->stopped)
		return 0;
	rc = agent_budget_check(q->budget, mono_ns(), r);
	if (rc == 1 && r->verdict == AGENT_BUDGET_STOPPED) {
		agent_query_stop(q);
		q->budget_stopped = true;
	}
	return rc;
}

bool agent_query_budget_stopped(const struct agent_query *q)
{
	return q->budget_stopped;
}
