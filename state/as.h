/* The address-space model of one process: the kernel's list of regions as
 * of the last reconciliation, plus what only the supervisor knows (which
 * notified call made or last changed each region, and when).
 *
 * The kernel is the truth. A CONTINUE'd call does not tell the supervisor
 * its result, so notified calls are only logged (as_log_call, cheap, on
 * the notify thread) and the model is rebuilt from the kernel when a
 * question needs an exact answer (as_reconcile): the new kernel layout,
 * the previous model and the logged calls together give each region its
 * provenance. Pure code; the caller serialises access.
 *
 * Split like gVisor's mm: this header has the types and invariants;
 * as_maps.c keeps the regions and builds them from the kernel's layout
 * (parsed by state/procparse.c), as_provenance.c matches calls to
 * regions. */
#ifndef MV_AS_H
#define MV_AS_H

#include "common/syscalls.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum as_kind {
	AS_ANON,     /* private anonymous */
	AS_FILE,     /* backed by a file */
	AS_SHMEM,    /* shared anonymous, memfd, SysV shm */
	AS_HEAP,     /* [heap], the brk area */
	AS_STACK,    /* [stack] */
	AS_VDSO,     /* [vdso] */
	AS_VVAR,     /* [vvar], [vvar_vclock] */
	AS_VSYSCALL, /* [vsyscall] */
	AS_OTHER,    /* any other [special] mapping */
	AS_KIND_COUNT,
};

const char *as_kind_name(enum as_kind k);

#define AS_PROT_READ  0x1
#define AS_PROT_WRITE 0x2
#define AS_PROT_EXEC  0x4

/* Who made a region, or last changed it: a notified call, or the exec
 * that built the initial image. sc == MV_SC_UNKNOWN: not known (made
 * before memvisor looked, or the call log overflowed). */
struct as_origin {
	enum mv_sc sc;
	uint64_t time_ns; /* wall clock */
};

/* Invariants of a model: regions sorted by start, non-overlapping,
 * start < end, both page-aligned. */
struct as_region {
	uint64_t start, end;
	uint64_t offset; /* file offset */
	uint64_t inode;
	uint32_t dev_major, dev_minor;
	uint8_t prot; /* AS_PROT_* */
	bool shared;
	enum as_kind kind;
	char *path;	    /* file path or [special] name; NULL for plain anonymous */
	uint64_t committed; /* resident bytes */
	struct as_origin created, changed;
};

struct as_model {
	struct as_region *r;
	size_t n, cap;
	uint64_t reconciled_ns; /* wall clock of the kernel snapshot */
	uint64_t mapped;	/* sum of sizes */
	uint64_t committed;	/* sum of committed */
};

/* One logged call, as much as matching needs. */
struct as_call {
	enum mv_sc sc;
	uint64_t args[6];
	uint64_t time_ns;
};

#define AS_LOG_SIZE 256

/* A ring of the calls since the last reconciliation. */
struct as_log {
	struct as_call call[AS_LOG_SIZE];
	size_t head;   /* next slot */
	size_t count;  /* valid entries, <= AS_LOG_SIZE */
	uint64_t lost; /* calls that fell off the ring */
};

void as_model_init(struct as_model *m);
void as_model_free(struct as_model *m);
/* Append a region (takes ownership of path). */
struct as_region *as_model_push(struct as_model *m, const struct as_region *r);

/* Log a call that may change the layout (mmap, munmap, mremap, mprotect,
 * brk, shmat, ...). Calls that cannot are ignored. */
void as_log_call(struct as_log *log, enum mv_sc sc, const uint64_t args[6], uint64_t time_ns);
void as_log_clear(struct as_log *log);

/* Append the region the kernel describes in v to the model (a
 * proc_vma_fn, so that a walk of the kernel's regions builds a model);
 * no provenance yet. Always 0. */
struct proc_vma;
int as_model_add_vma(void *model, const struct proc_vma *v);

/* Parse /proc/PID/maps text into m (replacing its content). 0 or -EINVAL. */
int as_parse_maps(const char *text, struct as_model *m);

/* Set the committed bytes of each region of m that /proc/PID/smaps text
 * lists (by its start) from its Rss, then m's totals. 0, or -EINVAL for
 * text that is not smaps. */
int as_apply_smaps_rss(const char *text, struct as_model *m);

/* The kind of a region from its name, sharing and inode. */
enum as_kind as_classify(const char *path, bool shared, uint64_t inode);

/* Give every region of fresh (a new kernel snapshot) its provenance:
 * carried over from the overlapping regions of old, or matched to the
 * logged calls. exec_ns != 0: fresh is the first snapshot after an exec
 * (of the program exe) at that time; the program's own mappings (and its
 * bss) and the special ones were made by the exec. A region nothing
 * explains stays MV_SC_UNKNOWN (shown as null). */
void as_provenance(struct as_model *fresh, const struct as_model *old, const struct as_log *log,
		   uint64_t exec_ns, const char *exe);

/* A run of resident pages [start, end). */
struct as_range {
	uint64_t start, end;
};

/* qsort order of ranges: by start. */
int as_range_cmp(const void *a, const void *b);

/* Sort v[0..n) by start and merge the ranges that overlap or touch, in
 * place; returns how many are left. */
size_t as_ranges_merge(struct as_range *v, size_t n);

/* Set each region's committed bytes from resident runs sorted by start
 * (runs may span several regions), and the model's totals. */
void as_apply_resident(struct as_model *m, const struct as_range *runs, size_t n);

/* Recompute m->mapped and m->committed from the regions. */
void as_model_totals(struct as_model *m);

/* Index of the region containing addr, or -1. */
long as_find(const struct as_model *m, uint64_t addr);

#endif
