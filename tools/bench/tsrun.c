// SPDX-License-Identifier: Apache-2.0
/*
 * tsrun: runs a tracer and timestamps every line it writes, for the start-up benchmark.  The
 * clock starts just before fork (what a user's shell does when Enter is pressed), every line
 * of the child's stdout and stderr is stamped when it arrives, and once the Nth line matching
 * a regular expression has arrived (the first window, say) the child's peak RSS and CPU time
 * are read from /proc and the child gets SIGINT, as Ctrl-C would send it.
 *
 *   tsrun [-s REGEX] [-n N] [-t TIMEOUT_S] [-g GRACE_S] -- CMD [ARGS...]
 *
 * Output, one record a line, for the driver scripts to parse with awk:
 *   start MONO_NS            CLOCK_MONOTONIC at the start (bpf_ktime_get_ns's clock, so a
 *                            kernel timestamp the tracer reports can be set against it)
 *   line MS out|err TEXT     a line of the child, MS milliseconds after the start
 *   stop MS                  when the stop condition held (or "timeout MS")
 *   hwm_kb KB cpu_ms MS      VmHWM and utime+stime of the child just before SIGINT
 *   exit STATUS              its exit status (128+signal if killed)
 * The child is killed (SIGKILL) if it has not exited GRACE_S seconds after SIGINT.
 */
#include <errno.h>
#include <poll.h>
#include <regex.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define LINE_MAX_LEN 4096

struct stream {
	int fd;
	const char *name;
	char buf[LINE_MAX_LEN];
	size_t len;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static double ms_since(uint64_t start)
{
	return (double)(now_ns() - start) / 1e6;
}

/* VmHWM (kB) from /proc/PID/status, or -1. */
static long proc_hwm_kb(pid_t pid)
{
	char path[64], line[256];
	long kb = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmHWM: %ld kB", &kb) == 1)
			break;
	fclose(f);
	return kb;
}

/* utime + stime of all the process's threads (ms), or -1. */
static long proc_cpu_ms(pid_t pid)
{
	unsigned long ut, st;
	char path[64], buf[1024], *p;
	size_t n;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	p = strrchr(buf, ')'); /* comm may hold spaces; fields restart after it */
	if (!p ||
	    sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
		return -1;
	return (long)((ut + st) * 1000 / (unsigned long)sysconf(_SC_CLK_TCK));
}

/* Emits the complete lines in s; returns how many matched re. */
static int stream_drain(struct stream *s, uint64_t start, const regex_t *re)
{
	int matched = 0;
	char *nl;

	while ((nl = memchr(s->buf, '\n', s->len)) || s->len == sizeof(s->buf)) {
		size_t n = nl ? (size_t)(nl - s->buf) : s->len;
		char line[LINE_MAX_LEN + 1];

		memcpy(line, s->buf, n);
		line[n] = 0;
		printf("line %.3f %s %s\n", ms_since(start), s->name, line);
		if (re && regexec(re, line, 0, NULL, 0) == 0)
			matched++;
		if (nl)
			n++;
		memmove(s->buf, s->buf + n, s->len - n);
		s->len -= n;
	}
	return matched;
}

int main(int argc, char **argv)
{
	struct stream out = { .name = "out" }, err = { .name = "err" };
	const char *pattern = NULL;
	double timeout_s = 30, grace_s = 10;
	long want = 1, seen = 0;
	int c, po[2], pe[2], status, open_fds = 2;
	bool signalled = false;
	uint64_t start, deadline;
	regex_t re;
	pid_t pid;

	while ((c = getopt(argc, argv, "+s:n:t:g:")) != -1) {
		switch (c) {
		case 's':
			pattern = optarg;
			break;
		case 'n':
			want = strtol(optarg, NULL, 10);
			break;
		case 't':
			timeout_s = strtod(optarg, NULL);
			break;
		case 'g':
			grace_s = strtod(optarg, NULL);
			break;
		default:
			goto usage;
		}
	}
	if (optind >= argc)
		goto usage;
	if (pattern && regcomp(&re, pattern, REG_EXTENDED | REG_NOSUB) != 0) {
		fprintf(stderr, "tsrun: bad regular expression '%s'\n", pattern);
		return 2;
	}
	if (pipe(po) || pipe(pe))
		return 1;
	setvbuf(stdout, NULL, _IOLBF, 0);

	start = now_ns();
	pid = fork();
	if (pid < 0)
		return 1;
	if (pid == 0) {
		dup2(po[1], STDOUT_FILENO);
		dup2(pe[1], STDERR_FILENO);
		close(po[0]);
		close(po[1]);
		close(pe[0]);
		close(pe[1]);
		execvp(argv[optind], argv + optind);
		fprintf(stderr, "tsrun: cannot run %s: %s\n", argv[optind], strerror(errno));
		_exit(127);
	}
	close(po[1]);
	close(pe[1]);
	out.fd = po[0];
	err.fd = pe[0];
	printf("start %llu\n", (unsigned long long)start);
	deadline = start + (uint64_t)(timeout_s * 1e9);

	while (open_fds > 0) {
		struct pollfd fds[2] = { { .fd = out.fd, .events = POLLIN },
					 { .fd = err.fd, .events = POLLIN } };
		struct stream *ss[2] = { &out, &err };
		uint64_t t = now_ns();
		uint64_t left_ms = t >= deadline ? 0 : (deadline - t) / 1000000 + 1;
		int timeout_ms = left_ms > 1000 ? 1000 : (int)left_ms;

		if (poll(fds, 2, timeout_ms) < 0 && errno != EINTR)
			break;
		for (int i = 0; i < 2; i++) {
			ssize_t n;

			if (ss[i]->fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			n = read(ss[i]->fd, ss[i]->buf + ss[i]->len,
				 sizeof(ss[i]->buf) - ss[i]->len);
			if (n <= 0) {
				if (ss[i]->len) { /* a last line without a newline */
					ss[i]->buf[ss[i]->len] = '\n';
					ss[i]->len++;
					stream_drain(ss[i], start, NULL);
				}
				close(ss[i]->fd);
				ss[i]->fd = -1;
				fds[i].fd = -1;
				open_fds--;
				continue;
			}
			ss[i]->len += (size_t)n;
			seen += stream_drain(ss[i], start, pattern && !signalled ? &re : NULL);
		}
		if (!signalled && ((pattern && seen >= want) || now_ns() >= deadline)) {
			printf("%s %.3f\n", pattern && seen >= want ? "stop" : "timeout",
			       ms_since(start));
			printf("hwm_kb %ld cpu_ms %ld\n", proc_hwm_kb(pid), proc_cpu_ms(pid));
			kill(pid, SIGINT);
			signalled = true;
			deadline = now_ns() + (uint64_t)(grace_s * 1e9);
		} else if (signalled && now_ns() >= deadline) {
			kill(pid, SIGKILL);
			deadline = UINT64_MAX;
		}
	}
	if (waitpid(pid, &status, 0) != pid)
		return 1;
	printf("exit %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
	if (pattern)
		regfree(&re);
	return 0;

usage:
	fprintf(stderr,
		"usage: %s [-s REGEX] [-n N] [-t TIMEOUT_S] [-g GRACE_S] -- CMD [ARGS...]\n",
		argv[0]);
	return 2;
}
