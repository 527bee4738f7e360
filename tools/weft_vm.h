/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `weft vm`'s subcommands in their files: analyze in tools/weft_vm.c, record (the host query
 * set run live, written as a recorded stream) in tools/weft_vm_record.c, sync (live clock
 * synchronisation through a cluster) in tools/weft_vm_sync.c.
 */
#ifndef WEFT_TOOLS_WEFT_VM_H
#define WEFT_TOOLS_WEFT_VM_H

/* `weft vm record ...` (argv[0] is "record"): a WEFT_EXIT_* status. */
int vm_record_cmd(int argc, char **argv);
/* `weft vm sync ...` (tools/weft_vm_sync.c): a guest's clock against its host's, live,
 * joined in a cluster's aggregator. */
int vm_sync_cmd(int argc, char **argv);

#endif
