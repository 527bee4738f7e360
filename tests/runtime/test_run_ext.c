// SPDX-License-Identifier: Apache-2.0
/*
 * End to end, extensions: `using 'http.bpf.c'` (tests/data/ext/http.bpf.c) over the real
 * kernel.  `wl_perf requests N` calls wl_request(line, len) with HTTP request lines, GET for
 * i % 3 == 0, POST for 1, PUT for 2, path /item/i; the extension's http_method() and
 * http_item() read the line from the process's memory in the BPF program, compiled with the
 * query and verified by the kernel.  So the groups are exact: per method N/3 requests, and the
 * sum of the items of each is the sum of its i.  The query is read from a file in a temporary
 * directory that also holds the extension, and weft runs elsewhere: the path resolves relative
 * to the query's file.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <sys/stat.h>
#include "run_util.h"
#include "tests/skip.h"

#define N_REQ 300

static void copy_file(const char *from, const char *to)
{
	FILE *in = fopen(from, "r"), *out = fopen(to, "w");
	char buf[4096];
	size_t n;

	assert_non_null(in);
	assert_non_null(out);
	while ((n = fread(buf, 1, sizeof(buf), in)) > 0)
		assert_int_equal(fwrite(buf, 1, n, out), n);
	fclose(in);
	assert_int_equal(fclose(out), 0);
}

static void test_http_extension(void **state)
{
	char dir[] = "/tmp/weft-test-ext-XXXXXX", src[PATH_MAX], dst[PATH_MAX + 32];
	char qpath[PATH_MAX + 32], cmd[PATH_MAX + 32], line[128];
	long long sum[4] = { 0 }, cnt[4] = { 0 };
	struct wr_proc p;
	struct wr_json j;
	const struct wj *w;
	FILE *f;
	int rc;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(src, sizeof(src), "%s/tests/data/ext/http.bpf.c", getenv("WEFT_SOURCE_DIR"));
	snprintf(dst, sizeof(dst), "%s/http.bpf.c", dir);
	copy_file(src, dst);
	snprintf(qpath, sizeof(qpath), "%s/http.wq", dir);
	f = fopen(qpath, "w");
	assert_non_null(f);
	fprintf(f,
		"-- HTTP methods and items of wl_perf's requests, parsed in the kernel\n"
		"using 'http.bpf.c'\n"
		"from uprobe:%s:wl_request\n"
		"group by http_method(arg0) as m\n"
		"select count() as n, sum(http_item(arg0, arg1)) as items\n",
		wr_workload("wl_perf"));
	assert_int_equal(fclose(f), 0);
	snprintf(cmd, sizeof(cmd), "'%s' requests %d", wr_workload("wl_perf"), N_REQ);

	rc = wr_weft_run(&p, "--format", "json", "-c", cmd, "-f", qpath);
	if (rc)
		wr_dump(&p, "using");
	assert_int_equal(rc, 0);
	assert_true(wr_cut_line(&p.out, "wl_perf: ", line, sizeof(line)));
	for (int i = 0; i < N_REQ; i++) {
		cnt[1 + i % 3]++;
		sum[1 + i % 3] += i;
	}
	wr_json_lines(&p.out, &j);
	w = wr_one_window(&j);
	assert_int_equal(wr_nrows(w), 3);
	for (size_t r = 0; r < 3; r++) {
		long long m = wj_int_of(wr_row(w, r), "m");

		assert_true(m >= 1 && m <= 3);
		assert_int_equal(wj_int_of(wr_row(w, r), "n"), cnt[m]);
		assert_int_equal(wj_int_of(wr_row(w, r), "items"), sum[m]);
	}
	wr_json_free(&j);
	wr_free(&p);
	unlink(dst);
	unlink(qpath);
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = { cmocka_unit_test(test_http_extension) };

	if (!wr_ready())
		return WT_SKIP;
	return wt_status(cmocka_run_group_tests(tests, NULL, NULL));
}
