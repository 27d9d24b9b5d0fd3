#include "state/procparse.h"
#include "common/util.h"
#include "state/as.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>

/* The value after "key:" of the first line in [text, end) that starts
 * with it (end NULL: up to the NUL), or NULL. */
static const char *field(const char *text, const char *end, const char *key)
{
	size_t klen = strlen(key);
	for (const char *p = text; p && *p && (!end || p < end);
	     p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
		if (strncmp(p, key, klen) == 0 && p[klen] == ':')
			return p + klen + 1;
	}
	return NULL;
}

static long long num_field(const char *text, const char *key, int *found)
{
	const char *v = field(text, NULL, key);
	if (!v)
		return 0;
	*found += 1;
	return strtoll(v, NULL, 10);
}

int parse_status(const char *text, struct proc_status *out)
{
	memset(out, 0, sizeof(*out));
	int found = 0;
	out->tgid = (pid_t)num_field(text, "Tgid", &found);
	out->ppid = (pid_t)num_field(text, "PPid", &found);
	out->threads = (int)num_field(text, "Threads", &found);
	if (found != 3)
		return -EINVAL;
	int opt = 0;
	out->tracer_pid = (pid_t)num_field(text, "TracerPid", &opt);
	out->vm_size = (uint64_t)num_field(text, "VmSize", &opt) * 1024;
	out->vm_rss = (uint64_t)num_field(text, "VmRSS", &opt) * 1024;
	out->seccomp = (int)num_field(text, "Seccomp", &opt);
	int filters = 0;
	out->seccomp_filters = (int)num_field(text, "Seccomp_filters", &filters);
	if (!filters)
		out->seccomp_filters = -1;
	const char *cap = field(text, NULL, "CapEff");
	if (cap)
		out->cap_eff = strtoull(cap, NULL, 16);
	const char *cgt = field(text, NULL, "SigCgt"), *ign = field(text, NULL, "SigIgn");
	if (cgt)
		out->sig_cgt = strtoull(cgt, NULL, 16);
	if (ign)
		out->sig_ign = strtoull(ign, NULL, 16);
	const char *name = field(text, NULL, "Name");
	if (name) {
		while (*name == ' ' || *name == '\t')
			name++;
		size_t n = strcspn(name, "\n");
		if (n >= sizeof(out->name))
			n = sizeof(out->name) - 1;
		memcpy(out->name, name, n);
		out->name[n] = '\0';
	}
	return 0;
}
int parse_stat(const char *text, struct proc_stat *out)
{
	memset(out, 0, sizeof(*out));
	const char *rp = strrchr(text, ')');
	if (!rp || sscanf(text, "%d", &out->pid) != 1)
		return -EINVAL;
	/* Fields from 3 (state) on; index i holds field i + 3. */
	unsigned long long f[64] = {0};
	const char *p = rp + 1;
	while (*p == ' ')
		p++;
	out->state = *p ? *p++ : '?';
	int n = 0;
	while (*p && n < 49) {
		char *end;
		unsigned long long v = strtoull(p, &end, 10);
		if (end == p)
			break;
		f[n + 4] = v; /* field numbers start at 4 after state */
		n++;
		p = end;
	}
	if (n < 20)
		return -EINVAL;
	out->ppid = (pid_t)f[4];
	out->flags = (uint32_t)f[9];
	out->num_threads = (int)f[20];
	out->start_ticks = f[22];
	out->vsize = f[23];
	out->rss_pages = f[24];
	out->start_code = f[26];
	out->end_code = f[27];
	out->start_stack = f[28];
	if (n >= 48) {
		out->start_brk = f[47];
		out->arg_start = f[48];
		out->env_end = f[51];
	}
	return 0;
}

int parse_statm(const char *text, uint64_t *size, uint64_t *resident)
{
	char *end;
	*size = strtoull(text, &end, 10);
	if (end == text)
		return -EINVAL;
	const char *p = end;
	*resident = strtoull(p, &end, 10);
	return end == p ? -EINVAL : 0;
}

int parse_pids(const char *text, pid_t **v, size_t *n, size_t *cap)
{
	for (const char *q = text; *q;) {
		char *end;
		long c = strtol(q, &end, 10);
		if (end == q)
			break;
		if (*n == *cap)
			*v = xrealloc(*v, (*cap = *cap ? *cap * 2 : 64) * sizeof(**v));
		(*v)[(*n)++] = (pid_t)c;
		q = end;
	}
	return 0;
}

int parse_fdinfo_flags(const char *text, unsigned long *flags)
{
	const char *f = field(text, NULL, "flags");
	if (!f)
		return -EINVAL;
	*flags = strtoul(f, NULL, 8);
	return 0;
}

/* ---- io_uring ---------------------------------------------------------- */

/* seq_file_path escapes " \t\n\\" as a backslash and three octal digits. */
static char *unescape_path(const char *s, const char *eol)
{
	char *out = xmalloc((size_t)(eol - s) + 1), *o = out;
	while (s < eol) {
		if (s[0] == '\\' && eol - s >= 4 && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' &&
		    s[2] <= '7' && s[3] >= '0' && s[3] <= '7') {
			*o++ = (char)((s[1] - '0') << 6 | (s[2] - '0') << 3 | (s[3] - '0'));
			s += 4;
		} else {
			*o++ = *s++;
		}
	}
	*o = '\0';
	return out;
}

/* The table lines after "KEY:\tN\n": "%5u: ..." each; fn gets each
 * line's text after ": ". Returns the lines read. */
static uint32_t table_lines(const char *after, uint32_t max,
			    void (*fn)(void *arg, const char *s, const char *eol), void *arg)
{
	uint32_t n = 0;
	const char *p = strchr(after, '\n');
	while (p && n < max) {
		p++;
		const char *eol = strchr(p, '\n');
		if (!eol)
			eol = p + strlen(p);
		const char *q = p;
		while (q < eol && *q == ' ')
			q++;
		const char *d = q;
		while (d < eol && *d >= '0' && *d <= '9')
			d++;
		if (d == q || d + 2 > eol || d[0] != ':' || d[1] != ' ')
			break;
		fn(arg, d + 2, eol);
		n++;
		p = *eol ? eol : NULL;
	}
	return n;
}

static void buf_line(void *arg, const char *s, const char *eol)
{
	struct uring_info *u = arg;
	char *end;
	uint64_t addr = strtoull(s, &end, 16);
	uint64_t len = end < eol && *end == '/' ? strtoull(end + 1, NULL, 10) : 0;
	u->bufs[u->bufs_listed++] = (struct as_range){addr, addr + len};
}

static void file_line(void *arg, const char *s, const char *eol)
{
	struct uring_info *u = arg;
	u->files[u->files_listed++] = unescape_path(s, eol);
}

int parse_uring_fdinfo(const char *text, struct uring_info *out)
{
	memset(out, 0, sizeof(*out));
	const char *b = field(text, NULL, "UserBufs");
	const char *f = field(text, NULL, "UserFiles");
	if (!b)
		return -EINVAL;
	/* A ring holds at most 2^14 buffers and 2^20 files (IORING_MAX_*):
	 * a count beyond that is not an io_uring's. */
	unsigned long nb = strtoul(b, NULL, 10), nf = f ? strtoul(f, NULL, 10) : 0;
	if (nb > (1u << 16) || nf > (1u << 20))
		return -EINVAL;
	out->n_bufs = (uint32_t)nb;
	out->n_files = (uint32_t)nf;
	out->bufs = xcalloc(MV_MAX(nb, 1), sizeof(*out->bufs));
	out->files = xcalloc(MV_MAX(nf, 1), sizeof(*out->files));
	table_lines(b, out->n_bufs, buf_line, out);
	if (f)
		table_lines(f, out->n_files, file_line, out);
	return 0;
}

void uring_info_free(struct uring_info *u)
{
	for (uint32_t i = 0; i < u->files_listed; i++)
		free(u->files[i]);
	free(u->files);
	free(u->bufs);
	memset(u, 0, sizeof(*u));
}

/* ---- maps ----------------------------------------------------------- */

/* Parse one number field of [*p, eol) and the separator that must follow
 * it. */
static bool field_u64(const char **p, const char *eol, int base, char sep, uint64_t *out)
{
	char *end;
	errno = 0;
	*out = strtoull(*p, &end, base);
	if (end == *p || end >= eol || errno || *end != sep)
		return false;
	*p = end + 1;
	return true;
}

int parse_maps_line(const char *line, const char *eol, struct proc_vma *v)
{
	const char *p = line;
	uint64_t maj, min;
	memset(v, 0, sizeof(*v));
	if (!field_u64(&p, eol, 16, '-', &v->start) || !field_u64(&p, eol, 16, ' ', &v->end) ||
	    eol - p < 5)
		return -EINVAL;
	const char *perms = p;
	p += 4;
	if (*p++ != ' ')
		return -EINVAL;
	if (!field_u64(&p, eol, 16, ' ', &v->offset) || !field_u64(&p, eol, 16, ':', &maj) ||
	    !field_u64(&p, eol, 16, ' ', &min))
		return -EINVAL;
	char *end;
	v->inode = strtoull(p, &end, 10);
	if (end == p || end > eol || v->start >= v->end)
		return -EINVAL;
	p = end;
	v->dev_major = (uint32_t)maj;
	v->dev_minor = (uint32_t)min;
	v->r = perms[0] == 'r';
	v->w = perms[1] == 'w';
	v->x = perms[2] == 'x';
	v->shared = perms[3] == 's';
	while (p < eol && *p == ' ')
		p++;
	v->name = p;
	v->name_len = (size_t)(eol - p);
	return 0;
}

int parse_maps(const char *text, uint64_t start, uint64_t end, proc_vma_fn fn, void *arg)
{
	for (const char *line = text; *line;) {
		const char *eol = strchrnul(line, '\n');
		struct proc_vma v;
		if (parse_maps_line(line, eol, &v) < 0)
			return -EINVAL;
		if (v.start >= end)
			break;
		if (v.end > start) {
			int rc = fn(arg, &v);
			if (rc)
				return rc < 0 ? rc : 0;
		}
		line = *eol ? eol + 1 : eol;
	}
	return 0;
}

uint64_t proc_vma_dev(const struct proc_vma *v)
{
	return makedev(v->dev_major, v->dev_minor);
}

bool proc_vma_named(const struct proc_vma *v, const char *name)
{
	return v->name_len == strlen(name) && memcmp(v->name, name, v->name_len) == 0;
}

bool proc_vma_name_starts(const struct proc_vma *v, const char *prefix)
{
	size_t n = strlen(prefix);
	return v->name_len >= n && memcmp(v->name, prefix, n) == 0;
}

bool proc_vma_anon(const struct proc_vma *v)
{
	if (v->inode == 0)
		return true;
	static const char *const anon_names[] = {"/memfd:", "/SYSV", "/dev/zero", "anon_hugepage",
						 "[anon_shmem"};
	for (size_t i = 0; i < ARRAY_SIZE(anon_names); i++)
		if (proc_vma_name_starts(v, anon_names[i]))
			return true;
	return false;
}

/* ---- smaps ---------------------------------------------------------- */

/* A region of smaps: its header (a maps line) and its field lines
 * [fields, end). */
typedef int (*smaps_fn)(void *arg, const struct proc_vma *v, const char *fields, const char *end);

/* Call fn for each region of smaps text. The number of regions (lines
 * before the first header belong to none), or fn's error. */
static int smaps_each(const char *text, smaps_fn fn, void *arg)
{
	struct proc_vma v = {0};
	const char *fields = NULL, *line = text;
	int n = 0;
	for (;;) {
		const char *eol = strchrnul(line, '\n');
		struct proc_vma next;
		bool header = *line && parse_maps_line(line, eol, &next) == 0;
		if (fields && (header || !*line)) {
			int rc = fn(arg, &v, fields, line);
			if (rc < 0)
				return rc;
		}
		if (!*line)
			return n;
		if (header) {
			v = next;
			fields = *eol ? eol + 1 : eol;
			n++;
		}
		line = *eol ? eol + 1 : eol;
	}
}

static void range_push(struct as_range **v, size_t *n, uint64_t start, uint64_t end)
{
	if (*n && (*v)[*n - 1].end == start) {
		(*v)[*n - 1].end = end; /* adjacent regions: one range */
		return;
	}
	/* Capacity 4, 8, 16...: full whenever n is 0 or a power of two >= 4. */
	if (*n == 0 || (*n >= 4 && !(*n & (*n - 1))))
		*v = xrealloc(*v, (*n ? *n * 2 : 4) * sizeof(**v));
	(*v)[(*n)++] = (struct as_range){start, end};
}

/* Does the VmFlags value [flags, eol) hold the two-letter flag f? */
static bool has_vmflag(const char *flags, const char *eol, const char *f)
{
	for (const char *p = flags; p + 2 <= eol; p++)
		if (p[0] == f[0] && p[1] == f[1] && (p + 2 == eol || p[2] == ' ') && p[-1] == ' ')
			return true;
	return false;
}

struct fork_flags {
	struct as_range **dc, **wf;
	size_t *n_dc, *n_wf;
};

static int fork_flags_one(void *arg, const struct proc_vma *v, const char *fields, const char *end)
{
	struct fork_flags *ff = arg;
	const char *flags = field(fields, end, "VmFlags");
	if (!flags)
		return 0;
	const char *eol = strchrnul(flags, '\n');
	if (has_vmflag(flags, eol, "dc"))
		range_push(ff->dc, ff->n_dc, v->start, v->end);
	if (has_vmflag(flags, eol, "wf"))
		range_push(ff->wf, ff->n_wf, v->start, v->end);
	return 0;
}

int parse_fork_flags(const char *text, struct as_range **dc, size_t *n_dc, struct as_range **wf,
		     size_t *n_wf)
{
	*dc = *wf = NULL;
	*n_dc = *n_wf = 0;
	struct fork_flags ff = {dc, wf, n_dc, n_wf};
	return smaps_each(text, fork_flags_one, &ff) || !*text ? 0 : -EINVAL;
}

struct rss_each {
	int (*fn)(void *arg, uint64_t start, uint64_t rss);
	void *arg;
};

static int rss_one(void *arg, const struct proc_vma *v, const char *fields, const char *end)
{
	struct rss_each *r = arg;
	const char *rss = field(fields, end, "Rss");
	return rss ? r->fn(r->arg, v->start, strtoull(rss, NULL, 10) * 1024) : 0; /* "Rss:  N kB" */
}

int parse_smaps_rss(const char *text, int (*fn)(void *arg, uint64_t start, uint64_t rss), void *arg)
{
	struct rss_each r = {fn, arg};
	int n = smaps_each(text, rss_one, &r);
	return n || !*text ? 0 : -EINVAL;
}
