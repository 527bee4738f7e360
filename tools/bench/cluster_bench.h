/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the cluster benchmarks (cluster_merge.c, cluster_sim.c) share: the query's plan as
 * the aggregator sees it, and partial aggregates that look like a real agent's.
 *
 * The plan is compiled from query text (compiler_run() up to PASS_PLAN), written as a
 * manifest and read back with manifest_read(), exactly the way the aggregator gets it from
 * a Submit.  A group is made the way agent/table.c keys groups on the wire: a canonical key
 * (per key column 's' + u32 length + text, or 'i' + int64, little endian) and one
 * agg_state_encode()d state per aggregate, built with agg_state_add() from a few inputs.
 * Group i of the key space has comm "proc-%05u" (text columns) and 1000 + i (integer
 * columns), count 1 + i % 7 inputs of value 512 + i % 4096; agent a sends the groups
 * (a * groups + j) % keyspace, j < groups, so agents overlap as hosts running the same
 * programs do, and a window table holds at most keyspace groups.
 *
 * Header-only (static inline): each benchmark is one executable of one .c file.
 */
#ifndef WEFT_CLUSTER_BENCH_H
#define WEFT_CLUSTER_BENCH_H
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "agent/result.h"
#include "kernel/aggstate.h"
#include "agent/wire.h"
#include "compiler/compiler.h"
#include "compiler/plan.h"

#define CB_DEFAULT_QUERY \
	"from syscall:read group by comm, pid select count(), sum(args.count) every 1s"

static inline uint64_t cb_now_ns(clockid_t c)
{
	struct timespec ts;

	clock_gettime(c, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/*
 * Compiles src up to the plan, writes its manifest (a malloc'd buffer in *manifest) and reads
 * it back: the returned plan is the one the aggregator builds from the Submit.  With object
 * not NULL, compiles on to the BPF object too (clang, through the compile cache), as `weft
 * submit` does, and returns it in *object (malloc'd).  NULL with a message on stderr.
 */
static inline struct plan *cb_plan_make(const char *src, char **manifest, size_t *manifest_len,
					void **object, size_t *object_len)
{
	struct compile_opts co = { .sz = sizeof(co) };
	struct compile_result res = { 0 };
	struct diag_list dl;
	struct plan *p = NULL;
	char err[256] = "";
	FILE *m;
	int rc;

	*manifest = NULL;
	*manifest_len = 0;
	if (object)
		*object = NULL;
	diag_list_init(&dl, src, "bench");
	rc = compiler_run(src, &co, object ? PASS_CLANG : PASS_PLAN, &dl, &res);
	if (rc) {
		diag_print(&dl, stderr, false);
		goto out;
	}
	if (object) {
		*object = malloc(res.object_sz ? res.object_sz : 1);
		if (!*object)
			goto out;
		memcpy(*object, res.object, res.object_sz);
		*object_len = res.object_sz;
	}
	m = open_memstream(manifest, manifest_len);
	if (!m || manifest_write(res.plan, m) || fclose(m)) {
		fprintf(stderr, "bench: cannot write the manifest\n");
		goto out;
	}
	p = manifest_read(*manifest, *manifest_len, err, sizeof(err));
	if (!p)
		fprintf(stderr, "bench: the manifest does not read: %s\n", err);
	else if (!p->aggregating)
		fprintf(stderr, "bench: the query must aggregate\n");
out:
	compile_result_free(&res);
	diag_list_free(&dl);
	if (p && !p->aggregating) {
		plan_free(p);
		p = NULL;
	}
	if (!p) {
		free(*manifest);
		*manifest = NULL;
		if (object) {
			free(*object);
			*object = NULL;
		}
	}
	return p;
}

static inline bool cb_render_text(enum render r)
{
	return !(r == RENDER_INT || r == RENDER_UINT || r == RENDER_HEX || r == RENDER_BOOL);
}

static inline struct agg_spec cb_spec(const struct plan_agg *a)
{
	struct agg_spec s = {
		.kind = a->spec.kind,
		.lo = a->spec.lo,
		.hi = a->spec.hi,
		.step = a->spec.step,
		.q = a->spec.q,
	};

	return s;
}

/* Group i of the key space as a Weft__Group in one allocation (free() it).  NULL: ENOMEM or
 * a plan this generator cannot fill. */
static inline Weft__Group *cb_group_make(const struct plan *p, uint32_t i)
{
	size_t kmax = 0, smax = 0, stmax = 8;
	uint8_t *key, *data, *st;
	char text[32];
	int tlen = snprintf(text, sizeof(text), "proc-%05u", i);
	Weft__Group *g;
	size_t klen = 0;

	for (int k = 0; k < p->nkeys; k++)
		kmax += 5 + sizeof(text);
	for (int a = 0; a < p->naggs; a++) {
		struct agg_spec s = cb_spec(&p->aggs[a]);

		smax += agg_state_encoded_max(&s);
		if (agg_state_size(&s) > stmax)
			stmax = agg_state_size(&s);
	}
	g = malloc(sizeof(*g) + (size_t)p->naggs * sizeof(ProtobufCBinaryData) + kmax + smax);
	st = malloc(stmax);
	if (!g || !st) {
		free(g);
		free(st);
		return NULL;
	}
	weft__group__init(g);
	g->n_states = (size_t)p->naggs;
	g->states = (ProtobufCBinaryData *)(g + 1);
	key = (uint8_t *)(g->states + p->naggs);
	for (int k = 0; k < p->nkeys; k++) {
		if (cb_render_text(p->keys[k].render)) {
			key[klen++] = 's';
			for (int b = 0; b < 4; b++)
				key[klen++] = (uint8_t)((uint32_t)tlen >> (8 * b));
			memcpy(key + klen, text, (size_t)tlen);
			klen += (size_t)tlen;
		} else {
			uint64_t v = p->keys[k].render == RENDER_BOOL ? i & 1 : 1000 + (uint64_t)i;

			key[klen++] = 'i';
			for (int b = 0; b < 8; b++)
				key[klen++] = (uint8_t)(v >> (8 * b));
		}
	}
	g->key.data = key;
	g->key.len = klen;
	data = key + klen;
	for (int a = 0; a < p->naggs; a++) {
		struct agg_spec s = cb_spec(&p->aggs[a]);
		ssize_t n;

		agg_state_init(&s, st);
		for (uint32_t k = 0; k < 1 + i % 7; k++)
			agg_state_add(&s, st, 512 + (int64_t)(i % 4096));
		n = agg_state_encode(&s, st, data, agg_state_encoded_max(&s));
		if (n < 0) {
			free(g);
			free(st);
			errno = EINVAL;
			return NULL;
		}
		g->states[a].data = data;
		g->states[a].len = (size_t)n;
		data += n;
	}
	free(st);
	return g;
}

/* The groups agent `agent` sends: (agent * n + j) % keyspace, j < n.  0 or -ENOMEM/-EINVAL. */
static inline int cb_groups_make(const struct plan *p, uint32_t agent, uint32_t n,
				 uint32_t keyspace, Weft__Group ***out)
{
	Weft__Group **g = calloc(n + 1, sizeof(*g));

	if (!g)
		return -ENOMEM;
	for (uint32_t j = 0; j < n; j++) {
		g[j] = cb_group_make(p, (uint32_t)(((uint64_t)agent * n + j) % keyspace));
		if (!g[j]) {
			for (uint32_t k = 0; k < j; k++)
				free(g[k]);
			free(g);
			return -ENOMEM;
		}
	}
	*out = g;
	return 0;
}

static inline void cb_groups_free(Weft__Group **g, uint32_t n)
{
	if (!g)
		return;
	for (uint32_t j = 0; j < n; j++)
		free(g[j]);
	free(g);
}

/* The count() a window's merged table holds for group i from one agent (what the
 * generator put in): the first count() aggregate's expected total is the sum of these. */
static inline uint64_t cb_group_count(uint32_t i)
{
	return 1 + i % 7;
}

#endif
