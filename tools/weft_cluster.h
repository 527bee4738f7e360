/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the cluster clients (`weft submit`, `weft status`, `weft cancel`) share: the
 * connection options, their help text, connecting, and waiting for the aggregator's answer.
 * Defined in weft_status.c.
 */
#ifndef WEFT_TOOL_CLUSTER_H
#define WEFT_TOOL_CLUSTER_H
#include <stdbool.h>
#include <stdint.h>
#include "aggregator/aggd.h"

struct tool_cluster {
	const char *to, *server_key, *key;
	int timeout_ms; /* --timeout; 0: AGGD_CLIENT_TIMEOUT_MS */
	bool usage_error; /* a missing option, reported */
};

/* clang-format off */
#define CLUSTER_LONGOPTS \
	{ "to", required_argument, NULL, 'T' }, \
	{ "server-key", required_argument, NULL, 'S' }, \
	{ "key", required_argument, NULL, 'K' }, \
	{ "timeout", required_argument, NULL, 'W' }
/* clang-format on */

#define CLUSTER_OPTIONS_HELP                                                                   \
	"Connection (each may also come from the environment):\n"                              \
	"      --to ENDPOINT      the aggregator, tcp://HOST:PORT ($WEFT_AGGREGATOR)\n"        \
	"      --server-key FILE  its public key, a NAME.pub of `weft keygen`\n"               \
	"                         ($WEFT_SERVER_KEY)\n"                                        \
	"      --key FILE         this client's key pair, whose public key the aggregator's\n" \
	"                         allow-list has as 'client KEY NAME' ($WEFT_KEY)\n"           \
	"      --timeout D        to connect and for each answer (default 5s; a submit's\n"    \
	"                         answer waits at least 10s)\n"                                \
	"\n"                                                                                   \
	"Options:\n"

/* Handles a connection option (1), not one (0), or a bad value (-1, reported). */
int tool_cluster_opt(struct tool_cluster *tc, int c, const char *arg);
/* Connects and is welcomed; NULL with the reason reported (usage_error for a missing
 * option). */
struct aggd_client *tool_cluster_connect(struct tool_cluster *tc);
/* The answer to the request just sent: the first StatusReply or Error in reply to it (one
 * that says it answers another request, such as a stop the client sent again, is not).  1
 * with *out, 0 when timeout_ms passed (0: AGGD_CLIENT_TIMEOUT_MS). */
int tool_cluster_reply(struct aggd_client *c, int timeout_ms, Weft__Envelope **out);
/* The same, handing every other message (results, rows, Errors not in reply to anything) to
 * other(ctx, e), which takes it, instead of dropping it. */
int tool_cluster_reply_other(struct aggd_client *c, int timeout_ms, Weft__Envelope **out,
			     void (*other)(void *ctx, Weft__Envelope *e), void *ctx);

/*
 * The end of a stream query for a client: its last Result says the window closed, but an
 * agent that was late for it (listed in `missing`) still sends its last rows after it.  The
 * rows of a query are all in once every host of the last Result (`hosts` and `missing`) has
 * sent its RowBatch with `last`, or TOOL_ROWS_GRACE_MS after that Result (then
 * tool_rows_done() says which hosts did not finish).
 */
#define TOOL_ROWS_GRACE_MS 10000
struct tool_rows_wait {
	char **got; /* hosts whose last RowBatch came */
	size_t ngot;
	char **need; /* the hosts of the last Result */
	size_t nneed;
	bool result_last;
	uint64_t deadline_ms; /* CLOCK_MONOTONIC */
};
void tool_rows_batch(struct tool_rows_wait *w, const Weft__RowBatch *b);
void tool_rows_result(struct tool_rows_wait *w, const Weft__Result *r);
/* Whether all rows are in (or the grace passed: the hosts still out said on stderr, prefixed
 * with who). */
bool tool_rows_done(struct tool_rows_wait *w, const char *who, uint64_t query_id);
void tool_rows_free(struct tool_rows_wait *w);

#endif
