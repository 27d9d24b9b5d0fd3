/* Kernel features, probed at run time: the installed headers are older
 * than the kernels memvisor runs on, and older kernels must work with less. */
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
};

/* Probe what can be probed from the supervisor alone. The seccomp flags
 * are filled in once the listener exists (notify_setup). */
void features_probe(struct features *f);

#endif
