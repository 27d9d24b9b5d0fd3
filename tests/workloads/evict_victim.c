/* evict_victim: memory laid out the ways fork and evict treat specially,
 * driven by lines on stdin, for the evict safety tests.
 *
 *   evict_victim [--mib N] [--dontfork-mib N] [--check-on-usr1]
 *
 * At start: a private region of N MiB (default 16), a MADV_WIPEONFORK
 * region of 1 MiB and a MADV_DONTFORK region (default 32 MiB), each
 * filled with its own pattern; prints "pid P" on stderr and "ready".
 * Commands (one answer line each, written with write(2)):
 *   check   every region holds its pattern: "ok", or "MISMATCH ..."
 *   fork    a child checks the private region (pattern) and the
 *           WIPEONFORK one (zeros, as fork gives it): "child ok" or
 *           "child MISMATCH ...", then waits for "reap"
 *   reap    end that child: "reaped STATUS"
 *   mprotect  make 5 pages in the private region's second MiB read-only:
 *           its vma splits in three: "protected"
 *   spin    a thread checks the private region over and over; the first
 *           wrong byte prints "MISMATCH ..." and exits 3: "spinning"
 * --check-on-usr1: a thread waits for SIGUSR1 (blocked in every thread,
 * taken with sigwait), then checks the private region, prints "checked"
 * and exits 0 (or MISMATCH and 3), whatever stdin does. Nothing touches
 * the private region before the signal. */
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef MADV_WIPEONFORK
#define MADV_WIPEONFORK 18
#endif

static uint8_t *priv, *wipe, *dfork;
static size_t priv_len, wipe_len = 1 << 20, dfork_len;
static pid_t child = -1;

static void say(const char *fmt, ...)
{
	char b[256];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(b, sizeof(b), fmt, ap);
	va_end(ap);
	if (write(1, b, (size_t)n) < 0)
		_exit(4);
}

static uint8_t pat(unsigned salt, size_t i)
{
	uint32_t x = (uint32_t)(i >> 12) * 2654435761u ^ salt * 40503u ^ (uint32_t)i;
	return (uint8_t)(x ^ x >> 11 ^ 0xa5);
}

static void fill(uint8_t *p, size_t n, unsigned salt)
{
	for (size_t i = 0; i < n; i++)
		p[i] = pat(salt, i);
}

/* -1 when every byte holds its pattern (salt) or is zero (salt 0). */
static long bad_at(const volatile uint8_t *p, size_t n, unsigned salt)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != (salt ? pat(salt, i) : 0))
			return (long)i;
	return -1;
}

static int check(const char *who, const char *what, uint8_t *p, size_t n, unsigned salt)
{
	long i = bad_at(p, n, salt);
	if (i < 0)
		return 0;
	say("%sMISMATCH %s offset %ld got %#x want %#x\n", who, what, i, p[i],
	    salt ? pat(salt, (size_t)i) : 0);
	return -1;
}

static sigset_t usr1;

static void *check_on_signal(void *arg)
{
	int sig;
	/* glibc's sigwait goes back to waiting after EINTR (a ptrace stop
	 * interrupts the wait). */
	if (sigwait(&usr1, &sig) != 0)
		_exit(5);
	if (check("", "private", priv, priv_len, 1) < 0)
		_exit(3);
	say("checked\n");
	_exit(0);
	return arg;
}

static void *spin(void *arg)
{
	for (;;)
		if (check("", "private", priv, priv_len, 1) < 0)
			_exit(3);
	return arg;
}

static uint8_t *region(size_t n, int advice)
{
	uint8_t *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED || (advice >= 0 && madvise(p, n, advice) < 0)) {
		perror("mmap/madvise");
		exit(2);
	}
	return p;
}

int main(int argc, char **argv)
{
	size_t mib = 16, dmib = 32;
	bool check_on_usr1 = false;
	static const struct option o[] = {{"mib", 1, 0, 'm'}, {"dontfork-mib", 1, 0, 'd'},
					  {"check-on-usr1", 0, 0, 'c'}, {0}};
	for (int c; (c = getopt_long(argc, argv, "", o, NULL)) != -1;) {
		if (c == 'm')
			mib = strtoul(optarg, NULL, 0);
		else if (c == 'd')
			dmib = strtoul(optarg, NULL, 0);
		else if (c == 'c')
			check_on_usr1 = true;
		else
			return 2;
	}
	priv_len = mib << 20;
	dfork_len = dmib << 20;
	priv = region(priv_len, -1);
	wipe = region(wipe_len, MADV_WIPEONFORK);
	dfork = region(dfork_len, MADV_DONTFORK);
	fill(priv, priv_len, 1);
	fill(wipe, wipe_len, 2);
	fill(dfork, dfork_len, 3);
	if (check_on_usr1) {
		/* Blocked here, before the thread exists, so that no thread
		 * takes SIGUSR1 but the one in sigwait. */
		sigemptyset(&usr1);
		sigaddset(&usr1, SIGUSR1);
		pthread_sigmask(SIG_BLOCK, &usr1, NULL);
		pthread_t t;
		pthread_create(&t, NULL, check_on_signal, NULL);
	}
	fprintf(stderr, "pid %d\n", getpid());
	say("ready\n");
	char line[64];
	while (fgets(line, sizeof(line), stdin)) {
		if (!strncmp(line, "check", 5)) {
			if (!check("", "private", priv, priv_len, 1) &&
			    !check("", "wipeonfork", wipe, wipe_len, 2) &&
			    !check("", "dontfork", dfork, dfork_len, 3))
				say("ok\n");
		} else if (!strncmp(line, "fork", 4)) {
			child = fork();
			if (child == 0) {
				if (!check("child ", "private", priv, priv_len, 1) &&
				    !check("child ", "wipeonfork", wipe, wipe_len, 0))
					say("child ok\n");
				for (;;)
					pause();
			}
		} else if (!strncmp(line, "reap", 4)) {
			int st = -1;
			kill(child, SIGTERM);
			waitpid(child, &st, 0);
			say("reaped %d\n", st);
		} else if (!strncmp(line, "mprotect", 8)) {
			if (mprotect(priv + (1 << 20) + 3 * 4096, 5 * 4096, PROT_READ) < 0)
				say("mprotect failed\n");
			else
				say("protected\n");
		} else if (!strncmp(line, "spin", 4)) {
			pthread_t t;
			pthread_create(&t, NULL, spin, NULL);
			say("spinning\n");
		}
	}
	return 0;
}
