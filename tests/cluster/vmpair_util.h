// SPDX-License-Identifier: Apache-2.0
/*
 * The cluster of test_cluster_vmsync and test_cluster_vmlive: a real aggregator and two real
 * agents, "vmhost" and "vmguest", on loopback, and a private copy of wl_vmsync_fake (its
 * fake hypercall is a USDT probe, and uprobes are by inode: no other test's process fires
 * the copy's).  Include after cluster_util.h, in one test file.
 */
#ifndef WEFT_TESTS_VMPAIR_UTIL_H
#define WEFT_TESTS_VMPAIR_UTIL_H

#include <fcntl.h>

struct fixture {
	struct cl cl;
	struct cl_proc *agg, *host, *guest;
	char wl[PATH_MAX], source[PATH_MAX + 64];
	int runs;
	bool failed;
};

static struct fixture *live;

/* The pair's agents, for cl_agents_idle(): each run starts once both are alive and idle. */
static const char *const VMPAIR_HOSTS[] = { "vmhost", "vmguest", NULL };

static void clean_at_exit(void)
{
	if (live && live->cl.dir[0]) {
		live->cl.passed = !live->failed;
		cl_fini(&live->cl);
		live->cl.dir[0] = 0;
	}
}

/* The group's set-up; copy names the workload's copy in the cluster's directory. */
static int vmpair_setup(void **state, const char *copy)
{
	struct fixture *f = calloc(1, sizeof(*f));

	if (!f)
		return -1;
	*state = f;
	live = f;
	atexit(clean_at_exit);
	f->failed = true;
	cl_init(&f->cl);
	cl_keygen(&f->cl, "agent", "vmhost", true);
	cl_keygen(&f->cl, "agent", "vmguest", true);
	f->agg = cl_aggregator(&f->cl, "agg", NULL, NULL, NULL);
	f->host = cl_agent(&f->cl, "vmhost", "agent-vmhost", NULL, NULL, true);
	f->guest = cl_agent(&f->cl, "vmguest", "agent-vmguest", NULL, NULL, true);
	snprintf(f->wl, sizeof(f->wl), "%s", cl_path(&f->cl, copy));
	cl_copy_file(wr_workload("wl_vmsync_fake"), f->wl);
	snprintf(f->source, sizeof(f->source), "usdt:%s:weft_fake:fake_kvm_hypercall", f->wl);
	f->failed = false;
	return 0;
}

static int group_teardown(void **state)
{
	struct fixture *f = *state;

	f->failed |= !f->cl.passed;
	clean_at_exit();
	live = NULL;
	free(f);
	return 0;
}

#endif
