/* memvisor ctl: following the event stream, or a job until it ends. */
#include "supervisor/cli/ctl_follow.h"
#include "common/util.h"
#include "supervisor/cli/ctl_show.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char *member(json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));
	return s ? s : "-";
}

int ctl_follow_events(struct ctl_conn *c, bool raw)
{
	json_t *res;
	int rc = ctl_conn_call(c, "events", NULL, &res);
	if (rc)
		return rc;
	json_decref(res);
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (;;) {
		json_t *e = ctl_conn_read(c, true);
		if (!e)
			return CTL_EXIT_OK; /* the supervisor exited */
		if (raw)
			ctl_show_line(e);
		else
			ctl_show_event(e);
		json_decref(e);
	}
}

/* memvisor went away while we followed job id: it exits once the
 * supervised command has ended, after waiting for its jobs, and answers
 * a last moment (ctl_server_stop); this is what is left when it could
 * not (killed, or we were too slow). Say what is known: for a
 * checkpoint, whether its image is there. */
static int job_lost(long long id, const char *dir, bool tty)
{
	if (tty)
		fprintf(stderr, "\r\033[K");
	fprintf(stderr,
		"memvisor ctl: memvisor exited before saying how job %lld ended (it exits once "
		"the supervised command has ended)",
		id);
	struct stat st;
	if (dir && stat(dir, &st) == 0)
		fprintf(stderr, "; an image is at %s: check it with memvisor image verify %s\n",
			dir, dir);
	else if (dir)
		fprintf(stderr, "; no image was written to %s\n", dir);
	else
		fprintf(stderr, "\n");
	return CTL_EXIT_REPLY;
}

/* A bar on a terminal, a line a second (and at every phase) otherwise. */
int ctl_follow_job(struct ctl_conn *c, long long id, bool raw, const char *dir)
{
	bool tty = isatty(STDERR_FILENO);
	char phase[32] = "";
	uint64_t last = 0;
	c->quiet_eof = true;
	for (;;) {
		json_t *j = NULL;
		int rc = ctl_conn_call(c, "job", json_pack("{s:I}", "id", (json_int_t)id), &j);
		if (rc == CTL_EXIT_CONNECT && c->gone)
			return job_lost(id, dir, tty);
		if (rc)
			return rc;
		const char *state = member(j, "state");
		if (strcmp(state, "running") != 0) {
			if (tty)
				fprintf(stderr, "\r\033[K");
			if (raw)
				ctl_show_line(j);
			else
				ctl_show_job(j);
			json_t *e = json_object_get(j, "error");
			if (e)
				fprintf(stderr, "memvisor ctl: job %lld failed: %s: %s\n", id,
					member(e, "code"), member(e, "message"));
			rc = strcmp(state, "done") == 0 ? CTL_EXIT_OK : CTL_EXIT_REPLY;
			json_decref(j);
			return rc;
		}
		uint64_t now = mv_now_ns();
		if (tty || strcmp(phase, member(j, "phase")) != 0 || now - last >= 1000000000ull) {
			ctl_show_progress(j, tty);
			snprintf(phase, sizeof(phase), "%s", member(j, "phase"));
			last = now;
		}
		json_decref(j);
		struct timespec ts = {0, 100 * 1000000};
		nanosleep(&ts, NULL);
	}
}
