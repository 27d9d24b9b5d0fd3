/* The supervisor's /proc layer. As CRIU keeps all of it in
 * criu/proc_parse.c, every read of /proc goes through these files:
 *
 *   state/procparse.[ch]      the parsers of /proc text, pure (no I/O), so
 *                             unit tests and the fuzzer link them: status,
 *                             stat, statm, children, fdinfo, smaps, and the
 *                             one maps-line parser (parse_maps_line)
 *   supervisor/kernel/procfs  opening and reading /proc/PID/... (this file):
 *                             identity, threads, children, statm, fds,
 *                             personality, where a thread is blocked
 *   supervisor/kernel/procmap a process's regions: the one loop over them,
 *                             PROCMAP_QUERY (Linux 6.11) or /proc/PID/maps
 *                             text, and the model snapshot built from it;
 *                             the only place that issues PROCMAP_QUERY
 *   supervisor/kernel/pagemap pages: PAGEMAP_SCAN (Linux 6.7) or the
 *                             pagemap's entries; the only place that issues
 *                             PAGEMAP_SCAN
 *
 * Other files open through procfs_open what /proc hands out as files
 * (/proc/PID/mem, map_files, fd) and keep no /proc paths of their own.
 *
 * Every function returns 0 (or what it says) or -errno. ESRCH means the
 * process is gone, an outcome rather than an error; ENOENT from /proc is
 * reported as ESRCH. The process may change under any read: the result
 * was true at one instant. */
#ifndef MV_PROCFS_H
#define MV_PROCFS_H

#include "state/proc.h"
#include "state/procparse.h"

/* Open /proc/PID/rel (close-on-exec). An fd or -errno. */
int procfs_open(pid_t pid, const char *rel, int flags);

/* Call fn(arg, dfd, name) for each descriptor of process pid (dfd: its
 * /proc/PID/fd, name: the descriptor's number) until fn returns non-zero;
 * returns that, 0 after the last, or -errno when the table cannot be
 * read. */
int procfs_fd_walk(pid_t pid, int (*fn)(void *arg, int dfd, const char *name), void *arg);

/* Read /proc/PID/rel whole into *text (malloc'd, NUL-terminated; *len its
 * length if len). One read of the whole file is what gives one instant's
 * view of a seq_file. */
int procfs_read(pid_t pid, const char *rel, char **text, size_t *len);

/* /proc/PID/status and /proc/PID/stat: the reads the proc_read fault
 * point covers (docs/reliability.md). An unparsable file is -ESRCH. */
int procfs_status(pid_t tid, struct proc_status *st);
int procfs_stat(pid_t pid, struct proc_stat *st);

/* The same of one thread, /proc/PID/task/TID/{status,stat}, or of the
 * process itself when tid is 0; no fault point. */
int procfs_task_status(pid_t pid, pid_t tid, struct proc_status *st);
int procfs_task_stat(pid_t pid, pid_t tid, struct proc_stat *st);

/* Is thread tid of pid one that stops under ptrace but never runs user
 * code (PROC_PF_KERNEL_LOOP: io_uring's iou-wrk and iou-sqp, vhost)?
 * Nothing can be injected into it: a single step there never traps. */
bool procfs_kernel_loop_thread(pid_t pid, pid_t tid);

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

/* The path of pid's executable (/proc/PID/exe) into buf. */
int procfs_exe(pid_t pid, char *buf, size_t len);

/* Is tid still a thread of p? */
bool procfs_is_thread_of(const struct proc *p, pid_t tid);

/* Threads of pid, from /proc/PID/status; -errno when gone. */
int procfs_threads(pid_t pid);

/* The thread ids of pid (/proc/PID/task) into *v (malloc'd, *n of them). */
int procfs_tasks(pid_t pid, pid_t **v, size_t *n);

/* Children of every thread of pid (CONFIG_PROC_CHILDREN), appended to *v. */
void procfs_children(pid_t pid, pid_t **v, size_t *n, size_t *cap);

/* Pages mapped and resident (statm's first two fields) in bytes:
 * from pid, or through an open statm fd (a read at offset 0 makes
 * seq_file build the text anew). resident may be NULL. An exiting process
 * shows an empty statm: -ESRCH. */
int procfs_statm(pid_t pid, uint64_t *mapped, uint64_t *resident);
int procfs_statm_read(int fd, uint64_t *mapped, uint64_t *resident);

/* The regions of pid that fork treats specially (parse_fork_flags). */
int procfs_fork_flags(pid_t pid, struct as_range **dc, size_t *n_dc, struct as_range **wf,
		      size_t *n_wf);

/* What the process's fd is. */
struct pol_fd;
int procfs_fd(pid_t pid, int fd, struct pol_fd *out);

/* The process's personality(2) flags. */
int procfs_personality(pid_t pid, unsigned long *persona);

/* Is thread tid (of pid) still inside syscall nr? 1 yes or cannot tell
 * (running, or unreadable), 0 no (blocked elsewhere, or gone). */
int procfs_in_call(pid_t pid, pid_t tid, int nr);

/* The kernel function thread tid of pid waits in (/proc/PID/task/TID/wchan)
 * into buf ("" when unreadable); 0 or -errno. */
int procfs_wchan(pid_t pid, pid_t tid, char *buf, size_t len);

/* A number from /proc/sys: name is its path below /proc/sys
 * ("vm/unprivileged_userfaultfd"). 0 or -errno (-ENOENT: no such knob). */
int procfs_sysctl(const char *name, long *v);

#endif
