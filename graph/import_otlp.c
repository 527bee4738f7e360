// SPDX-License-Identifier: Apache-2.0
/* placeholder: the otlp importer is not written yet */
#include "graph/import_priv.h"

int imp_otlp(struct imp *im, json_t *root, size_t vi)
{
	(void)root;
	(void)vi;
	return imp_fail(im, "the otlp importer is not written yet");
}
