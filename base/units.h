/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Units of durations and sizes: the one table of their names and scales, which the query
 * language's lexer (compiler/lexer.c) and every command-line option that takes a duration or
 * a size (weft run --ringbuf-size, weft agent --spool-bytes, weft aggregator --lateness,
 * --timeout, the profile: probe's period, ...) read, so "10ms" or "64MiB" means the same
 * wherever it is written.
 *
 *   durations   ns us ms s m h             (1, 10^3, 10^6, 10^9, 60 * 10^9, 3600 * 10^9 ns;
 *                                           command lines also d, 86400 * 10^9 ns)
 *   sizes       B KiB MiB GiB TiB           (binary: 1, 2^10, 2^20, 2^30, 2^40 bytes)
 *
 * Command-line sizes also take the short binary forms K M G T (k m g t), which options have
 * always taken (64K = 64KiB); the query language refuses them (docs/language.md: a silent
 * factor of 1.024 is worse than an error).  The parsers here take a whole number of units,
 * nothing else: no sign, no space, no fraction; a value beyond 2^64 - 1 (in the digits or
 * once scaled) is -ERANGE, never wrapped.
 */
#ifndef WEFT_BASE_UNITS_H
#define WEFT_BASE_UNITS_H
#include <stddef.h>
#include <stdint.h>

#define UNITS_NS_PER_SEC 1000000000ULL

enum units_kind { UNITS_DURATION, UNITS_SIZE };

struct units_unit {
	const char *name;
	enum units_kind kind;
	uint64_t scale; /* nanoseconds or bytes */
};

/* The unit named s[0, len) exactly (case matters: "m" is minutes), or NULL. */
const struct units_unit *units_find(const char *s, size_t len);

/* "64MiB", "65536", "64K" -> bytes.  0, -EINVAL (malformed, unknown unit) or -ERANGE. */
int units_size_parse(const char *s, uint64_t *bytes);

/* "500ms", "2s", "7d" (days: command lines only, not the query language) -> nanoseconds.
 * A bare number counts in bare_ns units ("3" with bare_ns
 * 10^9 is 3 s); bare_ns 0: a unit is required.  0, -EINVAL or -ERANGE. */
int units_duration_parse(const char *s, uint64_t bare_ns, uint64_t *ns);

/* The other way, as an option would take it back: the value in the largest unit that divides
 * it whole ("7d", "12h", "90s", "1500ms"; "20GiB", "500MiB", "1000B"), into buf; returns buf.
 * units_duration_parse() and units_size_parse() read it back to the same value. */
const char *units_duration_format(uint64_t ns, char *buf, size_t sz);
const char *units_size_format(uint64_t bytes, char *buf, size_t sz);

#endif
