/* Opening a checkpoint image for reading, and checking it: the pages
 * header, the manifest's checksum and consistency, and every extent's
 * checksum. Used by `memvisor image` and, before any page is used, by
 * reload (issue 6). Functions return 0 or -errno with a message in err;
 * -EINVAL (or -EBADMSG for a checksum mismatch) means a bad image. */
#ifndef MV_IMGREAD_H
#define MV_IMGREAD_H

#include "state/image.h"

#include <stddef.h>
#include <stdint.h>

struct imgread {
	int dirfd;
	int pagesfd;
	struct img im;
	struct img_header h;
	uint64_t manifest_size;
};

/* Where an extent is, for messages: "process 42 region 0x..-0x.. extent 3
 * (0x7f.., 1 pages at pages offset 0x5000)". */
struct imgread_ref {
	const struct img_extent *e;
	size_t proc;  /* index in im.p, or SIZE_MAX for an object */
	size_t owner; /* region index, or object index */
	size_t index; /* extent index within it */
};

/* Is dir an image at all: a directory holding manifest.json and pages,
 * each a regular file (or a symlink to one)? Nothing is opened or read
 * (stat only), so a caller that must not wait (a control handler) can
 * say "not an image" before imgread_open. 0; -ENOENT: no manifest.json
 * ("DIR: not a memvisor image (no manifest.json)"); -EINVAL: one is not
 * a regular file ("DIR/pages is a FIFO, not a regular file"); or
 * -errno, with err filled. */
int imgread_require(const char *dir, struct mv_err *err);

/* Open dir: read and check the header and the manifest (checksum,
 * parse, validate, the two agree), and load the page checksums
 * (r->im.sums, version 2) checked against the header's checksum of
 * them. The files are opened only if they are regular files, and never
 * more is read than their sizes in the header, which must be theirs; a
 * manifest over IMG_MANIFEST_MAX is refused unread. So a FIFO, a device
 * or a huge file in an image is an error at once, not a wait or a
 * memory blow-up. */
int imgread_open(const char *dir, struct imgread *r, struct mv_err *err);
void imgread_close(struct imgread *r);

/* The pages file's header alone (4 KiB, the file regular and as large as
 * the header says): which image dir holds, cheaply enough for a control
 * handler. imgread_open checks the rest. */
int imgread_header(const char *dir, struct img_header *h, struct mv_err *err);

/* Every extent, sorted by offset in the pages file. *refs is malloc'd. */
size_t imgread_refs(const struct imgread *r, struct imgread_ref **refs);

/* Describe an extent's place. */
void imgread_describe(const struct imgread *r, const struct imgread_ref *ref, char *buf,
		      size_t len);

/* Read every extent and check its checksum and its pages' (version 2),
 * in file order. progress, if
 * given, is called now and then with the bytes checked so far. -EBADMSG
 * with err naming the first bad extent; -errno for a read error. */
int imgread_verify(const struct imgread *r,
		   void (*progress)(uint64_t done, uint64_t total, void *arg), void *arg,
		   struct mv_err *err);

#endif
