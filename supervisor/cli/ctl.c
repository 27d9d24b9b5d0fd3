/* memvisor ctl: the command-line client of the control socket. Text for
 * people (--no-legend: tables without headers), the result itself with
 * --json[=short|pretty] for scripts.
 *
 * The words are read in two passes against tables (options.h): ctl's own
 * options up to the command's name, then the command's words (ctl_commands.c)
 * with ctl's options again, in any order. The command's table fills the
 * request's args, ctl's fills struct client_opts.
 *
 * Exit status (enum ctl_exit): 0 ok, 1 the supervisor answered with an
 * error, 2 usage, 3 cannot connect; 130 (128 + SIGINT) when Ctrl-C ends a
 * client following a job (ctl_follow.c). */
#include "supervisor/cli/ctl.h"
#include "supervisor/cli/agent.h"
#include "common/util.h"
#include "supervisor/cli/ctl_commands.h"
#include "supervisor/cli/ctl_conn.h"
#include "supervisor/cli/ctl_events.h"
#include "supervisor/cli/ctl_find.h"
#include "supervisor/cli/ctl_follow.h"
#include "supervisor/cli/ctl_show.h"
#include "supervisor/cli/term.h"
#include "supervisor/cli/options.h"
#include "supervisor/host/agent.h"

#include <ctype.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct client_opts {
	const char *socket;
	const char *name;
	const char *container; /* -c: a container of memvisor agent */
	enum cli_json json;
	struct ctl_show_opts show;
	bool wait;
	int timeout_ms;
	int width; /* a table's lines are cut to it (0: not) */
};

/* ctl's own options, taken before the command's name and after it. */
static const struct cli_arg common_args[] = {
    {.name = "socket",
     .short_name = 's',
     .arg = "PATH",
     .kind = CLI_STRING,
     .key = "socket",
     .help = "the supervisor's socket (default: the only one running)"},
    {.name = "name",
     .short_name = 'n',
     .arg = "NAME",
     .kind = CLI_STRING,
     .key = "name",
     .help = "the supervisor started with run --name NAME"},
    {.name = "container",
     .short_name = 'c',
     .arg = "ID",
     .kind = CLI_STRING,
     .key = "container",
     .help = "a container of memvisor agent (its OCI id or name), asked of the agent's socket"},
    {.name = "json",
     .short_name = 'j',
     .arg = "[=MODE]",
     .kind = CLI_JSON_MODE,
     .key = "json",
     .help = "print the result as JSON: short (one line; one per event), pretty"},
    {.name = "no-legend",
     .kind = CLI_FLAG,
     .key = "no_legend",
     .help = "tables without column headers and summary lines"},
    {.name = "full",
     .kind = CLI_FLAG,
     .key = "full",
     .help = "tables' lines whole on a terminal too (else cut to its width)"},
    {.name = "timeout",
     .short_name = 't',
     .arg = "SECONDS",
     .kind = CLI_SECONDS,
     .key = "timeout_ms",
     .help = "how long to wait for a reply (default 30)"},
};

static const struct cli_arg help_args[] = {
    {.name = "help", .short_name = 'h', .kind = CLI_HELP, .help = "show this help"},
};

/* Only before a command's name. */
static const struct cli_arg list_args[] = {
    {.name = "list",
     .kind = CLI_FLAG,
     .key = "list",
     .help = "list the running memvisors of this user"},
};

/* Only after the name of a command that starts a job. */
static const struct cli_arg wait_args[] = {
    {.name = "wait", .kind = CLI_FLAG, .key = "wait", .help = "follow the job to its end"},
};

static void usage(FILE *f)
{
	fprintf(f, "Usage: memvisor ctl [OPTION]... COMMAND [ARG]...\n"
		   "Query and control a running memvisor over its socket.\n\nOptions:\n");
	cli_print_args(f, common_args, ARRAY_SIZE(common_args));
	cli_print_args(f, list_args, ARRAY_SIZE(list_args));
	cli_print_args(f, help_args, ARRAY_SIZE(help_args));
	fprintf(f, "\nCommands:\n");
	for (size_t i = 0; i < ctl_commands_count; i++) {
		const struct ctl_command *c = &ctl_commands[i];
		char syn[128], line[160];
		cli_synopsis(c->args, c->n_args, false, syn, sizeof(syn));
		snprintf(line, sizeof(line), "%s%s", c->name, syn);
		cli_print_row(f, line, c->summary);
	}
	fprintf(f, "\nRun 'memvisor ctl COMMAND --help' for a command's options; ctl's own\n"
		   "options may also follow the command.\n"
		   "The socket is found from --socket or --name, then $MEMVISOR_SOCKET, then\n"
		   "the only running memvisor of this user.\n"
		   "Exit status: 0 ok, 1 error reply, 2 usage, 3 cannot connect; 130 when\n"
		   "Ctrl-C ends a client following a job (the job goes on).\n");
}

/* The usage line of c; with all, also of the other commands named with
 * its first word (policy, policy set). */
static void cmd_synopsis(FILE *f, const struct ctl_command *c, bool all)
{
	size_t first = strcspn(c->name, " ");
	const char *lead = "Usage:";
	for (size_t i = 0; i < ctl_commands_count; i++) {
		const struct ctl_command *o = &ctl_commands[i];
		char syn[128];
		bool sibling = strncmp(o->name, c->name, first) == 0 &&
			       (!o->name[first] || o->name[first] == ' ');
		if (o != c && !(all && sibling))
			continue;
		fprintf(f, "%s memvisor ctl %s [OPTION]...%s\n", lead, o->name,
			cli_synopsis(o->args, o->n_args, false, syn, sizeof(syn)));
		lead = "      ";
	}
}

static void cmd_help(const struct ctl_command *c)
{
	cmd_synopsis(stdout, c, false);
	printf("%c%s.\n\nOptions:\n", toupper((unsigned char)c->summary[0]), c->summary + 1);
	cli_print_args(stdout, c->args, c->n_args);
	if (c->job && !c->cancel && !c->waits)
		cli_print_args(stdout, wait_args, ARRAY_SIZE(wait_args));
	cli_print_args(stdout, common_args, ARRAY_SIZE(common_args));
	cli_print_args(stdout, help_args, ARRAY_SIZE(help_args));
}

/* Read c's words (argv[0] is the last word of its name) into the
 * request's args and ctl's options. 0, CLI_HELP_ASKED or -EINVAL. */
static int parse_cmd(const struct ctl_command *c, int argc, char **argv, json_t *args,
		     json_t *copts)
{
	struct cli_table t[] = {
	    {c->args, c->n_args, args},
	    {common_args, ARRAY_SIZE(common_args), copts},
	    {wait_args, c->job && !c->cancel && !c->waits ? ARRAY_SIZE(wait_args) : 0, copts},
	    {help_args, ARRAY_SIZE(help_args), NULL},
	};
	char prog[64];
	snprintf(prog, sizeof(prog), "memvisor ctl: %s", c->name);
	return cli_parse(prog, t, ARRAY_SIZE(t), argc, argv, NULL);
}

static struct client_opts client_opts(json_t *copts)
{
	json_t *timeout = json_object_get(copts, "timeout_ms");
	return (struct client_opts){
	    .socket = cli_string(copts, "socket"),
	    .name = cli_string(copts, "name"),
	    .container = cli_string(copts, "container"),
	    .json = cli_json_mode(copts, "json", CLI_JSON_SHORT),
	    .show = {.legend = !cli_flag(copts, "no_legend"),
		     .tty = isatty(STDOUT_FILENO),
		     .width = cli_flag(copts, "full") ? 0 : term_width(STDOUT_FILENO),
		     .selector = ""},
	    .wait = cli_flag(copts, "wait"),
	    .timeout_ms = timeout ? (int)json_integer_value(timeout) : 30000,
	    .width = cli_flag(copts, "full") ? 0 : term_width(STDOUT_FILENO),
	};
}

/* The options that chose the supervisor, for hints to repeat
 * (ctl_show_opts.selector): -c ID (with the agent's --socket if given),
 * -n NAME, --socket PATH, or the socket $MEMVISOR_SOCKET named (a hint
 * pasted where the variable is not set still reaches it). "" when the
 * only supervisor running was taken. */
static char *selector_words(const struct client_opts *o)
{
	const char *env = getenv("MEMVISOR_SOCKET");
	const char *sock = o->socket ? o->socket : !o->name && !o->container ? env : NULL;
	const char *opt[] = {"-c", "-n", "--socket"};
	const char *val[] = {o->container, o->name, sock && *sock ? sock : NULL};
	size_t len = 1;
	for (size_t i = 0; i < ARRAY_SIZE(opt); i++)
		len += val[i] ? strlen(opt[i]) + 4 * strlen(val[i]) + 5 : 0;
	char *buf = xcalloc(1, len), *word = xmalloc(len);
	for (size_t i = 0, n = 0; i < ARRAY_SIZE(opt); i++)
		if (val[i])
			n += (size_t)snprintf(buf + n, len - n, "%s %s ", opt[i],
					      mv_shell_word(val[i], word, len));
	free(word);
	return buf;
}

/* One live socket as --list shows it: what its hello says. */
static json_t *describe_socket(const char *path)
{
	json_t *o = json_pack("{s:s, s:n, s:n, s:[]}", "socket", path, "pid", "name", "command");
	struct ctl_conn c;
	json_t *r = NULL;
	if (ctl_conn_open(path, 2000, &c) != CTL_EXIT_OK)
		return o;
	if (ctl_conn_call(&c, "hello", NULL, &r) == CTL_EXIT_OK) {
		json_object_set(o, "pid", json_object_get(r, "pid"));
		if (json_is_string(json_object_get(r, "name")))
			json_object_set(o, "name", json_object_get(r, "name"));
		json_object_set(o, "command", json_object_get(r, "command"));
		json_decref(r);
	}
	ctl_conn_close(&c);
	return o;
}

/* --list: every live socket, with the name, pid and command line it
 * serves. */
static int list_sockets(const struct client_opts *o)
{
	size_t n;
	char **v = ctl_find_live(&n);
	json_t *all = json_array();
	for (size_t i = 0; i < n; i++)
		json_array_append_new(all, describe_socket(v[i]));
	ctl_find_free(v);
	if (o->json) {
		cli_json_print(stdout, all, o->json);
		json_decref(all);
		return CTL_EXIT_OK;
	}
	struct term_cut cut;
	term_cut_begin(&cut, o->width);
	if (o->show.legend)
		printf("%-16s %7s  %-40s %s\n", "NAME", "PID", "SOCKET", "COMMAND");
	size_t i;
	json_t *s;
	json_array_foreach(all, i, s)
	{
		json_t *name = json_object_get(s, "name"), *pid = json_object_get(s, "pid");
		char p[24] = "-";
		if (json_is_integer(pid))
			snprintf(p, sizeof(p), "%lld", (long long)json_integer_value(pid));
		printf("%-16s %7s  %-40s ", json_is_string(name) ? json_string_value(name) : "-", p,
		       json_string_value(json_object_get(s, "socket")));
		ctl_show_cmdline(json_object_get(s, "command"), 0);
		printf("\n");
	}
	term_cut_end(&cut);
	json_decref(all);
	return CTL_EXIT_OK;
}

/* Send c's request; show its result, or follow the job it started. */
static int request(const struct ctl_command *c, struct ctl_conn *conn, json_t *args,
		   const struct client_opts *o)
{
	const char *cmd = c->request ? c->request : cli_string(args, "cmd");
	json_t *req = c->request ? args : json_object_get(args, "args");
	json_t *result = NULL;
	if (c->request) { /* `call` sends the protocol's names: it gets them back */
		conn->args = c->args;
		conn->n_args = c->n_args;
	}
	int rc = ctl_conn_call(conn, cmd, json_incref(req), &result);
	conn->args = NULL;
	conn->n_args = 0;
	if (rc)
		return rc;
	if (o->wait || c->cancel || c->waits) {
		struct ctl_follow f = {
		    .id = json_integer_value(json_object_get(result, c->job)),
		    .json = o->json,
		    .show = o->show,
		    .image_dir = c->image ? cli_string(result, "dir") : NULL,
		    .cancel = c->cancel,
		};
		rc = ctl_follow_job(conn, &f);
	} else if (o->json) {
		cli_json_print(stdout, result, o->json);
	} else {
		struct term_cut cut;
		term_cut_begin(&cut, c->table ? o->width : 0);
		c->show(result, &o->show);
		term_cut_end(&cut);
	}
	json_decref(result);
	return rc;
}

/* -c ID: the container's own socket, from the agent's (--socket, else
 * the default agent socket). */
static int container_socket(const struct client_opts *o, char **out)
{
	_cleanup_free_ char *agent = o->socket ? xstrdup(o->socket) : agent_default_socket();
	struct ctl_conn conn;
	json_t *r = NULL;
	int rc = ctl_conn_open(agent, o->timeout_ms, &conn);
	if (rc)
		return rc;
	rc = ctl_conn_call(&conn, "container", json_pack("{s:s}", "id", o->container), &r);
	ctl_conn_close(&conn);
	if (rc)
		return rc;
	const char *s = json_string_value(json_object_get(r, "socket"));
	*out = s ? xstrdup(s) : NULL;
	json_decref(r);
	return s ? CTL_EXIT_OK : CTL_EXIT_REPLY;
}

static int run_cmd(const struct ctl_command *c, json_t *args, const struct client_opts *o)
{
	_cleanup_free_ char *path = NULL;
	int rc;
	if (o->container)
		rc = container_socket(o, &path);
	else if (!o->socket && !o->name && c->request && !strcmp(c->request, "containers"))
		rc = (path = agent_default_socket()) ? CTL_EXIT_OK : CTL_EXIT_CONNECT;
	else
		rc = ctl_find_socket(o->socket, o->name, &path);
	if (rc)
		return rc;
	struct ctl_conn conn;
	if ((rc = ctl_conn_open(path, o->timeout_ms, &conn)))
		return rc;
	conn.json_errors = o->json != CLI_JSON_OFF;
	signal(SIGPIPE, SIG_IGN);
	rc = c->show ? request(c, &conn, args, o)
		     : ctl_events_follow(&conn, args, o->json, &o->show);
	ctl_conn_close(&conn);
	return rc;
}

/* The command that words name, its words read into args and copts; or
 * NULL when that was all (help, a usage error): *status is then the exit
 * status. */
static const struct ctl_command *find_cmd(int n, char **words, json_t *args, json_t *copts,
					  int *status)
{
	int used;
	const struct ctl_command *c = ctl_command_find(words, n, &used);
	if (!c) {
		fprintf(stderr, "memvisor ctl: unknown command '%s' (see memvisor ctl --help)\n",
			words[0]);
		*status = CTL_EXIT_USAGE;
		return NULL;
	}
	int rc = parse_cmd(c, n - used + 1, words + used - 1, args, copts);
	if (rc == 0 && c->check)
		rc = c->check(args);
	/* A word that is well formed but names nothing (an image directory
	 * that does not exist) is not a usage error: 1, as for checkpoint. */
	if (rc == CLI_HELP_ASKED)
		cmd_help(c);
	else if (rc == -EINVAL)
		cmd_synopsis(stderr, c, true);
	*status = rc == CLI_HELP_ASKED ? CTL_EXIT_OK
		  : rc == -EINVAL      ? CTL_EXIT_USAGE
				       : CTL_EXIT_REPLY;
	return rc == 0 ? c : NULL;
}

int ctl_client_main(int argc, char **argv)
{
	_cleanup_json_ json_t *copts = json_object(), *args = json_object();
	struct cli_table top[] = {
	    {common_args, ARRAY_SIZE(common_args), copts},
	    {list_args, ARRAY_SIZE(list_args), copts},
	    {help_args, ARRAY_SIZE(help_args), NULL},
	};
	int first, status;
	int rc = cli_parse("memvisor ctl", top, ARRAY_SIZE(top), argc, argv, &first);
	if (rc == CLI_HELP_ASKED)
		usage(stdout);
	if (rc < 0)
		fprintf(stderr, "Usage: memvisor ctl [OPTION]... COMMAND [ARG]... "
				"(see memvisor ctl --help)\n");
	if (rc)
		return rc < 0 ? CTL_EXIT_USAGE : CTL_EXIT_OK;
	if (cli_string(copts, "socket") && cli_string(copts, "name")) {
		fprintf(stderr, "memvisor ctl: --socket and --name: choose one\n");
		return CTL_EXIT_USAGE;
	}
	if (cli_flag(copts, "list")) {
		struct client_opts o = client_opts(copts);
		return list_sockets(&o);
	}
	if (first >= argc) {
		usage(stderr);
		return CTL_EXIT_USAGE;
	}
	const struct ctl_command *c = find_cmd(argc - first, argv + first, args, copts, &status);
	if (!c)
		return status;
	struct client_opts o = client_opts(copts);
	_cleanup_free_ char *sel = selector_words(&o);
	o.show.selector = sel;
	return run_cmd(c, args, &o);
}
