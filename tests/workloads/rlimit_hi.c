/*
 * rlimit_hi — try to lift RLIMIT_AS with the resource number's high bits
 * set (the kernel reads an unsigned int and ignores them).
 *
 * Usage: rlimit_hi prlimit64|setrlimit
 *
 * Output: "HOW ok" or "HOW errno N NAME"; exit 0 or the errno.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	const char *how = argc > 1 ? argv[1] : "prlimit64";
	struct rlimit r = {RLIM_INFINITY, RLIM_INFINITY};
	if (getrlimit(RLIMIT_AS, &r) == 0)
		r.rlim_cur = r.rlim_max;
	unsigned long res = (1UL << 32) | RLIMIT_AS;
	long rc = strcmp(how, "setrlimit") == 0 ? syscall(SYS_setrlimit, res, &r)
						: syscall(SYS_prlimit64, 0, res, &r, NULL);
	if (rc < 0) {
		int e = errno;
		printf("%s errno %d %s\n", how, e, strerrorname_np(e));
		return e;
	}
	printf("%s ok\n", how);
	return 0;
}
