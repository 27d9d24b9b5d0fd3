/* One message with one file descriptor over a Unix socket (SCM_RIGHTS,
 * unix(7)): how memvisor's processes hand each other fds. The launcher
 * sends the supervisor its seccomp listener; the supervisor sends the
 * reaper the userfaultfds of evicted memory.
 *
 * Both functions are async-signal-safe and allocate nothing (sendmsg(2),
 * recvmsg(2) and close(2) on the caller's stack): the launcher sends after
 * its filter is loaded, when a notified call such as malloc's mmap would
 * wait for a supervisor that has no listener yet. Both retry EINTR and
 * return -errno on failure (common/err.h). */
#ifndef MV_FDPASS_H
#define MV_FDPASS_H

#include <stddef.h>
#include <sys/types.h>

/* Send len bytes of data as one message, with fd attached when fd >= 0.
 * MSG_NOSIGNAL: a peer gone is -EPIPE, not SIGPIPE. Once it returns 0 the
 * file is referenced by the receiving socket (in flight or received), so
 * the sender may close fd, or die. Returns 0; -EMSGSIZE when only part of
 * data went (a stream socket); -errno otherwise. */
int fd_send(int sock, const void *data, size_t len, int fd);

/* Receive one message of up to len bytes into data, and the fd passed
 * with it into *fd (close-on-exec), or -1 when none came. flags adds
 * MSG_* flags (MSG_DONTWAIT).
 *
 * Returns the length of the message, 0 at end of file. An fd comes back
 * only with a message of exactly len bytes: one that came with a shorter
 * message is closed. Returns -EMSGSIZE, every fd that came closed, when
 * the message was longer than len (MSG_TRUNC), carried more than one fd,
 * or its control data did not fit (MSG_CTRUNC: still more fds, or the
 * receiver at RLIMIT_NOFILE); -errno otherwise (-EAGAIN with MSG_DONTWAIT
 * and nothing to read). */
ssize_t fd_recv(int sock, void *data, size_t len, int *fd, int flags);

#endif
