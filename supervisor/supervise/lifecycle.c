#include "supervisor/supervise/lifecycle.h"
#include "common/fault.h"
#include "common/log.h"
#include "common/util.h"
#include "supervisor/supervise/enforce.h"
#include "supervisor/supervise/events.h"
#include "supervisor/supervise/tree.h"
#include "supervisor/kernel/pidfd.h"
#include "supervisor/kernel/procfs.h"
#include "supervisor/kernel/vm.h"

#include <fcntl.h>
#include <linux/kcmp.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/syscall.h>

/* Watch p's exit: its pidfd joins the exits epoll set, which the main
 * loop watches. epoll_ctl is thread-safe, so the notify thread does this
 * without waking the main thread (a wake-up here let the main thread
 * preempt the notify thread on its CPU in the middle of an answer). */
static void watch_exit_locked(struct mv *mv, struct proc *p)
{
	struct epoll_event ev = {.events = EPOLLIN,
				 .data.u64 = (uint64_t)(uint32_t)p->pid << 32 | (uint32_t)p->pidfd};
	if (p->pidfd >= 0 && epoll_ctl(mv->exits_epfd, EPOLL_CTL_ADD, p->pidfd, &ev) < 0)
		log_warn("cannot watch the exit of %d: %s", p->pid, strerror(errno));
}

/* A new process: the pid, a pidfd, the parent the pidfd tells, and the
 * parent's identity (a fork child runs its parent's program until it
 * execs). Nothing from /proc: a first look at a new pid's /proc files
 * took 30-400 us here; the identity is refreshed from /proc only when a
 * query needs it (lifecycle_refresh). */
static struct proc *discover_locked(struct mv *mv, pid_t tgid, int pidfd)
{
	/* A process that has exited already is a zombie its parent has not
	 * reaped yet: seen alive, it is recorded and its exit handled (it
	 * is no longer among the running); never seen alive, there is
	 * nothing left to supervise. Recorded here, it was recorded twice:
	 * a query's tree scan found the zombie of a child its parent had
	 * not waited for yet, and the exit status, asked for by pid, went
	 * to the copy, the first record keeping none. */
	if (pidfd >= 0 && pidfd_exited(pidfd)) {
		close(pidfd);
		return NULL;
	}
	struct proc *p = proctab_add(&mv->procs, tgid, 0);
	p->seen_ns = mv_wall_ns();
	p->pidfd = pidfd;
	pidfd_ppid(pidfd, &p->ppid);
	struct proc *parent = p->ppid > 0 ? proctab_get(&mv->procs, p->ppid) : NULL;
	if (parent) {
		p->exe = parent->exe ? xstrdup(parent->exe) : NULL;
		p->exe_verified = parent->exe_verified;
		if (parent->cmdline) {
			p->cmdline = xmalloc(parent->cmdline_len);
			memcpy(p->cmdline, parent->cmdline, parent->cmdline_len);
			p->cmdline_len = parent->cmdline_len;
		}
	}
	p->identity_stale = true;
	watch_exit_locked(mv, p);
	events_proc(mv, MV_EVENT_START, p, 0);
	log_debug("process %d (parent %d) found", tgid, p->ppid);
	return p;
}

/* The process a non-leader thread belongs to. Threads are created by
 * clone(CLONE_THREAD) in a process we have usually seen cloning just now. */
static struct proc *thread_owner_locked(struct mv *mv, pid_t tid)
{
	struct proc *p = proctab_get(&mv->procs, mv->last_cloner);
	if (p && procfs_is_thread_of(p, tid))
		return p;
	struct proc_status st;
	if (procfs_status(tid, &st) < 0)
		return NULL;
	return proctab_get(&mv->procs, st.tgid);
}

struct proc *lifecycle_find_locked(struct mv *mv, pid_t tid)
{
	struct proc *p = proctab_get(&mv->procs, tid);
	if (p)
		return p;
	p = imap_get(&mv->procs.threads, tid);
	/* Thread ids are reused after the thread exits; a stale entry would
	 * put a new process's calls on an old one. */
	if (p && procfs_is_thread_of(p, tid))
		return p;
	if (p)
		proctab_del_thread(&mv->procs, tid);
	/* pidfd_open succeeds for a thread-group leader only: a new process. */
	int pidfd =
	    fault_hit("pidfd_open") ? (errno = EMFILE, -1) : (int)syscall(SYS_pidfd_open, tid, 0);
	if (pidfd >= 0)
		return discover_locked(mv, tid, pidfd);
	/* A thread that is not a leader: EINVAL, or ENOENT since Linux 6.9
	 * (PIDFD_THREAD). ESRCH: gone. */
	if (errno == EMFILE || errno == ENFILE) {
		/* Out of fds: count the call on a process anyway, without an
		 * exit watcher (a query's tree scan retries). */
		log_warn("pidfd_open(%d): %s", tid, strerror(errno));
		return discover_locked(mv, tid, -1);
	}
	if (errno != EINVAL && errno != ENOENT)
		return NULL;
	p = thread_owner_locked(mv, tid);
	if (p)
		proctab_add_thread(&mv->procs, p, tid);
	return p;
}

/* What the execve asks to run: becomes the process's identity if the
 * exec succeeds, until /proc is read (a short-lived program may be gone
 * by then). */
static void capture_exec(struct mv *mv, struct proc *p, const struct mv_call *c)
{
	bool at = c->sc == MV_SC_execveat;
	uint64_t path = c->args[at ? 1 : 0], argv = c->args[at ? 2 : 1];
	bool compat = c->abi == MV_ABI_I386;
	char buf[4096];
	free(p->exec_path);
	free(p->exec_argv);
	p->exec_path = p->exec_argv = NULL;
	p->exec_argv_len = 0;
	if (vm_read_string(c->tid, path, buf, sizeof(buf), &mv->faulter) >= 0)
		p->exec_path = xstrdup(buf);
	ssize_t n = vm_read_argv(c->tid, argv, compat, buf, sizeof(buf), 64, &mv->faulter);
	if (n > 0) {
		p->exec_argv = xmalloc((size_t)n);
		memcpy(p->exec_argv, buf, (size_t)n);
		p->exec_argv_len = (size_t)n;
	}
}

void lifecycle_exec_attempt_locked(struct mv *mv, struct proc *p, const struct mv_call *c)
{
	uint64_t ip = c->ip;
	/* A PATH search tries names that do not exist: those execs fail,
	 * no need to prepare for them (the probe costs a /proc open). Only
	 * an absolute path can be checked from here (not execveat). A file
	 * created in the microseconds between this check and the exec would
	 * make an exec that is only seen at the next query's /proc read. */
	char path[4096];
	if (c->sc == MV_SC_execve &&
	    vm_read_string(c->tid, c->args[0], path, sizeof(path), &mv->faulter) > 0 &&
	    path[0] == '/' && access(path, F_OK) < 0 && errno == ENOENT)
		return;
	/* A previous attempt that is still unsettled failed, unless the new
	 * program execs at once without a notified call in between. Settle
	 * it by looking, not by guessing. */
	lifecycle_settle_exec_locked(mv, p);
	/* The open file pins the current mm: once an exec replaces it, reads
	 * through this fd find no mm and return 0 (fs/proc/base.c mem_rw). */
	p->exec_probe_fd = procfs_open(p->pid, "mem", O_RDONLY);
	p->exec_probe_addr = ip;
	p->exec_mm_peer = 0;
	/* A vfork child shares its parent's mm, which stays alive after the
	 * child's exec: compare the two mms instead (kcmp KCMP_VM). Its
	 * parent is the process that cloned last, if we have not read its
	 * parent from /proc yet. */
	pid_t peer = p->ppid > 0 ? p->ppid : mv->last_cloner;
	if (peer > 0 && peer != p->pid && syscall(SYS_kcmp, p->pid, peer, KCMP_VM, 0, 0) == 0)
		p->exec_mm_peer = peer;
	p->exec_pending = true;
	capture_exec(mv, p, c);
}

static bool exec_happened(struct proc *p)
{
	if (p->exec_mm_peer)
		return syscall(SYS_kcmp, p->pid, p->exec_mm_peer, KCMP_VM, 0, 0) != 0;
	if (p->exec_probe_fd < 0)
		return false;
	/* The probe address is where the execve was called from: mapped in
	 * the old mm for sure. One byte read back means the old mm is still
	 * the process's; 0 bytes means it is gone, replaced by the exec. */
	char b;
	return pread(p->exec_probe_fd, &b, 1, (off_t)p->exec_probe_addr) != 1;
}

void lifecycle_settle_exec_locked(struct mv *mv, struct proc *p)
{
	if (!p->exec_pending)
		return;
	bool happened = exec_happened(p);
	if (p->exec_probe_fd >= 0)
		close(p->exec_probe_fd);
	p->exec_probe_fd = -1;
	p->exec_mm_peer = 0;
	p->exec_pending = false;
	if (!happened)
		return;
	p->execs++;
	p->brk_cur = 0;
	/* The old image's layout and calls mean nothing now. */
	as_model_free(&p->model);
	if (p->aslog)
		as_log_clear(p->aslog);
	p->exec_ns = mv_wall_ns();
	/* exec kills every other thread (fs/exec.c de_thread). */
	proctab_drop_threads(&mv->procs, p);
	if (p->exec_path) {
		free(p->exe);
		p->exe = mv_steal_ptr(p->exec_path);
	}
	if (p->exec_argv) {
		free(p->cmdline);
		p->cmdline = mv_steal_ptr(p->exec_argv);
		p->cmdline_len = p->exec_argv_len;
	}
	/* The execve's arguments name the program until a query reads the
	 * real exe and cmdline from /proc. */
	p->identity_stale = true;
	p->exe_verified = false;
	enforce_proc_exec_locked(mv, p);
	events_proc(mv, MV_EVENT_EXEC, p, 0);
	log_debug("process %d exec'd %s", p->pid, p->exe ? p->exe : "?");
}

/* The kernel tells a process's exit status through its pidfd only once
 * the process has been reaped (PIDFD_INFO_EXIT, Linux 6.15), which its
 * parent may do long after the pidfd reports the exit: a storm worker the
 * scheduler keeps waiting, a shell that waits for a background job once
 * it is done with something else. Asked again for 5 s, such a status was
 * lost. The pidfd stays in the exits epoll set instead, waiting for
 * EPOLLHUP alone, which the kernel reports once the process is reaped
 * (pidfd_poll, in every kernel with PIDFD_GET_INFO): the status is there
 * then. Main thread. */
struct late_exit {
	pid_t pid;
	int pidfd;
	uint64_t seq; /* the record asked for: a pid may be recorded again */
};

static bool wait_for_reap_locked(struct mv *mv, const struct proc *p)
{
	/* EPOLLHUP and EPOLLERR are reported whatever the events ask for;
	 * 0 leaves out EPOLLIN, set from the exit on. */
	struct epoll_event ev = {.events = 0,
				 .data.u64 = (uint64_t)(uint32_t)p->pid << 32 | (uint32_t)p->pidfd};
	if (epoll_ctl(mv->exits_epfd, EPOLL_CTL_MOD, p->pidfd, &ev) < 0 &&
	    (errno != ENOENT || epoll_ctl(mv->exits_epfd, EPOLL_CTL_ADD, p->pidfd, &ev) < 0)) {
		log_warn("cannot wait for process %d to be reaped: %s", p->pid, strerror(errno));
		return false;
	}
	if (mv->n_late == mv->cap_late) {
		mv->cap_late = mv->cap_late ? mv->cap_late * 2 : 16;
		mv->late = xrealloc(mv->late, mv->cap_late * sizeof(struct late_exit));
	}
	((struct late_exit *)mv->late)[mv->n_late++] = (struct late_exit){p->pid, p->pidfd, p->seq};
	return true;
}

/* The exited record seq (pid), or NULL once folded. */
static struct proc *exited_proc_locked(struct mv *mv, pid_t pid, uint64_t seq)
{
	for (size_t i = mv->procs.n_exited; i-- > 0;)
		if (mv->procs.exited[i]->pid == pid && mv->procs.exited[i]->seq == seq)
			return mv->procs.exited[i];
	return NULL;
}

/* Ask for the exit status of l once more, for the last time. */
static void settle_late_locked(struct mv *mv, const struct late_exit *l)
{
	int status;
	if (pidfd_exit_status(l->pidfd, &status) == 0) {
		struct proc *p = exited_proc_locked(mv, l->pid, l->seq);
		if (p && p->wait_status < 0)
			p->wait_status = status;
	}
	close(l->pidfd);
}

/* The exits epoll set reported pidfd, which is not a running process's:
 * a process waited for has been reaped (true), or a stale event. */
static bool late_reaped_locked(struct mv *mv, int pidfd)
{
	struct late_exit *v = mv->late;
	for (size_t i = 0; i < mv->n_late; i++)
		if (v[i].pidfd == pidfd) {
			settle_late_locked(mv, &v[i]);
			v[i] = v[--mv->n_late];
			return true;
		}
	return false;
}

void lifecycle_late_exits(struct mv *mv)
{
	pthread_mutex_lock(&mv->lock);
	for (size_t i = 0; i < mv->n_late; i++)
		settle_late_locked(mv, (struct late_exit *)mv->late + i);
	mv->n_late = 0;
	pthread_mutex_unlock(&mv->lock);
}

void lifecycle_exit_locked(struct mv *mv, struct proc *p)
{
	if (p->exec_probe_fd >= 0)
		close(p->exec_probe_fd);
	/* -ENODATA: the kernel has PIDFD_GET_INFO but no exit status yet
	 * (not reaped, or a kernel before 6.15: the wait then ends with
	 * none). -ESRCH: the parent is reaping it right now (pidfd_info
	 * finds the task half released: a fork storm met it). Other
	 * errors: no PIDFD_GET_INFO, nothing to wait for. */
	int rc =
	    p->wait_status < 0 && p->pidfd >= 0 ? pidfd_exit_status(p->pidfd, &p->wait_status) : 0;
	if ((rc == -ENODATA || rc == -ESRCH) && p->state == PROC_RUNNING &&
	    pthread_equal(pthread_self(), mv->main_thread) && wait_for_reap_locked(mv, p))
		p->pidfd = -1;
	if (p->pidfd >= 0)
		close(p->pidfd);
	if (p->procfd >= 0)
		close(p->procfd);
	p->exec_probe_fd = p->pidfd = p->procfd = -1;
	enforce_proc_exit_locked(mv, p);
	events_proc(mv, MV_EVENT_EXIT, p, p->wait_status);
	log_debug("process %d exited", p->pid);
	proctab_exit(&mv->procs, p, mv_wall_ns());
}

void lifecycle_scan_tree(struct mv *mv)
{
	pid_t *v = NULL;
	size_t n = 0, cap = 0;
	tree_tops(mv, &v, &n, &cap);
	if (n == 0)
		return;
	for (size_t i = 0; i < n; i++)
		procfs_children(v[i], &v, &n, &cap);
	pthread_mutex_lock(&mv->lock);
	for (size_t i = 0; i < n; i++) {
		struct proc *p = proctab_get(&mv->procs, v[i]);
		if (!p) {
			/* A zombie not reaped yet is left out (discover_locked). */
			int pidfd = (int)syscall(SYS_pidfd_open, v[i], 0);
			if (pidfd >= 0)
				discover_locked(mv, v[i], pidfd);
		} else {
			lifecycle_settle_exec_locked(mv, p);
			if (p->pidfd < 0) {
				/* Found when fds ran out: watch its exit now. */
				p->pidfd = (int)syscall(SYS_pidfd_open, v[i], 0);
				watch_exit_locked(mv, p);
			}
		}
	}
	pthread_mutex_unlock(&mv->lock);
	free(v);
}

void lifecycle_exits_ready(struct mv *mv)
{
	struct epoll_event evs[64];
	int n;
	while ((n = epoll_wait(mv->exits_epfd, evs, ARRAY_SIZE(evs), 0)) > 0) {
		pthread_mutex_lock(&mv->lock);
		for (int i = 0; i < n; i++) {
			pid_t pid = (pid_t)(evs[i].data.u64 >> 32);
			int fd = (int)(uint32_t)evs[i].data.u64;
			struct proc *p = proctab_get(&mv->procs, pid);
			/* The pid may be reused already; only its own pidfd counts. */
			if (p && p->pidfd == fd)
				lifecycle_exit_locked(mv, p);
			else if (!late_reaped_locked(mv, fd))
				epoll_ctl(mv->exits_epfd, EPOLL_CTL_DEL, fd, NULL);
		}
		pthread_mutex_unlock(&mv->lock);
	}
}

static void apply_identity_locked(struct proc *p, struct proc_identity *id)
{
	if (p->procfd < 0)
		p->procfd = mv_steal_fd(id->procfd);
	if (id->ppid > 0)
		p->ppid = id->ppid;
	p->start_ticks = id->start_ticks;
	id->exe_read = id->exe != NULL;
	if (id->exe) {
		free(p->exe);
		p->exe = mv_steal_ptr(id->exe);
	}
	if (id->cmdline) {
		free(p->cmdline);
		p->cmdline = mv_steal_ptr(id->cmdline);
		p->cmdline_len = id->cmdline_len;
	}
	p->identity_stale = false;
	p->exe_verified = id->exe_read;
}

void lifecycle_refresh(struct mv *mv)
{
	lifecycle_scan_tree(mv);
	pthread_mutex_lock(&mv->lock);
	size_t n = 0, cap = proctab_running(&mv->procs);
	pid_t *pids = xcalloc(cap + 1, sizeof(*pids));
	struct proc *p;
	for (size_t i = 0; (p = proctab_next(&mv->procs, &i)) && n < cap;)
		if (p->identity_stale)
			pids[n++] = p->pid;
	pthread_mutex_unlock(&mv->lock);
	for (size_t i = 0; i < n; i++) {
		struct proc_identity id;
		/* Read without the lock: the notify thread goes on answering. */
		int rc = procfs_identity(pids[i], &id);
		pthread_mutex_lock(&mv->lock);
		p = proctab_get(&mv->procs, pids[i]);
		if (p && rc == 0)
			apply_identity_locked(p, &id);
		pthread_mutex_unlock(&mv->lock);
		procfs_identity_free(&id);
	}
	free(pids);
}
