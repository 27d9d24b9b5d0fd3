/* Names the policy language uses for numbers: PROT_ bits, the flag bits of
 * each syscall's flags argument, errno values, actions. Tables, looked up
 * case-insensitively, with or without their C prefix ("EXEC" or
 * "PROT_EXEC"). Pure. */
#ifndef MV_NAMES_H
#define MV_NAMES_H

#include "state/stats.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The families of flag names; each syscall's flags argument has one. */
enum names_family {
	NAMES_NONE,
	NAMES_PROT,
	NAMES_MAP,
	NAMES_MREMAP,
	NAMES_SHM,
	NAMES_MFD,
	NAMES_MLOCK,
	NAMES_MCL,
	NAMES_CLONE,
	NAMES_FAMILY_COUNT,
};

/* The C prefix of a family ("MAP_"), for messages. */
const char *names_prefix(enum names_family f);

/* Look a flag name up in a family: 0 with *bits set, or -ENOENT. */
int names_flag(enum names_family f, const char *name, uint64_t *bits);

/* Every name of a family, comma-separated, for an error message. */
const char *names_list(enum names_family f);

/* The canonical name of exactly these bits in a family, or NULL. */
const char *names_flag_name(enum names_family f, uint64_t bits);

/* bits as people read them, into buf: the family's names joined with
 * '|', with their C prefix ("MAP_PRIVATE|MAP_ANONYMOUS"), bits without a
 * name as one hex number at the end, "0" for none. MAP_'s mapping type
 * (the low 4 bits: SHARED, PRIVATE, SHARED_VALIDATE) is a value, not
 * bits. Returns buf. */
const char *names_flags_format(enum names_family f, uint64_t bits, char *buf, size_t len);

/* "EPERM" -> 1. 0 with *err set, or -ENOENT. */
int names_errno(const char *name, int *err);

/* 1 -> "EPERM"; "E?" when unknown. */
const char *names_errno_name(int err);

/* "allow", "log", "deny", "kill" -> verdict. 0 or -ENOENT. */
int names_action(const char *name, enum mv_verdict *v);

#endif
