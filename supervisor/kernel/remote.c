/* Remote syscalls (supervisor/kernel/remote.h). The raw PTRACE_GETREGS,
 * SETREGS and SINGLESTEP of an injection live here only. */
#include "supervisor/kernel/remote.h"
#include "common/fault.h"
#include "common/log.h"
#include "common/util.h"
#include "supervisor/kernel/procfs.h"
#include "supervisor/kernel/procmap.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>

#define CS_64BIT	 0x33 /* __USER_CS: the thread runs 64-bit code */
#define SYSCALL_INSN_LEN 2

bool remote_is_injected(struct remote_marks *m, pid_t tid, uint64_t ip)
{
	return tid == atomic_load(&m->tid) && ip == atomic_load(&m->ip);
}

static int is_vdso(void *arg, const struct proc_vma *v)
{
	struct as_range *vdso = arg;
	if (!proc_vma_named(v, "[vdso]"))
		return 0;
	*vdso = (struct as_range){v->start, v->end};
	return 1;
}

static int find_vdso(pid_t tid, uint64_t *start, uint64_t *end)
{
	struct as_range vdso = {0, 0};
	int rc = procmap_vmas(tid, false, 0, UINT64_MAX, is_vdso, &vdso);
	if (rc < 0)
		return rc;
	*start = vdso.start;
	*end = vdso.end;
	return vdso.end ? 0 : -ENOEXEC;
}

/* The first `syscall` (0f 05) in the vdso's text. */
static int find_syscall_insn(pid_t pid, uint64_t start, uint64_t end, uint64_t *addr)
{
	size_t len = (size_t)(end - start);
	_cleanup_free_ unsigned char *buf = xmalloc(len);
	struct iovec local = {buf, len}, remote = {(void *)(uintptr_t)start, len};
	ssize_t n = process_vm_readv(pid, &local, 1, &remote, 1, 0);
	if (n < 0)
		return errno == ESRCH ? -ESRCH : -errno;
	for (ssize_t i = 0; i + 1 < n; i++)
		if (buf[i] == 0x0f && buf[i + 1] == 0x05) {
			*addr = start + (uint64_t)i;
			return 0;
		}
	return -ENOEXEC;
}

static struct ptrace_thread *pick_thread(struct ptrace_proc *pp)
{
	/* A thread without a pending signal and not in a group stop is the
	 * plainest to run an instruction on. */
	for (size_t i = 0; i < pp->n; i++)
		if (pp->t[i].state == PT_STOPPED && !pp->t[i].signal && !pp->t[i].group_stop &&
		    !procfs_kernel_loop_thread(pp->pid, pp->t[i].tid))
			return &pp->t[i];
	for (size_t i = 0; i < pp->n; i++)
		if (pp->t[i].state == PT_STOPPED &&
		    !procfs_kernel_loop_thread(pp->pid, pp->t[i].tid))
			return &pp->t[i];
	return NULL;
}

int remote_open_stopped(struct remote *r, struct ptrace_proc *pp, struct remote_marks *marks)
{
	memset(r, 0, sizeof(*r));
	r->marks = marks;
	r->pid = pp->pid;
	r->t = pick_thread(pp);
	if (!r->t)
		return -ESRCH;
	int rc = find_vdso(r->t->tid, &r->vdso_start, &r->vdso_end);
	if (rc == 0)
		rc = find_syscall_insn(r->t->tid, r->vdso_start, r->vdso_end, &r->sc_addr);
	return rc;
}

int remote_use_thread_stopped(struct remote *r, struct ptrace_thread *t)
{
	if (t->state != PT_STOPPED || procfs_kernel_loop_thread(r->pid, t->tid))
		return -ESRCH;
	r->t = t;
	return 0;
}

/* Wait for the single step's trap. Another signal that arrives first
 * (a signal-delivery stop before the instruction ran) is queued again for
 * after the injection and the step repeated. */
static int wait_step(struct remote *r)
{
	pid_t tid = r->t->tid;
	int last = 0, n_sig = 0, n_event = 0;
	for (int tries = 0; tries < 64; tries++) {
		int status;
		pid_t w = waitpid(tid, &status, __WALL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return errno == ECHILD ? -ESRCH : -errno;
		if (WIFEXITED(status) || WIFSIGNALED(status)) {
			r->t->state = PT_GONE;
			return -ESRCH;
		}
		if (!WIFSTOPPED(status))
			continue;
		int sig = WSTOPSIG(status);
		if (sig == SIGTRAP && (status >> 16) == 0)
			return 0;
		last = status;
		(status >> 16) ? n_event++ : n_sig++;
		if ((status >> 16) == 0 && !r->t->signal)
			r->t->signal = sig; /* delivered at detach */
		if (ptrace(PTRACE_SINGLESTEP, tid, 0, 0) < 0)
			return -errno;
	}
	/* What kept the step from ending, for whoever reads the log. */
	struct user_regs_struct regs = {0};
	ptrace(PTRACE_GETREGS, tid, 0, &regs);
	log_warn(
	    "remote: thread %d of process %d stopped 64 times without its single step "
	    "ending: %d signal stops, %d event stops, the last signal %d event %d, at ip %#llx "
	    "(the call's instruction at %#llx)",
	    tid, r->pid, n_sig, n_event, WSTOPSIG(last), last >> 16, (unsigned long long)regs.rip,
	    (unsigned long long)r->sc_addr);
	return -EIO;
}

static void set_call(struct user_regs_struct *regs, uint64_t ip, long nr, const long a[6])
{
	regs->rip = ip;
	regs->rax = (unsigned long long)nr;
	regs->orig_rax = (unsigned long long)-1;
	regs->rdi = (unsigned long long)a[0];
	regs->rsi = (unsigned long long)a[1];
	regs->rdx = (unsigned long long)a[2];
	regs->r10 = (unsigned long long)a[3];
	regs->r8 = (unsigned long long)a[4];
	regs->r9 = (unsigned long long)a[5];
}

int remote_syscall_stopped(struct remote *r, long nr, const long args[6], long *ret)
{
	FAULT_RETURN("remote_syscall", EIO);
	pid_t tid = r->t->tid;
	struct user_regs_struct saved, regs;
	if (ptrace(PTRACE_GETREGS, tid, 0, &saved) < 0)
		return errno == ESRCH ? -ESRCH : -errno;
	if (saved.cs != CS_64BIT)
		return -ENOEXEC;
	regs = saved;
	set_call(&regs, r->sc_addr, nr, args);
	if (ptrace(PTRACE_SETREGS, tid, 0, &regs) < 0)
		return errno == ESRCH ? -ESRCH : -errno;
	int rc = 0;
	/* Tell the notify thread before the call can reach it. */
	atomic_store(&r->marks->ip, r->sc_addr + SYSCALL_INSN_LEN);
	atomic_store(&r->marks->tid, tid);
	if (ptrace(PTRACE_SINGLESTEP, tid, 0, 0) < 0)
		rc = -errno;
	if (rc == 0)
		rc = wait_step(r);
	atomic_store(&r->marks->tid, 0);
	if (rc == 0 && ptrace(PTRACE_GETREGS, tid, 0, &regs) < 0)
		rc = -errno;
	if (rc == 0)
		*ret = (long)regs.rax;
	if (ptrace(PTRACE_SETREGS, tid, 0, &saved) < 0 && rc == 0)
		rc = errno == ESRCH ? -ESRCH : -errno;
	if (rc < 0 && rc != -ESRCH)
		log_warn("remote: syscall %ld in thread %d of process %d: %s", nr, tid, r->pid,
			 strerror(-rc));
	return rc;
}

int remote_park_stopped(struct remote *r, long nr)
{
	struct user_regs_struct regs;
	if (ptrace(PTRACE_GETREGS, r->t->tid, 0, &regs) < 0)
		return -errno;
	const long none[6] = {0};
	set_call(&regs, r->sc_addr, nr, none);
	return ptrace(PTRACE_SETREGS, r->t->tid, 0, &regs) < 0 ? -errno : 0;
}

bool remote_userfaultfd_allowed(pid_t pid, char *why, size_t len)
{
	long sysctl = 0;
	if (procfs_sysctl("vm/unprivileged_userfaultfd", &sysctl) == 0 && sysctl == 1)
		return true;
	struct proc_status st;
	if (procfs_status(pid, &st) < 0)
		return true;
	/* capable() asks the initial user namespace; /proc/1 may not be ours
	 * to read (a sandbox), so ours stands for it: a process in another
	 * namespace than memvisor's cannot be told, and the call decides. */
	struct stat a, b;
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)pid);
	if (stat(path, &a) < 0 || stat("/proc/self/ns/user", &b) < 0 || a.st_ino != b.st_ino ||
	    a.st_dev != b.st_dev)
		return true;
	if (st.cap_eff & (1ull << 19 /* CAP_SYS_PTRACE */))
		return true;
	snprintf(why, len,
		 "userfaultfd(2) would fail in process %d: it lacks CAP_SYS_PTRACE and "
		 "vm.unprivileged_userfaultfd is 0",
		 (int)pid);
	return false;
}

int remote_userfaultfd_stopped(struct remote *r, int pidfd, int *out, struct mv_err *err)
{
	return remote_userfaultfd_flags_stopped(r, pidfd, 0, out, err);
}

int remote_userfaultfd_flags_stopped(struct remote *r, int pidfd, int flags, int *out,
				     struct mv_err *err)
{
	long a[6] = {O_CLOEXEC | O_NONBLOCK | flags}, tfd = -1, ignored;
	int rc = remote_syscall_stopped(r, SYS_userfaultfd, a, &tfd);
	if (rc < 0)
		return mv_err_set(err, rc, NULL, "injecting userfaultfd(2) into process %d: %s",
				  r->pid, strerror(-rc));
	if (tfd < 0)
		return mv_err_set(
		    err, (int)tfd, NULL,
		    "userfaultfd(2) failed in process %d: %s (memvisor needs userfaultfd there: "
		    "CAP_SYS_PTRACE or vm.unprivileged_userfaultfd=1)",
		    r->pid, strerror((int)-tfd));
	int fd = (int)syscall(SYS_pidfd_getfd, pidfd, (int)tfd, 0);
	int gerr = errno;
	long c[6] = {tfd};
	if (remote_syscall_stopped(r, SYS_close, c, &ignored) < 0)
		log_warn("process %d keeps a copy of its userfaultfd (fd %ld)", r->pid, tfd);
	if (fd < 0)
		return mv_err_set(err, -gerr, NULL, "pidfd_getfd of process %d's userfaultfd: %s",
				  r->pid, strerror(gerr));
	*out = fd;
	return 0;
}

#ifndef PR_GET_TID_ADDRESS
#define PR_GET_TID_ADDRESS 40
#endif

int remote_tid_address_stopped(struct remote *r, uint64_t scratch, uint64_t *addr)
{
	uint64_t got = 0;
	long a[6] = {PR_GET_TID_ADDRESS, (long)scratch}, ret = 0;
	int rc = remote_syscall_stopped(r, SYS_prctl, a, &ret);
	if (rc < 0)
		return rc;
	if (ret < 0)
		return (int)ret;
	struct iovec local = {&got, sizeof(got)},
		     remote = {(void *)(uintptr_t)scratch, sizeof(got)};
	if (process_vm_readv(r->t->tid, &local, 1, &remote, 1, 0) != sizeof(got))
		return errno ? -errno : -EIO;
	*addr = got;
	return 0;
}
