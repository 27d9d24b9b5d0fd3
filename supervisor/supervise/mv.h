/* The supervisor's state, shared by its two threads:
 *
 *  - the notify thread (notify.c) blocks in the listener's receive, decides
 *    and answers seccomp notifications, and nothing else, so a tracee
 *    never waits behind control-socket work;
 *  - the main thread (cli/run.c) runs everything else on a libev loop: signals,
 *    the reaper's reports, process exits (an epoll set of pidfds the notify
 *    thread adds to), the control socket, jobs.
 *
 * mv->lock guards the process table and everything both threads touch. It
 * is held for bookkeeping only, never across I/O of more than a /proc read. */
#ifndef MV_MV_H
#define MV_MV_H

#include "common/log.h"
#include "state/proc.h"
#include "supervisor/kernel/features.h"
#include "supervisor/kernel/listener.h"
#include "supervisor/kernel/remote.h"
#include "supervisor/kernel/vm.h"

#include <ev.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

struct mv_opts {
	const char *socket_path;
	const char *name; /* --name: the socket is NAME.sock in the default place */
	const char *policy_path;
	const char *log_path;
	enum mv_log_level log_level;
	const char *stats_json;
	bool kill_descendants;
	int kill_grace_ms;
	bool notify_all;	  /* --notify-all: no kernel-side fast path */
	const char *user;	  /* --user USER[:GROUP] */
	const char *metrics_file; /* --metrics-file */
	int metrics_interval_ms;  /* --metrics-interval */
	const char *until_point;  /* --until-point SYSCALL[:FD] (supervise/point.h) */
	int argc;
	char **argv;
};

struct adopted;
struct ctl_server;
struct events;
struct enforce;
struct evict;
struct job;
struct metrics_file;
struct pagesw_pool;
struct point;
struct policy;
struct rb_mark;

struct mv {
	struct mv_opts opts;
	struct features feat;
	pid_t self;
	uint64_t start_ns, start_wall_ns;

	pthread_mutex_t lock;
	struct proctab procs;

	/* Seccomp listener and the notify thread (supervise/notify.h). */
	int listener;
	struct {
		struct listener l; /* the notify thread's receive and answer */
		atomic_bool stopping;
	} notify;
	pthread_t notify_thread;
	bool notify_running;
	/* Listeners adopted since (notify_adopt: runc exec) and their
	 * processes, tops of the tree beside tree_top (tree.h), under
	 * adopt_lock, which is taken under no other lock. */
	pthread_mutex_t adopt_lock;
	struct adopted *adopted;
	struct {
		pid_t pid;
		int pidfd;
	} * roots;
	size_t n_roots, cap_roots;
	/* The system call a job is injecting (kernel/remote.h): the notify
	 * thread lets it through. */
	struct remote_marks injecting;
	uint64_t notifications; /* under lock */
	uint64_t unknown_calls; /* notifications for calls not in our table */
	pid_t last_cloner;	/* the process that last called clone/fork/vfork */

	/* Main loop. */
	struct ev_loop *loop;
	ev_io sig_io;
	int sigfd;
	ev_io reaper_io;
	int reaper_rd, reaper_wr;
	pid_t reaper_pid;
	/* memvisor agent: the container's init, whose tree (it and its
	 * descendants) is supervised; 0 under run, whose tree is everything
	 * below the reaper (tree_tops). */
	pid_t tree_top;
	/* A mark's snapshot (supervisor/rollback/snapshot.h): a child of
	 * the reaper that is not a process of the tree. 0: none. */
	_Atomic pid_t rb_snapshot;
	ev_io launch_io;
	int launch_sock;
	ev_async wake;	/* notify thread -> main: new processes to watch */
	int exits_epfd; /* epoll set of every process's pidfd */
	ev_io exits_io;
	void *late; /* exited processes waited for until reaped (lifecycle.c) */
	size_t n_late, cap_late;
	pthread_t main_thread;

	/* Long operations (supervise/jobs.h), under lock: newest first. */
	struct {
		struct job *all;
		int last_id;
		bool closed;	     /* jobs_wait_all has begun */
		uint64_t trimmed_ns; /* malloc_trim's last run (jobs_reap, main thread) */
		/* Finished jobs no longer kept, by enum job_kind and job_state. */
		uint64_t forgotten[4][4];
	} jobs;
	struct evict *evict;  /* evicted memory (reload/evict.h) */
	struct rb_mark *mark; /* the mark to roll back to (rollback/marks.h), under lock */
	struct point *point;  /* run --until-point (supervise/point.h), or NULL */
	/* Reads of tracee memory through /proc/PID/mem serve evicted pages
	 * with this (kernel/vm.h; set by host.c: evict_fault_in). */
	struct vm_faulter faulter;
	struct pagesw_pool *staging; /* checkpoint buffers (image/pagesw.h) */

	struct ctl_server *ctl;
	const char *socket_path; /* the control socket, once listening */
	struct events *events;
	struct metrics_file *metrics; /* run --metrics-file (ctl/metrics.h) */

	/* The policy (supervise/enforce.h): the active policy, the launch
	 * filter's coverage, the kernel-side pieces set at launch and the
	 * limits' accounting, under enforce's own decision lock. */
	struct enforce *enforce;

	/* The command. */
	pid_t cmd_pid;
	uint64_t early_signals; /* run: forwarded before cmd_pid was known (bit = signo) */
	bool cmd_exited;
	int cmd_status;		      /* wait status */
	int launch_stage, launch_err; /* a launcher failure, 0 if none */
	bool tree_empty;
	int exit_code;
};

#endif
