#include "supervisor/kernel/procfs.h"
#include "common/fault.h"
#include "common/util.h"
#include "policy/decide.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

/* /proc/PID/rel, or /proc/PID/task/TID/rel when tid is not 0. */
static void task_path(char *path, size_t len, pid_t pid, pid_t tid, const char *rel)
{
	if (tid)
		snprintf(path, len, "/proc/%d/task/%d/%s", pid, tid, rel);
	else
		snprintf(path, len, "/proc/%d/%s", pid, rel);
}

/* A process's /proc directory vanishes with it: ENOENT is ESRCH. */
static int gone(int err)
{
	return err == ENOENT ? -ESRCH : -err;
}

int procfs_open(pid_t pid, const char *rel, int flags)
{
	char path[128];
	task_path(path, sizeof(path), pid, 0, rel);
	int fd = open(path, flags | O_CLOEXEC);
	return fd < 0 ? gone(errno) : fd;
}

static int read_task_file(pid_t pid, pid_t tid, const char *rel, char **text, size_t *len)
{
	char path[128];
	task_path(path, sizeof(path), pid, tid, rel);
	int rc = mv_read_file_at(AT_FDCWD, path, text, len);
	return rc < 0 ? gone(-rc) : 0;
}

int procfs_read(pid_t pid, const char *rel, char **text, size_t *len)
{
	return read_task_file(pid, 0, rel, text, len);
}

int procfs_task_status(pid_t pid, pid_t tid, struct proc_status *st)
{
	_cleanup_free_ char *buf = NULL;
	int rc = read_task_file(pid, tid, "status", &buf, NULL);
	return rc < 0 ? rc : parse_status(buf, st) < 0 ? -ESRCH : 0;
}

int procfs_task_stat(pid_t pid, pid_t tid, struct proc_stat *st)
{
	_cleanup_free_ char *buf = NULL;
	int rc = read_task_file(pid, tid, "stat", &buf, NULL);
	return rc < 0 ? rc : parse_stat(buf, st) < 0 ? -ESRCH : 0;
}

bool procfs_kernel_loop_thread(pid_t pid, pid_t tid)
{
	struct proc_stat st;
	return procfs_task_stat(pid, tid, &st) == 0 && (st.flags & PROC_PF_KERNEL_LOOP);
}

int procfs_status(pid_t tid, struct proc_status *st)
{
	FAULT_RETURN("proc_read", EIO);
	return procfs_task_status(tid, 0, st);
}

int procfs_stat(pid_t pid, struct proc_stat *st)
{
	FAULT_RETURN("proc_read", EIO);
	return procfs_task_stat(pid, 0, st);
}

int procfs_exe(pid_t pid, char *buf, size_t len)
{
	char path[64];
	task_path(path, sizeof(path), pid, 0, "exe");
	ssize_t n = readlink(path, buf, len - 1);
	if (n < 0)
		return gone(errno);
	buf[n] = '\0';
	return 0;
}

int procfs_identity(pid_t pid, struct proc_identity *id)
{
	memset(id, 0, sizeof(*id));
	id->procfd = procfs_open(pid, "", O_PATH | O_DIRECTORY);
	if (id->procfd < 0) {
		id->procfd = -1;
		return -ESRCH;
	}
	struct proc_stat st;
	int rc = procfs_stat(pid, &st);
	if (rc < 0)
		return rc;
	id->ppid = st.ppid;
	id->start_ticks = st.start_ticks;
	char exe[4096];
	if (procfs_exe(pid, exe, sizeof(exe)) == 0)
		id->exe = xstrdup(exe);
	/* Without its command line a process is still identified. */
	rc = fault_hit("proc_read") ? -EIO
				    : procfs_read(pid, "cmdline", &id->cmdline, &id->cmdline_len);
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

int procfs_fd_walk(pid_t pid, int (*fn)(void *arg, int dfd, const char *name), void *arg)
{
	int dfd = procfs_open(pid, "fd", O_RDONLY | O_DIRECTORY);
	if (dfd < 0)
		return dfd;
	DIR *d = fdopendir(dfd);
	if (!d) {
		int err = -errno;
		close(dfd);
		return err;
	}
	int rc = 0;
	for (struct dirent *e; rc == 0 && (e = readdir(d));)
		if (e->d_name[0] != '.')
			rc = fn(arg, dfd, e->d_name);
	closedir(d);
	return rc;
}

int procfs_threads(pid_t pid)
{
	struct proc_status st;
	int rc = procfs_status(pid, &st);
	return rc < 0 ? rc : st.threads;
}

int procfs_tasks(pid_t pid, pid_t **v, size_t *n)
{
	*v = NULL;
	*n = 0;
	char path[64];
	task_path(path, sizeof(path), pid, 0, "task");
	DIR *d = opendir(path);
	if (!d)
		return errno == ESRCH ? -ESRCH : gone(errno);
	size_t cap = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		pid_t tid = (pid_t)atoi(e->d_name);
		if (tid <= 0)
			continue; /* "." and ".." */
		if (*n == cap)
			*v = xrealloc(*v, (cap = cap ? cap * 2 : 16) * sizeof(**v));
		(*v)[(*n)++] = tid;
	}
	closedir(d);
	return 0;
}

void procfs_children(pid_t pid, pid_t **v, size_t *n, size_t *cap)
{
	_cleanup_free_ pid_t *tids = NULL;
	size_t n_tids;
	if (procfs_tasks(pid, &tids, &n_tids) < 0)
		return;
	for (size_t i = 0; i < n_tids; i++) {
		_cleanup_free_ char *buf = NULL;
		if (read_task_file(pid, tids[i], "children", &buf, NULL) == 0)
			parse_pids(buf, v, n, cap);
	}
}

int procfs_statm_read(int fd, uint64_t *mapped, uint64_t *resident)
{
	char buf[128];
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
	if (n <= 0)
		return n < 0 && errno != ESRCH ? -errno : -ESRCH;
	buf[n] = '\0';
	uint64_t size, rss;
	if (parse_statm(buf, &size, &rss) < 0)
		return -ESRCH;
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
	*mapped = size * page;
	if (resident)
		*resident = rss * page;
	return 0;
}

int procfs_statm(pid_t pid, uint64_t *mapped, uint64_t *resident)
{
	_cleanup_close_ int fd = procfs_open(pid, "statm", O_RDONLY);
	if (fd < 0)
		return fd;
	return procfs_statm_read(fd, mapped, resident);
}

int procfs_fork_flags(pid_t pid, struct as_range **dc, size_t *n_dc, struct as_range **wf,
		      size_t *n_wf)
{
	_cleanup_free_ char *buf = NULL;
	*dc = *wf = NULL;
	*n_dc = *n_wf = 0;
	FAULT_RETURN("proc_read", EIO);
	int rc = procfs_read(pid, "smaps", &buf, NULL);
	if (rc < 0)
		return rc;
	return parse_fork_flags(buf, dc, n_dc, wf, n_wf);
}

int procfs_fd(pid_t pid, int fd, struct pol_fd *out)
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
	char rel[64];
	_cleanup_free_ char *buf = NULL;
	unsigned long flags = 0;
	snprintf(rel, sizeof(rel), "fdinfo/%d", fd);
	if (procfs_read(pid, rel, &buf, NULL) == 0) {
		parse_fdinfo_flags(buf, &flags);
		out->writable = (flags & O_ACCMODE) != O_RDONLY;
	} else {
		out->writable = true; /* cannot tell: assume the worst */
	}
	return 0;
}

int procfs_personality(pid_t pid, unsigned long *persona)
{
	_cleanup_free_ char *buf = NULL;
	int rc = procfs_read(pid, "personality", &buf, NULL);
	if (rc < 0)
		return rc;
	*persona = strtoul(buf, NULL, 16);
	return 0;
}

int procfs_in_call(pid_t pid, pid_t tid, int nr)
{
	_cleanup_free_ char *buf = NULL;
	int rc = read_task_file(pid, tid, "syscall", &buf, NULL);
	if (rc == -ESRCH)
		return 0;
	/* "running" (proc_pid_syscall: the thread is on a CPU, maybe inside
	 * the call) or unreadable: cannot tell. */
	if (rc < 0 || strncmp(buf, "running", 7) == 0)
		return 1;
	/* "NR args... sp pc" while blocked in a syscall; "-1 sp pc" while
	 * blocked outside one. */
	return strtol(buf, NULL, 10) == nr;
}

int procfs_wchan(pid_t pid, pid_t tid, char *buf, size_t len)
{
	_cleanup_free_ char *text = NULL;
	buf[0] = '\0';
	int rc = read_task_file(pid, tid, "wchan", &text, NULL);
	if (rc == 0)
		snprintf(buf, len, "%s", text);
	return rc;
}

int procfs_sysctl(const char *name, long *v)
{
	char path[256];
	_cleanup_free_ char *text = NULL;
	snprintf(path, sizeof(path), "/proc/sys/%s", name);
	int rc = mv_read_file_at(AT_FDCWD, path, &text, NULL);
	if (rc < 0)
		return rc;
	char *end;
	errno = 0;
	*v = strtol(text, &end, 10);
	return end == text || errno ? -EINVAL : 0;
}
