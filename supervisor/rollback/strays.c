/* Processes made since the mark, killed with everything below them
 * (supervisor/rollback/mark.h, "strays").
 *
 * A process is killed only once it is stopped and its children are
 * listed: a fork under way when the rollback began finishes before its
 * parent stops (copy_process links the child before the parent returns
 * to user space, where SIGSTOP takes it), so no child is born after its
 * parent was looked at. Killed first and listed after, a child born in
 * that window would run on, an orphan of the tree's top. */
#include "common/util.h"
#include "supervisor/kernel/procfs.h"
#include "supervisor/rollback/mark.h"
#include "supervisor/supervise/mv.h"
#include "supervisor/supervise/tree.h"

#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* How long a process may take to stop before its children are listed
 * anyway (a vfork parent waits for its child in the kernel, and forks
 * nothing meanwhile). */
#define STRAY_STOP_NS (500 * 1000000ull)

/* Has the process of pidfd fd ended (a zombie, or reaped)? Waits up to
 * ms for it. */
static bool ended(int fd, int ms)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	return poll(&p, 1, ms) != 0;
}

/* Is every thread of pid stopped, or is it gone (a zombie, reaped)? */
static bool still(pid_t pid)
{
	pid_t *t = NULL;
	size_t n = 0;
	if (procfs_tasks(pid, &t, &n) < 0)
		return true;
	bool all = true;
	for (size_t i = 0; i < n && all; i++) {
		struct proc_stat st;
		if (procfs_task_stat(pid, t[i], &st) < 0)
			continue;
		all = st.state == 'T' || st.state == 't' || st.state == 'Z' || st.state == 'X';
	}
	free(t);
	return all;
}

static void wait_still(pid_t pid, uint64_t deadline)
{
	while (!still(pid) && mv_now_ns() < deadline) {
		struct timespec ts = {0, 50 * 1000};
		nanosleep(&ts, NULL);
	}
}

void rb_kill_below(pid_t pid)
{
	uint64_t deadline = mv_now_ns() + STRAY_STOP_NS;
	pid_t *v = NULL;
	size_t n = 0, cap = 0;
	wait_still(pid, deadline);
	procfs_children(pid, &v, &n, &cap);
	/* v grows as each one's children are listed, once it is stopped. */
	int *fds = NULL;
	for (size_t i = 0; i < n; i++) {
		fds = xrealloc(fds, (i + 1) * sizeof(*fds));
		fds[i] = (int)syscall(SYS_pidfd_open, v[i], 0);
		if (fds[i] < 0)
			continue;
		syscall(SYS_pidfd_send_signal, fds[i], SIGSTOP, NULL, 0);
		wait_still(v[i], deadline);
		procfs_children(v[i], &v, &n, &cap);
	}
	for (size_t i = 0; i < n; i++)
		if (fds[i] >= 0)
			syscall(SYS_pidfd_send_signal, fds[i], SIGKILL, NULL, 0);
	/* Ended before this returns: none is left to be found later, below
	 * a parent killed next or among the orphans (rb_kill_strays). */
	for (size_t i = 0; i < n; i++) {
		if (fds[i] < 0)
			continue;
		int64_t left = (int64_t)(deadline - mv_now_ns()) / 1000000;
		ended(fds[i], (int)(left > 100 ? left : 100));
		close(fds[i]);
	}
	free(fds);
	free(v);
}

/* Is pid a process of mark m? */
static bool marked(const struct rb_mark *m, pid_t pid)
{
	for (size_t i = 0; i <= m->n_members; i++)
		if (rb_proc((struct rb_mark *)m, i)->pid == pid)
			return true;
	return false;
}

unsigned rb_kill_strays(struct rb_mark *m)
{
	/* Under the agent orphans go to the container's init, a process of
	 * the mark: its children made since are kill_new_children's. */
	if (m->mv->tree_top > 0)
		return 0;
	pid_t *v = NULL;
	size_t n = 0, cap = 0;
	unsigned killed = 0;
	tree_tops(m->mv, &v, &n, &cap);
	for (size_t i = 0; i < n; i++) {
		if (marked(m, v[i]))
			continue;
		int fd = (int)syscall(SYS_pidfd_open, v[i], 0);
		if (fd < 0)
			continue;
		if (ended(fd, 0)) { /* killed already, not yet reaped by the reaper */
			close(fd);
			continue;
		}
		syscall(SYS_pidfd_send_signal, fd, SIGSTOP, NULL, 0);
		rb_kill_below(v[i]);
		syscall(SYS_pidfd_send_signal, fd, SIGKILL, NULL, 0);
		ended(fd, 500);
		close(fd);
		killed++;
	}
	free(v);
	return killed;
}
