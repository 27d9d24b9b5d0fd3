/* The notify thread: receives, decides and answers seccomp notifications
 * (the listener's ioctls: supervisor/kernel/listener.h). */
#ifndef MV_NOTIFY_H
#define MV_NOTIFY_H

#include "supervisor/supervise/mv.h"

#include <stdint.h>

/* Free the listener's buffers (after notify_stop). */
void notify_free(struct mv *mv);

/* Configure the listener (SYNC_WAKE_UP when the kernel has it; records
 * the result in mv->feat) and learn the notification struct sizes. 0 or -errno. */
int notify_setup(struct mv *mv);

/* Start / stop the notify thread. notify_stop stops the adopted
 * listeners' threads too and closes them. */
int notify_start(struct mv *mv);
void notify_stop(struct mv *mv);

/* Adopt a second listener (`runc exec`: the exec'd process root came with
 * a filter of its own): a notify thread of its own, the same decisions.
 * fd is taken over, closed on failure. 0 or -errno. */
int notify_adopt(struct mv *mv, pid_t root, int fd);

/* Release the adopted listeners no process uses any more (their thread
 * stopped, their fd closed); how many are left. */
size_t notify_adopted_sweep(struct mv *mv);

/* Take the adopted listeners away, their threads stopped, their fds not
 * closed: *fds and *roots (malloc'd) get them; how many. A handover. */
size_t notify_detach_adopted(struct mv *mv, int **fds, pid_t **roots);

#endif
