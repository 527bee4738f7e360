/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internal to probes/: the provider objects registered in providers.c.
 */
#ifndef WEFT_PROBES_PROVIDER_H
#define WEFT_PROBES_PROVIDER_H
#include "probes/probes.h"

extern const struct probe_provider provider_tracepoint;
extern const struct probe_provider provider_syscall;
extern const struct probe_provider provider_uprobe;
extern const struct probe_provider provider_uretprobe;
extern const struct probe_provider provider_usdt;
extern const struct probe_provider provider_kprobe;
extern const struct probe_provider provider_kretprobe;
extern const struct probe_provider provider_profile;
extern const struct probe_provider provider_interval;

#endif
