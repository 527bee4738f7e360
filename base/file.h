/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Reading a file a user named: allow-lists, key files, binaries and libraries for uprobes,
 * query files (-f), compile cache entries.  Whatever the path turns out to be, weft never
 * blocks on it and never reads it without bound: only a regular file of at most the limit
 * of its kind passes.  A FIFO, a device (/dev/zero), a socket or a directory is refused
 * with a message that says so, before anything is read from it.
 *
 * How: stat() first, so that a device is refused without being opened (opening some has
 * effects); then open(O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC), which cannot block
 * even if the path was swapped for a FIFO in between; then fstat() of what was opened,
 * which decides.  Reads stop at the limit: a file that grows past it while being read is
 * refused too.
 */
#ifndef WEFT_FILE_H
#define WEFT_FILE_H
#include <stddef.h>
#include <stdint.h>

/* The limit of each kind of file (bytes). */
#define WEFT_FILE_MAX_ALLOW (16u << 20) /* an allow-list: 16 MiB (~150,000 keys) */
#define WEFT_FILE_MAX_KEY 4096 /* a key file: two lines of 47 bytes */
#define WEFT_FILE_MAX_QUERY (1u << 20) /* a query file (-f): 1 MiB */
#define WEFT_FILE_MAX_ELF (4ULL << 30) /* a binary or library for uprobes and USDT: 4 GiB */
#define WEFT_FILE_MAX_OBJECT (64u << 20) /* a compiled BPF object in the cache: 64 MiB */

/*
 * Opens path for reading if it is a regular file of at most max bytes: the descriptor
 * (O_CLOEXEC; O_NONBLOCK, which regular files ignore), or -errno with what was wrong in why
 * (when whysz > 0; without the path, e.g. "a FIFO, not a regular file"):
 *   -EISDIR   a directory
 *   -ENODEV   a FIFO, a device or a socket ("not a regular file")
 *   -EFBIG    larger than max
 *   other     as open() and stat() say (-ENOENT, -EACCES, ...)
 * *size (if not NULL) is the file's size.
 */
int weft_file_open(const char *path, uint64_t max, uint64_t *size, char *why, size_t whysz);

/*
 * The whole file, checked as weft_file_open() does, into a malloc'd buffer with a NUL byte
 * after its len bytes (a text file is then a C string).  0 or -errno with why as above
 * (-EFBIG also when the file grew past max while it was read).
 */
int weft_file_read(const char *path, uint64_t max, char **data, size_t *len, char *why,
		   size_t whysz);

/* A short text for an error weft_file_open() returned (as strerror(), with the codes above
 * in words: "not a regular file (a FIFO, a device or a socket)", "too large"). */
const char *weft_file_strerror(int err);

#endif
