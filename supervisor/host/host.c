/* The set-up and teardown of one supervisor, shared by run and agent. */
#include "supervisor/rollback/marks.h"
#include "supervisor/host/host.h"
#include "common/util.h"
#include "supervisor/ctl/server.h"
#include "supervisor/image/pagesw.h"
#include "supervisor/kernel/procfs.h"
#include "supervisor/reload/evict.h"
#include "supervisor/supervise/enforce.h"
#include "supervisor/supervise/events.h"
#include "supervisor/supervise/jobs.h"
#include "supervisor/supervise/lifecycle.h"
#include "supervisor/supervise/notify.h"

#include <signal.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/syscall.h>

int host_mv_init(struct mv *mv, struct ev_loop *loop)
{
	pthread_mutex_init(&mv->adopt_lock, NULL);
	mv->exits_epfd = epoll_create1(EPOLL_CLOEXEC);
	if (mv->exits_epfd < 0)
		return -errno;
	mv->self = getpid();
	mv->main_thread = pthread_self();
	mv->start_ns = mv_now_ns();
	mv->start_wall_ns = mv_wall_ns();
	/* A bad policy stops everything before the command starts. */
	int rc = enforce_init(mv);
	if (rc < 0)
		return rc;
	pthread_mutex_init(&mv->lock, NULL);
	proctab_init(&mv->procs, 4096);
	mv->loop = loop;
	events_init(mv);
	mv->evict = evict_new(mv);
	mv->faulter = (struct vm_faulter){evict_fault_in, mv->evict};
	mv->staging = pagesw_pool_new();
	return 0;
}

int host_mv_listen(struct mv *mv, int fd)
{
	mv->listener = fd;
	int rc = notify_setup(mv);
	if (rc < 0)
		return rc;
	return notify_start(mv);
}

static void on_wake(struct ev_loop *loop, ev_async *w, int revents)
{
	struct mv *mv = w->data;
	events_flush(mv);
	ctl_server_jobs_ended(mv); /* before a reap can forget the job */
	jobs_reap(mv);
}

static void on_exits(struct ev_loop *loop, ev_io *w, int revents)
{
	lifecycle_exits_ready(w->data);
}

void host_mv_watch(struct mv *mv)
{
	ev_async_init(&mv->wake, on_wake);
	mv->wake.data = mv;
	ev_async_start(mv->loop, &mv->wake);
	ev_io_init(&mv->exits_io, on_exits, mv->exits_epfd, EV_READ);
	mv->exits_io.data = mv;
	ev_io_start(mv->loop, &mv->exits_io);
}

/* Processes still in the table when everything is over: their exit
 * watchers had not run yet. */
static void retire_all(struct mv *mv)
{
	pthread_mutex_lock(&mv->lock);
	struct proc *p;
	size_t i = 0;
	while ((p = proctab_next(&mv->procs, &i))) {
		lifecycle_exit_locked(mv, p);
		i = 0; /* the table changed under the iterator */
	}
	pthread_mutex_unlock(&mv->lock);
}

void host_mv_finish(struct mv *mv)
{
	jobs_wait_all(mv);
	rollback_free_all(mv);
	notify_stop(mv);
	notify_free(mv);
	pagesw_pool_free(mv->staging);
	mv->staging = NULL;
	retire_all(mv);
	lifecycle_late_exits(mv);
}

void host_mv_free(struct mv *mv)
{
	ctl_server_stop(mv);
	ctl_server_free(mv);
	if (mv->loop) {
		ev_async_stop(mv->loop, &mv->wake);
		ev_io_stop(mv->loop, &mv->exits_io);
	}
	if (mv->staging)
		pagesw_pool_free(mv->staging);
	events_free(mv);
	proctab_free(&mv->procs);
	enforce_free(mv);
	if (mv->exits_epfd >= 0)
		close(mv->exits_epfd);
	if (mv->listener >= 0)
		close(mv->listener);
	free(mv->late);
	pthread_mutex_destroy(&mv->lock);
	for (size_t i = 0; i < mv->n_roots; i++)
		close(mv->roots[i].pidfd);
	free(mv->roots);
	pthread_mutex_destroy(&mv->adopt_lock);
	free(mv);
}

/* Children first seen here were found before their parents died: a fork
 * in a process with SIGKILL pending fails (copy_process). */
size_t host_kill_known(struct mv *mv)
{
	pid_t *v = NULL;
	size_t n = 0, cap = 0, sent = 0;
	struct proc *p;
	pthread_mutex_lock(&mv->lock);
	for (size_t i = 0; (p = proctab_next(&mv->procs, &i));) {
		if (p->pidfd >= 0 ? syscall(SYS_pidfd_send_signal, p->pidfd, SIGKILL, NULL, 0) == 0
				  : kill(p->pid, SIGKILL) == 0)
			sent++;
		procfs_children(p->pid, &v, &n, &cap);
	}
	pthread_mutex_unlock(&mv->lock);
	for (size_t i = 0; i < n; i++) {
		procfs_children(v[i], &v, &n, &cap);
		sent += kill(v[i], SIGKILL) == 0;
	}
	free(v);
	return sent;
}
