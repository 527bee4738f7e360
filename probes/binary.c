// SPDX-License-Identifier: Apache-2.0
/*
 * Which file a probe's BINARY part names.  An absolute path is taken as written (the caller
 * checks that it is an ELF file, so the error names what the user wrote).  A relative path
 * ("./a.out") is made absolute.  A bare name is a library or a program:
 *   1. with -p PID, the files mapped by that process (/proc/PID/maps), so `libc` is the very
 *      libc that process runs, seen through /proc/PID/root when it lives in another mount
 *      namespace;
 *   2. the dynamic linker's cache (/etc/ld.so.cache, format "glibc-ld.so.cache1.1");
 *   3. the standard library directories;
 *   4. PATH, for programs ("python3").
 * Library-looking names (lib*, *.so*) try 2-3 before 4; other names try 4 first.
 * A name matches a file when the file's basename is the name, or the name followed by '.'
 * or '-' ("libc" matches libc.so.6, "python3" matches python3.11).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "probes/elf.h"
#include "probes/probes.h"

#define LDCACHE_PATH "/etc/ld.so.cache"
#define LDCACHE_MAGIC "glibc-ld.so.cache1.1"
#define LDCACHE_OLD_MAGIC "ld.so-1.7.0"

/* How well basename `base` matches `name`: 0 no, 3 exact, 2 "name.so...", 1 other suffix. */
static int name_match(const char *name, const char *base)
{
	size_t len = strlen(name);

	if (strcmp(name, base) == 0)
		return 3;
	if (strncmp(name, base, len) != 0)
		return 0;
	if (strncmp(base + len, ".so", 3) == 0)
		return 2;
	if (base[len] == '.' || base[len] == '-')
		return 1;
	return 0;
}

static bool is_elf_file(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISREG(st.st_mode) && probe_elf_check(path) == 0;
}

static int out_copy(char *out, size_t outsz, const char *path)
{
	if ((size_t)snprintf(out, outsz, "%s", path) >= outsz)
		return -ENAMETOOLONG;
	return 0;
}

static int resolve_maps(const char *name, pid_t pid, char *out, size_t outsz)
{
	char path[64], line[PATH_MAX + 256], best[PATH_MAX] = "";
	int best_score = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return -ENOENT;
	while (fgets(line, sizeof(line), f)) {
		char *file = strchr(line, '/');
		char *nl, *base;
		int score;

		if (!file)
			continue;
		nl = strchr(file, '\n');
		if (nl)
			*nl = '\0';
		if (strstr(file, " (deleted)"))
			continue;
		base = strrchr(file, '/') + 1;
		score = name_match(name, base);
		if (score > best_score) {
			best_score = score;
			snprintf(best, sizeof(best), "%s", file);
		}
	}
	fclose(f);
	if (!best_score)
		return -ENOENT;
	/* The path is the process's view; from ours it may be under its root. */
	if (access(best, F_OK) != 0) {
		char rooted[PATH_MAX + 64];

		snprintf(rooted, sizeof(rooted), "/proc/%d/root%s", (int)pid, best);
		return out_copy(out, outsz, rooted);
	}
	return out_copy(out, outsz, best);
}

#ifdef __x86_64__
#define LDCACHE_ARCH 0x0300 /* FLAG_X8664_LIB64 */
#elif defined(__aarch64__)
#define LDCACHE_ARCH 0x0a00 /* FLAG_AARCH64_LIB64 */
#else
#define LDCACHE_ARCH -1
#endif

/* Looks name up among the cache's sonames; the cache is a file we did not write, so every
 * string offset is checked against its size. */
static int resolve_ldcache(const char *name, char *out, size_t outsz)
{
	const size_t hdr_sz = 48, ent_sz = 24;
	const char *map, *hdr;
	size_t size, start = 0;
	char best[PATH_MAX] = "";
	int best_score = 0, fd;
	uint32_t nlibs;
	struct stat st;

	fd = open(LDCACHE_PATH, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -ENOENT;
	if (fstat(fd, &st) != 0 || st.st_size < (off_t)hdr_sz || st.st_size > (64 << 20)) {
		close(fd);
		return -ENOENT;
	}
	size = (size_t)st.st_size;
	map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (map == MAP_FAILED)
		return -ENOENT;
	/* an old-format cache may precede the new one: skip its 12-byte entries */
	if (memcmp(map, LDCACHE_OLD_MAGIC, strlen(LDCACHE_OLD_MAGIC)) == 0) {
		uint32_t nold;

		memcpy(&nold, map + 12, 4);
		start = 16 + (size_t)nold * 12;
		start = (start + 7) & ~(size_t)7;
	}
	if (start > size - hdr_sz || memcmp(map + start, LDCACHE_MAGIC, strlen(LDCACHE_MAGIC)))
		goto out_unmap;
	hdr = map + start;
	memcpy(&nlibs, hdr + 20, 4);
	if (nlibs > (size - start - hdr_sz) / ent_sz)
		goto out_unmap;
	for (uint32_t i = 0; i < nlibs; i++) {
		const char *e = hdr + hdr_sz + (size_t)i * ent_sz;
		int32_t flags;
		uint32_t key, value;
		const char *k, *v;
		int score;

		memcpy(&flags, e, 4);
		memcpy(&key, e + 4, 4);
		memcpy(&value, e + 8, 4);
		if (LDCACHE_ARCH >= 0 && (flags & 0xff00) != LDCACHE_ARCH)
			continue;
		/* offsets count from the start of the new-format header */
		if (key >= size - start || value >= size - start)
			continue;
		k = hdr + key;
		v = hdr + value;
		if (!memchr(k, '\0', size - start - key) || !memchr(v, '\0', size - start - value))
			continue;
		score = name_match(name, k);
		if (score > best_score && is_elf_file(v)) {
			best_score = score;
			snprintf(best, sizeof(best), "%s", v);
		}
	}
out_unmap:
	munmap((void *)map, size);
	if (!best_score)
		return -ENOENT;
	return out_copy(out, outsz, best);
}

static int resolve_dirs(const char *name, char *out, size_t outsz)
{
	static const char *const dirs[] = {
		"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib", "/lib",
	};

	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		char best[PATH_MAX] = "";
		int best_score = 0;
		struct dirent *de;
		DIR *d = opendir(dirs[i]);

		if (!d)
			continue;
		while ((de = readdir(d))) {
			char path[PATH_MAX];
			int score = name_match(name, de->d_name);

			if (score <= best_score)
				continue;
			snprintf(path, sizeof(path), "%s/%s", dirs[i], de->d_name);
			if (!is_elf_file(path)) /* libc.so is a linker script */
				continue;
			best_score = score;
			snprintf(best, sizeof(best), "%s", path);
		}
		closedir(d);
		if (best_score)
			return out_copy(out, outsz, best);
	}
	return -ENOENT;
}

static int resolve_path_env(const char *name, char *out, size_t outsz)
{
	const char *env = getenv("PATH");
	char *dirs, *save = NULL, *dir;
	int ret = -ENOENT;

	dirs = strdup(env && *env ? env :
				    "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
	if (!dirs)
		return -ENOMEM;
	for (dir = strtok_r(dirs, ":", &save); dir; dir = strtok_r(NULL, ":", &save)) {
		char path[PATH_MAX];
		struct stat st;

		if (*dir != '/')
			continue; /* a relative PATH entry depends on our cwd: not what the user meant */
		snprintf(path, sizeof(path), "%s/%s", dir, name);
		if (stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0 &&
		    probe_elf_check(path) == 0) {
			ret = out_copy(out, outsz, path);
			break;
		}
	}
	free(dirs);
	return ret;
}

int probe_resolve_binary(const char *name, pid_t pid, char *out, size_t outsz)
{
	bool lib_like;

	if (!name || !*name)
		return -ENOENT;
	if (name[0] == '/')
		return out_copy(out, outsz, name);
	if (strchr(name, '/')) {
		char abs[PATH_MAX];

		if (!realpath(name, abs))
			return -ENOENT;
		return out_copy(out, outsz, abs);
	}
	if (pid > 0 && resolve_maps(name, pid, out, outsz) == 0)
		return 0;
	lib_like = strncmp(name, "lib", 3) == 0 || strstr(name, ".so");
	if (!lib_like && resolve_path_env(name, out, outsz) == 0)
		return 0;
	if (resolve_ldcache(name, out, outsz) == 0)
		return 0;
	if (resolve_dirs(name, out, outsz) == 0)
		return 0;
	if (lib_like && resolve_path_env(name, out, outsz) == 0)
		return 0;
	return -ENOENT;
}
