// SPDX-License-Identifier: Apache-2.0
/*
 * The wire: weft.proto envelopes over CURVE-secured ZeroMQ sockets (docs/protocol.md).
 *
 * Decoding is a small pipeline, each step bounding the next: the length (at most
 * WIRE_MAX_BYTES); a scan of the envelope's top-level fields (well-formed protobuf, exactly
 * one body field on the wire: protobuf-c would silently keep the last of several); protobuf-c's
 * unpack into an arena under an allocation budget (a few bytes of hostile input must not
 * become gigabytes of pointer arrays: empty repeated messages cost 2 bytes on the wire and ~64
 * in memory); and finally the checks of weft.proto's rules on the decoded tree — version, seq,
 * every string's length and character set, every count, every id.  The same checks run before
 * encoding, so a peer never sends what it would itself reject.
 *
 * The codec is this file; CURVE keys are wire_keys.c, the sockets both ends open are
 * wire_sock.c, and the aggregator's allow-list and ZAP handler are aggregator/zap.c.
 *
 * Must never: act on a message that failed a check, or crash or allocate without bound on
 * any input.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "base/zmq_dl.h"
#include "agent/wire.h"
#include "base/log.h"
#include "base/text.h"
#include "graph/graph.h"

#define WIRE_MAX_LIST 65536 /* ids, hosts, agents, queries in one message */
#define WIRE_MAX_FEATURES 1024
#define WIRE_MAX_STATES 256 /* per group; a plan has at most 32 aggregates */
#define WIRE_MAX_KEY (64u << 10)
#define WIRE_MAX_STATE (1u << 20)
#define WIRE_MAX_DROPS 64 /* enum weft_drop has 9; room for newer peers */
#define WIRE_HB_MIN_MS 10
#define WIRE_HB_MAX_MS 3600000
/* decoding len bytes may take this much memory (wire_decode()'s arena, padding included):
 * 8 x len covers every message weft makes (a partial of its smallest groups needs 7.7 x at
 * worst: see the arena; packed one-byte ids 8 x) */
#define DECODE_BUDGET(len) ((size_t)(len)*8 + (1u << 20))

/* ---------------------------------------------------------------- roles and bodies */

static const char *const role_names[] = {
	[WIRE_ROLE_NONE] = "none",
	[WIRE_ROLE_AGENT] = "agent",
	[WIRE_ROLE_CLIENT] = "client",
	[WIRE_ROLE_AGGREGATOR] = "aggregator",
};

const char *wire_role_name(enum wire_role r)
{
	if ((unsigned)r >= sizeof(role_names) / sizeof(role_names[0]))
		return "none";
	return role_names[r];
}

enum wire_role wire_role_parse(const char *s)
{
	if (!s)
		return WIRE_ROLE_NONE;
	for (unsigned i = WIRE_ROLE_AGENT; i < sizeof(role_names) / sizeof(role_names[0]); i++)
		if (strcmp(s, role_names[i]) == 0)
			return (enum wire_role)i;
	return WIRE_ROLE_NONE;
}

enum wire_role wire_user_id_role(const char *user_id, const char **name)
{
	char role[16];
	const char *colon;
	size_t n;

	if (name)
		*name = NULL;
	if (!user_id || !(colon = strchr(user_id, ':')))
		return WIRE_ROLE_NONE;
	n = (size_t)(colon - user_id);
	if (n == 0 || n >= sizeof(role))
		return WIRE_ROLE_NONE;
	memcpy(role, user_id, n);
	role[n] = 0;
	if (name)
		*name = colon + 1;
	return wire_role_parse(role);
}

const char *wire_body_name(Weft__Envelope__BodyCase body)
{
	switch (body) {
	case WEFT__ENVELOPE__BODY_HELLO:
		return "hello";
	case WEFT__ENVELOPE__BODY_WELCOME:
		return "welcome";
	case WEFT__ENVELOPE__BODY_HEARTBEAT:
		return "heartbeat";
	case WEFT__ENVELOPE__BODY_SUBMIT:
		return "submit";
	case WEFT__ENVELOPE__BODY_QUERY_START:
		return "query_start";
	case WEFT__ENVELOPE__BODY_QUERY_STOP:
		return "query_stop";
	case WEFT__ENVELOPE__BODY_PARTIAL:
		return "partial";
	case WEFT__ENVELOPE__BODY_ACK:
		return "ack";
	case WEFT__ENVELOPE__BODY_RESULT:
		return "result";
	case WEFT__ENVELOPE__BODY_STATUS_REQUEST:
		return "status_request";
	case WEFT__ENVELOPE__BODY_STATUS_REPLY:
		return "status_reply";
	case WEFT__ENVELOPE__BODY_SUBSCRIBE:
		return "subscribe";
	case WEFT__ENVELOPE__BODY_QUERY_ERROR:
		return "query_error";
	case WEFT__ENVELOPE__BODY_ERROR:
		return "error";
	case WEFT__ENVELOPE__BODY_GRAPH_BATCH:
		return "graph_batch";
	case WEFT__ENVELOPE__BODY_ROW_BATCH:
		return "row_batch";
	default:
		return "none";
	}
}

bool wire_body_allowed(enum wire_role role, Weft__Envelope__BodyCase body)
{
	switch (role) {
	case WIRE_ROLE_AGENT:
	case WIRE_ROLE_AGGREGATOR: /* a child aggregator reports as an agent does */
		return body == WEFT__ENVELOPE__BODY_HELLO ||
		       body == WEFT__ENVELOPE__BODY_HEARTBEAT ||
		       body == WEFT__ENVELOPE__BODY_PARTIAL ||
		       body == WEFT__ENVELOPE__BODY_QUERY_ERROR ||
		       body == WEFT__ENVELOPE__BODY_GRAPH_BATCH ||
		       body == WEFT__ENVELOPE__BODY_ROW_BATCH;
	case WIRE_ROLE_CLIENT:
		return body == WEFT__ENVELOPE__BODY_HELLO ||
		       body == WEFT__ENVELOPE__BODY_HEARTBEAT ||
		       body == WEFT__ENVELOPE__BODY_SUBMIT ||
		       body == WEFT__ENVELOPE__BODY_QUERY_STOP ||
		       body == WEFT__ENVELOPE__BODY_STATUS_REQUEST ||
		       body == WEFT__ENVELOPE__BODY_SUBSCRIBE;
	default:
		return false;
	}
}

bool wire_body_from_server(Weft__Envelope__BodyCase body)
{
	return body == WEFT__ENVELOPE__BODY_WELCOME || body == WEFT__ENVELOPE__BODY_QUERY_START ||
	       body == WEFT__ENVELOPE__BODY_QUERY_STOP || body == WEFT__ENVELOPE__BODY_ACK ||
	       body == WEFT__ENVELOPE__BODY_RESULT || body == WEFT__ENVELOPE__BODY_STATUS_REPLY ||
	       body == WEFT__ENVELOPE__BODY_ERROR || body == WEFT__ENVELOPE__BODY_ROW_BATCH;
}

bool wire_seq_accept(struct wire_seq *s, uint64_t instance, uint64_t seq)
{
	if (!s || seq == 0)
		return false;
	if (s->instance != instance) {
		/* a new process lifetime: its numbering starts over */
		s->instance = instance;
		s->last = 0;
	}
	if (seq <= s->last)
		return false;
	s->last = seq;
	return true;
}

/* ---------------------------------------------------------------- validation */

struct why {
	char *buf;
	size_t sz;
};

__attribute__((format(printf, 2, 3))) static bool bad(struct why *w, const char *fmt, ...)
{
	va_list ap;

	if (w->buf && w->sz) {
		va_start(ap, fmt);
		vsnprintf(w->buf, w->sz, fmt, ap);
		va_end(ap);
	}
	return false;
}

/*
 * A string field: at most max bytes of valid UTF-8; names carry no control characters at
 * all, prose only newlines, tabs and carriage returns (text_check() of base/text.h).  NULL
 * counts as empty (protobuf-c packs it so).  nonempty: "" is refused.
 */
static bool check_str(struct why *w, const char *field, const char *s, size_t max,
		      enum text_class kind, bool nonempty)
{
	const char *t = s ? s : "";
	size_t len = strlen(t), i;

	if (nonempty && len == 0)
		return bad(w, "%s: empty", field);
	if (len > max)
		return bad(w, "%s: %zu bytes (at most %zu)", field, len, max);
	i = text_check(t, len, kind);
	if (i == len)
		return true;
	if (text_utf8_seq(t + i, len - i) == 0)
		return bad(w, "%s: not UTF-8 at byte %zu", field, i);
	return bad(w, "%s: control character 0x%02x at byte %zu", field, (unsigned char)t[i], i);
}

int wire_query_check(const char *text, char *why, size_t whysz)
{
	const unsigned char *u = (const unsigned char *)(text ? text : "");
	size_t len = strlen((const char *)u), i = 0;

	if (len > WIRE_MAX_QUERY) {
		snprintf(why, whysz,
			 "the query is %zu bytes: a query sent to the cluster is at most %u bytes",
			 len, (unsigned)WIRE_MAX_QUERY);
		return -E2BIG;
	}
	while (i < len) {
		size_t n = text_utf8_seq((const char *)u + i, len - i);

		if (n == 0) {
			snprintf(why, whysz, "the query is not valid UTF-8 at byte %zu", i + 1);
			return -EINVAL;
		}
		if (n == 1 && (u[i] < 0x20 || u[i] == 0x7f) && u[i] != '\n' && u[i] != '\t' &&
		    u[i] != '\r') {
			snprintf(why, whysz,
				 "the query holds the control character 0x%02x at byte %zu", u[i],
				 i + 1);
			return -EINVAL;
		}
		i += n;
	}
	return 0;
}

static bool check_strs(struct why *w, const char *field, char *const *v, size_t n, size_t maxn,
		       size_t max, bool nonempty)
{
	if (n > maxn)
		return bad(w, "%s: %zu entries (at most %zu)", field, n, maxn);
	if (n && !v)
		return bad(w, "%s: missing", field);
	for (size_t i = 0; i < n; i++)
		if (!check_str(w, field, v[i], max, TEXT_NAME, nonempty))
			return false;
	return true;
}

static bool check_bytes(struct why *w, const char *field, const ProtobufCBinaryData *b, size_t min,
			size_t max)
{
	if (b->len && !b->data)
		return bad(w, "%s: missing", field);
	if (b->len < min)
		return bad(w, "%s: %zu bytes (at least %zu)", field, b->len, min);
	if (b->len > max)
		return bad(w, "%s: %zu bytes (at most %zu)", field, b->len, max);
	return true;
}

static bool check_ids(struct why *w, const char *field, const uint64_t *v, size_t n)
{
	if (n > WIRE_MAX_LIST)
		return bad(w, "%s: %zu entries (at most %u)", field, n, WIRE_MAX_LIST);
	if (n && !v)
		return bad(w, "%s: missing", field);
	for (size_t i = 0; i < n; i++)
		if (v[i] == 0)
			return bad(w, "%s: query id 0", field);
	return true;
}

static bool check_query_id(struct why *w, const char *msg, uint64_t id)
{
	if (id == 0)
		return bad(w, "%s.query_id: 0 (ids start at 1)", msg);
	return true;
}

static bool check_groups(struct why *w, const char *msg, Weft__Group *const *g, size_t n)
{
	if (n > WIRE_MAX_GROUPS)
		return bad(w, "%s.groups: %zu (at most %u)", msg, n, WIRE_MAX_GROUPS);
	if (n && !g)
		return bad(w, "%s.groups: missing", msg);
	for (size_t i = 0; i < n; i++) {
		if (!g[i])
			return bad(w, "%s.groups[%zu]: missing", msg, i);
		if (!check_bytes(w, "Group.key", &g[i]->key, 0, WIRE_MAX_KEY))
			return false;
		if (g[i]->n_states > WIRE_MAX_STATES)
			return bad(w, "%s.groups[%zu]: %zu states (at most %u)", msg, i,
				   g[i]->n_states, WIRE_MAX_STATES);
		if (g[i]->n_states && !g[i]->states)
			return bad(w, "%s.groups[%zu].states: missing", msg, i);
		for (size_t s = 0; s < g[i]->n_states; s++)
			if (!check_bytes(w, "Group.states", &g[i]->states[s], 1, WIRE_MAX_STATE))
				return false;
	}
	return true;
}

static bool check_drops(struct why *w, const char *msg, size_t n, const uint64_t *v)
{
	if (n > WIRE_MAX_DROPS)
		return bad(w, "%s.drops: %zu entries (at most %u)", msg, n, WIRE_MAX_DROPS);
	if (n && !v)
		return bad(w, "%s.drops: missing", msg);
	return true;
}

static bool check_hello(struct why *w, const Weft__Hello *h)
{
	enum wire_role r = wire_role_parse(h->role);

	if (r == WIRE_ROLE_NONE)
		return bad(w, "Hello.role: '%.32s' is not agent, client or aggregator",
			   h->role ? h->role : "");
	return check_str(w, "Hello.host", h->host, WIRE_MAX_HOST, TEXT_NAME,
			 r != WIRE_ROLE_CLIENT) &&
	       check_str(w, "Hello.version", h->version, WIRE_MAX_STRING, TEXT_NAME, true) &&
	       (h->instance ? true : bad(w, "Hello.instance: 0")) &&
	       check_str(w, "Hello.kernel", h->kernel, WIRE_MAX_STRING, TEXT_NAME, false) &&
	       check_str(w, "Hello.scope", h->scope, WIRE_MAX_STRING, TEXT_NAME, false) &&
	       check_strs(w, "Hello.features", h->features, h->n_features, WIRE_MAX_FEATURES,
			  WIRE_MAX_STRING, true) &&
	       check_ids(w, "Hello.running", h->running, h->n_running);
}

static bool check_welcome(struct why *w, const Weft__Welcome *m)
{
	if (!check_str(w, "Welcome.aggregator", m->aggregator, WIRE_MAX_HOST, TEXT_NAME, true))
		return false;
	if (!m->instance)
		return bad(w, "Welcome.instance: 0");
	if (m->heartbeat_ms < WIRE_HB_MIN_MS || m->heartbeat_ms > WIRE_HB_MAX_MS)
		return bad(w, "Welcome.heartbeat_ms: %" PRIu64 " (%u to %u)", m->heartbeat_ms,
			   WIRE_HB_MIN_MS, WIRE_HB_MAX_MS);
	return true;
}

static bool check_partial(struct why *w, const Weft__Partial *m)
{
	return check_query_id(w, "Partial", m->query_id) &&
	       check_str(w, "Partial.host", m->host, WIRE_MAX_HOST, TEXT_NAME, true) &&
	       check_groups(w, "Partial", m->groups, m->n_groups) &&
	       check_drops(w, "Partial", m->n_drops, m->drops) &&
	       check_strs(w, "Partial.hosts", m->hosts, m->n_hosts, WIRE_MAX_LIST, WIRE_MAX_HOST,
			  true) &&
	       check_strs(w, "Partial.missing", m->missing, m->n_missing, WIRE_MAX_LIST,
			  WIRE_MAX_HOST, true) &&
	       check_str(w, "Partial.stopped", m->stopped, WIRE_MAX_STRING, TEXT_PROSE, false) &&
	       (!m->stopped || !*m->stopped || (m->has_last && m->last) ||
		bad(w, "Partial.stopped: set without last"));
}

/* A VM synchronisation's state (docs/vm.md "Live"): both ids, and an offset only with its
 * bound and an intersection that holds it. */
static bool check_vm_sync(struct why *w, const char *field, const Weft__VmSync *v)
{
	if (!v)
		return true;
	if (!check_query_id(w, field, v->host_query) || !check_query_id(w, field, v->guest_query))
		return false;
	if (v->has_synced && v->synced) {
		if (!v->points || !v->has_offset_ns || !v->has_error_ns || !v->has_lo_ns ||
		    !v->has_hi_ns || v->error_ns < 0 || v->lo_ns > v->hi_ns ||
		    v->offset_ns < v->lo_ns || v->offset_ns > v->hi_ns)
			return bad(w, "%s: synced without a consistent offset, bound and interval",
				   field);
	} else if (v->has_offset_ns || v->has_error_ns) {
		return bad(w, "%s: an offset without synchronisation", field);
	}
	return true;
}

static bool check_result(struct why *w, const Weft__Result *m)
{
	return check_query_id(w, "Result", m->query_id) &&
	       check_vm_sync(w, "Result.vm_sync", m->vm_sync) &&
	       check_groups(w, "Result", m->groups, m->n_groups) &&
	       check_drops(w, "Result", m->n_drops, m->drops) &&
	       check_strs(w, "Result.hosts", m->hosts, m->n_hosts, WIRE_MAX_LIST, WIRE_MAX_HOST,
			  true) &&
	       check_strs(w, "Result.missing", m->missing, m->n_missing, WIRE_MAX_LIST,
			  WIRE_MAX_HOST, true) &&
	       (!m->has_manifest ||
		check_bytes(w, "Result.manifest", &m->manifest, 0, WIRE_MAX_OBJECT));
}

static bool check_status_reply(struct why *w, const Weft__StatusReply *m)
{
	if (!check_str(w, "StatusReply.aggregator", m->aggregator, WIRE_MAX_HOST, TEXT_NAME, false))
		return false;
	if (m->n_agents > WIRE_MAX_LIST || (m->n_agents && !m->agents))
		return bad(w, "StatusReply.agents: %zu entries (at most %u)", m->n_agents,
			   WIRE_MAX_LIST);
	for (size_t i = 0; i < m->n_agents; i++) {
		const Weft__AgentStatus *a = m->agents[i];

		if (!a)
			return bad(w, "StatusReply.agents[%zu]: missing", i);
		if (!check_str(w, "AgentStatus.host", a->host, WIRE_MAX_HOST, TEXT_NAME, false) ||
		    !check_str(w, "AgentStatus.version", a->version, WIRE_MAX_STRING, TEXT_NAME,
			       false) ||
		    !check_str(w, "AgentStatus.kernel", a->kernel, WIRE_MAX_STRING, TEXT_NAME,
			       false) ||
		    !check_str(w, "AgentStatus.scope", a->scope, WIRE_MAX_STRING, TEXT_NAME,
			       false) ||
		    !check_strs(w, "AgentStatus.features", a->features, a->n_features,
				WIRE_MAX_FEATURES, WIRE_MAX_STRING, true) ||
		    !check_ids(w, "AgentStatus.running", a->running, a->n_running))
			return false;
		if (a->role && *a->role && wire_role_parse(a->role) == WIRE_ROLE_NONE)
			return bad(w, "AgentStatus.role: '%.32s' is not a role", a->role);
	}
	if (m->graph &&
	    !check_str(w, "GraphStatus.path", m->graph->path, WIRE_MAX_STRING, TEXT_NAME, false))
		return false;
	if (m->n_queries > WIRE_MAX_LIST || (m->n_queries && !m->queries))
		return bad(w, "StatusReply.queries: %zu entries (at most %u)", m->n_queries,
			   WIRE_MAX_LIST);
	for (size_t i = 0; i < m->n_queries; i++) {
		const Weft__QueryStatus *q = m->queries[i];

		if (!q)
			return bad(w, "StatusReply.queries[%zu]: missing", i);
		if (!check_query_id(w, "QueryStatus", q->query_id) ||
		    !check_str(w, "QueryStatus.query", q->query, WIRE_MAX_QUERY, TEXT_PROSE,
			       false) ||
		    !check_strs(w, "QueryStatus.hosts", q->hosts, q->n_hosts, WIRE_MAX_LIST,
				WIRE_MAX_HOST, true) ||
		    !check_strs(w, "QueryStatus.only_hosts", q->only_hosts, q->n_only_hosts,
				WIRE_MAX_LIST, WIRE_MAX_HOST, true) ||
		    !check_vm_sync(w, "QueryStatus.vm_sync", q->vm_sync))
			return false;
	}
	return true;
}

/*
 * Graph strings: valid UTF-8 of at most GRAPH_MAX_STR bytes, as graph_strndup() would keep
 * them; control characters are allowed (span names of other systems carry them, and every
 * output escapes them), NUL cannot occur (protobuf-c refuses it in a string).
 */
static bool check_gstr(struct why *w, const char *field, size_t i, const char *s, bool nonempty)
{
	size_t len = s ? strlen(s) : 0;

	if (nonempty && len == 0)
		return bad(w, "%s[%zu]: empty", field, i);
	if (len > GRAPH_MAX_STR)
		return bad(w, "%s[%zu]: %zu bytes (at most %u)", field, i, len,
			   (unsigned)GRAPH_MAX_STR);
	for (size_t at = 0; at < len;) {
		size_t n = text_utf8_seq(s + at, len - at);

		if (n == 0)
			return bad(w, "%s[%zu]: not UTF-8 at byte %zu", field, i, at);
		at += n;
	}
	return true;
}

static bool check_graph_batch(struct why *w, const Weft__GraphBatch *m)
{
	if (!check_query_id(w, "GraphBatch", m->query_id) ||
	    !check_str(w, "GraphBatch.host", m->host, WIRE_MAX_HOST, TEXT_NAME, true) ||
	    !check_strs(w, "GraphBatch.hosts", m->hosts, m->n_hosts, WIRE_MAX_LIST, WIRE_MAX_HOST,
			true) ||
	    (m->has_aggs && !check_bytes(w, "GraphBatch.aggs", &m->aggs, 0, WIRE_MAX_OBJECT)))
		return false;
	if (m->n_tasks > WIRE_MAX_ELEMS || (m->n_tasks && !m->tasks))
		return bad(w, "GraphBatch.tasks: %zu (at most %u)", m->n_tasks, WIRE_MAX_ELEMS);
	if (m->n_events > WIRE_MAX_ELEMS || (m->n_events && !m->events))
		return bad(w, "GraphBatch.events: %zu (at most %u)", m->n_events, WIRE_MAX_ELEMS);
	if (m->n_edges > WIRE_MAX_ELEMS || (m->n_edges && !m->edges))
		return bad(w, "GraphBatch.edges: %zu (at most %u)", m->n_edges, WIRE_MAX_ELEMS);
	for (size_t i = 0; i < m->n_tasks; i++) {
		const Weft__GraphTask *t = m->tasks[i];

		if (!t)
			return bad(w, "GraphBatch.tasks[%zu]: missing", i);
		if (t->id == 0)
			return bad(w, "GraphTask[%zu].id: 0", i);
		if (!t->trace_hi && !t->trace_lo)
			return bad(w, "GraphTask[%zu]: trace id 0", i);
		if (t->has_parent && t->parent == t->id)
			return bad(w, "GraphTask[%zu].parent: the task itself", i);
		if (t->has_end_ns && t->end_ns < t->start_ns)
			return bad(w, "GraphTask[%zu].end_ns: before its start", i);
		if (t->has_status && t->status > GRAPH_STATUS_ERROR)
			return bad(w, "GraphTask[%zu].status: %u (0 to 2)", i, t->status);
		if (t->has_source && t->source >= GRAPH_SRC_COUNT)
			return bad(w, "GraphTask[%zu].source: %u unknown", i, t->source);
		if ((t->has_pid && t->pid < -1) || (t->has_tid && t->tid < -1))
			return bad(w, "GraphTask[%zu]: pid or tid below -1", i);
		if (!check_gstr(w, "GraphTask.service", i, t->service, false) ||
		    !check_gstr(w, "GraphTask.name", i, t->name, false) ||
		    !check_str(w, "GraphTask.host", t->host, WIRE_MAX_HOST, TEXT_NAME, false) ||
		    !check_gstr(w, "GraphTask.attrs", i, t->attrs, false))
			return false;
	}
	for (size_t i = 0; i < m->n_events; i++) {
		const Weft__GraphEvent *v = m->events[i];

		if (!v)
			return bad(w, "GraphBatch.events[%zu]: missing", i);
		if (v->task == 0)
			return bad(w, "GraphEvent[%zu].task: 0", i);
		if (!v->trace_hi && !v->trace_lo)
			return bad(w, "GraphEvent[%zu]: trace id 0", i);
		if (v->has_source && v->source >= GRAPH_SRC_COUNT)
			return bad(w, "GraphEvent[%zu].source: %u unknown", i, v->source);
		if (!check_gstr(w, "GraphEvent.name", i, v->name, false) ||
		    !check_gstr(w, "GraphEvent.attrs", i, v->attrs, false))
			return false;
	}
	for (size_t i = 0; i < m->n_edges; i++) {
		const Weft__GraphEdge *d = m->edges[i];

		if (!d)
			return bad(w, "GraphBatch.edges[%zu]: missing", i);
		if (!d->trace_hi && !d->trace_lo)
			return bad(w, "GraphEdge[%zu]: trace id 0", i);
		if (d->kind >= GRAPH_EDGE_COUNT)
			return bad(w, "GraphEdge[%zu].kind: %u unknown", i, d->kind);
		if (d->from_task == 0 || d->to_task == 0)
			return bad(w, "GraphEdge[%zu]: task id 0", i);
		if (d->has_source && d->source >= GRAPH_SRC_COUNT)
			return bad(w, "GraphEdge[%zu].source: %u unknown", i, d->source);
	}
	return true;
}

/* A batch of stream rows: bounded counts, as many cells as rows x columns. */
static bool check_row_batch(struct why *w, const Weft__RowBatch *m)
{
	uint64_t rows = m->has_rows ? m->rows : 0, cols = m->has_columns ? m->columns : 0;

	if (!check_query_id(w, "RowBatch", m->query_id) ||
	    !check_str(w, "RowBatch.host", m->host, WIRE_MAX_HOST, TEXT_NAME, true))
		return false;
	if (rows > WIRE_MAX_ROWS)
		return bad(w, "RowBatch.rows: %" PRIu64 " (at most %u)", rows, WIRE_MAX_ROWS);
	if (cols > WIRE_MAX_CELLS)
		return bad(w, "RowBatch.columns: %" PRIu64 " (at most %u)", cols, WIRE_MAX_CELLS);
	if ((m->n_ints && !m->ints) || (m->n_texts && !m->texts) ||
	    (uint64_t)m->n_ints + m->n_texts != rows * cols)
		return bad(w, "RowBatch: %zu cells for %" PRIu64 " rows of %" PRIu64 " columns",
			   m->n_ints + m->n_texts, rows, cols);
	for (size_t i = 0; i < m->n_texts; i++)
		if (m->texts[i].len > WIRE_MAX_CELL || (m->texts[i].len && !m->texts[i].data))
			return bad(w, "RowBatch.texts[%zu]: %zu bytes (at most %u)", i,
				   m->texts[i].len, WIRE_MAX_CELL);
	return true;
}

static bool check_body(struct why *w, const Weft__Envelope *e)
{
	switch (e->body_case) {
	case WEFT__ENVELOPE__BODY_HELLO:
		return check_hello(w, e->hello);
	case WEFT__ENVELOPE__BODY_WELCOME:
		return check_welcome(w, e->welcome);
	case WEFT__ENVELOPE__BODY_HEARTBEAT:
		return check_ids(w, "Heartbeat.running", e->heartbeat->running,
				 e->heartbeat->n_running);
	case WEFT__ENVELOPE__BODY_SUBMIT:
		return check_str(w, "Submit.query", e->submit->query, WIRE_MAX_QUERY, TEXT_PROSE,
				 true) &&
		       check_bytes(w, "Submit.manifest", &e->submit->manifest, 1,
				   WIRE_MAX_OBJECT) &&
		       check_bytes(w, "Submit.object", &e->submit->object, 1, WIRE_MAX_OBJECT) &&
		       check_strs(w, "Submit.only_hosts", e->submit->only_hosts,
				  e->submit->n_only_hosts, WIRE_MAX_LIST, WIRE_MAX_HOST, true) &&
		       (!e->submit->has_vm_sync_host ||
			check_query_id(w, "Submit.vm_sync_host", e->submit->vm_sync_host));
	case WEFT__ENVELOPE__BODY_QUERY_START: {
		const Weft__QueryStart *q = e->query_start;

		if (!check_query_id(w, "QueryStart", q->query_id) ||
		    !check_str(w, "QueryStart.query", q->query, WIRE_MAX_QUERY, TEXT_PROSE,
			       false) ||
		    !check_bytes(w, "QueryStart.manifest", &q->manifest, 1, WIRE_MAX_OBJECT) ||
		    !check_bytes(w, "QueryStart.object", &q->object, 1, WIRE_MAX_OBJECT))
			return false;
		if (q->epoch_realtime_ns == 0)
			return bad(w, "QueryStart.epoch_realtime_ns: 0");
		if (q->has_end_realtime_ns && q->end_realtime_ns &&
		    q->end_realtime_ns < q->epoch_realtime_ns)
			return bad(w, "QueryStart.end_realtime_ns: before the epoch");
		return true;
	}
	case WEFT__ENVELOPE__BODY_QUERY_STOP:
		return check_query_id(w, "QueryStop", e->query_stop->query_id);
	case WEFT__ENVELOPE__BODY_PARTIAL:
		return check_partial(w, e->partial);
	case WEFT__ENVELOPE__BODY_ACK:
		return true;
	case WEFT__ENVELOPE__BODY_RESULT:
		return check_result(w, e->result);
	case WEFT__ENVELOPE__BODY_STATUS_REQUEST:
		return true;
	case WEFT__ENVELOPE__BODY_STATUS_REPLY:
		return check_status_reply(w, e->status_reply);
	case WEFT__ENVELOPE__BODY_SUBSCRIBE:
		return check_query_id(w, "Subscribe", e->subscribe->query_id);
	case WEFT__ENVELOPE__BODY_QUERY_ERROR:
		return check_query_id(w, "QueryError", e->query_error->query_id) &&
		       check_str(w, "QueryError.message", e->query_error->message, WIRE_MAX_STRING,
				 TEXT_PROSE, true) &&
		       check_str(w, "QueryError.detail", e->query_error->detail, WIRE_MAX_STRING,
				 TEXT_PROSE, false);
	case WEFT__ENVELOPE__BODY_ERROR:
		return check_str(w, "Error.message", e->error->message, WIRE_MAX_STRING, TEXT_PROSE,
				 true);
	case WEFT__ENVELOPE__BODY_GRAPH_BATCH:
		return check_graph_batch(w, e->graph_batch);
	case WEFT__ENVELOPE__BODY_ROW_BATCH:
		return check_row_batch(w, e->row_batch);
	default:
		return bad(w, "no body (or one this version does not know)");
	}
}

static bool check_envelope(struct why *w, const Weft__Envelope *e)
{
	if (e->version != WIRE_VERSION)
		return bad(w, "version %" PRIu32 " (this peer speaks %d)", e->version,
			   WIRE_VERSION);
	if (e->seq == 0)
		return bad(w, "seq 0 (sequence numbers start at 1)");
	/* the union member of the set case is never NULL after a decode; a caller's may be */
	if (e->body_case != WEFT__ENVELOPE__BODY__NOT_SET && !e->hello)
		return bad(w, "%s: body missing", wire_body_name(e->body_case));
	return check_body(w, e);
}

int wire_validate(const Weft__Envelope *e, char *why, size_t whysz)
{
	struct why w = { why, whysz };

	if (why && whysz)
		why[0] = 0;
	if (!e)
		return bad(&w, "no envelope"), -EINVAL;
	return check_envelope(&w, e) ? 0 : -EINVAL;
}

/* ---------------------------------------------------------------- decode and encode */

static bool varint_get(const uint8_t *p, size_t len, size_t *off, uint64_t *v)
{
	uint64_t x = 0;

	for (int shift = 0; shift < 64; shift += 7) {
		uint8_t b;

		if (*off >= len)
			return false;
		b = p[(*off)++];
		x |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			*v = x;
			return true;
		}
	}
	return false; /* more than 10 bytes */
}

/*
 * The envelope's own fields, without decoding the bodies: well-formed tags and lengths, and
 * how many body fields (numbers 10..WIRE_BODY_LAST) appear.  protobuf-c keeps only the last of several
 * oneof members, which would hide a malformed sender.
 */
static bool scan_envelope(const uint8_t *p, size_t len, unsigned *nbodies, struct why *w)
{
	size_t off = 0;

	*nbodies = 0;
	while (off < len) {
		uint64_t tag, v;
		uint32_t field;

		if (!varint_get(p, len, &off, &tag))
			return bad(w, "not a protobuf message (bad tag at byte %zu)", off);
		field = (uint32_t)(tag >> 3);
		if (tag >> 3 > 0x1fffffff || field == 0)
			return bad(w, "not a protobuf message (field 0)");
		switch (tag & 7) {
		case 0:
			if (!varint_get(p, len, &off, &v))
				return bad(w, "not a protobuf message (bad varint)");
			break;
		case 1:
			if (len - off < 8)
				return bad(w, "truncated");
			off += 8;
			break;
		case 5:
			if (len - off < 4)
				return bad(w, "truncated");
			off += 4;
			break;
		case 2:
			if (!varint_get(p, len, &off, &v) || v > len - off)
				return bad(w, "truncated");
			off += (size_t)v;
			break;
		default:
			return bad(w, "not a protobuf message (wire type %u)", (unsigned)(tag & 7));
		}
		if (field >= WEFT__ENVELOPE__BODY_HELLO && field <= WIRE_BODY_LAST)
			(*nbodies)++;
	}
	return true;
}

/*
 * The decode arena: everything protobuf-c allocates for one message is bumped out of a few
 * big chunks and freed at once by wire_free() — a Partial of 1000 groups is ~5000
 * allocations, which malloc()/free() one by one cost more than the rest of the unpack.
 *
 * The budget: the chunks' total size (headers, alignment padding and unused ends included)
 * never exceeds DECODE_BUDGET(len); an allocation that would need more fails the unpack with
 * the same "too costly" as before.  What protobuf-c frees during the unpack (its scratch
 * arrays of scanned fields, ~32-64 bytes per field of the largest message) stays in the arena
 * until wire_free(), counted once, as the budget always counted it.  The first chunk holds
 * 6 x len, enough for most Partials (cluster_merge's, 1000 groups of 50 bytes, take 4.5 x),
 * so that a common message takes one malloc() and one free(); the following ones double; an
 * allocation of a quarter of the next chunk or more gets a chunk of its own (the current one
 * goes on serving small ones, so that little is left unused at a chunk's end); no chunk is
 * larger than what is left of the budget.
 *
 * Ownership: the first chunk opens with the struct wire_arena, which holds the envelope
 * wire_decode() returns; wire_free(e) finds the arena from e by container_of.  This does not
 * rely on protobuf-c allocating the envelope first: the envelope it unpacked (wherever it is
 * in the arena) is copied into the arena's own slot, which is safe because a message tree
 * has no pointer back into its root, and the copy left behind is never used again.  So every
 * part of a decoded message lives until wire_free() of its envelope; nobody may free(),
 * realloc() or keep a part of it (the callers only read, or copy what they keep).
 *
 * Alignment: every allocation starts at a multiple of alignof(max_align_t) (16), as
 * malloc()'s do, whatever protobuf-c puts there.  The price is padding, counted in the
 * budget: a group of weft's smallest kind (an 8-byte key slot, one count state: 24 bytes on
 * the wire) takes ~184 bytes here against ~162 by protobuf-c's count, protobuf-c's scratch
 * included; at the worst group counts for the scratch (just past 16 x (2^k - 1)) that is
 * 7.7 x the message, still within 8 x + 1 MiB.  Hand-made groups of 2- or 4-byte keys,
 * which weft's plans never make, could now be refused past ~65,000 groups.  Under
 * AddressSanitizer the unused end of each chunk, the padding after each allocation, the
 * abandoned envelope and the stripped unknown fields are poisoned, so that an overflow or a
 * stale pointer into the arena is still reported.
 */
#if defined(__SANITIZE_ADDRESS__)
#define ARENA_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ARENA_ASAN 1
#endif
#endif
#ifdef ARENA_ASAN
#include <sanitizer/asan_interface.h>
#define arena_poison(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define arena_unpoison(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define arena_poison(p, n) ((void)(p), (void)(n))
#define arena_unpoison(p, n) ((void)(p), (void)(n))
#endif

#define ARENA_ALIGN _Alignof(max_align_t)
/* wraps around for n > SIZE_MAX - 15: arena_alloc() checks */
#define ARENA_ROUND(n) (((n) + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1))
#define ARENA_MAGIC 0x77697265u /* "wire" */
/* the first chunk: what most Partials decode to, with room for small messages */
#define ARENA_FIRST(len) (ARENA_ROUND(sizeof(struct wire_arena)) + (size_t)(len)*6 + 512)

/* Every chunk but the first (which holds the struct wire_arena instead) opens with this. */
struct arena_chunk {
	struct arena_chunk *next;
};
#define ARENA_CHUNK_HDR ARENA_ROUND(sizeof(struct arena_chunk))

struct wire_arena {
	unsigned magic;
	bool exceeded; /* an allocation went over the budget */
	bool nomem; /* malloc() failed */
	struct arena_chunk *chunks; /* the chunks after the first, newest first */
	uint8_t *at, *end; /* the free space of the chunk being bumped */
	size_t left; /* the budget not yet taken by chunks */
	size_t grow; /* the size of the next chunk */
	Weft__Envelope env; /* what wire_decode() returns */
};

static void *arena_chunk_new(struct wire_arena *ar, size_t size)
{
	struct arena_chunk *c;

	if (size > ar->left) {
		ar->exceeded = true;
		return NULL; /* protobuf-c fails the unpack cleanly */
	}
	c = malloc(size);
	if (!c) {
		ar->nomem = true;
		return NULL;
	}
	ar->left -= size;
	c->next = ar->chunks;
	ar->chunks = c;
	return (uint8_t *)c + ARENA_CHUNK_HDR;
}

static void *arena_alloc(void *data, size_t size)
{
	struct wire_arena *ar = data;
	size_t need = ARENA_ROUND(size);
	uint8_t *p;

	if (need < size || need > SIZE_MAX - ARENA_CHUNK_HDR) { /* cannot be in the budget */
		ar->exceeded = true;
		return NULL;
	}
	if (need <= (size_t)(ar->end - ar->at)) {
		p = ar->at;
		ar->at += need;
		arena_unpoison(p, size);
		return p;
	}
	if (need + ARENA_CHUNK_HDR > ar->left) {
		ar->exceeded = true;
		return NULL; /* protobuf-c fails the unpack cleanly */
	}
	if (need >= ar->grow / 4) { /* a chunk of its own: the current one goes on */
		p = arena_chunk_new(ar, ARENA_CHUNK_HDR + need);
	} else {
		/* grow >= 2 x the first chunk, so csz >= need + the header */
		size_t csz = ar->grow < ar->left ? ar->grow : ar->left;

		p = arena_chunk_new(ar, csz);
		if (!p)
			return NULL;
		ar->grow = ar->grow <= SIZE_MAX / 2 ? ar->grow * 2 : SIZE_MAX;
		ar->at = p + need;
		ar->end = (uint8_t *)ar->chunks + csz;
		arena_poison(ar->at, (size_t)(ar->end - ar->at));
	}
	if (p) {
		arena_unpoison(p, size);
		arena_poison(p + size, need - size);
	}
	return p;
}

static void arena_free_one(void *data, void *ptr)
{
	/* everything goes at once, in wire_free() */
	(void)data;
	(void)ptr;
}

/* A new arena of at most budget bytes, in its first chunk; NULL if malloc() fails. */
static struct wire_arena *arena_new(size_t len, size_t budget)
{
	size_t first = ARENA_FIRST(len) < budget ? ARENA_FIRST(len) : budget;
	struct wire_arena *ar = malloc(first);

	if (!ar)
		return NULL;
	memset(ar, 0, sizeof(*ar));
	ar->magic = ARENA_MAGIC;
	ar->left = budget - first;
	ar->grow = 2 * first;
	ar->at = (uint8_t *)ar + ARENA_ROUND(sizeof(*ar));
	ar->end = (uint8_t *)ar + first;
	arena_poison(ar->at, (size_t)(ar->end - ar->at));
	return ar;
}

static void arena_free(struct wire_arena *ar)
{
	struct arena_chunk *c = ar->chunks, *next;

	for (; c; c = next) {
		next = c->next;
		free(c);
	}
	*(volatile unsigned *)&ar->magic = 0; /* a second wire_free() finds no arena */
	free(ar);
}

/*
 * Unknown fields, in every message of the tree: a newer peer's optional additions, which a v1
 * receiver ignores — so they are dropped here, and a re-encoded message holds only what this
 * version understands.  Field number 0 is not protobuf at all (protobuf-c lets a two-byte tag
 * of 0 through); refused.
 */
static bool unknown_strip(ProtobufCMessage *m, unsigned depth, struct why *w)
{
	const ProtobufCMessageDescriptor *d = m->descriptor;

	if (depth > 8)
		return bad(w, "nested too deep");
	for (unsigned i = 0; i < m->n_unknown_fields; i++)
		if (m->unknown_fields[i].tag == 0)
			return bad(w, "not a protobuf message (field 0 in %s)", d->short_name);
	/* in the arena: dropped, not freed (poisoned, for AddressSanitizer) */
	for (unsigned i = 0; i < m->n_unknown_fields; i++)
		arena_poison(m->unknown_fields[i].data, m->unknown_fields[i].len);
	if (m->n_unknown_fields)
		arena_poison(m->unknown_fields, m->n_unknown_fields * sizeof(*m->unknown_fields));
	m->unknown_fields = NULL;
	m->n_unknown_fields = 0;
	for (unsigned f = 0; f < d->n_fields; f++) {
		const ProtobufCFieldDescriptor *fd = &d->fields[f];
		char *member = (char *)m + fd->offset;

		if (fd->type != PROTOBUF_C_TYPE_MESSAGE)
			continue;
		if (fd->label == PROTOBUF_C_LABEL_REPEATED) {
			size_t n = *(size_t *)((char *)m + fd->quantifier_offset);
			ProtobufCMessage **v = *(ProtobufCMessage ***)member;

			for (size_t i = 0; i < n; i++)
				if (v && v[i] && !unknown_strip(v[i], depth + 1, w))
					return false;
			continue;
		}
		/* a oneof's members share their storage: only the one set is a message */
		if ((fd->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) &&
		    *(uint32_t *)((char *)m + fd->quantifier_offset) != fd->id)
			continue;
		if (*(ProtobufCMessage **)member &&
		    !unknown_strip(*(ProtobufCMessage **)member, depth + 1, w))
			return false;
	}
	return true;
}

Weft__Envelope *wire_decode(const void *buf, size_t len, char *why, size_t whysz)
{
	struct why w = { why, whysz };
	ProtobufCAllocator a = { .alloc = arena_alloc, .free = arena_free_one };
	struct wire_arena *ar;
	Weft__Envelope *e;
	unsigned nbodies;

	if (why && whysz)
		why[0] = 0;
	if (!buf && len) {
		bad(&w, "no bytes");
		return NULL;
	}
	if (len > WIRE_MAX_BYTES) {
		bad(&w, "%zu bytes (at most %u)", len, WIRE_MAX_BYTES);
		return NULL;
	}
	if (!scan_envelope(buf, len, &nbodies, &w))
		return NULL;
	if (nbodies != 1) {
		if (nbodies)
			bad(&w, "%u bodies (exactly one allowed)", nbodies);
		else
			bad(&w, "no body (or one this version does not know)");
		return NULL;
	}
	ar = arena_new(len, DECODE_BUDGET(len));
	if (!ar) {
		bad(&w, "out of memory");
		return NULL;
	}
	a.allocator_data = ar;
	e = weft__envelope__unpack(&a, len, buf);
	if (!e) {
		if (ar->nomem)
			bad(&w, "out of memory");
		else
			bad(&w,
			    ar->exceeded ?
				    "too costly to decode (%zu bytes would need more than %zu)" :
				    "not a valid Envelope (malformed, or a required field missing)",
			    len, DECODE_BUDGET(len));
		arena_free(ar);
		return NULL;
	}
	/* into the arena's own slot, where wire_free() will look for it */
	ar->env = *e;
	arena_poison(e, sizeof(*e));
	e = &ar->env;
	if (!unknown_strip(&e->base, 0, &w) || !check_envelope(&w, e)) {
		arena_free(ar);
		return NULL;
	}
	return e;
}

void wire_free(Weft__Envelope *e)
{
	struct wire_arena *ar;

	if (!e)
		return;
	ar = (struct wire_arena *)((char *)e - offsetof(struct wire_arena, env));
	if (ar->magic != ARENA_MAGIC) {
		/* not from wire_decode(), or freed already: leaked rather than corrupt the heap */
		log_err("wire: wire_free() of an envelope wire_decode() did not return");
		return;
	}
	arena_free(ar);
}

int wire_encode(const Weft__Envelope *e, void **buf, size_t *len)
{
	char why[256];
	size_t n;
	void *p;

	if (!e || !buf || !len)
		return -EINVAL;
	*buf = NULL;
	*len = 0;
	if (wire_validate(e, why, sizeof(why))) {
		log_debug("wire: refusing to send an invalid %s: %s", wire_body_name(e->body_case),
			  why);
		return -EINVAL;
	}
	n = weft__envelope__get_packed_size(e);
	if (n > WIRE_MAX_BYTES) {
		log_debug("wire: refusing to send a %s of %zu bytes", wire_body_name(e->body_case),
			  n);
		return -EMSGSIZE;
	}
	p = malloc(n ? n : 1);
	if (!p)
		return -ENOMEM;
	weft__envelope__pack(e, p);
	*buf = p;
	*len = n;
	return 0;
}

static size_t varint_put(uint8_t *p, uint64_t v)
{
	size_t n = 0;

	do {
		p[n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
		v >>= 7;
	} while (v);
	return n;
}

int wire_envelope_wrap(uint64_t seq, Weft__Envelope__BodyCase body, const void *packed, size_t plen,
		       void **buf, size_t *len)
{
	uint8_t head[40];
	size_t h = 0;
	uint8_t *p;

	if (!buf || !len || (plen && !packed) || seq == 0 || body < WEFT__ENVELOPE__BODY_HELLO ||
	    body > WIRE_BODY_LAST)
		return -EINVAL;
	/* fields in number order, as protobuf-c packs them: version, seq, the body */
	head[h++] = (1 << 3) | 0;
	h += varint_put(head + h, WIRE_VERSION);
	head[h++] = (2 << 3) | 0;
	h += varint_put(head + h, seq);
	h += varint_put(head + h, ((uint64_t)body << 3) | 2);
	h += varint_put(head + h, plen);
	if (h + plen > WIRE_MAX_BYTES)
		return -EMSGSIZE;
	p = malloc(h + plen);
	if (!p)
		return -ENOMEM;
	memcpy(p, head, h);
	if (plen)
		memcpy(p + h, packed, plen);
	*buf = p;
	*len = h + plen;
	return 0;
}
