/* The seccomp listener: its ioctls (only here) and the notify thread. */
#ifndef MV_NOTIFY_H
#define MV_NOTIFY_H

#include "supervisor/supervise/mv.h"

#include <stdint.h>

/* Configure the listener (SYNC_WAKE_UP when the kernel has it; records
 * the result in mv->feat) and learn the notification struct sizes. 0 or -errno. */
int notify_setup(struct mv *mv);

/* Start / stop the notify thread. */
int notify_start(struct mv *mv);
void notify_stop(struct mv *mv);

/* Is notification id still pending (the thread still waits in the call)?
 * Check it after reading tracee memory and before answering from it. */
bool notify_id_valid(int listener, uint64_t id);

#endif
