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
	if (n == 0 || n % sizeof(struct sock_filter) || n / sizeof(struct sock_filter) > BPF_MAXINSNS)
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

int filter_build(struct sock_fprog *out)
{
	_cleanup_(ctx_release) scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
	if (!ctx)
		return -ENOMEM;
	int rc;
	/* The launcher sets NO_NEW_PRIVS itself, before loading. */
	if ((rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0)) < 0)
		return rc;
	/* A binary tree of syscall numbers instead of a linear chain. */
	(void)seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);
	if ((rc = seccomp_arch_add(ctx, SCMP_ARCH_X86)) < 0 && rc != -EEXIST)
		return rc;
	if ((rc = seccomp_arch_add(ctx, SCMP_ARCH_X32)) < 0 && rc != -EEXIST)
		return rc;
	for (int sc = 0; sc < MV_SC_COUNT; sc++) {
		/* A negative (pseudo) number stands for a call the native ABI
		 * lacks; libseccomp adds it to the ABIs that have it. */
		int nr = seccomp_syscall_resolve_name(syscalls_name((enum mv_sc)sc));
		if (nr == __NR_SCMP_ERROR)
			return -ENOSYS;
		rc = seccomp_rule_add(ctx, SCMP_ACT_NOTIFY, nr, 0);
		if (rc < 0)
			return rc;
	}
	return export_to_memory(ctx, out);
}

void filter_free(struct sock_fprog *prog)
{
	free(prog->filter);
	prog->filter = NULL;
	prog->len = 0;
}
