/* Rollback (docs/rollback.md): put a running process back, in place, to
 * the state it had at a marked instant, paying for what was written since.
 *
 *   mark      stop every thread; save its registers, FPU and extended
 *             state and blocked signals; record the layout (every region,
 *             its protection, brk) and copy the pages present in private
 *             regions (the baseline, in memvisor's memory); register those
 *             regions with a userfaultfd in asynchronous write-protect mode
 *             (UFFD_FEATURE_WP_ASYNC, Linux 6.7) and protect them; resume.
 *   rollback  stop every thread; check that it is the same program with
 *             the same threads; undo layout changes (regions mapped since
 *             unmapped, brk, anonymous regions unmapped since mapped again,
 *             protections); read which pages were written since
 *             (PAGEMAP_SCAN: present and no longer write-protected) and
 *             write the baseline back into them, dropping those that were
 *             holes; protect them again; put every thread's registers
 *             back; resume: the program runs on from the marked instant.
 *
 * Both run as jobs (kinds "mark" and "rollback") whose ptrace work runs
 * on the mark's own thread, the tracer, which may hold the program
 * stopped between them (mark --hold, rollback --until: the fuzzing loop).
 * One mark a supervisor; a new mark replaces it. A
 * rollback that fails before it changed anything leaves the process
 * running as it was; one that fails after kills it (a process that is
 * neither the mark nor what it was must not run), and says so.
 * What is not rolled back: shared mappings, file contents, offsets of
 * files open for writing, descriptors opened since (unless close_fds),
 * sockets, timers, other processes (docs/rollback.md). */
#ifndef MV_ROLLBACK_MARKS_H
#define MV_ROLLBACK_MARKS_H

#include "common/err.h"
#include "supervisor/supervise/jobs.h"

#include <jansson.h>
#include <stdbool.h>
#include <sys/types.h>

struct rb_mark;

#define ROLLBACK_NAME_MAX 64

/* What a mark job is asked: the process (a pidfd of its own, taken
 * over), and the mark's name. */
struct rollback_mark_req {
	char name[ROLLBACK_NAME_MAX];
	pid_t pid;
	int pidfd;
	bool hold; /* keep the process stopped after the mark */
	bool tree; /* pid and every process of the tree below it */
};

/* What a rollback is asked: the mark's name ("": the one there is), and
 * with until, where the program is stopped again after it ran on. */
struct rollback_req {
	char name[ROLLBACK_NAME_MAX];
	bool until;
	int until_nr;	     /* a system call's number, -1: none (time only) */
	int until_fd;	     /* its first argument, -1: any */
	unsigned timeout_ms; /* until: the time limit */
	bool close_fds;	     /* close the descriptors opened since the mark */
	bool hold;	     /* keep it stopped at the mark (not with until) */
};

#define ROLLBACK_UNTIL_TIMEOUT_MS 10000
void rollback_mark_req_free(struct rollback_mark_req *q);

/* Start a mark job (q taken over, freed on failure); *result the
 * request's answer. 0, or -1 with err filled. The caller checked that no
 * job that stops the program runs. */
int rollback_start_mark(struct mv *mv, struct rollback_mark_req *q, json_t **result,
			struct mv_err *err);

/* Start a rollback job as q asks. */
int rollback_start(struct mv *mv, const struct rollback_req *q, json_t **result,
		   struct mv_err *err);

/* Main thread: process pid has exited (the reaper reaped it). The mark's
 * snapshot of it, if any, is killed: it would keep memvisor's tree from
 * ever being empty. */
void rollback_process_exited(struct mv *mv, pid_t pid);

/* Let a program held stopped by the mark run (a signal for it, the end
 * of the supervisor). */
void rollback_unhold(struct mv *mv);

/* Is the mark holding process pid stopped? Under mv->lock. */
bool rollback_holding_locked(struct mv *mv);

/* Drop the mark named name ("": the one there is). */
int rollback_unmark(struct mv *mv, const char *name, json_t **result, struct mv_err *err);

/* The mark held, for status and the refusals of other jobs: 1 with its
 * name and pid, 0 when there is none. Under mv->lock. */
int rollback_marked_locked(struct mv *mv, const char **name, pid_t *pid);

/* The mark for status: {name, pids (the marked process first, then the
 * rest of its tree), baseline_bytes, rollbacks, held}, or JSON null.
 * Under mv->lock. */
json_t *rollback_status_json_locked(struct mv *mv);

/* At exit: the mark's memory and descriptors (its protections end with
 * the userfaultfd). */
void rollback_free_all(struct mv *mv);

#endif
