/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Exit reasons by name: why a vCPU left guest mode, as kvm:kvm_exit reports it (its fields
 * `isa` and `exit_reason`).  The numbers are the hardware's, from the kernel's UAPI headers
 * (arch/x86/include/uapi/asm/vmx.h, VMX basic exit reasons; svm.h, SVM exit codes) and the
 * names those of the tracepoint's own print format (what trace-cmd and perf show).  On VMX
 * the low 16 bits are the basic reason and bit 31 flags a failed VM entry.
 *
 * A number neither table knows is not an error: it is shown as the number and counted as
 * unknown (a newer CPU or kernel than these tables).
 */
#ifndef WEFT_VM_EXITS_H
#define WEFT_VM_EXITS_H
#include <stdint.h>

/* kvm_exit's `isa` field (the kernel's KVM_ISA_VMX, KVM_ISA_SVM) */
#define VM_ISA_VMX 1
#define VM_ISA_SVM 2

/* The name of exit reason `reason` on `isa`, or NULL if not known. */
const char *vm_exit_name(uint32_t isa, uint32_t reason);

/* The ISA's name: "vmx", "svm", or "unknown". */
const char *vm_isa_name(uint32_t isa);

#endif
