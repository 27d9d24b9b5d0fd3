/* Hosting a supervisor: what `memvisor run` and `memvisor agent` (one per
 * container) do alike to build a struct mv, give it its seccomp
 * listener, run it on a libev loop and take it down.
 *
 *   host_mv_init(mv, loop)     the process table, policy, events, evicted
 *                              memory, staging buffers (opts filled first)
 *   ctl_server_start(mv)       its control socket (supervisor/ctl/server.h)
 *   host_mv_listen(mv, fd)     the listener: notify thread started
 *   host_mv_watch(mv)          the loop's watchers every supervisor has
 *   ev_run(mv->loop)           until the caller breaks it
 *   host_mv_finish(mv)         jobs waited for, notify thread stopped,
 *                              every process retired
 *   host_mv_free(mv)           everything freed (the agent; run exits)
 *
 * Functions that can fail return 0 or -errno after saying why on stderr
 * (run's start-up) or in the log. */
#ifndef MV_HOST_H
#define MV_HOST_H

#include "supervisor/supervise/mv.h"

/* Set up mv on loop, with mv->opts and mv->feat filled: -EINVAL for a bad
 * policy (said on stderr). Takes over nothing on failure; host_mv_free
 * frees what was made. */
int host_mv_init(struct mv *mv, struct ev_loop *loop);

/* Take listener fd (owned from now on) and start the notify thread. */
int host_mv_listen(struct mv *mv, int fd);

/* Start the watchers every supervisor's loop has: new processes and events
 * (mv->wake) and process exits (mv->exits_epfd). */
void host_mv_watch(struct mv *mv);

/* After the loop: wait for the jobs, stop the notify thread and retire
 * every process left in the table. */
void host_mv_finish(struct mv *mv);

/* Free what host_mv_init made, the control server stopped first; closes
 * the listener. mv itself too. */
void host_mv_free(struct mv *mv);

/* SIGKILL every running process mv knows and their descendants, through
 * the pidfd where there is one. Returns how many were signalled. */
size_t host_kill_known(struct mv *mv);

#endif
