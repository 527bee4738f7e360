// SPDX-License-Identifier: Apache-2.0
/*
 * File-driven compiler tests (as DTrace's test suite): every tests/compiler/err/TAG.N.wq must
 * fail to compile (through PASS_PLAN) with TAG as its first error, every
 * tests/compiler/warn/TAG.N.wq must compile with no error and TAG as its first warning, and
 * every tests/compiler/ok/NAME.wq must compile with no error, with each of its
 * `-- expect: TEXT` lines found in the plan dump (outside its `query` line, which quotes the
 * source).  An err or warn file with the line `-- pid: exited` is compiled as with
 * `-p PID` of a process that has exited (a child of this test, reaped).  Adding a case is
 * adding a file.  Every failing file is reported by name before the test fails, so one run
 * shows all of them.
 *
 * The ok files resolve real probes (tracefs, ELF files), so this test needs the machine's
 * kernel and, for some, root; it does not load or attach anything.
 */
#include <dirent.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>
#include "compiler/compiler.h"
#include "compiler/diag.h"
#include "tests/skip.h"

static const char *source_dir(void)
{
	const char *d = getenv("WEFT_SOURCE_DIR");

	return d && *d ? d : WEFT_SOURCE_DIR;
}

static char *file_read(const char *path)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	size_t sz = 0, n;
	char chunk[4096];
	FILE *m;

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

/* The sorted *.wq file names of dir; *n set.  The caller frees each and the array. */
static char **wq_list(const char *dir, int *n)
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

		if (len < 4 || strcmp(de->d_name + len - 3, ".wq") != 0)
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

static const struct diag *first_of(const struct diag_list *dl, enum diag_severity sev)
{
	for (int i = 0; i < dl->n; i++)
		if (dl->v[i].sev == sev)
			return &dl->v[i];
	return NULL;
}

/* Whether src has `line` as one of its lines. */
static bool has_line(const char *src, const char *line)
{
	size_t len = strlen(line);

	for (const char *s = src; s; s = strchr(s, '\n'), s = s ? s + 1 : NULL)
		if (strncmp(s, line, len) == 0 && (s[len] == '\n' || s[len] == '\r' || !s[len]))
			return true;
	return false;
}

/* The pid of a process that has exited: a child of ours, reaped, so no process has it (until
 * the kernel hands it out again, which takes a wrap of the pid space). */
static pid_t pid_exited(void)
{
	pid_t pid = fork();
	int status;

	assert_true(pid >= 0);
	if (pid == 0)
		_exit(0);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	return pid;
}

/*
 * 0 if the err (sev DIAG_ERROR) or warn (DIAG_WARNING) file behaves, else -1 after printing
 * why: an err file fails with its tag as the first error, a warn file compiles with no error
 * and its tag as the first warning; either with a place in the text.
 */
static int tag_file_check(const char *dir, const char *name, enum diag_severity sev)
{
	char path[4096], want[128];
	const struct diag *d;
	struct compile_opts opts = { .sz = sizeof(opts) };
	struct compile_result res;
	struct diag_list dl;
	FILE *null;
	char *src;
	int rc, ret = -1;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	snprintf(want, sizeof(want), "%.*s", (int)strcspn(name, "."), name);
	if (diag_tag_lookup(want) == DIAG__COUNT) {
		print_message("%s: '%s' is not a tag of diag_tags.def\n", name, want);
		return -1;
	}
	src = file_read(path);
	if (!src) {
		print_message("%s: cannot read: %s\n", name, strerror(errno));
		return -1;
	}
	if (has_line(src, "-- pid: exited"))
		opts.pid = pid_exited();
	/* a kernel without BTF: the types are looked for in a file that does not exist */
	if (has_line(src, "-- btf: missing"))
		assert_int_equal(setenv("WEFT_BTF", "/nonexistent/weft-test/vmlinux", 1), 0);
	diag_list_init(&dl, src, path); /* the path: a `using` file resolves next to it */
	rc = compiler_run(src, &opts, PASS_PLAN, &dl, &res);
	unsetenv("WEFT_BTF");
	d = first_of(&dl, sev);
	if (sev == DIAG_ERROR && rc == 0)
		print_message("%s: compiled, but should fail with %s\n", name, want);
	else if (sev == DIAG_WARNING && (rc != 0 || dl.nerrors))
		print_message("%s: does not compile (%d), but should, warning %s\n", name, rc,
			      want);
	else if (!d)
		print_message("%s: %s (%d) without a %s, want %s\n", name,
			      rc ? "failed" : "compiled", rc,
			      sev == DIAG_ERROR ? "diagnostic" : "warning", want);
	else if (strcmp(diag_tag_name(d->tag), want) != 0)
		print_message("%s: first %s is %s (%s), want %s\n", name,
			      sev == DIAG_ERROR ? "error" : "warning", diag_tag_name(d->tag),
			      d->msg, want);
	else if (d->loc.line == 0 || d->loc.off > strlen(src))
		print_message("%s: %s has no place in the text\n", name, want);
	else
		ret = 0;
	/* Printing must work for every error (and is what users see). */
	null = fopen("/dev/null", "w");
	assert_non_null(null);
	diag_print(&dl, null, false);
	diag_print(&dl, null, true);
	fclose(null);
	if (ret < 0)
		diag_print(&dl, stderr, false);
	compile_result_free(&res);
	diag_list_free(&dl);
	free(src);
	return ret;
}

static int err_file_check(const char *dir, const char *name)
{
	return tag_file_check(dir, name, DIAG_ERROR);
}

static int warn_file_check(const char *dir, const char *name)
{
	return tag_file_check(dir, name, DIAG_WARNING);
}

/*
 * The `-- codegen: TEXT` (must appear) and `-- codegen-not: TEXT` (must not) lines of an ok
 * file, checked against the BPF C it generates: for properties of the generated code that
 * running it cannot show (what it includes, which kernel struct members it declares), never
 * for whole programs.  The number of such lines, or -1 after printing what failed.
 */
static int codegen_check(const char *name, const char *src, const char *bpf)
{
	char *copy = strdup(src), *line, *save = NULL;
	const char *code = bpf ? strstr(bpf, "*/") : NULL; /* past the comment quoting the query */
	int n = 0, bad = 0;

	assert_non_null(copy);
	for (line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		bool not = strncmp(line, "-- codegen-not: ", 16) == 0;
		char *text;

		if (!not &&strncmp(line, "-- codegen: ", 12) != 0)
			continue;
		text = line + (not ? 16 : 12);
		text[strcspn(text, "\r")] = '\0';
		n++;
		if (!code || (strstr(code, text) != NULL) == not ) {
			print_message("%s: generated C %s '%s'\n", name, not ? "has" : "lacks",
				      text);
			bad++;
		}
	}
	free(copy);
	if (bad && bpf)
		fprintf(stderr, "---- generated C of %s ----\n%s----\n", name, bpf);
	return bad ? -1 : n;
}

/* 0 if the ok file compiles and its plan holds every expected line, else -1. */
static int ok_file_check(const char *dir, const char *name)
{
	struct compile_opts opts = { .sz = sizeof(opts), .dump = 1u << PASS_PLAN };
	struct compile_result res;
	struct diag_list dl;
	char path[4096];
	char *src, *dump = NULL, *line, *save = NULL, *copy;
	size_t dumpsz = 0;
	int rc, ret = 0, nexpect = 0;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	src = file_read(path);
	if (!src) {
		print_message("%s: cannot read: %s\n", name, strerror(errno));
		return -1;
	}
	opts.dump_out = open_memstream(&dump, &dumpsz);
	assert_non_null(opts.dump_out);
	diag_list_init(&dl, src, path); /* the path: a `using` file resolves next to it */
	rc = compiler_run(src, &opts, strstr(src, "\n-- codegen") ? PASS_CODEGEN : PASS_PLAN, &dl,
			  &res);
	fclose(opts.dump_out);
	if (rc != 0 || dl.nerrors) {
		print_message("%s: does not compile (%d)\n", name, rc);
		diag_print(&dl, stderr, false);
		ret = -1;
		goto out;
	}
	/* The manifest carries the query text itself (its `query` line): blank that line so
	 * an expectation can never be met by the query merely quoting it. */
	for (char *q = dump; q && *q;) {
		char *eol = strchr(q, '\n');

		if (strncmp(q, "query ", 6) == 0)
			memset(q, ' ', eol ? (size_t)(eol - q) : strlen(q));
		q = eol ? eol + 1 : NULL;
	}
	copy = strdup(src);
	assert_non_null(copy);
	for (line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		const char *tag = "-- expect: ";
		char *text = strstr(line, tag);

		if (!text || text != line + strspn(line, " \t"))
			continue;
		text += strlen(tag);
		text[strcspn(text, "\r")] = '\0';
		nexpect++;
		if (!strstr(dump, text)) {
			print_message("%s: plan lacks '%s'\n", name, text);
			ret = -1;
		}
	}
	free(copy);
	if (ret < 0)
		fprintf(stderr, "---- plan of %s ----\n%s----\n", name, dump);
	if (strstr(src, "\n-- codegen")) {
		int nc = codegen_check(name, src, res.bpf_source);

		if (nc < 0)
			ret = -1;
		else
			nexpect += nc;
	}
	if (nexpect == 0)
		print_message("%s: note: no `-- expect:` lines, only compilation is checked\n",
			      name);
out:
	compile_result_free(&res);
	diag_list_free(&dl);
	free(dump);
	free(src);
	return ret;
}

static void run_dir(const char *sub, int (*check)(const char *, const char *))
{
	char dir[4096];
	char **names;
	int n, bad = 0;

	snprintf(dir, sizeof(dir), "%s/tests/compiler/%s", source_dir(), sub);
	names = wq_list(dir, &n);
	if (n == 0)
		fail_msg("no .wq files in %s", dir);
	for (int i = 0; i < n; i++) {
		if (check(dir, names[i]) < 0)
			bad++;
		free(names[i]);
	}
	free(names);
	print_message("%s: %d files, %d failing\n", sub, n, bad);
	if (bad)
		fail_msg("%d of %d files in tests/compiler/%s fail (listed above)", bad, n, sub);
}

static void test_err_files(void **state)
{
	(void)state;
	run_dir("err", err_file_check);
}

static void test_warn_files(void **state)
{
	(void)state;
	run_dir("warn", warn_file_check);
}

static void test_ok_files(void **state)
{
	(void)state;
	run_dir("ok", ok_file_check);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_err_files),
		cmocka_unit_test(test_warn_files),
		cmocka_unit_test(test_ok_files),
	};

	if (!wt_root("the .wq files' probes are resolved in tracefs and perf events"))
		return WT_SKIP;
	return wt_status(cmocka_run_group_tests(tests, NULL, NULL));
}
