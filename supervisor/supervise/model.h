/* Keeping each process's address-space model true: reconciled from the
 * kernel on demand (a query, a checkpoint), with the calls logged since
 * the last reconciliation giving regions their provenance. */
#ifndef MV_MODEL_H
#define MV_MODEL_H

#include "supervisor/supervise/mv.h"
#include "supervisor/kernel/procmap.h"

struct model_cost {
	const char *how;   /* sources used */
	uint64_t read_ns;  /* kernel layout and residency */
	uint64_t total_ns; /* including provenance */
};

/* Rebuild pid's model from the kernel now. Main thread, without mv->lock
 * (it takes it briefly). 0, or -ESRCH when pid is not a running
 * supervised process (or has just exited), or -errno. */
int model_reconcile(struct mv *mv, pid_t pid, enum procmap_source src, struct model_cost *cost);

/* Mapped and committed bytes of pid now (/proc/PID/statm): cheap. */
int model_usage(pid_t pid, uint64_t *mapped, uint64_t *committed);

#endif
