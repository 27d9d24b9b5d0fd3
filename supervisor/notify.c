#include "supervisor/notify.h"
#include "common/compat.h"
#include "common/log.h"
#include "common/util.h"
#include "supervisor/handle.h"

#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>

static struct seccomp_notif_sizes sizes;
static struct seccomp_notif *req;
static struct seccomp_notif_resp *resp;

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
		log_info("SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP unavailable (%s): wake-ups may cross CPUs",
			 strerror(errno));
	return 0;
}

bool notify_id_valid(int listener, uint64_t id)
{
	return ioctl(listener, SECCOMP_IOCTL_NOTIF_ID_VALID, &id) == 0;
}

/* One notification: receive, decide, answer, account. The same thread
 * answers what it received, so with SYNC_WAKE_UP the whole round trip
 * stays on one CPU. */
static void on_listener(struct ev_loop *loop, ev_io *w, int revents)
{
	struct mv *mv = w->data;
	memset(req, 0, sizes.seccomp_notif);
	if (ioctl(mv->listener, SECCOMP_IOCTL_NOTIF_RECV, req) < 0) {
		/* ENOENT: the call was withdrawn (the thread got a signal or
		 * died) between the wake-up and our receive. */
		if (errno != ENOENT && errno != EINTR) {
			log_error("seccomp notification receive: %s", strerror(errno));
			ev_io_stop(loop, w);
		}
		return;
	}
	uint64_t t0 = mv_now_ns();
	memset(resp, 0, sizes.seccomp_notif_resp);
	resp->id = req->id;
	struct answer a;
	handle_notification(mv, req, resp, &a);
	/* Service time ends at the answer: with SYNC_WAKE_UP the answer may
	 * run the tracee on this CPU before the ioctl returns to us. */
	uint64_t dt = mv_now_ns() - t0;
	int rc = 0;
	if (ioctl(mv->listener, SECCOMP_IOCTL_NOTIF_SEND, resp) < 0) {
		rc = -errno;
		/* ENOENT: the thread is gone or was interrupted; an outcome. */
		if (rc != -ENOENT)
			log_warn("seccomp answer to %d: %s", req->pid, strerror(-rc));
	}
	handle_answered(mv, &a, rc, dt);
}

static void on_stop(struct ev_loop *loop, ev_async *w, int revents)
{
	ev_break(loop, EVBREAK_ALL);
}

static void *notify_thread(void *arg)
{
	struct mv *mv = arg;
	ev_run(mv->notify_loop, 0);
	return NULL;
}

int notify_start(struct mv *mv)
{
	mv->notify_loop = ev_loop_new(EVBACKEND_EPOLL | EVFLAG_NOSIGMASK);
	if (!mv->notify_loop)
		return -ENOMEM;
	ev_io_init(&mv->notify_io, on_listener, mv->listener, EV_READ);
	mv->notify_io.data = mv;
	ev_io_start(mv->notify_loop, &mv->notify_io);
	ev_async_init(&mv->notify_stop, on_stop);
	ev_async_start(mv->notify_loop, &mv->notify_stop);
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
	ev_async_send(mv->notify_loop, &mv->notify_stop);
	pthread_join(mv->notify_thread, NULL);
	mv->notify_running = false;
	ev_loop_destroy(mv->notify_loop);
	mv->notify_loop = NULL;
}
