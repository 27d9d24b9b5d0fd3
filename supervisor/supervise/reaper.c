#include "supervisor/supervise/reaper.h"
#include "common/fault.h"
#include "common/fdpass.h"
#include "common/proctitle.h"
#include "common/util.h"
#include "supervisor/kernel/procfs.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>

/* ---- the supervisor's side ------------------------------------------- */

void reaper_kill_tree(int chan, int grace_ms)
{
	if (chan < 0)
		return;
	struct reaper_cmd c = {.op = 'K', .grace_ms = grace_ms};
	(void)fd_send(chan, &c, sizeof(c), -1);
}

int reaper_hold_fd(int chan, int fd, uint64_t id)
{
	if (chan < 0)
		return -ENOTCONN;
	struct reaper_cmd c = {.op = 'H', .id = id};
	/* Once fd_send returns, the file is referenced by the reaper's end
	 * of the socket (in flight or received): the supervisor may die
	 * from then on. */
	return fd_send(chan, &c, sizeof(c), fd);
}

void reaper_release_fd(int chan, uint64_t id)
{
	if (chan < 0)
		return;
	struct reaper_cmd c = {.op = 'R', .id = id};
	(void)fd_send(chan, &c, sizeof(c), -1);
}

/* ---- the reaper's side ------------------------------------------------ */

struct held {
	uint64_t id;
	int fd;
};

/* The reaper process's state: one, local to reaper_main. */
struct reaper {
	int from_sup, to_sup; /* its ends of the command socket and the report pipe */
	pid_t cmd;	      /* the command */
	bool cmd_done;	      /* the command has been reaped */
	struct held *held;    /* fds held for the supervisor (reaper_hold_fd) */
	size_t n_held, cap_held;
};

static void hold(struct reaper *r, uint64_t id, int fd)
{
	if (r->n_held == r->cap_held) {
		r->cap_held = r->cap_held ? r->cap_held * 2 : 16;
		r->held = xrealloc(r->held, r->cap_held * sizeof(*r->held));
	}
	r->held[r->n_held++] = (struct held){id, fd};
}

static void release(struct reaper *r, uint64_t id)
{
	for (size_t i = 0; i < r->n_held; i++)
		if (r->held[i].id == id) {
			close(r->held[i].fd);
			r->held[i] = r->held[--r->n_held];
			return;
		}
}

/* One command; 0 when the supervisor is gone (EOF or error), -1 when
 * there is none to act on. */
static int read_cmd(struct reaper *r, struct reaper_cmd *c)
{
	int fd;
	ssize_t n = fd_recv(r->from_sup, c, sizeof(*c), &fd, MSG_DONTWAIT);
	if (n == -EAGAIN || n == -EMSGSIZE)
		return -1;
	if (n <= 0)
		return 0;
	if (n != (ssize_t)sizeof(*c))
		return -1; /* fd_recv closed an fd that came with it */
	if (c->op == 'H' && fd >= 0)
		hold(r, c->id, fd);
	else if (fd >= 0)
		close(fd);
	if (c->op == 'R')
		release(r, c->id);
	return 1;
}

static void send_msg(const struct reaper *r, int type, pid_t pid, int status)
{
	struct reaper_msg m = {.type = type, .pid = pid, .status = status};
	(void)mv_write_all(r->to_sup, &m, sizeof(m));
}

struct node {
	pid_t pid, parent;
};

/* Append the children of pid to *v, each with pid as its parent. */
static void add_children(pid_t pid, struct node **v, size_t *n, size_t *cap)
{
	pid_t *kids = NULL;
	size_t kn = 0, kcap = 0;
	procfs_children(pid, &kids, &kn, &kcap);
	for (size_t i = 0; i < kn; i++) {
		if (*n == *cap)
			*v = xrealloc(*v, (*cap = *cap ? *cap * 2 : 64) * sizeof(**v));
		(*v)[(*n)++] = (struct node){.pid = kids[i], .parent = pid};
	}
	free(kids);
}

/* Parent pid of pid from /proc, or -1. */
static pid_t ppid_of(pid_t pid)
{
	struct proc_stat st;
	return procfs_task_stat(pid, 0, &st) < 0 ? -1 : st.ppid;
}

size_t reaper_signal_below(pid_t root, int sig)
{
	struct node *v = NULL;
	size_t n = 0, cap = 0, signalled = 0;
	add_children(root, &v, &n, &cap);
	for (size_t i = 0; i < n; i++)
		add_children(v[i].pid, &v, &n, &cap);
	for (size_t i = 0; i < n; i++) {
		int pfd = (int)syscall(SYS_pidfd_open, v[i].pid, 0);
		if (pfd < 0)
			continue;
		if (ppid_of(v[i].pid) == v[i].parent &&
		    syscall(SYS_pidfd_send_signal, pfd, sig, NULL, 0) == 0)
			signalled++;
		close(pfd);
	}
	free(v);
	return signalled;
}

/* Reap what has exited. Returns 1 when the reaper has no child left. */
static int reap(struct reaper *r)
{
	for (;;) {
		int status;
		pid_t pid = waitpid(-1, &status, WNOHANG | __WALL);
		if (pid > 0) {
			send_msg(r, REAPER_EXITED, pid, status);
			if (pid == r->cmd)
				r->cmd_done = true;
			continue;
		}
		return pid < 0 && errno == ECHILD;
	}
}

static _Noreturn void kill_everything(struct reaper *r)
{
	/* The supervisor is gone: every supervised process would now fail
	 * its memory calls with ENOSYS. End them all; orphans come back to
	 * us as the subreaper, so repeat until no child is left. The
	 * userfaultfds we hold close only when we exit, after the last
	 * process is reaped: until then a fault on evicted memory waits (a
	 * killable wait, fs/userfaultfd.c handle_userfault), never reads
	 * zeros. */
	for (int round = 0; round < 500; round++) {
		reaper_signal_below(getpid(), SIGKILL);
		if (reap(r))
			_exit(0);
		struct timespec ts = {0, 10 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	_exit(1);
}

void reaper_main(struct launch_spec *spec, int from_sup, int to_sup)
{
	struct reaper rp = {.from_sup = from_sup, .to_sup = to_sup};
	struct reaper *r = &rp;
	/* It may hold a userfaultfd for every evicted address space. */
	struct rlimit nofile;
	if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
		nofile.rlim_cur = nofile.rlim_max;
		(void)setrlimit(RLIMIT_NOFILE, &nofile);
	}
	if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0) {
		send_msg(r, REAPER_FORK_FAILED, 0, errno);
		_exit(125);
	}
	sigset_t chld;
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	/* The supervisor blocked every forwarded signal before forking us;
	 * block SIGCHLD too and read it from a signalfd. */
	sigprocmask(SIG_BLOCK, &chld, NULL);
	int sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
	if (sfd < 0) {
		send_msg(r, REAPER_FORK_FAILED, 0, errno);
		_exit(125);
	}
	spec->parent = getpid();
	r->cmd = fork();
	if (r->cmd == 0) {
		close(from_sup);
		close(to_sup);
		close(sfd);
		launch_exec(spec);
	}
	if (r->cmd < 0) {
		send_msg(r, REAPER_FORK_FAILED, 0, errno);
		_exit(125);
	}
	close(spec->sock);
	if (fault_hit("reaper_start_stall"))
		sleep(2);
	send_msg(r, REAPER_STARTED, r->cmd, 0);
	char title[96];
	snprintf(title, sizeof(title), "memvisor reaper of pid %d", (int)r->cmd);
	proctitle_set("memvisor-reap", title);

	int64_t kill_at = -1; /* monotonic ns when SIGKILL follows SIGTERM */
	for (;;) {
		struct pollfd pfd[2] = {{.fd = from_sup, .events = POLLIN},
					{.fd = sfd, .events = POLLIN}};
		int timeout = -1;
		if (kill_at >= 0) {
			int64_t left = kill_at - (int64_t)mv_now_ns();
			timeout = left > 0 ? (int)(left / 1000000) + 1 : 0;
		}
		if (poll(pfd, 2, timeout) < 0 && errno != EINTR)
			kill_everything(r);
		if (pfd[0].revents) {
			struct reaper_cmd c;
			int n = read_cmd(r, &c);
			if (n == 0)
				kill_everything(r);
			if (n > 0 && c.op == 'K' && kill_at < 0) {
				reaper_signal_below(getpid(), SIGTERM);
				kill_at = (int64_t)mv_now_ns() + (int64_t)c.grace_ms * 1000000;
			}
		}
		if (pfd[1].revents) {
			struct signalfd_siginfo si;
			while (read(sfd, &si, sizeof(si)) > 0)
				;
		}
		if (kill_at >= 0 && (int64_t)mv_now_ns() >= kill_at) {
			reaper_signal_below(getpid(), SIGKILL);
			kill_at = (int64_t)mv_now_ns() + 100 * 1000000;
		}
		if (reap(r) && r->cmd_done) {
			send_msg(r, REAPER_EMPTY, 0, 0);
			_exit(0);
		}
	}
}
