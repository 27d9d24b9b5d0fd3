#include "supervisor/supervise/point.h"
#include "common/log.h"
#include "common/util.h"

#include <errno.h>
#include <linux/audit.h>
#include <seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef __X32_SYSCALL_BIT
#define __X32_SYSCALL_BIT 0x40000000
#endif

static const uint32_t abi_arch[MV_ABI_COUNT] = {SCMP_ARCH_X86_64, SCMP_ARCH_X86, SCMP_ARCH_X32};

static int nr_on(enum mv_abi abi, const char *name)
{
	int nr = seccomp_syscall_resolve_name_arch(abi_arch[abi], name);
	return nr < 0 ? -1 : nr;
}

int point_split(const char *spec, char *name, size_t cap, int *fd, const char **bad_fd)
{
	*bad_fd = NULL;
	*fd = -1;
	const char *colon = strchr(spec, ':');
	size_t n = colon ? (size_t)(colon - spec) : strlen(spec);
	if (n == 0 || n >= cap)
		return -EINVAL;
	memcpy(name, spec, n);
	name[n] = 0;
	if (colon) {
		char *end;
		errno = 0;
		long v = strtol(colon + 1, &end, 10);
		if (!colon[1] || *end || errno || v < 0 || v > INT32_MAX) {
			*bad_fd = colon + 1;
			return -EINVAL;
		}
		*fd = (int)v;
	}
	return 0;
}

int point_parse(struct point *p, const char *spec, char *why, size_t len)
{
	memset(p, 0, sizeof(*p));
	const char *bad_fd;
	if (point_split(spec, p->name, sizeof(p->name), &p->fd, &bad_fd) < 0) {
		if (bad_fd)
			snprintf(why, len, "'%s' is not a descriptor number", bad_fd);
		else
			snprintf(why, len, "'%s': SYSCALL or SYSCALL:FD (read:0)", spec);
		return -EINVAL;
	}
	if (nr_on(MV_ABI_X86_64, p->name) < 0) {
		snprintf(why, len, "no system call named %s", p->name);
		return -EINVAL;
	}
	if (syscalls_by_name(p->name) != MV_SC_UNKNOWN || !strcmp(p->name, "exit") ||
	    !strcmp(p->name, "exit_group")) {
		snprintf(why, len,
			 "%s is a call memvisor notifies already (its policy decides it, or a "
			 "run stops there anyway): name another, such as read:0",
			 p->name);
		return -EINVAL;
	}
	for (int a = 0; a < MV_ABI_COUNT; a++) {
		p->nr[a] = nr_on((enum mv_abi)a, p->name);
		p->exit_nr[a] = nr_on((enum mv_abi)a, "exit");
		p->exit_group_nr[a] = nr_on((enum mv_abi)a, "exit_group");
	}
	pthread_mutex_init(&p->mu, NULL);
	return 0;
}

bool point_matches(const struct point *p, long nr, int fd)
{
	return p->name[0] && nr == p->nr[MV_ABI_X86_64] && fd == p->fd;
}

static enum point_kind kind_of(const struct point *p, const struct seccomp_data *d)
{
	enum mv_abi a;
	if (d->arch == AUDIT_ARCH_I386)
		a = MV_ABI_I386;
	else if (d->arch == AUDIT_ARCH_X86_64)
		a = (d->nr & (int)__X32_SYSCALL_BIT) ? MV_ABI_X32 : MV_ABI_X86_64;
	else
		return POINT_NONE;
	if (d->nr == p->nr[a] && (p->fd < 0 || (uint32_t)d->args[0] == (uint32_t)p->fd))
		return POINT_CALL;
	if (d->nr == p->exit_group_nr[a])
		return POINT_EXIT_GROUP;
	if (d->nr == p->exit_nr[a])
		return POINT_EXIT;
	return POINT_NONE;
}

int point_answer(const struct point_note *n, int error)
{
	struct seccomp_notif_resp r = {.id = n->id};
	if (error)
		r.error = -error;
	else
		r.flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
	for (int attempt = 0; attempt < 3; attempt++) {
		if (ioctl(n->listener, SECCOMP_IOCTL_NOTIF_SEND, &r) == 0)
			return 0;
		if (errno == ENOENT)
			return -ENOENT;
	}
	return -errno;
}

bool point_notified(struct point *p, int listener, const struct seccomp_notif *req)
{
	enum point_kind k = kind_of(p, &req->data);
	if (k == POINT_NONE)
		return false;
	struct point_note n = {.id = req->id,
			       .tid = (pid_t)req->pid,
			       .kind = k,
			       .nr = req->data.nr,
			       .arg0 = req->data.args[0],
			       .ip = req->data.instruction_pointer,
			       .listener = listener};
	pthread_mutex_lock(&p->mu);
	pid_t armed = p->armed;
	bool pass = false;
	for (size_t i = 0; armed && i < p->n_pass; i++) {
		const struct point_pass *x = &p->pass[i];
		if (x->tid != n.tid)
			continue;
		pass = x->nr == n.nr && x->ip == n.ip && x->arg0 == n.arg0;
		p->pass[i] = p->pass[--p->n_pass]; /* its first: once */
		break;
	}
	if (pass)
		armed = 0;
	bool queued = armed && p->n < POINT_QUEUE;
	if (queued)
		p->q[p->n++] = n;
	if (queued)
		p->handed++;
	else
		p->continued++;
	int sig = p->wake_signal;
	pthread_mutex_unlock(&p->mu);
	if (armed)
		syscall(SYS_tgkill, getpid(), armed, sig);
	if (!queued) {
		/* Nobody waits for it (or, at POINT_QUEUE waiting, a thread
		 * storm of exits): the call goes on as it would unsupervised. */
		int rc = point_answer(&n, 0);
		if (rc < 0 && rc != -ENOENT)
			log_warn("seccomp answer to %d: %s", n.tid, strerror(-rc));
	}
	return true;
}

void point_arm(struct point *p, pid_t tid, int sig, const struct point_pass *pass, size_t n)
{
	pthread_mutex_lock(&p->mu);
	p->armed = tid;
	p->wake_signal = sig;
	p->n_pass = MV_MIN(n, (size_t)POINT_PASS);
	if (p->n_pass)
		memcpy(p->pass, pass, p->n_pass * sizeof(*pass));
	pthread_mutex_unlock(&p->mu);
}

size_t point_take(struct point *p, struct point_note *out, size_t max)
{
	pthread_mutex_lock(&p->mu);
	size_t n = MV_MIN(max, p->n);
	memcpy(out, p->q, n * sizeof(*out));
	memmove(p->q, p->q + n, (p->n - n) * sizeof(*out));
	p->n -= n;
	pthread_mutex_unlock(&p->mu);
	return n;
}
