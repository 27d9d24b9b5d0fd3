/* Parsers for /proc text: pure functions, unit-tested. Each returns 0 or
 * -EINVAL when a field it needs is missing. */
#ifndef MV_PROCPARSE_H
#define MV_PROCPARSE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct proc_status {
	pid_t tgid;
	pid_t ppid;
	int threads;
	uint64_t vm_size; /* bytes */
	uint64_t vm_rss;  /* bytes */
	int seccomp;	  /* Seccomp: mode */
	char name[64];
};

/* /proc/PID/status */
int parse_status(const char *text, struct proc_status *out);

struct proc_stat {
	pid_t pid;
	char state;
	pid_t ppid;
	int num_threads;
	uint64_t start_ticks;			    /* field 22 */
	uint64_t vsize;				    /* field 23, bytes */
	uint64_t rss_pages;			    /* field 24 */
	uint64_t start_code, end_code, start_stack; /* 26, 27, 28 */
	uint64_t start_brk;			    /* 47 */
	uint64_t arg_start, env_end;		    /* 48, 51 */
};

/* /proc/PID/stat: the comm field may hold spaces and parentheses, so the
 * fields are counted from the last ')'. */
int parse_stat(const char *text, struct proc_stat *out);

/* The regions of /proc/PID/smaps whose VmFlags say the kernel treats them
 * specially at fork (kernel/fork.c dup_mmap): "dc" (MADV_DONTFORK: not in
 * the child at all) and "wf" (MADV_WIPEONFORK: empty in the child). Each
 * list (malloc'd, [start, end) pairs in address order) gets those regions;
 * returns 0, or -EINVAL for text that is not smaps. */
struct as_range;
int parse_fork_flags(const char *text, struct as_range **dc, size_t *n_dc, struct as_range **wf,
		     size_t *n_wf);

#endif
