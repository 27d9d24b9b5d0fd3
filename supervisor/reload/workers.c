/* The fault workers of an evicted space (supervisor/reload/space.h). */
#include "supervisor/reload/space.h"
#include "common/log.h"
#include "common/util.h"
#include "supervisor/kernel/procfs.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

struct fault {
	uint64_t addr, t0;
	uint64_t gen; /* s->layout_gen when it was read */
	pid_t who;
};

struct worker {
	struct evspace *s;
	bool prober;
	void *buf;
	struct fault q[MSG_BATCH * 4];
	size_t nq;
	struct ahead ra[MSG_BATCH * 4]; /* read-aheads owed: a ring, oldest at ra_head */
	size_t ra_head, n_ra;
};

/* A fork child's pid, from the first fault that names a thread. */
static void learn_tgid(struct evspace *s, pid_t who)
{
	struct proc_status st;
	if (s->tgid || who <= 0 || procfs_status(who, &st) < 0)
		return;
	s->tgid = st.tgid;
}

static bool queued(const struct worker *w, uint64_t addr)
{
	for (size_t i = 0; i < w->nq; i++)
		if (w->q[i].addr == addr)
			return true;
	return false;
}

/* A fault already queued is dropped: serving the queued one wakes every
 * thread waiting on the page. One that finds the queue full is woken,
 * to fault again: it is never left unread and unanswered. */
static void take_messages(struct worker *w, struct uffd_msg *m, ssize_t n)
{
	struct evspace *s = w->s;
	for (ssize_t i = 0; i < n; i++) {
		if (m[i].event != UFFD_EVENT_PAGEFAULT) {
			struct evspace *child = uevent_apply(s, &m[i]);
			if (child)
				workers_adopt(child);
			continue;
		}
		uint64_t addr = m[i].arg.pagefault.address & ~(PG - 1);
		pid_t who =
		    m[i].arg.pagefault.feat.ptid ? (pid_t)m[i].arg.pagefault.feat.ptid : s->pid;
		learn_tgid(s, who);
		if (queued(w, addr))
			continue;
		if (w->nq < ARRAY_SIZE(w->q))
			w->q[w->nq++] = (struct fault){addr, mv_now_ns(), s->layout_gen, who};
		else
			uffd_wake(s->uffd, addr, PG);
	}
}

/* Read what the uffd has (non-blocking) and apply its events, under
 * s->lay (write) from the read on; 0 when it had nothing. Always a whole
 * batch, whatever room the queue has: the kernel hands out every pending
 * fault before any event (fs/userfaultfd.c userfaultfd_ctx_read), so a
 * read with room for faults only would never reach the event that holds
 * every copy back (serve_queue). */
static ssize_t read_messages(struct worker *w)
{
	struct uffd_msg m[MSG_BATCH];
	pthread_rwlock_wrlock(&w->s->lay);
	ssize_t n = read(w->s->uffd, m, sizeof(m));
	if (n > 0)
		take_messages(w, m, n / (ssize_t)sizeof(m[0]));
	pthread_rwlock_unlock(&w->s->lay);
	return n > 0 ? n / (ssize_t)sizeof(m[0]) : 0;
}

/* Until the uffd has something to read, at most us microseconds. */
static void wait_readable(struct evspace *s, unsigned us)
{
	struct pollfd pfd = {.fd = s->uffd, .events = POLLIN};
	struct timespec ts = {0, (long)us * 1000};
	ppoll(&pfd, 1, &ts, NULL);
}

/* The oldest read-ahead owed, at the program's priority: nobody waits on
 * it. One worker at a time reads ahead: two did on both CPUs of a 2-core
 * machine at nice -10, and the program's thread, woken from its fault,
 * waited 0.4-1.6 ms for a CPU (perf sched timehist: first touch p50 600 us,
 * 70 us with no read-ahead at all). false: another worker is reading
 * ahead; this one stays owed, for later (serve_all). */
static bool read_ahead_one(struct worker *w)
{
	if (__atomic_exchange_n(&w->s->reading_ahead, true, __ATOMIC_ACQUIRE))
		return false;
	struct ahead a = w->ra[w->ra_head];
	w->ra_head = (w->ra_head + 1) % ARRAY_SIZE(w->ra);
	w->n_ra--;
	bool rt = evict_fault_rt(false);
	evict_boost_thread(0);
	serve_read_ahead(w->s, a.addr, &a.c, a.lo, a.hi, w->buf);
	evict_boost_thread(EVICT_WORKER_NICE);
	if (rt)
		evict_fault_rt(true);
	__atomic_store_n(&w->s->reading_ahead, false, __ATOMIC_RELEASE);
	return true;
}

/* EAGAIN: the kernel refuses every copy while an event of this uffd is
 * under way (mmap_changing: munmap, mremap, madvise, fork), from before
 * the change until the event is read. Timeline (a munmap): thread A
 * enters munmap (userfaultfd_unmap_prep: copies fail from now on), zaps
 * the pages, and only then queues its UNMAP event and waits for it to be
 * read; thread B faults meanwhile and its copy fails. B's fault is kept,
 * and B not woken: a woken B faults again, each copy fails and wakes it
 * once more, and its faults, read before any event, filled every
 * worker's queue with copies of one fault until no worker read the uffd
 * any more, and A waited for good (the churn node hang). So the fault
 * waits here until the uffd has the event (or another fault) to read. */
static void serve_queue(struct worker *w)
{
	struct evspace *s = w->s;
	unsigned backoff = 50;
	while (w->nq) {
		struct fault f = w->q[--w->nq];
		uint64_t woken = 0;
		struct ahead ra;
		int rc = serve_fault(s, f.addr, f.who, f.gen, w->buf, &woken, &ra);
		if (rc == -EAGAIN) {
			w->q[w->nq++] = f;
			if (!read_messages(w)) {
				wait_readable(s, backoff);
				backoff = MV_MIN(backoff * 2, 5000u);
			}
			continue;
		}
		backoff = 50;
		if (rc == -ESRCH) {
			space_mark_dead(s, "its address space is gone (exit or exec)");
			w->nq = w->n_ra = 0;
			return;
		}
		if (ra.addr) {
			if (w->n_ra == ARRAY_SIZE(w->ra) && !read_ahead_one(w)) {
				/* full, and another worker reads ahead: the
				 * oldest is dropped (its pages fault or load) */
				w->ra_head = (w->ra_head + 1) % ARRAY_SIZE(w->ra);
				w->n_ra--;
			}
			w->ra[(w->ra_head + w->n_ra++) % ARRAY_SIZE(w->ra)] = ra;
		}
		if (rc == -ENOENT)
			uffd_wake(s->uffd, f.addr, PG); /* unmapped meanwhile: let it fault again */
		else if (rc < 0)
			log_warn("evict: serving a fault at %#llx in process %d: %s",
				 (unsigned long long)f.addr, evict_space_pid(s), strerror(-rc));
		uint64_t dt = (woken ? woken : mv_now_ns()) - f.t0;
		pthread_mutex_lock(&s->mu);
		s->faults++;
		hist_add(&s->lat, dt);
		pthread_mutex_unlock(&s->mu);
	}
}

/* Faults first, read-ahead after: a batch of faults read at once (8 threads
 * touching their pages together) was served one by one, each followed by
 * the read-ahead of its chunk (up to 2 MiB), so the last waited for all
 * the others' read-ahead too (fault p99 in milliseconds). Now every
 * queued fault is served, then the read-aheads run one by one, oldest
 * first, and a fault that arrives meanwhile is served before the next. */
static void serve_all(struct worker *w)
{
	struct evspace *s = w->s;
	for (;;) {
		serve_queue(w);
		if (!w->n_ra || s->stopping) {
			w->ra_head = w->n_ra = 0;
			return;
		}
		if (!read_ahead_one(w))
			return; /* another reads ahead: ours wait (worker_main) */
		struct pollfd pfd = {.fd = s->uffd, .events = POLLIN};
		if (w->n_ra && poll(&pfd, 1, 0) > 0)
			read_messages(w);
	}
}

/* A fault worker sleeps until a thread of the program waits on it: let it
 * run before the program's busy threads (nice -10 where we may; they are
 * bounded by the faults they serve). */
void evict_boost_thread(int nice)
{
	if (setpriority(PRIO_PROCESS, (id_t)gettid(), nice) < 0 && errno != EACCES &&
	    errno != EPERM)
		log_debug("evict: setpriority: %s", strerror(errno));
}

/* Whether this thread serves faults under SCHED_FIFO (evict_fault_rt). */
static __thread bool fault_rt;

/* nice -10 is not enough where the program keeps every CPU busy: the
 * scheduler still gives its threads their share first, and a fault waited
 * milliseconds for a worker to run (bench/README.md, "2026-12-04").
 * A thread serving faults runs SCHED_FIFO at the lowest real-time
 * priority where memvisor may (CAP_SYS_NICE or RLIMIT_RTPRIO), for just
 * the work a program thread waits on: evict_fault_rt(false) before work
 * nobody waits on (read-ahead), true again after. MEMVISOR_FAULT_RT=0
 * keeps nice alone. Returns whether the thread was real-time before. */
bool evict_fault_rt(bool on)
{
	bool was = fault_rt;
	static int allowed = -1; /* unknown; a machine fact, racy but idempotent */
	int a = __atomic_load_n(&allowed, __ATOMIC_RELAXED);
	if (a < 0) {
		const char *env = getenv("MEMVISOR_FAULT_RT");
		a = !(env && strcmp(env, "0") == 0);
		__atomic_store_n(&allowed, a, __ATOMIC_RELAXED);
	}
	if (!a || on == fault_rt)
		return was;
	struct sched_param sp = {.sched_priority = on ? 1 : 0};
	int rc = pthread_setschedparam(pthread_self(), on ? SCHED_FIFO : SCHED_OTHER, &sp);
	if (rc == 0)
		fault_rt = on;
	else if (on && (rc == EPERM || rc == EACCES))
		__atomic_store_n(&allowed, 0, __ATOMIC_RELAXED); /* not ours to have */
	else
		log_debug("evict: scheduling policy: %s", strerror(rc));
	return was;
}

void evict_fault_thread(const char *name)
{
	pthread_setname_np(pthread_self(), name);
	evict_boost_thread(EVICT_WORKER_NICE);
	evict_fault_rt(true);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct evspace *s = w->s;
	evict_fault_thread("mv-fault");
	/* One worker woken for a fault, not all: with poll(2) every fault
	 * woke the four workers, three found nothing after taking s->lay
	 * for writing, and on two CPUs the herd delayed the one serving it
	 * and the program's thread (perf sched: 4 switches a fault). The
	 * stop wakes every worker. poll(2) where epoll refuses. */
	struct pollfd pfd[2] = {{.fd = s->uffd, .events = POLLIN},
				{.fd = s->stopfd, .events = POLLIN}};
	int ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event ev = {.events = EPOLLIN | EPOLLEXCLUSIVE, .data.u32 = 0};
	if (ep >= 0 && epoll_ctl(ep, EPOLL_CTL_ADD, s->uffd, &ev) < 0) {
		close(ep);
		ep = -1;
	}
	ev = (struct epoll_event){.events = EPOLLIN, .data.u32 = 1};
	if (ep >= 0 && epoll_ctl(ep, EPOLL_CTL_ADD, s->stopfd, &ev) < 0) {
		close(ep);
		ep = -1;
	}
	while (!s->stopping) {
		int n;
		pfd[0].revents = pfd[1].revents = 0;
		if (ep >= 0) {
			struct epoll_event got[2];
			n = epoll_wait(ep, got, 2, w->n_ra ? 1 : PROBE_MS);
			for (int i = 0; i < n; i++)
				pfd[got[i].data.u32].revents = (short)got[i].events;
		} else {
			n = poll(pfd, 2, w->n_ra ? 1 : PROBE_MS);
		}
		if (n < 0 && errno != EINTR)
			break;
		if (pfd[1].revents)
			break;
		if (n == 0 && w->n_ra) {
			/* read-ahead left for later (serve_all) */
			uint64_t t0 = mv_thread_cpu_ns();
			serve_all(w);
			__atomic_fetch_add(&s->cpu_ns, mv_thread_cpu_ns() - t0, __ATOMIC_RELAXED);
			continue;
		}
		if (n == 0 && w->prober && !uffd_mm_alive(s->uffd, s->probe)) {
			space_mark_dead(s, "its address space is gone (exit or exec)");
			break;
		}
		if (n > 0 && read_messages(w)) {
			uint64_t t0 = mv_thread_cpu_ns();
			serve_all(w);
			__atomic_fetch_add(&s->cpu_ns, mv_thread_cpu_ns() - t0, __ATOMIC_RELAXED);
		}
	}
	if (ep >= 0)
		close(ep);
	free(w->buf);
	evict_put(s);
	free(w);
	return NULL;
}

int workers_start(struct evspace *s)
{
	for (int i = 0; i < EVICT_WORKERS; i++) {
		struct worker *w = xcalloc(1, sizeof(*w));
		w->s = s;
		w->prober = i == 0;
		w->buf = xmalloc_pages(IMG_EXTENT_MAX);
		pthread_mutex_lock(&s->reg->mu);
		space_get_locked(s);
		pthread_mutex_unlock(&s->reg->mu);
		pthread_t t;
		pthread_attr_t at;
		pthread_attr_init(&at);
		pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
		int rc = pthread_create(&t, &at, worker_main, w);
		pthread_attr_destroy(&at);
		if (rc != 0) {
			free(w->buf);
			free(w);
			evict_put(s);
			return i ? 0 : -rc;
		}
	}
	return 0;
}

void workers_adopt(struct evspace *c)
{
	if (c->pagesfd < 0 || workers_start(c) < 0)
		log_error("evict: cannot serve the fork child of process %d: its evicted memory "
			  "cannot be read",
			  c->parent);
	evict_put(c); /* the registry and the workers hold it */
}
