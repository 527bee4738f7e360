// SPDX-License-Identifier: Apache-2.0
/*
 * Duration and size units (base/units.h): one table, one digit reader.  The digits are read
 * by hand rather than by strtoull, which takes a sign and leading space and saturates; here
 * every digit is checked against overflow, and so is the scaling.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include "base/units.h"

static const struct units_unit units_table[] = {
	{ "ns", UNITS_DURATION, 1ULL },
	{ "us", UNITS_DURATION, 1000ULL },
	{ "ms", UNITS_DURATION, 1000000ULL },
	{ "s", UNITS_DURATION, UNITS_NS_PER_SEC },
	{ "m", UNITS_DURATION, 60ULL * UNITS_NS_PER_SEC },
	{ "h", UNITS_DURATION, 3600ULL * UNITS_NS_PER_SEC },
	{ "B", UNITS_SIZE, 1ULL },
	{ "KiB", UNITS_SIZE, 1ULL << 10 },
	{ "MiB", UNITS_SIZE, 1ULL << 20 },
	{ "GiB", UNITS_SIZE, 1ULL << 30 },
	{ "TiB", UNITS_SIZE, 1ULL << 40 },
};

/* Days, for command-line durations only (retention: --max-age 7d); not a unit of the query
 * language, whose units are units_table's. */
static const struct units_unit units_days[] = {
	{ "d", UNITS_DURATION, 86400ULL * UNITS_NS_PER_SEC },
};

/* The short size forms of command-line options only. */
static const struct units_unit units_short[] = {
	{ "K", UNITS_SIZE, 1ULL << 10 }, { "k", UNITS_SIZE, 1ULL << 10 },
	{ "M", UNITS_SIZE, 1ULL << 20 }, { "m", UNITS_SIZE, 1ULL << 20 },
	{ "G", UNITS_SIZE, 1ULL << 30 }, { "g", UNITS_SIZE, 1ULL << 30 },
	{ "T", UNITS_SIZE, 1ULL << 40 }, { "t", UNITS_SIZE, 1ULL << 40 },
};

#define NUNITS(a) (sizeof(a) / sizeof((a)[0]))

static const struct units_unit *units_in(const struct units_unit *t, size_t n, const char *s,
					 size_t len)
{
	for (size_t i = 0; i < n; i++)
		if (strlen(t[i].name) == len && memcmp(t[i].name, s, len) == 0)
			return &t[i];
	return NULL;
}

const struct units_unit *units_find(const char *s, size_t len)
{
	return units_in(units_table, NUNITS(units_table), s, len);
}

/* The leading decimal digits of s into *v; *end after them.  -EINVAL without a digit,
 * -ERANGE beyond UINT64_MAX. */
static int units_digits(const char *s, uint64_t *v, const char **end)
{
	uint64_t x = 0;
	const char *p = s;

	if (!s || *s < '0' || *s > '9')
		return -EINVAL;
	for (; *p >= '0' && *p <= '9'; p++) {
		unsigned d = (unsigned)(*p - '0');

		if (x > (UINT64_MAX - d) / 10)
			return -ERANGE;
		x = x * 10 + d;
	}
	*v = x;
	*end = p;
	return 0;
}

static int units_scale(uint64_t v, uint64_t scale, uint64_t *out)
{
	if (scale && v > UINT64_MAX / scale)
		return -ERANGE;
	*out = v * scale;
	return 0;
}

int units_size_parse(const char *s, uint64_t *bytes)
{
	const struct units_unit *u;
	const char *end;
	uint64_t v;
	int rc = units_digits(s, &v, &end);

	if (rc)
		return rc;
	if (!*end)
		return units_scale(v, 1, bytes);
	u = units_find(end, strlen(end));
	if (!u || u->kind != UNITS_SIZE) /* "m" is minutes, but 16m of a size is 16MiB */
		u = units_in(units_short, NUNITS(units_short), end, strlen(end));
	if (!u)
		return -EINVAL;
	return units_scale(v, u->scale, bytes);
}

int units_duration_parse(const char *s, uint64_t bare_ns, uint64_t *ns)
{
	const struct units_unit *u;
	const char *end;
	uint64_t v;
	int rc = units_digits(s, &v, &end);

	if (rc)
		return rc;
	if (!*end)
		return bare_ns ? units_scale(v, bare_ns, ns) : -EINVAL;
	u = units_find(end, strlen(end));
	if (!u)
		u = units_in(units_days, NUNITS(units_days), end, strlen(end));
	if (!u || u->kind != UNITS_DURATION)
		return -EINVAL;
	return units_scale(v, u->scale, ns);
}

/* v in the largest unit of table t (kind k) or of extra (NULL: none) that divides it whole. */
static const char *units_format(uint64_t v, enum units_kind k, const struct units_unit *extra,
				char *buf, size_t sz)
{
	const struct units_unit *best = NULL;

	for (size_t i = 0; i <= NUNITS(units_table); i++) {
		const struct units_unit *u = i < NUNITS(units_table) ? &units_table[i] : extra;

		if (u && u->kind == k && v >= u->scale && v % u->scale == 0 &&
		    (!best || u->scale > best->scale))
			best = u;
	}
	if (!best) /* 0: in the smallest unit */
		snprintf(buf, sz, "0%s", k == UNITS_DURATION ? "ns" : "B");
	else
		snprintf(buf, sz, "%llu%s", (unsigned long long)(v / best->scale), best->name);
	return buf;
}

const char *units_duration_format(uint64_t ns, char *buf, size_t sz)
{
	return units_format(ns, UNITS_DURATION, &units_days[0], buf, sz);
}

const char *units_size_format(uint64_t bytes, char *buf, size_t sz)
{
	return units_format(bytes, UNITS_SIZE, NULL, buf, sz);
}
