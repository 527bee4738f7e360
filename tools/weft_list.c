// SPDX-License-Identifier: Apache-2.0
/*
 * `weft list`: the probes this machine offers, with their fields.
 */
#include <getopt.h>
#include <string.h>
#include "probes/probes.h"
#include "tools/weft.h"

static const char list_help[] =
	"Usage: weft list [OPTIONS] [PATTERN | BINARY]\n"
	"\n"
	"Lists probes one per line by their canonical names.  Without PATTERN: every kernel\n"
	"tracepoint and system call.  PATTERN is a probe as a query writes it, with '*' and\n"
	"'?' wildcards:\n"
	"  weft list 'syscall:open*'            system calls\n"
	"  weft list 'tracepoint:sched:*'       tracepoints of a category\n"
	"  weft list 'uprobe:libc:mall*'        functions of a library or binary\n"
	"  weft list 'usdt:/usr/bin/python3:*'  USDT probes of a binary\n"
	"  weft list /usr/bin/redis-server      functions and USDT probes of a binary\n"
	"\n"
	"Options:\n"
	"  -v, --verbose    show each probe's fields (args.F) or arguments (argN)\n"
	"  -p, --pid PID    resolve library names through process PID's maps\n"
	"  -h, --help       this text\n"
	"\n"
	"Exit status: 0 probes were listed, 1 nothing matched or the pattern is wrong,\n"
	"2 bad command line.\n";

int cmd_list(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "verbose", no_argument, NULL, 'v' },
		{ "pid", required_argument, NULL, 'p' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct probe_ctx ctx = { 0 };
	struct probe_err err = { 0 };
	bool verbose = false;
	int c, n;

	optind = 1;
	while ((c = getopt_long(argc, argv, "vp:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'v':
			verbose = true;
			break;
		case 'p':
			ctx.pid = tool_parse_pid(optarg);
			if (ctx.pid < 0)
				return WEFT_EXIT_USAGE;
			break;
		case 'h':
			fputs(list_help, stdout);
			return WEFT_EXIT_OK;
		default:
			fputs(list_help, stderr);
			return WEFT_EXIT_USAGE;
		}
	}
	if (optind + 1 < argc) {
		fprintf(stderr, "weft: list takes at most one pattern\n");
		return WEFT_EXIT_USAGE;
	}
	n = probe_list_print(optind < argc ? argv[optind] : NULL, &ctx, verbose, stdout, &err);
	if (n < 0) {
		fprintf(stderr, "weft: %s\n", err.msg[0] ? err.msg : "cannot list probes");
		if (err.fix[0])
			fprintf(stderr, "  %s\n", err.fix);
		return WEFT_EXIT_FAIL;
	}
	if (n == 0) {
		fprintf(stderr, "weft: no probe matches\n");
		return WEFT_EXIT_FAIL;
	}
	return WEFT_EXIT_OK;
}
