// SPDX-License-Identifier: Apache-2.0
/*
 * TEMPORARY: provider objects with names only, so that the tree links while the real
 * providers are written.  Each real provider file replaces its entry here; this file is
 * deleted when the last one lands.
 */
#include "probes/provider.h"

const struct probe_provider provider_tracepoint = { PROBE_TRACEPOINT, "tracepoint", "tp", 2, 2, "tracepoint:CATEGORY:EVENT" };
const struct probe_provider provider_syscall = { PROBE_SYSCALL, "syscall", NULL, 1, 1, "syscall:NAME" };
const struct probe_provider provider_uprobe = { PROBE_UPROBE, "uprobe", NULL, 2, 2, "uprobe:BINARY:FUNCTION[+OFFSET]" };
const struct probe_provider provider_uretprobe = { PROBE_URETPROBE, "uretprobe", NULL, 2, 2, "uretprobe:BINARY:FUNCTION" };
const struct probe_provider provider_usdt = { PROBE_USDT, "usdt", NULL, 2, 3, "usdt:BINARY:[PROVIDER:]NAME" };
const struct probe_provider provider_kprobe = { PROBE_KPROBE, "kprobe", NULL, 1, 1, "kprobe:FUNCTION[+OFFSET]" };
const struct probe_provider provider_kretprobe = { PROBE_KRETPROBE, "kretprobe", NULL, 1, 1, "kretprobe:FUNCTION" };
const struct probe_provider provider_profile = { PROBE_PROFILE, "profile", NULL, 1, 1, "profile:RATE (99hz, 10ms)" };
const struct probe_provider provider_interval = { PROBE_INTERVAL, "interval", NULL, 1, 1, "interval:PERIOD (1s, 100ms)" };
