/* Logging: one line per message, to stderr or to the --log file.
 * Thread-safe; each message is written with a single write(2).
 *
 * memvisor run's stderr is the program's: what it says there is what
 * concerns the run (memvisor's own errors, what the policy and the
 * supervision need the user to know). The outcome of a job a control
 * client asked for (a checkpoint or reload that failed, memory an evict
 * left resident) is the client's, in the job's result or error and its
 * events: log_job_* writes it to the --log file at its level, and, once
 * log_stderr_shared said stderr is the program's, to stderr only when -L
 * info or debug asked for more (memvisor-run(1), "STANDARD ERROR"). */
#ifndef MV_LOG_H
#define MV_LOG_H

enum mv_log_level { MV_LOG_ERROR, MV_LOG_WARN, MV_LOG_INFO, MV_LOG_DEBUG };

/* Open the log file (NULL keeps stderr) and set the level. 0 or -errno. */
int log_open(const char *path, enum mv_log_level level);

/* stderr is the supervised program's (memvisor run; the agent's is its
 * own): job outcomes go there only from level info. */
void log_stderr_shared(void);

/* Parse "error", "warn", "info", "debug". 0 or -EINVAL. */
int log_parse_level(const char *s, enum mv_log_level *out);

/* True when messages at this level are written (to skip building them). */
int log_enabled(enum mv_log_level level);

void log_msg(enum mv_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A job's outcome, at level: as log_msg, but to a shared stderr only
 * from level info. */
void log_job_msg(enum mv_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#define log_error(...)	  log_msg(MV_LOG_ERROR, __VA_ARGS__)
#define log_warn(...)	  log_msg(MV_LOG_WARN, __VA_ARGS__)
#define log_info(...)	  log_msg(MV_LOG_INFO, __VA_ARGS__)
#define log_job_warn(...) log_job_msg(MV_LOG_WARN, __VA_ARGS__)
#define log_debug(...)                                                                             \
	do {                                                                                       \
		if (log_enabled(MV_LOG_DEBUG))                                                     \
			log_msg(MV_LOG_DEBUG, __VA_ARGS__);                                        \
	} while (0)

#endif
