// SPDX-License-Identifier: Apache-2.0
/*
 * `weft vm sync`: a guest's clock against its host's, live, through a cluster (docs/vm.md
 * "Live: guest and host agents").  Two ordinary aggregating queries, compiled here as
 * `weft submit` compiles: the host side over the synchronisation hypercall (kvm:kvm_hypercall
 * with nr 0x77656674, its a0 the point's id) on the host's agents, the guest side over the
 * guest's USDT probe weft:vm_sync(id, before, after) on the guest's agent.  Each is limited
 * to its agents (Submit.only_hosts); the guest side names the host side's query
 * (Submit.vm_sync_host), and the aggregator joins the two sides' windows by id and keeps the
 * offset and its bound (aggregator/aggd_vm.c).  This command only submits, follows both
 * queries and prints the state the aggregator attaches to each of their windows.
 *
 * Limits: one guest per run (its ids must not collide with another guest's on the same
 * host: --vm-pid narrows the host side to one VMM); the guest's helper must fire weft:vm_sync
 * for each hypercall it made (include/weft/vmsync.h has the probe and the contract).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>
#include "agent/agent.h"
#include "aggregator/aggd.h"
#include "base/units.h"
#include "compiler/compiler.h"
#include "compiler/plan.h"
#include "tools/weft.h"
#include "tools/weft_cluster.h"
#include "tools/weft_vm.h"

/* clang-format off */
static const char sync_help[] =
	"Usage: weft vm sync --to ENDPOINT --server-key FILE --key FILE\n"
	"                    --host-agent NAME [--host-agent NAME ...] --guest-agent NAME\n"
	"                    --guest-binary PATH [OPTIONS]\n"
	"\n"
	"Relates a guest's clock to its host's, live, through a cluster: the guest's agent\n"
	"traces the guest's synchronisation points, the host's agents trace the hypercalls\n"
	"those points make, and the aggregator joins the two by id and keeps the offset\n"
	"(host = guest + offset) with an error bound.  After each window of either side,\n"
	"one line (or one JSON object) says where the offset stands.\n"
	"\n"
	"A point: the guest reads its clock (before), makes the hypercall nr 0x77656674\n"
	"(\"weft\") with a0 = id, reads its clock again (after), and fires the USDT probe\n"
	"weft:vm_sync(id, before, after) (include/weft/vmsync.h).  The host sees the\n"
	"hypercall as kvm:kvm_hypercall at host time h, between the two readings, so the\n"
	"offset lies in [h - after, h - before].  The aggregator intersects the points'\n"
	"intervals; the offset is the middle and the bound half the width.  A point whose\n"
	"interval does not meet the intersection so far (the clocks drift, or the point is\n"
	"wrong) is refused and counted, never averaged in.  Until one point is seen on\n"
	"both sides the pair is \"unsynchronised\": no offset is given, never 0.\n"
	"\n"
	"Two queries are submitted, each only to its agents (`--print-queries` shows them):\n"
	"  host:  from tracepoint:kvm:kvm_hypercall where args.nr = 0x77656674\n"
	"         group by args.a0 as id select min(time) as host_ns, count() as n\n"
	"  guest: from usdt:PATH:weft:vm_sync\n"
	"         group by arg0 as id select min(arg1) as before, max(arg2) as after,\n"
	"         count() as n\n"
	"Times are each machine's CLOCK_MONOTONIC in ns (weft's `time`; the guest helper\n"
	"reads its own CLOCK_MONOTONIC).  Run it until the queries' `--for` ends or Ctrl-C,\n"
	"which cancels both and waits for their last windows (a second Ctrl-C leaves at\n"
	"once).\n"
	"\n"
	CLUSTER_OPTIONS_HELP
	"      --host-agent NAME  an agent of the host (its --host name); repeat for several\n"
	"      --guest-agent NAME the guest's agent (its --host name)\n"
	"      --guest-binary PATH  the program in the guest that fires weft:vm_sync (read\n"
	"                         here to compile the guest query: the same file as in\n"
	"                         the guest)\n"
	"      --vm-pid PID       count only hypercalls of the VMM with this pid on the host\n"
	"                         (several VMs on one host: their ids could collide)\n"
	"      --hypercall-source PROBE  the host side's probe instead of\n"
	"                         tracepoint:kvm:kvm_hypercall: a USDT probe whose arg0 is\n"
	"                         the hypercall's nr and arg1 its a0.  For tests on machines\n"
	"                         without KVM (tests/workloads/wl_vmsync_fake.c fakes the\n"
	"                         hypercall this way); everything else is unchanged\n"
	"      --every D          window length (default 1s)\n"
	"      --for D            end both queries after D (default: until Ctrl-C)\n"
	"      --format FMT       text (default) or json: one object per window of either\n"
	"                         side: {\"type\":\"vm_sync\",\"side\",\"query_id\",\"window\",\n"
	"                         \"revision\",\"last\",\"sync\":{...}} (docs/vm.md)\n"
	"      --print-queries    print the two queries and exit (nothing is submitted)\n"
	"  -v, --verbose          show the compile cache and debug detail\n"
	"  -h, --help             this text\n"
	"\n"
	"Example:\n"
	"  weft vm sync --to tcp://agg:7470 --server-key agg.pub --key alice.key \\\n"
	"      --host-agent hv1 --guest-agent vm7 --guest-binary /usr/bin/vmsync-helper\n"
	"  host window 4: host = guest - 7000000123 ns, within +-412 ns (12 points; ...)\n"
	"\n"
	"Exit status: 0 both queries ended with the clocks synchronised, 1 the aggregator\n"
	"could not be reached or refused a query, 2 bad command line, 3 a query has errors,\n"
	"4 both ended unsynchronised (no point seen on both sides).\n";
/* clang-format on */

#define EXIT_UNSYNCED 4
enum {
	OPT_EVERY = VM_OPT_OWN,
	OPT_PRINT,
};

/* The probe of a USDT stand-in for the hypercall: arg0 nr, arg1 a0. */
bool vm_source_ok(const char *s)
{
	return strncmp(s, "usdt:", 5) == 0 && !strpbrk(s, " \t\n,()'\"");
}

static char *host_query(const char *source, int vm_pid, const char *every, const char *dur)
{
	char *q = NULL, pidw[64] = "";

	if (vm_pid > 0)
		snprintf(pidw, sizeof(pidw), " and pid = %d", vm_pid);
	if (!source) {
		if (asprintf(&q,
			     "from tracepoint:kvm:kvm_hypercall where args.nr = 0x77656674%s "
			     "group by args.a0 as id select min(time) as host_ns, count() as n "
			     "every %s%s%s",
			     pidw, every, dur ? " for " : "", dur ? dur : "") < 0)
			return NULL;
	} else if (asprintf(&q,
			    "from %s where arg0 = 0x77656674%s group by arg1 as id "
			    "select min(time) as host_ns, count() as n every %s%s%s",
			    source, pidw, every, dur ? " for " : "", dur ? dur : "") < 0) {
		return NULL;
	}
	return q;
}

static char *guest_query(const char *binary, const char *every, const char *dur)
{
	char *q = NULL;

	if (asprintf(&q,
		     "from usdt:%s:weft:vm_sync group by arg0 as id select min(arg1) as before, "
		     "max(arg2) as after, count() as n every %s%s%s",
		     binary, every, dur ? " for " : "", dur ? dur : "") < 0)
		return NULL;
	return q;
}

int vm_side_compile(struct vm_side *s, int verbose)
{
	struct compile_opts copts = { .sz = sizeof(copts), .verbose = verbose > 0 };
	char *buf = NULL;
	size_t len = 0;
	FILE *m;
	int rc;

	diag_list_init(&s->dl, s->text, s->what);
	rc = compiler_run(s->text, &copts, PASS_CLANG, &s->dl, &s->res);
	diag_print(&s->dl, stderr, isatty(2));
	if (rc) {
		if (!diag_has_errors(&s->dl))
			fprintf(stderr, "%s: the %s query: %s\n", s->who, s->what, strerror(-rc));
		return diag_has_errors(&s->dl) ? WEFT_EXIT_QUERY : WEFT_EXIT_FAIL;
	}
	m = open_memstream(&buf, &len);
	if (!m)
		return WEFT_EXIT_FAIL;
	rc = manifest_write(s->res.plan, m);
	if (fclose(m) != 0 || rc) {
		free(buf);
		fprintf(stderr, "%s: cannot write the %s query's manifest\n", s->who, s->what);
		return WEFT_EXIT_FAIL;
	}
	s->manifest = buf;
	s->manifest_len = len;
	return WEFT_EXIT_OK;
}

void vm_side_cancel(struct aggd_client *cl, uint64_t id)
{
	if (id)
		aggd_client_stop(cl, id); /* asked again after a reconnect until it took effect */
}

int vm_side_submit(struct aggd_client *cl, struct tool_cluster *tc, struct vm_side *s,
		   char **agents, size_t nagents, uint64_t pair_host)
{
	Weft__Envelope e, *reply = NULL;
	Weft__Submit sub;
	char why[256];
	int rc, status = WEFT_EXIT_OK;

	weft__submit__init(&sub);
	sub.query = s->text;
	sub.manifest.data = (uint8_t *)s->manifest;
	sub.manifest.len = s->manifest_len;
	sub.object.data = s->res.object;
	sub.object.len = s->res.object_sz;
	sub.has_follow = true;
	sub.follow = true;
	sub.n_only_hosts = nagents;
	sub.only_hosts = agents;
	if (pair_host) {
		sub.has_vm_sync_host = true;
		sub.vm_sync_host = pair_host;
	}
	weft__envelope__init(&e);
	e.body_case = WEFT__ENVELOPE__BODY_SUBMIT;
	e.submit = &sub;
	e.version = WIRE_VERSION;
	e.seq = 1;
	if (wire_validate(&e, why, sizeof(why))) {
		fprintf(stderr, "%s: the %s query cannot be sent: %s\n", s->who, s->what, why);
		return WEFT_EXIT_QUERY;
	}
	rc = aggd_client_send(cl, &e);
	if (rc == 0)
		rc = tool_cluster_reply_other(cl, tc->timeout_ms > 10000 ? tc->timeout_ms : 10000,
					      &reply, s->other, s->ctx);
	if (rc <= 0) {
		fprintf(stderr, "%s: no answer from %s to the %s query: %s\n", s->who, tc->to,
			s->what, rc ? strerror(-rc) : "timed out");
		status = WEFT_EXIT_FAIL;
	} else if (reply->body_case == WEFT__ENVELOPE__BODY_ERROR) {
		fprintf(stderr, "%s: %s: the %s query: %s\n", s->who, tc->to, s->what,
			reply->error->message);
		status = WEFT_EXIT_FAIL;
	} else if (reply->status_reply->n_queries != 1) {
		fprintf(stderr, "%s: %s answered without a query id\n", s->who, tc->to);
		status = WEFT_EXIT_FAIL;
	} else {
		const Weft__QueryStatus *qs = reply->status_reply->queries[0];

		s->id = qs->query_id;
		if (qs->n_only_hosts != nagents || (pair_host && !qs->vm_sync)) {
			/* an aggregator older than Submit.only_hosts would run it everywhere */
			fprintf(stderr,
				"%s: %s does not limit queries to agents or pair them "
				"(an older weft?): query %" PRIu64 " cancelled\n",
				s->who, tc->to, s->id);
			vm_side_cancel(cl, s->id);
			s->id = 0;
			wire_free(reply);
			return WEFT_EXIT_FAIL;
		}
		fprintf(stderr, "%s: %s query %" PRIu64 " sent to %zu agent%s", s->who, s->what,
			s->id, qs->n_hosts, qs->n_hosts == 1 ? "" : "s");
		for (size_t i = 0; i < qs->n_hosts; i++)
			fprintf(stderr, "%s%s", i ? ", " : " (", qs->hosts[i]);
		fprintf(stderr, "%s\n", qs->n_hosts ? ")" : " (it starts when they connect)");
	}
	wire_free(reply);
	return status;
}

static void print_state(const Weft__Result *r, const char *side, bool json)
{
	if (json) {
		printf("{\"type\":\"vm_sync\",\"side\":\"%s\",\"query_id\":%" PRIu64
		       ",\"window\":%" PRIu64 ",\"revision\":%" PRIu32 ",\"last\":%s,\"sync\":",
		       side, r->query_id, r->window, r->revision, r->last ? "true" : "false");
		aggd_vm_sync_json(r->vm_sync, stdout);
		fputs("}\n", stdout);
	} else {
		printf("%s window %" PRIu64 "%s: ", side, r->window, r->last ? " (last)" : "");
		aggd_vm_sync_text(r->vm_sync, stdout);
		if (r->revision)
			printf(" [revision %" PRIu32 "]", r->revision);
		fputc('\n', stdout);
	}
	fflush(stdout);
}

/* Follows both queries until both ended; the final state's synced into *synced. */
static int follow_pair(struct aggd_client *cl, struct tool_cluster *tc, struct vm_side *h,
		       struct vm_side *g, bool json, int sfd, bool *synced)
{
	int signals = 0;

	aggd_client_remember(cl, h->id);
	aggd_client_remember(cl, g->id);
	while (!(h->last && g->last)) {
		Weft__Envelope *m = NULL;
		struct signalfd_siginfo si;
		int rc;

		if (sfd >= 0 && read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
			if (++signals > 1) {
				fprintf(stderr, "weft vm sync: left before the last windows\n");
				return WEFT_EXIT_FAIL;
			}
			fprintf(stderr, "weft vm sync: cancelling both queries; waiting for their "
					"last windows (Ctrl-C again to leave now)\n");
			vm_side_cancel(cl, h->id);
			vm_side_cancel(cl, g->id);
		}
		rc = aggd_client_recv(cl, 200, &m);
		if (rc < 0) {
			fprintf(stderr, "weft vm sync: %s: %s\n", tc->to, strerror(-rc));
			return WEFT_EXIT_FAIL;
		}
		if (rc == 0)
			continue;
		if (m->body_case == WEFT__ENVELOPE__BODY_RESULT &&
		    (m->result->query_id == h->id || m->result->query_id == g->id)) {
			struct vm_side *s = m->result->query_id == h->id ? h : g;

			if (m->result->vm_sync) {
				print_state(m->result, s->what, json);
				*synced = m->result->vm_sync->has_synced &&
					  m->result->vm_sync->synced;
			}
			aggd_client_progress(cl, s->id, m->result->window + 1);
			if (m->result->last)
				s->last = true;
		} else if (m->body_case == WEFT__ENVELOPE__BODY_ERROR) {
			fprintf(stderr, "weft vm sync: %s\n", m->error->message);
			if (m->error->has_in_reply_to) {
				wire_free(m);
				return WEFT_EXIT_FAIL;
			}
		}
		wire_free(m);
	}
	return WEFT_EXIT_OK;
}

bool vm_duration_ok(const char *who, const char *opt, const char *arg)
{
	uint64_t ns;

	if (units_duration_parse(arg, UNITS_NS_PER_SEC, &ns) || ns < 1000000ULL ||
	    strpbrk(arg, " \t\n'\"")) {
		fprintf(stderr, "%s: %s takes a duration (1s, 500ms), not '%s'\n", who, opt, arg);
		return false;
	}
	return true;
}

int vm_pair_opt(struct vm_pair *o, int c, char *arg)
{
	char *end;
	long v;

	switch (c) {
	case VM_OPT_HOST_AGENT:
	case VM_OPT_GUEST_AGENT: {
		char **list = c == VM_OPT_HOST_AGENT ? o->hosts : o->guests;
		size_t *n = c == VM_OPT_HOST_AGENT ? &o->nhosts : &o->nguests;

		if (*n >= VM_MAX_AGENTS || !*arg || strchr(arg, '\n')) {
			fprintf(stderr, "%s: at most %d agents a side, each a host name\n", o->who,
				VM_MAX_AGENTS);
			return -1;
		}
		list[(*n)++] = arg;
		return 1;
	}
	case VM_OPT_GUEST_BINARY:
		o->binary = arg;
		return 1;
	case VM_OPT_VM_PID:
		errno = 0;
		v = strtol(arg, &end, 10);
		if (errno || *end || v <= 0 || v > 0x3fffffff) {
			fprintf(stderr, "%s: --vm-pid takes a pid, not '%s'\n", o->who, arg);
			return -1;
		}
		o->vm_pid = (int)v;
		return 1;
	case VM_OPT_SOURCE:
		if (!vm_source_ok(arg)) {
			fprintf(stderr,
				"%s: --hypercall-source takes a USDT probe (usdt:BIN:[PROVIDER:]NAME, "
				"arg0 the nr, arg1 the a0), not '%s'\n",
				o->who, arg);
			return -1;
		}
		o->source = arg;
		return 1;
	case VM_OPT_FOR:
		if (!vm_duration_ok(o->who, "--for", arg))
			return -1;
		o->dur = arg;
		return 1;
	case VM_OPT_FORMAT:
		if (strcmp(arg, "json") == 0) {
			o->json = true;
		} else if (strcmp(arg, "text") == 0) {
			o->json = false;
		} else {
			fprintf(stderr, "%s: --format takes text or json, not '%s'\n", o->who, arg);
			return -1;
		}
		return 1;
	default:
		return 0;
	}
}

int vm_pair_binary_check(const struct vm_pair *o)
{
	if (o->binary && *o->binary && !strpbrk(o->binary, " \t\n,()'\""))
		return 0;
	fprintf(stderr,
		"%s: --guest-binary PATH names the guest's program that fires weft:vm_sync (a "
		"path without blanks, commas, quotes or parentheses)\n",
		o->who);
	return -1;
}

int vm_pair_agents_check(const struct vm_pair *o)
{
	if (o->nhosts && o->nguests)
		return 0;
	fprintf(stderr,
		"%s: name the host's agents (--host-agent) and the guest's (--guest-agent)\n",
		o->who);
	return -1;
}

void vm_side_free(struct vm_side *s)
{
	free(s->text);
	free(s->manifest);
	compile_result_free(&s->res);
	diag_list_free(&s->dl);
}

int vm_sync_cmd(int argc, char **argv)
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
		{ "print-queries", no_argument, NULL, OPT_PRINT },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct tool_cluster tc = { 0 };
	struct vm_pair o = { .who = "weft vm sync" };
	const char *every = "1s";
	struct vm_side h = { .who = "weft vm sync", .what = "host" },
		       g = { .who = "weft vm sync", .what = "guest" };
	struct aggd_client *cl = NULL;
	bool print = false, synced = false;
	int c, rc, verbose = 0, status, sfd = -1;

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
		case OPT_EVERY:
			if (!vm_duration_ok("weft vm sync", "--every", optarg))
				return WEFT_EXIT_USAGE;
			every = optarg;
			break;
		case OPT_PRINT:
			print = true;
			break;
		case 'v':
			verbose++;
			break;
		case 'h':
			fputs(sync_help, stdout);
			return WEFT_EXIT_OK;
		default:
			fputs("weft vm sync: see `weft vm sync --help`\n", stderr);
			return WEFT_EXIT_USAGE;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "weft vm sync: unexpected argument '%s'\n", argv[optind]);
		return WEFT_EXIT_USAGE;
	}
	if (vm_pair_binary_check(&o))
		return WEFT_EXIT_USAGE;
	h.text = host_query(o.source, o.vm_pid, every, o.dur);
	g.text = guest_query(o.binary, every, o.dur);
	if (!h.text || !g.text) {
		status = WEFT_EXIT_FAIL;
		goto out;
	}
	if (print) {
		printf("host:  %s\nguest: %s\n", h.text, g.text);
		status = WEFT_EXIT_OK;
		goto out;
	}
	if (vm_pair_agents_check(&o)) {
		status = WEFT_EXIT_USAGE;
		goto out;
	}
	tool_set_verbose(verbose);
	status = vm_side_compile(&h, verbose);
	if (status == WEFT_EXIT_OK)
		status = vm_side_compile(&g, verbose);
	if (status != WEFT_EXIT_OK)
		goto out;

	sfd = tool_signals_block(true);
	cl = tool_cluster_connect(&tc);
	if (!cl) {
		status = tc.usage_error ? WEFT_EXIT_USAGE : WEFT_EXIT_FAIL;
		goto out;
	}
	status = vm_side_submit(cl, &tc, &h, o.hosts, o.nhosts, 0);
	if (status == WEFT_EXIT_OK) {
		status = vm_side_submit(cl, &tc, &g, o.guests, o.nguests, h.id);
		if (status != WEFT_EXIT_OK)
			vm_side_cancel(cl, h.id); /* a host side without its guest is of no use */
	}
	if (status != WEFT_EXIT_OK)
		goto out;
	status = follow_pair(cl, &tc, &h, &g, o.json, sfd, &synced);
	if (status == WEFT_EXIT_OK && !synced)
		status = EXIT_UNSYNCED;
out:
	aggd_client_free(cl);
	if (sfd >= 0)
		close(sfd);
	vm_side_free(&h);
	vm_side_free(&g);
	return status;
}
