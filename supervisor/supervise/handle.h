/* What the supervisor does with one notification: decode, find the
 * process, decide, record. The notify thread calls these around its
 * receive and answer; nothing here blocks on anything slower than a /proc
 * read of a newly seen thread. */
#ifndef MV_HANDLE_H
#define MV_HANDLE_H

#include "supervisor/supervise/mv.h"

#include <linux/seccomp.h>

struct answer {
	pid_t pid; /* 0 when the process could not be found */
	enum mv_sc sc;
	int verdict;
};

/* Decide req, which came on listener, and fill resp (zeroed by the
 * caller, id set). */
void handle_notification(struct mv *mv, int listener, const struct seccomp_notif *req,
			 struct seccomp_notif_resp *resp, struct answer *a);

/* After the answer went out (send_rc: 0 or -errno), record its cost. */
void handle_answered(struct mv *mv, const struct answer *a, int send_rc, uint64_t service_ns);

#endif
