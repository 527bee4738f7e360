/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Types that cross the kernel/user boundary, included by both the BPF runtime and the agent.
 * Placeholder until the runtime lands (issue 3).
 */
#ifndef WEFT_ABI_H
#define WEFT_ABI_H
#define WEFT_ABI_VERSION 1
#endif
