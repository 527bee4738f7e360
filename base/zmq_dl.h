/* SPDX-License-Identifier: Apache-2.0 */
/*
 * base/zmq_dl.[ch] — libzmq, opened on first use instead of linked.
 *
 * Linked, libzmq and what it brings (libstdc++, libsodium, libpgm, libnorm, Kerberos) are
 * mapped and relocated at every start of `weft`, including every `weft run`, which never
 * sends a byte over ZeroMQ: an empty program linked with libzmq starts 4 to 12 ms slower here
 * than one without (docs/performance.md, "Start-up again").  So the code that speaks ZeroMQ
 * includes this header instead of <zmq.h>: the types and constants are <zmq.h>'s, and every
 * zmq_*() function it uses is renamed to a weft_zmq_*() of the same signature that opens
 * libzmq (dlopen, once, thread-safe) and calls it.  If libzmq cannot be opened, every call
 * fails as libzmq's own would (NULL or -1) with errno ELIBACC, and zmq_strerror() then says
 * what is missing; the reason is also logged once.
 *
 * Only the functions listed in zmq_dl.c are renamed; a new one must be added there (the
 * build then fails on an undefined weft_zmq_*()).  Tests that call libzmq directly may link
 * it as well: dlopen() of a library already mapped returns the same one.
 */
#ifndef WEFT_BASE_ZMQ_DL_H
#define WEFT_BASE_ZMQ_DL_H
#include <stddef.h>
#include <stdint.h>
#include <zmq.h>

#define WEFT_ZMQ_SONAME "libzmq.so.5"

/* Opens libzmq if it is not yet open: 0, or -ELIBACC (the reason logged once). */
int weft_zmq_load(void);

void *weft_zmq_ctx_new(void);
int weft_zmq_ctx_term(void *ctx);
int weft_zmq_ctx_set(void *ctx, int option, int optval);
void *weft_zmq_socket(void *ctx, int type);
int weft_zmq_close(void *s);
int weft_zmq_setsockopt(void *s, int option, const void *optval, size_t optvallen);
int weft_zmq_getsockopt(void *s, int option, void *optval, size_t *optvallen);
int weft_zmq_bind(void *s, const char *addr);
int weft_zmq_connect(void *s, const char *addr);
int weft_zmq_send(void *s, const void *buf, size_t len, int flags);
int weft_zmq_recv(void *s, void *buf, size_t len, int flags);
int weft_zmq_socket_monitor(void *s, const char *addr, int events);
int weft_zmq_poll(zmq_pollitem_t *items, int nitems, long timeout);
int weft_zmq_msg_init(zmq_msg_t *msg);
int weft_zmq_msg_recv(zmq_msg_t *msg, void *s, int flags);
int weft_zmq_msg_close(zmq_msg_t *msg);
void *weft_zmq_msg_data(zmq_msg_t *msg);
size_t weft_zmq_msg_size(const zmq_msg_t *msg);
int weft_zmq_msg_get(const zmq_msg_t *msg, int property);
const char *weft_zmq_msg_gets(const zmq_msg_t *msg, const char *property);
const char *weft_zmq_strerror(int errnum);
int weft_zmq_has(const char *capability);
int weft_zmq_curve_keypair(char *z85_public_key, char *z85_secret_key);
int weft_zmq_curve_public(char *z85_public_key, const char *z85_secret_key);
char *weft_zmq_z85_encode(char *dest, const uint8_t *data, size_t size);
uint8_t *weft_zmq_z85_decode(uint8_t *dest, const char *string);

#define zmq_ctx_new weft_zmq_ctx_new
#define zmq_ctx_term weft_zmq_ctx_term
#define zmq_ctx_set weft_zmq_ctx_set
#define zmq_socket weft_zmq_socket
#define zmq_close weft_zmq_close
#define zmq_setsockopt weft_zmq_setsockopt
#define zmq_getsockopt weft_zmq_getsockopt
#define zmq_bind weft_zmq_bind
#define zmq_connect weft_zmq_connect
#define zmq_send weft_zmq_send
#define zmq_recv weft_zmq_recv
#define zmq_socket_monitor weft_zmq_socket_monitor
#define zmq_poll weft_zmq_poll
#define zmq_msg_init weft_zmq_msg_init
#define zmq_msg_recv weft_zmq_msg_recv
#define zmq_msg_close weft_zmq_msg_close
#define zmq_msg_data weft_zmq_msg_data
#define zmq_msg_size weft_zmq_msg_size
#define zmq_msg_get weft_zmq_msg_get
#define zmq_msg_gets weft_zmq_msg_gets
#define zmq_strerror weft_zmq_strerror
#define zmq_has weft_zmq_has
#define zmq_curve_keypair weft_zmq_curve_keypair
#define zmq_curve_public weft_zmq_curve_public
#define zmq_z85_encode weft_zmq_z85_encode
#define zmq_z85_decode weft_zmq_z85_decode

#endif
