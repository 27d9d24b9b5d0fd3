/* The reload control command (docs/protocol-reload.md): its arguments;
 * the job is supervisor/reload/reload.h's. */
#include "supervisor/ctl/reload.h"
#include "supervisor/image/read.h"
#include "supervisor/reload/reload.h"

#include <errno.h>

/* A directory without a manifest is no image: say that, rather than what
 * the first file read of it found missing (its pages file); and a FIFO
 * or a device in it is refused before anything is opened. */
static int require_image(const char *dir, struct mv_err *err)
{
	int rc = imgread_require(dir, err);
	if (rc < 0)
		err->code = MV_E_INVALID;
	return rc;
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
