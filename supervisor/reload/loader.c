/* The reload job's loader: read threads and installs
 * (supervisor/reload/evict.h, evict_load_all). */
#include "supervisor/reload/space.h"
#include "common/fault.h"
#include "common/log.h"
#include "common/util.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Chunk i of s now, if it is still *c (under s->lay, read). */
static bool chunk_still(struct evspace *s, size_t i, const struct ev_chunk *c)
{
	pthread_mutex_lock(&s->mu);
	bool same = i < s->n_ch && s->ch[i].addr == c->addr && s->ch[i].ext == c->ext &&
		    s->ch[i].first == c->first && s->ch[i].n == c->n;
	pthread_mutex_unlock(&s->mu);
	return same;
}

/* Install every owed page of extent ext that is good in buf (ok),
 * wherever its chunks are now, LOAD_COPY_STEP pages under each hold of s->lay
 * (read): a worker that reads the uffd takes it for writing, and a fault
 * waited behind the copy of a whole extent. Between two holds the chunk
 * array may change: a chunk that is not what it was is left, its pages
 * owed, for the loader's next pick.
 *
 * Until a chunk is split, an extent is in one chunk at most: the one at
 * hint (where it was picked) if it is still there, found by address; only
 * otherwise are the chunks searched (a search per extent made a reload of
 * 16,384 one-page extents take 8 CPU-seconds, bench/README.md). */
static int copy_ext(struct evspace *s, uint32_t ext, uint64_t hint, const void *buf,
		    const uint64_t *ok, unsigned *enoent, uint64_t *searches)
{
	bool last = false;
	for (size_t i = 0;; i++) {
		pthread_rwlock_rdlock(&s->lay);
		pthread_mutex_lock(&s->mu);
		size_t h = i ? s->n_ch : chunks_index_at(s, hint);
		if (h < s->n_ch && !s->split && s->ch[h].ext == ext && s->ch[h].n) {
			i = h;
			last = true;
		} else {
			*searches += !i;
			while (i < s->n_ch && (s->ch[i].ext != ext || !s->ch[i].n))
				i++;
		}
		bool more = i < s->n_ch;
		struct ev_chunk c = more ? s->ch[i] : (struct ev_chunk){0};
		pthread_mutex_unlock(&s->mu);
		if (!more) {
			pthread_rwlock_unlock(&s->lay);
			return 0;
		}
		int rc = 0;
		const uint32_t end = c.first + c.n;
		for (uint32_t p = c.first, q; rc == 0 && p < end; p = q) {
			q = MV_MIN(p + LOAD_COPY_STEP, end);
			if (p > c.first) {
				pthread_rwlock_rdlock(&s->lay);
				if (!chunk_still(s, i, &c)) {
					pthread_rwlock_unlock(&s->lay);
					break;
				}
			}
			rc = pages_copy_runs(s, &c, p, q, buf, ok, enoent);
			pthread_rwlock_unlock(&s->lay);
		}
		if (rc < 0 || last)
			return rc < 0 ? rc : 0;
	}
}

/* Pages of extent ext that no registered vma holds (ENOENT,
 * mm/userfaultfd.c validate_dst_vma). Usually an event is on its way: the
 * program unmapped or moved the range (the kernel checks the vma before
 * it checks for a pending event), and the worker that reads it fixes the
 * map. Timeline: program mremaps X to Y (vma moved, REMAP queued);
 * loader's UFFDIO_COPY at X -> ENOENT; worker reads the event, the chunk
 * moves to Y. So wait for the workers; pages still unreachable after
 * 100 tries (100 ms at least), with no message waiting on the uffd, are
 * dropped: no access can fault on them through this uffd (a fork child's
 * MADV_DONTFORK range it made itself, for instance). */
static int range_gone(struct evspace *s, uint32_t ext)
{
	usleep(1000);
	if (++s->enoent < 100)
		return 1;
	pthread_rwlock_wrlock(&s->lay);
	/* An event waiting to be read may be the one that explains the
	 * ENOENT: let the workers have it first. */
	struct pollfd pfd = {.fd = s->uffd, .events = POLLIN};
	if (poll(&pfd, 1, 0) > 0) {
		pthread_rwlock_unlock(&s->lay);
		s->enoent = 50;
		return 1;
	}
	s->enoent = 0;
	pthread_mutex_lock(&s->mu);
	for (size_t i = 0; i < s->n_ch;) {
		struct ev_chunk c = s->ch[i];
		if (c.ext != ext || !chunks_owed_in_locked(s, &c)) {
			i++;
			continue;
		}
		log_debug("evict: process %d: %#llx-%#llx is no longer registered; dropped",
			  evict_space_pid(s), (unsigned long long)c.addr,
			  (unsigned long long)ev_chunk_end(&c));
		chunks_drop_locked(s, c.addr, ev_chunk_end(&c));
	}
	pthread_mutex_unlock(&s->mu);
	pthread_rwlock_unlock(&s->lay);
	return 1;
}

/* Install the good pages of extent e (read into buf, ok) wherever its
 * chunks are now; the second half of a load step. Returns 1, or -errno
 * as evict_load_all. */
static int install(struct evspace *s, uint32_t ext, uint64_t hint, const struct ev_ext *e,
		   const void *buf, const uint64_t *ok, int bad, uint64_t *searches)
{
	unsigned enoent;
	int rc;
	for (int tries = 0;; tries++) {
		enoent = 0;
		/* Failure point reload_copy_gone: as if the range was just
		 * unmapped. reload_install_none: from its hit on, nothing is
		 * installed and no error said, as a bug would (the
		 * no-progress guard of evict_load_all). */
		static bool install_none;
		if (fault_hit("reload_copy_gone"))
			enoent = 1, rc = 0;
		else if (__atomic_load_n(&install_none, __ATOMIC_RELAXED) ||
			 fault_hit("reload_install_none"))
			__atomic_store_n(&install_none, true, __ATOMIC_RELAXED), rc = 0;
		else
			rc = copy_ext(s, ext, hint, buf, ok, &enoent, searches);
		if (rc != -EAGAIN || tries > 10000)
			break;
		usleep(100); /* a worker reads the event that holds copies back */
	}
	if (rc == -ESRCH)
		space_mark_dead(s, "its address space is gone (exit or exec)");
	if (rc == 0 && bad) {
		/* The good pages are in; the bad ones stay owed, and a fault
		 * on one makes it pages_unservable (SIGBUS), never zeros. */
		log_error(
		    "evict: the image %s cannot give back pages of the extent at pages offset "
		    "%#llx: %s",
		    s->dir, (unsigned long long)e->off,
		    bad == -EBADMSG ? "a page fails its checksum" : strerror(-bad));
		return bad;
	}
	if (rc == 0 && enoent)
		return range_gone(s, ext);
	s->enoent = 0;
	return rc < 0 ? rc : 1;
}

/* The pipeline: reader threads read extents into slots, the caller's
 * thread installs them. */
#define LOAD_READERS 2 /* O_DIRECT reads in flight: one at a time left the disk idle */
#define LOAD_SLOTS   (2 * LOAD_READERS)
static uint64_t space_loaded(struct evspace *s)
{
	pthread_mutex_lock(&s->mu);
	uint64_t n = s->loaded;
	pthread_mutex_unlock(&s->mu);
	return n;
}

enum { SLOT_FREE, SLOT_READING, SLOT_FULL };

struct lslot {
	struct ev_chunk c;
	struct ev_ext e;
	uint64_t ok[EXT_WORDS];
	int bad;
	int state; /* under lpipe.mu */
	void *buf;
};

struct lpipe {
	struct evspace *s;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct lslot sl[LOAD_SLOTS];
	bool end;  /* a reader found nothing owed */
	bool stop; /* the installer gave up */
	const struct evict_load_ops *ops;
	void *arg;
	uint64_t reader_cpu_ns; /* under mu */
};

/* The next chunk with owed pages after the last one picked: the readers
 * move on while the installer works on what they read (a chunk picked
 * again before it was installed is read twice, and installed once). */
static bool pick(struct evspace *s, struct ev_chunk *c, struct ev_ext *e)
{
	if (!chunks_next_owed(s, c, e))
		return false;
	pthread_mutex_lock(&s->mu);
	s->cursor = s->n_ch ? (s->cursor + 1) % s->n_ch : 0;
	pthread_mutex_unlock(&s->mu);
	return true;
}

/* A slot in state from, or NULL. Under p->mu. */
static struct lslot *slot_in(struct lpipe *p, int from)
{
	for (int i = 0; i < LOAD_SLOTS; i++)
		if (p->sl[i].state == from)
			return &p->sl[i];
	return NULL;
}

static void *reader_main(void *arg)
{
	struct lpipe *p = arg;
	struct evspace *s = p->s;
	evict_boost_thread(EVICT_LOADER_NICE);
	for (;;) {
		pthread_mutex_lock(&p->mu);
		struct lslot *sl;
		while (!(sl = slot_in(p, SLOT_FREE)) && !p->stop && !p->end)
			pthread_cond_wait(&p->cv, &p->mu);
		bool go = sl && !p->stop && !p->end;
		if (go)
			sl->state = SLOT_READING;
		pthread_mutex_unlock(&p->mu);
		if (!go)
			break;
		p->ops->pace(p->arg);
		bool more = !s->dead && pick(s, &sl->c, &sl->e);
		if (more) {
			uint32_t a = 0, b = sl->e.pages;
			memset(sl->ok, 0, sizeof(sl->ok));
			sl->bad = 0;
			if (chunks_owed_span(s, sl->c.ext, &a, &b)) {
				sl->bad = pages_read(s, &sl->e, a, b, sl->buf, sl->ok, true);
				p->ops->read(p->arg, (uint64_t)(b - a) * PG);
			}
		}
		pthread_mutex_lock(&p->mu);
		sl->state = more ? SLOT_FULL : SLOT_FREE;
		if (!more)
			p->end = true;
		pthread_cond_broadcast(&p->cv);
		pthread_mutex_unlock(&p->mu);
	}
	uint64_t cpu = mv_thread_cpu_ns();
	pthread_mutex_lock(&p->mu);
	p->reader_cpu_ns += cpu;
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

int evict_load_all(struct evspace *s, const struct evict_load_ops *ops, void *arg,
		   struct evict_load_stats *st)
{
	struct lpipe p = {.s = s, .ops = ops, .arg = arg};
	pthread_mutex_init(&p.mu, NULL);
	pthread_cond_init(&p.cv, NULL);
	for (int i = 0; i < LOAD_SLOTS; i++)
		p.sl[i].buf = xmalloc_pages(IMG_EXTENT_MAX);
	pthread_t t[LOAD_READERS];
	int started = 0, rc = 0;
	unsigned idle = 0; /* rounds in a row that loaded nothing */
	for (; started < LOAD_READERS; started++)
		if ((rc = -pthread_create(&t[started], NULL, reader_main, &p)) < 0)
			break;
	if (started)
		rc = 0;
	for (;;) {
		pthread_mutex_lock(&p.mu);
		struct lslot *sl;
		while (!(sl = slot_in(&p, SLOT_FULL)) && !(p.end && !slot_in(&p, SLOT_READING)) &&
		       started)
			pthread_cond_wait(&p.cv, &p.mu);
		pthread_mutex_unlock(&p.mu);
		if (!sl)
			break; /* the readers ended and every slot is installed */
		uint64_t before = space_loaded(s);
		int r = s->dead ? -ESRCH
				: install(s, sl->c.ext, sl->c.addr, &sl->e, sl->buf, sl->ok,
					  sl->bad, &st->searches);
		/* Every round installs something, or a fault or an event
		 * changed what is owed, or the readers find nothing more.
		 * Rounds that load nothing anywhere, one after another, are
		 * a loader that would read the image forever (a bug seen
		 * once read 4.8 TB in 12 minutes): the job fails, and what is
		 * still owed stays evicted, served on fault. */
		idle = space_loaded(s) == before ? idle + 1 : 0;
		if (r > 0 && idle >= LOAD_IDLE_MAX)
			r = -EDEADLK;
		pthread_mutex_lock(&p.mu);
		sl->state = SLOT_FREE;
		if (r < 0)
			p.stop = true;
		pthread_cond_broadcast(&p.cv);
		pthread_mutex_unlock(&p.mu);
		ops->progress(arg);
		if (r < 0) {
			rc = r;
			break;
		}
	}
	pthread_mutex_lock(&p.mu);
	p.stop = true;
	pthread_cond_broadcast(&p.cv);
	pthread_mutex_unlock(&p.mu);
	for (int i = 0; i < started; i++)
		pthread_join(t[i], NULL);
	/* A process that exited between two slots had its pending pages
	 * dropped (space_mark_dead): the readers then found nothing owed and the
	 * loop ended as if everything was loaded. It is gone. */
	pthread_mutex_lock(&s->mu);
	if (rc == 0 && s->dead)
		rc = -ESRCH;
	pthread_mutex_unlock(&s->mu);
	st->reader_cpu_ns += p.reader_cpu_ns;
	for (int i = 0; i < LOAD_SLOTS; i++)
		free(p.sl[i].buf);
	pthread_mutex_destroy(&p.mu);
	pthread_cond_destroy(&p.cv);
	return rc;
}

void evict_space_finish(struct evspace *s, uint64_t *huge, uint64_t *huge_restored)
{
	pthread_mutex_lock(&s->mu);
	struct evict_thp t = s->thp;
	t.v = t.n ? xmalloc(t.n * sizeof(*t.v)) : NULL;
	if (t.n)
		memcpy(t.v, s->thp.v, t.n * sizeof(*t.v));
	bool dead = s->dead;
	pthread_mutex_unlock(&s->mu);
	/* An exec since the last probe: the pidfd names a new program, whose
	 * ranges are not ours to collapse. */
	dead = dead || !uffd_mm_alive(s->uffd, s->probe);
	if (!dead) /* the collapse runs in the job thread, the program runs on */
		evict_thp_restore(&t, s->pidfd, s->uffd);
	*huge += t.bytes;
	*huge_restored += t.restored;
	evict_thp_free(&t);
	space_stop(s);
}
