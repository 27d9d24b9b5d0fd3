/* notif_floor: the raw cost of a seccomp user notification round trip,
 * without memvisor: the floor any supervisor built on notifications stands
 * on.
 *
 *   notif_floor [-n N] [-b BATCHES] [-p CPU] [VARIANT...]
 *
 * A variant is CALL-WAIT-WAKE:
 *   CALL  emul  the tracee calls getppid; the supervisor answers with an
 *               emulated value (resp.val), the call never runs
 *         cont  the tracee does mmap 64 KiB + touch + munmap; both calls are
 *               notified and answered with SECCOMP_USER_NOTIF_FLAG_CONTINUE
 *               (what memvisor does)
 *         contppid  getppid answered with CONTINUE (only when named)
 *   WAIT  block the supervisor sleeps in ioctl(SECCOMP_IOCTL_NOTIF_RECV)
 *         epoll the supervisor sleeps in epoll_wait, then receives (what
 *               memvisor's libev notify thread does)
 *   WAKE  sync  SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP set on the listener
 *               (when the kernel refuses it, sync_used=0 says so)
 *         async the default wake-ups
 * With no VARIANT, all eight run. -p CPU pins both processes to one CPU.
 * Each variant runs BATCHES batches (default 7) of N ops (default 2000)
 * after N/10 ops of warm-up and prints one line of key=value pairs with
 * the median batch; native_ns is the same op measured in the same tracee
 * before its filter was loaded, and ns_per_notif the cost one notification
 * adds: (ns_per_op - native_ns) / calls_per_op.
 *
 * Two processes, not two threads: memvisor's tracee is another process, so
 * every hand-over between tracee and supervisor switches address spaces
 * (and, with PTI, page tables twice per crossing); threads of one process
 * would hide that part of the cost. The tracee loads the filter and hands
 * the listener to the supervisor over a socketpair with SCM_RIGHTS.
 * Between loading the filter and handing it over the tracee makes no
 * notified call, or it would wait forever on a listener nobody holds. */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Linux 6.6; Debian 12's headers predate it. */
#ifndef SECCOMP_IOCTL_NOTIF_SET_FLAGS
#define SECCOMP_IOCTL_NOTIF_SET_FLAGS SECCOMP_IOW(4, __u64)
#endif
#ifndef SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP
#define SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP 1
#endif

#define REGION      (64UL << 10)
#define MAX_BATCHES 101
#define EMUL_VAL    4242
/* A variant that hangs (a tracee that died early leaves a blocking RECV
 * waiting forever) is a bug here or in the kernel: SIGALRM ends it. */
#define WATCHDOG_S  120

enum wait_mode { WAIT_BLOCK, WAIT_EPOLL };

/* What the tracee calls and how the supervisor answers. */
struct call_kind {
	const char *name;
	void (*op)(void);
	unsigned int nr[2]; /* the calls the filter notifies */
	int calls_per_op;
	bool emulate;    /* answer with resp.val, or CONTINUE */
	bool by_default; /* run when no variant is named */
};

struct variant {
	const struct call_kind *call;
	enum wait_mode wait;
	bool sync;
};

static const char *const wait_names[] = {"block", "epoll"};
static const char *const wake_names[] = {"async", "sync"};

static long n_ops = 2000;
static int n_batches = 7;

static void __attribute__((noreturn)) die(const char *what)
{
	fprintf(stderr, "notif_floor: %s: %s\n", what, strerror(errno));
	exit(1);
}

static double now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* ---- the tracee: after its filter is loaded, raw syscalls only ---- */

/* _exit on failure: the tracee must not run stdio (malloc, maybe mmap)
 * under its own filter. */
static void op_getppid(void)
{
	if (syscall(SYS_getppid) < 0)
		_exit(3);
}

static void op_pair(void)
{
	char *p = mmap(NULL, REGION, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		_exit(3);
	*(volatile char *)p = 1;
	if (munmap(p, REGION) < 0)
		_exit(3);
}

/* contppid is not run by default: CONTINUE on a call that does nothing,
 * to tell the cost of CONTINUE itself from that of the memory calls that
 * follow a switch between address spaces. */
static const struct call_kind calls[] = {
	{"emul", op_getppid, {SYS_getppid, SYS_getppid}, 1, true, true},
	{"cont", op_pair, {SYS_mmap, SYS_munmap}, 2, false, true},
	{"contppid", op_getppid, {SYS_getppid, SYS_getppid}, 1, false, false},
};

static double run_batch(void (*op)(void), long n)
{
	double t0 = now_ns();
	for (long i = 0; i < n; i++)
		op();
	return (now_ns() - t0) / n;
}

/* Notify the variant's calls on the native ABI, allow everything else. */
static int load_filter(const struct variant *v)
{
	struct sock_filter insns[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 0, 3),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, v->call->nr[0], 2, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, v->call->nr[1], 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF),
	};
	struct sock_fprog prog = {sizeof(insns) / sizeof(insns[0]), insns};
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return -1;
	return syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER,
		       &prog);
}

static int send_fd(int sock, int fd)
{
	char byte = 0, cbuf[CMSG_SPACE(sizeof(int))] = {0};
	struct iovec iov = {&byte, 1};
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1,
			     .msg_control = cbuf, .msg_controllen = sizeof(cbuf)};
	struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	return sendmsg(sock, &msg, 0) == 1 ? 0 : -1;
}

/* Results: [0] the op before the filter, [1..] one per batch. The "go"
 * byte waits until the supervisor has set its listener flags. */
static void __attribute__((noreturn)) tracee(int sock, const struct variant *v)
{
	static double ns[MAX_BATCHES + 1];
	void (*op)(void) = v->call->op;
	char go;
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	run_batch(op, n_ops / 10 + 1);
	ns[0] = run_batch(op, n_ops);
	int listener = load_filter(v);
	if (listener < 0 || send_fd(sock, listener) < 0)
		_exit(2);
	close(listener);
	if (read(sock, &go, 1) != 1)
		_exit(2);
	/* The first op checks the answer really is the emulated one. */
	if (!v->call->emulate)
		op();
	else if (syscall(SYS_getppid) != EMUL_VAL)
		_exit(4);
	run_batch(op, n_ops / 10);
	for (int b = 1; b <= n_batches; b++)
		ns[b] = run_batch(op, n_ops);
	size_t len = (n_batches + 1) * sizeof(double);
	_exit(write(sock, ns, len) == (ssize_t)len ? 0 : 2);
}

/* ---- the supervisor ---- */

static int recv_fd(int sock)
{
	char byte, cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = {&byte, 1};
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1,
			     .msg_control = cbuf, .msg_controllen = sizeof(cbuf)};
	if (recvmsg(sock, &msg, 0) != 1)
		return -1;
	struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
	if (!cm || cm->cmsg_type != SCM_RIGHTS)
		return -1;
	int fd;
	memcpy(&fd, CMSG_DATA(cm), sizeof(int));
	return fd;
}

/* Despite its _IOW(.., __u64) encoding the kernel takes the flags by
 * value, as the ioctl argument itself (kernel/seccomp.c:
 * seccomp_notify_set_flags(filter, arg); seccomp_unotify(2)): a pointer
 * to the flags is refused with EINVAL. */
static bool set_sync_wake_up(int listener)
{
	unsigned long flags = SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP;
	return ioctl(listener, SECCOMP_IOCTL_NOTIF_SET_FLAGS, flags) == 0;
}

static void wait_readable(int epfd)
{
	struct epoll_event ev;
	while (epoll_wait(epfd, &ev, 1, -1) < 0)
		if (errno != EINTR)
			die("epoll_wait");
}

/* One notification: (wait,) receive, answer. Returns false when the call
 * was withdrawn before we received it (a signal): it does not count. */
static bool answer_one(int listener, int epfd, const struct variant *v,
		       struct seccomp_notif *req, struct seccomp_notif_resp *resp, size_t req_size,
		       size_t resp_size)
{
	if (epfd >= 0)
		wait_readable(epfd);
	memset(req, 0, req_size);
	if (ioctl(listener, SECCOMP_IOCTL_NOTIF_RECV, req) < 0) {
		if (errno == ENOENT || errno == EINTR)
			return false;
		die("SECCOMP_IOCTL_NOTIF_RECV");
	}
	memset(resp, 0, resp_size);
	resp->id = req->id;
	if (v->call->emulate)
		resp->val = EMUL_VAL;
	else
		resp->flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
	if (ioctl(listener, SECCOMP_IOCTL_NOTIF_SEND, resp) < 0 && errno != ENOENT)
		die("SECCOMP_IOCTL_NOTIF_SEND");
	return true;
}

/* The tracee makes an exact number of notified calls: answer that many.
 * Buffers are sized by the kernel, which may know larger structs than our
 * headers (seccomp_unotify(2)). */
static void supervise(int listener, const struct variant *v, long total)
{
	struct seccomp_notif_sizes sz;
	if (syscall(SYS_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &sz) < 0)
		die("SECCOMP_GET_NOTIF_SIZES");
	size_t req_size = sz.seccomp_notif > sizeof(struct seccomp_notif) ?
				  sz.seccomp_notif : sizeof(struct seccomp_notif);
	size_t resp_size = sz.seccomp_notif_resp > sizeof(struct seccomp_notif_resp) ?
				   sz.seccomp_notif_resp : sizeof(struct seccomp_notif_resp);
	struct seccomp_notif *req = calloc(1, req_size);
	struct seccomp_notif_resp *resp = calloc(1, resp_size);
	int epfd = -1;
	if (v->wait == WAIT_EPOLL) {
		struct epoll_event ev = {.events = EPOLLIN, .data.fd = listener};
		epfd = epoll_create1(EPOLL_CLOEXEC);
		if (epfd < 0 || epoll_ctl(epfd, EPOLL_CTL_ADD, listener, &ev) < 0)
			die("epoll");
	}
	for (long done = 0; done < total;)
		done += answer_one(listener, epfd, v, req, resp, req_size, resp_size);
	if (epfd >= 0)
		close(epfd);
	free(req);
	free(resp);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static void report(const struct variant *v, bool sync_used, double *ns)
{
	double native = ns[0], *batch = ns + 1;
	qsort(batch, n_batches, sizeof(double), cmp_double);
	double med = batch[n_batches / 2];
	printf("variant=%s-%s-%s call=%s wait=%s sync=%d sync_used=%d calls_per_op=%d "
	       "ns_per_op=%.1f min=%.1f max=%.1f native_ns=%.1f ns_per_notif=%.1f "
	       "ops_per_s=%.0f\n",
	       v->call->name, wait_names[v->wait], wake_names[v->sync], v->call->name,
	       wait_names[v->wait], v->sync, sync_used, v->call->calls_per_op, med, batch[0],
	       batch[n_batches - 1], native, (med - native) / v->call->calls_per_op, 1e9 / med);
	fflush(stdout);
}

static void run_variant(const struct variant *v)
{
	int sv[2];
	alarm(WATCHDOG_S);
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		die("socketpair");
	fflush(stdout);
	pid_t pid = fork();
	if (pid < 0)
		die("fork");
	if (pid == 0) {
		close(sv[0]);
		tracee(sv[1], v);
	}
	close(sv[1]);
	int listener = recv_fd(sv[0]);
	if (listener < 0)
		die("receiving the listener");
	bool sync_used = v->sync && set_sync_wake_up(listener);
	if (write(sv[0], "g", 1) != 1)
		die("write");
	supervise(listener, v, (1 + n_ops / 10 + (long)n_batches * n_ops) * v->call->calls_per_op);
	double ns[MAX_BATCHES + 1];
	size_t len = (n_batches + 1) * sizeof(double);
	int status;
	bool ok = recv(sv[0], ns, len, MSG_WAITALL) == (ssize_t)len;
	if (waitpid(pid, &status, 0) < 0 || !ok || !WIFEXITED(status) || WEXITSTATUS(status)) {
		fprintf(stderr, "notif_floor: tracee failed (status %#x)\n", status);
		exit(1);
	}
	close(listener);
	close(sv[0]);
	report(v, sync_used, ns);
}

static int parse_variant(const char *s, struct variant *v)
{
	char call[16], wait[8], wake[8];
	if (sscanf(s, "%15[a-z]-%7[a-z]-%7[a-z]", call, wait, wake) != 3)
		return -1;
	v->call = NULL;
	for (size_t i = 0; i < sizeof(calls) / sizeof(calls[0]); i++)
		if (strcmp(call, calls[i].name) == 0)
			v->call = &calls[i];
	if (!v->call || (strcmp(wait, "block") && strcmp(wait, "epoll")))
		return -1;
	if (strcmp(wake, "sync") && strcmp(wake, "async"))
		return -1;
	v->wait = strcmp(wait, "block") ? WAIT_EPOLL : WAIT_BLOCK;
	v->sync = strcmp(wake, "sync") == 0;
	return 0;
}

static void pin(const char *arg)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(atoi(arg), &set);
	if (sched_setaffinity(0, sizeof(set), &set) < 0)
		die("sched_setaffinity");
}

static void usage(void)
{
	fprintf(stderr, "usage: notif_floor [-n N] [-b BATCHES] [-p CPU] "
			"[{emul|cont|contppid}-{block|epoll}-{sync|async}...]\n");
	exit(2);
}

static void parse_opts(int argc, char **argv)
{
	int c;
	while ((c = getopt(argc, argv, "n:b:p:")) != -1) {
		if (c == 'n' && (n_ops = atol(optarg)) > 0)
			continue;
		if (c == 'b' && (n_batches = atoi(optarg)) > 0 && n_batches <= MAX_BATCHES)
			continue;
		if (c == 'p') {
			pin(optarg);
			continue;
		}
		usage();
	}
}

int main(int argc, char **argv)
{
	parse_opts(argc, argv);
	if (optind < argc) {
		for (int i = optind; i < argc; i++) {
			struct variant v;
			if (parse_variant(argv[i], &v) < 0)
				usage();
			run_variant(&v);
		}
		return 0;
	}
	for (size_t c = 0; c < sizeof(calls) / sizeof(calls[0]); c++) {
		if (!calls[c].by_default)
			continue;
		for (int wait = WAIT_BLOCK; wait <= WAIT_EPOLL; wait++)
			for (int sync = 1; sync >= 0; sync--)
				run_variant(&(struct variant){&calls[c], wait, sync});
	}
	return 0;
}
