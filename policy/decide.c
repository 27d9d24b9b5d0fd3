/* One call, one verdict: rules, then W^X, then the limits. */
#include "policy/decide.h"
#include "common/util.h"
#include "policy/callargs.h"

#include <stdio.h>
#include <string.h>

/* UAPI values (x86, all ABIs). */
#define P_READ		   0x1
#define P_WRITE		   0x2
#define P_EXEC		   0x4
#define M_SHARED_BIT	   0x1 /* set in MAP_SHARED (1) and MAP_SHARED_VALIDATE (3) */
#define M_ANON		   0x20
#define SHM_RDONLY_	   010000
#define SHM_EXEC_	   0100000
#define READ_IMPLIES_EXEC_ 0x0400000
#define PERSONALITY_QUERY  0xffffffffu
#define PTRACE_POKETEXT_   4
#define PTRACE_POKEDATA_   5
#define RLIMIT_AS_	   9

static void set_why(struct pol_decision *d, const char *fmt, const char *arg)
{
	snprintf(d->why, sizeof(d->why), fmt, arg);
}

/* A fact could not be read. The process being gone is an outcome: any
 * answer will do. Anything else: W^X refuses what it cannot check. */
static const char *fact_failed(int rc, int *err)
{
	if (rc == -ESRCH || rc == -ENOENT)
		return NULL;
	*err = -rc;
	return "its memory could not be inspected";
}

/* Only the 32-bit ABIs can run with READ_IMPLIES_EXEC: a 64-bit exec
 * clears it (arch/x86 set_personality_64bit), memvisor's launcher clears
 * what it inherits, and personality() setting it is refused. A legacy
 * i386/x32 binary without PT_GNU_STACK still gets it at exec. */
static int rie(const struct mv_call *c, const struct pol_caller *who, bool *yes)
{
	*yes = false;
	if (c->abi == MV_ABI_X86_64)
		return 0;
	return who->ops->read_implies_exec(who->env, yes);
}

static const char *wx_mmap(const struct mv_call *c, const struct pol_caller *who,
			   struct pol_decision *d, int *err)
{
	uint64_t prot, flags;
	int fd;
	bool ri;
	callargs_prot(c, &prot);
	callargs_flags(c, &flags);
	callargs_fd(c, &fd);
	int rc = rie(c, who, &ri);
	if (rc < 0)
		return fact_failed(rc, err);
	if (ri && (prot & P_READ))
		prot |= P_EXEC; /* what do_mmap() will do */
	if ((prot & P_WRITE) && (prot & P_EXEC))
		return "a mapping both writable and executable";
	bool anon = flags & M_ANON, shared = flags & M_SHARED_BIT;
	if ((prot & P_EXEC) && anon)
		return "executable anonymous memory";
	if (anon || (!(prot & P_EXEC) && !shared))
		return NULL;
	struct pol_fd f;
	if ((rc = who->ops->fd(who->env, fd, &f)) < 0)
		return fact_failed(rc, err);
	if (f.kind == POL_FD_BAD || f.kind == POL_FD_OTHER)
		return NULL;
	if ((prot & P_EXEC) && f.kind == POL_FD_ANON)
		return "executable memfd or shared anonymous memory";
	if (shared && f.writable) {
		/* Remembered so that an executable mapping of the file is checked
		 * against it later (the double-mapping bypass). */
		d->note_shared = true;
		d->file = f.id;
	}
	bool yes = false;
	if (prot & P_EXEC) {
		rc = who->ops->file_mapped(who->env, &f.id, POL_MAPPED_SHARED_W, &yes);
		if (rc < 0)
			return fact_failed(rc, err);
		return yes ? "the file is also mapped shared and writable" : NULL;
	}
	if (f.kind == POL_FD_REGULAR && f.writable) {
		rc = who->ops->file_mapped(who->env, &f.id, POL_MAPPED_EXEC, &yes);
		if (rc < 0)
			return fact_failed(rc, err);
		if (yes)
			return "the file is mapped executable elsewhere";
	}
	return NULL;
}

static const char *wx_files(const struct pol_range *r, const struct pol_caller *who, int *err)
{
	if (r->many_files)
		return "too many files in the range to check";
	for (size_t i = 0; i < r->n_files; i++) {
		bool yes = false;
		int rc = who->ops->file_mapped(who->env, &r->files[i], POL_MAPPED_SHARED_W, &yes);
		if (rc < 0)
			return fact_failed(rc, err);
		if (yes)
			return "the file is also mapped shared and writable";
	}
	return NULL;
}

static const char *wx_mprotect(const struct mv_call *c, const struct pol_caller *who, int *err)
{
	uint64_t prot, len;
	bool ri;
	callargs_prot(c, &prot);
	callargs_len(c, &len);
	int rc = rie(c, who, &ri);
	if (rc < 0)
		return fact_failed(rc, err);
	if (ri && (prot & P_READ))
		prot |= P_EXEC;
	if ((prot & P_WRITE) && (prot & P_EXEC))
		return "memory made both writable and executable";
	if (!(prot & P_EXEC))
		return NULL;
	struct pol_range r;
	rc = who->ops->range(who->env, callargs_arg(c, 0), len, true, &r);
	if (rc < 0)
		return fact_failed(rc, err);
	if (r.anon)
		return "anonymous memory made executable";
	if (r.writable)
		return "writable memory made executable";
	if (r.written)
		return "written file pages made executable";
	return wx_files(&r, who, err);
}

static const char *wx_mremap(const struct mv_call *c, const struct pol_caller *who, int *err)
{
	uint64_t old = callargs_arg(c, 1);
	struct pol_range r;
	/* old_size 0 duplicates a shared mapping: look at its first page. */
	int rc = who->ops->range(who->env, callargs_arg(c, 0), old ? old : 1, false, &r);
	if (rc < 0)
		return fact_failed(rc, err);
	if (!r.exec)
		return NULL;
	if (!r.anon && !r.writable) {
		rc = who->ops->range(who->env, callargs_arg(c, 0), old ? old : 1, true, &r);
		if (rc < 0)
			return fact_failed(rc, err);
	}
	if (r.anon || r.writable || r.written)
		return "executable anonymous or written memory remapped";
	return NULL;
}

static const char *wx_rie_only(const struct mv_call *c, const struct pol_caller *who, int *err,
			       const char *what)
{
	bool ri;
	int rc = rie(c, who, &ri);
	if (rc < 0)
		return fact_failed(rc, err);
	return ri ? what : NULL;
}

const char *decide_wx(const struct mv_call *c, const struct pol_caller *who, struct pol_decision *d,
		      int *err)
{
	int shmid;
	uint64_t flg, addr;
	*err = EACCES;
	switch (c->sc) {
	case MV_SC_mmap:
	case MV_SC_mmap2:
		return callargs_readable(c) ? wx_mmap(c, who, d, err) : NULL;
	case MV_SC_mprotect:
	case MV_SC_pkey_mprotect:
		return wx_mprotect(c, who, err);
	case MV_SC_mremap:
		return wx_mremap(c, who, err);
	case MV_SC_brk:
		return callargs_arg(c, 0)
			   ? wx_rie_only(c, who, err, "an executable heap (READ_IMPLIES_EXEC)")
			   : NULL;
	case MV_SC_shmat:
	case MV_SC_ipc:
		if (!callargs_shmat(c, &shmid, &flg, &addr))
			return NULL;
		if (flg & SHM_EXEC_)
			return "shared memory attached with SHM_EXEC";
		return wx_rie_only(c, who, err,
				   "shared memory attached executable (READ_IMPLIES_EXEC)");
	case MV_SC_personality: {
		uint32_t persona = (uint32_t)c->args[0];
		if (persona != PERSONALITY_QUERY && (persona & READ_IMPLIES_EXEC_))
			return "personality(READ_IMPLIES_EXEC) would make readable memory "
			       "executable";
		return NULL;
	}
	case MV_SC_ptrace: {
		uint64_t req = callargs_arg(c, 0);
		if (req == PTRACE_POKETEXT_ || req == PTRACE_POKEDATA_)
			return "ptrace writes into another process's memory";
		return NULL;
	}
	default:
		return NULL;
	}
}

/* Lifting RLIMIT_AS would undo max_mapped, which the kernel enforces
 * through it. Lowering cannot be told apart (the value is in memory). */
static bool lifts_rlimit_as(const struct mv_call *c)
{
	if (c->sc == MV_SC_prlimit64)
		return (uint32_t)callargs_arg(c, 1) == RLIMIT_AS_ && callargs_arg(c, 2) != 0;
	if (c->sc == MV_SC_setrlimit)
		return (uint32_t)callargs_arg(c, 0) == RLIMIT_AS_;
	return false;
}

static void deny(struct pol_decision *d, enum mv_verdict v, int err, const char *rule)
{
	d->verdict = v;
	d->err = err;
	d->rule = rule;
}

/* Steps 1 and 2: ENOSYS for unreadable arguments, then the rules. True
 * when they settled the call. */
static bool decide_rules(const struct policy *pol, const struct mv_call *c, struct pol_decision *d)
{
	if (!callargs_readable(c) && policy_needs_args(pol, c->sc)) {
		/* old_mmap's arguments are in the caller's memory, where another
		 * thread can change them after we read them. glibc's i386 mmap()
		 * uses mmap2, so only very old code notices. */
		deny(d, MV_V_DENY, ENOSYS, "abi.i386_old_mmap");
		snprintf(d->why, sizeof(d->why), "old_mmap passes its arguments in memory");
		return true;
	}
	if (c->sc == MV_SC_clone3 && pol->lim.max_mapped_tree) {
		/* clone3's flags are in memory too; C libraries fall back to
		 * clone, whose flags are a register (as under Docker's profile). */
		deny(d, MV_V_DENY, ENOSYS, "limits.max_mapped_tree");
		snprintf(d->why, sizeof(d->why), "clone3 passes its flags in memory");
		return true;
	}
	for (size_t i = 0; i < pol->n_rules; i++) {
		const struct pol_rule *r = &pol->rules[i];
		if (!(r->syscalls & (1ULL << c->sc)) || !policy_rule_matches(r, c))
			continue;
		d->verdict = r->action;
		d->err = r->action == MV_V_DENY ? r->err : 0;
		d->rule = r->name;
		return r->action == MV_V_DENY || r->action == MV_V_KILL;
	}
	if (syscalls_class(c->sc) == MV_SC_MEMORY && pol->dflt != MV_V_ALLOW) {
		d->verdict = pol->dflt;
		d->err = pol->dflt == MV_V_DENY ? pol->dflt_err : 0;
		d->rule = "default";
		return pol->dflt == MV_V_DENY || pol->dflt == MV_V_KILL;
	}
	return false;
}

/* An exec maps what its program headers say, with no mmap the filter
 * sees: an executable stack (PT_GNU_STACK PF_X) or a writable and
 * executable PT_LOAD. Refused before it runs, as SELinux's execstack and
 * execmem checks refuse it. An exec of a file in wx_allow is exempt. */
static const char *wx_exec(const struct policy *pol, const struct mv_call *c,
			   const struct pol_caller *who, int *err)
{
	if (!who->ops || !who->ops->exec_image)
		return NULL;
	struct pol_exec_image img;
	int rc = who->ops->exec_image(who->env, c, &img);
	if (rc < 0)
		return rc == -ENOENT ? NULL : fact_failed(rc, err);
	if (policy_wx_allowed(pol, img.path))
		return NULL;
	if (img.rwx_load)
		return img.in_interp ? "exec of a program whose interpreter has a writable and "
				       "executable segment"
				     : "exec of a program with a writable and executable segment";
	if (img.exec_stack)
		return "exec of a program with an executable stack (PT_GNU_STACK)";
	return NULL;
}

static void decide_steps(const struct policy *pol, const struct mv_call *c,
			 const struct pol_caller *who, struct pol_decision *d)
{
	d->verdict = MV_V_ALLOW;
	if (decide_rules(pol, c, d))
		return;
	if (pol->wx != POL_WX_OFF) {
		int err = EACCES;
		struct pol_decision scratch = *d;
		const char *why;
		if (c->sc == MV_SC_execve || c->sc == MV_SC_execveat) {
			why = wx_exec(pol, c, who, &err);
		} else {
			why = decide_wx(c, who, &scratch, &err);
			d->note_shared = scratch.note_shared;
			d->file = scratch.file;
			if (why && policy_wx_allowed(pol, who->exe))
				why = NULL;
		}
		if (why && pol->wx == POL_WX_DENY) {
			/* Always EACCES, the errno PR_SET_MDWE and SELinux give. */
			deny(d, MV_V_DENY, EACCES, "wx");
			if (err != EACCES)
				snprintf(d->why, sizeof(d->why), "%s (%s)", why, strerror(err));
			else
				set_why(d, "%s", why);
			return;
		}
		if (why && d->verdict == MV_V_ALLOW) {
			d->verdict = MV_V_LOG;
			d->rule = "wx";
			set_why(d, "%s", why);
		}
	}
	if (pol->lim.max_mapped && lifts_rlimit_as(c)) {
		deny(d, MV_V_DENY, EPERM, "limits.max_mapped");
		set_why(d, "%s", "RLIMIT_AS enforces max_mapped and cannot be changed");
		return;
	}
	struct pol_decision lim = *d;
	if (limits_check(pol, c, who, &lim)) {
		*d = lim;
		return;
	}
	d->grow = lim.grow;
	d->grow_tree = lim.grow_tree;
	d->fork = lim.fork;
	d->grow_regions = lim.grow_regions;
}

void decide(const struct policy *pol, const struct mv_call *c, const struct pol_caller *who,
	    struct pol_decision *d)
{
	memset(d, 0, sizeof(*d));
	decide_steps(pol, c, who, d);
	if (c->sc == MV_SC_brk && d->verdict == MV_V_DENY) {
		/* The break stays where it is: return it, as the kernel does
		 * when it cannot move the break. The heap's end is the break
		 * rounded up to a page, which the process owns anyway; 0 when
		 * unknown makes glibc ask again with brk(0). */
		uint64_t start, end;
		d->emulate = true;
		d->val = who->ops->brk(who->env, &start, &end) == 0 ? end : 0;
	}
}
