// SPDX-License-Identifier: Apache-2.0
/* libbabeltrace2 opened on first use (bt_dl.h says why); kept open for the process's life. */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>

#define WEFT_BT_DL_IMPL
#include "graph/bt_dl.h"

struct weft_bt_fns weft_bt;
static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static bool load_ok;
static char load_error[320];

static void load_open(void)
{
	void *lib = dlopen(WEFT_BT_SONAME, RTLD_NOW | RTLD_LOCAL);
	const char *missing = NULL, *e;

	if (!lib) {
		e = dlerror();
		snprintf(load_error, sizeof(load_error),
			 "cannot open libbabeltrace2, which reading CTF traces needs: %s (Debian: "
			 "apt-get install libbabeltrace2-0)",
			 e ? e : WEFT_BT_SONAME);
		return;
	}
#define WEFT_BT_SYM(n)                                            \
	if (!(*(void **)&weft_bt.n = dlsym(lib, #n)) && !missing) \
		missing = #n;
	WEFT_BT_FUNCS(WEFT_BT_SYM)
#undef WEFT_BT_SYM
	if (missing) {
		snprintf(load_error, sizeof(load_error),
			 "%s has no %s (babeltrace2 2.0 or later is needed)", WEFT_BT_SONAME,
			 missing);
		dlclose(lib);
		return;
	}
	load_ok = true;
}

int weft_bt_load(char *why, size_t sz)
{
	pthread_once(&load_once, load_open);
	if (load_ok)
		return 0;
	if (why && sz)
		snprintf(why, sz, "%s", load_error);
	errno = ELIBACC;
	return -ELIBACC;
}
