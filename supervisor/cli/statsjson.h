/* --stats-json FILE: the per-process counters written at exit
 * (format in docs/stats-json.md). */
#ifndef MV_STATSJSON_H
#define MV_STATSJSON_H

#include "supervisor/supervise/mv.h"

/* Before the command starts: can the file be written where it goes (a
 * temporary file beside it is made and removed, as statsjson_write will
 * make one)? 0, or -errno after printing why: a bad path must stop memvisor
 * before anything runs, not after the command's status is lost. */
int statsjson_check(const char *path);

/* Write atomically (temporary file, then rename). 0 or -errno, after
 * printing why. */
int statsjson_write(struct mv *mv, const char *path, int exit_code);

#endif
