// SPDX-License-Identifier: Apache-2.0
/*
 * A query that `weft explain` accepts must run: every query of the parser's fuzz corpus
 * (tests/fuzz/corpus/query/) and every tests/compiler/ok/NAME.wq that compiles through
 * PASS_PLAN (what explain checks) must also generate C that clang compiles (PASS_CLANG,
 * through the compile cache) and an object that the kernel's verifier loads.  The object is
 * opened, sized and loaded exactly as agent_query_start() does, but not attached.  Queries
 * that explain refuses (the corpus has many on purpose, and some name binaries this machine
 * lacks) are skipped and counted.  Every failing file is printed with its error before the
 * test fails, so one run lists all of them.  Two worker processes share the queries; the
 * compile cache makes a second run fast.
 *
 * Needs root (tracefs, loading BPF); exits 77 (skip) otherwise.
 */
#include <dirent.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>
#include <bpf/libbpf.h>
#include "agent/bpfrt.h"
#include "compiler/codegen.h"
#include "compiler/compiler.h"
#include "compiler/diag.h"
#include "compiler/plan.h"

#define LOAD_LOG_MAX (1u << 20)
#define WORKERS 2 /* processes checking queries side by side (clang dominates) */
#define EXPLAIN_CACHE_DIR "/var/cache/weft/test-explain-runs"

static const char *source_dir(void)
{
	const char *d = getenv("WEFT_SOURCE_DIR");

	return d && *d ? d : WEFT_SOURCE_DIR;
}

static char *file_read(const char *path)
{
	FILE *f = fopen(path, "rb"), *m;
	char *buf = NULL, chunk[4096];
	size_t sz = 0, n;

	if (!f)
		return NULL;
	m = open_memstream(&buf, &sz);
	if (!m) {
		fclose(f);
		return NULL;
	}
	while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
		fwrite(chunk, 1, n, m);
	fclose(f);
	fclose(m);
	return buf;
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The sorted names of the regular files of dir that end in `ext` (NULL: every file). */
static char **dir_list(const char *dir, const char *ext, int *n)
{
	DIR *d = opendir(dir);
	char **v = NULL;
	int cap = 0;
	struct dirent *de;

	*n = 0;
	if (!d)
		return NULL;
	while ((de = readdir(d))) {
		size_t len = strlen(de->d_name);

		if (de->d_name[0] == '.')
			continue;
		if (ext && (len < strlen(ext) || strcmp(de->d_name + len - strlen(ext), ext) != 0))
			continue;
		if (*n == cap) {
			cap = cap ? cap * 2 : 64;
			v = realloc(v, (size_t)cap * sizeof(*v));
			assert_non_null(v);
		}
		v[(*n)++] = strdup(de->d_name);
	}
	closedir(d);
	if (*n)
		qsort(v, (size_t)*n, sizeof(*v), name_cmp);
	return v;
}

/* libbpf's messages while loading: the verifier's log, for the report. */
static char *load_log;
static size_t load_log_len;

static int capture_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	char buf[4096];
	int n = vsnprintf(buf, sizeof(buf), fmt, ap);

	(void)level;
	if (n <= 0)
		return 0;
	if ((size_t)n >= sizeof(buf))
		n = sizeof(buf) - 1;
	if (load_log && load_log_len + (size_t)n < LOAD_LOG_MAX) {
		memcpy(load_log + load_log_len, buf, (size_t)n);
		load_log_len += (size_t)n;
		load_log[load_log_len] = 0;
	}
	return 0;
}

/* The last lines of the captured log (the verifier's verdict is at its end). */
static void print_log_tail(FILE *out)
{
	const char *s = load_log ? load_log + load_log_len : NULL;
	int lines = 0;

	if (!s)
		return;
	while (s > load_log && lines < 25)
		if (*--s == '\n')
			lines++;
	fprintf(out, "%s\n", s);
}

/* Opens, sizes (as agent_query_start does) and loads obj; 0 or -errno. */
static int load_object(const struct plan *p, const void *obj, size_t obj_sz)
{
	LIBBPF_OPTS(bpf_object_open_opts, oo, .object_name = "weft");
	struct bpf_object *o;
	libbpf_print_fn_t prev;
	uint32_t pid = 0;
	bool keyed = false;
	int rc;

	o = bpf_object__open_mem(obj, obj_sz, &oo);
	if (!o)
		return -errno;
	for (int k = 0; k < p->nkeys; k++)
		keyed |= p->keys[k].kernel;
	rc = 0;
	if (p->aggregating && keyed)
		rc = bpfrt_map_resize(o, "weft_agg", p->max_groups);
	if (!rc && !p->aggregating)
		rc = bpfrt_map_resize(o, WEFT_EVENTS_MAP, p->ringbuf_bytes);
	for (int s = 0; !rc && p->has_spans && s < 16; s++) {
		char name[32];

		snprintf(name, sizeof(name), "weft_span%d", s);
		if (bpf_object__find_map_by_name(o, name))
			rc = bpfrt_map_resize(o, name, p->max_spans);
	}
	if (!rc)
		rc = bpfrt_rodata_set(o, "weft_target_pid", &pid, sizeof(pid));
	if (!rc) {
		load_log_len = 0;
		load_log[0] = 0;
		prev = libbpf_set_print(capture_print);
		rc = bpf_object__load(o);
		libbpf_set_print(prev);
	}
	bpf_object__close(o);
	return rc;
}

enum verdict { V_SKIP, V_OK, V_FAIL };

/* Checks one query; what is wrong goes to rep. */
static enum verdict check_query(const char *label, const char *src, FILE *rep)
{
	/*
	 * A cache of its own, shared by the release and ASan builds' runs: the suite compiles
	 * more queries than the default cache keeps (256), so in the shared one the second run
	 * found none of these left.  Only clang is skipped on a hit (an entry is keyed by the
	 * generated C and checked by its SHA-256); parsing, planning, code generation and the
	 * verifier's load run every time.
	 */
	struct compile_opts opts = { .sz = sizeof(opts), .cache_dir = EXPLAIN_CACHE_DIR };
	struct compile_result res;
	struct diag_list dl;
	enum verdict v = V_OK;
	int rc;

	/* what `weft explain` checks: through the plan */
	diag_list_init(&dl, src, label);
	rc = compiler_run(src, &opts, PASS_PLAN, &dl, &res);
	if (rc != 0) {
		v = V_SKIP;
		goto out;
	}
	/* then the rest of what `weft run` does, as compiler_run() would go on */
	rc = codegen_emit(res.ast, res.plan, &dl, &res.bpf_source);
	if (rc == 0)
		rc = clang_compile(res.bpf_source, &opts, &dl, &res.object, &res.object_sz,
				   &res.cache_hit);
	if (rc != 0 || !res.object) {
		fprintf(rep, "FAIL %s: explain accepts it, but it does not compile (%d):\n", label,
			rc);
		diag_print(&dl, rep, false);
		v = V_FAIL;
		goto out;
	}
	rc = load_object(res.plan, res.object, res.object_sz);
	if (rc != 0) {
		fprintf(rep, "FAIL %s: compiles, but does not load (%s); the log ends:\n", label,
			strerror(-rc));
		print_log_tail(rep);
		v = V_FAIL;
	}
out:
	if (v == V_FAIL)
		fprintf(rep, "---- query ----\n%s\n----\n", src);
	compile_result_free(&res);
	diag_list_free(&dl);
	return v;
}

struct query_file {
	char label[512];
	char *src;
};

/* Appends the queries of dir (relative to the source tree) to *v. */
static void collect(const char *sub, const char *ext, struct query_file **v, int *nv)
{
	char dir[4096], path[4608];
	char **names;
	int n;

	snprintf(dir, sizeof(dir), "%s/%s", source_dir(), sub);
	names = dir_list(dir, ext, &n);
	if (n == 0)
		fail_msg("no queries in %s", dir);
	*v = realloc(*v, (size_t)(*nv + n) * sizeof(**v));
	assert_non_null(*v);
	for (int i = 0; i < n; i++) {
		struct query_file *q = &(*v)[(*nv)++];

		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		snprintf(q->label, sizeof(q->label), "%s/%s", sub, names[i]);
		q->src = file_read(path);
		if (!q->src)
			fail_msg("%s: cannot read: %s", path, strerror(errno));
		free(names[i]);
	}
	free(names);
}

/*
 * Worker `k` of `nw`: checks queries k, k + nw, ...; each failure's report is written to
 * stderr in one piece, and the counts (ok, skipped, failed) to fd.  Runs in a child.
 */
static void worker(const struct query_file *v, int n, int k, int nw, int fd)
{
	int counts[3] = { 0, 0, 0 };

	for (int i = k; i < n; i += nw) {
		char *buf = NULL;
		size_t len = 0;
		FILE *rep = open_memstream(&buf, &len);
		enum verdict verdict;

		if (!rep)
			_exit(2);
		verdict = check_query(v[i].label, v[i].src, rep);
		fclose(rep);
		counts[verdict == V_OK ? 0 : verdict == V_SKIP ? 1 : 2]++;
		if (len && write(STDERR_FILENO, buf, len) < 0)
			_exit(2);
		free(buf);
	}
	if (write(fd, counts, sizeof(counts)) != (ssize_t)sizeof(counts))
		_exit(2);
	_exit(0);
}

static void test_explained_queries_run(void **state)
{
	struct query_file *v = NULL;
	int nv = 0, nok = 0, nskip = 0, nfail = 0;
	pid_t pids[WORKERS];
	int fds[WORKERS];

	(void)state;
	collect("tests/fuzz/corpus/query", NULL, &v, &nv);
	collect("tests/compiler/ok", ".wq", &v, &nv);
	load_log = malloc(LOAD_LOG_MAX);
	assert_non_null(load_log);
	bpfrt_libbpf_setup();
	fflush(NULL);
	for (int k = 0; k < WORKERS; k++) {
		int p[2];

		assert_int_equal(pipe(p), 0);
		pids[k] = fork();
		assert_true(pids[k] >= 0);
		if (pids[k] == 0) {
			close(p[0]);
			worker(v, nv, k, WORKERS, p[1]);
		}
		close(p[1]);
		fds[k] = p[0];
	}
	for (int k = 0; k < WORKERS; k++) {
		int counts[3], ws;

		if (read(fds[k], counts, sizeof(counts)) != (ssize_t)sizeof(counts))
			memset(counts, 0, sizeof(counts));
		close(fds[k]);
		assert_int_equal(waitpid(pids[k], &ws, 0), pids[k]);
		if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0)
			fail_msg("worker %d died (status 0x%x)", k, ws);
		nok += counts[0];
		nskip += counts[1];
		nfail += counts[2];
	}
	print_message("%d queries pass explain and load, %d fail, %d refused by explain "
		      "(skipped)\n",
		      nok, nfail, nskip);
	for (int i = 0; i < nv; i++)
		free(v[i].src);
	free(v);
	free(load_log);
	load_log = NULL;
	assert_int_equal(nok + nskip + nfail, nv);
	if (nfail)
		fail_msg("%d queries pass `weft explain` but do not run (listed above)", nfail);
	/* the corpus must keep exercising the loader, not only the parser */
	assert_true(nok >= 20);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_explained_queries_run),
	};

	if (geteuid() != 0) {
		fprintf(stderr, "skipped: loading BPF programs needs root\n");
		return 77;
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
