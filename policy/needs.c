/* Compiling a policy to "notify when": the kernel-side fast path.
 *
 * Each part of a policy says which calls it could decide differently from
 * "allow": a rule that denies, kills or logs (its own conditions), a
 * default other than allow (every memory call), W^X (calls that can make
 * memory executable), each limit (calls that can grow what it counts).
 * Rules that allow need nothing: allowing is what the kernel does anyway. */
#include "policy/needs.h"
#include "policy/decide.h"
#include "common/util.h"
#include "policy/callargs.h"
#include "state/call.h"

#include <stdarg.h>
#include <string.h>

#define P_EXEC		   0x4
#define M_ANON		   0x20
#define M_SHARED_BIT	   0x1
#define SHM_EXEC_	   0100000
#define IPC_SHMAT	   21
#define READ_IMPLIES_EXEC_ 0x0400000
#define RLIMIT_AS_	   9
#define U32		   0xffffffffULL

static void set_why(char *dst, const char *why)
{
	snprintf(dst, NEEDS_WHY, "%s", why);
}

static void add_all(struct needs *n, enum mv_abi abi, enum mv_sc sc, const char *why)
{
	struct needs_sc *s = &n->sc[abi][sc];
	if (s->all)
		return;
	s->all = true;
	set_why(s->all_why, why);
}

static bool same_term(const struct needs_term *a, const struct needs_term *b)
{
	if (a->n != b->n)
		return false;
	for (int i = 0; i < a->n; i++)
		if (memcmp(&a->c[i], &b->c[i], sizeof(a->c[i])) != 0)
			return false;
	return true;
}

static void add_term(struct needs *n, enum mv_abi abi, enum mv_sc sc, const struct needs_term *t)
{
	struct needs_sc *s = &n->sc[abi][sc];
	if (t->n == 0) {
		add_all(n, abi, sc, t->why);
		return;
	}
	for (size_t i = 0; i < s->n; i++)
		if (same_term(&s->t[i], t))
			return;
	if (s->n == s->cap) {
		s->cap = s->cap ? s->cap * 2 : 4;
		s->t = xrealloc(s->t, s->cap * sizeof(*s->t));
	}
	s->t[s->n++] = *t;
}

/* One comparison; on i386 the registers are 32 bits, so a comparison
 * with a larger constant is decided here: *never (the term cannot hold)
 * or dropped (it always holds). */
static void cmp(struct needs_term *t, enum mv_abi abi, int arg, enum needs_op op, uint64_t mask,
		uint64_t datum, bool *never)
{
	if (arg < 0)
		return;
	if (abi == MV_ABI_I386) {
		mask &= U32;
		if (op == NEEDS_MASKED_EQ)
			datum &= U32;
		if (datum > U32) {
			if (op == NEEDS_GT || op == NEEDS_GE || op == NEEDS_EQ)
				*never = true;
			return; /* LT, LE, NE: always true */
		}
	}
	t->c[t->n++] = (struct needs_cmp){(uint8_t)arg, (uint8_t)op, mask, datum};
}

static struct needs_term term(const char *why)
{
	struct needs_term t;
	memset(&t, 0, sizeof(t));
	set_why(t.why, why);
	return t;
}

static void add1(struct needs *n, enum mv_abi abi, enum mv_sc sc, const char *why, int arg,
		 enum needs_op op, uint64_t mask, uint64_t datum)
{
	struct needs_term t = term(why);
	bool never = false;
	cmp(&t, abi, arg, op, mask, datum, &never);
	if (!never)
		add_term(n, abi, sc, &t);
}

static void add_rule(struct needs *n, enum mv_abi abi, enum mv_sc sc, const struct pol_rule *r)
{
	struct callargs_layout l = callargs_layout(sc, abi);
	struct needs_term t = term(r->name);
	bool never = false;
	if (sc == MV_SC_mmap && abi == MV_ABI_I386) {
		/* old_mmap: no register arguments; the supervisor refuses it. */
		add_all(n, abi, sc, r->name);
		return;
	}
	if (r->has_prot)
		cmp(&t, abi, l.prot, NEEDS_MASKED_EQ, r->prot_has | r->prot_lacks, r->prot_has,
		    &never);
	uint64_t fm = r->has_flags ? r->flags_has | r->flags_lacks : 0;
	uint64_t fd = r->has_flags ? r->flags_has : 0;
	if (r->backing != POL_BACKING_ANY) {
		fm |= M_ANON;
		fd |= r->backing == POL_BACKING_ANON ? M_ANON : 0;
	}
	if (fm)
		cmp(&t, abi, l.flags, NEEDS_MASKED_EQ, fm, fd, &never);
	/* One comparison per argument: the tighter-looking end of a range
	 * (the supervisor checks both). */
	if (r->has_len && r->len_min > 0)
		cmp(&t, abi, l.len, NEEDS_GE, 0, r->len_min, &never);
	else if (r->has_len && r->len_max < UINT64_MAX)
		cmp(&t, abi, l.len, NEEDS_LE, 0, r->len_max, &never);
	if (!never)
		add_term(n, abi, sc, &t);
}

static void compile_rules(const struct policy *pol, struct needs *n)
{
	for (size_t i = 0; i < pol->n_rules; i++) {
		const struct pol_rule *r = &pol->rules[i];
		if (r->action == MV_V_ALLOW)
			continue;
		for (int sc = 0; sc < MV_SC_COUNT; sc++)
			if (r->syscalls & (1ULL << sc))
				for (int abi = 0; abi < MV_ABI_COUNT; abi++)
					add_rule(n, (enum mv_abi)abi, (enum mv_sc)sc, r);
	}
}

/* W^X. On the 32-bit ABIs a process may run with READ_IMPLIES_EXEC (a
 * legacy binary without PT_GNU_STACK), which turns PROT_READ into
 * PROT_READ|PROT_EXEC: no register shows that, so they are all notified. */
static void compile_wx(struct needs *n)
{
	static const char *const why = "wx";
	for (int a = 0; a < MV_ABI_COUNT; a++) {
		enum mv_abi abi = (enum mv_abi)a;
		bool narrow = abi != MV_ABI_X86_64;
		if (narrow) {
			add_all(n, abi, MV_SC_mmap, why);
			add_all(n, abi, MV_SC_mmap2, why);
			add_all(n, abi, MV_SC_mprotect, why);
			add_all(n, abi, MV_SC_pkey_mprotect, why);
			add_all(n, abi, MV_SC_shmat, why);
			add1(n, abi, MV_SC_brk, why, 0, NEEDS_NE, 0, 0);
		} else {
			add1(n, abi, MV_SC_mmap, why, 2, NEEDS_MASKED_EQ, P_EXEC, P_EXEC);
			/* A shared file mapping: half of a double mapping. */
			add1(n, abi, MV_SC_mmap, why, 3, NEEDS_MASKED_EQ, M_ANON | M_SHARED_BIT,
			     M_SHARED_BIT);
			add1(n, abi, MV_SC_mprotect, why, 2, NEEDS_MASKED_EQ, P_EXEC, P_EXEC);
			add1(n, abi, MV_SC_pkey_mprotect, why, 2, NEEDS_MASKED_EQ, P_EXEC, P_EXEC);
			add1(n, abi, MV_SC_shmat, why, 2, NEEDS_MASKED_EQ, SHM_EXEC_, SHM_EXEC_);
		}
		add_all(n, abi, MV_SC_mremap, why);
		add1(n, abi, MV_SC_ipc, why, 0, NEEDS_MASKED_EQ, 0xffff, IPC_SHMAT);
		add1(n, abi, MV_SC_personality, why, 0, NEEDS_MASKED_EQ, READ_IMPLIES_EXEC_,
		     READ_IMPLIES_EXEC_);
		add1(n, abi, MV_SC_ptrace, why, 0, NEEDS_EQ, 0, 4);
		add1(n, abi, MV_SC_ptrace, why, 0, NEEDS_EQ, 0, 5);
	}
}

static void growth_calls(struct needs *n, enum mv_abi abi, const char *why)
{
	add_all(n, abi, MV_SC_mmap, why);
	add_all(n, abi, MV_SC_mmap2, why);
	add_all(n, abi, MV_SC_mremap, why);
	add_all(n, abi, MV_SC_shmat, why);
	add_all(n, abi, MV_SC_map_shadow_stack, why);
	add1(n, abi, MV_SC_brk, why, 0, NEEDS_NE, 0, 0);
	add1(n, abi, MV_SC_ipc, why, 0, NEEDS_MASKED_EQ, 0xffff, IPC_SHMAT);
}

/* Every call that can split a region or make one without mmap (docs/policy.md,
 * "Limits and accounting"). The int arguments (advice, prctl option, ioctl
 * cmd) are compared on their low 32 bits, as the kernel reads them: a value
 * with high bits set is the same call. */
static void region_calls(struct needs *n, enum mv_abi abi)
{
	static const enum mv_sc splitters[] = {MV_SC_munmap,
					       MV_SC_mprotect,
					       MV_SC_pkey_mprotect,
					       MV_SC_mlock,
					       MV_SC_mlock2,
					       MV_SC_munlock,
					       MV_SC_remap_file_pages,
					       MV_SC_mbind,
					       MV_SC_set_mempolicy_home_node,
					       MV_SC_mseal,
					       MV_SC_io_setup};
	static const char *const why = "limits.max_regions";
	growth_calls(n, abi, why);
	for (size_t i = 0; i < ARRAY_SIZE(splitters); i++)
		add_all(n, abi, splitters[i], why);
	for (size_t i = 0; i < LIMITS_N_SPLITTING_ADVICE; i++) {
		add1(n, abi, MV_SC_madvise, why, 2, NEEDS_MASKED_EQ, U32,
		     limits_splitting_advice[i]);
		add1(n, abi, MV_SC_process_madvise, why, 3, NEEDS_MASKED_EQ, U32,
		     limits_splitting_advice[i]);
	}
	add1(n, abi, MV_SC_prctl, why, 0, NEEDS_MASKED_EQ, U32, LIMITS_PR_SET_VMA);
	add1(n, abi, MV_SC_ioctl, why, 1, NEEDS_MASKED_EQ, U32, LIMITS_UFFDIO_REGISTER);
	add1(n, abi, MV_SC_ioctl, why, 1, NEEDS_MASKED_EQ, U32, LIMITS_UFFDIO_UNREGISTER);
}

static void compile_limits(const struct pol_limits *L, struct needs *n)
{
	for (int a = 0; a < MV_ABI_COUNT; a++) {
		enum mv_abi abi = (enum mv_abi)a;
		if (L->max_mapped) {
			/* The kernel enforces max_mapped (RLIMIT_AS); only lifting
			 * the rlimit needs the supervisor. The resource is an
			 * unsigned int (kernel/sys.c): its high bits are ignored. */
			struct needs_term t = term("limits.max_mapped");
			bool never = false;
			cmp(&t, abi, 1, NEEDS_MASKED_EQ, U32, RLIMIT_AS_, &never);
			cmp(&t, abi, 2, NEEDS_NE, 0, 0, &never);
			add_term(n, abi, MV_SC_prlimit64, &t);
			add1(n, abi, MV_SC_setrlimit, "limits.max_mapped", 0, NEEDS_MASKED_EQ, U32,
			     RLIMIT_AS_);
		}
		if (L->max_mapped_tree)
			growth_calls(n, abi, "limits.max_mapped_tree");
		if (L->max_regions)
			region_calls(n, abi);
		if (L->max_mapping) {
			const char *why = "limits.max_mapping";
			if (abi == MV_ABI_I386)
				add_all(n, abi, MV_SC_mmap, why);
			else
				add1(n, abi, MV_SC_mmap, why, 1, NEEDS_GT, 0, L->max_mapping);
			add1(n, abi, MV_SC_mmap2, why, 1, NEEDS_GT, 0, L->max_mapping);
			add1(n, abi, MV_SC_mremap, why, 2, NEEDS_GT, 0, L->max_mapping);
			add1(n, abi, MV_SC_map_shadow_stack, why, 1, NEEDS_GT, 0, L->max_mapping);
			add_all(n, abi, MV_SC_shmat, why);
			add1(n, abi, MV_SC_ipc, why, 0, NEEDS_MASKED_EQ, 0xffff, IPC_SHMAT);
		}
	}
}

/* Does the policy itself (not --notify-all) have madvise notified? */
static bool policy_decides_madvise(const struct policy *pol, bool notify_all, const struct needs *n)
{
	if (notify_all) {
		struct needs own;
		needs_compile(pol, false, &own);
		bool r = own.refuse_io_uring;
		needs_free(&own);
		return r;
	}
	for (int abi = 0; abi < MV_ABI_COUNT; abi++) {
		const struct needs_sc *s = &n->sc[abi][MV_SC_madvise];
		if (s->all || s->n)
			return true;
	}
	return false;
}

void needs_compile(const struct policy *pol, bool notify_all, struct needs *n)
{
	memset(n, 0, sizeof(*n));
	n->notify_all = notify_all;
	for (int abi = 0; abi < MV_ABI_COUNT; abi++) {
		for (int sc = 0; sc < MV_SC_COUNT; sc++) {
			enum mv_sc_class cls = syscalls_class((enum mv_sc)sc);
			if (cls == MV_SC_LIFECYCLE)
				add_all(n, (enum mv_abi)abi, (enum mv_sc)sc, "process tracking");
			else if (notify_all)
				/* Guards too: any policy set later is then covered. */
				add_all(n, (enum mv_abi)abi, (enum mv_sc)sc, "--notify-all");
			else if (cls == MV_SC_MEMORY && pol->dflt != MV_V_ALLOW)
				add_all(n, (enum mv_abi)abi, (enum mv_sc)sc, "default");
		}
	}
	/* An exec is settled at the process's next notification (it changes
	 * its identity: exe, wx_allow, model). The C runtime's first call after
	 * an exec is brk(0) (glibc's ld.so and static startup): one
	 * notification per program start, so an exec is seen even when the new
	 * program makes no other notified call. */
	for (int abi = 0; abi < MV_ABI_COUNT; abi++)
		add1(n, (enum mv_abi)abi, MV_SC_brk, "process tracking", 0, NEEDS_EQ, 0, 0);
	compile_rules(pol, n);
	if (pol->wx != POL_WX_OFF)
		compile_wx(n);
	compile_limits(&pol->lim, n);
	n->refuse_io_uring = policy_decides_madvise(pol, notify_all, n);
}

void needs_free(struct needs *n)
{
	for (int abi = 0; abi < MV_ABI_COUNT; abi++)
		for (int sc = 0; sc < MV_SC_COUNT; sc++)
			free(n->sc[abi][sc].t);
	memset(n, 0, sizeof(*n));
}

/* ---- matching and coverage ------------------------------------------ */

static bool cmp_holds(const struct needs_cmp *c, uint64_t v)
{
	switch (c->op) {
	case NEEDS_EQ:
		return v == c->datum;
	case NEEDS_NE:
		return v != c->datum;
	case NEEDS_LT:
		return v < c->datum;
	case NEEDS_LE:
		return v <= c->datum;
	case NEEDS_GT:
		return v > c->datum;
	case NEEDS_GE:
		return v >= c->datum;
	default:
		return (v & c->mask) == c->datum;
	}
}

bool needs_match(const struct needs *n, const struct mv_call *c)
{
	if (c->sc >= MV_SC_COUNT)
		return false;
	const struct needs_sc *s = &n->sc[c->abi][c->sc];
	if (s->all)
		return true;
	for (size_t i = 0; i < s->n; i++) {
		bool ok = true;
		for (int k = 0; k < s->t[i].n && ok; k++)
			ok = cmp_holds(&s->t[i].c[k], callargs_arg(c, s->t[i].c[k].arg));
		if (ok)
			return true;
	}
	return false;
}

/* Does every value satisfying a also satisfy b? Answers "no" when it
 * cannot tell: a refused policy change, never a missed notification. */
static bool cmp_implies(const struct needs_cmp *a, const struct needs_cmp *b)
{
	uint64_t x = b->datum, y = a->datum;
	if (a->op == NEEDS_EQ)
		return cmp_holds(b, y);
	switch (b->op) {
	case NEEDS_MASKED_EQ:
		return a->op == NEEDS_MASKED_EQ && (b->mask & ~a->mask) == 0 &&
		       (a->datum & b->mask) == b->datum;
	case NEEDS_GT:
		return (a->op == NEEDS_GT && y >= x) || (a->op == NEEDS_GE && y > x);
	case NEEDS_GE:
		return (a->op == NEEDS_GE && y >= x) || (a->op == NEEDS_GT && y >= x - (x > 0));
	case NEEDS_LT:
		return (a->op == NEEDS_LT && y <= x) || (a->op == NEEDS_LE && y < x);
	case NEEDS_LE:
		return (a->op == NEEDS_LE && y <= x) ||
		       (a->op == NEEDS_LT && y <= x + (x < UINT64_MAX));
	case NEEDS_NE:
		return (a->op == NEEDS_NE && y == x) || (a->op == NEEDS_GT && y >= x) ||
		       (a->op == NEEDS_GE && y > x) || (a->op == NEEDS_LT && y <= x) ||
		       (a->op == NEEDS_LE && y < x) ||
		       (a->op == NEEDS_MASKED_EQ && (x & a->mask) != a->datum);
	default:
		return false;
	}
}

/* Is every call matching t also matched by l? */
static bool term_implies(const struct needs_term *t, const struct needs_term *l)
{
	for (int j = 0; j < l->n; j++) {
		bool found = false;
		for (int i = 0; i < t->n && !found; i++)
			found = t->c[i].arg == l->c[j].arg && cmp_implies(&t->c[i], &l->c[j]);
		if (!found)
			return false;
	}
	return true;
}

static void describe_term(const struct needs_term *t, enum mv_sc sc, char *buf, size_t len)
{
	static const char *const ops[] = {"==", "!=", "<", "<=", ">", ">="};
	const char *names = syscalls_arg_names(sc);
	size_t off = 0;
	buf[0] = '\0';
	for (int i = 0; i < t->n && off < len; i++) {
		const struct needs_cmp *c = &t->c[i];
		/* The argument's name from the syscall table. */
		const char *p = names;
		for (int k = 0; k < c->arg && p; k++)
			p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL;
		int nlen = p ? (int)strcspn(p, ",") : 0;
		char arg[24];
		if (nlen)
			snprintf(arg, sizeof(arg), "%.*s", nlen, p);
		else
			snprintf(arg, sizeof(arg), "arg%d", c->arg);
		int k;
		if (c->op == NEEDS_MASKED_EQ)
			k = snprintf(buf + off, len - off, "%s%s & %#llx == %#llx",
				     i ? " and " : "", arg, (unsigned long long)c->mask,
				     (unsigned long long)c->datum);
		else
			k = snprintf(buf + off, len - off, "%s%s %s %llu", i ? " and " : "", arg,
				     ops[c->op], (unsigned long long)c->datum);
		off += k > 0 ? (size_t)k : 0;
	}
}

int needs_covered(const struct needs *launch, const struct needs *want, char *buf, size_t len)
{
	for (int abi = 0; abi < MV_ABI_COUNT; abi++) {
		for (int sc = 0; sc < MV_SC_COUNT; sc++) {
			const struct needs_sc *L = &launch->sc[abi][sc], *W = &want->sc[abi][sc];
			if (L->all || syscalls_nr((enum mv_sc)sc, (enum mv_abi)abi) < 0)
				continue;
			if (W->all) {
				snprintf(buf, len, "%s needs every %s call (%s ABI) notified",
					 W->all_why, syscalls_name((enum mv_sc)sc),
					 syscalls_abi_name((enum mv_abi)abi));
				return -1;
			}
			for (size_t i = 0; i < W->n; i++) {
				bool ok = false;
				for (size_t j = 0; j < L->n && !ok; j++)
					ok = term_implies(&W->t[i], &L->t[j]);
				if (ok)
					continue;
				char d[160];
				describe_term(&W->t[i], (enum mv_sc)sc, d, sizeof(d));
				snprintf(buf, len, "%s needs %s calls (%s ABI) notified when %s",
					 W->t[i].why, syscalls_name((enum mv_sc)sc),
					 syscalls_abi_name((enum mv_abi)abi), d);
				return -1;
			}
		}
	}
	if (want->refuse_io_uring && !launch->refuse_io_uring) {
		snprintf(buf, len,
			 "the policy decides madvise, which io_uring can do out of the filter's "
			 "sight (IORING_OP_MADVISE), and the launch filter allows io_uring");
		return -1;
	}
	return 0;
}

bool needs_refuse_io_uring(const struct needs *n)
{
	return n->refuse_io_uring;
}

void needs_describe(const struct needs *n, FILE *f)
{
	for (int abi = 0; abi < MV_ABI_COUNT; abi++) {
		fprintf(f, "%s:\n", syscalls_abi_name((enum mv_abi)abi));
		char kernel[1024] = "";
		size_t koff = 0;
		for (int sc = 0; sc < MV_SC_COUNT; sc++) {
			const struct needs_sc *s = &n->sc[abi][sc];
			const char *name = syscalls_name((enum mv_sc)sc);
			if (syscalls_nr((enum mv_sc)sc, (enum mv_abi)abi) < 0)
				continue;
			if (s->all) {
				fprintf(f, "  %-16s notified (%s)\n", name, s->all_why);
			} else if (s->n) {
				for (size_t i = 0; i < s->n; i++) {
					char d[200];
					describe_term(&s->t[i], (enum mv_sc)sc, d, sizeof(d));
					fprintf(f, "  %-16s %s %s (%s)\n", i ? "" : name,
						i ? "or when" : "notified when", d, s->t[i].why);
				}
				fprintf(f, "  %-16s otherwise in the kernel\n", "");
			} else if (koff < sizeof(kernel) - 32) {
				koff += (size_t)snprintf(kernel + koff, sizeof(kernel) - koff,
							 "%s%s", koff ? ", " : "", name);
			}
		}
		if (koff)
			fprintf(f, "  in the kernel:   %s\n", kernel);
	}
	if (needs_refuse_io_uring(n))
		fprintf(f, "io_uring_setup, io_uring_enter, io_uring_register: refused with EPERM "
			   "(IORING_OP_MADVISE would pass madvise by the filter)\n");
}

enum needs_when needs_when(const struct needs *n, enum mv_sc sc)
{
	const struct needs_sc *s = &n->sc[MV_ABI_X86_64][sc];
	if (syscalls_class(sc) != MV_SC_MEMORY || syscalls_nr(sc, MV_ABI_X86_64) < 0)
		return NEEDS_NA;
	return s->all ? NEEDS_ALWAYS : s->n ? NEEDS_SOME : NEEDS_NEVER;
}

json_t *needs_uncounted_json(const struct needs *n)
{
	json_t *never = json_array(), *some = json_array();
	for (int sc = 0; sc < MV_SC_COUNT; sc++) {
		const struct needs_sc *s = &n->sc[MV_ABI_X86_64][sc];
		enum needs_when when_sc = needs_when(n, (enum mv_sc)sc);
		if (when_sc == NEEDS_NA || when_sc == NEEDS_ALWAYS)
			continue;
		json_t *name = json_string(syscalls_name((enum mv_sc)sc));
		if (when_sc == NEEDS_NEVER) {
			json_array_append_new(never, name);
			continue;
		}
		json_t *when = json_array();
		for (size_t i = 0; i < s->n; i++) {
			bool dup = false;
			for (size_t k = 0; k < i; k++)
				dup |= strcmp(s->t[k].why, s->t[i].why) == 0;
			if (!dup)
				json_array_append_new(when, json_string(s->t[i].why));
		}
		json_array_append_new(some, json_pack("{s:o, s:o}", "syscall", name, "when", when));
	}
	return json_pack("{s:b, s:o, s:o}", "notify_all", n->notify_all, "never", never, "some",
			 some);
}
