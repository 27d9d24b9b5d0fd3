#include "supervisor/supervise/notify.h"
#include "supervisor/kernel/remote.h"
#include "common/compat.h"
#include "common/fault.h"
#include "common/log.h"
#include "common/util.h"
#include "supervisor/supervise/handle.h"
#include "supervisor/supervise/point.h"
#include "supervisor/supervise/tree.h"
#include "supervisor/kernel/listener.h"
#include "supervisor/kernel/procfs.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

/* Interrupts the notify thread's blocking receive (a realtime signal
 * nothing else uses; the launcher gives the command default dispositions). */
#define NOTIFY_WAKE_SIGNAL (SIGRTMIN + 3)

int notify_setup(struct mv *mv)
{
	int rc = listener_init(&mv->notify.l, mv->listener, &mv->feat.sync_wake_up);
	if (rc < 0)
		return rc;
	if (!mv->feat.sync_wake_up)
		log_info(
		    "SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP unavailable (%s): wake-ups may cross CPUs",
		    strerror(errno));
	return 0;
}

/* One notification: receive, decide, answer, account. The thread that
 * receives answers, so with SYNC_WAKE_UP the whole round trip stays on
 * one CPU. */
static pid_t handle_one(struct mv *mv, struct listener *l, atomic_bool *stopping)
{
	int r = listener_recv(l);
	if (r < 0) {
		/* ENOENT: the call was withdrawn (the thread got a signal or
		 * died) between the wake-up and our receive. EINTR: our own
		 * wake-up signal, see notify_stop. Anything else is logged
		 * and the loop goes on: stopping would leave every tracee
		 * blocked in its next memory call. Only a listener that is
		 * no longer valid ends it. */
		if (r == -EBADF || r == -EFAULT) {
			log_error("seccomp notification receive: %s: supervision stops",
				  strerror(-r));
			atomic_store(stopping, true);
		} else if (r != -ENOENT && r != -EINTR) {
			log_warn("seccomp notification receive: %s", strerror(-r));
		}
		return 0;
	}
	uint64_t t0 = mv_now_ns();
	const struct seccomp_notif *req = l->req;
	struct seccomp_notif_resp *resp = l->resp;
	if (remote_is_injected(&mv->injecting, (pid_t)req->pid, req->data.instruction_pointer)) {
		/* Ours (evict: supervisor/kernel/remote.h), not the program's. */
		resp->flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
		listener_send(l);
		return 0;
	}
	/* The stop point's calls (supervise/point.h): answered at once, or
	 * handed to a rollback's run. */
	if (mv->point && point_notified(mv->point, l->fd, req))
		return (pid_t)req->pid;
	struct answer a;
	handle_notification(mv, l->fd, req, resp, &a);
	/* Service time ends at the answer: with SYNC_WAKE_UP the answer may
	 * run the tracee on this CPU before the ioctl returns to us. */
	uint64_t dt = mv_now_ns() - t0;
	int rc = listener_send(l);
	/* ENOENT: the thread is gone or was interrupted; an outcome. */
	if (rc < 0 && rc != -ENOENT)
		log_warn("seccomp answer to %d: %s", req->pid, strerror(-rc));
	handle_answered(mv, &a, rc, dt);
	return (pid_t)req->pid;
}

/* The notify thread sleeps in SECCOMP_IOCTL_NOTIF_RECV itself rather than
 * in epoll: measured here (bench/README.md), epoll costs about 2 us a
 * notification, and with SYNC_WAKE_UP it makes the tracee and the
 * supervisor swap CPUs (27,818 migrations for 14,201 mmap+munmap pairs,
 * against 89 blocking), so that a notified call took 27.7 us instead of
 * 12.5 us. */
struct adopted;
static void adopted_learn(struct adopted *a, pid_t tid);

/* Receive and answer until stopped; an adopted listener whose process was
 * not named learns it from its first notification. */
static void notify_loop(struct mv *mv, struct listener *l, atomic_bool *stopping, struct adopted *a)
{
	sigset_t only_wake;
	sigfillset(&only_wake);
	sigdelset(&only_wake, NOTIFY_WAKE_SIGNAL);
	pthread_sigmask(SIG_SETMASK, &only_wake, NULL);
	/* A thread's first malloc creates its arena (an mmap): pay for it
	 * now, not in the command's first notification. */
	free(xmalloc(64 * 1024));
	while (!atomic_load(stopping)) {
		pid_t tid = handle_one(mv, l, stopping);
		if (a && tid > 0)
			adopted_learn(a, tid);
	}
}

static void *notify_thread(void *arg)
{
	struct mv *mv = arg;
	notify_loop(mv, &mv->notify.l, &mv->notify.stopping, NULL);
	return NULL;
}

static void on_wake_signal(int sig)
{
	(void)sig;
}

int notify_start(struct mv *mv)
{
	/* No SA_RESTART: the signal must make the blocked receive return. */
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_wake_signal;
	sigemptyset(&sa.sa_mask);
	if (sigaction(NOTIFY_WAKE_SIGNAL, &sa, NULL) < 0)
		return -errno;
	atomic_store(&mv->notify.stopping, false);
	int rc = pthread_create(&mv->notify_thread, NULL, notify_thread, mv);
	if (rc)
		return -rc;
	mv->notify_running = true;
	return 0;
}

/* Adopted listeners (runc exec): a thread each, as the first one's. */
struct adopted {
	struct mv *mv;
	pid_t root; /* 0 until known (crun exec names none); a tree root then */
	struct listener l;
	atomic_bool stopping;
	pthread_t thread;
	bool running;
	struct adopted *next;
};

static void adopted_free(struct adopted *a);

/* Stop a notify thread: set its flag and wake it until it has gone. */
static void stop_thread(pthread_t t, atomic_bool *stopping)
{
	atomic_store(stopping, true);
	/* A signal that arrives before the thread is back in the ioctl is
	 * lost; so send it again until the thread has gone. */
	for (;;) {
		pthread_kill(t, NOTIFY_WAKE_SIGNAL);
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 10 * 1000 * 1000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		if (pthread_timedjoin_np(t, NULL, &ts) == 0)
			break;
	}
}

void notify_stop(struct mv *mv)
{
	struct adopted *a = NULL;
	pthread_mutex_lock(&mv->adopt_lock);
	a = mv->adopted;
	mv->adopted = NULL;
	pthread_mutex_unlock(&mv->adopt_lock);
	while (a) {
		struct adopted *next = a->next;
		adopted_free(a);
		a = next;
	}
	if (!mv->notify_running)
		return;
	stop_thread(mv->notify_thread, &mv->notify.stopping);
	mv->notify_running = false;
}

void notify_free(struct mv *mv)
{
	listener_free(&mv->notify.l);
}

static void adopted_free(struct adopted *a)
{
	if (a->running)
		stop_thread(a->thread, &a->stopping);
	int fd = a->l.fd; /* -1 when detached */
	listener_free(&a->l);
	if (fd >= 0)
		close(fd);
	if (a->root > 0)
		tree_root_del(a->mv, a->root);
	free(a);
}

static void *adopted_thread(void *arg)
{
	struct adopted *a = arg;
	notify_loop(a->mv, &a->l, &a->stopping, a);
	return NULL;
}

/* The first process to notify on a listener adopted without a process
 * named is its root (the process crun exec started: its filter is
 * installed just before its execve, which is notified). */
static void adopted_learn(struct adopted *a, pid_t tid)
{
	if (a->root > 0)
		return;
	struct proc_status st;
	pid_t pid = procfs_status(tid, &st) == 0 && st.tgid > 0 ? st.tgid : tid;
	if (tree_root_add(a->mv, pid) < 0)
		return;
	a->root = pid;
	log_info("the listener adopted without a process named is process %d's", pid);
}

int notify_adopt(struct mv *mv, pid_t root, int fd)
{
	struct adopted *a = xcalloc(1, sizeof(*a));
	a->mv = mv;
	a->l.fd = -1;
	bool sync = false;
	int rc = listener_init(&a->l, fd, &sync);
	if (rc == 0 && root > 0 && (rc = tree_root_add(mv, root)) == 0)
		a->root = root;
	if (rc == 0)
		rc = -pthread_create(&a->thread, NULL, adopted_thread, a);
	if (rc < 0) {
		if (a->l.fd < 0)
			close(fd);
		adopted_free(a);
		return rc;
	}
	a->running = true;
	pthread_mutex_lock(&mv->adopt_lock);
	a->next = mv->adopted;
	mv->adopted = a;
	pthread_mutex_unlock(&mv->adopt_lock);
	return 0;
}

/* No process uses the filter any more: the listener polls as hung up
 * (Linux 5.8). */
static bool listener_unused(int fd)
{
	struct pollfd p = {.fd = fd, .events = 0};
	return poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLERR | POLLNVAL));
}

size_t notify_adopted_sweep(struct mv *mv)
{
	struct adopted *gone = NULL;
	size_t left = 0;
	pthread_mutex_lock(&mv->adopt_lock);
	for (struct adopted **pp = &mv->adopted; *pp;) {
		struct adopted *a = *pp;
		if (listener_unused(a->l.fd)) {
			*pp = a->next;
			a->next = gone;
			gone = a;
		} else {
			pp = &a->next;
			left++;
		}
	}
	pthread_mutex_unlock(&mv->adopt_lock);
	while (gone) {
		struct adopted *next = gone->next;
		log_info("the listener adopted with process %d is no longer used: released",
			 gone->root);
		adopted_free(gone);
		gone = next;
	}
	return left;
}

size_t notify_detach_adopted(struct mv *mv, int **fds, pid_t **roots)
{
	pthread_mutex_lock(&mv->adopt_lock);
	struct adopted *a = mv->adopted;
	mv->adopted = NULL;
	pthread_mutex_unlock(&mv->adopt_lock);
	size_t n = 0;
	for (struct adopted *x = a; x; x = x->next)
		n++;
	*fds = xcalloc(n + 1, sizeof(**fds));
	*roots = xcalloc(n + 1, sizeof(**roots));
	for (size_t i = 0; a; i++) {
		struct adopted *next = a->next;
		if (a->running)
			stop_thread(a->thread, &a->stopping);
		a->running = false;
		(*fds)[i] = a->l.fd;
		(*roots)[i] = a->root;
		a->l.fd = -1;
		adopted_free(a);
		a = next;
	}
	return n;
}
