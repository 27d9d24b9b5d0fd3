/* Reading /proc for the supervisor. Functions return 0 or -errno; ESRCH or
 * ENOENT mean the process is gone, an outcome rather than an error. */
#ifndef MV_PROCFS_H
#define MV_PROCFS_H

#include "state/proc.h"
#include "state/procparse.h"

int procfs_status(pid_t tid, struct proc_status *st);
int procfs_stat(pid_t pid, struct proc_stat *st);

/* Who a process is, from /proc: read without any lock held, because a
 * first look at a new pid's /proc entries can take a long time. */
struct proc_identity {
	int procfd; /* O_PATH fd of /proc/PID */
	pid_t ppid;
	uint64_t start_ticks;
	char *exe;     /* NULL if unreadable */
	bool exe_read; /* exe came from /proc (set when applied) */
	char *cmdline; /* NUL-separated; NULL if gone */
	size_t cmdline_len;
};

int procfs_identity(pid_t pid, struct proc_identity *id);
void procfs_identity_free(struct proc_identity *id);

/* Is tid still a thread of p? */
bool procfs_is_thread_of(const struct proc *p, pid_t tid);

/* Threads of pid, from /proc/PID/status; -errno when gone. */
int procfs_threads(pid_t pid);

/* Children of every thread of pid (CONFIG_PROC_CHILDREN), appended to *v. */
void procfs_children(pid_t pid, pid_t **v, size_t *n, size_t *cap);

/* The regions of pid that fork treats specially (parse_fork_flags). */
int procfs_fork_flags(pid_t pid, struct as_range **dc, size_t *n_dc, struct as_range **wf,
		      size_t *n_wf);

#endif
