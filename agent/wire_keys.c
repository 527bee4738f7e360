// SPDX-License-Identifier: Apache-2.0
/*
 * CURVE keys: Z85 text as zmq_curve_keypair() makes it, key files ("public <z85>\nsecret
 * <z85>\n", mode 0600, written atomically) and public-key files.  Used by every end of the
 * wire: `weft keygen`, the agent, clients and the aggregator.
 *
 * Must never: write a secret key readable by others, or accept a key file whose secret does
 * not belong to its public key.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "base/zmq_dl.h"
#include "agent/wire.h"
#include "base/file.h"
#include "base/log.h"

static bool z85_char(char c)
{
	static const char alphabet[] = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRS"
				       "TUVWXYZ.-:+=^!/*?&<>()[]{}@%$#";

	return c && strchr(alphabet, c);
}

bool wire_key_valid(const char *z85)
{
	uint8_t raw[32];

	if (!z85 || strlen(z85) != WIRE_KEY_LEN)
		return false;
	for (int i = 0; i < WIRE_KEY_LEN; i++)
		if (!z85_char(z85[i]))
			return false;
	return zmq_z85_decode(raw, z85) != NULL;
}

int wire_keypair_new(char pub[WIRE_KEY_LEN + 1], char sec[WIRE_KEY_LEN + 1])
{
	if (!pub || !sec)
		return -EINVAL;
	if (!zmq_has("curve"))
		return -ENOTSUP;
	if (zmq_curve_keypair(pub, sec) != 0)
		return -errno ? -errno : -EIO;
	return 0;
}

/* Does sec belong to pub? */
bool wire_keypair_matches(const char *pub, const char *sec)
{
	char derived[WIRE_KEY_LEN + 1];

	return zmq_curve_public(derived, sec) == 0 && strcmp(derived, pub) == 0;
}

int wire_keyfile_write(const char *path, const char *pub, const char *sec)
{
	char tmp[4096];
	FILE *f;
	int fd, rc = 0;

	if (!path || !wire_key_valid(pub) || (sec && !wire_key_valid(sec)))
		return -EINVAL;
	if (sec && !wire_keypair_matches(pub, sec))
		return -EINVAL;
	if (snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid()) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	/* written aside and renamed: a reader sees the old file or the new one, never half */
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, sec ? 0600 : 0644);
	if (fd < 0)
		return -errno;
	f = fdopen(fd, "w");
	if (!f) {
		rc = -errno;
		close(fd);
		goto out_unlink;
	}
	fprintf(f, "public %s\n", pub);
	if (sec)
		fprintf(f, "secret %s\n", sec);
	if (fflush(f) != 0 || fsync(fileno(f)) != 0)
		rc = -errno;
	if (fclose(f) != 0 && !rc)
		rc = -errno;
	if (rc)
		goto out_unlink;
	if (rename(tmp, path) != 0) {
		rc = -errno;
		goto out_unlink;
	}
	return 0;
out_unlink:
	unlink(tmp);
	return rc;
}

int wire_keyfile_read(const char *path, char pub[WIRE_KEY_LEN + 1], char sec[WIRE_KEY_LEN + 1])
{
	char line[256], got_pub[WIRE_KEY_LEN + 1] = "", got_sec[WIRE_KEY_LEN + 1] = "";
	char *text = NULL, why[160];
	size_t len = 0;
	struct stat st;
	FILE *f;
	int rc;

	if (!path || !pub)
		return -EINVAL;
	/* a regular file of a few lines, never a FIFO or a device (base/file.h) */
	rc = weft_file_read(path, WEFT_FILE_MAX_KEY, &text, &len, why, sizeof(why));
	if (rc)
		return rc;
	f = len ? fmemopen(text, len, "r") : NULL;
	if (!f) {
		free(text);
		return len ? -ENOMEM : -EINVAL; /* an empty file holds no key */
	}
	while (fgets(line, sizeof(line), f)) {
		char word[16], key[64], extra[2];
		int n;

		if (!strchr(line, '\n') && !feof(f)) {
			rc = -EINVAL; /* a line this long is not ours */
			break;
		}
		n = sscanf(line, "%15s %63s %1s", word, key, extra);
		if (n <= 0 || word[0] == '#')
			continue;
		if (n != 2 || !wire_key_valid(key)) {
			rc = -EINVAL;
			break;
		}
		if (strcmp(word, "public") == 0 && !got_pub[0])
			memcpy(got_pub, key, sizeof(got_pub));
		else if (strcmp(word, "secret") == 0 && !got_sec[0])
			memcpy(got_sec, key, sizeof(got_sec));
		else {
			rc = -EINVAL;
			break;
		}
	}
	if (!rc && ferror(f))
		rc = -EIO;
	fclose(f);
	free(text);
	if (!rc && got_sec[0] && stat(path, &st) == 0 && (st.st_mode & 077))
		log_warn("%s: a secret key readable by others (chmod 600 it)", path);
	if (rc)
		return rc;
	if (!got_pub[0])
		return -EINVAL;
	if (sec) {
		if (!got_sec[0])
			return -ENOKEY;
		if (!wire_keypair_matches(got_pub, got_sec))
			return -EINVAL; /* the two lines come from different pairs */
		memcpy(sec, got_sec, sizeof(got_sec));
	}
	memcpy(pub, got_pub, sizeof(got_pub));
	return 0;
}
