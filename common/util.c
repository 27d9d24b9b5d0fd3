#include "common/util.h"

#include <ctype.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

static void oom(size_t n)
{
	/* Only the supervisor's own bookkeeping allocates; nothing sane can
	 * continue without it, and the tracee does not depend on our heap. */
	fprintf(stderr, "memvisor: out of memory allocating %zu bytes\n", n);
	abort();
}

void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p)
		oom(n);
	return p;
}

void *xmalloc_pages(size_t n)
{
	void *p = NULL;
	if (posix_memalign(&p, 4096, n ? n : 1) != 0)
		oom(n);
	return p;
}

void *xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size ? size : 1);
	if (!p)
		oom(n * size);
	return p;
}

void *xrealloc(void *p, size_t n)
{
	p = realloc(p, n ? n : 1);
	if (!p)
		oom(n);
	return p;
}

char *xstrdup(const char *s)
{
	char *p = strdup(s);
	if (!p)
		oom(strlen(s));
	return p;
}

static uint64_t clock_ns(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t mv_now_ns(void)
{
	return clock_ns(CLOCK_MONOTONIC);
}

uint64_t mv_thread_cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t mv_wall_ns(void)
{
	return clock_ns(CLOCK_REALTIME);
}

const char *mv_plural(long long n, const char *one, const char *many)
{
	return n == 1 ? one : many;
}

uint64_t mv_rate(uint64_t bytes, uint64_t ns)
{
	return ns ? (uint64_t)((double)bytes * 1e9 / (double)ns + 0.5) : 0;
}

int mv_read_file_at(int dirfd, const char *path, char **out, size_t *len)
{
	_cleanup_close_ int fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	return mv_read_fd_max(fd, SIZE_MAX / 2, out, len);
}

const char *mv_file_kind(mode_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFREG:
		return "a regular file";
	case S_IFDIR:
		return "a directory";
	case S_IFIFO:
		return "a FIFO";
	case S_IFCHR:
		return "a character device";
	case S_IFBLK:
		return "a block device";
	case S_IFSOCK:
		return "a socket";
	case S_IFLNK:
		return "a symbolic link";
	default:
		return "not a file";
	}
}

int mv_open_regular_at(int dirfd, const char *path, int flags, const char *name, struct stat *st,
		       struct mv_err *err)
{
	struct stat local;
	if (!st)
		st = &local;
	/* A plain open of a FIFO waits for a writer (fifo_open), and one of
	 * a device runs its driver's open (a tape rewinds, a watchdog arms);
	 * O_PATH does neither. */
	_cleanup_close_ int pfd = openat(dirfd, path, O_PATH | O_CLOEXEC | (flags & O_NOFOLLOW));
	if (pfd < 0 || fstat(pfd, st) < 0)
		return mv_err_set(err, -errno, NULL, "%s: %s", name, strerror(errno));
	if (!S_ISREG(st->st_mode))
		return mv_err_set(err, -EINVAL, NULL, "%s is %s, not a regular file", name,
				  mv_file_kind(st->st_mode));
	char self[64];
	snprintf(self, sizeof(self), "/proc/self/fd/%d", pfd);
	/* O_NONBLOCK stays: reads of a regular file ignore it, and it keeps
	 * any odd file (FUSE, /proc) from being waited on. */
	int fd = open(self, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return mv_err_set(err, -errno, NULL, "%s: %s", name, strerror(errno));
	return fd;
}

int mv_read_fd_max(int fd, size_t max, char **out, size_t *len)
{
	size_t cap = MV_MIN(max + 1, (size_t)4096), n = 0;
	_cleanup_free_ char *buf = xmalloc(cap + 1);
	while (n <= max) {
		if (n == cap) {
			cap = MV_MIN(cap * 2, max + 1);
			buf = xrealloc(buf, cap + 1);
		}
		ssize_t r = read(fd, buf + n, cap - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			break;
		n += (size_t)r;
	}
	if (n > max)
		return -EFBIG;
	buf[n] = '\0';
	if (len)
		*len = n;
	*out = mv_steal_ptr(buf);
	return 0;
}

int mv_write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;
	while (len > 0) {
		ssize_t w = write(fd, p, len);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += w;
		len -= (size_t)w;
	}
	return 0;
}

int mv_parse_size(const char *s, uint64_t *out)
{
	if (!s || !*s || *s == '-' || *s == '+')
		return -EINVAL;
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (end == s)
		return -EINVAL;
	if (errno == ERANGE)
		return -ERANGE;
	unsigned shift = 0;
	switch (*end) {
	case '\0':
		break;
	case 'k':
	case 'K':
		shift = 10;
		break;
	case 'm':
	case 'M':
		shift = 20;
		break;
	case 'g':
	case 'G':
		shift = 30;
		break;
	case 't':
	case 'T':
		shift = 40;
		break;
	default:
		return -EINVAL;
	}
	if (*end) {
		end++;
		/* Accept "512M", "512MB", "512MiB". */
		if (*end == 'i')
			end++;
		if (*end == 'B' || *end == 'b')
			end++;
		if (*end)
			return -EINVAL;
	}
	if (shift && v > (UINT64_MAX >> shift))
		return -ERANGE;
	*out = (uint64_t)v << shift;
	return 0;
}

char *mv_human_size(uint64_t bytes, char *buf, size_t len)
{
	static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
	double v = (double)bytes;
	size_t u = 0;
	while (v >= 1024.0 && u + 1 < ARRAY_SIZE(units)) {
		v /= 1024.0;
		u++;
	}
	if (u == 0)
		snprintf(buf, len, "%" PRIu64 " B", bytes);
	else
		snprintf(buf, len, "%.1f %s", v, units[u]);
	return buf;
}

char *mv_shell_word(const char *s, char *buf, size_t len)
{
	bool plain = *s != '\0';
	for (const char *p = s; *p && plain; p++)
		plain = isalnum((unsigned char)*p) || strchr("_-./:=@%+,", *p);
	if (plain || len < 3) {
		snprintf(buf, len, "%s", plain ? s : "");
		return buf;
	}
	size_t n = 0;
	buf[n++] = '\'';
	for (const char *p = s; *p; p++) {
		size_t need = *p == '\'' ? 4 : 1;
		if (n + need + 2 > len)
			break;
		memcpy(buf + n, *p == '\'' ? "'\\''" : p, need);
		n += need;
	}
	buf[n++] = '\'';
	buf[n] = '\0';
	return buf;
}

int mv_set_cloexec(int fd)
{
	int fl = fcntl(fd, F_GETFD);
	if (fl < 0 || fcntl(fd, F_SETFD, fl | FD_CLOEXEC) < 0)
		return -errno;
	return 0;
}

int mv_create_beside(const char *path, char **tmp)
{
	static const char digits[] = "abcdefghijklmnopqrstuvwxyz0123456789";
	size_t n = strlen(path) + 16;
	char *name = xmalloc(n);
	/* The suffix only has to be hard to collide with; O_EXCL makes a
	 * guessed or planted name harmless (EEXIST: try another). */
	uint64_t seed = mv_now_ns() ^ ((uint64_t)getpid() << 32) ^ (uintptr_t)name;
	for (int tries = 0; tries < 100; tries++) {
		char sfx[7];
		for (int i = 0; i < 6; i++) {
			seed = seed * 6364136223846793005ull + 1442695040888963407ull;
			sfx[i] = digits[(seed >> 33) % (sizeof(digits) - 1)];
		}
		sfx[6] = '\0';
		snprintf(name, n, "%s.tmp.%s", path, sfx);
		int fd = open(name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd >= 0) {
			*tmp = name;
			return fd;
		}
		if (errno != EEXIST) {
			int e = errno;
			free(name);
			return -e;
		}
	}
	free(name);
	return -EEXIST;
}

int mv_finish_beside(int fd, const char *tmp, const char *path, int rc)
{
	if (close(fd) < 0 && !rc)
		rc = -errno;
	if (!rc && rename(tmp, path) < 0)
		rc = -errno;
	if (rc)
		unlink(tmp);
	return rc;
}

int mv_open_append(const char *path, mode_t mode)
{
	/* A symlink of ours or root's (/dev/stderr) is followed; one another
	 * user planted is not. lstat then open leaves a window only where
	 * that user could replace our own symlink, i.e. in a directory they
	 * may write that is not sticky: theirs to begin with. */
	struct stat st;
	int nofollow = O_NOFOLLOW;
	if (lstat(path, &st) == 0 && S_ISLNK(st.st_mode)) {
		if (st.st_uid != geteuid() && st.st_uid != 0)
			return -ELOOP;
		nofollow = 0;
	}
	int fd =
	    open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NONBLOCK | nofollow, mode);
	if (fd < 0)
		return -errno;
	/* O_NONBLOCK was for the open of a FIFO with no reader (ENXIO);
	 * writes to a file or terminal block as usual. */
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0) {
		int e = errno;
		close(fd);
		return -e;
	}
	return fd;
}

int mv_exit_code(int status)
{
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return 125;
}

int mv_reopen_direct(int fd)
{
	char p[64];
	snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
	return open(p, O_RDONLY | O_CLOEXEC | O_DIRECT);
}

size_t mv_huge_len(size_t len)
{
	const size_t huge = 2u << 20;
	return (len + huge - 1) & ~(huge - 1);
}

void *mv_map_huge(size_t len)
{
	const size_t huge = 2u << 20;
	len = mv_huge_len(len ? len : 1);
	char *m =
	    mmap(NULL, len + huge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return m;
	char *a = (char *)(((uintptr_t)m + huge - 1) & ~(uintptr_t)(huge - 1));
	if (a > m)
		munmap(m, (size_t)(a - m));
	if ((size_t)(a - m) < huge)
		munmap(a + len, huge - (size_t)(a - m));
	madvise(a, len, MADV_HUGEPAGE);
	return a;
}
