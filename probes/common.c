// SPDX-License-Identifier: Apache-2.0
/*
 * Helpers shared by every provider: probe sets (growth, rollback, freeing), globs, near
 * matches for "did you mean", error filling and string vectors.  A probe_set owns its
 * targets array and each target's fields array; nothing else in a target is heap memory,
 * so a target may be copied by value as long as `fields` is not freed twice.
 */
#include <ctype.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/libbpf.h>
#include "probes/probes.h"
#include "probes/provider.h"

int strv_push(struct strv *sv, const char *s)
{
	char *dup;

	if (sv->n == sv->cap) {
		int cap = sv->cap ? sv->cap * 2 : 64;
		char **v = realloc(sv->v, (size_t)cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		sv->v = v;
		sv->cap = cap;
	}
	dup = strdup(s);
	if (!dup)
		return -ENOMEM;
	sv->v[sv->n++] = dup;
	return 0;
}

static int str_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

void strv_sort(struct strv *sv)
{
	if (sv->n > 1)
		qsort(sv->v, (size_t)sv->n, sizeof(*sv->v), str_cmp);
}

void strv_uniq(struct strv *sv)
{
	int w = 0;

	for (int i = 0; i < sv->n; i++) {
		if (w > 0 && strcmp(sv->v[w - 1], sv->v[i]) == 0) {
			free(sv->v[i]);
			continue;
		}
		sv->v[w++] = sv->v[i];
	}
	sv->n = w;
}

void strv_free(struct strv *sv)
{
	for (int i = 0; i < sv->n; i++)
		free(sv->v[i]);
	free(sv->v);
	sv->v = NULL;
	sv->n = sv->cap = 0;
}

int perr_set(struct probe_err *err, enum probe_err_kind kind, const char *fix, const char *fmt, ...)
{
	va_list ap;

	if (!err)
		return -1;
	err->kind = kind;
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
	snprintf(err->fix, sizeof(err->fix), "%s", fix ? fix : "");
	return -1;
}

void perr_fix_near(struct probe_err *err, const char *word, const char *const *cands, int ncands,
		   const char *prefix)
{
	const char *near[5];
	int n = probe_near_matches(word, cands, ncands, near, 5);
	size_t len;

	err->fix[0] = '\0';
	if (n == 0)
		return;
	len = (size_t)snprintf(err->fix, sizeof(err->fix), "did you mean: ");
	for (int i = 0; i < n && len < sizeof(err->fix); i++)
		len += (size_t)snprintf(err->fix + len, sizeof(err->fix) - len, "%s%s%s",
					i ? ", " : "", prefix ? prefix : "", near[i]);
}

int probe_set_push(struct probe_set *set, struct probe_target **t)
{
	/* Capacity is implicit: grow to the next power of two when n reaches one, so that
	 * probe_set keeps its two public fields and growth stays amortised O(1). */
	int n = set->n;

	if (n == 0 || (n & (n - 1)) == 0) {
		size_t cap = n ? (size_t)n * 2 : 4;
		struct probe_target *v = realloc(set->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		set->v = v;
	}
	memset(&set->v[n], 0, sizeof(set->v[n]));
	set->n = n + 1;
	*t = &set->v[n];
	return 0;
}

void probe_set_truncate(struct probe_set *set, int n)
{
	for (int i = n; i < set->n; i++) {
		free(set->v[i].fields);
		set->v[i].fields = NULL;
	}
	if (n < set->n)
		set->n = n;
	if (set->n == 0) {
		free(set->v);
		set->v = NULL;
	}
}

void probe_set_free(struct probe_set *set)
{
	if (!set)
		return;
	probe_set_truncate(set, 0);
}

int probe_ctx_max_targets(const struct probe_ctx *ctx)
{
	if (ctx && ctx->max_targets > 0 && ctx->max_targets < PROBE_MAX_TARGETS)
		return ctx->max_targets;
	return PROBE_MAX_TARGETS;
}

int probe_ctx_check_pid(const struct probe_ctx *ctx, struct probe_err *err)
{
	if (!ctx || ctx->pid <= 0)
		return 0;
	if (kill(ctx->pid, 0) == 0 || errno == EPERM)
		return 0;
	return perr_set(err, PERR_PID, NULL, "no process with pid %d", (int)ctx->pid);
}

bool probe_has_wildcard(const char *s)
{
	return s && strpbrk(s, "*?") != NULL;
}

bool probe_glob_match(const char *p, const char *s)
{
	const char *star_p = NULL, *star_s = NULL;

	/* Iterative matcher with one backtrack point: linear in practice, never recursive,
	 * so hostile patterns ("a*a*a*a*b") cannot blow the stack. */
	while (*s) {
		if (*p == '*') {
			star_p = ++p;
			star_s = s;
		} else if (*p == '?' || *p == *s) {
			p++;
			s++;
		} else if (star_p) {
			p = star_p;
			s = ++star_s;
		} else {
			return false;
		}
	}
	while (*p == '*')
		p++;
	return *p == '\0';
}

#define NEAR_MAXLEN 128

/* Optimal-string-alignment distance (Levenshtein plus adjacent transposition); a change of
 * letter case alone costs nothing, so "processcommand" finds "processCommand" first. */
static int near_distance(const char *a, const char *b, int bound)
{
	int la = (int)strnlen(a, NEAR_MAXLEN), lb = (int)strnlen(b, NEAR_MAXLEN);
	int rows[3][NEAR_MAXLEN + 1];
	int *prev2 = rows[0], *prev = rows[1], *cur = rows[2];

	if (abs(la - lb) > bound)
		return bound + 1;
	for (int j = 0; j <= lb; j++)
		prev[j] = j;
	for (int i = 1; i <= la; i++) {
		int rowmin = cur[0] = i;

		for (int j = 1; j <= lb; j++) {
			int cost = tolower((unsigned char)a[i - 1]) !=
				   tolower((unsigned char)b[j - 1]);
			int v = prev[j - 1] + cost;

			if (prev[j] + 1 < v)
				v = prev[j] + 1;
			if (cur[j - 1] + 1 < v)
				v = cur[j - 1] + 1;
			if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
			    prev2[j - 2] + 1 < v)
				v = prev2[j - 2] + 1;
			cur[j] = v;
			if (v < rowmin)
				rowmin = v;
		}
		if (rowmin > bound)
			return bound + 1;
		int *t = prev2;
		prev2 = prev;
		prev = cur;
		cur = t;
	}
	return prev[lb];
}

/* Inserts cand with score d into the best-first list out/dist of *n (at most max) entries;
 * ties keep the order in which candidates arrive. */
static void near_insert(const char **out, int *dist, int *n, int max, const char *cand, int d)
{
	int at;

	for (at = *n; at > 0 && dist[at - 1] > d; at--)
		;
	if (at >= max)
		return;
	if (*n < max)
		(*n)++;
	for (int k = *n - 1; k > at; k--) {
		out[k] = out[k - 1];
		dist[k] = dist[k - 1];
	}
	out[at] = cand;
	dist[at] = d;
}

int probe_near_matches(const char *word, const char *const *cands, int ncands, const char **out,
		       int max)
{
	int len = (int)strlen(word);
	int bound = (len + 2) / 3;
	int dist[16];
	int n = 0;

	if (max > 16)
		max = 16;
	if (bound < 1)
		bound = 1;
	if (bound > 5)
		bound = 5;
	for (int i = 0; i < ncands; i++) {
		int d = near_distance(word, cands[i], bound);

		if (d > bound || strcmp(word, cands[i]) == 0)
			continue;
		near_insert(out, dist, &n, max, cands[i], d);
	}
	if (n > 0 || len < 3)
		return n;
	/* Nothing close by spelling: offer candidates that contain the word ("openat" finds
	 * "openat2"), shortest first. */
	for (int i = 0; i < ncands; i++) {
		int d = (int)strlen(cands[i]);

		if (!strstr(cands[i], word))
			continue;
		near_insert(out, dist, &n, max, cands[i], d);
	}
	return n;
}

bool probe_kind_is_binary(enum probe_kind k)
{
	return k == PROBE_UPROBE || k == PROBE_URETPROBE || k == PROBE_USDT;
}

const char *probe_bpf_strerror(int err)
{
	static __thread char buf[128];

	if (err < 0)
		err = -err;
	/* libbpf_strerror() knows LIBBPF_ERRNO__* and falls back to strerror_r() */
	if (libbpf_strerror(err, buf, sizeof(buf)) != 0 && err < __LIBBPF_ERRNO__START)
		snprintf(buf, sizeof(buf), "%s", strerror(err));
	return buf;
}
