/* Reading another process's memory through /proc/PID/mem, writing it with
 * process_vm_writev: no ptrace stop. Reads go through /proc/PID/mem, not
 * process_vm_readv: that one pins what it reads (FOLL_PIN), and a pin of
 * an anonymous page shared copy-on-write unshares it (Linux 5.19), so
 * reading an exec's path out of a forked child's heap gave the child a
 * copy of that page. Functions return bytes moved or -errno. Never use
 * what is read here for a decision about the call that is being answered
 * without checking the notification is still valid afterwards (the
 * tracee's other threads may change it). */
#ifndef MV_VM_H
#define MV_VM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>
#include <sys/types.h>

ssize_t vm_read(pid_t pid, uint64_t addr, void *buf, size_t len);

/* A page that /proc/PID/mem cannot read (-EIO) may be one memvisor
 * evicted: registered with a userfaultfd, which a remote read does not
 * wait on (mm/gup.c: no FAULT_FLAG_ALLOW_RETRY, so handle_userfault
 * refuses). fault_in puts [addr, addr+len) of thread tid's process in
 * place (reload/evict.h evict_fault_in) and returns > 0 if it did, and
 * the read is tried again; 0 when the range is not evicted memory. */
struct vm_faulter {
	int (*fault_in)(void *arg, pid_t tid, uint64_t addr, size_t len);
	void *arg;
};

/* Read through an open /proc/PID/mem, which reads pages the process
 * cannot (PROT_NONE, write-only) because the kernel reads them with
 * FOLL_FORCE (fs/proc/base.c mem_rw), and, unlike process_vm_readv, does
 * not unshare pages shared copy-on-write (supervisor/checkpoint/job.c).
 * 0 or -errno; -EIO or -EFAULT for an unmapped page. */
int vm_pread_mem(int memfd, uint64_t addr, void *buf, size_t len);
/* Write through an open /proc/PID/mem (opened O_RDWR): it writes pages
 * the process may not (read-only private memory gets its copy on write,
 * FOLL_FORCE). 0 or -errno; -EIO once the mm is gone. */
int vm_pwrite_mem(int memfd, uint64_t addr, const void *buf, size_t len);

/* Write n pieces into process pid (loc[i] to rem[i], of the same
 * lengths): one process_vm_writev for them all, and what it stops at (a
 * page the process may not write: protected read-only since) through
 * /proc/PID/mem (memfd), which writes past protections; then the rest the
 * same way. 0 or -errno. */
int vm_writev_mem(pid_t pid, int memfd, const struct iovec *loc, const struct iovec *rem, size_t n);
ssize_t vm_write(pid_t pid, uint64_t addr, const void *buf, size_t len);

/* A NUL-terminated string of at most max - 1 bytes (truncated beyond).
 * Returns its length or -errno. f (may be NULL) serves evicted pages. */
ssize_t vm_read_string(pid_t pid, uint64_t addr, char *buf, size_t max, const struct vm_faulter *f);

/* argv (an array of pointers ending in NULL) as NUL-separated strings, at
 * most max bytes and max_args entries; 64-bit or 32-bit pointers. Returns
 * the bytes used in buf or -errno. */
ssize_t vm_read_argv(pid_t pid, uint64_t argv, bool compat32, char *buf, size_t max,
		     size_t max_args, const struct vm_faulter *f);

#endif
