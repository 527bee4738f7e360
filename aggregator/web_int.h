/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The web face's insides, shared by web.c (the server), web_trace.c (the trace pages' reads
 * of the graph store) and web_assets.c (generated from aggregator/web/ by web_embed.cmake).
 * Not an API: nothing outside aggregator/web*.c includes it.
 */
#ifndef WEFT_AGGREGATOR_WEB_INT_H
#define WEFT_AGGREGATOR_WEB_INT_H
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "aggregator/web.h"

struct web_asset {
	const char *path; /* "/app.js" */
	const char *type; /* its Content-Type */
	const char *data;
	size_t len;
};
extern const struct web_asset web_assets[]; /* ends with a NULL path */

struct qring;
struct graph_store;

struct web {
	struct web_opts o;
	char *graph_store;
	char token[WEB_TOKEN_MAX + 1];
	size_t token_len; /* 0: no token required */
	char url[96];
	struct MHD_Daemon *d;
	pthread_mutex_t mu; /* guards docs, rings, seq and st */
	char *docs[WEB_DOC__COUNT];
	struct qring *rings[WEB_MAX_QUERIES];
	size_t nrings;
	uint64_t seq; /* bumped by every window kept */
	struct web_stats st;
	struct graph_store *gs; /* opened by the server thread when first needed */
};

/* A request for the trace routes; NULL: absent. */
struct web_trace_req {
	const char *id; /* after /api/traces/, e.g. "a03ee8ff" or "a03ee8ff/export" */
	const char *service, *name, *host, *min_duration, *max_duration, *sort, *limit;
	const char *format;
};

/* Its answer: body (malloc'd) with type, or status and why. */
struct web_reply {
	char *body;
	size_t len;
	const char *type;
	char disposition[128];
	unsigned int status;
	char why[512];
};

void web_trace_answer(struct web *w, const struct web_trace_req *rq, struct web_reply *rp);
void web_trace_close(struct web *w);
char *web_json_error(unsigned int status, const char *msg);
void *web_memdup(const void *p, size_t n);

#endif
