#include "supervisor/kernel/procmem.h"
#include "common/compat.h"
#include "common/util.h"

#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

static int open_pid(pid_t pid, const char *what, int flags)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/%s", pid, what);
	int fd = open(path, flags | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? -ESRCH : -errno;
	return fd;
}

bool procmem_vma_anon(const struct procmem_vma *v)
{
	if (v->ino == 0)
		return true;
	/* shmem without a path of its own (mm/shmem.c, ipc/shm.c names). */
	static const char *const anon_names[] = {"/memfd:", "/SYSV", "/dev/zero", "anon_hugepage",
						 "[anon_shmem"};
	for (size_t i = 0; i < ARRAY_SIZE(anon_names); i++)
		if (strncmp(v->name, anon_names[i], strlen(anon_names[i])) == 0)
			return true;
	return false;
}

/* ---- regions --------------------------------------------------------- */

static int query_vmas(int fd, uint64_t start, uint64_t end,
		      int (*fn)(void *arg, const struct procmem_vma *v), void *arg)
{
	for (uint64_t addr = start; addr < end;) {
		struct procmem_vma v;
		memset(&v, 0, sizeof(v));
		struct procmap_query q = {
		    .size = sizeof(q),
		    .query_flags = PROCMAP_QUERY_COVERING_OR_NEXT_VMA,
		    .query_addr = addr,
		    .vma_name_addr = (uint64_t)(uintptr_t)v.name,
		    .vma_name_size = sizeof(v.name),
		};
		if (ioctl(fd, PROCMAP_QUERY, &q) < 0) {
			if (errno == ENOENT)
				return 0; /* nothing mapped at or after addr */
			/* A name longer than our buffer: take the region without it. */
			if (errno != ENAMETOOLONG)
				return errno == ESRCH ? -ESRCH : -errno;
			q.vma_name_size = 0;
			q.vma_name_addr = 0;
			if (ioctl(fd, PROCMAP_QUERY, &q) < 0)
				return errno == ENOENT ? 0 : -errno;
			snprintf(v.name, sizeof(v.name), "/?");
		}
		if (q.vma_start >= end)
			return 0;
		v.start = q.vma_start;
		v.end = q.vma_end;
		v.r = q.vma_flags & PROCMAP_QUERY_VMA_READABLE;
		v.w = q.vma_flags & PROCMAP_QUERY_VMA_WRITABLE;
		v.x = q.vma_flags & PROCMAP_QUERY_VMA_EXECUTABLE;
		v.shared = q.vma_flags & PROCMAP_QUERY_VMA_SHARED;
		v.ino = q.inode;
		v.dev = makedev(q.dev_major, q.dev_minor);
		int rc = fn(arg, &v);
		if (rc)
			return rc < 0 ? rc : 0;
		addr = q.vma_end;
	}
	return 0;
}

/* "start-end perms offset maj:min inode   path" (fs/proc/task_mmu.c). */
static bool parse_maps_line(const char *line, struct procmem_vma *v)
{
	unsigned long long s, e, off, ino;
	unsigned maj, min;
	char perms[5];
	int pos = 0;
	memset(v, 0, sizeof(*v));
	if (sscanf(line, "%llx-%llx %4s %llx %x:%x %llu %n", &s, &e, perms, &off, &maj, &min, &ino,
		   &pos) < 7)
		return false;
	v->start = s;
	v->end = e;
	v->r = perms[0] == 'r';
	v->w = perms[1] == 'w';
	v->x = perms[2] == 'x';
	v->shared = perms[3] == 's';
	v->dev = makedev(maj, min);
	v->ino = ino;
	const char *name = line + pos;
	size_t nlen = strcspn(name, "\n");
	snprintf(v->name, sizeof(v->name), "%.*s", (int)MV_MIN(nlen, sizeof(v->name) - 1), name);
	return true;
}

/* Read /proc/PID/maps whole; it changes between reads, so a single read
 * into a large enough buffer is what gives one instant's layout. */
static int read_maps(pid_t pid, char **out)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	int rc = mv_read_file_at(AT_FDCWD, path, out, NULL);
	return rc == -ENOENT ? -ESRCH : rc;
}

static int maps_vmas(pid_t pid, uint64_t start, uint64_t end,
		     int (*fn)(void *arg, const struct procmem_vma *v), void *arg)
{
	_cleanup_free_ char *buf = NULL;
	int rc = read_maps(pid, &buf);
	if (rc < 0)
		return rc;
	for (char *line = buf; line && *line;
	     line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
		struct procmem_vma v;
		if (!parse_maps_line(line, &v) || v.end <= start)
			continue;
		if (v.start >= end)
			break;
		if ((rc = fn(arg, &v)))
			return rc < 0 ? rc : 0;
	}
	return 0;
}

int procmem_vmas(pid_t pid, bool use_query, uint64_t start, uint64_t end,
		 int (*fn)(void *arg, const struct procmem_vma *v), void *arg)
{
	if (!use_query)
		return maps_vmas(pid, start, end, fn, arg);
	_cleanup_close_ int fd = open_pid(pid, "maps", O_RDONLY);
	if (fd < 0)
		return fd;
	return query_vmas(fd, start, end, fn, arg);
}

int procmem_regions(pid_t pid, uint64_t *n)
{
	_cleanup_free_ char *buf = NULL;
	int rc = read_maps(pid, &buf);
	if (rc < 0)
		return rc;
	*n = 0;
	for (const char *c = buf; *c; c++)
		*n += *c == '\n';
	return 0;
}

int procmem_maps_file(pid_t pid, const struct pol_file_id *f, bool *exec, bool *shared)
{
	_cleanup_free_ char *buf = NULL;
	int rc = read_maps(pid, &buf);
	*exec = *shared = false;
	if (rc < 0)
		return rc;
	for (char *line = buf; line && *line;
	     line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
		struct procmem_vma v;
		if (!parse_maps_line(line, &v) || v.ino != f->ino || v.dev != f->dev)
			continue;
		*exec |= v.x;
		*shared |= v.shared;
	}
	return 0;
}

/* ---- pages ----------------------------------------------------------- */

#define PM_PRESENT (1ULL << 63)
#define PM_SWAPPED (1ULL << 62)
#define PM_FILE	   (1ULL << 61)

static int written_scan(int fd, uint64_t start, uint64_t end, bool *yes)
{
	struct page_region r;
	/* Pages that are not file pages (after inverting PAGE_IS_FILE) and
	 * are present or swapped: copies made on write. */
	struct pm_scan_arg a = {
	    .size = sizeof(a),
	    .start = start,
	    .end = end,
	    .vec = (uint64_t)(uintptr_t)&r,
	    .vec_len = 1,
	    .max_pages = 1,
	    .category_inverted = PAGE_IS_FILE,
	    .category_mask = PAGE_IS_FILE,
	    .category_anyof_mask = PAGE_IS_PRESENT | PAGE_IS_SWAPPED,
	    .return_mask = PAGE_IS_FILE,
	};
	long n = ioctl(fd, PAGEMAP_SCAN, &a);
	if (n < 0)
		return -errno;
	*yes = n > 0;
	return 0;
}

static int written_read(int fd, uint64_t start, uint64_t end, bool *yes)
{
	uint64_t ent[512];
	for (uint64_t page = start / POL_PAGE; page < end / POL_PAGE;) {
		size_t want = (size_t)MV_MIN((uint64_t)ARRAY_SIZE(ent), end / POL_PAGE - page);
		ssize_t n = pread(fd, ent, want * sizeof(ent[0]), (off_t)(page * sizeof(ent[0])));
		if (n <= 0)
			return n < 0 ? -errno : 0;
		for (size_t i = 0; i < (size_t)n / sizeof(ent[0]); i++) {
			if ((ent[i] & (PM_PRESENT | PM_SWAPPED)) && !(ent[i] & PM_FILE)) {
				*yes = true;
				return 0;
			}
		}
		page += (size_t)n / sizeof(ent[0]);
	}
	return 0;
}

int procmem_written(pid_t pid, bool use_scan, uint64_t start, uint64_t end, bool *yes)
{
	*yes = false;
	_cleanup_close_ int fd = open_pid(pid, "pagemap", O_RDONLY);
	if (fd < 0)
		return fd;
	start &= ~(POL_PAGE - 1);
	end = limits_page_align(end);
	if (use_scan && written_scan(fd, start, end, yes) == 0)
		return 0;
	return written_read(fd, start, end, yes);
}

/* ---- the rest -------------------------------------------------------- */

int procmem_statm(int fd, uint64_t *bytes)
{
	char buf[128];
	/* A read at offset 0 makes seq_file build the text anew. */
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
	if (n <= 0)
		return n < 0 && errno != ESRCH ? -errno : -ESRCH;
	buf[n] = '\0';
	unsigned long long pages;
	if (sscanf(buf, "%llu", &pages) != 1)
		return -EINVAL;
	*bytes = pages * POL_PAGE;
	return 0;
}

int procmem_fd(pid_t pid, int fd, struct pol_fd *out)
{
	char path[64], link[64];
	memset(out, 0, sizeof(*out));
	snprintf(path, sizeof(path), "/proc/%d/fd/%d", pid, fd);
	struct stat st;
	if (fd < 0 || stat(path, &st) < 0) {
		if (fd >= 0 && errno != ENOENT)
			return -errno;
		/* Not an open fd (or the process is gone): the kernel answers. */
		out->kind = POL_FD_BAD;
		return 0;
	}
	out->id = (struct pol_file_id){st.st_dev, st.st_ino};
	if (S_ISREG(st.st_mode)) {
		ssize_t n = readlink(path, link, sizeof(link) - 1);
		link[n > 0 ? n : 0] = '\0';
		out->kind = strncmp(link, "/memfd:", 7) == 0 ? POL_FD_ANON : POL_FD_REGULAR;
	} else if (S_ISCHR(st.st_mode) && st.st_rdev == makedev(1, 5)) {
		out->kind = POL_FD_ANON; /* /dev/zero */
	} else {
		out->kind = POL_FD_OTHER;
	}
	_cleanup_free_ char *buf = NULL;
	char ipath[64];
	snprintf(ipath, sizeof(ipath), "/proc/%d/fdinfo/%d", pid, fd);
	if (mv_read_file_at(AT_FDCWD, ipath, &buf, NULL) == 0) {
		const char *f = strstr(buf, "flags:");
		unsigned long flags = f ? strtoul(f + 6, NULL, 8) : 0;
		out->writable = (flags & O_ACCMODE) != O_RDONLY;
	} else {
		out->writable = true; /* cannot tell: assume the worst */
	}
	return 0;
}

int procmem_personality(pid_t pid, unsigned long *persona)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/personality", pid);
	_cleanup_free_ char *buf = NULL;
	int rc = mv_read_file_at(AT_FDCWD, path, &buf, NULL);
	if (rc < 0)
		return rc == -ENOENT ? -ESRCH : rc;
	*persona = strtoul(buf, NULL, 16);
	return 0;
}

int procmem_in_call(pid_t pid, pid_t tid, int nr)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/task/%d/syscall", pid, tid);
	_cleanup_free_ char *buf = NULL;
	int rc = mv_read_file_at(AT_FDCWD, path, &buf, NULL);
	if (rc == -ENOENT || rc == -ESRCH)
		return 0;
	/* "running" (proc_pid_syscall: the thread is on a CPU, maybe inside
	 * the call) or unreadable: cannot tell. */
	if (rc < 0 || strncmp(buf, "running", 7) == 0)
		return 1;
	/* "NR args... sp pc" while blocked in a syscall; "-1 sp pc" while
	 * blocked outside one. */
	return strtol(buf, NULL, 10) == nr;
}
