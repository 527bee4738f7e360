// SPDX-License-Identifier: Apache-2.0
/*
 * Kernel message edges (kmsg.h): the receives grouped by the direction of their connection
 * (the sender's address and port, then the receiver's) and sorted by where their bytes start
 * in its stream; each send finds the receives it overlaps in its direction's group (the
 * matching's comment, below, says how).  IPv6 directions compare their 16-byte addresses;
 * kmsg_io_set6() is where v4-mapped ones become IPv4.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "graph/kmsg.h"

static const uint8_t v4mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

void kmsg_io_set6(struct kmsg_io *io, const uint8_t laddr[16], const uint8_t raddr[16])
{
	if (memcmp(laddr, v4mapped, 12) == 0 && memcmp(raddr, v4mapped, 12) == 0) {
		io->v6 = false;
		io->laddr = (uint32_t)laddr[12] << 24 | (uint32_t)laddr[13] << 16 |
			    (uint32_t)laddr[14] << 8 | laddr[15];
		io->raddr = (uint32_t)raddr[12] << 24 | (uint32_t)raddr[13] << 16 |
			    (uint32_t)raddr[14] << 8 | raddr[15];
		memset(io->laddr6, 0, 16);
		memset(io->raddr6, 0, 16);
		return;
	}
	io->v6 = true;
	io->laddr = io->raddr = 0;
	memcpy(io->laddr6, laddr, 16);
	memcpy(io->raddr6, raddr, 16);
}

bool kmsg_mirrored(const struct kmsg_io *send, const struct kmsg_io *recv)
{
	if (send->v6 != recv->v6 || send->lport != recv->rport || send->rport != recv->lport)
		return false;
	if (send->v6)
		return memcmp(send->laddr6, recv->raddr6, 16) == 0 &&
		       memcmp(send->raddr6, recv->laddr6, 16) == 0;
	return send->laddr == recv->raddr && send->raddr == recv->laddr;
}

const char *kmsg_addr_text(const struct kmsg_io *io, bool remote, char *buf, size_t sz)
{
	uint32_t a = remote ? io->raddr : io->laddr;

	if (!sz)
		return buf;
	if (!io->v6)
		snprintf(buf, sz, "%u.%u.%u.%u", a >> 24, (a >> 16) & 255, (a >> 8) & 255, a & 255);
	else if (!inet_ntop(AF_INET6, remote ? io->raddr6 : io->laddr6, buf, (socklen_t)sz))
		buf[0] = 0;
	return buf;
}

bool kmsg_addr6_parse(const char *text, uint8_t out[16])
{
	return inet_pton(AF_INET6, text, out) == 1;
}

/*
 * The matching: the receives are few (a drain gives the first receive of each server
 * exchange whose sender is not known yet) and the sends many (a drain's, and every send
 * remembered from the drains before: seconds of them), so only the receives are sorted.
 * They are grouped by the direction they read (a hash of its 4-tuple), each group sorted by
 * where the bytes start; then every send, in index order, finds its direction in the hash and
 * the receives its bytes overlap by a search that starts where its direction's last one ended
 * (a connection's sends come mostly in stream order: a step or two).  A send of a direction no
 * receive reads costs a hash lookup.  O(s + r log r) plus the matches.
 *
 * Sequence numbers are compared relative to a base per direction, 1 GiB before the first
 * send of that direction in index order: every range within 1 GiB before it and 3 GiB after
 * it keeps its order, whatever the wrap.
 */
struct dir {
	/* from (saddr, sport) to (daddr, dport); v6: from s6 to d6 (pointers into the caller's
	 * arrays) */
	uint32_t saddr, daddr;
	const uint8_t *s6, *d6;
	uint16_t sport, dport;
	bool v6;
};

struct rent {
	uint32_t group; /* its direction's index in groups[] */
	uint32_t rel; /* first byte's sequence number, relative to its direction's base */
	uint32_t len;
	size_t idx;
};

struct group {
	struct dir d;
	uint64_t h;
	uint32_t base;
	bool based;
	uint32_t maxlen; /* the longest receive */
	size_t first, end; /* its receives in the sorted array */
	size_t cur; /* where its last search ended */
};

static struct dir send_dir(const struct kmsg_io *s)
{
	return (struct dir){ s->laddr, s->raddr, s->laddr6, s->raddr6, s->lport, s->rport, s->v6 };
}

/* A receive sees the direction from the other end: its 4-tuple mirrored. */
static struct dir recv_dir(const struct kmsg_io *r)
{
	return (struct dir){ r->raddr, r->laddr, r->raddr6, r->laddr6, r->rport, r->lport, r->v6 };
}

static uint64_t mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	x ^= x >> 33;
	return x;
}

static uint64_t dir_hash(const struct dir *d)
{
	uint64_t h = mix64(((uint64_t)d->saddr << 32 | d->daddr) ^
			   ((uint64_t)d->sport << 48 | (uint64_t)d->dport << 32 | d->v6));

	if (d->v6) {
		uint64_t w[4];

		memcpy(&w[0], d->s6, 8);
		memcpy(&w[1], d->s6 + 8, 8);
		memcpy(&w[2], d->d6, 8);
		memcpy(&w[3], d->d6 + 8, 8);
		for (int i = 0; i < 4; i++)
			h = mix64(h ^ w[i]);
	}
	return h;
}

static bool dir_eq(const struct dir *a, const struct dir *b)
{
	return a->v6 == b->v6 && a->saddr == b->saddr && a->daddr == b->daddr &&
	       a->sport == b->sport && a->dport == b->dport &&
	       (!a->v6 || (memcmp(a->s6, b->s6, 16) == 0 && memcmp(a->d6, b->d6, 16) == 0));
}

/* The slot of d in the table (cap a power of two; slot value group + 1, 0 free). */
static size_t dir_slot(const uint32_t *slot, size_t cap, const struct group *g, const struct dir *d,
		       uint64_t h)
{
	size_t i = h & (cap - 1);

	while (slot[i] && !(g[slot[i] - 1].h == h && dir_eq(&g[slot[i] - 1].d, d)))
		i = (i + 1) & (cap - 1);
	return i;
}

static int rent_cmp(const void *pa, const void *pb)
{
	const struct rent *a = pa, *b = pb;

	if (a->group != b->group)
		return a->group < b->group ? -1 : 1;
	if (a->rel != b->rel)
		return a->rel < b->rel ? -1 : 1;
	return a->idx < b->idx ? -1 : a->idx > b->idx;
}

static int push(struct kmsg_match **v, size_t *n, size_t *cap, struct kmsg_match m)
{
	if (*n == *cap) {
		size_t nc = *cap ? *cap * 2 : 64;
		struct kmsg_match *nv = realloc(*v, nc * sizeof(*nv));

		if (!nv)
			return -ENOMEM;
		*v = nv;
		*cap = nc;
	}
	(*v)[(*n)++] = m;
	return 0;
}

/* The first of g's receives whose rel is above lo (g->end if none), searched from g->cur
 * outwards (steps doubling), then by bisection. */
static size_t first_above(const struct rent *r, const struct group *g, uint64_t lo)
{
	size_t a, b, step = 1, c = g->cur;

	/* then the answer is in [a, b], and b is g->end or a receive above lo */
	if (c < g->end && r[c].rel <= lo) {
		a = c + 1;
		b = a;
		while (b < g->end && r[b].rel <= lo) {
			a = b + 1;
			b = g->end - b > step ? b + step : g->end;
			step *= 2;
		}
	} else {
		a = b = c;
		while (a > g->first) {
			size_t p = a - g->first > step ? a - step : g->first;

			if (r[p].rel <= lo) {
				a = p + 1;
				break;
			}
			a = b = p;
			step *= 2;
		}
	}
	while (a < b) {
		size_t mid = a + (b - a) / 2;

		if (r[mid].rel <= lo)
			a = mid + 1;
		else
			b = mid;
	}
	return a;
}

int kmsg_match(const struct kmsg_io *sends, size_t nsends, const struct kmsg_io *recvs,
	       size_t nrecvs, struct kmsg_match **out, size_t *nout)
{
	struct kmsg_match *v = NULL;
	size_t nr = 0, ng = 0, nv = 0, cap = 0, tcap = 16, unbased;
	struct rent *r = NULL;
	struct group *g = NULL;
	uint32_t *slot = NULL;
	int rc = 0;

	*out = NULL;
	*nout = 0;
	if ((!sends && nsends) || (!recvs && nrecvs))
		return -EINVAL;
	if (!nsends || !nrecvs)
		return 0;
	while (tcap < 2 * nrecvs)
		tcap *= 2;
	r = malloc(nrecvs * sizeof(*r));
	g = malloc(nrecvs * sizeof(*g));
	slot = calloc(tcap, sizeof(*slot));
	if (!r || !g || !slot) {
		rc = -ENOMEM;
		goto out;
	}
	/* the receives' directions */
	for (size_t i = 0; i < nrecvs; i++) {
		const struct kmsg_io *io = &recvs[i];
		struct dir d;
		uint64_t h;
		size_t k;

		if (!io->len)
			continue;
		d = recv_dir(io);
		h = dir_hash(&d);
		k = dir_slot(slot, tcap, g, &d, h);
		if (!slot[k]) {
			g[ng] = (struct group){ .d = d, .h = h };
			slot[k] = (uint32_t)++ng;
		}
		r[nr++] = (struct rent){
			.group = slot[k] - 1, .rel = io->seq_end - io->len, .len = io->len, .idx = i
		};
	}
	/* each direction's base: its first send */
	unbased = ng;
	for (size_t i = 0; i < nsends && unbased; i++) {
		const struct kmsg_io *io = &sends[i];
		struct dir d;
		uint64_t h;
		size_t k;

		if (!io->len)
			continue;
		d = send_dir(io);
		h = dir_hash(&d);
		k = dir_slot(slot, tcap, g, &d, h);
		if (slot[k] && !g[slot[k] - 1].based) {
			g[slot[k] - 1].based = true;
			g[slot[k] - 1].base = io->seq_end - io->len - (1u << 30);
			unbased--;
		}
	}
	/* the receives of a direction that was sent on, by where they start */
	{
		size_t w = 0;

		for (size_t i = 0; i < nr; i++)
			if (g[r[i].group].based) {
				r[w] = r[i];
				r[w].rel -= g[r[i].group].base;
				w++;
			}
		nr = w;
	}
	if (!nr)
		goto out;
	qsort(r, nr, sizeof(*r), rent_cmp);
	for (size_t i = 0; i < nr;) {
		struct group *x = &g[r[i].group];
		size_t j = i;

		x->first = x->cur = i;
		x->maxlen = 0;
		for (; j < nr && r[j].group == r[i].group; j++)
			if (r[j].len > x->maxlen)
				x->maxlen = r[j].len;
		x->end = j;
		i = j;
	}
	/* every send against the receives of its direction */
	for (size_t i = 0; i < nsends && !rc; i++) {
		const struct kmsg_io *io = &sends[i];
		struct group *x;
		struct dir d;
		uint64_t h, s0, s1;
		size_t k, n0 = nv;

		if (!io->len)
			continue;
		d = send_dir(io);
		h = dir_hash(&d);
		k = dir_slot(slot, tcap, g, &d, h);
		if (!slot[k] || !(x = &g[slot[k] - 1])->based)
			continue;
		s0 = (uint32_t)(io->seq_end - io->len - x->base);
		s1 = s0 + io->len;
		/* a receive that overlaps starts above s0 - maxlen and below s1 */
		k = s0 < x->maxlen ? x->first : first_above(r, x, s0 - x->maxlen);
		x->cur = k;
		for (; k < x->end && r[k].rel < s1 && !rc; k++) {
			uint64_t r0 = r[k].rel, r1 = r0 + r[k].len;
			uint64_t lo = r0 > s0 ? r0 : s0, hi = r1 < s1 ? r1 : s1;

			if (hi > lo)
				rc = push(&v, &nv, &cap,
					  (struct kmsg_match){ i, r[k].idx, (uint32_t)(hi - lo) });
		}
		/* this send's matches by receive index (they came by where the receives start) */
		for (size_t a = n0 + 1; a < nv; a++)
			for (size_t b = a; b > n0 && v[b - 1].recv > v[b].recv; b--) {
				struct kmsg_match t = v[b];

				v[b] = v[b - 1];
				v[b - 1] = t;
			}
	}
out:
	free(r);
	free(g);
	free(slot);
	if (rc) {
		free(v);
		return rc;
	}
	*out = v;
	*nout = nv;
	return 0;
}
