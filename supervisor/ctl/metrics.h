/* A supervisor's counters and gauges in the Prometheus text exposition
 * format (version 0.0.4), for the `metrics` control command and for
 * `run --metrics-file`, which node_exporter's textfile collector reads.
 * docs/protocol.md ("metrics") lists every metric. */
#ifndef MV_CTL_METRICS_H
#define MV_CTL_METRICS_H

#include "supervisor/ctl/ctl.h"

#define METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* The exposition now (malloc'd). Main thread, without mv->lock (it takes
 * it, and each evicted space's locks, briefly). */
char *metrics_text(struct mv *mv);

/* The metrics command: {} -> {"content_type": ..., "text": EXPOSITION}. */
int ctl_cmd_metrics(struct mv *mv, struct ctl_call *call, json_t *args, json_t **result,
		    struct mv_err *err);

/* run --metrics-file: write mv->opts.metrics_file now (a file that cannot
 * be written is an error before the command starts), then every
 * mv->opts.metrics_interval_ms on mv's loop. 0 or -errno, after a message
 * on stderr. Each write makes a new file beside it and renames it over
 * the old one, so a reader sees one whole exposition or the other. */
int metrics_file_start(struct mv *mv);

/* Write text to path as run --metrics-file does: a file of mode 0644
 * beside it, renamed over it. 0 or -errno. */
int metrics_write_file(const char *path, const char *text);

/* The last write (the final counts, memvisor_up 0), and stop. A failure
 * is logged. */
void metrics_file_stop(struct mv *mv);

#endif
