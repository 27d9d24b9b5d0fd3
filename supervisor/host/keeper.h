/* The agent's keeper: what the reaper is to `memvisor run`, for the
 * containers of `memvisor agent`, which are not the agent's children.
 *
 *   memvisor agent ──fork──> keeper      (forked first, holds nothing else)
 *        │  master socket: one channel per container ('C')
 *        └─ per container: its init's pidfd ('P'), the userfaultfds of its
 *           evicted memory ('H' / 'R', the reaper's protocol: registry.c calls
 *           reaper_hold_fd on mv->reaper_wr, which is the channel), 'D' when
 *           the agent lets the container go
 *
 * A channel that ends without 'D' (the agent died, or lost track of the
 * container) makes the keeper SIGKILL that container: its init through
 * the pidfd, which ends its PID namespace, and every descendant (a
 * container sharing the host's PID namespace). The keeper closes the
 * container's userfaultfds only once its init is dead, so a fault on
 * evicted memory waits and dies with the process, never reads zeros
 * (fs/userfaultfd.c userfaultfd_release). When the master socket ends
 * (the agent is gone) every container is ended so, and the keeper exits
 * once all are dead. */
#ifndef MV_KEEPER_H
#define MV_KEEPER_H

#include <sys/types.h>

/* Fork the keeper. Its pid, with the agent's end of the master socket in
 * *master; -errno. Call before any thread starts. */
pid_t keeper_start(int *master);

/* Hand the keeper a container, whose init is pid (pidfd): the agent's end of
 * the container's channel in *chan (for mv->reaper_wr). 0 or -errno. */
int keeper_add(int master, pid_t pid, int pidfd, int *chan);

/* The container is over (its init exited) or released: the keeper closes
 * what it held of it and forgets it. Closes chan. */
void keeper_drop(int chan);

#endif
