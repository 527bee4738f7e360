// SPDX-License-Identifier: Apache-2.0
/*
 * `weft vm`: virtual machines seen from the host and fused with their guests (docs/vm.md).
 * One subcommand today, `analyze`, over recorded streams (vm/stream.h) or LTTng CTF traces
 * (vm/ctf.c, the same stream once read); everything below
 * tools/ returns errors with a tag and a message (vm/vm.h), printed here once.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/store.h"
#include "tools/weft.h"
#include "tools/weft_vm.h"
#include "vm/vm.h"

static const char vm_help[] =
	"Usage: weft vm analyze --host INPUT [--guest INPUT] [OPTIONS]\n"
	"       weft vm record --output FILE [--for D] [-- CMD ARGS...]   (its own --help)\n"
	"       weft vm sync --to ENDPOINT ... --host-agent NAME --guest-agent NAME\n"
	"                    --guest-binary PATH   (live, through a cluster; its own --help)\n"
	"       weft vm live --to ENDPOINT ... --host-agent NAME --guest-agent NAME\n"
	"                    --guest-binary PATH   (this view, live from a cluster; its own\n"
	"                    --help)\n"
	"\n"
	"What the vCPUs of virtual machines were doing, from the host's kvm and scheduler\n"
	"events, and each guest thread's time corrected by the state of the vCPU under it.\n"
	"A guest thread that looks running from inside the guest may be stalled: its vCPU\n"
	"left guest mode for the hypervisor to handle an exit, went up to the VMM in user\n"
	"space, or its host thread was preempted.  Neither side alone can see it.\n"
	"\n"
	"Per vCPU (a host thread that emits kvm events), the share of time in each state:\n"
	"  guest       in guest mode (after kvm_entry)\n"
	"  guest_l2    in guest mode running a nested guest (after kvm_nested_vmenter)\n"
	"  hypervisor  in the host kernel handling an exit (after kvm_exit)\n"
	"  vmm         in the VMM in user space (after kvm_userspace_exit)\n"
	"  preempted   runnable on the host but not running (switched out while runnable,\n"
	"              or woken and waiting for a CPU)\n"
	"  idle        blocked on the host (the guest halted, or the VMM waits)\n"
	"then the exit reasons (VMX and SVM names; unknown numbers shown as such and\n"
	"counted) with their counts and latency from exit to the next entry (p50, p90, p99\n"
	"within 1.6 %, max exact).  With a guest stream: the guest clock's offset to the\n"
	"host's from synchronisation points with its error bound, and the guest threads\n"
	"that lost the most time to the host.\n"
	"\n"
	"Options:\n"
	"  -H, --host INPUT     the host's events (required): a recorded stream (FILE),\n"
	"                       or LTTng CTF traces (ctf:DIR, or a directory DIR)\n"
	"  -g, --guest INPUT    the guest's events, the same kinds; its CPU n is vCPU n\n"
	"      --vm-pid PID     the guest's VM, by its VMM's pid, when the host stream has\n"
	"                       several VMs (their vCPU ids would collide)\n"
	"      --assume-synced  a guest stream without synchronisation points: take its\n"
	"                       times as host times (the report says the error is unknown);\n"
	"                       without it such a stream is refused\n"
	"      --format FMT     text (default) or json: one JSON object\n"
	"      --intervals      json: every state interval of every vCPU and guest thread\n"
	"      --top N          guest threads listed, most time lost first (default 10)\n"
	"      --graph-store PATH  also store the fused view as one trace of the execution-\n"
	"                       graph store PATH (`weft graph show` draws it: each guest\n"
	"                       thread's stints with its vCPU's stalls as child tasks, on\n"
	"                       the critical path where they delay it); needs --guest\n"
	"      --epoch NS       with --graph-store: added to every time stored, the stream\n"
	"                       clock's offset to the Unix epoch (default 0)\n"
	"  -h, --help           this text\n"
	"\n"
	"A recorded stream is JSON lines, one event a line, sorted by time:\n"
	"  {\"time\":NS,\"cpu\":N,\"name\":\"kvm_exit\",\"tid\":N,\"pid\":N,\n"
	"   \"fields\":{\"exit_reason\":30,\"isa\":1,\"vcpu_id\":0}}\n"
	"Host events used: kvm_entry, kvm_exit, kvm_userspace_exit, kvm_hypercall,\n"
	"kvm_nested_vmenter, kvm_nested_vmexit_inject, any other kvm_*, sched_switch,\n"
	"sched_wakeup, kvm_write_tsc_offset, tsc_clock.  Guest events used: sched_switch,\n"
	"vm_sync (a synchronisation point: fields id and after; the host sees it as\n"
	"kvm_hypercall with nr 0x77656674 and a0 = id), vm_tsc (a TSC reading: fields tsc\n"
	"and after).  A stream out of order is refused with its line, not re-sorted.\n"
	"\n"
	"LTTng CTF traces (an LTTng session's output directory: every trace below it,\n"
	"read with libbabeltrace2): lttng-modules' kvm_x86_entry, kvm_x86_exit,\n"
	"kvm_userspace_exit, kvm_x86_hypercall, kvm_x86_write_tsc_offset,\n"
	"kvm_x86_nested_vmrun, sched_switch and sched_wakeup are read as the kernel's\n"
	"events; weft:vm_sync, weft:vm_tsc and weft:tsc_clock of an LTTng-UST trace as\n"
	"vm_sync, vm_tsc and tsc_clock.  Each event's thread is the tid context (lttng\n"
	"add-context -k -t tid -t pid), else its CPU's last sched_switch; kvm events\n"
	"with neither, and events the tracer discarded, are counted and said on stderr.\n"
	"\n"
	"Examples:\n"
	"  weft vm analyze --host host.jsonl\n"
	"  weft vm analyze --host host.jsonl --guest guest.jsonl --top 5\n"
	"  weft vm analyze -H host.jsonl -g guest.jsonl --format json --intervals\n"
	"  weft vm analyze -H host.jsonl -g guest.jsonl --graph-store vm.sqlite\n"
	"  weft vm analyze --host ctf:~/lttng-traces/host-1 --guest guest-trace/\n"
	"  weft graph --graph-store vm.sqlite show TRACE   (the id printed on stderr)\n"
	"\n"
	"Exit status: 0 success, 1 a stream was refused (the error's tag, file, line and\n"
	"reason on stderr: E_VM_JSON, E_VM_FIELD, E_VM_ORDER, E_VM_NO_SYNC, E_VM_SYNC,\n"
	"E_VM_AMBIGUOUS, E_VM_LIMIT, E_VM_FILE, E_VM_CTF), 2 bad command line.  docs/vm.md has the\n"
	"states, the stream format and how synchronisation works.\n";

static int parse_count(const char *opt, const char *s, long max, long *out)
{
	char *end;

	errno = 0;
	*out = strtol(s, &end, 10);
	if (errno || *end || end == s || *out <= 0 || *out > max) {
		fprintf(stderr, "weft vm: %s takes a number from 1 to %ld, not '%s'\n", opt, max,
			s);
		return -1;
	}
	return 0;
}

/* The fused view into the graph store: one trace, all or nothing. */
static int store_graph(const struct vm_analysis *a, const char *path, int64_t epoch)
{
	struct graph g;
	struct graph_store *s;
	struct graph_id128 id;
	struct graph_put_stats st = { 0 };
	char why[512], hex[33];
	int rc;

	graph_init(&g);
	rc = vm_to_graph(a, epoch, &g, &id, why, sizeof(why));
	if (rc) {
		fprintf(stderr, "weft vm: the fused view as a graph: %s\n", why);
		graph_free(&g);
		return -1;
	}
	s = graph_store_open(path, why, sizeof(why));
	if (!s) {
		fprintf(stderr, "weft vm: %s: %s\n", path, why);
		graph_free(&g);
		return -1;
	}
	rc = graph_store_put(s, &g, &st, why, sizeof(why));
	graph_store_close(s);
	if (rc) {
		fprintf(stderr, "weft vm: storing in %s: %s\n", path, why);
		graph_free(&g);
		return -1;
	}
	graph_id128_hex(id, hex);
	fprintf(stderr, "weft vm: stored trace %s (%zu tasks) in %s\n", hex, g.ntasks, path);
	graph_free(&g);
	return 0;
}

/* What a CTF input could not carry over, said: never a silently partial analysis. */
static void ctf_warn(const char *input, const struct vm_ctf_stats *st)
{
	if (st->no_tid)
		fprintf(stderr,
			"weft vm: warning: %s: %" PRIu64 " kvm events came before any sched_switch "
			"on their CPU and the trace has no tid context: not analysed (record with "
			"`lttng add-context -k -t tid -t pid`)\n",
			input, st->no_tid);
	if (st->discarded)
		fprintf(stderr,
			"weft vm: warning: %s: the tracer discarded %" PRIu64 " events (full "
			"buffers): states around them may be wrong (larger sub-buffers: `lttng "
			"enable-channel --subbuf-size`)\n",
			input, st->discarded);
}

static int vm_analyze_cmd(int argc, char **argv)
{
	enum {
		OPT_VM_PID = 256,
		OPT_ASSUME,
		OPT_FORMAT,
		OPT_INTERVALS,
		OPT_TOP,
		OPT_STORE,
		OPT_EPOCH
	};
	static const struct option longopts[] = {
		{ "host", required_argument, NULL, 'H' },
		{ "guest", required_argument, NULL, 'g' },
		{ "vm-pid", required_argument, NULL, OPT_VM_PID },
		{ "assume-synced", no_argument, NULL, OPT_ASSUME },
		{ "format", required_argument, NULL, OPT_FORMAT },
		{ "intervals", no_argument, NULL, OPT_INTERVALS },
		{ "top", required_argument, NULL, OPT_TOP },
		{ "graph-store", required_argument, NULL, OPT_STORE },
		{ "epoch", required_argument, NULL, OPT_EPOCH },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct vm_opts o = { .sz = sizeof(o) };
	struct vm_report_opts ro = { .sz = sizeof(ro) };
	struct vm_analysis a;
	struct vm_err err = { 0 };
	const char *store = NULL;
	int64_t epoch = 0;
	bool json = false;
	long n;
	int c, rc;

	optind = 1;
	while ((c = getopt_long(argc, argv, "H:g:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'H':
			o.host = optarg;
			break;
		case 'g':
			o.guest = optarg;
			break;
		case OPT_VM_PID:
			if (parse_count("--vm-pid", optarg, 4194304, &n))
				return WEFT_EXIT_USAGE;
			o.vm_pid = n;
			break;
		case OPT_ASSUME:
			o.assume_synced = true;
			break;
		case OPT_FORMAT:
			if (strcmp(optarg, "json") != 0 && strcmp(optarg, "text") != 0) {
				fprintf(stderr, "weft vm: --format is text or json, not '%s'\n",
					optarg);
				return WEFT_EXIT_USAGE;
			}
			json = strcmp(optarg, "json") == 0;
			break;
		case OPT_INTERVALS:
			ro.intervals = true;
			break;
		case OPT_TOP:
			if (parse_count("--top", optarg, 1000000, &n))
				return WEFT_EXIT_USAGE;
			ro.top = (size_t)n;
			break;
		case OPT_STORE:
			store = optarg;
			break;
		case OPT_EPOCH: {
			char *end;

			errno = 0;
			epoch = strtoll(optarg, &end, 10);
			if (errno || *end || end == optarg || epoch < 0) {
				fprintf(stderr,
					"weft vm: --epoch takes ns (an integer >= 0), not "
					"'%s'\n",
					optarg);
				return WEFT_EXIT_USAGE;
			}
			break;
		}
		case 'h':
			fputs(vm_help, stdout);
			return WEFT_EXIT_OK;
		default:
			fputs("weft vm: see `weft vm --help`\n", stderr);
			return WEFT_EXIT_USAGE;
		}
	}
	if (optind < argc) {
		fprintf(stderr,
			"weft vm analyze: unexpected argument '%s' (streams are given "
			"with --host and --guest)\n",
			argv[optind]);
		return WEFT_EXIT_USAGE;
	}
	if (!o.host) {
		fputs("weft vm analyze: no host stream (--host FILE)\n", stderr);
		return WEFT_EXIT_USAGE;
	}
	if (ro.intervals && !json) {
		fputs("weft vm analyze: --intervals needs --format json\n", stderr);
		return WEFT_EXIT_USAGE;
	}
	if (o.assume_synced && !o.guest) {
		fputs("weft vm analyze: --assume-synced is about a --guest stream\n", stderr);
		return WEFT_EXIT_USAGE;
	}
	if (store && !o.guest) {
		fputs("weft vm analyze: --graph-store stores guest threads: give --guest\n",
		      stderr);
		return WEFT_EXIT_USAGE;
	}
	if (vm_analyze(&o, &a, &err)) {
		fprintf(stderr, "weft vm: %s: %s\n", err.tag, err.msg);
		return WEFT_EXIT_FAIL;
	}
	ctf_warn(o.host, &a.host_ctf);
	if (o.guest)
		ctf_warn(o.guest, &a.guest_ctf);
	if (store && store_graph(&a, store, epoch)) {
		vm_analysis_free(&a);
		return WEFT_EXIT_FAIL;
	}
	rc = json ? vm_report_json(stdout, &a, &ro) : vm_report_text(stdout, &a, &ro);
	vm_analysis_free(&a);
	if (fflush(stdout) || rc) {
		fprintf(stderr, "weft vm: writing the report: %s\n", strerror(rc ? -rc : EIO));
		return WEFT_EXIT_FAIL;
	}
	return WEFT_EXIT_OK;
}

int cmd_vm(int argc, char **argv)
{
	if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0 ||
	    strcmp(argv[1], "help") == 0) {
		fputs(vm_help, argc < 2 ? stderr : stdout);
		return argc < 2 ? WEFT_EXIT_USAGE : WEFT_EXIT_OK;
	}
	if (strcmp(argv[1], "analyze") == 0 || strcmp(argv[1], "analyse") == 0)
		return vm_analyze_cmd(argc - 1, argv + 1);
	if (strcmp(argv[1], "record") == 0)
		return vm_record_cmd(argc - 1, argv + 1);
	if (strcmp(argv[1], "sync") == 0)
		return vm_sync_cmd(argc - 1, argv + 1);
	if (strcmp(argv[1], "live") == 0)
		return vm_live_cmd(argc - 1, argv + 1);
	fprintf(stderr,
		"weft vm: unknown command '%s' (analyze, record or sync; see `weft vm --help`)\n",
		argv[1]);
	return WEFT_EXIT_USAGE;
}
