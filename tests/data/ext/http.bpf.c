// SPDX-License-Identifier: Apache-2.0
/*
 * An extension for `using` (tests/runtime/test_run_ext.c, docs/language.md): functions that
 * parse an HTTP request line in the traced process's memory.  weft.bpf.h is included before
 * this file, so the kernel types and helpers need no include.
 */

/* 1 GET, 2 POST, 3 PUT, 4 DELETE, 0 anything else or an unreadable buffer. */
static __always_inline __u32 http_method(const char *buf)
{
	char m[8] = {};

	if (bpf_probe_read_user(m, sizeof(m) - 1, buf))
		return 0;
	if (m[0] == 'G' && m[1] == 'E' && m[2] == 'T' && m[3] == ' ')
		return 1;
	if (m[0] == 'P' && m[1] == 'O' && m[2] == 'S' && m[3] == 'T' && m[4] == ' ')
		return 2;
	if (m[0] == 'P' && m[1] == 'U' && m[2] == 'T' && m[3] == ' ')
		return 3;
	if (m[0] == 'D' && m[1] == 'E' && m[2] == 'L')
		return 4;
	return 0;
}

/* The number after "/item/" in the line's path, or -1: digits read one by one, bounded. */
static __always_inline __s64 http_item(const char *buf, __u64 len)
{
	char b[64] = {};
	__s64 v = 0;
	int i, start = -1;

	if (len > sizeof(b) - 1)
		len = sizeof(b) - 1;
	if (bpf_probe_read_user(b, sizeof(b) - 1, buf))
		return -1;
	for (i = 0; i < 16; i++)
		if (b[i] == '/' && b[i + 1] == 'i' && b[i + 2] == 't' && b[i + 3] == 'e' &&
		    b[i + 4] == 'm' && b[i + 5] == '/') {
			start = i + 6;
			break;
		}
	if (start < 0)
		return -1;
	for (i = 0; i < 20; i++) {
		char c = b[(start + i) & 63];

		if (c < '0' || c > '9')
			break;
		v = v * 10 + (c - '0');
	}
	return i ? v : -1;
}

/* Not callable from a query: a struct parameter. */
struct pair {
	int a, b;
};
static __always_inline int pair_sum(struct pair p)
{
	return p.a + p.b;
}
