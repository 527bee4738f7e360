// SPDX-License-Identifier: Apache-2.0
/*
 * Reading files users name (base/file.c), the compile cache's digest (base/sha256.c) and
 * libbpf's error numbers in words (probe_bpf_strerror):
 *
 *  - only a regular file passes: /dev/zero, a FIFO (with no writer: the call must return,
 *    not wait), a socket and a directory are refused with their own code and a message
 *    naming what they are; a file over the limit is refused, one at the limit is read whole;
 *  - SHA-256 gives the FIPS 180-4 vectors, whole or fed in pieces of every size;
 *  - libbpf's codes 4000..4013 come out as libbpf's words, never "Unknown error 4001".
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include <bpf/libbpf.h>
#include "base/file.h"
#include "base/sha256.h"
#include "probes/probes.h"

static char dir[] = "/tmp/weft-file-test-XXXXXX";

static const char *path_in(const char *name)
{
	static char p[4][256];
	static int next;
	char *s = p[next++ % 4];

	snprintf(s, 256, "%s/%s", dir, name);
	return s;
}

static void write_bytes(const char *path, const char *s, size_t n)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	assert_int_equal(fwrite(s, 1, n, f), n);
	fclose(f);
}

static void expect_refused(const char *path, int code, const char *words)
{
	char why[160], *data = (char *)1;
	size_t len = 99;

	assert_int_equal(weft_file_open(path, 1 << 20, NULL, why, sizeof(why)), code);
	if (!strstr(why, words))
		fail_msg("%s: '%s' does not say '%s'", path, why, words);
	assert_int_equal(weft_file_read(path, 1 << 20, &data, &len, why, sizeof(why)), code);
	assert_null(data);
	assert_int_equal(len, 0);
}

static void test_not_regular(void **state)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int s;

	(void)state;
	expect_refused("/dev/zero", -ENODEV, "a character device, not a regular file");
	expect_refused("/dev/null", -ENODEV, "a character device");
	assert_int_equal(mkfifo(path_in("fifo"), 0600), 0);
	expect_refused(path_in("fifo"), -ENODEV, "a FIFO, not a regular file");
	expect_refused(dir, -EISDIR, "a directory");
	s = socket(AF_UNIX, SOCK_STREAM, 0);
	assert_true(s >= 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path_in("sock"));
	assert_int_equal(bind(s, (struct sockaddr *)&sa, sizeof(sa)), 0);
	expect_refused(path_in("sock"), -ENODEV, "a socket");
	close(s);
	expect_refused(path_in("none"), -ENOENT, strerror(ENOENT));
	/* a symbolic link to a FIFO is a FIFO */
	assert_int_equal(symlink(path_in("fifo"), path_in("link")), 0);
	expect_refused(path_in("link"), -ENODEV, "a FIFO");
	assert_string_equal(weft_file_strerror(-ENODEV),
			    "not a regular file (a FIFO, a device or a socket)");
}

static void test_limits(void **state)
{
	char buf[1000], *data, why[160];
	uint64_t size = 0;
	size_t len;
	int fd;

	(void)state;
	memset(buf, 'q', sizeof(buf));
	write_bytes(path_in("big"), buf, sizeof(buf));
	assert_int_equal(weft_file_read(path_in("big"), 999, &data, &len, why, sizeof(why)),
			 -EFBIG);
	assert_non_null(strstr(why, "1000 bytes, over the limit of 999"));
	assert_int_equal(weft_file_read(path_in("big"), 1000, &data, &len, why, sizeof(why)), 0);
	assert_int_equal(len, 1000);
	assert_memory_equal(data, buf, 1000);
	assert_int_equal(data[1000], 0); /* NUL-terminated */
	free(data);
	fd = weft_file_open(path_in("big"), 1000, &size, why, sizeof(why));
	assert_true(fd >= 0);
	assert_int_equal(size, 1000);
	close(fd);
	write_bytes(path_in("empty"), "", 0);
	assert_int_equal(weft_file_read(path_in("empty"), 10, &data, &len, why, sizeof(why)), 0);
	assert_int_equal(len, 0);
	assert_string_equal(data, "");
	free(data);
}

static void hex(const uint8_t *d, char out[65])
{
	for (int i = 0; i < 32; i++)
		snprintf(out + 2 * i, 3, "%02x", d[i]);
}

static void test_sha256(void **state)
{
	static const struct {
		const char *msg, *sum;
	} v[] = {
		{ "", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" },
		{ "abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" },
		{ "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
		  "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1" },
		{ "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopq"
		  "klmnopqrlmnopqrsmnopqrstnopqrstu",
		  "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1" },
	};
	uint8_t d[WEFT_SHA256_LEN];
	char h[65];
	struct weft_sha256 c;
	char *million;

	(void)state;
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		size_t n = strlen(v[i].msg);

		weft_sha256(v[i].msg, n, d);
		hex(d, h);
		assert_string_equal(h, v[i].sum);
		/* the same fed in pieces of every size */
		for (size_t step = 1; step <= 70; step++) {
			weft_sha256_init(&c);
			for (size_t off = 0; off < n; off += step)
				weft_sha256_update(&c, v[i].msg + off,
						   n - off < step ? n - off : step);
			weft_sha256_final(&c, d);
			hex(d, h);
			assert_string_equal(h, v[i].sum);
		}
	}
	million = malloc(1000000);
	assert_non_null(million);
	memset(million, 'a', 1000000);
	weft_sha256(million, 1000000, d);
	hex(d, h);
	assert_string_equal(h, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
	free(million);
}

static void test_libbpf_words(void **state)
{
	char want[128];

	(void)state;
	for (int e = __LIBBPF_ERRNO__START; e < __LIBBPF_ERRNO__END; e++) {
		const char *s = probe_bpf_strerror(-e);

		libbpf_strerror(e, want, sizeof(want));
		assert_string_equal(s, want);
		if (strstr(s, "Unknown error"))
			fail_msg("%d: '%s'", e, s);
	}
	assert_string_equal(probe_bpf_strerror(-LIBBPF_ERRNO__FORMAT), "BPF object format invalid");
	assert_string_equal(probe_bpf_strerror(-EPERM), strerror(EPERM));
	assert_string_equal(probe_bpf_strerror(ENOENT), strerror(ENOENT));
}

static int setup(void **state)
{
	(void)state;
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	const char *names[] = { "fifo", "sock", "link", "big", "empty" };

	(void)state;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		unlink(path_in(names[i]));
	rmdir(dir);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_not_regular),
		cmocka_unit_test(test_limits),
		cmocka_unit_test(test_sha256),
		cmocka_unit_test(test_libbpf_words),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
