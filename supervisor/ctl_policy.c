#include "supervisor/ctl_policy.h"
#include "common/util.h"
#include "policy/policy.h"
#include "supervisor/enforce.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

/* As policy_load's limit: a policy is a few KiB. */
#define CTL_POLICY_MAX_BYTES (1 << 20)

int ctl_policy_show(struct mv *mv, struct ctl_client *c, json_t *args, json_t **result,
		    struct ctl_err *err)
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

/* Read a policy file for `policy set` without ever blocking the main loop:
 * policy_load's plain open() of a FIFO waits for a writer, and a read of
 * one (or of a device, or /proc/kmsg) for data, while every client, exit
 * and job waits behind it. So: open O_NONBLOCK, accept a regular file
 * only, read at most CTL_POLICY_MAX_BYTES (a regular file's reads do not
 * wait on anyone; O_NONBLOCK stays set for the odd /proc file that
 * would). 0, or -errno with the reason in d. */
static int read_policy_file(const char *path, char **out, size_t *len, struct pol_diag *d)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0) {
		int e = errno;
		pol_diag_add(d, "%s: cannot open: %s", path, strerror(e));
		return -e;
	}
	if (!S_ISREG(st.st_mode)) {
		pol_diag_add(d, "%s: not a regular file: a policy is read from a file", path);
		return -EINVAL;
	}
	size_t cap = CTL_POLICY_MAX_BYTES + 1, n = 0;
	_cleanup_free_ char *buf = xmalloc(cap);
	while (n < cap) {
		ssize_t r = read(fd, buf + n, cap - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			int e = errno;
			pol_diag_add(d, "%s: cannot read: %s", path, strerror(e));
			return -e;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	if (n > CTL_POLICY_MAX_BYTES) {
		pol_diag_add(d, "%s: larger than %d bytes: not a policy", path,
			     CTL_POLICY_MAX_BYTES);
		return -EFBIG;
	}
	*out = mv_steal_ptr(buf);
	*len = n;
	return 0;
}

int ctl_policy_set(struct mv *mv, struct ctl_client *c, json_t *args, json_t **result,
		   struct ctl_err *err)
{
	json_t *p = args ? json_object_get(args, "path") : NULL;
	if (!json_is_string(p) || !*json_string_value(p))
		return ctl_fail(err, CTL_E_BAD_REQUEST,
				"args.path: expected the policy file's path");
	/* The supervisor reads the file itself: a relative path is relative
	 * to memvisor's working directory, so clients send absolute ones. */
	const char *path = json_string_value(p);
	struct policy *pol;
	struct pol_diag d = {0};
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	if (read_policy_file(path, &text, &len, &d) < 0 ||
	    policy_parse(text, len, path, &pol, &d) < 0) {
		diag_message(&d, err->message, sizeof(err->message));
		err->code = CTL_E_INVALID;
		pol_diag_free(&d);
		return -1;
	}
	pol_diag_free(&d);
	char why[sizeof(err->message)];
	if (enforce_set_policy(mv, pol, why, sizeof(why)) < 0) {
		policy_free(pol);
		return ctl_fail(err, CTL_E_NOT_SUPPORTED, "%s", why);
	}
	*result = enforce_show(mv);
	return 0;
}
