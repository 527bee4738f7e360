// SPDX-License-Identifier: Apache-2.0
/*
 * libFuzzer target for query text, the compiler's untrusted input: any byte string must come
 * back as a tree or as diagnostics, never as a crash, a hang, a leak or undefined behaviour.
 * Each input is parsed; if it parses it is also compiled through PASS_PLAN (sema resolves
 * its probes against the running kernel, read-only), and the diagnostics are printed to
 * /dev/null in both colour modes, so the caret renderer sees every place the passes produce.
 *
 * Seeds: tests/fuzz/corpus/query/ (the spec's examples and the compiler test files).
 *   build-fuzz/tests/fuzz_query -max_total_time=60 -max_len=4096 tests/fuzz/corpus/query
 * Define WEFT_FUZZ_PARSE_ONLY to fuzz the parser alone (fast, no kernel).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "compiler/ast.h"
#include "compiler/compiler.h"
#include "compiler/diag.h"
#include "compiler/parser.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static FILE *fuzz_null(void)
{
	static FILE *null;

	if (!null)
		null = fopen("/dev/null", "w");
	return null;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct diag_list dl;
	struct ast_query *q;
	char *src;

	/* Queries are C strings: the text ends at the first NUL, as it would from argv. */
	src = malloc(size + 1);
	if (!src)
		return 0;
	memcpy(src, data, size);
	src[size] = '\0';

	diag_list_init(&dl, src, "fuzz");
	q = parse_query(src, &dl);
	if (q) {
		/* The printers must cope with any tree the parser accepts. */
		ast_dump(q, fuzz_null());
		ast_query_free(q);
#ifndef WEFT_FUZZ_PARSE_ONLY
		{
			struct compile_opts opts = { .sz = sizeof(opts) };
			struct compile_result res;

			diag_list_free(&dl);
			diag_list_init(&dl, src, "fuzz");
			compiler_run(src, &opts, PASS_PLAN, &dl, &res);
			compile_result_free(&res);
		}
#endif
	}
	diag_print(&dl, fuzz_null(), false);
	diag_print(&dl, fuzz_null(), true);
	diag_list_free(&dl);
	free(src);
	return 0;
}
