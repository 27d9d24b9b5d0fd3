/* userfaultfd ioctls (supervisor/kernel/uffd.h). */
#include "supervisor/kernel/uffd.h"
#include "common/fault.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#define UFFD_PAGE 4096u

int uffd_api(int fd, uint64_t want, uint64_t *missing)
{
	*missing = 0;
	FAULT_RETURN("uffd_api", EINVAL);
	struct uffdio_api api = {.api = UFFD_API, .features = want};
	if (ioctl(fd, UFFDIO_API, &api) == 0)
		return 0;
	int err = errno;
	/* The kernel refuses unknown features as a whole: ask what it has. */
	struct uffdio_api probe = {.api = UFFD_API};
	if (err == EINVAL && ioctl(fd, UFFDIO_API, &probe) == 0) {
		*missing = want & ~probe.features;
		return -EOPNOTSUPP;
	}
	return -err;
}

int uffd_features(int fd, uint64_t *avail)
{
	struct uffdio_api api = {.api = UFFD_API};
	if (ioctl(fd, UFFDIO_API, &api) < 0)
		return -errno;
	*avail = api.features;
	return 0;
}

int uffd_api_best(int fd, uint64_t need, uint64_t optional, uint64_t *got)
{
	uint64_t missing;
	int rc = uffd_api(fd, need | optional, &missing);
	if (rc == -EOPNOTSUPP && !(missing & need)) {
		/* A uffd takes UFFDIO_API once only when it succeeds. */
		optional &= ~missing;
		rc = uffd_api(fd, need | optional, &missing);
	}
	*got = rc == 0 ? need | optional : missing & need;
	return rc;
}

int uffd_open_local(uint64_t features, int *fd)
{
	*fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	if (*fd < 0)
		return -errno;
	uint64_t missing;
	int rc = uffd_api(*fd, features, &missing);
	if (rc < 0) {
		close(*fd);
		*fd = -1;
	}
	return rc;
}

int uffd_register(int fd, uint64_t start, uint64_t len)
{
	return uffd_register_mode(fd, start, len, UFFDIO_REGISTER_MODE_MISSING);
}

int uffd_register_mode(int fd, uint64_t start, uint64_t len, uint64_t mode)
{
	FAULT_RETURN("uffd_register", EINVAL);
	struct uffdio_register reg = {.range = {start, len}, .mode = mode};
	return ioctl(fd, UFFDIO_REGISTER, &reg) < 0 ? -errno : 0;
}

int uffd_writeprotect(int fd, uint64_t start, uint64_t len, bool protect)
{
	FAULT_RETURN("uffd_writeprotect", EIO);
	struct uffdio_writeprotect wp = {.range = {start, len},
					 .mode = protect ? UFFDIO_WRITEPROTECT_MODE_WP : 0};
	for (;;) {
		if (ioctl(fd, UFFDIO_WRITEPROTECT, &wp) == 0)
			return 0;
		if (errno != EINTR)
			return -errno;
	}
}

int uffd_unregister(int fd, uint64_t start, uint64_t len)
{
	struct uffdio_range r = {start, len};
	return ioctl(fd, UFFDIO_UNREGISTER, &r) < 0 ? -errno : 0;
}

int uffd_copy(int fd, uint64_t dst, const void *src, uint64_t len, uint64_t *installed)
{
	FAULT_RETURN("uffd_copy", EIO);
	uint64_t done = 0;
	*installed = 0;
	while (done < len) {
		struct uffdio_copy c = {
		    .dst = dst + done, .src = (uint64_t)(uintptr_t)src + done, .len = len - done};
		if (ioctl(fd, UFFDIO_COPY, &c) == 0) {
			*installed += len - done;
			return 0;
		}
		int err = errno;
		/* c.copy: bytes copied before the failure, or -errno. */
		if (c.copy > 0) {
			done += (uint64_t)c.copy;
			*installed += (uint64_t)c.copy;
		}
		if (err == EEXIST) {
			/* This page is there already (a fault or the loader
			 * put it there): make sure its waiters run, skip it. */
			uffd_wake(fd, dst + done, UFFD_PAGE);
			done += UFFD_PAGE;
			continue;
		}
		if (err == EINTR || (err == EAGAIN && c.copy > 0))
			continue;
		return -err;
	}
	return 0;
}

int uffd_zeropage(int fd, uint64_t addr)
{
	struct uffdio_zeropage z = {.range = {addr, UFFD_PAGE}};
	if (ioctl(fd, UFFDIO_ZEROPAGE, &z) == 0)
		return 0;
	if (errno == EEXIST)
		return uffd_wake(fd, addr, UFFD_PAGE);
	return -errno;
}

struct mv_uffdio_poison {
	struct uffdio_range range;
	uint64_t mode;
	int64_t updated;
};
#define MV_UFFDIO_POISON _IOWR(UFFDIO, _UFFDIO_POISON, struct mv_uffdio_poison)

int uffd_poison(int fd, uint64_t addr)
{
	struct mv_uffdio_poison p = {.range = {addr, UFFD_PAGE}};
	for (;;) {
		if (ioctl(fd, MV_UFFDIO_POISON, &p) == 0)
			return 0;
		if (errno != EINTR)
			return -errno;
	}
}

int uffd_wake(int fd, uint64_t addr, uint64_t len)
{
	struct uffdio_range r = {addr, len};
	return ioctl(fd, UFFDIO_WAKE, &r) < 0 ? -errno : 0;
}

int uffd_mm_alive(int fd, uint64_t probe_addr)
{
	struct uffdio_zeropage z = {.range = {probe_addr, UFFD_PAGE}};
	if (ioctl(fd, UFFDIO_ZEROPAGE, &z) == 0 || errno != ESRCH)
		return 1;
	return 0;
}
