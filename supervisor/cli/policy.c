#include "supervisor/cli/policy.h"
#include "common/syscalls.h"
#include "common/util.h"
#include "policy/needs.h"
#include "policy/policy.h"
#include "supervisor/cli/options.h"

#include <stdio.h>
#include <string.h>

static const struct cli_arg policy_args[] = {
    {.arg = "COMMAND", .kind = CLI_STRING, .key = "command"},
    {.arg = "FILE", .kind = CLI_STRING, .key = "files", .flags = CLI_MANY | CLI_OPTIONAL},
    {.name = "explain",
     .short_name = 'e',
     .kind = CLI_FLAG,
     .key = "explain",
     .help = "also show which calls stay in the kernel and which are notified"},
    {.name = "notify-all",
     .kind = CLI_FLAG,
     .key = "notify_all",
     .help = "explain as under run --notify-all"},
    {.name = "json",
     .short_name = 'j',
     .arg = "[=MODE]",
     .kind = CLI_JSON_MODE,
     .key = "json",
     .help = "print the policy in its canonical JSON form: pretty (the default) or short"},
    {.name = "help", .short_name = 'h', .kind = CLI_HELP, .help = "show this help"},
};

#define SYNOPSIS "Usage: memvisor policy check [OPTION]... FILE...\n"

static void usage(FILE *f)
{
	fprintf(f, SYNOPSIS "Validate policy files (docs/policy.md). Errors are printed as\n"
			    "FILE:LINE:COL: /json/pointer: message.\n\n");
	cli_print_args(f, policy_args, ARRAY_SIZE(policy_args));
	fprintf(f,
		"\nExit status: 0 if every FILE is valid, 1 if one is not, 2 for usage errors.\n");
}

static int check_one(const char *path, bool explain, bool notify_all, enum cli_json json)
{
	struct policy *p;
	struct pol_diag d = {0};
	int rc = policy_load(path, &p, &d);
	for (size_t i = 0; i < d.n; i++)
		fprintf(stderr, "%s\n", d.msg[i]);
	pol_diag_free(&d);
	if (rc < 0)
		return 1;
	if (json) {
		json_t *j = policy_to_json(p);
		cli_json_print(stdout, j, json);
		json_decref(j);
	} else {
		printf("%s: ok\n", path);
	}
	if (explain) {
		struct needs n;
		needs_compile(p, notify_all, &n);
		needs_describe(&n, stdout);
		needs_free(&n);
	}
	policy_free(p);
	return 0;
}

/* policy check, its words read into o. */
static int check_all(json_t *o)
{
	json_t *files = json_object_get(o, "files");
	if (!json_array_size(files)) {
		fprintf(stderr, "memvisor policy: no FILE given\n" SYNOPSIS);
		return 2;
	}
	bool notify_all = cli_flag(o, "notify_all"), explain = notify_all || cli_flag(o, "explain");
	if (explain && syscalls_init() < 0) {
		fprintf(stderr, "memvisor: cannot resolve system call numbers\n");
		return 2;
	}
	int status = 0;
	for (size_t i = 0; i < json_array_size(files); i++)
		status |= check_one(json_string_value(json_array_get(files, i)), explain,
				    notify_all, cli_json_mode(o, "json", CLI_JSON_PRETTY));
	return status;
}

int policy_main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	_cleanup_json_ json_t *o = json_object();
	struct cli_table t = {policy_args, ARRAY_SIZE(policy_args), o};
	int rc = cli_parse("memvisor policy", &t, 1, argc, argv, NULL);
	if (rc == CLI_HELP_ASKED) {
		usage(stdout);
		return 0;
	}
	if (rc < 0) {
		fprintf(stderr, SYNOPSIS);
		return 2;
	}
	if (strcmp(cli_string(o, "command"), "check") != 0) {
		fprintf(stderr,
			"memvisor: policy: unknown command '%s' (see memvisor policy --help)\n",
			cli_string(o, "command"));
		return 2;
	}
	return check_all(o);
}
