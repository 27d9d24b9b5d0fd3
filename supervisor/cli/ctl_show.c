/* memvisor ctl: results as people read them, tables with human sizes and
 * times; and as scripts read them (--json), one line each. */
#include "supervisor/cli/ctl_show.h"
#include "supervisor/cli/term.h"
#include "common/util.h"
#include "common/syscalls.h"
#include "policy/callargs.h"
#include "policy/names.h"
#include "supervisor/cli/options.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *hsize(json_t *v, char *buf, size_t len)
{
	return mv_human_size((uint64_t)json_integer_value(v), buf, len);
}

static const char *jstr(json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));
	return s ? s : "-";
}

static long long jint(json_t *o, const char *key)
{
	return json_integer_value(json_object_get(o, key));
}

/* A member in nanoseconds, as seconds. */
static double jsecs(json_t *o, const char *key)
{
	return (double)jint(o, key) / 1e9;
}

void ctl_show_cmdline(json_t *argv, int width)
{
	size_t i;
	json_t *a;
	int used = 0;
	json_array_foreach(argv, i, a)
	{
		const char *s = json_string_value(a);
		int n = printf("%s", i ? " " : "");
		/* A control character (a newline in an argument) as '?', as
		 * ps shows it: one line per row. */
		for (; s && *s; s++, n++)
			putchar((unsigned char)*s < 0x20 || *s == 0x7f ? '?' : *s);
		used += n;
		if (width > 0 && used > width)
			break;
	}
}

static void fmt_ns(uint64_t ns, char *buf, size_t len)
{
	if (ns < 10000)
		snprintf(buf, len, "%" PRIu64 " ns", ns);
	else if (ns < 10000000)
		snprintf(buf, len, "%.1f us", (double)ns / 1e3);
	else
		snprintf(buf, len, "%.1f ms", (double)ns / 1e6);
}

/* A running job's rate so far says something once it has run this long:
 * before, a few pages done in a few microseconds made "19666 MB/s". */
#define RATE_AFTER_NS (200 * 1000000ll)

/* Is j's rate worth showing: it has ended (bytes over its whole time),
 * or it has run RATE_AFTER_NS? */
static bool rate_known(json_t *j)
{
	return strcmp(jstr(j, "state"), "running") != 0 || jint(j, "elapsed_ns") >= RATE_AFTER_NS;
}

/* j's rate as " 12 MB/s" (precision decimals), or "" before it is known. */
static const char *rate_text(json_t *j, int precision, char *buf, size_t len)
{
	buf[0] = '\0';
	if (rate_known(j))
		snprintf(buf, len, " %.*f MB/s", precision, (double)jint(j, "rate") / 1e6);
	return buf;
}

/* How long a running job should still take, at its rate so far, as
 * ", ETA 1m05s" into buf; "" when that cannot be told (nothing done yet,
 * no total, no rate yet). */
static const char *eta(json_t *j, char *buf, size_t len)
{
	long long done = jint(j, "done"), total = jint(j, "total"), rate = jint(j, "rate");
	buf[0] = '\0';
	if (strcmp(jstr(j, "state"), "running") != 0 || done <= 0 || rate <= 0 || total <= done ||
	    !rate_known(j))
		return buf;
	long long s = (long long)((double)(total - done) / (double)rate + 0.5);
	if (s < 60)
		snprintf(buf, len, ", ETA %lld s", s);
	else if (s < 3600)
		snprintf(buf, len, ", ETA %lldm%02llds", s / 60, s % 60);
	else
		snprintf(buf, len, ", ETA %lldh%02lldm", s / 3600, s / 60 % 60);
	return buf;
}

/* A job on one line: its state, and while it runs, its phase (once it
 * has ended the phase is the state again); on a terminal, an ETA. In a
 * list (jobs, status, events) the columns line up. A job on its own (the
 * end of `--wait`, `job N`) is not padded, and on a terminal narrower than
 * the line its rate and times go on a second line, so that nothing wraps
 * and nothing is lost whatever its sizes and rate. */
static void render_job_line(json_t *j, const struct ctl_show_opts *o, bool list)
{
	char a[32], b[32], state[48], left[32] = "", rate[32], head[160], tail[96];
	if (o->tty)
		eta(j, left, sizeof(left));
	if (strcmp(jstr(j, "state"), "running") == 0)
		snprintf(state, sizeof(state), "running, %s%s", jstr(j, "phase"),
			 json_is_true(json_object_get(j, "cancelling")) ? ", cancelling" : "");
	else
		snprintf(state, sizeof(state), "%s", jstr(j, "state"));
	/* A job that moves no bytes (a rollback, a mark held before its
	 * copy) has neither sizes nor a rate to show. */
	bool bytes = jint(j, "total") > 0 || jint(j, "done") > 0;
	if (bytes)
		rate_text(j, 1, rate, sizeof(rate));
	else
		rate[0] = '\0';
	snprintf(head, sizeof(head), "  job %lld %-*s %-*s", jint(j, "id"), list ? 10 : 0,
		 jstr(j, "kind"), list ? 20 : 0, state);
	if (bytes) {
		size_t at = strlen(head);
		snprintf(head + at, sizeof(head) - at, " %s / %s",
			 hsize(json_object_get(j, "done"), a, sizeof(a)),
			 hsize(json_object_get(j, "total"), b, sizeof(b)));
	}
	snprintf(tail, sizeof(tail), "(%s%s%.1f s%s)", rate + (rate[0] != '\0'),
		 rate[0] ? ", " : "", jsecs(j, "elapsed_ns"), left);
	int width = list ? 0 : o->width;
	if (width > 0 && strlen(head) + 1 + strlen(tail) > (size_t)width) {
		term_put(stdout, head, width);
		fputs("\n    ", stdout);
		term_put(stdout, tail, width - 4);
		putchar('\n');
	} else {
		printf("%s %s\n", head, tail);
	}
	json_t *e = json_object_get(j, "error");
	if (e)
		printf("    error: %s\n", jstr(e, "message"));
}

static void render_jobs_list(json_t *jobs, const struct ctl_show_opts *o)
{
	size_t i;
	json_t *j;
	json_array_foreach(jobs, i, j) render_job_line(j, o, true);
}

/* The agent's hello: its own fields, not a supervisor's. */
static void show_agent_hello(json_t *r)
{
	printf("memvisor agent %s, pid %lld\n", jstr(r, "version"), jint(r, "pid"));
	printf("runtimes connect to: %s\n", jstr(r, "listen"));
	printf("control socket:      %s\n", jstr(r, "socket"));
	const char *pol = json_string_value(json_object_get(r, "policy"));
	printf("policy:              %s\n", pol ? pol : "none (every call allowed)");
	const char *dir = json_string_value(json_object_get(r, "policy_dir"));
	if (dir)
		printf("named policies:      %s/NAME.json (memvisor.policy=NAME)\n", dir);
	printf("containers:          %lld (ctl -c ID for each one's own commands)\n",
	       jint(r, "containers"));
	printf("commands:");
	size_t i;
	json_t *c;
	json_array_foreach(json_object_get(r, "commands"), i, c)
	    printf(" %s", json_string_value(c));
	printf("\n");
}

void ctl_show_hello(json_t *r, const struct ctl_show_opts *o)
{
	if (strcmp(jstr(r, "role"), "agent") == 0) {
		show_agent_hello(r);
		return;
	}
	printf("memvisor %s (protocol %lld), supervisor pid %lld\n", jstr(r, "memvisor"),
	       jint(r, "protocol"), jint(r, "pid"));
	if (json_is_string(json_object_get(r, "name")))
		printf("name:    %s\n", jstr(r, "name"));
	printf("command: ");
	ctl_show_cmdline(json_object_get(r, "command"), 0);
	printf("\nsocket:  %s\n", jstr(r, "socket"));
	json_t *f = json_object_get(r, "features");
	printf("kernel:  %s\n", jstr(f, "kernel"));
	json_t *un = json_object_get(f, "user_notif");
	json_t *uf = json_object_get(f, "userfaultfd");
	printf("features: sync_wake_up=%s wait_killable_recv=%s procmap_query=%s pagemap_scan=%s "
	       "pidfd_getfd=%s mdwe=%s userfaultfd=%s\n",
	       json_is_true(json_object_get(un, "sync_wake_up")) ? "yes" : "no",
	       json_is_true(json_object_get(un, "wait_killable_recv")) ? "yes" : "no",
	       json_is_true(json_object_get(f, "procmap_query")) ? "yes" : "no",
	       json_is_true(json_object_get(f, "pagemap_scan")) ? "yes" : "no",
	       json_is_true(json_object_get(f, "pidfd_getfd")) ? "yes" : "no",
	       json_is_true(json_object_get(f, "mdwe")) ? "yes" : "no",
	       json_is_true(json_object_get(uf, "dev"))	      ? "dev"
	       : json_is_true(json_object_get(uf, "syscall")) ? "syscall"
							      : "no");
	printf("commands:");
	size_t i;
	json_t *c;
	json_array_foreach(json_object_get(r, "commands"), i, c) printf(" %s", jstr(c, "name"));
	printf("\n");
}

void ctl_show_status(json_t *r, const struct ctl_show_opts *o)
{
	char a[32], b[32];
	json_t *t = json_object_get(r, "totals");
	printf("command:       ");
	ctl_show_cmdline(json_object_get(r, "command"), 0);
	printf("\ncommand pid:   %lld (%s", jint(r, "command_pid"), jstr(r, "command_state"));
	if (json_is_integer(json_object_get(r, "exit_status")))
		printf(", exit status %lld", jint(r, "exit_status"));
	printf(")\nuptime:        %.1f s\n", jsecs(r, "uptime_ns"));
	printf("processes:     %lld running, %lld seen\n", jint(r, "processes"),
	       jint(r, "processes_seen"));
	printf("memory:        %s mapped, %s committed\n",
	       hsize(json_object_get(t, "mapped"), a, sizeof(a)),
	       hsize(json_object_get(t, "committed"), b, sizeof(b)));
	printf("notifications: %lld (%lld denied, %lld killed)\n", jint(t, "notifications"),
	       jint(t, "denials"), jint(t, "kills"));
	ctl_show_uncounted(stdout, json_object_get(r, "uncounted"), UNCOUNTED_STATUS);
	/* Evicted memory: what each process is still owed, from which
	 * image, and what its faults cost (was only in --json). */
	json_t *ev = json_object_get(r, "evicted");
	if (json_array_size(ev)) {
		printf("evicted:\n");
		size_t i;
		json_t *e;
		json_array_foreach(ev, i, e)
		{
			printf("  process %lld: %s owed, %s back; image %s; %lld faults",
			       jint(e, "pid"),
			       hsize(json_object_get(e, "owed_bytes"), a, sizeof(a)),
			       hsize(json_object_get(e, "loaded_bytes"), b, sizeof(b)),
			       jstr(e, "image"), jint(e, "faults"));
			if (jint(e, "faults"))
				printf(" (p50 %.0f us, p99 %.0f us)", jint(e, "fault_p50_ns") / 1e3,
				       jint(e, "fault_p99_ns") / 1e3);
			printf("\n");
		}
	}
	json_t *mk = json_object_get(r, "mark"), *pids = json_object_get(mk, "pids"), *p;
	if (json_is_object(mk)) {
		size_t i;
		printf("mark:          %s, of process%s", jstr(mk, "name"),
		       json_array_size(pids) > 1 ? "es" : "");
		json_array_foreach(pids, i, p)
		    printf("%s%lld", i ? ", " : " ", (long long)json_integer_value(p));
		printf("; %s kept, %lld %s%s\n",
		       hsize(json_object_get(mk, "baseline_bytes"), a, sizeof(a)),
		       jint(mk, "rollbacks"),
		       mv_plural(jint(mk, "rollbacks"), "rollback", "rollbacks"),
		       json_is_true(json_object_get(mk, "held")) ? "; held stopped at the mark"
								 : "");
	}
	json_t *jobs = json_object_get(r, "jobs");
	if (json_array_size(jobs)) {
		printf("jobs:\n");
		render_jobs_list(jobs, o);
	}
}

void ctl_show_ps(json_t *r, const struct ctl_show_opts *o)
{
	if (o->legend)
		printf("%7s %7s %4s %-12s %10s %10s %8s  %s\n", "PID", "PPID", "THR", "STATE",
		       "MAPPED", "COMMITTED", "CALLS", "COMMAND");
	size_t i;
	json_t *p;
	json_array_foreach(json_object_get(r, "processes"), i, p)
	{
		char a[32], b[32];
		printf("%7lld %7lld %4lld %-12s %10s %10s %8lld  ", jint(p, "pid"), jint(p, "ppid"),
		       jint(p, "threads"), jstr(p, "state"),
		       hsize(json_object_get(p, "mapped"), a, sizeof(a)),
		       hsize(json_object_get(p, "committed"), b, sizeof(b)), jint(p, "calls"));
		ctl_show_cmdline(json_object_get(p, "cmdline"), 60);
		printf("\n");
	}
}

/* An address as the table shows it: the hex digits of "0x...". */
static const char *hex_digits(json_t *o, const char *key)
{
	const char *s = jstr(o, key);
	return strncmp(s, "0x", 2) == 0 ? s + 2 : s;
}

void ctl_show_regions(json_t *r, const struct ctl_show_opts *o)
{
	char a[32], b[32], c[32];
	size_t i;
	json_t *g;
	/* As wide as the widest address: [vsyscall] is at ffffffffff600000,
	 * 16 digits where user mappings have 12. */
	int w = 12;
	json_array_foreach(json_object_get(r, "regions"), i, g)
	{
		w = MV_MAX(w, (int)strlen(hex_digits(g, "start")));
		w = MV_MAX(w, (int)strlen(hex_digits(g, "end")));
	}
	if (o->legend)
		printf("%-*s %-*s %10s %-4s %-6s %-8s %10s %-10s %s\n", w, "START", w, "END",
		       "SIZE", "PROT", "SHARE", "KIND", "COMMITTED", "CREATED", "PATH");
	json_array_foreach(json_object_get(r, "regions"), i, g)
	{
		json_t *cb = json_object_get(g, "created_by");
		printf("%-*s %-*s %10s %-4s %-6s %-8s %10s %-10s %s\n", w, hex_digits(g, "start"),
		       w, hex_digits(g, "end"), hsize(json_object_get(g, "size"), a, sizeof(a)),
		       jstr(g, "prot"),
		       json_is_true(json_object_get(g, "shared")) ? "shared" : "priv",
		       jstr(g, "kind"), hsize(json_object_get(g, "committed"), b, sizeof(b)),
		       json_is_object(cb) ? jstr(cb, "syscall") : "-",
		       json_is_string(json_object_get(g, "path")) ? jstr(g, "path") : "");
	}
	if (!o->legend)
		return;
	fmt_ns((uint64_t)jint(r, "reconcile_ns"), c, sizeof(c));
	printf("%lld %s, %s mapped, %s committed (pid %lld, read with %s in %s)\n",
	       jint(r, "count"), mv_plural(jint(r, "count"), "region", "regions"),
	       hsize(json_object_get(r, "mapped"), a, sizeof(a)),
	       hsize(json_object_get(r, "committed"), b, sizeof(b)), jint(r, "pid"),
	       jstr(r, "source"), c);
}

static void render_stat_block(json_t *s, const struct ctl_show_opts *o)
{
	static const char *const verdicts[] = {"allow", "log", "deny", "kill"};
	if (o->legend)
		printf("  %-18s %9s %9s %9s %9s %12s\n", "SYSCALL", "ALLOW", "LOG", "DENY", "KILL",
		       "BYTES");
	const char *name;
	json_t *by;
	json_t *bytes = json_object_get(s, "bytes");
	json_object_foreach(json_object_get(s, "calls"), name, by)
	{
		char b[32] = "-";
		if (json_object_get(bytes, name))
			hsize(json_object_get(bytes, name), b, sizeof(b));
		printf("  %-18s", name);
		for (size_t i = 0; i < ARRAY_SIZE(verdicts); i++)
			printf(" %9lld", jint(by, verdicts[i]));
		printf(" %12s\n", b);
	}
	if (!o->legend)
		return;
	json_t *h = json_object_get(s, "service_ns");
	char p50[32], p99[32], p999[32], mx[32];
	fmt_ns((uint64_t)jint(h, "p50"), p50, sizeof(p50));
	fmt_ns((uint64_t)jint(h, "p99"), p99, sizeof(p99));
	fmt_ns((uint64_t)jint(h, "p999"), p999, sizeof(p999));
	fmt_ns((uint64_t)jint(h, "max"), mx, sizeof(mx));
	printf("  %lld %s; service time p50 %s, p99 %s, p99.9 %s, max %s\n", jint(s, "total"),
	       mv_plural(jint(s, "total"), "call", "calls"), p50, p99, p999, mx);
}

/* Print "head" then the names of list (strings, or objects whose
 * "syscall" is the name and "when" the reasons), wrapped at 80 columns
 * with continuation lines indented by indent. */
static void print_names(FILE *f, const char *head, json_t *list, int indent)
{
	int col = fprintf(f, "%s", head);
	size_t i;
	json_t *v;
	json_array_foreach(list, i, v)
	{
		char word[256];
		if (json_is_object(v)) {
			int n = snprintf(word, sizeof(word), "%s (", jstr(v, "syscall"));
			size_t k;
			json_t *w;
			json_array_foreach(json_object_get(v, "when"), k, w) n +=
			    snprintf(word + n, sizeof(word) - (size_t)MV_MIN(n, 255), "%s%s",
				     k ? ", " : "", json_string_value(w));
			snprintf(word + MV_MIN(n, 254), sizeof(word) - (size_t)MV_MIN(n, 254), ")");
		} else {
			snprintf(word, sizeof(word), "%s", json_string_value(v));
		}
		const char *sep = i + 1 < json_array_size(list) ? "," : "";
		int len = (int)strlen(word) + (int)strlen(sep);
		if (i && col + 1 + len > 79) {
			col = fprintf(f, "\n%*s", indent, "") - 1;
		} else if (i) {
			col += fprintf(f, " ");
		}
		col += fprintf(f, "%s%s", word, sep);
	}
	fprintf(f, "\n");
}

void ctl_show_uncounted(FILE *f, json_t *u, enum uncounted_view view)
{
	static const char *const heads[][3] = {
	    [UNCOUNTED_STATS] = {"not counted (decided in the kernel): ",
				 "counted only where the policy could refuse: ",
				 "  `memvisor run --notify-all` counts every memory call"},
	    [UNCOUNTED_STATUS] = {"not counted:   ", "counted when:  ",
				  "               (`memvisor run --notify-all` counts every call)"},
	    [UNCOUNTED_EVENTS] = {"no events for (decided in the kernel): ",
				  "events only where the policy could refuse: ",
				  "  `memvisor run --notify-all` shows every memory call"},
	};
	int indent = view == UNCOUNTED_STATUS ? 15 : 2;
	if (!json_is_object(u) || json_is_true(json_object_get(u, "notify_all")))
		return;
	json_t *never = json_object_get(u, "never"), *some = json_object_get(u, "some");
	if (json_array_size(never))
		print_names(f, heads[view][0], never, indent);
	if (json_array_size(some))
		print_names(f, heads[view][1], some, indent);
	if (json_array_size(never) || json_array_size(some))
		fprintf(f, "%s\n", heads[view][2]);
}

void ctl_show_stats(json_t *r, const struct ctl_show_opts *o)
{
	if (json_object_get(r, "totals")) {
		if (o->legend)
			printf(
			    "all processes (%lld %s):\n", jint(r, "notifications"),
			    mv_plural(jint(r, "notifications"), "notification", "notifications"));
		render_stat_block(json_object_get(r, "totals"), o);
	} else {
		if (o->legend)
			printf("pid %lld (%s)%s:\n", jint(r, "pid"), jstr(r, "exe"),
			       json_is_true(json_object_get(r, "exited")) ? ", exited" : "");
		render_stat_block(json_object_get(r, "stats"), o);
	}
	if (o->legend)
		ctl_show_uncounted(stdout, json_object_get(r, "uncounted"), UNCOUNTED_STATS);
}

static double ms(json_t *o, const char *key)
{
	return (double)jint(o, key) / 1e6;
}

/* checkpoint --live: what was copied while the program ran, or why the
 * live copy was given up. */
static void render_live(json_t *lv)
{
	char a[32], b[32];
	if (!lv)
		return;
	if (!json_is_true(json_object_get(lv, "live"))) {
		printf("  live copy given up (%s): stopped again for the whole copy (the first "
		       "pause %.1f ms)\n",
		       jstr(lv, "fallback"), ms(lv, "live_pause_ns"));
		return;
	}
	printf("  live: %s copied while it ran, %s during the pause; %lld %s waited "
	       "(%lld %s copied first for them)\n",
	       hsize(json_object_get(lv, "live_bytes"), a, sizeof(a)),
	       hsize(json_object_get(lv, "paused_bytes"), b, sizeof(b)), jint(lv, "write_faults"),
	       mv_plural(jint(lv, "write_faults"), "write", "writes"), jint(lv, "kept_pages"),
	       mv_plural(jint(lv, "kept_pages"), "page", "pages"));
	json_t *ev = json_object_get(lv, "evict");
	if (ev)
		printf("  evict: stopped again %.1f ms to drop what was not written since the "
		       "pause; %s written since stays resident\n",
		       ms(ev, "pause_ns"),
		       hsize(json_object_get(ev, "written_bytes"), a, sizeof(a)));
	size_t i;
	json_t *p;
	json_array_foreach(json_object_get(lv, "paused"), i, p)
	    printf("  copied during the pause: process %lld %s: %s\n", jint(p, "pid"),
		   jstr(p, "memory"), jstr(p, "why"));
}

static void render_checkpoint_result(json_t *res)
{
	char a[32], b[32], c[32];
	printf("image %s (id %s)\n", jstr(res, "dir"), jstr(res, "id"));
	long long np = (long long)json_array_size(json_object_get(res, "processes"));
	printf("  %lld %s, %lld %s, %lld %s, %lld %s\n", np, mv_plural(np, "process", "processes"),
	       jint(res, "threads"), mv_plural(jint(res, "threads"), "thread", "threads"),
	       jint(res, "regions"), mv_plural(jint(res, "regions"), "region", "regions"),
	       jint(res, "extents"), mv_plural(jint(res, "extents"), "extent", "extents"));
	printf("  %s written (%s committed), %s of it shared memory\n",
	       hsize(json_object_get(res, "bytes"), a, sizeof(a)),
	       hsize(json_object_get(res, "committed"), b, sizeof(b)),
	       hsize(json_object_get(res, "shared_bytes"), c, sizeof(c)));
	printf("  paused %.1f ms (stop %.1f, layout %.1f, copy %.1f", ms(res, "pause_ns"),
	       ms(res, "stop_ns"), ms(res, "layout_ns"), ms(res, "copy_ns"));
	/* With --evict and no live copy, the sync and the evict were in the
	 * pause; otherwise they followed it (docs/protocol.md). */
	json_t *ev = json_object_get(res, "evicted");
	bool live = json_is_true(json_object_get(json_object_get(res, "live"), "live"));
	if (ev && !live)
		printf(", sync %.1f, evict %.1f)", ms(res, "sync_ns"), ms(res, "evict_ns"));
	else
		printf("); synced %.1f ms after", ms(res, "sync_ns"));
	/* On a line of its own: the line fits 80 columns. */
	printf("\n  %.1f ms in all, %.0f MB/s\n", ms(res, "elapsed_ns"),
	       (double)jint(res, "rate") / 1e6);
	render_live(json_object_get(res, "live"));
	if (ev)
		printf("  evicted: %s in %lld %s (%lld left resident); shared memory: %s in %lld "
		       "%s\n",
		       hsize(json_object_get(ev, "bytes"), a, sizeof(a)), jint(ev, "regions"),
		       mv_plural(jint(ev, "regions"), "region", "regions"),
		       jint(ev, "kept_regions"),
		       hsize(json_object_get(ev, "shared_bytes"), b, sizeof(b)),
		       jint(ev, "shared_objects"),
		       mv_plural(jint(ev, "shared_objects"), "object", "objects"));
	size_t i;
	json_t *p;
	json_array_foreach(json_object_get(ev, "shared_resident"), i, p)
	    printf("  not evicted: shared memory %s: %s\n", jstr(p, "object"), jstr(p, "reason"));
	json_array_foreach(json_object_get(ev, "skipped"), i, p)
	    printf("  not evicted: process %lld %s\n", jint(p, "pid"), jstr(p, "reason"));
	json_array_foreach(json_object_get(ev, "kernel_resident"), i, p)
	    printf("  kept resident for the kernel: process %lld, %s: %s\n", jint(p, "pid"),
		   jstr(p, "what"), hsize(json_object_get(p, "bytes"), a, sizeof(a)));
	json_array_foreach(json_object_get(ev, "kept"), i, p)
	    printf("  not evicted: process %lld region %s-%s: %s\n", jint(p, "pid"),
		   jstr(p, "start"), jstr(p, "end"), jstr(p, "reason"));
	json_array_foreach(json_object_get(res, "processes"), i, p)
	{
		if (strcmp(jstr(p, "state"), "gone") == 0)
			printf("  process %lld: gone (exited during the checkpoint)\n",
			       jint(p, "pid"));
		else
			printf("  process %lld: %lld %s, %s, paused %.1f ms\n", jint(p, "pid"),
			       jint(p, "threads"),
			       mv_plural(jint(p, "threads"), "thread", "threads"),
			       hsize(json_object_get(p, "bytes"), a, sizeof(a)), ms(p, "pause_ns"));
	}
}

/* A reload's result (docs/protocol-reload.md). */
static void render_reload_result(json_t *res)
{
	char a[32], b[32], c[32];
	long long spaces = jint(res, "spaces");
	printf("reload of %s (id %s)\n", jstr(res, "dir"), jstr(res, "id"));
	printf("  %s loaded back into %lld address %s (%lld of them gone before their turn)\n",
	       hsize(json_object_get(res, "bytes"), a, sizeof(a)), spaces,
	       mv_plural(spaces, "space", "spaces"), jint(res, "gone"));
	printf("  verified in %.1f ms; %s read in %.1f s (%.0f MB/s)\n", ms(res, "verify_ns"),
	       hsize(json_object_get(res, "read_bytes"), b, sizeof(b)), jsecs(res, "load_ns"),
	       (double)jint(res, "read_rate") / 1e6);
	fmt_ns((uint64_t)jint(res, "fault_p99_ns"), c, sizeof(c));
	printf("  %lld demand %s meanwhile (p99 %s)\n", jint(res, "faults"),
	       mv_plural(jint(res, "faults"), "fault", "faults"), c);
	if (jint(res, "huge_bytes"))
		printf("  huge pages: %s of %s collapsed again in %.1f s\n",
		       hsize(json_object_get(res, "huge_restored_bytes"), a, sizeof(a)),
		       hsize(json_object_get(res, "huge_bytes"), b, sizeof(b)),
		       jsecs(res, "huge_ns"));
}

/* ---- mark, rollback ----------------------------------------------------- */

static void render_mark_result(json_t *res)
{
	char a[32], b[32], p[32];
	fmt_ns((uint64_t)jint(res, "pause_ns"), p, sizeof(p));
	json_t *snap = json_object_get(res, "snapshot");
	char sb[32];
	printf("marked process %lld as %s: %lld %s, %lld regions (%lld tracked, %s); %s kept",
	       jint(res, "pid"), jstr(res, "name"), jint(res, "threads"),
	       mv_plural(jint(res, "threads"), "thread", "threads"), jint(res, "regions"),
	       jint(res, "tracked_regions"),
	       hsize(json_object_get(res, "tracked_bytes"), a, sizeof(a)),
	       hsize(json_object_get(res, "baseline_bytes"), b, sizeof(b)));
	if (json_object_get(snap, "pid"))
		printf(" (%s in snapshot process %lld, %s copied)",
		       hsize(json_object_get(snap, "bytes"), a, sizeof(a)), jint(snap, "pid"),
		       hsize(json_object_get(res, "copied_bytes"), sb, sizeof(sb)));
	else
		printf(" (copied)");
	printf("; paused %s\n", p);
	if (jint(res, "shared_bytes"))
		printf("  %s of shared anonymous memory kept whole: put back at each rollback\n",
		       hsize(json_object_get(res, "shared_bytes"), a, sizeof(a)));
	size_t k;
	json_t *x;
	json_array_foreach(json_object_get(res, "processes"), k, x)
	{
		if (!k) /* the first is the one above */
			continue;
		printf("  and process %lld of its tree: %lld %s, %s kept (copied)", jint(x, "pid"),
		       jint(x, "threads"), mv_plural(jint(x, "threads"), "thread", "threads"),
		       hsize(json_object_get(x, "baseline_bytes"), a, sizeof(a)));
		if (jint(x, "shared_bytes"))
			printf(", %s shared kept whole",
			       hsize(json_object_get(x, "shared_bytes"), b, sizeof(b)));
		printf("\n");
	}
	if (json_is_true(json_object_get(res, "held")))
		printf(
		    "  held stopped at the mark: `memvisor ctl rollback --until CALL` runs it\n");
	size_t i;
	json_t *u;
	json_array_foreach(json_object_get(res, "untracked"), i, u)
	{
		const char *name = jstr(u, "name");
		printf("  not rolled back: %#llx-%#llx %s(%s)\n", jint(u, "start"), jint(u, "end"),
		       *name ? name : "", jstr(u, "why"));
	}
}

/* "thread T" of an until event, "thread T of process P" when T is not
 * the process's first thread (a tree's mark: another process). */
static const char *until_thread(json_t *u, char *buf, size_t len)
{
	long long tid = jint(u, "tid"), pid = jint(u, "pid");
	if (pid && pid != tid)
		snprintf(buf, len, "thread %lld of process %lld", tid, pid);
	else
		snprintf(buf, len, "thread %lld", tid);
	return buf;
}

/* What rollback --until stopped at. */
static void render_until(json_t *u)
{
	if (!u)
		return;
	const char *ev = jstr(u, "event");
	char ran[32], who[64];
	fmt_ns((uint64_t)jint(u, "run_ns"), ran, sizeof(ran));
	until_thread(u, who, sizeof(who));
	if (!strcmp(ev, "reached"))
		printf("  until: %s reached %s(%lld) after %s\n", who, jstr(u, "syscall"),
		       jint(u, "arg0"), ran);
	else if (!strcmp(ev, "exited"))
		printf("  until: %s called %s(%lld) after %s: held before it exits\n", who,
		       jstr(u, "syscall"), jint(u, "status"), ran);
	else if (!strcmp(ev, "crashed") && json_object_get(u, "addr"))
		printf("  until: %s crashed with %s at address %#llx (code %lld) after "
		       "%s: held, the signal dropped\n",
		       who, jstr(u, "signal_name"), jint(u, "addr"), jint(u, "code"), ran);
	else if (!strcmp(ev, "crashed") && json_object_get(u, "sender"))
		printf("  until: %s was sent %s by process %lld after %s: held, the signal "
		       "dropped\n",
		       who, jstr(u, "signal_name"), jint(u, "sender"), ran);
	else if (!strcmp(ev, "crashed"))
		printf("  until: %s crashed with %s (code %lld) after %s: held, the "
		       "signal dropped\n",
		       who, jstr(u, "signal_name"), jint(u, "code"), ran);
	else if (!strcmp(ev, "timeout"))
		printf("  until: the time limit passed (%s): held\n", ran);
	else if (!strcmp(ev, "exec"))
		printf("  until: %s ran a new program after %s: the mark is gone\n", who, ran);
	else if (!strcmp(ev, "gone"))
		printf("  until: process %lld ended after %s (%s %lld)\n",
		       jint(u, "pid") ? jint(u, "pid") : jint(u, "tid"), ran,
		       json_object_get(u, "signal") ? "signal" : "status",
		       json_object_get(u, "signal") ? jint(u, "signal") : jint(u, "status"));
	else
		printf("  until: %s after %s\n", ev, ran);
}

static void render_rollback_result(json_t *res)
{
	char a[32], b[32], p[32];
	fmt_ns((uint64_t)jint(res, "pause_ns"), p, sizeof(p));
	printf("rolled back process %lld to mark %s (rollback %lld): %s written back, %s dropped; "
	       "paused %s\n",
	       jint(res, "pid"), jstr(res, "name"), jint(res, "rollbacks"),
	       hsize(json_object_get(res, "written_bytes"), a, sizeof(a)),
	       hsize(json_object_get(res, "dropped_bytes"), b, sizeof(b)), p);
	size_t i;
	json_t *s;
	json_array_foreach(json_object_get(res, "processes"), i, s)
	{
		if (i) /* the first is the one above, whose counts are the tree's */
			printf("  and process %lld of its tree: %s written back, %s dropped\n",
			       jint(s, "pid"),
			       hsize(json_object_get(s, "written_bytes"), a, sizeof(a)),
			       hsize(json_object_get(s, "dropped_bytes"), b, sizeof(b)));
	}
	if (jint(res, "unmapped_bytes") || jint(res, "mapped_bytes") ||
	    json_object_get(res, "brk_was"))
		printf("  layout: %s unmapped, %s mapped again%s\n",
		       hsize(json_object_get(res, "unmapped_bytes"), a, sizeof(a)),
		       hsize(json_object_get(res, "mapped_bytes"), b, sizeof(b)),
		       json_object_get(res, "brk_was") ? ", brk put back" : "");
	if (jint(res, "threads_ended") || jint(res, "children_killed"))
		printf("  created since the mark: %lld %s ended, %lld %s killed\n",
		       jint(res, "threads_ended"),
		       mv_plural(jint(res, "threads_ended"), "thread", "threads"),
		       jint(res, "children_killed"),
		       mv_plural(jint(res, "children_killed"), "child", "children"));
	json_array_foreach(json_object_get(res, "signals_dropped"), i, s)
	    printf("  signal %lld to thread %lld arrived since the mark: dropped\n",
		   jint(s, "signal"), jint(s, "tid"));
	if (jint(res, "offsets_rewound") || jint(res, "fds_closed") || jint(res, "fds_reopened"))
		printf(
		    "  descriptors: %lld %s back at the mark's offset, %lld opened since closed, "
		    "%lld closed since opened again\n",
		    jint(res, "offsets_rewound"),
		    mv_plural(jint(res, "offsets_rewound"), "file", "files"),
		    jint(res, "fds_closed"), jint(res, "fds_reopened"));
	json_array_foreach(json_object_get(res, "fds_lost"), i, s)
	    printf("  descriptor %lld (%s) was closed since the mark and stays closed: %s\n",
		   jint(s, "fd"), jstr(s, "kind"), jstr(s, "why"));
	json_t *x;
	json_array_foreach(json_object_get(res, "processes"), i, x)
	{
		if (!i) /* the first's are above */
			continue;
		size_t k;
		json_t *f;
		json_array_foreach(json_object_get(x, "fds_lost"), k, f)
		    printf("  descriptor %lld (%s) of process %lld was closed since the mark and "
			   "stays closed: %s\n",
			   jint(f, "fd"), jstr(f, "kind"), jint(x, "pid"), jstr(f, "why"));
	}
	render_until(json_object_get(res, "until"));
	if (json_is_true(json_object_get(res, "held")) && !json_object_get(res, "until"))
		printf(
		    "  held stopped at the mark: `memvisor ctl rollback` lets it run from there, "
		    "`memvisor ctl unmark` too and drops the mark\n");
	else if (json_is_true(json_object_get(res, "held")))
		printf("  held stopped: `memvisor ctl rollback` puts it back again, `memvisor ctl "
		       "unmark` lets it run\n");
}

void ctl_show_unmarked(json_t *r, const struct ctl_show_opts *o)
{
	printf("mark %s of process %lld dropped after %lld %s\n", jstr(r, "name"), jint(r, "pid"),
	       jint(r, "rollbacks"), mv_plural(jint(r, "rollbacks"), "rollback", "rollbacks"));
}

/* ---- policy ----------------------------------------------------------- */

static const char *yes_no(json_t *o, const char *key)
{
	return json_is_true(json_object_get(o, key)) ? "yes" : "no";
}

/* A JSON value as a rule's condition shows it: arrays joined with ",". */
static void print_value(json_t *v)
{
	size_t i;
	json_t *x;
	if (json_is_array(v)) {
		json_array_foreach(v, i, x)
		{
			printf("%s", i ? "," : "");
			print_value(x);
		}
	} else if (json_is_string(v)) {
		printf("%s", json_string_value(v));
	} else {
		char *s = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
		printf("%s", s ? s : "?");
		free(s);
	}
}

/* An action and its errno: "allow", "deny EPERM". */
static const char *action(json_t *o, char *buf, size_t len)
{
	bool err = json_is_string(json_object_get(o, "errno"));
	snprintf(buf, len, "%s%s%s", jstr(o, "action"), err ? " " : "",
		 err ? jstr(o, "errno") : "");
	return buf;
}

static void render_rules(json_t *rules)
{
	size_t i;
	json_t *r;
	json_array_foreach(rules, i, r)
	{
		char act[48];
		bool named = json_is_string(json_object_get(r, "name"));
		printf("  %-18s %-14s ", named ? jstr(r, "name") : "(unnamed)",
		       action(r, act, sizeof(act)));
		print_value(json_object_get(r, "syscalls"));
		const char *k;
		json_t *v;
		json_object_foreach(r, k, v)
		{
			bool shown = !strcmp(k, "name") || !strcmp(k, "syscalls") ||
				     !strcmp(k, "action") || !strcmp(k, "errno");
			if (shown || json_is_null(v) || (json_is_array(v) && !json_array_size(v)))
				continue;
			printf(" %s=", k);
			print_value(v);
		}
		printf("\n");
	}
}

static void render_limits(json_t *limits)
{
	const char *k;
	json_t *v;
	bool any = false;
	printf("limits:      ");
	json_object_foreach(limits, k, v)
	{
		char b[32];
		if (!json_is_integer(v))
			continue;
		if (strcmp(k, "max_regions") == 0) /* a count; the others are bytes */
			snprintf(b, sizeof(b), "%lld", (long long)json_integer_value(v));
		else
			hsize(v, b, sizeof(b));
		printf("%s%s %s", any ? ", " : "", k, b);
		any = true;
	}
	printf("%s\n", any ? "" : "none");
}

void ctl_show_policy(json_t *r, const struct ctl_show_opts *o)
{
	json_t *p = json_object_get(r, "policy"), *l = json_object_get(r, "launch");
	json_t *e = json_object_get(r, "enforcement");
	char when[32] = "?";
	time_t secs = (time_t)(jint(r, "loaded_ns") / 1000000000);
	struct tm tm;
	if (localtime_r(&secs, &tm))
		strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm);
	printf("policy:      %s (generation %lld, active since %s)\n", jstr(r, "source"),
	       jint(r, "generation"), when);
	if (json_is_string(json_object_get(p, "description")))
		printf("description: %s\n", jstr(p, "description"));
	char act[48];
	printf("default:     %s\n", action(json_object_get(p, "default"), act, sizeof(act)));
	json_t *rules = json_object_get(p, "rules");
	printf("rules:%s\n", json_array_size(rules) ? "" : "       none");
	render_rules(rules);
	printf("wx:          %s", jstr(p, "wx"));
	if (json_array_size(json_object_get(p, "wx_allow"))) {
		printf(", except ");
		print_value(json_object_get(p, "wx_allow"));
	}
	printf("\n");
	render_limits(json_object_get(p, "limits"));
	printf("launch:      notify-all %s, PR_SET_MDWE %s, Landlock on /proc/PID %s, RLIMIT_AS "
	       "guard %s",
	       yes_no(l, "notify_all"), yes_no(l, "mdwe"), yes_no(l, "landlock_proc_pid"),
	       yes_no(l, "rlimit_as_guard"));
	const char *pt = json_string_value(json_object_get(l, "until_point"));
	printf("%s%s\n", pt ? ", until-point " : "", pt ? pt : "");
	printf("enforcement: %lld %s, %lld %s\n", jint(e, "denials"),
	       mv_plural(jint(e, "denials"), "denial", "denials"), jint(e, "kills"),
	       mv_plural(jint(e, "kills"), "kill", "kills"));
}

void ctl_show_policy_set(json_t *r, const struct ctl_show_opts *o)
{
	printf("policy %s is active (generation %lld)\n", jstr(r, "source"), jint(r, "generation"));
}

void ctl_show_job(json_t *r, const struct ctl_show_opts *o)
{
	render_job_line(r, o, false);
	json_t *res = json_object_get(r, "result");
	if (res && strcmp(jstr(r, "kind"), "checkpoint") == 0)
		render_checkpoint_result(res);
	else if (res && strcmp(jstr(r, "kind"), "reload") == 0)
		render_reload_result(res);
	else if (res && strcmp(jstr(r, "kind"), "mark") == 0)
		render_mark_result(res);
	else if (res && strcmp(jstr(r, "kind"), "rollback") == 0)
		render_rollback_result(res);
	else if (res)
		cli_json_print(stdout, res, CLI_JSON_PRETTY);
}

/* Titled as in status ("jobs:"), and saying so when there is none rather
 * than printing nothing. */
void ctl_show_jobs(json_t *r, const struct ctl_show_opts *o)
{
	json_t *jobs = json_object_get(r, "jobs");
	if (o->legend)
		printf("jobs:%s\n",
		       json_array_size(jobs) ? "" : " none (checkpoint and reload start one)");
	render_jobs_list(jobs, o);
}

void ctl_show_raw(json_t *r, const struct ctl_show_opts *o)
{
	cli_json_print(stdout, r, CLI_JSON_PRETTY);
}

void ctl_show_reload_started(json_t *r, const struct ctl_show_opts *o)
{
	printf("reload job %lld started: %s (follow it with: memvisor ctl %sjob %lld --wait)\n",
	       jint(r, "job"), jstr(r, "dir"), o->selector, jint(r, "job"));
}

void ctl_show_unthrottled(json_t *r, const struct ctl_show_opts *o)
{
	printf("job %lld (%s): its rate limit is lifted; it loads as fast as it can\n",
	       jint(r, "id"), jstr(r, "kind"));
}

void ctl_show_checkpoint_started(json_t *r, const struct ctl_show_opts *o)
{
	printf("checkpoint job %lld started: %s (follow it with: memvisor ctl %sjob %lld "
	       "--wait)\n",
	       jint(r, "job"), jstr(r, "dir"), o->selector, jint(r, "job"));
}

void ctl_show_metrics(json_t *r, const struct ctl_show_opts *o)
{
	/* The exposition as it is: what a scraper or a textfile would get. */
	fputs(jstr(r, "text"), stdout);
}

/* The family of flag names a call event's flags argument uses
 * (policy/names.h); the JSON has the flags in hex. */
static enum names_family call_flags_family(json_t *e)
{
	enum mv_sc sc = syscalls_by_name(jstr(e, "syscall"));
	bool i386 = strcmp(jstr(e, "abi"), "i386") == 0;
	return sc == MV_SC_UNKNOWN ? NAMES_NONE
				   : callargs_layout(sc, i386 ? MV_ABI_I386 : MV_ABI_X86_64).family;
}

void ctl_show_event(json_t *e, const struct ctl_show_opts *o)
{
	long long t = jint(e, "time_ns");
	time_t secs = (time_t)(t / 1000000000);
	struct tm tm;
	localtime_r(&secs, &tm);
	printf("%02d:%02d:%02d.%03d ", tm.tm_hour, tm.tm_min, tm.tm_sec,
	       (int)(t % 1000000000 / 1000000));
	const char *kind = jstr(e, "event");
	if (strcmp(kind, "call") == 0) {
		printf("%-6lld %-14s %-6s", jint(e, "pid"), jstr(e, "syscall"), jstr(e, "verdict"));
		enum names_family fam = call_flags_family(e);
		const char *k;
		json_t *v;
		json_object_foreach(json_object_get(e, "args"), k, v)
		{
			char names[256];
			bool flags = !strcmp(k, "flags") || !strcmp(k, "shmflg");
			if (flags && json_is_string(v) && fam != NAMES_NONE)
				printf(" %s=%s", k,
				       names_flags_format(fam,
							  strtoull(json_string_value(v), NULL, 16),
							  names, sizeof(names)));
			else if (json_is_string(v))
				printf(" %s=%s", k, json_string_value(v));
			else
				printf(" %s=%lld", k, (long long)json_integer_value(v));
		}
		if (json_object_get(e, "rule"))
			printf(" rule=%s", jstr(e, "rule"));
	} else if (strcmp(kind, "job") == 0) {
		printf("job    ");
		render_job_line(e, o, true);
		return;
	} else if (strcmp(kind, "dropped") == 0) {
		printf("(%lld %s dropped: this reader fell behind)", jint(e, "count"),
		       mv_plural(jint(e, "count"), "event", "events"));
	} else {
		printf("%-6lld %-14s", jint(e, "pid"), kind);
		ctl_show_cmdline(json_object_get(e, "cmdline"), 80);
		if (json_object_get(e, "status"))
			printf(" (status %lld)", jint(e, "status"));
	}
	printf("\n");
}

void ctl_show_progress(json_t *j, bool tty)
{
	char a[32], b[32];
	double done = (double)jint(j, "done"), total = (double)jint(j, "total");
	double frac = total > 0 ? done / total : 0.0;
	hsize(json_object_get(j, "done"), a, sizeof(a));
	hsize(json_object_get(j, "total"), b, sizeof(b));
	char rate[32];
	rate_text(j, 0, rate, sizeof(rate));
	if (!tty) {
		fprintf(stderr, "job %lld %s %s: %.0f%% %s / %s,%s%s %.1f s\n", jint(j, "id"),
			jstr(j, "kind"), jstr(j, "phase"), frac * 100, a, b, rate,
			rate[0] ? "," : "", jsecs(j, "elapsed_ns"));
		return;
	}
	char bar[31];
	int full = (int)(frac * 30 + 0.5);
	for (int i = 0; i < 30; i++)
		bar[i] = i < full ? '#' : '.';
	bar[30] = '\0';
	char left[32], line[256];
	snprintf(line, sizeof(line), "%s %-9s [%s] %3.0f%% %s / %s%s%s", jstr(j, "kind"),
		 jstr(j, "phase"), bar, frac * 100, a, b, rate, eta(j, left, sizeof(left)));
	/* Short of the last column: a line that reaches it wraps on some
	 * terminals, and the next redraw (\r) would leave it behind. */
	int width = term_width(STDERR_FILENO);
	fputs("\r\033[K", stderr);
	term_put(stderr, line, width > 1 ? width - 1 : width);
}
