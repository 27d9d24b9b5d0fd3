/* memvisor: run a command with its memory system calls supervised.
 *
 * A usage error exits 2, as in every subcommand, except in `run`, which
 * exits like env(1): 125 for its own failures, 126 and 127 when the
 * command cannot be run or found. */
#include "common/fault.h"
#include "common/proctitle.h"
#include "common/util.h"
#include "supervisor/cli/check.h"
#include "supervisor/cli/agent.h"
#include "supervisor/cli/ctl.h"
#include "supervisor/cli/image.h"
#include "supervisor/cli/policy.h"
#include "supervisor/cli/run.h"

#include <stdio.h>
#include <string.h>

struct subcommand {
	const char *name;
	int (*main)(int argc, char **argv);
	const char *summary;
};

static const struct subcommand subcommands[] = {
    {"run", run_main, "run a command under supervision"},
    {"ctl", ctl_client_main, "query and control a running memvisor"},
    {"image", image_main, "summarise or verify a checkpoint image"},
    {"policy", policy_main, "check a policy file"},
    {"check", check_main, "say what this kernel and this user let memvisor do"},
    {"agent", agent_main, "supervise OCI containers (seccomp listenerPath)"},
    {"oci-profile", oci_profile_main, "print the seccomp profile that hands containers to agent"},
};

static void usage(FILE *f)
{
	fprintf(f, "Usage: memvisor COMMAND [OPTION]... [ARG]...\n"
		   "       memvisor --help | --version\n\n"
		   "Commands:\n");
	for (size_t i = 0; i < ARRAY_SIZE(subcommands); i++)
		fprintf(f, "  %-12s %s\n", subcommands[i].name, subcommands[i].summary);
	fprintf(f, "\nRun 'memvisor COMMAND --help' for a command's options.\n"
		   "Exit status: 2 for a usage error; otherwise each command's own (see its\n"
		   "--help): run exits with the command's status, like env(1).\n");
}

int main(int argc, char **argv)
{
	proctitle_init(argc, argv);
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	const char *cmd = argv[1];
	if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
		usage(stdout);
		return 0;
	}
	if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "-V") == 0) {
		printf("memvisor %s\n", MV_VERSION);
		return 0;
	}
	if (strcmp(cmd, "--list-faults") == 0) { /* hidden: for the fault tests */
		fault_list(stdout);
		return 0;
	}
	for (size_t i = 0; i < ARRAY_SIZE(subcommands); i++)
		if (strcmp(cmd, subcommands[i].name) == 0)
			return subcommands[i].main(argc - 1, argv + 1);
	fprintf(stderr, "memvisor: unknown command '%s' (see memvisor --help)\n", cmd);
	return 2;
}
