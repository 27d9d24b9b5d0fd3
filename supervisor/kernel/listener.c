/* The seccomp listener's ioctls (supervisor/kernel/listener.h). */
#include "supervisor/kernel/listener.h"
#include "common/compat.h"
#include "common/fault.h"
#include "common/util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

int listener_init(struct listener *l, int fd, bool *sync_wake_up)
{
	memset(l, 0, sizeof(*l));
	l->fd = fd;
	if (syscall(SYS_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &l->sizes) < 0)
		return -errno;
	l->req = xcalloc(1, MV_MAX(l->sizes.seccomp_notif, sizeof(*l->req)));
	l->resp = xcalloc(1, MV_MAX(l->sizes.seccomp_notif_resp, sizeof(*l->resp)));
	/* The flags are the ioctl's argument itself, not a pointer to them
	 * (kernel/seccomp.c seccomp_notify_set_flags). */
	*sync_wake_up = ioctl(fd, SECCOMP_IOCTL_NOTIF_SET_FLAGS,
			      (unsigned long)SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP) == 0;
	return 0;
}

void listener_free(struct listener *l)
{
	free(l->req);
	free(l->resp);
	l->req = NULL;
	l->resp = NULL;
}

int listener_recv(struct listener *l)
{
	memset(l->req, 0, l->sizes.seccomp_notif);
	if (fault_hit("notify_recv"))
		return -EIO;
	if (ioctl(l->fd, SECCOMP_IOCTL_NOTIF_RECV, l->req) < 0)
		return -errno;
	memset(l->resp, 0, l->sizes.seccomp_notif_resp);
	l->resp->id = l->req->id;
	return 0;
}

int listener_send(struct listener *l)
{
	int rc = -EIO;
	for (int attempt = 0; attempt < 3; attempt++) {
		if (fault_hit("notify_send"))
			continue;
		if (ioctl(l->fd, SECCOMP_IOCTL_NOTIF_SEND, l->resp) == 0)
			return 0;
		rc = -errno;
		if (rc == -ENOENT)
			return rc;
	}
	return rc;
}

bool listener_id_valid(int fd, uint64_t id)
{
	return ioctl(fd, SECCOMP_IOCTL_NOTIF_ID_VALID, &id) == 0;
}

bool listener_is_one(int fd)
{
	uint64_t id = 0;
	return ioctl(fd, SECCOMP_IOCTL_NOTIF_ID_VALID, &id) == 0 || errno == ENOENT;
}
