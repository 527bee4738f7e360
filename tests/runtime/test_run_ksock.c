// SPDX-License-Identifier: Apache-2.0
/*
 * End to end, kernel structs through BTF (CO-RE): the real `weft run -c 'wl_tcp N'` against
 * the real kernel (weft attached first, then the workload run, then weft interrupted).  wl_tcp (tests/workloads/wl_tcp.c) holds one TCP conversation on loopback
 * whose every send and receive is known: the client (a child of the workload) sends N
 * messages of known sizes, the server answers every second one.  Read through
 * cast(args.sk as struct sock) and cast(args.sk as struct tcp_sock) at tp:sock:sock_send_length
 * and tp:sock:sock_recv_length, and through curtask.real_parent.tgid, the tests assert:
 *   - per probe, local port, remote port, pid and parent: the exact number of sends and
 *     receives and their bytes, on the exact ports the workload reports, and the parent of
 *     each side (the client's is the workload, the workload's is this test, which ran it);
 *   - the stream sequence numbers: at each send tcp_sock.write_seq (after the send), at each
 *     receive tcp_sock.copied_seq (after the read) are equal message by message, advance by
 *     each message's size, and the receiving side sees the sender's 4-tuple mirrored: how
 *     kernel message edges are matched across hosts (4-tuple + sequence number), and
 *     graph/kmsg.c's matcher pairs every message with exactly the receive that read it;
 *   - a six-step chain to a char pointer, read by str(): the root's filesystem type;
 *   - compile once, run everywhere: compiled against another kernel's BTF (WEFT_BTF), a read
 *     of curtask.tgid is relocated by libbpf to this kernel's offset;
 *   - the graph source kernel:sockets over IPv6 (both ends on ::1) and v4-mapped IPv4 (an
 *     IPv6 server, an IPv4 client): exact traces of client -> message -> server, and the
 *     program it generates with and without IPv6 in the kernel's BTF.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <jansson.h>
#include "graph/kmsg.h"
#include "graph/store.h"
#include "run_util.h"
#include "tests/kedges_expect.h"
#include "tests/skip.h"

#define N_COUNT 100
#define N_SEQ 64

/* wl_tcp's sizes (tests/workloads/wl_tcp.c) */
static long msg_size(long i)
{
	return 1 + (i * 7919) % 3000;
}

static long reply_size(long i)
{
	return 5 + i % 7;
}

struct wl_ids {
	long pid, child, server_port, client_port;
	long family; /* mapped: the family of the server's connection */
};

/*
 * Runs `weft run --format json QUERY` and, once it has attached, the workload `wl_tcp n` (not
 * under -c, which traces only the command's own process: the client is its child); when the
 * workload has exited, every event is in the kernel's maps and ring buffer, and SIGINT ends
 * weft, which drains them into its last window.  Nothing here waits on time.
 */
static void run_traced_in(const char *query, long n, const char *mode, const char *store,
			  struct wr_proc *p, struct wl_ids *w)
{
	char num[32], line[256];
	char *argv[] = { (char *)wr_workload("wl_tcp"), num, (char *)mode, NULL };
	struct wr_proc wl;
	uint64_t end = wr_now_ms() + WR_TIMEOUT_MS;

	snprintf(num, sizeof(num), "%ld", n);
	if (store)
		assert_int_equal(
			wr_weft_start(p, "--format", "json", "-S", store, query, (char *)NULL), 0);
	else
		assert_int_equal(wr_weft_start(p, "--format", "json", query, (char *)NULL), 0);
	if (wr_wait_err(p, "attached", WR_TIMEOUT_MS) != 0) {
		wr_finish(p, 1000);
		wr_dump(p, "weft run");
		fail_msg("weft did not attach");
	}
	assert_int_equal(wr_start(&wl, argv), 0);
	wr_close_stdin(&wl);
	while (wr_pump(&wl, 20) && wr_now_ms() < end)
		wr_pump(p, 0); /* weft's rows must not fill its pipe meanwhile */
	if (wr_reap(&wl, end) != 0)
		wr_dump(&wl, "wl_tcp");
	assert_int_equal(wl.status, 0);
	if (!wr_cut_line(&wl.out, "wl_tcp pid ", line, sizeof(line)) ||
	    sscanf(line, "wl_tcp pid %ld child %ld server_port %ld client_port %ld", &w->pid,
		   &w->child, &w->server_port, &w->client_port) != 4)
		fail_msg("the workload did not report its pids and ports: %s", wl.out.p);
	assert_int_equal(w->pid, wl.pid);
	assert_true(w->server_port > 0 && w->client_port > 0 && w->server_port != w->client_port);
	w->family = 0;
	if (mode && strcmp(mode, "mapped") == 0) {
		const char *f = strstr(line, " family ");

		if (!f)
			fail_msg("wl_tcp mapped did not report its family: %s", line);
		w->family = atol(f + 8);
	}
	wr_free(&wl);
	kill(p->pid, SIGINT);
	if (wr_finish(p, WR_TIMEOUT_MS) != 0) {
		wr_dump(p, "weft run");
		fail_msg("weft run failed");
	}
}

static void run_traced(const char *query, long n, struct wr_proc *p, struct wl_ids *w)
{
	run_traced_in(query, n, NULL, NULL, p, w);
}

static bool is_send(const struct wj *row)
{
	const char *pr = wj_str(wj_get(row, "probe"));

	if (!pr)
		fail_msg("a row without its probe");
	if (strcmp(pr, "tracepoint:sock:sock_send_length") == 0)
		return true;
	if (strcmp(pr, "tracepoint:sock:sock_recv_length") != 0)
		fail_msg("a row of an unexpected probe %s", pr);
	return false;
}

#define SOCK "cast(args.sk as struct sock).__sk_common"

/*
 * Per (probe, local port, remote port, pid, parent): exactly the sends and receives the
 * workload made, with their bytes, and no other row.
 */
static void test_ports_parent_counts(void **state)
{
	long long want_msg = 0, want_reply = 0;
	int seen = 0;
	struct wl_ids w;
	struct wr_proc p;
	struct wr_json j;

	(void)state;
	for (long i = 0; i < N_COUNT; i++) {
		want_msg += msg_size(i);
		if (i % 2 == 1)
			want_reply += reply_size(i);
	}
	run_traced("from tp:sock:sock_send_length, tp:sock:sock_recv_length "
		   "where comm = 'wl_tcp' and args.family = 2 "
		   "group by probe, " SOCK ".skc_num as lport, "
		   "ntohs(" SOCK ".skc_dport) as rport, pid, "
		   "curtask.real_parent.tgid as ppid "
		   "select count() as n, sum(args.ret) as bytes",
		   N_COUNT, &p, &w);
	wr_json_lines(&p.out, &j);
	assert_int_equal(wr_check_windows(&j), 1);
	for (size_t i = 0; i < j.n; i++) {
		if (!wr_is_type(j.v[i], "window"))
			continue;
		for (size_t r = 0; r < wr_nrows(j.v[i]); r++) {
			const struct wj *row = wr_row(j.v[i], r);
			bool send = is_send(row);
			long long lport = wj_int_of(row, "lport"), rport = wj_int_of(row, "rport");
			long long pid = wj_int_of(row, "pid"), ppid = wj_int_of(row, "ppid");
			long long n = wj_int_of(row, "n"), bytes = wj_int_of(row, "bytes");
			bool client = pid == w.child;

			if (client) {
				assert_int_equal(lport, w.client_port);
				assert_int_equal(rport, w.server_port);
				assert_int_equal(ppid,
						 w.pid); /* the client's parent: the workload */
			} else {
				assert_int_equal(pid, w.pid);
				assert_int_equal(lport, w.server_port);
				assert_int_equal(rport, w.client_port);
				assert_int_equal(ppid, getpid()); /* this test ran it */
			}
			if (client == send) { /* the messages: client sends, server receives */
				assert_int_equal(n, N_COUNT);
				assert_int_equal(bytes, want_msg);
			} else { /* the replies */
				assert_int_equal(n, N_COUNT / 2);
				assert_int_equal(bytes, want_reply);
			}
			seen |= 1 << (client * 2 + send);
		}
	}
	assert_int_equal(seen, 15); /* each of the four (side, direction) rows, once */
	wr_json_free(&j);
	wr_free(&p);
}

struct ev {
	long long pid, len, wseq, cseq, lport, rport, laddr, raddr;
	bool send;
};

/* The events of one side and direction, in the order they happened (one ring buffer: the
 * records of one process keep their order). */
static int events_of(const struct wr_json *j, long long pid, bool send, struct ev *out, int max)
{
	int n = 0;

	for (size_t i = 0; i < j->n; i++) {
		const struct wj *row = j->v[i];
		struct ev e;

		if (!wr_is_type(row, "row"))
			continue;
		e.pid = wj_int_of(row, "pid");
		e.send = is_send(row);
		if (e.pid != pid || e.send != send)
			continue;
		e.len = wj_int_of(row, "len");
		e.wseq = wj_int_of(row, "wseq");
		e.cseq = wj_int_of(row, "cseq");
		e.lport = wj_int_of(row, "lport");
		e.rport = wj_int_of(row, "rport");
		e.laddr = wj_int_of(row, "laddr");
		e.raddr = wj_int_of(row, "raddr");
		if (n == max)
			fail_msg("more than %d events of pid %lld", max, pid);
		out[n++] = e;
	}
	return n;
}

/*
 * One direction of the stream: the sender's write_seq after each send equals the
 * receiver's copied_seq after the matching receive, both advance by the message's size, and
 * the receiver sees the sender's 4-tuple mirrored.
 */
static void check_direction(const struct ev *snd, int ns, const struct ev *rcv, int nr, int want,
			    long (*size)(long), int stride)
{
	assert_int_equal(ns, want);
	assert_int_equal(nr, want);
	for (int i = 0; i < want; i++) {
		long k = (long)i * stride + (stride - 1); /* the workload's message index */

		assert_int_equal(snd[i].len, size(k));
		assert_int_equal(rcv[i].len, size(k));
		assert_int_equal(snd[i].wseq, rcv[i].cseq);
		if (i > 0) {
			assert_int_equal((uint32_t)(snd[i].wseq - snd[i - 1].wseq), size(k));
			assert_int_equal((uint32_t)(rcv[i].cseq - rcv[i - 1].cseq), size(k));
		}
		assert_int_equal(snd[i].lport, rcv[i].rport);
		assert_int_equal(snd[i].rport, rcv[i].lport);
		assert_int_equal(snd[i].laddr, rcv[i].raddr);
		assert_int_equal(snd[i].raddr, rcv[i].laddr);
		assert_int_equal(snd[i].laddr, 0x7f000001); /* 127.0.0.1, in host order */
	}
}

static struct kmsg_io kmsg_io_of(const struct ev *e)
{
	return (struct kmsg_io){ .laddr = (uint32_t)e->laddr,
				 .raddr = (uint32_t)e->raddr,
				 .lport = (uint16_t)e->lport,
				 .rport = (uint16_t)e->rport,
				 .seq_end = (uint32_t)(e->send ? e->wseq : e->cseq),
				 .len = (uint32_t)e->len };
}

/*
 * The kernel message edges graph/kmsg.c makes of these events: every message matched with
 * exactly the receive that read it, and nothing else (sends: the client's then the server's;
 * receives: the server's then the client's).
 */
static void check_kmsg(const struct ev *cs, const struct ev *ss, const struct ev *sr,
		       const struct ev *cr)
{
	struct kmsg_io snd[N_SEQ + N_SEQ / 2], rcv[N_SEQ + N_SEQ / 2];
	struct kmsg_match *m;
	size_t n;

	for (int i = 0; i < N_SEQ; i++) {
		snd[i] = kmsg_io_of(&cs[i]);
		rcv[i] = kmsg_io_of(&sr[i]);
	}
	for (int i = 0; i < N_SEQ / 2; i++) {
		snd[N_SEQ + i] = kmsg_io_of(&ss[i]);
		rcv[N_SEQ + i] = kmsg_io_of(&cr[i]);
	}
	assert_int_equal(kmsg_match(snd, N_SEQ + N_SEQ / 2, rcv, N_SEQ + N_SEQ / 2, &m, &n), 0);
	assert_int_equal(n, N_SEQ + N_SEQ / 2);
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(m[i].send, i);
		assert_int_equal(m[i].recv, i);
		assert_int_equal(m[i].bytes, snd[i].len);
	}
	free(m);
}

static void test_stream_sequence_numbers(void **state)
{
	static struct ev cs[N_SEQ + 1], cr[N_SEQ + 1], ss[N_SEQ + 1], sr[N_SEQ + 1];
	struct wl_ids w;
	struct wr_proc p;
	struct wr_json j;

	(void)state;
	run_traced("from tp:sock:sock_send_length, tp:sock:sock_recv_length "
		   "where comm = 'wl_tcp' and args.family = 2 "
		   "select probe, pid, args.ret as len, "
		   "cast(args.sk as struct tcp_sock).write_seq as wseq, "
		   "cast(args.sk as struct tcp_sock).copied_seq as cseq, " SOCK
		   ".skc_num as lport, ntohs(" SOCK ".skc_dport) as rport, "
		   "ntohl(" SOCK ".skc_rcv_saddr) as laddr, ntohl(" SOCK ".skc_daddr) as raddr",
		   N_SEQ, &p, &w);
	wr_json_lines(&p.out, &j);
	assert_true(j.n > 0 && wr_is_type(j.v[j.n - 1], "end"));
	assert_int_equal(wj_int_of(wj_get(j.v[j.n - 1], "lost"), "ringbuf_full"), 0);
	/* client -> server: every message; server -> client: a reply after every odd one */
	check_direction(cs, events_of(&j, w.child, true, cs, N_SEQ + 1), sr,
			events_of(&j, w.pid, false, sr, N_SEQ + 1), N_SEQ, msg_size, 1);
	check_direction(ss, events_of(&j, w.pid, true, ss, N_SEQ + 1), cr,
			events_of(&j, w.child, false, cr, N_SEQ + 1), N_SEQ / 2, reply_size, 2);
	assert_int_equal(cs[0].lport, w.client_port);
	assert_int_equal(cs[0].rport, w.server_port);
	check_kmsg(cs, ss, sr, cr);
	wr_json_free(&j);
	wr_free(&p);
}

/*
 * kernel:sockets over IPv6 and v4-mapped IPv4 (docs/graphs.md, "Kernel edges"): the graph
 * query `from kernel:sockets where comm = 'wl_tcp' graph` over `wl_tcp N v6` (both ends on
 * ::1) and `wl_tcp N mapped` (the server's sockets IPv6 with ::ffff:127.0.0.1, the client's
 * IPv4) stores exactly N / 2 traces of the workload, each the client's exchange (two sends,
 * the reply's receive: "request [::1]:PORT", or "request 127.0.0.1:PORT" for the IPv4
 * client) with a message edge to the server's ("serve :PORT").  In the mapped case the match
 * is made only because graph/kmsg.c takes v4-mapped addresses as IPv4 (the server's records
 * are family 10, the client's 2): without that every server task roots a trace of its own.
 * The server's kernel.recv carries the addresses as the client's would: "::1" text for v6,
 * the number 0x7f000001 (127.0.0.1) for mapped.
 */
static void check_family(const char *mode)
{
	char dir[] = "/tmp/weft-test-ksock6-XXXXXX", store[PATH_MAX];
	char want[64], serve[32];
	struct graph_trace_row *rows;
	bool v6 = strcmp(mode, "v6") == 0;
	struct graph_store *s;
	struct wl_ids w;
	struct wr_proc p;
	long mine = 0;
	ssize_t n;

	assert_non_null(mkdtemp(dir));
	snprintf(store, sizeof(store), "%s/k.db", dir);
	/* args.F in the query's own filter: a raw tracepoint's arguments (the socket's pointer as
	 * a number, ret) mean what the classic tracepoint's fields do, or nothing is recorded */
	run_traced_in("from kernel:sockets where comm = 'wl_tcp' and args.sk != 0 and args.ret > 0 "
		      "graph",
		      N_COUNT, mode, store, &p, &w);
	if (!v6)
		assert_int_equal(w.family, 10); /* the server's connection is an IPv6 socket */
	snprintf(want, sizeof(want), v6 ? "request [::1]:%ld" : "request 127.0.0.1:%ld",
		 w.server_port);
	snprintf(serve, sizeof(serve), "serve :%ld", w.server_port);
	s = ke_store_list(store, &rows, &n);
	for (ssize_t i = 0; i < n; i++) {
		const struct graph_task *cl = NULL, *sv = NULL;
		json_t *o, *a;
		struct graph g;
		char hex[33];

		ke_store_load(s, &rows[i], &g, hex);
		for (size_t k = 0; k < g.ntasks; k++) {
			if (g.tasks[k].pid == w.child)
				cl = &g.tasks[k];
			if (g.tasks[k].pid == w.pid)
				sv = &g.tasks[k];
		}
		if (!cl && !sv) { /* another wl_tcp of the machine */
			graph_free(&g);
			continue;
		}
		if (!cl || !sv)
			fail_msg("trace %s: a %s task alone", hex, cl ? "client" : "server");
		assert_int_equal(g.ntasks, 2);
		assert_string_equal(cl->name, want);
		assert_int_equal(cl->parent, 0);
		assert_string_equal(sv->name, serve);
		assert_int_equal(g.nedges, 1);
		assert_int_equal(g.edges[0].kind, GRAPH_EDGE_MESSAGE);
		assert_int_equal(g.edges[0].from_task, cl->id);
		assert_int_equal(g.edges[0].to_task, sv->id);
		o = json_loads(sv->attrs, 0, NULL);
		a = json_array_get(json_object_get(o, "kernel.recv"), 0);
		if (v6)
			assert_string_equal(json_string_value(a), "::1");
		else
			assert_int_equal(json_integer_value(a), 0x7f000001);
		json_decref(o);
		mine++;
		graph_free(&g);
	}
	free(rows);
	graph_store_close(s);
	assert_int_equal(mine, N_COUNT / 2);
	wr_free(&p);
	assert_int_equal(wr_rm_rf(dir), 0);
}

static void test_kernel_sockets_ipv6(void **state)
{
	(void)state;
	check_family("v6");
}

static void test_kernel_sockets_v4mapped(void **state)
{
	(void)state;
	check_family("mapped");
}

/* The same exact traces from the classic tracepoints (WEFT_RAW_TP=0), as a kernel whose
 * tracepoints' arguments weft does not know gets them. */
static void test_kernel_sockets_classic(void **state)
{
	(void)state;
	assert_int_equal(setenv("WEFT_RAW_TP", "0", 1), 0);
	check_family("v6");
	assert_int_equal(unsetenv("WEFT_RAW_TP"), 0);
}

/*
 * The BTF of a made-up kernel without IPv6 (no CONFIG_IPV6): sock_common has its IPv4
 * members only, tcp_sock its sequence numbers.  With raw5, it also has the raw tracepoints'
 * types of sock_send_length and sock_recv_length as Linux 6.3 had them: five arguments
 * (sk, family, protocol, ret, flags), the record's fields.
 */
static void btf_without_ipv6(const char *path, bool raw5)
{
	struct btf *b = btf__new_empty();
	const void *raw;
	__u32 sz;
	FILE *f;
	int u16, u32;

	assert_non_null(b);
	u32 = btf__add_int(b, "unsigned int", 4, 0);
	u16 = btf__add_int(b, "short unsigned int", 2, 0);
	assert_true(u32 > 0 && u16 > 0);
	assert_true(btf__add_struct(b, "sock_common", 12) > 0);
	assert_int_equal(btf__add_field(b, "skc_daddr", u32, 0, 0), 0);
	assert_int_equal(btf__add_field(b, "skc_rcv_saddr", u32, 32, 0), 0);
	assert_int_equal(btf__add_field(b, "skc_dport", u16, 64, 0), 0);
	assert_int_equal(btf__add_field(b, "skc_num", u16, 80, 0), 0);
	assert_true(btf__add_struct(b, "tcp_sock", 8) > 0);
	assert_int_equal(btf__add_field(b, "write_seq", u32, 0, 0), 0);
	assert_int_equal(btf__add_field(b, "copied_seq", u32, 32, 0), 0);
	for (int i = 0; raw5 && i < 2; i++) {
		int in = btf__add_int(b, "int", 4, BTF_INT_SIGNED),
		    sk = btf__add_struct(b, "sock", 0);
		int psk = btf__add_ptr(b, sk), pv = btf__add_ptr(b, 0), fp;

		assert_true(in > 0 && sk > 0 && psk > 0 && pv > 0);
		fp = btf__add_func_proto(b, 0);
		assert_true(fp > 0);
		assert_int_equal(btf__add_func_param(b, "__data", pv), 0);
		assert_int_equal(btf__add_func_param(b, "sk", psk), 0);
		assert_int_equal(btf__add_func_param(b, "family", u16), 0);
		assert_int_equal(btf__add_func_param(b, "protocol", u16), 0);
		assert_int_equal(btf__add_func_param(b, "ret", in), 0);
		assert_int_equal(btf__add_func_param(b, "flags", in), 0);
		assert_true(btf__add_typedef(b,
					     i ? "btf_trace_sock_recv_length" :
						 "btf_trace_sock_send_length",
					     btf__add_ptr(b, fp)) > 0);
	}
	raw = btf__raw_data(b, &sz);
	assert_non_null(raw);
	f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(raw, 1, sz, f), sz);
	assert_int_equal(fclose(f), 0);
	btf__free(b);
}

/* `weft explain --dump=codegen Q`: the BPF C of the query, on stdout. */
static int explain_codegen(struct wr_proc *p, const char *q)
{
	char *argv[] = { getenv("WEFT_BIN"), (char *)"explain", (char *)"--dump=codegen", (char *)q,
			 NULL };
	int rc = wr_start(p, argv);

	return rc ? rc : wr_finish(p, WR_TIMEOUT_MS);
}

/* `weft explain --dump=codegen` of q with WEFT_BTF=btf (NULL: this kernel's) and
 * WEFT_RAW_TP=raw (NULL: unset); the output is in p. */
static void codegen_with(struct wr_proc *p, const char *q, const char *btf, const char *raw)
{
	int rc;

	assert_int_equal(btf ? setenv("WEFT_BTF", btf, 1) : 0, 0);
	assert_int_equal(raw ? setenv("WEFT_RAW_TP", raw, 1) : 0, 0);
	rc = explain_codegen(p, q);
	assert_int_equal(unsetenv("WEFT_BTF"), 0);
	assert_int_equal(unsetenv("WEFT_RAW_TP"), 0);
	if (rc != 0)
		wr_dump(p, "weft explain");
	assert_int_equal(rc, 0);
}

/*
 * What kernel:sockets generates: on this kernel (IPv6 in its BTF) IPv4 and IPv6 sockets, the
 * 16-byte reads under the family test; on a kernel without IPv6 (WEFT_BTF) the IPv4-only
 * program, which names no IPv6 member.  Raw tracepoints (tp_btf, one program each) where the
 * BTF says what their arguments are: on this kernel (sk, ret, flags, as later kernels pass
 * them) the family and protocol loaded from the socket as the tracepoint reads them, and the
 * socket's members loaded through the typed pointer; with Linux 6.3's five arguments (a
 * made-up BTF) every field an argument; without the tracepoints' types, or with
 * WEFT_RAW_TP=0, the classic tracepoint, its record and helper reads.
 */
static void test_kernel_sockets_codegen(void **state)
{
	char dir[] = "/tmp/weft-test-ksockcg-XXXXXX", path[PATH_MAX], path5[PATH_MAX];
	const char *q = "from kernel:sockets graph";
	struct wr_proc p;

	(void)state;
	codegen_with(&p, q, NULL, NULL);
	assert_non_null(strstr(p.out.p, "SEC(\"tp_btf/sock_send_length\")"));
	assert_non_null(strstr(p.out.p, "SEC(\"tp_btf/sock_recv_length\")"));
	assert_null(strstr(p.out.p, "SEC(\"tracepoint\")"));
	assert_null(strstr(p.out.p, "bpf_get_attach_cookie"));
	assert_non_null(strstr(p.out.p, "(_kfam != 2 && _kfam != 10)"));
	assert_non_null(strstr(p.out.p, "WEFT_RAW_ARG(ctx, 0))->skc_family"));
	assert_non_null(strstr(p.out.p, "WEFT_RAW_ARG(ctx, 0))->sk_protocol"));
	/* the socket's members loaded through the typed pointer, not read by a helper */
	assert_non_null(strstr(p.out.p, "_la = __builtin_preserve_access_index("));
	assert_null(strstr(p.out.p, "bpf_probe_read_kernel(&_la"));
	assert_non_null(strstr(p.out.p, "((__s32)WEFT_RAW_ARG(ctx, 1)) <= 0")); /* ret */
	assert_non_null(strstr(p.out.p, "if (_kfam == 2) {"));
	/* the kind from the constant cookie, not read back from the record */
	assert_non_null(strstr(p.out.p, "switch ((__u32)0ULL) {"));
	assert_null(strstr(p.out.p, "g->kind =="));
	assert_non_null(strstr(p.out.p, "->skc_v6_daddr"));
	wr_free(&p);
	codegen_with(&p, q, NULL, "0");
	assert_null(strstr(p.out.p, "tp_btf/"));
	assert_non_null(strstr(p.out.p, "SEC(\"tracepoint\")"));
	assert_non_null(strstr(p.out.p, "__u16 _kfam = WEFT_TP(ctx, 16, __u16);"));
	assert_non_null(strstr(p.out.p, "bpf_probe_read_kernel(&_la"));
	assert_non_null(strstr(p.out.p, "(_kfam != 2 && _kfam != 10)"));
	wr_free(&p);
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/vmlinux.btf", dir);
	btf_without_ipv6(path, false);
	codegen_with(&p, q, path, NULL);
	assert_null(strstr(p.out.p, "skc_v6"));
	assert_null(strstr(p.out.p, "!= 10"));
	assert_null(strstr(p.out.p, "if (_kfam =="));
	assert_null(strstr(p.out.p, "tp_btf/")); /* no btf_trace_ types: classic */
	assert_non_null(strstr(p.out.p, "_kfam = WEFT_TP(")); /* 2: the agent's IPv4 */
	assert_non_null(strstr(p.out.p, "->skc_daddr"));
	wr_free(&p);
	snprintf(path5, sizeof(path5), "%s/vmlinux5.btf", dir);
	btf_without_ipv6(path5, true);
	codegen_with(&p, q, path5, NULL);
	assert_non_null(strstr(p.out.p, "SEC(\"tp_btf/sock_recv_length\")"));
	assert_non_null(strstr(p.out.p, "__u16 _kfam = ((__u16)WEFT_RAW_ARG(ctx, 1));"));
	assert_non_null(strstr(p.out.p, "((__u16)WEFT_RAW_ARG(ctx, 2)) != 6"));
	assert_non_null(strstr(p.out.p, "((__s32)WEFT_RAW_ARG(ctx, 3)) <= 0"));
	assert_non_null(strstr(p.out.p, "(((__s32)WEFT_RAW_ARG(ctx, 4)) & 2)"));
	assert_null(strstr(p.out.p, "sk_protocol"));
	wr_free(&p);
	assert_int_equal(wr_rm_rf(dir), 0);
}

/*
 * A query compiled where the tracepoints pass five arguments (a made-up Linux 6.3 BTF), run
 * on this kernel, whose pass three: refused before anything loads, saying both counts and
 * what to do (a program compiled for three arguments on a five-argument kernel would read
 * other values at the same positions, and the verifier would accept it).
 */
static void test_kernel_sockets_raw_mismatch(void **state)
{
	char dir[] = "/tmp/weft-test-ksockmm-XXXXXX", path[PATH_MAX];
	char *argv[] = { getenv("WEFT_BIN"),
			 (char *)"run",
			 (char *)"-c",
			 (char *)"true",
			 (char *)"-S",
			 path,
			 (char *)"from kernel:sockets graph",
			 NULL };
	struct wr_proc p;
	int rc;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/vmlinux5.btf", dir);
	btf_without_ipv6(path, true);
	assert_int_equal(setenv("WEFT_BTF", path, 1), 0);
	snprintf(path, sizeof(path), "%s/k.db", dir);
	rc = wr_start(&p, argv);
	assert_int_equal(unsetenv("WEFT_BTF"), 0);
	assert_int_equal(rc, 0);
	rc = wr_finish(&p, WR_TIMEOUT_MS);
	if (rc == 0 || !strstr(p.err.p, "passes 5 arguments; this kernel's passes 3") ||
	    !strstr(p.err.p, "WEFT_RAW_TP=0"))
		wr_dump(&p, "weft run");
	assert_int_not_equal(rc, 0);
	assert_non_null(strstr(p.err.p, "tracepoint sock_send_length passes 5 arguments; this "
					"kernel's passes 3"));
	assert_non_null(strstr(p.err.p, "WEFT_RAW_TP=0"));
	assert_null(strstr(p.err.p, "verifier"));
	wr_free(&p);
	assert_int_equal(wr_rm_rf(dir), 0);
}

/*
 * Compile once, run everywhere: a query compiled against the BTF of a made-up kernel whose
 * task_struct has tgid at offset 0 (WEFT_BTF) reads the right tgid on this kernel, where it
 * lies elsewhere: libbpf relocated the offset at load.  wl_syscalls makes exactly 1000
 * getppid() calls and prints its pid first.
 */
static void test_core_relocates(void **state)
{
	char dir[] = "/tmp/weft-test-core-XXXXXX", path[PATH_MAX], cmd[PATH_MAX + 32];
	const struct wj *w, *row;
	struct wr_proc p;
	struct wr_json j;
	int rc;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/vmlinux.btf", dir);
	wr_fake_btf_write(path);
	assert_int_equal(setenv("WEFT_BTF", path, 1), 0);
	snprintf(cmd, sizeof(cmd), "'%s' 1000 1", wr_workload("wl_syscalls"));
	rc = wr_weft_run(&p, "--format", "json", "-c", cmd,
			 "from syscall:getppid group by curtask.tgid as tgid select count() as n");
	assert_int_equal(unsetenv("WEFT_BTF"), 0);
	if (rc != 0)
		wr_dump(&p, "weft run");
	assert_int_equal(rc, 0);
	wr_json_lines(&p.out, &j);
	w = wr_one_window(&j);
	assert_int_equal(wr_nrows(w), 1);
	row = wr_row(w, 0);
	assert_int_equal(wj_int_of(row, "tgid"), atol(p.out.p)); /* the workload's first line */
	assert_int_equal(wj_int_of(row, "n"), 1000);
	wr_json_free(&j);
	wr_free(&p);
	assert_int_equal(wr_rm_rf(dir), 0);
}

/* The filesystem type of "/" in this mount namespace, as /proc/self/mounts lists it (the
 * last mount on "/" is the one seen). */
static void root_fstype(char *out, size_t sz)
{
	FILE *f = fopen("/proc/self/mounts", "r");
	char dev[256], dir[256], type[64];

	assert_non_null(f);
	out[0] = 0;
	while (fscanf(f, "%255s %255s %63s %*[^\n]", dev, dir, type) == 3)
		if (strcmp(dir, "/") == 0)
			snprintf(out, sz, "%s", type);
	fclose(f);
	assert_true(out[0] != 0);
}

/*
 * A chain of six steps from curtask through pointers and an embedded struct to a char
 * pointer, read by str() from kernel memory: every one of wl_syscalls' 1000 getppid() calls
 * sees the filesystem type of its root, which is this test's (same mount namespace).
 */
static void test_str_through_chain(void **state)
{
	char cmd[PATH_MAX + 32], want[64];
	const struct wj *w, *row;
	struct wr_proc p;
	struct wr_json j;
	int rc;

	(void)state;
	root_fstype(want, sizeof(want));
	snprintf(cmd, sizeof(cmd), "'%s' 1000 1", wr_workload("wl_syscalls"));
	rc = wr_weft_run(&p, "--format", "json", "-c", cmd,
			 "from syscall:getppid group by "
			 "str(curtask.fs.root.mnt.mnt_sb.s_type.name) as fstype "
			 "select count() as n");
	if (rc != 0)
		wr_dump(&p, "weft run");
	assert_int_equal(rc, 0);
	wr_json_lines(&p.out, &j);
	w = wr_one_window(&j);
	assert_int_equal(wr_nrows(w), 1);
	row = wr_row(w, 0);
	assert_string_equal(wj_str(wj_get(row, "fstype")), want);
	assert_int_equal(wj_int_of(row, "n"), 1000);
	wr_json_free(&j);
	wr_free(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ports_parent_counts),
		cmocka_unit_test(test_stream_sequence_numbers),
		cmocka_unit_test(test_kernel_sockets_ipv6),
		cmocka_unit_test(test_kernel_sockets_v4mapped),
		cmocka_unit_test(test_kernel_sockets_classic),
		cmocka_unit_test(test_kernel_sockets_codegen),
		cmocka_unit_test(test_kernel_sockets_raw_mismatch),
		cmocka_unit_test(test_core_relocates),
		cmocka_unit_test(test_str_through_chain),
	};

	if (!wr_ready())
		return WT_SKIP;
	if (access("/sys/kernel/btf/vmlinux", R_OK) != 0) {
		fprintf(stderr, "skipped: the kernel has no BTF (/sys/kernel/btf/vmlinux)\n");
		return WT_SKIP;
	}
	return wt_status(cmocka_run_group_tests(tests, NULL, NULL));
}
