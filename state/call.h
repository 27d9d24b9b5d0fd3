/* One notified system call, decoded from its seccomp_data: what policy
 * decisions and statistics work from. Arguments are registers, so they
 * cannot change under us (no TOCTOU for CONTINUE). */
#ifndef MV_CALL_H
#define MV_CALL_H

#include "common/syscalls.h"

#include <stdint.h>
#include <sys/types.h>

struct mv_call {
	enum mv_sc sc;
	enum mv_abi abi;
	pid_t tid;
	uint64_t args[6];
	uint64_t ip;
	uint64_t id;  /* the notification's id (SECCOMP_IOCTL_NOTIF_ID_VALID) */
	int listener; /* the listener it came on (one per filter: runc exec adds one) */
};

/* Bytes the call asks for: mmap/mmap2 length, mremap new length, brk
 * growth over *brk_cur (which it updates). 0 for the rest. */
uint64_t call_bytes_asked(const struct mv_call *c, uint64_t *brk_cur);

#endif
