/* The seccomp listener's ioctls (seccomp_unotify(2)): the only place that
 * calls them. The notify thread (supervisor/supervise/notify.c) receives
 * and answers through one struct listener; anyone may ask whether a
 * notification is still pending. */
#ifndef MV_LISTENER_H
#define MV_LISTENER_H

#include <linux/seccomp.h>
#include <stdbool.h>
#include <stdint.h>

struct listener {
	int fd;
	struct seccomp_notif_sizes sizes;
	/* Sized as the kernel says: it may know larger structs than our
	 * headers. req is what listener_recv received; resp what
	 * listener_send sends. */
	struct seccomp_notif *req;
	struct seccomp_notif_resp *resp;
};

/* Learn the struct sizes, allocate req and resp, and ask for
 * SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP (*sync_wake_up: whether the kernel
 * has it). 0 or -errno. */
int listener_init(struct listener *l, int fd, bool *sync_wake_up);
void listener_free(struct listener *l);

/* Receive the next notification into l->req (blocking); clears l->resp
 * and sets its id. 0 or -errno (-ENOENT: withdrawn, -EINTR: a signal).
 * Failure point (MEMVISOR_FAULT): notify_recv. */
int listener_recv(struct listener *l);

/* Send l->resp. A failure other than ENOENT (the thread is gone) is
 * retried: an unanswered notification leaves its thread blocked for
 * good. 0 or -errno. Failure point: notify_send. */
int listener_send(struct listener *l);

/* Is notification id still pending (the thread still waits in the call)?
 * Check it after reading tracee memory and before answering from it. */
bool listener_id_valid(int fd, uint64_t id);
/* Is fd a seccomp listener (one handed over by an OCI runtime)? The
 * kernel answers an id check with ENOENT on a listener, ENOTTY or EINVAL
 * on anything else. */
bool listener_is_one(int fd);

#endif
