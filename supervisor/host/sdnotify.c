#include "supervisor/host/sdnotify.h"
#include "common/log.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static struct sockaddr_un addr;
static socklen_t addr_len;

void sdnotify_init(void)
{
	const char *p = getenv("NOTIFY_SOCKET");
	addr_len = 0;
	if (!p || !*p)
		return;
	size_t n = strlen(p);
	/* A path, or '@' for an abstract name (a leading NUL). */
	if ((p[0] != '/' && p[0] != '@') || n >= sizeof(addr.sun_path)) {
		log_warn("NOTIFY_SOCKET %s: not a socket path: no readiness notification", p);
	} else {
		memset(&addr, 0, sizeof(addr));
		addr.sun_family = AF_UNIX;
		memcpy(addr.sun_path, p, n);
		if (p[0] == '@')
			addr.sun_path[0] = 0;
		addr_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n);
	}
	unsetenv("NOTIFY_SOCKET");
}

void sdnotify(const char *msg)
{
	if (!addr_len)
		return;
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0 ||
	    sendto(fd, msg, strlen(msg), MSG_NOSIGNAL, (struct sockaddr *)&addr, addr_len) < 0)
		log_warn("telling the service manager '%.40s': %s", msg, strerror(errno));
	if (fd >= 0)
		close(fd);
}
