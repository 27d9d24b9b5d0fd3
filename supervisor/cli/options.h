/* Command-line options from tables, the one way every subcommand reads
 * its words: getopt_long arguments and help text made from a table.
 *
 * A table (struct cli_arg) says what each option's argument and each
 * operand is and which member of a JSON object it sets, so that
 * cli_parse reads the whole command line: `--opt=value` and `--opt
 * value`, options before or after operands, values checked, -h/--help. */
#ifndef MV_CLI_H
#define MV_CLI_H

#include <getopt.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

/* Parse a non-negative decimal number of seconds ("2", "0.5") into ms. 0 or -EINVAL. */
int cli_parse_seconds_ms(const char *s, int *ms);

/* --metrics-interval (key metrics_interval) into *ms: 5000 by default, at
 * least 0.1 s, and only with --metrics-file (key metrics_file). 0, or
 * -EINVAL after a message on stderr that begins with prog. */
int cli_metrics_interval(json_t *v, const char *prog, int *ms);

/* What an option's argument or an operand is: how it is checked and the
 * JSON value it becomes. */
enum cli_kind {
	CLI_HELP,	     /* -h/--help: cli_parse stops and says so */
	CLI_FLAG,	     /* an option without argument: true */
	CLI_STRING,	     /* as given */
	CLI_PATH,	     /* made absolute against the working directory */
	CLI_REALPATH,	     /* an existing path, resolved with realpath(3) */
	CLI_PID,	     /* a process id: a positive integer */
	CLI_JOB,	     /* a job id: a positive integer */
	CLI_SECONDS,	     /* decimal seconds ("2", "0.5"), as integer ms */
	CLI_SECONDS_NONZERO, /* the same, at least 1 ms */
	CLI_SIZE,	     /* bytes, with an optional K, M, G or T: an integer */
	CLI_RATE,	     /* a non-negative number of MB/s: a real */
	CLI_JSON_OBJECT,     /* a JSON object */
	CLI_JSON_MODE,	     /* --json[=short|pretty], as systemd's tools: the mode
			      * given, or "" without one (the command's default) */
};

enum {
	CLI_OPTIONAL = 1, /* an operand that may be left out */
	CLI_MANY = 2,	  /* an option that may be repeated, an operand that takes
			   * the rest: the values collect in a JSON array */
};

/* One option (name set) or operand (name NULL) of a command. */
struct cli_arg {
	const char *name; /* --name */
	int short_name;	  /* -c, or 0 */
	const char *arg;  /* the value's name in help; an operand's in usage */
	enum cli_kind kind;
	const char *key; /* the member of the table's object it sets */
	unsigned flags;
	const char *help; /* NULL: accepted but not listed */
};

/* A table of args, and the object their values go in. */
struct cli_table {
	const struct cli_arg *args;
	size_t n;
	json_t *out;
};

enum { CLI_HELP_ASKED = 1 };

/* Read argv (argv[0] names the command) against the tables, each value
 * checked and set in its table's object.
 *
 * rest NULL: options may come anywhere (GNU getopt_long order; "--" ends
 * them) and every operand goes to the tables' operand rows, in order.
 * rest set: options end at the first operand, whose index is stored in
 * *rest: the words are the caller's (a subcommand's).
 *
 * 0; CLI_HELP_ASKED when a CLI_HELP option came (the words after it are
 * not read); or -EINVAL after saying on stderr "PROG: what is wrong". */
int cli_parse(const char *prog, const struct cli_table *t, size_t nt, int argc, char **argv,
	      int *rest);

/* The operands of a table as usage shows them (" DIR [PID] FILE..."),
 * after " [OPTION]..." when with_options and the table has options. */
const char *cli_synopsis(const struct cli_arg *args, size_t n, bool with_options, char *buf,
			 size_t len);

/* One row of a --help: "  LEFT" padded to 30 columns, then help in words
 * wrapped at 80 columns, continued at column 33. */
void cli_print_row(FILE *f, const char *left, const char *help);

/* Print the options of a table, aligned. */
void cli_print_args(FILE *f, const struct cli_arg *args, size_t n);

/* A member of a parsed object: true when the flag was given; the string
 * given, or NULL. */
bool cli_flag(json_t *o, const char *key);
const char *cli_string(json_t *o, const char *key);

/* How to print JSON (a CLI_JSON_MODE option): not at all, on one line,
 * or indented. */
enum cli_json { CLI_JSON_OFF, CLI_JSON_SHORT, CLI_JSON_PRETTY };

/* The mode of a CLI_JSON_MODE member: OFF when it was not given, dflt
 * when it was given without a mode. */
enum cli_json cli_json_mode(json_t *o, const char *key, enum cli_json dflt);

/* Print v as JSON on f in mode (SHORT when OFF) and a newline: one line,
 * or indented; keys in v's own order. */
void cli_json_print(FILE *f, json_t *v, enum cli_json mode);

/* _cleanup_json_ json_t *o: dropped at the end of the scope. */
void cli_json_freep(json_t **o);
#define _cleanup_json_ __attribute__((cleanup(cli_json_freep)))

#endif
