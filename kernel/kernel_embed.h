/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The BPF runtime headers of kernel/, embedded in the weft binary so that the code generator
 * can hand them to clang without an installed copy.  The table ends with a NULL name.
 */
#ifndef WEFT_KERNEL_EMBED_H
#define WEFT_KERNEL_EMBED_H
#include <stddef.h>

struct kernel_embed_file {
	const char *name;
	const char *data; /* NUL-terminated */
	size_t len;
};

extern const struct kernel_embed_file kernel_embed_files[];

#endif
