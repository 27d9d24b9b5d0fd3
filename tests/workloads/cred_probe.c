/*
 * cred_probe — print what the kernel gave this process at exec:
 *   euid E nnp N mdwe M
 * (effective uid, PR_GET_NO_NEW_PRIVS, PR_GET_MDWE or -1 without it).
 * Installed setuid-root by a test to see whether the exec raised it.
 */
#include <stdio.h>
#include <sys/prctl.h>
#include <unistd.h>

#ifndef PR_GET_MDWE
#define PR_GET_MDWE 66
#endif

int main(void)
{
	printf("euid %d nnp %d mdwe %d\n", (int)geteuid(), prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0),
	       prctl(PR_GET_MDWE, 0, 0, 0, 0));
	return 0;
}
