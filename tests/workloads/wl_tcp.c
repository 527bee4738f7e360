// SPDX-License-Identifier: Apache-2.0
/*
 * Test workload: a known conversation over one TCP connection on loopback, so that a tracer
 * of socket sends and receives can assert its counts, ports, byte counts and stream sequence
 * numbers exactly.
 *
 * Usage: wl_tcp N [v6|mapped]
 *   The process (the server) listens on 127.0.0.1, an ephemeral port; it forks one child
 *   (the client), which connects and sends N messages, message i (0-based) of
 *   wl_tcp_msg_size(i) bytes, each with one send().  The server receives each message with
 *   one recv(MSG_WAITALL) of exactly its size; after every odd-numbered message (i = 1, 3,
 *   ...) it sends one reply of wl_tcp_reply_size(i) bytes, which the client receives with one
 *   recv(MSG_WAITALL) before it sends message i + 1.  So, on the connection:
 *     client: N sends, N / 2 receives; server: N receives, N / 2 sends;
 *   and no other send or receive (no read of EOF: each side stops after its last message).
 *   At the end the server prints one line:
 *     wl_tcp pid P child C server_port S client_port Q
 *   (P: the server's pid, the client's parent; C: the client's pid; ports in host order).
 *   v6: both ends are IPv6 sockets on ::1.  mapped: the server's are IPv6 sockets (listening
 *   on ::ffff:127.0.0.1, IPV6_V6ONLY off), the client's an IPv4 one connecting to 127.0.0.1,
 *   so the server's connection has v4-mapped addresses; the line then ends with
 *   " family F" (F: the family getsockname() gives the server's connection, 10).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

/* The sizes both sides (and the tests, which copy them) agree on: 1 to 3000 bytes. */
static size_t wl_tcp_msg_size(unsigned long i)
{
	return 1 + (i * 7919u) % 3000u;
}

static size_t wl_tcp_reply_size(unsigned long i)
{
	return 5 + i % 7u;
}

static char buf[4096];

static int send_all(int fd, size_t n)
{
	memset(buf, 'm', n);
	return send(fd, buf, n, 0) == (ssize_t)n ? 0 : -1;
}

static int recv_exact(int fd, size_t n)
{
	return recv(fd, buf, n, MSG_WAITALL) == (ssize_t)n ? 0 : -1;
}

static int client(unsigned short port, unsigned long n, bool v6)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
	struct sockaddr_in6 a6 = { .sin6_family = AF_INET6, .sin6_port = htons(port) };
	int fd = socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM, 0);

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	a6.sin6_addr = in6addr_loopback;
	if (fd < 0 || (v6 ? connect(fd, (struct sockaddr *)&a6, sizeof(a6)) :
			    connect(fd, (struct sockaddr *)&a, sizeof(a))) != 0) {
		perror("wl_tcp: connect");
		return 1;
	}
	for (unsigned long i = 0; i < n; i++) {
		if (send_all(fd, wl_tcp_msg_size(i)) != 0) {
			perror("wl_tcp: send");
			return 1;
		}
		if (i % 2 == 1 && recv_exact(fd, wl_tcp_reply_size(i)) != 0) {
			perror("wl_tcp: recv reply");
			return 1;
		}
	}
	close(fd);
	return 0;
}

/* The port of an IPv4 or IPv6 socket address, host order. */
static unsigned port_of(const struct sockaddr_storage *s)
{
	if (s->ss_family == AF_INET6)
		return ntohs(((const struct sockaddr_in6 *)s)->sin6_port);
	return ntohs(((const struct sockaddr_in *)s)->sin_port);
}

int main(int argc, char **argv)
{
	struct sockaddr_storage a = { 0 }, peer, mine;
	socklen_t len = sizeof(a);
	unsigned long n;
	int lfd, fd, status, off = 0;
	bool v6 = false, mapped = false;
	pid_t child;

	if (argc == 3) {
		v6 = strcmp(argv[2], "v6") == 0;
		mapped = strcmp(argv[2], "mapped") == 0;
	}
	if (argc < 2 || argc > 3 || (argc == 3 && !v6 && !mapped) ||
	    (n = strtoul(argv[1], NULL, 10)) == 0) {
		fprintf(stderr, "usage: wl_tcp N [v6|mapped]\n");
		return 2;
	}
	if (v6 || mapped) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&a;

		s6->sin6_family = AF_INET6;
		if (v6)
			s6->sin6_addr = in6addr_loopback;
		else /* ::ffff:127.0.0.1 */
			inet_pton(AF_INET6, "::ffff:127.0.0.1", &s6->sin6_addr);
		len = sizeof(*s6);
	} else {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&a;

		s4->sin_family = AF_INET;
		s4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		len = sizeof(*s4);
	}
	lfd = socket(a.ss_family, SOCK_STREAM, 0);
	if (lfd >= 0 && mapped)
		setsockopt(lfd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off));
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, len) != 0 || listen(lfd, 1) != 0 ||
	    (len = sizeof(a), getsockname(lfd, (struct sockaddr *)&a, &len)) != 0) {
		perror("wl_tcp: listen");
		return 1;
	}
	fflush(stdout);
	child = fork();
	if (child < 0) {
		perror("wl_tcp: fork");
		return 1;
	}
	if (child == 0) {
		close(lfd);
		_exit(client((unsigned short)port_of(&a), n, v6));
	}
	len = sizeof(peer);
	fd = accept(lfd, (struct sockaddr *)&peer, &len);
	if (fd < 0) {
		perror("wl_tcp: accept");
		return 1;
	}
	for (unsigned long i = 0; i < n; i++) {
		if (recv_exact(fd, wl_tcp_msg_size(i)) != 0) {
			perror("wl_tcp: recv");
			return 1;
		}
		if (i % 2 == 1 && send_all(fd, wl_tcp_reply_size(i)) != 0) {
			perror("wl_tcp: send reply");
			return 1;
		}
	}
	if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status)) {
		fprintf(stderr, "wl_tcp: the client failed\n");
		return 1;
	}
	len = sizeof(mine);
	if (getsockname(fd, (struct sockaddr *)&mine, &len) != 0) {
		perror("wl_tcp: getsockname");
		return 1;
	}
	close(fd);
	close(lfd);
	printf("wl_tcp pid %d child %d server_port %u client_port %u", (int)getpid(), (int)child,
	       port_of(&a), port_of(&peer));
	if (mapped)
		printf(" family %d", (int)mine.ss_family);
	printf("\n");
	return 0;
}
