/* An image directory's lifecycle: everything is written into a temporary
 * sibling directory (".NAME.tmp.PID.N", mode 0700), files are fsync'ed,
 * the directory is fsync'ed, and only then renamed to DIR and the parent
 * fsync'ed: a crash or an error never leaves at DIR something that looks
 * like an image. An existing DIR is refused unless force is given, and
 * even then only an empty directory or a memvisor image is replaced (by
 * an atomic exchange, so DIR is always one whole image or the other).
 *
 * Failure points (MEMVISOR_FAULT, common/fault.h):
 *   ckpt_manifest_write  writing manifest.json (ENOSPC)
 *   ckpt_rename          the rename into place (EIO)
 * Functions return 0 or -errno, with a message in err where they take one. */
#ifndef MV_IMGDIR_H
#define MV_IMGDIR_H

#include "common/err.h"

#include <stdbool.h>
#include <stddef.h>

struct imgdir {
	char *dir;     /* the final path */
	char *base;    /* its last component */
	char *tmpbase; /* the temporary sibling's name */
	int parentfd;  /* the parent directory */
	int tmpfd;     /* the temporary directory */
	bool replace;  /* DIR exists and will be exchanged */
	bool committed;
};

/* Check dir (absolute) and create the temporary sibling. -EEXIST: DIR
 * exists and force is false; -ENOTEMPTY: DIR exists and is not an image;
 * other -errno: the parent cannot be used. */
int imgdir_prepare(const char *dir, bool force, struct imgdir *d, struct mv_err *err);

/* Write a whole file (mode 0600) into the temporary directory and fsync it. */
int imgdir_write_file(struct imgdir *d, const char *name, const void *buf, size_t len);

/* fsync the temporary directory, rename it to DIR, fsync the parent, and
 * remove the image it replaced. */
int imgdir_commit(struct imgdir *d, struct mv_err *err);

/* Remove the temporary directory and what is in it (after a failure). */
void imgdir_abort(struct imgdir *d);

void imgdir_free(struct imgdir *d);

/* Does the directory hold a memvisor image manifest? */
bool imgdir_is_image(int dirfd);

#endif
