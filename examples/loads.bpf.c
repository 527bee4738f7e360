// SPDX-License-Identifier: Apache-2.0
/*
 * loads.wq's extension: the kernel's load averages, read from its global `avenrun` (three
 * unsigned longs, fixed point with FSHIFT = 11 fraction bits: what /proc/loadavg prints).
 * `avenrun` is a typeless kernel symbol (`__ksym`): libbpf puts its address into the
 * program when the agent loads it (from /proc/kallsyms), so the object stays the same on
 * every host whatever its address there.
 */
extern const void avenrun __ksym;

/* avenrun[i] for i in 0..2 (1, 5 and 15 minutes), 0 for any other i or an unreadable word */
static __always_inline __u64 loadavg(__u64 i)
{
	unsigned long v = 0;

	if (i > 2)
		return 0;
	if (bpf_probe_read_kernel(&v, sizeof(v), (const char *)&avenrun + i * sizeof(v)))
		return 0;
	return v;
}
