/* rb_uffd_shm: shared anonymous memory registered with the program's own
 * userfaultfd (missing pages, no handler), for a tree's mark
 * (tests/bats/rollback.bats): the kernel will not read its missing pages
 * for another process, so the mark leaves it as it is instead of failing.
 *
 * Maps 1 MiB MAP_SHARED | MAP_ANONYMOUS, writes its first page,
 * registers it, prints "ready PID", then answers each input read with
 * "seen N", N the reads before it (a private counter). It prints "no
 * userfaultfd" and exits 3 where it cannot have one. */
#include "wl.h"

#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif

static unsigned long seen;

int main(void)
{
	size_t len = 1 << 20;
	char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return 1;
	memset(p, 1, 4096);
	int u = (int)syscall(SYS_userfaultfd, O_CLOEXEC);
	if (u < 0)
		u = (int)syscall(SYS_userfaultfd, O_CLOEXEC | UFFD_USER_MODE_ONLY);
	struct uffdio_api a = {.api = UFFD_API};
	struct uffdio_register r = {.range = {(unsigned long)p, len},
				    .mode = UFFDIO_REGISTER_MODE_MISSING};
	if (u < 0 || ioctl(u, UFFDIO_API, &a) < 0 || ioctl(u, UFFDIO_REGISTER, &r) < 0) {
		say("no userfaultfd\n");
		return 3;
	}
	say("ready %d\n", (int)getpid());
	char b[64];
	for (;;) {
		ssize_t n = read(0, b, sizeof(b));
		if (n <= 0)
			return 0;
		say("seen %lu\n", seen++);
	}
}
