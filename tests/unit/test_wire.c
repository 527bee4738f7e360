// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests of the wire (agent/wire.c, the keys of agent/wire_keys.c, the allow-list of
 * aggregator/zap.c) and of the wire form of result tables
 * (agent/table.c agent_table_to_groups / agent_table_add_groups).
 *
 * Every body kind is built with every field set, encoded, decoded and encoded again: the
 * bytes must be identical.  Every rule of weft.proto is broken once, on a message packed by
 * protobuf-c directly (so that wire_encode's own checks do not stop it first): wire_decode must
 * refuse it with a reason naming the rule, and wire_encode must refuse to send it.  Tables go
 * through a real Partial on the wire and must come back equal (agent_table_equal); hostile
 * groups are refused without changing the table.  Plans come from compiling real queries.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/result.h"
#include "agent/wire.h"
#include "agent/wire_graph.h"
#include "aggregator/zap.h"
#include "compiler/compiler.h"
#include "compiler/plan.h"
#include "kernel/weft_agg.bpf.h"
#include "tests/skip.h"

/* ---- one message of every kind, every field set ---- */

struct full {
	Weft__Envelope e;
	Weft__Hello hello;
	Weft__Welcome welcome;
	Weft__Heartbeat heartbeat;
	Weft__Submit submit;
	Weft__QueryStart query_start;
	Weft__QueryStop query_stop;
	Weft__Partial partial;
	Weft__Ack ack;
	Weft__Result result;
	Weft__StatusRequest status_request;
	Weft__StatusReply status_reply;
	Weft__Subscribe subscribe;
	Weft__QueryError query_error;
	Weft__Error error;
	Weft__GraphBatch graph_batch;
	Weft__RowBatch row_batch;
	int64_t rints[4];
	ProtobufCBinaryData rtexts[2];
	Weft__GraphTask gt[2], *gtp[2];
	Weft__GraphEvent gev, *gevp[1];
	Weft__GraphEdge ged, *gedp[1];
	Weft__Group g[2], *gp[2];
	ProtobufCBinaryData states[2][2];
	Weft__AgentStatus as, *asp[1];
	Weft__QueryStatus qs, *qsp[1];
	Weft__VmSync vs;
	uint64_t ids[3];
	char *strs[3];
	uint64_t drops[9];
	uint8_t obj[64];
	uint8_t key0[9], key1[9], st[4][10];
};

static const Weft__Envelope__BodyCase all_bodies[] = {
	WEFT__ENVELOPE__BODY_HELLO,	   WEFT__ENVELOPE__BODY_WELCOME,
	WEFT__ENVELOPE__BODY_HEARTBEAT,	   WEFT__ENVELOPE__BODY_SUBMIT,
	WEFT__ENVELOPE__BODY_QUERY_START,  WEFT__ENVELOPE__BODY_QUERY_STOP,
	WEFT__ENVELOPE__BODY_PARTIAL,	   WEFT__ENVELOPE__BODY_ACK,
	WEFT__ENVELOPE__BODY_RESULT,	   WEFT__ENVELOPE__BODY_STATUS_REQUEST,
	WEFT__ENVELOPE__BODY_STATUS_REPLY, WEFT__ENVELOPE__BODY_SUBSCRIBE,
	WEFT__ENVELOPE__BODY_QUERY_ERROR,  WEFT__ENVELOPE__BODY_ERROR,
	WEFT__ENVELOPE__BODY_GRAPH_BATCH,  WEFT__ENVELOPE__BODY_ROW_BATCH,
};
#define NBODIES (sizeof(all_bodies) / sizeof(all_bodies[0]))

static void full_init(struct full *f, Weft__Envelope__BodyCase body)
{
	memset(f, 0, sizeof(*f));
	weft__envelope__init(&f->e);
	f->e.version = WIRE_VERSION;
	f->e.seq = 42;
	f->e.body_case = body;
	f->ids[0] = 7;
	f->ids[1] = 8;
	f->ids[2] = 1ull << 40;
	f->strs[0] = "alpha";
	f->strs[1] = "beta";
	f->strs[2] = "gamma";
	for (int i = 0; i < 9; i++)
		f->drops[i] = (uint64_t)i * 3;
	for (size_t i = 0; i < sizeof(f->obj); i++)
		f->obj[i] = (uint8_t)(i * 7);
	for (int g = 0; g < 2; g++) {
		weft__group__init(&f->g[g]);
		f->gp[g] = &f->g[g];
		f->g[g].key.data = g ? f->key1 : f->key0;
		f->g[g].key.len = 9;
		f->key0[0] = f->key1[0] = 'i';
		f->key1[1] = 1;
		f->g[g].n_states = 2;
		f->g[g].states = f->states[g];
		for (int s = 0; s < 2; s++) {
			f->st[g * 2 + s][0] = (uint8_t)(g * 2 + s + 1);
			f->states[g][s].data = f->st[g * 2 + s];
			f->states[g][s].len = 10;
		}
	}
	switch (body) {
	case WEFT__ENVELOPE__BODY_HELLO:
		weft__hello__init(&f->hello);
		f->hello.role = "agent";
		f->hello.host = "web-1";
		f->hello.version = "0.1.0";
		f->hello.instance = 0x1234567890abcdefull;
		f->hello.kernel = "6.18.0";
		f->hello.scope = "netns:/run/netns/tenant a";
		f->hello.features = f->strs;
		f->hello.n_features = 3;
		f->hello.running = f->ids;
		f->hello.n_running = 3;
		f->e.hello = &f->hello;
		break;
	case WEFT__ENVELOPE__BODY_WELCOME:
		weft__welcome__init(&f->welcome);
		f->welcome.aggregator = "root";
		f->welcome.instance = 99;
		f->welcome.heartbeat_ms = 1000;
		f->welcome.has_last_seq = true;
		f->welcome.last_seq = 17;
		f->e.welcome = &f->welcome;
		break;
	case WEFT__ENVELOPE__BODY_HEARTBEAT:
		weft__heartbeat__init(&f->heartbeat);
		f->heartbeat.time_ns = 1700000000000000000ull;
		f->heartbeat.running = f->ids;
		f->heartbeat.n_running = 2;
		f->heartbeat.has_spooled = true;
		f->heartbeat.spooled = 3;
		f->heartbeat.has_spool_dropped = true;
		f->heartbeat.spool_dropped = 1;
		f->e.heartbeat = &f->heartbeat;
		break;
	case WEFT__ENVELOPE__BODY_SUBMIT:
		weft__submit__init(&f->submit);
		f->submit.query = "from syscall:read\nselect count()";
		f->submit.manifest.data = (uint8_t *)"weft-manifest 1\n";
		f->submit.manifest.len = 16;
		f->submit.object.data = f->obj;
		f->submit.object.len = sizeof(f->obj);
		f->submit.has_follow = true;
		f->submit.follow = true;
		f->submit.only_hosts = f->strs; /* weft vm sync's sides */
		f->submit.n_only_hosts = 2;
		f->submit.has_vm_sync_host = true;
		f->submit.vm_sync_host = 4;
		f->e.submit = &f->submit;
		break;
	case WEFT__ENVELOPE__BODY_QUERY_START:
		weft__query_start__init(&f->query_start);
		f->query_start.query_id = 5;
		f->query_start.query = "from syscall:read select count()";
		f->query_start.manifest.data = (uint8_t *)"weft-manifest 1\n";
		f->query_start.manifest.len = 16;
		f->query_start.object.data = f->obj;
		f->query_start.object.len = sizeof(f->obj);
		f->query_start.epoch_realtime_ns = 1000;
		f->query_start.has_end_realtime_ns = true;
		f->query_start.end_realtime_ns = 5000;
		f->e.query_start = &f->query_start;
		break;
	case WEFT__ENVELOPE__BODY_QUERY_STOP:
		weft__query_stop__init(&f->query_stop);
		f->query_stop.query_id = 5;
		f->e.query_stop = &f->query_stop;
		break;
	case WEFT__ENVELOPE__BODY_PARTIAL:
		weft__partial__init(&f->partial);
		f->partial.query_id = 5;
		f->partial.window = 3;
		f->partial.host = "web-1";
		f->partial.groups = f->gp;
		f->partial.n_groups = 2;
		f->partial.drops = f->drops;
		f->partial.n_drops = 9;
		f->partial.has_misses = true;
		f->partial.misses = 4;
		f->partial.has_overflow = true;
		f->partial.overflow = 2;
		f->partial.hosts = f->strs;
		f->partial.n_hosts = 2;
		f->partial.has_last = true;
		f->partial.last = true;
		f->partial.stopped = "query stopped by its CPU budget: ...\n [E_CPU_BUDGET]";
		f->e.partial = &f->partial;
		break;
	case WEFT__ENVELOPE__BODY_ACK:
		weft__ack__init(&f->ack);
		f->ack.upto = 41;
		f->e.ack = &f->ack;
		break;
	case WEFT__ENVELOPE__BODY_RESULT:
		weft__result__init(&f->result);
		f->result.query_id = 5;
		f->result.window = 3;
		f->result.groups = f->gp;
		f->result.n_groups = 2;
		f->result.drops = f->drops;
		f->result.n_drops = 9;
		f->result.has_misses = true;
		f->result.misses = 1;
		f->result.has_overflow = true;
		f->result.overflow = 1;
		f->result.hosts = f->strs;
		f->result.n_hosts = 2;
		f->result.missing = f->strs + 2;
		f->result.n_missing = 1;
		f->result.has_revision = true;
		f->result.revision = 2;
		f->result.has_last = true;
		f->result.last = true;
		f->result.has_manifest = true;
		f->result.manifest.data = (uint8_t *)"weft-manifest 1\n";
		f->result.manifest.len = 16;
		/* a side of a VM synchronisation: offset -7000000123 within +-2 */
		weft__vm_sync__init(&f->vs);
		f->vs.host_query = 4;
		f->vs.guest_query = 5;
		f->vs.points = 3;
		f->vs.has_refused = true;
		f->vs.refused = 1;
		f->vs.has_synced = f->vs.synced = true;
		f->vs.has_offset_ns = f->vs.has_error_ns = true;
		f->vs.has_lo_ns = f->vs.has_hi_ns = true;
		f->vs.offset_ns = -7000000123;
		f->vs.error_ns = 2;
		f->vs.lo_ns = -7000000125;
		f->vs.hi_ns = -7000000121;
		f->result.vm_sync = &f->vs;
		f->e.result = &f->result;
		break;
	case WEFT__ENVELOPE__BODY_STATUS_REQUEST:
		weft__status_request__init(&f->status_request);
		f->status_request.has_query_id = true;
		f->status_request.query_id = 5;
		f->e.status_request = &f->status_request;
		break;
	case WEFT__ENVELOPE__BODY_STATUS_REPLY:
		weft__status_reply__init(&f->status_reply);
		weft__agent_status__init(&f->as);
		weft__query_status__init(&f->qs);
		f->as.host = "web-1";
		f->as.version = "0.1.0";
		f->as.kernel = "6.18.0";
		f->as.scope = "cgroup:/sys/fs/cgroup/t\xc3\xa9nant";
		f->as.features = f->strs;
		f->as.n_features = 2;
		f->as.alive = true;
		f->as.last_seen_ms = 12;
		f->as.running = f->ids;
		f->as.n_running = 1;
		f->as.role = "agent";
		f->as.has_spooled = true;
		f->as.spooled = 0;
		f->asp[0] = &f->as;
		f->qs.query_id = 5;
		f->qs.query = "from syscall:read select count()";
		f->qs.windows = 9;
		f->qs.hosts = f->strs;
		f->qs.n_hosts = 3;
		f->qs.has_started_realtime_ns = true;
		f->qs.started_realtime_ns = 1000;
		f->qs.has_ended = true;
		f->qs.ended = false;
		f->qsp[0] = &f->qs;
		f->status_reply.aggregator = "root";
		f->status_reply.agents = f->asp;
		f->status_reply.n_agents = 1;
		f->status_reply.queries = f->qsp;
		f->status_reply.n_queries = 1;
		f->status_reply.has_rejected = true;
		f->status_reply.rejected = 6;
		f->e.status_reply = &f->status_reply;
		break;
	case WEFT__ENVELOPE__BODY_SUBSCRIBE:
		weft__subscribe__init(&f->subscribe);
		f->subscribe.query_id = 5;
		f->e.subscribe = &f->subscribe;
		break;
	case WEFT__ENVELOPE__BODY_QUERY_ERROR:
		weft__query_error__init(&f->query_error);
		f->query_error.query_id = 5;
		f->query_error.message = "cannot attach uprobe:/bin/x:f [E_ATTACH]";
		f->query_error.detail = "no such symbol\n\tf";
		f->e.query_error = &f->query_error;
		break;
	case WEFT__ENVELOPE__BODY_ERROR:
		weft__error__init(&f->error);
		f->error.message = "not welcomed: send Hello first";
		f->error.has_query_id = true;
		f->error.query_id = 5;
		f->error.has_in_reply_to = true;
		f->error.in_reply_to = 41;
		f->e.error = &f->error;
		break;
	case WEFT__ENVELOPE__BODY_GRAPH_BATCH:
		weft__graph_batch__init(&f->graph_batch);
		f->graph_batch.query_id = 5;
		f->graph_batch.window = 2;
		f->graph_batch.host = "web-1";
		for (int i = 0; i < 2; i++) {
			weft__graph_task__init(&f->gt[i]);
			f->gt[i].trace_hi = 0x0af7651916cd43ddull;
			f->gt[i].trace_lo = 0x8448eb211c80319cull;
			f->gt[i].id = (uint64_t)i + 1;
			f->gt[i].has_parent = i == 1;
			f->gt[i].parent = 1;
			f->gt[i].service = "shop";
			f->gt[i].name = i ? "db \xe2\x86\x92 query" : "GET /cart";
			f->gt[i].has_pid = f->gt[i].has_tid = true;
			f->gt[i].pid = 100;
			f->gt[i].tid = 101 + i;
			f->gt[i].start_ns = 1700000000000000000ll + i * 1000;
			f->gt[i].has_end_ns = i == 0; /* the second never ended */
			f->gt[i].end_ns = f->gt[i].start_ns + 5000;
			f->gt[i].has_status = true;
			f->gt[i].status = 1;
			f->gt[i].has_source = true;
			f->gt[i].source = GRAPH_SRC_WEFT;
			f->gt[i].attrs = "{\"k\":\"v\"}";
			f->gtp[i] = &f->gt[i];
		}
		f->graph_batch.tasks = f->gtp;
		f->graph_batch.n_tasks = 2;
		weft__graph_event__init(&f->gev);
		f->gev.trace_hi = f->gt[0].trace_hi;
		f->gev.trace_lo = f->gt[0].trace_lo;
		f->gev.task = 2;
		f->gev.time_ns = f->gt[1].start_ns + 10;
		f->gev.name = "retry";
		f->gevp[0] = &f->gev;
		f->graph_batch.events = f->gevp;
		f->graph_batch.n_events = 1;
		weft__graph_edge__init(&f->ged);
		f->ged.trace_hi = f->gt[0].trace_hi;
		f->ged.trace_lo = f->gt[0].trace_lo;
		f->ged.kind = GRAPH_EDGE_MESSAGE;
		f->ged.from_task = 2;
		f->ged.to_task = 77; /* on another host */
		f->gedp[0] = &f->ged;
		f->graph_batch.edges = f->gedp;
		f->graph_batch.n_edges = 1;
		f->graph_batch.has_last = true;
		f->graph_batch.last = true;
		f->graph_batch.has_lost = true;
		f->graph_batch.lost = 3;
		f->graph_batch.has_aggs = true;
		f->graph_batch.aggs.data = f->obj;
		f->graph_batch.aggs.len = sizeof(f->obj);
		f->e.graph_batch = &f->graph_batch;
		break;
	case WEFT__ENVELOPE__BODY_ROW_BATCH:
		/* two rows of three columns: integer, text, integer */
		weft__row_batch__init(&f->row_batch);
		f->row_batch.query_id = 5;
		f->row_batch.window = 2;
		f->row_batch.host = "web-1";
		f->row_batch.has_columns = f->row_batch.has_rows = true;
		f->row_batch.columns = 3;
		f->row_batch.rows = 2;
		f->rints[0] = 1000;
		f->rints[1] = -7;
		f->rints[2] = 2000;
		f->rints[3] = 1ll << 40;
		f->row_batch.n_ints = 4;
		f->row_batch.ints = f->rints;
		f->rtexts[0] = (ProtobufCBinaryData){ 5, (uint8_t *)"bash\n" };
		f->rtexts[1] = (ProtobufCBinaryData){ 0, NULL };
		f->row_batch.n_texts = 2;
		f->row_batch.texts = f->rtexts;
		f->row_batch.has_lost = true;
		f->row_batch.lost = 3;
		f->row_batch.has_last = f->row_batch.last = true;
		f->row_batch.has_dropped = true;
		f->row_batch.dropped = 1;
		f->e.row_batch = &f->row_batch;
		break;
	default:
		fail();
	}
}

/* protobuf-c's own packing: no checks, so a test can put anything on the wire. */
static uint8_t *raw_pack(const Weft__Envelope *e, size_t *len)
{
	uint8_t *b;

	*len = weft__envelope__get_packed_size(e);
	b = malloc(*len + 1);
	assert_non_null(b);
	weft__envelope__pack(e, b);
	return b;
}

/* ---- round trips ---- */

static void test_round_trip_every_body(void **state)
{
	for (size_t i = 0; i < NBODIES; i++) {
		struct full f;
		void *a, *b;
		size_t la, lb;
		char why[256];
		Weft__Envelope *d;

		full_init(&f, all_bodies[i]);
		assert_int_equal(wire_encode(&f.e, &a, &la), 0);
		d = wire_decode(a, la, why, sizeof(why));
		if (!d)
			fail_msg("%s: %s", wire_body_name(all_bodies[i]), why);
		assert_int_equal(d->version, WIRE_VERSION);
		assert_int_equal(d->seq, 42);
		assert_int_equal(d->body_case, all_bodies[i]);
		assert_int_equal(wire_encode(d, &b, &lb), 0);
		assert_int_equal(la, lb);
		assert_memory_equal(a, b, la);
		/* a few fields by hand, beyond byte equality */
		switch (all_bodies[i]) {
		case WEFT__ENVELOPE__BODY_HELLO:
			assert_string_equal(d->hello->host, "web-1");
			assert_int_equal(d->hello->n_features, 3);
			assert_string_equal(d->hello->features[2], "gamma");
			assert_int_equal(d->hello->running[2], 1ull << 40);
			break;
		case WEFT__ENVELOPE__BODY_PARTIAL:
			assert_int_equal(d->partial->n_groups, 2);
			assert_int_equal(d->partial->groups[1]->states[1].data[0], 4);
			assert_int_equal(d->partial->drops[8], 24);
			assert_true(d->partial->last);
			break;
		case WEFT__ENVELOPE__BODY_QUERY_START:
			assert_int_equal(d->query_start->object.len, 64);
			assert_memory_equal(d->query_start->object.data, f.obj, 64);
			assert_int_equal(d->query_start->end_realtime_ns, 5000);
			break;
		case WEFT__ENVELOPE__BODY_ROW_BATCH:
			assert_int_equal(d->row_batch->rows, 2);
			assert_int_equal(d->row_batch->n_ints, 4);
			assert_int_equal(d->row_batch->ints[1], -7);
			assert_int_equal(d->row_batch->ints[3], 1ll << 40);
			assert_int_equal(d->row_batch->texts[0].len, 5);
			assert_memory_equal(d->row_batch->texts[0].data, "bash\n", 5);
			assert_int_equal(d->row_batch->texts[1].len, 0);
			assert_int_equal(d->row_batch->dropped, 1);
			break;
		case WEFT__ENVELOPE__BODY_WELCOME:
			assert_true(d->welcome->has_last_seq);
			assert_int_equal(d->welcome->last_seq, 17);
			break;
		default:
			break;
		}
		wire_free(d);
		free(a);
		free(b);
	}
}

/* The spool's wrapper makes the same bytes as a full encode of the same envelope. */
static void test_envelope_wrap(void **state)
{
	struct full f;
	void *a, *w;
	size_t la, lw, plen;
	uint8_t *packed;
	char why[256];
	Weft__Envelope *d;

	full_init(&f, WEFT__ENVELOPE__BODY_PARTIAL);
	f.e.seq = 300; /* a two-byte varint */
	assert_int_equal(wire_encode(&f.e, &a, &la), 0);
	plen = weft__partial__get_packed_size(&f.partial);
	packed = malloc(plen);
	assert_non_null(packed);
	weft__partial__pack(&f.partial, packed);
	assert_int_equal(
		wire_envelope_wrap(300, WEFT__ENVELOPE__BODY_PARTIAL, packed, plen, &w, &lw), 0);
	assert_int_equal(la, lw);
	assert_memory_equal(a, w, la);
	d = wire_decode(w, lw, why, sizeof(why));
	assert_non_null(d);
	assert_int_equal(d->seq, 300);
	wire_free(d);
	free(w);
	assert_int_equal(wire_envelope_wrap(0, WEFT__ENVELOPE__BODY_PARTIAL, packed, plen, &w, &lw),
			 -EINVAL);
	assert_int_equal(
		wire_envelope_wrap(1, WEFT__ENVELOPE__BODY__NOT_SET, packed, plen, &w, &lw),
		-EINVAL);
	free(packed);
	free(a);
}

/* ---- every rule refuses ---- */

struct breakage {
	Weft__Envelope__BodyCase body;
	const char *reason; /* a substring of wire_decode's reason */
	void (*apply)(struct full *f);
};

static char long_name[WIRE_MAX_STRING + 2];
static char graph_long[GRAPH_MAX_STR + 2];
static char long_query[WIRE_MAX_QUERY + 2];
static char *many_strs[WIRE_MAX_STRING];

static void b_version(struct full *f)
{
	f->e.version = 2;
}
static void b_seq0(struct full *f)
{
	f->e.seq = 0;
}
static void b_role(struct full *f)
{
	f->hello.role = "root";
}
static void b_host_empty(struct full *f)
{
	f->hello.host = "";
}
static void b_host_ctl(struct full *f)
{
	f->hello.host = "web\n1";
}
static void b_host_utf8(struct full *f)
{
	f->hello.host = "web\xc3\x28";
}
static void b_host_long(struct full *f)
{
	f->hello.host = long_name;
}
static void b_scope_ctl(struct full *f)
{
	f->hello.scope = "netns:/run/netns/a\nb";
}
static void b_scope_long(struct full *f)
{
	f->hello.scope = long_name;
}
static void b_status_scope_utf8(struct full *f)
{
	f->as.scope = "cgroup:/sys/fs/cgroup/\xc3\x28";
}
static void b_version_empty(struct full *f)
{
	f->hello.version = "";
}
static void b_instance0(struct full *f)
{
	f->hello.instance = 0;
}
static void b_features_many(struct full *f)
{
	f->hello.features = many_strs;
	f->hello.n_features = 1025;
}
static void b_feature_empty(struct full *f)
{
	f->strs[1] = "";
}
static void b_running0(struct full *f)
{
	f->ids[1] = 0;
}
static void b_hb_small(struct full *f)
{
	f->welcome.heartbeat_ms = 1;
}
static void b_hb_large(struct full *f)
{
	f->welcome.heartbeat_ms = 3600001;
}
static void b_welcome_instance(struct full *f)
{
	f->welcome.instance = 0;
}
static void b_welcome_name(struct full *f)
{
	f->welcome.aggregator = "";
}
static void b_submit_query(struct full *f)
{
	f->submit.query = long_query;
}
static void b_submit_object(struct full *f)
{
	f->submit.object.len = 0;
}
static void b_submit_manifest(struct full *f)
{
	f->submit.manifest.len = 0;
}
static void b_qs_id(struct full *f)
{
	f->query_start.query_id = 0;
}
static void b_qs_epoch(struct full *f)
{
	f->query_start.epoch_realtime_ns = 0;
}
static void b_qs_end(struct full *f)
{
	f->query_start.end_realtime_ns = 999;
}
static void b_qs_object(struct full *f)
{
	f->query_start.object.len = 0;
}
static void b_stop_id(struct full *f)
{
	f->query_stop.query_id = 0;
}
static void b_partial_id(struct full *f)
{
	f->partial.query_id = 0;
}
static void b_partial_host(struct full *f)
{
	f->partial.host = "";
}
static void b_partial_states(struct full *f)
{
	static ProtobufCBinaryData many[257];

	for (int i = 0; i < 257; i++) {
		many[i].data = f->st[0];
		many[i].len = 10;
	}
	f->g[1].states = many;
	f->g[1].n_states = 257;
}
static void b_partial_state_empty(struct full *f)
{
	f->states[0][1].len = 0;
}
static void b_partial_key_long(struct full *f)
{
	static uint8_t key[(64u << 10) + 1];

	f->g[0].key.data = key;
	f->g[0].key.len = sizeof(key);
}
static void b_partial_drops(struct full *f)
{
	static uint64_t drops[65];

	f->partial.drops = drops;
	f->partial.n_drops = 65;
}
static void b_partial_hosts(struct full *f)
{
	f->strs[0] = "a b\x01";
}
static void b_partial_missing(struct full *f)
{
	/* a child aggregator's partial names hosts missing: checked like a Result's */
	f->partial.missing = f->strs + 2;
	f->partial.n_missing = 1;
	f->strs[2] = "";
}
static void b_partial_stopped_long(struct full *f)
{
	f->partial.stopped = long_name;
}
static void b_partial_stopped_ctl(struct full *f)
{
	f->partial.stopped = "stopped\a";
}
static void b_partial_stopped_not_last(struct full *f)
{
	/* only a host's last partial can say the query stopped there */
	f->partial.last = false;
}
static void b_result_id(struct full *f)
{
	f->result.query_id = 0;
}
static void b_result_missing(struct full *f)
{
	f->strs[2] = "";
}
/* host names have one bound, WIRE_MAX_HOST, in every field and list that holds one */
static char host_256[WIRE_MAX_HOST + 2];
static void b_host_256(struct full *f)
{
	f->hello.host = host_256;
}
static void b_result_missing_long(struct full *f)
{
	f->strs[2] = host_256;
}
static void b_welcome_name_long(struct full *f)
{
	f->welcome.aggregator = host_256;
}
static void b_reply_role(struct full *f)
{
	f->as.role = "king";
}
static void b_reply_query(struct full *f)
{
	f->qs.query_id = 0;
}
static void b_subscribe(struct full *f)
{
	f->subscribe.query_id = 0;
}
static void b_qerr_msg(struct full *f)
{
	f->query_error.message = "";
}
static void b_qerr_detail(struct full *f)
{
	f->query_error.detail = long_name;
}
static void b_qerr_ctl(struct full *f)
{
	f->query_error.message = "bell\a";
}
static void b_error_msg(struct full *f)
{
	f->error.message = "";
}

static void b_gb_task_id(struct full *f)
{
	f->gt[1].id = 0;
}
static void b_gb_trace0(struct full *f)
{
	f->gt[0].trace_hi = f->gt[0].trace_lo = 0;
}
static void b_gb_end(struct full *f)
{
	f->gt[0].end_ns = f->gt[0].start_ns - 1;
}
static void b_gb_status(struct full *f)
{
	f->gt[0].status = 3;
}
static void b_gb_source(struct full *f)
{
	f->gt[1].source = GRAPH_SRC_COUNT;
}
static void b_gb_name_utf8(struct full *f)
{
	f->gt[1].name = "bad \xc3";
}
static void b_gb_name_long(struct full *f)
{
	f->gt[0].name = graph_long;
}
static void b_gb_kind(struct full *f)
{
	f->ged.kind = GRAPH_EDGE_COUNT;
}
static void b_gb_edge_task(struct full *f)
{
	f->ged.to_task = 0;
}
static void b_gb_event_task(struct full *f)
{
	f->gev.task = 0;
}
static void b_gb_host(struct full *f)
{
	f->graph_batch.host = "";
}
static void b_gb_query(struct full *f)
{
	f->graph_batch.query_id = 0;
}
static void b_gb_self_parent(struct full *f)
{
	f->gt[1].parent = 2;
}
static void b_gb_task_host(struct full *f)
{
	f->gt[0].host = "a\nb";
}

static void b_rb_cells(struct full *f)
{
	f->row_batch.n_ints = 3;
}
static void b_rb_rows(struct full *f)
{
	f->row_batch.rows = WIRE_MAX_ROWS + 1;
}
static void b_rb_columns(struct full *f)
{
	f->row_batch.columns = WIRE_MAX_CELLS + 1;
}
static void b_rb_text_long(struct full *f)
{
	static uint8_t big[WIRE_MAX_CELL + 1];

	f->rtexts[1] = (ProtobufCBinaryData){ sizeof(big), big };
}
static void b_rb_host(struct full *f)
{
	f->row_batch.host = "";
}
static void b_rb_query(struct full *f)
{
	f->row_batch.query_id = 0;
}

static void b_vs_outside(struct full *f)
{
	f->vs.offset_ns = f->vs.hi_ns + 1;
}
static void b_vs_unsynced_offset(struct full *f)
{
	f->vs.synced = false;
}
static void b_vs_no_bound(struct full *f)
{
	f->vs.has_error_ns = false;
}
static void b_vs_host0(struct full *f)
{
	f->vs.host_query = 0;
}
static void b_submit_only_ctl(struct full *f)
{
	f->strs[1] = "be\nta";
}
static void b_submit_pair0(struct full *f)
{
	f->submit.vm_sync_host = 0;
}

static const struct breakage breakages[] = {
	{ WEFT__ENVELOPE__BODY_RESULT, "Result.vm_sync: synced without a consistent",
	  b_vs_outside },
	{ WEFT__ENVELOPE__BODY_RESULT, "Result.vm_sync: an offset without synchronisation",
	  b_vs_unsynced_offset },
	{ WEFT__ENVELOPE__BODY_RESULT, "Result.vm_sync: synced without a consistent",
	  b_vs_no_bound },
	{ WEFT__ENVELOPE__BODY_RESULT, "Result.vm_sync.query_id: 0", b_vs_host0 },
	{ WEFT__ENVELOPE__BODY_SUBMIT, "Submit.only_hosts: control character", b_submit_only_ctl },
	{ WEFT__ENVELOPE__BODY_SUBMIT, "Submit.vm_sync_host.query_id: 0", b_submit_pair0 },
	{ WEFT__ENVELOPE__BODY_ROW_BATCH, "RowBatch: 5 cells for 2 rows of 3 columns", b_rb_cells },
	{ WEFT__ENVELOPE__BODY_ROW_BATCH, "RowBatch.rows: 100001", b_rb_rows },
	{ WEFT__ENVELOPE__BODY_ROW_BATCH, "RowBatch.columns: 257", b_rb_columns },
	{ WEFT__ENVELOPE__BODY_ROW_BATCH, "RowBatch.texts[1]: 65537 bytes", b_rb_text_long },
	{ WEFT__ENVELOPE__BODY_ROW_BATCH, "RowBatch.host: empty", b_rb_host },
	{ WEFT__ENVELOPE__BODY_ROW_BATCH, "RowBatch.query_id: 0", b_rb_query },
	{ WEFT__ENVELOPE__BODY_GRAPH_BATCH, "GraphTask[1].id: 0", b_gb_task_id },
	{ WEFT__ENVELOPE__BODY_GRAPH_BATCH, "GraphTask[0]: trace id 0", b_gb_trace0 },
	{ WEFT__ENVELOPE__BODY_GRAPH_BATCH, "GraphTask[0].end_ns: before its start", b_gb_end },
	{ WEFT__ENVELOPE__BODY_GRAPH_BATCH, "GraphTask[0].status: 3", b_gb_status },
	{ WEFT__ENVELOPE__BODY_GRAPH_BATCH, "GraphTask[1].source", b_gb_source },
	{ WEFT__ENVELOPE__BODY_GRAPH_BATCH, "GraphTask.name[1]: not UTF-8", b_gb_name_utf8 },
	{ WEFT__ENVELOPE__BODY_GRAPH_BATCH, "GraphTask.name[0]: 65537 bytes", b_gb_name_long },
	{ WEFT__ENVELOPE__BODY_GRAPH_BATCH, "GraphEdge[0].kind", b_gb_kind },
	{ WEFT__ENVELOPE__BODY_GRAPH_BATCH, "GraphEdge[0]: task id 0", b_gb_edge_task },
	{ WEFT__ENVELOPE__BODY_GRAPH_BATCH, "GraphEvent[0].task: 0", b_gb_event_task },
	{ WEFT__ENVELOPE__BODY_GRAPH_BATCH, "GraphBatch.host: empty", b_gb_host },
	{ WEFT__ENVELOPE__BODY_GRAPH_BATCH, "GraphBatch.query_id: 0", b_gb_query },
	{ WEFT__ENVELOPE__BODY_GRAPH_BATCH, "GraphTask[1].parent: the task itself",
	  b_gb_self_parent },
	{ WEFT__ENVELOPE__BODY_GRAPH_BATCH, "GraphTask.host: control character", b_gb_task_host },
	{ WEFT__ENVELOPE__BODY_ACK, "version 2", b_version },
	{ WEFT__ENVELOPE__BODY_ACK, "seq 0", b_seq0 },
	{ WEFT__ENVELOPE__BODY_HELLO, "Hello.role", b_role },
	{ WEFT__ENVELOPE__BODY_HELLO, "Hello.host: empty", b_host_empty },
	{ WEFT__ENVELOPE__BODY_HELLO, "Hello.host: control character", b_host_ctl },
	{ WEFT__ENVELOPE__BODY_HELLO, "Hello.host: not UTF-8", b_host_utf8 },
	{ WEFT__ENVELOPE__BODY_HELLO, "Hello.host: 4097 bytes", b_host_long },
	{ WEFT__ENVELOPE__BODY_HELLO, "Hello.version: empty", b_version_empty },
	{ WEFT__ENVELOPE__BODY_HELLO, "Hello.scope: control character", b_scope_ctl },
	{ WEFT__ENVELOPE__BODY_HELLO, "Hello.scope: 4097 bytes", b_scope_long },
	{ WEFT__ENVELOPE__BODY_STATUS_REPLY, "AgentStatus.scope: not UTF-8", b_status_scope_utf8 },
	{ WEFT__ENVELOPE__BODY_HELLO, "Hello.instance: 0", b_instance0 },
	{ WEFT__ENVELOPE__BODY_HELLO, "Hello.features: 1025 entries", b_features_many },
	{ WEFT__ENVELOPE__BODY_HELLO, "Hello.features: empty", b_feature_empty },
	{ WEFT__ENVELOPE__BODY_HELLO, "Hello.running: query id 0", b_running0 },
	{ WEFT__ENVELOPE__BODY_HEARTBEAT, "Heartbeat.running: query id 0", b_running0 },
	{ WEFT__ENVELOPE__BODY_WELCOME, "Welcome.heartbeat_ms", b_hb_small },
	{ WEFT__ENVELOPE__BODY_WELCOME, "Welcome.heartbeat_ms", b_hb_large },
	{ WEFT__ENVELOPE__BODY_WELCOME, "Welcome.instance: 0", b_welcome_instance },
	{ WEFT__ENVELOPE__BODY_WELCOME, "Welcome.aggregator: empty", b_welcome_name },
	{ WEFT__ENVELOPE__BODY_SUBMIT, "Submit.query: 65537 bytes", b_submit_query },
	{ WEFT__ENVELOPE__BODY_SUBMIT, "Submit.object: 0 bytes", b_submit_object },
	{ WEFT__ENVELOPE__BODY_SUBMIT, "Submit.manifest: 0 bytes", b_submit_manifest },
	{ WEFT__ENVELOPE__BODY_QUERY_START, "QueryStart.query_id: 0", b_qs_id },
	{ WEFT__ENVELOPE__BODY_QUERY_START, "QueryStart.epoch_realtime_ns: 0", b_qs_epoch },
	{ WEFT__ENVELOPE__BODY_QUERY_START, "QueryStart.end_realtime_ns", b_qs_end },
	{ WEFT__ENVELOPE__BODY_QUERY_START, "QueryStart.object", b_qs_object },
	{ WEFT__ENVELOPE__BODY_QUERY_STOP, "QueryStop.query_id: 0", b_stop_id },
	{ WEFT__ENVELOPE__BODY_PARTIAL, "Partial.query_id: 0", b_partial_id },
	{ WEFT__ENVELOPE__BODY_PARTIAL, "Partial.host: empty", b_partial_host },
	{ WEFT__ENVELOPE__BODY_PARTIAL, "257 states", b_partial_states },
	{ WEFT__ENVELOPE__BODY_PARTIAL, "Group.states: 0 bytes", b_partial_state_empty },
	{ WEFT__ENVELOPE__BODY_PARTIAL, "Group.key: 65537 bytes", b_partial_key_long },
	{ WEFT__ENVELOPE__BODY_PARTIAL, "Partial.drops: 65 entries", b_partial_drops },
	{ WEFT__ENVELOPE__BODY_PARTIAL, "Partial.hosts: control character", b_partial_hosts },
	{ WEFT__ENVELOPE__BODY_PARTIAL, "Partial.missing: empty", b_partial_missing },
	{ WEFT__ENVELOPE__BODY_PARTIAL, "Partial.stopped: 4097 bytes", b_partial_stopped_long },
	{ WEFT__ENVELOPE__BODY_PARTIAL, "Partial.stopped: control", b_partial_stopped_ctl },
	{ WEFT__ENVELOPE__BODY_PARTIAL, "Partial.stopped: set without last",
	  b_partial_stopped_not_last },
	{ WEFT__ENVELOPE__BODY_RESULT, "Result.query_id: 0", b_result_id },
	{ WEFT__ENVELOPE__BODY_RESULT, "Result.missing: empty", b_result_missing },
	{ WEFT__ENVELOPE__BODY_HELLO, "Hello.host: 256 bytes (at most 255)", b_host_256 },
	{ WEFT__ENVELOPE__BODY_RESULT, "Result.missing: 256 bytes (at most 255)",
	  b_result_missing_long },
	{ WEFT__ENVELOPE__BODY_WELCOME, "Welcome.aggregator: 256 bytes (at most 255)",
	  b_welcome_name_long },
	{ WEFT__ENVELOPE__BODY_STATUS_REPLY, "AgentStatus.role", b_reply_role },
	{ WEFT__ENVELOPE__BODY_STATUS_REPLY, "QueryStatus.query_id: 0", b_reply_query },
	{ WEFT__ENVELOPE__BODY_SUBSCRIBE, "Subscribe.query_id: 0", b_subscribe },
	{ WEFT__ENVELOPE__BODY_QUERY_ERROR, "QueryError.message: empty", b_qerr_msg },
	{ WEFT__ENVELOPE__BODY_QUERY_ERROR, "QueryError.detail: 4097 bytes", b_qerr_detail },
	{ WEFT__ENVELOPE__BODY_QUERY_ERROR, "QueryError.message: control", b_qerr_ctl },
	{ WEFT__ENVELOPE__BODY_ERROR, "Error.message: empty", b_error_msg },
};

static void test_every_rule_refuses(void **state)
{
	memset(graph_long, 'g', sizeof(graph_long) - 1);
	memset(long_name, 'x', sizeof(long_name) - 1);
	memset(host_256, 'h', sizeof(host_256) - 1);
	memset(long_query, 'q', sizeof(long_query) - 1);
	for (size_t i = 0; i < sizeof(many_strs) / sizeof(many_strs[0]); i++)
		many_strs[i] = "f";
	for (size_t i = 0; i < sizeof(breakages) / sizeof(breakages[0]); i++) {
		const struct breakage *b = &breakages[i];
		struct full f;
		char why[256];
		uint8_t *raw;
		size_t len;
		void *enc;
		Weft__Envelope *d;

		full_init(&f, b->body);
		b->apply(&f);
		raw = raw_pack(&f.e, &len);
		d = wire_decode(raw, len, why, sizeof(why));
		if (d)
			fail_msg("rule '%s' was not enforced by wire_decode", b->reason);
		if (!strstr(why, b->reason))
			fail_msg("rule '%s': wire_decode said '%s'", b->reason, why);
		assert_int_equal(wire_validate(&f.e, why, sizeof(why)), -EINVAL);
		assert_int_equal(wire_encode(&f.e, &enc, &len), -EINVAL);
		assert_null(enc);
		free(raw);
	}
}

/* Envelope-level rules that protobuf-c alone would let through. */
static void test_envelope_shape(void **state)
{
	/* version 1, seq 1, then two bodies: an Ack (17) and a QueryStop (15) */
	static const uint8_t two[] = { 0x08, 0x01, 0x10, 0x01, 0x8a, 0x01, 0x02,
				       0x08, 0x05, 0x7a, 0x02, 0x08, 0x05 };
	/* version 1, seq 1, and nothing else */
	static const uint8_t none[] = { 0x08, 0x01, 0x10, 0x01 };
	/* version 1, seq 1, a body number this version does not know (30) */
	static const uint8_t unknown[] = { 0x08, 0x01, 0x10, 0x01, 0xf2, 0x01, 0x00 };
	/* an Ack body that lacks its required upto */
	static const uint8_t required[] = { 0x08, 0x01, 0x10, 0x01, 0x8a, 0x01, 0x00 };
	/* unknown fields are skipped (a newer peer's optional additions) */
	static const uint8_t extra[] = { 0x08, 0x01, 0x10, 0x01, 0x8a, 0x01,
					 0x02, 0x08, 0x05, 0xf8, 0x07, 0x01 };
	/* an Ack holding, after its upto, a fixed32 field numbered 0 */
	static const uint8_t field0[] = { 0x08, 0x01, 0x10, 0x01, 0x8a, 0x01, 0x08, 0x08,
					  0x05, 0x85, 0x00, 0x01, 0x02, 0x03, 0x04 };
	char why[256];
	Weft__Envelope *e;
	uint8_t *big;

	assert_null(wire_decode(two, sizeof(two), why, sizeof(why)));
	assert_non_null(strstr(why, "2 bodies"));
	assert_null(wire_decode(none, sizeof(none), why, sizeof(why)));
	assert_non_null(strstr(why, "no body"));
	assert_null(wire_decode(unknown, sizeof(unknown), why, sizeof(why)));
	assert_non_null(strstr(why, "no body"));
	assert_null(wire_decode(required, sizeof(required), why, sizeof(why)));
	assert_non_null(strstr(why, "required field"));
	assert_null(wire_decode(NULL, 0, why, sizeof(why)));
	assert_null(wire_decode(NULL, 5, why, sizeof(why)));
	e = wire_decode(extra, sizeof(extra), why, sizeof(why));
	assert_non_null(e);
	assert_int_equal(e->body_case, WEFT__ENVELOPE__BODY_ACK);
	assert_int_equal(e->ack->upto, 5);
	{
		/* and dropped: what is re-encoded is what this version understands */
		void *again;
		size_t len;

		assert_int_equal(wire_encode(e, &again, &len), 0);
		assert_int_equal(len, 9);
		assert_memory_equal(again, extra, 9);
		free(again);
	}
	wire_free(e);
	/* field number 0 (a two-byte tag protobuf-c lets through) inside a body */
	assert_null(wire_decode(field0, sizeof(field0), why, sizeof(why)));
	assert_non_null(strstr(why, "field 0 in Ack"));

	big = calloc(1, WIRE_MAX_BYTES + 1);
	assert_non_null(big);
	assert_null(wire_decode(big, WIRE_MAX_BYTES + 1, why, sizeof(why)));
	assert_non_null(strstr(why, "at most"));
	free(big);
}

/* Every prefix of a valid message is refused; random bytes and bit flips never crash, and
 * whatever is accepted passes the checks and re-encodes. */
static void test_truncated_and_random(void **state)
{
	uint64_t rng = 0x9e3779b97f4a7c15ull;

	for (size_t i = 0; i < NBODIES; i++) {
		struct full f;
		void *a;
		size_t la;
		char why[256];

		full_init(&f, all_bodies[i]);
		assert_int_equal(wire_encode(&f.e, &a, &la), 0);
		for (size_t cut = 0; cut < la; cut++) {
			Weft__Envelope *d = wire_decode(a, cut, why, sizeof(why));

			if (d)
				fail_msg("%s cut at %zu of %zu bytes was accepted",
					 wire_body_name(all_bodies[i]), cut, la);
		}
		for (int flip = 0; flip < 2000; flip++) {
			uint8_t *b = malloc(la);
			Weft__Envelope *d;

			memcpy(b, a, la);
			rng ^= rng << 13;
			rng ^= rng >> 7;
			rng ^= rng << 17;
			b[rng % la] ^= (uint8_t)(1u << ((rng >> 32) % 8));
			d = wire_decode(b, la, why, sizeof(why));
			if (d) {
				void *again;
				size_t lagain;

				assert_int_equal(wire_validate(d, why, sizeof(why)), 0);
				assert_int_equal(wire_encode(d, &again, &lagain), 0);
				free(again);
				wire_free(d);
			}
			free(b);
		}
		free(a);
	}
	for (int n = 0; n < 20000; n++) {
		uint8_t buf[64];
		size_t len = (size_t)(n % 64);
		Weft__Envelope *d;
		char why[256];

		for (size_t i = 0; i < len; i++) {
			rng ^= rng << 13;
			rng ^= rng >> 7;
			rng ^= rng << 17;
			buf[i] = (uint8_t)rng;
		}
		d = wire_decode(buf, len, why, sizeof(why));
		if (d) {
			assert_int_equal(wire_validate(d, why, sizeof(why)), 0);
			wire_free(d);
		}
	}
}

/* A few bytes may not become gigabytes: 500,000 empty-keyed groups in 2 MB would need
 * ~32 MB of protobuf-c structures; refused.  A real partial of as many groups decodes. */
static void test_decode_budget(void **state)
{
	size_t n = 500000, len = 0, cap = 4 * n + 64;
	uint8_t *b = malloc(cap), *body;
	Weft__Envelope *e;
	char why[256];
	size_t body_len;

	assert_non_null(b);
	/* Partial{query_id 1, window 0, host "h", groups: n x {key ""}} */
	body = malloc(cap);
	assert_non_null(body);
	body_len = 0;
	body[body_len++] = 0x08;
	body[body_len++] = 0x01;
	body[body_len++] = 0x10;
	body[body_len++] = 0x00;
	body[body_len++] = 0x1a;
	body[body_len++] = 0x01;
	body[body_len++] = 'h';
	for (size_t i = 0; i < n; i++) {
		body[body_len++] = 0x22;
		body[body_len++] = 0x02;
		body[body_len++] = 0x0a;
		body[body_len++] = 0x00;
	}
	{
		void *env;

		assert_int_equal(wire_envelope_wrap(1, WEFT__ENVELOPE__BODY_PARTIAL, body, body_len,
						    &env, &len),
				 0);
		free(b);
		b = env;
	}
	e = wire_decode(b, len, why, sizeof(why));
	assert_null(e);
	assert_non_null(strstr(why, "too costly"));
	free(b);

	/* the same count of real groups: key 'i'+8 bytes, one 10-byte count state */
	body_len = 7;
	body = realloc(body, 7 + n * 25);
	assert_non_null(body);
	for (size_t i = 0; i < n; i++) {
		uint8_t *g = body + body_len;

		g[0] = 0x22;
		g[1] = 23;
		g[2] = 0x0a;
		g[3] = 9;
		g[4] = 'i';
		memcpy(g + 5, &i, 8);
		g[13] = 0x12;
		g[14] = 10;
		memset(g + 15, 0, 10);
		body_len += 25;
	}
	assert_int_equal(wire_envelope_wrap(1, WEFT__ENVELOPE__BODY_PARTIAL, body, body_len,
					    (void **)&b, &len),
			 0);
	e = wire_decode(b, len, why, sizeof(why));
	if (!e)
		fail_msg("a partial of %zu real groups was refused: %s", n, why);
	assert_int_equal(e->partial->n_groups, n);
	wire_free(e);
	free(b);
	free(body);
}

/*
 * wire_decode() unpacks into an arena (one block per few thousand protobuf-c allocations).
 * What must hold: every field of a large message comes back exactly, aligned as malloc()
 * aligns, whichever way the arena had to grow (a first block too small for thousands of tiny
 * groups; one array larger than a quarter of a block); the unknown fields of every level are
 * gone, so that what is re-encoded is the message without them; the densest partial weft
 * makes still fits the budget; and the budget still refuses what would cost too much, with
 * its reason and figures.
 */
static size_t put_varint(uint8_t *p, uint64_t v)
{
	size_t n = 0;

	while (v >= 0x80) {
		p[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	p[n++] = (uint8_t)v;
	return n;
}

/* as malloc() aligns: for anything */
static bool aligned(const void *p)
{
	return ((uintptr_t)p & (_Alignof(max_align_t) - 1)) == 0;
}

#define ARENA_GROUPS 12000
#define ARENA_BIG 100000 /* one state this long */

static uint8_t arena_byte(size_t g, size_t s, size_t i)
{
	return (uint8_t)(g * 31 + s * 7 + i * 13 + 1);
}

/* Group g: mostly tiny (a key of 0 to 8 bytes, 0 to 3 states of 1 to 8 bytes: ~8 times
 * their size once decoded, more than the arena's first block holds), every 50th with
 * states of up to 40 bytes, and one state of ARENA_BIG bytes in the middle group. */
static size_t arena_key_len(size_t g)
{
	return g % 5 == 0 ? 1 : g % 9;
}

static size_t arena_nstates(size_t g)
{
	return g == ARENA_GROUPS / 2 ? 2 : g % 4;
}

static size_t arena_state_len(size_t g, size_t s)
{
	if (g == ARENA_GROUPS / 2 && s == 0)
		return ARENA_BIG;
	return 1 + (g * 13 + s) % (g % 50 == 0 ? 40 : 8);
}

static void test_decode_arena(void **state)
{
	static char *hosts[] = { "node-7", "node-8" }, *missing[] = { "node-9" };
	static uint64_t drops[9] = { 1, 0, 3, 0, 0, 0, 0, 0, 9 };
	Weft__Partial head = WEFT__PARTIAL__INIT, full;
	Weft__Group *gs = calloc(ARENA_GROUPS, sizeof(*gs)),
		    **gp = calloc(ARENA_GROUPS, sizeof(*gp));
	ProtobufCBinaryData *sts = calloc(ARENA_GROUPS * 3, sizeof(*sts));
	size_t cap = 64 * ARENA_GROUPS + ARENA_BIG + 4096, blen, elen, clen, rlen, unknowns = 0;
	uint8_t *body = malloc(cap), *gbuf = malloc(ARENA_BIG + 4096), *env, *clean, *raw;
	void *again;
	Weft__Envelope *d;
	char why[256];

	assert_non_null(gs);
	assert_non_null(gp);
	assert_non_null(sts);
	assert_non_null(body);
	assert_non_null(gbuf);
	head.query_id = 77;
	head.window = 5;
	head.host = "node-7";
	head.n_drops = 9;
	head.drops = drops;
	head.has_misses = true;
	head.misses = 1234;
	head.has_overflow = true;
	head.overflow = 5;
	head.n_hosts = 2;
	head.hosts = hosts;
	head.n_missing = 1;
	head.missing = missing;
	head.has_last = true;
	head.last = true;
	for (size_t g = 0; g < ARENA_GROUPS; g++) {
		weft__group__init(&gs[g]);
		gp[g] = &gs[g];
		gs[g].key.len = arena_key_len(g);
		gs[g].key.data = malloc(gs[g].key.len + 1);
		assert_non_null(gs[g].key.data);
		for (size_t i = 0; i < gs[g].key.len; i++)
			gs[g].key.data[i] = arena_byte(g, 9, i);
		gs[g].n_states = arena_nstates(g);
		gs[g].states = gs[g].n_states ? &sts[g * 3] : NULL;
		for (size_t s = 0; s < gs[g].n_states; s++) {
			gs[g].states[s].len = arena_state_len(g, s);
			gs[g].states[s].data = malloc(gs[g].states[s].len);
			assert_non_null(gs[g].states[s].data);
			for (size_t i = 0; i < gs[g].states[s].len; i++)
				gs[g].states[s].data[i] = arena_byte(g, s, i);
		}
	}

	/* the partial's own fields, then each group with unknown fields of its own appended
	 * (a varint field 9 in every third, a length-delimited field 100 in every fifth), then
	 * an unknown fixed64 field 50 of the partial */
	blen = weft__partial__pack(&head, body);
	for (size_t g = 0; g < ARENA_GROUPS; g++) {
		size_t gl = weft__group__pack(&gs[g], gbuf);

		if (g % 3 == 0) {
			gbuf[gl++] = 9 << 3;
			gl += put_varint(gbuf + gl, g);
			unknowns++;
		}
		if (g % 5 == 0) {
			gl += put_varint(gbuf + gl, 100 << 3 | 2);
			gbuf[gl++] = 3;
			memcpy(gbuf + gl, "xyz", 3);
			gl += 3;
			unknowns++;
		}
		body[blen++] = 4 << 3 | 2;
		blen += put_varint(body + blen, gl);
		memcpy(body + blen, gbuf, gl);
		blen += gl;
		assert_true(blen + 64 < cap);
	}
	blen += put_varint(body + blen, 50 << 3 | 1);
	memset(body + blen, 0xee, 8);
	blen += 8;
	assert_true(unknowns > ARENA_GROUPS / 3);
	assert_int_equal(
		wire_envelope_wrap(9, WEFT__ENVELOPE__BODY_PARTIAL, body, blen, &again, &elen), 0);
	/* and an unknown varint field 40 of the envelope */
	env = realloc(again, elen + 3);
	assert_non_null(env);
	env[elen++] = (uint8_t)(40 << 3 | 0x80);
	env[elen++] = 40 >> 4;
	env[elen++] = 1;

	/* the same message without any unknown field, as protobuf-c packs it */
	full = head;
	full.n_groups = ARENA_GROUPS;
	full.groups = gp;
	clen = weft__partial__get_packed_size(&full);
	raw = malloc(clen);
	assert_non_null(raw);
	weft__partial__pack(&full, raw);
	assert_int_equal(wire_envelope_wrap(9, WEFT__ENVELOPE__BODY_PARTIAL, raw, clen,
					    (void **)&clean, &clen),
			 0);
	free(raw);

	d = wire_decode(env, elen, why, sizeof(why));
	if (!d)
		fail_msg("%s", why);
	assert_true(aligned(d));
	assert_int_equal(d->base.n_unknown_fields, 0);
	assert_int_equal(d->seq, 9);
	assert_int_equal(d->body_case, WEFT__ENVELOPE__BODY_PARTIAL);
	assert_true(aligned(d->partial));
	assert_int_equal(d->partial->base.n_unknown_fields, 0);
	assert_null(d->partial->base.unknown_fields);
	assert_int_equal(d->partial->query_id, 77);
	assert_int_equal(d->partial->window, 5);
	assert_string_equal(d->partial->host, "node-7");
	assert_true(aligned(d->partial->host));
	assert_int_equal(d->partial->n_drops, 9);
	assert_true(aligned(d->partial->drops));
	assert_memory_equal(d->partial->drops, drops, sizeof(drops));
	assert_true(d->partial->has_misses && d->partial->misses == 1234);
	assert_true(d->partial->has_overflow && d->partial->overflow == 5);
	assert_int_equal(d->partial->n_hosts, 2);
	assert_string_equal(d->partial->hosts[0], "node-7");
	assert_string_equal(d->partial->hosts[1], "node-8");
	assert_true(aligned(d->partial->hosts) && aligned(d->partial->hosts[1]));
	assert_int_equal(d->partial->n_missing, 1);
	assert_string_equal(d->partial->missing[0], "node-9");
	assert_true(d->partial->has_last && d->partial->last);
	assert_int_equal(d->partial->n_groups, ARENA_GROUPS);
	assert_true(aligned(d->partial->groups));
	for (size_t g = 0; g < ARENA_GROUPS; g++) {
		const Weft__Group *x = d->partial->groups[g];

		assert_true(aligned(x));
		assert_int_equal(x->base.n_unknown_fields, 0);
		assert_null(x->base.unknown_fields);
		assert_int_equal(x->key.len, arena_key_len(g));
		if (x->key.len) {
			assert_true(aligned(x->key.data));
			assert_memory_equal(x->key.data, gs[g].key.data, x->key.len);
		}
		assert_int_equal(x->n_states, arena_nstates(g));
		if (x->n_states)
			assert_true(aligned(x->states));
		for (size_t s = 0; s < x->n_states; s++) {
			assert_int_equal(x->states[s].len, arena_state_len(g, s));
			assert_true(aligned(x->states[s].data));
			assert_memory_equal(x->states[s].data, gs[g].states[s].data,
					    x->states[s].len);
		}
	}
	assert_int_equal(wire_encode(d, &again, &rlen), 0);
	assert_int_equal(rlen, clen);
	assert_memory_equal(again, clean, clen);
	free(again);

	/* two messages at once, freed in either order: each its own arena */
	{
		Weft__Envelope *d2 = wire_decode(clean, clen, why, sizeof(why));

		assert_non_null(d2);
		wire_free(d);
		assert_int_equal(d2->partial->n_groups, ARENA_GROUPS);
		assert_memory_equal(d2->partial->groups[ARENA_GROUPS / 2]->states[0].data,
				    gs[ARENA_GROUPS / 2].states[0].data, ARENA_BIG);
		wire_free(d2);
	}

	for (size_t g = 0; g < ARENA_GROUPS; g++) {
		free(gs[g].key.data);
		for (size_t s = 0; s < gs[g].n_states; s++)
			free(gs[g].states[s].data);
	}
	free(gs);
	free(gp);
	free(sts);
	free(body);
	free(gbuf);
	free(env);
	free(clean);
}

/* An array that is a large part of the message (60,000 query ids of one byte each, packed:
 * 8 bytes each decoded) comes back whole. */
static void test_decode_arena_big_array(void **state)
{
	size_t n = 60000, len = 0, elen;
	uint8_t *b = malloc(n + 64);
	void *env;
	Weft__Envelope *d;
	char why[256];

	assert_non_null(b);
	/* Heartbeat{time_ns 1, running: packed n ids 1..127} */
	b[len++] = 1 << 3;
	b[len++] = 1;
	b[len++] = 2 << 3 | 2;
	len += put_varint(b + len, n);
	for (size_t i = 0; i < n; i++)
		b[len++] = (uint8_t)(1 + i % 127);
	assert_int_equal(wire_envelope_wrap(3, WEFT__ENVELOPE__BODY_HEARTBEAT, b, len, &env, &elen),
			 0);
	d = wire_decode(env, elen, why, sizeof(why));
	if (!d)
		fail_msg("%s", why);
	assert_int_equal(d->heartbeat->time_ns, 1);
	assert_int_equal(d->heartbeat->n_running, n);
	assert_true(aligned(d->heartbeat->running));
	for (size_t i = 0; i < n; i++)
		if (d->heartbeat->running[i] != 1 + i % 127)
			fail_msg("running[%zu] = %llu", i,
				 (unsigned long long)d->heartbeat->running[i]);
	wire_free(d);
	free(env);
	free(b);
}

/* Over the budget: 20,000 empty groups (4 bytes each on the wire, over 100 decoded with
 * protobuf-c's scratch: less than twice the bound, so a looser bound would let them through)
 * are refused with the budget's reason, which names the size and the bound: 8 x len + 1 MiB.
 * The first thousand alone decode. */
static void test_decode_arena_budget(void **state)
{
	size_t n = 20000, len = 0, elen;
	uint8_t *b = malloc(4 * n + 64);
	void *env;
	Weft__Envelope *d;
	char why[256], want[256];

	assert_non_null(b);
	/* Partial{query_id 1, window 0, host "h", groups: n x {key ""}} */
	memcpy(b, "\x08\x01\x10\x00\x1a\x01h", 7);
	len = 7;
	for (size_t i = 0; i < n; i++) {
		memcpy(b + len, "\x22\x02\x0a\x00", 4);
		len += 4;
	}
	assert_int_equal(wire_envelope_wrap(1, WEFT__ENVELOPE__BODY_PARTIAL, b, len, &env, &elen),
			 0);
	assert_null(wire_decode(env, elen, why, sizeof(why)));
	snprintf(want, sizeof(want), "too costly to decode (%zu bytes would need more than %zu)",
		 elen, elen * 8 + (1u << 20));
	assert_string_equal(why, want);
	free(env);
	/* the same groups, fewer: within the budget */
	assert_int_equal(
		wire_envelope_wrap(1, WEFT__ENVELOPE__BODY_PARTIAL, b, 7 + 4 * 1000, &env, &elen),
		0);
	d = wire_decode(env, elen, why, sizeof(why));
	if (!d)
		fail_msg("%s", why);
	assert_int_equal(d->partial->n_groups, 1000);
	assert_int_equal(d->partial->groups[999]->key.len, 0);
	wire_free(d);
	free(env);
	free(b);
}

/* A struct graph through wire_graph_pack(), an envelope, wire_decode() and wire_graph_unpack():
 * every field as it was, an open task's end at its start, a task without host given the
 * batch's, and what cannot be sent refused before packing. */
static void test_graph_batch_roundtrip(void **state)
{
	struct graph g, back;
	struct graph_task t = { .trace = { 7, 9 },
				.id = 1,
				.service = "shop",
				.name = "GET /",
				.host = "",
				.pid = 10,
				.tid = 11,
				.start = 1000,
				.end = 5000,
				.status = GRAPH_STATUS_ERROR,
				.source = GRAPH_SRC_WEFT,
				.attrs = "{\"a\":1}" };
	struct graph_event ev = { .trace = { 7, 9 },
				  .task = 2,
				  .time = 2500,
				  .name = "retry",
				  .source = GRAPH_SRC_WEFT,
				  .attrs = "{}" };
	struct graph_edge ed = { .trace = { 7, 9 },
				 .kind = GRAPH_EDGE_MESSAGE,
				 .from_task = 2,
				 .to_task = 99,
				 .source = GRAPH_SRC_KERNEL };
	bool open[2] = { false, true };
	struct wire_graph_meta m = { .query_id = 3, .window = 4, .host = "h1", .open = open };
	Weft__Envelope *d;
	void *body, *env;
	size_t len, elen, nopen = 0;
	char why[256];

	graph_init(&g);
	graph_init(&back);
	assert_non_null(graph_add_task(&g, &t));
	t.id = 2;
	t.parent = 1;
	t.host = "h1";
	t.pid = t.tid = -1;
	t.start = 2000;
	t.end = 2000;
	t.status = GRAPH_STATUS_UNSET;
	t.attrs = "{}";
	assert_non_null(graph_add_task(&g, &t));
	assert_non_null(graph_add_event(&g, &ev));
	assert_non_null(graph_add_edge(&g, &ed));
	assert_int_equal(wire_graph_pack(&m, &g, &body, &len, why, sizeof(why)), 0);
	assert_int_equal(
		wire_envelope_wrap(9, WEFT__ENVELOPE__BODY_GRAPH_BATCH, body, len, &env, &elen), 0);
	d = wire_decode(env, elen, why, sizeof(why));
	if (!d)
		fail_msg("%s", why);
	assert_int_equal(d->graph_batch->query_id, 3);
	assert_int_equal(d->graph_batch->window, 4);
	assert_string_equal(d->graph_batch->host, "h1");
	assert_int_equal(wire_graph_unpack(d->graph_batch, "h1", &back, &nopen, why, sizeof(why)),
			 0);
	assert_int_equal(nopen, 1);
	assert_int_equal(back.ntasks, 2);
	assert_int_equal(back.nevents, 1);
	assert_int_equal(back.nedges, 1);
	assert_int_equal(back.tasks[0].trace.hi, 7);
	assert_int_equal(back.tasks[0].trace.lo, 9);
	assert_int_equal(back.tasks[0].parent, 0);
	assert_string_equal(back.tasks[0].service, "shop");
	assert_string_equal(back.tasks[0].name, "GET /");
	assert_string_equal(back.tasks[0].host, "h1"); /* the batch's */
	assert_int_equal(back.tasks[0].pid, 10);
	assert_int_equal(back.tasks[0].tid, 11);
	assert_int_equal(back.tasks[0].start, 1000);
	assert_int_equal(back.tasks[0].end, 5000);
	assert_int_equal(back.tasks[0].status, GRAPH_STATUS_ERROR);
	assert_int_equal(back.tasks[0].source, GRAPH_SRC_WEFT);
	assert_string_equal(back.tasks[0].attrs, "{\"a\":1}");
	assert_int_equal(back.tasks[1].parent, 1);
	assert_int_equal(back.tasks[1].pid, -1);
	assert_int_equal(back.tasks[1].end, back.tasks[1].start); /* open: ends at its start */
	assert_string_equal(back.tasks[1].attrs, "{}");
	assert_int_equal(back.events[0].task, 2);
	assert_int_equal(back.events[0].time, 2500);
	assert_string_equal(back.events[0].name, "retry");
	assert_int_equal(back.edges[0].kind, GRAPH_EDGE_MESSAGE);
	assert_int_equal(back.edges[0].to_task, 99);
	assert_int_equal(back.edges[0].source, GRAPH_SRC_KERNEL);
	wire_free(d);
	free(env);
	free(body);

	/* what the receiver would refuse is not packed */
	g.tasks[0].id = 0;
	assert_int_equal(wire_graph_pack(&m, &g, &body, &len, why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "GraphTask[0].id: 0"));
	assert_null(body);
	graph_free(&g);
	graph_free(&back);
}

/* The densest partial weft makes: groups of one 8-byte key slot and one count state (24 bytes
 * on the wire), as many as make protobuf-c's scratch the largest (16 x (2^14 - 1) + 1): ~7.7 x
 * the message in the arena, within the budget of 8 x + 1 MiB. */
static void test_decode_arena_densest(void **state)
{
	size_t n = 16 * ((1u << 14) - 1) + 1, len = 0, elen;
	uint8_t *b = malloc(24 * n + 64);
	void *env;
	Weft__Envelope *d;
	char why[256];

	assert_non_null(b);
	memcpy(b, "\x08\x01\x10\x00\x1a\x01h", 7);
	len = 7;
	for (size_t i = 0; i < n; i++) {
		uint64_t key = i * 0x9e3779b97f4a7c15ull, one = 1;

		memcpy(b + len, "\x22\x16\x0a\x08", 4);
		memcpy(b + len + 4, &key, 8);
		memcpy(b + len + 12, "\x12\x0a\x01\x00", 4); /* AGG_WIRE_VERSION, count */
		memcpy(b + len + 16, &one, 8);
		len += 24;
	}
	assert_int_equal(wire_envelope_wrap(1, WEFT__ENVELOPE__BODY_PARTIAL, b, len, &env, &elen),
			 0);
	d = wire_decode(env, elen, why, sizeof(why));
	if (!d)
		fail_msg("%s", why);
	assert_int_equal(d->partial->n_groups, n);
	assert_int_equal(d->partial->groups[n - 1]->key.len, 8);
	assert_int_equal(d->partial->groups[n - 1]->states[0].len, 10);
	wire_free(d);
	free(env);
	free(b);
}

/* ---- roles, sequence numbers ---- */

static void test_roles_and_bodies(void **state)
{
	const char *user;

	assert_int_equal(wire_role_parse("agent"), WIRE_ROLE_AGENT);
	assert_int_equal(wire_role_parse("client"), WIRE_ROLE_CLIENT);
	assert_int_equal(wire_role_parse("aggregator"), WIRE_ROLE_AGGREGATOR);
	assert_int_equal(wire_role_parse("Agent"), WIRE_ROLE_NONE);
	assert_int_equal(wire_role_parse(NULL), WIRE_ROLE_NONE);
	assert_string_equal(wire_role_name(WIRE_ROLE_CLIENT), "client");
	assert_int_equal(wire_user_id_role("agent:web-1", &user), WIRE_ROLE_AGENT);
	assert_string_equal(user, "web-1");
	assert_int_equal(wire_user_id_role("aggregator:eu", &user), WIRE_ROLE_AGGREGATOR);
	assert_int_equal(wire_user_id_role("nobody", &user), WIRE_ROLE_NONE);
	assert_int_equal(wire_user_id_role(":x", &user), WIRE_ROLE_NONE);
	assert_int_equal(wire_user_id_role("", &user), WIRE_ROLE_NONE);

	for (size_t i = 0; i < NBODIES; i++) {
		Weft__Envelope__BodyCase b = all_bodies[i];
		bool agent = b == WEFT__ENVELOPE__BODY_HELLO ||
			     b == WEFT__ENVELOPE__BODY_HEARTBEAT ||
			     b == WEFT__ENVELOPE__BODY_PARTIAL ||
			     b == WEFT__ENVELOPE__BODY_QUERY_ERROR ||
			     b == WEFT__ENVELOPE__BODY_GRAPH_BATCH ||
			     b == WEFT__ENVELOPE__BODY_ROW_BATCH;
		bool client =
			b == WEFT__ENVELOPE__BODY_HELLO || b == WEFT__ENVELOPE__BODY_HEARTBEAT ||
			b == WEFT__ENVELOPE__BODY_SUBMIT || b == WEFT__ENVELOPE__BODY_QUERY_STOP ||
			b == WEFT__ENVELOPE__BODY_STATUS_REQUEST ||
			b == WEFT__ENVELOPE__BODY_SUBSCRIBE;
		bool server = b == WEFT__ENVELOPE__BODY_WELCOME ||
			      b == WEFT__ENVELOPE__BODY_QUERY_START ||
			      b == WEFT__ENVELOPE__BODY_QUERY_STOP ||
			      b == WEFT__ENVELOPE__BODY_ACK || b == WEFT__ENVELOPE__BODY_RESULT ||
			      b == WEFT__ENVELOPE__BODY_STATUS_REPLY ||
			      b == WEFT__ENVELOPE__BODY_ERROR ||
			      b == WEFT__ENVELOPE__BODY_ROW_BATCH; /* relayed to clients */

		assert_int_equal(wire_body_allowed(WIRE_ROLE_AGENT, b), agent);
		assert_int_equal(wire_body_allowed(WIRE_ROLE_AGGREGATOR, b), agent);
		assert_int_equal(wire_body_allowed(WIRE_ROLE_CLIENT, b), client);
		assert_false(wire_body_allowed(WIRE_ROLE_NONE, b));
		assert_int_equal(wire_body_from_server(b), server);
	}
	assert_false(wire_body_allowed(WIRE_ROLE_AGENT, WEFT__ENVELOPE__BODY__NOT_SET));
	assert_false(wire_body_from_server(WEFT__ENVELOPE__BODY__NOT_SET));
}

static void test_seq(void **state)
{
	struct wire_seq s = { 0 };

	assert_false(wire_seq_accept(&s, 10, 0)); /* seqs start at 1 */
	assert_true(wire_seq_accept(&s, 10, 1));
	assert_false(wire_seq_accept(&s, 10, 1)); /* a repeat */
	assert_true(wire_seq_accept(&s, 10, 2));
	assert_true(wire_seq_accept(&s, 10, 7)); /* gaps are fine: seqs are per transmission */
	assert_false(wire_seq_accept(&s, 10, 5));
	assert_false(wire_seq_accept(&s, 10, 7));
	assert_int_equal(s.last, 7);
	/* a new instance (the process restarted) starts over */
	assert_true(wire_seq_accept(&s, 11, 1));
	assert_int_equal(s.instance, 11);
	assert_int_equal(s.last, 1);
	assert_false(wire_seq_accept(&s, 11, 1));
	/* and back to the old instance: its numbering restarts too (it is a new lifetime) */
	assert_true(wire_seq_accept(&s, 10, 3));
	assert_true(wire_seq_accept(&s, 10, UINT64_MAX));
	assert_false(wire_seq_accept(&s, 10, UINT64_MAX));
	assert_false(wire_seq_accept(NULL, 1, 1));
}

/* ---- keys and allow-lists ---- */

static char tmpdir[64];

static void tmp_path(char *buf, size_t sz, const char *name)
{
	if (!tmpdir[0]) {
		snprintf(tmpdir, sizeof(tmpdir), "/tmp/weft-test-wire-XXXXXX");
		assert_non_null(mkdtemp(tmpdir));
	}
	snprintf(buf, sz, "%s/%s", tmpdir, name);
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static void test_keys(void **state)
{
	char pub[WIRE_KEY_LEN + 1], sec[WIRE_KEY_LEN + 1], pub2[WIRE_KEY_LEN + 1],
		sec2[WIRE_KEY_LEN + 1], rp[WIRE_KEY_LEN + 1], rs[WIRE_KEY_LEN + 1], path[128],
		text[256];
	struct stat st;

	assert_int_equal(wire_keypair_new(pub, sec), 0);
	assert_int_equal(wire_keypair_new(pub2, sec2), 0);
	assert_true(wire_key_valid(pub));
	assert_true(wire_key_valid(sec));
	assert_string_not_equal(pub, pub2);
	assert_false(wire_key_valid(NULL));
	assert_false(wire_key_valid(""));
	assert_false(wire_key_valid("short"));
	{
		char k[WIRE_KEY_LEN + 1];

		memcpy(k, pub, sizeof(k));
		k[5] = '"'; /* not in the Z85 alphabet */
		assert_false(wire_key_valid(k));
		memcpy(k, pub, sizeof(k));
		k[39] = 0; /* 39 characters */
		assert_false(wire_key_valid(k));
	}

	/* a key pair: written 0600, read back */
	tmp_path(path, sizeof(path), "agent.key");
	assert_int_equal(wire_keyfile_write(path, pub, sec), 0);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	assert_int_equal(wire_keyfile_read(path, rp, rs), 0);
	assert_string_equal(rp, pub);
	assert_string_equal(rs, sec);
	/* the public key alone from a key pair's file */
	assert_int_equal(wire_keyfile_read(path, rp, NULL), 0);
	assert_string_equal(rp, pub);

	/* a public-key file: no secret for whoever asks for one */
	tmp_path(path, sizeof(path), "agent.pub");
	assert_int_equal(wire_keyfile_write(path, pub, NULL), 0);
	assert_int_equal(wire_keyfile_read(path, rp, NULL), 0);
	assert_string_equal(rp, pub);
	assert_int_equal(wire_keyfile_read(path, rp, rs), -ENOKEY);

	/* halves of two different pairs */
	assert_int_equal(wire_keyfile_write(path, pub, sec2), -EINVAL);
	snprintf(text, sizeof(text), "public %s\nsecret %s\n", pub, sec2);
	tmp_path(path, sizeof(path), "mixed.key");
	write_file(path, text);
	assert_int_equal(wire_keyfile_read(path, rp, rs), -EINVAL);
	/* comments and blank lines are fine; garbage is not */
	snprintf(text, sizeof(text), "# made by hand\n\npublic %s\nsecret %s\n", pub, sec);
	write_file(path, text);
	assert_int_equal(wire_keyfile_read(path, rp, rs), 0);
	write_file(path, "public nonsense\n");
	assert_int_equal(wire_keyfile_read(path, rp, NULL), -EINVAL);
	snprintf(text, sizeof(text), "public %s extra\n", pub);
	write_file(path, text);
	assert_int_equal(wire_keyfile_read(path, rp, NULL), -EINVAL);
	snprintf(text, sizeof(text), "private %s\n", pub);
	write_file(path, text);
	assert_int_equal(wire_keyfile_read(path, rp, NULL), -EINVAL);
	write_file(path, "");
	assert_int_equal(wire_keyfile_read(path, rp, NULL), -EINVAL);
	tmp_path(path, sizeof(path), "missing.key");
	assert_int_equal(wire_keyfile_read(path, rp, NULL), -ENOENT);
	assert_int_equal(wire_keyfile_write(path, "bad", NULL), -EINVAL);
}

static void test_allowlist(void **state)
{
	char a[WIRE_KEY_LEN + 1], b[WIRE_KEY_LEN + 1], c[WIRE_KEY_LEN + 1], s[WIRE_KEY_LEN + 1],
		text[1024], path[128];
	struct wire_allowlist al;
	const char *name;
	int line;

	/* '#' is a Z85 character: a key holding one must not be cut as a comment */
	do
		assert_int_equal(wire_keypair_new(a, s), 0);
	while (!strchr(a, '#'));
	assert_int_equal(wire_keypair_new(b, s), 0);
	assert_int_equal(wire_keypair_new(c, s), 0);
	snprintf(text, sizeof(text),
		 "# the cluster's keys\n"
		 "\n"
		 "agent %s web-1\n"
		 "  client\t%s   alice # the on-call engineer\n"
		 "aggregator %s #unnamed\n",
		 a, b, c);
	assert_int_equal(wire_allowlist_parse(text, strlen(text), &al, &line), 0);
	assert_int_equal(al.n, 3);
	assert_int_equal(wire_allowlist_role(&al, a, &name), WIRE_ROLE_AGENT);
	assert_string_equal(name, "web-1");
	assert_int_equal(wire_allowlist_role(&al, b, &name), WIRE_ROLE_CLIENT);
	assert_string_equal(name, "alice");
	assert_int_equal(wire_allowlist_role(&al, c, &name), WIRE_ROLE_AGGREGATOR);
	assert_int_equal(strncmp(name, c, 8), 0); /* unnamed: the key's start */
	assert_int_equal(wire_allowlist_role(&al, s, &name), WIRE_ROLE_NONE);
	assert_null(name);
	assert_int_equal(wire_allowlist_role(&al, "x", NULL), WIRE_ROLE_NONE);
	tmp_path(path, sizeof(path), "allow");
	write_file(path, text);
	wire_allowlist_free(&al);
	assert_int_equal(wire_allowlist_load(path, &al, &line), 0);
	assert_int_equal(al.n, 3);
	wire_allowlist_free(&al);
	assert_int_equal(al.n, 0);

	/* each bad line is found, by number */
	{
		struct {
			const char *fmt;
			int line;
		} bad[] = {
			{ "agent %s\nroot %s\n", 2 }, /* unknown role */
			{ "agent %s\nagent %.39s\n", 2 }, /* a 39-character key */
			{ "agent %s a b\n", 1 }, /* a token too many */
			{ "agent %s\n\n\nclient %s\n", 4 }, /* a key listed twice */
			{ "agent %s web:1\n", 1 }, /* ':' splits the user id */
			{ "agent\n", 1 }, /* no key */
			{ "agent %s aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n",
			  1 }, /* a name of 64 characters */
		};

		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			snprintf(text, sizeof(text), bad[i].fmt, a, a);
			line = -1;
			assert_int_equal(wire_allowlist_parse(text, strlen(text), &al, &line),
					 -EINVAL);
			assert_int_equal(line, bad[i].line);
		}
	}
	assert_int_equal(wire_allowlist_parse("", 0, &al, &line), 0);
	assert_int_equal(al.n, 0);
	assert_int_equal(wire_allowlist_role(&al, a, NULL), WIRE_ROLE_NONE);
	tmp_path(path, sizeof(path), "none");
	assert_int_equal(wire_allowlist_load(path, &al, &line), -ENOENT);
}

/* ---- tables on the wire ---- */

#define NCPU 2

struct compiled {
	struct compile_result res;
	struct diag_list dl;
	const struct plan *p;
};

static struct compiled *compile(const char *q)
{
	struct compile_opts o = { .sz = sizeof(o) };
	struct compiled *c;

	if (geteuid() != 0)
		wt_skip("a test of tables on the wire: compiling its query resolves probes in "
			"tracefs and perf events, which needs root");
	c = calloc(1, sizeof(*c));
	assert_non_null(c);
	diag_list_init(&c->dl, q, "query");
	if (compiler_run(q, &o, PASS_PLAN, &c->dl, &c->res)) {
		diag_print(&c->dl, stderr, false);
		fail_msg("cannot compile: %s", q);
	}
	c->p = c->res.plan;
	return c;
}

static void compiled_free(struct compiled *c)
{
	compile_result_free(&c->res);
	diag_list_free(&c->dl);
	free(c);
}

/* One event into a per-CPU kernel value, as the generated program's updates do. */
static void kval_add(const struct plan *p, void *val, int64_t x)
{
	for (int a = 0; a < p->naggs; a++) {
		const struct plan_agg *g = &p->aggs[a];
		void *v = (uint8_t *)val + g->offset;
		bool dup = false;

		for (int b = 0; b < a; b++)
			dup |= p->aggs[b].offset == g->offset;
		if (dup)
			continue;
		switch (g->spec.kind) {
		case AGG_COUNT:
			weft_aggval_count_add(v, x);
			break;
		case AGG_SUM:
			weft_aggval_sum_add(v, x);
			break;
		case AGG_MIN:
			weft_aggval_min_add(v, x);
			break;
		case AGG_MAX:
			weft_aggval_max_add(v, x);
			break;
		case AGG_AVG:
			weft_aggval_avg_add(v, x);
			break;
		case AGG_STDDEV:
			weft_aggval_stddev_add(v, x);
			break;
		case AGG_HIST:
			weft_aggval_hist_add(v, x);
			break;
		case AGG_LHIST:
			weft_aggval_lhist_add(v, x, g->spec.lo, g->spec.hi, g->spec.step);
			break;
		case AGG_QUANTILE:
			weft_aggval_quantile_add(v, x);
			break;
		case AGG_DISTINCT:
			weft_aggval_distinct_add(v, x);
			break;
		default:
			fail();
		}
	}
}

static const char q_wire[] =
	"from profile:99hz group by comm, cpu select count() as calls, sum(cpu) as s, "
	"min(cpu) as lo, max(cpu) as hi, avg(cpu) as mean, stddev(cpu) as sd, hist(cpu) as h, "
	"lhist(cpu, 0, 100, 10) as lh, p50(cpu) as med, p99(cpu) as p99, distinct(cpu) as d";

/* ngroups groups of pseudo-random events; group g is ("comm<g % 7>", g). */
static struct agent_table *table_fill(const struct plan *p, int ngroups, uint64_t seed)
{
	struct agent_table *t = agent_table_new(p, 0);
	size_t vwords = (p->value_size + 7) / 8;
	uint8_t *key = calloc(1, p->key_size);
	uint64_t *vals = calloc(NCPU * vwords, 8);

	assert_non_null(t);
	assert_non_null(key);
	assert_non_null(vals);
	for (int g = 0; g < ngroups; g++) {
		const void *cpu_vals[NCPU] = { vals, vals + vwords };
		int64_t cpu = g;
		char comm[16];

		memset(key, 0, p->key_size);
		memset(vals, 0, NCPU * vwords * 8);
		snprintf(comm, sizeof(comm), "comm%d", g % 7);
		memcpy(key + p->keys[0].offset, comm, strlen(comm));
		memcpy(key + p->keys[1].offset, &cpu, 8);
		for (int e = 0; e < 20 + g % 5; e++) {
			seed = seed * 6364136223846793005ull + 1442695040888963407ull;
			kval_add(p, vals + (e % NCPU) * vwords, (int64_t)(seed >> 40) % 5000);
		}
		assert_int_equal(agent_table_add_kernel(t, key, cpu_vals, NCPU, NULL), 0);
	}
	free(key);
	free(vals);
	return t;
}

/* The groups of t through a real Partial: encode, decode. */
static Weft__Envelope *table_through_wire(const struct agent_table *t, Weft__Group ***groups,
					  size_t *n)
{
	Weft__Envelope e = WEFT__ENVELOPE__INIT;
	Weft__Partial pm = WEFT__PARTIAL__INIT;
	Weft__Envelope *d;
	void *buf;
	size_t len;
	char why[256];

	assert_int_equal(agent_table_to_groups(t, groups, n), 0);
	assert_int_equal(*n, agent_table_groups(t));
	pm.query_id = 1;
	pm.host = "h";
	pm.groups = *groups;
	pm.n_groups = *n;
	e.version = WIRE_VERSION;
	e.seq = 1;
	e.body_case = WEFT__ENVELOPE__BODY_PARTIAL;
	e.partial = &pm;
	assert_int_equal(wire_encode(&e, &buf, &len), 0);
	d = wire_decode(buf, len, why, sizeof(why));
	if (!d)
		fail_msg("%s", why);
	free(buf);
	return d;
}

static void test_table_round_trip(void **state)
{
	struct compiled *c = compile(q_wire);
	struct agent_table *t = table_fill(c->p, 40, 1);
	struct agent_table *u = agent_table_new(c->p, 0);
	struct agent_table *twice = table_fill(c->p, 40, 1);
	Weft__Group **groups;
	size_t n;
	Weft__Envelope *d = table_through_wire(t, &groups, &n);

	assert_non_null(u);
	assert_int_equal(n, 40);
	assert_int_equal(groups[0]->n_states, c->p->naggs);
	assert_int_equal(agent_table_add_groups(u, d->partial->groups, d->partial->n_groups), 0);
	assert_true(agent_table_equal(t, u));
	/* merged again: the same as merging the table into itself */
	assert_int_equal(agent_table_add_groups(u, d->partial->groups, d->partial->n_groups), 0);
	assert_int_equal(agent_table_merge(twice, t), 0);
	assert_true(agent_table_equal(twice, u));
	assert_false(agent_table_equal(t, u));
	/* nothing in, nothing changes */
	assert_int_equal(agent_table_add_groups(u, NULL, 0), 0);
	assert_true(agent_table_equal(twice, u));

	/* an empty table makes no groups */
	agent_table_clear(u);
	agent_groups_free(groups, n);
	assert_int_equal(agent_table_to_groups(u, &groups, &n), 0);
	assert_int_equal(n, 0);
	agent_groups_free(groups, n);

	wire_free(d);
	agent_table_free(t);
	agent_table_free(u);
	agent_table_free(twice);
	compiled_free(c);
}

/* A table without keys (one group, empty key) and with a bounded size. */
static void test_table_no_key_and_overflow(void **state)
{
	struct compiled *c = compile("from profile:99hz select count() as n, p90(cpu) as p");
	struct compiled *k = compile(q_wire);
	struct agent_table *t = agent_table_new(c->p, 0), *u = agent_table_new(c->p, 0);
	struct agent_table *big = table_fill(k->p, 30, 3), *small = agent_table_new(k->p, 10);
	size_t vwords = (c->p->value_size + 7) / 8;
	uint64_t *vals = calloc(NCPU * vwords, 8);
	const void *cpu_vals[NCPU] = { vals, vals + vwords };
	uint8_t zero[8] = { 0 };
	Weft__Group **groups;
	size_t n;
	Weft__Envelope *d;

	assert_non_null(vals);
	for (int i = 0; i < 9; i++)
		kval_add(c->p, vals + (i % NCPU) * vwords, i);
	assert_int_equal(agent_table_add_kernel(t, zero, cpu_vals, NCPU, NULL), 0);
	d = table_through_wire(t, &groups, &n);
	assert_int_equal(n, 1);
	assert_int_equal(groups[0]->key.len, 0);
	assert_int_equal(agent_table_add_groups(u, d->partial->groups, 1), 0);
	assert_true(agent_table_equal(t, u));
	agent_groups_free(groups, n);
	wire_free(d);

	/* 30 groups into a table of 10: 20 counted as overflow, not an error */
	d = table_through_wire(big, &groups, &n);
	assert_int_equal(agent_table_add_groups(small, d->partial->groups, n), 0);
	assert_int_equal(agent_table_groups(small), 10);
	assert_int_equal(agent_table_overflow(small), 20);
	agent_groups_free(groups, n);
	wire_free(d);

	free(vals);
	agent_table_free(t);
	agent_table_free(u);
	agent_table_free(big);
	agent_table_free(small);
	compiled_free(c);
	compiled_free(k);
}

static void test_table_hostile_groups(void **state)
{
	struct compiled *c = compile(q_wire);
	struct agent_table *t = table_fill(c->p, 5, 7);
	struct agent_table *before = table_fill(c->p, 5, 7);
	struct agent_table *other = table_fill(c->p, 5, 8);
	Weft__Group **groups;
	size_t n;
	Weft__Envelope *d = table_through_wire(other, &groups, &n);
	Weft__Group *list[6];
	Weft__Group g;
	ProtobufCBinaryData states[64];
	uint8_t key[64], junk[16];
	int naggs = c->p->naggs, ip50 = -1, ip99 = -1, ihist = -1, icount = -1;

	agent_groups_free(groups, n);
	assert_true(naggs < 64);
	for (int a = 0; a < naggs; a++) {
		const char *nm = c->p->aggs[a].name;

		if (!strcmp(nm, "med"))
			ip50 = a;
		if (!strcmp(nm, "p99"))
			ip99 = a;
		if (!strcmp(nm, "h"))
			ihist = a;
		if (!strcmp(nm, "calls"))
			icount = a;
	}
	assert_true(ip50 >= 0 && ip99 >= 0 && ihist >= 0 && icount >= 0);

	/* the good groups of `other`, then one bad one: nothing may change in t */
	for (int variant = 0; variant < 11; variant++) {
		const Weft__Group *src = d->partial->groups[0];

		g = *src;
		memcpy(states, src->states, src->n_states * sizeof(states[0]));
		g.states = states;
		assert_true(src->key.len < sizeof(key));
		memcpy(key, src->key.data, src->key.len);
		g.key.data = key;
		switch (variant) {
		case 0: /* one state missing */
			g.n_states--;
			break;
		case 1: /* one state too many */
			states[naggs] = states[0];
			g.n_states++;
			break;
		case 2: /* a state that does not decode */
			memset(junk, 0xff, sizeof(junk));
			states[icount].data = junk;
			states[icount].len = sizeof(junk);
			break;
		case 3: /* a state of another kind where a count belongs */
			states[icount] = states[ihist];
			break;
		case 4: /* two quantiles of one sketch that disagree */
			states[ip99] = d->partial->groups[1]->states[ip99];
			break;
		case 5: /* a key column short */
			g.key.len = 5 + key[1]; /* only the comm text */
			break;
		case 6: /* a trailing byte */
			key[g.key.len] = 0;
			g.key.len++;
			break;
		case 7: { /* an integer where the plan has text */
			uint64_t v = 1;

			key[0] = 'i';
			memcpy(key + 1, &v, 8);
			memcpy(key + 9, src->key.data + src->key.len - 9, 9);
			g.key.len = 18;
			break;
		}
		case 8: /* a text longer than the key */
			key[1] = 0xff;
			break;
		case 9: /* no key at all */
			g.key.data = NULL;
			g.key.len = 0;
			break;
		case 10: /* a state's bytes missing */
			states[0].data = NULL;
			states[0].len = 10;
			break;
		}
		for (int i = 0; i < 5; i++)
			list[i] = d->partial->groups[i];
		list[5] = &g;
		if (agent_table_add_groups(t, list, 6) != -EINVAL)
			fail_msg("hostile group variant %d was accepted", variant);
		assert_true(agent_table_equal(t, before));
	}
	/* a NULL group */
	list[5] = NULL;
	assert_int_equal(agent_table_add_groups(t, list, 6), -EINVAL);
	assert_int_equal(agent_table_add_groups(t, NULL, 1), -EINVAL);
	assert_int_equal(agent_table_add_groups(NULL, list, 0), -EINVAL);
	assert_true(agent_table_equal(t, before));
	/* and the good ones alone go in */
	assert_int_equal(agent_table_add_groups(t, list, 5), 0);
	assert_int_equal(agent_table_merge(before, other), 0);
	assert_true(agent_table_equal(t, before));

	/* groups of another plan's table (other key types) are refused */
	{
		struct compiled *c2 = compile("from profile:99hz group by cpu select count() as n");
		struct agent_table *t2 = agent_table_new(c2->p, 0);

		assert_int_equal(agent_table_add_groups(t2, d->partial->groups, 1), -EINVAL);
		assert_int_equal(agent_table_groups(t2), 0);
		agent_table_free(t2);
		compiled_free(c2);
	}

	wire_free(d);
	agent_table_free(t);
	agent_table_free(before);
	agent_table_free(other);
	compiled_free(c);
}

static int teardown_tmp(void **state)
{
	if (tmpdir[0]) {
		char cmd[128];

		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
		if (system(cmd) != 0)
			return -1;
	}
	return 0;
}

/* What weft submit checks before sending: the wire's bound and UTF-8, in words. */
static void test_query_check(void **state)
{
	char *q = malloc(WIRE_MAX_QUERY + 2), why[160];

	(void)state;
	assert_non_null(q);
	memset(q, ' ', WIRE_MAX_QUERY + 1);
	q[WIRE_MAX_QUERY] = 0; /* exactly the bound: fine */
	assert_int_equal(wire_query_check(q, why, sizeof(why)), 0);
	q[WIRE_MAX_QUERY] = ' ';
	q[WIRE_MAX_QUERY + 1] = 0;
	assert_int_equal(wire_query_check(q, why, sizeof(why)), -E2BIG);
	assert_string_equal(why, "the query is 65537 bytes: a query sent to the cluster is at "
				 "most 65536 bytes");
	free(q);
	assert_int_equal(wire_query_check("from x select count() -- \xc3\xa9t\xc3\xa9\n\t", why,
					  sizeof(why)),
			 0);
	assert_int_equal(wire_query_check("ab\xc3", why, sizeof(why)), -EINVAL);
	assert_string_equal(why, "the query is not valid UTF-8 at byte 3");
	assert_int_equal(wire_query_check("a\xed\xa0\x80", why, sizeof(why)), -EINVAL);
	assert_string_equal(why, "the query is not valid UTF-8 at byte 2"); /* a surrogate */
	assert_int_equal(wire_query_check("a\x01", why, sizeof(why)), -EINVAL);
	assert_string_equal(why, "the query holds the control character 0x01 at byte 2");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip_every_body),
		cmocka_unit_test(test_envelope_wrap),
		cmocka_unit_test(test_every_rule_refuses),
		cmocka_unit_test(test_graph_batch_roundtrip),
		cmocka_unit_test(test_envelope_shape),
		cmocka_unit_test(test_truncated_and_random),
		cmocka_unit_test(test_decode_budget),
		cmocka_unit_test(test_decode_arena),
		cmocka_unit_test(test_decode_arena_big_array),
		cmocka_unit_test(test_decode_arena_densest),
		cmocka_unit_test(test_decode_arena_budget),
		cmocka_unit_test(test_roles_and_bodies),
		cmocka_unit_test(test_seq),
		cmocka_unit_test(test_keys),
		cmocka_unit_test(test_allowlist),
		cmocka_unit_test(test_table_round_trip),
		cmocka_unit_test(test_table_no_key_and_overflow),
		cmocka_unit_test(test_table_hostile_groups),
		cmocka_unit_test(test_query_check),
	};

	return wt_status(cmocka_run_group_tests(tests, NULL, teardown_tmp));
}
