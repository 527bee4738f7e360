// SPDX-License-Identifier: Apache-2.0
/*
 * bpfrt — the user side of the BPF runtime: window flips, drains of the idle half, drop
 * counters, stream polling and span sweeps (see agent/bpfrt.h for the life cycle and
 * docs/runtime.md for the window protocol).
 *
 * The flip is the one step that must be right: write the new epoch, then update weft_sync (an
 * ARRAY_OF_MAPS), which makes the kernel call synchronize_rcu() before the syscall returns.
 * Every non-sleepable BPF program runs inside an RCU read-side critical section (or with
 * preemption disabled, which RCU treats alike), so when the update returns every program that
 * could have read the old epoch has finished, and the old half is complete and idle.  Only
 * then is it read and cleared.  Nothing here may read or clear the half programs are using.
 *
 * Ownership: the bpf_object belongs to the caller; bpfrt owns its drain buffer, its per-CPU
 * pointer array, the mapping of the control word and the ring buffer manager.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include "agent/bpfrt.h"
#include "probes/probes.h"
#include "base/log.h"

/* Largest batch asked of the kernel; the buffer bound usually limits it first. */
#define BPFRT_MAX_BATCH 4096u

struct bpfrt_agg {
	char name[64];
	int fd[2]; /* the halves of epoch 0 and 1 (one map twice for an array) */
	bool is_array;
	uint32_t key_size, value_size;
};

struct bpfrt {
	struct bpf_object *obj;
	unsigned int ncpu;
	unsigned int epoch;
	bool live; /* weft_ctl.live as last written */
	bool idle_valid; /* the last flip's grace period completed */
	uint64_t windows;

	struct weft_ctl *ctl; /* mmap of .data.weft, or NULL: write through the syscall */
	size_t ctl_len;
	int ctl_fd;
	int sync_fd, sync_inner_fd;
	int drops_fd;
	int stacks_fd[2];
	struct ring_buffer *rb;
	int rb_fd; /* weft_events */
	ring_buffer_sample_fn rb_fn; /* the caller's */
	void *rb_ctx;
	struct bpfrt_reader *reader; /* NULL: the caller's thread reads the ring itself */
	/* the rings of each CPU's own (weft_pcr), read with the shared ring; NULL: none */
	const struct weft_pcr_slot *pcr;
	struct weft_pcr_pos *pcr_pos;
	size_t pcr_len, pcr_pos_len;
	uint32_t pcr_slots; /* a CPU, a power of two */
	uint64_t evicted; /* span sweeps' evictions not yet reported */
	uint64_t misses_seen; /* the programs' recursion_misses already reported */

	struct bpfrt_agg *aggs;
	size_t naggs, caggs;

	void *buf; /* drain buffer: keys then values, at most BPFRT_DRAIN_BUF_BYTES + an entry */
	size_t buf_len;
	const void **cpu_vals; /* ncpu pointers handed to the callbacks */
	uint64_t *cpu_u64; /* ncpu counters, for the drop counters */
};

/* The reader thread's queue (bpfrt_stream_reader_start(), below). */
#define BPFRT_CHUNK_BYTES (256u << 10)
#define BPFRT_READER_WAIT_MS 50 /* records submitted without a wakeup wait at most this */
/* With the CPUs' own rings (kernel:sockets, at up to hundreds of thousands of records a second
 * on one CPU): read often enough that a CPU's ring seldom reaches the quarter at which its
 * programs wake the reader, since that wakeup costs the traced CPU an interrupt and this
 * thread's wakeup costs the tracer's CPU little (docs/performance.md, "Kernel edges: a ring of
 * each CPU's own") */
#define BPFRT_READER_WAIT_PCR_MS 10

struct bpfrt_chunk {
	struct bpfrt_chunk *next;
	size_t len, rd, cap;
	unsigned char data[];
};

struct bpfrt_reader {
	pthread_t th;
	bool running;
	atomic_bool stop;
	pthread_mutex_t mu;
	struct bpfrt_chunk *head, *tail; /* under mu */
	atomic_size_t bytes; /* queued and in the thread's chunk, bytes of chunks */
	size_t max_bytes;
	struct bpfrt_chunk *cur; /* the filler's chunk: the thread's, or the caller's after stop */
	atomic_uint_fast64_t lost;
	int efd; /* records wait (the caller's fd) */
	/* a sync (bpfrt_stream_poll(rt, 0)): the caller raises want and wakes the thread through
	 * wake_fd; the thread reads want, empties the ring, publishes, sets done and signals */
	int wake_fd, ep;
	pthread_cond_t cv; /* under mu */
	uint64_t want, done; /* under mu */
	bool dead; /* the thread stopped on an error (under mu) */
};

/* --- libbpf glue --------------------------------------------------------------------------- */

static int bpfrt_libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	enum weft_log_level wl = level == LIBBPF_WARN ? WEFT_LOG_WARN : WEFT_LOG_DEBUG;
	char buf[1024];
	size_t len;

	if (wl > weft_log_get_level())
		return 0;
	vsnprintf(buf, sizeof(buf), fmt, ap);
	len = strlen(buf);
	while (len && buf[len - 1] == '\n')
		buf[--len] = 0;
	weft_log(wl, "%s", buf); /* libbpf prefixes its own name */
	return 0;
}

void bpfrt_libbpf_setup(void)
{
	libbpf_set_strict_mode(LIBBPF_STRICT_ALL);
	libbpf_set_print(bpfrt_libbpf_print);
}

static size_t round_up8(size_t n)
{
	return (n + 7) & ~(size_t)7;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static struct bpf_map *find_map_suffixed(struct bpf_object *obj, const char *name,
					 const char *suffix)
{
	char full[128];

	if (snprintf(full, sizeof(full), "%s%s", name, suffix) >= (int)sizeof(full))
		return NULL;
	return bpf_object__find_map_by_name(obj, full);
}

/* --- before load --------------------------------------------------------------------------- */

static uint32_t ringbuf_size(uint32_t n)
{
	uint32_t page = (uint32_t)sysconf(_SC_PAGESIZE), sz = page;

	while (sz < n && sz < (1u << 31))
		sz <<= 1;
	return sz;
}

int bpfrt_map_resize(struct bpf_object *obj, const char *name, uint32_t n)
{
	struct bpf_map *m, *h0, *h1;
	int err;

	if (!n)
		return -EINVAL;
	if (strcmp(name, "weft_stacks") == 0) {
		h0 = bpf_object__find_map_by_name(obj, WEFT_STACKS0_MAP);
		h1 = bpf_object__find_map_by_name(obj, WEFT_STACKS1_MAP);
		if (!h0 || !h1)
			return -ENOENT;
		err = bpf_map__set_max_entries(h0, n);
		return err ? err : bpf_map__set_max_entries(h1, n);
	}
	m = bpf_object__find_map_by_name(obj, name);
	if (!m) {
		/* WEFT_AGG_HASH: the two halves NAME_0 and NAME_1 */
		h0 = find_map_suffixed(obj, name, "_0");
		h1 = find_map_suffixed(obj, name, "_1");
		if (!h0 || !h1)
			return -ENOENT;
		err = bpf_map__set_max_entries(h0, n);
		return err ? err : bpf_map__set_max_entries(h1, n);
	}
	switch (bpf_map__type(m)) {
	case BPF_MAP_TYPE_RINGBUF:
		return bpf_map__set_max_entries(m, ringbuf_size(n));
	case BPF_MAP_TYPE_PERCPU_ARRAY:
		return -EINVAL; /* WEFT_AGG_ARRAY and weft_drops have a fixed size */
	default:
		return bpf_map__set_max_entries(m, n);
	}
}

int bpfrt_rodata_set(struct bpf_object *obj, const char *var, const void *val, size_t size)
{
	const struct btf_var_secinfo *vs;
	const struct btf_type *sec;
	struct bpf_map *map;
	const void *init;
	struct btf *btf;
	size_t init_len;
	int id, err;
	char *copy;

	btf = bpf_object__btf(obj);
	map = bpf_object__find_map_by_name(obj, ".rodata");
	if (!btf || !map)
		return -ENOENT;
	id = btf__find_by_name_kind(btf, ".rodata", BTF_KIND_DATASEC);
	if (id < 0)
		return -ENOENT;
	sec = btf__type_by_id(btf, id);
	vs = btf_var_secinfos(sec);
	for (int i = 0; i < btf_vlen(sec); i++, vs++) {
		const struct btf_type *t = btf__type_by_id(btf, vs->type);

		if (strcmp(btf__name_by_offset(btf, t->name_off), var) != 0)
			continue;
		if (vs->size != size)
			return -EINVAL;
		init = bpf_map__initial_value(map, &init_len);
		if (!init || vs->offset + size > init_len)
			return -EINVAL;
		copy = malloc(init_len);
		if (!copy)
			return -ENOMEM;
		memcpy(copy, init, init_len);
		memcpy(copy + vs->offset, val, size);
		err = bpf_map__set_initial_value(map, copy, init_len);
		free(copy);
		return err;
	}
	return -ENOENT;
}

int bpfrt_pcr_size(struct bpf_object *obj, uint32_t ring_bytes)
{
	struct bpf_map *m = bpf_object__find_map_by_name(obj, WEFT_PCR_MAP);
	struct bpf_map *pm = bpf_object__find_map_by_name(obj, WEFT_PCR_POS_MAP);
	int ncpu = libbpf_num_possible_cpus(), err;
	uint64_t per = ring_bytes ? ring_bytes : 2u << 20;
	uint32_t slots = BPFRT_PCR_MIN_SLOTS;

	if (!m && !pm)
		return 0;
	if (!m || !pm)
		return -ENOENT;
	if (ncpu <= 0)
		return ncpu < 0 ? ncpu : -EINVAL;
	if (per * (uint64_t)ncpu > BPFRT_PCR_MAX_BYTES)
		per = BPFRT_PCR_MAX_BYTES / (uint64_t)ncpu;
	while ((uint64_t)slots * 2 * sizeof(struct weft_pcr_slot) <= per)
		slots *= 2;
	err = bpf_map__set_max_entries(m, slots * (uint32_t)ncpu);
	if (!err)
		err = bpf_map__set_max_entries(pm, (uint32_t)ncpu);
	if (!err)
		err = bpfrt_rodata_set(obj, WEFT_PCR_SLOTS_VAR, &slots, sizeof(slots));
	return err;
}

/* --- open / close -------------------------------------------------------------------------- */

static int map_fd_by_name(struct bpf_object *obj, const char *name)
{
	struct bpf_map *m = bpf_object__find_map_by_name(obj, name);

	return m ? bpf_map__fd(m) : -ENOENT;
}

static int ctl_setup(struct bpfrt *rt)
{
	struct bpf_map *m = bpf_object__find_map_by_name(rt->obj, WEFT_CTL_SEC);
	struct weft_ctl cur;
	uint32_t zero = 0;
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	void *p;

	if (!m || bpf_map__fd(m) < 0)
		return -ENOENT;
	if (bpf_map__value_size(m) != sizeof(struct weft_ctl)) {
		log_err("bpfrt: section %s holds more than struct weft_ctl", WEFT_CTL_SEC);
		return -EPROTO;
	}
	rt->ctl_fd = bpf_map__fd(m);
	if (bpf_map_lookup_elem(rt->ctl_fd, &zero, &cur))
		return -errno;
	if (cur.abi != WEFT_ABI_VERSION) {
		log_err("bpfrt: object has runtime ABI %u, this agent speaks %u", cur.abi,
			WEFT_ABI_VERSION);
		return -EPROTO;
	}
	rt->epoch = cur.epoch & 1;
	rt->live = cur.live != 0;
	/* mmap when the map allows it (libbpf makes .data maps mmapable); else use the syscall */
	rt->ctl_len = page;
	p = mmap(NULL, rt->ctl_len, PROT_READ | PROT_WRITE, MAP_SHARED, rt->ctl_fd, 0);
	if (p != MAP_FAILED)
		rt->ctl = p;
	else
		log_debug("bpfrt: %s not mmapable (%s), epoch written by syscall", WEFT_CTL_SEC,
			  strerror(errno));
	return 0;
}

/* The CPUs' rings mapped, when the object has them sized (bpfrt_pcr_size()). */
static int pcr_setup(struct bpfrt *rt)
{
	struct bpf_map *m = bpf_object__find_map_by_name(rt->obj, WEFT_PCR_MAP);
	struct bpf_map *pm = bpf_object__find_map_by_name(rt->obj, WEFT_PCR_POS_MAP);
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	uint32_t slots;
	void *p;

	if (!m || !pm || bpf_map__max_entries(pm) != rt->ncpu)
		return 0; /* none, or not sized: the programs write to the shared ring */
	if (bpf_map__value_size(m) != sizeof(struct weft_pcr_slot) ||
	    bpf_map__value_size(pm) != sizeof(struct weft_pcr_pos)) {
		log_err("bpfrt: the object's %s is not this agent's", WEFT_PCR_MAP);
		return -EPROTO;
	}
	slots = bpf_map__max_entries(m) / rt->ncpu;
	if (!slots || (slots & (slots - 1)) || slots * rt->ncpu != bpf_map__max_entries(m)) {
		log_err("bpfrt: %s holds %u slots for %u CPUs", WEFT_PCR_MAP,
			bpf_map__max_entries(m), rt->ncpu);
		return -EPROTO;
	}
	rt->pcr_len =
		((size_t)slots * rt->ncpu * sizeof(struct weft_pcr_slot) + page - 1) / page * page;
	rt->pcr_pos_len = (rt->ncpu * sizeof(struct weft_pcr_pos) + page - 1) / page * page;
	p = mmap(NULL, rt->pcr_len, PROT_READ, MAP_SHARED, bpf_map__fd(m), 0);
	if (p == MAP_FAILED)
		return -errno;
	rt->pcr = p;
	p = mmap(NULL, rt->pcr_pos_len, PROT_READ | PROT_WRITE, MAP_SHARED, bpf_map__fd(pm), 0);
	if (p == MAP_FAILED) {
		int err = -errno;

		munmap((void *)rt->pcr, rt->pcr_len);
		rt->pcr = NULL;
		return err;
	}
	rt->pcr_pos = p;
	rt->pcr_slots = slots;
	return 0;
}

static void pcr_unmap(struct bpfrt *rt)
{
	if (rt->pcr)
		munmap((void *)rt->pcr, rt->pcr_len);
	if (rt->pcr_pos)
		munmap(rt->pcr_pos, rt->pcr_pos_len);
	rt->pcr = NULL;
	rt->pcr_pos = NULL;
}

struct bpfrt *bpfrt_open(struct bpf_object *obj)
{
	struct bpfrt *rt;
	int ncpu, err;

	ncpu = libbpf_num_possible_cpus();
	if (ncpu <= 0) {
		errno = ncpu < 0 ? -ncpu : EINVAL;
		return NULL;
	}
	rt = calloc(1, sizeof(*rt));
	if (!rt) {
		errno = ENOMEM;
		return NULL;
	}
	rt->obj = obj;
	rt->ncpu = (unsigned int)ncpu;
	rt->idle_valid = false;
	rt->cpu_vals = calloc(rt->ncpu, sizeof(*rt->cpu_vals));
	rt->cpu_u64 = calloc(rt->ncpu, sizeof(*rt->cpu_u64));
	if (!rt->cpu_vals || !rt->cpu_u64) {
		err = -ENOMEM;
		goto out_free;
	}
	err = ctl_setup(rt);
	if (err)
		goto out_free;
	rt->sync_fd = map_fd_by_name(obj, WEFT_SYNC_MAP);
	rt->sync_inner_fd = map_fd_by_name(obj, WEFT_SYNC_INNER_MAP);
	rt->drops_fd = map_fd_by_name(obj, WEFT_DROPS_MAP);
	if (rt->sync_fd < 0 || rt->sync_inner_fd < 0 || rt->drops_fd < 0) {
		log_err("bpfrt: object lacks the runtime maps (does it include weft.bpf.h?)");
		err = -ENOENT;
		goto out_unmap;
	}
	rt->stacks_fd[0] = map_fd_by_name(obj, WEFT_STACKS0_MAP);
	rt->stacks_fd[1] = map_fd_by_name(obj, WEFT_STACKS1_MAP);
	err = pcr_setup(rt);
	if (err)
		goto out_unmap;
	return rt;

out_unmap:
	if (rt->ctl)
		munmap(rt->ctl, rt->ctl_len);
out_free:
	free(rt->cpu_vals);
	free(rt->cpu_u64);
	free(rt);
	errno = -err;
	return NULL;
}

static void reader_free(struct bpfrt *rt);

void bpfrt_close(struct bpfrt *rt)
{
	if (!rt)
		return;
	reader_free(rt);
	ring_buffer__free(rt->rb);
	pcr_unmap(rt);
	if (rt->ctl)
		munmap(rt->ctl, rt->ctl_len);
	free(rt->aggs);
	free(rt->buf);
	free(rt->cpu_vals);
	free(rt->cpu_u64);
	free(rt);
}

unsigned int bpfrt_ncpu(const struct bpfrt *rt)
{
	return rt->ncpu;
}

unsigned int bpfrt_epoch(const struct bpfrt *rt)
{
	return rt->epoch;
}

uint64_t bpfrt_windows(const struct bpfrt *rt)
{
	return rt->windows;
}

/* --- the flip ------------------------------------------------------------------------------ */

/* Delete every key of fd (a map nobody writes): next key first, then delete the current one. */
static int map_clear(int fd, uint32_t key_size)
{
	char cur[256], next[256];
	int err;

	if (key_size > sizeof(cur))
		return -E2BIG;
	err = bpf_map_get_next_key(fd, NULL, cur);
	while (!err) {
		bool more = bpf_map_get_next_key(fd, cur, next) == 0;

		bpf_map_delete_elem(fd, cur);
		if (!more)
			break;
		memcpy(cur, next, key_size);
	}
	return 0;
}

/* Writes weft_ctl: epoch and live, one word at a time through the mapping if there is one. */
static int ctl_write(struct bpfrt *rt, unsigned int epoch, bool live)
{
	struct weft_ctl v = { .epoch = epoch, .abi = WEFT_ABI_VERSION, .live = live };
	uint32_t zero = 0;

	if (rt->ctl) {
		__atomic_store_n(&rt->ctl->epoch, epoch, __ATOMIC_SEQ_CST);
		__atomic_store_n(&rt->ctl->live, (uint32_t)live, __ATOMIC_SEQ_CST);
		return 0;
	}
	return bpf_map_update_elem(rt->ctl_fd, &zero, &v, BPF_ANY) ? -errno : 0;
}

int bpfrt_live_set(struct bpfrt *rt, bool live)
{
	int err = ctl_write(rt, rt->epoch, live);

	if (!err)
		rt->live = live;
	return err;
}

int bpfrt_window_flip(struct bpfrt *rt)
{
	unsigned int next = rt->epoch ^ 1;
	uint32_t zero = 0;
	int err;

	/* the new epoch's stacks belonged to the window read after the previous flip */
	if (rt->stacks_fd[next] >= 0)
		map_clear(rt->stacks_fd[next], sizeof(uint32_t));
	err = ctl_write(rt, next, rt->live);
	if (err)
		return err;
	rt->epoch = next;
	rt->windows++;
	/*
	 * The grace period: the kernel's map-in-map update waits in synchronize_rcu() before
	 * returning (kernel/bpf/syscall.c, maybe_wait_bpf_programs()).  The slot is rewritten
	 * with the map it already holds, so nothing else changes.
	 */
	if (bpf_map_update_elem(rt->sync_fd, &zero, &rt->sync_inner_fd, BPF_ANY)) {
		err = -errno;
		rt->idle_valid = false;
		log_err("bpfrt: window flip: grace period wait failed: %s",
			probe_bpf_strerror(err));
		return err;
	}
	rt->idle_valid = true;
	return 0;
}

/* --- drains -------------------------------------------------------------------------------- */

static struct bpfrt_agg *agg_find(struct bpfrt *rt, const char *name)
{
	struct bpf_map *m, *h0, *h1;
	struct bpfrt_agg *a;

	for (size_t i = 0; i < rt->naggs; i++)
		if (strcmp(rt->aggs[i].name, name) == 0)
			return &rt->aggs[i];
	if (strlen(name) >= sizeof(a->name))
		return NULL;
	m = bpf_object__find_map_by_name(rt->obj, name);
	h0 = find_map_suffixed(rt->obj, name, "_0");
	h1 = find_map_suffixed(rt->obj, name, "_1");
	if (!m && (!h0 || !h1))
		return NULL;
	if (rt->naggs == rt->caggs) {
		size_t c = rt->caggs ? 2 * rt->caggs : 4;
		void *p = realloc(rt->aggs, c * sizeof(*rt->aggs));

		if (!p)
			return NULL;
		rt->aggs = p;
		rt->caggs = c;
	}
	a = &rt->aggs[rt->naggs];
	memset(a, 0, sizeof(*a));
	strcpy(a->name, name);
	if (!m) { /* WEFT_AGG_HASH */
		if (bpf_map__type(h0) != BPF_MAP_TYPE_PERCPU_HASH ||
		    bpf_map__type(h1) != BPF_MAP_TYPE_PERCPU_HASH)
			return NULL;
		a->fd[0] = bpf_map__fd(h0);
		a->fd[1] = bpf_map__fd(h1);
		a->key_size = bpf_map__key_size(h0);
		a->value_size = bpf_map__value_size(h0);
	} else { /* WEFT_AGG_ARRAY */
		if (bpf_map__type(m) != BPF_MAP_TYPE_PERCPU_ARRAY || bpf_map__max_entries(m) != 2)
			return NULL;
		a->is_array = true;
		a->fd[0] = a->fd[1] = bpf_map__fd(m);
		a->key_size = bpf_map__key_size(m);
		a->value_size = bpf_map__value_size(m);
	}
	if (a->fd[0] < 0 || a->fd[1] < 0)
		return NULL;
	rt->naggs++;
	return a;
}

int bpfrt_agg_sizes(struct bpfrt *rt, const char *name, uint32_t *key_size, uint32_t *value_size)
{
	struct bpfrt_agg *a = agg_find(rt, name);

	if (!a)
		return -ENOENT;
	*key_size = a->is_array ? 0 : a->key_size;
	*value_size = a->value_size;
	return 0;
}

/* Make the drain buffer at least len bytes (bounded by the caller's arithmetic). */
static int buf_reserve(struct bpfrt *rt, size_t len)
{
	void *p;

	if (rt->buf_len >= len)
		return 0;
	p = realloc(rt->buf, len);
	if (!p)
		return -ENOMEM;
	rt->buf = p;
	rt->buf_len = len;
	return 0;
}

/* Per-CPU values of one entry at vals (stride-spaced) -> the callback. */
static int emit(struct bpfrt *rt, bpfrt_entry_fn fn, void *ctx, const void *key, const char *vals,
		size_t stride)
{
	for (unsigned int c = 0; c < rt->ncpu; c++)
		rt->cpu_vals[c] = vals + c * stride;
	return fn(ctx, key, rt->cpu_vals, rt->ncpu);
}

/* One entry at a time: for kernels without batch ops, or after a batch error. */
static int drain_hash_slow(struct bpfrt *rt, int fd, uint32_t ksz, size_t stride, bpfrt_entry_fn fn,
			   void *ctx, int *cb_err)
{
	size_t vsz = stride * rt->ncpu;
	char *cur, *next, *vals;
	int n = 0, err;

	err = buf_reserve(rt, 2 * round_up8(ksz) + vsz);
	if (err)
		return err;
	cur = rt->buf;
	next = cur + round_up8(ksz);
	vals = next + round_up8(ksz);
	err = bpf_map_get_next_key(fd, NULL, cur);
	while (!err) {
		bool more = bpf_map_get_next_key(fd, cur, next) == 0;

		if (bpf_map_lookup_elem(fd, cur, vals) == 0) {
			int r = emit(rt, fn, ctx, cur, vals, stride);

			if (r && !*cb_err)
				*cb_err = r;
			n++;
		}
		if (bpf_map_delete_elem(fd, cur) && errno != ENOENT)
			return -errno;
		if (!more)
			break;
		memcpy(cur, next, ksz);
	}
	return n;
}

static int drain_hash(struct bpfrt *rt, int fd, uint32_t ksz, uint32_t value_size,
		      bpfrt_entry_fn fn, void *ctx, int *cb_err)
{
	LIBBPF_OPTS(bpf_map_batch_opts, opts);
	size_t stride = round_up8(value_size), vsz = stride * rt->ncpu;
	size_t per = round_up8(ksz) + vsz, tok_len = round_up8(ksz) + 8;
	uint32_t batch = (uint32_t)(BPFRT_DRAIN_BUF_BYTES / per);
	char *keys, *vals, *tok_in, *tok_out;
	bool first = true;
	int total = 0, err, slow;

	if (batch == 0)
		batch = 1;
	if (batch > BPFRT_MAX_BATCH)
		batch = BPFRT_MAX_BATCH;
	err = buf_reserve(rt, 2 * tok_len + (size_t)batch * per);
	if (err)
		return err;
	tok_in = rt->buf;
	tok_out = tok_in + tok_len;
	keys = tok_out + tok_len;
	vals = keys + (size_t)batch * round_up8(ksz);
	for (;;) {
		uint32_t count = batch;

		err = bpf_map_lookup_and_delete_batch(fd, first ? NULL : tok_in, tok_out, keys,
						      vals, &count, &opts);
		if (err && err != -ENOENT) {
			/*
			 * -ENOSPC: one hash bucket holds more than `batch` entries; -EINVAL or
			 * -ENOTSUPP: no batch ops.  What is left is drained one by one.
			 */
			log_debug("bpfrt: batch drain: %s, draining one by one",
				  probe_bpf_strerror(err));
			break;
		}
		/* keys are packed at key_size, values at stride * ncpu */
		for (uint32_t i = 0; i < count; i++) {
			int r = emit(rt, fn, ctx, keys + (size_t)i * ksz, vals + (size_t)i * vsz,
				     stride);

			if (r && !*cb_err)
				*cb_err = r;
		}
		total += (int)count;
		if (err == -ENOENT)
			return total;
		memcpy(tok_in, tok_out, tok_len);
		first = false;
	}
	slow = drain_hash_slow(rt, fd, ksz, stride, fn, ctx, cb_err);
	return slow < 0 ? slow : total + slow;
}

static int drain_array(struct bpfrt *rt, int fd, uint32_t value_size, bpfrt_entry_fn fn, void *ctx,
		       int *cb_err)
{
	size_t stride = round_up8(value_size), vsz = stride * rt->ncpu;
	uint32_t key = rt->epoch ^ 1;
	int err, r;

	err = buf_reserve(rt, vsz);
	if (err)
		return err;
	if (bpf_map_lookup_elem(fd, &key, rt->buf))
		return -errno;
	r = emit(rt, fn, ctx, NULL, rt->buf, stride);
	if (r && !*cb_err)
		*cb_err = r;
	memset(rt->buf, 0, vsz);
	if (bpf_map_update_elem(fd, &key, rt->buf, BPF_ANY))
		return -errno;
	return 1;
}

int bpfrt_agg_drain(struct bpfrt *rt, const char *name, bpfrt_entry_fn fn, void *ctx)
{
	struct bpfrt_agg *a;
	int cb_err = 0, n;

	if (!rt->idle_valid)
		return -EAGAIN;
	a = agg_find(rt, name);
	if (!a)
		return -ENOENT;
	if (a->is_array)
		n = drain_array(rt, a->fd[0], a->value_size, fn, ctx, &cb_err);
	else
		n = drain_hash(rt, a->fd[rt->epoch ^ 1], a->key_size, a->value_size, fn, ctx,
			       &cb_err);
	if (n >= 0 && cb_err)
		return cb_err < 0 ? cb_err : -ECANCELED;
	return n;
}

int bpfrt_drops_read(struct bpfrt *rt, uint64_t counts[WEFT_DROP_NR])
{
	uint32_t base = (rt->epoch ^ 1) * WEFT_DROP_NR;

	if (!rt->idle_valid)
		return -EAGAIN;
	for (uint32_t r = 0; r < WEFT_DROP_NR; r++) {
		uint32_t key = base + r;
		uint64_t sum = 0;

		if (bpf_map_lookup_elem(rt->drops_fd, &key, rt->cpu_u64))
			return -errno;
		for (unsigned int c = 0; c < rt->ncpu; c++)
			sum += rt->cpu_u64[c];
		if (!sum)
			continue;
		counts[r] += sum;
		memset(rt->cpu_u64, 0, rt->ncpu * sizeof(*rt->cpu_u64));
		if (bpf_map_update_elem(rt->drops_fd, &key, rt->cpu_u64, BPF_ANY))
			return -errno;
	}
	counts[WEFT_DROP_SPAN_EVICTED] += rt->evicted;
	rt->evicted = 0;
	if (rt->reader) /* records the reader's queue had no room for */
		counts[WEFT_DROP_RINGBUF_FULL] += atomic_exchange(&rt->reader->lost, 0);
	return 0;
}

/* --- streams ------------------------------------------------------------------------------- */

int bpfrt_stream_open(struct bpfrt *rt, ring_buffer_sample_fn fn, void *ctx)
{
	int fd = map_fd_by_name(rt->obj, WEFT_EVENTS_MAP);

	if (fd < 0)
		return -ENOENT;
	if (rt->rb)
		return -EBUSY;
	rt->rb = ring_buffer__new(fd, fn, ctx, NULL);
	if (!rt->rb)
		return -errno;
	rt->rb_fd = fd;
	rt->rb_fn = fn;
	rt->rb_ctx = ctx;
	return 0;
}

/*
 * The reader thread (bpfrt_stream_reader_start()).  Why it exists: on the development VM a
 * ring-buffer record costs the traced program about twice as much in a 16 MiB ring as in a
 * 1-2 MiB one (docs/performance.md, "Kernel edges": a large ring's pages are cold each time
 * the writer comes round), but a small ring holds only tens of milliseconds of a busy
 * capture, while the caller's thread may be away for far longer (a graph capture stores a
 * second's traces at once).  So a thread of its own empties the ring into a queue in memory,
 * and the caller's thread takes records from the queue, with the same callback and the same
 * order as if it read the ring.
 *
 * The queue is a list of chunks of records (each a u32 size, the bytes, padding to 8), bounded
 * by max_bytes: a record that finds it full is dropped and counted with the ring's own losses
 * (WEFT_DROP_RINGBUF_FULL, through bpfrt_drops_read()).  The thread fills a chunk of its own
 * and appends it under the mutex after each pass; an eventfd says records wait (the caller's
 * bpfrt_stream_fd()).  Its signals are all blocked (callers take theirs with signalfd).  After
 * bpfrt_stream_reader_stop() the thread is gone and bpfrt_stream_poll() empties the ring
 * into the queue itself before handing the queue out: the final drain misses nothing.
 */
static void reader_publish(struct bpfrt_reader *r)
{
	struct bpfrt_chunk *c = r->cur;
	bool was_empty;

	if (!c || c->len == 0)
		return;
	r->cur = NULL;
	if (c->len < c->cap / 2) { /* a quiet pass: give back what it did not fill */
		struct bpfrt_chunk *s = realloc(c, sizeof(*c) + c->len);

		if (s) {
			c = s;
			atomic_fetch_sub(&r->bytes, c->cap - c->len);
			c->cap = c->len;
		}
	}
	pthread_mutex_lock(&r->mu);
	was_empty = !r->head;
	if (r->tail)
		r->tail->next = c;
	else
		r->head = c;
	r->tail = c;
	pthread_mutex_unlock(&r->mu);
	if (was_empty)
		(void)eventfd_write(r->efd, 1);
}

/* The ring's callback while a reader exists: the record into the filler's chunk. */
static int reader_append(void *ctx, void *data, size_t size)
{
	struct bpfrt_reader *r = ctx;
	size_t need = sizeof(uint64_t) + ((size + 7) & ~(size_t)7);
	struct bpfrt_chunk *c = r->cur;
	uint32_t sz = (uint32_t)size;

	if (!c || c->len + need > c->cap) {
		size_t cap = need > BPFRT_CHUNK_BYTES ? need : BPFRT_CHUNK_BYTES;
		size_t used;

		reader_publish(r);
		used = atomic_load(&r->bytes);
		if (used + cap > r->max_bytes) /* the room left, if a record fits */
			cap = used < r->max_bytes ? r->max_bytes - used : 0;
		if (cap < need || !(c = malloc(sizeof(*c) + cap))) {
			atomic_fetch_add(&r->lost, 1);
			return 0;
		}
		c->next = NULL;
		c->len = c->rd = 0;
		c->cap = cap;
		atomic_fetch_add(&r->bytes, cap);
		r->cur = c;
	}
	memcpy(c->data + c->len, &sz, sizeof(sz));
	memcpy(c->data + c->len + sizeof(uint64_t), data, size);
	c->len += need;
	return 0;
}

/*
 * Hand the records of the CPUs' rings to fn, CPU by CPU, each CPU's in order; a slot is read
 * once its seq says its record is whole (docs/runtime.md, "Rings of a CPU's own"), and the
 * CPU's tail then moved past what was read, which frees the slots for its programs.  The
 * number of records, or fn's first error (its record is consumed, as the ring's manager
 * consumes one).
 */
static int pcr_consume(struct bpfrt *rt, ring_buffer_sample_fn fn, void *ctx)
{
	int n = 0;

	for (unsigned int c = 0; c < rt->ncpu; c++) {
		struct weft_pcr_pos *p = &rt->pcr_pos[c];
		uint64_t head = __atomic_load_n(&p->head, __ATOMIC_ACQUIRE), t = p->tail;
		const struct weft_pcr_slot *base = rt->pcr + (size_t)c * rt->pcr_slots;
		int rc = 0;

		while (t < head) {
			const struct weft_pcr_slot *s = &base[t & (rt->pcr_slots - 1)];
			uint32_t len;

			if (__atomic_load_n(&s->seq, __ATOMIC_ACQUIRE) != t + 1)
				break; /* still being written */
			/* at most the slot: a wrong length is the record's checker's to count */
			len = s->h.len;
			if (len > sizeof(s->h) + sizeof(s->b))
				len = sizeof(s->h) + sizeof(s->b);
			t++;
			n++;
			/* in place: the slot is not written again before the tail passes it */
			rc = fn(ctx, (void *)&s->h, len);
			if (rc < 0)
				break;
		}
		__atomic_store_n(&p->tail, t, __ATOMIC_RELEASE);
		if (rc < 0)
			return rc;
	}
	return n;
}

/* Everything committed in the shared ring, then in the CPUs' rings, to the callback of the
 * ring's manager (the reader's queue, or the caller's). */
static int rt_consume(struct bpfrt *rt)
{
	int rc = ring_buffer__consume(rt->rb), rc2;

	if (rc < 0 || !rt->pcr)
		return rc;
	rc2 = rt->reader ? pcr_consume(rt, reader_append, rt->reader) :
			   pcr_consume(rt, rt->rb_fn, rt->rb_ctx);
	return rc2 < 0 ? rc2 : rc + rc2;
}

static void *reader_main(void *arg)
{
	struct bpfrt *rt = arg;
	struct bpfrt_reader *r = rt->reader;

	while (!atomic_load(&r->stop)) {
		struct epoll_event ev[2];
		uint64_t want;
		eventfd_t v;
		int rc;

		if (epoll_wait(r->ep, ev, 2,
			       rt->pcr ? BPFRT_READER_WAIT_PCR_MS : BPFRT_READER_WAIT_MS) < 0 &&
		    errno != EINTR) {
			rc = -errno;
			goto fail;
		}
		(void)eventfd_read(r->wake_fd, &v);
		pthread_mutex_lock(&r->mu);
		want = r->want;
		pthread_mutex_unlock(&r->mu);
		/* everything committed by now, whether or not the writer woke us */
		rc = rt_consume(rt);
		reader_publish(r);
		if (rc < 0 && rc != -EINTR)
			goto fail;
		pthread_mutex_lock(&r->mu);
		r->done = want;
		pthread_cond_broadcast(&r->cv);
		pthread_mutex_unlock(&r->mu);
		continue;
fail:
		weft_log(WEFT_LOG_WARN, "stream reader: %s", strerror(-rc));
		pthread_mutex_lock(&r->mu);
		r->dead = true;
		pthread_cond_broadcast(&r->cv);
		pthread_mutex_unlock(&r->mu);
		break;
	}
	return NULL;
}

/* Wait until the thread has read everything committed before this call (and queued it). */
static void reader_sync(struct bpfrt_reader *r)
{
	uint64_t my;

	pthread_mutex_lock(&r->mu);
	my = ++r->want;
	pthread_mutex_unlock(&r->mu);
	(void)eventfd_write(r->wake_fd, 1);
	pthread_mutex_lock(&r->mu);
	while (r->done < my && !r->dead)
		pthread_cond_wait(&r->cv, &r->mu);
	pthread_mutex_unlock(&r->mu);
}

int bpfrt_stream_reader_start(struct bpfrt *rt, size_t max_bytes)
{
	struct bpfrt_reader *r;
	struct ring_buffer *rb;
	sigset_t all, old;
	int rc;

	if (!rt->rb)
		return -ENOENT;
	if (rt->reader)
		return -EBUSY;
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->max_bytes = max_bytes ? max_bytes : BPFRT_QUEUE_MAX_BYTES;
	r->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (r->efd < 0) {
		rc = -errno;
		free(r);
		return rc;
	}
	pthread_mutex_init(&r->mu, NULL);
	pthread_cond_init(&r->cv, NULL);
	r->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	r->ep = epoll_create1(EPOLL_CLOEXEC);
	rb = ring_buffer__new(rt->rb_fd, reader_append, r, NULL);
	if (!rb || r->wake_fd < 0 || r->ep < 0 ||
	    epoll_ctl(r->ep, EPOLL_CTL_ADD, r->wake_fd,
		      &(struct epoll_event){ .events = EPOLLIN }) ||
	    epoll_ctl(r->ep, EPOLL_CTL_ADD, ring_buffer__epoll_fd(rb),
		      &(struct epoll_event){ .events = EPOLLIN })) {
		rc = errno ? -errno : -ENOMEM;
		ring_buffer__free(rb);
		if (r->ep >= 0)
			close(r->ep);
		if (r->wake_fd >= 0)
			close(r->wake_fd);
		close(r->efd);
		pthread_cond_destroy(&r->cv);
		pthread_mutex_destroy(&r->mu);
		free(r);
		return rc;
	}
	/* nothing was read yet through the caller's manager: swap it for the queue's */
	ring_buffer__free(rt->rb);
	rt->rb = rb;
	rt->reader = r;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = -pthread_create(&r->th, NULL, reader_main, rt);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc)
		return rc; /* the caller's thread reads the queue's manager itself */
	r->running = true;
	return 0;
}

void bpfrt_stream_reader_stop(struct bpfrt *rt)
{
	struct bpfrt_reader *r = rt->reader;

	if (!r || !r->running)
		return;
	atomic_store(&r->stop, true);
	(void)eventfd_write(r->wake_fd, 1);
	pthread_join(r->th, NULL);
	r->running = false;
}

static void reader_free(struct bpfrt *rt)
{
	struct bpfrt_reader *r = rt->reader;

	if (!r)
		return;
	bpfrt_stream_reader_stop(rt);
	for (struct bpfrt_chunk *c = r->head, *n; c; c = n) {
		n = c->next;
		free(c);
	}
	free(r->cur);
	close(r->efd);
	close(r->wake_fd);
	close(r->ep);
	pthread_cond_destroy(&r->cv);
	pthread_mutex_destroy(&r->mu);
	free(r);
	rt->reader = NULL;
}

/* Hand the queued records to the caller's callback, in order; stops at its first error. */
static int reader_dispatch(struct bpfrt *rt)
{
	struct bpfrt_reader *r = rt->reader;
	struct bpfrt_chunk *c;
	eventfd_t v;
	int n = 0;

	(void)eventfd_read(r->efd, &v);
	pthread_mutex_lock(&r->mu);
	c = r->head;
	r->head = r->tail = NULL;
	pthread_mutex_unlock(&r->mu);
	while (c) {
		struct bpfrt_chunk *next = c->next;

		while (c->rd < c->len) {
			uint32_t sz;
			int rc;

			memcpy(&sz, c->data + c->rd, sizeof(sz));
			rc = rt->rb_fn(rt->rb_ctx, c->data + c->rd + sizeof(uint64_t), sz);
			c->rd += sizeof(uint64_t) + ((sz + 7) & ~(size_t)7);
			n++;
			if (rc < 0) {
				/* the rest waits for the next poll, ahead of anything newer */
				if (c->rd == c->len) {
					atomic_fetch_sub(&r->bytes, c->cap);
					free(c);
					c = next;
				}
				if (c) {
					struct bpfrt_chunk *last = c;

					while (last->next)
						last = last->next;
					pthread_mutex_lock(&r->mu);
					last->next = r->head;
					r->head = c;
					if (!r->tail)
						r->tail = last;
					pthread_mutex_unlock(&r->mu);
					(void)eventfd_write(r->efd, 1);
				}
				return rc;
			}
		}
		atomic_fetch_sub(&r->bytes, c->cap);
		free(c);
		c = next;
	}
	return n;
}

int bpfrt_stream_poll(struct bpfrt *rt, int timeout_ms)
{
	if (!rt->rb)
		return -ENOENT;
	if (rt->reader) {
		struct bpfrt_reader *r = rt->reader;
		bool dead;

		pthread_mutex_lock(&r->mu);
		dead = r->dead;
		pthread_mutex_unlock(&r->mu);
		if (dead) /* it said why: this thread reads the ring from now on */
			bpfrt_stream_reader_stop(rt);
		if (!r->running) {
			/* the thread is gone (or never ran): this thread reads the ring */
			int rc = rt_consume(rt);

			if (rc < 0)
				return rc;
			reader_publish(r);
		} else if (timeout_ms == 0) {
			/* what was committed before this call, all of it (a graph capture's
			 * live clock relies on that): the thread empties the ring first */
			reader_sync(r);
		} else {
			struct pollfd p = { .fd = r->efd, .events = POLLIN };
			bool empty;

			pthread_mutex_lock(&r->mu);
			empty = !r->head;
			pthread_mutex_unlock(&r->mu);
			if (empty && poll(&p, 1, timeout_ms) < 0 && errno != EINTR)
				return -errno;
		}
		return reader_dispatch(rt);
	}
	/* without waiting: every record there, whether or not the writer woke us (graph
	 * records are submitted without a wakeup: WEFT_REC_SUBMIT_LAZY) */
	if (timeout_ms == 0)
		return rt_consume(rt);
	if (rt->pcr) {
		/* the CPUs' rings after the wait: their programs wake it only a quarter full */
		int rc = ring_buffer__poll(rt->rb, timeout_ms), rc2;

		if (rc < 0)
			return rc;
		rc2 = pcr_consume(rt, rt->rb_fn, rt->rb_ctx);
		return rc2 < 0 ? rc2 : rc + rc2;
	}
	return ring_buffer__poll(rt->rb, timeout_ms);
}

int bpfrt_stream_fd(const struct bpfrt *rt)
{
	if (rt->reader)
		return rt->reader->efd;
	return rt->rb ? ring_buffer__epoll_fd(rt->rb) : -ENOENT;
}

/* --- spans --------------------------------------------------------------------------------- */

/* Delete key if its start is older than the bound; 1 if this call removed it. */
static int span_evict_one(int fd, const void *key, const void *val, uint64_t now, uint64_t max_age)
{
	uint64_t start;

	memcpy(&start, val, sizeof(start)); /* struct weft_span_hdr leads every value */
	if (start >= now || now - start <= max_age)
		return 0;
	return bpf_map_delete_elem(fd, key) == 0;
}

int bpfrt_span_sweep(struct bpfrt *rt, const char *name, uint64_t max_age_ns, uint64_t *open)
{
	LIBBPF_OPTS(bpf_map_batch_opts, opts);
	struct bpf_map *m = bpf_object__find_map_by_name(rt->obj, name);
	size_t ksz, vsz, per, tok_len = 16;
	uint32_t batch, max_entries;
	char *tok_in, *tok_out, *keys, *vals;
	int fd, err, evicted = 0;
	bool first = true;
	uint64_t now, seen = 0;

	if (!m || bpf_map__type(m) != BPF_MAP_TYPE_HASH || bpf_map__key_size(m) != 8 ||
	    bpf_map__value_size(m) < sizeof(struct weft_span_hdr))
		return -ENOENT;
	fd = bpf_map__fd(m);
	ksz = 8;
	vsz = round_up8(bpf_map__value_size(m));
	per = ksz + vsz;
	max_entries = bpf_map__max_entries(m);
	batch = (uint32_t)(BPFRT_DRAIN_BUF_BYTES / per);
	if (batch == 0)
		batch = 1;
	if (batch > BPFRT_MAX_BATCH)
		batch = BPFRT_MAX_BATCH;
	err = buf_reserve(rt, 2 * tok_len + (size_t)batch * per);
	if (err)
		return err;
	tok_in = rt->buf;
	tok_out = tok_in + tok_len;
	keys = tok_out + tok_len;
	vals = keys + (size_t)batch * ksz;
	now = now_ns();
	/*
	 * Batch lookups walk the table bucket by bucket, so deleting what was already returned
	 * does not disturb the walk (a get_next_key walk restarts when its key disappears).
	 */
	for (;;) {
		uint32_t count = batch;

		err = bpf_map_lookup_batch(fd, first ? NULL : tok_in, tok_out, keys, vals, &count,
					   &opts);
		if (err && err != -ENOENT)
			break;
		seen += count;
		for (uint32_t i = 0; i < count; i++)
			evicted +=
				span_evict_one(fd, keys + i * ksz, vals + i * vsz, now, max_age_ns);
		if (err == -ENOENT)
			goto out;
		memcpy(tok_in, tok_out, tok_len);
		first = false;
	}
	/* no batch ops: a key walk, bounded in steps since concurrent deletes restart it */
	log_debug("bpfrt: batch sweep: %s, walking keys", probe_bpf_strerror(err));
	{
		uint64_t cur, next;
		uint32_t steps = 0;

		err = bpf_map_get_next_key(fd, NULL, &cur);
		while (!err && steps++ < 2 * max_entries + 1) {
			bool more = bpf_map_get_next_key(fd, &cur, &next) == 0;

			if (bpf_map_lookup_elem(fd, &cur, vals) == 0) {
				seen++;
				evicted += span_evict_one(fd, &cur, vals, now, max_age_ns);
			}
			if (!more)
				break;
			cur = next;
		}
	}
out:
	rt->evicted += (uint64_t)evicted;
	if (open)
		*open = seen - (uint64_t)evicted;
	return evicted;
}

/* --- stacks and program statistics --------------------------------------------------------- */

int bpfrt_stack_read(struct bpfrt *rt, int64_t id, uint64_t *ips, unsigned int max)
{
	uint64_t frames[WEFT_STACK_DEPTH];
	int fd = rt->stacks_fd[rt->epoch ^ 1];
	uint32_t key;
	unsigned int n = 0;

	if (fd < 0)
		return -ENOENT;
	if (id < 0 || id > (int64_t)UINT32_MAX)
		return -ENOENT;
	key = (uint32_t)id;
	if (bpf_map_lookup_elem(fd, &key, frames))
		return -errno;
	while (n < WEFT_STACK_DEPTH && frames[n])
		n++;
	if (n > max)
		n = max;
	memcpy(ips, frames, n * sizeof(*ips));
	return (int)n;
}

int bpfrt_prog_misses(struct bpfrt *rt, uint64_t *misses)
{
	struct bpf_program *p;
	uint64_t total = 0;

	*misses = 0;
	bpf_object__for_each_program(p, rt->obj)
	{
		struct bpf_prog_info info;
		uint32_t len = sizeof(info);
		int fd = bpf_program__fd(p);

		if (fd < 0)
			continue;
		memset(&info, 0, sizeof(info));
		if (bpf_obj_get_info_by_fd(fd, &info, &len))
			return -errno;
		total += info.recursion_misses;
	}
	/* the kernel's counters only grow while the programs are loaded */
	*misses = total >= rt->misses_seen ? total - rt->misses_seen : 0;
	rt->misses_seen = total;
	return 0;
}
