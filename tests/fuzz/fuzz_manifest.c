// SPDX-License-Identifier: Apache-2.0
/*
 * libFuzzer target: manifest_read() on arbitrary bytes (manifests arrive from the network
 * in the cluster).  A manifest it accepts must also write and re-read identically.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "compiler/plan.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[256];
	struct plan *p = manifest_read((const char *)data, size, err, sizeof(err));
	char *a = NULL, *b = NULL;
	size_t la = 0, lb = 0;
	struct plan *q;
	FILE *f;

	if (!p)
		return 0;
	f = open_memstream(&a, &la);
	manifest_write(p, f);
	fclose(f);
	q = manifest_read(a, la, err, sizeof(err));
	if (!q)
		abort(); /* what we write we must read */
	f = open_memstream(&b, &lb);
	manifest_write(q, f);
	fclose(f);
	if (la != lb || memcmp(a, b, la) != 0)
		abort();
	plan_free(q);
	plan_free(p);
	free(a);
	free(b);
	return 0;
}
