/* The BPF filter loaded into the tracee, built with libseccomp before the
 * fork so that the launcher only has to hand the finished program to
 * seccomp(2).
 *
 * Every system call in common/syscalls.h is notified, on every x86 ABI
 * (x86_64, i386 through int 0x80, x32), so no ABI offers a way around the
 * supervisor; everything else is allowed in the kernel. */
#ifndef MV_FILTER_H
#define MV_FILTER_H

#include <linux/filter.h>

/* Build the filter program. On success out->filter is malloc'd (free it
 * with filter_free). 0 or -errno (libseccomp's error codes). */
int filter_build(struct sock_fprog *out);

void filter_free(struct sock_fprog *prog);

#endif
