/* The launcher: what the command's process runs between fork and exec.
 *
 * Everything here is async-signal-safe and allocation-free: after the
 * filter is loaded, any notified call (even malloc's mmap) would wait for a
 * supervisor that has no listener yet (runc #4328, crun #1002). All memory
 * it needs is prepared by the supervisor before the fork. */
#ifndef MV_LAUNCH_H
#define MV_LAUNCH_H

#include <linux/filter.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/resource.h>
#include <sys/types.h>

/* Stages the launcher reports to the supervisor when it fails. */
enum launch_stage {
	LAUNCH_OK = 0,
	LAUNCH_PDEATHSIG,
	LAUNCH_PARENT_GONE,
	LAUNCH_SIGNALS,
	LAUNCH_NO_NEW_PRIVS,
	LAUNCH_MDWE,
	LAUNCH_SECCOMP,
	LAUNCH_HANDOVER,
	LAUNCH_EXEC,
	LAUNCH_RLIMIT,
	LAUNCH_PERSONALITY,
	LAUNCH_LANDLOCK,
	LAUNCH_USER,
};

/* One message on the launch socket: the first carries the listener fd
 * (SCM_RIGHTS) with stage LAUNCH_OK; a failure carries its stage and errno. */
struct launch_msg {
	int stage;
	int err;
	unsigned long filter_flags; /* with LAUNCH_OK: the flags the filter was loaded with */
};

struct launch_spec {
	struct sock_fprog prog;
	unsigned long filter_flags;   /* SECCOMP_FILTER_FLAG_* to try first */
	unsigned long fallback_flags; /* tried when the kernel refuses filter_flags */
	int sock;		      /* SOCK_SEQPACKET to the supervisor, close-on-exec */
	pid_t parent;		      /* the pid the launcher's parent must have */
	char *const *candidates;      /* paths to try in order (PATH search done) */
	char *const *argv;
	char *const *envp;
	int argc;
	sigset_t mask;		      /* the signal mask memvisor was started with */
	unsigned char ignored[_NSIG]; /* 1: the signal was ignored when memvisor started */
	unsigned long mdwe;	      /* PR_SET_MDWE flags, 0 for none */
	bool no_new_privs;	      /* PR_SET_NO_NEW_PRIVS before the filter */
	/* The policy's kernel-side pieces (supervisor/supervise/enforce.c), applied
	 * after NO_NEW_PRIVS and before the filter: */
	bool set_rlimit_as; /* setrlimit(RLIMIT_AS, &rlimit_as) */
	struct rlimit rlimit_as;
	bool clear_read_implies_exec; /* drop an inherited READ_IMPLIES_EXEC */
	bool landlock;		      /* landlock_restrict_self(landlock_fd) */
	int landlock_fd;
	/* --user: the identity to take once the listener is handed over. */
	bool set_ids;
	uid_t uid;
	gid_t gid;
	const gid_t *groups;
	size_t n_groups;
};

/* Runs in the child: never returns. Exits 125 when the supervision cannot
 * be set up, 126/127 when the command cannot be executed (the reason is
 * sent on spec->sock first). */
_Noreturn void launch_exec(const struct launch_spec *spec);

/* Build the candidate list for cmd the way execvp(3) searches PATH. The
 * result is malloc'd and NULL-terminated. Runs in the supervisor. */
char **launch_candidates(const char *cmd, const char *path_env);

/* Exit status for an exec failure, like env(1): 127 not found, 126 otherwise. */
int launch_exec_status(int err);

#endif
