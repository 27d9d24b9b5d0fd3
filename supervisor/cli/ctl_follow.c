/* memvisor ctl: following a job until it ends. */
#include "supervisor/cli/ctl_follow.h"
#include "common/util.h"
#include "supervisor/cli/ctl_show.h"

#include <signal.h>
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
	char word[4 * 4096 + 3];
	if (dir && stat(dir, &st) == 0)
		fprintf(stderr, "; an image is at %s: check it with memvisor image verify %s\n",
			dir, mv_shell_word(dir, word, sizeof(word)));
	else if (dir)
		fprintf(stderr, "; no image was written to %s\n", dir);
	else
		fprintf(stderr, "\n");
	return CTL_EXIT_REPLY;
}

/* Ctrl-C while following a job ends the client, not the job: say so, and
 * how to follow or stop it, as the last thing the client does. The
 * message is made before the handler can run (only write(2) and _exit(2)
 * are async-signal-safe), and updated with the signal blocked once the
 * job's kind is known. A client started with SIGINT ignored (a
 * background job of a script) keeps ignoring it. */
static char interrupt_msg[8192 + 600];
static size_t interrupt_len;

static void on_interrupt(int sig)
{
	ssize_t n = write(STDERR_FILENO, interrupt_msg, interrupt_len);
	(void)n;
	_exit(128 + sig);
}

static void interrupt_say(long long id, const char *kind, bool cancelling, bool tty,
			  const char *sel)
{
	sigset_t set, old;
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigprocmask(SIG_BLOCK, &set, &old);
	const char *erase = tty ? "\r\033[K" : "";
	int n;
	if (cancelling)
		n = snprintf(
		    interrupt_msg, sizeof(interrupt_msg),
		    "%sjob %lld is being cancelled; `memvisor ctl %sjob %lld --wait` follows "
		    "it\n",
		    erase, id, sel, id);
	else if (strcmp(kind, "reload") == 0)
		n = snprintf(interrupt_msg, sizeof(interrupt_msg),
			     "%sjob %lld continues; `memvisor ctl %sjob %lld --wait` follows it "
			     "(a reload cannot be cancelled; `memvisor ctl %sjob unthrottle %lld` "
			     "lifts its rate limit)\n",
			     erase, id, sel, id, sel, id);
	else if (strcmp(kind, "mark") == 0)
		n = snprintf(interrupt_msg, sizeof(interrupt_msg),
			     "%sjob %lld continues; `memvisor ctl %sjob %lld --wait` follows it\n",
			     erase, id, sel, id);
	else if (strcmp(kind, "rollback") == 0)
		n = snprintf(interrupt_msg, sizeof(interrupt_msg),
			     "%sjob %lld continues; `memvisor ctl %sjob %lld --wait` follows it, "
			     "`memvisor ctl %sjob cancel %lld` ends its --until run\n",
			     erase, id, sel, id, sel, id);
	else
		n = snprintf(interrupt_msg, sizeof(interrupt_msg),
			     "%sjob %lld continues; `memvisor ctl %sjob %lld --wait` follows it, "
			     "`memvisor ctl %sjob cancel %lld` stops it\n",
			     erase, id, sel, id, sel, id);
	interrupt_len = n > 0 ? MV_MIN((size_t)n, sizeof(interrupt_msg) - 1) : 0;
	sigprocmask(SIG_SETMASK, &old, NULL);
}

static void interrupt_catch(void)
{
	struct sigaction sa, old;
	if (sigaction(SIGINT, NULL, &old) == 0 && old.sa_handler == SIG_IGN)
		return;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_interrupt;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
}

/* The job has ended in state: show it, say what it means for the
 * follower, and return the exit status. */
static int job_ended(json_t *j, const struct ctl_follow *f)
{
	const char *state = member(j, "state");
	if (f->json)
		cli_json_print(stdout, j, f->json);
	else
		ctl_show_job(j, &f->show);
	json_t *e = json_object_get(j, "error");
	if (e)
		fprintf(stderr, "memvisor ctl: job %lld failed: %s\n", f->id, member(e, "message"));
	if (f->cancel && strcmp(state, "cancelled") == 0) {
		if (!f->json)
			printf("job %lld cancelled: every thread was resumed and no image was "
			       "written\n",
			       f->id);
		return CTL_EXIT_OK;
	}
	/* A rollback's --until run ends at the cancel: the rollback is done
	 * and says so (until: cancelled). */
	json_t *until = json_object_get(json_object_get(j, "result"), "until");
	if (f->cancel && strcmp(state, "done") == 0 &&
	    strcmp(member(until, "event"), "cancelled") == 0)
		return CTL_EXIT_OK;
	if (f->cancel) {
		fprintf(stderr, "memvisor ctl: job %lld ended (%s) before the cancel took effect\n",
			f->id, state);
		return CTL_EXIT_REPLY;
	}
	if (strcmp(state, "cancelled") == 0)
		fprintf(stderr, "memvisor ctl: job %lld was cancelled\n", f->id);
	return strcmp(state, "done") == 0 ? CTL_EXIT_OK : CTL_EXIT_REPLY;
}

/* A bar on a terminal, a line a second (and at every phase) otherwise. */
int ctl_follow_job(struct ctl_conn *c, const struct ctl_follow *f)
{
	bool tty = isatty(STDERR_FILENO), known = false;
	char phase[32] = "";
	uint64_t last = 0;
	unsigned interval_ms = 1;
	c->quiet_eof = true;
	interrupt_say(f->id, "", f->cancel, tty, f->show.selector);
	interrupt_catch();
	for (;;) {
		json_t *j = NULL;
		/* memvisor answers at the job's end, or after wait_ms: the
		 * bar moves ten times a second, a log line once a second. The
		 * first question is answered at once: the job's kind tells
		 * what Ctrl-C says. */
		unsigned wait_ms = !known ? 0 : tty ? 100 : 1000;
		uint64_t asked = mv_now_ns();
		int rc = ctl_conn_call(c, "job",
				       json_pack("{s:I, s:I}", "id", (json_int_t)f->id, "wait_ms",
						 (json_int_t)wait_ms),
				       &j);
		if (rc == CTL_EXIT_CONNECT && c->gone)
			return job_lost(f->id, f->image_dir, tty);
		if (rc)
			return rc;
		if (!known) {
			interrupt_say(f->id, member(j, "kind"), f->cancel, tty, f->show.selector);
			known = true;
		}
		if (strcmp(member(j, "state"), "running") != 0) {
			if (tty)
				fprintf(stderr, "\r\033[K");
			rc = job_ended(j, f);
			json_decref(j);
			return rc;
		}
		uint64_t now = mv_now_ns();
		/* Not on a terminal, a job is shown once it has run a while
		 * (a rollback ends first and prints only its result). */
		bool first = !wait_ms;
		if (tty || (!first && (strcmp(phase, member(j, "phase")) != 0 ||
				       now - last >= 1000000000ull))) {
			ctl_show_progress(j, tty);
			snprintf(phase, sizeof(phase), "%s", member(j, "phase"));
			last = now;
		}
		json_decref(j);
		/* An answer sooner than asked, the job running: a memvisor
		 * that does not wait (older than wait_ms). Poll it: soon for
		 * short jobs, ten times a second for long ones. */
		if (!first && mv_now_ns() - asked < (uint64_t)wait_ms * 500000) {
			struct timespec ts = {0, (long)interval_ms * 1000000};
			nanosleep(&ts, NULL);
			interval_ms = interval_ms * 2 > 100 ? 100 : interval_ms * 2;
		}
	}
}
