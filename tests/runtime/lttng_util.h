/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Recording with lttng-tools in the runtime tests (test_graph_ctf, test_graph_3tier): run a
 * command with its output appended to one log file and a deadline, and an LTTng session that
 * records user-space events with the context the CTF importer reads (vpid, vtid, procname).
 *
 * A session records the matching events of every process of the machine that registered with
 * the session daemon, and on a shared machine other tests (other builds, other worktrees) run
 * the same workloads at the same time.  So a test records a copy of its workload with a name
 * of its own (lt_copy_unique(): "STEM-PID", which is also its procname) and filters on that
 * procname (lt_session_start()): its trace then holds its own processes' events only, and a
 * `weft run` on the copy's path counts only them.
 *
 * lt_session_start() reaches a session daemon, starting one (`lttng-sessiond --daemonize`,
 * left running for the next test) if none answers; when lttng-tools is not installed or no
 * daemon can be reached it returns 1 with the reason, and the test skips (77).  The session
 * is named after the test and its pid, so tests running side by side do not meet, and
 * lt_session_destroy() is safe to call twice: call it in every teardown, so that a failed
 * test leaves no session behind.  The recorded programs should run with
 * LTTNG_UST_REGISTER_TIMEOUT set high (lt_session_start() sets it in this process's
 * environment), so that each registers with the daemon before its first event, not 3 s
 * later.  Header-only; no test framework.
 */
#ifndef WEFT_TEST_LTTNG_UTIL_H
#define WEFT_TEST_LTTNG_UTIL_H

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define LT_CMD_TIMEOUT_S 120 /* no lttng command or recorded program comes near it */

static char lt_logpath[PATH_MAX]; /* where every command's output goes; set before use */

static inline bool lt_in_path(const char *prog)
{
	const char *path = getenv("PATH");
	char buf[PATH_MAX];

	if (!path)
		path = "/usr/bin:/bin:/usr/sbin:/sbin";
	while (*path) {
		size_t n = strcspn(path, ":");

		if (snprintf(buf, sizeof(buf), "%.*s/%s", (int)n, path, prog) < (int)sizeof(buf) &&
		    access(buf, X_OK) == 0)
			return true;
		path += n;
		if (*path == ':')
			path++;
	}
	return false;
}

/* Runs argv with its output appended to lt_logpath; its exit status, or -1 (killed, timed
 * out, not started).  *pid_out (if not NULL) gets the child's pid. */
static inline int lt_run(char *const argv[], pid_t *pid_out)
{
	time_t deadline = time(NULL) + LT_CMD_TIMEOUT_S;
	pid_t pid = fork();
	int status;

	if (pid < 0)
		return -1;
	if (pid == 0) {
		int fd = open(lt_logpath, O_WRONLY | O_CREAT | O_APPEND, 0644);

		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
			close(fd);
		}
		execvp(argv[0], argv);
		_exit(127);
	}
	if (pid_out)
		*pid_out = pid;
	for (;;) {
		pid_t r = waitpid(pid, &status, WNOHANG);
		struct timespec ts = { 0, 10 * 1000 * 1000 };

		if (r == pid)
			break;
		if (r < 0 && errno != EINTR)
			return -1;
		if (time(NULL) > deadline) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			fprintf(stderr, "%s: timed out\n", argv[0]);
			return -1;
		}
		nanosleep(&ts, NULL);
	}
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* lt_run() of the command given as arguments, ended by NULL (at most 15 words). */
static inline int lt_runv(const char *arg0, ...)
{
	char *av[16];
	size_t n = 0;
	va_list ap;

	av[n++] = (char *)arg0;
	va_start(ap, arg0);
	while (n < 15 && (av[n] = va_arg(ap, char *)))
		n++;
	va_end(ap);
	av[n] = NULL;
	return lt_run(av, NULL);
}

#define LT_RUN(...) lt_runv(__VA_ARGS__, (char *)NULL)

/* Prints the log to stderr, each line indented. */
static inline void lt_dump_log(void)
{
	FILE *f = fopen(lt_logpath, "r");
	char line[512];

	if (!f)
		return;
	while (fgets(line, sizeof(line), f))
		fprintf(stderr, "  | %s", line);
	fclose(f);
}

struct lt_session {
	char name[64];
	bool made; /* created and not yet destroyed */
};

static inline void lt_session_destroy(struct lt_session *s)
{
	if (s->made && LT_RUN("lttng", "destroy", s->name) == 0)
		s->made = false;
}

/*
 * Copies the program `src` to DIR/STEM-PID (in out[0, size)), executable: a name no other
 * test's process has (at most 15 characters with a short stem: the kernel's comm, LTTng's
 * procname).  0, or -1.
 */
static inline int lt_copy_unique(const char *src, const char *dir, const char *stem, char *out,
				 size_t size)
{
	if ((size_t)snprintf(out, size, "%s/%s-%d", dir, stem, (int)getpid()) >= size)
		return -1;
	unlink(out);
	return LT_RUN("cp", src, out) == 0 && chmod(out, 0755) == 0 ? 0 : -1;
}

/*
 * Creates and starts session `prefix`-PID writing to `dir` (emptied first), recording the
 * user-space events matching each of events[] (NULL-terminated) of the processes named
 * `procname` (NULL: of every process) with the vpid, vtid and procname context.  0:
 * recording; 1: cannot record here (*skip_why says why); -1: an lttng command failed (its
 * output is in the log; the session, if made, is destroyed).
 */
static inline int lt_session_start(struct lt_session *s, const char *prefix, const char *dir,
				   const char *const events[], const char *procname,
				   const char **skip_why)
{
	char filter[128];

	if (!lt_in_path("lttng") || !lt_in_path("lttng-sessiond")) {
		*skip_why = "lttng-tools (lttng, lttng-sessiond) is not installed";
		return 1;
	}
	snprintf(s->name, sizeof(s->name), "%s-%d", prefix, (int)getpid());
	s->made = false;
	LT_RUN("rm", "-rf", dir);
	if (LT_RUN("lttng", "list") != 0) {
		/* fails harmlessly if another daemon races us to it */
		LT_RUN("lttng-sessiond", "--daemonize");
		if (LT_RUN("lttng", "list") != 0) {
			*skip_why = "no LTTng session daemon can be reached or started";
			return 1;
		}
	}
	if (LT_RUN("lttng", "create", s->name, "--output", dir) != 0)
		return -1;
	s->made = true;
	if (procname)
		snprintf(filter, sizeof(filter), "$ctx.procname == \"%s\"", procname);
	for (size_t i = 0; events[i]; i++)
		if ((procname ?
			     LT_RUN("lttng", "enable-event", "-u", events[i], "-s", s->name,
				    "--filter", filter) :
			     LT_RUN("lttng", "enable-event", "-u", events[i], "-s", s->name)) != 0)
			goto out_destroy;
	if (LT_RUN("lttng", "add-context", "-u", "-t", "vpid", "-t", "vtid", "-t", "procname", "-s",
		   s->name) != 0 ||
	    LT_RUN("lttng", "start", s->name) != 0)
		goto out_destroy;
	/* a program's LTTng-UST waits for the session daemon at start-up, not 3 s only */
	setenv("LTTNG_UST_REGISTER_TIMEOUT", "60000", 1);
	return 0;
out_destroy:
	lt_session_destroy(s);
	return -1;
}

/* Stops the session (its buffers flushed into the trace) and destroys it; 0 or -1. */
static inline int lt_session_stop(struct lt_session *s)
{
	if (LT_RUN("lttng", "stop", s->name) != 0)
		return -1;
	lt_session_destroy(s);
	return s->made ? -1 : 0;
}

#endif
