/* `checkpoint --evict`: the step between a durable image and the resume,
 * every thread still stopped (supervisor/checkpoint/job.h, supervisor/reload/evict.h). */
#include "supervisor/checkpoint/job.h"
#include "common/log.h"
#include "common/util.h"
#include "supervisor/kernel/pagemap.h"
#include "supervisor/reload/evict.h"

#include <linux/kcmp.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* A thread of p that waits in vfork (ptrace_classify_laggard). */
static bool in_vfork(const struct cproc *p)
{
	for (size_t k = 0; k < p->pt.n; k++)
		if (p->pt.t[k].state == PT_BLOCKED)
			return true;
	return false;
}

static bool same_mm(pid_t a, pid_t b)
{
	return a != b && syscall(SYS_kcmp, a, b, KCMP_VM, 0, 0) == 0;
}

/* Why process i is not to be evicted, in why, or false. A vfork parent
 * sleeps in vfork until its child execs or exits, and the child runs on
 * the parent's memory until then: the parent has no thread that can run
 * an injected call, and an evict through the child would hand the
 * parent's memory to a userfaultfd made in a process that is about to
 * exec. Both keep their memory; the next evict, once the child has
 * exec'd, takes it. */
static bool vfork_skip(struct ckpt *c, size_t i, char *why, size_t len)
{
	struct cproc *p = &c->p[i];
	for (size_t q = 0; q < c->n; q++) {
		struct cproc *o = &c->p[q];
		if (q == i || o->pt.gone || !same_mm(p->pt.pid, o->pt.pid))
			continue;
		if (in_vfork(p)) {
			snprintf(why, len,
				 "waits in vfork for its child %d to exec or exit, and they share "
				 "this memory until then: left resident (evict again once the "
				 "child has exec'd)",
				 o->pt.pid);
			return true;
		}
		if (in_vfork(o)) {
			snprintf(
			    why, len,
			    "is a vfork child that has not exec'd yet: it runs on the memory of "
			    "its parent %d, which waits for it: left resident (evict again "
			    "once it has exec'd)",
			    o->pt.pid);
			return true;
		}
	}
	if (in_vfork(p) && !ptrace_stopped_count(&p->pt)) {
		snprintf(why, len,
			 "waits in vfork for a child that has not exec'd yet: no thread of it can "
			 "run a system call; left resident (evict again once the child has "
			 "exec'd)");
		return true;
	}
	return false;
}

static void skip(struct ckpt *c, size_t i, const char *why)
{
	if (!c->evict_skipped)
		c->evict_skipped = json_array();
	json_array_append_new(c->evict_skipped,
			      json_pack("{s:i, s:s}", "pid", c->p[i].pt.pid, "reason", why));
	log_info("evict: process %d %s", c->p[i].pt.pid, why);
}

/* src (process i's image record, or a view of it) limited to the pages
 * this process maps alone, in *out (ckpt_live_view_free) and *whole (per
 * region: may be dropped whole; only when src is the record itself and
 * nothing in the region is shared). A page shared copy-on-write with
 * another process after a fork stays: a reload gives each process a copy
 * of its own (UFFDIO_COPY allocates), so evicting it would multiply the
 * tree's memory by the number of processes sharing it; resident, it is
 * counted once (docs/reload.md, "Fork trees"). */
static int exclusive_view(struct ckpt *c, size_t i, const struct img_proc *src, bool is_record,
			  struct img_proc *out, bool **whole, struct evict_stats *st)
{
	struct pagemap pm;
	int rc = pagemap_open(c->p[i].pt.pid, false, &pm);
	if (rc < 0)
		return rc;
	*out = *src;
	out->r = xcalloc(MV_MAX(src->n_r, 1), sizeof(*out->r));
	out->cap_r = MV_MAX(src->n_r, 1);
	*whole = xcalloc(MV_MAX(src->n_r, 1), sizeof(**whole));
	struct as_range *runs = NULL;
	size_t n = 0, cap = 0;
	for (size_t k = 0; k < src->n_r && rc == 0; k++) {
		const struct img_region *r = &src->r[k];
		out->r[k] = *r;
		out->r[k].ext = (struct img_extents){0};
		if (!evict_region_evictable(r))
			continue;
		n = 0;
		rc = pagemap_exclusive_runs(&pm, r->start, r->end, &runs, &n, &cap);
		img_extents_within(&r->ext, runs, n, &out->r[k].ext);
		uint64_t total = 0, mine = 0;
		for (size_t x = 0; x < r->ext.n; x++)
			total += img_extent_len(&r->ext.v[x]);
		for (size_t x = 0; x < out->r[k].ext.n; x++)
			mine += img_extent_len(&out->r[k].ext.v[x]);
		(*whole)[k] = is_record && mine == total;
		st->cow_bytes += total - mine;
	}
	free(runs);
	pagemap_close(&pm);
	if (rc < 0) {
		ckpt_live_view_free(out);
		free(*whole);
		*whole = NULL;
	}
	return rc;
}

/* Evict every process we hold; views (or NULL: each process's image
 * record) limit each to the pages it may lose, and each is limited again
 * to the pages it maps alone (exclusive_view). */
static int evict_each(struct ckpt *c, struct evict_stats *st, const struct img_proc *views,
		      const bool *have)
{
	job_progress(c->j, "evicting", c->done, c->total);
	for (size_t i = 0; i < c->n; i++) {
		struct cproc *p = &c->p[i];
		if (p->pt.gone || p->img < 0 || p->died || ckpt_proc_dead(p))
			continue;
		if (views && !have[i])
			continue;
		char err[512];
		if (vfork_skip(c, i, err, sizeof(err))) {
			skip(c, i, err);
			continue;
		}
		struct img_proc v;
		bool *whole;
		int rc = exclusive_view(c, i, views ? &views[i] : ckpt_iproc(c, i), !views, &v,
					&whole, st);
		if (rc < 0) {
			snprintf(err, sizeof(err),
				 "reading which pages it shares (pagemap): %s: left resident",
				 strerror(-rc));
			skip(c, i, err);
			continue;
		}
		struct mv_err e = {0};
		rc = evict_proc_stopped(c->mv->evict, &p->pt, &c->im, &v, c->req->dir.dir, whole,
					st, &e);
		ckpt_live_view_free(&v);
		free(whole);
		if (rc < 0)
			return ckpt_fail(c, rc, MV_E_EVICT_FAILED,
					 "%s; the image at %s is complete and the program keeps "
					 "its memory",
					 e.msg, c->req->dir.dir);
	}
	log_info("evict: %llu regions, %llu bytes dropped (%llu left resident, %llu shared, %llu "
		 "bytes shared copy-on-write kept)",
		 (unsigned long long)st->regions, (unsigned long long)st->bytes,
		 (unsigned long long)st->kept_regions, (unsigned long long)st->shared_regions,
		 (unsigned long long)st->cow_bytes);
	return 0;
}

int ckpt_evict_all(struct ckpt *c, struct evict_stats *st)
{
	return evict_each(c, st, NULL, NULL);
}

int ckpt_evict_live(struct ckpt *c, struct evict_stats *st, struct live_evict_times *t,
		    uint64_t *clean, uint64_t *written)
{
	uint64_t t0 = mv_now_ns();
	/* The program ran since the image's instant: stop it again, every
	 * thread and every process it forked meanwhile. A process that
	 * exited since is recorded, not a failure: the image is complete. */
	for (size_t i = 0; i < c->n; i++) {
		ptrace_proc_forget(&c->p[i].pt);
		c->p[i].requested = false;
	}
	job_progress(c->j, "stopping", c->done, c->total);
	int rc = ckpt_stop_all(c);
	ckpt_live_quiesce(c);
	uint64_t t1 = mv_now_ns();
	struct img_proc *views = xcalloc(MV_MAX(c->n, 1), sizeof(*views));
	bool *have = xcalloc(MV_MAX(c->n, 1), sizeof(*have));
	for (size_t i = 0; rc == 0 && i < c->n; i++) {
		struct cproc *p = &c->p[i];
		if (p->pt.gone || p->img < 0 || p->died || ckpt_proc_dead(p))
			continue;
		int v = ckpt_live_evict_view(c, i, &views[i], clean, written);
		have[i] = v == 0;
		if (v == -ENOENT)
			skip(c, i,
			     "was copied during the pause, so what it wrote since is not known: "
			     "left resident");
		else if (v < 0 && v != -ESRCH) {
			char why[160];
			snprintf(why, sizeof(why),
				 "reading which pages it wrote since (pagemap): %s: left resident",
				 strerror(-v));
			skip(c, i, why);
		}
	}
	uint64_t t2 = mv_now_ns();
	/* Closing the uffds lifts the write protection: nothing runs. */
	ckpt_live_stop(c);
	uint64_t t3 = mv_now_ns();
	if (rc == 0)
		rc = evict_each(c, st, views, have);
	*t = (struct live_evict_times){.stop_ns = t1 - t0,
				       .scan_ns = t2 - t1,
				       .unprotect_ns = t3 - t2,
				       .drop_ns = mv_now_ns() - t3};
	for (size_t i = 0; i < c->n; i++)
		if (have[i])
			ckpt_live_view_free(&views[i]);
	free(views);
	free(have);
	return rc;
}
