#include "policy/names.h"
#include "common/util.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

struct flag_name {
	const char *name;
	uint64_t bits;
};

/* Values are the x86-64 UAPI (the same on i386 and x32); spelled out so
 * that the policy does not depend on which headers the build machine has. */
static const struct flag_name prot_names[] = {
    {"READ", 0x1},	     {"WRITE", 0x2}, {"EXEC", 0x4}, {"SEM", 0x8}, {"GROWSDOWN", 0x01000000},
    {"GROWSUP", 0x02000000}, {NULL, 0},
};

/* SHARED and PRIVATE are values of the 4-bit mapping type, not bits: a
 * "has SHARED" test (bit 0) also matches SHARED_VALIDATE (3). */
static const struct flag_name map_names[] = {
    {"SHARED", 0x1},
    {"PRIVATE", 0x2},
    {"SHARED_VALIDATE", 0x3},
    {"FIXED", 0x10},
    {"ANONYMOUS", 0x20},
    {"ANON", 0x20},
    {"32BIT", 0x40},
    {"GROWSDOWN", 0x100},
    {"DENYWRITE", 0x800},
    {"EXECUTABLE", 0x1000},
    {"LOCKED", 0x2000},
    {"NORESERVE", 0x4000},
    {"POPULATE", 0x8000},
    {"NONBLOCK", 0x10000},
    {"STACK", 0x20000},
    {"HUGETLB", 0x40000},
    {"SYNC", 0x80000},
    {"FIXED_NOREPLACE", 0x100000},
    {"UNINITIALIZED", 0x4000000},
    {NULL, 0},
};

static const struct flag_name mremap_names[] = {
    {"MAYMOVE", 0x1},
    {"FIXED", 0x2},
    {"DONTUNMAP", 0x4},
    {NULL, 0},
};

static const struct flag_name shm_names[] = {
    {"RDONLY", 010000}, {"RND", 020000}, {"REMAP", 040000}, {"EXEC", 0100000}, {NULL, 0},
};

static const struct flag_name mfd_names[] = {
    {"CLOEXEC", 0x1},	  {"ALLOW_SEALING", 0x2}, {"HUGETLB", 0x4},
    {"NOEXEC_SEAL", 0x8}, {"EXEC", 0x10},	  {NULL, 0},
};

static const struct flag_name mlock_names[] = {{"ONFAULT", 0x1}, {NULL, 0}};

static const struct flag_name mcl_names[] = {
    {"CURRENT", 0x1}, {"FUTURE", 0x2}, {"ONFAULT", 0x4}, {NULL, 0}};

static const struct flag_name clone_names[] = {
    {"VM", 0x100},
    {"FS", 0x200},
    {"FILES", 0x400},
    {"SIGHAND", 0x800},
    {"PIDFD", 0x1000},
    {"PTRACE", 0x2000},
    {"VFORK", 0x4000},
    {"PARENT", 0x8000},
    {"THREAD", 0x10000},
    {"NEWNS", 0x20000},
    {"SYSVSEM", 0x40000},
    {"SETTLS", 0x80000},
    {"PARENT_SETTID", 0x100000},
    {"CHILD_CLEARTID", 0x200000},
    {"DETACHED", 0x400000},
    {"UNTRACED", 0x800000},
    {"CHILD_SETTID", 0x1000000},
    {"NEWCGROUP", 0x2000000},
    {"NEWUTS", 0x4000000},
    {"NEWIPC", 0x8000000},
    {"NEWUSER", 0x10000000},
    {"NEWPID", 0x20000000},
    {"NEWNET", 0x40000000},
    {"IO", 0x80000000},
    {NULL, 0},
};

static const struct {
	const char *prefix;
	const struct flag_name *names;
	const char *list;
} families[NAMES_FAMILY_COUNT] = {
    [NAMES_NONE] = {"", NULL, ""},
    [NAMES_PROT] = {"PROT_", prot_names, "READ, WRITE, EXEC, SEM, GROWSDOWN, GROWSUP"},
    [NAMES_MAP] = {"MAP_", map_names,
		   "SHARED, PRIVATE, SHARED_VALIDATE, FIXED, ANONYMOUS, 32BIT, GROWSDOWN, "
		   "DENYWRITE, EXECUTABLE, LOCKED, NORESERVE, POPULATE, NONBLOCK, STACK, "
		   "HUGETLB, SYNC, FIXED_NOREPLACE, UNINITIALIZED"},
    [NAMES_MREMAP] = {"MREMAP_", mremap_names, "MAYMOVE, FIXED, DONTUNMAP"},
    [NAMES_SHM] = {"SHM_", shm_names, "RDONLY, RND, REMAP, EXEC"},
    [NAMES_MFD] = {"MFD_", mfd_names, "CLOEXEC, ALLOW_SEALING, HUGETLB, NOEXEC_SEAL, EXEC"},
    [NAMES_MLOCK] = {"MLOCK_", mlock_names, "ONFAULT"},
    [NAMES_MCL] = {"MCL_", mcl_names, "CURRENT, FUTURE, ONFAULT"},
    [NAMES_CLONE] = {"CLONE_", clone_names,
		     "VM, FS, FILES, SIGHAND, PIDFD, PTRACE, VFORK, PARENT, THREAD, NEWNS, "
		     "SYSVSEM, SETTLS, PARENT_SETTID, CHILD_CLEARTID, DETACHED, UNTRACED, "
		     "CHILD_SETTID, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET, IO"},
};

const char *names_prefix(enum names_family f)
{
	return f < NAMES_FAMILY_COUNT ? families[f].prefix : "";
}

const char *names_list(enum names_family f)
{
	return f < NAMES_FAMILY_COUNT ? families[f].list : "";
}

int names_flag(enum names_family f, const char *name, uint64_t *bits)
{
	if (f <= NAMES_NONE || f >= NAMES_FAMILY_COUNT)
		return -ENOENT;
	size_t plen = strlen(families[f].prefix);
	if (strncasecmp(name, families[f].prefix, plen) == 0)
		name += plen;
	for (const struct flag_name *n = families[f].names; n->name; n++) {
		if (strcasecmp(n->name, name) == 0) {
			*bits = n->bits;
			return 0;
		}
	}
	return -ENOENT;
}

const char *names_flag_name(enum names_family f, uint64_t bits)
{
	if (f <= NAMES_NONE || f >= NAMES_FAMILY_COUNT)
		return NULL;
	for (const struct flag_name *n = families[f].names; n->name; n++)
		if (n->bits == bits)
			return n->name;
	return NULL;
}

/* Append "|PREFIXNAME" (without the '|' first) at *at in buf. */
static void append(char *buf, size_t len, size_t *at, const char *prefix, const char *name)
{
	if (*at >= len)
		return;
	int n = snprintf(buf + *at, len - *at, "%s%s%s", *at ? "|" : "", prefix, name);
	*at += n > 0 ? (size_t)n : 0;
}

const char *names_flags_format(enum names_family f, uint64_t bits, char *buf, size_t len)
{
	size_t at = 0;
	buf[0] = '\0';
	if (f <= NAMES_NONE || f >= NAMES_FAMILY_COUNT) {
		snprintf(buf, len, "0x%llx", (unsigned long long)bits);
		return buf;
	}
	const char *prefix = families[f].prefix;
	if (f == NAMES_MAP && (bits & 0xf)) {
		const char *type = names_flag_name(f, bits & 0xf);
		if (type) {
			append(buf, len, &at, prefix, type);
			bits &= ~0xfull;
		}
	}
	/* One name a bit, the first of its spellings (ANONYMOUS, not ANON). */
	for (const struct flag_name *n = families[f].names; n->name && bits; n++) {
		bool single = n->bits && !(n->bits & (n->bits - 1));
		if (single && (bits & n->bits) && !(f == NAMES_MAP && n->bits <= 0xf)) {
			append(buf, len, &at, prefix, n->name);
			bits &= ~n->bits;
		}
	}
	if (bits || !at) {
		char hex[24];
		snprintf(hex, sizeof(hex), "0x%llx", (unsigned long long)bits);
		append(buf, len, &at, "", hex);
	}
	if (!at || strcmp(buf, "0x0") == 0)
		snprintf(buf, len, "0");
	return buf;
}

/* glibc knows every errno name (strerrorname_np, 2.32); errno values on
 * Linux stay below 134. */
#define ERRNO_MAX 200

int names_errno(const char *name, int *err)
{
	for (int e = 1; e < ERRNO_MAX; e++) {
		const char *n = strerrorname_np(e);
		if (n && strcasecmp(n, name) == 0) {
			*err = e;
			return 0;
		}
	}
	return -ENOENT;
}

const char *names_errno_name(int err)
{
	const char *n = err > 0 ? strerrorname_np(err) : NULL;
	return n ? n : "E?";
}

int names_action(const char *name, enum mv_verdict *v)
{
	for (int i = 0; i < MV_V_COUNT; i++) {
		if (strcmp(verdict_name((enum mv_verdict)i), name) == 0) {
			*v = (enum mv_verdict)i;
			return 0;
		}
	}
	return -ENOENT;
}
