/* The uffd events of an evicted space: fork, remap, remove, unmap
 * (supervisor/reload/space.h). */
#include "supervisor/reload/space.h"
#include "common/log.h"
#include "common/util.h"
#include "supervisor/kernel/procfs.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

/* fork: the child's mm has the parent's registered ranges, with a uffd of
 * its own, and misses the pages the parent missed when it forked. It owes
 * every page the parent's image map still covers (pages the parent had
 * loaded are present in the child too: copying them fails with EEXIST),
 * except where fork gives the child something else (kernel/fork.c
 * dup_mmap): MADV_DONTFORK regions are not in the child at all, and
 * MADV_WIPEONFORK regions are empty there (zeros). Those are read from the
 * parent's smaps while the parent waits in fork for this event to be
 * read; a parent whose pid is not known yet (a fork child that has not
 * faulted) uses the WIPEONFORK regions it inherited. Called under s->lay
 * (write), in the order of the events. Returns the child's space, in the
 * registry, with a reference for the caller. */
static struct evspace *on_fork(struct evspace *s, int ufd)
{
	struct evspace *c = space_new(s->reg);
	c->uffd = ufd;
	c->features = s->features;
	c->pagesfd = fcntl(s->pagesfd, F_DUPFD_CLOEXEC, 0);
	c->directfd = s->directfd >= 0 ? fcntl(s->directfd, F_DUPFD_CLOEXEC, 0) : -1;
	c->parent = s->pid ? s->pid : s->parent;
	c->probe = s->probe;
	c->shared = s->shared; /* fork copies the registered shared mappings */
	snprintf(c->id, sizeof(c->id), "%s", s->id);
	c->dir = xstrdup(s->dir);
	struct as_range *dc = NULL, *wf = NULL;
	size_t n_dc = 0, n_wf = 0;
	if (!s->tgid || procfs_fork_flags(s->tgid, &dc, &n_dc, &wf, &n_wf) < 0) {
		n_wf = s->n_wipe;
		wf = n_wf ? xmalloc(n_wf * sizeof(*wf)) : NULL;
		if (n_wf)
			memcpy(wf, s->wipe, n_wf * sizeof(*wf));
	}
	pthread_mutex_lock(&s->mu);
	c->n_ext = s->n_ext;
	c->ext = xcalloc(MV_MAX(c->n_ext, 1), sizeof(*c->ext));
	for (size_t i = 0; i < c->n_ext; i++)
		c->ext[i] = (struct ev_ext){s->ext[i].off, s->ext[i].pages, s->ext[i].sum0, {0}};
	c->n_sums = s->n_sums;
	c->sums = xmalloc(MV_MAX(c->n_sums, 1) * sizeof(*c->sums));
	memcpy(c->sums, s->sums, c->n_sums * sizeof(*c->sums));
	c->n_ch = c->cap_ch = s->n_ch;
	c->ch = xcalloc(MV_MAX(c->n_ch, 1), sizeof(*c->ch));
	memcpy(c->ch, s->ch, s->n_ch * sizeof(*s->ch));
	c->split = s->split;
	pthread_mutex_unlock(&s->mu);
	chunks_drop_ranges(c, dc, n_dc);
	chunks_drop_ranges(c, wf, n_wf);
	for (size_t i = 0; i < c->n_ch; i++)
		c->owed += (uint64_t)c->ch[i].n * PG;
	c->wipe = wf;
	c->n_wipe = n_wf;
	free(dc);
	int krc = space_keep_uffd(c);
	if (krc < 0 && krc != -ENOTCONN)
		log_warn("evict: the reaper cannot hold the userfaultfd of process %d's fork "
			 "child: %s",
			 c->parent, strerror(-krc));
	space_link(c);
	return c;
}

/* Under s->lay (write). */
struct evspace *uevent_apply(struct evspace *s, const struct uffd_msg *m)
{
	switch (m->event) {
	case UFFD_EVENT_FORK:
		return on_fork(s, (int)m->arg.fork.ufd);
	case UFFD_EVENT_REMAP:
		s->layout_gen++;
		pthread_mutex_lock(&s->mu);
		chunks_move_locked(s, m->arg.remap.from, m->arg.remap.to, m->arg.remap.len);
		evict_thp_forget(&s->thp, m->arg.remap.from, m->arg.remap.from + m->arg.remap.len);
		evict_thp_forget(&s->thp, m->arg.remap.to, m->arg.remap.to + m->arg.remap.len);
		pthread_mutex_unlock(&s->mu);
		return NULL;
	case UFFD_EVENT_REMOVE:
	case UFFD_EVENT_UNMAP:
		/* While evicting, every thread of the program is stopped: a
		 * REMOVE is our own MADV_DONTNEED. evicting is cleared under
		 * s->lay (write) once the last of them is applied, so this
		 * test is exact. */
		if (m->event == UFFD_EVENT_REMOVE && s->evicting)
			return NULL;
		s->layout_gen++;
		pthread_mutex_lock(&s->mu);
		chunks_drop_locked(s, m->arg.remove.start, m->arg.remove.end);
		evict_thp_forget(&s->thp, m->arg.remove.start, m->arg.remove.end);
		pthread_mutex_unlock(&s->mu);
		return NULL;
	default:
		return NULL;
	}
}
