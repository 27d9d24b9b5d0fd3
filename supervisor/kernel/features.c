#include "supervisor/kernel/features.h"
#include "common/compat.h"
#include "common/util.h"
#include "supervisor/kernel/listener.h"
#include "supervisor/kernel/pagemap.h"
#include "supervisor/kernel/pidfd.h"
#include "supervisor/kernel/procfs.h"
#include "supervisor/kernel/procmap.h"
#include "supervisor/kernel/ptrace.h"
#include "supervisor/kernel/uffd.h"
#include "supervisor/kernel/vm.h"

#include <fcntl.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/landlock.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/shm.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/utsname.h>
#include <sys/wait.h>

#ifndef USERFAULTFD_IOC_NEW
#define USERFAULTFD_IOC_NEW _IO(0xAA, 0x00)
#endif

/* ---- userfaultfd -------------------------------------------------------- */

/* userfaultfd(2) with flags besides O_CLOEXEC | O_NONBLOCK: an fd or -errno. */
static int uffd_open(int flags)
{
	int fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | flags);
	return fd < 0 ? -errno : fd;
}

/* A uffd from /dev/userfaultfd (6.1), whose access is the file's mode. */
static int uffd_open_dev(void)
{
	int dev = open("/dev/userfaultfd", O_RDWR | O_CLOEXEC);
	if (dev < 0)
		return -errno;
	int fd = ioctl(dev, USERFAULTFD_IOC_NEW, O_CLOEXEC | O_NONBLOCK);
	int err = errno;
	close(dev);
	return fd < 0 ? -err : fd;
}

/* What this user may create, and the features the kernel offers: a
 * user-mode-only uffd (5.11) tells them too when a full one is refused
 * (fs/userfaultfd.c userfaultfd_syscall_allowed: CAP_SYS_PTRACE or
 * vm.unprivileged_userfaultfd=1). */
static void probe_uffd(struct features *f)
{
	long v;
	f->unprivileged_uffd = procfs_sysctl("vm/unprivileged_userfaultfd", &v) == 0 ? (int)v : -1;
	uint64_t feats = 0, more = 0;
	int fd = uffd_open_dev();
	if (fd >= 0) {
		f->uffd_dev = uffd_features(fd, &feats) == 0;
		close(fd);
	}
	fd = uffd_open(0);
	if (fd >= 0) {
		f->uffd_syscall = uffd_features(fd, &more) == 0;
		close(fd);
	} else {
		f->uffd_err = -fd;
	}
	feats = feats ? feats : more;
	fd = uffd_open(UFFD_USER_MODE_ONLY);
	if (fd >= 0) {
		f->uffd_user_mode = true;
		if (!feats)
			uffd_features(fd, &feats);
		close(fd);
	}
	f->uffd_features = feats;
}

void features_uffd_names(uint64_t features, void (*fn)(const char *name, void *arg), void *arg)
{
	static const struct {
		uint64_t bit;
		const char *name;
	} names[] = {
	    {UFFD_FEATURE_PAGEFAULT_FLAG_WP, "wp"},
	    {UFFD_FEATURE_EVENT_FORK, "event_fork"},
	    {UFFD_FEATURE_EVENT_REMAP, "event_remap"},
	    {UFFD_FEATURE_EVENT_REMOVE, "event_remove"},
	    {UFFD_FEATURE_MISSING_HUGETLBFS, "missing_hugetlbfs"},
	    {UFFD_FEATURE_MISSING_SHMEM, "missing_shmem"},
	    {UFFD_FEATURE_EVENT_UNMAP, "event_unmap"},
	    {UFFD_FEATURE_SIGBUS, "sigbus"},
	    {UFFD_FEATURE_THREAD_ID, "thread_id"},
	    {UFFD_FEATURE_MINOR_HUGETLBFS, "minor_hugetlbfs"},
	    {UFFD_FEATURE_MINOR_SHMEM, "minor_shmem"},
	    {UFFD_FEATURE_EXACT_ADDRESS, "exact_address"},
	    {UFFD_FEATURE_WP_HUGETLBFS_SHMEM, "wp_hugetlbfs_shmem"},
	    {UFFD_FEATURE_WP_UNPOPULATED, "wp_unpopulated"},
	    {UFFD_FEATURE_POISON, "poison"},
	    {UFFD_FEATURE_WP_ASYNC, "wp_async"},
	    {UFFD_FEATURE_MOVE, "move"},
	};
	for (size_t i = 0; i < ARRAY_SIZE(names); i++)
		if (features & names[i].bit)
			fn(names[i].name, arg);
}

/* ---- the rest, without a child ------------------------------------------ */

/* The effective capabilities: what seccomp_set_mode_filter() and
 * landlock_restrict_self() (CAP_SYS_ADMIN when no_new_privs is not set),
 * UFFDIO_API's EVENT_FORK (CAP_SYS_PTRACE) and process_madvise
 * (CAP_SYS_NICE) check. capget(2) directly: libcap is not a dependency. */
static uint64_t effective_caps(void)
{
	struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3];
	memset(d, 0, sizeof(d));
	if (syscall(SYS_capget, &h, d) < 0)
		return 0;
	return d[0].effective | (uint64_t)d[1].effective << 32;
}

static void probe_caps(struct features *f)
{
	uint64_t caps = effective_caps();
	f->cap_sys_admin = caps >> CAP_SYS_ADMIN & 1;
	f->cap_sys_ptrace = caps >> CAP_SYS_PTRACE & 1;
	f->cap_sys_nice = caps >> CAP_SYS_NICE & 1;
	f->cap_setuid = (caps >> CAP_SETUID & 1) && (caps >> CAP_SETGID & 1);
}

static bool probe_peer_pidfd(void)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return false;
	int fd = -1;
	socklen_t len = sizeof(fd);
	bool ok = getsockopt(sv[0], SOL_SOCKET, SO_PEERPIDFD, &fd, &len) == 0 && fd >= 0;
	if (fd >= 0)
		close(fd);
	close(sv[0]);
	close(sv[1]);
	return ok;
}

static void probe_pidfd(struct features *f)
{
	int pfd = (int)syscall(SYS_pidfd_open, getpid(), 0);
	if (pfd < 0)
		return;
	f->pidfd = true;
	/* Our own pidfd, fetched through itself. */
	int g = (int)syscall(SYS_pidfd_getfd, pfd, pfd, 0);
	f->pidfd_getfd = g >= 0 || errno != ENOSYS;
	if (g >= 0)
		close(g);
	close(pfd);
}

void features_probe(struct features *f)
{
	struct utsname u;
	memset(f, 0, sizeof(*f));
	if (uname(&u) == 0)
		snprintf(f->kernel, sizeof(f->kernel), "%s", u.release);
	int maps = procfs_open(getpid(), "maps", O_RDONLY);
	f->procfs = maps >= 0;
	if (maps >= 0)
		close(maps);
	f->procmap_query = procmap_query_works();
	f->pagemap_scan = pagemap_scan_works();
	probe_pidfd(f);
	static const char probe[] = "x";
	char got = 0;
	struct iovec l = {&got, 1}, r = {(void *)probe, 1};
	f->process_vm = process_vm_readv(getpid(), &l, 1, &r, 1, 0) == 1 && got == 'x';
	f->mdwe = prctl(PR_GET_MDWE, 0, 0, 0, 0) >= 0;
	long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
	f->landlock_abi = abi > 0 ? (int)abi : 0;
	f->peer_pidfd = probe_peer_pidfd();
	uint32_t action = SECCOMP_RET_USER_NOTIF;
	f->seccomp_user_notif = syscall(SYS_seccomp, SECCOMP_GET_ACTION_AVAIL, 0, &action) == 0;
	long scope;
	f->ptrace_scope = procfs_sysctl("kernel/yama/ptrace_scope", &scope) == 0 ? (int)scope : -1;
	probe_caps(f);
	probe_uffd(f);
}

/* ---- trials in a child -------------------------------------------------- */

/* A child that waits until *release is closed (or it is killed), then
 * exits with status 7. Its pid, or -errno. */
static pid_t waiting_child(int *release)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	pid_t pid = fork();
	if (pid == 0) {
		char c;
		close(p[1]);
		while (read(p[0], &c, 1) < 0 && errno == EINTR)
			;
		_exit(7);
	}
	int err = errno;
	close(p[0]);
	if (pid < 0) {
		close(p[1]);
		return -err;
	}
	*release = p[1];
	return pid;
}

static void reap(pid_t pid, int release, bool kill_it)
{
	if (kill_it)
		kill(pid, SIGKILL);
	close(release);
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
}

struct listener_trial {
	int err;
	bool killable, sync;
};

/* In a child, which the filter then binds for good: a filter that
 * allows everything, with a listener (seccomp_set_mode_filter: EBUSY
 * when the process is under a listener already, since no task may have
 * two; EINVAL before 5.0, or for WAIT_KILLABLE_RECV before 5.19). */
static void listener_trial(int out)
{
	struct listener_trial t = {0};
	struct sock_filter allow = BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
	struct sock_fprog prog = {.len = 1, .filter = &allow};
	unsigned long flags =
	    SECCOMP_FILTER_FLAG_NEW_LISTENER | SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV;
	int fd = -1;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0) {
		fd = (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, flags, &prog);
		t.killable = fd >= 0;
		if (fd < 0 && errno == EINVAL)
			fd = (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
					  SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
	}
	struct listener l;
	if (fd < 0)
		t.err = errno;
	else if (listener_init(&l, fd, &t.sync) == 0)
		listener_free(&l);
	_exit(write(out, &t, sizeof(t)) == (ssize_t)sizeof(t) ? 0 : 1);
}

static void trial_listener(struct features *f)
{
	int p[2];
	struct listener_trial t = {.err = EPIPE};
	if (pipe2(p, O_CLOEXEC) < 0) {
		f->listener_err = errno;
		return;
	}
	pid_t pid = fork();
	if (pid == 0) {
		close(p[0]);
		listener_trial(p[1]);
	}
	close(p[1]);
	if (pid > 0) {
		while (read(p[0], &t, sizeof(t)) < 0 && errno == EINTR)
			;
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
	}
	close(p[0]);
	f->listener_err = pid < 0 ? EAGAIN : t.err;
	f->wait_killable_recv = t.killable;
	f->sync_wake_up = t.sync;
}

/* PIDFD_GET_INFO of a child while it runs, then its exit status once it
 * is reaped (PIDFD_INFO_EXIT, kept by the kernel past the reaping). */
static void trial_pidfd_info(struct features *f)
{
	int release;
	pid_t pid = waiting_child(&release);
	if (pid < 0)
		return;
	int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
	pid_t ppid = 0;
	int status = 0;
	f->pidfd_info = pfd >= 0 && pidfd_ppid(pfd, &ppid) == 0 && ppid == getpid();
	reap(pid, release, false);
	f->pidfd_info_exit = pfd >= 0 && pidfd_exit_status(pfd, &status) == 0 &&
			     WIFEXITED(status) && WEXITSTATUS(status) == 7;
	if (pfd >= 0)
		close(pfd);
}

/* Tracing a descendant is what checkpoint and evict do (Yama's
 * ptrace_scope 1 allows it, 2 only with CAP_SYS_PTRACE, 3 never). */
static void trial_ptrace(struct features *f)
{
	int release;
	pid_t pid = waiting_child(&release);
	if (pid < 0) {
		f->ptrace_err = -pid;
		return;
	}
	f->ptrace_err = -ptrace_seize_probe(pid);
	reap(pid, release, true);
}

/* UFFDIO_API with the events evict asks for: EVENT_FORK needs
 * CAP_SYS_PTRACE in the caller (fs/userfaultfd.c userfaultfd_api),
 * whatever made the uffd. */
static void trial_uffd_events(struct features *f)
{
	int fd = uffd_open(0);
	if (fd < 0)
		fd = uffd_open(UFFD_USER_MODE_ONLY);
	if (fd < 0)
		fd = uffd_open_dev();
	if (fd < 0) {
		f->uffd_events_err = -fd;
		return;
	}
	uint64_t missing;
	f->uffd_events_err = -uffd_api(fd, UFFD_EVICT_FEATURES, &missing);
	close(fd);
}

int features_uffd_sysv(void)
{
	int fd = uffd_open(0);
	if (fd < 0)
		fd = uffd_open(UFFD_USER_MODE_ONLY);
	if (fd < 0)
		fd = uffd_open_dev();
	if (fd < 0)
		return -fd;
	uint64_t missing;
	int err = -uffd_api(fd, UFFD_FEATURE_MISSING_SHMEM, &missing);
	int id = err ? -1 : shmget(IPC_PRIVATE, 4096, IPC_CREAT | 0600);
	if (!err && id < 0)
		err = errno;
	void *p = id < 0 ? (void *)-1 : shmat(id, NULL, 0);
	if (id >= 0) {
		if (p == (void *)-1)
			err = errno;
		shmctl(id, IPC_RMID, NULL); /* gone with the detach */
	}
	if (p != (void *)-1) {
		struct uffdio_register r = {.range = {(uintptr_t)p, 4096},
					    .mode = UFFDIO_REGISTER_MODE_MISSING};
		err = ioctl(fd, UFFDIO_REGISTER, &r) == 0 ? 0 : errno;
		shmdt(p);
	}
	close(fd);
	return err;
}

static void trial_uffd_sysv(struct features *f)
{
	f->uffd_sysv_err = features_uffd_sysv();
}

/* MADV_COLLAPSE of a huge-page-aligned range of ours, then through
 * process_madvise of the same range in a child, as reload does it
 * (supervisor/reload/thp.c): another process's memory needs CAP_SYS_NICE
 * (mm/madvise.c process_madvise). EAGAIN is a busy page: the kernel has it. */
static void trial_collapse(struct features *f)
{
	const size_t huge = 2u << 20;
	char *m = mmap(NULL, 3 * huge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED) {
		f->collapse_err = f->collapse_self_err = errno;
		return;
	}
	char *a = (char *)(((uintptr_t)m + huge - 1) & ~(uintptr_t)(huge - 1)), *b = a + huge;
	a[0] = b[0] = 1;
	f->collapse_self_err = madvise(a, huge, MADV_COLLAPSE) == 0 ? 0 : errno;
	int release;
	pid_t pid = waiting_child(&release);
	f->collapse_err = pid < 0 ? -pid : 0;
	if (pid > 0) {
		int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
		struct iovec iov = {.iov_base = b, .iov_len = huge};
		if (pfd < 0 || syscall(SYS_process_madvise, pfd, &iov, 1, MADV_COLLAPSE, 0) < 0)
			f->collapse_err = errno;
		if (pfd >= 0)
			close(pfd);
		reap(pid, release, true);
	}
	munmap(m, 3 * huge);
}

void features_probe_trials(struct features *f)
{
	features_probe(f);
	f->trials = true;
	trial_listener(f);
	trial_pidfd_info(f);
	trial_ptrace(f);
	trial_uffd_events(f);
	trial_uffd_sysv(f);
	trial_collapse(f);
}
