/* Which pages of another process are present (or swapped, or written):
 * PAGEMAP_SCAN on /proc/PID/pagemap (Linux 6.7) when the kernel has it,
 * reading the pagemap's 8-byte entries otherwise. The raw ioctl lives here
 * only. Functions return 0 or -errno; -ESRCH when the process is gone. */
#ifndef MV_PAGEMAP_H
#define MV_PAGEMAP_H

#include "common/compat.h"
#include "state/as.h"

#include <stdbool.h>
#include <sys/types.h>

/* A run of pages and its categories (PAGE_IS_*). */
struct pm_run {
	uint64_t start, end, cat;
};

struct pagemap {
	int fd;
	bool scan; /* PAGEMAP_SCAN works on this fd */
	/* pagemap_prefetch's one walk, from which pagemap_runs answers
	 * what it can without walking the page tables again. */
	struct pm_run *pre;
	size_t n_pre;
	uint64_t pre_start, pre_end, pre_anyof, pre_known;
};

int pagemap_open(pid_t pid, bool try_scan, struct pagemap *pm);
void pagemap_close(struct pagemap *pm);

/* Walk the page tables of [start, end) once, keeping every run with any
 * of the categories anyof and what it has of known (a superset of
 * anyof). Later pagemap_runs calls within the range whose categories it
 * knows are answered from it: a walk costs what the page tables hold,
 * not what was found (115 ms for 16,384 pages scattered over 64 TiB, 8 KiB
 * of page tables each), and a checkpoint's plan asked twice. For a
 * process that is stopped (the answers are of the instant of the walk).
 * -ENOTTY without PAGEMAP_SCAN: nothing is kept, and pagemap_runs reads
 * as before. */
int pagemap_prefetch(struct pagemap *pm, uint64_t start, uint64_t end, uint64_t anyof,
		     uint64_t known);
/* The same, and without PAGEMAP_SCAN through the pagemap file: 8 bytes a
 * page of the range, present or not (for ranges known to be mapped, not
 * reservations of terabytes). PAGE_IS_PFNZERO is never known there. */
int pagemap_prefetch_any(struct pagemap *pm, uint64_t start, uint64_t end, uint64_t anyof,
			 uint64_t known);

/* Append to *runs the runs of pages in [start, end) that have any of the
 * categories in anyof and none in none (PAGE_IS_* bits). In the fallback,
 * PAGE_IS_PRESENT, PAGE_IS_SWAPPED, PAGE_IS_FILE and, for present pages,
 * PAGE_IS_WRITTEN (not write-protected by a userfaultfd) are known;
 * PAGE_IS_PFNZERO is never reported. Adjacent runs are merged. */
int pagemap_runs(struct pagemap *pm, uint64_t start, uint64_t end, uint64_t anyof, uint64_t none,
		 struct as_range **runs, size_t *n, size_t *cap);

/* Append to *runs the runs of pages in [start, end) that are present or
 * swapped and not write-protected by a userfaultfd: written since they
 * were protected, or never protected. A fresh walk (not prefetched). */
int pagemap_written_runs(struct pagemap *pm, uint64_t start, uint64_t end, struct as_range **runs,
			 size_t *n, size_t *cap);

/* Append to *runs the runs of pages in [start, end) that are present and
 * mapped by this process alone (pagemap's "exclusively mapped" bit: not
 * shared copy-on-write with another process after a fork, nor a KSM
 * page). No PAGEMAP_SCAN category says this: the entries are read. */
int pagemap_exclusive_runs(struct pagemap *pm, uint64_t start, uint64_t end, struct as_range **runs,
			   size_t *n, size_t *cap);

/* For each page of [start, end), in pfn[(addr - start) / 4096]: the
 * page frame number of a present anonymous page mapped by more than one
 * process (or more than once: KSM), else 0. Two such entries with the
 * same number are one physical page at the moment each was read. PFNs
 * read as 0 without CAP_SYS_ADMIN: *hidden is set when a shared page
 * had none. */
int pagemap_shared_pfns(struct pagemap *pm, uint64_t start, uint64_t end, uint64_t *pfn,
			bool *hidden);

/* Has any page of [start, end) of pid (a private file mapping) been
 * copied on write, i.e. written? use_scan: PAGEMAP_SCAN works here. */
int pagemap_written(pid_t pid, bool use_scan, uint64_t start, uint64_t end, bool *yes);

/* Does PAGEMAP_SCAN work on this kernel? (a feature probe) */
bool pagemap_scan_works(void);

#endif
