// SPDX-License-Identifier: Apache-2.0
/*
 * cluster_sim — simulated agents and a following client against a real `weft aggregator`,
 * over loopback ZeroMQ with CURVE, for the cluster benchmarks (docs/performance.md).
 *
 * Each simulated agent is its own DEALER socket with its own key pair (allow-listed as an
 * agent), and speaks the agent's side of docs/protocol.md: Hello first on its connection;
 * after the Welcome, a Heartbeat every Welcome.heartbeat_ms listing the queries it runs; on
 * QueryStart (a real query, submitted by the client below: the aggregator assigns its id and
 * epoch) it runs the query from the window current then; one Partial per window, in window
 * order, `last` on the window holding the query's end; every envelope takes the next seq of
 * its instance; Acks are counted.  The partials are cluster_bench.h's: `groups` groups of
 * the query's key and aggregate layout from a key space shared by all agents.  The groups'
 * bytes are packed once per agent; each transmission packs only the Partial's small header
 * and wraps it in an envelope with the next seq, as the real agent's spool does.
 *
 * The client (a thread, with aggd_client: Hello, Submit with follow) submits the query once
 * every agent is welcomed and records, for every Result, when it arrived (CLOCK_MONOTONIC,
 * one clock for the whole machine), its hosts, missing hosts, groups and the total of its
 * count() column, which must equal what the agents sent.
 *
 * Modes:
 *   window  every agent sends its partial of window w when w ends (CLOCK_REALTIME, as agents
 *           do: all at once); per window: the time the last partial of the window was
 *           handed to ZeroMQ, and the time its Result reached the client.  The query should
 *           carry `for D` so that it ends and the run with it.  With -s MS, agent i sends
 *           MS * i / AGENTS milliseconds after the window's end instead (agents whose sends
 *           are spread, not synchronised to the microsecond).
 *   flood   every agent keeps up to --inflight partials unacknowledged, for the current
 *           window, for --duration seconds after a warm-up: rows merged per second from the
 *           Acks (an Ack comes only after the aggregator committed the merge to its store).
 *
 * Usage:
 *   cluster_sim keys N PREFIX       N key pairs into PREFIX.keys ("public secret" lines);
 *                                   prints their allow-list lines ("agent KEY simNNNN")
 *   cluster_sim run [options]       see usage()
 *   cluster_sim load N              N processes named cbench-load, each making one read()
 *                                   a second (a workload of N (comm, pid) groups); runs
 *                                   until killed
 *
 * Why one file of ~1,200 lines: a benchmark tool, one program over one struct sim shared by
 * the agents, the client thread and the report; kept whole so that it reads top to bottom.
 */
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>
#include "base/zmq_dl.h"
#include "aggregator/aggd.h"
#include "tools/bench/cluster_bench.h"
#include "base/log.h"

#define MAX_WINDOWS 4096
#define MAX_RESULTS 8192
#define INFLIGHT_MAX 64
#define SWEEP_NS 250000000ULL /* every socket is drained at least this often */

enum mode { MODE_WINDOW, MODE_FLOOD };

struct sagent {
	void *sock;
	uint32_t idx;
	char host[16];
	char pub[WIRE_KEY_LEN + 1], sec[WIRE_KEY_LEN + 1];
	uint64_t instance, seq;
	struct wire_seq rx;
	bool welcomed;
	uint64_t hb_ns, next_hb;
	const uint8_t *blob; /* its groups, packed as Partial.groups fields */
	size_t bloblen;
	/* the query */
	bool running;
	uint64_t next_w; /* the next window to send */
	/* partials sent and not yet acknowledged: their seqs, oldest first */
	uint64_t infl[INFLIGHT_MAX];
	size_t ihead, in;
	uint64_t sent, acked;
	bool drain; /* sent to in this round: read it after the round */
};

struct result_rec {
	uint64_t window, t_mono, count;
	uint32_t revision, groups, hosts, missing;
	bool last;
};

struct wstat {
	uint64_t t_first, t_last; /* CLOCK_MONOTONIC of the first and last partial handed over */
	uint32_t sent;
};

struct sim {
	/* options */
	const char *endpoint, *server_key, *keys, *client_key, *query, *out;
	uint32_t n, groups, keyspace, inflight;
	enum mode mode;
	double duration, warmup;
	int cpu;
	int watch; /* the aggregator's pid: its CPU time is reported (0: none) */
	/* the query, compiled here as `weft submit` would */
	struct plan *plan;
	char *manifest;
	size_t manifest_len;
	void *object;
	size_t object_len;
	int count_agg; /* the first count() column, -1 if none */
	char server_pub[WIRE_KEY_LEN + 1];
	void *zctx;
	int ep;
	struct sagent *ag;
	/* the query as the agents got it (one query per run) */
	uint64_t qid, epoch, end, every;
	uint64_t spread; /* window mode: agent i sends at the window's end + spread * i / n */
	uint32_t started; /* agents running it */
	uint64_t w_due; /* window mode: windows below this are due */
	struct wstat ws[MAX_WINDOWS];
	uint64_t expect_count; /* count() total of one window from every agent */
	uint64_t errors, rejected, acks_total, partials_total;
	/* the client thread */
	pthread_t th;
	pthread_mutex_t mu;
	volatile bool stop, client_ready, client_failed;
	uint64_t client_qid;
	struct result_rec res[MAX_RESULTS];
	size_t nres;
	bool got_last;
};

static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
	(void)sig;
	interrupted = 1;
}

static uint64_t mono(void)
{
	return cb_now_ns(CLOCK_MONOTONIC);
}

static uint64_t real(void)
{
	return cb_now_ns(CLOCK_REALTIME);
}

/* ---- keys ---- */

static int cmd_keys(int argc, char **argv)
{
	char path[512], pub[WIRE_KEY_LEN + 1], sec[WIRE_KEY_LEN + 1];
	unsigned long n;
	FILE *f;

	if (argc != 4) {
		fprintf(stderr, "usage: cluster_sim keys N PREFIX\n");
		return 2;
	}
	n = strtoul(argv[2], NULL, 0);
	snprintf(path, sizeof(path), "%s.keys", argv[3]);
	f = fopen(path, "w");
	if (!f) {
		perror(path);
		return 1;
	}
	fchmod(fileno(f), 0600);
	for (unsigned long i = 0; i < n; i++) {
		if (wire_keypair_new(pub, sec)) {
			fprintf(stderr, "cluster_sim: cannot make a key pair\n");
			fclose(f);
			return 1;
		}
		fprintf(f, "%s %s\n", pub, sec);
		printf("agent %s sim%04lu\n", pub, i);
	}
	return fclose(f) ? 1 : 0;
}

/* ---- load: N processes, one read() a second each ---- */

static int cmd_load(int argc, char **argv)
{
	unsigned long n;
	pid_t parent = getpid(), *kids;
	size_t nkids = 0;

	if (argc != 3) {
		fprintf(stderr, "usage: cluster_sim load N\n");
		return 2;
	}
	n = strtoul(argv[2], NULL, 0);
	kids = calloc(n + 1, sizeof(*kids));
	if (!kids)
		return 1;
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	for (unsigned long i = 0; i < n && !interrupted; i++) {
		pid_t c = fork();

		if (c < 0) {
			perror("fork");
			break;
		}
		if (c == 0) {
			char buf[4096];
			int fd = open("/dev/zero", O_RDONLY), null = open("/dev/null", O_RDWR);
			struct timespec ts = { 0, (long)(i * 997) % 1000000000L };

			signal(SIGTERM, SIG_DFL);
			signal(SIGINT, SIG_DFL);
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			if (getppid() != parent)
				_exit(0);
			/* nobody waits on our output: a pipe held open by 1,000 children would */
			dup2(null, 0);
			dup2(null, 1);
			dup2(null, 2);
			prctl(PR_SET_NAME, "cbench-load");
			nanosleep(&ts, NULL); /* spread the reads over the second */
			for (;;) {
				if (read(fd, buf, 1 + i % sizeof(buf)) < 0)
					_exit(1);
				sleep(1);
			}
		}
		kids[nkids++] = c;
	}
	while (!interrupted)
		pause();
	for (size_t i = 0; i < nkids; i++)
		kill(kids[i], SIGTERM);
	while (wait(NULL) > 0)
		;
	free(kids);
	return 0;
}

/* ---- the client thread ---- */

static uint64_t result_count(struct sim *s, const Weft__Result *r)
{
	struct agg_spec spec;
	uint64_t total = 0, st[8];

	if (s->count_agg < 0)
		return 0;
	spec = cb_spec(&s->plan->aggs[s->count_agg]);
	for (size_t i = 0; i < r->n_groups; i++) {
		const Weft__Group *g = r->groups[i];

		if ((size_t)s->count_agg >= g->n_states ||
		    agg_state_decode(&spec, st, g->states[s->count_agg].data,
				     g->states[s->count_agg].len))
			continue;
		total += st[0];
	}
	return total;
}

static void *client_main(void *arg)
{
	struct sim *s = arg;
	struct aggd_client_opts co = { .sz = sizeof(co) };
	Weft__Envelope e = WEFT__ENVELOPE__INIT;
	Weft__Submit sub = WEFT__SUBMIT__INIT;
	struct aggd_client *cl;
	char err[256];

	co.endpoint = s->endpoint;
	co.server_key_file = s->server_key;
	co.key_file = s->client_key;
	co.timeout_ms = 10000;
	cl = aggd_client_connect(&co, err, sizeof(err));
	if (!cl) {
		fprintf(stderr, "cluster_sim: client: %s\n", err);
		s->client_failed = true;
		return NULL;
	}
	sub.query = (char *)s->query;
	sub.manifest.data = (uint8_t *)s->manifest;
	sub.manifest.len = s->manifest_len;
	sub.object.data = s->object;
	sub.object.len = s->object_len;
	sub.has_follow = sub.follow = true;
	e.body_case = WEFT__ENVELOPE__BODY_SUBMIT;
	e.submit = &sub;
	if (aggd_client_send(cl, &e)) {
		fprintf(stderr, "cluster_sim: client: submit not sent\n");
		s->client_failed = true;
		aggd_client_free(cl);
		return NULL;
	}
	while (!s->stop) {
		Weft__Envelope *m = NULL;
		int rc = aggd_client_recv(cl, 100, &m);
		uint64_t t = mono();

		if (rc <= 0)
			continue;
		if (m->body_case == WEFT__ENVELOPE__BODY_STATUS_REPLY &&
		    m->status_reply->n_queries == 1 && !s->client_qid) {
			s->client_qid = m->status_reply->queries[0]->query_id;
			aggd_client_remember(cl, s->client_qid);
			s->client_ready = true;
		} else if (m->body_case == WEFT__ENVELOPE__BODY_RESULT) {
			const Weft__Result *r = m->result;
			struct result_rec rec = {
				.window = r->window,
				.t_mono = t,
				.count = result_count(s, r),
				.revision = r->revision,
				.groups = (uint32_t)r->n_groups,
				.hosts = (uint32_t)r->n_hosts,
				.missing = (uint32_t)r->n_missing,
				.last = r->last,
			};

			pthread_mutex_lock(&s->mu);
			if (s->nres < MAX_RESULTS)
				s->res[s->nres++] = rec;
			if (r->last)
				s->got_last = true;
			pthread_mutex_unlock(&s->mu);
			aggd_client_progress(cl, r->query_id, r->window + 1);
		} else if (m->body_case == WEFT__ENVELOPE__BODY_ERROR) {
			fprintf(stderr, "cluster_sim: client: error from the aggregator: %s\n",
				m->error->message);
			if (!s->client_qid)
				s->client_failed = true;
		}
		wire_free(m);
	}
	aggd_client_free(cl);
	return NULL;
}

/* ---- agents ---- */

static int agent_send(struct sim *s, struct sagent *a, Weft__Envelope *e)
{
	int rc;

	e->version = WIRE_VERSION;
	e->seq = a->seq + 1;
	rc = wire_send(a->sock, NULL, 0, e, true);
	if (rc == 0)
		a->seq++;
	else if (rc != -EAGAIN)
		s->errors++;
	return rc;
}

static void agent_hello(struct sim *s, struct sagent *a)
{
	Weft__Envelope e = WEFT__ENVELOPE__INIT;
	Weft__Hello h = WEFT__HELLO__INIT;
	char *features[] = { "tracepoint", "raw_tracepoint", "uprobe", "usdt", "perf_event" };

	h.role = "agent";
	h.host = a->host;
	h.version = WEFT_VERSION;
	h.instance = a->instance;
	h.kernel = "6.18.0-sim";
	h.features = features;
	h.n_features = sizeof(features) / sizeof(features[0]);
	e.body_case = WEFT__ENVELOPE__BODY_HELLO;
	e.hello = &h;
	agent_send(s, a, &e);
}

static void agent_heartbeat(struct sim *s, struct sagent *a)
{
	Weft__Envelope e = WEFT__ENVELOPE__INIT;
	Weft__Heartbeat h = WEFT__HEARTBEAT__INIT;
	uint64_t running[1] = { s->qid };

	h.time_ns = real();
	h.running = running;
	h.n_running = a->running ? 1 : 0;
	h.has_spooled = true;
	h.spooled = a->in;
	h.has_spool_dropped = true;
	e.body_case = WEFT__ENVELOPE__BODY_HEARTBEAT;
	e.heartbeat = &h;
	agent_send(s, a, &e);
}

/* One Partial of window w: the small header packed now, the groups' bytes as packed once. */
static int agent_partial(struct sim *s, struct sagent *a, uint64_t w, bool last)
{
	Weft__Partial pt = WEFT__PARTIAL__INIT;
	uint64_t drops[WEFT_DROP_NR] = { 0 };
	uint8_t head[256];
	size_t hlen, blen;
	uint8_t *body;
	void *buf;
	size_t len;
	int rc;

	if (a->in == INFLIGHT_MAX)
		return -EAGAIN;
	pt.query_id = s->qid;
	pt.window = w;
	pt.host = a->host;
	pt.n_drops = WEFT_DROP_NR;
	pt.drops = drops;
	pt.has_misses = pt.has_overflow = true;
	pt.has_last = last;
	pt.last = last;
	hlen = weft__partial__get_packed_size(&pt);
	if (hlen > sizeof(head))
		return -EINVAL;
	weft__partial__pack(&pt, head);
	blen = hlen + a->bloblen;
	body = malloc(blen);
	if (!body)
		return -ENOMEM;
	memcpy(body, head, hlen);
	memcpy(body + hlen, a->blob, a->bloblen);
	rc = wire_envelope_wrap(a->seq + 1, WEFT__ENVELOPE__BODY_PARTIAL, body, blen, &buf, &len);
	free(body);
	if (rc)
		return rc;
	rc = wire_send_bytes(a->sock, NULL, 0, buf, len, true);
	free(buf);
	if (rc) {
		if (rc != -EAGAIN)
			s->errors++;
		return rc;
	}
	a->seq++;
	a->infl[(a->ihead + a->in) % INFLIGHT_MAX] = a->seq;
	a->in++;
	a->sent++;
	s->partials_total++;
	return 0;
}

static void agent_on_message(struct sim *s, struct sagent *a, const void *buf, size_t len)
{
	char why[256];
	Weft__Envelope *e = wire_decode(buf, len, why, sizeof(why));

	if (!e) {
		s->rejected++;
		return;
	}
	if (!wire_body_from_server(e->body_case)) {
		s->rejected++;
		goto out;
	}
	switch (e->body_case) {
	case WEFT__ENVELOPE__BODY_WELCOME:
		a->welcomed = true;
		a->rx.instance = e->welcome->instance;
		a->rx.last = e->seq;
		a->hb_ns = e->welcome->heartbeat_ms * 1000000ULL;
		a->next_hb = mono() + a->hb_ns;
		break;
	case WEFT__ENVELOPE__BODY_QUERY_START: {
		const Weft__QueryStart *qs = e->query_start;

		if (!wire_seq_accept(&a->rx, a->rx.instance, e->seq))
			break;
		if (!s->qid) {
			char err[256];
			struct plan *p = manifest_read((const char *)qs->manifest.data,
						       qs->manifest.len, err, sizeof(err));

			/* the agent reads the manifest as a real one does */
			if (!p) {
				fprintf(stderr, "cluster_sim: QueryStart: manifest: %s\n", err);
				s->errors++;
				break;
			}
			s->qid = qs->query_id;
			s->epoch = qs->epoch_realtime_ns;
			s->end = qs->has_end_realtime_ns ? qs->end_realtime_ns : 0;
			s->every = p->every_ns;
			plan_free(p);
		}
		if (qs->query_id != s->qid || a->running)
			break;
		a->running = true;
		a->next_w = s->every && real() > s->epoch ? (real() - s->epoch) / s->every : 0;
		s->started++;
		break;
	}
	case WEFT__ENVELOPE__BODY_QUERY_STOP:
		if (wire_seq_accept(&a->rx, a->rx.instance, e->seq) &&
		    e->query_stop->query_id == s->qid && a->running) {
			a->running = false;
			s->started--;
		}
		break;
	case WEFT__ENVELOPE__BODY_ACK:
		if (!wire_seq_accept(&a->rx, a->rx.instance, e->seq))
			break;
		s->acks_total++;
		while (a->in && a->infl[a->ihead] <= e->ack->upto) {
			a->ihead = (a->ihead + 1) % INFLIGHT_MAX;
			a->in--;
			a->acked++;
		}
		break;
	case WEFT__ENVELOPE__BODY_ERROR:
		if (s->errors++ < 5)
			fprintf(stderr, "cluster_sim: %s: error from the aggregator: %s\n", a->host,
				e->error->message);
		break;
	default:
		break;
	}
out:
	wire_free(e);
}

static void agent_drain(struct sim *s, struct sagent *a)
{
	for (;;) {
		zmq_msg_t m;

		zmq_msg_init(&m);
		if (zmq_msg_recv(&m, a->sock, ZMQ_DONTWAIT) < 0) {
			zmq_msg_close(&m);
			return;
		}
		agent_on_message(s, a, zmq_msg_data(&m), zmq_msg_size(&m));
		zmq_msg_close(&m);
	}
}

/* The groups of agent i, packed as the repeated Partial.groups field (number 4). */
static int blob_make(struct sim *s, Weft__Group **space, uint32_t agent, uint8_t **out,
		     size_t *outlen)
{
	size_t cap = 0, len = 0;
	uint8_t *b;

	for (uint32_t j = 0; j < s->groups; j++)
		cap += weft__group__get_packed_size(
			       space[((uint64_t)agent * s->groups + j) % s->keyspace]) +
		       11;
	b = malloc(cap + 1);
	if (!b)
		return -ENOMEM;
	for (uint32_t j = 0; j < s->groups; j++) {
		const Weft__Group *g = space[((uint64_t)agent * s->groups + j) % s->keyspace];
		size_t gl = weft__group__get_packed_size(g);

		b[len++] = (4 << 3) | 2;
		for (size_t v = gl;; v >>= 7) {
			b[len++] = (uint8_t)((v & 0x7f) | (v >= 0x80 ? 0x80 : 0));
			if (v < 0x80)
				break;
		}
		len += weft__group__pack(g, b + len);
	}
	*out = b;
	*outlen = len;
	return 0;
}

static int agents_make(struct sim *s)
{
	Weft__Group **space = calloc(s->keyspace, sizeof(*space));
	struct {
		uint32_t off;
		uint8_t *b;
		size_t len;
	} *blobs = calloc(s->n, sizeof(*blobs));
	size_t nblobs = 0;
	FILE *f = fopen(s->keys, "r");
	int rc = 0;

	if (!space || !blobs || !f) {
		fprintf(stderr, "cluster_sim: %s: %s\n", s->keys, strerror(errno));
		return -errno;
	}
	for (uint32_t i = 0; i < s->keyspace; i++)
		if (!(space[i] = cb_group_make(s->plan, i)))
			return -ENOMEM;
	s->ag = calloc(s->n, sizeof(*s->ag));
	if (!s->ag)
		return -ENOMEM;
	for (uint32_t i = 0; i < s->n; i++) {
		struct sagent *a = &s->ag[i];
		uint32_t off = (uint32_t)(((uint64_t)i * s->groups) % s->keyspace);
		size_t k;

		if (fscanf(f, "%40s %40s", a->pub, a->sec) != 2) {
			fprintf(stderr, "cluster_sim: %s has fewer than %u keys\n", s->keys, s->n);
			return -EINVAL;
		}
		a->idx = i;
		snprintf(a->host, sizeof(a->host), "sim%04u", i);
		getrandom(&a->instance, sizeof(a->instance), 0);
		a->instance |= 1;
		for (k = 0; k < nblobs && blobs[k].off != off; k++)
			;
		if (k == nblobs) {
			blobs[k].off = off;
			rc = blob_make(s, space, i, &blobs[k].b, &blobs[k].len);
			if (rc)
				return rc;
			nblobs++;
		}
		a->blob = blobs[k].b;
		a->bloblen = blobs[k].len;
		for (uint32_t j = 0; j < s->groups; j++)
			s->expect_count += cb_group_count(
				(uint32_t)(((uint64_t)i * s->groups + j) % s->keyspace));
	}
	fclose(f);
	for (uint32_t i = 0; i < s->keyspace; i++)
		free(space[i]);
	free(space);
	free(blobs); /* the blobs themselves stay: agents point into them */
	return 0;
}

static int agents_connect(struct sim *s)
{
	for (uint32_t i = 0; i < s->n; i++) {
		struct sagent *a = &s->ag[i];
		struct epoll_event ev = { .events = EPOLLIN | EPOLLET, .data.u32 = i };
		int fd;
		size_t fsz = sizeof(fd);

		a->sock = wire_client_socket(s->zctx, s->endpoint, s->server_pub, a->pub, a->sec);
		if (!a->sock) {
			fprintf(stderr, "cluster_sim: agent %u: socket: %s\n", i,
				zmq_strerror(errno));
			return -errno;
		}
		if (zmq_getsockopt(a->sock, ZMQ_FD, &fd, &fsz) ||
		    epoll_ctl(s->ep, EPOLL_CTL_ADD, fd, &ev)) {
			fprintf(stderr, "cluster_sim: agent %u: fd: %s\n", i, strerror(errno));
			return -errno;
		}
		agent_hello(s, a);
	}
	return 0;
}

/* Serves every socket until deadline (CLOCK_MONOTONIC) or until done() says so. */
static void agents_serve(struct sim *s, uint64_t deadline_ns, uint64_t *next_sweep)
{
	struct epoll_event ev[256];
	uint64_t now = mono();
	int timeout = deadline_ns > now ? (int)((deadline_ns - now + 999999ULL) / 1000000ULL) : 0;
	int n;

	if (timeout > 10)
		timeout = 10;
	n = epoll_wait(s->ep, ev, 256, timeout);
	for (int i = 0; i < n; i++)
		agent_drain(s, &s->ag[ev[i].data.u32]);
	now = mono();
	for (uint32_t i = 0; i < s->n; i++) {
		struct sagent *a = &s->ag[i];

		if (a->welcomed && a->hb_ns && now >= a->next_hb) {
			agent_heartbeat(s, a);
			a->next_hb = now + a->hb_ns;
			agent_drain(s, a);
		}
	}
	if (now >= *next_sweep) {
		/* ZMQ_FD is edge-triggered and a send may consume its edge: drain everything */
		for (uint32_t i = 0; i < s->n; i++)
			agent_drain(s, &s->ag[i]);
		*next_sweep = now + SWEEP_NS;
	}
}

/* Window mode: every running agent sends each window that has ended, in order. */
static void windows_send(struct sim *s)
{
	uint64_t now = real();

	for (uint32_t i = 0; i < s->n; i++) {
		struct sagent *a = &s->ag[i];
		bool sent = false;

		while (a->running) {
			uint64_t close_at = s->epoch + (a->next_w + 1) * s->every;
			bool last = s->end && close_at >= s->end;
			uint64_t w = a->next_w;

			if (now < (last ? s->end : close_at) + s->spread * i / s->n)
				break;
			if (agent_partial(s, a, w, last))
				break; /* its queue is full: again in the next round */
			sent = true;
			if (w < MAX_WINDOWS) {
				uint64_t t = mono();

				if (!s->ws[w].sent)
					s->ws[w].t_first = t;
				s->ws[w].t_last = t;
				s->ws[w].sent++;
			}
			a->next_w++;
			if (last) {
				a->running = false;
				s->started--;
			}
		}
		a->drain = sent;
	}
	/* a send may take the edge of ZMQ_FD: read what arrived, after the whole burst */
	for (uint32_t i = 0; i < s->n; i++)
		if (s->ag[i].drain) {
			s->ag[i].drain = false;
			agent_drain(s, &s->ag[i]);
		}
}

static void flood_send(struct sim *s)
{
	uint64_t w = s->every && real() > s->epoch ? (real() - s->epoch) / s->every : 0;

	for (uint32_t i = 0; i < s->n; i++) {
		struct sagent *a = &s->ag[i];

		if (!a->running)
			continue;
		bool sent = false;

		if (w > a->next_w)
			a->next_w = w;
		while (a->in < s->inflight && agent_partial(s, a, a->next_w, false) == 0)
			sent = true;
		/* a send may take the edge of ZMQ_FD: what arrived meanwhile is read now (a
		 * receive on an idle socket costs a system call: only after sending) */
		if (sent)
			agent_drain(s, a);
	}
}

static uint64_t acked_total(const struct sim *s)
{
	uint64_t n = 0;

	for (uint32_t i = 0; i < s->n; i++)
		n += s->ag[i].acked;
	return n;
}

static int cmp_u64(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;

	return a < b ? -1 : a > b;
}

static double ms(uint64_t ns)
{
	return (double)ns / 1e6;
}

static void report_windows(struct sim *s, FILE *out)
{
	uint64_t off = real() - mono(); /* CLOCK_REALTIME - CLOCK_MONOTONIC */
	uint64_t lat[MAX_WINDOWS], late[MAX_WINDOWS], whole[MAX_WINDOWS] = { 0 };
	size_t nl = 0, full = 0, bad = 0, nw = 0, nwhole = 0;

	fprintf(out, "%6s %6s %9s %11s %11s %7s %6s %7s %4s %s\n", "window", "sent", "send_ms",
		"lat_last_ms", "lat_end_ms", "groups", "hosts", "missing", "rev", "count");
	pthread_mutex_lock(&s->mu);
	for (size_t r = 0; r < s->nres; r++) {
		const struct result_rec *rec = &s->res[r];
		const struct wstat *w = rec->window < MAX_WINDOWS ? &s->ws[rec->window] : NULL;
		uint64_t end_real = s->epoch + (rec->window + 1) * s->every;
		uint64_t end_mono;
		double lat_last, lat_end;
		bool complete = rec->hosts == s->n && rec->missing == 0 && rec->revision == 0;
		bool count_ok = !complete || rec->count == s->expect_count;

		if (s->end && end_real > s->end)
			end_real = s->end;
		end_mono = end_real - off;
		lat_last = w && w->sent ? (double)((int64_t)(rec->t_mono - w->t_last)) / 1e6 : 0;
		lat_end = (double)((int64_t)(rec->t_mono - end_mono)) / 1e6;
		fprintf(out, "%6" PRIu64 " %6u %9.1f %11.1f %11.1f %7u %6u %7u %4u %" PRIu64 "%s\n",
			rec->window, w ? w->sent : 0, w && w->sent ? ms(w->t_last - w->t_first) : 0,
			lat_last, lat_end, rec->groups, rec->hosts, rec->missing, rec->revision,
			rec->count, complete ? (count_ok ? " ok" : " WRONG") : "");
		/* the first result, of any revision, holding every host's partial */
		if (w && rec->hosts == s->n && rec->count == s->expect_count &&
		    !whole[rec->window] && rec->t_mono > w->t_last)
			whole[rec->window] = rec->t_mono - w->t_last;
		if (complete) {
			full++;
			bad += !count_ok;
			if (w && w->sent == s->n && rec->t_mono > w->t_last) {
				lat[nl] = rec->t_mono - w->t_last;
				late[nl] = rec->t_mono > end_mono ? rec->t_mono - end_mono : 0;
				nl++;
			}
		}
	}
	pthread_mutex_unlock(&s->mu);
	for (size_t w = 0; w < MAX_WINDOWS; w++) {
		if (s->ws[w].sent != s->n)
			continue;
		nw++;
		if (whole[w])
			whole[nwhole++] = whole[w];
	}
	fprintf(out,
		"windows complete (all %u hosts, none missing, revision 0): %zu of %zu results; "
		"count() totals wrong: %zu (expected %" PRIu64 " per window)\n",
		s->n, full, s->nres, bad, s->expect_count);
	if (nl) {
		qsort(lat, nl, sizeof(*lat), cmp_u64);
		qsort(late, nl, sizeof(*late), cmp_u64);
		fprintf(out,
			"latency, last partial sent -> Result received (%zu windows): median "
			"%.1f ms, p90 %.1f ms, max %.1f ms\n",
			nl, ms(lat[nl / 2]), ms(lat[(nl * 9 + 9) / 10 - 1]), ms(lat[nl - 1]));
		fprintf(out,
			"latency, window end -> Result received: median %.1f ms, p90 %.1f ms, "
			"max %.1f ms\n",
			ms(late[nl / 2]), ms(late[(nl * 9 + 9) / 10 - 1]), ms(late[nl - 1]));
	}
	if (nwhole) {
		qsort(whole, nwhole, sizeof(*whole), cmp_u64);
		fprintf(out,
			"latency, last partial sent -> first Result with every host (any revision): "
			"%zu of %zu windows, median %.1f ms, p90 %.1f ms, max %.1f ms\n",
			nwhole, nw, ms(whole[nwhole / 2]), ms(whole[(nwhole * 9 + 9) / 10 - 1]),
			ms(whole[nwhole - 1]));
	}
}

/* CPU time (clock ticks) of a process, all threads: utime + stime of /proc/PID/stat. */
static uint64_t proc_ticks(int pid)
{
	char path[64], buf[1024], *p;
	unsigned long long ut = 0, st = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	p = fgets(buf, sizeof(buf), f) ? strrchr(buf, ')') : NULL;
	fclose(f);
	/* after "(comm)": state ppid pgrp session tty tpgid flags minflt cminflt majflt
	 * cmajflt utime stime */
	if (!p ||
	    sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
		return 0;
	return ut + st;
}

/* Busy clock ticks of the whole machine (every CPU): user nice system irq softirq steal. */
static uint64_t machine_ticks(void)
{
	unsigned long long v[8] = { 0 };
	FILE *f = fopen("/proc/stat", "r");
	int n;

	if (!f)
		return 0;
	n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
		   &v[4], &v[5], &v[6], &v[7]);
	fclose(f);
	if (n != 8)
		return 0;
	return v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
}

/* Time on a CPU and time runnable but waiting for one (ns), summed over a process's threads
 * (/proc/PID/task/TID/schedstat): the wait shows when others took the aggregator's core. */
static void proc_sched(int pid, uint64_t *run, uint64_t *wait)
{
	char path[64];
	struct dirent *d;
	DIR *dir;

	*run = *wait = 0;
	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	dir = opendir(path);
	if (!dir)
		return;
	while ((d = readdir(dir))) {
		unsigned long long r, w;
		char p[300];
		FILE *f;

		if (d->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "/proc/%d/task/%s/schedstat", pid, d->d_name);
		f = fopen(p, "r");
		if (!f)
			continue;
		if (fscanf(f, "%llu %llu", &r, &w) == 2) {
			*run += r;
			*wait += w;
		}
		fclose(f);
	}
	closedir(dir);
}

struct cpu_mark {
	uint64_t t, agg, self, all, agg_run, agg_wait;
};

static void cpu_mark(const struct sim *s, struct cpu_mark *m)
{
	m->t = mono();
	m->agg = s->watch ? proc_ticks(s->watch) : 0;
	m->self = proc_ticks(getpid());
	m->all = machine_ticks();
	m->agg_run = m->agg_wait = 0;
	if (s->watch)
		proc_sched(s->watch, &m->agg_run, &m->agg_wait);
}

/* CPU use between two marks, as % of one core: the aggregator, this process, the rest. */
static void cpu_report(const struct sim *s, const struct cpu_mark *a, const struct cpu_mark *b,
		       FILE *out)
{
	double hz = (double)sysconf(_SC_CLK_TCK), sec = (double)(b->t - a->t) / 1e9;
	double agg = (double)(b->agg - a->agg) / hz / sec * 100;
	double self = (double)(b->self - a->self) / hz / sec * 100;
	double all = (double)(b->all - a->all) / hz / sec * 100;

	if (sec <= 0)
		return;
	fprintf(out,
		"cpu over %.1f s, %% of one core: aggregator %.1f, cluster_sim %.1f, "
		"everything else %.1f\n",
		sec, s->watch ? agg : 0.0, self, all - agg - self);
	if (s->watch)
		fprintf(out,
			"aggregator threads: on a CPU %.1f%% of the time, runnable and waiting "
			"for one %.1f%%\n",
			(double)(b->agg_run - a->agg_run) / 1e7 / sec,
			(double)(b->agg_wait - a->agg_wait) / 1e7 / sec);
}

static void usage(void)
{
	fprintf(stderr,
		"usage: cluster_sim run -e ENDPOINT -S SERVER.pub -K AGENTS.keys -C CLIENT.key\n"
		"          [-n AGENTS] [-g GROUPS] [-k KEYSPACE] [-q QUERY] [-m window|flood]\n"
		"          [-d SECONDS] [-W WARMUP_S] [-i INFLIGHT] [-c CPU] [-o OUT]\n"
		"          [-P AGGREGATOR_PID] [-s SPREAD_MS]\n"
		"       cluster_sim keys N PREFIX\n"
		"       cluster_sim load N\n");
}

static int cmd_run(int argc, char **argv)
{
	struct sim *s = calloc(1, sizeof(*s));
	uint64_t t_start, next_sweep = 0, deadline;
	struct cpu_mark m0 = { 0 }, m1 = { 0 };
	FILE *out = stdout;
	char spub[WIRE_KEY_LEN + 1];
	int opt, rc = 1;

	if (!s)
		return 1;
	s->endpoint = "tcp://127.0.0.1:7471";
	s->n = 0;
	s->groups = 1000;
	s->keyspace = 20000;
	s->inflight = 4;
	s->duration = 20;
	s->warmup = 5;
	s->cpu = -1;
	s->mode = MODE_WINDOW;
	pthread_mutex_init(&s->mu, NULL);
	while ((opt = getopt(argc - 1, argv + 1, "e:S:K:C:n:g:k:q:m:d:W:i:c:o:P:s:h")) != -1) {
		switch (opt) {
		case 'e':
			s->endpoint = optarg;
			break;
		case 'S':
			s->server_key = optarg;
			break;
		case 'K':
			s->keys = optarg;
			break;
		case 'C':
			s->client_key = optarg;
			break;
		case 'n':
			s->n = (uint32_t)strtoul(optarg, NULL, 0);
			break;
		case 'g':
			s->groups = (uint32_t)strtoul(optarg, NULL, 0);
			break;
		case 'k':
			s->keyspace = (uint32_t)strtoul(optarg, NULL, 0);
			break;
		case 'q':
			s->query = optarg;
			break;
		case 'm':
			s->mode = strcmp(optarg, "flood") == 0 ? MODE_FLOOD : MODE_WINDOW;
			break;
		case 'd':
			s->duration = atof(optarg);
			break;
		case 'W':
			s->warmup = atof(optarg);
			break;
		case 'i':
			s->inflight = (uint32_t)strtoul(optarg, NULL, 0);
			break;
		case 'c':
			s->cpu = atoi(optarg);
			break;
		case 'o':
			s->out = optarg;
			break;
		case 'P':
			s->watch = atoi(optarg);
			break;
		case 's':
			s->spread = strtoull(optarg, NULL, 10) * 1000000ULL;
			break;
		default:
			usage();
			return 2;
		}
	}
	if (!s->server_key || !s->keys || !s->client_key || !s->n || !s->groups || !s->keyspace ||
	    !s->inflight || s->inflight > INFLIGHT_MAX) {
		usage();
		return 2;
	}
	if (!s->query)
		s->query = s->mode == MODE_WINDOW ? CB_DEFAULT_QUERY " for 30s" : CB_DEFAULT_QUERY;
	weft_log_set_level(WEFT_LOG_WARN);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGPIPE, SIG_IGN);
	if (s->cpu >= 0) {
		cpu_set_t set;

		CPU_ZERO(&set);
		CPU_SET(s->cpu, &set);
		sched_setaffinity(0, sizeof(set), &set); /* ZeroMQ's threads inherit it */
	}
	if (wire_keyfile_read(s->server_key, spub, NULL)) {
		fprintf(stderr, "cluster_sim: %s: not a key file\n", s->server_key);
		return 1;
	}
	memcpy(s->server_pub, spub, sizeof(spub));
	s->plan =
		cb_plan_make(s->query, &s->manifest, &s->manifest_len, &s->object, &s->object_len);
	if (!s->plan)
		return 1;
	s->count_agg = -1;
	for (int a = 0; a < s->plan->naggs; a++)
		if (s->plan->aggs[a].spec.kind == AGG_COUNT) {
			s->count_agg = a;
			break;
		}
	if (agents_make(s))
		return 1;
	s->zctx = zmq_ctx_new();
	zmq_ctx_set(s->zctx, ZMQ_MAX_SOCKETS, (int)s->n + 64);
	s->ep = epoll_create1(EPOLL_CLOEXEC);
	if (!s->zctx || s->ep < 0 || agents_connect(s))
		goto out;

	/* every agent welcomed, then the query */
	t_start = mono();
	for (;;) {
		uint32_t w = 0;

		agents_serve(s, mono() + 10000000ULL, &next_sweep);
		for (uint32_t i = 0; i < s->n; i++)
			w += s->ag[i].welcomed;
		if (w == s->n)
			break;
		if (interrupted || mono() - t_start > 60000000000ULL) {
			fprintf(stderr, "cluster_sim: %u of %u agents welcomed after %.1f s\n", w,
				s->n, (double)(mono() - t_start) / 1e9);
			goto out;
		}
	}
	fprintf(stderr, "cluster_sim: %u agents welcomed in %.2f s; submitting\n", s->n,
		(double)(mono() - t_start) / 1e9);
	if (pthread_create(&s->th, NULL, client_main, s))
		goto out;
	t_start = mono();
	while (s->started < s->n) {
		agents_serve(s, mono() + 10000000ULL, &next_sweep);
		if (s->client_failed || interrupted || mono() - t_start > 30000000000ULL) {
			fprintf(stderr, "cluster_sim: %u of %u agents got the query\n", s->started,
				s->n);
			goto out_client;
		}
	}
	fprintf(stderr, "cluster_sim: query %" PRIu64 " runs on all %u agents (every %.3f s%s)\n",
		s->qid, s->n, (double)s->every / 1e9, s->end ? ", with an end" : "");
	if (!s->every) {
		fprintf(stderr, "cluster_sim: the query needs `every`\n");
		goto out_client;
	}

	if (s->mode == MODE_WINDOW) {
		uint64_t wait_until = 0;

		cpu_mark(s, &m0);

		if (!s->end)
			fprintf(stderr, "cluster_sim: the query has no `for`: stop with Ctrl-C\n");
		while (!interrupted) {
			windows_send(s);
			agents_serve(s, mono() + 1000000ULL, &next_sweep);
			if (s->started == 0 && !wait_until)
				wait_until = mono() + 10000000000ULL; /* the last Result */
			if (wait_until && (s->got_last || mono() > wait_until))
				break;
		}
		cpu_mark(s, &m1);
		/* the Acks of the last partials */
		deadline = mono() + 3000000000ULL;
		while (acked_total(s) < s->partials_total && mono() < deadline)
			agents_serve(s, deadline, &next_sweep);
	} else {
		uint64_t t0 = mono(), a0 = 0, a1, p0 = 0, t1, tw = 0;

		while (!interrupted) {
			uint64_t now = mono();

			flood_send(s);
			agents_serve(s, now + 1000000ULL, &next_sweep);
			if (!tw && now - t0 >= (uint64_t)(s->warmup * 1e9)) {
				tw = now;
				a0 = acked_total(s);
				p0 = s->partials_total;
				cpu_mark(s, &m0);
			}
			if (tw && now - tw >= (uint64_t)(s->duration * 1e9))
				break;
		}
		t1 = mono();
		a1 = acked_total(s);
		cpu_mark(s, &m1);
		if (tw && t1 > tw) {
			double sec = (double)(t1 - tw) / 1e9;

			fprintf(out,
				"flood: %u agents x %u groups, up to %u partials in flight "
				"each, %.1f s measured after %.1f s warm-up\n",
				s->n, s->groups, s->inflight, sec, s->warmup);
			fprintf(out,
				"flood: %" PRIu64 " partials acknowledged = %.0f partials/s = "
				"%.0f rows/s merged and committed (sent %.0f partials/s)\n",
				a1 - a0, (double)(a1 - a0) / sec,
				(double)(a1 - a0) * s->groups / sec,
				(double)(s->partials_total - p0) / sec);
		}
	}
	if (s->out && !(out = fopen(s->out, "w")))
		out = stdout;
	if (s->mode == MODE_WINDOW)
		report_windows(s, out);
	fprintf(out,
		"partials sent %" PRIu64 ", acknowledged %" PRIu64 "; errors %" PRIu64
		", rejected %" PRIu64 "\n",
		s->partials_total, acked_total(s), s->errors, s->rejected);
	cpu_report(s, &m0, &m1, out);
	if (out != stdout) {
		fclose(out);
		if (s->mode == MODE_WINDOW) /* the summary on stdout too */
			report_windows(s, stdout);
		cpu_report(s, &m0, &m1, stdout);
	}
	rc = 0;
out_client:
	s->stop = true;
	pthread_join(s->th, NULL);
out:
	for (uint32_t i = 0; s->ag && i < s->n; i++)
		if (s->ag[i].sock)
			zmq_close(s->ag[i].sock);
	if (s->zctx)
		zmq_ctx_term(s->zctx);
	return rc;
}

int main(int argc, char **argv)
{
	if (argc >= 2 && strcmp(argv[1], "keys") == 0)
		return cmd_keys(argc, argv);
	if (argc >= 2 && strcmp(argv[1], "load") == 0)
		return cmd_load(argc, argv);
	if (argc >= 2 && strcmp(argv[1], "run") == 0)
		return cmd_run(argc, argv);
	usage();
	return 2;
}
