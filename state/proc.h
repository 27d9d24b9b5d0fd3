/* The process table: every supervised process, found from notifications,
 * from the process tree, and from the reaper; its counters; the processes
 * that have exited (kept for the final statistics, up to a bound).
 *
 * Pure data: no I/O, no locking. The supervisor holds its state lock
 * around every call here. A notification names a thread; threads other
 * than the leader are mapped to their process through a second map. */
#ifndef MV_PROC_H
#define MV_PROC_H

#include "common/imap.h"
#include "state/as.h"
#include "state/stats.h"

#include <stdbool.h>
#include <sys/types.h>

enum proc_state { PROC_RUNNING, PROC_EXITED };

struct proc {
	pid_t pid;    /* thread-group id */
	uint64_t seq; /* 1, 2, ...: the n-th process of the run; unlike a pid, never reused */
	pid_t ppid;
	int pidfd;  /* -1 when pidfd_open is unavailable */
	int procfd; /* O_PATH fd of /proc/PID: reads through it fail after the process is gone */
	char *exe;
	char *cmdline; /* NUL-separated argv, cmdline_len bytes */
	size_t cmdline_len;
	uint64_t start_ticks; /* /proc/PID/stat starttime: tells a reused pid apart */
	uint64_t seen_ns;     /* wall clock when first seen */
	uint64_t exit_ns;
	int wait_status; /* from the reaper when it was our child; -1 when unknown */
	enum proc_state state;
	bool identity_stale; /* exe/cmdline not yet read from /proc */
	bool exe_verified;   /* exe is what /proc/PID/exe says */
	unsigned execs;	     /* successful execs seen */

	/* An execve/execveat was let through and its outcome is unknown until
	 * the process is next looked at (see supervisor/supervise/lifecycle.c). */
	bool exec_pending;
	int exec_probe_fd; /* /proc/PID/mem opened at the execve: pins the old mm */
	char *exec_path;   /* the path and argv the execve asked for, */
	char *exec_argv;   /* NUL-separated, until /proc can be read */
	size_t exec_argv_len;
	uint64_t exec_probe_addr; /* an address mapped in the old mm */
	pid_t exec_mm_peer;	  /* vfork parent sharing the mm at the execve, or 0 */

	uint64_t brk_cur; /* last program break asked for, 0 = unknown */
	uint64_t notified_calls;
	struct proc_stats stats;

	/* Address-space model: the last reconciled snapshot, and the calls
	 * logged since (allocated on the first one). */
	struct as_model model;
	struct as_log *aslog;
	uint64_t exec_ns; /* wall time of an exec not yet reconciled, or 0 */
};

struct proctab {
	struct imap procs;   /* pid -> struct proc, running */
	struct imap threads; /* tid -> struct proc, non-leader threads */
	struct proc **exited;
	size_t n_exited, cap_exited;
	size_t max_exited;	  /* beyond this, exited processes are folded ... */
	struct proc_stats folded; /* ... into these counters */
	uint64_t n_folded;
	uint64_t n_seen; /* processes ever seen */
};

void proctab_init(struct proctab *t, size_t max_exited);
void proctab_free(struct proctab *t);

/* The running process with this pid, or NULL. */
struct proc *proctab_get(struct proctab *t, pid_t pid);

/* The running process a thread id belongs to (leader or thread), or NULL. */
struct proc *proctab_by_tid(struct proctab *t, pid_t tid);

/* The process pid first seen at seen_ns (a reused pid is another one),
 * running or among the exited still kept; NULL if neither. */
struct proc *proctab_find(struct proctab *t, pid_t pid, uint64_t seen_ns);

/* Add a running process; the table takes ownership. Fields other than
 * pid/ppid are the caller's to fill. */
struct proc *proctab_add(struct proctab *t, pid_t pid, pid_t ppid);

/* Record that tid is a thread of p. */
void proctab_add_thread(struct proctab *t, struct proc *p, pid_t tid);
void proctab_del_thread(struct proctab *t, pid_t tid);

/* Forget every thread of p except the leader (after an exec). */
void proctab_drop_threads(struct proctab *t, struct proc *p);

/* Move p to the exited list (state EXITED); its threads are forgotten.
 * The caller has released p's fds. */
void proctab_exit(struct proctab *t, struct proc *p, uint64_t when_ns);

/* Iterate running processes: for (size_t i = 0; (p = proctab_next(t, &i));) */
struct proc *proctab_next(const struct proctab *t, size_t *iter);
size_t proctab_running(const struct proctab *t);

/* Iterate every process of the run, the exited ones (oldest first) and
 * then the running: for (size_t i = 0; (p = proctab_next_all(t, &i));) */
struct proc *proctab_next_all(const struct proctab *t, size_t *iter);

/* The counters of process pid, running or exited; the folded counters
 * when it was folded already. For an answer that raced with the exit of
 * the process it answered: pid must have been a process of the table. */
struct proc_stats *proctab_stats_of(struct proctab *t, pid_t pid);

/* The counters of every process of the run, exited and folded included. */
void proctab_totals(const struct proctab *t, struct proc_stats *out);

/* Free a process and its memory (not its fds). */
void proc_free(struct proc *p);

#endif
