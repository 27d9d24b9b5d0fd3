/* The policy in the supervisor: load, launch, decide, account, swap.
 *
 * Accounting for the limits (docs/policy.md, "Limits and accounting").
 * The kernel is the truth: /proc/PID/statm's first field is what the
 * process maps (mm->total_vm, pages), /proc/PID/maps has one line per
 * region. A CONTINUE'd call does not say how it ended, so:
 *
 *  - max_mapped is RLIMIT_AS, set by the launcher and inherited: the
 *    kernel refuses exactly past it, for every way of growing (mmap,
 *    MAP_FIXED replacement, mremap, brk, stack growth, exec), under any
 *    concurrency. When growth calls are notified anyway, the supervisor
 *    checks first with the same arithmetic, so the refusal is counted.
 *
 *  - max_regions and max_mapped_tree are the supervisor's. Each process has
 *    an estimate that only errs high: its figure at the last read from the
 *    kernel, plus what every call allowed since may add. A thread makes one
 *    call at a time, so its next notification proves its previous call has
 *    returned (and is in the kernel's figure): its reservation goes then.
 *    When the estimate says "does not fit", the exact figure is read
 *    (statm / maps of every process of the tree, which finds forked
 *    children too) and the reservations of other threads are kept only
 *    while /proc/PID/task/TID/syscall shows them still inside that call
 *    (or running, which cannot be told apart). A call is refused only if
 *    it does not fit the exact figure.
 *
 *  - a fork adds a process as large as its parent: it is reserved until
 *    the parent's next notification, when the parent's children are
 *    counted from the kernel.
 *
 * Timeline of the race the reservations close (two threads, one process):
 *   T1: mmap 60M notified -> fits (statm 30M) -> CONTINUE, reserve 60M
 *   T2: mmap 60M notified -> statm may still say 30M (T1 not yet mapped):
 *       counted as 30M + T1's 60M -> does not fit a 128M limit -> exact:
 *       T1 still in mmap or running -> keep -> refused. */
#include "supervisor/supervise/enforce.h"
#include "supervisor/supervise/point.h"
#include "common/compat.h"
#include "common/fault.h"
#include "common/log.h"
#include "common/util.h"
#include "policy/filter.h"
#include "policy/needs.h"
#include "supervisor/supervise/execimage.h"
#include "supervisor/supervise/tree.h"
#include "supervisor/kernel/procfs.h"
#include "supervisor/kernel/pagemap.h"
#include "supervisor/kernel/procmap.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/kcmp.h>
#include <linux/landlock.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>

#define READ_IMPLIES_EXEC_ 0x0400000
/* Files remembered as shared-mapped through a writable fd (the W^X
 * double-mapping check); past this, every executable mapping of a file
 * scans the tree. */
#define SHARED_FILES_MAX 4096
/* Lifecycle events kept for the next decision (struct enforce). */
#define PENDING_MAX 4096

struct resv {
	pid_t tid;
	int nr;		  /* the syscall, as /proc/PID/task/TID/syscall shows it */
	uint64_t bytes;	  /* tree growth it may still bring */
	uint32_t regions; /* regions it may still add */
};

struct acct {
	pid_t pid;
	int statm_fd;
	uint64_t tree;	/* estimate of what it maps: last statm + growth since */
	bool shares_mm; /* a vfork child: counted with its parent */
	bool regions_known;
	uint64_t regions; /* estimate of its regions */
	struct resv *resv;
	size_t n_resv, cap_resv;
	unsigned execs; /* p->execs when rie/start_brk were read */
	int rie;	/* READ_IMPLIES_EXEC: -1 unknown */
	uint64_t start_brk;
};

struct fork_resv {
	pid_t pid, tid;
	int nr;
	uint64_t bytes;
};

/* A lifecycle event the accounting has not applied yet. */
struct pending {
	pid_t pid;
	bool exec; /* else an exit */
};

/* The calls one rule refused. */
#define REFUSED_MAX 16
struct refused {
	char rule[72];
	uint64_t n;
};

/* Locks. e->lock is the decision lock: the notify thread holds it for a
 * whole decision, and takes mv->lock inside it only to look the caller up
 * (enforce_caller_locked) and, after it, to record. Everything below is
 * under e->lock but for `pending`, which the lifecycle hooks fill under
 * mv->lock (they run with it held, from either thread) and the next
 * decision takes over. So what a decision reads from the kernel (statm,
 * maps, the tree, an executable's headers) is read without mv->lock, and
 * the main loop never waits behind it. */
struct enforce {
	pthread_mutex_t lock;
	struct policy *policy; /* the active policy */
	/* Lifecycle events for the next decision: pending under mv->lock,
	 * applying under lock. Beyond PENDING_MAX they are dropped and the
	 * whole accounting is read from the kernel again instead. */
	struct pending *pending, *applying;
	size_t n_pending, cap_pending, n_applying, cap_applying;
	bool pending_overflow, applying_overflow;
	struct needs launch; /* what the launch filter notifies */
	json_t *uncounted;   /* needs_uncounted_json(&launch): fixed, read without a lock */
	bool mdwe, landlock, rlimit_guard;
	bool rie_guarded;      /* READ_IMPLIES_EXEC cleared at launch, refused since */
	struct rlimit orig_as; /* memvisor's own RLIMIT_AS at start */
	uint64_t generation;
	uint64_t loaded_wall_ns;
	struct imap accts; /* tgid -> struct acct */
	struct fork_resv *forks;
	size_t n_forks, cap_forks;
	bool tree_stale; /* the next tree check must reconcile */
	struct pol_file_id *shared;
	size_t n_shared;
	bool shared_overflow;
	uint64_t reconciles, denials, kills;
	/* Refusals by rule, for one warning per rule and run's summary:
	 * rules past REFUSED_MAX are counted together. */
	struct refused refused[REFUSED_MAX];
	size_t n_refused;
	uint64_t refused_other;
};

/* ---- start-up -------------------------------------------------------- */

static void print_diag(const struct pol_diag *d)
{
	for (size_t i = 0; i < d->n; i++)
		fprintf(stderr, "%s\n", d->msg[i]);
}

int enforce_init(struct mv *mv)
{
	struct enforce *e = xcalloc(1, sizeof(*e));
	pthread_mutex_init(&e->lock, NULL);
	imap_init(&e->accts);
	getrlimit(RLIMIT_AS, &e->orig_as);
	mv->enforce = e;
	struct policy *pol = NULL;
	if (mv->opts.policy_path) {
		struct pol_diag d = {0};
		int rc = policy_load(mv->opts.policy_path, &pol, &d);
		/* A file that cannot be read is one line; a policy with
		 * mistakes, each of them and then the verdict. -EINVAL
		 * either way: said here, not again by the caller. */
		if (rc < 0 && rc != -EINVAL)
			fprintf(stderr, "memvisor: --policy %s: %s; the command was not started\n",
				mv->opts.policy_path, strerror(-rc));
		else
			print_diag(&d);
		pol_diag_free(&d);
		if (rc == -EINVAL)
			fprintf(stderr,
				"memvisor: %s: not a valid policy; the command was not started\n",
				mv->opts.policy_path);
		if (rc < 0)
			return -EINVAL;
	} else {
		pol = policy_default();
	}
	needs_compile(pol, mv->opts.notify_all, &e->launch);
	e->uncounted = needs_uncounted_json(&e->launch);
	e->rlimit_guard = pol->lim.max_mapped != 0;
	/* The launcher clears an inherited READ_IMPLIES_EXEC under any W^X,
	 * but only "deny" refuses setting it again. */
	e->rie_guarded = pol->wx == POL_WX_DENY;
	e->generation = 1;
	e->loaded_wall_ns = mv_wall_ns();
	e->tree_stale = true;
	e->policy = pol;
	return 0;
}

static void acct_free(struct acct *a)
{
	if (a->statm_fd >= 0)
		close(a->statm_fd);
	free(a->resv);
	free(a);
}

void enforce_free(struct mv *mv)
{
	struct enforce *e = mv->enforce;
	if (!e)
		return;
	void *v;
	for (size_t i = 0; imap_next(&e->accts, &i, NULL, &v);)
		acct_free(v);
	imap_free(&e->accts);
	needs_free(&e->launch);
	json_decref(e->uncounted);
	free(e->forks);
	free(e->shared);
	free(e->pending);
	free(e->applying);
	policy_free(e->policy);
	pthread_mutex_destroy(&e->lock);
	free(e);
	mv->enforce = NULL;
}

int enforce_filter(struct mv *mv, struct sock_fprog *prog)
{
	if (mv->point)
		return filter_build_point(&mv->enforce->launch, mv->point->name, mv->point->fd,
					  prog);
	return filter_build(&mv->enforce->launch, prog);
}

/* Landlock: every top-level directory and file but /proc may be written;
 * /proc/sys too. What is left unwritable is /proc/PID/..., among it
 * /proc/PID/mem, whose writes ignore page protections (FOLL_FORCE) and
 * would let a program patch its own code without any mprotect. */
static int landlock_ruleset(void)
{
	struct landlock_ruleset_attr attr = {
	    .handled_access_fs = LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_REFER,
	};
	/* ABI 1 refuses every rename across directories; 2 lets us grant it. */
	long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
	if (abi < 2)
		return abi < 0 ? -errno : -EOPNOTSUPP;
	int rs = (int)syscall(SYS_landlock_create_ruleset, &attr, sizeof(attr), 0);
	if (rs < 0)
		return -errno;
	DIR *d = opendir("/");
	if (!d) {
		close(rs);
		return -errno;
	}
	struct dirent *de;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") ||
		    !strcmp(de->d_name, "proc"))
			continue;
		char path[300];
		snprintf(path, sizeof(path), "/%s", de->d_name);
		_cleanup_close_ int fd = open(path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		struct stat st;
		if (fd < 0 || fstat(fd, &st) < 0 || !(S_ISDIR(st.st_mode) || S_ISREG(st.st_mode)))
			continue; /* symlinks (/bin -> usr/bin) are covered by their target */
		struct landlock_path_beneath_attr pb = {
		    .allowed_access = LANDLOCK_ACCESS_FS_WRITE_FILE |
				      (S_ISDIR(st.st_mode) ? LANDLOCK_ACCESS_FS_REFER : 0),
		    .parent_fd = fd,
		};
		syscall(SYS_landlock_add_rule, rs, LANDLOCK_RULE_PATH_BENEATH, &pb, 0);
	}
	closedir(d);
	_cleanup_close_ int sys = open("/proc/sys", O_PATH | O_CLOEXEC);
	if (sys >= 0) {
		struct landlock_path_beneath_attr pb = {
		    .allowed_access = LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_REFER,
		    .parent_fd = sys,
		};
		syscall(SYS_landlock_add_rule, rs, LANDLOCK_RULE_PATH_BENEATH, &pb, 0);
	}
	return rs;
}

/* Without CAP_SYS_ADMIN the filter needs no_new_privs, under which an exec
 * ignores setuid/setgid bits and file capabilities: say so when the
 * command itself is such a program (the first candidate that exists, as
 * execvp would pick it), since it would silently run unprivileged. */
static void warn_lost_privilege(const struct launch_spec *spec)
{
	for (char *const *c = spec->candidates; *c; c++) {
		struct stat st;
		if (stat(*c, &st) < 0)
			continue;
		bool caps = getxattr(*c, "security.capability", NULL, 0) > 0;
		if ((st.st_mode & (S_ISUID | S_ISGID)) || caps)
			fprintf(stderr,
				"memvisor: warning: %s is %s, but memvisor has no CAP_SYS_ADMIN "
				"and must set no_new_privs: it runs without that privilege\n",
				*c, caps ? "given file capabilities" : "setuid or setgid");
		return;
	}
}

int enforce_launch_spec(struct mv *mv, struct launch_spec *spec)
{
	struct enforce *e = mv->enforce;
	const struct policy *pol = e->policy;
	/* Nothing in a policy relies on no_new_privs: the filter stays across
	 * a setuid exec (it is the task's, not the credentials'), MDWE is an
	 * mm flag copied at exec (mm_init, MMF_INIT_MASK), Landlock accepts
	 * CAP_SYS_ADMIN instead (landlock_restrict_self), and the guards on
	 * setrlimit/personality/ptrace are decided by memvisor whatever the
	 * caller's privilege. So it is only set when the kernel demands it. */
	spec->no_new_privs = !mv->feat.cap_sys_admin;
	if (spec->no_new_privs)
		warn_lost_privilege(spec);
	if (pol->lim.max_mapped) {
		spec->set_rlimit_as = true;
		spec->rlimit_as = e->orig_as;
		if (pol->lim.max_mapped < e->orig_as.rlim_cur)
			spec->rlimit_as.rlim_cur = pol->lim.max_mapped;
	}
	if (pol->wx == POL_WX_OFF)
		return 0;
	spec->clear_read_implies_exec = true;
	if (pol->wx != POL_WX_DENY)
		return 0;
	/* MDWE is inherited by every descendant and cannot be lifted, so it
	 * can only back a policy that exempts nobody. */
	if (pol->n_wx_allow == 0 && pol->wx_mdwe && mv->feat.mdwe) {
		spec->mdwe = PR_MDWE_REFUSE_EXEC_GAIN;
		e->mdwe = true;
	}
	int rs = landlock_ruleset();
	if (rs < 0) {
		log_warn(
		    "wx deny: Landlock is unavailable (%s): writes to /proc/PID/mem stay possible",
		    strerror(-rs));
		return 0;
	}
	spec->landlock = true;
	spec->landlock_fd = rs;
	e->landlock = true;
	return 0;
}

void enforce_launch_done(struct mv *mv, struct launch_spec *spec)
{
	if (spec->landlock)
		close(spec->landlock_fd);
	spec->landlock = false;
}

/* ---- accounting ------------------------------------------------------ */

static bool accounting(const struct policy *pol)
{
	return pol->lim.max_mapped || pol->lim.max_mapped_tree || pol->lim.max_regions ||
	       pol->wx != POL_WX_OFF;
}

static struct acct *acct_get(struct enforce *e, pid_t pid)
{
	struct acct *a = imap_get(&e->accts, pid);
	if (a)
		return a;
	a = xcalloc(1, sizeof(*a));
	a->pid = pid;
	a->statm_fd = -1;
	a->rie = -1;
	a->execs = ~0u;
	imap_put(&e->accts, pid, a);
	return a;
}

static void acct_del(struct enforce *e, pid_t pid)
{
	struct acct *a = imap_del(&e->accts, pid);
	if (a)
		acct_free(a);
}

/* What was read about the previous program is void after an exec. */
static void acct_sync_exec(struct acct *a, unsigned execs)
{
	if (a->execs == execs)
		return;
	a->execs = execs;
	a->rie = -1;
	a->start_brk = 0;
}

static int acct_statm(struct acct *a, uint64_t *bytes)
{
	if (a->statm_fd < 0) {
		a->statm_fd = procfs_open(a->pid, "statm", O_RDONLY);
		if (a->statm_fd < 0)
			return -ESRCH;
	}
	return procfs_statm_read(a->statm_fd, bytes, NULL);
}

static struct resv *resv_of(struct acct *a, pid_t tid, bool create)
{
	for (size_t i = 0; i < a->n_resv; i++)
		if (a->resv[i].tid == tid)
			return &a->resv[i];
	if (!create)
		return NULL;
	if (a->n_resv == a->cap_resv) {
		a->cap_resv = a->cap_resv ? a->cap_resv * 2 : 4;
		a->resv = xrealloc(a->resv, a->cap_resv * sizeof(*a->resv));
	}
	a->resv[a->n_resv] = (struct resv){.tid = tid};
	return &a->resv[a->n_resv++];
}

static void resv_drop(struct acct *a, size_t i)
{
	a->resv[i] = a->resv[--a->n_resv];
}

/* Reservations of threads other than tid that may still be in flight;
 * the others go. Sums what they may still add. */
static void resv_settle(struct acct *a, pid_t tid, uint64_t *bytes, uint64_t *regions)
{
	*bytes = *regions = 0;
	for (size_t i = 0; i < a->n_resv;) {
		struct resv *r = &a->resv[i];
		if (r->tid != tid && procfs_in_call(a->pid, r->tid, r->nr)) {
			*bytes += r->bytes;
			*regions += r->regions;
			i++;
		} else {
			resv_drop(a, i);
		}
	}
}

/* Count children of pid the accounting does not know yet. */
static void adopt_children(struct enforce *e, pid_t pid)
{
	pid_t *v = NULL;
	size_t n = 0, cap = 0;
	procfs_children(pid, &v, &n, &cap);
	for (size_t i = 0; i < n; i++) {
		if (imap_get(&e->accts, v[i]))
			continue;
		struct acct *c = acct_get(e, v[i]);
		uint64_t bytes;
		c->shares_mm = pid > 0 && syscall(SYS_kcmp, v[i], pid, KCMP_VM, 0, 0) == 0;
		if (acct_statm(c, &bytes) == 0)
			c->tree = bytes;
		else
			acct_del(e, v[i]);
	}
	free(v);
}

/* The forks of pid (of thread tid, or all of its threads when tid is 0)
 * are over: their children are counted from the kernel instead. */
static void forks_settle(struct enforce *e, pid_t pid, pid_t tid, pid_t children_of)
{
	bool any = false;
	for (size_t i = 0; i < e->n_forks;) {
		if (e->forks[i].pid == pid && (!tid || e->forks[i].tid == tid)) {
			e->forks[i] = e->forks[--e->n_forks];
			any = true;
		} else {
			i++;
		}
	}
	if (any)
		adopt_children(e, children_of);
}

/* Walk the whole supervised tree: every process is counted from the
 * kernel now; processes that are gone are forgotten. */
static uint64_t reconcile(struct mv *mv, pid_t caller_tid)
{
	struct enforce *e = mv->enforce;
	struct {
		pid_t pid, parent;
	} *v = NULL;
	size_t n = 0, cap = 0;
	pid_t *kids = NULL;
	size_t kn = 0, kcap = 0;
	e->reconciles++;
	tree_tops(mv, &kids, &kn, &kcap);
	for (size_t k = 0; k < kn; k++) {
		if (n == cap)
			v = xrealloc(v, (cap = cap ? cap * 2 : 64) * sizeof(*v));
		v[n].pid = kids[k];
		v[n++].parent = 0;
	}
	for (size_t i = 0; i < n; i++) {
		kn = 0;
		procfs_children(v[i].pid, &kids, &kn, &kcap);
		for (size_t k = 0; k < kn; k++) {
			if (n == cap)
				v = xrealloc(v, (cap *= 2) * sizeof(*v));
			v[n].pid = kids[k];
			v[n++].parent = v[i].pid;
		}
	}
	free(kids);
	/* Mark what is alive, count it, forget the rest. */
	struct imap alive;
	imap_init(&alive);
	uint64_t total = 0;
	for (size_t i = 0; i < n; i++) {
		struct acct *a = acct_get(e, v[i].pid);
		uint64_t bytes, pending_b, pending_r;
		if (acct_statm(a, &bytes) < 0)
			continue;
		resv_settle(a, caller_tid, &pending_b, &pending_r);
		a->shares_mm =
		    v[i].parent && syscall(SYS_kcmp, v[i].pid, v[i].parent, KCMP_VM, 0, 0) == 0;
		a->tree = bytes + pending_b;
		imap_put(&alive, v[i].pid, a);
		if (!a->shares_mm)
			total += a->tree;
	}
	free(v);
	void *val;
	int key;
	for (size_t i = 0; imap_next(&e->accts, &i, &key, &val);) {
		if (!imap_get(&alive, key)) {
			acct_del(e, key);
			i = 0; /* the map changed under the iterator */
		}
	}
	imap_free(&alive);
	/* Every child that exists was just counted; a fork still in flight
	 * keeps its reservation. */
	for (size_t i = 0; i < e->n_forks;) {
		if (procfs_in_call(e->forks[i].pid, e->forks[i].tid, e->forks[i].nr)) {
			total += e->forks[i].bytes;
			i++;
		} else {
			e->forks[i] = e->forks[--e->n_forks];
		}
	}
	e->tree_stale = false;
	return total;
}

static uint64_t tree_estimate(struct enforce *e)
{
	uint64_t total = 0;
	void *val;
	for (size_t i = 0; imap_next(&e->accts, &i, NULL, &val);) {
		const struct acct *a = val;
		if (!a->shares_mm)
			total += a->tree;
	}
	for (size_t i = 0; i < e->n_forks; i++)
		total += e->forks[i].bytes;
	return total;
}

/* ---- the facts decisions ask for ------------------------------------ */

struct env {
	struct mv *mv;
	const struct enforce_caller *who;
	struct acct *a;
	pid_t pid, tid;
	int nr;
};

static int env_vm_size(void *envp, uint64_t *bytes)
{
	struct env *x = envp;
	if (!x->a)
		return -ESRCH;
	int rc = acct_statm(x->a, bytes);
	if (rc == 0) {
		/* The caller's own figure is fresh: its previous call has
		 * returned; only other threads' calls may be pending. */
		uint64_t pending = 0;
		for (size_t i = 0; i < x->a->n_resv; i++)
			pending += x->a->resv[i].bytes;
		x->a->tree = *bytes + pending;
	}
	return rc;
}

struct range_acc {
	uint64_t start, end;
	pid_t pid;
	bool want_written, use_scan;
	struct pol_range *r;
	int rc;
};

static int range_one(void *arg, const struct proc_vma *v)
{
	struct range_acc *acc = arg;
	struct pol_range *r = acc->r;
	uint64_t s = MV_MAX(v->start, acc->start), e = MV_MIN(v->end, acc->end);
	r->mapped += e - s;
	r->writable |= v->w;
	r->exec |= v->x;
	r->shared |= v->shared;
	if (proc_vma_anon(v)) {
		r->anon = true;
		return 0;
	}
	struct pol_file_id id = {proc_vma_dev(v), v->inode};
	bool known = false;
	for (size_t i = 0; i < r->n_files; i++)
		known |= r->files[i].dev == id.dev && r->files[i].ino == id.ino;
	if (!known && r->n_files < POL_RANGE_FILES)
		r->files[r->n_files++] = id;
	else if (!known)
		r->many_files = true;
	if (acc->want_written && !v->shared && !r->written) {
		bool w = false;
		int rc = pagemap_written(acc->pid, acc->use_scan, s, e, &w);
		if (rc < 0)
			return rc;
		r->written = w;
	}
	return 0;
}

static int env_range(void *envp, uint64_t start, uint64_t len, bool want_written,
		     struct pol_range *out)
{
	struct env *x = envp;
	memset(out, 0, sizeof(*out));
	if (!x->pid)
		return -ESRCH;
	uint64_t end = start + len < start ? UINT64_MAX : limits_page_align(start + len);
	struct range_acc acc = {start & ~(POL_PAGE - 1),  end, x->pid, want_written,
				x->mv->feat.pagemap_scan, out, 0};
	return procmap_vmas(x->pid, x->mv->feat.procmap_query, acc.start, acc.end, range_one, &acc);
}

static int env_fd(void *envp, int fd, struct pol_fd *out)
{
	struct env *x = envp;
	return x->pid ? procfs_fd(x->pid, fd, out) : -ESRCH;
}

static bool shared_known(const struct enforce *e, const struct pol_file_id *f)
{
	for (size_t i = 0; i < e->n_shared; i++)
		if (e->shared[i].dev == f->dev && e->shared[i].ino == f->ino)
			return true;
	return false;
}

static void shared_note(struct enforce *e, const struct pol_file_id *f)
{
	if (shared_known(e, f))
		return;
	if (e->n_shared == SHARED_FILES_MAX) {
		e->shared_overflow = true;
		return;
	}
	if (!e->shared)
		e->shared = xcalloc(SHARED_FILES_MAX, sizeof(*e->shared));
	e->shared[e->n_shared++] = *f;
}

/* Every process of the tree, from the kernel (not just the ones that
 * made a notified call). */
static void tree_pids(struct mv *mv, pid_t **v, size_t *n)
{
	size_t cap = 0;
	*v = NULL;
	*n = 0;
	tree_tops(mv, v, n, &cap);
	for (size_t i = 0; i < *n; i++)
		procfs_children((*v)[i], v, n, &cap);
}

static int env_file_mapped(void *envp, const struct pol_file_id *f, enum pol_mapped how, bool *yes)
{
	struct env *x = envp;
	struct enforce *e = x->mv->enforce;
	*yes = false;
	/* No shared mapping through a writable fd was ever allowed: nothing
	 * to scan for. */
	if (how == POL_MAPPED_SHARED_W && !e->shared_overflow && !shared_known(e, f))
		return 0;
	pid_t *v;
	size_t n;
	tree_pids(x->mv, &v, &n);
	for (size_t i = 0; i < n && !*yes; i++) {
		bool ex, sh;
		if (procmap_maps_file(v[i], f->dev, f->ino, &ex, &sh) < 0)
			continue;
		*yes = how == POL_MAPPED_EXEC ? ex : sh;
	}
	free(v);
	return 0;
}

struct heap {
	uint64_t at, end;
};

static int heap_vma(void *arg, const struct proc_vma *v)
{
	struct heap *h = arg;
	if (v->start <= h->at && h->at < v->end)
		h->end = v->end;
	return 1; /* the first region is the only one that can hold it */
}

static int env_brk(void *envp, uint64_t *start, uint64_t *end)
{
	struct env *x = envp;
	if (!x->a || !x->who->known)
		return -ESRCH;
	acct_sync_exec(x->a, x->who->execs);
	if (!x->a->start_brk) {
		struct proc_stat st;
		int rc = procfs_stat(x->pid, &st);
		if (rc < 0)
			return rc;
		x->a->start_brk = st.start_brk;
	}
	*start = *end = limits_page_align(x->a->start_brk);
	/* The heap is the region holding start_brk (it may have merged with
	 * the bss below); its end is the page-aligned break (mm/mmap.c brk). */
	struct heap h = {x->a->start_brk, 0};
	int rc = procmap_vmas(x->pid, x->mv->feat.procmap_query, h.at, h.at + 1, heap_vma, &h);
	if (rc < 0)
		return rc;
	if (h.end)
		*end = h.end;
	return 0;
}

static int env_shm_size(void *envp, int shmid, uint64_t *bytes)
{
	struct shmid_ds ds;
	/* The supervisor shares the command's IPC namespace unless the
	 * command made its own; then the kernel's own limits apply. */
	if (shmctl(shmid, IPC_STAT, &ds) < 0)
		return -errno;
	*bytes = ds.shm_segsz;
	return 0;
}

static int env_regions(void *envp, bool exact, uint64_t *n)
{
	struct env *x = envp;
	if (!x->a)
		return -ESRCH;
	if (!exact && x->a->regions_known) {
		*n = x->a->regions;
		return 0;
	}
	uint64_t count, pb, pr;
	int rc = procmap_count(x->pid, &count);
	if (rc < 0)
		return rc;
	resv_settle(x->a, x->tid, &pb, &pr);
	x->a->regions = count + pr;
	x->a->regions_known = true;
	*n = x->a->regions;
	return 0;
}

static int env_tree(void *envp, bool exact, uint64_t *bytes)
{
	struct env *x = envp;
	struct enforce *e = x->mv->enforce;
	uint64_t vm;
	if (exact || e->tree_stale) {
		*bytes = reconcile(x->mv, x->tid);
		return 0;
	}
	/* The caller's figure fresh, the others as estimated. */
	if (x->a)
		env_vm_size(x, &vm);
	*bytes = tree_estimate(e);
	return 0;
}

static int env_rie(void *envp, bool *yes)
{
	struct env *x = envp;
	if (!x->a || !x->who->known)
		return -ESRCH;
	acct_sync_exec(x->a, x->who->execs);
	if (x->a->rie < 0) {
		unsigned long persona;
		int rc = procfs_personality(x->pid, &persona);
		if (rc < 0)
			return rc;
		x->a->rie = (persona & READ_IMPLIES_EXEC_) != 0;
	}
	*yes = x->a->rie;
	return 0;
}

static int env_exec_image(void *envp, const struct mv_call *c, struct pol_exec_image *out)
{
	struct env *x = envp;
	return execimage_inspect(c, c->listener, &x->mv->faulter, out);
}

static const struct pol_env_ops env_ops = {
    .vm_size = env_vm_size,
    .range = env_range,
    .fd = env_fd,
    .file_mapped = env_file_mapped,
    .brk = env_brk,
    .shm_size = env_shm_size,
    .regions = env_regions,
    .tree = env_tree,
    .read_implies_exec = env_rie,
    .exec_image = env_exec_image,
};

/* ---- deciding -------------------------------------------------------- */

/* After an allowed call: what it may add stays reserved until its thread
 * is seen again. */
static void account_allowed(struct enforce *e, struct env *x, const struct pol_decision *d)
{
	if (d->note_shared)
		shared_note(e, &d->file);
	if (!x->a || (!d->grow_tree && !d->grow_regions))
		return;
	if (d->fork && d->grow_tree) {
		if (e->n_forks == e->cap_forks) {
			e->cap_forks = e->cap_forks ? e->cap_forks * 2 : 8;
			e->forks = xrealloc(e->forks, e->cap_forks * sizeof(*e->forks));
		}
		e->forks[e->n_forks++] = (struct fork_resv){x->pid, x->tid, x->nr, d->grow_tree};
	}
	struct resv *r = resv_of(x->a, x->tid, true);
	r->nr = x->nr;
	r->bytes = d->fork ? 0 : d->grow_tree;
	r->regions = d->grow_regions;
	if (!d->fork)
		x->a->tree += d->grow_tree;
	x->a->regions += d->grow_regions;
}

/* The thread is back: whatever it did before has returned. */
static void thread_returned(struct enforce *e, struct env *x)
{
	for (size_t i = 0; i < x->a->n_resv; i++) {
		if (x->a->resv[i].tid == x->tid) {
			resv_drop(x->a, i);
			break;
		}
	}
	forks_settle(e, x->pid, x->tid, x->pid);
}

static void kill_process(struct proc *p)
{
	/* pidfd: the pid cannot have been reused meanwhile. */
	if (p->pidfd >= 0 && syscall(SYS_pidfd_send_signal, p->pidfd, SIGKILL, NULL, 0) == 0)
		return;
	kill(p->pid, SIGKILL);
}

void enforce_begin(struct mv *mv)
{
	pthread_mutex_lock(&mv->enforce->lock);
}

void enforce_end(struct mv *mv)
{
	pthread_mutex_unlock(&mv->enforce->lock);
}

void enforce_caller_locked(struct mv *mv, const struct proc *p, struct enforce_caller *who)
{
	struct enforce *e = mv->enforce;
	memset(who, 0, sizeof(*who));
	if (p) {
		who->known = true;
		who->pid = p->pid;
		who->seen_ns = p->seen_ns;
		who->execs = p->execs;
		who->exe_verified = p->exe_verified;
		/* Only wx_allow goes by the executable: no copy per call
		 * otherwise. */
		who->exe = p->exe && e->policy->n_wx_allow ? xstrdup(p->exe) : NULL;
	}
	/* The lifecycle events so far are this decision's to apply: swap the
	 * lists (apply_lifecycle emptied `applying`). */
	struct pending *v = e->applying;
	size_t cap = e->cap_applying;
	e->applying = e->pending;
	e->n_applying = e->n_pending;
	e->cap_applying = e->cap_pending;
	e->applying_overflow = e->pending_overflow;
	e->pending = v;
	e->cap_pending = cap;
	e->n_pending = 0;
	e->pending_overflow = false;
}

/* Exec and exit, in the order the lifecycle saw them. */
static void apply_lifecycle(struct mv *mv)
{
	struct enforce *e = mv->enforce;
	if (e->applying_overflow) {
		/* Too many to replay: every figure is read again (the next
		 * tree check reconciles: it forgets the gone, settles the
		 * forks, finds vfork sharing; a process's own facts are read
		 * at its next call; an account left by a process that is gone
		 * is read afresh should its pid come back). */
		void *v;
		for (size_t i = 0; imap_next(&e->accts, &i, NULL, &v);) {
			struct acct *a = v;
			a->regions_known = false;
			a->rie = -1;
			a->start_brk = 0;
			a->execs = ~0u;
		}
		e->tree_stale = true;
		e->applying_overflow = false;
	}
	for (size_t i = 0; i < e->n_applying; i++) {
		pid_t pid = e->applying[i].pid;
		struct acct *a = imap_get(&e->accts, pid);
		if (!e->applying[i].exec) {
			/* Its orphans now belong to the reaper (memvisor is
			 * their subreaper; a container's init under the
			 * agent): count them before its fork reservations go. */
			forks_settle(e, pid, 0, tree_orphan_parent(mv));
			acct_del(e, pid);
			continue;
		}
		if (!a)
			continue;
		/* A new address space: its regions are unknown, its size is
		 * read from the kernel now. */
		a->regions_known = false;
		a->rie = -1;
		a->start_brk = 0;
		a->shares_mm = false;
		uint64_t bytes;
		if (acct_statm(a, &bytes) == 0)
			a->tree = bytes;
	}
	e->n_applying = 0;
}

/* The executable as the kernel has it (/proc/PID/exe), in place of one
 * taken from an execve's arguments. */
static void verify_exe(struct enforce_caller *who)
{
	char exe[4096];
	if (procfs_exe(who->pid, exe, sizeof(exe)) < 0)
		return;
	free(who->exe);
	who->exe = xstrdup(exe);
	who->exe_verified = who->exe_learned = true;
}

/* The first refusal by each rule is a warning, with no -L needed: a
 * program that dies of a refused call (a JIT under wx deny) would
 * otherwise leave the user nothing to go on. The next ones are counted
 * for run's summary (enforce_refused_summary) and logged at info. */
static void note_refusal(struct enforce *e, pid_t pid, const struct mv_call *c,
			 const struct pol_decision *d)
{
	const char *rule = d->rule ? d->rule : "?";
	size_t i = 0;
	while (i < e->n_refused && strcmp(e->refused[i].rule, rule) != 0)
		i++;
	if (i < e->n_refused) {
		e->refused[i].n++;
		return;
	}
	if (i == REFUSED_MAX) {
		e->refused_other++;
		return;
	}
	snprintf(e->refused[i].rule, sizeof(e->refused[i].rule), "%s", rule);
	e->refused[i].n = 1;
	e->n_refused++;
	char comm[64] = "?";
	char *text = NULL;
	size_t len = 0;
	if (procfs_read(pid, "comm", &text, &len) == 0) {
		snprintf(comm, sizeof(comm), "%.*s", (int)strcspn(text, "\n"), text);
		free(text);
	}
	log_warn("policy rule %s %s %s of pid %d (%s)%s%s; later refusals by %s are only "
		 "counted (-L info shows each)",
		 rule, d->verdict == MV_V_KILL ? "killed the caller for" : "refused",
		 syscalls_name(c->sc), pid, comm, d->why[0] ? ": " : "", d->why, rule);
}

/* snprintf at buf + n, cut at size; the new length. */
static size_t appendf(char *buf, size_t size, size_t n, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static size_t appendf(char *buf, size_t size, size_t n, const char *fmt, ...)
{
	if (n >= size - 1)
		return n;
	va_list ap;
	va_start(ap, fmt);
	int m = vsnprintf(buf + n, size - n, fmt, ap);
	va_end(ap);
	return m < 0 ? n : MV_MIN(n + (size_t)m, size - 1);
}

size_t enforce_refused_summary(struct mv *mv, char *buf, size_t size)
{
	struct enforce *e = mv->enforce;
	if (!e || !size)
		return 0;
	pthread_mutex_lock(&e->lock);
	uint64_t total = e->refused_other;
	for (size_t i = 0; i < e->n_refused; i++)
		total += e->refused[i].n;
	size_t n = 0;
	buf[0] = '\0';
	if (total) {
		n = appendf(buf, size, n, "%llu %s refused:", (unsigned long long)total,
			    mv_plural(total, "call", "calls"));
		for (size_t i = 0; i < e->n_refused; i++)
			n = appendf(buf, size, n, "%s %s %llu", i ? "," : "", e->refused[i].rule,
				    (unsigned long long)e->refused[i].n);
		if (e->refused_other)
			n = appendf(buf, size, n, ", other rules %llu",
				    (unsigned long long)e->refused_other);
	}
	pthread_mutex_unlock(&e->lock);
	return total ? n : 0;
}

void enforce_decide(struct mv *mv, struct enforce_caller *who, const struct mv_call *c,
		    struct pol_decision *d)
{
	struct enforce *e = mv->enforce;
	const struct policy *pol = e->policy;
	apply_lifecycle(mv);
	struct env x = {
	    .mv = mv, .who = who, .pid = who->pid, .tid = c->tid, .nr = syscalls_nr(c->sc, c->abi)};
	/* A denied brk answers with the break, a fact of the process. */
	if (who->known && (accounting(pol) || c->sc == MV_SC_brk)) {
		bool known = imap_get(&e->accts, who->pid) != NULL;
		x.a = acct_get(e, who->pid);
		/* Counted from the kernel from the first sight on: an estimate
		 * of 0 would let the tree grow past its limit. */
		uint64_t bytes;
		if (!known && pol->lim.max_mapped_tree && acct_statm(x.a, &bytes) == 0)
			x.a->tree = bytes;
	}
	if (x.a && accounting(pol))
		thread_returned(e, &x);
	/* wx_allow names executables as the kernel has them: an identity
	 * taken from an execve's arguments (maybe relative, or a symlink)
	 * is checked against /proc/PID/exe first. */
	if (who->known && pol->n_wx_allow && !who->exe_verified)
		verify_exe(who);
	struct pol_caller caller = {.exe = who->exe, .ops = &env_ops, .env = &x};
	/* A decision as slow as a read from a stuck file system: what the
	 * policy reads from the kernel must not hold up the main loop. */
	if (fault_hit("notify_stall"))
		sleep(3);
	decide(pol, c, &caller, d);
	/* A rule's name belongs to the policy, which `policy set` may free as
	 * soon as the lock is released; the caller reports it after that. */
	if (d->rule) {
		snprintf(d->rule_copy, sizeof(d->rule_copy), "%s", d->rule);
		d->rule = d->rule_copy;
	}
	if (d->verdict == MV_V_LOG)
		log_info("pid %d tid %d: %s logged by %s%s%s", x.pid, c->tid, syscalls_name(c->sc),
			 d->rule, d->why[0] ? ": " : "", d->why);
	if (d->verdict == MV_V_ALLOW || d->verdict == MV_V_LOG) {
		account_allowed(e, &x, d);
		return;
	}
	e->denials++;
	if (d->verdict == MV_V_KILL && who->known)
		e->kills++;
	note_refusal(e, x.pid, c, d);
	if (log_enabled(MV_LOG_INFO))
		log_info("pid %d tid %d: %s %s by %s%s%s", x.pid, c->tid, syscalls_name(c->sc),
			 d->verdict == MV_V_KILL ? "killed" : "denied", d->rule,
			 d->why[0] ? ": " : "", d->why);
}

void enforce_apply_locked(struct mv *mv, struct proc *p, struct enforce_caller *who,
			  const struct pol_decision *d)
{
	if (p && who->exe_learned && p->execs == who->execs) {
		free(p->exe);
		p->exe = mv_steal_ptr(who->exe);
		p->exe_verified = true;
	}
	if (p && d->verdict == MV_V_KILL && p->state == PROC_RUNNING)
		kill_process(p);
	free(mv_steal_ptr(who->exe));
}

void enforce_answer(const struct pol_decision *d, struct seccomp_notif_resp *resp)
{
	switch (d->verdict) {
	case MV_V_ALLOW:
	case MV_V_LOG:
		resp->flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
		resp->error = 0;
		break;
	case MV_V_KILL:
		/* The SIGKILL is on its way; the call must not run meanwhile. */
		resp->flags = 0;
		resp->error = -EPERM;
		break;
	default:
		resp->flags = 0;
		resp->error = d->emulate ? 0 : -(d->err ? d->err : EPERM);
		break;
	}
	resp->val = d->emulate && d->verdict == MV_V_DENY ? (int64_t)d->val : 0;
}

/* The lifecycle hooks run under mv->lock; the accounting is the next
 * decision's (apply_lifecycle), read from the kernel without mv->lock. */
static void queue_locked(struct enforce *e, pid_t pid, bool exec)
{
	if (e->pending_overflow)
		return;
	if (e->n_pending == PENDING_MAX) {
		e->pending_overflow = true;
		e->n_pending = 0;
		return;
	}
	if (e->n_pending == e->cap_pending) {
		e->cap_pending = e->cap_pending ? e->cap_pending * 2 : 16;
		e->pending = xrealloc(e->pending, e->cap_pending * sizeof(*e->pending));
	}
	e->pending[e->n_pending++] = (struct pending){pid, exec};
}

void enforce_proc_exec_locked(struct mv *mv, struct proc *p)
{
	if (mv->enforce)
		queue_locked(mv->enforce, p->pid, true);
}

void enforce_proc_exit_locked(struct mv *mv, struct proc *p)
{
	if (mv->enforce)
		queue_locked(mv->enforce, p->pid, false);
}

/* ---- run-time changes ------------------------------------------------ */

/* Set RLIMIT_AS of every supervised process for max_mapped (0: back to
 * what memvisor itself had). The command cannot change it (setrlimit and
 * prlimit64 on RLIMIT_AS are refused while the launch policy has a
 * max_mapped); a fork racing with this inherits either value, so the tree
 * is walked until a pass changes nothing. */
static void apply_rlimit_as(struct mv *mv, uint64_t max_mapped)
{
	struct enforce *e = mv->enforce;
	rlim_t want = e->orig_as.rlim_cur;
	if (max_mapped && max_mapped < want)
		want = max_mapped;
	for (int pass = 0; pass < 4; pass++) {
		pid_t *v;
		size_t n, changed = 0;
		tree_pids(mv, &v, &n);
		for (size_t i = 0; i < n; i++) {
			struct rlimit old, new;
			if (prlimit(v[i], RLIMIT_AS, NULL, &old) < 0 || old.rlim_cur == want)
				continue;
			new.rlim_max = old.rlim_max;
			new.rlim_cur = want < old.rlim_max ? want : old.rlim_max;
			if (prlimit(v[i], RLIMIT_AS, &new, NULL) == 0)
				changed++;
			else
				log_warn("cannot set RLIMIT_AS of %d: %s", v[i], strerror(errno));
		}
		free(v);
		if (!changed)
			break;
	}
}

void enforce_attach(struct mv *mv)
{
	uint64_t max = mv->enforce->policy->lim.max_mapped;
	if (max)
		apply_rlimit_as(mv, max);
}

static int kernel_pieces_allow(const struct enforce *e, const struct policy *pol,
			       struct mv_err *err)
{
	if (e->mdwe && (pol->wx != POL_WX_DENY || pol->n_wx_allow)) {
		mv_err_set(err, 0, MV_E_NOT_SUPPORTED,
			   "the command runs with PR_SET_MDWE (set at launch for wx deny without "
			   "wx_allow), which the kernel cannot lift: wx must stay \"deny\" with no "
			   "wx_allow");
		return -1;
	}
	struct pol_launch_setup setup = {.landlock_proc_mem = e->landlock,
					 .rie_guarded = e->rie_guarded};
	if (policy_runtime_gaps(&setup, pol, err) < 0)
		return -1;
	if (pol->lim.max_mapped && !e->rlimit_guard) {
		mv_err_set(
		    err, 0, MV_E_NOT_SUPPORTED,
		    "limits.max_mapped is RLIMIT_AS, and the launch policy had no max_mapped, so "
		    "the command may have changed its own RLIMIT_AS: start memvisor with a "
		    "policy that has max_mapped to change it at run time");
		return -1;
	}
	return 0;
}

int enforce_set_policy(struct mv *mv, struct policy *pol, struct mv_err *err)
{
	struct enforce *e = mv->enforce;
	struct needs want;
	needs_compile(pol, false, &want);
	char why[400];
	int rc = needs_covered(&e->launch, &want, why, sizeof(why));
	needs_free(&want);
	if (rc < 0) {
		mv_err_set(err, 0, MV_E_NOT_SUPPORTED,
			   "the filter fixed at launch does not notify what this policy needs: %s "
			   "(start memvisor with this policy, or with --notify-all)",
			   why);
		return -EINVAL;
	}
	if (kernel_pieces_allow(e, pol, err) < 0)
		return -EINVAL;
	/* The decision lock, not mv->lock: a decision holds the policy it
	 * reads, and setting RLIMIT_AS walks the tree. */
	pthread_mutex_lock(&e->lock);
	struct policy *old = e->policy;
	e->policy = pol;
	/* From now on READ_IMPLIES_EXEC may be set: no later deny can count
	 * on its absence. (A wx_allow program may set it too, but a 64-bit
	 * exec clears it and 32-bit ones are checked at each call.) */
	if (pol->wx != POL_WX_DENY)
		e->rie_guarded = false;
	e->generation++;
	e->loaded_wall_ns = mv_wall_ns();
	/* The accounting was not kept for limits the old policy did not have. */
	if (!old->lim.max_mapped_tree)
		e->tree_stale = true;
	if (!old->lim.max_regions) {
		void *v;
		for (size_t i = 0; imap_next(&e->accts, &i, NULL, &v);)
			((struct acct *)v)->regions_known = false;
	}
	bool rlimit = old->lim.max_mapped != pol->lim.max_mapped;
	if (rlimit && e->rlimit_guard)
		apply_rlimit_as(mv, pol->lim.max_mapped);
	pthread_mutex_unlock(&e->lock);
	log_info("policy %s is now active (generation %llu)", pol->source,
		 (unsigned long long)e->generation);
	policy_free(old);
	return 0;
}

json_t *enforce_show(struct mv *mv)
{
	struct enforce *e = mv->enforce;
	json_t *o = json_object();
	pthread_mutex_lock(&e->lock);
	json_object_set_new(o, "source", json_string(e->policy->source));
	json_object_set_new(o, "generation", json_integer((json_int_t)e->generation));
	json_object_set_new(o, "loaded_ns", json_integer((json_int_t)e->loaded_wall_ns));
	json_object_set_new(o, "policy", policy_to_json(e->policy));
	json_t *k = json_object();
	json_object_set_new(k, "notify_all", json_boolean(e->launch.notify_all));
	json_object_set_new(k, "mdwe", json_boolean(e->mdwe));
	json_object_set_new(k, "landlock_proc_pid", json_boolean(e->landlock));
	json_object_set_new(k, "rlimit_as_guard", json_boolean(e->rlimit_guard));
	/* run --until-point: the stop point the filter notifies, or null. */
	json_t *pt = json_null();
	if (mv->point)
		pt = mv->point->fd >= 0 ? json_sprintf("%s:%d", mv->point->name, mv->point->fd)
					: json_string(mv->point->name);
	json_object_set_new(k, "until_point", pt);
	json_object_set_new(o, "launch", k);
	json_t *s = json_object();
	json_object_set_new(s, "denials", json_integer((json_int_t)e->denials));
	json_object_set_new(s, "kills", json_integer((json_int_t)e->kills));
	json_object_set_new(s, "reconciles", json_integer((json_int_t)e->reconciles));
	json_object_set_new(o, "enforcement", s);
	pthread_mutex_unlock(&e->lock);
	return o;
}

/* Without e->lock, which a decision holds while it reads the kernel
 * (the control socket must not wait behind it): the launch filter never
 * changes. */
json_t *enforce_uncounted(struct mv *mv)
{
	struct enforce *e = mv->enforce;
	return e && e->uncounted ? json_deep_copy(e->uncounted) : NULL;
}

enum needs_when enforce_notify_when(struct mv *mv, enum mv_sc sc)
{
	return mv->enforce ? needs_when(&mv->enforce->launch, sc) : NEEDS_NA;
}
