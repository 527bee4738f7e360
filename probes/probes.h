/* SPDX-License-Identifier: Apache-2.0 */
/*
 * probes/ — the probe catalog and the providers.
 *
 * A provider (tracepoint, syscall, uprobe, uretprobe, usdt, kprobe, kretprobe, profile,
 * interval, software, hardware) is a table of operations registered in one array (providers.c), as in DTrace:
 * adding a provider touches one new file and one line.  The compiler asks a provider to
 * resolve a probe as written (its parts, wildcards allowed) into a probe_set: the concrete
 * attach points with the fields and arguments each one has, read from the running kernel
 * (tracefs formats) and from ELF files (symbols, USDT notes).  The agent asks the same
 * provider to attach a loaded BPF program to each target (probe_attach_target); detaching is
 * destroying the links (probe_links_destroy), and the kernel does it too if we die.
 *
 * This layer knows nothing of diagnostics: failures come back as a probe_err with a kind,
 * a message and an optional fix (near matches, field lists), which the compiler turns
 * into tagged diagnostics.
 */
#ifndef WEFT_PROBES_H
#define WEFT_PROBES_H
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

enum probe_kind {
	PROBE_NONE,
	PROBE_TRACEPOINT, /* parts: category, event */
	PROBE_SYSCALL, /* parts: name */
	PROBE_UPROBE, /* parts: binary, symbol; optional +offset */
	PROBE_URETPROBE, /* parts: binary, symbol */
	PROBE_USDT, /* parts: binary, provider, name (or binary, name) */
	PROBE_KPROBE, /* parts: function; optional +offset */
	PROBE_KRETPROBE, /* parts: function */
	PROBE_PROFILE, /* parts: rate ("99hz", "10ms") */
	PROBE_INTERVAL, /* parts: period ("1s", "100ms") */
	PROBE_KERNEL, /* parts: a group ("sockets"); resolves to tracepoint targets (kernel.c) */
	PROBE_SOFTWARE, /* parts: event ("page-faults"), optional period ("100") */
	PROBE_HARDWARE, /* parts: event ("cycles"), optional period ("1000000") */
	PROBE__COUNT
};

/* Bounds that keep tracing safe. */
#define PROBE_MAX_TARGETS 512 /* attach points one query may expand to */
#define PROBE_MAX_FIELDS 64 /* fields of one tracepoint */
#define PROBE_NAME_MAX 128

/* How a tracepoint field is laid out in the record. */
enum field_kind {
	FIELD_INT, /* integer of `size` bytes */
	FIELD_PTR, /* pointer; `user` if it points into user memory (syscall args) */
	FIELD_CHARS, /* char name[N]: inline string of `size` bytes */
	FIELD_DATA_LOC, /* __data_loc char[]: u32 (len << 16 | offset) to a string in the record */
	FIELD_ARRAY, /* any other array: not usable in queries, listed for completeness */
};

struct probe_field {
	char name[64];
	char ctype[64]; /* the type as the format writes it, e.g. "const char *" */
	enum field_kind kind;
	uint16_t offset;
	uint16_t size;
	bool is_signed;
	bool user; /* FIELD_PTR into user memory */
};

/* One concrete attach point. */
struct probe_target {
	enum probe_kind kind;
	char name[PROBE_NAME_MAX * 2]; /* canonical: "tracepoint:syscalls:sys_enter_read" */

	/* tracepoint, syscall (category "syscalls", event "sys_enter_NAME") */
	char category[64];
	char event[PROBE_NAME_MAX];
	int tp_id;
	struct probe_field *fields; /* owned by the enclosing probe_set */
	int nfields;

	/* uprobe, uretprobe, usdt: absolute path of the ELF file (after library resolution) */
	char binary[4096];
	char symbol[PROBE_NAME_MAX]; /* uprobe function / kprobe function */
	uint64_t sym_offset; /* file offset of the function (uprobe) */
	uint64_t offset; /* +OFF within the function */
	char provider[64]; /* usdt */
	char usdt_name[64]; /* usdt */
	int nsites; /* usdt: call sites (notes) in the binary */
	bool usdt_semaphore; /* usdt: the probe has a semaphore to bump */

	int nargs; /* argN available: uprobe/kprobe 6, usdt per note (min over sites) */
	int arg_size[12]; /* usdt: byte size of each arg (from the note), 8 otherwise */
	bool arg_signed[12];
	bool has_retval; /* uretprobe, kretprobe, syscall exit */

	uint64_t hz; /* profile */
	uint64_t period_ns; /* interval; software/hardware: events per sample (the event's
			     * canonical name is in `event`) */
	pid_t pid; /* 0: every process */
};

struct probe_set {
	struct probe_target *v;
	int n;
};

void probe_set_free(struct probe_set *set); /* frees v and every target's fields */

enum probe_err_kind {
	PERR_NONE,
	PERR_PROVIDER, /* unknown provider */
	PERR_SYNTAX, /* wrong number of parts, bad rate... */
	PERR_UNKNOWN, /* no such tracepoint/syscall */
	PERR_NO_MATCH, /* wildcard matched nothing */
	PERR_TOO_MANY, /* more than PROBE_MAX_TARGETS */
	PERR_BINARY, /* file missing / not ELF */
	PERR_LIBRARY, /* library name not resolvable */
	PERR_SYMBOL, /* no such function */
	PERR_USDT, /* no such USDT probe */
	PERR_RATE, /* profile/interval rate out of range */
	PERR_FEATURE, /* the kernel lacks what this probe type needs */
	PERR_OFFSET, /* offset where none is allowed */
	PERR_PID, /* no such process */
	PERR_SYSTEM, /* I/O or allocation failure; msg says which */
	PERR_ATTACH, /* the kernel refused an attachment; msg names the target and errno */
	PERR_OFFSET_INSN, /* a uprobe +offset that is not the first byte of an instruction */
	PERR_USDT_SITE, /* a USDT note whose site is not a nop (or whose semaphore is unusable) */
};

struct probe_err {
	enum probe_err_kind kind;
	char msg[256];
	char fix[1024]; /* "did you mean: a, b, c" or "use tracepoint:... instead"; may be "" */
};

struct probe_ctx {
	pid_t pid; /* -p PID: resolve libraries through its maps; 0: none */
	int max_targets; /* 0: PROBE_MAX_TARGETS */
};

/* Kernel features, probed once at start-up (features.c). */
struct probe_features {
	bool tracefs; /* tracefs mounted (mounted by us if it was absent) */
	bool tracepoint; /* BPF_PROG_TYPE_TRACEPOINT */
	bool raw_tp; /* BPF_PROG_TYPE_RAW_TRACEPOINT */
	bool perf_event; /* BPF_PROG_TYPE_PERF_EVENT + perf_event_open */
	bool uprobe; /* uprobe PMU or uprobe_events */
	bool uprobe_multi; /* multi-uprobe links (probe_uprobe_multi_supported()) */
	bool kprobe; /* kprobe PMU or kprobe_events */
	bool fentry; /* BPF_PROG_TYPE_TRACING with BTF */
	bool ringbuf; /* BPF_MAP_TYPE_RINGBUF */
	bool percpu_hash; /* BPF_MAP_TYPE_PERCPU_HASH */
	bool btf; /* /sys/kernel/btf/vmlinux */
	char tracefs_path[64];
};

const struct probe_features *probe_features_get(void); /* detected on first call */

/* The provider table (DTrace-style). */
typedef int (*probe_list_cb)(const struct probe_target *t, void *arg);

struct bpf_program;
struct bpf_link;

/*
 * The attachments of a query, each a bpf_link that owns a file descriptor of this process
 * (a BPF link, or a perf event with the program set on it).  Nothing is pinned, so the
 * kernel detaches everything when the process exits, even on SIGKILL.  The vector owns
 * the links; zero it before first use.
 */
struct probe_links {
	struct bpf_link **v;
	int n, cap;
	int *fds; /* BPF link fds made without libbpf (multi-uprobe links): closed alike */
	int nfds, fdcap;
};

int probe_links_push(struct probe_links *links, struct bpf_link *link); /* 0 or -ENOMEM */
int probe_links_push_fd(struct probe_links *links, int fd); /* 0 or -ENOMEM */
/* Destroys links from index n on (bpf_link__destroy), keeping the first n (of v only). */
void probe_links_truncate(struct probe_links *links, int n);
/* Destroys every link, closes every fd and frees the vectors; links is zeroed and may be
 * reused. */
void probe_links_destroy(struct probe_links *links);

/*
 * The arguments a tracepoint passes to a raw tracepoint program, from BTF b (NULL: the running
 * kernel's): the typedef btf_trace_EVENT is a pointer to a function of (void *__data, ARGS...);
 * the byte size of each of ARGS (8 for a pointer) into sizes[0..max).  Returns their number,
 * -ENOENT when the BTF (or the kernel) has no such typedef, -EINVAL when an argument is neither
 * an integer nor a pointer.  The compiler picks raw tracepoints by it (compiler/kbtf.c) and the
 * agent checks that its kernel passes what the program was compiled for (agent/query.c).
 */
struct btf;
int probe_tp_btf_args(const struct btf *b, const char *event, uint32_t *sizes, int max);

struct probe_provider {
	enum probe_kind kind;
	const char *name; /* "tracepoint" */
	const char *alias; /* "tp", or NULL */
	int min_parts, max_parts;
	const char *usage; /* "tracepoint:CATEGORY:EVENT" */
	/* Resolves parts (wildcards allowed), appending the targets to set (which the caller zeroes
	 * before first use); on failure set is left as it was.  Returns 0 or -1 with err filled. */
	int (*resolve)(const char *const *parts, int nparts, uint64_t offset, bool has_offset,
		       const struct probe_ctx *ctx, struct probe_set *set, struct probe_err *err);
	/* Calls cb for every probe matching pattern parts (NULL: all); binary-based providers
	 * need parts[0].  Returns 0, -1 with err filled, or cb's non-zero return. */
	int (*list)(const char *const *parts, int nparts, const struct probe_ctx *ctx,
		    probe_list_cb cb, void *arg, struct probe_err *err);
	/* Whether the running kernel can attach this provider; if not, why and what instead. */
	bool (*available)(struct probe_err *err);
	/* Attaches prog (loaded) to target t with attach cookie `cookie`, appending every
	 * bpf_link it creates to links (several for profile: one per online CPU).  pid > 0
	 * limits uprobes and USDT to that process; tracepoints and timers ignore it (the
	 * program filters).  0, or -1 with err filled and links left as they were. */
	int (*attach)(struct bpf_program *prog, const struct probe_target *t, uint64_t cookie,
		      pid_t pid, struct probe_links *links, struct probe_err *err);
};

extern const struct probe_provider *const probe_providers[];

const struct probe_provider *probe_provider_find(const char *name); /* name or alias */
const struct probe_provider *probe_provider_get(enum probe_kind kind);
const char *probe_kind_name(enum probe_kind k);
/* Whether k is a perf event source (software:, hardware:; perf.c). */
static inline bool probe_kind_is_perf(enum probe_kind k)
{
	return k == PROBE_SOFTWARE || k == PROBE_HARDWARE;
}

/*
 * `weft list [PATTERN]`: prints matching probes, one a line, and with `verbose` their
 * fields or arguments.  PATTERN is a probe as written ("syscall:open*", "tp:sched:*",
 * "usdt:/usr/bin/python3:*", "uprobe:libc:mall*"); NULL lists tracepoints and syscalls.
 * Returns the number listed, or -1 with err filled.
 */
int probe_list_print(const char *pattern, const struct probe_ctx *ctx, bool verbose, FILE *out,
		     struct probe_err *err);

/* Shared helpers (used by providers, exported for tests). */
bool probe_glob_match(const char *pattern, const char *s); /* '*' and '?' */
bool probe_has_wildcard(const char *s);
/* Mounts tracefs at /sys/kernel/tracing if absent; returns its path or NULL. */
const char *tracefs_dir(void);
/* Reads events/CAT/EVENT/format where the compiler reads formats: $WEFT_TRACEFS (a directory
 * laid out like tracefs: another kernel's formats) or this host's tracefs.  Returns 0 or
 * -errno. *fields is malloc'd. */
int tracefs_format_read(const char *category, const char *event, struct probe_field **fields,
			int *nfields, int *id);
/* The same from this host's tracefs always (an agent checking what it will attach). */
int tracefs_format_read_host(const char *category, const char *event, struct probe_field **fields,
			     int *nfields, int *id);
/* Resolves a library name ("libc", "libc.so.6") or path to an absolute ELF path, through
 * /proc/PID/maps when pid > 0, then the dynamic linker's cache.  0 or -ENOENT. */
int probe_resolve_binary(const char *name, pid_t pid, char *out, size_t outsz);

/*
 * An error from libbpf (or the kernel through it) in words: its own codes
 * (LIBBPF_ERRNO__FORMAT 4001 "BPF object format invalid", ... 4000..4013) through
 * libbpf_strerror(), others as strerror().  err may be negative.  The text lives in a
 * thread-local buffer until the next call in the same thread.
 */
const char *probe_bpf_strerror(int err);

/* Bounded edit-distance near matches, best first; returns how many were written. */
int probe_near_matches(const char *word, const char *const *cands, int ncands, const char **out,
		       int max);

/* span(syscall:NAME): the exit tracepoints syscalls:sys_exit_NAME (NAME may be a glob, in the
 * same order as the entries it pairs with), appended to set as PROBE_TRACEPOINT targets named
 * "tracepoint:syscalls:sys_exit_NAME", with has_retval and the one field `ret`.
 * 0, or -1 with err filled (PERR_UNKNOWN when the syscall has no exit tracepoint). */
int probe_syscall_exit_resolve(const char *name, const struct probe_ctx *ctx, struct probe_set *set,
			       struct probe_err *err);

/* Attaches prog to t through t's provider (see probe_provider.attach).  cookie must equal
 * the plan's plan_attach.cookie: the `probe` builtin reads it back (bpf_get_attach_cookie,
 * bpf_usdt_cookie).  0, or -1 with err filled (PERR_FEATURE when the provider cannot attach
 * on this kernel, PERR_PID, PERR_ATTACH) and links left as they were. */
int probe_attach_target(struct bpf_program *prog, const struct probe_target *t, uint64_t cookie,
			pid_t pid, struct probe_links *links, struct probe_err *err);

/*
 * Multi-uprobe links (uprobe_multi.c): one link attaches a program to many uprobe or uretprobe
 * sites of a binary at once, each with its own cookie, and detaches them all with one wait
 * (single uprobes cost ~50 ms each to detach).  Linux 6.6+, detected at run time;
 * WEFT_UPROBE_MULTI=0 in the environment disables them.
 *   probe_uprobe_multi_supported()  whether this kernel has them (detected once, quietly)
 *   probe_uprobe_multi_prepare()    before load: makes prog a multi-uprobe program (it can
 *                                   then only be attached by probe_uprobe_multi_attach());
 *                                   0, or -EOPNOTSUPP without kernel support
 *   probe_uprobe_multi_attach()     after load: attaches prog to the n targets t[] (all of one
 *                                   kind, uprobe or uretprobe; any binaries: one link each)
 *                                   with cookies[i] for t[i], pushing the link fds to links.
 *                                   0, or -1 with err filled (PERR_ATTACH, PERR_PID) and
 *                                   links left as they were.
 */
bool probe_uprobe_multi_supported(void);
int probe_uprobe_multi_prepare(struct bpf_program *prog);
bool probe_uprobe_multi_prepared(const struct bpf_program *prog);
int probe_uprobe_multi_attach(struct bpf_program *prog, const struct probe_target *const *t,
			      const uint64_t *cookies, int n, pid_t pid, struct probe_links *links,
			      struct probe_err *err);

/*
 * What one hit of a uprobe costs the thread that hits it, beyond the BPF program (the trap,
 * the dispatch, stepping over the probed instruction): measured once per process on a
 * function of its own (uprobe_cost.c).  0, or -errno (no uprobe PMU, no BPF).
 */
struct probe_uprobe_cost {
	uint64_t entry_ns; /* uprobe (and USDT) */
	uint64_t ret_ns; /* uretprobe: the entry trap plus the return trampoline */
};

int probe_uprobe_cost(struct probe_uprobe_cost *c);

/*
 * Symbolization (symbolize.c): kernel addresses through /proc/kallsyms, user addresses
 * through /proc/PID/maps and the symbol tables of the mapped ELF files.  A sym_cache holds
 * what it has read, bounded (processes and ELF files are evicted least recently used); it is
 * not thread-safe.  Both lookups always write a NUL-terminated string into buf: "func+0xoff"
 * ("func" at offset 0) and return 0, or a fallback and a negative errno: -ENOENT with
 * "file+0xoff" (mapped, no symbol) or "0x..." (unknown address, process gone, kallsyms
 * hidden), "[unknown]" for address 0.
 */
struct sym_cache;

struct sym_cache *sym_cache_new(void); /* NULL and errno on failure */
void sym_cache_free(struct sym_cache *c);
int sym_kernel(struct sym_cache *c, uint64_t addr, char *buf, size_t sz);
int sym_user(struct sym_cache *c, pid_t pid, uint64_t addr, char *buf, size_t sz);
/* Drops what the cache knows of pid (it exited, or exec'd): the next lookup re-reads its maps. */
void sym_cache_forget(struct sym_cache *c, pid_t pid);

#endif
