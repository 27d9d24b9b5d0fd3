/* The reaper: a small process between the supervisor and the command.
 *
 *   memvisor (supervisor) ──fork──> reaper ──fork──> launcher -> command
 *
 * It is the child subreaper of the whole supervised tree, so every orphan
 * comes back to it; it reports exits to the supervisor over a pipe, and
 * when the supervisor dies (the pipe reads EOF) it kills the whole tree,
 * because a process whose listener is gone gets ENOSYS for every notified
 * call. PR_SET_PDEATHSIG alone would only reach the command itself. */
#ifndef MV_REAPER_H
#define MV_REAPER_H

#include "tracee/launch.h"

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

/* Commands from the supervisor. */
struct reaper_cmd {
	char op; /* 'K': end every remaining process: SIGTERM, SIGKILL after grace_ms */
	int grace_ms;
};

/* Runs in the reaper process: never returns. from_sup/to_sup are its pipe
 * ends; every other fd it holds is the supervisor's (close-on-exec). */
_Noreturn void reaper_main(struct launch_spec *spec, int from_sup, int to_sup);

#endif
