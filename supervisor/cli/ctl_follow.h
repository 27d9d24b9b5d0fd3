/* memvisor ctl: following a job until it ends, on an open connection
 * (the event stream: ctl_events.h). */
#ifndef MV_CLI_CTL_FOLLOW_H
#define MV_CLI_CTL_FOLLOW_H

#include "supervisor/cli/ctl_conn.h"
#include "supervisor/cli/ctl_show.h"
#include "supervisor/cli/options.h"

#include <stdbool.h>

/* How to follow a job. */
struct ctl_follow {
	long long id;
	enum cli_json json; /* the final job object as JSON, unless OFF */
	struct ctl_show_opts show;
	const char *image_dir; /* where a checkpoint job writes its image (said
				* when memvisor went away), or NULL */
	bool cancel;	       /* a cancel was asked: "cancelled" is the good end */
};

/* Poll job f->id until it ends: its progress on stderr, then its result
 * on stdout. CTL_EXIT_OK when the job is done (cancelled, with
 * f->cancel), CTL_EXIT_REPLY when it failed, ended otherwise, or memvisor
 * went away before saying how it ended. Ctrl-C (or SIGTERM) leaves the
 * job running: the client says how to follow or cancel it and exits 130
 * (143). */
int ctl_follow_job(struct ctl_conn *c, const struct ctl_follow *f);

#endif
