/* Kernel constants newer than the installed headers, each with a fallback
 * definition. The values are the kernel's UAPI; the features themselves are
 * probed at run time (see supervisor/kernel/features.c), never assumed. */
#ifndef MV_COMPAT_H
#define MV_COMPAT_H

#include <linux/seccomp.h>
#include <linux/ioctl.h>
#include <stdint.h>

/* Linux 5.19 */
#ifndef SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV
#define SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV (1UL << 5)
#endif

/* Linux 6.6: SECCOMP_IOCTL_NOTIF_SET_FLAGS with SYNC_WAKE_UP makes the
 * kernel wake the supervisor on the notifying CPU and the tracee on the
 * answering CPU (kernel/seccomp.c: wake_up_poll_on_current_cpu). */
#ifndef SECCOMP_IOCTL_NOTIF_SET_FLAGS
#define SECCOMP_IOCTL_NOTIF_SET_FLAGS SECCOMP_IOW(4, __u64)
#endif
#ifndef SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP
#define SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP (1UL << 0)
#endif

#ifndef PR_SET_MDWE
#define PR_SET_MDWE 65
#define PR_GET_MDWE 66
#endif
#ifndef PR_MDWE_REFUSE_EXEC_GAIN
#define PR_MDWE_REFUSE_EXEC_GAIN (1UL << 0)
#endif
#ifndef PR_MDWE_NO_INHERIT
#define PR_MDWE_NO_INHERIT (1UL << 1)
#endif

#ifndef AUDIT_ARCH_X86_64
#define AUDIT_ARCH_X86_64 0xc000003eU
#endif
#ifndef AUDIT_ARCH_I386
#define AUDIT_ARCH_I386 0x40000003U
#endif
#ifndef __X32_SYSCALL_BIT
#define __X32_SYSCALL_BIT 0x40000000U
#endif

/* Linux 6.11: PROCMAP_QUERY on a /proc/PID/maps fd. */
#ifndef PROCMAP_QUERY
struct procmap_query {
	uint64_t size;
	uint64_t query_flags;
	uint64_t query_addr;
	uint64_t vma_start;
	uint64_t vma_end;
	uint64_t vma_flags;
	uint64_t vma_page_size;
	uint64_t vma_offset;
	uint64_t inode;
	uint32_t dev_major;
	uint32_t dev_minor;
	uint32_t vma_name_size;
	uint32_t build_id_size;
	uint64_t vma_name_addr;
	uint64_t build_id_addr;
};
#define PROCMAP_QUERY			   _IOWR('f', 17, struct procmap_query)
#define PROCMAP_QUERY_VMA_READABLE	   0x01
#define PROCMAP_QUERY_VMA_WRITABLE	   0x02
#define PROCMAP_QUERY_VMA_EXECUTABLE	   0x04
#define PROCMAP_QUERY_VMA_SHARED	   0x08
#define PROCMAP_QUERY_COVERING_OR_NEXT_VMA 0x10
#define PROCMAP_QUERY_FILE_BACKED_VMA	   0x20
#endif

/* Linux 6.7: PAGEMAP_SCAN on a /proc/PID/pagemap fd. */
#ifndef PAGEMAP_SCAN
struct page_region {
	uint64_t start;
	uint64_t end;
	uint64_t categories;
};
struct pm_scan_arg {
	uint64_t size;
	uint64_t flags;
	uint64_t start;
	uint64_t end;
	uint64_t walk_end;
	uint64_t vec;
	uint64_t vec_len;
	uint64_t max_pages;
	uint64_t category_inverted;
	uint64_t category_mask;
	uint64_t category_anyof_mask;
	uint64_t return_mask;
};
#define PAGEMAP_SCAN	   _IOWR('f', 16, struct pm_scan_arg)
#define PAGE_IS_WPALLOWED  (1 << 0)
#define PAGE_IS_WRITTEN	   (1 << 1)
#define PAGE_IS_FILE	   (1 << 2)
#define PAGE_IS_PRESENT	   (1 << 3)
#define PAGE_IS_SWAPPED	   (1 << 4)
#define PAGE_IS_PFNZERO	   (1 << 5)
#define PAGE_IS_HUGE	   (1 << 6)
#define PAGE_IS_SOFT_DIRTY (1 << 7)
#endif

/* Linux 6.13: PIDFD_GET_INFO on a pidfd (exit_code since 6.15). */
#ifndef PIDFD_GET_INFO
struct pidfd_info {
	uint64_t mask;
	uint64_t cgroupid;
	uint32_t pid;
	uint32_t tgid;
	uint32_t ppid;
	uint32_t ruid, rgid, euid, egid, suid, sgid, fsuid, fsgid;
	int32_t exit_code;
	uint32_t coredump_mask;
	uint32_t spare1;
};
#define PIDFD_GET_INFO	    _IOWR(0xFF, 11, struct pidfd_info)
#define PIDFD_INFO_PID	    (1UL << 0)
#define PIDFD_INFO_CREDS    (1UL << 1)
#define PIDFD_INFO_CGROUPID (1UL << 2)
#define PIDFD_INFO_EXIT	    (1UL << 3)
#endif

/* Linux 6.5: a pidfd of a UNIX socket's peer. */
#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77
#endif

/* Linux 6.1: synchronous collapse into transparent huge pages. */
#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25
#endif
#ifndef SYS_process_madvise
#define SYS_process_madvise 440
#endif

/* Linux 6.5: how much of a file range is in the page cache, without
 * reading it or starting readahead (mm/filemap.c cachestat). */
#ifndef SYS_cachestat
#if defined(__x86_64__) || defined(__aarch64__)
#define SYS_cachestat 451
#endif
#endif
struct mv_cachestat_range {
	uint64_t off, len;
};
struct mv_cachestat {
	uint64_t nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted;
};

#endif
