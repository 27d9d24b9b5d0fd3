/* Memory the kernel touches on a process's behalf (supervisor/checkpoint/held.h). */
#include "supervisor/checkpoint/held.h"
#include "common/log.h"
#include "common/util.h"
#include "state/procparse.h"
#include "supervisor/checkpoint/job.h"
#include "supervisor/kernel/backing.h"
#include "supervisor/kernel/futex.h"
#include "supervisor/kernel/procfs.h"
#include "supervisor/kernel/ptrace.h"
#include "supervisor/kernel/remote.h"
#include "supervisor/supervise/mv.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PG 4096ull

static const char *const kind_names[HELD_KINDS] = {
    [HELD_URING_BUF] = "io_uring registered buffers",
    [HELD_ROBUST] = "robust mutexes (the kernel marks them at thread exit)",
    [HELD_EXIT_TID] = "thread-exit words (the kernel clears them at thread exit: pthread_join)",
    [HELD_RSEQ] = "rseq areas (the kernel writes them on the way back to user space)",
    [HELD_ARGS] = "arguments and environment (/proc/PID/cmdline and environ)",
};

const char *held_kind_name(enum held_kind k)
{
	return k < HELD_KINDS ? kind_names[k] : "?";
}

static void add(struct held *h, uint64_t addr, uint64_t len, enum held_kind kind)
{
	if (!len || addr + len < addr)
		return;
	if (h->n == h->cap)
		h->v = xrealloc(h->v, (h->cap = h->cap ? h->cap * 2 : 32) * sizeof(*h->v));
	h->v[h->n++] =
	    (struct held_range){addr & ~(PG - 1), (addr + len + PG - 1) & ~(PG - 1), kind};
}

/* ---- robust lists ------------------------------------------------------ */

/* The pages the kernel's walk of tid's robust list touches
 * (kernel/futex/core.c exit_robust_list): the head, each entry's next
 * pointer and futex word, the pending entry. The low bit of a pointer
 * marks a PI futex. A list it cannot read to its end is kept as far as
 * it could be read: the kernel's walk stops at the same fault. */
static void robust_list(struct cproc *p, pid_t tid, struct held *h)
{
	uint64_t head;
	size_t len;
	struct futex_robust_head rh;
	if (futex_robust_head_of(tid, &head, &len) < 0 || !head || len != sizeof(rh))
		return; /* none, or a 32-bit thread's (not walked here) */
	add(h, head, sizeof(rh), HELD_ROBUST);
	if (ckpt_read_mem(p, head, &rh, sizeof(rh)) < 0)
		return;
	uint64_t e = rh.next & ~1ull;
	for (int k = 0; e && e != head && k < FUTEX_ROBUST_LIMIT; k++) {
		add(h, e, 8, HELD_ROBUST);
		add(h, e + (uint64_t)rh.futex_offset, 4, HELD_ROBUST);
		uint64_t next;
		if (ckpt_read_mem(p, e, &next, sizeof(next)) < 0)
			break;
		e = next & ~1ull;
	}
	uint64_t pend = rh.list_op_pending & ~1ull;
	if (pend) {
		add(h, pend, 8, HELD_ROBUST);
		add(h, pend + (uint64_t)rh.futex_offset, 4, HELD_ROBUST);
	}
}

/* ---- per thread ---------------------------------------------------------- */

/* A word of the thread's saved general registers (struct
 * user_regs_struct), 0 if not saved. */
static uint64_t reg(const struct ptrace_thread *t, size_t word)
{
	const uint64_t *r = t->prstatus;
	return r && t->prstatus_len >= (word + 1) * sizeof(uint64_t) ? r[word] : 0;
}

#define UREG_RSP     19
#define UREG_FS_BASE 21

/* Where the thread's prctl may write its answer: below its stack pointer
 * and the 128-byte red zone (x86-64 psABI 3.2.2), in the same mapping
 * (a stack about to overflow may lie just above another mapping's
 * data), a writable one of the image's layout. 0 if none. */
static uint64_t scratch_of(struct ckpt *c, size_t i, const struct ptrace_thread *t)
{
	uint64_t sp = reg(t, UREG_RSP), s = (sp - 512) & ~7ull;
	struct img_proc *ip = c->p[i].img >= 0 ? ckpt_iproc(c, i) : NULL;
	for (size_t k = 0; sp && ip && k < ip->n_r; k++) {
		const struct img_region *g = &ip->r[k];
		if (g->start <= s && sp <= g->end && (g->prot & AS_PROT_WRITE))
			return s;
	}
	return 0;
}

/* clear_child_tid: asked in the thread itself (an injected prctl, about
 * 200 us a thread here: a single step's round trip). Without the prctl
 * (-EINVAL: no CONFIG_CHECKPOINT_RESTORE) or a place for its answer, the
 * two pages at the thread pointer are kept: where glibc and musl keep
 * the thread's control block and the tid word in it. Returns the
 * address, or 0. */
static uint64_t exit_tid_asked(struct ckpt *c, size_t i, struct remote *r, struct ptrace_thread *t,
			       struct held *h)
{
	uint64_t addr = 0, scratch = scratch_of(c, i, t);
	int rc = scratch ? remote_use_thread_stopped(r, t) : -EFAULT;
	if (rc == 0)
		rc = remote_tid_address_stopped(r, scratch, &addr);
	if (rc == 0) {
		add(h, addr, 4, HELD_EXIT_TID);
		return addr;
	}
	uint64_t tp = reg(t, UREG_FS_BASE);
	if (rc == -ESRCH || !tp)
		return 0;
	log_debug("held: thread %d: PR_GET_TID_ADDRESS: %s; keeping its thread block at %#llx",
		  t->tid, strerror(-rc), (unsigned long long)tp);
	add(h, tp, 2 * PG, HELD_EXIT_TID);
	return 0;
}

/* Does the 32-bit word at addr hold tid? */
static bool holds_tid(struct cproc *p, uint64_t addr, pid_t tid)
{
	int32_t v;
	return addr && ckpt_read_mem(p, addr, &v, sizeof(v)) == 0 && v == tid;
}

/* Where each thread's exit word is, asking as few threads as we may.
 * The thread libraries keep it in the thread's control block, at the
 * same offset from the thread pointer for every thread of a process, and
 * holding the thread's id (glibc's struct pthread tid: pthread_create
 * passes it as CLONE_PARENT_SETTID and CLONE_CHILD_CLEARTID). So the
 * first thread is asked; when its answer is such a word, another
 * thread's is taken from its own thread pointer at the same offset if
 * that word holds its id too, and asked otherwise (a thread made with a
 * raw clone, a runtime of its own). */
struct exit_words {
	bool have_off;
	int64_t off; /* exit word - fs_base, when have_off */
};

static void exit_tid(struct ckpt *c, size_t i, struct remote *r, struct ptrace_thread *t,
		     struct exit_words *w, struct held *h)
{
	struct cproc *p = &c->p[i];
	uint64_t tp = reg(t, UREG_FS_BASE);
	if (w->have_off && tp && holds_tid(p, tp + (uint64_t)w->off, t->tid)) {
		add(h, tp + (uint64_t)w->off, 4, HELD_EXIT_TID);
		return;
	}
	uint64_t addr = exit_tid_asked(c, i, r, t, h);
	if (!w->have_off && tp && addr >= tp && addr < tp + 2 * PG && holds_tid(p, addr, t->tid)) {
		w->have_off = true;
		w->off = (int64_t)(addr - tp);
	}
}

static void threads(struct ckpt *c, size_t i, struct held *h)
{
	struct cproc *p = &c->p[i];
	struct remote r;
	struct exit_words w = {0};
	bool inject = remote_open_stopped(&r, &p->pt, &c->mv->injecting) == 0;
	for (size_t k = 0; k < p->pt.n; k++) {
		struct ptrace_thread *t = &p->pt.t[k];
		if (t->state != PT_STOPPED)
			continue;
		if (!t->prstatus && ptrace_save_regs_stopped(t) == -ESRCH)
			continue; /* a second stop (--evict --live) saved none */
		/* An io_uring worker (iou-wrk, iou-sqp) never runs user
		 * code: nothing to inject into, no list or area of its own. */
		if (procfs_kernel_loop_thread(p->pt.pid, t->tid))
			continue;
		robust_list(p, t->tid, h);
		uint64_t ra;
		uint32_t rl;
		if (ptrace_rseq_stopped(t->tid, &ra, &rl) == 0 && ra)
			add(h, ra, rl, HELD_RSEQ);
		/* The kernel writes clear_child_tid only while the mm has
		 * other users (kernel/fork.c mm_release): threads, or a
		 * process that makes some after the evict. */
		if (inject)
			exit_tid(c, i, &r, t, &w, h);
	}
}

/* ---- io_uring ------------------------------------------------------------ */

static int ring(void *arg, const struct uring_info *u)
{
	struct held *h = arg;
	for (uint32_t k = 0; k < u->bufs_listed; k++)
		add(h, u->bufs[k].start, u->bufs[k].end - u->bufs[k].start, HELD_URING_BUF);
	for (uint32_t k = 0; k < u->files_listed; k++) {
		if (strcmp(u->files[k], "<none>") == 0 || held_has_file(h, u->files[k]))
			continue;
		h->files = xrealloc(h->files, (h->n_files + 1) * sizeof(*h->files));
		h->files[h->n_files++] = xstrdup(u->files[k]);
	}
	return 0;
}

static void rings(struct ckpt *c, pid_t pid, struct held *h)
{
	int rc = backing_urings(pid, c->mv->feat.procmap_query, ring, h);
	if (rc == -EAGAIN)
		snprintf(h->unknown, sizeof(h->unknown),
			 "its io_uring's registered buffers and files cannot be listed (the ring "
			 "stayed busy): left resident");
	else if (rc == -EBADFD)
		snprintf(h->unknown, sizeof(h->unknown),
			 "it maps an io_uring whose descriptor it closed (a registered ring "
			 "descriptor): what that ring pins cannot be listed: left resident");
	else if (rc < 0 && rc != -ESRCH)
		snprintf(h->unknown, sizeof(h->unknown),
			 "its io_uring instances cannot be read (%s): what they pin is not known: "
			 "left resident",
			 strerror(-rc));
}

int held_scan_stopped(struct ckpt *c, size_t i, bool args, struct held *h)
{
	memset(h, 0, sizeof(*h));
	pid_t pid = c->p[i].pt.pid;
	uint64_t t0 = mv_now_ns();
	threads(c, i, h);
	rings(c, pid, h);
	if (args) {
		struct proc_stat st;
		int rc = procfs_stat(c->p[i].tid ? c->p[i].tid : pid, &st);
		if (rc == -ESRCH)
			return rc;
		if (rc == 0 && st.env_end > st.arg_start)
			add(h, st.arg_start, st.env_end - st.arg_start, HELD_ARGS);
	}
	log_debug("held: process %d: %zu ranges, %zu io_uring files, %.2f ms", pid, h->n,
		  h->n_files, (double)(mv_now_ns() - t0) / 1e6);
	return 0;
}

size_t held_merged(const struct held *h, struct as_range **out)
{
	struct as_range *v = xcalloc(MV_MAX(h->n, 1), sizeof(*v));
	for (size_t k = 0; k < h->n; k++)
		v[k] = (struct as_range){h->v[k].start, h->v[k].end};
	*out = v;
	return as_ranges_merge(v, h->n);
}

bool held_overlaps(const struct held *h, uint64_t start, uint64_t end)
{
	for (size_t k = 0; k < h->n; k++)
		if (h->v[k].start < end && start < h->v[k].end)
			return true;
	return false;
}

bool held_has_file(const struct held *h, const char *path)
{
	for (size_t k = 0; k < h->n_files; k++)
		if (strcmp(h->files[k], path) == 0)
			return true;
	return false;
}

void held_json(const struct held *h, int pid, json_t *a)
{
	for (int kind = 0; kind < HELD_KINDS; kind++) {
		struct held one = {0};
		for (size_t k = 0; k < h->n; k++)
			if (h->v[k].kind == (enum held_kind)kind)
				add(&one, h->v[k].start, h->v[k].end - h->v[k].start, kind);
		struct as_range *v;
		size_t n = held_merged(&one, &v);
		uint64_t bytes = 0;
		for (size_t k = 0; k < n; k++)
			bytes += v[k].end - v[k].start;
		if (n)
			json_array_append_new(a, json_pack("{s:i, s:s, s:I, s:I}", "pid", pid,
							   "what", kind_names[kind], "bytes",
							   (json_int_t)bytes, "ranges",
							   (json_int_t)n));
		free(v);
		held_free(&one);
	}
}

void held_free(struct held *h)
{
	for (size_t k = 0; k < h->n_files; k++)
		free(h->files[k]);
	free(h->files);
	free(h->v);
	memset(h, 0, sizeof(*h));
}
