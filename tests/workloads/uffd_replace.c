/* uffd_replace: a thread faults on never-written evicted memory while
 * another maps over that page (MAP_FIXED) and registers the new mapping
 * with the program's own userfaultfd, whose handler fills it with 0xab.
 * Natively the faulting thread reads 0xab (its access faults again on the
 * new mapping); a zero page that memvisor installs for the old fault
 * through its own userfaultfd would fill the program's range with zeros.
 *
 *   uffd_replace
 *
 * Prints "ready PID" once its threads wait; on the line "go" on stdin, A
 * touches the page, 50 ms later B maps over it and registers it; prints
 * "A read 0xNN" (0xab is right) and exits 0, or 1 when something fails.
 * Every page the threads use before "go" is written first, so that after
 * an evict the only zero fault is A's (memvisor's serve_zero_stall fault
 * point delays exactly that one). */
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define PG     4096ul
#define REGION (4ul << 20)

static uint8_t *region, *target, *fill_page;
static int uffd, pa[2], pb[2];
static volatile int a_value = -1;

static void die(const char *what)
{
	printf("failed %s: %s\n", what, strerror(errno));
	fflush(stdout);
	exit(1);
}

static void wait_pipe(int fd)
{
	char c;
	while (read(fd, &c, 1) < 0 && errno == EINTR)
		;
}

/* The program's own fault handler: every fault gets a page of 0xab. */
static void *handler(void *arg)
{
	(void)arg;
	for (;;) {
		struct pollfd p = {uffd, POLLIN, 0};
		if (poll(&p, 1, -1) < 0)
			continue;
		struct uffd_msg m;
		if (read(uffd, &m, sizeof(m)) != sizeof(m) || m.event != UFFD_EVENT_PAGEFAULT)
			continue;
		struct uffdio_copy c = {.dst = m.arg.pagefault.address & ~(PG - 1),
					.src = (uint64_t)(uintptr_t)fill_page,
					.len = PG};
		ioctl(uffd, UFFDIO_COPY, &c);
	}
	return NULL;
}

static void *thread_a(void *arg)
{
	(void)arg;
	wait_pipe(pa[0]);
	a_value = *(volatile uint8_t *)target;
	return NULL;
}

static void *thread_b(void *arg)
{
	(void)arg;
	wait_pipe(pb[0]);
	if (mmap(target, PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1,
		 0) != target)
		die("mmap");
	struct uffdio_register r = {.range = {(uint64_t)(uintptr_t)target, PG},
				    .mode = UFFDIO_REGISTER_MODE_MISSING};
	if (ioctl(uffd, UFFDIO_REGISTER, &r) < 0)
		die("UFFDIO_REGISTER");
	return NULL;
}

/* Touch the stack the threads will use, so that it is in the image. */
static void touch_stack(void)
{
	volatile char big[256 << 10];
	memset((char *)big, 1, sizeof(big));
}

int main(void)
{
	region = mmap(NULL, REGION, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	fill_page = mmap(NULL, PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (region == MAP_FAILED || fill_page == MAP_FAILED)
		die("mmap");
	memset(region, 0x11, REGION / 2); /* written: the region is in the image */
	memset(fill_page, 0xab, PG);
	target = region + REGION - 16 * PG; /* never written */
	uffd = (int)syscall(SYS_userfaultfd, O_CLOEXEC);
	struct uffdio_api api = {.api = UFFD_API};
	if (uffd < 0 || ioctl(uffd, UFFDIO_API, &api) < 0)
		die("userfaultfd");
	if (pipe(pa) < 0 || pipe(pb) < 0)
		die("pipe");
	touch_stack();
	pthread_t h, a, b;
	if (pthread_create(&h, NULL, handler, NULL) || pthread_create(&a, NULL, thread_a, NULL) ||
	    pthread_create(&b, NULL, thread_b, NULL))
		die("pthread_create");
	printf("ready %d\n", getpid());
	fflush(stdout);
	char line[16];
	if (!fgets(line, sizeof(line), stdin) || strcmp(line, "go\n") != 0)
		return 1;
	if (write(pa[1], "x", 1) != 1)
		die("write");
	usleep(50 * 1000);
	if (write(pb[1], "x", 1) != 1)
		die("write");
	pthread_join(a, NULL);
	pthread_join(b, NULL);
	printf("A read %#x\n", a_value);
	fflush(stdout);
	return 0;
}
