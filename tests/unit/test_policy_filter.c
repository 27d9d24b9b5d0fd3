/* The kernel-side fast path: policies compiled to "notify when", the BPF
 * program libseccomp builds from that (run here through a small classic
 * BPF interpreter, as the kernel would run it), and which policy changes
 * a launch filter can take at run time. */
#include "common/compat.h"
#include "common/syscalls.h"
#include "common/util.h"
#include "policy/filter.h"
#include "policy/needs.h"
#include "state/call.h"
#include "tests/unit/tap.h"

#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdlib.h>
#include <string.h>

/* ---- a classic BPF interpreter (net/core/filter.c semantics) -------- */

static uint32_t bpf_run(const struct sock_fprog *p, const struct seccomp_data *d)
{
	uint32_t A = 0, X = 0, M[BPF_MEMWORDS] = {0};
	for (size_t pc = 0; pc < p->len; pc++) {
		const struct sock_filter *f = &p->filter[pc];
		uint32_t src = BPF_SRC(f->code) == BPF_X ? X : f->k;
		switch (BPF_CLASS(f->code)) {
		case BPF_LD:
			if (BPF_MODE(f->code) == BPF_ABS && f->k + 4 <= sizeof(*d))
				memcpy(&A, (const char *)d + f->k, 4);
			else if (BPF_MODE(f->code) == BPF_IMM)
				A = f->k;
			else if (BPF_MODE(f->code) == BPF_MEM)
				A = M[f->k];
			else if (BPF_MODE(f->code) == BPF_LEN)
				A = sizeof(*d);
			else
				return 0xdead;
			break;
		case BPF_LDX:
			X = BPF_MODE(f->code) == BPF_MEM ? M[f->k] : BPF_MODE(f->code) == BPF_LEN ? sizeof(*d) : f->k;
			break;
		case BPF_ST:
			M[f->k] = A;
			break;
		case BPF_STX:
			M[f->k] = X;
			break;
		case BPF_ALU:
			switch (BPF_OP(f->code)) {
			case BPF_ADD: A += src; break;
			case BPF_SUB: A -= src; break;
			case BPF_MUL: A *= src; break;
			case BPF_DIV: A = src ? A / src : 0; break;
			case BPF_AND: A &= src; break;
			case BPF_OR: A |= src; break;
			case BPF_XOR: A ^= src; break;
			case BPF_LSH: A <<= src; break;
			case BPF_RSH: A >>= src; break;
			case BPF_NEG: A = -A; break;
			default: return 0xdead;
			}
			break;
		case BPF_JMP:
			switch (BPF_OP(f->code)) {
			case BPF_JA: pc += f->k; break;
			case BPF_JEQ: pc += A == src ? f->jt : f->jf; break;
			case BPF_JGT: pc += A > src ? f->jt : f->jf; break;
			case BPF_JGE: pc += A >= src ? f->jt : f->jf; break;
			case BPF_JSET: pc += (A & src) ? f->jt : f->jf; break;
			default: return 0xdead;
			}
			break;
		case BPF_RET:
			return BPF_RVAL(f->code) == BPF_A ? A : f->k;
		case BPF_MISC:
			if (BPF_MISCOP(f->code) == BPF_TAX)
				X = A;
			else
				A = X;
			break;
		}
	}
	return 0xdead;
}

static const uint32_t audit_arch[MV_ABI_COUNT] = {AUDIT_ARCH_X86_64, AUDIT_ARCH_I386, AUDIT_ARCH_X86_64};

/* What the filter does with a call: 'N' notify, 'A' allow, '?' other. */
static char act(const struct sock_fprog *prog, const struct mv_call *c)
{
	struct seccomp_data d = {.nr = syscalls_nr(c->sc, c->abi), .arch = audit_arch[c->abi]};
	memcpy(d.args, c->args, sizeof(d.args));
	uint32_t r = bpf_run(prog, &d) & SECCOMP_RET_ACTION_FULL;
	return r == SECCOMP_RET_USER_NOTIF ? 'N' : r == SECCOMP_RET_ALLOW ? 'A' : '?';
}

static struct mv_call C(enum mv_sc sc, enum mv_abi abi, uint64_t a0, uint64_t a1, uint64_t a2,
			uint64_t a3)
{
	return (struct mv_call){.sc = sc, .abi = abi, .args = {a0, a1, a2, a3, (uint64_t)-1, 0}};
}

static struct policy *load(const char *text)
{
	struct policy *p = NULL;
	struct pol_diag d = {0};
	if (policy_parse(text, strlen(text), "t.json", &p, &d) < 0)
		for (size_t i = 0; i < d.n; i++)
			printf("# %s\n", d.msg[i]);
	pol_diag_free(&d);
	return p;
}

static const struct {
	const char *policy;
	bool notify_all;
	struct {
		enum mv_sc sc;
		enum mv_abi abi;
		uint64_t a0, a1, a2, a3;
		char want;
		const char *what;
	} calls[10];
} cases[] = {
	{"{\"version\": 1}", false,
	 {{MV_SC_mmap, MV_ABI_X86_64, 0, 4096, 7, 0x22, 'A', "default: an RWX mmap stays in the kernel"},
	  {MV_SC_munmap, MV_ABI_X86_64, 0x1000, 4096, 0, 0, 'A', "default: munmap in the kernel"},
	  {MV_SC_execve, MV_ABI_X86_64, 0, 0, 0, 0, 'N', "default: execve notified (process tracking)"},
	  {MV_SC_brk, MV_ABI_X86_64, 0, 0, 0, 0, 'N', "default: brk(0) notified (exec tracking)"},
	  {MV_SC_brk, MV_ABI_X86_64, 0x5000000, 0, 0, 0, 'A', "default: brk growth in the kernel"},
	  {MV_SC_mmap2, MV_ABI_I386, 0, 4096, 7, 0x22, 'A', "default: i386 mmap2 in the kernel"},
	  {MV_SC_clone, MV_ABI_I386, 0x11, 0, 0, 0, 'N', "default: i386 clone notified"}}},
	{"{\"version\": 1}", true,
	 {{MV_SC_munmap, MV_ABI_X86_64, 0x1000, 4096, 0, 0, 'N', "--notify-all: munmap notified"},
	  {MV_SC_madvise, MV_ABI_I386, 0x1000, 4096, 4, 0, 'N', "--notify-all: i386 madvise notified"},
	  {MV_SC_personality, MV_ABI_X86_64, 0, 0, 0, 0, 'N', "--notify-all: guard calls notified too"}}},
	{"{\"version\": 1, \"wx\": \"deny\"}", false,
	 {{MV_SC_mmap, MV_ABI_X86_64, 0, 4096, 3, 0x22, 'A', "wx: RW private anon in the kernel"},
	  {MV_SC_mmap, MV_ABI_X86_64, 0, 4096, 5, 0x22, 'N', "wx: PROT_EXEC notified"},
	  {MV_SC_mmap, MV_ABI_X86_64, 0, 4096, 0x100000004ULL, 0x22, 'N', "wx: PROT_EXEC with junk high bits notified"},
	  {MV_SC_mmap, MV_ABI_X86_64, 0, 4096, 1, 0x01, 'N', "wx: shared file mapping notified"},
	  {MV_SC_mmap, MV_ABI_X86_64, 0, 4096, 3, 0x21, 'A', "wx: shared anonymous RW in the kernel"},
	  {MV_SC_mprotect, MV_ABI_X86_64, 0x1000, 4096, 3, 0, 'A', "wx: mprotect RW in the kernel"},
	  {MV_SC_mprotect, MV_ABI_X86_64, 0x1000, 4096, 5, 0, 'N', "wx: mprotect RX notified"},
	  {MV_SC_personality, MV_ABI_X86_64, 0x0400000, 0, 0, 0, 'N', "wx: personality(READ_IMPLIES_EXEC) notified"},
	  {MV_SC_mprotect, MV_ABI_I386, 0x1000, 4096, 3, 0, 'N', "wx: i386 mprotect always notified (READ_IMPLIES_EXEC)"},
	  {MV_SC_ptrace, MV_ABI_X86_64, 16, 1, 0, 0, 'A', "wx: ptrace attach in the kernel"}}},
	{"{\"version\": 1, \"limits\": {\"max_mapping\": \"1M\"}}", false,
	 {{MV_SC_mmap, MV_ABI_X86_64, 0, 1 << 20, 3, 0x22, 'A', "max_mapping: the limit itself in the kernel"},
	  {MV_SC_mmap, MV_ABI_X86_64, 0, (1 << 20) + 1, 3, 0x22, 'N', "max_mapping: one byte over notified"},
	  {MV_SC_mremap, MV_ABI_X86_64, 0x1000, 4096, (1 << 20) + 1, 1, 'N', "max_mapping: mremap over notified"},
	  {MV_SC_mmap2, MV_ABI_I386, 0, 0x100000000ULL | 4096, 3, 0x22, 'A', "max_mapping: i386 sees 32 bits"}}},
	{"{\"version\": 1, \"limits\": {\"max_mapped\": \"1G\"}}", false,
	 {{MV_SC_mmap, MV_ABI_X86_64, 0, 1ULL << 40, 3, 0x22, 'A', "max_mapped: RLIMIT_AS, mmap stays in the kernel"},
	  {MV_SC_prlimit64, MV_ABI_X86_64, 0, 9, 0x7000, 0, 'N', "max_mapped: prlimit64(RLIMIT_AS, new) notified"},
	  {MV_SC_prlimit64, MV_ABI_X86_64, 0, 9, 0, 0x7000, 'A', "max_mapped: reading RLIMIT_AS in the kernel"},
	  {MV_SC_prlimit64, MV_ABI_X86_64, 0, 3, 0x7000, 0, 'A', "max_mapped: other rlimits in the kernel"}}},
	{"{\"version\": 1, \"limits\": {\"max_mapped_tree\": \"1G\"}}", false,
	 {{MV_SC_mmap, MV_ABI_X86_64, 0, 4096, 3, 0x22, 'N', "tree: every mmap notified"},
	  {MV_SC_munmap, MV_ABI_X86_64, 0x1000, 4096, 0, 0, 'A', "tree: munmap in the kernel"},
	  {MV_SC_mprotect, MV_ABI_X86_64, 0x1000, 4096, 3, 0, 'A', "tree: mprotect in the kernel"}}},
	{"{\"version\": 1, \"limits\": {\"max_regions\": 100}}", false,
	 {{MV_SC_munmap, MV_ABI_X86_64, 0x1000, 4096, 0, 0, 'N', "regions: munmap notified"},
	  {MV_SC_madvise, MV_ABI_X86_64, 0x1000, 4096, 4, 0, 'A', "regions: MADV_DONTNEED in the kernel"},
	  {MV_SC_madvise, MV_ABI_X86_64, 0x1000, 4096, 14, 0, 'N', "regions: MADV_HUGEPAGE notified"}}},
	{"{\"version\": 1, \"rules\": [{\"syscalls\": [\"mmap\"], \"backing\": \"anon\", \"length_min\": \"1G\", "
	 "\"action\": \"deny\"}, {\"syscalls\": [\"munmap\"], \"action\": \"allow\"}]}",
	 false,
	 {{MV_SC_mmap, MV_ABI_X86_64, 0, 1ULL << 30, 3, 0x22, 'N', "rule: matching shape notified"},
	  {MV_SC_mmap, MV_ABI_X86_64, 0, 1ULL << 30, 3, 0x02, 'A', "rule: file-backed in the kernel"},
	  {MV_SC_mmap, MV_ABI_X86_64, 0, (1ULL << 30) - 1, 3, 0x22, 'A', "rule: shorter in the kernel"},
	  {MV_SC_munmap, MV_ABI_X86_64, 0x1000, 4096, 0, 0, 'A', "rule: an allow rule needs nothing"},
	  {MV_SC_mmap, MV_ABI_I386, 0x1234, 0, 0, 0, 'N', "rule: i386 old_mmap notified (arguments in memory)"}}},
};

static void test_filters(void)
{
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct policy *p = load(cases[i].policy);
		struct needs n;
		struct sock_fprog prog;
		needs_compile(p, cases[i].notify_all, &n);
		int rc = filter_build(&n, &prog);
		ok(rc == 0, "filter builds for %s%s", cases[i].policy, cases[i].notify_all ? " --notify-all" : "");
		for (size_t k = 0; k < ARRAY_SIZE(cases[i].calls) && cases[i].calls[k].what && rc == 0; k++) {
			struct mv_call c = C(cases[i].calls[k].sc, cases[i].calls[k].abi, cases[i].calls[k].a0,
					     cases[i].calls[k].a1, cases[i].calls[k].a2, cases[i].calls[k].a3);
			char got = act(&prog, &c);
			ok(got == cases[i].calls[k].want, "%s", cases[i].calls[k].what);
			if (got != cases[i].calls[k].want)
				printf("#   got %c\n", got);
			ok(needs_match(&n, &c) == (cases[i].calls[k].want == 'N'), "... needs_match agrees");
		}
		if (rc == 0)
			filter_free(&prog);
		needs_free(&n);
		policy_free(p);
	}
}

/* The BPF program and needs_match() agree on random calls: the filter
 * notifies exactly what the policy compiler asked for. */
static void test_agree(void)
{
	struct policy *p = load("{\"version\": 1, \"wx\": \"deny\", \"limits\": {\"max_mapping\": \"64K\", "
				"\"max_regions\": 500}, \"rules\": [{\"syscalls\": [\"mlock\"], \"length_min\": 8192, "
				"\"action\": \"log\"}]}");
	struct needs n;
	struct sock_fprog prog;
	needs_compile(p, false, &n);
	ok(filter_build(&n, &prog) == 0, "a mixed policy builds");
	srandom(42);
	int disagree = 0, notified = 0;
	static const uint64_t vals[] = {0, 1, 3, 4, 5, 7, 0x20, 0x21, 0x22, 14, 8192, 65536, 65537,
					0x100000004ULL, 0xffffffffULL, UINT64_MAX};
	for (int i = 0; i < 20000; i++) {
		struct mv_call c = {.sc = (enum mv_sc)(random() % MV_SC_COUNT),
				    .abi = random() % 2 ? MV_ABI_X86_64 : MV_ABI_I386};
		if (syscalls_nr(c.sc, c.abi) < 0)
			continue;
		for (int a = 0; a < 6; a++)
			c.args[a] = vals[random() % ARRAY_SIZE(vals)];
		if (c.abi == MV_ABI_I386)
			for (int a = 0; a < 6; a++)
				c.args[a] &= 0xffffffffULL;
		char got = act(&prog, &c);
		notified += got == 'N';
		disagree += (got == 'N') != needs_match(&n, &c);
	}
	is_u64(disagree, 0, "filter and policy compiler agree on 20000 random calls");
	ok(notified > 0, "some were notified (%d)", notified);
	filter_free(&prog);
	needs_free(&n);
	policy_free(p);
}

static int covered(const char *launch, bool notify_all, const char *want, char *why, size_t len)
{
	struct policy *a = load(launch), *b = load(want);
	struct needs na, nb;
	needs_compile(a, notify_all, &na);
	needs_compile(b, false, &nb);
	int rc = needs_covered(&na, &nb, why, len);
	needs_free(&na);
	needs_free(&nb);
	policy_free(a);
	policy_free(b);
	return rc;
}

static void test_coverage(void)
{
	char why[400];
	const char *wx = "{\"version\": 1, \"wx\": \"deny\"}";
	ok(covered(wx, false, "{\"version\": 1, \"wx\": \"log\"}", why, sizeof(why)) == 0,
	   "deny -> log is covered");
	ok(covered(wx, false, "{\"version\": 1, \"wx\": \"deny\", \"rules\": [{\"syscalls\": [\"mprotect\"], "
			      "\"prot_has\": [\"EXEC\", \"READ\"], \"action\": \"deny\"}]}",
		   why, sizeof(why)) == 0,
	   "a rule inside what W^X notifies is covered");
	ok(covered("{\"version\": 1}", false, wx, why, sizeof(why)) < 0 && strstr(why, "mmap") &&
		   strstr(why, "wx"),
	   "W^X cannot be turned on under the default filter");
	printf("#   %s\n", why);
	ok(covered("{\"version\": 1}", true, wx, why, sizeof(why)) == 0, "... but can under --notify-all");
	const char *m1 = "{\"version\": 1, \"limits\": {\"max_mapping\": \"1M\"}}";
	ok(covered(m1, false, "{\"version\": 1, \"limits\": {\"max_mapping\": \"2M\"}}", why, sizeof(why)) == 0,
	   "raising max_mapping is covered");
	ok(covered(m1, false, "{\"version\": 1, \"limits\": {\"max_mapping\": \"512K\"}}", why, sizeof(why)) < 0,
	   "lowering max_mapping is not");
	ok(covered("{\"version\": 1, \"limits\": {\"max_mapped_tree\": \"1G\"}}", false,
		   "{\"version\": 1, \"limits\": {\"max_regions\": 10}}", why, sizeof(why)) < 0 &&
		   strstr(why, "munmap"),
	   "max_regions needs munmap, which a tree limit leaves in the kernel");
	ok(covered("{\"version\": 1, \"limits\": {\"max_mapped\": \"1G\"}}", false,
		   "{\"version\": 1, \"limits\": {\"max_mapped\": \"2G\"}}", why, sizeof(why)) == 0,
	   "changing max_mapped needs no notification (RLIMIT_AS)");
}

/* The stop point of run --until-point: read(0) notified on every ABI, a
 * read of another descriptor not; exit and exit_group notified; what the
 * policy asks for still notified. */
static char act_raw(const struct sock_fprog *prog, uint32_t arch, int nr, uint64_t a0)
{
	struct seccomp_data d = {.nr = nr, .arch = arch, .args = {a0}};
	uint32_t r = bpf_run(prog, &d) & SECCOMP_RET_ACTION_FULL;
	return r == SECCOMP_RET_USER_NOTIF ? 'N' : r == SECCOMP_RET_ALLOW ? 'A' : '?';
}

static void test_point(void)
{
	struct policy *p = load("{\"version\": 1, \"limits\": {\"max_mapping\": \"64K\"}}");
	struct needs n;
	struct sock_fprog prog;
	needs_compile(p, false, &n);
	ok(filter_build_point(&n, "read", 0, &prog) == 0, "a filter with the point read:0 builds");
	/* x86_64 read 0, exit 60, exit_group 231, write 1; i386 read 3,
	 * exit 1, exit_group 252; x32 read 0|X32 bit. */
	is_u64(act_raw(&prog, AUDIT_ARCH_X86_64, 0, 0), 'N', "read(0) notified");
	is_u64(act_raw(&prog, AUDIT_ARCH_X86_64, 0, 1ull << 32), 'N',
	       "read(0) with high bits set in the register notified (the kernel reads 32)");
	is_u64(act_raw(&prog, AUDIT_ARCH_X86_64, 0, 3), 'A', "read(3) allowed in the kernel");
	is_u64(act_raw(&prog, AUDIT_ARCH_X86_64, 1, 0), 'A', "write(0) allowed");
	is_u64(act_raw(&prog, AUDIT_ARCH_X86_64, 60, 0), 'N', "exit notified");
	is_u64(act_raw(&prog, AUDIT_ARCH_X86_64, 231, 0), 'N', "exit_group notified");
	is_u64(act_raw(&prog, AUDIT_ARCH_I386, 3, 0), 'N', "i386 read(0) notified");
	is_u64(act_raw(&prog, AUDIT_ARCH_I386, 3, 4), 'A', "i386 read(4) allowed");
	is_u64(act_raw(&prog, AUDIT_ARCH_I386, 252, 0), 'N', "i386 exit_group notified");
	is_u64(act_raw(&prog, AUDIT_ARCH_X86_64, 0x40000000, 0), 'N', "x32 read(0) notified");
	struct mv_call big = C(MV_SC_mmap, MV_ABI_X86_64, 0, 1 << 20, 3, 0x22);
	is_u64(act(&prog, &big), 'N', "the policy's mmap still notified");
	filter_free(&prog);
	ok(filter_build_point(&n, "read", -1, &prog) == 0, "a point without descriptor builds");
	is_u64(act_raw(&prog, AUDIT_ARCH_X86_64, 0, 9), 'N', "read(9) notified");
	filter_free(&prog);
	ok(filter_build(&n, &prog) == 0, "no point");
	is_u64(act_raw(&prog, AUDIT_ARCH_X86_64, 0, 0), 'A', "read(0) allowed without a point");
	is_u64(act_raw(&prog, AUDIT_ARCH_X86_64, 231, 0), 'A', "exit_group allowed without a point");
	filter_free(&prog);
	needs_free(&n);
	policy_free(p);
}

int main(void)
{
	if (syscalls_init() < 0) {
		printf("Bail out! syscalls_init\n");
		return 1;
	}
	test_filters();
	test_agree();
	test_coverage();
	test_point();
	return tap_done();
}
