/* memvisor ctl: results and events printed on stdout, progress on
 * stderr. Each ctl_show_X prints the result of request X as people read
 * it (docs/protocol.md has the fields); --json prints the result itself
 * instead (cli_json_print). */
#ifndef MV_CLI_CTL_SHOW_H
#define MV_CLI_CTL_SHOW_H

#include <jansson.h>
#include <stdbool.h>

/* How results are shown to people. */
struct ctl_show_opts {
	bool legend; /* column headers and summary lines (--no-legend: none) */
	bool tty;    /* stdout is a terminal: running jobs get an ETA */
	int width;   /* a job's line on its own is cut to it (0: never) */
	/* The options that chose this supervisor, as shell words each
	 * followed by a space ("-n web ", or ""): a command printed as a
	 * hint repeats them ("memvisor ctl -n web job 3 --wait"), so that it
	 * reaches the same supervisor when several run. */
	const char *selector;
};

/* A command line (a JSON array of strings), cut after about width
 * characters (0: never). */
void ctl_show_cmdline(json_t *argv, int width);

void ctl_show_hello(json_t *r, const struct ctl_show_opts *o);
void ctl_show_status(json_t *r, const struct ctl_show_opts *o);
void ctl_show_ps(json_t *r, const struct ctl_show_opts *o);
void ctl_show_regions(json_t *r, const struct ctl_show_opts *o);
/* The memory calls the filter leaves in the kernel (a result's
 * "uncounted"), and how to count them; nothing under --notify-all. */
enum uncounted_view { UNCOUNTED_STATS, UNCOUNTED_STATUS, UNCOUNTED_EVENTS };
void ctl_show_uncounted(FILE *f, json_t *u, enum uncounted_view view);
void ctl_show_stats(json_t *r, const struct ctl_show_opts *o);
void ctl_show_policy(json_t *r, const struct ctl_show_opts *o);
void ctl_show_policy_set(json_t *r, const struct ctl_show_opts *o);
void ctl_show_job(json_t *r, const struct ctl_show_opts *o);
void ctl_show_jobs(json_t *r, const struct ctl_show_opts *o);
void ctl_show_checkpoint_started(json_t *r, const struct ctl_show_opts *o);
void ctl_show_reload_started(json_t *r, const struct ctl_show_opts *o);
void ctl_show_unthrottled(json_t *r, const struct ctl_show_opts *o);
/* The Prometheus text of `metrics`, verbatim. */
void ctl_show_unmarked(json_t *r, const struct ctl_show_opts *o);
void ctl_show_metrics(json_t *r, const struct ctl_show_opts *o);

/* Any result, indented and with sorted keys (call). */
void ctl_show_raw(json_t *r, const struct ctl_show_opts *o);

/* One event of the stream, on one line. */
void ctl_show_event(json_t *e, const struct ctl_show_opts *o);

/* A running job's progress on stderr: a bar redrawn in place on a
 * terminal (with an ETA), else one line. */
void ctl_show_progress(json_t *j, bool tty);

#endif
