/* The reaper: a small process between the supervisor and the command.
 *
 *   memvisor (supervisor) ──fork──> reaper ──fork──> launcher -> command
 *
 * It is the child subreaper of the whole supervised tree, so every orphan
 * comes back to it; it reports exits to the supervisor over a pipe, and
 * when the supervisor dies (the pipe reads EOF) it kills the whole tree,
 * because a process whose listener is gone gets ENOSYS for every notified
 * call. PR_SET_PDEATHSIG alone would only reach the command itself.
 * It holds duplicates of the userfaultfds of evicted memory, and closes
 * them only once the tree is dead (reaper_hold_fd). */
#ifndef MV_REAPER_H
#define MV_REAPER_H

#include "tracee/launch.h"

#include <stdint.h>
#include <sys/types.h>

enum reaper_msg_type {
	REAPER_STARTED,	    /* pid: the command's pid */
	REAPER_FORK_FAILED, /* status: errno */
	REAPER_EXITED,	    /* pid, status: a child of the reaper was reaped */
	REAPER_EMPTY,	    /* the command and every descendant are gone */
};

struct reaper_msg {
	int type;
	pid_t pid;
	int status;
};

/* Commands from the supervisor, one datagram each. */
struct reaper_cmd {
	char op;      /* 'K': end every remaining process: SIGTERM, SIGKILL after grace_ms;
		       * 'H': hold the fd passed with it (SCM_RIGHTS) as id;
		       * 'R': close the fd held as id */
	int grace_ms; /* 'K' */
	uint64_t id;  /* 'H', 'R' */
};

/* The supervisor's side; chan is its end of the socket the reaper reads
 * its commands from (mv->reaper_wr).
 *
 * End every process that remains: SIGTERM, SIGKILL after grace_ms. */
void reaper_kill_tree(int chan, int grace_ms);

/* Have the reaper hold a duplicate of fd until
 * reaper_release_fd(id), or until every supervised process is dead when
 * the supervisor dies. For userfaultfds of evicted memory: while the
 * reaper holds one, the kernel keeps its ranges registered, so a fault
 * waits (and dies with the process) instead of reading zeros once the
 * supervisor is gone (fs/userfaultfd.c userfaultfd_release). Returns 0,
 * or -errno (-ENOTCONN without a reaper). */
int reaper_hold_fd(int chan, int fd, uint64_t id);
void reaper_release_fd(int chan, uint64_t id);

/* Signal every descendant of root, parents before children. A pid is
 * signalled through a pidfd opened after it was seen as the child of its
 * parent, and only if that is still its parent: a pid reused meanwhile is
 * left alone. Returns how many were signalled. (The reaper ends its tree
 * with it; the agent's keeper a container's.) */
size_t reaper_signal_below(pid_t root, int sig);

/* Runs in the reaper process: never returns. from_sup/to_sup are its pipe
 * ends; every other fd it holds is the supervisor's (close-on-exec). */
_Noreturn void reaper_main(struct launch_spec *spec, int from_sup, int to_sup);

#endif
