/* Unit tests of state/: /proc parsers, the maps parser, residency,
 * provenance matching, the process table, call accounting. */
#include "common/util.h"
#include "state/as.h"
#include "state/call.h"
#include "state/proc.h"
#include "state/procparse.h"
#include "tests/unit/tap.h"

#include <string.h>
#include <sys/mman.h>
#include <sys/sysmacros.h>

static void test_procparse(void)
{
	struct proc_status st;
	const char *status = "Name:\tpython3\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t4242\n"
			     "Ngid:\t0\nPid:\t4243\nPPid:\t4000\nVmSize:\t  10240 kB\nVmRSS:\t   2048 kB\n"
			     "Threads:\t3\nSigIgn:\t0000000000001000\nSigCgt:\t0000000180004a02\n"
			     "Seccomp:\t2\nSeccomp_filters:\t3\n";
	ok(parse_status(status, &st) == 0, "status parses");
	is_u64(st.tgid, 4242, "Tgid");
	is_u64(st.ppid, 4000, "PPid");
	is_u64(st.threads, 3, "Threads");
	is_u64(st.vm_size, 10240 * 1024, "VmSize in bytes");
	is_u64(st.seccomp, 2, "Seccomp");
	is_u64(st.seccomp_filters, 3, "Seccomp_filters");
	is_u64(st.sig_ign, 0x1000, "SigIgn: SIGPIPE");
	is_u64(st.sig_cgt, 0x180004a02ull, "SigCgt");
	ok(strcmp(st.name, "python3") == 0, "Name");
	ok(parse_status("Name:\tx\n", &st) == -EINVAL, "status without Tgid refused");

	struct proc_stat ps;
	/* A comm with spaces and parentheses. */
	const char *stat = "4242 (a b) c)) S 4000 4242 4000 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 3 0 "
			   "5555 10485760 512 18446744073709551615 94000 95000 140000 0 0 0 0 0 0 0 0 0 17 1 "
			   "0 0 0 0 0 96000 97000 98000 140100 140200 140300 140400 0\n";
	ok(parse_stat(stat, &ps) == 0, "stat parses");
	is_u64(ps.pid, 4242, "pid");
	ok(ps.state == 'S', "state");
	is_u64(ps.ppid, 4000, "ppid after a comm with ')'");
	is_u64(ps.num_threads, 3, "threads");
	is_u64(ps.start_ticks, 5555, "start time");
	is_u64(ps.vsize, 10485760, "vsize");
	is_u64(ps.start_code, 94000, "start_code");
	is_u64(ps.start_stack, 140000, "start_stack");
	is_u64(ps.start_brk, 98000, "start_brk");
	is_u64(ps.arg_start, 140100, "arg_start");
	ok(parse_stat("garbage", &ps) == -EINVAL, "garbage refused");
}

static const char *maps_text =
	"55d0c0a00000-55d0c0a01000 r--p 00000000 fe:00 1234                       /usr/bin/prog\n"
	"55d0c0a01000-55d0c0a02000 r-xp 00001000 fe:00 1234                       /usr/bin/prog\n"
	"55d0c1000000-55d0c1021000 rw-p 00000000 00:00 0                          [heap]\n"
	"7f0000000000-7f0040000000 rw-p 00000000 00:00 0 \n"
	"7f0040000000-7f0040004000 ---p 00000000 00:00 0\n"
	"7f0040004000-7f0040014000 rw-s 00000000 00:01 77                         /dev/zero (deleted)\n"
	"7f0040014000-7f0040018000 rw-s 00000000 00:01 78                         /memfd:buf (deleted)\n"
	"7f0040018000-7f004001c000 rw-p 00002000 fe:00 99                         /tmp/with space (deleted)\n"
	"7f004001c000-7f004001d000 r--p 00000000 00:00 0                          [anon:named]\n"
	"7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0                          [stack]\n"
	"7ffd00100000-7ffd00104000 r--p 00000000 00:00 0                          [vvar]\n"
	"7ffd00104000-7ffd00106000 r-xp 00000000 00:00 0                          [vdso]\n"
	"ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]\n";

static void test_maps(void)
{
	struct as_model m;
	as_model_init(&m);
	ok(as_parse_maps(maps_text, &m) == 0, "maps parse");
	is_u64(m.n, 13, "13 regions");
	ok(m.r[0].start == 0x55d0c0a00000 && m.r[0].end == 0x55d0c0a01000, "bounds");
	ok(m.r[1].prot == (AS_PROT_READ | AS_PROT_EXEC) && !m.r[1].shared, "r-xp");
	is_u64(m.r[1].offset, 0x1000, "offset");
	is_u64(m.r[1].inode, 1234, "inode");
	ok(m.r[1].dev_major == 0xfe && m.r[1].dev_minor == 0, "dev");
	ok(m.r[0].kind == AS_FILE, "file");
	ok(m.r[2].kind == AS_HEAP, "heap");
	ok(m.r[3].kind == AS_ANON && m.r[3].path == NULL, "anon, trailing space ignored");
	ok(m.r[4].prot == 0 && m.r[4].kind == AS_ANON, "PROT_NONE guard");
	ok(m.r[5].kind == AS_SHMEM && m.r[5].shared, "shared anonymous is shmem");
	ok(m.r[6].kind == AS_SHMEM, "memfd is shmem");
	ok(m.r[7].kind == AS_FILE && strcmp(m.r[7].path, "/tmp/with space (deleted)") == 0, "path with a space");
	ok(m.r[8].kind == AS_ANON, "named anonymous");
	ok(m.r[9].kind == AS_STACK, "stack");
	ok(m.r[10].kind == AS_VVAR && m.r[11].kind == AS_VDSO && m.r[12].kind == AS_VSYSCALL, "specials");
	is_u64(m.mapped, 0x1000 + 0x1000 + 0x21000 + 0x40000000 + 0x4000 + 0x10000 + 0x4000 + 0x4000 + 0x1000 +
				 0x21000 + 0x4000 + 0x2000 + 0x1000,
	       "mapped total");
	ok(as_find(&m, 0x7f0040004100) == 5, "find inside");
	ok(as_find(&m, 0x7f0040004000) == 5, "find at start");
	ok(as_find(&m, 0x7f0040014000 - 1) == 5, "find at last byte");
	ok(as_find(&m, 0x1000) == -1, "find in a hole");

	/* Residency: runs spanning region boundaries are split. */
	struct as_range runs[] = {
		{0x55d0c0a00000, 0x55d0c0a02000},     /* both program pages */
		{0x7f003ffff000, 0x7f0040001000},     /* last anon page and first guard page */
		{0x7ffd00000000, 0x7ffd00003000},     /* 3 stack pages */
	};
	as_apply_resident(&m, runs, ARRAY_SIZE(runs));
	is_u64(m.r[0].committed, 4096, "committed region 0");
	is_u64(m.r[1].committed, 4096, "committed region 1");
	is_u64(m.r[3].committed, 4096, "committed anon tail");
	is_u64(m.r[4].committed, 4096, "committed guard head");
	is_u64(m.r[9].committed, 3 * 4096, "committed stack");
	is_u64(m.committed, 7 * 4096, "committed total");

	struct as_model bad;
	as_model_init(&bad);
	ok(as_parse_maps("zzz-1 rw-p\n", &bad) == -EINVAL, "bad line refused");
	ok(as_parse_maps("2000-1000 rw-p 0 00:00 0\n", &bad) == -EINVAL, "start >= end refused");
	as_model_free(&bad);
	as_model_free(&m);
}

static void region(struct as_model *m, uint64_t s, uint64_t e, uint8_t prot, enum as_kind k)
{
	struct as_region r;
	memset(&r, 0, sizeof(r));
	r.start = s;
	r.end = e;
	r.prot = prot;
	r.kind = k;
	as_model_push(m, &r);
}

static void test_provenance(void)
{
	struct as_log log;
	memset(&log, 0, sizeof(log));
	uint64_t a_mmap[6] = {0, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, (uint64_t)-1, 0};
	uint64_t a_fixed[6] = {0x7000000, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, (uint64_t)-1, 0};
	uint64_t a_prot[6] = {0x5001000, 4096, PROT_NONE, 0, 0, 0};
	uint64_t a_read[6] = {3, 0, 0, 0, 0, 0};
	as_log_call(&log, MV_SC_mmap, a_mmap, 100);
	as_log_call(&log, MV_SC_mmap, a_fixed, 200);
	as_log_call(&log, MV_SC_execve, a_read, 250); /* not a layout call: not logged */
	is_u64(log.count, 2, "only layout calls are logged");

	/* One 8 KiB anon region somewhere, one fixed page, one old region. */
	struct as_model old, fresh;
	as_model_init(&old);
	as_model_init(&fresh);
	region(&old, 0x1000000, 0x1002000, AS_PROT_READ, AS_ANON);
	old.r[0].created = (struct as_origin){MV_SC_brk, 50};
	region(&fresh, 0x1000000, 0x1002000, AS_PROT_READ, AS_ANON);
	region(&fresh, 0x6000000, 0x6002000, AS_PROT_READ | AS_PROT_WRITE, AS_ANON);
	region(&fresh, 0x7000000, 0x7001000, AS_PROT_READ, AS_ANON);
	as_provenance(&fresh, &old, &log, 0, NULL);
	ok(fresh.r[0].created.sc == MV_SC_brk && fresh.r[0].created.time_ns == 50, "carried from the old snapshot");
	ok(fresh.r[1].created.sc == MV_SC_mmap && fresh.r[1].created.time_ns == 100, "matched by size and prot");
	ok(fresh.r[2].created.sc == MV_SC_mmap && fresh.r[2].created.time_ns == 200, "matched by fixed address");

	/* A mapping split by mprotect: the pieces share its origin. */
	as_log_clear(&log);
	uint64_t a_three[6] = {0, 3 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, (uint64_t)-1, 0};
	as_log_call(&log, MV_SC_mmap, a_three, 300);
	as_log_call(&log, MV_SC_mprotect, a_prot, 310);
	struct as_model split;
	as_model_init(&split);
	region(&split, 0x5000000, 0x5001000, AS_PROT_READ | AS_PROT_WRITE, AS_ANON);
	region(&split, 0x5001000, 0x5002000, 0, AS_ANON);
	region(&split, 0x5002000, 0x5003000, AS_PROT_READ | AS_PROT_WRITE, AS_ANON);
	as_provenance(&split, NULL, &log, 0, NULL);
	ok(split.r[0].created.sc == MV_SC_mmap && split.r[1].created.sc == MV_SC_mmap &&
		   split.r[2].created.sc == MV_SC_mmap,
	   "pieces of a split mapping all come from its mmap");
	ok(split.r[1].changed.sc == MV_SC_mprotect && split.r[1].changed.time_ns == 310, "the mprotect changed the middle");
	ok(split.r[0].changed.sc == MV_SC_UNKNOWN, "the outer pieces were not changed");

	/* After an exec: specials and the program's own file are the exec's. */
	as_log_clear(&log);
	struct as_model ex;
	as_model_init(&ex);
	region(&ex, 0x400000, 0x401000, AS_PROT_READ, AS_FILE);
	ex.r[0].path = xstrdup("/bin/prog");
	region(&ex, 0x401000, 0x403000, AS_PROT_READ | AS_PROT_WRITE, AS_ANON);
	region(&ex, 0x7ffd0000, 0x7ffd1000, AS_PROT_READ | AS_PROT_WRITE, AS_STACK);
	region(&ex, 0x7f0000000000, 0x7f0100000000, AS_PROT_READ | AS_PROT_WRITE, AS_ANON);
	as_provenance(&ex, NULL, &log, 999, "/bin/prog");
	ok(ex.r[0].created.sc == MV_SC_execve && ex.r[0].created.time_ns == 999, "program file from exec");
	ok(ex.r[1].created.sc == MV_SC_execve, "its bss, right after it, from exec");
	ok(ex.r[2].created.sc == MV_SC_execve, "stack from exec");
	ok(ex.r[3].created.sc == MV_SC_UNKNOWN && ex.r[3].created.time_ns == 0,
	   "an unmatched region after exec: unknown, not the exec's");

	/* The ring keeps the newest AS_LOG_SIZE calls. */
	as_log_clear(&log);
	for (int i = 0; i < AS_LOG_SIZE + 10; i++)
		as_log_call(&log, MV_SC_munmap, a_prot, (uint64_t)i);
	is_u64(log.count, AS_LOG_SIZE, "ring holds its size");
	is_u64(log.lost, 10, "overflow counted");

	as_model_free(&old);
	as_model_free(&fresh);
	as_model_free(&split);
	as_model_free(&ex);
}

static void test_proctab(void)
{
	struct proctab t;
	proctab_init(&t, 2);
	struct proc *a = proctab_add(&t, 100, 1);
	struct proc *b = proctab_add(&t, 200, 100);
	proctab_add_thread(&t, a, 101);
	proctab_add_thread(&t, a, 102);
	ok(proctab_by_tid(&t, 100) == a, "leader found");
	ok(proctab_by_tid(&t, 102) == a, "thread found");
	ok(proctab_by_tid(&t, 201) == NULL, "unknown thread");
	is_u64(proctab_running(&t), 2, "two running");
	a->stats.calls[MV_SC_mmap][MV_V_ALLOW] = 5;
	proctab_exit(&t, a, 1);
	ok(proctab_by_tid(&t, 101) == NULL, "threads forgotten at exit");
	is_u64(t.n_exited, 1, "kept in the exited list");
	/* A new process may reuse a tid that was a thread. */
	struct proc *c = proctab_add(&t, 102, 1);
	ok(proctab_by_tid(&t, 102) == c, "reused id belongs to the new process");
	proctab_exit(&t, b, 2);
	struct proc *d = proctab_add(&t, 300, 1);
	d->stats.calls[MV_SC_brk][MV_V_DENY] = 7;
	proctab_exit(&t, c, 3);
	proctab_exit(&t, d, 4);
	is_u64(t.n_exited, 2, "exited list bounded");
	is_u64(t.n_folded, 2, "the rest folded");
	is_u64(t.folded.calls[MV_SC_brk][MV_V_DENY], 7, "folded counters kept");
	is_u64(t.n_seen, 4, "every process seen is counted");
	struct proc *e = proctab_add(&t, 400, 1);
	e->stats.calls[MV_SC_brk][MV_V_DENY] = 1;
	size_t n = 0;
	struct proc *it;
	for (size_t i = 0; (it = proctab_next_all(&t, &i));)
		n++;
	is_u64(n, 3, "next_all visits the exited and the running");
	struct proc_stats tot;
	memset(&tot, 0, sizeof(tot));
	proctab_totals(&t, &tot);
	is_u64(tot.calls[MV_SC_brk][MV_V_DENY], 8, "totals include folded, exited and running");
	is_u64(tot.calls[MV_SC_mmap][MV_V_ALLOW], 5, "totals include the exited");
	/* An answer timed after its process exited still counts (the
	 * storm tests found such times lost). */
	ok(proctab_stats_of(&t, 400) == &e->stats, "stats_of: a running process");
	ok(proctab_stats_of(&t, 100) == &a->stats, "stats_of: an exited process");
	ok(proctab_stats_of(&t, 300) == &t.folded, "stats_of: a folded process");
	ok(a->aslog == NULL && a->model.n == 0, "an exited process keeps no model or call log");
	/* A decision finds its caller again by pid and first sight. */
	e->seen_ns = 44;
	ok(proctab_find(&t, 400, 44) == e, "find: the running process");
	ok(proctab_find(&t, 400, 45) == NULL, "find: another process of that pid is not it");
	ok(proctab_find(&t, 100, a->seen_ns) == a, "find: an exited process still kept");
	ok(proctab_find(&t, 300, 0) == NULL, "find: a folded process is gone");
	proctab_free(&t);
}

/* seq tells apart the records a pid does not: an exit status asked for
 * later must find the record it was asked for. */
static void test_proctab_seq(void)
{
	struct proctab t;
	proctab_init(&t, 8);
	struct proc *a = proctab_add(&t, 100, 1);
	struct proc *b = proctab_add(&t, 200, 1);
	proctab_exit(&t, a, 1);
	struct proc *a2 = proctab_add(&t, 100, 1);
	ok(a->seq == 1 && b->seq == 2 && a2->seq == 3, "each record has its own seq");
	ok(a2->seq != a->seq && a2->pid == a->pid, "a reused pid gets a new seq");
	proctab_free(&t);
}

static void test_call_bytes(void)
{
	struct mv_call c;
	memset(&c, 0, sizeof(c));
	uint64_t brk = 0;
	c.sc = MV_SC_mmap;
	c.args[1] = 12345;
	is_u64(call_bytes_asked(&c, &brk), 12345, "mmap length");
	c.abi = MV_ABI_I386;
	is_u64(call_bytes_asked(&c, &brk), 0, "i386 old mmap: arguments in memory");
	c.abi = MV_ABI_X86_64;
	c.sc = MV_SC_mremap;
	c.args[2] = 8192;
	is_u64(call_bytes_asked(&c, &brk), 8192, "mremap new length");
	c.sc = MV_SC_brk;
	c.args[0] = 0;
	is_u64(call_bytes_asked(&c, &brk), 0, "brk(0) asks nothing");
	c.args[0] = 0x10000;
	is_u64(call_bytes_asked(&c, &brk), 0, "first brk: base unknown");
	c.args[0] = 0x14000;
	is_u64(call_bytes_asked(&c, &brk), 0x4000, "brk growth");
	c.args[0] = 0x12000;
	is_u64(call_bytes_asked(&c, &brk), 0, "brk shrink asks nothing");
	is_u64(brk, 0x12000, "break tracked");
}

/* smaps VmFlags: dc (MADV_DONTFORK) and wf (MADV_WIPEONFORK) regions. */
static void test_fork_flags(void)
{
	const char *smaps =
	    "7f0000000000-7f0000100000 rw-p 00000000 00:00 0 \n"
	    "Size:               1024 kB\nRss:                   0 kB\n"
	    "VmFlags: rd wr mr mw me ac sd \n"
	    "7f0000100000-7f0000200000 rw-p 00000000 00:00 0 \n"
	    "Size:               1024 kB\n"
	    "VmFlags: rd wr mr mw me dc ac sd\n"
	    "7f0000200000-7f0000300000 rw-p 00000000 00:00 0 \n"
	    "VmFlags: rd wr mr mw me dc ac sd\n"
	    "7f0000400000-7f0000500000 rw-p 00000000 00:00 0 \n"
	    "VmFlags: rd wr mr mw me ac wf\n"
	    "7f0000600000-7f0000700000 rw-p 00000000 00:00 0 [stack]\n"
	    "VmFlags: rd wr mr mw me gd ac wfx dcx\n";
	struct as_range *dc, *wf;
	size_t ndc, nwf;
	ok(parse_fork_flags(smaps, &dc, &ndc, &wf, &nwf) == 0, "smaps parses");
	is_u64(ndc, 1, "two adjacent dc regions make one range");
	if (ndc == 1) {
		is_u64(dc[0].start, 0x7f0000100000, "dc start");
		is_u64(dc[0].end, 0x7f0000300000, "dc end");
	}
	is_u64(nwf, 1, "one wf region (a flag is two letters, not a prefix)");
	if (nwf == 1)
		is_u64(wf[0].start, 0x7f0000400000, "wf start");
	free(dc);
	free(wf);
	ok(parse_fork_flags("", &dc, &ndc, &wf, &nwf) == 0 && !ndc && !nwf, "empty smaps");
	ok(parse_fork_flags("garbage\n", &dc, &ndc, &wf, &nwf) == -EINVAL, "not smaps refused");
}

static void test_procparse_small(void)
{
	struct proc_status st;
	ok(parse_status("Name:\tx\nTgid:\t7\nPPid:\t1\nTracerPid:\t4321\nThreads:\t1\n", &st) == 0 &&
	       st.tracer_pid == 4321,
	   "TracerPid");
	ok(parse_status("Tgid:\t7\nPPid:\t1\nThreads:\t1\n", &st) == 0 && st.tracer_pid == 0,
	   "no TracerPid: 0");

	uint64_t size, rss;
	ok(parse_statm("2625 420 368 1 0 244 0\n", &size, &rss) == 0 && size == 2625 && rss == 420,
	   "statm size and resident");
	ok(parse_statm("", &size, &rss) == -EINVAL, "empty statm refused");
	ok(parse_statm("12\n", &size, &rss) == -EINVAL, "statm without resident refused");

	pid_t *v = NULL;
	size_t n = 0, cap = 0;
	parse_pids("101 102 \n", &v, &n, &cap);
	parse_pids("", &v, &n, &cap);
	parse_pids("7", &v, &n, &cap);
	ok(n == 3 && v[0] == 101 && v[1] == 102 && v[2] == 7, "children appended");
	free(v);

	unsigned long flags = 0;
	ok(parse_fdinfo_flags("pos:\t0\nflags:\t0100002\nmnt_id:\t15\n", &flags) == 0 &&
	       flags == 0100002,
	   "fdinfo flags are octal");
	ok(parse_fdinfo_flags("pos:\t0\n", &flags) == -EINVAL, "fdinfo without flags refused");
}

struct collect {
	uint64_t start[16];
	size_t n, stop_after;
};

static int collect_vma(void *arg, const struct proc_vma *v)
{
	struct collect *c = arg;
	c->start[c->n++] = v->start;
	return c->n == c->stop_after ? 1 : 0;
}

static int fail_vma(void *arg, const struct proc_vma *v)
{
	return -E2BIG;
}

static void test_maps_line(void)
{
	const char *line = "7f0040014000-7f0040018000 rw-s 00003000 fd:01 78   /memfd:buf (deleted)\n";
	struct proc_vma v;
	ok(parse_maps_line(line, strchr(line, '\n'), &v) == 0, "maps line parses");
	ok(v.start == 0x7f0040014000 && v.end == 0x7f0040018000 && v.offset == 0x3000, "bounds");
	ok(v.r && v.w && !v.x && v.shared, "perms");
	ok(v.dev_major == 0xfd && v.dev_minor == 1 && v.inode == 78, "device and inode");
	ok(proc_vma_dev(&v) == makedev(0xfd, 1), "device number");
	ok(proc_vma_named(&v, "/memfd:buf (deleted)"), "name up to the line's end");
	ok(!proc_vma_named(&v, "/memfd:buf"), "named: the whole name");
	ok(proc_vma_name_starts(&v, "/memfd:") && !proc_vma_name_starts(&v, "/SYSV"), "prefix");
	ok(proc_vma_anon(&v), "a memfd is anonymous memory");

	line = "55d0c0a00000-55d0c0a01000 r-xp 00000000 fe:00 1234 /usr/bin/prog";
	ok(parse_maps_line(line, line + strlen(line), &v) == 0 && !proc_vma_anon(&v) && v.x,
	   "a program file is not anonymous");
	line = "7f0000000000-7f0000001000 ---p 00000000 00:00 0";
	ok(parse_maps_line(line, line + strlen(line), &v) == 0 && v.name_len == 0 &&
	       proc_vma_anon(&v) && !v.r,
	   "anonymous, no name");
	line = "1000-\n2000 rw-p 00000000 00:00 0\n";
	ok(parse_maps_line(line, strchr(line, '\n'), &v) == -EINVAL, "a field never runs past its line");
	line = "1000-2000 rw-p 0 00:00\n";
	ok(parse_maps_line(line, strchr(line, '\n'), &v) == -EINVAL, "no inode refused");

	/* The walk: regions overlapping [start, end), in order. */
	struct collect c = {.stop_after = 99};
	ok(parse_maps(maps_text, 0x55d0c0a01000, 0x7f0040000000, collect_vma, &c) == 0, "walk");
	ok(c.n == 3 && c.start[0] == 0x55d0c0a01000 && c.start[2] == 0x7f0000000000,
	   "the regions overlapping the range, not those touching its ends");
	c = (struct collect){.stop_after = 2};
	ok(parse_maps(maps_text, 0, UINT64_MAX, collect_vma, &c) == 0 && c.n == 2,
	   "a positive return stops the walk");
	ok(parse_maps(maps_text, 0, UINT64_MAX, fail_vma, NULL) == -E2BIG, "an error stops it");
	c = (struct collect){.stop_after = 99};
	ok(parse_maps("1000-2000 rw-p 0 00:00 0\nzzz\n", 0, UINT64_MAX, collect_vma, &c) == -EINVAL &&
	       c.n == 1,
	   "a bad line ends the walk with -EINVAL");
	c = (struct collect){.stop_after = 99};
	ok(parse_maps("1000-2000 rw-p 0 00:00 0\nzzz\n", 0, 0x1000, collect_vma, &c) == 0 && c.n == 0,
	   "nothing past the range is parsed");
}

static void test_smaps_rss(void)
{
	const char *smaps = "1000-3000 rw-p 00000000 00:00 0 \n"
			    "Size:                  8 kB\nRss:                   4 kB\n"
			    "VmFlags: rd wr mr mw me ac sd\n"
			    "5000-6000 r--p 00000000 00:00 0 \n"
			    "Rss:                   4 kB\n"
			    "8000-a000 rw-p 00000000 00:00 0 [stack]\n"
			    "Size:                  8 kB\nRss:                   8 kB\n";
	struct as_model m;
	as_model_init(&m);
	ok(as_parse_maps("1000-3000 rw-p 0 00:00 0\n8000-a000 rw-p 0 00:00 0 [stack]\n", &m) == 0,
	   "model");
	ok(as_apply_smaps_rss(smaps, &m) == 0, "smaps Rss parses");
	ok(m.r[0].committed == 4096 && m.r[1].committed == 8192, "Rss of each region in bytes");
	is_u64(m.committed, 3 * 4096, "totals (a region the model lacks is ignored)");
	ok(as_apply_smaps_rss("garbage\n", &m) == -EINVAL, "not smaps refused");
	ok(as_apply_smaps_rss("", &m) == 0, "empty smaps");
	as_model_free(&m);
}

static void test_ranges_merge(void)
{
	struct as_range v[] = {{0x5000, 0x6000}, {0x1000, 0x2000}, {0x2000, 0x3000},
			       {0x5800, 0x7000}, {0x9000, 0xa000}};
	size_t n = as_ranges_merge(v, 5);
	is_u64(n, 3, "ranges merged: touching and overlapping ones become one");
	ok(v[0].start == 0x1000 && v[0].end == 0x3000, "touching ranges joined");
	ok(v[1].start == 0x5000 && v[1].end == 0x7000, "overlapping ranges joined");
	ok(v[2].start == 0x9000 && v[2].end == 0xa000, "a range apart stays");
	is_u64(as_ranges_merge(v, 0), 0, "no ranges");
}

static void test_uring_fdinfo(void)
{
	/* As Linux 6.18 prints it (io_uring/fdinfo.c). */
	const char *text = "pos:\t0\nflags:\t02000002\nSqMask:\t0x7\nSQEs:\t0\nCQEs:\t0\n"
			   "SqThread:\t-1\nUserFiles:\t2\n    0: /memfd:robust-x\\040(deleted)\n"
			   "    1: <none>\nUserBufs:\t2\n    0: 0x7f2653b87000/4096\n"
			   "    1: 0x7f2653b89000/100\nPollList:\nCqOverflowList:\n";
	struct uring_info u;
	ok(parse_uring_fdinfo(text, &u) == 0, "io_uring fdinfo parses");
	is_u64(u.n_bufs, 2, "UserBufs");
	is_u64(u.bufs_listed, 2, "both buffers listed");
	is_u64(u.bufs[0].start, 0x7f2653b87000ull, "buffer 0 address");
	is_u64(u.bufs[1].end - u.bufs[1].start, 100, "buffer 1 length");
	is_u64(u.files_listed, 2, "both files listed");
	ok(strcmp(u.files[0], "/memfd:robust-x (deleted)") == 0, "a file's escaped space");
	ok(strcmp(u.files[1], "<none>") == 0, "an empty slot");
	uring_info_free(&u);
	/* The tables are left out when the ring's lock was taken. */
	ok(parse_uring_fdinfo("UserFiles:\t3\nUserBufs:\t1\nPollList:\n", &u) == 0,
	   "counts without tables parse");
	ok(u.files_listed == 0 && u.n_files == 3 && u.bufs_listed == 0 && u.n_bufs == 1,
	   "short tables are told apart");
	uring_info_free(&u);
	ok(parse_uring_fdinfo("pos:\t0\nflags:\t0\n", &u) == -EINVAL, "not an io_uring");
	ok(parse_uring_fdinfo("UserBufs:\t99999999\n", &u) == -EINVAL, "an impossible count");
}

int main(void)
{
	syscalls_init();
	test_procparse();
	test_maps();
	test_provenance();
	test_proctab();
	test_proctab_seq();
	test_call_bytes();
	test_fork_flags();
	test_procparse_small();
	test_maps_line();
	test_smaps_rss();
	test_uring_fdinfo();
	test_ranges_merge();
	return tap_done();
}
