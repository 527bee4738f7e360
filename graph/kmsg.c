// SPDX-License-Identifier: Apache-2.0
/*
 * Kernel message edges (kmsg.h): sends and receives sorted by the direction of their
 * connection (the sender's address and port, then the receiver's), then by where their bytes
 * start in its stream, and swept once: the receives that overlap a send follow it in that
 * order.  O((s + r) log (s + r)) plus the matches.  IPv6 directions sort after IPv4 ones and
 * compare their 16-byte addresses; kmsg_io_set6() is where v4-mapped ones become IPv4.
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

struct ent {
	/* the direction: from (saddr, sport) to (daddr, dport); v6: from s6 to d6 (pointers
	 * into the caller's arrays) */
	uint32_t saddr, daddr;
	const uint8_t *s6, *d6;
	bool v6;
	uint16_t sport, dport;
	uint32_t start, rel; /* first byte's sequence number; relative to its direction's base */
	uint32_t len;
	size_t idx;
	bool send;
};

static int key_cmp(const struct ent *a, const struct ent *b)
{
	int c;

	if (a->v6 != b->v6)
		return a->v6 ? 1 : -1;
	if (a->v6 && (c = memcmp(a->s6, b->s6, 16)) != 0)
		return c;
	if (a->saddr != b->saddr)
		return a->saddr < b->saddr ? -1 : 1;
	if (a->sport != b->sport)
		return a->sport < b->sport ? -1 : 1;
	if (a->v6 && (c = memcmp(a->d6, b->d6, 16)) != 0)
		return c;
	if (a->daddr != b->daddr)
		return a->daddr < b->daddr ? -1 : 1;
	if (a->dport != b->dport)
		return a->dport < b->dport ? -1 : 1;
	return 0;
}

static int ent_key_cmp(const void *pa, const void *pb)
{
	const struct ent *a = pa, *b = pb;
	int c = key_cmp(a, b);

	if (c)
		return c;
	if (a->send != b->send)
		return a->send ? -1 : 1;
	return a->idx < b->idx ? -1 : a->idx > b->idx;
}

static int ent_rel_cmp(const void *pa, const void *pb)
{
	const struct ent *a = pa, *b = pb;

	if (a->rel != b->rel)
		return a->rel < b->rel ? -1 : 1;
	if (a->send != b->send)
		return a->send ? -1 : 1;
	return a->idx < b->idx ? -1 : a->idx > b->idx;
}

static int match_cmp(const void *pa, const void *pb)
{
	const struct kmsg_match *a = pa, *b = pb;

	if (a->send != b->send)
		return a->send < b->send ? -1 : 1;
	return a->recv < b->recv ? -1 : a->recv > b->recv;
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

/* The matches within one direction, e[0..n) sorted by rel. */
static int sweep(const struct ent *e, size_t n, struct kmsg_match **v, size_t *nv, size_t *cap)
{
	size_t first = 0; /* the first receive that may still overlap a later send */

	for (size_t i = 0; i < n; i++) {
		uint64_t s0, s1;

		if (!e[i].send)
			continue;
		s0 = e[i].rel;
		s1 = s0 + e[i].len;
		while (first < n && (e[first].send || (uint64_t)e[first].rel + e[first].len <= s0))
			first++;
		for (size_t k = first; k < n && e[k].rel < s1; k++) {
			uint64_t r0 = e[k].rel, r1 = r0 + e[k].len, lo, hi;

			if (e[k].send)
				continue;
			lo = r0 > s0 ? r0 : s0;
			hi = r1 < s1 ? r1 : s1;
			if (hi > lo &&
			    push(v, nv, cap,
				 (struct kmsg_match){ e[i].idx, e[k].idx, (uint32_t)(hi - lo) }))
				return -ENOMEM;
		}
	}
	return 0;
}

int kmsg_match(const struct kmsg_io *sends, size_t nsends, const struct kmsg_io *recvs,
	       size_t nrecvs, struct kmsg_match **out, size_t *nout)
{
	struct kmsg_match *v = NULL;
	size_t n = 0, nv = 0, cap = 0;
	struct ent *e;
	int rc = 0;

	*out = NULL;
	*nout = 0;
	if ((!sends && nsends) || (!recvs && nrecvs))
		return -EINVAL;
	if (nsends + nrecvs == 0)
		return 0;
	e = calloc(nsends + nrecvs, sizeof(*e));
	if (!e)
		return -ENOMEM;
	for (size_t i = 0; i < nsends; i++) {
		const struct kmsg_io *s = &sends[i];

		if (s->len)
			e[n++] = (struct ent){ .saddr = s->laddr,
					       .daddr = s->raddr,
					       .s6 = s->laddr6,
					       .d6 = s->raddr6,
					       .v6 = s->v6,
					       .sport = s->lport,
					       .dport = s->rport,
					       .start = s->seq_end - s->len,
					       .len = s->len,
					       .idx = i,
					       .send = true };
	}
	for (size_t i = 0; i < nrecvs; i++) {
		const struct kmsg_io *r = &recvs[i];

		/* a receive sees the direction from the other end: its 4-tuple mirrored */
		if (r->len)
			e[n++] = (struct ent){ .saddr = r->raddr,
					       .daddr = r->laddr,
					       .s6 = r->raddr6,
					       .d6 = r->laddr6,
					       .v6 = r->v6,
					       .sport = r->rport,
					       .dport = r->lport,
					       .start = r->seq_end - r->len,
					       .len = r->len,
					       .idx = i,
					       .send = false };
	}
	qsort(e, n, sizeof(*e), ent_key_cmp);
	for (size_t g = 0; g < n && !rc;) {
		size_t end = g + 1;
		/* a base 1 GiB before the group's first send (or receive): every range within
		 * 1 GiB before it and 3 GiB after it keeps its order, whatever the wrap */
		uint32_t base = e[g].start - (1u << 30);

		while (end < n && key_cmp(&e[g], &e[end]) == 0)
			end++;
		for (size_t i = g; i < end; i++)
			e[i].rel = e[i].start - base;
		qsort(e + g, end - g, sizeof(*e), ent_rel_cmp);
		rc = sweep(e + g, end - g, &v, &nv, &cap);
		g = end;
	}
	free(e);
	if (rc) {
		free(v);
		return rc;
	}
	if (nv)
		qsort(v, nv, sizeof(*v), match_cmp);
	*out = v;
	*nout = nv;
	return 0;
}
