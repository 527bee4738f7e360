// SPDX-License-Identifier: Apache-2.0
/*
 * The allow-list and the ZAP handler: who may connect to the aggregator, in which role.
 *
 * The ZAP handler is ZeroMQ's authentication hook (RFC 27): a thread with a REP socket on
 * inproc://zeromq.zap.01 in the daemon's context, asked once per CURVE handshake whether the
 * client's public key may connect.  It answers from a private copy of the allow-list; the
 * accepted peer's user id "ROLE:NAME" then rides on every message it sends (metadata
 * "User-Id"), which is how the daemon learns a sender's role without trusting its Hello.
 *
 * Must never: accept a CURVE client when the ZAP handler is not answering (bind happens
 * before wire_zap_start() returns, so no server socket can run without it), or let a key
 * that is not on the list in.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "base/zmq_dl.h"
#include "aggregator/zap.h"
#include "base/file.h"
#include "base/log.h"

#define ZAP_ENDPOINT "inproc://zeromq.zap.01"

static bool name_valid(const char *s)
{
	if (!*s || strlen(s) >= sizeof(((struct wire_allow_entry *)0)->name))
		return false;
	for (; *s; s++)
		if ((unsigned char)*s <= 0x20 || (unsigned char)*s >= 0x7f || *s == ':')
			return false;
	return true;
}

int wire_allowlist_parse(const char *text, size_t len, struct wire_allowlist *al, int *line)
{
	struct wire_allowlist out = { 0 };
	size_t cap = 0, off = 0;
	int lineno = 0, rc = 0;

	if (line)
		*line = 0;
	if (!al || (len && !text))
		return -EINVAL;
	while (off < len) {
		const char *nl = memchr(text + off, '\n', len - off);
		size_t n = nl ? (size_t)(nl - (text + off)) : len - off;
		char buf[512], *save = NULL, *role, *key, *name, *extra;
		struct wire_allow_entry *e;

		lineno++;
		if (n >= sizeof(buf) || memchr(text + off, 0, n)) {
			rc = -EINVAL;
			goto out_bad;
		}
		memcpy(buf, text + off, n);
		buf[n] = 0;
		off += n + (nl ? 1 : 0);
		/* '#' starts a comment only where a token starts: it is a Z85 character too */
		role = strtok_r(buf, " \t\r", &save);
		if (!role || role[0] == '#')
			continue;
		key = strtok_r(NULL, " \t\r", &save);
		name = strtok_r(NULL, " \t\r", &save);
		if (name && name[0] == '#')
			name = NULL, extra = NULL;
		else if ((extra = strtok_r(NULL, " \t\r", &save)) && extra[0] == '#')
			extra = NULL;
		if (wire_role_parse(role) == WIRE_ROLE_NONE || !key || !wire_key_valid(key) ||
		    extra || (name && !name_valid(name))) {
			rc = -EINVAL;
			goto out_bad;
		}
		/* one key, one role: a key listed twice is a mistake the operator must see */
		if (wire_allowlist_role(&out, key, NULL) != WIRE_ROLE_NONE) {
			rc = -EINVAL;
			goto out_bad;
		}
		if (out.n == cap) {
			size_t nc = cap ? cap * 2 : 16;
			struct wire_allow_entry *v = realloc(out.v, nc * sizeof(*v));

			if (!v) {
				rc = -ENOMEM;
				goto out_bad;
			}
			out.v = v;
			cap = nc;
		}
		e = &out.v[out.n++];
		memset(e, 0, sizeof(*e));
		e->role = wire_role_parse(role);
		memcpy(e->key, key, WIRE_KEY_LEN + 1);
		/* unnamed: the key's first 8 characters name it in logs and user ids */
		snprintf(e->name, sizeof(e->name), "%.*s", name ? (int)sizeof(e->name) - 1 : 8,
			 name ? name : key);
	}
	*al = out;
	return 0;
out_bad:
	if (line)
		*line = lineno;
	free(out.v);
	return rc;
}

int wire_allowlist_load(const char *path, struct wire_allowlist *al, int *line)
{
	char *text = NULL, why[160];
	size_t len = 0;
	int rc;

	if (line)
		*line = 0;
	if (!path || !al)
		return -EINVAL;
	/* a regular file of at most 16 MiB: never a FIFO that blocks or /dev/zero that never
	 * ends (base/file.h) */
	rc = weft_file_read(path, WEFT_FILE_MAX_ALLOW, &text, &len, why, sizeof(why));
	if (rc)
		return rc;
	rc = wire_allowlist_parse(text, len, al, line);
	free(text);
	return rc;
}

void wire_allowlist_free(struct wire_allowlist *al)
{
	if (!al)
		return;
	free(al->v);
	al->v = NULL;
	al->n = 0;
}

enum wire_role wire_allowlist_role(const struct wire_allowlist *al, const char *z85,
				   const char **name)
{
	if (name)
		*name = NULL;
	if (!al || !z85)
		return WIRE_ROLE_NONE;
	for (size_t i = 0; i < al->n; i++)
		if (strcmp(al->v[i].key, z85) == 0) {
			if (name)
				*name = al->v[i].name;
			return al->v[i].role;
		}
	return WIRE_ROLE_NONE;
}

/* ---------------------------------------------------------------- ZAP */

struct wire_zap {
	void *zctx;
	void *rep; /* inproc://zeromq.zap.01, owned by the thread once it runs */
	void *ctl_main, *ctl_thread; /* PAIR: a byte stops the thread */
	pthread_t thread;
	pthread_mutex_t lock; /* guards al */
	struct wire_allowlist al;
	_Atomic uint64_t rejected, accepted;
};

static int allowlist_copy(struct wire_allowlist *dst, const struct wire_allowlist *src)
{
	dst->n = 0;
	dst->v = NULL;
	if (!src || !src->n)
		return 0;
	dst->v = malloc(src->n * sizeof(*dst->v));
	if (!dst->v)
		return -ENOMEM;
	memcpy(dst->v, src->v, src->n * sizeof(*dst->v));
	dst->n = src->n;
	return 0;
}

/* Receives every part of one multipart message into parts[] (at most max; the rest is
 * read and dropped).  Returns the part count, or -1. */
static int recv_parts(void *sock, zmq_msg_t *parts, int max)
{
	int n = 0, more = 1;

	while (more) {
		zmq_msg_t scratch, *m = n < max ? &parts[n] : &scratch;
		size_t sz = sizeof(more);

		zmq_msg_init(m);
		if (zmq_msg_recv(m, sock, 0) < 0) {
			zmq_msg_close(m);
			for (int i = 0; i < n && i < max; i++)
				zmq_msg_close(&parts[i]);
			return -1;
		}
		if (zmq_getsockopt(sock, ZMQ_RCVMORE, &more, &sz) != 0)
			more = 0;
		if (m == &scratch)
			zmq_msg_close(m);
		n++;
	}
	return n;
}

static bool part_is(zmq_msg_t *m, const char *s)
{
	return zmq_msg_size(m) == strlen(s) && memcmp(zmq_msg_data(m), s, strlen(s)) == 0;
}

static void zap_reply(void *rep, zmq_msg_t *request_id, const char *code, const char *text,
		      const char *user)
{
	zmq_send(rep, "1.0", 3, ZMQ_SNDMORE);
	zmq_send(rep, zmq_msg_data(request_id), zmq_msg_size(request_id), ZMQ_SNDMORE);
	zmq_send(rep, code, strlen(code), ZMQ_SNDMORE);
	zmq_send(rep, text, strlen(text), ZMQ_SNDMORE);
	zmq_send(rep, user, strlen(user), ZMQ_SNDMORE);
	zmq_send(rep, "", 0, 0); /* metadata: none */
}

/*
 * One ZAP request (RFC 27): version, request id, domain, address, routing id, mechanism,
 * credentials.  Only CURVE with a listed key passes; anything else is refused and counted.
 */
static void zap_handle(struct wire_zap *z)
{
	zmq_msg_t p[8];
	int n = recv_parts(z->rep, p, 8);
	char key[WIRE_KEY_LEN + 1] = "", user[128] = "";
	enum wire_role role = WIRE_ROLE_NONE;
	const char *name = NULL;

	if (n < 0)
		return;
	if (n < 2) {
		/* not even a request id to answer to: a REP must still reply */
		zmq_send(z->rep, "", 0, 0);
		for (int i = 0; i < n; i++)
			zmq_msg_close(&p[i]);
		atomic_fetch_add(&z->rejected, 1);
		return;
	}
	if (n == 7 && part_is(&p[0], "1.0") && part_is(&p[5], "CURVE") &&
	    zmq_msg_size(&p[6]) == 32 && zmq_z85_encode(key, zmq_msg_data(&p[6]), 32)) {
		pthread_mutex_lock(&z->lock);
		role = wire_allowlist_role(&z->al, key, &name);
		if (role != WIRE_ROLE_NONE)
			snprintf(user, sizeof(user), "%s:%s", wire_role_name(role), name);
		pthread_mutex_unlock(&z->lock);
	}
	if (role != WIRE_ROLE_NONE) {
		atomic_fetch_add(&z->accepted, 1);
		log_debug("wire: accepted %s (%s)", user, key);
		zap_reply(z->rep, &p[1], "200", "OK", user);
	} else {
		atomic_fetch_add(&z->rejected, 1);
		log_info("wire: refused a connection from an unknown key %s",
			 key[0] ? key : "(not CURVE)");
		zap_reply(z->rep, &p[1], "400", "key not in the allow-list", "");
	}
	for (int i = 0; i < n && i < 8; i++)
		zmq_msg_close(&p[i]);
}

static void *zap_thread(void *arg)
{
	struct wire_zap *z = arg;

	for (;;) {
		zmq_pollitem_t items[2] = {
			{ .socket = z->rep, .events = ZMQ_POLLIN },
			{ .socket = z->ctl_thread, .events = ZMQ_POLLIN },
		};

		if (zmq_poll(items, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break; /* ETERM: the context is going away */
		}
		if (items[1].revents & ZMQ_POLLIN)
			break;
		if (items[0].revents & ZMQ_POLLIN)
			zap_handle(z);
	}
	zmq_close(z->rep);
	zmq_close(z->ctl_thread);
	return NULL;
}

struct wire_zap *wire_zap_start(void *zctx, const struct wire_allowlist *al)
{
	struct wire_zap *z;
	char ep[64];
	int linger = 0, err;

	if (!zctx) {
		errno = EINVAL;
		return NULL;
	}
	z = calloc(1, sizeof(*z));
	if (!z)
		return NULL;
	z->zctx = zctx;
	pthread_mutex_init(&z->lock, NULL);
	if (allowlist_copy(&z->al, al)) {
		err = ENOMEM;
		goto out_free;
	}
	z->rep = zmq_socket(zctx, ZMQ_REP);
	z->ctl_main = zmq_socket(zctx, ZMQ_PAIR);
	z->ctl_thread = zmq_socket(zctx, ZMQ_PAIR);
	if (!z->rep || !z->ctl_main || !z->ctl_thread) {
		err = errno;
		goto out_close;
	}
	zmq_setsockopt(z->rep, ZMQ_LINGER, &linger, sizeof(linger));
	zmq_setsockopt(z->ctl_main, ZMQ_LINGER, &linger, sizeof(linger));
	zmq_setsockopt(z->ctl_thread, ZMQ_LINGER, &linger, sizeof(linger));
	/* bound here, before any server socket exists: no handshake can go unchecked */
	if (zmq_bind(z->rep, ZAP_ENDPOINT) != 0) {
		err = errno; /* EADDRINUSE: this context has a handler already */
		goto out_close;
	}
	snprintf(ep, sizeof(ep), "inproc://weft-zap-ctl-%p", (void *)z);
	if (zmq_bind(z->ctl_main, ep) != 0 || zmq_connect(z->ctl_thread, ep) != 0) {
		err = errno;
		goto out_close;
	}
	err = pthread_create(&z->thread, NULL, zap_thread, z);
	if (err)
		goto out_close;
	return z;

out_close:
	if (z->rep)
		zmq_close(z->rep);
	if (z->ctl_main)
		zmq_close(z->ctl_main);
	if (z->ctl_thread)
		zmq_close(z->ctl_thread);
out_free:
	wire_allowlist_free(&z->al);
	pthread_mutex_destroy(&z->lock);
	free(z);
	errno = err;
	return NULL;
}

int wire_zap_reload(struct wire_zap *z, const struct wire_allowlist *al)
{
	struct wire_allowlist fresh, old;

	if (!z)
		return -EINVAL;
	if (allowlist_copy(&fresh, al))
		return -ENOMEM;
	pthread_mutex_lock(&z->lock);
	old = z->al;
	z->al = fresh;
	pthread_mutex_unlock(&z->lock);
	wire_allowlist_free(&old);
	return 0;
}

void wire_zap_stop(struct wire_zap *z)
{
	if (!z)
		return;
	zmq_send(z->ctl_main, "x", 1, 0);
	pthread_join(z->thread, NULL);
	zmq_close(z->ctl_main);
	wire_allowlist_free(&z->al);
	pthread_mutex_destroy(&z->lock);
	free(z);
}

uint64_t wire_zap_rejected(const struct wire_zap *z)
{
	return z ? atomic_load(&((struct wire_zap *)z)->rejected) : 0;
}

uint64_t wire_zap_accepted(const struct wire_zap *z)
{
	return z ? atomic_load(&((struct wire_zap *)z)->accepted) : 0;
}
