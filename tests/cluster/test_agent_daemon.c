// SPDX-License-Identifier: Apache-2.0
/*
 * The agent daemon end to end: a real `weft agent` process, the real kernel, and this test
 * playing the aggregator on a CURVE ROUTER socket (wire_server_socket + ZAP), so that every
 * step of the agent's side of the protocol is checked on its own, message by message:
 *
 *   join      Hello (role, host, instance, kernel, features) -> Welcome
 *   run       QueryStart with a compiled object: the agent attaches and ships one Partial per
 *             window; merged, the counts equal the workload's known number of calls exactly
 *   cut       the aggregator's socket closes (Acks lost, partials in flight lost), the agent
 *             spools; a new socket on the same port: the agent says Hello again (same
 *             instance), Welcome.last_seq says what was merged, the agent resends the rest:
 *             no window is lost and none is merged twice
 *   refuse    garbage bytes and a body an aggregator never sends are counted, not obeyed; a
 *             query compiled for one process (-p) and a bad manifest get a QueryError
 *   stop      QueryStop: the last partial says last=true; SIGTERM: the agent exits 0
 *
 * Needs root and the kernel (it loads BPF); skipped otherwise.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/prctl.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include <cmocka.h>

#include "agent/result.h"
#include "kernel/aggstate.h"
#include "agent/wire.h"
#include "aggregator/zap.h"
#include "compiler/compiler.h"
#include "compiler/plan.h"
#include "tests/skip.h"

#define CALLS 40000
#define HOST "test-host"

struct fake {
	void *zctx;
	struct wire_zap *zap;
	void *sock;
	char endpoint[128];
	char srv_pub[WIRE_KEY_LEN + 1], srv_sec[WIRE_KEY_LEN + 1];
	char dir[64];
	pid_t agent;
	uint8_t id[256]; /* the agent's routing id on the current connection */
	size_t idlen;
	uint64_t seq; /* ours */
	uint64_t instance; /* the agent's */
	struct wire_seq rx;
};

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static uint64_t realtime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static const char *env_or(const char *name, const char *fallback)
{
	const char *v = getenv(name);

	return v && *v ? v : fallback;
}

static void server_open(struct fake *f)
{
	int zero = 0;

	f->sock = wire_server_socket(f->zctx, f->endpoint, f->srv_pub, f->srv_sec);
	assert_non_null(f->sock);
	zmq_setsockopt(f->sock, ZMQ_LINGER, &zero, sizeof(zero));
}

static void server_close(struct fake *f)
{
	zmq_close(f->sock);
	f->sock = NULL;
}

/* The next envelope from the agent within ms, or NULL.  Every one must decode, come from
 * the allow-listed agent, carry a body an agent may send, and a seq above all before. */
static Weft__Envelope *recv_env(struct fake *f, int ms)
{
	zmq_pollitem_t it = { .socket = f->sock, .events = ZMQ_POLLIN };
	zmq_msg_t id, body;
	Weft__Envelope *e;
	char why[256];
	int more;
	size_t sz = sizeof(more);

	if (zmq_poll(&it, 1, ms) <= 0)
		return NULL;
	zmq_msg_init(&id);
	zmq_msg_init(&body);
	assert_true(zmq_msg_recv(&id, f->sock, 0) >= 0);
	assert_true(zmq_msg_recv(&body, f->sock, 0) >= 0);
	zmq_getsockopt(f->sock, ZMQ_RCVMORE, &more, &sz);
	assert_int_equal(more, 0);
	assert_string_equal(zmq_msg_gets(&body, "User-Id"), "agent:test-agent");
	e = wire_decode(zmq_msg_data(&body), zmq_msg_size(&body), why, sizeof(why));
	if (!e)
		fail_msg("the agent sent something invalid: %s", why);
	assert_true(wire_body_allowed(WIRE_ROLE_AGENT, e->body_case));
	if (e->body_case == WEFT__ENVELOPE__BODY_HELLO) {
		f->instance = e->hello->instance;
		memcpy(f->id, zmq_msg_data(&id), zmq_msg_size(&id));
		f->idlen = zmq_msg_size(&id);
	}
	if (!wire_seq_accept(&f->rx, f->instance, e->seq))
		fail_msg("seq %llu after %llu", (unsigned long long)e->seq,
			 (unsigned long long)f->rx.last);
	zmq_msg_close(&id);
	zmq_msg_close(&body);
	return e;
}

/* The next envelope of one kind (others are handed to keep, if not NULL, or freed). */
static Weft__Envelope *recv_kind(struct fake *f, Weft__Envelope__BodyCase kind, int ms)
{
	uint64_t until = now_ms() + (uint64_t)ms;

	while (now_ms() < until) {
		Weft__Envelope *e = recv_env(f, (int)(until - now_ms()) + 1);

		if (!e)
			return NULL;
		if (e->body_case == kind)
			return e;
		if (e->body_case == WEFT__ENVELOPE__BODY_PARTIAL)
			fail_msg("an unexpected partial (window %llu)",
				 (unsigned long long)e->partial->window);
		wire_free(e);
	}
	return NULL;
}

static void send_env(struct fake *f, Weft__Envelope__BodyCase kind, void *body)
{
	Weft__Envelope e = WEFT__ENVELOPE__INIT;

	e.version = WIRE_VERSION;
	e.seq = ++f->seq;
	e.body_case = kind;
	e.hello = body; /* the union's members are all pointers */
	assert_int_equal(wire_send(f->sock, f->id, f->idlen, &e, false), 0);
}

static void send_welcome(struct fake *f, uint64_t last_seq)
{
	Weft__Welcome w = WEFT__WELCOME__INIT;

	w.aggregator = "fake";
	w.instance = 4242;
	w.heartbeat_ms = 200;
	w.has_last_seq = true;
	w.last_seq = last_seq;
	send_env(f, WEFT__ENVELOPE__BODY_WELCOME, &w);
}

static void send_ack(struct fake *f, uint64_t upto)
{
	Weft__Ack a = WEFT__ACK__INIT;

	a.upto = upto;
	send_env(f, WEFT__ENVELOPE__BODY_ACK, &a);
}

/* epoch_ns 0: now; end_ns 0: none */
static void send_start_until(struct fake *f, uint64_t id, const char *q, const void *manifest,
			     size_t mlen, const void *obj, size_t olen, uint64_t epoch_ns,
			     uint64_t end_ns)
{
	Weft__QueryStart s = WEFT__QUERY_START__INIT;

	s.query_id = id;
	s.query = (char *)q;
	s.manifest.data = (uint8_t *)manifest;
	s.manifest.len = mlen;
	s.object.data = (uint8_t *)obj;
	s.object.len = olen;
	s.epoch_realtime_ns = epoch_ns ? epoch_ns : realtime_ns();
	s.has_end_realtime_ns = end_ns != 0;
	s.end_realtime_ns = end_ns;
	send_env(f, WEFT__ENVELOPE__BODY_QUERY_START, &s);
}

static void send_start(struct fake *f, uint64_t id, const char *q, const void *manifest,
		       size_t mlen, const void *obj, size_t olen)
{
	send_start_until(f, id, q, manifest, mlen, obj, olen, 0, 0);
}

struct compiled {
	struct compile_result res;
	struct diag_list dl;
	char *manifest;
	size_t mlen;
};

static void compile_pid(struct compiled *c, const char *q, pid_t pid)
{
	struct compile_opts o = { .sz = sizeof(o), .pid = pid };
	FILE *m;

	memset(c, 0, sizeof(*c));
	diag_list_init(&c->dl, q, "query");
	if (compiler_run(q, &o, PASS_CLANG, &c->dl, &c->res)) {
		diag_print(&c->dl, stderr, false);
		fail_msg("cannot compile %s", q);
	}
	m = open_memstream(&c->manifest, &c->mlen);
	assert_int_equal(manifest_write(c->res.plan, m), 0);
	fclose(m);
}

static void compile(struct compiled *c, const char *q)
{
	compile_pid(c, q, 0);
}

static void compiled_free(struct compiled *c)
{
	compile_result_free(&c->res);
	diag_list_free(&c->dl);
	free(c->manifest);
}

/* The count in a table of `select count()` (one group). */
static int64_t table_count(const struct agent_table *t, const struct plan *p)
{
	struct agg_spec s = { .kind = AGG_COUNT };
	struct agg_result r;
	Weft__Group **g;
	size_t n;
	uint64_t st[4];
	int64_t v;

	assert_int_equal(p->aggs[0].spec.kind, AGG_COUNT);
	assert_int_equal(agent_table_to_groups(t, &g, &n), 0);
	if (n == 0) {
		agent_groups_free(g, n);
		return 0;
	}
	assert_int_equal(n, 1);
	assert_true(agg_state_size(&s) <= sizeof(st));
	assert_int_equal(agg_state_decode(&s, st, g[0]->states[0].data, g[0]->states[0].len), 0);
	assert_int_equal(agg_state_final(&s, st, &r), 0);
	v = r.ival;
	agg_result_release(&r);
	agent_groups_free(g, n);
	return v;
}

static pid_t spawn_agent(struct fake *f)
{
	char srv[128], key[128], log[128];
	const char *bin = env_or("WEFT_BIN", "weft");
	pid_t pid;

	snprintf(srv, sizeof(srv), "%s/aggregator.pub", f->dir);
	snprintf(key, sizeof(key), "%s/agent.key", f->dir);
	snprintf(log, sizeof(log), "%s/agent.log", f->dir);
	pid = fork();
	if (pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);

		/* a failed assertion ends the test without its clean-up: the agent must not
		 * outlive it (it would hold ctest's output pipe open) */
		prctl(PR_SET_PDEATHSIG, SIGKILL);

		if (fd >= 0)
			dup2(fd, 2);
		execl(bin, bin, "agent", "--connect", f->endpoint, "--server-key", srv, "--key",
		      key, "--host", HOST, "--cpu-budget", "0", "-v", (char *)NULL);
		_exit(127);
	}
	return pid;
}

/* The workload, paused: its pid, and the fd whose byte releases it. */
static pid_t spawn_workload(int *go)
{
	char path[512], n[32];
	int in[2], out[2];
	pid_t pid;
	FILE *fo;
	int wpid = 0;

	snprintf(path, sizeof(path), "%s/tests/workloads/wl_syscalls",
		 env_or("WEFT_BINARY_DIR", "."));
	snprintf(n, sizeof(n), "%d", CALLS);
	assert_int_equal(pipe(in), 0);
	assert_int_equal(pipe(out), 0);
	pid = fork();
	if (pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		close(in[1]);
		close(out[0]);
		execl(path, path, n, "2", "wait", (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	fo = fdopen(out[0], "r");
	assert_int_equal(fscanf(fo, "%d", &wpid), 1);
	fclose(fo);
	assert_int_equal(wpid, pid);
	*go = in[1];
	return pid;
}

struct merged {
	struct agent_table *total;
	bool seen[64]; /* windows merged */
	uint64_t last_seq; /* highest partial seq merged */
	int partials;
	bool got_last;
};

/* Merge one partial as an aggregator would: every window once. */
static void merge(struct merged *m, const Weft__Envelope *e, const struct plan *p)
{
	const Weft__Partial *pm = e->partial;

	assert_int_equal(pm->query_id, 1);
	assert_string_equal(pm->host, HOST);
	assert_true(pm->window < 64);
	if (m->seen[pm->window])
		fail_msg("window %llu merged twice", (unsigned long long)pm->window);
	m->seen[pm->window] = true;
	assert_int_equal(pm->n_drops, 9);
	for (size_t i = 0; i < pm->n_drops; i++)
		assert_int_equal(pm->drops[i], 0);
	assert_int_equal(agent_table_add_groups(m->total, pm->groups, pm->n_groups), 0);
	m->last_seq = e->seq;
	m->partials++;
	if (pm->has_last && pm->last)
		m->got_last = true;
	(void)p;
}

/* recv_kind() while query 1 runs: its partials, one a window, may come meanwhile (how many
 * windows an answer takes depends on the machine); each is merged and acked. */
static Weft__Envelope *recv_kind_running(struct fake *f, Weft__Envelope__BodyCase kind, int ms,
					 struct merged *m, const struct plan *p)
{
	uint64_t until = now_ms() + (uint64_t)ms;

	while (now_ms() < until) {
		Weft__Envelope *e = recv_env(f, (int)(until - now_ms()) + 1);

		if (!e)
			return NULL;
		if (e->body_case == kind)
			return e;
		if (e->body_case == WEFT__ENVELOPE__BODY_PARTIAL) {
			merge(m, e, p);
			send_ack(f, e->seq);
		}
		wire_free(e);
	}
	return NULL;
}

static void test_agent_end_to_end(void **state)
{
	struct fake f = { 0 };
	struct compiled agg, stream;
	struct merged m = { 0 };
	char q[256], path[160], pub[WIRE_KEY_LEN + 1], sec[WIRE_KEY_LEN + 1], text[256], *log;
	struct wire_allowlist al;
	Weft__Envelope *e;
	Weft__Hello *h;
	uint64_t until, first_instance, hello2_seq;
	int line, go, status, got;
	pid_t wl;
	size_t sz;
	FILE *lf;

	/* keys: the aggregator's pair, the agent's pair, the allow-list */
	snprintf(f.dir, sizeof(f.dir), "/tmp/weft-test-agent-XXXXXX");
	assert_non_null(mkdtemp(f.dir));
	assert_int_equal(wire_keypair_new(f.srv_pub, f.srv_sec), 0);
	assert_int_equal(wire_keypair_new(pub, sec), 0);
	snprintf(path, sizeof(path), "%s/aggregator.pub", f.dir);
	assert_int_equal(wire_keyfile_write(path, f.srv_pub, NULL), 0);
	snprintf(path, sizeof(path), "%s/agent.key", f.dir);
	assert_int_equal(wire_keyfile_write(path, pub, sec), 0);
	snprintf(text, sizeof(text), "agent %s test-agent\n", pub);
	assert_int_equal(wire_allowlist_parse(text, strlen(text), &al, &line), 0);
	f.zctx = zmq_ctx_new();
	f.zap = wire_zap_start(f.zctx, &al);
	assert_non_null(f.zap);
	wire_allowlist_free(&al);
	snprintf(f.endpoint, sizeof(f.endpoint), "tcp://127.0.0.1:*");
	server_open(&f);
	sz = sizeof(f.endpoint);
	assert_int_equal(zmq_getsockopt(f.sock, ZMQ_LAST_ENDPOINT, f.endpoint, &sz), 0);

	/* join */
	f.agent = spawn_agent(&f);
	assert_true(f.agent > 0);
	e = recv_kind(&f, WEFT__ENVELOPE__BODY_HELLO, 20000);
	assert_non_null(e);
	h = e->hello;
	assert_string_equal(h->role, "agent");
	assert_string_equal(h->host, HOST);
	assert_true(h->version[0] != 0);
	assert_true(h->kernel && h->kernel[0]);
	assert_true(h->n_features > 0);
	assert_int_equal(h->n_running, 0);
	first_instance = h->instance;
	wire_free(e);
	send_welcome(&f, 0);

	/* run: a count of the workload's getppid calls, every 1 s */
	wl = spawn_workload(&go);
	snprintf(q, sizeof(q), "from syscall:getppid where pid = %d select count() as n every 1s",
		 (int)wl);
	compile(&agg, q);
	m.total = agent_table_new(agg.res.plan, 0);
	assert_non_null(m.total);
	send_start(&f, 1, q, agg.manifest, agg.mlen, agg.res.object, agg.res.object_sz);
	/* attached when a heartbeat says it runs */
	until = now_ms() + 20000;
	for (got = 0; !got && now_ms() < until;) {
		e = recv_env(&f, 500);
		if (!e)
			continue;
		if (e->body_case == WEFT__ENVELOPE__BODY_QUERY_ERROR)
			fail_msg("the agent could not start the query: %s",
				 e->query_error->message);
		if (e->body_case == WEFT__ENVELOPE__BODY_PARTIAL) {
			merge(&m, e, agg.res.plan);
			send_ack(&f, e->seq);
		}
		if (e->body_case == WEFT__ENVELOPE__BODY_HEARTBEAT &&
		    e->heartbeat->n_running == 1 && e->heartbeat->running[0] == 1)
			got = 1;
		wire_free(e);
	}
	assert_true(got);
	assert_int_equal(write(go, "g", 1), 1);
	close(go);
	assert_int_equal(waitpid(wl, &status, 0), wl);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);

	/* two partials more, each acked when the next one comes: the last one merged before
	 * the cut is never acked (as if its Ack were lost) */
	until = now_ms() + 20000;
	{
		uint64_t pending = 0;
		int before = m.partials;

		while (m.partials < before + 2 && now_ms() < until) {
			e = recv_env(&f, 100);
			if (e && e->body_case == WEFT__ENVELOPE__BODY_PARTIAL) {
				merge(&m, e, agg.res.plan);
				if (pending)
					send_ack(&f, pending);
				pending = e->seq;
			}
			wire_free(e);
		}
		assert_int_equal(m.partials, before + 2);
		assert_true(pending != 0);
	}

	/* cut: the aggregator's socket goes away for 2.5 s; windows keep closing meanwhile */
	server_close(&f);
	usleep(2500 * 1000);
	server_open(&f);
	e = recv_kind(&f, WEFT__ENVELOPE__BODY_HELLO, 20000);
	assert_non_null(e);
	assert_int_equal(e->hello->instance, first_instance); /* the same process */
	assert_int_equal(e->hello->n_running, 1);
	assert_int_equal(e->hello->running[0], 1);
	hello2_seq = e->seq;
	wire_free(e);
	send_welcome(&f, m.last_seq);
	/* the resends come first, with seqs above the Hello's */
	e = recv_kind(&f, WEFT__ENVELOPE__BODY_PARTIAL, 5000);
	assert_non_null(e);
	assert_true(e->seq > hello2_seq);
	merge(&m, e, agg.res.plan);
	send_ack(&f, e->seq);
	wire_free(e);
	until = now_ms() + 1500;
	while (now_ms() < until) {
		e = recv_env(&f, 100);
		if (e && e->body_case == WEFT__ENVELOPE__BODY_PARTIAL) {
			merge(&m, e, agg.res.plan);
			send_ack(&f, e->seq);
		}
		wire_free(e);
	}

	/* refuse: garbage, and a body no aggregator sends */
	assert_int_equal(zmq_send(f.sock, f.id, f.idlen, ZMQ_SNDMORE), (int)f.idlen);
	assert_int_equal(zmq_send(f.sock, "\xff\xfe garbage", 10, 0), 10);
	{
		Weft__Submit s = WEFT__SUBMIT__INIT;

		s.query = "from syscall:read select count()";
		s.manifest.data = (uint8_t *)agg.manifest;
		s.manifest.len = agg.mlen;
		s.object.data = agg.res.object;
		s.object.len = agg.res.object_sz;
		send_env(&f, WEFT__ENVELOPE__BODY_SUBMIT, &s);
	}
	/* a query compiled for one process (-p), and a manifest that is not one */
	compile_pid(&stream, "from syscall:getppid select pid", getpid());
	send_start(&f, 2, "stream", stream.manifest, stream.mlen, stream.res.object,
		   stream.res.object_sz);
	e = recv_kind_running(&f, WEFT__ENVELOPE__BODY_QUERY_ERROR, 20000, &m, agg.res.plan);
	assert_non_null(e);
	assert_int_equal(e->query_error->query_id, 2);
	assert_non_null(strstr(e->query_error->message, "compiled for one process"));
	wire_free(e);
	send_start(&f, 3, "bad", "weft-manifest 9\n", 16, stream.res.object, stream.res.object_sz);
	e = recv_kind_running(&f, WEFT__ENVELOPE__BODY_QUERY_ERROR, 20000, &m, agg.res.plan);
	assert_non_null(e);
	assert_int_equal(e->query_error->query_id, 3);
	assert_non_null(strstr(e->query_error->message, "manifest was refused"));
	wire_free(e);

	/* stop: the last window says so */
	{
		Weft__QueryStop s = WEFT__QUERY_STOP__INIT;

		s.query_id = 1;
		send_env(&f, WEFT__ENVELOPE__BODY_QUERY_STOP, &s);
	}
	until = now_ms() + 10000;
	while (!m.got_last && now_ms() < until) {
		e = recv_env(&f, 100);
		if (e && e->body_case == WEFT__ENVELOPE__BODY_PARTIAL) {
			merge(&m, e, agg.res.plan);
			send_ack(&f, e->seq);
		}
		wire_free(e);
	}
	assert_true(m.got_last);
	/* every window from the first to the last, each once, and every call counted once */
	{
		int first = -1, lastw = -1;

		for (int w = 0; w < 64; w++)
			if (m.seen[w]) {
				if (first < 0)
					first = w;
				lastw = w;
			}
		for (int w = first; w <= lastw; w++)
			if (!m.seen[w])
				fail_msg("window %d missing (windows %d..%d)", w, first, lastw);
	}
	assert_int_equal(table_count(m.total, agg.res.plan), CALLS);

	/* without `every`, ended by its end time: one window, sent once, with last */
	{
		struct compiled once;
		uint64_t end_ns = realtime_ns() + 3000000000ull;

		wl = spawn_workload(&go);
		snprintf(q, sizeof(q), "from syscall:getppid where pid = %d select count() as n",
			 (int)wl);
		compile(&once, q);
		send_start_until(&f, 4, q, once.manifest, once.mlen, once.res.object,
				 once.res.object_sz, 0, end_ns);
		until = now_ms() + 20000;
		for (got = 0; !got && now_ms() < until;) {
			e = recv_env(&f, 500);
			if (e && e->body_case == WEFT__ENVELOPE__BODY_PARTIAL)
				fail_msg("a partial before the end");
			if (e && e->body_case == WEFT__ENVELOPE__BODY_HEARTBEAT &&
			    e->heartbeat->n_running == 1 && e->heartbeat->running[0] == 4)
				got = 1;
			wire_free(e);
		}
		assert_true(got);
		assert_int_equal(write(go, "g", 1), 1);
		close(go);
		assert_int_equal(waitpid(wl, &status, 0), wl);
		e = recv_kind(&f, WEFT__ENVELOPE__BODY_PARTIAL, 10000);
		assert_non_null(e);
		assert_true(realtime_ns() >= end_ns); /* not before its end */
		assert_int_equal(e->partial->query_id, 4);
		assert_int_equal(e->partial->window, 0);
		assert_true(e->partial->has_last && e->partial->last);
		agent_table_clear(m.total);
		assert_int_equal(
			agent_table_add_groups(m.total, e->partial->groups, e->partial->n_groups),
			0);
		assert_int_equal(table_count(m.total, once.res.plan), CALLS);
		send_ack(&f, e->seq);
		wire_free(e);
		/* the same id again, with another epoch: another query (an aggregator that lost its
		 * store numbers from 1 again), so it runs; ended at once: an empty last window */
		send_start_until(&f, 4, q, once.manifest, once.mlen, once.res.object,
				 once.res.object_sz, realtime_ns() - 2000000000ull,
				 realtime_ns() - 1000000000ull);
		e = recv_kind(&f, WEFT__ENVELOPE__BODY_PARTIAL, 10000);
		assert_non_null(e);
		assert_int_equal(e->partial->query_id, 4);
		assert_true(e->partial->has_last && e->partial->last);
		assert_int_equal(e->partial->n_groups, 0);
		send_ack(&f, e->seq);
		wire_free(e);
		compiled_free(&once);
	}

	/* SIGTERM: a clean exit, and its account of what it refused */
	kill(f.agent, SIGTERM);
	assert_int_equal(waitpid(f.agent, &status, 0), f.agent);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	snprintf(path, sizeof(path), "%s/agent.log", f.dir);
	lf = fopen(path, "r");
	assert_non_null(lf);
	log = calloc(1, 1 << 20);
	assert_non_null(log);
	if (fread(log, 1, (1 << 20) - 1, lf) == 0)
		fail_msg("the agent logged nothing");
	fclose(lf);
	if (getenv("WEFT_TEST_LOG"))
		fprintf(stderr, "%s", log);
	if (!strstr(log, ", 2 messages rejected\n"))
		fail_msg("the agent's log:\n%s", log);
	free(log);

	agent_table_free(m.total);
	compiled_free(&agg);
	compiled_free(&stream);
	server_close(&f);
	wire_zap_stop(f.zap);
	zmq_ctx_term(f.zctx);
	snprintf(text, sizeof(text), "rm -rf '%s'", f.dir);
	assert_int_equal(system(text), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_agent_end_to_end),
	};

	if (!wt_root("the agent loads BPF programs"))
		return WT_SKIP;
	return wt_status(cmocka_run_group_tests(tests, NULL, NULL));
}
