// SPDX-License-Identifier: Apache-2.0
/* placeholder: the xtrace importer is not written yet */
#include "graph/import_priv.h"

int imp_xtrace(struct imp *im, json_t *root)
{
	(void)root;
	return imp_fail(im, "the xtrace importer is not written yet");
}
