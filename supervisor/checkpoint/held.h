/* Memory the kernel reads or writes on a process's behalf without a
 * fault memvisor could serve, found while the process is stopped, so
 * that evict keeps it resident and --live copies it during the pause
 * (docs/reload.md, "What the kernel touches"):
 *
 *   io_uring registered buffers   pinned (FOLL_LONGTERM): the kernel reads
 *                                 and writes the pages it pinned, not
 *                                 what the page tables map, and a write
 *                                 bypasses write-protection
 *   robust mutexes                the list each thread registered; the
 *                                 kernel walks it as the thread exits
 *                                 (exit_robust_list), when a userfaultfd
 *                                 no longer waits (handle_userfault:
 *                                 PF_EXITING), and sets FUTEX_OWNER_DIED
 *   thread-exit words             clear_child_tid, zeroed and woken at
 *                                 exit (mm_release): pthread_join
 *   rseq areas                    written on every return to user space
 *   argv and environment          read by /proc/PID/cmdline and environ
 *                                 (access_remote_vm: no wait either)
 *
 * and the files io_uring rings hold in their registered-file tables,
 * which read(2)/write(2) through the ring would reach bypassing any
 * userfaultfd (the shared-memory evict keeps such objects).
 *
 * Functions return 0 or -errno. */
#ifndef MV_CKPT_HELD_H
#define MV_CKPT_HELD_H

#include "state/as.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ckpt;

enum held_kind {
	HELD_URING_BUF,
	HELD_ROBUST,
	HELD_EXIT_TID,
	HELD_RSEQ,
	HELD_ARGS,
	HELD_KINDS,
};

struct held_range {
	uint64_t start, end; /* page-aligned */
	enum held_kind kind;
};

struct held {
	struct held_range *v;
	size_t n, cap;
	char **files; /* paths in io_uring registered-file tables */
	size_t n_files;
	/* Non-empty: what the kernel holds could not all be found (a ring
	 * whose tables stayed busy, one that could not be opened): the
	 * process must keep its memory, and this says why. */
	char unknown[256];
};

/* Look at process i of c (its threads stopped by the calling thread, no
 * userfaultfd of ours registered in it yet): every kind above; argv and
 * the environment only with args (evict: outsiders' reads; a --live copy
 * does not change what they read). Injects one prctl into each thread
 * (remote.h). A thread gone meanwhile is
 * skipped; -ESRCH when the process is gone. */
int held_scan_stopped(struct ckpt *c, size_t i, bool args, struct held *h);

/* The ranges, sorted and merged, whatever their kind: *out (malloc'd),
 * returns how many. */
size_t held_merged(const struct held *h, struct as_range **out);

/* Does any range of h overlap [start, end)? */
bool held_overlaps(const struct held *h, uint64_t start, uint64_t end);

/* Is path one of the files h's rings hold? */
bool held_has_file(const struct held *h, const char *path);

/* What a kind is, for people: "io_uring registered buffers" and so on. */
const char *held_kind_name(enum held_kind k);

/* Append to a (a JSON array) one {pid, what, bytes, ranges} per kind
 * of range h holds (bytes of its pages, each counted once a kind). */
void held_json(const struct held *h, int pid, json_t *a);

void held_free(struct held *h);

#endif
