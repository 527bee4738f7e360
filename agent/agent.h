/* SPDX-License-Identifier: Apache-2.0 */
/*
 * agent/ — loads a compiled query (BPF object + manifest), attaches its probes, flips
 * windows, reads and merges per-CPU aggregates, and hands finished windows to a sink
 * (the terminal for `weft run`, ZeroMQ for `weft agent`).  Issue 3.
 */
#ifndef WEFT_AGENT_H
#define WEFT_AGENT_H

const char *agent_version(void);

#endif
