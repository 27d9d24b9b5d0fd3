/* The system calls memvisor notifies: one X-macro table, the single source
 * for the filter, decoding, statistics and the policy's syscall names.
 *
 * Columns: name (as libseccomp spells it), class, argument names (x86_64
 * order, comma-separated; used for events and decoding). Names that exist only on
 * some ABIs (mmap2 and ipc are i386 only) are resolved per ABI at start-up;
 * a name missing on an ABI simply has no number there. */
#ifndef MV_SYSCALLS_H
#define MV_SYSCALLS_H

#include <stdint.h>

/* MEMORY: the calls the policy is about. LIFECYCLE: process tracking, always
 * notified. GUARD: calls that are not about memory but could undo a policy
 * (personality(READ_IMPLIES_EXEC), lifting RLIMIT_AS, ptrace pokes); they are
 * notified only when the active policy needs them, and only for the
 * argument values that matter (policy/needs.c). */
enum mv_sc_class { MV_SC_MEMORY, MV_SC_LIFECYCLE, MV_SC_GUARD };

#define MV_SYSCALL_TABLE(X)                                                                        \
	X(mmap, MV_SC_MEMORY, "addr,length,prot,flags,fd,offset")                                  \
	X(mmap2, MV_SC_MEMORY, "addr,length,prot,flags,fd,pgoffset")                               \
	X(munmap, MV_SC_MEMORY, "addr,length")                                                     \
	X(mremap, MV_SC_MEMORY, "old_address,old_size,new_size,flags,new_address")                 \
	X(mprotect, MV_SC_MEMORY, "addr,length,prot")                                              \
	X(pkey_mprotect, MV_SC_MEMORY, "addr,length,prot,pkey")                                    \
	X(brk, MV_SC_MEMORY, "addr")                                                               \
	X(madvise, MV_SC_MEMORY, "addr,length,advice")                                             \
	X(process_madvise, MV_SC_MEMORY, "pidfd,iovec,vlen,advice,flags")                          \
	X(mlock, MV_SC_MEMORY, "addr,length")                                                      \
	X(mlock2, MV_SC_MEMORY, "addr,length,flags")                                               \
	X(munlock, MV_SC_MEMORY, "addr,length")                                                    \
	X(mlockall, MV_SC_MEMORY, "flags")                                                         \
	X(munlockall, MV_SC_MEMORY, "")                                                            \
	X(remap_file_pages, MV_SC_MEMORY, "addr,size,prot,pgoff,flags")                            \
	X(shmat, MV_SC_MEMORY, "shmid,shmaddr,shmflg")                                             \
	X(shmdt, MV_SC_MEMORY, "shmaddr")                                                          \
	X(ipc, MV_SC_MEMORY, "call,first,second,third,ptr,fifth")                                  \
	X(memfd_create, MV_SC_MEMORY, "name,flags")                                                \
	X(map_shadow_stack, MV_SC_MEMORY, "addr,size,flags")                                       \
	X(mbind, MV_SC_MEMORY, "addr,len,mode,nodemask,maxnode,flags")                             \
	X(set_mempolicy_home_node, MV_SC_MEMORY, "start,len,home_node,flags")                      \
	X(mseal, MV_SC_MEMORY, "addr,len,flags")                                                   \
	X(io_setup, MV_SC_MEMORY, "nr_events,ctx_idp")                                             \
	X(clone, MV_SC_LIFECYCLE, "flags,stack,parent_tid,child_tid,tls")                          \
	X(clone3, MV_SC_LIFECYCLE, "uargs,size")                                                   \
	X(fork, MV_SC_LIFECYCLE, "")                                                               \
	X(vfork, MV_SC_LIFECYCLE, "")                                                              \
	X(execve, MV_SC_LIFECYCLE, "filename,argv,envp")                                           \
	X(execveat, MV_SC_LIFECYCLE, "dirfd,pathname,argv,envp,flags")                             \
	X(personality, MV_SC_GUARD, "persona")                                                     \
	X(prlimit64, MV_SC_GUARD, "pid,resource,new_limit,old_limit")                              \
	X(setrlimit, MV_SC_GUARD, "resource,rlim")                                                 \
	X(ptrace, MV_SC_GUARD, "request,pid,addr,data")                                            \
	X(prctl, MV_SC_GUARD, "option,arg2,arg3,arg4,arg5")                                        \
	X(ioctl, MV_SC_GUARD, "fd,cmd,arg")

enum mv_sc {
#define X(name, cls, args) MV_SC_##name,
	MV_SYSCALL_TABLE(X)
#undef X
	    MV_SC_COUNT,
	MV_SC_UNKNOWN = 0xff,
};

/* The ABIs a tracee can enter the kernel through on x86_64. */
enum mv_abi { MV_ABI_X86_64, MV_ABI_I386, MV_ABI_X32, MV_ABI_COUNT };

/* Resolve every table name to its number on every ABI (uses libseccomp's
 * tables). Call once at start-up before anything else here. 0 or -errno. */
int syscalls_init(void);

const char *syscalls_name(enum mv_sc sc);
enum mv_sc_class syscalls_class(enum mv_sc sc);
const char *syscalls_abi_name(enum mv_abi abi);

/* The comma-separated argument names of a call ("" for none). */
const char *syscalls_arg_names(enum mv_sc sc);

/* Look a name up in the table: MV_SC_UNKNOWN when it is not one of ours. */
enum mv_sc syscalls_by_name(const char *name);

/* Map a seccomp_data (arch, nr) to the table: MV_SC_UNKNOWN for anything
 * else. *abi gets the ABI. */
enum mv_sc syscalls_decode(uint32_t arch, int nr, enum mv_abi *abi);

/* The number of a table entry on an ABI, or -1 when it has none there. */
int syscalls_nr(enum mv_sc sc, enum mv_abi abi);

#endif
