// SPDX-License-Identifier: Apache-2.0
/*
 * wl_pool W N [PAUSE_MS]: an unmodified thread-pool server and its client, for the scheduler edges of
 * tests/runtime/test_run_kpool.c (docs/graphs.md, "Scheduler and process edges").  No
 * weft/trace.h: what connects the work is the kernel's.
 *
 * The process listens on 127.0.0.1 (a port the kernel picks), forks a client and starts W
 * worker threads.  The client connects and makes N requests one at a time: it sends 16
 * bytes, then reads the 16-byte reply (and sleeps PAUSE_MS before the next, so that the requests
 * spread over several drains of the capture).  The main thread is the reader: it accepts, reads each
 * request and hands it to a worker through a queue guarded by a mutex and a condition
 * variable (pthread_cond_signal: the futex wakeup that is the edge); the worker calls
 * handle() (the span of the query) and gives the reply back; the reader writes it on the
 * socket.  So each request is, in the kernel's view: the client's exchange, the reader's
 * exchange (its receive and its reply), and the worker's handle() after a wakeup made by the
 * reader inside its exchange.
 *
 * To make that wakeup certain and the only one between the threads: the reader hands a
 * request over only once every worker sleeps (state S in /proc/self/task/TID/stat: in the
 * condition variable's futex, the only place a worker sleeps), so the signal wakes one of
 * them; the reply comes back through an atomic flag, and the client and the reader wait for
 * their bytes by polling the socket (MSG_DONTWAIT, sched_yield), so that neither is woken by
 * the other's send.  Prints "wl_pool: served N" on success.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define MSG 16
#define MAXW 16

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int queued = -1; /* the request waiting for a worker, or -1 */
static bool stop;
static char req[MSG], rep[MSG];
static atomic_int done = -1; /* the request whose reply is in rep */
static atomic_int tids[MAXW];

int handle(int n, const char *in, char *out);

/* The work for one request: the span of the query. */
__attribute__((noinline, used)) int handle(int n, const char *in, char *out)
{
	unsigned h = 2166136261u;

	for (int i = 0; i < MSG; i++)
		h = (h ^ (unsigned char)in[i]) * 16777619u;
	snprintf(out, MSG, "rep %d %08x", n, h & 0xffffff);
	return (int)h;
}

static void *worker(void *arg)
{
	atomic_store(&tids[(long)arg], (int)syscall(SYS_gettid));
	for (;;) {
		int n;

		pthread_mutex_lock(&mu);
		while (queued < 0 && !stop)
			pthread_cond_wait(&cv, &mu);
		if (queued < 0) {
			pthread_mutex_unlock(&mu);
			return NULL;
		}
		n = queued;
		queued = -1;
		pthread_mutex_unlock(&mu);
		handle(n, req, rep);
		atomic_store(&done, n);
	}
}

/* Whether thread tid of this process sleeps (S). */
static bool sleeping(int tid)
{
	char path[64], buf[512], *p;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", tid);
	f = fopen(path, "r");
	if (!f)
		return false;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	p = strrchr(buf, ')');
	return p && p[1] == ' ' && p[2] == 'S';
}

/* Exactly len bytes, polling (never asleep in the socket). */
static int recv_all(int fd, char *buf, size_t len)
{
	size_t got = 0;

	while (got < len) {
		ssize_t r = recv(fd, buf + got, len - got, MSG_DONTWAIT);

		if (r > 0)
			got += (size_t)r;
		else if (r == 0 || (errno != EAGAIN && errno != EINTR))
			return -1;
		else
			sched_yield();
	}
	return 0;
}

static int send_all(int fd, const char *buf, size_t len)
{
	while (len) {
		ssize_t r = send(fd, buf, len, MSG_NOSIGNAL);

		if (r <= 0)
			return -1;
		buf += r;
		len -= (size_t)r;
	}
	return 0;
}

static int client(int port, int n, int pause_ms)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	char q[MSG], r[MSG];

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0)
		return 1;
	for (int i = 0; i < n; i++) {
		memset(q, 0, sizeof(q));
		snprintf(q, sizeof(q), "req %d", i);
		if (send_all(fd, q, MSG) || recv_all(fd, r, MSG) || strncmp(r, "rep ", 4) != 0)
			return 1;
		if (pause_ms > 0)
			usleep((useconds_t)pause_ms * 1000);
	}
	close(fd);
	return 0;
}

int main(int argc, char **argv)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t alen = sizeof(a);
	int w = argc > 2 ? atoi(argv[1]) : 0, n = argc > 2 ? atoi(argv[2]) : 0;
	int ls, fd, st = 0;
	pthread_t th[MAXW];
	pid_t kid;

	if (w < 1 || w > MAXW || n < 1) {
		fprintf(stderr, "usage: wl_pool WORKERS(1-%d) REQUESTS [PAUSE_MS]\n", MAXW);
		return 2;
	}
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ls = socket(AF_INET, SOCK_STREAM, 0);
	if (ls < 0 || bind(ls, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(ls, 1) != 0 ||
	    getsockname(ls, (struct sockaddr *)&a, &alen) != 0) {
		perror("wl_pool: listen");
		return 1;
	}
	kid = fork();
	if (kid < 0)
		return 1;
	if (kid == 0)
		_exit(client(ntohs(a.sin_port), n, argc > 3 ? atoi(argv[3]) : 0));
	for (long i = 0; i < w; i++)
		if (pthread_create(&th[i], NULL, worker, (void *)i) != 0)
			return 1;
	fd = accept(ls, NULL, NULL);
	if (fd < 0)
		return 1;
	for (int i = 0; i < n; i++) {
		if (recv_all(fd, req, MSG))
			return 1;
		/* every worker asleep in the condition variable: the signal wakes one */
		for (int k = 0; k < w; k++)
			while (!atomic_load(&tids[k]) || !sleeping(atomic_load(&tids[k])))
				sched_yield();
		pthread_mutex_lock(&mu);
		queued = i;
		pthread_mutex_unlock(&mu);
		pthread_cond_signal(&cv);
		while (atomic_load(&done) != i)
			sched_yield();
		if (send_all(fd, rep, MSG))
			return 1;
	}
	pthread_mutex_lock(&mu);
	stop = true;
	pthread_mutex_unlock(&mu);
	pthread_cond_broadcast(&cv);
	for (int i = 0; i < w; i++)
		pthread_join(th[i], NULL);
	if (waitpid(kid, &st, 0) != kid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		fprintf(stderr, "wl_pool: the client failed\n");
		return 1;
	}
	printf("wl_pool: served %d\n", n);
	return 0;
}
