/*
 * bypass — ways a program might try to get memory calls past a policy.
 *
 * Usage: bypass ATTEMPT
 *   x32-mmap             mmap(64 MiB, RW, private anonymous) by its x32
 *                        number (__X32_SYSCALL_BIT | 9)
 *   x32-mprotect-exec    mprotect(PROT_READ|PROT_EXEC) of anonymous memory
 *                        by its x32 number (__X32_SYSCALL_BIT | 10)
 *   pkey-mprotect-exec   pkey_mprotect(PROT_READ|PROT_EXEC, pkey -1) of
 *                        anonymous memory
 *   remap-file-pages     remap_file_pages of a shared memfd mapping
 *   mremap-exec          makes anonymous executable memory (mprotect RX),
 *                        prints "ready", waits for a line on stdin, then
 *                        mremaps it with MAYMOVE and with MAYMOVE|FIXED
 *   io-uring             io_uring_setup, then mmap of its SQ ring
 *   io-uring-madvise     MADV_DONTNEED of a written page through
 *                        IORING_OP_MADVISE ("... ok 0x1" when the page
 *                        was dropped)
 *   vm-writev-code       process_vm_writev into its own code
 *   map-shadow-stack     map_shadow_stack(64 MiB): a new mapping made
 *                        without mmap (EOPNOTSUPP on CPUs without user
 *                        shadow stacks, after the filter has decided)
 *
 * Each attempt prints "NAME ok RESULT" or "NAME errno N ENAME"; the exit
 * status is the errno of the last attempt (0 when it succeeded), 100 for a
 * usage error, 101 when a setup step failed.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/io_uring.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#ifndef __X32_SYSCALL_BIT
#define __X32_SYSCALL_BIT 0x40000000
#endif
#ifndef SYS_io_uring_setup
#define SYS_io_uring_setup 425
#endif

#define PAGE 4096UL

static int report(const char *name, long r)
{
	int err = r == -1 ? errno : 0;
	if (err) {
		const char *e = strerrorname_np(err);
		printf("%s errno %d %s\n", name, err, e ? e : "?");
	} else {
		printf("%s ok %#lx\n", name, (unsigned long)r);
	}
	fflush(stdout);
	return err > 255 ? 255 : err;
}

static void *setup_map(int prot, int flags, int fd)
{
	void *p = mmap(NULL, 2 * PAGE, prot, flags, fd, 0);
	if (p == MAP_FAILED) {
		fprintf(stderr, "bypass: setup mmap: %s\n", strerror(errno));
		exit(101);
	}
	return p;
}

static void *anon_rw(void)
{
	return setup_map(PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1);
}

static int x32_mmap(void)
{
	errno = 0;
	long r = syscall(__X32_SYSCALL_BIT | 9, 0, 64 << 20, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return report("x32-mmap", r);
}

static int x32_mprotect_exec(void)
{
	void *p = anon_rw();
	errno = 0;
	return report("x32-mprotect-exec", syscall(__X32_SYSCALL_BIT | 10, p, PAGE, PROT_READ | PROT_EXEC));
}

static int pkey_mprotect_exec(void)
{
	void *p = anon_rw();
	errno = 0;
	return report("pkey-mprotect-exec", syscall(SYS_pkey_mprotect, p, PAGE, PROT_READ | PROT_EXEC, -1));
}

static int remap_file_pages_(void)
{
	/* Shared anonymous memory is shmem: a file remap_file_pages accepts. */
	void *p = setup_map(PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1);
	errno = 0;
	return report("remap-file-pages", syscall(SYS_remap_file_pages, p, PAGE, 0, 1, 0));
}

static int mremap_exec(void)
{
	unsigned char *p = anon_rw();
	p[0] = 0xc3; /* ret */
	int rc = report("mprotect-exec", mprotect(p, PAGE, PROT_READ | PROT_EXEC));
	if (rc)
		return rc;
	printf("ready\n");
	fflush(stdout);
	char line[64];
	if (!fgets(line, sizeof(line), stdin))
		return 101;
	errno = 0;
	void *q = mremap(p, PAGE, 2 * PAGE, MREMAP_MAYMOVE);
	report("mremap-maymove", q == MAP_FAILED ? -1 : (long)q);
	if (q != MAP_FAILED)
		p = q;
	void *target = setup_map(PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1);
	errno = 0;
	q = mremap(p, PAGE, PAGE, MREMAP_MAYMOVE | MREMAP_FIXED, target);
	return report("mremap-fixed", q == MAP_FAILED ? -1 : (long)q);
}

static int io_uring(void)
{
	struct io_uring_params par;
	memset(&par, 0, sizeof(par));
	errno = 0;
	long fd = syscall(SYS_io_uring_setup, 4, &par);
	int rc = report("io-uring-setup", fd);
	if (rc)
		return rc;
	size_t len = par.sq_off.array + par.sq_entries * sizeof(unsigned);
	errno = 0;
	void *ring = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, (int)fd,
			  IORING_OFF_SQ_RING);
	return report("io-uring-ring-mmap", ring == MAP_FAILED ? -1 : (long)ring);
}

/* One IORING_OP_MADVISE through a ring set up by hand (no liburing). */
static int io_uring_madvise(void)
{
	struct io_uring_params par;
	memset(&par, 0, sizeof(par));
	int fd = (int)syscall(SYS_io_uring_setup, 4, &par);
	if (fd < 0)
		return report("io-uring-setup", -1);
	int shared = MAP_SHARED | MAP_POPULATE;
	char *sq = mmap(NULL, par.sq_off.array + par.sq_entries * sizeof(unsigned),
			PROT_READ | PROT_WRITE, shared, fd, IORING_OFF_SQ_RING);
	char *cq = mmap(NULL, par.cq_off.cqes + par.cq_entries * sizeof(struct io_uring_cqe),
			PROT_READ | PROT_WRITE, shared, fd, IORING_OFF_CQ_RING);
	struct io_uring_sqe *sqes = mmap(NULL, par.sq_entries * sizeof(struct io_uring_sqe),
					 PROT_READ | PROT_WRITE, shared, fd, IORING_OFF_SQES);
	if (sq == MAP_FAILED || cq == MAP_FAILED || sqes == MAP_FAILED)
		return report("io-uring-ring-mmap", -1);
	unsigned char *page = anon_rw();
	page[0] = 0x5a;
	memset(&sqes[0], 0, sizeof(sqes[0]));
	sqes[0].opcode = IORING_OP_MADVISE;
	sqes[0].addr = (uintptr_t)page;
	sqes[0].len = PAGE;
	sqes[0].fadvise_advice = MADV_DONTNEED;
	unsigned *tail = (unsigned *)(sq + par.sq_off.tail);
	((unsigned *)(sq + par.sq_off.array))[*tail & *(unsigned *)(sq + par.sq_off.ring_mask)] = 0;
	__atomic_store_n(tail, *tail + 1, __ATOMIC_RELEASE);
	if (syscall(SYS_io_uring_enter, fd, 1, 1, IORING_ENTER_GETEVENTS, NULL, 0) < 0)
		return report("io-uring-enter", -1);
	struct io_uring_cqe *cqe = (struct io_uring_cqe *)(cq + par.cq_off.cqes);
	if (cqe[0].res < 0) {
		errno = -cqe[0].res;
		return report("io-uring-madvise", -1);
	}
	return report("io-uring-madvise", page[0] == 0);
}

static int map_shadow_stack(void)
{
	return report("map-shadow-stack", syscall(453 /* map_shadow_stack */, 0L, 64UL << 20, 0L));
}

static int vm_writev_code(void)
{
	unsigned char byte = 0xc3;
	struct iovec local = {.iov_base = &byte, .iov_len = 1};
	struct iovec remote = {.iov_base = (void *)(uintptr_t)&vm_writev_code, .iov_len = 1};
	errno = 0;
	return report("vm-writev-code", syscall(SYS_process_vm_writev, getpid(), &local, 1, &remote, 1, 0));
}

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		int (*fn)(void);
	} attempts[] = {
	    {"x32-mmap", x32_mmap},
	    {"x32-mprotect-exec", x32_mprotect_exec},
	    {"pkey-mprotect-exec", pkey_mprotect_exec},
	    {"remap-file-pages", remap_file_pages_},
	    {"mremap-exec", mremap_exec},
	    {"io-uring", io_uring},
	    {"io-uring-madvise", io_uring_madvise},
	    {"vm-writev-code", vm_writev_code},
	    {"map-shadow-stack", map_shadow_stack},
	};
	if (argc != 2) {
		fprintf(stderr, "usage: bypass ATTEMPT (see the source)\n");
		return 100;
	}
	for (size_t i = 0; i < sizeof(attempts) / sizeof(attempts[0]); i++)
		if (strcmp(argv[1], attempts[i].name) == 0)
			return attempts[i].fn();
	fprintf(stderr, "bypass: unknown attempt '%s'\n", argv[1]);
	return 100;
}
