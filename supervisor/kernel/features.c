#include "supervisor/kernel/features.h"
#include "common/compat.h"
#include "common/util.h"
#include "supervisor/kernel/pagemap.h"
#include "supervisor/kernel/procmap.h"

#include <fcntl.h>
#include <linux/capability.h>
#include <linux/userfaultfd.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/utsname.h>

#ifndef USERFAULTFD_IOC_NEW
#define USERFAULTFD_IOC_NEW _IO(0xAA, 0x00)
#endif

static int uffd_api(int fd, uint64_t *features)
{
	struct uffdio_api api = {.api = UFFD_API, .features = 0};
	if (ioctl(fd, UFFDIO_API, &api) < 0)
		return -errno;
	*features = api.features;
	return 0;
}

static void probe_uffd(struct features *f)
{
	int fd = open("/dev/userfaultfd", O_RDWR | O_CLOEXEC);
	if (fd >= 0) {
		int ufd = ioctl(fd, USERFAULTFD_IOC_NEW, O_CLOEXEC | O_NONBLOCK);
		close(fd);
		if (ufd >= 0) {
			f->uffd_dev = uffd_api(ufd, &f->uffd_features) == 0;
			close(ufd);
		}
	}
	int ufd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	if (ufd >= 0) {
		uint64_t feats = 0;
		f->uffd_syscall = uffd_api(ufd, &feats) == 0;
		if (!f->uffd_features)
			f->uffd_features = feats;
		close(ufd);
	}
}

/* CAP_SYS_ADMIN in the effective set: what seccomp_set_mode_filter() and
 * landlock_restrict_self() check (ns_capable_noaudit in the current user
 * namespace) when no_new_privs is not set. capget(2) directly: libcap is
 * not a dependency. */
static bool probe_cap_sys_admin(void)
{
	struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3];
	memset(d, 0, sizeof(d));
	if (syscall(SYS_capget, &h, d) < 0)
		return false;
	return (d[CAP_TO_INDEX(CAP_SYS_ADMIN)].effective & CAP_TO_MASK(CAP_SYS_ADMIN)) != 0;
}

void features_probe(struct features *f)
{
	struct utsname u;
	memset(f, 0, sizeof(*f));
	if (uname(&u) == 0)
		snprintf(f->kernel, sizeof(f->kernel), "%s", u.release);
	f->procmap_query = procmap_query_works();
	f->pagemap_scan = pagemap_scan_works();
	int pfd = (int)syscall(SYS_pidfd_open, getpid(), 0);
	if (pfd >= 0) {
		f->pidfd = true;
		/* pidfd_getfd on our own stdin-or-whatever fd 0..2 tells if it exists. */
		int g = (int)syscall(SYS_pidfd_getfd, pfd, pfd, 0);
		f->pidfd_getfd = g >= 0 || errno != ENOSYS;
		if (g >= 0)
			close(g);
		close(pfd);
	}
	f->mdwe = prctl(PR_GET_MDWE, 0, 0, 0, 0) >= 0;
	f->cap_sys_admin = probe_cap_sys_admin();
	probe_uffd(f);
}
