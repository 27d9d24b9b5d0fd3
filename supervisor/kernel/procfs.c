#include "supervisor/kernel/procfs.h"
#include "common/fault.h"
#include "common/util.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>

static int read_pid_file(pid_t pid, const char *name, char **out, size_t *len)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/%s", pid, name);
	FAULT_RETURN("proc_read", EIO);
	return mv_read_file_at(AT_FDCWD, path, out, len);
}

int procfs_status(pid_t tid, struct proc_status *st)
{
	_cleanup_free_ char *buf = NULL;
	int rc = read_pid_file(tid, "status", &buf, NULL);
	if (rc < 0)
		return rc == -ENOENT ? -ESRCH : rc;
	return parse_status(buf, st) < 0 ? -ESRCH : 0;
}

int procfs_stat(pid_t pid, struct proc_stat *st)
{
	_cleanup_free_ char *buf = NULL;
	int rc = read_pid_file(pid, "stat", &buf, NULL);
	if (rc < 0)
		return rc == -ENOENT ? -ESRCH : rc;
	return parse_stat(buf, st) < 0 ? -ESRCH : 0;
}

int procfs_identity(pid_t pid, struct proc_identity *id)
{
	memset(id, 0, sizeof(*id));
	id->procfd = -1;
	char path[64], exe[4096];
	snprintf(path, sizeof(path), "/proc/%d", pid);
	id->procfd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (id->procfd < 0)
		return -ESRCH;
	struct proc_stat st;
	int rc = procfs_stat(pid, &st);
	if (rc < 0)
		return rc;
	id->ppid = st.ppid;
	id->start_ticks = st.start_ticks;
	snprintf(path, sizeof(path), "/proc/%d/exe", pid);
	ssize_t n = readlink(path, exe, sizeof(exe) - 1);
	if (n >= 0) {
		exe[n] = '\0';
		id->exe = xstrdup(exe);
	}
	rc = read_pid_file(pid, "cmdline", &id->cmdline, &id->cmdline_len);
	if (rc == 0 && id->cmdline_len == 0) {
		/* A zombie has no command line left. */
		free(id->cmdline);
		id->cmdline = NULL;
	}
	return 0;
}

void procfs_identity_free(struct proc_identity *id)
{
	if (id->procfd >= 0)
		close(id->procfd);
	free(id->exe);
	free(id->cmdline);
	memset(id, 0, sizeof(*id));
	id->procfd = -1;
}

bool procfs_is_thread_of(const struct proc *p, pid_t tid)
{
	char rel[64];
	if (p->procfd >= 0) {
		snprintf(rel, sizeof(rel), "task/%d", tid);
		return faccessat(p->procfd, rel, F_OK, 0) == 0;
	}
	snprintf(rel, sizeof(rel), "/proc/%d/task/%d", p->pid, tid);
	return access(rel, F_OK) == 0;
}

int procfs_threads(pid_t pid)
{
	struct proc_status st;
	int rc = procfs_status(pid, &st);
	return rc < 0 ? rc : st.threads;
}

void procfs_children(pid_t pid, pid_t **v, size_t *n, size_t *cap)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	DIR *d = opendir(path);
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		char cpath[300];
		snprintf(cpath, sizeof(cpath), "/proc/%d/task/%s/children", pid, e->d_name);
		_cleanup_free_ char *buf = NULL;
		if (mv_read_file_at(AT_FDCWD, cpath, &buf, NULL) < 0)
			continue;
		for (char *q = buf, *end; *q; q = end) {
			long c = strtol(q, &end, 10);
			if (end == q)
				break;
			if (*n == *cap)
				*v = xrealloc(*v, (*cap = *cap ? *cap * 2 : 64) * sizeof(**v));
			(*v)[(*n)++] = (pid_t)c;
		}
	}
	closedir(d);
}

int procfs_fork_flags(pid_t pid, struct as_range **dc, size_t *n_dc, struct as_range **wf,
		      size_t *n_wf)
{
	_cleanup_free_ char *buf = NULL;
	*dc = *wf = NULL;
	*n_dc = *n_wf = 0;
	int rc = read_pid_file(pid, "smaps", &buf, NULL);
	if (rc < 0)
		return rc == -ENOENT ? -ESRCH : rc;
	return parse_fork_flags(buf, dc, n_dc, wf, n_wf);
}
