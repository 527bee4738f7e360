// SPDX-License-Identifier: Apache-2.0
/*
 * tracefs: where it is (mounting it when absent), the tracepoint formats it publishes and the
 * list of its events.  A format file is kernel text, not a stable ABI, so the parser accepts
 * what it understands (`field:TYPE NAME[N];  offset:O;  size:S;  signed:B;`) and skips
 * anything else rather than failing: a new kind of line must never break every query.
 * Fields named common_* (the shared record header) are left out; the codegen knows them.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>
#include "probes/probes.h"
#include "probes/provider.h"

static bool tracefs_is_mounted(const char *dir)
{
	char path[128];
	struct stat st;

	snprintf(path, sizeof(path), "%s/events", dir);
	return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

const char *tracefs_dir(void)
{
	static const char *dir;
	static bool tried;

	if (tried)
		return dir;
	tried = true;
	if (tracefs_is_mounted("/sys/kernel/tracing")) {
		dir = "/sys/kernel/tracing";
	} else if (mount("nodev", "/sys/kernel/tracing", "tracefs", 0, NULL) == 0 &&
		   tracefs_is_mounted("/sys/kernel/tracing")) {
		dir = "/sys/kernel/tracing";
	} else if (tracefs_is_mounted("/sys/kernel/debug/tracing")) {
		dir = "/sys/kernel/debug/tracing";
	}
	return dir;
}

/* A tracefs name is one path component: refuse anything that could walk elsewhere. */
static bool tracefs_name_ok(const char *s)
{
	return s && *s && !strchr(s, '/') && strcmp(s, ".") != 0 && strcmp(s, "..") != 0 &&
	       strlen(s) < PROBE_NAME_MAX;
}

static char *str_trim(char *s)
{
	char *e;

	while (*s == ' ' || *s == '\t')
		s++;
	e = s + strlen(s);
	while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\n'))
		*--e = '\0';
	return s;
}

static bool is_ident(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '_';
}

static enum field_kind field_classify(const char *type, const char *array, unsigned size)
{
	if (strncmp(type, "__data_loc", 10) == 0)
		return strstr(type, "char") ? FIELD_DATA_LOC : FIELD_ARRAY;
	if (strncmp(type, "__rel_loc", 9) == 0)
		return FIELD_ARRAY; /* offset relative to the field: not handled by the codegen */
	if (*array) {
		if (strcmp(type, "char") == 0 || strcmp(type, "const char") == 0 ||
		    strcmp(type, "signed char") == 0)
			return FIELD_CHARS;
		return FIELD_ARRAY;
	}
	if (strchr(type, '*'))
		return FIELD_PTR;
	if (size == 1 || size == 2 || size == 4 || size == 8)
		return FIELD_INT;
	return FIELD_ARRAY; /* a struct or an oversized integer by value */
}

/* Parses "\tfield:DECL;\toffset:O;\tsize:S;\tsigned:B;" into f; false to skip the line. */
static bool field_parse(char *line, struct probe_field *f)
{
	char *decl, *semi, *p, *name_end, *name;
	char array[32] = "";
	unsigned off, size, sgn;

	decl = strstr(line, "field:");
	if (!decl)
		return false;
	decl += 6;
	semi = strchr(decl, ';');
	if (!semi)
		return false;
	*semi = '\0';
	p = strstr(semi + 1, "offset:");
	if (!p || sscanf(p, "offset:%u;", &off) != 1)
		return false;
	p = strstr(semi + 1, "size:");
	if (!p || sscanf(p, "size:%u;", &size) != 1)
		return false;
	p = strstr(semi + 1, "signed:");
	if (!p || sscanf(p, "signed:%u;", &sgn) != 1)
		sgn = 0;
	if (off > UINT16_MAX || size > UINT16_MAX)
		return false;

	decl = str_trim(decl);
	name_end = decl + strlen(decl);
	/* an array suffix after the name: "comm[16]" */
	if (name_end > decl && name_end[-1] == ']') {
		char *lb = strrchr(decl, '[');

		if (!lb || (size_t)(name_end - lb) >= sizeof(array))
			return false;
		snprintf(array, sizeof(array), "%s", lb);
		name_end = lb;
	}
	name = name_end;
	while (name > decl && is_ident(name[-1]))
		name--;
	if (name == name_end || name == decl || (size_t)(name_end - name) >= sizeof(f->name))
		return false;

	memset(f, 0, sizeof(*f));
	memcpy(f->name, name, (size_t)(name_end - name));
	*name = '\0';
	decl = str_trim(decl);
	snprintf(f->ctype, sizeof(f->ctype), "%s%s", decl, array);
	f->kind = field_classify(decl, array, size);
	f->offset = (uint16_t)off;
	f->size = (uint16_t)size;
	f->is_signed = sgn != 0;
	return true;
}

/*
 * Where the compiler reads tracepoints' formats: $WEFT_TRACEFS (a directory laid out like
 * tracefs, DIR/events/CAT/EVENT/format: another kernel's, to compile for it, as $WEFT_BTF
 * is for its types) or this host's tracefs.
 */
static const char *formats_dir(void)
{
	const char *env = getenv("WEFT_TRACEFS");

	return env && *env ? env : tracefs_dir();
}

static int format_read(const char *dir, const char *category, const char *event,
		       struct probe_field **fields, int *nfields, int *id)
{
	struct probe_field *v = NULL;
	char path[512], line[1024];
	int n = 0, tp_id = -1, ret = 0;
	FILE *f;

	*fields = NULL;
	*nfields = 0;
	if (!dir)
		return -ENODEV;
	if (!tracefs_name_ok(category) || !tracefs_name_ok(event))
		return -EINVAL;
	snprintf(path, sizeof(path), "%s/events/%s/%s/format", dir, category, event);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	v = calloc(PROBE_MAX_FIELDS, sizeof(*v));
	if (!v) {
		ret = -ENOMEM;
		goto out_close;
	}
	while (fgets(line, sizeof(line), f)) {
		struct probe_field fld;

		if (strncmp(line, "ID:", 3) == 0) {
			tp_id = atoi(line + 3);
			continue;
		}
		if (strncmp(line, "print fmt:", 10) == 0)
			break;
		if (!field_parse(line, &fld) || strncmp(fld.name, "common_", 7) == 0)
			continue;
		if (n == PROBE_MAX_FIELDS)
			break; /* bounded: extra fields are not offered */
		v[n++] = fld;
	}
	if (tp_id < 0) {
		ret = -EPROTO; /* not a format file we understand */
		goto out_free;
	}
	*fields = v;
	*nfields = n;
	if (id)
		*id = tp_id;
	fclose(f);
	return 0;

out_free:
	free(v);
out_close:
	fclose(f);
	return ret;
}

int tracefs_format_read(const char *category, const char *event, struct probe_field **fields,
			int *nfields, int *id)
{
	return format_read(formats_dir(), category, event, fields, nfields, id);
}

int tracefs_format_read_host(const char *category, const char *event, struct probe_field **fields,
			     int *nfields, int *id)
{
	return format_read(tracefs_dir(), category, event, fields, nfields, id);
}

static bool dir_is_subdir(int dfd, const struct dirent *de)
{
	struct stat st;

	if (de->d_name[0] == '.')
		return false;
	if (de->d_type == DT_DIR)
		return true;
	if (de->d_type != DT_UNKNOWN)
		return false;
	return fstatat(dfd, de->d_name, &st, 0) == 0 && S_ISDIR(st.st_mode);
}

int tracefs_events_list(const char *cat_glob, const char *event_glob, struct strv *out)
{
	const char *dir = formats_dir();
	char path[512];
	struct dirent *ce, *ee;
	DIR *cd, *ed;
	int ret = 0;

	if (!dir)
		return -ENODEV;
	snprintf(path, sizeof(path), "%s/events", dir);
	cd = opendir(path);
	if (!cd)
		return -errno;
	while (!ret && (ce = readdir(cd))) {
		if (!dir_is_subdir(dirfd(cd), ce))
			continue;
		/* ftrace's own events (function, print...) cannot take a BPF program */
		if (strcmp(ce->d_name, "ftrace") == 0)
			continue;
		if (cat_glob && !probe_glob_match(cat_glob, ce->d_name))
			continue;
		snprintf(path, sizeof(path), "%s/events/%s", dir, ce->d_name);
		ed = opendir(path);
		if (!ed)
			continue;
		while (!ret && (ee = readdir(ed))) {
			char name[2 * 256 + 2];

			if (!dir_is_subdir(dirfd(ed), ee))
				continue;
			if (event_glob && !probe_glob_match(event_glob, ee->d_name))
				continue;
			snprintf(name, sizeof(name), "%s:%s", ce->d_name, ee->d_name);
			ret = strv_push(out, name);
		}
		closedir(ed);
	}
	closedir(cd);
	strv_sort(out);
	return ret;
}
