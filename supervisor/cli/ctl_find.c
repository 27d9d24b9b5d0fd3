/* memvisor ctl: finding a supervisor's socket. */
#include "supervisor/cli/ctl_find.h"
#include "common/util.h"
#include "supervisor/cli/ctl_conn.h"

#include <ctype.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The directories a memvisor of this user puts its sockets in. */
static size_t socket_dirs(char dirs[3][4096])
{
	size_t n = 0;
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	if (xdg && *xdg)
		snprintf(dirs[n++], 4096, "%s/memvisor", xdg);
	if (geteuid() == 0)
		snprintf(dirs[n++], 4096, "/run/memvisor");
	else
		snprintf(dirs[n++], 4096, "/tmp/memvisor-%u", geteuid());
	return n;
}

char **ctl_find_live(size_t *count)
{
	char dirs[3][4096];
	size_t nd = socket_dirs(dirs), n = 0, cap = 8;
	char **v = xcalloc(cap, sizeof(*v));
	for (size_t d = 0; d < nd; d++) {
		DIR *dir = opendir(dirs[d]);
		if (!dir)
			continue;
		struct dirent *e;
		while ((e = readdir(dir))) {
			size_t len = strlen(e->d_name);
			if (len < 6 || strcmp(e->d_name + len - 5, ".sock") != 0)
				continue;
			char path[8192];
			snprintf(path, sizeof(path), "%s/%s", dirs[d], e->d_name);
			char why[8400] = "";
			int fd = ctl_conn_connect(path, why, sizeof(why));
			if (fd == -EPERM)
				fprintf(stderr, "memvisor ctl: skipping %s: %s\n", path, why);
			if (fd < 0)
				continue;
			close(fd);
			if (n + 1 >= cap)
				v = xrealloc(v, (cap *= 2) * sizeof(*v));
			v[n++] = xstrdup(path);
		}
		closedir(dir);
	}
	v[n] = NULL;
	*count = n;
	return v;
}

void ctl_find_free(char **v)
{
	for (char **p = v; p && *p; p++)
		free(*p);
	free(v);
}

int ctl_name_check(const char *name, char *why, size_t len)
{
	size_t n = strlen(name);
	bool digits = true;
	for (const char *p = name; *p; p++) {
		if (!isalnum((unsigned char)*p) && !strchr("._-", *p)) {
			snprintf(why, len, "'%c' is not allowed in a name", *p);
			return -EINVAL;
		}
		digits &= isdigit((unsigned char)*p) != 0;
	}
	if (n == 0 || n > CTL_NAME_MAX)
		snprintf(why, len, "a name has 1 to %d characters", CTL_NAME_MAX);
	else if (name[0] == '.' || name[0] == '-')
		snprintf(why, len, "a name does not start with '%c'", name[0]);
	else if (digits)
		snprintf(why, len, "a name is not only digits (PID.sock is a pid's socket)");
	else
		return 0;
	return -EINVAL;
}

/* After a name that is not found: the names that are, and how many run
 * without one (their socket is PID.sock). */
static void say_names(void)
{
	size_t n, unnamed = 0, named = 0;
	char **v = ctl_find_live(&n);
	for (size_t i = 0; i < n; i++) {
		const char *base = strrchr(v[i], '/') ? strrchr(v[i], '/') + 1 : v[i];
		size_t len = strlen(base) - strlen(".sock");
		if (strspn(base, "0123456789") == len) {
			unnamed++;
			continue;
		}
		fprintf(stderr, "%s%.*s", named++ ? ", " : "memvisor ctl: running: ", (int)len,
			base);
	}
	if (named)
		fprintf(stderr, "\n");
	if (!named && !unnamed)
		fprintf(stderr, "memvisor ctl: no memvisor is running\n");
	else if (!named)
		fprintf(stderr,
			"memvisor ctl: none running has a name (memvisor run --name NAME)\n");
	if (named && unnamed)
		fprintf(stderr, "memvisor ctl: and %zu without a name (`memvisor ctl --list`)\n",
			unnamed);
	ctl_find_free(v);
}

/* The live socket of the memvisor named name, in any of the directories. */
static int find_named(const char *name, char **out)
{
	char dirs[3][4096], why[256];
	size_t nd = socket_dirs(dirs);
	if (ctl_name_check(name, why, sizeof(why)) < 0) {
		fprintf(stderr, "memvisor ctl: --name: '%s' is not a name: %s\n", name, why);
		return CTL_EXIT_USAGE;
	}
	for (size_t d = 0; d < nd; d++) {
		char path[8192], whyp[8400] = "";
		snprintf(path, sizeof(path), "%s/%s.sock", dirs[d], name);
		int fd = ctl_conn_connect(path, whyp, sizeof(whyp));
		if (fd == -EPERM)
			fprintf(stderr, "memvisor ctl: skipping %s: %s\n", path, whyp);
		if (fd < 0)
			continue;
		close(fd);
		*out = xstrdup(path);
		return CTL_EXIT_OK;
	}
	fprintf(stderr, "memvisor ctl: no running memvisor is named %s (looked in %s%s%s)\n", name,
		dirs[0], nd > 1 ? " and " : "", nd > 1 ? dirs[1] : "");
	say_names();
	return CTL_EXIT_CONNECT;
}

int ctl_find_socket(const char *given, const char *name, char **out)
{
	if (!given && name)
		return find_named(name, out);
	const char *s = given ? given : getenv("MEMVISOR_SOCKET");
	if (s && *s) {
		*out = xstrdup(s);
		return CTL_EXIT_OK;
	}
	size_t n;
	char **v = ctl_find_live(&n);
	if (n == 1) {
		*out = xstrdup(v[0]);
		ctl_find_free(v);
		return CTL_EXIT_OK;
	}
	if (n == 0) {
		char dirs[3][4096];
		size_t nd = socket_dirs(dirs);
		fprintf(stderr,
			"memvisor ctl: no running memvisor found (looked in %s%s%s); use --socket "
			"PATH\n",
			dirs[0], nd > 1 ? " and " : "", nd > 1 ? dirs[1] : "");
		ctl_find_free(v);
		return CTL_EXIT_CONNECT;
	}
	fprintf(stderr,
		"memvisor ctl: %zu memvisors are running; choose one with --socket (or --name):\n",
		n);
	for (size_t i = 0; i < n; i++)
		fprintf(stderr, "  %s\n", v[i]);
	ctl_find_free(v);
	return CTL_EXIT_USAGE;
}
