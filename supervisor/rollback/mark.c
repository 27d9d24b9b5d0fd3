/* The mark job and the mark's life (supervisor/rollback/mark.h). */
#include "supervisor/rollback/mark.h"
#include "common/log.h"
#include "common/util.h"
#include "supervisor/kernel/pagemap.h"
#include "supervisor/kernel/procfs.h"
#include "supervisor/kernel/procmap.h"
#include "supervisor/kernel/ptrace.h"
#include "supervisor/kernel/remote.h"
#include "supervisor/kernel/uffd.h"
#include "supervisor/kernel/vm.h"
#include "supervisor/supervise/mv.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

struct collect {
	struct rb_region *v;
	size_t n, cap;
};

static int collect_one(void *arg, const struct proc_vma *v)
{
	struct collect *c = arg;
	if (c->n == c->cap)
		c->v = xrealloc(c->v, (c->cap = c->cap ? c->cap * 2 : 64) * sizeof(*c->v));
	struct rb_region *r = &c->v[c->n++];
	*r = (struct rb_region){.start = v->start,
				.end = v->end,
				.offset = v->offset,
				.inode = v->inode,
				.dev_major = v->dev_major,
				.dev_minor = v->dev_minor,
				.r = v->r,
				.w = v->w,
				.x = v->x,
				.shared = v->shared};
	size_t len = MV_MIN(v->name_len, sizeof(r->name) - 1);
	if (v->name)
		memcpy(r->name, v->name, len);
	r->name[len] = 0;
	/* [vdso], [vvar], [vvar_vclock], [vsyscall]: pages of the kernel's. */
	r->special = v->name && v->name_len > 2 && v->name[0] == '[' && v->name[1] == 'v';
	return 0;
}

int rb_layout_read(pid_t tid, struct rb_region **out, size_t *n)
{
	struct collect c = {0};
	/* The text of /proc/PID/maps, read whole, not PROCMAP_QUERY: a
	 * rollback reads the layout two or three times, and a query a region
	 * costs a system call each (about 2 us here): 52 against 27 us for
	 * 25 regions (bench/README.md). Both give the same regions, and the
	 * mark and its rollbacks read the same way. */
	int rc = procmap_vmas(tid, false, 0, UINT64_MAX, collect_one, &c);
	if (rc < 0) {
		free(c.v);
		return rc;
	}
	*out = c.v;
	*n = c.n;
	return 0;
}

void rb_mark_free(struct rb_mark *m)
{
	if (!m)
		return;
	/* The program runs again before its tracking ends. */
	if (m->hold)
		rb_hold_stop(m->hold);
	m->hold = NULL;
	for (size_t i = 0; i < m->n_members; i++)
		rb_mark_free(m->members[i]);
	free(m->members);
	for (size_t i = 0; i < m->n_t; i++) {
		free(m->t[i].prstatus);
		free(m->t[i].fp);
	}
	free(m->t);
	free(m->r);
	rb_files_free(m);
	free(m->children);
	free(m->run);
	free(m->whole_anon);
	free(m->last);
	for (size_t i = 0; i < m->n_sh; i++)
		free(m->sh[i].base);
	free(m->sh);
	if (m->base)
		munmap(m->base, m->base_len);
	rb_snap_drop(&m->snap);
	if (m->scratch)
		munmap(m->scratch, mv_huge_len(RB_SCRATCH_BYTES));
	rb_wp_stop(m);
	/* Closing the userfaultfd unregisters its regions and lifts every
	 * protection it set (fs/userfaultfd.c userfaultfd_release). */
	if (m->uffd >= 0)
		close(m->uffd);
	if (m->memfd >= 0)
		close(m->memfd);
	if (m->pidfd >= 0)
		close(m->pidfd);
	json_decref(m->untracked);
	free(m);
}

void rb_mark_req_free(void *ctx)
{
	struct rollback_mark_req *q = ctx;
	if (q && q->pidfd >= 0)
		close(q->pidfd);
	free(q);
}

/* Every thread's registers, FPU and extended state, and blocked signals.
 * A vfork parent waiting for its child cannot be stopped: refused. */
static int save_threads(struct ckpt *c, struct rb_mark *m)
{
	struct ptrace_proc *pp = &c->p[m->ci].pt;
	m->t = xcalloc(pp->n ? pp->n : 1, sizeof(*m->t));
	for (size_t i = 0; i < pp->n; i++) {
		struct ptrace_thread *t = &pp->t[i];
		if (t->state == PT_GONE)
			continue;
		if (t->state != PT_STOPPED)
			return ckpt_fail(c, -EBUSY, MV_E_BUSY,
					 "thread %d of process %d cannot be stopped (a vfork "
					 "parent waiting for its child): no mark",
					 t->tid, m->pid);
		int rc = ptrace_save_regs_stopped(t);
		struct rb_thread *rt = &m->t[m->n_t];
		if (rc == 0)
			rc = ptrace_sigmask_stopped(t->tid, &rt->sigmask, false);
		if (rc < 0)
			return ckpt_fail(c, rc, MV_E_INTERNAL,
					 "reading the registers of thread %d: %s", t->tid,
					 strerror(-rc));
		rt->tid = t->tid;
		rt->prstatus = mv_steal_ptr(t->prstatus);
		rt->prstatus_len = t->prstatus_len;
		rt->fp = mv_steal_ptr(t->fpstate);
		rt->fp_len = t->fpstate_len;
		rt->fp_note = t->fpstate_note;
		rt->rseq_known =
		    ptrace_rseq_sig_stopped(t->tid, &rt->rseq, &rt->rseq_len, &rt->rseq_sig) == 0;
		if (!rt->rseq_known || rt->rseq_len < RB_RSEQ_LEN)
			rt->rseq = 0; /* before 5.13, or nothing registered */
		m->n_t++;
	}
	return 0;
}

/* brk and a userfaultfd made in the process, fetched into ours, with
 * asynchronous write-protect: a write to a protected page lifts the
 * protection in the kernel, without a fault message, and PAGEMAP_SCAN
 * sees the page as written. */
static int make_tracker(struct ckpt *c, struct rb_mark *m)
{
	struct remote r;
	struct mv_err err = {0};
	int rc = remote_open_stopped(&r, &c->p[m->ci].pt, &c->mv->injecting);
	if (rc < 0)
		return ckpt_fail(c, rc, MV_E_NOT_SUPPORTED,
				 "no thread of process %d to run a call in: %s", m->pid,
				 strerror(-rc));
	long args[6] = {0}, ret = 0;
	rc = remote_syscall_stopped(&r, SYS_brk, args, &ret);
	if (rc < 0)
		return ckpt_fail(c, rc, MV_E_INTERNAL, "reading the brk of process %d: %s", m->pid,
				 strerror(-rc));
	m->brk = (uint64_t)ret;
	/* Asynchronous write-protect is resolved in the kernel whoever
	 * writes, the program or the kernel for it (mm/memory.c do_wp_page):
	 * a userfaultfd of user-mode faults only tracks as well, and any
	 * process may make one (no CAP_SYS_PTRACE, no sysctl). */
	char why[256];
	m->user_mode_only = !remote_userfaultfd_allowed(m->pid, why, sizeof(why));
	rc = remote_userfaultfd_flags_stopped(
	    &r, m->pidfd, m->user_mode_only ? UFFD_USER_MODE_ONLY : 0, &m->uffd, &err);
	if (rc < 0)
		return ckpt_fail(c, rc, err.code ? err.code : MV_E_NOT_SUPPORTED, "%s", err.msg);
	uint64_t missing = 0;
	const char *force = getenv("MEMVISOR_ROLLBACK_WP");
	rc = force && !strcmp(force, "sync") ? -EOPNOTSUPP
					     : uffd_api(m->uffd, UFFD_FEATURE_WP_ASYNC, &missing);
	if (rc == 0)
		return 0;
	/* Before 6.7: synchronous write-protect (wpsync.c), which must also
	 * serve the kernel's writes into protected pages. */
	if (m->user_mode_only)
		return ckpt_fail(c, -EOPNOTSUPP, MV_E_NOT_SUPPORTED,
				 "this kernel's userfaultfd has no asynchronous write-protect "
				 "(UFFD_FEATURE_WP_ASYNC, Linux 6.7), and the synchronous kind "
				 "needs a userfaultfd that serves the kernel's writes too (%s): a "
				 "mark cannot track writes",
				 why);
	rc = uffd_api(m->uffd, UFFD_FEATURE_PAGEFAULT_FLAG_WP, &missing);
	if (rc < 0)
		return ckpt_fail(c, rc, MV_E_NOT_SUPPORTED,
				 "this kernel's userfaultfd has no write-protect (Linux 5.7): a "
				 "mark cannot track writes");
	m->sync_wp = true;
	return 0;
}

static void untracked(struct rb_mark *m, const struct rb_region *r, const char *why)
{
	json_array_append_new(m->untracked,
			      json_pack("{s:I, s:I, s:s, s:s}", "start", (json_int_t)r->start,
					"end", (json_int_t)r->end, "name", r->name, "why", why));
}

/* A shared region of m put back whole (struct rb_shared), or why not. */
static const char *shared_whole(struct rb_mark *m, const struct rb_region *r)
{
	if (strcmp(r->name, "/dev/zero (deleted)") != 0)
		return "shared mapping"; /* a file's, a memfd's, System V's: not only the tree's */
	if (!m->tree)
		return "shared mapping, of processes a mark of one process does not hold";
	if (!r->w)
		return "shared mapping, read-only at the mark";
	if (m->sh_bytes + (r->end - r->start) > RB_SHARED_MAX)
		return "shared memory beyond the 64 MiB a mark keeps whole";
	return NULL;
}

/* Register every private region for write tracking. Shared mappings are
 * not tracked (their pages are other processes' and files' too), but a
 * tree's shared anonymous memory is kept whole (struct rb_shared). */
static int track_regions(struct ckpt *c, struct rb_mark *m)
{
	for (size_t i = 0; i < m->n_r; i++) {
		struct rb_region *r = &m->r[i];
		if (r->special)
			continue;
		if (r->shared) {
			const char *why = shared_whole(m, r);
			if (why) {
				untracked(m, r, why);
				continue;
			}
			m->sh = xrealloc(m->sh, (m->n_sh + 1) * sizeof(*m->sh));
			m->sh[m->n_sh++] = (struct rb_shared){r->start, r->end, NULL};
			m->sh_bytes += r->end - r->start;
			continue;
		}
		int rc = uffd_register_mode(m->uffd, r->start, r->end - r->start,
					    UFFDIO_REGISTER_MODE_WP);
		if (rc == 0) {
			r->tracked = true;
			continue;
		}
		char what[160];
		rb_describe(r, r->start, r->end, what, sizeof(what));
		if (rc == -EBUSY)
			return ckpt_fail(c, rc, MV_E_NOT_SUPPORTED,
					 "region %s of process %d is registered with the program's "
					 "own userfaultfd: its writes cannot be tracked, no mark",
					 what, m->pid);
		if (rc == -ESRCH || rc == -ENOMEM)
			return ckpt_fail(c, -ESRCH, MV_E_NO_SUCH_PROCESS,
					 "process %d exited during the mark", m->pid);
		/* Synchronous mode registers anonymous memory only: a private
		 * file mapping (a program's .data) is put back whole. */
		if (m->sync_wp && rc == -EINVAL && r->inode) {
			r->whole = true;
			continue;
		}
		/* A device mapping (VM_IO, VM_PFNMAP) the kernel will not track:
		 * its contents are not rolled back, and the result says so. */
		char why[96];
		snprintf(why, sizeof(why), "userfaultfd registration refused: %s", strerror(-rc));
		untracked(m, r, why);
	}
	return 0;
}

/* The pages present in tracked regions, copied into the baseline, then
 * write-protected. Holes are not protected (asynchronous write-protect
 * would fill their page tables with markers: a reservation of terabytes
 * would take gigabytes): a first write to a hole makes a present page that
 * was never protected, which PAGEMAP_SCAN reports as written all the same. */
static int copy_baseline(struct ckpt *c, struct rb_mark *m, pid_t tid, bool use_snap)
{
	struct pagemap pm;
	int rc = pagemap_open(tid, true, &pm);
	if (rc < 0)
		return ckpt_fail(c, rc, MV_E_NO_SUCH_PROCESS,
				 "reading the pagemap of process %d: %s", m->pid, strerror(-rc));
	struct as_range *runs = NULL;
	size_t n = 0, cap = 0;
	for (size_t i = 0; i < m->n_r && rc == 0; i++) {
		const struct rb_region *r = &m->r[i];
		if (!r->tracked && !r->whole)
			continue;
		size_t before = n;
		rc = pagemap_runs(&pm, r->start, r->end, PAGE_IS_PRESENT | PAGE_IS_SWAPPED, 0,
				  &runs, &n, &cap);
		/* The first run of this region merges into the last of the one
		 * before when they touch: split it there, each region keeps its
		 * own (a run is protected, and put back, region by region). */
		if (rc == 0 && before && runs[before - 1].end > r->start) {
			uint64_t e = runs[before - 1].end;
			runs[before - 1].end = r->start;
			if (n == cap)
				runs = xrealloc(runs, (cap = cap * 2 + 1) * sizeof(*runs));
			memmove(&runs[before + 1], &runs[before], (n - before) * sizeof(*runs));
			runs[before] = (struct as_range){r->start, e};
			n++;
		}
	}
	/* Whole regions: which of their pages were the process's own (a
	 * rollback puts those back; a page of the file it leaves). */
	size_t cap_wa = 0;
	for (size_t i = 0; i < m->n_r && rc == 0; i++)
		if (m->r[i].whole)
			rc = pagemap_runs(&pm, m->r[i].start, m->r[i].end,
					  PAGE_IS_PRESENT | PAGE_IS_SWAPPED, PAGE_IS_FILE,
					  &m->whole_anon, &m->n_whole_anon, &cap_wa);
	pagemap_close(&pm);
	if (rc < 0) {
		free(runs);
		return ckpt_fail(c, rc, MV_E_NO_SUCH_PROCESS,
				 "reading the pagemap of process %d: %s", m->pid, strerror(-rc));
	}
	/* The snapshot holds what it maps of these pages; the rest (a
	 * region the clone does not get: MADV_DONTFORK, MADV_WIPEONFORK; a
	 * file mapping whose pages the clone reads from the file again) is
	 * copied. */
	struct as_range *in_snap = NULL;
	size_t n_snap = 0, cap_snap = 0;
	if (!use_snap)
		snprintf(m->snap_why, sizeof(m->snap_why),
			 "process %d is not the command, whose baseline alone is a snapshot",
			 m->pid);
	else if (rb_snap_make(c, &m->snap, m->snap_why, sizeof(m->snap_why)) == 0) {
		struct pagemap spm;
		rc = pagemap_open(m->snap.pid, true, &spm);
		if (rc == 0) {
			for (size_t i = 0; i < n && rc == 0; i++)
				rc = pagemap_runs(&spm, runs[i].start, runs[i].end,
						  PAGE_IS_PRESENT | PAGE_IS_SWAPPED, 0, &in_snap,
						  &n_snap, &cap_snap);
			pagemap_close(&spm);
		}
		if (rc < 0) {
			snprintf(m->snap_why, sizeof(m->snap_why),
				 "reading the pagemap of the clone: %s", strerror(-rc));
			rb_snap_drop(&m->snap);
			n_snap = 0;
			rc = 0;
		}
	}
	uint64_t total = 0;
	size_t cap_run = n + 2 * n_snap + 1, si = 0;
	m->run = xcalloc(cap_run, sizeof(*m->run));
	for (size_t i = 0; i < n; i++) {
		for (uint64_t x = runs[i].start; x < runs[i].end;) {
			while (si < n_snap && in_snap[si].end <= x)
				si++;
			bool snap = si < n_snap && in_snap[si].start <= x;
			uint64_t y = runs[i].end;
			if (si < n_snap)
				y = MV_MIN(y, snap ? in_snap[si].end : in_snap[si].start);
			m->run[m->n_run++] = (struct rb_run){x, y, snap ? RB_IN_SNAP : total};
			if (snap)
				m->snap_bytes += y - x;
			else
				total += y - x;
			x = y;
		}
	}
	free(runs);
	free(in_snap);
	/* In huge pages: the copy into fresh 4 KiB pages ran at 200-300
	 * MB/s on this VM (a fault and a shadow page-table update a page),
	 * and was most of the mark (bench/mark.sh). */
	m->base_bytes = total;
	m->base_len = total ? mv_huge_len(total) : 0;
	m->base = total ? mv_map_huge(m->base_len) : NULL;
	if (m->base == MAP_FAILED) {
		m->base = NULL;
		return ckpt_fail(c, -ENOMEM, MV_E_INTERNAL,
				 "no memory for a baseline of %llu bytes",
				 (unsigned long long)total);
	}
	for (size_t i = 0; i < m->n_run; i++) {
		struct rb_run *u = &m->run[i];
		if (u->off == RB_IN_SNAP)
			continue;
		rc = vm_pread_mem(m->memfd, u->start, m->base + u->off, u->end - u->start);
		if (rc < 0)
			return ckpt_fail(c, rc, MV_E_IO, "reading %#llx-%#llx of process %d: %s",
					 (unsigned long long)u->start, (unsigned long long)u->end,
					 m->pid, strerror(-rc));
		job_progress(c->j, "copying", u->off + (u->end - u->start), total);
	}
	for (size_t i = 0; i < m->n_run; i++) {
		struct rb_run *u = &m->run[i];
		const struct rb_region *r = rb_region_at(m->r, m->n_r, u->start);
		if (r && r->whole)
			continue; /* not registered: put back whole */
		rc = uffd_writeprotect(m->uffd, u->start, u->end - u->start, true);
		if (rc < 0)
			return ckpt_fail(c, rc, MV_E_INTERNAL, "write-protecting %#llx-%#llx: %s",
					 (unsigned long long)u->start, (unsigned long long)u->end,
					 strerror(-rc));
	}
	return 0;
}

/* The bytes of m's tracked regions, and how many (n may be NULL). */
static uint64_t tracked_bytes(const struct rb_mark *m, size_t *n)
{
	uint64_t bytes = 0;
	size_t k = 0;
	for (size_t i = 0; i < m->n_r; i++)
		if (m->r[i].tracked) {
			bytes += m->r[i].end - m->r[i].start;
			k++;
		}
	if (n)
		*n = k;
	return bytes;
}

/* Each thread's rseq area: [{tid, addr}]. */
static json_t *rseq_json(const struct rb_mark *m)
{
	json_t *rseq = json_array();
	for (size_t i = 0; i < m->n_t; i++)
		if (m->t[i].rseq)
			json_array_append_new(rseq, json_pack("{s:i, s:I}", "tid", m->t[i].tid,
							      "addr", (json_int_t)m->t[i].rseq));
	return rseq;
}

/* A tree's mark: each process, the command's first (its untracked
 * regions and rseq areas are the result's own fields). */
static json_t *members_json(struct rb_mark *m)
{
	json_t *v = json_array();
	for (size_t i = 0; i <= m->n_members; i++) {
		const struct rb_mark *x = rb_proc(m, i);
		json_t *o = json_pack(
		    "{s:i, s:i, s:I, s:I, s:I, s:I}", "pid", x->pid, "threads", (int)x->n_t,
		    "tracked_bytes", (json_int_t)tracked_bytes(x, NULL), "baseline_bytes",
		    (json_int_t)(x->base_bytes + x->snap_bytes), "copied_bytes",
		    (json_int_t)x->base_bytes, "shared_bytes", (json_int_t)x->sh_bytes);
		if (i) {
			json_object_set(o, "untracked", x->untracked);
			json_object_set_new(o, "rseq", rseq_json(x));
		}
		json_array_append_new(v, o);
	}
	return v;
}

static json_t *mark_json(const struct rb_mark *m, uint64_t pause_ns, uint64_t elapsed_ns)
{
	size_t n_tracked;
	uint64_t tracked = tracked_bytes(m, &n_tracked);
	json_t *whole = json_array();
	for (size_t i = 0; i < m->n_r; i++)
		if (m->r[i].whole)
			json_array_append_new(
			    whole, json_pack("{s:I, s:I, s:s}", "start", (json_int_t)m->r[i].start,
					     "end", (json_int_t)m->r[i].end, "name", m->r[i].name));
	json_t *rseq = rseq_json(m);
	json_t *snap = m->snap.pid > 0 ? json_pack("{s:i, s:I}", "pid", m->snap.pid, "bytes",
						   (json_int_t)m->snap_bytes)
				       : json_pack("{s:s}", "why", m->snap_why);
	json_t *o = json_pack(
	    "{s:i, s:i, s:s, s:i, s:i, s:i, s:i, s:I, s:I, s:I, s:o, s:I, s:O, s:s, "
	    "s:I, s:I, s:o, s:o}",
	    "descriptors", (int)m->n_fds, "offsets_kept", (int)m->n_rewindable, "name", m->name,
	    "pid", m->pid, "threads", (int)m->n_t, "regions", (int)m->n_r, "tracked_regions",
	    (int)n_tracked, "tracked_bytes", (json_int_t)tracked, "baseline_bytes",
	    (json_int_t)(m->base_bytes + m->snap_bytes), "copied_bytes", (json_int_t)m->base_bytes,
	    "snapshot", snap, "brk", (json_int_t)m->brk, "untracked", m->untracked, "tracking",
	    m->sync_wp		? "uffd-wp, synchronous: a fault a first write"
	    : m->user_mode_only ? "uffd-wp-async, user mode only"
				: "uffd-wp-async",
	    "pause_ns", (json_int_t)pause_ns, "elapsed_ns", (json_int_t)elapsed_ns, "rseq", rseq,
	    "whole", whole);
	json_object_set_new(o, "shared_bytes", json_integer((json_int_t)m->sh_bytes));
	return o;
}

/* A mark of process m->pid (c->p[m->ci], stopped): its threads, a
 * tracker, its layout, children and descriptors, and its baseline, in a
 * snapshot if snap allows one. */
static int mark_one(struct ckpt *c, struct rb_mark *m, bool snap)
{
	pid_t tid = ptrace_reader_tid(&c->p[m->ci].pt);
	if (!tid)
		return ckpt_fail(c, -ESRCH, MV_E_NO_SUCH_PROCESS, "process %d has exited", m->pid);
	int rc = save_threads(c, m);
	if (rc == 0)
		rc = make_tracker(c, m);
	if (rc == 0) {
		m->memfd = procfs_open(tid, "mem", O_RDWR | O_CLOEXEC);
		if (m->memfd < 0)
			rc = ckpt_fail(c, m->memfd, MV_E_PERMISSION,
				       "opening /proc/%d/mem for writing: %s", tid,
				       strerror(-m->memfd));
	}
	if (rc == 0) {
		job_progress(c->j, "layout", 0, 0);
		rc = rb_layout_read(tid, &m->r, &m->n_r);
		if (rc < 0)
			ckpt_fail(c, rc, MV_E_NO_SUCH_PROCESS,
				  "reading the regions of process %d: %s", m->pid, strerror(-rc));
	}
	if (rc == 0) {
		size_t cap = 0;
		procfs_children(m->pid, &m->children, &m->n_children, &cap);
	}
	if (rc == 0)
		m->heap_end = rb_heap_end(m->r, m->n_r);
	if (rc == 0 && (rc = rb_files_mark(m, tid)) < 0)
		rc = ckpt_fail(c, rc, MV_E_NO_SUCH_PROCESS,
			       "reading the descriptors of process %d: %s", m->pid, strerror(-rc));
	if (rc == 0)
		rc = track_regions(c, m);
	if (rc == 0)
		rc = copy_baseline(c, m, tid, snap);
	for (size_t i = 0; rc == 0 && i < m->n_sh;) {
		struct rb_shared *x = &m->sh[i];
		x->base = xmalloc(x->end - x->start);
		int r = vm_pread_mem(m->memfd, x->start, x->base, x->end - x->start);
		if (r == 0) {
			i++;
			continue;
		}
		/* A page the kernel will not read for another process (one
		 * the program's own userfaultfd owes it): left as it is,
		 * as before, and said so. */
		const struct rb_region *reg = rb_region_at(m->r, m->n_r, x->start);
		char why[96];
		snprintf(why, sizeof(why), "shared mapping that cannot be read: %s", strerror(-r));
		if (reg)
			untracked(m, reg, why);
		m->sh_bytes -= x->end - x->start;
		free(x->base);
		m->sh[i] = m->sh[--m->n_sh];
	}
	if (rc == 0 && m->sync_wp && (rc = rb_wp_start(m)) < 0)
		ckpt_fail(c, rc, MV_E_INTERNAL, "cannot start the mark's fault thread: %s",
			  strerror(-rc));
	return rc;
}

static struct rb_mark *mark_new(struct mv *mv, const char *name, pid_t pid, int pidfd)
{
	struct rb_mark *m = xcalloc(1, sizeof(*m));
	m->pidfd = pidfd >= 0 ? fcntl(pidfd, F_DUPFD_CLOEXEC, 0) : -1;
	m->memfd = m->uffd = -1;
	m->pid = pid;
	m->mv = mv;
	m->untracked = json_array();
	m->snap = (struct rb_snap){.mv = mv, .pidfd = -1, .memfd = -1};
	snprintf(m->name, sizeof(m->name), "%s", name);
	return m;
}

/* On the mark's tracer thread: stop, record, track, copy; then resume
 * the program, or hold it stopped (q->hold). A tree's mark stops the
 * whole tree at once, then marks each process in turn: one instant for
 * all of them. */
struct mark_work {
	struct rb_mark *m;
	struct rollback_mark_req *q;
};

static int mark_work(struct job *j, void *arg)
{
	struct mark_work *w = arg;
	struct rb_mark *m = w->m;
	struct rollback_mark_req *q = w->q;
	bool held;
	struct ckpt *c = rb_hold_ckpt(m->hold, &held);
	job_progress(j, "stopping", 0, 0);
	int rc = rb_stop(j, &q->pid, &q->pidfd, 1, q->tree, c, rb_hold_req(m->hold));
	if (rc < 0 && q->tree && c->err.code && !strcmp(c->err.code, MV_E_PERMISSION)) {
		/* Another process of the tree, which the command's mark needs
		 * too (a set-user-ID program run since, one that forbids it). */
		char msg[sizeof(c->err.msg)];
		snprintf(msg, sizeof(msg),
			 "%.400s; a mark of the tree needs every process of it: "
			 "`mark --pid %d` marks the command alone",
			 c->err.msg, q->pid);
		mv_err_set(&c->err, rc, c->err.code, "%s", msg);
	}
	m->ci = 0;
	m->tree = q->tree;
	if (rc == 0)
		rc = mark_one(c, m, true);
	if (rc == 0 && c->n > 1)
		m->members = xcalloc(c->n - 1, sizeof(*m->members));
	for (size_t k = 1; rc == 0 && k < c->n; k++) {
		struct cproc *p = &c->p[k];
		if (p->pt.gone || !ptrace_reader_tid(&p->pt))
			continue; /* it ended during the stop: not in the tree */
		struct rb_mark *x = mark_new(m->mv, m->name, p->pt.pid, p->pt.pidfd);
		x->ci = k;
		x->tree = m->tree;
		m->members[m->n_members++] = x;
		rc = mark_one(c, x, false);
	}
	if (rc == 0 && q->hold) {
		c->pause_start = c->p[0].pt.first_interrupt_ns;
		c->pause_end = mv_now_ns();
		rb_hold_keep(m->hold);
	} else {
		rb_release(c);
	}
	return rc;
}

int rb_mark_run(struct job *j)
{
	struct rollback_mark_req *q = j->ctx;
	struct mv *mv = j->mv;
	uint64_t t0 = mv_now_ns();
	/* The mark this one replaces goes first: its userfaultfd holds the
	 * regions (another one's registration would be refused), its tracer
	 * the threads it may hold. */
	pthread_mutex_lock(&mv->lock);
	struct rb_mark *old = mv->mark;
	mv->mark = NULL;
	pthread_mutex_unlock(&mv->lock);
	rb_mark_free(old);
	struct rb_mark *m = mark_new(mv, q->name, q->pid, q->pidfd);
	int rc = 0;
	m->hold = rb_hold_start(mv, m->pid, m->name, &m->holding, &rc);
	if (!m->hold) {
		rb_mark_free(m);
		job_fail(j, MV_E_INTERNAL, "cannot start the mark's thread: %s", strerror(-rc));
		return rc;
	}
	struct mark_work w = {m, q};
	rc = rb_hold_call(m->hold, j, mark_work, &w);
	bool held;
	struct ckpt *c = rb_hold_ckpt(m->hold, &held);
	uint64_t pause = c->pause_end > c->pause_start ? c->pause_end - c->pause_start : 0;
	if (rc < 0) {
		job_fail_with(j, &c->err);
		rb_mark_free(m);
		return rc;
	}
	m->marked_wall_ns = mv_wall_ns();
	j->result = mark_json(m, pause, mv_now_ns() - t0);
	json_object_set_new(j->result, "held", json_boolean(held));
	if (q->tree)
		json_object_set_new(j->result, "processes", members_json(m));
	pthread_mutex_lock(&mv->lock);
	mv->mark = m;
	pthread_mutex_unlock(&mv->lock);
	log_info("mark %s: process %d and %zu more, %zu threads, %zu regions, %zu bytes of "
		 "baseline%s",
		 m->name, m->pid, m->n_members, m->n_t, m->n_r, m->base_bytes,
		 held ? ", held" : "");
	return 0;
}
