// SPDX-License-Identifier: Apache-2.0
/*
 * `weft vm live`: the fused VM view of `weft vm analyze`, computed live from a cluster
 * (docs/vm.md "Live: the fused view (`weft vm live`)").  Stream queries (a select without
 * aggregates, docs/protocol.md "Row batches"), each limited to its agents:
 *
 *   host agents   `weft vm record`'s query set (vm_record_queries: KVM_RUN ioctls, sched
 *                 switches and wakeups, the kvm tracepoints this machine has), the hypercall
 *                 query's source replaced by --hypercall-source when given
 *   guest agent   sched_switch, and the synchronisation points of include/weft/vmsync.h
 *                 (usdt:BIN:weft:vm_sync: id, before, after)
 *
 * Their rows, relayed by the aggregator, become the events of two recorded streams in memory
 * (the conversion of `weft vm record`: vm_record_row_event(); a vm_sync row is the event
 * vm_sync at time `before` with fields id and after, as docs/vm.md's stream format has it).
 * Every --every D and at the end, both streams are written as `weft vm record` writes one
 * (vm_record_write(): sorted by time, rows lost said as weft_lost events) and analysed by
 * vm/fuse.c exactly as `weft vm analyze` analyses files: the host pass, the synchronisation
 * points joined by id into the offset and its error bound (vm/sync.h, whose arithmetic the
 * aggregator's `weft vm sync` pairs share), the guest's times converted to host times with
 * it, the guest pass; the report is vm/report.c's, text or JSON.  So the view printed at the
 * end is, byte for byte, what `weft vm analyze` prints over the streams --record-host and
 * --record-guest save.  A guest without a point seen on both sides is "unsynchronised": its
 * events are not put on the host's time line, never with a guessed offset.
 *
 * Rows lost anywhere (a full ring buffer on an agent, not shipped, not relayed to this client)
 * are counted per side and written into its stream as weft_lost, which the report warns of.
 * Bounded: VM_LIVE_MAX_BYTES of rows held in all (then the queries are cancelled, E_VM_LIMIT).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>
#include "agent/agent.h"
#include "agent/result.h"
#include "aggregator/aggd.h"
#include "base/units.h"
#include "compiler/plan.h"
#include "tools/weft.h"
#include "tools/weft_cluster.h"
#include "tools/weft_vm.h"
#include "vm/vm.h"

#define VM_LIVE_MAX_BYTES (1ULL << 30) /* rows held (as stream JSON), both sides */
#define VM_LIVE_MAX_Q 16
#define EXIT_UNSYNCED 4

/* clang-format off */
static const char live_help[] =
	"Usage: weft vm live --to ENDPOINT --server-key FILE --key FILE\n"
	"                    --host-agent NAME [--host-agent NAME ...] --guest-agent NAME\n"
	"                    --guest-binary PATH [OPTIONS]\n"
	"\n"
	"The fused view of `weft vm analyze` (each vCPU's states, the exit reasons, the\n"
	"guest's clock against the host's, the guest threads that lost most time to the\n"
	"host), computed live from a cluster's agents instead of recorded files.\n"
	"\n"
	"Stream queries are submitted, each only to its agents:\n"
	"  to the --host-agent agents: `weft vm record`'s query set (KVM_RUN ioctls, which\n"
	"    find the VMs and their vCPU threads; sched_switch, sched_wakeup; the kvm\n"
	"    tracepoints this machine has, kvm_hypercall among them)\n"
	"  to the --guest-agent agent: sched_switch, and the synchronisation points\n"
	"    usdt:PATH:weft:vm_sync(id, before, after) of the guest's helper PATH\n"
	"    (include/weft/vmsync.h)\n"
	"Their rows become a host and a guest event stream, which every --every D and at the\n"
	"end are analysed as `weft vm analyze --host H --guest G` analyses files: the points\n"
	"seen on both sides (the guest's readings before and after a hypercall, the host's\n"
	"kvm_hypercall with a0 = the point's id) give the offset host = guest + offset and\n"
	"its error bound; the guest's times are converted with it; each guest thread's time\n"
	"on a guest CPU n is split by the state of vCPU n under it.  Until a point is seen on\n"
	"both sides the guest is \"unsynchronised\": its events are not put on the host's\n"
	"time line and no thread is fused (never an offset of 0).  Points that contradict\n"
	"each other refuse the guest (E_VM_SYNC), as in `weft vm analyze`.\n"
	"\n"
	CLUSTER_OPTIONS_HELP
	"      --host-agent NAME  an agent of the host (its --host name); repeatable\n"
	"      --guest-agent NAME the guest's agent\n"
	"      --guest-binary PATH  the guest's program that fires weft:vm_sync (read here to\n"
	"                         compile the guest's query: the same file as in the guest)\n"
	"      --hypercall-source PROBE  a USDT probe (usdt:BIN:[PROVIDER:]NAME, arg0 the nr,\n"
	"                         arg1 the a0) in place of kvm:kvm_hypercall (a stand-in\n"
	"                         where KVM does not run guests, as in weft's tests)\n"
	"      --vm-pid PID       the guest's VM (its VMM's pid) when the host runs several\n"
	"      --every D          also print the view every D while the queries run\n"
	"      --for D            the queries end after D (default: Ctrl-C, which cancels\n"
	"                         them and waits for their last rows; twice leaves at once)\n"
	"      --format FMT       text (default) or json: each view one JSON object on one\n"
	"                         line, the object of `weft vm analyze --format json`\n"
	"      --intervals        json: every state interval of every vCPU and guest thread\n"
	"      --top N            guest threads listed, most time lost first (default 10)\n"
	"      --record-host FILE, --record-guest FILE\n"
	"                         at the end, also write the streams the last view was\n"
	"                         computed from (`weft vm analyze` over them prints it again)\n"
	"      --print-queries    print the queries and exit\n"
	"  -v, --verbose          show the compile cache and debug detail\n"
	"  -h, --help             this text\n"
	"\n"
	"Rows lost on the way (full ring buffers on the agents, rows not shipped, not relayed\n"
	"to this client) are counted per side and reported as the analysis reports a\n"
	"recorder's losses (a WARNING; \"lost_events\" in JSON).  On stderr: each query's id\n"
	"and agents, and at the end the VMs found (processes that called KVM_RUN) with their\n"
	"vCPU threads, as `weft vm record` lists them.\n"
	"\n"
	"Exit status: 0 ended synchronised, 1 the aggregator could not be reached or refused\n"
	"a query, or a stream was refused (its tag on stderr), 2 bad command line, 3 a query\n"
	"has errors, 4 ended unsynchronised.\n";
/* clang-format on */

enum {
	OPT_EVERY = VM_OPT_OWN,
	OPT_INTERVALS,
	OPT_TOP,
	OPT_REC_HOST,
	OPT_REC_GUEST,
	OPT_PRINT,
};

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* A side's events: a recorded stream being gathered. */
struct evs {
	struct vm_rec_ev *v;
	size_t n, cap, nq;
	uint64_t lost; /* not shipped or not relayed, from RowBatches and Results */
};

struct lq {
	struct vm_side s;
	const char *name; /* the stream event */
	bool guest, vm_sync;
	struct tool_rows_wait rw; /* its end: the last Result and each host's last rows */
	bool done;
	uint64_t received; /* rows of its batches that came here */
	uint64_t not_shipped, not_relayed;
	struct {
		uint64_t window, ringbuf;
	} * wins; /* rows lost to full ring buffers, per window (its latest revision) */
	size_t nwins;
};

/* A RowBatch whose rows are being turned into events: the next row and cells. */
struct pend {
	Weft__Envelope *m;
	struct lq *q;
	uint64_t row;
	size_t ii, it;
};

struct live {
	struct pend *pend; /* a FIFO */
	size_t npend, cappend;
	struct lq q[VM_LIVE_MAX_Q];
	size_t nq;
	struct evs host, guest;
	uint64_t bytes, seq;
	bool over, failed;
	bool json;
	unsigned views; /* views started (text: a blank line between two) */
	int64_t vm_pid;
	struct vm_report_opts ro;
};

static struct lq *lq_of(struct live *L, uint64_t id)
{
	for (size_t i = 0; i < L->nq; i++)
		if (L->q[i].s.id == id)
			return &L->q[i];
	return NULL;
}

static int evs_add(struct evs *e, json_t *o, size_t seq)
{
	if (e->n == e->cap) {
		size_t cap = e->cap ? e->cap * 2 : 4096;
		struct vm_rec_ev *v = realloc(e->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		e->v = v;
		e->cap = cap;
	}
	e->v[e->n++] = (struct vm_rec_ev){ json_integer_value(json_object_get(o, "time")), seq, o };
	return 0;
}

static void evs_free(struct evs *e)
{
	for (size_t i = 0; i < e->n; i++)
		json_decref(e->v[i].o);
	free(e->v);
	memset(e, 0, sizeof(*e));
}

/* Rows lost by a query so far: full ring buffers (per window), not shipped, not relayed. */
static uint64_t lq_lost(const struct lq *q)
{
	uint64_t n = q->not_shipped + q->not_relayed;

	for (size_t i = 0; i < q->nwins; i++)
		n += q->wins[i].ringbuf;
	return n;
}

/* One row of q (cells in the plan's order) as a stream event of its side. */
static void live_row(struct live *L, struct lq *q, const struct agent_cell *cells)
{
	const struct plan *p = q->s.res.plan;
	char *buf = NULL;
	size_t len = 0;
	uint64_t lost = 0;
	json_t *row, *o;
	FILE *m = open_memstream(&buf, &len);

	/* the row as `weft run --format json` prints it, then `weft vm record`'s event */
	if (!m || agent_cells_print(p, NULL, cells, (size_t)p->ncols, AGENT_FMT_JSON, m)) {
		if (m)
			fclose(m);
		free(buf);
		q->not_shipped++;
		return;
	}
	fclose(m);
	row = json_loadb(buf, len, 0, NULL);
	free(buf);
	o = row ? vm_record_row_event(q->name, row, &lost) : NULL;
	json_decref(row);
	if (!o) {
		q->not_shipped++;
		return;
	}
	if (q->vm_sync) {
		/* a point: at the guest's reading before the hypercall (docs/vm.md) */
		json_t *f = json_object_get(o, "fields");

		json_object_set(o, "time", json_object_get(f, "before"));
		json_object_del(f, "before");
	}
	L->bytes += len;
	if (L->bytes > VM_LIVE_MAX_BYTES) {
		L->over = true;
		json_decref(o);
		q->not_shipped++;
		return;
	}
	if (evs_add(q->guest ? &L->guest : &L->host, o, L->seq++)) {
		json_decref(o);
		q->not_shipped++;
	}
}

/*
 * A RowBatch's accounting, at once; its rows are turned into events later, a slice at a time
 * (live_work()), so that a big batch never keeps this client from its heartbeats (an
 * aggregator forgets a client silent for 3 of them, and its subscriptions with it).  Returns
 * whether the batch was queued (then the queue owns the envelope).
 */
static bool live_batch(struct live *L, struct lq *q, Weft__Envelope *m)
{
	const Weft__RowBatch *b = m->row_batch;
	const struct plan *p = q->s.res.plan;
	uint64_t rows = b->has_rows ? b->rows : 0, ntext = 0;
	void *nv;

	q->not_shipped += b->lost;
	if (b->has_dropped && b->dropped > q->not_relayed)
		q->not_relayed = b->dropped;
	tool_rows_batch(&q->rw, b);
	q->received += rows;
	/* the query's rows so far against those that came: what was missed here */
	if (b->has_total_rows && b->total_rows > q->received &&
	    b->total_rows - q->received > q->not_relayed)
		q->not_relayed = b->total_rows - q->received;
	if (!rows)
		return false;
	for (int c = 0; c < p->ncols; c++)
		ntext += agent_col_is_text(p, c);
	if (b->columns != (uint32_t)p->ncols || b->n_texts != rows * ntext ||
	    b->n_ints != rows * ((uint64_t)p->ncols - ntext)) {
		q->not_shipped += rows; /* cannot be read as the plan's rows: lost, and said */
		return false;
	}
	if (L->npend == L->cappend) {
		size_t cap = L->cappend ? L->cappend * 2 : 64;

		nv = realloc(L->pend, cap * sizeof(*L->pend));
		if (!nv) {
			q->not_shipped += rows;
			return false;
		}
		L->pend = nv;
		L->cappend = cap;
	}
	L->pend[L->npend++] = (struct pend){ .m = m, .q = q };
	return true;
}

/* Turns queued rows into events for about budget_ms (0: all of them). */
static void live_work(struct live *L, uint64_t budget_ms)
{
	uint64_t until = mono_ms() + budget_ms;
	struct agent_cell cells[WIRE_MAX_CELLS];
	size_t k = 0;

	for (; k < L->npend; k++) {
		struct pend *pd = &L->pend[k];
		const Weft__RowBatch *b = pd->m->row_batch;
		const struct plan *p = pd->q->s.res.plan;
		uint64_t rows = b->rows;

		for (; pd->row < rows; pd->row++) {
			if (budget_ms && (pd->row & 255) == 0 && mono_ms() >= until)
				goto out;
			for (int c = 0; c < p->ncols; c++) {
				if (agent_col_is_text(p, c)) {
					cells[c] = (struct agent_cell){
						.text = true,
						.s = (const char *)b->texts[pd->it].data,
						.len = b->texts[pd->it].len
					};
					pd->it++;
				} else {
					cells[c] = (struct agent_cell){ .i = b->ints[pd->ii++] };
				}
			}
			live_row(L, pd->q, cells);
		}
		wire_free(pd->m);
	}
out:
	if (k && k < L->npend)
		memmove(L->pend, L->pend + k, (L->npend - k) * sizeof(*L->pend));
	L->npend -= k;
}

static void live_result(struct lq *q, const Weft__Result *r)
{
	uint64_t rb = r->n_drops > WEFT_DROP_RINGBUF_FULL ? r->drops[WEFT_DROP_RINGBUF_FULL] : 0;
	void *nv;

	if (r->has_rows_dropped && r->rows_dropped > q->not_relayed)
		q->not_relayed = r->rows_dropped;
	tool_rows_result(&q->rw, r);
	for (size_t i = 0; i < q->nwins; i++)
		if (q->wins[i].window == r->window) {
			q->wins[i].ringbuf = rb;
			return;
		}
	if (!rb)
		return;
	nv = realloc(q->wins, (q->nwins + 1) * sizeof(*q->wins));
	if (!nv) {
		q->not_shipped += rb;
		return;
	}
	q->wins = nv;
	q->wins[q->nwins].window = r->window;
	q->wins[q->nwins++].ringbuf = rb;
}

/* A message from the aggregator (taken). */
static void live_msg(void *ctx, Weft__Envelope *m)
{
	struct live *L = ctx;
	struct lq *q;

	if (m->body_case == WEFT__ENVELOPE__BODY_ROW_BATCH &&
	    (q = lq_of(L, m->row_batch->query_id))) {
		if (live_batch(L, q, m))
			return; /* queued: live_work() frees it */
	} else if (m->body_case == WEFT__ENVELOPE__BODY_RESULT &&
		   (q = lq_of(L, m->result->query_id)))
		live_result(q, m->result);
	else if (m->body_case == WEFT__ENVELOPE__BODY_ERROR)
		fprintf(stderr, "weft vm live: %s\n", m->error->message);
	wire_free(m);
}

/*
 * What a view is computed from: each side's events (the live arrays for the last view, a copy
 * of them, not of the events, for one computed beside the loop), its queries and rows lost.
 */
struct view {
	struct {
		struct vm_rec_ev *v;
		size_t n, nq;
		uint64_t lost;
	} side[2]; /* host, guest */
	bool copied, json, last;
	unsigned views;
	int64_t vm_pid;
	struct vm_report_opts ro;
	const char *rec[2];
	int rc;
};

/* v from what came so far; copy: the arrays are copied (the loop goes on adding). */
static int view_take(struct live *L, struct view *v, bool copy)
{
	memset(v, 0, sizeof(*v));
	for (int k = 0; k < 2; k++) {
		struct evs *e = k ? &L->guest : &L->host;

		for (size_t i = 0; i < L->nq; i++)
			if (L->q[i].guest == (k == 1)) {
				v->side[k].lost += lq_lost(&L->q[i]);
				v->side[k].nq++;
			}
		v->side[k].n = e->n;
		v->side[k].v = e->v;
		if (copy && e->n) {
			v->side[k].v = malloc(e->n * sizeof(*e->v));
			if (!v->side[k].v) {
				if (k)
					free(v->side[0].v);
				return -ENOMEM;
			}
			memcpy(v->side[k].v, e->v, e->n * sizeof(*e->v));
		}
	}
	v->copied = copy;
	v->json = L->json;
	v->views = L->views;
	v->vm_pid = L->vm_pid;
	v->ro = L->ro;
	return 0;
}

static void view_free(struct view *v)
{
	if (v->copied)
		for (int k = 0; k < 2; k++)
			free(v->side[k].v);
	memset(v->side, 0, sizeof(v->side));
}

/* A side's stream as `weft vm record` writes it (its events sorted), into a malloc'd buffer. */
static int side_stream(struct view *v, int k, char **buf, size_t *len)
{
	FILE *m;
	int rc;

	*buf = NULL;
	*len = 0;
	m = open_memstream(buf, len);
	if (!m)
		return -ENOMEM;
	rc = vm_record_write(m, v->side[k].v, v->side[k].n, v->side[k].nq, v->side[k].lost);
	if (fclose(m) != 0 && !rc)
		rc = -EIO;
	return rc;
}

/*
 * The fused view of v, printed: 0 synchronised, 1 unsynchronised, -1 a stream refused (tag
 * on stderr).  With record paths, the streams it was computed from are written.  It touches
 * nothing of the loop's but the events (immutable once added; vm_record_write() takes a comm
 * out and puts it back), so it may run in a thread beside it.
 */
static int live_view(struct view *v)
{
	struct vm_analysis a;
	struct vm_err err = { 0 };
	struct vm_stream *hs = NULL, *gs = NULL;
	char *hb = NULL, *gb = NULL;
	size_t hl = 0, gl = 0;
	int rc = -1, prc;

	if (side_stream(v, 0, &hb, &hl) || side_stream(v, 1, &gb, &gl)) {
		fputs("weft vm live: E_VM_NOMEM: cannot write the streams\n", stderr);
		goto out_buf;
	}
	for (int k = 0; k < 2; k++) {
		const char *path = v->rec[k];
		FILE *f;

		if (!path)
			continue;
		f = fopen(path, "w");
		if (!f || fwrite(k ? gb : hb, 1, k ? gl : hl, f) != (k ? gl : hl) || fclose(f)) {
			fprintf(stderr, "weft vm live: %s: %s\n", path, strerror(errno));
			goto out_buf;
		}
	}
	vm_analysis_init(&a, 0);
	hs = vm_stream_open_mem("host", hb, hl, &err);
	gs = hs ? vm_stream_open_mem("guest", gb, gl, &err) : NULL;
	if (!gs || vm_host_pass(&a, hs, &err))
		goto out;
	if (vm_sync_pass(&a, gs, false, &err)) {
		if (!err.tag || strcmp(err.tag, "E_VM_NO_SYNC") != 0)
			goto out;
		/* no point on both sides yet: the guest stays off the host's time line */
		a.sync = (struct vm_sync){ .guest = true };
		a.guest_events = v->side[1].n;
		rc = 1;
	} else if (vm_stream_rewind(gs, &err) || vm_guest_pass(&a, gs, v->vm_pid, &err)) {
		goto out;
	} else {
		rc = 0;
	}
	if (!v->json) /* JSON: each view is the one object of `weft vm analyze` */
		printf("%s=== weft vm live: %s (%zu host and %zu guest events so far) ===\n",
		       v->views ? "\n" : "", v->last ? "the last view" : "a view", v->side[0].n,
		       v->side[1].n);
	prc = v->json ? vm_report_json(stdout, &a, &v->ro) : vm_report_text(stdout, &a, &v->ro);
	fflush(stdout);
	if (prc) {
		fprintf(stderr, "weft vm live: writing the report: %s\n", strerror(-prc));
		rc = -1;
	}
out:
	if (rc < 0 && err.tag)
		fprintf(stderr, "weft vm live: %s: %s\n", err.tag, err.msg);
	vm_analysis_free(&a);
	vm_stream_close(hs);
	vm_stream_close(gs);
out_buf:
	free(hb);
	free(gb);
	return rc;
}

/*
 * A view beside the loop (rows and heartbeats keep flowing while it is computed: an
 * aggregator forgets a client silent for 3 heartbeats).  A thread, not a child process: a
 * child of this multithreaded process may only call async-signal-safe functions, and the
 * view allocates (a child forked while a ZeroMQ thread held the allocator's lock, as
 * AddressSanitizer's allocator can be, waited for it forever).
 */
struct viewer {
	pthread_t th;
	struct view v;
	bool running;
	atomic_bool finished;
};

static void *viewer_main(void *arg)
{
	struct viewer *w = arg;

	w->v.rc = live_view(&w->v);
	atomic_store(&w->finished, true);
	return NULL;
}

/* Waits for the view being computed, if any. */
static void viewer_join(struct viewer *w)
{
	if (!w->running)
		return;
	pthread_join(w->th, NULL);
	view_free(&w->v);
	w->running = false;
}

/* Starts a view of what came so far, unless one is still being computed (the next waits). */
static void viewer_start(struct live *L, struct viewer *w)
{
	if (w->running && !atomic_load(&w->finished))
		return;
	viewer_join(w);
	fflush(stdout);
	if (view_take(L, &w->v, true))
		return; /* out of memory: the next --every tries again */
	atomic_store(&w->finished, false);
	if (pthread_create(&w->th, NULL, viewer_main, w)) {
		view_free(&w->v);
		return;
	}
	w->running = true;
	L->views++;
}

/*
 * The rows the aggregator took from the agents for each query (its status) against those
 * that came here: what it could not relay (a client it had forgotten while it was busy, a full
 * queue) is counted even when no later batch could say so.
 */
static void live_reconcile(struct live *L, struct aggd_client *cl, struct tool_cluster *tc)
{
	Weft__Envelope e, *reply = NULL;
	Weft__StatusRequest req;
	int rc;

	weft__status_request__init(&req);
	weft__envelope__init(&e);
	e.body_case = WEFT__ENVELOPE__BODY_STATUS_REQUEST;
	e.status_request = &req;
	rc = aggd_client_send(cl, &e);
	if (rc == 0)
		rc = tool_cluster_reply_other(cl, tc->timeout_ms, &reply, live_msg, L);
	if (rc <= 0 || reply->body_case != WEFT__ENVELOPE__BODY_STATUS_REPLY) {
		fprintf(stderr,
			"weft vm live: no status from %s: rows it could not relay are not "
			"counted\n",
			tc->to);
		wire_free(reply);
		return;
	}
	for (size_t i = 0; i < reply->status_reply->n_queries; i++) {
		const Weft__QueryStatus *qs = reply->status_reply->queries[i];
		struct lq *q = lq_of(L, qs->query_id);

		if (q && qs->has_rows && qs->rows > q->received &&
		    qs->rows - q->received > q->not_relayed)
			q->not_relayed = qs->rows - q->received;
	}
	wire_free(reply);
}

static int add_query(struct live *L, const char *name, bool guest, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int add_query(struct live *L, const char *name, bool guest, const char *fmt, ...)
{
	struct lq *q = &L->q[L->nq];
	va_list ap;
	int n;

	if (L->nq >= VM_LIVE_MAX_Q)
		return -ENOSPC;
	memset(q, 0, sizeof(*q));
	va_start(ap, fmt);
	n = vasprintf(&q->s.text, fmt, ap);
	va_end(ap);
	if (n < 0)
		return -ENOMEM;
	q->s.who = "weft vm live";
	q->s.what = name;
	q->name = name;
	q->guest = guest;
	q->vm_sync = strcmp(name, "vm_sync") == 0;
	L->nq++;
	return 0;
}

int vm_live_cmd(int argc, char **argv)
{
	static const struct option longopts[] = {
		CLUSTER_LONGOPTS,
		{ "host-agent", required_argument, NULL, VM_OPT_HOST_AGENT },
		{ "guest-agent", required_argument, NULL, VM_OPT_GUEST_AGENT },
		{ "guest-binary", required_argument, NULL, VM_OPT_GUEST_BINARY },
		{ "vm-pid", required_argument, NULL, VM_OPT_VM_PID },
		{ "hypercall-source", required_argument, NULL, VM_OPT_SOURCE },
		{ "every", required_argument, NULL, OPT_EVERY },
		{ "for", required_argument, NULL, VM_OPT_FOR },
		{ "format", required_argument, NULL, VM_OPT_FORMAT },
		{ "intervals", no_argument, NULL, OPT_INTERVALS },
		{ "top", required_argument, NULL, OPT_TOP },
		{ "record-host", required_argument, NULL, OPT_REC_HOST },
		{ "record-guest", required_argument, NULL, OPT_REC_GUEST },
		{ "print-queries", no_argument, NULL, OPT_PRINT },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static struct live L;
	struct tool_cluster tc = { 0 };
	struct vm_pair o = { .who = "weft vm live" };
	char forclause[64] = "";
	const char *rec_host = NULL, *rec_guest = NULL;
	uint64_t every_ms = 0, next = 0;
	struct viewer viewer = { 0 };
	struct view last;
	struct aggd_client *cl = NULL;
	bool print = false;
	int c, rc, verbose = 0, status = WEFT_EXIT_OK, sfd = -1, signals = 0, view = -1;

	memset(&L, 0, sizeof(L));
	L.ro.sz = sizeof(L.ro);
	optind = 1;
	while ((c = getopt_long(argc, argv, "vh", longopts, NULL)) != -1) {
		rc = tool_cluster_opt(&tc, c, optarg);
		if (rc < 0)
			return WEFT_EXIT_USAGE;
		if (rc)
			continue;
		rc = vm_pair_opt(&o, c, optarg);
		if (rc < 0)
			return WEFT_EXIT_USAGE;
		if (rc)
			continue;
		switch (c) {
		case OPT_EVERY: {
			uint64_t ns;

			if (!vm_duration_ok("weft vm live", "--every", optarg) ||
			    units_duration_parse(optarg, UNITS_NS_PER_SEC, &ns))
				return WEFT_EXIT_USAGE;
			every_ms = ns / 1000000ULL;
			break;
		}
		case OPT_INTERVALS:
			L.ro.intervals = true;
			break;
		case OPT_TOP: {
			char *end;
			long v;

			errno = 0;
			v = strtol(optarg, &end, 10);
			if (errno || *end || v < 1 || v > 1000000) {
				fprintf(stderr,
					"weft vm live: --top takes 1 to 1000000, not '%s'\n",
					optarg);
				return WEFT_EXIT_USAGE;
			}
			L.ro.top = (size_t)v;
			break;
		}
		case OPT_REC_HOST:
			rec_host = optarg;
			break;
		case OPT_REC_GUEST:
			rec_guest = optarg;
			break;
		case OPT_PRINT:
			print = true;
			break;
		case 'v':
			verbose++;
			break;
		case 'h':
			fputs(live_help, stdout);
			return WEFT_EXIT_OK;
		default:
			fputs("weft vm live: see `weft vm live --help`\n", stderr);
			return WEFT_EXIT_USAGE;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "weft vm live: unexpected argument '%s'\n", argv[optind]);
		return WEFT_EXIT_USAGE;
	}
	if (vm_pair_binary_check(&o))
		return WEFT_EXIT_USAGE;
	L.vm_pid = o.vm_pid;
	L.json = o.json;
	if (o.dur)
		snprintf(forclause, sizeof(forclause), " for %s", o.dur);
	/* the host's set: `weft vm record`'s, the hypercall's source replaced if asked */
	for (size_t i = 0; i < vm_record_nqueries; i++) {
		const struct vm_rq *r = &vm_record_queries[i];

		if (o.source && strcmp(r->name, "kvm_hypercall") == 0)
			rc = add_query(
				&L, r->name, false,
				"from %s select time, cpu, pid, tid, arg0 as nr, arg1 as a0%s",
				o.source, forclause);
		else if (!vm_rq_present(r)) {
			fprintf(stderr,
				"weft vm live: no tracepoint %s on this machine (no KVM module?): "
				"left out\n",
				r->tp);
			continue;
		} else
			rc = add_query(&L, r->name, false, "%s%s", r->query, forclause);
		if (rc)
			goto oom;
	}
	/* the guest's: its threads on its CPUs, its synchronisation points */
	for (size_t i = 0; i < vm_record_nqueries; i++)
		if (strcmp(vm_record_queries[i].name, "sched_switch") == 0 &&
		    add_query(&L, "sched_switch", true, "%s%s", vm_record_queries[i].query,
			      forclause))
			goto oom;
	if (add_query(&L, "vm_sync", true,
		      "from usdt:%s:weft:vm_sync select time, cpu, pid, tid, arg0 as id, arg1 as "
		      "before, arg2 as after%s",
		      o.binary, forclause))
		goto oom;
	if (print) {
		for (size_t i = 0; i < L.nq; i++)
			printf("%s %-20s %s\n", L.q[i].guest ? "guest" : "host ", L.q[i].name,
			       L.q[i].s.text);
		goto out;
	}
	if (vm_pair_agents_check(&o)) {
		status = WEFT_EXIT_USAGE;
		goto out;
	}
	tool_set_verbose(verbose);
	for (size_t i = 0; i < L.nq && status == WEFT_EXIT_OK; i++) {
		status = vm_side_compile(&L.q[i].s, verbose);
		if (status == WEFT_EXIT_OK &&
		    (L.q[i].s.res.plan->aggregating || L.q[i].s.res.plan->graph))
			status = WEFT_EXIT_FAIL; /* cannot happen: each is a select of columns */
	}
	if (status != WEFT_EXIT_OK)
		goto out;

	sfd = tool_signals_block(true);
	cl = tool_cluster_connect(&tc);
	if (!cl) {
		status = tc.usage_error ? WEFT_EXIT_USAGE : WEFT_EXIT_FAIL;
		goto out;
	}
	for (size_t i = 0; i < L.nq && status == WEFT_EXIT_OK; i++) {
		L.q[i].s.other = live_msg;
		L.q[i].s.ctx = &L;
		status = L.q[i].guest ? vm_side_submit(cl, &tc, &L.q[i].s, o.guests, o.nguests, 0) :
					vm_side_submit(cl, &tc, &L.q[i].s, o.hosts, o.nhosts, 0);
		if (status == WEFT_EXIT_OK)
			aggd_client_remember(cl, L.q[i].s.id);
	}
	if (status != WEFT_EXIT_OK) {
		for (size_t i = 0; i < L.nq; i++)
			vm_side_cancel(cl, L.q[i].s.id); /* a part of the set is of no use */
		goto out;
	}
	fprintf(stderr, "weft vm live: %zu queries running; the view %s\n", L.nq,
		every_ms ? "every --every and at the end" : "at the end (Ctrl-C ends)");
	next = mono_ms() + every_ms;
	for (;;) {
		Weft__Envelope *m = NULL;
		struct signalfd_siginfo si;
		bool all = true, stop = false;

		for (size_t i = 0; i < L.nq; i++) {
			/* the last Result, and the last rows of each host (a host late for the
			 * last window sends them after it) */
			if (!L.q[i].done)
				L.q[i].done =
					tool_rows_done(&L.q[i].rw, "weft vm live", L.q[i].s.id);
			if (!L.q[i].done && aggd_client_sub_gone(cl, L.q[i].s.id)) {
				/* its end will never come: say so, and fail */
				fprintf(stderr,
					"weft vm live: the %s query (%" PRIu64
					") is no longer known to %s (it ended and was forgotten, "
					"or the aggregator lost its state, while this client was "
					"away): rows after those received are not here\n",
					L.q[i].name, L.q[i].s.id, tc.to);
				L.q[i].done = true;
				L.failed = true;
			}
			all &= L.q[i].done;
		}
		if (all)
			break;
		if (sfd >= 0 && read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
			if (++signals > 1) {
				fprintf(stderr,
					"weft vm live: left before the queries' last rows\n");
				status = WEFT_EXIT_FAIL;
				goto out;
			}
			stop = true;
		}
		if (L.over && !L.failed) {
			fprintf(stderr,
				"weft vm live: E_VM_LIMIT: more than %llu bytes of rows: "
				"ending the queries\n",
				(unsigned long long)VM_LIVE_MAX_BYTES);
			L.failed = stop = true;
		}
		if (stop) {
			fprintf(stderr,
				"weft vm live: cancelling the queries; waiting for their last "
				"rows (Ctrl-C again to leave now)\n");
			for (size_t i = 0; i < L.nq; i++)
				vm_side_cancel(cl, L.q[i].s.id);
		}
		rc = aggd_client_recv(cl, L.npend ? 0 : 200, &m);
		if (rc < 0) {
			fprintf(stderr, "weft vm live: %s: %s\n", tc.to, strerror(-rc));
			status = WEFT_EXIT_FAIL;
			goto out;
		}
		if (rc > 0) {
			if (m->body_case == WEFT__ENVELOPE__BODY_RESULT &&
			    lq_of(&L, m->result->query_id))
				aggd_client_progress(cl, m->result->query_id,
						     m->result->window + 1);
			live_msg(&L, m);
		}
		live_work(&L, 20); /* a slice: heartbeats go out between two */
		if (every_ms && mono_ms() >= next) {
			viewer_start(&L, &viewer);
			next = mono_ms() + every_ms;
		}
	}
	viewer_join(&viewer);
	live_reconcile(&L, cl, &tc);
	live_work(&L, 0);
	if (view_take(&L, &last, false) == 0) {
		last.rec[0] = rec_host;
		last.rec[1] = rec_guest;
		last.last = true;
		view = live_view(&last);
	}
	vm_record_discovery(L.host.v, L.host.n);
	status = view < 0 || L.failed ? WEFT_EXIT_FAIL : view == 1 ? EXIT_UNSYNCED : WEFT_EXIT_OK;
	goto out;
oom:
	fputs("weft vm live: out of memory\n", stderr);
	status = WEFT_EXIT_FAIL;
out:
	viewer_join(&viewer); /* it reads the events freed below */
	aggd_client_free(cl);
	if (sfd >= 0)
		close(sfd);
	for (size_t i = 0; i < L.nq; i++) {
		vm_side_free(&L.q[i].s);
		tool_rows_free(&L.q[i].rw);
		free(L.q[i].wins);
	}
	for (size_t i = 0; i < L.npend; i++)
		wire_free(L.pend[i].m);
	free(L.pend);
	evs_free(&L.host);
	evs_free(&L.guest);
	return status;
}
