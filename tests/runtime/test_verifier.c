// SPDX-License-Identifier: Apache-2.0
/*
 * A program the kernel's verifier rejects is reported with the generated line that caused
 * it and the verifier's own words, not a raw log dump (that needs -v).  The program is
 * compiled by weft's own clang driver, so it carries the same line info generated code has.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "agent/agent.h"
#include "compiler/codegen.h"
#include "compiler/compiler.h"
#include "tests/skip.h"

static const char bad_source[] = "#include \"weft.bpf.h\"\n"
				 "struct {\n"
				 "\t__uint(type, BPF_MAP_TYPE_HASH); /* a lookup can fail */\n"
				 "\t__uint(max_entries, 1);\n"
				 "\t__type(key, __u32);\n"
				 "\t__type(value, __u64);\n"
				 "} bad_map SEC(\".maps\");\n"
				 "SEC(\"tracepoint\")\n"
				 "int wp0(void *ctx)\n"
				 "{\n"
				 "\t__u32 k = 0;\n"
				 "\t__u64 *v = bpf_map_lookup_elem(&bad_map, &k);\n"
				 "\t*v += 1; /* no NULL check: the verifier must refuse */\n"
				 "\treturn 0;\n"
				 "}\n";

static void run(bool verbose, struct agent_err *err)
{
	const char *query = "from syscall:getppid select count()";
	struct compile_opts o = { .sz = sizeof(o) };
	struct agent_query_opts ao = { .sz = sizeof(ao), .verbose = verbose };
	struct compile_result res;
	struct diag_list dl;
	struct agent_query *q = NULL;
	void *obj = NULL;
	size_t obj_sz = 0;
	bool hit;

	diag_list_init(&dl, query, "query");
	assert_int_equal(compiler_run(query, &o, PASS_PLAN, &dl, &res), 0);
	assert_int_equal(clang_compile(bad_source, &o, &dl, &obj, &obj_sz, &hit), 0);
	assert_true(agent_query_start(res.plan, obj, obj_sz, &ao, &q, err) < 0);
	assert_null(q);
	free(obj);
	compile_result_free(&res);
	diag_list_free(&dl);
}

static void test_verifier_line(void **state)
{
	struct agent_err err;

	run(false, &err);
	assert_true(err.verifier);
	assert_false(err.attach);
	if (!strstr(err.detail, "generated line: \t*v += 1;") &&
	    !strstr(err.detail, "generated line: *v += 1;"))
		fail_msg("no generated line in:\n%s", err.detail);
	if (!strstr(err.detail, "verifier: ") || !strstr(err.detail, "invalid mem access"))
		fail_msg("no verifier message in:\n%s", err.detail);
	/* without -v, no raw log */
	assert_null(strstr(err.detail, "-- BEGIN PROG LOAD LOG --"));
	assert_true(strlen(err.detail) < 1024);
}

static void test_verifier_verbose(void **state)
{
	struct agent_err err;

	run(true, &err);
	assert_true(err.verifier);
	/* with -v, the log itself follows: instructions with their numbers */
	assert_non_null(strstr(err.detail, "processed "));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_verifier_line),
		cmocka_unit_test(test_verifier_verbose),
	};

	if (!wt_root("it loads a BPF program"))
		return WT_SKIP;
	return wt_status(cmocka_run_group_tests(tests, NULL, NULL));
}
