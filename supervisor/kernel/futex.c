/* Robust futex lists of other threads (supervisor/kernel/futex.h). */
#include "supervisor/kernel/futex.h"

#include <errno.h>
#include <sys/syscall.h>
#include <unistd.h>

int futex_robust_head_of(pid_t tid, uint64_t *head, size_t *len)
{
	void *h = NULL;
	size_t l = 0;
	if (syscall(SYS_get_robust_list, tid, &h, &l) < 0)
		return -errno;
	*head = (uint64_t)(uintptr_t)h;
	*len = l;
	return 0;
}
