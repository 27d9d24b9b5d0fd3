/* lazy_touch: memory whose first touches after a restore or a reload are
 * timed, driven by signals so that CRIU can dump and restore it (no pipe,
 * no open file: stdin, stdout and stderr are /dev/null; bench/criu.sh).
 *
 *   lazy_touch MIB STRIDE OUT TOUCHES
 *
 * Maps MIB MiB of private anonymous memory in small pages, writes one
 * page in STRIDE (1: every page) with a pattern of its own, writes
 * "ready PID" to the file OUT and waits. Each SIGUSR1 then touches
 * TOUCHES written pages picked at random (a read of one word each),
 * timing each touch, and writes "touch N p50 P50 p99 P99 max MAX" (in
 * microseconds) to OUT; each SIGUSR2 reads every written page back and
 * writes "check ok" or "check bad K" (K pages did not hold their
 * pattern). OUT is
 * opened by name each time, so a restored copy writes where the first
 * did. SIGUSR2 only checks. */
#include <fcntl.h>
#include <signal.h>
#include "timing.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define PAGE 4096ul

static volatile sig_atomic_t touch_asked, check_asked;

static void on_signal(int sig)
{
	if (sig == SIGUSR1)
		touch_asked = 1;
	else
		check_asked = 1;
}

static uint64_t pattern(size_t page)
{
	return page * 0x9e3779b97f4a7c15ull + 1;
}

static void say(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd < 0)
		return;
	ssize_t n = write(fd, text, strlen(text));
	(void)n;
	close(fd);
}

/* The touches' loads land here: a global, so that no compiler drops them
 * nor calls it unused. */
static volatile uint64_t sink;

int main(int argc, char **argv)
{
	if (argc != 5)
		return 2;
	size_t len = strtoull(argv[1], NULL, 0) << 20, stride = strtoull(argv[2], NULL, 0);
	const char *out = argv[3];
	size_t touches = strtoull(argv[4], NULL, 0);
	if (!len || !stride || !touches)
		return 2;
	size_t pages = len / PAGE, written = (pages + stride - 1) / stride;
	uint8_t *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
			  -1, 0);
	if (m == MAP_FAILED)
		return 1;
	madvise(m, len, MADV_NOHUGEPAGE);
	for (size_t p = 0; p < pages; p += stride) {
		uint64_t *w = (uint64_t *)(void *)(m + p * PAGE);
		for (size_t i = 0; i < PAGE / 8; i++)
			w[i] = pattern(p) ^ i;
	}
	uint64_t *t = calloc(touches, sizeof(*t));
	if (!t)
		return 1;
	struct sigaction sa = {.sa_handler = on_signal};
	sigaction(SIGUSR1, &sa, NULL);
	sigaction(SIGUSR2, &sa, NULL);
	sigset_t both, old;
	sigemptyset(&both);
	sigaddset(&both, SIGUSR1);
	sigaddset(&both, SIGUSR2);
	sigprocmask(SIG_BLOCK, &both, &old);
	char line[160];
	snprintf(line, sizeof(line), "ready %d\n", (int)getpid());
	say(out, line);
	uint64_t rng = 88172645463325252ull ^ (uint64_t)getpid();
	for (;;) {
		while (!touch_asked && !check_asked)
			sigsuspend(&old);
		if (check_asked) {
			check_asked = 0;
			size_t bad = 0;
			for (size_t p = 0; p < pages; p += stride) {
				const uint64_t *w = (const uint64_t *)(const void *)(m + p * PAGE);
				for (size_t i = 0; i < PAGE / 8; i++)
					if (w[i] != (pattern(p) ^ i)) {
						bad++;
						break;
					}
			}
			snprintf(line, sizeof(line), bad ? "check bad %zu\n" : "check ok\n", bad);
			say(out, line);
		}
		if (!touch_asked)
			continue;
		touch_asked = 0;
		for (size_t k = 0; k < touches; k++) {
			rng ^= rng << 13;
			rng ^= rng >> 7;
			rng ^= rng << 17;
			size_t p = (size_t)(rng % written) * stride;
			uint64_t t0 = now_ns();
			sink += *(volatile uint64_t *)(void *)(m + p * PAGE + 8 * (k % 512));
			t[k] = now_ns() - t0;
		}
		qsort(t, touches, sizeof(*t), cmp_u64);
		snprintf(line, sizeof(line), "touch %zu p50 %.1f p99 %.1f max %.1f\n", touches,
			 (double)t[touches / 2] / 1e3, (double)t[touches * 99 / 100] / 1e3,
			 (double)t[touches - 1] / 1e3);
		say(out, line);
	}
}
