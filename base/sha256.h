/* SPDX-License-Identifier: Apache-2.0 */
/*
 * SHA-256 (FIPS 180-4), small and dependency-free: the digest recorded with every compile
 * cache entry, so that an object truncated or changed on disk (a bit flip, a torn copy) is
 * noticed and rebuilt instead of being handed to the kernel.  Not constant-time, and not
 * meant for secrets.
 */
#ifndef WEFT_SHA256_H
#define WEFT_SHA256_H
#include <stddef.h>
#include <stdint.h>

#define WEFT_SHA256_LEN 32

struct weft_sha256 {
	uint32_t h[8];
	uint64_t len; /* bytes hashed so far */
	uint8_t buf[64];
	size_t nbuf;
};

void weft_sha256_init(struct weft_sha256 *c);
void weft_sha256_update(struct weft_sha256 *c, const void *data, size_t n);
void weft_sha256_final(struct weft_sha256 *c, uint8_t out[WEFT_SHA256_LEN]);
/* The digest of one buffer. */
void weft_sha256(const void *data, size_t n, uint8_t out[WEFT_SHA256_LEN]);

#endif
