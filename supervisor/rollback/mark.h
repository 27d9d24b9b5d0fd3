/* The mark's state, shared by the files of supervisor/rollback/:
 *   mark.c      the mark job, the mark's life
 *   undo.c      the rollback job
 *   layout.c    regions compared with the mark's (pure)
 *   marks.c     the mark's place in the supervisor: starting its jobs
 *   hold.c      the mark's tracer thread, which may hold the program
 *               stopped between two jobs
 *   until.c     rollback --until: the program run to its next stop point
 *   wpsync.c    write tracking on kernels without asynchronous write-protect
 *   strays.c    processes made since the mark, killed
 * The jobs post their ptrace work to the mark's tracer thread (hold.c)
 * and wait for it. */
#ifndef MV_ROLLBACK_MARK_H
#define MV_ROLLBACK_MARK_H

#include "supervisor/checkpoint/checkpoint.h"
#include "supervisor/checkpoint/job.h"
#include "supervisor/rollback/hold.h"
#include "supervisor/rollback/snapshot.h"
#include "supervisor/rollback/marks.h"

#include <signal.h>
#include <sys/types.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RB_NAME_MAX ROLLBACK_NAME_MAX

/* A region as the kernel had it. */
struct rb_region {
	uint64_t start, end, offset, inode;
	uint32_t dev_major, dev_minor;
	bool r, w, x, shared;
	bool special; /* [vdso], [vvar], [vsyscall]: the kernel's, not tracked */
	bool tracked; /* registered with the mark's userfaultfd */
	/* Synchronous tracking only: a private file mapping, which the
	 * kernel registers for write-protect only in asynchronous mode
	 * (6.7): its baseline is put back whole at each rollback. */
	bool whole;
	char name[48];
};

/* Pages present at the mark: [start, end), their bytes at base + off,
 * or in the snapshot at the same addresses (off RB_IN_SNAP). */
#define RB_IN_SNAP UINT64_MAX
/* What a rollback reads from the snapshot at once (undo.c). */
#define RB_SCRATCH_BYTES (1024 * 4096ul)

/* struct rseq (linux/rseq.h): the kernel writes cpu_id_start and cpu_id
 * (bytes 0-7) and node_id and mm_cid (20-27) on the thread's way back to
 * user space; rseq_cs and flags (8-19) are the program's. */
#define RB_RSEQ_LEN 32
struct rb_run {
	uint64_t start, end, off;
};

/* A descriptor open at the mark: what it named; for a regular file open
 * for reading only, a duplicate of ours (its open file description) and
 * its offset. */
struct rb_fd {
	int fd, dup;
	dev_t dev;
	ino_t ino;
	bool regular;
	bool cloexec; /* of a duplicated one: FD_CLOEXEC at the mark */
	uint64_t off;
	char kind[16]; /* "pipe", "socket", ... of the others, for messages */
};

#define RB_FILES_MAX 1024 /* regular files whose offsets go back */

struct rb_thread {
	pid_t tid;
	void *prstatus, *fp;
	size_t prstatus_len, fp_len;
	unsigned fp_note;
	uint64_t sigmask;
	uint64_t rseq; /* its rseq area (0: none registered, or no way to ask) */
	uint32_t rseq_len, rseq_sig;
	bool rseq_known; /* the kernel answered: rseq is 0 for none */
};

/* Shared anonymous memory (MAP_SHARED | MAP_ANONYMOUS) of a tree's mark:
 * only the tree's processes can map it (it is shared by fork alone), so
 * its bytes go back too, whole: a write to it through a mapping the
 * mark does not track (a child forked since, another process's) would
 * escape page tracking. Its bytes at the mark are in base; a rollback
 * compares and writes back the pages that differ. At most
 * RB_SHARED_MAX bytes a process; beyond, untracked. */
#define RB_SHARED_MAX (64ull << 20)
struct rb_shared {
	uint64_t start, end;
	uint8_t *base;
};

struct rb_mark {
	struct mv *mv;
	char name[RB_NAME_MAX];
	pid_t pid;
	int pidfd, memfd, uffd; /* memfd: /proc/PID/mem of the marked mm, O_RDWR */
	uint64_t brk;
	uint64_t heap_end;   /* where the region named [heap] ended (0: none) */
	bool user_mode_only; /* its userfaultfd has UFFD_USER_MODE_ONLY (no privilege) */
	/* Synchronous write-protect (a kernel without UFFD_FEATURE_WP_ASYNC,
	 * or MEMVISOR_ROLLBACK_WP=sync): a write to a protected page faults
	 * to the mark's fault thread, which lifts the protection; the page
	 * then reads as written, as in asynchronous mode (mark.c). */
	bool sync_wp;
	struct rb_wp *wp; /* its fault thread */
	/* The pages of whole regions that were the process's own at the
	 * mark (anonymous copies, not the file's), sorted. */
	struct as_range *whole_anon;
	size_t n_whole_anon;
	struct rb_thread *t;
	size_t n_t;
	struct rb_region *r;
	size_t n_r;
	pid_t *children; /* the process's children at the mark */
	size_t n_children;
	struct rb_run *run; /* sorted by start */
	size_t n_run;
	uint8_t *base;
	size_t base_len;   /* the mapping, 2 MiB rounded */
	size_t base_bytes; /* what the runs hold */
	json_t *untracked; /* [{start, end, name, why}] */
	struct rb_fd *fds; /* sorted by readdir's order, not by number */
	size_t n_fds, n_rewindable;
	uint64_t marked_wall_ns, rollbacks;
	bool holding;	      /* the program is held stopped (under mv->lock) */
	struct rb_hold *hold; /* its tracer thread (hold.c) */
	struct rb_snap snap;  /* the baseline's copy-on-write snapshot, if any */
	char snap_why[200];   /* why there is none */
	uint64_t snap_bytes;  /* the baseline it holds */
	uint8_t *scratch;     /* RB_SCRATCH_BYTES for bytes on their way from the snapshot */
	/* Pages the last rollback put back (undo.c, "hot pages"): put back
	 * again by this one, they are left writable, to be put back each
	 * time; every RB_HOT_EPOCH rollbacks all are protected again. */
	struct as_range *last;
	size_t n_last, cap_last;
	unsigned hot_epoch;
	/* A mark of the tree (mark without a pid): the other processes the
	 * tree had at the mark, each a mark of its own with no tracer thread
	 * (this one's stops and holds them all) and no snapshot (its
	 * baseline is copied). */
	struct rb_mark **members;
	size_t n_members;
	bool tree;	      /* a mark of the tree (without --pid), of one process or more */
	struct rb_shared *sh; /* of a tree's mark */
	size_t n_sh;
	uint64_t sh_bytes;
	/* During a job: where the process is in the tracer's stop, c->p[ci]. */
	size_t ci;
};

struct job;

/* A rollback job's request. */
struct rb_rollback_job {
	struct rb_mark *m;
	struct rollback_req q;
	uint64_t t_request;
};

void rb_mark_free(struct rb_mark *m);

/* The marked process i: 0 the one marked, then a tree's others. */
static inline struct rb_mark *rb_proc(struct rb_mark *m, size_t i)
{
	return i ? m->members[i - 1] : m;
}

/* pid's regions now (tid: a stopped thread to read through; mark.c). */
int rb_layout_read(pid_t tid, struct rb_region **out, size_t *n);

/* ---- layout.c ---- */

/* Are a and b, at address addr, the same mapping (anonymous both, or the
 * same file at the same offset; shared or private alike)? */
bool rb_same_mapping(const struct rb_region *a, const struct rb_region *b, uint64_t addr);

/* The region of v[0..n) (sorted) holding addr, or NULL. */
const struct rb_region *rb_region_at(const struct rb_region *v, size_t n, uint64_t addr);

/* A piece of the address space whose layout differs from the mark's. */
enum rb_fix { RB_UNMAP, RB_MAP, RB_PROTECT };
struct rb_change {
	enum rb_fix fix;
	uint64_t start, end;
	const struct rb_region *was; /* the mark's region (RB_MAP, RB_PROTECT) */
};

/* The changes that make now[] the mark's layout again, in address order
 * (a replaced piece is RB_UNMAP then RB_MAP). *n 0: the same layout. */
void rb_layout_diff(const struct rb_mark *m, const struct rb_region *now, size_t n_now,
		    struct rb_change **out, size_t *n);

/* Where the heap ends in v[0..n) (the end of its last region: a heap
 * grown since the mark is two regions, the tracked one and the growth),
 * 0 when there is none. */
uint64_t rb_heap_end(const struct rb_region *v, size_t n);

/* "0x7f..-0x7f.. (NAME)" for messages. */
void rb_describe(const struct rb_region *r, uint64_t start, uint64_t end, char *buf, size_t len);

/* ---- files.c ---- */

/* The descriptors of the stopped process (tid: a thread of it). */
int rb_files_mark(struct rb_mark *m, pid_t tid);
void rb_files_free(struct rb_mark *m);
/* Offsets back as marked: how many had moved. */
unsigned rb_files_rewind(struct rb_mark *m);
/* Descriptors open now that were not at the mark, or name another file. */
int rb_files_new(const struct rb_mark *m, pid_t tid, int **out, size_t *n);
/* The mark's descriptors that are not what they were: their number
 * closed now, or open on another file, or (for a duplicated one) on
 * another open of the same file (tid: a live thread of the process). A
 * stat of each number (and kcmp), not a walk of the directory: each
 * rollback asks. */
struct rb_fd_gone {
	size_t idx;    /* into m->fds */
	bool replaced; /* the number is open, on something else */
};
int rb_files_closed(const struct rb_mark *m, pid_t tid, struct rb_fd_gone **out, size_t *n);

/* ---- strays.c ---- */

/* Every process below pid (pid itself SIGSTOPped by the caller) stopped,
 * then killed: none forked meanwhile is missed. */
void rb_kill_below(pid_t pid);
/* A tree's processes made since the mark that are not below a process of
 * it (orphans, reparented to the tree's top), killed with what is below
 * them: how many. The reaper reaps them. */
unsigned rb_kill_strays(struct rb_mark *m);

/* ---- wpsync.c ---- */

/* The fault thread of a mark tracking in synchronous mode (m->sync_wp):
 * 0, or -errno. Stopped before the userfaultfd is closed. */
int rb_wp_start(struct rb_mark *m);
void rb_wp_stop(struct rb_mark *m);

/* ---- until.c ---- */

/* The stopped program (c, every thread in a ptrace stop) runs until
 * q's point, a crash, its exit, a new program or q's time limit; then it
 * is stopped again and held (or gone). *event: what happened. 0, or
 * -errno with c->err filled. */
int rb_until_run(struct rb_mark *m, struct ckpt *c, const struct rollback_req *q, json_t **event);

/* ---- the jobs (mark.c, undo.c) ---- */

int rb_mark_run(struct job *j);
void rb_mark_req_free(void *ctx);
int rb_rollback_run(struct job *j);

#endif
