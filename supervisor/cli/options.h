/* Command-line helpers shared by the subcommands: option tables turned
 * into getopt_long arguments and help text. */
#ifndef MV_CLI_H
#define MV_CLI_H

#include <getopt.h>
#include <stdio.h>

struct cli_opt {
	const char *name;
	int has_arg; /* no_argument / required_argument */
	int val;     /* short option character, or a value > 255 for long-only */
	const char *arg;
	const char *help;
};

/* Fill longopts (n + 1 entries) and a getopt short-option string (size >= 3n + 2)
 * from the table. The short string starts with '+' (stop at the first
 * non-option) and ':' (report missing arguments as ':'). */
void cli_getopt_tables(const struct cli_opt *opts, size_t n, struct option *longopts,
		       char *shortopts);

/* Print the options of a table, aligned. */
void cli_print_opts(FILE *f, const struct cli_opt *opts, size_t n);

/* Parse a non-negative decimal number of seconds ("2", "0.5") into ms. 0 or -EINVAL. */
int cli_parse_seconds_ms(const char *s, int *ms);

#endif
