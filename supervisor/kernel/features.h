/* Kernel features, probed at run time: the installed headers are older
 * than the kernels memvisor runs on, and older kernels must work with less.
 *
 * features_probe is what `run` does at start-up: cheap, no process made.
 * features_probe_trials adds what can only be known by trying it in a
 * child process (loading a filter, tracing, collapsing another process's
 * memory): `memvisor check` (supervisor/cli/check.c). Each errno member
 * is 0 when the trial succeeded, else the positive errno it failed with. */
#ifndef MV_FEATURES_H
#define MV_FEATURES_H

#include <stdbool.h>
#include <stdint.h>

struct features {
	char kernel[65];
	bool sync_wake_up;	 /* SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP (6.6) */
	bool wait_killable_recv; /* SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV (5.19) */
	bool procmap_query;	 /* PROCMAP_QUERY ioctl on /proc/PID/maps (6.11) */
	bool pagemap_scan;	 /* PAGEMAP_SCAN ioctl on /proc/PID/pagemap (6.7) */
	bool pidfd;		 /* pidfd_open (5.3) */
	bool pidfd_getfd;	 /* pidfd_getfd (5.6) */
	bool mdwe;		 /* PR_SET_MDWE (6.3) */
	bool cap_sys_admin;	 /* effective, in memvisor's user namespace */
	bool uffd_dev;		 /* /dev/userfaultfd can be opened (6.1) */
	bool uffd_syscall;	 /* userfaultfd(2) works for us */
	uint64_t uffd_features;	 /* UFFDIO_API features the kernel offers */

	/* Also from features_probe, for `check` and `hello`. */
	bool cap_sys_ptrace, cap_sys_nice, cap_setuid; /* effective */
	bool procfs;				       /* /proc/self/maps readable */
	bool process_vm;			       /* process_vm_readv (3.2) */
	bool peer_pidfd;			       /* SO_PEERPIDFD (6.5) */
	int landlock_abi;	 /* Landlock ABI version, 0 without Landlock (5.13) */
	int uffd_err;		 /* why userfaultfd(2) failed for us */
	bool uffd_user_mode;	 /* userfaultfd(UFFD_USER_MODE_ONLY) works (5.11) */
	int unprivileged_uffd;	 /* vm.unprivileged_userfaultfd, -1 unknown */
	int ptrace_scope;	 /* kernel.yama.ptrace_scope, -1 without Yama */
	bool seccomp_user_notif; /* SECCOMP_RET_USER_NOTIF is an available action (5.0) */

	/* From features_probe_trials only. */
	bool trials;	       /* they were run */
	int listener_err;      /* a filter with SECCOMP_FILTER_FLAG_NEW_LISTENER */
	bool pidfd_info;       /* PIDFD_GET_INFO (6.13) */
	bool pidfd_info_exit;  /* the exit status in it (6.15) */
	int ptrace_err;	       /* PTRACE_SEIZE of a child */
	int uffd_events_err;   /* UFFDIO_API with the features evict needs */
	int collapse_err;      /* process_madvise(MADV_COLLAPSE) of a child's memory */
	int collapse_self_err; /* madvise(MADV_COLLAPSE) of our own */
	int uffd_sysv_err;     /* features_uffd_sysv */
};

/* Probe what can be probed from the supervisor alone. The seccomp flags
 * are filled in once the listener exists (notify_setup). */
void features_probe(struct features *f);

/* features_probe, then the trials in child processes, the seccomp
 * listener's flags among them. For a process with one thread: it forks. */
void features_probe_trials(struct features *f);

/* Can a userfaultfd register a System V shared memory mapping (missing
 * mode)? 0, or the errno: EINVAL up to Linux 6.18 at least (mm/
 * userfaultfd.c vma_can_userfault: a SysV mapping's vm_ops are ipc/shm.c's,
 * so it is neither anonymous nor a shmem vma). Makes and removes a
 * one-page segment. */
int features_uffd_sysv(void);

/* The names of the userfaultfd feature bits, for hello and check:
 * calls fn for each bit of features it knows, in bit order. */
void features_uffd_names(uint64_t features, void (*fn)(const char *name, void *arg), void *arg);

#endif
