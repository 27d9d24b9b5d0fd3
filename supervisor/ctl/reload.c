/* The reload control command (docs/protocol-reload.md): its arguments;
 * the job is supervisor/reload/reload.h's. */
#include "supervisor/ctl/reload.h"
#include "state/image.h"
#include "supervisor/reload/reload.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

/* A directory without a manifest is no image: say that, rather than what
 * the first file read of it found missing (its pages file). */
static int require_image(const char *dir, struct mv_err *err)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return ctl_fail(err, MV_E_INVALID, "%s: %s", dir, strerror(errno));
	int rc = faccessat(fd, IMG_MANIFEST, F_OK, AT_SYMLINK_NOFOLLOW);
	int e = errno;
	close(fd);
	if (rc < 0 && e == ENOENT)
		return ctl_fail(err, MV_E_INVALID, "%s: not a memvisor image (no %s)", dir,
				IMG_MANIFEST);
	return 0;
}

int ctl_cmd_reload(struct mv *mv, struct ctl_call *call, json_t *args, json_t **result,
		   struct mv_err *err)
{
	const char *dir;
	if (ctl_arg_string(args, "dir", &dir, err) < 0)
		return -1;
	if (dir[0] != '/')
		return ctl_fail(err, MV_E_BAD_REQUEST, "args.dir: '%s' is not an absolute path",
				dir);
	json_t *rate = json_object_get(args, "rate");
	if (rate && (!json_is_number(rate) || json_number_value(rate) < 0))
		return ctl_fail(err, MV_E_BAD_REQUEST,
				"args.rate: expected a number of MB/s (0: no cap)");
	if (require_image(dir, err) < 0)
		return -1;
	struct job *j;
	char id[40];
	if (reload_start(mv, dir, rate ? json_number_value(rate) * 1e6 : 0, &j, id, sizeof(id),
			 err) < 0)
		return -1;
	*result = json_pack("{s:i, s:s, s:s}", "job", j->id, "dir", dir, "id", id);
	return 0;
}
