// SPDX-License-Identifier: Apache-2.0
/* placeholder */
#include <errno.h>
#include "graph/import.h"

int graph_export(FILE *f, const struct graph *g, enum graph_format fmt)
{
	(void)f;
	(void)g;
	(void)fmt;
	return -EINVAL;
}
