/* `reload DIR [rate]`: a job that verifies the image, then streams every
 * page still owed to the processes evicted to it (evict.h), at most
 * `rate` bytes a second read from storage, while the fault workers keep
 * serving demand faults first. When a space owes nothing, its uffd is
 * closed (every range unregistered): the program runs at native speed. */
#ifndef MV_RELOAD_H
#define MV_RELOAD_H

#include "common/err.h"
#include "supervisor/supervise/jobs.h"

#include <stddef.h>

/* Start a reload of the memory evicted to the image at dir (an absolute
 * path), reading at most rate bytes a second from it (0: no cap). dir
 * must hold the image processes are evicted to (MV_E_IMAGE_MISMATCH
 * otherwise, MV_E_INVALID when nothing is evicted), and no other reload
 * may run (MV_E_BUSY). 0 with the job in *out and the image id in id;
 * -errno with err filled. */
int reload_start(struct mv *mv, const char *dir, double rate, struct job **out, char *id,
		 size_t idlen, struct mv_err *err);

#endif
