/* Descriptors at the mark (supervisor/rollback/mark.h): which were open,
 * and the offset of each regular file open for reading only: what the
 * program read since the mark, it reads again. A file open for writing
 * keeps its offset: its contents are not rolled back, and output written
 * since (a log, stdout redirected to a file) must not be overwritten.
 *
 * An offset lives in the open file description, which the process shares
 * with a duplicate of it: memvisor takes one of each regular file's at
 * the mark (pidfd_getfd) and puts the offset back through it, without a
 * call in the process. Only regular files are duplicated: a duplicate of
 * a pipe's or a socket's end would keep it open, and its reader would
 * never see the end of it. */
#include "common/log.h"
#include "common/util.h"
#include "supervisor/kernel/procfs.h"
#include "supervisor/rollback/mark.h"
#include "state/procparse.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/kcmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

struct fd_list {
	struct rb_fd *v;
	size_t n, cap;
};

static int add_fd(void *arg, int dfd, const char *name)
{
	struct fd_list *l = arg;
	struct stat st;
	if (fstatat(dfd, name, &st, 0) < 0)
		return 0; /* closed meanwhile */
	if (l->n == l->cap)
		l->v = xrealloc(l->v, (l->cap = l->cap ? l->cap * 2 : 32) * sizeof(*l->v));
	struct rb_fd *f = &l->v[l->n++];
	*f = (struct rb_fd){.fd = atoi(name),
			    .dup = -1,
			    .dev = st.st_dev,
			    .ino = st.st_ino,
			    .regular = S_ISREG(st.st_mode)};
	snprintf(f->kind, sizeof(f->kind), "%s",
		 S_ISREG(st.st_mode)	? "file"
		 : S_ISFIFO(st.st_mode) ? "pipe"
		 : S_ISSOCK(st.st_mode) ? "socket"
		 : S_ISCHR(st.st_mode)	? "device"
		 : S_ISDIR(st.st_mode)	? "directory"
					: "other");
	return 0;
}

/* FD_CLOEXEC of descriptor fd of tid, from its fdinfo's flags. */
static bool fd_cloexec(pid_t tid, int fd)
{
	char rel[32];
	_cleanup_free_ char *buf = NULL;
	unsigned long flags = 0;
	snprintf(rel, sizeof(rel), "fdinfo/%d", fd);
	return procfs_read(tid, rel, &buf, NULL) == 0 && parse_fdinfo_flags(buf, &flags) == 0 &&
	       (flags & O_CLOEXEC);
}

/* The open descriptors of pid, in the directory's order, with what each
 * names. */
static int list_fds(pid_t pid, struct rb_fd **out, size_t *n)
{
	struct fd_list l = {0};
	int rc = procfs_fd_walk(pid, add_fd, &l);
	if (rc < 0) {
		free(l.v);
		return rc;
	}
	*out = l.v;
	*n = l.n;
	return 0;
}

int rb_files_mark(struct rb_mark *m, pid_t tid)
{
	int rc = list_fds(tid, &m->fds, &m->n_fds);
	if (rc < 0)
		return rc;
	for (size_t i = 0; i < m->n_fds; i++) {
		struct rb_fd *f = &m->fds[i];
		if (!f->regular || m->n_rewindable >= RB_FILES_MAX)
			continue;
		f->dup = (int)syscall(SYS_pidfd_getfd, m->pidfd, f->fd, 0);
		if (f->dup < 0)
			continue;
		int fl = fcntl(f->dup, F_GETFL);
		off_t off =
		    fl >= 0 && (fl & O_ACCMODE) == O_RDONLY ? lseek(f->dup, 0, SEEK_CUR) : -1;
		if (off < 0) {
			close(f->dup);
			f->dup = -1;
			continue;
		}
		f->off = (uint64_t)off;
		f->cloexec = fd_cloexec(tid, f->fd);
		m->n_rewindable++;
	}
	return 0;
}

void rb_files_free(struct rb_mark *m)
{
	for (size_t i = 0; i < m->n_fds; i++)
		if (m->fds[i].dup >= 0)
			close(m->fds[i].dup);
	free(m->fds);
	m->fds = NULL;
	m->n_fds = 0;
}

unsigned rb_files_rewind(struct rb_mark *m)
{
	unsigned moved = 0;
	for (size_t i = 0; i < m->n_fds; i++) {
		struct rb_fd *f = &m->fds[i];
		if (f->dup < 0)
			continue;
		off_t now = lseek(f->dup, 0, SEEK_CUR);
		if (now >= 0 && (uint64_t)now != f->off &&
		    lseek(f->dup, (off_t)f->off, SEEK_SET) == (off_t)f->off)
			moved++;
	}
	return moved;
}

int rb_files_new(const struct rb_mark *m, pid_t tid, int **out, size_t *n)
{
	struct rb_fd *now = NULL;
	size_t n_now = 0;
	int rc = list_fds(tid, &now, &n_now);
	if (rc < 0)
		return rc;
	int *v = xcalloc(n_now + 1, sizeof(*v));
	size_t k = 0;
	for (size_t i = 0; i < n_now; i++) {
		bool known = false;
		for (size_t j = 0; j < m->n_fds && !known; j++)
			known = m->fds[j].fd == now[i].fd && m->fds[j].dev == now[i].dev &&
				m->fds[j].ino == now[i].ino;
		if (!known)
			v[k++] = now[i].fd;
	}
	free(now);
	*out = v;
	*n = k;
	return 0;
}

/* Is descriptor fd of tid another file than f, or, for a duplicated
 * one, another open of it (kcmp KCMP_FILE: a file closed and opened again
 * since has its own offset)? */
static bool replaced(const struct rb_fd *f, pid_t tid, const struct stat *st)
{
	if (f->dup >= 0) {
		long r = syscall(SYS_kcmp, getpid(), tid, KCMP_FILE, f->dup, f->fd);
		if (r >= 0)
			return r != 0;
	}
	return st->st_dev != f->dev || st->st_ino != f->ino;
}

int rb_files_closed(const struct rb_mark *m, pid_t tid, struct rb_fd_gone **out, size_t *n)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/fd", tid);
	int dir = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dir < 0)
		return -errno;
	struct rb_fd_gone *v = xcalloc(m->n_fds + 1, sizeof(*v));
	size_t k = 0;
	for (size_t j = 0; j < m->n_fds; j++) {
		char name[16];
		struct stat st;
		snprintf(name, sizeof(name), "%d", m->fds[j].fd);
		if (fstatat(dir, name, &st, 0) == 0) {
			if (replaced(&m->fds[j], tid, &st))
				v[k++] = (struct rb_fd_gone){j, true};
			continue;
		}
		if (errno != ENOENT && fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
			continue; /* open, but its file cannot be reached from here */
		if (errno != ENOENT) {
			int e = errno;
			free(v);
			close(dir);
			return -e; /* ESRCH and the like: the process is gone */
		}
		v[k++] = (struct rb_fd_gone){j, false};
	}
	close(dir);
	*out = v;
	*n = k;
	return 0;
}
