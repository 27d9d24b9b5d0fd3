#include "supervisor/supervise/notify.h"
#include "supervisor/kernel/remote.h"
#include "common/compat.h"
#include "common/fault.h"
#include "common/log.h"
#include "common/util.h"
#include "supervisor/supervise/handle.h"

#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>

static struct seccomp_notif_sizes sizes;
static struct seccomp_notif *req;
static struct seccomp_notif_resp *resp;
static atomic_bool stopping;

/* Interrupts the notify thread's blocking receive (a realtime signal
 * nothing else uses; the launcher gives the command default dispositions). */
#define NOTIFY_WAKE_SIGNAL (SIGRTMIN + 3)

int notify_setup(struct mv *mv)
{
	if (syscall(SYS_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &sizes) < 0)
		return -errno;
	/* The kernel may know larger structs than our headers: allocate
	 * what it says (seccomp_unotify(2)). */
	req = xcalloc(1, MV_MAX(sizes.seccomp_notif, sizeof(*req)));
	resp = xcalloc(1, MV_MAX(sizes.seccomp_notif_resp, sizeof(*resp)));
	/* The flags are the ioctl's argument itself, not a pointer to them
	 * (kernel/seccomp.c seccomp_notify_set_flags). */
	mv->feat.sync_wake_up = ioctl(mv->listener, SECCOMP_IOCTL_NOTIF_SET_FLAGS,
				      (unsigned long)SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP) == 0;
	if (!mv->feat.sync_wake_up)
		log_info(
		    "SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP unavailable (%s): wake-ups may cross CPUs",
		    strerror(errno));
	return 0;
}

bool notify_id_valid(int listener, uint64_t id)
{
	return ioctl(listener, SECCOMP_IOCTL_NOTIF_ID_VALID, &id) == 0;
}

/* Answer the notification in resp. A failure other than ENOENT (the
 * thread is gone) is retried: an unanswered notification leaves its
 * thread blocked for good. */
static int send_answer(int listener)
{
	int rc = -EIO;
	for (int attempt = 0; attempt < 3; attempt++) {
		if (fault_hit("notify_send"))
			continue;
		if (ioctl(listener, SECCOMP_IOCTL_NOTIF_SEND, resp) == 0)
			return 0;
		rc = -errno;
		if (rc == -ENOENT)
			return rc;
	}
	return rc;
}

/* One notification: receive, decide, answer, account. The thread that
 * receives answers, so with SYNC_WAKE_UP the whole round trip stays on
 * one CPU. */
static void handle_one(struct mv *mv)
{
	memset(req, 0, sizes.seccomp_notif);
	int r = fault_hit("notify_recv") ? (errno = EIO, -1)
					 : ioctl(mv->listener, SECCOMP_IOCTL_NOTIF_RECV, req);
	if (r < 0) {
		/* ENOENT: the call was withdrawn (the thread got a signal or
		 * died) between the wake-up and our receive. EINTR: our own
		 * wake-up signal, see notify_stop. Anything else is logged
		 * and the loop goes on: stopping would leave every tracee
		 * blocked in its next memory call. Only a listener that is
		 * no longer valid ends it. */
		if (errno == EBADF || errno == EFAULT) {
			log_error("seccomp notification receive: %s: supervision stops",
				  strerror(errno));
			atomic_store(&stopping, true);
		} else if (errno != ENOENT && errno != EINTR) {
			log_warn("seccomp notification receive: %s", strerror(errno));
		}
		return;
	}
	uint64_t t0 = mv_now_ns();
	memset(resp, 0, sizes.seccomp_notif_resp);
	resp->id = req->id;
	if (remote_is_injected((pid_t)req->pid, req->data.instruction_pointer)) {
		/* Ours (evict: supervisor/kernel/remote.h), not the program's. */
		resp->flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
		send_answer(mv->listener);
		return;
	}
	struct answer a;
	handle_notification(mv, req, resp, &a);
	/* Service time ends at the answer: with SYNC_WAKE_UP the answer may
	 * run the tracee on this CPU before the ioctl returns to us. */
	uint64_t dt = mv_now_ns() - t0;
	int rc = send_answer(mv->listener);
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
	while (!atomic_load(&stopping))
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
	atomic_store(&stopping, false);
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
	atomic_store(&stopping, true);
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
