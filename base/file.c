// SPDX-License-Identifier: Apache-2.0
/*
 * Reading files that users name, refusing what is not a regular file of a sane size
 * (file.h says why and how).  Every such read in weft goes through here.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "base/file.h"

static const char *kind_name(mode_t m)
{
	if (S_ISDIR(m))
		return "a directory";
	if (S_ISFIFO(m))
		return "a FIFO";
	if (S_ISCHR(m))
		return "a character device";
	if (S_ISBLK(m))
		return "a block device";
	if (S_ISSOCK(m))
		return "a socket";
	return "a special file";
}

/* 0 if st is a regular file of at most max bytes, else -errno with why. */
static int file_check(const struct stat *st, uint64_t max, char *why, size_t whysz)
{
	if (!S_ISREG(st->st_mode)) {
		if (whysz)
			snprintf(why, whysz, "%s, not a regular file", kind_name(st->st_mode));
		return S_ISDIR(st->st_mode) ? -EISDIR : -ENODEV;
	}
	if ((uint64_t)st->st_size > max) {
		if (whysz)
			snprintf(why, whysz, "%llu bytes, over the limit of %llu for this file",
				 (unsigned long long)st->st_size, (unsigned long long)max);
		return -EFBIG;
	}
	return 0;
}

int weft_file_open(const char *path, uint64_t max, uint64_t *size, char *why, size_t whysz)
{
	struct stat st;
	int fd, rc;

	if (whysz)
		why[0] = 0;
	if (!path || !*path) {
		if (whysz)
			snprintf(why, whysz, "no file name");
		return -EINVAL;
	}
	/* a device is refused before it is opened: opening some has effects */
	if (stat(path, &st) != 0) {
		rc = -errno;
		goto out_errno;
	}
	rc = file_check(&st, max, why, whysz);
	if (rc)
		return rc;
	/* O_NONBLOCK: should the path have become a FIFO since, the open does not wait for
	 * a writer */
	fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		goto out_errno;
	}
	if (fstat(fd, &st) != 0) {
		rc = -errno;
		close(fd);
		goto out_errno;
	}
	rc = file_check(&st, max, why, whysz);
	if (rc) {
		close(fd);
		return rc;
	}
	if (size)
		*size = (uint64_t)st.st_size;
	return fd;

out_errno:
	if (whysz)
		snprintf(why, whysz, "%s", strerror(-rc));
	return rc;
}

int weft_file_read(const char *path, uint64_t max, char **data, size_t *len, char *why,
		   size_t whysz)
{
	uint64_t size = 0;
	size_t cap, off = 0;
	char *buf;
	int fd;

	*data = NULL;
	*len = 0;
	fd = weft_file_open(path, max, &size, why, whysz);
	if (fd < 0)
		return fd;
	/* as big as fstat() said, plus room to notice a file that grew since */
	cap = (size_t)size + 1;
	buf = malloc(cap + 1);
	if (!buf) {
		close(fd);
		if (whysz)
			snprintf(why, whysz, "out of memory");
		return -ENOMEM;
	}
	for (;;) {
		ssize_t n;

		if (off == cap) {
			size_t ncap = cap * 2 > max + 1 ? (size_t)max + 1 : cap * 2;
			char *nb;

			if (ncap <= cap) {
				/* read max + 1 bytes: it grew past the limit */
				free(buf);
				close(fd);
				if (whysz)
					snprintf(why, whysz,
						 "grew past the limit of %llu bytes while read",
						 (unsigned long long)max);
				return -EFBIG;
			}
			nb = realloc(buf, ncap + 1);
			if (!nb) {
				free(buf);
				close(fd);
				if (whysz)
					snprintf(why, whysz, "out of memory");
				return -ENOMEM;
			}
			buf = nb;
			cap = ncap;
		}
		n = read(fd, buf + off, cap - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int rc = -errno;

			free(buf);
			close(fd);
			if (whysz)
				snprintf(why, whysz, "%s", strerror(-rc));
			return rc;
		}
		if (n == 0)
			break;
		off += (size_t)n;
	}
	close(fd);
	buf[off] = 0;
	*data = buf;
	*len = off;
	return 0;
}

const char *weft_file_strerror(int err)
{
	if (err < 0)
		err = -err;
	switch (err) {
	case ENODEV:
		return "not a regular file (a FIFO, a device or a socket)";
	case EISDIR:
		return "a directory, not a regular file";
	case EFBIG:
		return "larger than weft reads for this kind of file";
	default:
		return strerror(err);
	}
}
