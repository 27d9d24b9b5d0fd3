/* Per-process counters of notified calls: exact, since every notified call
 * passes through the supervisor. Pure data; the caller serialises access. */
#ifndef MV_STATS_H
#define MV_STATS_H

#include "common/hist.h"
#include "common/syscalls.h"

#include <stdint.h>

/* What the supervisor answered. */
enum mv_verdict {
	MV_V_ALLOW, /* SECCOMP_USER_NOTIF_FLAG_CONTINUE */
	MV_V_LOG,   /* allowed, and reported on the event stream */
	MV_V_DENY,  /* failed with an errno */
	MV_V_KILL,  /* the process was killed */
	MV_V_COUNT,
};

const char *verdict_name(enum mv_verdict v);

struct proc_stats {
	uint64_t calls[MV_SC_COUNT][MV_V_COUNT];
	uint64_t abi_calls[MV_ABI_COUNT];
	/* Bytes asked for: mmap length, mremap new length, brk growth. */
	uint64_t bytes[MV_SC_COUNT];
	/* Answers the kernel refused because the thread was gone (a signal
	 * killed it or interrupted the call): an outcome, not an error. */
	uint64_t gone;
	/* Notification service time, receive to answer, in ns. */
	struct hist service;
};

void stats_merge(struct proc_stats *dst, const struct proc_stats *src);
uint64_t stats_total_calls(const struct proc_stats *s);
uint64_t stats_verdict_calls(const struct proc_stats *s, enum mv_verdict v);

#endif
