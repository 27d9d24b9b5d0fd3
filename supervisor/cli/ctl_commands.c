/* memvisor ctl: the commands, one table. docs/protocol.md has each
 * request and its arguments. */
#include "supervisor/cli/ctl_commands.h"
#include "supervisor/cli/agent.h"
#include "common/util.h"
#include "supervisor/cli/ctl_events.h"
#include "supervisor/cli/ctl_show.h"

#include <string.h>

#define ARGS(a) .args = a, .n_args = ARRAY_SIZE(a)

static const struct cli_arg regions_args[] = {
    {.arg = "PID", .kind = CLI_PID, .key = "pid"},
    {.name = "source",
     .arg = "HOW",
     .kind = CLI_STRING,
     .key = "source",
     .help = "read the layout with auto (default), maps or procmap_query"},
};

static const struct cli_arg stats_args[] = {
    {.arg = "PID", .kind = CLI_PID, .key = "pid", .flags = CLI_OPTIONAL},
};

/* The filter is the client's (ctl_events.h): nothing is sent. */
static const struct cli_arg events_args[] = {
    {.name = "pid",
     .arg = "PID",
     .kind = CLI_PID,
     .key = "pids",
     .flags = CLI_MANY,
     .help = "only the events of this process (repeat for several)"},
    {.name = "tree",
     .arg = "PID",
     .kind = CLI_PID,
     .key = "trees",
     .flags = CLI_MANY,
     .help = "only the events of this process and its descendants, new ones too"},
    {.name = "syscall",
     .arg = "NAME[,NAME]",
     .kind = CLI_STRING,
     .key = "syscalls",
     .flags = CLI_MANY,
     .help = "only calls of these system calls (and no other event, unless --type)"},
    {.name = "type",
     .arg = "TYPE[,TYPE]",
     .kind = CLI_STRING,
     .key = "types",
     .flags = CLI_MANY,
     .help = "only these events: call, start, exec, exit, job, evict_unservable"},
};

static const struct cli_arg job_args[] = {
    {.arg = "ID", .kind = CLI_JOB, .key = "id"},
};

static const struct cli_arg mark_args[] = {
    {.arg = "NAME", .kind = CLI_STRING, .key = "name", .flags = CLI_OPTIONAL},
    {.name = "pid",
     .arg = "PID",
     .kind = CLI_PID,
     .key = "pid",
     .help = "the process to mark, alone (default: the command's tree)"},
    {.name = "hold",
     .kind = CLI_FLAG,
     .key = "hold",
     .help = "keep the process stopped at the mark until a rollback or unmark"},
};

static const struct cli_arg mark_name_args[] = {
    {.arg = "NAME", .kind = CLI_STRING, .key = "name", .flags = CLI_OPTIONAL},
};

static const struct cli_arg rollback_args[] = {
    {.arg = "NAME", .kind = CLI_STRING, .key = "name", .flags = CLI_OPTIONAL},
    {.name = "until",
     .arg = "CALL[:FD]",
     .kind = CLI_STRING,
     .key = "until",
     .help = "let it run and stop it again when it enters CALL (with FD), crashes, "
	     "exits or the time limit passes; none: the limit only"},
    {.name = "timeout",
     .arg = "SECONDS",
     .kind = CLI_SECONDS_NONZERO,
     .key = "timeout_ms",
     .help = "with --until: the time limit (default 10)"},
    {.name = "close-fds",
     .kind = CLI_FLAG,
     .key = "close_fds",
     .help = "close the descriptors opened since the mark"},
    {.name = "hold",
     .kind = CLI_FLAG,
     .key = "hold",
     .help = "keep it stopped at the mark, as mark --hold does, until the next rollback "
	     "or unmark"},
};

static const struct cli_arg checkpoint_args[] = {
    {.arg = "DIR", .kind = CLI_PATH, .key = "dir"},
    {.name = "pid",
     .arg = "PID",
     .kind = CLI_PID,
     .key = "pids",
     .flags = CLI_MANY,
     .help = "only this process (repeat for several; default every one)"},
    {.name = "force",
     .kind = CLI_FLAG,
     .key = "force",
     .help = "replace DIR if it is an image or an empty directory"},
    {.name = "evict",
     .kind = CLI_FLAG,
     .key = "evict",
     .help = "then drop the private memory; it is served back on demand"},
    {.name = "live",
     .kind = CLI_FLAG,
     .key = "live",
     .help = "copy private memory while the program runs: it stops only to be "
	     "write-protected (with --evict, again to drop what it did not write)"},
    {.name = "buffer",
     .arg = "SIZE",
     .kind = CLI_SIZE,
     .key = "buffer",
     .help = "staging memory, 16M to 16G (default 64M)"},
    {.name = "stop-timeout",
     .arg = "SECONDS",
     .kind = CLI_SECONDS_NONZERO,
     .key = "stop_timeout_ms",
     .help = "how long a thread may take to stop (default 10)"},
};

static const struct cli_arg reload_args[] = {
    {.arg = "DIR", .kind = CLI_REALPATH, .key = "dir"},
    {.name = "rate",
     .arg = "MB/s",
     .kind = CLI_RATE,
     .key = "rate",
     .help = "read the image at most this fast (default no cap)"},
};

static const struct cli_arg policy_set_args[] = {
    {.arg = "FILE", .kind = CLI_REALPATH, .key = "path"},
};

static const struct cli_arg call_args[] = {
    {.arg = "COMMAND", .kind = CLI_STRING, .key = "cmd"},
    {.arg = "JSON-ARGS", .kind = CLI_JSON_OBJECT, .key = "args", .flags = CLI_OPTIONAL},
};

const struct ctl_command ctl_commands[] = {
    {.name = "hello",
     .request = "hello",
     .show = ctl_show_hello,
     .summary = "versions, pid, kernel features"},
    {.name = "status",
     .request = "status",
     .show = ctl_show_status,
     .summary = "uptime, processes, totals, jobs"},
    {.name = "ps",
     .request = "ps",
     .show = ctl_show_ps,
     .table = true,
     .summary = "every supervised process"},
    {.name = "containers",
     .request = "containers",
     .show = ctl_show_containers,
     .table = true,
     .summary = "the containers memvisor agent supervises (docs/agent.md)"},
    {.name = "regions",
     .request = "regions",
     ARGS(regions_args),
     .show = ctl_show_regions,
     .table = true,
     .summary = "a process's address space, as the kernel has it now"},
    {.name = "stats",
     .request = "stats",
     ARGS(stats_args),
     .show = ctl_show_stats,
     .table = true,
     .summary = "calls by syscall and verdict, bytes, service time"},
    {.name = "events",
     .request = "events",
     ARGS(events_args),
     .check = ctl_events_check,
     .summary = "follow the event stream, maybe filtered (Ctrl-C to stop)"},
    {.name = "policy",
     .request = "policy",
     .show = ctl_show_policy,
     .summary = "show the active policy"},
    {.name = "policy set",
     .request = "policy_set",
     ARGS(policy_set_args),
     .show = ctl_show_policy_set,
     .summary = "replace the active policy"},
    {.name = "job",
     .request = "job",
     ARGS(job_args),
     .show = ctl_show_job,
     .job = "id",
     .summary = "a job's progress or result; --wait follows it to the end"},
    {.name = "job cancel",
     .request = "job_cancel",
     ARGS(job_args),
     .show = ctl_show_job,
     .job = "id",
     .cancel = true,
     .summary = "stop a running checkpoint (program resumed, nothing written) or a "
		"rollback's --until run (program held)"},
    {.name = "job unthrottle",
     .request = "job_unthrottle",
     ARGS(job_args),
     .show = ctl_show_unthrottled,
     .job = "id",
     .summary = "lift a running reload's --rate limit (a reload cannot be cancelled)"},
    {.name = "checkpoint",
     .request = "checkpoint",
     ARGS(checkpoint_args),
     .show = ctl_show_checkpoint_started,
     .job = "job",
     .image = true,
     .summary = "write the memory of the processes to an image in DIR"},
    {.name = "reload",
     .request = "reload",
     ARGS(reload_args),
     .show = ctl_show_reload_started,
     .job = "job",
     .summary = "load evicted memory back in the background"},
    {.name = "mark",
     .request = "mark",
     ARGS(mark_args),
     .show = ctl_show_job,
     .job = "job",
     .waits = true,
     .summary = "record the tree to roll back to: memory, layout, registers"},
    {.name = "rollback",
     .request = "rollback",
     ARGS(rollback_args),
     .show = ctl_show_job,
     .job = "job",
     .waits = true,
     .summary = "put the marked processes back to their mark, in place"},
    {.name = "unmark",
     .request = "unmark",
     ARGS(mark_name_args),
     .show = ctl_show_unmarked,
     .summary = "drop the mark and its write tracking"},
    {.name = "jobs",
     .request = "jobs",
     .show = ctl_show_jobs,
     .table = true,
     .summary = "every job of this run"},
    {.name = "metrics",
     .request = "metrics",
     .show = ctl_show_metrics,
     .summary = "counters and gauges in the Prometheus text format"},
    {.name = "call",
     ARGS(call_args),
     .show = ctl_show_raw,
     .summary = "send any request; prints the raw result"},
};

const size_t ctl_commands_count = ARRAY_SIZE(ctl_commands);

/* How many words a name of one or more words takes: all of its words
 * when words start with them, else 0. */
static int name_matches(const char *name, char **words, int n)
{
	int used = 0;
	while (*name) {
		size_t len = strcspn(name, " ");
		if (used == n || strlen(words[used]) != len || strncmp(name, words[used], len) != 0)
			return 0;
		used++;
		name += len;
		name += *name == ' ';
	}
	return used;
}

const struct ctl_command *ctl_command_find(char **words, int n, int *used)
{
	const struct ctl_command *best = NULL;
	*used = 0;
	for (size_t i = 0; i < ARRAY_SIZE(ctl_commands); i++) {
		int m = name_matches(ctl_commands[i].name, words, n);
		if (m > *used) {
			best = &ctl_commands[i];
			*used = m;
		}
	}
	return best;
}
