/* Robust futex lists of other threads (futex(2), get_robust_list(2)):
 * the list each thread registered with set_robust_list, which the kernel
 * walks when the thread exits to mark the mutexes it still holds
 * FUTEX_OWNER_DIED (kernel/futex/core.c exit_robust_list). The walk reads
 * and writes the program's memory from the exiting thread, where a
 * userfaultfd does not wait: memvisor keeps those pages resident
 * (supervisor/checkpoint/held.c). Functions return 0 or -errno. */
#ifndef MV_FUTEX_H
#define MV_FUTEX_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The kernel's bound on a walk (ROBUST_LIST_LIMIT). */
#define FUTEX_ROBUST_LIMIT 2048

/* struct robust_list_head as a 64-bit thread lays it out. */
struct futex_robust_head {
	uint64_t next;		  /* the first entry, or the head itself */
	int64_t futex_offset;	  /* from an entry to its futex word */
	uint64_t list_op_pending; /* an entry being taken or released */
};

/* Thread tid's robust list head: its address (0: none registered) and
 * the length it registered (24 for a 64-bit head). Needs ptrace access
 * to tid (PTRACE_MODE_READ_REALCREDS). */
int futex_robust_head_of(pid_t tid, uint64_t *head, size_t *len);

#endif
