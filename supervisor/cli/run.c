/* memvisor run: start the command under the filter and supervise it until
 * it and every descendant are gone. */
#include "supervisor/cli/run.h"
#include "common/compat.h"
#include "common/fdpass.h"
#include "common/log.h"
#include "common/syscalls.h"
#include "common/util.h"
#include "policy/filter.h"
#include "supervisor/cli/ctl_find.h"
#include "supervisor/cli/options.h"
#include "supervisor/ctl/metrics.h"
#include "supervisor/ctl/server.h"
#include "supervisor/host/host.h"
#include "supervisor/supervise/point.h"
#include "supervisor/supervise/enforce.h"
#include "supervisor/supervise/events.h"
#include "supervisor/supervise/lifecycle.h"
#include "supervisor/kernel/procfs.h"
#include "supervisor/kernel/ptrace.h"
#include "supervisor/supervise/reaper.h"
#include "supervisor/rollback/marks.h"
#include "supervisor/cli/runas.h"
#include "supervisor/cli/statsjson.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>

extern char **environ;

/* Signals memvisor passes on to the command (when a process sent them;
 * the terminal already delivers its own to the command's process group). */
static const int forwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH};

/* run's options end at the first operand, the command: what follows is
 * the command's own (`memvisor run ls -l`). */
static const struct cli_arg run_args[] = {
    {.name = "socket",
     .short_name = 's',
     .arg = "PATH",
     .kind = CLI_STRING,
     .key = "socket",
     .help = "control socket (default $XDG_RUNTIME_DIR/memvisor/PID.sock)"},
    {.name = "name",
     .short_name = 'n',
     .arg = "NAME",
     .kind = CLI_STRING,
     .key = "name",
     .help = "name this supervisor for ctl --name: its socket is NAME.sock"},
    {.name = "policy",
     .short_name = 'p',
     .arg = "FILE",
     .kind = CLI_STRING,
     .key = "policy",
     .help = "policy file (docs/policy.md)"},
    {.name = "log",
     .short_name = 'l',
     .arg = "FILE",
     .kind = CLI_STRING,
     .key = "log",
     .help = "log to FILE instead of stderr"},
    {.name = "log-level",
     .short_name = 'L',
     .arg = "LEVEL",
     .kind = CLI_STRING,
     .key = "log_level",
     .help = "error, warn (default), info or debug"},
    {.name = "stats-json",
     .arg = "FILE",
     .kind = CLI_STRING,
     .key = "stats_json",
     .help = "write per-process counters to FILE at exit"},
    {.name = "kill-descendants",
     .short_name = 'k',
     .kind = CLI_FLAG,
     .key = "kill_descendants",
     .help = "when the command exits, end what it left behind"},
    {.name = "kill-grace",
     .arg = "SECONDS",
     .kind = CLI_SECONDS,
     .key = "kill_grace_ms",
     .help = "SIGTERM to SIGKILL delay for --kill-descendants (default 2)"},
    {.name = "user",
     .short_name = 'u',
     .arg = "USER[:GROUP]",
     .kind = CLI_STRING,
     .key = "user",
     .help = "run the command as USER (memvisor keeps its uid; needs root)"},
    {.name = "notify-all",
     .kind = CLI_FLAG,
     .key = "notify_all",
     .help = "notify every memory call (complete statistics; no kernel fast path)"},
    {.name = "until-point",
     .arg = "SYSCALL[:FD]",
     .kind = CLI_STRING,
     .key = "until_point",
     .help = "notify SYSCALL (with first argument FD), exit and exit_group too, so that "
	     "`rollback --until SYSCALL:FD` runs the program without tracing its calls"},
    {.name = "metrics-file",
     .arg = "FILE",
     .kind = CLI_STRING,
     .key = "metrics_file",
     .help = "keep Prometheus metrics in FILE, rewritten every few seconds and at exit"},
    {.name = "metrics-interval",
     .arg = "SECONDS",
     .kind = CLI_STRING,
     .key = "metrics_interval",
     .help = "how often --metrics-file is rewritten (default 5)"},
    {.name = "help", .short_name = 'h', .kind = CLI_HELP, .help = "show this help"},
};

#define RUN_SYNOPSIS "Usage: memvisor run [OPTION]... [--] COMMAND [ARG]..."

static void run_usage(FILE *f)
{
	fprintf(f, RUN_SYNOPSIS "\nRun COMMAND with its memory system calls supervised.\n\n");
	cli_print_args(f, run_args, ARRAY_SIZE(run_args));
	fprintf(f, "\nExit status: the command's; 128+N if it was killed by signal N;\n"
		   "125 if memvisor fails (a usage error too, as for env(1)); 126 if COMMAND\n"
		   "cannot run; 127 if it is not found.\n");
}

/* A string member of the parsed options, kept for the run's life. */
static const char *opt_string(json_t *o, const char *key)
{
	const char *s = cli_string(o, key);
	return s ? xstrdup(s) : NULL;
}

/* --name: a valid name (ctl_find.h), and no --socket beside it, which
 * would put the socket where ctl --name does not look. */
static int check_name(json_t *v)
{
	const char *name = cli_string(v, "name");
	char why[128];
	if (!name)
		return 0;
	if (cli_string(v, "socket")) {
		fprintf(stderr, "memvisor run: --name and --socket: choose one (--name puts the "
				"socket in the runtime directory as NAME.sock)\n");
		return -EINVAL;
	}
	if (ctl_name_check(name, why, sizeof(why)) < 0) {
		fprintf(stderr, "memvisor run: --name: '%s' is not a name: %s\n", name, why);
		return -EINVAL;
	}
	return 0;
}

static int check_metrics(json_t *v, struct mv_opts *o)
{
	return cli_metrics_interval(v, "memvisor run", &o->metrics_interval_ms);
}

/* Read run's words into o. 0; CLI_HELP_ASKED after printing the help;
 * -EINVAL after saying what is wrong. */
static int parse_run_opts(int argc, char **argv, struct mv_opts *o)
{
	_cleanup_json_ json_t *v = json_object();
	struct cli_table t = {run_args, ARRAY_SIZE(run_args), v};
	int first;
	int rc = cli_parse("memvisor run", &t, 1, argc, argv, &first);
	if (rc == CLI_HELP_ASKED) {
		run_usage(stdout);
		return rc;
	}
	if (rc == 0 && first >= argc) {
		fprintf(stderr, "memvisor run: no command given\n");
		rc = -EINVAL;
	}
	const char *level = cli_string(v, "log_level");
	o->log_level = MV_LOG_WARN;
	if (rc == 0 && level && log_parse_level(level, &o->log_level) < 0) {
		fprintf(stderr,
			"memvisor run: --log-level: '%s' is not one of error, warn, info, debug\n",
			level);
		rc = -EINVAL;
	}
	if (rc == 0)
		rc = check_name(v);
	if (rc == 0)
		rc = check_metrics(v, o);
	if (rc < 0) {
		fprintf(stderr, RUN_SYNOPSIS " (see memvisor run --help)\n");
		return rc;
	}
	json_t *grace = json_object_get(v, "kill_grace_ms");
	o->kill_grace_ms = grace ? (int)json_integer_value(grace) : 2000;
	o->socket_path = opt_string(v, "socket");
	o->name = opt_string(v, "name");
	o->policy_path = opt_string(v, "policy");
	o->log_path = opt_string(v, "log");
	o->stats_json = opt_string(v, "stats_json");
	o->metrics_file = opt_string(v, "metrics_file");
	o->user = opt_string(v, "user");
	o->kill_descendants = cli_flag(v, "kill_descendants");
	o->notify_all = cli_flag(v, "notify_all");
	o->until_point = opt_string(v, "until_point");
	o->argc = argc - first;
	o->argv = argv + first;
	return 0;
}

/* ---- start-up ------------------------------------------------------- */

/* Record the dispositions and mask memvisor inherited, for the launcher to
 * restore, then block what the supervisor reads from its signalfd. */
static int prepare_signals(struct launch_spec *spec, sigset_t *blocked)
{
	if (sigprocmask(SIG_SETMASK, NULL, &spec->mask) < 0)
		return -errno;
	for (int sig = 1; sig < _NSIG; sig++) {
		struct sigaction sa;
		if (sigaction(sig, NULL, &sa) == 0 && sa.sa_handler == SIG_IGN)
			spec->ignored[sig] = 1;
	}
	sigemptyset(blocked);
	for (size_t i = 0; i < ARRAY_SIZE(forwarded); i++)
		sigaddset(blocked, forwarded[i]);
	sigaddset(blocked, SIGCHLD);
	if (sigprocmask(SIG_BLOCK, blocked, NULL) < 0)
		return -errno;
	/* Control clients may vanish mid-write. */
	signal(SIGPIPE, SIG_IGN);
	return 0;
}

static int fork_reaper(struct mv *mv, struct launch_spec *spec, int child_sock)
{
	int to_reaper[2], from_reaper[2];
	/* Datagrams with SCM_RIGHTS: the reaper also holds the userfaultfds
	 * of evicted memory (reaper_hold_fd). */
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, to_reaper) < 0)
		return -errno;
	if (pipe2(from_reaper, O_CLOEXEC) < 0) {
		close(to_reaper[0]);
		close(to_reaper[1]);
		return -errno;
	}
	spec->sock = child_sock;
	pid_t pid = fork();
	if (pid < 0) {
		int err = errno;
		close(to_reaper[0]);
		close(to_reaper[1]);
		close(from_reaper[0]);
		close(from_reaper[1]);
		return -err;
	}
	if (pid == 0) {
		close(to_reaper[1]);
		close(from_reaper[0]);
		close(mv->launch_sock);
		reaper_main(spec, to_reaper[0], from_reaper[1]);
	}
	close(to_reaper[0]);
	close(from_reaper[1]);
	mv->reaper_pid = pid;
	mv->reaper_wr = to_reaper[1];
	mv->reaper_rd = from_reaper[0];
	return 0;
}

static const char *stage_name(int stage)
{
	switch (stage) {
	case LAUNCH_PDEATHSIG:
		return "set the parent-death signal";
	case LAUNCH_PARENT_GONE:
		return "start (memvisor's reaper died)";
	case LAUNCH_SIGNALS:
		return "restore signal dispositions";
	case LAUNCH_NO_NEW_PRIVS:
		return "set no_new_privs";
	case LAUNCH_MDWE:
		return "set memory-deny-write-execute";
	case LAUNCH_SECCOMP:
		return "load the seccomp filter";
	case LAUNCH_HANDOVER:
		return "hand the seccomp listener to memvisor";
	case LAUNCH_RLIMIT:
		return "set RLIMIT_AS for max_mapped";
	case LAUNCH_PERSONALITY:
		return "clear READ_IMPLIES_EXEC";
	case LAUNCH_LANDLOCK:
		return "restrict /proc/PID writes with Landlock";
	case LAUNCH_USER:
		return "switch to the --user identity";
	default:
		return "start";
	}
}

/* Wait for the launcher's first message: the listener fd, or why it failed. */
static int receive_listener(struct mv *mv)
{
	struct launch_msg m;
	_cleanup_close_ int fd = -1;
	ssize_t n = fd_recv(mv->launch_sock, &m, sizeof(m), &fd, 0);
	if (n < 0)
		return (int)n;
	if (n != (ssize_t)sizeof(m))
		return -EPIPE; /* the launcher died before it could say anything */
	if (m.stage != LAUNCH_OK) {
		mv->launch_stage = m.stage;
		mv->launch_err = m.err;
		return -m.err;
	}
	if (fd < 0)
		return -EPROTO;
	mv->feat.wait_killable_recv =
	    (m.filter_flags & SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV) != 0;
	return host_mv_listen(mv, mv_steal_fd(fd));
}

static void raise_fd_limit(void)
{
	/* One pidfd and one /proc fd per process, plus clients: the soft
	 * limit of 1024 is too low for a fork storm. The command keeps the
	 * limits it was given: the launcher was forked before this. */
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

static int start_command(struct mv *mv)
{
	struct sock_fprog prog;
	int rc = enforce_filter(mv, &prog);
	if (rc < 0) {
		fprintf(stderr, "memvisor: cannot build the seccomp filter: %s\n", strerror(-rc));
		return rc;
	}
	struct launch_spec *spec = xcalloc(1, sizeof(*spec));
	spec->prog = prog;
	spec->filter_flags =
	    SECCOMP_FILTER_FLAG_NEW_LISTENER | SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV;
	spec->fallback_flags = SECCOMP_FILTER_FLAG_NEW_LISTENER;
	spec->argv = mv->opts.argv;
	spec->argc = mv->opts.argc;
	spec->envp = environ;
	spec->candidates = launch_candidates(mv->opts.argv[0], getenv("PATH"));
	if ((rc = enforce_launch_spec(mv, spec)) < 0)
		return rc;
	struct runas ra = {0};
	if (mv->opts.user) {
		struct mv_err err = {0};
		if ((rc = runas_parse(mv->opts.user, &ra, &err)) < 0) {
			fprintf(stderr, "memvisor: %s\n", err.msg);
			return rc;
		}
		spec->set_ids = true;
		spec->uid = ra.uid;
		spec->gid = ra.gid;
		spec->groups = ra.groups;
		spec->n_groups = ra.n_groups;
	}
	sigset_t blocked;
	if ((rc = prepare_signals(spec, &blocked)) < 0) {
		fprintf(stderr, "memvisor: cannot set up signals: %s\n", strerror(-rc));
		return rc;
	}
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
		rc = -errno;
		fprintf(stderr, "memvisor: socketpair: %s\n", strerror(-rc));
		return rc;
	}
	mv->launch_sock = sv[0];
	if ((rc = fork_reaper(mv, spec, sv[1])) < 0) {
		fprintf(stderr, "memvisor: cannot fork: %s\n", strerror(-rc));
		close(sv[1]);
		return rc;
	}
	close(sv[1]);
	enforce_launch_done(mv, spec);
	runas_free(&ra);
	filter_free(&spec->prog);
	for (char **c = (char **)spec->candidates; *c; c++)
		free(*c);
	free((void *)spec->candidates);
	free(spec);
	raise_fd_limit();

	mv->sigfd = signalfd(-1, &blocked, SFD_CLOEXEC | SFD_NONBLOCK);
	if (mv->sigfd < 0)
		return -errno;
	rc = receive_listener(mv);
	if (rc < 0 && mv->listener >= 0) {
		fprintf(stderr, "memvisor: seccomp listener: %s\n", strerror(-rc));
		return rc;
	}
	if (rc < 0)
		return rc;
	char ack = 1;
	if (send(mv->launch_sock, &ack, 1, MSG_NOSIGNAL) != 1)
		return -errno;
	return 0;
}

/* ---- main loop ------------------------------------------------------ */

/* Is pid one of the supervised processes (a descendant of the reaper)? */
static bool is_supervised(struct mv *mv, pid_t pid)
{
	for (int depth = 0; pid > 1 && depth < 256; depth++) {
		if (pid == mv->reaper_pid)
			return true;
		struct proc_stat st;
		if (procfs_stat(pid, &st) < 0)
			return false;
		pid = st.ppid;
	}
	return false;
}

static void pass_on(struct mv *mv, int sig)
{
	log_info("forwarding signal %d to %d", sig, mv->cmd_pid);
	kill(mv->cmd_pid, sig);
}

static void forward_signal(struct mv *mv, const struct signalfd_siginfo *si)
{
	/* A program a mark holds stopped (mark --hold) runs, to receive a
	 * signal that ends it, whoever sent it (the terminal's goes to it
	 * directly). */
	int sig = (int)si->ssi_signo;
	if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP || sig == SIGQUIT)
		rollback_unhold(mv);
	/* The terminal sends its signals to the whole foreground process
	 * group, the command included: passing them on would deliver them
	 * twice. So would a signal a supervised process sent to its own
	 * process group, which memvisor shares (kill(0, sig)). */
	if (si->ssi_code == SI_KERNEL)
		return;
	if (mv->cmd_exited)
		return;
	if (si->ssi_pid > 0 && is_supervised(mv, (pid_t)si->ssi_pid))
		return;
	/* The signal came before the reaper said which pid the command
	 * has (it runs already, or is about to): it is passed on then,
	 * not lost (a SIGTERM right after start was ignored). */
	if (mv->cmd_pid <= 0) {
		log_info("signal %d came before the command's pid: passed on when known", sig);
		mv->early_signals |= 1ull << sig;
		return;
	}
	pass_on(mv, sig);
}

/* The signals that came before the command's pid, in signal order. */
static void forward_early_signals(struct mv *mv)
{
	for (int sig = 1; sig < 64 && mv->early_signals; sig++) {
		if (!(mv->early_signals & (1ull << sig)))
			continue;
		mv->early_signals &= ~(1ull << sig);
		pass_on(mv, sig);
	}
}

static void on_signal(struct ev_loop *loop, ev_io *w, int revents)
{
	struct mv *mv = w->data;
	struct signalfd_siginfo si;
	while (read(mv->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
		if (si.ssi_signo == SIGCHLD)
			continue; /* the reaper is our only child; its pipe tells */
		forward_signal(mv, &si);
	}
}

static void command_exited(struct mv *mv, int status)
{
	mv->cmd_exited = true;
	mv->cmd_status = status;
	log_info("command %d exited: status %d", mv->cmd_pid, mv_exit_code(status));
	if (mv->opts.kill_descendants)
		reaper_kill_tree(mv->reaper_wr, mv->opts.kill_grace_ms);
}

static void note_exit_status(struct mv *mv, pid_t pid, int status)
{
	pthread_mutex_lock(&mv->lock);
	struct proc *p = proctab_get(&mv->procs, pid);
	if (p) {
		p->wait_status = status;
	} else {
		for (size_t i = mv->procs.n_exited; i-- > 0;) {
			if (mv->procs.exited[i]->pid == pid) {
				mv->procs.exited[i]->wait_status = status;
				break;
			}
		}
	}
	pthread_mutex_unlock(&mv->lock);
}

/* The reaper died with the tree still there: its orphans went to init,
 * out of its reach, and their notified calls would now fail with ENOSYS.
 * End them as the reaper would have. */
static void kill_orphaned_tree(struct mv *mv)
{
	size_t n = host_kill_known(mv);
	log_error("memvisor's reaper process died unexpectedly: killed %zu supervised processes",
		  n);
}

static void on_reaper(struct ev_loop *loop, ev_io *w, int revents)
{
	struct mv *mv = w->data;
	struct reaper_msg m;
	ssize_t n = read(mv->reaper_rd, &m, sizeof(m));
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n != (ssize_t)sizeof(m)) {
		if (!mv->tree_empty)
			kill_orphaned_tree(mv);
		ev_io_stop(loop, w);
		mv->tree_empty = true;
		ev_break(loop, EVBREAK_ALL);
		return;
	}
	switch (m.type) {
	case REAPER_STARTED:
		mv->cmd_pid = m.pid;
		forward_early_signals(mv);
		break;
	case REAPER_FORK_FAILED:
		fprintf(stderr, "memvisor: cannot start the command: %s\n", strerror(m.status));
		mv->launch_stage = LAUNCH_PARENT_GONE;
		mv->launch_err = m.status;
		break;
	case REAPER_EXITED:
		note_exit_status(mv, m.pid, m.status);
		rollback_process_exited(mv, m.pid);
		if (m.pid == mv->cmd_pid)
			command_exited(mv, m.status);
		break;
	case REAPER_EMPTY:
		mv->tree_empty = true;
		ev_break(loop, EVBREAK_ALL);
		break;
	}
}

/* The launcher's socket: EOF when the exec succeeded (close-on-exec), a
 * message when it failed. */
static void on_launch(struct ev_loop *loop, ev_io *w, int revents)
{
	struct mv *mv = w->data;
	struct launch_msg m;
	ssize_t n = recv(mv->launch_sock, &m, sizeof(m), MSG_DONTWAIT);
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n == (ssize_t)sizeof(m) && m.stage != LAUNCH_OK) {
		mv->launch_stage = m.stage;
		mv->launch_err = m.err;
	}
	ev_io_stop(loop, w);
	close(mv->launch_sock);
	mv->launch_sock = -1;
}

static void setup_loop(struct mv *mv)
{
	ev_set_userdata(mv->loop, mv);
	ev_io_init(&mv->sig_io, on_signal, mv->sigfd, EV_READ);
	mv->sig_io.data = mv;
	ev_io_start(mv->loop, &mv->sig_io);
	ev_io_init(&mv->reaper_io, on_reaper, mv->reaper_rd, EV_READ);
	mv->reaper_io.data = mv;
	ev_io_start(mv->loop, &mv->reaper_io);
	ev_io_init(&mv->launch_io, on_launch, mv->launch_sock, EV_READ);
	mv->launch_io.data = mv;
	ev_io_start(mv->loop, &mv->launch_io);
	host_mv_watch(mv);
}

static int final_status(struct mv *mv)
{
	if (mv->launch_stage == LAUNCH_EXEC) {
		fprintf(stderr, "memvisor: %s: %s\n", mv->opts.argv[0], strerror(mv->launch_err));
		return launch_exec_status(mv->launch_err);
	}
	if (mv->launch_stage == LAUNCH_SECCOMP && mv->launch_err == EBUSY) {
		/* seccomp_set_mode_filter() refuses SECCOMP_FILTER_FLAG_NEW_LISTENER
		 * with EBUSY only when has_duplicate_listener() finds a listener
		 * already in the chain: one supervisor per process, and a filter
		 * cannot be removed. */
		fprintf(stderr,
			"memvisor: cannot load the seccomp filter: already under a seccomp "
			"user-notification supervisor; nested supervision is not possible\n");
		return 125;
	}
	if (mv->launch_stage) {
		fprintf(stderr, "memvisor: cannot %s: %s\n", stage_name(mv->launch_stage),
			strerror(mv->launch_err));
		return 125;
	}
	if (!mv->cmd_exited) {
		fprintf(stderr, "memvisor: lost track of the command\n");
		return 125;
	}
	return mv_exit_code(mv->cmd_status);
}

/* What the policy refused, once at the end (each rule's first refusal
 * was a warning when it happened): a program that died of it has said
 * nothing about why. */
static void refused_summary(struct mv *mv)
{
	char line[512];
	if (enforce_refused_summary(mv, line, sizeof(line)))
		log_warn("%s; `memvisor ctl events` or -L info shows each", line);
}

/* An exit before the command starts: free what run_main has set up so
 * far (each piece may still be unset), and return 125. */
static int run_abandon(struct mv *mv)
{
	events_free(mv);
	proctab_free(&mv->procs);
	enforce_free(mv);
	if (mv->exits_epfd >= 0)
		close(mv->exits_epfd);
	free(mv->point);
	free(mv);
	return 125;
}

int run_main(int argc, char **argv)
{
	struct mv *mv = xcalloc(1, sizeof(*mv));
	int rc;
	mv->listener = mv->sigfd = mv->reaper_rd = mv->reaper_wr = mv->launch_sock = -1;
	mv->exits_epfd = -1;
	rc = parse_run_opts(argc, argv, &mv->opts);
	if (rc == CLI_HELP_ASKED) {
		run_abandon(mv);
		return 0;
	}
	if (rc < 0)
		return run_abandon(mv);
	rc = log_open(mv->opts.log_path, mv->opts.log_level);
	if (rc < 0) {
		fprintf(stderr, "memvisor: cannot open log file %s: %s\n", mv->opts.log_path,
			strerror(-rc));
		return run_abandon(mv);
	}
	log_stderr_shared(); /* the command writes its own there */
	/* Every file the run writes is checked before the command starts
	 * (as strace -o opens its file): --log above, --stats-json here. */
	if (mv->opts.stats_json && statsjson_check(mv->opts.stats_json) < 0)
		return run_abandon(mv);
	if ((rc = syscalls_init()) < 0) {
		fprintf(stderr, "memvisor: cannot resolve system call numbers: %s\n",
			strerror(-rc));
		return run_abandon(mv);
	}
	if (mv->opts.until_point) {
		char why[200];
		mv->point = xcalloc(1, sizeof(*mv->point));
		if (point_parse(mv->point, mv->opts.until_point, why, sizeof(why)) < 0) {
			fprintf(stderr, "memvisor run: --until-point: %s\n", why);
			return run_abandon(mv);
		}
	}
	features_probe(&mv->feat);
	if ((rc = host_mv_init(mv, ev_default_loop(EVBACKEND_EPOLL | EVFLAG_NOSIGMASK))) < 0) {
		if (rc != -EINVAL)
			fprintf(stderr, "memvisor: cannot set up: %s\n", strerror(-rc));
		return run_abandon(mv);
	}
	ptrace_quiet_stops();
	if (ctl_server_start(mv) < 0) {
		/* An explicit --socket must work; the default place is a
		 * convenience, and the command can run without it. */
		if (mv->opts.socket_path || mv->opts.name)
			return run_abandon(mv);
		fprintf(stderr, "memvisor: warning: running without a control socket\n");
	}
	/* Like strace -o: a file that cannot be written stops us before the
	 * command runs, not after. */
	if (mv->opts.metrics_file && metrics_file_start(mv) < 0) {
		ctl_server_stop(mv);
		return 125;
	}
	rc = start_command(mv);
	if (rc < 0 && !mv->launch_stage) {
		if (rc == -EPIPE)
			fprintf(stderr, "memvisor: the command's launcher died before starting\n");
		else if (mv->listener < 0)
			fprintf(stderr, "memvisor: cannot receive the seccomp listener: %s\n",
				strerror(-rc));
		metrics_file_stop(mv);
		ctl_server_stop(mv);
		return 125;
	}
	setup_loop(mv);
	if (!mv->launch_stage || mv->launch_stage == LAUNCH_EXEC)
		ev_run(mv->loop, 0);
	host_mv_finish(mv);
	int code = final_status(mv);
	refused_summary(mv);
	metrics_file_stop(mv);
	ctl_server_stop(mv);
	if (mv->opts.stats_json && statsjson_write(mv, mv->opts.stats_json, code) < 0 && code == 0)
		code = 125;
	return code;
}
