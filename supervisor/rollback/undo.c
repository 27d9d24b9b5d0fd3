/* The rollback job (supervisor/rollback/mark.h): the process stopped,
 * checked, its layout, memory and registers put back as the mark has
 * them, resumed. */
#include "common/log.h"
#include "common/util.h"
#include "supervisor/kernel/pagemap.h"
#include "supervisor/kernel/procfs.h"
#include "supervisor/kernel/ptrace.h"
#include "supervisor/kernel/remote.h"
#include "supervisor/kernel/uffd.h"
#include "supervisor/kernel/vm.h"
#include "supervisor/kernel/pidfd.h"
#include "supervisor/rollback/mark.h"
#include "supervisor/supervise/mv.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#define PG 4096ull

struct undo {
	struct ckpt *c;
	struct rb_mark *m;
	struct remote r;
	bool have_remote;
	bool changed; /* the process is no longer what it was */
	uint64_t written, dropped, unmapped, mapped, protected_bytes, hot_bytes;
	bool brk_moved;
	uint64_t brk_was;
	json_t *signals; /* [{tid, signal}] caught by the stop and dropped */
	pid_t *extra;	 /* threads created since the mark */
	size_t n_extra;
	unsigned threads_ended, children_killed;
	bool close_fds;
	unsigned rewound, fds_closed, fds_reopened, rseq_undone;
	json_t *fds_lost; /* [{fd, kind, why}]: closed since, and closed still */
	/* Where the pause went: the stop, the checks and what was created
	 * since, the layout, the memory, the registers, the resume. */
	uint64_t t_stop, t_check, t_layout, t_memory, t_regs, t_resume;
	/* The layout's changes since the mark (plan_layout), where the heap
	 * ends now. */
	struct rb_change *ch;
	size_t n_ch;
	uint64_t heap_now;
	struct as_range *prot, *drop, *snap; /* snap: bytes to put back from the snapshot */
	size_t n_prot, cap_prot, n_drop, cap_drop, n_snap, cap_snap;
	/* Bytes to put back from the mark's own copy: written with one
	 * process_vm_writev (vm_writev_mem) after the walk. */
	struct iovec *wl, *wr;
	size_t n_w, cap_w;
};

static void add_write(struct undo *u, const void *from, uint64_t to, uint64_t len)
{
	if (u->n_w &&
	    (const char *)u->wl[u->n_w - 1].iov_base + u->wl[u->n_w - 1].iov_len == from &&
	    (uint64_t)(uintptr_t)u->wr[u->n_w - 1].iov_base + u->wr[u->n_w - 1].iov_len == to) {
		u->wl[u->n_w - 1].iov_len += len;
		u->wr[u->n_w - 1].iov_len += len;
		return;
	}
	if (u->n_w == u->cap_w) {
		u->cap_w = u->cap_w ? u->cap_w * 2 : 64;
		u->wl = xrealloc(u->wl, u->cap_w * sizeof(*u->wl));
		u->wr = xrealloc(u->wr, u->cap_w * sizeof(*u->wr));
	}
	u->wl[u->n_w] = (struct iovec){(void *)from, len};
	u->wr[u->n_w++] = (struct iovec){(void *)(uintptr_t)to, len};
}

static void add_range(struct as_range **v, size_t *n, size_t *cap, uint64_t s, uint64_t e)
{
	if (*n && (*v)[*n - 1].end == s) {
		(*v)[*n - 1].end = e;
		return;
	}
	if (*n == *cap)
		*v = xrealloc(*v, (*cap = *cap ? *cap * 2 : 64) * sizeof(**v));
	(*v)[(*n)++] = (struct as_range){s, e};
}

/* A call in the process (its registers put back after). ret: the call's
 * value, a negative errno for a failed call. */
static int inject(struct undo *u, long nr, long a0, long a1, long a2, long a3, long a4, long a5,
		  long *ret)
{
	if (!u->have_remote) {
		int rc = remote_open_stopped(&u->r, &u->c->p[u->m->ci].pt, &u->c->mv->injecting);
		if (rc < 0)
			return ckpt_fail(u->c, rc, MV_E_NOT_SUPPORTED,
					 "no thread of process %d to run a call in: %s", u->m->pid,
					 strerror(-rc));
		u->have_remote = true;
	}
	long args[6] = {a0, a1, a2, a3, a4, a5};
	int rc = remote_syscall_stopped(&u->r, nr, args, ret);
	if (rc < 0)
		return ckpt_fail(u->c, rc, MV_E_INTERNAL, "running a call in process %d: %s",
				 u->m->pid, strerror(-rc));
	return 0;
}

/* Synchronous tracking (mark.h, sync_wp): a write of memvisor's through
 * /proc/PID/mem to a write-protected page faults to the userfaultfd, and
 * the kernel fails such a fault rather than wait for it (no retry
 * without a lock to drop). Lift the protection first: the page then reads
 * as written, and the memory step puts it back and protects it again. */
static void unprotect_for_write(struct undo *u, uint64_t addr, size_t len)
{
	if (!u->m->sync_wp || !len)
		return;
	uint64_t s = addr & ~4095ull, e = (addr + len + 4095) & ~4095ull;
	int rc = uffd_writeprotect(u->m->uffd, s, e - s, false);
	if (rc < 0 && rc != -ENOENT)
		log_warn("process %d: lifting the write-protection of %#llx-%#llx: %s", u->m->pid,
			 (unsigned long long)s, (unsigned long long)e, strerror(-rc));
}

/* ---- the same program, the same threads --------------------------------- */

static void tid_list(char *buf, size_t len, const pid_t *v, size_t n)
{
	size_t at = 0;
	buf[0] = 0;
	for (size_t i = 0; i < n && at + 16 < len; i++)
		at += (size_t)snprintf(buf + at, len - at, "%s%d", i ? ", " : "", v[i]);
}

/* The mark's record of thread tid, NULL for one created since. */
static struct rb_thread *marked_thread(const struct rb_mark *m, pid_t tid)
{
	for (size_t k = 0; k < m->n_t; k++)
		if (m->t[k].tid == tid)
			return &m->t[k];
	return NULL;
}

static int check_same(struct undo *u)
{
	struct ckpt *c = u->c;
	struct rb_mark *m = u->m;
	if (!uffd_mm_alive(m->uffd, 0))
		return ckpt_fail(c, -ESRCH, MV_E_INVALID,
				 "process %d ran a new program (execve) since the mark: the mark "
				 "is gone (`ctl unmark`, then mark again)",
				 m->pid);
	if (m->snap.pid > 0 && pidfd_exited(m->snap.pidfd))
		return ckpt_fail(c, -ESRCH, MV_E_INVALID,
				 "the mark's snapshot (process %d, which holds its memory) was "
				 "killed: the mark is lost (`ctl unmark`, then mark again)",
				 m->snap.pid);
	struct ptrace_proc *pp = &c->p[m->ci].pt;
	pid_t *extra = xcalloc(pp->n + 1, sizeof(*extra)),
	      *gone = xcalloc(m->n_t + 1, sizeof(*gone));
	size_t n_extra = 0, n_gone = 0;
	int rc = 0;
	u->extra = extra;
	for (size_t i = 0; i < pp->n; i++) {
		struct ptrace_thread *t = &pp->t[i];
		if (t->state == PT_GONE)
			continue;
		if (t->state != PT_STOPPED) {
			rc = ckpt_fail(c, -EBUSY, MV_E_BUSY,
				       "thread %d of process %d cannot be stopped (a vfork parent "
				       "waiting for its child): not rolled back",
				       t->tid, m->pid);
			goto out;
		}
		if (!marked_thread(m, t->tid))
			extra[n_extra++] = t->tid;
	}
	for (size_t k = 0; k < m->n_t; k++) {
		bool here = false;
		for (size_t i = 0; i < pp->n && !here; i++)
			here = pp->t[i].tid == m->t[k].tid && pp->t[i].state == PT_STOPPED;
		if (!here)
			gone[n_gone++] = m->t[k].tid;
	}
	char list[256];
	if (n_gone) {
		tid_list(list, sizeof(list), gone, n_gone);
		rc = ckpt_fail(c, -ESRCH, MV_E_INVALID,
			       "threads of process %d ended since the mark (%s): a rollback cannot "
			       "revive them; not rolled back",
			       m->pid, list);
	}
out:
	u->n_extra = n_extra;
	free(gone);
	return rc;
}

/* Threads created since the mark end: an exit(2) run in each (its stack,
 * mapped since, goes with the layout). Then the calls run in a marked
 * thread. */
static int end_new_threads(struct undo *u)
{
	struct ptrace_proc *pp = &u->c->p[u->m->ci].pt;
	long ret = 0;
	int rc = u->n_extra ? inject(u, SYS_getpid, 0, 0, 0, 0, 0, 0, &ret) : 0; /* opens u->r */
	for (size_t i = 0; rc == 0 && i < u->n_extra; i++) {
		struct ptrace_thread *t = NULL;
		for (size_t k = 0; k < pp->n && !t; k++)
			if (pp->t[k].tid == u->extra[i])
				t = &pp->t[k];
		u->changed = true;
		rc = t ? remote_use_thread_stopped(&u->r, t) : -ESRCH;
		long args[6] = {0};
		if (rc == 0)
			rc = remote_syscall_stopped(&u->r, SYS_exit, args, &ret);
		if (rc == -ESRCH && t && t->state == PT_GONE)
			rc = 0; /* it ended, as asked */
		else if (rc == 0)
			rc = -EIO; /* exit(2) returned */
		if (rc < 0)
			return ckpt_fail(u->c, rc, MV_E_INTERNAL,
					 "ending thread %d, created since the mark: %s",
					 u->extra[i], strerror(-rc));
		u->threads_ended++;
	}
	for (size_t k = 0; rc == 0 && u->n_extra && k < pp->n; k++)
		if (pp->t[k].state == PT_STOPPED)
			return remote_use_thread_stopped(&u->r, &pp->t[k]) == 0 ? 0 : rc;
	return rc;
}

#ifndef RSEQ_FLAG_UNREGISTER
#define RSEQ_FLAG_UNREGISTER 1
#endif

/* rseq(2) registrations back as marked, a thread at a time (a call run in
 * it: a registration is the calling thread's). The kernel's registration
 * is not memory: a thread marked before glibc registered its area (a
 * program marked while it starts) would keep the registration, and once
 * the layout step unmapped the memory that holds it, the kernel would
 * fault on it at every return to user space (SIGSEGV). Before the layout
 * step changes anything, once it is known to be doable. */
static int undo_rseq(struct undo *u)
{
	struct ptrace_proc *pp = &u->c->p[u->m->ci].pt;
	for (size_t i = 0; i < pp->n; i++) {
		struct ptrace_thread *t = &pp->t[i];
		const struct rb_thread *rt = marked_thread(u->m, t->tid);
		if (t->state != PT_STOPPED || !rt || !rt->rseq_known)
			continue;
		uint64_t addr = 0;
		uint32_t len = 0, sig = 0;
		if (ptrace_rseq_sig_stopped(t->tid, &addr, &len, &sig) < 0 || addr == rt->rseq)
			continue;
		long ret = 0;
		int rc = inject(u, SYS_getpid, 0, 0, 0, 0, 0, 0, &ret); /* opens u->r */
		if (rc == 0)
			rc = remote_use_thread_stopped(&u->r, t);
		u->changed = true;
		if (rc == 0 && addr)
			rc = inject(u, SYS_rseq, (long)addr, len, RSEQ_FLAG_UNREGISTER, sig, 0, 0,
				    &ret);
		if (rc == 0 && addr && ret < 0)
			return ckpt_fail(u->c, (int)ret, MV_E_INTERNAL,
					 "unregistering the rseq area of thread %d, registered "
					 "since the mark: %s",
					 t->tid, strerror((int)-ret));
		if (rc == 0 && rt->rseq)
			rc = inject(u, SYS_rseq, (long)rt->rseq, rt->rseq_len, 0, rt->rseq_sig, 0,
				    0, &ret);
		if (rc == 0 && rt->rseq && ret < 0)
			return ckpt_fail(u->c, (int)ret, MV_E_INTERNAL,
					 "registering the rseq area of thread %d again: %s", t->tid,
					 strerror((int)-ret));
		if (rc < 0)
			return rc;
		u->rseq_undone++;
	}
	return 0;
}

/* Children forked since the mark are killed with what they forked, and
 * reaped by their parent (a wait4 run in it: the rolled-back parent
 * knows nothing of them, and would leave them zombies). */
static int kill_new_children(struct undo *u)
{
	pid_t *v = NULL;
	size_t n = 0, cap = 0;
	int rc = 0;
	procfs_children(u->m->pid, &v, &n, &cap);
	for (size_t i = 0; i < n && rc == 0; i++) {
		bool known = false;
		for (size_t k = 0; k < u->m->n_children && !known; k++)
			known = u->m->children[k] == v[i];
		if (known)
			continue;
		int fd = (int)syscall(SYS_pidfd_open, v[i], 0);
		if (fd < 0)
			continue; /* reaped meanwhile */
		u->changed = true;
		syscall(SYS_pidfd_send_signal, fd, SIGSTOP, NULL, 0); /* forks no more */
		rb_kill_below(v[i]);
		syscall(SYS_pidfd_send_signal, fd, SIGKILL, NULL, 0);
		close(fd);
		long ret = 0;
		rc = inject(u, SYS_wait4, v[i], 0, __WALL, 0, 0, 0, &ret);
		if (rc == 0 && ret < 0 && ret != -ECHILD)
			rc = ckpt_fail(u->c, (int)ret, MV_E_INTERNAL,
				       "reaping process %d, forked since the mark: %s", v[i],
				       strerror((int)-ret));
		u->children_killed++;
	}
	free(v);
	return rc;
}

/* ---- the layout ------------------------------------------------------------ */

static int prot_of(const struct rb_region *r)
{
	return (r->r ? PROT_READ : 0) | (r->w ? PROT_WRITE : 0) | (r->x ? PROT_EXEC : 0);
}

static int diff_now(struct undo *u, struct rb_change **ch, size_t *n, uint64_t *heap_end)
{
	struct rb_region *now = NULL;
	size_t n_now = 0;
	pid_t tid = ptrace_reader_tid(&u->c->p[u->m->ci].pt);
	int rc = rb_layout_read(tid, &now, &n_now);
	if (rc < 0)
		return ckpt_fail(u->c, rc, MV_E_NO_SUCH_PROCESS,
				 "reading the regions of process %d: %s", u->m->pid, strerror(-rc));
	rb_layout_diff(u->m, now, n_now, ch, n);
	if (heap_end)
		*heap_end = rb_heap_end(now, n_now);
	/* The changes point into the mark's regions, not now's. */
	free(now);
	return 0;
}

/* Before anything changes: can every piece the mark had be put back? Only
 * private anonymous memory is mapped again (its bytes are all in the
 * baseline); a file mapping unmapped or replaced since is refused. */
static int check_mappable(struct undo *u, const struct rb_change *ch, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const struct rb_region *was = ch[i].was;
		if (ch[i].fix != RB_MAP)
			continue;
		if (was->tracked && was->inode == 0 && !was->shared)
			continue;
		char what[200];
		rb_describe(was, ch[i].start, ch[i].end, what, sizeof(what));
		return ckpt_fail(u->c, -EOPNOTSUPP, MV_E_NOT_SUPPORTED,
				 "region %s of process %d was unmapped or replaced since the mark: "
				 "a rollback maps only anonymous memory again; not rolled back",
				 what, u->m->pid);
	}
	return 0;
}

static int fix_layout(struct undo *u, const struct rb_change *ch, size_t n, enum rb_fix which)
{
	for (size_t i = 0; i < n; i++) {
		const struct rb_change *x = &ch[i];
		if (x->fix != which)
			continue;
		long ret = 0, len = (long)(x->end - x->start);
		int rc;
		u->changed = true;
		if (which == RB_UNMAP) {
			rc = inject(u, SYS_munmap, (long)x->start, len, 0, 0, 0, 0, &ret);
			u->unmapped += (uint64_t)len;
		} else if (which == RB_MAP) {
			rc = inject(u, SYS_mmap, (long)x->start, len, prot_of(x->was),
				    MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0, &ret);
			if (rc == 0 && ret == (long)x->start)
				ret = uffd_register_mode(u->m->uffd, x->start, (uint64_t)len,
							 UFFDIO_REGISTER_MODE_WP);
			u->mapped += (uint64_t)len;
		} else {
			rc = inject(u, SYS_mprotect, (long)x->start, len, prot_of(x->was), 0, 0, 0,
				    &ret);
		}
		if (rc < 0)
			return rc;
		if (ret < 0 && ret > -4096)
			return ckpt_fail(u->c, (int)ret, MV_E_INTERNAL,
					 "%s of %#llx-%#llx in process %d failed: %s",
					 which == RB_UNMAP ? "munmap"
					 : which == RB_MAP ? "mmap"
							   : "mprotect",
					 (unsigned long long)x->start, (unsigned long long)x->end,
					 u->m->pid, strerror((int)-ret));
	}
	return 0;
}

/* brk back where the mark had it: brk(2) shrinks the heap or grows it
 * again itself. A region mapped since where the heap would grow is in
 * its way: those go first, then brk again. Only when the heap's end
 * moved: reading brk takes a call run in the process (1.5-4 ms on this
 * VM), and malloc moves brk by whole pages (docs/rollback.md). */
static int undo_brk(struct undo *u, const struct rb_change *ch, size_t n)
{
	long cur = 0, got = 0;
	int rc = inject(u, SYS_brk, 0, 0, 0, 0, 0, 0, &cur);
	if (rc < 0 || (uint64_t)cur == u->m->brk)
		return rc;
	u->changed = u->brk_moved = true;
	u->brk_was = (uint64_t)cur;
	rc = inject(u, SYS_brk, (long)u->m->brk, 0, 0, 0, 0, 0, &got);
	if (rc == 0 && (uint64_t)got != u->m->brk) {
		rc = fix_layout(u, ch, n, RB_UNMAP);
		if (rc == 0)
			rc = inject(u, SYS_brk, (long)u->m->brk, 0, 0, 0, 0, 0, &got);
	}
	if (rc == 0 && (uint64_t)got != u->m->brk)
		rc = ckpt_fail(u->c, -ENOMEM, MV_E_INTERNAL,
			       "brk of process %d could not be put back to %#llx (it is %#llx)",
			       u->m->pid, (unsigned long long)u->m->brk, (unsigned long long)got);
	return rc;
}

/* Before anything changes (in a tree, in any process): the layout's
 * changes since the mark, and whether each can be undone. Kept for
 * undo_layout, which nothing between changes (ending threads and
 * killing children leave the layout as it is). */
static int plan_layout(struct undo *u)
{
	int rc = diff_now(u, &u->ch, &u->n_ch, &u->heap_now);
	if (rc == 0)
		rc = check_mappable(u, u->ch, u->n_ch);
	return rc;
}

/* brk goes back, regions mapped since go, anonymous memory unmapped since
 * comes back (registered for tracking: its bytes are written from the
 * baseline with the rest), protections go back; then the layout must be
 * the mark's. Every piece is known to be doable (plan_layout). */
static int undo_layout(struct undo *u)
{
	struct rb_change *ch = mv_steal_ptr(u->ch);
	size_t n = u->n_ch;
	uint64_t heap_end = u->heap_now;
	/* The first change, while every area is still mapped. */
	int rc = undo_rseq(u);
	if (rc == 0 && heap_end != u->m->heap_end)
		rc = undo_brk(u, ch, n);
	if (rc < 0 || (!n && !u->brk_moved)) {
		free(ch);
		return rc;
	}
	/* brk may have mapped or unmapped the heap's end: look again. */
	free(ch);
	ch = NULL;
	rc = diff_now(u, &ch, &n, NULL);
	if (rc == 0)
		rc = check_mappable(u, ch, n);
	if (rc == 0)
		rc = fix_layout(u, ch, n, RB_UNMAP);
	if (rc == 0)
		rc = fix_layout(u, ch, n, RB_MAP);
	if (rc == 0)
		rc = fix_layout(u, ch, n, RB_PROTECT);
	/* Memory the heap grew into again is a new region: track it
	 * (registering a range already ours again changes nothing). */
	for (size_t i = 0; rc == 0 && i < u->m->n_r; i++) {
		const struct rb_region *r = &u->m->r[i];
		if (r->tracked)
			rc = uffd_register_mode(u->m->uffd, r->start, r->end - r->start,
						UFFDIO_REGISTER_MODE_WP);
		if (rc < 0)
			rc = ckpt_fail(u->c, rc, MV_E_INTERNAL, "tracking %#llx-%#llx again: %s",
				       (unsigned long long)r->start, (unsigned long long)r->end,
				       strerror(-rc));
	}
	free(ch);
	ch = NULL;
	if (rc == 0)
		rc = diff_now(u, &ch, &n, NULL);
	if (rc == 0 && n) {
		char what[200];
		rb_describe(ch[0].was, ch[0].start, ch[0].end, what, sizeof(what));
		rc = ckpt_fail(u->c, -EIO, MV_E_INTERNAL,
			       "the layout of process %d still differs from the mark at %s",
			       u->m->pid, what);
	}
	free(ch);
	return rc;
}

/* ---- the memory ------------------------------------------------------------ */

/* The first baseline run that ends after addr. */
static size_t run_after(const struct rb_mark *m, uint64_t addr)
{
	size_t lo = 0, hi = m->n_run;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (m->run[mid].end <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* m's scratch (RB_SCRATCH_BYTES, made at its first use), or NULL. */
static uint8_t *scratch(struct rb_mark *m)
{
	if (!m->scratch) {
		m->scratch = mv_map_huge(RB_SCRATCH_BYTES);
		if (m->scratch == MAP_FAILED)
			m->scratch = NULL;
	}
	return m->scratch;
}

/* The snapshot's bytes of the ranges in u->snap written back: read
 * RB_BATCH_PAGES at a time with one process_vm_readv (a rollback that
 * puts back 1024 scattered pages made 1024 reads), then each range
 * written through /proc/PID/mem. */
#define RB_BATCH_PAGES (RB_SCRATCH_BYTES / 4096)
static int put_back_snapshot(struct undo *u)
{
	struct rb_mark *m = u->m;
	const size_t cap = RB_SCRATCH_BYTES;
	if (u->n_snap && !scratch(m))
		return -ENOMEM;
	struct iovec loc[RB_BATCH_PAGES], rem[RB_BATCH_PAGES];
	size_t i = 0;
	uint64_t at = u->n_snap ? u->snap[0].start : 0;
	while (i < u->n_snap) {
		/* A batch: whole ranges, or the piece of a long one that fits. */
		size_t n = 0, used = 0;
		uint64_t first_at = at;
		while (i < u->n_snap && n < RB_BATCH_PAGES && used < cap) {
			uint64_t len = MV_MIN(u->snap[i].end - at, (uint64_t)(cap - used));
			loc[n] = (struct iovec){m->scratch + used, len};
			rem[n] = (struct iovec){(void *)(uintptr_t)at, len};
			n++;
			used += len;
			at += len;
			if (at == u->snap[i].end && ++i < u->n_snap)
				at = u->snap[i].start;
		}
		int rc = rb_snap_readv(&m->snap, loc, rem, n, used);
		if (rc == 0)
			rc = vm_writev_mem(m->pid, m->memfd, loc, rem, n);
		if (rc < 0)
			return ckpt_fail(
			    u->c, rc, MV_E_IO,
			    "putting back %#llx-%#llx of process %d from its snapshot: %s",
			    (unsigned long long)first_at,
			    (unsigned long long)u->snap[MV_MIN(i, u->n_snap - 1)].end, m->pid,
			    strerror(-rc));
	}
	return 0;
}

/* The first prefetched run that ends after addr. */
static size_t pre_after(const struct pagemap *pm, uint64_t addr)
{
	size_t lo = 0, hi = pm->n_pre;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (pm->pre[mid].end <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Region r, whose pages pm holds from one walk: every piece is in the
 * baseline or not, and present now (written since or not) or not.
 * Baseline pieces written since, or no longer present (dropped by the
 * program, or mapped again), get their bytes back and are protected
 * again; written pieces that were holes are dropped to holes again. */
static void undo_region(struct undo *u, struct pagemap *pm, const struct rb_region *r)
{
	const uint64_t pres = PAGE_IS_PRESENT | PAGE_IS_SWAPPED;
	struct rb_mark *m = u->m;
	size_t bi = run_after(m, r->start), ni = pre_after(pm, r->start);
	for (uint64_t x = r->start; x < r->end;) {
		while (bi < m->n_run && m->run[bi].end <= x)
			bi++;
		while (ni < pm->n_pre && pm->pre[ni].end <= x)
			ni++;
		const struct rb_run *b =
		    bi < m->n_run && m->run[bi].start < r->end ? &m->run[bi] : NULL;
		const struct pm_run *p = ni < pm->n_pre ? &pm->pre[ni] : NULL;
		bool in_b = b && b->start <= x, in_p = p && p->start <= x;
		uint64_t y = r->end;
		if (b)
			y = MV_MIN(y, in_b ? b->end : b->start);
		if (p)
			y = MV_MIN(y, in_p ? p->end : p->start);
		bool present = in_p && (p->cat & pres),
		     written = present && (p->cat & PAGE_IS_WRITTEN);
		if (in_b && (!present || written)) {
			if (b->off == RB_IN_SNAP)
				add_range(&u->snap, &u->n_snap, &u->cap_snap, x, y);
			else
				add_write(u, m->base + b->off + (x - b->start), x, y - x);
			u->changed = true;
			u->written += y - x;
			add_range(&u->prot, &u->n_prot, &u->cap_prot, x, y);
		} else if (!in_b && written) {
			add_range(&u->drop, &u->n_drop, &u->cap_drop, x, y);
		}
		x = y;
	}
}

/* A region put back whole (synchronous tracking: a private file mapping,
 * which nothing tracks), a page at a time. A page that was the process's
 * own at the mark (whole_anon) gets the mark's bytes back whatever it is
 * now; one that was the file's is left while it still is (a write would
 * have copied it), else dropped back to the file's; one that was a hole
 * is dropped. */
static void undo_whole(struct undo *u, struct pagemap *pm, const struct rb_region *r)
{
	const uint64_t pres = PAGE_IS_PRESENT | PAGE_IS_SWAPPED;
	struct rb_mark *m = u->m;
	size_t bi = run_after(m, r->start), ni = pre_after(pm, r->start), ai = 0;
	while (ai < m->n_whole_anon && m->whole_anon[ai].end <= r->start)
		ai++;
	for (uint64_t x = r->start; x < r->end; x += PG) {
		while (bi < m->n_run && m->run[bi].end <= x)
			bi++;
		while (ni < pm->n_pre && pm->pre[ni].end <= x)
			ni++;
		while (ai < m->n_whole_anon && m->whole_anon[ai].end <= x)
			ai++;
		const struct rb_run *b =
		    bi < m->n_run && m->run[bi].start <= x ? &m->run[bi] : NULL;
		uint64_t cat = ni < pm->n_pre && pm->pre[ni].start <= x ? pm->pre[ni].cat : 0;
		bool present = cat & pres, file = cat & PAGE_IS_FILE,
		     own = ai < m->n_whole_anon && m->whole_anon[ai].start <= x;
		if (b && (own || !present)) {
			if (b->off == RB_IN_SNAP)
				add_range(&u->snap, &u->n_snap, &u->cap_snap, x, x + PG);
			else
				add_write(u, m->base + b->off + (x - b->start), x, PG);
			u->changed = true;
			u->written += PG;
		} else if (present && (!b || !file)) {
			add_range(&u->drop, &u->n_drop, &u->cap_drop, x, x + PG);
		}
	}
}

/* The fields of each thread's rseq area that the kernel writes (which CPU
 * and node it runs on, its concurrency id) as they are now, before a
 * page's bytes from the mark go back over them; then written again. They
 * are not the program's to roll back: a kernel that writes only what
 * changed since it last wrote would leave the mark's CPU there, and one
 * built with CONFIG_DEBUG_RSEQ kills a thread whose fields differ from
 * what it wrote. */
struct rseq_now {
	uint8_t b[RB_RSEQ_LEN];
	bool read; /* false: unreadable, left to the kernel */
};

static void rseq_fields(struct undo *u, struct rseq_now *now, bool put)
{
	for (size_t i = 0; i < u->m->n_t; i++) {
		uint64_t a = u->m->t[i].rseq;
		if (!a)
			continue;
		if (!put) {
			now[i].read =
			    pread(u->m->memfd, now[i].b, RB_RSEQ_LEN, (off_t)a) == RB_RSEQ_LEN;
			continue;
		}
		if (!now[i].read)
			continue;
		uint8_t back[RB_RSEQ_LEN];
		if (pread(u->m->memfd, back, RB_RSEQ_LEN, (off_t)a) != RB_RSEQ_LEN ||
		    (!memcmp(back, now[i].b, 8) && !memcmp(back + 20, now[i].b + 20, 8)))
			continue;
		unprotect_for_write(u, a, RB_RSEQ_LEN);
		if (pwrite(u->m->memfd, now[i].b, 8, (off_t)a) != 8 ||
		    pwrite(u->m->memfd, now[i].b + 20, 8, (off_t)(a + 20)) != 8)
			log_warn("process %d: the rseq area of thread %d at %#llx could not be "
				 "written: the kernel writes it at the thread's next return",
				 u->m->pid, u->m->t[i].tid, (unsigned long long)a);
	}
}

/* One walk of the page tables for the tracked regions from m->r[*i] on,
 * up to one (returned in *i) that ends the group: a syscall a region was
 * most of a rollback's memory step for a small program (20 regions: 20
 * PAGEMAP_SCANs). Untracked regions between two tracked ones are walked
 * too, so a group stops before more than RB_SCAN_GAP bytes of them. The
 * layout is the mark's by now (undo_layout), so m->r is what is mapped,
 * in address order. */
#define RB_SCAN_GAP (4ull << 20)
static int scan_group(struct undo *u, struct pagemap *pm, size_t *i)
{
	const uint64_t pres = PAGE_IS_PRESENT | PAGE_IS_SWAPPED;
	const struct rb_mark *m = u->m;
	size_t k = *i;
	while (k < m->n_r && !m->r[k].tracked && !m->r[k].whole)
		k++;
	if (k == m->n_r) {
		*i = k;
		return 0;
	}
	uint64_t start = m->r[k].start, end = m->r[k].end, gap = 0;
	size_t next = k + 1;
	/* Without PAGEMAP_SCAN the pagemap file is read page by page, holes
	 * between regions too: a region at a time. */
	for (size_t j = k + 1; pm->scan && j < m->n_r; j++) {
		if (!m->r[j].tracked && !m->r[j].whole) {
			gap += m->r[j].end - m->r[j].start;
			if (gap > RB_SCAN_GAP)
				break;
			continue;
		}
		end = m->r[j].end;
		next = j + 1;
		gap = 0;
	}
	*i = next;
	uint64_t known = pres | PAGE_IS_WRITTEN | (m->sync_wp ? PAGE_IS_FILE : 0);
	int rc = pagemap_prefetch_any(pm, start, end, pres, known);
	if (rc < 0)
		return ckpt_fail(u->c, rc, rc == -ESRCH ? MV_E_NO_SUCH_PROCESS : MV_E_INTERNAL,
				 "reading the pagemap of process %d: %s", m->pid, strerror(-rc));
	return 0;
}

/* Hot pages. A page put back is write-protected again, and the program's
 * next write to it faults (asynchronous write-protect: the kernel only
 * marks it written). A program writes some pages in every run (its
 * stack, its stdio buffers, its allocator's heads): on this shadow-paged
 * guest each such fault cost 20-40 us, most of a short run
 * (bench/README.md). A page put back by two rollbacks in a row is left
 * writable instead: the page-table walk reports it written (no
 * protection) and every rollback puts it back, which costs a copy of
 * 4 KiB. That is always safe: a page never protected reads as written.
 * At most RB_HOT_MAX bytes are left so; every RB_HOT_EPOCH rollbacks all
 * are protected again, and the program's pages hot now are found again. */
#define RB_HOT_MAX   (256ull << 10)
#define RB_HOT_EPOCH 256

static int protect_range(struct undo *u, uint64_t s, uint64_t e)
{
	int rc = uffd_writeprotect(u->m->uffd, s, e - s, true);
	if (rc < 0)
		return ckpt_fail(
		    u->c, rc, MV_E_INTERNAL, "write-protecting %#llx-%#llx of process %d again: %s",
		    (unsigned long long)s, (unsigned long long)e, u->m->pid, strerror(-rc));
	u->protected_bytes += e - s;
	return 0;
}

static int protect_again(struct undo *u)
{
	struct rb_mark *m = u->m;
	bool epoch = ++m->hot_epoch >= RB_HOT_EPOCH;
	if (epoch)
		m->hot_epoch = 0;
	/* At an epoch no piece is kept writable: all are protected. */
	const size_t nl = epoch ? 0 : m->n_last;
	uint64_t hot = 0;
	size_t j = 0;
	int rc = 0;
	for (size_t i = 0; i < u->n_prot && rc == 0; i++) {
		/* The pieces of this range that the last rollback put back too
		 * stay writable (up to RB_HOT_MAX); the rest is protected. */
		uint64_t x = u->prot[i].start, end = u->prot[i].end;
		while (x < end && rc == 0) {
			while (j < nl && m->last[j].end <= x)
				j++;
			bool in = j < nl && m->last[j].start <= x;
			uint64_t y =
			    j == nl ? end : MV_MIN(end, in ? m->last[j].end : m->last[j].start);
			if (in && hot + (y - x) <= RB_HOT_MAX)
				hot += y - x;
			else
				rc = protect_range(u, x, y);
			x = y;
		}
	}
	/* This rollback's pieces are the next one's "last". */
	if (m->cap_last < u->n_prot) {
		m->last = xrealloc(m->last, u->n_prot * sizeof(*m->last));
		m->cap_last = u->n_prot;
	}
	if (u->n_prot)
		memcpy(m->last, u->prot, u->n_prot * sizeof(*m->last));
	m->n_last = rc == 0 ? u->n_prot : 0;
	u->hot_bytes = hot;
	return rc;
}

/* Shared anonymous memory of a tree's mark (struct rb_shared): each page
 * that differs from the mark's is queued to get its bytes back with the
 * rest (add_write). Read and compared a MiB at a time. */
static int undo_shared(struct undo *u)
{
	struct rb_mark *m = u->m;
	enum { CHUNK = 1 << 20 };
	_Static_assert(CHUNK <= RB_SCRATCH_BYTES, "a chunk fits the scratch");
	if (!m->n_sh)
		return 0;
	/* The scratch, warm: fresh pages each time cost a fault each here. */
	uint8_t *now = scratch(m);
	if (!now)
		return ckpt_fail(u->c, -ENOMEM, MV_E_INTERNAL,
				 "no memory to compare shared memory");
	for (size_t i = 0; i < m->n_sh; i++) {
		const struct rb_shared *x = &m->sh[i];
		for (uint64_t a = x->start; a < x->end; a += CHUNK) {
			size_t len = MV_MIN((uint64_t)CHUNK, x->end - a);
			const uint8_t *was = x->base + (a - x->start);
			/* process_vm_readv: a shared page is never copied on
			 * write, and it reads a MiB in one call (4x faster than
			 * /proc/PID/mem here, a page at a time). */
			struct iovec l = {now, len}, r = {(void *)(uintptr_t)a, len};
			int rc = 0;
			if (process_vm_readv(m->pid, &l, 1, &r, 1, 0) != (ssize_t)len)
				rc = vm_pread_mem(m->memfd, a, now, len);
			if (rc < 0)
				return ckpt_fail(
				    u->c, rc, MV_E_IO,
				    "reading shared memory %#llx-%#llx of process %d: %s",
				    (unsigned long long)x->start, (unsigned long long)x->end,
				    m->pid, strerror(-rc));
			for (size_t o = 0; o < len; o += PG) {
				if (!memcmp(now + o, was + o, PG))
					continue;
				add_write(u, was + o, a + o, PG);
				u->written += PG;
				u->changed = true;
			}
		}
	}
	return 0;
}

static int undo_memory(struct undo *u)
{
	struct pagemap pm;
	pid_t tid = ptrace_reader_tid(&u->c->p[u->m->ci].pt);
	/* Synchronous tracking is that of kernels before 6.7, which have no
	 * PAGEMAP_SCAN either: read as they would. */
	int rc = pagemap_open(tid, !u->m->sync_wp, &pm);
	if (rc < 0)
		return ckpt_fail(u->c, rc, MV_E_NO_SUCH_PROCESS,
				 "reading the pagemap of process %d: %s", u->m->pid, strerror(-rc));
	struct rseq_now *rseq = xcalloc(u->m->n_t ? u->m->n_t : 1, sizeof(*rseq));
	rseq_fields(u, rseq, false);
	for (size_t i = 0; i < u->m->n_r && rc == 0;) {
		size_t k = i;
		rc = scan_group(u, &pm, &k);
		for (; i < k && rc == 0; i++)
			if (u->m->r[i].tracked)
				undo_region(u, &pm, &u->m->r[i]);
			else if (u->m->r[i].whole)
				undo_whole(u, &pm, &u->m->r[i]);
		i = k;
	}
	pagemap_close(&pm);
	if (rc == 0)
		rc = undo_shared(u);
	if (rc == 0 && u->n_w &&
	    (rc = vm_writev_mem(u->m->pid, u->m->memfd, u->wl, u->wr, u->n_w)) < 0)
		rc = ckpt_fail(u->c, rc, MV_E_IO,
			       "writing the mark's bytes back into process %d: %s", u->m->pid,
			       strerror(-rc));
	if (rc == 0)
		rc = put_back_snapshot(u);
	if (rc == 0)
		rseq_fields(u, rseq, true);
	free(rseq);
	for (size_t i = 0; i < u->n_drop && rc == 0; i++) {
		long ret = 0;
		uint64_t len = u->drop[i].end - u->drop[i].start;
		u->changed = true;
		rc = inject(u, SYS_madvise, (long)u->drop[i].start, (long)len, MADV_DONTNEED, 0, 0,
			    0, &ret);
		if (rc == 0 && ret < 0)
			rc = ckpt_fail(
			    u->c, (int)ret, MV_E_INTERNAL, "dropping %#llx-%#llx of process %d: %s",
			    (unsigned long long)u->drop[i].start,
			    (unsigned long long)u->drop[i].end, u->m->pid, strerror((int)-ret));
		u->dropped += len;
	}
	if (rc == 0)
		rc = protect_again(u);
	return rc;
}

/* ---- the descriptors ------------------------------------------------------- */

static int close_new_fds(struct undo *u);

static void fd_lost(struct undo *u, const struct rb_fd *f, const char *why)
{
	json_array_append_new(u->fds_lost, json_pack("{s:i, s:s, s:s}", "fd", f->fd, "kind",
						     f->regular ? "file" : f->kind, "why", why));
}

/* Where a path can be put for a call in the process: below the marked
 * stack pointer of the thread the mark names after the process, and its
 * red zone, in the region that holds it. The memory step that follows
 * puts those bytes back. 0: no room. */
static uint64_t path_scratch(const struct undo *u)
{
	if (!u->m->n_t)
		return 0;
	const struct rb_thread *t = marked_thread(u->m, u->m->pid);
	if (!t)
		t = &u->m->t[0];
	if (t->prstatus_len < sizeof(struct user_regs_struct))
		return 0;
	uint64_t sp = ((const struct user_regs_struct *)t->prstatus)->rsp;
	uint64_t at = (sp - 128 - PATH_MAX) & ~63ull;
	for (size_t i = 0; i < u->m->n_r; i++) {
		const struct rb_region *r = &u->m->r[i];
		if (r->start <= at && sp <= r->end && r->w && !r->shared && r->tracked)
			return at;
	}
	return 0;
}

/* A regular file open for reading at the mark and closed since, opened
 * again: by its path (written into the process at scratch), checked to
 * be the same file, put at its number with its close-on-exec flag, at the
 * mark's offset. From then on the new open file is the one whose offset
 * a rollback puts back. A file that cannot be is reported, not guessed. */
static int reopen_fd(struct undo *u, struct rb_fd *f, uint64_t scratch)
{
	char link[64], path[PATH_MAX + 1];
	snprintf(link, sizeof(link), "/proc/self/fd/%d", f->dup);
	ssize_t n = readlink(link, path, PATH_MAX);
	if (n <= 0 || path[0] != '/') {
		fd_lost(u, f, "its path cannot be read");
		return 0;
	}
	path[n] = 0;
	if (n > 10 && !strcmp(path + n - 10, " (deleted)")) {
		fd_lost(u, f, "the file was deleted");
		return 0;
	}
	if (!scratch) {
		fd_lost(u, f, "no room below the stack pointer for its path");
		return 0;
	}
	unprotect_for_write(u, scratch, (size_t)n + 1);
	if (pwrite(u->m->memfd, path, (size_t)n + 1, (off_t)scratch) != n + 1) {
		fd_lost(u, f, "its path cannot be written into the process");
		return 0;
	}
	u->changed = true;
	int fl = fcntl(f->dup, F_GETFL);
	long flags = (fl & (O_ACCMODE | O_NONBLOCK | O_LARGEFILE)) | (f->cloexec ? O_CLOEXEC : 0);
	long nfd = 0, ret = 0;
	int rc = inject(u, SYS_openat, AT_FDCWD, (long)scratch, flags, 0, 0, 0, &nfd);
	if (rc < 0)
		return rc;
	if (nfd < 0) {
		char why[160];
		snprintf(why, sizeof(why), "opening %.100s again: %s", path, strerror((int)-nfd));
		fd_lost(u, f, why);
		return 0;
	}
	int dup = (int)syscall(SYS_pidfd_getfd, u->m->pidfd, (int)nfd, 0);
	struct stat st;
	if (dup < 0 || fstat(dup, &st) < 0 || st.st_dev != f->dev || st.st_ino != f->ino) {
		if (dup >= 0)
			close(dup);
		fd_lost(u, f,
			dup < 0 ? "the file opened again cannot be checked"
				: "its path names another file now");
		return inject(u, SYS_close, nfd, 0, 0, 0, 0, 0, &ret);
	}
	if (nfd != f->fd) {
		rc = inject(u, SYS_dup3, nfd, f->fd, f->cloexec ? O_CLOEXEC : 0, 0, 0, 0, &ret);
		if (rc == 0)
			rc = inject(u, SYS_close, nfd, 0, 0, 0, 0, 0, &(long){0});
		if (rc == 0 && ret < 0) {
			close(dup);
			fd_lost(u, f, "its number cannot be taken again");
			return 0;
		}
	}
	if (rc < 0) {
		close(dup);
		return rc;
	}
	lseek(dup, (off_t)f->off, SEEK_SET);
	close(f->dup);
	f->dup = dup;
	u->fds_reopened++;
	return 0;
}

/* Offsets of the regular files open at the mark back as marked (through
 * memvisor's duplicates: no call in the process); with close_fds, the
 * descriptors opened since closed (a close(2) run in the process each);
 * those open at the mark and closed since opened again where they can be
 * (reopen_fd), the others named in the result. Before the memory: the
 * paths written into the process go with the rest. */
static int undo_files(struct undo *u)
{
	u->rewound = rb_files_rewind(u->m);
	if (u->rewound)
		u->changed = true;
	int rc = 0;
	if (u->close_fds)
		rc = close_new_fds(u);
	struct rb_fd_gone *gone = NULL;
	size_t n_gone = 0;
	if (rc == 0 && (rc = rb_files_closed(u->m, ptrace_reader_tid(&u->c->p[u->m->ci].pt), &gone,
					     &n_gone)) < 0)
		rc = ckpt_fail(u->c, rc, MV_E_NO_SUCH_PROCESS,
			       "reading the descriptors of process %d: %s", u->m->pid,
			       strerror(-rc));
	uint64_t scratch = n_gone ? path_scratch(u) : 0;
	for (size_t i = 0; i < n_gone && rc == 0; i++) {
		struct rb_fd *f = &u->m->fds[gone[i].idx];
		/* A number open on another file since: the mark's goes back over
		 * it (the program at the mark knows nothing of the other); one
		 * that cannot be opened again leaves it as it is. */
		if (f->dup >= 0)
			rc = reopen_fd(u, f, scratch);
		else if (gone[i].replaced)
			fd_lost(u, f, "its number names another file now, which stays");
		else
			fd_lost(u, f,
				f->regular ? "a file open for writing is not opened again"
					   : "only regular files are opened again");
	}
	free(gone);
	return rc;
}

static int close_new_fds(struct undo *u)
{
	int *v = NULL;
	size_t n = 0;
	int rc = rb_files_new(u->m, ptrace_reader_tid(&u->c->p[u->m->ci].pt), &v, &n);
	if (rc < 0)
		return ckpt_fail(u->c, rc, MV_E_NO_SUCH_PROCESS,
				 "reading the descriptors of process %d: %s", u->m->pid,
				 strerror(-rc));
	for (size_t i = 0; i < n && rc == 0; i++) {
		long ret = 0;
		u->changed = true;
		rc = inject(u, SYS_close, v[i], 0, 0, 0, 0, 0, &ret);
		if (rc == 0 && ret == 0)
			u->fds_closed++;
	}
	free(v);
	return rc;
}

/* ---- the threads ----------------------------------------------------------- */

/* Every thread's registers and blocked signals as marked. A signal the
 * stop caught on its way to a thread arrived since the mark: it is
 * dropped (and named in the result), not delivered into the marked
 * instant. */
static int undo_threads(struct undo *u)
{
	struct ptrace_proc *pp = &u->c->p[u->m->ci].pt;
	for (size_t i = 0; i < pp->n; i++) {
		struct ptrace_thread *t = &pp->t[i];
		if (t->state != PT_STOPPED)
			continue;
		const struct rb_thread *rt = marked_thread(u->m, t->tid);
		if (!rt)
			continue; /* check_same refused this before */
		u->changed = true;
		uint64_t mask = rt->sigmask;
		int rc = ptrace_load_regs_stopped(t->tid, rt->prstatus, rt->prstatus_len, rt->fp,
						  rt->fp_len, rt->fp_note);
		if (rc == 0)
			rc = ptrace_sigmask_stopped(t->tid, &mask, true);
		if (rc < 0)
			return ckpt_fail(u->c, rc, MV_E_INTERNAL,
					 "putting back the registers of thread %d: %s", t->tid,
					 strerror(-rc));
		if (t->signal) {
			json_array_append_new(u->signals, json_pack("{s:i, s:i}", "tid", t->tid,
								    "signal", t->signal));
			t->signal = 0;
		}
	}
	return 0;
}

static json_t *result_json(const struct undo *u, uint64_t pause, uint64_t elapsed)
{
	json_t *o = json_pack(
	    "{s:s, s:i, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:O}", "name", u->m->name, "pid",
	    u->m->pid, "rollbacks", (json_int_t)u->m->rollbacks, "written_bytes",
	    (json_int_t)u->written, "dropped_bytes", (json_int_t)u->dropped, "protected_bytes",
	    (json_int_t)u->protected_bytes, "unmapped_bytes", (json_int_t)u->unmapped,
	    "mapped_bytes", (json_int_t)u->mapped, "pause_ns", (json_int_t)pause, "elapsed_ns",
	    (json_int_t)elapsed, "signals_dropped", u->signals);
	if (u->brk_moved)
		json_object_set_new(o, "brk_was", json_integer((json_int_t)u->brk_was));
	json_object_set_new(o, "writable_bytes", json_integer((json_int_t)u->hot_bytes));
	json_object_set_new(o, "times",
			    json_pack("{s:I, s:I, s:I, s:I, s:I, s:I}", "stop_ns",
				      (json_int_t)u->t_stop, "check_ns", (json_int_t)u->t_check,
				      "layout_ns", (json_int_t)u->t_layout, "memory_ns",
				      (json_int_t)u->t_memory, "registers_ns",
				      (json_int_t)u->t_regs, "resume_ns", (json_int_t)u->t_resume));
	json_object_set_new(o, "threads_ended", json_integer(u->threads_ended));
	json_object_set_new(o, "offsets_rewound", json_integer(u->rewound));
	json_object_set_new(o, "fds_closed", json_integer(u->fds_closed));
	json_object_set_new(o, "fds_reopened", json_integer(u->fds_reopened));
	json_object_set_new(o, "rseq_undone", json_integer(u->rseq_undone));
	json_object_set(o, "fds_lost", u->fds_lost);
	json_object_set_new(o, "children_killed", json_integer(u->children_killed));
	return o;
}

/* The time since *t, which becomes now. */
static uint64_t lap(uint64_t *t)
{
	uint64_t now = mv_now_ns(), d = now - *t;
	*t = now;
	return d;
}

/* The refusal when process pid of the mark is gone. */
static int exited_since_mark(struct ckpt *c, int rc, pid_t pid)
{
	mv_err_set(&c->err, rc, MV_E_NO_SUCH_PROCESS,
		   "process %d has exited since the mark: a rollback cannot revive it", pid);
	return rc;
}

/* Where each marked process is in c: by pid (a stop of the tree lists
 * them in the mark's order; one held since the mark, in the mark's
 * stop's). One that is not there, or no longer is, ended since the mark:
 * refused, since a rollback cannot revive it. */
static int bind_procs(struct ckpt *c, struct rb_mark *m)
{
	for (size_t i = 0; i <= m->n_members; i++) {
		struct rb_mark *x = rb_proc(m, i);
		size_t k = 0;
		while (k < c->n && c->p[k].pt.pid != x->pid)
			k++;
		if (k < c->n && c->p[k].pt.gone)
			k = c->n;
		if (k < c->n && c->p[k].pt.n)
			ptrace_proc_compact(&c->p[k].pt); /* threads of earlier runs go */
		if (k == c->n || !ptrace_reader_tid(&c->p[k].pt))
			return exited_since_mark(c, -ESRCH, x->pid);
		x->ci = k;
	}
	return 0;
}

/* Stop the marked processes, in the mark's order. */
static int stop_marked(struct job *j, struct rb_mark *m, struct ckpt *c)
{
	size_t n = 1 + m->n_members;
	pid_t *pids = xcalloc(n, sizeof(*pids));
	int *fds = xcalloc(n, sizeof(*fds));
	for (size_t i = 0; i < n; i++) {
		pids[i] = rb_proc(m, i)->pid;
		fds[i] = rb_proc(m, i)->pidfd;
	}
	int rc = rb_stop(j, pids, fds, n, false, c, rb_hold_req(m->hold));
	if (rc < 0 &&
	    (rc == -ESRCH || (c->err.code && !strcmp(c->err.code, MV_E_NO_SUCH_PROCESS)))) {
		pid_t gone = m->pid;
		for (size_t i = 0; i < c->n; i++)
			if (c->p[i].pt.gone && c->p[i].requested) {
				gone = c->p[i].pt.pid;
				break;
			}
		exited_since_mark(c, rc, gone);
	}
	free(pids);
	free(fds);
	return rc;
}

/* The counts of a tree's other processes, added to the first's (the
 * result's totals), each also listed in "processes". */
static json_t *add_up(struct undo *us, size_t n)
{
	json_t *v = json_array();
	for (size_t i = 0; i < n; i++) {
		struct undo *x = &us[i];
		json_array_append_new(
		    v,
		    json_pack("{s:i, s:I, s:I, s:i, s:i, s:O}", "pid", x->m->pid, "written_bytes",
			      (json_int_t)x->written, "dropped_bytes", (json_int_t)x->dropped,
			      "threads_ended", (int)x->threads_ended, "children_killed",
			      (int)x->children_killed, "fds_lost", x->fds_lost));
		if (!i)
			continue;
		us->written += x->written;
		us->dropped += x->dropped;
		us->protected_bytes += x->protected_bytes;
		us->hot_bytes += x->hot_bytes;
		us->unmapped += x->unmapped;
		us->mapped += x->mapped;
		us->threads_ended += x->threads_ended;
		us->children_killed += x->children_killed;
		us->rewound += x->rewound;
		us->fds_closed += x->fds_closed;
		us->fds_reopened += x->fds_reopened;
		us->rseq_undone += x->rseq_undone;
		json_array_extend(us->signals, x->signals);
	}
	return v;
}

static void undo_free(struct undo *u)
{
	free(u->ch);
	free(u->extra);
	free(u->prot);
	free(u->snap);
	free(u->wl);
	free(u->wr);
	free(u->drop);
	json_decref(u->signals);
	json_decref(u->fds_lost);
}

/* On the mark's tracer thread: stop the program (or take it as held),
 * put it back, and resume it, or run it to the next stop point
 * (rollback --until) and hold it there. A tree's processes are stopped
 * together, all checked before any changes, then each put back. */
static int rollback_work(struct job *j, void *arg)
{
	struct rb_rollback_job *rj = arg;
	struct rb_mark *m = rj->m;
	uint64_t t0 = mv_now_ns();
	bool held;
	struct ckpt *c = rb_hold_ckpt(m->hold, &held);
	size_t np = 1 + m->n_members;
	struct undo *us = xcalloc(np, sizeof(*us));
	for (size_t i = 0; i < np; i++)
		us[i] = (struct undo){.c = c,
				      .m = rb_proc(m, i),
				      .signals = json_array(),
				      .fds_lost = json_array(),
				      .close_fds = rj->q.close_fds};
	struct undo *u = &us[0];
	int rc = 0;
	if (held) {
		c->j = j;
		memset(&c->err, 0, sizeof(c->err));
		if (!c->p)
			rc = exited_since_mark(c, -ESRCH, m->pid);
	} else {
		job_progress(j, "stopping", 0, 0);
		rc = stop_marked(j, m, c);
	}
	if (rc == 0)
		rc = bind_procs(c, m);
	uint64_t t = t0;
	u->t_stop = lap(&t);
	for (size_t i = 0; i < np && rc == 0; i++)
		rc = check_same(&us[i]);
	for (size_t i = 0; i < np && rc == 0; i++)
		rc = plan_layout(&us[i]);
	for (size_t i = 0; i < np && rc == 0; i++)
		if ((rc = end_new_threads(&us[i])) == 0)
			rc = kill_new_children(&us[i]);
	if (rc == 0 && m->tree) {
		/* Orphans made since: their parents ended, or were killed just now. */
		unsigned strays = rb_kill_strays(m);
		u->children_killed += strays;
		u->changed |= strays > 0;
	}
	u->t_check = lap(&t);
	if (rc == 0)
		job_progress(j, "layout", 0, 0);
	for (size_t i = 0; i < np && rc == 0; i++)
		rc = undo_layout(&us[i]);
	u->t_layout = lap(&t);
	if (rc == 0)
		job_progress(j, "memory", 0, 0);
	for (size_t i = 0; i < np && rc == 0; i++)
		if ((rc = undo_files(&us[i])) == 0)
			rc = undo_memory(&us[i]);
	u->t_memory = lap(&t);
	for (size_t i = 0; i < np && rc == 0; i++)
		rc = undo_threads(&us[i]);
	u->t_regs = lap(&t);
	bool changed = false;
	for (size_t i = 0; i < np; i++)
		changed |= us[i].changed;
	if (rc < 0 && changed) {
		/* Neither the mark nor what it was: it must not run. */
		for (size_t i = 0; i < np; i++)
			syscall(SYS_pidfd_send_signal, us[i].m->pidfd, SIGKILL, NULL, 0);
		char msg[sizeof(c->err.msg) + 128];
		snprintf(msg, sizeof(msg),
			 "%.400s; process %d%s was killed: it was no longer what it was and not "
			 "yet the mark",
			 c->err.msg, m->pid, np > 1 ? " and the rest of its tree" : "");
		mv_err_set(&c->err, rc, c->err.code, "%s", msg);
	}
	uint64_t pause;
	json_t *event = NULL;
	if (rc == 0 && rj->q.until) {
		/* From the request, or the stop's first interrupt, to the run. */
		uint64_t from = held ? t0 : c->p[0].pt.first_interrupt_ns;
		pause = mv_now_ns() - from;
		u->t_resume = 0;
		m->rollbacks++;
		job_progress(j, "running", 0, 0); /* job_cancel ends the run */
		rc = rb_until_run(m, c, &rj->q, &event);
		if (rc < 0)
			m->rollbacks--;
	} else {
		bool stopped = c->p != NULL;
		if (rc == 0 && rj->q.hold)
			rb_hold_keep(m->hold); /* it runs at the next rollback or unmark */
		else
			rb_hold_let_go(m->hold);
		u->t_resume = lap(&t);
		pause = c->pause_end > c->pause_start ? c->pause_end - c->pause_start : 0;
		if (held && stopped)
			pause = mv_now_ns() - t0;
		if (rc == 0)
			m->rollbacks++;
	}
	if (rc < 0) {
		for (size_t i = 0; i < np; i++)
			undo_free(&us[i]);
		free(us);
		json_decref(event);
		job_fail_with(j, &c->err);
		return rc;
	}
	json_t *procs = np > 1 ? add_up(us, np) : NULL;
	j->result = result_json(u, pause, mv_now_ns() - rj->t_request);
	if (procs)
		json_object_set_new(j->result, "processes", procs);
	if (event)
		json_object_set_new(j->result, "until", event);
	for (size_t i = 0; i < np; i++)
		undo_free(&us[i]);
	free(us);
	bool now_held;
	rb_hold_ckpt(m->hold, &now_held);
	json_object_set_new(j->result, "held", json_boolean(now_held));
	return 0;
}

int rb_rollback_run(struct job *j)
{
	return rollback_work(j, j->ctx);
}
