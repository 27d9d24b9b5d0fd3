/* memvisor ctl: following what goes on after the reply, on an open
 * connection: the event stream, or a job until it ends. */
#ifndef MV_CLI_CTL_FOLLOW_H
#define MV_CLI_CTL_FOLLOW_H

#include "supervisor/cli/ctl_conn.h"

#include <stdbool.h>

/* Subscribe and print every event until memvisor exits (raw: one JSON
 * line each). CTL_EXIT_OK then, or what the subscription failed with. */
int ctl_follow_events(struct ctl_conn *c, bool raw);

/* Poll job id until it ends: its progress on stderr, then its result on
 * stdout (raw: the final job object as one JSON line). CTL_EXIT_OK when
 * the job is done, CTL_EXIT_REPLY when it failed or memvisor went away
 * before saying how it ended. image_dir: where a checkpoint job writes
 * its image (said when memvisor went away), or NULL. */
int ctl_follow_job(struct ctl_conn *c, long long id, bool raw, const char *image_dir);

#endif
