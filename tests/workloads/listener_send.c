/*
 * listener_send — play a runtime that hands the agent a real seccomp
 * listener, for the agent's refusal tests (tests/bats/agent.bats).
 *
 * Usage: listener_send SOCKET ID INIT_PID
 *
 * Forks a child that loads a filter with SECCOMP_FILTER_FLAG_NEW_LISTENER
 * (getppid notified, everything else allowed) and passes the listener to
 * the parent, which connects to SOCKET and sends, with the listener
 * (SCM_RIGHTS), the message of a `runc exec` into container ID whose init
 * is INIT_PID, naming the child as the exec'd process:
 *
 *   {"fds":["seccompFd"],"pid":CHILD,"state":{"id":ID,"status":"running","pid":INIT_PID}}
 *
 * Prints "sent CHILD", waits for the agent to close the connection (at
 * most 5 s), kills the child and exits 0; 1 on a failure, said on stderr.
 */
#include "wl.h"

#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>

static int die(const char *what)
{
	fprintf(stderr, "listener_send: %s: %s\n", what, strerror(errno));
	return 1;
}

static int send_fd(int sock, const void *buf, size_t len, int fd)
{
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int))];
	} u;
	memset(&u, 0, sizeof(u));
	struct iovec iov = {(void *)buf, len};
	struct msghdr mh = {.msg_iov = &iov,
			    .msg_iovlen = 1,
			    .msg_control = u.b,
			    .msg_controllen = sizeof(u.b)};
	struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(int));
	return sendmsg(sock, &mh, 0) == (ssize_t)len ? 0 : -1;
}

static int recv_fd(int sock)
{
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int))];
	} u;
	char x;
	struct iovec iov = {&x, 1};
	struct msghdr mh = {.msg_iov = &iov,
			    .msg_iovlen = 1,
			    .msg_control = u.b,
			    .msg_controllen = sizeof(u.b)};
	if (recvmsg(sock, &mh, 0) != 1)
		return -1;
	struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
	int fd = -1;
	if (c && c->cmsg_type == SCM_RIGHTS)
		memcpy(&fd, CMSG_DATA(c), sizeof(int));
	return fd;
}

/* The child: a filter that notifies getppid, its listener to the parent. */
static void child(int sock)
{
	struct sock_filter f[] = {
	    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_getppid, 0, 1),
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF),
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = {sizeof(f) / sizeof(f[0]), f};
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		_exit(die("PR_SET_NO_NEW_PRIVS"));
	int fd = (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
			      SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
	if (fd < 0)
		_exit(die("seccomp"));
	if (send_fd(sock, "l", 1, fd) < 0)
		_exit(die("send to the parent"));
	close(fd);
	for (;;)
		pause();
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: listener_send SOCKET ID INIT_PID\n");
		return 100;
	}
	int sp[2];
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sp) < 0)
		return die("socketpair");
	pid_t pid = fork();
	if (pid < 0)
		return die("fork");
	if (pid == 0) {
		close(sp[0]);
		child(sp[1]);
	}
	close(sp[1]);
	int lfd = recv_fd(sp[0]);
	if (lfd < 0) {
		kill(pid, SIGKILL);
		return die("the child's listener");
	}
	int s = socket(AF_UNIX, SOCK_STREAM, 0);
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", argv[1]);
	char msg[512];
	int n = snprintf(msg, sizeof(msg),
			 "{\"fds\":[\"seccompFd\"],\"pid\":%d,\"state\":{\"id\":\"%s\",\"status\":"
			 "\"running\",\"pid\":%s}}",
			 (int)pid, argv[2], argv[3]);
	int rc = 0;
	if (s < 0 || connect(s, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    send_fd(s, msg, (size_t)n, lfd) < 0) {
		rc = die("send to the agent");
	} else {
		say("sent %d\n", (int)pid);
		/* The agent closes the connection once it has decided. */
		struct timeval tv = {5, 0};
		setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		char x;
		while (read(s, &x, 1) > 0)
			;
	}
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	return rc;
}
