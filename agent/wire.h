/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The wire: weft.proto envelopes over CURVE-secured ZeroMQ sockets.
 *
 * Decoding is where hostile bytes meet us: wire_decode() enforces every rule listed at the
 * top of weft.proto that a single message can be checked for (version, exactly one body,
 * sizes, string lengths, UTF-8-free byte fields only where allowed) and returns NULL with a
 * reason otherwise; callers count rejections and never act on a rejected message.
 * Sequence checks (per sender instance) and role checks need the connection's state:
 * wire_seq_accept() and wire_body_allowed() serve the daemons.
 *
 * Keys: Z85 text (40 characters) as zmq_curve_keypair() makes them.  A key file holds
 * "public <z85>\nsecret <z85>\n" (mode 0600); a public-key file holds "public <z85>\n".
 * Who may connect is the aggregator's business: aggregator/zap.h.
 */
#ifndef WEFT_WIRE_H
#define WEFT_WIRE_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "weft.pb-c.h"

#define WIRE_VERSION 1
#define WIRE_MAX_BYTES (64u << 20)
#define WIRE_MAX_GROUPS 1000000
#define WIRE_MAX_STRING 4096
/* Bytes of a host name, without the NUL: an agent's --host, an aggregator's --name, and
 * every host field and host list on the wire (the aggregator keeps them in AGGD_MAX_HOST) */
#define WIRE_MAX_HOST 255
#define WIRE_MAX_QUERY 65536
#define WIRE_MAX_OBJECT (16u << 20)
#define WIRE_KEY_LEN 40 /* Z85 of 32 bytes */
/* Tasks, events and edges of one GraphBatch, each */
#define WIRE_MAX_ELEMS 1000000u
/* The highest body number this version knows (weft.proto's Envelope.body) */
#define WIRE_BODY_LAST WEFT__ENVELOPE__BODY_ROW_BATCH
/* Rows of one RowBatch, cells of one row, bytes of one text cell */
#define WIRE_MAX_ROWS 100000u
#define WIRE_MAX_CELLS 256u
#define WIRE_MAX_CELL 65536u

enum wire_role { WIRE_ROLE_NONE, WIRE_ROLE_AGENT, WIRE_ROLE_CLIENT, WIRE_ROLE_AGGREGATOR };

const char *wire_role_name(enum wire_role r);
enum wire_role wire_role_parse(const char *s); /* WIRE_ROLE_NONE if unknown */

/* Decodes and validates one message.  NULL with a reason in why (always set). */
Weft__Envelope *wire_decode(const void *buf, size_t len, char *why, size_t whysz);
/* The whole message at once: its parts live in one arena, so never free(), realloc() or keep
 * a part of a decoded message (copy what must outlive it); wire_free() only what wire_decode()
 * returned. */
void wire_free(Weft__Envelope *e);

/* Packs e (version and seq as set by the caller) into a malloc'd buffer.  0 or -errno. */
int wire_encode(const Weft__Envelope *e, void **buf, size_t *len);

/* Whether text may travel as a query (Submit.query): at most WIRE_MAX_QUERY bytes of UTF-8,
 * no control characters but newlines, tabs and carriage returns.  0, or -E2BIG / -EINVAL
 * with what is wrong in why, for the user ("the query is not valid UTF-8 at byte N", N
 * counted from 1). */
int wire_query_check(const char *text, char *why, size_t whysz);

/* Whether a sender of `role` may send a body of this kind (weft.proto's rules). */
bool wire_body_allowed(enum wire_role role, Weft__Envelope__BodyCase body);

/* Per-sender sequence state: accept seq only if greater than the last accepted one of the
 * same instance; a new instance resets it.  Returns true if accepted (and records it). */
struct wire_seq {
	uint64_t instance;
	uint64_t last;
};
bool wire_seq_accept(struct wire_seq *s, uint64_t instance, uint64_t seq);

/* CURVE keys. */
int wire_keypair_new(char pub[WIRE_KEY_LEN + 1], char sec[WIRE_KEY_LEN + 1]);
int wire_keyfile_write(const char *path, const char *pub, const char *sec); /* sec may be NULL */
/* Reads a key file (sec NULL: the public key only).  0, -EINVAL (not a key file), -ENOKEY (no
 * secret line), or a file error of base/file.h: -ENODEV (a FIFO, device or socket), -EISDIR,
 * -EFBIG (over WEFT_FILE_MAX_KEY), -ENOENT, ...: weft_file_strerror() names them. */
int wire_keyfile_read(const char *path, char pub[WIRE_KEY_LEN + 1], char sec[WIRE_KEY_LEN + 1]);
bool wire_key_valid(const char *z85);
/* Does sec belong to pub? */
bool wire_keypair_matches(const char *pub, const char *sec);

/*
 * Sockets (wire_sock.c).  wire_server_socket(): a ROUTER bound to endpoint, CURVE server
 * with sec, whose connections are authenticated by a ZAP handler thread (aggregator/zap.h,
 * started once per zmq context by wire_zap_start()) against the allow-list; the ZAP user id of an accepted peer is
 * "ROLE:NAME" so that the daemon learns the role from each message's metadata
 * (zmq_msg_gets(msg, "User-Id")).  wire_client_socket(): a DEALER connected to endpoint as
 * a CURVE client that trusts only server_pub.  Both set linger, high-water marks and
 * ZMQ_MAXMSGSIZE = WIRE_MAX_BYTES.  NULL with errno on failure.
 */
void *wire_server_socket(void *zctx, const char *endpoint, const char *pub, const char *sec);
void *wire_client_socket(void *zctx, const char *endpoint, const char *server_pub, const char *pub,
			 const char *sec);

/* Sends one envelope (non-blocking when dontwait); for ROUTER sockets identity is the peer's
 * routing id, else NULL.  0, -EAGAIN (peer's queue full), or -errno. */
int wire_send(void *sock, const void *identity, size_t idlen, const Weft__Envelope *e,
	      bool dontwait);

/* The checks wire_decode() makes, on a tree built in memory (wire_encode() runs them too:
 * a peer never sends what it would reject).  0, or -EINVAL with a reason in why. */
int wire_validate(const Weft__Envelope *e, char *why, size_t whysz);
/* Whether the aggregator (the ROUTER side) may send a body of this kind to its peers. */
bool wire_body_from_server(Weft__Envelope__BodyCase body);
/* "hello", "partial", ...; "none" for anything else. */
const char *wire_body_name(Weft__Envelope__BodyCase body);
/* The role in a ZAP user id "ROLE:NAME" (message metadata "User-Id"), and NAME. */
enum wire_role wire_user_id_role(const char *user_id, const char **name);
/*
 * An envelope around a body packed earlier (weft__<body>__pack()): version, seq, then the
 * body's bytes.  The agent's spool keeps packed partials and stamps each transmission with
 * a fresh seq this way.  The body is not re-checked: validate it before packing.
 */
int wire_envelope_wrap(uint64_t seq, Weft__Envelope__BodyCase body, const void *packed, size_t plen,
		       void **buf, size_t *len);
/* wire_send() of bytes already encoded. */
int wire_send_bytes(void *sock, const void *identity, size_t idlen, const void *buf, size_t len,
		    bool dontwait);

/*
 * The socket monitor (wire_sock.c): a PAIR socket in zctx receiving sock's ZeroMQ events of
 * the mask `events` (ZMQ_EVENT_*), NULL with errno.  wire_monitor_read() returns the next
 * event without waiting, its value (the ZAP status of a refused handshake, ...) in *value,
 * or 0 when none is waiting.  wire_monitor_close() stops the monitor of sock and closes mon
 * (call it before closing sock; either may be NULL).
 */
void *wire_monitor_open(void *zctx, void *sock, int events);
int wire_monitor_read(void *mon, uint32_t *value);
void wire_monitor_close(void *sock, void *mon);

#endif
