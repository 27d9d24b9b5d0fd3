#include "common/proctitle.h"
#include "common/util.h"

#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>

extern char **environ;

/* argv[0] up to the end of the last argument, then of the environment
 * strings that follow it, as the kernel laid them out. */
static char *area;
static size_t area_len;
static bool env_in_area;

void proctitle_init(int argc, char **argv)
{
	if (argc < 1 || !argv[0])
		return;
	char *end = argv[0] + strlen(argv[0]) + 1;
	for (int i = 1; i < argc && argv[i] == end; i++)
		end = argv[i] + strlen(argv[i]) + 1;
	for (size_t i = 0; environ && environ[i] == end; i++) {
		end = environ[i] + strlen(environ[i]) + 1;
		env_in_area = true;
	}
	area = argv[0];
	area_len = (size_t)(end - argv[0]);
}

void proctitle_set(const char *name, const char *title)
{
	prctl(PR_SET_NAME, name);
	if (!area || area_len < 2)
		return;
	/* The environment strings are overwritten too: move them first. */
	if (env_in_area) {
		size_t n = 0;
		while (environ[n])
			n++;
		char **copy = xcalloc(n + 1, sizeof(*copy));
		for (size_t i = 0; i < n; i++)
			copy[i] = xstrdup(environ[i]);
		environ = copy;
		env_in_area = false;
	}
	/* One string, zeros after it: /proc/PID/cmdline (and ps) show just
	 * the title; one longer than the arguments runs on into where the
	 * environment was, which the kernel reads on to its NUL. */
	size_t n = strlen(title);
	if (n > area_len - 1)
		n = area_len - 1;
	memcpy(area, title, n);
	memset(area + n, 0, area_len - n);
}
