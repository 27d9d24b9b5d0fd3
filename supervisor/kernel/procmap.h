/* A process's layout as the kernel has it now: PROCMAP_QUERY (Linux 6.11)
 * when present, /proc/PID/maps parsed otherwise; resident bytes per region
 * from PAGEMAP_SCAN, or /proc/PID/smaps. The raw ioctl lives here only. */
#ifndef MV_PROCMAP_H
#define MV_PROCMAP_H

#include "state/as.h"
#include "supervisor/kernel/features.h"

#include <sys/types.h>

enum procmap_source { PROCMAP_SRC_AUTO, PROCMAP_SRC_QUERY, PROCMAP_SRC_MAPS };

/* Read pid's regions into out (replacing it), with committed bytes.
 * *how names the sources used ("procmap_query+pagemap_scan", ...).
 * 0, -ESRCH when the process is gone, or -errno. */
int procmap_snapshot(pid_t pid, const struct features *f, enum procmap_source src,
		     struct as_model *out, const char **how);

#endif
