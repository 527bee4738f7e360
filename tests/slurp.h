/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A whole file as a C string, for tests (cmocka must be included first): base/file.h's
 * weft_file_read() with the test failing, and saying why, when the file cannot be read.
 */
#ifndef WEFT_TESTS_SLURP_H
#define WEFT_TESTS_SLURP_H
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "base/file.h"

#define TEST_SLURP_MAX (256ULL << 20)

/* The file at path (malloc'd, NUL-terminated); a file that cannot be read fails the test. */
static inline char *test_slurp(const char *path)
{
	char why[256], *data = NULL;
	size_t len = 0;

	if (weft_file_read(path, TEST_SLURP_MAX, &data, &len, why, sizeof(why)) != 0)
		fail_msg("%s: %s", path, why);
	return data;
}

/* The same, a file that does not exist (yet) reading as "". */
static inline char *test_slurp_or_empty(const char *path)
{
	char why[256], *data = NULL;
	size_t len = 0;
	int rc = weft_file_read(path, TEST_SLURP_MAX, &data, &len, why, sizeof(why));

	if (rc == -ENOENT)
		return strdup("");
	if (rc != 0)
		fail_msg("%s: %s", path, why);
	return data;
}

#endif
