/* memvisor ctl: finding a supervisor's socket. A memvisor of this user
 * listens in $XDG_RUNTIME_DIR/memvisor/ or /tmp/memvisor-UID/ (root:
 * /run/memvisor/), one PID.sock each, or NAME.sock for `run --name`. */
#ifndef MV_CLI_CTL_FIND_H
#define MV_CLI_CTL_FIND_H

#include <stddef.h>

/* Every socket in those directories that answers a connect, as a
 * NULL-terminated list for ctl_find_free; *count says how many. */
char **ctl_find_live(size_t *count);

void ctl_find_free(char **v);

/* The longest name `run --name` takes. */
#define CTL_NAME_MAX 64

/* Is name a supervisor's name: 1 to CTL_NAME_MAX letters, digits, '.',
 * '_' and '-', not starting with '.' or '-' (no hidden file, no option),
 * and not only digits (PID.sock is a pid's)? 0, or -EINVAL with why
 * filled. */
int ctl_name_check(const char *name, char *why, size_t len);

/* The socket to talk to: given (--socket), else the one of the memvisor
 * named name (--name), else $MEMVISOR_SOCKET, else the only live one.
 * CTL_EXIT_OK with a new string in *out; CTL_EXIT_CONNECT when none runs
 * (or none of that name), CTL_EXIT_USAGE when several do or the name is
 * not a name (said on stderr). */
int ctl_find_socket(const char *given, const char *name, char **out);

#endif
