// SPDX-License-Identifier: Apache-2.0
/*
 * Extensions: `using 'FILE.bpf.c' from ...` makes the functions of a user's BPF C file
 * callable in the query, as Fay let users add tracing primitives.
 *
 * How it works.  The file is found relative to the directory of the query's file, else the
 * working directory, and read whole (bounded, a regular file: base/file.h).  Its function
 * signatures come from clang itself, not from a parser of ours: the file is written next to
 * the embedded runtime headers with a wrapper that includes weft.bpf.h first (so it may use
 * __u64, bpf_probe_read_user() and the other helpers without including anything), and
 * `clang -target bpf -fsyntax-only -Xclang -ast-dump=json` prints the tree, which jansson
 * reads.  Every function defined (with a body) in the user's file is kept: its name, its
 * parameters' types as written and whether each is a pointer, its return type.  Sema checks
 * calls against them (count, and the kind of each argument: integer or pointer); codegen
 * pastes the file's text into the generated program, so the functions are compiled with it,
 * verified by the kernel with it, and shipped to agents inside the object.
 *
 * Limits: at most 5 parameters (BPF's argument registers), integers and pointers only
 * (a struct or float parameter or return makes the function uncallable, said at the call);
 * the result is a 64-bit integer (signed unless the return type is unsigned).  One file a
 * query.  The file's own errors are clang's (E_EXT_PARSE here, E_CLANG or E_VERIFIER later).
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <jansson.h>
#include "base/file.h"
#include "compiler/ext.h"
#include "kernel/kernel_embed.h"

extern char **environ;

#define EXT_JSON_MAX (256u << 20) /* clang's dump of the headers and the file */
#define EXT_ERR_MAX 2048

static const char *ext_clang(void)
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

static int write_all(const char *path, const char *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	size_t off = 0;

	if (fd < 0)
		return -errno;
	while (off < len) {
		ssize_t n = write(fd, data + off, len - off);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			close(fd);
			return -errno;
		}
		off += (size_t)n;
	}
	return close(fd) ? -errno : 0;
}

static void rm_dir(const char *dir)
{
	char path[4200];

	for (const struct kernel_embed_file *f = kernel_embed_files; f->name; f++) {
		snprintf(path, sizeof(path), "%s/%s", dir, f->name);
		unlink(path);
	}
	snprintf(path, sizeof(path), "%s/user.bpf.c", dir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/wrap.c", dir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/clang.err", dir);
	unlink(path);
	rmdir(dir);
}

/* Runs clang's JSON dump of dir/wrap.c: *out (malloc'd, NUL-terminated) or -EINVAL with its
 * messages in err. */
static int run_dump(const char *dir, char **out, size_t *outlen, char *err, size_t errsz)
{
	char errpath[4200];
	const char *cp = ext_clang();
	char *argv[] = { (char *)cp,
			 "-target",
			 "bpf",
			 "-D__TARGET_ARCH_x86",
			 "-I",
			 ".",
			 "-I",
			 "/usr/include/x86_64-linux-gnu",
			 "-Wno-unused-function",
			 "-fsyntax-only",
			 "-Xclang",
			 "-ast-dump=json",
			 "wrap.c",
			 NULL };
	posix_spawn_file_actions_t fa;
	int pipefd[2], status, rc, efd;
	char *buf = NULL;
	size_t len = 0, cap = 0;
	pid_t pid;

	*out = NULL;
	err[0] = 0;
	snprintf(errpath, sizeof(errpath), "%s/clang.err", dir);
	if (pipe2(pipefd, O_CLOEXEC) != 0)
		return -errno;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, pipefd[1], 1);
	posix_spawn_file_actions_addopen(&fa, 2, errpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	posix_spawn_file_actions_addchdir_np(&fa, dir);
	rc = posix_spawnp(&pid, cp, &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(pipefd[1]);
	if (rc != 0) {
		close(pipefd[0]);
		snprintf(err, errsz, "cannot run %s: %s (install clang, or set WEFT_CLANG)", cp,
			 strerror(rc));
		return -ENOENT;
	}
	for (;;) {
		ssize_t n;

		if (len + 65536 + 1 > cap && cap < EXT_JSON_MAX) {
			char *nb = realloc(buf, cap ? cap * 2 : 1 << 20);

			if (!nb)
				break;
			buf = nb;
			cap = cap ? cap * 2 : 1 << 20;
		}
		if (len + 65536 + 1 > cap)
			break; /* over the bound: the dump is cut, and the JSON will not parse */
		n = read(pipefd[0], buf + len, 65536);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	close(pipefd[0]);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	efd = open(errpath, O_RDONLY | O_CLOEXEC);
	if (efd >= 0) {
		ssize_t n = read(efd, err, errsz - 1);

		err[n > 0 ? n : 0] = 0;
		close(efd);
	}
	if (!buf || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		free(buf);
		return -EINVAL;
	}
	buf[len] = 0;
	*out = buf;
	*outlen = len;
	return 0;
}

/* An integer type's name as clang spells it (desugared, or a common typedef). */
static bool int_type(const char *t, bool *is_signed)
{
	static const char *const sgn[] = {
		"char",	  "signed char", "short",   "int",     "long",	"long long", "__s8",
		"__s16",  "__s32",	 "__s64",   "s8",      "s16",	"s32",	     "s64",
		"int8_t", "int16_t",	 "int32_t", "int64_t", "pid_t", "ssize_t"
	};
	static const char *const uns[] = {
		"_Bool",	"bool",	    "unsigned char", "unsigned short",
		"unsigned int", "unsigned", "unsigned long", "unsigned long long",
		"__u8",		"__u16",    "__u32",	     "__u64",
		"u8",		"u16",	    "u32",	     "u64",
		"uint8_t",	"uint16_t", "uint32_t",	     "uint64_t",
		"size_t",	"__be16",   "__be32",	     "__be64"
	};

	while (!strncmp(t, "const ", 6) || !strncmp(t, "volatile ", 9))
		t += t[0] == 'c' ? 6 : 9;
	for (size_t i = 0; i < sizeof(sgn) / sizeof(sgn[0]); i++)
		if (strcmp(t, sgn[i]) == 0) {
			*is_signed = true;
			return true;
		}
	for (size_t i = 0; i < sizeof(uns) / sizeof(uns[0]); i++)
		if (strcmp(t, uns[i]) == 0) {
			*is_signed = false;
			return true;
		}
	return false;
}

static const char *type_of(json_t *node, bool desugared)
{
	json_t *ty = json_object_get(node, "type");
	const char *s = NULL;

	if (desugared)
		s = json_string_value(json_object_get(ty, "desugaredQualType"));
	return s ? s : json_string_value(json_object_get(ty, "qualType"));
}

/* clang writes a location's file only where it differs from the last one written, in
 * document order: each location object updates *cur. */
static void loc_track(json_t *loc, const char **cur)
{
	const char *f;

	if (!json_is_object(loc))
		return;
	loc_track(json_object_get(loc, "spellingLoc"), cur);
	loc_track(json_object_get(loc, "expansionLoc"), cur);
	f = json_string_value(json_object_get(loc, "file"));
	if (f)
		*cur = f;
}

/* Every location under node, in the order clang printed them (loc, range, inner). */
static void node_track(json_t *node, const char **cur, int depth)
{
	json_t *range = json_object_get(node, "range"), *it;
	size_t i;

	if (depth > 256)
		return;
	loc_track(json_object_get(node, "loc"), cur);
	loc_track(json_object_get(range, "begin"), cur);
	loc_track(json_object_get(range, "end"), cur);
	json_array_foreach(json_object_get(node, "inner"), i, it) node_track(it, cur, depth + 1);
}

static bool is_user_file(const char *f)
{
	size_t n = strlen(f);

	return n >= 10 && strcmp(f + n - 10, "user.bpf.c") == 0 && (n == 10 || f[n - 11] == '/');
}

static int fn_add(struct ast_query *q, struct ext_file *x, json_t *fd)
{
	const char *name = json_string_value(json_object_get(fd, "name"));
	const char *ftype = type_of(fd, false);
	json_t *inner = json_object_get(fd, "inner"), *it;
	bool body = false;
	struct ext_fn *f;
	size_t i;
	char rt[256];
	const char *paren;

	if (!name || !ftype)
		return 0;
	json_array_foreach(inner, i, it)
	{
		const char *k = json_string_value(json_object_get(it, "kind"));

		if (k && strcmp(k, "CompoundStmt") == 0)
			body = true;
	}
	if (!body || x->nfns == EXT_MAX_FNS)
		return 0;
	f = &x->fns[x->nfns];
	memset(f, 0, sizeof(*f));
	f->name = arena_strdup(q->arena, name);
	/* the return type: the function type's text before its parameter list */
	paren = strchr(ftype, '(');
	snprintf(rt, sizeof(rt), "%.*s", paren ? (int)(paren - ftype) : (int)strlen(ftype), ftype);
	for (size_t n = strlen(rt); n > 0 && rt[n - 1] == ' '; n--)
		rt[n - 1] = 0;
	f->rtype = arena_strdup(q->arena, rt);
	if (!f->name || !f->rtype)
		return -ENOMEM;
	if (strchr(rt, '*'))
		f->unsupported = "it returns a pointer; an extension function returns an integer";
	else if (!int_type(rt, &f->ret_signed) && strcmp(rt, "void") != 0)
		f->unsupported = "its return type is not an integer type";
	else if (strcmp(rt, "void") == 0)
		f->unsupported =
			"it returns nothing (void); an extension function returns an integer";
	json_array_foreach(inner, i, it)
	{
		const char *k = json_string_value(json_object_get(it, "kind"));
		const char *pt, *dt;
		bool sg;

		if (!k || strcmp(k, "ParmVarDecl") != 0)
			continue;
		if (f->nparams == EXT_MAX_PARAMS) {
			f->unsupported =
				"it has more than 5 parameters (BPF passes 5 in registers)";
			break;
		}
		pt = type_of(it, false);
		dt = type_of(it, true);
		if (!pt || !dt)
			return 0;
		f->ptype[f->nparams] = arena_strdup(q->arena, pt);
		if (!f->ptype[f->nparams])
			return -ENOMEM;
		f->pptr[f->nparams] = strchr(dt, '*') != NULL;
		if (!f->pptr[f->nparams] && !int_type(dt, &sg) && !f->unsupported)
			f->unsupported = "a parameter is neither an integer nor a pointer";
		f->nparams++;
	}
	x->nfns++;
	return 0;
}

/* Every function defined in user.bpf.c, from clang's dump. */
static int read_fns(struct ast_query *q, struct ext_file *x, const char *json, size_t len,
		    char *why, size_t whysz)
{
	json_error_t je;
	json_t *root = json_loadb(json, len, 0, &je), *inner, *it;
	const char *cur = "";
	size_t i;
	int rc = 0;

	if (!root) {
		snprintf(why, whysz, "clang's AST dump did not parse: %s", je.text);
		return -EINVAL;
	}
	inner = json_object_get(root, "inner");
	json_array_foreach(inner, i, it)
	{
		const char *k = json_string_value(json_object_get(it, "kind"));
		const char *mine;

		/* the decl's own place first (its loc and range), then everything inside */
		loc_track(json_object_get(it, "loc"), &cur);
		loc_track(json_object_get(json_object_get(it, "range"), "begin"), &cur);
		mine = cur;
		node_track(it, &cur, 0);
		if (!k || strcmp(k, "FunctionDecl") != 0 ||
		    json_is_true(json_object_get(it, "isImplicit")) || !is_user_file(mine))
			continue;
		rc = fn_add(q, x, it);
		if (rc)
			break;
	}
	json_decref(root);
	return rc;
}

/* The path as the query names it, relative to the query file's directory or the working
 * directory: the first that exists, into out. */
static void resolve_path(const char *path, const char *qname, char *out, size_t outsz)
{
	snprintf(out, outsz, "%s", path);
	if (path[0] == '/' || !qname || !strchr(qname, '/'))
		return;
	{
		char *dup = strdup(qname);
		char cand[4096];
		struct stat st;

		if (!dup)
			return;
		snprintf(cand, sizeof(cand), "%s/%s", dirname(dup), path);
		free(dup);
		if (stat(cand, &st) == 0)
			snprintf(out, outsz, "%s", cand);
	}
}

/* clang's messages about the file, in the user's terms: its name instead of the temporary
 * copy's, without the lines about the wrapper that includes it. */
static void clang_msgs(const char *in, const char *name, char *out, size_t outsz)
{
	size_t len = 0;
	int skip = 0; /* the quoted line and caret of a message about the wrapper */

	out[0] = 0;
	while (*in && len + 1 < outsz) {
		size_t n = strcspn(in, "\n");

		if (strncmp(in, "wrap.c:", 7) == 0)
			skip = 3;
		if (skip > 0) {
			skip--;
		} else if (strncmp(in, "In file included from wrap.c", 28) != 0) {
			const char *l = in;

			if (!strncmp(l, "./user.bpf.c", 12)) {
				len += (size_t)snprintf(out + len, outsz - len, "%s", name);
				l += 12;
			}
			if (len < outsz)
				len += (size_t)snprintf(out + len, outsz - len, "%.*s\n",
							(int)(n - (size_t)(l - in)), l);
		}
		in += n + (in[n] == '\n');
	}
	if (len >= outsz)
		len = outsz - 1;
	while (len > 0 && out[len - 1] == '\n')
		out[--len] = 0;
}

int ext_load(struct ast_query *q, struct diag_list *dl)
{
	char tmpl[] = "/tmp/weft-ext-XXXXXX", path[4200], file[4096], why[512];
	char *data = NULL, *json = NULL, *errbuf = NULL;
	size_t len = 0, jlen = 0;
	struct ext_file *x;
	struct diag *d;
	int rc;

	if (!q->using_path)
		return 0;
	resolve_path(q->using_path, dl->name, file, sizeof(file));
	rc = weft_file_read(file, EXT_MAX_FILE, &data, &len, why, sizeof(why));
	if (rc) {
		d = diag_error(dl, DIAG_E_EXT_FILE, q->using_loc, "cannot read extension '%s': %s",
			       q->using_path, why[0] ? why : weft_file_strerror(rc));
		diag_fix(d, "the path is relative to the query's file, else to the working "
			    "directory; the file holds BPF C functions (docs/language.md, "
			    "Extensions)");
		return -EINVAL;
	}
	x = arena_alloc(q->arena, sizeof(*x));
	if (x)
		x->fns = arena_alloc(q->arena, EXT_MAX_FNS * sizeof(*x->fns));
	if (!x || !x->fns || !(x->src = arena_strndup(q->arena, data, len)) ||
	    !(x->path = arena_strdup(q->arena, file))) {
		free(data);
		return -ENOMEM;
	}
	if (strlen(x->src) != len) {
		free(data);
		diag_error(dl, DIAG_E_EXT_FILE, q->using_loc,
			   "extension '%s' holds a NUL byte: not a C source file", q->using_path);
		return -EINVAL;
	}
	if (!mkdtemp(tmpl)) {
		free(data);
		return -errno;
	}
	for (const struct kernel_embed_file *f = kernel_embed_files; f->name && !rc; f++) {
		snprintf(path, sizeof(path), "%s/%s", tmpl, f->name);
		rc = write_all(path, f->data, f->len);
	}
	snprintf(path, sizeof(path), "%s/user.bpf.c", tmpl);
	if (!rc)
		rc = write_all(path, data, len);
	snprintf(path, sizeof(path), "%s/wrap.c", tmpl);
	if (!rc)
		rc = write_all(path, "#include \"weft.bpf.h\"\n#include \"user.bpf.c\"\n", 44);
	free(data);
	errbuf = malloc(EXT_ERR_MAX);
	if (!rc && !errbuf)
		rc = -ENOMEM;
	if (!rc) {
		rc = run_dump(tmpl, &json, &jlen, errbuf, EXT_ERR_MAX);
		if (rc == -EINVAL || rc == -ENOENT) {
			d = diag_error(dl, DIAG_E_EXT_PARSE, q->using_loc,
				       "clang cannot compile extension '%s'", q->using_path);
			if (rc == -EINVAL) {
				char *msgs = malloc(EXT_ERR_MAX);

				if (msgs)
					clang_msgs(errbuf, q->using_path, msgs, EXT_ERR_MAX);
				diag_fix(d, "%s", msgs && msgs[0] ? msgs : errbuf);
				free(msgs);
			} else {
				diag_fix(d, "%s", errbuf);
			}
			rc = -EINVAL;
		} else if (!rc) {
			why[0] = 0;
			rc = read_fns(q, x, json, jlen, why, sizeof(why));
			if (rc == -EINVAL)
				diag_error(dl, DIAG_E_EXT_PARSE, q->using_loc, "extension '%s': %s",
					   q->using_path, why);
		}
	}
	free(json);
	free(errbuf);
	rm_dir(tmpl);
	if (rc)
		return rc;
	q->ext = x;
	return 0;
}

const struct ext_fn *ext_find(const struct ext_file *x, const char *name, int *idx)
{
	for (int i = 0; x && i < x->nfns; i++)
		if (strcmp(x->fns[i].name, name) == 0) {
			if (idx)
				*idx = i;
			return &x->fns[i];
		}
	return NULL;
}
