/* `memvisor run --user USER[:GROUP]`: the identity the command runs as,
 * resolved by the supervisor before the fork (the launcher may not call
 * getpwnam: it allocates). memvisor keeps its own uid, so a real uid
 * boundary separates the program from its supervisor and its control
 * socket (mode 0600, owned by memvisor's uid). Functions return 0 or
 * -errno with a message in err. */
#ifndef MV_RUNAS_H
#define MV_RUNAS_H

#include "common/err.h"

#include <stddef.h>
#include <sys/types.h>

struct runas {
	uid_t uid;
	gid_t gid;
	gid_t *groups; /* supplementary groups (malloc'd) */
	size_t n_groups;
};

/* USER (a name or a number) with its primary group and its supplementary
 * groups from the group database; USER:GROUP sets the primary group (and
 * no supplementary one). Needs root (CAP_SETUID and CAP_SETGID) to be
 * used: refused here otherwise. */
int runas_parse(const char *spec, struct runas *out, struct mv_err *err);

void runas_free(struct runas *r);

#endif
