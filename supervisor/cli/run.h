/* memvisor run. */
#ifndef MV_RUN_H
#define MV_RUN_H

#include <stdio.h>

/* argv[0] is "run". Returns the process exit code. */
int run_main(int argc, char **argv);

#endif
