/* The checkpoint job (docs/image-format.md, docs/protocol.md):
 *
 *   stopping  seize and interrupt every thread of every chosen process,
 *             re-scanning threads (and, for all processes, the tree) until
 *             nothing new appears, and wait for every stop
 *   layout    per process: registers of every thread, its regions, the
 *             committed pages of each (pagemap), shared-memory objects
 *   copying   committed pages read with process_vm_readv (shared memory
 *             through its file) into large buffers, checksummed, and
 *             written by a second thread
 *   (resume)  every thread detached: the pause ends here, measured from
 *             the first interrupt to the last detach
 *   syncing   pages header, manifest, fsyncs, rename into place
 *
 * Everything runs on the job's thread, which is the ptrace tracer.
 * Every path detaches every thread; a failure removes the temporary
 * directory. A process that exits meanwhile is recorded as gone, which
 * fails the job only when it was asked for by pid. */
#ifndef MV_CHECKPOINT_H
#define MV_CHECKPOINT_H

#include "supervisor/image/dir.h"
#include "supervisor/supervise/jobs.h"

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* Job error codes beyond ctl.h's. */

#define CKPT_STOP_TIMEOUT_MS 10000
#define CKPT_BUFFER_DEFAULT  (64u << 20)

struct checkpoint_req {
	struct imgdir dir; /* prepared: the temporary directory exists */
	bool all;	   /* every supervised process, found at stop time */
	pid_t *pids;	   /* else these (with a pidfd each, taken over) */
	int *pidfds;
	size_t n;
	size_t buffer; /* staging buffer bytes */
	int stop_timeout_ms;
	bool evict; /* then drop the private memory, served back on demand (evict.h) */
	bool live;  /* copy private anonymous memory while the program runs (live.c) */
};

/* The job's run function: ctx is a struct checkpoint_req. */
int checkpoint_run(struct job *j);

/* The job's ctx_free: removes the temporary directory if the image was
 * not committed (a job that never started), frees the request. */
void checkpoint_req_free(void *ctx);

#endif
