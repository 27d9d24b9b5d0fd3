/* Is a control client inside the supervised tree?
 *
 * Every supervised process descends from the reaper: the reaper forks the
 * command and is the child subreaper of everything below it
 * (PR_SET_CHILD_SUBREAPER, supervisor/supervise/reaper.h), so an orphan is
 * reparented to the reaper, never out of its subtree; CLONE_PARENT and
 * setsid do not change that either. A process therefore cannot leave the
 * supervised tree, and one outside cannot enter it: a decision taken once,
 * at accept, stays true for the whole connection.
 *
 * The peer is the process that called connect(): the kernel records it in
 * the socket (sk_peer_pid) and keeps it whatever happens to the fd after.
 * A supervised process that hands its connected socket to an outside one
 * over SCM_RIGHTS hands over a refused connection. The other way round, an
 * outside process of the same uid that connects and passes the socket in
 * chose to let the program talk to memvisor: it could as well relay the
 * requests itself, so nothing is lost by allowing it.
 *
 * Races, and why they do not open a hole:
 *  - pid reuse of the peer: the peer is pinned by a pidfd taken from the
 *    socket itself (SO_PEERPIDFD, Linux 6.5), which names the connecting
 *    process and no other. Before 6.5 it is pidfd_open() of the
 *    SO_PEERCRED pid: if the peer exited and its pid was reused between
 *    connect() and accept() (a pid wrap in that moment), the new holder of
 *    the pid is judged instead. After the walk the pidfd must still name a
 *    live process, else the connection is refused.
 *  - pid reuse of an ancestor during the walk: the first step (the peer's
 *    parent) is read through the pidfd when the kernel can (PIDFD_GET_INFO,
 *    6.13). A parent that exits mid-walk reparents its supervised children
 *    to the reaper, which stays alive (and its pid ours) until memvisor
 *    reaps it; only an ancestor reused by a pid wrap in the microseconds of
 *    the walk could mislead it. */
#include "supervisor/ctl/peer.h"
#include "common/util.h"
#include "supervisor/kernel/pidfd.h"
#include "supervisor/kernel/procfs.h"

#include <errno.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77
#endif

/* Deeper than any real tree; a bound so that a corrupt /proc read cannot
 * loop forever. */
#define PEER_MAX_DEPTH 4096

static int peer_pidfd(int sock, pid_t pid)
{
	int fd = -1;
	socklen_t len = sizeof(fd);
	if (getsockopt(sock, SOL_SOCKET, SO_PEERPIDFD, &fd, &len) == 0 && fd >= 0)
		return fd;
	if (errno != ENOPROTOOPT && errno != EINVAL)
		return -errno; /* ESRCH: the peer has exited */
	fd = (int)syscall(SYS_pidfd_open, pid, 0);
	return fd < 0 ? -errno : fd;
}

/* The parent of pid: through the pidfd for the peer itself when the kernel
 * can say, from /proc otherwise. */
static int parent_of(pid_t pid, int pidfd, pid_t *ppid)
{
	if (pidfd >= 0 && pidfd_ppid(pidfd, ppid) == 0)
		return 0;
	struct proc_stat st;
	int rc = procfs_stat(pid, &st);
	if (rc == 0)
		*ppid = st.ppid;
	return rc;
}

int ctl_peer_check(struct mv *mv, int sock, pid_t pid)
{
	if (pid <= 0)
		return -ESRCH;
	int pidfd = peer_pidfd(sock, pid);
	if (pidfd < 0)
		return pidfd;
	int rc = 0;
	pid_t p = pid;
	for (int depth = 0; depth < PEER_MAX_DEPTH; depth++) {
		/* memvisor's own ancestors are outside; so is init. */
		if (p <= 1 || p == mv->self)
			break;
		if (p == mv->reaper_pid || (mv->tree_top > 0 && p == mv->tree_top)) {
			rc = -EPERM;
			break;
		}
		pid_t pp;
		rc = parent_of(p, p == pid ? pidfd : -1, &pp);
		if (rc < 0)
			break;
		p = pp;
	}
	/* The peer must still be the process the walk started from. */
	if (rc == 0 && syscall(SYS_pidfd_send_signal, pidfd, 0, NULL, 0) < 0)
		rc = -errno;
	close(pidfd);
	return rc;
}
