/* --stats-json FILE: the per-process counters written at exit
 * (format in docs/stats-json.md). */
#ifndef MV_STATSJSON_H
#define MV_STATSJSON_H

#include "supervisor/supervise/mv.h"

/* Write atomically (temporary file, then rename). 0 or -errno, after
 * printing why. */
int statsjson_write(struct mv *mv, const char *path, int exit_code);

#endif
