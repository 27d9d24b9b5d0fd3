/* memvisor policy: work with policy files outside a run. */
#ifndef MV_POLICY_CLI_H
#define MV_POLICY_CLI_H

/* `memvisor policy check [--explain] FILE...`: 0 when every file is a
 * valid policy, 1 with every error as FILE:LINE:COL: /pointer: message,
 * 2 for a usage error. */
int policy_main(int argc, char **argv);

#endif
