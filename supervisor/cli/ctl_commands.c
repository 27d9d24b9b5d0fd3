/* memvisor ctl: the commands, one table. docs/protocol.md has each
 * request and its arguments. */
#include "supervisor/cli/ctl_commands.h"
#include "common/util.h"
#include "supervisor/cli/ctl_show.h"

#include <string.h>

#define ARGS(a) a, ARRAY_SIZE(a)

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

static const struct cli_arg job_args[] = {
    {.arg = "ID", .kind = CLI_JOB, .key = "id"},
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
	     "write-protected"},
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
    {"hello", "hello", NULL, 0, ctl_show_hello, NULL, false, "versions, pid, kernel features"},
    {"status", "status", NULL, 0, ctl_show_status, NULL, false, "uptime, processes, totals, jobs"},
    {"ps", "ps", NULL, 0, ctl_show_ps, NULL, false, "every supervised process"},
    {"regions", "regions", ARGS(regions_args), ctl_show_regions, NULL, false,
     "a process's address space, as the kernel has it now"},
    {"stats", "stats", ARGS(stats_args), ctl_show_stats, NULL, false,
     "calls by syscall and verdict, bytes, service time"},
    {"events", "events", NULL, 0, NULL, NULL, false, "follow the event stream (Ctrl-C to stop)"},
    {"policy", "policy", NULL, 0, ctl_show_raw, NULL, false, "show the active policy"},
    {"policy set", "policy_set", ARGS(policy_set_args), ctl_show_raw, NULL, false,
     "replace the active policy"},
    {"job", "job", ARGS(job_args), ctl_show_job, "id", false,
     "a job's progress or result; --wait follows it to the end"},
    {"checkpoint", "checkpoint", ARGS(checkpoint_args), ctl_show_checkpoint_started, "job", true,
     "write the memory of the processes to an image in DIR"},
    {"reload", "reload", ARGS(reload_args), ctl_show_reload_started, "job", false,
     "load evicted memory back in the background"},
    {"jobs", "jobs", NULL, 0, ctl_show_jobs, NULL, false, "every job of this run"},
    {"metrics", "metrics", NULL, 0, ctl_show_metrics, NULL, false,
     "counters and gauges in the Prometheus text format"},
    {"call", NULL, ARGS(call_args), ctl_show_raw, NULL, false,
     "send any request; prints the raw result"},
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
