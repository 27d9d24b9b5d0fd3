/* The limits: what a call adds, and whether that fits.
 *
 * The kernel counts mapped memory in pages (mm->total_vm, the first field
 * of /proc/PID/statm, what RLIMIT_AS limits), so do we: a limit of L
 * bytes allows L / 4096 whole pages, exactly as RLIMIT_AS = L would
 * (mm/mmap.c may_expand_vm()).
 *
 * A call's growth is first bounded from its registers alone (a MAP_FIXED
 * mmap adds at most its length); only when that bound would not fit is
 * the exact growth computed from what is mapped now (the part of the range
 * the mapping replaces). Same for counts: a cheap upper bound first, the
 * kernel's exact figure only near the limit. So a call is refused only
 * when, at the moment it was decided, it really did not fit. */
#include "common/util.h"
#include "policy/callargs.h"
#include "policy/decide.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define M_FIXED		  0x10
#define M_FIXED_NOREPLACE 0x100000
#define MR_FIXED	  0x2
#define MR_DONTUNMAP	  0x4
#define SHM_REMAP_	  040000
#define CLONE_VM_	  0x100

uint64_t limits_page_align(uint64_t b)
{
	if (b > UINT64_MAX - (POL_PAGE - 1))
		return UINT64_MAX;
	return (b + POL_PAGE - 1) & ~(POL_PAGE - 1);
}

static uint64_t pages(uint64_t bytes)
{
	return bytes / POL_PAGE;
}

enum gkind { G_NONE, G_MMAP, G_MREMAP, G_BRK, G_SHMAT, G_FORK };

static enum gkind growth_kind(const struct mv_call *c)
{
	switch (c->sc) {
	case MV_SC_mmap:
	case MV_SC_mmap2:
		return callargs_readable(c) ? G_MMAP : G_NONE;
	case MV_SC_map_shadow_stack:
		return G_MMAP;
	case MV_SC_mremap:
		return G_MREMAP;
	case MV_SC_brk:
		return callargs_arg(c, 0) ? G_BRK : G_NONE;
	case MV_SC_shmat:
		return G_SHMAT;
	case MV_SC_ipc:
		return callargs_ipc_shmat(c) ? G_SHMAT : G_NONE;
	case MV_SC_fork:
		return G_FORK;
	case MV_SC_clone:
		/* CLONE_VM: a thread or a vfork child sharing our mm. */
		return callargs_arg(c, 0) & CLONE_VM_ ? G_NONE : G_FORK;
	default:
		return G_NONE;
	}
}

static uint64_t overlap(const struct pol_caller *who, uint64_t addr, uint64_t len, int *rc)
{
	struct pol_range r;
	*rc = who->ops->range(who->env, addr, len, false, &r);
	return *rc < 0 ? 0 : r.mapped;
}

/* Bytes the call may add to the caller: an upper bound from the registers
 * (exact == false) or the exact figure (the kernel's own arithmetic in
 * mmap_region(), vma_to_resize(), do_brk_flags()). */
static int growth(const struct mv_call *c, const struct pol_caller *who, enum gkind k, bool exact,
		  uint64_t *out)
{
	int rc = 0, shmid;
	uint64_t flg, addr, start, end, size;
	*out = 0;
	switch (k) {
	case G_MMAP: {
		uint64_t len = 0, flags = 0; /* map_shadow_stack has no flags */
		callargs_len(c, &len);
		callargs_flags(c, &flags);
		if (!len)
			return 0; /* EINVAL */
		*out = limits_page_align(len);
		/* MAP_FIXED replaces what was there: only the difference grows. */
		if (exact && (flags & M_FIXED) && !(flags & M_FIXED_NOREPLACE) &&
		    *out != UINT64_MAX)
			*out -= MV_MIN(*out, overlap(who, callargs_arg(c, 0), *out, &rc));
		return rc;
	}
	case G_MREMAP: {
		uint64_t old = limits_page_align(callargs_arg(c, 1));
		uint64_t new = limits_page_align(callargs_arg(c, 2));
		uint64_t flags = callargs_arg(c, 3);
		/* DONTUNMAP keeps the old range; old_size 0 duplicates it. */
		if ((flags & MR_DONTUNMAP) || old == 0)
			*out = new;
		else
			*out = new > old ? new - old : 0;
		/* MREMAP_FIXED first unmaps whatever is at the target. */
		if (exact && (flags & MR_FIXED) && *out && new != UINT64_MAX)
			*out -= MV_MIN(*out, overlap(who, callargs_arg(c, 4), new, &rc));
		return rc;
	}
	case G_BRK:
		if ((rc = who->ops->brk(who->env, &start, &end)) < 0)
			return rc;
		addr = limits_page_align(callargs_arg(c, 0));
		*out = addr > end && addr > start ? addr - MV_MAX(end, start) : 0;
		return 0;
	case G_SHMAT:
		callargs_shmat(c, &shmid, &flg, &addr);
		if ((rc = who->ops->shm_size(who->env, shmid, &size)) < 0)
			return rc;
		*out = limits_page_align(size);
		if (exact && (flg & SHM_REMAP_) && addr)
			*out -= MV_MIN(*out, overlap(who, addr, *out, &rc));
		return rc;
	case G_FORK:
		/* The child starts with a copy of every mapping but the
		 * MADV_DONTFORK ones: an upper bound. */
		return who->ops->vm_size(who->env, out);
	default:
		return 0;
	}
}

static bool refuse(struct pol_decision *d, const char *rule, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static bool refuse(struct pol_decision *d, const char *rule, const char *fmt, ...)
{
	d->verdict = MV_V_DENY;
	d->err = ENOMEM;
	d->rule = rule;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(d->why, sizeof(d->why), fmt, ap);
	va_end(ap);
	return true;
}

/* The size of the one mapping a call makes, for max_mapping. */
static bool mapping_size(const struct mv_call *c, const struct pol_caller *who, enum gkind k,
			 uint64_t *size)
{
	int shmid;
	uint64_t flg, addr;
	switch (k) {
	case G_MMAP:
		return callargs_len(c, size);
	case G_MREMAP:
		*size = callargs_arg(c, 2);
		return true;
	case G_SHMAT:
		callargs_shmat(c, &shmid, &flg, &addr);
		return who->ops->shm_size(who->env, shmid, size) == 0;
	default:
		return false;
	}
}

static bool check_mapped(const struct pol_limits *L, const struct mv_call *c,
			 const struct pol_caller *who, enum gkind k, uint64_t *g,
			 struct pol_decision *d)
{
	uint64_t vm;
	if (!L->max_mapped || !*g || who->ops->vm_size(who->env, &vm) < 0)
		return false;
	if (pages(vm) + pages(*g) <= pages(L->max_mapped) && *g != UINT64_MAX)
		return false;
	uint64_t exact;
	if (growth(c, who, k, true, &exact) == 0)
		*g = exact;
	if (*g != UINT64_MAX && pages(vm) + pages(*g) <= pages(L->max_mapped))
		return false;
	char a[32], b[32], e[32];
	return refuse(d, "limits.max_mapped", "mapped %s + %s would exceed max_mapped %s",
		      mv_human_size(vm, a, sizeof(a)), mv_human_size(*g, b, sizeof(b)),
		      mv_human_size(L->max_mapped, e, sizeof(e)));
}

static bool check_regions(const struct pol_limits *L, const struct mv_call *c,
			  const struct pol_caller *who, struct pol_decision *d)
{
	uint32_t delta = limits_region_delta(c);
	d->grow_regions = delta;
	uint64_t n;
	if (!L->max_regions || !delta || who->ops->regions(who->env, false, &n) < 0)
		return false;
	if (n + delta <= L->max_regions)
		return false;
	if (who->ops->regions(who->env, true, &n) < 0 || n + delta <= L->max_regions)
		return false;
	return refuse(d, "limits.max_regions",
		      "%llu regions + up to %u more would exceed max_regions %llu",
		      (unsigned long long)n, delta, (unsigned long long)L->max_regions);
}

static bool check_tree(const struct pol_limits *L, const struct mv_call *c,
		       const struct pol_caller *who, enum gkind k, uint64_t g,
		       struct pol_decision *d)
{
	if (!L->max_mapped_tree)
		return false;
	uint64_t gt = g;
	if (k == G_FORK && who->ops->vm_size(who->env, &gt) < 0)
		return false;
	d->grow_tree = gt;
	d->fork = k == G_FORK;
	uint64_t t;
	if (!gt || who->ops->tree(who->env, false, &t) < 0)
		return false;
	uint64_t limit = pages(L->max_mapped_tree);
	if (pages(t) + pages(gt) <= limit && gt != UINT64_MAX)
		return false;
	uint64_t exact;
	if (k != G_FORK && growth(c, who, k, true, &exact) == 0)
		d->grow_tree = gt = exact;
	if (who->ops->tree(who->env, true, &t) < 0)
		return false;
	if (gt != UINT64_MAX && pages(t) + pages(gt) <= limit)
		return false;
	char a[32], b[32], e[32];
	return refuse(d, "limits.max_mapped_tree",
		      "the tree maps %s; %s more would exceed max_mapped_tree %s",
		      mv_human_size(t, a, sizeof(a)), mv_human_size(gt, b, sizeof(b)),
		      mv_human_size(L->max_mapped_tree, e, sizeof(e)));
}

bool limits_check(const struct policy *pol, const struct mv_call *c, const struct pol_caller *who,
		  struct pol_decision *d)
{
	const struct pol_limits *L = &pol->lim;
	if (!L->max_mapped && !L->max_mapped_tree && !L->max_mapping && !L->max_regions)
		return false;
	enum gkind k = growth_kind(c);
	uint64_t size, g = 0;
	char a[32], b[32];
	if (L->max_mapping && mapping_size(c, who, k, &size) && size > L->max_mapping)
		return refuse(d, "limits.max_mapping", "a %s mapping is larger than max_mapping %s",
			      mv_human_size(size, a, sizeof(a)),
			      mv_human_size(L->max_mapping, b, sizeof(b)));
	if (k != G_FORK && growth(c, who, k, false, &g) < 0)
		g = 0; /* a fact we cannot read: leave it to the kernel */
	if (check_mapped(L, c, who, k, &g, d))
		return true;
	d->grow = g;
	if (check_regions(L, c, who, d))
		return true;
	return check_tree(L, c, who, k, g, d);
}

/* Regions a call can add, at most. A range in the middle of a region
 * splits it in three; a new mapping is one more. Advices that change a
 * region's flags split it too (mm/madvise.c madvise_update_vma()). */
const uint8_t limits_splitting_advice[LIMITS_N_SPLITTING_ADVICE] = {0,	1,  2,	10, 11, 12, 13,
								    14, 15, 16, 17, 18, 19};

static bool splitting_advice(uint64_t arg)
{
	for (size_t i = 0; i < LIMITS_N_SPLITTING_ADVICE; i++)
		if ((uint32_t)arg == limits_splitting_advice[i])
			return true;
	return false;
}

/* process_madvise(2) takes at most UIO_MAXIOV ranges, each of which may
 * split on both sides. */
#define UIO_MAXIOV_ 1024

uint32_t limits_region_delta(const struct mv_call *c)
{
	uint64_t flags;
	int shmid;
	uint64_t flg, addr;
	switch (c->sc) {
	case MV_SC_mmap:
	case MV_SC_mmap2:
		if (!callargs_flags(c, &flags))
			return 1;
		return (flags & M_FIXED) && !(flags & M_FIXED_NOREPLACE) ? 2 : 1;
	case MV_SC_shmat:
	case MV_SC_ipc:
		if (!callargs_shmat(c, &shmid, &flg, &addr))
			return 0;
		return flg & SHM_REMAP_ ? 2 : 1;
	case MV_SC_brk:
		return callargs_arg(c, 0) ? 1 : 0;
	case MV_SC_munmap:
	case MV_SC_map_shadow_stack:
		return 1;
	case MV_SC_mremap:
		/* Source split, target split, the new region; DONTUNMAP keeps
		 * the source as a region of its own. */
		return callargs_arg(c, 3) & MR_DONTUNMAP ? 5 : 3;
	case MV_SC_mprotect:
	case MV_SC_pkey_mprotect:
	case MV_SC_mlock:
	case MV_SC_mlock2:
	case MV_SC_munlock:
	case MV_SC_remap_file_pages:
		return 2;
	case MV_SC_madvise:
		return splitting_advice(callargs_arg(c, 2)) ? 2 : 0;
	case MV_SC_process_madvise: {
		uint64_t vlen = callargs_arg(c, 2);
		if (!splitting_advice(callargs_arg(c, 3)))
			return 0;
		return 2 * (uint32_t)(vlen < UIO_MAXIOV_ ? vlen : UIO_MAXIOV_);
	}
	/* A range policy (mbind, set_mempolicy_home_node: vma_modify_policy),
	 * a seal (mseal: vma_modify_flags), a name (PR_SET_VMA_ANON_NAME:
	 * madvise_set_anon_name) or a userfaultfd registration
	 * (userfaultfd_register) splits the regions at both ends. */
	case MV_SC_mbind:
	case MV_SC_set_mempolicy_home_node:
	case MV_SC_mseal:
		return 2;
	case MV_SC_prctl:
		return (uint32_t)callargs_arg(c, 0) == LIMITS_PR_SET_VMA ? 2 : 0;
	case MV_SC_ioctl:
		return (uint32_t)callargs_arg(c, 1) == LIMITS_UFFDIO_REGISTER ||
			       (uint32_t)callargs_arg(c, 1) == LIMITS_UFFDIO_UNREGISTER
			   ? 2
			   : 0;
	/* An AIO context maps its ring (aio_setup_ring: do_mmap). */
	case MV_SC_io_setup:
		return 1;
	default:
		return 0;
	}
}
