#include "common/log.h"
#include "common/util.h"

#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static int log_fd = STDERR_FILENO;
static int log_to_file;
static int log_stderr_programs; /* log_stderr_shared */
static enum mv_log_level log_level = MV_LOG_WARN;

static const char *const level_names[] = {"error", "warn", "info", "debug"};

int log_parse_level(const char *s, enum mv_log_level *out)
{
	for (size_t i = 0; i < ARRAY_SIZE(level_names); i++) {
		if (strcmp(s, level_names[i]) == 0) {
			*out = (enum mv_log_level)i;
			return 0;
		}
	}
	return -EINVAL;
}

int log_open(const char *path, enum mv_log_level level)
{
	log_level = level;
	if (!path)
		return 0;
	/* Root may be asked for a log in /tmp: a symlink planted there must
	 * not make it append to any file. */
	int fd = mv_open_append(path, 0600);
	if (fd < 0)
		return fd;
	log_fd = fd;
	log_to_file = 1;
	return 0;
}

void log_stderr_shared(void)
{
	log_stderr_programs = 1;
}

int log_enabled(enum mv_log_level level)
{
	return level <= log_level;
}

static void log_vmsg(enum mv_log_level level, const char *fmt, va_list ap)
{
	char line[2048];
	int n;
	if (log_to_file) {
		struct timespec ts;
		struct tm tm;
		clock_gettime(CLOCK_REALTIME, &ts);
		gmtime_r(&ts.tv_sec, &tm);
		n = snprintf(line, sizeof(line),
			     "%04d-%02d-%02dT%02d:%02d:%02d.%06ldZ [%d] %s: ", tm.tm_year + 1900,
			     tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
			     ts.tv_nsec / 1000, (int)getpid(), level_names[level]);
	} else {
		n = snprintf(line, sizeof(line), "memvisor: %s: ", level_names[level]);
	}
	int m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	size_t len = (size_t)n + (size_t)MV_MIN(m, (int)(sizeof(line) - (size_t)n - 2));
	line[len++] = '\n';
	(void)mv_write_all(log_fd, line, len);
}

void log_msg(enum mv_log_level level, const char *fmt, ...)
{
	if (!log_enabled(level))
		return;
	va_list ap;
	va_start(ap, fmt);
	log_vmsg(level, fmt, ap);
	va_end(ap);
}

void log_job_msg(enum mv_log_level level, const char *fmt, ...)
{
	/* A stderr that is the program's gets it only when more was asked
	 * for. */
	bool quiet = log_stderr_programs && !log_to_file && !log_enabled(MV_LOG_INFO);
	if (!log_enabled(level) || quiet)
		return;
	va_list ap;
	va_start(ap, fmt);
	log_vmsg(level, fmt, ap);
	va_end(ap);
}
