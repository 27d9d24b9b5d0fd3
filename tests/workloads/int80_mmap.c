/*
 * int80_mmap — a 64-bit program making an i386 mmap through `int $0x80`.
 *
 * Usage: int80_mmap          mmap2 (i386 syscall 192): args in ebx, ecx, edx,
 *                            esi, edi, ebp; offset in pages
 *        int80_mmap old      old_mmap (i386 syscall 90): ebx points to six
 *                            u32s {addr, len, prot, flags, fd, offset} that
 *                            must lie below 4 GiB (they are put in a MAP_32BIT
 *                            mapping)
 *
 * Either way it asks for one anonymous private read-write page at address 0.
 * A 64-bit process can still enter the kernel through the IA-32 gate; the
 * seccomp filter then sees AUDIT_ARCH_I386 and i386 syscall numbers, so this
 * is how tests check that memvisor's filter handles (or refuses) the compat
 * entry instead of mistaking 192 for a native syscall.
 *
 * Output and exit status:
 *   "int80 mmap2 ok" / "int80 old_mmap ok"           exit 0 (page written,
 *                                                    read back, unmapped)
 *   "int80 mmap2 errno N (NAME)" / "int80 old_mmap errno N (NAME)"  exit N
 *   "int80 unavailable"                              exit 77: no IA-32
 *        emulation (int $0x80 raised SIGSEGV/SIGILL/SIGBUS, or even i386
 *        getpid returns -ENOSYS)
 *   exit 2 (a setup syscall failed), 3 (page content wrong), 100 (usage).
 * If a seccomp filter kills the process the test sees that signal instead.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#if !defined(__x86_64__)
#error "int80_mmap is x86-64 only"
#endif

#define I386_GETPID   20
#define I386_OLD_MMAP 90
#define I386_MMAP2    192
#define I386_PROT_RW  3	   /* PROT_READ | PROT_WRITE */
#define I386_MAP_PA   0x22 /* MAP_PRIVATE | MAP_ANONYMOUS */

/*
 * uint32_t int80(nr, a1..a6): eax = nr, ebx/ecx/edx/esi/edi/ebp = a1..a6,
 * int $0x80, returns eax zero-extended. Written as a plain assembly function
 * so that rbx and rbp can be saved and loaded freely (inline asm cannot claim
 * rbp, and pushing inside inline asm would trample the red zone).
 * SysV: nr=edi a1=esi a2=edx a3=ecx a4=r8d a5=r9d a6=8(%rsp).
 */
uint32_t int80(uint32_t nr, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t a4, uint32_t a5,
	       uint32_t a6) __attribute__((visibility("hidden")));
__asm__(".text\n"
	".p2align 4\n"
	".globl int80\n"
	".hidden int80\n"
	".type int80, @function\n"
	"int80:\n"
	"	.cfi_startproc\n"
	"	pushq %rbx\n"
	"	.cfi_adjust_cfa_offset 8\n"
	"	pushq %rbp\n"
	"	.cfi_adjust_cfa_offset 8\n"
	"	movl %edi, %eax\n"
	"	movl %esi, %ebx\n"
	"	movl %edx, %r10d\n"
	"	movl %ecx, %edx\n"
	"	movl %r10d, %ecx\n"
	"	movl %r8d, %esi\n"
	"	movl %r9d, %edi\n"
	"	movl 24(%rsp), %ebp\n"
	"	int $0x80\n"
	"	movl %eax, %eax\n"
	"	popq %rbp\n"
	"	.cfi_adjust_cfa_offset -8\n"
	"	popq %rbx\n"
	"	.cfi_adjust_cfa_offset -8\n"
	"	ret\n"
	"	.cfi_endproc\n"
	".size int80, .-int80\n");

/* File scope: they must survive the siglongjmp out of a trap. */
static int old;
static const char *label = "mmap2";
static sigjmp_buf trap_env;
static volatile sig_atomic_t trapped_sig;

static void on_trap(int sig)
{
	trapped_sig = sig;
	siglongjmp(trap_env, 1);
}

static int is_err(uint32_t r)
{
	return r >= 0xfffff000u;
}

static int err_of(uint32_t r)
{
	return -(int32_t)r;
}

static void unavailable(const char *why)
{
	fprintf(stderr, "int80_mmap: IA-32 emulation unavailable: %s\n", why);
	printf("int80 unavailable\n");
	fflush(stdout);
	exit(77);
}

int main(int argc, char **argv)
{
	if (argc == 2 && strcmp(argv[1], "old") == 0) {
		old = 1;
		label = "old_mmap";
	} else if (argc != 1) {
		fprintf(stderr, "usage: int80_mmap [old]\n");
		return 100;
	}

	/* Argument block for old_mmap: must be addressable with 32 bits. */
	uint32_t *args = NULL;
	if (old) {
		args = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS | MAP_32BIT, -1, 0);
		if (args == MAP_FAILED) {
			fprintf(stderr, "int80_mmap: mmap(MAP_32BIT): %s\n", strerror(errno));
			return 2;
		}
		if ((uintptr_t)args > 0xffffffffu - 4096) {
			fprintf(stderr, "int80_mmap: MAP_32BIT mapping above 4 GiB\n");
			return 2;
		}
		args[0] = 0;		/* addr */
		args[1] = 4096;		/* len */
		args[2] = I386_PROT_RW; /* prot */
		args[3] = I386_MAP_PA;	/* flags */
		args[4] = (uint32_t)-1; /* fd */
		args[5] = 0;		/* offset (bytes) */
	}

	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_trap;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGSEGV, &sa, NULL);
	sigaction(SIGILL, &sa, NULL);
	sigaction(SIGBUS, &sa, NULL);

	if (sigsetjmp(trap_env, 1) != 0) {
		char why[64];
		snprintf(why, sizeof(why), "int $0x80 raised signal %d (%s)", (int)trapped_sig,
			 strsignal(trapped_sig));
		unavailable(why);
	}

	uint32_t r;
	if (old)
		r = int80(I386_OLD_MMAP, (uint32_t)(uintptr_t)args, 0, 0, 0, 0, 0);
	else
		r = int80(I386_MMAP2, 0, 4096, I386_PROT_RW, I386_MAP_PA, (uint32_t)-1, 0);

	if (is_err(r) && err_of(r) == ENOSYS) {
		uint32_t g = int80(I386_GETPID, 0, 0, 0, 0, 0, 0);
		if (is_err(g) && err_of(g) == ENOSYS)
			unavailable("i386 getpid returned ENOSYS too");
	}
	signal(SIGSEGV, SIG_DFL);
	signal(SIGILL, SIG_DFL);
	signal(SIGBUS, SIG_DFL);

	if (is_err(r)) {
		int e = err_of(r);
		const char *name = strerrorname_np(e);
		printf("int80 %s errno %d (%s)\n", label, e, name ? name : "?");
		fflush(stdout);
		return e > 255 ? 255 : e;
	}

	volatile uint32_t *page = (volatile uint32_t *)(uintptr_t)r;
	for (uint32_t i = 0; i < 1024; i++)
		page[i] = i * 2654435761u ^ 0xdeadbeefu;
	for (uint32_t i = 0; i < 1024; i++) {
		if (page[i] != (i * 2654435761u ^ 0xdeadbeefu)) {
			fprintf(stderr, "int80_mmap: page content mismatch at word %u\n", i);
			return 3;
		}
	}
	if (munmap((void *)(uintptr_t)r, 4096) != 0) {
		fprintf(stderr, "int80_mmap: munmap: %s\n", strerror(errno));
		return 2;
	}
	if (args)
		munmap(args, 4096);
	printf("int80 %s ok\n", label);
	return fflush(stdout) == 0 ? 0 : 2;
}
