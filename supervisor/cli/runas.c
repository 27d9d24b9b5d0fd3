/* --user: resolve USER[:GROUP] (supervisor/cli/runas.h). */
#include "supervisor/cli/runas.h"
#include "common/util.h"

#include <errno.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A whole decimal number that fits an id (not -1, the "unchanged" id of
 * setresuid(2)). */
static bool parse_id(const char *s, unsigned long *out)
{
	char *end;
	errno = 0;
	unsigned long v = strtoul(s, &end, 10);
	if (!*s || *end || errno || v >= (unsigned long)UINT_MAX || s[0] == '-')
		return false;
	*out = v;
	return true;
}

static int resolve_group(const char *g, gid_t *gid, struct mv_err *err)
{
	unsigned long v;
	if (parse_id(g, &v)) {
		*gid = (gid_t)v;
		return 0;
	}
	struct group *gr = getgrnam(g);
	if (!gr)
		return mv_err_set(err, -ENOENT, NULL, "--user: no group '%s'", g);
	*gid = gr->gr_gid;
	return 0;
}

int runas_parse(const char *spec, struct runas *out, struct mv_err *err)
{
	memset(out, 0, sizeof(*out));
	_cleanup_free_ char *user = xstrdup(spec);
	char *group = strchr(user, ':');
	if (group)
		*group++ = '\0';
	if (!*user || (group && !*group))
		return mv_err_set(err, -EINVAL, NULL, "--user: '%s' is not USER or USER:GROUP",
				  spec);
	if (geteuid() != 0)
		return mv_err_set(err, -EPERM, NULL,
				  "--user needs root (CAP_SETUID and CAP_SETGID): memvisor "
				  "keeps its own uid and starts the command as another");
	unsigned long v;
	struct passwd *pw = getpwnam(user);
	if (!pw && parse_id(user, &v))
		pw = getpwuid((uid_t)v);
	if (!pw && !parse_id(user, &v))
		return mv_err_set(err, -ENOENT, NULL, "--user: no user '%s'", user);
	out->uid = pw ? pw->pw_uid : (uid_t)v;
	out->gid = pw ? pw->pw_gid : (gid_t)v;
	if (group) {
		int rc = resolve_group(group, &out->gid, err);
		if (rc < 0)
			return rc;
	}
	/* The user's groups, as login(1) and runuser(1) give them; none with
	 * an explicit GROUP or a bare number without a passwd entry. */
	if (pw && !group) {
		int n = 32;
		for (;;) {
			out->groups = xrealloc(out->groups, (size_t)n * sizeof(gid_t));
			int want = n;
			if (getgrouplist(pw->pw_name, out->gid, out->groups, &want) >= 0) {
				out->n_groups = (size_t)want;
				break;
			}
			if (want <= n || want > 65536)
				break;
			n = want;
		}
	}
	if (!out->n_groups) {
		out->groups = xrealloc(out->groups, sizeof(gid_t));
		out->groups[0] = out->gid;
		out->n_groups = 1;
	}
	return 0;
}

void runas_free(struct runas *r)
{
	free(r->groups);
	r->groups = NULL;
	r->n_groups = 0;
}
