/* uffd_stress: a program that runs its own userfaultfd, for the churn
 * tier and evict_safety.bats (issue 24): memory the program serves itself
 * must keep every write through evict and reload.
 *
 *   uffd_stress [--mib M] [--bounces B | --seconds S] [--threads T]
 *               [--linger-ms L] [--seed N]
 *
 * Two anonymous areas of M MiB (default 4), allocated one after the other
 * (the kernel merges them into one vma until a registration splits it),
 * each page holding a pthread mutex and a counter. Each bounce moves the
 * pages from the source area to the destination area through the
 * program's own userfaultfd, the way the kernel selftest uffd-stress does:
 *   - the destination is registered (missing mode) and dropped with
 *     MADV_DONTNEED;
 *   - T locking threads take the mutex of a page of the destination (the
 *     first touch of a missing page faults to our userfaultfd), check its
 *     counter against the copy kept in a heap array, and increment both;
 *     pages are picked at random, or, every other bounce, every thread
 *     walks the same pages in order (racing faults);
 *   - T handler threads read the faults and answer each with UFFDIO_COPY
 *     of the same page of the source (EEXIST: it is there already, wake);
 *   - T background threads copy every page of their part of the area
 *     with UFFDIO_COPY, at full speed;
 *   - once the background copies are done the source is dropped
 *     (MADV_DONTNEED); the locking threads go on for L ms (default 0)
 *     on the destination, still registered, then stop; the destination
 *     is unregistered and every page checked: counter against copy,
 *     mutex free. Then source and destination swap.
 * B bounces (default 64), or as many as S seconds take.
 * The source pages UFFDIO_COPY reads may be evicted (memvisor serves the
 * kernel's copy_from_user); the destination is registered with our uffd.
 *
 * A registration that fails with EBUSY is retried (every millisecond,
 * for up to 10 minutes): the area is registered with another userfaultfd
 * of this mm, memvisor's, while it is evicted, until its reload ends.
 *
 * On the first wrong counter it prints (stdout and stderr) the bounce,
 * page, its address, counter and copy, and exits 1. At the end it prints
 * one line, the same on every run with the same arguments:
 *   uffd_stress: B bounces of N pages: ok
 *   uffd_stress: S s of bounces of N pages: ok       (--seconds) */
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "tests/workloads/wl.h"

#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif

#define PAGE	 4096UL
#define MAXT	 16
#define BUSY_MAX 600000 /* ms of EBUSY before giving up */

/* Each page: its mutex first, then its counter. */
struct page {
	pthread_mutex_t mu;
	volatile uint64_t count;
};

static size_t npages;
static int nthreads = 2, bounces = 64, seconds, linger_ms;
static uint64_t seed = 1;
static char *area[2];
static char *src, *dst;
static uint64_t *copy; /* the counters' copies, in the heap */
static int uffd, stopfd;
static volatile int finished;
static int bounce;

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

static void die(const char *fmt, ...)
{
	char line[512];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (n < 0)
		_exit(1);
	if ((size_t)n >= sizeof(line) - 1)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	if (write(1, line, (size_t)n) < 0 || write(2, line, (size_t)n) < 0)
		_exit(1);
	_exit(1);
}

static struct page *page_of(char *a, size_t nr)
{
	return (struct page *)(a + nr * PAGE);
}

static void nap_us(long us)
{
	struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/* UFFDIO_COPY of page nr from the source to the destination. */
static void copy_page(size_t nr)
{
	struct uffdio_copy c = {.dst = (uint64_t)(uintptr_t)(dst + nr * PAGE),
				.src = (uint64_t)(uintptr_t)(src + nr * PAGE),
				.len = PAGE};
	for (;;) {
		if (ioctl(uffd, UFFDIO_COPY, &c) == 0 && c.copy == (int64_t)PAGE)
			return;
		int err = errno;
		if (err == EAGAIN || err == EINTR) {
			c.copy = 0;
			continue;
		}
		if (err == EEXIST) {
			struct uffdio_range r = {c.dst, PAGE};
			if (ioctl(uffd, UFFDIO_WAKE, &r) < 0)
				die("bounce %d: UFFDIO_WAKE of page %zu: %s", bounce, nr,
				    strerror(errno));
			return;
		}
		die("bounce %d: UFFDIO_COPY of page %zu: %s", bounce, nr, strerror(err));
	}
}

static void *locking_main(void *arg)
{
	uintptr_t t = (uintptr_t)arg;
	uint64_t r = mix(seed ^ ((uint64_t)bounce << 20) ^ t);
	bool racing = bounce & 1;
	size_t nr = racing ? (size_t)(seed % npages) : 0;
	while (!finished) {
		if (racing)
			nr = (nr + 1) % npages;
		else
			nr = (size_t)((r = mix(r)) % npages);
		struct page *p = page_of(dst, nr);
		pthread_mutex_lock(&p->mu);
		uint64_t c = p->count;
		if (c != copy[nr])
			die("bounce %d: page %zu (%p) memory corruption: counter %llu, its copy "
			    "%llu",
			    bounce, nr, (void *)p, (unsigned long long)c,
			    (unsigned long long)copy[nr]);
		p->count = copy[nr] = c + 1;
		pthread_mutex_unlock(&p->mu);
	}
	return NULL;
}

static void *handler_main(void *arg)
{
	struct pollfd pfd[2] = {{.fd = uffd, .events = POLLIN}, {.fd = stopfd, .events = POLLIN}};
	for (;;) {
		if (poll(pfd, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			die("bounce %d: poll: %s", bounce, strerror(errno));
		}
		if (pfd[1].revents)
			return NULL;
		struct uffd_msg m;
		ssize_t n = read(uffd, &m, sizeof(m));
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (n != (ssize_t)sizeof(m))
			die("bounce %d: reading the userfaultfd: %s", bounce,
			    n < 0 ? strerror(errno) : "short read");
		if (m.event != UFFD_EVENT_PAGEFAULT)
			die("bounce %d: unexpected userfaultfd event %u", bounce, m.event);
		uint64_t a = m.arg.pagefault.address & ~(PAGE - 1);
		uint64_t d = (uint64_t)(uintptr_t)dst;
		if (a < d || a >= d + npages * PAGE)
			die("bounce %d: a fault at %#llx, outside the destination", bounce,
			    (unsigned long long)a);
		copy_page((size_t)((a - d) / PAGE));
	}
}

static void *background_main(void *arg)
{
	uintptr_t t = (uintptr_t)arg;
	size_t per = npages / (size_t)nthreads, from = t * per;
	size_t to = t + 1 == (uintptr_t)nthreads ? npages : from + per;
	for (size_t nr = from; nr < to; nr++)
		copy_page(nr);
	return NULL;
}

static void register_dst(void)
{
	struct uffdio_register reg = {.range = {(uint64_t)(uintptr_t)dst, npages * PAGE},
				      .mode = UFFDIO_REGISTER_MODE_MISSING};
	for (int ms = 0;; ms++) {
		if (ioctl(uffd, UFFDIO_REGISTER, &reg) == 0)
			return;
		if (errno != EBUSY || ms >= BUSY_MAX)
			die("bounce %d: UFFDIO_REGISTER of the destination: %s%s", bounce,
			    strerror(errno), errno == EBUSY ? " (for 10 minutes)" : "");
		nap_us(1000);
	}
}

static void release(char *a)
{
	if (madvise(a, npages * PAGE, MADV_DONTNEED) < 0)
		die("bounce %d: madvise(MADV_DONTNEED): %s", bounce, strerror(errno));
}

static void start(pthread_t *v, void *(*fn)(void *), uintptr_t i)
{
	int rc = pthread_create(v, NULL, fn, (void *)i);
	if (rc)
		die("pthread_create: %s", strerror(rc));
}

static void one_bounce(void)
{
	pthread_t lk[MAXT], hd[MAXT], bg[MAXT];
	register_dst();
	/* A handler may have read a fault the background copy already
	 * served and copied afterwards from the dropped source: zeros in
	 * the source (harmless: EEXIST in the destination). Drop what the
	 * destination has, as the source it was. */
	release(dst);
	finished = 0;
	for (int t = 0; t < nthreads; t++) {
		start(&lk[t], locking_main, (uintptr_t)t);
		start(&hd[t], handler_main, (uintptr_t)t);
		start(&bg[t], background_main, (uintptr_t)t);
	}
	for (int t = 0; t < nthreads; t++)
		pthread_join(bg[t], NULL);
	/* Every page is in the destination: drop the source at once. */
	release(src);
	if (linger_ms)
		nap_us(linger_ms * 1000L);
	finished = 1;
	for (int t = 0; t < nthreads; t++)
		pthread_join(lk[t], NULL);
	uint64_t one = 1;
	if (write(stopfd, &one, sizeof(one)) != sizeof(one))
		die("eventfd: %s", strerror(errno));
	for (int t = 0; t < nthreads; t++)
		pthread_join(hd[t], NULL);
	if (read(stopfd, &one, sizeof(one)) != sizeof(one))
		die("eventfd: %s", strerror(errno));
	struct uffdio_range r = {(uint64_t)(uintptr_t)dst, npages * PAGE};
	if (ioctl(uffd, UFFDIO_UNREGISTER, &r) < 0)
		die("bounce %d: UFFDIO_UNREGISTER: %s", bounce, strerror(errno));
	for (size_t nr = 0; nr < npages; nr++) {
		struct page *p = page_of(dst, nr);
		if (p->count != copy[nr])
			die("bounce %d: page %zu (%p) lost writes: counter %llu, its copy %llu",
			    bounce, nr, (void *)p, (unsigned long long)p->count,
			    (unsigned long long)copy[nr]);
		if (pthread_mutex_trylock(&p->mu) != 0)
			die("bounce %d: page %zu: its mutex is held", bounce, nr);
		pthread_mutex_unlock(&p->mu);
	}
	char *t = src;
	src = dst;
	dst = t;
}

static long num_arg(const char *s, long max)
{
	char *end;
	long v = strtol(s, &end, 10);
	if (*end || v < 1 || v > max)
		die("bad number: %s", s);
	return v;
}

int main(int argc, char **argv)
{
	long mib = 4;
	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--mib"))
			mib = num_arg(argv[i + 1], 4096);
		else if (!strcmp(argv[i], "--bounces"))
			bounces = (int)num_arg(argv[i + 1], 1 << 30);
		else if (!strcmp(argv[i], "--seconds"))
			seconds = (int)num_arg(argv[i + 1], 1 << 20);
		else if (!strcmp(argv[i], "--linger-ms"))
			linger_ms = (int)num_arg(argv[i + 1], 10000);
		else if (!strcmp(argv[i], "--threads"))
			nthreads = (int)num_arg(argv[i + 1], MAXT);
		else if (!strcmp(argv[i], "--seed"))
			seed = (uint64_t)num_arg(argv[i + 1], 1L << 62);
		else
			die("usage: uffd_stress [--mib M] [--bounces B | --seconds S] [--threads "
			    "T] "
			    "[--linger-ms L] [--seed N]");
	}
	npages = (size_t)mib * (1 << 20) / PAGE;
	for (int k = 0; k < 2; k++) {
		area[k] = mmap(NULL, npages * PAGE, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (area[k] == MAP_FAILED)
			die("mmap: %s", strerror(errno));
	}
	src = area[0];
	dst = area[1];
	copy = malloc(npages * sizeof(*copy));
	if (!copy)
		die("malloc: %s", strerror(errno));
	for (size_t nr = 0; nr < npages; nr++) {
		struct page *p = page_of(src, nr);
		pthread_mutex_init(&p->mu, NULL);
		p->count = copy[nr] = 1;
	}
	/* Kernel accesses to the destination (a futex on a mutex) fault
	 * too: ask for them where we may, user-mode faults only otherwise. */
	uffd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	if (uffd < 0 && (errno == EPERM || errno == EACCES))
		uffd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY);
	if (uffd < 0)
		die("userfaultfd: %s", strerror(errno));
	struct uffdio_api api = {.api = UFFD_API};
	if (ioctl(uffd, UFFDIO_API, &api) < 0)
		die("UFFDIO_API: %s", strerror(errno));
	stopfd = eventfd(0, EFD_CLOEXEC);
	if (stopfd < 0)
		die("eventfd: %s", strerror(errno));
	release(dst);
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (bounce = 0; seconds || bounce < bounces; bounce++) {
		one_bounce();
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (seconds && (t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) >=
				   seconds * 1000000000L)
			break;
	}
	if (seconds)
		printf("uffd_stress: %d s of bounces of %zu pages: ok\n", seconds, npages);
	else
		printf("uffd_stress: %d bounces of %zu pages: ok\n", bounces, npages);
	return 0;
}
