/* The checkpoint image (docs/image-format.md): a directory holding
 *
 *   pages          a 4 KiB header, then page-aligned extents of memory
 *   manifest.json  what the extents are: processes, threads and their
 *                  registers, regions, shared-memory objects, extents
 *                  with their offsets in pages and a CRC32C each, totals
 *
 * This file is the format's in-memory form and its pure operations:
 * splitting runs of pages into extents, writing and parsing the manifest,
 * the pages header, validating an image's consistency, and matching a
 * process's recorded layout against a live one (for reload). No I/O
 * other than through caller-given buffers; functions that can fail
 * return 0 or -errno (-EINVAL with a message in err for a bad image). */
#ifndef MV_IMAGE_H
#define MV_IMAGE_H

#include "common/err.h"
#include "state/as.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define IMG_FORMAT	"memvisor-image"
#define IMG_VERSION	3 /* written; 2 (no shared bytes), 1 (no page checksums) are still read */
#define IMG_VERSION_MIN 1
#define IMG_PAGE	4096u
#define IMG_HEADER_SIZE 4096u
#define IMG_MAGIC	"MVIMAGE"  /* 8 bytes with its NUL */
#define IMG_EXTENT_MAX	(2u << 20) /* bytes: extents never cross a 2 MiB boundary */
#define IMG_MANIFEST	"manifest.json"
#define IMG_PAGES	"pages"
#define IMG_ERR_LEN	512

/* The largest manifest written or read: about six million extents (41
 * bytes each), 25 GiB of memory in single pages or terabytes in runs. A
 * reader allocates no more than this whatever a file claims. */
#define IMG_MANIFEST_MAX (256u << 20)

/* A run of pages stored in the pages file. addr is a virtual address for
 * a private region, an offset in the object for a shared-memory object.
 * Invariants: addr and off page-aligned, pages >= 1, [addr, addr+len)
 * within one IMG_EXTENT_MAX-aligned block. */
struct img_extent {
	uint64_t addr;
	uint64_t off; /* in the pages file, >= IMG_HEADER_SIZE */
	uint32_t pages;
	uint32_t crc; /* CRC32C of the pages->len bytes */
};

static inline uint64_t img_extent_len(const struct img_extent *e)
{
	return (uint64_t)e->pages * IMG_PAGE;
}

struct img_extents {
	struct img_extent *v;
	size_t n, cap;
};

/* How a region's content is kept. */
enum img_content {
	IMG_PRIVATE, /* committed pages in extents; the rest is zero (anonymous) or the file's */
	IMG_SHARED,  /* the content of a shared-memory object (objects[object]) */
	IMG_FILE,    /* a shared mapping of a file: a reference, the file holds the content */
	IMG_SKIPPED, /* vdso, vvar, vsyscall and other kernel-provided mappings */
	IMG_CONTENT_COUNT,
};

const char *img_content_name(enum img_content c);

struct img_region {
	uint64_t start, end;
	uint64_t offset; /* file offset */
	uint64_t inode;
	uint32_t dev_major, dev_minor;
	uint8_t prot; /* AS_PROT_* */
	bool shared;
	enum as_kind kind;
	char *path;
	enum img_content content;
	long object;		/* IMG_SHARED: index into img.objects; else -1 */
	uint64_t committed;	/* resident bytes the kernel reported */
	struct img_extents ext; /* IMG_PRIVATE */
};

/* How much of a shared-memory object the image holds. */
enum img_coverage {
	IMG_COVER_WHOLE,  /* every data page of the object (SEEK_DATA/SEEK_HOLE on its file) */
	IMG_COVER_MAPPED, /* only pages present in the mappings of the image's processes */
	IMG_COVER_COUNT,
};

const char *img_coverage_name(enum img_coverage c);

struct img_object {
	uint64_t inode;
	uint32_t dev_major, dev_minor;
	uint64_t size; /* file size, or the largest mapped end when unknown */
	char *path;
	char source[16]; /* map_files, fd, mapping */
	enum img_coverage coverage;
	struct img_extents ext;
};

struct img_regset {
	char name[16]; /* prstatus, xstate, fpregs */
	uint32_t note; /* NT_* */
	void *data;
	size_t len;
};

#define IMG_MAX_REGSETS 3

struct img_thread {
	pid_t tid;
	int signal; /* a signal that was being delivered when it stopped (re-delivered), or 0 */
	bool group_stop; /* it was in a group stop (SIGSTOP) */
	bool vfork_wait; /* could not be stopped, nor run: a vfork parent (no registers) */
	struct img_regset regs[IMG_MAX_REGSETS];
	size_t n_regs;
};

struct img_proc {
	pid_t pid, ppid;
	bool gone; /* exited before it could be read: no threads, no regions */
	char *exe;
	char *cmdline; /* NUL-separated */
	size_t cmdline_len;
	uint64_t pause_ns;
	struct img_thread *t;
	size_t n_t, cap_t;
	struct img_region *r;
	size_t n_r, cap_r;
};

/* Totals computed from the content (never trusted from the manifest). */
struct img_totals {
	size_t processes, gone, threads, regions, extents, objects;
	uint64_t data_bytes;		 /* sum of extent lengths */
	uint64_t committed;		 /* sum of the kernel's resident bytes */
	uint64_t by_kind[AS_KIND_COUNT]; /* extent bytes by region kind; objects count as shmem */
	uint64_t shared_bytes;		 /* extent bytes of objects */
};

struct img {
	uint32_t version; /* IMG_VERSION when written; as read otherwise */
	char id[33];	  /* 32 hex digits */
	char memvisor[32];
	char kernel[160];
	char arch[80];
	/* The memvisor that took it, the only one that can reload it:
	 * its pid (0: not recorded, an older image) and --name ("": none). */
	int32_t sup_pid;
	char sup_name[64];
	uint64_t created_ns; /* wall clock */
	uint64_t pages_size; /* bytes of the pages file, header included */
	uint64_t pause_ns;
	struct img_proc *p;
	size_t n_p, cap_p;
	struct img_object *o;
	size_t n_o, cap_o;
	struct img_totals recorded; /* the manifest's own totals (parsed), for validation */
	/* Version 2: the CRC32C of every page of the pages file from the
	 * header to sums_off (extents end there), stored from sums_off on
	 * (docs/image-format.md). sums[i] is the page at file offset
	 * IMG_HEADER_SIZE + i * IMG_PAGE. sums_off 0: none (version 1);
	 * sums NULL until loaded (imgread_open) or computed (checkpoint). */
	uint64_t sums_off;
	uint32_t *sums;
};

/* How many page checksums an image with page checksums up to sums_off
 * has, and the bytes they take in the pages file (whole pages). */
static inline uint64_t img_sums_count(uint64_t sums_off)
{
	return sums_off > IMG_HEADER_SIZE ? (sums_off - IMG_HEADER_SIZE) / IMG_PAGE : 0;
}

static inline uint64_t img_sums_bytes(uint64_t sums_off)
{
	return (img_sums_count(sums_off) * 4 + IMG_PAGE - 1) / IMG_PAGE * IMG_PAGE;
}

/* The checksum of the page at file offset off (which must be a page of
 * an extent of an image with sums loaded). */
static inline uint32_t img_page_sum(const struct img *im, uint64_t off)
{
	return im->sums[(off - IMG_HEADER_SIZE) / IMG_PAGE];
}

void img_init(struct img *im);
void img_free(struct img *im);
struct img_proc *img_add_proc(struct img *im, pid_t pid);
struct img_thread *img_add_thread(struct img_proc *p, pid_t tid);
/* Adds a copy of the regset bytes. */
void img_thread_add_regset(struct img_thread *t, const char *name, uint32_t note, const void *data,
			   size_t len);
/* Drop what is known of a process that turned out to be gone: its
 * threads and regions (their extents' bytes in the pages file become
 * unreferenced). */
void img_proc_forget(struct img_proc *p);
/* Takes ownership of r->path; ext starts empty. */
struct img_region *img_add_region(struct img_proc *p, const struct as_region *r);
struct img_object *img_add_object(struct img *im, uint64_t inode, uint32_t dev_major,
				  uint32_t dev_minor, const char *path);
/* The object with this identity, or -1. */
long img_find_object(const struct img *im, uint64_t inode, uint32_t dev_major, uint32_t dev_minor);

/* Append extents for the page run [start, end) (page-aligned), split at
 * IMG_EXTENT_MAX-aligned boundaries, at consecutive offsets of the pages
 * file from *off (advanced past them). crc is left 0. Returns the number
 * of extents added. */
size_t img_extents_add_run(struct img_extents *x, uint64_t start, uint64_t end, uint64_t *off);

/* Bytes of the pages x's extents hold. */
uint64_t img_extents_bytes(const struct img_extents *x);

/* The extent of x (sorted by addr) holding addr, or NULL. */
const struct img_extent *img_extents_find(const struct img_extents *x, uint64_t addr);

/* The pages of x (sorted) inside runs[0..n) (sorted, disjoint,
 * page-aligned), appended to out as extents at the same bytes of the
 * pages file (crc 0): a view of an image record limited to some pages. */
void img_extents_within(const struct img_extents *x, const struct as_range *runs, size_t n,
			struct img_extents *out);

/* Ranges of [start, end) not covered by have[0..n) (sorted, disjoint),
 * appended to *out. */
void img_ranges_subtract(const struct as_range *have, size_t n, uint64_t start, uint64_t end,
			 struct as_range **out, size_t *n_out, size_t *cap_out);

void img_totals(const struct img *im, struct img_totals *t);

/* Bytes of the pages file the extents hold, each counted once: less than
 * img_totals' data_bytes by what processes of a tree share (version 3). */
uint64_t img_stored_bytes(const struct img *im);

/* The manifest as JSON text (malloc'd, NUL-terminated, *len bytes). */
char *img_manifest_write(const struct img *im, size_t *len);

/* Parse a manifest into im (which img_free releases even on failure).
 * -EINVAL with err filled when it is not a manifest of this format. */
int img_manifest_parse(const char *text, size_t len, struct img *im, struct mv_err *err);

/* Check an image's internal consistency: regions sorted, aligned and
 * disjoint; every extent page-aligned, inside its region (or object),
 * within one 2 MiB block, inside the pages file after the header, and no
 * two extents overlapping in the file but, from version 3, extents of
 * different processes (a page shared copy-on-write, stored once). 0 or
 * -EINVAL with err. */
int img_validate(const struct img *im, struct mv_err *err);

/* The pages file header. */
struct img_header {
	uint32_t version;
	char id[33];
	uint64_t pages_size;
	uint64_t data_bytes;
	uint64_t manifest_size;
	uint32_t manifest_crc;
	uint64_t sums_off; /* version 2: where the page checksums start */
	uint32_t sums_crc; /* img_sums_crc of them */
};

/* The checksum of the page checksums as stored: the count's entries
 * (table), then zeros to the end of their last page. */
uint32_t img_sums_crc(const void *table, uint64_t sums_off);

/* Encode into / decode from an IMG_HEADER_SIZE buffer. Decode returns
 * -EINVAL with err for a bad magic, version or header checksum. */
void img_header_encode(const struct img_header *h, void *buf);
int img_header_decode(const void *buf, struct img_header *h, struct mv_err *err);

/* Does the live layout of a process (a model from the kernel) still
 * match the image's record of it? Every region the image holds content
 * for (private or shared) must exist live with the same bounds,
 * protection, sharing and backing (inode, device, offset). 0, or
 * -ESTALE with err naming the first difference. */
int img_match_layout(const struct img_proc *p, const struct as_model *live, struct mv_err *err);

/* Base64 (RFC 4648, padded), for register sets in the manifest. encode
 * returns a malloc'd string; decode returns the length, or -1. */
char *img_b64_encode(const void *data, size_t len);
long img_b64_decode(const char *s, size_t slen, void *out, size_t max);

/* 16 random bytes as 32 hex digits into id[33]. */
void img_new_id(char id[33]);

#endif
