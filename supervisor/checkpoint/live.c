/* A live checkpoint (--live): the program runs while its private memory
 * is copied (supervisor/checkpoint/job.h).
 *
 * While every thread is stopped (the pause), after the plan: a
 * userfaultfd is made in each process (a remote syscall), its private
 * anonymous regions with committed pages are registered for
 * write-protect faults (UFFDIO_REGISTER_MODE_WP) and write-protected
 * (UFFDIO_WRITEPROTECT), and the pages file is laid out with what cannot
 * be protected first (shared memory, file-backed private pages, regions
 * whose registration failed): that part is copied during the pause.
 * Then the program resumes, and the protected part is copied while it
 * runs, the way QEMU's background snapshot copies a guest:
 *
 *   - the copier reads an extent (/proc/PID/mem: reading a protected
 *     page is allowed, writing it waits), then lifts the protection of
 *     the extent (which wakes its writers): what it read is the page as
 *     it was at the pause;
 *   - a write to a page not copied yet waits in a write-protect fault;
 *     the handler thread copies the page's whole extent (at most 2 MiB)
 *     into a staging buffer of its own, as the copier would, and lifts
 *     its protection; the copier skips that extent. With no staging
 *     buffer free (the disk is behind) it reads only the 64 pages around
 *     the fault, keeps them, lifts their protection and so lets the
 *     write go on; the copier puts the kept pages in place of what it
 *     read there.
 *
 * Both take lv->mu around "read or keep, then unprotect", so a page is
 * either copied while still protected, or kept by the handler before
 * anyone could write it.
 *
 * Layout changes. munmap, mremap and madvise(DONTNEED, FREE, REMOVE) of
 * registered memory raise events (UNMAP, REMAP, REMOVE) that the calling
 * thread waits on until the handler reads them. The kernel refuses
 * UFFDIO_WRITEPROTECT with EAGAIN from before such a change until its
 * event is read (ctx->mmap_changing, mm/userfaultfd.c
 * mwriteprotect_range), so an unprotect that succeeds proves no change
 * overlapped the read before it: on EAGAIN the copier reads again once
 * the event is read. An event that removes or moves pages not copied yet
 * means their content at the pause is lost (UNMAP comes after the unmap;
 * REMOVE completes when it is read, before we could read the pages): the
 * image could no longer be one instant, so the live attempt is given up
 * (lv->lost) and the checkpoint starts again stopping the world.
 *
 * A process that exits or execs meanwhile: its uffd's mm is gone
 * (ESRCH), and what was read since can be the new program's: the process
 * is recorded as gone, as one killed during a checkpoint is.
 *
 * With --evict the copier leaves the protection on (its proof is a
 * protect of what is still protected, which fails the same way), a
 * write to a copied page lifts the protection of its window, and layout
 * events also mark their ranges. After the commit the program is stopped
 * again (evict_stage.c ckpt_evict_live) and ckpt_live_evict_view gives,
 * per process, the pages still present and protected outside the marked
 * ranges: not written since the pause, so their copy is their content.
 * Only those are dropped. */
#include "supervisor/checkpoint/job.h"
#include "supervisor/checkpoint/held.h"
#include "common/fault.h"
#include "common/log.h"
#include "common/util.h"
#include "supervisor/kernel/pagemap.h"
#include "supervisor/kernel/procmap.h"
#include "supervisor/kernel/remote.h"
#include "supervisor/reload/evict.h"
#include "supervisor/kernel/uffd.h"
#include "supervisor/supervise/mv.h"

#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define PG	    4096ull
#define MSG_BATCH   32
#define PENDING	    256
#define LIVE_NEED   (UFFD_FEATURE_EVENT_REMAP | UFFD_FEATURE_EVENT_REMOVE | UFFD_FEATURE_EVENT_UNMAP)
#define LIVE_WANT   UFFD_FEATURE_THREAD_ID
#define WHY_LEN	    256
#define KEEP_WINDOW 64u /* pages kept at once for a write fault */
/* --evict: pages of a copied extent whose protection one write lifts (and
 * which then stay resident) */
#define LIFT_WINDOW 64u
#define WIN_POOL    64u /* window buffers kept for reuse (16 MiB) */
/* Armed before the stop (ckpt_live_arm): only trees with at least this
 * much resident memory, whose protection walk would lengthen the pause
 * (262,144 entries a GiB); a write fault meanwhile lifts the protection
 * of its aligned 2 MiB (a huge page stays whole). */
#define ARM_MIN	   (32ull << 20)
#define ARM_WINDOW 512u

/* An extent copied live. */
struct lext {
	struct img_extent *e;
	void **saved; /* per page: its content at the pause, kept by a write fault */
	void **wins;  /* the windows read for write faults, which saved points into */
	size_t n_wins;
	bool copied; /* read and unprotected by the copier: saved is freed */
};

struct lproc {
	size_t proc; /* in c->p */
	int uffd;
	bool *live_r; /* per region of its img_proc: copied live */
	size_t n_r;
	struct lext *x; /* sorted by address */
	size_t n, cap;
	bool gone;
	/* With --evict: ranges a layout event touched (never dropped). */
	struct as_range *taint;
	size_t n_taint, cap_taint;
};

/* A process whose memory was write-protected while it ran, before the
 * stop (ckpt_live_arm). */
struct armed {
	pid_t pid;
	int uffd;	      /* -1 once a struct lproc took it */
	uint64_t probe;	      /* its [vdso] at the arming: the uffd's mm still lives */
	struct as_range *cov; /* registered and protected while it ran */
	size_t n_cov, cap_cov;
	struct as_range *touched; /* unmapped, moved or dropped since (under mu) */
	size_t n_touched, cap_touched;
};

struct live {
	pthread_mutex_t mu;
	/* Armed before the stop: its uffds, the thread that lifts the
	 * protection where the program writes until the stop. */
	struct armed *arm;
	size_t n_arm;
	pthread_t arm_thread;
	bool arm_started;
	uint64_t arm_stop_ns, arm_ns, arm_bytes, arm_faults, arm_events;
	uint64_t reprotect_bytes; /* protected again in the pause: written since the arming */
	struct lproc *lp;
	size_t n_lp;
	long *lp_of; /* c->p index -> lp index, or -1 */
	int stopfd;
	pthread_t handler;
	bool started;
	/* --evict: copied pages stay protected until the evict, so that
	 * pagemap tells which were written since the pause (live_evict). */
	bool evict;
	uint64_t paused_bytes, live_bytes;
	uint64_t setup_ns, protect_ns; /* in the pause: all of the set-up; its ioctls */
	json_t *paused_why;	       /* [{pid, what, why}]: memory copied during the pause */
	json_t *held; /* [{pid, what, bytes, ranges}]: kept for the kernel (held.h) */
	/* Under mu: */
	char lost[WHY_LEN]; /* non-empty: the image cannot be finished live */
	uint64_t faults, kept, retries, events;
	/* The handler's staging buffer: extents it copies whole on a write
	 * fault (copy_on_fault_locked), queued when full or when the copier
	 * needs a buffer; after copy_done, faults keep windows instead. */
	struct pagesw_buf *hbuf;
	bool copy_done;
	uint64_t fault_copied; /* bytes */
	/* Window buffers given back by the copier, for the next faults: a
	 * fresh 256 KiB malloc is a fresh mmap, which the kernel zeroes page
	 * by page before the read overwrites it (perf: 4% of the CPU of a
	 * live copy with a writer). */
	void *pool[WIN_POOL];
	size_t n_pool;
};

static void *get_win(struct live *lv)
{
	return lv->n_pool ? lv->pool[--lv->n_pool] : xmalloc_pages(KEEP_WINDOW * PG);
}

static void put_win(struct live *lv, void *buf)
{
	if (lv->n_pool < WIN_POOL)
		lv->pool[lv->n_pool++] = buf;
	else
		free(buf);
}

/* ---- setting up, while stopped ------------------------------------------ */

/* What an evict drops is what a live copy protects. */
static bool protectable(const struct img_region *r)
{
	return evict_region_evictable(r);
}

static void paused_why(struct live *lv, pid_t pid, const struct img_region *r, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void paused_why(struct live *lv, pid_t pid, const struct img_region *r, const char *fmt, ...)
{
	char why[WHY_LEN], what[64] = "the process";
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	if (r)
		snprintf(what, sizeof(what), "%#llx-%#llx", (unsigned long long)r->start,
			 (unsigned long long)r->end);
	log_info("checkpoint --live: process %d, %s: %s; copied during the pause", pid, what, why);
	json_array_append_new(lv->paused_why,
			      json_pack("{s:i, s:s, s:s}", "pid", pid, "memory", what, "why", why));
}

static void add_lext(struct lproc *lp, struct img_extent *e)
{
	if (lp->n == lp->cap)
		lp->x = xrealloc(lp->x, (lp->cap = lp->cap ? lp->cap * 2 : 64) * sizeof(*lp->x));
	lp->x[lp->n++] = (struct lext){.e = e};
}

static int make_uffd(struct ckpt *c, struct cproc *p, int *uffd, bool quiet, uint64_t *vdso)
{
	struct remote r;
	struct mv_err err = {0};
	int rc = remote_open_stopped(&r, &p->pt, &c->mv->injecting);
	if (rc == 0 && vdso)
		*vdso = r.vdso_start;
	if (rc == 0)
		rc = remote_userfaultfd_stopped(&r, p->pt.pidfd, uffd, &err);
	else
		mv_err_set(&err, rc, NULL, "no thread to inject userfaultfd(2) into: %s",
			   strerror(-rc));
	if (rc < 0) {
		if (!quiet)
			paused_why(c->live, p->pt.pid, NULL, "%s", err.msg);
		return rc;
	}
	uint64_t got;
	rc = uffd_api_best(*uffd, UFFD_FEATURE_PAGEFAULT_FLAG_WP | LIVE_NEED, LIVE_WANT, &got);
	if (rc < 0 && !quiet) {
		paused_why(c->live, p->pt.pid, NULL,
			   "this kernel's userfaultfd lacks write-protect faults or events "
			   "(missing features %#llx)",
			   (unsigned long long)got);
	}
	if (rc < 0) {
		close(*uffd);
		*uffd = -1;
	}
	return rc;
}

static void keep_held_locked(struct ckpt *c, struct lproc *lp, const struct held *h);

/* A write fault to try again once an event is read: lp indexes lv->lp
 * (or lv->arm, while armed). */
struct fault {
	size_t lp;
	uint64_t addr;
};

/* ---- armed before the stop ------------------------------------------------ */

/* Protecting 1 GiB of 4 KiB pages is a write to 262,144 page-table
 * entries (17-33 ms here), too long for the pause. So a live copy of a
 * big tree protects while the program still runs: a short stop makes the
 * uffds (an injected call needs a stopped thread), the program resumes,
 * and its private anonymous regions are registered and protected while
 * it runs. A write meanwhile waits on a write-protect fault, and the arm
 * thread lifts the protection of its aligned 2 MiB: that memory is just
 * written again since the arming. In the pause (ckpt_live_setup), after
 * everything that may write the program's memory there (the held scan's
 * injected calls), the arm thread is stopped and its queue read, and a
 * region armed whole and untouched by any layout event since is
 * protected only where pagemap says a present or swapped page is
 * written (not protected): what the program wrote since the arming, and
 * pages it faulted in. Every other region is protected whole, as
 * without arming. Either way every page the region holds at the pause is
 * protected before the program resumes, which is all the live copy
 * needs. */

static void add_range(struct as_range **v, size_t *n, size_t *cap, uint64_t start, uint64_t end)
{
	if (*n == *cap)
		*v = xrealloc(*v, (*cap = *cap ? *cap * 2 : 16) * sizeof(**v));
	(*v)[(*n)++] = (struct as_range){start & ~(PG - 1), (end + PG - 1) & ~(PG - 1)};
}

static const struct as_range *range_of(const struct as_range *v, size_t n, uint64_t addr)
{
	for (size_t i = 0; i < n; i++)
		if (v[i].start <= addr && addr < v[i].end)
			return &v[i];
	return NULL;
}

/* A write fault while armed: lift the protection of the aligned window
 * around addr within its armed range (the page alone if that fails).
 * -EAGAIN: a layout event is to be read first. Under lv->mu. */
static int arm_lift_locked(struct armed *a, uint64_t addr)
{
	uint64_t win = (uint64_t)ARM_WINDOW * PG, s = addr & ~(win - 1), e = s + win;
	const struct as_range *r = range_of(a->cov, a->n_cov, addr);
	if (r) {
		s = MV_MAX(s, r->start);
		e = MV_MIN(e, r->end);
	} else {
		s = addr;
		e = addr + PG;
	}
	int rc = uffd_writeprotect(a->uffd, s, e - s, false);
	if (rc < 0 && rc != -EAGAIN && e - s > PG)
		rc = uffd_writeprotect(a->uffd, addr, PG, false);
	if (rc < 0 && rc != -EAGAIN)
		uffd_wake(a->uffd, addr, PG); /* it faults again, or runs */
	return rc == -EAGAIN ? rc : 0;
}

static void arm_take(struct live *lv, size_t k, const struct uffd_msg *m, struct fault *q,
		     size_t *nq)
{
	struct armed *a = &lv->arm[k];
	pthread_mutex_lock(&lv->mu);
	switch (m->event) {
	case UFFD_EVENT_PAGEFAULT: {
		uint64_t addr = m->arg.pagefault.address & ~(PG - 1);
		lv->arm_faults++;
		if (arm_lift_locked(a, addr) == -EAGAIN) {
			if (*nq < PENDING)
				q[(*nq)++] = (struct fault){k, addr};
			else
				uffd_wake(a->uffd, addr, PG);
		}
		break;
	}
	case UFFD_EVENT_REMOVE:
	case UFFD_EVENT_UNMAP:
		lv->arm_events++;
		add_range(&a->touched, &a->n_touched, &a->cap_touched, m->arg.remove.start,
			  m->arg.remove.end);
		break;
	case UFFD_EVENT_REMAP:
		lv->arm_events++;
		add_range(&a->touched, &a->n_touched, &a->cap_touched, m->arg.remap.from,
			  m->arg.remap.from + m->arg.remap.len);
		add_range(&a->touched, &a->n_touched, &a->cap_touched, m->arg.remap.to,
			  m->arg.remap.to + m->arg.remap.len);
		break;
	default:
		break;
	}
	pthread_mutex_unlock(&lv->mu);
}

static void arm_retry(struct live *lv, struct fault *q, size_t *nq)
{
	size_t kept = 0;
	pthread_mutex_lock(&lv->mu);
	for (size_t i = 0; i < *nq; i++)
		if (arm_lift_locked(&lv->arm[q[i].lp], q[i].addr) == -EAGAIN)
			q[kept++] = q[i];
	pthread_mutex_unlock(&lv->mu);
	*nq = kept;
}

/* Read what is queued on each armed uffd (drain: without waiting). */
static void arm_read(struct live *lv, struct pollfd *pfd, struct fault *q, size_t *nq, bool drain)
{
	for (size_t k = 0; k < lv->n_arm; k++) {
		if (!drain && !(pfd[k].revents & POLLIN))
			continue;
		struct uffd_msg m[MSG_BATCH];
		ssize_t got;
		while ((got = read(lv->arm[k].uffd, m, sizeof(m))) > 0) {
			for (ssize_t i = 0; i < got / (ssize_t)sizeof(m[0]); i++)
				arm_take(lv, k, &m[i], q, nq);
			if (!drain)
				break;
		}
	}
}

static void *arm_main(void *arg)
{
	struct live *lv = arg;
	size_t n = lv->n_arm;
	struct pollfd *pfd = xcalloc(n + 1, sizeof(*pfd));
	struct fault *q = xcalloc(PENDING, sizeof(*q));
	size_t nq = 0;
	for (size_t k = 0; k < n; k++)
		pfd[k] = (struct pollfd){.fd = lv->arm[k].uffd, .events = POLLIN};
	pfd[n] = (struct pollfd){.fd = lv->stopfd, .events = POLLIN};
	evict_fault_thread("mv-live-arm");
	for (;;) {
		int r = poll(pfd, n + 1, nq ? 1 : -1);
		if (r < 0 && errno != EINTR)
			break;
		if (pfd[n].revents)
			break;
		for (size_t k = 0; k < n; k++)
			if (pfd[k].revents & (POLLERR | POLLHUP | POLLNVAL))
				pfd[k].fd = -1;
		arm_read(lv, pfd, q, &nq, false);
		if (nq)
			arm_retry(lv, q, &nq);
	}
	free(q);
	free(pfd);
	return NULL;
}

/* Stop the arm thread and take what the stopped program queued: every
 * thread is stopped, so nothing more comes. Faults still waiting (a
 * thread that met the stop inside one) are let through. */
static void arm_quiesce(struct live *lv)
{
	if (!lv->arm_started)
		return;
	uint64_t one = 1;
	if (write(lv->stopfd, &one, sizeof(one)) < 0)
		log_job_warn("checkpoint --live: stopping the arm thread: %s", strerror(errno));
	pthread_join(lv->arm_thread, NULL);
	lv->arm_started = false;
	if (read(lv->stopfd, &one, sizeof(one)) < 0) /* the live handler's now */
		log_debug("checkpoint --live: eventfd: %s", strerror(errno));
	struct fault *q = xcalloc(PENDING, sizeof(*q));
	size_t nq = 0;
	arm_read(lv, NULL, q, &nq, true);
	for (int round = 0; nq && round < 100; round++) {
		arm_read(lv, NULL, q, &nq, true);
		arm_retry(lv, q, &nq);
	}
	free(q);
}

struct arm_walk {
	struct as_range *v;
	size_t n, cap;
};

/* The regions a live copy protects (protectable()), as the kernel has
 * them while the program runs: private, writable, anonymous, heap or
 * stack. */
static int arm_vma(void *arg, const struct proc_vma *v)
{
	struct arm_walk *w = arg;
	char name[64] = "";
	snprintf(name, sizeof(name), "%.*s", (int)MV_MIN(v->name_len, sizeof(name) - 1),
		 v->name ? v->name : "");
	enum as_kind k = as_classify(name, v->shared, v->inode);
	if (!v->shared && v->w && (k == AS_ANON || k == AS_HEAP || k == AS_STACK))
		add_range(&w->v, &w->n, &w->cap, v->start, v->end);
	return 0;
}

static void arm_protect(struct ckpt *c, struct armed *a)
{
	struct live *lv = c->live;
	struct arm_walk w = {0};
	if (procmap_vmas(a->pid, c->mv->feat.procmap_query, 0, UINT64_MAX, arm_vma, &w) < 0) {
		free(w.v);
		return;
	}
	for (size_t i = 0; i < w.n; i++) {
		uint64_t len = w.v[i].end - w.v[i].start;
		if (uffd_register_mode(a->uffd, w.v[i].start, len, UFFDIO_REGISTER_MODE_WP) < 0)
			continue;
		if (uffd_writeprotect(a->uffd, w.v[i].start, len, true) < 0) {
			uffd_unregister(a->uffd, w.v[i].start, len);
			continue;
		}
		pthread_mutex_lock(&lv->mu);
		add_range(&a->cov, &a->n_cov, &a->cap_cov, w.v[i].start, w.v[i].end);
		lv->arm_bytes += len;
		pthread_mutex_unlock(&lv->mu);
	}
	free(w.v);
}

static struct live *live_new(struct ckpt *c)
{
	struct live *lv = xcalloc(1, sizeof(*lv));
	c->live = lv;
	pthread_mutex_init(&lv->mu, NULL);
	lv->stopfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	lv->paused_why = json_array();
	lv->held = json_array();
	lv->evict = c->req->evict;
	return lv;
}

int ckpt_live_arm(struct ckpt *c, uint64_t resident)
{
	if (resident < ARM_MIN || fault_hit("live_arm_off"))
		return 0;
	struct live *lv = live_new(c);
	if (lv->stopfd < 0)
		return 0;
	/* The short stop: its times are not the image's (as the evict's
	 * second stop), the processes are stopped afresh after it. */
	c->stopped_again = true;
	int rc = ckpt_stop_all(c);
	for (size_t i = 0; rc == 0 && i < c->n; i++) {
		struct cproc *p = &c->p[i];
		struct armed a = {.pid = p->pt.pid, .uffd = -1};
		if (p->pt.gone || p->died || make_uffd(c, p, &a.uffd, true, &a.probe) < 0)
			continue;
		lv->arm = xrealloc(lv->arm, (lv->n_arm + 1) * sizeof(*lv->arm));
		lv->arm[lv->n_arm++] = a;
	}
	ckpt_resume_all(c);
	uint64_t first = UINT64_MAX, last = 0;
	for (size_t i = 0; i < c->n; i++) {
		struct ptrace_proc *pp = &c->p[i].pt;
		if (pp->first_interrupt_ns) {
			first = MV_MIN(first, pp->first_interrupt_ns);
			last = MV_MAX(last, pp->last_detach_ns);
		}
		ptrace_proc_forget(pp);
	}
	c->stopped_again = false;
	c->again_end = 0;
	lv->arm_stop_ns = last > first ? last - first : 0;
	if (rc < 0 || !lv->n_arm)
		return rc;
	uint64_t t0 = mv_now_ns();
	if (pthread_create(&lv->arm_thread, NULL, arm_main, lv) != 0)
		return 0; /* the uffds stay unused: the pause protects all */
	lv->arm_started = true;
	for (size_t k = 0; k < lv->n_arm; k++)
		arm_protect(c, &lv->arm[k]);
	lv->arm_ns = mv_now_ns() - t0;
	/* Fault point live_arm_stall: the program runs armed for 1 s
	 * before the stop, writing, faulting and unmapping (live.bats). */
	if (fault_hit("live_arm_stall"))
		for (int i = 0; i < 100 && !job_cancel_asked(c->j); i++) {
			struct timespec ts = {0, 10 * 1000000};
			nanosleep(&ts, NULL);
		}
	log_debug("checkpoint --live: armed %llu MiB of %zu processes in %.1f ms (stop %.2f ms)",
		  (unsigned long long)(lv->arm_bytes >> 20), lv->n_arm, (double)lv->arm_ns / 1e6,
		  (double)lv->arm_stop_ns / 1e6);
	return 0;
}

/* The armed uffd of process p, taken (-1 if none, or if its mm is no
 * longer the process's: it exec'd since the arming). */
static int take_armed(struct ckpt *c, size_t i, struct armed **out)
{
	struct live *lv = c->live;
	*out = NULL;
	const struct img_proc *ip = ckpt_iproc(c, i);
	uint64_t vdso = 0;
	for (size_t k = 0; k < ip->n_r; k++)
		if (ip->r[k].kind == AS_VDSO)
			vdso = ip->r[k].start;
	for (size_t k = 0; k < lv->n_arm; k++) {
		struct armed *a = &lv->arm[k];
		if (a->pid != c->p[i].pt.pid || a->uffd < 0)
			continue;
		int fd = a->uffd;
		a->uffd = -1;
		if (!vdso || vdso != a->probe || !uffd_mm_alive(fd, a->probe)) {
			close(fd); /* lifts what it protected in the old mm */
			return -1;
		}
		*out = a;
		return fd;
	}
	return -1;
}

/* Is all of r armed, and untouched by a layout event since? */
static bool armed_whole(const struct armed *a, const struct img_region *r)
{
	const struct as_range *c = range_of(a->cov, a->n_cov, r->start);
	if (!c || c->end < r->end)
		return false;
	for (size_t k = 0; k < a->n_touched; k++)
		if (a->touched[k].start < r->end && r->start < a->touched[k].end)
			return false;
	return true;
}

/* Armed memory no live region took (a region the plan copies in the
 * pause, or one that changed since): its registration goes, and with it
 * any protection left there. */
static void arm_release_rest(struct lproc *lp, const struct img_proc *ip, const struct armed *a)
{
	struct as_range *v = xcalloc(MV_MAX(a->n_cov + a->n_touched, 1), sizeof(*v));
	size_t n = 0;
	for (size_t k = 0; k < a->n_cov; k++)
		v[n++] = a->cov[k];
	for (size_t k = 0; k < a->n_touched; k++)
		v[n++] = a->touched[k];
	n = as_ranges_merge(v, n);
	for (size_t k = 0; k < n; k++) {
		uint64_t at = v[k].start;
		for (size_t r = 0; r < ip->n_r && at < v[k].end; r++) {
			const struct img_region *g = &ip->r[r];
			if (!lp->live_r[r] || g->end <= at || g->start >= v[k].end)
				continue;
			if (g->start > at)
				uffd_unregister(lp->uffd, at, g->start - at);
			at = g->end;
		}
		if (at < v[k].end)
			uffd_unregister(lp->uffd, at, v[k].end - at);
	}
	free(v);
}

/* ---- setting up, while stopped (continued) ------------------------------ */

/* Register and protect r; false (and r is copied paused) if either fails.
 * Armed whole (armed_whole): only its written pages are protected. */
static bool protect_region(struct live *lv, struct lproc *lp, pid_t pid, struct img_region *r,
			   const struct armed *a, struct pagemap *pm)
{
	uint64_t len = r->end - r->start, t0 = mv_now_ns();
	int rc = uffd_register_mode(lp->uffd, r->start, len, UFFDIO_REGISTER_MODE_WP);
	if (rc < 0) {
		paused_why(lv, pid, r, "no write-protect registration: %s", strerror(-rc));
		return false;
	}
	bool whole = true;
	if (a && pm && armed_whole(a, r)) {
		struct as_range *w = NULL;
		size_t n = 0, cap = 0;
		rc = pagemap_written_runs(pm, r->start, r->end, &w, &n, &cap);
		for (size_t k = 0; rc == 0 && k < n; k++) {
			rc = uffd_writeprotect(lp->uffd, w[k].start, w[k].end - w[k].start, true);
			lv->reprotect_bytes += w[k].end - w[k].start;
		}
		free(w);
		whole = rc < 0; /* a failure: protect it all */
	}
	if (whole)
		rc = uffd_writeprotect(lp->uffd, r->start, len, true);
	if (rc < 0) {
		uffd_unregister(lp->uffd, r->start, len);
		paused_why(lv, pid, r, "cannot write-protect it: %s", strerror(-rc));
		return false;
	}
	for (size_t x = 0; x < r->ext.n; x++)
		add_lext(lp, &r->ext.v[x]);
	lv->protect_ns += mv_now_ns() - t0;
	return true;
}

/* The kernel's own accesses (held.h) are found before anything is
 * protected in the pause: the scan injects a call into each thread,
 * whose write to its stack must not wait on a write-protect fault nobody
 * serves (armed memory is served by the arm thread until the scans are
 * done). What it finds is kept once protected, during the pause.
 * False: the process is copied in the pause (or has nothing to copy
 * live). */
static bool setup_held(struct ckpt *c, size_t i, struct held *h)
{
	struct img_proc *ip = ckpt_iproc(c, i);
	bool any = false;
	for (size_t k = 0; k < ip->n_r && !any; k++)
		any = protectable(&ip->r[k]);
	if (!any)
		return false;
	if (held_scan_stopped(c, i, false, h) < 0)
		return false;
	if (h->unknown[0]) {
		paused_why(c->live, c->p[i].pt.pid, NULL, "%s", h->unknown);
		held_free(h);
		return false;
	}
	return true;
}

static void setup_proc(struct ckpt *c, size_t i, struct held *h)
{
	struct live *lv = c->live;
	struct cproc *p = &c->p[i];
	struct img_proc *ip = ckpt_iproc(c, i);
	struct armed *a;
	int uffd = take_armed(c, i, &a);
	if (uffd < 0 && make_uffd(c, p, &uffd, false, NULL) < 0) {
		held_free(h);
		return;
	}
	struct pagemap pm;
	bool have_pm = a && pagemap_open(p->pt.pid, c->mv->feat.pagemap_scan, &pm) == 0;
	struct lproc lp = {.proc = i, .uffd = uffd, .n_r = ip->n_r};
	lp.live_r = xcalloc(MV_MAX(ip->n_r, 1), sizeof(*lp.live_r));
	for (size_t k = 0; k < ip->n_r; k++)
		if (protectable(&ip->r[k]))
			lp.live_r[k] =
			    protect_region(lv, &lp, p->pt.pid, &ip->r[k], a, have_pm ? &pm : NULL);
	if (have_pm)
		pagemap_close(&pm);
	if (a)
		arm_release_rest(&lp, ip, a);
	pthread_mutex_lock(&lv->mu);
	keep_held_locked(c, &lp, h);
	pthread_mutex_unlock(&lv->mu);
	held_json(h, p->pt.pid, lv->held);
	held_free(h);
	lv->lp = xrealloc(lv->lp, (lv->n_lp + 1) * sizeof(*lv->lp));
	lv->lp_of[i] = (long)lv->n_lp;
	lv->lp[lv->n_lp++] = lp;
}

bool ckpt_live_region(const struct ckpt *c, size_t proc, size_t region)
{
	const struct live *lv = c->live;
	if (!lv || lv->lp_of[proc] < 0)
		return false;
	const struct lproc *lp = &lv->lp[lv->lp_of[proc]];
	return region < lp->n_r && lp->live_r[region];
}

static void assign(struct img_extents *x, uint64_t *off)
{
	for (size_t i = 0; i < x->n; i++) {
		x->v[i].off = *off;
		*off += img_extent_len(&x->v[i]);
	}
}

/* The pages file in copy order: what is copied during the pause, then
 * what is copied live (ckpt_copy_all's order within each). */
static void lay_out(struct ckpt *c)
{
	uint64_t off = IMG_HEADER_SIZE;
	for (int live = 0; live < 2; live++) {
		for (size_t i = 0; i < c->n; i++) {
			if (c->p[i].img < 0)
				continue;
			struct img_proc *ip = ckpt_iproc(c, i);
			for (size_t k = 0; k < ip->n_r; k++)
				if (ckpt_live_region(c, i, k) == (bool)live)
					assign(&ip->r[k].ext, &off);
		}
		if (!live) {
			for (size_t k = 0; k < c->im.n_o; k++)
				assign(&c->im.o[k].ext, &off);
			c->live->paused_bytes = off - IMG_HEADER_SIZE;
		}
	}
	c->live->live_bytes = off - IMG_HEADER_SIZE - c->live->paused_bytes;
}

int ckpt_live_setup(struct ckpt *c)
{
	struct live *lv = c->live ? c->live : live_new(c);
	lv->lp_of = xmalloc(MV_MAX(c->n, 1) * sizeof(*lv->lp_of));
	for (size_t i = 0; i < c->n; i++)
		lv->lp_of[i] = -1;
	if (lv->stopfd < 0)
		return ckpt_fail(c, -errno, MV_E_INTERNAL, "eventfd: %s", strerror(errno));
	job_progress(c->j, "protecting", 0, 0);
	uint64_t t0 = mv_now_ns();
	struct held *h = xcalloc(MV_MAX(c->n, 1), sizeof(*h));
	bool *go = xcalloc(MV_MAX(c->n, 1), sizeof(*go));
	for (size_t i = 0; i < c->n; i++)
		if (c->p[i].img >= 0 && !c->p[i].died)
			go[i] = setup_held(c, i, &h[i]);
	/* Nothing writes the program's memory from here to the resume. */
	arm_quiesce(lv);
	for (size_t i = 0; i < c->n; i++)
		if (go[i])
			setup_proc(c, i, &h[i]);
	free(h);
	free(go);
	/* Armed processes without a live copy: their protection goes. */
	for (size_t k = 0; k < lv->n_arm; k++)
		if (lv->arm[k].uffd >= 0) {
			close(lv->arm[k].uffd);
			lv->arm[k].uffd = -1;
		}
	lay_out(c);
	lv->setup_ns = mv_now_ns() - t0;
	return 0;
}

/* ---- keeping pages on write faults -------------------------------------- */

/* The first extent that ends after addr. */
static size_t lower_bound(const struct lproc *lp, uint64_t addr)
{
	size_t lo = 0, hi = lp->n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		const struct img_extent *e = lp->x[mid].e;
		if (e->addr + img_extent_len(e) <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static struct lext *find_lext(struct lproc *lp, uint64_t addr)
{
	size_t i = lower_bound(lp, addr);
	return i < lp->n && lp->x[i].e->addr <= addr ? &lp->x[i] : NULL;
}

static void set_lost_locked(struct live *lv, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void set_lost_locked(struct live *lv, const char *fmt, ...)
{
	if (lv->lost[0])
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(lv->lost, sizeof(lv->lost), fmt, ap);
	va_end(ap);
	log_info("checkpoint --live: %s: starting again, stopping the program", lv->lost);
}

static int keep_pages_locked(struct ckpt *c, struct lproc *lp, struct lext *x, uint32_t a,
			     uint32_t b);
static int copy_on_fault_locked(struct ckpt *c, struct lproc *lp, struct lext *x);

/* A write fault at addr, in an extent not copied yet: the handler copies
 * the whole extent (at most 2 MiB) into its staging buffer and commits
 * it as the copier would (copy_on_fault_locked), which lifts its
 * protection; one fault per extent, and the read lands in a buffer that
 * is warm (on the guests memvisor is measured on, a read into fresh
 * memory runs at a thirtieth of the speed: bench/README.md). Without a
 * free buffer, or once the copier is done, it keeps the pages of the
 * aligned KEEP_WINDOW around addr that are neither copied nor kept (they
 * have not changed since the pause: still protected), then lifts their
 * protection, which lets the write through; the copier puts them in.
 * -EAGAIN: an event is to be read first. Under lv->mu. */
static int keep_page_locked(struct ckpt *c, struct lproc *lp, uint64_t addr)
{
	struct live *lv = c->live;
	struct lext *x = find_lext(lp, addr);
	uint32_t a = 0, b = 0;
	if (x && !x->copied && !lv->copy_done && !lp->gone) {
		int rc = copy_on_fault_locked(c, lp, x);
		if (rc == -EAGAIN)
			return rc;
		if (rc > 0 || (rc == 0 && !lv->evict))
			return 0;
		/* 0 with --evict: copied, still protected; -ENOBUFS: keep. */
	}
	if (x) {
		uint32_t k = (uint32_t)((addr - x->e->addr) / PG);
		a = k / KEEP_WINDOW * KEEP_WINDOW;
		b = MV_MIN(x->e->pages, a + KEEP_WINDOW);
	}
	if (!x || x->copied) {
		/* Copied already, or never in the image (a page that was the
		 * zero page at the pause): let the write through. With
		 * --evict a copied extent is still protected: its window
		 * goes, as a kept one would (and stays resident). */
		uint64_t start = addr, len = PG;
		if (x && lv->evict) {
			uint32_t k = (uint32_t)((addr - x->e->addr) / PG);
			uint32_t la = k / LIFT_WINDOW * LIFT_WINDOW;
			start = x->e->addr + la * PG;
			len = (uint64_t)(MV_MIN(x->e->pages, la + LIFT_WINDOW) - la) * PG;
		}
		int rc = uffd_writeprotect(lp->uffd, start, len, false);
		return rc == -EAGAIN ? rc : 0;
	}
	return keep_pages_locked(c, lp, x, a, b);
}

/* Keep pages [a, b) of x (at most KEEP_WINDOW, not copied yet) as they
 * are, then lift their protection. Under lv->mu. */
static int keep_pages_locked(struct ckpt *c, struct lproc *lp, struct lext *x, uint32_t a,
			     uint32_t b)
{
	struct live *lv = c->live;
	const struct img_extent *e = x->e;
	uint64_t start = e->addr + a * PG, len = (uint64_t)(b - a) * PG;
	char *buf = get_win(lv);
	int n = ckpt_read_mem(&c->p[lp->proc], start, buf, len);
	if (n < 0) {
		put_win(lv, buf);
		if (n == -ESRCH || ckpt_proc_dead(&c->p[lp->proc])) {
			lp->gone = true;
			return 0;
		}
		set_lost_locked(lv, "process %d: reading %#llx before a write: %s",
				c->p[lp->proc].pt.pid, (unsigned long long)start, strerror(-n));
		return 0;
	}
	int rc = uffd_writeprotect(lp->uffd, start, len, false);
	if (rc < 0) {
		put_win(lv, buf);
		if (rc == -ESRCH)
			lp->gone = true;
		return rc == -EAGAIN ? rc : 0;
	}
	if (!x->saved)
		x->saved = xcalloc(e->pages, sizeof(*x->saved));
	/* The window is kept as read (no copy per page). A page kept before
	 * was unprotected then and may have changed since: its kept copy
	 * stays. */
	x->wins = xrealloc(x->wins, (x->n_wins + 1) * sizeof(*x->wins));
	x->wins[x->n_wins++] = buf;
	for (uint32_t p = a; p < b; p++) {
		if (x->saved[p])
			continue;
		x->saved[p] = buf + (size_t)(p - a) * PG;
		lv->kept++;
	}
	return 0;
}

static void keep_held_locked(struct ckpt *c, struct lproc *lp, const struct held *h)
{
	struct as_range *v;
	size_t n = held_merged(h, &v);
	for (size_t k = 0; k < n; k++) {
		for (struct lext *x = lp->x + lower_bound(lp, v[k].start); x < lp->x + lp->n; x++) {
			const struct img_extent *e = x->e;
			if (e->addr >= v[k].end)
				break;
			uint64_t s = MV_MAX(v[k].start, e->addr);
			uint64_t end = MV_MIN(v[k].end, e->addr + img_extent_len(e));
			uint32_t a = (uint32_t)((s - e->addr) / PG),
				 b = (uint32_t)((end - e->addr) / PG);
			for (uint32_t q = a; q < b; q += KEEP_WINDOW)
				keep_pages_locked(c, lp, x, q, MV_MIN(b, q + KEEP_WINDOW));
		}
	}
	free(v);
}

static void taint_locked(struct lproc *lp, uint64_t start, uint64_t end)
{
	if (lp->n_taint == lp->cap_taint)
		lp->taint =
		    xrealloc(lp->taint, (lp->cap_taint = lp->cap_taint ? lp->cap_taint * 2 : 16) *
					    sizeof(*lp->taint));
	lp->taint[lp->n_taint++] = (struct as_range){start & ~(PG - 1), (end + PG - 1) & ~(PG - 1)};
}

/* munmap, mremap, madvise of [start, end): pages not copied nor kept in
 * it are lost for the image. With --evict, nothing in the range is
 * dropped: mremap moves pages with their protection, so a protected page
 * may no longer be the one the image has at its address. Under lv->mu. */
static void on_change_locked(struct ckpt *c, struct lproc *lp, uint64_t start, uint64_t end,
			     const char *what)
{
	if (c->live->evict)
		taint_locked(lp, start, end);
	for (struct lext *x = lp->x + lower_bound(lp, start); x < lp->x + lp->n; x++) {
		const struct img_extent *e = x->e;
		if (e->addr >= end)
			break;
		if (x->copied)
			continue;
		uint64_t a = MV_MAX(start, e->addr), b = MV_MIN(end, e->addr + img_extent_len(e));
		for (uint64_t p = a; p < b; p += PG)
			if (!x->saved || !x->saved[(p - e->addr) / PG]) {
				set_lost_locked(
				    c->live, "process %d %s %#llx-%#llx while it was being copied",
				    c->p[lp->proc].pt.pid, what, (unsigned long long)start,
				    (unsigned long long)end);
				return;
			}
	}
}

static void take(struct ckpt *c, size_t li, const struct uffd_msg *m, struct fault *q, size_t *nq)
{
	struct live *lv = c->live;
	struct lproc *lp = &lv->lp[li];
	pthread_mutex_lock(&lv->mu);
	switch (m->event) {
	case UFFD_EVENT_PAGEFAULT: {
		uint64_t addr = m->arg.pagefault.address & ~(PG - 1);
		lv->faults++;
		if (keep_page_locked(c, lp, addr) == -EAGAIN) {
			if (*nq < PENDING)
				q[(*nq)++] = (struct fault){li, addr};
			else
				uffd_wake(lp->uffd, addr, PG); /* it faults again */
		}
		break;
	}
	case UFFD_EVENT_REMOVE:
	case UFFD_EVENT_UNMAP:
		lv->events++;
		on_change_locked(c, lp, m->arg.remove.start, m->arg.remove.end,
				 m->event == UFFD_EVENT_UNMAP ? "unmapped" : "dropped (madvise)");
		break;
	case UFFD_EVENT_REMAP:
		lv->events++;
		on_change_locked(c, lp, m->arg.remap.from, m->arg.remap.from + m->arg.remap.len,
				 "moved (mremap)");
		if (lv->evict)
			taint_locked(lp, m->arg.remap.to, m->arg.remap.to + m->arg.remap.len);
		break;
	default:
		break;
	}
	pthread_mutex_unlock(&lv->mu);
}

/* Faults that met EAGAIN, again (their events have been read since). */
static void retry(struct ckpt *c, struct fault *q, size_t *nq)
{
	struct live *lv = c->live;
	size_t kept = 0;
	pthread_mutex_lock(&lv->mu);
	for (size_t i = 0; i < *nq; i++)
		if (keep_page_locked(c, &lv->lp[q[i].lp], q[i].addr) == -EAGAIN)
			q[kept++] = q[i];
	pthread_mutex_unlock(&lv->mu);
	*nq = kept;
}

static void *handler_main(void *arg)
{
	struct ckpt *c = arg;
	struct live *lv = c->live;
	size_t n = lv->n_lp;
	struct pollfd *pfd = xcalloc(n + 1, sizeof(*pfd));
	struct fault *q = xcalloc(PENDING, sizeof(*q));
	size_t nq = 0;
	for (size_t i = 0; i < n; i++)
		pfd[i] = (struct pollfd){.fd = lv->lp[i].uffd, .events = POLLIN};
	pfd[n] = (struct pollfd){.fd = lv->stopfd, .events = POLLIN};
	evict_fault_thread("mv-live-wp"); /* a program thread waits on each fault */
	for (;;) {
		int r = poll(pfd, n + 1, nq ? 1 : -1);
		if (r < 0 && errno != EINTR)
			break;
		if (pfd[n].revents)
			break;
		for (size_t i = 0; i < n; i++) {
			if (pfd[i].revents & (POLLERR | POLLHUP | POLLNVAL))
				pfd[i].fd = -1; /* released: nothing will come */
			if (!(pfd[i].revents & POLLIN))
				continue;
			struct uffd_msg m[MSG_BATCH];
			ssize_t got = read(lv->lp[i].uffd, m, sizeof(m));
			for (ssize_t k = 0; k < got / (ssize_t)sizeof(m[0]); k++)
				take(c, i, &m[k], q, &nq);
		}
		if (nq)
			retry(c, q, &nq);
	}
	free(q);
	free(pfd);
	return NULL;
}

int ckpt_live_start(struct ckpt *c)
{
	struct live *lv = c->live;
	for (size_t i = 0; i < c->n; i++) {
		if (lv->lp_of[i] < 0)
			continue;
		/* Its /proc/TID/mem is opened now, while the thread is stopped:
		 * the file holds this mm, whichever thread exits, and the copier
		 * and the handler share it (pread). An exec makes its reads
		 * fail, never read the new program. */
		struct cproc *p = &c->p[i];
		int rc = ckpt_read_mem(p, 0, NULL, 0);
		if (rc < 0)
			return ckpt_fail(c, rc, MV_E_INTERNAL, "opening /proc/%d/mem: %s", p->tid,
					 strerror(-rc));
		p->tid = p->pt.pid;
	}
	if (!lv->n_lp)
		return 0;
	int rc = -pthread_create(&lv->handler, NULL, handler_main, c);
	if (rc < 0)
		return ckpt_fail(c, rc, MV_E_INTERNAL, "starting the write-fault handler: %s",
				 strerror(-rc));
	lv->started = true;
	return 0;
}

/* ---- the copier's side -------------------------------------------------- */

static void free_saved(struct live *lv, struct lext *x)
{
	for (size_t w = 0; w < x->n_wins; w++)
		put_win(lv, x->wins[w]);
	free(x->wins);
	free(x->saved);
	x->wins = NULL;
	x->saved = NULL;
	x->n_wins = 0;
}

/* With --evict the copier leaves the protection on (pages written after
 * their copy must be told from the others) but needs the same proof that
 * no layout change overlapped its read: protecting again what is still
 * protected (every page of e but those kept) changes nothing and fails
 * with EAGAIN exactly when lifting the protection would. */
static int reprotect_unkept(struct lproc *lp, const struct lext *x, const struct img_extent *e)
{
	for (uint32_t a = 0; a < e->pages;) {
		if (x && x->saved && x->saved[a]) {
			a++;
			continue;
		}
		uint32_t b = a + 1;
		while (b < e->pages && !(x && x->saved && x->saved[b]))
			b++;
		int rc =
		    uffd_writeprotect(lp->uffd, e->addr + a * PG, (uint64_t)(b - a) * PG, true);
		if (rc < 0)
			return rc;
		a = b;
	}
	return 0;
}

/* Extent e (of x) was read into dst while protected: lift its protection
 * (or, with --evict, prove it still holds), which proves no layout change
 * overlapped the read, and put in the pages write faults kept. 0,
 * -EAGAIN, -ESRCH (recorded: lp->gone) or another error (recorded:
 * lv->lost). Under lv->mu. */
static int commit_locked(struct ckpt *c, struct lproc *lp, struct lext *x, struct img_extent *e,
			 void *dst)
{
	struct live *lv = c->live;
	int rc = lp->gone    ? -ESRCH
		 : lv->evict ? reprotect_unkept(lp, x, e)
			     : uffd_writeprotect(lp->uffd, e->addr, img_extent_len(e), false);
	if (rc == -EAGAIN)
		lv->retries++;
	if (rc == 0 && x && x->saved) {
		for (uint32_t k = 0; k < e->pages; k++)
			if (x->saved[k])
				memcpy((char *)dst + k * PG, x->saved[k], PG);
		free_saved(lv, x);
	}
	if (rc == 0 && x)
		x->copied = true;
	if (rc == -ESRCH)
		lp->gone = true;
	else if (rc < 0 && rc != -EAGAIN)
		set_lost_locked(lv, "process %d: lifting the write protection of %#llx: %s",
				c->p[lp->proc].pt.pid, (unsigned long long)e->addr, strerror(-rc));
	return rc;
}

/* Queue the handler's buffer to be written (one with nothing in it goes
 * back to the free ones). Under lv->mu. */
static void queue_hbuf_locked(struct ckpt *c)
{
	if (c->live->hbuf)
		pagesw_submit(c->w, c->live->hbuf);
	c->live->hbuf = NULL;
}

/* Fault point live_no_buffer: the handler finds no staging buffer. */
static struct pagesw_buf *handler_buf_locked(struct ckpt *c, const struct img_extent *e)
{
	struct live *lv = c->live;
	struct pagesw_buf *b = lv->hbuf;
	uint64_t len = img_extent_len(e);
	if (b && b->len && (b->off + b->len != e->off || b->len + len > b->cap)) {
		queue_hbuf_locked(c);
		b = NULL;
	}
	if (!b && (fault_hit("live_no_buffer") || !(b = pagesw_try_get(c->w))))
		return NULL;
	if (!b->len)
		b->off = e->off;
	return lv->hbuf = b;
}

/* Copy extent x whole for a write fault: read it into the handler's
 * buffer and commit it. 0: copied (unprotected, or with --evict still
 * protected); -EAGAIN: an event is to be read first; -ENOBUFS: no
 * buffer, or the read failed: keep a window instead (which judges the
 * failure); 1: nothing more to do (the process is gone, or the live copy
 * is given up). Under lv->mu. */
static int copy_on_fault_locked(struct ckpt *c, struct lproc *lp, struct lext *x)
{
	struct live *lv = c->live;
	struct img_extent *e = x->e;
	uint64_t len = img_extent_len(e);
	struct pagesw_buf *b = handler_buf_locked(c, e);
	if (!b)
		return -ENOBUFS;
	char *dst = (char *)b->data + b->len;
	struct cproc *p = &c->p[lp->proc];
	int rc = ckpt_read_mem(p, e->addr, dst, len);
	if (rc < 0 && (rc == -ESRCH || ckpt_proc_dead(p))) {
		lp->gone = true;
		return 1;
	}
	if (rc < 0)
		return -ENOBUFS;
	rc = commit_locked(c, lp, x, e, dst);
	if (rc == -EAGAIN)
		return rc;
	if (rc < 0)
		return 1;
	pagesw_add_sum(b, &e->crc, b->len, len);
	b->len += len;
	lv->fault_copied += len;
	return 0;
}

int ckpt_live_commit(struct ckpt *c, size_t proc, struct img_extent *e, void *dst)
{
	struct live *lv = c->live;
	struct lproc *lp = &lv->lp[lv->lp_of[proc]];
	pthread_mutex_lock(&lv->mu);
	struct lext *x = find_lext(lp, e->addr);
	int rc = lv->lost[0]	  ? -ECANCELED
		 : x && x->copied ? -EALREADY
				  : commit_locked(c, lp, x, e, dst);
	if (lv->lost[0])
		rc = -ECANCELED;
	pthread_mutex_unlock(&lv->mu);
	return rc;
}

bool ckpt_live_taken(struct ckpt *c, size_t proc, const struct img_extent *e)
{
	struct live *lv = c->live;
	struct lproc *lp = &lv->lp[lv->lp_of[proc]];
	pthread_mutex_lock(&lv->mu);
	struct lext *x = find_lext(lp, e->addr);
	bool taken = x && x->copied;
	pthread_mutex_unlock(&lv->mu);
	return taken;
}

struct pagesw_buf *ckpt_live_get_buf(struct ckpt *c)
{
	struct live *lv = c->live;
	struct pagesw_buf *b = pagesw_try_get(c->w);
	if (b)
		return b;
	pthread_mutex_lock(&lv->mu);
	queue_hbuf_locked(c);
	pthread_mutex_unlock(&lv->mu);
	return pagesw_get(c->w);
}

void ckpt_live_copied(struct ckpt *c)
{
	struct live *lv = c->live;
	pthread_mutex_lock(&lv->mu);
	lv->copy_done = true;
	queue_hbuf_locked(c);
	pthread_mutex_unlock(&lv->mu);
}

void ckpt_live_lose(struct ckpt *c, const char *fmt, ...)
{
	char why[WHY_LEN];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	pthread_mutex_lock(&c->live->mu);
	set_lost_locked(c->live, "%s", why);
	pthread_mutex_unlock(&c->live->mu);
}

int ckpt_live_wait(struct ckpt *c)
{
	struct timespec ts = {0, 200 * 1000};
	nanosleep(&ts, NULL);
	pthread_mutex_lock(&c->live->mu);
	bool lost = c->live->lost[0];
	pthread_mutex_unlock(&c->live->mu);
	return lost ? -ECANCELED : 0;
}

void ckpt_live_why_lost(const struct ckpt *c, char *buf, size_t len)
{
	struct live *lv = c->live;
	pthread_mutex_lock(&lv->mu);
	snprintf(buf, len, "%s", lv->lost[0] ? lv->lost : "the live copy failed");
	pthread_mutex_unlock(&lv->mu);
}

json_t *ckpt_live_json(const struct ckpt *c)
{
	struct live *lv = c->live;
	pthread_mutex_lock(&lv->mu);
	json_t *o = json_pack("{s:b, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:O}", "live", 1,
			      "live_bytes", (json_int_t)lv->live_bytes, "paused_bytes",
			      (json_int_t)lv->paused_bytes, "write_faults", (json_int_t)lv->faults,
			      "fault_copied_bytes", (json_int_t)lv->fault_copied, "kept_pages",
			      (json_int_t)lv->kept, "events", (json_int_t)lv->events, "retries",
			      (json_int_t)lv->retries, "setup_ns", (json_int_t)lv->setup_ns,
			      "protect_ns", (json_int_t)lv->protect_ns, "paused", lv->paused_why);
	json_object_set(o, "kernel_kept", lv->held);
	if (lv->n_arm)
		json_object_set_new(
		    o, "armed",
		    json_pack("{s:I, s:I, s:I, s:I, s:I, s:I}", "stop_ns",
			      (json_int_t)lv->arm_stop_ns, "protect_ns", (json_int_t)lv->arm_ns,
			      "bytes", (json_int_t)lv->arm_bytes, "write_faults",
			      (json_int_t)lv->arm_faults, "events", (json_int_t)lv->arm_events,
			      "reprotected_bytes", (json_int_t)lv->reprotect_bytes));
	pthread_mutex_unlock(&lv->mu);
	return o;
}

static void free_lexts_locked(struct live *lv, struct lproc *lp)
{
	for (size_t k = 0; k < lp->n; k++)
		free_saved(lv, &lp->x[k]);
	lp->n = 0;
}

void ckpt_live_forget(struct ckpt *c, size_t proc)
{
	struct live *lv = c->live;
	if (!lv || lv->lp_of[proc] < 0)
		return;
	pthread_mutex_lock(&lv->mu);
	struct lproc *lp = &lv->lp[lv->lp_of[proc]];
	free_lexts_locked(lv, lp);
	lp->gone = true;
	pthread_mutex_unlock(&lv->mu);
}

/* ---- --evict: what may be dropped --------------------------------------- */

void ckpt_live_quiesce(struct ckpt *c)
{
	struct live *lv = c->live;
	if (!lv)
		return;
	if (lv->started) {
		uint64_t one = 1;
		if (write(lv->stopfd, &one, sizeof(one)) < 0)
			log_job_warn("checkpoint --live: stopping the fault handler: %s",
				     strerror(errno));
		pthread_join(lv->handler, NULL);
		lv->started = false;
	}
	/* Every thread is stopped: what is queued is all there will be. A
	 * fault read here is taken as the handler would (its window stays
	 * resident); one never read waits until the uffd is closed, then
	 * runs into the evicted page and is served from the image. */
	struct fault *q = xcalloc(PENDING, sizeof(*q));
	for (size_t i = 0; i < lv->n_lp; i++) {
		struct uffd_msg m[MSG_BATCH];
		ssize_t got;
		size_t nq = 0;
		while ((got = read(lv->lp[i].uffd, m, sizeof(m))) > 0)
			for (ssize_t k = 0; k < got / (ssize_t)sizeof(m[0]); k++)
				take(c, i, &m[k], q, &nq);
	}
	free(q);
}

/* lp's marked ranges, sorted and merged (for img_ranges_subtract). */
static void merge_taint(struct lproc *lp)
{
	lp->n_taint = as_ranges_merge(lp->taint, lp->n_taint);
}

int ckpt_live_evict_view(struct ckpt *c, size_t proc, struct img_proc *out, uint64_t *clean,
			 uint64_t *written)
{
	struct live *lv = c->live;
	if (!lv || lv->lp_of[proc] < 0)
		return -ENOENT;
	struct lproc *lp = &lv->lp[lv->lp_of[proc]];
	if (lp->gone)
		return -ESRCH;
	for (size_t k = 0; k < lp->n; k++)
		if (!lp->x[k].copied)
			return -EAGAIN; /* the copy did not finish: never here */
	merge_taint(lp);
	const struct img_proc *ip = ckpt_iproc(c, proc);
	struct pagemap pm;
	int rc = pagemap_open(c->p[proc].pt.pid, c->mv->feat.pagemap_scan, &pm);
	if (rc < 0)
		return rc;
	*out = *ip;
	out->r = xcalloc(MV_MAX(ip->n_r, 1), sizeof(*out->r));
	out->cap_r = MV_MAX(ip->n_r, 1);
	struct as_range *runs = NULL, *ok = NULL;
	size_t n = 0, cap = 0, n_ok = 0, cap_ok = 0;
	for (size_t k = 0; k < ip->n_r && rc == 0; k++) {
		const struct img_region *r = &ip->r[k];
		out->r[k] = *r;
		out->r[k].ext = (struct img_extents){0};
		if (!lp->live_r[k])
			continue;
		/* Present and still write-protected: not written since the
		 * pause, so its page in the image is its content now; and
		 * outside every range a layout event touched. */
		n = n_ok = 0;
		rc = pagemap_runs(&pm, r->start, r->end, PAGE_IS_PRESENT, PAGE_IS_WRITTEN, &runs,
				  &n, &cap);
		for (size_t i = 0; i < n; i++)
			img_ranges_subtract(lp->taint, lp->n_taint, runs[i].start, runs[i].end, &ok,
					    &n_ok, &cap_ok);
		img_extents_within(&r->ext, ok, n_ok, &out->r[k].ext);
		uint64_t total = 0, kept = 0;
		for (size_t x = 0; x < r->ext.n; x++)
			total += img_extent_len(&r->ext.v[x]);
		for (size_t x = 0; x < out->r[k].ext.n; x++)
			kept += img_extent_len(&out->r[k].ext.v[x]);
		*clean += kept;
		*written += total - kept;
	}
	free(runs);
	free(ok);
	pagemap_close(&pm);
	if (rc < 0)
		ckpt_live_view_free(out);
	return rc;
}

void ckpt_live_view_free(struct img_proc *v)
{
	for (size_t k = 0; v->r && k < v->n_r; k++)
		free(v->r[k].ext.v);
	free(v->r);
	v->r = NULL;
	v->n_r = 0;
}

void ckpt_live_stop(struct ckpt *c)
{
	struct live *lv = c->live;
	if (!lv)
		return;
	arm_quiesce(lv);
	for (size_t k = 0; k < lv->n_arm; k++) {
		if (lv->arm[k].uffd >= 0)
			close(lv->arm[k].uffd);
		free(lv->arm[k].cov);
		free(lv->arm[k].touched);
	}
	free(lv->arm);
	if (lv->started) {
		uint64_t one = 1;
		if (write(lv->stopfd, &one, sizeof(one)) < 0)
			log_job_warn("checkpoint --live: stopping the fault handler: %s",
				     strerror(errno));
		pthread_join(lv->handler, NULL);
	}
	/* The copy ended early (failed, cancelled): the handler's buffer is
	 * given back unwritten. */
	if (lv->hbuf && c->w) {
		lv->hbuf->len = 0;
		queue_hbuf_locked(c);
	}
	/* Closing a uffd lifts its write protection and wakes every waiter
	 * (fs/userfaultfd.c userfaultfd_release). */
	for (size_t i = 0; i < lv->n_lp; i++) {
		struct lproc *lp = &lv->lp[i];
		close(lp->uffd);
		free_lexts_locked(lv, lp);
		free(lp->x);
		free(lp->live_r);
		free(lp->taint);
	}
	if (lv->stopfd >= 0)
		close(lv->stopfd);
	json_decref(lv->paused_why);
	json_decref(lv->held);
	for (size_t i = 0; i < lv->n_pool; i++)
		free(lv->pool[i]);
	pthread_mutex_destroy(&lv->mu);
	free(lv->lp);
	free(lv->lp_of);
	free(lv);
	c->live = NULL;
}
