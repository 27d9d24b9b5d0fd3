/* Reading a supervised process's memory layout from /proc, for policy
 * decisions: its size (statm), the regions over a range (PROCMAP_QUERY on
 * Linux 6.11+, /proc/PID/maps otherwise), whether private file pages were
 * written (PAGEMAP_SCAN on 6.7+, pagemap otherwise), what an fd is, where a
 * thread is blocked.
 *
 * Every function returns 0 or -errno; -ESRCH when the process is gone (an
 * outcome, not an error). The process may change under any of these
 * reads: callers treat the result as true at one instant. */
#ifndef MV_PROCMEM_H
#define MV_PROCMEM_H

#include "policy/decide.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct procmem_vma {
	uint64_t start, end;
	bool r, w, x, shared;
	uint64_t dev, ino; /* 0 for anonymous memory */
	char name[48];	   /* path or [heap]/[stack]/..., truncated */
};

/* Is this region anonymous memory, whatever /proc calls it? Private and
 * shared anonymous mappings, the heap and stacks, memfds, SysV shm and
 * /dev/zero all are. */
bool procmem_vma_anon(const struct procmem_vma *v);

/* Call fn for each region overlapping [start, end), in order; fn returns 0
 * to go on. use_query: PROCMAP_QUERY works on this kernel. */
int procmem_vmas(pid_t pid, bool use_query, uint64_t start, uint64_t end,
		 int (*fn)(void *arg, const struct procmem_vma *v), void *arg);

/* Has any page of [start, end) (a private file mapping) been copied on
 * write, i.e. written? */
int procmem_written(pid_t pid, bool use_scan, uint64_t start, uint64_t end, bool *yes);

/* Regions of the process (lines of /proc/PID/maps). */
int procmem_regions(pid_t pid, uint64_t *n);

/* Bytes mapped (statm's first field) through an open statm fd. */
int procmem_statm(int fd, uint64_t *bytes);

/* Does the process map file (dev, ino) executable / shared? */
int procmem_maps_file(pid_t pid, const struct pol_file_id *f, bool *exec, bool *shared);

/* What the process's fd is. */
int procmem_fd(pid_t pid, int fd, struct pol_fd *out);

/* The process's personality(2) flags. */
int procmem_personality(pid_t pid, unsigned long *persona);

/* Is thread tid (of pid) still inside syscall nr? 1 yes or cannot tell
 * (running, or unreadable), 0 no (blocked elsewhere, or gone). */
int procmem_in_call(pid_t pid, pid_t tid, int nr);

#endif
