/* memvisor ctl: the control socket's command-line client. */
#ifndef MV_CTL_CLIENT_H
#define MV_CTL_CLIENT_H

/* argv[0] is "ctl". Returns the exit status: 0 ok, 1 error reply,
 * 2 usage, 3 cannot connect. */
int ctl_client_main(int argc, char **argv);

#endif
