/* The file behind a shared-memory mapping of another process (MAP_SHARED
 * anonymous memory, a memfd, a SysV segment: all shmem files), opened for
 * reading, and the runs of it that hold data.
 *
 * Ways in, in order:
 *   map_files  /proc/PID/map_files/START-END: the mapping's own file.
 *              Needs CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE in the
 *              initial user namespace (fs/proc/base.c proc_map_files_get_link).
 *   fd         a descriptor the process holds on the same file (same
 *              device and inode), reopened through /proc/PID/fd/N: a
 *              memfd the program kept open. Needs ptrace read access only.
 * Neither: the caller falls back to the pages present in the mapping. */
#ifndef MV_BACKING_H
#define MV_BACKING_H

#include "state/as.h"
#include "state/procparse.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Open the file mapped by region r of process tid. Returns an fd, and
 * sets *source to "map_files" or "fd"; -errno when neither way works. */
int backing_open(pid_t tid, const struct as_region *r, const char **source);

/* Open the file of the shared mapping [start, end) of process tid for
 * reading and writing, through /proc/PID/map_files only, checked to be
 * (dev, ino) (dev as makedev). An fd, or -errno. */
int backing_open_rw(pid_t tid, uint64_t start, uint64_t end, uint64_t dev, uint64_t ino);

/* Who else can reach a file: every process on the system (its /proc
 * entry) that maps it or holds a descriptor on it. */
struct backing_id {
	uint64_t dev, ino; /* dev as makedev */
};

enum backing_use {
	BACKING_MAPS = 1,    /* a mapping of it */
	BACKING_FD = 2,	     /* an open descriptor on it */
	BACKING_UNKNOWN = 3, /* the process's descriptors could not be read */
	/* Its maps could not be read (a process with capabilities memvisor
	 * lacks: ptrace access is refused), its descriptors could. */
	BACKING_MAPS_UNREAD = 4,
};

typedef void (*backing_user_fn)(void *arg, size_t idx, pid_t pid, enum backing_use how);

/* Call fn for every process but memvisor itself (and for every object of
 * ids[0..n) it maps or holds open; BACKING_UNKNOWN or BACKING_MAPS_UNREAD
 * with idx n for a process that could not be read). use_query: PROCMAP_QUERY works.
 * Processes of another pid namespace than /proc's are not seen. 0, or
 * -errno when /proc cannot be listed. */
int backing_users(const struct backing_id *ids, size_t n, bool use_query, backing_user_fn fn,
		  void *arg);

/* The io_uring instances a process reaches: they hold files (their
 * registered-file table) and pinned memory of their own. */
/* Every io_uring instance process pid holds a descriptor of (each ring
 * once): fn(arg, info) for each (parse_uring_fdinfo), its tables read
 * until the kernel listed them whole (it lists them only when it gets the
 * ring's lock: up to 100 tries, 1 ms apart). Returns how many, or
 * -errno: -EAGAIN when a ring's tables stayed busy; -EBADFD when pid maps
 * more rings than it holds descriptors of (a descriptor closed after
 * IORING_REGISTER_RING_FDS: that ring cannot be asked); fn's error. */
int backing_urings(pid_t pid, bool use_query, int (*fn)(void *arg, const struct uring_info *u),
		   void *arg);

/* Append to *runs the page-aligned runs of [0, size) that hold data,
 * from SEEK_DATA/SEEK_HOLE (holes cost nothing to skip). 0 or -errno. */
int backing_data_runs(int fd, uint64_t size, struct as_range **runs, size_t *n, size_t *cap);

/* Read len bytes at off; past the end of the file reads zeros (the last
 * page of a file whose size is not a page multiple). 0 or -errno. */
int backing_read(int fd, uint64_t off, void *buf, size_t len);

#endif
