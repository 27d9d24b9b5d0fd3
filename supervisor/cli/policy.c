#include "supervisor/cli/policy.h"
#include "common/syscalls.h"
#include "common/util.h"
#include "policy/needs.h"
#include "policy/policy.h"
#include "supervisor/cli/options.h"

#include <stdio.h>
#include <string.h>

enum { OPT_JSON = 256, OPT_NOTIFY_ALL };

static const struct cli_opt check_opts[] = {
    {"explain", no_argument, 'e', NULL,
     "also show which calls stay in the kernel and which are notified"},
    {"notify-all", no_argument, OPT_NOTIFY_ALL, NULL, "explain as under run --notify-all"},
    {"json", no_argument, OPT_JSON, NULL, "print the policy in its canonical JSON form"},
    {"help", no_argument, 'h', NULL, "show this help"},
};

static void usage(FILE *f)
{
	fprintf(f, "Usage: memvisor policy check [OPTION]... FILE...\n"
		   "Validate policy files (docs/policy.md). Errors are printed as\n"
		   "FILE:LINE:COL: /json/pointer: message.\n\n");
	cli_print_opts(f, check_opts, ARRAY_SIZE(check_opts));
	fprintf(f,
		"\nExit status: 0 if every FILE is valid, 1 if one is not, 2 for usage errors.\n");
}

static int check_one(const char *path, bool explain, bool notify_all, bool json)
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
		json_dumpf(j, stdout, JSON_INDENT(2));
		putchar('\n');
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

int policy_main(int argc, char **argv)
{
	if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	if (strcmp(argv[1], "check") != 0) {
		fprintf(stderr,
			"memvisor: policy: unknown command '%s' (see memvisor policy --help)\n",
			argv[1]);
		return 2;
	}
	argc--;
	argv++;
	struct option longopts[ARRAY_SIZE(check_opts) + 1];
	char shortopts[3 * ARRAY_SIZE(check_opts) + 3];
	cli_getopt_tables(check_opts, ARRAY_SIZE(check_opts), longopts, shortopts);
	bool explain = false, notify_all = false, json = false;
	optind = 1;
	opterr = 0;
	int c;
	while ((c = getopt_long(argc, argv, shortopts, longopts, NULL)) != -1) {
		switch (c) {
		case 'e':
			explain = true;
			break;
		case OPT_NOTIFY_ALL:
			notify_all = explain = true;
			break;
		case OPT_JSON:
			json = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			fprintf(stderr, "memvisor: policy check: unknown option '%s'\n",
				argv[optind - 1]);
			return 2;
		}
	}
	if (optind >= argc) {
		fprintf(stderr, "memvisor: policy check: no FILE given\n");
		return 2;
	}
	if (explain && syscalls_init() < 0) {
		fprintf(stderr, "memvisor: cannot resolve system call numbers\n");
		return 2;
	}
	int status = 0;
	for (int i = optind; i < argc; i++)
		status |= check_one(argv[i], explain, notify_all, json);
	return status;
}
