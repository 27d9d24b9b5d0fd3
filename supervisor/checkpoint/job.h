/* The checkpoint job's own state and stages, shared by its files:
 *   checkpoint.c  the job: run, commit, result
 *   stop.c        stopping and resuming every thread (ptrace)
 *   plan.c        registers, layout, committed pages, objects
 *   copy.c        reading the pages into the writer's buffers
 *   live.c        --live: write-protect, resume, copy while it runs
 *   evict_stage.c --evict: what each process may lose, and the evict
 *   dedup.c       a page shared copy-on-write by a tree, stored once
 *   job.c         what they share: the processes, failures, memory reads
 * Everything here runs on the job's thread (the ptrace tracer), but the
 * live copy's write-fault handler (live.c).
 * Failure points (MEMVISOR_FAULT): ckpt_seize (EPERM from PTRACE_SEIZE),
 * ckpt_read (EIO from a read of the process's memory), and those of
 * image/pagesw.h and image/dir.h. Stages return 0 or -errno, recording
 * the first failure with ckpt_fail. */
#ifndef MV_CHECKPOINT_JOB_H
#define MV_CHECKPOINT_JOB_H

#include "state/image.h"
#include "supervisor/checkpoint/checkpoint.h"
#include "supervisor/image/pagesw.h"
#include "supervisor/kernel/pagemap.h"
#include "supervisor/kernel/ptrace.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A thread that has not stopped after this long may be a vfork parent. */
#define VFORK_CHECK_NS (50 * 1000000ull)
/* A thread that has not stopped this long after its last interrupt is
 * interrupted again (ptrace_reinterrupt). */
#define REINTERRUPT_NS (100 * 1000000ull)
/* One process_vm_readv: at most this much (so the data is still in the
 * cache when it is checksummed) and IOV_MAX ranges. */
#define BATCH_BYTES (512u << 10)
#define BATCH_IOV   1024

/* Where the bytes of an object's pages come from when its file cannot be
 * opened: a mapping of it in one of the processes. */
struct piece {
	uint64_t start, end; /* in the object */
	size_t proc;
	uint64_t addr; /* of start, in that process */
};

struct cobj {
	int fd; /* the object's file, or -1 */
	struct piece *pc;
	size_t n_pc, cap_pc;
	struct as_range *mapped; /* object ranges whose pages are planned */
	size_t n_m, cap_m;
};

struct cproc {
	struct ptrace_proc pt;
	bool requested;
	pid_t tid; /* memory and /proc are read through this thread */
	int memfd; /* /proc/TID/mem, opened on first need */
	long img;  /* index into im.p, or -1 */
	bool died; /* killed while we held it */
};

/* A stored page that later pages may refer to (dedup.c). */
struct dedup_slot {
	uint64_t pfn, off;
	size_t proc;
};

/* Processes proc's pages that refer to bytes read from process src. */
struct dedup_pair {
	size_t proc, src;
};

/* A page that refers to bytes stored for another process, as read. */
struct dedup_sum {
	uint64_t off;
	uint32_t crc;
};

/* Pages a tree shares copy-on-write, stored once (dedup.c). */
struct dedup {
	const char *off_why;	/* why this attempt may not (set before the plan) */
	bool on;		/* it does: more than one process */
	bool hidden;		/* page frame numbers read as 0 (no CAP_SYS_ADMIN) */
	struct dedup_slot *tab; /* open addressing on pfn, cap a power of 2 */
	size_t cap, used;
	struct dedup_pair *pairs;
	size_t n_pairs, cap_pairs;
	struct dedup_sum *sums; /* every referring page, in copy order */
	size_t n_sums, cap_sums;
	uint64_t *pfn;	    /* scratch, per page of a chunk */
	char *a;	    /* scratch: one extent */
	uint64_t ref_bytes; /* bytes referring to a page stored before */
	uint64_t verify_ns; /* reading and checksumming them */
	char why[256];	    /* why the check failed (ckpt_dedup_check) */
};

struct ckpt {
	struct job *j;
	struct mv *mv;
	struct checkpoint_req *req;
	struct cproc *p;
	size_t n, cap;
	struct img im;
	struct cobj *obj;
	size_t cap_obj;
	uint64_t off; /* the next free byte of the pages file */
	uint64_t total, done;
	struct pagesw *w;
	const char *layout_how;
	uint64_t t_start, t_stopped, t_planned, t_copied, t_resumed, t_end;
	uint64_t t_evict, t_evicted;	 /* --evict: the evict stage */
	uint64_t t_done;		 /* every thread resumed, the job's work over */
	uint64_t pause_start, pause_end; /* the image's pause: first interrupt, last detach */
	/* --evict --live: the program stopped a second time for the evict
	 * (ckpt_evict_live); its stop and resume leave the image's times
	 * alone, the last detach is again_end. */
	bool stopped_again;
	uint64_t again_end;
	uint64_t ns_read, ns_wait; /* where the copy's time went */
	json_t *evict_skipped;	   /* [{pid, reason}]: processes --evict left resident */
	json_t *evict_shared;	   /* [{object, reason}]: shared memory --evict left resident */
	json_t *evict_kernel;	   /* [{pid, what, bytes, ranges}]: kept for the kernel (held.h) */
	json_t *evict_kept;	   /* [{pid, start, end, reason}]: private regions kept resident */
	struct live *live;	   /* --live (live.c), or NULL */
	char live_why[256];	   /* why the live copy was given up */
	struct mv_err err;	   /* the first failure (ckpt_fail) */
	struct dedup dd;
};

/* Record the first failure (code and message for the job), return rc. */
int ckpt_fail(struct ckpt *c, int rc, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Add a process to hold (pidfd taken over). */
struct cproc *ckpt_add_proc(struct ckpt *c, pid_t pid, int pidfd, bool requested);

/* Read [addr, addr + len) of p's memory through its /proc/TID/mem (job.c
 * says why not process_vm_readv), opened on first need (len 0: just
 * that). 0 or -errno (-EIO: unmapped, or the mm is gone). */
int ckpt_read_mem(struct cproc *p, uint64_t addr, void *dst, size_t len);

/* Has the process gone (killed while stopped)? */
bool ckpt_proc_dead(const struct cproc *p);

/* p is gone: recorded, or the job fails when p was asked for (-ESRCH). */
int ckpt_proc_lost(struct ckpt *c, struct cproc *p);

/* The image record of process i (after ckpt_plan_all made it). */
struct img_proc *ckpt_iproc(struct ckpt *c, size_t i);

/* Seize, interrupt and wait for every thread (and, for all processes,
 * every process that appears meanwhile). */
int ckpt_stop_all(struct ckpt *c);

/* Detach every thread we hold; measure the pauses: the image's (the
 * job's and each process's), or, once c->stopped_again, only the last
 * detach of the evict's (again_end). Every path. */
void ckpt_resume_all(struct ckpt *c);

/* Registers, regions, committed pages and objects, with their offsets in
 * the pages file. */
int ckpt_plan_all(struct ckpt *c);

/* Read every extent into the writer's buffers (with --live: those copied
 * during the pause; ckpt_copy_live reads the rest). */
int ckpt_copy_all(struct ckpt *c);

/* --live, after the resume: read the extents of write-protected regions.
 * -ECANCELED: the live copy was given up (ckpt_live_why_lost). */
int ckpt_copy_live(struct ckpt *c);

/* ---- --live (live.c) ---- */

/* Before the stop, with a tree of at least 32 MiB resident: stop it
 * briefly to make a uffd in each process, resume it, and write-protect
 * its private anonymous regions while it runs, so that the pause
 * protects only what was written since (live.c). 0, or a stop's error. */
int ckpt_live_arm(struct ckpt *c, uint64_t resident);

/* While stopped, after the plan: make a uffd in each process, register
 * and write-protect its private anonymous regions, and lay the pages
 * file out with what is copied during the pause first. */
int ckpt_live_setup(struct ckpt *c);

/* Is region `region` of process `proc` copied live? */
bool ckpt_live_region(const struct ckpt *c, size_t proc, size_t region);

/* Before the resume: start the write-fault handler. */
int ckpt_live_start(struct ckpt *c);

/* After extent e of process proc was read into dst: lift its protection
 * and put in the pages a write fault kept. 0; -EAGAIN: a layout change
 * is under way, read it again (after ckpt_live_wait); -ESRCH: the
 * process is gone (what was read may be another program's);
 * -EALREADY: the write-fault handler copied it meanwhile (dst is not
 * used); -ECANCELED: the live copy is given up. */
int ckpt_live_commit(struct ckpt *c, size_t proc, struct img_extent *e, void *dst);

/* Did the write-fault handler copy extent e of process proc already? */
bool ckpt_live_taken(struct ckpt *c, size_t proc, const struct img_extent *e);

/* The copier's next staging buffer: the handler's buffer is queued first
 * when none is free, so that the copier never waits on it. NULL once a
 * write failed. */
struct pagesw_buf *ckpt_live_get_buf(struct ckpt *c);

/* Every live extent is copied: queue the handler's buffer; from now on
 * write faults keep pages instead of copying extents. */
void ckpt_live_copied(struct ckpt *c);

/* Wait a little for the handler to read events; -ECANCELED if the live
 * copy was given up meanwhile. */
int ckpt_live_wait(struct ckpt *c);

/* Reads of one extent that fail in a row before the live copy is given
 * up (each after ckpt_live_wait, 200 us). */
#define LIVE_TRIES 5000

/* Give the live copy up (the first reason stays). */
void ckpt_live_lose(struct ckpt *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Why the live copy was given up. */
void ckpt_live_why_lost(const struct ckpt *c, char *buf, size_t len);

/* The result's "live" object. */
json_t *ckpt_live_json(const struct ckpt *c);

/* Process proc died: its image record is about to be emptied; forget
 * its extents (it is gone for the live copy too). */
void ckpt_live_forget(struct ckpt *c, size_t proc);

/* Stop the handler, close the uffds (lifting every protection), free. */
void ckpt_live_stop(struct ckpt *c);

/* --evict, every thread stopped again after the commit: stop the handler
 * and take what the uffds still hold (events). */
void ckpt_live_quiesce(struct ckpt *c);

/* --evict: process proc's image record limited to the pages that may be
 * dropped (present, copied and still write-protected: not written since
 * the pause, nor touched by a layout change), in *out
 * (ckpt_live_view_free). Bytes of its live extents that may be dropped
 * and that were written since are added to *clean and *written. -ENOENT:
 * nothing of it was copied live (not tracked); -ESRCH: it is gone. */
int ckpt_live_evict_view(struct ckpt *c, size_t proc, struct img_proc *out, uint64_t *clean,
			 uint64_t *written);
void ckpt_live_view_free(struct img_proc *v);

struct evict_stats;

/* --evict, after the commit and before the resume: evict every process
 * (supervisor/checkpoint/evict_stage.c). A failure leaves the processes as they were
 * except those evicted already, which are served on demand. */
int ckpt_evict_all(struct ckpt *c, struct evict_stats *st);

/* --evict --live, after the commit, the program running: stop it again,
 * find the pages not written since the pause (ckpt_live_evict_view),
 * close the live uffds and evict just those. The caller resumes. */
struct live_evict_times {
	uint64_t stop_ns;      /* stopping every thread again */
	uint64_t scan_ns;      /* pagemap: which pages were not written */
	uint64_t unprotect_ns; /* closing the live uffds (the protection walk) */
	uint64_t drop_ns;      /* the evict's uffds, registration, madvise */
};
int ckpt_evict_live(struct ckpt *c, struct evict_stats *st, struct live_evict_times *t,
		    uint64_t *clean, uint64_t *written);

/* ---- a tree's copy-on-write pages, stored once (dedup.c) ---- */

/* Before the plan: store shared pages once if c->dd.want and more than
 * one process is held. */
void ckpt_dedup_start(struct ckpt *c);

/* Region r of process i, whose private pages to store are runs[0..n):
 * its extents, a page whose frame a process planned before stores (and
 * whose bytes equal that copy's, read now) referring to that copy's
 * bytes in the pages file, the others given new offsets (c->off). */
int ckpt_dedup_region(struct ckpt *c, size_t i, struct pagemap *pm, struct img_region *r,
		      const struct as_range *runs, size_t n);

/* The copy of extent e of process i, which refers to bytes stored for
 * another process: read it and checksum each page (e->crc too), for
 * ckpt_dedup_check. 0 (also when i is gone: it is marked died), or the
 * job's failure. */
int ckpt_dedup_read(struct ckpt *c, size_t i, struct img_extent *e);

/* After the writers are done (every page checksummed): -ESTALE, the
 * reason in c->dd.why, when a page that refers to another's bytes is not
 * equal to them (its frame was reused while the tree was stopped), or the
 * process whose bytes it refers to was killed before they were read. */
int ckpt_dedup_check(struct ckpt *c);

/* The result's "dedup" object. */
json_t *ckpt_dedup_json(const struct ckpt *c);

void ckpt_dedup_free(struct dedup *dd);

/* After the resume: wait for the writers (the checksums land), drop what
 * was read from processes killed meanwhile. */
int ckpt_settle(struct ckpt *c);

#endif
