#include "supervisor/image/dir.h"
#include "common/fault.h"
#include "common/log.h"
#include "common/util.h"
#include "state/image.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif
#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif

bool imgdir_is_image(int dirfd)
{
	char head[512];
	/* Asked by `checkpoint --force` on the main loop: a FIFO or a device
	 * named manifest.json is no image, and is not opened (a plain open
	 * of a FIFO waits for a writer). A symlink is not followed: what is
	 * replaced is the directory as it is. */
	_cleanup_close_ int fd =
	    mv_open_regular_at(dirfd, IMG_MANIFEST, O_NOFOLLOW, IMG_MANIFEST, NULL, NULL);
	if (fd < 0)
		return false;
	ssize_t n = pread(fd, head, sizeof(head) - 1, 0);
	if (n <= 0)
		return false;
	head[n] = '\0';
	return strstr(head, "\"format\":\"" IMG_FORMAT "\"") != NULL;
}

static bool dir_empty(int dirfd)
{
	int fd = dup(dirfd);
	if (fd < 0)
		return false;
	DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return false;
	}
	rewinddir(d);
	bool empty = true;
	struct dirent *e;
	while (empty && (e = readdir(d)))
		empty = strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0;
	closedir(d);
	return empty;
}

/* May an existing DIR be replaced (with force)? */
static int check_existing(struct imgdir *d, bool force, struct mv_err *err)
{
	struct stat st;
	if (fstatat(d->parentfd, d->base, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		if (errno == ENOENT)
			return 0;
		return mv_err_set(err, -errno, NULL, "%s: %s", d->dir, strerror(errno));
	}
	if (!force)
		return mv_err_set(err, -EEXIST, NULL, "%s exists (use --force to replace it)",
				  d->dir);
	if (!S_ISDIR(st.st_mode))
		return mv_err_set(err, -ENOTEMPTY, NULL,
				  "%s exists and is not a directory; not replacing it", d->dir);
	_cleanup_close_ int fd =
	    openat(d->parentfd, d->base, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return mv_err_set(err, -errno, NULL, "%s: %s", d->dir, strerror(errno));
	if (!dir_empty(fd) && !imgdir_is_image(fd))
		return mv_err_set(err, -ENOTEMPTY, NULL,
				  "%s exists and is not a memvisor image; not replacing it",
				  d->dir);
	d->replace = true;
	return 0;
}

static int make_tmp(struct imgdir *d, struct mv_err *err)
{
	static unsigned counter; /* process-wide: names differ across supervisors */
	for (int tries = 0; tries < 100; tries++) {
		char name[4200];
		snprintf(name, sizeof(name), ".%s.tmp.%d.%u", d->base, (int)getpid(),
			 __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED));
		if (mkdirat(d->parentfd, name, 0700) < 0) {
			if (errno == EEXIST)
				continue;
			return mv_err_set(err, -errno, NULL,
					  "cannot create a directory next to %s: %s", d->dir,
					  strerror(errno));
		}
		d->tmpbase = xstrdup(name);
		/* The umask may have taken bits we need; nothing more than
		 * the owner gets any. */
		d->tmpfd =
		    openat(d->parentfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
		if (d->tmpfd < 0 || fchmod(d->tmpfd, 0700) < 0) {
			int e = errno;
			imgdir_abort(d);
			return mv_err_set(err, -e, NULL, "%s: %s", name, strerror(e));
		}
		return 0;
	}
	return mv_err_set(err, -EEXIST, NULL, "cannot find a free temporary name next to %s",
			  d->dir);
}

int imgdir_prepare(const char *dir, bool force, struct imgdir *d, struct mv_err *err)
{
	memset(d, 0, sizeof(*d));
	d->parentfd = d->tmpfd = -1;
	size_t len = strlen(dir);
	while (len > 1 && dir[len - 1] == '/')
		len--;
	if (dir[0] != '/')
		return mv_err_set(err, -EINVAL, NULL, "%s: the directory must be an absolute path",
				  dir);
	d->dir = strndup(dir, len);
	const char *slash = strrchr(d->dir, '/');
	d->base = xstrdup(slash + 1);
	if (!*d->base || strcmp(d->base, ".") == 0 || strcmp(d->base, "..") == 0)
		return mv_err_set(err, -EINVAL, NULL, "%s: not a name for a new directory", dir);
	_cleanup_free_ char *parent =
	    slash == d->dir ? xstrdup("/") : strndup(d->dir, (size_t)(slash - d->dir));
	d->parentfd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (d->parentfd < 0)
		return mv_err_set(err, -errno, NULL, "%s: %s", parent, strerror(errno));
	int rc = check_existing(d, force, err);
	if (rc < 0)
		return rc;
	return make_tmp(d, err);
}

int imgdir_write_file(struct imgdir *d, const char *name, const void *buf, size_t len)
{
	_cleanup_close_ int fd =
	    openat(d->tmpfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	if (fchmod(fd, 0600) < 0)
		return -errno;
	int rc = fault_hit("ckpt_manifest_write") ? -ENOSPC : mv_write_all(fd, buf, len);
	if (rc < 0)
		return rc;
	if (fsync(fd) < 0)
		return -errno;
	return 0;
}

/* Remove dirfd/name and what it holds (files, and directories of files:
 * nothing deeper is ever in an image). */
static void remove_tree(int dirfd, const char *name, int depth)
{
	int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (fd >= 0) {
		DIR *dir = fdopendir(fd);
		if (dir) {
			struct dirent *e;
			while ((e = readdir(dir))) {
				if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
					continue;
				if (unlinkat(fd, e->d_name, 0) < 0 && errno == EISDIR && depth < 2)
					remove_tree(fd, e->d_name, depth + 1);
			}
			closedir(dir);
		} else {
			close(fd);
		}
	}
	if (unlinkat(dirfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
		log_job_warn("cannot remove %s: %s", name, strerror(errno));
}

static int rename_into_place(struct imgdir *d)
{
	unsigned flags = d->replace ? RENAME_EXCHANGE : RENAME_NOREPLACE;
	FAULT_RETURN("ckpt_rename", EIO);
	int rc = renameat2(d->parentfd, d->tmpbase, d->parentfd, d->base, flags);
	if (rc < 0 && errno == ENOENT && d->replace) {
		/* What we were to replace has gone meanwhile. */
		d->replace = false;
		rc = renameat2(d->parentfd, d->tmpbase, d->parentfd, d->base, RENAME_NOREPLACE);
	}
	if (rc < 0 && errno == EINVAL) {
		/* A file system without renameat2 flags: plain rename, which
		 * replaces an empty directory and fails on anything else. */
		if (d->replace)
			remove_tree(d->parentfd, d->base, 0);
		d->replace = false;
		rc = renameat(d->parentfd, d->tmpbase, d->parentfd, d->base);
	}
	return rc < 0 ? -errno : 0;
}

int imgdir_commit(struct imgdir *d, struct mv_err *err)
{
	if (fsync(d->tmpfd) < 0)
		return mv_err_set(err, -errno, NULL, "syncing %s: %s", d->tmpbase, strerror(errno));
	int rc = rename_into_place(d);
	if (rc < 0)
		return mv_err_set(err, rc, NULL, "cannot rename the image into %s: %s", d->dir,
				  rc == -EEXIST || rc == -ENOTEMPTY ? "it appeared meanwhile"
								    : strerror(-rc));
	d->committed = true;
	if (fsync(d->parentfd) < 0)
		log_job_warn("syncing the directory of %s: %s", d->dir, strerror(errno));
	/* After an exchange, the old image is under the temporary name. */
	if (d->replace)
		remove_tree(d->parentfd, d->tmpbase, 0);
	return 0;
}

void imgdir_abort(struct imgdir *d)
{
	if (d->tmpbase && !d->committed && d->parentfd >= 0)
		remove_tree(d->parentfd, d->tmpbase, 0);
}

void imgdir_free(struct imgdir *d)
{
	if (d->tmpfd >= 0)
		close(d->tmpfd);
	if (d->parentfd >= 0)
		close(d->parentfd);
	free(d->dir);
	free(d->base);
	free(d->tmpbase);
	memset(d, 0, sizeof(*d));
	d->parentfd = d->tmpfd = -1;
}
