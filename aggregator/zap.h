/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Who may connect to the aggregator: the allow-list and the ZAP handler that applies it to
 * every CURVE handshake (zap.c).
 *
 * The allow-list file holds one "ROLE Z85-PUBLIC-KEY [NAME]" per line, '#' comments,
 * ROLE in agent|client|aggregator.
 */
#ifndef WEFT_ZAP_H
#define WEFT_ZAP_H
#include <stddef.h>
#include <stdint.h>
#include "agent/wire.h"

struct wire_allow_entry {
	enum wire_role role;
	char key[WIRE_KEY_LEN + 1];
	char name[64];
};
struct wire_allowlist {
	struct wire_allow_entry *v;
	size_t n;
};
/* Loads an allow-list; -EINVAL with the bad line number in *line (if not NULL), or a file
 * error of base/file.h (-ENODEV: not a regular file, -EFBIG: over WEFT_FILE_MAX_ALLOW, ...;
 * weft_file_strerror() names them). */
int wire_allowlist_load(const char *path, struct wire_allowlist *al, int *line);
void wire_allowlist_free(struct wire_allowlist *al);
/* The role of a public key (Z85), or WIRE_ROLE_NONE. */
enum wire_role wire_allowlist_role(const struct wire_allowlist *al, const char *z85,
				   const char **name);
/* An allow-list from text (the file format above); wire_allowlist_load() reads a file with
 * it.  -EINVAL with the 1-based bad line in *line; duplicate keys are refused. */
int wire_allowlist_parse(const char *text, size_t len, struct wire_allowlist *al, int *line);

struct wire_zap;
struct wire_zap *wire_zap_start(void *zctx, const struct wire_allowlist *al);
void wire_zap_stop(struct wire_zap *z);
uint64_t wire_zap_rejected(const struct wire_zap *z); /* connections refused */
/* Replaces the ZAP handler's allow-list (e.g. on SIGHUP); new handshakes use it. */
int wire_zap_reload(struct wire_zap *z, const struct wire_allowlist *al);
uint64_t wire_zap_accepted(const struct wire_zap *z); /* connections let in */

#endif
