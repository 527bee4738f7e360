// SPDX-License-Identifier: Apache-2.0
/*
 * `weft cancel`: stops a cluster query everywhere.  The aggregator tells every agent running
 * it to stop, waits (up to its lateness bound) for their last partials, and sends the final
 * window, marked last, to every client following the query.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "aggregator/aggd.h"
#include "tools/weft.h"
#include "tools/weft_cluster.h"

/* clang-format off */
static const char cancel_help[] =
	"Usage: weft cancel --to ENDPOINT --server-key FILE --key FILE [OPTIONS] ID\n"
	"\n"
	"Stops cluster query ID (the number `weft submit` printed; `weft status` lists them)\n"
	"on every agent.  Clients following it receive its last window, marked as the last,\n"
	"once the agents have sent their final partials or the aggregator's lateness bound\n"
	"has passed.  Cancelling a query that is already stopping does nothing.\n"
	"\n"
	CLUSTER_OPTIONS_HELP
	"  -v, --verbose          debug detail on stderr\n"
	"  -h, --help             this text\n"
	"\n"
	"Exit status: 0 the query is stopping, 1 no such query runs there (or the aggregator\n"
	"could not be reached), 2 bad command line.\n";
/* clang-format on */

int cmd_cancel(int argc, char **argv)
{
	static const struct option longopts[] = {
		CLUSTER_LONGOPTS,
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct tool_cluster tc = { 0 };
	struct aggd_client *cl;
	Weft__Envelope e, *reply = NULL;
	Weft__QueryStop stop;
	uint64_t id;
	char *end;
	int c, rc, verbose = 0, status = WEFT_EXIT_OK;

	optind = 1;
	while ((c = getopt_long(argc, argv, "vh", longopts, NULL)) != -1) {
		rc = tool_cluster_opt(&tc, c, optarg);
		if (rc < 0)
			return WEFT_EXIT_USAGE;
		if (rc)
			continue;
		switch (c) {
		case 'v':
			verbose++;
			break;
		case 'h':
			fputs(cancel_help, stdout);
			return WEFT_EXIT_OK;
		default:
			fputs(cancel_help, stderr);
			return WEFT_EXIT_USAGE;
		}
	}
	if (optind + 1 != argc) {
		fprintf(stderr, "weft: cancel takes one query id (see `weft status`)\n");
		return WEFT_EXIT_USAGE;
	}
	errno = 0;
	id = strtoull(argv[optind], &end, 10);
	if (errno || *end || !id) {
		fprintf(stderr, "weft: '%s' is not a query id\n", argv[optind]);
		return WEFT_EXIT_USAGE;
	}
	tool_set_verbose(verbose);
	cl = tool_cluster_connect(&tc);
	if (!cl)
		return tc.usage_error ? WEFT_EXIT_USAGE : WEFT_EXIT_FAIL;
	weft__query_stop__init(&stop);
	stop.query_id = id;
	weft__envelope__init(&e);
	e.body_case = WEFT__ENVELOPE__BODY_QUERY_STOP;
	e.query_stop = &stop;
	rc = aggd_client_send(cl, &e);
	if (rc == 0)
		rc = tool_cluster_reply(cl, tc.timeout_ms, &reply);
	if (rc <= 0) {
		fprintf(stderr, "weft: no answer from %s: %s\n", tc.to,
			rc ? strerror(-rc) : "timed out");
		status = WEFT_EXIT_FAIL;
	} else if (reply->body_case == WEFT__ENVELOPE__BODY_ERROR) {
		fprintf(stderr, "weft: %s: %s\n", tc.to, reply->error->message);
		status = WEFT_EXIT_FAIL;
	} else {
		fprintf(stderr, "weft: query %" PRIu64 " is stopping on every agent\n", id);
	}
	wire_free(reply);
	aggd_client_free(cl);
	return status;
}
