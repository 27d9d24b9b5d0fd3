/* rollback --until (supervisor/rollback/mark.h): after the rollback the
 * program runs under PTRACE_SYSCALL on the mark's tracer thread, which
 * stops it again at the first of:
 *   reached   a thread enters the asked system call (with the asked first
 *             argument, the descriptor);
 *   exited    a thread enters exit_group(2), or the last thread exit(2):
 *             held before the call, so that the next rollback has a
 *             process to put back;
 *   crashed   a signal whose default action kills is about to be
 *             delivered with no handler for it, raised by the program or
 *             the kernel (a fault, abort(3), a broken pipe): the signal is
 *             dropped and the thread held where it was;
 *   timeout   the time limit;
 *   cancelled `job cancel` of the rollback's job, during the run;
 *   exec      a thread ran execve(2): the program runs on, the mark is gone;
 *   gone      every thread ended (SIGKILL, a signal sent by another process);
 *   released  memvisor was asked to let the program run (a signal for it,
 *             its end).
 * On the first five the program is held stopped: each thread in an
 * interrupt stop, a thread stopped on its way into a call set back before
 * the call (the call is made when it runs on). The marked call itself,
 * restarted by the rollback, is not a stop point: a mark taken in read(0)
 * stops at the next read(0), not at the same one again.
 *
 * A tree's mark runs every process of the mark: a point reached, an exit,
 * a crash or a new program in any of them is the event (its "pid" says
 * whose), and a process of the mark that ended ("gone") lets the rest go.
 *
 * Threads created during the run are traced from their start
 * (PTRACE_O_TRACECLONE), their crashes and calls seen as the others';
 * children forked are not (the next rollback kills them), nor a process
 * made by a clone(2) the kernel reports as a thread's (no CLONE_THREAD,
 * an exit signal other than SIGCHLD): it is let go at its first stop. */
#include "common/log.h"
#include "common/util.h"
#include "supervisor/kernel/procfs.h"
#include "supervisor/kernel/ptrace.h"
#include "supervisor/rollback/mark.h"
#include "supervisor/supervise/point.h"
#include "supervisor/supervise/mv.h"

#include <errno.h>
#include <seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef sigev_notify_thread_id
#define sigev_notify_thread_id _sigev_un._tid
#endif

#define SYSCALL_STOP (SIGTRAP | 0x80)
/* The kernel's "make the call again, even after a handler" (not in uapi). */
#define MV_ERESTARTNOINTR 513

/* A marked thread's call the rollback restarts: its first call after the
 * rollback, not a stop point (on: not yet passed). */
struct replay {
	pid_t tid;
	bool on;
	long nr;
	uint64_t ip, arg0;
};

struct until {
	struct rb_mark *m;
	struct ckpt *c;
	const struct rollback_req *q;
	/* The marked processes (c->p[rb_proc(m, i)->ci].pt), the command's
	 * first. */
	struct ptrace_proc **pp;
	size_t np;
	struct replay *replay;
	size_t n_replay;
	timer_t timer;
	bool have_timer;
	/* run --until-point names this stop: the kernel notifies it, the
	 * program runs under PTRACE_CONT (supervise/point.h). NULL: every
	 * call stops (PTRACE_SYSCALL). */
	struct point *pt;
	enum __ptrace_request go; /* PTRACE_CONT or PTRACE_SYSCALL */
};

/* Thread tid of a marked process, and that process in *pp (if pp). */
static struct ptrace_thread *find(struct until *u, pid_t tid, struct ptrace_proc **pp)
{
	for (size_t i = 0; i < u->np; i++) {
		struct ptrace_thread *t = ptrace_proc_find(u->pp[i], tid);
		if (t) {
			if (pp)
				*pp = u->pp[i];
			return t;
		}
	}
	return NULL;
}

/* The marked process pid, or NULL. */
static struct ptrace_proc *proc_of(struct until *u, pid_t pid)
{
	for (size_t i = 0; i < u->np; i++)
		if (u->pp[i]->pid == pid)
			return u->pp[i];
	return NULL;
}

static size_t alive(const struct ptrace_proc *pp)
{
	size_t n = 0;
	for (size_t i = 0; i < pp->n; i++)
		n += pp->t[i].state == PT_STOPPED || pp->t[i].state == PT_SEIZED;
	return n;
}

/* Has every marked process a thread left? */
static bool all_alive(const struct until *u)
{
	for (size_t i = 0; i < u->np; i++)
		if (!alive(u->pp[i]))
			return false;
	return true;
}

/* A thread marked inside a call the stop interrupted (orig_rax >= 0, rax
 * one of the kernel's restart codes) makes the call again first thing
 * after a rollback. */
static void note_replays(struct until *u)
{
	size_t cap = 0;
	for (size_t i = 0; i < u->np; i++)
		cap += rb_proc(u->m, i)->n_t;
	u->replay = xcalloc(cap + 1, sizeof(*u->replay));
	for (size_t i = 0; i < u->np; i++) {
		const struct rb_mark *x = rb_proc(u->m, i);
		for (size_t k = 0; k < x->n_t; k++) {
			const struct rb_thread *rt = &x->t[k];
			if (rt->prstatus_len < sizeof(struct user_regs_struct))
				continue;
			const struct user_regs_struct *r = rt->prstatus;
			long ax = (long)r->rax;
			bool restart = ax == -512 || ax == -513 || ax == -514 || ax == -516;
			if ((long)r->orig_rax >= 0 && restart)
				u->replay[u->n_replay++] = (struct replay){
				    rt->tid, true, (long)r->orig_rax, r->rip, r->rdi};
		}
	}
}

static struct replay *replay_of(struct until *u, pid_t tid)
{
	for (size_t i = 0; i < u->n_replay; i++)
		if (u->replay[i].tid == tid)
			return &u->replay[i];
	return NULL;
}

static int arm_timer(struct until *u)
{
	struct sigevent sev = {.sigev_notify = SIGEV_THREAD_ID, .sigev_signo = RB_WAKE_SIGNAL};
	sev.sigev_notify_thread_id = (pid_t)syscall(SYS_gettid);
	if (timer_create(CLOCK_MONOTONIC, &sev, &u->timer) < 0)
		return -errno;
	u->have_timer = true;
	struct itimerspec its = {.it_value = {0, 10 * 1000000L}, .it_interval = {0, 10 * 1000000L}};
	timer_settime(u->timer, 0, &its, NULL);
	return 0;
}

/* Default action: end the process (with or without a core). */
static bool kills_by_default(int sig)
{
	switch (sig) {
	case SIGCHLD:
	case SIGCONT:
	case SIGSTOP:
	case SIGTSTP:
	case SIGTTIN:
	case SIGTTOU:
	case SIGURG:
	case SIGWINCH:
		return false;
	default:
		return true;
	}
}

/* Does process pid have a handler for sig, or ignore it? */
static bool handled(pid_t pid, int sig)
{
	struct proc_status st;
	if (procfs_status(pid, &st) < 0)
		return false;
	return (st.sig_cgt | st.sig_ign) & (1ull << (sig - 1));
}

/* A signal on its way to thread tid of process pp that would end it: a
 * crash, unless a process outside the mark sent it (that one means it).
 * One sent by another process of a tree's mark is held as a crash too:
 * the process it would end could not be put back. */
static bool is_crash(struct until *u, const struct ptrace_proc *pp, pid_t tid, int sig,
		     siginfo_t *si)
{
	if (!kills_by_default(sig) || handled(pp->pid, sig))
		return false;
	if (ptrace(PTRACE_GETSIGINFO, tid, 0, si) < 0)
		return false;
	if (si->si_code <= 0 && si->si_code != SI_KERNEL && !proc_of(u, si->si_pid))
		return false; /* kill(2), sigqueue(3), tgkill(2) from outside */
	return true;
}

/* Wait for tid's next stop or exit, a wake-up (EINTR: -EINTR) aside. */
static int wait_one(pid_t tid, int *status)
{
	pid_t r = waitpid(tid, status, __WALL);
	if (r < 0)
		return -errno;
	return 0;
}

/* tid, new to us and in its first stop: a thread of a marked process is
 * recorded (traced from its start); a process of its own (a clone(2)
 * without CLONE_THREAD reported as PTRACE_EVENT_CLONE) is let go, as a
 * forked child is. The thread, or NULL. */
static struct ptrace_thread *adopt_new(struct until *u, pid_t tid)
{
	struct proc_status st;
	/* Unreadable: kept as the command's thread, stopped with the rest,
	 * rather than let go unseen. */
	struct ptrace_proc *pp = u->pp[0];
	if (procfs_status(tid, &st) == 0 && !(pp = proc_of(u, st.tgid))) {
		ptrace(PTRACE_DETACH, tid, 0, 0);
		return NULL;
	}
	return ptrace_proc_adopt(pp, tid);
}

/* A thread that stopped to report a clone (PTRACE_EVENT_CLONE): a new
 * thread is ours from its start; record it, to be waited for. A new
 * process is let go once it has stopped. */
static void adopt_clone(struct until *u, pid_t tid, int ev)
{
	unsigned long msg = 0;
	if (ev != PTRACE_EVENT_CLONE || ptrace(PTRACE_GETEVENTMSG, tid, 0, &msg) < 0 || !msg ||
	    find(u, (pid_t)msg, NULL))
		return;
	struct proc_status st;
	struct ptrace_proc *pp = NULL;
	find(u, tid, &pp);
	/* A thread (its Tgid a marked process's; unreadable, the cloner's). */
	if (procfs_status((pid_t)msg, &st) < 0 || (pp = proc_of(u, st.tgid))) {
		if (pp)
			ptrace_proc_adopt(pp, (pid_t)msg);
		return;
	}
	/* Its first stop comes at once (it was traced at its birth). */
	uint64_t deadline = mv_now_ns() + 2000 * 1000000ull;
	int ws;
	for (;;) {
		int rc = wait_one((pid_t)msg, &ws);
		if (rc == -EINTR && mv_now_ns() < deadline)
			continue;
		if (rc == 0 && WIFSTOPPED(ws))
			ptrace(PTRACE_DETACH, (pid_t)msg, 0, 0);
		return;
	}
}

static void settle_wait(struct until *u, pid_t tid);
static void stop_points(struct until *u);

/* Thread tid (stopped, not at a call's entry) into an interrupt stop, or
 * a signal-delivery stop that keeps its signal for later. */
static void settle(struct until *u, pid_t tid)
{
	struct ptrace_thread *t = find(u, tid, NULL);
	ptrace(PTRACE_INTERRUPT, tid, 0, 0);
	if (ptrace(PTRACE_CONT, tid, 0, 0) < 0) {
		t->state = PT_STOPPED; /* still in its stop */
		return;
	}
	t->state = PT_SEIZED;
	settle_wait(u, tid);
}

/* Thread n->tid waits in the stop point's notified call n: interrupted,
 * and the call answered -ERESTARTNOINTR, it stops before the call (made
 * again when it runs on, as after a signal without handler). Without
 * WAIT_KILLABLE_RECV the interrupt alone ends the wait (the answer then
 * finds it withdrawn) and the call restarts the same way. */
static void settle_notified(struct until *u, const struct point_note *n)
{
	ptrace(PTRACE_INTERRUPT, n->tid, 0, 0);
	point_answer(n, MV_ERESTARTNOINTR);
	settle_wait(u, n->tid);
}

/* Wait for tid, running after a PTRACE_INTERRUPT, to reach its interrupt
 * stop (or a signal-delivery stop, its signal kept). */
static void settle_wait(struct until *u, pid_t tid)
{
	struct ptrace_proc *pp = NULL;
	struct ptrace_thread *t = find(u, tid, &pp);
	uint64_t deadline = mv_now_ns() + 2000 * 1000000ull;
	for (;;) {
		int st, rc = wait_one(tid, &st);
		if (rc == -EINTR) {
			if (mv_now_ns() > deadline)
				return; /* left PT_SEIZED: the caller fails */
			continue;
		}
		if (rc < 0) {
			t->state = PT_GONE;
			return;
		}
		if (WIFEXITED(st) || WIFSIGNALED(st)) {
			t->state = PT_GONE;
			pp->exited_threads++;
			return;
		}
		int sig = WSTOPSIG(st), ev = st >> 16;
		adopt_clone(u, tid, ev);
		t = find(u, tid, NULL); /* the array may have moved */
		t->state = PT_STOPPED;
		t->signal = 0;
		t->group_stop = false;
		if (ev == PTRACE_EVENT_STOP) {
			t->group_stop = sig != SIGTRAP;
			return;
		}
		if (ev == 0 && sig != SYSCALL_STOP) {
			t->signal = sig; /* delivered at release, dropped by a rollback */
			return;
		}
		/* A syscall or clone or exec event stop before the interrupt: on. */
		ptrace(PTRACE_INTERRUPT, tid, 0, 0);
		ptrace(PTRACE_CONT, tid, 0, 0);
		t->state = PT_SEIZED;
	}
}

/* t stopped entering a call: set back before it (the call is skipped
 * now, and made when the thread runs on), then settled. */
static void settle_entry(struct until *u, pid_t tid, long nr)
{
	struct user_regs_struct r;
	if (ptrace(PTRACE_GETREGS, tid, 0, &r) == 0) {
		r.orig_rax = (unsigned long long)-1;
		r.rip -= 2; /* syscall, int $0x80 and sysenter are two bytes */
		r.rax = (unsigned long long)nr;
		ptrace(PTRACE_SETREGS, tid, 0, &r);
	}
	settle(u, tid);
}

/* Every thread of pp that runs stopped too: interrupted and settled
 * (threads made during the run are ours already). 0, or -EAGAIN when one
 * would not stop. */
static int stop_proc(struct until *u, struct ptrace_proc *pp, uint64_t deadline)
{
	for (size_t i = 0; i < pp->n; i++)
		if (pp->t[i].state == PT_SEIZED)
			ptrace(PTRACE_INTERRUPT, pp->t[i].tid, 0, 0);
	/* pp->n may grow (a clone reported now): each pass re-reads it, and
	 * threads adopted on the way are interrupted when their turn comes. */
	for (size_t i = 0; i < pp->n; i++) {
		pid_t tid = pp->t[i].tid;
		if (pp->t[i].state == PT_SEIZED)
			ptrace(PTRACE_INTERRUPT, tid, 0, 0);
		while (pp->t[i].state == PT_SEIZED) {
			if (u->pt)
				stop_points(u);
			int st, rc = wait_one(tid, &st);
			if (rc == -EINTR) {
				if (mv_now_ns() > deadline)
					return -EAGAIN;
				continue;
			}
			struct ptrace_thread *t = &pp->t[i];
			if (rc < 0 || WIFEXITED(st) || WIFSIGNALED(st)) {
				t->state = PT_GONE;
				pp->exited_threads++;
				break;
			}
			int sig = WSTOPSIG(st), ev = st >> 16;
			t->state = PT_STOPPED;
			if (sig == SYSCALL_STOP) {
				struct __ptrace_syscall_info info;
				long n = ptrace(PTRACE_GET_SYSCALL_INFO, tid, sizeof(info), &info);
				if (n > 0 && info.op == PTRACE_SYSCALL_INFO_ENTRY)
					settle_entry(u, tid, (long)info.entry.nr);
				else
					settle(u, tid);
			} else if (ev == PTRACE_EVENT_STOP) {
				t->group_stop = sig != SIGTRAP;
			} else if (ev == 0) {
				t->signal = sig;
			} else {
				adopt_clone(u, tid, ev);
				settle(u, tid);
			}
		}
		if (pp->t[i].state == PT_SEIZED)
			return -EAGAIN;
	}
	return 0;
}

/* Every marked process stopped (stop_proc). */
static int stop_rest(struct until *u)
{
	/* All interrupted first: none runs on while another is waited for. */
	for (size_t k = 0; k < u->np; k++)
		for (size_t i = 0; i < u->pp[k]->n; i++)
			if (u->pp[k]->t[i].state == PT_SEIZED)
				ptrace(PTRACE_INTERRUPT, u->pp[k]->t[i].tid, 0, 0);
	uint64_t deadline = mv_now_ns() + 2000 * 1000000ull;
	for (size_t k = 0; k < u->np; k++) {
		int rc = stop_proc(u, u->pp[k], deadline);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* The process of thread tid, in an event. */
static json_t *event_json(const char *event, struct until *u, pid_t tid)
{
	struct ptrace_proc *pp = NULL;
	find(u, tid, &pp);
	return json_pack("{s:s, s:i, s:i}", "event", event, "tid", tid, "pid", pp ? pp->pid : tid);
}

static json_t *exit_json(const char *event, struct until *u, pid_t tid, int status)
{
	json_t *o = event_json(event, u, tid);
	if (WIFEXITED(status))
		json_object_set_new(o, "status", json_integer(WEXITSTATUS(status)));
	else if (WIFSIGNALED(status))
		json_object_set_new(o, "signal", json_integer(WTERMSIG(status)));
	return o;
}

static json_t *crash_json(struct until *u, pid_t tid, int sig, const siginfo_t *si)
{
	const char *abbrev = sigabbrev_np(sig);
	char name[32];
	snprintf(name, sizeof(name), "SIG%s", abbrev ? abbrev : "?");
	json_t *o = event_json("crashed", u, tid);
	json_object_set_new(o, "signal", json_integer(sig));
	json_object_set_new(o, "signal_name", json_string(name));
	json_object_set_new(o, "code", json_integer(si->si_code));
	if (sig == SIGSEGV || sig == SIGBUS || sig == SIGILL || sig == SIGFPE || sig == SIGTRAP)
		json_object_set_new(o, "addr", json_integer((json_int_t)(uintptr_t)si->si_addr));
	else if (si->si_code <= 0 && si->si_code != SI_KERNEL)
		json_object_set_new(o, "sender", json_integer(si->si_pid));
	return o;
}

/* A call event: nr and its first argument. */
static json_t *call_json(const char *event, struct until *u, pid_t tid, long nr, uint64_t arg0)
{
	char *name = seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, (int)nr);
	json_t *o = event_json(event, u, tid);
	json_object_set_new(o, "syscall", json_string(name ? name : "?"));
	json_object_set_new(o, "nr", json_integer(nr));
	json_object_set_new(o, "arg0", json_integer((json_int_t)arg0));
	free(name);
	return o;
}

/* The stop point's notifications queued since the last look, one at a
 * time: a call of a thread not in the mark and an exit(2) of one of
 * several threads go on; the point, an exit_group(2) or the last
 * thread's exit(2) is the event (its thread stopped before the call).
 * The marked call made again never comes here: the notify thread lets it
 * through (point_arm's pass). NULL: no event (the queue is empty). */
static json_t *take_points(struct until *u)
{
	struct point_note n;
	while (point_take(u->pt, &n, 1) == 1) {
		struct ptrace_proc *pp = NULL;
		if (!find(u, n.tid, &pp)) {
			point_answer(&n, 0);
			continue;
		}
		bool exits = n.kind == POINT_EXIT_GROUP || (n.kind == POINT_EXIT && alive(pp) == 1);
		if (n.kind != POINT_CALL && !exits) {
			point_answer(&n, 0);
			continue;
		}
		json_t *o = call_json(exits ? "exited" : "reached", u, n.tid, n.nr, n.arg0);
		if (exits)
			json_object_set_new(o, "status", json_integer((int)n.arg0 & 0xff));
		settle_notified(u, &n);
		return o;
	}
	return NULL;
}

/* Every notification still queued for a thread of the mark, which was
 * interrupted (stop_rest): answered so that it stops before its call;
 * others go on. */
static void stop_points(struct until *u)
{
	struct point_note n;
	while (point_take(u->pt, &n, 1) == 1)
		point_answer(&n, find(u, n.tid, NULL) ? MV_ERESTARTNOINTR : 0);
}

/* Run until an event; the thread it happened to is stopped (settled),
 * the others may still run. */
static json_t *run_to_event(struct until *u, bool *keep)
{
	const struct rollback_req *q = u->q;
	uint64_t deadline = mv_now_ns() + (uint64_t)q->timeout_ms * 1000000ull;
	*keep = true;
	for (;;) {
		if (mv_now_ns() >= deadline)
			return json_pack("{s:s}", "event", "timeout");
		if (job_cancel_asked(u->c->j))
			return json_pack("{s:s}", "event", "cancelled");
		if (rb_hold_wanted_gone(u->m->hold)) {
			*keep = false;
			return json_pack("{s:s}", "event", "released");
		}
		if (u->pt) {
			/* Queued since the last look: the notify thread's wake-up
			 * (RB_WAKE_SIGNAL) ends the wait below; one that came
			 * just before it is found at the next tick of the timer. */
			json_t *o = take_points(u);
			if (o)
				return o;
		}
		int st;
		pid_t tid = waitpid(-1, &st, __WALL | __WNOTHREAD);
		if (tid < 0) {
			if (errno == EINTR)
				continue;
			*keep = false;
			return json_pack("{s:s}", "event", "gone");
		}
		struct ptrace_proc *pp = NULL;
		struct ptrace_thread *t = find(u, tid, &pp);
		if (!t && WIFSTOPPED(st)) {
			/* A thread made during the run: traced from its start. */
			t = adopt_new(u, tid);
			find(u, tid, &pp);
		}
		if (!t)
			continue;
		if (WIFEXITED(st) || WIFSIGNALED(st)) {
			t->state = PT_GONE;
			pp->exited_threads++;
			if (!alive(pp)) {
				*keep = false;
				return exit_json("gone", u, tid, st);
			}
			continue;
		}
		int sig = WSTOPSIG(st), ev = st >> 16;
		t->state = PT_STOPPED;
		t->signal = 0;
		if (sig == SYSCALL_STOP) {
			struct __ptrace_syscall_info in;
			long n = ptrace(PTRACE_GET_SYSCALL_INFO, tid, sizeof(in), &in);
			struct replay *rp = replay_of(u, tid);
			if (n > 0 && in.op == PTRACE_SYSCALL_INFO_ENTRY) {
				long nr = (long)in.entry.nr;
				bool replay = rp && rp->on && in.instruction_pointer == rp->ip &&
					      nr == rp->nr;
				if (rp)
					rp->on = false;
				bool exits =
				    nr == SYS_exit_group || (nr == SYS_exit && alive(pp) == 1);
				if (!replay && exits) {
					json_t *o =
					    call_json("exited", u, tid, nr, in.entry.args[0]);
					json_object_set_new(
					    o, "status",
					    json_integer((int)in.entry.args[0] & 0xff));
					settle_entry(u, tid, nr);
					return o;
				}
				if (!replay && q->until_nr >= 0 && nr == q->until_nr &&
				    (q->until_fd < 0 || (int)in.entry.args[0] == q->until_fd)) {
					json_t *o =
					    call_json("reached", u, tid, nr, in.entry.args[0]);
					settle_entry(u, tid, nr);
					return o;
				}
			} else if (n > 0 && in.op == PTRACE_SYSCALL_INFO_EXIT && rp) {
				rp->on = false;
			}
			t->state = PT_SEIZED;
			ptrace(u->go, tid, 0, 0);
			continue;
		}
		if (ev == PTRACE_EVENT_EXEC) {
			*keep = false;
			return event_json("exec", u, tid);
		}
		if (ev == PTRACE_EVENT_STOP) {
			t->state = PT_SEIZED;
			if (sig != SIGTRAP) /* a group stop: it waits for SIGCONT, listened */
				ptrace(PTRACE_LISTEN, tid, 0, 0);
			else
				ptrace(u->go, tid, 0, 0);
			continue;
		}
		if (ev != 0) {
			t->state = PT_SEIZED;
			adopt_clone(u, tid, ev); /* t is stale from here */
			ptrace(u->go, tid, 0, 0);
			continue;
		}
		siginfo_t si;
		if (is_crash(u, pp, tid, sig, &si)) {
			json_t *o = crash_json(u, tid, sig, &si);
			settle(u, tid); /* the signal dropped */
			return o;
		}
		t->state = PT_SEIZED;
		ptrace(u->go, tid, 0, (void *)(uintptr_t)sig);
	}
}

int rb_until_run(struct rb_mark *m, struct ckpt *c, const struct rollback_req *q, json_t **event)
{
	struct until u = {.m = m, .c = c, .q = q, .go = PTRACE_SYSCALL};
	u.np = 1 + m->n_members;
	u.pp = xcalloc(u.np, sizeof(*u.pp));
	for (size_t i = 0; i < u.np; i++)
		u.pp[i] = &c->p[rb_proc(m, i)->ci].pt;
	note_replays(&u);
	struct point *pt = m->mv->point;
	if (pt && q->until_nr >= 0 && point_matches(pt, q->until_nr, q->until_fd)) {
		/* The calls restarted are the notify thread's to let through
		 * (it sees them first); a thread's first notified call is its
		 * restarted one only if the arguments match too. */
		struct point_pass pass[POINT_PASS];
		size_t n_pass = 0;
		for (size_t i = 0; i < u.n_replay && n_pass < POINT_PASS; i++) {
			struct replay *rp = &u.replay[i];
			if (!find(&u, rp->tid, NULL))
				continue;
			pass[n_pass++] =
			    (struct point_pass){rp->tid, (int)rp->nr, rp->ip, rp->arg0};
			rp->on = false;
		}
		u.pt = pt;
		u.go = PTRACE_CONT;
		point_arm(pt, (pid_t)syscall(SYS_gettid), RB_WAKE_SIGNAL, pass, n_pass);
	}
	int rc = arm_timer(&u);
	if (rc < 0) {
		rb_hold_let_go(m->hold);
		rc = ckpt_fail(c, rc, MV_E_INTERNAL, "no timer for --until: %s", strerror(-rc));
		goto out;
	}
	long opts = PTRACE_O_TRACESYSGOOD | PTRACE_O_TRACEEXEC | PTRACE_O_TRACECLONE;
	for (size_t k = 0; k < u.np; k++) {
		struct ptrace_proc *pp = u.pp[k];
		for (size_t i = 0; i < pp->n; i++) {
			struct ptrace_thread *t = &pp->t[i];
			if (t->state != PT_STOPPED)
				continue;
			ptrace(PTRACE_SETOPTIONS, t->tid, 0, (void *)opts);
			int sig = t->signal;
			t->signal = 0;
			if (ptrace(u.go, t->tid, 0, (void *)(uintptr_t)sig) == 0)
				t->state = PT_SEIZED;
		}
	}
	uint64_t t0 = mv_now_ns();
	bool keep;
	json_t *ev = run_to_event(&u, &keep);
	uint64_t ran = mv_now_ns() - t0;
	if (keep || !strcmp(json_string_value(json_object_get(ev, "event")), "released")) {
		rc = stop_rest(&u);
		if (rc < 0) {
			/* A thread that will not stop: let the program go. */
			rb_hold_let_go(m->hold);
			json_decref(ev);
			rc = ckpt_fail(c, rc, MV_E_BUSY,
				       "a thread of process %d%s did not stop after the run: the "
				       "program was let go",
				       m->pid, u.np > 1 ? " or of its tree" : "");
			goto out;
		}
	}
	json_object_set_new(ev, "run_ns", json_integer((json_int_t)ran));
	json_object_set_new(ev, "stops", json_string(u.pt ? "notified" : "traced"));
	if (keep && all_alive(&u)) {
		rb_hold_keep(m->hold);
	} else {
		for (size_t k = 0; k < u.np; k++)
			for (size_t i = 0; i < u.pp[k]->n; i++)
				if (u.pp[k]->t[i].state == PT_SEIZED)
					u.pp[k]->t[i].state = PT_GONE; /* running (exec) or gone */
		rb_hold_let_go(m->hold);
	}
	*event = ev;
	log_debug("mark %s: until: %s after %.3f ms", m->name,
		  json_string_value(json_object_get(ev, "event")), (double)ran / 1e6);
out:
	if (u.pt) {
		/* Every thread of the mark is stopped or gone (or let go):
		 * what is still queued is another process's, or goes on. */
		point_arm(u.pt, 0, 0, NULL, 0);
		struct point_note n;
		while (point_take(u.pt, &n, 1) == 1)
			point_answer(&n, 0);
	}
	if (u.have_timer)
		timer_delete(u.timer);
	free(u.replay);
	free(u.pp);
	return rc;
}
