#include "supervisor/supervise/notify.h"
#include "supervisor/kernel/remote.h"
#include "common/compat.h"
#include "common/fault.h"
#include "common/log.h"
#include "common/util.h"
#include "supervisor/supervise/handle.h"
#include "supervisor/kernel/listener.h"

#include <signal.h>
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
static void handle_one(struct mv *mv)
{
	struct listener *l = &mv->notify.l;
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
			atomic_store(&mv->notify.stopping, true);
		} else if (r != -ENOENT && r != -EINTR) {
			log_warn("seccomp notification receive: %s", strerror(-r));
		}
		return;
	}
	uint64_t t0 = mv_now_ns();
	const struct seccomp_notif *req = l->req;
	struct seccomp_notif_resp *resp = l->resp;
	if (remote_is_injected(&mv->injecting, (pid_t)req->pid, req->data.instruction_pointer)) {
		/* Ours (evict: supervisor/kernel/remote.h), not the program's. */
		resp->flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
		listener_send(l);
		return;
	}
	struct answer a;
	handle_notification(mv, req, resp, &a);
	/* Service time ends at the answer: with SYNC_WAKE_UP the answer may
	 * run the tracee on this CPU before the ioctl returns to us. */
	uint64_t dt = mv_now_ns() - t0;
	int rc = listener_send(l);
	/* ENOENT: the thread is gone or was interrupted; an outcome. */
	if (rc < 0 && rc != -ENOENT)
		log_warn("seccomp answer to %d: %s", req->pid, strerror(-rc));
	handle_answered(mv, &a, rc, dt);
}

/* The notify thread sleeps in SECCOMP_IOCTL_NOTIF_RECV itself rather than
 * in epoll: measured here (bench/README.md), epoll costs about 2 us a
 * notification, and with SYNC_WAKE_UP it makes the tracee and the
 * supervisor swap CPUs (27,818 migrations for 14,201 mmap+munmap pairs,
 * against 89 blocking), so that a notified call took 27.7 us instead of
 * 12.5 us. */
static void *notify_thread(void *arg)
{
	struct mv *mv = arg;
	sigset_t only_wake;
	sigfillset(&only_wake);
	sigdelset(&only_wake, NOTIFY_WAKE_SIGNAL);
	pthread_sigmask(SIG_SETMASK, &only_wake, NULL);
	/* A thread's first malloc creates its arena (an mmap): pay for it
	 * now, not in the command's first notification. */
	free(xmalloc(64 * 1024));
	while (!atomic_load(&mv->notify.stopping))
		handle_one(mv);
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

void notify_stop(struct mv *mv)
{
	if (!mv->notify_running)
		return;
	atomic_store(&mv->notify.stopping, true);
	/* A signal that arrives before the thread is back in the ioctl is
	 * lost; so send it again until the thread has gone. */
	for (;;) {
		pthread_kill(mv->notify_thread, NOTIFY_WAKE_SIGNAL);
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 10 * 1000 * 1000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		if (pthread_timedjoin_np(mv->notify_thread, NULL, &ts) == 0)
			break;
	}
	mv->notify_running = false;
}

void notify_free(struct mv *mv)
{
	listener_free(&mv->notify.l);
}
