/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kernel/ — the BPF-side runtime that generated programs include.  This header is its small
 * user-space face: the embedded runtime headers, by name.
 */
#ifndef WEFT_KERNEL_H
#define WEFT_KERNEL_H
#include <stddef.h>

/* The text of an embedded runtime header ("weft.bpf.h", ...), or NULL. */
const char *kernel_header_text(const char *name, size_t *len);

#endif
