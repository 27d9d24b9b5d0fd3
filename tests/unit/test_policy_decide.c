/* Policy tables: syscall arguments in, verdicts out. The facts about the
 * calling process come from a fake environment, so every rule kind, every
 * W^X case and every limit edge (exact limit, one byte over, overflowing
 * lengths) is checked without a kernel. */
#include "common/syscalls.h"
#include "common/util.h"
#include "policy/decide.h"
#include "tests/unit/tap.h"

#include <string.h>

#define MiB (1ULL << 20)
#define PROT_R 1
#define PROT_W 2
#define PROT_X 4
#define MAP_SH 0x1
#define MAP_PRIV 0x2
#define MAP_FIX 0x10
#define MAP_AN 0x20

struct fake {
	uint64_t vm;
	struct pol_range range;
	int range_rc;
	struct pol_fd fd;
	bool mapped_exec, mapped_shared_w;
	uint64_t start_brk, heap_end;
	uint64_t shm;
	uint64_t regions_est, regions_exact;
	uint64_t tree_est, tree_exact;
	bool rie;
	int exact_reads;
};

static int f_vm(void *e, uint64_t *b)
{
	*b = ((struct fake *)e)->vm;
	return 0;
}
static int f_range(void *e, uint64_t s, uint64_t l, bool w, struct pol_range *out)
{
	struct fake *f = e;
	*out = f->range;
	return f->range_rc;
}
static int f_fd(void *e, int fd, struct pol_fd *out)
{
	*out = ((struct fake *)e)->fd;
	return 0;
}
static int f_mapped(void *e, const struct pol_file_id *id, enum pol_mapped how, bool *yes)
{
	struct fake *f = e;
	*yes = how == POL_MAPPED_EXEC ? f->mapped_exec : f->mapped_shared_w;
	return 0;
}
static int f_brk(void *e, uint64_t *s, uint64_t *end)
{
	struct fake *f = e;
	*s = f->start_brk;
	*end = f->heap_end;
	return 0;
}
static int f_shm(void *e, int id, uint64_t *b)
{
	*b = ((struct fake *)e)->shm;
	return 0;
}
static int f_regions(void *e, bool exact, uint64_t *n)
{
	struct fake *f = e;
	f->exact_reads += exact;
	*n = exact ? f->regions_exact : f->regions_est;
	return 0;
}
static int f_tree(void *e, bool exact, uint64_t *b)
{
	struct fake *f = e;
	f->exact_reads += exact;
	*b = exact ? f->tree_exact : f->tree_est;
	return 0;
}
static int f_rie(void *e, bool *yes)
{
	*yes = ((struct fake *)e)->rie;
	return 0;
}

static const struct pol_env_ops fake_ops = {f_vm,      f_range,	  f_fd,	  f_mapped, f_brk,
					    f_shm,     f_regions, f_tree, f_rie, NULL};

static struct fake F;
static struct pol_caller who = {.exe = "/bin/prog", .ops = &fake_ops, .env = &F};

static void reset(void)
{
	memset(&F, 0, sizeof(F));
	F.fd.kind = POL_FD_REGULAR;
	F.fd.id = (struct pol_file_id){1, 2};
	who.exe = "/bin/prog";
}

static struct mv_call call(enum mv_sc sc, uint64_t a0, uint64_t a1, uint64_t a2, uint64_t a3,
			   uint64_t a4, uint64_t a5)
{
	struct mv_call c = {.sc = sc, .abi = MV_ABI_X86_64, .tid = 100, .args = {a0, a1, a2, a3, a4, a5}};
	return c;
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

static struct pol_decision run(const struct policy *p, struct mv_call c)
{
	struct pol_decision d;
	decide(p, &c, &who, &d);
	return d;
}

#define VERDICT(d, v, e, r)                                                                        \
	((d).verdict == (v) && (d).err == (e) && (!(r) || ((d).rule && strcmp((d).rule, (r)) == 0)))

static void test_rules(void)
{
	struct policy *p = load(
		"{\"version\": 1, \"rules\": ["
		"{\"name\": \"small-ok\", \"syscalls\": [\"mmap\"], \"length_max\": 4096, \"action\": \"allow\"},"
		"{\"name\": \"no-exec-anon\", \"syscalls\": [\"mmap\"], \"backing\": \"anon\", \"prot_has\": [\"EXEC\"], \"action\": \"deny\", \"errno\": \"ENOMEM\"},"
		"{\"name\": \"big\", \"syscalls\": [\"mmap\"], \"length_min\": \"1M\", \"length_max\": \"2M\", \"action\": \"deny\"},"
		"{\"name\": \"watch\", \"syscalls\": [\"mremap\"], \"flags_has\": [\"MAYMOVE\"], \"flags_lacks\": [\"FIXED\"], \"action\": \"log\"},"
		"{\"name\": \"shared\", \"syscalls\": [\"mmap\"], \"flags_has\": [\"SHARED\"], \"backing\": \"file\", \"action\": \"kill\"},"
		"{\"name\": \"no-exec\", \"syscalls\": [\"execve\"], \"action\": \"deny\", \"errno\": \"EACCES\"}"
		"]}");
	struct pol_decision d;
	reset();
	d = run(p, call(MV_SC_mmap, 0, 8192, PROT_R | PROT_X, MAP_PRIV | MAP_AN, -1, 0));
	ok(VERDICT(d, MV_V_DENY, ENOMEM, "no-exec-anon"), "deny with a chosen errno");
	d = run(p, call(MV_SC_mmap, 0, 4096, PROT_R | PROT_X, MAP_PRIV | MAP_AN, -1, 0));
	ok(VERDICT(d, MV_V_ALLOW, 0, "small-ok"), "first matching rule wins (allow before deny)");
	d = run(p, call(MV_SC_mmap, 0, 8192, PROT_R | PROT_X, MAP_PRIV, 3, 0));
	ok(d.verdict == MV_V_ALLOW, "backing file does not match a rule on anon");
	d = run(p, call(MV_SC_mmap, 0, MiB, PROT_R, MAP_PRIV | MAP_AN, -1, 0));
	ok(VERDICT(d, MV_V_DENY, EPERM, "big"), "length_min is inclusive; errno defaults to EPERM");
	d = run(p, call(MV_SC_mmap, 0, MiB - 1, PROT_R, MAP_PRIV | MAP_AN, -1, 0));
	ok(d.verdict == MV_V_ALLOW, "one byte under length_min");
	d = run(p, call(MV_SC_mmap, 0, 2 * MiB, PROT_R, MAP_PRIV | MAP_AN, -1, 0));
	ok(d.verdict == MV_V_DENY, "length_max is inclusive");
	d = run(p, call(MV_SC_mmap, 0, 2 * MiB + 1, PROT_R, MAP_PRIV | MAP_AN, -1, 0));
	ok(d.verdict == MV_V_ALLOW, "one byte over length_max");
	d = run(p, call(MV_SC_mremap, 0x1000, 4096, 8192, 1, 0, 0));
	ok(VERDICT(d, MV_V_LOG, 0, "watch"), "log: allowed and reported");
	d = run(p, call(MV_SC_mremap, 0x1000, 4096, 8192, 3, 0x9000, 0));
	ok(d.verdict == MV_V_ALLOW, "flags_lacks excludes");
	d = run(p, call(MV_SC_mmap, 0, 8192, PROT_R, MAP_SH, 3, 0));
	ok(VERDICT(d, MV_V_KILL, 0, "shared"), "kill");
	d = run(p, call(MV_SC_mmap, 0, 8192, PROT_R, 0x3, 3, 0));
	ok(d.verdict == MV_V_KILL, "flags_has SHARED matches SHARED_VALIDATE");
	d = run(p, call(MV_SC_execve, 0, 0, 0, 0, 0, 0));
	ok(VERDICT(d, MV_V_DENY, EACCES, "no-exec"), "a rule on a lifecycle call");
	/* mmap2 is covered by a rule on mmap; i386 registers are 32 bits. */
	struct mv_call c = call(MV_SC_mmap2, 0, 0x100000000ULL | MiB, PROT_R, MAP_PRIV | MAP_AN, 0, 0);
	c.abi = MV_ABI_I386;
	d = run(p, c);
	ok(VERDICT(d, MV_V_DENY, EPERM, "big"), "i386 mmap2: a rule on mmap, length truncated to 32 bits");
	c = call(MV_SC_mmap, 0x1234, 0, 0, 0, 0, 0);
	c.abi = MV_ABI_I386;
	d = run(p, c);
	ok(VERDICT(d, MV_V_DENY, ENOSYS, "abi.i386_old_mmap"), "i386 old_mmap refused when mmap rules need arguments");
	policy_free(p);

	p = load("{\"version\": 1, \"default\": \"deny\", \"rules\": [{\"syscalls\": [\"brk\"], \"action\": \"allow\"}]}");
	d = run(p, call(MV_SC_munmap, 0x1000, 4096, 0, 0, 0, 0));
	ok(VERDICT(d, MV_V_DENY, EPERM, "default"), "default deny for memory calls");
	d = run(p, call(MV_SC_brk, 0, 0, 0, 0, 0, 0));
	ok(d.verdict == MV_V_ALLOW, "an allow rule under default deny");
	d = run(p, call(MV_SC_clone, 0x11, 0, 0, 0, 0, 0));
	ok(d.verdict == MV_V_ALLOW, "the default does not apply to lifecycle calls");
	c = call(MV_SC_mmap, 0x1234, 0, 0, 0, 0, 0);
	c.abi = MV_ABI_I386;
	d = run(p, c);
	ok(VERDICT(d, MV_V_DENY, EPERM, "default"), "old_mmap needs no arguments for a default");
	policy_free(p);
}

static void test_wx(void)
{
	struct policy *p = load("{\"version\": 1, \"wx\": \"deny\", \"wx_allow\": [\"/usr/bin/jit\"]}");
	struct pol_decision d;
	reset();
	d = run(p, call(MV_SC_mmap, 0, 4096, PROT_R | PROT_W | PROT_X, MAP_PRIV | MAP_AN, -1, 0));
	ok(VERDICT(d, MV_V_DENY, EACCES, "wx"), "RWX mapping refused with EACCES");
	d = run(p, call(MV_SC_mmap, 0, 4096, PROT_R | PROT_X, MAP_PRIV | MAP_AN, -1, 0));
	ok(d.verdict == MV_V_DENY, "executable anonymous mapping refused");
	d = run(p, call(MV_SC_mmap, 0, 4096, PROT_R | PROT_X, MAP_SH | MAP_AN, -1, 0));
	ok(d.verdict == MV_V_DENY, "executable shared anonymous mapping refused");
	d = run(p, call(MV_SC_mmap, 0, 4096, PROT_R | PROT_X, MAP_PRIV, 3, 0));
	ok(d.verdict == MV_V_ALLOW, "executable mapping of a file allowed");
	F.fd.kind = POL_FD_ANON;
	d = run(p, call(MV_SC_mmap, 0, 4096, PROT_R | PROT_X, MAP_SH, 3, 0));
	ok(d.verdict == MV_V_DENY, "executable memfd mapping refused");
	reset();
	F.mapped_shared_w = true;
	d = run(p, call(MV_SC_mmap, 0, 4096, PROT_R | PROT_X, MAP_PRIV, 3, 0));
	ok(d.verdict == MV_V_DENY, "double mapping: exec mapping of a file mapped shared-writable");
	reset();
	F.fd.writable = true;
	d = run(p, call(MV_SC_mmap, 0, 4096, PROT_R | PROT_W, MAP_SH, 3, 0));
	ok(d.verdict == MV_V_ALLOW && d.note_shared, "shared writable file mapping allowed and noted");
	F.mapped_exec = true;
	d = run(p, call(MV_SC_mmap, 0, 4096, PROT_R, MAP_SH, 3, 0));
	ok(d.verdict == MV_V_DENY, "double mapping: shared mapping (writable fd) of a file mapped executable");
	F.fd.writable = false;
	d = run(p, call(MV_SC_mmap, 0, 4096, PROT_R, MAP_SH, 3, 0));
	ok(d.verdict == MV_V_ALLOW && !d.note_shared, "... but not through a read-only fd");

	reset();
	d = run(p, call(MV_SC_mprotect, 0x1000, 4096, PROT_R | PROT_W | PROT_X, 0, 0, 0));
	ok(d.verdict == MV_V_DENY, "mprotect RWX refused");
	d = run(p, call(MV_SC_mprotect, 0x1000, 4096, PROT_R | PROT_W, 0, 0, 0));
	ok(d.verdict == MV_V_ALLOW, "mprotect without EXEC allowed");
	F.range.anon = true;
	d = run(p, call(MV_SC_mprotect, 0x1000, 4096, PROT_R | PROT_X, 0, 0, 0));
	ok(d.verdict == MV_V_DENY && strstr(d.why, "anonymous"), "heap/anonymous made executable refused");
	reset();
	F.range.writable = true;
	d = run(p, call(MV_SC_pkey_mprotect, 0x1000, 4096, PROT_R | PROT_X, 0, 0, 0));
	ok(d.verdict == MV_V_DENY, "writable file memory made executable refused (pkey_mprotect)");
	reset();
	F.range.written = true;
	d = run(p, call(MV_SC_mprotect, 0x1000, 4096, PROT_R | PROT_X, 0, 0, 0));
	ok(d.verdict == MV_V_DENY, "written (copied-on-write) file pages made executable refused");
	reset();
	F.range.n_files = 1;
	d = run(p, call(MV_SC_mprotect, 0x1000, 4096, PROT_R | PROT_X, 0, 0, 0));
	ok(d.verdict == MV_V_ALLOW, "clean file pages made executable allowed");
	F.mapped_shared_w = true;
	d = run(p, call(MV_SC_mprotect, 0x1000, 4096, PROT_R | PROT_X, 0, 0, 0));
	ok(d.verdict == MV_V_DENY, "... unless the file is mapped shared-writable elsewhere");
	reset();
	F.range.exec = true;
	F.range.anon = true;
	d = run(p, call(MV_SC_mremap, 0x1000, 4096, 8192, 1, 0, 0));
	ok(d.verdict == MV_V_DENY, "mremap of executable anonymous memory refused");
	F.range.exec = false;
	d = run(p, call(MV_SC_mremap, 0x1000, 4096, 8192, 1, 0, 0));
	ok(d.verdict == MV_V_ALLOW, "mremap of data allowed");
	reset();
	d = run(p, call(MV_SC_shmat, 1, 0, 0100000, 0, 0, 0));
	ok(d.verdict == MV_V_DENY, "shmat SHM_EXEC refused");
	d = run(p, call(MV_SC_shmat, 1, 0, 0, 0, 0, 0));
	ok(d.verdict == MV_V_ALLOW, "shmat without SHM_EXEC allowed");
	d = run(p, call(MV_SC_personality, 0x0400000, 0, 0, 0, 0, 0));
	ok(d.verdict == MV_V_DENY, "personality(READ_IMPLIES_EXEC) refused");
	d = run(p, call(MV_SC_personality, 0xffffffff, 0, 0, 0, 0, 0));
	ok(d.verdict == MV_V_ALLOW, "personality query allowed");
	d = run(p, call(MV_SC_ptrace, 4, 123, 0x1000, 0, 0, 0));
	ok(d.verdict == MV_V_DENY, "ptrace POKETEXT refused");
	d = run(p, call(MV_SC_ptrace, 16, 123, 0, 0, 0, 0));
	ok(d.verdict == MV_V_ALLOW, "ptrace ATTACH allowed");

	/* i386 with READ_IMPLIES_EXEC: PROT_READ means executable. */
	reset();
	F.rie = true;
	struct mv_call c = call(MV_SC_mmap2, 0, 4096, PROT_R | PROT_W, MAP_PRIV | MAP_AN, -1, 0);
	c.abi = MV_ABI_I386;
	d = run(p, c);
	ok(d.verdict == MV_V_DENY, "READ_IMPLIES_EXEC: an RW mapping is RWX");
	c.abi = MV_ABI_X86_64;
	d = run(p, c);
	ok(d.verdict == MV_V_ALLOW, "... not on x86_64, where it cannot be set");

	/* Facts that cannot be read. */
	reset();
	F.range_rc = -EACCES;
	d = run(p, call(MV_SC_mprotect, 0x1000, 4096, PROT_R | PROT_X, 0, 0, 0));
	ok(d.verdict == MV_V_DENY && d.err == EACCES, "W^X refuses what it cannot inspect");
	F.range_rc = -ESRCH;
	d = run(p, call(MV_SC_mprotect, 0x1000, 4096, PROT_R | PROT_X, 0, 0, 0));
	ok(d.verdict == MV_V_ALLOW, "a vanished process is let go");

	reset();
	who.exe = "/usr/bin/jit";
	d = run(p, call(MV_SC_mmap, 0, 4096, PROT_R | PROT_W | PROT_X, MAP_PRIV | MAP_AN, -1, 0));
	ok(d.verdict == MV_V_ALLOW, "wx_allow exempts an executable");
	policy_free(p);

	p = load("{\"version\": 1, \"wx\": \"log\"}");
	reset();
	d = run(p, call(MV_SC_mmap, 0, 4096, PROT_R | PROT_W | PROT_X, MAP_PRIV | MAP_AN, -1, 0));
	ok(VERDICT(d, MV_V_LOG, 0, "wx"), "wx log: allowed, reported with rule wx");
	policy_free(p);
}

static void test_max_mapped(void)
{
	struct policy *p = load("{\"version\": 1, \"limits\": {\"max_mapped\": \"128M\"}}");
	struct pol_decision d;
	reset();
	F.vm = 100 * MiB;
	d = run(p, call(MV_SC_mmap, 0, 28 * MiB, PROT_R, MAP_PRIV | MAP_AN, -1, 0));
	ok(d.verdict == MV_V_ALLOW && d.grow == 28 * MiB, "exactly up to max_mapped");
	d = run(p, call(MV_SC_mmap, 0, 28 * MiB + 1, PROT_R, MAP_PRIV | MAP_AN, -1, 0));
	ok(VERDICT(d, MV_V_DENY, ENOMEM, "limits.max_mapped"), "one byte over (a page more) gives ENOMEM");
	d = run(p, call(MV_SC_mmap, 0, UINT64_MAX, PROT_R, MAP_PRIV | MAP_AN, -1, 0));
	ok(d.verdict == MV_V_DENY && d.err == ENOMEM, "an overflowing length gives ENOMEM, as the kernel would");
	d = run(p, call(MV_SC_mmap, 0, UINT64_MAX - 4095, PROT_R, MAP_PRIV | MAP_AN, -1, 0));
	ok(d.verdict == MV_V_DENY && d.err == ENOMEM, "a length one page short of overflowing");
	d = run(p, call(MV_SC_mmap, 0, 0, PROT_R, MAP_PRIV | MAP_AN, -1, 0));
	ok(d.verdict == MV_V_ALLOW, "length 0 is the kernel's EINVAL, not a limit");
	/* MAP_FIXED over 10M already mapped grows by 20M only. */
	F.range.mapped = 10 * MiB;
	d = run(p, call(MV_SC_mmap, 0x10000000, 38 * MiB, PROT_R, MAP_PRIV | MAP_AN | MAP_FIX, -1, 0));
	ok(d.verdict == MV_V_ALLOW && d.grow == 28 * MiB, "MAP_FIXED replacement counted exactly");
	d = run(p, call(MV_SC_mmap, 0x10000000, 38 * MiB + 1, PROT_R, MAP_PRIV | MAP_AN | MAP_FIX, -1, 0));
	ok(d.verdict == MV_V_DENY, "MAP_FIXED one byte over");
	d = run(p, call(MV_SC_mmap, 0x10000000, 38 * MiB, PROT_R, MAP_PRIV | MAP_AN | MAP_FIX | 0x100000, -1, 0));
	ok(d.verdict == MV_V_DENY, "MAP_FIXED_NOREPLACE replaces nothing");
	F.range.mapped = 0;
	/* mremap: growth is new - old. */
	d = run(p, call(MV_SC_mremap, 0x1000, MiB, 29 * MiB, 1, 0, 0));
	ok(d.verdict == MV_V_ALLOW, "mremap growing to exactly the limit");
	d = run(p, call(MV_SC_mremap, 0x1000, MiB, 29 * MiB + 1, 1, 0, 0));
	ok(d.verdict == MV_V_DENY, "mremap one byte over");
	d = run(p, call(MV_SC_mremap, 0x1000, 200 * MiB, MiB, 1, 0, 0));
	ok(d.verdict == MV_V_ALLOW, "mremap shrinking is never refused");
	d = run(p, call(MV_SC_mremap, 0x1000, 20 * MiB, 20 * MiB, 5, 0x80000000, 0));
	ok(d.verdict == MV_V_ALLOW && d.grow == 20 * MiB, "MREMAP_DONTUNMAP keeps the old range: grows by its size");
	d = run(p, call(MV_SC_mremap, 0x1000, 29 * MiB, 29 * MiB, 5, 0x80000000, 0));
	ok(d.verdict == MV_V_DENY, "MREMAP_DONTUNMAP over the limit");
	/* brk: growth over the current heap end. */
	F.start_brk = 0x1000000;
	F.heap_end = 0x1000000 + 4 * MiB;
	d = run(p, call(MV_SC_brk, 0x1000000 + 32 * MiB, 0, 0, 0, 0, 0));
	ok(d.verdict == MV_V_ALLOW && d.grow == 28 * MiB, "brk growing to exactly the limit");
	d = run(p, call(MV_SC_brk, 0x1000000 + 32 * MiB + 1, 0, 0, 0, 0, 0));
	ok(d.verdict == MV_V_DENY, "brk one byte over");
	d = run(p, call(MV_SC_brk, 0x1000000, 0, 0, 0, 0, 0));
	ok(d.verdict == MV_V_ALLOW && d.grow == 0, "brk shrinking");
	d = run(p, call(MV_SC_brk, 0x1000000 + 64 * MiB, 0, 0, 0, 0, 0));
	ok(d.verdict == MV_V_DENY && d.emulate && d.val == 0x1000000 + 4 * MiB,
	   "a refused brk returns the unchanged break (the heap's end), not an errno");
	/* The rlimit that enforces it cannot be lifted. */
	d = run(p, call(MV_SC_prlimit64, 0, 9, 0x7fff0000, 0, 0, 0));
	ok(VERDICT(d, MV_V_DENY, EPERM, "limits.max_mapped"), "prlimit64(RLIMIT_AS, new) refused");
	d = run(p, call(MV_SC_prlimit64, 0, 9, 0, 0x7fff0000, 0, 0));
	ok(d.verdict == MV_V_ALLOW, "reading RLIMIT_AS allowed");
	d = run(p, call(MV_SC_setrlimit, 9, 0x7fff0000, 0, 0, 0, 0));
	ok(d.verdict == MV_V_DENY, "setrlimit(RLIMIT_AS) refused");
	d = run(p, call(MV_SC_setrlimit, 7, 0x7fff0000, 0, 0, 0, 0));
	ok(d.verdict == MV_V_ALLOW, "other rlimits allowed");
	policy_free(p);

	/* A limit that is not a whole number of pages counts whole pages, as
	 * RLIMIT_AS does. */
	p = load("{\"version\": 1, \"limits\": {\"max_mapped\": 134221823}}"); /* 128M + 4095 */
	reset();
	F.vm = 100 * MiB;
	d = run(p, call(MV_SC_mmap, 0, 28 * MiB + 1, PROT_R, MAP_PRIV | MAP_AN, -1, 0));
	ok(d.verdict == MV_V_DENY, "a partial page of limit does not count");
	policy_free(p);
}

static void test_max_mapping_regions_tree(void)
{
	struct policy *p = load("{\"version\": 1, \"limits\": {\"max_mapping\": \"1M\", \"max_regions\": 100, "
				"\"max_mapped_tree\": \"1G\"}}");
	struct pol_decision d;
	reset();
	F.regions_est = F.regions_exact = 10;
	d = run(p, call(MV_SC_mmap, 0, MiB, PROT_R, MAP_PRIV | MAP_AN, -1, 0));
	ok(d.verdict == MV_V_ALLOW && d.grow_regions == 1, "max_mapping: exactly the limit");
	d = run(p, call(MV_SC_mmap, 0, MiB + 1, PROT_R, MAP_PRIV | MAP_AN, -1, 0));
	ok(VERDICT(d, MV_V_DENY, ENOMEM, "limits.max_mapping"), "max_mapping: one byte over");
	d = run(p, call(MV_SC_mremap, 0x1000, 4096, MiB + 1, 1, 0, 0));
	ok(d.verdict == MV_V_DENY, "max_mapping applies to mremap's new size");
	F.shm = 2 * MiB;
	d = run(p, call(MV_SC_shmat, 1, 0, 0, 0, 0, 0));
	ok(d.verdict == MV_V_DENY, "max_mapping applies to shmat's segment");

	F.regions_est = 98;
	F.exact_reads = 0;
	d = run(p, call(MV_SC_mprotect, 0x1000, 4096, PROT_R, 0, 0, 0));
	ok(d.verdict == MV_V_ALLOW && d.grow_regions == 2 && F.exact_reads == 0,
	   "max_regions: an estimate that fits needs no exact count");
	F.regions_est = 99;
	F.regions_exact = 98;
	d = run(p, call(MV_SC_mprotect, 0x1000, 4096, PROT_R, 0, 0, 0));
	ok(d.verdict == MV_V_ALLOW && F.exact_reads == 1, "max_regions: the exact count decides near the limit");
	F.regions_exact = 99;
	d = run(p, call(MV_SC_mprotect, 0x1000, 4096, PROT_R, 0, 0, 0));
	ok(VERDICT(d, MV_V_DENY, ENOMEM, "limits.max_regions"), "max_regions: a possible split over the limit");
	d = run(p, call(MV_SC_madvise, 0x1000, 4096, 4, 0, 0, 0));
	ok(d.verdict == MV_V_ALLOW, "MADV_DONTNEED splits nothing");
	d = run(p, call(MV_SC_madvise, 0x1000, 4096, 14, 0, 0, 0));
	ok(d.verdict == MV_V_DENY, "MADV_HUGEPAGE may split");

	reset();
	F.vm = 300 * MiB;
	F.tree_est = F.tree_exact = 1000 * MiB;
	d = run(p, call(MV_SC_mmap, 0, 24 * MiB, PROT_R, MAP_PRIV | MAP_AN, -1, 0));
	ok(VERDICT(d, MV_V_DENY, ENOMEM, "limits.max_mapping"), "max_mapping checked before the tree");
	d = run(p, call(MV_SC_brk, 0, 0, 0, 0, 0, 0));
	ok(d.verdict == MV_V_ALLOW, "brk(0) asks for nothing");
	F.start_brk = 0x1000000;
	F.heap_end = 0x1000000;
	d = run(p, call(MV_SC_brk, 0x1000000 + 24 * MiB, 0, 0, 0, 0, 0));
	ok(d.verdict == MV_V_ALLOW && d.grow_tree == 24 * MiB, "tree: exactly the limit");
	d = run(p, call(MV_SC_brk, 0x1000000 + 24 * MiB + 1, 0, 0, 0, 0, 0));
	ok(VERDICT(d, MV_V_DENY, ENOMEM, "limits.max_mapped_tree"), "tree: one byte over");
	F.tree_est = 1010 * MiB; /* stale: something was unmapped */
	F.exact_reads = 0;
	d = run(p, call(MV_SC_brk, 0x1000000 + 24 * MiB, 0, 0, 0, 0, 0));
	ok(d.verdict == MV_V_ALLOW && F.exact_reads == 1, "tree: a stale estimate is reconciled, not trusted");
	d = run(p, call(MV_SC_fork, 0, 0, 0, 0, 0, 0));
	ok(d.verdict == MV_V_DENY, "tree: a fork copies the parent (300M) and does not fit");
	F.vm = 24 * MiB;
	d = run(p, call(MV_SC_clone, 0x11 /* SIGCHLD */, 0, 0, 0, 0, 0));
	ok(d.verdict == MV_V_ALLOW && d.fork && d.grow_tree == 24 * MiB, "tree: a fork that fits is reserved");
	F.vm = 300 * MiB;
	d = run(p, call(MV_SC_clone, 0x3d0f00 /* pthread_create: CLONE_VM|... */, 0, 0, 0, 0, 0));
	ok(d.verdict == MV_V_ALLOW && !d.grow_tree, "tree: a thread adds nothing");
	d = run(p, call(MV_SC_clone3, 0x7fff0000, 88, 0, 0, 0, 0));
	ok(VERDICT(d, MV_V_DENY, ENOSYS, "limits.max_mapped_tree"), "tree: clone3 gets ENOSYS (flags in memory)");
	policy_free(p);
}

int main(void)
{
	syscalls_init();
	test_rules();
	test_wx();
	test_max_mapped();
	test_max_mapping_regions_tree();
	return tap_done();
}
