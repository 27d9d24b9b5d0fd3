/* `checkpoint --evict`: the step between a durable image and the resume,
 * every thread still stopped (supervisor/checkpoint_job.h, evict.h). */
#include "supervisor/checkpoint_job.h"
#include "common/log.h"
#include "supervisor/evict.h"

#include <stdio.h>
#include <string.h>

int ckpt_evict_all(struct ckpt *c, struct evict_stats *st)
{
	job_progress(c->j, "evicting", c->done, c->total);
	for (size_t i = 0; i < c->n; i++) {
		struct cproc *p = &c->p[i];
		if (p->pt.gone || p->img < 0 || p->died || ckpt_proc_dead(p))
			continue;
		char err[512];
		int rc = evict_proc_stopped(&p->pt, ckpt_iproc(c, i), c->req->dir.dir, c->im.id, st,
					    err, sizeof(err));
		if (rc < 0)
			return ckpt_fail(c, rc, CKPT_E_EVICT,
					 "%s; the image at %s is complete and the program keeps "
					 "its memory",
					 err, c->req->dir.dir);
	}
	log_info("evict: %llu regions, %llu bytes dropped (%llu left resident, %llu shared)",
		 (unsigned long long)st->regions, (unsigned long long)st->bytes,
		 (unsigned long long)st->kept_regions, (unsigned long long)st->shared_regions);
	return 0;
}
