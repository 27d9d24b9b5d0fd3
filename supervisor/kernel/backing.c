#include "supervisor/kernel/backing.h"
#include "common/util.h"
#include "supervisor/kernel/procfs.h"
#include "supervisor/kernel/procmap.h"

#include <ctype.h>
#include <linux/kcmp.h>
#include <sys/syscall.h>
#include <dirent.h>
#include <stdlib.h>
#include <unistd.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#define PAGE 4096ull

static bool same_file(const struct stat *st, const struct as_region *r)
{
	return st->st_ino == r->inode && major(st->st_dev) == r->dev_major &&
	       minor(st->st_dev) == r->dev_minor;
}

static int open_map_file(pid_t tid, const struct as_region *r)
{
	char rel[64];
	snprintf(rel, sizeof(rel), "map_files/%llx-%llx", (unsigned long long)r->start,
		 (unsigned long long)r->end);
	int fd = procfs_open(tid, rel, O_RDONLY);
	if (fd < 0)
		return fd;
	struct stat st;
	if (fstat(fd, &st) < 0 || !same_file(&st, r)) {
		close(fd);
		return -ESTALE;
	}
	return fd;
}

int backing_open_rw(pid_t tid, uint64_t start, uint64_t end, uint64_t dev, uint64_t ino)
{
	char rel[64];
	snprintf(rel, sizeof(rel), "map_files/%llx-%llx", (unsigned long long)start,
		 (unsigned long long)end);
	int fd = procfs_open(tid, rel, O_RDWR);
	if (fd < 0)
		return fd;
	struct stat st;
	if (fstat(fd, &st) < 0 || st.st_ino != ino || st.st_dev != dev) {
		close(fd);
		return -ESTALE;
	}
	return fd;
}

struct users {
	const struct backing_id *ids;
	size_t n;
	bool *hit; /* ids mapped by this process */
};

static int user_vma(void *arg, const struct proc_vma *v)
{
	struct users *u = arg;
	for (size_t k = 0; k < u->n; k++)
		if (v->inode == u->ids[k].ino && proc_vma_dev(v) == u->ids[k].dev)
			u->hit[k] = true;
	return 0;
}

static int user_fd(void *arg, int dfd, const char *name)
{
	struct users *u = arg;
	struct stat st;
	if (fstatat(dfd, name, &st, 0) < 0)
		return 0;
	for (size_t k = 0; k < u->n; k++)
		if (st.st_ino == u->ids[k].ino && st.st_dev == u->ids[k].dev)
			u->hit[k] = true;
	return 0;
}

/* The objects process pid holds descriptors on (hit), or -errno. */
static int user_fds(pid_t pid, struct users *u)
{
	return procfs_fd_walk(pid, user_fd, u);
}

static void report(struct users *u, pid_t pid, enum backing_use how, backing_user_fn fn, void *arg)
{
	for (size_t k = 0; k < u->n; k++)
		if (u->hit[k])
			fn(arg, k, pid, how);
}

int backing_users(const struct backing_id *ids, size_t n, bool use_query, backing_user_fn fn,
		  void *arg)
{
	DIR *d = opendir("/proc");
	if (!d)
		return -errno;
	struct users u = {ids, n, xcalloc(MV_MAX(n, 1), sizeof(bool))};
	pid_t self = getpid();
	struct dirent *e;
	while ((e = readdir(d))) {
		if (!isdigit((unsigned char)e->d_name[0]))
			continue;
		pid_t pid = (pid_t)atoi(e->d_name);
		if (pid == self)
			continue;
		memset(u.hit, 0, n * sizeof(bool));
		int mrc = procmap_vmas(pid, use_query, 0, UINT64_MAX, user_vma, &u);
		if (mrc == 0)
			report(&u, pid, BACKING_MAPS, fn, arg);
		memset(u.hit, 0, n * sizeof(bool));
		int frc = user_fds(pid, &u);
		if (frc == 0)
			report(&u, pid, BACKING_FD, fn, arg);
		if (frc == -ESRCH || frc == -ENOENT || mrc == -ESRCH || mrc == -ENOENT)
			continue; /* gone meanwhile */
		if (frc < 0)
			fn(arg, n, pid, BACKING_UNKNOWN);
		else if (mrc < 0)
			fn(arg, n, pid, BACKING_MAPS_UNREAD);
	}
	closedir(d);
	free(u.hit);
	return 0;
}

struct fd_of {
	const struct as_region *r;
	int fd; /* the file reopened, or -ENOENT */
};

static int fd_of_region(void *arg, int dfd, const char *name)
{
	struct fd_of *o = arg;
	struct stat st;
	if (fstatat(dfd, name, &st, 0) < 0 || !S_ISREG(st.st_mode) || !same_file(&st, o->r))
		return 0;
	/* Opening the magic link reopens the file itself; a memfd
	 * allows it (and its seals still apply to writers). */
	o->fd = openat(dfd, name, O_RDONLY | O_CLOEXEC);
	if (o->fd >= 0)
		return 1;
	o->fd = -errno;
	return 0;
}

static int open_from_fds(pid_t tid, const struct as_region *r)
{
	struct fd_of o = {r, -ENOENT};
	int rc = procfs_fd_walk(tid, fd_of_region, &o);
	return rc < 0 ? rc : o.fd;
}

int backing_open(pid_t tid, const struct as_region *r, const char **source)
{
	int fd = open_map_file(tid, r);
	if (fd >= 0) {
		*source = "map_files";
		return fd;
	}
	fd = open_from_fds(tid, r);
	if (fd >= 0) {
		*source = "fd";
		return fd;
	}
	return fd;
}

static void add_run(struct as_range **runs, size_t *n, size_t *cap, uint64_t s, uint64_t e)
{
	if (*n && (*runs)[*n - 1].end >= s) {
		(*runs)[*n - 1].end = MV_MAX((*runs)[*n - 1].end, e);
		return;
	}
	if (*n == *cap)
		*runs = xrealloc(*runs, (*cap = *cap ? *cap * 2 : 64) * sizeof(**runs));
	(*runs)[(*n)++] = (struct as_range){s, e};
}

int backing_data_runs(int fd, uint64_t size, struct as_range **runs, size_t *n, size_t *cap)
{
	uint64_t at = 0;
	while (at < size) {
		off_t data = lseek(fd, (off_t)at, SEEK_DATA);
		if (data < 0) {
			if (errno == ENXIO)
				break; /* no data after at */
			if (errno == EINVAL) {
				/* No SEEK_DATA here: all of it is data. */
				add_run(runs, n, cap, at, (size + PAGE - 1) & ~(PAGE - 1));
				break;
			}
			return -errno;
		}
		off_t hole = lseek(fd, data, SEEK_HOLE);
		if (hole < 0)
			return -errno;
		uint64_t s = (uint64_t)data & ~(PAGE - 1);
		uint64_t e = ((uint64_t)hole + PAGE - 1) & ~(PAGE - 1);
		if (e > s)
			add_run(runs, n, cap, s, e);
		if ((uint64_t)hole <= at)
			break;
		at = (uint64_t)hole;
	}
	return 0;
}

int backing_read(int fd, uint64_t off, void *buf, size_t len)
{
	size_t got = 0;
	while (got < len) {
		ssize_t n = pread(fd, (char *)buf + got, len - got, (off_t)(off + got));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0) {
			memset((char *)buf + got, 0, len - got);
			break;
		}
		got += (size_t)n;
	}
	return 0;
}

/* ---- io_uring ---------------------------------------------------------- */

#define URING_NAME "anon_inode:[io_uring]"

/* The fdinfo text at path, parsed, read again until the tables are
 * listed whole. */
static int uring_info_at(const char *path, struct uring_info *u)
{
	for (int tries = 0; tries < 100; tries++) {
		_cleanup_free_ char *text = NULL;
		int rc = mv_read_file_at(AT_FDCWD, path, &text, NULL);
		if (rc < 0)
			return rc == -ENOENT ? -ESRCH : rc;
		rc = parse_uring_fdinfo(text, u);
		if (rc < 0)
			return rc;
		if (u->bufs_listed == u->n_bufs && u->files_listed == u->n_files)
			return 0;
		uring_info_free(u);
		usleep(1000);
	}
	return -EAGAIN;
}

static int uring_call(const char *path, int (*fn)(void *, const struct uring_info *), void *arg)
{
	struct uring_info u;
	int rc = uring_info_at(path, &u);
	if (rc < 0)
		return rc;
	rc = fn(arg, &u);
	uring_info_free(&u);
	return rc;
}

struct rings {
	pid_t pid;
	int (*fn)(void *, const struct uring_info *);
	void *arg;
	int seen[64]; /* descriptors of the rings asked (the first 64) */
	int n;
};

static int ring_fd(void *arg, int dfd, const char *name)
{
	struct rings *g = arg;
	char link[64], path[64];
	ssize_t l = readlinkat(dfd, name, link, sizeof(link) - 1);
	if (l < 0)
		return 0; /* closed meanwhile */
	link[l] = 0;
	if (strcmp(link, URING_NAME) != 0)
		return 0;
	int fd = atoi(name);
	for (int k = 0; k < g->n && k < (int)ARRAY_SIZE(g->seen); k++)
		if (syscall(SYS_kcmp, g->pid, g->pid, KCMP_FILE, g->seen[k], fd) == 0)
			return 0;
	if (g->n < (int)ARRAY_SIZE(g->seen))
		g->seen[g->n] = fd;
	g->n++;
	snprintf(path, sizeof(path), "/proc/%d/fdinfo/%s", g->pid, name);
	return uring_call(path, g->fn, g->arg);
}

/* The rings pid holds as descriptors, each file once (dup'ed descriptors
 * and those inherited twice name one ring: kcmp(KCMP_FILE)). */
static int uring_fds(pid_t pid, int (*fn)(void *, const struct uring_info *), void *arg)
{
	struct rings g = {.pid = pid, .fn = fn, .arg = arg};
	int rc = procfs_fd_walk(pid, ring_fd, &g);
	return rc < 0 ? rc : g.n;
}

/* Rings mapped: each maps its submission queue ring at offset 0
 * (IORING_OFF_SQ_RING; the completion ring too, with
 * IORING_FEAT_SINGLE_MMAP). */
static int uring_map(void *arg, const struct proc_vma *v)
{
	int *n = arg;
	if (proc_vma_named(v, URING_NAME) && v->offset == 0)
		(*n)++;
	return 0;
}

int backing_urings(pid_t pid, bool use_query, int (*fn)(void *arg, const struct uring_info *u),
		   void *arg)
{
	int n = uring_fds(pid, fn, arg);
	if (n < 0)
		return n;
	int mapped = 0;
	int rc = procmap_vmas(pid, use_query, 0, UINT64_MAX, uring_map, &mapped);
	if (rc < 0)
		return rc;
	/* A ring mapped but held by no descriptor (its descriptor closed
	 * after IORING_REGISTER_RING_FDS) cannot be asked: its fdinfo is
	 * reached through a descriptor only (map_files refuses an
	 * anonymous inode: ENXIO). */
	return mapped > n ? -EBADFD : n;
}
