#include "supervisor/ctl/policy.h"
#include "common/util.h"
#include "policy/policy.h"
#include "supervisor/supervise/enforce.h"

#include <stdio.h>
#include <string.h>

int ctl_cmd_policy(struct mv *mv, struct ctl_call *call, json_t *args, json_t **result,
		   struct mv_err *err)
{
	*result = enforce_show(mv);
	return 0;
}

/* Every validation error, as many as fit the message. */
static void diag_message(const struct pol_diag *d, char *buf, size_t len)
{
	size_t off = 0;
	buf[0] = '\0';
	for (size_t i = 0; i < d->n && off + 1 < len; i++) {
		int k = snprintf(buf + off, len - off, "%s%s", i ? "; " : "", d->msg[i]);
		if (k < 0 || (size_t)k >= len - off) {
			snprintf(buf + (len > 40 ? len - 40 : 0), len > 40 ? 40 : len,
				 " ... (%zu errors)", d->n);
			return;
		}
		off += (size_t)k;
	}
}

int ctl_cmd_policy_set(struct mv *mv, struct ctl_call *call, json_t *args, json_t **result,
		       struct mv_err *err)
{
	json_t *p = args ? json_object_get(args, "path") : NULL;
	if (!json_is_string(p) || !*json_string_value(p))
		return ctl_fail(err, MV_E_BAD_REQUEST,
				"args.path: expected the policy file's path");
	/* The supervisor reads the file itself: a relative path is relative
	 * to memvisor's working directory, so clients send absolute ones. */
	if (ctl_policy_load(mv, json_string_value(p), err) < 0)
		return -1;
	*result = enforce_show(mv);
	return 0;
}

int ctl_policy_load(struct mv *mv, const char *path, struct mv_err *err)
{
	struct policy *pol;
	struct pol_diag d = {0};
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	/* Never blocks the main loop (policy_read_file, regular_only). */
	if (policy_read_file(path, true, &text, &len, &d) < 0 ||
	    policy_parse(text, len, path, &pol, &d) < 0) {
		diag_message(&d, err->msg, sizeof(err->msg));
		err->code = MV_E_INVALID;
		pol_diag_free(&d);
		return -1;
	}
	pol_diag_free(&d);
	if (enforce_set_policy(mv, pol, err) < 0) {
		policy_free(pol);
		err->code = MV_E_NOT_SUPPORTED;
		return -1;
	}
	return 0;
}
