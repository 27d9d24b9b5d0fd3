#include "supervisor/lifecycle.h"
#include "common/log.h"
#include "common/util.h"
#include "supervisor/enforce.h"
#include "supervisor/events.h"
#include "supervisor/procfs.h"

#include <fcntl.h>
#include <linux/kcmp.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>

static void queue_watch_locked(struct mv *mv, struct proc *p)
{
	if (mv->n_to_watch == mv->cap_to_watch) {
		mv->cap_to_watch = mv->cap_to_watch ? mv->cap_to_watch * 2 : 16;
		mv->to_watch = xrealloc(mv->to_watch, mv->cap_to_watch * sizeof(*mv->to_watch));
	}
	mv->to_watch[mv->n_to_watch++] = p;
}

static struct proc *discover_locked(struct mv *mv, pid_t tgid, pid_t ppid)
{
	struct proc *p = proctab_add(&mv->procs, tgid, ppid);
	p->seen_ns = mv_wall_ns();
	if (procfs_fill(p) < 0) {
		/* Gone before we could look: keep nothing. */
		if (p->procfd >= 0)
			close(p->procfd);
		if (p->pidfd >= 0)
			close(p->pidfd);
		p->procfd = p->pidfd = -1;
		proctab_exit(&mv->procs, p, mv_wall_ns());
		return NULL;
	}
	queue_watch_locked(mv, p);
	log_debug("process %d (parent %d) found: %s", tgid, ppid, p->exe ? p->exe : "?");
	events_proc(mv, MV_EVENT_START, p, 0);
	return p;
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
	struct proc_status st;
	if (procfs_status(tid, &st) < 0)
		return NULL;
	p = proctab_get(&mv->procs, st.tgid);
	if (!p)
		p = discover_locked(mv, st.tgid, st.ppid);
	if (p)
		proctab_add_thread(&mv->procs, p, tid);
	return p;
}

void lifecycle_exec_attempt_locked(struct mv *mv, struct proc *p, uint64_t ip)
{
	/* A previous attempt that is still unsettled failed, unless the new
	 * program execs at once without a notified call in between. Settle
	 * it by looking, not by guessing. */
	lifecycle_settle_exec_locked(mv, p);
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/mem", p->pid);
	/* The open file pins the current mm: once an exec replaces it, reads
	 * through this fd find no mm and return 0 (fs/proc/base.c mem_rw). */
	p->exec_probe_fd = open(path, O_RDONLY | O_CLOEXEC);
	p->exec_probe_addr = ip;
	p->exec_mm_peer = 0;
	/* A vfork child shares its parent's mm, which stays alive after the
	 * child's exec: compare the two mms instead (kcmp KCMP_VM). */
	if (p->ppid > 0 && syscall(SYS_kcmp, p->pid, p->ppid, KCMP_VM, 0, 0) == 0)
		p->exec_mm_peer = p->ppid;
	p->exec_pending = true;
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
	/* exec kills every other thread (fs/exec.c de_thread). */
	proctab_drop_threads(&mv->procs, p);
	procfs_refresh_identity(p);
	enforce_proc_exec_locked(mv, p);
	events_proc(mv, MV_EVENT_EXEC, p, 0);
	log_debug("process %d exec'd %s", p->pid, p->exe ? p->exe : "?");
}

void lifecycle_exit_locked(struct mv *mv, struct proc *p)
{
	if (p->exec_probe_fd >= 0)
		close(p->exec_probe_fd);
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
	if (mv->reaper_pid <= 0)
		return;
	pid_t *v = NULL;
	size_t n = 0, cap = 0;
	procfs_children(mv->reaper_pid, &v, &n, &cap);
	for (size_t i = 0; i < n; i++)
		procfs_children(v[i], &v, &n, &cap);
	pthread_mutex_lock(&mv->lock);
	for (size_t i = 0; i < n; i++) {
		struct proc *p = proctab_get(&mv->procs, v[i]);
		if (!p) {
			struct proc_status st;
			if (procfs_status(v[i], &st) == 0 && st.tgid == v[i])
				discover_locked(mv, v[i], st.ppid);
		} else {
			lifecycle_settle_exec_locked(mv, p);
		}
	}
	pthread_mutex_unlock(&mv->lock);
	free(v);
	lifecycle_watch_new(mv);
}
