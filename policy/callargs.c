#include "policy/callargs.h"

/* Argument positions are stored plus one, so that the zero of an entry
 * the table leaves out means "no such argument". */
struct raw_layout {
	uint8_t prot, flags, len, fd;
	enum names_family family;
	bool backing;
};

static const struct raw_layout layouts[MV_SC_COUNT] = {
    [MV_SC_mmap] = {3, 4, 2, 5, NAMES_MAP, true},
    [MV_SC_mmap2] = {3, 4, 2, 5, NAMES_MAP, true},
    [MV_SC_munmap] = {.len = 2},
    /* The length of an mremap is what it remaps to: new_size. */
    [MV_SC_mremap] = {.flags = 4, .len = 3, .family = NAMES_MREMAP},
    [MV_SC_mprotect] = {.prot = 3, .len = 2},
    [MV_SC_pkey_mprotect] = {.prot = 3, .len = 2},
    [MV_SC_madvise] = {.len = 2},
    [MV_SC_mlock] = {.len = 2},
    [MV_SC_mlock2] = {.flags = 3, .len = 2, .family = NAMES_MLOCK},
    [MV_SC_munlock] = {.len = 2},
    [MV_SC_mlockall] = {.flags = 1, .family = NAMES_MCL},
    /* Its prot argument must be 0 (remap_file_pages(2)): not a condition. */
    [MV_SC_remap_file_pages] = {.len = 2},
    [MV_SC_shmat] = {.flags = 3, .family = NAMES_SHM},
    [MV_SC_memfd_create] = {.flags = 2, .family = NAMES_MFD},
    /* A new mapping of size bytes made without mmap (Linux 6.6). */
    [MV_SC_map_shadow_stack] = {.len = 2},
    [MV_SC_clone] = {.flags = 1, .family = NAMES_CLONE},
};

struct callargs_layout callargs_layout(enum mv_sc sc, enum mv_abi abi)
{
	struct callargs_layout l = {-1, -1, -1, -1, NAMES_NONE, false};
	/* i386 "mmap" is old_mmap(struct mmap_arg_struct *). */
	if (sc >= MV_SC_COUNT || (sc == MV_SC_mmap && abi == MV_ABI_I386))
		return l;
	const struct raw_layout *r = &layouts[sc];
	l.prot = (int8_t)(r->prot - 1);
	l.flags = (int8_t)(r->flags - 1);
	l.len = (int8_t)(r->len - 1);
	l.fd = (int8_t)(r->fd - 1);
	l.family = r->family;
	l.backing = r->backing;
	return l;
}

bool callargs_readable(const struct mv_call *c)
{
	return !(c->sc == MV_SC_mmap && c->abi == MV_ABI_I386);
}

uint64_t callargs_arg(const struct mv_call *c, int i)
{
	uint64_t v = c->args[i];
	return c->abi == MV_ABI_I386 ? (uint32_t)v : v;
}

static bool get(const struct mv_call *c, int idx, uint64_t *out)
{
	if (idx < 0)
		return false;
	*out = callargs_arg(c, idx);
	return true;
}

bool callargs_prot(const struct mv_call *c, uint64_t *prot)
{
	return get(c, callargs_layout(c->sc, c->abi).prot, prot);
}

bool callargs_flags(const struct mv_call *c, uint64_t *flags)
{
	return get(c, callargs_layout(c->sc, c->abi).flags, flags);
}

bool callargs_len(const struct mv_call *c, uint64_t *len)
{
	return get(c, callargs_layout(c->sc, c->abi).len, len);
}

bool callargs_fd(const struct mv_call *c, int *fd)
{
	uint64_t v;
	if (!get(c, callargs_layout(c->sc, c->abi).fd, &v))
		return false;
	*fd = (int)(uint32_t)v; /* an int in every ABI */
	return true;
}

bool callargs_anon(const struct mv_call *c)
{
	uint64_t flags;
	return callargs_layout(c->sc, c->abi).backing && callargs_flags(c, &flags) &&
	       (flags & 0x20);
}

/* ipc(2) call numbers: the low 16 bits name the call, the high 16 a
 * version (include/uapi/linux/ipc.h). */
#define IPC_SHMAT 21

bool callargs_ipc_shmat(const struct mv_call *c)
{
	return c->sc == MV_SC_ipc && (callargs_arg(c, 0) & 0xffff) == IPC_SHMAT;
}

bool callargs_shmat(const struct mv_call *c, int *shmid, uint64_t *shmflg, uint64_t *addr)
{
	if (c->sc == MV_SC_shmat) {
		*shmid = (int)(uint32_t)callargs_arg(c, 0);
		*addr = callargs_arg(c, 1);
		*shmflg = callargs_arg(c, 2);
		return true;
	}
	if (callargs_ipc_shmat(c)) {
		/* ipc(SHMAT, shmid, shmflg, &raddr, shmaddr) (ipc/syscall.c) */
		*shmid = (int)(uint32_t)callargs_arg(c, 1);
		*shmflg = callargs_arg(c, 2);
		*addr = callargs_arg(c, 4);
		return true;
	}
	return false;
}
