// SPDX-License-Identifier: Apache-2.0
/*
 * The compile cache: a repeated query skips clang (the object comes from the cache, byte
 * for byte), a different query does not, and a corrupt cache entry is detected and rebuilt
 * instead of being handed to the kernel.
 */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include "compiler/compiler.h"
#include "tests/skip.h"

static char dir[] = "/tmp/weft-cache-test-XXXXXX";

static void compile(const char *q, struct compile_result *res)
{
	struct compile_opts o = { .sz = sizeof(o), .cache_dir = dir };
	struct diag_list dl;

	diag_list_init(&dl, q, "query");
	assert_int_equal(compiler_run(q, &o, PASS_CLANG, &dl, res), 0);
	diag_list_free(&dl);
	assert_non_null(res->object);
}

/* The one cache entry's path (there must be exactly `expect` entries). */
static void entry(char *path, size_t sz, int expect)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;

	assert_non_null(d);
	while ((de = readdir(d)))
		if (strstr(de->d_name, ".o")) {
			snprintf(path, sz, "%s/%s", dir, de->d_name);
			n++;
		}
	closedir(d);
	assert_int_equal(n, expect);
}

static void test_cache(void **state)
{
	const char *q1 = "from syscall:getppid group by tid select count()";
	const char *q2 = "from syscall:getppid group by pid select count()";
	struct compile_result a, b, c, d;
	char path[4096];
	FILE *f;

	assert_non_null(mkdtemp(dir));
	compile(q1, &a);
	assert_false(a.cache_hit);
	entry(path, sizeof(path), 1);
	compile(q1, &b);
	assert_true(b.cache_hit);
	assert_int_equal(a.object_sz, b.object_sz);
	assert_memory_equal(a.object, b.object, a.object_sz);

	compile(q2, &c);
	assert_false(c.cache_hit);
	entry(path, sizeof(path), 2);

	/* corrupt q1's entry: it must be rebuilt, not used */
	compile_result_free(&c);
	{
		DIR *dd = opendir(dir);
		struct dirent *de;

		while ((de = readdir(dd)))
			if (strstr(de->d_name, ".o")) {
				snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
				f = fopen(path, "w");
				fputs("not an ELF object", f);
				fclose(f);
			}
		closedir(dd);
	}
	compile(q1, &d);
	assert_false(d.cache_hit);
	assert_int_equal(d.object_sz, a.object_sz);
	assert_memory_equal(d.object, a.object, a.object_sz);

	compile_result_free(&a);
	compile_result_free(&b);
	compile_result_free(&d);
	{
		DIR *dd = opendir(dir);
		struct dirent *de;

		while ((de = readdir(dd)))
			if (de->d_name[0] != '.' || strlen(de->d_name) > 2) {
				snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
				unlink(path);
			}
		closedir(dd);
	}
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cache),
	};

	if (!wt_root("compiling a query resolves its probes in tracefs and probes perf events"))
		return WT_SKIP;
	return wt_status(cmocka_run_group_tests(tests, NULL, NULL));
}
