/* SPDX-License-Identifier: Apache-2.0 */
/*
 * compiler/ — from query text to a BPF object and its manifest.
 *
 * The passes, in order, each a .c/.h pair with one entry point:
 *   parse    (lexer.c, parser.c)  text -> struct ast_query
 *   sema     (sema.c)             names, fields, types, aggregate placement, probe catalog
 *   plan     (plan.c)             what runs in the kernel, the agent, the cluster; the manifest
 *   codegen  (codegen.c)          plan -> BPF C                     (issue 3)
 *   clang    (clangdrv.c)         BPF C -> BPF ELF object, cached    (issue 3)
 * compiler_run() drives them and can dump the tree or plan after any pass.
 */
#ifndef WEFT_COMPILER_H
#define WEFT_COMPILER_H
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>
#include "compiler/diag.h"

enum compile_pass { PASS_PARSE, PASS_SEMA, PASS_PLAN, PASS_CODEGEN, PASS_CLANG, PASS__COUNT };

const char *compile_pass_name(enum compile_pass p);
enum compile_pass compile_pass_lookup(const char *name); /* PASS__COUNT if unknown */

struct compile_opts {
	size_t sz; /* sizeof(struct compile_opts) */
	pid_t pid; /* -p PID: libraries resolve through its maps; 0: none */
	unsigned dump; /* bit (1 << pass): print the tree/plan after that pass */
	FILE *dump_out; /* NULL: stdout */
	bool verbose;
	const char *cache_dir; /* NULL: default (~/.cache/weft or /var/cache/weft) */
};

struct ast_query;
struct plan;

struct compile_result {
	struct ast_query *ast;
	struct plan *plan;
	char *bpf_source; /* PASS_CODEGEN */
	void *object; /* PASS_CLANG: BPF ELF bytes */
	size_t object_sz;
	bool cache_hit;
};

/* Runs the passes up to and including `last`.  Returns 0, or -EINVAL with diagnostics in dl
 * (diag_list_init()ed by the caller with the same src), or another -errno. */
int compiler_run(const char *src, const struct compile_opts *opts, enum compile_pass last,
		 struct diag_list *dl, struct compile_result *res);
void compile_result_free(struct compile_result *res);

/* After PASS_SEMA: one line per probe of the query written with a wildcard, saying how many
 * sites it matched ("uprobe:libc:mem* matched 57 sites"; a site is a function, a tracepoint or
 * a USDT call site), each line starting with prefix.  Returns the number of lines. */
int compile_sites_print(const struct compile_result *res, const char *prefix, FILE *out);

#endif
