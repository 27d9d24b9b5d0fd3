/* Which argument of a call is what, for the policy: the prot, the flags
 * (and the family of names they use), the length, the fd. One table for
 * the parser (which conditions a syscall can have), the decision (reading
 * the values) and the filter compiler (which register to compare).
 *
 * On i386 every argument is a 32-bit register: values are truncated to 32
 * bits here, as the kernel's compat entry points do. The i386 "mmap" is
 * old_mmap, whose arguments are in memory: it has no arguments here. */
#ifndef MV_CALLARGS_H
#define MV_CALLARGS_H

#include "policy/names.h"
#include "state/call.h"

#include <stdbool.h>
#include <stdint.h>

struct callargs_layout {
	int8_t prot;		  /* argument index, or -1 */
	int8_t flags;		  /* argument index, or -1 */
	int8_t len;		  /* argument index, or -1 */
	int8_t fd;		  /* argument index, or -1 */
	enum names_family family; /* of the flags argument */
	bool backing;		  /* anonymous vs file-backed can be told (MAP_ANONYMOUS) */
};

/* The layout of a syscall on an ABI (all -1 where nothing is known). */
struct callargs_layout callargs_layout(enum mv_sc sc, enum mv_abi abi);

/* Does the call have readable arguments at all? False only for the i386
 * old_mmap. */
bool callargs_readable(const struct mv_call *c);

/* Argument i as the kernel sees it (32 bits on i386). */
uint64_t callargs_arg(const struct mv_call *c, int i);

/* Accessors; each returns false when the call has no such argument. */
bool callargs_prot(const struct mv_call *c, uint64_t *prot);
bool callargs_flags(const struct mv_call *c, uint64_t *flags);
bool callargs_len(const struct mv_call *c, uint64_t *len);
bool callargs_fd(const struct mv_call *c, int *fd);

/* mmap/mmap2 with MAP_ANONYMOUS. */
bool callargs_anon(const struct mv_call *c);

/* The i386 ipc(2) multiplexer: is it a SHMAT call (call 21, any version)? */
bool callargs_ipc_shmat(const struct mv_call *c);

/* shmat and ipc(SHMAT): the shmflg, shmid and address arguments. */
bool callargs_shmat(const struct mv_call *c, int *shmid, uint64_t *shmflg, uint64_t *addr);

#endif
