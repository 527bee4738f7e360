/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Skipping what cannot run here, so that ctest reports it as skipped, never as passed.
 *
 * ctest counts exit status 77 as "skipped" (SKIP_RETURN_CODE, set for every test in
 * tests/CMakeLists.txt).  An executable none of whose tests can run here (not root, a kernel
 * feature missing) prints "skipped: REASON" on stderr and returns WT_SKIP from main() before
 * cmocka_run_group_tests().  A test that cannot run while the others of its group can (a
 * program that is not installed) calls wt_skip("REASON", ...): the reason is printed and
 * cmocka skips that test; main() returns wt_status(cmocka_run_group_tests(...)), which is
 * the number of failed tests if any failed, else WT_SKIP if any test skipped, else 0.  So an
 * executable passes only if every one of its tests ran and passed.
 *
 * Header-only, for the cmocka tests (one executable each): include <cmocka.h> first.
 */
#ifndef WEFT_TEST_SKIP_H
#define WEFT_TEST_SKIP_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <unistd.h>

#define WT_SKIP 77 /* ctest's SKIP_RETURN_CODE */

static int wt_skipped; /* tests of this executable that called wt_skip() */

static inline void wt_skip_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline void wt_skip_note(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("skipped: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	wt_skipped++;
}

/* Skips the running cmocka test, printing why; the executable then exits WT_SKIP. */
#define wt_skip(...)                       \
	do {                               \
		wt_skip_note(__VA_ARGS__); \
		skip();                    \
	} while (0)

/* Skips the running test if why (a reason) is set: what a group setup found missing. */
#define wt_skip_if(why)                       \
	do {                                  \
		if (why) {                    \
			wt_skip("%s", (why)); \
			return;               \
		}                             \
	} while (0)

/* main()'s status from cmocka_run_group_tests()'s: failures, else WT_SKIP if a test skipped. */
static inline int wt_status(int failed)
{
	if (failed)
		return failed;
	if (wt_skipped) {
		fprintf(stderr,
			"skipped: %d test%s of this executable could not run here (see above)\n",
			wt_skipped, wt_skipped == 1 ? "" : "s");
		return WT_SKIP;
	}
	return 0;
}

/* Whether this process is root; if not, prints why the executable skips (why: what needs it). */
static inline bool wt_root(const char *why)
{
	if (geteuid() == 0)
		return true;
	fprintf(stderr, "skipped: needs root (%s)\n", why);
	return false;
}

#endif
