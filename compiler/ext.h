/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Extensions (compiler/ext.c): `using 'FILE.bpf.c' from ...`, the functions of a user's BPF C
 * file made callable in the query.  Sema loads the file and its function signatures
 * (ext_load()) and resolves calls to them (ext_find()); codegen pastes the file into the
 * generated program, so the functions are compiled with it and verified by the kernel with
 * it, and they travel to agents inside the object.
 */
#ifndef WEFT_COMPILER_EXT_H
#define WEFT_COMPILER_EXT_H
#include <stdbool.h>
#include "compiler/ast.h"
#include "compiler/diag.h"

#define EXT_MAX_PARAMS 5 /* BPF passes five arguments in registers */
#define EXT_MAX_FNS 256
#define EXT_MAX_FILE (1u << 20) /* bytes of the user's file */

struct ext_fn {
	char *name;
	int nparams;
	char *ptype[EXT_MAX_PARAMS]; /* each parameter's type as the file writes it */
	bool pptr[EXT_MAX_PARAMS]; /* a pointer (else an integer) */
	char *rtype; /* the return type as written */
	bool ret_signed;
	const char *unsupported; /* NULL, or why a call cannot be made (a struct parameter...) */
};

struct ext_file {
	char *path; /* as resolved */
	char *src; /* its text */
	struct ext_fn *fns;
	int nfns;
};

/* Loads q->using_path (when the query has a `using` clause) into q->ext: the file relative
 * to the directory of the query's file (dl->name) or to the working directory, its
 * functions read through clang's JSON AST dump.  0, or -EINVAL with a diagnostic placed on
 * the path (E_EXT_FILE: missing or unreadable; E_EXT_PARSE: clang could not read it). */
int ext_load(struct ast_query *q, struct diag_list *dl);

/* The extension function called name, or NULL; *idx its index. */
const struct ext_fn *ext_find(const struct ext_file *x, const char *name, int *idx);

#endif
