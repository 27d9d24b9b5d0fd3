/* memvisor agent: the options, then supervisor/host/agent.c.
 * memvisor oci-profile: the policy's notify rules as an OCI seccomp
 * profile (policy/ociprofile.c). */
#include "supervisor/cli/agent.h"
#include "common/syscalls.h"
#include "common/util.h"
#include "policy/needs.h"
#include "policy/ociprofile.h"
#include "policy/policy.h"
#include "supervisor/cli/options.h"
#include "supervisor/host/agent.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#define DEFAULT_LISTEN	   "/run/memvisor/agent/seccomp.sock"
#define PODMAN_DEFAULT_SEC "/usr/share/containers/seccomp.json"

static const struct cli_arg agent_args[] = {
    {.name = "listen",
     .arg = "PATH",
     .kind = CLI_STRING,
     .key = "listen",
     .help =
	 "where runtimes hand over listeners: the profile's listenerPath (default " DEFAULT_LISTEN
	 ")"},
    {.name = "policy",
     .short_name = 'p',
     .arg = "FILE",
     .kind = CLI_STRING,
     .key = "policy",
     .help = "the policy of a container that names none (docs/policy.md)"},
    {.name = "policy-dir",
     .arg = "DIR",
     .kind = CLI_STRING,
     .key = "policy_dir",
     .help = "DIR/NAME.json is the policy of a container whose annotation or listener metadata "
	     "says memvisor.policy=NAME"},
    {.name = "socket",
     .short_name = 's',
     .arg = "PATH",
     .kind = CLI_STRING,
     .key = "socket",
     .help = "the agent's control socket (default /run/memvisor/agent/agent.sock); containers' are "
	     "in PATH.d/ID.sock"},
    {.name = "metrics-file",
     .arg = "FILE",
     .kind = CLI_STRING,
     .key = "metrics_file",
     .help = "keep the node's Prometheus metrics (the agent's and every container's) in FILE, "
	     "rewritten every few seconds"},
    {.name = "metrics-interval",
     .arg = "SECONDS",
     .kind = CLI_STRING,
     .key = "metrics_interval",
     .help = "how often --metrics-file is rewritten (default 5)"},
    {.name = "log",
     .short_name = 'l',
     .arg = "FILE",
     .kind = CLI_STRING,
     .key = "log",
     .help = "log to FILE instead of stderr"},
    {.name = "log-level",
     .short_name = 'L',
     .arg = "LEVEL",
     .kind = CLI_STRING,
     .key = "log_level",
     .help = "error, warn (default), info or debug"},
    {.name = "help", .short_name = 'h', .kind = CLI_HELP, .help = "show this help"},
};

static void agent_usage(FILE *f)
{
	fprintf(f, "Usage: memvisor agent [OPTION]...\n"
		   "Supervise the containers whose seccomp listeners OCI runtimes (crun, runc)\n"
		   "hand over at the --listen socket (linux.seccomp.listenerPath).\n\n");
	cli_print_args(f, agent_args, ARRAY_SIZE(agent_args));
	fprintf(f, "\nStops on SIGINT or SIGTERM; every container it supervises is then killed,\n"
		   "as it is when the agent dies (docs/agent.md). SIGHUP reads every container's\n"
		   "policy file again and applies it; they run on. SIGUSR2 restarts the agent in\n"
		   "place (its binary again, a new one after an upgrade); they run on.\n"
		   "Exit status: 0 after a signal; 125 if it cannot start or loses its keeper;\n"
		   "2 for usage errors.\n");
}

/* A policy that does not load stops the agent before any container. */
static int check_policy(const char *path)
{
	struct policy *p;
	struct pol_diag d = {0};
	int rc = policy_load(path, &p, &d);
	for (size_t i = 0; i < d.n; i++)
		fprintf(stderr, "%s\n", d.msg[i]);
	pol_diag_free(&d);
	if (rc == 0)
		policy_free(p);
	return rc;
}

int agent_main(int argc, char **argv)
{
	_cleanup_json_ json_t *v = json_object();
	struct cli_table t = {agent_args, ARRAY_SIZE(agent_args), v};
	int rc = cli_parse("memvisor agent", &t, 1, argc, argv, NULL);
	if (rc == CLI_HELP_ASKED) {
		agent_usage(stdout);
		return 0;
	}
	if (rc < 0) {
		fprintf(stderr, "Usage: memvisor agent [OPTION]... (see memvisor agent --help)\n");
		return 2;
	}
	_cleanup_free_ char *def_socket = agent_default_socket();
	struct agent_opts o = {
	    .listen = cli_string(v, "listen") ? cli_string(v, "listen") : DEFAULT_LISTEN,
	    .socket = cli_string(v, "socket") ? cli_string(v, "socket") : def_socket,
	    .policy_path = cli_string(v, "policy"),
	    .policy_dir = cli_string(v, "policy_dir"),
	    .metrics_file = cli_string(v, "metrics_file"),
	    .log_path = cli_string(v, "log"),
	    .log_level = MV_LOG_WARN,
	};
	if (cli_metrics_interval(v, "memvisor agent", &o.metrics_interval_ms) < 0)
		return 2;
	const char *level = cli_string(v, "log_level");
	if (level && log_parse_level(level, &o.log_level) < 0) {
		fprintf(stderr,
			"memvisor agent: --log-level: '%s' is not one of error, warn, info, "
			"debug\n",
			level);
		return 2;
	}
	if ((rc = log_open(o.log_path, o.log_level)) < 0) {
		fprintf(stderr, "memvisor agent: cannot open log file %s: %s\n", o.log_path,
			strerror(-rc));
		return 125;
	}
	if (syscalls_init() < 0) {
		fprintf(stderr, "memvisor agent: cannot resolve system call numbers\n");
		return 125;
	}
	if (o.policy_path && check_policy(o.policy_path) < 0) {
		fprintf(stderr, "memvisor agent: %s: not a valid policy\n", o.policy_path);
		return 125;
	}
	struct stat st;
	if (o.policy_dir) {
		const char *why = stat(o.policy_dir, &st) < 0 ? strerror(errno)
				  : !S_ISDIR(st.st_mode)      ? "not a directory"
							      : NULL;
		if (why) {
			fprintf(stderr, "memvisor agent: --policy-dir %s: %s\n", o.policy_dir, why);
			return 125;
		}
	}
	/* A restart (SIGUSR2) runs the binary named so again, with the same
	 * words: a binary replaced since is an upgrade. */
	char exe[4096];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	_cleanup_free_ char *cmdline = NULL;
	size_t len = 0;
	if (n > 0 && mv_read_file_at(AT_FDCWD, "/proc/self/cmdline", &cmdline, &len) == 0 && len) {
		exe[n] = '\0';
		char *del = strstr(exe, " (deleted)");
		if (del && !del[10])
			*del = '\0';
		o.exe = exe;
		size_t words = 0;
		for (size_t i = 0; i < len; i++)
			words += cmdline[i] == '\0';
		o.argv = xcalloc(words + 2, sizeof(char *));
		for (size_t i = 0, w = 0; i < len && w <= words; i += strlen(cmdline + i) + 1)
			o.argv[w++] = cmdline + i;
	}
	int rc2 = agent_run(&o);
	free(o.argv);
	return rc2;
}

/* ---- oci-profile --------------------------------------------------------- */

static const struct cli_arg profile_args[] = {
    {.name = "policy",
     .short_name = 'p',
     .arg = "FILE",
     .kind = CLI_STRING,
     .key = "policy",
     .help = "the agent's policy: its calls are notified (default: the built-in one)"},
    {.name = "base",
     .short_name = 'b',
     .arg = "PROFILE",
     .kind = CLI_STRING,
     .key = "base",
     .help = "the profile the rest is left to (default: podman's, " PODMAN_DEFAULT_SEC
	     ", if present); 'none': allow the rest"},
    {.name = "listen",
     .arg = "PATH",
     .kind = CLI_STRING,
     .key = "listen",
     .help = "the agent's --listen socket (default " DEFAULT_LISTEN ")"},
    {.name = "metadata",
     .short_name = 'm',
     .arg = "TEXT",
     .kind = CLI_STRING,
     .key = "metadata",
     .help = "listenerMetadata, e.g. name=web (ctl -c web)"},
    {.name = "notify-all",
     .kind = CLI_FLAG,
     .key = "notify_all",
     .help = "notify every memory call (complete statistics)"},
    {.name = "help", .short_name = 'h', .kind = CLI_HELP, .help = "show this help"},
};

static void profile_usage(FILE *f)
{
	fprintf(f,
		"Usage: memvisor oci-profile [OPTION]...\n"
		"Print a seccomp profile (the linux.seccomp section of an OCI config, or a\n"
		"podman --security-opt seccomp= file) that hands memvisor agent the calls\n"
		"the policy needs (SCMP_ACT_NOTIFY) and leaves the rest to the base profile.\n\n");
	cli_print_args(f, profile_args, ARRAY_SIZE(profile_args));
	fprintf(f, "\nExit status: 0; 1 if the policy or the base profile is not valid; 2 for\n"
		   "usage errors.\n");
}

static int load_base(const char *arg, json_t **out)
{
	*out = NULL;
	if (arg && !strcmp(arg, "none"))
		return 0;
	if (!arg && access(PODMAN_DEFAULT_SEC, R_OK) < 0)
		return 0;
	const char *path = arg ? arg : PODMAN_DEFAULT_SEC;
	json_error_t jerr;
	*out = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
	if (!*out) {
		fprintf(stderr, "memvisor oci-profile: %s:%d:%d: %s\n", path, jerr.line,
			jerr.column, jerr.text);
		return -EINVAL;
	}
	return 0;
}

int oci_profile_main(int argc, char **argv)
{
	_cleanup_json_ json_t *v = json_object();
	struct cli_table t = {profile_args, ARRAY_SIZE(profile_args), v};
	int rc = cli_parse("memvisor oci-profile", &t, 1, argc, argv, NULL);
	if (rc == CLI_HELP_ASKED) {
		profile_usage(stdout);
		return 0;
	}
	if (rc < 0) {
		fprintf(stderr, "Usage: memvisor oci-profile [OPTION]... (see memvisor oci-profile "
				"--help)\n");
		return 2;
	}
	if (syscalls_init() < 0)
		return 1;
	struct policy *pol = NULL;
	const char *path = cli_string(v, "policy");
	if (path) {
		struct pol_diag d = {0};
		rc = policy_load(path, &pol, &d);
		for (size_t i = 0; i < d.n; i++)
			fprintf(stderr, "%s\n", d.msg[i]);
		pol_diag_free(&d);
		if (rc < 0)
			return 1;
	} else {
		pol = policy_default();
	}
	_cleanup_json_ json_t *base = NULL;
	if (load_base(cli_string(v, "base"), &base) < 0) {
		policy_free(pol);
		return 1;
	}
	struct needs n;
	needs_compile(pol, cli_flag(v, "notify_all"), &n);
	struct mv_err err = {0};
	const char *listen = cli_string(v, "listen") ? cli_string(v, "listen") : DEFAULT_LISTEN;
	json_t *prof = ociprofile_build(&n, base, listen, cli_string(v, "metadata"), &err);
	needs_free(&n);
	policy_free(pol);
	if (!prof) {
		fprintf(stderr, "memvisor oci-profile: %s\n", err.msg);
		return 1;
	}
	json_dumpf(prof, stdout, JSON_INDENT(2));
	putchar('\n');
	json_decref(prof);
	return 0;
}

/* ---- ctl containers -------------------------------------------------------- */

void ctl_show_containers(json_t *result, const struct ctl_show_opts *o)
{
	json_t *all = json_object_get(result, "containers");
	if (o->legend)
		printf("%-20s %-12s %8s  %-12s %s\n", "ID", "NAME", "PID", "POLICY", "SOCKET");
	size_t i;
	json_t *c;
	json_array_foreach(all, i, c)
	{
		json_t *name = json_object_get(c, "name"), *pol = json_object_get(c, "policy");
		printf("%-20s %-12s %8lld  %-12s %s\n", json_string_value(json_object_get(c, "id")),
		       json_is_string(name) ? json_string_value(name) : "-",
		       (long long)json_integer_value(json_object_get(c, "pid")),
		       json_is_string(pol) ? json_string_value(pol) : "(default)",
		       json_string_value(json_object_get(c, "socket")));
	}
	if (o->legend)
		printf("%zu container%s\n", json_array_size(all),
		       json_array_size(all) == 1 ? "" : "s");
}
