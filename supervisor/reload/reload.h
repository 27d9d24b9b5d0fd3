/* `reload DIR [rate]`: a job that verifies the image, then streams every
 * page still owed to the processes evicted to it (evict.h), at most
 * `rate` bytes a second read from storage, while the fault workers keep
 * serving demand faults first. When a space owes nothing, its uffd is
 * closed (every range unregistered): the program runs at native speed. */
#ifndef MV_RELOAD_H
#define MV_RELOAD_H

#include "supervisor/ctl/ctl.h"

#define RELOAD_E_CORRUPT  "corrupt_image"
#define RELOAD_E_MISMATCH "image_mismatch"

/* The control command: {"dir":PATH, ["rate":MB/s]} -> {"job":N, ...}. */
int ctl_cmd_reload(struct mv *mv, struct ctl_client *c, json_t *args, json_t **result,
		   struct ctl_err *err);

#endif
