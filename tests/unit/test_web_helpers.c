// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests of the web face's helpers (aggregator/web.h): the token comparison (equal only
 * for equal bytes and lengths, a prefix or an extension never), the --http address parser
 * (numeric IPv4 and IPv6, a port alone is loopback, loopback recognised, everything else
 * refused), the Prometheus label escaping, and web_start()'s refusals before anything is
 * served: off loopback without a token, a malformed address, a token file too short.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "aggregator/web.h"

static void test_token_equal(void **state)
{
	(void)state;
	assert_true(web_token_equal("abcdef", 6, "abcdef", 6));
	assert_false(web_token_equal("abcdef", 6, "abcdeg", 6));
	assert_false(web_token_equal("abcde", 5, "abcdef", 6));
	assert_false(web_token_equal("abcdef", 6, "abcde", 5));
	assert_false(web_token_equal("", 0, "a", 1));
	assert_true(web_token_equal("", 0, "", 0));
	/* a NUL inside is a byte like any other */
	assert_false(web_token_equal("ab\0d", 4, "ab\0e", 4));
}

static void listen_ok(const char *s, int family, uint16_t port, bool loop)
{
	struct sockaddr_storage ss;
	bool lb = !loop;

	assert_int_equal(web_parse_listen(s, &ss, &lb), 0);
	assert_int_equal(ss.ss_family, family);
	assert_int_equal(lb, loop);
	if (family == AF_INET)
		assert_int_equal(ntohs(((struct sockaddr_in *)&ss)->sin_port), port);
	else
		assert_int_equal(ntohs(((struct sockaddr_in6 *)&ss)->sin6_port), port);
}

static void test_parse_listen(void **state)
{
	struct sockaddr_storage ss;
	bool lb;
	static const char *const bad[] = { "",
					   ":",
					   "x:80",
					   "127.0.0.1:",
					   "1.2.3.4:65536",
					   "1.2.3.4:-1",
					   "[::1]80",
					   "[::1]:",
					   "::1:80",
					   "host.example:80",
					   "1.2.3.4:80x",
					   "[]:80",
					   "1.2.3:80",
					   "99999999999999999999" };

	(void)state;
	listen_ok("7480", AF_INET, 7480, true);
	listen_ok("127.0.0.1:7480", AF_INET, 7480, true);
	listen_ok("127.1.2.3:0", AF_INET, 0, true);
	listen_ok("localhost:80", AF_INET, 80, true);
	listen_ok("0.0.0.0:7480", AF_INET, 7480, false);
	listen_ok("10.0.0.5:65535", AF_INET, 65535, false);
	listen_ok("[::1]:7480", AF_INET6, 7480, true);
	listen_ok("[::]:7480", AF_INET6, 7480, false);
	listen_ok("[fe80::1]:1", AF_INET6, 1, false);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(web_parse_listen(bad[i], &ss, &lb), -EINVAL);
	assert_int_equal(web_parse_listen(NULL, &ss, &lb), -EINVAL);
}

static void test_prom_escape(void **state)
{
	char out[64];

	(void)state;
	assert_int_equal(web_prom_escape(out, sizeof(out), "plain"), 5);
	assert_string_equal(out, "plain");
	web_prom_escape(out, sizeof(out), "a\"b\\c\nd");
	assert_string_equal(out, "a\\\"b\\\\c\\nd");
	/* cut on a whole escape, always terminated */
	web_prom_escape(out, 4, "ab\"c");
	assert_string_equal(out, "ab");
}

static void test_start_refusals(void **state)
{
	char err[512], tok[] = "/tmp/weft-web-tokenXXXXXX";
	struct web_opts o = { .sz = sizeof(o), .listen = "0.0.0.0:0", .cluster = true };
	int fd;

	(void)state;
	err[0] = 0;
	assert_null(web_start(&o, err, sizeof(err)));
	assert_int_equal(errno, EINVAL);
	assert_non_null(strstr(err, "not a loopback address"));
	o.listen = "nowhere:80";
	assert_null(web_start(&o, err, sizeof(err)));
	assert_non_null(strstr(err, "not ADDR:PORT"));
	fd = mkstemp(tok);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "short\n", 6), 6);
	close(fd);
	o.listen = "0.0.0.0:0";
	o.token_file = tok;
	assert_null(web_start(&o, err, sizeof(err)));
	assert_non_null(strstr(err, "at least 16"));
	unlink(tok);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_token_equal),
		cmocka_unit_test(test_parse_listen),
		cmocka_unit_test(test_prom_escape),
		cmocka_unit_test(test_start_refusals),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
