/* memvisor ctl: finding a supervisor's socket. */
#include "supervisor/cli/ctl_find.h"
#include "common/util.h"
#include "supervisor/cli/ctl_conn.h"

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

int ctl_find_socket(const char *given, char **out)
{
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
	fprintf(stderr, "memvisor ctl: %zu memvisors are running; choose one with --socket:\n", n);
	for (size_t i = 0; i < n; i++)
		fprintf(stderr, "  %s\n", v[i]);
	ctl_find_free(v);
	return CTL_EXIT_USAGE;
}
