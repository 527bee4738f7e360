/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One log callback for the whole program.  Libraries below tools/ log through weft_log();
 * the weft binary installs the sink and the level (-v).  libbpf's own log is forwarded here
 * by the agent.  Default sink: stderr, level WARN.
 */
#ifndef WEFT_LOG_H
#define WEFT_LOG_H
#include <stdarg.h>

enum weft_log_level { WEFT_LOG_ERROR, WEFT_LOG_WARN, WEFT_LOG_INFO, WEFT_LOG_DEBUG };

typedef void (*weft_log_fn)(enum weft_log_level level, const char *msg);

void weft_log_set_level(enum weft_log_level level);
enum weft_log_level weft_log_get_level(void);
void weft_log_set_sink(weft_log_fn fn);
void weft_log(enum weft_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void weft_vlog(enum weft_log_level level, const char *fmt, va_list ap);

#define log_err(...) weft_log(WEFT_LOG_ERROR, __VA_ARGS__)
#define log_warn(...) weft_log(WEFT_LOG_WARN, __VA_ARGS__)
#define log_info(...) weft_log(WEFT_LOG_INFO, __VA_ARGS__)
#define log_debug(...) weft_log(WEFT_LOG_DEBUG, __VA_ARGS__)

#endif
