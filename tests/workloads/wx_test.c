/*
 * wx_test — try one way of getting writable memory executed, report it.
 *
 * Usage: wx_test MODE [FILE]
 *   rwx-mmap       mmap an anonymous RWX page
 *   heap-exec      mprotect(PROT_READ|PROT_EXEC) a page of malloc'd heap
 *   jit            JIT-like: mmap RW, write "mov eax, 42; ret", mprotect
 *                  RX, call it (prints "jit 42")
 *   memfd-double   a memfd mapped RW shared, then mapped RX (the classic
 *                  double mapping)
 *   file-double    FILE mapped RW shared, then mapped RX
 *   file-double-rev FILE mapped RX, then mapped RW shared
 *   shm-exec       shmat(SHM_EXEC) of a System V segment
 *   personality    personality(READ_IMPLIES_EXEC)
 *   proc-mem       open /proc/self/mem for writing and patch own code
 *   mdwe           print PR_GET_MDWE
 *
 * Output: "MODE ok" (or "jit 42") / "MODE errno N NAME" for the call that
 * W^X should refuse. Exit status: 0 on success, else that errno. Setup
 * failures exit 101.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/shm.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SHM_EXEC
#define SHM_EXEC 0100000
#endif

static long page;

static int report(const char *mode, int err)
{
	if (err)
		printf("%s errno %d %s\n", mode, err, strerrorname_np(err) ?: "?");
	else
		printf("%s ok\n", mode);
	return err > 255 ? 255 : err;
}

static void setup_fail(const char *what)
{
	fprintf(stderr, "wx_test: setup %s: %s\n", what, strerror(errno));
	exit(101);
}

static int rwx_mmap(void)
{
	void *p = mmap(NULL, page, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return report("rwx-mmap", p == MAP_FAILED ? errno : 0);
}

static int heap_exec(void)
{
	char *m = malloc(16 * page);
	if (!m)
		setup_fail("malloc");
	void *p = (void *)(((uintptr_t)m + page - 1) & ~(uintptr_t)(page - 1));
	return report("heap-exec", mprotect(p, page, PROT_READ | PROT_EXEC) ? errno : 0);
}

static int jit(void)
{
	static const unsigned char code[] = {0xb8, 0x2a, 0x00, 0x00, 0x00, 0xc3}; /* mov eax,42; ret */
	unsigned char *p = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		setup_fail("mmap");
	memcpy(p, code, sizeof(code));
	if (mprotect(p, page, PROT_READ | PROT_EXEC))
		return report("jit", errno);
	int (*fn)(void) = (int (*)(void))(void *)p;
	printf("jit %d\n", fn());
	return 0;
}

static int double_map(const char *mode, int fd, int reverse)
{
	if (ftruncate(fd, page))
		setup_fail("ftruncate");
	int prot[2] = {PROT_READ | PROT_WRITE, PROT_READ | PROT_EXEC};
	int flags[2] = {MAP_SHARED, MAP_PRIVATE};
	int first = reverse ? 1 : 0;
	void *a = mmap(NULL, page, prot[first], flags[first], fd, 0);
	if (a == MAP_FAILED)
		return report(mode, errno); /* refused already */
	void *b = mmap(NULL, page, prot[!first], flags[!first], fd, 0);
	return report(mode, b == MAP_FAILED ? errno : 0);
}

static int shm_exec(void)
{
	/* Exec permission: shmat(SHM_EXEC) checks it (ipcperms); only root is exempt. */
	int id = shmget(IPC_PRIVATE, page, IPC_CREAT | 0700);
	if (id < 0)
		setup_fail("shmget");
	void *p = shmat(id, NULL, SHM_EXEC);
	int err = p == (void *)-1 ? errno : 0;
	shmctl(id, IPC_RMID, NULL);
	return report("shm-exec", err);
}

static int proc_mem(void)
{
	int fd = open("/proc/self/mem", O_RDWR);
	if (fd < 0)
		return report("proc-mem", errno);
	/* Patch a byte of our own (read-only, executable) code in place:
	 * writes through /proc/PID/mem ignore page protections. */
	unsigned char *target = (unsigned char *)(void *)report;
	unsigned char b = *target;
	ssize_t n = pwrite(fd, &b, 1, (off_t)(uintptr_t)target);
	return report("proc-mem", n == 1 ? 0 : errno);
}

int main(int argc, char **argv)
{
	page = sysconf(_SC_PAGESIZE);
	if (argc < 2) {
		fprintf(stderr, "usage: wx_test MODE [FILE]\n");
		return 100;
	}
	const char *m = argv[1];
	if (!strcmp(m, "rwx-mmap"))
		return rwx_mmap();
	if (!strcmp(m, "heap-exec"))
		return heap_exec();
	if (!strcmp(m, "jit"))
		return jit();
	if (!strcmp(m, "memfd-double")) {
		int fd = (int)syscall(SYS_memfd_create, "wx", 0);
		if (fd < 0)
			setup_fail("memfd_create");
		return double_map(m, fd, 0);
	}
	if (!strcmp(m, "file-double") || !strcmp(m, "file-double-rev")) {
		if (argc < 3)
			return 100;
		int fd = open(argv[2], O_RDWR | O_CREAT, 0700); /* exec permission: shmat(SHM_EXEC) checks it (ipcperms), root alone is exempt */
		if (fd < 0)
			setup_fail("open");
		return double_map(m, fd, !strcmp(m, "file-double-rev"));
	}
	if (!strcmp(m, "shm-exec"))
		return shm_exec();
	if (!strcmp(m, "personality"))
		return report(m, personality(READ_IMPLIES_EXEC) == -1 ? errno : 0);
	if (!strcmp(m, "proc-mem"))
		return proc_mem();
	if (!strcmp(m, "mdwe")) {
		printf("mdwe %d\n", prctl(66 /* PR_GET_MDWE */, 0, 0, 0, 0));
		return 0;
	}
	fprintf(stderr, "wx_test: unknown mode %s\n", m);
	return 100;
}
