#include "policy/filter.h"
#include "common/syscalls.h"
#include "common/util.h"

#include <fcntl.h>
#include <seccomp.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

static void ctx_release(scmp_filter_ctx *ctx)
{
	if (*ctx)
		seccomp_release(*ctx);
}

/* libseccomp 2.5 can only export to an fd; read the program back from a
 * memfd (seccomp_export_bpf_mem arrives in 2.6). */
static int export_to_memory(scmp_filter_ctx ctx, struct sock_fprog *out)
{
	_cleanup_close_ int fd = memfd_create("memvisor-bpf", MFD_CLOEXEC);
	if (fd < 0)
		return -errno;
	int rc = seccomp_export_bpf(ctx, fd);
	if (rc < 0)
		return rc;
	struct stat st;
	if (fstat(fd, &st) < 0)
		return -errno;
	size_t n = (size_t)st.st_size;
	if (n == 0 || n % sizeof(struct sock_filter) ||
	    n / sizeof(struct sock_filter) > BPF_MAXINSNS)
		return -E2BIG;
	struct sock_filter *insns = xmalloc(n);
	if (pread(fd, insns, n, 0) != (ssize_t)n) {
		free(insns);
		return -EIO;
	}
	out->filter = insns;
	out->len = (unsigned short)(n / sizeof(struct sock_filter));
	return 0;
}

static const uint32_t abi_arch[MV_ABI_COUNT] = {SCMP_ARCH_X86_64, SCMP_ARCH_X86, SCMP_ARCH_X32};

static const enum scmp_compare ops[] = {
    [NEEDS_EQ] = SCMP_CMP_EQ,
    [NEEDS_NE] = SCMP_CMP_NE,
    [NEEDS_LT] = SCMP_CMP_LT,
    [NEEDS_LE] = SCMP_CMP_LE,
    [NEEDS_GT] = SCMP_CMP_GT,
    [NEEDS_GE] = SCMP_CMP_GE,
    [NEEDS_MASKED_EQ] = SCMP_CMP_MASKED_EQ,
};

/* A context for one ABI alone: every context merged must carry the same
 * attributes. */
static scmp_filter_ctx abi_ctx(enum mv_abi abi)
{
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
	if (!ctx)
		return NULL;
	/* The launcher sets NO_NEW_PRIVS itself, before loading. A binary
	 * tree of syscall numbers instead of a linear chain. */
	if (seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0) < 0 ||
	    seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2) < 0)
		goto fail;
	if (abi_arch[abi] != seccomp_arch_native()) {
		if (seccomp_arch_add(ctx, abi_arch[abi]) < 0 ||
		    seccomp_arch_remove(ctx, SCMP_ARCH_NATIVE) < 0)
			goto fail;
	}
	return ctx;
fail:
	seccomp_release(ctx);
	return NULL;
}

static int add_rules(scmp_filter_ctx ctx, const struct needs *n, enum mv_abi abi)
{
	for (int sc = 0; sc < MV_SC_COUNT; sc++) {
		const struct needs_sc *s = &n->sc[abi][sc];
		if (syscalls_nr((enum mv_sc)sc, abi) < 0)
			continue;
		/* libseccomp takes the native number (or its pseudo number for
		 * calls x86_64 lacks) and translates it by name for the ABI of
		 * the context; for i386 shmat it also adds ipc(SHMAT). */
		int nr = seccomp_syscall_resolve_name(syscalls_name((enum mv_sc)sc));
		/* A call newer than libseccomp (mseal before 2.6): its number
		 * can only be given to the native context, which needs no
		 * translation. The other ABIs cannot filter it (docs/policy.md). */
		if (nr == __NR_SCMP_ERROR && abi == MV_ABI_X86_64)
			nr = syscalls_nr((enum mv_sc)sc, abi);
		else if (nr == __NR_SCMP_ERROR)
			continue;
		if (s->all) {
			int rc = seccomp_rule_add(ctx, SCMP_ACT_NOTIFY, nr, 0);
			if (rc < 0)
				return rc;
			continue;
		}
		for (size_t i = 0; i < s->n; i++) {
			struct scmp_arg_cmp c[NEEDS_MAX_CMP];
			for (int k = 0; k < s->t[i].n; k++) {
				const struct needs_cmp *nc = &s->t[i].c[k];
				/* MASKED_EQ compares (arg & datum_a) == datum_b; the
				 * others compare with datum_a. */
				bool masked = nc->op == NEEDS_MASKED_EQ;
				c[k] = (struct scmp_arg_cmp){nc->arg, ops[nc->op],
							     masked ? nc->mask : nc->datum,
							     masked ? nc->datum : 0};
			}
			int rc = seccomp_rule_add_array(ctx, SCMP_ACT_NOTIFY, nr, s->t[i].n, c);
			if (rc < 0)
				return rc;
		}
	}
	return 0;
}

/* io_uring runs IORING_OP_MADVISE inside the kernel (io_uring/advise.c),
 * where no seccomp filter sees it: where madvise is notified, the whole
 * interface fails with EPERM, as with kernel.io_uring_disabled=2 (and
 * Docker's default seccomp profile). A ring received from elsewhere is
 * covered by refusing io_uring_enter too. */
static int refuse_io_uring(scmp_filter_ctx ctx, const struct needs *n)
{
	static const char *const calls[] = {"io_uring_setup", "io_uring_enter",
					    "io_uring_register"};
	if (!needs_refuse_io_uring(n))
		return 0;
	for (size_t i = 0; i < ARRAY_SIZE(calls); i++) {
		int nr = seccomp_syscall_resolve_name(calls[i]);
		if (nr == __NR_SCMP_ERROR)
			continue;
		int rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* The stop point (supervisor/supervise/point.h): call (with first
 * argument fd, unless fd < 0) and exit(2), exit_group(2) notified. The
 * descriptor is compared in its low 32 bits, as the kernel reads it. */
static int add_point(scmp_filter_ctx ctx, const char *call, int fd)
{
	if (!call)
		return 0;
	int nr = seccomp_syscall_resolve_name(call);
	if (nr == __NR_SCMP_ERROR)
		return -EINVAL;
	struct scmp_arg_cmp c = SCMP_A0(SCMP_CMP_MASKED_EQ, 0xffffffffu, (uint32_t)fd);
	int rc = fd < 0 ? seccomp_rule_add(ctx, SCMP_ACT_NOTIFY, nr, 0)
			: seccomp_rule_add_array(ctx, SCMP_ACT_NOTIFY, nr, 1, &c);
	if (rc == 0)
		rc = seccomp_rule_add(ctx, SCMP_ACT_NOTIFY, SCMP_SYS(exit), 0);
	if (rc == 0)
		rc = seccomp_rule_add(ctx, SCMP_ACT_NOTIFY, SCMP_SYS(exit_group), 0);
	return rc;
}

int filter_build(const struct needs *n, struct sock_fprog *out)
{
	return filter_build_point(n, NULL, -1, out);
}

int filter_build_point(const struct needs *n, const char *call, int fd, struct sock_fprog *out)
{
	_cleanup_(ctx_release) scmp_filter_ctx main = abi_ctx(MV_ABI_X86_64);
	if (!main)
		return -ENOMEM;
	int rc = add_rules(main, n, MV_ABI_X86_64);
	if (rc < 0 || (rc = refuse_io_uring(main, n)) < 0 || (rc = add_point(main, call, fd)) < 0)
		return rc;
	for (int abi = MV_ABI_I386; abi < MV_ABI_COUNT; abi++) {
		scmp_filter_ctx ctx = abi_ctx((enum mv_abi)abi);
		if (!ctx)
			return -ENOMEM;
		if ((rc = add_rules(ctx, n, (enum mv_abi)abi)) < 0 ||
		    (rc = refuse_io_uring(ctx, n)) < 0 || (rc = add_point(ctx, call, fd)) < 0 ||
		    (rc = seccomp_merge(main, ctx)) < 0) {
			seccomp_release(ctx);
			return rc;
		}
		/* seccomp_merge() took ctx. */
	}
	return export_to_memory(main, out);
}

void filter_free(struct sock_fprog *prog)
{
	free(prog->filter);
	prog->filter = NULL;
	prog->len = 0;
}
