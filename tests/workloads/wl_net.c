// SPDX-License-Identifier: Apache-2.0
/*
 * Test workload: known TCP connections and known argument vectors, for the tests of ntop(),
 * sockport() and join() (tests/runtime/test_run_net.c).
 *
 * Usage: wl_net tcp N4 N42 N6
 *   Listens on 127.0.0.1, 127.0.0.2 and ::1 (one ephemeral port each) and makes N4, N42 and
 *   N6 connections to them, one connect() each, accepting and closing each; then prints
 *     wl_net pid P port4 A port42 B port6 C
 *   (ports in host order).  127.0.0.2 is loopback too (all of 127/8 is).  Its connect() calls
 *   are exactly those: one per connection, nothing else in the process connects.
 * Usage: wl_net exec
 *   Runs /bin/true (fork, execve, wait) with each of the argument vectors of wl_net_argvs()
 *   below, in order, then prints "wl_net exec P" (its pid: the children's parent).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static int listen_on(int family, const char *addr, int *port)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	int fd = socket(family, SOCK_STREAM, 0);

	memset(&ss, 0, sizeof(ss));
	if (family == AF_INET) {
		struct sockaddr_in *in = (struct sockaddr_in *)&ss;

		in->sin_family = AF_INET;
		inet_pton(AF_INET, addr, &in->sin_addr);
		len = sizeof(*in);
	} else {
		struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;

		in6->sin6_family = AF_INET6;
		inet_pton(AF_INET6, addr, &in6->sin6_addr);
		len = sizeof(*in6);
	}
	if (fd < 0 || bind(fd, (struct sockaddr *)&ss, len) != 0 || listen(fd, 64) != 0) {
		perror("wl_net: listen");
		exit(1);
	}
	len = sizeof(ss);
	getsockname(fd, (struct sockaddr *)&ss, &len);
	*port = ntohs(family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port :
					  ((struct sockaddr_in6 *)&ss)->sin6_port);
	return fd;
}

static void connect_n(int lfd, int family, const char *addr, int port, long n)
{
	for (long i = 0; i < n; i++) {
		struct sockaddr_storage ss;
		socklen_t len;
		int fd = socket(family, SOCK_STREAM, 0), afd;

		memset(&ss, 0, sizeof(ss));
		if (family == AF_INET) {
			struct sockaddr_in *in = (struct sockaddr_in *)&ss;

			in->sin_family = AF_INET;
			in->sin_port = htons((uint16_t)port);
			inet_pton(AF_INET, addr, &in->sin_addr);
			len = sizeof(*in);
		} else {
			struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;

			in6->sin6_family = AF_INET6;
			in6->sin6_port = htons((uint16_t)port);
			inet_pton(AF_INET6, addr, &in6->sin6_addr);
			len = sizeof(*in6);
		}
		if (fd < 0 || connect(fd, (struct sockaddr *)&ss, len) != 0) {
			perror("wl_net: connect");
			exit(1);
		}
		afd = accept(lfd, NULL, NULL);
		if (afd < 0) {
			perror("wl_net: accept");
			exit(1);
		}
		close(fd);
		close(afd);
	}
}

static int run_tcp(long n4, long n42, long n6)
{
	int p4, p42, p6;
	int l4 = listen_on(AF_INET, "127.0.0.1", &p4);
	int l42 = listen_on(AF_INET, "127.0.0.2", &p42);
	int l6 = listen_on(AF_INET6, "::1", &p6);

	connect_n(l4, AF_INET, "127.0.0.1", p4, n4);
	connect_n(l42, AF_INET, "127.0.0.2", p42, n42);
	connect_n(l6, AF_INET6, "::1", p6, n6);
	printf("wl_net pid %d port4 %d port42 %d port6 %d\n", (int)getpid(), p4, p42, p6);
	return 0;
}

/* The argument vectors, NULL-terminated, up to 40 elements; the tests copy them. */
static char *long_arg(void)
{
	static char buf[301];

	memset(buf, 'x', 300);
	buf[300] = 0;
	return buf;
}

static char *pool_copy(const char *s)
{
	static char pool[8192];
	static size_t used;
	size_t n = strlen(s) + 1;
	char *r = pool + used;

	if (used + n > sizeof(pool))
		exit(3);
	memcpy(r, s, n);
	used += n;
	return r;
}

static int run_exec(void)
{
	static char *many[41];
	char num[20][4];
	char *v_empty[] = { NULL };
	char *v_one[] = { "/bin/true", NULL };
	char *v_words[] = { "/bin/true", "a", "b c", "", "d", NULL };
	char *v_long[] = { "/bin/true", long_arg(), NULL };
	char **vs[] = { v_empty, v_one, v_words, v_long, many };

	many[0] = "/bin/true";
	for (int i = 1; i <= 20; i++) {
		snprintf(num[i - 1], sizeof(num[i - 1]), "%d", i);
		many[i] = num[i - 1];
	}
	many[21] = NULL;
	/* the strings in memory this process has written, present in the children's page
	 * tables: a tracer reads them at execve's entry without faulting, which it cannot do
	 * for a string literal the child has not touched (file-backed, not yet mapped) */
	for (size_t k = 0; k < sizeof(vs) / sizeof(vs[0]); k++)
		for (char **a = vs[k]; *a; a++)
			*a = pool_copy(*a);
	for (size_t k = 0; k < sizeof(vs) / sizeof(vs[0]); k++) {
		pid_t pid = fork();
		int st;

		if (pid == 0) {
			char *envp[] = { NULL };

			execve("/bin/true", vs[k], envp);
			_exit(127);
		}
		if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) ||
		    WEXITSTATUS(st) != 0) {
			fprintf(stderr, "wl_net: exec %zu failed\n", k);
			return 1;
		}
	}
	printf("wl_net exec %d\n", (int)getpid());
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 5 && strcmp(argv[1], "tcp") == 0)
		return run_tcp(atol(argv[2]), atol(argv[3]), atol(argv[4]));
	if (argc == 2 && strcmp(argv[1], "exec") == 0)
		return run_exec();
	fprintf(stderr, "usage: wl_net tcp N4 N42 N6 | wl_net exec\n");
	return 2;
}
