#include "supervisor/kernel/vm.h"
#include "common/util.h"
#include "supervisor/kernel/procfs.h"

#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

/* pread of /proc/PID/mem, once (a short read is the caller's). */
static ssize_t mem_read(int fd, uint64_t addr, void *buf, size_t len)
{
	ssize_t n;
	do
		n = pread(fd, buf, len, (off_t)addr);
	while (n < 0 && errno == EINTR);
	return n < 0 ? -errno : n;
}

/* mem_read, and again once f has put an evicted range in place. */
static ssize_t mem_read_served(int fd, pid_t pid, uint64_t addr, void *buf, size_t len,
			       const struct vm_faulter *f)
{
	ssize_t n = mem_read(fd, addr, buf, len);
	if (n == -EIO && f && f->fault_in && f->fault_in(f->arg, pid, addr, len) > 0)
		n = mem_read(fd, addr, buf, len);
	return n;
}

static int mem_open(pid_t pid)
{
	return procfs_open(pid, "mem", O_RDONLY);
}

ssize_t vm_read(pid_t pid, uint64_t addr, void *buf, size_t len)
{
	int fd = mem_open(pid);
	if (fd < 0)
		return fd;
	ssize_t n = mem_read(fd, addr, buf, len);
	close(fd);
	return n;
}

int vm_pread_mem(int memfd, uint64_t addr, void *buf, size_t len)
{
	size_t got = 0;
	while (got < len) {
		ssize_t n = pread(memfd, (char *)buf + got, len - got, (off_t)(addr + got));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO; /* the mm is gone (fs/proc/base.c mem_rw) */
		got += (size_t)n;
	}
	return 0;
}

int vm_pwrite_mem(int memfd, uint64_t addr, const void *buf, size_t len)
{
	size_t put = 0;
	while (put < len) {
		ssize_t n = pwrite(memfd, (const char *)buf + put, len - put, (off_t)(addr + put));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO;
		put += (size_t)n;
	}
	return 0;
}

int vm_writev_mem(pid_t pid, int memfd, const struct iovec *loc, const struct iovec *rem, size_t n)
{
	while (n) {
		size_t k = MV_MIN(n, (size_t)IOV_MAX), total = 0;
		for (size_t i = 0; i < k; i++)
			total += loc[i].iov_len;
		ssize_t w = process_vm_writev(pid, loc, k, rem, k, 0);
		if (w == (ssize_t)total) {
			loc += k, rem += k, n -= k;
			continue;
		}
		size_t done = w > 0 ? (size_t)w : 0, i = 0;
		while (done >= loc[i].iov_len) /* i < k: done < total */
			done -= loc[i++].iov_len;
		int rc = vm_pwrite_mem(memfd, (uint64_t)(uintptr_t)rem[i].iov_base + done,
				       (const char *)loc[i].iov_base + done, loc[i].iov_len - done);
		if (rc < 0)
			return rc;
		loc += i + 1, rem += i + 1, n -= i + 1;
	}
	return 0;
}

ssize_t vm_write(pid_t pid, uint64_t addr, const void *buf, size_t len)
{
	struct iovec local = {.iov_base = (void *)buf, .iov_len = len};
	struct iovec remote = {.iov_base = (void *)(uintptr_t)addr, .iov_len = len};
	ssize_t n = process_vm_writev(pid, &local, 1, &remote, 1, 0);
	return n < 0 ? -errno : n;
}

static ssize_t read_string(int fd, pid_t pid, uint64_t addr, char *buf, size_t max,
			   const struct vm_faulter *f)
{
	size_t got = 0;
	while (got + 1 < max) {
		/* Read up to the next page boundary: the string may end just
		 * before an unmapped page. */
		size_t chunk = 4096 - ((addr + got) & 4095);
		chunk = MV_MIN(chunk, max - 1 - got);
		ssize_t n = mem_read_served(fd, pid, addr + got, buf + got, chunk, f);
		if (n <= 0) {
			if (got)
				break;
			return n < 0 ? n : -EFAULT;
		}
		char *nul = memchr(buf + got, '\0', (size_t)n);
		if (nul)
			return nul - buf;
		got += (size_t)n;
	}
	buf[got] = '\0';
	return (ssize_t)got;
}

ssize_t vm_read_string(pid_t pid, uint64_t addr, char *buf, size_t max, const struct vm_faulter *f)
{
	int fd = mem_open(pid);
	if (fd < 0)
		return fd;
	ssize_t n = read_string(fd, pid, addr, buf, max, f);
	close(fd);
	return n;
}

ssize_t vm_read_argv(pid_t pid, uint64_t argv, bool compat32, char *buf, size_t max,
		     size_t max_args, const struct vm_faulter *f)
{
	uint64_t ptrs[64];
	uint32_t ptrs32[64];
	max_args = MV_MIN(max_args, ARRAY_SIZE(ptrs));
	size_t width = compat32 ? 4 : 8;
	int fd = mem_open(pid);
	if (fd < 0)
		return fd;
	ssize_t n = mem_read_served(fd, pid, argv, compat32 ? (void *)ptrs32 : (void *)ptrs,
				    max_args * width, f);
	if (n < 0) {
		close(fd);
		return n;
	}
	size_t count = (size_t)n / width, used = 0;
	for (size_t i = 0; i < count && used + 1 < max; i++) {
		uint64_t p = compat32 ? ptrs32[i] : ptrs[i];
		if (!p)
			break;
		ssize_t len = read_string(fd, pid, p, buf + used, max - used, f);
		if (len < 0)
			break;
		used += (size_t)len + 1;
	}
	close(fd);
	return (ssize_t)used;
}
