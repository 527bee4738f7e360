/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Internal to probes/: the provider objects registered in providers.c, and the small helpers
 * every provider shares (error filling, growing a probe_set, string vectors, near-match
 * fixes).  Nothing here is visible to the compiler or the agent; they use probes.h.
 */
#ifndef WEFT_PROBES_PROVIDER_H
#define WEFT_PROBES_PROVIDER_H
#include <stdarg.h>
#include <stddef.h>
#include "probes/probes.h"

extern const struct probe_provider provider_tracepoint;
extern const struct probe_provider provider_syscall;
extern const struct probe_provider provider_uprobe;
extern const struct probe_provider provider_uretprobe;
extern const struct probe_provider provider_usdt;
extern const struct probe_provider provider_kprobe;
extern const struct probe_provider provider_kretprobe;
extern const struct probe_provider provider_profile;
extern const struct probe_provider provider_interval;
extern const struct probe_provider provider_kernel;
extern const struct probe_provider provider_software;
extern const struct probe_provider provider_hardware;

/* A growable vector of malloc'd strings; the vector owns them. */
struct strv {
	char **v;
	int n, cap;
};

int strv_push(struct strv *sv, const char *s); /* copies s; 0 or -ENOMEM */
void strv_sort(struct strv *sv); /* strcmp order */
void strv_uniq(struct strv *sv); /* drops adjacent duplicates (sort first) */
void strv_free(struct strv *sv);

/* Fills err (kind, printf-style msg, fix may be NULL); always returns -1 for tail calls. */
int perr_set(struct probe_err *err, enum probe_err_kind kind, const char *fix, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* Writes "did you mean: a, b, c" near matches of word among cands into err->fix, with each
 * candidate printed as prefix+candidate; leaves fix "" when none is close. */
void perr_fix_near(struct probe_err *err, const char *word, const char *const *cands, int ncands,
		   const char *prefix);

/* Appends a zeroed target to set; *t points at it (valid until the next push). */
int probe_set_push(struct probe_set *set, struct probe_target **t);
/* Drops targets from index n on (freeing their fields): undoes a failed resolve. */
void probe_set_truncate(struct probe_set *set, int n);
int probe_ctx_max_targets(const struct probe_ctx *ctx);
/* PERR_PID when ctx->pid > 0 names no live process; 0 otherwise. */
int probe_ctx_check_pid(const struct probe_ctx *ctx, struct probe_err *err);

/* Every tracepoint as "CATEGORY:EVENT", sorted; categories and events may be globs (NULL:
 * all).  0 or -errno (-ENODEV: no tracefs). */
int tracefs_events_list(const char *cat_glob, const char *event_glob, struct strv *out);

/* Appends the tracepoint CAT:EVENT to set, with its fields and id read from tracefs
 * (tracepoint.c); *out points at the new target.  0, or -1 with err filled (PERR_UNKNOWN
 * without a fix when the event does not exist, so callers can add their own near matches). */
int tracepoint_target_add(struct probe_set *set, const char *cat, const char *event,
			  const struct probe_ctx *ctx, struct probe_target **out,
			  struct probe_err *err);

/* Syscall tracepoints (syscall.c): the syscall names whose sys_enter_NAME matches name_glob. */
int syscall_names_list(const char *name_glob, struct strv *out);

/* Resolves the BINARY part of a uprobe/usdt probe to an ELF file (uprobe.c): PERR_BINARY,
 * PERR_LIBRARY or PERR_PID on failure, with a fix. */
int probe_binary_part(const char *bin, const struct probe_ctx *ctx, char *out, size_t outsz,
		      struct probe_err *err);

/* Before a uprobe or USDT attach: t's binary as this host has it must be a regular file
 * (libbpf opens it for USDT, and would wait forever on a FIFO put in its place since the
 * query was compiled).  0, or -1 with err filled (PERR_ATTACH; a file gone or unreadable
 * as perr_attach() says it). */
int probe_binary_attachable(const struct probe_target *t, pid_t pid, struct probe_err *err);

/* The online CPUs (timer.c): writes at most max ids into cpus; their count or -errno. */
int probe_cpus_online(int *cpus, int max);
struct perf_event_attr;
/* Opens a perf event of attr on every online CPU (on the first only, if first_cpu_only) and
 * attaches prog to each with cookie (timer.c, for the profile, interval, software and
 * hardware providers); on failure none stays attached.  0, or -1 with err filled. */
int probe_perf_attach_cpus(struct bpf_program *prog, const struct probe_target *t,
			   const struct perf_event_attr *attr, bool first_cpu_only, uint64_t cookie,
			   pid_t pid, struct probe_links *links, struct probe_err *err);
/* The available op of the providers on perf events: whether BPF can attach to them. */
bool probe_perf_available(struct probe_err *err);

/* Whether a probe set provider kind needs ELF files (uprobe, uretprobe, usdt). */
bool probe_kind_is_binary(enum probe_kind k);

/* Attaching (attach.c and the providers' attach ops). */

/* Fills err for a refused attachment of t: PERR_ATTACH naming the target and errnum (a
 * positive errno), with the fix known for that errno and kind; always returns -1. */
int perr_attach(struct probe_err *err, const struct probe_target *t, pid_t pid, int errnum);
/* The tracepoint attach op, shared by the syscall provider (tracepoint.c). */
int tracepoint_attach(struct bpf_program *prog, const struct probe_target *t, uint64_t cookie,
		      pid_t pid, struct probe_links *links, struct probe_err *err);
/* Whether the kernel has the PMU of a probe type ("uprobe", "kprobe"): without it libbpf
 * would create tracefs events, which outlive a killed process. */
bool probe_pmu_exists(const char *name);

#endif
