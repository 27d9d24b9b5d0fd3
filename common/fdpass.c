#include "common/fdpass.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Room for one fd. The kernel fills in as many fds as the room takes
 * (net/core/scm.c scm_detach_fds): two fit in CMSG_SPACE(sizeof(int)) on
 * 64-bit, so "more than one" is counted here, not left to MSG_CTRUNC. */
union fd_cmsg {
	char buf[CMSG_SPACE(sizeof(int))];
	struct cmsghdr align;
};

static void drop_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

int fd_send(int sock, const void *data, size_t len, int fd)
{
	struct iovec iov = {.iov_base = (void *)data, .iov_len = len};
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
	union fd_cmsg u;
	if (fd >= 0) {
		memset(&u, 0, sizeof(u));
		msg.msg_control = u.buf;
		msg.msg_controllen = sizeof(u.buf);
		struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
	}
	ssize_t n;
	do
		n = sendmsg(sock, &msg, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	return (size_t)n == len ? 0 : -EMSGSIZE;
}

/* Take the fds of msg's SCM_RIGHTS messages: the first into *fd, the
 * others closed. Returns how many came. */
static int take_fds(struct msghdr *msg, int *fd)
{
	int n = 0;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(msg); c; c = CMSG_NXTHDR(msg, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < k; i++) {
			int got;
			memcpy(&got, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (n++ == 0)
				*fd = got;
			else
				close(got);
		}
	}
	return n;
}

ssize_t fd_recv(int sock, void *data, size_t len, int *fd, int flags)
{
	struct iovec iov = {.iov_base = data, .iov_len = len};
	union fd_cmsg u;
	struct msghdr msg = {
	    .msg_iov = &iov,
	    .msg_iovlen = 1,
	    .msg_control = u.buf,
	    .msg_controllen = sizeof(u.buf),
	};
	*fd = -1;
	ssize_t n;
	do
		n = recvmsg(sock, &msg, flags | MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	/* A message cut short, or with more fds than it should carry, is not
	 * one the caller can act on: close what came so nothing leaks. */
	if (take_fds(&msg, fd) > 1 || (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
		drop_fd(fd);
		return -EMSGSIZE;
	}
	if ((size_t)n != len)
		drop_fd(fd);
	return n;
}
