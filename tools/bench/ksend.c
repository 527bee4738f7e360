// SPDX-License-Identifier: Apache-2.0
/*
 * ksend N: what a traced TCP send costs its caller (tools/bench/ksend.sh).  One TCP
 * connection on loopback, TCP_NODELAY; a thread of this process reads everything the other
 * end receives; the main thread sends N messages of 16 bytes and prints the mean time of one
 * send() in ns.  Every send fires sock:sock_send_length, and the reader's reads fire
 * sock:sock_recv_length (fewer: a read may take several messages), so the difference between
 * a run with a tracer attached and one without is what the tracer's programs on those two
 * tracepoints cost the program that sends.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static int rfd;

static void *reader(void *arg)
{
	char b[65536];

	(void)arg;
	while (read(rfd, b, sizeof(b)) > 0)
		;
	return NULL;
}

int main(int argc, char **argv)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof(a);
	struct timespec t0, t1;
	char msg[16] = { 0 };
	int l, c, one = 1;
	pthread_t t;
	long n;

	if (argc != 2 || (n = atol(argv[1])) <= 0) {
		fprintf(stderr, "usage: ksend N\n");
		return 2;
	}
	l = socket(AF_INET, SOCK_STREAM, 0);
	c = socket(AF_INET, SOCK_STREAM, 0);
	if (l < 0 || c < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) || listen(l, 1) ||
	    getsockname(l, (struct sockaddr *)&a, &al) ||
	    connect(c, (struct sockaddr *)&a, sizeof(a)) || (rfd = accept(l, NULL, NULL)) < 0 ||
	    setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) ||
	    pthread_create(&t, NULL, reader, NULL)) {
		perror("ksend");
		return 1;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (long i = 0; i < n; i++)
		if (send(c, msg, sizeof(msg), 0) != (ssize_t)sizeof(msg)) {
			perror("ksend: send");
			return 1;
		}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("%.0f\n", ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / (double)n);
	shutdown(c, SHUT_WR);
	pthread_join(t, NULL);
	return 0;
}
