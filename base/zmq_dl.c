// SPDX-License-Identifier: Apache-2.0
/*
 * libzmq opened on first use (zmq_dl.h says why).  Each weft_zmq_*() opens the library once
 * (pthread_once) and calls the function found with dlsym(); the library stays open for the
 * life of the process.
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "base/log.h"
#include "base/zmq_dl.h"

#define ZMQ_FUNCS(X)      \
	X(ctx_new)        \
	X(ctx_term)       \
	X(ctx_set)        \
	X(socket)         \
	X(close)          \
	X(setsockopt)     \
	X(getsockopt)     \
	X(bind)           \
	X(connect)        \
	X(send)           \
	X(recv)           \
	X(socket_monitor) \
	X(poll)           \
	X(msg_init)       \
	X(msg_recv)       \
	X(msg_close)      \
	X(msg_data)       \
	X(msg_size)       \
	X(msg_get)        \
	X(msg_gets)       \
	X(strerror)       \
	X(has)            \
	X(curve_keypair)  \
	X(curve_public)   \
	X(z85_encode)     \
	X(z85_decode)

/* libzmq's entry points: each of the type of its weft_zmq_ namesake */
static struct {
#define MEMBER(n) __typeof__(weft_zmq_##n) *n;
	ZMQ_FUNCS(MEMBER)
#undef MEMBER
	bool ok;
	char error[320];
} z;
static pthread_once_t z_once = PTHREAD_ONCE_INIT;

static void z_open(void)
{
	void *lib = dlopen(WEFT_ZMQ_SONAME, RTLD_NOW | RTLD_LOCAL);
	const char *missing = NULL, *e;

	if (!lib) {
		e = dlerror();
		snprintf(z.error, sizeof(z.error),
			 "cannot open libzmq: %s (Debian: apt-get install libzmq5)",
			 e ? e : WEFT_ZMQ_SONAME);
		weft_log(WEFT_LOG_ERROR, "%s", z.error);
		return;
	}
#define SYM(n)                                                     \
	if (!(*(void **)&z.n = dlsym(lib, "zmq_" #n)) && !missing) \
		missing = "zmq_" #n;
	ZMQ_FUNCS(SYM)
#undef SYM
	if (missing) {
		snprintf(z.error, sizeof(z.error), "%s has no %s (libzmq 4.3 or later is needed)",
			 WEFT_ZMQ_SONAME, missing);
		weft_log(WEFT_LOG_ERROR, "%s", z.error);
		dlclose(lib);
		return;
	}
	z.ok = true;
}

int weft_zmq_load(void)
{
	pthread_once(&z_once, z_open);
	if (z.ok)
		return 0;
	errno = ELIBACC;
	return -ELIBACC;
}

/* The call when libzmq is open; else errno = ELIBACC and `fail`, as libzmq fails. */
#define CALL(n, fail, ...) return weft_zmq_load() ? (fail) : z.n(__VA_ARGS__)

void *weft_zmq_ctx_new(void)
{
	return weft_zmq_load() ? NULL : z.ctx_new();
}

int weft_zmq_ctx_term(void *ctx)
{
	CALL(ctx_term, -1, ctx);
}

int weft_zmq_ctx_set(void *ctx, int option, int optval)
{
	CALL(ctx_set, -1, ctx, option, optval);
}

void *weft_zmq_socket(void *ctx, int type)
{
	CALL(socket, NULL, ctx, type);
}

int weft_zmq_close(void *s)
{
	CALL(close, -1, s);
}

int weft_zmq_setsockopt(void *s, int option, const void *optval, size_t optvallen)
{
	CALL(setsockopt, -1, s, option, optval, optvallen);
}

int weft_zmq_getsockopt(void *s, int option, void *optval, size_t *optvallen)
{
	CALL(getsockopt, -1, s, option, optval, optvallen);
}

int weft_zmq_bind(void *s, const char *addr)
{
	CALL(bind, -1, s, addr);
}

int weft_zmq_connect(void *s, const char *addr)
{
	CALL(connect, -1, s, addr);
}

int weft_zmq_send(void *s, const void *buf, size_t len, int flags)
{
	CALL(send, -1, s, buf, len, flags);
}

int weft_zmq_recv(void *s, void *buf, size_t len, int flags)
{
	CALL(recv, -1, s, buf, len, flags);
}

int weft_zmq_socket_monitor(void *s, const char *addr, int events)
{
	CALL(socket_monitor, -1, s, addr, events);
}

int weft_zmq_poll(zmq_pollitem_t *items, int nitems, long timeout)
{
	CALL(poll, -1, items, nitems, timeout);
}

int weft_zmq_msg_init(zmq_msg_t *msg)
{
	CALL(msg_init, -1, msg);
}

int weft_zmq_msg_recv(zmq_msg_t *msg, void *s, int flags)
{
	CALL(msg_recv, -1, msg, s, flags);
}

int weft_zmq_msg_close(zmq_msg_t *msg)
{
	CALL(msg_close, -1, msg);
}

void *weft_zmq_msg_data(zmq_msg_t *msg)
{
	CALL(msg_data, NULL, msg);
}

size_t weft_zmq_msg_size(const zmq_msg_t *msg)
{
	CALL(msg_size, 0, msg);
}

int weft_zmq_msg_get(const zmq_msg_t *msg, int property)
{
	CALL(msg_get, -1, msg, property);
}

const char *weft_zmq_msg_gets(const zmq_msg_t *msg, const char *property)
{
	CALL(msg_gets, NULL, msg, property);
}

const char *weft_zmq_strerror(int errnum)
{
	if (weft_zmq_load())
		return errnum == ELIBACC ? z.error : strerror(errnum);
	return z.strerror(errnum);
}

int weft_zmq_has(const char *capability)
{
	CALL(has, 0, capability);
}

int weft_zmq_curve_keypair(char *z85_public_key, char *z85_secret_key)
{
	CALL(curve_keypair, -1, z85_public_key, z85_secret_key);
}

int weft_zmq_curve_public(char *z85_public_key, const char *z85_secret_key)
{
	CALL(curve_public, -1, z85_public_key, z85_secret_key);
}

char *weft_zmq_z85_encode(char *dest, const uint8_t *data, size_t size)
{
	CALL(z85_encode, NULL, dest, data, size);
}

uint8_t *weft_zmq_z85_decode(uint8_t *dest, const char *string)
{
	CALL(z85_decode, NULL, dest, string);
}
