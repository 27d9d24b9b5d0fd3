/* rb_target [MIB]: a program to roll back (tests/bats/rollback.bats).
 *
 * It maps MIB MiB (default 16) of which the first half is filled with a
 * pattern and the second half is never touched (holes), then answers one
 * input line at a time from stdin:
 *
 *   got N HASH HOLES REGS   right after the read returned, before doing
 *                           anything: N inputs seen before this one, HASH
 *                           of the filled half, its counter, a stack array
 *                           and the globals, HOLES how many pages of the
 *                           second half are resident (mincore), REGS "ok"
 *                           when xmm0-15 and r12-r15 hold, after the read,
 *                           what they held before it (set per N)
 *   ready PID N+1 HASH      after the command, before the next read
 *
 * Commands: "w SEED K" writes K pseudo-random pages of the filled half
 * and of the holes; "m" maps and writes a new 1 MiB region; "u" unmaps
 * 1 MiB of the filled half; "p" makes 1 MiB of it read-only, "P" that
 * MiB writable again and writes every third page of it; "z" drops
 * 1 MiB of it (MADV_DONTNEED); "b" grows the heap by 1 MiB with sbrk and
 * writes it; "s" writes the stack array; "t" starts a thread that sleeps;
 * "f" forks a child that sleeps; "q" makes a process with clone(2) and
 * no exit signal (which ptrace reports as a thread's clone), which exits
 * at once with status 7, and reaps it; "E" runs sleep 300 in its place (execve);
 * "e" exits with status 3; "c" writes to address 0x10 (SIGSEGV); "a"
 * calls abort(3); "o" overflows its stack; "C" starts a thread that
 * writes to address 0x20 and waits for it; "T" starts a thread that
 * makes system calls in a loop (getppid, sched_yield) and counts them,
 * "D" two of them;
 * "h" hangs (a busy loop);
 * "r" reads 8 bytes of the file named by $RB_FILE (opened at the start,
 * close-on-exec) and prints "read BYTES"; "K" closes it and the reading
 * end of a pipe made at the start, "closed RC RC"; "F" prints "flags N",
 * the F_GETFD of the file's descriptor; "Y" puts /dev/zero at the
 * file's number, "Z" closes it and opens it again there, 16 bytes in
 * ("replaced RC", "reopened RC"); "R" moves its rseq registration
 * to a page it maps (unregisters glibc's) and prints "rseq RC RC";
 * "O" opens /dev/null and prints
 * "opened FD";
 * anything else is just counted.
 *
 * With RB_SHARED=1 the filled half's fourth MiB is a shared mapping
 * (MAP_SHARED | MAP_ANONYMOUS, mapped over it), which a rollback leaves
 * as it is: HASH does not read it, "w" writes it too, and "H" prints
 * "shared HASH" of it alone.
 *
 * With RB_NOFORK=1 the filled half's first MiB is MADV_DONTFORK and its
 * second MADV_WIPEONFORK. With RB_NOCLONE=1 it runs a seccomp filter of
 * its own that kills it at a clone(2) that does not make a thread.
 *
 * After a rollback to a mark taken while it waited for input, every "got"
 * line must be the mark's: same N, same HASH, HOLES 0, REGS ok. */
#include "wl.h"

#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/rseq.h>
#include <sys/syscall.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define PG 4096ul

static unsigned char *heap;
static size_t heap_len, filled;
static uint64_t count;
/* Initialised: in .data, a private mapping of the program's file (which
 * synchronous write tracking puts back whole). */
static uint64_t data_word = 0x5eed;
static unsigned char *extra;
static void *grown;
static int unmapped, readonly; /* "u" and "p" happened: "w" skips those MiB */
static int shared;		/* RB_SHARED: the fourth MiB is MAP_SHARED */

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
	const unsigned char *c = p;
	for (size_t i = 0; i < n; i++)
		h = (h ^ c[i]) * 0x100000001b3ull;
	return h;
}

static uint64_t state_hash(const unsigned char *stack, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;
	/* The MiB "u" unmapped is not read, nor the shared one. */
	for (size_t off = 0; off < filled; off += PG)
		if (!(unmapped && off >> 20 == 1) && !(shared && off >> 20 == 3))
			h = fnv(h, heap + off, PG);
	h = fnv(h, &count, sizeof(count));
	h = fnv(h, &data_word, sizeof(data_word));
	h = fnv(h, stack, n);
	h = fnv(h, &extra, sizeof(extra));
	h = fnv(h, &grown, sizeof(grown));
	h = fnv(h, &unmapped, sizeof(unmapped));
	h = fnv(h, &readonly, sizeof(readonly));
	/* The kernel's brk, not libc's copy of it: a rollback that took the
	 * heap's growth away with munmap left it where the run had moved it,
	 * and malloc's next sbrk "succeeded" into unmapped memory. */
	long brk = syscall(SYS_brk, 0);
	h = fnv(h, &brk, sizeof(brk));
	return h;
}

static size_t holes_resident(void)
{
	size_t n = (heap_len - filled) / PG, r = 0;
	unsigned char *vec = malloc(n);
	if (vec && mincore(heap + filled, heap_len - filled, vec) == 0)
		for (size_t i = 0; i < n; i++)
			r += vec[i] & 1;
	free(vec);
	return r;
}

/* read(0) with xmm0-15 and r12-r15 set from sent before the syscall and
 * stored to out after it: a rollback into the middle of this read must
 * put them back. */
static long read_checked(void *buf, size_t len, const unsigned char *sent, unsigned char *out)
{
	long ret;
	__asm__ volatile("movdqu 0(%[s]), %%xmm0\n\tmovdqu 16(%[s]), %%xmm1\n\t"
			 "movdqu 32(%[s]), %%xmm2\n\tmovdqu 48(%[s]), %%xmm3\n\t"
			 "movdqu 64(%[s]), %%xmm4\n\tmovdqu 80(%[s]), %%xmm5\n\t"
			 "movdqu 96(%[s]), %%xmm6\n\tmovdqu 112(%[s]), %%xmm7\n\t"
			 "movdqu 128(%[s]), %%xmm8\n\tmovdqu 144(%[s]), %%xmm9\n\t"
			 "movdqu 160(%[s]), %%xmm10\n\tmovdqu 176(%[s]), %%xmm11\n\t"
			 "movdqu 192(%[s]), %%xmm12\n\tmovdqu 208(%[s]), %%xmm13\n\t"
			 "movdqu 224(%[s]), %%xmm14\n\tmovdqu 240(%[s]), %%xmm15\n\t"
			 "mov 256(%[s]), %%r12\n\tmov 264(%[s]), %%r13\n\t"
			 "mov 272(%[s]), %%r14\n\tmov 280(%[s]), %%r15\n\t"
			 "syscall\n\t"
			 "movdqu %%xmm0, 0(%[o])\n\tmovdqu %%xmm1, 16(%[o])\n\t"
			 "movdqu %%xmm2, 32(%[o])\n\tmovdqu %%xmm3, 48(%[o])\n\t"
			 "movdqu %%xmm4, 64(%[o])\n\tmovdqu %%xmm5, 80(%[o])\n\t"
			 "movdqu %%xmm6, 96(%[o])\n\tmovdqu %%xmm7, 112(%[o])\n\t"
			 "movdqu %%xmm8, 128(%[o])\n\tmovdqu %%xmm9, 144(%[o])\n\t"
			 "movdqu %%xmm10, 160(%[o])\n\tmovdqu %%xmm11, 176(%[o])\n\t"
			 "movdqu %%xmm12, 192(%[o])\n\tmovdqu %%xmm13, 208(%[o])\n\t"
			 "movdqu %%xmm14, 224(%[o])\n\tmovdqu %%xmm15, 240(%[o])\n\t"
			 "mov %%r12, 256(%[o])\n\tmov %%r13, 264(%[o])\n\t"
			 "mov %%r14, 272(%[o])\n\tmov %%r15, 280(%[o])\n\t"
			 : "=a"(ret)
			 : "a"(0L), "D"(0L), "S"(buf), "d"(len), [s] "r"(sent), [o] "r"(out)
			 : "rcx", "r11", "r12", "r13", "r14", "r15", "memory", "xmm0", "xmm1",
			   "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",
			   "xmm11", "xmm12", "xmm13", "xmm14", "xmm15");
	return ret;
}

/* Never returns: each frame keeps 4 KiB the compiler cannot drop. */
static volatile int deeper = 1;
static volatile int *volatile bad_ptr = (volatile int *)0x10;
static int recurse(int n)
{
	volatile char pad[4096];
	pad[0] = (char)n;
	return (deeper ? recurse(n + 1) : 0) + pad[0];
}

static void *crasher(void *arg)
{
	*(bad_ptr + 4) = 1;
	return arg;
}

static volatile uint64_t spins;
static void *spinner(void *arg)
{
	for (;;) {
		getppid();
		sched_yield();
		spins++;
	}
	return arg;
}

static void *sleeper(void *arg)
{
	for (;;)
		pause();
	return arg;
}

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* RB_NOCLONE=1: a seccomp filter of its own that kills the process at
 * a clone(2) that does not make a thread (as sandboxes forbid fork). */
static int noclone(void)
{
	struct sock_filter f[] = {
	    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_clone, 1, 0),
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0])),
	    BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, CLONE_THREAD, 0, 1),
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
	};
	struct sock_fprog prog = {.len = sizeof(f) / sizeof(f[0]), .filter = f};
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return -1;
	return (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog);
}

int main(int argc, char **argv)
{
	size_t mib = argc > 1 ? strtoul(argv[1], NULL, 0) : 16;
	heap_len = mib << 20;
	filled = heap_len / 2;
	/* A heap before the mark, as in any program that called malloc: "b"
	 * then grows it rather than making it. */
	char *first = sbrk(PG);
	if (first == (void *)-1)
		return 2;
	memset(first, 1, PG);
	heap = mmap(NULL, heap_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (heap == MAP_FAILED)
		return 2;
	for (size_t i = 0; i < filled; i += 8)
		*(uint64_t *)(heap + i) = mix(i);
	if (getenv("RB_SHARED")) {
		if (filled < 4 << 20 ||
		    mmap(heap + (3 << 20), 1 << 20, PROT_READ | PROT_WRITE,
			 MAP_SHARED | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED)
			return 2;
		memset(heap + (3 << 20), 0x33, 1 << 20);
		shared = 1;
	}
	/* RB_NOFORK=1: the filled half's first MiB is not copied into a
	 * child (MADV_DONTFORK), its second is a child's zeros
	 * (MADV_WIPEONFORK): a mark's snapshot holds neither. */
	if (getenv("RB_NOFORK") && (madvise(heap, 1 << 20, MADV_DONTFORK) < 0 ||
				    madvise(heap + (1 << 20), 1 << 20, MADV_WIPEONFORK) < 0))
		return 2;
	if (getenv("RB_NOCLONE") && noclone() < 0)
		return 2;
	const char *file = getenv("RB_FILE");
	int ffd = file ? open(file, O_RDONLY | O_CLOEXEC) : -1;
	int pfd[2];
	if (pipe(pfd) < 0)
		return 2;
	unsigned char stack[256];
	memset(stack, 0x5a, sizeof(stack));
	unsigned char sent[288], out[288];
	char line[256];
	say("ready %d %llu %016llx\n", (int)getpid(), (unsigned long long)count,
	    (unsigned long long)state_hash(stack, sizeof(stack)));
	for (;;) {
		for (size_t i = 0; i < sizeof(sent); i++)
			sent[i] = (unsigned char)(i * 7 + count * 13 + 1);
		memset(out, 0, sizeof(out));
		long n = read_checked(line, sizeof(line) - 1, sent, out);
		if (n <= 0)
			return n == 0 ? 0 : 5;
		line[n] = 0;
		say("got %llu %016llx %zu %s\n", (unsigned long long)count,
		    (unsigned long long)state_hash(stack, sizeof(stack)), holes_resident(),
		    memcmp(sent, out, sizeof(sent)) ? "bad" : "ok");
		count++;
		data_word = data_word * 6364136223846793005ull + 1;
		unsigned long long seed = 1, k = 0;
		switch (line[0]) {
		case 'w':
			sscanf(line + 1, "%llu %llu", &seed, &k);
			for (uint64_t s = seed * 2654435761u + 1, i = 0; i < k; i++) {
				size_t pg = rnd(&s) % (heap_len / PG), mb = pg * PG >> 20;
				if ((mb == 1 && unmapped) || (mb == 2 && readonly))
					continue;
				heap[pg * PG + rnd(&s) % PG] ^= (unsigned char)(rnd(&s) | 1);
			}
			break;
		case 'm':
			extra = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE,
				     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			if (extra != MAP_FAILED)
				memset(extra, 7, 1 << 20);
			break;
		case 'u':
			munmap(heap + (1 << 20), 1 << 20);
			unmapped = 1;
			break;
		case 'p':
			mprotect(heap + (2 << 20), 1 << 20, PROT_READ);
			readonly = 1;
			break;
		case 'P': /* the "p" MiB writable again, and written */
			mprotect(heap + (2 << 20), 1 << 20, PROT_READ | PROT_WRITE);
			for (size_t off = 0; off < (1 << 20); off += 4096 * 3)
				heap[(2 << 20) + off] ^= 0x5a;
			readonly = 0;
			break;
		case 'z':
			madvise(heap + (3 << 20), 1 << 20, MADV_DONTNEED);
			break;
		case 'b':
			grown = sbrk(1 << 20);
			if (grown != (void *)-1)
				memset(grown, 9, 1 << 20);
			break;
		case 's':
			memset(stack, (int)count, sizeof(stack));
			break;
		case 't': {
			pthread_t t;
			pthread_create(&t, NULL, sleeper, NULL);
			break;
		}
		case 'f':
			if (fork() == 0)
				for (;;)
					pause();
			break;
		case 'q': { /* a process of its own, not a thread, no exit signal */
			long c = syscall(SYS_clone, 0ul, NULL, NULL, NULL, 0ul);
			if (c == 0)
				syscall(SYS_exit_group, 7);
			if (c > 0)
				waitpid((pid_t)c, NULL, __WALL);
			break;
		}
		case 'E':
			execl("/bin/sleep", "sleep", "300", (char *)NULL);
			break;
		case 'e':
			_exit(3);
		case 'c':
			*bad_ptr = 1;
			break;
		case 'a':
			abort();
		case 'o':
			say("deep %d\n", recurse(1));
			break;
		case 'r': {
			char b[9] = {0};
			say("read %s\n", read(ffd, b, 8) == 8 ? b : "-");
			break;
		}
		case 'O':
			say("opened %d\n", open("/dev/null", O_RDONLY));
			break;
		case 'H':
			say("shared %016llx\n",
			    shared ? (unsigned long long)fnv(0xcbf29ce484222325ull,
							      heap + (3 << 20), 1 << 20)
				   : 0ull);
			break;
		case 'K': /* closes $RB_FILE and the pipe it made at the start */
			say("closed %d %d\n", close(ffd), close(pfd[0]));
			break;
		case 'R': { /* its rseq area moved to a page mapped now */
			struct rseq *old =
			    (void *)((char *)__builtin_thread_pointer() + __rseq_offset);
			long un = -1, re = -1;
			char *page = mmap(NULL, PG, PROT_READ | PROT_WRITE,
					  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			if (__rseq_size && page != MAP_FAILED) {
				un = syscall(SYS_rseq, old, 32, RSEQ_FLAG_UNREGISTER, RSEQ_SIG);
				re = syscall(SYS_rseq, page, 32, 0, RSEQ_SIG);
			}
			say("rseq %ld %ld\n", un, re);
			break;
		}
		case 'Y': { /* $RB_FILE's number taken by /dev/zero */
			int z = open("/dev/zero", O_RDONLY);
			say("replaced %d\n", z >= 0 && dup2(z, ffd) == ffd && close(z) == 0 ? 0 : -1);
			break;
		}
		case 'Z': /* $RB_FILE closed and opened again at its number, 16 bytes in */
			say("reopened %d\n",
			    close(ffd) == 0 && open(file, O_RDONLY | O_CLOEXEC) == ffd &&
				    lseek(ffd, 16, SEEK_SET) == 16
				? 0
				: -1);
			break;
		case 'F': /* which flags the descriptor of $RB_FILE has */
			say("flags %d\n", fcntl(ffd, F_GETFD));
			break;
		case 'T':
		case 'D': {
			pthread_t t;
			for (int left = line[0] == 'D' ? 2 : 1; left > 0; left--)
				pthread_create(&t, NULL, spinner, NULL);
			break;
		}
		case 'C': {
			pthread_t t;
			if (pthread_create(&t, NULL, crasher, NULL) == 0)
				pthread_join(t, NULL);
			break;
		}
		case 'h':
			for (volatile unsigned long i = 0;; i++)
				;
		}
		say("ready %d %llu %016llx\n", (int)getpid(), (unsigned long long)count,
		    (unsigned long long)state_hash(stack, sizeof(stack)));
	}
}
