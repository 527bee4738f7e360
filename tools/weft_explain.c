// SPDX-License-Identifier: Apache-2.0
/*
 * `weft explain`: runs the compiler up to the plan and shows where each part of the query
 * will run, or the tree/manifest after any pass (--dump).  Attaches nothing.
 */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "compiler/compiler.h"
#include "compiler/plan.h"
#include "tools/weft.h"

static const char explain_help[] =
	"Usage: weft explain [OPTIONS] 'QUERY'\n"
	"       weft explain [OPTIONS] -f FILE\n"
	"\n"
	"Checks QUERY against this machine (its tracepoints, the binaries and processes it\n"
	"names) and prints its plan: the probes and BPF programs, what the kernel keeps per\n"
	"event, what the agent does per window, and what a cluster merges.  Nothing is\n"
	"attached.\n"
	"\n"
	"Options:\n"
	"  -f, --file FILE     read the query from FILE, a regular file ('-': standard\n"
	"                      input, e.g. a pipe)\n"
	"  -p, --pid PID       resolve library names through the maps of process PID\n"
	"  -d, --dump PASSES   print the tree or plan after each named pass, comma-separated:\n"
	"                      parse, sema (the annotated tree), plan (the manifest as the\n"
	"                      plan pass leaves it), codegen (the BPF C), clang (the object)\n"
	"  -m, --manifest      print the manifest agents receive instead of the readable\n"
	"                      plan (after code generation, which adds the tracepoint\n"
	"                      fields the programs read)\n"
	"  -v, --verbose       more detail (repeat for debug output)\n"
	"  -h, --help          this text\n"
	"\n"
	"Environment: WEFT_BTF=FILE and WEFT_TRACEFS=DIR compile against another kernel's\n"
	"types and tracepoint formats (the agents' kernels, where they differ from this\n"
	"one's); WEFT_RAW_TP=0 keeps kernel:sockets on classic tracepoints.\n"
	"\n"
	"Exit status: 0 the query is valid, 2 bad command line, 3 the query has errors.\n";

int cmd_explain(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "file", required_argument, NULL, 'f' },
		{ "pid", required_argument, NULL, 'p' },
		{ "dump", required_argument, NULL, 'd' },
		{ "manifest", no_argument, NULL, 'm' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct compile_opts opts = { .sz = sizeof(opts) };
	struct compile_result res;
	struct diag_list dl;
	const char *file = NULL, *name;
	enum compile_pass last = PASS_PLAN;
	bool manifest = false;
	int c, verbose = 0, rc, status;
	char *src;

	optind = 1;
	while ((c = getopt_long(argc, argv, "f:p:d:mvh", longopts, NULL)) != -1) {
		switch (c) {
		case 'f':
			file = optarg;
			break;
		case 'p':
			opts.pid = tool_parse_pid(optarg);
			if (opts.pid < 0)
				return WEFT_EXIT_USAGE;
			break;
		case 'd': {
			char *copy = strdup(optarg), *save = NULL;

			if (!copy)
				return WEFT_EXIT_FAIL;
			for (char *t = strtok_r(copy, ",", &save); t;
			     t = strtok_r(NULL, ",", &save)) {
				enum compile_pass p = compile_pass_lookup(t);

				if (p == PASS__COUNT) {
					fprintf(stderr,
						"weft: unknown pass '%s' (parse, sema, plan, codegen, clang)\n",
						t);
					free(copy);
					return WEFT_EXIT_USAGE;
				}
				opts.dump |= 1u << p;
				if (p > last)
					last = p;
			}
			free(copy);
			break;
		}
		case 'm':
			manifest = true;
			break;
		case 'v':
			verbose++;
			break;
		case 'h':
			fputs(explain_help, stdout);
			return WEFT_EXIT_OK;
		default:
			fputs(explain_help, stderr);
			return WEFT_EXIT_USAGE;
		}
	}
	if (optind + 1 < argc) {
		fprintf(stderr, "weft: explain takes one query (quote it)\n");
		return WEFT_EXIT_USAGE;
	}
	if (manifest && last < PASS_CODEGEN)
		last = PASS_CODEGEN; /* codegen adds the tracepoint fields read (plan.tpf) */
	tool_set_verbose(verbose);
	opts.verbose = verbose > 0;
	src = tool_read_query(file, optind < argc ? argv[optind] : NULL, &name);
	if (!src)
		return WEFT_EXIT_USAGE;
	diag_list_init(&dl, src, name);
	rc = compiler_run(src, &opts, last, &dl, &res);
	diag_print(&dl, stderr, isatty(2));
	if (rc) {
		status = diag_has_errors(&dl) ? WEFT_EXIT_QUERY : WEFT_EXIT_FAIL;
		if (!diag_has_errors(&dl))
			fprintf(stderr, "weft: %s\n", strerror(-rc));
	} else {
		status = WEFT_EXIT_OK;
		if (!opts.dump) {
			if (manifest)
				manifest_write(res.plan, stdout);
			else {
				compile_sites_print(&res, "", stdout);
				plan_explain(res.plan, stdout);
			}
		}
	}
	compile_result_free(&res);
	diag_list_free(&dl);
	free(src);
	return status;
}
