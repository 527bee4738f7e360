// SPDX-License-Identifier: Apache-2.0
/*
 * `weft agent`: this host's member of a weft cluster.  Reads the key files, then hands over
 * to the agent daemon (agent/daemon.h) until SIGINT or SIGTERM; on the way out every probe
 * is detached and what the windows held is shipped.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "agent/daemon.h"
#include "agent/scope.h"
#include "agent/wire.h"
#include "base/file.h"
#include "base/text.h"
#include "base/units.h"
#include "tools/weft.h"

static const char agent_help[] =
	"Usage: weft agent --connect ENDPOINT --server-key FILE --key FILE [OPTIONS]\n"
	"\n"
	"Runs this host's agent: connects out to a weft aggregator, runs the queries it\n"
	"sends (compiled BPF objects: the agent never needs a compiler), and ships one\n"
	"partial aggregate per window.  Runs until SIGINT or SIGTERM; then every probe is\n"
	"detached and the last partials are shipped.  Needs root (it loads BPF programs).\n"
	"A graph query (`from ... graph`) is captured as `weft run` captures it; its\n"
	"finished traces and their aggregates go to the aggregator's graph store each\n"
	"window (docs/graphs.md, \"In the cluster\").\n"
	"\n"
	"The connection is encrypted and authenticated with CURVE: the agent trusts only the\n"
	"aggregator whose public key is in --server-key, and the aggregator lets the agent in\n"
	"only if the agent's public key is in its allow-list (`weft keygen` makes key pairs;\n"
	"docs/operations.md shows a deployment).  If the link drops, the agent reconnects by\n"
	"itself and delivers the partials it kept meanwhile.\n"
	"\n"
	"Options:\n"
	"  -c, --connect ENDPOINT  the aggregator, as tcp://HOST:PORT\n"
	"  -s, --server-key FILE   the aggregator's public key (a file of `weft keygen`;\n"
	"                          only its \"public\" line is read)\n"
	"  -k, --key FILE          this agent's key pair (\"public\" and \"secret\" lines;\n"
	"                          keep it mode 0600)\n"
	"  -H, --host NAME         the name this host's results carry (default: the host name)\n"
	"      --scope netns:PATH | cgroup:PATH\n"
	"                          trace only the processes of one network namespace (PATH:\n"
	"                          /proc/PID/ns/net, or a bind mount such as /run/netns/NAME)\n"
	"                          or of one cgroup v2 directory and every cgroup below it:\n"
	"                          one agent per tenant or container, each with its own --host\n"
	"                          (`weft status` shows each agent's scope).  Kernel probes\n"
	"                          and user probes alike count only that scope's processes;\n"
	"                          the namespace or cgroup stays held open while the agent runs\n"
	"      --spool-max N       partials kept while unacknowledged (default 4096); when the\n"
	"                          spool is full the oldest is dropped, counted and logged\n"
	"      --spool-bytes SIZE  and their total size (default 64MiB; units B KiB MiB GiB TiB)\n"
	"      --graph-batch-max N graph elements (tasks, events, edges) one batch to the\n"
	"                          aggregator carries (default 20000, at most 1000000): a\n"
	"                          graph query's window with more is sent as several batches,\n"
	"                          a trace's elements together where they fit\n"
	"      --cpu-budget PCT    the share of one CPU each query's probes may cost on this\n"
	"                          host (default 5; 0: no limit); a query over it three\n"
	"                          seconds in a row is stopped here, and the aggregator told\n"
	"                          why (`weft status` shows it)\n"
	"  -v, --verbose           debug detail on stderr, including every rejected message\n"
	"                          and the full verifier log of a query that fails to load\n"
	"  -h, --help              this text\n"
	"\n"
	"Example:\n"
	"  weft keygen --role agent agent1     # agent1.key, agent1.pub, an allow-list line\n"
	"  weft agent --connect tcp://aggregator.example:7470 --server-key aggregator.pub \\\n"
	"             --key agent1.key\n"
	"\n"
	"Environment: WEFT_HUGEPAGES=0 keeps the agent's heap in 4 KiB pages (by default,\n"
	"where transparent huge pages are \"madvise\", weft starts itself again with\n"
	"glibc's glibc.malloc.hugetlb=1: fewer page faults as a capture grows).\n"
	"\n"
	"Exit status: 0 stopped by a signal, 1 failure (e.g. unreadable keys, a --scope this\n"
	"kernel cannot apply), 2 bad command line (also a --scope that is missing, or no\n"
	"network namespace or cgroup v2 directory).\n";

static int read_key(const char *opt, const char *path, char pub[WIRE_KEY_LEN + 1],
		    char sec[WIRE_KEY_LEN + 1])
{
	int rc = wire_keyfile_read(path, pub, sec);

	if (rc == 0)
		return 0;
	if (rc == -ENOKEY)
		fprintf(stderr, "weft: %s %s: no \"secret\" line (is it a public-key file?)\n", opt,
			path);
	else if (rc == -EINVAL)
		fprintf(stderr,
			"weft: %s %s: not a weft key file (\"public Z85\" and, for a key pair, "
			"\"secret Z85\" of the same pair; `weft keygen` makes them)\n",
			opt, path);
	else
		fprintf(stderr, "weft: %s %s: %s\n", opt, path, weft_file_strerror(rc));
	return rc;
}

int cmd_agent(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "connect", required_argument, NULL, 'c' },
		{ "server-key", required_argument, NULL, 's' },
		{ "key", required_argument, NULL, 'k' },
		{ "host", required_argument, NULL, 'H' },
		{ "spool-max", required_argument, NULL, 'S' },
		{ "spool-bytes", required_argument, NULL, 'B' },
		{ "cpu-budget", required_argument, NULL, 'U' },
		{ "graph-batch-max", required_argument, NULL, 'G' },
		{ "scope", required_argument, NULL, 'P' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct agent_daemon_opts o = { .sz = sizeof(o), .stop_fd = -1 };
	char srv_pub[WIRE_KEY_LEN + 1], pub[WIRE_KEY_LEN + 1], sec[WIRE_KEY_LEN + 1];
	const char *server_key = NULL, *key = NULL, *scope_spec = NULL;
	struct agent_scope scope;
	struct agent_daemon *d;
	struct agent_daemon_stats st;
	int c, verbose = 0, rc, sfd;

	optind = 1;
	while ((c = getopt_long(argc, argv, "c:s:k:H:vh", longopts, NULL)) != -1) {
		switch (c) {
		case 'c':
			o.endpoint = optarg;
			break;
		case 's':
			server_key = optarg;
			break;
		case 'k':
			key = optarg;
			break;
		case 'U': {
			char *end;
			double v = strtod(optarg, &end);

			if (end == optarg || *end || !(v >= 0 && v <= 100000)) {
				fprintf(stderr,
					"weft: --cpu-budget takes a percentage of one CPU from 0 "
					"(no limit) to 100000, not '%s'\n",
					optarg);
				return WEFT_EXIT_USAGE;
			}
			o.cpu_budget = v > 0 ? v : -1;
			break;
		}
		case 'H':
			/* what the wire takes as a host (agent/wire.h, base/text.h) */
			if (!*optarg || strlen(optarg) > WIRE_MAX_HOST || strchr(optarg, ' ') ||
			    text_check(optarg, strlen(optarg), TEXT_NAME) != strlen(optarg)) {
				fprintf(stderr,
					"weft: --host takes a name of 1 to %d bytes of UTF-8 "
					"without spaces or control characters\n",
					WIRE_MAX_HOST);
				return WEFT_EXIT_USAGE;
			}
			o.host = optarg;
			break;
		case 'S': {
			char *end;
			unsigned long v;

			errno = 0;
			v = strtoul(optarg, &end, 10);
			if (errno || *end || v < 1 || v > (1ul << 24)) {
				fprintf(stderr, "weft: --spool-max takes 1 to 16777216\n");
				return WEFT_EXIT_USAGE;
			}
			o.spool_max = (uint32_t)v;
			break;
		}
		case 'G': {
			char *end;
			unsigned long v;

			errno = 0;
			v = strtoul(optarg, &end, 10);
			if (errno || *end || end == optarg || v < 1 || v > WIRE_MAX_ELEMS) {
				fprintf(stderr, "weft: --graph-batch-max takes 1 to %u\n",
					WIRE_MAX_ELEMS);
				return WEFT_EXIT_USAGE;
			}
			o.graph_batch_max = (uint32_t)v;
			break;
		}
		case 'B':
			if (units_size_parse(optarg, &o.spool_max_bytes) ||
			    o.spool_max_bytes < (1u << 20)) {
				fprintf(stderr, "weft: --spool-bytes takes a size of at least 1MiB "
						"(e.g. 256MiB)\n");
				return WEFT_EXIT_USAGE;
			}
			break;
		case 'P':
			scope_spec = optarg;
			break;
		case 'v':
			verbose++;
			break;
		case 'h':
			fputs(agent_help, stdout);
			return WEFT_EXIT_OK;
		default:
			fputs(agent_help, stderr);
			return WEFT_EXIT_USAGE;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "weft: agent takes no arguments ('%s')\n", argv[optind]);
		return WEFT_EXIT_USAGE;
	}
	if (!o.endpoint || !server_key || !key) {
		fprintf(stderr, "weft: agent needs --connect, --server-key and --key (see `weft "
				"agent --help`)\n");
		return WEFT_EXIT_USAGE;
	}
	if (strncmp(o.endpoint, "tcp://", 6) != 0 && strncmp(o.endpoint, "ipc://", 6) != 0) {
		fprintf(stderr, "weft: --connect takes tcp://HOST:PORT, not '%s'\n", o.endpoint);
		return WEFT_EXIT_USAGE;
	}
	tool_set_verbose(verbose + 1); /* a daemon says what it does: info by default */
	/* a bad --scope is a bad command line: said before anything else is read */
	agent_scope_init(&scope);
	if (scope_spec) {
		char why[AGENT_SCOPE_TEXT_MAX + 256];

		rc = agent_scope_open(scope_spec, &scope, why, sizeof(why));
		if (rc) {
			fprintf(stderr, "weft: %s\n", why);
			return rc == -EINVAL || rc == -ENOENT ? WEFT_EXIT_USAGE : WEFT_EXIT_FAIL;
		}
		o.scope = &scope;
	}
	if (read_key("--server-key", server_key, srv_pub, NULL) ||
	    read_key("--key", key, pub, sec)) {
		agent_scope_close(&scope);
		return WEFT_EXIT_FAIL;
	}
	o.server_key = srv_pub;
	o.public_key = pub;
	o.secret_key = sec;
	o.verbose = verbose > 0;

	/* signals are read from a signalfd in the daemon's loop, never handled asynchronously */
	signal(SIGHUP, SIG_IGN);
	sfd = tool_signals_block(false);
	if (sfd < 0) {
		fprintf(stderr, "weft: signalfd: %s\n", strerror(errno));
		agent_scope_close(&scope);
		return WEFT_EXIT_FAIL;
	}
	o.stop_fd = sfd;
	d = agent_daemon_new(&o);
	explicit_bzero(sec, sizeof(sec));
	if (!d) {
		fprintf(stderr, "weft: cannot start the agent: %s\n", strerror(errno));
		close(sfd);
		agent_scope_close(&scope);
		return WEFT_EXIT_FAIL;
	}
	rc = agent_daemon_run(d);
	agent_daemon_stats(d, &st);
	fprintf(stderr,
		"weft: agent stopped: %llu partials made, %llu resent after reconnects, %llu "
		"dropped from a full spool, %llu messages rejected\n",
		(unsigned long long)st.partials, (unsigned long long)st.resent,
		(unsigned long long)st.spool_dropped, (unsigned long long)st.rejected);
	agent_daemon_free(d);
	agent_scope_close(&scope);
	close(sfd);
	return rc ? WEFT_EXIT_FAIL : WEFT_EXIT_OK;
}
