/* A process's regions as the kernel has them now: the one loop over them
 * (PROCMAP_QUERY on Linux 6.11+, /proc/PID/maps text parsed by
 * state/procparse.c otherwise), and the model snapshot built from it with
 * resident bytes from PAGEMAP_SCAN, or /proc/PID/smaps. The raw
 * PROCMAP_QUERY ioctl lives here only. Functions return 0 or -errno;
 * -ESRCH when the process is gone (procfs.h). */
#ifndef MV_PROCMAP_H
#define MV_PROCMAP_H

#include "state/as.h"
#include "state/procparse.h"
#include "supervisor/kernel/features.h"

#include <sys/types.h>

/* Call fn for each region of pid overlapping [start, end), in order (see
 * proc_vma_fn). use_query: PROCMAP_QUERY works on this kernel. Either
 * source gives the same regions: the vsyscall page, which /proc/PID/maps
 * prints from the gate area, is added to what PROCMAP_QUERY returns. */
int procmap_vmas(pid_t pid, bool use_query, uint64_t start, uint64_t end, proc_vma_fn fn,
		 void *arg);

/* Does PROCMAP_QUERY work on this kernel? (a feature probe) */
bool procmap_query_works(void);

/* How many regions pid has (lines of /proc/PID/maps). */
int procmap_count(pid_t pid, uint64_t *n);

/* Does pid map the file (dev, ino) executable / shared? */
int procmap_maps_file(pid_t pid, uint64_t dev, uint64_t ino, bool *exec, bool *shared);

enum procmap_source { PROCMAP_SRC_AUTO, PROCMAP_SRC_QUERY, PROCMAP_SRC_MAPS };

/* Read pid's regions into out (replacing it), with committed bytes.
 * *how names the sources used ("procmap_query+pagemap_scan", ...).
 * 0, -ESRCH when the process is gone, or -errno. */
int procmap_snapshot(pid_t pid, const struct features *f, enum procmap_source src,
		     struct as_model *out, const char **how);

/* The same, leaving keep (pid's pagemap, open) with the walk of the
 * address space prefetched (pagemap_prefetch: present or swapped pages,
 * and which are file pages or the zero page), so that the caller's
 * pagemap_runs of the stopped process do not walk the page tables again. */
struct pagemap;
int procmap_snapshot_keep(pid_t pid, const struct features *f, enum procmap_source src,
			  struct as_model *out, const char **how, struct pagemap *keep);

#endif
