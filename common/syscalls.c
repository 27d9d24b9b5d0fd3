#include "common/syscalls.h"
#include "common/compat.h"
#include "common/util.h"

#include <seccomp.h>
#include <stdlib.h>
#include <string.h>

static const struct {
	const char *name;
	enum mv_sc_class cls;
	const char *args;
} table[MV_SC_COUNT] = {
#define X(n, c, a) [MV_SC_##n] = {#n, c, a},
    MV_SYSCALL_TABLE(X)
#undef X
};

/* Numbers are small on every ABI: x86_64 and i386 stay below 512, x32
 * numbers are below 1024 once __X32_SYSCALL_BIT is removed. */
#define NR_SLOTS 1024
static uint8_t by_nr[MV_ABI_COUNT][NR_SLOTS];
static int nr_of[MV_SC_COUNT][MV_ABI_COUNT];

static const uint32_t abi_arch[MV_ABI_COUNT] = {SCMP_ARCH_X86_64, SCMP_ARCH_X86, SCMP_ARCH_X32};
static const char *const abi_names[MV_ABI_COUNT] = {"x86_64", "i386", "x32"};

/* libseccomp names the i386 System V IPC and socket calls by negative
 * pseudo numbers, because they used to go through the ipc(2)/socketcall(2)
 * multiplexers; since Linux 4.18/5.1 they also have direct numbers (shmat
 * is 397). Find the direct number by name, so a direct shmat is decoded
 * like a native one. Pseudo numbers of calls an ABI lacks are <= -10000. */
static int direct_nr(uint32_t arch, const char *name)
{
	for (int nr = 0; nr < NR_SLOTS; nr++) {
		char *n = seccomp_syscall_resolve_num_arch(arch, nr);
		bool same = n && strcmp(n, name) == 0;
		free(n);
		if (same)
			return nr;
	}
	return -1;
}

/* Calls newer than the libseccomp memvisor is built with: its tables do
 * not name them, their numbers are fixed (arch/x86/entry/syscalls). Only
 * the native number: libseccomp translates a number to another ABI by
 * name, which it does not know (policy/filter.c), so on i386 and x32 such
 * a call stays unfiltered until libseccomp knows it. */
static const struct {
	const char *name;
	int nr[MV_ABI_COUNT];
} newer[] = {
    {"mseal", {462, -1, -1}}, /* Linux 6.10; libseccomp 2.6 */
};

static int newer_nr(int abi, const char *name)
{
	for (size_t i = 0; i < ARRAY_SIZE(newer); i++)
		if (strcmp(newer[i].name, name) == 0)
			return newer[i].nr[abi];
	return -1;
}

int syscalls_init(void)
{
	memset(by_nr, MV_SC_UNKNOWN, sizeof(by_nr));
	for (int sc = 0; sc < MV_SC_COUNT; sc++) {
		for (int abi = 0; abi < MV_ABI_COUNT; abi++) {
			int nr = seccomp_syscall_resolve_name_arch(abi_arch[abi], table[sc].name);
			if (nr < 0 && nr > -10000)
				nr = direct_nr(abi_arch[abi], table[sc].name);
			if (nr == -1)
				nr = newer_nr(abi, table[sc].name);
			nr_of[sc][abi] = -1;
			if (nr < 0)
				continue;
			int slot = abi == MV_ABI_X32 ? nr & ~(int)__X32_SYSCALL_BIT : nr;
			if (slot < 0 || slot >= NR_SLOTS)
				return -ERANGE;
			nr_of[sc][abi] = nr;
			by_nr[abi][slot] = (uint8_t)sc;
		}
	}
	return 0;
}

const char *syscalls_name(enum mv_sc sc)
{
	return sc < MV_SC_COUNT ? table[sc].name : "unknown";
}

enum mv_sc_class syscalls_class(enum mv_sc sc)
{
	return table[sc].cls;
}

const char *syscalls_abi_name(enum mv_abi abi)
{
	return abi < MV_ABI_COUNT ? abi_names[abi] : "unknown";
}

const char *syscalls_arg_names(enum mv_sc sc)
{
	return sc < MV_SC_COUNT ? table[sc].args : "";
}

enum mv_sc syscalls_by_name(const char *name)
{
	for (int sc = 0; sc < MV_SC_COUNT; sc++)
		if (strcmp(table[sc].name, name) == 0)
			return (enum mv_sc)sc;
	return MV_SC_UNKNOWN;
}

enum mv_sc syscalls_decode(uint32_t arch, int nr, enum mv_abi *abi)
{
	enum mv_abi a;
	if (arch == AUDIT_ARCH_I386) {
		a = MV_ABI_I386;
	} else if (arch == AUDIT_ARCH_X86_64) {
		a = (nr & (int)__X32_SYSCALL_BIT) ? MV_ABI_X32 : MV_ABI_X86_64;
		nr &= ~(int)__X32_SYSCALL_BIT;
	} else {
		return MV_SC_UNKNOWN;
	}
	*abi = a;
	if (nr < 0 || nr >= NR_SLOTS)
		return MV_SC_UNKNOWN;
	return (enum mv_sc)by_nr[a][nr];
}

int syscalls_nr(enum mv_sc sc, enum mv_abi abi)
{
	return sc < MV_SC_COUNT && abi < MV_ABI_COUNT ? nr_of[sc][abi] : -1;
}
