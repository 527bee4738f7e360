/* SPDX-License-Identifier: Apache-2.0 */
/*
 * BPF-side helpers of ntop(), sockport() and join() (docs/language.md#addresses-and-argv),
 * included by weft.bpf.h.
 *
 * ntop() writes an address value (weft_abi.h: WEFT_INET_SIZE bytes, the family then the
 * address) that the agent turns into text; the kernel never formats text, so a group keyed by
 * an address costs 24 bytes of key and no formatting per event.  The address comes from a
 * u8[4]/u8[16] tracepoint field (read from the record), an IPv4 integer in network order,
 * a struct in6_addr in kernel memory, or a sockaddr in user or kernel memory, whose family
 * says where its address and port are (sockaddr_in: port at 2, address at 4; sockaddr_in6:
 * port at 2, address at 8).  A read that faults leaves the value zero (family 0).
 *
 * join() reads an argv: at most WEFT_JOIN_MAX_ARGS pointers, each string with
 * bpf_probe_read_user_str() after the last, separated by SEP.  The buffer it is given has
 * twice the string's room: each read, at an offset below WEFT_JOIN_MAX_BYTES, of a constant
 * WEFT_JOIN_MAX_BYTES bytes, is then in bounds as the verifier can see; what lands past the
 * room is cut off by a NUL at its end.  An element that cannot be read (a fault) ends the
 * string there and is counted as a string fault.  A cut argv (more elements, or a last string that
 * did not fit) ends with WEFT_JOIN_MORE and is counted as a truncated string.
 *
 * Limits: bounded loops of WEFT_JOIN_MAX_ARGS and WEFT_JOIN_MAX_SEP iterations; no kernel
 * string formatting.
 */
#ifndef WEFT_NET_BPF_H
#define WEFT_NET_BPF_H

/* x & (WEFT_JOIN_MAX_BYTES - 1) where clang must keep the mask (it would drop it where it
 * proves it a no-op, and the verifier would not see the bound). */
#define WEFT_JOIN_BOUND(x)                               \
	({                                               \
		__u64 _x = (x);                          \
		asm volatile("" : "+r"(_x));             \
		(__u32)(_x & (WEFT_JOIN_MAX_BYTES - 1)); \
	})

/* `n` address bytes at src (kernel memory: a tracepoint record, a kernel struct). */
WEFT_INLINE void weft_inet_raw(char *dst, __u16 family, const void *src, __u32 n)
{
	if (bpf_probe_read_kernel(dst + WEFT_INET_ADDR, n & 31, src) < 0)
		return;
	*(__u16 *)dst = family;
}

/* An IPv4 address held in an integer in network order (the low 32 bits, as in memory). */
WEFT_INLINE void weft_inet_v4(char *dst, __s64 v)
{
	*(__u32 *)(dst + WEFT_INET_ADDR) = (__u32)v;
	*(__u16 *)dst = WEFT_AF_INET;
}

WEFT_INLINE long weft_read_mem(void *dst, __u32 n, const void *src, int user)
{
	return user ? bpf_probe_read_user(dst, n, src) : bpf_probe_read_kernel(dst, n, src);
}

/* A struct sockaddr at sa (user memory if user): AF_INET and AF_INET6 give their address;
 * another family is kept with no address (the agent shows it as such). */
WEFT_INLINE void weft_inet_sockaddr(char *dst, const void *sa, int user)
{
	__u16 family = 0;

	if (!sa || weft_read_mem(&family, sizeof(family), sa, user) < 0)
		return;
	if (family == WEFT_AF_INET) {
		if (weft_read_mem(dst + WEFT_INET_ADDR, 4, (const char *)sa + 4, user) < 0)
			return;
	} else if (family == WEFT_AF_INET6) {
		if (weft_read_mem(dst + WEFT_INET_ADDR, 16, (const char *)sa + 8, user) < 0)
			return;
	}
	*(__u16 *)dst = family;
}

/* The port of a sockaddr_in/sockaddr_in6 in host order; 0 for another family or a fault. */
WEFT_INLINE __s64 weft_sockport(const void *sa, int user)
{
	__u16 family = 0, port = 0;

	if (!sa || weft_read_mem(&family, sizeof(family), sa, user) < 0)
		return 0;
	if (family != WEFT_AF_INET && family != WEFT_AF_INET6)
		return 0;
	if (weft_read_mem(&port, sizeof(port), (const char *)sa + 2, user) < 0)
		return 0;
	return (__s64)__builtin_bswap16(port);
}

/*
 * join(): argv (user memory if user) into dst, a buffer of 2 * size bytes (see above), as at
 * most size - 1 bytes and a NUL; size is at most WEFT_JOIN_MAX_BYTES, a power of two; sep is a
 * literal of seplen (< WEFT_JOIN_MAX_SEP + 1) bytes.
 */
WEFT_INLINE void weft_join_argv(__u32 e, char *dst, __u32 size, const void *argv, int user,
				const char *sep, __u32 seplen)
{
	__u32 off = 0;
	int cut = 0, i;

	dst[0] = 0;
	if (!argv)
		return;
	for (i = 0; i < WEFT_JOIN_MAX_ARGS; i++) {
		const char *p = 0;
		long n;

		if (weft_read_mem(&p, sizeof(p), (const char *const *)argv + i, user) < 0 || !p)
			break;
		if (i) {
			if (off + seplen + 1 >= size) {
				cut = 1;
				break;
			}
			off = WEFT_JOIN_BOUND(off); /* a no-op the verifier needs */
			for (__u32 j = 0; j < WEFT_JOIN_MAX_SEP && j < seplen; j++)
				dst[off + j] = sep[j];
			off += seplen;
		}
		if (off >= size - 1) {
			cut = 1;
			break;
		}
		/* a constant size at an offset below WEFT_JOIN_MAX_BYTES: in bounds of the
		 * buffer's 2 * WEFT_JOIN_MAX_BYTES, as the verifier can see */
		off = WEFT_JOIN_BOUND(off);
		n = user ? bpf_probe_read_user_str(dst + off, WEFT_JOIN_MAX_BYTES, p) :
			   bpf_probe_read_kernel_str(dst + off, WEFT_JOIN_MAX_BYTES, p);
		if (n <= 0) { /* a fault: the string ends here, and the fault is counted */
			dst[off] = 0;
			weft_drop(e, WEFT_DROP_STR_FAULT);
			break;
		}
		if ((__u64)off + (__u64)n > size) { /* its NUL past the room: cut at size - 1 */
			off = size - 1;
			dst[(size - 1) & (WEFT_JOIN_MAX_BYTES - 1)] = 0;
			cut = 1;
			break;
		}
		off += (__u32)n - 1; /* past the string, onto its NUL */
	}
	if (!cut && i == WEFT_JOIN_MAX_ARGS) {
		const char *p = 0;

		if (weft_read_mem(&p, sizeof(p), (const char *const *)argv + i, user) == 0 && p) {
			cut = 1; /* more elements than the bound: SEP and the marker follow */
			if (off + seplen + sizeof(WEFT_JOIN_MORE) <= size - 1) {
				off = WEFT_JOIN_BOUND(off);
				for (__u32 j = 0; j < WEFT_JOIN_MAX_SEP && j < seplen; j++)
					dst[off + j] = sep[j];
				off += seplen;
			}
		}
	}
	if (cut) {
		/* the marker replaces the last bytes when there is no room after them */
		if (off > size - 1 - (sizeof(WEFT_JOIN_MORE) - 1))
			off = size - 1 - (sizeof(WEFT_JOIN_MORE) - 1);
		off = WEFT_JOIN_BOUND(off);
		for (__u32 j = 0; j < sizeof(WEFT_JOIN_MORE) - 1; j++)
			dst[off + j] = WEFT_JOIN_MORE[j];
		dst[off + sizeof(WEFT_JOIN_MORE) - 1] = 0;
		weft_drop(e, WEFT_DROP_STR_TRUNC);
	}
}

#endif /* WEFT_NET_BPF_H */
