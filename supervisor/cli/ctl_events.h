/* memvisor ctl events: following the event stream, filtered in the
 * client as strace -p and -e filter: by process (--pid), by process tree
 * (--tree), by system call (--syscall) and by event type (--type). The
 * request itself has no arguments: every subscriber gets every event. */
#ifndef MV_CLI_CTL_EVENTS_H
#define MV_CLI_CTL_EVENTS_H

#include "supervisor/cli/ctl_conn.h"
#include "supervisor/cli/ctl_show.h"
#include "supervisor/cli/options.h"

#include <jansson.h>

/* The event types there are ("call", "start", ...), comma-separated. */
extern const char ctl_event_types[];

/* Check the filter words args holds (the events command's table: "pids",
 * "trees", "syscalls", "types"): every system call and type name known.
 * 0, or -EINVAL after saying on stderr what is wrong. */
int ctl_events_check(json_t *args);

/* Subscribe and print every event that passes the filter in args until
 * memvisor exits (as JSON in mode json, unless OFF). CTL_EXIT_OK then, or
 * what the subscription failed with. */
int ctl_events_follow(struct ctl_conn *c, json_t *args, enum cli_json json,
		      const struct ctl_show_opts *o);

#endif
