// SPDX-License-Identifier: Apache-2.0
/*
 * Reading weft's recorded event stream (vm/stream.h): one bounded line at a time, each parsed
 * with jansson and checked member by member before anything uses it.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "base/file.h"
#include "vm/stream.h"

struct vm_stream {
	FILE *f;
	char *name;
	char *line; /* VM_STREAM_LINE_MAX + 1 bytes */
	unsigned long lineno;
	int64_t last_time;
	json_t *cur; /* the current event's object */
};

void vm_err_set(struct vm_err *e, const char *tag, const char *fmt, ...)
{
	va_list ap;

	if (!e)
		return;
	e->tag = tag;
	va_start(ap, fmt);
	vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
	va_end(ap);
}

static struct vm_stream *stream_new(const char *name, FILE *f, struct vm_err *err)
{
	struct vm_stream *s = calloc(1, sizeof(*s));

	if (s) {
		s->name = strdup(name);
		s->line = malloc(VM_STREAM_LINE_MAX + 1);
	}
	if (!s || !s->name || !s->line) {
		if (s) {
			free(s->name);
			free(s->line);
		}
		free(s);
		if (f)
			fclose(f);
		vm_err_set(err, "E_VM_NOMEM", "%s: out of memory", name);
		return NULL;
	}
	s->f = f;
	s->last_time = -1;
	return s;
}

struct vm_stream *vm_stream_open(const char *path, struct vm_err *err)
{
	char why[160];
	int fd = weft_file_open(path, VM_STREAM_FILE_MAX, NULL, why, sizeof(why));
	FILE *f;

	if (fd < 0) {
		vm_err_set(err, "E_VM_FILE", "%s: %s", path, why);
		return NULL;
	}
	f = fdopen(fd, "r");
	if (!f) {
		vm_err_set(err, "E_VM_FILE", "%s: %s", path, strerror(errno));
		close(fd);
		return NULL;
	}
	return stream_new(path, f, err);
}

struct vm_stream *vm_stream_open_file(const char *name, FILE *f, struct vm_err *err)
{
	return stream_new(name, f, err);
}

struct vm_stream *vm_stream_open_mem(const char *name, const char *buf, size_t len,
				     struct vm_err *err)
{
	FILE *f = NULL;

	/* an empty buffer is an empty stream (fmemopen() refuses a size of 0) */
	if (len) {
		f = fmemopen((void *)buf, len, "r");
		if (!f) {
			vm_err_set(err, "E_VM_NOMEM", "%s: %s", name, strerror(errno));
			return NULL;
		}
	}
	return stream_new(name, f, err);
}

const char *vm_stream_name(const struct vm_stream *s)
{
	return s->name;
}

void vm_stream_close(struct vm_stream *s)
{
	if (!s)
		return;
	if (s->f)
		fclose(s->f);
	json_decref(s->cur);
	free(s->line);
	free(s->name);
	free(s);
}

int vm_stream_rewind(struct vm_stream *s, struct vm_err *err)
{
	if (s->f && fseek(s->f, 0, SEEK_SET) != 0) {
		vm_err_set(err, "E_VM_FILE", "%s: cannot read it twice: %s", s->name,
			   strerror(errno));
		return -1;
	}
	s->lineno = 0;
	s->last_time = -1;
	return 0;
}

/* One line into s->line without its newline: its length, -1 at the end, -2 if too long. */
static long read_line(struct vm_stream *s)
{
	long n = 0;
	int c;

	if (!s->f)
		return -1;
	while ((c = getc_unlocked(s->f)) != EOF && c != '\n') {
		if (n >= VM_STREAM_LINE_MAX) {
			while ((c = getc_unlocked(s->f)) != EOF && c != '\n')
				;
			return -2;
		}
		s->line[n++] = (char)c;
	}
	if (c == EOF && n == 0)
		return -1;
	s->line[n] = 0;
	return n;
}

static int member_int(struct vm_stream *s, json_t *o, const char *key, bool required, int64_t *out,
		      struct vm_err *err)
{
	json_t *v = json_object_get(o, key);

	if (!v) {
		if (!required) {
			*out = -1;
			return 0;
		}
		vm_err_set(err, "E_VM_FIELD",
			   "%s:%lu: no \"%s\" (each event needs time, cpu, name)", s->name,
			   s->lineno, key);
		return -1;
	}
	if (!json_is_integer(v) || json_integer_value(v) < 0) {
		vm_err_set(err, "E_VM_FIELD", "%s:%lu: \"%s\" must be an integer >= 0", s->name,
			   s->lineno, key);
		return -1;
	}
	*out = json_integer_value(v);
	return 0;
}

int vm_stream_next(struct vm_stream *s, struct vm_event *ev, struct vm_err *err)
{
	json_error_t jerr;
	json_t *o, *name, *fields;
	long n;

	json_decref(s->cur);
	s->cur = NULL;
	for (;;) {
		n = read_line(s);
		if (n == -1) {
			if (s->f && ferror(s->f)) {
				vm_err_set(err, "E_VM_FILE", "%s: read error", s->name);
				return -1;
			}
			return 0;
		}
		s->lineno++;
		if (n == -2) {
			vm_err_set(err, "E_VM_JSON", "%s:%lu: a line of more than %d bytes",
				   s->name, s->lineno, VM_STREAM_LINE_MAX);
			return -1;
		}
		if (memchr(s->line, 0, (size_t)n)) {
			vm_err_set(err, "E_VM_JSON", "%s:%lu: a NUL byte: not a text line", s->name,
				   s->lineno);
			return -1;
		}
		const char *p = s->line;

		while (*p == ' ' || *p == '\t' || *p == '\r')
			p++;
		if (*p && *p != '#')
			break;
	}
	o = json_loadb(s->line, (size_t)n, JSON_REJECT_DUPLICATES, &jerr);
	if (!o || !json_is_object(o)) {
		vm_err_set(err, "E_VM_JSON", "%s:%lu:%d: %s", s->name, s->lineno,
			   o ? 1 : jerr.column, o ? "not a JSON object" : jerr.text);
		json_decref(o);
		return -1;
	}
	s->cur = o;
	memset(ev, 0, sizeof(*ev));
	ev->line = s->lineno;
	if (member_int(s, o, "time", true, &ev->time, err) ||
	    member_int(s, o, "cpu", true, &ev->cpu, err) ||
	    member_int(s, o, "tid", false, &ev->tid, err) ||
	    member_int(s, o, "pid", false, &ev->pid, err))
		return -1;
	name = json_object_get(o, "name");
	if (!json_is_string(name) || json_string_length(name) == 0 ||
	    json_string_length(name) >= VM_NAME_MAX ||
	    strlen(json_string_value(name)) != json_string_length(name)) {
		vm_err_set(err, "E_VM_FIELD", "%s:%lu: \"name\" must be a string of 1 to %d bytes",
			   s->name, s->lineno, VM_NAME_MAX - 1);
		return -1;
	}
	memcpy(ev->name, json_string_value(name), json_string_length(name) + 1);
	fields = json_object_get(o, "fields");
	if (fields && !json_is_object(fields)) {
		vm_err_set(err, "E_VM_FIELD", "%s:%lu: \"fields\" must be an object", s->name,
			   s->lineno);
		return -1;
	}
	ev->fields = fields;
	if (ev->time < s->last_time) {
		vm_err_set(err, "E_VM_ORDER",
			   "%s:%lu: time %lld is before the previous event's %lld: the stream must "
			   "be sorted by time (it is refused, not re-sorted)",
			   s->name, s->lineno, (long long)ev->time, (long long)s->last_time);
		return -1;
	}
	s->last_time = ev->time;
	return 1;
}

int vm_event_s64(const struct vm_event *ev, const char *field, int64_t *out)
{
	json_t *v = ev->fields ? json_object_get(ev->fields, field) : NULL;

	if (!v)
		return -ENOENT;
	if (json_is_boolean(v)) {
		*out = json_is_true(v);
		return 0;
	}
	if (!json_is_integer(v))
		return -EINVAL;
	*out = json_integer_value(v);
	return 0;
}

int vm_event_u64(const struct vm_event *ev, const char *field, uint64_t *out)
{
	int64_t v;
	int rc = vm_event_s64(ev, field, &v);

	if (rc)
		return rc;
	if (v < 0)
		return -EINVAL;
	*out = (uint64_t)v;
	return 0;
}

const char *vm_event_str(const struct vm_event *ev, const char *field)
{
	json_t *v = ev->fields ? json_object_get(ev->fields, field) : NULL;

	return json_is_string(v) ? json_string_value(v) : NULL;
}
