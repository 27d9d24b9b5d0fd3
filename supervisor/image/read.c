#include "supervisor/image/read.h"
#include "common/fault.h"
#include "common/crc32c.h"
#include "common/util.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

/* Open a file of the image: a regular file only, never waited on
 * (mv_open_regular_at: a FIFO or a device, or a symlink to one, is
 * refused before it is opened), so a request naming a bad image cannot
 * hang the caller (a control handler on the main loop). */
static int open_part(struct imgread *r, const char *dir, const char *name, struct stat *st,
		     struct mv_err *err)
{
	char what[4200];
	snprintf(what, sizeof(what), "%s/%s", dir, name);
	return mv_open_regular_at(r->dirfd, name, 0, what, st, err);
}

/* The header, and that the pages file is as long as it says: every
 * later read is within st_size. */
static int read_header(struct imgread *r, const char *dir, struct mv_err *err)
{
	unsigned char buf[IMG_HEADER_SIZE];
	struct stat st;
	r->pagesfd = open_part(r, dir, IMG_PAGES, &st, err);
	if (r->pagesfd < 0)
		return r->pagesfd;
	ssize_t n = pread(r->pagesfd, buf, sizeof(buf), 0);
	if (n < 0)
		return mv_err_set(err, -errno, NULL, "%s/%s: %s", dir, IMG_PAGES, strerror(errno));
	if (n != (ssize_t)sizeof(buf))
		return mv_err_set(err, -EINVAL, NULL, "%s/%s: shorter than its header", dir,
				  IMG_PAGES);
	int rc = img_header_decode(buf, &r->h, err);
	if (rc == 0 && (uint64_t)st.st_size != r->h.pages_size)
		rc = mv_err_set(err, -EINVAL, NULL, "%s is %llu bytes; its header says %llu",
				IMG_PAGES, (unsigned long long)st.st_size,
				(unsigned long long)r->h.pages_size);
	return rc;
}

/* manifest.json: its size is checked against the header's before it is
 * read, and no more than that is read (a file that grows meanwhile is
 * caught by the same check). */
static int read_manifest(struct imgread *r, const char *dir, struct mv_err *err)
{
	struct stat st;
	_cleanup_close_ int fd = open_part(r, dir, IMG_MANIFEST, &st, err);
	if (fd < 0)
		return fd;
	if ((uint64_t)st.st_size > IMG_MANIFEST_MAX)
		return mv_err_set(err, -EINVAL, NULL,
				  "%s/%s is %llu bytes: larger than any manifest memvisor writes "
				  "(%u)",
				  dir, IMG_MANIFEST, (unsigned long long)st.st_size,
				  IMG_MANIFEST_MAX);
	if ((uint64_t)st.st_size != r->h.manifest_size)
		return mv_err_set(err, -EBADMSG, NULL, "%s: %llu bytes, the pages header says %llu",
				  IMG_MANIFEST, (unsigned long long)st.st_size,
				  (unsigned long long)r->h.manifest_size);
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	int rc = mv_read_fd_max(fd, (size_t)r->h.manifest_size, &text, &len);
	if (rc < 0 && rc != -EFBIG)
		return mv_err_set(err, rc, NULL, "%s/%s: %s", dir, IMG_MANIFEST, strerror(-rc));
	if (rc == -EFBIG || len != r->h.manifest_size)
		return mv_err_set(err, -EBADMSG, NULL, "%s: changed while it was read",
				  IMG_MANIFEST);
	r->manifest_size = len;
	uint32_t crc = crc32c(text, len);
	if (crc != r->h.manifest_crc)
		return mv_err_set(
		    err, -EBADMSG, NULL,
		    "%s: checksum mismatch (pages header says %08x, the file has %08x)",
		    IMG_MANIFEST, r->h.manifest_crc, crc);
	return img_manifest_parse(text, len, &r->im, err);
}

static int check_agree(struct imgread *r, struct mv_err *err)
{
	struct stat st;
	if (fstat(r->pagesfd, &st) < 0)
		return mv_err_set(err, -errno, NULL, "%s: %s", IMG_PAGES, strerror(errno));
	if (strcmp(r->h.id, r->im.id) != 0)
		return mv_err_set(err, -EINVAL, NULL,
				  "%s and %s belong to different images (%s, %s)", IMG_PAGES,
				  IMG_MANIFEST, r->h.id, r->im.id);
	if (r->h.pages_size != r->im.pages_size || (uint64_t)st.st_size != r->h.pages_size)
		return mv_err_set(err, -EINVAL, NULL,
				  "%s is %llu bytes; its header says %llu and the manifest %llu",
				  IMG_PAGES, (unsigned long long)st.st_size,
				  (unsigned long long)r->h.pages_size,
				  (unsigned long long)r->im.pages_size);
	if (r->h.version != r->im.version || r->h.sums_off != r->im.sums_off)
		return mv_err_set(err, -EINVAL, NULL,
				  "%s says version %u with page checksums at %llu, %s version %u "
				  "at %llu",
				  IMG_PAGES, r->h.version, (unsigned long long)r->h.sums_off,
				  IMG_MANIFEST, r->im.version, (unsigned long long)r->im.sums_off);
	if (r->h.data_bytes != r->im.recorded.data_bytes)
		return mv_err_set(err, -EINVAL, NULL,
				  "the pages header counts %llu data bytes, the manifest %llu",
				  (unsigned long long)r->h.data_bytes,
				  (unsigned long long)r->im.recorded.data_bytes);
	return 0;
}

static int read_full(int fd, void *buf, size_t len, uint64_t off);

/* Version 2: the page checksums, checked against the header's checksum
 * of them. */
static int read_sums(struct imgread *r, struct mv_err *err)
{
	uint64_t bytes = img_sums_bytes(r->im.sums_off);
	if (r->im.version < 2)
		return 0;
	/* 1 MiB a GiB of pages; a size no machine could hold (a sparse pages
	 * file whose header claims a petabyte) is an error, not an abort. */
	r->im.sums = malloc((size_t)MV_MAX(bytes, 4));
	if (!r->im.sums)
		return mv_err_set(err, -ENOMEM, NULL,
				  "%s: cannot hold its %llu bytes of page checksums", IMG_PAGES,
				  (unsigned long long)bytes);
	int rc = read_full(r->pagesfd, r->im.sums, bytes, r->im.sums_off);
	if (rc < 0)
		return mv_err_set(err, rc, NULL, "%s: reading the page checksums: %s", IMG_PAGES,
				  strerror(-rc));
	uint32_t crc = crc32c(r->im.sums, bytes);
	if (crc != r->h.sums_crc)
		return mv_err_set(err, -EBADMSG, NULL,
				  "%s: the page checksums are corrupt (stored %08x, computed %08x)",
				  IMG_PAGES, r->h.sums_crc, crc);
	return 0;
}

int imgread_require(const char *dir, struct mv_err *err)
{
	_cleanup_close_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return mv_err_set(err, -errno, NULL, "%s: %s", dir, strerror(errno));
	static const char *const parts[] = {IMG_MANIFEST, IMG_PAGES};
	for (size_t i = 0; i < ARRAY_SIZE(parts); i++) {
		struct stat st;
		if (fstatat(fd, parts[i], &st, 0) < 0) {
			int e = errno;
			if (e == ENOENT && i == 0)
				return mv_err_set(err, -ENOENT, NULL,
						  "%s: not a memvisor image (no %s)", dir,
						  IMG_MANIFEST);
			return mv_err_set(err, -e, NULL, "%s/%s: %s", dir, parts[i], strerror(e));
		}
		if (!S_ISREG(st.st_mode))
			return mv_err_set(err, -EINVAL, NULL, "%s/%s is %s, not a regular file",
					  dir, parts[i], mv_file_kind(st.st_mode));
	}
	return 0;
}

int imgread_open(const char *dir, struct imgread *r, struct mv_err *err)
{
	memset(r, 0, sizeof(*r));
	r->pagesfd = -1;
	img_init(&r->im);
	r->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (r->dirfd < 0)
		return mv_err_set(err, -errno, NULL, "%s: %s", dir, strerror(errno));
	int rc = read_header(r, dir, err);
	if (rc == 0)
		rc = read_manifest(r, dir, err);
	if (rc == 0)
		rc = img_validate(&r->im, err);
	if (rc == 0)
		rc = check_agree(r, err);
	if (rc == 0)
		rc = read_sums(r, err);
	return rc;
}

int imgread_header(const char *dir, struct img_header *h, struct mv_err *err)
{
	struct imgread r;
	memset(&r, 0, sizeof(r));
	r.pagesfd = -1;
	img_init(&r.im);
	r.dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NONBLOCK);
	int rc = r.dirfd < 0 ? mv_err_set(err, -errno, NULL, "%s: %s", dir, strerror(errno))
			     : read_header(&r, dir, err);
	if (rc == 0)
		*h = r.h;
	imgread_close(&r);
	return rc;
}

void imgread_close(struct imgread *r)
{
	if (r->pagesfd >= 0)
		close(r->pagesfd);
	if (r->dirfd >= 0)
		close(r->dirfd);
	img_free(&r->im);
	r->pagesfd = r->dirfd = -1;
}

static int cmp_ref(const void *a, const void *b)
{
	const struct imgread_ref *x = a, *y = b;
	return x->e->off < y->e->off ? -1 : x->e->off > y->e->off;
}

static void push_refs(const struct img_extents *x, size_t proc, size_t owner, struct imgread_ref *v,
		      size_t *n)
{
	for (size_t i = 0; i < x->n; i++)
		v[(*n)++] = (struct imgread_ref){&x->v[i], proc, owner, i};
}

size_t imgread_refs(const struct imgread *r, struct imgread_ref **refs)
{
	const struct img *im = &r->im;
	size_t n = 0, cap = 1;
	for (size_t i = 0; i < im->n_p; i++)
		for (size_t k = 0; k < im->p[i].n_r; k++)
			cap += im->p[i].r[k].ext.n;
	for (size_t k = 0; k < im->n_o; k++)
		cap += im->o[k].ext.n;
	struct imgread_ref *v = xcalloc(cap, sizeof(*v));
	for (size_t i = 0; i < im->n_p; i++)
		for (size_t k = 0; k < im->p[i].n_r; k++)
			push_refs(&im->p[i].r[k].ext, i, k, v, &n);
	for (size_t k = 0; k < im->n_o; k++)
		push_refs(&im->o[k].ext, SIZE_MAX, k, v, &n);
	mv_qsort(v, n, sizeof(*v), cmp_ref);
	*refs = v;
	return n;
}

void imgread_describe(const struct imgread *r, const struct imgread_ref *ref, char *buf, size_t len)
{
	const struct img_extent *e = ref->e;
	char where[160];
	if (ref->proc == SIZE_MAX) {
		const struct img_object *o = &r->im.o[ref->owner];
		snprintf(where, sizeof(where), "object %zu (%s) extent %zu at object offset %#llx",
			 ref->owner, o->path ? o->path : "shared memory", ref->index,
			 (unsigned long long)e->addr);
	} else {
		const struct img_proc *p = &r->im.p[ref->proc];
		const struct img_region *g = &p->r[ref->owner];
		snprintf(where, sizeof(where), "process %d region %#llx-%#llx extent %zu at %#llx",
			 p->pid, (unsigned long long)g->start, (unsigned long long)g->end,
			 ref->index, (unsigned long long)e->addr);
	}
	snprintf(buf, len, "%s (%u pages at pages offset %#llx)", where, e->pages,
		 (unsigned long long)e->off);
}

static int read_full(int fd, void *buf, size_t len, uint64_t off)
{
	size_t got = 0;
	while (got < len) {
		ssize_t n = fault_hit("img_read")
				? (errno = EIO, -1)
				: pread(fd, (char *)buf + got, len - got, (off_t)(off + got));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO;
		got += (size_t)n;
	}
	return 0;
}

int imgread_verify(const struct imgread *r, void (*progress)(uint64_t, uint64_t, void *), void *arg,
		   struct mv_err *err)
{
	struct imgread_ref *refs;
	size_t n = imgread_refs(r, &refs);
	uint64_t total = r->im.recorded.data_bytes, done = 0, last = 0;
	void *buf = xmalloc(IMG_EXTENT_MAX);
	posix_fadvise(r->pagesfd, 0, 0, POSIX_FADV_SEQUENTIAL);
	int rc = 0;
	for (size_t i = 0; i < n && rc == 0; i++) {
		const struct img_extent *e = refs[i].e;
		size_t len = img_extent_len(e);
		char where[256];
		rc = read_full(r->pagesfd, buf, len, e->off);
		if (rc < 0) {
			imgread_describe(r, &refs[i], where, sizeof(where));
			rc = mv_err_set(err, rc, NULL, "%s: %s", where, strerror(-rc));
			break;
		}
		uint32_t crc = 0;
		for (uint32_t k = 0; k < e->pages && rc == 0; k++) {
			uint32_t pc = crc32c((char *)buf + (size_t)k * IMG_PAGE, IMG_PAGE);
			uint64_t at = e->off + (uint64_t)k * IMG_PAGE;
			crc = k ? crc32c_combine_page(crc, pc) : pc;
			if (r->im.sums && pc != img_page_sum(&r->im, at)) {
				imgread_describe(r, &refs[i], where, sizeof(where));
				rc = mv_err_set(
				    err, -EBADMSG, NULL,
				    "%s: page %u (pages offset %#llx): checksum mismatch "
				    "(stored %08x, computed %08x)",
				    where, k, (unsigned long long)at, img_page_sum(&r->im, at), pc);
			}
		}
		if (rc == 0 && crc != e->crc) {
			imgread_describe(r, &refs[i], where, sizeof(where));
			rc = mv_err_set(err, -EBADMSG, NULL,
					"%s: checksum mismatch (stored %08x, computed %08x)", where,
					e->crc, crc);
			break;
		}
		done += len;
		if (progress && done - last >= (64u << 20)) {
			progress(done, total, arg);
			last = done;
		}
	}
	if (rc == 0 && progress)
		progress(done, total, arg);
	free(buf);
	free(refs);
	return rc;
}
