/* Small helpers shared by every part: cleanup attributes, file reading,
 * time, sizes. Functions that can fail return 0 or -errno. */
#ifndef MV_UTIL_H
#define MV_UTIL_H

#include "common/err.h"

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define MV_MIN(a, b)  ((a) < (b) ? (a) : (b))
#define MV_MAX(a, b)  ((a) > (b) ? (a) : (b))

#define _cleanup_(f) __attribute__((cleanup(f)))

static inline void mv_freep(void *p)
{
	free(*(void **)p);
}

static inline void mv_closep(int *fd)
{
	if (*fd >= 0) {
		int saved = errno;
		close(*fd);
		errno = saved;
	}
}

/* qsort, which must not be given a NULL base even for 0 elements (C11
 * 7.22.5: UBSan stops the program on it): an empty array may be NULL. */
static inline void mv_qsort(void *base, size_t n, size_t size,
			    int (*cmp)(const void *, const void *))
{
	if (n > 1)
		qsort(base, n, size, cmp);
}

#define _cleanup_free_	_cleanup_(mv_freep)
#define _cleanup_close_ _cleanup_(mv_closep)

/* Hand a cleanup-managed value to the caller: returns it and disarms the cleanup. */
#define mv_steal_ptr(p)                                                                            \
	({                                                                                         \
		__typeof__(p) _tmp = (p);                                                          \
		(p) = NULL;                                                                        \
		_tmp;                                                                              \
	})
#define mv_steal_fd(fd)                                                                            \
	({                                                                                         \
		int _tmp = (fd);                                                                   \
		(fd) = -1;                                                                         \
		_tmp;                                                                              \
	})

/* Allocation that cannot fail: out of memory in the supervisor aborts with a message. */
void *xmalloc(size_t n);
/* Page-aligned (O_DIRECT buffers); free() it. */
void *xmalloc_pages(size_t n);
void *xcalloc(size_t n, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);

/* Monotonic and wall clocks in nanoseconds. */
uint64_t mv_now_ns(void);
/* CPU time of the calling thread (CLOCK_THREAD_CPUTIME_ID), ns. */
uint64_t mv_thread_cpu_ns(void);
uint64_t mv_wall_ns(void);

/* bytes over ns as whole bytes a second (0 when ns is 0): the one form of
 * a rate in JSON output (docs/protocol.md, "Times and rates"). */
uint64_t mv_rate(uint64_t bytes, uint64_t ns);

/* Read a whole file (relative to dirfd, or absolute) into a NUL-terminated
 * malloc'd buffer. Returns 0 or -errno; *len excludes the NUL. */
int mv_read_file_at(int dirfd, const char *path, char **out, size_t *len);

/* Open a file a user named, for reading, if it is a regular file, and
 * never anything else: path (relative to dirfd, or absolute) is first
 * opened O_PATH (flags: 0 or O_NOFOLLOW), which runs no device's open and
 * waits for no FIFO writer; only when fstat says a regular file is it
 * opened for reading, through /proc/self/fd (the very file checked),
 * O_RDONLY|O_NONBLOCK|O_CLOEXEC|O_NOCTTY. Returns the fd, with *st filled
 * when st is not NULL, or -errno with err saying why, naming the file
 * name (for messages): -EINVAL "NAME is a FIFO, not a regular file", else
 * "NAME: <strerror>". */
int mv_open_regular_at(int dirfd, const char *path, int flags, const char *name, struct stat *st,
		       struct mv_err *err);

/* The file behind fd opened again for reading with O_DIRECT (through
 * /proc/self/fd: the very file), or -1 where the file system refuses. */
int mv_reopen_direct(int fd);

/* What a file of mode is, for a message: "a FIFO", "a character
 * device", "a directory"... */
const char *mv_file_kind(mode_t mode);

/* Read fd from where it is to its end, at most max bytes, into a
 * NUL-terminated malloc'd buffer (grown as data comes, so a size the
 * file claims is never allocated up front). 0, -EFBIG when the file
 * holds more than max bytes (reading stops at max + 1), or -errno. *len
 * excludes the NUL. */
int mv_read_fd_max(int fd, size_t max, char **out, size_t *len);

/* Write all of buf to fd, retrying on EINTR and short writes. 0 or -errno. */
int mv_write_all(int fd, const void *buf, size_t len);

/* Parse "4096", "64K", "512M", "2G", "1T" (binary multiples) into bytes.
 * 0, or -EINVAL for syntax, -ERANGE for overflow. */
int mv_parse_size(const char *s, uint64_t *out);

/* The word for n things: one when n is 1, else many ("1 process",
 * "2 processes"). */
const char *mv_plural(long long n, const char *one, const char *many);

/* Format bytes as "1.5 GiB" style into buf. Returns buf. */
char *mv_human_size(uint64_t bytes, char *buf, size_t len);

/* s as one shell word, for a command printed to be pasted: as it is when
 * no character in it means anything to a shell, else in single quotes (a
 * quote in it as '\''). Into buf, cut short when len is too small (4
 * times strlen(s) + 3 always does). Returns buf. */
char *mv_shell_word(const char *s, char *buf, size_t len);

/* Private anonymous memory of len bytes (rounded up to 2 MiB) at a 2 MiB
 * boundary, in transparent huge pages where the system gives them
 * (MADV_HUGEPAGE): on a VM with shadow page tables its first touch costs
 * one fault and one zeroing a 2 MiB, some 30x less than in 4 KiB pages.
 * MAP_FAILED with errno on failure; munmap it with the rounded length
 * (mv_huge_len). */
size_t mv_huge_len(size_t len);
void *mv_map_huge(size_t len);

/* Create a new private file beside path to be renamed over it:
 * PATH.tmp.XXXXXX, made with O_CREAT|O_EXCL|O_NOFOLLOW (mode 0600), so
 * nothing planted at a guessable name (a symlink, a file of another user)
 * is ever opened. Returns the fd and sets *tmp (malloc'd), or -errno. */
int mv_create_beside(const char *path, char **tmp);

/* Finish a file made by mv_create_beside: close fd and, if rc (the
 * writing's result) and the close are 0, rename tmp over path; on any
 * failure remove tmp. Returns the first error (0 or -errno). */
int mv_finish_beside(int fd, const char *tmp, const char *path, int rc);

/* Open path for appending, creating it (mode) if missing, without
 * following a symlink that another user owns (what fs.protected_symlinks
 * does in sticky directories, everywhere), and never blocking on a FIFO.
 * Returns the fd or -errno (-ELOOP for an untrusted symlink). */
int mv_open_append(const char *path, mode_t mode);

/* Make an fd close-on-exec. 0 or -errno. */
int mv_set_cloexec(int fd);

/* The exit code memvisor returns for a wait status, like env(1): the
 * status, 128 + the signal, or 125. */
int mv_exit_code(int wait_status);

#endif
