/* memvisor ctl: the command-line client of the control socket. Tables for
 * people, the raw result with --json for scripts.
 *
 * Exit status: 0 ok, 1 the supervisor answered with an error, 2 usage,
 * 3 cannot connect. */
#include "supervisor/cli/ctl.h"
#include "common/util.h"
#include "supervisor/cli/ctl_conn.h"
#include "supervisor/cli/ctl_find.h"
#include "supervisor/cli/ctl_follow.h"
#include "supervisor/cli/ctl_show.h"
#include "supervisor/cli/options.h"

#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct client_opts {
	const char *socket;
	bool json;
	bool list;
	int timeout_ms;
};

/* ---- commands ------------------------------------------------------- */

struct ctl_op {
	const char *name;
	const char *usage;
	int min_args, max_args;
	/* Build the request args from the command's words; print usage errors. */
	int (*args)(int argc, char **argv, json_t **args);
	void (*render)(json_t *result);
	const char *summary;
};

static int no_args(int argc, char **argv, json_t **args)
{
	*args = json_object();
	return 0;
}

static int parse_pid(const char *s, long long *out)
{
	char *end;
	long long v = strtoll(s, &end, 10);
	if (!*s || *end || v <= 0) {
		fprintf(stderr, "memvisor ctl: '%s' is not a process id\n", s);
		return -1;
	}
	*out = v;
	return 0;
}

static int pid_args(int argc, char **argv, json_t **args)
{
	long long pid;
	if (argc < 1 || parse_pid(argv[0], &pid) < 0)
		return -1;
	*args = json_pack("{s:I}", "pid", (json_int_t)pid);
	for (int i = 1; i < argc; i++) {
		if (strncmp(argv[i], "--source=", 9) == 0) {
			json_object_set_new(*args, "source", json_string(argv[i] + 9));
		} else {
			fprintf(stderr, "memvisor ctl: unexpected argument '%s'\n", argv[i]);
			json_decref(*args);
			return -1;
		}
	}
	return 0;
}

static int opt_pid_args(int argc, char **argv, json_t **args)
{
	if (argc == 0)
		return no_args(argc, argv, args);
	return pid_args(argc, argv, args);
}

/* --wait on checkpoint or job: follow the job to its end (follow_job). */
static bool wait_for_job;

static int job_args(int argc, char **argv, json_t **args)
{
	char *end;
	long long id = strtoll(argv[0], &end, 10);
	if (!*argv[0] || *end || id <= 0) {
		fprintf(stderr, "memvisor ctl: '%s' is not a job id\n", argv[0]);
		return -1;
	}
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--wait") != 0) {
			fprintf(stderr, "memvisor ctl: unexpected argument '%s'\n", argv[i]);
			return -1;
		}
		wait_for_job = true;
	}
	*args = json_pack("{s:I}", "id", (json_int_t)id);
	return 0;
}

/* checkpoint DIR [--pid PID]... [--force] [--wait] [--buffer SIZE] [--stop-timeout SECONDS] */
static int checkpoint_args(int argc, char **argv, json_t **args)
{
	const char *dir = NULL;
	json_t *pids = json_array();
	*args = json_object();
	for (int i = 0; i < argc; i++) {
		const char *a = argv[i];
		long long pid;
		uint64_t size;
		if (strcmp(a, "--force") == 0) {
			json_object_set_new(*args, "force", json_true());
		} else if (strcmp(a, "--evict") == 0) {
			json_object_set_new(*args, "evict", json_true());
		} else if (strcmp(a, "--wait") == 0) {
			wait_for_job = true;
		} else if (strcmp(a, "--pid") == 0 && i + 1 < argc) {
			if (parse_pid(argv[++i], &pid) < 0)
				goto fail;
			json_array_append_new(pids, json_integer((json_int_t)pid));
		} else if (strcmp(a, "--stop-timeout") == 0 && i + 1 < argc) {
			int ms;
			if (cli_parse_seconds_ms(argv[++i], &ms) < 0 || ms < 1) {
				fprintf(stderr,
					"memvisor ctl: --stop-timeout: '%s' is not a number of "
					"seconds\n",
					argv[i]);
				goto fail;
			}
			json_object_set_new(*args, "stop_timeout_ms", json_integer(ms));
		} else if (strcmp(a, "--buffer") == 0 && i + 1 < argc) {
			if (mv_parse_size(argv[++i], &size) < 0) {
				fprintf(stderr, "memvisor ctl: --buffer: '%s' is not a size\n",
					argv[i]);
				goto fail;
			}
			json_object_set_new(*args, "buffer", json_integer((json_int_t)size));
		} else if (a[0] == '-' || dir) {
			fprintf(stderr, "memvisor ctl: usage: checkpoint DIR [--pid PID]... "
					"[--force] [--wait]\n");
			goto fail;
		} else {
			dir = a;
		}
	}
	if (!dir) {
		fprintf(stderr, "memvisor ctl: checkpoint: no directory given\n");
		goto fail;
	}
	/* The supervisor has its own working directory. */
	char path[8192];
	if (dir[0] == '/') {
		snprintf(path, sizeof(path), "%s", dir);
	} else {
		char cwd[4096];
		if (!getcwd(cwd, sizeof(cwd))) {
			fprintf(stderr, "memvisor ctl: getcwd: %s\n", strerror(errno));
			goto fail;
		}
		snprintf(path, sizeof(path), "%s/%s", cwd, dir);
	}
	json_object_set_new(*args, "dir", json_string(path));
	if (json_array_size(pids))
		json_object_set_new(*args, "pids", pids);
	else
		json_decref(pids);
	return 0;
fail:
	json_decref(pids);
	json_decref(*args);
	return -1;
}

/* reload DIR [--rate MB/s] [--wait] */
static int reload_args(int argc, char **argv, json_t **args)
{
	const char *dir = NULL;
	*args = json_object();
	for (int i = 0; i < argc; i++) {
		char *end;
		if (strcmp(argv[i], "--wait") == 0) {
			wait_for_job = true;
		} else if (strcmp(argv[i], "--rate") == 0 && i + 1 < argc) {
			double rate = strtod(argv[++i], &end);
			if (!*argv[i] || *end || rate < 0) {
				fprintf(stderr,
					"memvisor ctl: --rate: '%s' is not a number of MB/s\n",
					argv[i]);
				goto fail;
			}
			json_object_set_new(*args, "rate", json_real(rate));
		} else if (argv[i][0] == '-' || dir) {
			fprintf(stderr, "memvisor ctl: usage: reload DIR [--rate MB/s] [--wait]\n");
			goto fail;
		} else {
			dir = argv[i];
		}
	}
	char *abs = dir ? realpath(dir, NULL) : NULL;
	if (!abs) {
		fprintf(stderr, "memvisor ctl: reload: %s: %s\n", dir ? dir : "no directory given",
			dir ? strerror(errno) : "usage: reload DIR [--rate MB/s] [--wait]");
		goto fail;
	}
	json_object_set_new(*args, "dir", json_string(abs));
	free(abs);
	return 0;
fail:
	json_decref(*args);
	return -1;
}

/* `ctl call CMD [JSON]`: any command with raw arguments, for scripts. */
static int call_args(int argc, char **argv, json_t **args)
{
	if (argc < 2) {
		*args = json_object();
		return 0;
	}
	json_error_t e;
	*args = json_loads(argv[1], 0, &e);
	if (!*args || !json_is_object(*args)) {
		fprintf(stderr, "memvisor ctl: call: arguments must be a JSON object: %s\n",
			*args ? "not an object" : e.text);
		json_decref(*args);
		return -1;
	}
	return 0;
}

static int policy_args(int argc, char **argv, json_t **args)
{
	if (argc == 0)
		return no_args(argc, argv, args);
	if (argc == 2 && strcmp(argv[0], "set") == 0) {
		char *abs = realpath(argv[1], NULL);
		if (!abs) {
			fprintf(stderr, "memvisor ctl: %s: %s\n", argv[1], strerror(errno));
			return -1;
		}
		*args = json_pack("{s:s}", "path", abs);
		free(abs);
		return 0;
	}
	fprintf(stderr, "memvisor ctl: usage: policy [set FILE]\n");
	return -1;
}

static const struct ctl_op ops[] = {
    {"hello", "hello", 0, 0, no_args, ctl_show_hello, "versions, pid, kernel features"},
    {"status", "status", 0, 0, no_args, ctl_show_status, "uptime, processes, totals, jobs"},
    {"ps", "ps", 0, 0, no_args, ctl_show_ps, "every supervised process"},
    {"regions", "regions PID [--source=auto|procmap_query|maps]", 1, 2, pid_args, ctl_show_regions,
     "a process's address space, as the kernel has it now"},
    {"stats", "stats [PID]", 0, 1, opt_pid_args, ctl_show_stats,
     "calls by syscall and verdict, bytes, service time"},
    {"events", "events", 0, 0, no_args, NULL, "follow the event stream (Ctrl-C to stop)"},
    {"policy", "policy [set FILE]", 0, 2, policy_args, ctl_show_raw,
     "show the active policy, or replace it"},
    {"job", "job ID [--wait]", 1, 2, job_args, ctl_show_job,
     "a job's progress or result; --wait follows it to the end"},
    {"checkpoint", "checkpoint DIR [--pid PID]... [--force] [--evict] [--wait]", 1, 64,
     checkpoint_args, ctl_show_checkpoint_started,
     "write the memory of the processes to an image in DIR (--evict: and drop it)"},
    {"reload", "reload DIR [--rate MB/s] [--wait]", 1, 4, reload_args, ctl_show_reload_started,
     "load evicted memory back in the background"},
    {"jobs", "jobs", 0, 0, no_args, ctl_show_jobs, "every job of this run"},
    {"call", "call COMMAND [JSON-ARGS]", 1, 2, call_args, ctl_show_raw,
     "send any request; prints the raw result"},
};

static const struct cli_opt client_opts_table[] = {
    {"socket", required_argument, 's', "PATH",
     "the supervisor's socket (default: the only one running)"},
    {"json", no_argument, 'j', NULL, "print the raw JSON result (one line per event for events)"},
    {"list", no_argument, 'l', NULL, "list the running memvisors of this user"},
    {"timeout", required_argument, 't', "SECONDS", "how long to wait for a reply (default 30)"},
    {"help", no_argument, 'h', NULL, "show this help"},
};

static void usage(FILE *f)
{
	fprintf(f, "Usage: memvisor ctl [OPTION]... COMMAND [ARG]...\n"
		   "Query and control a running memvisor over its socket.\n\nOptions:\n");
	cli_print_opts(f, client_opts_table, ARRAY_SIZE(client_opts_table));
	fprintf(f, "\nCommands:\n");
	for (size_t i = 0; i < ARRAY_SIZE(ops); i++)
		fprintf(f, "  %-44s %s\n", ops[i].usage, ops[i].summary);
	fprintf(f, "\nThe socket is found from --socket, then $MEMVISOR_SOCKET, then the only\n"
		   "running memvisor of this user.\n"
		   "Exit status: 0 ok, 1 error reply, 2 usage, 3 cannot connect.\n");
}

/* ---- main ----------------------------------------------------------- */

static int list_sockets(void)
{
	size_t n;
	char **v = ctl_find_live(&n);
	for (size_t i = 0; i < n; i++) {
		struct ctl_conn c;
		json_t *r = NULL;
		printf("%s", v[i]);
		if (ctl_conn_open(v[i], 2000, &c) == CTL_EXIT_OK) {
			if (ctl_conn_call(&c, "hello", NULL, &r) == CTL_EXIT_OK) {
				printf("  pid %lld: ",
				       (long long)json_integer_value(json_object_get(r, "pid")));
				ctl_show_cmdline(json_object_get(r, "command"), 60);
				json_decref(r);
			}
			ctl_conn_close(&c);
		}
		printf("\n");
	}
	ctl_find_free(v);
	return CTL_EXIT_OK;
}

static const struct ctl_op *find_op(const char *name)
{
	for (size_t i = 0; i < ARRAY_SIZE(ops); i++)
		if (strcmp(ops[i].name, name) == 0)
			return &ops[i];
	return NULL;
}

static int parse_client_opts(int argc, char **argv, struct client_opts *o)
{
	struct option longopts[ARRAY_SIZE(client_opts_table) + 1];
	char shortopts[3 * ARRAY_SIZE(client_opts_table) + 3];
	cli_getopt_tables(client_opts_table, ARRAY_SIZE(client_opts_table), longopts, shortopts);
	o->timeout_ms = 30000;
	optind = 1;
	opterr = 0;
	int ch;
	while ((ch = getopt_long(argc, argv, shortopts, longopts, NULL)) != -1) {
		switch (ch) {
		case 's':
			o->socket = optarg;
			break;
		case 'j':
			o->json = true;
			break;
		case 'l':
			o->list = true;
			break;
		case 't':
			if (cli_parse_seconds_ms(optarg, &o->timeout_ms) < 0) {
				fprintf(
				    stderr,
				    "memvisor ctl: --timeout: '%s' is not a number of seconds\n",
				    optarg);
				return -1;
			}
			break;
		case 'h':
			usage(stdout);
			exit(0);
		case ':':
			fprintf(stderr, "memvisor ctl: option '%s' needs an argument\n",
				argv[optind - 1]);
			return -1;
		default:
			fprintf(stderr,
				"memvisor ctl: unknown option '%s' (see memvisor ctl --help)\n",
				argv[optind - 1]);
			return -1;
		}
	}
	return 0;
}

int ctl_client_main(int argc, char **argv)
{
	struct client_opts o = {0};
	if (parse_client_opts(argc, argv, &o) < 0)
		return CTL_EXIT_USAGE;
	if (o.list)
		return list_sockets();
	if (optind >= argc) {
		usage(stderr);
		return CTL_EXIT_USAGE;
	}
	const struct ctl_op *op = find_op(argv[optind]);
	if (!op) {
		fprintf(stderr, "memvisor ctl: unknown command '%s' (see memvisor ctl --help)\n",
			argv[optind]);
		return CTL_EXIT_USAGE;
	}
	int nargs = argc - optind - 1;
	char **words = argv + optind + 1;
	if (nargs < op->min_args || nargs > op->max_args) {
		fprintf(stderr, "memvisor ctl: usage: %s\n", op->usage);
		return CTL_EXIT_USAGE;
	}
	json_t *args = NULL;
	if (op->args(nargs, words, &args) < 0)
		return CTL_EXIT_USAGE;
	_cleanup_free_ char *path = NULL;
	int rc = ctl_find_socket(o.socket, &path);
	if (rc) {
		json_decref(args);
		return rc;
	}
	struct ctl_conn c;
	if ((rc = ctl_conn_open(path, o.timeout_ms, &c))) {
		json_decref(args);
		return rc;
	}
	signal(SIGPIPE, SIG_IGN);
	if (strcmp(op->name, "events") == 0) {
		json_decref(args);
		rc = ctl_follow_events(&c, o.json);
		ctl_conn_close(&c);
		return rc;
	}
	const char *cmd = strcmp(op->name, "call") == 0 ? words[0] : op->name;
	if (strcmp(op->name, "policy") == 0 && json_object_get(args, "path"))
		cmd = "policy_set";
	json_t *result = NULL;
	rc = ctl_conn_call(&c, cmd, args, &result);
	if (rc == CTL_EXIT_OK && wait_for_job) {
		long long id = json_integer_value(
		    json_object_get(result, strcmp(op->name, "job") == 0 ? "id" : "job"));
		const char *d = json_string_value(json_object_get(result, "dir"));
		_cleanup_free_ char *dir =
		    strcmp(op->name, "checkpoint") == 0 && d ? xstrdup(d) : NULL;
		json_decref(result);
		rc = ctl_follow_job(&c, id, o.json, dir);
		ctl_conn_close(&c);
		return rc;
	}
	ctl_conn_close(&c);
	if (rc)
		return rc;
	if (o.json)
		ctl_show_line(result);
	else
		op->render(result);
	json_decref(result);
	return CTL_EXIT_OK;
}
