// SPDX-License-Identifier: Apache-2.0
/*
 * jitdump — the machine code of loaded BPF programs, for tools/bench/jit-annotate.py
 * (docs/performance.md, "Kernel edges at ~28,000 requests a second": inside weft's program).
 *
 * Debian's bpftool dumps a JIT image only when built with libbfd, and its perf annotates BPF
 * programs only with libopcodes; neither is.  This asks the kernel for the image itself
 * (bpf_obj_get_info_by_fd(): jited_prog_insns, and jited_ksyms for the address the image is
 * at), so that objdump can disassemble it and perf's sample addresses can be placed on its
 * instructions.
 *
 * Usage: jitdump NAME DIR   For every loaded program called NAME (the newest first), writes
 * DIR/NAME-ID.bin and prints "ID ADDRESS LENGTH DIR/NAME-ID.bin" (the address in hex, as
 * /proc/kallsyms has it).  Exit 0 when at least one was written, 1 when none is loaded, 2 on
 * an error.  Root (CAP_SYS_ADMIN, for the program ids and the image).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>

/* Writes the image of program fd; prints its line.  0, or -errno. */
static int dump(int fd, uint32_t id, const char *name, const char *dir)
{
	struct bpf_prog_info info;
	uint32_t len = sizeof(info), ilen;
	uint64_t addr = 0;
	char path[4096];
	void *img;
	FILE *f;
	int rc = 0;

	memset(&info, 0, sizeof(info));
	if (bpf_obj_get_info_by_fd(fd, &info, &len))
		return -errno;
	ilen = info.jited_prog_len;
	if (!ilen)
		return -ENOEXEC; /* not JIT-compiled (net.core.bpf_jit_enable=0) */
	img = malloc(ilen);
	if (!img)
		return -ENOMEM;
	memset(&info, 0, sizeof(info));
	info.jited_prog_len = ilen;
	info.jited_prog_insns = (uintptr_t)img;
	info.nr_jited_ksyms = 1; /* the main program's address; subprograms follow it */
	info.jited_ksyms = (uintptr_t)&addr;
	len = sizeof(info);
	if (bpf_obj_get_info_by_fd(fd, &info, &len)) {
		rc = -errno;
		goto out;
	}
	snprintf(path, sizeof(path), "%s/%s-%" PRIu32 ".bin", dir, name, id);
	f = fopen(path, "wb");
	if (!f) {
		rc = -errno;
		goto out;
	}
	if (fwrite(img, 1, ilen, f) != ilen)
		rc = -EIO;
	if (fclose(f) && !rc)
		rc = -EIO;
	if (!rc)
		printf("%" PRIu32 " %" PRIx64 " %" PRIu32 " %s\n", id, addr, ilen, path);
out:
	free(img);
	return rc;
}

int main(int argc, char **argv)
{
	uint32_t id = 0, *ids = NULL;
	size_t n = 0, written = 0;

	if (argc != 3) {
		fprintf(stderr, "usage: jitdump NAME DIR\n");
		return 2;
	}
	while (!bpf_prog_get_next_id(id, &id)) {
		uint32_t *nids = realloc(ids, (n + 1) * sizeof(*ids));

		if (!nids) {
			free(ids);
			return 2;
		}
		ids = nids;
		ids[n++] = id;
	}
	for (size_t i = n; i-- > 0;) {
		struct bpf_prog_info info;
		uint32_t len = sizeof(info);
		int fd = bpf_prog_get_fd_by_id(ids[i]), rc;

		if (fd < 0)
			continue; /* unloaded since */
		memset(&info, 0, sizeof(info));
		if (bpf_obj_get_info_by_fd(fd, &info, &len) || strcmp(info.name, argv[1])) {
			close(fd);
			continue;
		}
		rc = dump(fd, ids[i], argv[1], argv[2]);
		close(fd);
		if (rc) {
			fprintf(stderr, "jitdump: program %" PRIu32 ": %s\n", ids[i],
				strerror(-rc));
			free(ids);
			return 2;
		}
		written++;
	}
	free(ids);
	return written ? 0 : 1;
}
