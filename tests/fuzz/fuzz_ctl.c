/* libFuzzer harness: control-protocol request lines through the real
 * parser and command table (ctl_reply_line, the function the socket server
 * answers every line with), against a supervisor with no running process: the
 * commands that would start work (checkpoint, a policy_set that loads)
 * fail or finish without leaving anything behind. The input is split at
 * newlines like a client's stream. */
#include "common/log.h"
#include "common/syscalls.h"
#include "common/util.h"
#include "supervisor/ctl/server.h"
#include "supervisor/image/pagesw.h"
#include "supervisor/reload/evict.h"
#include "supervisor/supervise/enforce.h"
#include "supervisor/supervise/events.h"
#include "supervisor/supervise/mv.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char *fake_argv[] = {"fuzz-command", "arg", NULL};

/* The seeds name two policy files in a fixed directory of our own: one
 * valid, one not. stdin becomes /dev/null so that no path the fuzzer names
 * can block on it. (Nothing here changes directory: libFuzzer reads and
 * writes its corpus by the paths it was given.) */
#define POLICY_DIR "/tmp/memvisor-fuzz-ctl"

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	if (!f || fputs(text, f) < 0 || fclose(f) != 0) {
		fprintf(stderr, "fuzz_ctl: cannot write %s: %s\n", path, strerror(errno));
		abort();
	}
}

static void isolate(void)
{
	struct stat st;
	if (mkdir(POLICY_DIR, 0700) < 0 && (errno != EEXIST || lstat(POLICY_DIR, &st) < 0 ||
					    !S_ISDIR(st.st_mode) || st.st_uid != geteuid())) {
		fprintf(stderr, "fuzz_ctl: %s: not a directory of ours\n", POLICY_DIR);
		abort();
	}
	write_file(POLICY_DIR "/ok.json",
		   "{\"version\":1,\"default\":\"allow\",\"limits\":{\"max_mapping\":\"1G\"}}\n");
	write_file(POLICY_DIR "/bad.json",
		   "{\"version\":1,\"default\":\"maybe\",\"rules\":[{\"action\":7}]}\n");
	int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (fd < 0 || dup2(fd, 0) < 0) {
		perror("fuzz_ctl: /dev/null");
		abort();
	}
	close(fd);
}

static struct mv *fake_mv(void)
{
	struct mv *mv = xcalloc(1, sizeof(*mv));
	mv->listener = mv->sigfd = mv->reaper_rd = mv->reaper_wr = mv->launch_sock = -1;
	mv->exits_epfd = -1;
	mv->opts.argc = 2;
	mv->opts.argv = fake_argv;
	mv->opts.notify_all = true; /* every policy_set is within the launch filter */
	mv->self = getpid();
	mv->start_ns = mv_now_ns();
	mv->start_wall_ns = mv_wall_ns();
	mv->cmd_pid = -1;
	features_probe(&mv->feat);
	if (enforce_init(mv) < 0)
		abort();
	pthread_mutex_init(&mv->lock, NULL);
	proctab_init(&mv->procs, 16);
	/* One process that has exited: stats renders it, pid commands still
	 * find no running process. */
	struct proc *p = proctab_add(&mv->procs, 4194304, 1);
	p->exe = xstrdup("/usr/bin/fuzz-exited");
	proctab_exit(&mv->procs, p, mv_wall_ns());
	events_init(mv);
	mv->evict = evict_new(mv);
	mv->staging = pagesw_pool_new();
	return mv;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct mv *mv;
	static bool debug;
	if (!mv) {
		debug = getenv("FUZZ_DEBUG") != NULL;
		log_open(NULL, MV_LOG_ERROR);
		if (syscalls_init() < 0)
			abort();
		isolate();
		mv = fake_mv();
	}
	const char *p = (const char *)data, *end = p + size;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
		char *reply = ctl_reply_line(mv, p, len);
		if (reply && debug)
			fputs(reply, stderr); /* FUZZ_DEBUG=1: to see what seeds reach */
		free(reply);
		p += len + 1;
	}
	return 0;
}
