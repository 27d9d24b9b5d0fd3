/* Transparent huge pages across evict and reload. UFFDIO_COPY installs
 * small pages, so a range that was backed by huge pages before the evict
 * would run on small ones after the reload. The evict notes the 2 MiB
 * runs that were huge (PAGEMAP_SCAN, PAGE_IS_HUGE); once a space is fully
 * loaded they are unregistered and collapsed again with
 * process_madvise(MADV_COLLAPSE) (Linux 6.1; needs CAP_SYS_NICE).
 * Functions return 0 or -errno. */
#ifndef MV_EVICT_THP_H
#define MV_EVICT_THP_H

#include "state/as.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct evict_thp {
	struct as_range *v; /* 2 MiB-aligned runs that were huge */
	size_t n, cap;
	uint64_t bytes;	   /* their total */
	uint64_t restored; /* collapsed again after the reload */
};

/* Append the huge runs of process pid within where[0..n) (sorted; its
 * threads stopped). Only where pages are: a scan of a whole region walks
 * every page table of it (115 ms for 16,384 pages scattered over 64 TiB).
 * Without PAGEMAP_SCAN nothing is noted. */
int evict_thp_note(struct evict_thp *t, pid_t pid, const struct as_range *where, size_t n);

/* The range [start, end) was unmapped, moved or dropped: forget the runs
 * it touches (what is there now is not what was huge). */
void evict_thp_forget(struct evict_thp *t, uint64_t start, uint64_t end);

/* Every noted run is loaded: unregister it from uffd and collapse it in
 * the process behind pidfd; t->restored gets the bytes collapsed. */
void evict_thp_restore(struct evict_thp *t, int pidfd, int uffd);

void evict_thp_free(struct evict_thp *t);

#endif
