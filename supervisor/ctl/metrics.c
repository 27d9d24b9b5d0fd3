/* Metrics in the Prometheus text exposition format (metrics.h).
 *
 * What is read, and where the same numbers come from elsewhere: the
 * call counters and service times are the totals of `stats` (every
 * process of the run, exited and folded ones included: render_procs'
 * proctab_totals), processes and bytes are `status`'s (statm of each
 * running process), jobs are those `jobs` lists plus the forgotten ones,
 * evicted memory is evict_totals (spaces that are done keep counting).
 * Counters only grow over a run, so rate() works across scrapes.
 *
 * Histograms: the latency histograms (common/hist.h) have 16 buckets per
 * power of two; a power of two is a bucket bound, so the count of
 * samples below 2^k ns is exact. Prometheus buckets count samples <= le,
 * so le is (2^k - 1) ns, written in seconds: 0.000000255 ... 17.179869183. */
#include "supervisor/ctl/metrics.h"
#include "common/log.h"
#include "common/util.h"
#include "state/promtext.h"
#include "supervisor/reload/evict.h"
#include "supervisor/supervise/enforce.h"
#include "supervisor/supervise/jobs.h"
#include "supervisor/supervise/lifecycle.h"
#include "supervisor/supervise/model.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

/* The histogram bounds: 2^8 - 1 ns (0.26 us) to 2^34 - 1 ns (17 s). */
#define LE_FIRST_BIT 8
#define LE_LAST_BIT  34

/* ---- the text format ---------------------------------------------------- */

/* A label value with \, " and newline escaped, as the format asks. */
static void put_label_value(FILE *f, const char *v)
{
	for (; *v; v++) {
		if (*v == '\\' || *v == '"')
			fputc('\\', f);
		if (*v == '\n')
			fputs("\\n", f);
		else
			fputc(*v, f);
	}
}

static void family(FILE *f, const char *name, const char *type, const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* Nanoseconds as seconds, exactly (9 decimals, trailing zeros cut). */
static void put_seconds(FILE *f, uint64_t ns)
{
	char buf[32];
	int n = snprintf(buf, sizeof(buf), "%" PRIu64 ".%09" PRIu64, ns / 1000000000u,
			 ns % 1000000000u);
	while (n > 2 && buf[n - 1] == '0' && buf[n - 2] != '.')
		buf[--n] = '\0';
	fputs(buf, f);
}

static void hist_family(FILE *f, const char *name, const char *help, const struct hist *h)
{
	family(f, name, "histogram", help);
	for (unsigned k = LE_FIRST_BIT; k <= LE_LAST_BIT; k++) {
		fprintf(f, "%s_bucket{le=\"", name);
		put_seconds(f, (1ull << k) - 1);
		fprintf(f, "\"} %" PRIu64 "\n", hist_count_below(h, 1ull << k));
	}
	fprintf(f, "%s_bucket{le=\"+Inf\"} %" PRIu64 "\n%s_sum ", name, h->count, name);
	put_seconds(f, h->sum);
	fprintf(f, "\n%s_count %" PRIu64 "\n", name, h->count);
}

static void one(FILE *f, const char *name, const char *type, const char *help, uint64_t v)
{
	family(f, name, type, help);
	fprintf(f, "%s %" PRIu64 "\n", name, v);
}

/* ---- what is read ------------------------------------------------------- */

struct snapshot {
	struct proc_stats *totals; /* every process of the run */
	uint64_t notifications, seen, running, mapped, committed;
	uint64_t jobs[JOB_KINDS][JOB_STATES];
	struct evict_totals *ev;
};

/* Mapped and committed bytes of the running processes (statm), read
 * without the lock as `status` does. */
static void usage_of_running(struct mv *mv, struct snapshot *s)
{
	pthread_mutex_lock(&mv->lock);
	size_t n = 0, cap = proctab_running(&mv->procs);
	_cleanup_free_ pid_t *pids = xcalloc(cap + 1, sizeof(*pids));
	struct proc *p;
	for (size_t i = 0; (p = proctab_next(&mv->procs, &i)) && n < cap;)
		pids[n++] = p->pid;
	pthread_mutex_unlock(&mv->lock);
	s->running = n;
	for (size_t i = 0; i < n; i++) {
		uint64_t m, r;
		if (model_usage(pids[i], &m, &r) == 0) {
			s->mapped += m;
			s->committed += r;
		}
	}
}

static void take(struct mv *mv, struct snapshot *s)
{
	memset(s, 0, sizeof(*s));
	s->totals = xcalloc(1, sizeof(*s->totals));
	s->ev = xcalloc(1, sizeof(*s->ev));
	lifecycle_scan_tree(mv);
	usage_of_running(mv, s);
	pthread_mutex_lock(&mv->lock);
	proctab_totals(&mv->procs, s->totals);
	s->notifications = mv->notifications;
	s->seen = mv->procs.n_seen;
	jobs_count_locked(mv, s->jobs);
	pthread_mutex_unlock(&mv->lock);
	evict_totals(mv->evict, s->ev);
}

/* ---- the families ------------------------------------------------------- */

/* Which memory calls reach memvisor at all (the rest cannot be counted). */
static void put_notified(FILE *f, struct mv *mv)
{
	static const char *const word[] = {
	    [NEEDS_NEVER] = "never", [NEEDS_SOME] = "some", [NEEDS_ALWAYS] = "always"};
	if (!mv->enforce)
		return;
	family(f, "memvisor_syscall_notified", "gauge",
	       "How the seccomp filter passes each memory call to memvisor: when=\"always\" "
	       "(every call seen and counted), \"some\" (only calls the policy could refuse), "
	       "\"never\" (decided in the kernel, not counted; run --notify-all counts them).");
	for (int sc = 0; sc < MV_SC_COUNT; sc++) {
		enum needs_when when = enforce_notify_when(mv, (enum mv_sc)sc);
		if (when != NEEDS_NA)
			fprintf(f, "memvisor_syscall_notified{syscall=\"%s\",when=\"%s\"} 1\n",
				syscalls_name((enum mv_sc)sc), word[when]);
	}
}

static void put_calls(FILE *f, const struct proc_stats *t)
{
	family(f, "memvisor_calls_total", "counter",
	       "Notified system calls, by system call and verdict (calls the filter decides in "
	       "the kernel are not seen: memvisor_syscall_notified).");
	for (int sc = 0; sc < MV_SC_COUNT; sc++) {
		uint64_t any = 0;
		for (int v = 0; v < MV_V_COUNT; v++)
			any |= t->calls[sc][v];
		for (int v = 0; any && v < MV_V_COUNT; v++)
			fprintf(f,
				"memvisor_calls_total{syscall=\"%s\",verdict=\"%s\"} %" PRIu64 "\n",
				syscalls_name((enum mv_sc)sc), verdict_name((enum mv_verdict)v),
				t->calls[sc][v]);
	}
	family(f, "memvisor_call_bytes_total", "counter",
	       "Bytes asked for by notified calls: mmap and mremap lengths, brk growth.");
	for (int sc = 0; sc < MV_SC_COUNT; sc++)
		if (t->bytes[sc])
			fprintf(f, "memvisor_call_bytes_total{syscall=\"%s\"} %" PRIu64 "\n",
				syscalls_name((enum mv_sc)sc), t->bytes[sc]);
	one(f, "memvisor_calls_gone_total", "counter",
	    "Answers the kernel refused because the calling thread was gone.", t->gone);
	hist_family(f, "memvisor_service_seconds",
		    "Notification service time, from receive to answer.", &t->service);
}

static void put_jobs(FILE *f, uint64_t n[JOB_KINDS][JOB_STATES])
{
	family(f, "memvisor_jobs", "gauge", "Jobs of this run, by kind and state now.");
	for (int k = 0; k < JOB_KINDS; k++)
		for (int st = 0; st < JOB_STATES; st++)
			fprintf(f, "memvisor_jobs{kind=\"%s\",state=\"%s\"} %" PRIu64 "\n",
				job_kind_name((enum job_kind)k), job_state_name((enum job_state)st),
				n[k][st]);
}

static void put_evict(FILE *f, const struct evict_totals *e)
{
	one(f, "memvisor_evicted_spaces", "gauge",
	    "Address spaces with evicted memory not all loaded back.", e->spaces);
	one(f, "memvisor_evicted_owed_bytes", "gauge",
	    "Evicted bytes not loaded back yet (served on demand).", e->owed);
	one(f, "memvisor_evicted_bytes_total", "counter",
	    "Bytes dropped from memory by checkpoint --evict.", e->evicted);
	one(f, "memvisor_loaded_bytes_total", "counter",
	    "Evicted bytes loaded back, by faults and by reload.", e->loaded);
	one(f, "memvisor_evict_faults_total", "counter", "Faults on evicted memory served.",
	    e->faults);
	hist_family(f, "memvisor_evict_fault_seconds",
		    "Time a thread waited on a fault of evicted memory.", &e->lat);
}

static void put_all(FILE *f, struct mv *mv, struct snapshot *s)
{
	family(f, "memvisor_info", "gauge", "The memvisor version and the kernel it runs on.");
	fputs("memvisor_info{version=\"", f);
	put_label_value(f, MV_VERSION);
	fputs("\",kernel=\"", f);
	put_label_value(f, mv->feat.kernel);
	fputs("\"} 1\n", f);
	family(f, "memvisor_start_time_seconds", "gauge",
	       "When this memvisor started, in seconds since the epoch.");
	fputs("memvisor_start_time_seconds ", f);
	put_seconds(f, mv->start_wall_ns);
	fputc('\n', f);
	one(f, "memvisor_notifications_total", "counter", "Seccomp notifications received.",
	    s->notifications);
	put_calls(f, s->totals);
	put_notified(f, mv);
	one(f, "memvisor_processes", "gauge", "Supervised processes running.", s->running);
	one(f, "memvisor_processes_seen_total", "counter", "Supervised processes ever seen.",
	    s->seen);
	one(f, "memvisor_mapped_bytes", "gauge", "Bytes mapped by the running processes (VmSize).",
	    s->mapped);
	one(f, "memvisor_committed_bytes", "gauge",
	    "Bytes resident in the running processes (VmRSS).", s->committed);
	put_jobs(f, s->jobs);
	put_evict(f, s->ev);
}

char *metrics_text(struct mv *mv)
{
	struct snapshot s;
	take(mv, &s);
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	if (!f) {
		free(s.totals);
		free(s.ev);
		return xstrdup("");
	}
	put_all(f, mv, &s);
	fclose(f);
	free(s.totals);
	free(s.ev);
	return text;
}

int ctl_cmd_metrics(struct mv *mv, struct ctl_call *call, json_t *args, json_t **result,
		    struct mv_err *err)
{
	_cleanup_free_ char *text = metrics_text(mv);
	*result = json_pack("{s:s, s:s}", "content_type", METRICS_CONTENT_TYPE, "text", text);
	return 0;
}

/* ---- run --metrics-file ------------------------------------------------- */

struct metrics_file {
	struct mv *mv;
	ev_timer timer;
	int last_err; /* said once until a write works again */
};

int metrics_write_file(const char *path, const char *text)
{
	_cleanup_free_ char *tmp = NULL;
	int fd = mv_create_beside(path, &tmp);
	if (fd < 0)
		return fd;
	int rc = fchmod(fd, 0644) < 0 ? -errno : mv_write_all(fd, text, strlen(text));
	return mv_finish_beside(fd, tmp, path, rc);
}

/* The file's text: every series labelled with the run's name (--name, or
 * memvisor's pid, as its socket is named), so that the files of two runs
 * in one collector directory never hold the same series; and memvisor_up,
 * 0 in the last write, after the command ended. */
static int write_file(struct mv *mv, bool up)
{
	_cleanup_free_ char *text = metrics_text(mv), *label = NULL, *all = NULL;
	char pid[16];
	snprintf(pid, sizeof(pid), "%d", (int)mv->self);
	size_t len = 0;
	promtext_label(&label, &len, "name", mv->opts.name ? mv->opts.name : pid);
	char upf[256];
	snprintf(upf, sizeof(upf),
		 "# HELP memvisor_up 1 while memvisor supervises its command; 0 in the last "
		 "write, after it ended.\n# TYPE memvisor_up gauge\nmemvisor_up %d\n",
		 up ? 1 : 0);
	const char *texts[] = {upf, text}, *labels[] = {label, label};
	all = promtext_merge(texts, labels, 2);
	return metrics_write_file(mv->opts.metrics_file, all);
}

static void on_timer(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct metrics_file *m = w->data;
	int rc = write_file(m->mv, true);
	if (rc < 0 && rc != m->last_err)
		log_warn("cannot write --metrics-file %s: %s", m->mv->opts.metrics_file,
			 strerror(-rc));
	m->last_err = rc;
}

int metrics_file_start(struct mv *mv)
{
	int rc = write_file(mv, true);
	if (rc < 0) {
		fprintf(stderr, "memvisor: cannot write --metrics-file %s: %s\n",
			mv->opts.metrics_file, strerror(-rc));
		return rc;
	}
	struct metrics_file *m = xcalloc(1, sizeof(*m));
	m->mv = mv;
	double every = mv->opts.metrics_interval_ms / 1000.0;
	ev_timer_init(&m->timer, on_timer, every, every);
	m->timer.data = m;
	ev_timer_start(mv->loop, &m->timer);
	mv->metrics = m;
	return 0;
}

void metrics_file_stop(struct mv *mv)
{
	struct metrics_file *m = mv->metrics;
	if (!m)
		return;
	ev_timer_stop(mv->loop, &m->timer);
	int rc = write_file(mv, false);
	if (rc < 0)
		log_warn("cannot write --metrics-file %s at exit: %s", mv->opts.metrics_file,
			 strerror(-rc));
	free(m);
	mv->metrics = NULL;
}
