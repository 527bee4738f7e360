// SPDX-License-Identifier: Apache-2.0
/*
 * The clang driver and the compile cache.
 *
 * One clang process per compile: the generated source and the embedded runtime headers
 * are written to a private temporary directory, clang -target bpf turns them into a BPF
 * ELF object with BTF and line info (the verifier's messages then carry source lines), and
 * the object is kept in the cache under a hash of everything that decides its bytes: the
 * source, the runtime headers, the clang binary (path, size, mtime) and the kernel (its
 * release, version and BTF size).  A repeated query skips clang entirely.
 *
 * Cache: $WEFT_CACHE_DIR, else /var/cache/weft for root, else ~/.cache/weft; mode 0700;
 * entries written to a temporary name and renamed, so a crash never leaves a torn object;
 * each entry carries the SHA-256 of its object, checked on every read, so that one damaged
 * on disk is rebuilt rather than loaded; at most CACHE_MAX_ENTRIES objects (the oldest are
 * removed).
 *
 * Must never: run clang through a shell, trust a cache entry that is not a BPF ELF file,
 * or leave its temporary directory behind.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>
#include "compiler/codegen.h"
#include "kernel/kernel_embed.h"
#include "base/file.h"
#include "base/log.h"
#include "base/sha256.h"

extern char **environ;

#define CACHE_MAX_ENTRIES 256
#define OBJ_MAX (64u << 20)
#define CLANG_ERR_MAX 4096
/* Changes whenever run_clang()'s arguments change: objects built otherwise are not reused. */
#define CLANG_ARGS_ID "bpf -O2 -g x86 cwd=tmp debug-dir=. v2"
/* Changes whenever the layout of a cache entry changes: older entries are not read. */
#define CACHE_FORMAT_ID "object + weftobj1 SHA-256 trailer"

static const char *clang_path(void)
{
	const char *env = getenv("WEFT_CLANG");

	if (env && *env)
		return env;
#ifdef WEFT_CLANG_PATH
	if (access(WEFT_CLANG_PATH, X_OK) == 0)
		return WEFT_CLANG_PATH;
#endif
	return "clang";
}

/* 64-bit FNV-1a, twice with different bases for a 128-bit cache key. */
struct hash2 {
	uint64_t a, b;
};

static void hash_bytes(struct hash2 *h, const void *data, size_t n)
{
	const unsigned char *p = data;

	for (size_t i = 0; i < n; i++) {
		h->a = (h->a ^ p[i]) * 0x100000001b3ULL;
		h->b = (h->b ^ p[i]) * 0x100000001b3ULL;
	}
	/* a separator, so ("ab","c") and ("a","bc") differ */
	h->a = (h->a ^ 0xff) * 0x100000001b3ULL;
	h->b = (h->b ^ 0xfe) * 0x100000001b3ULL;
}

static void hash_str(struct hash2 *h, const char *s)
{
	hash_bytes(h, s, strlen(s));
}

static void hash_file_identity(struct hash2 *h, const char *path)
{
	struct stat st;
	char buf[96];

	if (stat(path, &st) == 0)
		snprintf(buf, sizeof(buf), "%lld:%lld:%lld", (long long)st.st_size,
			 (long long)st.st_mtime, (long long)st.st_ino);
	else
		snprintf(buf, sizeof(buf), "missing");
	hash_str(h, path);
	hash_str(h, buf);
}

static void cache_key(const char *source, char out[33])
{
	struct hash2 h = { 0xcbf29ce484222325ULL, 0x84222325cbf29ce4ULL };
	struct utsname u;
	char clang_real[4096];
	const char *cp = clang_path();

	hash_str(&h, WEFT_VERSION);
	hash_str(&h, CLANG_ARGS_ID);
	hash_str(&h, CACHE_FORMAT_ID);
	hash_str(&h, source);
	for (const struct kernel_embed_file *f = kernel_embed_files; f->name; f++) {
		hash_str(&h, f->name);
		hash_bytes(&h, f->data, f->len);
	}
	if (strchr(cp, '/') && realpath(cp, clang_real))
		cp = clang_real;
	hash_file_identity(&h, cp);
	if (uname(&u) == 0) {
		hash_str(&h, u.release);
		hash_str(&h, u.version);
		hash_str(&h, u.machine);
	}
	hash_file_identity(&h, "/sys/kernel/btf/vmlinux");
	snprintf(out, 33, "%016llx%016llx", (unsigned long long)h.a, (unsigned long long)h.b);
}

static int mkdir_p(const char *path, mode_t mode)
{
	char tmp[4096];

	if (snprintf(tmp, sizeof(tmp), "%s", path) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	for (char *p = tmp + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		if (mkdir(tmp, mode) != 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(tmp, mode) != 0 && errno != EEXIST)
		return -errno;
	return 0;
}

static int cache_dir(const struct compile_opts *o, char *out, size_t sz)
{
	const char *env = getenv("WEFT_CACHE_DIR");
	const char *home = getenv("HOME");
	int n;

	if (o && o->cache_dir)
		n = snprintf(out, sz, "%s", o->cache_dir);
	else if (env && *env)
		n = snprintf(out, sz, "%s", env);
	else if (geteuid() == 0)
		n = snprintf(out, sz, "/var/cache/weft");
	else if (home && *home)
		n = snprintf(out, sz, "%s/.cache/weft", home);
	else
		return -ENOENT;
	if (n < 0 || (size_t)n >= sz)
		return -ENAMETOOLONG;
	return mkdir_p(out, 0700);
}

static int read_file(const char *path, void **data, size_t *len)
{
	char *buf, why[160];
	int rc;

	/* the cache directory may be shared or tampered with: a regular file, bounded */
	rc = weft_file_read(path, OBJ_MAX, &buf, len, why, sizeof(why));
	if (rc)
		return rc;
	if (*len == 0) {
		free(buf);
		return -EINVAL;
	}
	*data = buf;
	return 0;
}

static int write_file(const char *path, const void *data, size_t len, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	const char *p = data;

	if (fd < 0)
		return -errno;
	while (len) {
		ssize_t n = write(fd, p, len);

		if (n <= 0) {
			int err = n < 0 ? -errno : -EIO;

			close(fd);
			return err;
		}
		p += n;
		len -= n;
	}
	if (close(fd) != 0)
		return -errno;
	return 0;
}

static bool is_bpf_elf(const void *data, size_t len)
{
	const unsigned char *e = data;

	/* ELF magic, 64-bit, and e_machine == EM_BPF (247) little-endian */
	return len > 64 && memcmp(e, "\177ELF", 4) == 0 && e[4] == 2 && e[18] == 247 && e[19] == 0;
}

/*
 * A cache entry is the object followed by a trailer: CACHE_MAGIC and the SHA-256 of the
 * object.  An entry whose trailer is missing or does not match its bytes (truncated, a bit
 * flipped on disk, a torn or tampered copy) is never handed to libbpf: it is rebuilt.
 */
#define CACHE_MAGIC "weftobj\001"
#define CACHE_MAGIC_LEN 8
#define CACHE_TRAILER (CACHE_MAGIC_LEN + WEFT_SHA256_LEN)

/* Whether an entry read from the cache is intact; *obj_len: the object's bytes in it. */
static bool cache_entry_ok(const void *data, size_t len, size_t *obj_len)
{
	const unsigned char *p = data;
	uint8_t sum[WEFT_SHA256_LEN];

	if (len <= CACHE_TRAILER)
		return false;
	len -= CACHE_TRAILER;
	if (memcmp(p + len, CACHE_MAGIC, CACHE_MAGIC_LEN) != 0)
		return false;
	weft_sha256(p, len, sum);
	if (memcmp(p + len + CACHE_MAGIC_LEN, sum, sizeof(sum)) != 0)
		return false;
	*obj_len = len;
	return true;
}

/* Writes obj and its trailer to path (a temporary name: the caller renames it). */
static int cache_entry_write(const char *path, const void *obj, size_t len)
{
	unsigned char *buf = malloc(len + CACHE_TRAILER);
	int rc;

	if (!buf)
		return -ENOMEM;
	memcpy(buf, obj, len);
	memcpy(buf + len, CACHE_MAGIC, CACHE_MAGIC_LEN);
	weft_sha256(obj, len, buf + len + CACHE_MAGIC_LEN);
	rc = write_file(path, buf, len + CACHE_TRAILER, 0600);
	free(buf);
	return rc;
}

/* Keeps the cache bounded: removes the oldest entries beyond CACHE_MAX_ENTRIES. */
static void cache_prune(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	struct {
		char name[256];
		time_t mtime;
	} *ents = NULL;
	int n = 0, cap = 0;

	if (!d)
		return;
	while ((de = readdir(d))) {
		struct stat st;
		size_t l = strlen(de->d_name);

		if (l < 3 || l >= 64 || strcmp(de->d_name + l - 2, ".o") != 0)
			continue;
		if (fstatat(dirfd(d), de->d_name, &st, 0) != 0)
			continue;
		if (n == cap) {
			void *nv = realloc(ents, (cap = cap ? cap * 2 : 64) * sizeof(*ents));

			if (!nv)
				break;
			ents = nv;
		}
		snprintf(ents[n].name, sizeof(ents[n].name), "%s", de->d_name);
		ents[n].mtime = st.st_mtime;
		n++;
	}
	while (n > CACHE_MAX_ENTRIES) {
		int oldest = 0;

		for (int i = 1; i < n; i++)
			if (ents[i].mtime < ents[oldest].mtime)
				oldest = i;
		unlinkat(dirfd(d), ents[oldest].name, 0);
		ents[oldest] = ents[--n];
	}
	free(ents);
	closedir(d);
}

static void rm_tmpdir(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;

	if (d) {
		while ((de = readdir(d)))
			if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
				unlinkat(dirfd(d), de->d_name, 0);
		closedir(d);
	}
	rmdir(dir);
}

/* Runs clang; its stderr goes to errbuf.  0, or -EINVAL when clang failed. */
static int run_clang(const char *dir, char *errbuf, size_t errsz)
{
	char inc[4200];
	const char *cp = clang_path();
	char *argv[] = {
		(char *)cp,
		"-target",
		"bpf",
		"-O2",
		"-g",
		"-D__TARGET_ARCH_x86",
		"-I",
		inc,
		"-I",
		"/usr/include/x86_64-linux-gnu",
		"-Wno-unused-value",
		"-Wno-unused-function",
		"-Wno-pointer-sign",
		"-Wno-compare-distinct-pointer-types",
		"-Wno-address-of-packed-member",
		"-fno-stack-protector",
		/* reproducible objects: clang runs in the temporary directory on relative
		 * names, so no temporary path is recorded; the BTF line info still finds the
		 * source (it reads the line texts the verifier quotes from the file) */
		"-fdebug-compilation-dir=.",
		"-c",
		"query.bpf.c",
		"-o",
		"query.bpf.o",
		NULL,
	};
	posix_spawn_file_actions_t fa;
	int pipefd[2], status, rc;
	pid_t pid;
	size_t off = 0;

	snprintf(inc, sizeof(inc), ".");
	if (pipe2(pipefd, O_CLOEXEC) != 0)
		return -errno;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, pipefd[1], 2);
	posix_spawn_file_actions_adddup2(&fa, pipefd[1], 1);
	posix_spawn_file_actions_addchdir_np(&fa, dir);
	rc = posix_spawnp(&pid, cp, &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(pipefd[1]);
	if (rc != 0) {
		close(pipefd[0]);
		snprintf(errbuf, errsz, "cannot run %s: %s (install clang, or set WEFT_CLANG)", cp,
			 strerror(rc));
		return -ENOENT;
	}
	for (;;) {
		char chunk[1024];
		ssize_t n = read(pipefd[0], chunk, sizeof(chunk));

		if (n <= 0)
			break;
		if (off + 1 < errsz) {
			size_t k = (size_t)n < errsz - 1 - off ? (size_t)n : errsz - 1 - off;

			memcpy(errbuf + off, chunk, k);
			off += k;
		}
	}
	errbuf[off] = 0;
	close(pipefd[0]);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return -EINVAL;
	return 0;
}

int clang_compile(const char *source, const struct compile_opts *o, struct diag_list *dl,
		  void **obj, size_t *obj_sz, bool *cache_hit)
{
	char key[33], cdir[4096], cpath[4200], tmpl[] = "/tmp/weft-cc-XXXXXX", path[4200];
	char *errbuf = NULL;
	bool cache_ok;
	int rc;

	*obj = NULL;
	*obj_sz = 0;
	*cache_hit = false;
	cache_key(source, key);
	cache_ok = cache_dir(o, cdir, sizeof(cdir)) == 0;
	if (cache_ok) {
		snprintf(cpath, sizeof(cpath), "%s/%s.o", cdir, key);
		rc = read_file(cpath, obj, obj_sz);
		if (rc == 0) {
			size_t len = 0;

			if (cache_entry_ok(*obj, *obj_sz, &len) && is_bpf_elf(*obj, len)) {
				*obj_sz = len;
				*cache_hit = true;
				log_debug("compile cache hit: %s", cpath);
				return 0;
			}
			log_warn("compile cache: %s does not match the SHA-256 recorded with it "
				 "(truncated or changed on disk): recompiling",
				 cpath);
			free(*obj);
			*obj = NULL;
			*obj_sz = 0;
			unlink(cpath);
		} else if (rc != -ENOENT) {
			log_warn("compile cache: %s: %s: recompiling", cpath,
				 weft_file_strerror(rc));
			if (rc == -EFBIG)
				unlink(cpath);
		}
	}

	if (!mkdtemp(tmpl))
		return -errno;
	for (const struct kernel_embed_file *f = kernel_embed_files; f->name; f++) {
		snprintf(path, sizeof(path), "%s/%s", tmpl, f->name);
		rc = write_file(path, f->data, f->len, 0600);
		if (rc)
			goto out;
	}
	snprintf(path, sizeof(path), "%s/query.bpf.c", tmpl);
	rc = write_file(path, source, strlen(source), 0600);
	if (rc)
		goto out;
	errbuf = malloc(CLANG_ERR_MAX);
	if (!errbuf) {
		rc = -ENOMEM;
		goto out;
	}
	rc = run_clang(tmpl, errbuf, CLANG_ERR_MAX);
	if (rc) {
		struct diag *d = diag_error(dl, DIAG_E_CLANG, (struct src_loc){ 0, 0, 1, 1 },
					    "clang could not compile the generated program");

		diag_fix(d, "%s%s", errbuf,
			 o && o->verbose ? "" : "(weft explain --dump=codegen shows the program)");
		rc = -EINVAL;
		goto out;
	}
	snprintf(path, sizeof(path), "%s/query.bpf.o", tmpl);
	rc = read_file(path, obj, obj_sz);
	if (rc)
		goto out;
	if (cache_ok) {
		char tmp[4300];

		snprintf(tmp, sizeof(tmp), "%s/.%s.%d.tmp", cdir, key, (int)getpid());
		if (cache_entry_write(tmp, *obj, *obj_sz) == 0 && rename(tmp, cpath) == 0)
			cache_prune(cdir);
		else
			unlink(tmp);
	}
out:
	free(errbuf);
	rm_tmpdir(tmpl);
	return rc;
}
