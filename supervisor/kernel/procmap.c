#include "supervisor/kernel/procmap.h"
#include "common/compat.h"
#include "common/fault.h"
#include "common/util.h"
#include "supervisor/kernel/pagemap.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>

/* The vsyscall page is not a VMA of the mm: /proc/PID/maps prints it from
 * the gate area, PROCMAP_QUERY does not return it. */
#define VSYSCALL_START 0xffffffffff600000ull
#define TASK_LIMIT     (1ull << 56)

static int open_pid_file(pid_t pid, const char *name)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/%s", pid, name);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? -ESRCH : -errno;
	return fd;
}

static int read_maps(pid_t pid, struct as_model *out)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	_cleanup_free_ char *text = NULL;
	int rc = mv_read_file_at(AT_FDCWD, path, &text, NULL);
	if (rc < 0)
		return rc == -ENOENT ? -ESRCH : rc;
	return as_parse_maps(text, out);
}

static void push_query(struct as_model *out, const struct procmap_query *q, const char *name)
{
	struct as_region r;
	memset(&r, 0, sizeof(r));
	r.start = q->vma_start;
	r.end = q->vma_end;
	r.offset = q->vma_offset;
	r.inode = q->inode;
	r.dev_major = q->dev_major;
	r.dev_minor = q->dev_minor;
	r.prot = (q->vma_flags & PROCMAP_QUERY_VMA_READABLE ? AS_PROT_READ : 0) |
		 (q->vma_flags & PROCMAP_QUERY_VMA_WRITABLE ? AS_PROT_WRITE : 0) |
		 (q->vma_flags & PROCMAP_QUERY_VMA_EXECUTABLE ? AS_PROT_EXEC : 0);
	r.shared = q->vma_flags & PROCMAP_QUERY_VMA_SHARED;
	r.path = q->vma_name_size > 1 ? xstrdup(name) : NULL;
	r.kind = as_classify(r.path, r.shared, r.inode);
	r.created.sc = r.changed.sc = MV_SC_UNKNOWN;
	as_model_push(out, &r);
}

static bool has_vsyscall(void)
{
	static int cached = -1;
	if (cached < 0) {
		_cleanup_free_ char *text = NULL;
		cached = mv_read_file_at(AT_FDCWD, "/proc/self/maps", &text, NULL) == 0 &&
			 strstr(text, "[vsyscall]") != NULL;
	}
	return cached;
}

static int query_maps(pid_t pid, struct as_model *out)
{
	_cleanup_close_ int fd = open_pid_file(pid, "maps");
	if (fd < 0)
		return fd;
	as_model_free(out);
	char name[4096 + 64];
	for (uint64_t addr = 0;;) {
		struct procmap_query q = {
		    .size = sizeof(q),
		    .query_flags = PROCMAP_QUERY_COVERING_OR_NEXT_VMA,
		    .query_addr = addr,
		    .vma_name_addr = (uint64_t)(uintptr_t)name,
		    .vma_name_size = sizeof(name),
		};
		if (ioctl(fd, PROCMAP_QUERY, &q) < 0) {
			if (errno == ENOENT)
				break; /* no VMA at or after addr */
			return errno == ESRCH ? -ESRCH : -errno;
		}
		push_query(out, &q, name);
		addr = q.vma_end;
	}
	if (has_vsyscall()) {
		struct procmap_query q = {
		    .vma_start = VSYSCALL_START,
		    .vma_end = VSYSCALL_START + 4096,
		    .vma_flags = PROCMAP_QUERY_VMA_EXECUTABLE,
		    .vma_name_size = sizeof("[vsyscall]"),
		};
		push_query(out, &q, "[vsyscall]");
	}
	as_model_totals(out);
	return 0;
}

static int resident_scan(pid_t pid, bool scan, struct as_model *m)
{
	if (!m->n)
		return 0;
	struct pagemap pm;
	int rc = pagemap_open(pid, scan, &pm);
	if (rc < 0)
		return rc;
	struct as_range *runs = NULL;
	size_t n = 0, cap = 0;
	uint64_t end = 0;
	for (size_t i = 0; i < m->n; i++)
		if (m->r[i].end <= TASK_LIMIT)
			end = m->r[i].end;
	/* Present pages, not the shared zero page: what smaps calls Rss. */
	rc = pagemap_runs(&pm, m->r[0].start, end, PAGE_IS_PRESENT, PAGE_IS_PFNZERO, &runs, &n,
			  &cap);
	pagemap_close(&pm);
	if (rc == 0)
		as_apply_resident(m, runs, n);
	free(runs);
	return rc;
}

/* Rss of every region from /proc/PID/smaps: exact on any kernel, but the
 * text is about 1 KiB a region. */
static int resident_smaps(pid_t pid, struct as_model *m)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/smaps", pid);
	_cleanup_free_ char *text = NULL;
	int rc = mv_read_file_at(AT_FDCWD, path, &text, NULL);
	if (rc < 0)
		return rc == -ENOENT ? -ESRCH : rc;
	long cur = -1;
	for (char *line = text; *line;) {
		char *eol = strchrnul(line, '\n');
		unsigned long long s, e, kb;
		if (sscanf(line, "%llx-%llx ", &s, &e) == 2 &&
		    line[strspn(line, "0123456789abcdef")] == '-')
			cur = as_find(m, s);
		else if (cur >= 0 && sscanf(line, "Rss: %llu kB", &kb) == 1)
			m->r[cur].committed = kb * 1024;
		line = *eol ? eol + 1 : eol;
	}
	as_model_totals(m);
	return 0;
}

int procmap_snapshot(pid_t pid, const struct features *f, enum procmap_source src,
		     struct as_model *out, const char **how)
{
	/* For a whole layout /proc/PID/maps is the faster source: 50,000
	 * regions parse in about 45 ms, while 50,000 PROCMAP_QUERY ioctls
	 * take about 130 ms (bench/regions.sh). PROCMAP_QUERY is for
	 * looking up one address. */
	bool query = src == PROCMAP_SRC_QUERY;
	FAULT_RETURN("procmap_read", EIO);
	int rc = query ? query_maps(pid, out) : read_maps(pid, out);
	if (rc < 0)
		return rc;
	if (f->pagemap_scan) {
		rc = resident_scan(pid, true, out);
		*how = query ? "procmap_query+pagemap_scan" : "maps+pagemap_scan";
	} else {
		rc = resident_smaps(pid, out);
		*how = query ? "procmap_query+smaps" : "maps+smaps";
	}
	return rc;
}
