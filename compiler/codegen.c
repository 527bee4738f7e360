// SPDX-License-Identifier: Apache-2.0
/*
 * BPF C code generation and the clang driver.  Placeholder until issue 3: both passes
 * report that they are not there yet, so that explain (which stops at the plan) works.
 */
#include <errno.h>
#include "compiler/codegen.h"

int codegen_emit(struct ast_query *q, struct plan *p, struct diag_list *dl, char **out)
{
	*out = NULL;
	return -ENOSYS;
}

int clang_compile(const char *source, const struct compile_opts *o, struct diag_list *dl,
		  void **obj, size_t *obj_sz, bool *cache_hit)
{
	return -ENOSYS;
}
