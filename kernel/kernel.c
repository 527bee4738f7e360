// SPDX-License-Identifier: Apache-2.0
/*
 * User-space face of kernel/: looking up the embedded runtime headers by name.
 */
#include <string.h>
#include "kernel/kernel.h"
#include "kernel/kernel_embed.h"

const char *kernel_header_text(const char *name, size_t *len)
{
	for (const struct kernel_embed_file *f = kernel_embed_files; f->name; f++) {
		if (strcmp(f->name, name) == 0) {
			if (len)
				*len = f->len;
			return f->data;
		}
	}
	return NULL;
}
