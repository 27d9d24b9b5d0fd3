/* The stop point the kernel checks (`run --until-point SYSCALL[:FD]`,
 * docs/rollback.md): memvisor's seccomp filter also notifies that call
 * (with that first argument) and exit(2) and exit_group(2), so that
 * `rollback --until` can let the program run under PTRACE_CONT and be
 * told of the point, instead of stopping it at every system call.
 *
 * The notify thread hands each such notification to point_notified: with
 * no run armed it is answered at once (the call goes on); with a run
 * armed (point_arm, by the rollback's tracer thread) it is queued
 * unanswered and the armed thread is woken with a signal, to take it
 * (point_take) and answer it (point_answer): CONTINUE, or -ERESTARTNOINTR
 * after a PTRACE_INTERRUPT, which stops the thread before the call
 * (made again when it runs on). */
#ifndef MV_POINT_H
#define MV_POINT_H

#include "common/syscalls.h"

#include <linux/seccomp.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

enum point_kind { POINT_NONE, POINT_CALL, POINT_EXIT, POINT_EXIT_GROUP };

/* A notification taken from the queue. */
struct point_note {
	uint64_t id;
	pid_t tid;
	enum point_kind kind;
	int nr; /* as the program's ABI numbers it */
	uint64_t arg0, ip;
	int listener;
};

#define POINT_QUEUE 64
#define POINT_PASS  16

/* A call to let through once: a marked thread's call restarted by a
 * rollback (its first after the rollback), not a stop. */
struct point_pass {
	pid_t tid;
	int nr;
	uint64_t ip, arg0;
};

struct point {
	char name[40]; /* the call, as given */
	int fd;	       /* its first argument, or -1: any */
	int nr[MV_ABI_COUNT], exit_nr[MV_ABI_COUNT], exit_group_nr[MV_ABI_COUNT];
	pthread_mutex_t mu;
	pid_t armed; /* the thread to wake, or 0 */
	int wake_signal;
	size_t n;
	struct point_note q[POINT_QUEUE];
	size_t n_pass;
	struct point_pass pass[POINT_PASS];
	uint64_t continued, handed; /* answered at once; queued */
};

/* Split "NAME" or "NAME:FD" (the form of a stop point, here and in
 * `rollback --until`): NAME into name (cap bytes), FD into *fd (-1
 * without). 0; -EINVAL with *bad_fd NULL for an empty or too long NAME,
 * or pointing at the FD text that is not a descriptor number. */
int point_split(const char *spec, char *name, size_t cap, int *fd, const char **bad_fd);

/* Parse "SYSCALL" or "SYSCALL:FD" into p (zeroed first). A call memvisor
 * notifies already (a memory or process call) is refused: its decisions
 * are the policy's. 0, or -EINVAL with why set. */
int point_parse(struct point *p, const char *spec, char *why, size_t len);

/* Does the point stop where a rollback's until asks (the native number
 * and the descriptor)? */
bool point_matches(const struct point *p, long nr, int fd);

/* The notify thread: is req a point notification? Then it was answered
 * (no run armed) or queued, and true; false: not ours, decide it. */
bool point_notified(struct point *p, int listener, const struct seccomp_notif *req);

/* Arm for thread tid (woken by sig at each notification queued), or
 * disarm (tid 0): what is queued stays to be taken. pass (n of them): the
 * calls restarted by the rollback, let through by the notify thread
 * itself, each at its thread's first notification if it is that call. */
void point_arm(struct point *p, pid_t tid, int sig, const struct point_pass *pass, size_t n);

/* Take up to max notifications queued; how many. */
size_t point_take(struct point *p, struct point_note *out, size_t max);

/* Answer a notification taken: error 0 is CONTINUE (the call goes on),
 * else the call returns -error. 0 or -errno (-ENOENT: withdrawn). */
int point_answer(const struct point_note *n, int error);

#endif
