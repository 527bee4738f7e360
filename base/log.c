// SPDX-License-Identifier: Apache-2.0
/*
 * The program-wide log: a level and one sink.  Messages longer than the local buffer are
 * truncated rather than allocated, so logging works when memory is short.
 */
#include <stdio.h>
#include "base/log.h"

static enum weft_log_level cur_level = WEFT_LOG_WARN;
static weft_log_fn cur_sink;

void weft_log_set_level(enum weft_log_level level)
{
	cur_level = level;
}

enum weft_log_level weft_log_get_level(void)
{
	return cur_level;
}

void weft_log_set_sink(weft_log_fn fn)
{
	cur_sink = fn;
}

void weft_vlog(enum weft_log_level level, const char *fmt, va_list ap)
{
	static const char *const names[] = { "error", "warning", "info", "debug" };
	char buf[2048];

	if (level > cur_level)
		return;
	vsnprintf(buf, sizeof(buf), fmt, ap);
	if (cur_sink) {
		cur_sink(level, buf);
		return;
	}
	fprintf(stderr, "weft: %s: %s\n", names[level], buf);
}

void weft_log(enum weft_log_level level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	weft_vlog(level, fmt, ap);
	va_end(ap);
}
