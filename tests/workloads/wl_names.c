// SPDX-License-Identifier: Apache-2.0
/*
 * Test workload: a known number of calls whose numbers have names (syscalls, signals, errnos,
 * TCP states), for the tests of sysname(), signame(), errname(), enumname() and walltime.
 *
 * Usage: wl_names
 *   Binds a TCP listener to 127.0.0.1 (an ephemeral port, not yet listening), prints its pid
 *   on the first line of stdout and "port P" on the second, then waits for a byte (or EOF) on
 *   stdin so the tracer can attach first.  Then, in this order and nothing else:
 *     37 getppid() and 23 getuid() system calls (syscall(2), no libc cache);
 *     kill(self) with SIGUSR1 5 times, SIGUSR2 3 times, SIGWINCH twice (all ignored);
 *     7 open()s failing with ENOENT, 4 with ENOTDIR, 3 with EISDIR;
 *     listen(), then 4 connections from this process to the listener, each accepted, then
 *     the client closed before the server side; then the listener closed;
 *     prctl(PR_SET_NAME) 6 times to "wl-fifteen-char" (15 characters: a comm that fills its
 *     16 bytes), then 4 times to "wl-short" (task:task_rename, for the strings' notes).
 *   So on the TCP port P: 1 CLOSE->LISTEN, 4 client sockets through SYN_SENT and ESTABLISHED,
 *   4 server sockets through SYN_RECV and ESTABLISHED.  It ends with "wl_names: done".
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#define N_GETPPID 37
#define N_GETUID 23
#define N_CONN 4
#define N_RENAME_LONG 6
#define N_RENAME_SHORT 4

static int fail(const char *what)
{
	perror(what);
	return 1;
}

static int failing_opens(const char *path, int flags, int n, int want)
{
	for (int i = 0; i < n; i++) {
		int fd = open(path, flags);

		if (fd >= 0 || errno != want) {
			fprintf(stderr, "open(%s) gave %d (%d), not errno %d\n", path, fd, errno,
				want);
			return 1;
		}
	}
	return 0;
}

int main(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t alen = sizeof(a);
	int lfd, one = 1;
	char c;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	lfd = socket(AF_INET, SOCK_STREAM, 0);
	if (lfd < 0 || setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(lfd, (struct sockaddr *)&a, sizeof(a)) ||
	    getsockname(lfd, (struct sockaddr *)&a, &alen))
		return fail("listener");
	printf("%d\nport %d\n", (int)getpid(), ntohs(a.sin_port));
	fflush(stdout);
	if (read(0, &c, 1) < 0)
		return 1;

	for (int i = 0; i < N_GETPPID; i++)
		syscall(SYS_getppid);
	for (int i = 0; i < N_GETUID; i++)
		syscall(SYS_getuid);

	signal(SIGUSR1, SIG_IGN);
	signal(SIGUSR2, SIG_IGN);
	signal(SIGWINCH, SIG_IGN);
	for (int i = 0; i < 5; i++)
		kill(getpid(), SIGUSR1);
	for (int i = 0; i < 3; i++)
		kill(getpid(), SIGUSR2);
	for (int i = 0; i < 2; i++)
		kill(getpid(), SIGWINCH);

	if (failing_opens("/nonexistent-weft/x", O_RDONLY, 7, ENOENT) ||
	    failing_opens("/etc/passwd/x", O_RDONLY, 4, ENOTDIR) ||
	    failing_opens("/tmp", O_WRONLY, 3, EISDIR))
		return 1;

	if (listen(lfd, N_CONN))
		return fail("listen");
	for (int i = 0; i < N_CONN; i++) {
		int cfd = socket(AF_INET, SOCK_STREAM, 0), sfd;

		if (cfd < 0 || connect(cfd, (struct sockaddr *)&a, sizeof(a)))
			return fail("connect");
		sfd = accept(lfd, NULL, NULL);
		if (sfd < 0)
			return fail("accept");
		close(cfd);
		close(sfd);
	}
	close(lfd);

	for (int i = 0; i < N_RENAME_LONG + N_RENAME_SHORT; i++)
		if (prctl(PR_SET_NAME, i < N_RENAME_LONG ? "wl-fifteen-char" : "wl-short"))
			return fail("prctl");
	printf("wl_names: done\n");
	return 0;
}
