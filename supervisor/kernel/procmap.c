#include "supervisor/kernel/procmap.h"
#include "common/compat.h"
#include "common/fault.h"
#include "common/util.h"
#include "supervisor/kernel/pagemap.h"
#include "supervisor/kernel/procfs.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

/* The vsyscall page is not a VMA of the mm: /proc/PID/maps prints it from
 * the gate area, PROCMAP_QUERY does not return it. */
#define VSYSCALL_START 0xffffffffff600000ull
#define VSYSCALL_END   (VSYSCALL_START + 4096)
#define TASK_LIMIT     (1ull << 56)

/* ---- the regions: /proc/PID/maps ------------------------------------ */

static int maps_vmas(pid_t pid, uint64_t start, uint64_t end, proc_vma_fn fn, void *arg)
{
	_cleanup_free_ char *text = NULL;
	int rc = procfs_read(pid, "maps", &text, NULL);
	return rc < 0 ? rc : parse_maps(text, start, end, fn, arg);
}

static int is_vsyscall(void *arg, const struct proc_vma *v)
{
	*(bool *)arg = proc_vma_named(v, "[vsyscall]");
	return 1;
}

/* Has the kernel a vsyscall page (not vsyscall=none)? Our own maps say. */
static bool has_vsyscall(void)
{
	static int cached = -1; /* a fact of the machine: the same for every caller */
	if (cached < 0) {
		bool yes = false;
		cached =
		    maps_vmas(getpid(), VSYSCALL_START, VSYSCALL_END, is_vsyscall, &yes) == 0 &&
		    yes;
	}
	return cached;
}

/* ---- the regions: PROCMAP_QUERY ------------------------------------- */

/* The region at or after addr into q, its name into name (len bytes). */
static int query_one(int fd, uint64_t addr, struct procmap_query *q, char *name, size_t len)
{
	*q = (struct procmap_query){
	    .size = sizeof(*q),
	    .query_flags = PROCMAP_QUERY_COVERING_OR_NEXT_VMA,
	    .query_addr = addr,
	    .vma_name_addr = (uint64_t)(uintptr_t)name,
	    .vma_name_size = (uint32_t)len,
	};
	if (ioctl(fd, PROCMAP_QUERY, q) == 0)
		return 0;
	if (errno != ENAMETOOLONG)
		return -errno; /* ENOENT: no region at or after addr */
	/* A name longer than the buffer: take the region without it. */
	q->vma_name_addr = 0;
	q->vma_name_size = 0;
	if (ioctl(fd, PROCMAP_QUERY, q) < 0)
		return -errno;
	snprintf(name, len, "/?");
	q->vma_name_size = sizeof("/?");
	return 0;
}

static void vma_of_query(const struct procmap_query *q, const char *name, struct proc_vma *v)
{
	memset(v, 0, sizeof(*v));
	v->start = q->vma_start;
	v->end = q->vma_end;
	v->offset = q->vma_offset;
	v->inode = q->inode;
	v->dev_major = q->dev_major;
	v->dev_minor = q->dev_minor;
	v->r = q->vma_flags & PROCMAP_QUERY_VMA_READABLE;
	v->w = q->vma_flags & PROCMAP_QUERY_VMA_WRITABLE;
	v->x = q->vma_flags & PROCMAP_QUERY_VMA_EXECUTABLE;
	v->shared = q->vma_flags & PROCMAP_QUERY_VMA_SHARED;
	v->name = name;
	/* vma_name_size comes back as the name's length with its NUL. */
	v->name_len = q->vma_name_size > 1 ? strnlen(name, q->vma_name_size - 1) : 0;
}

static int query_vmas(int fd, uint64_t start, uint64_t end, proc_vma_fn fn, void *arg)
{
	char name[4096 + 64];
	struct procmap_query q;
	struct proc_vma v;
	for (uint64_t addr = start; addr < end; addr = q.vma_end) {
		int rc = query_one(fd, addr, &q, name, sizeof(name));
		if (rc == -ENOENT || (rc == 0 && q.vma_start >= end))
			break;
		if (rc < 0)
			return rc;
		vma_of_query(&q, name, &v);
		if ((rc = fn(arg, &v)))
			return rc < 0 ? rc : 0;
	}
	if (end <= VSYSCALL_START || start >= VSYSCALL_END || !has_vsyscall())
		return 0;
	v = (struct proc_vma){.start = VSYSCALL_START, .end = VSYSCALL_END, .x = true};
	v.name = "[vsyscall]";
	v.name_len = strlen(v.name);
	int rc = fn(arg, &v);
	return rc < 0 ? rc : 0;
}

/* ---- the one loop ---------------------------------------------------- */

int procmap_vmas(pid_t pid, bool use_query, uint64_t start, uint64_t end, proc_vma_fn fn, void *arg)
{
	if (!use_query)
		return maps_vmas(pid, start, end, fn, arg);
	_cleanup_close_ int fd = procfs_open(pid, "maps", O_RDONLY);
	if (fd < 0)
		return fd;
	return query_vmas(fd, start, end, fn, arg);
}

static int any_vma(void *arg, const struct proc_vma *v)
{
	return 1;
}

bool procmap_query_works(void)
{
	return procmap_vmas(getpid(), true, 0, 1, any_vma, NULL) == 0;
}

int procmap_count(pid_t pid, uint64_t *n)
{
	_cleanup_free_ char *text = NULL;
	int rc = procfs_read(pid, "maps", &text, NULL);
	if (rc < 0)
		return rc;
	*n = 0;
	for (const char *c = text; *c; c++)
		*n += *c == '\n';
	return 0;
}

struct file_use {
	uint64_t dev;
	uint64_t ino;
	bool *exec, *shared;
};

static int file_use_one(void *arg, const struct proc_vma *v)
{
	struct file_use *u = arg;
	if (v->inode == u->ino && proc_vma_dev(v) == u->dev) {
		*u->exec |= v->x;
		*u->shared |= v->shared;
	}
	return 0;
}

int procmap_maps_file(pid_t pid, uint64_t dev, uint64_t ino, bool *exec, bool *shared)
{
	*exec = *shared = false;
	struct file_use u = {dev, ino, exec, shared};
	return maps_vmas(pid, 0, UINT64_MAX, file_use_one, &u);
}

/* ---- the snapshot ---------------------------------------------------- */

/* keep: the caller's pagemap of pid, to be left with the walk
 * prefetched (procmap_snapshot_keep), or NULL. */
static int resident_scan(pid_t pid, bool scan, struct as_model *m, struct pagemap *keep)
{
	if (!m->n)
		return 0;
	struct pagemap own, *pm = keep ? keep : &own;
	int rc = keep ? 0 : pagemap_open(pid, scan, &own);
	if (rc < 0)
		return rc;
	struct as_range *runs = NULL;
	size_t n = 0, cap = 0;
	uint64_t end = 0;
	for (size_t i = 0; i < m->n; i++)
		if (m->r[i].end <= TASK_LIMIT)
			end = m->r[i].end;
	if (keep) {
		rc = pagemap_prefetch(keep, m->r[0].start, end, PAGE_IS_PRESENT | PAGE_IS_SWAPPED,
				      PAGE_IS_FILE | PAGE_IS_PFNZERO);
		if (rc == -ENOTTY)
			rc = 0;
	}
	/* Present pages, not the shared zero page: what smaps calls Rss. */
	if (rc == 0)
		rc = pagemap_runs(pm, m->r[0].start, end, PAGE_IS_PRESENT, PAGE_IS_PFNZERO, &runs,
				  &n, &cap);
	if (!keep)
		pagemap_close(&own);
	if (rc == 0)
		as_apply_resident(m, runs, n);
	free(runs);
	return rc;
}

/* Rss of every region from /proc/PID/smaps: exact on any kernel, but the
 * text is about 1 KiB a region. */
static int resident_smaps(pid_t pid, struct as_model *m)
{
	_cleanup_free_ char *text = NULL;
	int rc = procfs_read(pid, "smaps", &text, NULL);
	return rc < 0 ? rc : as_apply_smaps_rss(text, m);
}

int procmap_snapshot(pid_t pid, const struct features *f, enum procmap_source src,
		     struct as_model *out, const char **how)
{
	return procmap_snapshot_keep(pid, f, src, out, how, NULL);
}

int procmap_snapshot_keep(pid_t pid, const struct features *f, enum procmap_source src,
			  struct as_model *out, const char **how, struct pagemap *keep)
{
	/* For a whole layout /proc/PID/maps is the faster source: 50,000
	 * regions parse in about 45 ms, while 50,000 PROCMAP_QUERY ioctls
	 * take about 130 ms (bench/regions.sh). PROCMAP_QUERY is for
	 * looking up one address. */
	bool query = src == PROCMAP_SRC_QUERY;
	FAULT_RETURN("procmap_read", EIO);
	as_model_free(out);
	int rc = procmap_vmas(pid, query, 0, UINT64_MAX, as_model_add_vma, out);
	if (rc < 0)
		return rc;
	as_model_totals(out);
	if (f->pagemap_scan) {
		rc = resident_scan(pid, true, out, keep && keep->scan ? keep : NULL);
		*how = query ? "procmap_query+pagemap_scan" : "maps+pagemap_scan";
	} else {
		rc = resident_smaps(pid, out);
		*how = query ? "procmap_query+smaps" : "maps+smaps";
	}
	return rc;
}
