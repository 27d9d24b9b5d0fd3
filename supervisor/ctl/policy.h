/* Control commands for the policy (docs/protocol.md):
 *
 *   policy                     -> the active policy, how it is enforced
 *   policy set {"path": FILE}  -> validate FILE, then swap it in atomically
 *
 * Handlers for the table in supervisor/ctl/ctl.h; main thread. */
#ifndef MV_CTL_POLICY_H
#define MV_CTL_POLICY_H

#include "supervisor/ctl/ctl.h"

int ctl_cmd_policy(struct mv *mv, struct ctl_call *call, json_t *args, json_t **result,
		   struct mv_err *err);
int ctl_cmd_policy_set(struct mv *mv, struct ctl_call *call, json_t *args, json_t **result,
		       struct mv_err *err);
/* Validate the policy file at path and swap it in (policy set, and the
 * agent's SIGHUP for each container). 0, or -1 with err (every
 * validation error in err->msg). The loop thread of mv. */
int ctl_policy_load(struct mv *mv, const char *path, struct mv_err *err);

#endif
