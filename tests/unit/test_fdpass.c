/* Unit tests of common/fdpass: one message with one fd over a socketpair,
 * and every malformed message leaves no fd behind. */
#include "common/fdpass.h"
#include "tests/unit/tap.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

struct msg {
	int a;
	unsigned long b;
};

/* How many fds this process has open. */
static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	if (!d)
		return -1;
	int n = 0;
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

static int same_file(int x, int y)
{
	struct stat sx, sy;
	return fstat(x, &sx) == 0 && fstat(y, &sy) == 0 && sx.st_dev == sy.st_dev &&
	       sx.st_ino == sy.st_ino;
}

/* Send n fds with data by hand: fd_send sends at most one. */
static int send_fds(int sock, const void *data, size_t len, const int *fds, int n)
{
	struct iovec iov = {.iov_base = (void *)data, .iov_len = len};
	union {
		char buf[CMSG_SPACE(4 * sizeof(int))];
		struct cmsghdr align;
	} u;
	memset(&u, 0, sizeof(u));
	struct msghdr msg = {.msg_iov = &iov,
			     .msg_iovlen = 1,
			     .msg_control = u.buf,
			     .msg_controllen = CMSG_SPACE(n * sizeof(int))};
	struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(n * sizeof(int));
	memcpy(CMSG_DATA(c), fds, n * sizeof(int));
	return sendmsg(sock, &msg, MSG_NOSIGNAL) < 0 ? -errno : 0;
}

static void test_roundtrip(int sv[2], int file)
{
	struct msg out = {.a = 42, .b = 0xfeedUL}, in = {0};
	int fd = -2;
	ok(fd_send(sv[0], &out, sizeof(out), file) == 0, "send data and fd");
	ok(fd_recv(sv[1], &in, sizeof(in), &fd, 0) == (ssize_t)sizeof(in),
	   "receive the whole message");
	ok(in.a == 42 && in.b == 0xfeedUL, "data intact");
	ok(fd >= 0 && fd != file && same_file(fd, file), "fd refers to the same file");
	ok(fd >= 0 && (fcntl(fd, F_GETFD) & FD_CLOEXEC), "received fd is close-on-exec");
	if (fd >= 0)
		close(fd);

	fd = -2;
	ok(fd_send(sv[0], &out, sizeof(out), -1) == 0, "send data without an fd");
	ok(fd_recv(sv[1], &in, sizeof(in), &fd, 0) == (ssize_t)sizeof(in) && fd == -1,
	   "no fd: the message, and *fd is -1");
}

static void test_malformed(int sv[2], int file)
{
	int before = count_fds(), fd = -2;
	struct msg in;
	char big[sizeof(in) + 8] = {0};
	ok(fd_send(sv[0], big, sizeof(big), file) == 0, "send a message longer than the reader's");
	ok(fd_recv(sv[1], &in, sizeof(in), &fd, 0) == -EMSGSIZE && fd == -1,
	   "longer message (MSG_TRUNC): -EMSGSIZE, no fd");

	fd = -2;
	ok(fd_send(sv[0], big, 3, file) == 0, "send a short message with an fd");
	ok(fd_recv(sv[1], &in, sizeof(in), &fd, 0) == 3 && fd == -1,
	   "short message: its length, no fd");

	int two[2] = {file, file}, four[4] = {file, file, file, file};
	fd = -2;
	ok(send_fds(sv[0], big, sizeof(in), two, 2) == 0, "send two fds");
	ok(fd_recv(sv[1], &in, sizeof(in), &fd, 0) == -EMSGSIZE && fd == -1,
	   "two fds: -EMSGSIZE, no fd");
	fd = -2;
	ok(send_fds(sv[0], big, sizeof(in), four, 4) == 0, "send four fds");
	ok(fd_recv(sv[1], &in, sizeof(in), &fd, 0) == -EMSGSIZE && fd == -1,
	   "four fds (MSG_CTRUNC): -EMSGSIZE, no fd");
	is_u64(count_fds(), before, "no fd left behind by a malformed message");
}

static void test_ends(int sv[2])
{
	int fd = -2;
	struct msg m = {0};
	ok(fd_recv(sv[1], &m, sizeof(m), &fd, MSG_DONTWAIT) == -EAGAIN && fd == -1,
	   "nothing to read with MSG_DONTWAIT: -EAGAIN");
	close(sv[0]);
	ok(fd_recv(sv[1], &m, sizeof(m), &fd, 0) == 0 && fd == -1, "end of file: 0");
	int pair[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) < 0)
		return;
	close(pair[1]);
	/* MSG_NOSIGNAL: without it SIGPIPE would end this test. */
	ok(fd_send(pair[0], &m, sizeof(m), -1) == -EPIPE, "peer gone: -EPIPE, no SIGPIPE");
	close(pair[0]);
}

int main(void)
{
	int sv[2], pfd[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0 ||
	    pipe2(pfd, O_CLOEXEC) < 0) {
		ok(0, "socketpair and pipe: %s", strerror(errno));
		return tap_done();
	}
	test_roundtrip(sv, pfd[0]);
	test_malformed(sv, pfd[0]);
	test_ends(sv);
	close(sv[1]);
	close(pfd[0]);
	close(pfd[1]);
	return tap_done();
}
