#include "supervisor/supervise/handle.h"
#include "common/log.h"
#include "common/util.h"
#include "supervisor/supervise/enforce.h"
#include "supervisor/supervise/events.h"
#include "supervisor/supervise/lifecycle.h"

#include <errno.h>
#include <string.h>

static void decode(int listener, const struct seccomp_notif *req, struct mv_call *c)
{
	c->listener = listener;
	c->sc = syscalls_decode(req->data.arch, req->data.nr, &c->abi);
	c->tid = (pid_t)req->pid;
	c->ip = req->data.instruction_pointer;
	c->id = req->id;
	for (int i = 0; i < 6; i++)
		c->args[i] = req->data.args[i];
}

static void record_locked(struct proc *p, const struct mv_call *c, int verdict)
{
	p->stats.calls[c->sc][verdict]++;
	p->stats.abi_calls[c->abi]++;
	p->stats.bytes[c->sc] += call_bytes_asked(c, &p->brk_cur);
	p->notified_calls++;
	/* The i386 mmap takes its arguments in memory: nothing to match on.
	 * A process that exited during the decision keeps no call log. */
	if (verdict == MV_V_DENY || verdict == MV_V_KILL ||
	    (c->sc == MV_SC_mmap && c->abi == MV_ABI_I386) || p->state != PROC_RUNNING)
		return;
	if (!p->aslog)
		p->aslog = xcalloc(1, sizeof(*p->aslog));
	as_log_call(p->aslog, c->sc, c->args, mv_wall_ns());
}

void handle_notification(struct mv *mv, int listener, const struct seccomp_notif *req,
			 struct seccomp_notif_resp *resp, struct answer *a)
{
	struct mv_call c;
	decode(listener, req, &c);
	resp->flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
	memset(a, 0, sizeof(*a));
	a->sc = c.sc;
	a->verdict = MV_V_ALLOW;

	enforce_begin(mv);
	pthread_mutex_lock(&mv->lock);
	mv->notifications++;
	if (c.sc == MV_SC_UNKNOWN) {
		/* The filter and the table are built from the same list; this
		 * would be a bug, and letting the call through is safe. */
		mv->unknown_calls++;
		pthread_mutex_unlock(&mv->lock);
		enforce_end(mv);
		log_warn("notification for unknown call arch %#x nr %d from %d", req->data.arch,
			 req->data.nr, req->pid);
		return;
	}
	struct proc *p = lifecycle_find_locked(mv, c.tid);
	/* The policy decides (docs/policy.md), after an exec has been settled
	 * (wx_allow goes by the executable); on the registers alone when the
	 * process could not be found. What it reads from the kernel is read
	 * without mv->lock (enforce.h). */
	if (p)
		lifecycle_settle_exec_locked(mv, p);
	struct enforce_caller who;
	enforce_caller_locked(mv, p, &who);
	pthread_mutex_unlock(&mv->lock);
	struct pol_decision d;
	enforce_decide(mv, &who, &c, &d);
	enforce_end(mv);
	pthread_mutex_lock(&mv->lock);
	/* The same process again: its thread waits in this call, so only a
	 * SIGKILL can have ended it meanwhile (then it is among the exited,
	 * and its counters still take the call). */
	p = who.known ? proctab_find(&mv->procs, who.pid, who.seen_ns) : NULL;
	enforce_apply_locked(mv, p, &who, &d);
	a->verdict = d.verdict;
	if (p) {
		a->pid = p->pid;
		record_locked(p, &c, a->verdict);
		if (p->state == PROC_RUNNING) {
			lifecycle_settle_exec_locked(mv, p);
			if (c.sc == MV_SC_execve || c.sc == MV_SC_execveat)
				lifecycle_exec_attempt_locked(mv, p, &c);
			else if (syscalls_class(c.sc) == MV_SC_LIFECYCLE)
				mv->last_cloner = p->pid;
		}
	}
	pthread_mutex_unlock(&mv->lock);
	enforce_answer(&d, resp);

	if (events_active(mv))
		events_call(mv, &c, a->pid, a->verdict, d.verdict == MV_V_DENY ? d.err : 0,
			    d.verdict == MV_V_ALLOW ? NULL : d.rule);
}

void handle_answered(struct mv *mv, const struct answer *a, int send_rc, uint64_t service_ns)
{
	if (!a->pid)
		return;
	/* The process may have exited (and been folded) since the answer
	 * let it run: its time still counts, so every notification is timed. */
	pthread_mutex_lock(&mv->lock);
	struct proc_stats *st = proctab_stats_of(&mv->procs, a->pid);
	hist_add(&st->service, service_ns);
	if (send_rc == -ENOENT)
		st->gone++;
	pthread_mutex_unlock(&mv->lock);
}
