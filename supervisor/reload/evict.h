/* Evicted memory: a process's private anonymous pages written to an image
 * and dropped, registered with a userfaultfd of its mm, and served back
 * from the image on demand (by fault workers) or in the background (by a
 * reload job's loader, supervisor/reload/reload.c). docs/reload.md tells the
 * whole story.
 *
 * An evicted space is one mm: its uffd, the image's pages file, and the
 * map from addresses to image pages still owed ("chunks": pieces of image
 * extents at their current addresses, moved by mremap, dropped by munmap
 * and madvise(DONTNEED/FREE), copied at fork). A page in a registered
 * range that no chunk covers is served as zeros.
 *
 * Threads: EVICT_WORKERS fault workers per space read the uffd (faults and
 * events) in parallel; a loader (the reload job's thread) streams the
 * rest. s->mu guards the chunks, the loaded bits and the counters, and is
 * never held across storage I/O or an ioctl. The types, the lock order
 * and which file of this folder does what are in space.h.
 *
 * Functions return 0 or -errno. */
#ifndef MV_EVICT_H
#define MV_EVICT_H

#include "common/hist.h"
#include "state/image.h"
#include "supervisor/kernel/ptrace.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define EVICT_WORKERS	  4
#define EVICT_READAHEAD	  (256u << 10) /* bytes installed first around a fault */
#define EVICT_WORKER_NICE -10
#define EVICT_LOADER_NICE -5

/* Raise the calling thread's priority to nice (if we may). */
void evict_boost_thread(int nice);
/* Serve faults under SCHED_FIFO where we may (on), or not; returns whether
 * the thread did before (workers.c). */
bool evict_fault_rt(bool on);
/* A thread that program threads wait on (fault workers, the live
 * checkpoint's write-fault handler): named name, nice
 * EVICT_WORKER_NICE and SCHED_FIFO where we may. */
void evict_fault_thread(const char *name);

struct evspace;
struct mv;

/* Is r memory an evict drops (private anonymous, heap, stack, with pages
 * in the image)? */
bool evict_region_evictable(const struct img_region *r);

/* The evicted spaces of one supervisor (mv->evict). Its fault workers
 * report pages the image cannot give back on mv's event stream and have
 * mv's reaper hold their uffds. It lives as long as the process: a
 * space's workers may still hold it after the space left the list. */
struct evict;
struct evict *evict_new(struct mv *mv);

struct evict_stats {
	uint64_t regions, bytes; /* evicted */
	uint64_t kept_regions;	 /* private regions left resident (madvise or register failed) */
	uint64_t shared_regions; /* shared memory: regions left resident */
	uint64_t shared_evicted_regions;       /* shared memory: mappings registered and evicted */
	uint64_t shared_objects, shared_bytes; /* shared-memory objects evicted, their bytes */
	uint64_t cow_bytes; /* private pages shared copy-on-write with another process: left */
	uint64_t scattered_bytes; /* private pages left because too scattered (MAX_RUNS) */
	uint64_t kernel_bytes;	  /* private pages left because the kernel holds or touches them */
	json_t *kept; /* [{pid, start, end, reason}]: the kept regions and why, or NULL; the
		       * caller's to free */
};

/* Shared memory the evict is to take (supervisor/reload/shm.h), by image
 * object: evict[k] when every mapping of object k is in an evicted
 * process; evict_proc_stopped registers those mappings and sets failed[k]
 * when one cannot be registered (the object must then stay resident),
 * counting the registered ones in regions[k]. */
struct evict_shm {
	size_t n;
	const bool *evict;
	bool *failed;
	uint64_t *regions;
};

struct evobj;

/* Serve faults on shared-memory object o (registered before its pages
 * are punched; held until it is loaded). */
void evict_add_object(struct evict *reg, struct evobj *o);

/* The objects evicted to image id (references; evshm_put each), in *out
 * (malloc'd). Returns how many. */
size_t evict_objects_of(struct evict *reg, const char *id, struct evobj ***out);

/* After an evict to image id: a space that owes nothing (its only
 * registrations were mappings of shared memory) while no object of id was
 * evicted is stopped, its uffd closed: nothing is evicted there. */
void evict_drop_idle(struct evict *reg, const char *id);

/* o is loaded: forget it (its faults are the kernel's again). */
void evict_drop_object(struct evict *reg, struct evobj *o);

/* Evict process pp (every thread stopped by the calling thread) whose
 * image record is ip, in the committed image im at dir (its page
 * checksums computed): create its uffd
 * by remote syscalls, register and drop its private anonymous regions,
 * register its mappings of the shared objects shm says (their pages are
 * dropped later, evshm_punch), start the fault workers. whole[k] false:
 * drop only the pages of region k's extents, not the whole region (ip is
 * a view of the image record that leaves some pages out: written since
 * the image's instant, or shared with another process); NULL: every
 * region whole. On failure before anything was dropped, the process is
 * untouched; err says why. */
int evict_proc_stopped(struct evict *reg, struct ptrace_proc *pp, const struct img *im,
		       const struct img_proc *ip, const char *dir, const bool *whole,
		       const struct evict_shm *shm, struct evict_stats *st, struct mv_err *err);

/* The live spaces evicted to image id (references; evict_put each), in
 * *out (malloc'd). Returns how many. */
size_t evict_spaces_of(struct evict *reg, const char *id, struct evspace ***out);

/* The image id and directory some space is evicted to, for messages. */
bool evict_some_image(struct evict *reg, char *id, size_t idlen, char *dir, size_t dirlen);

void evict_put(struct evspace *s);

/* The loader's side: bytes of image pages still owed, and loaded so far. */
void evict_space_counts(struct evspace *s, uint64_t *owed, uint64_t *loaded);

/* What the loader's caller (the reload job) is told, from two threads:
 * pace and read from the reading thread, progress from the caller's. */
struct evict_load_ops {
	void (*pace)(void *arg);		 /* before each read: sleep to keep a rate */
	void (*read)(void *arg, uint64_t bytes); /* bytes of the image read */
	void (*progress)(void *arg);		 /* after each install */
};

/* Load every owed page: a thread reads the owed span of one extent after
 * another with O_DIRECT where the page cache lacks it and checks each
 * page's checksum, while the caller's thread installs the good pages of
 * the one before (two buffers), so the disk and the copies overlap.
 * Returns 0 once nothing is owed; -errno on failure (-ESRCH: the mm is
 * gone, nothing more to do; -EBADMSG: a page fails its checksum, -EIO or
 * another read error: the image cannot give it back; the good pages are
 * installed, and a fault on a bad one makes it unservable: SIGBUS;
 * -EDEADLK: LOAD_IDLE_MAX rounds in a row installed nothing, a loader that
 * would read forever: what is owed stays evicted, served on fault).
 * st gets the reading threads' CPU time and the installs that had to
 * search the chunk map added.
 * Failure point (MEMVISOR_FAULT) reload_install_none: a round installs
 * nothing and reports no error. */
#define LOAD_IDLE_MAX 1000u
struct evict_load_stats {
	uint64_t reader_cpu_ns;
	uint64_t searches; /* extents looked for over the whole chunk map (split chunks) */
};
int evict_load_all(struct evspace *s, const struct evict_load_ops *ops, void *arg,
		   struct evict_load_stats *st);

/* Everything is loaded (or the mm is gone): collapse again the ranges
 * that had transparent huge pages (supervisor/reload/thp.h; their bytes
 * added to *huge, those collapsed to *huge_restored), stop the workers,
 * close the uffd (the kernel unregisters every range), forget the space. */
void evict_space_finish(struct evspace *s, uint64_t *huge, uint64_t *huge_restored);

/* Fault statistics of a space merged into h; faults and bytes served,
 * and the CPU time its fault workers spent serving (added to each). */
void evict_space_faults(struct evspace *s, void *hist, uint64_t *faults, uint64_t *bytes,
			uint64_t *cpu_ns);

/* Put [addr, addr+len) of thread tid's process in place as faults there
 * would be, when it is evicted memory (reg is a struct evict: the
 * callback of struct vm_faulter, kernel/vm.h): 1 when the range is
 * served, 0 when it is not evicted memory (or cannot be served). */
int evict_fault_in(void *reg, pid_t tid, uint64_t addr, size_t len);

/* The pid the space was evicted from (0 for a fork child). */
pid_t evict_space_pid(const struct evspace *s);

/* Every evicted space, for `status`. */
json_t *evict_status_json(struct evict *reg);

/* Totals over the run, for metrics: the spaces still evicted and the
 * bytes they owe now; counters that only grow (spaces that are done
 * count on): bytes evicted, bytes loaded back, faults served and their
 * latency (ns). */
struct evict_totals {
	uint64_t spaces, owed;
	uint64_t evicted, loaded, faults;
	struct hist lat;
};
void evict_totals(struct evict *reg, struct evict_totals *t);

#endif
