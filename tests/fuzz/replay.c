// SPDX-License-Identifier: Apache-2.0
/*
 * A plain main() for a libFuzzer target, so that every build replays the fuzz corpora: linked
 * with one tests/fuzz/fuzz_*.c into an ordinary executable (tests/CMakeLists.txt, builds
 * without WEFT_FUZZ), it calls the target's LLVMFuzzerInitialize(), if it has one, and then
 * LLVMFuzzerTestOneInput() once on every file of each directory (or on each file) named on
 * the command line, in name order.  A target reports a broken property by abort(), so a
 * failing input ends the run with a signal; the ASan build also catches memory errors and
 * leaks.  Before each input its name is printed on stderr, so the last name printed is the
 * input that failed.  Exits 1 if a directory holds no input: a corpus that went missing
 * must not pass.
 *
 *   replay_fuzz_query tests/fuzz/corpus/query
 */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

/* The whole file in a buffer of its own size (so ASan sees any read past its end). */
static uint8_t *file_read(const char *path, size_t *size)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf = NULL;
	long n;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0) {
		buf = malloc(n ? (size_t)n : 1);
		if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
			free(buf);
			buf = NULL;
		}
		*size = (size_t)n;
	}
	fclose(f);
	return buf;
}

static int replay_file(const char *path)
{
	size_t size = 0;
	uint8_t *data = file_read(path, &size);

	if (!data) {
		fprintf(stderr, "replay: cannot read %s: %s\n", path, strerror(errno));
		return -1;
	}
	fprintf(stderr, "replay: %s (%zu bytes)\n", path, size);
	LLVMFuzzerTestOneInput(data, size);
	free(data);
	return 0;
}

/* Replays every regular file of dir; the number replayed, or -1. */
static int replay_dir(const char *dir)
{
	struct dirent **list;
	char path[4096];
	int n, done = 0, ret = 0;

	n = scandir(dir, &list, NULL, alphasort); /* the C locale: byte order */
	if (n < 0) {
		fprintf(stderr, "replay: cannot list %s: %s\n", dir, strerror(errno));
		return -1;
	}
	for (int i = 0; i < n; i++) {
		struct stat st;

		snprintf(path, sizeof(path), "%s/%s", dir, list[i]->d_name);
		if (ret == 0 && stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
			if (replay_file(path) < 0)
				ret = -1;
			else
				done++;
		}
		free(list[i]);
	}
	free(list);
	return ret < 0 ? -1 : done;
}

int main(int argc, char **argv)
{
	int total = 0;

	if (argc < 2) {
		fprintf(stderr, "usage: %s DIR|FILE...\n", argv[0]);
		return 2;
	}
	if (LLVMFuzzerInitialize)
		LLVMFuzzerInitialize(&argc, &argv);
	for (int i = 1; i < argc; i++) {
		struct stat st;
		int n;

		if (stat(argv[i], &st) != 0) {
			fprintf(stderr, "replay: %s: %s\n", argv[i], strerror(errno));
			return 1;
		}
		if (S_ISDIR(st.st_mode))
			n = replay_dir(argv[i]);
		else
			n = replay_file(argv[i]) == 0 ? 1 : -1;
		if (n < 0)
			return 1;
		if (n == 0) {
			fprintf(stderr, "replay: no input in %s\n", argv[i]);
			return 1;
		}
		printf("replayed %d input%s from %s\n", n, n == 1 ? "" : "s", argv[i]);
		total += n;
	}
	printf("replay: %d inputs, none failed\n", total);
	return 0;
}
