/* memvisor check: what this kernel and this user let memvisor do, one
 * line per feature with what needs it, as `criu check` does. The probes
 * are the supervisor's own (supervisor/kernel/features.c), the trials
 * among them made in child processes: a filter loaded, a child traced, a
 * child's memory collapsed. Nothing is assumed from the kernel version.
 *
 * Exit status: 0 when `memvisor run` (plain supervision) can work here,
 * 1 when it cannot, 2 usage. */
#include "supervisor/cli/check.h"
#include "supervisor/cli/term.h"
#include "common/util.h"
#include "supervisor/cli/options.h"
#include "supervisor/kernel/features.h"
#include "supervisor/kernel/uffd.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

enum { EXIT_OK = 0, EXIT_MISSING = 1, EXIT_USAGE = 2 };

/* What needs a feature: each mode includes the one before. */
enum mode { MODE_NONE, MODE_RUN, MODE_CHECKPOINT, MODE_EVICT };
static const char *const mode_names[] = {"", "run", "checkpoint", "evict"};

/* A note is written only when there is something to say. */
typedef bool (*have_fn)(const struct features *f, char *note, size_t n);

struct check_row {
	const char *key;       /* the member in --json */
	const char *what;      /* the feature as people name it, and since when */
	const char *needed_by; /* what uses it, and what is lost without it */
	enum mode mode;	       /* the first mode that cannot work without it */
	have_fn have;
};

static bool say(char *note, size_t n, bool ok, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static bool say(char *note, size_t n, bool ok, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(note, n, fmt, ap);
	va_end(ap);
	return ok;
}

static bool have_listener(const struct features *f, char *note, size_t n)
{
	if (f->listener_err == EBUSY)
		return say(note, n, false,
			   "this process is already under a seccomp user-notification "
			   "supervisor; a task can have only one, so nesting is not possible");
	if (!f->seccomp_user_notif)
		return say(note, n, false, "SECCOMP_RET_USER_NOTIF is not an available action");
	if (f->listener_err)
		return say(note, n, false, "loading a filter with a listener: %s",
			   strerror(f->listener_err));
	return true;
}

static bool have_killable(const struct features *f, char *note, size_t n)
{
	return f->wait_killable_recv;
}

static bool have_sync(const struct features *f, char *note, size_t n)
{
	return f->sync_wake_up;
}

static bool have_procfs(const struct features *f, char *note, size_t n)
{
	return f->procfs || say(note, n, false, "/proc/self/maps cannot be read");
}

static bool have_pidfd(const struct features *f, char *note, size_t n)
{
	return f->pidfd;
}

static bool have_process_vm(const struct features *f, char *note, size_t n)
{
	return f->process_vm;
}

static bool have_pidfd_info(const struct features *f, char *note, size_t n)
{
	return f->pidfd_info;
}

static bool have_pidfd_info_exit(const struct features *f, char *note, size_t n)
{
	return f->pidfd_info_exit;
}

static bool have_procmap_query(const struct features *f, char *note, size_t n)
{
	return f->procmap_query || say(note, n, false, "/proc/PID/maps is read as text instead");
}

static bool have_pagemap_scan(const struct features *f, char *note, size_t n)
{
	return f->pagemap_scan ||
	       say(note, n, false, "/proc/PID/pagemap and smaps are read instead (slower)");
}

static bool have_peer_pidfd(const struct features *f, char *note, size_t n)
{
	return f->peer_pidfd;
}

static bool have_cap_sys_admin(const struct features *f, char *note, size_t n)
{
	return f->cap_sys_admin ||
	       say(note, n, false, "no_new_privs is set: such programs run unprivileged");
}

static bool have_setuid(const struct features *f, char *note, size_t n)
{
	return f->cap_setuid;
}

static bool have_mdwe(const struct features *f, char *note, size_t n)
{
	return f->mdwe || say(note, n, false, "memvisor's own checks only");
}

static bool have_landlock(const struct features *f, char *note, size_t n)
{
	if (f->landlock_abi >= 2)
		return say(note, n, true, "ABI %d", f->landlock_abi);
	if (f->landlock_abi)
		return say(note, n, false, "ABI %d; 2 is needed", f->landlock_abi);
	return say(note, n, false, "no Landlock (or not enabled by the lsm= boot list)");
}

static bool have_ptrace(const struct features *f, char *note, size_t n)
{
	char scope[64] = "no Yama";
	if (f->ptrace_scope >= 0)
		snprintf(scope, sizeof(scope), "kernel.yama.ptrace_scope=%d", f->ptrace_scope);
	if (!f->ptrace_err)
		return say(note, n, true, "%s", scope);
	return say(note, n, false, "%s: PTRACE_SEIZE of a child: %s%s", scope,
		   strerror(f->ptrace_err),
		   f->ptrace_scope == 2 ? " (scope 2 needs CAP_SYS_PTRACE)" : "");
}

static bool have_pidfd_getfd(const struct features *f, char *note, size_t n)
{
	return f->pidfd_getfd;
}

static bool have_uffd(const struct features *f, char *note, size_t n)
{
	if (f->uffd_syscall)
		return say(note, n, true, "%s",
			   f->cap_sys_ptrace ? "with CAP_SYS_PTRACE"
					     : "vm.unprivileged_userfaultfd=1");
	if (f->uffd_err == ENOSYS)
		return say(note, n, false, "no userfaultfd in this kernel");
	if (f->uffd_err == EPERM)
		return say(note, n, false,
			   "refused: no CAP_SYS_PTRACE and vm.unprivileged_userfaultfd=%d%s",
			   f->unprivileged_uffd,
			   f->uffd_user_mode ? " (a user-mode-only one would not serve the "
					       "kernel's own accesses)"
					     : "");
	return say(note, n, false, "%s", strerror(f->uffd_err));
}

static bool have_unpriv_uffd(const struct features *f, char *note, size_t n)
{
	if (f->unprivileged_uffd < 0)
		return say(note, n, false, "no such setting (no userfaultfd in this kernel)");
	return say(note, n, f->unprivileged_uffd == 1, "vm.unprivileged_userfaultfd=%d",
		   f->unprivileged_uffd);
}

static bool have_uffd_events(const struct features *f, char *note, size_t n)
{
	switch (f->uffd_events_err) {
	case 0:
		return true;
	case EPERM:
		return say(note, n, false, "UFFD_FEATURE_EVENT_FORK needs CAP_SYS_PTRACE");
	case EOPNOTSUPP:
		return say(note, n, false, "the kernel lacks some of them");
	default:
		return say(note, n, false, "no userfaultfd to ask: %s",
			   strerror(f->uffd_events_err));
	}
}

static bool uffd_bit(const struct features *f, char *note, size_t n, uint64_t bit)
{
	if (!f->uffd_features)
		return say(note, n, false, "unknown: no userfaultfd could be made");
	return (f->uffd_features & bit) != 0;
}

static bool have_poison(const struct features *f, char *note, size_t n)
{
	return uffd_bit(f, note, n, UFFD_FEATURE_POISON) ||
	       (f->uffd_features && say(note, n, false, "such a process is killed instead"));
}

static bool have_wp(const struct features *f, char *note, size_t n)
{
	return uffd_bit(f, note, n, UFFD_FEATURE_PAGEFAULT_FLAG_WP);
}

static bool have_wp_async(const struct features *f, char *note, size_t n)
{
	return uffd_bit(f, note, n, UFFD_FEATURE_WP_ASYNC);
}

static bool have_missing_shmem(const struct features *f, char *note, size_t n)
{
	return uffd_bit(f, note, n, UFFD_FEATURE_MISSING_SHMEM);
}

static bool have_uffd_sysv(const struct features *f, char *note, size_t n)
{
	if (!f->uffd_sysv_err)
		return true;
	return say(note, n, false, "UFFDIO_REGISTER of a System V segment: %s%s",
		   strerror(f->uffd_sysv_err),
		   f->uffd_sysv_err == EINVAL ? " (the kernel takes only anonymous, shmem and "
						"hugetlb mappings)"
					      : "");
}

static bool have_collapse(const struct features *f, char *note, size_t n)
{
	int err = f->collapse_err;
	if (!err || err == EAGAIN)
		return true;
	if (err == EPERM && (!f->collapse_self_err || f->collapse_self_err == EAGAIN))
		return say(note, n, false,
			   "another process's memory needs CAP_SYS_NICE (the kernel has it: "
			   "our own collapses)");
	if (err == EINVAL)
		return say(note, n, false, "the kernel lacks it, or transparent huge pages");
	return say(note, n, false, "%s", strerror(err));
}

static const struct check_row rows[] = {
    {"seccomp_user_notif", "seccomp user notification (5.0)", "run: every supervised call",
     MODE_RUN, have_listener},
    {"procfs", "/proc", "run: processes, threads, queries", MODE_RUN, have_procfs},
    {"pidfd", "pidfd_open (5.3)", "run: process exits, signals by pidfd", MODE_RUN, have_pidfd},
    {"process_vm_readv", "process_vm_readv (3.2)",
     "evict: finding a system call instruction to inject calls with", MODE_EVICT, have_process_vm},
    {"wait_killable_recv", "SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV (5.19)",
     "run: a signal does not abort a call being decided", MODE_NONE, have_killable},
    {"sync_wake_up", "SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP (6.6)",
     "run: a notified call costs about half", MODE_NONE, have_sync},
    {"pidfd_info", "PIDFD_GET_INFO (6.13)", "run: a new process's parent without /proc", MODE_NONE,
     have_pidfd_info},
    {"pidfd_info_exit", "PIDFD_INFO_EXIT (6.15)",
     "run: the exit status of every process (--stats-json, exit events)", MODE_NONE,
     have_pidfd_info_exit},
    {"procmap_query", "PROCMAP_QUERY (6.11)", "regions --source procmap_query, checkpoint",
     MODE_NONE, have_procmap_query},
    {"pagemap_scan", "PAGEMAP_SCAN (6.7)", "regions, checkpoint: resident pages", MODE_NONE,
     have_pagemap_scan},
    {"peer_pidfd", "SO_PEERPIDFD (6.5)", "control socket: the peer pinned at accept", MODE_NONE,
     have_peer_pidfd},
    {"cap_sys_admin", "CAP_SYS_ADMIN", "run: setuid programs keep their privilege", MODE_NONE,
     have_cap_sys_admin},
    {"cap_setuid", "CAP_SETUID and CAP_SETGID", "run --user", MODE_NONE, have_setuid},
    {"mdwe", "PR_SET_MDWE (6.3)", "policy \"wx\": \"deny\" enforced by the kernel", MODE_NONE,
     have_mdwe},
    {"landlock", "Landlock (5.19, ABI 2)", "policy \"wx\": \"deny\": /proc/PID/mem writes",
     MODE_NONE, have_landlock},
    {"ptrace", "ptrace of the program", "checkpoint, evict: stopping the threads", MODE_CHECKPOINT,
     have_ptrace},
    {"pidfd_getfd", "pidfd_getfd (5.6)", "evict: taking the program's userfaultfd", MODE_EVICT,
     have_pidfd_getfd},
    {"userfaultfd", "userfaultfd(2) for this user",
     "evict: the program makes its userfaultfd (as this user)", MODE_EVICT, have_uffd},
    {"unprivileged_userfaultfd", "unprivileged userfaultfd",
     "evict of a program without CAP_SYS_PTRACE (run --user)", MODE_NONE, have_unpriv_uffd},
    {"userfaultfd_events", "userfaultfd events fork, remap, remove, unmap",
     "evict: following fork, mremap, munmap, madvise", MODE_EVICT, have_uffd_events},
    {"uffdio_poison", "UFFDIO_POISON (6.6)",
     "evict: a page the image cannot give back raises SIGBUS", MODE_NONE, have_poison},
    {"madv_collapse", "MADV_COLLAPSE of the program's memory (6.1)",
     "reload: huge pages restored after a reload", MODE_NONE, have_collapse},
    {"uffd_wp", "userfaultfd write-protect (uffd-wp, 5.7)",
     "checkpoint --live: memory copied while the program runs", MODE_NONE, have_wp},
    {"uffd_wp_async", "UFFD_FEATURE_WP_ASYNC (6.7)",
     "mark, rollback: writes tracked in the kernel (without it: a fault a first write)", MODE_NONE,
     have_wp_async},
    {"uffd_missing_shmem", "userfaultfd missing faults on shmem (4.11)",
     "evict: shared memory (without it: left resident)", MODE_NONE, have_missing_shmem},
    {"uffd_sysv_shm", "userfaultfd on System V shared memory",
     "evict: System V segments (without it: left resident)", MODE_NONE, have_uffd_sysv},
};

struct result {
	bool have;
	char note[256];
};

/* Evaluate every row; modes[m]: the first row missing for mode m, or -1. */
static void evaluate(const struct features *f, struct result *res, int modes[4])
{
	for (int m = 0; m < 4; m++)
		modes[m] = -1;
	for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
		res[i].note[0] = '\0';
		res[i].have = rows[i].have(f, res[i].note, sizeof(res[i].note));
		for (int m = rows[i].mode; m && m <= MODE_EVICT && !res[i].have; m++)
			if (modes[m] < 0)
				modes[m] = (int)i;
	}
}

static void print_text(const struct features *f, const struct result *res, const int modes[4])
{
	printf("memvisor %s, Linux %s, uid %u\n\n", MV_VERSION, f->kernel, (unsigned)geteuid());
	printf("%-46s %-4s %s\n", "FEATURE", "HAVE", "NEEDED BY");
	for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
		printf("%-46s %-4s %s%s\n", rows[i].what, res[i].have ? "yes" : "no",
		       rows[i].needed_by, rows[i].mode == MODE_RUN ? " (required)" : "");
		if (res[i].note[0])
			printf("    %s\n", res[i].note);
	}
	printf("\n");
	for (int m = MODE_RUN; m <= MODE_EVICT; m++) {
		if (modes[m] < 0)
			printf("%-11s yes\n", mode_names[m]);
		else
			printf("%-11s no: %s\n", mode_names[m], rows[modes[m]].what);
	}
}

static void append_name(const char *name, void *arg)
{
	json_array_append_new(arg, json_string(name));
}

static void print_json(const struct features *f, const struct result *res, const int modes[4],
		       enum cli_json json)
{
	json_t *feats = json_object(), *mode = json_object(), *names = json_array();
	for (size_t i = 0; i < ARRAY_SIZE(rows); i++)
		json_object_set_new(
		    feats, rows[i].key,
		    json_pack("{s:b, s:s, s:s, s:s?, s:o}", "have", res[i].have, "what",
			      rows[i].what, "needed_by", rows[i].needed_by, "required_by",
			      rows[i].mode ? mode_names[rows[i].mode] : NULL, "note",
			      res[i].note[0] ? json_string(res[i].note) : json_null()));
	for (int m = MODE_RUN; m <= MODE_EVICT; m++)
		json_object_set_new(mode, mode_names[m], json_boolean(modes[m] < 0));
	features_uffd_names(f->uffd_features, append_name, names);
	json_t *o = json_pack("{s:s, s:s, s:i, s:b, s:o, s:o, s:o}", "memvisor", MV_VERSION,
			      "kernel", f->kernel, "uid", (int)geteuid(), "ok", modes[MODE_RUN] < 0,
			      "modes", mode, "features", feats, "userfaultfd_features", names);
	char *s = json_dumps(o, JSON_SORT_KEYS |
				    (json == CLI_JSON_PRETTY ? JSON_INDENT(2) : JSON_COMPACT));
	printf("%s\n", s);
	free(s);
	json_decref(o);
}

static const struct cli_arg check_args[] = {
    {.name = "json",
     .short_name = 'j',
     .arg = "[=MODE]",
     .kind = CLI_JSON_MODE,
     .key = "json",
     .help = "print the result as JSON: short (one line, the default) or pretty"},
    {.name = "full",
     .kind = CLI_FLAG,
     .key = "full",
     .help = "lines whole on a terminal too (else cut to its width)"},
    {.name = "help", .short_name = 'h', .kind = CLI_HELP, .help = "show this help"},
};

static void usage(FILE *f)
{
	fprintf(f, "Usage: memvisor check [OPTION]...\n"
		   "Say what this kernel and this user let memvisor do: each feature, whether\n"
		   "it is here, and what needs it.\n\n");
	cli_print_args(f, check_args, ARRAY_SIZE(check_args));
	fprintf(f, "\nExit status: 0 if memvisor run can supervise programs here, 1 if not,\n"
		   "2 for usage errors.\n");
}

int check_main(int argc, char **argv)
{
	_cleanup_json_ json_t *o = json_object();
	struct cli_table t = {check_args, ARRAY_SIZE(check_args), o};
	int rc = cli_parse("memvisor check", &t, 1, argc, argv, NULL);
	if (rc == CLI_HELP_ASKED) {
		usage(stdout);
		return EXIT_OK;
	}
	if (rc < 0) {
		fprintf(stderr,
			"Usage: memvisor check [--json[=MODE]] (see memvisor check --help)\n");
		return EXIT_USAGE;
	}
	struct features f;
	struct result res[ARRAY_SIZE(rows)];
	int modes[4];
	fflush(stdout); /* the trials fork */
	features_probe_trials(&f);
	evaluate(&f, res, modes);
	enum cli_json json = cli_json_mode(o, "json", CLI_JSON_SHORT);
	if (json != CLI_JSON_OFF)
		print_json(&f, res, modes, json);
	else {
		struct term_cut cut;
		term_cut_begin(&cut, cli_flag(o, "full") ? 0 : term_width(STDOUT_FILENO));
		print_text(&f, res, modes);
		term_cut_end(&cut);
	}
	return modes[MODE_RUN] < 0 ? EXIT_OK : EXIT_MISSING;
}
