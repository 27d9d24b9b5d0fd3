/* The registry of evicted spaces and objects (supervisor/reload/space.h). */
#include "supervisor/reload/space.h"
#include "common/log.h"
#include "common/util.h"
#include "supervisor/reload/shm.h"
#include "supervisor/supervise/mv.h"
#include "supervisor/supervise/reaper.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

struct evict *evict_new(struct mv *mv)
{
	struct evict *reg = xcalloc(1, sizeof(*reg));
	reg->mv = mv;
	pthread_mutex_init(&reg->mu, NULL);
	return reg;
}

struct evspace *space_new(struct evict *reg)
{
	struct evspace *s = xcalloc(1, sizeof(*s));
	s->reg = reg;
	pthread_mutex_init(&s->mu, NULL);
	/* Writers first: a worker waiting to read the uffd must not starve
	 * behind a stream of copies (its event holds a program thread). */
	pthread_rwlockattr_t ra;
	pthread_rwlockattr_init(&ra);
	pthread_rwlockattr_setkind_np(&ra, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(&s->lay, &ra);
	pthread_rwlockattr_destroy(&ra);
	s->refs = 1;
	s->uffd = s->pagesfd = s->directfd = s->pidfd = -1;
	s->stopfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	return s;
}

static void space_free(struct evspace *s)
{
	if (s->keep_id)
		reaper_release_fd(s->reg->mv->reaper_wr, s->keep_id);
	if (s->uffd >= 0)
		close(s->uffd); /* userfaultfd_release: every range unregistered */
	if (s->pagesfd >= 0)
		close(s->pagesfd);
	if (s->directfd >= 0)
		close(s->directfd);
	if (s->stopfd >= 0)
		close(s->stopfd);
	if (s->pidfd >= 0)
		close(s->pidfd);
	evict_thp_free(&s->thp);
	pthread_mutex_destroy(&s->mu);
	pthread_rwlock_destroy(&s->lay);
	free(s->wipe);
	free(s->dir);
	free(s->ext);
	free(s->sums);
	free(s->ch);
	free(s);
}

/* Under reg->mu: what a space leaving the list served stays counted (a
 * fault its last worker serves after this is not). */
static void count_gone_locked(struct evspace *s)
{
	struct evict_totals *g = &s->reg->gone;
	pthread_mutex_lock(&s->mu);
	g->loaded += s->loaded;
	g->faults += s->faults;
	hist_merge(&g->lat, &s->lat);
	pthread_mutex_unlock(&s->mu);
}

static void unlink_locked(struct evspace *s)
{
	for (struct evspace **p = &s->reg->head; *p; p = &(*p)->next)
		if (*p == s) {
			count_gone_locked(s);
			*p = s->next;
			s->linked = false;
			s->refs--;
			return;
		}
}

void evict_put(struct evspace *s)
{
	struct evict *reg = s->reg;
	pthread_mutex_lock(&reg->mu);
	bool last = --s->refs == 0;
	pthread_mutex_unlock(&reg->mu);
	if (last)
		space_free(s);
}

void space_get_locked(struct evspace *s)
{
	s->refs++;
}

void space_link(struct evspace *s)
{
	pthread_mutex_lock(&s->reg->mu);
	s->next = s->reg->head;
	s->reg->head = s;
	s->linked = true;
	s->refs++;
	pthread_mutex_unlock(&s->reg->mu);
}

/* Stop the workers (they drop their references as they go). */
void space_stop(struct evspace *s)
{
	pthread_mutex_lock(&s->reg->mu);
	s->stopping = true;
	if (s->linked)
		unlink_locked(s);
	pthread_mutex_unlock(&s->reg->mu);
	uint64_t one = 1;
	if (write(s->stopfd, &one, sizeof(one)) < 0)
		log_warn("evict: waking the workers of process %d: %s", s->pid, strerror(errno));
}

/* Hold a duplicate of the space's uffd in the reaper (reaper_hold_fd). */
int space_keep_uffd(struct evspace *s)
{
	uint64_t id = __atomic_add_fetch(&s->reg->next_keep_id, 1, __ATOMIC_RELAXED);
	int rc = reaper_hold_fd(s->reg->mv->reaper_wr, s->uffd, id);
	if (rc == 0)
		s->keep_id = id;
	return rc;
}

void space_mark_dead(struct evspace *s, const char *why)
{
	if (!s->dead)
		log_info("evict: process %d: %s; its pending pages are dropped", evict_space_pid(s),
			 why);
	s->dead = true;
	space_stop(s);
}

void evict_add_object(struct evict *reg, struct evobj *o)
{
	evshm_get(o);
	pthread_mutex_lock(&reg->mu);
	reg->objs = xrealloc(reg->objs, (reg->n_objs + 1) * sizeof(*reg->objs));
	reg->objs[reg->n_objs++] = o;
	pthread_mutex_unlock(&reg->mu);
}

size_t evict_objects_of(struct evict *reg, const char *id, struct evobj ***out)
{
	pthread_mutex_lock(&reg->mu);
	struct evobj **v = xcalloc(MV_MAX(reg->n_objs, 1), sizeof(*v));
	size_t n = 0;
	for (size_t i = 0; i < reg->n_objs; i++)
		if (strcmp(evshm_id(reg->objs[i]), id) == 0) {
			evshm_get(reg->objs[i]);
			v[n++] = reg->objs[i];
		}
	pthread_mutex_unlock(&reg->mu);
	*out = v;
	return n;
}

void evict_drop_object(struct evict *reg, struct evobj *o)
{
	bool found = false;
	pthread_mutex_lock(&reg->mu);
	for (size_t i = 0; i < reg->n_objs && !found; i++)
		if (reg->objs[i] == o) {
			reg->objs[i] = reg->objs[--reg->n_objs];
			found = true;
		}
	pthread_mutex_unlock(&reg->mu);
	if (found)
		evshm_put(o);
}

void evict_drop_idle(struct evict *reg, const char *id)
{
	struct evspace **v;
	struct evobj **objs;
	size_t no = evict_objects_of(reg, id, &objs);
	for (size_t i = 0; i < no; i++)
		evshm_put(objs[i]);
	free(objs);
	size_t n = evict_spaces_of(reg, id, &v);
	for (size_t i = 0; i < n; i++) {
		uint64_t owed, loaded;
		evict_space_counts(v[i], &owed, &loaded);
		if (!no && owed == 0 && loaded == 0)
			space_stop(v[i]);
		evict_put(v[i]);
	}
	free(v);
}

/* The evicted object a shared mapping v maps (a reference), or NULL. */
struct evobj *space_object_of(struct evict *reg, const struct proc_vma *v)
{
	struct evobj *o = NULL;
	if (!v->shared)
		return NULL;
	pthread_mutex_lock(&reg->mu);
	for (size_t i = 0; i < reg->n_objs && !o; i++)
		if (evshm_is(reg->objs[i], proc_vma_dev(v), v->inode))
			o = reg->objs[i];
	if (o)
		evshm_get(o);
	pthread_mutex_unlock(&reg->mu);
	return o;
}

bool evict_some_image(struct evict *reg, char *id, size_t idlen, char *dir, size_t dirlen)
{
	pthread_mutex_lock(&reg->mu);
	struct evspace *s = reg->head;
	if (s) {
		snprintf(id, idlen, "%s", s->id);
		snprintf(dir, dirlen, "%s", s->dir);
	}
	pthread_mutex_unlock(&reg->mu);
	return s != NULL;
}

size_t evict_spaces_of(struct evict *reg, const char *id, struct evspace ***out)
{
	size_t n = 0, cap = 4;
	struct evspace **v = xcalloc(cap, sizeof(*v));
	pthread_mutex_lock(&reg->mu);
	for (struct evspace *s = reg->head; s; s = s->next) {
		if (strcmp(s->id, id) != 0 || s->dead)
			continue;
		if (n == cap)
			v = xrealloc(v, (cap *= 2) * sizeof(*v));
		space_get_locked(s);
		v[n++] = s;
	}
	pthread_mutex_unlock(&reg->mu);
	*out = v;
	return n;
}

struct evspace *space_find(struct evict *reg, pid_t tgid)
{
	struct evspace *found = NULL;
	pthread_mutex_lock(&reg->mu);
	for (struct evspace *s = reg->head; s && !found; s = s->next)
		if (s->tgid == tgid && !s->dead && !s->stopping) {
			space_get_locked(s);
			found = s;
		}
	pthread_mutex_unlock(&reg->mu);
	return found;
}

pid_t evict_space_pid(const struct evspace *s)
{
	return s->pid ? s->pid : s->parent;
}

void evict_space_counts(struct evspace *s, uint64_t *owed, uint64_t *loaded)
{
	pthread_mutex_lock(&s->mu);
	*owed = s->owed;
	*loaded = s->loaded;
	pthread_mutex_unlock(&s->mu);
}

void evict_space_faults(struct evspace *s, void *hist, uint64_t *faults, uint64_t *bytes,
			uint64_t *cpu_ns)
{
	pthread_mutex_lock(&s->mu);
	hist_merge(hist, &s->lat);
	*faults += s->faults;
	*bytes += s->loaded;
	pthread_mutex_unlock(&s->mu);
	*cpu_ns += __atomic_load_n(&s->cpu_ns, __ATOMIC_RELAXED);
}

json_t *evict_status_json(struct evict *reg)
{
	json_t *a = json_array();
	pthread_mutex_lock(&reg->mu);
	for (struct evspace *s = reg->head; s; s = s->next) {
		pthread_mutex_lock(&s->mu);
		json_array_append_new(
		    a, json_pack("{s:i, s:i, s:s, s:s, s:I, s:I, s:I, s:I, s:I}", "pid", s->pid,
				 "parent", s->parent, "image", s->dir, "id", s->id, "owed_bytes",
				 (json_int_t)s->owed, "loaded_bytes", (json_int_t)s->loaded,
				 "faults", (json_int_t)s->faults, "fault_p50_ns",
				 (json_int_t)hist_quantile(&s->lat, 0.5), "fault_p99_ns",
				 (json_int_t)hist_quantile(&s->lat, 0.99)));
		pthread_mutex_unlock(&s->mu);
	}
	pthread_mutex_unlock(&reg->mu);
	return a;
}

void evict_totals(struct evict *reg, struct evict_totals *t)
{
	pthread_mutex_lock(&reg->mu);
	*t = reg->gone;
	t->evicted = reg->evicted;
	for (struct evspace *s = reg->head; s; s = s->next) {
		pthread_mutex_lock(&s->mu);
		t->spaces++;
		t->owed += s->owed;
		t->loaded += s->loaded;
		t->faults += s->faults;
		hist_merge(&t->lat, &s->lat);
		pthread_mutex_unlock(&s->mu);
	}
	pthread_mutex_unlock(&reg->mu);
}
