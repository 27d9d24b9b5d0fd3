/* Synchronous write tracking (supervisor/rollback/mark.h): a kernel before
 * 6.7 has no asynchronous write-protect, so a write to a protected page
 * faults to the mark's userfaultfd and the thread that made it waits.
 * This thread lifts the page's protection, which wakes it: the page is
 * then present and not write-protected, which the rollback reads as
 * written (PAGEMAP_SCAN's PAGE_IS_WRITTEN, or the pagemap's uffd-wp bit),
 * as in asynchronous mode. The kernel's own writes into protected pages
 * (a read(2) into a buffer) fault the same way and are served the same:
 * a userfaultfd of user-mode faults only would fail them, so synchronous
 * tracking needs a full one (make_tracker refuses otherwise). */
#include "common/log.h"
#include "common/util.h"
#include "supervisor/kernel/uffd.h"
#include "supervisor/rollback/mark.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

struct rb_wp {
	int uffd, stop; /* stop: an eventfd that ends the thread */
	pid_t pid;
	pthread_t thread;
	unsigned long faults;
};

/* Lift the protection of the page at addr and wake its waiters; while
 * the layout changes (-EAGAIN: an mmap or munmap of the program's in
 * flight) again, a little later. */
static void lift(struct rb_wp *w, uint64_t addr)
{
	for (int i = 0; i < 1000; i++) {
		int rc = uffd_writeprotect(w->uffd, addr & ~4095ull, 4096, false);
		if (rc != -EAGAIN) {
			if (rc < 0 && rc != -ENOENT && rc != -ESRCH)
				log_warn("mark: lifting the write-protection of %#llx in process "
					 "%d: %s",
					 (unsigned long long)addr, w->pid, strerror(-rc));
			return;
		}
		nanosleep(&(struct timespec){0, 100000}, NULL);
	}
}

static void *wp_main(void *arg)
{
	struct rb_wp *w = arg;
	sigset_t all;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, NULL);
	struct pollfd p[2] = {{.fd = w->uffd, .events = POLLIN}, {.fd = w->stop, .events = POLLIN}};
	for (;;) {
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (p[1].revents)
			break;
		if (p[0].revents & (POLLERR | POLLHUP | POLLNVAL))
			break; /* the process is gone */
		struct uffd_msg msg[16];
		ssize_t n = read(w->uffd, msg, sizeof(msg));
		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR)
				continue;
			break;
		}
		for (size_t i = 0; i < (size_t)n / sizeof(msg[0]); i++)
			if (msg[i].event == UFFD_EVENT_PAGEFAULT &&
			    (msg[i].arg.pagefault.flags & UFFD_PAGEFAULT_FLAG_WP)) {
				lift(w, msg[i].arg.pagefault.address);
				w->faults++;
			}
	}
	return NULL;
}

int rb_wp_start(struct rb_mark *m)
{
	struct rb_wp *w = xcalloc(1, sizeof(*w));
	w->pid = m->pid;
	w->uffd = m->uffd;
	w->stop = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	/* Ours alone (the process never holds it): never block in a read. */
	int fl = fcntl(m->uffd, F_GETFL);
	int rc = w->stop < 0 || fl < 0 || fcntl(m->uffd, F_SETFL, fl | O_NONBLOCK) < 0 ? -errno : 0;
	if (rc == 0)
		rc = -pthread_create(&w->thread, NULL, wp_main, w);
	if (rc < 0) {
		if (w->stop >= 0)
			close(w->stop);
		free(w);
		return rc;
	}
	m->wp = w;
	return 0;
}

void rb_wp_stop(struct rb_mark *m)
{
	struct rb_wp *w = m->wp;
	if (!w)
		return;
	uint64_t one = 1;
	if (write(w->stop, &one, sizeof(one)) < 0)
		log_warn("mark: cannot stop the fault thread of process %d: %s", w->pid,
			 strerror(errno));
	pthread_join(w->thread, NULL);
	close(w->stop);
	free(w);
	m->wp = NULL;
}
