/* memvisor ctl: finding a supervisor's socket. A memvisor of this user
 * listens in $XDG_RUNTIME_DIR/memvisor/ or /tmp/memvisor-UID/ (root:
 * /run/memvisor/), one PID.sock each. */
#ifndef MV_CLI_CTL_FIND_H
#define MV_CLI_CTL_FIND_H

#include <stddef.h>

/* Every socket in those directories that answers a connect, as a
 * NULL-terminated list for ctl_find_free; *count says how many. */
char **ctl_find_live(size_t *count);

void ctl_find_free(char **v);

/* The socket to talk to: given (--socket), else $MEMVISOR_SOCKET, else
 * the only live one. CTL_EXIT_OK with a new string in *out;
 * CTL_EXIT_CONNECT when none runs, CTL_EXIT_USAGE when several do (both
 * said on stderr). */
int ctl_find_socket(const char *given, char **out);

#endif
