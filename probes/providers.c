// SPDX-License-Identifier: Apache-2.0
/*
 * The provider registry: one array, one line per provider (DTrace-style).  Each provider's
 * operations live in its own file (tracepoint.c, syscall.c, uprobe.c, usdt.c, kprobe.c,
 * timer.c, perf.c).  Adding a provider: write its file, add its line here.
 */
#include <string.h>
#include "probes/probes.h"
#include "probes/provider.h"

const struct probe_provider *const probe_providers[] = {
	&provider_tracepoint, &provider_syscall,  &provider_uprobe,    &provider_uretprobe,
	&provider_usdt,	      &provider_kprobe,	  &provider_kretprobe, &provider_profile,
	&provider_interval,   &provider_software, &provider_hardware,  NULL,
};

const struct probe_provider *probe_provider_find(const char *name)
{
	for (int i = 0; probe_providers[i]; i++) {
		const struct probe_provider *p = probe_providers[i];

		if (strcmp(p->name, name) == 0 || (p->alias && strcmp(p->alias, name) == 0))
			return p;
	}
	return NULL;
}

const struct probe_provider *probe_provider_get(enum probe_kind kind)
{
	for (int i = 0; probe_providers[i]; i++)
		if (probe_providers[i]->kind == kind)
			return probe_providers[i];
	return NULL;
}

const char *probe_kind_name(enum probe_kind k)
{
	const struct probe_provider *p = probe_provider_get(k);

	return p ? p->name : "none";
}
