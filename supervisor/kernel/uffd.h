/* userfaultfd ioctls on a uffd of another process's mm (created inside it
 * by a remote syscall and fetched with pidfd_getfd): the raw ioctl() calls
 * on uffds live here only.
 *
 * "The mm is gone" (the process exited or exec'ed: -ESRCH from
 * UFFDIO_COPY/ZEROPAGE, mm_users is 0) is an outcome the caller handles.
 * Failure points (MEMVISOR_FAULT): uffd_api, uffd_register, uffd_copy.
 * Functions return 0 or -errno. */
#ifndef MV_UFFD_H
#define MV_UFFD_H

#include <linux/userfaultfd.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The features evict needs: follow munmap, mremap, madvise and fork of
 * registered memory (each event blocks the calling thread until read). */
#define UFFD_EVICT_FEATURES                                                                        \
	(UFFD_FEATURE_EVENT_FORK | UFFD_FEATURE_EVENT_REMAP | UFFD_FEATURE_EVENT_REMOVE |          \
	 UFFD_FEATURE_EVENT_UNMAP)

/* Newer than the installed headers (Linux 6.6): UFFDIO_POISON marks a
 * missing page so that an access to it raises SIGBUS (a kernel access
 * fails with EFAULT), as a memory error would. */
#ifndef UFFD_FEATURE_POISON
#define UFFD_FEATURE_POISON (1 << 14)
#endif
#ifndef _UFFDIO_POISON
#define _UFFDIO_POISON (0x08)
#endif

/* Newer feature bits, named by `memvisor check`: write-protect faults on
 * never-populated pages (6.4), asynchronous write-protect for dirty
 * tracking with PAGEMAP_SCAN (6.7), UFFDIO_MOVE (6.8). */
#ifndef UFFD_FEATURE_WP_UNPOPULATED
#define UFFD_FEATURE_WP_UNPOPULATED (1 << 13)
#endif
#ifndef UFFD_FEATURE_WP_ASYNC
#define UFFD_FEATURE_WP_ASYNC (1 << 15)
#endif
#ifndef UFFD_FEATURE_MOVE
#define UFFD_FEATURE_MOVE (1 << 16)
#endif

/* The features the kernel offers on a new uffd: UFFDIO_API asking for
 * none, which it answers with all it has. The uffd then takes no other
 * UFFDIO_API: for a probe. No failure point. */
int uffd_features(int fd, uint64_t *avail);

/* UFFDIO_API asking for `want`; *missing gets the wanted features the
 * kernel does not have (then -EOPNOTSUPP). */
int uffd_api(int fd, uint64_t want, uint64_t *missing);

/* UFFDIO_API asking for `need` and whatever of `optional` the kernel has;
 * *got gets the features granted. -EOPNOTSUPP when part of need is
 * missing (*got then holds the missing ones). */
int uffd_api_best(int fd, uint64_t need, uint64_t optional, uint64_t *got);

/* A userfaultfd of memvisor's own mm (userfaultfd(2), O_CLOEXEC|O_NONBLOCK),
 * its UFFDIO_API done asking for `features` (all needed). For shared
 * memory: memvisor's own mapping of an evicted object, registered so that
 * UFFDIO_COPY can put a page into the object's page cache atomically. */
int uffd_open_local(uint64_t features, int *fd);

/* Register [start, start+len) for missing-page faults. */
int uffd_register(int fd, uint64_t start, uint64_t len);

/* Register [start, start+len) in mode (UFFDIO_REGISTER_MODE_*). */
int uffd_register_mode(int fd, uint64_t start, uint64_t len, uint64_t mode);

/* Write-protect [start, start+len) (registered in MODE_WP), or lift the
 * protection and wake the threads waiting on it. -EAGAIN: the layout is
 * changing (an event of this uffd is not read yet: mmap_changing, which
 * the kernel checks first); -ESRCH: the mm is gone. Failure point
 * uffd_writeprotect (EIO). */
int uffd_writeprotect(int fd, uint64_t start, uint64_t len, bool protect);

/* Unregister [start, start+len): its faults go back to the kernel. */
int uffd_unregister(int fd, uint64_t start, uint64_t len);

/* Install len bytes of src at dst (page-aligned) and wake the waiters.
 * Pages that already exist are skipped: *installed gets the bytes this
 * call put in place. -EAGAIN: the layout is changing (an event is not
 * read yet): retry after reading events. */
int uffd_copy(int fd, uint64_t dst, const void *src, uint64_t len, uint64_t *installed);

/* Map the zero page at one page (already present: woken, 0). */
int uffd_zeropage(int fd, uint64_t addr);

/* Make one missing page unservable: an access raises SIGBUS (needs
 * UFFD_FEATURE_POISON). Wakes its waiters. Already present: -EEXIST;
 * -EAGAIN as for uffd_copy. */
int uffd_poison(int fd, uint64_t addr);

/* Wake the threads waiting on [addr, addr+len). */
int uffd_wake(int fd, uint64_t addr, uint64_t len);

/* Is the uffd's mm still alive? probe_addr is an address of the mm that
 * is not registered with fd (its vdso): a zero-page request there fails
 * with ENOENT while the mm lives and ESRCH once it is gone. */
int uffd_mm_alive(int fd, uint64_t probe_addr);

#endif
