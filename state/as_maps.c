/* The address-space model's storage and the kernel layout parser. */
#include "state/as.h"
#include "common/util.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static const char *const kind_names[AS_KIND_COUNT] = {
    "anon", "file", "shmem", "heap", "stack", "vdso", "vvar", "vsyscall", "other",
};

const char *as_kind_name(enum as_kind k)
{
	return k < AS_KIND_COUNT ? kind_names[k] : "unknown";
}

void as_model_init(struct as_model *m)
{
	memset(m, 0, sizeof(*m));
}

void as_model_free(struct as_model *m)
{
	for (size_t i = 0; i < m->n; i++)
		free(m->r[i].path);
	free(m->r);
	as_model_init(m);
}

struct as_region *as_model_push(struct as_model *m, const struct as_region *r)
{
	if (m->n == m->cap) {
		m->cap = m->cap ? m->cap * 2 : 64;
		m->r = xrealloc(m->r, m->cap * sizeof(*m->r));
	}
	m->r[m->n] = *r;
	return &m->r[m->n++];
}

static bool starts_with(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

enum as_kind as_classify(const char *path, bool shared, uint64_t inode)
{
	if (!path || !*path)
		return shared ? AS_SHMEM : AS_ANON;
	if (path[0] == '[') {
		if (strcmp(path, "[heap]") == 0)
			return AS_HEAP;
		if (starts_with(path, "[stack"))
			return AS_STACK;
		if (strcmp(path, "[vdso]") == 0)
			return AS_VDSO;
		if (starts_with(path, "[vvar"))
			return AS_VVAR;
		if (strcmp(path, "[vsyscall]") == 0)
			return AS_VSYSCALL;
		if (starts_with(path, "[anon_shmem:"))
			return AS_SHMEM;
		if (starts_with(path, "[anon:"))
			return shared ? AS_SHMEM : AS_ANON;
		return AS_OTHER;
	}
	/* Shared anonymous memory is a shmem file the kernel names
	 * "/dev/zero (deleted)"; memfds are "/memfd:NAME"; SysV segments
	 * "/SYSV<key>". */
	if (starts_with(path, "/memfd:") || starts_with(path, "/SYSV"))
		return AS_SHMEM;
	if (shared && (strcmp(path, "/dev/zero (deleted)") == 0 || starts_with(path, "/dev/shm/")))
		return AS_SHMEM;
	return AS_FILE;
}

/* Parse one number field and the separator that must follow it. */
static bool field_u64(const char **p, int base, char sep, uint64_t *out)
{
	char *end;
	errno = 0;
	*out = strtoull(*p, &end, base);
	if (end == *p || errno || *end != sep)
		return false;
	*p = end + 1;
	return true;
}

/* One line of /proc/PID/maps: "start-end perms offset maj:min inode  path".
 * Parsed by hand: sscanf on a line of a 3 MiB buffer would measure the
 * whole rest of the buffer every time (glibc runs strlen on its input). */
static int parse_line(const char *line, const char *eol, struct as_region *r)
{
	const char *p = line;
	uint64_t maj, min;
	memset(r, 0, sizeof(*r));
	if (!field_u64(&p, 16, '-', &r->start) || !field_u64(&p, 16, ' ', &r->end) || eol - p < 5)
		return -EINVAL;
	const char *perms = p;
	p += 4;
	if (*p++ != ' ')
		return -EINVAL;
	if (!field_u64(&p, 16, ' ', &r->offset) || !field_u64(&p, 16, ':', &maj) ||
	    !field_u64(&p, 16, ' ', &min))
		return -EINVAL;
	char *end;
	r->inode = strtoull(p, &end, 10);
	if (end == p || end > eol || r->start >= r->end)
		return -EINVAL;
	p = end;
	r->dev_major = (uint32_t)maj;
	r->dev_minor = (uint32_t)min;
	r->prot = (perms[0] == 'r' ? AS_PROT_READ : 0) | (perms[1] == 'w' ? AS_PROT_WRITE : 0) |
		  (perms[2] == 'x' ? AS_PROT_EXEC : 0);
	r->shared = perms[3] == 's';
	while (p < eol && *p == ' ')
		p++;
	if (p < eol)
		r->path = strndup(p, (size_t)(eol - p));
	r->kind = as_classify(r->path, r->shared, r->inode);
	r->created.sc = r->changed.sc = MV_SC_UNKNOWN;
	return 0;
}

int as_parse_maps(const char *text, struct as_model *m)
{
	as_model_free(m);
	for (const char *line = text; *line;) {
		const char *eol = strchrnul(line, '\n');
		struct as_region r;
		if (parse_line(line, eol, &r) < 0)
			return -EINVAL;
		as_model_push(m, &r);
		line = *eol ? eol + 1 : eol;
	}
	as_model_totals(m);
	return 0;
}

void as_model_totals(struct as_model *m)
{
	m->mapped = m->committed = 0;
	for (size_t i = 0; i < m->n; i++) {
		m->mapped += m->r[i].end - m->r[i].start;
		m->committed += m->r[i].committed;
	}
}

long as_find(const struct as_model *m, uint64_t addr)
{
	size_t lo = 0, hi = m->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (addr < m->r[mid].start)
			hi = mid;
		else if (addr >= m->r[mid].end)
			lo = mid + 1;
		else
			return (long)mid;
	}
	return -1;
}

void as_apply_resident(struct as_model *m, const struct as_range *runs, size_t n)
{
	size_t j = 0;
	for (size_t i = 0; i < m->n; i++) {
		struct as_region *r = &m->r[i];
		r->committed = 0;
		/* Runs are sorted; skip those wholly before this region. */
		while (j < n && runs[j].end <= r->start)
			j++;
		for (size_t k = j; k < n && runs[k].start < r->end; k++) {
			uint64_t s = MV_MAX(runs[k].start, r->start);
			uint64_t e = MV_MIN(runs[k].end, r->end);
			if (e > s)
				r->committed += e - s;
		}
	}
	as_model_totals(m);
}
