// SPDX-License-Identifier: Apache-2.0
/*
 * Zipkin v2 JSON (a list of spans, as POSTed to /api/v2/spans and served by /api/v2/trace) into
 * the model.  docs/graphs.md, "Zipkin v2", is the user's account; what the code must keep:
 *
 * Zipkin lets the halves of one RPC share a span id (B3's original scheme): the client reports
 * a CLIENT span and the server a SERVER span with the same id and "shared": true.  Reporters
 * also send one span in several pieces.  So spans are first grouped and merged the way Zipkin
 * itself does (zipkin2.internal.Trace.merge): sorted by (trace, id, shared last and clients
 * first, local endpoint), adjacent spans of one id merge when their shared flags agree and
 * their local endpoints do not contradict each other (service, ipv4, ipv6, port: a missing
 * one agrees with anything).  One more rule than Zipkin's: a piece with no timestamp (a late
 * fragment: tags or an end sent alone) merges into a neighbouring piece of its id whose
 * endpoint agrees even across the shared flag, because a task cannot be placed without a time.
 *
 * Each piece left is a task.  The first piece of an id (the client, when there is one) keeps
 * the id; every other piece is the far side of the id (a SERVER or shared span, a CONSUMER, or
 * another reporter's part) and gets a derived id: FNV-1a 64 over the id's 8 bytes (big-endian),
 * the role ("server", "consumer" or "span"), a NUL, the local service, NUL, ipv4, NUL, ipv6,
 * NUL and the port's 2 bytes (big-endian); 1 if that is 0.  The same span always gets the
 * same id, and the original id stays in the attribute "zipkin.id".  The far side's parent is
 * the first piece, with a parent edge, and a message edge when the pair is CLIENT -> SERVER
 * or PRODUCER -> CONSUMER.  A span whose parentId names an id of several pieces hangs off the
 * piece of its own local service (and ipv4 when both have one), else the first server piece,
 * else the first piece: the server's children under the server.  A SERVER span whose parent
 * is a CLIENT span, and a CONSUMER whose parent is a PRODUCER (ids not shared), also get a
 * message edge from the parent.
 *
 * The sort makes grouping and parent lookups O(n log n) with binary searches: no quadratic
 * step, whatever the file holds.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "graph/import_priv.h"

enum zkind { ZK_NONE = 0, ZK_CLIENT, ZK_SERVER, ZK_PRODUCER, ZK_CONSUMER };

static const char *const zkind_attr[] = { "", "client", "server", "producer", "consumer" };

struct zep {
	const char *service, *ipv4, *ipv6; /* NULL if absent */
	json_int_t port; /* 0 if absent */
};

struct zspan {
	struct graph_id128 trace;
	uint64_t id, parent;
	const json_t *tags, *ann, *remote;
	const char *name;
	bool has_local;
	struct zep local;
	int64_t ts, dur; /* ns; 0: absent, as in Zipkin */
	enum zkind kind;
	bool shared, debug;
	size_t pos; /* index in the file */
};

struct zpiece {
	size_t a, b; /* members: sorted[a, b) */
	size_t group; /* index into the groups array */
	bool dead; /* merged into a neighbour */
	/* merged from the members, in sorted order: the first value present wins */
	const char *name;
	struct zep ep;
	uint64_t parent;
	int64_t ts, dur;
	enum zkind kind;
	bool shared, debug;
	const json_t *remote;
	uint64_t task; /* the task id given */
	int role; /* 0 first piece of its id, 1 server, 2 consumer, 3 other */
};

struct zgroup {
	struct graph_id128 trace;
	uint64_t id;
	size_t p0, p1; /* pieces[p0, p1) */
};

struct zctx {
	struct imp *im;
	struct zspan *s; /* in file order */
	size_t *sorted; /* indices into s */
	size_t n;
	struct zpiece *p;
	size_t np;
	struct zgroup *gr;
	size_t ngr;
};

static const json_t *get(const json_t *o, const char *k)
{
	const json_t *v = json_object_get(o, k);

	return json_is_null(v) ? NULL : v;
}

static int parse_endpoint(struct imp *im, size_t i, const char *what, const json_t *o,
			  struct zep *ep)
{
	static const char *const keys[] = { "serviceName", "ipv4", "ipv6" };
	const char **dst[] = { &ep->service, &ep->ipv4, &ep->ipv6 };
	const json_t *v;
	size_t k;

	memset(ep, 0, sizeof(*ep));
	if (!json_is_object(o))
		return imp_fail(im, "[%zu].%s: not an object", i, what);
	for (k = 0; k < 3; k++) {
		v = get(o, keys[k]);
		if (v && !json_is_string(v))
			return imp_fail(im, "[%zu].%s.%s: not a string", i, what, keys[k]);
		*dst[k] = v && json_string_length(v) > 0 ? json_string_value(v) : NULL;
	}
	v = get(o, "port");
	if (v &&
	    (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 65535))
		return imp_fail(im, "[%zu].%s.port: not a port number (0 to 65535)", i, what);
	ep->port = v ? json_integer_value(v) : 0;
	return 0;
}

static int parse_time(struct imp *im, size_t i, const char *what, const json_t *v, int64_t *ns)
{
	*ns = 0;
	if (!v)
		return 0;
	if (!json_is_integer(v))
		return imp_fail(im, "[%zu].%s: not an integer (microseconds)", i, what);
	if (!imp_us_to_ns(json_integer_value(v), ns))
		return imp_fail(im, "[%zu].%s: %lld is out of range (0 to year 2200, microseconds)",
				i, what, (long long)json_integer_value(v));
	return 0;
}

static int parse_span(struct imp *im, size_t i, const json_t *o, struct zspan *z)
{
	const json_t *v;
	int ret;

	memset(z, 0, sizeof(*z));
	z->pos = i;
	if (!json_is_object(o))
		return imp_fail(im, "[%zu]: not an object (a Zipkin v2 span)", i);
	if (imp_id128(get(o, "traceId"), false, &z->trace))
		return imp_fail(im, "[%zu].traceId: not a trace id (16 or 32 hex digits, not 0)",
				i);
	if (imp_id64(get(o, "id"), false, false, &z->id))
		return imp_fail(im, "[%zu].id: not a span id (16 hex digits, not 0)", i);
	v = get(o, "parentId");
	if (v && imp_id64(v, false, true, &z->parent))
		return imp_fail(im, "[%zu].parentId: not a span id (16 hex digits)", i);
	if (z->parent == z->id)
		return imp_fail(im, "[%zu].parentId: the span's own id", i);
	v = get(o, "name");
	if (v && !json_is_string(v))
		return imp_fail(im, "[%zu].name: not a string", i);
	z->name = v && json_string_length(v) > 0 ? json_string_value(v) : NULL;
	v = get(o, "kind");
	if (v) {
		const char *k = json_is_string(v) ? json_string_value(v) : "";

		if (!strcmp(k, "CLIENT"))
			z->kind = ZK_CLIENT;
		else if (!strcmp(k, "SERVER"))
			z->kind = ZK_SERVER;
		else if (!strcmp(k, "PRODUCER"))
			z->kind = ZK_PRODUCER;
		else if (!strcmp(k, "CONSUMER"))
			z->kind = ZK_CONSUMER;
		else
			return imp_fail(im, "[%zu].kind: not CLIENT, SERVER, PRODUCER or CONSUMER",
					i);
	}
	if ((ret = parse_time(im, i, "timestamp", get(o, "timestamp"), &z->ts)) ||
	    (ret = parse_time(im, i, "duration", get(o, "duration"), &z->dur)))
		return ret;
	if (z->dur > IMP_TIME_MAX - z->ts)
		return imp_fail(im, "[%zu].duration: ends after year 2200", i);
	v = get(o, "localEndpoint");
	if (v) {
		if ((ret = parse_endpoint(im, i, "localEndpoint", v, &z->local)))
			return ret;
		z->has_local = true;
	}
	v = get(o, "remoteEndpoint");
	if (v) {
		struct zep ep;

		if ((ret = parse_endpoint(im, i, "remoteEndpoint", v, &ep)))
			return ret;
		z->remote = v;
	}
	v = get(o, "annotations");
	if (v) {
		size_t k;
		const json_t *a;

		if (!json_is_array(v))
			return imp_fail(im, "[%zu].annotations: not a list", i);
		json_array_foreach(v, k, a)
		{
			int64_t t;

			if (!json_is_object(a))
				return imp_fail(im, "[%zu].annotations[%zu]: not an object", i, k);
			if (!get(a, "timestamp"))
				return imp_fail(im, "[%zu].annotations[%zu].timestamp: missing", i,
						k);
			if (!json_is_string(get(a, "value")))
				return imp_fail(im, "[%zu].annotations[%zu].value: not a string", i,
						k);
			char what[48];

			snprintf(what, sizeof(what), "annotations[%zu].timestamp", k);
			if ((ret = parse_time(im, i, what, get(a, "timestamp"), &t)))
				return ret;
		}
		z->ann = v;
	}
	v = get(o, "tags");
	if (v) {
		const char *key;
		const json_t *t;

		if (!json_is_object(v))
			return imp_fail(im, "[%zu].tags: not an object", i);
		json_object_foreach((json_t *)v, key, t)
		{
			if (!json_is_string(t))
				return imp_fail(im, "[%zu].tags.%s: not a string", i, key);
		}
		z->tags = v;
	}
	v = get(o, "shared");
	if (v && !json_is_boolean(v))
		return imp_fail(im, "[%zu].shared: not true or false", i);
	z->shared = json_is_true(v);
	v = get(o, "debug");
	if (v && !json_is_boolean(v))
		return imp_fail(im, "[%zu].debug: not true or false", i);
	z->debug = json_is_true(v);
	return 0;
}

/* NULL sorts last, as in Zipkin's nullSafeCompareTo */
static int cmp_str(const char *a, const char *b)
{
	if (!a)
		return b ? 1 : 0;
	if (!b)
		return -1;
	return strcmp(a, b);
}

static int cmp_sorted(const void *x, const void *y, void *arg)
{
	const struct zspan *s = arg;
	const struct zspan *a = &s[*(const size_t *)x], *b = &s[*(const size_t *)y];
	int c = graph_id128_cmp(a->trace, b->trace);

	if (c)
		return c;
	if (a->id != b->id)
		return a->id < b->id ? -1 : 1;
	if (a->shared != b->shared) /* shared last */
		return a->shared ? 1 : -1;
	if (!a->shared && (a->kind == ZK_CLIENT) != (b->kind == ZK_CLIENT))
		return a->kind == ZK_CLIENT ? -1 : 1; /* clients first */
	if (a->has_local != b->has_local) /* no endpoint first */
		return a->has_local ? 1 : -1;
	if ((c = cmp_str(a->local.service, b->local.service)) ||
	    (c = cmp_str(a->local.ipv4, b->local.ipv4)) ||
	    (c = cmp_str(a->local.ipv6, b->local.ipv6)))
		return c;
	return a->pos < b->pos ? -1 : a->pos > b->pos;
}

static bool str_agree(const char *a, const char *b)
{
	return !a || !b || !strcmp(a, b);
}

/* Zipkin's EndpointTracker.tryMerge: do the endpoints not contradict each other? */
static bool ep_agree(const struct zep *a, const struct zep *b)
{
	return str_agree(a->service, b->service) && str_agree(a->ipv4, b->ipv4) &&
	       str_agree(a->ipv6, b->ipv6) && (!a->port || !b->port || a->port == b->port);
}

static void ep_merge(struct zep *into, const struct zep *e)
{
	if (!into->service)
		into->service = e->service;
	if (!into->ipv4)
		into->ipv4 = e->ipv4;
	if (!into->ipv6)
		into->ipv6 = e->ipv6;
	if (!into->port)
		into->port = e->port;
}

/* Recomputes a piece's merged fields from its members. */
static void piece_fold(struct zctx *c, struct zpiece *p)
{
	size_t k;

	p->name = NULL;
	memset(&p->ep, 0, sizeof(p->ep));
	p->parent = 0;
	p->ts = p->dur = 0;
	p->kind = ZK_NONE;
	p->shared = p->debug = false;
	p->remote = NULL;
	for (k = p->a; k < p->b; k++) {
		const struct zspan *z = &c->s[c->sorted[k]];

		if (!p->name)
			p->name = z->name;
		if (z->has_local)
			ep_merge(&p->ep, &z->local);
		if (!p->parent)
			p->parent = z->parent;
		if (!p->ts)
			p->ts = z->ts;
		if (!p->dur)
			p->dur = z->dur;
		if (p->kind == ZK_NONE)
			p->kind = z->kind;
		p->shared |= z->shared;
		p->debug |= z->debug;
		if (!p->remote)
			p->remote = z->remote;
	}
}

static int build_pieces(struct zctx *c)
{
	struct zep track;
	size_t k, g, q;

	c->p = calloc(c->n ? c->n : 1, sizeof(*c->p));
	c->gr = calloc(c->n ? c->n : 1, sizeof(*c->gr));
	if (!c->p || !c->gr)
		return imp_nomem(c->im);
	for (k = 0; k < c->n; k++) {
		const struct zspan *z = &c->s[c->sorted[k]];
		struct zpiece *cur = c->np ? &c->p[c->np - 1] : NULL;
		struct zgroup *gr = c->ngr ? &c->gr[c->ngr - 1] : NULL;

		if (!gr || gr->id != z->id || !graph_id128_eq(gr->trace, z->trace)) {
			gr = &c->gr[c->ngr++];
			gr->trace = z->trace;
			gr->id = z->id;
			gr->p0 = gr->p1 = c->np;
			cur = NULL;
		}
		if (cur && c->s[c->sorted[cur->a]].shared == z->shared &&
		    (!z->has_local || ep_agree(&track, &z->local))) {
			cur->b = k + 1;
			if (z->has_local)
				ep_merge(&track, &z->local);
			continue;
		}
		cur = &c->p[c->np++];
		cur->a = k;
		cur->b = k + 1;
		cur->group = c->ngr - 1;
		gr->p1 = c->np;
		memset(&track, 0, sizeof(track));
		if (z->has_local)
			track = z->local;
	}
	for (k = 0; k < c->np; k++)
		piece_fold(c, &c->p[k]);
	/* an untimed piece joins an agreeing neighbour of its id: the next one, else the last */
	for (g = 0; g < c->ngr; g++) {
		struct zgroup *gr = &c->gr[g];

		for (q = gr->p0; q < gr->p1; q++) {
			struct zpiece *p = &c->p[q], *o = NULL;
			size_t r;

			if (p->ts)
				continue;
			if (q + 1 < gr->p1 && ep_agree(&p->ep, &c->p[q + 1].ep))
				o = &c->p[q + 1];
			for (r = q; !o && r > gr->p0; r--) {
				if (!c->p[r - 1].dead) {
					if (ep_agree(&p->ep, &c->p[r - 1].ep))
						o = &c->p[r - 1];
					break;
				}
			}
			if (!o)
				continue;
			if (o->a > p->a)
				o->a = p->a;
			if (o->b < p->b)
				o->b = p->b;
			p->dead = true;
			piece_fold(c, o);
		}
	}
	return 0;
}

static long find_group(const struct zctx *c, struct graph_id128 trace, uint64_t id)
{
	size_t lo = 0, hi = c->ngr;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int d = graph_id128_cmp(c->gr[mid].trace, trace);

		if (d == 0)
			d = c->gr[mid].id < id ? -1 : c->gr[mid].id > id;
		if (d == 0)
			return (long)mid;
		if (d < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -1;
}

static size_t first_live(const struct zctx *c, const struct zgroup *gr)
{
	size_t q;

	for (q = gr->p0; q < gr->p1; q++)
		if (!c->p[q].dead)
			return q;
	return gr->p0; /* not reached: the last piece of a group is never merged away */
}

/* The piece of group gr a child with local endpoint ep hangs off. */
static const struct zpiece *parent_piece(const struct zctx *c, const struct zgroup *gr,
					 const struct zep *ep)
{
	const struct zpiece *server = NULL;
	size_t q;

	for (q = gr->p0; q < gr->p1; q++) {
		const struct zpiece *p = &c->p[q];

		if (p->dead)
			continue;
		if (ep->service && p->ep.service && !strcmp(ep->service, p->ep.service) &&
		    (!ep->ipv4 || !p->ep.ipv4 || !strcmp(ep->ipv4, p->ep.ipv4)))
			return p;
		if (!server && p->role == 1)
			server = p;
	}
	return server ? server : &c->p[first_live(c, gr)];
}

static uint64_t derived_id(uint64_t id, int role, const struct zep *ep)
{
	static const char *const roles[] = { "", "server", "consumer", "span" };
	uint8_t b[8], port[2] = { (uint8_t)(ep->port >> 8), (uint8_t)ep->port };
	uint64_t h = IMP_FNV_INIT;
	int i;

	for (i = 0; i < 8; i++)
		b[i] = (uint8_t)(id >> (56 - 8 * i));
	h = imp_fnv1a(h, b, 8);
	h = imp_fnv1a(h, roles[role], strlen(roles[role]) + 1);
	h = imp_fnv1a(h, ep->service ? ep->service : "", ep->service ? strlen(ep->service) + 1 : 1);
	h = imp_fnv1a(h, ep->ipv4 ? ep->ipv4 : "", ep->ipv4 ? strlen(ep->ipv4) + 1 : 1);
	h = imp_fnv1a(h, ep->ipv6 ? ep->ipv6 : "", ep->ipv6 ? strlen(ep->ipv6) + 1 : 1);
	h = imp_fnv1a(h, port, 2);
	return h ? h : 1;
}

struct zann {
	int64_t t;
	const char *v;
	size_t len;
};

static int cmp_ann(const void *x, const void *y)
{
	const struct zann *a = x, *b = y;
	int c;

	if (a->t != b->t)
		return a->t < b->t ? -1 : 1;
	c = memcmp(a->v, b->v, a->len < b->len ? a->len : b->len);
	if (c)
		return c;
	return a->len < b->len ? -1 : a->len > b->len;
}

static int set_str(json_t *o, const char *k, const char *v)
{
	return v ? json_object_set_new(o, k, json_string(v)) : 0;
}

static const char *piece_attrs(struct zctx *c, const struct zpiece *p)
{
	json_t *o = json_object();
	const char *s = NULL;
	size_t k;

	if (!o)
		return NULL;
	for (k = p->a; k < p->b; k++) {
		const struct zspan *z = &c->s[c->sorted[k]];

		if (z->tags && json_object_update(o, (json_t *)z->tags))
			goto out;
	}
	if (p->kind != ZK_NONE &&
	    json_object_set_new(o, "span.kind", json_string(zkind_attr[p->kind])))
		goto out;
	if (p->shared && json_object_set_new(o, "zipkin.shared", json_true()))
		goto out;
	if (p->debug && json_object_set_new(o, "zipkin.debug", json_true()))
		goto out;
	if (p->role) {
		char hex[17];

		graph_id64_hex(c->gr[p->group].id, hex);
		if (json_object_set_new(o, "zipkin.id", json_string(hex)))
			goto out;
	}
	if (p->ep.port &&
	    json_object_set_new(o, "zipkin.localEndpoint.port", json_integer(p->ep.port)))
		goto out;
	if (p->ep.ipv4 && p->ep.ipv6 && set_str(o, "zipkin.localEndpoint.ipv6", p->ep.ipv6))
		goto out;
	if (p->remote) {
		struct zep r;
		struct imp *im = c->im;

		/* checked in parse_span: cannot fail */
		if (parse_endpoint(im, 0, "remoteEndpoint", p->remote, &r))
			goto out;
		if (set_str(o, "zipkin.remoteEndpoint.serviceName", r.service) ||
		    set_str(o, "zipkin.remoteEndpoint.ipv4", r.ipv4) ||
		    set_str(o, "zipkin.remoteEndpoint.ipv6", r.ipv6))
			goto out;
		if (r.port &&
		    json_object_set_new(o, "zipkin.remoteEndpoint.port", json_integer(r.port)))
			goto out;
	}
	s = imp_attrs(c->im, o);
out:
	json_decref(o);
	return s;
}

/* The piece's task and its annotations as events. */
static int emit_piece(struct zctx *c, struct zpiece *p, struct zann **ann, size_t *annsz)
{
	struct imp *im = c->im;
	const struct zgroup *gr = &c->gr[p->group];
	struct graph_task t = { .trace = gr->trace, .id = p->task, .pid = -1, .tid = -1 };
	size_t k, na = 0, q;
	int64_t last = 0;

	for (k = p->a; k < p->b; k++) {
		const struct zspan *z = &c->s[c->sorted[k]];
		size_t i;
		const json_t *a;

		if (!z->ann)
			continue;
		json_array_foreach(z->ann, i, a)
		{
			const json_t *v = json_object_get(a, "value");

			if (na == *annsz) {
				size_t nsz = *annsz ? *annsz * 2 : 16;
				struct zann *nn = realloc(*ann, nsz * sizeof(*nn));

				if (!nn)
					return imp_nomem(im);
				*ann = nn;
				*annsz = nsz;
			}
			imp_us_to_ns(json_integer_value(json_object_get(a, "timestamp")),
				     &(*ann)[na].t);
			(*ann)[na].v = json_string_value(v);
			(*ann)[na].len = json_string_length(v);
			na++;
		}
	}
	if (na > 1)
		qsort(*ann, na, sizeof(**ann), cmp_ann);
	t.start = p->ts;
	if (!t.start) {
		if (na == 0)
			return imp_fail(
				im,
				"[%zu]: span %016llx has no timestamp and no annotations, and "
				"no other part of it to take them from",
				c->s[c->sorted[p->a]].pos, (unsigned long long)gr->id);
		t.start = (*ann)[0].t;
	}
	if (na)
		last = (*ann)[na - 1].t;
	if (p->dur > IMP_TIME_MAX - t.start) /* timestamp and duration from different pieces */
		return imp_fail(im, "[%zu]: span %016llx ends after year 2200",
				c->s[c->sorted[p->a]].pos, (unsigned long long)gr->id);
	t.end = p->dur ? t.start + p->dur : last > t.start ? last : t.start;
	t.service = graph_strdup(im->g, p->ep.service ? p->ep.service : "");
	t.name = graph_strdup(im->g, p->name ? p->name : "");
	t.host = graph_strdup(im->g, p->ep.ipv4 ? p->ep.ipv4 : p->ep.ipv6 ? p->ep.ipv6 : "");
	t.attrs = piece_attrs(c, p);
	t.source = GRAPH_SRC_ZIPKIN;
	t.status = GRAPH_STATUS_UNSET;
	for (k = p->a; k < p->b; k++) {
		const struct zspan *z = &c->s[c->sorted[k]];

		if (z->tags && json_object_get(z->tags, "error"))
			t.status = GRAPH_STATUS_ERROR;
	}
	/* the parent, resolved by the caller into p->parent as a task id */
	t.parent = p->parent;
	if (!t.service || !t.name || !t.host || !t.attrs || !graph_add_task(im->g, &t))
		return imp_nomem(im);
	for (q = 0; q < na; q++) {
		struct graph_event e = { .trace = gr->trace,
					 .task = p->task,
					 .time = (*ann)[q].t,
					 .source = GRAPH_SRC_ZIPKIN };

		if (q > 0 && !cmp_ann(&(*ann)[q - 1], &(*ann)[q]))
			continue; /* Zipkin drops duplicate annotations of a span */
		e.name = graph_strndup(im->g, (*ann)[q].v, (*ann)[q].len);
		e.attrs = graph_strndup(im->g, "{}", 2);
		if (!e.name || !e.attrs || !graph_add_event(im->g, &e))
			return imp_nomem(im);
	}
	return 0;
}

static int add_edge(struct imp *im, struct graph_id128 trace, enum graph_edge_kind kind,
		    uint64_t from, uint64_t to)
{
	struct graph_edge e = { .trace = trace,
				.kind = kind,
				.from_task = from,
				.to_task = to,
				.source = GRAPH_SRC_ZIPKIN };

	return graph_add_edge(im->g, &e) ? 0 : imp_nomem(im);
}

static bool is_message(enum zkind from, enum zkind to)
{
	return (from == ZK_CLIENT && to == ZK_SERVER) || (from == ZK_PRODUCER && to == ZK_CONSUMER);
}

static int link_and_emit(struct zctx *c)
{
	struct zann *ann = NULL;
	size_t annsz = 0, g, q;
	int ret = 0;

	/* ids first: children look up their parent's piece, which must have its id */
	for (g = 0; g < c->ngr; g++) {
		struct zgroup *gr = &c->gr[g];
		size_t p0 = first_live(c, gr);

		for (q = gr->p0; q < gr->p1; q++) {
			struct zpiece *p = &c->p[q];

			if (p->dead)
				continue;
			if (q == p0) {
				p->role = 0;
				p->task = gr->id;
				continue;
			}
			p->role = p->shared || p->kind == ZK_SERVER ? 1 :
				  p->kind == ZK_CONSUMER	    ? 2 :
								      3;
			p->task = derived_id(gr->id, p->role, &p->ep);
		}
	}
	for (g = 0; g < c->ngr && !ret; g++) {
		struct zgroup *gr = &c->gr[g];
		size_t p0 = first_live(c, gr);

		for (q = gr->p0; q < gr->p1 && !ret; q++) {
			struct zpiece *p = &c->p[q];
			const struct zpiece *from = NULL;
			long h;

			if (p->dead)
				continue;
			if (q != p0) {
				from = &c->p[p0];
			} else if (p->parent) {
				h = find_group(c, gr->trace, p->parent);
				if (h >= 0)
					from = parent_piece(c, &c->gr[h], &p->ep);
			}
			if (from)
				p->parent = from->task;
			ret = emit_piece(c, p, &ann, &annsz);
			if (!ret && p->parent)
				ret = add_edge(c->im, gr->trace, GRAPH_EDGE_PARENT, p->parent,
					       p->task);
			if (!ret && from && is_message(from->kind, p->kind))
				ret = add_edge(c->im, gr->trace, GRAPH_EDGE_MESSAGE, from->task,
					       p->task);
		}
	}
	free(ann);
	return ret;
}

int imp_zipkin(struct imp *im, json_t *root)
{
	struct zctx c = { .im = im };
	size_t i;
	int ret;

	if (!json_is_array(root))
		return imp_fail(im, "not a Zipkin v2 list of spans");
	c.n = json_array_size(root);
	if (c.n > GRAPH_MAX_ELEMS)
		return imp_fail(im, "more than %u spans", GRAPH_MAX_ELEMS);
	c.s = malloc((c.n ? c.n : 1) * sizeof(*c.s));
	c.sorted = malloc((c.n ? c.n : 1) * sizeof(*c.sorted));
	if (!c.s || !c.sorted) {
		ret = imp_nomem(im);
		goto out;
	}
	for (i = 0; i < c.n; i++) {
		ret = parse_span(im, i, json_array_get(root, i), &c.s[i]);
		if (ret)
			goto out;
		c.sorted[i] = i;
	}
	qsort_r(c.sorted, c.n, sizeof(*c.sorted), cmp_sorted, c.s);
	ret = build_pieces(&c);
	if (!ret)
		ret = link_and_emit(&c);
	if (!ret) { /* a derived id may, however unlikely, be another span's */
		struct imp_index ix;
		struct graph_id128 tr;
		uint64_t id;

		if (imp_index_build(&ix, im->g, im->nt)) {
			ret = imp_nomem(im);
			goto out;
		}
		if (imp_index_dup(&ix, &tr, &id))
			ret = imp_fail(im,
				       "span %016llx: its derived id is another span's id in "
				       "its trace",
				       (unsigned long long)id);
		imp_index_free(&ix);
	}
out:
	free(c.s);
	free(c.sorted);
	free(c.p);
	free(c.gr);
	return ret;
}
