/* Parsers for /proc text: pure functions (no I/O, no globals), so that
 * tests/unit/test_state.c and tests/fuzz/fuzz_procparse.c link them. The
 * supervisor reads the files in supervisor/kernel/ (procfs.h says what is
 * read where). The one parser of /proc/PID/maps lines is here; smaps
 * headers are maps lines and go through it too.
 *
 * Each returns 0, or -EINVAL when the text lacks a field it needs. */
#ifndef MV_PROCPARSE_H
#define MV_PROCPARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct proc_status {
	pid_t tgid;
	pid_t ppid;
	pid_t tracer_pid; /* TracerPid: the tracing thread, 0 if none */
	int threads;
	uint64_t vm_size;	   /* bytes */
	uint64_t vm_rss;	   /* bytes */
	int seccomp;		   /* Seccomp: mode */
	int seccomp_filters;	   /* Seccomp_filters (Linux 5.9), -1 when absent */
	uint64_t cap_eff;	   /* CapEff: the effective capabilities (in its user namespace) */
	uint64_t sig_cgt, sig_ign; /* SigCgt, SigIgn: signals with a handler, ignored */
	char name[64];
};

/* /proc/PID/status: Tgid, PPid and Threads are needed, the rest is not. */
int parse_status(const char *text, struct proc_status *out);

struct proc_stat {
	pid_t pid;
	char state;
	pid_t ppid;
	uint32_t flags; /* field 9: PF_* */
	int num_threads;
	uint64_t start_ticks;			    /* field 22 */
	uint64_t vsize;				    /* field 23, bytes */
	uint64_t rss_pages;			    /* field 24 */
	uint64_t start_code, end_code, start_stack; /* 26, 27, 28 */
	uint64_t start_brk;			    /* 47 */
	uint64_t arg_start, env_end;		    /* 48, 51 */
};

/* PF_IO_WORKER and PF_USER_WORKER in proc_stat.flags (include/linux/
 * sched.h): io_uring's io-wq and sqpoll threads (iou-wrk-*, iou-sqp-*),
 * vhost workers. Threads of the process that stop under ptrace but never
 * run user code. */
#define PROC_PF_KERNEL_LOOP (0x00000010u | 0x00004000u)

/* /proc/PID/stat: the comm field may hold spaces and parentheses, so the
 * fields are counted from the last ')'. */
int parse_stat(const char *text, struct proc_stat *out);

/* /proc/PID/statm: the first two fields, in pages (size, resident). An
 * exiting process may show it empty: -EINVAL. */
int parse_statm(const char *text, uint64_t *size, uint64_t *resident);

/* /proc/PID/task/TID/children: pids separated by spaces, appended to *v
 * (n used of cap, grown as needed). Always 0. */
int parse_pids(const char *text, pid_t **v, size_t *n, size_t *cap);

/* /proc/PID/fdinfo/FD: the open flags (octal). */
int parse_fdinfo_flags(const char *text, unsigned long *flags);

struct as_range;
/* What /proc/PID/fdinfo/FD of an io_uring instance tells of the memory
 * and files the kernel holds for it (io_uring/fdinfo.c): the registered
 * buffers (pinned with FOLL_LONGTERM: the kernel reads and writes them
 * without a fault) and the registered files (by path, escaped as
 * seq_file_path does: "\040" for a space, undone here). The kernel lists
 * the tables only when it gets the ring's lock (mutex_trylock): *_listed
 * short of the count means they were busy; read again. */
struct uring_info {
	uint32_t n_bufs, bufs_listed;
	struct as_range *bufs; /* [addr, addr+len), malloc'd */
	uint32_t n_files, files_listed;
	char **files; /* malloc'd paths, "<none>" for an empty slot */
};

/* -EINVAL for text that is not an io_uring fdinfo (no "UserBufs:"). */
int parse_uring_fdinfo(const char *text, struct uring_info *out);
void uring_info_free(struct uring_info *u);

/* One region as /proc/PID/maps prints it (fs/proc/task_mmu.c
 * show_map_vma), or as PROCMAP_QUERY returns it. name is not
 * NUL-terminated: name_len bytes, 0 for none (plain anonymous memory). */
struct proc_vma {
	uint64_t start, end;
	uint64_t offset;
	uint64_t inode;
	uint32_t dev_major, dev_minor;
	bool r, w, x, shared;
	const char *name;
	size_t name_len;
};

/* Called for each region of a walk: 0 to go on, > 0 to stop (the walk
 * returns 0), < 0 to stop with that error. */
typedef int (*proc_vma_fn)(void *arg, const struct proc_vma *v);

/* One maps line [line, eol): "start-end perms offset maj:min inode  name".
 * Parsed by hand: sscanf on a line of a 3 MiB buffer would measure the
 * whole rest of the buffer every time (glibc runs strlen on its input).
 * v->name points into the line. */
int parse_maps_line(const char *line, const char *eol, struct proc_vma *v);

/* Call fn for each region of maps text that overlaps [start, end), in
 * order. 0, -EINVAL at a line that is not a maps line, or fn's error. */
int parse_maps(const char *text, uint64_t start, uint64_t end, proc_vma_fn fn, void *arg);

/* The region's device number as stat(2) gives it (makedev). */
uint64_t proc_vma_dev(const struct proc_vma *v);

/* Is the region's name exactly name / does it start with prefix? */
bool proc_vma_named(const struct proc_vma *v, const char *name);
bool proc_vma_name_starts(const struct proc_vma *v, const char *prefix);

/* Is this region anonymous memory, whatever /proc calls it? Private and
 * shared anonymous mappings, the heap and stacks, memfds, SysV shm and
 * /dev/zero all are (the names of mm/shmem.c and ipc/shm.c). */
bool proc_vma_anon(const struct proc_vma *v);

/* The regions of /proc/PID/smaps whose VmFlags say the kernel treats them
 * specially at fork (kernel/fork.c dup_mmap): "dc" (MADV_DONTFORK: not in
 * the child at all) and "wf" (MADV_WIPEONFORK: empty in the child). Each
 * list (malloc'd, [start, end) pairs in address order) gets those regions;
 * returns 0, or -EINVAL for text that is not smaps. */
struct as_range;
int parse_fork_flags(const char *text, struct as_range **dc, size_t *n_dc, struct as_range **wf,
		     size_t *n_wf);

/* Each region of /proc/PID/smaps text with its Rss in bytes: fn(arg,
 * start, rss) in order. 0, or -EINVAL for text that is not smaps. */
int parse_smaps_rss(const char *text, int (*fn)(void *arg, uint64_t start, uint64_t rss),
		    void *arg);

#endif
