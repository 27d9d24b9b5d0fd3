/* memvisor check: what this kernel and this user let memvisor do. */
#ifndef MV_CHECK_CLI_H
#define MV_CHECK_CLI_H

/* `memvisor check [--json]`: every feature memvisor uses, whether it is
 * here and what needs it. 0 when plain supervision (run) can work, 1 when
 * it cannot, 2 for a usage error. */
int check_main(int argc, char **argv);

#endif
