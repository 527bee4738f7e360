// SPDX-License-Identifier: Apache-2.0
/*
 * The per-host agent.  Placeholder until local tracing lands (issue 3).
 */
#include "agent/agent.h"

const char *agent_version(void)
{
	return WEFT_VERSION;
}
