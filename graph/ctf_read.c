// SPDX-License-Identifier: Apache-2.0
/*
 * babeltrace2 CTF traces read (graph/ctf_read.h): trace directories found, the component
 * graph run into a per-message callback, field helpers, the error cause.  Everything here is
 * what graph/import_ctf.c and vm/ctf.c did alike; what an event means, and what a reader says
 * when something fails, is theirs.
 */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/text.h"
#include "graph/ctf_read.h"

/* ------------------------------------------------------------------ finding the traces */

void ctf_read_dirs_free(struct ctf_read_dirs *d)
{
	for (size_t i = 0; i < d->n; i++)
		free(d->v[i]);
	free(d->v);
	memset(d, 0, sizeof(*d));
}

static int dirs_add(struct ctf_read_dirs *d, size_t max, const char *path)
{
	if (d->n >= max)
		return -E2BIG;
	if (d->n == d->cap) {
		size_t ncap = d->cap ? d->cap * 2 : 8;
		char **v = realloc(d->v, ncap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		d->v = v;
		d->cap = ncap;
	}
	d->v[d->n] = strdup(path);
	if (!d->v[d->n])
		return -ENOMEM;
	d->n++;
	return 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A trace directory's entries, which babeltrace2 opens as streams, are all regular files or
 * directories (a FIFO or a link to a device would block or never end): 0, or -EINVAL with
 * the entry's path in bad[] (if not NULL). */
static int dir_plain(const char *path, char *bad, size_t badsz)
{
	char sub[PATH_MAX];
	struct stat st;
	struct dirent *de;
	DIR *dir = opendir(path);
	int ret = 0;

	if (!dir)
		return -errno;
	while (ret == 0 && (de = readdir(dir))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (snprintf(sub, sizeof(sub), "%s/%s", path, de->d_name) >= (int)sizeof(sub) ||
		    stat(sub, &st) != 0 || !(S_ISREG(st.st_mode) || S_ISDIR(st.st_mode))) {
			if (bad)
				snprintf(bad, badsz, "%s", sub);
			ret = -EINVAL;
		}
	}
	closedir(dir);
	return ret;
}

static int dirs_find(const char *path, int depth, size_t max, struct ctf_read_dirs *d, char *bad,
		     size_t badsz)
{
	char sub[PATH_MAX];
	struct stat st;
	struct dirent *de;
	DIR *dir;
	int ret = 0;

	if (snprintf(sub, sizeof(sub), "%s/metadata", path) >= (int)sizeof(sub))
		return -ENAMETOOLONG;
	if (stat(sub, &st) == 0 && S_ISREG(st.st_mode)) {
		ret = dir_plain(path, bad, badsz);
		return ret ? ret : dirs_add(d, max, path);
	}
	if (depth >= CTF_READ_DEPTH)
		return 0;
	dir = opendir(path);
	if (!dir)
		return depth == 0 ? -errno : 0;
	while (ret == 0 && (de = readdir(dir))) {
		if (de->d_name[0] == '.')
			continue;
		if (snprintf(sub, sizeof(sub), "%s/%s", path, de->d_name) >= (int)sizeof(sub))
			continue;
		if (lstat(sub, &st) != 0 || !S_ISDIR(st.st_mode))
			continue;
		ret = dirs_find(sub, depth + 1, max, d, bad, badsz);
	}
	closedir(dir);
	return ret;
}

int ctf_read_find(const char *path, size_t max, struct ctf_read_dirs *d, char *bad, size_t badsz)
{
	int ret = dirs_find(path, 0, max, d, bad, badsz);

	/* readdir()'s order is the file system's own: sorted, the traces get their sources
	 * (src0, src1, ...) in the same order wherever they are read */
	if (ret == 0 && d->n > 1)
		qsort(d->v, d->n, sizeof(d->v[0]), cmp_str);
	return ret;
}

/* ------------------------------------------------------------------ reading fields */

bool ctf_read_is(const bt_field *f, bt_field_class_type type)
{
	return f && bt_field_class_type_is(bt_field_get_class_type(f), type);
}

const bt_field *ctf_read_member(const bt_field *s, const char *name)
{
	if (!ctf_read_is(s, BT_FIELD_CLASS_TYPE_STRUCTURE))
		return NULL;
	return bt_field_structure_borrow_member_field_by_name_const(s, name);
}

bool ctf_read_int(const bt_field *f, bool wrap, int64_t *v)
{
	if (ctf_read_is(f, BT_FIELD_CLASS_TYPE_SIGNED_INTEGER)) {
		*v = bt_field_integer_signed_get_value(f);
		return true;
	}
	if (ctf_read_is(f, BT_FIELD_CLASS_TYPE_UNSIGNED_INTEGER)) {
		uint64_t u = bt_field_integer_unsigned_get_value(f);

		if (u > INT64_MAX && !wrap)
			return false;
		*v = (int64_t)u;
		return true;
	}
	return false;
}

json_t *ctf_read_text(const bt_field *f, size_t max, bool no_ctl)
{
	const char *s = bt_field_string_get_value(f);
	size_t len = bt_field_string_get_length(f);
	json_t *j;
	char *c;

	if (len > max)
		len = max;
	if (!no_ctl && text_utf8_valid(s, len, NULL))
		return json_stringn(s, len);
	c = malloc(len + 1);
	if (!c)
		return NULL;
	for (size_t i = 0; i < len;) {
		size_t k = text_utf8_seq(s + i, len - i);

		if (!k || (no_ctl && k == 1 && (unsigned char)s[i] < 0x20)) {
			c[i++] = '?';
		} else {
			memcpy(c + i, s + i, k);
			i += k;
		}
	}
	j = json_stringn(c, len);
	free(c);
	return j;
}

/* ------------------------------------------------------------------ babeltrace2's error */

/* Components log nothing (BT_LOGGING_LEVEL_NONE: a library does not write on stderr), so the
 * causes that only a log line would give are not there. */
void ctf_read_cause(char *buf, size_t size)
{
	const bt_error *e;

	buf[0] = '\0';
	if (weft_bt_load(buf, size)) /* the library itself is missing: that is the cause */
		return;
	e = bt_current_thread_take_error();
	if (!e)
		return;
	if (bt_error_get_cause_count(e)) {
		const char *m = bt_error_cause_get_message(bt_error_borrow_cause_by_index(e, 0));

		snprintf(buf, size, "%s", m ? m : "");
	}
	bt_error_release(e);
}

/* ------------------------------------------------------------------ the graph of components */

/*
 * babeltrace2's plugins, found and loaded (dlopen) on first use and kept: finding them scans
 * the plugin directory and loads every plugin in it, which costs more than reading a small
 * trace.  A reader that loads them before it forks (graph/import_ctf.c) leaves them to its
 * children, each of which would load them again otherwise.
 */
static pthread_mutex_t ctf_lock = PTHREAD_MUTEX_INITIALIZER;
static const bt_plugin *ctf_plugin, *utils_plugin;

void ctf_read_lock(void)
{
	pthread_mutex_lock(&ctf_lock);
}

void ctf_read_unlock(void)
{
	pthread_mutex_unlock(&ctf_lock);
}

bool ctf_read_plugins(void)
{
	if (weft_bt_load(NULL, 0))
		return false;
	if (!ctf_plugin && bt_plugin_find("ctf", BT_FALSE, BT_FALSE, BT_TRUE, BT_TRUE, BT_TRUE,
					  &ctf_plugin) != BT_PLUGIN_FIND_STATUS_OK)
		ctf_plugin = NULL;
	if (!utils_plugin && bt_plugin_find("utils", BT_FALSE, BT_FALSE, BT_TRUE, BT_TRUE, BT_TRUE,
					    &utils_plugin) != BT_PLUGIN_FIND_STATUS_OK)
		utils_plugin = NULL;
	return ctf_plugin && utils_plugin;
}

/* The simple sink's state: the reader's callback, and whether it stopped the reading. */
struct sink {
	ctf_read_fn fn;
	void *arg;
	bool stopped;
};

static bt_graph_simple_sink_component_consume_func_status consume(bt_message_iterator *it,
								  void *data)
{
	struct sink *sk = data;
	bt_message_array_const msgs;
	uint64_t n = 0;

	switch (bt_message_iterator_next(it, &msgs, &n)) {
	case BT_MESSAGE_ITERATOR_NEXT_STATUS_END:
		return BT_GRAPH_SIMPLE_SINK_COMPONENT_CONSUME_FUNC_STATUS_END;
	case BT_MESSAGE_ITERATOR_NEXT_STATUS_AGAIN:
		return BT_GRAPH_SIMPLE_SINK_COMPONENT_CONSUME_FUNC_STATUS_AGAIN;
	case BT_MESSAGE_ITERATOR_NEXT_STATUS_MEMORY_ERROR:
		return BT_GRAPH_SIMPLE_SINK_COMPONENT_CONSUME_FUNC_STATUS_MEMORY_ERROR;
	case BT_MESSAGE_ITERATOR_NEXT_STATUS_OK:
		break;
	default:
		return BT_GRAPH_SIMPLE_SINK_COMPONENT_CONSUME_FUNC_STATUS_ERROR;
	}
	/* every message of the batch is ours to release, read or not */
	for (uint64_t i = 0; i < n; i++) {
		if (!sk->stopped)
			sk->stopped = !sk->fn(msgs[i], sk->arg);
		bt_message_put_ref(msgs[i]);
	}
	return sk->stopped ? BT_GRAPH_SIMPLE_SINK_COMPONENT_CONSUME_FUNC_STATUS_ERROR :
			     BT_GRAPH_SIMPLE_SINK_COMPONENT_CONSUME_FUNC_STATUS_OK;
}

/* status, with babeltrace2's cause taken into the fault (and what, if given). */
static enum ctf_read_status fail(struct ctf_read_fault *fault, enum ctf_read_status status,
				 const char *what)
{
	snprintf(fault->what, sizeof(fault->what), "%s", what);
	ctf_read_cause(fault->cause, sizeof(fault->cause));
	return status;
}

enum ctf_read_status ctf_read_run(const struct ctf_read_dirs *dirs, ctf_read_fn fn, void *arg,
				  struct ctf_read_fault *fault)
{
	struct sink sk = { .fn = fn, .arg = arg };
	const bt_component_class_source *fs = NULL;
	const bt_component_class_filter *muxc = NULL;
	const bt_component_filter *mux;
	const bt_component_sink *sink;
	enum ctf_read_status ret = CTF_READ_OK;
	bt_graph *graph;
	uint64_t nin = 0;

	fault->what[0] = fault->cause[0] = '\0';
	if (weft_bt_load(NULL, 0)) /* no libbabeltrace2: nothing of it may be called */
		return fail(fault, CTF_READ_CLASSES, "");
	if (ctf_read_plugins()) {
		fs = bt_plugin_borrow_source_component_class_by_name_const(ctf_plugin, "fs");
		muxc = bt_plugin_borrow_filter_component_class_by_name_const(utils_plugin, "muxer");
	}
	graph = bt_graph_create(0);
	if (!fs || !muxc || !graph) {
		ret = fail(fault, CTF_READ_CLASSES, "");
		goto out;
	}
	if (bt_graph_add_filter_component(graph, muxc, "mux", NULL, BT_LOGGING_LEVEL_NONE, &mux) !=
	    BT_GRAPH_ADD_COMPONENT_STATUS_OK) {
		ret = fail(fault, CTF_READ_GRAPH, "cannot make a muxer");
		goto out;
	}
	for (size_t i = 0; i < dirs->n; i++) {
		const bt_component_source *src;
		bt_value *params = bt_value_map_create(), *inputs = NULL;
		bt_graph_add_component_status s = BT_GRAPH_ADD_COMPONENT_STATUS_MEMORY_ERROR;
		char name[32];

		if (params &&
		    bt_value_map_insert_empty_array_entry(params, "inputs", &inputs) ==
			    BT_VALUE_MAP_INSERT_ENTRY_STATUS_OK &&
		    bt_value_array_append_string_element(inputs, dirs->v[i]) ==
			    BT_VALUE_ARRAY_APPEND_ELEMENT_STATUS_OK) {
			snprintf(name, sizeof(name), "src%zu", i);
			s = bt_graph_add_source_component(graph, fs, name, params,
							  BT_LOGGING_LEVEL_NONE, &src);
		}
		bt_value_put_ref(params);
		if (s != BT_GRAPH_ADD_COMPONENT_STATUS_OK) {
			char what[sizeof(fault->what)];

			snprintf(what, sizeof(what), "babeltrace2 cannot read the CTF trace %s",
				 dirs->v[i]);
			ret = fail(fault, CTF_READ_TRACE, what);
			goto out;
		}
		for (uint64_t p = 0; p < bt_component_source_get_output_port_count(src); p++) {
			const bt_port_output *out =
				bt_component_source_borrow_output_port_by_index_const(src, p);
			const bt_port_input *in =
				bt_component_filter_borrow_input_port_by_index_const(mux, nin);

			if (!in || bt_graph_connect_ports(graph, out, in, NULL) !=
					   BT_GRAPH_CONNECT_PORTS_STATUS_OK) {
				ret = fail(fault, CTF_READ_GRAPH, "cannot connect a stream");
				goto out;
			}
			nin++;
		}
	}
	if (bt_graph_add_simple_sink_component(graph, "weft", NULL, consume, NULL, &sk, &sink) !=
		    BT_GRAPH_ADD_COMPONENT_STATUS_OK ||
	    bt_graph_connect_ports(graph,
				   bt_component_filter_borrow_output_port_by_name_const(mux, "out"),
				   bt_component_sink_borrow_input_port_by_index_const(sink, 0),
				   NULL) != BT_GRAPH_CONNECT_PORTS_STATUS_OK) {
		ret = fail(fault, CTF_READ_GRAPH, "cannot make the sink");
		goto out;
	}
	for (unsigned again = 0;;) {
		bt_graph_run_status s = bt_graph_run(graph);

		/* files never make a component wait; bounded all the same */
		if (s == BT_GRAPH_RUN_STATUS_AGAIN && ++again < 1000000)
			continue;
		if (s == BT_GRAPH_RUN_STATUS_OK)
			ret = CTF_READ_OK;
		else if (sk.stopped)
			ret = CTF_READ_STOPPED; /* babeltrace2's error says only that we stopped */
		else if (s == BT_GRAPH_RUN_STATUS_AGAIN)
			ret = fail(fault, CTF_READ_AGAIN, "");
		else
			ret = fail(fault,
				   s == BT_GRAPH_RUN_STATUS_MEMORY_ERROR ? CTF_READ_NOMEM :
									   CTF_READ_FAILED,
				   "");
		break;
	}
out:
	bt_graph_put_ref(graph);
	/* components finalized in a failed graph may append causes after we took the error:
	 * left pending, this thread's error would grow with every reading */
	bt_current_thread_clear_error();
	return ret;
}
