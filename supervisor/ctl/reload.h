/* The reload control command (docs/protocol-reload.md). */
#ifndef MV_CTL_RELOAD_H
#define MV_CTL_RELOAD_H

#include "supervisor/ctl/ctl.h"

/* {"dir": ABSOLUTE PATH, ["rate": MB/s]} -> {"job": ID, "dir": PATH, "id": IMAGE ID} */
int ctl_cmd_reload(struct mv *mv, struct ctl_call *call, json_t *args, json_t **result,
		   struct mv_err *err);

#endif
