// SPDX-License-Identifier: Apache-2.0
/*
 * Graph elements per second through one aggregator core (docs/performance.md, "Graph
 * batches"): one sender, authenticated with an agent's key, streams GraphBatches over real
 * CURVE ZeroMQ to a real `weft aggregator`, which stores each in its SQLite graph store (one
 * transaction per batch) and acknowledges it after its checkpoint.  The sender keeps at most
 * INFLIGHT batches unacknowledged (as an agent's spool would be after a burst), so the
 * aggregator is never idle waiting for the next one; it reports tasks per second from the
 * first send to the Ack of the last batch, and, given the aggregator's pid, the CPU the
 * aggregator used in that time (utime + stime of /proc/PID/stat, all its threads).
 *
 * Traces are TASKS_PER_TRACE tasks each (a root and its children, parents set), with fresh
 * trace ids in every batch (nothing is a repeat); with -E each task also has one event, and
 * each child a message edge from its parent.
 *
 * Usage: cluster_graph -e ENDPOINT -S SERVER.pub -K AGENT.key -H HOST -q QUERY_ID
 *                      [-n BATCHES] [-b TASKS_PER_BATCH] [-t TASKS_PER_TRACE] [-i INFLIGHT]
 *                      [-E] [-P AGGREGATOR_PID]
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "base/zmq_dl.h"
#include "agent/wire.h"
#include "agent/wire_graph.h"
#include "graph/graph.h"

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* utime + stime of a process, in clock ticks (0 if unreadable) */
static uint64_t proc_ticks(long pid)
{
	char path[64], buf[2048], *p;
	unsigned long long ut = 0, st = 0;
	FILE *f;
	size_t n;

	if (pid <= 0)
		return 0;
	snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	p = strrchr(buf, ')');
	if (!p ||
	    sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
		return 0;
	return ut + st;
}

/* The next message from the aggregator, decoded, within ms (NULL: none). */
static Weft__Envelope *recv_env(void *sock, int ms)
{
	zmq_pollitem_t it = { .socket = sock, .events = ZMQ_POLLIN };
	Weft__Envelope *e;
	char why[256];
	zmq_msg_t m;

	if (zmq_poll(&it, 1, ms) <= 0)
		return NULL;
	zmq_msg_init(&m);
	if (zmq_msg_recv(&m, sock, 0) < 0) {
		zmq_msg_close(&m);
		return NULL;
	}
	e = wire_decode(zmq_msg_data(&m), zmq_msg_size(&m), why, sizeof(why));
	zmq_msg_close(&m);
	if (!e)
		fprintf(stderr, "cluster_graph: a message that does not decode: %s\n", why);
	return e;
}

static void make_batch(struct graph *g, uint64_t batch, unsigned tasks, unsigned per_trace,
		       bool extras, int64_t t0)
{
	graph_clear(g);
	for (unsigned i = 0; i < tasks; i++) {
		uint64_t trace = batch * tasks + i / per_trace + 1;
		unsigned k = i % per_trace;
		struct graph_task t = { .trace = { 0xbe5c000000000000ull, trace },
					.id = k + 1,
					.parent = k ? 1 : 0,
					.service = k ? "backend" : "frontend",
					.name = k ? "query" : "GET /",
					.host = "",
					.pid = 1000 + k % 4,
					.tid = 2000 + k,
					.start = t0 + (int64_t)(trace * 1000 + k * 10),
					.end = t0 +
					       (int64_t)(trace * 1000 + k * 10 + (k ? 50 : 900)),
					.status = GRAPH_STATUS_OK,
					.source = GRAPH_SRC_WEFT,
					.attrs = "{}" };

		graph_add_task(g, &t);
		if (!extras)
			continue;
		{
			struct graph_event e = { .trace = t.trace,
						 .task = t.id,
						 .time = t.start + 5,
						 .name = "mark",
						 .source = GRAPH_SRC_WEFT,
						 .attrs = "{}" };

			graph_add_event(g, &e);
		}
		if (k) {
			struct graph_edge d = { .trace = t.trace,
						.kind = GRAPH_EDGE_MESSAGE,
						.from_task = 1,
						.to_task = t.id,
						.source = GRAPH_SRC_WEFT };

			graph_add_edge(g, &d);
		}
	}
}

int main(int argc, char **argv)
{
	const char *ep = NULL, *spub_file = NULL, *key_file = NULL, *host = "bench";
	char spub[WIRE_KEY_LEN + 1], pub[WIRE_KEY_LEN + 1], sec[WIRE_KEY_LEN + 1], why[256];
	unsigned nbatches = 200, tasks = 10000, per_trace = 10, inflight = 8;
	uint64_t qid = 0, seq = 0, acked = 0, first_seq, t_start, t_end, tk0, tk1;
	long agg_pid = 0;
	bool extras = false;
	void *zctx, *sock;
	struct graph g;
	Weft__Envelope e, *in;
	Weft__Hello h;
	int c;

	while ((c = getopt(argc, argv, "e:S:K:H:q:n:b:t:i:EP:")) != -1) {
		switch (c) {
		case 'e':
			ep = optarg;
			break;
		case 'S':
			spub_file = optarg;
			break;
		case 'K':
			key_file = optarg;
			break;
		case 'H':
			host = optarg;
			break;
		case 'q':
			qid = strtoull(optarg, NULL, 10);
			break;
		case 'n':
			nbatches = (unsigned)strtoul(optarg, NULL, 10);
			break;
		case 'b':
			tasks = (unsigned)strtoul(optarg, NULL, 10);
			break;
		case 't':
			per_trace = (unsigned)strtoul(optarg, NULL, 10);
			break;
		case 'i':
			inflight = (unsigned)strtoul(optarg, NULL, 10);
			break;
		case 'E':
			extras = true;
			break;
		case 'P':
			agg_pid = strtol(optarg, NULL, 10);
			break;
		default:
			fprintf(stderr,
				"usage: cluster_graph -e ENDPOINT -S SERVER.pub -K AGENT.key -H HOST "
				"-q QUERY_ID [-n BATCHES] [-b TASKS] [-t PER_TRACE] [-i INFLIGHT] "
				"[-E] [-P PID]\n");
			return 2;
		}
	}
	if (!ep || !spub_file || !key_file || !qid || !nbatches || !tasks || !per_trace ||
	    !inflight) {
		fprintf(stderr, "cluster_graph: -e, -S, -K and -q are required (see the top of "
				"tools/bench/cluster_graph.c)\n");
		return 2;
	}
	if (wire_keyfile_read(spub_file, spub, NULL) || wire_keyfile_read(key_file, pub, sec)) {
		fprintf(stderr, "cluster_graph: cannot read the keys\n");
		return 1;
	}
	zctx = zmq_ctx_new();
	sock = wire_client_socket(zctx, ep, spub, pub, sec);
	if (!sock) {
		fprintf(stderr, "cluster_graph: %s: %s\n", ep, zmq_strerror(errno));
		return 1;
	}
	weft__hello__init(&h);
	h.role = (char *)"agent";
	h.host = (char *)host;
	h.version = (char *)"bench";
	h.instance = now_ns() | 1;
	weft__envelope__init(&e);
	e.version = WIRE_VERSION;
	e.seq = ++seq;
	e.body_case = WEFT__ENVELOPE__BODY_HELLO;
	e.hello = &h;
	wire_send(sock, NULL, 0, &e, false);
	for (in = NULL; !in || in->body_case != WEFT__ENVELOPE__BODY_WELCOME;) {
		wire_free(in);
		in = recv_env(sock, 10000);
		if (!in) {
			fprintf(stderr, "cluster_graph: no Welcome\n");
			return 1;
		}
	}
	wire_free(in);

	graph_init(&g);
	first_seq = seq + 1;
	t_start = now_ns();
	tk0 = proc_ticks(agg_pid);
	for (unsigned b = 0; b < nbatches || acked < seq;) {
		uint64_t done = acked >= first_seq ? acked : first_seq - 1;

		if (b < nbatches && seq - done < inflight) {
			struct wire_graph_meta m = { .query_id = qid, .window = 0, .host = host };
			void *body, *env;
			size_t len, elen;

			make_batch(&g, b, tasks, per_trace, extras, 1700000000000000000ll);
			if (wire_graph_pack(&m, &g, &body, &len, why, sizeof(why)) ||
			    wire_envelope_wrap(++seq, WEFT__ENVELOPE__BODY_GRAPH_BATCH, body, len,
					       &env, &elen)) {
				fprintf(stderr, "cluster_graph: cannot pack: %s\n", why);
				return 1;
			}
			if (wire_send_bytes(sock, NULL, 0, env, elen, false)) {
				fprintf(stderr, "cluster_graph: send failed\n");
				return 1;
			}
			free(body);
			free(env);
			b++;
			continue;
		}
		in = recv_env(sock, 30000);
		if (!in) {
			fprintf(stderr,
				"cluster_graph: no Ack for 30 s (acked %" PRIu64 " of %" PRIu64
				")\n",
				seq ? acked : 0, seq);
			return 1;
		}
		if (in->body_case == WEFT__ENVELOPE__BODY_ACK && in->ack->upto > acked)
			acked = in->ack->upto;
		wire_free(in);
	}
	t_end = now_ns();
	tk1 = proc_ticks(agg_pid);
	{
		double secs = (double)(t_end - t_start) / 1e9;
		double n = (double)nbatches * tasks;
		long hz = sysconf(_SC_CLK_TCK);

		printf("batches %u x %u tasks (%u per trace%s), %u in flight: %.2f s\n", nbatches,
		       tasks, per_trace, extras ? ", an event each, a message edge per child" : "",
		       inflight, secs);
		printf("tasks/s %.0f\n", n / secs);
		if (agg_pid > 0 && hz > 0 && tk1 > tk0) {
			double cpu = (double)(tk1 - tk0) / (double)hz;

			printf("aggregator CPU %.0f%% of one core (%.2f s)\n", 100.0 * cpu / secs,
			       cpu);
			/* what one core of the aggregator takes when it is the bottleneck */
			printf("tasks per aggregator CPU-second %.0f\n", n / cpu);
		}
	}
	graph_free(&g);
	zmq_close(sock);
	zmq_ctx_term(zctx);
	return 0;
}
