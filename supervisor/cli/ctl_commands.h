/* memvisor ctl: the commands, one table. For each: the words that name
 * it, its arguments (an options.h table whose object is the request's
 * args), the request it makes, and how its result is shown. */
#ifndef MV_CLI_CTL_COMMANDS_H
#define MV_CLI_CTL_COMMANDS_H

#include "supervisor/cli/ctl_show.h"
#include "supervisor/cli/options.h"

#include <jansson.h>
#include <stdbool.h>

struct ctl_command {
	const char *name;    /* the words after `ctl`: "ps", "policy set" */
	const char *request; /* NULL: the operands name the request ("cmd") and
			      * give its args ("args"): `call` */
	const struct cli_arg *args;
	size_t n_args;
	/* How its result is shown without --json; NULL: the reply starts a
	 * stream of events. */
	void (*show)(json_t *result, const struct ctl_show_opts *o);
	const char *job; /* the member of the result that names the job
			  * --wait follows, or NULL: no --wait */
	bool image;	 /* that job writes an image at the result's "dir" */
	const char *summary;
	bool cancel; /* asks the job to stop, then follows it to its end */
	bool waits;  /* always follows its job to its end (a short one) */
	bool table;  /* its text is a table: cut to a terminal's width */
	/* Checks the words beyond what the table can (names): 0, or
	 * -EINVAL after saying what is wrong. NULL: nothing more. */
	int (*check)(json_t *args);
};

extern const struct ctl_command ctl_commands[];
extern const size_t ctl_commands_count;

/* The command that words (n of them) start with, the one of the longest
 * name if several do, or NULL; *used: how many words its name took. */
const struct ctl_command *ctl_command_find(char **words, int n, int *used);

#endif
