#include "supervisor/kernel/pidfd.h"
#include "common/compat.h"
#include "common/fault.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/ioctl.h>

static int get_info(int pidfd, uint64_t mask, struct pidfd_info *info)
{
	memset(info, 0, sizeof(*info));
	info->mask = mask;
	FAULT_RETURN("pidfd_info", EIO);
	if (ioctl(pidfd, PIDFD_GET_INFO, info) < 0)
		return -errno;
	return (info->mask & mask) == mask ? 0 : -ENODATA;
}

int pidfd_ppid(int pidfd, pid_t *ppid)
{
	struct pidfd_info info;
	int rc = get_info(pidfd, PIDFD_INFO_PID, &info);
	if (rc == 0)
		*ppid = (pid_t)info.ppid;
	return rc;
}

int pidfd_exit_status(int pidfd, int *status)
{
	struct pidfd_info info;
	int rc = get_info(pidfd, PIDFD_INFO_EXIT, &info);
	if (rc == 0)
		*status = info.exit_code;
	return rc;
}

bool pidfd_exited(int pidfd)
{
	struct pollfd p = {.fd = pidfd, .events = POLLIN};
	return poll(&p, 1, 0) > 0 && (p.revents & POLLIN);
}
