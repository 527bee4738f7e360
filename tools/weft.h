/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The weft command line: one file per subcommand (weft_<cmd>.c), each with an entry point
 * taking argc/argv after the subcommand name and returning the process exit status.
 */
#ifndef WEFT_TOOL_H
#define WEFT_TOOL_H
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* Exit statuses, as documented in `weft --help`. */
#define WEFT_EXIT_OK 0
#define WEFT_EXIT_FAIL 1 /* the query ran but something failed */
#define WEFT_EXIT_USAGE 2 /* bad command line */
#define WEFT_EXIT_QUERY 3 /* the query has errors */
#define WEFT_EXIT_BUDGET 4 /* the query was stopped by its CPU budget (weft run) */
#define WEFT_EXIT_PIPE 141 /* weft run: standard output was closed (128 + SIGPIPE) */

int cmd_explain(int argc, char **argv);
int cmd_list(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_agent(int argc, char **argv);
int cmd_aggregator(int argc, char **argv);
int cmd_submit(int argc, char **argv);
int cmd_status(int argc, char **argv);
int cmd_cancel(int argc, char **argv);
int cmd_keygen(int argc, char **argv);
int cmd_graph(int argc, char **argv);
int cmd_vm(int argc, char **argv);

/* Reads a query from -f FILE ("-": stdin) or takes the argument; malloc'd, NULL on error
 * (reported).  *name is "query" or the file name. */
char *tool_read_query(const char *file, const char *arg, const char **name);
void tool_set_verbose(int level);
/*
 * Blocks SIGINT, SIGTERM and, with hup, SIGHUP, and returns a signalfd (close-on-exec,
 * non-blocking) that reads them: signals are read in a command's loop, never handled
 * asynchronously.  -1 with errno if there is no signalfd (the signals stay blocked).
 */
int tool_signals_block(bool hup);
/*
 * Starts weft once more with its heap in transparent huge pages, where the host's THP mode is
 * "madvise" (weft.c says why), unless WEFT_HUGEPAGES=0; returns only if it did not (the
 * second start, or nothing to gain).  For the commands whose heap grows to hundreds of MB:
 * agent, aggregator, vm and `weft run` of a graph query, which calls it once it knows.
 */
void tool_heap_hugepages(void);
/* The -p argument: a positive pid of a live process, or -1 (reported). */
int tool_parse_pid(const char *s);
/* A graph store's retention bound, the value of option opt ("--max-age", "--graph-max-size",
 * ...): --*max-age takes a duration with its unit (30m, 12h), --*max-size a size (500MiB,
 * 2G), neither 0.  0, or -1 (reported). */
int tool_parse_max_age(const char *opt, const char *arg, uint64_t *ns);
int tool_parse_max_size(const char *opt, const char *arg, uint64_t *bytes);
/* The default graph store's path (WEFT_GRAPH_STORE, else next to the aggregator's default
 * store, its directory made): `weft graph` and `weft run` with a graph query.  0 or -errno. */
int weft_graph_store_default(char *buf, size_t sz);

#endif
