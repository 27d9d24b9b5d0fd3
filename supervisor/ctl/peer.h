/* Who is at the other end of a control connection: a supervised process
 * (or a descendant of one) may not steer its own supervisor
 * (docs/protocol.md, "Who may connect and do what"). */
#ifndef MV_CTL_PEER_H
#define MV_CTL_PEER_H

#include "supervisor/supervise/mv.h"

/* Decide for the process that connected the accepted socket sock (its
 * SO_PEERCRED pid is pid). Main thread, without mv->lock. Returns 0 when
 * the peer is outside the supervised tree; -EPERM when it or an ancestor
 * is a supervised process; -ESRCH when the peer exited before it could be examined;
 * another -errno when it cannot be told. Callers refuse every nonzero
 * result: a peer that cannot be placed is not trusted. */
int ctl_peer_check(struct mv *mv, int sock, pid_t pid);

#endif
