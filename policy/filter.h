/* The BPF filter loaded into the tracee, built with libseccomp before the
 * fork so that the launcher only has to hand the finished program to
 * seccomp(2).
 *
 * It notifies exactly what struct needs lists, on every x86 ABI (x86_64,
 * i386 through int 0x80, x32), so no ABI offers a way around the
 * supervisor; everything else is allowed in the kernel. Each ABI gets its
 * own rules (their registers differ: i386's mmap is old_mmap, its
 * registers are 32 bits), built in one libseccomp context per ABI and
 * merged. */
#ifndef MV_FILTER_H
#define MV_FILTER_H

#include "policy/needs.h"

#include <linux/filter.h>

/* Build the filter program (syscalls_init() first). On success
 * out->filter is malloc'd (free it with filter_free). 0 or -errno
 * (libseccomp's error codes). */
int filter_build(const struct needs *n, struct sock_fprog *out);

/* The same, and the stop point of `run --until-point`
 * (supervisor/supervise/point.h): call notified (with first argument fd,
 * unless fd < 0), and exit(2) and exit_group(2). call NULL: none. */
int filter_build_point(const struct needs *n, const char *call, int fd, struct sock_fprog *out);

void filter_free(struct sock_fprog *prog);

#endif
