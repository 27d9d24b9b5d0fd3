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

/* Start / stop the notify thread. */
int notify_start(struct mv *mv);
void notify_stop(struct mv *mv);

#endif
