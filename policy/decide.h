/* Deciding one notified call under a policy.
 *
 * Pure: whatever the decision needs to know about the calling process
 * beyond the call's registers (what is mapped at an address, what an fd
 * is, how much is mapped) it asks through struct pol_env_ops. The
 * supervisor answers from /proc (supervisor/supervise/enforce.c); unit tests answer
 * from tables. Every op returns 0 or -errno; -ESRCH means the process is
 * gone, and then the answer no longer matters.
 *
 * Order (docs/policy.md, "How a call is decided"):
 *   1. calls whose arguments cannot be read safely (i386 old_mmap, clone3
 *      under a tree limit) get ENOSYS when the policy needs them;
 *   2. the first rule that matches, else the default for memory calls:
 *      deny and kill end here;
 *   3. W^X (unless the executable is in wx_allow);
 *   4. the limits. */
#ifndef MV_DECIDE_H
#define MV_DECIDE_H

#include "policy/policy.h"
#include "state/call.h"

#include <stdbool.h>
#include <stdint.h>

struct pol_file_id {
	uint64_t dev, ino;
};

#define POL_RANGE_FILES 8

/* What a range of the caller's address space holds. */
struct pol_range {
	uint64_t mapped; /* bytes of the range that are mapped */
	bool anon;	 /* anonymous memory: private or shared anonymous, heap,
			  * stack, memfd, SysV shm, /dev/zero */
	bool writable;	 /* some of it is writable now */
	bool written;	 /* some private file-backed page was written (asked for
			  * with want_written; a copy-on-write page is anonymous) */
	bool exec;	 /* some of it is executable now */
	bool shared;	 /* some of it is a shared mapping */
	size_t n_files;	 /* regular files mapped in the range */
	struct pol_file_id files[POL_RANGE_FILES];
	bool many_files; /* more files than fit */
};

enum pol_fd_kind {
	POL_FD_REGULAR, /* a file: mapping it maps the file */
	POL_FD_ANON,	/* memfd, /dev/zero, anything shmem without a name */
	POL_FD_OTHER,	/* a device or anything else */
	POL_FD_BAD,	/* not an open fd: the kernel will refuse the call */
};

struct pol_fd {
	enum pol_fd_kind kind;
	struct pol_file_id id;
	bool writable; /* opened for writing (O_RDWR) */
};

enum pol_mapped {
	POL_MAPPED_EXEC,     /* mapped executable by some supervised process */
	POL_MAPPED_SHARED_W, /* mapped shared by some supervised process, through an
			      * fd opened for writing (so it may be written) */
};

/* What an exec would map, read from the program headers of the file and
 * of its interpreters before the exec runs. */
struct pol_exec_image {
	bool exec_stack; /* PT_GNU_STACK with PF_X (none, for a 32-bit ELF) */
	bool rwx_load;	 /* a PT_LOAD segment both PF_W and PF_X */
	bool in_interp;	 /* rwx_load is in an interpreter (PT_INTERP or #!) */
	char path[4096]; /* the file executed, resolved (for wx_allow) */
};

struct pol_env_ops {
	/* The caller's mapped size (total_vm: /proc/PID/statm's first field). */
	int (*vm_size)(void *env, uint64_t *bytes);
	int (*range)(void *env, uint64_t start, uint64_t len, bool want_written,
		     struct pol_range *out);
	int (*fd)(void *env, int fd, struct pol_fd *out);
	int (*file_mapped)(void *env, const struct pol_file_id *f, enum pol_mapped how, bool *yes);
	/* The initial program break and the end of the heap now (page aligned;
	 * equal when the heap is empty). */
	int (*brk)(void *env, uint64_t *start, uint64_t *end);
	/* Size of a System V shared memory segment. */
	int (*shm_size)(void *env, int shmid, uint64_t *bytes);
	/* The caller's region count: a cheap upper bound, or exact (read from
	 * the kernel, plus what calls still in flight may add). */
	int (*regions)(void *env, bool exact, uint64_t *n);
	/* Bytes mapped by the whole supervised tree: a cheap upper bound, or
	 * exact (reconciled with the kernel). */
	int (*tree)(void *env, bool exact, uint64_t *bytes);
	/* Does the caller run with READ_IMPLIES_EXEC? */
	int (*read_implies_exec)(void *env, bool *yes);
	/* What the caller's execve/execveat would map. -ENOENT: no such
	 * file, the exec fails by itself. NULL: not known (unit tests). */
	int (*exec_image)(void *env, const struct mv_call *c, struct pol_exec_image *out);
};

struct pol_caller {
	const char *exe; /* /proc/PID/exe, NULL when unknown */
	const struct pol_env_ops *ops;
	void *env;
};

struct pol_decision {
	enum mv_verdict verdict;
	int err; /* the errno of a denial */
	/* A denial answered with a return value instead of an errno: brk(2)
	 * never fails with one, it returns the unchanged break (mm/mmap.c),
	 * and C libraries take whatever it returns as the new break. */
	bool emulate;
	uint64_t val;
	const char *rule; /* what decided: a rule name, "wx", "limits.max_mapped", ... */
	/* Room for a copy of the rule name, for callers that use the decision
	 * after the policy may have been replaced and freed. */
	char rule_copy[72];
	char why[112]; /* a human reason for denials and logs, or "" */
	/* For the caller's accounting, when the call is let through: */
	uint64_t grow;	       /* bytes it may add to the process */
	uint64_t grow_tree;    /* bytes it may add to the tree (a fork: the child) */
	bool fork;	       /* grow_tree is a new process */
	uint32_t grow_regions; /* regions it may add */
	bool note_shared;      /* it maps file `file` shared through a writable fd */
	struct pol_file_id file;
};

/* Decide c for the caller under pol. Never fails: a fact that cannot be
 * read makes W^X refuse (it is a security check) and a limit allow (the
 * kernel's own limits still hold), except that a vanished process is let
 * go (nothing can run any more). */
void decide(const struct policy *pol, const struct mv_call *c, const struct pol_caller *who,
	    struct pol_decision *d);

/* The W^X part alone: a reason string when the call breaks W^X, else NULL.
 * Sets d->note_shared/d->file. Exposed for tests. */
const char *decide_wx(const struct mv_call *c, const struct pol_caller *who, struct pol_decision *d,
		      int *err);

/* The limits part alone: true (with d filled in) when a limit refuses the
 * call; otherwise fills d's grow fields. In policy/limits.c. */
bool limits_check(const struct policy *pol, const struct mv_call *c, const struct pol_caller *who,
		  struct pol_decision *d);

/* Round up to whole pages, saturating at UINT64_MAX (a length the kernel
 * refuses with ENOMEM). */
uint64_t limits_page_align(uint64_t bytes);

/* Regions a call may add at most (a split on each side, a new mapping). */
uint32_t limits_region_delta(const struct mv_call *c);

/* The madvise advices that change a region's flags, so split it
 * (mm/madvise.c madvise_update_vma()); the other calls that split regions
 * through an argument value. In policy/limits.c. */
extern const uint8_t limits_splitting_advice[];
#define LIMITS_N_SPLITTING_ADVICE 13
#define LIMITS_PR_SET_VMA	  0x53564d41u /* prctl(PR_SET_VMA, PR_SET_VMA_ANON_NAME) */
#define LIMITS_UFFDIO_REGISTER	  0xc020aa00u
#define LIMITS_UFFDIO_UNREGISTER  0x8010aa01u

#endif
