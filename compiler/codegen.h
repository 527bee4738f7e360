/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Code generation: plan -> BPF C (codegen.c), and BPF C -> BPF ELF object through clang
 * with a compile cache (clangdrv.c).
 */
#ifndef WEFT_CODEGEN_H
#define WEFT_CODEGEN_H
#include <stdbool.h>
#include <stddef.h>
#include "compiler/ast.h"
#include "compiler/compiler.h"
#include "compiler/plan.h"

/* Writes the BPF C program of the plan to *out (malloc'd).  0 or -errno/-EINVAL. */
int codegen_emit(struct ast_query *q, struct plan *p, struct diag_list *dl, char **out);

/* Compiles BPF C to an object, or takes it from the cache.  0 or -EINVAL with diags. */
int clang_compile(const char *source, const struct compile_opts *o, struct diag_list *dl,
		  void **obj, size_t *obj_sz, bool *cache_hit);

#endif
