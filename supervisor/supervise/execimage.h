/* What an exec is about to map, read before the exec runs (W^X). */
#ifndef MV_EXECIMAGE_H
#define MV_EXECIMAGE_H

#include "policy/decide.h"
#include "state/call.h"

/* Read the execve/execveat call c's file (the path read from the caller's
 * memory, resolved in its root, cwd or dirfd) and what the kernel's ELF
 * loader will map for it: PT_GNU_STACK, the PT_LOAD flags, and the same
 * for its PT_INTERP interpreter and #! interpreters. listener and id: the
 * notification, checked still valid after the path is read; f serves a
 * path on an evicted page (kernel/vm.h). Returns 0,
 * -ENOENT when there is no such file (the exec fails by itself), -ESRCH
 * when the caller is gone, or another -errno when the file cannot be
 * inspected. */
struct vm_faulter;
int execimage_inspect(const struct mv_call *c, int listener, const struct vm_faulter *f,
		      struct pol_exec_image *out);

#endif
