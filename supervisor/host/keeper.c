#include "supervisor/host/keeper.h"
#include "common/fdpass.h"
#include "common/proctitle.h"
#include "common/util.h"
#include "supervisor/supervise/reaper.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>

/* ---- the agent's side ------------------------------------------------- */

int keeper_add(int master, pid_t pid, int pidfd, int *chan)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return -errno;
	struct reaper_cmd c = {.op = 'C'};
	int rc = fd_send(master, &c, sizeof(c), sv[1]);
	close(sv[1]);
	c.op = 'P';
	c.id = (uint64_t)pid;
	if (rc == 0)
		rc = fd_send(sv[0], &c, sizeof(c), pidfd);
	if (rc < 0) {
		close(sv[0]);
		return rc;
	}
	*chan = sv[0];
	return 0;
}

void keeper_drop(int chan)
{
	struct reaper_cmd c = {.op = 'D'};
	(void)fd_send(chan, &c, sizeof(c), -1);
	close(chan);
}

/* ---- the keeper's side ------------------------------------------------ */

/* One container: its channel, its init's pidfd, the fds held for it. */
struct kept {
	int chan, pidfd;
	pid_t pid;     /* the init, as the agent's pidfd_open saw it */
	bool orphaned; /* its channel ended without 'D': being killed */
	int *fds;
	uint64_t *ids;
	size_t n, cap;
};

struct keeper {
	int master;
	struct kept *c;
	size_t n, cap;
};

static void kept_close(struct kept *k)
{
	for (size_t i = 0; i < k->n; i++)
		close(k->fds[i]);
	free(k->fds);
	free(k->ids);
	if (k->chan >= 0)
		close(k->chan);
	if (k->pidfd >= 0)
		close(k->pidfd);
}

static void kept_remove(struct keeper *kp, size_t i)
{
	kept_close(&kp->c[i]);
	kp->c[i] = kp->c[--kp->n];
}

static void kept_hold(struct kept *k, uint64_t id, int fd)
{
	if (k->n == k->cap) {
		k->cap = k->cap ? k->cap * 2 : 8;
		k->fds = xrealloc(k->fds, k->cap * sizeof(*k->fds));
		k->ids = xrealloc(k->ids, k->cap * sizeof(*k->ids));
	}
	k->fds[k->n] = fd;
	k->ids[k->n++] = id;
}

static void kept_release(struct kept *k, uint64_t id)
{
	for (size_t i = 0; i < k->n; i++)
		if (k->ids[i] == id) {
			close(k->fds[i]);
			k->fds[i] = k->fds[--k->n];
			k->ids[i] = k->ids[k->n];
			return;
		}
}

/* SIGKILL the container: every descendant of its init, then the init
 * (whose death ends its PID namespace, zap_pid_ns_processes). */
static void kill_container(struct kept *k)
{
	if (k->pidfd < 0)
		return;
	reaper_signal_below(k->pid, SIGKILL);
	syscall(SYS_pidfd_send_signal, k->pidfd, SIGKILL, NULL, 0);
}

/* Has the container's init exited (its pidfd readable)? */
static bool init_dead(const struct kept *k)
{
	if (k->pidfd < 0)
		return true;
	struct pollfd p = {.fd = k->pidfd, .events = POLLIN};
	return poll(&p, 1, 0) > 0;
}

/* One message on a container's channel; false when it ended. */
static bool read_chan(struct keeper *kp, size_t i)
{
	struct kept *k = &kp->c[i];
	struct reaper_cmd c;
	int fd;
	ssize_t n = fd_recv(k->chan, &c, sizeof(c), &fd, MSG_DONTWAIT);
	if (n == -EAGAIN || n == -EINTR)
		return true;
	if (n != (ssize_t)sizeof(c)) {
		if (fd >= 0)
			close(fd);
		return n < 0 && n != -EMSGSIZE ? false : n != 0;
	}
	if (c.op == 'P' && fd >= 0 && k->pidfd < 0) {
		k->pidfd = mv_steal_fd(fd);
		k->pid = (pid_t)c.id;
	} else if (c.op == 'H' && fd >= 0)
		kept_hold(k, c.id, mv_steal_fd(fd));
	else if (c.op == 'R')
		kept_release(k, c.id);
	if (fd >= 0)
		close(fd);
	if (c.op == 'D')
		kept_remove(kp, i);
	return true;
}

static void read_master(struct keeper *kp, bool *gone)
{
	struct reaper_cmd c;
	int fd;
	ssize_t n = fd_recv(kp->master, &c, sizeof(c), &fd, MSG_DONTWAIT);
	if (n == -EAGAIN || n == -EINTR)
		return;
	if (n <= 0 && n != -EMSGSIZE) {
		*gone = true;
		return;
	}
	if (n != (ssize_t)sizeof(c) || c.op != 'C' || fd < 0) {
		if (fd >= 0)
			close(fd);
		return;
	}
	if (kp->n == kp->cap)
		kp->c = xrealloc(kp->c, (kp->cap = kp->cap ? kp->cap * 2 : 16) * sizeof(*kp->c));
	kp->c[kp->n++] = (struct kept){.chan = fd, .pidfd = -1};
}

/* The agent is gone: end every container, keep their fds until each
 * init is dead (10 s at most, killing again every 50 ms), then exit. */
static _Noreturn void end_all(struct keeper *kp)
{
	for (int round = 0; round < 200; round++) {
		bool alive = false;
		for (size_t i = 0; i < kp->n; i++) {
			/* Messages still queued ('H' just before the end). */
			while (kp->c[i].chan >= 0) {
				struct reaper_cmd c;
				int fd;
				ssize_t n =
				    fd_recv(kp->c[i].chan, &c, sizeof(c), &fd, MSG_DONTWAIT);
				if (n != (ssize_t)sizeof(c)) {
					if (fd >= 0)
						close(fd);
					break;
				}
				if (c.op == 'H' && fd >= 0)
					kept_hold(&kp->c[i], c.id, mv_steal_fd(fd));
				else if (fd >= 0)
					close(fd);
			}
			if (!init_dead(&kp->c[i])) {
				kill_container(&kp->c[i]);
				alive = true;
			}
		}
		if (!alive)
			_exit(0);
		struct timespec ts = {0, 50 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	_exit(1);
}

static _Noreturn void keeper_main(int master)
{
	struct keeper k = {.master = master};
	struct keeper *kp = &k;
	/* The agent's terminal or service manager signals its whole group;
	 * the keeper must outlive the agent to end the containers. */
	int ignored[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGUSR1, SIGUSR2};
	for (size_t i = 0; i < ARRAY_SIZE(ignored); i++)
		signal(ignored[i], SIG_IGN);
	struct rlimit nofile;
	if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
		nofile.rlim_cur = nofile.rlim_max;
		(void)setrlimit(RLIMIT_NOFILE, &nofile);
	}
	proctitle_set("memvisor-keep", "memvisor keeper: holds the agent's containers");
	struct pollfd *pfd = NULL;
	for (;;) {
		pfd = xrealloc(pfd, (kp->n + 1) * sizeof(*pfd));
		pfd[0] = (struct pollfd){.fd = master, .events = POLLIN};
		for (size_t i = 0; i < kp->n; i++)
			pfd[i + 1] = (struct pollfd){.fd = kp->c[i].chan, .events = POLLIN};
		size_t n = kp->n;
		bool orphans = false;
		for (size_t i = 0; i < n; i++)
			orphans |= kp->c[i].orphaned;
		if (poll(pfd, n + 1, orphans ? 50 : -1) < 0 && errno != EINTR)
			end_all(kp);
		bool gone = false;
		if (pfd[0].revents)
			read_master(kp, &gone);
		if (gone)
			end_all(kp);
		/* Backwards: a container removed takes the last one's place. */
		for (size_t i = n; i-- > 0;) {
			struct kept *c = &kp->c[i];
			if (!c->orphaned && pfd[i + 1].revents && !read_chan(kp, i)) {
				/* The channel ended without 'D'. */
				c->orphaned = true;
				close(c->chan);
				c->chan = -1;
			}
		}
		for (size_t i = kp->n; i-- > 0;) {
			struct kept *c = &kp->c[i];
			if (!c->orphaned)
				continue;
			if (init_dead(c))
				kept_remove(kp, i);
			else
				kill_container(c);
		}
	}
}

pid_t keeper_start(int *master)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return -errno;
	pid_t pid = fork();
	if (pid < 0) {
		int err = errno;
		close(sv[0]);
		close(sv[1]);
		return -err;
	}
	if (pid == 0) {
		close(sv[0]);
		keeper_main(sv[1]);
	}
	close(sv[1]);
	*master = sv[0];
	return pid;
}
