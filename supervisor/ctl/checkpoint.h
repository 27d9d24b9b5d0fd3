/* The checkpoint control command (docs/protocol.md): checks
 * its arguments, the processes and the directory at once, so that every
 * mistake is an error reply, then starts the job and answers with its id. */
#ifndef MV_CTL_CHECKPOINT_H
#define MV_CTL_CHECKPOINT_H

#include "supervisor/ctl/ctl.h"

/* {"dir": ABSOLUTE PATH, "pids": [PID...], "force": BOOL, "buffer": BYTES,
 *  "stop_timeout_ms": MS} -> {"job": ID, "dir": PATH} */
int ctl_cmd_checkpoint(struct mv *mv, struct ctl_call *call, json_t *args, json_t **result,
		       struct mv_err *err);

#endif
