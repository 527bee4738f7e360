// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests of symbolization (probes/symbolize.c) against real processes and the running
 * kernel: a function of this test binary and a libc function, seen through our own
 * /proc/self/maps (PIE and shared library: the load bias must drop out), with offsets inside
 * them; a forked child that has exited gives hex; kallsyms's first text symbol and a syscall
 * handler come back by name.  The kernel half needs root (kptr_restrict hides addresses
 * otherwise) and skips without it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "probes/probes.h"
#include "tests/skip.h"

/* Not static and not inlined, so the binary's .symtab names it with a size. */
__attribute__((noinline, used)) int test_symbolize_marker(int x);
__attribute__((noinline, used)) int test_symbolize_marker(int x)
{
	volatile int y = x;

	return y * 7 + 3;
}

static void test_user_own_function(void **state)
{
	struct sym_cache *c = sym_cache_new();
	uint64_t addr = (uint64_t)(uintptr_t)&test_symbolize_marker;
	char buf[256];

	assert_non_null(c);
	assert_int_equal(sym_user(c, getpid(), addr, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "test_symbolize_marker");
	assert_int_equal(sym_user(c, getpid(), addr + 5, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "test_symbolize_marker+0x5");
	/* again, from the cache */
	assert_int_equal(sym_user(c, getpid(), addr + 1, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "test_symbolize_marker+0x1");
	sym_cache_free(c);
}

static void test_user_libc_function(void **state)
{
	struct sym_cache *c = sym_cache_new();
	void *getpid_addr = dlsym(RTLD_DEFAULT, "getpid"); /* libc's, never a PLT stub */
	void *malloc_addr = dlsym(RTLD_DEFAULT, "malloc");
	char buf[256];

	assert_non_null(c);
	assert_non_null(getpid_addr);
	assert_int_equal(sym_user(c, getpid(), (uint64_t)(uintptr_t)getpid_addr, buf, sizeof(buf)),
			 0);
	assert_string_equal(buf, "getpid"); /* not its alias __getpid */
	assert_int_equal(
		sym_user(c, getpid(), (uint64_t)(uintptr_t)getpid_addr + 2, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "getpid+0x2");
	assert_non_null(malloc_addr);
	assert_int_equal(sym_user(c, getpid(), (uint64_t)(uintptr_t)malloc_addr, buf, sizeof(buf)),
			 0);
	assert_string_equal(buf, "malloc");
	sym_cache_free(c);
}

static void test_user_fallbacks(void **state)
{
	struct sym_cache *c = sym_cache_new();
	uint64_t addr = (uint64_t)(uintptr_t)&test_symbolize_marker;
	char buf[256], want[64];
	int status;
	pid_t child;

	assert_non_null(c);
	/* an address nothing maps (the first page never is) */
	assert_int_equal(sym_user(c, getpid(), 0x10, buf, sizeof(buf)), -ENOENT);
	assert_string_equal(buf, "0x10");
	assert_int_equal(sym_user(c, getpid(), 0, buf, sizeof(buf)), -ENOENT);
	assert_string_equal(buf, "[unknown]");
	/* a process that has exited: hex, not an error that stops the caller */
	child = fork();
	assert_true(child >= 0);
	if (child == 0)
		_exit(0);
	assert_int_equal(waitpid(child, &status, 0), child);
	assert_true(sym_user(c, child, addr, buf, sizeof(buf)) < 0);
	snprintf(want, sizeof(want), "0x%" PRIx64, addr);
	assert_string_equal(buf, want);
	/* a buffer too small still gets a NUL-terminated prefix */
	assert_int_equal(sym_user(c, getpid(), addr, buf, 5), 0);
	assert_string_equal(buf, "test");
	sym_cache_free(c);
}

/* Reads kallsyms: the first global text symbol, the address of `name`, and the name the
 * aliases at that address go by (the first global one listed).  False if addresses are
 * hidden. */
static bool kallsyms_find(char *first, size_t firstsz, uint64_t *first_addr, const char *name,
			  uint64_t *addr, char *alias, size_t aliassz)
{
	char line[512], sym[256], type;
	unsigned long long a;
	FILE *f = fopen("/proc/kallsyms", "re");

	*first_addr = 0;
	*addr = 0;
	if (!f)
		return false;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%llx %c %255s", &a, &type, sym) != 3 || a == 0)
			continue;
		if (type == 'T' && !*first_addr) {
			snprintf(first, firstsz, "%s", sym);
			*first_addr = a;
		}
		if ((type == 't' || type == 'T') && strcmp(sym, name) == 0 && !*addr)
			*addr = a;
	}
	alias[0] = '\0';
	rewind(f);
	while (*addr && fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%llx %c %255s", &a, &type, sym) == 3 && a == *addr &&
		    type == 'T') {
			snprintf(alias, aliassz, "%s", sym);
			break;
		}
	}
	fclose(f);
	return *first_addr != 0;
}

static void test_kernel(void **state)
{
	struct sym_cache *c;
	char first[256], alias[256], want[300], buf[256];
	uint64_t first_addr, getpid_addr;

	if (!kallsyms_find(first, sizeof(first), &first_addr, "__x64_sys_getpid", &getpid_addr,
			   alias, sizeof(alias)))
		wt_skip("test_kernel: /proc/kallsyms shows no addresses (not root)");
	c = sym_cache_new();
	assert_non_null(c);
	assert_int_equal(sym_kernel(c, first_addr, buf, sizeof(buf)), 0);
	assert_string_equal(buf, first);
	if (getpid_addr && alias[0]) {
		/* __ia32_sys_getpid on this kernel: listed first of its global aliases */
		assert_int_equal(sym_kernel(c, getpid_addr, buf, sizeof(buf)), 0);
		assert_string_equal(buf, alias);
		assert_int_equal(sym_kernel(c, getpid_addr + 4, buf, sizeof(buf)), 0);
		snprintf(want, sizeof(want), "%s+0x4", alias);
		assert_string_equal(buf, want);
	}
	/* below every kernel symbol: a user-space address */
	assert_int_equal(sym_kernel(c, 0x1000, buf, sizeof(buf)), -ENOENT);
	assert_string_equal(buf, "0x1000");
	assert_int_equal(sym_kernel(c, 0, buf, sizeof(buf)), -ENOENT);
	assert_string_equal(buf, "[unknown]");
	sym_cache_free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_user_own_function),
		cmocka_unit_test(test_user_libc_function),
		cmocka_unit_test(test_user_fallbacks),
		cmocka_unit_test(test_kernel),
	};

	return wt_status(cmocka_run_group_tests(tests, NULL, NULL));
}
