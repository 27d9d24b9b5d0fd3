/* The title ps shows for memvisor's helper processes (the reaper, the
 * keeper), which are forks of `memvisor run` or `memvisor agent` and
 * would otherwise show the same command line as it. The title is written
 * over the process's own argument strings (/proc/PID/cmdline), so it is
 * at most as long as they were; the name (comm) is set too. */
#ifndef MV_PROCTITLE_H
#define MV_PROCTITLE_H

/* In main, before anything moves argv: remember where its strings are. */
void proctitle_init(int argc, char **argv);

/* In a helper process: show title (cut to fit) instead of the command
 * line, and name the process name (at most 15 bytes). */
void proctitle_set(const char *name, const char *title);

#endif
