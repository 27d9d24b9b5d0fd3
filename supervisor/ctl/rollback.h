/* The control commands mark, rollback and unmark (docs/protocol.md,
 * docs/rollback.md). */
#ifndef MV_CTL_ROLLBACK_H
#define MV_CTL_ROLLBACK_H

#include "supervisor/ctl/ctl.h"

int ctl_cmd_mark(struct mv *mv, struct ctl_call *call, json_t *args, json_t **result,
		 struct mv_err *err);
int ctl_cmd_rollback(struct mv *mv, struct ctl_call *call, json_t *args, json_t **result,
		     struct mv_err *err);
int ctl_cmd_unmark(struct mv *mv, struct ctl_call *call, json_t *args, json_t **result,
		   struct mv_err *err);

#endif
