/* What a pidfd tells without /proc (PIDFD_GET_INFO, Linux 6.13; the exit
 * status since 6.15). The raw ioctl lives here only. 0 or -errno;
 * -ENOTTY or -EINVAL on kernels without it. */
#ifndef MV_PIDFD_H
#define MV_PIDFD_H

#include <stdbool.h>
#include <sys/types.h>

int pidfd_ppid(int pidfd, pid_t *ppid);

/* The wait status of a process that has exited and been reaped. */
int pidfd_exit_status(int pidfd, int *status);

/* Whether the process has exited (every thread), reaped or not: the
 * pidfd is readable (Linux 5.3). */
bool pidfd_exited(int pidfd);

#endif
