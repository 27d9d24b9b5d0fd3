/* Fault injection for tests: MEMVISOR_FAULT=NAME[:N][,NAME[:N]...] makes
 * the N-th call (default 1) at the named point fail, once. Every point is
 * registered in common/fault.c (`memvisor --list-faults` prints them) and
 * described in docs/reliability.md. Without the variable every check is
 * one predictable branch. */
#ifndef MV_FAULT_H
#define MV_FAULT_H

#include <stdbool.h>
#include <stdio.h>

/* Read MEMVISOR_FAULT (call once at start-up; fault_hit calls it lazily). */
void fault_init(void);

/* Print every registered point, one name a line. */
void fault_list(FILE *out);

/* Must the current call at point name fail? Thread-safe. */
bool fault_hit(const char *name);

/* In a function returning 0 or -errno: fail with -err at this point. */
#define FAULT_RETURN(name, err)                                                                    \
	do {                                                                                       \
		if (fault_hit(name))                                                               \
			return -(err);                                                             \
	} while (0)

#endif
