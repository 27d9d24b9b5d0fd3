#include "state/procparse.h"
#include "common/util.h"
#include "state/as.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *field(const char *text, const char *key)
{
	size_t klen = strlen(key);
	for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
		if (strncmp(p, key, klen) == 0 && p[klen] == ':')
			return p + klen + 1;
	}
	return NULL;
}

static long long num_field(const char *text, const char *key, int *found)
{
	const char *v = field(text, key);
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
	out->vm_size = (uint64_t)num_field(text, "VmSize", &opt) * 1024;
	out->vm_rss = (uint64_t)num_field(text, "VmRSS", &opt) * 1024;
	out->seccomp = (int)num_field(text, "Seccomp", &opt);
	const char *name = field(text, "Name");
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

/* Does the VmFlags line (after "VmFlags:") hold the two-letter flag f? */
static bool has_vmflag(const char *line, const char *eol, const char *f)
{
	for (const char *p = line; p + 2 <= eol; p++)
		if (p[0] == f[0] && p[1] == f[1] && (p + 2 == eol || p[2] == ' ') && p[-1] == ' ')
			return true;
	return false;
}

int parse_fork_flags(const char *text, struct as_range **dc, size_t *n_dc, struct as_range **wf,
		     size_t *n_wf)
{
	*dc = *wf = NULL;
	*n_dc = *n_wf = 0;
	unsigned long long start = 0, end = 0;
	bool header = false;
	for (const char *line = text; *line;) {
		const char *eol = strchrnul(line, '\n');
		unsigned long long s, e;
		if (line[strspn(line, "0123456789abcdef")] == '-' &&
		    sscanf(line, "%llx-%llx ", &s, &e) == 2) {
			start = s;
			end = e;
			header = true;
		} else if (header && strncmp(line, "VmFlags:", 8) == 0) {
			if (has_vmflag(line + 7, eol, "dc"))
				range_push(dc, n_dc, start, end);
			if (has_vmflag(line + 7, eol, "wf"))
				range_push(wf, n_wf, start, end);
			header = false;
		}
		line = *eol ? eol + 1 : eol;
	}
	return start || !*text ? 0 : -EINVAL;
}
