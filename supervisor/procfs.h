/* Reading /proc for the supervisor. Functions return 0 or -errno; ESRCH or
 * ENOENT mean the process is gone, an outcome rather than an error. */
#ifndef MV_PROCFS_H
#define MV_PROCFS_H

#include "state/proc.h"
#include "state/procparse.h"

int procfs_status(pid_t tid, struct proc_status *st);
int procfs_stat(pid_t pid, struct proc_stat *st);

/* Open p's pidfd and /proc dir fd, read exe, cmdline and start time. */
int procfs_fill(struct proc *p);

/* Refresh exe and cmdline (after an exec). */
int procfs_refresh_identity(struct proc *p);

/* Is tid still a thread of p? */
bool procfs_is_thread_of(const struct proc *p, pid_t tid);

/* Threads of pid, from /proc/PID/status; -errno when gone. */
int procfs_threads(pid_t pid);

/* Children of every thread of pid (CONFIG_PROC_CHILDREN), appended to *v. */
void procfs_children(pid_t pid, pid_t **v, size_t *n, size_t *cap);

#endif
